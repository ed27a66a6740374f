/*
** op_call.c -- the public op-neutral call (collgen_run, collgen_rank_run):
** a collgen_call_t becomes the driver's call (op_runtime.h) and runs
** through the one driver of every op. The ops' entry points are such calls
** (op_entry_points.c, generated).
*/
#include <string.h>

#include "op_runtime.h"

/* The driver's call of `pc`: everything but the buffers of this process's
** rank (collgen_rank_run) and the streams. */
static void from_public(const collgen_call_t *pc, collgen__call *call) {
  memset(call, 0, sizeof *call);
  call->op = pc->op;
  call->dtype = pc->dtype;
  call->tensor_rank = pc->tensor_rank;
  call->shapes = pc->shapes;
  call->group_size = pc->group_size;
  memcpy(call->scalars, pc->scalars, sizeof call->scalars);
}

int collgen_run(collgen_comm_t *comm, const collgen_call_t *pc) {
  if (!pc) return collgen__fail_tls(COLLGEN_ERR_INVALID_ARG, "call is NULL");
  collgen__call call;
  from_public(pc, &call);
  memcpy(call.buffers, pc->buffers, sizeof call.buffers);
  call.streams = pc->streams;
  return collgen__op_run(comm, &call);
}

int collgen__rank_run_call(collgen_comm_t *comm, const collgen_call_t *pc,
                           const int64_t *shape) {
  if (!pc) return collgen__fail_tls(COLLGEN_ERR_INVALID_ARG, "call is NULL");
  collgen__call call;
  from_public(pc, &call);
  return collgen__rank_run(comm, &call, shape, pc->mine, pc->stream);
}

/* 1 when every rank's shape of `pc` on comm is rank 0's (then the call may
** be cut into pieces as its entry point's, which takes one shape). */
static int one_shape(const collgen_comm_t *comm, const collgen_call_t *pc) {
  if (!comm || !pc->shapes || pc->tensor_rank < 1 || pc->tensor_rank > 8) return 0;
  for (int r = 0; r < comm->ndev; ++r)
    if (!pc->shapes[r] ||
        memcmp(pc->shapes[r], pc->shapes[0], (size_t)pc->tensor_rank * sizeof(int64_t)) != 0)
      return 0;
  return 1;
}

int collgen_rank_run(collgen_comm_t *comm, const collgen_call_t *pc) {
  if (!pc) return collgen__fail_tls(COLLGEN_ERR_INVALID_ARG, "call is NULL");
  return collgen__rank_run_call(comm, pc, one_shape(comm, pc) ? pc->shapes[0] : NULL);
}
