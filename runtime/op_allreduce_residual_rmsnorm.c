/*
** op_allreduce_residual_rmsnorm.c -- fused allreduce + residual add +
** RMSNorm: its runtime descriptor (op_runtime.h; the entry points, normed
** in the dtype or as float8 e4m3, are generated: op_entry_points.c). Roles
** (COLLGEN_ROLES_ALLREDUCE_RESIDUAL_RMSNORM): x (the partial sums),
** residual_in, gamma, residual_out and one normed output: in the dtype, or
** e4m3 bytes plus (dynamic scaling) a float scale per row. residual_out may
** be exactly residual_in (in place); no other pair may overlap where one is
** written. A group of one rank still runs its kernel (add and normalize).
** Scalars: COLLGEN_SCALARS_ALLREDUCE_RESIDUAL_RMSNORM (checked by the
** driver); the RMSNorm family's parameters come from op_rmsnorm.c.
*/
#include <stdint.h>

#include "op_runtime.h"

enum { COLLGEN_ROLES_ALLREDUCE_RESIDUAL_RMSNORM(COLLGEN_ROLE_ENUM) };

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
  g->shape.fp8 = collgen__call_fp8(call);
  g->empty = elems == 0;
  const int64_t esize = collgen__dtype_bytes(call->dtype);
  const int64_t extent[] = {
      [ROLE_x] = elems * esize,          [ROLE_residual_in] = elems * esize,
      [ROLE_normed] = elems * esize,     [ROLE_residual_out] = elems * esize,
      [ROLE_gamma] = cols * esize,       [ROLE_normed_fp8] = elems,
      [ROLE_row_scales] = g->shape.rows * (int64_t)sizeof(float)};
  for (int r = base; !g->empty && r < base + size; ++r)
    for (int k = 0; k <= ROLE_row_scales; ++k)
      if (!(call->unused_roles & (1u << k))) g->bytes[k][r] = extent[k];
  return COLLGEN_OK;
}

/* Every rank's x and residual_out (peers read the one and may write the
** other, depending on the algorithm); this rank's residual_in, normed
** output, row scales and gamma. */
static void fill_rank(const collgen__call *call, const collgen__group *g, int base, int size,
                      int r, collgen__kparams *kp) {
  for (int k = 0; k < size; ++k) {
    kp->in[k] = call->buffers[ROLE_x][base + k];
    kp->out[k] = (void *)call->buffers[ROLE_residual_out][base + k];
  }
  kp->residual_in = call->buffers[ROLE_residual_in][r];
  collgen__norm_fp8_params(call, r, kp);
  collgen__norm_params(call, g, r, ROLE_gamma, kp);
}

/* NCCL path: NCCL sums x into this rank's staging area (region IN, rounded
** to the dtype there), then the op on a group of one adds the residual and
** normalizes: two roundings where the P2P path has one
** (docs/multinode.md#bits). Buffers must be 16-byte aligned, as on the P2P
** path; the caller cut the call to fit the region. */
static int nccl_local(collgen_comm_t *c, const collgen__call *call, const collgen__group *g,
                      int base, int size, int r, collgen__local_call *local) {
  (void)base;
  (void)size;
  int rc = collgen__stage_check_aligned(c, &collgen__rt_allreduce_residual_rmsnorm, call, g, r);
  if (rc == COLLGEN_OK) rc = collgen__stage_fits(c, "x", (size_t)g->bytes[ROLE_x][r]);
  if (rc != COLLGEN_OK) return rc;
  collgen__local_call_init(local, call, r, call->shapes[r], call->tensor_rank);
  local->buffers[ROLE_x][r] = collgen__staging_at(c, r, 0);
  return COLLGEN_OK;
}

static int nccl_exchange(collgen_comm_t *c, const collgen__call *call, const collgen__group *g,
                         int base, int size, int r, collgen__nccl_comm_t comm, CUstream s) {
  (void)base;
  (void)size;
  return collgen__nccl_settle(
      comm, collgen__nccl.ncclAllReduce(call->buffers[ROLE_x][r], collgen__staging_at(c, r, 0),
                                  (size_t)(g->shape.rows * g->shape.cols),
                                  collgen__nccl_dtype_of(call->dtype), COLLGEN__NCCL_SUM, comm, s),
      "ncclAllReduce", c->timeout_ms, c->err, sizeof c->err);
}

const collgen__op_runtime collgen__rt_allreduce_residual_rmsnorm = {
    .op = COLLGEN_OP_ALLREDUCE_RESIDUAL_RMSNORM,
    .same_buffer_ok = {{ROLE_residual_in, ROLE_residual_out}, {-1, -1}},
    .stage_unaligned = 0, /* one process per GPU: 16-byte aligned buffers only */
    .pieces = COLLGEN__PIECES_ROWS, /* rows are independent */
    .fixed_roles = 1u << ROLE_gamma,
    .per_row_roles = 1u << ROLE_row_scales,
    .measure_group = measure_group,
    .fill_rank = fill_rank,
    .nccl_local = nccl_local,
    .nccl_exchange = nccl_exchange,
};
