/*
** driver.c -- resolves the CUDA driver API with dlopen/dlsym. Versioned
** symbols (cuMemAlloc_v2, ...) are taken from cuda.h's own macros, so the
** names used in code are the documented ones.
*/
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "driver.h"
#include "escape.h"

collgen__cu_api collgen__cu;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int load_rc = COLLGEN_ERR_NO_DRIVER;
static char load_error[512];

#define STR_(x) #x
#define XSTR(x) STR_(x)

static void load(void) {
  const char *env = getenv("COLLGEN_CUDA_LIBRARY");
  void *lib = dlopen(env && *env ? env : "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    char shown[COLLGEN_ESCAPED_SIZE(256)]; /* dlerror() echoes $COLLGEN_CUDA_LIBRARY */
    snprintf(load_error, sizeof load_error, "cannot load the CUDA driver: %s",
             collgen__escape(dlerror(), shown, sizeof shown));
    return;
  }
#define COLLGEN_CU_RESOLVE(name)                                                \
  collgen__cu.name = (__typeof__(&name))dlsym(lib, XSTR(name));                 \
  if (!collgen__cu.name) {                                                      \
    snprintf(load_error, sizeof load_error,                                     \
             "CUDA driver lacks %s (driver too old?)", XSTR(name));             \
    return;                                                                     \
  }
  COLLGEN_CU_FUNCS(COLLGEN_CU_RESOLVE)
#undef COLLGEN_CU_RESOLVE
  CUresult r = collgen__cu.cuInit(0);
  if (r != CUDA_SUCCESS) {
    const char *name = NULL;
    collgen__cu.cuGetErrorName(r, &name);
    snprintf(load_error, sizeof load_error,
             "cuInit failed: %s (%d)%s", name ? name : "?", (int)r,
             r == 34 ? ": this is the stub libcuda, not a driver" :
             r == CUDA_ERROR_NO_DEVICE ? ": no CUDA device" : "");
    return;
  }
  load_rc = COLLGEN_OK;
}

int collgen__driver_load(char *err, size_t n) {
  pthread_once(&once, load);
  if (load_rc != COLLGEN_OK) return collgen__fail(err, n, load_rc, "%s", load_error);
  return COLLGEN_OK;
}

int collgen__cu_fail(CUresult r, const char *what, char *err, size_t n) {
  if (r == CUDA_SUCCESS) return COLLGEN_OK;
  const char *name = NULL, *desc = NULL;
  if (collgen__cu.cuGetErrorName) collgen__cu.cuGetErrorName(r, &name);
  if (collgen__cu.cuGetErrorString) collgen__cu.cuGetErrorString(r, &desc);
  return collgen__fail(err, n, COLLGEN_ERR_CUDA, "%s failed: %s (%d): %s", what,
                       name ? name : "?", (int)r, desc ? desc : "");
}
