/*
** lua_host.c -- the embedded Lua 5.4 generator.
**
** One lua_State per generator, never shared across threads. Only the base,
** string, table and math libraries are opened, and Lua code runs in a
** sandbox table that exposes a safe subset of the base library plus three
** host functions: import(name) loads gen/<name>.lua, read_source(path)
** returns an embedded file, compile_chunk(code, chunkname) loads text-only
** Lua. There is no io, os, load, dofile or require. Every call goes through
** lua_pcall with a traceback handler, and a count hook bounds run time.
*/
#include <lauxlib.h>
#include <limits.h>
#include <lua.h>
#include <lualib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "embedded.h"
#include "lua_catalog.h"
#include "lua_host.h"
#include "device_abi.h"
#include "sha256.h"

#define HOOK_EVERY 100000
#define HOOK_BUDGET 2000 /* x HOOK_EVERY instructions per call */

struct collgen__lua {
  lua_State *L;
  int main_ref;
  int env_ref;
  int hook_ticks;
  const char *template_dir;
  uint8_t bundle_hash[32];
};

static const collgen__embedded_file *find_embedded(const char *path) {
  for (const collgen__embedded_file *f = collgen__embedded_files; f->path; ++f)
    if (strcmp(f->path, path) == 0) return f;
  return NULL;
}

/* Reads a whole file into a malloc'd NUL-terminated buffer, or NULL. */
static char *read_file(const char *path, size_t *size) {
  FILE *fp = fopen(path, "rb");
  if (!fp) return NULL;
  char *buf = NULL;
  size_t cap = 0, len = 0;
  for (;;) {
    if (len + 4096 + 1 > cap) {
      cap = cap ? cap * 2 : 16384;
      char *nb = realloc(buf, cap);
      if (!nb) { free(buf); fclose(fp); return NULL; }
      buf = nb;
    }
    size_t got = fread(buf + len, 1, cap - len - 1, fp);
    len += got;
    if (got == 0) break;
  }
  fclose(fp);
  buf[len] = 0;
  *size = len;
  return buf;
}

/* Pushes the text of a source file (from the template dir when set, else
** embedded) or nil. */
static void push_source(lua_State *L, const collgen__lua *h, const char *path) {
  if (h->template_dir) {
    char full[4096];
    size_t size;
    snprintf(full, sizeof full, "%s/%s", h->template_dir, path);
    char *text = read_file(full, &size);
    if (text) {
      lua_pushlstring(L, text, size);
      free(text);
      return;
    }
  }
  const collgen__embedded_file *f = find_embedded(path);
  if (f) lua_pushlstring(L, (const char *)f->bytes, f->size);
  else lua_pushnil(L);
}

static collgen__lua *host_of(lua_State *L) {
  return lua_touserdata(L, lua_upvalueindex(1));
}

/* read_source(path) -> text or nil */
static int l_read_source(lua_State *L) {
  push_source(L, host_of(L), luaL_checkstring(L, 1));
  return 1;
}

/* Loads text-only Lua from the string at stack top with _ENV = env table at
** env_index; leaves the function on the stack or raises. */
static void load_text(lua_State *L, const char *code, size_t len,
                      const char *chunkname, int env_index) {
  if (luaL_loadbufferx(L, code, len, chunkname, "t") != LUA_OK) lua_error(L);
  lua_pushvalue(L, env_index);
  lua_setupvalue(L, -2, 1);
}

/* compile_chunk(code, chunkname) -> function (its _ENV is an empty table;
** template chunks bind their own environment from their argument). */
static int l_compile_chunk(lua_State *L) {
  size_t len;
  const char *code = luaL_checklstring(L, 1, &len);
  const char *name = luaL_checkstring(L, 2);
  lua_newtable(L);
  load_text(L, code, len, name, lua_gettop(L));
  return 1;
}

