/*
** test_gpu_reduce_scatter_sum.c -- reduce_scatter_sum on real GPUs against
** the CPU reference (part of the test_gpu binary; helpers in test_gpu.h).
**
** Every run makes fresh random inputs per rank, poisons each output buffer
** (0xff, NaN in every dtype) one row past the largest chunk, and checks
** every rank: its chunk bit for bit against collgen__ref_reduce_scatter_sum,
** bit for bit against collgen_allreduce_sum's output for the same rows (on
** the same inputs, same group), the poison past its chunk untouched, and its
** input unchanged. Shapes give uneven chunks, chunks of 0 rows (fewer rows
** than ranks), 16-byte aligned and unaligned chunk starts, and misaligned
** buffers; 2, 4 and 8 ranks mapped onto the GPUs, every group size; a CUDA
** graph replayed with new data; a missing peer times out.
*/
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collgen.h"
#include "reference.h"
#include "shape.h"
#include "test_gpu.h"

typedef struct {
  collgen_comm_t *c;
  collgen_dtype_t dt;
  int64_t rows, cols;
  int group, misalign;
  collgen_stream_t streams[8];
  void *alloc_in[8], *alloc_out[8], *alloc_full[8];
  void *in[8], *out[8], *full[8]; /* full: allreduce_sum's output */
  void *host[8], *want, *got;
  size_t in_bytes, out_bytes;     /* out: the largest chunk plus one row */
} rs_case;

static void rs_setup(rs_case *t) {
  const size_t es = (size_t)collgen__dtype_bytes(t->dt), row = (size_t)t->cols * es;
  const int g = t->group ? t->group : t->c->ndev;
  t->in_bytes = (size_t)t->rows * row;
  t->out_bytes = (size_t)((t->rows + g - 1) / g + 1) * row;
  const size_t pad = (size_t)t->misalign * es + 16;
  make_streams(t->c, t->streams);
  for (int r = 0; r < t->c->ndev; ++r) {
    cr_assert_eq(collgen__dev_alloc(t->c, r, t->in_bytes + pad, &t->alloc_in[r]), COLLGEN_OK);
    cr_assert_eq(collgen__dev_alloc(t->c, r, t->out_bytes + pad, &t->alloc_out[r]), COLLGEN_OK);
    cr_assert_eq(collgen__dev_alloc(t->c, r, t->in_bytes + 16, &t->alloc_full[r]), COLLGEN_OK);
    t->in[r] = (char *)t->alloc_in[r] + (size_t)t->misalign * es;
    t->out[r] = (char *)t->alloc_out[r] + (size_t)t->misalign * es;
    t->full[r] = t->alloc_full[r];
    t->host[r] = malloc(t->in_bytes + 16);
    cr_assert(t->host[r]);
  }
  t->want = malloc(t->in_bytes + 16);
  t->got = malloc(t->in_bytes + t->out_bytes + 16);
  cr_assert(t->want && t->got);
}

static void rs_teardown(rs_case *t) {
  for (int r = 0; r < t->c->ndev; ++r) {
    collgen__dev_free(t->c, r, t->alloc_in[r]);
    collgen__dev_free(t->c, r, t->alloc_out[r]);
    collgen__dev_free(t->c, r, t->alloc_full[r]);
    free(t->host[r]);
  }
  free(t->want);
  free(t->got);
  free_streams(t->c, t->streams);
}

/* Fresh inputs and poisoned outputs on every rank. */
static void rs_fill(rs_case *t) {
  for (int r = 0; r < t->c->ndev; ++r) {
    fill_random(t->dt, t->host[r], t->rows * t->cols);
    cr_assert_eq(collgen__dev_upload(t->c, r, t->in[r], t->host[r], t->in_bytes), COLLGEN_OK);
    cr_assert_eq(collgen__dev_fill(t->c, r, t->out[r], 0xff, t->out_bytes), COLLGEN_OK);
  }
}

static int rs_call(rs_case *t) {
  int64_t shape[2] = {t->rows, t->cols};
  const int64_t *shapes[8];
  for (int r = 0; r < t->c->ndev; ++r) shapes[r] = shape;
  return collgen_reduce_scatter_sum(t->c, t->dt, 2, shapes, (const void *const *)t->in, t->out,
                                    t->group, t->streams);
}

