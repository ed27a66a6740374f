/*
** test_rank_hostpath.c -- the one-process-per-GPU communicator's host path
** on the stand-in driver (fake_cuda.c), in forked processes: creation over
** the bootstrap, the exchange of VMM signal buffers and staging areas
** (memfds, so the processes really share them), per-rank calls (which
** kernel is launched, what is staged where), mode mismatches, an abort that
** reaches the other process's buffer, two communicators in the same
** processes, and destroy releasing every handle.
** Kernels do not run here; the GPU tests check results.
*/
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "collgen.h"
#include "comm_internal.h" /* white-box: the communicator's fields */
#include "devbuf.h"
#include "rank_fork.h"
#include "reference.h"

TestSuite(rank_hostpath, .init = rank_fork_setup, .fini = rank_fork_teardown);

/* child_comm of two ranks and a stream of this rank's in it (check 2). */
static collgen_comm_t *child_comm_stream(report_t *rep, const collgen_unique_id_t *id, int rank,
                                         collgen_stream_t *s) {
  collgen_comm_t *c = child_comm(rep, id, 2, rank);
  CHILD_CHECK(rep, rank, 2, collgen__dev_stream_create(c, rank, s) == COLLGEN_OK, "stream");
  return c;
}

/* Two processes: both create their rank, every rank's signal buffer is
** mapped in both (a byte written by one is read by the other), an LL-sized
** call stages nothing and a larger call stages its input (the bytes land in
** the staging area the other process reads); the one-process calls are
** refused on this communicator and vice versa; destroy releases every VMM
** handle. */
static void two_ranks_child(report_t *rep, const collgen_unique_id_t *id, int rank, int pipe_w,
                            int pipe_r) {
  (void)pipe_w;
  (void)pipe_r;
  collgen_comm_t *c = child_comm(rep, id, 2, rank);
  collgen_comm_info_t info;
  CHILD_CHECK(rep, rank, 2, collgen_comm_info(c, &info) == COLLGEN_OK && info.ndev == 2 &&
              info.p2p[0][1] && info.p2p[1][0], "info: ndev %d p2p %d %d", info.ndev,
              info.p2p[0][1], info.p2p[1][0]);
  /* the signal buffers are shared: rank 0 writes into rank 1's, rank 1 reads */
  volatile unsigned char *sig1 = (volatile unsigned char *)(uintptr_t)c->signal[1];
  CHILD_CHECK(rep, rank, 3, sig1 != NULL && c->staging[0] && c->staging[1], "buffers not mapped");
  collgen_stream_t s;
  CHILD_CHECK(rep, rank, 4, collgen__dev_stream_create(c, rank, &s) == COLLGEN_OK, "stream");
  const size_t small = 4096 * 2, large = (1u << 20) * 2;
  unsigned char *in = aligned_alloc(256, large), *out = aligned_alloc(256, large);
  for (size_t i = 0; i < large; ++i) in[i] = (unsigned char)(i * 7 + 13 * rank);
  int64_t n_small = 4096, n_large = 1 << 20;
  memset(stats, 0, sizeof *stats);
  int rc = collgen_rank_allreduce_sum(c, COLLGEN_DTYPE_BF16, 1, &n_small, in, out, 0, s);
  CHILD_CHECK(rep, rank, 5, rc == COLLGEN_OK, "small call: %s", collgen_comm_last_error(c));
  CHILD_CHECK(rep, rank, 6, stats->launches == 1 && stats->copies == 0 &&
              strstr(stats->log[0].kernel, "_ll"), "small call: %ld launches, %ld copies, %s",
              stats->launches, stats->copies, stats->log[0].kernel);
  (void)small;
  rc = collgen_rank_allreduce_sum(c, COLLGEN_DTYPE_BF16, 1, &n_large, in, out, 0, s);
  CHILD_CHECK(rep, rank, 7, rc == COLLGEN_OK, "large call: %s", collgen_comm_last_error(c));
  CHILD_CHECK(rep, rank, 8, stats->launches == 2 && stats->copies >= 1,
              "large call: %ld launches, %ld copies", stats->launches, stats->copies);
  CHILD_CHECK(rep, rank, 9,
              memcmp((const void *)(uintptr_t)c->staging[rank], in, large) == 0,
              "the input was not staged into this rank's staging area");
  /* the norm ops: a barrier-sized fused call stages x; a misaligned buffer
  ** is refused before anything is launched */
  int64_t fused_shape[2] = {256, 4096};
  long launches = stats->launches, copies = stats->copies;
  rc = collgen_rank_allreduce_residual_rmsnorm(c, COLLGEN_DTYPE_BF16, 2, fused_shape, in,
                                               out + 2048 * 0, out, in, in, 1e-6f, 0.0f, 0, s);
  CHILD_CHECK(rep, rank, 20, rc == COLLGEN_ERR_INVALID_ARG, "overlapping fused buffers: %s",
              collgen_status_name(rc));
  unsigned char *res = aligned_alloc(256, large), *nrm = aligned_alloc(256, large);
  rc = collgen_rank_allreduce_residual_rmsnorm(c, COLLGEN_DTYPE_BF16, 2, fused_shape, in, res, nrm,
                                               res, out, 1e-6f, 0.0f, 0, s);
  CHILD_CHECK(rep, rank, 21, rc == COLLGEN_OK && stats->launches == launches + 1 &&
              stats->copies > copies, "fused call: %s, %ld launches, %ld copies",
              collgen_comm_last_error(c), stats->launches - launches, stats->copies - copies);
  launches = stats->launches;
  rc = collgen_rank_allreduce_residual_rmsnorm(c, COLLGEN_DTYPE_BF16, 2, fused_shape, in + 2, res,
                                               nrm, res, out, 1e-6f, 0.0f, 0, s);
  CHILD_CHECK(rep, rank, 22, rc == COLLGEN_ERR_ALIGNMENT && stats->launches == launches,
              "misaligned x: %s", collgen_status_name(rc));
  int64_t shard[2] = {4, 4096};
  const int64_t *shards[2] = {shard, shard};
  rc = collgen_rank_allgather_rmsnorm(c, COLLGEN_DTYPE_BF16, 2, shards, in, nrm, res, out, 1e-6f,
                                      0.0f, 0, s);
  CHILD_CHECK(rep, rank, 23, rc == COLLGEN_OK && stats->launches == launches + 1,
              "allgather_rmsnorm: %s", collgen_comm_last_error(c));
  /* reduce_scatter_rmsnorm stages x (peers pull their chunks of it) into
  ** region IN; rank r's kernel reads every rank's staged x from the first
  ** row of r's chunk (33 rows: 17 and 16). An x over half the staging area
  ** is refused, naming staging_bytes. */
  int64_t rs_shape[2] = {33, 4096}, rs_big[2] = {1024, 4096};
  launches = stats->launches;
  copies = stats->copies;
  rc = collgen_rank_reduce_scatter_rmsnorm(c, COLLGEN_DTYPE_BF16, 2, rs_shape, in, NULL, nrm, res,
                                           out, 1e-6f, 0.0f, 0, s);
  const collgen__kparams *kp = &stats->log[launches].params;
  const size_t rs_start = rank ? 17 * 4096 * 2 : 0;
  CHILD_CHECK(rep, rank, 29, rc == COLLGEN_OK && stats->launches == launches + 1 &&
              stats->copies > copies && kp->count == (rank ? 16u : 17u) &&
              kp->in[0] == (const char *)(uintptr_t)c->staging[0] + rs_start &&
              kp->in[1] == (const char *)(uintptr_t)c->staging[1] + rs_start &&
              kp->residual_in == NULL &&
              memcmp((const void *)(uintptr_t)c->staging[rank], in, 33 * 4096 * 2) == 0,
              "reduce_scatter_rmsnorm: %s, %ld launches, %ld copies, count %llu",
              collgen_comm_last_error(c), stats->launches - launches, stats->copies - copies,
              kp->count);
  launches = stats->launches;
  /* buffers of the whole extent the call names, so that only the staging
  ** limit can refuse it (smaller ones may overlap where malloc puts them) */
  const size_t big_x = (size_t)(rs_big[0] * rs_big[1]) * 2, big_out = big_x / 2;
  unsigned char *x_big = aligned_alloc(256, big_x), *nrm_big = aligned_alloc(256, big_out),
                *res_big = aligned_alloc(256, big_out);
  rc = collgen_rank_reduce_scatter_rmsnorm(c, COLLGEN_DTYPE_BF16, 2, rs_big, x_big, NULL, nrm_big,
                                           res_big, out, 1e-6f, 0.0f, 0, s);
  CHILD_CHECK(rep, rank, 30, rc == COLLGEN_ERR_INVALID_ARG && stats->launches == launches &&
              strstr(collgen_comm_last_error(c), "staging_bytes"),
              "x over half the staging area: %s", collgen_comm_last_error(c));
  free(x_big);
  free(nrm_big);
  free(res_big);
  /* every op computes on elements: a copy-only dtype is refused before
  ** anything is launched or copied, a group of one's copy included */
  launches = stats->launches;
  copies = stats->copies;
  rc = collgen_rank_allreduce_sum(c, COLLGEN_DTYPE_I32, 1, &n_small, in, out, 0, s);
  CHILD_CHECK(rep, rank, 24, rc == COLLGEN_ERR_INVALID_ARG &&
              strstr(collgen_comm_last_error(c), "allreduce_sum computes on elements: i32 is a "
                                                 "copy-only dtype"), "i32 allreduce: %s",
              collgen_comm_last_error(c));
  rc = collgen_rank_allreduce_sum(c, COLLGEN_DTYPE_U8, 1, &n_small, in, out, 1, s);
  CHILD_CHECK(rep, rank, 25, rc == COLLGEN_ERR_INVALID_ARG &&
              strstr(collgen_comm_last_error(c), "u8 is a copy-only dtype"),
              "u8 allreduce, groups of one: %s", collgen_comm_last_error(c));
  rc = collgen_rank_allgather_rmsnorm(c, COLLGEN_DTYPE_I8, 2, shards, in, nrm, res, out, 1e-6f,
                                      0.0f, 0, s);
  CHILD_CHECK(rep, rank, 26, rc == COLLGEN_ERR_INVALID_ARG &&
              strstr(collgen_comm_last_error(c), "allgather_rmsnorm computes on elements: i8"),
              "i8 allgather_rmsnorm: %s", collgen_comm_last_error(c));
  rc = collgen_rank_allreduce_residual_rmsnorm(c, COLLGEN_DTYPE_I64, 2, fused_shape, in, res, nrm,
                                               res, out, 1e-6f, 0.0f, 0, s);
  CHILD_CHECK(rep, rank, 27, rc == COLLGEN_ERR_INVALID_ARG &&
              strstr(collgen_comm_last_error(c), "allreduce_residual_rmsnorm computes on "
                                                 "elements: i64"),
              "i64 residual: %s", collgen_comm_last_error(c));
  CHILD_CHECK(rep, rank, 28, stats->launches == launches && stats->copies == copies,
              "copy-only refusals launched %ld, copied %ld", stats->launches - launches,
              stats->copies - copies);
  /* broadcast (root 0; rank 1 gives no input): the root stages its input
  ** (one copy into its region IN), every rank's kernel reads it there; a
  ** call larger than half the staging area runs as two pieces */
  memset(stats, 0, sizeof *stats);
  rc = collgen_rank_broadcast(c, COLLGEN_DTYPE_I32, 1, &n_small, rank == 0 ? in : NULL, out, 0,
                              0, s);
  const collgen__kparams *bp = &stats->log[0].params;
  CHILD_CHECK(rep, rank, 31, rc == COLLGEN_OK && stats->launches == 1 &&
              stats->copies == (rank == 0 ? 1 : 0) &&
              strcmp(stats->log[0].kernel, "collgen_broadcast_b4_g2_v4") == 0 &&
              bp->in[0] == (const void *)(uintptr_t)c->staging[0] && bp->root == 0 &&
              bp->out[rank] == out && bp->count == 4096,
              "broadcast: %s, %ld launches, %ld copies, %s, in[0] %p", collgen_comm_last_error(c),
              stats->launches, stats->copies, stats->log[0].kernel, bp->in[0]);
  CHILD_CHECK(rep, rank, 32, rank != 0 ||
              memcmp((const void *)(uintptr_t)c->staging[0], in, 4 * 4096) == 0,
              "the root's input was not staged");
  memset(stats, 0, sizeof *stats);
  int64_t n_bytes = (int64_t)(5u << 20); /* more than half of the 8 MiB staging area */
  unsigned char *bin = aligned_alloc(256, (size_t)n_bytes), *bout = aligned_alloc(256, (size_t)n_bytes);
  memset(bin, 0x5a, (size_t)n_bytes);
  rc = collgen_rank_broadcast(c, COLLGEN_DTYPE_U8, 1, &n_bytes, rank == 0 ? bin : NULL, bout, 0,
                              0, s);
  CHILD_CHECK(rep, rank, 33, rc == COLLGEN_OK && stats->launches == 2 &&
              stats->copies == (rank == 0 ? 2 : 0) && stats->log[0].params.count == 4u << 20 &&
              stats->log[1].params.count == 1u << 20 && stats->log[1].params.out[rank] ==
              bout + (4u << 20),
              "large broadcast: %s, %ld launches, %ld copies", collgen_comm_last_error(c),
              stats->launches, stats->copies);
  rc = collgen_rank_broadcast(c, COLLGEN_DTYPE_U8, 1, &n_bytes, NULL, bout, 0, 0, s);
  CHILD_CHECK(rep, rank, 34, rank != 0 || (rc == COLLGEN_ERR_INVALID_ARG &&
                                           strstr(collgen_comm_last_error(c), "input of rank 0")),
              "root without input: %s", collgen_comm_last_error(c));
  free(bin);
  free(bout);
  /* all_gather, uneven u8 shards (100 and 37 bytes) at an odd address:
  ** each shard is staged into region IN, the kernel reads both ranks'
  ** staging and writes this rank's output at the shards' offsets; a shard
  ** over half the staging area is refused naming staging_bytes */
  int64_t ga0[1] = {100}, ga1[1] = {37}, gabig[1] = {(int64_t)(8u << 20) / 2 + 1};
  const int64_t *gashards[2] = {ga0, ga1}, *gabigs[2] = {gabig, ga1};
  const size_t gamine = rank ? 37 : 100;
  launches = stats->launches;
  copies = stats->copies;
  rc = collgen_rank_all_gather(c, COLLGEN_DTYPE_U8, 1, gashards, in + 1, out, 0, s);
  const fake_cuda_launch_t *gl = &stats->log[stats->launches - 1];
  CHILD_CHECK(rep, rank, 35, rc == COLLGEN_OK && stats->launches == launches + 1 &&
              stats->copies == copies + 1 && strcmp(gl->kernel, "collgen_all_gather_b1_g2") == 0 &&
              gl->params.in[0] == (const void *)(uintptr_t)c->staging[0] &&
              gl->params.in[1] == (const void *)(uintptr_t)c->staging[1] &&
              gl->params.out[rank] == out && gl->params.row_start[1] == 100 &&
              gl->params.row_start[2] == 137 &&
              memcmp((const void *)(uintptr_t)c->staging[rank], in + 1, gamine) == 0,
              "all_gather: %s, %ld launches, %ld copies, %s", collgen_comm_last_error(c),
              stats->launches - launches, stats->copies - copies, gl->kernel);
  launches = stats->launches;
  unsigned char *gabuf = aligned_alloc(256, 9u << 20);
  rc = collgen_rank_all_gather(c, COLLGEN_DTYPE_U8, 1, gabigs, gabuf, gabuf + (4u << 20) + 256, 0, s);
  free(gabuf);
  CHILD_CHECK(rep, rank, 36, rc == COLLGEN_ERR_INVALID_ARG && stats->launches == launches &&
              strstr(collgen_comm_last_error(c), "staging_bytes"),
              "oversized all_gather shard: %s", collgen_comm_last_error(c));
  free(res);
  free(nrm);
  /* mode mismatch */
  const int64_t *shapes[2] = {&n_small, &n_small};
  const void *ins[2] = {in, in};
  void *outs[2] = {out, out};
  collgen_stream_t ss[2] = {s, s};
  rc = collgen_allreduce_sum(c, COLLGEN_DTYPE_BF16, 1, shapes, ins, outs, 0, ss);
  CHILD_CHECK(rep, rank, 10, rc == COLLGEN_ERR_INVALID_ARG &&
              strstr(collgen_comm_last_error(c), "collgen_rank_"), "one-process call: %s",
              collgen_comm_last_error(c));
  rc = collgen_rank_allreduce_sum(c, COLLGEN_DTYPE_BF16, 1, NULL, in, out, 0, s);
  CHILD_CHECK(rep, rank, 11, rc == COLLGEN_ERR_INVALID_ARG, "NULL shape: %s",
              collgen_status_name(rc));
  free(in);
  free(out);
  collgen__dev_stream_destroy(c, rank, s);
  long live = stats->vmm_handles;
  collgen_comm_destroy(c);
  CHILD_CHECK(rep, rank, 12, stats->vmm_handles == live - 4,
              "destroy left %ld of 4 VMM handles (2 own, 2 imported)", stats->vmm_handles - live + 4);
  _exit(0);
}

