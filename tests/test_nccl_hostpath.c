/*
** test_nccl_hostpath.c -- the ops' NCCL path (docs/multinode.md) on the
** stand-in driver and the stand-in NCCL, in forked processes faking two
** hosts: exactly which NCCL calls each op makes (function, buffers, count,
** type, peer, stream), the local kernel that finishes the norm ops (a group
** of one reading what NCCL delivered), refusals before any NCCL call, the
** routing log line, abort, and the application-callback communicator.
** Nothing runs on a GPU: the GPU tests (test_gpu_nccl.c) check results.
*/
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collgen.h"
#include "comm_internal.h"
#include "devbuf.h"
#include "fake_nccl.h"
#include "rank_fork.h"
#include "reference.h"

static fake_nccl_stats_t *nc;

static void init(void) {
  rank_fork_setup();
  nc = fake_nccl_use(FAKE_NCCL_PATH);
  cr_assert(nc, "%s", dlerror());
  unsetenv("COLLGEN_TRANSPORT");
}

TestSuite(nccl_path, .init = init, .fini = rank_fork_teardown);

/* Rank `rank` of two, on "host-<rank>" (so every group of two is NCCL). */
static collgen_comm_t *two_hosts_rank(report_t *rep, const collgen_unique_id_t *id, int rank) {
  char host[16];
  snprintf(host, sizeof host, "host-%d", rank);
  setenv("COLLGEN_TEST_HOST_ID", host, 1);
  collgen_comm_options_t o;
  collgen_comm_options_init(&o);
  o.cache_dir = cache_dir;
  o.timeout_ms = 5000;
  o.staging_bytes = 2u << 20;
  collgen_comm_t *c = NULL;
  int rc = collgen_comm_init_rank(&c, 2, id, rank, rank, &o);
  CHILD_CHECK(rep, rank, 100, rc == COLLGEN_OK, "init_rank: %s", collgen_last_error());
  return c;
}

/* two_hosts_rank and a stream of this rank's in it (check 1). */
static collgen_comm_t *two_hosts_rank_stream(report_t *rep, const collgen_unique_id_t *id,
                                             int rank, collgen_stream_t *s) {
  collgen_comm_t *c = two_hosts_rank(rep, id, rank);
  CHILD_CHECK(rep, rank, 1, collgen__dev_stream_create(c, rank, s) == COLLGEN_OK, "stream");
  return c;
}

/* The end of a child of two_hosts_rank_stream: its stream, communicator
** and two buffers released, exit 0. */
static void two_hosts_done(collgen_comm_t *c, int rank, collgen_stream_t s, void *a, void *b) {
  collgen__dev_stream_destroy(c, rank, s);
  collgen_comm_destroy(c);
  free(a);
  free(b);
  _exit(0);
}

/* 1 if NCCL call i was fn with these buffers, count, type and peer. */
static int call_is(int i, const char *fn, const void *send, const void *recv, size_t count,
                   int dtype, int peer, collgen_stream_t s) {
  const fake_nccl_call_t *c = &nc->log[i];
  return i < nc->calls && strcmp(c->fn, fn) == 0 && c->send == send && c->recv == recv &&
         c->count == count && c->dtype == dtype && c->peer == peer && c->stream == (void *)s &&
         c->comm_nranks == (strstr(fn, "Group") ? -1 : 2);
}

static void reset(void) {
  memset(stats, 0, sizeof *stats);
  nc->calls = 0;
}

