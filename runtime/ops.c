/*
** ops.c -- the public collectives. Each call runs in three steps:
**   1. validate everything (nothing launched, nothing written on error);
**   2. plan every group, fetch its cubin through the cache and load it on
**      every rank's context (load before launch: a kernel spinning on a
**      peer whose host thread is still compiling would deadlock);
**   3. launch every rank on its stream.
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache.h"
#include "comm_internal.h"
#include "reference.h"

typedef struct {
  CUfunction fn[COLLGEN_MAX_DEVICES];   /* per rank */
  int grid, block;
  collgen__kparams kp[COLLGEN_MAX_DEVICES];
  int active[COLLGEN_MAX_DEVICES];      /* rank launches (group non-empty) */
} launch_set;

/* Finds or loads the kernel of cache entry `e` into rank r's context. */
static int load_kernel(collgen_comm_t *c, int r, const collgen__entry *e, CUfunction *fn) {
  for (int i = 0; i < c->nloaded; ++i) {
    if (c->loaded[i].ctx == c->ctx[r] && c->loaded[i].entry == e) {
      *fn = c->loaded[i].fn;
      return COLLGEN_OK;
    }
  }
  if (c->nloaded == c->cap_loaded) {
    int cap = c->cap_loaded ? c->cap_loaded * 2 : 16;
    collgen__loaded *p = realloc(c->loaded, (size_t)cap * sizeof *p);
    if (!p) return collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_NO_MEMORY, "out of memory");
    c->loaded = p;
    c->cap_loaded = cap;
  }
  collgen__loaded *l = &c->loaded[c->nloaded];
  int rc = COLLGEN_OK;
  /* Module loads are not stream work; allow them while a stream captures. */
  CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
  COLLGEN_CU_GOTO(collgen__cu.cuCtxSetCurrent(c->ctx[r]), rc, c->err, sizeof c->err, out);
  collgen__cu.cuThreadExchangeStreamCaptureMode(&mode);
  CUresult lr = collgen__cu.cuModuleLoadData(&l->module, e->cubin);
  collgen__cu.cuThreadExchangeStreamCaptureMode(&mode);
  COLLGEN_CU_GOTO(lr, rc, c->err, sizeof c->err, out);
  CUresult fr = collgen__cu.cuModuleGetFunction(&l->fn, l->module, e->kernel);
  if (fr != CUDA_SUCCESS) {
    collgen__cu.cuModuleUnload(l->module);
    COLLGEN_CU_GOTO(fr, rc, c->err, sizeof c->err, out);
  }
  l->entry = e;
  l->ctx = c->ctx[r];
  *fn = l->fn;
  c->nloaded++;
out:
  return rc;
}

/* Marks the first n launch sets empty. Only `active` needs it: the other
** fields are written before use (kparams by base_params), and clearing all
** eight sets of 2.7 KB each was the largest host cost of a call. */
static void clear_sets(launch_set *sets, int n) {
  for (int i = 0; i < n; ++i) memset(sets[i].active, 0, sizeof sets[i].active);
}

/* Plans `shape` for the ranks [base, base+group) with rank 0's arch, gets
** the cubin and loads it on each of them. */
static int prepare_group(collgen_comm_t *c, collgen_shape_t *shape, int base,
                         int group, launch_set *ls) {
  for (int r = base; r < base + group; ++r)
    if (strcmp(c->arch[r], c->arch[base]) != 0)
      return collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_UNSUPPORTED,
                           "ranks %d and %d of one group have different archs (%s, %s)",
                           base, r, c->arch[base], c->arch[r]);
  _Static_assert(sizeof shape->arch == sizeof c->arch[0], "arch strings differ in size");
  memcpy(shape->arch, c->arch[base], sizeof shape->arch);
  shape->max_blocks = c->max_blocks;
  collgen_plan_t spare;
  const collgen_plan_t *plan = NULL;
  const collgen__entry *entry = NULL;
  int rc = collgen__resolve_kernel(c->gen, shape, &spare, &plan, &entry);
  for (int r = base; rc == COLLGEN_OK && r < base + group; ++r) {
    rc = load_kernel(c, r, entry, &ls->fn[r]);
    ls->active[r] = 1;
  }
  /* CUDA failures already wrote c->err; generator failures are copied. */
  if (rc != COLLGEN_OK && rc != COLLGEN_ERR_CUDA)
    snprintf(c->err, sizeof c->err, "%s", collgen_generator_last_error(c->gen));
  if (rc != COLLGEN_OK) return rc;
  ls->grid = plan->grid;
  ls->block = plan->block;
  return COLLGEN_OK;
}

