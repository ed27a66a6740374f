/*
** generator.c -- the public JIT API: plan a shape, list the kernels of a
** shape class, render a source, get its cubin through the cache (memory,
** then disk, then NVRTC), and build many cubins ahead on several threads.
*/
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache.h"
#include "cubin_info.h"
#include "escape.h"
#include "generator.h"
#include "lua_host.h"
#include "nvrtc.h"
#include "sha256.h"

/* Memo of shapes already served: a repeated shape skips the Lua planner
** and the key hash, so a memory hit costs a hash and a memcmp. Shapes are
** compared as bytes; collgen_shape_init zeroes padding. */
#define MEMO_BUCKETS 256
#define MEMO_MAX 65536 /* beyond this many shapes, plan without memoizing */
typedef struct memo_entry {
  collgen_shape_t shape;
  collgen_plan_t plan;
  const collgen__entry *entry; /* NULL until the kernel was fetched */
  struct memo_entry *next;
} memo_entry;

struct collgen_generator {
  memo_entry *memo[MEMO_BUCKETS];
  int memo_count;
  collgen__lua *lua;
  collgen__cache *cache;
  char err[COLLGEN_ERRBUF];
  char log[COLLGEN_ERRBUF]; /* NVRTC log of the last compile */
};

int collgen_generator_create(collgen_generator_t **out, const char *cache_dir) {
  char err[COLLGEN_ERRBUF];
  if (!out) return collgen__fail_tls(COLLGEN_ERR_INVALID_ARG, "out is NULL");
  *out = NULL;
  collgen_generator_t *g = calloc(1, sizeof *g);
  if (!g) return collgen__fail_tls(COLLGEN_ERR_NO_MEMORY, "out of memory");
  int rc = collgen__lua_create(&g->lua, err, sizeof err);
  if (rc != COLLGEN_OK) {
    free(g);
    collgen__set_tls_error(err);
    return rc;
  }
  rc = collgen__cache_open(&g->cache, cache_dir);
  if (rc != COLLGEN_OK) {
    collgen__lua_destroy(g->lua);
    free(g);
    return collgen__fail_tls(rc, "cannot open the cache");
  }
  *out = g;
  return COLLGEN_OK;
}

void collgen_generator_destroy(collgen_generator_t *g) {
  if (!g) return;
  for (int b = 0; b < MEMO_BUCKETS; ++b)
    for (memo_entry *m = g->memo[b], *next; m; m = next) {
      next = m->next;
      free(m);
    }
  collgen__lua_destroy(g->lua);
  collgen__cache_close(g->cache);
  free(g);
}

const char *collgen_generator_last_error(const collgen_generator_t *g) {
  return g ? g->err : collgen_last_error();
}

const char *collgen_generator_last_log(const collgen_generator_t *g) {
  return g ? g->log : "";
}

/* Returns the cache directory of a generator (NULL = memory only). */
const char *collgen__generator_cache_dir(const collgen_generator_t *g) {
  return collgen__cache_dir(g->cache);
}

static unsigned memo_bucket(const collgen_shape_t *s) {
  const unsigned char *p = (const unsigned char *)s;
  uint32_t h = 2166136261u; /* FNV-1a */
  for (size_t i = 0; i < sizeof *s; ++i) h = (h ^ p[i]) * 16777619u;
  return h % MEMO_BUCKETS;
}

static memo_entry *memo_find(collgen_generator_t *g, const collgen_shape_t *s) {
  for (memo_entry *m = g->memo[memo_bucket(s)]; m; m = m->next)
    if (memcmp(&m->shape, s, sizeof *s) == 0) return m;
  return NULL;
}

int collgen_plan(collgen_generator_t *g, const collgen_shape_t *shape,
                 collgen_plan_t *plan) {
  if (!g || !shape || !plan)
    return collgen__fail_tls(COLLGEN_ERR_INVALID_ARG, "NULL argument");
  memo_entry *m = memo_find(g, shape);
  if (m) {
    *plan = m->plan;
    return COLLGEN_OK;
  }
  int rc = collgen__lua_plan(g->lua, shape, plan, g->err, sizeof g->err);
  if (rc != COLLGEN_OK) return rc;
  m = g->memo_count < MEMO_MAX ? calloc(1, sizeof *m) : NULL;
  if (m) { /* memoizing is an optimization: without memory, just don't */
    g->memo_count++;
    m->shape = *shape;
    m->plan = *plan;
    unsigned b = memo_bucket(shape);
    m->next = g->memo[b];
    g->memo[b] = m;
  }
  return COLLGEN_OK;
}

