/*
** lua_patterns.h -- step-counted Lua patterns for the template sandbox
** (lua_patterns.c); lua_guarded.c installs them as the sandbox's string.find,
** string.match, string.gmatch and string.gsub.
*/
#ifndef COLLGEN_LUA_PATTERNS_H
#define COLLGEN_LUA_PATTERNS_H
#include <lua.h>
#include <stdint.h>

/* The Lua 5.4 functions of the same names, with the same arguments and
** results; every step is charged through collgen__lua_charge. */
int collgen__lua_find(lua_State *L);
int collgen__lua_match(lua_State *L);
int collgen__lua_gmatch(lua_State *L);
int collgen__lua_gsub(lua_State *L);

/* Bytes of string work that count as one unit of the work budget. */
#define COLLGEN_LUA_BYTES_PER_UNIT 16

/* Charges `units` of work to the render running in L (lua_budget.c); raises a
** Lua error once the budget is spent. */
void collgen__lua_charge(lua_State *L, uint64_t units);
#endif
