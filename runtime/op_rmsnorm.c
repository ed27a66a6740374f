/*
** op_rmsnorm.c -- what the RMSNorm family shares (allgather_rmsnorm,
** allreduce_residual_rmsnorm, reduce_scatter_rmsnorm): the norm parameters
** of a rank's kernel and, for the ops with FP8 output, its FP8 outputs.
** Every such op's scalars start with COLLGEN_SCALARS_NORM (eps,
** weight_offset) and, with FP8 output, go on with COLLGEN_SCALARS_FP8;
** those ops share COLLGEN_ROLES_RESIDUAL_RMSNORM's roles (src/catalog.h).
*/
#include "dtype_convert.h"
#include "op_runtime.h"

enum { COLLGEN_SCALARS_ALLREDUCE_RESIDUAL_RMSNORM(COLLGEN_SCALAR_ENUM) };
enum { COLLGEN_ROLES_ALLREDUCE_RESIDUAL_RMSNORM(COLLGEN_ROLE_ENUM) };

void collgen__norm_params(const collgen__call *call, const collgen__group *g, int r,
                          int gamma_role, collgen__kparams *kp) {
  kp->gamma = call->buffers[gamma_role][r];
  kp->count = (unsigned long long)g->shape.rows;
  kp->eps = (float)call->scalars[SCALAR_eps];
  kp->weight_offset = collgen__dtype_round(call->dtype, (float)call->scalars[SCALAR_weight_offset]);
}

void collgen__norm_fp8_params(const collgen__call *call, int r, collgen__kparams *kp) {
  const collgen_fp8_mode_t mode = (collgen_fp8_mode_t)call->scalars[SCALAR_fp8];
  const int normed = mode == COLLGEN_FP8_NONE ? ROLE_normed : ROLE_normed_fp8;
  kp->normed = (void *)call->buffers[normed][r];
  if (mode == COLLGEN_FP8_DYNAMIC) kp->row_scales = (float *)call->buffers[ROLE_row_scales][r];
  kp->static_scale = (float)call->scalars[SCALAR_static_scale];
}
