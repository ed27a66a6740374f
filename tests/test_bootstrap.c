/*
** test_bootstrap.c -- the one-process-per-GPU bootstrap without a GPU:
** the unique id and its text form; ranks in forked processes that meet on
** the socket and all-gather random bytes and memfd descriptors (2, 3 and 8
** ranks); every fault the bootstrap must name (missing rank, wrong secret,
** nranks mismatch, duplicate rank, a second rank 0, another user, hostile
** bytes, killed peers, mismatched exchanges); jobs that join while a
** stranger without the secret floods the socket (held connections,
** connect/disconnect churn, bad HELLOs), the counts of what rank 0 dropped,
** and what rank 1 makes of a rank 0 that drops it; the application-callback
** transport over pipes; no descriptor or socket name left behind; two
** bootstraps at once. Children report through shared memory; the parent
** checks. Timeouts are short (300 ms) so the suite takes seconds.
*/
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bootstrap.h"
#include "bootstrap_wire.h"
#include "internal.h"
#include "sha256.h"
#include "test_util.h"
#include "unique_id.h"

/* ---- Shared memory, children, deterministic data ----------------------- */

#define MAXP 12 /* processes per test */
#define SHORT_MS 300

typedef struct {
  int started, finished; /* the child reached its start / its end */
  int rc;                /* the call that decided the outcome */
  double ms;             /* how long that call took */
  int fd_before, fd_after;
  int bad;               /* data mismatches found */
  int exchanges;         /* exchanges that succeeded */
  int pid;
  int peer_pid[MAXP];
  int host_of[MAXP], nhosts;
  unsigned caps;
  char msg[2048];
  char log[4096];
  volatile int ready;    /* a helper process is in full swing */
} result_t;

typedef struct {
  collgen_unique_id_t id, id2;
  uint64_t seed;
  volatile int release; /* the parent lets helper processes go */
  result_t r[MAXP];
} shm_t;

static shm_t *shm_new(void) {
  shm_t *s = mmap(NULL, sizeof *s, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  cr_assert(s != MAP_FAILED);
  memset(s, 0, sizeof *s);
  cr_assert_eq(collgen_get_unique_id(&s->id), COLLGEN_OK);
  cr_assert_eq(collgen_get_unique_id(&s->id2), COLLGEN_OK);
  s->seed = tu_rand();
  return s;
}

static int count_fds(void) {
  DIR *d = opendir("/proc/self/fd");
  int n = 0;
  if (!d) return -1;
  while (readdir(d)) n++;
  closedir(d);
  return n;
}

static int highest_fd(void) {
  DIR *d = opendir("/proc/self/fd");
  int top = -1;
  struct dirent *e;
  while (d && (e = readdir(d)))
    if (atoi(e->d_name) > top) top = atoi(e->d_name);
  if (d) closedir(d);
  return top;
}

/* How many times needle occurs in text. */
static int count_lines(const char *text, const char *needle) {
  int n = 0;
  for (const char *p = text; (p = strstr(p, needle)); p += strlen(needle)) n++;
  return n;
}

static void capture_log(int level, const char *message, void *user) {
  result_t *r = user;
  size_t used = strlen(r->log);
  snprintf(r->log + used, sizeof r->log - used, "[%d] %s\n", level, message);
}

typedef void (*child_fn)(shm_t *s, int idx, const void *arg);

/* LeakSanitizer's check, present in sanitizer builds only: children end
** with _exit, so they are checked here instead of at exit. */
int __lsan_do_recoverable_leak_check(void) __attribute__((weak));

/* Forks a child that runs fn and exits without running atexit handlers. */
static pid_t spawn(shm_t *s, int idx, child_fn fn, const void *arg) {
  pid_t pid = fork();
  cr_assert(pid >= 0);
  if (pid == 0) {
    s->r[idx].pid = getpid();
    s->r[idx].started = 1;
    collgen_set_log_handler(capture_log, &s->r[idx]);
    fn(s, idx, arg);
    if (__lsan_do_recoverable_leak_check && __lsan_do_recoverable_leak_check())
      s->r[idx].bad += 10000; /* the report is on stderr */
    s->r[idx].finished = 1;
    _exit(0);
  }
  return pid;
}

/* Waits for n children at most `ms`; kills the rest (a hang fails the
** test). Returns how many ended by a signal. */
static int reap(pid_t *pids, int n, int ms) {
  double end = collgen__now_ms() + ms;
  int left = n, signaled = 0;
  while (left > 0 && collgen__now_ms() < end) {
    for (int i = 0; i < n; ++i) {
      int st;
      if (pids[i] > 0 && waitpid(pids[i], &st, WNOHANG) == pids[i]) {
        if (WIFSIGNALED(st)) signaled++;
        pids[i] = 0;
        left--;
      }
    }
    if (left) usleep(2000);
  }
  for (int i = 0; i < n; ++i)
    if (pids[i] > 0) {
      kill(pids[i], SIGKILL);
      waitpid(pids[i], NULL, 0);
    }
  cr_assert_eq(left, 0, "%d processes hung (killed after %d ms)", left, ms);
  return signaled;
}

/* reap, when no process may die of a signal. */
static void reap_ok(pid_t *pids, int n, int ms) {
  cr_expect_eq(reap(pids, n, ms), 0, "a process was killed by a signal");
}

static uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/* The bytes rank `rank` contributes to exchange `e`. */
static void fill(uint8_t *p, size_t n, uint64_t seed, int e, int rank) {
  uint64_t x = mix(seed ^ ((uint64_t)e << 40) ^ ((uint64_t)rank << 20));
  for (size_t i = 0; i < n; ++i) {
    if (i % 8 == 0) x = mix(x);
    p[i] = (uint8_t)(x >> (8 * (i % 8)));
  }
}

static void fd_text(char *out, size_t n, uint64_t seed, int e, int rank, int j) {
  snprintf(out, n, "memfd of rank %d, descriptor %d, exchange %d, seed %016llx", rank, j, e,
           (unsigned long long)seed);
}

/* ---- A rank of a job ------------------------------------------------------ */

typedef struct {
  int rank, nranks, timeout_ms;
  int exchanges;       /* how many exchanges after the rendezvous */
  size_t bytes;        /* per rank per exchange */
  int nfds;            /* descriptors per rank per exchange */
  const char *host;    /* host id override */
  int second_id;       /* use s->id2 */
  int die_after;       /* SIGKILL itself after this many exchanges (0 = never) */
  size_t bytes_last;   /* if nonzero: the last exchange uses this many bytes */
  int bad_fd_last;     /* the last exchange passes a closed descriptor */
  int alarms;          /* a SIGALRM every 200 us throughout */
  int survivor_rank;   /* survivor(): its rank in the second bootstrap */
  uint64_t salt;       /* mixed into the data, to tell bootstraps apart */
  int fd_room;         /* if nonzero: room for this many new descriptors during
                          each exchange (RLIMIT_NOFILE), then restored */
  int delay_ms;        /* sleep this long before the rendezvous and each exchange */
  int linger_ms;       /* sleep this long after the exchanges, before destroy */
} job_t;

/* Whether some process listens on the socket of an id: /proc/net/unix has
** a line "Num RefCount Protocol Flags Type St Inode @collgen-boot-..." with
** Flags 00010000 (__SO_ACCEPTCON: listening). Connections accepted from it
** show the same name with other flags. (Read line by line: a /proc file has
** no size.) */
static int socket_listed(const collgen_unique_id_t *id) {
  char name[64], line[4096];
  FILE *f = fopen("/proc/net/unix", "r");
  if (!f || collgen__boot_socket_name(id, name, sizeof name) != 0) abort();
  int found = 0;
  while (!found && fgets(line, sizeof line, f)) {
    char flags[16], path[256];
    found = sscanf(line, "%*s %*s %*s %15s %*s %*s %*s %255s", flags, path) == 2 &&
            strcmp(flags, "00010000") == 0 && path[0] == '@' && strcmp(path + 1, name) == 0;
  }
  fclose(f);
  return found;
}

/* Waits until rank 0's log (process 0) says `ranks` ranks joined, at most
** 5 s. */
static void wait_joined(shm_t *s, int ranks) {
  double end = collgen__now_ms() + 5000;
  while (count_lines(s->r[0].log, ") joined (") < ranks && collgen__now_ms() < end) usleep(1000);
}

/* Waits until rank 0 listens for s->id, at most 5 s. */
static void wait_listening(shm_t *s) {
  double end = collgen__now_ms() + 5000;
  while (!socket_listed(&s->id) && collgen__now_ms() < end) usleep(1000);
}

/* Waits until *flag is set, at most ms milliseconds. */
static void wait_flag(volatile int *flag, int ms) {
  double end = collgen__now_ms() + ms;
  while (!*flag && collgen__now_ms() < end) usleep(1000);
}

/* Sleeps ms milliseconds whatever signals arrive. */
static void sleep_ms(int ms) {
  double end = collgen__now_ms() + ms;
  while (collgen__now_ms() < end) usleep(1000);
}

static void on_alarm(int sig) { (void)sig; }

static int check_fds(const int *all, int nranks, int nfds, int self, uint64_t seed, int e) {
  int bad = 0;
  for (int q = 0; q < nranks; ++q)
    for (int j = 0; j < nfds; ++j) {
      int fd = all[q * nfds + j];
      if (q == self) {
        bad += fd != -1;
        continue;
      }
      char want[128], got[128] = {0};
      fd_text(want, sizeof want, seed, e, q, j);
      if (fd < 0 || pread(fd, got, sizeof got - 1, 0) != (ssize_t)strlen(want) ||
          strcmp(got, want) != 0 || !(fcntl(fd, F_GETFD) & FD_CLOEXEC))
        bad++;
      if (fd >= 0) close(fd);
    }
  return bad;
}

/* One exchange of job j; returns its status (and counts mismatches). */
static int exchange_once(collgen__boot *b, const job_t *j, shm_t *s, result_t *r, int e) {
  uint64_t seed = s->seed ^ j->salt;
  size_t bytes = (j->bytes_last && e == j->exchanges) ? j->bytes_last : j->bytes;
  uint8_t *mine = malloc(bytes + 1), *all = malloc(bytes * (size_t)j->nranks + 1);
  int mine_fds[8], all_fds[8 * MAXP];
  fill(mine, bytes, seed, e, j->rank);
  for (int k = 0; k < j->nfds; ++k) {
    char text[128];
    fd_text(text, sizeof text, seed, e, j->rank, k);
    mine_fds[k] = memfd_create("collgen-test", MFD_CLOEXEC);
    if (write(mine_fds[k], text, strlen(text)) != (ssize_t)strlen(text)) r->bad++;
  }
  if (j->bad_fd_last && e == j->exchanges) close(mine_fds[0]);
  struct rlimit was;
  getrlimit(RLIMIT_NOFILE, &was);
  if (j->fd_room) {
    struct rlimit tight = {(rlim_t)(highest_fd() + 1 + j->fd_room), was.rlim_max};
    setrlimit(RLIMIT_NOFILE, &tight);
  }
  double t0 = collgen__now_ms();
  int rc = collgen__boot_exchange(b, mine, all, bytes, mine_fds, j->nfds, all_fds);
  r->ms = collgen__now_ms() - t0;
  setrlimit(RLIMIT_NOFILE, &was);
  if (rc == COLLGEN_OK) {
    uint8_t *want = malloc(bytes + 1);
    for (int q = 0; q < j->nranks; ++q) {
      fill(want, bytes, seed, e, q);
      if (bytes && memcmp(all + (size_t)q * bytes, want, bytes) != 0) r->bad++;
    }
    free(want);
    r->bad += check_fds(all_fds, j->nranks, j->nfds, j->rank, seed, e);
  } else {
    for (int k = 0; k < j->nfds * j->nranks; ++k) r->bad += all_fds[k] != -1;
  }
  for (int k = 0; k < j->nfds; ++k)
    if (!(j->bad_fd_last && e == j->exchanges && k == 0)) close(mine_fds[k]);
  free(mine);
  free(all);
  return rc;
}

static void run_job(shm_t *s, int idx, const void *arg) {
  const job_t *j = arg;
  result_t *r = &s->r[idx];
  if (j->alarms) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm; /* no SA_RESTART: every blocking call sees EINTR */
    sigaction(SIGALRM, &sa, NULL);
    struct itimerval it = {{0, 200}, {0, 200}};
    setitimer(ITIMER_REAL, &it, NULL);
  }
  r->fd_before = count_fds();
  collgen__boot_options o;
  collgen__boot_options_init(&o);
  o.timeout_ms = j->timeout_ms ? j->timeout_ms : 5000;
  o.host_id = j->host;
  collgen__boot *b;
  char err[2048] = "";
  sleep_ms(j->delay_ms);
  double t0 = collgen__now_ms();
  r->rc = collgen__boot_create(&b, j->second_id ? &s->id2 : &s->id, j->rank, j->nranks, &o, err,
                               sizeof err);
  r->ms = collgen__now_ms() - t0;
  /* rank 0 closed its listener before it returned, unless another rank 0
  ** held the name */
  if (j->rank == 0 && j->nranks > 1 && !strstr(err, "already listens") &&
      socket_listed(j->second_id ? &s->id2 : &s->id))
    r->bad += 100;
  if (r->rc != COLLGEN_OK) {
    snprintf(r->msg, sizeof r->msg, "%s", err);
    if (b != NULL) r->bad++;
  } else {
    r->caps = collgen__boot_caps(b);
    for (int q = 0; q < j->nranks && q < MAXP; ++q)
      r->peer_pid[q] = collgen__boot_peer_info(b, q)->pid;
    r->nhosts = collgen__boot_hosts(b, r->host_of);
    for (int e = 1; e <= j->exchanges; ++e) {
      if (j->die_after && e > j->die_after) raise(SIGKILL);
      sleep_ms(j->delay_ms);
      r->rc = exchange_once(b, j, s, r, e);
      if (r->rc != COLLGEN_OK) {
        snprintf(r->msg, sizeof r->msg, "%s", collgen__boot_last_error(b));
        break;
      }
      r->exchanges++;
    }
    sleep_ms(j->linger_ms);
    collgen__boot_destroy(b);
  }
  if (j->alarms) {
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, NULL);
  }
  r->fd_after = count_fds();
}