static void ops_child(report_t *rep, const collgen_unique_id_t *id, int rank, int nranks,
                      int pipe_w, int pipe_r) {
  (void)nranks;
  (void)pipe_w;
  (void)pipe_r;
  collgen_stream_t s;
  collgen_comm_t *c = two_hosts_rank_stream(rep, id, rank, &s);
  const size_t big = 1u << 20;
  char *in = aligned_alloc(256, big), *out = aligned_alloc(256, big);
  char *res = aligned_alloc(256, big), *nrm = aligned_alloc(256, big), *gam = aligned_alloc(256, 4096);
  /* allreduce_sum: one ncclAllReduce, no kernel */
  int64_t n = 5000;
  reset();
  int rc = collgen_rank_allreduce_sum(c, COLLGEN_DTYPE_BF16, 1, &n, in, out, 0, s);
  CHILD_CHECK(rep, rank, 2, rc == COLLGEN_OK && nc->calls == 1 &&
              call_is(0, "ncclAllReduce", in, out, 5000, 9, -1, s) && nc->log[0].op == 0 &&
              nc->log[0].comm_rank == rank && stats->launches == 0 && stats->copies == 0,
              "allreduce: %s; %ld NCCL calls (%s count %zu type %d), %ld launches",
              collgen_comm_last_error(c), nc->calls, nc->log[0].fn, nc->log[0].count,
              nc->log[0].dtype, stats->launches);
  reset();
  rc = collgen_rank_allreduce_sum(c, COLLGEN_DTYPE_F32, 1, &n, in + 4, in + 4, 0, s);
  CHILD_CHECK(rep, rank, 3, rc == COLLGEN_OK && call_is(0, "ncclAllReduce", in + 4, in + 4, 5000, 7, -1, s),
              "in-place f32 allreduce: %s", collgen_comm_last_error(c));
  /* groups of one stay local: a copy, no NCCL */
  reset();
  rc = collgen_rank_allreduce_sum(c, COLLGEN_DTYPE_F16, 1, &n, in, out, 1, s);
  CHILD_CHECK(rep, rank, 4, rc == COLLGEN_OK && nc->calls == 0 && stats->copies == 1,
              "group of one: %s, %ld NCCL calls", collgen_comm_last_error(c), nc->calls);
  /* allgather_rmsnorm, uneven shards (3 and 5 rows of 256 f16): send and
  ** receive in one NCCL group, a copy of the own shard, then the local
  ** kernel over all 8 gathered rows */
  int64_t s0[2] = {3, 256}, s1[2] = {5, 256};
  const int64_t *shards[2] = {s0, s1};
  const size_t mine = rank ? 5 * 256 : 3 * 256, theirs = rank ? 3 * 256 : 5 * 256;
  reset();
  rc = collgen_rank_allgather_rmsnorm(c, COLLGEN_DTYPE_F16, 2, shards, in, nrm, res, gam, 1e-5f,
                                      0.0f, 0, s);
  const fake_cuda_launch_t *l = &stats->log[0];
  CHILD_CHECK(rep, rank, 5, rc == COLLGEN_OK, "uneven allgather: %s", collgen_comm_last_error(c));
  CHILD_CHECK(rep, rank, 6, nc->calls == 4 && call_is(0, "ncclGroupStart", NULL, NULL, 0, -1, -1, NULL) &&
              call_is(1, "ncclSend", in, NULL, mine, 6, 1 - rank, s) &&
              call_is(2, "ncclRecv", NULL, res + (rank ? 0 : 3 * 256 * 2), theirs, 6, 1 - rank, s) &&
              call_is(3, "ncclGroupEnd", NULL, NULL, 0, -1, -1, NULL),
              "uneven allgather: %ld NCCL calls: %s %s %s", nc->calls, nc->log[0].fn,
              nc->log[1].fn, nc->log[2].fn);
  CHILD_CHECK(rep, rank, 7, stats->copies == 1 && stats->launches == 1 && l->params.in[0] == res &&
              l->params.residual == res && l->params.normed == nrm && l->params.gamma == gam &&
              l->params.count == 8 && l->params.rank == 0 && l->params.group_base == (unsigned)rank &&
              l->params.row_start[1] == 8,
              "uneven allgather: %ld copies, %ld launches, in %p count %llu", stats->copies,
              stats->launches, l->params.in[0], l->params.count);
  /* equal shards: one ncclAllGather */
  int64_t eq[2] = {4, 256};
  const int64_t *eqs[2] = {eq, eq};
  reset();
  rc = collgen_rank_allgather_rmsnorm(c, COLLGEN_DTYPE_BF16, 2, eqs, in, nrm, res, gam, 1e-5f,
                                      1.0f, 0, s);
  CHILD_CHECK(rep, rank, 8, rc == COLLGEN_OK && nc->calls == 1 &&
              call_is(0, "ncclAllGather", in, res, 4 * 256, 9, -1, s) && stats->launches == 1 &&
              stats->log[0].params.count == 8 && stats->log[0].params.in[0] == res,
              "equal allgather: %s, %ld calls", collgen_comm_last_error(c), nc->calls);
  /* the fused op: NCCL sums x into this rank's staging area, the local
  ** kernel adds the residual and normalizes from there */
  int64_t fs[2] = {8, 512};
  void *staging = (void *)(uintptr_t)c->staging[rank];
  reset();
  rc = collgen_rank_allreduce_residual_rmsnorm(c, COLLGEN_DTYPE_BF16, 2, fs, in, out, nrm, res,
                                               gam, 1e-6f, 0.0f, 0, s);
  l = &stats->log[0];
  CHILD_CHECK(rep, rank, 9, rc == COLLGEN_OK && nc->calls == 1 &&
              call_is(0, "ncclAllReduce", in, staging, 8 * 512, 9, -1, s) && stats->launches == 1 &&
              l->params.in[0] == staging && l->params.residual_in == out &&
              l->params.out[0] == res && l->params.normed == nrm && l->params.count == 8 &&
              l->params.rank == 0,
              "fused: %s, %ld calls, %ld launches", collgen_comm_last_error(c), nc->calls,
              stats->launches);
  /* broadcast: one ncclBroadcast with the root (the group rank); the
  ** non-root rank's input is not given; an i64 call moves NCCL int64 */
  reset();
  rc = collgen_rank_broadcast(c, COLLGEN_DTYPE_I64, 1, &n, rank == 1 ? in : NULL, out, 1, 0, s);
  CHILD_CHECK(rep, rank, 17, rc == COLLGEN_OK && nc->calls == 1 &&
              call_is(0, "ncclBroadcast", rank == 1 ? in : NULL, out, 5000, 4, 1, s) &&
              stats->launches == 0 && stats->copies == 0,
              "broadcast: %s; %ld NCCL calls (%s count %zu type %d root %d)",
              collgen_comm_last_error(c), nc->calls, nc->log[0].fn, nc->log[0].count,
              nc->log[0].dtype, nc->log[0].peer);
  reset();
  rc = collgen_rank_broadcast(c, COLLGEN_DTYPE_BF16, 1, &n, in, out, 2, 0, s);
  CHILD_CHECK(rep, rank, 18, rc == COLLGEN_ERR_INVALID_ARG && nc->calls == 0,
              "broadcast root 2 of 2: %s", collgen_status_name(rc));
  /* all_gather: NCCL is the whole op. Uneven i32 shards (3 and 5
  ** elements): send and receive in one group and a copy of the own shard
  ** (none in place); equal i16 shards: one ncclAllGather (i16 moves as
  ** f16 bits); no kernel either way */
  int64_t g0[1] = {3}, g1[1] = {5}, geq[1] = {4096};
  const int64_t *gshards[2] = {g0, g1}, *geqs[2] = {geq, geq};
  const size_t gmine = rank ? 5 : 3, gtheirs = rank ? 3 : 5, gown = rank ? 3 * 4 : 0;
  reset();
  rc = collgen_rank_all_gather(c, COLLGEN_DTYPE_I32, 1, gshards, in, out, 0, s);
  CHILD_CHECK(rep, rank, 20, rc == COLLGEN_OK && nc->calls == 4 &&
              call_is(1, "ncclSend", in, NULL, gmine, 2, 1 - rank, s) &&
              call_is(2, "ncclRecv", NULL, out + (rank ? 0 : 3 * 4), gtheirs, 2, 1 - rank, s) &&
              stats->copies == 1 && stats->launches == 0,
              "uneven all_gather: %s, %ld NCCL calls, %ld copies, %ld launches",
              collgen_comm_last_error(c), nc->calls, stats->copies, stats->launches);
  reset();
  rc = collgen_rank_all_gather(c, COLLGEN_DTYPE_I32, 1, gshards, out + gown, out, 0, s);
  CHILD_CHECK(rep, rank, 21, rc == COLLGEN_OK && nc->calls == 4 && stats->copies == 0,
              "in-place uneven all_gather: %s, %ld copies", collgen_comm_last_error(c),
              stats->copies);
  reset();
  rc = collgen_rank_all_gather(c, COLLGEN_DTYPE_I16, 1, geqs, in, out, 0, s);
  CHILD_CHECK(rep, rank, 22, rc == COLLGEN_OK && nc->calls == 1 &&
              call_is(0, "ncclAllGather", in, out, 4096, 6, -1, s) && stats->launches == 0 &&
              stats->copies == 0, "equal all_gather: %s, %ld calls", collgen_comm_last_error(c),
              nc->calls);
  /* reduce_scatter_rmsnorm: NCCL reduce-scatters x into this rank's
  ** staging (even chunks: ncclReduceScatter; 7 rows: one ncclReduce per
  ** chunk, rooted at its owner, in a group), the local kernel adds and
  ** normalizes this rank's chunk from there */
  reset();
  rc = collgen_rank_reduce_scatter_rmsnorm(c, COLLGEN_DTYPE_BF16, 2, fs, in, out, nrm, res, gam,
                                           1e-6f, 0.0f, 0, s);
  l = &stats->log[0];
  CHILD_CHECK(rep, rank, 20, rc == COLLGEN_OK && nc->calls == 1 &&
              call_is(0, "ncclReduceScatter", in, staging, 4 * 512, 9, -1, s) &&
              nc->log[0].op == 0 && stats->launches == 1 && l->params.in[0] == staging &&
              l->params.residual_in == out && l->params.out[0] == res &&
              l->params.normed == nrm && l->params.count == 4 && l->params.rank == 0,
              "reduce_scatter_rmsnorm: %s, %ld calls, %ld launches", collgen_comm_last_error(c),
              nc->calls, stats->launches);
  int64_t odd[2] = {7, 512};
  reset();
  rc = collgen_rank_reduce_scatter_rmsnorm(c, COLLGEN_DTYPE_BF16, 2, odd, in, NULL, nrm, res, gam,
                                           1e-6f, 0.0f, 0, s);
  l = &stats->log[0];
  CHILD_CHECK(rep, rank, 21, rc == COLLGEN_OK && nc->calls == 4 &&
              call_is(0, "ncclGroupStart", NULL, NULL, 0, -1, -1, NULL) &&
              call_is(1, "ncclReduce", in, staging, 4 * 512, 9, 0, s) &&
              call_is(2, "ncclReduce", in + 4 * 512 * 2, staging, 3 * 512, 9, 1, s) &&
              call_is(3, "ncclGroupEnd", NULL, NULL, 0, -1, -1, NULL) && stats->launches == 1 &&
              l->params.in[0] == staging && l->params.residual_in == NULL &&
              l->params.count == (rank ? 3u : 4u),
              "uneven reduce_scatter_rmsnorm: %s, %ld calls (%s), count %llu",
              collgen_comm_last_error(c), nc->calls, nc->log[1].fn, l->params.count);
  /* prepare loads the local kernel of an NCCL-routed group: the call then
  ** loads nothing */
  collgen_shape_t sh;
  collgen_shape_init(&sh, COLLGEN_OP_ALLREDUCE_RESIDUAL_RMSNORM);
  sh.dtype = COLLGEN_DTYPE_F16;
  sh.tensor_rank = 2;
  sh.rows = 16;
  sh.cols = 1024;
  sh.aligned16 = 1;
  sh.group_size = 0;
  reset();
  rc = collgen_comm_prepare(c, &sh, 1);
  const long loads = stats->module_loads;
  CHILD_CHECK(rep, rank, 15, rc == COLLGEN_OK && loads == 1 && nc->calls == 0,
              "prepare: %s, %ld module loads", collgen_comm_last_error(c), loads);
  int64_t ps[2] = {16, 1024};
  rc = collgen_rank_allreduce_residual_rmsnorm(c, COLLGEN_DTYPE_F16, 2, ps, in, out, nrm, res, gam,
                                               1e-6f, 0.0f, 0, s);
  CHILD_CHECK(rep, rank, 16, rc == COLLGEN_OK && stats->module_loads == loads && nc->calls == 1 &&
              stats->launches == 1, "after prepare: %s, %ld more module loads",
              collgen_comm_last_error(c), stats->module_loads - loads);
  /* refusals come before any NCCL call or launch: misaligned, overlapping */
  reset();
  rc = collgen_rank_allreduce_residual_rmsnorm(c, COLLGEN_DTYPE_BF16, 2, fs, in + 2, out, nrm,
                                               res, gam, 1e-6f, 0.0f, 0, s);
  CHILD_CHECK(rep, rank, 10, rc == COLLGEN_ERR_ALIGNMENT && nc->calls == 0 && stats->launches == 0,
              "misaligned x: %s", collgen_status_name(rc));
  rc = collgen_rank_allgather_rmsnorm(c, COLLGEN_DTYPE_BF16, 2, eqs, in, res, res, gam, 1e-5f,
                                      0.0f, 0, s);
  CHILD_CHECK(rep, rank, 11, rc == COLLGEN_ERR_INVALID_ARG && nc->calls == 0 && stats->launches == 0,
              "normed == residual: %s", collgen_status_name(rc));
  /* abort: NCCL's abort, and destroy then destroys nothing twice */
  CHILD_CHECK(rep, rank, 12, collgen_comm_abort(c) == COLLGEN_OK && nc->aborts == 1 && nc->live == 0,
              "abort: %ld aborts, %ld live", nc->aborts, nc->live);
  rc = collgen_rank_allreduce_sum(c, COLLGEN_DTYPE_BF16, 1, &n, in, out, 0, s);
  CHILD_CHECK(rep, rank, 13, rc == COLLGEN_ERR_ABORTED, "after abort: %s", collgen_status_name(rc));
  collgen__dev_stream_destroy(c, rank, s);
  const long live = stats->vmm_handles; /* (reset() zeroed the count) */
  collgen_comm_destroy(c);
  CHILD_CHECK(rep, rank, 14, nc->destroys == 0 && stats->vmm_handles == live - 2,
              "destroy after abort: %ld NCCL destroys, %ld of 2 VMM handles left", nc->destroys,
              stats->vmm_handles - live + 2);
  free(in);
  free(out);
  free(res);
  free(nrm);
  free(gam);
  _exit(0);
}

