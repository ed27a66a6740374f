/*
** test_rank_register.c -- registered buffers (collgen_register_buffer) and
** the FP8 per-rank call on the stand-in driver (fake_cuda.c), in forked
** processes: cuMemAlloc memory shared by fake legacy IPC handles and VMM
** memory by fds (memfds, so each process reads the other's bytes through
** its mapping); a call whose peer-read input is registered launches no
** staging copy and gives the kernel every rank's registered address at
** the same offset; refusals (sizes that differ, named; a NULL handle on one
** rank; host memory; misalignment; a range past its allocation or its
** registration; VMM memory without fd handles; deregistering twice); a
** missing rank times out named; deregister and destroy unmap everything.
** Kernels do not run here; the GPU tests check results.
*/
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "collgen.h"
#include "comm_internal.h" /* white-box: the communicator's fields */
#include "devbuf.h"
#include "rank_fork.h"

TestSuite(rank_register, .init = rank_fork_setup, .fini = rank_fork_teardown);

#define REG_BYTES ((size_t)12 << 20)

/* The byte rank r's registered buffer holds at i (both processes know it). */
static unsigned char pattern(int r, size_t i) { return (unsigned char)(i * 31 + 101 * r + 7); }

static void *dev_buffer(report_t *rep, collgen_comm_t *c, int rank, size_t bytes) {
  void *p = NULL;
  CHILD_CHECK(rep, rank, 90, collgen__dev_alloc(c, rank, bytes, &p) == COLLGEN_OK, "alloc: %s",
              collgen_comm_last_error(c));
  return p;
}

/* 1 if the launch's in[] holds every rank's registration at `offset`. */
static int reads_registered(const fake_cuda_launch_t *l, const collgen_buffer_t *h,
                            size_t offset) {
  for (int k = 0; k < 2; ++k)
    if ((uintptr_t)l->params.in[k] != h->at[k] + offset) return 0;
  return 1;
}

