/*
** test_gpu_residual.c -- allreduce_residual_rmsnorm on real GPUs against
** the CPU reference (part of the test_gpu binary; helpers in test_gpu.h).
**
** Every run makes fresh random x (per rank) and residual_in and gamma (per
** group, the same on each of its ranks: the op's precondition), poisons the
** outputs and a margin of MARGIN elements around every buffer (0xff: NaN in
** every dtype), and checks every rank: residual_out bit for bit against the
** reference, normed within collgen__ref_close's bound and bitwise equal to
** the group's first rank, x unchanged, nothing written in the margins. A
** rerun on the same inputs must give the same normed bits. Shapes reach
** every algorithm (ll, oneshot, rowsplit), rows held in registers or
** looped, 16-byte vectors or scalars, in place or not; each failure names
** the planned kernel, and the sweep asserts which kernels it reached.
*/
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collgen.h"
#include "dtype_convert.h"
#include "reference.h"
#include "test_gpu.h"

#define MARGIN 16 /* poisoned elements before and after every buffer */
#define POISON 0xff

enum { X, RES_IN, RES_OUT, NORMED, GAMMA, NBUF };

typedef struct {
  collgen_comm_t *c;
  collgen_dtype_t dt;
  int group;                /* ranks per group, resolved (never 0) */
  int64_t rows, cols, n;    /* n = rows * cols */
  int inplace;              /* residual_out is residual_in */
  int misalign;             /* element offset of every pointer (1: not 16-byte aligned) */
  float eps, offset;
  void *alloc[8][NBUF];     /* MARGIN + misalign + elements + MARGIN each */
  void *dev[8][NBUF];       /* the pointers the op gets */
  void *hx[8];              /* x of each rank */
  void *hres[8], *hgamma[8]; /* residual_in and gamma of each group (by group index) */
  void *first_normed[8];    /* normed of each group's first rank, first run */
  collgen_stream_t streams[8];
  char kernel[96], algo[16];
} rr_case;

static size_t esize_of(const rr_case *t) { return (size_t)collgen__dtype_bytes(t->dt); }

static int64_t elems_of(const rr_case *t, int k) { return k == GAMMA ? t->cols : t->n; }

static size_t alloc_bytes(const rr_case *t, int k) {
  return (size_t)(2 * MARGIN + t->misalign + elems_of(t, k)) * esize_of(t);
}

/* The planned kernel of the call, for messages and the coverage check. */
static void plan_name(rr_case *t) {
  collgen_shape_t s;
  collgen_shape_init(&s, COLLGEN_OP_ALLREDUCE_RESIDUAL_RMSNORM);
  s.dtype = t->dt;
  s.ngpus = t->c->ndev;
  s.group_size = t->group;
  s.rows = t->rows;
  s.cols = t->cols;
  s.aligned16 = t->misalign == 0;
  s.max_blocks = t->c->max_blocks;
  snprintf(s.arch, sizeof s.arch, "%s", t->c->arch[0]);
  collgen_plan_t plan;
  cr_assert_eq(collgen_plan(t->c->gen, &s, &plan), COLLGEN_OK, "%s",
               collgen_generator_last_error(t->c->gen));
  snprintf(t->kernel, sizeof t->kernel, "%s", plan.kernel);
  snprintf(t->algo, sizeof t->algo, "%s", plan.algo);
}

static void rr_setup(rr_case *t) {
  const size_t es = esize_of(t);
  t->n = t->rows * t->cols;
  make_streams(t->c, t->streams);
  for (int r = 0; r < t->c->ndev; ++r) {
    for (int k = 0; k < NBUF; ++k) {
      if (k == RES_OUT && t->inplace) continue;
      cr_assert_eq(collgen__dev_alloc(t->c, r, alloc_bytes(t, k), &t->alloc[r][k]), COLLGEN_OK,
                   "%s", t->c->err);
      t->dev[r][k] = (char *)t->alloc[r][k] + (size_t)(MARGIN + t->misalign) * es;
    }
    if (t->inplace) t->dev[r][RES_OUT] = t->dev[r][RES_IN];
    t->hx[r] = malloc((size_t)t->n * es + 1);
    t->hres[r] = malloc((size_t)t->n * es + 1);
    t->hgamma[r] = malloc((size_t)t->cols * es + 1);
    cr_assert(t->hx[r] && t->hres[r] && t->hgamma[r]);
  }
  plan_name(t);
}