Test(nccl_path, every_op_makes_exactly_its_nccl_calls_and_local_kernel) { run_ranks(ops_child, 2); }

/* ---- The routing log line ------------------------------------------------ */

static void keep_route_line(int level, const char *msg, void *user) {
  if (level == COLLGEN_LOG_INFO && strstr(msg, "transport ")) snprintf(user, 256, "%s", msg);
}

static void log_child(report_t *rep, const collgen_unique_id_t *id, int rank, int nranks,
                      int pipe_w, int pipe_r) {
  (void)nranks;
  (void)pipe_w;
  (void)pipe_r;
  char line[256] = "";
  collgen_set_log_handler(keep_route_line, line);
  collgen_comm_t *c = two_hosts_rank(rep, id, rank);
  char want[160];
  snprintf(want, sizeof want, "rank %d: transport auto: group size 2, ranks 0..1: nccl (ranks 0 "
           "and 1 are on different hosts)", rank);
  CHILD_CHECK(rep, rank, 1, strcmp(line, want) == 0, "logged \"%.200s\"", line);
  collgen_comm_destroy(c);
  _exit(0);
}

Test(nccl_path, auto_logs_its_choice) { run_ranks(log_child, 2); }

/* ---- The application's all-gather ----------------------------------------- */

/* A stand-in for MPI_Allgather between two forked processes: shared
** memory and a generation barrier, at most 5 s per wait. */
typedef struct {
  atomic_int arrived, generation;
  unsigned char slot[2][4096];
} shm_gather;

