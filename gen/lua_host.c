/*
** lua_host.c -- the embedded Lua 5.4 generator's state: created from the
** snapshot of the sources, recreated after a budget error, destroyed.
**
** One lua_State per generator, never shared across threads. The state is
** made of the pieces listed in lua_internal.h: the files it can read
** (lua_snapshot.c), its budgets (lua_budget.c), the read-only sandbox
** environment (lua_readonly.c, lua_guarded.c, lua_host_fns.c) and the
** catalog (lua_catalog.c); gen/main.lua is loaded last. Its calls (plan,
** render, variants) are lua_bridge.c's.
*/
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <stdlib.h>

#include "lua_catalog.h"
#include "lua_internal.h"

const collgen__lua_limits collgen__lua_default_limits = {
    .memory = (size_t)256 << 20,
    .max_object = (size_t)16 << 20,
    .work = 200000000,
    .wall_ms = 10000,
};

/* The body of build_state's protected call: libraries, sandbox, catalog
** and bundle hash, then gen/main.lua (main_ref). */
static int open_state(lua_State *L) {
  collgen__lua *h = collgen__lua_host(L);
  luaL_requiref(L, "_G", luaopen_base, 1);
  luaL_requiref(L, LUA_STRLIBNAME, luaopen_string, 1);
  luaL_requiref(L, LUA_TABLIBNAME, luaopen_table, 1);
  luaL_requiref(L, LUA_MATHLIBNAME, luaopen_math, 1);
  lua_settop(L, 0);
  collgen__lua_open_modules(L);
  collgen__lua_open_readonly(L);
  collgen__lua_push_env(L);
  collgen__lua_add_host_fns(L);
  /* the bundle hash: the snapshot and the catalog as this state sees it
  ** (a recreated state sees the same bytes) */
  collgen__sha256_ctx s;
  collgen__sha256_init(&s);
  collgen__lua_hash_files(h, &s);
  collgen__lua_push_catalog(L, &s);
  collgen__sha256_final(&s, h->bundle_hash);
  collgen__lua_freeze_top(L);
  lua_setfield(L, -2, "catalog");
  collgen__lua_freeze_top(L);
  h->env_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  lua_pushcfunction(L, collgen__lua_import);
  lua_pushliteral(L, "main");
  lua_call(L, 1, 1);
  h->main_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  return 0;
}

static void close_state(collgen__lua *h) {
  if (h->L) lua_close(h->L);
  h->L = NULL;
}

/* Creates the Lua state from the snapshot: libraries, sandbox, catalog,
** gen/main.lua; within the budgets. */
static int build_state(collgen__lua *h, char *err, size_t n) {
  h->mem_used = 0;
  h->stale = 0;
  h->L = lua_newstate(collgen__lua_alloc, h);
  if (!h->L) return collgen__fail(err, n, COLLGEN_ERR_NO_MEMORY, "cannot create a Lua state");
  lua_setwarnf(h->L, NULL, NULL);
  lua_pushcfunction(h->L, open_state);
  if (collgen__lua_protected_call(h, 0, 0, err, n) != COLLGEN__LUA_CALL_OK) {
    close_state(h);
    return COLLGEN_ERR_TEMPLATE;
  }
  return COLLGEN_OK;
}

/* Before each call: a state that hit a budget is replaced by a fresh one. */
int collgen__lua_ready(collgen__lua *h, char *err, size_t n) {
  if (h->L && !h->stale) return COLLGEN_OK;
  close_state(h);
  return build_state(h, err, n);
}

int collgen__lua_create(collgen__lua **out, char *err, size_t n) {
  *out = NULL;
  collgen__lua *h = calloc(1, sizeof *h);
  if (!h) return collgen__fail(err, n, COLLGEN_ERR_NO_MEMORY, "out of memory");
  h->limits = collgen__lua_default_limits;
  h->template_dir = collgen__param_template_dir();
  int rc = collgen__lua_load_files(h, err, n);
  if (rc == COLLGEN_OK) rc = build_state(h, err, n);
  if (rc != COLLGEN_OK) {
    collgen__lua_destroy(h);
    return rc;
  }
  *out = h;
  return COLLGEN_OK;
}

void collgen__lua_destroy(collgen__lua *h) {
  if (!h) return;
  close_state(h);
  collgen__lua_free_files(h);
  free(h);
}

void collgen__lua_set_limits(collgen__lua *h, const collgen__lua_limits *limits) {
  h->limits = *limits;
}

const uint8_t *collgen__lua_bundle_hash(const collgen__lua *h) {
  return h->bundle_hash;
}

const char *collgen_lua_version(void) { return LUA_RELEASE; }
