/*
** bench_residual.c -- collgen-bench's allreduce_residual_rmsnorm section:
** the fused op against three unfused baselines on the same buffers, NCCL's
** all-reduce (default buffers, and buffers in an NCCL symmetric window,
** bench_nccl_sym.c) and collgen_allreduce_sum, each followed by the plain
** residual add + RMSNorm kernel (bench_rmsnorm_ref.c). Its pieces (rr_*)
** also serve the decode step (bench_model.c). Every call is in place
** (residual_out is residual_in, as in a decoder); x rotates through an
** arena. Each path is checked against the CPU reference before it is timed:
** the fused op bit for bit on residual_out, the baselines within their own
** rounding (they round the sum once more), normed within the rounding
** model; a wrong fused result fails the run, a wrong baseline is reported
** and left out (nan). busbw counts x as an all-reduce: algbw * 2(n-1)/n.
** A second table times the FP8 output (dynamic and static scaling) against
** the plain fused op at decode sizes, each checked first the same way
** (codes and scales by collgen__ref_fp8_row_ok).
*/
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "bench_rmsnorm_ref.h"
#include "shape.h"

const void *rr_x_of(const rr_arg *a, int r, int iter) {
  return a->x[r] + (size_t)(iter % a->nslots) * a->slot;
}

/* Every rank's x of call `iter` and its shape. */
static void call_args(const bench_t *b, const rr_arg *a, int iter, const void **x,
                      const int64_t **shapes) {
  for (int r = 0; r < b->n; ++r) {
    x[r] = rr_x_of(a, r, iter);
    shapes[r] = a->shape;
  }
}

void rr_launch_fused(bench_t *b, void *vp, int iter) {
  rr_arg *a = vp;
  const void *x[8];
  const int64_t *shapes[8];
  call_args(b, a, iter, x, shapes);
  int rc = collgen_allreduce_residual_rmsnorm(b->comm, b->dt, 2, shapes, x,
                                              (const void *const *)a->res, a->normed, a->res,
                                              (const void *const *)a->gamma, 1e-6f, 1.0f,
                                              b->group, b->streams);
  if (rc != COLLGEN_OK) die("collgen_allreduce_residual_rmsnorm", collgen_comm_last_error(b->comm));
}

/* The plain residual add + RMSNorm on every rank, after an all-reduce into sum. */
static void launch_plain(bench_t *b, rr_arg *a) {
  FOR_LOCAL(b, r)
    launch_plain_add_rmsnorm(b, r, a->sum[r], a->res[r], a->gamma[r], a->normed[r], a->rows,
                             a->cols);
}

void rr_launch_nccl(bench_t *b, void *vp, int iter) {
  rr_arg *a = vp;
  NC(ncclGroupStart());
  for (int r = 0; r < b->n; ++r)
    NC(ncclAllReduce(rr_x_of(a, r, iter), a->sum[r], (size_t)(a->rows * a->cols), nccl_type(b->dt),
                     ncclSum, b->nccl[r], (cudaStream_t)b->streams[r]));
  NC(ncclGroupEnd());
  launch_plain(b, a);
}

void rr_launch_unfused(bench_t *b, void *vp, int iter) {
  rr_arg *a = vp;
  const void *x[8];
  const int64_t *shapes[8];
  call_args(b, a, iter, x, shapes);
  int rc = collgen_allreduce_sum(b->comm, b->dt, 2, shapes, x, a->sum, b->group, b->streams);
  if (rc != COLLGEN_OK) die("collgen_allreduce_sum", collgen_comm_last_error(b->comm));
  launch_plain(b, a);
}

/* Each of the baseline's roundings (up to one per rank with NCCL's ring,
** then the residual add) is at most an ulp of a value below 2(G+1). */
double baseline_tolerance(const bench_t *b) {
  const int g = group_of(b);
  const int bits = b->dt == COLLGEN_DTYPE_F32 ? 23 : b->dt == COLLGEN_DTYPE_F16 ? 10 : 7;
  return (g + 1) * ldexp(1.0, ilogb(2.0 * (g + 1)) - bits);
}

