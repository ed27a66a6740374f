/*
** bootstrap_internal.h -- the bootstrap handle and the two transports'
** entry points, shared by bootstrap.c (handle, argument checks, dispatch),
** bootstrap_socket.c and bootstrap_callback.c. Not installed.
*/
#ifndef COLLGEN_BOOTSTRAP_INTERNAL_H
#define COLLGEN_BOOTSTRAP_INTERNAL_H
#include "bootstrap.h"
#include "bootstrap_wire.h"
#include "internal.h"

struct collgen__boot {
  int rank, nranks, timeout_ms;
  unsigned caps;            /* COLLGEN__BOOT_CAP_* */
  uint32_t seq;             /* number of the exchange in progress or last done */
  int status;               /* first failure of an exchange; 0 while usable */
  collgen__boot_peer *peers; /* nranks entries */
  /* Socket transport: conn[r] is the connection to rank r. Rank 0 has one
  ** per other rank; any other rank only conn[0]. -1 where none. */
  int *conn;
  /* Callback transport. */
  collgen_allgather_fn fn;
  void *ctx;
  char err[COLLGEN_ERRBUF];
};

/* Records a failure message in b->err and returns status. */
int collgen__boot_fail(collgen__boot *b, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The abstract socket name of a tag ("collgen-boot-" and 32 hex digits)
** into name[48]. */
void collgen__boot_name(const uint8_t tag[COLLGEN__UID_TAG_BYTES], char name[48]);

/* Socket transport. join: the rendezvous (fills b->conn and b->peers from
** this rank's record `self`); on failure the message is in b->err and no
** descriptor is left open. exchange: one exchange with arguments already
** checked by bootstrap.c, b->seq already advanced. abort: tells the peers
** that this rank failed (status, b->err) and closes the connections. */
int collgen__boot_socket_join(collgen__boot *b, const uint8_t tag[COLLGEN__UID_TAG_BYTES],
                              const uint8_t secret[COLLGEN__UID_SECRET_BYTES],
                              const collgen__wire_info *self);
int collgen__boot_socket_exchange(collgen__boot *b, const void *mine, void *all, size_t bytes,
                                  const int *mine_fds, int nfds, int *all_fds);
void collgen__boot_socket_abort(collgen__boot *b, int status);

/* Callback transport: the same three over b->fn. */
int collgen__boot_callback_join(collgen__boot *b, const collgen__wire_info *self);
int collgen__boot_callback_exchange(collgen__boot *b, const void *mine, void *all,
                                    size_t bytes);
void collgen__boot_callback_abort(collgen__boot *b, int status);
#endif