/* Rank r registers a 12 MiB cudaMalloc'd buffer: the peer's bytes are
** visible through the mapping; calls with registered inputs copy nothing
** in and read every rank's buffer at the same offset; deregister unmaps;
** a second registration is released by destroy. */
static void registered_child(report_t *rep, const collgen_unique_id_t *id, int rank, int pipe_w,
                             int pipe_r) {
  (void)pipe_w;
  (void)pipe_r;
  collgen_comm_t *c = child_comm(rep, id, 2, rank);
  const int peer = 1 - rank;
  collgen_stream_t s;
  CHILD_CHECK(rep, rank, 2, collgen__dev_stream_create(c, rank, &s) == COLLGEN_OK, "stream");
  unsigned char *buf = dev_buffer(rep, c, rank, REG_BYTES);
  unsigned char *out = dev_buffer(rep, c, rank, 4u << 20), *res = dev_buffer(rep, c, rank, 4u << 20);
  unsigned char *nrm = dev_buffer(rep, c, rank, 4u << 20), *gamma = dev_buffer(rep, c, rank, 1u << 16);
  for (size_t i = 0; i < REG_BYTES; ++i) buf[i] = pattern(rank, i);
  collgen_buffer_t *h = NULL;
  int rc = collgen_register_buffer(c, buf, REG_BYTES, &h);
  CHILD_CHECK(rep, rank, 3, rc == COLLGEN_OK && h, "register: %s", collgen_comm_last_error(c));
  CHILD_CHECK(rep, rank, 4, stats->ipc_open == 1 && h->at[rank] == (uintptr_t)buf && h->at[peer],
              "mappings: %ld IPC, own %p", stats->ipc_open, (void *)h->at[rank]);
  const unsigned char *seen = (const unsigned char *)(uintptr_t)h->at[peer];
  for (size_t i = 0; i < REG_BYTES; i += 4093)
    CHILD_CHECK(rep, rank, 5, seen[i] == pattern(peer, i), "peer byte %zu through the mapping", i);

  /* two-shot allreduce (2 MiB) from offset 64 KiB: no copy in, only the
  ** sums back from staging (peers write them into every rank's region OUT) */
  int64_t n = 1 << 20;
  const size_t off = 64u << 10;
  memset(stats->log, 0, sizeof stats->log);
  stats->launches = stats->copies = 0;
  rc = collgen_rank_allreduce_sum(c, COLLGEN_DTYPE_BF16, 1, &n, buf + off, out, 0, s);
  CHILD_CHECK(rep, rank, 6, rc == COLLGEN_OK, "registered call: %s", collgen_comm_last_error(c));
  CHILD_CHECK(rep, rank, 7, stats->launches == 1 && stats->copies == 1 &&
              strstr(stats->log[0].kernel, "twoshot") && reads_registered(&stats->log[0], h, off) &&
              (uintptr_t)stats->log[0].params.out[peer] == c->staging[peer] + c->staging_bytes / 2,
              "registered call: %ld launches, %ld copies, %s, in %p %p", stats->launches,
              stats->copies, stats->log[0].kernel, stats->log[0].params.in[0],
              stats->log[0].params.in[1]);
  /* the same call from an unregistered buffer stages it (copy in + back) */
  rc = collgen_rank_allreduce_sum(c, COLLGEN_DTYPE_BF16, 1, &n, nrm, out, 0, s);
  CHILD_CHECK(rep, rank, 8, rc == COLLGEN_OK && stats->copies == 3 &&
              (uintptr_t)stats->log[1].params.in[rank] == c->staging[rank],
              "unregistered call: %ld copies", stats->copies - 1);
  /* a range that starts in the registration and runs past it: refused
  ** before anything runs, also when the call would be cut into pieces */
  int64_t past = 1 << 20, big = 3 << 20;
  rc = collgen_rank_allreduce_sum(c, COLLGEN_DTYPE_BF16, 1, &past, buf + REG_BYTES - 4096, out, 0, s);
  CHILD_CHECK(rep, rank, 9, rc == COLLGEN_ERR_INVALID_ARG &&
              strstr(collgen_comm_last_error(c), "runs past its end") && stats->launches == 2,
              "straddling input: %s: %s", collgen_status_name(rc), collgen_comm_last_error(c));
  rc = collgen_rank_allreduce_sum(c, COLLGEN_DTYPE_BF16, 1, &big, buf + (8u << 20), out, 0, s);
  CHILD_CHECK(rep, rank, 10, rc == COLLGEN_ERR_INVALID_ARG && stats->launches == 2,
              "straddling pieces: %s, %ld launches", collgen_status_name(rc), stats->launches);
  /* cut into pieces (6 MiB, half the staging is 4 MiB): every piece reads
  ** the registration at its own offset */
  rc = collgen_rank_allreduce_sum(c, COLLGEN_DTYPE_BF16, 1, &big, buf, buf, 0, s);
  CHILD_CHECK(rep, rank, 11, rc == COLLGEN_OK && stats->launches == 4 &&
              reads_registered(&stats->log[2], h, 0) &&
              reads_registered(&stats->log[3], h, (size_t)(4u << 20) / 16 * 16),
              "pieces: %s, %ld launches", collgen_comm_last_error(c), stats->launches);

  /* the norm ops: x and the shard are read where they are */
  int64_t fused[2] = {128, 4096};
  long copies = stats->copies;
  rc = collgen_rank_allreduce_residual_rmsnorm(c, COLLGEN_DTYPE_BF16, 2, fused, buf + off, res,
                                               nrm, res, gamma, 1e-6f, 0.0f, 0, s);
  CHILD_CHECK(rep, rank, 12, rc == COLLGEN_OK && reads_registered(&stats->log[4], h, off) &&
              stats->copies - copies == (strstr(stats->log[4].kernel, "rowsplit") ? 1 : 0),
              "fused: %s, %s, %ld copies", collgen_comm_last_error(c), stats->log[4].kernel,
              stats->copies - copies);
  unsigned char *fp8 = dev_buffer(rep, c, rank, 1u << 20);
  float *scales = (float *)dev_buffer(rep, c, rank, 4096);
  copies = stats->copies;
  rc = collgen_rank_allreduce_residual_rmsnorm_fp8(c, COLLGEN_DTYPE_BF16, 2, fused, buf + off,
                                                   res, fp8, scales, res, gamma, 1e-6f, 0.0f,
                                                   COLLGEN_FP8_DYNAMIC, 0.0f, 0, s);
  const collgen__kparams *kp = &stats->log[5].params;
  CHILD_CHECK(rep, rank, 13, rc == COLLGEN_OK && reads_registered(&stats->log[5], h, off) &&
              kp->normed == fp8 && kp->row_scales == scales && kp->gamma == gamma &&
              kp->residual_in == res && kp->count == 128 && strstr(stats->log[5].kernel, "e4m3"),
              "fp8 dynamic: %s, %s", collgen_comm_last_error(c), stats->log[5].kernel);
  rc = collgen_rank_allreduce_residual_rmsnorm_fp8(c, COLLGEN_DTYPE_BF16, 2, fused, buf + off,
                                                   res, fp8, NULL, res, gamma, 1e-6f, 0.0f,
                                                   COLLGEN_FP8_STATIC, 0.5f, 0, s);
  CHILD_CHECK(rep, rank, 14, rc == COLLGEN_OK && stats->log[6].params.static_scale == 0.5f &&
              stats->log[6].params.row_scales == NULL, "fp8 static: %s", collgen_comm_last_error(c));
  rc = collgen_rank_allreduce_residual_rmsnorm_fp8(c, COLLGEN_DTYPE_BF16, 2, fused, buf + off,
                                                   res, fp8, scales, res, gamma, 1e-6f, 0.0f,
                                                   COLLGEN_FP8_STATIC, 0.5f, 0, s);
  CHILD_CHECK(rep, rank, 15, rc == COLLGEN_ERR_INVALID_ARG && stats->launches == 7,
              "fp8 static with row_scales: %s", collgen_status_name(rc));
  int64_t shard[2] = {64, 8192};
  const int64_t *shards[2] = {shard, shard};
  rc = collgen_rank_allgather_rmsnorm(c, COLLGEN_DTYPE_BF16, 2, shards, buf + off, out, nrm,
                                      gamma, 1e-6f, 0.0f, 0, s);
  CHILD_CHECK(rep, rank, 16, rc == COLLGEN_OK && stats->launches == 8 &&
              (strstr(stats->log[7].kernel, "_ll") || reads_registered(&stats->log[7], h, off)),
              "allgather_rmsnorm: %s, %s", collgen_comm_last_error(c), stats->log[7].kernel);

  /* deregister unmaps; twice is refused and does nothing */
  CHILD_CHECK(rep, rank, 17, collgen_deregister_buffer(c, h) == COLLGEN_OK && stats->ipc_open == 0,
              "deregister: %s, %ld IPC mappings left", collgen_comm_last_error(c), stats->ipc_open);
  rc = collgen_deregister_buffer(c, h);
  CHILD_CHECK(rep, rank, 18, rc == COLLGEN_ERR_INVALID_ARG &&
              strstr(collgen_comm_last_error(c), "deregistered already"), "twice: %s",
              collgen_comm_last_error(c));
  CHILD_CHECK(rep, rank, 19, collgen_deregister_buffer(c, NULL) == COLLGEN_ERR_INVALID_ARG, "NULL");
  /* after deregistering, the same input is staged again */
  copies = stats->copies;
  rc = collgen_rank_allreduce_sum(c, COLLGEN_DTYPE_BF16, 1, &n, buf + off, out, 0, s);
  CHILD_CHECK(rep, rank, 20, rc == COLLGEN_OK && stats->copies == copies + 2, "staged again");

  /* destroy with a live registration unmaps it */
  CHILD_CHECK(rep, rank, 21, collgen_register_buffer(c, buf, REG_BYTES, &h) == COLLGEN_OK &&
              stats->ipc_open == 1, "register again: %s", collgen_comm_last_error(c));
  void *bufs[] = {buf, out, res, nrm, gamma, fp8, scales};
  for (size_t k = 0; k < sizeof bufs / sizeof bufs[0]; ++k) collgen__dev_free(c, rank, bufs[k]);
  collgen__dev_stream_destroy(c, rank, s);
  long live = stats->vmm_handles;
  collgen_comm_destroy(c);
  CHILD_CHECK(rep, rank, 22, stats->ipc_open == 0 && stats->vmm_handles == live - 4,
              "destroy left %ld IPC mappings, %ld VMM handles", stats->ipc_open,
              stats->vmm_handles - live + 4);
  _exit(0);
}

