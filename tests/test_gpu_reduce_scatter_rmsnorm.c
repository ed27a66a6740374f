/*
** test_gpu_reduce_scatter_rmsnorm.c -- reduce_scatter_rmsnorm on real GPUs
** against the CPU reference (part of the test_gpu binary; helpers in
** test_gpu.h). Every run makes fresh random x per rank, residual_in (per
** rank: each rank owns its chunk's residual) and gamma (per group), poisons
** every output and a margin of MARGIN elements around each buffer, and
** checks every rank: its chunk (collgen__scatter_chunk) of residual_out bit
** for bit, normed within collgen__ref_close's bound (FP8: codes and row
** scales by collgen__ref_fp8_row_ok), x unchanged, nothing written outside
** the tensors; a rerun on the same inputs gives the same bits. 2, 4 and 8
** ranks mapped onto the GPUs, every group size, uneven and empty chunks,
** residual_in absent, in place, scalar rows, looped rows, graph replay with
** new data.
*/
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collgen.h"
#include "dtype_convert.h"
#include "reference.h"
#include "shape.h"
#include "test_gpu.h"

#define MARGIN 16 /* poisoned elements before and after every buffer */
#define POISON 0xff

enum { X, RES_IN, RES_OUT, NORMED, GAMMA, SCALES, NBUF };

typedef struct {
  collgen_comm_t *c;
  collgen_dtype_t dt;
  int group;                  /* resolved, never 0 */
  int64_t rows, cols;
  int with_res, inplace, misalign;
  collgen_fp8_mode_t fp8;     /* NORMED holds e4m3 codes unless NONE */
  int64_t start[8], count[8]; /* each rank's chunk */
  void *alloc[8][NBUF], *dev[8][NBUF];
  void *hx[8], *hres[8], *hgamma[8]; /* x and residual_in per rank, gamma per rank (= its group's) */
  void *first[8][2];          /* residual_out and normed of the first run */
  collgen_stream_t streams[8];
} rs_case;

static size_t es_of(const rs_case *t, int k) {
  if (k == SCALES) return sizeof(float);
  if (k == NORMED && t->fp8 != COLLGEN_FP8_NONE) return 1;
  return (size_t)collgen__dtype_bytes(t->dt);
}

static int64_t elems_of(const rs_case *t, int r, int k) {
  return k == X ? t->rows * t->cols : k == GAMMA ? t->cols : k == SCALES ? t->count[r]
                                                                         : t->count[r] * t->cols;
}

static size_t alloc_bytes(const rs_case *t, int r, int k) {
  return (size_t)(2 * MARGIN + t->misalign + elems_of(t, r, k)) * es_of(t, k);
}

static void rs_setup(rs_case *t) {
  make_streams(t->c, t->streams);
  for (int r = 0; r < t->c->ndev; ++r) {
    collgen__scatter_chunk(t->rows, t->group, r % t->group, &t->start[r], &t->count[r]);
    for (int k = 0; k < NBUF; ++k) {
      if ((k == RES_OUT && t->inplace) || (k == SCALES && t->fp8 != COLLGEN_FP8_DYNAMIC))
        continue;
      cr_assert_eq(collgen__dev_alloc(t->c, r, alloc_bytes(t, r, k), &t->alloc[r][k]),
                   COLLGEN_OK, "%s", t->c->err);
      t->dev[r][k] = (char *)t->alloc[r][k] + (size_t)(MARGIN + t->misalign) * es_of(t, k);
    }
    if (t->inplace) t->dev[r][RES_OUT] = t->dev[r][RES_IN];
    t->hx[r] = malloc(alloc_bytes(t, r, X));
    t->hres[r] = malloc(alloc_bytes(t, r, RES_IN));
    t->hgamma[r] = malloc(alloc_bytes(t, r, GAMMA));
    cr_assert(t->hx[r] && t->hres[r] && t->hgamma[r]);
  }
}