/* Runs `n` jobs in `n` children and waits (at most 10 s). */
static void run_jobs(shm_t *s, job_t *jobs, int n) {
  pid_t pids[MAXP];
  for (int i = 0; i < n; ++i) pids[i] = spawn(s, i, run_job, &jobs[i]);
  reap_ok(pids, n, 10000);
}

/* n jobs: process i is rank i of nranks, then makes `exchanges` exchanges
** of `bytes` bytes and `nfds` descriptors. */
static void jobs_init(job_t *jobs, int n, int nranks, int exchanges, size_t bytes, int nfds) {
  memset(jobs, 0, sizeof *jobs * (size_t)n);
  for (int i = 0; i < n; ++i) {
    jobs[i].rank = i;
    jobs[i].nranks = nranks;
    jobs[i].exchanges = exchanges;
    jobs[i].bytes = bytes;
    jobs[i].nfds = nfds;
  }
}

static void expect_clean(const result_t *r, int idx) {
  cr_expect_eq(r->fd_after, r->fd_before, "process %d: %d descriptors before, %d after", idx,
               r->fd_before, r->fd_after);
  cr_expect_eq(r->bad, 0, "process %d: %d mismatches", idx, r->bad);
}

static void expect_ok(shm_t *s, int n) {
  for (int i = 0; i < n; ++i) {
    result_t *r = &s->r[i];
    cr_expect(r->finished, "process %d did not finish", i);
    cr_expect_eq(r->rc, COLLGEN_OK, "process %d: %s: %s", i, collgen_status_name(r->rc), r->msg);
    expect_clean(r, i);
  }
}

/* The status and the words of a failed process's message. */
static void expect_fail(shm_t *s, int i, int status, const char *needle) {
  result_t *r = &s->r[i];
  cr_expect(r->finished, "process %d did not finish", i);
  cr_expect_eq(r->rc, status, "process %d: got %s (%s), expected %s", i,
               collgen_status_name(r->rc), r->msg, collgen_status_name(status));
  cr_expect(strstr(r->msg, needle) != NULL, "process %d: \"%s\" lacks \"%s\"", i, r->msg,
            needle);
  expect_clean(r, i);
}

/* ---- The unique id --------------------------------------------------------- */

Test(unique_id, text_round_trip_and_fresh_values) {
  collgen_unique_id_t a, b, back;
  cr_assert_eq(collgen_get_unique_id(&a), COLLGEN_OK);
  cr_assert_eq(collgen_get_unique_id(&b), COLLGEN_OK);
  cr_expect(memcmp(&a, &b, sizeof a) != 0, "two ids are equal");
  char text[COLLGEN_UNIQUE_ID_TEXT_LEN + 1];
  cr_assert_eq(collgen_unique_id_to_text(&a, text, sizeof text), COLLGEN_OK);
  cr_expect_eq(strlen(text), COLLGEN_UNIQUE_ID_TEXT_LEN);
  cr_expect_eq(strspn(text, "0123456789abcdef"), COLLGEN_UNIQUE_ID_TEXT_LEN, "%s", text);
  cr_assert_eq(collgen_unique_id_from_text(text, &back), COLLGEN_OK, "%s", collgen_last_error());
  cr_expect(memcmp(&a, &back, sizeof a) == 0);
  for (char *p = text; *p; ++p) /* either case */
    if (*p >= 'a' && *p <= 'f') *p = (char)(*p - 'a' + 'A');
  cr_assert_eq(collgen_unique_id_from_text(text, &back), COLLGEN_OK);
  cr_expect(memcmp(&a, &back, sizeof a) == 0);
  /* secret and tag differ between ids, the tag names the socket */
  char n1[64], n2[64];
  cr_assert_eq(collgen__boot_socket_name(&a, n1, sizeof n1), 0);
  cr_assert_eq(collgen__boot_socket_name(&b, n2, sizeof n2), 0);
  cr_expect_str_neq(n1, n2);
  cr_expect_eq(strncmp(n1, "collgen-boot-", 13), 0, "%s", n1);
}

/* from_text refuses `text` with INVALID_ARG, a message holding `needle`,
** and leaves the id alone. */
static void refused_text(const char *text, const char *needle) {
  collgen_unique_id_t id;
  memset(&id, 0x5a, sizeof id);
  cr_expect_eq(collgen_unique_id_from_text(text, &id), COLLGEN_ERR_INVALID_ARG, "accepted");
  cr_expect(strstr(collgen_last_error(), needle) != NULL, "\"%s\" lacks \"%s\"",
            collgen_last_error(), needle);
  for (size_t i = 0; i < sizeof id; ++i)
    if (id.internal[i] != 0x5a) {
      cr_expect_fail("the id was written on failure");
      break;
    }
}

/* The hex text of any 128 bytes, valid id or not. */
static void text_of(const collgen_unique_id_t *id, char *text) {
  for (int i = 0; i < COLLGEN_UNIQUE_ID_BYTES; i += 32) {
    char hex[65];
    collgen__hex(id->internal + i, hex);
    memcpy(text + 2 * i, hex, 64);
  }
  text[COLLGEN_UNIQUE_ID_TEXT_LEN] = 0;
}

Test(unique_id, strict_parsing) {
  collgen_unique_id_t id;
  cr_assert_eq(collgen_get_unique_id(&id), COLLGEN_OK);
  char good[COLLGEN_UNIQUE_ID_TEXT_LEN + 1], t[COLLGEN_UNIQUE_ID_TEXT_LEN + 8];
  cr_assert_eq(collgen_unique_id_to_text(&id, good, sizeof good), COLLGEN_OK);
  refused_text("", "has 0 characters");
  snprintf(t, sizeof t, "%.*s", COLLGEN_UNIQUE_ID_TEXT_LEN - 1, good);
  refused_text(t, "has 255 characters");
  snprintf(t, sizeof t, "%s0", good);
  refused_text(t, "more than 256 characters");
  snprintf(t, sizeof t, "%s\n", good);
  refused_text(t, "more than 256 characters");
  snprintf(t, sizeof t, " %.*s", COLLGEN_UNIQUE_ID_TEXT_LEN - 1, good);
  refused_text(t, "character 1 is ' '");
  snprintf(t, sizeof t, "%s", good);
  t[17] = 'g';
  refused_text(t, "character 18 is 'g'");
  t[17] = '\x01';
  refused_text(t, "byte 0x01");
  /* flipping any digit breaks the checksum (or, in the tag, the magic) */
  snprintf(t, sizeof t, "%s", good);
  t[100] = t[100] == '0' ? '1' : '0';
  refused_text(t, "checksum mismatch");
  snprintf(t, sizeof t, "%s", good);
  t[0] = '0';
  refused_text(t, "not a collgen unique id");
  /* resealed but with a version, flags or reserved byte this build does not know */
  collgen_unique_id_t x = id;
  x.internal[COLLGEN__UID_OFF_VERSION] = 2;
  collgen__sha256(x.internal, COLLGEN__UID_OFF_SUM, x.internal + COLLGEN__UID_OFF_SUM);
  text_of(&x, t);
  refused_text(t, "version 2");
  x = id;
  x.internal[COLLGEN__UID_OFF_FLAGS] = 1;
  collgen__sha256(x.internal, COLLGEN__UID_OFF_SUM, x.internal + COLLGEN__UID_OFF_SUM);
  text_of(&x, t);
  refused_text(t, "unknown flags");
  x = id;
  x.internal[COLLGEN__UID_OFF_RESERVED + 3] = 1;
  collgen__uid_seal(&x);
  text_of(&x, t);
  refused_text(t, "reserved byte (67)");
}