static int launch_all(collgen_comm_t *c, launch_set *sets, int nsets,
                      const collgen_stream_t *streams) {
  int rc = COLLGEN_OK;
  for (int s = 0; s < nsets; ++s) {
    for (int r = 0; r < c->ndev; ++r) {
      if (!sets[s].active[r]) continue;
      if (c->launch_mask && !(c->launch_mask & (1u << r))) continue;
      void *args[] = {&sets[s].kp[r]};
      COLLGEN_CU_GOTO(collgen__cu.cuCtxSetCurrent(c->ctx[r]), rc, c->err, sizeof c->err, out);
      COLLGEN_CU_GOTO(collgen__cu.cuLaunchKernel(sets[s].fn[r], (unsigned)sets[s].grid, 1, 1,
                                                 (unsigned)sets[s].block, 1, 1, 0,
                                                 (CUstream)streams[r], args, NULL),
                      rc, c->err, sizeof c->err, out);
    }
  }
out:
  return rc;
}

/* Allreduce over groups of one rank is the identity: each rank's input is
** copied to its output on its stream (a copy engine transfer, nothing to
** compile), or nothing is done when it runs in place. */
static int copy_each_rank(collgen_comm_t *c, const void *const *inputs, void *const *outputs,
                          const int64_t *elems, int esize, const collgen_stream_t *streams) {
  int rc = COLLGEN_OK;
  for (int r = 0; r < c->ndev; ++r) {
    size_t bytes = (size_t)elems[r] * (size_t)esize;
    if (bytes == 0 || inputs[r] == outputs[r]) continue;
    if (c->launch_mask && !(c->launch_mask & (1u << r))) continue;
    COLLGEN_CU_GOTO(collgen__cu.cuCtxSetCurrent(c->ctx[r]), rc, c->err, sizeof c->err, out);
    COLLGEN_CU_GOTO(collgen__cu.cuMemcpyDtoDAsync((CUdeviceptr)(uintptr_t)outputs[r],
                                                  (CUdeviceptr)(uintptr_t)inputs[r], bytes,
                                                  (CUstream)streams[r]),
                    rc, c->err, sizeof c->err, out);
  }
out:
  return rc;
}

/* Common checks of both ops; resolves group_size 0 to ndev. */
static int check_call(collgen_comm_t *c, collgen_dtype_t dtype, int rank,
                      const void *shapes, int *group_size, const void *streams) {
  if (!c) return collgen__fail_tls(COLLGEN_ERR_INVALID_ARG, "comm is NULL");
  c->err[0] = 0;
  int rc = collgen__comm_check_errors(c);
  if (rc != COLLGEN_OK) return rc;
  if ((unsigned)dtype > COLLGEN_DTYPE_F32)
    return collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_INVALID_ARG,
                         "unknown dtype %d", (int)dtype);
  if (rank < 1 || rank > 8)
    return collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_INVALID_ARG,
                         "tensor rank must be 1..8, got %d", rank);
  if (!shapes || !streams)
    return collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_INVALID_ARG,
                         "shapes and streams must not be NULL");
  if (*group_size == 0) *group_size = c->ndev;
  if (*group_size < 1 || c->ndev % *group_size != 0)
    return collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_INVALID_ARG,
                         "group_size %d does not divide the %d ranks", *group_size, c->ndev);
  for (int a = 0; a < c->ndev; ++a)
    for (int b = 0; b < c->ndev; ++b)
      if (a / *group_size == b / *group_size && !c->p2p[a][b])
        return collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_NO_P2P,
                             "ranks %d (device %d) and %d (device %d) share a group but "
                             "have no peer access", a, c->devices[a], b, c->devices[b]);
  return COLLGEN_OK;
}

static int check_pointer(collgen_comm_t *c, const void *p, int esize,
                         const char *what, int r, int *aligned16) {
  if (!p)
    return collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_INVALID_ARG,
                         "%s of rank %d is NULL", what, r);
  if ((uintptr_t)p % (uintptr_t)esize)
    return collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_ALIGNMENT,
                         "%s of rank %d (%p) is not aligned to its %d-byte elements",
                         what, r, p, esize);
  if ((uintptr_t)p % 16) *aligned16 = 0;
  return COLLGEN_OK;
}

/* The planner's view of one group of a call: what both ops share. */
static collgen_shape_t group_shape(const collgen_comm_t *c, collgen_op_t op,
                                   collgen_dtype_t dtype, int rank, int group_size,
                                   int aligned16) {
  collgen_shape_t shape;
  collgen_shape_init(&shape, op);
  shape.dtype = dtype;
  shape.ngpus = c->ndev;
  shape.group_size = group_size;
  shape.tensor_rank = rank;
  shape.aligned16 = aligned16;
  return shape;
}

