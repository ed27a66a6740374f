/*
** test_gpu_all_gather.c -- all_gather on the GPU (part of the test_gpu
** binary): fresh random shards, poisoned outputs and their margins, exact
** comparison with the CPU reference (collgen__ref_all_gather) on every rank;
** 2, 4 and 8 ranks mapped onto the GPU(s), every group size, every element
** size (copy-only dtypes too), uneven and empty shards, in place,
** misaligned buffers (element-wise shards), a CUDA graph replayed with new
** data, and a missing peer that times out.
*/
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "catalog.h"
#include "collgen.h"
#include "devbuf.h"
#include "reference.h"
#include "test_gpu.h"

#define GA_MARGIN 64 /* poisoned bytes after each output, checked untouched */

typedef struct {
  collgen_comm_t *c;
  collgen_dtype_t dt;
  int group, inplace, misalign; /* misalign: elements from the allocations */
  int64_t rows[8], inner;       /* shard r: [rows[r], inner] */
  int64_t shape[8][2];
  const int64_t *shapes[8];
  void *alloc_in[8], *alloc_out[8], *in[8], *out[8], *host[8];
  size_t out_bytes[8], offset[8]; /* the group's gathered bytes; shard r's offset */
  collgen_stream_t streams[8];
} ga_case;

static size_t esize_of(const ga_case *t) { return (size_t)collgen__dtype_bytes(t->dt); }
static int group_of(const ga_case *t) { return t->group ? t->group : t->c->ndev; }
static size_t shard_bytes(const ga_case *t, int r) {
  return (size_t)(t->rows[r] * t->inner) * esize_of(t);
}

static void ga_setup(ga_case *t) {
  const int n = t->c->ndev, g = group_of(t);
  const size_t skew = (size_t)t->misalign * esize_of(t);
  make_streams(t->c, t->streams);
  for (int r = 0; r < n; ++r) {
    const int base = r / g * g;
    t->offset[r] = t->out_bytes[r] = 0;
    for (int k = base; k < base + g; ++k) {
      if (k < r) t->offset[r] += shard_bytes(t, k);
      t->out_bytes[r] += shard_bytes(t, k);
    }
    t->shape[r][0] = t->rows[r];
    t->shape[r][1] = t->inner;
    t->shapes[r] = t->shape[r];
    t->host[r] = malloc(shard_bytes(t, r) + 1);
    cr_assert(t->host[r]);
    cr_assert_eq(collgen__dev_alloc(t->c, r, t->out_bytes[r] + skew + GA_MARGIN, &t->alloc_out[r]),
                 COLLGEN_OK, "%s", t->c->err);
    t->out[r] = (char *)t->alloc_out[r] + skew;
    if (t->inplace) {
      t->in[r] = (char *)t->out[r] + t->offset[r];
    } else {
      cr_assert_eq(collgen__dev_alloc(t->c, r, shard_bytes(t, r) + skew + 1, &t->alloc_in[r]),
                   COLLGEN_OK);
      t->in[r] = (char *)t->alloc_in[r] + skew;
    }
  }
}

static void ga_teardown(ga_case *t) {
  for (int r = 0; r < t->c->ndev; ++r) {
    collgen__dev_free(t->c, r, t->alloc_in[r]);
    collgen__dev_free(t->c, r, t->alloc_out[r]);
    free(t->host[r]);
  }
  free_streams(t->c, t->streams);
}

/* Fresh shards, every output (and its margin) poisoned, the shards
** uploaded (in place: into the output at their offsets). */
static void ga_fill(ga_case *t) {
  for (int r = 0; r < t->c->ndev; ++r) {
    fill_random(t->dt, t->host[r], t->rows[r] * t->inner);
    cr_assert_eq(collgen__dev_fill(t->c, r, t->out[r], 0xab, t->out_bytes[r] + GA_MARGIN),
                 COLLGEN_OK);
    if (shard_bytes(t, r))
      cr_assert_eq(collgen__dev_upload(t->c, r, t->in[r], t->host[r], shard_bytes(t, r)),
                   COLLGEN_OK);
  }
}

