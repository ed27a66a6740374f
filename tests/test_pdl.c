/*
** test_pdl.c -- the communicator's `pdl` option on the stand-in driver
** (tests/fake_cuda.c records how each kernel was launched): every op's
** launches carry the programmatic-stream-serialization attribute with the
** option and none without it; the option is refused below sm_90, with a
** value other than 0 or 1, and with several ranks on one GPU. The kernels'
** side (griddepcontrol) is in every rendered kernel (tests/golden) and runs
** in the GPU tests (test_gpu_pdl.c, the pdl suite of test_gpu).
*/
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "collgen.h"
#include "devbuf.h"
#include "rank_fork.h" /* the stand-in driver and a fresh cache folder per test */

TestSuite(pdl, .init = rank_fork_setup, .fini = rank_fork_teardown);

/* collgen_comm_create over devices 0..n-1 with options.pdl = pdl; returns
** its code, the communicator in *c. */
static int create(collgen_comm_t **c, int n, int pdl, int shared) {
  int devices[8] = {0, 1, 2, 3, 4, 5, 6, 7}, same[8] = {0};
  collgen_comm_options_t o;
  collgen_comm_options_init(&o);
  o.cache_dir = cache_dir;
  o.pdl = pdl;
  o.allow_shared_devices = shared;
  return collgen_comm_create(c, n, shared ? same : devices, &o);
}

/* One call of each op on 2 ranks (buffers are host memory here; the
** stand-in runs no kernel); returns the launches they made. */
static long launch_every_op(collgen_comm_t *c) {
  enum { ROWS = 4, COLS = 1024, BYTES = ROWS * COLS * 2 * 2 };
  void *buf[2][6];
  collgen_stream_t s[2];
  for (int r = 0; r < 2; ++r) {
    cr_assert_eq(collgen__dev_stream_create(c, r, &s[r]), COLLGEN_OK);
    for (int k = 0; k < 6; ++k) cr_assert(buf[r][k] = aligned_alloc(256, BYTES));
  }
  int64_t n = ROWS * COLS, shard[2] = {ROWS / 2, COLS}, rr[2] = {ROWS, COLS};
  const int64_t *ar_shapes[2] = {&n, &n}, *shards[2] = {shard, shard}, *rr_shapes[2] = {rr, rr};
  const void *in[2] = {buf[0][0], buf[1][0]}, *res[2] = {buf[0][1], buf[1][1]};
  const void *gamma[2] = {buf[0][2], buf[1][2]};
  void *out[2] = {buf[0][3], buf[1][3]}, *normed[2] = {buf[0][4], buf[1][4]};
  void *resid[2] = {buf[0][5], buf[1][5]};
  memset(stats, 0, sizeof *stats);
  cr_assert_eq(collgen_allreduce_sum(c, COLLGEN_DTYPE_BF16, 1, ar_shapes, in, out, 0, s),
               COLLGEN_OK, "%s", collgen_comm_last_error(c));
  cr_assert_eq(collgen_allgather_rmsnorm(c, COLLGEN_DTYPE_BF16, 2, shards, in, normed, resid,
                                         gamma, 1e-6f, 0.0f, 0, s),
               COLLGEN_OK, "%s", collgen_comm_last_error(c));
  cr_assert_eq(collgen_allreduce_residual_rmsnorm(c, COLLGEN_DTYPE_BF16, 2, rr_shapes, in, res,
                                                  normed, resid, gamma, 1e-6f, 0.0f, 0, s),
               COLLGEN_OK, "%s", collgen_comm_last_error(c));
  const long launched = stats->launches;
  for (int r = 0; r < 2; ++r) {
    collgen__dev_stream_destroy(c, r, s[r]);
    for (int k = 0; k < 6; ++k) free(buf[r][k]);
  }
  return launched;
}

Test(pdl, every_launch_carries_the_attribute_only_with_the_option) {
  for (int pdl = 0; pdl <= 1; ++pdl) {
    collgen_comm_t *c = NULL;
    cr_assert_eq(create(&c, 2, pdl, 0), COLLGEN_OK, "%s", collgen_last_error());
    const long n = launch_every_op(c);
    cr_expect_eq(n, 6, "three ops on two ranks");
    for (long i = 0; i < n; ++i)
      cr_expect_eq(stats->log[i].pdl, pdl, "pdl %d: launch %ld (%s)", pdl, i,
                   stats->log[i].kernel);
    cr_expect_eq(stats->wrong_context, 0);
    collgen_comm_destroy(c);
  }
}

Test(pdl, refused_below_sm_90_with_bad_values_and_shared_gpus) {
  collgen_comm_t *c = (collgen_comm_t *)1;
  cr_expect_eq(create(&c, 2, 2, 0), COLLGEN_ERR_INVALID_ARG);
  cr_expect(strstr(collgen_last_error(), "pdl must be 0 or 1, got 2"), "%s", collgen_last_error());
  cr_expect_null(c);
  cr_expect_eq(create(&c, 2, -1, 0), COLLGEN_ERR_INVALID_ARG);
  cr_expect_eq(create(&c, 2, 1, 1), COLLGEN_ERR_INVALID_ARG);
  cr_expect(strstr(collgen_last_error(), "pdl needs one rank per GPU"), "%s", collgen_last_error());
  cr_expect_eq(create(&c, 2, 0, 1), COLLGEN_OK, "shared GPUs without pdl: %s",
               collgen_last_error());
  collgen_comm_destroy(c);
  setenv("FAKE_CUDA_SM", "89", 1);
  c = (collgen_comm_t *)1;
  cr_expect_eq(create(&c, 2, 1, 0), COLLGEN_ERR_UNSUPPORTED);
  cr_expect(strstr(collgen_last_error(), "device 0 is sm_89; the pdl option needs sm_90"), "%s",
            collgen_last_error());
  cr_expect_null(c);
  cr_expect_eq(create(&c, 2, 0, 0), COLLGEN_OK, "sm_89 without pdl: %s", collgen_last_error());
  collgen_comm_destroy(c);
}