/* import(name) -> the value returned by gen/<name>.lua (loaded once). */
static int l_import(lua_State *L) {
  collgen__lua *h = host_of(L);
  const char *name = luaL_checkstring(L, 1);
  lua_getfield(L, LUA_REGISTRYINDEX, "collgen.modules");
  if (lua_getfield(L, -1, name) != LUA_TNIL) return 1;
  lua_pop(L, 1);
  char path[256], chunkname[260];
  snprintf(path, sizeof path, "gen/%s.lua", name);
  snprintf(chunkname, sizeof chunkname, "@%s", path);
  push_source(L, h, path);
  if (lua_isnil(L, -1)) return luaL_error(L, "no generator module '%s'", path);
  size_t len;
  const char *code = lua_tolstring(L, -1, &len);
  lua_rawgeti(L, LUA_REGISTRYINDEX, h->env_ref);
  load_text(L, code, len, chunkname, lua_gettop(L));
  lua_call(L, 0, 1);
  lua_pushvalue(L, -1);
  lua_setfield(L, -5, name); /* modules[name] = result */
  return 1;
}

static int traceback_handler(lua_State *L) {
  const char *msg = lua_tostring(L, 1);
  if (!msg) msg = "(error object is not a string)";
  if (strncmp(msg, "planner: ", 9) == 0) return 1; /* a user error, not a bug */
  luaL_traceback(L, L, msg, 1);
  return 1;
}

static void count_hook(lua_State *L, lua_Debug *ar) {
  COLLGEN_UNUSED(ar);
  collgen__lua *h;
  lua_getfield(L, LUA_REGISTRYINDEX, "collgen.host");
  h = lua_touserdata(L, -1);
  lua_pop(L, 1);
  if (++h->hook_ticks > HOOK_BUDGET)
    luaL_error(L, "generator ran too long (infinite loop in a template?)");
}

/* Calls the function below `nargs` arguments on the stack in protected
** mode. On error copies the message into err and returns -1. */
static int protected_call(collgen__lua *h, int nargs, int nres, char *err,
                          size_t n) {
  lua_State *L = h->L;
  int base = lua_gettop(L) - nargs;
  lua_pushcfunction(L, traceback_handler);
  lua_insert(L, base);
  h->hook_ticks = 0;
  int rc = lua_pcall(L, nargs, nres, base);
  lua_remove(L, base);
  if (rc != LUA_OK) {
    snprintf(err, n, "%s", lua_tostring(L, -1) ? lua_tostring(L, -1) : "?");
    lua_pop(L, 1);
    return -1;
  }
  return 0;
}

/* Hashes every source the state can load and publishes the catalog as the
** sandbox global `catalog`; both feed bundle_hash, since the generated code
** depends on both. */
static void publish_catalog_and_hash(collgen__lua *h) {
  collgen__sha256_ctx s;
  collgen__sha256_init(&s);
  for (const collgen__embedded_file *f = collgen__embedded_files; f->path; ++f) {
    push_source(h->L, h, f->path);
    size_t len = 0;
    const char *text = lua_tolstring(h->L, -1, &len);
    collgen__sha256_field(&s, f->path, text ? text : "", text ? len : 0);
    lua_pop(h->L, 1);
  }
  lua_rawgeti(h->L, LUA_REGISTRYINDEX, h->env_ref);
  collgen__lua_push_catalog(h->L, &s);
  lua_setfield(h->L, -2, "catalog");
  lua_pop(h->L, 1);
  collgen__sha256_final(&s, h->bundle_hash);
}

static void build_sandbox(collgen__lua *h) {
  static const char *const safe[] = {
      "assert", "error", "ipairs", "next", "pairs", "pcall", "select",
      "tonumber", "tostring", "type", "setmetatable", "getmetatable",
      "rawequal", "rawget", "rawlen", "rawset", "xpcall", "string", "table",
      "math", NULL};
  lua_State *L = h->L;
  lua_newtable(L);
  for (int i = 0; safe[i]; ++i) {
    lua_getglobal(L, safe[i]);
    lua_setfield(L, -2, safe[i]);
  }
  static const struct { const char *name; lua_CFunction fn; } host_fns[] = {
      {"import", l_import}, {"read_source", l_read_source},
      {"compile_chunk", l_compile_chunk}};
  for (size_t i = 0; i < sizeof host_fns / sizeof host_fns[0]; ++i) {
    lua_pushlightuserdata(L, h);
    lua_pushcclosure(L, host_fns[i].fn, 1);
    lua_setfield(L, -2, host_fns[i].name);
  }
  h->env_ref = luaL_ref(L, LUA_REGISTRYINDEX);
}

