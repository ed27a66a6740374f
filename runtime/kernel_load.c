/*
** kernel_load.c -- loads a cached cubin into one rank's context, once per
** (context, cache entry), without waiting for the device.
*/
#include <stdlib.h>

#include "cache.h"
#include "op_runtime.h"

int collgen__kernel_load(collgen_comm_t *c, int r, const collgen__entry *e, CUfunction *fn) {
  for (int i = 0; i < c->nloaded; ++i) {
    if (c->loaded[i].ctx == c->ctx[r] && c->loaded[i].entry == e) {
      *fn = c->loaded[i].fn;
      return COLLGEN_OK;
    }
  }
  if (c->nloaded == c->cap_loaded) {
    int cap = c->cap_loaded ? c->cap_loaded * 2 : 16;
    collgen__loaded *p = realloc(c->loaded, (size_t)cap * sizeof *p);
    if (!p) return collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_NO_MEMORY, "out of memory");
    c->loaded = p;
    c->cap_loaded = cap;
  }
  collgen__loaded *l = &c->loaded[c->nloaded];
  int rc = COLLGEN_OK;
  /* Module loads are not stream work; allow them while a stream captures. */
  CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
  COLLGEN_CU_GOTO(collgen__cu.cuCtxSetCurrent(c->ctx[r]), rc, c->err, sizeof c->err, out);
  collgen__cu.cuThreadExchangeStreamCaptureMode(&mode);
  CUresult lr = collgen__cu.cuModuleLoadData(&l->module, e->cubin);
  collgen__cu.cuThreadExchangeStreamCaptureMode(&mode);
  COLLGEN_CU_GOTO(lr, rc, c->err, sizeof c->err, out);
  CUresult fr = collgen__cu.cuModuleGetFunction(&l->fn, l->module, e->kernel);
  if (fr != CUDA_SUCCESS) {
    collgen__cu.cuModuleUnload(l->module);
    COLLGEN_CU_GOTO(fr, rc, c->err, sizeof c->err, out);
  }
  l->entry = e;
  l->ctx = c->ctx[r];
  *fn = l->fn;
  c->nloaded++;
out:
  return rc;
}
