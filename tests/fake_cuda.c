/*
** fake_cuda.c -- a stand-in CUDA driver (libfakecuda.so) for testing the
** runtime's host path on machines without a GPU. collgen loads it through
** $COLLGEN_CUDA_LIBRARY. "Device memory" is host memory, so copies and
** memsets really happen; kernels do not run: a launch is only recorded.
** cuMemAlloc and VMM memory are memfds, so forked processes really share it
** through VMM fds and legacy IPC handles.
**
** It checks what a real driver would refuse silently or slowly: a launch or
** async copy on a stream whose context is not current counts as a
** wrong-context call. Settings, read at every query:
**   FAKE_CUDA_DEVICES  number of devices (default 2)
**   FAKE_CUDA_SM       compute capability as major*10+minor (default 90)
**   FAKE_CUDA_NO_P2P   when set, no pair of devices has peer access
**   FAKE_CUDA_NO_P2P_PAIRS  "a:b,c:d": these pairs of devices (both ways)
**                      have no peer access (holes in the P2P matrix)
**   FAKE_CUDA_VMM_NO_FD  when set, VMM allocations report no POSIX-fd handle type
** Tests read the counters through fake_cuda_stats() (dlsym).
*/
#define _GNU_SOURCE
#include <cuda.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fake_cuda.h"

#define MAX_DEVICES 16

struct CUctx_st { int device; };
/* A stream, and the graph it is capturing (NULL when it is not). */
struct CUstream_st { CUcontext ctx; struct CUgraph_st *capturing; };
/* A captured graph: only the user objects it holds (no nodes are kept). */
#define FAKE_GRAPH_MAX_OBJECTS 64
struct CUuserObject_st { void *ptr; CUhostFn destroy; };
struct CUgraph_st { int nobjects; struct CUuserObject_st *objects[FAKE_GRAPH_MAX_OBJECTS]; };
struct CUmod_st { int unused; };
struct CUfunc_st { char name[128]; };

static struct CUctx_st contexts[MAX_DEVICES];
static __thread CUcontext current;
static fake_cuda_stats_t stats;

fake_cuda_stats_t *fake_cuda_stats(void) { return &stats; }

static int env_int(const char *name, int fallback) {
  const char *v = getenv(name);
  return v && *v ? atoi(v) : fallback;
}

static int device_count(void) {
  int n = env_int("FAKE_CUDA_DEVICES", 2);
  return n < 0 ? 0 : n > MAX_DEVICES ? MAX_DEVICES : n;
}

/* The context a stream belongs to (NULL stream: the current one). */
static CUcontext stream_ctx(CUstream s) { return s ? s->ctx : current; }

CUresult cuInit(unsigned int flags) {
  (void)flags;
  for (int d = 0; d < MAX_DEVICES; ++d) contexts[d].device = d;
  return CUDA_SUCCESS;
}

CUresult cuDriverGetVersion(int *v) { *v = 13000; return CUDA_SUCCESS; }

CUresult cuDeviceGetCount(int *n) { *n = device_count(); return CUDA_SUCCESS; }

