/*
** demo_ops.c -- each op's hook entry for `collgen demo` (see demo.h) and
** the table of them, built from COLLGEN_OP_MAP: op `id` must have an
** entry `demo_<id>` here, or this file does not compile. Every case runs
** bf16 at the sizes below, in both process models, checked against the
** CPU reference (src/support/reference.c): what only moves or sums bits
** bit for bit, RMSNorm outputs within collgen__ref_close, FP8 codes by
** collgen__ref_fp8_row_ok.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalog.h"
#include "demo.h"
#include "reference.h"
#include "shape.h"

#define BF COLLGEN_DTYPE_BF16
#define BF_BYTES 2
#define AR_ELEMS (16 * 1024 * 1024 + 3) /* odd: exercises the scalar tail */
#define RMS_ROWS 64                     /* per rank; rank 0 gets one more */
#define RMS_COLS 8192
#define RR_ROWS 8                       /* decode tokens per rank: the LL kernel */
#define AG_ELEMS (1024 * 1024 + 5)      /* per rank, rank r r more: uneven, odd tails */
#define RS_ROWS (2 * RMS_ROWS + 1)      /* 129: uneven chunks */
#define EPS 1e-6f

/* Every rank's shape is [n] or [rows, cols]. */
static void same_shape_1d(demo_data *a, int nranks, int64_t n) {
  a->tensor_rank = 1;
  for (int r = 0; r < nranks; ++r) a->shape[r][0] = n;
}

static void same_shape_2d(demo_data *a, int nranks, int64_t rows, int64_t cols) {
  a->tensor_rank = 2;
  for (int r = 0; r < nranks; ++r) a->shape[r][0] = rows, a->shape[r][1] = cols;
}

/* The rows of the reference's chunk of group rank r (collgen__scatter_chunk). */
static int64_t chunk_rows(int64_t rows, int nranks, int r) {
  int64_t start = 0, count = 0;
  collgen__scatter_chunk(rows, nranks, r, &start, &count);
  return count;
}

/* Each rank's first dim into dims[r]; returns their sum (what is gathered). */
static int64_t first_dims(const demo_ctx *d, const demo_data *a, int64_t *dims) {
  int64_t total = 0;
  for (int r = 0; r < d->n; ++r) total += dims[r] = a->shape[r][0];
  return total;
}

/* How many of `rows` x cols normed values `got` are not within
** collgen__ref_close of the RMSNorm (eps EPS) of residual rows `res`. */
static int normed_wrong(const void *res, const void *got, const void *gamma, int64_t rows,
                        int64_t cols, float weight_offset) {
  int bad = 0;
  for (int64_t row = 0; row < rows; ++row) {
    double scale = collgen__ref_rmsnorm_scale(BF, res, row, cols, EPS);
    for (int64_t c = 0; c < cols; ++c) {
      int64_t i = row * cols + c;
      double w = collgen__ref_load(BF, gamma, c) + weight_offset;
      bad += !collgen__ref_close(BF, collgen__ref_load(BF, got, i),
                                 collgen__ref_load(BF, res, i) * scale * w);
    }
  }
  return bad;
}

/* The ops of one input and one output buffer. make_in_out: a fresh input
** per rank and a poisoned output of the same size (allreduce_sum,
** broadcast, reduce_scatter_sum). */
enum { IO_IN, IO_OUT };

static int make_in_out(demo_ctx *d, demo_data *a) {
  return demo_buffer(d, a, IO_IN, DEMO_FRESH, BF, DEMO_OWN_SHAPE) &&
         demo_buffer(d, a, IO_OUT, DEMO_POISON, BF, DEMO_OWN_SHAPE);
}

/* ---- the ops over one vector per rank: allreduce_sum, broadcast ------- */

static void shape_vector(const demo_ctx *d, demo_data *a) { same_shape_1d(a, d->n, AR_ELEMS); }

static size_t size_vector(const demo_ctx *d, const demo_data *a, char *text, size_t n) {
  snprintf(text, n, "bf16 x %lld elems on %d rank(s)", (long long)a->shape[0][0], d->n);
  return a->bytes[IO_IN][0];
}

