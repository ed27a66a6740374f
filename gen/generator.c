/*
** generator.c -- the public JIT API: plan a shape, list the kernels of a
** shape class, render a source, get its cubin through the cache (memory,
** then disk, then NVRTC).
*/
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
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
  char nverr[1024];
  if (collgen__nvrtc_load(nverr, sizeof nverr) != COLLGEN_OK)
    return collgen__fail(g->err, sizeof g->err, COLLGEN_ERR_NO_NVRTC,
                         "%s: not in the cache and %s", plan->kernel, nverr);
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