static shm_gather *gather_area;

static int wait_all(shm_gather *g) {
  const int gen = atomic_load(&g->generation);
  if (atomic_fetch_add(&g->arrived, 1) == 1) {
    atomic_store(&g->arrived, 0);
    atomic_fetch_add(&g->generation, 1);
    return 0;
  }
  for (long spins = 0; atomic_load(&g->generation) == gen; ++spins) {
    if (spins > 5000000) return -1;
    usleep(1);
  }
  return 0;
}

static int shm_allgather(void *ctx, const void *mine, void *all, size_t bytes) {
  const int rank = *(const int *)ctx;
  if (bytes > sizeof gather_area->slot[0]) return -2;
  memcpy(gather_area->slot[rank], mine, bytes);
  if (wait_all(gather_area)) return -1;
  for (int r = 0; r < 2; ++r) memcpy((char *)all + (size_t)r * bytes, gather_area->slot[r], bytes);
  return wait_all(gather_area);
}

static int callback_hosts; /* 2: faked apart; 1: one host */

static void callback_child(report_t *rep, const collgen_unique_id_t *id, int rank, int nranks,
                           int pipe_w, int pipe_r) {
  (void)id;
  (void)pipe_w;
  (void)pipe_r;
  char host[16];
  snprintf(host, sizeof host, "host-%d", callback_hosts == 2 ? rank : 0);
  setenv("COLLGEN_TEST_HOST_ID", host, 1);
  collgen_comm_options_t o;
  collgen_comm_options_init(&o);
  o.cache_dir = cache_dir;
  o.staging_bytes = 2u << 20;
  collgen_comm_t *c = NULL;
  int me = rank;
  int rc = collgen_comm_init_rank_callback(&c, nranks, shm_allgather, &me, rank, rank, &o);
  CHILD_CHECK(rep, rank, 1, rc == COLLGEN_OK, "init: %s", collgen_last_error());
  collgen_comm_info_t info;
  collgen_comm_info(c, &info);
  const int apart = callback_hosts == 2;
  CHILD_CHECK(rep, rank, 2, info.nhosts == callback_hosts && info.p2p[0][1] == !apart &&
              info.route[1][0] == (apart ? COLLGEN_TRANSPORT_NCCL : COLLGEN_TRANSPORT_P2P),
              "hosts %d p2p %d route %d", info.nhosts, info.p2p[0][1], (int)info.route[1][0]);
  /* apart: only this rank's own two buffers; one host: the peer's too */
  CHILD_CHECK(rep, rank, 3, stats->vmm_handles == (apart ? 2 : 4) && nc->inits == apart,
              "%ld VMM handles, %ld NCCL inits", stats->vmm_handles, nc->inits);
  collgen_comm_destroy(c);
  _exit(0);
}

