/*
** bootstrap.h -- the bootstrap of the one-process-per-GPU mode: the ranks'
** processes meet (rendezvous), learn who is who (pid, host), and then
** all-gather bytes and, over the Unix socket, file descriptors. The GPU
** layer (cuMem handle export and import, the per-rank communicator) is
** built on this interface. Design, bounds and fault behaviour:
** docs/multiprocess.md. Not installed.
**
** Two transports:
**  - socket (collgen__boot_create): ranks on one host meet on an abstract
**    Unix socket named by a collgen_unique_id_t; rank 0 listens, the others
**    connect. Every wait is bounded by the timeout; fds can travel.
**  - callback (collgen__boot_create_callback): the application's own
**    all-gather (MPI, torch.distributed) carries the bytes; no fds, and the
**    callback's own waits are the application's to bound.
** collgen__boot_caps says which is which; collgen__boot_create_socket_over
** opens a socket bootstrap through a callback one when every rank is on one
** host, so fds can travel after all.
**
** A bootstrap is used by one thread at a time. After any failure of an
** exchange it is broken: every later exchange returns the first error
** again (its message in collgen__boot_last_error); destroy it. Every rank
** must make the same sequence of exchanges with the same sizes; a mismatch
** is detected and reported on every rank, never misread.
*/
#ifndef COLLGEN_BOOTSTRAP_H
#define COLLGEN_BOOTSTRAP_H
#include <stddef.h>
#include <stdint.h>

#include "bootstrap_types.h" /* limits, capability bits, the peer record */
#include "collgen.h"

typedef struct {
  /* Bound on the rendezvous and on each exchange, in ms (socket transport).
  ** 0 = $COLLGEN_TIMEOUT_MS, else COLLGEN_DEFAULT_TIMEOUT_MS; at most
  ** COLLGEN_MAX_TIMEOUT_MS. */
  int timeout_ms;
  /* Test only: the host identity is the hash of this text instead of the
  ** machine's (boot id and host name), to fake ranks on several hosts.
  ** NULL = the machine's. */
  const char *host_id;
} collgen__boot_options;

/* Fills options with defaults (zeros). */
void collgen__boot_options_init(collgen__boot_options *opt);

/* Joins the rendezvous named by `id` as `rank` of `nranks` (1..
** COLLGEN__BOOT_MAX_RANKS) over the abstract Unix socket; returns when every
** rank has joined. Rank 0 listens (and closes the listener before
** returning); the others connect, retrying until rank 0 is there, and
** connect again whenever rank 0 drops their connection before welcoming
** them while it still listens. Both sides check that the other runs as the
** same user (SO_PEERCRED); rank 0 checks every process's secret. `opt` may
** be NULL. Errors (*out NULL, the reason in err[n]):
**  _INVALID_ARG: bad arguments or id; this rank's nranks differs from rank
**    0's; two processes claim one rank; another process listens on this
**    id's socket already (a second rank 0); rank 0 refused this process's
**    secret;
**  _TIMEOUT: not every rank joined in time; rank 0's message names the
**    missing ranks and counts the connections it refused or dropped;
**    another rank's says how often rank 0 dropped its connection;
**  _PEER: a rank left (closed its connection) before the end; rank 0
**    closed this rank's connection before welcoming it and no longer
**    listens; or the process on the socket is another user's;
**  _IO: a socket call failed (e.g. out of descriptors).
** Rank 0 refuses a connection that fails authentication (another user,
** garbage, a wrong secret) and drops one that has not proved the secret
** within COLLGEN__BOOT_AUTH_MS or is the oldest of COLLGEN__BOOT_MAX_PENDING
** when another comes; it logs the first few as warnings (collgen__log),
** counts all, and keeps waiting for the real ranks. */
int collgen__boot_create(collgen__boot **out, const collgen_unique_id_t *id, int rank,
                         int nranks, const collgen__boot_options *opt, char *err, size_t n);

/* Joins through the application's all-gather `fn(ctx, ...)`: all-gathers
** each rank's record (rank, nranks, pid, host id) and checks that every
** rank has the same nranks and that fn put rank i's bytes in slot i.
** opt->timeout_ms is not used (collgen cannot bound fn). Errors:
** _INVALID_ARG (arguments, nranks mismatch, slots out of order), _PEER (fn
** failed), _NO_MEMORY. */
int collgen__boot_create_callback(collgen__boot **out, collgen_allgather_fn fn, void *ctx,
                                  int rank, int nranks, const collgen__boot_options *opt,
                                  char *err, size_t n);

