/*
** bootstrap_types.h -- what every part of the bootstrap shares: its limits
** and timing constants, the capability bits, the handle's name and the
** peer record. The interface (bootstrap.h), the messages (bootstrap_wire.h)
** and the transports' handle (bootstrap_handle.h) all stand on it, so the
** transports need nothing of the front end that calls them. Not installed.
*/
#ifndef COLLGEN_BOOTSTRAP_TYPES_H
#define COLLGEN_BOOTSTRAP_TYPES_H
#include <stdint.h>

/* Limits; larger requests are refused with COLLGEN_ERR_INVALID_ARG. */
#define COLLGEN__BOOT_MAX_RANKS 256
#define COLLGEN__BOOT_MAX_FDS 64            /* per rank per exchange */
#define COLLGEN__BOOT_MAX_TOTAL_FDS 512     /* nranks * nfds per exchange */
#define COLLGEN__BOOT_MAX_TOTAL (64u << 20) /* nranks * bytes per exchange */
/* How much longer than the timeout a rank other than 0 waits for rank 0's
** answer, so that rank 0's report (which names the missing ranks) arrives
** before the rank gives up on its own. */
#define COLLGEN__BOOT_GRACE_MS 500
/* How long rank 0 gives a connection to prove it holds the id's secret (a
** whole HELLO) before it drops it and tells it to connect again. */
#define COLLGEN__BOOT_AUTH_MS 1000
/* Connections rank 0 holds at once while they prove the secret; when one
** more comes, the oldest of them is dropped (and told to connect again),
** so a flood costs a bounded number of descriptors and never turns away
** the newest connection, which may be a real rank's. */
#define COLLGEN__BOOT_MAX_PENDING 64
#define COLLGEN__HOST_ID_BYTES 16

/* Capabilities of a bootstrap (collgen__boot_caps). */
#define COLLGEN__BOOT_CAP_FDS 1u     /* exchanges can carry file descriptors */
#define COLLGEN__BOOT_CAP_BOUNDED 2u /* every wait is bounded by the timeout */

typedef struct collgen__boot collgen__boot;

/* What a rank learned about another at the rendezvous. */
typedef struct {
  int pid;  /* socket: as rank 0 sees it (SO_PEERCRED); callback: as the rank
               reported it (its own pid namespace) */
  uint8_t host[COLLGEN__HOST_ID_BYTES]; /* equal iff on one host (docs) */
} collgen__boot_peer;
#endif