static void run_callback(int hosts) {
  gather_area = mmap(NULL, sizeof *gather_area, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                     -1, 0);
  cr_assert(gather_area != MAP_FAILED);
  memset(gather_area, 0, sizeof *gather_area);
  callback_hosts = hosts;
  run_ranks(callback_child, 2);
  munmap(gather_area, sizeof *gather_area);
}

Test(nccl_path, a_callback_communicator_across_hosts_maps_nothing_and_uses_nccl) {
  run_callback(2);
}

Test(nccl_path, a_callback_communicator_on_one_host_maps_through_its_socket) { run_callback(1); }

/* NCCL work that stays in progress. The communicators are non-blocking
** (config.blocking 0), so collgen polls NCCL, within the timeout, instead
** of blocking in it: work that completes after a few polls succeeds; work
** that never does (a peer that never joins or never calls) gives
** COLLGEN_ERR_TIMEOUT within the bound, and the NCCL communicator is
** aborted, not left hanging. */
static void pending_child(report_t *rep, const collgen_unique_id_t *id, int rank, int nranks,
                          int pipe_w, int pipe_r) {
  (void)nranks;
  (void)pipe_w;
  (void)pipe_r;
  setenv("FAKE_NCCL_PENDING", "3", 1);
  collgen_comm_t *c = two_hosts_rank(rep, id, rank);
  CHILD_CHECK(rep, rank, 1, nc->last_blocking == 0 && nc->polls >= 3 && nc->live == 1,
              "creation: blocking %d, %ld polls, %ld live", nc->last_blocking, nc->polls, nc->live);
  collgen_stream_t s;
  CHILD_CHECK(rep, rank, 2, collgen__dev_stream_create(c, rank, &s) == COLLGEN_OK, "stream");
  char *in = aligned_alloc(256, 65536), *out = aligned_alloc(256, 65536);
  int64_t n = 4096;
  const long polls = nc->polls;
  int rc = collgen_rank_allreduce_sum(c, COLLGEN_DTYPE_BF16, 1, &n, in, out, 0, s);
  CHILD_CHECK(rep, rank, 3, rc == COLLGEN_OK && nc->polls >= polls + 3,
              "a call in progress for 3 polls: %s (%ld polls)", collgen_comm_last_error(c),
              nc->polls - polls);
  setenv("FAKE_NCCL_PENDING", "-1", 1);
  c->timeout_ms = 300; /* the communicator's bound, shortened for the test */
  const double t0 = collgen__now_ms();
  rc = collgen_rank_allreduce_sum(c, COLLGEN_DTYPE_BF16, 1, &n, in, out, 0, s);
  const double ms = collgen__now_ms() - t0;
  CHILD_CHECK(rep, rank, 4, rc == COLLGEN_ERR_TIMEOUT && ms >= 300 && ms < 5000 &&
              strstr(collgen_comm_last_error(c), "ncclAllReduce: NCCL had not finished after 300 ms") &&
              nc->aborts == 1 && nc->live == 0,
              "a call that never completes: %s: %s after %.0f ms, %ld aborts, %ld live",
              collgen_status_name(rc), collgen_comm_last_error(c), ms, nc->aborts, nc->live);
  unsetenv("FAKE_NCCL_PENDING");
  rc = collgen_rank_allreduce_sum(c, COLLGEN_DTYPE_BF16, 1, &n, in, out, 0, s);
  CHILD_CHECK(rep, rank, 5, rc == COLLGEN_ERR_UNSUPPORTED &&
              strstr(collgen_comm_last_error(c), "aborted after a timeout"),
              "the next call: %s: %s", collgen_status_name(rc), collgen_comm_last_error(c));
  collgen__dev_stream_destroy(c, rank, s);
  collgen_comm_destroy(c);
  CHILD_CHECK(rep, rank, 6, nc->destroys == 0 && nc->live == 0, "destroy: %ld destroys",
              nc->destroys);
  free(in);
  free(out);
  _exit(0);
}

