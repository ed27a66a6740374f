/*
** test_gpu_pdl.c -- the `pdl` option on real GPUs (sm_90+): chains of calls
** where each call reads what the previous one wrote (the fused op in place:
** residual_out of call k is residual_in of call k+1), launched with
** programmatic dependent launch, eagerly and as one CUDA graph, give the CPU
** reference's bits after every chain. A kernel that touched memory before
** its predecessor completed would read a stale residual. One rank per GPU
** (the option refuses shared GPUs): 2 ranks with two GPUs, else 1.
*/
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "reference.h"
#include "test_gpu.h"

#define CHAIN 12

typedef struct {
  int n;
  int64_t rows, cols, shape[2];
  void *hx[2], *hres, *hgamma;      /* host inputs */
  void *x[2], *res[2], *normed[2], *gamma[2];
} chain_t;

/* One rank per GPU with options.pdl; NULL (test skipped) below sm_90. */
static collgen_comm_t *pdl_comm(int *n) {
  *n = gpu_count() >= 2 ? 2 : 1;
  int devices[2] = {0, 1};
  collgen_comm_options_t o;
  collgen_comm_options_init(&o);
  o.pdl = 1;
  collgen_comm_t *c = NULL;
  int rc = collgen_comm_create(&c, *n, devices, &o);
  if (rc == COLLGEN_ERR_UNSUPPORTED) cr_skip_test("%s", collgen_last_error());
  cr_assert_eq(rc, COLLGEN_OK, "%s", collgen_last_error());
  return c;
}

static void upload_residual(collgen_comm_t *c, chain_t *t) {
  const size_t bytes = (size_t)(t->rows * t->cols) * 2;
  for (int r = 0; r < t->n; ++r) {
    cr_assert_eq(collgen__dev_upload(c, r, t->res[r], t->hres, bytes), COLLGEN_OK);
    cr_assert_eq(collgen__dev_fill(c, r, t->normed[r], 0xff, bytes), COLLGEN_OK);
  }
}

static void issue_chain(collgen_comm_t *c, chain_t *t, const collgen_stream_t *s) {
  const int64_t *shapes[2] = {t->shape, t->shape};
  for (int k = 0; k < CHAIN; ++k)
    cr_assert_eq(collgen_allreduce_residual_rmsnorm(
                     c, COLLGEN_DTYPE_BF16, 2, shapes, (const void *const *)t->x,
                     (const void *const *)t->res, t->normed, t->res,
                     (const void *const *)t->gamma, 1e-6f, 0.0f, 0, s),
                 COLLGEN_OK, "%s", collgen_comm_last_error(c));
}

/* Every rank's residual after the chain equals the reference's bit for
** bit, and its normed (of the last call) is within the rounding model. */
static void check_chain(collgen_comm_t *c, chain_t *t, const char *how) {
  const int64_t n = t->rows * t->cols;
  const size_t bytes = (size_t)n * 2;
  void *want_r = malloc(bytes), *want_n = malloc(bytes), *cur = malloc(bytes), *got = malloc(bytes);
  cr_assert(want_r && want_n && cur && got);
  memcpy(cur, t->hres, bytes);
  for (int k = 0; k < CHAIN; ++k) {
    collgen__ref_allreduce_residual_rmsnorm(COLLGEN_DTYPE_BF16, t->n, t->rows, t->cols,
                                            (const void *const *)t->hx, cur, t->hgamma, 1e-6f,
                                            0.0f, want_n, want_r);
    memcpy(cur, want_r, bytes);
  }
  for (int r = 0; r < t->n; ++r) {
    cr_assert_eq(collgen__dev_download(c, r, got, t->res[r], bytes), COLLGEN_OK);
    for (int64_t i = 0; i < n; ++i)
      if (memcmp((char *)got + 2 * i, (char *)want_r + 2 * i, 2) != 0)
        cr_assert_fail("%s, %lld x %lld: rank %d residual element %lld is %g, the reference %g "
                       "after %d chained calls", how, (long long)t->rows, (long long)t->cols, r,
                       (long long)i, collgen__ref_load(COLLGEN_DTYPE_BF16, got, i),
                       collgen__ref_load(COLLGEN_DTYPE_BF16, want_r, i), CHAIN);
    cr_assert_eq(collgen__dev_download(c, r, got, t->normed[r], bytes), COLLGEN_OK);
    for (int64_t row = 0; row < t->rows; ++row) {
      double scale = collgen__ref_rmsnorm_scale(COLLGEN_DTYPE_BF16, want_r, row, t->cols, 1e-6f);
      for (int64_t k = 0; k < t->cols; ++k) {
        int64_t i = row * t->cols + k;
        double exact = collgen__ref_load(COLLGEN_DTYPE_BF16, want_r, i) * scale *
                       collgen__ref_load(COLLGEN_DTYPE_BF16, t->hgamma, k);
        cr_assert(collgen__ref_close(COLLGEN_DTYPE_BF16,
                                     collgen__ref_load(COLLGEN_DTYPE_BF16, got, i), exact),
                  "%s: rank %d normed row %lld col %lld", how, r, (long long)row, (long long)k);
      }
    }
  }
  free(want_r);
  free(want_n);
  free(cur);
  free(got);
}