/* Checks every rank's output against the reference and (with_allreduce)
** against allreduce_sum's rows; the inputs must be unchanged. */
static void rs_check(rs_case *t, int with_allreduce, const char *what) {
  const size_t es = (size_t)collgen__dtype_bytes(t->dt), row = (size_t)t->cols * es;
  const int ndev = t->c->ndev, g = t->group ? t->group : ndev;
  if (with_allreduce) {
    const int64_t *shapes[8];
    const int64_t n = t->rows * t->cols;
    for (int r = 0; r < ndev; ++r) shapes[r] = &n;
    cr_assert_eq(collgen_allreduce_sum(t->c, t->dt, 1, shapes, (const void *const *)t->in,
                                       t->full, t->group, t->streams),
                 COLLGEN_OK, "allreduce: %s", collgen_comm_last_error(t->c));
  }
  cr_assert_eq(collgen__dev_sync_all(t->c, t->streams), COLLGEN_OK, "%s", t->c->err);
  for (int base = 0; base < ndev; base += g)
    for (int r = base; r < base + g; ++r) {
      int64_t start = 0, count = 0;
      collgen__scatter_chunk(t->rows, g, r - base, &start, &count);
      const size_t bytes = (size_t)count * row;
      collgen__ref_reduce_scatter_sum(t->dt, t->rows, t->cols, g, r - base,
                                      (const void *const *)&t->host[base], t->want);
      unsigned char *got = t->got;
      cr_assert_eq(collgen__dev_download(t->c, r, got, t->out[r], t->out_bytes), COLLGEN_OK);
      if (memcmp(got, t->want, bytes) != 0) {
        int64_t i = 0;
        while (memcmp(got + (size_t)i * es, (char *)t->want + (size_t)i * es, es) == 0) ++i;
        cr_assert_fail("%s: dtype %d [%lld, %lld] group %d misalign %d: rank %d element %lld "
                       "of its chunk: got %g want %g", what, (int)t->dt, (long long)t->rows,
                       (long long)t->cols, g, t->misalign, r, (long long)i,
                       collgen__ref_load(t->dt, got, i), collgen__ref_load(t->dt, t->want, i));
      }
      for (size_t b = bytes; b < t->out_bytes; ++b)
        cr_assert_eq(got[b], 0xff, "%s: rank %d wrote byte %zu past its %lld rows", what, r, b,
                     (long long)count);
      if (with_allreduce) {
        cr_assert_eq(collgen__dev_download(t->c, r, got, t->full[r], t->in_bytes), COLLGEN_OK);
        cr_assert(memcmp(got + (size_t)start * row, t->want, bytes) == 0,
                  "%s: rank %d: not allreduce_sum's bits for rows %lld..%lld", what, r,
                  (long long)start, (long long)(start + count));
      }
      cr_assert_eq(collgen__dev_download(t->c, r, got, t->in[r], t->in_bytes), COLLGEN_OK);
      cr_assert(memcmp(got, t->host[r], t->in_bytes) == 0, "%s: rank %d's input changed", what, r);
    }
}

/* One case: `runs` rounds of fresh data, the first compared with allreduce. */
static void rs_run(collgen_comm_t *c, collgen_dtype_t dt, int64_t rows, int64_t cols, int group,
                   int misalign, int runs) {
  rs_case t;
  memset(&t, 0, sizeof t);
  t.c = c;
  t.dt = dt;
  t.rows = rows;
  t.cols = cols;
  t.group = group;
  t.misalign = misalign;
  rs_setup(&t);
  for (int i = 0; i < runs; ++i) {
    rs_fill(&t);
    cr_assert_eq(rs_call(&t), COLLGEN_OK, "reduce_scatter: %s", collgen_comm_last_error(c));
    rs_check(&t, i == 0, "eager");
  }
  rs_teardown(&t);
}

static const collgen_dtype_t RS_DTYPES[] = {COLLGEN_DTYPE_BF16, COLLGEN_DTYPE_F16,
                                            COLLGEN_DTYPE_F32};
/* rows x cols: uneven chunks, single rows, unaligned chunk starts (odd
** rows of odd cols), 16-byte rows, a vector tail, and one larger tensor */
static const int64_t RS_SHAPES[][2] = {{1, 1}, {2, 1}, {3, 5}, {7, 3}, {8, 8}, {9, 1000},
                                       {4097, 1}, {5, 4096}, {257, 1031}};

Test(reduce_scatter_sum, two_ranks_every_dtype_and_shape, .timeout = 300) {
  collgen_comm_t *c = make_comm(2, 0, 0, 0);
  for (size_t d = 0; d < sizeof RS_DTYPES / sizeof *RS_DTYPES; ++d)
    for (size_t k = 0; k < sizeof RS_SHAPES / sizeof *RS_SHAPES; ++k)
      for (int misalign = 0; misalign < 2; ++misalign)
        rs_run(c, RS_DTYPES[d], RS_SHAPES[k][0], RS_SHAPES[k][1], 0, misalign, 2);
  collgen_comm_destroy(c);
}

