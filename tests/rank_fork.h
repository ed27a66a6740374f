/*
** rank_fork.h -- forked ranks for the host-path tests of the one-process-
** per-GPU communicator (test_rank_hostpath.c, test_route_hostpath.c): each
** rank is a child process that reports its first failed check through
** shared memory; the parent waits for every child and expects all to pass.
** Criterion macros are used in the parent only.
*/
#ifndef RANK_FORK_H
#define RANK_FORK_H
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "collgen.h"

/* What the children report back (shared memory, one slot per rank). */
typedef struct {
  int rc[8];          /* 0 = every check passed, else the failed step */
  char why[8][512];
} report_t;

static inline report_t *report_new(void) {
  report_t *r = mmap(NULL, sizeof *r, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  cr_assert(r != MAP_FAILED);
  memset(r, 0, sizeof *r);
  return r;
}

/* In a child: on a failed `cond`, records the step and message and exits. */
#define CHILD_CHECK(rep, rank, step, cond, ...)                                 \
  do {                                                                          \
    if (!(cond)) {                                                              \
      (rep)->rc[rank] = (step);                                                 \
      snprintf((rep)->why[rank], sizeof (rep)->why[rank], __VA_ARGS__);          \
      _exit(1);                                                                 \
    }                                                                           \
  } while (0)

static inline void wait_children(pid_t *pids, int n, report_t *rep) {
  for (int i = 0; i < n; ++i) {
    int status = 0;
    cr_assert_eq(waitpid(pids[i], &status, 0), pids[i]);
    cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0, "rank %d: step %d: %s", i,
              rep->rc[i], rep->why[i]);
  }
}

/* child(rep, id, rank, nranks, pipe write end, pipe read end), run by each
** forked rank; it ends with _exit. */
typedef void (*child_fn)(report_t *rep, const collgen_unique_id_t *id, int rank, int nranks,
                         int pipe_w, int pipe_r);

/* Runs `child` in `nranks` forked processes with a fresh id and one shared
** pipe, and waits for every one to pass. */
static inline void run_ranks(child_fn child, int nranks) {
  collgen_unique_id_t id;
  cr_assert_eq(collgen_get_unique_id(&id), COLLGEN_OK);
  report_t *rep = report_new();
  int fds[2];
  cr_assert_eq(pipe(fds), 0);
  pid_t pids[8];
  for (int r = 0; r < nranks; ++r) {
    pids[r] = fork();
    if (pids[r] == 0) child(rep, &id, r, nranks, fds[1], fds[0]);
  }
  wait_children(pids, nranks, rep);
  close(fds[0]);
  close(fds[1]);
  munmap(rep, sizeof *rep);
}
#endif