int rr_result_ok(bench_t *b, rr_arg *a, launch_fn fn, const char *who, int exact, int chunked) {
  const int g = group_of(b);
  const char *op = chunked ? "reduce_scatter_rmsnorm" : "residual_rmsnorm";
  const int64_t n = a->rows * a->cols;
  const size_t esz = (size_t)esize_of(b), bytes = (size_t)n * esz, gb = (size_t)a->cols * esz;
  void *hx[8], *hres = malloc(bytes), *gamma = malloc(gb), *want_r = malloc(bytes);
  void *want_n = malloc(bytes), *got = malloc(bytes);
  if (!hres || !gamma || !want_r || !want_n || !got) die("check", "out of memory");
  uint64_t seed = 0x5eedull + (uint64_t)getpid();
  collgen__ref_fill_random(b->dt, hres, n, &seed); /* one residual stream on every rank */
  collgen__dev_download(b->comm, 0, gamma, a->gamma[0], gb); /* every rank has the same gamma */
  for (int r = 0; r < b->n; ++r) {
    hx[r] = malloc(bytes + 1);
    collgen__dev_download(b->comm, r, hx[r], rr_x_of(a, r, 0), bytes);
    collgen__dev_upload(b->comm, r, a->res[r], hres, bytes);
    collgen__dev_fill(b->comm, r, a->normed[r], 0xff, bytes);
  }
  fn(b, a, 0);
  sync_all(b);
  int ok = 1;
  for (int r = 0; r < b->n && ok; ++r) {
    const int base = r - r % g;
    int64_t bad_row = -1, start = 0, rows = a->rows; /* the rows this rank's outputs hold */
    if (chunked) {
      collgen__scatter_chunk(a->rows, g, r - base, &start, &rows);
      collgen__ref_reduce_scatter_rmsnorm(b->dt, g, r - base, a->rows, a->cols,
                                          (const void *const *)&hx[base], hres, gamma, 1e-6f,
                                          1.0f, NULL, want_r);
    } else {
      collgen__ref_allreduce_residual_rmsnorm(b->dt, g, a->rows, a->cols,
                                              (const void *const *)&hx[base], hres, gamma, 1e-6f,
                                              1.0f, want_n, want_r);
    }
    const int64_t held = rows * a->cols; /* elements of this rank's residual_out */
    collgen__dev_download(b->comm, r, got, a->res[r], (size_t)held * esz);
    for (int64_t i = 0; ok && i < held; ++i) {
      double d = fabs((double)collgen__ref_load(b->dt, got, i) - collgen__ref_load(b->dt, want_r, i));
      if (exact ? memcmp((char *)got + i * (int64_t)esz, (char *)want_r + i * (int64_t)esz, esz) != 0
                : !(d <= baseline_tolerance(b))) {
        fprintf(stderr, "collgen-bench: %s %s %lldx%lld: residual_out of rank %d "
                "element %lld is %g, the reference %g\n", who, op, (long long)a->rows,
                (long long)a->cols, r, (long long)i, collgen__ref_load(b->dt, got, i),
                collgen__ref_load(b->dt, want_r, i));
        ok = 0;
      }
    }
    /* normed is checked against the RMSNorm of the rank's own residual_out */
    void *normed = want_n;
    collgen__dev_download(b->comm, r, normed, a->normed[r], (size_t)held * esz);
    if (ok && !normed_rows_ok(b, rows, a->cols, normed, got, gamma, &bad_row)) {
      fprintf(stderr, "collgen-bench: %s %s %lldx%lld: normed row %lld of rank %d wrong\n", who,
              op, (long long)a->rows, (long long)a->cols, (long long)bad_row, r);
      ok = 0;
    }
  }
  for (int r = 0; r < b->n; ++r) free(hx[r]);
  free(hres);
  free(gamma);
  free(want_r);
  free(want_n);
  free(got);
  return ok;
}

