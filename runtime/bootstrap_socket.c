/*
** bootstrap_socket.c -- the socket transport of the bootstrap: rank 0
** listens on the abstract Unix socket named by the id's tag and accepts
** the other ranks (same user, right secret), then relays every exchange:
** it gathers each rank's contribution and sends everyone the whole. A
** connection gets COLLGEN__BOOT_AUTH_MS and one of COLLGEN__BOOT_MAX_PENDING
** slots (the oldest makes room) to prove the secret, so strangers cannot
** crowd out the ranks; a rank whose connection is dropped connects again.
** Every wait polls against a deadline; every refusal and fault names the
** process or rank at fault, and every dropped stranger is counted.
** bootstrap.c calls it through collgen__boot_socket_ops (at the end).
** Protocol and reasons: docs/multiprocess.md.
*/
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "bootstrap_handle.h"

/* How long a best-effort ERROR to a peer may take. */
#define NOTIFY_MS 50

static socklen_t make_addr(struct sockaddr_un *a, const uint8_t tag[COLLGEN__UID_TAG_BYTES]) {
  char name[48];
  collgen__boot_name(tag, name);
  memset(a, 0, sizeof *a);
  a->sun_family = AF_UNIX;
  size_t len = strlen(name);
  memcpy(a->sun_path + 1, name, len); /* sun_path[0] = 0: abstract namespace */
  return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + len);
}

/* The peer's credentials; -1 fields when unknown. */
static struct ucred peer_cred(int fd) {
  struct ucred c = {-1, (uid_t)-1, (gid_t)-1};
  socklen_t len = sizeof c;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &c, &len) != 0) c.pid = -1, c.uid = (uid_t)-1;
  return c;
}

/* Sends ERROR(status, text) without waiting long; failures are ignored
** (the peer may be gone, which is why we are telling it). */
static void notify(int fd, int status, uint32_t seq, const char *text) {
  if (fd < 0) return;
  uint8_t payload[4 + COLLGEN__WIRE_MAX_TEXT];
  size_t len = collgen__wire_pack_error(payload, status, text);
  collgen__wire_header h = {COLLGEN__MSG_ERROR, seq, COLLGEN__WIRE_NO_RANK, (uint32_t)len, 0};
  int closed;
  char ignored[64];
  collgen__wire_send(fd, &h, payload, len, NULL, 0, collgen__now_ms() + NOTIFY_MS, &closed,
                     ignored, sizeof ignored);
}

/* The table's abort: tells every peer that this rank failed (status,
** b->err) and closes the connections. */
static void socket_abort(collgen__boot *b, int status) {
  for (int r = 0; r < b->nranks; ++r)
    if (b->conn[r] >= 0) {
      notify(b->conn[r], status, b->seq, b->err);
      close(b->conn[r]);
      b->conn[r] = -1;
    }
}

/* ---- Rank 0: the rendezvous ------------------------------------------- */

/* Connections rank 0 accepts in one poll round at most (it drains the
** backlog each round, but a flood cannot keep it from the connections it
** already has); and the listen backlog beyond nranks. */
#define ACCEPT_BATCH 256
/* Per-connection warnings rank 0 logs in one rendezvous; the rest are only
** counted (a flood must not flood the log). */
#define MAX_LOGGED 8

typedef struct {
  int fd;
  struct ucred cred;
  double since; /* accepted at (collgen__now_ms) */
  collgen__wire_rx rx;
  uint8_t hello[COLLGEN__WIRE_HELLO];
} pending;

typedef struct {
  collgen__boot *b;
  const uint8_t *tag, *secret;
  pending *wait;          /* COLLGEN__BOOT_MAX_PENDING slots; fd -1 = free */
  collgen__wire_info *info; /* per rank; info[r].nranks 0 until r joined */
  collgen__wire_rx *rx;   /* per joined rank: watches for an ERROR or EOF */
  int joined;
  /* Connections that did not prove the secret, by fate: */
  int refused;            /* failed authentication (user, bytes, secret) */
  int expired;            /* dropped: no whole HELLO in COLLGEN__BOOT_AUTH_MS */
  int evicted;            /* dropped: the oldest waiting when another came */
  int logged;             /* warnings logged about them */
  char refusals[512];     /* the first few refusals, for the timeout message */
} root_state;

/* Logs a warning about a connection, while the budget lasts. */
static void warn_stranger(root_state *s, const struct ucred *c, const char *what,
                          const char *why) {
  if (s->logged < MAX_LOGGED)
    collgen__log(COLLGEN_LOG_WARN, "bootstrap rank 0: %s a connection from pid %d (uid %d): %s",
                 what, (int)c->pid, (int)c->uid, why);
  else if (s->logged == MAX_LOGGED)
    collgen__log(COLLGEN_LOG_WARN, "bootstrap rank 0: further connections that do not prove "
                 "the secret are counted, not logged (the rendezvous's outcome gives the counts)");
  s->logged++;
}

/* Notes a connection refused before authentication: a warning, and a line
** for a later timeout message. The caller closes it. */
static void refuse(root_state *s, const struct ucred *c, const char *why) {
  warn_stranger(s, c, "refused", why);
  size_t used = strlen(s->refusals);
  if (s->refused++ < 3)
    snprintf(s->refusals + used, sizeof s->refusals - used, "%spid %d (uid %d): %s",
             used ? "; " : "", (int)c->pid, (int)c->uid, why);
}

/* Drops pending connection p, which has not proved the secret, telling it
** to connect again (a real rank does), and counts it in *count. */
static void drop(root_state *s, pending *p, int *count, const char *why) {
  warn_stranger(s, &p->cred, "dropped", why);
  collgen__wire_header h = {COLLGEN__MSG_RETRY, 0, 0, 0, 0};
  int closed;
  char ignored[64];
  /* no wait: rank 0 sends nothing else on it, so the buffer has room */
  collgen__wire_send(p->fd, &h, NULL, 0, NULL, 0, collgen__now_ms(), &closed, ignored,
                     sizeof ignored);
  close(p->fd);
  p->fd = -1;
  (*count)++;
}

