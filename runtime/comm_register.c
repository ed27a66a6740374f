/*
** comm_register.c -- collgen_register_buffer / collgen_deregister_buffer:
** user buffers that the peers' kernels read directly (zero copy) in the
** one-process-per-GPU mode. Each rank exports the allocation that holds
** its buffer (a legacy CUDA IPC handle, or a POSIX fd for a cuMem VMM
** allocation), all-gathers it through the communicator's bootstrap and maps
** every peer's; a second all-gather makes every rank succeed or fail
** together. The ops look registrations up (collgen__registered_find) when
** they would stage a peer-read input (docs/multiprocess.md, "Registered
** buffers").
*/
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bootstrap.h"
#include "comm_internal.h"

#define REG_RECORD_VERSION 1u

enum { EXPORT_IPC = 1, EXPORT_VMM = 2 };

/* What each rank tells the others about its buffer. */
typedef struct {
  uint32_t version;
  int32_t status;        /* COLLGEN_OK, or why this rank cannot register */
  uint32_t kind;         /* EXPORT_IPC or EXPORT_VMM */
  uint32_t unused;
  uint64_t bytes;        /* registered bytes: every rank the same */
  uint64_t offset;       /* of the buffer in its allocation */
  uint64_t alloc_bytes;  /* the allocation's size (VMM: its mapped size) */
  CUipcMemHandle ipc;    /* EXPORT_IPC: the allocation's handle */
} reg_record;

/* Fills rec (kind, offset, sizes, IPC handle) for this rank's buffer, or,
** for a VMM allocation, exports it as *fd. Needs this rank's context. */
static int export_buffer(collgen_comm_t *c, const void *ptr, size_t bytes, reg_record *rec,
                         int *fd) {
  const uintptr_t p = (uintptr_t)ptr;
  CUdeviceptr base = 0;
  size_t size = 0;
  if (!ptr || bytes == 0)
    return collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_INVALID_ARG,
                         "register: ptr is NULL or bytes is 0");
  if (p & 15u)
    return collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_ALIGNMENT,
                         "register: buffer %p is not 16-byte aligned", ptr);
  CUresult r = collgen__cu.cuMemGetAddressRange(&base, &size, (CUdeviceptr)p);
  if (r != CUDA_SUCCESS) {
    collgen__cu_fail(r, "cuMemGetAddressRange", c->err, sizeof c->err);
    char why[COLLGEN_ERRBUF];
    snprintf(why, sizeof why, "%s", c->err);
    return collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_INVALID_ARG,
                         "register: %p is not device memory of this process (%s)", ptr, why);
  }
  if (bytes > size - (size_t)(p - base))
    return collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_INVALID_ARG,
                         "register: [%p, +%zu bytes) runs past the end of its allocation "
                         "([%p, +%zu bytes)); a registered buffer lies inside one allocation",
                         ptr, bytes, (void *)(uintptr_t)base, size);
  rec->offset = p - base;
  rec->alloc_bytes = size;
  CUmemGenericAllocationHandle h;
  if (collgen__cu.cuMemRetainAllocationHandle(&h, (void *)p) != CUDA_SUCCESS) {
    rec->kind = EXPORT_IPC; /* not a VMM mapping: cudaMalloc / cuMemAlloc memory */
    return collgen__cu_fail(collgen__cu.cuIpcGetMemHandle(&rec->ipc, base),
                            "cuIpcGetMemHandle (the buffer's allocation)", c->err, sizeof c->err);
  }
  rec->kind = EXPORT_VMM;
  CUmemAllocationProp prop;
  int rc = collgen__cu_fail(collgen__cu.cuMemGetAllocationPropertiesFromHandle(&prop, h),
                            "cuMemGetAllocationPropertiesFromHandle", c->err, sizeof c->err);
  if (rc == COLLGEN_OK &&
      !((unsigned)prop.requestedHandleTypes & (unsigned)CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR))
    rc = collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_UNSUPPORTED,
                       "register: %p is a cuMem allocation made without "
                       "CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, so other processes cannot "
                       "map it: create it with that handle type, or with cudaMalloc", ptr);
  if (rc == COLLGEN_OK)
    rc = collgen__cu_fail(collgen__cu.cuMemExportToShareableHandle(
                              fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
                          "cuMemExportToShareableHandle", c->err, sizeof c->err);
  collgen__cu.cuMemRelease(h); /* the retained reference */
  return rc;
}

