/*
** op_norm_fp8.c -- what the ops with FP8 output share
** (allreduce_residual_rmsnorm, reduce_scatter_rmsnorm; both have
** COLLGEN_ROLES_ALLREDUCE_RESIDUAL_RMSNORM's roles and
** collgen__norm_fp8_args): the roles a call leaves out, the argument
** checks, and the one call builder per process model behind their public
** entry points, which are thin wrappers naming their op (op_runtime.h).
*/
#include <math.h>
#include <stdint.h>

#include "op_runtime.h"
#include "shape.h"

enum { COLLGEN_ROLES_ALLREDUCE_RESIDUAL_RMSNORM(COLLGEN_ROLE_ENUM) };

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

/* ---- The call builders: one per process model ---- */

/* Every rank's buffers of a call (by_role[k], NULL for the roles its entry
** point does not take), run through the driver. fp8_entry: 1 for the _fp8
** entry points (normed as e4m3), 0 for the plain ones. */
static int run_all(collgen_comm_t *c, collgen_op_t op, collgen_dtype_t dtype, int rank,
                   const int64_t *const *shapes, const void *const *const *by_role,
                   const collgen__norm_fp8_args *args, int fp8_entry, int group_size,
                   const collgen_stream_t *streams) {
  collgen__call call = {.op = op, .dtype = dtype, .tensor_rank = rank, .shapes = shapes,
                        .unused_roles = collgen__norm_fp8_unused_roles(fp8_entry, args->fp8),
                        .args = args, .group_size = group_size, .streams = streams};
  for (int k = 0; k < COLLGEN_MAX_ROLES; ++k) call.buffers[k] = by_role[k];
  return collgen__op_run(c, &call);
}

/* This rank's buffers of a collgen_rank_* call (mine[k] as by_role above).
** With cut_rows, a call larger than half the staging area runs as
** consecutive row ranges (rows independent: allreduce_residual_rmsnorm);
** every rank cuts the same ranges. Without it the call must fit (the
** staging plan refuses it, naming staging_bytes): in reduce_scatter_rmsnorm
** a cut would change every rank's chunk. The driver checks everything
** else, and reports a bad shape. */
static int run_rank(collgen_comm_t *c, collgen_op_t op, int cut_rows, collgen_dtype_t dtype,
                    int rank, const int64_t *shape, const void *const *mine,
                    const collgen__norm_fp8_args *args, int fp8_entry, int group_size,
                    collgen_stream_t stream) {
  collgen__call call = {.op = op, .dtype = dtype, .tensor_rank = rank,
                        .unused_roles = collgen__norm_fp8_unused_roles(fp8_entry, args->fp8),
                        .args = args, .group_size = group_size};
  int64_t elems = 0;
  const int esize = collgen__dtype_bytes(dtype);
  if (!cut_rows || !c || c->self < 0 || !shape || rank < 2 || rank > 8 || esize == 0 ||
      collgen__shape_product(shape, 0, rank, &elems) != 0 ||
      (uint64_t)elems * (uint64_t)esize <= c->staging_bytes / 2)
    return collgen__rank_run(c, &call, shape, mine, stream, NULL);
  const int64_t cols = shape[rank - 1], row_bytes = cols * esize;
  int rc = collgen__stage_fits(c, "one row", (size_t)row_bytes);
  if (rc != COLLGEN_OK) return rc;
  const collgen__rank_pieces pieces = {
      .units = elems / cols, .piece = (int64_t)(c->staging_bytes / 2) / row_bytes, .inner = cols,
      .peer_role = ROLE_x,
      .stride = {[ROLE_x] = row_bytes, [ROLE_residual_in] = row_bytes,
                 [ROLE_normed] = row_bytes, [ROLE_residual_out] = row_bytes, [ROLE_gamma] = 0,
                 [ROLE_normed_fp8] = cols, [ROLE_row_scales] = (int64_t)sizeof(float)}};
  return collgen__rank_run(c, &call, shape, mine, stream, &pieces);
}