Test(rank_register, registered_inputs_are_read_in_place) { run_two(registered_child); }

/* Refusals, each on both ranks and each leaving nothing mapped; the
** communicator registers fine afterwards. A VMM buffer travels as an fd. */
static void refusals_child(report_t *rep, const collgen_unique_id_t *id, int rank, int pipe_w,
                           int pipe_r) {
  (void)pipe_w;
  (void)pipe_r;
  collgen_comm_t *c = child_comm(rep, id, 2, rank);
  unsigned char *buf = dev_buffer(rep, c, rank, 4u << 20);
  collgen_buffer_t *h = (collgen_buffer_t *)&h;
  int rc = collgen_register_buffer(c, buf, rank == 0 ? 4u << 20 : 2u << 20, &h);
  CHILD_CHECK(rep, rank, 2, rc == COLLGEN_ERR_INVALID_ARG && h == NULL &&
              strstr(collgen_comm_last_error(c), "ranks ") &&
              strstr(collgen_comm_last_error(c), "different sizes"), "sizes: %s: %s",
              collgen_status_name(rc), collgen_comm_last_error(c));
  rc = collgen_register_buffer(c, buf, 4u << 20, rank == 1 ? NULL : &h);
  CHILD_CHECK(rep, rank, 3, rank == 1 ? rc == COLLGEN_ERR_INVALID_ARG
                                      : rc == COLLGEN_ERR_PEER &&
                                            strstr(collgen_comm_last_error(c), "rank 1"),
              "NULL handle on rank 1: %s: %s", collgen_status_name(rc), collgen_comm_last_error(c));
  unsigned char *host = aligned_alloc(256, 1u << 20);
  rc = collgen_register_buffer(c, host, 1u << 20, &h);
  CHILD_CHECK(rep, rank, 4, rc == COLLGEN_ERR_INVALID_ARG &&
              strstr(collgen_comm_last_error(c), "not device memory"), "host memory: %s",
              collgen_comm_last_error(c));
  free(host);
  rc = collgen_register_buffer(c, buf + 8, 1u << 20, &h);
  CHILD_CHECK(rep, rank, 5, rc == COLLGEN_ERR_ALIGNMENT, "misaligned: %s", collgen_status_name(rc));
  rc = collgen_register_buffer(c, buf + 4096, 4u << 20, &h);
  CHILD_CHECK(rep, rank, 6, rc == COLLGEN_ERR_INVALID_ARG &&
              strstr(collgen_comm_last_error(c), "past the end of its allocation"),
              "past the allocation: %s", collgen_comm_last_error(c));
  rc = collgen_register_buffer(c, NULL, 4096, &h);
  CHILD_CHECK(rep, rank, 7, rc == COLLGEN_ERR_INVALID_ARG, "NULL ptr: %s", collgen_status_name(rc));
  CHILD_CHECK(rep, rank, 8, stats->ipc_open == 0, "a refusal left %ld IPC mappings", stats->ipc_open);
  /* a VMM allocation is shared as an fd */
  collgen__shared_buf vmm;
  char err[200];
  CHILD_CHECK(rep, rank, 9, collgen__cu.cuCtxSetCurrent(c->ctx[rank]) == CUDA_SUCCESS &&
              collgen__shared_alloc(c->cudev[rank], 2u << 20, &vmm, err, sizeof err) == COLLGEN_OK,
              "VMM alloc: %s", err);
  memset((void *)(uintptr_t)vmm.ptr, 0x40 + rank, vmm.bytes);
  long handles = stats->vmm_handles;
  rc = collgen_register_buffer(c, (void *)(uintptr_t)(vmm.ptr + 4096), 1u << 20, &h);
  CHILD_CHECK(rep, rank, 10, rc == COLLGEN_OK && stats->ipc_open == 0 &&
              stats->vmm_handles == handles + 1 && h->vmm[1 - rank].ptr &&
              *(const unsigned char *)(uintptr_t)h->at[1 - rank] == 0x40 + (1 - rank),
              "VMM register: %s", collgen_comm_last_error(c));
  CHILD_CHECK(rep, rank, 11, collgen_deregister_buffer(c, h) == COLLGEN_OK &&
              stats->vmm_handles == handles, "VMM deregister: %s", collgen_comm_last_error(c));
  setenv("FAKE_CUDA_VMM_NO_FD", "1", 1);
  rc = collgen_register_buffer(c, (void *)(uintptr_t)vmm.ptr, 1u << 20, &h);
  unsetenv("FAKE_CUDA_VMM_NO_FD");
  CHILD_CHECK(rep, rank, 12, rc == COLLGEN_ERR_UNSUPPORTED &&
              strstr(collgen_comm_last_error(c), "POSIX_FILE_DESCRIPTOR") &&
              stats->vmm_handles == handles, "VMM without fds: %s", collgen_comm_last_error(c));
  collgen__cu.cuCtxSetCurrent(c->ctx[rank]);
  collgen__shared_free(&vmm);
  /* the communicator still works after the refusals */
  rc = collgen_register_buffer(c, buf, 4u << 20, &h);
  CHILD_CHECK(rep, rank, 13, rc == COLLGEN_OK && collgen_deregister_buffer(c, h) == COLLGEN_OK,
              "register after refusals: %s", collgen_comm_last_error(c));
  collgen__dev_free(c, rank, buf);
  collgen_comm_destroy(c);
  _exit(0);
}