static void rr_teardown(rr_case *t) {
  for (int r = 0; r < t->c->ndev; ++r) {
    for (int k = 0; k < NBUF; ++k) collgen__dev_free(t->c, r, t->alloc[r][k]);
    free(t->hx[r]);
    free(t->hres[r]);
    free(t->hgamma[r]);
    free(t->first_normed[r]);
  }
  free_streams(t->c, t->streams);
}

/* Poisons every buffer of every rank and uploads the host inputs into them
** (residual_in and gamma from the rank's group). */
static void rr_upload(rr_case *t) {
  const size_t es = esize_of(t);
  for (int r = 0; r < t->c->ndev; ++r) {
    const int grp = r / t->group;
    for (int k = 0; k < NBUF; ++k)
      if (t->alloc[r][k])
        cr_assert_eq(collgen__dev_fill(t->c, r, t->alloc[r][k], POISON, alloc_bytes(t, k)),
                     COLLGEN_OK);
    cr_assert_eq(collgen__dev_upload(t->c, r, t->dev[r][X], t->hx[r], (size_t)t->n * es),
                 COLLGEN_OK);
    cr_assert_eq(collgen__dev_upload(t->c, r, t->dev[r][RES_IN], t->hres[grp], (size_t)t->n * es),
                 COLLGEN_OK);
    cr_assert_eq(collgen__dev_upload(t->c, r, t->dev[r][GAMMA], t->hgamma[grp],
                                     (size_t)t->cols * es), COLLGEN_OK);
  }
}

/* Fresh random inputs, then rr_upload. */
static void rr_fill(rr_case *t) {
  for (int r = 0; r < t->c->ndev; ++r) {
    fill_random(t->dt, t->hx[r], t->n);
    if (r % t->group == 0) {
      fill_random(t->dt, t->hres[r / t->group], t->n);
      fill_random(t->dt, t->hgamma[r / t->group], t->cols);
    }
  }
  rr_upload(t);
}

static int rr_call(rr_case *t) {
  int64_t shape[2] = {t->rows, t->cols};
  const int64_t *shapes[8];
  const void *x[8], *res_in[8], *gamma[8];
  void *res_out[8], *normed[8];
  for (int r = 0; r < t->c->ndev; ++r) {
    shapes[r] = shape;
    x[r] = t->dev[r][X];
    res_in[r] = t->dev[r][RES_IN];
    res_out[r] = t->dev[r][RES_OUT];
    normed[r] = t->dev[r][NORMED];
    gamma[r] = t->dev[r][GAMMA];
  }
  return collgen_allreduce_residual_rmsnorm(t->c, t->dt, 2, shapes, x, res_in, normed, res_out,
                                            gamma, t->eps, t->offset, t->group, t->streams);
}

/* `calls` calls back to back on every rank's stream, then a sync. */
static void rr_run(rr_case *t, int calls) {
  for (int i = 0; i < calls; ++i)
    cr_assert_eq(rr_call(t), COLLGEN_OK, "%s: %s", t->kernel, collgen_comm_last_error(t->c));
  cr_assert_eq(collgen__dev_sync_all(t->c, t->streams), COLLGEN_OK, "%s: %s", t->kernel,
               t->c->err);
}

/* Index of the first differing element of two buffers of n elements. */
static int64_t first_diff(const rr_case *t, const void *a, const void *b) {
  const size_t es = esize_of(t);
  int64_t i = 0;
  while (i < t->n && memcmp((const char *)a + i * (int64_t)es, (const char *)b + i * (int64_t)es, es) == 0)
    ++i;
  return i;
}

/* Every byte of buffer k's margins on rank r still holds the poison. */
static void check_margins(rr_case *t, int r, int k, const char *what) {
  const size_t bytes = alloc_bytes(t, k), es = esize_of(t);
  unsigned char *h = malloc(bytes);
  cr_assert(h);
  cr_assert_eq(collgen__dev_download(t->c, r, h, t->alloc[r][k], bytes), COLLGEN_OK);
  const size_t lo = (size_t)(MARGIN + t->misalign) * es, hi = lo + (size_t)elems_of(t, k) * es;
  for (size_t i = 0; i < bytes; ++i)
    if ((i < lo || i >= hi) && h[i] != POISON)
      cr_assert_fail("%s: rank %d wrote %s byte %lld outside the tensor", t->kernel, r, what,
                     (long long)i - (long long)lo);
  free(h);
}

