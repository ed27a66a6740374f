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

static void point_roles(const collgen__op_runtime *rt, collgen__call *call, rank_buffers *rb,
                        int self, const void *const *mine, int64_t units,
                        const collgen__rank_pieces *p) {
  for (int k = 0; k < collgen__op_find(rt->op)->nroles; ++k) {
    const int absent = !mine[k] && (call->unused_roles & (1u << k));
    rb->at[k][self] = mine[k] && p ? (const char *)mine[k] + units * p->stride[k] : mine[k];
    call->buffers[k] = absent ? NULL : rb->at[k];
  }
}

int collgen__rank_run(collgen_comm_t *c, collgen__call *call, const int64_t *shape,
                      const void *const *mine, collgen_stream_t stream,
                      const collgen__rank_pieces *pieces) {
  if (!c) return collgen__fail_tls(COLLGEN_ERR_INVALID_ARG, "comm is NULL");
  const collgen__op_runtime *rt = collgen__op_runtime_find(call->op);
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
  if (!pieces || pieces->units <= pieces->piece) return collgen__op_run(c, call);
  /* A registered input must hold the whole call, not just the first pieces. */
  const struct collgen_buffer *reg;
  const int pr = pieces->peer_role;
  int rc = collgen__registered_find(c, collgen__op_find(rt->op)->roles[pr].label, mine[pr],
                                    (size_t)(pieces->units * pieces->stride[pr]), &reg);
  if (rc != COLLGEN_OK) return rc;
  for (int64_t off = 0; off < pieces->units; off += pieces->piece) {
    int64_t piece_shape[2] = {pieces->units - off < pieces->piece ? pieces->units - off
                                                                  : pieces->piece,
                              pieces->inner};
    for (int r = 0; r < c->ndev; ++r) shapes[r] = piece_shape;
    call->shapes = shapes;
    call->tensor_rank = pieces->inner ? 2 : 1;
    point_roles(rt, call, &rb, self, mine, off, pieces);
    rc = collgen__op_run(c, call);
    if (rc != COLLGEN_OK) return rc;
  }
  return COLLGEN_OK;
}

int collgen__rank_elem_pieces(const collgen_comm_t *c, collgen_dtype_t dtype,
                              const int64_t *shape, int rank, int input_role, int output_role,
                              collgen__rank_pieces *p) {
  int64_t n = 0;
  const int esize = collgen__dtype_bytes(dtype);
  memset(p, 0, sizeof *p);
  if (!c || c->self < 0 || !shape || rank < 1 || rank > 8 || esize == 0 ||
      collgen__shape_product(shape, 0, rank, &n) != 0 ||
      (uint64_t)n * (uint64_t)esize <= c->staging_bytes / 2)
    return 0;
  p->peer_role = input_role;
  p->stride[input_role] = p->stride[output_role] = esize;
  p->units = n;
  p->piece = (int64_t)(c->staging_bytes / 2 / 16 * 16) / esize;
  return 1;
}