CUresult cuDeviceGet(CUdevice *d, int ordinal) {
  if (ordinal < 0 || ordinal >= device_count()) return CUDA_ERROR_INVALID_DEVICE;
  *d = ordinal;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetName(char *name, int len, CUdevice d) {
  (void)d;
  if (len > 0) snprintf(name, (size_t)len, "%s", "Fake GPU");
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetAttribute(int *v, CUdevice_attribute a, CUdevice d) {
  (void)d;
  int sm = env_int("FAKE_CUDA_SM", 90);
  switch (a) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *v = sm / 10; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *v = sm % 10; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *v = 132; break;
    default: *v = 0; break;
  }
  return CUDA_SUCCESS;
}

/* 1 when FAKE_CUDA_NO_P2P_PAIRS lists the pair a:b or b:a. */
static int listed_hole(int a, int b) {
  const char *v = getenv("FAKE_CUDA_NO_P2P_PAIRS");
  while (v && *v) {
    char *end;
    long x = strtol(v, &end, 10);
    if (*end != ':') return 0;
    long y = strtol(end + 1, &end, 10);
    if ((x == a && y == b) || (x == b && y == a)) return 1;
    v = *end == ',' ? end + 1 : NULL;
  }
  return 0;
}

CUresult cuDeviceCanAccessPeer(int *can, CUdevice a, CUdevice b) {
  *can = a != b && !getenv("FAKE_CUDA_NO_P2P") && !listed_hole(a, b);
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetP2PAttribute(int *v, CUdevice_P2PAttribute a, CUdevice x, CUdevice y) {
  (void)a;
  (void)x;
  (void)y;
  *v = !getenv("FAKE_CUDA_NO_P2P");
  return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d) {
  *c = &contexts[d];
  return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease(CUdevice d) { (void)d; return CUDA_SUCCESS; }

CUresult cuCtxSetCurrent(CUcontext c) {
  current = c;
  stats.ctx_switches++;
  return CUDA_SUCCESS;
}

CUresult cuCtxGetCurrent(CUcontext *c) { *c = current; return CUDA_SUCCESS; }

CUresult cuCtxEnablePeerAccess(CUcontext peer, unsigned int flags) {
  (void)peer;
  (void)flags;
  return current ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

CUresult cuCtxSynchronize(void) { return CUDA_SUCCESS; }

/* ---- Address ranges the driver knows: cuMemAlloc allocations, cuMemMap
** mappings and cuIpcOpenMemHandle mappings, each with the memfd behind it
** (-1 where none is kept), for cuMemGetAddressRange and the IPC calls. */
#define MAX_RANGES 1024
typedef struct {
  uintptr_t ptr;
  size_t bytes;
  int fd;
} fake_range;
enum { RANGE_ALLOC, RANGE_MAP, RANGE_IPC, RANGE_KINDS };
static fake_range ranges[RANGE_KINDS][MAX_RANGES];

static int range_add(int kind, uintptr_t ptr, size_t bytes, int fd) {
  for (int i = 0; i < MAX_RANGES; ++i)
    if (!ranges[kind][i].ptr) {
      ranges[kind][i] = (fake_range){ptr, bytes, fd};
      return 0;
    }
  return -1;
}

/* The range of `kind` holding p (exact start only when `exact`), or NULL. */
static fake_range *range_find(int kind, uintptr_t p, int exact) {
  for (int i = 0; i < MAX_RANGES; ++i) {
    fake_range *r = &ranges[kind][i];
    if (r->ptr && (exact ? p == r->ptr : p >= r->ptr && p < r->ptr + r->bytes)) return r;
  }
  return NULL;
}

/* cuMemAlloc memory is a memfd mapped shared, so that a legacy IPC handle
** can name it to another process (which opens /proc/<pid>/fd/<fd>). */
CUresult cuMemAlloc(CUdeviceptr *p, size_t bytes) {
  if (!current) return CUDA_ERROR_INVALID_CONTEXT;
  if (bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  int fd = memfd_create("fake-cuda-alloc", MFD_CLOEXEC);
  if (fd < 0) return CUDA_ERROR_OUT_OF_MEMORY;
  void *m = ftruncate(fd, (off_t)bytes) == 0
                ? mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
  if (m == MAP_FAILED || range_add(RANGE_ALLOC, (uintptr_t)m, bytes, fd) != 0) {
    if (m != MAP_FAILED) munmap(m, bytes);
    close(fd);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  *p = (CUdeviceptr)(uintptr_t)m;
  return CUDA_SUCCESS;
}

CUresult cuMemFree(CUdeviceptr p) {
  fake_range *r = range_find(RANGE_ALLOC, (uintptr_t)p, 1);
  if (!r) return CUDA_ERROR_INVALID_VALUE;
  munmap((void *)r->ptr, r->bytes);
  close(r->fd);
  memset(r, 0, sizeof *r);
  return CUDA_SUCCESS;
}

CUresult cuMemGetAddressRange(CUdeviceptr *base, size_t *size, CUdeviceptr p) {
  for (int k = 0; k < RANGE_KINDS; ++k) {
    const fake_range *r = range_find(k, (uintptr_t)p, 0);
    if (!r) continue;
    if (base) *base = (CUdeviceptr)r->ptr;
    if (size) *size = r->bytes;
    return CUDA_SUCCESS;
  }
  return CUDA_ERROR_NOT_FOUND;
}

/* ---- Legacy IPC: the handle names the exporter's pid and memfd. */
typedef struct {
  char magic[8];
  int32_t pid, fd;
  uint64_t bytes;
} fake_ipc;

CUresult cuIpcGetMemHandle(CUipcMemHandle *h, CUdeviceptr p) {
  const fake_range *r = range_find(RANGE_ALLOC, (uintptr_t)p, 1); /* a base pointer */
  if (!r) return CUDA_ERROR_INVALID_VALUE;
  fake_ipc f = {"fakeipc", (int32_t)getpid(), r->fd, r->bytes};
  _Static_assert(sizeof f <= sizeof h->reserved, "fake IPC handle too large");
  memset(h, 0, sizeof *h);
  memcpy(h->reserved, &f, sizeof f);
  return CUDA_SUCCESS;
}

CUresult cuIpcOpenMemHandle(CUdeviceptr *p, CUipcMemHandle h, unsigned int flags) {
  fake_ipc f;
  memcpy(&f, h.reserved, sizeof f);
  if (flags != CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS || memcmp(f.magic, "fakeipc", 8) != 0)
    return CUDA_ERROR_INVALID_VALUE;
  if (f.pid == getpid()) return CUDA_ERROR_INVALID_CONTEXT; /* as the driver: not its own */
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)f.pid, (int)f.fd);
  int fd = open(path, O_RDWR | O_CLOEXEC);
  if (fd < 0) return CUDA_ERROR_INVALID_HANDLE;
  void *m = mmap(NULL, (size_t)f.bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (m == MAP_FAILED) return CUDA_ERROR_MAP_FAILED;
  if (range_add(RANGE_IPC, (uintptr_t)m, (size_t)f.bytes, -1) != 0) {
    munmap(m, (size_t)f.bytes);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  stats.ipc_open++;
  *p = (CUdeviceptr)(uintptr_t)m;
  return CUDA_SUCCESS;
}

CUresult cuIpcCloseMemHandle(CUdeviceptr p) {
  fake_range *r = range_find(RANGE_IPC, (uintptr_t)p, 1);
  if (!r) return CUDA_ERROR_INVALID_VALUE;
  munmap((void *)r->ptr, r->bytes);
  memset(r, 0, sizeof *r);
  stats.ipc_open--;
  return CUDA_SUCCESS;
}

CUresult cuMemsetD8(CUdeviceptr p, unsigned char v, size_t n) {
  memset((void *)(uintptr_t)p, v, n);
  return CUDA_SUCCESS;
}

CUresult cuMemHostAlloc(void **p, size_t bytes, unsigned int flags) {
  (void)flags;
  *p = current ? calloc(1, bytes) : NULL;
  return *p ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

CUresult cuMemFreeHost(void *p) { free(p); return CUDA_SUCCESS; }

CUresult cuMemHostGetDevicePointer(CUdeviceptr *d, void *p, unsigned int flags) {
  (void)flags;
  *d = (CUdeviceptr)(uintptr_t)p;
  return CUDA_SUCCESS;
}

CUresult cuMemcpyHtoD(CUdeviceptr dst, const void *src, size_t n) {
  memcpy((void *)(uintptr_t)dst, src, n);
  return CUDA_SUCCESS;
}

CUresult cuMemcpyDtoH(void *dst, CUdeviceptr src, size_t n) {
  memcpy(dst, (const void *)(uintptr_t)src, n);
  return CUDA_SUCCESS;
}

CUresult cuMemcpyDtoDAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
  if (stream_ctx(s) != current) stats.wrong_context++;
  memcpy((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n);
  stats.copies++;
  return CUDA_SUCCESS;
}

CUresult cuMemcpyHtoDAsync(CUdeviceptr dst, const void *src, size_t n, CUstream s) {
  if (stream_ctx(s) != current) stats.wrong_context++;
  memcpy((void *)(uintptr_t)dst, src, n);
  stats.uploads++;
  stats.upload_bytes += (long)n;
  return CUDA_SUCCESS;
}

/* Device d's UUID: its ordinal in the first byte, the rest a fixed tag. */
CUresult cuDeviceGetUuid(CUuuid *u, CUdevice d) {
  if (d < 0 || d >= device_count()) return CUDA_ERROR_INVALID_DEVICE;
  memset(u->bytes, 0x5a, sizeof u->bytes);
  u->bytes[0] = (char)d;
  return CUDA_SUCCESS;
}

/* ---- VMM: an allocation is a memfd, so separate processes really share
** it; its handle is the fd + 1. Mapped with mmap at reserved addresses. */
#define FAKE_VMM_GRANULE (2u << 20)

CUresult cuMemGetAllocationGranularity(size_t *g, const CUmemAllocationProp *prop,
                                       CUmemAllocationGranularity_flags option) {
  (void)option;
  if (!prop || prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE) return CUDA_ERROR_INVALID_VALUE;
  *g = FAKE_VMM_GRANULE;
  return CUDA_SUCCESS;
}

CUresult cuMemCreate(CUmemGenericAllocationHandle *h, size_t size, const CUmemAllocationProp *prop,
                     unsigned long long flags) {
  (void)flags;
  if (!current || !prop || size == 0 || size % FAKE_VMM_GRANULE) return CUDA_ERROR_INVALID_VALUE;
  int fd = memfd_create("fake-cuda-vmm", MFD_CLOEXEC);
  if (fd < 0) return CUDA_ERROR_OUT_OF_MEMORY;
  if (ftruncate(fd, (off_t)size) != 0) {
    close(fd);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  *h = (CUmemGenericAllocationHandle)fd + 1;
  stats.vmm_handles++;
  return CUDA_SUCCESS;
}

CUresult cuMemRelease(CUmemGenericAllocationHandle h) {
  if (h == 0 || close((int)(h - 1)) != 0) return CUDA_ERROR_INVALID_VALUE;
  stats.vmm_handles--;
  return CUDA_SUCCESS;
}

CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t align, CUdeviceptr addr,
                             unsigned long long flags) {
  (void)align;
  (void)addr;
  (void)flags;
  void *p = mmap(NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
  *ptr = (CUdeviceptr)(uintptr_t)p;
  return CUDA_SUCCESS;
}

CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size) {
  return munmap((void *)(uintptr_t)ptr, size) == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle h,
                  unsigned long long flags) {
  (void)flags;
  struct stat st;
  int fd = (int)(h - 1);
  if (h == 0 || fstat(fd, &st) != 0 || offset + size > (size_t)st.st_size) return CUDA_ERROR_INVALID_VALUE;
  void *p = mmap((void *)(uintptr_t)ptr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd,
                 (off_t)offset);
  if (p == MAP_FAILED) return CUDA_ERROR_INVALID_VALUE;
  return range_add(RANGE_MAP, (uintptr_t)ptr, size, fd) == 0 ? CUDA_SUCCESS
                                                              : CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
  fake_range *r = range_find(RANGE_MAP, (uintptr_t)ptr, 1);
  if (r) memset(r, 0, sizeof *r);
  void *p = mmap((void *)(uintptr_t)ptr, size, PROT_NONE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
  return p == MAP_FAILED ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count) {
  (void)ptr;
  (void)size;
  if (!desc || count != 1 || desc->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
    return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}

CUresult cuMemExportToShareableHandle(void *out, CUmemGenericAllocationHandle h,
                                      CUmemAllocationHandleType type, unsigned long long flags) {
  (void)flags;
  if (h == 0 || type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) return CUDA_ERROR_INVALID_VALUE;
  int fd = fcntl((int)(h - 1), F_DUPFD_CLOEXEC, 0);
  if (fd < 0) return CUDA_ERROR_INVALID_VALUE;
  *(int *)out = fd;
  return CUDA_SUCCESS;
}

CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *h, void *os,
                                        CUmemAllocationHandleType type) {
  if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) return CUDA_ERROR_INVALID_VALUE;
  int fd = fcntl((int)(intptr_t)os, F_DUPFD_CLOEXEC, 0);
  if (fd < 0) return CUDA_ERROR_INVALID_VALUE;
  *h = (CUmemGenericAllocationHandle)fd + 1;
  stats.vmm_handles++;
  return CUDA_SUCCESS;
}

/* The handle of the mapping holding addr: a new descriptor of its memfd. */
CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *h, void *addr) {
  const fake_range *r = range_find(RANGE_MAP, (uintptr_t)addr, 0);
  if (!r) return CUDA_ERROR_INVALID_VALUE;
  int fd = fcntl(r->fd, F_DUPFD_CLOEXEC, 0);
  if (fd < 0) return CUDA_ERROR_INVALID_VALUE;
  *h = (CUmemGenericAllocationHandle)fd + 1;
  stats.vmm_handles++;
  return CUDA_SUCCESS;
}

/* Every allocation asked for POSIX fds, unless FAKE_CUDA_VMM_NO_FD is set. */
CUresult cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp *prop,
                                                CUmemGenericAllocationHandle h) {
  if (h == 0) return CUDA_ERROR_INVALID_VALUE;
  memset(prop, 0, sizeof *prop);
  prop->type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop->location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop->location.id = current ? current->device : 0;
  prop->requestedHandleTypes =
      getenv("FAKE_CUDA_VMM_NO_FD") ? CU_MEM_HANDLE_TYPE_NONE : CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  return CUDA_SUCCESS;
}

CUresult cuModuleLoadData(CUmodule *m, const void *image) {
  if (!image || !current) return CUDA_ERROR_INVALID_VALUE;
  *m = calloc(1, sizeof **m);
  stats.module_loads++;
  return CUDA_SUCCESS;
}

CUresult cuModuleUnload(CUmodule m) { free(m); return CUDA_SUCCESS; }

CUresult cuModuleGetFunction(CUfunction *f, CUmodule m, const char *name) {
  (void)m;
  *f = calloc(1, sizeof **f); /* leaked with the module: tests are short */
  snprintf((*f)->name, sizeof (*f)->name, "%s", name);
  return CUDA_SUCCESS;
}

/* Records one launch of f (grid gx, block bx) with the kernel parameter
** params[0]; pdl: with programmatic stream serialization. */
static CUresult record_launch(CUfunction f, unsigned int gx, unsigned int bx, CUstream s,
                              void **params, int pdl) {
  if (stream_ctx(s) != current) stats.wrong_context++;
  if (!params) return CUDA_ERROR_INVALID_VALUE;
  if (stats.launches < FAKE_CUDA_MAX_LAUNCHES) {
    fake_cuda_launch_t *l = &stats.log[stats.launches];
    snprintf(l->kernel, sizeof l->kernel, "%s", f->name);
    l->grid = gx;
    l->block = bx;
    l->device = current ? current->device : -1;
    l->pdl = pdl;
    memcpy(&l->params, params[0], sizeof l->params); /* collgen's kernels take one */
  }
  stats.launches++;
  return CUDA_SUCCESS;
}

CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                        unsigned int bx, unsigned int by, unsigned int bz, unsigned int shmem,
                        CUstream s, void **params, void **extra) {
  (void)gy;
  (void)gz;
  (void)by;
  (void)bz;
  (void)shmem;
  (void)extra;
  return record_launch(f, gx, bx, s, params, 0);
}

CUresult cuLaunchKernelEx(const CUlaunchConfig *cfg, CUfunction f, void **params, void **extra) {
  (void)extra;
  if (!cfg || (cfg->numAttrs > 0 && !cfg->attrs)) return CUDA_ERROR_INVALID_VALUE;
  int pdl = 0;
  for (unsigned int i = 0; i < cfg->numAttrs; ++i) {
    if (cfg->attrs[i].id != CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION)
      return CUDA_ERROR_NOT_SUPPORTED; /* collgen sets no other attribute */
    pdl = cfg->attrs[i].value.programmaticStreamSerializationAllowed != 0;
  }
  return record_launch(f, cfg->gridDimX, cfg->blockDimX, cfg->hStream, params, pdl);
}

CUresult cuGetErrorName(CUresult r, const char **s) {
  *s = r == CUDA_SUCCESS ? "CUDA_SUCCESS" : "CUDA_ERROR_FAKE";
  return CUDA_SUCCESS;
}

CUresult cuGetErrorString(CUresult r, const char **s) {
  *s = r == CUDA_SUCCESS ? "no error" : "error from the fake driver";
  return CUDA_SUCCESS;
}

CUresult cuStreamCreate(CUstream *s, unsigned int flags) {
  (void)flags;
  *s = calloc(1, sizeof **s);
  (*s)->ctx = current;
  return CUDA_SUCCESS;
}

CUresult cuStreamDestroy(CUstream s) { free(s); return CUDA_SUCCESS; }
CUresult cuStreamSynchronize(CUstream s) { (void)s; return CUDA_SUCCESS; }
CUresult cuStreamQuery(CUstream s) { (void)s; return CUDA_SUCCESS; }

/* Capture is faked as far as collgen looks at it: a stream of
** cuStreamCreate captures into a graph that keeps the user objects
** retained on it and runs their destructors when it is destroyed
** (cuGraphDestroy); work launched meanwhile is recorded as usual. Graphs
** are never instantiated or launched, and events are not faked. */
CUresult cuStreamBeginCapture(CUstream s, CUstreamCaptureMode m) {
  (void)m;
  if (!s || s->capturing) return CUDA_ERROR_NOT_SUPPORTED;
  s->capturing = calloc(1, sizeof *s->capturing);
  return s->capturing ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}
CUresult cuStreamEndCapture(CUstream s, CUgraph *g) {
  if (!s || !s->capturing) return CUDA_ERROR_ILLEGAL_STATE;
  *g = s->capturing;
  s->capturing = NULL;
  return CUDA_SUCCESS;
}
CUresult cuStreamGetCaptureInfo(CUstream s, CUstreamCaptureStatus *status, cuuint64_t *id,
                                CUgraph *graph, const CUgraphNode **deps,
                                const CUgraphEdgeData **edges, size_t *ndeps) {
  *status = s && s->capturing ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE;
  if (id) *id = 0;
  if (graph) *graph = s ? s->capturing : NULL;
  if (deps) *deps = NULL;
  if (edges) *edges = NULL;
  if (ndeps) *ndeps = 0;
  return CUDA_SUCCESS;
}
CUresult cuUserObjectCreate(CUuserObject *obj, void *ptr, CUhostFn destroy, unsigned int refs,
                            unsigned int flags) {
  (void)flags;
  if (refs != 1 || !destroy) return CUDA_ERROR_NOT_SUPPORTED; /* all collgen needs */
  *obj = malloc(sizeof **obj);
  if (!*obj) return CUDA_ERROR_OUT_OF_MEMORY;
  **obj = (struct CUuserObject_st){ptr, destroy};
  stats.user_objects++;
  return CUDA_SUCCESS;
}
CUresult cuGraphRetainUserObject(CUgraph g, CUuserObject obj, unsigned int count,
                                 unsigned int flags) {
  if (!g || count != 1 || flags != CU_GRAPH_USER_OBJECT_MOVE ||
      g->nobjects == FAKE_GRAPH_MAX_OBJECTS)
    return CUDA_ERROR_NOT_SUPPORTED;
  g->objects[g->nobjects++] = obj;
  return CUDA_SUCCESS;
}
CUresult cuGraphInstantiate(CUgraphExec *e, CUgraph g, unsigned long long flags) {
  (void)e;
  (void)g;
  (void)flags;
  return CUDA_ERROR_NOT_SUPPORTED;
}
CUresult cuGraphLaunch(CUgraphExec e, CUstream s) { (void)e; (void)s; return CUDA_ERROR_NOT_SUPPORTED; }
CUresult cuGraphExecDestroy(CUgraphExec e) { (void)e; return CUDA_SUCCESS; }
CUresult cuGraphDestroy(CUgraph g) {
  if (!g) return CUDA_ERROR_INVALID_VALUE;
  for (int i = 0; i < g->nobjects; ++i) {
    g->objects[i]->destroy(g->objects[i]->ptr);
    free(g->objects[i]);
    stats.user_objects--;
  }
  free(g);
  return CUDA_SUCCESS;
}
CUresult cuEventCreate(CUevent *e, unsigned int f) { (void)e; (void)f; return CUDA_ERROR_NOT_SUPPORTED; }
CUresult cuEventRecord(CUevent e, CUstream s) { (void)e; (void)s; return CUDA_ERROR_NOT_SUPPORTED; }
CUresult cuEventSynchronize(CUevent e) { (void)e; return CUDA_ERROR_NOT_SUPPORTED; }
CUresult cuEventElapsedTime(float *ms, CUevent a, CUevent b) {
  (void)ms;
  (void)a;
  (void)b;
  return CUDA_ERROR_NOT_SUPPORTED;
}
CUresult cuEventDestroy(CUevent e) { (void)e; return CUDA_SUCCESS; }

CUresult cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode *m) { (void)m; return CUDA_SUCCESS; }

CUresult cuMemGetInfo(size_t *free_bytes, size_t *total) {
  *free_bytes = (size_t)64 << 30;
  *total = (size_t)141 << 30;
  return CUDA_SUCCESS;
}
