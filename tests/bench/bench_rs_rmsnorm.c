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

#include "bench.h"
#include "bench_rmsnorm_ref.h"

static void launch_fused(bench_t *b, void *vp, int iter) {
  rr_arg *a = vp;
  const void *x[8];
  const int64_t *shapes[8];
  for (int r = 0; r < b->n; ++r) x[r] = rr_x_of(a, r, iter), shapes[r] = a->shape;
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
    NC(ncclReduceScatter(rr_x_of(a, r, iter), a->sum[r], (size_t)(count * a->cols),
                         nccl_type(b->dt), ncclSum, b->nccl[r], (cudaStream_t)b->streams[r]));
  NC(ncclGroupEnd());
  FOR_LOCAL(b, r)
    launch_plain_add_rmsnorm(b, r, a->sum[r], a->res[r], a->gamma[r], a->normed[r], count,
                             a->cols);
}

static void bench_reduce_scatter_rmsnorm(bench_t *b, size_t max_bytes) {
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
    if (!rr_result_ok(b, &a, launch_fused, "collgen", 1, 1)) exit(1);
    const size_t bytes = (size_t)(rows * cols) * (size_t)esize_of(b);
    const int batch = batch_for(bytes);
    double ce = time_calls(b, launch_fused, &a, batch, 0);
    double cg = time_calls(b, launch_fused, &a, batch, 1);
    double ne = NAN, ng = NAN;
    if (!b->no_nccl) {
      if (rr_result_ok(b, &a, launch_nccl, "baseline (NCCL + plain)", 0, 1)) {
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

const bench_op bench_op_reduce_scatter_rmsnorm = {{{bench_reduce_scatter_rmsnorm, BENCH_IN_RANKS}}};
