/*
** comm_nccl.c -- the NCCL communicators of a one-process-per-GPU
** communicator (docs/multinode.md): one per group that routes to NCCL,
** created at collgen_comm_init_rank through collgen's own bootstrap (the
** socket or the application's all-gather), destroyed or aborted with it.
*/
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap.h"
#include "comm_internal.h"

/* What every rank all-gathers: whether it could load NCCL, and the id of
** each group it leads (it is the group's first rank) that routes to NCCL. */
typedef struct {
  int32_t status;
  char why[256];
  collgen__nccl_id ids[COLLGEN_MAX_DEVICES + 1]; /* by group size */
} nccl_offer;

/* 1 if this rank's group of size s routes to NCCL. */
static int needs(const collgen_comm_t *c, int s) {
  return s > 1 && c->ndev % s == 0 &&
         collgen__route_of(c, s, c->self / s * s) == COLLGEN_TRANSPORT_NCCL;
}

/* All-gathers `mine` and fails (naming the first failed rank) when any
** rank's status is not OK. */
static int share(collgen_comm_t *c, nccl_offer *mine, nccl_offer *all, const char *what) {
  int rc = collgen__boot_allgather(c->boot, mine, all, sizeof *mine);
  if (rc != COLLGEN_OK)
    return collgen__fail(c->err, sizeof c->err, rc, "%s", collgen__boot_last_error(c->boot));
  for (int r = 0; r < c->ndev; ++r) {
    if (all[r].status == COLLGEN_OK) continue;
    /* A peer's bytes: only a known failure code is kept, printable text only. */
    const int known = all[r].status == COLLGEN_ERR_NO_NCCL || all[r].status == COLLGEN_ERR_NCCL ||
                      all[r].status == COLLGEN_ERR_NO_MEMORY || all[r].status == COLLGEN_ERR_TIMEOUT;
    char why[sizeof all[r].why];
    for (size_t i = 0; i < sizeof why; ++i) {
      const char ch = i + 1 < sizeof why ? all[r].why[i] : 0;
      why[i] = ch == 0 ? 0 : (ch >= 32 && ch < 127) ? ch : '?';
      if (!ch) break;
    }
    return collgen__fail(c->err, sizeof c->err, known ? all[r].status : COLLGEN_ERR_PEER,
                         "%s: rank %d: %s", what, r, why);
  }
  return COLLGEN_OK;
}

/* This rank's NCCL communicator of its group of size s, from the group's
** id. Non-blocking (config.blocking = 0), so the creation is bounded by
** the communicator's timeout: a rank that never joins gives
** COLLGEN_ERR_TIMEOUT and the half-made communicator is aborted. The
** communicator stays non-blocking: every later NCCL call goes through
** collgen__nccl_settle. */
static int init_group(collgen_comm_t *c, int s, const collgen__nccl_id *id) {
  collgen__nccl_config cfg = {sizeof cfg, COLLGEN__NCCL_CONFIG_MAGIC, COLLGEN__NCCL_MIN_VERSION,
                              0, INT_MIN, INT_MIN, INT_MIN, NULL};
  const int base = c->self / s * s;
  collgen__nccl_comm_t comm = NULL;
  collgen__nccl_result r =
      collgen__nccl.ncclCommInitRankConfig(&comm, s, *id, c->self - base, &cfg);
  char what[96];
  snprintf(what, sizeof what, "ncclCommInitRankConfig (ranks %d..%d)", base, base + s - 1);
  int rc = collgen__nccl_settle(comm, r, what,
                                      c->timeout_ms, c->err, sizeof c->err);
  if (rc == COLLGEN_OK && !(c->nccl_graphs[s] = collgen__nccl_graphs_new()))
    rc = collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_NO_MEMORY, "no memory for %s", what);
  if (rc == COLLGEN_OK) {
    c->nccl[s] = comm;
  } else if (comm) {
    collgen__nccl.ncclCommAbort(comm);
  }
  return rc;
}

int collgen__comm_nccl_open(collgen_comm_t *c) {
  int any = 0, mine_needed = 0;
  for (int s = 2; s <= c->ndev; ++s)
    for (int g = 0; c->ndev % s == 0 && g < c->ndev / s; ++g)
      any |= collgen__route_of(c, s, g * s) == COLLGEN_TRANSPORT_NCCL;
  if (!any) return COLLGEN_OK; /* every rank knows: no exchange */
  for (int s = 2; s <= c->ndev; ++s) mine_needed |= needs(c, s);
  nccl_offer *mine = calloc(1, sizeof *mine), *all = calloc((size_t)c->ndev, sizeof *all);
  int rc = COLLGEN_OK;
  if (!mine || !all) {
    rc = collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_NO_MEMORY, "out of memory");
    goto out; /* the peers see this rank leave */
  }
  if (mine_needed) mine->status = collgen__nccl_load(mine->why, sizeof mine->why);
  for (int s = 2; mine->status == COLLGEN_OK && s <= c->ndev; ++s)
    if (needs(c, s) && c->self % s == 0)
      mine->status = collgen__nccl_fail(collgen__nccl.ncclGetUniqueId(&mine->ids[s]),
                                        "ncclGetUniqueId", mine->why, sizeof mine->why);
  rc = share(c, mine, all, "loading NCCL");
  /* Every rank creates its communicators in increasing group size, so no
  ** creation waits for a rank that waits in another. */
  collgen__cu.cuCtxSetCurrent(c->ctx[c->self]);
  for (int s = 2; rc == COLLGEN_OK && s <= c->ndev; ++s)
    if (needs(c, s)) rc = init_group(c, s, &all[c->self / s * s].ids[s]);
  if (rc == COLLGEN_OK || rc == COLLGEN_ERR_NCCL || rc == COLLGEN_ERR_TIMEOUT) {
    /* every rank learns whether every creation worked */
    memset(mine, 0, sizeof *mine);
    mine->status = rc;
    snprintf(mine->why, sizeof mine->why, "%.*s", (int)sizeof mine->why - 1, c->err);
    rc = share(c, mine, all, "creating the NCCL communicators");
  }
out:
  free(all);
  free(mine);
  return rc;
}

void collgen__comm_nccl_close(collgen_comm_t *c) {
  for (int s = 0; s <= COLLGEN_MAX_DEVICES; ++s)
    if (c->nccl[s]) {
      collgen__nccl_release(c->nccl[s], c->nccl_graphs[s], 0);
      c->nccl[s] = NULL;
      c->nccl_graphs[s] = NULL;
    }
}

int collgen__comm_nccl_abort(collgen_comm_t *c) {
  int rc = COLLGEN_OK;
  for (int s = 0; s <= COLLGEN_MAX_DEVICES; ++s)
    if (c->nccl[s]) {
      int r = collgen__nccl_fail(collgen__nccl_release(c->nccl[s], c->nccl_graphs[s], 1),
                                 "ncclCommAbort", c->err, sizeof c->err);
      if (rc == COLLGEN_OK) rc = r;
      c->nccl[s] = NULL; /* freed by the abort, whatever it returned */
      c->nccl_graphs[s] = NULL;
    }
  return rc;
}
