/*
** prepare.c -- loads kernels ahead of the calls that need them
** (collgen_comm_prepare, collgen_comm_prepare_class): loading code into a
** context waits until that device is idle, so a program that must never
** stall on a first call loads while its GPUs are idle. The kernels that
** the cache lacks are compiled first, several at once
** (collgen__generator_build_ahead, COLLGEN_JIT_THREADS).
*/
#include <stdio.h>
#include <stdlib.h>

#include "generator.h"
#include "op_runtime.h"

/* Checks one shape against the communicator; resolves group_size. */
static int check_shape(collgen_comm_t *c, const collgen_shape_t *in, int i, collgen_shape_t *s) {
  *s = *in;
  s->ngpus = c->ndev;
  s->max_blocks = c->max_blocks;
  if (s->group_size == 0) s->group_size = c->ndev;
  if (!collgen__op_runtime_find(s->op))
    return collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_INVALID_ARG,
                         "shape %d: unknown op %d", i, (int)s->op);
  if (s->group_size < 1 || c->ndev % s->group_size != 0)
    return collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_INVALID_ARG,
                         "shape %d: group_size %d does not divide the %d ranks", i,
                         s->group_size, c->ndev);
  int rc = collgen__check_fp8_arch(c, s->fp8); /* the status the call would give */
  if (rc != COLLGEN_OK) return rc;
  /* The planner checks the rest (dtype, sizes, arch) when it plans. */
  collgen_plan_t plan;
  if (collgen_plan(c->gen, s, &plan) != COLLGEN_OK)
    return collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_INVALID_ARG, "shape %d: %s", i,
                         collgen_generator_last_error(c->gen));
  return COLLGEN_OK;
}

/* The group a kernel of prepare's list is loaded for: its first rank and size. */
typedef struct {
  int base, size;
} group_span;

/* The kernels shape s needs on this communicator, one per group whose
** kernel this process loads: the shape as that group runs it (on the NCCL
** route, this rank's local kernel, a group of one; its arch set) in
** shape_out[], its group in span_out[] (at most c->ndev each). Returns
** how many. */
static int group_kernels(const collgen_comm_t *c, const collgen_shape_t *s,
                         collgen_shape_t *shape_out, group_span *span_out) {
  int n = 0;
  for (int base = 0; base < c->ndev; base += s->group_size) {
    group_span g = {base, s->group_size};
    shape_out[n] = *s;
    if (collgen__route_of(c, s->group_size, base) == COLLGEN_TRANSPORT_NCCL) {
      /* NCCL path (op_nccl.c): this rank's local kernel, the op on a group
      ** of one over the same rows and cols; an op whose exchange is the
      ** whole op (no nccl_local) needs none. */
      if (!collgen__op_runtime_find(s->op)->nccl_local || c->self < base ||
          c->self >= base + s->group_size)
        continue;
      shape_out[n].group_size = 1;
      g = (group_span){c->self, 1};
    }
    collgen__group_arch(c, &shape_out[n], g.base);
    span_out[n++] = g;
  }
  return n;
}

int collgen_comm_prepare(collgen_comm_t *c, const collgen_shape_t *shapes, int count) {
  if (!c) return collgen__fail_tls(COLLGEN_ERR_INVALID_ARG, "comm is NULL");
  c->err[0] = 0;
  int rc = collgen__comm_check_errors(c);
  if (rc != COLLGEN_OK) return rc;
  if (count < 0 || (count > 0 && !shapes))
    return collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_INVALID_ARG,
                         "shapes must hold count >= 0 shapes");
  /* Every shape is checked (and planned) once, before anything loads. */
  collgen_shape_t *checked = malloc((size_t)(count ? count : 1) * sizeof *checked);
  if (!checked) return collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_NO_MEMORY, "out of memory");
  for (int i = 0; rc == COLLGEN_OK && i < count; ++i) rc = check_shape(c, &shapes[i], i, &checked[i]);
  collgen_shape_t *kshapes = NULL;
  group_span *spans = NULL;
  int nkernels = 0;
  if (rc == COLLGEN_OK && count > 0) {
    kshapes = malloc((size_t)count * (size_t)c->ndev * sizeof *kshapes);
    spans = malloc((size_t)count * (size_t)c->ndev * sizeof *spans);
    if (!kshapes || !spans)
      rc = collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_NO_MEMORY, "out of memory");
  }
  for (int i = 0; rc == COLLGEN_OK && i < count; ++i)
    nkernels += group_kernels(c, &checked[i], &kshapes[nkernels], &spans[nkernels]);
  free(checked);
  /* The cache misses compile at once on several threads; the loads below
  ** then find every kernel built (and report what failed to build). */
  if (rc == COLLGEN_OK)
    collgen__generator_build_ahead(c->gen, kshapes, nkernels, collgen__param_jit_threads());
  CUfunction fn[COLLGEN_MAX_DEVICES];
  for (int k = 0; rc == COLLGEN_OK && k < nkernels; ++k)
    rc = collgen__group_prepare(c, &kshapes[k], spans[k].base, spans[k].size, fn, NULL);
  free(kshapes);
  free(spans);
  return rc;
}

int collgen_comm_prepare_class(collgen_comm_t *c, const collgen_shape_class_t *cls) {
  if (!c) return collgen__fail_tls(COLLGEN_ERR_INVALID_ARG, "comm is NULL");
  c->err[0] = 0;
  if (!cls)
    return collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_INVALID_ARG, "cls is NULL");
  if (cls->ngpus != c->ndev)
    return collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_INVALID_ARG,
                         "the class is for %d ranks, the communicator has %d", cls->ngpus,
                         c->ndev);
  collgen_shape_class_t local = *cls;
  snprintf(local.arch, sizeof local.arch, "%s", c->arch[c->self < 0 ? 0 : c->self]);
  collgen_shape_t *shapes = NULL;
  int count = 0;
  int rc = collgen_plan_variants(c->gen, &local, &shapes, &count);
  if (rc != COLLGEN_OK) {
    snprintf(c->err, sizeof c->err, "%s", collgen_generator_last_error(c->gen));
    return rc;
  }
  rc = collgen_comm_prepare(c, shapes, count);
  free(shapes);
  return rc;
}
