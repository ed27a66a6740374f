/*
** lua_host.c -- the embedded Lua 5.4 generator and its sandbox.
**
** One lua_State per generator, never shared across threads. Invariants:
**
** * Files. The Lua sources and templates are read once, when the state is
**   created: the embedded copies, or the same list of files from
**   $COLLGEN_TEMPLATE_DIR (which must hold all of them). Lua code can load
**   nothing else: read_source(path) and import(name) look a name up in that
**   snapshot and refuse absolute paths and '.'/'..' components. The bundle
**   hash covers exactly the snapshot and the catalog, so the cache key
**   covers every byte a render can read.
** * Environment. Only the base, string, table and math libraries are
**   opened. Generator code runs in a read-only table holding a safe subset
**   of the base library, the three host functions and `catalog`; string,
**   math, table and catalog are deep read-only proxies (as is the string
**   metatable), so no call can change what the next call sees. Templates get
**   a fresh table per render (gen/template.lua).
** * Budgets (collgen__lua_limits). A custom allocator caps the state's
**   memory and the size of any one allocation. Work per call is counted in
**   units: a count hook adds VM instructions, the allocator adds bytes
**   allocated, and every C function whose cost is not bounded by its result
**   (string.rep, pattern matching, tonumber, table.insert/remove/move/
**   concat/unpack/sort, compile_chunk) charges its work before or while it
**   does it. The hook and the charges also check a wall-clock deadline.
**   Once a budget is exceeded the hook raises on every instruction and
**   pcall/xpcall rethrow, so no Lua code can swallow the error. After a
**   budget error the state is recreated before the next call.
** * Pattern functions (find, match, gmatch, gsub) are this file's own
**   implementation of Lua 5.4 pattern matching, identical in results, that
**   counts its steps: Lua's own matcher backtracks without bound in C.
*/
#include <ctype.h>
#include <errno.h>
#include <lauxlib.h>
#include <limits.h>
#include <lua.h>
#include <lualib.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "catalog.h"
#include "embedded.h"
#include "lua_catalog.h"
#include "lua_host.h"
#include "lua_patterns.h"
#include "device_abi.h"
#include "sha256.h"

const collgen__lua_limits collgen__lua_default_limits = {
    .memory = (size_t)256 << 20,
    .max_object = (size_t)16 << 20,
    .work = 200000000,
    .wall_ms = 10000,
};

#define HOOK_EVERY 1000              /* VM instructions between budget checks */
#define MAX_SOURCE_BYTES (16 << 20)  /* largest file read from a template dir */
#define READ_ONLY "read-only table"  /* what getmetatable returns for frozen tables */

/* One file of the snapshot. */
typedef struct {
  const char *path;  /* as in the embedded list: "gen/main.lua" */
  const char *text;  /* NUL-terminated; owned when read from a template dir */
  size_t size;
  int owned;
} source_file;

enum { REFUSED_NONE, REFUSED_TOTAL, REFUSED_OBJECT };

struct collgen__lua {
  lua_State *L;
  int main_ref;
  int env_ref;
  const char *template_dir;
  source_file *files;
  int nfiles;
  uint8_t bundle_hash[32];
  collgen__lua_limits limits;
  size_t mem_used;   /* bytes the allocator handed out and not freed */
  int refused;       /* REFUSED_*: why the allocator last said no (this call) */
  uint64_t work;     /* units spent by the current call */
  double deadline;   /* collgen__now_ms() limit of the current call */
  int expired;       /* the current call ran out of time: everything raises */
  int oom;           /* a memory error was caught (and rethrown) by pcall */
  int stale;         /* a budget error happened: recreate before the next call */
};

/* ---- Snapshot of the sources ------------------------------------------ */

/* Reads a regular file of at most MAX_SOURCE_BYTES into a malloc'd
** NUL-terminated buffer; NULL with errno set on failure. */
static char *read_file(const char *path, size_t *size) {
  struct stat st;
  if (stat(path, &st) != 0) return NULL;
  if (!S_ISREG(st.st_mode)) {
    errno = S_ISDIR(st.st_mode) ? EISDIR : EINVAL;
    return NULL;
  }
  if (st.st_size > MAX_SOURCE_BYTES) {
    errno = EFBIG;
    return NULL;
  }
  FILE *fp = fopen(path, "rb");
  if (!fp) return NULL;
  size_t cap = (size_t)st.st_size + 1;
  char *buf = malloc(cap + 1);
  size_t len = buf ? fread(buf, 1, cap, fp) : 0;
  int bad = !buf ? ENOMEM : ferror(fp) || len >= cap ? EIO : 0; /* EIO: grew while read */
  fclose(fp);
  if (bad) {
    free(buf);
    errno = bad;
    return NULL;
  }
  buf[len] = 0;
  *size = len;
  return buf;
}

static void free_files(collgen__lua *h) {
  for (int i = 0; i < h->nfiles; ++i)
    if (h->files[i].owned) free((char *)h->files[i].text);
  free(h->files);
  h->files = NULL;
  h->nfiles = 0;
}