Test(rank_hostpath, two_processes_create_map_stage_and_destroy) { run_two(two_ranks_child); }

/* Rank 0 aborts c and tells rank 1 through the pipe; then this rank's
** signal buffer of c must hold the mark (on rank 1 written by the other
** process, through its mapping). `step` numbers the checks. */
static void abort_across(report_t *rep, collgen_comm_t *c, int rank, int step, int pipe_w,
                         int pipe_r) {
  char byte = 0;
  if (rank == 0) {
    CHILD_CHECK(rep, rank, step, collgen_comm_abort(c) == COLLGEN_OK, "abort: %s",
                collgen_comm_last_error(c));
    CHILD_CHECK(rep, rank, step, write(pipe_w, "a", 1) == 1, "pipe");
  } else {
    CHILD_CHECK(rep, rank, step, read(pipe_r, &byte, 1) == 1, "pipe");
  }
  const collgen__signal *own = (const collgen__signal *)(uintptr_t)c->signal[rank];
  CHILD_CHECK(rep, rank, step + 1, own->counter[0][0] == COLLGEN_ABORT_MARK &&
              own->ll_epoch[0] == COLLGEN_ABORT_MARK && own->abort_flag != 0,
              "this rank's buffer was not marked by the abort");
}

/* An abort in one process overwrites the other process's signal buffer
** too (through its mapping), so that process's kernels would stop. */
static void abort_child(report_t *rep, const collgen_unique_id_t *id, int rank, int pipe_w,
                        int pipe_r) {
  collgen_comm_t *c = child_comm(rep, id, 2, rank);
  abort_across(rep, c, rank, 2, pipe_w, pipe_r);
  collgen_comm_destroy(c);
  _exit(0);
}