/* Appends "; " (unless out is empty) and a printf text to out[n]. */
static void add_clause(char *out, size_t n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void add_clause(char *out, size_t n, const char *fmt, ...) {
  size_t used = strlen(out);
  if (used && used + 2 < n) memcpy(out + used, "; ", 3), used += 2;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(out + used, n - used, fmt, ap);
  va_end(ap);
}

/* What became of the connections that did not prove the secret, as
** "refused 2 connections: ...; 36 connections dropped unproven to make room
** ..." into out[n]; empty when there were none. */
static void strangers(const root_state *s, char *out, size_t n) {
  int waiting = 0;
  for (int i = 0; i < COLLGEN__BOOT_MAX_PENDING; ++i) waiting += s->wait[i].fd >= 0;
  out[0] = 0;
  if (s->refused)
    add_clause(out, n, "refused %d connection%s: %s%s", s->refused, s->refused > 1 ? "s" : "",
               s->refusals, s->refused > 3 ? "; ..." : "");
  if (s->expired)
    add_clause(out, n, "%d connection%s dropped for not proving the secret within %d ms",
               s->expired, s->expired > 1 ? "s" : "", COLLGEN__BOOT_AUTH_MS);
  if (s->evicted)
    add_clause(out, n, "%d connection%s dropped unproven to make room for newer ones (at most "
               "%d wait)", s->evicted, s->evicted > 1 ? "s" : "", COLLGEN__BOOT_MAX_PENDING);
  if (waiting)
    add_clause(out, n, "%d connection%s still waiting to prove the secret", waiting,
               waiting > 1 ? "s" : "");
}

/* Handles a complete first message on pending slot p: refuses it (and
** frees the slot), admits the rank, or fails the rendezvous (returned
** status). */
static int admit(root_state *s, pending *p) {
  collgen__boot *b = s->b;
  int fd = p->fd, pid = (int)p->cred.pid;
  p->fd = -1;
  collgen__wire_info in;
  char why[512];
  int rc = collgen__wire_check_hello(&p->rx.h, p->hello, s->tag, s->secret, b->nranks, pid, &in,
                                     why, sizeof why);
  if (rc == 1 || rc == 2) {
    refuse(s, &p->cred, why);
    if (rc == 2)
      notify(fd, COLLGEN_ERR_INVALID_ARG, 0,
             "rank 0 refused this process: wrong secret (its id is not the one rank 0 was "
             "given)");
    close(fd);
    return COLLGEN_OK;
  }
  if (rc == COLLGEN_OK && b->conn[in.rank] >= 0)
    rc = collgen__fail(why, sizeof why, COLLGEN_ERR_INVALID_ARG,
                       "two processes claim rank %u: pids %d and %d", in.rank,
                       (int)s->info[in.rank].pid, pid);
  if (rc != COLLGEN_OK) {
    collgen__boot_fail(b, rc, "rendezvous: %s", why);
    notify(fd, rc, 0, b->err);
    close(fd);
    return rc;
  }
  in.pid = (uint32_t)pid; /* the kernel's word, in this pid namespace */
  s->info[in.rank] = in;
  b->conn[in.rank] = fd;
  collgen__wire_rx_init(&s->rx[in.rank], NULL, 0, 0);
  s->joined++;
  collgen__log(COLLGEN_LOG_INFO, "bootstrap rank 0: rank %u (pid %d) joined (%d of %d)", in.rank,
               pid, s->joined, b->nranks);
  return COLLGEN_OK;
}

/* Reads all that pending connection p has sent: a whole first message is
** admitted or refused, a broken one refused; either frees the slot. 0, or
** the status that fails the rendezvous. */
static int read_pending(root_state *s, pending *p) {
  char why[300];
  int rc = collgen__wire_rx_pull(&p->rx, p->fd, why, sizeof why);
  if (rc == 1) return admit(s, p);
  if (rc < 0) {
    refuse(s, &p->cred, why);
    close(p->fd);
    p->fd = -1;
  }
  return COLLGEN_OK;
}

/* Accepts what the listener has, ACCEPT_BATCH at most: refuses other users;
** reads each connection at once (a rank sends its HELLO right after it
** connects); makes room for a new one by dropping the oldest waiting.
** 0, or the status that fails the rendezvous. */
static int accept_all(root_state *s, int listener) {
  for (int k = 0; k < ACCEPT_BATCH && s->joined < s->b->nranks; ++k) {
    int fd = accept4(listener, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK)
        collgen__log(COLLGEN_LOG_WARN, "bootstrap rank 0: accept failed: %s", strerror(errno));
      return COLLGEN_OK;
    }
    struct ucred c = peer_cred(fd);
    if (c.uid != geteuid()) {
      refuse(s, &c, "another user");
      close(fd);
      continue;
    }
    pending *slot = NULL, *oldest = &s->wait[0];
    for (int i = 0; i < COLLGEN__BOOT_MAX_PENDING && !slot; ++i) {
      if (s->wait[i].fd < 0) slot = &s->wait[i];
      else if (s->wait[i].since < oldest->since) oldest = &s->wait[i];
    }
    if (!slot) {
      int rc = read_pending(s, oldest); /* its HELLO may have come since */
      if (rc != COLLGEN_OK) {
        close(fd);
        return rc;
      }
      if (oldest->fd >= 0)
        drop(s, oldest, &s->evicted, "the oldest of those yet to prove the secret when a newer "
             "connection needed its slot");
      slot = oldest;
    }
    slot->fd = fd;
    slot->cred = c;
    slot->since = collgen__now_ms();
    collgen__wire_rx_init(&slot->rx, slot->hello, sizeof slot->hello, 0);
    int rc = read_pending(s, slot);
    if (rc != COLLGEN_OK) return rc;
  }
  return COLLGEN_OK;
}

