/*
** nvrtc.c -- NVRTC through dlopen: the library is optional at run time (a
** deployment with a pre-generated cache never loads it), so it is never
** linked. Only the handful of entry points collgen needs are resolved.
*/
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvrtc.h"
#include "escape.h"

typedef int nvrtcResult;
typedef struct _nvrtcProgram *nvrtcProgram;

static struct {
  nvrtcResult (*version)(int *, int *);
  const char *(*error_string)(nvrtcResult);
  nvrtcResult (*create)(nvrtcProgram *, const char *, const char *, int,
                        const char *const *, const char *const *);
  nvrtcResult (*destroy)(nvrtcProgram *);
  nvrtcResult (*compile)(nvrtcProgram, int, const char *const *);
  nvrtcResult (*log_size)(nvrtcProgram, size_t *);
  nvrtcResult (*log)(nvrtcProgram, char *);
  nvrtcResult (*cubin_size)(nvrtcProgram, size_t *);
  nvrtcResult (*cubin)(nvrtcProgram, char *);
} api;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static char load_error[1024];
static int loaded;
static int ver_major, ver_minor;

/* -minimal leaves out of NVRTC's built-in header what no kernel here uses
** (textures, surfaces, device-side runtime and launches): 5-10% less
** compile time, the same cubins (docs/perf-notes.md, "NVRTC options:
** -minimal, -lineinfo, -v"). -lineinfo stays for profilers' source views (~2% of a
** compile); -v gives the spill bytes. */
const char *const collgen__nvrtc_options[] = {
    "-std=c++17", "-minimal", "--ptxas-options=-v", "-lineinfo", NULL};

static void load(void) {
  const char *env = getenv("COLLGEN_NVRTC_LIBRARY");
  const char *names[] = {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so",
                         "/usr/local/cuda/lib64/libnvrtc.so"};
  void *lib = NULL;
  if (env && *env) lib = dlopen(env, RTLD_NOW | RTLD_LOCAL); /* explicit: no fallback */
  for (size_t i = 0; i < sizeof names / sizeof names[0] && !lib && !(env && *env); ++i)
    lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    char shown[COLLGEN_ESCAPED_SIZE(256)]; /* dlerror() echoes $COLLGEN_NVRTC_LIBRARY */
    snprintf(load_error, sizeof load_error, "cannot load NVRTC (%s): %s",
             env && *env ? "$COLLGEN_NVRTC_LIBRARY" : "libnvrtc.so.13, .12, .so",
             collgen__escape(dlerror(), shown, sizeof shown));
    return;
  }
  struct { void **slot; const char *sym; } syms[] = {
      {(void **)&api.version, "nvrtcVersion"},
      {(void **)&api.error_string, "nvrtcGetErrorString"},
      {(void **)&api.create, "nvrtcCreateProgram"},
      {(void **)&api.destroy, "nvrtcDestroyProgram"},
      {(void **)&api.compile, "nvrtcCompileProgram"},
      {(void **)&api.log_size, "nvrtcGetProgramLogSize"},
      {(void **)&api.log, "nvrtcGetProgramLog"},
      {(void **)&api.cubin_size, "nvrtcGetCUBINSize"},
      {(void **)&api.cubin, "nvrtcGetCUBIN"}};
  for (size_t i = 0; i < sizeof syms / sizeof syms[0]; ++i) {
    *syms[i].slot = dlsym(lib, syms[i].sym);
    if (!*syms[i].slot) {
      snprintf(load_error, sizeof load_error,
               "NVRTC library lacks %s (too old?)", syms[i].sym);
      return;
    }
  }
  api.version(&ver_major, &ver_minor);
  __atomic_store_n(&loaded, 1, __ATOMIC_RELEASE);
}

int collgen__nvrtc_load(char *err, size_t n) {
  pthread_once(&load_once, load);
  if (!loaded) return collgen__fail(err, n, COLLGEN_ERR_NO_NVRTC, "%s", load_error);
  return COLLGEN_OK;
}

int collgen__nvrtc_loaded(int *major, int *minor) {
  /* pthread_once has run iff a load was attempted; `loaded` is then final. */
  if (!__atomic_load_n(&loaded, __ATOMIC_ACQUIRE)) return 0;
  *major = ver_major;
  *minor = ver_minor;
  return 1;
}

int collgen_nvrtc_version(int *major, int *minor) {
  char err[64];
  int rc = collgen__nvrtc_load(err, sizeof err);
  if (rc != COLLGEN_OK) return collgen__fail_tls(rc, "%s", load_error);
  *major = ver_major;
  *minor = ver_minor;
  return COLLGEN_OK;
}

void collgen__parse_ptxas_log(const char *log, int *registers, int *spills) {
  *registers = -1;
  *spills = 0;
  const char *p = strstr(log, "Used ");
  if (p) sscanf(p, "Used %d registers", registers);
  for (p = log; (p = strstr(p, "bytes spill")) != NULL; ++p) {
    const char *q = p;
    while (q > log && q[-1] == ' ') --q;
    while (q > log && q[-1] >= '0' && q[-1] <= '9') --q;
    *spills += atoi(q);
  }
}

int collgen__nvrtc_compile(const char *source, const char *name,
                           const char *arch, collgen__compiled *out,
                           char *err, size_t n) {
  memset(out, 0, sizeof *out);
  out->registers = -1;
  int rc = collgen__nvrtc_load(err, n);
  if (rc != COLLGEN_OK) return rc;
  char arch_opt[64];
  snprintf(arch_opt, sizeof arch_opt, "--gpu-architecture=%s", arch);
  const char *opts[16];
  int nopts = 0;
  opts[nopts++] = arch_opt;
  for (int i = 0; collgen__nvrtc_options[i]; ++i) opts[nopts++] = collgen__nvrtc_options[i];

  nvrtcProgram prog;
  nvrtcResult r = api.create(&prog, source, name, 0, NULL, NULL);
  if (r != 0)
    return collgen__fail(err, n, COLLGEN_ERR_COMPILE, "nvrtcCreateProgram: %s",
                         api.error_string(r));
  nvrtcResult cr = api.compile(prog, nopts, opts);
  size_t log_size = 0;
  api.log_size(prog, &log_size);
  out->log = calloc(1, log_size + 1);
  if (out->log && log_size) api.log(prog, out->log);
  if (cr != 0) {
    api.destroy(&prog);
    return collgen__fail(err, n, COLLGEN_ERR_COMPILE, "NVRTC: %s",
                         api.error_string(cr));
  }
  size_t size = 0;
  api.cubin_size(prog, &size);
  if (size == 0) {
    api.destroy(&prog);
    return collgen__fail(err, n, COLLGEN_ERR_COMPILE,
                         "NVRTC produced no cubin for %s (a virtual arch?)", arch);
  }
  out->cubin = malloc(size);
  if (!out->cubin) {
    api.destroy(&prog);
    return collgen__fail(err, n, COLLGEN_ERR_NO_MEMORY, "out of memory");
  }
  api.cubin(prog, (char *)out->cubin);
  out->size = size;
  api.destroy(&prog);
  if (out->log) collgen__parse_ptxas_log(out->log, &out->registers, &out->spill_bytes);
  return COLLGEN_OK;
}
