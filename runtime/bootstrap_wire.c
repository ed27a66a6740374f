/*
** bootstrap_wire.c -- the bootstrap's message format (bootstrap_wire.h):
** packing and strict parsing of headers, rank records and errors, and the
** framed receive and send with descriptors and deadlines. Every byte a peer
** sends passes through collgen__wire_rx_step and the parsers here, so they
** bound every length before using it, allocate nothing and close every
** descriptor they do not hand over. Fuzzed by tests/fuzz/fuzz_boot_wire.c.
*/
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bootstrap_wire.h"
#include "internal.h"

void collgen__wire_put32(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
  p[2] = (uint8_t)(v >> 16);
  p[3] = (uint8_t)(v >> 24);
}

uint32_t collgen__wire_get32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static const char *type_name(uint32_t t) {
  static const char *const names[] = {"?", "HELLO", "WELCOME", "CONTRIB", "RESULT", "FDS",
                                      "ERROR", "RETRY"};
  return t <= COLLGEN__MSG_RETRY ? names[t] : "?";
}

void collgen__wire_pack_header(uint8_t out[COLLGEN__WIRE_HEADER], const collgen__wire_header *h) {
  collgen__wire_put32(out, COLLGEN__WIRE_MAGIC);
  collgen__wire_put32(out + 4, COLLGEN__WIRE_VERSION | h->type << 16);
  collgen__wire_put32(out + 8, h->seq);
  collgen__wire_put32(out + 12, h->rank);
  collgen__wire_put32(out + 16, h->length);
  collgen__wire_put32(out + 20, h->nfds);
}

int collgen__wire_parse_header(const uint8_t in[COLLGEN__WIRE_HEADER], collgen__wire_header *h,
                               char *err, size_t n) {
  if (collgen__wire_get32(in) != COLLGEN__WIRE_MAGIC)
    return collgen__fail(err, n, COLLGEN_ERR_PEER,
                         "not a collgen bootstrap message (magic 0x%08x)", collgen__wire_get32(in));
  uint32_t vt = collgen__wire_get32(in + 4);
  if ((vt & 0xffff) != COLLGEN__WIRE_VERSION)
    return collgen__fail(err, n, COLLGEN_ERR_PEER,
                         "bootstrap message of protocol version %u, this collgen speaks %u",
                         vt & 0xffff, COLLGEN__WIRE_VERSION);
  collgen__wire_header x = {vt >> 16, collgen__wire_get32(in + 8),
                            collgen__wire_get32(in + 12), collgen__wire_get32(in + 16),
                            collgen__wire_get32(in + 20)};
  uint32_t lo = 0, hi = 0; /* the payload bounds of the type */
  int fds_ok = 0;
  switch (x.type) {
  case COLLGEN__MSG_HELLO: lo = hi = COLLGEN__WIRE_HELLO; break;
  case COLLGEN__MSG_WELCOME:
    lo = COLLGEN__WIRE_INFO;
    hi = COLLGEN__WIRE_INFO * COLLGEN__BOOT_MAX_RANKS;
    break;
  case COLLGEN__MSG_CONTRIB: hi = COLLGEN__BOOT_MAX_TOTAL; fds_ok = 1; break;
  case COLLGEN__MSG_RESULT: hi = COLLGEN__BOOT_MAX_TOTAL; break;
  case COLLGEN__MSG_FDS: fds_ok = 1; break;
  case COLLGEN__MSG_RETRY: break;
  case COLLGEN__MSG_ERROR: lo = 4; hi = 4 + COLLGEN__WIRE_MAX_TEXT; break;
  default:
    return collgen__fail(err, n, COLLGEN_ERR_PEER, "unknown bootstrap message type %u", x.type);
  }
  if (x.length < lo || x.length > hi)
    return collgen__fail(err, n, COLLGEN_ERR_PEER,
                         "%s message announces %u payload bytes (allowed %u..%u)",
                         type_name(x.type), x.length, lo, hi);
  if (x.type == COLLGEN__MSG_WELCOME && x.length % COLLGEN__WIRE_INFO != 0)
    return collgen__fail(err, n, COLLGEN_ERR_PEER,
                         "WELCOME message of %u bytes, not a whole number of %d-byte records",
                         x.length, COLLGEN__WIRE_INFO);
  if (x.nfds > (fds_ok ? COLLGEN__BOOT_MAX_FDS : 0))
    return collgen__fail(err, n, COLLGEN_ERR_PEER,
                         "%s message announces %u descriptors (allowed %d)", type_name(x.type),
                         x.nfds, fds_ok ? COLLGEN__BOOT_MAX_FDS : 0);
  if (x.rank >= COLLGEN__BOOT_MAX_RANKS &&
      !(x.type == COLLGEN__MSG_ERROR && x.rank == COLLGEN__WIRE_NO_RANK))
    return collgen__fail(err, n, COLLGEN_ERR_PEER,
                         "%s message about rank %u (at most %d ranks)", type_name(x.type),
                         x.rank, COLLGEN__BOOT_MAX_RANKS);
  *h = x;
  return COLLGEN_OK;
}