Test(rank_register, refusals_are_collective_and_leave_nothing) { run_two(refusals_child); }

/* Rank 1 never registers: rank 0 gets COLLGEN_ERR_TIMEOUT naming it. */
static void missing_child(report_t *rep, const collgen_unique_id_t *id, int rank, int pipe_w,
                          int pipe_r) {
  collgen_comm_t *c = child_comm(rep, id, 2, rank);
  char byte = 0;
  if (rank == 0) {
    unsigned char *buf = dev_buffer(rep, c, rank, 1u << 20);
    collgen_buffer_t *h = NULL;
    int rc = collgen_register_buffer(c, buf, 1u << 20, &h);
    CHILD_CHECK(rep, rank, 2, rc == COLLGEN_ERR_TIMEOUT && strstr(collgen_comm_last_error(c), "1"),
                "%s: %s", collgen_status_name(rc), collgen_comm_last_error(c));
    CHILD_CHECK(rep, rank, 3, write(pipe_w, "x", 1) == 1, "pipe");
    collgen__dev_free(c, rank, buf);
  } else {
    CHILD_CHECK(rep, rank, 2, read(pipe_r, &byte, 1) == 1, "pipe");
  }
  collgen_comm_destroy(c);
  _exit(0);
}

Test(rank_register, a_rank_that_never_registers_times_out_named) {
  child_timeout_ms = 500;
  run_two(missing_child);
}

