/*
** lua_internal.h -- what the files of the Lua generator share: the
** generator handle and each file's entry points. Not installed.
**
** The files, each with one job, from the ground up:
**   lua_snapshot.c  the Lua sources and templates, read once per handle;
**   lua_budget.c    the memory and work budgets, and calls within them;
**   lua_readonly.c  read-only proxies of tables;
**   lua_guarded.c   the standard library the sandbox sees, guarded;
**   lua_host_fns.c  the functions the host gives Lua (import, ...);
**   lua_host.c      the state: created, recreated after a budget error,
**                   destroyed;
**   lua_bridge.c    collgen_shape_t and plans <-> the planner's tables.
** lua_patterns.c (step-counted patterns) and lua_catalog.c (the catalog
** as Lua tables) have their own headers.
*/
#ifndef COLLGEN_LUA_INTERNAL_H
#define COLLGEN_LUA_INTERNAL_H
#include <lua.h>

#include "lua_host.h"
#include "sha256.h"

/* What getmetatable returns for read-only tables, and for strings. */
#define COLLGEN__LUA_READ_ONLY "read-only table"

/* One file of the snapshot. */
typedef struct {
  const char *path;  /* as in the embedded list: "gen/main.lua" */
  const char *text;  /* NUL-terminated; owned when read from a template dir */
  size_t size;
  int owned;
} collgen__lua_file;

struct collgen__lua {
  lua_State *L;
  int main_ref;
  int env_ref;
  const char *template_dir;
  collgen__lua_file *files;
  int nfiles;
  uint8_t bundle_hash[32];
  collgen__lua_limits limits;
  size_t mem_used;   /* bytes the allocator handed out and not freed */
  int refused;       /* why the allocator last said no (this call; lua_budget.c) */
  uint64_t work;     /* units spent by the current call */
  double deadline;   /* collgen__now_ms() limit of the current call */
  int expired;       /* the current call ran out of time: everything raises */
  int oom;           /* a memory error was caught (and rethrown) by pcall */
  int stale;         /* a budget error happened: recreate before the next call */
};

/* ---- lua_snapshot.c ---------------------------------------------------- */

/* Fills h->files from h->template_dir: every file of the embedded list,
** from the embedded copies (no dir) or from the dir, which must be a
** template tree holding all of them. On failure writes a message into
** err and returns COLLGEN_ERR_TEMPLATE or COLLGEN_ERR_NO_MEMORY; what was
** read stays in h->files for collgen__lua_free_files. */
int collgen__lua_load_files(collgen__lua *h, char *err, size_t n);
/* Frees what collgen__lua_load_files read; h->files is empty after. */
void collgen__lua_free_files(collgen__lua *h);
/* The snapshot's file at `path` ("gen/main.lua"), or NULL. */
const collgen__lua_file *collgen__lua_find_file(const collgen__lua *h, const char *path);
/* 1 when path (len bytes) names a place inside the tree: relative, no
** empty, '.' or '..' component, no backslash, no NUL. Whether the file
** exists is another matter. */
int collgen__lua_path_inside_tree(const char *path, size_t len);
/* Feeds the whole snapshot into s, path and bytes of each file, in the
** embedded list's order. */
void collgen__lua_hash_files(const collgen__lua *h, collgen__sha256_ctx *s);

/* ---- lua_budget.c ------------------------------------------------------ */

/* What collgen__lua_protected_call returns. */
enum {
  COLLGEN__LUA_CALL_OK = 0,
  COLLGEN__LUA_CALL_ERROR = -1,     /* a Lua error; the message is in err */
  COLLGEN__LUA_CALL_BUDGET = -2,    /* a budget ran out; the state is stale */
  COLLGEN__LUA_CALL_GENERATOR = -3  /* (lua_bridge.c) the planner's own failure */
};

/* The generator whose state L is (the allocator's userdata). */
collgen__lua *collgen__lua_host(lua_State *L);
/* The state's lua_Alloc, with the generator as ud: frees always succeed;
** growth is refused beyond h->limits.memory in all or h->limits.max_object
** for one allocation. Bytes allocated count as work. */
void *collgen__lua_alloc(void *ud, void *ptr, size_t osize, size_t nsize);
/* For pcall and xpcall after their lua_pcall returned `status`: raises
** again what must end the call (running out of time or memory), so no Lua
** code can swallow a budget error. */
void collgen__lua_rethrow_budget(lua_State *L, int status);
/* Calls the function below `nargs` arguments on h->L's stack in protected
** mode, within a fresh budget, with a traceback on errors (none on the
** planner's refusals). Leaves nres results and returns
** COLLGEN__LUA_CALL_OK, or copies the message into err and returns
** COLLGEN__LUA_CALL_ERROR, or COLLGEN__LUA_CALL_BUDGET when a budget ran
** out (h->stale is then set: the state is recreated before the next
** call). */
int collgen__lua_protected_call(collgen__lua *h, int nargs, int nres, char *err, size_t n);

/* ---- lua_readonly.c ---------------------------------------------------- */

/* Creates the registry's set of read-only proxies; once per state, before
** any other function of lua_readonly.c. */
void collgen__lua_open_readonly(lua_State *L);
/* 1 when the value at idx is a read-only proxy. */
int collgen__lua_is_frozen(lua_State *L, int idx);
/* Replaces the table at stack top by its read-only proxy, and every table
** reachable from it through values by theirs. */
void collgen__lua_freeze_top(lua_State *L);

/* ---- lua_guarded.c ----------------------------------------------------- */

/* Pushes the backing table of the sandbox environment: the safe base
** functions, guarded ones, frozen string, math and table. Sets the string
** metatable to the guarded string functions, hidden. The caller adds the
** host functions and the catalog, then freezes it. */
void collgen__lua_push_env(lua_State *L);

/* ---- lua_host_fns.c ---------------------------------------------------- */

/* Creates the registry's table of loaded generator modules (import's);
** once per state. */
void collgen__lua_open_modules(lua_State *L);
/* Sets import, read_source and compile_chunk into the table at stack top. */
void collgen__lua_add_host_fns(lua_State *L);
/* import(name) -> the value returned by gen/<name>.lua, loaded once in
** the sandbox environment (h->env_ref). */
int collgen__lua_import(lua_State *L);

/* ---- lua_host.c -------------------------------------------------------- */

/* Before each call: a state that hit a budget (or none) is replaced by a
** fresh one. COLLGEN_OK, or the error of creating it (message in err). */
int collgen__lua_ready(collgen__lua *h, char *err, size_t n);
#endif
