/*
** test_gpu_broadcast.c -- broadcast on real GPUs against the CPU reference
** (part of the test_gpu binary; helpers in test_gpu.h).
**
** Every run makes fresh random inputs on every rank (the non-roots' too, so
** a kernel that read the wrong rank shows), poisons every output and a
** margin of MARGIN bytes around every buffer, and checks every rank: its
** output equal, byte for byte, to collgen__ref_broadcast of its group's
** root, every input unchanged, nothing written in the margins. Non-root
** inputs are passed as NULL in half the cases. Shapes reach both kernels
** (16-byte vectors and the scalar path, odd tails), every element size
** (u8 .. f64), every group size of 2, 4 and 8 ranks mapped onto the GPUs,
** every root, in place on the root; a CUDA graph is replayed with new data;
** a missing peer times out, named.
*/
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collgen.h"
#include "catalog.h"
#include "reference.h"
#include "test_gpu.h"

#define MARGIN 64 /* poisoned bytes before and after every buffer */
#define POISON 0xa7

enum { IN, OUT, NBUF };

typedef struct {
  collgen_comm_t *c;
  collgen_dtype_t dt;
  int group, root;  /* group size (resolved), root group rank */
  int64_t n;        /* elements */
  int inplace;      /* the root's output is its input */
  int misalign;     /* byte offset of every pointer (an element multiple; not 16) */
  int null_inputs;  /* pass NULL for the non-root inputs */
  void *alloc[8][NBUF], *dev[8][NBUF];
  void *host_in[8];
  collgen_stream_t streams[8];
} bc_case;

static size_t bytes_of(const bc_case *t) { return (size_t)t->n * collgen__dtype_bytes(t->dt); }
static size_t alloc_bytes(const bc_case *t) { return 2 * MARGIN + 16 + bytes_of(t); }
static int is_root(const bc_case *t, int r) { return r % t->group == t->root; }

static void bc_setup(bc_case *t) {
  make_streams(t->c, t->streams);
  for (int r = 0; r < t->c->ndev; ++r) {
    for (int k = 0; k < NBUF; ++k) {
      cr_assert_eq(collgen__dev_alloc(t->c, r, alloc_bytes(t), &t->alloc[r][k]), COLLGEN_OK);
      t->dev[r][k] = (char *)t->alloc[r][k] + MARGIN + t->misalign;
    }
    if (t->inplace && is_root(t, r)) t->dev[r][OUT] = t->dev[r][IN];
    t->host_in[r] = malloc(bytes_of(t) + 1);
    cr_assert(t->host_in[r]);
  }
}

static void bc_teardown(bc_case *t) {
  for (int r = 0; r < t->c->ndev; ++r) {
    for (int k = 0; k < NBUF; ++k) collgen__dev_free(t->c, r, t->alloc[r][k]);
    free(t->host_in[r]);
  }
  free_streams(t->c, t->streams);
}

/* Fresh inputs everywhere, poison everywhere else. */
static void bc_fill(bc_case *t) {
  for (int r = 0; r < t->c->ndev; ++r) {
    for (int k = 0; k < NBUF; ++k)
      cr_assert_eq(collgen__dev_fill(t->c, r, t->alloc[r][k], POISON, alloc_bytes(t)), COLLGEN_OK);
    fill_random(t->dt, t->host_in[r], t->n);
    cr_assert_eq(collgen__dev_upload(t->c, r, t->dev[r][IN], t->host_in[r], bytes_of(t)),
                 COLLGEN_OK);
  }
}

static int bc_call(bc_case *t) {
  const int ndev = t->c->ndev;
  int64_t shape[1] = {t->n};
  const int64_t *shapes[8];
  const void *in[8];
  void *out[8];
  for (int r = 0; r < ndev; ++r) {
    shapes[r] = shape;
    in[r] = t->null_inputs && !is_root(t, r) ? NULL : t->dev[r][IN];
    out[r] = t->dev[r][OUT];
  }
  return collgen_broadcast(t->c, t->dt, 1, shapes, in, out, t->root, t->group, t->streams);
}

static int64_t first_diff(const unsigned char *a, const unsigned char *b, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (a[i] != b[i]) return (int64_t)i;
  return -1;
}

