/*
** op_nccl.c -- the NCCL path of the op driver (docs/multinode.md): a group
** routed to NCCL runs its collective part through NCCL (the op's
** nccl_exchange) and finishes with the op itself on this rank alone, a
** group of one, planned and generated from the same templates (the op's
** nccl_local): for the norm ops, a local RMSNorm over what NCCL delivered.
*/
#include <stdint.h>
#include <string.h>

#include "op_runtime.h"

void collgen__local_call_init(collgen__local_call *local, const collgen__call *call, int r,
                              const int64_t *shape, int tensor_rank) {
  memset(local, 0, sizeof *local);
  local->call = *call;
  memcpy(local->shape, shape, (size_t)tensor_rank * sizeof *shape);
  for (int q = 0; q < COLLGEN_MAX_DEVICES; ++q) local->shapes[q] = local->shape;
  for (int k = 0; k < COLLGEN_MAX_ROLES; ++k) {
    if (!call->buffers[k]) continue;
    local->buffers[k][r] = call->buffers[k][r];
    local->call.buffers[k] = local->buffers[k];
  }
  local->streams[r] = call->streams[r];
  local->call.shapes = local->shapes;
  local->call.streams = local->streams;
  local->call.tensor_rank = tensor_rank;
  local->call.group_size = 1;
}

/* COLLGEN_ERR_NCCL when NCCL reports an asynchronous error on comm (an
** earlier operation failed, e.g. a peer died); waits (bounded) for work
** NCCL still has in progress. */
static int check_async(collgen_comm_t *c, collgen__nccl_comm_t comm) {
  collgen__nccl_result async = COLLGEN__NCCL_SUCCESS;
  int rc = collgen__nccl_fail(collgen__nccl.ncclCommGetAsyncError(comm, &async),
                              "ncclCommGetAsyncError", c->err, sizeof c->err);
  if (rc == COLLGEN_OK)
    rc = collgen__nccl_settle(comm, async, "an earlier NCCL operation of this communicator",
                              c->timeout_ms, c->err, sizeof c->err);
  return rc;
}

/* The local kernel of `local` on rank r: measured, planned for a group of
** one (alignment from its real pointers), loaded, its parameters filled. */
static int prepare_local(collgen_comm_t *c, const collgen__op_runtime *rt,
                         const collgen__local_call *local, int r, CUfunction *fn, int *grid,
                         int *block, collgen__kparams *kp) {
  collgen__group lg;
  memset(&lg, 0, sizeof lg);
  collgen__common_shape(c, &local->call, &lg.shape);
  int rc = rt->measure_group(c, &local->call, r, 1, &lg);
  if (rc != COLLGEN_OK) return rc;
  for (int k = 0; k < collgen__op_find(rt->op)->nroles; ++k)
    if (lg.bytes[k][r] && ((uintptr_t)local->call.buffers[k][r] & 15u)) lg.shape.aligned16 = 0;
  CUfunction fns[COLLGEN_MAX_DEVICES];
  collgen_plan_t plan;
  rc = collgen__group_prepare(c, &lg.shape, r, 1, fns, &plan);
  if (rc != COLLGEN_OK) return rc;
  if (plan.copy_from >= 0) /* an op whose local part is a copy has no nccl_local */
    return collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_UNSUPPORTED,
                         "the local part of %s on NCCL plans as a copy, not a kernel",
                         collgen__op_find(rt->op)->name);
  *grid = plan.grid;
  *block = plan.block;
  *fn = fns[r];
  collgen__common_params(c, r, 1, r, kp);
  rt->fill_rank(&local->call, &lg, r, 1, r, kp);
  return COLLGEN_OK;
}

static int nccl_run(collgen_comm_t *c, const collgen__op_runtime *rt, const collgen__call *call,
                    const collgen__group *g, int base, int size, collgen__nccl_comm_t comm);

int collgen__nccl_group_run(collgen_comm_t *c, const collgen__op_runtime *rt,
                            const collgen__call *call, const collgen__group *g, int base,
                            int size) {
  collgen__nccl_comm_t comm = c->nccl[size];
  if (!comm || !rt->nccl_exchange)
    return collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_UNSUPPORTED,
                         "group size %d routes to NCCL but %s", size,
                         comm ? "this op has no NCCL path"
                              : "has no NCCL communicator (aborted after a timeout or an abort)");
  int rc = check_async(c, comm);
  if (rc == COLLGEN_OK) rc = nccl_run(c, rt, call, g, base, size, comm);
  if (rc == COLLGEN_ERR_TIMEOUT) { /* a peer never took part: nothing more can complete */
    collgen__nccl_release(comm, c->nccl_graphs[size], 1);
    c->nccl[size] = NULL;
    c->nccl_graphs[size] = NULL;
  }
  return rc;
}