/* Maps rank r's buffer described by rec (fd: its VMM descriptor). */
static int import_peer(collgen_comm_t *c, struct collgen_buffer *b, int r, const reg_record *rec,
                       int fd) {
  int rc = COLLGEN_OK;
  if (rec->offset > rec->alloc_bytes || rec->bytes > rec->alloc_bytes - rec->offset)
    return collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_PEER,
                         "rank %d described a buffer outside its allocation", r);
  if (rec->kind == EXPORT_VMM) {
    rc = collgen__shared_import(fd, (size_t)rec->alloc_bytes, c->cudev[c->self], &b->vmm[r],
                                c->err, sizeof c->err);
    if (rc == COLLGEN_OK) b->at[r] = b->vmm[r].ptr + rec->offset;
  } else if (rec->kind == EXPORT_IPC) {
    CUdeviceptr m = 0;
    rc = collgen__cu_fail(collgen__cu.cuIpcOpenMemHandle(&m, rec->ipc,
                                                         CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS),
                          "cuIpcOpenMemHandle", c->err, sizeof c->err);
    if (rc == COLLGEN_OK) {
      b->ipc[r] = m;
      b->at[r] = m + rec->offset;
    }
  } else {
    rc = collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_PEER,
                       "rank %d sent an unknown export kind %u", r, (unsigned)rec->kind);
  }
  if (rc != COLLGEN_OK) {
    char why[COLLGEN_ERRBUF];
    snprintf(why, sizeof why, "%s", c->err);
    rc = collgen__fail(c->err, sizeof c->err, rc, "mapping rank %d's registered buffer: %s", r,
                       why);
  }
  return rc;
}

/* Checks every rank's record against this rank's, then maps the peers this
** rank reaches by P2P. This rank's own failure keeps its message. */
static int map_records(collgen_comm_t *c, struct collgen_buffer *b, const reg_record *all,
                       const int *fds) {
  const int self = c->self;
  if (all[self].status != COLLGEN_OK) return all[self].status;
  for (int r = 0; r < c->ndev; ++r) {
    if (all[r].version != REG_RECORD_VERSION)
      return collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_PEER,
                           "rank %d runs another collgen (registration record %u, this one %u)",
                           r, (unsigned)all[r].version, REG_RECORD_VERSION);
    if (all[r].bytes != all[self].bytes)
      return collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_INVALID_ARG,
                           "register: ranks %d and %d registered different sizes (%llu, %llu "
                           "bytes); every rank registers the same bytes", self, r,
                           (unsigned long long)all[self].bytes, (unsigned long long)all[r].bytes);
  }
  for (int r = 0; r < c->ndev; ++r)
    if (all[r].status != COLLGEN_OK)
      return collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_PEER,
                           "register: rank %d could not register its buffer (%s)", r,
                           collgen_status_name(all[r].status));
  b->at[self] = (CUdeviceptr)b->ptr;
  for (int r = 0; r < c->ndev; ++r) {
    if (r == self || !c->p2p[self][r]) continue; /* the ops refuse such groups */
    int rc = import_peer(c, b, r, &all[r], fds[r]);
    if (rc != COLLGEN_OK) return rc;
  }
  return COLLGEN_OK;
}

/* Unmaps every peer's buffer of b (this rank's context current). */
static void unmap_buffer(struct collgen_buffer *b) {
  for (int r = 0; r < COLLGEN_MAX_DEVICES; ++r) {
    if (b->ipc[r]) collgen__cu.cuIpcCloseMemHandle(b->ipc[r]);
    collgen__shared_free(&b->vmm[r]);
    b->ipc[r] = b->at[r] = 0;
  }
}

/* The collective part of registering: export, exchange, map, agree. */
static int share_buffer(collgen_comm_t *c, struct collgen_buffer *b, int have_handle) {
  const int n = c->ndev, self = c->self;
  reg_record me, all[COLLGEN_MAX_DEVICES];
  int fd = -1, fds[COLLGEN_MAX_DEVICES];
  int32_t status, all_status[COLLGEN_MAX_DEVICES];
  for (int r = 0; r < n; ++r) fds[r] = -1;
  memset(&me, 0, sizeof me);
  me.version = REG_RECORD_VERSION;
  me.bytes = b->bytes;
  int rc = collgen__cu_fail(collgen__cu.cuCtxSetCurrent(c->ctx[self]), "cuCtxSetCurrent", c->err,
                            sizeof c->err);
  if (rc == COLLGEN_OK)
    rc = have_handle ? export_buffer(c, (const void *)b->ptr, b->bytes, &me, &fd)
                     : collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_INVALID_ARG,
                                     "register: handle is NULL");
  me.status = rc;
  /* Every rank sends one descriptor; a rank without a VMM fd (legacy IPC,
  ** or a failure) sends a placeholder that the others close unread. */
  if (fd < 0) fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_IO, "open /dev/null failed");
  rc = collgen__boot_exchange(c->boot, &me, all, sizeof me, &fd, 1, fds);
  close(fd);
  if (rc != COLLGEN_OK) {
    snprintf(c->err, sizeof c->err, "%s", collgen__boot_last_error(c->boot));
    goto out;
  }
  status = map_records(c, b, all, fds);
  /* every rank learns whether every rank mapped every peer */
  rc = collgen__boot_allgather(c->boot, &status, all_status, sizeof status);
  if (rc != COLLGEN_OK) {
    snprintf(c->err, sizeof c->err, "%s", collgen__boot_last_error(c->boot));
    goto out;
  }
  rc = status;
  for (int r = 0; rc == COLLGEN_OK && r < n; ++r)
    if (all_status[r] != COLLGEN_OK)
      rc = collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_PEER,
                         "register: rank %d could not map its peers' buffers (%s)", r,
                         collgen_status_name(all_status[r]));
