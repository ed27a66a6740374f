/*
** bench_scatter.c -- collgen-bench's scatter section: collgen against
** ncclScatter over 1-D tensors of 64 KiB .. max bytes (the root's input;
** the root is each group's last rank, and group rank i gets chunk i of
** it), eager and in CUDA graphs. busbw as nccl-tests' scatter: algbw from
** the root's input, busbw = algbw * (G - 1) / G. Every path is checked
** first, bit for bit (nothing is computed): a wrong collgen result exits
** 1, a wrong baseline is reported and not timed; NCCL's equal chunks need
** a size the group divides (else nan), and --ranks has no NCCL.
*/
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "shape.h"

typedef struct {
  int64_t count, shape[1]; /* the root's input, elements */
  char *in[8], *out[8];
} sc_arg;

/* The root of rank r's group. */
static int root_of(const bench_t *b, int r) { return r - r % group_of(b) + group_of(b) - 1; }

static void launch_collgen_sc(bench_t *b, void *vp, int iter) {
  (void)iter;
  sc_arg *a = vp;
  const int64_t *shapes[8];
  for (int r = 0; r < b->n; ++r) shapes[r] = a->shape;
  int rc = collgen_scatter(b->comm, b->dt, 1, shapes, (const void *const *)a->in,
                           (void *const *)a->out, group_of(b) - 1, b->group, b->streams);
  if (rc != COLLGEN_OK) die("collgen_scatter", collgen_comm_last_error(b->comm));
}

static void launch_nccl_sc(bench_t *b, void *vp, int iter) {
  (void)iter;
  sc_arg *a = vp;
  NC(ncclGroupStart());
  for (int r = 0; r < b->n; ++r)
    NC(ncclScatter(a->in[r], a->out[r], (size_t)(a->count / group_of(b)), nccl_type(b->dt),
                   group_of(b) - 1, b->nccl[r], (cudaStream_t)b->streams[r]));
  NC(ncclGroupEnd());
}

/* Runs fn once into poisoned outputs: every rank must hold its chunk
** (collgen__scatter_chunk) of its root's input. 1 when right. */
static int sc_ok(bench_t *b, sc_arg *a, launch_fn fn, const char *who) {
  const size_t esz = (size_t)esize_of(b), bytes = (size_t)a->count * esz;
  char *root_in = malloc(bytes), *got = malloc(bytes);
  if (!root_in || !got) die("check", "out of memory");
  FOR_LOCAL(b, r) collgen__dev_fill(b->comm, r, a->out[r], 0xff, bytes);
  fn(b, a, 0);
  sync_all(b);
  int ok = 1;
  for (int r = 0; r < b->n && ok; ++r) {
    int64_t start = 0, count = 0;
    collgen__scatter_chunk(a->count, group_of(b), r % group_of(b), &start, &count);
    collgen__dev_download(b->comm, root_of(b, r), root_in, a->in[root_of(b, r)], bytes);
    collgen__dev_download(b->comm, r, got, a->out[r], (size_t)count * esz);
    if (memcmp(got, root_in + (size_t)start * esz, (size_t)count * esz) != 0) {
      fprintf(stderr, "collgen-bench: %s scatter %zu bytes: rank %d differs from its root's "
                      "chunk\n", who, bytes, r);
      ok = 0;
    }
  }
  free(root_in);
  free(got);
  return ok;
}

static void bench_scatter(bench_t *b, size_t max_bytes) {
  sc_arg a;
  memset(&a, 0, sizeof a);
  FOR_LOCAL(b, r) {
    if (collgen__dev_alloc(b->comm, r, max_bytes, (void **)&a.in[r]) ||
        collgen__dev_alloc(b->comm, r, max_bytes, (void **)&a.out[r]))
      die("alloc", collgen_comm_last_error(b->comm));
    upload_random(b, r, a.in[r], max_bytes);
  }
  const int g = group_of(b);
  printf("\nscatter %s, %d GPUs, groups of %d, root the group's last rank (us per call; bytes = "
         "the root's input; busbw = algbw * (G-1)/G as nccl-tests; nccl = ncclScatter)\n",
         collgen__dtype_name(b->dt), b->n, g);
  printf("%10s %10s %10s %9s %9s %10s %10s %9s %8s %8s\n", "bytes", "eager", "graph", "algbw",
         "busbw", "nccl_eag", "nccl_gr", "nccl_bus", "x_eager", "x_graph");
  for (size_t bytes = 64u << 10; bytes <= max_bytes; bytes *= 4) {
    if (b->quick && bytes != (256u << 10) && bytes != (16u << 20) && bytes != (256u << 20))
      continue;
    a.count = a.shape[0] = (int64_t)(bytes / (size_t)esize_of(b));
    if (!sc_ok(b, &a, launch_collgen_sc, "collgen")) exit(1);
    const int batch = batch_for(bytes);
    double ce = time_calls(b, launch_collgen_sc, &a, batch, 0);
    double cg = time_calls(b, launch_collgen_sc, &a, batch, 1);
    double ne = NAN, ng = NAN;
    if (!b->tune && !b->no_nccl && a.count % g == 0 &&
        sc_ok(b, &a, launch_nccl_sc, "baseline (NCCL)")) {
      ne = time_calls(b, launch_nccl_sc, &a, batch, 0);
      ng = time_calls(b, launch_nccl_sc, &a, batch, 1);
    }
    const double algbw = (double)bytes / (cg * 1e3), busbw = algbw * (g - 1) / g;
    const double nbus = (double)bytes / (ng * 1e3) * (g - 1) / g;
    printf("%10zu %10.2f %10.2f %9.1f %9.1f ", bytes, ce, cg, algbw, busbw);
    print_us(10, ne);
    print_us(11, ng);
    printf(" %9.1f %8.2f %8.2f\n", nbus, ne / ce, ng / cg);
    fflush(stdout);
    if (b->csv)
      fprintf(b->csv, "scatter,%s,%d,%d,%zu,0,0,%.3f,%.3f,%.3f,%.3f,%.2f,%.2f,%.2f,,,,,\n",
              collgen__dtype_name(b->dt), b->n, g, bytes, ce, cg, ne, ng, algbw, busbw, nbus);
  }
  FOR_LOCAL(b, r) {
    collgen__dev_free(b->comm, r, a.in[r]);
    collgen__dev_free(b->comm, r, a.out[r]);
  }
}

const bench_op bench_op_scatter = {{{bench_scatter, BENCH_IN_RANKS}}};