static int run_allreduce_sum(demo_ctx *d, demo_data *a) {
  return collgen_allreduce_sum(d->comm, BF, 1, a->shapes, DEMO_IN(a, IO_IN), a->dev[IO_OUT], 0,
                               d->streams);
}

static int run_rank_allreduce_sum(demo_ctx *d, demo_data *a, int me) {
  return collgen_rank_allreduce_sum(d->comm, BF, 1, a->shape[me], a->dev[IO_IN][me],
                                    a->dev[IO_OUT][me], 0, d->streams[me]);
}

static int check_allreduce_sum(demo_ctx *d, demo_data *a) {
  void *want = demo_host(a, a->bytes[IO_OUT][0]);
  if (!want) return -1;
  collgen__ref_allreduce(BF, AR_ELEMS, d->n, (const void *const *)a->host[IO_IN], want);
  return demo_ranks_differ(d, a, IO_OUT, want, a->bytes[IO_OUT][0]);
}

static const demo_op demo_allreduce_sum = {{
    {.label = "allreduce_sum", .bitwise = 1, .kernel = {.elems = AR_ELEMS},
     .shape = shape_vector, .make = make_in_out, .run = run_allreduce_sum,
     .run_rank = run_rank_allreduce_sum, .check = check_allreduce_sum, .size = size_vector},
}};

/* broadcast from the last rank */
static int run_broadcast(demo_ctx *d, demo_data *a) {
  return collgen_broadcast(d->comm, BF, 1, a->shapes, DEMO_IN(a, IO_IN), a->dev[IO_OUT], d->n - 1,
                           0, d->streams);
}

static int run_rank_broadcast(demo_ctx *d, demo_data *a, int me) {
  return collgen_rank_broadcast(d->comm, BF, 1, a->shape[me], a->dev[IO_IN][me], a->dev[IO_OUT][me],
                                d->n - 1, 0, d->streams[me]);
}

static int check_broadcast(demo_ctx *d, demo_data *a) {
  void *want = demo_host(a, a->bytes[IO_OUT][0]);
  if (!want) return -1;
  collgen__ref_broadcast(BF, AR_ELEMS, 1, 0, (const void *const *)&a->host[IO_IN][d->n - 1],
                         &want);
  return demo_ranks_differ(d, a, IO_OUT, want, a->bytes[IO_OUT][0]);
}

static size_t size_broadcast(const demo_ctx *d, const demo_data *a, char *text, size_t n) {
  size_t bytes = size_vector(d, a, text, n);
  strncat(text, " from the last", n - strlen(text) - 1);
  return bytes;
}

static const demo_op demo_broadcast = {{
    {.label = "broadcast", .bitwise = 1, .kernel = {.elems = AR_ELEMS},
     .shape = shape_vector, .make = make_in_out, .run = run_broadcast,
     .run_rank = run_rank_broadcast, .check = check_broadcast, .size = size_broadcast},
}};

/* ---- allgather_rmsnorm: uneven shards gathered and normed ------------- */

enum { AGR_IN, AGR_NORMED, AGR_RESID, AGR_GAMMA };

static void shape_allgather_rmsnorm(const demo_ctx *d, demo_data *a) {
  a->tensor_rank = 2;
  for (int r = 0; r < d->n; ++r) a->shape[r][0] = RMS_ROWS + (r == 0), a->shape[r][1] = RMS_COLS;
}

static int make_allgather_rmsnorm(demo_ctx *d, demo_data *a) {
  int64_t rows[COLLGEN_MAX_DEVICES];
  const int64_t out = first_dims(d, a, rows) * RMS_COLS;
  return demo_buffer(d, a, AGR_IN, DEMO_FRESH, BF, DEMO_OWN_SHAPE) &&
         demo_buffer(d, a, AGR_GAMMA, DEMO_SHARED, BF, RMS_COLS) &&
         demo_buffer(d, a, AGR_NORMED, DEMO_POISON, BF, out) &&
         demo_buffer(d, a, AGR_RESID, DEMO_POISON, BF, out);
}

static int run_allgather_rmsnorm(demo_ctx *d, demo_data *a) {
  return collgen_allgather_rmsnorm(d->comm, BF, 2, a->shapes, DEMO_IN(a, AGR_IN),
                                   a->dev[AGR_NORMED], a->dev[AGR_RESID],
                                   DEMO_IN(a, AGR_GAMMA), EPS, 1.0f, 0, d->streams);
}