/* Opens a socket bootstrap (same rank and nranks) through `via`, whatever
** its transport: rank 0 makes a fresh id and all-gathers it through `via`,
** then every rank calls collgen__boot_create with it. Refused with
** COLLGEN_ERR_UNSUPPORTED (naming two ranks) unless every rank has the same
** host id. Collective over `via`. Errors as collgen__boot_create, and any
** error of the exchange over `via` (which breaks `via`). */
int collgen__boot_create_socket_over(collgen__boot **out, collgen__boot *via,
                                     const collgen__boot_options *opt, char *err, size_t n);

/* Closes the bootstrap's sockets and frees it; NULL is fine. Not
** collective: a peer still in an exchange with this rank gets
** COLLGEN_ERR_PEER naming it. */
void collgen__boot_destroy(collgen__boot *b);

/* This rank, the rank count, COLLGEN__BOOT_CAP_* bits. */
int collgen__boot_rank(const collgen__boot *b);
int collgen__boot_nranks(const collgen__boot *b);
unsigned collgen__boot_caps(const collgen__boot *b);
/* What the rendezvous learned about rank r (NULL if r is out of range). */
const collgen__boot_peer *collgen__boot_peer_info(const collgen__boot *b, int r);
/* Numbers the hosts 0, 1, ... in the order of their lowest rank and writes
** rank r's host number to host_of[r] (nranks entries); returns the number
** of hosts. */
int collgen__boot_hosts(const collgen__boot *b, int *host_of);
/* Message of the last failed call on b. */
const char *collgen__boot_last_error(const collgen__boot *b);

/* All-gathers `bytes` bytes (0 to COLLGEN__BOOT_MAX_TOTAL / nranks) from
** every rank: rank i's `mine` lands at all + i * bytes on every rank
** (this rank's own included); 0 bytes makes it a barrier. `all` has nranks * bytes bytes and must not
** overlap `mine`. Collective: every rank calls it, in the same order as its
** other exchanges, with the same `bytes`. Errors: _INVALID_ARG (arguments;
** or ranks disagree on bytes or on the number of exchanges, named),
** _TIMEOUT (ranks that did not join the exchange in time, named), _PEER (a
** rank closed its connection, sent a malformed message or failed, named),
** or the first error again once the bootstrap broke. */
int collgen__boot_allgather(collgen__boot *b, const void *mine, void *all, size_t bytes);

/* All-gathers `nfds` descriptors (0 to COLLGEN__BOOT_MAX_FDS; nranks * nfds
** at most COLLGEN__BOOT_MAX_TOTAL_FDS) from every rank: all[i * nfds + j]
** receives, in this process, a new descriptor (close-on-exec, owned by the
** caller) for rank i's mine[j]; this rank's own slots get -1. `mine` stays
** the caller's. Needs COLLGEN__BOOT_CAP_FDS (else COLLGEN_ERR_UNSUPPORTED);
** errors as collgen__boot_allgather, and _INVALID_ARG for a descriptor that
** is not open. On any error nothing is left open in `all` (every slot -1). */
int collgen__boot_allgather_fds(collgen__boot *b, const int *mine, int nfds, int *all);

/* Both in one exchange: bytes (as collgen__boot_allgather) and descriptors
** (as collgen__boot_allgather_fds), e.g. a cuMem handle's fd with its size
** and offset. nfds 0 works on every transport. */
int collgen__boot_exchange(collgen__boot *b, const void *mine, void *all, size_t bytes,
                           const int *mine_fds, int nfds, int *all_fds);

/* The abstract socket name of an id ("collgen-boot-<hex tag>", without the
** leading NUL) into name[n]; 0, or -1 if the id is invalid or n too small.
** For tests and docs: /proc/net/unix lists it as "@collgen-boot-...". */
int collgen__boot_socket_name(const collgen_unique_id_t *id, char *name, size_t n);

/* The host identity of this process into host: the first 16 bytes of a
** SHA-256 over the kernel's boot id (/proc/sys/kernel/random/boot_id, else
** /etc/machine-id) and the host name, or of `override` when not NULL.
** Never fails: without a boot id or machine id it hashes the host name
** alone and logs a warning. */
void collgen__host_id(const char *override, uint8_t host[COLLGEN__HOST_ID_BYTES]);
#endif
