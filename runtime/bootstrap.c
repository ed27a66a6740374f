/*
** bootstrap.c -- the front end of the bootstrap (bootstrap.h): creation over
** the socket or the application's callback, the argument checks every
** exchange makes before it talks to anyone, the broken-after-failure rule,
** the peer table and the socket-over-callback upgrade. It calls the
** transports (bootstrap_socket.c, bootstrap_callback.c) through their tables
** of operations; the handle they share is in bootstrap_handle.h, the
** messages in bootstrap_wire.c.
*/
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bootstrap.h"
#include "bootstrap_handle.h"
#include "unique_id.h"

void collgen__boot_options_init(collgen__boot_options *opt) {
  memset(opt, 0, sizeof *opt);
}

int collgen__boot_socket_name(const collgen_unique_id_t *id, char *name, size_t n) {
  uint8_t tag[COLLGEN__UID_TAG_BYTES], secret[COLLGEN__UID_SECRET_BYTES];
  char tmp[48], err[256];
  if (!id || !name || collgen__uid_open(id, tag, secret, err, sizeof err) != COLLGEN_OK)
    return -1;
  collgen__boot_name(tag, tmp);
  return snprintf(name, n, "%s", tmp) < (int)n ? 0 : -1;
}

/* A new handle for `rank` of `nranks` after the checks every transport
** shares, with this rank's record in *self. */
static int boot_new(collgen__boot **out, int rank, int nranks, const collgen__boot_options *opt,
                    collgen__wire_info *self, char *err, size_t n) {
  if (!out) return collgen__fail(err, n, COLLGEN_ERR_INVALID_ARG, "bootstrap: out is NULL");
  *out = NULL;
  if (nranks < 1 || nranks > COLLGEN__BOOT_MAX_RANKS)
    return collgen__fail(err, n, COLLGEN_ERR_INVALID_ARG,
                         "bootstrap: nranks must be 1..%d, got %d", COLLGEN__BOOT_MAX_RANKS,
                         nranks);
  if (rank < 0 || rank >= nranks)
    return collgen__fail(err, n, COLLGEN_ERR_INVALID_ARG,
                         "bootstrap: rank %d is outside 0..%d (nranks %d)", rank, nranks - 1,
                         nranks);
  int timeout = opt ? opt->timeout_ms : 0;
  if (timeout < 0 || timeout > COLLGEN_MAX_TIMEOUT_MS)
    return collgen__fail(err, n, COLLGEN_ERR_INVALID_ARG,
                         "bootstrap: timeout_ms must be 0 (default) or 1..%d, got %d",
                         COLLGEN_MAX_TIMEOUT_MS, timeout);
  collgen__boot *b = calloc(1, sizeof *b);
  if (b) b->peers = calloc((size_t)nranks, sizeof *b->peers);
  if (b) b->conn = malloc((size_t)nranks * sizeof *b->conn);
  if (!b || !b->peers || !b->conn) {
    collgen__boot_destroy(b);
    return collgen__fail(err, n, COLLGEN_ERR_NO_MEMORY, "bootstrap: out of memory");
  }
  for (int r = 0; r < nranks; ++r) b->conn[r] = -1;
  b->rank = rank;
  b->nranks = nranks;
  b->timeout_ms = timeout ? timeout : collgen__param_timeout_ms();
  memset(self, 0, sizeof *self);
  self->rank = (uint32_t)rank;
  self->nranks = (uint32_t)nranks;
  self->pid = (uint32_t)getpid();
  collgen__host_id(opt ? opt->host_id : NULL, self->host);
  *out = b;
  return COLLGEN_OK;
}

/* Hands a joined handle to the caller, or frees it and copies its error. */
static int boot_finish(collgen__boot **out, collgen__boot *b, int rc, char *err, size_t n) {
  if (rc == COLLGEN_OK) {
    *out = b;
    return COLLGEN_OK;
  }
  collgen__fail(err, n, rc, "%s", b->err);
  collgen__boot_destroy(b);
  *out = NULL;
  return rc;
}

int collgen__boot_create(collgen__boot **out, const collgen_unique_id_t *id, int rank,
                         int nranks, const collgen__boot_options *opt, char *err, size_t n) {
  uint8_t tag[COLLGEN__UID_TAG_BYTES], secret[COLLGEN__UID_SECRET_BYTES];
  char why[256];
  if (out) *out = NULL;
  if (!id) return collgen__fail(err, n, COLLGEN_ERR_INVALID_ARG, "bootstrap: id is NULL");
  if (collgen__uid_open(id, tag, secret, why, sizeof why) != COLLGEN_OK)
    return collgen__fail(err, n, COLLGEN_ERR_INVALID_ARG, "bootstrap: %s", why);
  collgen__wire_info self;
  collgen__boot *b;
  int rc = boot_new(&b, rank, nranks, opt, &self, err, n);
  if (rc != COLLGEN_OK) return rc;
  b->ops = &collgen__boot_socket_ops;
  rc = b->ops->join(b, &self, tag, secret);
  explicit_bzero(secret, sizeof secret);
  return boot_finish(out, b, rc, err, n);
}

