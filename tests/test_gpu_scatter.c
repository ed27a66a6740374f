/*
** test_gpu_scatter.c -- scatter on real GPUs against the CPU reference
** (part of the test_gpu binary; helpers in test_gpu.h).
**
** Every rank of a group gives the root's input shape [N, ...]; group rank i
** gets rows chunk i (count_i = N/G + (i < N%G), start_i = i*(N/G) +
** min(i, N%G)) of the root's input. Every run makes fresh random inputs on
** every rank (the non-roots' too, so a kernel that read the wrong rank
** shows), poisons every buffer whole (SC_MARGIN bytes before and after
** every body), and checks every rank: its output, byte for byte, equal to
** collgen__ref_scatter of its group's root, every byte of its output buffer
** outside the chunk still poison (the canary past the chunk included),
** every input unchanged (a non-root input is never written; the root's,
** in place too, keeps its bytes). The chunk rule is also checked against
** collgen_scatter_chunk. Cases: every dtype (copy-only ones too), uneven
** chunks (N % G != 0), empty chunks (N < G, N = 0, zero elements per row),
** tensor ranks 1 to 3, every group size of 2, 4, 8 (and 6) ranks mapped
** onto the GPUs, every root, in place at the root, NULL non-root inputs
** and NULL outputs of empty chunks, misaligned pointers (the element
** path), a CUDA graph replayed with new data, refused calls that write
** nothing, and a missing peer that times out, named.
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

#define SC_MARGIN 64 /* poisoned bytes before and after every body */
#define SC_POISON 0xa7

typedef struct {
  collgen_comm_t *c;
  collgen_dtype_t dt;
  int group_arg;      /* as passed (0 = all ranks) */
  int group, root;    /* resolved group size; root group rank */
  int64_t rows, inner; /* the root's input: rows x inner elements */
  int trank;          /* shape: 1 [rows] (inner 1), 2 [rows, inner], 3 [rows, 1, inner] */
  int inplace;        /* the root's output sits in its input at its chunk */
  int misalign;       /* elements added to every pointer (never 16 bytes) */
  int null_inputs;    /* the non-roots pass NULL inputs */
  int null_empty;     /* ranks with an empty chunk pass NULL outputs */
  int refused;        /* sc_verify: the calls were refused, no output written */
  int64_t shape[3];
  int64_t start[8], count[8]; /* rank r's chunk (rows) in its group */
  void *alloc_in[8], *alloc_out[8], *in[8], *out[8];
  void *host_in[8];
  collgen_stream_t streams[8];
} sc_case;

static size_t sc_es(const sc_case *t) { return (size_t)collgen__dtype_bytes(t->dt); }
static size_t sc_row(const sc_case *t) { return (size_t)t->inner * sc_es(t); }
static size_t sc_in_bytes(const sc_case *t) { return (size_t)t->rows * sc_row(t); }
static size_t sc_out_bytes(const sc_case *t, int r) { return (size_t)t->count[r] * sc_row(t); }
static size_t sc_skew(const sc_case *t) { return (size_t)t->misalign * sc_es(t); }
static size_t sc_in_alloc(const sc_case *t) { return 2 * SC_MARGIN + 16 + sc_in_bytes(t); }
static size_t sc_out_alloc(const sc_case *t, int r) {
  return 2 * SC_MARGIN + 16 + sc_out_bytes(t, r);
}
static int sc_is_root(const sc_case *t, int r) { return r % t->group == t->root; }
static int sc_root_of(const sc_case *t, int r) { return r / t->group * t->group + t->root; }

/* "bf16 g2 root 1 [7 x 3] trank 2 inplace 0 ..." for messages. */
static const char *sc_desc(const sc_case *t, char *buf, size_t n) {
  snprintf(buf, n, "%s g%d root %d [%lld x %lld] trank %d inplace %d misalign %d null %d%d",
           collgen__dtype_find(t->dt)->name, t->group, t->root, (long long)t->rows,
           (long long)t->inner, t->trank, t->inplace, t->misalign, t->null_inputs,
           t->null_empty);
  return buf;
}