Test(unique_id, bad_arguments) {
  collgen_unique_id_t id, zero;
  char text[COLLGEN_UNIQUE_ID_TEXT_LEN + 1];
  cr_expect_eq(collgen_get_unique_id(NULL), COLLGEN_ERR_INVALID_ARG);
  cr_assert_eq(collgen_get_unique_id(&id), COLLGEN_OK);
  cr_expect_eq(collgen_unique_id_to_text(NULL, text, sizeof text), COLLGEN_ERR_INVALID_ARG);
  cr_expect_eq(collgen_unique_id_to_text(&id, NULL, 300), COLLGEN_ERR_INVALID_ARG);
  memset(text, 'x', sizeof text);
  cr_expect_eq(collgen_unique_id_to_text(&id, text, COLLGEN_UNIQUE_ID_TEXT_LEN),
               COLLGEN_ERR_INVALID_ARG);
  cr_expect(strstr(collgen_last_error(), "needs 257"), "%s", collgen_last_error());
  cr_expect_eq(text[0], 'x', "nothing written into a short buffer");
  memset(&zero, 0, sizeof zero);
  cr_expect_eq(collgen_unique_id_to_text(&zero, text, sizeof text), COLLGEN_ERR_INVALID_ARG);
  cr_expect_eq(collgen_unique_id_from_text(NULL, &id), COLLGEN_ERR_INVALID_ARG);
  cr_expect_eq(collgen_unique_id_from_text("00", NULL), COLLGEN_ERR_INVALID_ARG);
  collgen__boot *b = (collgen__boot *)0x1;
  char err[512];
  cr_expect_eq(collgen__boot_create(&b, &zero, 0, 2, NULL, err, sizeof err),
               COLLGEN_ERR_INVALID_ARG);
  cr_expect(strstr(err, "not a collgen unique id"), "%s", err);
  cr_expect_eq(collgen__boot_create(&b, NULL, 0, 2, NULL, err, sizeof err),
               COLLGEN_ERR_INVALID_ARG);
  cr_expect_eq(collgen__boot_create(&b, &id, 2, 2, NULL, err, sizeof err),
               COLLGEN_ERR_INVALID_ARG);
  cr_expect(strstr(err, "rank 2 is outside 0..1"), "%s", err);
  cr_expect_null(b);
  cr_expect_eq(collgen__boot_create(&b, &id, -1, 2, NULL, err, sizeof err),
               COLLGEN_ERR_INVALID_ARG);
  cr_expect_eq(collgen__boot_create(&b, &id, 0, 0, NULL, err, sizeof err),
               COLLGEN_ERR_INVALID_ARG);
  cr_expect_eq(collgen__boot_create(&b, &id, 0, COLLGEN__BOOT_MAX_RANKS + 1, NULL, err,
                                    sizeof err), COLLGEN_ERR_INVALID_ARG);
  cr_expect(strstr(err, "nranks must be 1..256"), "%s", err);
  collgen__boot_options o;
  collgen__boot_options_init(&o);
  o.timeout_ms = -5;
  cr_expect_eq(collgen__boot_create(&b, &id, 0, 2, &o, err, sizeof err),
               COLLGEN_ERR_INVALID_ARG);
  cr_expect(strstr(err, "timeout_ms"), "%s", err);
}

/* ---- Rendezvous and exchanges over the socket ---------------------------- */

/* n ranks, three exchanges of random bytes (the second with none) and k
** memfds each; every rank checks every slot and descriptor. */
static void all_gather_n(int n, size_t bytes, int nfds) {
  shm_t *s = shm_new();
  job_t jobs[MAXP];
  jobs_init(jobs, n, n, 3, bytes, nfds);
  run_jobs(s, jobs, n);
  expect_ok(s, n);
  for (int i = 0; i < n; ++i) {
    cr_expect_eq(s->r[i].exchanges, 3, "process %d", i);
    cr_expect_eq(s->r[i].caps, COLLGEN__BOOT_CAP_FDS | COLLGEN__BOOT_CAP_BOUNDED);
    cr_expect_eq(s->r[i].nhosts, 1);
    for (int q = 0; q < n; ++q)
      cr_expect_eq(s->r[i].peer_pid[q], s->r[q].pid, "rank %d sees rank %d as pid %d, not %d",
                   i, q, s->r[i].peer_pid[q], s->r[q].pid);
  }
  /* the socket name is gone with rank 0's listener */
  cr_expect(!socket_listed(&s->id), "the socket is still bound");
}

Test(socket, two_ranks) { all_gather_n(2, 1000, 2); }
Test(socket, three_ranks) { all_gather_n(3, 333, 3); }
Test(socket, eight_ranks) { all_gather_n(8, 4096, 4); }
Test(socket, eight_ranks_large) { all_gather_n(8, 100000, 0); }

Test(socket, one_rank_needs_nobody) {
  shm_t *s = shm_new();
  job_t j;
  jobs_init(&j, 1, 1, 2, 64, 1);
  run_jobs(s, &j, 1);
  expect_ok(s, 1);
}

/* The processes' host ids: the machine's by default; the option fakes
** two hosts, which collgen__boot_hosts numbers in rank order. */
Test(socket, host_identity) {
  shm_t *s = shm_new();
  job_t jobs[4];
  jobs_init(jobs, 4, 4, 0, 0, 0);
  const char *hosts[4] = {"node-a", "node-a", "node-b", "node-a"};
  for (int i = 0; i < 4; ++i) jobs[i].host = hosts[i];
  run_jobs(s, jobs, 4);
  expect_ok(s, 4);
  for (int i = 0; i < 4; ++i) {
    cr_expect_eq(s->r[i].nhosts, 2);
    cr_expect(s->r[i].host_of[0] == 0 && s->r[i].host_of[1] == 0 && s->r[i].host_of[2] == 1 &&
              s->r[i].host_of[3] == 0, "process %d", i);
  }
  uint8_t h1[COLLGEN__HOST_ID_BYTES], h2[COLLGEN__HOST_ID_BYTES], h3[COLLGEN__HOST_ID_BYTES];
  collgen__host_id(NULL, h1);
  collgen__host_id(NULL, h2);
  collgen__host_id("node-a", h3);
  cr_expect(memcmp(h1, h2, sizeof h1) == 0, "the machine's id is stable");
  cr_expect(memcmp(h1, h3, sizeof h1) != 0);
}

/* Signals arrive every 200 us in every process (no SA_RESTART): each
** interrupted poll, accept, connect, send and receive is resumed. Rank 2
** comes 30 ms late to everything, so the others wait under the signals. */
Test(socket, interrupted_by_signals) {
  shm_t *s = shm_new();
  job_t jobs[3];
  jobs_init(jobs, 3, 3, 3, 200000, 2);
  for (int i = 0; i < 3; ++i) jobs[i].alarms = 1;
  jobs[2].delay_ms = 30;
  run_jobs(s, jobs, 3);
  expect_ok(s, 3);
}

/* ---- Faults: who is missing, who is wrong -------------------------------- */

/* Rank 2 of 3 never starts: rank 0 times out after the bound, naming it;
** rank 1 learns it from rank 0. */
Test(socket, missing_rank_times_out_named) {
  shm_t *s = shm_new();
  job_t jobs[2];
  jobs_init(jobs, 2, 3, 0, 0, 0);
  jobs[0].timeout_ms = jobs[1].timeout_ms = SHORT_MS;
  run_jobs(s, jobs, 2);
  expect_fail(s, 0, COLLGEN_ERR_TIMEOUT, "rank 2 of 3 never joined");
  expect_fail(s, 1, COLLGEN_ERR_TIMEOUT, "rank 2 of 3 never joined");
  cr_expect(strstr(s->r[1].msg, "rank 0 (pid"), "%s", s->r[1].msg);
  cr_expect(s->r[0].ms >= SHORT_MS - 5 && s->r[0].ms < SHORT_MS + 700, "%.0f ms", s->r[0].ms);
  cr_expect(s->r[1].ms < SHORT_MS + COLLGEN__BOOT_GRACE_MS + 700, "%.0f ms", s->r[1].ms);
  cr_expect(!socket_listed(&s->id), "the socket outlived the failed rendezvous");
}

Test(socket, several_missing_ranks_are_all_named) {
  shm_t *s = shm_new();
  job_t jobs[2];
  jobs_init(jobs, 2, 6, 0, 0, 0);
  jobs[1].rank = 3;
  jobs[0].timeout_ms = jobs[1].timeout_ms = SHORT_MS;
  run_jobs(s, jobs, 2);
  expect_fail(s, 0, COLLGEN_ERR_TIMEOUT, "ranks 1, 2, 4, 5 of 6 never joined (2 of 6 present)");
  expect_fail(s, 1, COLLGEN_ERR_TIMEOUT, "ranks 1, 2, 4, 5 of 6");
}

/* Rank `who` of 3 makes one exchange of two, waits linger_ms, then
** destroys its bootstrap: the other two fail exchange #2 with `status` and
** a message holding `needle`. */
static shm_t *stops_after_one(int who, int linger_ms, int status, const char *needle) {
  shm_t *s = shm_new();
  job_t jobs[3];
  jobs_init(jobs, 3, 3, 2, 64, 1);
  for (int i = 0; i < 3; ++i) jobs[i].timeout_ms = SHORT_MS;
  jobs[who].exchanges = 1;
  jobs[who].linger_ms = linger_ms;
  run_jobs(s, jobs, 3);
  cr_expect_eq(s->r[who].rc, COLLGEN_OK, "%s", s->r[who].msg);
  for (int i = 0; i < 3; ++i) {
    if (i == who) continue;
    expect_fail(s, i, status, needle);
    cr_expect_eq(s->r[i].exchanges, 1);
  }
  return s;
}

