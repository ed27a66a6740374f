/*
** op_driver.c -- the one call skeleton every op runs through (see
** op_runtime.h): validate every group, plan each group and load its kernel
** on every rank, fill each rank's parameters, launch every rank.
*/
#include <stdio.h>
#include <string.h>

#include "generator.h"
#include "op_runtime.h"
#include "shape.h"

/* One group's launch: kernel per rank, the plan (grid, block, what the
** runtime must do), parameters, and (one process per GPU) the staging of
** this process's rank. */
typedef struct {
  CUfunction fn[COLLGEN_MAX_DEVICES];
  collgen_plan_t plan;
  collgen__kparams kp[COLLGEN_MAX_DEVICES];
  collgen__staging stage;
} launch_set;

static const collgen__op_runtime *const runtimes[] = {
#define RT_ENTRY(NAME, value, id, tpl, min_rank, computes, fp8) [value] = &collgen__rt_##id,
    COLLGEN_OP_MAP(RT_ENTRY)
#undef RT_ENTRY
};

const collgen__op_runtime *collgen__op_runtime_find(collgen_op_t op) {
  if ((unsigned)op >= sizeof runtimes / sizeof runtimes[0]) return NULL;
  return runtimes[op];
}

/* Checks shared by every op; resolves group_size 0 to the rank count. */
static int check_call(collgen_comm_t *c, collgen__call *call) {
  const collgen__op_desc *op = collgen__op_find(call->op);
  if (!collgen__dtype_find(call->dtype))
    return collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_INVALID_ARG,
                         "unknown dtype %d", (int)call->dtype);
  if (call->tensor_rank < op->min_rank || call->tensor_rank > 8)
    return collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_INVALID_ARG,
                         "%s needs tensor rank %d..8, got %d", op->name, op->min_rank,
                         call->tensor_rank);
  if (!call->shapes || !call->streams)
    return collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_INVALID_ARG,
                         "shapes and streams must not be NULL");
  int rc = collgen__check_arguments(c, call);
  if (rc != COLLGEN_OK) return rc;
  for (int r = 0; r < c->ndev; ++r)
    if (!call->shapes[r])
      return collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_INVALID_ARG,
                           "shape of rank %d is NULL", r);
  int gs = call->group_size == 0 ? c->ndev : call->group_size;
  if (gs < 1 || c->ndev % gs != 0)
    return collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_INVALID_ARG,
                         "group_size %d does not divide the %d ranks", call->group_size,
                         c->ndev);
  call->group_size = gs;
  if (op->computes && !collgen__dtype_reduces(call->dtype)) {
    /* The planner's refusal (gen/planner.lua check_common), word for word
    ** as collgen_plan gives it (test_hostpath checks that the two agree),
    ** made here for the paths that plan nothing too (a group of one's
    ** copy, NCCL, an empty tensor). */
    char names[256] = "";
    for (int i = 0, n = 0; i < collgen__op_count() && n < (int)sizeof names; ++i)
      if (!collgen__op_at(i)->computes)
        n += snprintf(names + n, sizeof names - (size_t)n, "%s%s", n ? ", " : "",
                      collgen__op_at(i)->name);
    return collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_INVALID_ARG,
                         "planner: %s computes on elements: %s is a copy-only dtype (only "
                         "the ops that move bits take it: %s)",
                         op->name, collgen__dtype_find(call->dtype)->name,
                         names[0] ? names : "none yet");
  }
  for (int a = 0; a < c->ndev; ++a)
    for (int b = 0; b < c->ndev; ++b)
      if (a / gs == b / gs && !c->p2p[a][b] &&
          collgen__route_of(c, gs, a / gs * gs) == COLLGEN_TRANSPORT_P2P)
        return collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_NO_P2P,
                             "ranks %d (device %d) and %d (device %d) share a group but "
                             "have no peer access%s", a, c->devices[a], b, c->devices[b],
                             c->host[a] != c->host[b] ? " (they are on different hosts; the "
                                                        "transport is forced to p2p)" : "");
  return COLLGEN_OK;
}

int collgen__group_same_shape(collgen_comm_t *c, const collgen__call *call, int base, int size,
                              int64_t *elems) {
  const int64_t *first = call->shapes[base];
  for (int r = base; r < base + size; ++r) {
    const int64_t *s = call->shapes[r];
    int bad = collgen__shape_product(s, 0, call->tensor_rank, elems);
    if (bad)
      return collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_INVALID_ARG,
                           "rank %d: shape %s", r,
                           bad == -1 ? "has a negative dimension"
                                     : "has more than COLLGEN_MAX_ELEMS (2^40) elements");
    for (int k = 0; k < call->tensor_rank; ++k)
      if (s[k] != first[k])
        return collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_INVALID_ARG,
                             "ranks %d and %d share a group but their shapes differ "
                             "in dimension %d (%lld vs %lld)", base, r, k,
                             (long long)first[k], (long long)s[k]);
  }
  return COLLGEN_OK;
}

