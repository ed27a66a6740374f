/*
** lua_bridge.c -- the generator's calls into gen/main.lua: plan a shape,
** render its source, list a class's variants. It converts collgen_shape_t
** to the planner's shape table and back, and reads plans (specs) back into
** collgen_plan_t; every value read back is checked, never truncated.
*/
#include <limits.h>
#include <lauxlib.h>
#include <lua.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "catalog.h"
#include "device_abi.h"
#include "lua_internal.h"

/* ---- The shape bridge: collgen_shape_t <-> the planner's shape table ----
** Both directions follow COLLGEN_SHAPE_FIELDS (src/collgen.h): one row, one
** key of the table, converted by its kind. */

typedef enum {
  KIND_OP, KIND_DTYPE, KIND_FP8, KIND_INT, KIND_INT64, KIND_GROUP, KIND_BOOL, KIND_ARCH
} shape_kind;

typedef struct {
  const char *name;     /* the field, also its key in the Lua table */
  shape_kind kind;
  size_t offset, size;  /* within collgen_shape_t */
  int64_t lo, hi;       /* INT, INT64, GROUP: the range read back */
} shape_field;

/* Each row's C type has the size its kind is read and written with. */
#define CHECK_SHAPE_ROW(type, name, bound, kind, lo, hi, dflt, doc)                    \
  _Static_assert(KIND_##kind == KIND_ARCH                                              \
                     ? sizeof(type) == 1 && sizeof(type bound) > 1                     \
                     : sizeof(type bound) == (KIND_##kind == KIND_INT64 ? sizeof(int64_t) \
                                                                         : sizeof(int)), \
                 "collgen_shape_t." #name ": the C type does not fit the kind " #kind);
COLLGEN_SHAPE_FIELDS(CHECK_SHAPE_ROW)
#undef CHECK_SHAPE_ROW

static const shape_field shape_fields[] = {
#define SHAPE_ROW(type, name, bound, kind, lo, hi, dflt, doc) \
  {#name, KIND_##kind, offsetof(collgen_shape_t, name), sizeof(type bound), lo, hi},
    COLLGEN_SHAPE_FIELDS(SHAPE_ROW)
#undef SHAPE_ROW
};
#define SHAPE_FIELD_COUNT (sizeof shape_fields / sizeof shape_fields[0])

/* The integer value of field f of *s (INT64 as int64_t, the rest as int). */
static int64_t get_integer(const collgen_shape_t *s, const shape_field *f) {
  const char *p = (const char *)s + f->offset;
  if (f->kind == KIND_INT64) {
    int64_t v;
    memcpy(&v, p, sizeof v);
    return v;
  }
  int v;
  memcpy(&v, p, sizeof v);
  return v;
}

/* Stores v (within the field's range) into field f of *s. */
static void set_integer(collgen_shape_t *s, const shape_field *f, int64_t v) {
  char *p = (char *)s + f->offset;
  if (f->kind == KIND_INT64) {
    memcpy(p, &v, sizeof v);
  } else {
    int x = (int)v;
    memcpy(p, &x, sizeof x);
  }
}

/* What an enum kind is called in messages. */
static const char *enum_noun(shape_kind k) {
  return k == KIND_OP ? "op" : k == KIND_DTYPE ? "dtype" : "fp8 mode";
}

/* The catalog name of value v of an enum kind; NULL when the catalog has none. */
static const char *enum_name(shape_kind k, int v) {
  if (k == KIND_OP)
    return collgen__op_find((collgen_op_t)v) ? collgen__op_name((collgen_op_t)v) : NULL;
  if (k == KIND_DTYPE)
    return collgen__dtype_find((collgen_dtype_t)v) ? collgen__dtype_name((collgen_dtype_t)v)
                                                    : NULL;
  return collgen__fp8_find((collgen_fp8_mode_t)v) ? collgen__fp8_name((collgen_fp8_mode_t)v)
                                                   : NULL;
}

/* The value of catalog name s of an enum kind into *v; -1 when unknown. */
static int enum_parse(shape_kind k, const char *s, int *v) {
  int rc = -1;
  if (k == KIND_OP) {
    collgen_op_t x;
    if ((rc = collgen__parse_op(s, &x)) == 0) *v = (int)x;
  } else if (k == KIND_DTYPE) {
    collgen_dtype_t x;
    if ((rc = collgen__parse_dtype(s, &x)) == 0) *v = (int)x;
  } else {
    collgen_fp8_mode_t x;
    if ((rc = collgen__parse_fp8(s, &x)) == 0) *v = (int)x;
  }
  return rc;
}

/* Pushes *s as gen/planner.lua reads a shape: one key per row, group_size
** resolved (0 = ngpus) and an empty arch as its default. An enum value the
** catalog lacks ("unknown dtype 9") pushes nothing and returns -1. */
static int push_shape(lua_State *L, const collgen_shape_t *s, char *err, size_t n) {
  collgen_shape_t dflt;
  collgen_shape_init(&dflt, s->op);
  lua_createtable(L, 0, (int)SHAPE_FIELD_COUNT);
  for (size_t i = 0; i < SHAPE_FIELD_COUNT; ++i) {
    const shape_field *f = &shape_fields[i];
    int64_t v = f->kind == KIND_ARCH ? 0 : get_integer(s, f);
    switch (f->kind) {
      case KIND_OP:
      case KIND_DTYPE:
      case KIND_FP8: {
        const char *name = enum_name(f->kind, (int)v);
        if (!name) {
          lua_pop(L, 1);
          return collgen__fail(err, n, -1, "unknown %s %d", enum_noun(f->kind), (int)v);
        }
        lua_pushstring(L, name);
        break;
      }
      case KIND_GROUP: lua_pushinteger(L, v ? v : s->ngpus); break;
      case KIND_BOOL: lua_pushboolean(L, v != 0); break;
      case KIND_ARCH: {
        const char *a = (const char *)s + f->offset;
        if (!a[0]) a = (const char *)&dflt + f->offset;
        const char *end = memchr(a, 0, f->size); /* the caller's may lack a NUL */
        lua_pushlstring(L, a, end ? (size_t)(end - a) : f->size);
        break;
      }
      default: lua_pushinteger(L, v);
    }
    lua_setfield(L, -2, f->name);
  }
  return 0;
}

/* Copies the string at stack top (field k of table `table`, for the
** message) into dst[n]; a non-string or one that does not fit is an error,
** never a truncation. Leaves the stack as it was. */
static int copy_top_string(lua_State *L, const char *table, const char *k, char *dst, size_t n,
                           char *err, size_t errn) {
  size_t len = 0;
  const char *v = lua_type(L, -1) == LUA_TSTRING ? lua_tolstring(L, -1, &len) : NULL;
  if (v && len < n && strlen(v) == len) {
    memcpy(dst, v, len + 1);
    return 0;
  }
  return collgen__fail(err, errn, -1, "planner: %s field '%s' is %s (at most %zu bytes fit)",
                       table, k, !v ? "missing" : len < n ? "not a C string" : "too long", n - 1);
}

/* Reads the integer at stack top (field k of `table`) into *v when it is
** an integer in [lo, hi]; else writes a message and returns -1. */
static int top_integer(lua_State *L, const char *table, const char *k, int64_t lo, int64_t hi,
                       int64_t *v, char *err, size_t n) {
  int isnum = 0;
  lua_Integer x = lua_tointegerx(L, -1, &isnum);
  if (!isnum || x < lo || x > hi)
    return collgen__fail(err, n, -1, "planner: %s field '%s' is not an integer in "
                         "[%lld, %lld]", table, k, (long long)lo, (long long)hi);
  *v = (int64_t)x;
  return 0;
}

/* Reads the shape table at stack top into *s, one key per row: an enum by
** catalog name, an integer within its row's range, a boolean, an arch that
** fits. A value of another type, out of range or too long is refused with
** a message naming the field, never truncated; returns -1 then. */
static int read_shape(lua_State *L, collgen_shape_t *s, char *err, size_t n) {
  memset(s, 0, sizeof *s); /* padding too: shapes are compared as bytes */
  for (size_t i = 0; i < SHAPE_FIELD_COUNT; ++i) {
    const shape_field *f = &shape_fields[i];
    lua_getfield(L, -1, f->name);
    int bad = 0, e = 0;
    int64_t v = 0;
    switch (f->kind) {
      case KIND_OP:
      case KIND_DTYPE:
      case KIND_FP8: {
        const char *name = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
        if (!name || enum_parse(f->kind, name, &e) != 0)
          bad = collgen__fail(err, n, -1, "planner: shape field '%s' is not a known %s",
                              f->name, enum_noun(f->kind));
        v = e;
        break;
      }
      case KIND_BOOL:
        if (!lua_isboolean(L, -1))
          bad = collgen__fail(err, n, -1, "planner: shape field '%s' is not a boolean", f->name);
        v = lua_toboolean(L, -1);
        break;
      case KIND_ARCH:
        bad = copy_top_string(L, "shape", f->name, (char *)s + f->offset, f->size, err, n);
        break;
      default: bad = top_integer(L, "shape", f->name, f->lo, f->hi, &v, err, n);
    }
    lua_pop(L, 1);
    if (bad) return -1;
    if (f->kind != KIND_ARCH) set_integer(s, f, v);
  }
  return 0;
}

/* ---- The calls: plan, render, variants --------------------------------- */

/* Pushes main[fn] (a function) onto the stack. */
static void push_main_fn(collgen__lua *h, const char *fn) {
  lua_rawgeti(h->L, LUA_REGISTRYINDEX, h->main_ref);
  lua_getfield(h->L, -1, fn);
  lua_remove(h->L, -2);
}

/* The planner's own refusals of a shape start with this (gen/planner.lua's
** fail); any other error of the planner is the generator's fault. */
#define PLANNER_REFUSAL "planner: "

/* collgen__lua_protected_call of a planner function with its one argument
** pushed: a Lua error other than the planner's refusals becomes
** COLLGEN__LUA_CALL_GENERATOR. */
static int planner_call(collgen__lua *h, char *err, size_t n) {
  int call = collgen__lua_protected_call(h, 1, 1, err, n);
  if (call == COLLGEN__LUA_CALL_ERROR &&
      strncmp(err, PLANNER_REFUSAL, sizeof PLANNER_REFUSAL - 1) != 0)
    call = COLLGEN__LUA_CALL_GENERATOR;
  return call;
}

/* Leaves the spec table of `shape` on the stack, or returns
** COLLGEN__LUA_CALL_ERROR (a shape the catalog or the planner refuses;
** message in err), COLLGEN__LUA_CALL_BUDGET or COLLGEN__LUA_CALL_GENERATOR
** (the planner failed: a Lua error other than its refusals, such as a
** broken COLLGEN_TEMPLATE_DIR tree). */
static int plan_to_stack(collgen__lua *h, const collgen_shape_t *shape,
                         char *err, size_t n) {
  push_main_fn(h, "plan");
  if (push_shape(h->L, shape, err, n) != 0) {
    lua_pop(h->L, 1);
    return COLLGEN__LUA_CALL_ERROR;
  }
  return planner_call(h, err, n);
}

/* The status of a failed planner call: the caller's shape
** (COLLGEN_ERR_INVALID_ARG) when refused, else the generator's fault
** (COLLGEN_ERR_TEMPLATE: its budget, or an error in its Lua). */
static int plan_status(int call) {
  return call == COLLGEN__LUA_CALL_ERROR ? COLLGEN_ERR_INVALID_ARG : COLLGEN_ERR_TEMPLATE;
}

static int str_field(lua_State *L, const char *k, char *dst, size_t n, char *err,
                     size_t errn) {
  lua_getfield(L, -1, k);
  int rc = copy_top_string(L, "spec", k, dst, n, err, errn);
  lua_pop(L, 1);
  return rc;
}

/* Reads integer field k of the spec at stack top into *v when it is an
** integer in [lo, hi]; else writes a message and returns -1. */
static int int_field(lua_State *L, const char *k, int64_t lo, int64_t hi, int64_t *v,
                     char *err, size_t n) {
  lua_getfield(L, -1, k);
  int rc = top_integer(L, "spec", k, lo, hi, v, err, n);
  lua_pop(L, 1);
  return rc;
}

static int int_field_i(lua_State *L, const char *k, int lo, int hi, int *v, char *err,
                       size_t n) {
  int64_t x = 0;
  if (int_field(L, k, lo, hi, &x, err, n) != 0) return -1;
  *v = (int)x;
  return 0;
}

/* The role of op d named by the string at stack top (what = the spec
** field, for the message), or -1 with err set. Leaves the stack as it was. */
static int top_role(lua_State *L, const collgen__op_desc *d, const char *what, char *err,
                    size_t n) {
  const char *name = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
  int k = collgen__role_find(d, name);
  if (k < 0)
    collgen__fail(err, n, -1, "planner: spec field '%s' names no role of %s", what, d->name);
  return k;
}

/* *mask = the roles listed in spec field k (a list of role names). */
static int role_mask_field(lua_State *L, const collgen__op_desc *d, const char *k,
                           unsigned *mask, char *err, size_t n) {
  *mask = 0;
  lua_getfield(L, -1, k);
  int bad = lua_type(L, -1) != LUA_TTABLE;
  if (bad) collgen__fail(err, n, -1, "planner: spec field '%s' is not a list of roles", k);
  for (lua_Integer i = 1; !bad; ++i) {
    if (lua_rawgeti(L, -1, i) == LUA_TNIL) {
      lua_pop(L, 1);
      break;
    }
    int role = top_role(L, d, k, err, n);
    lua_pop(L, 1);
    bad = role < 0;
    if (!bad) *mask |= 1u << role;
  }
  lua_pop(L, 1);
  return bad ? -1 : 0;
}

/* plan->copy_from/copy_to from spec field copy ({from = role, to = role}
** or nil: -1, -1). */
static int copy_field(lua_State *L, const collgen__op_desc *d, collgen_plan_t *plan, char *err,
                      size_t n) {
  plan->copy_from = plan->copy_to = -1;
  lua_getfield(L, -1, "copy");
  int bad = 0;
  if (lua_type(L, -1) == LUA_TTABLE) {
    lua_getfield(L, -1, "from");
    plan->copy_from = top_role(L, d, "copy.from", err, n);
    lua_getfield(L, -2, "to");
    plan->copy_to = plan->copy_from < 0 ? -1 : top_role(L, d, "copy.to", err, n);
    lua_pop(L, 2);
    bad = plan->copy_from < 0 || plan->copy_to < 0;
  } else if (!lua_isnil(L, -1)) {
    bad = collgen__fail(err, n, -1, "planner: spec field 'copy' is not {from, to}");
  }
  lua_pop(L, 1);
  return bad ? -1 : 0;
}

int collgen__lua_plan(collgen__lua *h, const collgen_shape_t *shape,
                      collgen_plan_t *plan, char *err, size_t n) {
  memset(plan, 0, sizeof *plan);
  int rc = collgen__lua_ready(h, err, n);
  if (rc != COLLGEN_OK) return rc;
  lua_State *L = h->L;
  int call = plan_to_stack(h, shape, err, n);
  if (call != COLLGEN__LUA_CALL_OK) return plan_status(call);
  int bad = str_field(L, "kernel", plan->kernel, sizeof plan->kernel, err, n) ||
            str_field(L, "algo", plan->algo, sizeof plan->algo, err, n) ||
            int_field_i(L, "group", 1, COLLGEN_MAX_DEVICES, &plan->group, err, n) ||
            int_field_i(L, "vec", 1, 16, &plan->vec, err, n) ||
            int_field_i(L, "block", 1, 1024, &plan->block, err, n) ||
            /* a group of one touches no signal slot (COLLGEN_LOCAL_MAX_GRID) */
            int_field_i(L, "grid", 1, plan->group == 1 ? COLLGEN_LOCAL_MAX_GRID : COLLGEN_MAX_BLOCKS,
                        &plan->grid, err, n) ||
            int_field_i(L, "items", 0, 1024, &plan->items, err, n) ||
            int_field(L, "cols", 0, INT64_MAX, &plan->cols, err, n);
  const collgen__op_desc *d = collgen__op_find(shape->op);
  bad = bad || !d || role_mask_field(L, d, "peer_reads", &plan->peer_reads, err, n) ||
        role_mask_field(L, d, "peer_writes", &plan->peer_writes, err, n) ||
        copy_field(L, d, plan, err, n);
  if (bad) {
    lua_pop(L, 1);
    return COLLGEN_ERR_TEMPLATE;
  }
  push_main_fn(h, "canonical");
  lua_insert(L, -2);
  if (collgen__lua_protected_call(h, 1, 1, err, n) != COLLGEN__LUA_CALL_OK)
    return COLLGEN_ERR_TEMPLATE;
  bad = copy_top_string(L, "spec", "canonical", plan->canonical, sizeof plan->canonical, err, n);
  lua_pop(L, 1);
  return bad ? COLLGEN_ERR_TEMPLATE : COLLGEN_OK;
}

/* Calls the function below 2 + nextra values (spec, extra arguments,
** line_directives) and copies the string it returns into *source. */
static int finish_render(collgen__lua *h, int nargs, char **source, char *err, size_t n) {
  lua_State *L = h->L;
  if (collgen__lua_protected_call(h, nargs, 1, err, n) != COLLGEN__LUA_CALL_OK)
    return COLLGEN_ERR_TEMPLATE;
  size_t len;
  const char *text = lua_tolstring(L, -1, &len);
  if (!text) {
    lua_pop(L, 1);
    return collgen__fail(err, n, COLLGEN_ERR_TEMPLATE, "the renderer returned no text");
  }
  *source = malloc(len + 1);
  if (!*source) {
    lua_pop(L, 1);
    return collgen__fail(err, n, COLLGEN_ERR_NO_MEMORY, "out of memory");
  }
  memcpy(*source, text, len + 1);
  lua_pop(L, 1);
  return COLLGEN_OK;
}

int collgen__lua_render(collgen__lua *h, const collgen_shape_t *shape,
                        int line_directives, char **source, char *err,
                        size_t n) {
  *source = NULL;
  int rc = collgen__lua_ready(h, err, n);
  if (rc != COLLGEN_OK) return rc;
  int call = plan_to_stack(h, shape, err, n);
  if (call != COLLGEN__LUA_CALL_OK) return plan_status(call);
  push_main_fn(h, "render");
  lua_insert(h->L, -2);
  lua_pushboolean(h->L, line_directives);
  return finish_render(h, 2, source, err, n);
}

int collgen__lua_render_text(collgen__lua *h, const collgen_shape_t *shape,
                             const char *text, size_t len, int line_directives,
                             char **source, char *err, size_t n) {
  *source = NULL;
  int rc = collgen__lua_ready(h, err, n);
  if (rc != COLLGEN_OK) return rc;
  int call = plan_to_stack(h, shape, err, n);
  if (call != COLLGEN__LUA_CALL_OK) return plan_status(call);
  if (!lua_checkstack(h->L, 4)) {
    lua_pop(h->L, 1);
    return collgen__fail(err, n, COLLGEN_ERR_NO_MEMORY, "out of memory");
  }
  push_main_fn(h, "render_text");
  lua_insert(h->L, -2);
  lua_pushlstring(h->L, text, len); /* within the state's memory budget: may fail */
  lua_pushboolean(h->L, line_directives);
  rc = finish_render(h, 3, source, err, n);
  /* leave no garbage behind: a fuzzer counts the allocations of an input */
  if (!h->stale) lua_gc(h->L, LUA_GCCOLLECT);
  return rc;
}

/* Pushes a shape class as the planner reads it (planner.variants). */
static void push_class(lua_State *L, const collgen_shape_class_t *c) {
  lua_createtable(L, 0, 6);
  lua_pushstring(L, collgen__op_name(c->op));
  lua_setfield(L, -2, "op");
  lua_pushstring(L, collgen__dtype_name(c->dtype));
  lua_setfield(L, -2, "dtype");
  lua_pushinteger(L, c->ngpus);
  lua_setfield(L, -2, "ngpus");
  lua_pushstring(L, c->arch[0] ? c->arch : "sm_90");
  lua_setfield(L, -2, "arch");
  if (c->group_sizes) {
    lua_createtable(L, c->group_size_count, 0);
    for (int i = 0; i < c->group_size_count; ++i) {
      lua_pushinteger(L, c->group_sizes[i]);
      lua_rawseti(L, -2, i + 1);
    }
    lua_setfield(L, -2, "group_sizes");
  }
  lua_createtable(L, c->cols ? c->cols_count : 0, 0);
  for (int i = 0; c->cols && i < c->cols_count; ++i) {
    lua_pushinteger(L, c->cols[i]);
    lua_rawseti(L, -2, i + 1);
  }
  lua_setfield(L, -2, "cols");
  if (c->fp8_modes) {
    lua_createtable(L, c->fp8_mode_count, 0);
    for (int i = 0; i < c->fp8_mode_count; ++i) {
      lua_pushstring(L, collgen__fp8_name(c->fp8_modes[i]));
      lua_rawseti(L, -2, i + 1);
    }
    lua_setfield(L, -2, "fp8");
  }
}

/* Fills *s from the variant at stack top ({shape, spec, canonical}): every
** field from variant.shape (the planner copies the class's own fields). */
static int read_variant(lua_State *L, collgen_shape_t *s, char *err, size_t n) {
  if (lua_getfield(L, -1, "shape") != LUA_TTABLE) {
    lua_pop(L, 1);
    return collgen__fail(err, n, -1, "planner: a variant has no shape");
  }
  int bad = read_shape(L, s, err, n);
  lua_pop(L, 1);
  return bad;
}

int collgen__lua_variants(collgen__lua *h, const collgen_shape_class_t *cls,
                          collgen_shape_t **shapes, int *count, char *err, size_t n) {
  *shapes = NULL;
  *count = 0;
  if (!collgen__op_find(cls->op))
    return collgen__fail(err, n, COLLGEN_ERR_INVALID_ARG, "unknown op %d", (int)cls->op);
  if (!collgen__dtype_find(cls->dtype))
    return collgen__fail(err, n, COLLGEN_ERR_INVALID_ARG, "unknown dtype %d", (int)cls->dtype);
  if (cls->group_size_count < 0 || cls->cols_count < 0 || cls->fp8_mode_count < 0)
    return collgen__fail(err, n, COLLGEN_ERR_INVALID_ARG, "negative list length");
  for (int i = 0; cls->fp8_modes && i < cls->fp8_mode_count; ++i)
    if (!collgen__fp8_find(cls->fp8_modes[i]))
      return collgen__fail(err, n, COLLGEN_ERR_INVALID_ARG, "unknown fp8 mode %d",
                           (int)cls->fp8_modes[i]);
  int rc = collgen__lua_ready(h, err, n);
  if (rc != COLLGEN_OK) return rc;
  lua_State *L = h->L;
  push_main_fn(h, "variants");
  push_class(L, cls);
  int call = planner_call(h, err, n);
  if (call != COLLGEN__LUA_CALL_OK) return plan_status(call);
  lua_Integer len = lua_type(L, -1) == LUA_TTABLE ? luaL_len(L, -1) : -1;
  if (len < 0 || len > INT_MAX / (lua_Integer)sizeof **shapes)
    rc = collgen__fail(err, n, COLLGEN_ERR_TEMPLATE, "planner: variants is not a list");
  collgen_shape_t *out = len > 0 && rc == COLLGEN_OK ? calloc((size_t)len, sizeof *out) : NULL;
  if (len > 0 && rc == COLLGEN_OK && !out)
    rc = collgen__fail(err, n, COLLGEN_ERR_NO_MEMORY, "out of memory");
  for (lua_Integer i = 1; rc == COLLGEN_OK && i <= len; ++i) {
    lua_rawgeti(L, -1, i);
    if (!lua_istable(L, -1))
      rc = collgen__fail(err, n, COLLGEN_ERR_TEMPLATE, "planner: variant %d is not a table",
                         (int)i);
    else if (read_variant(L, &out[i - 1], err, n) != 0)
      rc = COLLGEN_ERR_TEMPLATE;
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  if (rc != COLLGEN_OK) {
    free(out);
    return rc;
  }
  *shapes = out;
  *count = (int)len;
  return COLLGEN_OK;
}