/* Rank 2 stays alive but skips exchange #2: named when the bound passes. */
Test(socket, rank_missing_from_an_exchange_times_out_named) {
  shm_t *s = stops_after_one(2, SHORT_MS + COLLGEN__BOOT_GRACE_MS + 300, COLLGEN_ERR_TIMEOUT,
                             "exchange #2 timed out after 300 ms: rank 2 of 3 did not take part");
  cr_expect(s->r[0].ms >= SHORT_MS - 5 && s->r[0].ms < SHORT_MS + 700, "%.0f ms", s->r[0].ms);
}

/* Rank 1 destroys its bootstrap after one exchange: named at once. */
Test(socket, exchange_counts_disagree) {
  shm_t *s = stops_after_one(1, 0, COLLGEN_ERR_PEER, "exchange #2: rank 1 (pid");
  cr_expect(s->r[0].ms < SHORT_MS, "%.0f ms: not a timeout", s->r[0].ms);
}

Test(socket, missing_rank_zero_times_out) {
  shm_t *s = shm_new();
  job_t j;
  jobs_init(&j, 1, 2, 0, 0, 0);
  j.rank = 1;
  j.timeout_ms = SHORT_MS;
  run_jobs(s, &j, 1);
  expect_fail(s, 0, COLLGEN_ERR_TIMEOUT, "rank 0 never listened for this id");
  cr_expect(s->r[0].ms >= SHORT_MS - 5 && s->r[0].ms < SHORT_MS + 700, "%.0f ms", s->r[0].ms);
}

/* n processes, of which process `who` is started as `rank` of `nranks`:
** every process fails with INVALID_ARG and a message holding fmt (which
** may name the process's pid with %d). */
static void misconfigured(int n, int who, int rank, int nranks, const char *fmt) {
  shm_t *s = shm_new();
  job_t jobs[MAXP];
  jobs_init(jobs, n, n, 0, 0, 0);
  jobs[who].rank = rank;
  jobs[who].nranks = nranks;
  run_jobs(s, jobs, n);
  char needle[256];
  snprintf(needle, sizeof needle, fmt, s->r[who].pid);
  for (int i = 0; i < n; ++i) expect_fail(s, i, COLLGEN_ERR_INVALID_ARG, needle);
}

Test(socket, nranks_mismatch) {
  misconfigured(2, 1, 1, 3, "rank 1 (pid %d) was started with nranks 3, rank 0");
}

/* The second claimant is told; the first learns it from rank 0. */
Test(socket, duplicate_rank) { misconfigured(3, 2, 1, 3, "two processes claim rank 1: pids"); }

Test(socket, second_rank_zero) {
  shm_t *s = shm_new();
  job_t jobs[3];
  jobs_init(jobs, 3, 2, 0, 0, 0);
  jobs[2].rank = 0;
  jobs[0].timeout_ms = jobs[2].timeout_ms = 1000;
  pid_t pids[3];
  pids[0] = spawn(s, 0, run_job, &jobs[0]);
  wait_listening(s);
  cr_expect(socket_listed(&s->id), "rank 0 never listened");
  pids[2] = spawn(s, 2, run_job, &jobs[2]);
  reap_ok(&pids[2], 1, 5000);
  pids[1] = spawn(s, 1, run_job, &jobs[1]);
  reap_ok(pids, 2, 5000);
  expect_ok(s, 2);
  expect_fail(s, 2, COLLGEN_ERR_INVALID_ARG, "another process already listens for this id");
}

/* A process with the right socket tag and the wrong secret is refused and
** told; rank 0 keeps waiting and names it when the real rank stays away. */
static void forged_rank(shm_t *s, int idx, const void *arg) {
  (void)arg;
  collgen_unique_id_t id = s->id;
  id.internal[COLLGEN__UID_OFF_SECRET + 5] ^= 0x40;
  collgen__uid_seal(&id);
  collgen__boot *b;
  result_t *r = &s->r[idx];
  r->fd_before = count_fds();
  collgen__boot_options o = {SHORT_MS, NULL};
  r->rc = collgen__boot_create(&b, &id, 1, 2, &o, r->msg, sizeof r->msg);
  r->fd_after = count_fds();
}

/* Rank 0 of 2 (process 0, bound `timeout_ms`) while process 1 runs
** `stranger` instead of rank 1; the stranger is released (s->release) once
** rank 0 is done. */
static shm_t *rank0_against(child_fn stranger, const void *arg, int timeout_ms) {
  shm_t *s = shm_new();
  job_t j;
  jobs_init(&j, 1, 2, 0, 0, 0);
  j.timeout_ms = timeout_ms;
  pid_t pids[2];
  pids[0] = spawn(s, 0, run_job, &j);
  pids[1] = spawn(s, 1, stranger, arg);
  reap_ok(pids, 1, 8000);
  s->release = 1;
  reap_ok(&pids[1], 1, 8000);
  return s;
}

Test(socket, wrong_secret_is_refused_and_named) {
  shm_t *s = rank0_against(forged_rank, NULL, SHORT_MS);
  expect_fail(s, 1, COLLGEN_ERR_INVALID_ARG, "rank 0 refused this process: wrong secret");
  expect_fail(s, 0, COLLGEN_ERR_TIMEOUT, "rank 1 of 2 never joined");
  char who[64];
  snprintf(who, sizeof who, "refused 1 connection: pid %d", s->r[1].pid);
  cr_expect(strstr(s->r[0].msg, who) && strstr(s->r[0].msg, "wrong secret"), "%s",
            s->r[0].msg);
  cr_expect(strstr(s->r[0].log, "wrong secret"), "no warning logged: %s", s->r[0].log);
}

/* ---- Hostile bytes on the socket ------------------------------------------- */

/* The abstract address of an id's socket, computed from the id as a
** stranger reading /proc/net/unix would find it. */
static socklen_t raw_addr(const collgen_unique_id_t *id, struct sockaddr_un *a) {
  char name[64];
  if (collgen__boot_socket_name(id, name, sizeof name) != 0) abort();
  memset(a, 0, sizeof *a);
  a->sun_family = AF_UNIX;
  memcpy(a->sun_path + 1, name, strlen(name));
  return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(name));
}

/* One blocking connect to the socket of id; -1 if nobody listens. */
static int raw_try_connect(const collgen_unique_id_t *id) {
  struct sockaddr_un a;
  socklen_t len = raw_addr(id, &a);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd >= 0 && connect(fd, (struct sockaddr *)&a, len) == 0) return fd;
  if (fd >= 0) close(fd);
  return -1;
}

/* Connects to rank 0's socket for s->id; -1 if it does not listen within 2 s. */
static int raw_connect(const collgen_unique_id_t *id) {
  for (int tries = 0; tries < 400; ++tries) {
    int fd = raw_try_connect(id);
    if (fd >= 0) return fd;
    usleep(5000);
  }
  return -1;
}

static void raw_send(int fd, const void *p, size_t n) {
  if (send(fd, p, n, MSG_NOSIGNAL) != (ssize_t)n) { /* the test notices the effect */
  }
}

static void raw_header(int fd, uint32_t type, uint32_t seq, uint32_t rank, uint32_t length,
                       uint32_t nfds) {
  uint8_t h[COLLGEN__WIRE_HEADER];
  collgen__wire_header x = {type, seq, rank, length, nfds};
  collgen__wire_pack_header(h, &x);
  raw_send(fd, h, sizeof h);
}

/* A HELLO for rank `rank` of `nranks` with the id's real secret. */
static void raw_hello(int fd, const collgen_unique_id_t *id, int rank, int nranks) {
  uint8_t p[COLLGEN__WIRE_HELLO];
  char err[256];
  cr_assert_eq(collgen__uid_open(id, p, p + COLLGEN__UID_TAG_BYTES, err, sizeof err), 0);
  collgen__wire_info in = {(uint32_t)rank, (uint32_t)nranks, (uint32_t)getpid(), 0, {0}};
  collgen__host_id(NULL, in.host);
  collgen__wire_pack_info(p + COLLGEN__UID_TAG_BYTES + COLLGEN__UID_SECRET_BYTES, &in);
  raw_header(fd, COLLGEN__MSG_HELLO, 0, (uint32_t)rank, sizeof p, 0);
  raw_send(fd, p, sizeof p);
}

typedef enum { GARBAGE, HUGE_LENGTH, SILENT, PARTIAL, WRONG_TYPE, FD_WITH_HELLO } hostility;

/* One hostile client per kind, each on its own connection, held open. */
static void hostile_clients(shm_t *s, int idx, const void *arg) {
  (void)idx;
  (void)arg;
  int fds[6];
  for (int k = 0; k < 6; ++k) fds[k] = raw_connect(&s->id);
  uint8_t junk[1000];
  fill(junk, sizeof junk, s->seed, 99, 99);
  raw_send(fds[GARBAGE], junk, sizeof junk);
  raw_header(fds[HUGE_LENGTH], COLLGEN__MSG_HELLO, 0, 1, 0xffffffffu, 0);
  raw_header(fds[PARTIAL], COLLGEN__MSG_HELLO, 0, 1, COLLGEN__WIRE_HELLO, 0);
  raw_send(fds[PARTIAL], junk, 10);
  shutdown(fds[PARTIAL], SHUT_WR);
  raw_header(fds[WRONG_TYPE], COLLGEN__MSG_RESULT, 0, 1, 0, 0);
  /* a descriptor riding on a HELLO header: refused, and closed by rank 0 */
  uint8_t h[COLLGEN__WIRE_HEADER];
  collgen__wire_header x = {COLLGEN__MSG_HELLO, 0, 1, COLLGEN__WIRE_HELLO, 0};
  collgen__wire_pack_header(h, &x);
  int passed = memfd_create("hostile", MFD_CLOEXEC);
  int closed;
  char err[128];
  collgen__wire_send(fds[FD_WITH_HELLO], &x, NULL, 0, &passed, 1, collgen__now_ms() + 1000,
                     &closed, err, sizeof err);
  close(passed);
  wait_flag(&s->release, 5000); /* hold the silent ones open */
  for (int k = 0; k < 6; ++k) close(fds[k]);
}

Test(socket, hostile_bytes_are_refused_and_the_rendezvous_goes_on) {
  shm_t *s = shm_new();
  job_t jobs[2];
  jobs_init(jobs, 2, 2, 1, 100, 0);
  jobs[0].timeout_ms = 3000;
  pid_t pids[3];
  pids[0] = spawn(s, 0, run_job, &jobs[0]);
  pids[2] = spawn(s, 2, hostile_clients, NULL);
  /* rank 1 comes once rank 0 refused the five that speak (the silent one
  ** stays pending) */
  double end = collgen__now_ms() + 3000;
  while (count_lines(s->r[0].log, "refused a connection") < 5 && collgen__now_ms() < end)
    usleep(1000);
  pids[1] = spawn(s, 1, run_job, &jobs[1]);
  reap_ok(pids, 2, 8000);
  s->release = 1;
  reap_ok(&pids[2], 1, 8000);
  expect_ok(s, 2);
  const char *log = s->r[0].log;
  cr_expect(strstr(log, "not a collgen bootstrap message"), "%s", log);
  cr_expect(strstr(log, "HELLO message announces 4294967295 payload bytes"), "%s", log);
  cr_expect(strstr(log, "closed the connection in the middle of a HELLO message"), "%s", log);
  cr_expect(strstr(log, "its first message is not a HELLO"), "%s", log);
  cr_expect(strstr(log, "unexpected file descriptors"), "%s", log);
}

