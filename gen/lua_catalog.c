/*
** lua_catalog.c -- the catalog as Lua tables (see lua_catalog.h).
*/
#include <stddef.h>
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
    if (d->acc_type) put_str(L, h, "acc_type", d->acc_type); /* nil: copy-only */
    put_int(L, h, "min_sm", d->min_sm);
    lua_setfield(L, -2, d->name);
  }
  lua_setfield(L, -2, "dtypes");
}

/* t.roles = { id, ... } (in role order) and t.role = { <id> = {index (the
** C role index, from 0), label, is_output, optional (booleans: a call may
** leave an optional role out), elem_bytes} } for the op table at stack
** top. */
static void push_roles(lua_State *L, collgen__sha256_ctx *h, const collgen__op_desc *d) {
  lua_createtable(L, d->nroles, 0);
  for (int k = 0; k < d->nroles; ++k) {
    lua_pushstring(L, d->roles[k].id);
    lua_rawseti(L, -2, (lua_Integer)k + 1);
    collgen__sha256_field(h, "roles", d->roles[k].id, strlen(d->roles[k].id));
  }
  lua_setfield(L, -2, "roles");
  lua_createtable(L, 0, d->nroles);
  for (int k = 0; k < d->nroles; ++k) {
    const collgen__role_desc *r = &d->roles[k];
    lua_createtable(L, 0, 4);
    put_int(L, h, "index", k);
    put_str(L, h, "label", r->label);
    lua_pushboolean(L, r->is_output);
    lua_setfield(L, -2, "is_output");
    collgen__sha256_field(h, "is_output", r->is_output ? "1" : "0", 1);
    const int optional = r->use == COLLGEN__ROLE_OPTIONAL;
    lua_pushboolean(L, optional);
    lua_setfield(L, -2, "optional");
    collgen__sha256_field(h, "optional", optional ? "1" : "0", 1);
    put_int(L, h, "elem_bytes", r->elem_bytes);
    lua_setfield(L, -2, r->id);
  }
  lua_setfield(L, -2, "role");
}

static void push_ops(lua_State *L, collgen__sha256_ctx *h) {
  lua_newtable(L);
  for (int i = 0; i < collgen__op_count(); ++i) {
    const collgen__op_desc *d = collgen__op_at(i);
    lua_newtable(L);
    put_str(L, h, "name", d->name);
    put_str(L, h, "template", d->template_file);
    put_int(L, h, "min_rank", d->min_rank);
    put_int(L, h, "value", d->op);
    lua_pushboolean(L, d->computes);
    lua_setfield(L, -2, "computes");
    collgen__sha256_field(h, "computes", d->computes ? "1" : "0", 1);
    lua_pushboolean(L, d->fp8);
    lua_setfield(L, -2, "fp8");
    collgen__sha256_field(h, "fp8", d->fp8 ? "1" : "0", 1);
    push_roles(L, h, d);
    lua_setfield(L, -2, d->name);
  }
  lua_setfield(L, -2, "ops");
}

static void push_fp8_modes(lua_State *L, collgen__sha256_ctx *h) {
  lua_newtable(L);
  for (int i = 0; i < collgen__fp8_count(); ++i) {
    const collgen__fp8_desc *d = collgen__fp8_at(i);
    lua_newtable(L);
    put_str(L, h, "name", d->name);
    put_int(L, h, "min_sm", d->min_sm);
    lua_setfield(L, -2, d->name);
  }
  lua_setfield(L, -2, "fp8");
}

static void push_archs(lua_State *L, collgen__sha256_ctx *h) {
  lua_newtable(L);
  for (int i = 0; i < collgen__arch_count(); ++i) {
    const collgen__arch_desc *a = collgen__arch_at(i);
    put_int(L, h, a->name, a->sm);
  }
  lua_setfield(L, -2, "archs");
}

/* The limits of device_abi.h: name (as spelled in C), value, comment. */
typedef struct {
  const char *name;
  long long value;
  const char *comment;
} abi_limit;

#define LIMIT_ROW(name, comment) {#name, name, comment},
static const abi_limit abi_limits[] = {COLLGEN_ABI_LIMITS(LIMIT_ROW)};
#undef LIMIT_ROW
#define N_LIMITS (sizeof abi_limits / sizeof abi_limits[0])

/* catalog.limits: { MAX_DEVICES = 8, ... } (the C name less "COLLGEN_"). */
static void push_limits(lua_State *L, collgen__sha256_ctx *h) {
  static const char prefix[] = "COLLGEN_";
  lua_newtable(L);
  for (size_t i = 0; i < N_LIMITS; ++i) {
    const char *name = abi_limits[i].name;
    if (strncmp(name, prefix, sizeof prefix - 1) == 0) name += sizeof prefix - 1;
    put_int(L, h, name, abi_limits[i].value);
  }
  lua_setfield(L, -2, "limits");
}