/* ---- The four entry-point forms (op_runtime.h) ---- */

int collgen__norm_fp8_call(collgen_comm_t *c, collgen_op_t op, collgen_dtype_t dtype, int rank,
                           const int64_t *const *shapes, const void *const *x,
                           const void *const *residual_in, void *const *out_normed,
                           void *const *residual_out, const void *const *gammas, float eps,
                           float weight_offset, int group_size, const collgen_stream_t *streams) {
  const collgen__norm_fp8_args args = {{eps, weight_offset}, COLLGEN_FP8_NONE, 0.0f};
  const void *const *by_role[COLLGEN_MAX_ROLES] = {
      [ROLE_x] = x, [ROLE_residual_in] = residual_in,
      [ROLE_normed] = (const void *const *)out_normed,
      [ROLE_residual_out] = (const void *const *)residual_out, [ROLE_gamma] = gammas};
  return run_all(c, op, dtype, rank, shapes, by_role, &args, 0, group_size, streams);
}

int collgen__norm_fp8_call_fp8(collgen_comm_t *c, collgen_op_t op, collgen_dtype_t dtype,
                               int rank, const int64_t *const *shapes, const void *const *x,
                               const void *const *residual_in, void *const *normed_fp8,
                               float *const *row_scales, void *const *residual_out,
                               const void *const *gammas, float eps, float weight_offset,
                               collgen_fp8_mode_t mode, float static_scale, int group_size,
                               const collgen_stream_t *streams) {
  const collgen__norm_fp8_args args = {{eps, weight_offset}, mode, static_scale};
  const void *const *by_role[COLLGEN_MAX_ROLES] = {
      [ROLE_x] = x, [ROLE_residual_in] = residual_in,
      [ROLE_residual_out] = (const void *const *)residual_out, [ROLE_gamma] = gammas,
      [ROLE_normed_fp8] = (const void *const *)normed_fp8,
      [ROLE_row_scales] = (const void *const *)row_scales};
  return run_all(c, op, dtype, rank, shapes, by_role, &args, 1, group_size, streams);
}

int collgen__norm_fp8_rank_call(collgen_comm_t *c, collgen_op_t op, int cut_rows,
                                collgen_dtype_t dtype, int rank, const int64_t *shape,
                                const void *x, const void *residual_in, void *out_normed,
                                void *residual_out, const void *gamma, float eps,
                                float weight_offset, int group_size, collgen_stream_t stream) {
  const collgen__norm_fp8_args args = {{eps, weight_offset}, COLLGEN_FP8_NONE, 0.0f};
  const void *mine[COLLGEN_MAX_ROLES] = {
      [ROLE_x] = x, [ROLE_residual_in] = residual_in, [ROLE_normed] = out_normed,
      [ROLE_residual_out] = residual_out, [ROLE_gamma] = gamma};
  return run_rank(c, op, cut_rows, dtype, rank, shape, mine, &args, 0, group_size, stream);
}

int collgen__norm_fp8_rank_call_fp8(collgen_comm_t *c, collgen_op_t op, int cut_rows,
                                    collgen_dtype_t dtype, int rank, const int64_t *shape,
                                    const void *x, const void *residual_in, void *normed_fp8,
                                    float *row_scales, void *residual_out, const void *gamma,
                                    float eps, float weight_offset, collgen_fp8_mode_t mode,
                                    float static_scale, int group_size,
                                    collgen_stream_t stream) {
  const collgen__norm_fp8_args args = {{eps, weight_offset}, mode, static_scale};
  const void *mine[COLLGEN_MAX_ROLES] = {
      [ROLE_x] = x, [ROLE_residual_in] = residual_in, [ROLE_residual_out] = residual_out,
      [ROLE_gamma] = gamma, [ROLE_normed_fp8] = normed_fp8, [ROLE_row_scales] = row_scales};
  return run_rank(c, op, cut_rows, dtype, rank, shape, mine, &args, 1, group_size, stream);
}