/* Drops the pending connections whose COLLGEN__BOOT_AUTH_MS have passed
** (after reading what they sent) and lowers *next to the earliest deadline
** left. 0, or the status that fails the rendezvous. */
static int expire(root_state *s, double *next) {
  double now = collgen__now_ms();
  char why[128];
  snprintf(why, sizeof why, "it did not prove the secret within %d ms", COLLGEN__BOOT_AUTH_MS);
  for (int i = 0; i < COLLGEN__BOOT_MAX_PENDING; ++i) {
    pending *p = &s->wait[i];
    if (p->fd < 0) continue;
    double end = p->since + COLLGEN__BOOT_AUTH_MS;
    if (end <= now) {
      int rc = read_pending(s, p);
      if (rc != COLLGEN_OK) return rc;
      if (p->fd >= 0) drop(s, p, &s->expired, why);
    } else if (end < *next) {
      *next = end;
    }
  }
  return COLLGEN_OK;
}

/* The ranks that have not joined, as "2, 5" into out. */
static void list_missing(const collgen__boot *b, const uint8_t *done, char *out, size_t n) {
  size_t used = 0;
  out[0] = 0;
  for (int r = 0; r < b->nranks && used + 16 < n; ++r)
    if (!done[r]) used += (size_t)snprintf(out + used, n - used, "%s%d", used ? ", " : "", r);
}

static int root_timeout(root_state *s) {
  collgen__boot *b = s->b;
  uint8_t *done = calloc((size_t)b->nranks, 1);
  char missing[512] = "?";
  if (done) {
    done[0] = 1;
    for (int r = 1; r < b->nranks; ++r) done[r] = b->conn[r] >= 0;
    list_missing(b, done, missing, sizeof missing);
  }
  free(done);
  char others[1024];
  strangers(s, others, sizeof others);
  return collgen__boot_fail(b, COLLGEN_ERR_TIMEOUT,
                            "rendezvous timed out after %d ms: rank%s %s of %d never joined "
                            "(%d of %d present)%s%s", b->timeout_ms,
                            b->nranks - s->joined > 1 ? "s" : "", missing, b->nranks, s->joined,
                            b->nranks, others[0] ? "; " : "", others);
}

/* Reads what a joined rank sent before the WELCOME: only an ERROR (it gave
** up) or nothing is expected; its departure ends the rendezvous. */
static int watch_joined(root_state *s, int r) {
  collgen__boot *b = s->b;
  char why[300];
  int rc = collgen__wire_rx_step(&s->rx[r], b->conn[r], why, sizeof why);
  int pid = (int)s->info[r].pid;
  if (rc == 0) return COLLGEN_OK;
  if (rc == 1 && s->rx[r].h.type == COLLGEN__MSG_ERROR) {
    char text[COLLGEN__WIRE_MAX_TEXT + 1];
    int st = collgen__wire_parse_error(s->rx[r].text, s->rx[r].h.length, text, sizeof text);
    return collgen__boot_fail(b, st, "rendezvous: rank %d (pid %d) gave up: %s", r, pid, text);
  }
  if (rc == 1)
    snprintf(why, sizeof why, "it sent a message before the rendezvous ended");
  if (s->rx[r].closed)
    return collgen__boot_fail(b, COLLGEN_ERR_PEER,
                              "rendezvous: rank %d (pid %d) closed its connection before every "
                              "rank joined (it exited or was killed)", r, pid);
  return collgen__boot_fail(b, COLLGEN_ERR_PEER, "rendezvous: rank %d (pid %d): %s", r, pid, why);
}

static int root_poll(root_state *s, int listener, double deadline) {
  collgen__boot *b = s->b;
  struct pollfd fds[1 + COLLGEN__BOOT_MAX_PENDING + COLLGEN__BOOT_MAX_RANKS];
  /* What each entry is: 0 the listener, 1 + i pending slot i, -r rank r. */
  int owner[1 + COLLGEN__BOOT_MAX_PENDING + COLLGEN__BOOT_MAX_RANKS];
  while (s->joined < b->nranks) {
    double next = deadline;
    int rc = expire(s, &next);
    if (rc != COLLGEN_OK) return rc;
    int n = 0;
    for (int i = 0; i < COLLGEN__BOOT_MAX_PENDING; ++i)
      if (s->wait[i].fd >= 0) {
        fds[n] = (struct pollfd){s->wait[i].fd, POLLIN, 0};
        owner[n++] = 1 + i;
      }
    for (int r = 1; r < b->nranks; ++r)
      if (b->conn[r] >= 0) {
        fds[n] = (struct pollfd){b->conn[r], POLLIN, 0};
        owner[n++] = -r;
      }
    /* last, so that accepting (which may reuse a slot) follows the reads */
    fds[n] = (struct pollfd){listener, POLLIN, 0};
    owner[n++] = 0;
    if (collgen__ms_left(deadline) == 0) return root_timeout(s);
    int ready = poll(fds, (nfds_t)n, collgen__ms_left(next));
    if (ready < 0 && errno != EINTR)
      return collgen__boot_fail(b, COLLGEN_ERR_IO, "rendezvous: poll failed: %s",
                                strerror(errno));
    for (int k = 0; ready > 0 && k < n && rc == COLLGEN_OK; ++k) {
      if (!fds[k].revents) continue;
      if (owner[k] == 0) rc = accept_all(s, listener);
      else if (owner[k] > 0) rc = read_pending(s, &s->wait[owner[k] - 1]);
      else rc = watch_joined(s, -owner[k]);
    }
    if (rc != COLLGEN_OK) return rc;
  }
  return COLLGEN_OK;
}