/* One field of a device struct, from the X-macros of device_abi.h. The rows
** stringify type and dimensions before any expansion, so the generated code
** spells the dimensions with the limits' names. */
typedef struct {
  const char *name, *device_type, *dims, *comment;
  size_t offset, size;
} abi_field;

#define FIELD_OF(S, type_str, name, name_str, dims_str, comment) \
  {name_str, type_str, dims_str, comment, offsetof(S, name), sizeof(((S *)0)->name)},
#define KPARAMS_ROW(type, name, dims, comment) \
  FIELD_OF(collgen__kparams, #type, name, #name, #dims, comment)
#define KPARAMS_PAIR(host_type, device_type, name, dims, comment) \
  FIELD_OF(collgen__kparams, #device_type, name, #name, #dims, comment)
#define SIGNAL_ROW(type, name, dims, comment) \
  FIELD_OF(collgen__signal, #type, name, #name, #dims, comment)
#define SIGNAL_PAIR(host_type, device_type, name, dims, comment) \
  FIELD_OF(collgen__signal, #device_type, name, #name, #dims, comment)
static const abi_field kparams_fields[] = {
    COLLGEN_KPARAMS_FIELDS(KPARAMS_ROW, KPARAMS_PAIR)};
static const abi_field signal_fields[] = {COLLGEN_SIGNAL_FIELDS(SIGNAL_ROW, SIGNAL_PAIR)};
#undef FIELD_OF
#undef KPARAMS_ROW
#undef KPARAMS_PAIR
#undef SIGNAL_ROW
#undef SIGNAL_PAIR

/* Pushes { host = host_name, size, align, fields = { {name, decl, offset,
** size, comment}, ... } } (decl: the device declaration, e.g.
** "const void *in[COLLGEN_MAX_DEVICES]"). */
static void push_struct(lua_State *L, collgen__sha256_ctx *h, const char *host_name,
                        size_t size, size_t align, const abi_field *f, size_t n) {
  lua_newtable(L);
  put_str(L, h, "host", host_name);
  put_int(L, h, "size", (long long)size);
  put_int(L, h, "align", (long long)align);
  lua_createtable(L, (int)n, 0);
  for (size_t i = 0; i < n; ++i) {
    char decl[256];
    size_t tl = strlen(f[i].device_type);
    const char *sep = tl && f[i].device_type[tl - 1] == '*' ? "" : " ";
    snprintf(decl, sizeof decl, "%s%s%s%s", f[i].device_type, sep, f[i].name, f[i].dims);
    lua_createtable(L, 0, 5);
    put_str(L, h, "name", f[i].name);
    put_str(L, h, "decl", decl);
    put_int(L, h, "offset", (long long)f[i].offset);
    put_int(L, h, "size", (long long)f[i].size);
    put_str(L, h, "comment", f[i].comment);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  lua_setfield(L, -2, "fields");
}

/* catalog.abi = { limits = { {name, value, comment}, ... }, kparams = <struct>,
** signal = <struct> }. */
static void push_abi(lua_State *L, collgen__sha256_ctx *h) {
  lua_newtable(L);
  lua_createtable(L, (int)N_LIMITS, 0);
  for (size_t i = 0; i < N_LIMITS; ++i) {
    lua_createtable(L, 0, 3);
    put_str(L, h, "name", abi_limits[i].name);
    put_int(L, h, "value", abi_limits[i].value);
    put_str(L, h, "comment", abi_limits[i].comment);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  lua_setfield(L, -2, "limits");
  push_struct(L, h, "collgen__kparams", sizeof(collgen__kparams), _Alignof(collgen__kparams),
              kparams_fields, sizeof kparams_fields / sizeof kparams_fields[0]);
  lua_setfield(L, -2, "kparams");
  push_struct(L, h, "collgen__signal", sizeof(collgen__signal), _Alignof(collgen__signal),
              signal_fields, sizeof signal_fields / sizeof signal_fields[0]);
  lua_setfield(L, -2, "signal");
  lua_setfield(L, -2, "abi");
}

void collgen__lua_push_catalog(lua_State *L, collgen__sha256_ctx *hash) {
  lua_newtable(L);
  push_dtypes(L, hash);
  push_ops(L, hash);
  push_fp8_modes(L, hash);
  push_archs(L, hash);
  push_limits(L, hash);
  push_abi(L, hash);
}