int collgen_plan_variants(collgen_generator_t *g, const collgen_shape_class_t *cls,
                          collgen_shape_t **shapes, int *count) {
  if (shapes) *shapes = NULL;
  if (count) *count = 0;
  if (!g || !cls || !shapes || !count)
    return collgen__fail_tls(COLLGEN_ERR_INVALID_ARG, "NULL argument");
  return collgen__lua_variants(g->lua, cls, shapes, count, g->err, sizeof g->err);
}

int collgen_generate_source(collgen_generator_t *g, const collgen_shape_t *shape,
                            int line_directives, char **source) {
  if (!g || !shape || !source)
    return collgen__fail_tls(COLLGEN_ERR_INVALID_ARG, "NULL argument");
  return collgen__lua_render(g->lua, shape, line_directives, source, g->err,
                             sizeof g->err);
}

/* key = SHA-256 over labelled fields: schema, template bundle, canonical
** spec (which includes the arch), NVRTC options. The NVRTC version is kept
** in the entry header instead (see docs/cache.md): a deployment without
** NVRTC must still find its entries, and a warm hit must not load NVRTC. */
static void compute_key(collgen_generator_t *g, const collgen_plan_t *plan,
                        uint8_t key[32]) {
  collgen__sha256_ctx s;
  static const char schema[] = "collgen-cache-key-v1";
  collgen__sha256_init(&s);
  collgen__sha256_field(&s, "schema", schema, sizeof schema - 1);
  collgen__sha256_field(&s, "bundle", collgen__lua_bundle_hash(g->lua), 32);
  collgen__sha256_field(&s, "spec", plan->canonical, strlen(plan->canonical));
  for (int i = 0; collgen__nvrtc_options[i]; ++i)
    collgen__sha256_field(&s, "option", collgen__nvrtc_options[i],
                          strlen(collgen__nvrtc_options[i]));
  collgen__sha256_final(&s, key);
}

/* Writes the source to a new file $TMPDIR/collgen-<kernel>-<pid>-XXXXXX.cu
** (a fresh random name, created O_CREAT|O_EXCL|O_NOFOLLOW with mode 0600,
** so a name planted in a shared temp folder is never opened or followed);
** returns the path in buf or an empty string. */
static void dump_source(const char *kernel, const char *source, char *buf,
                        size_t n) {
  const char *tmp = getenv("TMPDIR");
  char name[96];
  size_t k = 0;
  for (; kernel[k] && k < sizeof name - 1; ++k) { /* planner names, made path-safe */
    char ch = kernel[k];
    int ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9');
    name[k] = ok ? ch : '_';
  }
  name[k] = 0;
  if (snprintf(buf, n, "%s/collgen-%s-%d-XXXXXX.cu", tmp && *tmp ? tmp : "/tmp", name,
               (int)getpid()) >= (int)n) {
    buf[0] = 0;
    return;
  }
  int fd = mkostemps(buf, 3, O_NOFOLLOW | O_CLOEXEC); /* O_CREAT|O_EXCL, 0600 */
  if (fd < 0) {
    buf[0] = 0;
    return;
  }
  size_t left = strlen(source);
  const char *p = source;
  while (left > 0) {
    ssize_t w = write(fd, p, left);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) break;
    p += w;
    left -= (size_t)w;
  }
  if (close(fd) != 0 || left > 0) {
    unlink(buf);
    buf[0] = 0;
  }
}

static void fill_info(collgen_kernel_info_t *info, const collgen__entry *e,
                      int hit, double t0) {
  collgen__hex(e->key, info->key);
  snprintf(info->kernel, sizeof info->kernel, "%s", e->kernel);
  info->cache_hit = hit;
  info->registers = e->registers;
  info->spill_bytes = e->spill_bytes;
  info->cubin = e->cubin;
  info->cubin_size = e->size;
  info->milliseconds = collgen__now_ms() - t0;
}