void collgen__wire_pack_info(uint8_t *out, const collgen__wire_info *info) {
  collgen__wire_put32(out, info->rank);
  collgen__wire_put32(out + 4, info->nranks);
  collgen__wire_put32(out + 8, info->pid);
  collgen__wire_put32(out + 12, info->flags);
  memcpy(out + 16, info->host, COLLGEN__HOST_ID_BYTES);
}

int collgen__wire_parse_info(const uint8_t *in, collgen__wire_info *info, char *err, size_t n) {
  collgen__wire_info x = {collgen__wire_get32(in), collgen__wire_get32(in + 4),
                          collgen__wire_get32(in + 8), collgen__wire_get32(in + 12), {0}};
  memcpy(x.host, in + 16, COLLGEN__HOST_ID_BYTES);
  if (x.nranks < 1 || x.nranks > COLLGEN__BOOT_MAX_RANKS)
    return collgen__fail(err, n, COLLGEN_ERR_PEER, "rank record with nranks %u (allowed 1..%d)",
                         x.nranks, COLLGEN__BOOT_MAX_RANKS);
  if (x.rank >= x.nranks)
    return collgen__fail(err, n, COLLGEN_ERR_PEER, "rank record of rank %u of %u ranks", x.rank,
                         x.nranks);
  if (x.flags != 0)
    return collgen__fail(err, n, COLLGEN_ERR_PEER, "rank record with unknown flags 0x%x",
                         x.flags);
  if (x.pid > INT_MAX)
    return collgen__fail(err, n, COLLGEN_ERR_PEER, "rank record with pid %u", x.pid);
  *info = x;
  return COLLGEN_OK;
}

size_t collgen__wire_pack_error(uint8_t *out, int status, const char *text) {
  size_t len = strnlen(text, COLLGEN__WIRE_MAX_TEXT);
  collgen__wire_put32(out, (uint32_t)status);
  memcpy(out + 4, text, len);
  return 4 + len;
}

int collgen__wire_parse_error(const uint8_t *in, size_t len, char *text, size_t textlen) {
  int status = (int)collgen__wire_get32(in);
  /* A peer's status is data: only a known failure code is taken as is. */
  if (status >= 0 || strcmp(collgen_status_name(status), "COLLGEN_ERR_UNKNOWN") == 0)
    status = COLLGEN_ERR_PEER;
  size_t k = 0;
  for (size_t i = 4; i < len && k + 1 < textlen; ++i, ++k) {
    uint8_t c = in[i];
    text[k] = (c >= 0x20 && c < 0x7f) ? (char)c : '?';
  }
  if (textlen) text[k] = 0;
  return status;
}

static int differs(const uint8_t *a, const uint8_t *b, size_t n) {
  uint8_t d = 0; /* no early exit: the time taken says nothing about the secret */
  for (size_t i = 0; i < n; ++i) d |= (uint8_t)(a[i] ^ b[i]);
  return d != 0;
}

