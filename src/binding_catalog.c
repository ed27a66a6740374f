/*
** binding_catalog.c -- the library's description of itself for language
** bindings (collgen_catalog_count, collgen_catalog_entry): status codes,
** ops (which compute on elements, which write FP8, their roles and scalars), dtypes, FP8 modes, transports and rank states from the X-macros of
** collgen.h, the size of every public struct and the numeric constants.
** A binding reads these at load time, so nothing of collgen.h is copied
** into it by hand, and a stale binding is refused instead of writing past
** a struct that has grown.
*/
#include <pthread.h>
#include <stdalign.h>
#include <stdio.h>
#include <string.h>

#include "catalog.h"
#include "collgen.h"
#include "internal.h"

typedef struct {
  const char *name;
  int64_t value;
  int64_t detail;
} entry;

static const entry status_entries[] = {
#define STATUS_ROW(name, value, desc) {#name, value, 0},
    COLLGEN_ERRNO_MAP(STATUS_ROW)
#undef STATUS_ROW
};

static const entry op_entries[] = {
#define OP_ROW(NAME, value, id, tpl, min_rank, computes, fp8) {#id, value, min_rank},
    COLLGEN_OP_MAP(OP_ROW)
#undef OP_ROW
};

static const entry op_computes_entries[] = {
#define OP_COMPUTES_ROW(NAME, value, id, tpl, min_rank, computes, fp8) {#id, value, computes},
    COLLGEN_OP_MAP(OP_COMPUTES_ROW)
#undef OP_COMPUTES_ROW
};

static const entry op_fp8_entries[] = {
#define OP_FP8_ROW(NAME, value, id, tpl, min_rank, computes, fp8) {#id, value, fp8},
    COLLGEN_OP_MAP(OP_FP8_ROW)
#undef OP_FP8_ROW
};

/* Every op's roles and scalars, op by op in catalog order, each in the
** op's order (its index in collgen_call_t's buffers[] and scalars[]):
**   op_role:    {role id, op, is_output | use << 1 | elem_bytes << 8}
**   op_scalar:  {scalar id, op, type | check << 4}
**   op_scalar_default: {scalar id, op, the default's IEEE-754 double bits}
** (use, type and check as in src/catalog.h). Filled once from the
** catalog's descriptors; the counts are constants of the X-macros. */
#define ONE_ROW(...) +1
#define COUNT_ROLES(NAME, value, id, tpl, min_rank, computes, fp8) COLLGEN_ROLES_##NAME(ONE_ROW)
#define COUNT_SCALARS(NAME, value, id, tpl, min_rank, computes, fp8) COLLGEN_SCALARS_##NAME(ONE_ROW)
enum {
  ROLE_ROWS = 0 COLLGEN_OP_MAP(COUNT_ROLES),
  SCALAR_ROWS = 0 COLLGEN_OP_MAP(COUNT_SCALARS)
};
#undef COUNT_SCALARS
#undef COUNT_ROLES
#undef ONE_ROW
static entry op_role_entries[ROLE_ROWS];
static entry op_scalar_entries[SCALAR_ROWS > 0 ? SCALAR_ROWS : 1];
static entry op_scalar_default_entries[SCALAR_ROWS > 0 ? SCALAR_ROWS : 1];
static pthread_once_t op_rows_once = PTHREAD_ONCE_INIT;

static void fill_op_rows(void) {
  int nr = 0, ns = 0;
  for (int i = 0; i < collgen__op_count(); ++i) {
    const collgen__op_desc *d = collgen__op_at(i);
    for (int k = 0; k < d->nroles && nr < ROLE_ROWS; ++k, ++nr) {
      const collgen__role_desc *r = &d->roles[k];
      op_role_entries[nr] = (entry){r->id, d->op, r->is_output | r->use << 1 | r->elem_bytes << 8};
    }
    for (int k = 0; k < d->nscalars && ns < SCALAR_ROWS; ++k, ++ns) {
      const collgen__scalar_desc *sc = &d->scalars[k];
      int64_t bits;
      _Static_assert(sizeof bits == sizeof sc->dflt, "a double is not 64 bits");
      memcpy(&bits, &sc->dflt, sizeof bits);
      op_scalar_entries[ns] = (entry){sc->id, d->op, (int64_t)sc->type | (int64_t)sc->check << 4};
      op_scalar_default_entries[ns] = (entry){sc->id, d->op, bits};
    }
  }
}

static const entry dtype_entries[] = {
#define DTYPE_ROW(NAME, value, id, bytes, ctype, acc, sm) {#id, value, bytes},
    COLLGEN_DTYPE_MAP(DTYPE_ROW)
#undef DTYPE_ROW
};

static const entry dtype_reduces_entries[] = {
#define DTYPE_REDUCES_ROW(NAME, value, id, bytes, ctype, acc, sm) {#id, value, (acc) != NULL},
    COLLGEN_DTYPE_MAP(DTYPE_REDUCES_ROW)
#undef DTYPE_REDUCES_ROW
};

static const entry fp8_entries[] = {
#define FP8_ROW(NAME, value, id, sm) {#id, value, sm},
    COLLGEN_FP8_MAP(FP8_ROW)
#undef FP8_ROW
};