static unsigned long long timeout_ns(const collgen_comm_t *c) {
  return (unsigned long long)c->timeout_ms * 1000000ull;
}

static void base_params(collgen_comm_t *c, collgen__kparams *kp, int base,
                        int group, int r) {
  memset(kp, 0, sizeof *kp);
  for (int g = 0; g < group; ++g) kp->signal[g] = (void *)(uintptr_t)c->signal[base + g];
  kp->error = (unsigned int *)(uintptr_t)(c->errors_dev +
                                          sizeof(unsigned int) * COLLGEN_ERROR_WORDS * (size_t)r);
  kp->timeout_ns = timeout_ns(c);
  kp->rank = (unsigned)(r - base);
  kp->group_base = (unsigned)base;
}

int collgen_allreduce_sum(collgen_comm_t *c, collgen_dtype_t dtype, int rank,
                          const int64_t *const *shapes, const void *const *inputs,
                          void *const *outputs, int group_size,
                          const collgen_stream_t *streams) {
  int rc = check_call(c, dtype, rank, shapes, &group_size, streams);
  if (rc != COLLGEN_OK) return rc;
  if (!inputs || !outputs)
    return collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_INVALID_ARG,
                         "inputs and outputs must not be NULL");
  const int esize = collgen__dtype_bytes(dtype);
  const int ngroups = c->ndev / group_size;
  launch_set sets[COLLGEN_MAX_DEVICES];
  int64_t elems[COLLGEN_MAX_DEVICES];
  int aligned[COLLGEN_MAX_DEVICES], inplace[COLLGEN_MAX_DEVICES];
  clear_sets(sets, ngroups);

  for (int grp = 0; grp < ngroups; ++grp) {
    int base = grp * group_size;
    aligned[grp] = 1;
    inplace[grp] = 0;
    for (int r = base; r < base + group_size; ++r) {
      if (!shapes[r])
        return collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_INVALID_ARG,
                             "shape of rank %d is NULL", r);
      int64_t n = 1;
      for (int k = 0; k < rank; ++k) {
        if (shapes[r][k] < 0)
          return collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_INVALID_ARG,
                               "rank %d: dimension %d is negative", r, k);
        if (r > base && shapes[r][k] != shapes[base][k])
          return collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_INVALID_ARG,
                               "ranks %d and %d share a group but their shapes differ "
                               "in dimension %d (%lld vs %lld)", base, r, k,
                               (long long)shapes[base][k], (long long)shapes[r][k]);
        n *= shapes[r][k];
      }
      elems[grp] = n;
      if (n == 0) continue;
      rc = check_pointer(c, inputs[r], esize, "input", r, &aligned[grp]);
      if (rc == COLLGEN_OK) rc = check_pointer(c, outputs[r], esize, "output", r, &aligned[grp]);
      if (rc != COLLGEN_OK) return rc;
      uintptr_t in = (uintptr_t)inputs[r], out = (uintptr_t)outputs[r];
      size_t bytes = (size_t)n * (size_t)esize;
      if (in == out) inplace[grp] = 1;
      else if (in < out + bytes && out < in + bytes)
        return collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_INVALID_ARG,
                             "rank %d: output partially overlaps input (only exact "
                             "in-place is allowed)", r);
    }
  }
  if (group_size == 1) /* every rank was checked above; group g is rank g */
    return copy_each_rank(c, inputs, outputs, elems, esize, streams);
  for (int grp = 0; grp < ngroups; ++grp) {
    int base = grp * group_size;
    if (elems[grp] == 0) continue;
    collgen_shape_t shape =
        group_shape(c, COLLGEN_OP_ALLREDUCE_SUM, dtype, rank, group_size, aligned[grp]);
    shape.elems = elems[grp];
    shape.inplace = inplace[grp];
    rc = prepare_group(c, &shape, base, group_size, &sets[grp]);
    if (rc != COLLGEN_OK) return rc;
    for (int r = base; r < base + group_size; ++r) {
      collgen__kparams *kp = &sets[grp].kp[r];
      base_params(c, kp, base, group_size, r);
      for (int g = 0; g < group_size; ++g) {
        kp->in[g] = inputs[base + g];
        kp->out[g] = outputs[base + g];
      }
      kp->count = (unsigned long long)elems[grp];
    }
  }
  return launch_all(c, sets, ngroups, streams);
}