/* 1 when roles (a, b) are a same_buffer_ok pair as declared (a inside b),
** -1 when declared the other way (b inside a), 0 when they are none. */
static int same_buffer_ok(const collgen__op_runtime *rt, int a, int b) {
  for (int i = 0; i < 4 && rt->same_buffer_ok[i][0] >= 0; ++i) {
    if (rt->same_buffer_ok[i][0] == a && rt->same_buffer_ok[i][1] == b) return 1;
    if (rt->same_buffer_ok[i][0] == b && rt->same_buffer_ok[i][1] == a) return -1;
  }
  return 0;
}

/* Checks rank r's buffers: set where used, aligned to the element, and no
** two of them overlapping where one is written (except exact in place
** where the op allows it). Clears g->shape.aligned16 for any pointer that
** is not 16-byte aligned. */
static int check_rank_buffers(collgen_comm_t *c, const collgen__op_runtime *rt,
                              const collgen__call *call, collgen__group *g, int r) {
  const collgen__op_desc *d = collgen__op_find(rt->op);
  const collgen__role_desc *roles = d->roles;
  for (int k = 0; k < d->nroles; ++k) {
    if (g->bytes[k][r] == 0) continue;
    const uintptr_t esize = (uintptr_t)(roles[k].elem_bytes
                                            ? roles[k].elem_bytes
                                            : collgen__dtype_bytes(call->dtype));
    uintptr_t p = (uintptr_t)call->buffers[k][r];
    if (!p)
      return collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_INVALID_ARG,
                           "%s of rank %d is NULL", roles[k].label, r);
    if (p % esize)
      return collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_ALIGNMENT,
                           "%s of rank %d (%p) is not aligned to its %d-byte elements",
                           roles[k].label, r, call->buffers[k][r], (int)esize);
    if (p % 16) g->shape.aligned16 = 0;
  }
  for (int a = 0; a < d->nroles; ++a)
    for (int b = a + 1; b < d->nroles; ++b) {
      if (!roles[a].is_output && !roles[b].is_output) continue;
      if (g->bytes[a][r] == 0 || g->bytes[b][r] == 0) continue;
      uintptr_t pa = (uintptr_t)call->buffers[a][r], pb = (uintptr_t)call->buffers[b][r];
      uintptr_t ea = pa + (uintptr_t)g->bytes[a][r], eb = pb + (uintptr_t)g->bytes[b][r];
      const int pair = same_buffer_ok(rt, a, b); /* the first of a pair sits inside */
      const uintptr_t inner = pair > 0 ? pa : pb, outer = pair > 0 ? pb : pa;
      const uintptr_t inner_end = pair > 0 ? ea : eb, outer_end = pair > 0 ? eb : ea;
      if (pair && inner == outer + (uintptr_t)g->inplace_at[r] && inner_end <= outer_end)
        continue;
      if (pa < eb && pb < ea)
        return collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_INVALID_ARG,
                             "rank %d: %s [%p, +%lld bytes) %s %s [%p, +%lld bytes)%s", r,
                             roles[a].label, call->buffers[a][r], (long long)g->bytes[a][r],
                             pa == pb ? "is the same buffer as" : "partially overlaps",
                             roles[b].label, call->buffers[b][r], (long long)g->bytes[b][r],
                             same_buffer_ok(rt, a, b) ? " (only exact in-place is allowed)"
                                                      : "");
    }
  return COLLGEN_OK;
}

/* Rank r of a group whose plan is a copy (the op is the identity there):
** a copy-engine transfer of role plan->copy_from into plan->copy_to on the
** rank's stream, or nothing when it runs in place. */
static int copy_rank(collgen_comm_t *c, const collgen_plan_t *plan, const collgen__call *call,
                     const collgen__group *g, int r) {
  int rc = COLLGEN_OK;
  const void *src = call->buffers[plan->copy_from][r];
  void *dst = (void *)call->buffers[plan->copy_to][r];
  size_t bytes = (size_t)g->bytes[plan->copy_from][r];
  if (bytes == 0 || src == dst) return COLLGEN_OK;
  if (c->launch_mask && !(c->launch_mask & (1u << r))) return COLLGEN_OK;
  COLLGEN_CU_GOTO(collgen__cu.cuCtxSetCurrent(c->ctx[r]), rc, c->err, sizeof c->err, out);
  COLLGEN_CU_GOTO(collgen__cu.cuMemcpyDtoDAsync((CUdeviceptr)(uintptr_t)dst,
                                                (CUdeviceptr)(uintptr_t)src, bytes,
                                                (CUstream)call->streams[r]),
                  rc, c->err, sizeof c->err, out);
out:
  return rc;
}

