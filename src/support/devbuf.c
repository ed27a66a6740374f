/*
** devbuf.c -- device-buffer helpers (see devbuf.h).
*/
#include "devbuf.h"

static int cur(collgen_comm_t *c, int r) {
  return collgen__cu_fail(collgen__cu.cuCtxSetCurrent(c->ctx[r]), "cuCtxSetCurrent", c->err,
                          sizeof c->err);
}

int collgen__dev_alloc(collgen_comm_t *c, int r, size_t bytes, void **ptr) {
  CUdeviceptr p = 0;
  int rc = cur(c, r);
  if (rc == COLLGEN_OK)
    rc = collgen__cu_fail(collgen__cu.cuMemAlloc(&p, bytes ? bytes : 256), "cuMemAlloc",
                          c->err, sizeof c->err);
  *ptr = (void *)(uintptr_t)p;
  return rc;
}

void collgen__dev_free(collgen_comm_t *c, int r, void *ptr) {
  if (!ptr || cur(c, r) != COLLGEN_OK) return;
  collgen__cu.cuMemFree((CUdeviceptr)(uintptr_t)ptr);
}

int collgen__dev_upload(collgen_comm_t *c, int r, void *dst, const void *src, size_t bytes) {
  int rc = cur(c, r);
  if (rc == COLLGEN_OK && bytes)
    rc = collgen__cu_fail(collgen__cu.cuMemcpyHtoD((CUdeviceptr)(uintptr_t)dst, src, bytes),
                          "cuMemcpyHtoD", c->err, sizeof c->err);
  /* From pageable memory cuMemcpyHtoD may return before the data lands;
  ** work on a non-blocking stream is not ordered after it, so wait here. */
  if (rc == COLLGEN_OK && bytes)
    rc = collgen__cu_fail(collgen__cu.cuCtxSynchronize(), "cuCtxSynchronize", c->err,
                          sizeof c->err);
  return rc;
}

int collgen__dev_download(collgen_comm_t *c, int r, void *dst, const void *src, size_t bytes) {
  int rc = cur(c, r);
  if (rc == COLLGEN_OK && bytes)
    rc = collgen__cu_fail(collgen__cu.cuMemcpyDtoH(dst, (CUdeviceptr)(uintptr_t)src, bytes),
                          "cuMemcpyDtoH", c->err, sizeof c->err);
  return rc;
}

int collgen__dev_fill(collgen_comm_t *c, int r, void *dst, unsigned char byte, size_t bytes) {
  int rc = cur(c, r);
  if (rc == COLLGEN_OK && bytes)
    rc = collgen__cu_fail(collgen__cu.cuMemsetD8((CUdeviceptr)(uintptr_t)dst, byte, bytes),
                          "cuMemsetD8", c->err, sizeof c->err);
  if (rc == COLLGEN_OK)
    rc = collgen__cu_fail(collgen__cu.cuCtxSynchronize(), "cuCtxSynchronize", c->err,
                          sizeof c->err);
  return rc;
}

int collgen__dev_stream_create(collgen_comm_t *c, int r, collgen_stream_t *s) {
  CUstream st = NULL;
  int rc = cur(c, r);
  if (rc == COLLGEN_OK)
    rc = collgen__cu_fail(collgen__cu.cuStreamCreate(&st, CU_STREAM_NON_BLOCKING),
                          "cuStreamCreate", c->err, sizeof c->err);
  *s = (collgen_stream_t)st;
  return rc;
}

void collgen__dev_stream_destroy(collgen_comm_t *c, int r, collgen_stream_t s) {
  if (!s || cur(c, r) != COLLGEN_OK) return;
  collgen__cu.cuStreamDestroy((CUstream)s);
}

int collgen__dev_sync_all(collgen_comm_t *c, const collgen_stream_t *streams) {
  int rc = COLLGEN_OK;
  for (int r = 0; r < c->ndev; ++r) {
    if (!collgen__comm_is_local(c, r)) continue;
    int e = cur(c, r);
    if (e == COLLGEN_OK)
      e = collgen__cu_fail(collgen__cu.cuStreamSynchronize((CUstream)streams[r]),
                           "cuStreamSynchronize", c->err, sizeof c->err);
    if (e != COLLGEN_OK && rc == COLLGEN_OK) rc = e;
  }
  if (rc != COLLGEN_OK) return rc; /* a fault says more than the timeout it causes */
  return collgen__comm_check_errors(c);
}