/* The chunk rule written out (not the runtime's function), checked against
** collgen_scatter_chunk. */
static void sc_chunks(sc_case *t) {
  const int g = t->group;
  const int64_t base = t->rows / g, extra = t->rows % g;
  for (int r = 0; r < t->c->ndev; ++r) {
    const int64_t i = r % g;
    t->count[r] = base + (i < extra);
    t->start[r] = i * base + (i < extra ? i : extra);
    int64_t s = -1, n = -1;
    cr_assert_eq(collgen_scatter_chunk(t->rows, g, (int)i, &s, &n), COLLGEN_OK);
    cr_assert(s == t->start[r] && n == t->count[r],
              "collgen_scatter_chunk(%lld, %d, %lld) = (%lld, %lld), want (%lld, %lld)",
              (long long)t->rows, g, (long long)i, (long long)s, (long long)n,
              (long long)t->start[r], (long long)t->count[r]);
  }
}

static void sc_setup(sc_case *t) {
  const int ndev = t->c->ndev;
  t->group = t->group_arg ? t->group_arg : ndev;
  cr_assert(t->group >= 1 && ndev % t->group == 0 && t->root >= 0 && t->root < t->group);
  cr_assert(t->trank >= 1 && t->trank <= 3 && (t->trank != 1 || t->inner == 1));
  cr_assert(sc_skew(t) < 16);
  t->shape[0] = t->rows;
  t->shape[1] = t->trank == 2 ? t->inner : 1;
  t->shape[2] = t->inner;
  sc_chunks(t);
  make_streams(t->c, t->streams);
  for (int r = 0; r < ndev; ++r) {
    cr_assert_eq(collgen__dev_alloc(t->c, r, sc_in_alloc(t), &t->alloc_in[r]), COLLGEN_OK, "%s",
                 t->c->err);
    cr_assert_eq(collgen__dev_alloc(t->c, r, sc_out_alloc(t, r), &t->alloc_out[r]), COLLGEN_OK,
                 "%s", t->c->err);
    t->in[r] = (char *)t->alloc_in[r] + SC_MARGIN + sc_skew(t);
    t->out[r] = (char *)t->alloc_out[r] + SC_MARGIN + sc_skew(t);
    if (t->inplace && sc_is_root(t, r))
      t->out[r] = (char *)t->in[r] + (size_t)t->start[r] * sc_row(t);
    t->host_in[r] = malloc(sc_in_bytes(t) + 1);
    cr_assert(t->host_in[r]);
  }
}

static void sc_teardown(sc_case *t) {
  for (int r = 0; r < t->c->ndev; ++r) {
    collgen__dev_free(t->c, r, t->alloc_in[r]);
    collgen__dev_free(t->c, r, t->alloc_out[r]);
    free(t->host_in[r]);
  }
  free_streams(t->c, t->streams);
}

/* Fresh inputs on every rank, every buffer poisoned whole first. */
static void sc_fill(sc_case *t) {
  for (int r = 0; r < t->c->ndev; ++r) {
    cr_assert_eq(collgen__dev_fill(t->c, r, t->alloc_in[r], SC_POISON, sc_in_alloc(t)),
                 COLLGEN_OK);
    cr_assert_eq(collgen__dev_fill(t->c, r, t->alloc_out[r], SC_POISON, sc_out_alloc(t, r)),
                 COLLGEN_OK);
    fill_random(t->dt, t->host_in[r], t->rows * t->inner);
    if (sc_in_bytes(t))
      cr_assert_eq(collgen__dev_upload(t->c, r, t->in[r], t->host_in[r], sc_in_bytes(t)),
                   COLLGEN_OK);
  }
}

static int sc_call(sc_case *t) {
  const int ndev = t->c->ndev;
  const int64_t *shapes[8];
  const void *in[8];
  void *out[8];
  for (int r = 0; r < ndev; ++r) {
    shapes[r] = t->shape;
    in[r] = t->null_inputs && !sc_is_root(t, r) ? NULL : t->in[r];
    out[r] = t->null_empty && t->count[r] == 0 ? NULL : t->out[r];
  }
  return collgen_scatter(t->c, t->dt, t->trank, shapes, in, out, t->root, t->group_arg,
                         t->streams);
}

static int64_t sc_first_diff(const unsigned char *a, const unsigned char *b, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (a[i] != b[i]) return (int64_t)i;
  return -1;
}

