/*
** op_allreduce_residual_rmsnorm.c -- fused allreduce + residual add +
** RMSNorm: its public entry point and its runtime descriptor
** (op_runtime.h). Roles: x (the partial sums peers read), residual_in,
** gamma, and the normed and residual_out outputs. residual_out may be
** exactly residual_in (in place); no other pair may overlap where one is
** written. A group of one rank still runs its kernel (add and normalize).
*/
#include "dtype_convert.h"
#include "op_runtime.h"

enum { ROLE_X, ROLE_RESIDUAL_IN, ROLE_NORMED, ROLE_RESIDUAL_OUT, ROLE_GAMMA };

/* Every rank of a group holds the same [rows, cols] shape (leading dims
** flattened into rows). */
static int measure_group(collgen_comm_t *c, const collgen__call *call, int base, int size,
                         collgen__group *g) {
  int64_t elems = 0;
  int rc = collgen__group_same_shape(c, call, base, size, &elems);
  if (rc != COLLGEN_OK) return rc;
  const int64_t cols = call->shapes[base][call->tensor_rank - 1];
  g->shape.cols = cols;
  g->shape.rows = cols ? elems / cols : 0;
  g->empty = elems == 0;
  const int64_t esize = collgen__dtype_bytes(call->dtype);
  for (int r = base; !g->empty && r < base + size; ++r) {
    g->bytes[ROLE_X][r] = elems * esize;
    g->bytes[ROLE_RESIDUAL_IN][r] = elems * esize;
    g->bytes[ROLE_NORMED][r] = elems * esize;
    g->bytes[ROLE_RESIDUAL_OUT][r] = elems * esize;
    g->bytes[ROLE_GAMMA][r] = cols * esize;
  }
  return COLLGEN_OK;
}

/* Every rank's x and residual_out (peers read the one and may write the
** other, depending on the algorithm); this rank's residual_in, normed and
** gamma. */
static void fill_rank(const collgen__call *call, const collgen__group *g, int base, int size,
                      int r, collgen__kparams *kp) {
  for (int k = 0; k < size; ++k) {
    kp->in[k] = call->buffers[ROLE_X][base + k];
    kp->out[k] = (void *)call->buffers[ROLE_RESIDUAL_OUT][base + k];
  }
  kp->residual_in = call->buffers[ROLE_RESIDUAL_IN][r];
  kp->normed = (void *)call->buffers[ROLE_NORMED][r];
  kp->gamma = call->buffers[ROLE_GAMMA][r];
  kp->count = (unsigned long long)g->shape.rows;
  kp->eps = call->eps;
  kp->weight_offset = collgen__dtype_round(call->dtype, call->weight_offset); /* as the dtype holds it */
}

const collgen__op_runtime collgen__rt_allreduce_residual_rmsnorm = {
    .op = COLLGEN_OP_ALLREDUCE_RESIDUAL_RMSNORM,
    .nroles = 5,
    .roles = {{"x", 0}, {"residual_in", 0}, {"normed output", 1}, {"residual_out", 1},
              {"gamma", 0}},
    .same_buffer_ok = {{ROLE_RESIDUAL_IN, ROLE_RESIDUAL_OUT}, {-1, -1}},
    .check_scalars = collgen__check_norm_scalars,
    .measure_group = measure_group,
    .fill_rank = fill_rank,
};

int collgen_allreduce_residual_rmsnorm(collgen_comm_t *c, collgen_dtype_t dtype, int rank,
                                       const int64_t *const *shapes, const void *const *x,
                                       const void *const *residual_in, void *const *out_normed,
                                       void *const *residual_out, const void *const *gammas,
                                       float eps, float weight_offset, int group_size,
                                       const collgen_stream_t *streams) {
  collgen__call call = {
      .op = COLLGEN_OP_ALLREDUCE_RESIDUAL_RMSNORM, .dtype = dtype, .tensor_rank = rank,
      .shapes = shapes,
      .buffers = {x, residual_in, (const void *const *)out_normed,
                  (const void *const *)residual_out, gammas},
      .eps = eps, .weight_offset = weight_offset, .group_size = group_size,
      .streams = streams};
  return collgen__op_run(c, &call);
}