Test(socket, only_hostile_clients_time_out_named) {
  shm_t *s = rank0_against(hostile_clients, NULL, SHORT_MS + 200);
  expect_fail(s, 0, COLLGEN_ERR_TIMEOUT, "rank 1 of 2 never joined");
  cr_expect(strstr(s->r[0].msg, "refused 5 connections"), "%s", s->r[0].msg);
  cr_expect(strstr(s->r[0].msg, "; 1 connection still waiting to prove the secret"), "%s",
            s->r[0].msg);
  cr_expect(s->r[0].ms < SHORT_MS + 200 + 700, "%.0f ms: the silent client held it up",
            s->r[0].ms);
}

/* ---- Strangers flooding the socket ----------------------------------------- */

/* The number before `what` in a message: "...; 36 connections dropped ..."
** gives 36 for " dropped"; 0 when `what` is absent. */
static int count_of(const char *text, const char *what) {
  const char *p = strstr(text, what);
  if (!p) return 0;
  while (p > text && p[-1] != ';' && p[-1] != ':') --p; /* the clause's start */
  return atoi(p);
}

typedef enum { HOLD, CHURN, BAD_HELLOS } flood_kind;
typedef struct {
  flood_kind kind;
  int n; /* HOLD: connections to hold (at most 256) */
} flood_t;

/* A same-user process without the secret that knows the socket's name
** (computed from the id, as /proc/net/unix shows it), until released:
**  HOLD: opens n silent connections and holds them;
**  CHURN: connects and disconnects in a tight loop, in bursts of 128;
**  BAD_HELLOS: in turn sends garbage, a HELLO with a wrong secret (both
**    then closed) and the first 40 bytes of a HELLO, kept open (the last
**    100 of those).
** It counts its connections in r->exchanges and sets r->ready once in
** full swing (n held; 512 made). */
static void stranger(shm_t *s, int idx, const void *arg) {
  const flood_t *f = arg;
  result_t *r = &s->r[idx];
  collgen_unique_id_t forged = s->id;
  forged.internal[COLLGEN__UID_OFF_SECRET] ^= 1;
  collgen__uid_seal(&forged);
  int held[256];
  uint8_t junk[1000];
  fill(junk, sizeof junk, s->seed, 98, 98);
  for (int k = 0; k < 256; ++k) held[k] = -1;
  wait_listening(s);
  for (int k = 0; !s->release; ++k) {
    if (f->kind == HOLD && k >= f->n) {
      r->ready = 1;
      usleep(1000);
      continue;
    }
    int fd = raw_try_connect(&s->id);
    if (fd < 0) {
      usleep(1000);
      continue;
    }
    r->exchanges++;
    if (f->kind == HOLD) {
      held[k] = fd;
    } else if (f->kind == CHURN) {
      held[k % 128] = fd;
      if (k % 128 == 127)
        for (int i = 0; i < 128; ++i) close(held[i]), held[i] = -1;
    } else if (k % 3 == 0) {
      raw_send(fd, junk, sizeof junk);
      close(fd);
    } else if (k % 3 == 1) {
      raw_hello(fd, &forged, 1, 2);
      close(fd);
    } else {
      uint8_t hello[COLLGEN__WIRE_HEADER + 40];
      collgen__wire_header h = {COLLGEN__MSG_HELLO, 0, 1, COLLGEN__WIRE_HELLO, 0};
      collgen__wire_pack_header(hello, &h);
      memcpy(hello + COLLGEN__WIRE_HEADER, junk, 40);
      raw_send(fd, hello, sizeof hello);
      int slot = (k / 3) % 100;
      if (held[slot] >= 0) close(held[slot]);
      held[slot] = fd;
    }
    if (f->kind != HOLD && k >= 512) r->ready = 1;
  }
  for (int k = 0; k < 256; ++k)
    if (held[k] >= 0) close(held[k]);
}

/* Rank 0 of n listens; the stranger `f` floods its socket; once it is in
** full swing, ranks 1..n-1 start. Every rank joins and makes an exchange
** within 10 s, and rank 0 logs the strangers' connections it dropped. */
static shm_t *job_under_flood(int n, flood_t f) {
  shm_t *s = shm_new();
  job_t jobs[MAXP];
  jobs_init(jobs, n, n, 1, 64, 1);
  for (int i = 0; i < n; ++i) jobs[i].timeout_ms = 8000;
  pid_t pids[MAXP];
  pids[0] = spawn(s, 0, run_job, &jobs[0]);
  wait_listening(s);
  pids[n] = spawn(s, n, stranger, &f);
  wait_flag(&s->r[n].ready, 5000);
  cr_expect(s->r[n].ready, "the stranger never got going (%d connections)", s->r[n].exchanges);
  for (int i = 1; i < n; ++i) pids[i] = spawn(s, i, run_job, &jobs[i]);
  reap_ok(pids, n, 10000);
  s->release = 1;
  reap_ok(&pids[n], 1, 5000);
  expect_ok(s, n);
  for (int i = 0; i < n; ++i) {
    cr_expect_eq(s->r[i].exchanges, 1, "process %d", i);
    cr_expect(s->r[i].ms < 8000, "process %d: %.0f ms", i, s->r[i].ms);
  }
  const char *log = s->r[0].log;
  cr_expect(strstr(log, "bootstrap rank 0: every rank joined; "), "no count logged: %s", log);
  return s;
}

/* Every connection a stranger made before the last rank came is counted
** by rank 0 once: refused, dropped, or still waiting. */
static int strangers_counted(const char *log) {
  const char *sum = strstr(log, "every rank joined; ");
  if (!sum) return -1;
  int refused = 0;
  const char *p = strstr(sum, "refused ");
  if (p) refused = atoi(p + strlen("refused "));
  return refused + count_of(sum, " dropped for not proving the secret") +
         count_of(sum, " dropped unproven to make room") + count_of(sum, " still waiting");
}

/* The attack: 256 silent connections held before the ranks come.
** The old rank 0 kept 64 of them forever and turned the real ranks away. */
static void held_flood(int n) {
  shm_t *s = job_under_flood(n, (flood_t){HOLD, 256});
  const char *log = s->r[0].log;
  cr_expect_eq(strangers_counted(log), 256, "%s", log);
  /* at most COLLGEN__BOOT_MAX_PENDING were held at once */
  cr_expect_geq(count_of(log, " dropped unproven to make room") +
                    count_of(log, " dropped for not proving the secret"),
                256 - COLLGEN__BOOT_MAX_PENDING, "%s", log);
}

Test(socket, two_ranks_join_while_a_stranger_holds_256_connections) { held_flood(2); }
Test(socket, four_ranks_join_while_a_stranger_holds_256_connections) { held_flood(4); }

/* The connections that rank 0 may have counted as not proving the secret:
** the stranger's, and the real ranks' that it dropped (they log them). */
static int connections_made(shm_t *s, int n) {
  int made = s->r[n].exchanges;
  for (int i = 1; i < n; ++i) {
    const char *p = strstr(s->r[i].log, "joined on connection ");
    if (p) made += atoi(p + strlen("joined on connection ")) - 1;
  }
  return made;
}

/* Rank 0 counted every connection it handled, and no more. */
static void expect_counted(shm_t *s, int n) {
  int counted = strangers_counted(s->r[0].log), made = connections_made(s, n);
  cr_expect(counted >= 512 && counted <= made, "%d of %d counted: %s", counted, made,
            s->r[0].log);
}

static void churn_flood(int n) {
  shm_t *s = job_under_flood(n, (flood_t){CHURN, 0});
  expect_counted(s, n);
}

Test(socket, two_ranks_join_while_a_stranger_connects_in_a_loop) { churn_flood(2); }
Test(socket, four_ranks_join_while_a_stranger_connects_in_a_loop) { churn_flood(4); }

static void bad_hello_flood(int n) {
  shm_t *s = job_under_flood(n, (flood_t){BAD_HELLOS, 0});
  const char *log = s->r[0].log;
  expect_counted(s, n);
  cr_expect(strstr(log, "not a collgen bootstrap message") && strstr(log, "wrong secret"), "%s",
            log);
  cr_expect(strstr(log, "further connections that do not prove the secret are counted, not "
                        "logged"), "%s", log);
  cr_expect_leq(count_lines(log, "refused a connection"), 8, "%s", log);
}

Test(socket, two_ranks_join_while_a_stranger_sends_bad_hellos) { bad_hello_flood(2); }
Test(socket, four_ranks_join_while_a_stranger_sends_bad_hellos) { bad_hello_flood(4); }

/* Rank 0 alone with a stranger holding 100 silent connections, bound just
** past the authentication deadline: the 36 beyond the table were dropped
** to make room, the other 64 at the deadline; the timeout counts them and
** blames no rank. The old rank 0 refused 36 and held 64 until its end. */
Test(socket, strangers_are_counted_in_the_timeout) {
  flood_t f = {HOLD, 100};
  shm_t *s = rank0_against(stranger, &f, COLLGEN__BOOT_AUTH_MS + 400);
  const char *msg = s->r[0].msg;
  expect_fail(s, 0, COLLGEN_ERR_TIMEOUT, "rank 1 of 2 never joined (1 of 2 present); ");
  char want[128];
  snprintf(want, sizeof want, "; %d connections dropped for not proving the secret within %d ms",
           COLLGEN__BOOT_MAX_PENDING, COLLGEN__BOOT_AUTH_MS);
  cr_expect(strstr(msg, want), "%s lacks %s", msg, want);
  snprintf(want, sizeof want, "; %d connections dropped unproven to make room",
           100 - COLLGEN__BOOT_MAX_PENDING);
  cr_expect(strstr(msg, want), "%s lacks %s", msg, want);
  cr_expect(!strstr(msg, "refused") && !strstr(msg, "closed"), "%s", msg);
  cr_expect(s->r[0].ms < COLLGEN__BOOT_AUTH_MS + 400 + 700, "%.0f ms", s->r[0].ms);
}

