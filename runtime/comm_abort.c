/*
** comm_abort.c -- collgen_comm_abort: stops every kernel of a communicator
** without a launch and without polling anything on the hot path.
**
** Two rounds of DMA copies from pinned host memory, on each rank's own
** non-blocking stream (so neither waits for the rank's queued work, and
** neither needs a free SM):
**   1. the header of every rank's buffer (barrier counters and flags, LL
**      epochs, abort_flag) := COLLGEN_ABORT_FILL bytes. A kernel that
**      reads COLLGEN_ABORT_MARK where it expects a count signals nothing
**      real and stops (group_barrier, ll_begin).
**   2. every byte of every rank's buffer := COLLGEN_ABORT_FILL. Every word
**      a running kernel can be polling then reads COLLGEN_ABORT_MARK,
**      which no counter or epoch ever equals, and the wait stops
**      (templates/signal.cuh.tpl).
** Round 2 starts only when round 1 has completed on every rank, so any
** kernel that starts after round 2 began reads the mark in its counts.
** docs/signals.md has the argument in full. Groups routed to NCCL are
** ended by ncclCommAbort.
*/
#include <stddef.h>

#include "comm_internal.h"

/* The local rank whose context and abort stream write rank r's buffer:
** r itself in one process; this process's rank when each process drives
** one (it reaches its peers' buffers through its own mappings, so an abort
** in one process stops the kernels of every process). */
static int writer_of(const collgen_comm_t *c, int r) { return c->self < 0 ? r : c->self; }

/* Queues one host-to-device copy into rank r's buffer. */
static CUresult copy_to_rank(collgen_comm_t *c, int r, size_t offset, size_t bytes) {
  if (!c->signal[r]) return CUDA_SUCCESS; /* a peer this process cannot reach */
  const int w = writer_of(c, r);
  CUresult res = collgen__cu.cuCtxSetCurrent(c->ctx[w]);
  if (res != CUDA_SUCCESS) return res;
  return collgen__cu.cuMemcpyHtoDAsync(c->signal[r] + offset, (const char *)c->abort_fill + offset,
                                       bytes, c->abort_stream[w]);
}

/* Runs one round (the same range of every rank's buffer) to completion.
** Every rank is attempted even when one fails; the first failure is
** reported. */
static int run_round(collgen_comm_t *c, size_t offset, size_t bytes, const char *what) {
  int rc = COLLGEN_OK;
  for (int r = 0; r < c->ndev; ++r) {
    CUresult res = copy_to_rank(c, r, offset, bytes);
    if (res != CUDA_SUCCESS && rc == COLLGEN_OK) rc = collgen__cu_fail(res, what, c->err, sizeof c->err);
  }
  for (int r = 0; r < c->ndev; ++r) {
    if (!collgen__comm_is_local(c, r)) continue;
    CUresult res = collgen__cu.cuCtxSetCurrent(c->ctx[r]);
    if (res == CUDA_SUCCESS) res = collgen__cu.cuStreamSynchronize(c->abort_stream[r]);
    if (res != CUDA_SUCCESS && rc == COLLGEN_OK) rc = collgen__cu_fail(res, what, c->err, sizeof c->err);
  }
  return rc;
}

int collgen_comm_abort(collgen_comm_t *c) {
  if (!c) return collgen__fail_tls(COLLGEN_ERR_INVALID_ARG, "comm is NULL");
  atomic_store(&c->aborted, 1); /* later calls refuse before they launch */
  CUcontext caller = NULL;
  collgen__cu.cuCtxGetCurrent(&caller);
  int rc = run_round(c, 0, offsetof(collgen__signal, ll_token), "abort: marking the counts");
  int rc2 = run_round(c, 0, sizeof(collgen__signal), "abort: overwriting the signal buffers");
  /* Groups on NCCL: its own abort ends their operations (docs/multinode.md). */
  int rc3 = collgen__comm_nccl_abort(c);
  collgen__cu.cuCtxSetCurrent(caller);
  return rc != COLLGEN_OK ? rc : rc2 != COLLGEN_OK ? rc2 : rc3;
}
