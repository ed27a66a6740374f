/*
** bench_rs_rmsnorm.c -- collgen-bench's reduce_scatter_rmsnorm section: the
** fused op against ncclReduceScatter followed by the plain residual add +
** RMSNorm kernel (bench_rmsnorm_ref.c) on each rank's chunk, on the
** buffers of the residual section (rr_arg, in place). Rows are multiples of
** the group so NCCL's chunks are even. Each path is checked against the
** CPU reference before it is timed: collgen's residual_out bit for bit,
** the baseline's within baseline_tolerance (NCCL rounds as it sums), both
** normed rows within the rounding model; a wrong baseline is reported and
** left out (nan). busbw as nccl-tests' reduce-scatter: algbw from the
** whole x (rows x cols), busbw = algbw * (n-1)/n.
*/
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "bench_rmsnorm_ref.h"
#include "shape.h"

static const void *x_slot(const rr_arg *a, int r, int iter) {
  return a->x[r] + (size_t)(iter % a->nslots) * a->slot;
}

static void launch_fused(bench_t *b, void *vp, int iter) {
  rr_arg *a = vp;
  const void *x[8];
  const int64_t *shapes[8];
  for (int r = 0; r < b->n; ++r) x[r] = x_slot(a, r, iter), shapes[r] = a->shape;
  if (collgen_reduce_scatter_rmsnorm(b->comm, b->dt, 2, shapes, x, (const void *const *)a->res,
                                     a->normed, a->res, (const void *const *)a->gamma, 1e-6f,
                                     1.0f, b->group, b->streams) != COLLGEN_OK)
    die("collgen_reduce_scatter_rmsnorm", collgen_comm_last_error(b->comm));
}

static void launch_nccl(bench_t *b, void *vp, int iter) {
  rr_arg *a = vp;
  const int64_t count = a->rows / group_of(b);
  NC(ncclGroupStart());
  for (int r = 0; r < b->n; ++r)
    NC(ncclReduceScatter(x_slot(a, r, iter), a->sum[r], (size_t)(count * a->cols),
                         nccl_type(b->dt), ncclSum, b->nccl[r], (cudaStream_t)b->streams[r]));
  NC(ncclGroupEnd());
  FOR_LOCAL(b, r)
    launch_plain_add_rmsnorm(b, r, a->sum[r], a->res[r], a->gamma[r], a->normed[r], count,
                             a->cols);
}

/* One call of fn on a fresh residual with poisoned normed outputs: every
** rank's chunk of residual_out equals the reference's bits (`exact`) or is
** within baseline_tolerance, and its normed rows are the RMSNorm of that
** residual_out. 1 when right, else 0 with a message naming `who`. */
static int result_ok(bench_t *b, rr_arg *a, launch_fn fn, const char *who, int exact) {
  const int g = group_of(b);
  const size_t esz = (size_t)esize_of(b), bytes = (size_t)(a->rows * a->cols) * esz;
  void *hx[8], *hres = malloc(bytes), *gamma = malloc((size_t)a->cols * esz);
  void *want_r = malloc(bytes), *got = malloc(bytes);
  if (!hres || !gamma || !want_r || !got) die("check", "out of memory");
  uint64_t seed = 0x5eedull;
  collgen__ref_fill_random(b->dt, hres, a->rows * a->cols, &seed);
  collgen__dev_download(b->comm, 0, gamma, a->gamma[0], (size_t)a->cols * esz);
  for (int r = 0; r < b->n; ++r) {
    hx[r] = malloc(bytes + 1);
    collgen__dev_download(b->comm, r, hx[r], x_slot(a, r, 0), bytes);
    collgen__dev_upload(b->comm, r, a->res[r], hres, bytes);
    collgen__dev_fill(b->comm, r, a->normed[r], 0xff, bytes);
  }
  fn(b, a, 0);
  sync_all(b);
  int ok = 1;
  for (int r = 0; r < b->n && ok; ++r) {
    const int base = r - r % g;
    int64_t start = 0, count = 0;
    collgen__scatter_chunk(a->rows, g, r - base, &start, &count);
    collgen__ref_reduce_scatter_rmsnorm(b->dt, g, r - base, a->rows, a->cols,
                                        (const void *const *)&hx[base], hres, gamma, 1e-6f, 1.0f,
                                        NULL, want_r);
    const int64_t n = count * a->cols;
    collgen__dev_download(b->comm, r, got, a->res[r], (size_t)n * esz);
    ok = values_match(b, got, want_r, n, exact);
    if (!ok)
      fprintf(stderr, "collgen-bench: %s reduce_scatter_rmsnorm %lldx%lld: residual_out of rank "
              "%d differs from the reference%s\n", who, (long long)a->rows, (long long)a->cols, r,
              exact ? "" : " by more than the baseline's tolerance");
    int64_t bad_row = -1;
    void *normed = want_r; /* the reference is compared; its buffer is free now */
    collgen__dev_download(b->comm, r, normed, a->normed[r], (size_t)n * esz);
    if (ok && !normed_rows_ok(b, count, a->cols, normed, got, gamma, &bad_row)) {
      fprintf(stderr, "collgen-bench: %s reduce_scatter_rmsnorm %lldx%lld: normed row %lld of "
              "rank %d wrong\n", who, (long long)a->rows, (long long)a->cols, (long long)bad_row, r);
      ok = 0;
    }
  }
  for (int r = 0; r < b->n; ++r) free(hx[r]);
  free(hres), free(gamma), free(want_r), free(got);
  return ok;
}

