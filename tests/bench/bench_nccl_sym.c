/*
** bench_nccl_sym.c -- NCCL's symmetric-memory path for collgen-bench's
** baselines: buffers from ncclMemAlloc registered on every rank with
** ncclCommWindowRegister(..., NCCL_WIN_COLL_SYMMETRIC), so that NCCL >= 2.27
** runs its symmetric kernels on collectives whose buffers lie in the window
** at the same offset on every rank. The window calls are looked up at run
** time (dlsym), so an older NCCL (or older nccl.h at build time) makes the
** symmetric columns "n/a" instead of failing to load or to run.
*/
#define _GNU_SOURCE
#include <dlfcn.h>
#include <string.h>

#include "bench.h"

#define SYM_MIN_VERSION 22700 /* ncclGetVersion code of 2.27.0 */
#define SYM_ROUND (2u << 20)  /* windows span whole 2 MiB VMM granules */

#if defined(NCCL_WIN_COLL_SYMMETRIC)
typedef struct {
  __typeof__(&ncclMemAlloc) alloc;
  __typeof__(&ncclMemFree) free;
  __typeof__(&ncclCommWindowRegister) reg;
  __typeof__(&ncclCommWindowDeregister) dereg;
} sym_api;

/* The four calls, or NULL when this NCCL lacks them (looked up once). */
static const sym_api *api(void) {
  static sym_api a;
  static int state; /* 0 unknown, 1 present, -1 absent */
  if (state == 0) {
    int ver = 0;
    ncclGetVersion(&ver);
    a.alloc = (__typeof__(a.alloc))dlsym(RTLD_DEFAULT, "ncclMemAlloc");
    a.free = (__typeof__(a.free))dlsym(RTLD_DEFAULT, "ncclMemFree");
    a.reg = (__typeof__(a.reg))dlsym(RTLD_DEFAULT, "ncclCommWindowRegister");
    a.dereg = (__typeof__(a.dereg))dlsym(RTLD_DEFAULT, "ncclCommWindowDeregister");
    state = ver >= SYM_MIN_VERSION && a.alloc && a.free && a.reg && a.dereg ? 1 : -1;
  }
  return state > 0 ? &a : NULL;
}
#else
static const void *api(void) { return NULL; }
#endif

int nccl_sym_available(void) { return api() != NULL; }

#if defined(NCCL_WIN_COLL_SYMMETRIC)
/* Rank r's device current for the runtime API NCCL uses. */
static void set_device(const bench_t *b, int r) {
  if (cudaSetDevice(b->comm->devices[r]) != cudaSuccess) die("cudaSetDevice", "failed");
}

/* Deregisters every window of s (a local call: nccl-tests makes it rank by
** rank from one thread, outside a group) and frees every buffer. */
static void release(bench_t *b, sym_buf *s) {
  const sym_api *a = api();
  FOR_LOCAL(b, r)
    if (s->win[r]) {
      set_device(b, r);
      ncclResult_t e = a->dereg(b->nccl[r], (ncclWindow_t)s->win[r]);
      if (e != ncclSuccess) die("ncclCommWindowDeregister", ncclGetErrorString(e));
    }
  FOR_LOCAL(b, r)
    if (s->ptr[r]) {
      set_device(b, r);
      a->free(s->ptr[r]);
    }
  memset(s, 0, sizeof *s);
}
#endif

int sym_alloc(bench_t *b, sym_buf *s, size_t bytes) {
  memset(s, 0, sizeof *s);
#if defined(NCCL_WIN_COLL_SYMMETRIC)
  const sym_api *a = api();
  if (!a) return -1;
  bytes = (bytes + SYM_ROUND - 1) / SYM_ROUND * SYM_ROUND; /* whole VMM granules */
  s->bytes = bytes;
  ncclResult_t rc = ncclSuccess;
  FOR_LOCAL(b, r) {
    set_device(b, r);
    if (rc == ncclSuccess) rc = a->alloc(&s->ptr[r], bytes);
  }
  /* Registration is collective: one group per NCCL communicator. */
  for (int base = 0; rc == ncclSuccess && base < b->n; base += group_of(b)) {
    ncclWindow_t win[8] = {0};
    ncclGroupStart();
    for (int r = base; r < base + group_of(b); ++r) {
      set_device(b, r);
      ncclResult_t e = a->reg(b->nccl[r], s->ptr[r], bytes, &win[r], NCCL_WIN_COLL_SYMMETRIC);
      if (rc == ncclSuccess) rc = e;
    }
    ncclResult_t e = ncclGroupEnd();
    if (rc == ncclSuccess) rc = e;
    for (int r = base; r < base + group_of(b); ++r) s->win[r] = rc == ncclSuccess ? win[r] : NULL;
  }
  if (rc != ncclSuccess) {
    fprintf(stderr, "collgen-bench: NCCL symmetric window of %zu bytes per rank: %s; its "
                    "columns are n/a\n", bytes, ncclGetErrorString(rc));
    release(b, s);
    return -1;
  }
  return 0;
#else
  (void)b, (void)bytes;
  return -1;
#endif
}

void sym_free(bench_t *b, sym_buf *s) {
#if defined(NCCL_WIN_COLL_SYMMETRIC)
  if (api()) release(b, s);
#else
  (void)b, (void)s;
#endif
}
