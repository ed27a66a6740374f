/*
** lua_catalog.h -- pushes the catalog (ops, dtypes, archs, device limits,
** FP8 output modes, the layout of the device structs) into the generator's Lua state, so the
** planner and the templates read the same lists as the C side.
*/
#ifndef COLLGEN_LUA_CATALOG_H
#define COLLGEN_LUA_CATALOG_H
#include <lua.h>

#include "sha256.h"

/* Pushes a new table
**   { dtypes = { <name> = {name, bytes, ctype, acc_type, min_sm} },
**     ops    = { <name> = {name, template, min_rank, roles = { id, ... },
**                          role = { <id> = {index, label, is_output,
**                                           elem_bytes} }} },
**     fp8    = { <name> = {name, min_sm} },
**     archs  = { <name> = sm },
**     limits = { MAX_DEVICES, MAX_BLOCKS, LL_LINES },
**     abi    = { limits  = { {name, value, comment}, ... },
**                kparams = <struct>, signal = <struct> } }
** where <struct> = { host, size, align, fields = { {name, decl, offset, size,
** comment}, ... } } describes a device struct from the X-macros of
** device_abi.h with the host compiler's offsets and sizes; leaves it
** on L's stack and feeds every key and value, in a fixed order, into
** `hash`: the generated code depends on these values, so the cache key
** must too. */
void collgen__lua_push_catalog(lua_State *L, collgen__sha256_ctx *hash);
#endif
