/*
** catalog.h -- the one description of ops, dtypes and target archs that
** every layer reads: C through these lookups, Lua through the `catalog`
** table pushed into the generator's state (gen/lua_catalog.c). The lists
** themselves are the X-macros COLLGEN_OP_MAP, COLLGEN_DTYPE_MAP and
** COLLGEN_FP8_MAP in collgen.h and COLLGEN_ARCH_MAP, the ops' buffer
** roles (COLLGEN_ROLES_<op>) and scalar arguments (COLLGEN_SCALARS_<op>)
** below; nothing else lists them.
*/
#ifndef COLLGEN_CATALOG_H
#define COLLGEN_CATALOG_H
#include "collgen.h"

/* Target archs NVRTC is asked for: XX(name, sm number). */
#define COLLGEN_ARCH_MAP(XX)                                                   \
  XX("sm_80", 80) XX("sm_86", 86) XX("sm_89", 89) XX("sm_90", 90)              \
  XX("sm_90a", 90) XX("sm_100", 100) XX("sm_100a", 100) XX("sm_120", 120)

typedef struct {
  collgen_dtype_t dtype;
  const char *name;      /* "bf16" */
  int bytes;             /* element size */
  const char *ctype;     /* device C type holding one element */
  const char *acc_type;  /* accumulation type; NULL: copy-only (moved, never computed on) */
  int min_sm;            /* oldest arch that has its conversions */
} collgen__dtype_desc;

/* When a role of an op is used (the `use` column below):
** ALWAYS; OPTIONAL (a call may leave it out: its array NULL, or every
** rank's entry); and for the ops with FP8 output, by the call's FP8 mode
** (scalar `fp8`): FP8_NONE (normed in the dtype), FP8_ANY (a dynamic or
** static mode), FP8_DYNAMIC. A role the mode does not use must be NULL. */
#define COLLGEN__ROLE_ALWAYS 0
#define COLLGEN__ROLE_OPTIONAL 1
#define COLLGEN__ROLE_FP8_NONE 2
#define COLLGEN__ROLE_FP8_ANY 3
#define COLLGEN__ROLE_FP8_DYNAMIC 4

/* The buffer roles of each op of COLLGEN_OP_MAP, in the order the runtime
** (buffers[k] of a call), the plans (bit k of collgen_plan_t's role masks)
** and the planner (catalog.ops[op].roles) number them:
** R(id, label, is_output, elem_bytes, use). `id` is the role's name in the
** planner and a C identifier (op files get ROLE_<id> from it); `label`
** names it in messages; elem_bytes is the alignment its pointers need and
** its element size: 0 for the call's dtype, else fixed (1 for e4m3 bytes,
** 4 for float row scales); `use` as above (COLLGEN__ROLE_<use>). Hooked to
** COLLGEN_OP_MAP by NAME: an op's list is COLLGEN_ROLES_<NAME>. */
#define COLLGEN_ROLES_ALLREDUCE_SUM(R)                                         \
  R(input, "input", 0, 0, ALWAYS)                                              \
  R(output, "output", 1, 0, ALWAYS)
#define COLLGEN_ROLES_ALLGATHER_RMSNORM(R)                                     \
  R(input, "input", 0, 0, ALWAYS)                                              \
  R(normed, "normed output", 1, 0, ALWAYS)                                     \
  R(residual, "residual output", 1, 0, ALWAYS)                                 \
  R(gamma, "gamma", 0, 0, ALWAYS)
/* The residual RMSNorm ops' roles, one list in one order (x is [rows,
** cols]; allreduce_residual_rmsnorm's others too, reduce_scatter_rmsnorm's
** this rank's chunk of rows), so both share their argument checks; only
** whether residual_in may be left out differs. */
#define COLLGEN_ROLES_RESIDUAL_RMSNORM(R, residual_in_use)                     \
  R(x, "x", 0, 0, ALWAYS)                                                      \
  R(residual_in, "residual_in", 0, 0, residual_in_use)                         \
  R(normed, "normed output", 1, 0, FP8_NONE)                                   \
  R(residual_out, "residual_out", 1, 0, ALWAYS)                                \
  R(gamma, "gamma", 0, 0, ALWAYS)                                              \
  R(normed_fp8, "normed_fp8 output", 1, 1, FP8_ANY)                            \
  R(row_scales, "row_scales", 1, 4, FP8_DYNAMIC)