static int run_rank_allgather_rmsnorm(demo_ctx *d, demo_data *a, int me) {
  return collgen_rank_allgather_rmsnorm(d->comm, BF, 2, a->shapes, a->dev[AGR_IN][me],
                                        a->dev[AGR_NORMED][me], a->dev[AGR_RESID][me],
                                        a->dev[AGR_GAMMA][me], EPS, 1.0f, 0, d->streams[me]);
}

static int check_allgather_rmsnorm(demo_ctx *d, demo_data *a) {
  int64_t rows[COLLGEN_MAX_DEVICES];
  const int64_t total = first_dims(d, a, rows);
  const size_t bytes = a->bytes[AGR_RESID][0];
  void *normed = demo_host(a, bytes), *resid = demo_host(a, bytes);
  if (!normed || !resid) return -1;
  const void *gamma = a->host[AGR_GAMMA][0];
  collgen__ref_allgather_rmsnorm(BF, d->n, rows, RMS_COLS, (const void *const *)a->host[AGR_IN],
                                 gamma, EPS, 1.0f, normed, resid);
  int bad = 0;
  DEMO_FOR_LOCAL(d, r) {
    bad += demo_differs(d, a, AGR_RESID, r, resid, bytes);
    bad += normed_wrong(resid, demo_fetch(d, a, AGR_NORMED, r), gamma, total, RMS_COLS, 1.0f);
  }
  return bad;
}

static size_t size_allgather_rmsnorm(const demo_ctx *d, const demo_data *a, char *text,
                                     size_t n) {
  int64_t rows[COLLGEN_MAX_DEVICES];
  snprintf(text, n, "bf16 %lld x %d gathered on %d rank(s)", (long long)first_dims(d, a, rows),
           RMS_COLS, d->n);
  return 0;
}

static const demo_op demo_allgather_rmsnorm = {{
    {.label = "allgather_rmsnorm",
     .kernel = {.rows = 2 * RMS_ROWS + 1, .cols = RMS_COLS}, /* gathered rows of 2 ranks */
     .shape = shape_allgather_rmsnorm, .make = make_allgather_rmsnorm,
     .run = run_allgather_rmsnorm, .run_rank = run_rank_allgather_rmsnorm,
     .check = check_allgather_rmsnorm, .size = size_allgather_rmsnorm},
}};

/* ---- the residual RMSNorm ops, in place over [RR_ROWS, RMS_COLS] ------ */

/* x fresh per rank; one residual stream (residual_in, then residual_out:
** the timing loop keeps adding to it) and one gamma on every rank; then
** normed, or the FP8 codes and their row scales. */
enum { RR_X, RR_RES, RR_GAMMA, RR_NORMED, RR_SCALES };

static void shape_residual(const demo_ctx *d, demo_data *a) {
  same_shape_2d(a, d->n, RR_ROWS, RMS_COLS);
}

static int make_residual_inputs(demo_ctx *d, demo_data *a) {
  return demo_buffer(d, a, RR_X, DEMO_FRESH, BF, DEMO_OWN_SHAPE) &&
         demo_buffer(d, a, RR_RES, DEMO_SHARED, BF, DEMO_OWN_SHAPE) &&
         demo_buffer(d, a, RR_GAMMA, DEMO_SHARED, BF, RMS_COLS);
}

static int make_residual(demo_ctx *d, demo_data *a) {
  return make_residual_inputs(d, a) &&
         demo_buffer(d, a, RR_NORMED, DEMO_POISON, BF, DEMO_OWN_SHAPE);
}

static int make_residual_fp8(demo_ctx *d, demo_data *a) {
  return make_residual_inputs(d, a) &&
         demo_buffer(d, a, RR_NORMED, DEMO_POISON, COLLGEN_DTYPE_U8, DEMO_OWN_SHAPE) &&
         demo_buffer(d, a, RR_SCALES, DEMO_POISON, COLLGEN_DTYPE_F32, RR_ROWS);
}

