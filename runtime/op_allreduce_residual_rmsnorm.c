/*
** op_allreduce_residual_rmsnorm.c -- fused allreduce + residual add +
** RMSNorm: its public entry points (normed in the dtype, or as float8
** e4m3; each for every rank, or per rank for one process per GPU) and its
** runtime descriptor (op_runtime.h). Roles
** (COLLGEN_ROLES_ALLREDUCE_RESIDUAL_RMSNORM): x (the partial sums),
** residual_in, gamma, residual_out and one normed output: in the dtype, or
** e4m3 bytes plus (dynamic scaling) a float scale per row. residual_out may
** be exactly residual_in (in place); no other pair may overlap where one is
** written. A group of one rank still runs its kernel (add and normalize).
** Arguments: collgen__norm_fp8_args (op_runtime.h).
*/
#include <math.h>
#include <stdint.h>

#include "dtype_convert.h"
#include "op_runtime.h"
#include "shape.h"

enum { COLLGEN_ROLES_ALLREDUCE_RESIDUAL_RMSNORM(COLLGEN_ROLE_ENUM) };

/* The FP8 ops' shared parts (op_runtime.h): the roles a call leaves out
** and the argument checks. reduce_scatter_rmsnorm has the same roles. */
unsigned collgen__norm_fp8_unused_roles(int fp8_entry, collgen_fp8_mode_t mode) {
  if (!fp8_entry) return 1u << ROLE_normed_fp8 | 1u << ROLE_row_scales;
  if (mode == COLLGEN_FP8_DYNAMIC) return 1u << ROLE_normed;
  return 1u << ROLE_normed | 1u << ROLE_row_scales;
}

int collgen__check_norm_fp8_args(collgen_comm_t *c, const collgen__call *call) {
  const collgen__norm_fp8_args *a = call->args;
  const char *op = collgen__op_find(call->op)->name;
  int rc = collgen__check_norm_scalars(c, call);
  const int plain_entry = (call->unused_roles & (1u << ROLE_normed_fp8)) != 0;
  if (rc != COLLGEN_OK || plain_entry) return rc;
  if (a->fp8 != COLLGEN_FP8_DYNAMIC && a->fp8 != COLLGEN_FP8_STATIC)
    return collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_INVALID_ARG,
                         "FP8 mode %d: must be COLLGEN_FP8_DYNAMIC or COLLGEN_FP8_STATIC "
                         "(collgen_%s writes normed in the dtype)",
                         (int)a->fp8, op);
  if (a->fp8 == COLLGEN_FP8_DYNAMIC && a->static_scale != 0.0f)
    return collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_INVALID_ARG,
                         "static_scale must be 0 with COLLGEN_FP8_DYNAMIC (got %g): the "
                         "kernel computes a scale per row", (double)a->static_scale);
  if (a->fp8 == COLLGEN_FP8_STATIC &&
      (!(a->static_scale > 0.0f) || !isfinite(a->static_scale)))
    return collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_INVALID_ARG,
                         "static_scale must be finite and > 0 with COLLGEN_FP8_STATIC, got %g",
                         (double)a->static_scale);
  if (a->fp8 == COLLGEN_FP8_STATIC && call->buffers[ROLE_row_scales])
    return collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_INVALID_ARG,
                         "row_scales must be NULL with COLLGEN_FP8_STATIC (no scales are "
                         "written)");
  return collgen__check_fp8_arch(c, a->fp8);
}

int collgen__check_fp8_arch(collgen_comm_t *c, collgen_fp8_mode_t fp8) {
  const collgen__fp8_desc *mode = collgen__fp8_find(fp8);
  if (!mode)
    return collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_INVALID_ARG, "unknown FP8 mode %d",
                         (int)fp8);
  for (int r = 0; r < c->ndev; ++r) {
    const collgen__arch_desc *a = collgen__arch_find(c->arch[r]);
    if (!a || a->sm < mode->min_sm)
      return collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_UNSUPPORTED,
                           "FP8 output (%s) needs sm_%d or newer: rank %d (device %d) is %s",
                           mode->name, mode->min_sm, r, c->devices[r], c->arch[r]);
  }
  return COLLGEN_OK;
}

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
  g->shape.fp8 = ((const collgen__norm_fp8_args *)call->args)->fp8;
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
  const collgen__norm_fp8_args *a = call->args;
  kp->residual_in = call->buffers[ROLE_residual_in][r];
  const int normed = a->fp8 == COLLGEN_FP8_NONE ? ROLE_normed : ROLE_normed_fp8;
  kp->normed = (void *)call->buffers[normed][r];
  if (a->fp8 == COLLGEN_FP8_DYNAMIC) kp->row_scales = (float *)call->buffers[ROLE_row_scales][r];
  kp->static_scale = a->static_scale;
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
    .check_scalars = collgen__check_norm_fp8_args,
    .measure_group = measure_group,
    .fill_rank = fill_rank,
    .nccl_local = nccl_local,
    .nccl_exchange = nccl_exchange,
};

int collgen_allreduce_residual_rmsnorm(collgen_comm_t *c, collgen_dtype_t dtype, int rank,
                                       const int64_t *const *shapes, const void *const *x,
                                       const void *const *residual_in, void *const *out_normed,
                                       void *const *residual_out, const void *const *gammas,
                                       float eps, float weight_offset, int group_size,
                                       const collgen_stream_t *streams) {
  const collgen__norm_fp8_args args = {{eps, weight_offset}, COLLGEN_FP8_NONE, 0.0f};
  collgen__call call = {
      .op = COLLGEN_OP_ALLREDUCE_RESIDUAL_RMSNORM, .dtype = dtype, .tensor_rank = rank,
      .shapes = shapes,
      .buffers = {x, residual_in, (const void *const *)out_normed,
                  (const void *const *)residual_out, gammas},
      .unused_roles = collgen__norm_fp8_unused_roles(0, COLLGEN_FP8_NONE), .args = &args,
      .group_size = group_size, .streams = streams};
  return collgen__op_run(c, &call);
}