/* `got` is a whole downloaded buffer of `all` bytes: bytes [at, at + n)
** must equal `want`, every other byte the poison. */
static void sc_expect_region(const sc_case *t, int r, const char *buffer, const char *when,
                             const unsigned char *got, size_t all, size_t at,
                             const unsigned char *want, size_t n) {
  char d[192];
  const int64_t i = n ? sc_first_diff(got + at, want, n) : -1;
  cr_expect_eq(i, -1, "%s: %s: rank %d %s byte %lld of %zu: got 0x%02x want 0x%02x", when,
               sc_desc(t, d, sizeof d), r, buffer, (long long)i, n, i >= 0 ? got[at + i] : 0,
               i >= 0 ? want[i] : 0);
  for (size_t j = 0; j < all; ++j) {
    if (j >= at && j < at + n) continue;
    if (got[j] != SC_POISON) {
      cr_expect_fail("%s: %s: rank %d %s written outside its %zu bytes at byte %lld (0x%02x)",
                     when, sc_desc(t, d, sizeof d), r, buffer, n,
                     (long long)j - (long long)at, got[j]);
      break;
    }
  }
}

/* Every rank's output against the reference over its group's root's
** input, outside it the poison; every input unchanged. */
static void sc_verify(sc_case *t, const char *when) {
  cr_assert_eq(collgen__dev_sync_all(t->c, t->streams), COLLGEN_OK, "%s: %s", when,
               collgen_comm_last_error(t->c));
  const size_t in_all = sc_in_alloc(t), body = SC_MARGIN + sc_skew(t);
  unsigned char *got = malloc(in_all), *want = malloc(sc_in_bytes(t) + 1);
  cr_assert(got && want);
  for (int r = 0; r < t->c->ndev; ++r) {
    const int gi = r % t->group;
    collgen__ref_scatter(t->dt, t->rows, t->inner, t->group, gi, t->host_in[sc_root_of(t, r)],
                         want);
    const int in_place = t->inplace && sc_is_root(t, r);
    /* the input: unchanged (in place it holds the chunk where it was) */
    cr_assert_eq(collgen__dev_download(t->c, r, got, t->alloc_in[r], in_all), COLLGEN_OK);
    sc_expect_region(t, r, "input", when, got, in_all, body, t->host_in[r], sc_in_bytes(t));
    if (in_place)
      sc_expect_region(t, r, "in-place chunk", when, got + body + (size_t)t->start[r] * sc_row(t),
                       sc_out_bytes(t, r), 0, want, sc_out_bytes(t, r));
    /* the output buffer: the chunk, poison around it (in place, or a NULL
    ** output: nothing written there at all) */
    const size_t out_all = sc_out_alloc(t, r);
    const int written = !in_place && !t->refused && !(t->null_empty && t->count[r] == 0);
    cr_assert_eq(collgen__dev_download(t->c, r, got, t->alloc_out[r], out_all), COLLGEN_OK);
    sc_expect_region(t, r, "output", when, got, out_all, body, want,
                     written ? sc_out_bytes(t, r) : 0);
  }
  free(got);
  free(want);
}

static void sc_init(sc_case *t, collgen_comm_t *c, collgen_dtype_t dt, int group, int root,
                    int64_t rows, int64_t inner, int trank) {
  memset(t, 0, sizeof *t);
  t->c = c;
  t->dt = dt;
  t->group_arg = group;
  t->root = root;
  t->rows = rows;
  t->inner = inner;
  t->trank = trank;
}

/* Sets up, runs `runs` eager calls on fresh data (each checked), tears down. */
static void sc_run(sc_case *t, int runs) {
  sc_setup(t);
  char d[192];
  for (int run = 0; run < runs; ++run) {
    sc_fill(t);
    cr_assert_eq(sc_call(t), COLLGEN_OK, "%s: %s", sc_desc(t, d, sizeof d),
                 collgen_comm_last_error(t->c));
    sc_verify(t, "eager");
  }
  sc_teardown(t);
}

/* One case; flags: SC_INPLACE, SC_NULL_IN, SC_NULL_OUT, SC_MISALIGN. */
enum { SC_INPLACE = 1, SC_NULL_IN = 2, SC_NULL_OUT = 4, SC_MISALIGN = 8 };

static void sc_check(collgen_comm_t *c, collgen_dtype_t dt, int group, int root, int64_t rows,
                     int64_t inner, int trank, unsigned flags) {
  sc_case t;
  sc_init(&t, c, dt, group, root, rows, inner, trank);
  t.inplace = !!(flags & SC_INPLACE);
  t.null_inputs = !!(flags & SC_NULL_IN);
  t.null_empty = !!(flags & SC_NULL_OUT);
  t.misalign = !!(flags & SC_MISALIGN);
  sc_run(&t, 2); /* fresh data each run: nothing left over passes */
}

