/*
** op_launch.c -- the steps of a call that the op driver (op_driver.c) and
** its NCCL path (op_nccl.c) share, below both: the planner's view of a
** group, planning and loading a group's kernel on its ranks, the
** parameters every kernel takes, and the launch of one rank.
*/
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "generator.h"
#include "op_runtime.h"

void collgen__common_shape(const collgen_comm_t *c, const collgen__call *call, collgen_shape_t *s) {
  collgen_shape_init(s, call->op);
  s->dtype = call->dtype;
  s->ngpus = c->ndev;
  s->group_size = call->group_size;
  s->tensor_rank = call->tensor_rank;
  s->aligned16 = 1;
  s->max_blocks = c->max_blocks;
}

void collgen__group_arch(const collgen_comm_t *c, collgen_shape_t *shape, int base) {
  _Static_assert(sizeof shape->arch == sizeof c->arch[0], "arch strings differ in size");
  memcpy(shape->arch, c->arch[base], sizeof shape->arch);
}

int collgen__group_prepare(collgen_comm_t *c, collgen_shape_t *shape, int base, int size,
                           CUfunction *fn, collgen_plan_t *plan_out) {
  for (int r = base; r < base + size; ++r)
    if (strcmp(c->arch[r], c->arch[base]) != 0)
      return collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_UNSUPPORTED,
                           "ranks %d and %d of one group have different archs (%s, %s)",
                           base, r, c->arch[base], c->arch[r]);
  collgen__group_arch(c, shape, base);
  collgen_plan_t spare;
  const collgen_plan_t *plan = &spare;
  const struct collgen__entry *entry = NULL;
  int rc = collgen_plan(c->gen, shape, &spare); /* memoized: the kernel's lookup repeats it */
  if (rc == COLLGEN_OK && spare.copy_from < 0)
    rc = collgen__resolve_kernel(c->gen, shape, &spare, &plan, &entry);
  if (rc != COLLGEN_OK) {
    snprintf(c->err, sizeof c->err, "%s", collgen_generator_last_error(c->gen));
    return rc;
  }
  for (int r = base; entry && r < base + size; ++r) {
    if (!collgen__comm_is_local(c, r)) continue; /* another process loads it */
    rc = collgen__kernel_load(c, r, entry, &fn[r]);
    if (rc != COLLGEN_OK) return rc;
  }
  if (plan_out) *plan_out = *plan;
  return COLLGEN_OK;
}

void collgen__common_params(const collgen_comm_t *c, int base, int size, int r,
                            collgen__kparams *kp) {
  memset(kp, 0, sizeof *kp);
  for (int g = 0; g < size; ++g) kp->signal[g] = (void *)(uintptr_t)c->signal[base + g];
  kp->error = (unsigned int *)(uintptr_t)(c->errors_dev +
                                          sizeof(unsigned int) * COLLGEN_STATUS_WORDS * (size_t)r);
  kp->timeout_ns = (unsigned long long)c->timeout_ms * 1000000ull;
  kp->rank = (unsigned)(r - base);
  kp->group_base = (unsigned)base;
}

int collgen__launch(collgen_comm_t *c, CUfunction fn, int grid, int block,
                    const collgen__kparams *kp, int r, CUstream stream) {
  int rc = COLLGEN_OK;
  if (c->launch_mask && !(c->launch_mask & (1u << r))) return COLLGEN_OK;
  void *args[] = {(void *)kp};
  COLLGEN_CU_GOTO(collgen__cu.cuCtxSetCurrent(c->ctx[r]), rc, c->err, sizeof c->err, out);
  if (!c->pdl) {
    COLLGEN_CU_GOTO(collgen__cu.cuLaunchKernel(fn, (unsigned)grid, 1, 1, (unsigned)block, 1, 1, 0,
                                               stream, args, NULL),
                    rc, c->err, sizeof c->err, out);
  } else { /* programmatic dependent launch (docs/api.md, options.pdl) */
    CUlaunchAttribute attr;
    memset(&attr, 0, sizeof attr);
    attr.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attr.value.programmaticStreamSerializationAllowed = 1;
    CUlaunchConfig cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.gridDimX = (unsigned)grid;
    cfg.gridDimY = cfg.gridDimZ = 1;
    cfg.blockDimX = (unsigned)block;
    cfg.blockDimY = cfg.blockDimZ = 1;
    cfg.hStream = stream;
    cfg.attrs = &attr;
    cfg.numAttrs = 1;
    COLLGEN_CU_GOTO(collgen__cu.cuLaunchKernelEx(&cfg, fn, args, NULL), rc, c->err,
                    sizeof c->err, out);
  }
out:
  return rc;
}