static int run_residual(demo_ctx *d, demo_data *a) {
  return collgen_allreduce_residual_rmsnorm(d->comm, BF, 2, a->shapes, DEMO_IN(a, RR_X),
                                            DEMO_IN(a, RR_RES), a->dev[RR_NORMED], a->dev[RR_RES],
                                            DEMO_IN(a, RR_GAMMA), EPS, 0.0f, 0, d->streams);
}

static int run_rank_residual(demo_ctx *d, demo_data *a, int me) {
  return collgen_rank_allreduce_residual_rmsnorm(d->comm, BF, 2, a->shape[me], a->dev[RR_X][me],
                                                 a->dev[RR_RES][me], a->dev[RR_NORMED][me],
                                                 a->dev[RR_RES][me], a->dev[RR_GAMMA][me], EPS,
                                                 0.0f, 0, d->streams[me]);
}

/* residual_out bit for bit and normed within collgen__ref_close: of all
** RR_ROWS rows on every rank (allreduce_residual_rmsnorm), or (chunked)
** of rank r's chunk of them (reduce_scatter_rmsnorm). */
static int check_residual_rows(demo_ctx *d, demo_data *a, int chunked) {
  const size_t bytes = a->bytes[RR_RES][0];
  void *want_n = demo_host(a, bytes), *want_r = demo_host(a, bytes);
  if (!want_n || !want_r) return -1;
  const void *const *x = (const void *const *)a->host[RR_X];
  const void *res = a->host[RR_RES][0], *gamma = a->host[RR_GAMMA][0];
  if (!chunked)
    collgen__ref_allreduce_residual_rmsnorm(BF, d->n, RR_ROWS, RMS_COLS, x, res, gamma, EPS, 0.0f,
                                            want_n, want_r);
  int bad = 0;
  DEMO_FOR_LOCAL(d, r) {
    const int64_t rows = chunked ? chunk_rows(RR_ROWS, d->n, r) : RR_ROWS;
    if (chunked)
      collgen__ref_reduce_scatter_rmsnorm(BF, d->n, r, RR_ROWS, RMS_COLS, x, res, gamma, EPS, 0.0f,
                                          want_n, want_r);
    bad += demo_differs(d, a, RR_RES, r, want_r, (size_t)(rows * RMS_COLS) * BF_BYTES);
    bad += normed_wrong(want_r, demo_fetch(d, a, RR_NORMED, r), gamma, rows, RMS_COLS, 0.0f);
  }
  return bad;
}

static int check_residual(demo_ctx *d, demo_data *a) { return check_residual_rows(d, a, 0); }

static size_t size_residual(const demo_ctx *d, const demo_data *a, char *text, size_t n) {
  snprintf(text, n, "bf16 %d x %d allreduce + residual + RMSNorm on %d rank(s)", RR_ROWS, RMS_COLS,
           d->n);
  return 0;
}

/* The FP8 output (dynamic row scales), in place as above. */
static int run_residual_fp8(demo_ctx *d, demo_data *a) {
  return collgen_allreduce_residual_rmsnorm_fp8(
      d->comm, BF, 2, a->shapes, DEMO_IN(a, RR_X), DEMO_IN(a, RR_RES), a->dev[RR_NORMED],
      (float *const *)a->dev[RR_SCALES], a->dev[RR_RES], DEMO_IN(a, RR_GAMMA), EPS, 0.0f,
      COLLGEN_FP8_DYNAMIC, 0.0f, 0, d->streams);
}

static int run_rank_residual_fp8(demo_ctx *d, demo_data *a, int me) {
  return collgen_rank_allreduce_residual_rmsnorm_fp8(
      d->comm, BF, 2, a->shape[me], a->dev[RR_X][me], a->dev[RR_RES][me], a->dev[RR_NORMED][me],
      a->dev[RR_SCALES][me], a->dev[RR_RES][me], a->dev[RR_GAMMA][me], EPS, 0.0f,
      COLLGEN_FP8_DYNAMIC, 0.0f, 0, d->streams[me]);
}