/* rows, inner, tensor rank: N < G (rank 1's chunk empty on 2 ranks), small
** uneven chunks with odd rows (element path), 16-byte rows, 1-D and 3-D
** uneven tensors, one larger tensor. */
static const int64_t SC_SHAPES_2[][3] = {{1, 1, 1},    {7, 3, 2},    {8, 8, 2},
                                         {1001, 17, 3}, {4097, 1, 1}, {65, 1000, 2}};

Test(scatter, two_ranks_every_dtype_shape_and_root, .timeout = 300) {
  collgen_comm_t *c = make_comm(2, 0, 0, 0);
  for (int d = 0; d < collgen__dtype_count(); ++d)
    for (size_t k = 0; k < sizeof SC_SHAPES_2 / sizeof *SC_SHAPES_2; ++k)
      for (int root = 0; root < 2; ++root) {
        const unsigned flags = ((k + (size_t)root) & 1 ? SC_NULL_IN : 0u) |
                               (d & 1 ? SC_NULL_OUT : 0u) |
                               (k == 3 && root == 0 ? SC_MISALIGN : 0u);
        sc_check(c, collgen__dtype_at(d)->dtype, (int)(k % 2) * 2, root, SC_SHAPES_2[k][0],
                 SC_SHAPES_2[k][1], (int)SC_SHAPES_2[k][2], flags);
      }
  collgen_comm_destroy(c);
}

/* The root's output inside its input at its own chunk, both roots, the
** root's chunk the larger one, the smaller one and empty. */
Test(scatter, two_ranks_in_place_at_the_root, .timeout = 300) {
  static const collgen_dtype_t dts[] = {COLLGEN_DTYPE_BF16, COLLGEN_DTYPE_F32, COLLGEN_DTYPE_U8,
                                        COLLGEN_DTYPE_I64};
  static const int64_t shapes[][3] = {{7, 3, 2}, {1001, 17, 3}, {64, 8, 2}, {1, 5, 2}};
  collgen_comm_t *c = make_comm(2, 0, 0, 0);
  for (size_t d = 0; d < sizeof dts / sizeof *dts; ++d)
    for (size_t k = 0; k < sizeof shapes / sizeof *shapes; ++k)
      for (int root = 0; root < 2; ++root)
        sc_check(c, dts[d], 2, root, shapes[k][0], shapes[k][1], (int)shapes[k][2],
                 SC_INPLACE | (root ? SC_NULL_IN : 0u) | (d == 1 ? SC_MISALIGN : 0u));
  collgen_comm_destroy(c);
}

/* 4 and 8 ranks mapped onto the GPUs: every group size (1 copies), every
** root; per (group, root) an uneven tensor (N % G = root), one with fewer
** rows than ranks (N = root: the root's own chunk is empty, N = 0 for root
** 0), and in place for odd roots (and the copies of groups of one on 8). */
Test(scatter, four_and_eight_ranks_every_group_size_and_root, .timeout = 600) {
  static const collgen_dtype_t dts[] = {COLLGEN_DTYPE_BF16, COLLGEN_DTYPE_F32, COLLGEN_DTYPE_U8,
                                        COLLGEN_DTYPE_I64,  COLLGEN_DTYPE_I16, COLLGEN_DTYPE_F64,
                                        COLLGEN_DTYPE_I8};
  for (int ranks = 4; ranks <= 8; ranks *= 2) {
    collgen_comm_t *c = make_comm(ranks, 4, 0, 0);
    int k = 0;
    for (int g = 1; g <= ranks; g *= 2)
      for (int root = 0; root < g; ++root, ++k) {
        const collgen_dtype_t dt = dts[k % 7];
        const int inplace = root & 1 || (g == 1 && ranks == 8); /* a copy in place: none */
        sc_check(c, dt, g, root, 5 * g + root, 67, 2,
                 (inplace ? SC_INPLACE : 0u) | (k & 1 ? SC_NULL_IN : 0u) | SC_NULL_OUT);
        if (g > 1)
          sc_check(c, dts[(k + 3) % 7], g, root, root, 129, 3, k & 2 ? SC_NULL_OUT : 0u);
      }
    collgen_comm_destroy(c);
  }
}

