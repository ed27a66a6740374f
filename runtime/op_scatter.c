/*
** op_scatter.c -- scatter: its runtime descriptor (op_runtime.h; the entry
** points are generated, op_entry_points.c). Every rank of a group gives
** the shape [N, ...] of the root's input; group rank i gets rows chunk i
** of it (collgen__scatter_chunk), bit for bit, in its output [count_i,
** ...]. Roles (COLLGEN_ROLES_SCATTER): input (read on the root only; the
** other ranks' entries may be NULL), output. The root's output may sit in
** its input at its own chunk (in place: nothing to move). Any dtype: the
** op moves bits. Scalar: the root, a group rank. The planner makes a
** group of one a copy.
*/
#include <stdint.h>

#include "op_runtime.h"
#include "shape.h"

enum { COLLGEN_ROLES_SCATTER(COLLGEN_ROLE_ENUM) };
enum { COLLGEN_SCALARS_SCATTER(COLLGEN_SCALAR_ENUM) };

/* Every rank holds the same shape; rank_rows[r] is the elements of r's
** chunk, and the planner sees the largest chunk (group rank 0's). */
static int measure_group(collgen_comm_t *c, const collgen__call *call, int base, int size,
                         collgen__group *g) {
  int64_t n = 0;
  int rc = collgen__group_same_shape(c, call, base, size, &n);
  if (rc != COLLGEN_OK) return rc;
  const int64_t rows = call->shapes[base][0], row = rows ? n / rows : 0;
  const int64_t esize = collgen__dtype_bytes(call->dtype);
  const int root = base + (int)call->scalars[SCALAR_root];
  for (int r = base; r < base + size; ++r) {
    int64_t start = 0, count = 0;
    collgen__scatter_chunk(rows, size, r - base, &start, &count);
    g->rank_rows[r] = count * row;
    g->bytes[ROLE_output][r] = count * row * esize;
    if (r == root) g->inplace_at[r] = start * row * esize;
  }
  g->bytes[ROLE_input][root] = n * esize;
  g->shape.elems = g->rank_rows[base];
  g->empty = n == 0;
  return COLLGEN_OK;
}

/* in[k] (the root's only): group rank k's input; out[k]: its output;
** row_start[k]: the byte offset of chunk k in the root's input
** (row_start[size] = its bytes); root. */
static void fill_rank(const collgen__call *call, const collgen__group *g, int base, int size,
                      int r, collgen__kparams *kp) {
  (void)r;
  collgen__fill_byte_ranges(call, g, base, size, kp);
  kp->root = (unsigned)call->scalars[SCALAR_root];
}

/* NCCL path: the root sends every other rank its chunk and copies its own
** (nothing in place); the others receive theirs; one NCCL group. */
static int nccl_exchange(collgen_comm_t *c, const collgen__call *call, const collgen__group *g,
                         int base, int size, int r, collgen__nccl_comm_t comm, CUstream s) {
  const int root = base + (int)call->scalars[SCALAR_root];
  const int64_t esize = collgen__dtype_bytes(call->dtype);
  const collgen__nccl_dtype dt = collgen__nccl_dtype_of(call->dtype);
  const char *in = call->buffers[ROLE_input][r];
  void *out = (void *)call->buffers[ROLE_output][r];
  int64_t start = 0, own = 0;
  int rc = collgen__nccl_fail(collgen__nccl.ncclGroupStart(), "ncclGroupStart", c->err,
                              sizeof c->err);
  for (int k = base; rc == COLLGEN_OK && k < base + size; ++k) {
    const size_t n = (size_t)g->rank_rows[k];
    if (k == r) own = start;
    if (r == root && k != r && n)
      rc = collgen__nccl_fail(collgen__nccl.ncclSend(in + start * esize, n, dt, k - base, comm, s),
                              "ncclSend", c->err, sizeof c->err);
    if (r != root && k == r && n)
      rc = collgen__nccl_fail(collgen__nccl.ncclRecv(out, n, dt, root - base, comm, s),
                              "ncclRecv", c->err, sizeof c->err);
    start += (int64_t)n;
  }
  /* The group is ended whatever failed inside it. */
  const collgen__nccl_result end = collgen__nccl.ncclGroupEnd();
  if (rc == COLLGEN_OK)
    rc = collgen__nccl_settle(comm, end, "ncclGroupEnd", c->timeout_ms, c->err, sizeof c->err);
  if (rc == COLLGEN_OK && r == root && in + own * esize != (const char *)out)
    rc = collgen__stage_copy(c, out, in + own * esize, (size_t)(g->rank_rows[r] * esize), s);
  return rc;
}

const collgen__op_runtime collgen__rt_scatter = {
    .op = COLLGEN_OP_SCATTER,
    /* the root's output may sit in its input at its chunk (g->inplace_at) */
    .same_buffer_ok = {{ROLE_output, ROLE_input}, {-1, -1}},
    .stage_unaligned = 1, /* one process per GPU: unaligned buffers are staged */
    .pieces = COLLGEN__PIECES_NONE, /* a cut would change every rank's chunk */
    .measure_group = measure_group,
    .fill_rank = fill_rank,
    .nccl_exchange = nccl_exchange, /* no nccl_local: NCCL does it all */
};