static void rs_teardown(rs_case *t) {
  for (int r = 0; r < t->c->ndev; ++r) {
    for (int k = 0; k < NBUF; ++k) collgen__dev_free(t->c, r, t->alloc[r][k]);
    free(t->hx[r]), free(t->hres[r]), free(t->hgamma[r]);
    free(t->first[r][0]), free(t->first[r][1]);
  }
  free_streams(t->c, t->streams);
}

/* Poisons every buffer and uploads the host inputs. */
static void rs_upload(rs_case *t) {
  for (int r = 0; r < t->c->ndev; ++r) {
    for (int k = 0; k < NBUF; ++k)
      if (t->alloc[r][k])
        cr_assert_eq(collgen__dev_fill(t->c, r, t->alloc[r][k], POISON, alloc_bytes(t, r, k)),
                     COLLGEN_OK);
    const void *src[] = {[X] = t->hx[r], [RES_IN] = t->hres[r], [GAMMA] = t->hgamma[r]};
    for (int k = X; k <= GAMMA; ++k)
      if (src[k])
        cr_assert_eq(collgen__dev_upload(t->c, r, t->dev[r][k], src[k],
                                         (size_t)elems_of(t, r, k) * es_of(t, k)), COLLGEN_OK);
  }
}

/* Fresh inputs (gamma the same on every rank of a group), then rs_upload. */
static void rs_fill(rs_case *t) {
  for (int r = 0; r < t->c->ndev; ++r) {
    fill_random(t->dt, t->hx[r], t->rows * t->cols);
    fill_random(t->dt, t->hres[r], t->count[r] * t->cols);
    if (r % t->group == 0) fill_random(t->dt, t->hgamma[r], t->cols);
    else memcpy(t->hgamma[r], t->hgamma[r - r % t->group], (size_t)t->cols * es_of(t, GAMMA));
  }
  rs_upload(t);
}

static int rs_call(rs_case *t) {
  int64_t shape[2] = {t->rows, t->cols};
  const int64_t *shapes[8];
  const void *x[8], *ri[8], *gamma[8];
  void *ro[8], *normed[8];
  float *scales[8];
  for (int r = 0; r < t->c->ndev; ++r) {
    shapes[r] = shape;
    x[r] = t->dev[r][X];
    ri[r] = t->dev[r][RES_IN];
    ro[r] = t->dev[r][RES_OUT];
    normed[r] = t->dev[r][NORMED];
    gamma[r] = t->dev[r][GAMMA];
    scales[r] = t->dev[r][SCALES];
  }
  if (t->fp8 == COLLGEN_FP8_NONE)
    return collgen_reduce_scatter_rmsnorm(t->c, t->dt, 2, shapes, x, t->with_res ? ri : NULL,
                                          normed, ro, gamma, 1e-6f, 1.0f, t->group, t->streams);
  return collgen_reduce_scatter_rmsnorm_fp8(
      t->c, t->dt, 2, shapes, x, t->with_res ? ri : NULL, normed,
      t->fp8 == COLLGEN_FP8_DYNAMIC ? scales : NULL, ro, gamma, 1e-6f, 1.0f, t->fp8,
      t->fp8 == COLLGEN_FP8_STATIC ? 0.01f : 0.0f, t->group, t->streams);
}

/* Downloads buffer k of rank r whole (margins included) into a new block
** and checks the margins still hold the poison. */
static unsigned char *fetch(rs_case *t, int r, int k, const char *what) {
  const size_t bytes = alloc_bytes(t, r, k), lo = (size_t)(MARGIN + t->misalign) * es_of(t, k);
  const size_t hi = lo + (size_t)elems_of(t, r, k) * es_of(t, k);
  unsigned char *h = malloc(bytes);
  cr_assert(h);
  cr_assert_eq(collgen__dev_download(t->c, r, h, t->alloc[r][k], bytes), COLLGEN_OK);
  for (size_t i = 0; i < bytes; ++i)
    if ((i < lo || i >= hi) && h[i] != POISON)
      cr_assert_fail("rank %d wrote %s byte %lld outside its chunk (rows %lld cols %lld group %d)",
                     r, what, (long long)i - (long long)lo, (long long)t->rows, (long long)t->cols,
                     t->group);
  return h;
}

