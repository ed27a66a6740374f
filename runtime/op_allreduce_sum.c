/*
** op_allreduce_sum.c -- allreduce sum: its public entry point and its
** runtime descriptor (op_runtime.h). Roles: input, output (may be the
** same buffer: in place). Groups of one rank are a copy, not a kernel.
*/
#include <stdint.h>
#include <string.h>

#include "op_runtime.h"
#include "shape.h"

enum { ROLE_INPUT, ROLE_OUTPUT };

/* Every rank of a group holds the same shape; its element count is the
** planner's `elems`. */
static int measure_group(collgen_comm_t *c, const collgen__call *call, int base, int size,
                         collgen__group *g) {
  int64_t n = 0;
  int rc = collgen__group_same_shape(c, call, base, size, &n);
  if (rc != COLLGEN_OK) return rc;
  const int64_t bytes = n * collgen__dtype_bytes(call->dtype);
  for (int r = base; r < base + size; ++r) {
    g->bytes[ROLE_INPUT][r] = bytes;
    g->bytes[ROLE_OUTPUT][r] = bytes;
  }
  g->shape.elems = n;
  g->empty = n == 0;
  return COLLGEN_OK;
}

/* In place when any rank's output is its input: the planner then avoids
** algorithms whose peers still read inputs while outputs are written. */
static void finish_group(const collgen__call *call, int base, int size, collgen__group *g) {
  g->shape.inplace = 0;
  for (int r = base; r < base + size; ++r)
    if (call->buffers[ROLE_INPUT][r] == call->buffers[ROLE_OUTPUT][r]) g->shape.inplace = 1;
}

static void fill_rank(const collgen__call *call, const collgen__group *g, int base, int size,
                      int r, collgen__kparams *kp) {
  (void)r;
  for (int k = 0; k < size; ++k) {
    kp->in[k] = call->buffers[ROLE_INPUT][base + k];
    kp->out[k] = (void *)call->buffers[ROLE_OUTPUT][base + k];
  }
  kp->count = (unsigned long long)g->shape.elems;
}

/* ---- One process per GPU (op_runtime.h, stage_in) ----
** Each rank's staging area holds two regions of staging_bytes / 2: IN,
** which peers read (one-shot) or reduce in place (two-shot), and OUT, this
** rank's own output when its buffer cannot take the kernel's stores. A
** registered input (collgen_register_buffer) is read by the peers where it
** is: nothing is copied in. Two-shot still writes its sums into every
** rank's region IN (peers write outputs only there) and copies them back;
** one-shot in place writes through region OUT, since the peers may still
** read the registered input while this rank's sums are ready. */
typedef struct {
  int registered;     /* the peers read the input in its registered buffer */
  int input;          /* the input goes through region IN */
  int output;         /* the output comes back from staging */
  size_t out_offset;  /* ... at this offset of the rank's staging area */
} staging_use;

static int aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

static int staging_for(collgen_comm_t *c, const collgen__call *call, const collgen__group *g,
                       const char *algo, int base, int size, int r, collgen__kparams *kp,
                       staging_use *u) {
  const int ll = strcmp(algo, "ll") == 0, twoshot = strcmp(algo, "twoshot") == 0;
  const void *in = call->buffers[ROLE_INPUT][r], *out = call->buffers[ROLE_OUTPUT][r];
  u->registered = 0;
  int rc = ll ? COLLGEN_OK
              : collgen__registered_input(c, &collgen__rt_allreduce_sum, call, g, ROLE_INPUT,
                                          base, size, r, kp, &u->registered);
  u->input = !u->registered && (!ll || !aligned16(in));
  u->output = twoshot || !aligned16(out) || (u->registered && in == out);
  u->out_offset = twoshot ? 0 : c->staging_bytes / 2; /* two-shot reduces region IN in place */
  return rc;
}

static int stage_in(collgen_comm_t *c, const collgen__call *call, const collgen__group *g,
                    const char *algo, int base, int size, int r, collgen__kparams *kp, CUstream s) {
  const size_t bytes = (size_t)g->bytes[ROLE_INPUT][r];
  int rc = collgen__stage_fits(c, "the input", bytes); /* the caller cut it into pieces */
  staging_use u;
  if (rc == COLLGEN_OK) rc = staging_for(c, call, g, algo, base, size, r, kp, &u);
  if (rc != COLLGEN_OK) return rc;
  if (u.input) {
    rc = collgen__stage_copy(c, collgen__staging_at(c, r, 0), call->buffers[ROLE_INPUT][r], bytes, s);
    if (rc != COLLGEN_OK) return rc;
    for (int k = 0; k < size; ++k) kp->in[k] = collgen__staging_at(c, base + k, 0);
  }
  if (strcmp(algo, "twoshot") == 0) {
    for (int k = 0; k < size; ++k) kp->out[k] = collgen__staging_at(c, base + k, 0);
  } else if (u.output) {
    kp->out[r - base] = collgen__staging_at(c, r, u.out_offset);
  }
  return COLLGEN_OK;
}