void rr_alloc(bench_t *b, rr_arg *a, int64_t rows, int64_t cols, int nslots, uint64_t *seed) {
  memset(a, 0, sizeof *a);
  a->rows = rows;
  a->cols = cols;
  const size_t esz = (size_t)esize_of(b), bytes = (size_t)(a->rows * a->cols) * esz;
  const size_t gb = (size_t)a->cols * esz;
  a->shape[0] = a->rows;
  a->shape[1] = a->cols;
  a->slot = (bytes + 4095) & ~(size_t)4095;
  a->nslots = nslots ? nslots : (int)(ARENA_MIN / a->slot);
  if (a->nslots < 2 && !nslots) a->nslots = 2;
  if (a->nslots > 1024 && !nslots) a->nslots = 1024;
  const size_t arena = a->slot * (size_t)a->nslots;
  void *h = malloc(gb);
  if (!h) die("alloc", "out of memory");
  collgen__ref_fill_random(b->dt, h, a->cols, seed);
  for (int r = 0; r < b->n; ++r) {
    if (collgen__dev_alloc(b->comm, r, arena, (void **)&a->x[r]) ||
        collgen__dev_alloc(b->comm, r, bytes, &a->res[r]) ||
        collgen__dev_alloc(b->comm, r, bytes, &a->normed[r]) ||
        collgen__dev_alloc(b->comm, r, bytes, &a->sum[r]) ||
        collgen__dev_alloc(b->comm, r, gb, &a->gamma[r]))
      die("alloc", collgen_comm_last_error(b->comm));
    upload_random(b, r, a->x[r], arena);
    collgen__dev_upload(b->comm, r, a->gamma[r], h, gb);
  }
  free(h);
}

void rr_free(bench_t *b, rr_arg *a) {
  for (int r = 0; r < b->n; ++r) {
    collgen__dev_free(b->comm, r, a->x[r]);
    collgen__dev_free(b->comm, r, a->res[r]);
    collgen__dev_free(b->comm, r, a->normed[r]);
    collgen__dev_free(b->comm, r, a->sum[r]);
    collgen__dev_free(b->comm, r, a->gamma[r]);
  }
}

int rr_sym_attach(bench_t *b, const rr_arg *a, rr_arg *s, sym_buf *w) {
  const size_t arena = a->slot * (size_t)a->nslots;
  const size_t sum_bytes = (size_t)(a->rows * a->cols) * (size_t)esize_of(b);
  if (sym_alloc(b, w, arena + sum_bytes) != 0) return -1;
  *s = *a;
  FOR_LOCAL(b, r) { /* x's slots, then sum: the same offsets on every rank */
    s->x[r] = w->ptr[r];
    s->sum[r] = (char *)w->ptr[r] + arena;
    upload_random(b, r, s->x[r], arena);
  }
  return 0;
}

