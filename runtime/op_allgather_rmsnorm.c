/*
** op_allgather_rmsnorm.c -- fused all-gather + RMSNorm: its runtime
** descriptor (op_runtime.h; the entry points are generated,
** op_entry_points.c). Roles
** (COLLGEN_ROLES_ALLGATHER_RMSNORM): the rank's row shard (input), the
** gathered normed and residual outputs, gamma. No two may overlap where
** one is written. Scalars: eps and weight_offset (COLLGEN_SCALARS_NORM).
*/
#include "op_runtime.h"
#include "shape.h"

enum { COLLGEN_ROLES_ALLGATHER_RMSNORM(COLLGEN_ROLE_ENUM) };

/* Shards may differ in their leading dimension only; rows are the product
** of all but the last dimension, summed over the group. */
static int measure_group(collgen_comm_t *c, const collgen__call *call, int base, int size,
                         collgen__group *g) {
  const int last = call->tensor_rank - 1;
  const int64_t *first = call->shapes[base];
  const int64_t cols = first[last];
  int64_t total = 0;
  for (int r = base; r < base + size; ++r) {
    const int64_t *s = call->shapes[r];
    int64_t rows = 0, elems = 0;
    int bad = collgen__shape_product(s, 0, last, &rows);
    if (!bad) bad = collgen__shape_product(s, 0, last + 1, &elems);
    if (bad)
      return collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_INVALID_ARG,
                           "rank %d: shard shape %s", r,
                           bad == -1 ? "has a negative dimension"
                                     : "has more than COLLGEN_MAX_ELEMS (2^40) elements");
    for (int k = 1; k <= last; ++k)
      if (s[k] != first[k])
        return collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_INVALID_ARG,
                             "ranks %d and %d share a group but their shards differ "
                             "in dimension %d (only dimension 0 may differ)", base, r, k);
    g->rank_rows[r] = rows;
    total += rows; /* at most 8 x 2^40: no overflow */
  }
  if (cols == 0) total = 0;
  if (total > COLLGEN_MAX_ELEMS || (total > 0 && cols > COLLGEN_MAX_ELEMS / total))
    return collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_INVALID_ARG,
                         "group of rank %d: the gathered tensor has more than "
                         "COLLGEN_MAX_ELEMS (2^40) elements", base);
  g->shape.rows = total;
  g->shape.cols = cols;
  g->empty = total == 0;
  const int64_t esize = collgen__dtype_bytes(call->dtype);
  for (int r = base; !g->empty && r < base + size; ++r) {
    g->bytes[ROLE_input][r] = g->rank_rows[r] * cols * esize;
    g->bytes[ROLE_normed][r] = total * cols * esize;
    g->bytes[ROLE_residual][r] = total * cols * esize;
    g->bytes[ROLE_gamma][r] = cols * esize;
  }
  return COLLGEN_OK;
}

static void fill_rank(const collgen__call *call, const collgen__group *g, int base, int size,
                      int r, collgen__kparams *kp) {
  unsigned long long start = 0;
  for (int k = 0; k <= COLLGEN_MAX_DEVICES; ++k) {
    kp->row_start[k] = start;
    if (k < size) {
      kp->in[k] = call->buffers[ROLE_input][base + k];
      start += (unsigned long long)g->rank_rows[base + k];
    }
  }
  kp->normed = (void *)call->buffers[ROLE_normed][r];
  kp->residual = (void *)call->buffers[ROLE_residual][r];
  collgen__norm_params(call, g, r, ROLE_gamma, kp);
}

/* NCCL path: the shards are gathered into residual output, then this rank
** normalizes every gathered row itself: the op on a group of one over
** [rows, cols] reading residual output (it rewrites the same values
** there). Buffers must be 16-byte aligned, as on the P2P path. */
static int nccl_local(collgen_comm_t *c, const collgen__call *call, const collgen__group *g,
                      int base, int size, int r, collgen__local_call *local) {
  (void)base;
  (void)size;
  int rc = collgen__stage_check_aligned(c, &collgen__rt_allgather_rmsnorm, call, g, r);
  if (rc != COLLGEN_OK) return rc;
  const int64_t shape[2] = {g->shape.rows, g->shape.cols};
  collgen__local_call_init(local, call, r, shape, 2);
  local->buffers[ROLE_input][r] = call->buffers[ROLE_residual][r];
  return COLLGEN_OK;
}

/* The shards are gathered into residual output (collgen__nccl_gather). */
static int nccl_exchange(collgen_comm_t *c, const collgen__call *call, const collgen__group *g,
                         int base, int size, int r, collgen__nccl_comm_t comm, CUstream s) {
  return collgen__nccl_gather(c, call->dtype, g->rank_rows, g->shape.cols, base, size, r,
                              call->buffers[ROLE_input][r],
                              (void *)call->buffers[ROLE_residual][r], comm, s);
}

const collgen__op_runtime collgen__rt_allgather_rmsnorm = {
    .op = COLLGEN_OP_ALLGATHER_RMSNORM,
    .same_buffer_ok = {{-1, -1}},
    .stage_unaligned = 0, /* one process per GPU: 16-byte aligned buffers only */
    .measure_group = measure_group,
    .fill_rank = fill_rank,
    .nccl_local = nccl_local,
    .nccl_exchange = nccl_exchange,
};