/* A flood of silent connections costs a bounded number of descriptors and
** rank 0 still ends on time (before the deadline of the ones it holds). */
Test(socket, connection_flood_is_bounded) {
  flood_t f = {HOLD, 100};
  shm_t *s = rank0_against(stranger, &f, SHORT_MS);
  expect_fail(s, 0, COLLGEN_ERR_TIMEOUT, "rank 1 of 2 never joined");
  char want[128];
  snprintf(want, sizeof want, "; %d connections dropped unproven to make room",
           100 - COLLGEN__BOOT_MAX_PENDING);
  cr_expect(strstr(s->r[0].msg, want), "%s", s->r[0].msg);
  snprintf(want, sizeof want, "; %d connections still waiting to prove the secret",
           COLLGEN__BOOT_MAX_PENDING);
  cr_expect(strstr(s->r[0].msg, want), "%s", s->r[0].msg);
}

/* ---- What rank 1 makes of a rank 0 that does not welcome it ----------------- */

/* How a stand-in for rank 0 treats each connection (after reading its
** HELLO): asks it to connect again, closes it unanswered, or closes it and
** stops listening (as a rank 0 that exits). */
typedef enum { ANSWER_RETRY, ANSWER_CLOSE, ANSWER_CLOSE_AND_GO } fake_answer;

/* Listens on s->id's socket and answers each connection as *arg says,
** counting them in r->exchanges, until released (or gone). */
static void fake_root(shm_t *s, int idx, const void *arg) {
  fake_answer how = *(const fake_answer *)arg;
  result_t *r = &s->r[idx];
  struct sockaddr_un a;
  socklen_t len = raw_addr(&s->id, &a);
  int l = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (bind(l, (struct sockaddr *)&a, len) != 0 || listen(l, 16) != 0) {
    r->bad++;
    return;
  }
  while (!s->release && l >= 0) {
    struct pollfd p = {l, POLLIN, 0};
    if (poll(&p, 1, 10) != 1) continue;
    int fd = accept4(l, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0) continue;
    uint8_t hello[COLLGEN__WIRE_HEADER + COLLGEN__WIRE_HELLO];
    size_t got = 0;
    struct pollfd q = {fd, POLLIN, 0};
    while (got < sizeof hello && poll(&q, 1, 200) == 1) {
      ssize_t k = recv(fd, hello + got, sizeof hello - got, 0);
      if (k <= 0) break;
      got += (size_t)k;
    }
    if (got != sizeof hello) r->bad++;
    if (how == ANSWER_RETRY) raw_header(fd, COLLGEN__MSG_RETRY, 0, 0, 0, 0);
    close(fd);
    r->exchanges++;
    if (how == ANSWER_CLOSE_AND_GO) close(l), l = -1;
  }
  if (l >= 0) close(l);
}

/* Rank 1 (bound SHORT_MS) against fake_root(how). */
static shm_t *rank1_against(fake_answer how) {
  shm_t *s = shm_new();
  job_t j;
  jobs_init(&j, 1, 2, 0, 0, 0);
  j.rank = 1;
  j.timeout_ms = SHORT_MS;
  pid_t pids[2];
  pids[1] = spawn(s, 1, fake_root, &how);
  wait_listening(s);
  pids[0] = spawn(s, 0, run_job, &j);
  reap_ok(pids, 1, 5000);
  s->release = 1;
  reap_ok(&pids[1], 1, 5000);
  cr_expect_eq(s->r[1].bad, 0, "rank 1 sent no whole HELLO");
  return s;
}

/* Told to connect again, rank 1 does so until its bound, then says how
** often rank 0 (alive: it answered) asked; it blames nobody's death. */
Test(socket, a_rank_asked_to_connect_again_does_so) {
  shm_t *s = rank1_against(ANSWER_RETRY);
  char want[160];
  snprintf(want, sizeof want, "rank 0 (pid %d) asked this rank to connect again %d time%s",
           s->r[1].pid, s->r[1].exchanges, s->r[1].exchanges == 1 ? "" : "s");
  expect_fail(s, 0, COLLGEN_ERR_TIMEOUT, want);
  cr_expect_geq(s->r[1].exchanges, 2, "rank 1 did not connect again");
  cr_expect(!strstr(s->r[0].msg, "exited") && !strstr(s->r[0].msg, "killed"), "%s",
            s->r[0].msg);
}

/* A connection closed before the WELCOME does not prove rank 0 died: while
** rank 0 listens, rank 1 connects again, and its message says what it
** knows. */
Test(socket, a_connection_closed_before_the_welcome_is_no_death) {
  shm_t *s = rank1_against(ANSWER_CLOSE);
  char want[200];
  snprintf(want, sizeof want, "rank 0 (pid %d) closed the connection before welcoming this rank "
           "%d time%s (it may have refused it, or exited)", s->r[1].pid, s->r[1].exchanges,
           s->r[1].exchanges == 1 ? "" : "s");
  expect_fail(s, 0, COLLGEN_ERR_TIMEOUT, want);
  cr_expect_geq(s->r[1].exchanges, 2, "rank 1 did not connect again");
}

/* Closed, and no listener any more: rank 0 is gone (or gave up), at once. */
Test(socket, rank_zero_gone_before_the_welcome_is_named) {
  shm_t *s = rank1_against(ANSWER_CLOSE_AND_GO);
  char want[200];
  snprintf(want, sizeof want, "rank 0 (pid %d) closed the connection before welcoming this rank "
           "and no longer listens for this id", s->r[1].pid);
  expect_fail(s, 0, COLLGEN_ERR_PEER, want);
  cr_expect_eq(s->r[1].exchanges, 1);
  cr_expect(s->r[0].ms < SHORT_MS, "%.0f ms: not a timeout", s->r[0].ms);
}

/* A process with the secret that then breaks the protocol: a HELLO for
** rank 0, a rank outside the job, or garbage in an exchange. */
typedef struct {
  int rank, nranks;
  int garbage_in_exchange;
} raw_member;

static void raw_member_run(shm_t *s, int idx, const void *arg) {
  const raw_member *m = arg;
  int fd = raw_connect(&s->id);
  raw_hello(fd, &s->id, m->rank, m->nranks);
  if (m->garbage_in_exchange) {
    uint8_t buf[4096];
    struct pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, 3000) == 1 && recv(fd, buf, sizeof buf, 0) > 0) /* the WELCOME */
      raw_send(fd, "this is no contribution at all", 30);
  }
  wait_flag(&s->release, 5000);
  close(fd);
  s->r[idx].rc = 0;
}

static void member_breaks_protocol(raw_member m, int nranks, int status, const char *needle) {
  shm_t *s = shm_new();
  job_t jobs[2];
  jobs_init(jobs, 2, nranks, 1, 8, 0);
  pid_t pids[3];
  pids[0] = spawn(s, 0, run_job, &jobs[0]);
  pids[1] = spawn(s, 1, run_job, &jobs[1]);
  wait_joined(s, 1); /* rank 1 has joined: it must hear of the fault */
  pids[2] = spawn(s, 2, raw_member_run, &m);
  reap_ok(pids, 2, 8000);
  s->release = 1;
  reap_ok(&pids[2], 1, 8000);
  expect_fail(s, 0, status, needle);
  expect_fail(s, 1, status, needle);
}

Test(socket, member_claims_rank_zero) {
  member_breaks_protocol((raw_member){0, 3, 0}, 3, COLLGEN_ERR_INVALID_ARG, "also claims rank 0");
}

Test(socket, member_claims_rank_outside_the_job) {
  member_breaks_protocol((raw_member){7, 3, 0}, 3, COLLGEN_ERR_PEER,
                         "sent a bad rank record: rank record of rank 7 of 3 ranks");
}

Test(socket, member_with_other_nranks) {
  member_breaks_protocol((raw_member){2, 9, 0}, 3, COLLGEN_ERR_INVALID_ARG,
                         "was started with nranks 9, rank 0");
}

Test(socket, member_sends_garbage_in_an_exchange) {
  member_breaks_protocol((raw_member){2, 3, 1}, 3, COLLGEN_ERR_PEER,
                         "exchange #1: from rank 2 (pid");
}

/* ---- Peers that die --------------------------------------------------------- */

/* Rank 2 sends its HELLO and is killed before everyone has joined. */
static void hello_then_die(shm_t *s, int idx, const void *arg) {
  (void)idx;
  (void)arg;
  wait_joined(s, 1); /* rank 1 first: it must hear of the death */
  int fd = raw_connect(&s->id);
  raw_hello(fd, &s->id, 2, 4);
  wait_joined(s, 2);
  raise(SIGKILL);
}

Test(socket, peer_killed_during_rendezvous_is_named) {
  shm_t *s = shm_new();
  job_t jobs[2];
  jobs_init(jobs, 2, 4, 0, 0, 0); /* rank 3 never comes: only rank 2's death ends it */
  pid_t pids[3];
  pids[0] = spawn(s, 0, run_job, &jobs[0]);
  pids[1] = spawn(s, 1, run_job, &jobs[1]);
  pids[2] = spawn(s, 2, hello_then_die, NULL);
  cr_expect_eq(reap(pids, 3, 8000), 1, "only rank 2 is killed");
  char who[64];
  snprintf(who, sizeof who, "rank 2 (pid %d) closed its connection", s->r[2].pid);
  expect_fail(s, 0, COLLGEN_ERR_PEER, who);
  expect_fail(s, 1, COLLGEN_ERR_PEER, who);
  cr_expect(s->r[0].ms < 2000, "%.0f ms: not a timeout", s->r[0].ms);
}

/* A rank killed after the rendezvous: the others' exchange fails at once,
** naming it; then the survivors bootstrap again with a new id. */
static void survivor(shm_t *s, int idx, const void *arg) {
  const job_t *j = arg;
  run_job(s, idx, arg);
  result_t first = s->r[idx];
  job_t again = *j;
  again.nranks = 2;
  again.rank = j->survivor_rank;
  again.second_id = 1;
  again.die_after = 0;
  s->r[idx].exchanges = s->r[idx].bad = 0;
  run_job(s, idx, &again);
  result_t second = s->r[idx];
  s->r[idx] = first; /* the checks read the first outcome ... */
  s->r[idx].exchanges = second.rc == COLLGEN_OK ? second.exchanges : -1; /* ... and this */
  s->r[idx].bad += second.bad + (second.fd_after != second.fd_before ? 1000 : 0);
  if (second.rc != COLLGEN_OK)
    snprintf(s->r[idx].log, sizeof s->r[idx].log, "second bootstrap: %.1000s", second.msg);
}