/* Renders and compiles the kernel of `plan` (key `key`) with g's Lua state
** and NVRTC, into a new entry that no cache holds yet (*out). Touches
** nothing of g but its Lua state, err and log, so generators on different
** threads build at once. */
static int build_entry(collgen_generator_t *g, const collgen_shape_t *shape,
                       const collgen_plan_t *plan, const uint8_t key[32],
                       collgen__entry **out) {
  char nverr[1024];
  if (collgen__nvrtc_load(nverr, sizeof nverr) != COLLGEN_OK)
    return collgen__fail(g->err, sizeof g->err, COLLGEN_ERR_NO_NVRTC,
                         "%s: not in the cache and %s", plan->kernel, nverr);
  int major = -1, minor = -1;
  collgen_nvrtc_version(&major, &minor);

  char *source = NULL;
  int rc = collgen_generate_source(g, shape, 1, &source);
  if (rc != COLLGEN_OK) return rc;
  collgen__compiled c;
  char cerr[512], dumped[4096] = "";
  rc = collgen__nvrtc_compile(source, plan->kernel, shape->arch[0] ? shape->arch : "sm_90", &c,
                              cerr, sizeof cerr);
  if (rc != COLLGEN_OK || collgen__param_dump_source())
    dump_source(plan->kernel, source, dumped, sizeof dumped);
  free(source);
  char shown[COLLGEN_ESCAPED_SIZE(512)]; /* the dump's folder comes from $TMPDIR */
  collgen__escape(dumped, shown, sizeof shown);
  if (rc == COLLGEN_OK && dumped[0]) /* the name is random: say where it went */
    collgen__log(COLLGEN_LOG_INFO, "%s: source written to %s", plan->kernel, shown);
  if (rc != COLLGEN_OK) {
    collgen__fail(g->err, sizeof g->err, rc, "%s: %s\nsource: %s\n%s", plan->kernel, cerr,
                  dumped[0] ? shown : "(could not dump)", c.log ? c.log : "");
    free(c.cubin);
    free(c.log);
    return rc;
  }
  /* Registers and local memory come from the cubin itself: NVRTC's ptxas
  ** log has been seen to come back empty when many processes compile at
  ** once; the cubin is authoritative. */
  collgen__cubin_kernel k;
  if (collgen__cubin_inspect(c.cubin, c.size, plan->kernel, &k) == 0 && k.found) {
    c.registers = k.registers;
    if (c.log && !strstr(c.log, "Used ")) c.spill_bytes = k.frame_bytes;
  }
  snprintf(g->log, sizeof g->log, "%s", c.log ? c.log : "");
  free(c.log);
  collgen__entry *ne = calloc(1, sizeof *ne);
  if (!ne) {
    free(c.cubin);
    return collgen__fail(g->err, sizeof g->err, COLLGEN_ERR_NO_MEMORY, "out of memory");
  }
  memcpy(ne->key, key, 32);
  ne->cubin = c.cubin;
  ne->size = c.size;
  ne->registers = c.registers;
  ne->spill_bytes = c.spill_bytes;
  ne->nvrtc_major = major;
  ne->nvrtc_minor = minor;
  snprintf(ne->kernel, sizeof ne->kernel, "%s", plan->kernel);
  snprintf(ne->canonical, sizeof ne->canonical, "%s", plan->canonical);
  *out = ne;
  return COLLGEN_OK;
}

/* Memory table, disk, NVRTC, in that order; stores the entry in *out. */
static int get_entry(collgen_generator_t *g, const collgen_shape_t *shape,
                     const collgen_plan_t *plan, collgen_kernel_info_t *info, double t0,
                     const collgen__entry **out) {
  uint8_t key[32];
  compute_key(g, plan, key);
  const collgen__entry *e = collgen__cache_find_memory(g->cache, key);
  if (e) {
    fill_info(info, e, 2, t0);
    *out = e;
    return COLLGEN_OK;
  }
  /* A disk hit must not pay for loading NVRTC (~25 ms). Entries carry the
  ** NVRTC version that built them; once NVRTC is loaded in this process,
  ** entries built by another version are treated as stale and rebuilt. */
  int major = -1, minor = -1;
  collgen__nvrtc_loaded(&major, &minor);
  e = collgen__cache_find_disk(g->cache, key, major, minor);
  if (e) {
    fill_info(info, e, 1, t0);
    *out = e;
    return COLLGEN_OK;
  }
  collgen__entry *ne = NULL;
  int rc = build_entry(g, shape, plan, key, &ne);
  if (rc != COLLGEN_OK) return rc;
  *out = collgen__cache_put(g->cache, ne);
  fill_info(info, *out, 0, t0);
  return COLLGEN_OK;
}

/* The plan and cache entry of a shape: one memo lookup when the shape was
** seen before, else plan + memory/disk/NVRTC. *plan points into the memo,
** or at `spare` when the memo is full; entries live as long as the
** generator. `info`, when not NULL, is filled too. */
static int resolve(collgen_generator_t *g, const collgen_shape_t *shape, collgen_plan_t *spare,
                   collgen_kernel_info_t *info, const collgen_plan_t **plan,
                   const collgen__entry **entry) {
  double t0 = info ? collgen__now_ms() : 0.0;
  memo_entry *m = memo_find(g, shape);
  if (m && m->entry) {
    *plan = &m->plan;
    *entry = m->entry;
    if (info) fill_info(info, m->entry, 2, t0);
    return COLLGEN_OK;
  }
  int rc = collgen_plan(g, shape, spare);
  if (rc != COLLGEN_OK) return rc;
  collgen_kernel_info_t scratch;
  rc = get_entry(g, shape, spare, info ? info : &scratch, t0, entry);
  if (rc != COLLGEN_OK) return rc;
  m = memo_find(g, shape);
  if (m) m->entry = *entry;
  *plan = m ? &m->plan : spare;
  return COLLGEN_OK;
}