static int ga_call(ga_case *t) {
  return collgen_all_gather(t->c, t->dt, 2, t->shapes, (const void *const *)t->in, t->out,
                            t->group, t->streams);
}

/* Every rank's output against the reference over its group's shards, and
** the margin after it untouched. */
static void ga_verify(ga_case *t, const char *when) {
  const int n = t->c->ndev, g = group_of(t);
  cr_assert_eq(collgen__dev_sync_all(t->c, t->streams), COLLGEN_OK, "%s", t->c->err);
  for (int r = 0; r < n; ++r) {
    const int base = r / g * g;
    int64_t elems[8];
    for (int k = 0; k < g; ++k) elems[k] = t->rows[base + k] * t->inner;
    unsigned char *expect = malloc(t->out_bytes[r] + 1), *got = malloc(t->out_bytes[r] + GA_MARGIN);
    cr_assert(expect && got);
    collgen__ref_all_gather(t->dt, g, elems, (const void *const *)&t->host[base], expect);
    cr_assert_eq(collgen__dev_download(t->c, r, got, t->out[r], t->out_bytes[r] + GA_MARGIN),
                 COLLGEN_OK);
    for (size_t i = 0; i < t->out_bytes[r]; ++i)
      if (got[i] != expect[i])
        cr_assert_fail("%s: dtype %d group %d inner %lld inplace %d misalign %d: rank %d byte "
                       "%zu of %zu: got 0x%02x want 0x%02x", when, (int)t->dt, g,
                       (long long)t->inner, t->inplace, t->misalign, r, i, t->out_bytes[r],
                       got[i], expect[i]);
    for (size_t i = 0; i < GA_MARGIN; ++i)
      if (got[t->out_bytes[r] + i] != 0xab)
        cr_assert_fail("%s: rank %d wrote %zu bytes past its output", when, r, i + 1);
    free(expect);
    free(got);
  }
}

static void ga_init(ga_case *t, collgen_comm_t *c, collgen_dtype_t dt, int group,
                    const int64_t *rows, int64_t inner, int inplace, int misalign) {
  memset(t, 0, sizeof *t);
  t->c = c;
  t->dt = dt;
  t->group = group;
  t->inner = inner;
  t->inplace = inplace;
  t->misalign = misalign;
  for (int r = 0; r < c->ndev; ++r) t->rows[r] = rows[r];
}

/* `runs` calls on fresh data, each checked. */
static void ga_check_n(collgen_comm_t *c, collgen_dtype_t dt, int group, const int64_t *rows,
                       int64_t inner, int inplace, int misalign, int runs) {
  ga_case t;
  ga_init(&t, c, dt, group, rows, inner, inplace, misalign);
  ga_setup(&t);
  for (int i = 0; i < runs; ++i) {
    ga_fill(&t);
    cr_assert_eq(ga_call(&t), COLLGEN_OK, "all_gather: %s", collgen_comm_last_error(c));
    ga_verify(&t, "eager");
  }
  ga_teardown(&t);
}

static void ga_check(collgen_comm_t *c, collgen_dtype_t dt, int group, const int64_t *rows,
                     int64_t inner, int inplace, int misalign) {
  ga_check_n(c, dt, group, rows, inner, inplace, misalign, 1);
}

/* Every dtype (element sizes 1, 2, 4, 8), shard sizes that are and are not
** 16-byte multiples (vector and element paths, tails), in place and
** misaligned. */
Test(all_gather, two_ranks_every_dtype_size_in_place_and_misaligned, .timeout = 600) {
  collgen_comm_t *c = make_comm(2, 0, 0, 0);
  static const int64_t inners[] = {1, 3, 8, 1000, 4099};
  int64_t rows[2] = {5, 3};
  for (int dt = 0; dt < collgen__dtype_count(); ++dt)
    for (size_t k = 0; k < sizeof inners / sizeof *inners; ++k) {
      const collgen_dtype_t d = collgen__dtype_at(dt)->dtype;
      ga_check(c, d, 0, rows, inners[k], 0, 0);
      ga_check(c, d, 0, rows, inners[k], 1, 0);
      ga_check(c, d, 0, rows, inners[k], 0, 1);
    }
  int64_t big[2] = {1 << 12, (1 << 12) + 1};
  ga_check(c, COLLGEN_DTYPE_BF16, 0, big, 1024, 0, 0); /* 16 MiB gathered */
  collgen_comm_destroy(c);
}

