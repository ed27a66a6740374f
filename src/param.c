/*
** param.c -- environment parameters (read once, then cached) and the
** default cache directory. (The cache's own file-system steps, which must
** not follow links inside the tree, live in cache/cache.c.)
*/
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "escape.h"
#include "internal.h"
#include "parse_int.h"

static pthread_once_t params_once = PTHREAD_ONCE_INIT;
static const char *template_dir;
static int dump_source;
static int cache_disable;
static int64_t cache_max_bytes;
static int timeout_ms;
static int jit_threads;

/* The value of an integer variable when it is set and in [lo, hi]; the
** default otherwise (a malformed or out-of-range value is ignored, never
** truncated or wrapped, with a warning that shows it escaped). */
static int64_t env_int(const char *name, int64_t lo, int64_t hi, int64_t dflt) {
  const char *v = getenv(name);
  if (!v || !*v) return dflt;
  int64_t x = 0;
  if (collgen__parse_int(v, lo, hi, &x) != 0) {
    char shown[256];
    collgen__log(COLLGEN_LOG_WARN, "ignoring %s=%s (not an integer in %lld..%lld)", name,
                 collgen__escape(v, shown, sizeof shown), (long long)lo, (long long)hi);
    return dflt;
  }
  return x;
}

static void read_params(void) {
  /* Only the path: whether it is a template tree is checked, with a clear
  ** error, each time a generator reads its files (lua_snapshot.c). */
  const char *t = getenv("COLLGEN_TEMPLATE_DIR");
  template_dir = (t && *t) ? t : NULL;
  dump_source = (int)env_int("COLLGEN_DUMP_SOURCE", 0, 1, 0);
  cache_disable = (int)env_int("COLLGEN_CACHE_DISABLE", 0, 1, 0);
  cache_max_bytes = env_int("COLLGEN_CACHE_MAX_BYTES", 0, (int64_t)1 << 50, (int64_t)1 << 30);
  timeout_ms = (int)env_int("COLLGEN_TIMEOUT_MS", 1, COLLGEN_MAX_TIMEOUT_MS,
                           COLLGEN_DEFAULT_TIMEOUT_MS);
  /* Default: the CPUs this process may run on, at most 8 (each NVRTC
  ** compile holds tens of MB while it runs). */
  cpu_set_t cpus;
  int usable = sched_getaffinity(0, sizeof cpus, &cpus) == 0 ? CPU_COUNT(&cpus) : 1;
  if (usable > COLLGEN_DEFAULT_JIT_THREADS) usable = COLLGEN_DEFAULT_JIT_THREADS;
  jit_threads = (int)env_int("COLLGEN_JIT_THREADS", 1, COLLGEN_MAX_JIT_THREADS,
                             usable < 1 ? 1 : usable);
}

const char *collgen__param_template_dir(void) {
  pthread_once(&params_once, read_params);
  return template_dir;
}

int collgen__param_dump_source(void) {
  pthread_once(&params_once, read_params);
  return dump_source;
}

int collgen__param_cache_disable(void) {
  pthread_once(&params_once, read_params);
  return cache_disable;
}

int64_t collgen__param_cache_max_bytes(void) {
  pthread_once(&params_once, read_params);
  return cache_max_bytes;
}

int collgen__param_timeout_ms(void) {
  pthread_once(&params_once, read_params);
  return timeout_ms;
}

int collgen__param_jit_threads(void) {
  pthread_once(&params_once, read_params);
  return jit_threads;
}

int collgen__default_cache_dir(char *buf, size_t n) {
  const char *d = getenv("COLLGEN_CACHE_DIR");
  if (d && *d) return snprintf(buf, n, "%s", d) < (int)n ? 0 : -1;
  d = getenv("XDG_CACHE_HOME");
  if (d && *d) return snprintf(buf, n, "%s/collgen", d) < (int)n ? 0 : -1;
  d = getenv("HOME");
  if (d && *d) return snprintf(buf, n, "%s/.cache/collgen", d) < (int)n ? 0 : -1;
  return -1;
}
