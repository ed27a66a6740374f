/*
** catalog.h -- the one description of ops, dtypes and target archs that
** every layer reads: C through these lookups, Lua through the `catalog`
** table pushed into the generator's state (gen/lua_catalog.c). The lists
** themselves are the X-macros COLLGEN_OP_MAP, COLLGEN_DTYPE_MAP and
** COLLGEN_FP8_MAP in collgen.h and COLLGEN_ARCH_MAP and the ops' buffer
** roles (COLLGEN_ROLES_<op>) below; nothing else lists them.
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

/* The buffer roles of each op of COLLGEN_OP_MAP, in the order the runtime
** (buffers[k] of a call), the plans (bit k of collgen_plan_t's role masks)
** and the planner (catalog.ops[op].roles) number them:
** R(id, label, is_output, elem_bytes). `id` is the role's name in the
** planner and a C identifier (op files get ROLE_<id> from it); `label`
** names it in messages; elem_bytes is the alignment its pointers need and
** its element size: 0 for the call's dtype, else fixed (1 for e4m3 bytes,
** 4 for float row scales). Hooked to COLLGEN_OP_MAP by NAME: an op's list
** is COLLGEN_ROLES_<NAME>. */
#define COLLGEN_ROLES_ALLREDUCE_SUM(R)                                         \
  R(input, "input", 0, 0)                                                      \
  R(output, "output", 1, 0)
#define COLLGEN_ROLES_ALLGATHER_RMSNORM(R)                                     \
  R(input, "input", 0, 0)                                                      \
  R(normed, "normed output", 1, 0)                                             \
  R(residual, "residual output", 1, 0)                                         \
  R(gamma, "gamma", 0, 0)
#define COLLGEN_ROLES_ALLREDUCE_RESIDUAL_RMSNORM(R)                            \
  R(x, "x", 0, 0)                                                              \
  R(residual_in, "residual_in", 0, 0)                                          \
  R(normed, "normed output", 1, 0)                                             \
  R(residual_out, "residual_out", 1, 0)                                        \
  R(gamma, "gamma", 0, 0)                                                      \
  R(normed_fp8, "normed_fp8 output", 1, 1)                                     \
  R(row_scales, "row_scales", 1, 4)
#define COLLGEN_ROLES_BROADCAST(R)                                             \
  R(input, "input", 0, 0)                                                      \
  R(output, "output", 1, 0)
#define COLLGEN_ROLES_ALL_GATHER(R)                                            \
  R(input, "input", 0, 0)                                                      \
  R(output, "output", 1, 0)
#define COLLGEN_ROLES_REDUCE_SCATTER_SUM(R)                                    \
  R(input, "input", 0, 0)                                                      \
  R(output, "output", 1, 0)
/* The residual op's roles, in its order (x is [rows, cols], the others
** this rank's chunk of rows), so both ops share their FP8 argument checks. */
#define COLLGEN_ROLES_REDUCE_SCATTER_RMSNORM(R) COLLGEN_ROLES_ALLREDUCE_RESIDUAL_RMSNORM(R)

/* The most roles an op may have (role masks are unsigned bit sets). */
#define COLLGEN_MAX_ROLES 7

typedef struct {
  const char *id;        /* "residual_out" */
  const char *label;     /* "residual_out", "normed output" (messages) */
  int is_output;
  int elem_bytes;        /* 0 = the call's dtype size, else fixed */
} collgen__role_desc;

typedef struct {
  collgen_op_t op;
  const char *name;      /* "allreduce_sum" */
  const char *template_file;
  int min_rank;          /* smallest tensor rank the op accepts */
  int computes;          /* 1: computes on elements (refuses copy-only dtypes);
                            0: only moves bits (takes every dtype) */
  int nroles;
  const collgen__role_desc *roles; /* roles[0 .. nroles-1] */
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
