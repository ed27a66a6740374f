/*
** op_staging.c -- the one-process-per-GPU mode's staging, for every op
** (op_runtime.h, collgen__staging_plan): the staging area of each rank as
** mapped here, the registered inputs that need no copy, and where each
** role of a planned call goes, worked out from the plan's peer_reads and
** peer_writes and the catalog's roles, never from an algorithm's name.
*/
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "op_runtime.h"

void *collgen__staging_at(const collgen_comm_t *c, int r, size_t offset) {
  return (void *)(uintptr_t)(c->staging[r] + offset);
}

int collgen__stage_copy(collgen_comm_t *c, void *dst, const void *src, size_t bytes, CUstream s) {
  if (bytes == 0) return COLLGEN_OK;
  return collgen__cu_fail(collgen__cu.cuMemcpyDtoDAsync((CUdeviceptr)(uintptr_t)dst,
                                                        (CUdeviceptr)(uintptr_t)src, bytes, s),
                          "cuMemcpyDtoDAsync (staging)", c->err, sizeof c->err);
}

int collgen__stage_fits(collgen_comm_t *c, const char *what, size_t bytes) {
  if (bytes <= c->staging_bytes / 2) return COLLGEN_OK;
  return collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_INVALID_ARG,
                       "%s of %zu bytes does not fit half the staging area (staging_bytes %zu); "
                       "create the communicator with staging_bytes >= %zu", what, bytes,
                       c->staging_bytes, 2 * bytes);
}

int collgen__stage_check_aligned(collgen_comm_t *c, const collgen__op_runtime *rt,
                                 const collgen__call *call, const collgen__group *g, int r) {
  const collgen__op_desc *d = collgen__op_find(rt->op);
  for (int k = 0; k < d->nroles; ++k)
    if (g->bytes[k][r] && ((uintptr_t)call->buffers[k][r] & 15u))
      return collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_ALIGNMENT,
                           "%s (%p): calls on a communicator of collgen_comm_init_rank need "
                           "16-byte aligned buffers (every cudaMalloc'd tensor is)",
                           d->roles[k].label, call->buffers[k][r]);
  return COLLGEN_OK;
}

int collgen__registered_input(collgen_comm_t *c, const collgen__op_runtime *rt,
                              const collgen__call *call, const collgen__group *g, int role,
                              int base, int size, int r, const void **at, int *used) {
  const void *p = call->buffers[role][r];
  const struct collgen_buffer *b;
  *used = 0;
  int rc = collgen__registered_find(c, collgen__op_find(rt->op)->roles[role].label, p,
                                    (size_t)g->bytes[role][r], &b);
  if (rc != COLLGEN_OK || !b || ((uintptr_t)p & 15u)) return rc;
  const uintptr_t off = (uintptr_t)p - b->ptr;
  for (int k = 0; at && k < size; ++k) at[base + k] = (const void *)(uintptr_t)(b->at[base + k] + off);
  *used = 1;
  return COLLGEN_OK;
}

static int aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

/* The two regions' fill while st is worked out: bytes used per rank. */
typedef struct {
  size_t used[2][COLLGEN_MAX_DEVICES]; /* [0]: region IN, [1]: region OUT */
  int roles[2][COLLGEN_MAX_DEVICES];   /* how many roles each holds */
  int last[2][COLLGEN_MAX_DEVICES];    /* the last of them */
} region_fill;

/* Places role k of rank q in region `out` (0 IN, 1 OUT) at the region's
** next 16-byte aligned offset: st->at[k][q] points there. */
static void place(collgen_comm_t *c, collgen__staging *st, region_fill *f, int out, int k, int q,
                  size_t bytes) {
  const size_t off = (f->used[out][q] + 15u) / 16u * 16u;
  st->at[k][q] = collgen__staging_at(c, q, (out ? c->staging_bytes / 2 : 0) + off);
  f->used[out][q] = off + bytes;
  f->roles[out][q]++;
  f->last[out][q] = k;
}

static void add_copy(struct collgen__stage_copy_op *list, int *n, void *dst, const void *src,
                     size_t bytes) {
  list[*n].dst = dst;
  list[*n].src = src;
  list[*n].bytes = bytes;
  ++*n;
}

