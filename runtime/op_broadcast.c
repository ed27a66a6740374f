/*
** op_broadcast.c -- broadcast: its public entry points and its runtime
** descriptor (op_runtime.h). Roles (COLLGEN_ROLES_BROADCAST): input (read
** on the group's root only; the other ranks' entries may be NULL), output
** (the root's may be its input). Arguments: broadcast_args (the root, a
** group rank). The planner makes a group of one a copy, not a kernel.
*/
#include <stdint.h>

#include "op_runtime.h"

enum { COLLGEN_ROLES_BROADCAST(COLLGEN_ROLE_ENUM) };

typedef struct {
  int root; /* group rank that sends, 0..group_size-1 */
} broadcast_args;

/* The root must be a rank of every group (group_size 0 is every rank; a
** group size that divides nothing is refused by the driver next). */
static int check_scalars(collgen_comm_t *c, const collgen__call *call) {
  const broadcast_args *a = call->args;
  const int gs = call->group_size == 0 ? c->ndev : call->group_size;
  if (a->root < 0 || (gs >= 1 && a->root >= gs))
    return collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_INVALID_ARG,
                         "root %d is not a group rank (0..%d)", a->root, gs - 1);
  return COLLGEN_OK;
}

/* Every rank of a group holds the same shape; only the root's input is
** read, so only it has an extent (the others' entries are not checked). */
static int measure_group(collgen_comm_t *c, const collgen__call *call, int base, int size,
                         collgen__group *g) {
  int64_t n = 0;
  int rc = collgen__group_same_shape(c, call, base, size, &n);
  if (rc != COLLGEN_OK) return rc;
  const int64_t bytes = n * collgen__dtype_bytes(call->dtype);
  const int root = base + ((const broadcast_args *)call->args)->root;
  for (int r = base; r < base + size; ++r) g->bytes[ROLE_output][r] = bytes;
  g->bytes[ROLE_input][root] = bytes;
  g->shape.elems = n;
  g->empty = n == 0;
  return COLLGEN_OK;
}

static void fill_rank(const collgen__call *call, const collgen__group *g, int base, int size,
                      int r, collgen__kparams *kp) {
  (void)r;
  for (int k = 0; k < size; ++k) {
    kp->in[k] = call->buffers[ROLE_input][base + k];
    kp->out[k] = (void *)call->buffers[ROLE_output][base + k];
  }
  kp->count = (unsigned long long)g->shape.elems;
  kp->root = (unsigned)((const broadcast_args *)call->args)->root;
}

/* NCCL path: ncclBroadcast is the whole op (the root's send buffer is
** read on the root only). */
static int nccl_exchange(collgen_comm_t *c, const collgen__call *call, const collgen__group *g,
                         int base, int size, int r, collgen__nccl_comm_t comm, CUstream s) {
  (void)base;
  (void)size;
  return collgen__nccl_settle(
      comm,
      collgen__nccl.ncclBroadcast(call->buffers[ROLE_input][r],
                                  (void *)call->buffers[ROLE_output][r], (size_t)g->shape.elems,
                                  collgen__nccl_dtype_of(call->dtype),
                                  ((const broadcast_args *)call->args)->root, comm, s),
      "ncclBroadcast", c->timeout_ms, c->err, sizeof c->err);
}

const collgen__op_runtime collgen__rt_broadcast = {
    .op = COLLGEN_OP_BROADCAST,
    .same_buffer_ok = {{ROLE_input, ROLE_output}, {-1, -1}},
    .stage_unaligned = 1, /* one process per GPU: unaligned buffers are staged */
    .check_scalars = check_scalars,
    .measure_group = measure_group,
    .fill_rank = fill_rank,
    .nccl_exchange = nccl_exchange, /* no nccl_local: NCCL does it all */
};

int collgen_broadcast(collgen_comm_t *c, collgen_dtype_t dtype, int rank,
                      const int64_t *const *shapes, const void *const *inputs,
                      void *const *outputs, int root, int group_size,
                      const collgen_stream_t *streams) {
  const broadcast_args args = {.root = root};
  collgen__call call = {
      .op = COLLGEN_OP_BROADCAST, .dtype = dtype, .tensor_rank = rank, .shapes = shapes,
      .buffers = {inputs, (const void *const *)outputs}, .args = &args,
      .group_size = group_size, .streams = streams};
  return collgen__op_run(c, &call);
}

int collgen_rank_broadcast(collgen_comm_t *c, collgen_dtype_t dtype, int rank,
                           const int64_t *shape, const void *input, void *output, int root,
                           int group_size, collgen_stream_t stream) {
  const broadcast_args args = {.root = root};
  collgen__call call = {.op = COLLGEN_OP_BROADCAST, .dtype = dtype, .tensor_rank = rank,
                        .args = &args, .group_size = group_size};
  const void *mine[] = {[ROLE_input] = input, [ROLE_output] = output};
  /* Calls larger than a staging region run as consecutive pieces of
  ** elements, as allreduce_sum's. The driver checks everything else. */
  collgen__rank_pieces pieces;
  const int cut = collgen__rank_elem_pieces(c, dtype, shape, rank, ROLE_input, ROLE_output,
                                            &pieces);
  return collgen__rank_run(c, &call, shape, mine, stream, cut ? &pieces : NULL);
}