Test(scatter, odd_group_sizes_mapped, .timeout = 300) {
  collgen_comm_t *c = make_comm(6, 4, 0, 0);
  sc_check(c, COLLGEN_DTYPE_BF16, 3, 2, 3001, 5, 2, SC_NULL_IN);
  sc_check(c, COLLGEN_DTYPE_I32, 6, 5, 4, 33, 2, SC_INPLACE); /* the root's chunk empty */
  sc_check(c, COLLGEN_DTYPE_U8, 6, 1, 17, 1, 1, SC_INPLACE);
  collgen_comm_destroy(c);
}

/* Empty chunks and empty calls: N = 0, zero elements per row (both:
** success, no launch, nothing written), N < G on 4 ranks (one and three
** rows), with NULL and with real outputs for the empty chunks. */
Test(scatter, empty_chunks_and_zero_elements_write_nothing, .timeout = 120) {
  collgen_comm_t *c = make_comm(2, 0, 0, 0);
  sc_check(c, COLLGEN_DTYPE_F64, 2, 1, 0, 16, 2, SC_NULL_OUT | SC_NULL_IN);
  sc_check(c, COLLGEN_DTYPE_F64, 2, 1, 0, 16, 2, 0);
  sc_check(c, COLLGEN_DTYPE_BF16, 2, 0, 5, 0, 2, 0);
  sc_check(c, COLLGEN_DTYPE_U8, 0, 0, 0, 1, 1, SC_INPLACE);
  collgen_comm_destroy(c);
  collgen_comm_t *c4 = make_comm(4, 4, 0, 0);
  for (int root = 0; root < 4; ++root) {
    sc_check(c4, COLLGEN_DTYPE_I64, 4, root, 1, 1000, 2, root & 1 ? SC_NULL_OUT : 0u);
    sc_check(c4, COLLGEN_DTYPE_BF16, 0, root, 3, 40, 2,
             (root & 1 ? 0u : SC_NULL_OUT) | SC_NULL_IN | (root < 3 ? SC_INPLACE : 0u));
  }
  sc_check(c4, COLLGEN_DTYPE_F32, 4, 2, 0, 7, 2, SC_NULL_OUT);
  collgen_comm_destroy(c4);
}

/* One capture per case (after an eager call loaded the kernel), replayed
** with new inputs uploaded and every buffer poisoned before each replay,
** each replay checked against the reference: 2 ranks out of place and in
** place; 4 ranks mapped with an empty chunk (NULL output) at the root. */
static void sc_graph_case(collgen_comm_t *c, collgen_dtype_t dt, int group, int root,
                          int64_t rows, int64_t inner, unsigned flags, int replays) {
  sc_case t;
  sc_init(&t, c, dt, group, root, rows, inner, 2);
  t.inplace = !!(flags & SC_INPLACE);
  t.null_inputs = !!(flags & SC_NULL_IN);
  t.null_empty = !!(flags & SC_NULL_OUT);
  sc_setup(&t);
  char d[192];
  sc_fill(&t);
  cr_assert_eq(sc_call(&t), COLLGEN_OK, "%s: %s", sc_desc(&t, d, sizeof d),
               collgen_comm_last_error(c)); /* loads it */
  sc_verify(&t, "eager");
  CUgraph graph[8];
  CUgraphExec exec[8];
  graph_capture_begin(c, t.streams);
  cr_assert_eq(sc_call(&t), COLLGEN_OK, "captured %s: %s", sc_desc(&t, d, sizeof d),
               collgen_comm_last_error(c));
  graph_capture_end(c, t.streams, graph, exec);
  for (int it = 0; it < replays; ++it) {
    sc_fill(&t);
    graph_launch(c, t.streams, exec);
    sc_verify(&t, "replay");
  }
  graph_destroy(c, graph, exec);
  sc_teardown(&t);
}

