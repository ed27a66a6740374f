/*
** lua_catalog.c -- the catalog as Lua tables (see lua_catalog.h).
*/
#include <stdio.h>
#include <string.h>

#include "catalog.h"
#include "device_abi.h"
#include "lua_catalog.h"

/* t[key] = value for the table at stack top, hashed as "key=value". */
static void put_str(lua_State *L, collgen__sha256_ctx *h, const char *key, const char *v) {
  lua_pushstring(L, v);
  lua_setfield(L, -2, key);
  collgen__sha256_field(h, key, v, strlen(v));
}

static void put_int(lua_State *L, collgen__sha256_ctx *h, const char *key, long long v) {
  char text[32];
  snprintf(text, sizeof text, "%lld", v);
  lua_pushinteger(L, (lua_Integer)v);
  lua_setfield(L, -2, key);
  collgen__sha256_field(h, key, text, strlen(text));
}

static void push_dtypes(lua_State *L, collgen__sha256_ctx *h) {
  lua_newtable(L);
  for (int i = 0; i < collgen__dtype_count(); ++i) {
    const collgen__dtype_desc *d = collgen__dtype_at(i);
    lua_newtable(L);
    put_str(L, h, "name", d->name);
    put_int(L, h, "bytes", d->bytes);
    put_str(L, h, "ctype", d->ctype);
    put_str(L, h, "acc_type", d->acc_type);
    put_int(L, h, "min_sm", d->min_sm);
    lua_setfield(L, -2, d->name);
  }
  lua_setfield(L, -2, "dtypes");
}

static void push_ops(lua_State *L, collgen__sha256_ctx *h) {
  lua_newtable(L);
  for (int i = 0; i < collgen__op_count(); ++i) {
    const collgen__op_desc *d = collgen__op_at(i);
    lua_newtable(L);
    put_str(L, h, "name", d->name);
    put_str(L, h, "template", d->template_file);
    put_str(L, h, "kind", d->kind);
    put_int(L, h, "min_rank", d->min_rank);
    lua_setfield(L, -2, d->name);
  }
  lua_setfield(L, -2, "ops");
}

static void push_archs(lua_State *L, collgen__sha256_ctx *h) {
  lua_newtable(L);
  for (int i = 0; i < collgen__arch_count(); ++i) {
    const collgen__arch_desc *a = collgen__arch_at(i);
    put_int(L, h, a->name, a->sm);
  }
  lua_setfield(L, -2, "archs");
}

static void push_limits(lua_State *L, collgen__sha256_ctx *h) {
  lua_newtable(L);
  put_int(L, h, "MAX_DEVICES", COLLGEN_MAX_DEVICES);
  put_int(L, h, "MAX_BLOCKS", COLLGEN_MAX_BLOCKS);
  put_int(L, h, "LL_LINES", COLLGEN_LL_LINES);
  lua_setfield(L, -2, "limits");
}

void collgen__lua_push_catalog(lua_State *L, collgen__sha256_ctx *hash) {
  lua_newtable(L);
  push_dtypes(L, hash);
  push_ops(L, hash);
  push_archs(L, hash);
  push_limits(L, hash);
}
