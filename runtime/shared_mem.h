/*
** shared_mem.h -- device memory that other processes can map: cuMem (VMM)
** allocations with a POSIX file-descriptor handle. The one-process-per-GPU
** mode shares signal buffers and staging areas this way (docs/multiprocess.md
** says why VMM and not legacy cuIpc). Never multicast objects.
**
** Every function needs the context of the device it maps for current.
*/
#ifndef COLLGEN_SHARED_MEM_H
#define COLLGEN_SHARED_MEM_H
#include "driver.h"

/* One mapping of a VMM allocation in this process. */
typedef struct {
  CUdeviceptr ptr;                    /* 0 when empty */
  size_t bytes;                       /* mapped size: a multiple of the granularity */
  CUmemGenericAllocationHandle handle;
} collgen__shared_buf;

/* Allocates at least `bytes` on `device`, exportable as a POSIX fd, maps it
** read/write for that device and zeroes nothing (callers initialize).
** COLLGEN_ERR_CUDA (message in err) on failure, with nothing left behind. */
int collgen__shared_alloc(CUdevice device, size_t bytes, collgen__shared_buf *out, char *err,
                          size_t n);

/* A new file descriptor for b's allocation (the caller closes it). */
int collgen__shared_export(const collgen__shared_buf *b, int *fd, char *err, size_t n);

/* Maps the allocation behind `fd` (exported by a peer, `bytes` long as the
** peer reported) read/write for `device`. Does not close fd. A size that
** is not whole granules is refused here; one larger than the allocation is
** refused by the driver (COLLGEN_ERR_CUDA). */
int collgen__shared_import(int fd, size_t bytes, CUdevice device, collgen__shared_buf *out,
                           char *err, size_t n);

/* Unmaps and releases b (empty is fine); b becomes empty. */
void collgen__shared_free(collgen__shared_buf *b);
#endif
