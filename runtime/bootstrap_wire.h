/*
** bootstrap_wire.h -- the bootstrap's messages on its Unix socket: their
** layout, their limits, the parser and the framed send and receive that
** every byte from a peer goes through (bootstrap_wire.c). Everything a peer
** sends is untrusted: docs/multiprocess.md#message-format describes the
** format and tests/fuzz/fuzz_boot_wire.c fuzzes this code.
*/
#ifndef COLLGEN_BOOTSTRAP_WIRE_H
#define COLLGEN_BOOTSTRAP_WIRE_H
#include <stddef.h>
#include <stdint.h>

#include "bootstrap_types.h"
#include "unique_id.h"

/* A message: a 24-byte header, then `length` payload bytes; `nfds`
** descriptors travel (SCM_RIGHTS) with the header's bytes.
**   0  magic "CGBS"      12 rank (sender, or the rank a message is about)
**   4  version u16 (1)   16 length (payload bytes)
**   6  type u16          20 nfds
**   8  seq (exchange number; 0 during the rendezvous)
** Integers are little-endian. */
#define COLLGEN__WIRE_MAGIC 0x53424743u /* "CGBS" */
#define COLLGEN__WIRE_VERSION 1u
#define COLLGEN__WIRE_HEADER 24
#define COLLGEN__WIRE_INFO 32   /* a rank's record, see collgen__wire_info */
#define COLLGEN__WIRE_HELLO \
  (COLLGEN__UID_TAG_BYTES + COLLGEN__UID_SECRET_BYTES + COLLGEN__WIRE_INFO)
#define COLLGEN__WIRE_MAX_TEXT 1024 /* an ERROR's text */
#define COLLGEN__WIRE_NO_RANK 0xffffffffu

typedef enum {
  COLLGEN__MSG_HELLO = 1,   /* rank r -> 0: tag, secret, r's record */
  COLLGEN__MSG_WELCOME = 2, /* 0 -> r: every rank's record, in rank order */
  COLLGEN__MSG_CONTRIB = 3, /* r -> 0: r's bytes of exchange `seq`, its fds */
  COLLGEN__MSG_RESULT = 4,  /* 0 -> r: every rank's bytes of exchange `seq` */
  COLLGEN__MSG_FDS = 5,     /* 0 -> r: the fds of rank `rank` (no payload) */
  COLLGEN__MSG_ERROR = 6,   /* either way: status (i32) and text; then close */
  COLLGEN__MSG_RETRY = 7    /* 0 -> a connection it drops before the HELLO was
                               whole (no room or time): connect again; no
                               payload; then close */
} collgen__msg_type;

typedef struct {
  uint32_t type, seq, rank, length, nfds;
} collgen__wire_header;

/* A rank's record, as all-gathered at the rendezvous (32 bytes on the
** wire: rank, nranks, pid, flags (0), host id). */
typedef struct {
  uint32_t rank, nranks, pid, flags;
  uint8_t host[COLLGEN__HOST_ID_BYTES];
} collgen__wire_info;

/* Little-endian 32-bit integers at p. */
void collgen__wire_put32(uint8_t *p, uint32_t v);
uint32_t collgen__wire_get32(const uint8_t *p);

/* Writes a header into out. */
void collgen__wire_pack_header(uint8_t out[COLLGEN__WIRE_HEADER], const collgen__wire_header *h);

/* Parses a header: magic, version, a known type, `length` within the
** type's bound (HELLO: exactly COLLGEN__WIRE_HELLO; WELCOME: a multiple of
** COLLGEN__WIRE_INFO, at most COLLGEN__BOOT_MAX_RANKS records; CONTRIB and
** RESULT: at most COLLGEN__BOOT_MAX_TOTAL; FDS and RETRY: 0; ERROR: 4 to 4
** + COLLGEN__WIRE_MAX_TEXT), `nfds` 0 except for CONTRIB and FDS (at most
** COLLGEN__BOOT_MAX_FDS), `rank` below COLLGEN__BOOT_MAX_RANKS (ERROR: or
** COLLGEN__WIRE_NO_RANK). Returns 0, or COLLGEN_ERR_PEER with the reason in
** err. Pure function. */
int collgen__wire_parse_header(const uint8_t in[COLLGEN__WIRE_HEADER], collgen__wire_header *h,
                               char *err, size_t n);

/* Packs and parses a rank's record (COLLGEN__WIRE_INFO bytes). The parser
** checks nranks in 1..COLLGEN__BOOT_MAX_RANKS, rank < nranks and flags 0;
** it returns 0 or COLLGEN_ERR_PEER with the reason in err. */
void collgen__wire_pack_info(uint8_t *out, const collgen__wire_info *info);
int collgen__wire_parse_info(const uint8_t *in, collgen__wire_info *info, char *err, size_t n);