/* residual_out bit for bit; each row's codes and scale judged by
** collgen__ref_fp8_row_ok from the reference residual_out, not against the
** reference's codes: near an e4m3 rounding boundary the kernels may round
** the other way. */
static int check_residual_fp8(demo_ctx *d, demo_data *a) {
  const int64_t n = RR_ROWS * RMS_COLS;
  const size_t bytes = a->bytes[RR_RES][0];
  uint8_t *want_q = demo_host(a, (size_t)n);
  float *want_s = demo_host(a, RR_ROWS * sizeof(float));
  void *want_r = demo_host(a, bytes);
  if (!want_q || !want_s || !want_r) return -1;
  const void *gamma = a->host[RR_GAMMA][0];
  collgen__ref_allreduce_residual_rmsnorm_fp8(
      BF, d->n, RR_ROWS, RMS_COLS, (const void *const *)a->host[RR_X], a->host[RR_RES][0], gamma,
      EPS, 0.0f, COLLGEN_FP8_DYNAMIC, 0.0f, want_q, want_s, want_r);
  int bad = 0;
  DEMO_FOR_LOCAL(d, r) {
    bad += demo_differs(d, a, RR_RES, r, want_r, bytes);
    const uint8_t *q = demo_fetch(d, a, RR_NORMED, r);
    const float *scales = demo_fetch(d, a, RR_SCALES, r);
    for (int64_t row = 0; row < RR_ROWS; ++row) {
      int64_t col;
      bad += !collgen__ref_fp8_row_ok(BF, want_r, gamma, row, RMS_COLS, EPS, 0.0f,
                                      COLLGEN_FP8_DYNAMIC, 0.0f, q + row * RMS_COLS, scales[row],
                                      &col);
    }
  }
  return bad;
}

static size_t size_residual_fp8(const demo_ctx *d, const demo_data *a, char *text, size_t n) {
  snprintf(text, n, "bf16 %d x %d, normed as e4m3 with row scales, on %d rank(s)", RR_ROWS,
           RMS_COLS, d->n);
  return 0;
}

/* The plain op, then its FP8 output (skipped on GPUs older than sm_89). */
static const demo_op demo_allreduce_residual_rmsnorm = {{
    {.label = "residual_rmsnorm", .kernel = {.rows = RR_ROWS, .cols = RMS_COLS},
     .shape = shape_residual, .make = make_residual, .run = run_residual,
     .run_rank = run_rank_residual, .check = check_residual, .size = size_residual},
    {.label = "residual_rmsnorm", .variant = "FP8 ", .unsupported_skips = 1,
     .kernel = {.rows = RR_ROWS, .cols = RMS_COLS, .fp8 = COLLGEN_FP8_DYNAMIC},
     .shape = shape_residual, .make = make_residual_fp8, .run = run_residual_fp8,
     .run_rank = run_rank_residual_fp8, .check = check_residual_fp8, .size = size_residual_fp8},
}};

/* reduce_scatter_rmsnorm: rank r's chunk of the RR_ROWS rows; residual_in
** is the first rows of its residual stream, residual_out in place. */
static int run_rs_rmsnorm(demo_ctx *d, demo_data *a) {
  return collgen_reduce_scatter_rmsnorm(d->comm, BF, 2, a->shapes, DEMO_IN(a, RR_X),
                                        DEMO_IN(a, RR_RES), a->dev[RR_NORMED], a->dev[RR_RES],
                                        DEMO_IN(a, RR_GAMMA), EPS, 0.0f, 0, d->streams);
}

static int run_rank_rs_rmsnorm(demo_ctx *d, demo_data *a, int me) {
  return collgen_rank_reduce_scatter_rmsnorm(d->comm, BF, 2, a->shape[me], a->dev[RR_X][me],
                                             a->dev[RR_RES][me], a->dev[RR_NORMED][me],
                                             a->dev[RR_RES][me], a->dev[RR_GAMMA][me], EPS, 0.0f,
                                             0, d->streams[me]);
}

static int check_rs_rmsnorm(demo_ctx *d, demo_data *a) { return check_residual_rows(d, a, 1); }

static size_t size_rs_rmsnorm(const demo_ctx *d, const demo_data *a, char *text, size_t n) {
  snprintf(text, n, "bf16 %d x %d reduce-scatter + residual + RMSNorm on %d rank(s)", RR_ROWS,
           RMS_COLS, d->n);
  return 0;
}

static const demo_op demo_reduce_scatter_rmsnorm = {{
    {.label = "rs_rmsnorm", .kernel = {.rows = RR_ROWS, .cols = RMS_COLS},
     .shape = shape_residual, .make = make_residual, .run = run_rs_rmsnorm,
     .run_rank = run_rank_rs_rmsnorm, .check = check_rs_rmsnorm, .size = size_rs_rmsnorm},
}};