int collgen__wire_check_hello(const collgen__wire_header *h, const uint8_t *p,
                              const uint8_t tag[COLLGEN__UID_TAG_BYTES],
                              const uint8_t secret[COLLGEN__UID_SECRET_BYTES], int nranks,
                              int pid, collgen__wire_info *info, char *why, size_t n) {
  if (h->type != COLLGEN__MSG_HELLO || h->length != COLLGEN__WIRE_HELLO) {
    collgen__fail(why, n, 1, "its first message is not a HELLO");
    return 1;
  }
  if (memcmp(p, tag, COLLGEN__UID_TAG_BYTES) != 0 ||
      differs(p + COLLGEN__UID_TAG_BYTES, secret, COLLGEN__UID_SECRET_BYTES)) {
    collgen__fail(why, n, 2, "wrong secret");
    return 2;
  }
  /* A member: from here on a bad record is the job's fault, not a
  ** stranger's. */
  char bad[256];
  if (collgen__wire_parse_info(p + COLLGEN__UID_TAG_BYTES + COLLGEN__UID_SECRET_BYTES, info, bad,
                               sizeof bad) != COLLGEN_OK)
    return collgen__fail(why, n, COLLGEN_ERR_PEER, "pid %d sent a bad rank record: %s", pid, bad);
  if ((int)info->nranks != nranks)
    return collgen__fail(why, n, COLLGEN_ERR_INVALID_ARG,
                         "rank %u (pid %d) was started with nranks %u, rank 0 with nranks %d",
                         info->rank, pid, info->nranks, nranks);
  if (info->rank == 0)
    return collgen__fail(why, n, COLLGEN_ERR_INVALID_ARG,
                         "pid %d also claims rank 0, which is the listening process", pid);
  return COLLGEN_OK;
}

int collgen__wire_check_contrib(const collgen__wire_header *h, uint32_t seq, int rank,
                                size_t bytes, int nfds, char *why, size_t n) {
  if (h->type == COLLGEN__MSG_ERROR) return COLLGEN_OK;
  if (h->type != COLLGEN__MSG_CONTRIB)
    return collgen__fail(why, n, COLLGEN_ERR_PEER, "sent a %s message, not a contribution",
                         type_name(h->type));
  if (h->seq != seq || h->rank != (uint32_t)rank)
    return collgen__fail(why, n, COLLGEN_ERR_INVALID_ARG,
                         "sent its exchange #%u as rank %u (every rank must make the same "
                         "exchanges in the same order)", h->seq, h->rank);
  if (h->length != bytes || h->nfds != (uint32_t)nfds)
    return collgen__fail(why, n, COLLGEN_ERR_INVALID_ARG,
                         "brought %u bytes and %u descriptors, rank 0 %zu bytes and %d "
                         "descriptors", h->length, h->nfds, bytes, nfds);
  return COLLGEN_OK;
}

void collgen__wire_rx_init(collgen__wire_rx *rx, void *buf, size_t cap, int max_fds) {
  rx->got = 0;
  rx->have_header = 0;
  rx->buf = buf;
  rx->cap = cap;
  rx->nfds = 0;
  rx->max_fds = max_fds < 0 ? 0 : max_fds > COLLGEN__BOOT_MAX_FDS ? COLLGEN__BOOT_MAX_FDS
                                                                    : max_fds;
  rx->closed = 0;
}

void collgen__wire_rx_close_fds(collgen__wire_rx *rx) {
  for (int i = 0; i < rx->nfds; ++i) close(rx->fds[i]);
  rx->nfds = 0;
}