Test(nccl_path, work_in_progress_is_polled_and_bounded) { run_ranks(pending_child, 2); }

/* A creation that never completes on either rank: init_rank gives
** COLLGEN_ERR_TIMEOUT on both, aborts the half-made NCCL communicator and
** leaves nothing. */
static void stuck_init_child(report_t *rep, const collgen_unique_id_t *id, int rank, int nranks,
                             int pipe_w, int pipe_r) {
  (void)nranks;
  (void)pipe_w;
  (void)pipe_r;
  setenv("FAKE_NCCL_PENDING", "-1", 1);
  setenv("COLLGEN_TEST_HOST_ID", rank ? "host-1" : "host-0", 1);
  collgen_comm_options_t o;
  collgen_comm_options_init(&o);
  o.cache_dir = cache_dir;
  o.timeout_ms = 300;
  o.staging_bytes = 2u << 20;
  collgen_comm_t *c = (collgen_comm_t *)1;
  const double t0 = collgen__now_ms();
  int rc = collgen_comm_init_rank(&c, 2, id, rank, rank, &o);
  const double ms = collgen__now_ms() - t0;
  CHILD_CHECK(rep, rank, 1, rc == COLLGEN_ERR_TIMEOUT && !c && ms < 5000 &&
              strstr(collgen_last_error(), "ncclCommInitRankConfig (ranks 0..1): NCCL had not "
                                           "finished after 300 ms") &&
              nc->aborts == 1 && nc->live == 0,
              "%s: %s after %.0f ms; %ld aborts, %ld live", collgen_status_name(rc),
              collgen_last_error(), ms, nc->aborts, nc->live);
  _exit(0);
}

Test(nccl_path, a_creation_that_never_completes_times_out_and_leaves_nothing) {
  run_ranks(stuck_init_child, 2);
}

/* Waits (at most 5 s) until NCCL has released `want` communicators on
** another thread than the one that made them; returns the count seen. */
static long wait_released_elsewhere(long want) {
  for (int i = 0; i < 500 && nc->released_elsewhere < want; ++i) usleep(10000);
  return nc->released_elsewhere;
}

/* NCCL's destroy and abort wait until every CUDA graph that captured work
** of the communicator is destroyed. A communicator destroyed (or aborted)
** while such a graph is alive hands the NCCL communicator to a thread of
** its own and returns at once; the graph's destruction then drops
** collgen's count (the user object the capture attached). With no graph
** alive the release stays on the caller's thread. */
static collgen_unique_id_t round_ids[3]; /* made before the fork: one per communicator */

static void graph_child(report_t *rep, const collgen_unique_id_t *id, int rank, int nranks,
                        int pipe_w, int pipe_r) {
  (void)id;
  (void)nranks;
  (void)pipe_w;
  (void)pipe_r;
  char *in = aligned_alloc(256, 1 << 16), *out = aligned_alloc(256, 1 << 16);
  int64_t n = 1000;
  for (int round = 0; round < 3; ++round) { /* destroy with a graph, abort with one, none */
    collgen_comm_t *c = two_hosts_rank(rep, &round_ids[round], rank);
    collgen_stream_t s;
    CHILD_CHECK(rep, rank, 1, collgen__dev_stream_create(c, rank, &s) == COLLGEN_OK, "stream");
    CUgraph graph = NULL;
    if (round < 2) {
      CHILD_CHECK(rep, rank, 2, collgen__cu.cuStreamBeginCapture((CUstream)s,
                  CU_STREAM_CAPTURE_MODE_GLOBAL) == CUDA_SUCCESS, "begin capture");
    }
    int rc = collgen_rank_allreduce_sum(c, COLLGEN_DTYPE_BF16, 1, &n, in, out, 0, s);
    CHILD_CHECK(rep, rank, 3, rc == COLLGEN_OK, "call: %s", collgen_comm_last_error(c));
    if (round < 2) {
      CHILD_CHECK(rep, rank, 4, collgen__cu.cuStreamEndCapture((CUstream)s, &graph) == CUDA_SUCCESS &&
                  stats->user_objects == 1, "end capture: %ld user objects", stats->user_objects);
    }
    const long before = nc->released_elsewhere, destroys = nc->destroys, aborts = nc->aborts;
    if (round == 1) collgen_comm_abort(c);
    collgen__dev_stream_destroy(c, rank, s);
    collgen_comm_destroy(c);
    if (round < 2) {
      CHILD_CHECK(rep, rank, 5, wait_released_elsewhere(before + 1) == before + 1 &&
                  (round == 0 ? nc->destroys == destroys + 1 : nc->aborts == aborts + 1),
                  "round %d: released elsewhere %ld (want %ld), destroys %ld, aborts %ld", round,
                  nc->released_elsewhere, before + 1, nc->destroys, nc->aborts);
      CHILD_CHECK(rep, rank, 6, collgen__cu.cuGraphDestroy(graph) == CUDA_SUCCESS &&
                  stats->user_objects == 0, "graph destroy: %ld user objects", stats->user_objects);
    } else {
      CHILD_CHECK(rep, rank, 7, nc->released_elsewhere == before && nc->destroys == destroys + 1,
                  "no graph: released elsewhere %ld (want %ld), destroys %ld",
                  nc->released_elsewhere, before, nc->destroys);
    }
  }
  free(in);
  free(out);
  _exit(0);
}