Test(all_gather, uneven_and_empty_shards, .timeout = 300) {
  collgen_comm_t *c = make_comm(2, 0, 0, 0);
  int64_t a[2] = {0, 7}, b[2] = {9, 0}, d[2] = {1, 300};
  ga_check(c, COLLGEN_DTYPE_BF16, 0, a, 4096, 0, 0);
  ga_check(c, COLLGEN_DTYPE_U8, 0, b, 33, 1, 0);
  ga_check(c, COLLGEN_DTYPE_I64, 0, d, 5, 0, 0);
  /* back to back calls where one rank sends nothing */
  ga_check_n(c, COLLGEN_DTYPE_F16, 0, a, 100, 0, 0, 50);
  collgen_comm_destroy(c);
}

Test(all_gather, four_and_eight_ranks_every_group_size, .timeout = 600) {
  int64_t rows[8] = {3, 0, 5, 1, 2, 2, 0, 4};
  collgen_comm_t *c4 = make_comm(4, 4, 0, 0);
  for (int g = 1; g <= 4; g *= 2) {
    ga_check(c4, COLLGEN_DTYPE_BF16, g, rows, 4096, 0, 0);
    ga_check(c4, COLLGEN_DTYPE_I8, g, rows, 37, 1, 0);
    ga_check(c4, COLLGEN_DTYPE_F32, g, rows, 1000, 0, 1);
  }
  collgen_comm_destroy(c4);
  collgen_comm_t *c8 = make_comm(8, 4, 0, 0);
  for (int g = 1; g <= 8; g *= 2) {
    ga_check(c8, COLLGEN_DTYPE_BF16, g, rows, 2048, 0, 0);
    ga_check(c8, COLLGEN_DTYPE_F64, g, rows, 7, 1, 0);
  }
  collgen_comm_destroy(c8);
}

/* A graph captured once (after an eager call loaded the module), replayed
** with new shards each time. */
Test(all_gather, graph_capture_and_replay_with_new_data, .timeout = 300) {
  collgen_comm_t *c = make_comm(2, 0, 0, 0);
  int64_t rows[2] = {3, 6};
  for (int inplace = 0; inplace <= 1; ++inplace) {
    ga_case t;
    ga_init(&t, c, COLLGEN_DTYPE_BF16, 0, rows, 1000, inplace, 0);
    ga_setup(&t);
    ga_fill(&t);
    cr_assert_eq(ga_call(&t), COLLGEN_OK, "%s", collgen_comm_last_error(c));
    ga_verify(&t, "eager");
    CUgraph graph[2];
    CUgraphExec exec[2];
    graph_capture_begin(c, t.streams);
    cr_assert_eq(ga_call(&t), COLLGEN_OK, "%s", collgen_comm_last_error(c));
    graph_capture_end(c, t.streams, graph, exec);
    for (int it = 0; it < 20; ++it) {
      ga_fill(&t);
      graph_launch(c, t.streams, exec);
      ga_verify(&t, "replay");
    }
    graph_destroy(c, graph, exec);
    ga_teardown(&t);
  }
  collgen_comm_destroy(c);
}

Test(all_gather, missing_peer_times_out, .timeout = 60) {
  collgen_comm_t *c = make_comm(2, 1, 300, 0x1); /* launch rank 0 only, one block */
  ga_case t;
  int64_t rows[2] = {4, 4};
  ga_init(&t, c, COLLGEN_DTYPE_F32, 0, rows, 256, 0, 0);
  ga_setup(&t);
  cr_assert_eq(ga_call(&t), COLLGEN_OK);
  cr_expect_eq(collgen__dev_sync_all(c, t.streams), COLLGEN_ERR_TIMEOUT);
  cr_expect(strstr(collgen_comm_last_error(c), "for rank 1 (device"), "%s",
            collgen_comm_last_error(c));
  ga_teardown(&t);
  collgen_comm_destroy(c);
}