static int root_listen(collgen__boot *b, const uint8_t *tag, int *listener) {
  struct sockaddr_un a;
  socklen_t len = make_addr(&a, tag);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return collgen__boot_fail(b, COLLGEN_ERR_IO, "rendezvous: socket failed: %s",
                              strerror(errno));
  if (bind(fd, (struct sockaddr *)&a, len) != 0) {
    int e = errno;
    close(fd);
    if (e == EADDRINUSE)
      return collgen__boot_fail(b, COLLGEN_ERR_INVALID_ARG,
                                "rendezvous: another process already listens for this id (a "
                                "second rank 0, or a bootstrap with this id still running: make "
                                "a fresh id per job)");
    return collgen__boot_fail(b, COLLGEN_ERR_IO, "rendezvous: bind failed: %s", strerror(e));
  }
  if (listen(fd, b->nranks + ACCEPT_BATCH) != 0) {
    int e = errno;
    close(fd);
    return collgen__boot_fail(b, COLLGEN_ERR_IO, "rendezvous: listen failed: %s", strerror(e));
  }
  *listener = fd;
  return COLLGEN_OK;
}

/* Sends every joined rank the table of all ranks' records. */
static int root_welcome(root_state *s, double deadline) {
  collgen__boot *b = s->b;
  size_t len = (size_t)b->nranks * COLLGEN__WIRE_INFO;
  uint8_t *table = malloc(len);
  if (!table) return collgen__boot_fail(b, COLLGEN_ERR_NO_MEMORY, "rendezvous: out of memory");
  for (int r = 0; r < b->nranks; ++r)
    collgen__wire_pack_info(table + (size_t)r * COLLGEN__WIRE_INFO, &s->info[r]);
  int rc = COLLGEN_OK;
  for (int r = 1; r < b->nranks && rc == COLLGEN_OK; ++r) {
    collgen__wire_header h = {COLLGEN__MSG_WELCOME, 0, 0, (uint32_t)len, 0};
    int closed;
    char why[256];
    rc = collgen__wire_send(b->conn[r], &h, table, len, NULL, 0, deadline, &closed, why,
                            sizeof why);
    if (rc != COLLGEN_OK)
      collgen__boot_fail(b, rc, "rendezvous: rank %d (pid %d): %s", r, (int)s->info[r].pid,
                         why);
  }
  free(table);
  return rc;
}

static int root_join(collgen__boot *b, const uint8_t *tag, const uint8_t *secret,
                     const collgen__wire_info *self, double deadline) {
  root_state s = {b, tag, secret, NULL, NULL, NULL, 1, 0, 0, 0, 0, ""};
  s.wait = malloc(COLLGEN__BOOT_MAX_PENDING * sizeof *s.wait);
  s.info = calloc((size_t)b->nranks, sizeof *s.info);
  s.rx = malloc((size_t)b->nranks * sizeof *s.rx);
  if (s.wait)
    for (int i = 0; i < COLLGEN__BOOT_MAX_PENDING; ++i) s.wait[i].fd = -1;
  int listener = -1;
  int rc = (!s.wait || !s.info || !s.rx)
               ? collgen__boot_fail(b, COLLGEN_ERR_NO_MEMORY, "rendezvous: out of memory")
               : root_listen(b, tag, &listener);
  if (rc == COLLGEN_OK) {
    s.info[0] = *self;
    rc = root_poll(&s, listener, deadline);
    close(listener); /* frees the name: nobody else can join now */
  }
  if (rc == COLLGEN_OK) {
    char others[1024];
    strangers(&s, others, sizeof others);
    if (others[0])
      collgen__log(COLLGEN_LOG_WARN, "bootstrap rank 0: every rank joined; %s", others);
  }
  if (rc == COLLGEN_OK) rc = root_welcome(&s, deadline + COLLGEN__BOOT_GRACE_MS);
  if (s.wait)
    for (int i = 0; i < COLLGEN__BOOT_MAX_PENDING; ++i)
      if (s.wait[i].fd >= 0) close(s.wait[i].fd);
  if (rc == COLLGEN_OK)
    for (int r = 0; r < b->nranks; ++r) {
      b->peers[r].pid = (int)s.info[r].pid;
      memcpy(b->peers[r].host, s.info[r].host, COLLGEN__HOST_ID_BYTES);
    }
  else
    socket_abort(b, rc);
  if (s.wait) /* received secrets */
    explicit_bzero(s.wait, COLLGEN__BOOT_MAX_PENDING * sizeof *s.wait);
  free(s.wait);
  free(s.info);
  free(s.rx);
  return rc;
}

/* ---- Other ranks: the rendezvous --------------------------------------- */

/* Reads what rank 0 sent before it closed the connection into rx: 1 when a
** whole message is there. */
static int last_message(collgen__boot *b, collgen__wire_rx *rx) {
  char why[64];
  int rc = collgen__wire_rx_pull(rx, b->conn[0], why, sizeof why);
  collgen__wire_rx_close_fds(rx);
  return rc == 1;
}

/* After a failed send to rank 0: rank 0's ERROR, if it sent one before it
** closed, explains more than the closed connection does. Returns its
** status (message in b->err) or 0 if none is waiting. */
static int pending_error(collgen__boot *b, const char *when) {
  collgen__wire_rx rx;
  collgen__wire_rx_init(&rx, NULL, 0, 0);
  if (!last_message(b, &rx) || rx.h.type != COLLGEN__MSG_ERROR) return COLLGEN_OK;
  char text[COLLGEN__WIRE_MAX_TEXT + 1];
  int st = collgen__wire_parse_error(rx.text, rx.h.length, text, sizeof text);
  return collgen__boot_fail(b, st, "%s: rank 0 (pid %d) reports: %s", when, b->peers[0].pid,
                            text);
}

/* Rank 0's connection is closed: the failure, naming it. */
static int root_left(collgen__boot *b, const char *when) {
  return collgen__boot_fail(b, COLLGEN_ERR_PEER,
                            "%s: rank 0 (pid %d) closed its connection (it exited, was killed or "
                            "destroyed its bootstrap)", when, b->peers[0].pid);
}