static void bench_residual_rmsnorm(bench_t *b, size_t max_bytes) {
  static const int64_t rows_list[] = {1, 8, 32, 128, 1024, 8192};
  static const int64_t cols_list[] = {4096, 8192};
  const int g = group_of(b);
  const size_t esz = (size_t)esize_of(b);
  printf("\nallreduce_residual_rmsnorm %s, %d GPUs, groups of %d, in place (nccl = ncclAllReduce "
         "+ plain add+RMSNorm kernel; sym = the same on NCCL symmetric windows (n/a: NCCL < "
         "2.27); unfused = collgen_allreduce_sum + the same kernel; x_* = their graph time / "
         "fused graph time; x_best: the faster NCCL path)\n", collgen__dtype_name(b->dt), b->n, g);
  printf("%6s %6s %10s %10s %10s %10s %10s %10s %10s %10s %8s %8s %8s %8s\n", "rows", "cols",
         "eager", "graph", "nccl_eag", "nccl_gr", "sym_eag", "sym_gr", "unf_eag", "unf_gr",
         "x_nccl", "x_best", "x_unf", "busbw");
  uint64_t seed = 0x7e57ull + (uint64_t)getpid();
  for (size_t ri = 0; ri < sizeof rows_list / sizeof rows_list[0]; ++ri)
    for (size_t ci = 0; ci < sizeof cols_list / sizeof cols_list[0]; ++ci) {
      const int64_t rows = rows_list[ri], cols = cols_list[ci];
      if (b->quick && !((rows == 8 || rows == 128 || rows == 8192) && cols == 8192)) continue;
      rr_arg a, sa;
      sym_buf w;
      rr_alloc(b, &a, rows, cols, 0, &seed);
      if (!rr_result_ok(b, &a, rr_launch_fused, "collgen", 1, 0)) exit(1);
      /* the baselines are checked too: a wrong one is reported, not timed */
      int nccl_ok = rr_result_ok(b, &a, rr_launch_nccl, "baseline (NCCL + plain)", 0, 0);
      int unfused_ok = rr_result_ok(b, &a, rr_launch_unfused, "baseline (collgen allreduce + plain)", 0, 0);
      int sym_ok = rr_sym_attach(b, &a, &sa, &w) == 0;
      int sym_right = sym_ok && rr_result_ok(b, &sa, rr_launch_nccl, "baseline (NCCL symmetric + plain)", 0, 0);
      if (!nccl_ok || !unfused_ok || sym_ok != sym_right)
        fprintf(stderr, "collgen-bench: a baseline is wrong; its times are left out (nan)\n");
      const size_t bytes = (size_t)(a.rows * a.cols) * esz;
      const int batch = batch_for(bytes);
      double ce = time_calls(b, rr_launch_fused, &a, batch, 0);
      double cg = time_calls(b, rr_launch_fused, &a, batch, 1);
      double ne = nccl_ok ? time_calls(b, rr_launch_nccl, &a, batch, 0) : NAN;
      double ng = nccl_ok ? time_calls(b, rr_launch_nccl, &a, batch, 1) : NAN;
      double se = sym_right ? time_calls(b, rr_launch_nccl, &sa, batch, 0) : NAN;
      double sg = sym_right ? time_calls(b, rr_launch_nccl, &sa, batch, 1) : NAN;
      double ue = unfused_ok ? time_calls(b, rr_launch_unfused, &a, batch, 0) : NAN;
      double ug = unfused_ok ? time_calls(b, rr_launch_unfused, &a, batch, 1) : NAN;
      double algbw = (double)bytes / (cg * 1e3), busbw = algbw * 2.0 * (g - 1) / g;
      double best = fmin(ng, sg); /* fmin ignores a NaN side */
      printf("%6lld %6lld %10.2f %10.2f %10.2f %10.2f ", (long long)a.rows, (long long)a.cols, ce,
             cg, ne, ng);
      print_us(10, se);
      print_us(11, sg);
      printf(" %10.2f %10.2f %8.2f %8.2f %8.2f %8.1f\n", ue, ug, ng / cg, best / cg, ug / cg, busbw);
      fflush(stdout);
      if (b->csv)
        fprintf(b->csv, "allreduce_residual_rmsnorm,%s,%d,%d,%zu,%lld,%lld,%.3f,%.3f,%.3f,%.3f,"
                "%.2f,%.2f,%.2f,,%.3f,%.3f,%.3f,%.3f\n", collgen__dtype_name(b->dt), b->n, g, bytes,
                (long long)a.rows, (long long)a.cols, ce, cg, ne, ng, algbw, busbw,
                (double)bytes / (ng * 1e3) * 2.0 * (g - 1) / g, ug, se, sg, best / cg);
      if (sym_ok) sym_free(b, &w);
      rr_free(b, &a);
    }
}