static int stage_out(collgen_comm_t *c, const collgen__call *call, const collgen__group *g,
                     const char *algo, int r, CUstream s) {
  staging_use u;
  int rc = staging_for(c, call, g, algo, 0, 0, r, NULL, &u);
  if (rc != COLLGEN_OK || !u.output) return rc;
  return collgen__stage_copy(c, (void *)call->buffers[ROLE_OUTPUT][r], collgen__staging_at(c, r, u.out_offset),
                    (size_t)g->bytes[ROLE_OUTPUT][r], s);
}

/* NCCL path: ncclAllReduce is the whole op (NCCL's own summation order,
** docs/multinode.md#bits). */
static int nccl_exchange(collgen_comm_t *c, const collgen__call *call, const collgen__group *g,
                         int base, int size, int r, collgen__nccl_comm_t comm, CUstream s) {
  (void)base;
  (void)size;
  return collgen__nccl_settle(
      comm, collgen__nccl.ncclAllReduce(call->buffers[ROLE_INPUT][r], (void *)call->buffers[ROLE_OUTPUT][r],
                                  (size_t)g->shape.elems, collgen__nccl_dtype_of(call->dtype),
                                  COLLGEN__NCCL_SUM, comm, s),
      "ncclAllReduce", c->timeout_ms, c->err, sizeof c->err);
}

const collgen__op_runtime collgen__rt_allreduce_sum = {
    .op = COLLGEN_OP_ALLREDUCE_SUM,
    .nroles = 2,
    .roles = {{"input", 0}, {"output", 1}},
    .same_buffer_ok = {{ROLE_INPUT, ROLE_OUTPUT}, {-1, -1}},
    .copy_alone = 1,
    .copy_roles = {ROLE_INPUT, ROLE_OUTPUT},
    .measure_group = measure_group,
    .finish_group = finish_group,
    .fill_rank = fill_rank,
    .stage_in = stage_in,
    .stage_out = stage_out,
    .nccl_exchange = nccl_exchange, /* no nccl_local: NCCL does it all */
};

int collgen_allreduce_sum(collgen_comm_t *c, collgen_dtype_t dtype, int rank,
                          const int64_t *const *shapes, const void *const *inputs,
                          void *const *outputs, int group_size,
                          const collgen_stream_t *streams) {
  collgen__call call = {
      .op = COLLGEN_OP_ALLREDUCE_SUM, .dtype = dtype, .tensor_rank = rank, .shapes = shapes,
      .buffers = {inputs, (const void *const *)outputs}, .group_size = group_size,
      .streams = streams};
  return collgen__op_run(c, &call);
}

int collgen_rank_allreduce_sum(collgen_comm_t *c, collgen_dtype_t dtype, int rank,
                               const int64_t *shape, const void *input, void *output,
                               int group_size, collgen_stream_t stream) {
  collgen__call call = {.op = COLLGEN_OP_ALLREDUCE_SUM, .dtype = dtype, .tensor_rank = rank,
                        .group_size = group_size};
  const void *mine[] = {[ROLE_INPUT] = input, [ROLE_OUTPUT] = output};
  /* Calls larger than a staging region run as consecutive pieces of
  ** elements. The driver checks everything else (it also reports a bad
  ** shape). */
  int64_t n = 0;
  const int esize = collgen__dtype_bytes(dtype);
  collgen__rank_pieces pieces = {.peer_role = ROLE_INPUT, .stride = {esize, esize}};
  const int cut = c && c->self >= 0 && shape && rank >= 1 && rank <= 8 && esize != 0 &&
                  collgen__shape_product(shape, 0, rank, &n) == 0 &&
                  (uint64_t)n * (uint64_t)esize > c->staging_bytes / 2;
  if (cut) {
    pieces.units = n;
    pieces.piece = (int64_t)(c->staging_bytes / 2 / 16 * 16) / esize;
  }
  return collgen__rank_run(c, &call, shape, mine, stream, cut ? &pieces : NULL);
}