int collgen__staging_plan(collgen_comm_t *c, const collgen__op_runtime *rt,
                          const collgen__call *call, const collgen__group *g,
                          const collgen_plan_t *plan, int base, int size, int r,
                          collgen__staging *st) {
  const collgen__op_desc *d = collgen__op_find(rt->op);
  memset(st, 0, sizeof *st);
  st->view = *call;
  for (int k = 0; k < d->nroles; ++k) {
    if (!call->buffers[k]) continue; /* a role the call leaves out */
    for (int q = base; q < base + size; ++q) st->at[k][q] = call->buffers[k][q];
    st->view.buffers[k] = st->at[k];
  }
  int rc = rt->stage_unaligned ? COLLGEN_OK : collgen__stage_check_aligned(c, rt, call, g, r);
  if (rc != COLLGEN_OK) return rc;
  region_fill f;
  memset(&f, 0, sizeof f);
  unsigned registered = 0;
  /* The roles peers reach, at offsets every rank computes alike. */
  for (int k = 0; k < d->nroles; ++k) {
    const unsigned bit = 1u << k;
    if (!call->buffers[k] || !((plan->peer_reads | plan->peer_writes) & bit)) continue;
    void *mine = (void *)call->buffers[k][r];
    const size_t bytes = (size_t)g->bytes[k][r];
    if (!(plan->peer_writes & bit)) { /* read only: in place when registered */
      int used = 0;
      rc = collgen__registered_input(c, rt, call, g, k, base, size, r, st->at[k], &used);
      if (rc != COLLGEN_OK) return rc;
      if (used) {
        registered |= bit;
        continue;
      }
    }
    /* Read (and maybe written) by peers: region IN; written only: OUT. */
    const int out = !(plan->peer_reads & bit);
    for (int q = base; q < base + size; ++q) place(c, st, &f, out, k, q, (size_t)g->bytes[k][q]);
    if (plan->peer_reads & bit) add_copy(st->in, &st->nin, (void *)st->at[k][r], mine, bytes);
    if (plan->peer_writes & bit) add_copy(st->out, &st->nout, mine, st->at[k][r], bytes);
  }
  /* This rank's own roles: an output the kernel cannot store into in place
  ** (unaligned, or a registered buffer the peers are reading), an input it
  ** cannot load in place (unaligned). */
  for (int k = 0; k < d->nroles; ++k) {
    const unsigned bit = 1u << k;
    if (!call->buffers[k] || ((plan->peer_reads | plan->peer_writes) & bit)) continue;
    const void *mine = call->buffers[k][r];
    const size_t bytes = (size_t)g->bytes[k][r];
    if (bytes == 0) continue;
    int stage = rt->stage_unaligned && !aligned16(mine);
    for (int j = 0; d->roles[k].is_output && j < d->nroles; ++j)
      if ((registered & (1u << j)) && call->buffers[j][r] == mine) stage = 1;
    if (!stage) continue;
    const int out = d->roles[k].is_output;
    place(c, st, &f, out, k, r, bytes);
    if (out)
      add_copy(st->out, &st->nout, (void *)mine, st->at[k][r], bytes);
    else
      add_copy(st->in, &st->nin, (void *)st->at[k][r], mine, bytes);
  }
  for (int out = 0; out < 2; ++out)
    for (int q = base; q < base + size; ++q) {
      if (f.used[out][q] <= c->staging_bytes / 2) continue;
      char what[96];
      if (f.roles[out][q] == 1)
        snprintf(what, sizeof what, "%s", d->roles[f.last[out][q]].label);
      else
        snprintf(what, sizeof what, "what rank %d stages into region %s", q, out ? "OUT" : "IN");
      return collgen__stage_fits(c, what, f.used[out][q]);
    }
  return COLLGEN_OK;
}

int collgen__staging_copies(collgen_comm_t *c, const collgen__staging *st, int when, CUstream s) {
  const struct collgen__stage_copy_op *list = when ? st->out : st->in;
  const int n = when ? st->nout : st->nin;
  int rc = COLLGEN_OK;
  for (int i = 0; rc == COLLGEN_OK && i < n; ++i)
    rc = collgen__stage_copy(c, list[i].dst, list[i].src, list[i].bytes, s);
  return rc;
}
