/*
** lua_guarded.c -- the standard library the generator's sandbox sees.
**
** Only the base, string, table and math libraries are opened (lua_host.c).
** Generator code runs in a read-only table holding a safe subset of the
** base library, the host functions (lua_host_fns.c) and `catalog`; string,
** math and table are deep read-only proxies (lua_readonly.c), as is the
** string metatable; templates get a fresh table per render
** (gen/template.lua). Functions that could break the sandbox are replaced by
** guarded versions: pcall and xpcall rethrow budget errors, rawset refuses
** read-only tables, setmetatable refuses finalizers, and every function
** whose work the count hook cannot see (it runs in C) charges it first
** (lua_budget.c). The pattern functions (find, match, gmatch, gsub) are
** lua_patterns.c's, which count their steps: Lua's own matcher backtracks
** without bound in C.
*/
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include "lua_internal.h"
#include "lua_patterns.h"

/* ---- pcall and xpcall -------------------------------------------------- */

static int l_pcall(lua_State *L) {
  luaL_checkany(L, 1);
  int status = lua_pcall(L, lua_gettop(L) - 1, LUA_MULTRET, 0);
  collgen__lua_rethrow_budget(L, status);
  lua_pushboolean(L, status == LUA_OK);
  lua_insert(L, 1);
  return lua_gettop(L);
}

/* xpcall's message handler, around the caller's (upvalue 1). An error
** raised by the count hook runs the handler with hooks off, so once the
** call is out of time the caller's handler is not run at all. */
static int xpcall_handler(lua_State *L) {
  if (collgen__lua_host(L)->expired) return 1; /* the budget error, as it is */
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  lua_call(L, lua_gettop(L) - 1, 1);
  return 1;
}

static int l_xpcall(lua_State *L) {
  int n = lua_gettop(L);
  luaL_checktype(L, 2, LUA_TFUNCTION);
  lua_pushvalue(L, 2);
  lua_pushcclosure(L, xpcall_handler, 1);
  lua_replace(L, 2);   /* [f, handler, args...] */
  lua_pushvalue(L, 1); /* -> [handler, f, args...] */
  lua_copy(L, 2, 1);
  lua_replace(L, 2);
  int status = lua_pcall(L, n - 2, LUA_MULTRET, 1);
  collgen__lua_rethrow_budget(L, status);
  lua_pushboolean(L, status == LUA_OK);
  lua_replace(L, 1);
  return lua_gettop(L);
}

/* ---- Guarded base functions -------------------------------------------- */

static int call_original(lua_State *L) {
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  lua_call(L, lua_gettop(L) - 1, LUA_MULTRET);
  return lua_gettop(L);
}

/* rawset refuses read-only tables. */
static int l_rawset(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  if (collgen__lua_is_frozen(L, 1)) return luaL_error(L, "attempt to modify a read-only table");
  return call_original(L);
}

/* setmetatable refuses finalizers: they run when the collector decides,
** outside any call's budget, and their errors are swallowed. */
static int l_setmetatable(lua_State *L) {
  if (lua_type(L, 2) == LUA_TTABLE) {
    lua_pushliteral(L, "__gc");
    int has_gc = lua_rawget(L, 2) != LUA_TNIL;
    lua_pop(L, 1);
    if (has_gc) return luaL_error(L, "__gc metamethods are not available to the generator");
  }
  return call_original(L);
}

/* tonumber scans its whole string argument. */
static int l_tonumber(lua_State *L) {
  if (lua_type(L, 1) == LUA_TSTRING) collgen__lua_charge(L, 1 + lua_rawlen(L, 1) / COLLGEN_LUA_BYTES_PER_UNIT);
  return call_original(L);
}

/* string.rep: "" in O(1) when every piece is empty (Lua loops n times
** over nothing), and refused beyond the largest-object cap before any
** work is done. */
static int l_rep(lua_State *L) {
  size_t l, lsep;
  luaL_checklstring(L, 1, &l);
  lua_Integer n = luaL_checkinteger(L, 2);
  luaL_optlstring(L, 3, "", &lsep);
  if (n <= 0 || l + lsep == 0) {
    lua_pushliteral(L, "");
    return 1;
  }
  size_t cap = collgen__lua_host(L)->limits.max_object;
  uint64_t unit = (uint64_t)l + lsep;
  if ((uint64_t)n > ((uint64_t)cap + lsep) / unit)
    return luaL_error(L, "string.rep: a result of more than %I bytes (the largest string "
                      "the generator may build)", (lua_Integer)cap);
  collgen__lua_charge(L, 1 + (uint64_t)n * unit / COLLGEN_LUA_BYTES_PER_UNIT);
  return call_original(L);
}