/* An ERROR's payload: a status, which the parser maps to COLLGEN_ERR_PEER
** unless it is a known negative COLLGEN_ERR_* code, and a text, which it
** copies into text[textlen] (NUL-terminated, truncated) with every byte
** outside printable ASCII replaced by '?'. pack returns the payload size. */
size_t collgen__wire_pack_error(uint8_t *out, int status, const char *text);
int collgen__wire_parse_error(const uint8_t *in, size_t len, char *text, size_t textlen);

/* What rank 0 makes of the first whole message of a connection (header h,
** payload p): 1 when the sender is no member (not a HELLO, or another id's
** tag) and 2 when its secret is wrong (the caller tells it so): refuse
** either, with the reason in why; 0 when it is
** a member with a valid record for this job, in *info (its rank is 1 to
** nranks - 1; whether another process has it is the caller's to check);
** else the status of a member the job cannot take (COLLGEN_ERR_PEER: a
** malformed record; COLLGEN_ERR_INVALID_ARG: other nranks, or rank 0),
** with a sentence naming it (by `pid`) in why. The secret is compared in
** constant time. */
int collgen__wire_check_hello(const collgen__wire_header *h, const uint8_t *p,
                              const uint8_t tag[COLLGEN__UID_TAG_BYTES],
                              const uint8_t secret[COLLGEN__UID_SECRET_BYTES], int nranks,
                              int pid, collgen__wire_info *info, char *why, size_t n);

/* Whether the header of a message rank 0 reads from rank `rank` in
** exchange `seq` matches rank 0's own call (bytes, nfds): 0 (also for an
** ERROR, whose text the caller reports), COLLGEN_ERR_PEER when it is no
** contribution, COLLGEN_ERR_INVALID_ARG when the ranks disagree (exchange
** number, size, descriptors), with the reason in why. */
int collgen__wire_check_contrib(const collgen__wire_header *h, uint32_t seq, int rank,
                                size_t bytes, int nfds, char *why, size_t n);

/* Receiving one message, without blocking, from a nonblocking socket.
** The payload goes to the caller's buffer `buf` of `cap` bytes (a longer
** announced payload is refused before a byte of it is read), except an
** ERROR's, which goes to `text`. Up to `max_fds` descriptors are accepted
** (received close-on-exec); more, or any while max_fds is 0, are closed
** and refused, as is a message whose descriptor count differs from its
** header's. Nothing is allocated. */
typedef struct {
  uint8_t head[COLLGEN__WIRE_HEADER];
  size_t got;            /* bytes of this message read so far */
  int have_header;
  collgen__wire_header h;
  uint8_t *buf;
  size_t cap;
  uint8_t text[4 + COLLGEN__WIRE_MAX_TEXT];
  int fds[COLLGEN__BOOT_MAX_FDS];
  int nfds, max_fds;
  int closed;            /* the peer closed the connection (or reset it) */
} collgen__wire_rx;

/* Starts a message (closes nothing: take or close the previous fds first). */
void collgen__wire_rx_init(collgen__wire_rx *rx, void *buf, size_t cap, int max_fds);
/* Reads what is there with one recvmsg. Returns 1 when the message is
** complete (its header in rx->h, payload in buf or rx->text, fds in
** rx->fds), 0 when more is needed (EAGAIN), or COLLGEN_ERR_PEER with the
** reason in err (rx->closed set when the peer closed or reset the
** connection; err then says so). On an error every fd received so far is
** closed. EINTR is retried. */
int collgen__wire_rx_step(collgen__wire_rx *rx, int fd, char *err, size_t n);
/* collgen__wire_rx_step while bytes come: returns at the end of the
** message (1), an error, or when nothing more is there (0). */
int collgen__wire_rx_pull(collgen__wire_rx *rx, int fd, char *err, size_t n);
/* Closes the descriptors received so far and forgets them. */
void collgen__wire_rx_close_fds(collgen__wire_rx *rx);

/* Reads one whole message, polling until `deadline` (collgen__now_ms
** clock). Returns 0, COLLGEN_ERR_TIMEOUT ("no message within ..."), or
** collgen__wire_rx_step's error. */
int collgen__wire_recv(collgen__wire_rx *rx, int fd, double deadline, char *err, size_t n);

/* Sends a header, `len` payload bytes and `nfds` descriptors (with the
** header) on a nonblocking socket, polling until `deadline`; never raises
** SIGPIPE. Returns 0, COLLGEN_ERR_TIMEOUT, or COLLGEN_ERR_PEER when the
** peer closed the connection (*closed = 1 then) or the send failed. */
int collgen__wire_send(int fd, const collgen__wire_header *h, const void *payload, size_t len,
                       const int *fds, int nfds, double deadline, int *closed, char *err,
                       size_t n);
/* The same for any bytes: a[alen] then b[blen], the descriptors riding on
** the first byte (nothing is sent, descriptors neither, when both are
** empty). For the fuzz harness and the tests' hostile clients. */
int collgen__wire_send2(int fd, const void *a, size_t alen, const void *b, size_t blen,
                        const int *fds, int nfds, double deadline, int *closed, char *err,
                        size_t n);
#endif