/* Every rank's output is its root's input, inputs are unchanged, margins
** untouched. */
static void bc_verify(bc_case *t) {
  cr_assert_eq(collgen__dev_sync_all(t->c, t->streams), COLLGEN_OK, "%s", t->c->err);
  const size_t all = alloc_bytes(t), bytes = bytes_of(t);
  unsigned char *got = malloc(all), *want = malloc(bytes + 1);
  cr_assert(got && want);
  for (int r = 0; r < t->c->ndev; ++r) {
    const int base = r / t->group * t->group;
    const void *src[1] = {t->host_in[base + t->root]};
    void *outs[1] = {want};
    const collgen__dtype_desc *d = collgen__dtype_find(t->dt);
    collgen__ref_broadcast(t->dt, t->n, 1, 0, src, outs);
    for (int k = 0; k < NBUF; ++k) {
      if (k == OUT && t->dev[r][OUT] == t->dev[r][IN]) continue;
      cr_assert_eq(collgen__dev_download(t->c, r, got, t->alloc[r][k], all), COLLGEN_OK);
      const unsigned char *body = got + MARGIN + t->misalign;
      const unsigned char *expect = k == OUT ? want : t->host_in[r];
      int64_t i = first_diff(body, expect, bytes);
      cr_expect_eq(i, -1, "%s g%d root %d n %lld misalign %d inplace %d: rank %d %s byte %lld",
                   d->name, t->group, t->root, (long long)t->n, t->misalign, t->inplace, r,
                   k == OUT ? "output" : "input", (long long)i);
      for (size_t j = 0; j < all; ++j) {
        if (j >= (size_t)(MARGIN + t->misalign) && j < MARGIN + t->misalign + bytes) continue;
        if (got[j] != POISON) {
          cr_expect_fail("%s g%d n %lld: rank %d buffer %d written at margin byte %zu", d->name,
                         t->group, (long long)t->n, r, k, j);
          break;
        }
      }
    }
  }
  free(got);
  free(want);
}

static void bc_check(collgen_comm_t *c, collgen_dtype_t dt, int group, int root, int64_t n,
                     int inplace, int misalign, int null_inputs) {
  bc_case t;
  memset(&t, 0, sizeof t);
  t.c = c;
  t.dt = dt;
  t.group = group ? group : c->ndev;
  t.root = root;
  t.n = n;
  t.inplace = inplace;
  t.misalign = misalign;
  t.null_inputs = null_inputs;
  bc_setup(&t);
  for (int run = 0; run < 2; ++run) { /* fresh data each run: nothing left over passes */
    bc_fill(&t);
    cr_assert_eq(bc_call(&t), COLLGEN_OK, "%s", collgen_comm_last_error(c));
    bc_verify(&t);
  }
  bc_teardown(&t);
}

static const collgen_dtype_t ALL_DTYPES[] = {COLLGEN_DTYPE_U8,  COLLGEN_DTYPE_BF16,
                                             COLLGEN_DTYPE_F32, COLLGEN_DTYPE_I64,
                                             COLLGEN_DTYPE_I16, COLLGEN_DTYPE_F64};

Test(broadcast, two_ranks_every_dtype_size_and_root, .timeout = 600) {
  static const int64_t sizes[] = {1, 7, 17, 1000, 4097, 65536 + 3, 1 << 20};
  collgen_comm_t *c = make_comm(2, 0, 0, 0);
  for (size_t d = 0; d < sizeof ALL_DTYPES / sizeof *ALL_DTYPES; ++d)
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; ++k) {
      const int es = collgen__dtype_bytes(ALL_DTYPES[d]);
      bc_check(c, ALL_DTYPES[d], 0, (int)(k % 2), sizes[k], 0, 0, (int)(k % 2));
      if (k % 2 == 0) {
        bc_check(c, ALL_DTYPES[d], 0, 1, sizes[k], 1, 0, 1);      /* in place on the root */
        bc_check(c, ALL_DTYPES[d], 0, 0, sizes[k], 0, es, 0); /* scalar kernel */
      }
    }
  collgen_comm_destroy(c);
}

