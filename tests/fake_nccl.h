/*
** fake_nccl.h -- what the stand-in NCCL (fake_nccl.c) records, read by the
** routing tests through dlsym("fake_nccl_stats").
*/
#ifndef FAKE_NCCL_H
#define FAKE_NCCL_H
#include <stddef.h>

#define FAKE_NCCL_MAX_CALLS 64

/* One data call (ncclAllReduce, ncclAllGather, ncclSend, ncclRecv,
** ncclGroupStart, ncclGroupEnd, ncclBroadcast: peer is its root), as made. */
typedef struct {
  char fn[24];
  const void *send;
  void *recv;
  size_t count;
  int dtype, op, peer; /* -1 where the call has none; ncclReduce: peer = root */
  int comm_rank, comm_nranks;
  void *stream;
} fake_nccl_call_t;

typedef struct {
  long unique_ids;     /* ncclGetUniqueId calls */
  long inits;          /* successful ncclCommInitRank(Config) calls */
  long destroys, aborts;
  long released_elsewhere; /* destroys and aborts on another thread than the creation */
  long polls;          /* ncclCommGetAsyncError calls */
  int last_blocking;   /* config.blocking of the last ncclCommInitRankConfig */
  long live;           /* communicators made and not yet destroyed or aborted */
  int last_nranks, last_rank; /* of the last ncclCommInitRank(Config) */
  unsigned char last_id[128]; /* the id it was given */
  long calls;          /* data calls */
  fake_nccl_call_t log[FAKE_NCCL_MAX_CALLS];
} fake_nccl_stats_t;

fake_nccl_stats_t *fake_nccl_stats(void);

#ifdef FAKE_NCCL_PATH /* only in the test programs that use the stand-in */
#include <dlfcn.h>
#include <stdlib.h>

/* Points collgen at the stand-in ($COLLGEN_NCCL_LIBRARY), clears the
** FAKE_NCCL_* settings and returns its counters (the handle collgen will
** dlopen), or NULL with dlerror() saying why. */
static inline fake_nccl_stats_t *fake_nccl_use(const char *path) {
  setenv("COLLGEN_NCCL_LIBRARY", path, 1);
  unsetenv("FAKE_NCCL_VERSION");
  unsetenv("FAKE_NCCL_INIT_FAIL");
  unsetenv("FAKE_NCCL_PENDING");
  void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!lib) return NULL;
  fake_nccl_stats_t *(*get)(void) = (fake_nccl_stats_t * (*)(void)) dlsym(lib, "fake_nccl_stats");
  return get ? get() : NULL;
}
#endif
#endif