/* Checks every rank after `calls` calls on the uploaded inputs (in place,
** each call adds the sum to the residual again). The first time, keeps
** each group's normed; later times, requires the same bits. */
static void rr_verify(rr_case *t, int calls) {
  const size_t es = esize_of(t), bytes = (size_t)t->n * es;
  const float off = collgen__dtype_round(t->dt, t->offset);
  void *ref_res = malloc(bytes + 1), *ref_norm = malloc(bytes + 1), *got = malloc(bytes + 1);
  cr_assert(ref_res && ref_norm && got);
  for (int base = 0; base < t->c->ndev; base += t->group) {
    const int grp = base / t->group;
    memcpy(ref_res, t->hres[grp], bytes);
    for (int i = 0; i < (t->inplace ? calls : 1); ++i)
      collgen__ref_allreduce_residual_rmsnorm(t->dt, t->group, t->rows, t->cols,
                                              (const void *const *)&t->hx[base],
                                              t->inplace ? ref_res : t->hres[grp],
                                              t->hgamma[grp], t->eps, off, ref_norm, ref_res);
    for (int r = base; r < base + t->group; ++r) {
      cr_assert_eq(collgen__dev_download(t->c, r, got, t->dev[r][RES_OUT], bytes), COLLGEN_OK);
      if (memcmp(got, ref_res, bytes) != 0) {
        int64_t i = first_diff(t, got, ref_res);
        cr_assert_fail("%s (dtype %s rows %lld cols %lld group %d in place %d): rank %d "
                       "residual_out element %lld: got %.9g want %.9g", t->kernel,
                       collgen__dtype_name(t->dt), (long long)t->rows, (long long)t->cols,
                       t->group, t->inplace, r, (long long)i, collgen__ref_load(t->dt, got, i),
                       collgen__ref_load(t->dt, ref_res, i));
      }
      cr_assert_eq(collgen__dev_download(t->c, r, got, t->dev[r][NORMED], bytes), COLLGEN_OK);
      for (int64_t row = 0; row < t->rows; ++row) {
        double scale = collgen__ref_rmsnorm_scale(t->dt, ref_res, row, t->cols, t->eps);
        for (int64_t k = 0; k < t->cols; ++k) {
          int64_t i = row * t->cols + k;
          double exact = collgen__ref_load(t->dt, ref_res, i) * scale *
                         ((double)collgen__ref_load(t->dt, t->hgamma[grp], k) + (double)off);
          double v = collgen__ref_load(t->dt, got, i);
          if (!collgen__ref_close(t->dt, v, exact))
            cr_assert_fail("%s (dtype %s rows %lld cols %lld group %d): rank %d normed row %lld "
                           "col %lld: got %.9g want %.9g", t->kernel, collgen__dtype_name(t->dt),
                           (long long)t->rows, (long long)t->cols, t->group, r, (long long)row,
                           (long long)k, v, exact);
        }
      }
      if (!t->first_normed[r]) {
        t->first_normed[r] = malloc(bytes + 1);
        cr_assert(t->first_normed[r]);
        memcpy(t->first_normed[r], got, bytes);
      } else {
        cr_assert(memcmp(got, t->first_normed[r], bytes) == 0,
                  "%s: rank %d: a rerun on the same inputs changed normed (element %lld)",
                  t->kernel, r, (long long)first_diff(t, got, t->first_normed[r]));
      }
      cr_assert(memcmp(got, t->first_normed[base], bytes) == 0,
                "%s: normed of rank %d differs from rank %d (element %lld)", t->kernel, r, base,
                (long long)first_diff(t, got, t->first_normed[base]));
      cr_assert_eq(collgen__dev_download(t->c, r, got, t->dev[r][X], bytes), COLLGEN_OK);
      cr_assert(memcmp(got, t->hx[r], bytes) == 0, "%s: rank %d: x was modified", t->kernel, r);
      check_margins(t, r, t->inplace ? RES_IN : RES_OUT, "residual_out");
      check_margins(t, r, NORMED, "normed");
    }
  }
  free(ref_res);
  free(ref_norm);
  free(got);
}

/* Counts which kernels the checks reached (coverage of the sweep). */
static char reached[256][96];
static int nreached;

static void note_kernel(const rr_case *t) {
  for (int i = 0; i < nreached; ++i)
    if (strcmp(reached[i], t->kernel) == 0) return;
  if (nreached < 256) snprintf(reached[nreached++], 96, "%s", t->kernel);
}