/* Keeps output j of rank r from the first run; later runs must match it. */
static void same_bits(rs_case *t, int r, int j, const void *got, size_t bytes, const char *what) {
  if (!t->first[r][j]) {
    t->first[r][j] = malloc(bytes + 1);
    memcpy(t->first[r][j], got, bytes);
  } else {
    cr_assert(memcmp(got, t->first[r][j], bytes) == 0, "rank %d: a rerun changed %s", r, what);
  }
}

static void rs_verify(rs_case *t) {
  const float off = collgen__dtype_round(t->dt, 1.0f);
  for (int r = 0; r < t->c->ndev; ++r) {
    const int base = r - r % t->group;
    const size_t es = es_of(t, X), bytes = (size_t)(t->count[r] * t->cols) * es;
    void *ref = malloc(bytes + 1), *ref_norm = malloc(bytes + 1);
    collgen__ref_reduce_scatter_rmsnorm(t->dt, t->group, r - base, t->rows, t->cols,
                                        (const void *const *)&t->hx[base],
                                        t->with_res ? t->hres[r] : NULL, t->hgamma[r], 1e-6f, off,
                                        ref_norm, ref);
    const size_t lo = (size_t)(MARGIN + t->misalign) * es;
    unsigned char *ro = fetch(t, r, t->inplace ? RES_IN : RES_OUT, "residual_out");
    if (memcmp(ro + lo, ref, bytes) != 0)
      cr_assert_fail("rows %lld cols %lld group %d residual %d in place %d: rank %d residual_out "
                     "differs from the reference", (long long)t->rows, (long long)t->cols,
                     t->group, t->with_res, t->inplace, r);
    same_bits(t, r, 0, ro + lo, bytes, "residual_out");
    unsigned char *nrm = fetch(t, r, NORMED, "normed");
    const unsigned char *n = nrm + (size_t)(MARGIN + t->misalign) * es_of(t, NORMED);
    float *scales = NULL;
    unsigned char *sc = t->fp8 == COLLGEN_FP8_DYNAMIC ? fetch(t, r, SCALES, "row_scales") : NULL;
    if (sc) scales = (float *)(sc + (size_t)(MARGIN + t->misalign) * sizeof(float));
    for (int64_t row = 0; row < t->count[r]; ++row) {
      if (t->fp8 != COLLGEN_FP8_NONE) {
        int64_t col = 0;
        cr_assert(collgen__ref_fp8_row_ok(t->dt, ref, t->hgamma[r], row, t->cols, 1e-6f, off,
                                          t->fp8, 0.01f, n + row * t->cols,
                                          scales ? scales[row] : 0.0f, &col),
                  "rank %d row %lld: FP8 output wrong at col %lld", r, (long long)row,
                  (long long)col);
        continue;
      }
      const double scale = collgen__ref_rmsnorm_scale(t->dt, ref, row, t->cols, 1e-6f);
      for (int64_t k = 0; k < t->cols; ++k) {
        const int64_t i = row * t->cols + k;
        const double exact = collgen__ref_load(t->dt, ref, i) * scale *
                             ((double)collgen__ref_load(t->dt, t->hgamma[r], k) + (double)off);
        const double v = collgen__ref_load(t->dt, n, i);
        if (!collgen__ref_close(t->dt, v, exact))
          cr_assert_fail("rows %lld cols %lld group %d: rank %d normed row %lld col %lld: got "
                         "%.9g want %.9g", (long long)t->rows, (long long)t->cols, t->group, r,
                         (long long)row, (long long)k, v, exact);
      }
    }
    same_bits(t, r, 1, n, (size_t)elems_of(t, r, NORMED) * es_of(t, NORMED), "normed");
    unsigned char *x = fetch(t, r, X, "x");
    cr_assert(memcmp(x + lo, t->hx[r], (size_t)(t->rows * t->cols) * es) == 0,
              "rank %d: x was modified", r);
    free(x), free(nrm), free(sc), free(ro), free(ref), free(ref_norm);
  }
}