static void peer_killed_in_exchange(int victim) {
  shm_t *s = shm_new();
  job_t jobs[3];
  jobs_init(jobs, 3, 3, 3, 5000, 2);
  jobs[victim].die_after = 1;
  for (int i = 0, k = 0; i < 3; ++i)
    if (i != victim) jobs[i].survivor_rank = k++;
  pid_t pids[3];
  for (int i = 0; i < 3; ++i)
    pids[i] = i == victim ? spawn(s, i, run_job, &jobs[i]) : spawn(s, i, survivor, &jobs[i]);
  cr_expect_eq(reap(pids, 3, 8000), 1);
  char who[64];
  snprintf(who, sizeof who, "rank %d (pid %d) closed its connection", victim, s->r[victim].pid);
  for (int i = 0; i < 3; ++i) {
    if (i == victim) continue;
    expect_fail(s, i, COLLGEN_ERR_PEER, who);
    cr_expect(strstr(s->r[i].msg, "exchange #2"), "%s", s->r[i].msg);
    cr_expect_eq(s->r[i].exchanges, 3, "the next bootstrap failed: %s", s->r[i].log);
  }
  cr_expect(!socket_listed(&s->id) && !socket_listed(&s->id2), "a socket outlived its job");
}

Test(socket, peer_killed_in_exchange_is_named) { peer_killed_in_exchange(2); }
Test(socket, rank_zero_killed_in_exchange_is_named) { peer_killed_in_exchange(0); }

/* ---- Exchanges that disagree ------------------------------------------------- */

Test(socket, exchange_sizes_disagree) {
  shm_t *s = shm_new();
  job_t jobs[3];
  jobs_init(jobs, 3, 3, 2, 16, 0);
  jobs[2].bytes_last = 32;
  run_jobs(s, jobs, 3);
  for (int i = 0; i < 3; ++i)
    expect_fail(s, i, COLLGEN_ERR_INVALID_ARG, "rank 2 (pid");
  cr_expect(strstr(s->r[1].msg, "brought 32 bytes and 0 descriptors, rank 0 16 bytes"), "%s",
            s->r[1].msg);
}

/* A rank whose own arguments are bad tells the others, who fail at once. */
Test(socket, a_rank_with_bad_arguments_is_named) {
  shm_t *s = shm_new();
  job_t jobs[3];
  jobs_init(jobs, 3, 3, 2, 16, 1);
  jobs[1].bad_fd_last = 1;
  run_jobs(s, jobs, 3);
  expect_fail(s, 1, COLLGEN_ERR_INVALID_ARG, "mine_fds[0]");
  expect_fail(s, 0, COLLGEN_ERR_INVALID_ARG, "rank 1 (pid");
  expect_fail(s, 2, COLLGEN_ERR_INVALID_ARG, "is not an open descriptor");
  cr_expect(s->r[0].ms < 2000 && s->r[2].ms < 2000, "not a timeout");
}

/* Rank 1 has room for 3 new descriptors but is sent 8: it fails, saying
** why, and leaks nothing; the others finish this exchange and learn of
** rank 1's failure in the next. */
Test(socket, out_of_descriptors_is_reported) {
  shm_t *s = shm_new();
  job_t jobs[3];
  jobs_init(jobs, 3, 3, 2, 8, 4);
  jobs[1].fd_room = 3;
  run_jobs(s, jobs, 3);
  expect_fail(s, 1, COLLGEN_ERR_PEER, "out of descriptors (RLIMIT_NOFILE)");
  cr_expect_eq(s->r[1].exchanges, 0);
  expect_fail(s, 0, COLLGEN_ERR_PEER, "exchange #2: rank 1 (pid");
  expect_fail(s, 2, COLLGEN_ERR_PEER, "RLIMIT_NOFILE");
}

/* ---- Other users, concurrency, limits -------------------------------------- */

static void as_nobody(shm_t *s, int idx, const void *arg) {
  if (setgid(65534) != 0 || setuid(65534) != 0) {
    s->r[idx].bad++;
    return;
  }
  run_job(s, idx, arg);
}

Test(socket, other_users_are_refused_both_ways) {
  if (geteuid() != 0) cr_skip_test("needs root to run a process as another user");
  shm_t *s = shm_new();
  job_t jobs[2];
  jobs_init(jobs, 2, 2, 0, 0, 0);
  jobs[0].timeout_ms = jobs[1].timeout_ms = SHORT_MS;
  pid_t pids[2];
  pids[0] = spawn(s, 0, run_job, &jobs[0]);
  pids[1] = spawn(s, 1, as_nobody, &jobs[1]);
  reap_ok(pids, 2, 5000);
  expect_fail(s, 0, COLLGEN_ERR_TIMEOUT, "(uid 65534): another user");
  /* the other user's process connects, is dropped, and finds no answer */
  cr_expect_neq(s->r[1].rc, COLLGEN_OK);
  /* a listener of another user is not sent the secret */
  s = shm_new();
  pids[0] = spawn(s, 0, as_nobody, &jobs[0]);
  usleep(50 * 1000);
  pids[1] = spawn(s, 1, run_job, &jobs[1]);
  reap_ok(pids, 2, 5000);
  expect_fail(s, 1, COLLGEN_ERR_PEER, "runs as uid 65534, this rank as uid 0");
}

/* Two bootstraps at once in the same two processes, one per thread, with
** different ids and data, roles swapped: neither sees the other's bytes. */
typedef struct {
  shm_t *s;
  job_t job;
  int slot;
} thread_arg;

static void *thread_job(void *p) {
  thread_arg *t = p;
  run_job(t->s, t->slot, &t->job);
  return NULL;
}

static void two_at_once(shm_t *s, int idx, const void *arg) {
  (void)arg;
  thread_arg t[2] = {{s, {0}, idx}, {s, {0}, 2 + idx}};
  for (int k = 0; k < 2; ++k) {
    t[k].job.salt = (uint64_t)k << 50;
    t[k].job.nranks = 2;
    t[k].job.exchanges = 4;
    t[k].job.bytes = 3000 + (size_t)k * 17;
    t[k].job.nfds = 1 + k;
    t[k].job.second_id = k;
    t[k].job.rank = k == 0 ? idx : 1 - idx;
  }
  pthread_t th[2];
  for (int k = 0; k < 2; ++k) pthread_create(&th[k], NULL, thread_job, &t[k]);
  for (int k = 0; k < 2; ++k) pthread_join(th[k], NULL);
}

Test(socket, two_bootstraps_at_once) {
  shm_t *s = shm_new();
  pid_t pids[2];
  pids[0] = spawn(s, 0, two_at_once, NULL);
  pids[1] = spawn(s, 1, two_at_once, NULL);
  reap_ok(pids, 2, 8000);
  for (int i = 0; i < 4; ++i) {
    cr_expect_eq(s->r[i].rc, COLLGEN_OK, "bootstrap %d: %s", i, s->r[i].msg);
    cr_expect_eq(s->r[i].exchanges, 4);
    cr_expect_eq(s->r[i].bad, 0);
  }
}

static void limits_job(shm_t *s, int idx, const void *arg) {
  (void)arg;
  result_t *r = &s->r[idx];
  collgen__boot *b;
  char err[512];
  r->fd_before = count_fds();
  if (collgen__boot_create(&b, &s->id, 0, 1, NULL, err, sizeof err) != COLLGEN_OK) {
    r->bad++;
    return;
  }
  static uint8_t big[2];
  int fds[COLLGEN__BOOT_MAX_FDS + 1] = {0};
  int all[COLLGEN__BOOT_MAX_FDS + 1];
  if (collgen__boot_allgather(b, big, big + 1, (size_t)COLLGEN__BOOT_MAX_TOTAL + 1) !=
          COLLGEN_ERR_INVALID_ARG ||
      !strstr(collgen__boot_last_error(b), "at most 67108864"))
    r->bad++;
  collgen__boot_destroy(b);
  collgen__boot_create(&b, &s->id, 0, 1, NULL, err, sizeof err);
  if (collgen__boot_allgather_fds(b, fds, COLLGEN__BOOT_MAX_FDS + 1, all) !=
      COLLGEN_ERR_INVALID_ARG)
    r->bad++;
  /* a broken bootstrap keeps its first error */
  if (collgen__boot_allgather(b, big, big + 1, 1) != COLLGEN_ERR_INVALID_ARG) r->bad++;
  collgen__boot_destroy(b);
  collgen__boot_create(&b, &s->id, 0, 1, NULL, err, sizeof err);
  if (collgen__boot_allgather(b, big, big, 1) != COLLGEN_ERR_INVALID_ARG ||
      !strstr(collgen__boot_last_error(b), "overlaps"))
    r->bad++;
  collgen__boot_destroy(b);
  r->fd_after = count_fds();
  r->finished = 1;
}

Test(socket, limits_are_refused) {
  shm_t *s = shm_new();
  pid_t pid = spawn(s, 0, limits_job, NULL);
  reap_ok(&pid, 1, 5000);
  expect_clean(&s->r[0], 0);
}

/* ---- The application's allgather callback ----------------------------------- */

/* A stand-in for MPI_Allgather between forked processes: rank 0's process
** is the hub; every other rank writes its bytes up a pipe and reads the
** whole down another. Waits at most 5 s; a peer gone or late is a failure
** (-1), as MPI would report it. */
typedef struct {
  int rank, nranks;
  int up[MAXP][2], down[MAXP][2];
  int fail_at;   /* fail (return -7) on this call, counting from 1; 0 = never */
  int swap;      /* deliver slots 0 and 1 swapped */
  int calls;
} pipes_t;