/* Closes what was received and fails with a message (COLLGEN_ERR_PEER). */
static int rx_fail(collgen__wire_rx *rx, char *err, size_t n, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int rx_fail(collgen__wire_rx *rx, char *err, size_t n, const char *fmt, ...) {
  collgen__wire_rx_close_fds(rx);
  va_list ap;
  va_start(ap, fmt);
  int status = collgen__vfail(err, n, COLLGEN_ERR_PEER, fmt, ap);
  va_end(ap);
  return status;
}

/* Takes the descriptors of one recvmsg, closing any beyond what the
** message may carry. Returns 0, 1 when some were refused, 2 when the
** kernel could not deliver them all (MSG_CTRUNC: out of descriptors, or
** more than fit the control buffer). */
static int take_fds(collgen__wire_rx *rx, struct msghdr *m) {
  int refused = 0;
  for (struct cmsghdr *c = CMSG_FIRSTHDR(m); c; c = CMSG_NXTHDR(m, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < k; ++i) {
      int fd;
      memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
      if (rx->nfds < rx->max_fds) rx->fds[rx->nfds++] = fd;
      else {
        close(fd);
        refused = 1;
      }
    }
  }
  return (m->msg_flags & MSG_CTRUNC) ? 2 : refused;
}

int collgen__wire_rx_step(collgen__wire_rx *rx, int fd, char *err, size_t n) {
  size_t want;
  uint8_t *dst;
  if (!rx->have_header) {
    want = COLLGEN__WIRE_HEADER - rx->got;
    dst = rx->head + rx->got;
  } else {
    /* The caller may look at the header (rx->have_header) between steps
    ** and refuse it with a better message; the buffer bound is enforced
    ** here, before any payload byte is read. */
    int is_error = rx->h.type == COLLGEN__MSG_ERROR;
    if (!is_error && rx->h.length > rx->cap)
      return rx_fail(rx, err, n, "%s message announces %u payload bytes, at most %zu expected "
                     "here", type_name(rx->h.type), rx->h.length, rx->cap);
    size_t done = rx->got - COLLGEN__WIRE_HEADER;
    want = rx->h.length - done;
    dst = (is_error ? rx->text : rx->buf) + done;
  }
  /* Room for one more descriptor than allowed, so an excess shows up
  ** (and is closed) instead of being silently truncated. */
  union {
    struct cmsghdr align;
    char buf[CMSG_SPACE(sizeof(int) * (COLLGEN__BOOT_MAX_FDS + 1))];
  } ctl;
  struct iovec iov = {dst, want};
  struct msghdr m = {0};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  m.msg_control = ctl.buf;
  m.msg_controllen = sizeof ctl.buf;
  ssize_t r;
  do r = recvmsg(fd, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
  while (r < 0 && errno == EINTR);
  if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
  if (r > 0) {
    int bad = take_fds(rx, &m);
    if (bad == 2)
      return rx_fail(rx, err, n, "file descriptors were lost on receipt (MSG_CTRUNC): this "
                     "process may be out of descriptors (RLIMIT_NOFILE)");
    if (bad)
      return rx_fail(rx, err, n, "unexpected file descriptors with a message (%d allowed here)",
                     rx->max_fds);
  }
  if (r == 0 || (r < 0 && (errno == ECONNRESET || errno == EPIPE))) {
    rx->closed = 1;
    if (rx->got == 0) return rx_fail(rx, err, n, "closed the connection");
    if (!rx->have_header)
      return rx_fail(rx, err, n, "closed the connection in the middle of a message header "
                     "(%zu of %d bytes)", rx->got, COLLGEN__WIRE_HEADER);
    return rx_fail(rx, err, n, "closed the connection in the middle of a %s message "
                   "(%zu of %zu bytes)", type_name(rx->h.type), rx->got,
                   (size_t)COLLGEN__WIRE_HEADER + rx->h.length);
  }
  if (r < 0) return rx_fail(rx, err, n, "recvmsg failed: %s", strerror(errno));
  rx->got += (size_t)r;
  if (!rx->have_header) {
    if (rx->got < COLLGEN__WIRE_HEADER) return 0;
    char why[256];
    if (collgen__wire_parse_header(rx->head, &rx->h, why, sizeof why) != COLLGEN_OK)
      return rx_fail(rx, err, n, "%s", why);
    rx->have_header = 1;
    if (rx->h.nfds > (uint32_t)rx->max_fds)
      return rx_fail(rx, err, n, "%s message announces %u descriptors, %d allowed here",
                     type_name(rx->h.type), rx->h.nfds, rx->max_fds);
  }
  if (rx->got < COLLGEN__WIRE_HEADER + rx->h.length) return 0;
  if ((uint32_t)rx->nfds != rx->h.nfds)
    return rx_fail(rx, err, n, "%s message announced %u descriptors, %d arrived",
                   type_name(rx->h.type), rx->h.nfds, rx->nfds);
  return 1;
}

int collgen__wire_rx_pull(collgen__wire_rx *rx, int fd, char *err, size_t n) {
  int rc;
  size_t before;
  do { /* one step reads at most the rest of the header or of the payload */
    before = rx->got;
    rc = collgen__wire_rx_step(rx, fd, err, n);
  } while (rc == 0 && rx->got > before);
  return rc;
}

int collgen__wire_recv(collgen__wire_rx *rx, int fd, double deadline, char *err, size_t n) {
  for (;;) {
    int rc = collgen__wire_rx_step(rx, fd, err, n);
    if (rc == 1) return COLLGEN_OK;
    if (rc < 0) return rc;
    int wait = collgen__ms_left(deadline);
    if (wait == 0) {
      collgen__wire_rx_close_fds(rx);
      return collgen__fail(err, n, COLLGEN_ERR_TIMEOUT, "no whole message in time");
    }
    struct pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, wait) < 0 && errno != EINTR) {
      int e = errno;
      collgen__wire_rx_close_fds(rx);
      return collgen__fail(err, n, COLLGEN_ERR_PEER, "poll failed: %s", strerror(e));
    }
  }
}