Test(rank_hostpath, an_abort_reaches_the_other_process) { run_two(abort_child); }

/* A large allreduce of `fill` bytes on c: OK, and the input staged into
** this rank's staging area of c. */
static void staged_call(report_t *rep, collgen_comm_t *c, int rank, int step, collgen_stream_t s,
                        unsigned char fill) {
  const int64_t n = 1 << 20;
  const size_t bytes = (size_t)n * 2;
  unsigned char *in = aligned_alloc(256, bytes), *out = aligned_alloc(256, bytes);
  memset(in, fill, bytes);
  int rc = collgen_rank_allreduce_sum(c, COLLGEN_DTYPE_BF16, 1, &n, in, out, 0, s);
  CHILD_CHECK(rep, rank, step, rc == COLLGEN_OK, "call: %s", collgen_comm_last_error(c));
  CHILD_CHECK(rep, rank, step,
              memcmp((const void *)(uintptr_t)c->staging[rank], in, bytes) == 0,
              "the input (bytes %#x) is not in this communicator's staging area", fill);
  free(in);
  free(out);
}

/* Two communicators in the same two processes (the second id made by rank
** 0 and passed through the pipe) stay apart: separate signal buffers and
** staging areas, each call stages into its own; an abort of one marks only
** its buffers, and the other still works, also after the first is
** destroyed; destroying both releases every VMM handle. */
static void two_comms_child(report_t *rep, const collgen_unique_id_t *id, int rank, int pipe_w,
                            int pipe_r) {
  const long handles = stats->vmm_handles;
  collgen_comm_t *a = child_comm(rep, id, 2, rank);
  collgen_unique_id_t id_b;
  if (rank == 0)
    CHILD_CHECK(rep, rank, 2, collgen_get_unique_id(&id_b) == COLLGEN_OK &&
                write(pipe_w, &id_b, sizeof id_b) == (ssize_t)sizeof id_b, "second id");
  else
    CHILD_CHECK(rep, rank, 2, read(pipe_r, &id_b, sizeof id_b) == (ssize_t)sizeof id_b,
                "second id");
  collgen_comm_t *b = child_comm(rep, &id_b, 2, rank);
  for (int r = 0; r < 2; ++r)
    CHILD_CHECK(rep, rank, 3, a->signal[r] && b->signal[r] && a->signal[r] != b->signal[r] &&
                a->staging[r] && b->staging[r] && a->staging[r] != b->staging[r],
                "rank %d's buffers are shared by the two communicators", r);
  collgen_stream_t s;
  CHILD_CHECK(rep, rank, 4, collgen__dev_stream_create(a, rank, &s) == COLLGEN_OK, "stream");
  staged_call(rep, a, rank, 5, s, 0x11);
  staged_call(rep, b, rank, 6, s, 0x22);
  CHILD_CHECK(rep, rank, 7, *(const unsigned char *)(uintptr_t)a->staging[rank] == 0x11,
              "a call on the second communicator wrote into the first's staging area");
  /* an abort of a reaches both ranks' buffers of a, not of b */
  abort_across(rep, a, rank, 8, pipe_w, pipe_r);
  const collgen__signal *own_b = (const collgen__signal *)(uintptr_t)b->signal[rank];
  CHILD_CHECK(rep, rank, 10, own_b->abort_flag == 0 && own_b->ll_epoch[0] != COLLGEN_ABORT_MARK &&
              own_b->counter[0][0] != COLLGEN_ABORT_MARK,
              "the abort of one communicator marked the other's buffer");
  CHILD_CHECK(rep, rank, 11, collgen_comm_check(b) == COLLGEN_OK, "the other communicator: %s",
              collgen_comm_last_error(b));
  staged_call(rep, b, rank, 12, s, 0x33);
  collgen__dev_stream_destroy(a, rank, s);
  collgen_comm_destroy(a);
  CHILD_CHECK(rep, rank, 13, collgen__dev_stream_create(b, rank, &s) == COLLGEN_OK, "stream");
  staged_call(rep, b, rank, 14, s, 0x44);
  collgen__dev_stream_destroy(b, rank, s);
  collgen_comm_destroy(b);
  CHILD_CHECK(rep, rank, 15, stats->vmm_handles == handles,
              "destroying both left %ld VMM handles", stats->vmm_handles - handles);
  _exit(0);
}