static int io_all(int fd, void *p, size_t n, int writing) {
  uint8_t *c = p;
  while (n > 0) {
    struct pollfd q = {fd, writing ? POLLOUT : POLLIN, 0};
    if (poll(&q, 1, 5000) != 1) return -1;
    ssize_t k = writing ? write(fd, c, n) : read(fd, c, n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return -1;
    c += k;
    n -= (size_t)k;
  }
  return 0;
}

static int pipes_allgather(void *ctx, const void *mine, void *all, size_t bytes) {
  pipes_t *p = ctx;
  if (++p->calls == p->fail_at) return -7;
  uint8_t *out = all;
  if (p->rank == 0) {
    memcpy(out, mine, bytes);
    for (int r = 1; r < p->nranks; ++r)
      if (io_all(p->up[r][0], out + (size_t)r * bytes, bytes, 0)) return -1;
    if (p->swap) {
      uint8_t *tmp = malloc(bytes);
      memcpy(tmp, out, bytes);
      memcpy(out, out + bytes, bytes);
      memcpy(out + bytes, tmp, bytes);
      free(tmp);
    }
    for (int r = 1; r < p->nranks; ++r)
      if (io_all(p->down[r][1], out, bytes * (size_t)p->nranks, 1)) return -1;
    return 0;
  }
  if (io_all(p->up[p->rank][1], (void *)mine, bytes, 1)) return -1;
  return io_all(p->down[p->rank][0], out, bytes * (size_t)p->nranks, 0);
}

typedef struct {
  pipes_t pipes;
  int exchanges;
  size_t bytes, bytes_last;
  int over_socket;  /* then open a socket bootstrap through it, pass fds */
  const char *host;
} cb_job;

/* Keeps only this rank's pipe ends, so a dead peer shows as end of file
** (and as EPIPE, not SIGPIPE, to a writer). */
static void keep_own_ends(pipes_t *p) {
  signal(SIGPIPE, SIG_IGN);
  for (int r = 1; r < p->nranks; ++r)
    for (int e = 0; e < 2; ++e) {
      int mine_up = (p->rank == 0 && e == 0) || (p->rank == r && e == 1);
      int mine_down = (p->rank == 0 && e == 1) || (p->rank == r && e == 0);
      if (!mine_up) close(p->up[r][e]);
      if (!mine_down) close(p->down[r][e]);
    }
}

static void run_cb_job(shm_t *s, int idx, const void *arg) {
  cb_job j = *(const cb_job *)arg;
  j.pipes.rank = idx;
  keep_own_ends(&j.pipes);
  result_t *r = &s->r[idx];
  collgen__boot *b;
  collgen__boot_options o;
  collgen__boot_options_init(&o);
  o.host_id = j.host;
  o.timeout_ms = 3000;
  r->rc = collgen__boot_create_callback(&b, pipes_allgather, &j.pipes, idx, j.pipes.nranks, &o,
                                        r->msg, sizeof r->msg);
  if (r->rc != COLLGEN_OK) return;
  r->caps = collgen__boot_caps(b);
  for (int q = 0; q < j.pipes.nranks; ++q) r->peer_pid[q] = collgen__boot_peer_info(b, q)->pid;
  job_t x;
  memset(&x, 0, sizeof x);
  x.rank = idx;
  x.nranks = j.pipes.nranks;
  x.exchanges = j.exchanges;
  x.bytes = j.bytes;
  x.bytes_last = j.bytes_last;
  /* descriptors are refused without breaking the bootstrap */
  int fd = 0, all[MAXP];
  if (collgen__boot_allgather_fds(b, &fd, 1, all) != COLLGEN_ERR_UNSUPPORTED) r->bad++;
  for (int e = 1; e <= j.exchanges && r->rc == COLLGEN_OK; ++e) {
    r->rc = exchange_once(b, &x, s, r, e);
    if (r->rc == COLLGEN_OK) r->exchanges++;
  }
  if (r->rc != COLLGEN_OK) snprintf(r->msg, sizeof r->msg, "%s", collgen__boot_last_error(b));
  if (r->rc == COLLGEN_OK && j.over_socket) {
    collgen__boot *sock;
    r->rc = collgen__boot_create_socket_over(&sock, b, &o, r->msg, sizeof r->msg);
    if (r->rc == COLLGEN_OK) {
      x.nfds = 2;
      x.exchanges = 2;
      for (int e = 1; e <= 2 && r->rc == COLLGEN_OK; ++e) r->rc = exchange_once(sock, &x, s, r, e);
      r->caps = collgen__boot_caps(sock);
      collgen__boot_destroy(sock);
    }
  }
  collgen__boot_destroy(b);
}

/* Runs rank i's job jobs[i] (n ranks) through fn in n children, over one
** set of pipes. */
static void run_cb(shm_t *s, cb_job *jobs, int n, child_fn fn) {
  pipes_t p;
  memset(&p, 0, sizeof p); /* slot 0 has no pipes: copied, never used */
  p.nranks = n;
  for (int r = 1; r < n; ++r) {
    cr_assert_eq(pipe2(p.up[r], O_CLOEXEC), 0);
    cr_assert_eq(pipe2(p.down[r], O_CLOEXEC), 0);
  }
  pid_t pids[MAXP];
  for (int i = 0; i < n; ++i) {
    jobs[i].pipes.nranks = n;
    memcpy(jobs[i].pipes.up, p.up, sizeof p.up);
    memcpy(jobs[i].pipes.down, p.down, sizeof p.down);
    pids[i] = spawn(s, i, fn, &jobs[i]);
  }
  for (int r = 1; r < n; ++r)
    for (int e = 0; e < 2; ++e) {
      close(p.up[r][e]);
      close(p.down[r][e]);
    }
  reap_ok(pids, n, 10000);
}

/* The same job on n ranks. */
static void run_cb_same(shm_t *s, const cb_job *job, int n) {
  cb_job jobs[MAXP];
  for (int i = 0; i < n; ++i) jobs[i] = *job;
  run_cb(s, jobs, n, run_cb_job);
}

Test(callback, all_gather_over_the_applications_exchange) {
  shm_t *s = shm_new();
  cb_job j = {.exchanges = 3, .bytes = 777};
  run_cb_same(s, &j, 4);
  for (int i = 0; i < 4; ++i) {
    cr_expect_eq(s->r[i].rc, COLLGEN_OK, "rank %d: %s", i, s->r[i].msg);
    cr_expect_eq(s->r[i].exchanges, 3);
    cr_expect_eq(s->r[i].bad, 0);
    cr_expect_eq(s->r[i].caps, 0u, "no descriptors, no bound");
    for (int q = 0; q < 4; ++q) cr_expect_eq(s->r[i].peer_pid[q], s->r[q].pid);
  }
}

Test(callback, one_rank_works) {
  shm_t *s = shm_new();
  cb_job j = {.exchanges = 2, .bytes = 8};
  run_cb_same(s, &j, 1);
  cr_expect_eq(s->r[0].rc, COLLGEN_OK, "%s", s->r[0].msg);
  cr_expect_eq(s->r[0].exchanges, 2);
}

Test(callback, socket_opened_through_it_passes_descriptors) {
  shm_t *s = shm_new();
  cb_job j = {.exchanges = 1, .bytes = 64, .over_socket = 1};
  run_cb_same(s, &j, 3);
  for (int i = 0; i < 3; ++i) {
    cr_expect_eq(s->r[i].rc, COLLGEN_OK, "rank %d: %s", i, s->r[i].msg);
    cr_expect_eq(s->r[i].bad, 0);
    cr_expect_eq(s->r[i].caps, COLLGEN__BOOT_CAP_FDS | COLLGEN__BOOT_CAP_BOUNDED);
  }
}

Test(callback, no_socket_across_hosts) {
  shm_t *s = shm_new();
  cb_job jobs[3] = {{.exchanges = 1, .bytes = 8, .over_socket = 1, .host = "here"}};
  jobs[1] = jobs[0];
  jobs[2] = jobs[0];
  jobs[2].host = "elsewhere";
  run_cb(s, jobs, 3, run_cb_job);
  for (int i = 0; i < 3; ++i)
    expect_fail(s, i, COLLGEN_ERR_UNSUPPORTED, "ranks 0 and 2 are on different hosts");
}

/* Rank 1's callback fails in exchange #2 (its calls: the rank records, then
** two per exchange); the others' callbacks then fail too, as MPI's would. */
Test(callback, failure_of_the_callback_is_reported) {
  shm_t *s = shm_new();
  cb_job jobs[3] = {{.exchanges = 2, .bytes = 8}};
  jobs[1] = jobs[2] = jobs[0];
  jobs[1].pipes.fail_at = 4;
  run_cb(s, jobs, 3, run_cb_job);
  for (int i = 0; i < 3; ++i) {
    expect_fail(s, i, COLLGEN_ERR_PEER, "exchange #2: the application's allgather callback "
                                        "failed");
    cr_expect_eq(s->r[i].exchanges, 1);
  }
  cr_expect(strstr(s->r[1].msg, "returned -7, rank 1"), "%s", s->r[1].msg);
}

Test(callback, misplaced_slots_are_refused) {
  shm_t *s = shm_new();
  cb_job j = {.exchanges = 1, .bytes = 8};
  j.pipes.swap = 1;
  run_cb_same(s, &j, 3);
  for (int i = 0; i < 3; ++i)
    expect_fail(s, i, COLLGEN_ERR_INVALID_ARG, "slot 0 of the allgather callback's output "
                                               "holds rank 1's record");
}

Test(callback, exchange_sizes_disagree) {
  shm_t *s = shm_new();
  cb_job jobs[3] = {{.exchanges = 2, .bytes = 8, .bytes_last = 16}};
  jobs[1] = jobs[2] = jobs[0];
  jobs[1].bytes_last = 0; /* rank 1 keeps 8 bytes */
  run_cb(s, jobs, 3, run_cb_job);
  expect_fail(s, 0, COLLGEN_ERR_INVALID_ARG, "rank 1 (pid");
  expect_fail(s, 0, COLLGEN_ERR_INVALID_ARG, "is at exchange #2 with 8 bytes, rank 0 with 16");
  expect_fail(s, 1, COLLGEN_ERR_INVALID_ARG, "with 16 bytes, rank 1 with 8");
}

/* A rank whose arguments are bad makes the first call with its error: the
** others fail at once with its reason, and nobody waits in the second. */
static void cb_bad_args(shm_t *s, int idx, const void *arg) {
  cb_job j = *(const cb_job *)arg;
  j.pipes.rank = idx;
  keep_own_ends(&j.pipes);
  result_t *r = &s->r[idx];
  collgen__boot *b;
  r->rc = collgen__boot_create_callback(&b, pipes_allgather, &j.pipes, idx, j.pipes.nranks, NULL,
                                        r->msg, sizeof r->msg);
  if (r->rc != COLLGEN_OK) return;
  uint8_t mine[8] = {0}, all[8 * MAXP];
  r->rc = collgen__boot_allgather(b, idx == 2 ? NULL : mine, all, sizeof mine);
  snprintf(r->msg, sizeof r->msg, "%s", collgen__boot_last_error(b));
  collgen__boot_destroy(b);
}

Test(callback, a_rank_with_bad_arguments_is_named) {
  shm_t *s = shm_new();
  cb_job jobs[3];
  memset(jobs, 0, sizeof jobs);
  run_cb(s, jobs, 3, cb_bad_args);
  expect_fail(s, 2, COLLGEN_ERR_INVALID_ARG, "exchange: mine is NULL");
  expect_fail(s, 0, COLLGEN_ERR_INVALID_ARG, "exchange #1: rank 2 (pid");
  expect_fail(s, 1, COLLGEN_ERR_INVALID_ARG, "failed: exchange: mine is NULL");
}
