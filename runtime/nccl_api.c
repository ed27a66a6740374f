/*
** nccl_api.c -- resolves NCCL with dlopen/dlsym (nccl_api.h), once per process, the
** first time a group routes to NCCL.
*/
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <sched.h>
#include <stdlib.h>

#include "nccl_api.h"
#include "escape.h"

collgen__nccl_api collgen__nccl;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int load_rc = COLLGEN_ERR_NO_NCCL;
static char load_error[640];

static void load(void) {
  const char *env = getenv("COLLGEN_NCCL_LIBRARY");
  const char *name = env && *env ? env : "libnccl.so.2";
  void *lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    char shown_name[COLLGEN_ESCAPED_SIZE(128)], shown_why[COLLGEN_ESCAPED_SIZE(256)];
    snprintf(load_error, sizeof load_error,
             "cannot load NCCL (%s%s): %s; install NCCL >= 2.14 or set COLLGEN_NCCL_LIBRARY",
             collgen__escape(name, shown_name, sizeof shown_name),
             env && *env ? ", from COLLGEN_NCCL_LIBRARY" : "",
             collgen__escape(dlerror(), shown_why, sizeof shown_why));
    return;
  }
#define COLLGEN_NCCL_RESOLVE(fname, ret, params)                                      \
  *(void **)&collgen__nccl.fname = dlsym(lib, #fname);                                \
  if (!collgen__nccl.fname) {                                                         \
    snprintf(load_error, sizeof load_error, "NCCL (%s) lacks %s (older than 2.14?)",  \
             name, #fname);                                                           \
    return;                                                                           \
  }
  COLLGEN_NCCL_FUNCS(COLLGEN_NCCL_RESOLVE)
#undef COLLGEN_NCCL_RESOLVE
  int v = 0;
  if (collgen__nccl.ncclGetVersion(&v) != COLLGEN__NCCL_SUCCESS || v < COLLGEN__NCCL_MIN_VERSION) {
    snprintf(load_error, sizeof load_error,
             "NCCL (%s) is version code %d; collgen needs 2.14 or newer (%d)", name, v,
             COLLGEN__NCCL_MIN_VERSION);
    return;
  }
  collgen__nccl.version = v;
  load_rc = COLLGEN_OK;
}

int collgen__nccl_load(char *err, size_t n) {
  pthread_once(&once, load);
  if (load_rc != COLLGEN_OK) return collgen__fail(err, n, load_rc, "%s", load_error);
  return COLLGEN_OK;
}

int collgen__nccl_fail(collgen__nccl_result r, const char *what, char *err, size_t n) {
  if (r == COLLGEN__NCCL_SUCCESS) return COLLGEN_OK;
  const char *desc = collgen__nccl.ncclGetErrorString ? collgen__nccl.ncclGetErrorString(r) : NULL;
  return collgen__fail(err, n, COLLGEN_ERR_NCCL, "%s failed: NCCL error %d: %s", what, (int)r,
                       desc ? desc : "?");
}

int collgen__nccl_settle(collgen__nccl_comm_t comm, collgen__nccl_result r, const char *what,
                         int timeout_ms, char *err, size_t n) {
  if (r != COLLGEN__NCCL_IN_PROGRESS) return collgen__nccl_fail(r, what, err, n); /* no clock read */
  const double end = collgen__now_ms() + timeout_ms;
  while (r == COLLGEN__NCCL_IN_PROGRESS) {
    if (collgen__now_ms() > end)
      return collgen__fail(err, n, COLLGEN_ERR_TIMEOUT,
                           "%s: NCCL had not finished after %d ms: a rank of the group never "
                           "took part (it died or is stuck); the NCCL communicator is aborted",
                           what, timeout_ms);
    sched_yield();
    if (comm == NULL || collgen__nccl.ncclCommGetAsyncError(comm, &r) != COLLGEN__NCCL_SUCCESS)
      return collgen__fail(err, n, COLLGEN_ERR_NCCL, "%s: ncclCommGetAsyncError failed", what);
  }
  return collgen__nccl_fail(r, what, err, n);
}

collgen__nccl_dtype collgen__nccl_dtype_of(collgen_dtype_t dtype) {
  switch (dtype) {
    case COLLGEN_DTYPE_BF16: return COLLGEN__NCCL_BFLOAT16;
    case COLLGEN_DTYPE_F16: return COLLGEN__NCCL_FLOAT16;
    case COLLGEN_DTYPE_F32: return COLLGEN__NCCL_FLOAT32;
    case COLLGEN_DTYPE_U8: return COLLGEN__NCCL_UINT8;
    case COLLGEN_DTYPE_I8: return COLLGEN__NCCL_INT8;
    case COLLGEN_DTYPE_I16: return COLLGEN__NCCL_FLOAT16; /* bits only: see nccl_api.h */
    case COLLGEN_DTYPE_I32: return COLLGEN__NCCL_INT32;
    case COLLGEN_DTYPE_I64: return COLLGEN__NCCL_INT64;
    case COLLGEN_DTYPE_F64: return COLLGEN__NCCL_FLOAT64;
  }
  return -1;
}
