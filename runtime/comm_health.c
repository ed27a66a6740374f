/*
** comm_health.c -- what the host can learn while kernels run: the per-rank
** status records the kernels write into host-mapped memory
** (src/device_abi.h, COLLGEN_ST_*).
*/
#include <string.h>

#include "comm_internal.h"

static volatile unsigned int *status_of(const collgen_comm_t *c, int r) {
  return c->errors + (size_t)r * COLLGEN_STATUS_WORDS;
}

/* The communicator rank rank r gave up on. The record names group ranks:
** both map back through the waiting rank r. */
static unsigned int stopped_peer(const collgen_comm_t *c, int r) {
  volatile unsigned int *e = status_of(c, r);
  return (unsigned)r - e[COLLGEN_ST_RANK] + e[COLLGEN_ST_PEER];
}

int collgen__comm_check_errors(collgen_comm_t *c) {
  if (atomic_load(&c->aborted))
    return collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_ABORTED,
                         "collgen_comm_abort stopped this communicator; destroy it");
  for (int r = 0; r < c->ndev; ++r) {
    volatile unsigned int *e = status_of(c, r);
    unsigned int why = e[COLLGEN_ST_STOPPED];
    if (why == 0) continue;
    if (why == COLLGEN_STOP_ABORTED)
      return collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_ABORTED,
                           "rank %d (device %d) found this communicator aborted "
                           "(collgen_comm_abort, in this or another process); destroy it", r,
                           c->devices[r]);
    unsigned int peer = stopped_peer(c, r);
    int peer_dev = peer < (unsigned)c->ndev ? c->devices[peer] : -1;
    return collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_TIMEOUT,
                         "rank %d (device %d) waited more than %d ms in block %u for "
                         "rank %u (device %d), which never arrived; this "
                         "communicator is unusable now, destroy it",
                         r, c->devices[r], c->timeout_ms, e[COLLGEN_ST_BLOCK], peer, peer_dev);
  }
  return COLLGEN_OK;
}

int collgen_comm_check(collgen_comm_t *c) {
  if (!c) return collgen__fail_tls(COLLGEN_ERR_INVALID_ARG, "comm is NULL");
  return collgen__comm_check_errors(c);
}

int collgen_comm_health(const collgen_comm_t *c, collgen_comm_health_t *h) {
  if (!c || !h) return collgen__fail_tls(COLLGEN_ERR_INVALID_ARG, "NULL argument");
  memset(h, 0, sizeof *h);
  h->ndev = c->ndev;
  const int aborted = atomic_load(&c->aborted);
  for (int r = 0; r < c->ndev; ++r) {
    volatile unsigned int *e = status_of(c, r);
    unsigned int why = e[COLLGEN_ST_STOPPED];
    h->rank[r].peer = -1;
    if (why == COLLGEN_STOP_ABORTED) {
      h->rank[r].state = COLLGEN_RANK_ABORTED;
    } else if (why != 0) {
      unsigned int peer = stopped_peer(c, r);
      h->rank[r].state = COLLGEN_RANK_TIMED_OUT;
      h->rank[r].peer = peer < (unsigned)c->ndev ? (int)peer : -1;
    } else if (aborted) {
      h->rank[r].state = COLLGEN_RANK_ABORTED;
    }
  }
  return COLLGEN_OK;
}
