/*
** bench_reduce_scatter.c -- collgen-bench's reduce_scatter_sum section:
** collgen against ncclReduceScatter over 1-D tensors of 64 KiB .. max
** bytes (every rank's input; each rank gets 1/G of it), eager and in CUDA
** graphs. Bus bandwidth as nccl-tests: algbw from the input size (the
** gathered size), busbw = algbw * (G - 1) / G. Every path is checked
** first: collgen bit for bit, NCCL within the baseline tolerance (a wrong
** or unusable baseline is reported, not timed: groups smaller than the
** communicator have no NCCL communicator here).
*/
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "shape.h"

typedef struct {
  int64_t count, shape[1];
  char *in[8], *out[8];
} rs_arg;

static void launch_collgen_rs(bench_t *b, void *vp, int iter) {
  (void)iter;
  rs_arg *a = vp;
  const int64_t *shapes[8];
  for (int r = 0; r < b->n; ++r) shapes[r] = a->shape;
  int rc = collgen_reduce_scatter_sum(b->comm, b->dt, 1, shapes, (const void *const *)a->in,
                                      (void *const *)a->out, b->group, b->streams);
  if (rc != COLLGEN_OK) die("collgen_reduce_scatter_sum", collgen_comm_last_error(b->comm));
}

static void launch_nccl_rs(bench_t *b, void *vp, int iter) {
  (void)iter;
  rs_arg *a = vp;
  NC(ncclGroupStart());
  for (int r = 0; r < b->n; ++r)
    NC(ncclReduceScatter(a->in[r], a->out[r], (size_t)(a->count / b->n), nccl_type(b->dt),
                         ncclSum, b->nccl[r], (cudaStream_t)b->streams[r]));
  NC(ncclGroupEnd());
}

/* Runs fn once into poisoned outputs and checks every rank's chunk against
** the CPU reference (exact: bit for bit). 1 when right. */
static int rs_ok(bench_t *b, rs_arg *a, launch_fn fn, const char *who, int exact) {
  const size_t bytes = (size_t)a->count * (size_t)esize_of(b);
  void *host[8], *expect = malloc(bytes), *got = malloc(bytes);
  if (!expect || !got) die("check", "out of memory");
  for (int r = 0; r < b->n; ++r) {
    host[r] = malloc(bytes);
    if (!host[r]) die("check", "out of memory");
    collgen__dev_download(b->comm, r, host[r], a->in[r], bytes);
    collgen__dev_fill(b->comm, r, a->out[r], 0xff, bytes);
  }
  fn(b, a, 0);
  sync_all(b);
  int ok = 1;
  const int g = group_of(b);
  for (int r = 0; r < b->n && ok; ++r) {
    int64_t start = 0, count = 0;
    collgen__scatter_chunk(a->count, g, r % g, &start, &count);
    collgen__ref_reduce_scatter_sum(b->dt, a->count, 1, g, r % g,
                                    (const void *const *)&host[r - r % g], expect);
    collgen__dev_download(b->comm, r, got, a->out[r], (size_t)count * (size_t)esize_of(b));
    if (!values_match(b, got, expect, count, exact)) {
      fprintf(stderr, "collgen-bench: %s reduce_scatter %zu bytes: rank %d differs from the CPU "
                      "reference\n", who, bytes, r);
      ok = 0;
    }
  }
  for (int r = 0; r < b->n; ++r) free(host[r]);
  free(expect);
  free(got);
  return ok;
}

static void bench_reduce_scatter(bench_t *b, size_t max_bytes) {
  rs_arg a;
  memset(&a, 0, sizeof a);
  FOR_LOCAL(b, r) {
    if (collgen__dev_alloc(b->comm, r, max_bytes, (void **)&a.in[r]) ||
        collgen__dev_alloc(b->comm, r, max_bytes, (void **)&a.out[r]))
      die("alloc", collgen_comm_last_error(b->comm));
    upload_random(b, r, a.in[r], max_bytes);
  }
  const int g = group_of(b);
  printf("\nreduce_scatter_sum %s, %d GPUs, groups of %d (us per call; bytes = each rank's "
         "input; busbw = algbw * (G-1)/G as nccl-tests; nccl = ncclReduceScatter)\n",
         collgen__dtype_name(b->dt), b->n, g);
  printf("%10s %10s %10s %9s %9s %10s %10s %9s %8s %8s\n", "bytes", "eager", "graph", "algbw",
         "busbw", "nccl_eag", "nccl_gr", "nccl_bus", "x_eager", "x_graph");
  for (size_t bytes = 64u << 10; bytes <= max_bytes; bytes *= 4) {
    if (b->quick && bytes != (256u << 10) && bytes != (16u << 20) && bytes != (256u << 20))
      continue;
    a.count = a.shape[0] = (int64_t)(bytes / (size_t)esize_of(b));
    if (!rs_ok(b, &a, launch_collgen_rs, "collgen", 1)) exit(1);
    const int batch = batch_for(bytes);
    double ce = time_calls(b, launch_collgen_rs, &a, batch, 0);
    double cg = time_calls(b, launch_collgen_rs, &a, batch, 1);
    double ne = NAN, ng = NAN;
    if (!b->tune && !b->no_nccl && g == b->n && rs_ok(b, &a, launch_nccl_rs, "baseline (NCCL)", 0)) {
      ne = time_calls(b, launch_nccl_rs, &a, batch, 0);
      ng = time_calls(b, launch_nccl_rs, &a, batch, 1);
    }
    const double algbw = (double)bytes / (cg * 1e3), busbw = algbw * (g - 1) / g;
    const double nbus = (double)bytes / (ng * 1e3) * (g - 1) / g;
    printf("%10zu %10.2f %10.2f %9.1f %9.1f ", bytes, ce, cg, algbw, busbw);
    print_us(10, ne);
    print_us(11, ng);
    printf(" %9.1f %8.2f %8.2f\n", nbus, ne / ce, ng / cg);
    fflush(stdout);
    if (b->csv)
      fprintf(b->csv, "reduce_scatter_sum,%s,%d,%d,%zu,0,0,%.3f,%.3f,%.3f,%.3f,%.2f,%.2f,%.2f,,,,,\n",
              collgen__dtype_name(b->dt), b->n, g, bytes, ce, cg, ne, ng, algbw, busbw, nbus);
  }
  FOR_LOCAL(b, r) {
    collgen__dev_free(b->comm, r, a.in[r]);
    collgen__dev_free(b->comm, r, a.out[r]);
  }
}

const bench_op bench_op_reduce_scatter_sum = {{{bench_reduce_scatter, BENCH_IN_RANKS}}};