/* ---- all_gather: uneven shards, odd tails ----------------------------- */

static void shape_all_gather(const demo_ctx *d, demo_data *a) {
  a->tensor_rank = 1;
  for (int r = 0; r < d->n; ++r) a->shape[r][0] = AG_ELEMS + r;
}

static int make_all_gather(demo_ctx *d, demo_data *a) {
  int64_t elems[COLLGEN_MAX_DEVICES];
  return demo_buffer(d, a, IO_IN, DEMO_FRESH, BF, DEMO_OWN_SHAPE) &&
         demo_buffer(d, a, IO_OUT, DEMO_POISON, BF, first_dims(d, a, elems));
}

static int run_all_gather(demo_ctx *d, demo_data *a) {
  return collgen_all_gather(d->comm, BF, 1, a->shapes, DEMO_IN(a, IO_IN), a->dev[IO_OUT], 0,
                            d->streams);
}

static int run_rank_all_gather(demo_ctx *d, demo_data *a, int me) {
  return collgen_rank_all_gather(d->comm, BF, 1, a->shapes, a->dev[IO_IN][me], a->dev[IO_OUT][me],
                                 0, d->streams[me]);
}

static int check_all_gather(demo_ctx *d, demo_data *a) {
  int64_t elems[COLLGEN_MAX_DEVICES];
  first_dims(d, a, elems);
  void *want = demo_host(a, a->bytes[IO_OUT][0]);
  if (!want) return -1;
  collgen__ref_all_gather(BF, d->n, elems, (const void *const *)a->host[IO_IN], want);
  return demo_ranks_differ(d, a, IO_OUT, want, a->bytes[IO_OUT][0]);
}

static size_t size_all_gather(const demo_ctx *d, const demo_data *a, char *text, size_t n) {
  int64_t elems[COLLGEN_MAX_DEVICES];
  snprintf(text, n, "bf16 %lld elements gathered on %d rank(s)",
           (long long)first_dims(d, a, elems), d->n);
  return 0;
}

static const demo_op demo_all_gather = {{
    {.label = "all_gather", .kernel = {.elems = AG_ELEMS},
     .shape = shape_all_gather, .make = make_all_gather, .run = run_all_gather,
     .run_rank = run_rank_all_gather, .check = check_all_gather, .size = size_all_gather},
}};

/* ---- reduce_scatter_sum over [RS_ROWS, RMS_COLS]: uneven chunks ------- */

/* [RS_ROWS, RMS_COLS] on every rank: each rank's chunk of the rows
** (collgen__scatter_chunk) is uneven. */
static void shape_chunked(const demo_ctx *d, demo_data *a) {
  same_shape_2d(a, d->n, RS_ROWS, RMS_COLS);
}

static int run_reduce_scatter(demo_ctx *d, demo_data *a) {
  return collgen_reduce_scatter_sum(d->comm, BF, 2, a->shapes, DEMO_IN(a, IO_IN), a->dev[IO_OUT], 0,
                                    d->streams);
}

static int run_rank_reduce_scatter(demo_ctx *d, demo_data *a, int me) {
  return collgen_rank_reduce_scatter_sum(d->comm, BF, 2, a->shape[me], a->dev[IO_IN][me],
                                         a->dev[IO_OUT][me], 0, d->streams[me]);
}

/* Each rank's chunk, bit for bit. */
static int check_reduce_scatter(demo_ctx *d, demo_data *a) {
  void *want = demo_host(a, a->bytes[IO_OUT][0]);
  if (!want) return -1;
  int bad = 0;
  DEMO_FOR_LOCAL(d, r) {
    collgen__ref_reduce_scatter_sum(BF, RS_ROWS, RMS_COLS, d->n, r,
                                    (const void *const *)a->host[IO_IN], want);
    bad += demo_differs(d, a, IO_OUT, r, want,
                        (size_t)(chunk_rows(RS_ROWS, d->n, r) * RMS_COLS) * BF_BYTES);
  }
  return bad;
}

