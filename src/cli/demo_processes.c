/*
** demo_processes.c -- forks the ranks of `collgen demo --processes` and
** collects their output (see demo_processes.h).
*/
#define _POSIX_C_SOURCE 200809L
#include "demo_processes.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "gpu_probe.h"
#include "internal.h"

#define OUTPUT_CAP (1 << 20) /* bytes kept of each rank's output */

typedef struct {
  pid_t pid;
  int fd;          /* read end of the rank's stdout+stderr, -1 at EOF */
  int status;      /* from waitpid, valid once reaped */
  int reaped;
  char *out;
  size_t len;
} rank_proc;

/* Forks rank r with its output on a pipe; the child never returns. */
static int start_rank(rank_proc *p, int nranks, const collgen_unique_id_t *id, int r, int device,
                      demo_rank_fn run) {
  int fds[2];
  if (pipe(fds) != 0) return -1;
  fflush(NULL);
  p->pid = fork();
  if (p->pid == 0) {
    close(fds[0]);
    dup2(fds[1], STDOUT_FILENO);
    dup2(fds[1], STDERR_FILENO);
    close(fds[1]);
    int rc = run(nranks, id, r, device);
    fflush(NULL);
    _exit(rc == 0 ? 0 : 1);
  }
  close(fds[1]);
  p->fd = p->pid > 0 ? fds[0] : -1;
  if (p->pid < 0) close(fds[0]);
  return p->pid > 0 ? 0 : -1;
}

/* Appends what rank p has written (up to OUTPUT_CAP); closes fd at EOF. */
static void drain(rank_proc *p) {
  char buf[4096];
  ssize_t r = read(p->fd, buf, sizeof buf);
  if (r < 0 && errno == EINTR) return;
  if (r <= 0) {
    close(p->fd);
    p->fd = -1;
    return;
  }
  size_t keep = p->len + (size_t)r > OUTPUT_CAP ? OUTPUT_CAP - p->len : (size_t)r;
  char *grown = keep ? realloc(p->out, p->len + keep + 1) : p->out;
  if (!grown) return;
  memcpy(grown + p->len, buf, keep);
  p->out = grown;
  p->len += keep;
  p->out[p->len] = 0;
}

/* Collects every rank's output until all pipes are closed; reaps ranks
** as they end and kills the rest when one dies by a signal. */
static void collect(rank_proc *ps, int n) {
  for (;;) {
    struct pollfd fds[COLLGEN_MAX_DEVICES];
    int open_count = 0, map[COLLGEN_MAX_DEVICES];
    for (int r = 0; r < n; ++r)
      if (ps[r].fd >= 0) {
        fds[open_count] = (struct pollfd){ps[r].fd, POLLIN, 0};
        map[open_count++] = r;
      }
    if (open_count == 0) break;
    int ready = poll(fds, (nfds_t)open_count, 200);
    for (int k = 0; ready > 0 && k < open_count; ++k)
      if (fds[k].revents) drain(&ps[map[k]]);
    for (int r = 0; r < n; ++r) {
      if (ps[r].reaped || waitpid(ps[r].pid, &ps[r].status, WNOHANG) != ps[r].pid) continue;
      ps[r].reaped = 1;
      if (WIFSIGNALED(ps[r].status))
        for (int o = 0; o < n; ++o)
          if (!ps[o].reaped) kill(ps[o].pid, SIGKILL);
    }
  }
  for (int r = 0; r < n; ++r)
    if (!ps[r].reaped && waitpid(ps[r].pid, &ps[r].status, 0) == ps[r].pid) ps[r].reaped = 1;
}

int demo_processes(int nranks, demo_rank_fn run, demo_no_gpu_fn no_gpu) {
  char why[600] = "";
  const int gpus = collgen__gpu_count_in_child(why, sizeof why);
  if (gpus < 1) return no_gpu(why);
  int n = nranks > 0 ? nranks : gpus < 2 ? 2 : gpus;
  if (n > COLLGEN_MAX_DEVICES) n = COLLGEN_MAX_DEVICES;
  collgen_unique_id_t id;
  int status = collgen_get_unique_id(&id);
  if (status != COLLGEN_OK) return cli_failure("demo", status, collgen_last_error());
  printf("collgen demo: %d processes, one rank each, on %d GPU(s)\n", n, gpus);
  rank_proc ps[COLLGEN_MAX_DEVICES];
  memset(ps, 0, sizeof ps);
  int started = 0;
  for (; started < n; ++started)
    if (start_rank(&ps[started], n, &id, started, started % gpus, run) != 0) break;
  if (started < n) { /* the started ranks would wait for the missing ones */
    fprintf(stderr, "collgen demo: fork of rank %d failed: %s\n", started, strerror(errno));
    for (int r = 0; r < started; ++r) kill(ps[r].pid, SIGKILL);
  }
  collect(ps, started);
  int failed = started < n;
  for (int r = 0; r < started; ++r) {
    fputs(ps[r].out ? ps[r].out : "", stdout);
    const int st = ps[r].status;
    if (WIFSIGNALED(st)) printf("  rank %d: killed by signal %d\n", r, WTERMSIG(st));
    else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) printf("  rank %d: checks failed\n", r);
    failed |= !WIFEXITED(st) || WEXITSTATUS(st) != 0;
    free(ps[r].out);
  }
  printf("collgen demo: %s\n", failed ? "FAILED" : "all checks passed");
  return failed;
}
