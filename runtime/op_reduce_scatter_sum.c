/*
** op_reduce_scatter_sum.c -- reduce-scatter sum: its runtime descriptor
** (op_runtime.h; the entry points are generated, op_entry_points.c). Roles
** (COLLGEN_ROLES_REDUCE_SCATTER_SUM): input [N, ...] and output [count_i,
** ...], group rank i's chunk of rows (collgen__scatter_chunk). They may not
** overlap: the runtime's overlap check refuses an output inside its input.
** The planner makes a group of one rank a copy, not a kernel.
*/
#include <stdint.h>

#include "op_runtime.h"
#include "shape.h"

enum { COLLGEN_ROLES_REDUCE_SCATTER_SUM(COLLGEN_ROLE_ENUM) };

/* Every rank of a group holds [N, ...]; rows = N, cols = the elements of
** a row (the product of the other dims), elems = N * cols. Rank r's output
** extent is its chunk's rows. The kernel offsets every input by the
** chunk's start, so 16-byte vectors need every chunk start 16-byte aligned
** too: otherwise aligned16 is cleared here (in both process models). */
static int measure_group(collgen_comm_t *c, const collgen__call *call, int base, int size,
                         collgen__group *g) {
  int64_t n = 0;
  int rc = collgen__group_same_shape(c, call, base, size, &n);
  if (rc != COLLGEN_OK) return rc;
  const int64_t rows = call->shapes[base][0], cols = rows ? n / rows : 0;
  const int64_t esize = collgen__dtype_bytes(call->dtype);
  for (int r = base; r < base + size; ++r) {
    int64_t start = 0, count = 0;
    collgen__scatter_chunk(rows, size, r - base, &start, &count);
    g->bytes[ROLE_input][r] = n * esize;
    g->bytes[ROLE_output][r] = count * cols * esize;
    if (start * cols * esize % 16) g->shape.aligned16 = 0;
  }
  g->shape.elems = n;
  g->shape.rows = rows;
  g->shape.cols = cols;
  g->empty = n == 0;
  return COLLGEN_OK;
}

/* Rank r's kernel reads its chunk of every rank's input (the inputs offset
** by the chunk's start) and writes count elements into its output. */
static void fill_rank(const collgen__call *call, const collgen__group *g, int base, int size,
                      int r, collgen__kparams *kp) {
  const int64_t esize = collgen__dtype_bytes(call->dtype);
  int64_t start = 0, count = 0;
  collgen__scatter_chunk(g->shape.rows, size, r - base, &start, &count);
  const int64_t offset = start * g->shape.cols * esize;
  for (int k = 0; k < size; ++k) {
    kp->in[k] = (const char *)call->buffers[ROLE_input][base + k] + offset;
    kp->out[k] = (void *)call->buffers[ROLE_output][base + k];
  }
  kp->count = (unsigned long long)(count * g->shape.cols);
}

/* NCCL path (NCCL's own summation order, docs/multinode.md#bits): chunks
** of equal size are one ncclReduceScatter; uneven ones one ncclReduce per
** chunk (root: the chunk's rank) in one NCCL group. */
static int nccl_exchange(collgen_comm_t *c, const collgen__call *call, const collgen__group *g,
                         int base, int size, int r, collgen__nccl_comm_t comm, CUstream s) {
  const int64_t cols = g->shape.cols, esize = collgen__dtype_bytes(call->dtype);
  const collgen__nccl_dtype dt = collgen__nccl_dtype_of(call->dtype);
  const char *in = call->buffers[ROLE_input][r];
  void *out = (void *)call->buffers[ROLE_output][r];
  if (g->shape.rows % size == 0)
    return collgen__nccl_settle(
        comm, collgen__nccl.ncclReduceScatter(in, out, (size_t)(g->shape.rows / size * cols), dt,
                                              COLLGEN__NCCL_SUM, comm, s),
        "ncclReduceScatter", c->timeout_ms, c->err, sizeof c->err);
  int rc = collgen__nccl_fail(collgen__nccl.ncclGroupStart(), "ncclGroupStart", c->err,
                              sizeof c->err);
  for (int k = 0; rc == COLLGEN_OK && k < size; ++k) {
    int64_t start = 0, count = 0;
    collgen__scatter_chunk(g->shape.rows, size, k, &start, &count);
    if (count == 0) continue; /* every rank skips the same empty chunks */
    rc = collgen__nccl_fail(collgen__nccl.ncclReduce(in + start * cols * esize,
                                                     base + k == r ? out : NULL,
                                                     (size_t)(count * cols), dt,
                                                     COLLGEN__NCCL_SUM, k, comm, s),
                            "ncclReduce", c->err, sizeof c->err);
  }
  /* The group is ended whatever failed inside it. */
  const collgen__nccl_result end = collgen__nccl.ncclGroupEnd();
  if (rc == COLLGEN_OK)
    rc = collgen__nccl_settle(comm, end, "ncclGroupEnd", c->timeout_ms, c->err, sizeof c->err);
  return rc;
}

const collgen__op_runtime collgen__rt_reduce_scatter_sum = {
    .op = COLLGEN_OP_REDUCE_SCATTER_SUM,
    .same_buffer_ok = {{-1, -1}},
    .stage_unaligned = 1, /* one process per GPU: unaligned buffers are staged */
    .measure_group = measure_group,
    .fill_rank = fill_rank,
    .nccl_exchange = nccl_exchange, /* no nccl_local: NCCL does it all */
};
