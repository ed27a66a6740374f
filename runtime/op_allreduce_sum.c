/*
** op_allreduce_sum.c -- allreduce sum: its runtime descriptor
** (op_runtime.h; the entry points are generated, op_entry_points.c). Roles (COLLGEN_ROLES_ALLREDUCE_SUM):
** input, output (may be the same buffer: in place). The planner makes a
** group of one rank a copy, not a kernel.
*/
#include <stdint.h>

#include "op_runtime.h"
#include "shape.h"

enum { COLLGEN_ROLES_ALLREDUCE_SUM(COLLGEN_ROLE_ENUM) };

/* Every rank of a group holds the same shape; its element count is the
** planner's `elems`. */
static int measure_group(collgen_comm_t *c, const collgen__call *call, int base, int size,
                         collgen__group *g) {
  int64_t n = 0;
  int rc = collgen__group_same_shape(c, call, base, size, &n);
  if (rc != COLLGEN_OK) return rc;
  const int64_t bytes = n * collgen__dtype_bytes(call->dtype);
  for (int r = base; r < base + size; ++r) {
    g->bytes[ROLE_input][r] = bytes;
    g->bytes[ROLE_output][r] = bytes;
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
    if (call->buffers[ROLE_input][r] == call->buffers[ROLE_output][r]) g->shape.inplace = 1;
}

static void fill_rank(const collgen__call *call, const collgen__group *g, int base, int size,
                      int r, collgen__kparams *kp) {
  (void)r;
  for (int k = 0; k < size; ++k) {
    kp->in[k] = call->buffers[ROLE_input][base + k];
    kp->out[k] = (void *)call->buffers[ROLE_output][base + k];
  }
  kp->count = (unsigned long long)g->shape.elems;
}

/* NCCL path: ncclAllReduce is the whole op (NCCL's own summation order,
** docs/multinode.md#bits). */
static int nccl_exchange(collgen_comm_t *c, const collgen__call *call, const collgen__group *g,
                         int base, int size, int r, collgen__nccl_comm_t comm, CUstream s) {
  (void)base;
  (void)size;
  return collgen__nccl_settle(
      comm, collgen__nccl.ncclAllReduce(call->buffers[ROLE_input][r], (void *)call->buffers[ROLE_output][r],
                                  (size_t)g->shape.elems, collgen__nccl_dtype_of(call->dtype),
                                  COLLGEN__NCCL_SUM, comm, s),
      "ncclAllReduce", c->timeout_ms, c->err, sizeof c->err);
}

const collgen__op_runtime collgen__rt_allreduce_sum = {
    .op = COLLGEN_OP_ALLREDUCE_SUM,
    .same_buffer_ok = {{ROLE_input, ROLE_output}, {-1, -1}},
    .stage_unaligned = 1, /* one process per GPU: unaligned buffers are staged */
    .pieces = COLLGEN__PIECES_ELEMS,
    .measure_group = measure_group,
    .finish_group = finish_group,
    .fill_rank = fill_rank,
    .nccl_exchange = nccl_exchange, /* no nccl_local: NCCL does it all */
};
