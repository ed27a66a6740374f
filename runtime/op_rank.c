/*
** op_rank.c -- the one skeleton of the collgen_rank_* entry points (one
** process per GPU, op_runtime.h): this rank's buffers and stream go into
** the op-neutral call at slot c->self, every rank gets the shape, and a
** call larger than half the staging area runs as consecutive pieces that
** every rank cuts alike.
*/
#include <stdint.h>
#include <string.h>

#include "op_runtime.h"
#include "shape.h"

/* This rank's buffers of one call: one array per role with only slot
** `self` set. */
typedef struct {
  const void *at[COLLGEN_MAX_ROLES][COLLGEN_MAX_DEVICES];
} rank_buffers;

/* How a per-rank call that does not fit half the staging area is cut:
** `units` (elements or rows) in all, `piece` per call; role k's buffer
** advances stride[k] bytes per unit (0: the same buffer for every piece,
** as gamma); each piece has shape {len} (inner 0) or {len, inner}. Every
** rank cuts alike, so the pieces give the bits of one call. */
typedef struct {
  int64_t units, piece, inner;
  int64_t stride[COLLGEN_MAX_ROLES];
} collgen__rank_pieces;

static void point_roles(const collgen__op_runtime *rt, collgen__call *call, rank_buffers *rb,
                        int self, const void *const *mine, int64_t units,
                        const collgen__rank_pieces *p) {
  for (int k = 0; k < collgen__op_find(rt->op)->nroles; ++k) {
    rb->at[k][self] = mine[k] && p ? (const char *)mine[k] + units * p->stride[k] : mine[k];
    call->buffers[k] = rb->at[k];
  }
}

/* 1 with *p set to cut a call of op rt whose ranks all hold `shape` into
** pieces of half the staging area, as rt->pieces says, when it exceeds
** that; 0 (one call) when it fits, the op is never cut, or the arguments
** are bad (the driver then reports them). Role 0 is the one peers read. */
static int cut_pieces(collgen_comm_t *c, const collgen__op_runtime *rt, const collgen__call *call,
                      const int64_t *shape, collgen__rank_pieces *p, int *rc) {
  const collgen__op_desc *d = collgen__op_find(rt->op);
  const int rank = call->tensor_rank;
  const int esize = collgen__dtype_bytes(call->dtype);
  int64_t n = 0;
  memset(p, 0, sizeof *p);
  *rc = COLLGEN_OK;
  if (rt->pieces == COLLGEN__PIECES_NONE || c->self < 0 || !shape || rank < 1 || rank > 8 ||
      esize == 0 || collgen__shape_product(shape, 0, rank, &n) != 0 ||
      (uint64_t)n * (uint64_t)esize <= c->staging_bytes / 2)
    return 0;
  if (rt->pieces == COLLGEN__PIECES_ELEMS) {
    for (int k = 0; k < d->nroles; ++k) p->stride[k] = esize;
    p->units = n;
    p->piece = (int64_t)(c->staging_bytes / 2 / 16 * 16) / esize;
    return 1;
  }
  if (rank < 2) return 0;
  const int64_t cols = shape[rank - 1], row_bytes = cols * esize;
  *rc = collgen__stage_fits(c, "one row", (size_t)row_bytes);
  if (*rc != COLLGEN_OK) return 0;
  for (int k = 0; k < d->nroles; ++k) {
    const int64_t elem = d->roles[k].elem_bytes ? d->roles[k].elem_bytes : esize;
    p->stride[k] = (rt->fixed_roles >> k & 1u)     ? 0
                   : (rt->per_row_roles >> k & 1u) ? elem
                                                   : cols * elem;
  }
  p->units = n / cols;
  p->piece = (int64_t)(c->staging_bytes / 2) / row_bytes;
  p->inner = cols;
  return 1;
}

int collgen__rank_run(collgen_comm_t *c, collgen__call *call, const int64_t *shape,
                      const void *const *mine, collgen_stream_t stream) {
  if (!c) return collgen__fail_tls(COLLGEN_ERR_INVALID_ARG, "comm is NULL");
  const collgen__op_runtime *rt = collgen__op_runtime_find(call->op);
  if (!rt)
    return collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_INVALID_ARG, "unknown op %d",
                         (int)call->op);
  const int self = c->self < 0 ? 0 : c->self;
  const int64_t *shapes[COLLGEN_MAX_DEVICES];
  collgen_stream_t streams[COLLGEN_MAX_DEVICES] = {0};
  rank_buffers rb;
  memset(&rb, 0, sizeof rb);
  streams[self] = stream;
  call->streams = streams;
  call->per_rank = 1;
  if (shape) {
    for (int r = 0; r < c->ndev; ++r) shapes[r] = shape;
    call->shapes = shapes;
  }
  point_roles(rt, call, &rb, self, mine, 0, NULL);
  collgen__rank_pieces pieces;
  int rc = COLLGEN_OK;
  if (!cut_pieces(c, rt, call, shape, &pieces, &rc) || pieces.units <= pieces.piece)
    return rc != COLLGEN_OK ? rc : collgen__op_run(c, call);
  /* A registered input must hold the whole call, not just the first pieces. */
  const struct collgen_buffer *reg;
  rc = collgen__registered_find(c, collgen__op_find(rt->op)->roles[0].label, mine[0],
                                (size_t)(pieces.units * pieces.stride[0]), &reg);
  if (rc != COLLGEN_OK) return rc;
  for (int64_t off = 0; off < pieces.units; off += pieces.piece) {
    int64_t piece_shape[2] = {pieces.units - off < pieces.piece ? pieces.units - off
                                                                : pieces.piece,
                              pieces.inner};
    for (int r = 0; r < c->ndev; ++r) shapes[r] = piece_shape;
    call->shapes = shapes;
    call->tensor_rank = pieces.inner ? 2 : 1;
    point_roles(rt, call, &rb, self, mine, off, &pieces);
    rc = collgen__op_run(c, call);
    if (rc != COLLGEN_OK) return rc;
  }
  return COLLGEN_OK;
}