int collgen_allgather_rmsnorm(collgen_comm_t *c, collgen_dtype_t dtype, int rank,
                              const int64_t *const *shard_shapes,
                              const void *const *inputs, void *const *out_normed,
                              void *const *out_residual, const void *const *gammas,
                              float eps, float weight_offset, int group_size,
                              const collgen_stream_t *streams) {
  int rc = check_call(c, dtype, rank, shard_shapes, &group_size, streams);
  if (rc != COLLGEN_OK) return rc;
  if (rank < 2)
    return collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_INVALID_ARG,
                         "allgather_rmsnorm needs tensors of rank >= 2 ([rows, cols])");
  if (!inputs || !out_normed || !out_residual || !gammas)
    return collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_INVALID_ARG,
                         "inputs, outputs and gammas must not be NULL");
  if (!(eps >= 0.0f) || !isfinite(eps) || !isfinite(weight_offset))
    return collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_INVALID_ARG,
                         "eps must be finite and >= 0, weight_offset finite");
  const int esize = collgen__dtype_bytes(dtype);
  const int ngroups = c->ndev / group_size;
  launch_set sets[COLLGEN_MAX_DEVICES];
  int64_t rows[COLLGEN_MAX_DEVICES], total[COLLGEN_MAX_DEVICES], cols[COLLGEN_MAX_DEVICES];
  int aligned[COLLGEN_MAX_DEVICES];
  clear_sets(sets, ngroups);

  for (int grp = 0; grp < ngroups; ++grp) {
    int base = grp * group_size;
    aligned[grp] = 1;
    total[grp] = 0;
    for (int r = base; r < base + group_size; ++r) {
      const int64_t *s = shard_shapes[r];
      if (!s)
        return collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_INVALID_ARG,
                             "shard shape of rank %d is NULL", r);
      rows[r] = 1;
      for (int k = 0; k < rank; ++k) {
        if (s[k] < 0)
          return collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_INVALID_ARG,
                               "rank %d: dimension %d is negative", r, k);
        if (k > 0 && r > base && s[k] != shard_shapes[base][k])
          return collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_INVALID_ARG,
                               "ranks %d and %d share a group but their shards differ "
                               "in dimension %d (only dimension 0 may differ)", base, r, k);
        if (k < rank - 1) rows[r] *= s[k];
      }
      cols[grp] = s[rank - 1];
      total[grp] += rows[r];
    }
    if (cols[grp] == 0) total[grp] = 0;
    if (total[grp] == 0) continue;
    for (int r = base; r < base + group_size; ++r) {
      if (rows[r] > 0) rc = check_pointer(c, inputs[r], esize, "input", r, &aligned[grp]);
      if (rc == COLLGEN_OK) rc = check_pointer(c, out_normed[r], esize, "normed output", r, &aligned[grp]);
      if (rc == COLLGEN_OK) rc = check_pointer(c, out_residual[r], esize, "residual output", r, &aligned[grp]);
      if (rc == COLLGEN_OK) rc = check_pointer(c, gammas[r], esize, "gamma", r, &aligned[grp]);
      if (rc != COLLGEN_OK) return rc;
      if (out_normed[r] == out_residual[r])
        return collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_INVALID_ARG,
                             "rank %d: normed and residual outputs are the same buffer", r);
    }
  }
  /* The kernel sees weight_offset as the dtype holds it. */
  float offset = collgen__ref_round(dtype, weight_offset);
  for (int grp = 0; grp < ngroups; ++grp) {
    int base = grp * group_size;
    if (total[grp] == 0) continue;
    collgen_shape_t shape =
        group_shape(c, COLLGEN_OP_ALLGATHER_RMSNORM, dtype, rank, group_size, aligned[grp]);
    shape.rows = total[grp];
    shape.cols = cols[grp];
    rc = prepare_group(c, &shape, base, group_size, &sets[grp]);
    if (rc != COLLGEN_OK) return rc;
    for (int r = base; r < base + group_size; ++r) {
      collgen__kparams *kp = &sets[grp].kp[r];
      base_params(c, kp, base, group_size, r);
      unsigned long long start = 0;
      for (int g = 0; g < 9; ++g) {
        kp->row_start[g] = start;
        if (g < group_size) {
          kp->in[g] = inputs[base + g];
          start += (unsigned long long)rows[base + g];
        }
      }
      kp->normed = out_normed[r];
      kp->residual = out_residual[r];
      kp->gamma = gammas[r];
      kp->count = (unsigned long long)total[grp];
      kp->eps = eps;
      kp->weight_offset = offset;
    }
  }
  return launch_all(c, sets, ngroups, streams);
}