Test(rank_hostpath, two_communicators_in_the_same_processes_stay_apart) {
  run_two(two_comms_child);
}

/* A rank that never comes: the other gets COLLGEN_ERR_TIMEOUT naming it,
** within the bound. */
Test(rank_hostpath, a_missing_rank_times_out_named) {
  collgen_unique_id_t id;
  cr_assert_eq(collgen_get_unique_id(&id), COLLGEN_OK);
  collgen_comm_options_t o;
  collgen_comm_options_init(&o);
  o.cache_dir = cache_dir;
  o.timeout_ms = 300;
  collgen_comm_t *c = NULL;
  double t0 = collgen__now_ms();
  int rc = collgen_comm_init_rank(&c, 2, &id, 0, 0, &o);
  double ms = collgen__now_ms() - t0;
  cr_expect_eq(rc, COLLGEN_ERR_TIMEOUT, "%s", collgen_status_name(rc));
  cr_expect(strstr(collgen_last_error(), "1"), "%s", collgen_last_error());
  cr_expect_lt(ms, 3000, "gave up after %.0f ms", ms);
  cr_expect_null(c);
}

/* Bad arguments are refused before anything is opened. */
Test(rank_hostpath, bad_arguments_are_refused) {
  collgen_unique_id_t id;
  cr_assert_eq(collgen_get_unique_id(&id), COLLGEN_OK);
  collgen_comm_t *c = NULL;
  cr_expect_eq(collgen_comm_init_rank(NULL, 2, &id, 0, 0, NULL), COLLGEN_ERR_INVALID_ARG);
  cr_expect_eq(collgen_comm_init_rank(&c, 2, NULL, 0, 0, NULL), COLLGEN_ERR_INVALID_ARG);
  cr_expect_eq(collgen_comm_init_rank(&c, 0, &id, 0, 0, NULL), COLLGEN_ERR_INVALID_ARG);
  cr_expect_eq(collgen_comm_init_rank(&c, 9, &id, 0, 0, NULL), COLLGEN_ERR_INVALID_ARG);
  cr_expect_eq(collgen_comm_init_rank(&c, 2, &id, 2, 0, NULL), COLLGEN_ERR_INVALID_ARG);
  cr_expect_eq(collgen_comm_init_rank(&c, 2, &id, -1, 0, NULL), COLLGEN_ERR_INVALID_ARG);
  cr_expect_eq(collgen_comm_init_rank(&c, 1, &id, 0, 7, NULL), COLLGEN_ERR_NO_DEVICE);
  collgen_comm_options_t o;
  collgen_comm_options_init(&o);
  o.staging_bytes = 1000;
  cr_expect_eq(collgen_comm_init_rank(&c, 1, &id, 0, 0, &o), COLLGEN_ERR_INVALID_ARG);
  cr_expect_null(c);
  /* a one-process communicator refuses the per-rank call */
  int devices[2] = {0, 1};
  collgen_comm_options_init(&o);
  o.cache_dir = cache_dir;
  cr_assert_eq(collgen_comm_create(&c, 2, devices, &o), COLLGEN_OK);
  int64_t n = 16;
  cr_expect_eq(collgen_rank_allreduce_sum(c, COLLGEN_DTYPE_F32, 1, &n, (void *)64, (void *)128, 0,
                                          NULL), COLLGEN_ERR_INVALID_ARG);
  cr_expect(strstr(collgen_comm_last_error(c), "drives every rank"), "%s",
            collgen_comm_last_error(c));
  collgen_comm_destroy(c);
}