int collgen__lua_create(collgen__lua **out, char *err, size_t n) {
  *out = NULL;
  collgen__lua *h = calloc(1, sizeof *h);
  if (!h) return collgen__fail(err, n, COLLGEN_ERR_NO_MEMORY, "out of memory");
  h->L = luaL_newstate();
  if (!h->L) {
    free(h);
    return collgen__fail(err, n, COLLGEN_ERR_NO_MEMORY, "cannot create a Lua state");
  }
  h->template_dir = collgen__param_template_dir();
  lua_State *L = h->L;
  luaL_requiref(L, "_G", luaopen_base, 1);
  luaL_requiref(L, LUA_STRLIBNAME, luaopen_string, 1);
  luaL_requiref(L, LUA_TABLIBNAME, luaopen_table, 1);
  luaL_requiref(L, LUA_MATHLIBNAME, luaopen_math, 1);
  lua_settop(L, 0);
  lua_newtable(L);
  lua_setfield(L, LUA_REGISTRYINDEX, "collgen.modules");
  lua_pushlightuserdata(L, h);
  lua_setfield(L, LUA_REGISTRYINDEX, "collgen.host");
  build_sandbox(h);
  publish_catalog_and_hash(h);
  lua_sethook(L, count_hook, LUA_MASKCOUNT, HOOK_EVERY);

  lua_pushlightuserdata(L, h);
  lua_pushcclosure(L, l_import, 1);
  lua_pushstring(L, "main");
  if (protected_call(h, 1, 1, err, n) != 0) {
    collgen__lua_destroy(h);
    return COLLGEN_ERR_TEMPLATE;
  }
  h->main_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  *out = h;
  return COLLGEN_OK;
}

void collgen__lua_destroy(collgen__lua *h) {
  if (!h) return;
  lua_close(h->L);
  free(h);
}

const uint8_t *collgen__lua_bundle_hash(const collgen__lua *h) {
  return h->bundle_hash;
}

static void push_shape(lua_State *L, const collgen_shape_t *s) {
  lua_createtable(L, 0, 12);
  lua_pushstring(L, collgen__op_name(s->op));
  lua_setfield(L, -2, "op");
  lua_pushstring(L, collgen__dtype_name(s->dtype));
  lua_setfield(L, -2, "dtype");
  lua_pushinteger(L, s->ngpus);
  lua_setfield(L, -2, "ngpus");
  lua_pushinteger(L, s->group_size ? s->group_size : s->ngpus);
  lua_setfield(L, -2, "group_size");
  lua_pushinteger(L, s->tensor_rank);
  lua_setfield(L, -2, "tensor_rank");
  lua_pushinteger(L, s->elems);
  lua_setfield(L, -2, "elems");
  lua_pushinteger(L, s->rows);
  lua_setfield(L, -2, "rows");
  lua_pushinteger(L, s->cols);
  lua_setfield(L, -2, "cols");
  lua_pushboolean(L, s->aligned16);
  lua_setfield(L, -2, "aligned16");
  lua_pushboolean(L, s->inplace);
  lua_setfield(L, -2, "inplace");
  lua_pushinteger(L, s->max_blocks);
  lua_setfield(L, -2, "max_blocks");
  lua_pushstring(L, s->arch[0] ? s->arch : "sm_90");
  lua_setfield(L, -2, "arch");
}

/* Pushes main[fn] (a function) onto the stack. */
static void push_main_fn(collgen__lua *h, const char *fn) {
  lua_rawgeti(h->L, LUA_REGISTRYINDEX, h->main_ref);
  lua_getfield(h->L, -1, fn);
  lua_remove(h->L, -2);
}