#define COLLGEN_ROLES_ALLREDUCE_RESIDUAL_RMSNORM(R) COLLGEN_ROLES_RESIDUAL_RMSNORM(R, ALWAYS)
#define COLLGEN_ROLES_REDUCE_SCATTER_RMSNORM(R) COLLGEN_ROLES_RESIDUAL_RMSNORM(R, OPTIONAL)
#define COLLGEN_ROLES_BROADCAST(R)                                             \
  R(input, "input", 0, 0, ALWAYS)                                              \
  R(output, "output", 1, 0, ALWAYS)
#define COLLGEN_ROLES_ALL_GATHER(R)                                            \
  R(input, "input", 0, 0, ALWAYS)                                              \
  R(output, "output", 1, 0, ALWAYS)
#define COLLGEN_ROLES_REDUCE_SCATTER_SUM(R)                                    \
  R(input, "input", 0, 0, ALWAYS)                                              \
  R(output, "output", 1, 0, ALWAYS)
#define COLLGEN_ROLES_SCATTER(R)                                               \
  R(input, "input", 0, 0, ALWAYS)                                              \
  R(output, "output", 1, 0, ALWAYS)

/* The scalar arguments of each op, in the order of collgen_call_t's
** scalars[] and of the entry points: S(id, type, check, default, doc).
** type: INT (an integer, held exactly in the double), F32 (a float),
** FP8_MODE (a collgen_fp8_mode_t). check (COLLGEN__CHECK_<check>, done by
** the driver before anything is loaded): GROUP_RANK (0 <= v < group
** size), EPS (finite, >= 0), FINITE, FP8_MODE (a mode of COLLGEN_FP8_MAP
** that every rank's arch has), FP8_SCALE (0 unless the mode is static;
** then finite and > 0). `default` is what a call that leaves it out gets
** (the plain entry points of the FP8 ops: COLLGEN_FP8_NONE). Hooked to
** COLLGEN_OP_MAP by NAME: COLLGEN_SCALARS_<NAME>. */
#define COLLGEN_SCALARS_NORM(S)                                                \
  S(eps, F32, EPS, 1e-6, "added to mean(x^2) under the root; finite, >= 0")    \
  S(weight_offset, F32, FINITE, 0.0,                                           \
    "added to gamma (1.0: Gemma-style norms), held in the dtype")
#define COLLGEN_SCALARS_FP8(S)                                                 \
  S(fp8, FP8_MODE, FP8_MODE, 0, "how normed is written: none, dynamic, static") \
  S(static_scale, F32, FP8_SCALE, 0.0, "the one scale of the static mode, else 0")
#define COLLGEN_SCALARS_ROOT(S) S(root, INT, GROUP_RANK, 0, "the group rank that sends")
#define COLLGEN_SCALARS_ALLREDUCE_SUM(S)
#define COLLGEN_SCALARS_ALLGATHER_RMSNORM(S) COLLGEN_SCALARS_NORM(S)
#define COLLGEN_SCALARS_ALLREDUCE_RESIDUAL_RMSNORM(S) COLLGEN_SCALARS_NORM(S) COLLGEN_SCALARS_FP8(S)
#define COLLGEN_SCALARS_BROADCAST(S) COLLGEN_SCALARS_ROOT(S)
#define COLLGEN_SCALARS_ALL_GATHER(S)
#define COLLGEN_SCALARS_REDUCE_SCATTER_SUM(S)
#define COLLGEN_SCALARS_REDUCE_SCATTER_RMSNORM(S) COLLGEN_SCALARS_NORM(S) COLLGEN_SCALARS_FP8(S)
#define COLLGEN_SCALARS_SCATTER(S) COLLGEN_SCALARS_ROOT(S)

