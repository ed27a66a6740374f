/*
** shared_mem.c -- VMM allocations other processes can map (shared_mem.h).
*/
#include <stdint.h>
#include <string.h>

#include "shared_mem.h"

static CUmemAllocationProp device_prop(CUdevice device) {
  CUmemAllocationProp prop;
  memset(&prop, 0, sizeof prop);
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = (int)device;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  return prop;
}

/* Reserves address space for b->handle, maps it and grants `device`
** read/write access. On failure b->handle is left to the caller. */
static int map_for(CUdevice device, collgen__shared_buf *b, char *err, size_t n) {
  int rc = COLLGEN_OK;
  CUdeviceptr va = 0;
  int mapped = 0;
  CUmemAccessDesc access;
  memset(&access, 0, sizeof access);
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = (int)device;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  COLLGEN_CU_GOTO(collgen__cu.cuMemAddressReserve(&va, b->bytes, 0, 0, 0), rc, err, n, fail);
  COLLGEN_CU_GOTO(collgen__cu.cuMemMap(va, b->bytes, 0, b->handle, 0), rc, err, n, fail);
  mapped = 1;
  COLLGEN_CU_GOTO(collgen__cu.cuMemSetAccess(va, b->bytes, &access, 1), rc, err, n, fail);
  b->ptr = va;
  return COLLGEN_OK;
fail:
  if (mapped) collgen__cu.cuMemUnmap(va, b->bytes);
  if (va) collgen__cu.cuMemAddressFree(va, b->bytes);
  return rc;
}

/* The allocation granularity for `device` (every size is a multiple). */
static int granule(CUdevice device, size_t *gran, char *err, size_t n) {
  CUmemAllocationProp prop = device_prop(device);
  *gran = 0;
  return collgen__cu_fail(collgen__cu.cuMemGetAllocationGranularity(
                              gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED),
                          "cuMemGetAllocationGranularity", err, n);
}

/* map_for, releasing b's handle and emptying b when it fails. */
static int map_or_release(CUdevice device, collgen__shared_buf *b, char *err, size_t n) {
  int rc = map_for(device, b, err, n);
  if (rc != COLLGEN_OK) {
    collgen__cu.cuMemRelease(b->handle);
    memset(b, 0, sizeof *b);
  }
  return rc;
}

int collgen__shared_alloc(CUdevice device, size_t bytes, collgen__shared_buf *out, char *err,
                          size_t n) {
  memset(out, 0, sizeof *out);
  CUmemAllocationProp prop = device_prop(device);
  size_t gran;
  int rc = granule(device, &gran, err, n);
  if (rc != COLLGEN_OK) return rc;
  if (gran == 0 || bytes > SIZE_MAX - gran)
    return collgen__fail(err, n, COLLGEN_ERR_INVALID_ARG, "shared buffer of %zu bytes: too large",
                         bytes);
  out->bytes = (bytes + gran - 1) / gran * gran;
  CUresult r = collgen__cu.cuMemCreate(&out->handle, out->bytes, &prop, 0);
  if (r != CUDA_SUCCESS) {
    memset(out, 0, sizeof *out);
    return collgen__cu_fail(r, "cuMemCreate", err, n);
  }
  return map_or_release(device, out, err, n);
}

int collgen__shared_export(const collgen__shared_buf *b, int *fd, char *err, size_t n) {
  *fd = -1;
  int rc = COLLGEN_OK;
  COLLGEN_CU_GOTO(collgen__cu.cuMemExportToShareableHandle(
                      fd, b->handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
                  rc, err, n, out);
out:
  return rc;
}

int collgen__shared_import(int fd, size_t bytes, CUdevice device, collgen__shared_buf *out,
                           char *err, size_t n) {
  memset(out, 0, sizeof *out);
  size_t gran;
  int rc = granule(device, &gran, err, n);
  if (rc != COLLGEN_OK) return rc;
  if (fd < 0 || bytes == 0 || gran == 0 || bytes % gran != 0)
    return collgen__fail(err, n, COLLGEN_ERR_INVALID_ARG,
                         "a peer's shared buffer (fd %d, %zu bytes) is not a whole number of "
                         "%zu-byte granules", fd, bytes, gran);
  CUresult r = collgen__cu.cuMemImportFromShareableHandle(&out->handle, (void *)(intptr_t)fd,
                                                          CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
  if (r != CUDA_SUCCESS) {
    memset(out, 0, sizeof *out);
    return collgen__cu_fail(r, "cuMemImportFromShareableHandle", err, n);
  }
  out->bytes = bytes;
  return map_or_release(device, out, err, n);
}

void collgen__shared_free(collgen__shared_buf *b) {
  if (b->ptr) {
    collgen__cu.cuMemUnmap(b->ptr, b->bytes);
    collgen__cu.cuMemAddressFree(b->ptr, b->bytes);
    collgen__cu.cuMemRelease(b->handle);
  }
  memset(b, 0, sizeof *b);
}