/* What collgen__wire_recv's outcome rc (reason why) from rank 0 comes to:
** an ERROR, a closed connection, a malformed message or the deadline
** become b's error, naming rank 0. */
static int root_answer(collgen__boot *b, const collgen__wire_rx *rx, int rc, const char *why,
                       const char *when) {
  int pid = b->peers[0].pid;
  if (rc == COLLGEN_ERR_TIMEOUT)
    return collgen__boot_fail(b, rc, "%s: rank 0 (pid %d) did not answer within %d ms", when,
                              pid, b->timeout_ms + COLLGEN__BOOT_GRACE_MS);
  if (rc == COLLGEN_OK && rx->h.type == COLLGEN__MSG_ERROR) {
    char text[COLLGEN__WIRE_MAX_TEXT + 1];
    int st = collgen__wire_parse_error(rx->text, rx->h.length, text, sizeof text);
    return collgen__boot_fail(b, st, "%s: rank 0 (pid %d) reports: %s", when, pid, text);
  }
  if (rc != COLLGEN_OK && rx->closed) return root_left(b, when);
  if (rc != COLLGEN_OK)
    return collgen__boot_fail(b, rc, "%s: from rank 0 (pid %d): %s", when, pid, why);
  return COLLGEN_OK;
}

/* Reads one message from rank 0 into rx; failures as root_answer. */
static int from_root(collgen__boot *b, collgen__wire_rx *rx, double deadline, const char *when) {
  char why[300];
  int rc = collgen__wire_recv(rx, b->conn[0], deadline, why, sizeof why);
  return root_answer(b, rx, rc, why, when);
}

/* Sends to rank 0; a failure becomes b's error (rank 0's ERROR if any). */
static int to_root(collgen__boot *b, const collgen__wire_header *h, const void *payload,
                   size_t len, const int *fds, int nfds, double deadline, const char *when) {
  int closed;
  char why[256];
  int rc = collgen__wire_send(b->conn[0], h, payload, len, fds, nfds, deadline, &closed, why,
                              sizeof why);
  if (rc == COLLGEN_OK) return rc;
  if (closed) {
    int st = pending_error(b, when);
    return st != COLLGEN_OK ? st : root_left(b, when);
  }
  return collgen__boot_fail(b, rc, "%s: sending to rank 0 (pid %d): %s", when, b->peers[0].pid,
                            why);
}

/* What became of this rank's earlier tries to join. */
typedef struct {
  int retry;  /* rank 0 asked it to connect again (RETRY: no room or time) */
  int closed; /* rank 0 closed the connection without a word */
  int busy;   /* connect found rank 0's backlog full */
} tries;

/* "Connect again" (client_attempt): rank 0 dropped the connection before
** it welcomed this rank. */
#define AGAIN 1

/* Sleeps *backoff ms (at most until deadline), then doubles it up to 50. */
static void back_off(double deadline, int *backoff) {
  int wait = collgen__ms_left(deadline);
  poll(NULL, 0, wait < *backoff ? wait : *backoff); /* EINTR just retries sooner */
  *backoff = *backoff < 32 ? *backoff * 2 : 50;
}

/* The rendezvous ran out of time: what this rank knows of rank 0. */
static int client_timeout(collgen__boot *b, const tries *t) {
  if (!t->retry && !t->closed && !t->busy)
    return collgen__boot_fail(b, COLLGEN_ERR_TIMEOUT,
                              "rendezvous timed out after %d ms: rank 0 never listened for "
                              "this id (not started, failed, or done with its rendezvous; "
                              "rank %d of %d could not join)", b->timeout_ms, b->rank,
                              b->nranks);
  char what[600] = "";
  int pid = b->peers[0].pid;
  if (t->retry)
    add_clause(what, sizeof what, "rank 0 (pid %d) asked this rank to connect again %d time%s "
               "(it had no room or time for the connection before it proved the secret; other "
               "processes may be flooding the socket)", pid, t->retry, t->retry > 1 ? "s" : "");
  if (t->closed)
    add_clause(what, sizeof what, "rank 0 (pid %d) closed the connection before welcoming this "
               "rank %d time%s (it may have refused it, or exited)", pid, t->closed,
               t->closed > 1 ? "s" : "");
  if (t->busy)
    add_clause(what, sizeof what, "rank 0's socket had no room in its backlog %d time%s",
               t->busy, t->busy > 1 ? "s" : "");
  return collgen__boot_fail(b, COLLGEN_ERR_TIMEOUT,
                            "rendezvous timed out after %d ms: rank %d of %d was not welcomed: "
                            "%s", b->timeout_ms, b->rank, b->nranks, what);
}

/* Connects to rank 0's socket, retrying while nobody listens yet or its
** backlog is full. Nobody listening after rank 0 dropped an earlier
** connection means it is gone. */
static int client_connect(collgen__boot *b, const uint8_t *tag, double deadline, tries *t) {
  struct sockaddr_un a;
  socklen_t len = make_addr(&a, tag);
  int backoff = 1;
  for (;;) {
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
      return collgen__boot_fail(b, COLLGEN_ERR_IO, "rendezvous: socket failed: %s",
                                strerror(errno));
    int rc = connect(fd, (struct sockaddr *)&a, len);
    int e = errno;
    if (rc == 0) {
      b->conn[0] = fd;
      return COLLGEN_OK;
    }
    close(fd);
    /* ECONNREFUSED: no listener (yet); EAGAIN: its backlog is full. */
    if (e != ECONNREFUSED && e != EAGAIN && e != ENOENT && e != EINTR)
      return collgen__boot_fail(b, COLLGEN_ERR_IO, "rendezvous: connect failed: %s",
                                strerror(e));
    if (e == ECONNREFUSED && (t->retry || t->closed))
      return collgen__boot_fail(b, COLLGEN_ERR_PEER,
                                "rendezvous: rank 0 (pid %d) closed the connection before "
                                "welcoming this rank and no longer listens for this id (it "
                                "exited, was killed, or ended its rendezvous without rank %d)",
                                b->peers[0].pid, b->rank);
    if (collgen__ms_left(deadline) == 0) return client_timeout(b, t);
    if (e == EAGAIN) {
      t->busy++;
      backoff = 1; /* rank 0 is there, draining its backlog */
    }
    back_off(deadline, &backoff);
  }
}