/* Scalar types and checks, the columns of COLLGEN_SCALARS_<NAME>. */
typedef enum { COLLGEN__SCALAR_INT, COLLGEN__SCALAR_F32, COLLGEN__SCALAR_FP8_MODE } collgen__scalar_type;
typedef enum {
  COLLGEN__CHECK_GROUP_RANK,
  COLLGEN__CHECK_EPS,
  COLLGEN__CHECK_FINITE,
  COLLGEN__CHECK_FP8_MODE,
  COLLGEN__CHECK_FP8_SCALE
} collgen__scalar_check;

typedef struct {
  const char *id;        /* "eps" */
  collgen__scalar_type type;
  collgen__scalar_check check;
  double dflt;
  const char *doc;
} collgen__scalar_desc;

typedef struct {
  const char *id;        /* "residual_out" */
  const char *label;     /* "residual_out", "normed output" (messages) */
  int is_output;
  int elem_bytes;        /* 0 = the call's dtype size, else fixed */
  int use;               /* COLLGEN__ROLE_ALWAYS, _OPTIONAL, _FP8_* */
} collgen__role_desc;

typedef struct {
  collgen_op_t op;
  const char *name;      /* "allreduce_sum" */
  const char *template_file;
  int min_rank;          /* smallest tensor rank the op accepts */
  int computes;          /* 1: computes on elements (refuses copy-only dtypes);
                            0: only moves bits (takes every dtype) */
  int fp8;               /* 1: can write normed as e4m3 (scalar fp8) */
  int nroles;
  const collgen__role_desc *roles; /* roles[0 .. nroles-1] */
  int nscalars;
  const collgen__scalar_desc *scalars; /* scalars[0 .. nscalars-1] */
} collgen__op_desc;

typedef struct {
  collgen_fp8_mode_t mode;
  const char *name;      /* "dynamic" */
  int min_sm;            /* oldest arch that has its conversion (0: any) */
} collgen__fp8_desc;

typedef struct {
  const char *name;      /* "sm_90a" */
  int sm;                /* 90 */
} collgen__arch_desc;

/* The index of the role called `id` of op d, or -1. */
int collgen__role_find(const collgen__op_desc *d, const char *id);
/* The index of the scalar called `id` of op d, or -1. */
int collgen__scalar_find(const collgen__op_desc *d, const char *id);

/* Number of entries of each list. */
int collgen__dtype_count(void);
int collgen__op_count(void);
int collgen__fp8_count(void);
int collgen__arch_count(void);

/* Entry i (0 <= i < count) of each list. */
const collgen__dtype_desc *collgen__dtype_at(int i);
const collgen__op_desc *collgen__op_at(int i);
const collgen__fp8_desc *collgen__fp8_at(int i);
const collgen__arch_desc *collgen__arch_at(int i);

/* The entry of a value, or NULL when the value names no entry: callers
** turn NULL into an error, never into a default. */
const collgen__dtype_desc *collgen__dtype_find(collgen_dtype_t dtype);
const collgen__op_desc *collgen__op_find(collgen_op_t op);
const collgen__fp8_desc *collgen__fp8_find(collgen_fp8_mode_t mode);
const collgen__arch_desc *collgen__arch_find(const char *name);

/* Name of a value, or "?" when it names no entry (for messages only). */
const char *collgen__op_name(collgen_op_t op);
const char *collgen__dtype_name(collgen_dtype_t dtype);
const char *collgen__fp8_name(collgen_fp8_mode_t mode);
/* Element size of a valid dtype; 0 for an unknown one. */
int collgen__dtype_bytes(collgen_dtype_t dtype);
/* 1 when the ops that compute on elements take the dtype (it has an
** accumulate type); 0 for a copy-only dtype or an unknown one. */
int collgen__dtype_reduces(collgen_dtype_t dtype);

/* Name -> value; 0, or -1 when the name is not in the list. */
int collgen__parse_op(const char *s, collgen_op_t *op);
int collgen__parse_dtype(const char *s, collgen_dtype_t *dtype);
int collgen__parse_fp8(const char *s, collgen_fp8_mode_t *mode);
#endif
