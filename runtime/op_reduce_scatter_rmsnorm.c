/*
** op_reduce_scatter_rmsnorm.c -- fused reduce-scatter + residual add +
** RMSNorm (sequence parallelism): its runtime descriptor (op_runtime.h;
** the entry points are generated, op_entry_points.c). Roles: those
** of allreduce_residual_rmsnorm (COLLGEN_ROLES_REDUCE_SCATTER_RMSNORM):
** x is [rows, cols] on every rank of a group; group rank i owns chunk i of
** the rows (collgen__scatter_chunk) and its residual_in (optional),
** residual_out and normed outputs are [count_i, cols]. residual_out may be
** exactly residual_in; no other pair may overlap where one is written. A
** group of one rank runs its kernel (add and normalize). Scalars: those of
** allreduce_residual_rmsnorm, checked by the driver.
*/
#include <stdint.h>

#include "op_runtime.h"
#include "shape.h"

enum { COLLGEN_ROLES_REDUCE_SCATTER_RMSNORM(COLLGEN_ROLE_ENUM) };

/* Every rank of a group holds the same x [rows, cols] (leading dims
** flattened); rank_rows[r] is the rank's chunk, and the planner sees the
** largest (chunk 0). */
static int measure_group(collgen_comm_t *c, const collgen__call *call, int base, int size,
                         collgen__group *g) {
  int64_t elems = 0;
  int rc = collgen__group_same_shape(c, call, base, size, &elems);
  if (rc != COLLGEN_OK) return rc;
  const int64_t cols = call->shapes[base][call->tensor_rank - 1];
  const int64_t rows = cols ? elems / cols : 0, esize = collgen__dtype_bytes(call->dtype);
  int64_t start = 0;
  for (int r = base; r < base + size; ++r)
    collgen__scatter_chunk(rows, size, r - base, &start, &g->rank_rows[r]);
  g->shape.cols = cols;
  g->shape.rows = g->rank_rows[base];
  g->shape.fp8 = collgen__call_fp8(call);
  g->empty = elems == 0;
  for (int r = base; !g->empty && r < base + size; ++r) {
    const int64_t mine = g->rank_rows[r] * cols;
    const int64_t extent[] = {
        [ROLE_x] = elems * esize,          [ROLE_residual_in] = mine * esize,
        [ROLE_normed] = mine * esize,      [ROLE_residual_out] = mine * esize,
        [ROLE_gamma] = cols * esize,       [ROLE_normed_fp8] = mine,
        [ROLE_row_scales] = g->rank_rows[r] * (int64_t)sizeof(float)};
    for (int k = 0; k <= ROLE_row_scales; ++k)
      if (!(call->unused_roles & (1u << k))) g->bytes[k][r] = extent[k];
  }
  return COLLGEN_OK;
}

/* Every rank's x at the first row of rank r's chunk (the kernel pulls
** those rows); r's own residual_in (NULL when absent), outputs and gamma;
** count = r's chunk. */
static void fill_rank(const collgen__call *call, const collgen__group *g, int base, int size,
                      int r, collgen__kparams *kp) {
  const int64_t row_bytes = g->shape.cols * collgen__dtype_bytes(call->dtype);
  int64_t start = 0;
  for (int k = base; k < r; ++k) start += g->rank_rows[k];
  for (int k = 0; k < size; ++k)
    kp->in[k] = (const char *)call->buffers[ROLE_x][base + k] + start * row_bytes;
  kp->residual_in = call->buffers[ROLE_residual_in] ? call->buffers[ROLE_residual_in][r] : NULL;
  kp->out[r - base] = (void *)call->buffers[ROLE_residual_out][r];
  collgen__norm_fp8_params(call, r, kp);
  collgen__norm_params(call, g, r, ROLE_gamma, kp);
  kp->count = (unsigned long long)g->rank_rows[r];
}