/* reduce_scatter_sum in two processes: peers read the input, so the whole
** input is staged into region IN and the kernel reads every rank's chunk
** there, at the chunk's start; the output (own, aligned) is written in
** place. Chunk starts that are not 16-byte aligned plan the scalar kernel
** (measure_group's alignment holds in this mode too); an input larger than
** half the staging area is refused naming staging_bytes, before anything
** is copied or launched. */
static void reduce_scatter_child(report_t *rep, const collgen_unique_id_t *id, int rank,
                                 int pipe_w, int pipe_r) {
  (void)pipe_w;
  (void)pipe_r;
  collgen_stream_t s;
  collgen_comm_t *c = child_comm_stream(rep, id, rank, &s);
  int64_t shape[2] = {5, 4096}; /* chunks of 3 and 2 rows */
  const size_t bytes = 5 * 4096 * 2;
  unsigned char *in = aligned_alloc(256, bytes), *out = aligned_alloc(256, bytes);
  for (size_t i = 0; i < bytes; ++i) in[i] = (unsigned char)(i * 5 + 3 * rank);
  memset(stats, 0, sizeof *stats);
  int rc = collgen_rank_reduce_scatter_sum(c, COLLGEN_DTYPE_BF16, 2, shape, in, out, 0, s);
  CHILD_CHECK(rep, rank, 3, rc == COLLGEN_OK, "call: %s", collgen_comm_last_error(c));
  const collgen__kparams *kp = &stats->log[0].params;
  const int64_t start = rank == 0 ? 0 : 3, count = rank == 0 ? 3 : 2;
  CHILD_CHECK(rep, rank, 4, stats->launches == 1 && stats->copies == 1 &&
              strcmp(stats->log[0].kernel, "collgen_reduce_scatter_sum_bf16_g2_v8") == 0,
              "%ld launches, %ld copies, %s", stats->launches, stats->copies, stats->log[0].kernel);
  CHILD_CHECK(rep, rank, 5, memcmp((const void *)(uintptr_t)c->staging[rank], in, bytes) == 0,
              "the input was not staged into this rank's staging area");
  for (int k = 0; k < 2; ++k)
    CHILD_CHECK(rep, rank, 6, kp->in[k] == (const char *)(uintptr_t)c->staging[k] + start * 4096 * 2,
                "rank %d's input is not read at this rank's chunk in its staging area", k);
  CHILD_CHECK(rep, rank, 7, kp->out[rank] == out && kp->count == (unsigned long long)count * 4096,
              "output %p (want %p), count %llu", kp->out[rank], (void *)out, kp->count);
  int64_t odd[2] = {7, 3};
  rc = collgen_rank_reduce_scatter_sum(c, COLLGEN_DTYPE_BF16, 2, odd, in, out, 0, s);
  CHILD_CHECK(rep, rank, 8, rc == COLLGEN_OK && stats->launches == 2 &&
              strcmp(stats->log[1].kernel, "collgen_reduce_scatter_sum_bf16_g2_v1") == 0,
              "unaligned chunk starts: %s, %s", collgen_comm_last_error(c), stats->log[1].kernel);
  int64_t big[1] = {(int64_t)(c->staging_bytes / 2 / 2) + 8};
  const long copies = stats->copies;
  rc = collgen_rank_reduce_scatter_sum(c, COLLGEN_DTYPE_BF16, 1, big, (void *)(uintptr_t)(1ull << 40),
                                       (void *)(uintptr_t)(2ull << 40), 0, s); /* never touched */
  CHILD_CHECK(rep, rank, 9, rc == COLLGEN_ERR_INVALID_ARG &&
              strstr(collgen_comm_last_error(c), "staging_bytes") && stats->launches == 2 &&
              stats->copies == copies, "too large: %s", collgen_comm_last_error(c));
  free(in);
  free(out);
  collgen__dev_stream_destroy(c, rank, s);
  collgen_comm_destroy(c);
  _exit(0);
}