Test(scatter, graph_capture_and_replay_with_new_data, .timeout = 300) {
  collgen_comm_t *c = make_comm(2, 0, 0, 0);
  sc_graph_case(c, COLLGEN_DTYPE_BF16, 2, 1, 1001, 24, SC_NULL_IN, 5);
  sc_graph_case(c, COLLGEN_DTYPE_BF16, 2, 1, 1001, 24, SC_INPLACE, 5);
  sc_graph_case(c, COLLGEN_DTYPE_U8, 0, 0, 4099, 3, SC_INPLACE | SC_NULL_IN, 3);
  collgen_comm_destroy(c);
  collgen_comm_t *c4 = make_comm(4, 0, 0, 0);
  sc_graph_case(c4, COLLGEN_DTYPE_I64, 4, 3, 3, 1000, SC_NULL_OUT | SC_NULL_IN, 3);
  sc_graph_case(c4, COLLGEN_DTYPE_F32, 2, 1, 301, 33, SC_INPLACE, 3);
  collgen_comm_destroy(c4);
}

/* Refused calls (a root outside the group, a root's output at the wrong
** offset of its input, a NULL output of a non-empty chunk, a NULL root
** input) return COLLGEN_ERR_INVALID_ARG and write nothing: every buffer
** still holds what sc_fill left. */
Test(scatter, refused_calls_write_nothing, .timeout = 120) {
  collgen_comm_t *c = make_comm(2, 0, 0, 0);
  sc_case t;
  sc_init(&t, c, COLLGEN_DTYPE_BF16, 2, 0, 9, 8, 2);
  sc_setup(&t);
  sc_fill(&t);
  const int64_t *shapes[2] = {t.shape, t.shape};
  const void *in[2] = {t.in[0], t.in[1]};
  void *out[2] = {t.out[0], t.out[1]};
  for (int root = -1; root <= 2; root += 3)
    cr_expect_eq(collgen_scatter(c, t.dt, 2, shapes, in, out, root, 2, t.streams),
                 COLLGEN_ERR_INVALID_ARG, "root %d: %s", root, collgen_comm_last_error(c));
  cr_expect_eq(collgen_scatter(c, t.dt, 2, shapes, in, out, 1, 1, t.streams),
               COLLGEN_ERR_INVALID_ARG, "root 1 of groups of one");
  void *shifted[2] = {(char *)t.in[0] + sc_row(&t), t.out[1]}; /* chunk 0 one row late */
  cr_expect_eq(collgen_scatter(c, t.dt, 2, shapes, in, shifted, 0, 2, t.streams),
               COLLGEN_ERR_INVALID_ARG, "output overlapping the input off its chunk: %s",
               collgen_comm_last_error(c));
  void *late[2] = {t.out[0], (char *)t.in[1]}; /* rank 1 (root) writes its chunk at offset 0 */
  cr_expect_eq(collgen_scatter(c, t.dt, 2, shapes, in, late, 1, 2, t.streams),
               COLLGEN_ERR_INVALID_ARG, "root 1's output at its input's start: %s",
               collgen_comm_last_error(c));
  void *no_out[2] = {t.out[0], NULL};
  cr_expect_eq(collgen_scatter(c, t.dt, 2, shapes, in, no_out, 0, 2, t.streams),
               COLLGEN_ERR_INVALID_ARG, "NULL output of a 4-row chunk");
  const void *no_root_in[2] = {t.in[0], NULL};
  cr_expect_eq(collgen_scatter(c, t.dt, 2, shapes, no_root_in, out, 1, 2, t.streams),
               COLLGEN_ERR_INVALID_ARG, "NULL input of the root");
  t.refused = 1;
  sc_verify(&t, "refused");
  sc_teardown(&t);
  collgen_comm_destroy(c);
}

/* A peer that never launches: the root waits in the barrier and reports
** COLLGEN_ERR_TIMEOUT naming it. */
Test(scatter, missing_peer_times_out, .timeout = 60) {
  collgen_comm_t *c = make_comm(2, 1, 300, 0x1); /* launch rank 0 only, one block */
  sc_case t;
  sc_init(&t, c, COLLGEN_DTYPE_F32, 2, 0, 64, 64, 2);
  sc_setup(&t);
  sc_fill(&t);
  cr_assert_eq(sc_call(&t), COLLGEN_OK, "%s", collgen_comm_last_error(c));
  cr_expect_eq(collgen__dev_sync_all(c, t.streams), COLLGEN_ERR_TIMEOUT);
  const char *msg = collgen_comm_last_error(c);
  cr_expect(strstr(msg, "rank 0 (device") && strstr(msg, "for rank 1 (device"), "%s", msg);
  sc_teardown(&t);
  collgen_comm_destroy(c);
}