/* The checked call on NCCL: the local kernel prepared, NCCL's exchange,
** the local kernel launched. */
static int nccl_run(collgen_comm_t *c, const collgen__op_runtime *rt, const collgen__call *call,
                    const collgen__group *g, int base, int size, collgen__nccl_comm_t comm) {
  const int r = c->self;
  int rc = COLLGEN_OK;
  /* Everything is checked, planned and loaded before NCCL gets any work. */
  collgen__local_call local;
  CUfunction fn = NULL;
  int grid = 0, block = 0;
  collgen__kparams kp;
  if (rt->nccl_local) {
    rc = rt->nccl_local(c, call, g, base, size, r, &local);
    if (rc == COLLGEN_OK) rc = prepare_local(c, rt, &local, r, &fn, &grid, &block, &kp);
    if (rc != COLLGEN_OK) return rc;
  }
  CUstream s = (CUstream)call->streams[r];
  rc = collgen__cu_fail(collgen__cu.cuCtxSetCurrent(c->ctx[r]), "cuCtxSetCurrent", c->err,
                        sizeof c->err);
  /* A call captured into a CUDA graph counts that graph, so that the
  ** communicator's release never waits for it (nccl_graphs.c). */
  if (rc == COLLGEN_OK) rc = collgen__nccl_graphs_track(c->nccl_graphs[size], s, c->err, sizeof c->err);
  if (rc == COLLGEN_OK) rc = rt->nccl_exchange(c, call, g, base, size, r, comm, s);
  if (rc == COLLGEN_OK && rt->nccl_local) rc = collgen__launch(c, fn, grid, block, &kp, r, s);
  return rc;
}

int collgen__nccl_gather(collgen_comm_t *c, collgen_dtype_t dtype, const int64_t *units,
                         int64_t unit_elems, int base, int size, int r, const void *in,
                         void *gathered, collgen__nccl_comm_t comm, CUstream s) {
  const int64_t esize = collgen__dtype_bytes(dtype);
  const collgen__nccl_dtype dt = collgen__nccl_dtype_of(dtype);
  char *out = (char *)gathered;
  const size_t mine = (size_t)(units[r] * unit_elems);
  int equal = 1;
  for (int k = base; k < base + size; ++k) equal &= units[k] == units[base];
  if (equal)
    return collgen__nccl_settle(comm, collgen__nccl.ncclAllGather(in, out, mine, dt, comm, s),
                                "ncclAllGather", c->timeout_ms, c->err, sizeof c->err);
  int64_t start = 0, own = 0;
  int rc = collgen__nccl_fail(collgen__nccl.ncclGroupStart(), "ncclGroupStart", c->err,
                              sizeof c->err);
  for (int k = base; rc == COLLGEN_OK && k < base + size; ++k) {
    const size_t theirs = (size_t)(units[k] * unit_elems);
    if (k == r) own = start;
    if (k != r && mine)
      rc = collgen__nccl_fail(collgen__nccl.ncclSend(in, mine, dt, k - base, comm, s), "ncclSend",
                              c->err, sizeof c->err);
    if (rc == COLLGEN_OK && k != r && theirs)
      rc = collgen__nccl_fail(collgen__nccl.ncclRecv(out + start * esize, theirs, dt, k - base,
                                                     comm, s),
                              "ncclRecv", c->err, sizeof c->err);
    start += (int64_t)theirs;
  }
  /* The group is ended whatever failed inside it. */
  const collgen__nccl_result end = collgen__nccl.ncclGroupEnd();
  if (rc == COLLGEN_OK)
    rc = collgen__nccl_settle(comm, end, "ncclGroupEnd", c->timeout_ms, c->err, sizeof c->err);
  if (rc == COLLGEN_OK && out + own * esize != (const char *)in)
    rc = collgen__stage_copy(c, out + own * esize, in, mine * (size_t)esize, s);
  return rc;
}