/* ---- Guarded table functions ---------------------------------------------
** Their loops run in C over lengths and ranges the caller chooses, so each
** charges its loop count first. Tables with their own __index, __newindex
** or __len are refused (read-only proxies are fine): their length could
** differ between the charge and the loop. */

static lua_Integer guarded_len(lua_State *L, int idx, const char *fn) {
  if (lua_type(L, idx) != LUA_TTABLE) return 0; /* the original checks the type */
  if (!collgen__lua_is_frozen(L, idx) && lua_getmetatable(L, idx)) {
    static const char *const events[] = {"__index", "__newindex", "__len"};
    for (int i = 0; i < 3; ++i) {
      int t = lua_getfield(L, -1, events[i]);
      lua_pop(L, 1);
      if (t != LUA_TNIL)
        luaL_error(L, "table.%s: a table with a %s metamethod is not supported", fn,
                   events[i]);
    }
    lua_pop(L, 1);
  }
  return luaL_len(L, idx);
}

/* Units for a loop from a to b (inclusive), never negative. */
static uint64_t span(lua_Integer a, lua_Integer b) {
  return b >= a ? (uint64_t)b - (uint64_t)a + 1 : 0;
}

static int l_tinsert(lua_State *L) {
  lua_Integer n = guarded_len(L, 1, "insert"); /* elements n+1 down to pos move */
  collgen__lua_charge(L, 1 + (lua_gettop(L) == 3 ? span(lua_tointeger(L, 2), n) : 0));
  return call_original(L);
}

static int l_tremove(lua_State *L) {
  lua_Integer size = guarded_len(L, 1, "remove");
  lua_Integer pos = lua_isnoneornil(L, 2) ? size : lua_tointeger(L, 2);
  collgen__lua_charge(L, 1 + span(pos, size));
  return call_original(L);
}

static int l_tmove(lua_State *L) {
  if (lua_type(L, 1) == LUA_TTABLE) guarded_len(L, 1, "move");
  int dst = lua_isnoneornil(L, 5) ? 1 : 5;
  if (lua_type(L, dst) == LUA_TTABLE) guarded_len(L, dst, "move");
  collgen__lua_charge(L, 1 + span(lua_tointeger(L, 2), lua_tointeger(L, 3)));
  return call_original(L);
}

static int l_tconcat(lua_State *L) {
  lua_Integer n = guarded_len(L, 1, "concat");
  lua_Integer last = lua_isnoneornil(L, 4) ? n : lua_tointeger(L, 4);
  collgen__lua_charge(L, 1 + span(luaL_optinteger(L, 3, 1), last));
  return call_original(L);
}

static int l_tunpack(lua_State *L) {
  lua_Integer n = guarded_len(L, 1, "unpack");
  lua_Integer last = lua_isnoneornil(L, 3) ? n : lua_tointeger(L, 3);
  collgen__lua_charge(L, 1 + span(luaL_optinteger(L, 2, 1), last));
  return call_original(L);
}

static int l_tsort(lua_State *L) {
  lua_Integer n = guarded_len(L, 1, "sort");
  uint64_t units = 1;
  if (n > 1) {
    uint64_t log2n = 1;
    while (log2n < 64 && ((uint64_t)1 << log2n) < (uint64_t)n) ++log2n;
    units += (uint64_t)n * log2n;
  }
  collgen__lua_charge(L, units);
  return call_original(L);
}

/* ---- The environment --------------------------------------------------- */

/* Copies the named functions of the library table at lib into the table
** at dst; a name with a wrapper gets a closure over the original. */
typedef struct {
  const char *name;
  lua_CFunction wrapper; /* NULL: the original; else wrapper(upvalue 1 = original) */
} lib_entry;

static void copy_lib(lua_State *L, int lib, int dst, const lib_entry *e) {
  for (; e->name; ++e) {
    lua_getfield(L, lib, e->name);
    if (e->wrapper) lua_pushcclosure(L, e->wrapper, 1);
    lua_setfield(L, dst, e->name);
  }
}