/* Fills h->files: every file of the embedded list, from the embedded
** copies or from the template dir, which must be a template tree holding
** all of them. */
static int load_files(collgen__lua *h, char *err, size_t n) {
  int count = 0;
  while (collgen__embedded_files[count].path) ++count;
  h->files = calloc((size_t)count, sizeof *h->files);
  if (!h->files) return collgen__fail(err, n, COLLGEN_ERR_NO_MEMORY, "out of memory");
  const char *dir = h->template_dir;
  struct stat st;
  int bad_dir = !dir ? 0 : stat(dir, &st) != 0 ? errno : !S_ISDIR(st.st_mode) ? ENOTDIR : 0;
  if (bad_dir)
    return collgen__fail(err, n, COLLGEN_ERR_TEMPLATE,
                         "COLLGEN_TEMPLATE_DIR=%s is not a template tree (%s); unset it to "
                         "use the embedded templates", dir, strerror(bad_dir));
  /* gen/main.lua first: without it the directory is not a template tree */
  for (int pass = 0; pass < 2; ++pass) {
    for (int i = 0; i < count; ++i) {
      const collgen__embedded_file *f = &collgen__embedded_files[i];
      int is_main = strcmp(f->path, "gen/main.lua") == 0;
      if (is_main != (pass == 0)) continue;
      source_file *s = &h->files[h->nfiles++];
      s->path = f->path;
      if (!dir) {
        s->text = (const char *)f->bytes;
        s->size = f->size;
        continue;
      }
      char full[4096];
      if (snprintf(full, sizeof full, "%s/%s", dir, f->path) >= (int)sizeof full)
        return collgen__fail(err, n, COLLGEN_ERR_TEMPLATE,
                             "COLLGEN_TEMPLATE_DIR=%s: path too long", dir);
      char *text = read_file(full, &s->size);
      if (!text)
        return collgen__fail(err, n, COLLGEN_ERR_TEMPLATE,
                             is_main ? "COLLGEN_TEMPLATE_DIR=%s is not a template tree: "
                                       "cannot read %s (%s)"
                                     : "COLLGEN_TEMPLATE_DIR=%s: cannot read %s (%s); a "
                                       "template tree holds every file of gen/ and templates/",
                             dir, f->path, strerror(errno));
      s->text = text;
      s->owned = 1;
    }
  }
  return COLLGEN_OK;
}

static const source_file *find_file(const collgen__lua *h, const char *path) {
  for (int i = 0; i < h->nfiles; ++i)
    if (strcmp(h->files[i].path, path) == 0) return &h->files[i];
  return NULL;
}

/* 1 when path names a place inside the tree: relative, no empty, '.' or
** '..' component, no backslash. Whether the file exists is another matter. */
static int path_inside_tree(const char *path, size_t len) {
  if (len == 0 || path[0] == '/' || strlen(path) != len || strchr(path, '\\')) return 0;
  for (const char *c = path; *c;) {
    size_t l = strcspn(c, "/");
    if (l == 0 || (l == 1 && c[0] == '.') || (l == 2 && c[0] == '.' && c[1] == '.')) return 0;
    c += l;
    if (*c == '/') ++c;
    if (*c == 0 && c[-1] == '/') return 0;
  }
  return 1;
}

/* ---- Budgets ----------------------------------------------------------- */

static collgen__lua *host_of_state(lua_State *L) {
  void *ud = NULL;
  lua_getallocf(L, &ud);
  return ud;
}

/* The allocator: frees always succeed; growth is refused beyond the
** state's memory budget or the largest-object cap. Bytes allocated count
** as work. */
static void *budget_alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
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
  collgen__lua *h = host_of_state(L);
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
  collgen__lua *h = host_of_state(L);
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
static void rethrow_budget(lua_State *L, int status) {
  collgen__lua *h = host_of_state(L);
  if (status == LUA_ERRMEM) h->oom = 1;
  if (status != LUA_OK && (h->expired || status == LUA_ERRMEM)) lua_error(L);
}

static int l_pcall(lua_State *L) {
  luaL_checkany(L, 1);
  int status = lua_pcall(L, lua_gettop(L) - 1, LUA_MULTRET, 0);
  rethrow_budget(L, status);
  lua_pushboolean(L, status == LUA_OK);
  lua_insert(L, 1);
  return lua_gettop(L);
}

/* xpcall's message handler, around the caller's (upvalue 1). An error
** raised by the count hook runs the handler with hooks off, so once the
** call is out of time the caller's handler is not run at all. */
static int xpcall_handler(lua_State *L) {
  if (host_of_state(L)->expired) return 1; /* the budget error, as it is */
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
  rethrow_budget(L, status);
  lua_pushboolean(L, status == LUA_OK);
  lua_replace(L, 1);
  return lua_gettop(L);
}

/* ---- Read-only tables ----------------------------------------------------
** A frozen table is an empty proxy whose metatable (hidden by __metatable)
** reads from the original, which nothing else references. The registry
** set "collgen.frozen" holds the proxies (weak keys). */