int collgen__boot_create_callback(collgen__boot **out, collgen_allgather_fn fn, void *ctx,
                                  int rank, int nranks, const collgen__boot_options *opt,
                                  char *err, size_t n) {
  if (out) *out = NULL;
  if (!fn) return collgen__fail(err, n, COLLGEN_ERR_INVALID_ARG, "bootstrap: callback is NULL");
  collgen__wire_info self;
  collgen__boot *b;
  int rc = boot_new(&b, rank, nranks, opt, &self, err, n);
  if (rc != COLLGEN_OK) return rc;
  b->ops = &collgen__boot_callback_ops;
  b->fn = fn;
  b->ctx = ctx;
  rc = b->ops->join(b, &self, NULL, NULL);
  return boot_finish(out, b, rc, err, n);
}

void collgen__boot_destroy(collgen__boot *b) {
  if (!b) return;
  if (b->conn)
    for (int r = 0; r < b->nranks; ++r)
      if (b->conn[r] >= 0) close(b->conn[r]);
  free(b->conn);
  free(b->peers);
  free(b);
}

int collgen__boot_rank(const collgen__boot *b) { return b->rank; }
int collgen__boot_nranks(const collgen__boot *b) { return b->nranks; }
unsigned collgen__boot_caps(const collgen__boot *b) { return b->ops->caps; }
const char *collgen__boot_last_error(const collgen__boot *b) { return b ? b->err : ""; }

const collgen__boot_peer *collgen__boot_peer_info(const collgen__boot *b, int r) {
  return (b && r >= 0 && r < b->nranks) ? &b->peers[r] : NULL;
}

int collgen__boot_hosts(const collgen__boot *b, int *host_of) {
  int hosts = 0;
  for (int r = 0; r < b->nranks; ++r) {
    host_of[r] = -1;
    for (int q = 0; q < r && host_of[r] < 0; ++q)
      if (memcmp(b->peers[q].host, b->peers[r].host, COLLGEN__HOST_ID_BYTES) == 0)
        host_of[r] = host_of[q];
    if (host_of[r] < 0) host_of[r] = hosts++;
  }
  return hosts;
}

static int overlaps(const void *a, size_t an, const void *b, size_t bn) {
  const char *x = a, *y = b;
  return an && bn && x < y + bn && y < x + an;
}

/* The local checks of an exchange: 0, or an error in b->err. */
static int check_exchange(collgen__boot *b, const void *mine, void *all, size_t bytes,
                          const int *mine_fds, int nfds, int *all_fds) {
  size_t n = (size_t)b->nranks;
  if (bytes > COLLGEN__BOOT_MAX_TOTAL / n)
    return collgen__boot_fail(b, COLLGEN_ERR_INVALID_ARG,
                              "exchange: %zu bytes per rank; at most %u with %d ranks", bytes,
                              COLLGEN__BOOT_MAX_TOTAL / b->nranks, b->nranks);
  if (bytes && (!mine || !all))
    return collgen__boot_fail(b, COLLGEN_ERR_INVALID_ARG, "exchange: %s is NULL",
                              mine ? "all" : "mine");
  if (overlaps(mine, bytes, all, n * bytes))
    return collgen__boot_fail(b, COLLGEN_ERR_INVALID_ARG, "exchange: mine overlaps all");
  if (nfds < 0 || nfds > COLLGEN__BOOT_MAX_FDS || (size_t)nfds * n > COLLGEN__BOOT_MAX_TOTAL_FDS)
    return collgen__boot_fail(b, COLLGEN_ERR_INVALID_ARG,
                              "exchange: %d descriptors per rank; 0..%d, and at most %d in all "
                              "(%d ranks)", nfds, COLLGEN__BOOT_MAX_FDS,
                              COLLGEN__BOOT_MAX_TOTAL_FDS, b->nranks);
  if (nfds && (!mine_fds || !all_fds))
    return collgen__boot_fail(b, COLLGEN_ERR_INVALID_ARG, "exchange: %s is NULL",
                              mine_fds ? "all_fds" : "mine_fds");
  for (int i = 0; i < nfds; ++i)
    if (mine_fds[i] < 0 || fcntl(mine_fds[i], F_GETFD) < 0)
      return collgen__boot_fail(b, COLLGEN_ERR_INVALID_ARG,
                                "exchange: mine_fds[%d] = %d is not an open descriptor", i,
                                mine_fds[i]);
  return COLLGEN_OK;
}