/* The FP8 per-rank call is refused below sm_89 before anything runs. */
static void fp8_arch_child(report_t *rep, const collgen_unique_id_t *id, int rank, int pipe_w,
                           int pipe_r) {
  (void)pipe_w;
  (void)pipe_r;
  collgen_comm_t *c = child_comm(rep, id, 2, rank);
  unsigned char *buf = dev_buffer(rep, c, rank, 1u << 20);
  int64_t shape[2] = {8, 4096};
  stats->launches = 0;
  int rc = collgen_rank_allreduce_residual_rmsnorm_fp8(c, COLLGEN_DTYPE_BF16, 2, shape, buf,
                                                       buf + (128u << 10), buf + (256u << 10),
                                                       (float *)(buf + (384u << 10)),
                                                       buf + (512u << 10), buf + (640u << 10),
                                                       1e-6f, 0.0f, COLLGEN_FP8_DYNAMIC, 0.0f, 0,
                                                       NULL);
  CHILD_CHECK(rep, rank, 2, rc == COLLGEN_ERR_UNSUPPORTED &&
              strstr(collgen_comm_last_error(c), "sm_89") && stats->launches == 0, "%s: %s",
              collgen_status_name(rc), collgen_comm_last_error(c));
  collgen__dev_free(c, rank, buf);
  collgen_comm_destroy(c);
  _exit(0);
}

Test(rank_register, fp8_rank_call_is_refused_below_sm_89) {
  setenv("FAKE_CUDA_SM", "86", 1);
  run_two(fp8_arch_child);
}

/* A communicator of collgen_comm_create: registering maps nothing and
** returns a handle; deregistering it works once. */
Test(rank_register, one_process_registration_is_a_no_op) {
  int devices[2] = {0, 1};
  collgen_comm_options_t o;
  collgen_comm_options_init(&o);
  o.cache_dir = cache_dir;
  collgen_comm_t *c = NULL;
  cr_assert_eq(collgen_comm_create(&c, 2, devices, &o), COLLGEN_OK, "%s", collgen_last_error());
  collgen_buffer_t *h = NULL;
  cr_expect_eq(collgen_register_buffer(NULL, (void *)64, 64, &h), COLLGEN_ERR_INVALID_ARG);
  cr_expect_eq(collgen_register_buffer(c, (void *)4096, 4096, &h), COLLGEN_OK);
  cr_expect_not_null(h);
  cr_expect_eq(collgen_register_buffer(c, NULL, 4096, &h), COLLGEN_ERR_INVALID_ARG);
  cr_expect_null(h);
  cr_assert_eq(collgen_register_buffer(c, (void *)4096, 4096, &h), COLLGEN_OK);
  cr_expect_eq(collgen_deregister_buffer(c, h), COLLGEN_OK);
  cr_expect_eq(collgen_deregister_buffer(c, h), COLLGEN_ERR_INVALID_ARG);
  cr_expect_eq(collgen_deregister_buffer(NULL, h), COLLGEN_ERR_INVALID_ARG);
  collgen_comm_destroy(c); /* releases the first registration */
}
