/*
** op_allreduce_sum.c -- allreduce sum: its public entry point and its
** runtime descriptor (op_runtime.h). Roles: input, output (may be the
** same buffer: in place). Groups of one rank are a copy, not a kernel.
*/
#include "op_runtime.h"

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