/* One try to join: connect, prove the secret, read the WELCOME into
** table[len] (rank 0's records in b->peers). 0, AGAIN (counted in *t), or
** the failure. */
static int client_attempt(collgen__boot *b, const uint8_t *tag, const uint8_t *secret,
                          const collgen__wire_info *self, double deadline, tries *t,
                          uint8_t *table, size_t len) {
  int rc = client_connect(b, tag, deadline, t);
  if (rc != COLLGEN_OK) return rc;
  struct ucred c = peer_cred(b->conn[0]);
  b->peers[0].pid = (int)c.pid;
  if (c.uid != geteuid()) {
    close(b->conn[0]); /* it gets no word from this rank */
    b->conn[0] = -1;
    return collgen__boot_fail(b, COLLGEN_ERR_PEER,
                              "rendezvous: the process listening for this id (pid %d) runs as "
                              "uid %d, this rank as uid %d: not sending it the secret",
                              (int)c.pid, (int)c.uid, (int)geteuid());
  }
  uint8_t hello[COLLGEN__WIRE_HELLO];
  memcpy(hello, tag, COLLGEN__UID_TAG_BYTES);
  memcpy(hello + COLLGEN__UID_TAG_BYTES, secret, COLLGEN__UID_SECRET_BYTES);
  collgen__wire_pack_info(hello + COLLGEN__UID_TAG_BYTES + COLLGEN__UID_SECRET_BYTES, self);
  collgen__wire_header h = {COLLGEN__MSG_HELLO, 0, self->rank, sizeof hello, 0};
  int closed;
  char why[300];
  rc = collgen__wire_send(b->conn[0], &h, hello, sizeof hello, NULL, 0, deadline, &closed, why,
                          sizeof why);
  explicit_bzero(hello, sizeof hello);
  collgen__wire_rx rx;
  collgen__wire_rx_init(&rx, table, len, 0);
  if (rc == COLLGEN_OK)
    rc = collgen__wire_recv(&rx, b->conn[0], deadline + COLLGEN__BOOT_GRACE_MS, why, sizeof why);
  else if (closed && last_message(b, &rx)) /* what rank 0 said before it closed */
    rc = COLLGEN_OK;
  else if (!closed)
    return collgen__boot_fail(b, rc, "rendezvous: sending to rank 0 (pid %d): %s",
                              b->peers[0].pid, why);
  if (rc == COLLGEN_OK && rx.h.type == COLLGEN__MSG_RETRY) {
    t->retry++;
    return AGAIN;
  }
  if (rc != COLLGEN_OK && (closed || rx.closed)) { /* not proof that rank 0 is gone */
    t->closed++;
    return AGAIN;
  }
  rc = root_answer(b, &rx, rc, why, "rendezvous");
  if (rc == COLLGEN_OK && (rx.h.type != COLLGEN__MSG_WELCOME || rx.h.length != len))
    rc = collgen__boot_fail(b, COLLGEN_ERR_PEER,
                            "rendezvous: rank 0 (pid %d) answered with a message of type %u and "
                            "%u bytes, not a WELCOME of %zu", b->peers[0].pid, rx.h.type,
                            rx.h.length, len);
  return rc;
}

static int client_join(collgen__boot *b, const uint8_t *tag, const uint8_t *secret,
                       const collgen__wire_info *self, double deadline) {
  size_t len = (size_t)b->nranks * COLLGEN__WIRE_INFO;
  uint8_t *table = malloc(len);
  if (!table) return collgen__boot_fail(b, COLLGEN_ERR_NO_MEMORY, "rendezvous: out of memory");
  tries t = {0, 0, 0};
  int rc, backoff = 1;
  while ((rc = client_attempt(b, tag, secret, self, deadline, &t, table, len)) == AGAIN) {
    close(b->conn[0]);
    b->conn[0] = -1;
    if (collgen__ms_left(deadline) == 0) {
      rc = client_timeout(b, &t);
      break;
    }
    back_off(deadline, &backoff);
  }
  if (rc == COLLGEN_OK && (t.retry || t.closed))
    collgen__log(COLLGEN_LOG_INFO, "bootstrap rank %d: joined on connection %d to rank 0 (pid "
                 "%d), which had dropped the earlier ones before they proved the secret (%d "
                 "asked to connect again, %d closed)", b->rank, 1 + t.retry + t.closed,
                 b->peers[0].pid, t.retry, t.closed);
  for (int r = 0; r < b->nranks && rc == COLLGEN_OK; ++r) {
    collgen__wire_info in;
    char why[256];
    if (collgen__wire_parse_info(table + (size_t)r * COLLGEN__WIRE_INFO, &in, why, sizeof why) !=
            COLLGEN_OK ||
        (int)in.rank != r || (int)in.nranks != b->nranks ||
        (r == b->rank && memcmp(in.host, self->host, COLLGEN__HOST_ID_BYTES) != 0))
      rc = collgen__boot_fail(b, COLLGEN_ERR_PEER,
                              "rendezvous: rank 0 (pid %d) sent a bad record for rank %d",
                              b->peers[0].pid, r);
    if (rc == COLLGEN_OK) {
      b->peers[r].pid = (int)in.pid;
      memcpy(b->peers[r].host, in.host, COLLGEN__HOST_ID_BYTES);
    }
  }
  free(table);
  return rc;
}

