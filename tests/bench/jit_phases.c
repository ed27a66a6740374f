/*
** jit_phases.c -- collgen-jit-phases: the steps of one cold JIT compile
** (what collgen_get_kernel does on a cache miss), each timed, in a fresh
** process; tests/bench/jit_split.py runs it once per op and prints the
** table.
**
** usage: collgen-jit-phases CACHE_DIR OP [spec flags of `collgen compile`]
**
** Prints one line of `name=milliseconds` fields (CPU time of the process
** for each step, its wall time as name_wall and its page faults as
** name_faults):
**   lua      generator create: Lua state, embedded bundle, cache open
**   plan     the planner
**   render   the source, with #line directives (as the JIT renders it)
**   load     dlopen of NVRTC (its relocations and page faults)
**   compile  the first nvrtcCompileProgram of the process: NVRTC's first
**            use (builtins library, cold pages) + front end + NVVM + ptxas
**   inspect  registers and frame size from the cubin
**   write    the entry written to CACHE_DIR (temp file, fsync, rename)
**   again    the same compile a second time (NVRTC warm): compile - again
**            is NVRTC's first-use cost
** and lines=N bytes=N (the rendered source's size).
*/
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "cache.h"
#include "cli.h"
#include "cubin_info.h"
#include "generator.h"
#include "internal.h"
#include "nvrtc.h"

static double cpu_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static long faults(void) {
  struct rusage u;
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt + u.ru_majflt;
}

static double cpu0, wall0;
static long flt0;
static void step(const char *name) {
  double c = cpu_ms(), w = collgen__now_ms();
  long f = faults();
  printf("%s=%.2f %s_wall=%.2f %s_faults=%ld ", name, c - cpu0, name, w - wall0, name, f - flt0);
  cpu0 = c;
  wall0 = w;
  flt0 = f;
}

static void die(const char *what, const char *msg) {
  fprintf(stderr, "collgen-jit-phases: %s: %s\n", what, msg);
  exit(1);
}

int main(int argc, char **argv) {
  if (argc < 3) die("usage", "collgen-jit-phases CACHE_DIR OP [spec flags]");
  cpu0 = cpu_ms();
  wall0 = collgen__now_ms();
  flt0 = faults();
  cli_spec_args a;
  if (cli_parse_spec_args("compile", argc - 1, argv + 1, 0, &a) != 0) return 2;
  collgen_generator_t *g;
  if (collgen_generator_create(&g, NULL) != COLLGEN_OK) die("create", collgen_last_error());
  collgen__cache *cache;
  if (collgen__cache_open(&cache, argv[1]) != COLLGEN_OK) die("cache", argv[1]);
  step("lua");
  collgen_plan_t plan;
  if (collgen_plan(g, &a.shape, &plan) != COLLGEN_OK) die("plan", collgen_generator_last_error(g));
  step("plan");
  char *src = NULL;
  if (collgen_generate_source(g, &a.shape, 1, &src) != COLLGEN_OK)
    die("render", collgen_generator_last_error(g));
  step("render");
  char err[1024];
  if (collgen__nvrtc_load(err, sizeof err) != COLLGEN_OK) die("load", err);
  step("load");
  const char *arch = a.shape.arch[0] ? a.shape.arch : "sm_90";
  collgen__compiled c;
  if (collgen__nvrtc_compile(src, plan.kernel, arch, &c, err, sizeof err) != COLLGEN_OK)
    die("compile", c.log ? c.log : err);
  step("compile");
  collgen__cubin_kernel k;
  if (collgen__cubin_inspect(c.cubin, c.size, plan.kernel, &k) != 0 || !k.found)
    die("inspect", plan.kernel);
  step("inspect");
  collgen__entry *e = calloc(1, sizeof *e);
  if (!e) die("write", "out of memory");
  memset(e->key, 0x5a, sizeof e->key); /* any key: CACHE_DIR is the bench's own */
  e->cubin = c.cubin;
  e->size = c.size;
  e->registers = k.registers;
  snprintf(e->kernel, sizeof e->kernel, "%s", plan.kernel);
  snprintf(e->canonical, sizeof e->canonical, "%s", plan.canonical);
  collgen__cache_put(cache, e); /* owns the cubin now */
  step("write");
  collgen__compiled again;
  if (collgen__nvrtc_compile(src, plan.kernel, arch, &again, err, sizeof err) != COLLGEN_OK)
    die("again", err);
  step("again");
  size_t lines = 0;
  for (const char *p = src; *p; ++p) lines += *p == '\n';
  printf("lines=%zu bytes=%zu\n", lines, strlen(src));
  free(again.cubin);
  free(again.log);
  free(c.log);
  free(src);
  collgen__cache_close(cache);
  collgen_generator_destroy(g);
  return 0;
}