/* The FP8 output of the fused op (mode a->fp8) into q and scales. */
static void launch_fp8(bench_t *b, void *vp, int iter) {
  rr_arg *a = vp;
  const void *x[8];
  const int64_t *shapes[8];
  call_args(b, a, iter, x, shapes);
  const int dyn = a->fp8 == COLLGEN_FP8_DYNAMIC;
  int rc = collgen_allreduce_residual_rmsnorm_fp8(
      b->comm, b->dt, 2, shapes, x, (const void *const *)a->res, a->q, dyn ? a->scales : NULL,
      a->res, (const void *const *)a->gamma, 1e-6f, 1.0f, a->fp8, dyn ? 0.0f : 1.0f / 64, b->group,
      b->streams);
  if (rc != COLLGEN_OK) die("collgen_allreduce_residual_rmsnorm_fp8", collgen_comm_last_error(b->comm));
}

/* Runs launch_fp8 once on fresh residuals with poisoned codes and scales
** (x is the arena's slot 0): residual_out must be the reference's bit for
** bit and every row pass collgen__ref_fp8_row_ok, on every rank; else the
** run fails. */
static void check_fp8(bench_t *b, rr_arg *a) {
  const int g = group_of(b);
  const int64_t n = a->rows * a->cols;
  const size_t esz = (size_t)esize_of(b), bytes = (size_t)n * esz, gb = (size_t)a->cols * esz;
  void *hx[8], *hres = malloc(bytes), *gamma = malloc(gb), *want_r = malloc(bytes);
  void *got = malloc(bytes);
  uint8_t *want_q = malloc((size_t)n), *q = malloc((size_t)n);
  float *want_s = malloc((size_t)a->rows * sizeof(float));
  float *scales = malloc((size_t)a->rows * sizeof(float));
  if (!hres || !gamma || !want_r || !got || !want_q || !q || !want_s || !scales)
    die("check", "out of memory");
  uint64_t seed = 0xf8ull + (uint64_t)getpid();
  collgen__ref_fill_random(b->dt, hres, n, &seed);
  collgen__dev_download(b->comm, 0, gamma, a->gamma[0], gb);
  for (int r = 0; r < b->n; ++r) {
    hx[r] = malloc(bytes + 1);
    collgen__dev_download(b->comm, r, hx[r], rr_x_of(a, r, 0), bytes);
    collgen__dev_upload(b->comm, r, a->res[r], hres, bytes);
    collgen__dev_fill(b->comm, r, a->q[r], 0xff, (size_t)n);
    collgen__dev_fill(b->comm, r, a->scales[r], 0xff, (size_t)a->rows * sizeof(float));
  }
  launch_fp8(b, a, 0);
  sync_all(b);
  const float st = a->fp8 == COLLGEN_FP8_DYNAMIC ? 0.0f : 1.0f / 64;
  for (int r = 0; r < b->n; ++r) {
    collgen__ref_allreduce_residual_rmsnorm_fp8(b->dt, g, a->rows, a->cols,
                                                (const void *const *)&hx[r - r % g], hres, gamma,
                                                1e-6f, 1.0f, a->fp8, st, want_q, want_s, want_r);
    collgen__dev_download(b->comm, r, got, a->res[r], bytes);
    collgen__dev_download(b->comm, r, q, a->q[r], (size_t)n);
    collgen__dev_download(b->comm, r, scales, a->scales[r], (size_t)a->rows * sizeof(float));
    int64_t row = 0, col = 0;
    int ok = memcmp(got, want_r, bytes) == 0;
    while (ok && row < a->rows &&
           collgen__ref_fp8_row_ok(b->dt, want_r, gamma, row, a->cols, 1e-6f, 1.0f, a->fp8, st,
                                   q + row * a->cols, scales[row], &col))
      ++row;
    if (!ok || row < a->rows) {
      fprintf(stderr, "collgen-bench: residual_rmsnorm FP8 %s %lldx%lld: rank %d: %s (row %lld "
              "col %lld)\n", collgen__fp8_name(a->fp8), (long long)a->rows, (long long)a->cols,
              r, ok ? "codes or scale differ from the reference" : "residual_out differs",
              (long long)row, (long long)col);
      exit(1);
    }
  }
  for (int r = 0; r < b->n; ++r) free(hx[r]);
  free(hres);
  free(gamma);
  free(want_r);
  free(got);
  free(want_q);
  free(q);
  free(want_s);
  free(scales);
}