out:
  for (int r = 0; r < n; ++r)
    if (fds[r] >= 0) close(fds[r]);
  if (rc != COLLGEN_OK) unmap_buffer(b);
  return rc;
}

int collgen_register_buffer(collgen_comm_t *c, void *ptr, size_t bytes,
                            collgen_buffer_t **handle) {
  if (!c) return collgen__fail_tls(COLLGEN_ERR_INVALID_ARG, "comm is NULL");
  c->err[0] = 0;
  if (handle) *handle = NULL;
  struct collgen_buffer *b = calloc(1, sizeof *b);
  if (!b) return collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_NO_MEMORY, "out of memory");
  b->ptr = (uintptr_t)ptr;
  b->bytes = bytes;
  int rc;
  if (c->self >= 0)
    rc = share_buffer(c, b, handle != NULL);
  else if (!ptr || bytes == 0 || !handle)
    rc = collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_INVALID_ARG,
                       "register: ptr, bytes and handle must be set");
  else
    rc = COLLGEN_OK; /* one process: the kernels read user buffers anyway */
  if (c->self >= 0) collgen__cu.cuCtxSetCurrent(NULL);
  if (rc != COLLGEN_OK) {
    free(b);
    return rc;
  }
  b->next = c->buffers;
  c->buffers = b;
  *handle = b;
  return COLLGEN_OK;
}

int collgen_deregister_buffer(collgen_comm_t *c, collgen_buffer_t *handle) {
  if (!c) return collgen__fail_tls(COLLGEN_ERR_INVALID_ARG, "comm is NULL");
  c->err[0] = 0;
  struct collgen_buffer **link = &c->buffers;
  while (*link && (uintptr_t)*link != (uintptr_t)handle) link = &(*link)->next;
  if (!handle || !*link)
    return collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_INVALID_ARG,
                         "deregister: %p is not a live registration of this communicator "
                         "(NULL, another communicator's, or deregistered already)",
                         (void *)handle);
  struct collgen_buffer *b = *link;
  *link = b->next;
  if (c->self < 0) {
    free(b);
    return COLLGEN_OK;
  }
  /* Nothing of this rank may still read the peers' buffers when they are
  ** unmapped; the all-gather then tells every rank that nobody maps its
  ** buffer any more. */
  int rc = collgen__cu_fail(collgen__cu.cuCtxSetCurrent(c->ctx[c->self]), "cuCtxSetCurrent",
                            c->err, sizeof c->err);
  if (rc == COLLGEN_OK)
    rc = collgen__cu_fail(collgen__cu.cuCtxSynchronize(), "cuCtxSynchronize", c->err,
                          sizeof c->err);
  unmap_buffer(b);
  free(b);
  collgen__cu.cuCtxSetCurrent(NULL);
  int32_t status = rc, all_status[COLLGEN_MAX_DEVICES];
  int brc = collgen__boot_allgather(c->boot, &status, all_status, sizeof status);
  if (brc != COLLGEN_OK) {
    snprintf(c->err, sizeof c->err, "%s", collgen__boot_last_error(c->boot));
    return brc;
  }
  for (int r = 0; rc == COLLGEN_OK && r < c->ndev; ++r)
    if (all_status[r] != COLLGEN_OK)
      rc = collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_PEER,
                         "deregister: rank %d failed to end the registration (%s)", r,
                         collgen_status_name(all_status[r]));
  return rc;
}

void collgen__comm_buffers_release(collgen_comm_t *c) {
  if (c->buffers && c->self >= 0) collgen__cu.cuCtxSetCurrent(c->ctx[c->self]);
  while (c->buffers) {
    struct collgen_buffer *b = c->buffers;
    c->buffers = b->next;
    unmap_buffer(b);
    free(b);
  }
}

int collgen__registered_find(collgen_comm_t *c, const char *what, const void *p, size_t bytes,
                             const struct collgen_buffer **out) {
  const uintptr_t q = (uintptr_t)p;
  *out = NULL;
  if (c->self < 0) return COLLGEN_OK;
  for (const struct collgen_buffer *b = c->buffers; b; b = b->next) {
    if (q < b->ptr || q - b->ptr >= b->bytes) continue;
    if (bytes > b->bytes - (q - b->ptr))
      return collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_INVALID_ARG,
                           "%s [%p, +%zu bytes) starts in the registered buffer [%p, +%zu bytes) "
                           "and runs past its end", what, p, bytes, (void *)b->ptr, b->bytes);
    *out = b;
    return COLLGEN_OK;
  }
  return COLLGEN_OK;
}