/* Decode rows (LL) and a prefill-sized call (the barrier algorithms). */
Test(pdl, chained_calls_wait_for_their_predecessor_eager_and_in_graphs, .timeout = 600) {
  if (gpu_count() < 1) cr_skip_test("no GPU");
  chain_t t;
  memset(&t, 0, sizeof t);
  collgen_comm_t *c = pdl_comm(&t.n);
  collgen_stream_t s[2];
  make_streams(c, s);
  static const int64_t shapes[][2] = {{8, 4096}, {1024, 8192}};
  for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; ++k) {
    t.rows = t.shape[0] = shapes[k][0];
    t.cols = t.shape[1] = shapes[k][1];
    const int64_t n = t.rows * t.cols;
    const size_t bytes = (size_t)n * 2, gbytes = (size_t)t.cols * 2;
    t.hres = malloc(bytes);
    t.hgamma = malloc(gbytes);
    cr_assert(t.hres && t.hgamma);
    fill_random(COLLGEN_DTYPE_BF16, t.hres, n);
    fill_random(COLLGEN_DTYPE_BF16, t.hgamma, t.cols);
    for (int r = 0; r < t.n; ++r) {
      cr_assert(t.hx[r] = malloc(bytes));
      fill_random(COLLGEN_DTYPE_BF16, t.hx[r], n);
      cr_assert_eq(collgen__dev_alloc(c, r, bytes, &t.x[r]), COLLGEN_OK);
      cr_assert_eq(collgen__dev_alloc(c, r, bytes, &t.res[r]), COLLGEN_OK);
      cr_assert_eq(collgen__dev_alloc(c, r, bytes, &t.normed[r]), COLLGEN_OK);
      cr_assert_eq(collgen__dev_alloc(c, r, gbytes, &t.gamma[r]), COLLGEN_OK);
      cr_assert_eq(collgen__dev_upload(c, r, t.x[r], t.hx[r], bytes), COLLGEN_OK);
      cr_assert_eq(collgen__dev_upload(c, r, t.gamma[r], t.hgamma, gbytes), COLLGEN_OK);
    }
    upload_residual(c, &t);
    issue_chain(c, &t, s);
    cr_assert_eq(collgen__dev_sync_all(c, s), COLLGEN_OK, "%s", collgen_comm_last_error(c));
    check_chain(c, &t, "eager");
    CUgraph g[2];
    CUgraphExec ge[2];
    graph_capture_begin(c, s);
    issue_chain(c, &t, s);
    graph_capture_end(c, s, g, ge);
    for (int round = 0; round < 2; ++round) { /* replays start from a fresh residual */
      upload_residual(c, &t);
      graph_launch(c, s, ge);
      cr_assert_eq(collgen__dev_sync_all(c, s), COLLGEN_OK, "%s", collgen_comm_last_error(c));
      check_chain(c, &t, "graph replay");
    }
    graph_destroy(c, g, ge);
    for (int r = 0; r < t.n; ++r) {
      collgen__dev_free(c, r, t.x[r]);
      collgen__dev_free(c, r, t.res[r]);
      collgen__dev_free(c, r, t.normed[r]);
      collgen__dev_free(c, r, t.gamma[r]);
      free(t.hx[r]);
    }
    free(t.hres);
    free(t.hgamma);
  }
  free_streams(c, s);
  collgen_comm_destroy(c);
}
