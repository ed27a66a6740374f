/*
** op_staging.c -- what the ops share for the one-process-per-GPU mode
** (op_runtime.h, stage_in / stage_out): the staging area of each rank as
** mapped here, the stream-ordered copies into and out of it, and the
** registered inputs that need no copy.
*/
#include <stdint.h>
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
  for (int k = 0; k < rt->nroles; ++k)
    if (g->bytes[k][r] && ((uintptr_t)call->buffers[k][r] & 15u))
      return collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_ALIGNMENT,
                           "%s (%p): calls on a communicator of collgen_comm_init_rank need "
                           "16-byte aligned buffers (every cudaMalloc'd tensor is)",
                           rt->roles[k].name, call->buffers[k][r]);
  return COLLGEN_OK;
}

int collgen__registered_input(collgen_comm_t *c, const collgen__op_runtime *rt,
                              const collgen__call *call, const collgen__group *g, int role,
                              int base, int size, int r, collgen__kparams *kp, int *used) {
  const void *p = call->buffers[role][r];
  const struct collgen_buffer *b;
  *used = 0;
  int rc = collgen__registered_find(c, rt->roles[role].name, p, (size_t)g->bytes[role][r], &b);
  if (rc != COLLGEN_OK || !b || ((uintptr_t)p & 15u)) return rc;
  const uintptr_t off = (uintptr_t)p - b->ptr;
  for (int k = 0; kp && k < size; ++k) kp->in[k] = (const void *)(uintptr_t)(b->at[base + k] + off);
  *used = 1;
  return COLLGEN_OK;
}

int collgen__stage_peer_input(collgen_comm_t *c, const collgen__op_runtime *rt,
                              const collgen__call *call, const collgen__group *g,
                              const char *algo, int role, int base, int size, int r,
                              collgen__kparams *kp, CUstream s) {
  int registered = 0;
  int rc = collgen__stage_check_aligned(c, rt, call, g, r);
  if (rc != COLLGEN_OK || strcmp(algo, "ll") == 0) return rc;
  rc = collgen__registered_input(c, rt, call, g, role, base, size, r, kp, &registered);
  if (rc != COLLGEN_OK || registered) return rc; /* zero copy: the peers read it in place */
  const size_t bytes = (size_t)g->bytes[role][r];
  rc = collgen__stage_fits(c, rt->roles[role].name, bytes);
  if (rc == COLLGEN_OK)
    rc = collgen__stage_copy(c, collgen__staging_at(c, r, 0), call->buffers[role][r], bytes, s);
  for (int k = 0; rc == COLLGEN_OK && k < size; ++k) kp->in[k] = collgen__staging_at(c, base + k, 0);
  return rc;
}