/* Leaves the spec table of `shape` on the stack, or returns -1. */
static int plan_to_stack(collgen__lua *h, const collgen_shape_t *shape,
                         char *err, size_t n) {
  if (!collgen__op_find(shape->op))
    return collgen__fail(err, n, -1, "unknown op %d", (int)shape->op);
  if (!collgen__dtype_find(shape->dtype))
    return collgen__fail(err, n, -1, "unknown dtype %d", (int)shape->dtype);
  push_main_fn(h, "plan");
  push_shape(h->L, shape);
  return protected_call(h, 1, 1, err, n);
}

/* Reads integer field k of the table at stack top into *v when it is an
** integer in [lo, hi]; else writes a message and returns -1. */
static int int_field(lua_State *L, const char *k, int64_t lo, int64_t hi, int64_t *v,
                     char *err, size_t n) {
  lua_getfield(L, -1, k);
  int isnum = 0;
  lua_Integer x = lua_tointegerx(L, -1, &isnum);
  lua_pop(L, 1);
  if (!isnum || x < lo || x > hi)
    return collgen__fail(err, n, -1, "planner: spec field '%s' is not an integer in "
                         "[%lld, %lld]", k, (long long)lo, (long long)hi);
  *v = (int64_t)x;
  return 0;
}

static int int_field_i(lua_State *L, const char *k, int lo, int hi, int *v, char *err,
                       size_t n) {
  int64_t x = 0;
  if (int_field(L, k, lo, hi, &x, err, n) != 0) return -1;
  *v = (int)x;
  return 0;
}

/* Copies the string at stack top (what = its name, for the message) into
** dst[n]; a non-string or one that does not fit is an error, never a
** truncation. Leaves the stack as it was. */
static int copy_top_string(lua_State *L, const char *what, char *dst, size_t n, char *err,
                           size_t errn) {
  size_t len = 0;
  const char *v = lua_type(L, -1) == LUA_TSTRING ? lua_tolstring(L, -1, &len) : NULL;
  if (v && len < n) {
    memcpy(dst, v, len + 1);
    return 0;
  }
  return collgen__fail(err, errn, -1, "planner: spec field '%s' is %s (at most %zu bytes fit)",
                       what, v ? "too long" : "missing", n - 1);
}

static int str_field(lua_State *L, const char *k, char *dst, size_t n, char *err,
                     size_t errn) {
  lua_getfield(L, -1, k);
  int rc = copy_top_string(L, k, dst, n, err, errn);
  lua_pop(L, 1);
  return rc;
}

int collgen__lua_plan(collgen__lua *h, const collgen_shape_t *shape,
                      collgen_plan_t *plan, char *err, size_t n) {
  lua_State *L = h->L;
  memset(plan, 0, sizeof *plan);
  if (plan_to_stack(h, shape, err, n) != 0) return COLLGEN_ERR_INVALID_ARG;
  int bad = str_field(L, "kernel", plan->kernel, sizeof plan->kernel, err, n) ||
            str_field(L, "algo", plan->algo, sizeof plan->algo, err, n) ||
            int_field_i(L, "group", 1, COLLGEN_MAX_DEVICES, &plan->group, err, n) ||
            int_field_i(L, "vec", 1, 16, &plan->vec, err, n) ||
            int_field_i(L, "block", 1, 1024, &plan->block, err, n) ||
            int_field_i(L, "grid", 1, COLLGEN_MAX_BLOCKS, &plan->grid, err, n) ||
            int_field_i(L, "items", 0, 1024, &plan->items, err, n) ||
            int_field(L, "cols", 0, INT64_MAX, &plan->cols, err, n);
  if (bad) {
    lua_pop(L, 1);
    return COLLGEN_ERR_TEMPLATE;
  }
  push_main_fn(h, "canonical");
  lua_insert(L, -2);
  if (protected_call(h, 1, 1, err, n) != 0) return COLLGEN_ERR_TEMPLATE;
  bad = copy_top_string(L, "canonical", plan->canonical, sizeof plan->canonical, err, n);
  lua_pop(L, 1);
  return bad ? COLLGEN_ERR_TEMPLATE : COLLGEN_OK;
}