int collgen__boot_exchange(collgen__boot *b, const void *mine, void *all, size_t bytes,
                           const int *mine_fds, int nfds, int *all_fds) {
  if (!b) return collgen__fail_tls(COLLGEN_ERR_INVALID_ARG, "bootstrap exchange: b is NULL");
  if (all_fds && nfds > 0 && nfds <= COLLGEN__BOOT_MAX_FDS &&
      (size_t)nfds * (size_t)b->nranks <= COLLGEN__BOOT_MAX_TOTAL_FDS)
    for (int i = 0; i < nfds * b->nranks; ++i) all_fds[i] = -1;
  if (b->status != COLLGEN_OK) return b->status; /* b->err still says why */
  /* Same on every rank, so refusing it breaks nothing and needs no peer. */
  if (nfds > 0 && !(b->ops->caps & COLLGEN__BOOT_CAP_FDS))
    return collgen__boot_fail(b, COLLGEN_ERR_UNSUPPORTED,
                              "exchange: descriptors cannot travel through the application's "
                              "allgather callback; open a socket bootstrap "
                              "(collgen__boot_create_socket_over) or see docs/multiprocess.md");
  b->seq++;
  int rc = check_exchange(b, mine, all, bytes, mine_fds, nfds, all_fds);
  if (rc != COLLGEN_OK) b->ops->abort(b, rc);
  else rc = b->ops->exchange(b, mine, all, bytes, mine_fds, nfds, all_fds);
  b->status = rc;
  return rc;
}

int collgen__boot_allgather(collgen__boot *b, const void *mine, void *all, size_t bytes) {
  return collgen__boot_exchange(b, mine, all, bytes, NULL, 0, NULL);
}

int collgen__boot_allgather_fds(collgen__boot *b, const int *mine, int nfds, int *all) {
  return collgen__boot_exchange(b, NULL, NULL, 0, mine, nfds, all);
}

/* What rank 0 all-gathers in collgen__boot_create_socket_over. */
typedef struct {
  int32_t status;
  uint8_t id[COLLGEN_UNIQUE_ID_BYTES];
} offer;

int collgen__boot_create_socket_over(collgen__boot **out, collgen__boot *via,
                                     const collgen__boot_options *opt, char *err, size_t n) {
  if (!out || !via)
    return collgen__fail(err, n, COLLGEN_ERR_INVALID_ARG, "bootstrap: %s is NULL",
                         out ? "via" : "out");
  *out = NULL;
  for (int r = 1; r < via->nranks; ++r)
    if (memcmp(via->peers[r].host, via->peers[0].host, COLLGEN__HOST_ID_BYTES) != 0)
      return collgen__fail(err, n, COLLGEN_ERR_UNSUPPORTED,
                           "bootstrap: ranks 0 and %d are on different hosts; a socket (and "
                           "descriptor passing) joins processes of one host only", r);
  offer mine = {0, {0}};
  if (via->rank == 0) {
    collgen_unique_id_t id;
    mine.status = collgen_get_unique_id(&id);
    if (mine.status == COLLGEN_OK) memcpy(mine.id, id.internal, sizeof mine.id);
  }
  offer *all = calloc((size_t)via->nranks, sizeof *all);
  if (!all) return collgen__fail(err, n, COLLGEN_ERR_NO_MEMORY, "bootstrap: out of memory");
  int rc = collgen__boot_allgather(via, &mine, all, sizeof mine);
  collgen_unique_id_t id;
  memcpy(id.internal, all[0].id, sizeof id.internal);
  int status = all[0].status;
  explicit_bzero(all, (size_t)via->nranks * sizeof *all);
  explicit_bzero(&mine, sizeof mine);
  free(all);
  if (rc != COLLGEN_OK) return collgen__fail(err, n, rc, "%s", via->err);
  if (status != COLLGEN_OK)
    return collgen__fail(err, n, COLLGEN_ERR_IO, "bootstrap: rank 0 could not make an id (%s)",
                         collgen_status_name(status));
  collgen__boot_options o;
  collgen__boot_options_init(&o);
  if (opt) o = *opt;
  if (!o.timeout_ms) o.timeout_ms = via->timeout_ms;
  rc = collgen__boot_create(out, &id, via->rank, via->nranks, &o, err, n);
  explicit_bzero(&id, sizeof id);
  return rc;
}