static void rs_init(rs_case *t, collgen_comm_t *c, collgen_dtype_t dt, int group, int64_t rows,
                    int64_t cols) {
  memset(t, 0, sizeof *t);
  t->c = c;
  t->dt = dt;
  t->group = group ? group : c->ndev;
  t->rows = rows;
  t->cols = cols;
  t->with_res = 1;
}

/* Fresh inputs, a call, the check; then the same inputs again must give
** the same bits (the residual re-uploaded when in place). */
static void rs_check_case(rs_case *t) {
  rs_setup(t);
  for (int run = 0; run < 2; ++run) {
    if (run == 0) rs_fill(t);
    else rs_upload(t);
    cr_assert_eq(rs_call(t), COLLGEN_OK, "%s", collgen_comm_last_error(t->c));
    cr_assert_eq(collgen__dev_sync_all(t->c, t->streams), COLLGEN_OK, "%s", t->c->err);
    rs_verify(t);
  }
  rs_teardown(t);
}

static void rs_check(collgen_comm_t *c, collgen_dtype_t dt, int group, int64_t rows, int64_t cols,
                     int with_res, int inplace, int misalign, collgen_fp8_mode_t fp8) {
  rs_case t;
  rs_init(&t, c, dt, group, rows, cols);
  t.with_res = with_res;
  t.inplace = inplace;
  t.misalign = misalign;
  t.fp8 = fp8;
  rs_check_case(&t);
}

/* 2, 4 and 8 ranks, every group size: 7 rows (uneven chunks; empty ones at
** 8 ranks), 2 rows (mostly empty), in place and without residual_in. */
Test(reduce_scatter_rmsnorm, every_rank_count_and_group_size, .timeout = 600) {
  static const int ranks[] = {2, 4, 8};
  for (size_t i = 0; i < 3; ++i) {
    collgen_comm_t *c = make_comm(ranks[i], 0, 0, 0);
    for (int g = 1; g <= ranks[i]; g *= 2) {
      rs_check(c, COLLGEN_DTYPE_BF16, g, 7, 1024, 1, g == ranks[i], 0, COLLGEN_FP8_NONE);
      rs_check(c, COLLGEN_DTYPE_BF16, g, 2, 1024, 0, 0, 0, COLLGEN_FP8_NONE);
    }
    collgen_comm_destroy(c);
  }
}

/* The planned kernel of a call of reduce_scatter_rmsnorm. */
static void rs_kernel(collgen_comm_t *c, collgen_dtype_t dt, int group, int64_t rows,
                      int64_t cols, char *kernel, size_t size) {
  collgen_shape_t s;
  collgen_shape_init(&s, COLLGEN_OP_REDUCE_SCATTER_RMSNORM);
  s.dtype = dt;
  s.ngpus = c->ndev;
  s.group_size = group;
  s.rows = rows;
  s.cols = cols;
  snprintf(s.arch, sizeof s.arch, "%s", c->arch[0]);
  collgen_plan_t plan;
  cr_assert_eq(collgen_plan(c->gen, &s, &plan), COLLGEN_OK, "%s",
               collgen_generator_last_error(c->gen));
  snprintf(kernel, size, "%s", plan.kernel);
}

/* A group of one whose traffic lies just above the L2 of an sm_90 part streams
** (the "_cs" kernel of allreduce_residual_rmsnorm's local rows, planned
** alike): with and without residual_in, in place. */
Test(reduce_scatter_rmsnorm, groups_of_one_above_the_l2_stream, .timeout = 300) {
  collgen_comm_t *c = make_comm(2, 0, 0, 0);
  char kernel[128];
  rs_kernel(c, COLLGEN_DTYPE_BF16, 1, 2001, 4096, kernel, sizeof kernel);
  const int sm90 = strncmp(c->arch[0], "sm_90", 5) == 0;
  cr_expect_eq(strstr(kernel, "_cs") != NULL, sm90, "%s on %s", kernel, c->arch[0]);
  rs_check(c, COLLGEN_DTYPE_BF16, 1, 2001, 4096, 1, 0, 0, COLLGEN_FP8_NONE);
  rs_check(c, COLLGEN_DTYPE_BF16, 1, 2001, 4096, 0, 1, 0, COLLGEN_FP8_NONE);
  collgen_comm_destroy(c);
}