int collgen__lua_render(collgen__lua *h, const collgen_shape_t *shape,
                        int line_directives, char **source, char *err,
                        size_t n) {
  lua_State *L = h->L;
  *source = NULL;
  if (plan_to_stack(h, shape, err, n) != 0) return COLLGEN_ERR_INVALID_ARG;
  push_main_fn(h, "render");
  lua_insert(L, -2);
  lua_pushboolean(L, line_directives);
  if (protected_call(h, 2, 1, err, n) != 0) return COLLGEN_ERR_TEMPLATE;
  size_t len;
  const char *text = lua_tolstring(L, -1, &len);
  *source = malloc(len + 1);
  if (!*source) {
    lua_pop(L, 1);
    return collgen__fail(err, n, COLLGEN_ERR_NO_MEMORY, "out of memory");
  }
  memcpy(*source, text, len + 1);
  lua_pop(L, 1);
  return COLLGEN_OK;
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
}

/* Reads boolean field k of the table at stack top. */
static int bool_field(lua_State *L, const char *k) {
  lua_getfield(L, -1, k);
  int v = lua_toboolean(L, -1);
  lua_pop(L, 1);
  return v;
}

/* Fills *s from the variant at stack top ({shape, spec, canonical}): the
** class fields from `c`, the call fields from variant.shape. */
static int read_variant(lua_State *L, const collgen_shape_class_t *c, collgen_shape_t *s,
                        char *err, size_t n) {
  collgen_shape_init(s, c->op);
  s->dtype = c->dtype;
  s->ngpus = c->ngpus;
  snprintf(s->arch, sizeof s->arch, "%s", c->arch[0] ? c->arch : "sm_90");
  if (lua_getfield(L, -1, "shape") != LUA_TTABLE) {
    lua_pop(L, 1);
    return collgen__fail(err, n, -1, "planner: a variant has no shape");
  }
  int bad = int_field_i(L, "group_size", 1, COLLGEN_MAX_DEVICES, &s->group_size, err, n) ||
            int_field_i(L, "tensor_rank", 1, 8, &s->tensor_rank, err, n) ||
            int_field_i(L, "max_blocks", 0, COLLGEN_MAX_BLOCKS, &s->max_blocks, err, n) ||
            int_field(L, "elems", 0, INT64_MAX, &s->elems, err, n) ||
            int_field(L, "rows", 0, INT64_MAX, &s->rows, err, n) ||
            int_field(L, "cols", 0, INT64_MAX, &s->cols, err, n);
  s->aligned16 = bool_field(L, "aligned16");
  s->inplace = bool_field(L, "inplace");
  lua_pop(L, 1);
  return bad ? -1 : 0;
}

int collgen__lua_variants(collgen__lua *h, const collgen_shape_class_t *cls,
                          collgen_shape_t **shapes, int *count, char *err, size_t n) {
  lua_State *L = h->L;
  *shapes = NULL;
  *count = 0;
  if (!collgen__op_find(cls->op))
    return collgen__fail(err, n, COLLGEN_ERR_INVALID_ARG, "unknown op %d", (int)cls->op);
  if (!collgen__dtype_find(cls->dtype))
    return collgen__fail(err, n, COLLGEN_ERR_INVALID_ARG, "unknown dtype %d", (int)cls->dtype);
  if (cls->group_size_count < 0 || cls->cols_count < 0)
    return collgen__fail(err, n, COLLGEN_ERR_INVALID_ARG, "negative list length");
  push_main_fn(h, "variants");
  push_class(L, cls);
  if (protected_call(h, 1, 1, err, n) != 0) return COLLGEN_ERR_INVALID_ARG;
  int rc = COLLGEN_OK;
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
    else if (read_variant(L, cls, &out[i - 1], err, n) != 0)
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

const char *collgen_lua_version(void) { return LUA_RELEASE; }
