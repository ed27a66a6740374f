/*
** lua_budget.c -- the budgets of a generator's Lua state
** (collgen__lua_limits), and the protected call that runs Lua within them.
**
** A custom allocator caps the state's memory and the size of any one
** allocation. Work per call is counted in units: a count hook adds VM
** instructions, the allocator adds bytes allocated, and every C function
** whose cost is not bounded by its result (string.rep, pattern matching,
** tonumber, table.insert/remove/move/concat/unpack/sort, compile_chunk)
** charges its work through collgen__lua_charge before or while it does it.
** The hook and the charges also check a wall-clock deadline. Once a budget
** is exceeded the hook raises on every instruction and pcall/xpcall rethrow
** (lua_guarded.c), so no Lua code can swallow the error. After a budget
** error the state is recreated before the next call (lua_host.c).
*/
#include <lauxlib.h>
#include <lua.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lua_internal.h"
#include "lua_patterns.h"

#define HOOK_EVERY 1000  /* VM instructions between budget checks */

enum { REFUSED_NONE, REFUSED_TOTAL, REFUSED_OBJECT };

/* The generator is the allocator's userdata. */
collgen__lua *collgen__lua_host(lua_State *L) {
  void *ud = NULL;
  lua_getallocf(L, &ud);
  return ud;
}

/* The allocator: frees always succeed; growth is refused beyond the
** state's memory budget or the largest-object cap. Bytes allocated count
** as work. */
void *collgen__lua_alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
  collgen__lua *h = ud;
  size_t old = ptr ? osize : 0;
  if (nsize == 0) {
    free(ptr);
    h->mem_used -= old;
    return NULL;
  }
  if (nsize > old) {
    if (nsize > h->limits.max_object) {
      h->refused = REFUSED_OBJECT;
      return NULL;
    }
    if (h->mem_used - old + nsize > h->limits.memory) {
      h->refused = REFUSED_TOTAL;
      return NULL;
    }
  }
  void *p = realloc(ptr, nsize);
  if (!p) return NULL;
  h->mem_used = h->mem_used - old + nsize;
  if (nsize > old) h->work += (nsize - old) / COLLGEN_LUA_BYTES_PER_UNIT;
  return p;
}

static void count_hook(lua_State *L, lua_Debug *ar);

/* Marks the call as out of time: from now on the hook raises on every
** instruction and pcall/xpcall rethrow. */
static void expire(collgen__lua *h) {
  h->expired = 1;
  lua_sethook(h->L, count_hook, LUA_MASKCOUNT, 1);
}

static int over_budget(collgen__lua *h) {
  return h->expired || h->work > h->limits.work || collgen__now_ms() > h->deadline;
}

/* Raises "ran too long" with the position of the function at `level`
** (0 in the hook: the running Lua function; 1 in a C function: its
** caller). */
static int ran_too_long(lua_State *L, collgen__lua *h, int level) {
  char msg[160]; /* lua_pushfstring knows no %llu */
  snprintf(msg, sizeof msg, "generator ran too long (more than %llu units of work or %u ms; "
           "an endless loop in a template?)", (unsigned long long)h->limits.work,
           (unsigned)h->limits.wall_ms);
  luaL_where(L, level);
  lua_pushstring(L, msg);
  lua_concat(L, 2);
  return lua_error(L);
}

static void count_hook(lua_State *L, lua_Debug *ar) {
  COLLGEN_UNUSED(ar);
  collgen__lua *h = collgen__lua_host(L);
  if (!h->expired) {
    h->work += HOOK_EVERY;
    if (!over_budget(h)) return;
    expire(h);
  }
  ran_too_long(L, h, 0);
}

/* Charges `units` of work done (or about to be done) by a C function;
** raises when the call is over budget. */
void collgen__lua_charge(lua_State *L, uint64_t units) {
  collgen__lua *h = collgen__lua_host(L);
  h->work = units > UINT64_MAX - h->work ? UINT64_MAX : h->work + units;
  if (over_budget(h)) {
    if (!h->expired) expire(h);
    ran_too_long(L, h, 1);
  }
}

/* Starts the budget of one call. */
static void start_call(collgen__lua *h) {
  h->work = 0;
  h->expired = 0;
  h->oom = 0;
  h->refused = REFUSED_NONE;
  h->deadline = collgen__now_ms() + h->limits.wall_ms;
  lua_sethook(h->L, count_hook, LUA_MASKCOUNT, HOOK_EVERY);
}

/* pcall and xpcall rethrow what must end the call: running out of time or
** memory. */
void collgen__lua_rethrow_budget(lua_State *L, int status) {
  collgen__lua *h = collgen__lua_host(L);
  if (status == LUA_ERRMEM) h->oom = 1;
  if (status != LUA_OK && (h->expired || status == LUA_ERRMEM)) lua_error(L);
}

/* The message handler of protected calls: a traceback, except for the
** planner's refusals of a shape. */
static int traceback_handler(lua_State *L) {
  const char *msg = lua_tostring(L, 1);
  if (!msg) msg = "(error object is not a string)";
  if (strncmp(msg, "planner: ", 9) == 0) return 1; /* a user error, not a bug */
  luaL_traceback(L, L, msg, 1);
  return 1;
}

/* Calls the function below `nargs` arguments on the stack in protected
** mode, within the budgets. On error copies the message into err and
** returns COLLGEN__LUA_CALL_ERROR, or COLLGEN__LUA_CALL_BUDGET when a
** budget ran out (the state is then recreated before the next call). */
int collgen__lua_protected_call(collgen__lua *h, int nargs, int nres, char *err, size_t n) {
  lua_State *L = h->L;
  int base = lua_gettop(L) - nargs;
  lua_pushcfunction(L, traceback_handler);
  lua_insert(L, base);
  start_call(h);
  int rc = lua_pcall(L, nargs, nres, base);
  lua_remove(L, base);
  if (rc == LUA_OK) return COLLGEN__LUA_CALL_OK;
  const char *msg = lua_tostring(L, -1) ? lua_tostring(L, -1) : "?";
  int budget = COLLGEN__LUA_CALL_ERROR;
  if (rc == LUA_ERRMEM || h->oom) {
    budget = COLLGEN__LUA_CALL_BUDGET;
    if (h->refused == REFUSED_OBJECT)
      snprintf(err, n, "generator exceeded its memory budget: one string or table of more "
               "than %zu bytes (%s)", h->limits.max_object, msg);
    else
      snprintf(err, n, "generator exceeded its memory budget of %zu bytes (%s)",
               h->limits.memory, msg);
  } else {
    if (h->expired) budget = COLLGEN__LUA_CALL_BUDGET;
    snprintf(err, n, "%s", msg);
  }
  lua_pop(L, 1);
  if (budget == COLLGEN__LUA_CALL_BUDGET) h->stale = 1;
  return budget;
}