void bench_reduce_scatter_rmsnorm(bench_t *b) {
  static const int64_t rows_list[] = {8, 64, 1024, 8192};
  const int64_t cols = 8192;
  const int g = group_of(b);
  printf("\nreduce_scatter_rmsnorm %s, %d GPUs, groups of %d, in place, cols %lld (nccl = "
         "ncclReduceScatter + plain add+RMSNorm kernel; busbw = algbw(x) * (n-1)/n)\n",
         collgen__dtype_name(b->dt), b->n, g, (long long)cols);
  printf("%6s %10s %10s %10s %10s %8s %8s %10s\n", "rows", "eager", "graph", "nccl_eag",
         "nccl_gr", "x_nccl", "busbw", "nccl_busbw");
  uint64_t seed = 0x75ull;
  for (size_t ri = 0; ri < sizeof rows_list / sizeof rows_list[0]; ++ri) {
    const int64_t rows = rows_list[ri] * g;
    if (b->quick && ri % 2) continue;
    rr_arg a;
    rr_alloc(b, &a, rows, cols, 0, &seed);
    if (!result_ok(b, &a, launch_fused, "collgen", 1)) exit(1);
    const size_t bytes = (size_t)(rows * cols) * (size_t)esize_of(b);
    const int batch = batch_for(bytes);
    double ce = time_calls(b, launch_fused, &a, batch, 0);
    double cg = time_calls(b, launch_fused, &a, batch, 1);
    double ne = NAN, ng = NAN;
    if (!b->no_nccl) {
      if (result_ok(b, &a, launch_nccl, "baseline (NCCL + plain)", 0)) {
        ne = time_calls(b, launch_nccl, &a, batch, 0);
        ng = time_calls(b, launch_nccl, &a, batch, 1);
      } else {
        fprintf(stderr, "collgen-bench: the baseline is wrong; its times are left out (nan)\n");
      }
    }
    double algbw = (double)bytes / (cg * 1e3), busbw = algbw * (g - 1) / g;
    double nbusbw = (double)bytes / (ng * 1e3) * (g - 1) / g;
    printf("%6lld %10.2f %10.2f %10.2f %10.2f %8.2f %8.1f %10.1f\n", (long long)rows, ce, cg, ne,
           ng, ng / cg, busbw, nbusbw);
    fflush(stdout);
    if (b->csv)
      fprintf(b->csv, "reduce_scatter_rmsnorm,%s,%d,%d,%zu,%lld,%lld,%.3f,%.3f,%.3f,%.3f,%.2f,"
              "%.2f,%.2f,,,,,\n", collgen__dtype_name(b->dt), b->n, g, bytes, (long long)rows,
              (long long)cols, ce, cg, ne, ng, algbw, busbw, nbusbw);
    rr_free(b, &a);
  }
}
