/*
** bootstrap_handle.h -- the bootstrap handle and the table of operations
** through which the front end (bootstrap.c: creation, argument checks,
** the broken-after-failure rule) calls a transport (bootstrap_socket.c,
** bootstrap_callback.c). Both sides stand on this header and on
** bootstrap_handle.c; a transport never calls the front end. Not installed.
*/
#ifndef COLLGEN_BOOTSTRAP_HANDLE_H
#define COLLGEN_BOOTSTRAP_HANDLE_H
#include "bootstrap_types.h"
#include "bootstrap_wire.h"
#include "internal.h"

/* A transport, as the front end sees it. Each transport defines one table;
** the handle points at its transport's table from creation on. */
struct collgen__boot_ops {
  /* The rendezvous: fills b->peers (socket: and b->conn) from this rank's
  ** record `self`; `tag` and `secret` are the id's (socket; NULL for the
  ** callback). On failure the message is in b->err and no descriptor is
  ** left open. */
  int (*join)(collgen__boot *b, const collgen__wire_info *self,
              const uint8_t tag[COLLGEN__UID_TAG_BYTES],
              const uint8_t secret[COLLGEN__UID_SECRET_BYTES]);
  /* One exchange, its arguments already checked by bootstrap.c and b->seq
  ** already advanced; descriptors only with COLLGEN__BOOT_CAP_FDS. */
  int (*exchange)(collgen__boot *b, const void *mine, void *all, size_t bytes,
                  const int *mine_fds, int nfds, int *all_fds);
  /* Tells the peers that this rank failed (status, b->err), keeping b->err;
  ** the socket also closes its connections. */
  void (*abort)(collgen__boot *b, int status);
  unsigned caps; /* COLLGEN__BOOT_CAP_*: what its exchanges can do */
};

/* The socket transport (bootstrap_socket.c) and the callback transport
** (bootstrap_callback.c). */
extern const struct collgen__boot_ops collgen__boot_socket_ops;
extern const struct collgen__boot_ops collgen__boot_callback_ops;

struct collgen__boot {
  int rank, nranks, timeout_ms;
  const struct collgen__boot_ops *ops; /* the transport */
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
#endif