/* Other dtypes and row layouts on 4 ranks: f32 scalar rows (unaligned),
** f16 looped rows, FP8 dynamic and static output (sm_89+); zero rows
** launch nothing and write nothing. */
Test(reduce_scatter_rmsnorm, dtypes_layouts_fp8_and_empty, .timeout = 600) {
  collgen_comm_t *c = make_comm(4, 0, 0, 0);
  rs_check(c, COLLGEN_DTYPE_F32, 4, 9, 1000, 1, 0, 1, COLLGEN_FP8_NONE);
  rs_check(c, COLLGEN_DTYPE_F16, 2, 5, 40000, 1, 1, 0, COLLGEN_FP8_NONE);
  rs_check(c, COLLGEN_DTYPE_BF16, 4, 300, 4096, 1, 0, 0, COLLGEN_FP8_NONE);
  const collgen__arch_desc *a = collgen__arch_find(c->arch[0]);
  if (a && a->sm >= 89) {
    rs_check(c, COLLGEN_DTYPE_BF16, 4, 11, 2048, 1, 1, 0, COLLGEN_FP8_DYNAMIC);
    rs_check(c, COLLGEN_DTYPE_F32, 2, 6, 1024, 0, 0, 0, COLLGEN_FP8_STATIC);
  }
  rs_case t;
  rs_init(&t, c, COLLGEN_DTYPE_BF16, 4, 0, 1024);
  rs_setup(&t);
  rs_fill(&t);
  cr_assert_eq(rs_call(&t), COLLGEN_OK, "%s", collgen_comm_last_error(c));
  cr_assert_eq(collgen__dev_sync_all(c, t.streams), COLLGEN_OK, "%s", c->err);
  rs_verify(&t); /* nothing written: every margin still poisoned */
  rs_teardown(&t);
  collgen_comm_destroy(c);
}

/* A captured call replayed on new data (uploaded into the captured
** buffers before each launch): every replay checked as a fresh call. */
Test(reduce_scatter_rmsnorm, graph_capture_and_replay_with_new_data, .timeout = 300) {
  collgen_comm_t *c = make_comm(4, 0, 0, 0);
  rs_case t;
  rs_init(&t, c, COLLGEN_DTYPE_BF16, 4, 7, 1024);
  t.inplace = 1;
  rs_setup(&t);
  rs_fill(&t);
  cr_assert_eq(rs_call(&t), COLLGEN_OK, "%s", collgen_comm_last_error(c)); /* loads the modules */
  cr_assert_eq(collgen__dev_sync_all(c, t.streams), COLLGEN_OK, "%s", c->err);
  rs_verify(&t);
  CUgraph graph[8];
  CUgraphExec exec[8];
  graph_capture_begin(c, t.streams);
  cr_assert_eq(rs_call(&t), COLLGEN_OK, "%s", collgen_comm_last_error(c));
  graph_capture_end(c, t.streams, graph, exec);
  for (int it = 0; it < 10; ++it) {
    rs_fill(&t);
    for (int r = 0; r < 4; ++r)
      for (int j = 0; j < 2; ++j) free(t.first[r][j]), t.first[r][j] = NULL;
    graph_launch(c, t.streams, exec);
    cr_assert_eq(collgen__dev_sync_all(c, t.streams), COLLGEN_OK, "%s", c->err);
    rs_verify(&t);
  }
  graph_destroy(c, graph, exec);
  rs_teardown(&t);
  collgen_comm_destroy(c);
}
