/*
** op_all_gather.c -- all-gather: its runtime descriptor (op_runtime.h;
** the entry points are generated, op_entry_points.c). Roles (COLLGEN_ROLES_ALL_GATHER): the rank's
** shard (input) and the gathered output; the input may sit at its own
** offset in the output (in place). Any dtype: the op moves bits. The
** planner makes a group of one a copy (nothing when in place).
*/
#include <stdint.h>

#include "op_runtime.h"
#include "shape.h"

enum { COLLGEN_ROLES_ALL_GATHER(COLLGEN_ROLE_ENUM) };

/* Shards may differ in their first dimension only (it may be 0). Rank r's
** shard has rank_rows[r] elements; the planner sees the gathered elements.
** In place, a shard sits at the bytes of the shards before it. */
static int measure_group(collgen_comm_t *c, const collgen__call *call, int base, int size,
                         collgen__group *g) {
  const int64_t *first = call->shapes[base];
  int64_t total = 0;
  const int64_t esize = collgen__dtype_bytes(call->dtype);
  for (int r = base; r < base + size; ++r) {
    const int64_t *s = call->shapes[r];
    int64_t elems = 0;
    int bad = collgen__shape_product(s, 0, call->tensor_rank, &elems);
    if (bad)
      return collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_INVALID_ARG,
                           "rank %d: shard shape %s", r,
                           bad == -1 ? "has a negative dimension"
                                     : "has more than COLLGEN_MAX_ELEMS (2^40) elements");
    for (int k = 1; k < call->tensor_rank; ++k)
      if (s[k] != first[k])
        return collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_INVALID_ARG,
                             "ranks %d and %d share a group but their shards differ "
                             "in dimension %d (only dimension 0 may differ)", base, r, k);
    g->rank_rows[r] = elems;
    g->inplace_at[r] = total * esize;
    total += elems; /* at most 8 x 2^40: no overflow */
  }
  if (total > COLLGEN_MAX_ELEMS)
    return collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_INVALID_ARG,
                         "group of rank %d: the gathered tensor has more than "
                         "COLLGEN_MAX_ELEMS (2^40) elements", base);
  g->shape.elems = total;
  g->empty = total == 0;
  for (int r = base; !g->empty && r < base + size; ++r) {
    g->bytes[ROLE_input][r] = g->rank_rows[r] * esize;
    g->bytes[ROLE_output][r] = total * esize;
  }
  return COLLGEN_OK;
}

void collgen__fill_byte_ranges(const collgen__call *call, const collgen__group *g, int base,
                               int size, collgen__kparams *kp) {
  const unsigned long long esize = (unsigned long long)collgen__dtype_bytes(call->dtype);
  unsigned long long start = 0;
  for (int k = 0; k <= COLLGEN_MAX_DEVICES; ++k) {
    kp->row_start[k] = start;
    if (k < size) {
      kp->in[k] = call->buffers[ROLE_input][base + k];
      kp->out[k] = (void *)call->buffers[ROLE_output][base + k];
      start += (unsigned long long)g->rank_rows[base + k] * esize;
    }
  }
  kp->count = start;
}

/* in[k]: group rank k's shard; out[k]: its output; row_start[k]: the byte
** offset of shard k in the output (row_start[size] = the gathered bytes). */
static void fill_rank(const collgen__call *call, const collgen__group *g, int base, int size,
                      int r, collgen__kparams *kp) {
  (void)r;
  collgen__fill_byte_ranges(call, g, base, size, kp);
}

/* NCCL path: the exchange is the whole op (collgen__nccl_gather). */
static int nccl_exchange(collgen_comm_t *c, const collgen__call *call, const collgen__group *g,
                         int base, int size, int r, collgen__nccl_comm_t comm, CUstream s) {
  return collgen__nccl_gather(c, call->dtype, g->rank_rows, 1, base, size, r,
                              call->buffers[ROLE_input][r],
                              (void *)call->buffers[ROLE_output][r], comm, s);
}

const collgen__op_runtime collgen__rt_all_gather = {
    .op = COLLGEN_OP_ALL_GATHER,
    .same_buffer_ok = {{ROLE_input, ROLE_output}, {-1, -1}}, /* at g->inplace_at */
    .stage_unaligned = 1, /* one process per GPU: unaligned buffers are staged */
    .measure_group = measure_group,
    .fill_rank = fill_rank,
    .nccl_exchange = nccl_exchange, /* no nccl_local: NCCL does it all */
};
