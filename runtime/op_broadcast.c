/*
** op_broadcast.c -- broadcast: its runtime descriptor (op_runtime.h; the
** entry points are generated, op_entry_points.c). Roles (COLLGEN_ROLES_BROADCAST): input (read
** on the group's root only; the other ranks' entries may be NULL), output
** (the root's may be its input). Scalar: the root, a group rank (checked
** by the driver, COLLGEN_SCALARS_BROADCAST). The planner makes a group of one a copy, not a kernel.
*/
#include <stdint.h>

#include "op_runtime.h"

enum { COLLGEN_ROLES_BROADCAST(COLLGEN_ROLE_ENUM) };
enum { COLLGEN_SCALARS_BROADCAST(COLLGEN_SCALAR_ENUM) };

/* Every rank of a group holds the same shape; only the root's input is
** read, so only it has an extent (the others' entries are not checked). */
static int measure_group(collgen_comm_t *c, const collgen__call *call, int base, int size,
                         collgen__group *g) {
  int64_t n = 0;
  int rc = collgen__group_same_shape(c, call, base, size, &n);
  if (rc != COLLGEN_OK) return rc;
  const int64_t bytes = n * collgen__dtype_bytes(call->dtype);
  const int root = base + (int)call->scalars[SCALAR_root];
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
  kp->root = (unsigned)(int)call->scalars[SCALAR_root];
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
                                  (int)call->scalars[SCALAR_root], comm, s),
      "ncclBroadcast", c->timeout_ms, c->err, sizeof c->err);
}

const collgen__op_runtime collgen__rt_broadcast = {
    .op = COLLGEN_OP_BROADCAST,
    .same_buffer_ok = {{ROLE_input, ROLE_output}, {-1, -1}},
    .stage_unaligned = 1, /* one process per GPU: unaligned buffers are staged */
    .pieces = COLLGEN__PIECES_ELEMS,
    .measure_group = measure_group,
    .fill_rank = fill_rank,
    .nccl_exchange = nccl_exchange, /* no nccl_local: NCCL does it all */
};