static size_t size_reduce_scatter(const demo_ctx *d, const demo_data *a, char *text, size_t n) {
  snprintf(text, n, "bf16 %d x %d on %d rank(s)", RS_ROWS, RMS_COLS, d->n);
  return 0;
}

static const demo_op demo_reduce_scatter_sum = {{
    {.label = "reduce_scatter_sum", .bitwise = 1,
     .kernel = {.rows = RS_ROWS, .cols = RMS_COLS}, .shape = shape_chunked,
     .make = make_in_out, .run = run_reduce_scatter, .run_rank = run_rank_reduce_scatter,
     .check = check_reduce_scatter, .size = size_reduce_scatter},
}};

/* ---- scatter from the last rank over [RS_ROWS, RMS_COLS]: uneven chunks */

static int run_scatter(demo_ctx *d, demo_data *a) {
  return collgen_scatter(d->comm, BF, 2, a->shapes, DEMO_IN(a, IO_IN), a->dev[IO_OUT], d->n - 1,
                         0, d->streams);
}

static int run_rank_scatter(demo_ctx *d, demo_data *a, int me) {
  return collgen_rank_scatter(d->comm, BF, 2, a->shape[me], a->dev[IO_IN][me], a->dev[IO_OUT][me],
                              d->n - 1, 0, d->streams[me]);
}

/* Rank r holds chunk r of the root's rows, bit for bit (the reference). */
static int check_scatter(demo_ctx *d, demo_data *a) {
  const size_t row = (size_t)RMS_COLS * BF_BYTES;
  char *want = malloc((size_t)RS_ROWS * row);
  if (!want) return 1;
  int bad = 0;
  DEMO_FOR_LOCAL(d, r) {
    int64_t start = 0, count = 0;
    collgen__scatter_chunk(RS_ROWS, d->n, r, &start, &count);
    collgen__ref_scatter(COLLGEN_DTYPE_BF16, RS_ROWS, RMS_COLS, d->n, r, a->host[IO_IN][d->n - 1],
                         want);
    bad += demo_differs(d, a, IO_OUT, r, want, (size_t)count * row);
  }
  free(want);
  return bad;
}

static size_t size_scatter(const demo_ctx *d, const demo_data *a, char *text, size_t n) {
  (void)a;
  snprintf(text, n, "bf16 %d x %d on %d rank(s) from the last", RS_ROWS, RMS_COLS, d->n);
  return 0;
}

static const demo_op demo_scatter = {{
    {.label = "scatter", .bitwise = 1,
     .kernel = {.elems = (RS_ROWS + 1) / 2 * RMS_COLS}, /* group rank 0's chunk of 2 ranks */
     .shape = shape_chunked, .make = make_in_out, .run = run_scatter,
     .run_rank = run_rank_scatter, .check = check_scatter, .size = size_scatter},
}};

/* ---- the table ------------------------------------------------------- */

static const demo_op *const entries[] = {
#define DEMO_ENTRY(NAME, value, id, ...) [value] = &demo_##id,
    COLLGEN_OP_MAP(DEMO_ENTRY)
#undef DEMO_ENTRY
};

const demo_op *demo_op_of(collgen_op_t op) {
  if ((unsigned)op >= sizeof entries / sizeof entries[0]) return NULL;
  return entries[op];
}

int demo_case_count(const demo_op *e) {
  int n = 0;
  while (n < DEMO_MAX_CASES && e->cases[n].label) n++;
  return n;
}

int demo_ops_check(char *why, size_t n) {
  for (int i = 0; i < collgen__op_count(); ++i) {
    const collgen__op_desc *op = collgen__op_at(i);
    const demo_op *e = demo_op_of(op->op);
    const int cases = e ? demo_case_count(e) : 0;
    if (cases == 0) {
      snprintf(why, n, "op %s has no demo hook entry (src/cli/demo_ops.c)", op->name);
      return -1;
    }
    for (int k = 0; k < cases; ++k) {
      const demo_case *c = &e->cases[k];
      if (!c->shape || !c->make || !c->run || !c->run_rank || !c->check ||
          !c->size) {
        snprintf(why, n, "case %d of op %s's demo hook entry lacks a hook (src/cli/demo_ops.c)",
                 k, op->name);
        return -1;
      }
    }
  }
  return 0;
}