/* 4 and 8 ranks mapped onto the GPUs, every group size (1 copies), fewer
** rows than ranks (empty chunks). */
Test(reduce_scatter_sum, four_and_eight_ranks_mapped_every_group_size, .timeout = 300) {
  static const int64_t shapes[][2] = {{1, 8}, {3, 7}, {13, 64}, {100, 33}};
  for (int ranks = 4; ranks <= 8; ranks *= 2) {
    collgen_comm_t *c = make_comm(ranks, 0, 0, 0);
    for (int g = 1; g <= ranks; g *= 2)
      for (size_t k = 0; k < sizeof shapes / sizeof *shapes; ++k)
        rs_run(c, k % 2 ? COLLGEN_DTYPE_F32 : COLLGEN_DTYPE_BF16, shapes[k][0], shapes[k][1], g,
               0, 1);
    collgen_comm_destroy(c);
  }
  collgen_comm_t *c = make_comm(6, 0, 0, 0); /* groups of 3 and 6 */
  rs_run(c, COLLGEN_DTYPE_F16, 10, 24, 3, 0, 1);
  rs_run(c, COLLGEN_DTYPE_F16, 10, 24, 6, 1, 1);
  collgen_comm_destroy(c);
}

Test(reduce_scatter_sum, zero_rows_write_nothing, .timeout = 60) {
  collgen_comm_t *c = make_comm(2, 0, 0, 0);
  rs_case t;
  memset(&t, 0, sizeof t);
  t.c = c;
  t.dt = COLLGEN_DTYPE_BF16;
  t.rows = 0;
  t.cols = 64;
  rs_setup(&t);
  rs_fill(&t);
  cr_assert_eq(rs_call(&t), COLLGEN_OK, "%s", collgen_comm_last_error(c));
  rs_check(&t, 0, "zero rows");
  rs_teardown(&t);
  collgen_comm_destroy(c);
}

/* One captured call replayed 20 times, new inputs uploaded before each. */
Test(reduce_scatter_sum, graph_replay_with_new_data, .timeout = 120) {
  collgen_comm_t *c = make_comm(2, 0, 0, 0);
  for (int group = 0; group <= 1; ++group) {
    rs_case t;
    memset(&t, 0, sizeof t);
    t.c = c;
    t.dt = COLLGEN_DTYPE_BF16;
    t.rows = 301;
    t.cols = 520;
    t.group = group;
    rs_setup(&t);
    rs_fill(&t);
    cr_assert_eq(rs_call(&t), COLLGEN_OK, "%s", collgen_comm_last_error(c)); /* loads first */
    rs_check(&t, 1, "before capture");
    CUgraph graph[2];
    CUgraphExec exec[2];
    graph_capture_begin(c, t.streams);
    cr_assert_eq(rs_call(&t), COLLGEN_OK, "%s", collgen_comm_last_error(c));
    graph_capture_end(c, t.streams, graph, exec);
    for (int it = 0; it < 20; ++it) {
      rs_fill(&t);
      graph_launch(c, t.streams, exec);
      rs_check(&t, 0, "replay");
    }
    graph_destroy(c, graph, exec);
    rs_teardown(&t);
  }
  collgen_comm_destroy(c);
}

/* Rank 1 never launches: rank 0's barrier gives up, named. */
Test(reduce_scatter_sum, missing_peer_times_out, .timeout = 60) {
  collgen_comm_t *c = make_comm(2, 1, 300, 0x1);
  collgen_stream_t s[2];
  make_streams(c, s);
  void *in[2], *out[2];
  for (int r = 0; r < 2; ++r) {
    cr_assert_eq(collgen__dev_alloc(c, r, 4096, &in[r]), COLLGEN_OK);
    cr_assert_eq(collgen__dev_alloc(c, r, 4096, &out[r]), COLLGEN_OK);
  }
  int64_t shape[1] = {1024};
  const int64_t *shapes[2] = {shape, shape};
  cr_assert_eq(collgen_reduce_scatter_sum(c, COLLGEN_DTYPE_F32, 1, shapes,
                                          (const void *const *)in, out, 0, s), COLLGEN_OK);
  cr_expect_eq(collgen__dev_sync_all(c, s), COLLGEN_ERR_TIMEOUT);
  cr_expect(strstr(collgen_comm_last_error(c), "for rank 1"), "%s", collgen_comm_last_error(c));
  for (int r = 0; r < 2; ++r) {
    collgen__dev_free(c, r, in[r]);
    collgen__dev_free(c, r, out[r]);
  }
  free_streams(c, s);
  collgen_comm_destroy(c);
}
