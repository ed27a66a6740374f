/*
** lua_host_fns.c -- the functions the host gives generator code:
** read_source(path), compile_chunk(code, chunkname) and import(name).
**
** They read only the snapshot (lua_snapshot.c), and load only text chunks
** (never bytecode) whose parsing is charged to the call's work budget.
** Modules of gen/ run in the sandbox environment and are loaded once per
** state, into the registry table "collgen.modules".
*/
#include <ctype.h>
#include <lauxlib.h>
#include <lua.h>
#include <stdio.h>

#include "lua_internal.h"
#include "lua_patterns.h"

/* Creates "collgen.modules"; once per state. */
void collgen__lua_open_modules(lua_State *L) {
  lua_newtable(L);
  lua_setfield(L, LUA_REGISTRYINDEX, "collgen.modules");
}

/* read_source(path) -> text of a file of the tree, or nil when the tree
** has no such file; a path that leaves the tree is an error. */
static int l_read_source(lua_State *L) {
  size_t len;
  const char *path = luaL_checklstring(L, 1, &len);
  if (!collgen__lua_path_inside_tree(path, len))
    return luaL_error(L, "read_source: '%s' is outside the template tree (absolute paths "
                      "and '.' or '..' components are refused)", path);
  const collgen__lua_file *f = collgen__lua_find_file(collgen__lua_host(L), path);
  if (f) lua_pushlstring(L, f->text, f->size);
  else lua_pushnil(L);
  return 1;
}

/* Loads text-only Lua with _ENV = the table at env_index; leaves the
** function on the stack or raises. Parsing is work. */
static void load_text(lua_State *L, const char *code, size_t len,
                      const char *chunkname, int env_index) {
  collgen__lua_charge(L, 1 + len / COLLGEN_LUA_BYTES_PER_UNIT);
  int status = luaL_loadbufferx(L, code, len, chunkname, "t");
  if (status == LUA_ERRMEM) collgen__lua_host(L)->oom = 1; /* rethrown as a plain error */
  if (status != LUA_OK) lua_error(L);
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
int collgen__lua_import(lua_State *L) {
  collgen__lua *h = collgen__lua_host(L);
  size_t nlen;
  const char *name = luaL_checklstring(L, 1, &nlen);
  int ok = nlen > 0 && nlen <= 64;
  for (size_t i = 0; ok && i < nlen; ++i) ok = isalnum((unsigned char)name[i]) || name[i] == '_';
  if (!ok)
    return luaL_error(L, "import: '%s' is not a generator module name (letters, digits "
                      "and '_' name a file of gen/)", name);
  lua_getfield(L, LUA_REGISTRYINDEX, "collgen.modules");
  if (lua_getfield(L, -1, name) != LUA_TNIL) return 1;
  lua_pop(L, 1);
  char path[80], chunkname[84];
  snprintf(path, sizeof path, "gen/%s.lua", name);
  snprintf(chunkname, sizeof chunkname, "@%s", path);
  const collgen__lua_file *f = collgen__lua_find_file(h, path);
  if (!f) return luaL_error(L, "no generator module '%s'", path);
  lua_rawgeti(L, LUA_REGISTRYINDEX, h->env_ref);
  load_text(L, f->text, f->size, chunkname, lua_gettop(L));
  lua_call(L, 0, 1);
  lua_pushvalue(L, -1);
  lua_setfield(L, -4, name); /* modules[name] = result */
  return 1;
}

/* import, read_source and compile_chunk, into the table at stack top. */
void collgen__lua_add_host_fns(lua_State *L) {
  static const luaL_Reg host_fns[] = {
      {"import", collgen__lua_import}, {"read_source", l_read_source},
      {"compile_chunk", l_compile_chunk}, {NULL, NULL}};
  luaL_setfuncs(L, host_fns, 0);
}