static int reached_matching(const char *a, const char *b) {
  int n = 0;
  for (int i = 0; i < nreached; ++i) n += strstr(reached[i], a) && strstr(reached[i], b);
  return n;
}

/* Fresh inputs, `calls` calls, check; then the same inputs again (the
** residual re-uploaded when in place) must give the same bits. */
static void rr_check(collgen_comm_t *c, collgen_dtype_t dt, int group, int64_t rows, int64_t cols,
                     int inplace, int misalign, int calls) {
  rr_case t;
  memset(&t, 0, sizeof t);
  t.c = c;
  t.dt = dt;
  t.group = group ? group : c->ndev;
  t.rows = rows;
  t.cols = cols;
  t.inplace = inplace;
  t.misalign = misalign;
  t.eps = 1e-6f;
  t.offset = dt == COLLGEN_DTYPE_F16 ? 1.0f : 0.0f;
  rr_setup(&t);
  note_kernel(&t);
  rr_fill(&t);
  rr_run(&t, calls);
  rr_verify(&t, calls);
  rr_upload(&t);
  rr_run(&t, calls);
  rr_verify(&t, calls);
  rr_teardown(&t);
}

static const int64_t RR_COLS[] = {1, 7, 100, 1000, 4095, 4096, 5120, 8192, 16384, 40000};
#define LL_BYTES (256 << 10) /* the LL and one-shot size of the planner */

/* Per cols and dtype: 1 and 3 rows, the most rows of the LL / one-shot size
** and one more, and about 4 MB (an odd count). */
Test(residual_rmsnorm, two_ranks_every_dtype_cols_and_algorithm, .timeout = 2400) {
  collgen_comm_t *c = make_comm(2, 0, 0, 0);
  for (int dt = 0; dt < 3; ++dt)
    for (size_t k = 0; k < sizeof RR_COLS / sizeof RR_COLS[0]; ++k) {
      const int64_t cols = RR_COLS[k], row_bytes = cols * collgen__dtype_bytes((collgen_dtype_t)dt);
      const int64_t most = LL_BYTES / row_bytes;
      const int64_t rows[] = {1, 3, most, most + 1, ((4 << 20) / row_bytes) | 1};
      for (size_t i = 0; i < sizeof rows / sizeof rows[0]; ++i) {
        if (rows[i] < 1 || (i > 0 && rows[i] == rows[i - 1])) continue;
        rr_check(c, (collgen_dtype_t)dt, 0, rows[i], cols, (int)(i % 2), 0, 1);
        if (i == 2 || i == 4) rr_check(c, (collgen_dtype_t)dt, 0, rows[i], cols, 0, 1, 1);
      }
    }
  collgen_comm_destroy(c);
  for (int i = 0; i < nreached; ++i) cr_log_info("reached %s", reached[i]);
  cr_expect_gt(reached_matching("_ll_u", "_v8_"), 0, "no LL kernel was reached");
  cr_expect_gt(reached_matching("_oneshot_u", "_v1_"), 0, "no scalar one-shot kernel");
  cr_expect_gt(reached_matching("_oneshot_loop", ""), 0, "no looped one-shot kernel");
  cr_expect_gt(reached_matching("_rowsplit_u", "_v8_"), 0, "no vector row-split kernel");
  cr_expect_gt(reached_matching("_rowsplit_u", "_v1_"), 0, "no scalar row-split kernel");
  cr_expect_gt(reached_matching("_rowsplit_loop", ""), 0, "no looped row-split kernel");
}

