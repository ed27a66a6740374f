/*
** devbuf.c -- device-buffer helpers (see devbuf.h).
*/
#include "devbuf.h"

static int cur(collgen_comm_t *c, int r) {
  return collgen__comm_cu_fail(c, collgen__cu.cuCtxSetCurrent(collgen__comm_context(c, r)),
                               "cuCtxSetCurrent");
}

int collgen__dev_alloc(collgen_comm_t *c, int r, size_t bytes, void **ptr) {
  CUdeviceptr p = 0;
  int rc = cur(c, r);
  if (rc == COLLGEN_OK)
    rc = collgen__comm_cu_fail(c, collgen__cu.cuMemAlloc(&p, bytes ? bytes : 256), "cuMemAlloc");
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
    rc = collgen__comm_cu_fail(c, collgen__cu.cuMemcpyHtoD((CUdeviceptr)(uintptr_t)dst, src, bytes),
                               "cuMemcpyHtoD");
  /* From pageable memory cuMemcpyHtoD may return before the data lands;
  ** work on a non-blocking stream is not ordered after it, so wait here. */
  if (rc == COLLGEN_OK && bytes)
    rc = collgen__comm_cu_fail(c, collgen__cu.cuCtxSynchronize(), "cuCtxSynchronize");
  return rc;
}

int collgen__dev_download(collgen_comm_t *c, int r, void *dst, const void *src, size_t bytes) {
  int rc = cur(c, r);
  if (rc == COLLGEN_OK && bytes)
    rc = collgen__comm_cu_fail(c, collgen__cu.cuMemcpyDtoH(dst, (CUdeviceptr)(uintptr_t)src, bytes),
                               "cuMemcpyDtoH");
  return rc;
}

int collgen__dev_fill(collgen_comm_t *c, int r, void *dst, unsigned char byte, size_t bytes) {
  int rc = cur(c, r);
  if (rc == COLLGEN_OK && bytes)
    rc = collgen__comm_cu_fail(c, collgen__cu.cuMemsetD8((CUdeviceptr)(uintptr_t)dst, byte, bytes),
                               "cuMemsetD8");
  if (rc == COLLGEN_OK)
    rc = collgen__comm_cu_fail(c, collgen__cu.cuCtxSynchronize(), "cuCtxSynchronize");
  return rc;
}

int collgen__dev_stream_create(collgen_comm_t *c, int r, collgen_stream_t *s) {
  CUstream st = NULL;
  int rc = cur(c, r);
  if (rc == COLLGEN_OK)
    rc = collgen__comm_cu_fail(c, collgen__cu.cuStreamCreate(&st, CU_STREAM_NON_BLOCKING),
                               "cuStreamCreate");
  *s = (collgen_stream_t)st;
  return rc;
}

void collgen__dev_stream_destroy(collgen_comm_t *c, int r, collgen_stream_t s) {
  if (!s || cur(c, r) != COLLGEN_OK) return;
  collgen__cu.cuStreamDestroy((CUstream)s);
}

int collgen__dev_sync_all(collgen_comm_t *c, const collgen_stream_t *streams) {
  int rc = COLLGEN_OK;
  for (int r = 0; r < collgen__comm_ranks(c); ++r) {
    if (!collgen__comm_is_local(c, r)) continue;
    int e = cur(c, r);
    if (e == COLLGEN_OK)
      e = collgen__comm_cu_fail(c, collgen__cu.cuStreamSynchronize((CUstream)streams[r]),
                                "cuStreamSynchronize");
    if (e != COLLGEN_OK && rc == COLLGEN_OK) rc = e;
  }
  if (rc != COLLGEN_OK) return rc; /* a fault says more than the timeout it causes */
  return collgen__comm_check_errors(c);
}