/* env[name] = a frozen copy of the entries `e` of the global library `name`. */
static void install_frozen_lib(lua_State *L, int env, const char *name, const lib_entry *e) {
  lua_getglobal(L, name);
  lua_newtable(L);
  copy_lib(L, lua_gettop(L) - 1, lua_gettop(L), e);
  collgen__lua_freeze_top(L);
  lua_setfield(L, env, name);
  lua_pop(L, 1);
}

/* Pushes the sandbox environment's backing table: safe base functions,
** guarded ones, frozen string/math/table. Sets the string metatable to the
** guarded string functions, hidden. */
void collgen__lua_push_env(lua_State *L) {
  static const lib_entry base[] = {
      {"assert", NULL}, {"error", NULL}, {"ipairs", NULL}, {"next", NULL},
      {"pairs", NULL}, {"select", NULL}, {"tostring", NULL}, {"type", NULL},
      {"getmetatable", NULL}, {"rawequal", NULL}, {"rawget", NULL}, {"rawlen", NULL},
      {"rawset", l_rawset}, {"setmetatable", l_setmetatable}, {"tonumber", l_tonumber},
      {NULL, NULL}};
  /* not: dump (binary chunks), pack/unpack/packsize (unused, loops over
  ** formats); find/match/gmatch/gsub are replaced below */
  static const lib_entry strings[] = {
      {"byte", NULL}, {"char", NULL}, {"format", NULL}, {"len", NULL}, {"lower", NULL},
      {"upper", NULL}, {"reverse", NULL}, {"sub", NULL}, {"rep", l_rep}, {NULL, NULL}};
  /* not: random, randomseed (seeded per process: renders must not vary) */
  static const lib_entry maths[] = {
      {"abs", NULL}, {"ceil", NULL}, {"floor", NULL}, {"fmod", NULL}, {"max", NULL},
      {"min", NULL}, {"modf", NULL}, {"sqrt", NULL}, {"exp", NULL}, {"log", NULL},
      {"sin", NULL}, {"cos", NULL}, {"tan", NULL}, {"asin", NULL}, {"acos", NULL},
      {"atan", NULL}, {"tointeger", NULL}, {"type", NULL}, {"ult", NULL}, {"pi", NULL},
      {"huge", NULL}, {"maxinteger", NULL}, {"mininteger", NULL}, {NULL, NULL}};
  static const lib_entry tables[] = {
      {"insert", l_tinsert}, {"remove", l_tremove}, {"move", l_tmove},
      {"concat", l_tconcat}, {"unpack", l_tunpack}, {"sort", l_tsort}, {"pack", NULL},
      {NULL, NULL}};
  lua_newtable(L);
  int env = lua_gettop(L);
  lua_pushglobaltable(L);
  copy_lib(L, lua_gettop(L), env, base);
  lua_pop(L, 1);
  lua_pushcfunction(L, l_pcall);
  lua_setfield(L, env, "pcall");
  lua_pushcfunction(L, l_xpcall);
  lua_setfield(L, env, "xpcall");

  lua_getglobal(L, LUA_STRLIBNAME);
  lua_newtable(L);
  copy_lib(L, lua_gettop(L) - 1, lua_gettop(L), strings);
  static const luaL_Reg matchers[] = {
      {"find", collgen__lua_find}, {"match", collgen__lua_match},
      {"gmatch", collgen__lua_gmatch}, {"gsub", collgen__lua_gsub},
      {NULL, NULL}};
  luaL_setfuncs(L, matchers, 0);
  lua_pushliteral(L, ""); /* string methods: the guarded table, hidden */
  lua_getmetatable(L, -1);
  lua_pushvalue(L, -3);
  lua_setfield(L, -2, "__index");
  lua_pushliteral(L, COLLGEN__LUA_READ_ONLY);
  lua_setfield(L, -2, "__metatable");
  lua_pop(L, 2);
  collgen__lua_freeze_top(L);
  lua_setfield(L, env, "string");
  lua_pop(L, 1);

  install_frozen_lib(L, env, LUA_MATHLIBNAME, maths);
  install_frozen_lib(L, env, LUA_TABLIBNAME, tables);
}