int collgen_allreduce_residual_rmsnorm_fp8(
    collgen_comm_t *c, collgen_dtype_t dtype, int rank, const int64_t *const *shapes,
    const void *const *x, const void *const *residual_in, void *const *normed_fp8,
    float *const *row_scales, void *const *residual_out, const void *const *gammas, float eps,
    float weight_offset, collgen_fp8_mode_t mode, float static_scale, int group_size,
    const collgen_stream_t *streams) {
  const collgen__norm_fp8_args args = {{eps, weight_offset}, mode, static_scale};
  collgen__call call = {
      .op = COLLGEN_OP_ALLREDUCE_RESIDUAL_RMSNORM, .dtype = dtype, .tensor_rank = rank,
      .shapes = shapes,
      .buffers = {[ROLE_x] = x, [ROLE_residual_in] = residual_in,
                  [ROLE_residual_out] = (const void *const *)residual_out,
                  [ROLE_gamma] = gammas, [ROLE_normed_fp8] = (const void *const *)normed_fp8,
                  [ROLE_row_scales] = (const void *const *)row_scales},
      .unused_roles = collgen__norm_fp8_unused_roles(1, mode), .args = &args,
      .group_size = group_size, .streams = streams};
  return collgen__op_run(c, &call);
}

/* The per-rank entry points: this rank's buffers by role. Calls larger
** than a staging region run as consecutive row ranges (rows are
** independent); every rank cuts the same ranges. The driver checks
** everything else, and reports a bad shape. */
static int rank_call(collgen_comm_t *c, collgen__call *call, const int64_t *shape,
                     const void *const *mine, collgen_stream_t stream) {
  int64_t elems = 0;
  const int rank = call->tensor_rank, esize = collgen__dtype_bytes(call->dtype);
  if (!c || c->self < 0 || !shape || rank < 2 || rank > 8 || esize == 0 ||
      collgen__shape_product(shape, 0, rank, &elems) != 0 ||
      (uint64_t)elems * (uint64_t)esize <= c->staging_bytes / 2)
    return collgen__rank_run(c, call, shape, mine, stream, NULL);
  const int64_t cols = shape[rank - 1], row_bytes = cols * esize;
  int rc = collgen__stage_fits(c, "one row", (size_t)row_bytes);
  if (rc != COLLGEN_OK) return rc;
  const collgen__rank_pieces pieces = {
      .units = elems / cols, .piece = (int64_t)(c->staging_bytes / 2) / row_bytes, .inner = cols,
      .peer_role = ROLE_x,
      .stride = {[ROLE_x] = row_bytes, [ROLE_residual_in] = row_bytes,
                 [ROLE_normed] = row_bytes, [ROLE_residual_out] = row_bytes, [ROLE_gamma] = 0,
                 [ROLE_normed_fp8] = cols, [ROLE_row_scales] = (int64_t)sizeof(float)}};
  return collgen__rank_run(c, call, shape, mine, stream, &pieces);
}

int collgen_rank_allreduce_residual_rmsnorm(collgen_comm_t *c, collgen_dtype_t dtype, int rank,
                                            const int64_t *shape, const void *x,
                                            const void *residual_in, void *out_normed,
                                            void *residual_out, const void *gamma, float eps,
                                            float weight_offset, int group_size,
                                            collgen_stream_t stream) {
  const collgen__norm_fp8_args args = {{eps, weight_offset}, COLLGEN_FP8_NONE, 0.0f};
  collgen__call call = {
      .op = COLLGEN_OP_ALLREDUCE_RESIDUAL_RMSNORM, .dtype = dtype, .tensor_rank = rank,
      .unused_roles = collgen__norm_fp8_unused_roles(0, COLLGEN_FP8_NONE), .args = &args,
      .group_size = group_size};
  const void *mine[COLLGEN_MAX_ROLES] = {
      [ROLE_x] = x, [ROLE_residual_in] = residual_in, [ROLE_normed] = out_normed,
      [ROLE_residual_out] = residual_out, [ROLE_gamma] = gamma};
  return rank_call(c, &call, shape, mine, stream);
}

int collgen_rank_allreduce_residual_rmsnorm_fp8(
    collgen_comm_t *c, collgen_dtype_t dtype, int rank, const int64_t *shape, const void *x,
    const void *residual_in, void *normed_fp8, float *row_scales, void *residual_out,
    const void *gamma, float eps, float weight_offset, collgen_fp8_mode_t mode,
    float static_scale, int group_size, collgen_stream_t stream) {
  const collgen__norm_fp8_args args = {{eps, weight_offset}, mode, static_scale};
  collgen__call call = {
      .op = COLLGEN_OP_ALLREDUCE_RESIDUAL_RMSNORM, .dtype = dtype, .tensor_rank = rank,
      .unused_roles = collgen__norm_fp8_unused_roles(1, mode), .args = &args, .group_size = group_size};
  const void *mine[COLLGEN_MAX_ROLES] = {
      [ROLE_x] = x, [ROLE_residual_in] = residual_in, [ROLE_residual_out] = residual_out,
      [ROLE_gamma] = gamma, [ROLE_normed_fp8] = normed_fp8, [ROLE_row_scales] = row_scales};
  return rank_call(c, &call, shape, mine, stream);
}