static const entry transport_entries[] = {
#define TRANSPORT_ROW(NAME, value, id) {#id, value, 0},
    COLLGEN_TRANSPORT_MAP(TRANSPORT_ROW)
#undef TRANSPORT_ROW
};

static const entry rank_state_entries[] = {
#define RANK_STATE_ROW(NAME, value, id) {#id, value, 0},
    COLLGEN_RANK_STATE_MAP(RANK_STATE_ROW)
#undef RANK_STATE_ROW
};

/* Every public struct of collgen.h, with its size and alignment. */
#define STRUCT_ROW(type) {#type, (int64_t)sizeof(type), (int64_t)alignof(type)},
static const entry struct_entries[] = {
    STRUCT_ROW(collgen_shape_t) STRUCT_ROW(collgen_plan_t) STRUCT_ROW(collgen_shape_class_t)
    STRUCT_ROW(collgen_kernel_info_t) STRUCT_ROW(collgen_comm_options_t)
    STRUCT_ROW(collgen_comm_info_t) STRUCT_ROW(collgen_comm_health_t)
    STRUCT_ROW(collgen_unique_id_t) STRUCT_ROW(collgen_call_t)};
#undef STRUCT_ROW

/* The numeric macros of collgen.h, named without the COLLGEN_ prefix. */
#define CONSTANT_ROW(name) {#name, (int64_t)COLLGEN_##name, 0},
static const entry constant_entries[] = {
    CONSTANT_ROW(VERSION_MAJOR) CONSTANT_ROW(VERSION_MINOR) CONSTANT_ROW(VERSION_PATCH)
    CONSTANT_ROW(MAX_DEVICES) CONSTANT_ROW(MAX_ELEMS) CONSTANT_ROW(MAX_TIMEOUT_MS)
    CONSTANT_ROW(DEFAULT_TIMEOUT_MS) CONSTANT_ROW(LOG_WARN) CONSTANT_ROW(LOG_INFO)
    CONSTANT_ROW(DEFAULT_STAGING_BYTES) CONSTANT_ROW(MIN_STAGING_BYTES)
    CONSTANT_ROW(MAX_STAGING_BYTES) CONSTANT_ROW(UNIQUE_ID_BYTES)
    CONSTANT_ROW(UNIQUE_ID_TEXT_LEN) CONSTANT_ROW(MAX_ROLES) CONSTANT_ROW(MAX_SCALARS)};
#undef CONSTANT_ROW

#define TABLE(name, rows) {name, rows, (int)(sizeof rows / sizeof rows[0])}
#define TABLE_N(name, rows, n) {name, rows, n}
static const struct {
  const char *name;
  const entry *rows;
  int count;
} tables[] = {
    TABLE("status", status_entries),         TABLE("op", op_entries),
    TABLE("op_computes", op_computes_entries), TABLE("op_fp8", op_fp8_entries),
    TABLE_N("op_role", op_role_entries, ROLE_ROWS),
    TABLE_N("op_scalar", op_scalar_entries, SCALAR_ROWS),
    TABLE_N("op_scalar_default", op_scalar_default_entries, SCALAR_ROWS),
    TABLE("dtype", dtype_entries),           TABLE("dtype_reduces", dtype_reduces_entries),
    TABLE("fp8", fp8_entries),
    TABLE("transport", transport_entries),   TABLE("rank_state", rank_state_entries),
    TABLE("struct", struct_entries),         TABLE("constant", constant_entries),
};
#undef TABLE_N
#undef TABLE

/* The index of the table called `name`, or -1 with the thread's message set. */
static int find_table(const char *name) {
  pthread_once(&op_rows_once, fill_op_rows);
  if (name)
    for (size_t i = 0; i < sizeof tables / sizeof tables[0]; ++i)
      if (strcmp(tables[i].name, name) == 0) return (int)i;
  char msg[256];
  int n = snprintf(msg, sizeof msg, "collgen_catalog: unknown table '%.40s' (known: ",
                   name ? name : "(NULL)");
  /* 40 + the names fit in msg; the bound on n keeps a longer list from overrunning */
  for (size_t i = 0; i < sizeof tables / sizeof tables[0] && n < (int)sizeof msg; ++i)
    n += snprintf(msg + n, sizeof msg - (size_t)n, "%s%s", i ? ", " : "", tables[i].name);
  if (n < (int)sizeof msg) snprintf(msg + n, sizeof msg - (size_t)n, ")");
  collgen__set_tls_error(msg);
  return -1;
}

int collgen_catalog_count(const char *table) {
  int t = find_table(table);
  return t < 0 ? COLLGEN_ERR_INVALID_ARG : tables[t].count;
}

int collgen_catalog_entry(const char *table, int index, const char **name, int64_t *value,
                          int64_t *detail) {
  int t = find_table(table);
  if (t < 0) return COLLGEN_ERR_INVALID_ARG;
  if (index < 0 || index >= tables[t].count) {
    char msg[128];
    snprintf(msg, sizeof msg, "collgen_catalog_entry: index %d outside 0..%d of table '%s'",
             index, tables[t].count - 1, tables[t].name);
    collgen__set_tls_error(msg);
    return COLLGEN_ERR_INVALID_ARG;
  }
  const entry *e = &tables[t].rows[index];
  if (name) *name = e->name;
  if (value) *value = e->value;
  if (detail) *detail = e->detail;
  return COLLGEN_OK;
}