/* NCCL path: NCCL reduce-scatters x into this rank's staging area (region
** IN: its chunk, summed and rounded to the dtype there), then the op on a
** group of one over [count_r, cols] adds residual_in and normalizes: two
** roundings where the P2P path has one (docs/multinode.md#bits). Buffers
** must be 16-byte aligned, as on the P2P path. */
static int nccl_local(collgen_comm_t *c, const collgen__call *call, const collgen__group *g,
                      int base, int size, int r, collgen__local_call *local) {
  (void)base;
  (void)size;
  int rc = collgen__stage_check_aligned(c, &collgen__rt_reduce_scatter_rmsnorm, call, g, r);
  if (rc == COLLGEN_OK)
    rc = collgen__stage_fits(c, "this rank's chunk of x", (size_t)g->bytes[ROLE_residual_out][r]);
  if (rc != COLLGEN_OK) return rc;
  const int64_t shape[2] = {g->rank_rows[r], g->shape.cols};
  collgen__local_call_init(local, call, r, shape, 2);
  local->buffers[ROLE_x][r] = collgen__staging_at(c, r, 0);
  return COLLGEN_OK;
}

/* Even chunks: ncclReduceScatter. Uneven ones: one ncclReduce per chunk
** (root: its owner) in one NCCL group. */
static int nccl_exchange(collgen_comm_t *c, const collgen__call *call, const collgen__group *g,
                         int base, int size, int r, collgen__nccl_comm_t comm, CUstream s) {
  const int64_t cols = g->shape.cols, esize = collgen__dtype_bytes(call->dtype);
  const collgen__nccl_dtype dt = collgen__nccl_dtype_of(call->dtype);
  const char *x = call->buffers[ROLE_x][r];
  void *chunk = collgen__staging_at(c, r, 0);
  int even = 1;
  for (int k = base; k < base + size; ++k) even &= g->rank_rows[k] == g->rank_rows[base];
  if (even)
    return collgen__nccl_settle(
        comm, collgen__nccl.ncclReduceScatter(x, chunk, (size_t)(g->rank_rows[r] * cols), dt,
                                              COLLGEN__NCCL_SUM, comm, s),
        "ncclReduceScatter", c->timeout_ms, c->err, sizeof c->err);
  int rc = collgen__nccl_fail(collgen__nccl.ncclGroupStart(), "ncclGroupStart", c->err,
                              sizeof c->err);
  int64_t start = 0;
  for (int k = base; rc == COLLGEN_OK && k < base + size; ++k) {
    const size_t n = (size_t)(g->rank_rows[k] * cols);
    if (n)
      rc = collgen__nccl_fail(collgen__nccl.ncclReduce(x + start * cols * esize, chunk, n, dt,
                                                       COLLGEN__NCCL_SUM, k - base, comm, s),
                              "ncclReduce", c->err, sizeof c->err);
    start += g->rank_rows[k];
  }
  /* The group is ended whatever failed inside it. */
  const collgen__nccl_result end = collgen__nccl.ncclGroupEnd();
  if (rc == COLLGEN_OK)
    rc = collgen__nccl_settle(comm, end, "ncclGroupEnd", c->timeout_ms, c->err, sizeof c->err);
  return rc;
}

const collgen__op_runtime collgen__rt_reduce_scatter_rmsnorm = {
    .op = COLLGEN_OP_REDUCE_SCATTER_RMSNORM,
    .same_buffer_ok = {{ROLE_residual_in, ROLE_residual_out}, {-1, -1}},
    /* per rank calls are never cut: x must fit half the staging area (the
    ** staging plan refuses it, naming staging_bytes), since a cut into row
    ** ranges would change every rank's chunk */
    .pieces = COLLGEN__PIECES_NONE,
    .stage_unaligned = 0, /* one process per GPU: 16-byte aligned buffers only */
    .measure_group = measure_group,
    .fill_rank = fill_rank,
    .nccl_local = nccl_local,
    .nccl_exchange = nccl_exchange,
};