int collgen_get_kernel(collgen_generator_t *g, const collgen_shape_t *shape,
                       collgen_kernel_info_t *info) {
  if (!g || !shape || !info)
    return collgen__fail_tls(COLLGEN_ERR_INVALID_ARG, "NULL argument");
  memset(info, 0, sizeof *info);
  collgen_plan_t spare;
  const collgen_plan_t *plan;
  const collgen__entry *entry;
  return resolve(g, shape, &spare, info, &plan, &entry);
}

int collgen__resolve_kernel(collgen_generator_t *g, const collgen_shape_t *shape,
                            collgen_plan_t *spare, const collgen_plan_t **plan,
                            const struct collgen__entry **entry) {
  return resolve(g, shape, spare, NULL, plan, entry);
}

/* ---- building ahead, on several threads (collgen_comm_prepare) ---- */

/* One kernel to build: its shape, plan and key; `built` is the worker's. */
typedef struct {
  collgen_shape_t shape;
  collgen_plan_t plan;
  uint8_t key[32];
  collgen__entry *built;
} build_job;

typedef struct {
  build_job *jobs;
  int count;
  int next;                /* the next job to take (atomic) */
  const uint8_t *bundle;   /* the template bundle the keys were made with */
} build_pool;

/* A worker: its own generator without a cache (a Lua state of its own),
** then jobs until none is left. A job that fails stays unbuilt. */
static void *build_worker(void *arg) {
  build_pool *pool = arg;
  collgen_generator_t *w = calloc(1, sizeof *w);
  char err[COLLGEN_ERRBUF];
  if (!w || collgen__lua_create(&w->lua, err, sizeof err) != COLLGEN_OK) {
    free(w);
    return NULL;
  }
  /* Keys were made from the caller's templates: a tree read differently
  ** here (edited in between) must not be stored under them. */
  if (memcmp(collgen__lua_bundle_hash(w->lua), pool->bundle, 32) == 0)
    for (int i; (i = __atomic_fetch_add(&pool->next, 1, __ATOMIC_RELAXED)) < pool->count;)
      if (build_entry(w, &pool->jobs[i].shape, &pool->jobs[i].plan, pool->jobs[i].key,
                      &pool->jobs[i].built) != COLLGEN_OK)
        pool->jobs[i].built = NULL;
  collgen_generator_destroy(w);
  return NULL;
}

int collgen__generator_build_ahead(collgen_generator_t *g, const collgen_shape_t *shapes,
                                   int count, int threads) {
  if (!g || count < 2 || threads < 2) return 0;
  build_job *jobs = calloc((size_t)count, sizeof *jobs);
  if (!jobs) return 0;
  int n = 0, major = -1, minor = -1;
  collgen__nvrtc_loaded(&major, &minor);
  for (int i = 0; i < count; ++i) {
    build_job *j = &jobs[n];
    j->shape = shapes[i];
    if (collgen_plan(g, &j->shape, &j->plan) != COLLGEN_OK || j->plan.copy_from >= 0) continue;
    compute_key(g, &j->plan, j->key);
    int seen = 0;
    for (int k = 0; k < n && !seen; ++k) seen = memcmp(jobs[k].key, j->key, 32) == 0;
    if (seen || collgen__cache_find_memory(g->cache, j->key) ||
        collgen__cache_find_disk(g->cache, j->key, major, minor))
      continue;
    ++n;
  }
  char nverr[64];
  if (n < 2 || collgen__nvrtc_load(nverr, sizeof nverr) != COLLGEN_OK) {
    free(jobs); /* one kernel (or none) is the caller's own fetch */
    return 0;
  }
  build_pool pool = {jobs, n, 0, collgen__lua_bundle_hash(g->lua)};
  if (threads > n) threads = n;
  pthread_t tid[COLLGEN_MAX_JIT_THREADS];
  int started = 0;
  for (; started < threads - 1 && started < COLLGEN_MAX_JIT_THREADS; ++started)
    if (pthread_create(&tid[started], NULL, build_worker, &pool) != 0) break;
  build_worker(&pool); /* this thread works too */
  for (int t = 0; t < started; ++t) pthread_join(tid[t], NULL);
  int built = 0;
  for (int i = 0; i < n; ++i)
    if (jobs[i].built) {
      collgen__cache_put(g->cache, jobs[i].built); /* memory, then disk where writable */
      ++built;
    }
  free(jobs);
  return built;
}