static void bench_residual_rmsnorm_fp8(bench_t *b, size_t max_bytes) {
  static const int64_t rows_list[] = {1, 8, 32, 128};
  static const int64_t cols_list[] = {4096, 8192};
  const int g = group_of(b);
  const collgen__arch_desc *arch = collgen__arch_find(b->comm->arch[0]);
  const int min_sm = collgen__fp8_find(COLLGEN_FP8_DYNAMIC)->min_sm;
  if (!arch || arch->sm < min_sm) {
    printf("\nallreduce_residual_rmsnorm FP8 output: skipped (%s; it needs sm_%d)\n",
           b->comm->arch[0], min_sm);
    return;
  }
  printf("\nallreduce_residual_rmsnorm FP8 output, %s in, e4m3 out, %d GPUs, groups of %d, in "
         "place (graph replay, us; x_* = FP8 time / plain fused time, target <= 1.10)\n",
         collgen__dtype_name(b->dt), b->n, g);
  printf("%6s %6s %10s %10s %10s %8s %8s\n", "rows", "cols", "plain", "fp8_dyn", "fp8_st",
         "x_dyn", "x_st");
  uint64_t seed = 0xf8f8ull + (uint64_t)getpid();
  for (size_t i = 0; i < 2 * sizeof rows_list / sizeof rows_list[0]; ++i) {
    rr_arg a; /* each rows with each cols */
    if (b->quick && !(rows_list[i / 2] == 8 && cols_list[i % 2] == 8192)) continue;
    rr_alloc(b, &a, rows_list[i / 2], cols_list[i % 2], 0, &seed);
    for (int r = 0; r < b->n; ++r)
      if (collgen__dev_alloc(b->comm, r, (size_t)(a.rows * a.cols), &a.q[r]) ||
          collgen__dev_alloc(b->comm, r, (size_t)a.rows * sizeof(float), (void **)&a.scales[r]))
        die("alloc", collgen_comm_last_error(b->comm));
    if (!rr_result_ok(b, &a, rr_launch_fused, "collgen", 1, 0)) exit(1);
    const int batch = batch_for((size_t)(a.rows * a.cols) * (size_t)esize_of(b));
    double t[3];
    t[0] = time_calls(b, rr_launch_fused, &a, batch, 1);
    for (int m = 0; m < 2; ++m) {
      a.fp8 = m == 0 ? COLLGEN_FP8_DYNAMIC : COLLGEN_FP8_STATIC;
      check_fp8(b, &a);
      t[1 + m] = time_calls(b, launch_fp8, &a, batch, 1);
    }
    printf("%6lld %6lld %10.2f %10.2f %10.2f %8.3f %8.3f\n", (long long)a.rows,
           (long long)a.cols, t[0], t[1], t[2], t[1] / t[0], t[2] / t[0]);
    fflush(stdout);
    for (int m = 0; b->csv && m < 2; ++m) /* the plain op's row is the section above's */
      fprintf(b->csv, "allreduce_residual_rmsnorm_fp8_%s,%s,%d,%d,%lld,%lld,%lld,,%.3f,,,,,,,,,,\n",
              m == 0 ? "dynamic" : "static", collgen__dtype_name(b->dt), b->n, g,
              (long long)(a.rows * a.cols * esize_of(b)), (long long)a.rows, (long long)a.cols,
              t[1 + m]);
    for (int r = 0; r < b->n; ++r) {
      collgen__dev_free(b->comm, r, a.q[r]);
      collgen__dev_free(b->comm, r, a.scales[r]);
    }
    rr_free(b, &a);
  }
}

/* Against the unfused baselines, then the FP8 output against the plain
** fused op (skipped below sm_89; the one table of --fp8). */
const bench_op bench_op_allreduce_residual_rmsnorm = {{
    {bench_residual_rmsnorm, 0},
    {bench_residual_rmsnorm_fp8, BENCH_IN_FP8},
}};