int collgen__wire_send(int fd, const collgen__wire_header *h, const void *payload, size_t len,
                       const int *fds, int nfds, double deadline, int *closed, char *err,
                       size_t n) {
  uint8_t head[COLLGEN__WIRE_HEADER];
  collgen__wire_pack_header(head, h);
  return collgen__wire_send2(fd, head, sizeof head, payload, len, fds, nfds, deadline, closed,
                             err, n);
}

int collgen__wire_send2(int fd, const void *a, size_t alen, const void *b, size_t blen,
                        const int *fds, int nfds, double deadline, int *closed, char *err,
                        size_t n) {
  union {
    struct cmsghdr align;
    char buf[CMSG_SPACE(sizeof(int) * COLLGEN__BOOT_MAX_FDS)];
  } ctl;
  size_t total = alen + blen, sent = 0;
  *closed = 0;
  while (sent < total) {
    struct iovec iov[2];
    int niov = 0;
    if (sent < alen) iov[niov++] = (struct iovec){(uint8_t *)a + sent, alen - sent};
    size_t off = sent > alen ? sent - alen : 0;
    if (blen > off) iov[niov++] = (struct iovec){(uint8_t *)b + off, blen - off};
    struct msghdr m = {0};
    m.msg_iov = iov;
    m.msg_iovlen = (size_t)niov;
    if (sent == 0 && nfds > 0) { /* the descriptors ride on the first byte */
      memset(&ctl, 0, sizeof ctl);
      m.msg_control = ctl.buf;
      m.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
      struct cmsghdr *c = CMSG_FIRSTHDR(&m);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
      memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)nfds);
    }
    ssize_t w = sendmsg(fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w > 0) {
      sent += (size_t)w;
      continue;
    }
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && (errno == EPIPE || errno == ECONNRESET)) {
      *closed = 1;
      return collgen__fail(err, n, COLLGEN_ERR_PEER, "closed the connection");
    }
    if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
      int e = errno;
      return collgen__fail(err, n, e == EBADF ? COLLGEN_ERR_INVALID_ARG : COLLGEN_ERR_PEER,
                           "sendmsg failed: %s", strerror(e));
    }
    int wait = collgen__ms_left(deadline);
    if (wait == 0)
      return collgen__fail(err, n, COLLGEN_ERR_TIMEOUT,
                           "could not send in time (%zu of %zu bytes sent; not reading?)",
                           sent, total);
    struct pollfd p = {fd, POLLOUT, 0};
    if (poll(&p, 1, wait) < 0 && errno != EINTR) {
      int e = errno;
      return collgen__fail(err, n, COLLGEN_ERR_PEER, "poll failed: %s", strerror(e));
    }
  }
  return COLLGEN_OK;
}