static int is_frozen(lua_State *L, int idx) {
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
  if (is_frozen(L, idx)) {
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
  lua_pushliteral(L, READ_ONLY);
  lua_setfield(L, -2, "__metatable");
  lua_setmetatable(L, proxy);
  lua_getfield(L, LUA_REGISTRYINDEX, "collgen.frozen");
  lua_pushvalue(L, proxy);
  lua_pushboolean(L, 1);
  lua_rawset(L, -3);
  lua_pop(L, 1);
}

/* Replaces the table at stack top by its read-only proxy. */
static void freeze_top(lua_State *L) {
  lua_newtable(L);
  freeze_into(L, -2, lua_gettop(L));
  lua_replace(L, -3);
  lua_pop(L, 1);
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
  if (is_frozen(L, 1)) return luaL_error(L, "attempt to modify a read-only table");
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
  size_t cap = host_of_state(L)->limits.max_object;
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
  if (!is_frozen(L, idx) && lua_getmetatable(L, idx)) {
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

/* ---- Host functions ------------------------------------------------------ */

static collgen__lua *host_of(lua_State *L) { return host_of_state(L); }

/* read_source(path) -> text of a file of the tree, or nil when the tree
** has no such file; a path that leaves the tree is an error. */
static int l_read_source(lua_State *L) {
  size_t len;
  const char *path = luaL_checklstring(L, 1, &len);
  if (!path_inside_tree(path, len))
    return luaL_error(L, "read_source: '%s' is outside the template tree (absolute paths "
                      "and '.' or '..' components are refused)", path);
  const source_file *f = find_file(host_of(L), path);
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
  if (status == LUA_ERRMEM) host_of(L)->oom = 1; /* rethrown as a plain error */
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
static int l_import(lua_State *L) {
  collgen__lua *h = host_of(L);
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
  const source_file *f = find_file(h, path);
  if (!f) return luaL_error(L, "no generator module '%s'", path);
  lua_rawgeti(L, LUA_REGISTRYINDEX, h->env_ref);
  load_text(L, f->text, f->size, chunkname, lua_gettop(L));
  lua_call(L, 0, 1);
  lua_pushvalue(L, -1);
  lua_setfield(L, -4, name); /* modules[name] = result */
  return 1;
}

static int traceback_handler(lua_State *L) {
  const char *msg = lua_tostring(L, 1);
  if (!msg) msg = "(error object is not a string)";
  if (strncmp(msg, "planner: ", 9) == 0) return 1; /* a user error, not a bug */
  luaL_traceback(L, L, msg, 1);
  return 1;
}

enum { CALL_OK = 0, CALL_ERROR = -1, CALL_BUDGET = -2, CALL_GENERATOR = -3 };

/* Calls the function below `nargs` arguments on the stack in protected
** mode, within the budgets. On error copies the message into err and
** returns CALL_ERROR, or CALL_BUDGET when a budget ran out (the state is
** then recreated before the next call). */
static int protected_call(collgen__lua *h, int nargs, int nres, char *err, size_t n) {
  lua_State *L = h->L;
  int base = lua_gettop(L) - nargs;
  lua_pushcfunction(L, traceback_handler);
  lua_insert(L, base);
  start_call(h);
  int rc = lua_pcall(L, nargs, nres, base);
  lua_remove(L, base);
  if (rc == LUA_OK) return CALL_OK;
  const char *msg = lua_tostring(L, -1) ? lua_tostring(L, -1) : "?";
  int budget = CALL_ERROR;
  if (rc == LUA_ERRMEM || h->oom) {
    budget = CALL_BUDGET;
    if (h->refused == REFUSED_OBJECT)
      snprintf(err, n, "generator exceeded its memory budget: one string or table of more "
               "than %zu bytes (%s)", h->limits.max_object, msg);
    else
      snprintf(err, n, "generator exceeded its memory budget of %zu bytes (%s)",
               h->limits.memory, msg);
  } else {
    if (h->expired) budget = CALL_BUDGET;
    snprintf(err, n, "%s", msg);
  }
  lua_pop(L, 1);
  if (budget == CALL_BUDGET) h->stale = 1;
  return budget;
}

/* ---- The state ------------------------------------------------------------ */

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
  freeze_top(L);
  lua_setfield(L, env, name);
  lua_pop(L, 1);
}

/* Pushes the sandbox environment's backing table: safe base functions,
** guarded ones, frozen string/math/table, the host functions. Sets the
** string metatable to the guarded string functions, hidden. */
static void push_sandbox(lua_State *L) {
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
  lua_pushliteral(L, READ_ONLY);
  lua_setfield(L, -2, "__metatable");
  lua_pop(L, 2);
  freeze_top(L);
  lua_setfield(L, env, "string");
  lua_pop(L, 1);

  install_frozen_lib(L, env, LUA_MATHLIBNAME, maths);
  install_frozen_lib(L, env, LUA_TABLIBNAME, tables);

  static const luaL_Reg host_fns[] = {
      {"import", l_import}, {"read_source", l_read_source},
      {"compile_chunk", l_compile_chunk}, {NULL, NULL}};
  luaL_setfuncs(L, host_fns, 0);
}

/* Hashes the snapshot into s, in the embedded list's order. */
static void hash_files(const collgen__lua *h, collgen__sha256_ctx *s) {
  for (const collgen__embedded_file *e = collgen__embedded_files; e->path; ++e) {
    const source_file *f = find_file(h, e->path);
    collgen__sha256_field(s, e->path, f->text, f->size);
  }
}

static int open_state(lua_State *L) {
  collgen__lua *h = host_of_state(L);
  luaL_requiref(L, "_G", luaopen_base, 1);
  luaL_requiref(L, LUA_STRLIBNAME, luaopen_string, 1);
  luaL_requiref(L, LUA_TABLIBNAME, luaopen_table, 1);
  luaL_requiref(L, LUA_MATHLIBNAME, luaopen_math, 1);
  lua_settop(L, 0);
  lua_newtable(L);
  lua_setfield(L, LUA_REGISTRYINDEX, "collgen.modules");
  lua_newtable(L); /* the set of read-only proxies, weak keys */
  lua_createtable(L, 0, 1);
  lua_pushliteral(L, "k");
  lua_setfield(L, -2, "__mode");
  lua_setmetatable(L, -2);
  lua_setfield(L, LUA_REGISTRYINDEX, "collgen.frozen");
  push_sandbox(L);
  /* the bundle hash: the snapshot and the catalog as this state sees it
  ** (a recreated state sees the same bytes) */
  collgen__sha256_ctx s;
  collgen__sha256_init(&s);
  hash_files(h, &s);
  collgen__lua_push_catalog(L, &s);
  collgen__sha256_final(&s, h->bundle_hash);
  freeze_top(L);
  lua_setfield(L, -2, "catalog");
  freeze_top(L);
  h->env_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  lua_pushcfunction(L, l_import);
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
  h->L = lua_newstate(budget_alloc, h);
  if (!h->L) return collgen__fail(err, n, COLLGEN_ERR_NO_MEMORY, "cannot create a Lua state");
  lua_setwarnf(h->L, NULL, NULL);
  lua_pushcfunction(h->L, open_state);
  if (protected_call(h, 0, 0, err, n) != CALL_OK) {
    close_state(h);
    return COLLGEN_ERR_TEMPLATE;
  }
  return COLLGEN_OK;
}

/* Before each call: a state that hit a budget is replaced by a fresh one. */
static int ready(collgen__lua *h, char *err, size_t n) {
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
  int rc = load_files(h, err, n);
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
  free_files(h);
  free(h);
}

void collgen__lua_set_limits(collgen__lua *h, const collgen__lua_limits *limits) {
  h->limits = *limits;
}

const uint8_t *collgen__lua_bundle_hash(const collgen__lua *h) {
  return h->bundle_hash;
}

/* ---- The shape bridge: collgen_shape_t <-> the planner's shape table ----
** Both directions follow COLLGEN_SHAPE_FIELDS (src/collgen.h): one row, one
** key of the table, converted by its kind. */

typedef enum {
  KIND_OP, KIND_DTYPE, KIND_FP8, KIND_INT, KIND_INT64, KIND_GROUP, KIND_BOOL, KIND_ARCH
} shape_kind;

typedef struct {
  const char *name;     /* the field, also its key in the Lua table */
  shape_kind kind;
  size_t offset, size;  /* within collgen_shape_t */
  int64_t lo, hi;       /* INT, INT64, GROUP: the range read back */
} shape_field;

/* Each row's C type has the size its kind is read and written with. */
#define CHECK_SHAPE_ROW(type, name, bound, kind, lo, hi, dflt, doc)                    \
  _Static_assert(KIND_##kind == KIND_ARCH                                              \
                     ? sizeof(type) == 1 && sizeof(type bound) > 1                     \
                     : sizeof(type bound) == (KIND_##kind == KIND_INT64 ? sizeof(int64_t) \
                                                                         : sizeof(int)), \
                 "collgen_shape_t." #name ": the C type does not fit the kind " #kind);
COLLGEN_SHAPE_FIELDS(CHECK_SHAPE_ROW)
#undef CHECK_SHAPE_ROW

static const shape_field shape_fields[] = {
#define SHAPE_ROW(type, name, bound, kind, lo, hi, dflt, doc) \
  {#name, KIND_##kind, offsetof(collgen_shape_t, name), sizeof(type bound), lo, hi},
    COLLGEN_SHAPE_FIELDS(SHAPE_ROW)
#undef SHAPE_ROW
};
#define SHAPE_FIELD_COUNT (sizeof shape_fields / sizeof shape_fields[0])

/* The integer value of field f of *s (INT64 as int64_t, the rest as int). */
static int64_t get_integer(const collgen_shape_t *s, const shape_field *f) {
  const char *p = (const char *)s + f->offset;
  if (f->kind == KIND_INT64) {
    int64_t v;
    memcpy(&v, p, sizeof v);
    return v;
  }
  int v;
  memcpy(&v, p, sizeof v);
  return v;
}

/* Stores v (within the field's range) into field f of *s. */
static void set_integer(collgen_shape_t *s, const shape_field *f, int64_t v) {
  char *p = (char *)s + f->offset;
  if (f->kind == KIND_INT64) {
    memcpy(p, &v, sizeof v);
  } else {
    int x = (int)v;
    memcpy(p, &x, sizeof x);
  }
}

/* What an enum kind is called in messages. */
static const char *enum_noun(shape_kind k) {
  return k == KIND_OP ? "op" : k == KIND_DTYPE ? "dtype" : "fp8 mode";
}

/* The catalog name of value v of an enum kind; NULL when the catalog has none. */
static const char *enum_name(shape_kind k, int v) {
  if (k == KIND_OP)
    return collgen__op_find((collgen_op_t)v) ? collgen__op_name((collgen_op_t)v) : NULL;
  if (k == KIND_DTYPE)
    return collgen__dtype_find((collgen_dtype_t)v) ? collgen__dtype_name((collgen_dtype_t)v)
                                                    : NULL;
  return collgen__fp8_find((collgen_fp8_mode_t)v) ? collgen__fp8_name((collgen_fp8_mode_t)v)
                                                   : NULL;
}

/* The value of catalog name s of an enum kind into *v; -1 when unknown. */
static int enum_parse(shape_kind k, const char *s, int *v) {
  int rc = -1;
  if (k == KIND_OP) {
    collgen_op_t x;
    if ((rc = collgen__parse_op(s, &x)) == 0) *v = (int)x;
  } else if (k == KIND_DTYPE) {
    collgen_dtype_t x;
    if ((rc = collgen__parse_dtype(s, &x)) == 0) *v = (int)x;
  } else {
    collgen_fp8_mode_t x;
    if ((rc = collgen__parse_fp8(s, &x)) == 0) *v = (int)x;
  }
  return rc;
}

/* Pushes *s as gen/planner.lua reads a shape: one key per row, group_size
** resolved (0 = ngpus) and an empty arch as its default. An enum value the
** catalog lacks ("unknown dtype 9") pushes nothing and returns -1. */
static int push_shape(lua_State *L, const collgen_shape_t *s, char *err, size_t n) {
  collgen_shape_t dflt;
  collgen_shape_init(&dflt, s->op);
  lua_createtable(L, 0, (int)SHAPE_FIELD_COUNT);
  for (size_t i = 0; i < SHAPE_FIELD_COUNT; ++i) {
    const shape_field *f = &shape_fields[i];
    int64_t v = f->kind == KIND_ARCH ? 0 : get_integer(s, f);
    switch (f->kind) {
      case KIND_OP:
      case KIND_DTYPE:
      case KIND_FP8: {
        const char *name = enum_name(f->kind, (int)v);
        if (!name) {
          lua_pop(L, 1);
          return collgen__fail(err, n, -1, "unknown %s %d", enum_noun(f->kind), (int)v);
        }
        lua_pushstring(L, name);
        break;
      }
      case KIND_GROUP: lua_pushinteger(L, v ? v : s->ngpus); break;
      case KIND_BOOL: lua_pushboolean(L, v != 0); break;
      case KIND_ARCH: {
        const char *a = (const char *)s + f->offset;
        if (!a[0]) a = (const char *)&dflt + f->offset;
        const char *end = memchr(a, 0, f->size); /* the caller's may lack a NUL */
        lua_pushlstring(L, a, end ? (size_t)(end - a) : f->size);
        break;
      }
      default: lua_pushinteger(L, v);
    }
    lua_setfield(L, -2, f->name);
  }
  return 0;
}

/* Copies the string at stack top (field k of table `table`, for the
** message) into dst[n]; a non-string or one that does not fit is an error,
** never a truncation. Leaves the stack as it was. */
static int copy_top_string(lua_State *L, const char *table, const char *k, char *dst, size_t n,
                           char *err, size_t errn) {
  size_t len = 0;
  const char *v = lua_type(L, -1) == LUA_TSTRING ? lua_tolstring(L, -1, &len) : NULL;
  if (v && len < n && strlen(v) == len) {
    memcpy(dst, v, len + 1);
    return 0;
  }
  return collgen__fail(err, errn, -1, "planner: %s field '%s' is %s (at most %zu bytes fit)",
                       table, k, !v ? "missing" : len < n ? "not a C string" : "too long", n - 1);
}

/* Reads the integer at stack top (field k of `table`) into *v when it is
** an integer in [lo, hi]; else writes a message and returns -1. */
static int top_integer(lua_State *L, const char *table, const char *k, int64_t lo, int64_t hi,
                       int64_t *v, char *err, size_t n) {
  int isnum = 0;
  lua_Integer x = lua_tointegerx(L, -1, &isnum);
  if (!isnum || x < lo || x > hi)
    return collgen__fail(err, n, -1, "planner: %s field '%s' is not an integer in "
                         "[%lld, %lld]", table, k, (long long)lo, (long long)hi);
  *v = (int64_t)x;
  return 0;
}

/* Reads the shape table at stack top into *s, one key per row: an enum by
** catalog name, an integer within its row's range, a boolean, an arch that
** fits. A value of another type, out of range or too long is refused with
** a message naming the field, never truncated; returns -1 then. */
static int read_shape(lua_State *L, collgen_shape_t *s, char *err, size_t n) {
  memset(s, 0, sizeof *s); /* padding too: shapes are compared as bytes */
  for (size_t i = 0; i < SHAPE_FIELD_COUNT; ++i) {
    const shape_field *f = &shape_fields[i];
    lua_getfield(L, -1, f->name);
    int bad = 0, e = 0;
    int64_t v = 0;
    switch (f->kind) {
      case KIND_OP:
      case KIND_DTYPE:
      case KIND_FP8: {
        const char *name = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
        if (!name || enum_parse(f->kind, name, &e) != 0)
          bad = collgen__fail(err, n, -1, "planner: shape field '%s' is not a known %s",
                              f->name, enum_noun(f->kind));
        v = e;
        break;
      }
      case KIND_BOOL:
        if (!lua_isboolean(L, -1))
          bad = collgen__fail(err, n, -1, "planner: shape field '%s' is not a boolean", f->name);
        v = lua_toboolean(L, -1);
        break;
      case KIND_ARCH:
        bad = copy_top_string(L, "shape", f->name, (char *)s + f->offset, f->size, err, n);
        break;
      default: bad = top_integer(L, "shape", f->name, f->lo, f->hi, &v, err, n);
    }
    lua_pop(L, 1);
    if (bad) return -1;
    if (f->kind != KIND_ARCH) set_integer(s, f, v);
  }
  return 0;
}

/* Pushes main[fn] (a function) onto the stack. */
static void push_main_fn(collgen__lua *h, const char *fn) {
  lua_rawgeti(h->L, LUA_REGISTRYINDEX, h->main_ref);
  lua_getfield(h->L, -1, fn);
  lua_remove(h->L, -2);
}

/* The planner's own refusals of a shape start with this (gen/planner.lua's
** fail); any other error of the planner is the generator's fault. */
#define PLANNER_REFUSAL "planner: "

/* protected_call of a planner function with its one argument pushed: a
** Lua error other than the planner's refusals becomes CALL_GENERATOR. */
static int planner_call(collgen__lua *h, char *err, size_t n) {
  int call = protected_call(h, 1, 1, err, n);
  if (call == CALL_ERROR && strncmp(err, PLANNER_REFUSAL, sizeof PLANNER_REFUSAL - 1) != 0)
    call = CALL_GENERATOR;
  return call;
}

/* Leaves the spec table of `shape` on the stack, or returns CALL_ERROR
** (a shape the catalog or the planner refuses; message in err),
** CALL_BUDGET or CALL_GENERATOR (the planner failed: a Lua error other
** than its refusals, such as a broken COLLGEN_TEMPLATE_DIR tree). */
static int plan_to_stack(collgen__lua *h, const collgen_shape_t *shape,
                         char *err, size_t n) {
  push_main_fn(h, "plan");
  if (push_shape(h->L, shape, err, n) != 0) {
    lua_pop(h->L, 1);
    return CALL_ERROR;
  }
  return planner_call(h, err, n);
}

/* The status of a failed planner call: the caller's shape
** (COLLGEN_ERR_INVALID_ARG) when refused, else the generator's fault
** (COLLGEN_ERR_TEMPLATE: its budget, or an error in its Lua). */
static int plan_status(int call) {
  return call == CALL_ERROR ? COLLGEN_ERR_INVALID_ARG : COLLGEN_ERR_TEMPLATE;
}

static int str_field(lua_State *L, const char *k, char *dst, size_t n, char *err,
                     size_t errn) {
  lua_getfield(L, -1, k);
  int rc = copy_top_string(L, "spec", k, dst, n, err, errn);
  lua_pop(L, 1);
  return rc;
}

/* Reads integer field k of the spec at stack top into *v when it is an
** integer in [lo, hi]; else writes a message and returns -1. */
static int int_field(lua_State *L, const char *k, int64_t lo, int64_t hi, int64_t *v,
                     char *err, size_t n) {
  lua_getfield(L, -1, k);
  int rc = top_integer(L, "spec", k, lo, hi, v, err, n);
  lua_pop(L, 1);
  return rc;
}

static int int_field_i(lua_State *L, const char *k, int lo, int hi, int *v, char *err,
                       size_t n) {
  int64_t x = 0;
  if (int_field(L, k, lo, hi, &x, err, n) != 0) return -1;
  *v = (int)x;
  return 0;
}

/* The role of op d named by the string at stack top (what = the spec
** field, for the message), or -1 with err set. Leaves the stack as it was. */
static int top_role(lua_State *L, const collgen__op_desc *d, const char *what, char *err,
                    size_t n) {
  const char *name = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
  int k = collgen__role_find(d, name);
  if (k < 0)
    collgen__fail(err, n, -1, "planner: spec field '%s' names no role of %s", what, d->name);
  return k;
}

/* *mask = the roles listed in spec field k (a list of role names). */
static int role_mask_field(lua_State *L, const collgen__op_desc *d, const char *k,
                           unsigned *mask, char *err, size_t n) {
  *mask = 0;
  lua_getfield(L, -1, k);
  int bad = lua_type(L, -1) != LUA_TTABLE;
  if (bad) collgen__fail(err, n, -1, "planner: spec field '%s' is not a list of roles", k);
  for (lua_Integer i = 1; !bad; ++i) {
    if (lua_rawgeti(L, -1, i) == LUA_TNIL) {
      lua_pop(L, 1);
      break;
    }
    int role = top_role(L, d, k, err, n);
    lua_pop(L, 1);
    bad = role < 0;
    if (!bad) *mask |= 1u << role;
  }
  lua_pop(L, 1);
  return bad ? -1 : 0;
}

/* plan->copy_from/copy_to from spec field copy ({from = role, to = role}
** or nil: -1, -1). */
static int copy_field(lua_State *L, const collgen__op_desc *d, collgen_plan_t *plan, char *err,
                      size_t n) {
  plan->copy_from = plan->copy_to = -1;
  lua_getfield(L, -1, "copy");
  int bad = 0;
  if (lua_type(L, -1) == LUA_TTABLE) {
    lua_getfield(L, -1, "from");
    plan->copy_from = top_role(L, d, "copy.from", err, n);
    lua_getfield(L, -2, "to");
    plan->copy_to = plan->copy_from < 0 ? -1 : top_role(L, d, "copy.to", err, n);
    lua_pop(L, 2);
    bad = plan->copy_from < 0 || plan->copy_to < 0;
  } else if (!lua_isnil(L, -1)) {
    bad = collgen__fail(err, n, -1, "planner: spec field 'copy' is not {from, to}");
  }
  lua_pop(L, 1);
  return bad ? -1 : 0;
}

int collgen__lua_plan(collgen__lua *h, const collgen_shape_t *shape,
                      collgen_plan_t *plan, char *err, size_t n) {
  memset(plan, 0, sizeof *plan);
  int rc = ready(h, err, n);
  if (rc != COLLGEN_OK) return rc;
  lua_State *L = h->L;
  int call = plan_to_stack(h, shape, err, n);
  if (call != CALL_OK) return plan_status(call);
  int bad = str_field(L, "kernel", plan->kernel, sizeof plan->kernel, err, n) ||
            str_field(L, "algo", plan->algo, sizeof plan->algo, err, n) ||
            int_field_i(L, "group", 1, COLLGEN_MAX_DEVICES, &plan->group, err, n) ||
            int_field_i(L, "vec", 1, 16, &plan->vec, err, n) ||
            int_field_i(L, "block", 1, 1024, &plan->block, err, n) ||
            /* a group of one touches no signal slot (COLLGEN_LOCAL_MAX_GRID) */
            int_field_i(L, "grid", 1, plan->group == 1 ? COLLGEN_LOCAL_MAX_GRID : COLLGEN_MAX_BLOCKS,
                        &plan->grid, err, n) ||
            int_field_i(L, "items", 0, 1024, &plan->items, err, n) ||
            int_field(L, "cols", 0, INT64_MAX, &plan->cols, err, n);
  const collgen__op_desc *d = collgen__op_find(shape->op);
  bad = bad || !d || role_mask_field(L, d, "peer_reads", &plan->peer_reads, err, n) ||
        role_mask_field(L, d, "peer_writes", &plan->peer_writes, err, n) ||
        copy_field(L, d, plan, err, n);
  if (bad) {
    lua_pop(L, 1);
    return COLLGEN_ERR_TEMPLATE;
  }
  push_main_fn(h, "canonical");
  lua_insert(L, -2);
  if (protected_call(h, 1, 1, err, n) != CALL_OK) return COLLGEN_ERR_TEMPLATE;
  bad = copy_top_string(L, "spec", "canonical", plan->canonical, sizeof plan->canonical, err, n);
  lua_pop(L, 1);
  return bad ? COLLGEN_ERR_TEMPLATE : COLLGEN_OK;
}

/* Calls the function below 2 + nextra values (spec, extra arguments,
** line_directives) and copies the string it returns into *source. */
static int finish_render(collgen__lua *h, int nargs, char **source, char *err, size_t n) {
  lua_State *L = h->L;
  if (protected_call(h, nargs, 1, err, n) != CALL_OK) return COLLGEN_ERR_TEMPLATE;
  size_t len;
  const char *text = lua_tolstring(L, -1, &len);
  if (!text) {
    lua_pop(L, 1);
    return collgen__fail(err, n, COLLGEN_ERR_TEMPLATE, "the renderer returned no text");
  }
  *source = malloc(len + 1);
  if (!*source) {
    lua_pop(L, 1);
    return collgen__fail(err, n, COLLGEN_ERR_NO_MEMORY, "out of memory");
  }
  memcpy(*source, text, len + 1);
  lua_pop(L, 1);
  return COLLGEN_OK;
}

int collgen__lua_render(collgen__lua *h, const collgen_shape_t *shape,
                        int line_directives, char **source, char *err,
                        size_t n) {
  *source = NULL;
  int rc = ready(h, err, n);
  if (rc != COLLGEN_OK) return rc;
  int call = plan_to_stack(h, shape, err, n);
  if (call != CALL_OK) return plan_status(call);
  push_main_fn(h, "render");
  lua_insert(h->L, -2);
  lua_pushboolean(h->L, line_directives);
  return finish_render(h, 2, source, err, n);
}

int collgen__lua_render_text(collgen__lua *h, const collgen_shape_t *shape,
                             const char *text, size_t len, int line_directives,
                             char **source, char *err, size_t n) {
  *source = NULL;
  int rc = ready(h, err, n);
  if (rc != COLLGEN_OK) return rc;
  int call = plan_to_stack(h, shape, err, n);
  if (call != CALL_OK) return plan_status(call);
  if (!lua_checkstack(h->L, 4)) {
    lua_pop(h->L, 1);
    return collgen__fail(err, n, COLLGEN_ERR_NO_MEMORY, "out of memory");
  }
  push_main_fn(h, "render_text");
  lua_insert(h->L, -2);
  lua_pushlstring(h->L, text, len); /* within the state's memory budget: may fail */
  lua_pushboolean(h->L, line_directives);
  rc = finish_render(h, 3, source, err, n);
  /* leave no garbage behind: a fuzzer counts the allocations of an input */
  if (!h->stale) lua_gc(h->L, LUA_GCCOLLECT);
  return rc;
}

/* Pushes a shape class as the planner reads it (planner.variants). */
static void push_class(lua_State *L, const collgen_shape_class_t *c) {
  lua_createtable(L, 0, 6);
  lua_pushstring(L, collgen__op_name(c->op));
  lua_setfield(L, -2, "op");
  lua_pushstring(L, collgen__dtype_name(c->dtype));
  lua_setfield(L, -2, "dtype");
  lua_pushinteger(L, c->ngpus);
  lua_setfield(L, -2, "ngpus");
  lua_pushstring(L, c->arch[0] ? c->arch : "sm_90");
  lua_setfield(L, -2, "arch");
  if (c->group_sizes) {
    lua_createtable(L, c->group_size_count, 0);
    for (int i = 0; i < c->group_size_count; ++i) {
      lua_pushinteger(L, c->group_sizes[i]);
      lua_rawseti(L, -2, i + 1);
    }
    lua_setfield(L, -2, "group_sizes");
  }
  lua_createtable(L, c->cols ? c->cols_count : 0, 0);
  for (int i = 0; c->cols && i < c->cols_count; ++i) {
    lua_pushinteger(L, c->cols[i]);
    lua_rawseti(L, -2, i + 1);
  }
  lua_setfield(L, -2, "cols");
  if (c->fp8_modes) {
    lua_createtable(L, c->fp8_mode_count, 0);
    for (int i = 0; i < c->fp8_mode_count; ++i) {
      lua_pushstring(L, collgen__fp8_name(c->fp8_modes[i]));
      lua_rawseti(L, -2, i + 1);
    }
    lua_setfield(L, -2, "fp8");
  }
}

/* Fills *s from the variant at stack top ({shape, spec, canonical}): every
** field from variant.shape (the planner copies the class's own fields). */
static int read_variant(lua_State *L, collgen_shape_t *s, char *err, size_t n) {
  if (lua_getfield(L, -1, "shape") != LUA_TTABLE) {
    lua_pop(L, 1);
    return collgen__fail(err, n, -1, "planner: a variant has no shape");
  }
  int bad = read_shape(L, s, err, n);
  lua_pop(L, 1);
  return bad;
}

int collgen__lua_variants(collgen__lua *h, const collgen_shape_class_t *cls,
                          collgen_shape_t **shapes, int *count, char *err, size_t n) {
  *shapes = NULL;
  *count = 0;
  if (!collgen__op_find(cls->op))
    return collgen__fail(err, n, COLLGEN_ERR_INVALID_ARG, "unknown op %d", (int)cls->op);
  if (!collgen__dtype_find(cls->dtype))
    return collgen__fail(err, n, COLLGEN_ERR_INVALID_ARG, "unknown dtype %d", (int)cls->dtype);
  if (cls->group_size_count < 0 || cls->cols_count < 0 || cls->fp8_mode_count < 0)
    return collgen__fail(err, n, COLLGEN_ERR_INVALID_ARG, "negative list length");
  for (int i = 0; cls->fp8_modes && i < cls->fp8_mode_count; ++i)
    if (!collgen__fp8_find(cls->fp8_modes[i]))
      return collgen__fail(err, n, COLLGEN_ERR_INVALID_ARG, "unknown fp8 mode %d",
                           (int)cls->fp8_modes[i]);
  int rc = ready(h, err, n);
  if (rc != COLLGEN_OK) return rc;
  lua_State *L = h->L;
  push_main_fn(h, "variants");
  push_class(L, cls);
  int call = planner_call(h, err, n);
  if (call != CALL_OK) return plan_status(call);
  lua_Integer len = lua_type(L, -1) == LUA_TTABLE ? luaL_len(L, -1) : -1;
  if (len < 0 || len > INT_MAX / (lua_Integer)sizeof **shapes)
    rc = collgen__fail(err, n, COLLGEN_ERR_TEMPLATE, "planner: variants is not a list");
  collgen_shape_t *out = len > 0 && rc == COLLGEN_OK ? calloc((size_t)len, sizeof *out) : NULL;
  if (len > 0 && rc == COLLGEN_OK && !out)
    rc = collgen__fail(err, n, COLLGEN_ERR_NO_MEMORY, "out of memory");
  for (lua_Integer i = 1; rc == COLLGEN_OK && i <= len; ++i) {
    lua_rawgeti(L, -1, i);
    if (!lua_istable(L, -1))
      rc = collgen__fail(err, n, COLLGEN_ERR_TEMPLATE, "planner: variant %d is not a table",
                         (int)i);
    else if (read_variant(L, &out[i - 1], err, n) != 0)
      rc = COLLGEN_ERR_TEMPLATE;
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  if (rc != COLLGEN_OK) {
    free(out);
    return rc;
  }
  *shapes = out;
  *count = (int)len;
  return COLLGEN_OK;
}

const char *collgen_lua_version(void) { return LUA_RELEASE; }