Test(nccl_path, destroy_and_abort_never_wait_for_a_live_graph) {
  for (int i = 0; i < 3; ++i) cr_assert_eq(collgen_get_unique_id(&round_ids[i]), COLLGEN_OK);
  run_ranks(graph_child, 2);
}

/* reduce_scatter_sum on NCCL: equal chunks are one ncclReduceScatter;
** uneven ones one ncclReduce per non-empty chunk, rooted at its rank, in
** one NCCL group (the root alone passes its output); no kernel; a group
** of one copies. */
static void reduce_scatter_child(report_t *rep, const collgen_unique_id_t *id, int rank,
                                 int nranks, int pipe_w, int pipe_r) {
  (void)nranks;
  (void)pipe_w;
  (void)pipe_r;
  collgen_stream_t s;
  collgen_comm_t *c = two_hosts_rank_stream(rep, id, rank, &s);
  char *in = aligned_alloc(256, 1u << 16), *out = aligned_alloc(256, 1u << 16);
  int64_t even[2] = {6, 100};
  reset();
  int rc = collgen_rank_reduce_scatter_sum(c, COLLGEN_DTYPE_BF16, 2, even, in, out, 0, s);
  CHILD_CHECK(rep, rank, 2, rc == COLLGEN_OK && nc->calls == 1 &&
              call_is(0, "ncclReduceScatter", in, out, 300, 9, -1, s) && nc->log[0].op == 0 &&
              stats->launches == 0 && stats->copies == 0,
              "equal chunks: %s; %ld NCCL calls (%s count %zu)", collgen_comm_last_error(c),
              nc->calls, nc->log[0].fn, nc->log[0].count);
  int64_t uneven[2] = {5, 100}; /* chunks of 3 and 2 rows */
  reset();
  rc = collgen_rank_reduce_scatter_sum(c, COLLGEN_DTYPE_F32, 2, uneven, in, out, 0, s);
  CHILD_CHECK(rep, rank, 3, rc == COLLGEN_OK && nc->calls == 4 &&
              call_is(0, "ncclGroupStart", NULL, NULL, 0, -1, -1, NULL) &&
              call_is(1, "ncclReduce", in, rank == 0 ? out : NULL, 300, 7, 0, s) &&
              call_is(2, "ncclReduce", in + 300 * 4, rank == 1 ? out : NULL, 200, 7, 1, s) &&
              call_is(3, "ncclGroupEnd", NULL, NULL, 0, -1, -1, NULL) && nc->log[1].op == 0 &&
              stats->launches == 0,
              "uneven chunks: %s; %ld NCCL calls: %s %s", collgen_comm_last_error(c), nc->calls,
              nc->log[1].fn, nc->log[2].fn);
  int64_t one[2] = {1, 100}; /* rank 1's chunk is empty: no call for it */
  reset();
  rc = collgen_rank_reduce_scatter_sum(c, COLLGEN_DTYPE_F16, 2, one, in, out, 0, s);
  CHILD_CHECK(rep, rank, 4, rc == COLLGEN_OK && nc->calls == 3 &&
              call_is(1, "ncclReduce", in, rank == 0 ? out : NULL, 100, 6, 0, s),
              "one row: %s; %ld NCCL calls", collgen_comm_last_error(c), nc->calls);
  reset();
  rc = collgen_rank_reduce_scatter_sum(c, COLLGEN_DTYPE_F16, 2, uneven, in, out, 1, s);
  CHILD_CHECK(rep, rank, 5, rc == COLLGEN_OK && nc->calls == 0 && stats->copies == 1,
              "group of one: %s, %ld NCCL calls", collgen_comm_last_error(c), nc->calls);
  reset();
  rc = collgen_rank_reduce_scatter_sum(c, COLLGEN_DTYPE_I32, 2, uneven, in, out, 0, s);
  CHILD_CHECK(rep, rank, 6, rc == COLLGEN_ERR_INVALID_ARG && nc->calls == 0,
              "i32: %s", collgen_status_name(rc));
  two_hosts_done(c, rank, s, in, out);
}

Test(nccl_path, reduce_scatter_sum_reduce_scatters_or_reduces_per_chunk) {
  run_ranks(reduce_scatter_child, 2);
}