int collgen__op_run(collgen_comm_t *c, collgen__call *call) {
  if (!c) return collgen__fail_tls(COLLGEN_ERR_INVALID_ARG, "comm is NULL");
  c->err[0] = 0;
  int rc = collgen__comm_check_errors(c);
  if (rc != COLLGEN_OK) return rc;
  const collgen__op_runtime *rt = collgen__op_runtime_find(call->op);
  if (!rt)
    return collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_INVALID_ARG, "unknown op %d",
                         (int)call->op);
  if (call->per_rank != (c->self >= 0))
    return collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_INVALID_ARG,
                         call->per_rank ? "this communicator drives every rank "
                                          "(collgen_comm_create): call the op without rank_"
                                        : "this communicator drives one rank of a "
                                          "multi-process job (collgen_comm_init_rank): "
                                          "call collgen_rank_* instead");
  rc = check_call(c, call);
  if (rc != COLLGEN_OK) return rc;

  /* 1. Validate every group before anything is loaded or launched. */
  const int size = call->group_size, ngroups = c->ndev / size;
  collgen__group groups[COLLGEN_MAX_DEVICES];
  for (int grp = 0; grp < ngroups; ++grp) {
    collgen__group *g = &groups[grp];
    const int base = grp * size;
    memset(g->bytes, 0, sizeof g->bytes);
    memset(g->inplace_at, 0, sizeof g->inplace_at);
    g->empty = 0;
    collgen__common_shape(c, call, &g->shape);
    rc = rt->measure_group(c, call, base, size, g);
    const int op_aligned16 = g->shape.aligned16; /* an op may clear it (offsets) */
    for (int r = base; rc == COLLGEN_OK && !g->empty && r < base + size; ++r)
      if (collgen__comm_is_local(c, r)) rc = check_rank_buffers(c, rt, call, g, r);
    if (rc != COLLGEN_OK) return rc;
    if (call->per_rank) {
      /* The peers' buffers are unknown here, so every rank plans the same
      ** aligned (unless measure_group said otherwise from the shape alone),
      ** not-in-place call; the staging (op_staging.c) makes this rank's
      ** buffers fit. */
      g->shape.aligned16 = op_aligned16;
      g->shape.inplace = 0;
    } else if (!g->empty && rt->finish_group) {
      rt->finish_group(call, base, size, g);
    }
  }
  /* This process's rank's group, routed to NCCL (only one process per GPU
  ** routes any group there): the rank's part is all there is to run. */
  if (c->self >= 0 && collgen__route_of(c, size, c->self / size * size) == COLLGEN_TRANSPORT_NCCL) {
    const int grp = c->self / size;
    if (groups[grp].empty) return COLLGEN_OK;
    return collgen__nccl_group_run(c, rt, call, &groups[grp], grp * size, size);
  }
  /* 2. Plan and load every group on every rank (no kernel where the plan
  ** is a copy), work out the staging of this process's rank (one process
  ** per GPU: the plan says which roles peers reach) and fill the
  ** parameters. Nothing is queued yet. */
  launch_set sets[COLLGEN_MAX_DEVICES];
  for (int grp = 0; grp < ngroups; ++grp) {
    if (groups[grp].empty) continue;
    const int base = grp * size;
    launch_set *set = &sets[grp];
    rc = collgen__group_prepare(c, &groups[grp].shape, base, size, set->fn, &set->plan);
    if (rc != COLLGEN_OK) return rc;
    if (set->plan.copy_from >= 0) continue;
    for (int r = base; r < base + size; ++r) {
      if (!collgen__comm_is_local(c, r)) continue;
      const collgen__call *view = call;
      if (call->per_rank) {
        rc = collgen__staging_plan(c, rt, call, &groups[grp], &set->plan, base, size, r,
                                   &set->stage);
        if (rc != COLLGEN_OK) return rc;
        view = &set->stage.view;
      }
      collgen__common_params(c, base, size, r, &set->kp[r]);
      rt->fill_rank(view, &groups[grp], base, size, r, &set->kp[r]);
    }
  }

  /* 3. Copy or launch every local rank (between its staging copies in the
  ** one-process-per-GPU mode). */
  for (int grp = 0; grp < ngroups; ++grp) {
    if (groups[grp].empty) continue;
    const int base = grp * size;
    const launch_set *set = &sets[grp];
    for (int r = base; rc == COLLGEN_OK && r < base + size; ++r) {
      if (!collgen__comm_is_local(c, r)) continue;
      if (set->plan.copy_from >= 0) {
        rc = copy_rank(c, &set->plan, call, &groups[grp], r);
        continue;
      }
      CUstream s = (CUstream)call->streams[r];
      if (call->per_rank) {
        rc = collgen__cu_fail(collgen__cu.cuCtxSetCurrent(c->ctx[r]), "cuCtxSetCurrent", c->err,
                              sizeof c->err);
        if (rc == COLLGEN_OK) rc = collgen__staging_copies(c, &set->stage, 0, s);
      }
      if (rc == COLLGEN_OK)
        rc = collgen__launch(c, set->fn[r], set->plan.grid, set->plan.block, &set->kp[r], r, s);
      if (rc == COLLGEN_OK && call->per_rank) rc = collgen__staging_copies(c, &set->stage, 1, s);
    }
    if (rc != COLLGEN_OK) return rc;
  }
  return COLLGEN_OK;
}
