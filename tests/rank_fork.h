/*
** rank_fork.h -- the harness of the one-process-per-GPU host-path tests
** (test_rank_hostpath.c, test_rank_register.c, test_route_hostpath.c,
** test_nccl_hostpath.c; test_pdl.c uses only its fixture): the stand-in driver, a fresh cache folder per
** test, ranks in forked processes that report failures through shared
** memory, and run_ranks / run_two (N or two ranks, one fresh id).
** Included by one test source each (static helpers; the inline ones may go
** unused).
*/
#ifndef COLLGEN_RANK_FORK_H
#define COLLGEN_RANK_FORK_H
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "collgen.h"
#include "fake_cuda.h"
#include "test_util.h"

static char cache_dir[256];
static fake_cuda_stats_t *stats;

static void rank_fork_setup(void) {
  tu_make_temp_dir(cache_dir, sizeof cache_dir);
  stats = fake_cuda_use(FAKE_CUDA_PATH);
  cr_assert(stats, "%s", dlerror());
}

static void rank_fork_teardown(void) { tu_remove_tree(cache_dir); }

/* What a child reports back (shared memory, one slot per rank). */
typedef struct {
  int rc[8];          /* 0 = every check passed, else the failed step */
  char why[8][256];
} report_t;

static report_t *report_new(void) {
  report_t *r = mmap(NULL, sizeof *r, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  cr_assert(r != MAP_FAILED);
  memset(r, 0, sizeof *r);
  return r;
}

#define CHILD_CHECK(rep, rank, step, cond, ...)                                 \
  do {                                                                          \
    if (!(cond)) {                                                              \
      (rep)->rc[rank] = (step);                                                 \
      snprintf((rep)->why[rank], sizeof (rep)->why[rank], __VA_ARGS__);          \
      _exit(1);                                                                 \
    }                                                                           \
  } while (0)

/* The bound of the children's communicators (tests that wait for a
** missing rank lower it before they fork). */
static int child_timeout_ms = 5000;

static inline collgen_comm_t *child_comm(report_t *rep, const collgen_unique_id_t *id, int nranks,
                                  int rank) {
  collgen_comm_options_t o;
  collgen_comm_options_init(&o);
  o.cache_dir = cache_dir;
  o.timeout_ms = child_timeout_ms;
  o.staging_bytes = 8u << 20;
  collgen_comm_t *c = NULL;
  int rc = collgen_comm_init_rank(&c, nranks, id, rank, rank % 2, &o);
  CHILD_CHECK(rep, rank, 1, rc == COLLGEN_OK, "init_rank: %s: %s", collgen_status_name(rc),
              collgen_last_error());
  return c;
}

static void wait_children(pid_t *pids, int n, report_t *rep) {
  for (int i = 0; i < n; ++i) {
    int status = 0;
    cr_assert_eq(waitpid(pids[i], &status, 0), pids[i]);
    cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0, "rank %d: step %d: %s", i,
              rep->rc[i], rep->why[i]);
  }
}

/* Runs child(rep, id, rank, nranks, pipe write end, pipe read end) in
** `nranks` (1..8) forked processes with a fresh id and one shared pipe, and
** waits for every one to pass. */
typedef void (*child_n_fn)(report_t *rep, const collgen_unique_id_t *id, int rank, int nranks,
                           int pipe_w, int pipe_r);

static inline void run_ranks(child_n_fn child, int nranks) {
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

/* run_ranks with two ranks, for children that take no rank count. */
typedef void (*child_fn)(report_t *rep, const collgen_unique_id_t *id, int rank, int pipe_w,
                         int pipe_r);

static child_fn two_child;

static inline void two_adapter(report_t *rep, const collgen_unique_id_t *id, int rank, int nranks,
                               int pipe_w, int pipe_r) {
  (void)nranks;
  two_child(rep, id, rank, pipe_w, pipe_r);
}

static inline void run_two(child_fn child) {
  two_child = child;
  run_ranks(two_adapter, 2);
}

#endif