/* Zero rows or zero cols: success, nothing launched, nothing written. */
Test(residual_rmsnorm, empty_calls_write_nothing, .timeout = 120) {
  collgen_comm_t *c = make_comm(2, 0, 0, 0);
  collgen_stream_t s[2];
  make_streams(c, s);
  void *buf[2][NBUF];
  for (int r = 0; r < 2; ++r)
    for (int k = 0; k < NBUF; ++k) {
      cr_assert_eq(collgen__dev_alloc(c, r, 4096, &buf[r][k]), COLLGEN_OK);
      cr_assert_eq(collgen__dev_fill(c, r, buf[r][k], POISON, 4096), COLLGEN_OK);
    }
  int64_t no_rows[2] = {0, 4096}, no_cols[3] = {5, 3, 0};
  const int64_t *a[2] = {no_rows, no_rows}, *b[2] = {no_cols, no_cols};
  const void *x[2] = {buf[0][X], buf[1][X]}, *ri[2] = {buf[0][RES_IN], buf[1][RES_IN]};
  const void *gm[2] = {buf[0][GAMMA], buf[1][GAMMA]};
  void *ro[2] = {buf[0][RES_OUT], buf[1][RES_OUT]}, *nm[2] = {buf[0][NORMED], buf[1][NORMED]};
  cr_expect_eq(collgen_allreduce_residual_rmsnorm(c, COLLGEN_DTYPE_BF16, 2, a, x, ri, nm, ro, gm,
                                                  1e-6f, 0.0f, 0, s), COLLGEN_OK, "%s",
               collgen_comm_last_error(c));
  cr_expect_eq(collgen_allreduce_residual_rmsnorm(c, COLLGEN_DTYPE_F32, 3, b, x, ri, nm, ro, gm,
                                                  1e-6f, 0.0f, 1, s), COLLGEN_OK, "%s",
               collgen_comm_last_error(c));
  cr_assert_eq(collgen__dev_sync_all(c, s), COLLGEN_OK, "%s", c->err);
  unsigned char h[4096];
  for (int r = 0; r < 2; ++r)
    for (int k = 0; k < NBUF; ++k) {
      cr_assert_eq(collgen__dev_download(c, r, h, buf[r][k], sizeof h), COLLGEN_OK);
      for (size_t i = 0; i < sizeof h; ++i)
        cr_assert_eq(h[i], POISON, "rank %d buffer %d byte %zu written", r, k, i);
      collgen__dev_free(c, r, buf[r][k]);
    }
  free_streams(c, s);
  collgen_comm_destroy(c);
}

/* Every group size of 4 and 8 ranks mapped onto the GPUs: LL, row split
** with uneven and empty slices (5 rows over 8 ranks), unaligned, groups of
** one (still a kernel), f32 LL at 8 ranks (the kernel at the register
** limit). */
Test(residual_rmsnorm, four_and_eight_ranks_every_group_size, .timeout = 2400) {
  collgen_comm_t *c4 = make_comm(4, 4, 0, 0);
  for (int g = 1; g <= 4; g *= 2) {
    rr_check(c4, COLLGEN_DTYPE_BF16, g, 7, 4096, 1, 0, 1);
    rr_check(c4, COLLGEN_DTYPE_BF16, g, 301, 4096, 0, 0, 1);
    rr_check(c4, COLLGEN_DTYPE_F32, g, 5, 1000, 1, 1, 1);
  }
  collgen_comm_destroy(c4);
  collgen_comm_t *c8 = make_comm(8, 4, 0, 0);
  for (int g = 1; g <= 8; g *= 2) {
    rr_check(c8, COLLGEN_DTYPE_BF16, g, 5, 8192, 1, 0, 1);
    rr_check(c8, COLLGEN_DTYPE_F16, g, 67, 8192, 0, 0, 1);
    rr_check(c8, COLLGEN_DTYPE_F32, g, 3, 8192, 0, 0, 1);
    rr_check(c8, COLLGEN_DTYPE_BF16, g, 5, 40000, 1, 0, 1);
  }
  collgen_comm_destroy(c8);
}

/* Calls back to back without a sync in between, in place (the residual
** accumulates every call; the reference repeats it): LL epochs and barrier
** counters must stay in step, and no rank may run ahead. */
Test(residual_rmsnorm, back_to_back_calls, .timeout = 900) {
  collgen_comm_t *c = make_comm(2, 0, 0, 0);
  rr_check(c, COLLGEN_DTYPE_BF16, 0, 8, 4096, 1, 0, 200); /* LL */
  rr_check(c, COLLGEN_DTYPE_BF16, 0, 8, 4096, 0, 0, 200);
  rr_check(c, COLLGEN_DTYPE_F32, 0, 301, 4096, 1, 0, 50);  /* row split */
  rr_check(c, COLLGEN_DTYPE_F16, 0, 9, 8192, 1, 1, 50);    /* scalar one-shot */
  collgen_comm_destroy(c);
}