/* The table's join: rank 0 listens, the others connect; a rank alone
** meets nobody. */
static int socket_join(collgen__boot *b, const collgen__wire_info *self,
                       const uint8_t tag[COLLGEN__UID_TAG_BYTES],
                       const uint8_t secret[COLLGEN__UID_SECRET_BYTES]) {
  double deadline = collgen__now_ms() + b->timeout_ms;
  if (b->nranks == 1) { /* alone: nobody to meet */
    b->peers[0].pid = (int)self->pid;
    memcpy(b->peers[0].host, self->host, COLLGEN__HOST_ID_BYTES);
    return COLLGEN_OK;
  }
  if (b->rank == 0) return root_join(b, tag, secret, self, deadline);
  int rc = client_join(b, tag, secret, self, deadline);
  if (rc != COLLGEN_OK) socket_abort(b, rc);
  return rc;
}

/* ---- Exchanges ----------------------------------------------------------- */

/* Rank 0 gathers every contribution: bytes into all, fds into got
** (r * nfds + j). On failure every fd received is closed. */
static int root_gather(collgen__boot *b, uint8_t *all, size_t bytes, int nfds, int *got,
                       double deadline) {
  int n = b->nranks, left = n - 1, rc = COLLGEN_OK;
  collgen__wire_rx *rx = malloc((size_t)n * sizeof *rx);
  uint8_t *done = calloc((size_t)n, 1);
  uint8_t *checked = calloc((size_t)n, 1);
  struct pollfd *fds = malloc((size_t)n * sizeof *fds);
  int *who = malloc((size_t)n * sizeof *who);
  if (!rx || !done || !checked || !fds || !who)
    rc = collgen__boot_fail(b, COLLGEN_ERR_NO_MEMORY, "exchange: out of memory");
  for (int r = 1; rc == COLLGEN_OK && r < n; ++r)
    collgen__wire_rx_init(&rx[r], bytes ? all + (size_t)r * bytes : NULL, bytes,
                          COLLGEN__BOOT_MAX_FDS);
  while (rc == COLLGEN_OK && left > 0) {
    int k = 0;
    for (int r = 1; r < n; ++r)
      if (!done[r]) {
        fds[k] = (struct pollfd){b->conn[r], POLLIN, 0};
        who[k++] = r;
      }
    int wait = collgen__ms_left(deadline);
    if (wait == 0) {
      char missing[512];
      done[0] = 1;
      list_missing(b, done, missing, sizeof missing);
      rc = collgen__boot_fail(b, COLLGEN_ERR_TIMEOUT,
                              "exchange #%u timed out after %d ms: rank%s %s of %d did not take "
                              "part", b->seq, b->timeout_ms, left > 1 ? "s" : "", missing, n);
      break;
    }
    if (poll(fds, (nfds_t)k, wait) < 0 && errno != EINTR) {
      rc = collgen__boot_fail(b, COLLGEN_ERR_IO, "exchange: poll failed: %s", strerror(errno));
      break;
    }
    for (int i = 0; i < k && rc == COLLGEN_OK; ++i) {
      int r = who[i];
      if (!fds[i].revents) continue;
      char why[300];
      int st = collgen__wire_rx_step(&rx[r], b->conn[r], why, sizeof why);
      if (st >= 0 && rx[r].have_header && !checked[r]) {
        checked[r] = 1;
        rc = collgen__wire_check_contrib(&rx[r].h, b->seq, r, bytes, nfds, why, sizeof why);
        if (rc != COLLGEN_OK) {
          collgen__wire_rx_close_fds(&rx[r]);
          collgen__boot_fail(b, rc, "exchange #%u: rank %d (pid %d) %s", b->seq, r,
                             b->peers[r].pid, why);
        }
      }
      if (rc != COLLGEN_OK) break;
      if (st == 1 && rx[r].h.type == COLLGEN__MSG_ERROR) {
        char text[COLLGEN__WIRE_MAX_TEXT + 1];
        int code = collgen__wire_parse_error(rx[r].text, rx[r].h.length, text, sizeof text);
        rc = collgen__boot_fail(b, code, "exchange #%u: rank %d (pid %d) failed: %s", b->seq, r,
                                b->peers[r].pid, text);
      } else if (st == 1) {
        memcpy(got + (size_t)r * (size_t)nfds, rx[r].fds, sizeof(int) * (size_t)nfds);
        rx[r].nfds = 0;
        done[r] = 1;
        left--;
      } else if (st < 0 && rx[r].closed) {
        rc = collgen__boot_fail(b, COLLGEN_ERR_PEER,
                                "exchange #%u: rank %d (pid %d) closed its connection (it "
                                "exited, was killed or destroyed its bootstrap)", b->seq, r,
                                b->peers[r].pid);
      } else if (st < 0) {
        rc = collgen__boot_fail(b, COLLGEN_ERR_PEER, "exchange #%u: from rank %d (pid %d): %s",
                                b->seq, r, b->peers[r].pid, why);
      }
    }
  }
  if (rx)
    for (int r = 1; r < n; ++r) collgen__wire_rx_close_fds(&rx[r]);
  free(rx);
  free(done);
  free(checked);
  free(fds);
  free(who);
  return rc;
}

/* Rank 0 sends rank c the whole: all the bytes, then each other rank's
** descriptors in one FDS message per rank. */
static int root_send(collgen__boot *b, int c, const uint8_t *all, size_t bytes,
                     const int *mine_fds, int nfds, const int *got, double deadline) {
  size_t total = (size_t)b->nranks * bytes;
  collgen__wire_header h = {COLLGEN__MSG_RESULT, b->seq, 0, (uint32_t)total, 0};
  int closed, rc;
  char why[256];
  rc = collgen__wire_send(b->conn[c], &h, all, total, NULL, 0, deadline, &closed, why,
                          sizeof why);
  for (int r = 0; r < b->nranks && nfds > 0 && rc == COLLGEN_OK; ++r) {
    if (r == c) continue;
    collgen__wire_header f = {COLLGEN__MSG_FDS, b->seq, (uint32_t)r, 0, (uint32_t)nfds};
    const int *fds = r == 0 ? mine_fds : got + (size_t)r * (size_t)nfds;
    rc = collgen__wire_send(b->conn[c], &f, NULL, 0, fds, nfds, deadline, &closed, why,
                            sizeof why);
  }
  if (rc == COLLGEN_OK) return rc;
  if (closed)
    return collgen__boot_fail(b, COLLGEN_ERR_PEER,
                              "exchange #%u: rank %d (pid %d) closed its connection before it "
                              "got the result", b->seq, c, b->peers[c].pid);
  return collgen__boot_fail(b, rc, "exchange #%u: sending the result to rank %d (pid %d): %s",
                            b->seq, c, b->peers[c].pid, why);
}

