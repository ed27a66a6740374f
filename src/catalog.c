/*
** catalog.c -- lookups over the op, dtype and arch lists (catalog.h).
*/
#include <string.h>

#include "catalog.h"

static const collgen__dtype_desc dtypes[] = {
#define DTYPE_ENTRY(NAME, value, id, bytes, ctype, acc, sm) \
  {COLLGEN_DTYPE_##NAME, #id, bytes, ctype, acc, sm},
    COLLGEN_DTYPE_MAP(DTYPE_ENTRY)
#undef DTYPE_ENTRY
};

#define ROLE_ENTRY(id, label, is_output, elem_bytes, use) \
  {#id, label, is_output, elem_bytes, COLLGEN__ROLE_##use},
#define SCALAR_ENTRY(id, type, check, dflt, doc) \
  {#id, COLLGEN__SCALAR_##type, COLLGEN__CHECK_##check, dflt, doc},
/* Per op: its roles, and its scalars behind a terminator (an op may have
** none, and C has no empty arrays). */
#define ROLE_TABLE(NAME, value, id, tpl, min_rank, computes, fp8)                          \
  static const collgen__role_desc roles_##id[] = {COLLGEN_ROLES_##NAME(ROLE_ENTRY)};     \
  _Static_assert(sizeof roles_##id / sizeof roles_##id[0] <= COLLGEN_MAX_ROLES,        \
                 #id " has more than COLLGEN_MAX_ROLES roles");                        \
  static const collgen__scalar_desc scalars_##id[] = {                                 \
      COLLGEN_SCALARS_##NAME(SCALAR_ENTRY){NULL, 0, 0, 0, NULL}};                      \
  _Static_assert(sizeof scalars_##id / sizeof scalars_##id[0] - 1 <= COLLGEN_MAX_SCALARS, \
                 #id " has more than COLLGEN_MAX_SCALARS scalars");
COLLGEN_OP_MAP(ROLE_TABLE)
#undef ROLE_TABLE
#undef SCALAR_ENTRY
#undef ROLE_ENTRY

static const collgen__op_desc ops[] = {
#define OP_ENTRY(NAME, value, id, tpl, min_rank, computes, fp8)                          \
  {COLLGEN_OP_##NAME, #id, tpl, min_rank, computes, fp8,                                \
   (int)(sizeof roles_##id / sizeof roles_##id[0]), roles_##id,                         \
   (int)(sizeof scalars_##id / sizeof scalars_##id[0]) - 1, scalars_##id},
    COLLGEN_OP_MAP(OP_ENTRY)
#undef OP_ENTRY
};

int collgen__role_find(const collgen__op_desc *d, const char *id) {
  for (int k = 0; d && id && k < d->nroles; ++k)
    if (strcmp(d->roles[k].id, id) == 0) return k;
  return -1;
}

int collgen__scalar_find(const collgen__op_desc *d, const char *id) {
  for (int k = 0; d && id && k < d->nscalars; ++k)
    if (strcmp(d->scalars[k].id, id) == 0) return k;
  return -1;
}

static const collgen__fp8_desc fp8_modes[] = {
#define FP8_ENTRY(NAME, value, id, sm) {COLLGEN_FP8_##NAME, #id, sm},
    COLLGEN_FP8_MAP(FP8_ENTRY)
#undef FP8_ENTRY
};

static const collgen__arch_desc archs[] = {
#define ARCH_ENTRY(name, sm) {name, sm},
    COLLGEN_ARCH_MAP(ARCH_ENTRY)
#undef ARCH_ENTRY
};

#define COUNT(a) ((int)(sizeof a / sizeof a[0]))

int collgen__dtype_count(void) { return COUNT(dtypes); }
int collgen__op_count(void) { return COUNT(ops); }
int collgen__fp8_count(void) { return COUNT(fp8_modes); }
int collgen__arch_count(void) { return COUNT(archs); }

const collgen__dtype_desc *collgen__dtype_at(int i) {
  return i >= 0 && i < COUNT(dtypes) ? &dtypes[i] : NULL;
}
const collgen__op_desc *collgen__op_at(int i) {
  return i >= 0 && i < COUNT(ops) ? &ops[i] : NULL;
}
const collgen__fp8_desc *collgen__fp8_at(int i) {
  return i >= 0 && i < COUNT(fp8_modes) ? &fp8_modes[i] : NULL;
}
const collgen__arch_desc *collgen__arch_at(int i) {
  return i >= 0 && i < COUNT(archs) ? &archs[i] : NULL;
}

const collgen__dtype_desc *collgen__dtype_find(collgen_dtype_t dtype) {
  for (int i = 0; i < COUNT(dtypes); ++i)
    if (dtypes[i].dtype == dtype) return &dtypes[i];
  return NULL;
}

const collgen__op_desc *collgen__op_find(collgen_op_t op) {
  for (int i = 0; i < COUNT(ops); ++i)
    if (ops[i].op == op) return &ops[i];
  return NULL;
}

const collgen__fp8_desc *collgen__fp8_find(collgen_fp8_mode_t mode) {
  for (int i = 0; i < COUNT(fp8_modes); ++i)
    if (fp8_modes[i].mode == mode) return &fp8_modes[i];
  return NULL;
}

const collgen__arch_desc *collgen__arch_find(const char *name) {
  for (int i = 0; name && i < COUNT(archs); ++i)
    if (strcmp(archs[i].name, name) == 0) return &archs[i];
  return NULL;
}

const char *collgen__op_name(collgen_op_t op) {
  const collgen__op_desc *d = collgen__op_find(op);
  return d ? d->name : "?";
}

const char *collgen__dtype_name(collgen_dtype_t dtype) {
  const collgen__dtype_desc *d = collgen__dtype_find(dtype);
  return d ? d->name : "?";
}

const char *collgen__fp8_name(collgen_fp8_mode_t mode) {
  const collgen__fp8_desc *d = collgen__fp8_find(mode);
  return d ? d->name : "?";
}

int collgen__dtype_bytes(collgen_dtype_t dtype) {
  const collgen__dtype_desc *d = collgen__dtype_find(dtype);
  return d ? d->bytes : 0;
}

int collgen__dtype_reduces(collgen_dtype_t dtype) {
  const collgen__dtype_desc *d = collgen__dtype_find(dtype);
  return d && d->acc_type;
}

int collgen__parse_op(const char *s, collgen_op_t *op) {
  for (int i = 0; s && i < COUNT(ops); ++i)
    if (strcmp(s, ops[i].name) == 0) { *op = ops[i].op; return 0; }
  return -1;
}

int collgen__parse_dtype(const char *s, collgen_dtype_t *dtype) {
  for (int i = 0; s && i < COUNT(dtypes); ++i)
    if (strcmp(s, dtypes[i].name) == 0) { *dtype = dtypes[i].dtype; return 0; }
  return -1;
}

int collgen__parse_fp8(const char *s, collgen_fp8_mode_t *mode) {
  for (int i = 0; s && i < COUNT(fp8_modes); ++i)
    if (strcmp(s, fp8_modes[i].name) == 0) { *mode = fp8_modes[i].mode; return 0; }
  return -1;
}