/* The fused op interleaved with the other ops and other group sizes on one
** communicator: the LL epochs and barrier counters are shared per pair. */
Test(residual_rmsnorm, interleaved_with_other_ops_and_groups, .timeout = 900) {
  collgen_comm_t *c = make_comm(4, 4, 0, 0);
  int64_t rows[4] = {3, 0, 5, 1};
  for (int round = 0; round < 3; ++round) {
    rr_check(c, COLLGEN_DTYPE_BF16, 2, 8, 4096, 1, 0, 1);       /* LL, pairs */
    ar_check(c, COLLGEN_DTYPE_BF16, 1001, 4, 0, 0, 1);           /* LL allreduce, all four */
    rr_check(c, COLLGEN_DTYPE_BF16, 4, 301, 4096, 1, 0, 1);     /* row split, all four */
    rms_check(c, COLLGEN_DTYPE_BF16, 2, rows, 1024, 1e-6f, 1.0f); /* LL allgather, pairs */
    rr_check(c, COLLGEN_DTYPE_F32, 4, 4, 2048, 0, 0, 1);        /* LL, all four */
    ar_check(c, COLLGEN_DTYPE_F32, 300007, 2, 0, 0, 1);          /* two-shot, pairs */
  }
  collgen_comm_destroy(c);
}

/* Captures one call per rank into a graph, then replays it 50 times with
** fresh inputs (uploaded into the same buffers) and checks every replay. */
static void rr_graph_check(int64_t rows, int64_t cols, int inplace, int misalign) {
  collgen_comm_t *c = make_comm(2, 0, 0, 0);
  rr_case t;
  memset(&t, 0, sizeof t);
  t.c = c;
  t.dt = COLLGEN_DTYPE_BF16;
  t.group = 2;
  t.rows = rows;
  t.cols = cols;
  t.inplace = inplace;
  t.misalign = misalign;
  t.eps = 1e-5f;
  t.offset = 1.0f;
  rr_setup(&t);
  rr_fill(&t);
  rr_run(&t, 1); /* eager first: loads the modules */
  rr_verify(&t, 1);
  CUgraph graph[2];
  CUgraphExec exec[2];
  graph_capture_begin(c, t.streams);
  cr_assert_eq(rr_call(&t), COLLGEN_OK, "%s", collgen_comm_last_error(c));
  graph_capture_end(c, t.streams, graph, exec);
  for (int it = 0; it < 50; ++it) {
    rr_fill(&t);
    for (int r = 0; r < 2; ++r) { /* new data: normed may differ from the first run */
      free(t.first_normed[r]);
      t.first_normed[r] = NULL;
    }
    graph_launch(c, t.streams, exec);
    cr_assert_eq(collgen__dev_sync_all(c, t.streams), COLLGEN_OK, "%s", c->err);
    rr_verify(&t, 1);
  }
  graph_destroy(c, graph, exec);
  rr_teardown(&t);
  collgen_comm_destroy(c);
}

Test(residual_rmsnorm, graph_capture_and_replay_with_new_data, .timeout = 900) {
  rr_graph_check(8, 4096, 1, 0);   /* LL, in place: epochs advance on the device */
  rr_graph_check(300, 4096, 1, 0); /* row split: barrier counters */
  rr_graph_check(9, 4096, 0, 1);   /* scalar one-shot */
}

/* A peer that never launches: the waiting rank reports COLLGEN_ERR_TIMEOUT
** naming it, for the LL wait and for the barrier. */
Test(residual_rmsnorm, missing_peer_is_reported_not_hung, .timeout = 120) {
  static const int64_t rows[] = {8, 300}; /* LL, row split */
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; ++i) {
    collgen_comm_t *c = make_comm(2, 0, 300, 0x1); /* launch rank 0 only */
    rr_case t;
    memset(&t, 0, sizeof t);
    t.c = c;
    t.dt = COLLGEN_DTYPE_BF16;
    t.group = 2;
    t.rows = rows[i];
    t.cols = 4096;
    t.eps = 1e-6f;
    rr_setup(&t);
    rr_fill(&t);
    double t0 = collgen__now_ms();
    cr_assert_eq(rr_call(&t), COLLGEN_OK, "%s", collgen_comm_last_error(c));
    int rc = collgen__dev_sync_all(c, t.streams);
    double ms = collgen__now_ms() - t0;
    cr_expect_eq(rc, COLLGEN_ERR_TIMEOUT, "%s: got %s", t.kernel, collgen_status_name(rc));
    cr_expect_lt(ms, 300 + 2000, "%s: gave up after %.0f ms", t.kernel, ms);
    const char *msg = collgen_comm_last_error(c);
    cr_expect(strstr(msg, "rank 0 (device") && strstr(msg, "for rank 1 (device"), "%s: %s",
              t.kernel, msg);
    cr_expect_eq(rr_call(&t), COLLGEN_ERR_TIMEOUT, "%s: the next call reports it too", t.kernel);
    rr_teardown(&t);
    collgen_comm_destroy(c);
  }
}