Test(rank_hostpath, reduce_scatter_sum_stages_the_input_and_reads_chunks) {
  run_two(reduce_scatter_child);
}

/* scatter in two processes: peers read the root's input, so the root
** copies it into its region IN (one copy; the other rank, giving no input,
** copies nothing) and every rank's kernel reads it there, at the chunk
** offsets ([5, 64] i32: chunks of 3 and 2 rows of 256 bytes); an output
** that is not 16-byte aligned goes through region OUT; the root's output at
** its own chunk of its input is taken; a rank whose chunk is empty may pass
** no output. The call is never cut: an input of exactly half the staging
** area is one launch, one 16 bytes larger is refused on both ranks, naming
** staging_bytes, before anything is copied or launched (a broadcast of
** that size runs as pieces). */
static void scatter_child(report_t *rep, const collgen_unique_id_t *id, int rank, int pipe_w,
                          int pipe_r) {
  (void)pipe_w;
  (void)pipe_r;
  collgen_stream_t s;
  collgen_comm_t *c = child_comm_stream(rep, id, rank, &s);
  const size_t half = c->staging_bytes / 2;
  unsigned char *in = aligned_alloc(256, half), *out = aligned_alloc(256, half);
  uint64_t seed = tu_rand() | 1;
  collgen__ref_fill_random(COLLGEN_DTYPE_U8, in, (int64_t)half, &seed);
  int64_t shape[2] = {5, 64};
  const unsigned long long starts[3] = {0, 768, 1280};
  for (int root = 0; root < 2; ++root) {
    memset(stats, 0, sizeof *stats);
    int rc = collgen_rank_scatter(c, COLLGEN_DTYPE_I32, 2, shape, rank == root ? in : NULL, out,
                                  root, 0, s);
    const collgen__kparams *kp = &stats->log[0].params;
    CHILD_CHECK(rep, rank, 3 + root, rc == COLLGEN_OK && stats->launches == 1 &&
                stats->copies == (rank == root ? 1 : 0) &&
                strcmp(stats->log[0].kernel, "collgen_scatter_b4_g2") == 0,
                "root %d: %s, %ld launches, %ld copies, %s", root, collgen_comm_last_error(c),
                stats->launches, stats->copies, stats->log[0].kernel);
    CHILD_CHECK(rep, rank, 5 + root, kp->in[root] == (const void *)(uintptr_t)c->staging[root] &&
                kp->root == (unsigned)root && kp->rank == (unsigned)rank && kp->out[rank] == out &&
                kp->row_start[0] == starts[0] && kp->row_start[1] == starts[1] &&
                kp->row_start[2] == starts[2] && kp->count == 1280,
                "root %d: in[root] %p, root %u, out %p, row_start %llu %llu %llu, count %llu",
                root, kp->in[root], kp->root, kp->out[rank], kp->row_start[0], kp->row_start[1],
                kp->row_start[2], kp->count);
    CHILD_CHECK(rep, rank, 7 + root, rank != root ||
                memcmp((const void *)(uintptr_t)c->staging[root], in, 1280) == 0,
                "root %d: its input was not staged", root);
  }
  /* the root's (rank 1's) output in place at its chunk, 3 rows in */
  memset(stats, 0, sizeof *stats);
  int rc = collgen_rank_scatter(c, COLLGEN_DTYPE_I32, 2, shape, rank == 1 ? in : NULL,
                                rank == 1 ? in + 768 : out, 1, 0, s);
  CHILD_CHECK(rep, rank, 9, rc == COLLGEN_OK && stats->launches == 1 &&
              stats->log[0].params.out[rank] == (rank == 1 ? in + 768 : out),
              "in place at the root's chunk: %s", collgen_comm_last_error(c));
  /* u8 [5, 7] into an odd address: this rank's output goes through region OUT */
  int64_t odd[2] = {5, 7};
  memset(stats, 0, sizeof *stats);
  rc = collgen_rank_scatter(c, COLLGEN_DTYPE_U8, 2, odd, rank == 0 ? in : NULL, out + 1, 0, 0, s);
  CHILD_CHECK(rep, rank, 10, rc == COLLGEN_OK && stats->launches == 1 &&
              stats->copies == (rank == 0 ? 2 : 1) &&
              stats->log[0].params.out[rank] == (void *)(uintptr_t)(c->staging[rank] + half) &&
              stats->log[0].params.row_start[1] == 21 && stats->log[0].params.row_start[2] == 35,
              "unaligned output: %s, %ld copies, out %p", collgen_comm_last_error(c),
              stats->copies, stats->log[0].params.out[rank]);
  /* one row: rank 1's chunk is empty and it passes no output */
  int64_t one[2] = {1, 64};
  memset(stats, 0, sizeof *stats);
  rc = collgen_rank_scatter(c, COLLGEN_DTYPE_I32, 2, one, rank == 0 ? in : NULL,
                            rank == 0 ? out : NULL, 0, 0, s);
  CHILD_CHECK(rep, rank, 11, rc == COLLGEN_OK && stats->launches == 1 &&
              stats->log[0].params.row_start[1] == 256 &&
              stats->log[0].params.row_start[2] == 256 &&
              stats->log[0].params.out[rank] == (rank == 0 ? out : NULL),
              "empty chunk, no output: %s", collgen_comm_last_error(c));
  /* exactly half the staging area: one call, not pieces */
  int64_t fits[1] = {(int64_t)half};
  memset(stats, 0, sizeof *stats);
  rc = collgen_rank_scatter(c, COLLGEN_DTYPE_U8, 1, fits, rank == 0 ? in : NULL, out, 0, 0, s);
  CHILD_CHECK(rep, rank, 12, rc == COLLGEN_OK && stats->launches == 1 &&
              stats->log[0].params.count == half && stats->copies == (rank == 0 ? 1 : 0),
              "half the staging area: %s, %ld launches", collgen_comm_last_error(c),
              stats->launches);
  int64_t over[1] = {(int64_t)half + 16};
  memset(stats, 0, sizeof *stats);
  rc = collgen_rank_scatter(c, COLLGEN_DTYPE_U8, 1, over,
                            rank == 0 ? (void *)(uintptr_t)(1ull << 40) : NULL,
                            (void *)(uintptr_t)(2ull << 40), 0, 0, s); /* never touched */
  CHILD_CHECK(rep, rank, 13, rc == COLLGEN_ERR_INVALID_ARG &&
              strstr(collgen_comm_last_error(c), "input of 4194320 bytes") &&
              strstr(collgen_comm_last_error(c), "staging_bytes >= 8388640") &&
              stats->launches == 0 && stats->copies == 0,
              "over half the staging area: %s", collgen_comm_last_error(c));
  free(in);
  free(out);
  collgen__dev_stream_destroy(c, rank, s);
  collgen_comm_destroy(c);
  _exit(0);
}

Test(rank_hostpath, scatter_stages_the_roots_input_and_is_never_cut) { run_two(scatter_child); }