static int root_exchange(collgen__boot *b, const void *mine, void *all, size_t bytes,
                         const int *mine_fds, int nfds, int *all_fds) {
  double deadline = collgen__now_ms() + b->timeout_ms;
  size_t nslots = (size_t)b->nranks * (size_t)nfds;
  int *got = malloc((nslots ? nslots : 1) * sizeof *got);
  if (!got) return collgen__boot_fail(b, COLLGEN_ERR_NO_MEMORY, "exchange: out of memory");
  for (size_t i = 0; i < nslots; ++i) got[i] = -1;
  if (bytes) memcpy(all, mine, bytes);
  int rc = root_gather(b, all, bytes, nfds, got, deadline);
  for (int c = 1; c < b->nranks && rc == COLLGEN_OK; ++c)
    rc = root_send(b, c, all, bytes, mine_fds, nfds, got, deadline + COLLGEN__BOOT_GRACE_MS);
  if (rc == COLLGEN_OK) {
    if (nslots) memcpy(all_fds, got, nslots * sizeof *got); /* own slots stay -1 */
  } else {
    for (size_t i = 0; i < nslots; ++i)
      if (got[i] >= 0) close(got[i]);
  }
  free(got);
  return rc;
}

static int client_exchange(collgen__boot *b, const void *mine, void *all, size_t bytes,
                           const int *mine_fds, int nfds, int *all_fds) {
  double deadline = collgen__now_ms() + b->timeout_ms + COLLGEN__BOOT_GRACE_MS;
  char when[48];
  snprintf(when, sizeof when, "exchange #%u", b->seq);
  collgen__wire_header h = {COLLGEN__MSG_CONTRIB, b->seq, (uint32_t)b->rank, (uint32_t)bytes,
                            (uint32_t)nfds};
  int rc = to_root(b, &h, mine, bytes, mine_fds, nfds, deadline, when);
  if (rc != COLLGEN_OK) return rc;
  size_t total = (size_t)b->nranks * bytes;
  collgen__wire_rx rx;
  collgen__wire_rx_init(&rx, all, total, 0);
  rc = from_root(b, &rx, deadline, when);
  if (rc == COLLGEN_OK &&
      (rx.h.type != COLLGEN__MSG_RESULT || rx.h.seq != b->seq || rx.h.length != total))
    rc = collgen__boot_fail(b, COLLGEN_ERR_PEER,
                            "%s: rank 0 (pid %d) answered with a message of type %u, exchange "
                            "#%u, %u bytes; expected the result, %zu bytes", when,
                            b->peers[0].pid, rx.h.type, rx.h.seq, rx.h.length, total);
  if (rc == COLLGEN_OK && bytes && memcmp((uint8_t *)all + (size_t)b->rank * bytes, mine, bytes))
    rc = collgen__boot_fail(b, COLLGEN_ERR_PEER,
                            "%s: rank 0 (pid %d) returned other bytes for this rank than it "
                            "sent", when, b->peers[0].pid);
  for (int r = 0; r < b->nranks && nfds > 0 && rc == COLLGEN_OK; ++r) {
    if (r == b->rank) continue;
    collgen__wire_rx_init(&rx, NULL, 0, nfds);
    rc = from_root(b, &rx, deadline, when);
    if (rc == COLLGEN_OK && (rx.h.type != COLLGEN__MSG_FDS || rx.h.seq != b->seq ||
                             rx.h.rank != (uint32_t)r || rx.h.nfds != (uint32_t)nfds)) {
      collgen__wire_rx_close_fds(&rx);
      rc = collgen__boot_fail(b, COLLGEN_ERR_PEER,
                              "%s: rank 0 (pid %d) sent a message of type %u with %u "
                              "descriptors of rank %u; expected the %d of rank %d", when,
                              b->peers[0].pid, rx.h.type, rx.h.nfds, rx.h.rank, nfds, r);
    }
    if (rc == COLLGEN_OK)
      memcpy(all_fds + (size_t)r * (size_t)nfds, rx.fds, sizeof(int) * (size_t)nfds);
  }
  if (rc != COLLGEN_OK)
    for (int i = 0; i < b->nranks * nfds; ++i)
      if (all_fds[i] >= 0) {
        close(all_fds[i]);
        all_fds[i] = -1;
      }
  return rc;
}

/* The table's exchange: rank 0 gathers and relays, the others send their
** part and wait for the whole. */
static int socket_exchange(collgen__boot *b, const void *mine, void *all, size_t bytes,
                           const int *mine_fds, int nfds, int *all_fds) {
  if (b->nranks == 1) {
    if (bytes) memcpy(all, mine, bytes);
    return COLLGEN_OK; /* all_fds: only this rank's slots, already -1 */
  }
  int rc = b->rank == 0 ? root_exchange(b, mine, all, bytes, mine_fds, nfds, all_fds)
                        : client_exchange(b, mine, all, bytes, mine_fds, nfds, all_fds);
  if (rc != COLLGEN_OK) socket_abort(b, rc);
  return rc;
}

const struct collgen__boot_ops collgen__boot_socket_ops = {
  .join = socket_join,
  .exchange = socket_exchange,
  .abort = socket_abort,
  .caps = COLLGEN__BOOT_CAP_FDS | COLLGEN__BOOT_CAP_BOUNDED, /* SCM_RIGHTS; deadlines */
};
