/*
** op_arguments.c -- the table-driven checks of a call's scalar arguments
** and of which buffer roles it uses, for every op alike: each scalar is
** checked as its catalog row says (COLLGEN_SCALARS_<op>, src/catalog.h),
** and each role is required, optional or decided by the call's FP8 mode
** as its catalog row says (COLLGEN_ROLES_<op>). No op names appear here.
*/
#include <math.h>
#include <stdio.h>

#include "op_runtime.h"

collgen_fp8_mode_t collgen__call_fp8(const collgen__call *call) {
  const int j = collgen__scalar_find(collgen__op_find(call->op), "fp8");
  return j < 0 ? COLLGEN_FP8_NONE : (collgen_fp8_mode_t)call->scalars[j];
}

int collgen__check_fp8_arch(collgen_comm_t *c, collgen_fp8_mode_t fp8) {
  const collgen__fp8_desc *mode = collgen__fp8_find(fp8);
  if (!mode)
    return collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_INVALID_ARG,
                         "FP8 mode %d: must be COLLGEN_FP8_NONE (normed in the dtype), "
                         "COLLGEN_FP8_DYNAMIC or COLLGEN_FP8_STATIC", (int)fp8);
  for (int r = 0; r < c->ndev; ++r) {
    const collgen__arch_desc *a = collgen__arch_find(c->arch[r]);
    if (!a || a->sm < mode->min_sm)
      return collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_UNSUPPORTED,
                           "FP8 output (%s) needs sm_%d or newer: rank %d (device %d) is %s",
                           mode->name, mode->min_sm, r, c->devices[r], c->arch[r]);
  }
  return COLLGEN_OK;
}

/* Checks scalar j of the call's op (s: its catalog row). */
static int check_scalar(collgen_comm_t *c, const collgen__call *call,
                        const collgen__scalar_desc *s, double v) {
  if (s->type != COLLGEN__SCALAR_F32 && !(v == floor(v) && fabs(v) < 1e9))
    return collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_INVALID_ARG,
                         "%s must be an integer, got %g", s->id, v);
  switch (s->check) {
  case COLLGEN__CHECK_GROUP_RANK: {
    /* group_size 0 is every rank; one that divides nothing is refused next */
    const int gs = call->group_size == 0 ? c->ndev : call->group_size;
    if (v < 0 || (gs >= 1 && v >= gs))
      return collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_INVALID_ARG,
                           "%s %d is not a group rank (0..%d)", s->id, (int)v, gs - 1);
    return COLLGEN_OK;
  }
  case COLLGEN__CHECK_EPS:
    if (!(v >= 0.0) || !isfinite((float)v))
      return collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_INVALID_ARG,
                           "%s must be finite and >= 0, got %g", s->id, v);
    return COLLGEN_OK;
  case COLLGEN__CHECK_FINITE:
    if (!isfinite((float)v))
      return collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_INVALID_ARG,
                           "%s must be a finite number, got %g", s->id, v);
    return COLLGEN_OK;
  case COLLGEN__CHECK_FP8_MODE:
    return collgen__check_fp8_arch(c, (collgen_fp8_mode_t)v);
  case COLLGEN__CHECK_FP8_SCALE: {
    const collgen_fp8_mode_t mode = collgen__call_fp8(call);
    if (mode == COLLGEN_FP8_STATIC && (!(v > 0.0) || !isfinite((float)v)))
      return collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_INVALID_ARG,
                           "%s must be finite and > 0 with COLLGEN_FP8_STATIC, got %g", s->id,
                           v);
    if (mode != COLLGEN_FP8_STATIC && v != 0.0)
      return collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_INVALID_ARG,
                           "%s must be 0 with FP8 mode %s (got %g): only the static mode "
                           "takes a scale", s->id, collgen__fp8_name(mode), v);
    return COLLGEN_OK;
  }
  }
  return collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_INVALID_ARG,
                       "scalar %s: unknown check %d", s->id, (int)s->check);
}

/* 1 when a role of `use` is written under FP8 mode `mode`. */
static int used_by_mode(int use, collgen_fp8_mode_t mode) {
  switch (use) {
  case COLLGEN__ROLE_FP8_NONE: return mode == COLLGEN_FP8_NONE;
  case COLLGEN__ROLE_FP8_ANY: return mode != COLLGEN_FP8_NONE;
  case COLLGEN__ROLE_FP8_DYNAMIC: return mode == COLLGEN_FP8_DYNAMIC;
  default: return 1;
  }
}

int collgen__check_arguments(collgen_comm_t *c, collgen__call *call) {
  const collgen__op_desc *d = collgen__op_find(call->op);
  for (int j = 0; j < d->nscalars; ++j) {
    int rc = check_scalar(c, call, &d->scalars[j], call->scalars[j]);
    if (rc != COLLGEN_OK) return rc;
  }
  const collgen_fp8_mode_t mode = collgen__call_fp8(call);
  unsigned given = 0; /* bit k: some rank's entry of role k is set */
  for (int k = 0; k < d->nroles; ++k)
    for (int r = 0; call->buffers[k] && r < c->ndev; ++r)
      if (call->buffers[k][r]) given |= 1u << k;
  /* A role the mode does not write must be left out (first: an FP8
  ** output given with mode none says what the caller meant). */
  for (int k = 0; k < d->nroles; ++k) {
    const collgen__role_desc *role = &d->roles[k];
    if (!(given >> k & 1u) || used_by_mode(role->use, mode)) continue;
    if (mode == COLLGEN_FP8_NONE)
      return collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_INVALID_ARG,
                           "FP8 mode %d: must be COLLGEN_FP8_DYNAMIC or COLLGEN_FP8_STATIC "
                           "to write %s (collgen_%s writes normed in the dtype)",
                           (int)mode, role->label, d->name);
    return collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_INVALID_ARG,
                         "%s must be NULL with FP8 mode %s (it writes no %s)", role->id,
                         collgen__fp8_name(mode), role->label);
  }
  call->unused_roles = 0;
  for (int k = 0; k < d->nroles; ++k) {
    const collgen__role_desc *role = &d->roles[k];
    if ((role->use == COLLGEN__ROLE_OPTIONAL && !(given >> k & 1u)) ||
        !used_by_mode(role->use, mode)) {
      call->unused_roles |= 1u << k;
    } else if (!call->buffers[k]) {
      return collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_INVALID_ARG,
                           "the %s array must not be NULL", role->label);
    }
  }
  return COLLGEN_OK;
}
