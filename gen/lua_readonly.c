/*
** lua_readonly.c -- read-only tables for the generator's sandbox.
**
** A frozen table is an empty proxy whose metatable (hidden by __metatable)
** reads from the original, which nothing else references. The registry
** set "collgen.frozen" holds the proxies (weak keys). Generator code sees
** string, math, table and catalog, and its own environment, only through
** such proxies (deep: every table reachable from them is frozen too), so no
** call can change what the next call sees.
*/
#include <lauxlib.h>
#include <lua.h>

#include "lua_internal.h"

/* Creates "collgen.frozen"; once per state. */
void collgen__lua_open_readonly(lua_State *L) {
  lua_newtable(L); /* the set of read-only proxies, weak keys */
  lua_createtable(L, 0, 1);
  lua_pushliteral(L, "k");
  lua_setfield(L, -2, "__mode");
  lua_setmetatable(L, -2);
  lua_setfield(L, LUA_REGISTRYINDEX, "collgen.frozen");
}

/* 1 when the value at idx is a proxy of the set. */
int collgen__lua_is_frozen(lua_State *L, int idx) {
  idx = lua_absindex(L, idx);
  lua_getfield(L, LUA_REGISTRYINDEX, "collgen.frozen");
  lua_pushvalue(L, idx);
  int frozen = lua_rawget(L, -2) != LUA_TNIL;
  lua_pop(L, 2);
  return frozen;
}

/* Pushes the original behind proxy `idx`. */
static void push_backing(lua_State *L, int idx) {
  lua_getmetatable(L, idx);
  lua_getfield(L, -1, "__index");
  lua_remove(L, -2);
}

static int ro_newindex(lua_State *L) {
  const char *k = lua_type(L, 2) == LUA_TSTRING ? lua_tostring(L, 2) : "?";
  return luaL_error(L, "attempt to modify a read-only table (field '%s')", k);
}

static int ro_len(lua_State *L) {
  push_backing(L, 1);
  lua_pushinteger(L, (lua_Integer)lua_rawlen(L, -1));
  return 1;
}

static int ro_next(lua_State *L) {
  push_backing(L, 1);
  lua_settop(L, 3); /* proxy, key, backing */
  lua_pushvalue(L, 2);
  if (lua_next(L, 3)) return 2;
  lua_pushnil(L);
  return 1;
}

/* __pairs: iterates the original without handing it out. */
static int ro_pairs(lua_State *L) {
  lua_pushcfunction(L, ro_next);
  lua_pushvalue(L, 1);
  lua_pushnil(L);
  return 3;
}

/* Replaces the table at idx, and every table reachable from it through
** values, by read-only proxies; pushes the proxy. `memo` (a stack index)
** maps originals to proxies, for shared and cyclic references. */
static void freeze_into(lua_State *L, int idx, int memo) {
  idx = lua_absindex(L, idx);
  if (collgen__lua_is_frozen(L, idx)) {
    lua_pushvalue(L, idx);
    return;
  }
  lua_pushvalue(L, idx);
  if (lua_rawget(L, memo) != LUA_TNIL) return;
  lua_pop(L, 1);
  lua_newtable(L); /* the proxy */
  int proxy = lua_gettop(L);
  lua_pushvalue(L, idx);
  lua_pushvalue(L, proxy);
  lua_rawset(L, memo);
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    if (lua_type(L, -1) == LUA_TTABLE) {
      freeze_into(L, -1, memo);
      lua_pushvalue(L, -3); /* key */
      lua_insert(L, -2);
      lua_rawset(L, idx); /* changing an existing field during traversal is allowed */
    }
    lua_pop(L, 1);
  }
  lua_createtable(L, 0, 5);
  lua_pushvalue(L, idx);
  lua_setfield(L, -2, "__index");
  lua_pushcfunction(L, ro_newindex);
  lua_setfield(L, -2, "__newindex");
  lua_pushcfunction(L, ro_len);
  lua_setfield(L, -2, "__len");
  lua_pushcfunction(L, ro_pairs);
  lua_setfield(L, -2, "__pairs");
  lua_pushliteral(L, COLLGEN__LUA_READ_ONLY);
  lua_setfield(L, -2, "__metatable");
  lua_setmetatable(L, proxy);
  lua_getfield(L, LUA_REGISTRYINDEX, "collgen.frozen");
  lua_pushvalue(L, proxy);
  lua_pushboolean(L, 1);
  lua_rawset(L, -3);
  lua_pop(L, 1);
}

/* Replaces the table at stack top by its read-only proxy. */
void collgen__lua_freeze_top(lua_State *L) {
  lua_newtable(L);
  freeze_into(L, -2, lua_gettop(L));
  lua_replace(L, -3);
  lua_pop(L, 1);
}