/* One scatter on NCCL between the two hosts: the root (a group rank) sends
** every peer with a chunk its rows in one NCCL group and copies its own
** chunk into its output (nothing in place); the other rank receives its
** chunk; an empty chunk makes no send or receive, and its rank may pass no
** output; no kernel. `chunks` are the rows of ranks 0 and 1 (their
** collgen_scatter_chunk), `row` the elements of a row. */
static void scatter_on_nccl(report_t *rep, collgen_comm_t *c, int rank, int step,
                            collgen_dtype_t dt, int nccl_dt, int64_t row, const int64_t chunks[2],
                            int root, const char *in, char *out, collgen_stream_t s) {
  const int64_t shape[2] = {chunks[0] + chunks[1], row};
  const size_t esize = (size_t)collgen__dtype_bytes(dt);
  const size_t peer_elems = (size_t)(chunks[1 - root] * row);
  const size_t own = (size_t)(chunks[rank] * row), at = rank ? (size_t)(chunks[0] * row) : 0;
  const int copies = rank == root && own && out != in + at * esize;
  reset();
  int rc = collgen_rank_scatter(c, dt, 2, shape, rank == root ? in : NULL, out, root, 0, s);
  /* the root's send of the peer's chunk, or this rank's receive of its own */
  const int sends = rank == root && peer_elems, recvs = rank != root && own;
  const size_t peer_at = root == 0 ? (size_t)(chunks[0] * row) : 0; /* the peer's chunk */
  const int exchanged = sends   ? call_is(1, "ncclSend", in + peer_at * esize, NULL, peer_elems,
                                          nccl_dt, 1 - root, s)
                        : recvs ? call_is(1, "ncclRecv", NULL, out, own, nccl_dt, root, s)
                                : 1;
  CHILD_CHECK(rep, rank, step, rc == COLLGEN_OK &&
              nc->calls == 2 + sends + recvs &&
              call_is(0, "ncclGroupStart", NULL, NULL, 0, -1, -1, NULL) && exchanged &&
              call_is(1 + sends + recvs, "ncclGroupEnd", NULL, NULL, 0, -1, -1, NULL) &&
              stats->launches == 0 && stats->copies == copies,
              "scatter of %lld + %lld rows from %d: %s; %ld NCCL calls (%s count %zu peer %d), "
              "%ld copies", (long long)chunks[0], (long long)chunks[1], root,
              collgen_comm_last_error(c), nc->calls, nc->log[1].fn, nc->log[1].count,
              nc->log[1].peer, stats->copies);
  CHILD_CHECK(rep, rank, step, !copies || memcmp(out, in + at * esize, own * esize) == 0,
              "the root's own chunk was not copied from its offset %zu", at * esize);
}

static void scatter_child(report_t *rep, const collgen_unique_id_t *id, int rank, int pipe_w,
                          int pipe_r) {
  (void)pipe_w, (void)pipe_r;
  collgen_stream_t s;
  collgen_comm_t *c = two_hosts_rank_stream(rep, id, rank, &s);
  char *in = aligned_alloc(256, 1u << 16), *out = aligned_alloc(256, 1u << 16);
  uint64_t seed = tu_rand() | 1;
  collgen__ref_fill_random(COLLGEN_DTYPE_U8, in, 1 << 16, &seed);
  static const int64_t uneven[2] = {4, 3}, even[2] = {3, 3}, first[2] = {1, 0};
  scatter_on_nccl(rep, c, rank, 2, COLLGEN_DTYPE_BF16, 9, 100, uneven, 1, in, out, s);
  scatter_on_nccl(rep, c, rank, 3, COLLGEN_DTYPE_BF16, 9, 100, uneven, 0, in, out, s);
  scatter_on_nccl(rep, c, rank, 4, COLLGEN_DTYPE_F32, 7, 100, even, 0, in, out, s);
  scatter_on_nccl(rep, c, rank, 5, COLLGEN_DTYPE_I64, 4, 100, even, 1, in, out, s);
  /* in place at the root's chunk: no copy (rank 1's chunk of [7, 100] bf16 is 800 bytes in) */
  scatter_on_nccl(rep, c, rank, 6, COLLGEN_DTYPE_BF16, 9, 100, uneven, 1, in,
                  rank == 1 ? in + 800 : out, s);
  scatter_on_nccl(rep, c, rank, 7, COLLGEN_DTYPE_F32, 7, 100, even, 0, in, rank == 0 ? in : out, s);
  /* one row: rank 1's chunk is empty, it passes no output; from root 0 no
  ** send, from root 1 (itself empty) no copy; i16 moves as NCCL f16 bits */
  scatter_on_nccl(rep, c, rank, 8, COLLGEN_DTYPE_I64, 4, 100, first, 0, in, rank ? NULL : out, s);
  scatter_on_nccl(rep, c, rank, 9, COLLGEN_DTYPE_I16, 6, 100, first, 1, in, rank ? NULL : out, s);
  /* a group of one stays local: a copy, no NCCL; a bad root calls nothing */
  int64_t shape[2] = {7, 100};
  reset();
  int rc = collgen_rank_scatter(c, COLLGEN_DTYPE_BF16, 2, shape, in, out, 0, 1, s);
  CHILD_CHECK(rep, rank, 10, rc == COLLGEN_OK && nc->calls == 0 && stats->copies == 1 &&
              memcmp(out, in, 7 * 100 * 2) == 0,
              "group of one: %s, %ld NCCL calls", collgen_comm_last_error(c), nc->calls);
  reset();
  rc = collgen_rank_scatter(c, COLLGEN_DTYPE_BF16, 2, shape, in, out, 2, 0, s);
  CHILD_CHECK(rep, rank, 11, rc == COLLGEN_ERR_INVALID_ARG && nc->calls == 0 &&
              strstr(collgen_comm_last_error(c), "root 2 is not a group rank (0..1)"),
              "root 2 of 2: %s", collgen_comm_last_error(c));
  rc = collgen_rank_scatter(c, COLLGEN_DTYPE_BF16, 2, shape, in, in + 2, 0, 0, s);
  CHILD_CHECK(rep, rank, 12, rank != 0 || (rc == COLLGEN_ERR_INVALID_ARG && nc->calls == 0 &&
                                           strstr(collgen_comm_last_error(c), "in-place")),
              "the root's output off its chunk: %s", collgen_comm_last_error(c));
  two_hosts_done(c, rank, s, in, out);
}

Test(nccl_path, scatter_sends_each_chunk_from_the_root) { run_two(scatter_child); }