Test(broadcast, four_and_eight_ranks_every_group_size_and_root, .timeout = 900) {
  static const int ranks[] = {4, 8};
  for (int k = 0; k < 2; ++k) {
    collgen_comm_t *c = make_comm(ranks[k], 4, 0, 0);
    for (int g = 1; g <= ranks[k]; g *= 2)
      for (int root = 0; root < g; ++root) {
        const collgen_dtype_t dt = ALL_DTYPES[(g + root) % 6];
        bc_check(c, dt, g, root, 30011, root % 2, 0, 1);
        if (root == g - 1) bc_check(c, COLLGEN_DTYPE_U8, g, root, 4099, 0, 3, 0); /* unaligned */
      }
    collgen_comm_destroy(c);
  }
}

Test(broadcast, odd_group_sizes_mapped, .timeout = 300) {
  collgen_comm_t *c = make_comm(6, 4, 0, 0);
  bc_check(c, COLLGEN_DTYPE_BF16, 3, 2, 77777, 0, 0, 1);
  bc_check(c, COLLGEN_DTYPE_I32, 6, 5, 4097, 1, 0, 0);
  collgen_comm_destroy(c);
}

/* Zero elements: success, nothing written (all buffers keep the poison). */
Test(broadcast, empty_calls_write_nothing, .timeout = 120) {
  collgen_comm_t *c = make_comm(2, 0, 0, 0);
  bc_case t;
  memset(&t, 0, sizeof t);
  t.c = c;
  t.dt = COLLGEN_DTYPE_F64;
  t.group = 2;
  t.root = 1;
  t.n = 0;
  bc_setup(&t);
  bc_fill(&t);
  cr_assert_eq(bc_call(&t), COLLGEN_OK, "%s", collgen_comm_last_error(c));
  bc_verify(&t);
  bc_teardown(&t);
  collgen_comm_destroy(c);
}

/* One capture, replayed with new data: the barrier counters advance on the
** device. */
Test(broadcast, graph_capture_and_replay_with_new_data, .timeout = 300) {
  collgen_comm_t *c = make_comm(2, 0, 0, 0);
  for (int inplace = 0; inplace <= 1; ++inplace) {
    bc_case t;
    memset(&t, 0, sizeof t);
    t.c = c;
    t.dt = COLLGEN_DTYPE_BF16;
    t.group = 2;
    t.root = 1;
    t.n = 100003;
    t.inplace = inplace;
    t.null_inputs = 1;
    bc_setup(&t);
    bc_fill(&t);
    cr_assert_eq(bc_call(&t), COLLGEN_OK, "%s", collgen_comm_last_error(c)); /* loads it */
    bc_verify(&t);
    CUgraph graph[2];
    CUgraphExec exec[2];
    graph_capture_begin(c, t.streams);
    cr_assert_eq(bc_call(&t), COLLGEN_OK, "%s", collgen_comm_last_error(c));
    graph_capture_end(c, t.streams, graph, exec);
    for (int it = 0; it < 10; ++it) {
      bc_fill(&t);
      graph_launch(c, t.streams, exec);
      bc_verify(&t);
    }
    graph_destroy(c, graph, exec);
    bc_teardown(&t);
  }
  collgen_comm_destroy(c);
}

/* A peer that never launches: the root waits in the barrier and reports
** COLLGEN_ERR_TIMEOUT naming it. */
Test(broadcast, missing_peer_is_reported_not_hung, .timeout = 120) {
  collgen_comm_t *c = make_comm(2, 0, 300, 0x1); /* launch rank 0 only */
  bc_case t;
  memset(&t, 0, sizeof t);
  t.c = c;
  t.dt = COLLGEN_DTYPE_U8;
  t.group = 2;
  t.root = 0;
  t.n = 4096;
  bc_setup(&t);
  bc_fill(&t);
  cr_assert_eq(bc_call(&t), COLLGEN_OK, "%s", collgen_comm_last_error(c));
  int rc = collgen__dev_sync_all(c, t.streams);
  cr_expect_eq(rc, COLLGEN_ERR_TIMEOUT, "got %s", collgen_status_name(rc));
  const char *msg = collgen_comm_last_error(c);
  cr_expect(strstr(msg, "rank 0 (device") && strstr(msg, "for rank 1 (device"), "%s", msg);
  cr_expect_eq(bc_call(&t), COLLGEN_ERR_TIMEOUT, "the next call reports it too");
  bc_teardown(&t);
  collgen_comm_destroy(c);
}
