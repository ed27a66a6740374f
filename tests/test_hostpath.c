/*
** test_hostpath.c -- the runtime's host path without a GPU: collgen runs on
** the stand-in driver (fake_cuda.c), which records launches and copies and
** performs memsets and copies on host memory. Covers what the GPU tests
** cannot show cheaply on every CI run: a call launches each rank exactly
** once, in that rank's context, with the planned grid; modules are loaded
** once per context; refused calls launch and write nothing; groups of one
** copy instead of launching; comm_create refuses bad device lists and old
** GPUs; missing P2P is refused per call. Kernels do not run here, so results
** are checked by the GPU tests, not here.
*/
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "collgen.h"
#include "bad_inputs.h"
#include "comm_internal.h" /* white-box: the communicator's fields */
#include "devbuf.h"
#include "fake_cuda.h"
#include "reference.h"
#include "shape.h"
#include "shared_mem.h"
#include "test_util.h"

static char cache_dir[256];
static fake_cuda_stats_t *stats;

static void setup(void) {
  tu_make_temp_dir(cache_dir, sizeof cache_dir);
  stats = fake_cuda_use(FAKE_CUDA_PATH);
  cr_assert(stats, "%s", dlerror());
}

static void teardown(void) { tu_remove_tree(cache_dir); }

TestSuite(hostpath, .init = setup, .fini = teardown);

static collgen_comm_t *make_comm(int ndev) {
  int devices[8] = {0, 1, 2, 3, 4, 5, 6, 7};
  collgen_comm_options_t o;
  collgen_comm_options_init(&o);
  o.cache_dir = cache_dir;
  collgen_comm_t *c = NULL;
  cr_assert_eq(collgen_comm_create(&c, ndev, devices, &o), COLLGEN_OK, "%s", collgen_last_error());
  return c;
}

/* One stream per rank, created in the rank's context (the fake driver
** checks launches against it). */
static void make_streams(collgen_comm_t *c, collgen_stream_t *s) {
  for (int r = 0; r < c->ndev; ++r) cr_assert_eq(collgen__dev_stream_create(c, r, &s[r]), COLLGEN_OK);
}

/* Host buffers stand in for device memory (the fake driver's cuMemAlloc is
** malloc), poisoned so that any write shows. */
static void *poisoned(size_t bytes) {
  const size_t whole = (bytes + 255) / 256 * 256; /* aligned_alloc wants a multiple */
  void *p = aligned_alloc(256, whole ? whole : 256);
  cr_assert(p);
  memset(p, 0xa5, whole ? whole : 256);
  return p;
}

static int all_poison(const void *p, size_t bytes) {
  for (size_t i = 0; i < bytes; ++i)
    if (((const unsigned char *)p)[i] != 0xa5) return 0;
  return 1;
}

Test(hostpath, allreduce_launches_each_rank_once_in_its_context) {
  collgen_comm_t *c = make_comm(2);
  int64_t shape[1] = {4096};
  const int64_t *shapes[2] = {shape, shape};
  void *in[2] = {poisoned(8192), poisoned(8192)}, *out[2] = {poisoned(8192), poisoned(8192)};
  collgen_stream_t streams[2];
  make_streams(c, streams);
  memset(stats, 0, sizeof *stats);
  cr_assert_eq(collgen_allreduce_sum(c, COLLGEN_DTYPE_BF16, 1, shapes, (const void *const *)in, out,
                                     0, streams), COLLGEN_OK, "%s", collgen_comm_last_error(c));
  cr_expect_eq(stats->launches, 2);
  cr_expect_eq(stats->wrong_context, 0);
  cr_expect_eq(stats->module_loads, 2, "one module per context");
  cr_expect_eq(stats->log[0].device, 0);
  cr_expect_eq(stats->log[1].device, 1);
  /* the grid and kernel are the planner's, the same on both ranks */
  collgen_generator_t *g;
  cr_assert_eq(collgen_generator_create(&g, cache_dir), COLLGEN_OK);
  collgen_shape_t s;
  collgen_shape_init(&s, COLLGEN_OP_ALLREDUCE_SUM);
  s.elems = 4096;
  collgen_plan_t plan;
  cr_assert_eq(collgen_plan(g, &s, &plan), COLLGEN_OK);
  for (int r = 0; r < 2; ++r) {
    cr_expect_str_eq(stats->log[r].kernel, plan.kernel);
    cr_expect_eq(stats->log[r].grid, (unsigned)plan.grid);
    cr_expect_eq(stats->log[r].block, (unsigned)plan.block);
  }
  collgen_generator_destroy(g);
  /* a second call reuses the loaded modules */
  cr_assert_eq(collgen_allreduce_sum(c, COLLGEN_DTYPE_BF16, 1, shapes, (const void *const *)in, out,
                                     0, streams), COLLGEN_OK);
  cr_expect_eq(stats->launches, 4);
  cr_expect_eq(stats->module_loads, 2);
  cr_expect(all_poison(out[0], 8192) && all_poison(out[1], 8192), "kernels do not run here");
  for (int r = 0; r < 2; ++r) {
    free(in[r]);
    free(out[r]);
  }
  collgen_comm_destroy(c);
}

Test(hostpath, refused_calls_launch_and_write_nothing) {
  collgen_comm_t *c = make_comm(2);
  int64_t a[1] = {1024}, b[1] = {1000};
  const int64_t *same[2] = {a, a}, *differ[2] = {a, b};
  char *in0 = poisoned(4096), *in1 = poisoned(4096), *out0 = poisoned(4096), *out1 = poisoned(4096);
  const void *in[2] = {in0, in1}, *odd_in[2] = {in0 + 2, in1};
  void *out[2] = {out0, out1}, *null_out[2] = {out0, NULL}, *overlap[2] = {in0 + 256, out1};
  collgen_stream_t streams[2];
  make_streams(c, streams);
  memset(stats, 0, sizeof *stats);
  struct {
    const char *what;
    int rc, expect;
  } cases[] = {
      {"shapes differ", collgen_allreduce_sum(c, COLLGEN_DTYPE_F32, 1, differ, in, out, 0, streams),
       COLLGEN_ERR_INVALID_ARG},
      {"misaligned f32", collgen_allreduce_sum(c, COLLGEN_DTYPE_F32, 1, same, odd_in, out, 0, streams),
       COLLGEN_ERR_ALIGNMENT},
      {"NULL output", collgen_allreduce_sum(c, COLLGEN_DTYPE_F32, 1, same, in, null_out, 0, streams),
       COLLGEN_ERR_INVALID_ARG},
      {"group of 3 of 2", collgen_allreduce_sum(c, COLLGEN_DTYPE_F32, 1, same, in, out, 3, streams),
       COLLGEN_ERR_INVALID_ARG},
      {"partial overlap", collgen_allreduce_sum(c, COLLGEN_DTYPE_BF16, 1, same, in, overlap, 0, streams),
       COLLGEN_ERR_INVALID_ARG},
      {"bad dtype", collgen_allreduce_sum(c, (collgen_dtype_t)19, 1, same, in, out, 0, streams),
       COLLGEN_ERR_INVALID_ARG},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i)
    cr_expect_eq(cases[i].rc, cases[i].expect, "%s: got %s", cases[i].what,
                 collgen_status_name(cases[i].rc));
  cr_expect_eq(stats->launches, 0);
  cr_expect_eq(stats->copies, 0);
  cr_expect_eq(stats->module_loads, 0, "nothing is loaded before validation passes");
  cr_expect(all_poison(out0, 4096) && all_poison(out1, 4096) && all_poison(in0, 4096));
  free(in0);
  free(in1);
  free(out0);
  free(out1);
  collgen_comm_destroy(c);
}

Test(hostpath, groups_of_one_copy_and_in_place_does_nothing) {
  collgen_comm_t *c = make_comm(2);
  int64_t s0[1] = {1000}, s1[1] = {77}; /* a group of one may differ from the others */
  const int64_t *shapes[2] = {s0, s1};
  float *in[2], *out[2];
  uint64_t seed = tu_rand() | 1; /* fresh data each run; xorshift needs a nonzero state */
  for (int r = 0; r < 2; ++r) {
    in[r] = poisoned(4096);
    out[r] = poisoned(4096);
    collgen__ref_fill_random(COLLGEN_DTYPE_F32, in[r], 1000, &seed);
  }
  collgen_stream_t streams[2];
  make_streams(c, streams);
  memset(stats, 0, sizeof *stats);
  cr_assert_eq(collgen_allreduce_sum(c, COLLGEN_DTYPE_F32, 1, shapes, (const void *const *)in,
                                     (void *const *)out, 1, streams), COLLGEN_OK, "%s",
               collgen_comm_last_error(c));
  cr_expect_eq(stats->launches, 0);
  cr_expect_eq(stats->copies, 2);
  cr_expect_eq(stats->wrong_context, 0);
  cr_expect_eq(stats->module_loads, 0, "nothing to compile for a copy");
  cr_expect(memcmp(out[0], in[0], 1000 * sizeof(float)) == 0);
  cr_expect(memcmp(out[1], in[1], 77 * sizeof(float)) == 0);
  cr_expect(all_poison((char *)out[1] + 77 * sizeof(float), 4096 - 77 * sizeof(float)),
            "nothing written past the shape");
  cr_assert_eq(collgen_allreduce_sum(c, COLLGEN_DTYPE_F32, 1, shapes, (const void *const *)in,
                                     (void *const *)in, 1, streams), COLLGEN_OK);
  cr_expect_eq(stats->copies, 2, "in place: nothing to do");
  for (int r = 0; r < 2; ++r) {
    free(in[r]);
    free(out[r]);
  }
  collgen_comm_destroy(c);
}

/* A copy-only dtype with an op that computes on elements (COLLGEN_OP_MAP's
** `computes`): the driver refuses it in the planner's words, on a path that
** plans nothing too (groups of one copy; zero elements), naming the ops
** that move bits; nothing is launched or copied. */
Test(hostpath, copy_only_dtypes_are_refused_in_the_planners_words) {
  collgen_comm_t *c = make_comm(2);
  collgen_generator_t *g = NULL;
  cr_assert_eq(collgen_generator_create(&g, cache_dir), COLLGEN_OK);
  int64_t shape[1] = {64}, zero[1] = {0};
  const int64_t *shapes[2] = {shape, shape}, *zshapes[2] = {zero, zero};
  void *in[2] = {poisoned(512), poisoned(512)}, *out[2] = {poisoned(512), poisoned(512)};
  collgen_stream_t streams[2];
  make_streams(c, streams);
  static const collgen_dtype_t copy_only[] = {COLLGEN_DTYPE_I32, COLLGEN_DTYPE_U8};
  for (int k = 0; k < 2; ++k)
    for (int group = 1; group <= 2; ++group) {
      memset(stats, 0, sizeof *stats);
      cr_assert_eq(collgen_allreduce_sum(c, copy_only[k], 1, group == 1 ? shapes : zshapes,
                                         (const void *const *)in, out, group, streams),
                   COLLGEN_ERR_INVALID_ARG);
      collgen_shape_t s;
      collgen_shape_init(&s, COLLGEN_OP_ALLREDUCE_SUM);
      s.dtype = copy_only[k];
      s.group_size = group;
      collgen_plan_t plan;
      cr_assert_eq(collgen_plan(g, &s, &plan), COLLGEN_ERR_INVALID_ARG);
      cr_expect_str_eq(collgen_comm_last_error(c), collgen_generator_last_error(g));
      cr_expect(strstr(collgen_comm_last_error(c),
                       "(only the ops that move bits take it: all_gather, broadcast, scatter)"),
                "%s", collgen_comm_last_error(c));
      cr_expect_eq(stats->launches + stats->copies, 0);
    }
  memset(stats, 0, sizeof *stats);
  cr_assert_eq(collgen_broadcast(c, COLLGEN_DTYPE_U8, 1, shapes, (const void *const *)in, out, 0,
                                 1, streams), COLLGEN_OK, "%s", collgen_comm_last_error(c));
  cr_expect_eq(stats->copies, 2, "a group of one copies, any dtype");
  for (int r = 0; r < 2; ++r) {
    free(in[r]);
    free(out[r]);
  }
  collgen_generator_destroy(g);
  collgen_comm_destroy(c);
}

Test(hostpath, zero_sizes_and_empty_groups_launch_nothing) {
  collgen_comm_t *c = make_comm(2);
  int64_t zero[1] = {0}, rows0[2] = {0, 4096};
  const int64_t *shapes[2] = {zero, zero}, *rshapes[2] = {rows0, rows0};
  void *buf[2] = {poisoned(256), poisoned(256)};
  collgen_stream_t streams[2];
  make_streams(c, streams);
  memset(stats, 0, sizeof *stats);
  cr_expect_eq(collgen_allreduce_sum(c, COLLGEN_DTYPE_BF16, 1, shapes, (const void *const *)buf,
                                     buf, 0, streams), COLLGEN_OK);
  cr_expect_eq(collgen_allgather_rmsnorm(c, COLLGEN_DTYPE_BF16, 2, rshapes, (const void *const *)buf,
                                         buf + 0, buf + 0, (const void *const *)buf, 1e-6f, 0.0f, 0,
                                         streams), COLLGEN_OK, "%s", collgen_comm_last_error(c));
  cr_expect_eq(stats->launches, 0);
  cr_expect_eq(stats->copies, 0);
  for (int r = 0; r < 2; ++r) free(buf[r]);
  collgen_comm_destroy(c);
}

Test(hostpath, rmsnorm_launches_each_group_with_its_plan) {
  setenv("FAKE_CUDA_DEVICES", "4", 1);
  collgen_comm_t *c = make_comm(4);
  int64_t shard[4][2] = {{3, 4096}, {5, 4096}, {0, 4096}, {0, 4096}};
  const int64_t *shapes[4] = {shard[0], shard[1], shard[2], shard[3]};
  void *in[4], *normed[4], *resid[4], *gamma[4];
  for (int r = 0; r < 4; ++r) {
    in[r] = poisoned(5 * 4096 * 2);
    normed[r] = poisoned(8 * 4096 * 2);
    resid[r] = poisoned(8 * 4096 * 2);
    gamma[r] = poisoned(4096 * 2);
  }
  collgen_stream_t streams[4];
  make_streams(c, streams);
  memset(stats, 0, sizeof *stats);
  /* groups of 2: {0,1} gathers 8 rows, {2,3} gathers none and launches nothing */
  cr_assert_eq(collgen_allgather_rmsnorm(c, COLLGEN_DTYPE_BF16, 2, shapes, (const void *const *)in,
                                         normed, resid, (const void *const *)gamma, 1e-6f, 1.0f, 2,
                                         streams), COLLGEN_OK, "%s", collgen_comm_last_error(c));
  cr_expect_eq(stats->launches, 2);
  cr_expect_eq(stats->wrong_context, 0);
  cr_expect_eq(stats->log[0].device, 0);
  cr_expect_eq(stats->log[1].device, 1);
  cr_expect_eq(stats->log[0].grid, 8, "one block per gathered row");
  cr_expect_str_eq(stats->log[0].kernel, stats->log[1].kernel);
  cr_expect(strstr(stats->log[0].kernel, "_g2_c4096_") != NULL, "%s", stats->log[0].kernel);
  for (int r = 0; r < 4; ++r) {
    free(in[r]);
    free(normed[r]);
    free(resid[r]);
    free(gamma[r]);
  }
  collgen_comm_destroy(c);
}

/* allreduce_residual_rmsnorm: each rank launched once with the planned
** kernel and grid, in place accepted; groups of one launch the kernel too
** (it adds and normalizes: no copy); zero rows launch nothing. */
Test(hostpath, residual_rmsnorm_launches_every_rank_even_alone) {
  setenv("FAKE_CUDA_DEVICES", "4", 1);
  collgen_comm_t *c = make_comm(4);
  int64_t shape[3] = {2, 150, 4096}, none[2] = {0, 4096}; /* 300 rows of 8 KiB: row split */
  const int64_t *shapes[4] = {shape, shape, shape, shape}, *empty[4] = {none, none, none, none};
  void *x[4], *res[4], *normed[4], *gamma[4];
  for (int r = 0; r < 4; ++r) {
    x[r] = poisoned(300 * 4096 * 2);
    res[r] = poisoned(300 * 4096 * 2);
    normed[r] = poisoned(300 * 4096 * 2);
    gamma[r] = poisoned(4096 * 2);
  }
  collgen_stream_t streams[4];
  make_streams(c, streams);
  collgen_generator_t *g;
  cr_assert_eq(collgen_generator_create(&g, cache_dir), COLLGEN_OK);
  static const int groups[] = {0, 2, 1};
  for (size_t k = 0; k < sizeof groups / sizeof groups[0]; ++k) {
    memset(stats, 0, sizeof *stats);
    cr_assert_eq(collgen_allreduce_residual_rmsnorm(c, COLLGEN_DTYPE_BF16, 3, shapes,
                                                    (const void *const *)x,
                                                    (const void *const *)res, normed, res,
                                                    (const void *const *)gamma, 1e-6f, 1.0f,
                                                    groups[k], streams),
                 COLLGEN_OK, "group %d: %s", groups[k], collgen_comm_last_error(c));
    cr_expect_eq(stats->launches, 4, "group %d", groups[k]);
    cr_expect_eq(stats->copies, 0, "group %d: no copy, even alone", groups[k]);
    cr_expect_eq(stats->wrong_context, 0);
    collgen_shape_t s;
    collgen_shape_init(&s, COLLGEN_OP_ALLREDUCE_RESIDUAL_RMSNORM);
    s.ngpus = 4;
    s.group_size = groups[k];
    s.rows = 300;
    s.cols = 4096;
    collgen_plan_t plan;
    cr_assert_eq(collgen_plan(g, &s, &plan), COLLGEN_OK, "%s", collgen_generator_last_error(g));
    cr_expect_str_eq(plan.algo, groups[k] == 1 ? "local" : "rowsplit");
    for (int r = 0; r < 4; ++r) {
      cr_expect_eq(stats->log[r].device, r);
      cr_expect_str_eq(stats->log[r].kernel, plan.kernel);
      cr_expect_eq(stats->log[r].grid, (unsigned)plan.grid);
      cr_expect_eq(stats->log[r].block, (unsigned)plan.block);
    }
  }
  memset(stats, 0, sizeof *stats);
  cr_expect_eq(collgen_allreduce_residual_rmsnorm(c, COLLGEN_DTYPE_BF16, 2, empty,
                                                  (const void *const *)x, (const void *const *)res,
                                                  normed, res, (const void *const *)gamma, 1e-6f,
                                                  0.0f, 0, streams), COLLGEN_OK);
  cr_expect_eq(stats->launches + stats->copies + stats->module_loads, 0, "zero rows: nothing");
  for (int r = 0; r < 4; ++r) {
    cr_expect(all_poison(normed[r], 300 * 4096 * 2), "kernels do not run here");
    free(x[r]);
    free(res[r]);
    free(normed[r]);
    free(gamma[r]);
  }
  collgen_generator_destroy(g);
  collgen_comm_destroy(c);
}

/* Buffers per rank for bf16 [8, 4096] calls: x, residual (in place),
** codes (big enough to serve as the plain op's normed too), scales, gamma. */
typedef struct {
  void *x[2], *res[2], *q[2], *gamma[2];
  float *scales[2];
  collgen_stream_t streams[2];
} fp8_bufs;

static void fp8_bufs_make(collgen_comm_t *c, fp8_bufs *b) {
  for (int r = 0; r < 2; ++r) {
    b->x[r] = poisoned(8 * 4096 * 2);
    b->res[r] = poisoned(8 * 4096 * 2);
    b->q[r] = poisoned(8 * 4096 * 2);
    b->scales[r] = poisoned(256); /* 8 floats used; aligned_alloc needs a multiple of 256 */
    b->gamma[r] = poisoned(4096 * 2);
  }
  make_streams(c, b->streams);
}

static void fp8_bufs_free(fp8_bufs *b) {
  for (int r = 0; r < 2; ++r) {
    cr_expect(all_poison(b->q[r], 8 * 4096 * 2) && all_poison(b->scales[r], 256),
              "kernels do not run here");
    free(b->x[r]);
    free(b->res[r]);
    free(b->q[r]);
    free(b->scales[r]);
    free(b->gamma[r]);
  }
}

/* The plain op on [8, 4096] over b, normed into the codes' buffer. */
static int plain_call(collgen_comm_t *c, fp8_bufs *b) {
  int64_t shape[2] = {8, 4096};
  const int64_t *shapes[2] = {shape, shape};
  return collgen_allreduce_residual_rmsnorm(c, COLLGEN_DTYPE_BF16, 2, shapes,
                                            (const void *const *)b->x,
                                            (const void *const *)b->res, b->q, b->res,
                                            (const void *const *)b->gamma, 1e-6f, 0.0f, 0,
                                            b->streams);
}

/* The FP8 call of `mode` on [rows, 4096] over b. */
static int fp8_call(collgen_comm_t *c, fp8_bufs *b, int64_t rows, collgen_fp8_mode_t mode,
                    float static_scale) {
  int64_t shape[2] = {rows, 4096};
  const int64_t *shapes[2] = {shape, shape};
  return collgen_allreduce_residual_rmsnorm_fp8(
      c, COLLGEN_DTYPE_BF16, 2, shapes, (const void *const *)b->x, (const void *const *)b->res,
      b->q, mode == COLLGEN_FP8_DYNAMIC ? b->scales : NULL, b->res,
      (const void *const *)b->gamma, 1e-6f, 0.0f, mode, static_scale, 0, b->streams);
}

/* The FP8 entry point launches the planned e4m3 kernel on every rank with
** the codes as its normed output, the row scales (dynamic) or the static
** scale; the plain entry point still passes normed and no scales. */
Test(hostpath, residual_rmsnorm_fp8_launches_the_e4m3_kernel_with_its_buffers) {
  collgen_comm_t *c = make_comm(2);
  fp8_bufs b;
  fp8_bufs_make(c, &b);
  static const collgen_fp8_mode_t modes[] = {COLLGEN_FP8_DYNAMIC, COLLGEN_FP8_STATIC};
  for (size_t m = 0; m < 2; ++m) {
    memset(stats, 0, sizeof *stats);
    const float st = modes[m] == COLLGEN_FP8_STATIC ? 0.25f : 0.0f;
    cr_assert_eq(fp8_call(c, &b, 8, modes[m], st), COLLGEN_OK, "%s", collgen_comm_last_error(c));
    cr_expect_eq(stats->launches, 2);
    collgen_shape_t s;
    collgen_shape_init(&s, COLLGEN_OP_ALLREDUCE_RESIDUAL_RMSNORM);
    s.rows = 8;
    s.fp8 = modes[m];
    collgen_plan_t plan;
    cr_assert_eq(collgen_plan(c->gen, &s, &plan), COLLGEN_OK);
    for (int r = 0; r < 2; ++r) {
      const collgen__kparams *kp = &stats->log[r].params;
      cr_expect_str_eq(stats->log[r].kernel, plan.kernel);
      cr_expect(strstr(plan.kernel, modes[m] == COLLGEN_FP8_DYNAMIC ? "_ll_u1_e4m3_dynamic"
                                                                   : "_ll_u1_e4m3_static"),
                "%s", plan.kernel);
      cr_expect_eq(kp->normed, b.q[r], "the codes are the normed output");
      cr_expect_eq(kp->row_scales, modes[m] == COLLGEN_FP8_DYNAMIC ? b.scales[r] : NULL);
      cr_expect_eq(kp->static_scale, st);
      cr_expect_eq(kp->out[r], b.res[r], "residual_out in place");
      cr_expect_eq(kp->count, 8);
    }
  }
  memset(stats, 0, sizeof *stats);
  cr_expect_eq(fp8_call(c, &b, 0, COLLGEN_FP8_DYNAMIC, 0.0f), COLLGEN_OK);
  cr_expect_eq(stats->launches + stats->module_loads, 0, "zero rows: nothing");
  cr_assert_eq(plain_call(c, &b), COLLGEN_OK, "%s", collgen_comm_last_error(c));
  cr_expect_eq(stats->log[0].params.normed, b.q[0]);
  cr_expect_null(stats->log[0].params.row_scales);
  cr_expect(strstr(stats->log[0].kernel, "e4m3") == NULL, "%s", stats->log[0].kernel);
  fp8_bufs_free(&b);
  collgen_comm_destroy(c);
}

/* Below sm_89 the FP8 output is refused with COLLGEN_ERR_UNSUPPORTED before
** anything loads (zero rows too, and prepare); the plain op still runs. On
** sm_89 the FP8 kernel compiles and launches. */
Test(hostpath, residual_rmsnorm_fp8_needs_sm_89) {
  setenv("FAKE_CUDA_SM", "80", 1);
  collgen_comm_t *c = make_comm(2);
  fp8_bufs b;
  fp8_bufs_make(c, &b);
  memset(stats, 0, sizeof *stats);
  static const int64_t rows[] = {8, 0};
  for (size_t i = 0; i < 2; ++i) {
    cr_expect_eq(fp8_call(c, &b, rows[i], COLLGEN_FP8_DYNAMIC, 0.0f), COLLGEN_ERR_UNSUPPORTED);
    cr_expect(strstr(collgen_comm_last_error(c), "needs sm_89 or newer: rank 0 (device 0) is "
                                                 "sm_80"), "%s", collgen_comm_last_error(c));
    cr_expect_eq(fp8_call(c, &b, rows[i], COLLGEN_FP8_STATIC, 0.5f), COLLGEN_ERR_UNSUPPORTED);
  }
  collgen_shape_t s;
  collgen_shape_init(&s, COLLGEN_OP_ALLREDUCE_RESIDUAL_RMSNORM);
  s.fp8 = COLLGEN_FP8_STATIC;
  cr_expect_eq(collgen_comm_prepare(c, &s, 1), COLLGEN_ERR_UNSUPPORTED);
  cr_expect_eq(stats->launches + stats->module_loads + stats->copies, 0);
  cr_expect_eq(plain_call(c, &b), COLLGEN_OK, "%s", collgen_comm_last_error(c));
  cr_expect_eq(stats->launches, 2, "the plain op runs on sm_80");
  fp8_bufs_free(&b);
  collgen_comm_destroy(c);

  setenv("FAKE_CUDA_SM", "89", 1);
  c = make_comm(2);
  fp8_bufs_make(c, &b);
  memset(stats, 0, sizeof *stats);
  cr_expect_eq(fp8_call(c, &b, 8, COLLGEN_FP8_DYNAMIC, 0.0f), COLLGEN_OK, "%s",
               collgen_comm_last_error(c));
  cr_expect_eq(stats->launches, 2);
  fp8_bufs_free(&b);
  collgen_comm_destroy(c);
}

Test(hostpath, comm_create_refuses_bad_device_lists_and_old_gpus) {
  collgen_comm_t *c = (collgen_comm_t *)1;
  int twice[2] = {0, 0}, missing[2] = {0, 5}, nine[9] = {0};
  cr_expect_eq(collgen_comm_create(&c, 2, twice, NULL), COLLGEN_ERR_INVALID_ARG);
  cr_expect(strstr(collgen_last_error(), "listed twice"), "%s", collgen_last_error());
  cr_expect_null(c, "nothing created");
  cr_expect_eq(collgen_comm_create(&c, 2, missing, NULL), COLLGEN_ERR_NO_DEVICE);
  cr_expect(strstr(collgen_last_error(), "device 5 does not exist"), "%s", collgen_last_error());
  cr_expect_eq(collgen_comm_create(&c, 9, nine, NULL), COLLGEN_ERR_INVALID_ARG);
  setenv("FAKE_CUDA_SM", "75", 1);
  int two[2] = {0, 1};
  cr_expect_eq(collgen_comm_create(&c, 2, two, NULL), COLLGEN_ERR_UNSUPPORTED);
  cr_expect(strstr(collgen_last_error(), "sm_75"), "%s", collgen_last_error());
  cr_expect_null(c);
}

Test(hostpath, missing_p2p_is_refused_per_call) {
  setenv("FAKE_CUDA_NO_P2P", "1", 1);
  collgen_comm_t *c = make_comm(2);
  collgen_comm_info_t info;
  cr_assert_eq(collgen_comm_info(c, &info), COLLGEN_OK);
  cr_expect_eq(info.p2p[0][1], 0);
  int64_t shape[1] = {1024};
  const int64_t *shapes[2] = {shape, shape};
  void *in[2] = {poisoned(4096), poisoned(4096)}, *out[2] = {poisoned(4096), poisoned(4096)};
  collgen_stream_t streams[2];
  make_streams(c, streams);
  memset(stats, 0, sizeof *stats);
  cr_expect_eq(collgen_allreduce_sum(c, COLLGEN_DTYPE_BF16, 1, shapes, (const void *const *)in, out,
                                     2, streams), COLLGEN_ERR_NO_P2P);
  cr_expect(strstr(collgen_comm_last_error(c), "share a group"), "%s", collgen_comm_last_error(c));
  cr_expect_eq(stats->launches, 0);
  cr_expect_eq(collgen_allreduce_sum(c, COLLGEN_DTYPE_BF16, 1, shapes, (const void *const *)in, out,
                                     1, streams), COLLGEN_OK, "groups of one need no peer access");
  for (int r = 0; r < 2; ++r) {
    free(in[r]);
    free(out[r]);
  }
  collgen_comm_destroy(c);
}

/* Shapes whose element count overflows int64 (or passes COLLGEN_MAX_ELEMS)
** are refused, not wrapped to a small or zero count. */
Test(hostpath, oversized_shapes_are_refused) {
  collgen_comm_t *c = make_comm(2);
  int64_t huge[2] = {(int64_t)1 << 40, (int64_t)1 << 40}, wraps[3] = {1 << 22, 1 << 21, 1 << 21};
  int64_t over[1] = {COLLGEN_MAX_ELEMS + 1}, rows[2] = {(int64_t)1 << 39, 4096};
  const int64_t *h2[2] = {huge, huge}, *w3[2] = {wraps, wraps}, *o1[2] = {over, over};
  const int64_t *r2[2] = {rows, rows};
  void *buf[2] = {poisoned(4096), poisoned(4096)}, *buf2[2] = {poisoned(4096), poisoned(4096)};
  void *buf3[2] = {poisoned(4096), poisoned(4096)}, *buf4[2] = {poisoned(4096), poisoned(4096)};
  collgen_stream_t streams[2];
  make_streams(c, streams);
  memset(stats, 0, sizeof *stats);
  const void *const *in = (const void *const *)buf;
  cr_expect_eq(collgen_allreduce_sum(c, COLLGEN_DTYPE_BF16, 2, h2, in, buf2, 0, streams),
               COLLGEN_ERR_INVALID_ARG, "[2^40, 2^40] wraps to 0 elements in int64");
  cr_expect(strstr(collgen_comm_last_error(c), "COLLGEN_MAX_ELEMS"), "%s", collgen_comm_last_error(c));
  cr_expect_eq(collgen_allreduce_sum(c, COLLGEN_DTYPE_BF16, 3, w3, in, buf2, 0, streams),
               COLLGEN_ERR_INVALID_ARG, "2^64 elements wrap to 0");
  cr_expect_eq(collgen_allreduce_sum(c, COLLGEN_DTYPE_BF16, 1, o1, in, buf2, 0, streams),
               COLLGEN_ERR_INVALID_ARG);
  cr_expect_eq(collgen_allgather_rmsnorm(c, COLLGEN_DTYPE_BF16, 2, r2, in, buf2, buf3,
                                         (const void *const *)buf4, 1e-6f, 0.0f, 0, streams),
               COLLGEN_ERR_INVALID_ARG, "2^40 gathered rows x 4096 cols");
  cr_expect_eq(stats->launches + stats->copies + stats->module_loads, 0);
  for (int r = 0; r < 2; ++r) {
    cr_expect(all_poison(buf2[r], 4096) && all_poison(buf3[r], 4096));
    free(buf[r]);
    free(buf2[r]);
    free(buf3[r]);
    free(buf4[r]);
  }
  collgen_comm_destroy(c);
}

/* Every pair of a rank's buffers where one is written must not overlap:
** input against both outputs, normed against residual, gamma against the
** outputs. (A partial overlap of input and residual raced across ranks.) */
Test(hostpath, rmsnorm_overlapping_buffers_are_refused) {
  collgen_comm_t *c = make_comm(2);
  int64_t shard[2] = {4, 1024}; /* 4 rows each, 8 gathered, bf16: 8 KiB shard, 16 KiB gathered */
  const int64_t *shapes[2] = {shard, shard};
  char *in[2], *normed[2], *resid[2], *gamma[2], *arena[2];
  for (int r = 0; r < 2; ++r) {
    arena[r] = poisoned(1 << 16);
    in[r] = poisoned(8192);
    normed[r] = poisoned(16384);
    resid[r] = poisoned(16384);
    gamma[r] = poisoned(2048);
  }
  collgen_stream_t streams[2];
  make_streams(c, streams);
  memset(stats, 0, sizeof *stats);
  struct {
    const char *what;
    const void *in0, *normed0, *resid0, *gamma0;
  } cases[] = {
      {"input inside residual", arena[0] + 4096, normed[0], arena[0], gamma[0]},
      {"input overlaps normed", in[0], in[0] + 2048, resid[0], gamma[0]},
      {"normed is residual", in[0], resid[0], resid[0], gamma[0]},
      {"normed overlaps residual", in[0], arena[0], arena[0] + 8192, gamma[0]},
      {"gamma inside normed", in[0], normed[0], resid[0], normed[0] + 4096},
      {"gamma inside residual", in[0], normed[0], resid[0], resid[0]},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    const void *ins[2] = {cases[i].in0, in[1]}, *gammas[2] = {cases[i].gamma0, gamma[1]};
    void *norms[2] = {(void *)cases[i].normed0, normed[1]}, *resids[2] = {(void *)cases[i].resid0, resid[1]};
    int rc = collgen_allgather_rmsnorm(c, COLLGEN_DTYPE_BF16, 2, shapes, ins, norms, resids, gammas,
                                       1e-6f, 0.0f, 0, streams);
    cr_expect_eq(rc, COLLGEN_ERR_INVALID_ARG, "%s: got %s", cases[i].what, collgen_status_name(rc));
    cr_expect(strstr(collgen_comm_last_error(c), "rank 0"), "%s: %s", cases[i].what,
              collgen_comm_last_error(c));
  }
  cr_expect_eq(stats->launches + stats->copies + stats->module_loads, 0);
  for (int r = 0; r < 2; ++r) {
    cr_expect(all_poison(arena[r], 1 << 16) && all_poison(normed[r], 16384) &&
              all_poison(resid[r], 16384));
    free(arena[r]);
    free(in[r]);
    free(normed[r]);
    free(resid[r]);
    free(gamma[r]);
  }
  collgen_comm_destroy(c);
}

/* The whole table of refused calls (tests/bad_inputs.c): every one returns
** its status and message, and none launches, copies, loads or writes. */
Test(hostpath, bad_input_table_refuses_everything) {
  int devices[2] = {0, 1};
  collgen_comm_options_t o;
  collgen_comm_options_init(&o);
  o.cache_dir = cache_dir;
  bad_env e;
  bad_env_create(&e, devices, &o);
  memset(stats, 0, sizeof *stats);
  int n = bad_inputs_run(&e, 2);
  cr_expect_geq(n, 60, "only %d cases", n);
  cr_expect_eq(stats->launches, 0);
  cr_expect_eq(stats->copies, 0);
  cr_expect_eq(stats->module_loads, 0);
  bad_env_check_and_destroy(&e);
}

/* The default wait bound is a safety net of minutes, not seconds: a peer
** that is seconds late under load must not kill the communicator. */
Test(hostpath, default_wait_bound_is_ten_minutes) {
  unsetenv("COLLGEN_TIMEOUT_MS");
  collgen_comm_t *c = make_comm(2);
  cr_expect_eq(c->timeout_ms, 600000);
  cr_expect_eq(COLLGEN_DEFAULT_TIMEOUT_MS, 600000);
  collgen_comm_destroy(c);
}

/* collgen_comm_health reads the status records the kernels write and names
** every rank's state and the peer it gave up on. The records are written
** here by hand, as a kernel would. */
Test(hostpath, health_names_the_rank_that_gave_up) {
  setenv("FAKE_CUDA_DEVICES", "4", 1);
  collgen_comm_t *c = make_comm(4);
  collgen_comm_health_t h;
  cr_assert_eq(collgen_comm_health(c, &h), COLLGEN_OK);
  cr_expect_eq(h.ndev, 4);
  for (int r = 0; r < 4; ++r) cr_expect_eq(h.rank[r].state, COLLGEN_RANK_OK);
  unsigned int *rank1 = c->errors + 1 * COLLGEN_STATUS_WORDS;
  rank1[COLLGEN_ST_RANK] = 1; /* group of 2 based at 0: group rank 1 waited for 0 */
  rank1[COLLGEN_ST_PEER] = 0;
  rank1[COLLGEN_ST_STOPPED] = COLLGEN_STOP_TIMEOUT;
  cr_assert_eq(collgen_comm_health(c, &h), COLLGEN_OK);
  cr_expect_eq(h.rank[1].state, COLLGEN_RANK_TIMED_OUT);
  cr_expect_eq(h.rank[1].peer, 0);
  cr_expect_eq(h.rank[2].state, COLLGEN_RANK_OK);
  cr_expect_eq(h.rank[2].peer, -1);
  cr_expect_eq(collgen_comm_check(c), COLLGEN_ERR_TIMEOUT);
  cr_expect(strstr(collgen_comm_last_error(c), "rank 1 (device 1)") &&
            strstr(collgen_comm_last_error(c), "for rank 0 (device 0)"), "%s",
            collgen_comm_last_error(c));
  cr_expect_eq(collgen_comm_health(NULL, &h), COLLGEN_ERR_INVALID_ARG);
  /* a kernel that read the abort mark (another process aborted) */
  unsigned int *rank2 = c->errors + 2 * COLLGEN_STATUS_WORDS;
  rank1[COLLGEN_ST_STOPPED] = 0;
  rank2[COLLGEN_ST_STOPPED] = COLLGEN_STOP_ABORTED;
  cr_assert_eq(collgen_comm_health(c, &h), COLLGEN_OK);
  cr_expect_eq(h.rank[2].state, COLLGEN_RANK_ABORTED);
  cr_expect_eq(h.rank[1].state, COLLGEN_RANK_OK);
  cr_expect_eq(collgen_comm_check(c), COLLGEN_ERR_ABORTED);
  cr_expect(strstr(collgen_comm_last_error(c), "rank 2 (device 2)"), "%s", collgen_comm_last_error(c));
  collgen_comm_destroy(c);
}

/* collgen_comm_abort writes the abort flag, then 0xFF over every byte of
** every rank's signal buffer, by DMA on each rank's own stream (no launch);
** every later call, prepare and check is refused with COLLGEN_ERR_ABORTED
** before it loads or launches anything; destroy still works. */
Test(hostpath, abort_marks_every_signal_buffer_and_refuses_later_calls) {
  setenv("FAKE_CUDA_DEVICES", "3", 1);
  collgen_comm_t *c = make_comm(3);
  int64_t shape[1] = {4096};
  const int64_t *shapes[3] = {shape, shape, shape};
  void *in[3], *out[3];
  for (int r = 0; r < 3; ++r) {
    in[r] = poisoned(8192);
    out[r] = poisoned(8192);
  }
  collgen_stream_t streams[3];
  make_streams(c, streams);
  cr_assert_eq(collgen_allreduce_sum(c, COLLGEN_DTYPE_BF16, 1, shapes, (const void *const *)in, out,
                                     0, streams), COLLGEN_OK, "%s", collgen_comm_last_error(c));
  cr_expect_eq(collgen_comm_abort(NULL), COLLGEN_ERR_INVALID_ARG);
  memset(stats, 0, sizeof *stats);
  cr_assert_eq(collgen_comm_abort(c), COLLGEN_OK, "%s", collgen_comm_last_error(c));
  cr_expect_eq(stats->launches, 0, "the abort launches nothing");
  cr_expect_eq(stats->wrong_context, 0, "each copy runs in its rank's context");
  cr_expect_eq(stats->uploads, 6, "the counts, then the whole buffer, per rank");
  cr_expect_eq(stats->upload_bytes,
               3 * (long)(offsetof(collgen__signal, ll_token) + sizeof(collgen__signal)));
  for (int r = 0; r < 3; ++r) {
    const collgen__signal *sig = (const collgen__signal *)(uintptr_t)c->signal[r];
    cr_expect_neq(sig->abort_flag, 0u);
    cr_expect_eq(sig->counter[0][0], COLLGEN_ABORT_MARK, "rank %d: a counter", r);
    cr_expect_eq(sig->peer_flag[1][COLLGEN_MAX_BLOCKS - 1][COLLGEN_MAX_DEVICES - 1],
                 COLLGEN_ABORT_MARK, "rank %d: the last barrier slot", r);
    cr_expect_eq(sig->ll_epoch[2], COLLGEN_ABORT_MARK, "rank %d: an epoch", r);
    cr_expect_eq(sig->ll_token[0][7][1], COLLGEN_ABORT_MARK, "rank %d: a token", r);
    cr_expect_eq(sig->ll_lines[1][COLLGEN_MAX_DEVICES - 1][COLLGEN_LL_LINES - 1].v[3],
                 COLLGEN_ABORT_MARK, "rank %d: the last LL line's flag", r);
  }
  memset(stats, 0, sizeof *stats);
  cr_expect_eq(collgen_allreduce_sum(c, COLLGEN_DTYPE_BF16, 1, shapes, (const void *const *)in, out,
                                     0, streams), COLLGEN_ERR_ABORTED);
  cr_expect(strstr(collgen_comm_last_error(c), "collgen_comm_abort"), "%s",
            collgen_comm_last_error(c));
  cr_expect_eq(collgen_comm_check(c), COLLGEN_ERR_ABORTED);
  collgen_shape_t s;
  collgen_shape_init(&s, COLLGEN_OP_ALLREDUCE_SUM);
  s.elems = 1 << 20; /* a shape not loaded yet */
  cr_expect_eq(collgen_comm_prepare(c, &s, 1), COLLGEN_ERR_ABORTED);
  cr_expect_eq(stats->launches, 0);
  cr_expect_eq(stats->module_loads, 0);
  cr_expect_eq(stats->copies, 0);
  collgen_comm_health_t h;
  cr_assert_eq(collgen_comm_health(c, &h), COLLGEN_OK);
  for (int r = 0; r < 3; ++r) cr_expect_eq(h.rank[r].state, COLLGEN_RANK_ABORTED);
  cr_expect_eq(collgen_comm_abort(c), COLLGEN_OK, "a second abort is harmless");
  for (int r = 0; r < 3; ++r) {
    cr_expect(all_poison(out[r], 8192), "kernels do not run here; nothing else wrote");
    free(in[r]);
    free(out[r]);
  }
  collgen_comm_destroy(c);
}

/* A VMM buffer exported as a POSIX fd is mapped by another process, which
** sees and changes the same bytes (the stand-in driver backs it with a
** memfd); bad imports are refused; freeing releases every handle. */
Test(hostpath, shared_buffers_map_into_another_process) {
  collgen_comm_t *c = make_comm(1);
  char err[256];
  cr_assert_eq(collgen__cu.cuCtxSetCurrent(c->ctx[0]), CUDA_SUCCESS);
  long live = stats->vmm_handles;
  collgen__shared_buf mine;
  cr_assert_eq(collgen__shared_alloc(c->cudev[0], 3 << 20, &mine, err, sizeof err), COLLGEN_OK,
               "%s", err);
  cr_expect_eq(mine.bytes, 4u << 20, "rounded up to whole 2 MiB granules");
  memset((void *)(uintptr_t)mine.ptr, 0x11, mine.bytes);
  int fd = -1;
  cr_assert_eq(collgen__shared_export(&mine, &fd, err, sizeof err), COLLGEN_OK, "%s", err);
  pid_t pid = fork();
  if (pid == 0) {
    collgen__shared_buf theirs;
    if (collgen__shared_import(fd, mine.bytes, c->cudev[0], &theirs, err, sizeof err) != COLLGEN_OK)
      _exit(2);
    unsigned char *p = (unsigned char *)(uintptr_t)theirs.ptr;
    int ok = p[0] == 0x11 && p[theirs.bytes - 1] == 0x11;
    p[12345] = 0x22;
    collgen__shared_free(&theirs);
    _exit(ok ? 0 : 3);
  }
  int status = 0;
  cr_assert_eq(waitpid(pid, &status, 0), pid);
  cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
  cr_expect_eq(((unsigned char *)(uintptr_t)mine.ptr)[12345], 0x22, "the child's write shows here");
  collgen__shared_buf bad;
  cr_expect_eq(collgen__shared_import(-1, mine.bytes, c->cudev[0], &bad, err, sizeof err),
               COLLGEN_ERR_INVALID_ARG);
  cr_expect_eq(collgen__shared_import(fd, 12345, c->cudev[0], &bad, err, sizeof err),
               COLLGEN_ERR_INVALID_ARG, "not whole granules");
  cr_expect_eq(collgen__shared_import(fd, 64u << 20, c->cudev[0], &bad, err, sizeof err),
               COLLGEN_ERR_CUDA, "larger than the allocation: the driver refuses the map");
  cr_expect_eq(bad.ptr, 0u);
  close(fd);
  collgen__shared_free(&mine);
  collgen__shared_free(&mine); /* empty: harmless */
  cr_expect_eq(stats->vmm_handles, live, "every handle released");
  collgen_comm_destroy(c);
}

/* prepare loads every kernel ahead of time, so the first call of a shape
** loads nothing (a load waits for an idle GPU); bad shapes load nothing. */
Test(hostpath, prepare_loads_ahead_so_calls_load_nothing) {
  collgen_comm_t *c = make_comm(2);
  collgen_shape_t s[3];
  collgen_shape_init(&s[0], COLLGEN_OP_ALLREDUCE_SUM);
  s[0].elems = 4096;
  s[0].group_size = 0;
  collgen_shape_init(&s[1], COLLGEN_OP_ALLGATHER_RMSNORM);
  s[1].rows = 8;
  s[1].cols = 4096;
  s[1].group_size = 1;
  collgen_shape_init(&s[2], COLLGEN_OP_ALLREDUCE_SUM);
  s[2].elems = 4096;
  s[2].group_size = 1; /* a copy: nothing to load */
  memset(stats, 0, sizeof *stats);
  collgen_shape_t bad = s[0];
  bad.group_size = 3;
  cr_expect_eq(collgen_comm_prepare(c, &bad, 1), COLLGEN_ERR_INVALID_ARG);
  bad = s[1];
  bad.cols = 0;
  collgen_shape_t two[2] = {s[0], bad};
  cr_expect_eq(collgen_comm_prepare(c, two, 2), COLLGEN_ERR_INVALID_ARG);
  cr_expect_eq(stats->module_loads, 0, "every shape is checked before anything loads");
  cr_assert_eq(collgen_comm_prepare(c, s, 3), COLLGEN_OK, "%s", collgen_comm_last_error(c));
  cr_expect_eq(stats->module_loads, 4, "allreduce on 2 ranks + rmsnorm on 2 groups of 1");
  cr_expect_eq(stats->launches, 0);
  int64_t shape[1] = {4096}, shard[2] = {4, 4096};
  const int64_t *shapes[2] = {shape, shape}, *shards[2] = {shard, shard};
  void *in[2] = {poisoned(1 << 16), poisoned(1 << 16)}, *out[2] = {poisoned(1 << 16), poisoned(1 << 16)};
  void *res[2] = {poisoned(1 << 16), poisoned(1 << 16)}, *gam[2] = {poisoned(1 << 16), poisoned(1 << 16)};
  collgen_stream_t streams[2];
  make_streams(c, streams);
  cr_assert_eq(collgen_allreduce_sum(c, COLLGEN_DTYPE_BF16, 1, shapes, (const void *const *)in, out,
                                     0, streams), COLLGEN_OK, "%s", collgen_comm_last_error(c));
  s[1].aligned16 = 1;
  cr_assert_eq(collgen_allgather_rmsnorm(c, COLLGEN_DTYPE_BF16, 2, shards, (const void *const *)in,
                                         out, res, (const void *const *)gam, 1e-6f, 0.0f, 1,
                                         streams), COLLGEN_OK, "%s", collgen_comm_last_error(c));
  cr_expect_eq(stats->launches, 4);
  cr_expect_eq(stats->module_loads, 4, "the calls found their kernels loaded");
  /* a whole class: every variant on every rank */
  collgen_shape_class_t cls;
  memset(&cls, 0, sizeof cls);
  cls.op = COLLGEN_OP_ALLREDUCE_SUM;
  cls.dtype = COLLGEN_DTYPE_F32;
  cls.ngpus = 2;
  collgen_shape_t *variants = NULL;
  int nvariants = 0;
  cr_assert_eq(collgen_plan_variants(c->gen, &cls, &variants, &nvariants), COLLGEN_OK);
  free(variants);
  memset(stats, 0, sizeof *stats);
  cr_assert_eq(collgen_comm_prepare_class(c, &cls), COLLGEN_OK, "%s", collgen_comm_last_error(c));
  cr_expect_eq(stats->module_loads, 2 * nvariants, "%d variants", nvariants);
  cls.ngpus = 4;
  cr_expect_eq(collgen_comm_prepare_class(c, &cls), COLLGEN_ERR_INVALID_ARG);
  for (int r = 0; r < 2; ++r) {
    free(in[r]);
    free(out[r]);
    free(res[r]);
    free(gam[r]);
  }
  collgen_comm_destroy(c);
}

/* broadcast: every rank launched once with the planned kernel; the
** parameters carry every rank's pointers and the root (non-root inputs may
** be NULL); groups of one copy the root's input (nothing in place); zero
** elements launch nothing; a copy-only dtype (i64) is taken. */
Test(hostpath, broadcast_launches_with_its_root_and_groups_of_one_copy) {
  setenv("FAKE_CUDA_DEVICES", "4", 1);
  collgen_comm_t *c = make_comm(4);
  int64_t shape[1] = {1000}, zero[1] = {0};
  const int64_t *shapes[4] = {shape, shape, shape, shape}, *zshapes[4] = {zero, zero, zero, zero};
  void *in[4], *out[4];
  uint64_t seed = tu_rand() | 1;
  for (int r = 0; r < 4; ++r) {
    in[r] = poisoned(8000);
    out[r] = poisoned(8000);
    collgen__ref_fill_random(COLLGEN_DTYPE_I64, in[r], 1000, &seed);
  }
  const void *only_roots[4] = {NULL, in[1], NULL, in[3]}; /* root 1 of each group of 2 */
  collgen_stream_t streams[4];
  make_streams(c, streams);
  memset(stats, 0, sizeof *stats);
  cr_assert_eq(collgen_broadcast(c, COLLGEN_DTYPE_I64, 1, shapes, only_roots, out, 1, 2, streams),
               COLLGEN_OK, "%s", collgen_comm_last_error(c));
  cr_expect_eq(stats->launches, 4);
  cr_expect_eq(stats->copies, 0);
  cr_expect_eq(stats->wrong_context, 0);
  for (int r = 0; r < 4; ++r) {
    const collgen__kparams *kp = &stats->log[r].params;
    cr_expect_str_eq(stats->log[r].kernel, "collgen_broadcast_b8_g2_v2");
    cr_expect_eq(kp->root, 1u);
    cr_expect_eq(kp->count, 1000ull);
    cr_expect_eq(kp->rank, (unsigned)(r % 2));
    cr_expect_eq(kp->in[1], in[r / 2 * 2 + 1], "rank %d: the root's input", r);
    cr_expect_null(kp->in[0]);
    cr_expect_eq(kp->out[0], out[r / 2 * 2]);
    cr_expect_eq(kp->out[1], out[r / 2 * 2 + 1]);
  }
  /* unaligned: the scalar kernel */
  void *odd[4] = {(char *)out[0] + 8, out[1], out[2], out[3]};
  cr_assert_eq(collgen_broadcast(c, COLLGEN_DTYPE_I64, 1, shapes, only_roots, odd, 1, 2, streams),
               COLLGEN_OK, "%s", collgen_comm_last_error(c));
  cr_expect_str_eq(stats->log[4].kernel, "collgen_broadcast_b8_g2_v1");
  cr_expect_str_eq(stats->log[6].kernel, "collgen_broadcast_b8_g2_v2", "per group");
  /* groups of one: a copy of each rank's own input */
  memset(stats, 0, sizeof *stats);
  cr_assert_eq(collgen_broadcast(c, COLLGEN_DTYPE_I64, 1, shapes, (const void *const *)in, out, 0,
                                 1, streams), COLLGEN_OK, "%s", collgen_comm_last_error(c));
  cr_expect_eq(stats->launches, 0);
  cr_expect_eq(stats->copies, 4);
  for (int r = 0; r < 4; ++r) cr_expect(memcmp(out[r], in[r], 8000) == 0, "rank %d", r);
  cr_assert_eq(collgen_broadcast(c, COLLGEN_DTYPE_I64, 1, shapes, (const void *const *)in, in, 0,
                                 1, streams), COLLGEN_OK);
  cr_expect_eq(stats->copies, 4, "in place: nothing to do");
  cr_expect_eq(collgen_broadcast(c, COLLGEN_DTYPE_U8, 1, zshapes, only_roots, out, 3, 4, streams),
               COLLGEN_OK, "%s", collgen_comm_last_error(c));
  cr_expect_eq(stats->launches, 0);
  cr_expect_eq(stats->copies, 4);
  for (int r = 0; r < 4; ++r) {
    free(in[r]);
    free(out[r]);
  }
  collgen_comm_destroy(c);
}

/* all_gather on 4 ranks in groups of 2, uneven and empty shards, any dtype:
** each rank launched once with its group's kernel, the shards' pointers
** and byte offsets and its output; in place at the shard's offset is
** accepted; groups of one copy (nothing in place); zero elements launch
** nothing. */
Test(hostpath, all_gather_launches_with_shard_offsets_and_copies_alone) {
  setenv("FAKE_CUDA_DEVICES", "4", 1);
  collgen_comm_t *c = make_comm(4);
  int64_t shard[4][2] = {{3, 5}, {0, 5}, {2, 5}, {7, 5}}; /* i16: 10-byte rows */
  const int64_t *shapes[4] = {shard[0], shard[1], shard[2], shard[3]};
  char *in[4], *out[4];
  for (int r = 0; r < 4; ++r) {
    in[r] = poisoned(1024);
    out[r] = poisoned(1024);
  }
  collgen_stream_t streams[4];
  make_streams(c, streams);
  memset(stats, 0, sizeof *stats);
  cr_assert_eq(collgen_all_gather(c, COLLGEN_DTYPE_I16, 2, shapes, (const void *const *)in,
                                  (void *const *)out, 2, streams), COLLGEN_OK, "%s",
               collgen_comm_last_error(c));
  cr_expect_eq(stats->launches, 4);
  cr_expect_eq(stats->copies, 0);
  cr_expect_eq(stats->wrong_context, 0);
  static const unsigned long long starts[2][3] = {{0, 30, 30}, {0, 20, 90}};
  for (int r = 0; r < 4; ++r) {
    const fake_cuda_launch_t *l = &stats->log[r];
    const int base = r / 2 * 2;
    cr_expect_eq(l->device, r);
    cr_expect_str_eq(l->kernel, "collgen_all_gather_b2_g2");
    cr_expect_eq(l->params.rank, (unsigned)(r - base));
    cr_expect(l->params.in[0] == in[base] && l->params.in[1] == in[base + 1]);
    cr_expect(l->params.out[r - base] == out[r]);
    for (int k = 0; k < 3; ++k)
      cr_expect_eq(l->params.row_start[k], starts[r / 2][k], "rank %d row_start[%d]", r, k);
  }
  cr_expect(all_poison(out[0], 1024), "kernels do not run here");
  /* in place: rank 1's (empty) and rank 3's shard at their offsets */
  const void *inplace[4] = {in[0], out[1], in[2], out[3] + 20};
  memset(stats, 0, sizeof *stats);
  cr_expect_eq(collgen_all_gather(c, COLLGEN_DTYPE_I16, 2, shapes, inplace, (void *const *)out, 2,
                                  streams), COLLGEN_OK, "%s", collgen_comm_last_error(c));
  cr_expect_eq(stats->launches, 4);
  /* groups of one: copies (rank 1's shard is empty: nothing), in place nothing */
  memset(stats, 0, sizeof *stats);
  cr_expect_eq(collgen_all_gather(c, COLLGEN_DTYPE_F64, 2, shapes, (const void *const *)in,
                                  (void *const *)out, 1, streams), COLLGEN_OK, "%s",
               collgen_comm_last_error(c));
  cr_expect_eq(stats->launches, 0);
  cr_expect_eq(stats->copies, 3);
  cr_expect_eq(stats->module_loads, 0, "nothing to compile for a copy");
  cr_expect(memcmp(out[3], in[3], 7 * 5 * 8) == 0);
  cr_expect(all_poison(out[3] + 7 * 5 * 8, 1024 - 7 * 5 * 8), "nothing written past the shard");
  memset(stats, 0, sizeof *stats);
  cr_expect_eq(collgen_all_gather(c, COLLGEN_DTYPE_U8, 2, shapes, (const void *const *)out,
                                  (void *const *)out, 1, streams), COLLGEN_OK);
  cr_expect_eq(stats->copies, 0, "in place alone: nothing to do");
  /* zero elements: nothing launched */
  int64_t none[2] = {0, 5};
  const int64_t *empty[4] = {none, none, none, none};
  cr_expect_eq(collgen_all_gather(c, COLLGEN_DTYPE_BF16, 2, empty, (const void *const *)in,
                                  (void *const *)out, 0, streams), COLLGEN_OK);
  cr_expect_eq(stats->launches + stats->copies, 0);
  for (int r = 0; r < 4; ++r) {
    free(in[r]);
    free(out[r]);
  }
  collgen_comm_destroy(c);
}

/* scatter's chunk of `rows` rows for group rank i of g, worked out here
** (count_i = N/G + (i < N%G), start_i = i*(N/G) + min(i, N%G)) and checked
** against collgen_scatter_chunk. */
static void scatter_chunk_here(int64_t rows, int g, int i, int64_t *start, int64_t *count) {
  const int64_t each = rows / g, extra = rows % g;
  *count = each + (i < extra);
  *start = i * each + (i < extra ? i : extra);
  int64_t s = -1, n = -1;
  cr_assert_eq(collgen_scatter_chunk(rows, g, i, &s, &n), COLLGEN_OK);
  cr_expect(s == *start && n == *count,
            "rows %lld, chunk %d of %d: [%lld, +%lld), want [%lld, +%lld)", (long long)rows, i,
            g, (long long)s, (long long)n, (long long)*start, (long long)*count);
}

/* Launch l of group rank i of a scatter of rows x row_bytes over g ranks
** from `root` (ins, outs: the group's buffers as given): the planned
** kernel and grid, the root, every rank's input and output, and the byte
** offset of every chunk in the root's input (row_start[g] = its bytes). */
static void expect_scatter_launch(const fake_cuda_launch_t *l, const char *kernel, int grid,
                                  int g, int i, int root, int64_t rows, int64_t row_bytes,
                                  const void *const *ins, void *const *outs) {
  const collgen__kparams *kp = &l->params;
  cr_expect_str_eq(l->kernel, kernel);
  cr_expect_eq(l->grid, (unsigned)grid, "%s: grid %u", kernel, l->grid);
  cr_expect_eq(l->block, 512u);
  cr_expect_eq(kp->rank, (unsigned)i);
  cr_expect_eq(kp->root, (unsigned)root);
  for (int k = 0; k < g; ++k) {
    int64_t start = 0, count = 0;
    scatter_chunk_here(rows, g, k, &start, &count);
    cr_expect_eq(kp->row_start[k], (unsigned long long)(start * row_bytes),
                 "group rank %d: row_start[%d] %llu", i, k, kp->row_start[k]);
    cr_expect_eq(kp->in[k], ins[k], "group rank %d: in[%d]", i, k);
    cr_expect_eq(kp->out[k], outs[k], "group rank %d: out[%d]", i, k);
  }
  cr_expect_eq(kp->row_start[g], (unsigned long long)(rows * row_bytes));
  cr_expect_eq(kp->count, (unsigned long long)(rows * row_bytes));
}

/* scatter on 4 ranks: groups of 2 (root 1: chunks of 4 and 3 rows) and of
** 4 (root 2: 2, 2, 2, 1), i16 rows of 6000 bytes; every rank launched once
** with the planned kernel and grid (for the largest chunk), the inputs as
** given (only the root's is checked: the others may be NULL or anywhere),
** every output and the chunk offsets; in place at the root's own chunk
** launches, anywhere else in its input is refused, as a NULL output of a
** rank with a chunk is, with nothing loaded, launched or written; [3, 5] f64 over 4 ranks leaves the last chunk
** empty: that rank's output may be NULL, the root's own too; groups of one
** copy the whole input bit for bit (nothing in place); zero rows launch
** nothing. */
Test(hostpath, scatter_launches_each_rank_on_its_chunk_and_groups_of_one_copy) {
  setenv("FAKE_CUDA_DEVICES", "4", 1);
  collgen_comm_t *c = make_comm(4);
  enum { ROWS = 7, COLS = 3000, ROW_BYTES = COLS * 2, BYTES = ROWS * ROW_BYTES, PAST = 64 };
  int64_t shape[2] = {ROWS, COLS};
  const int64_t *shapes[4] = {shape, shape, shape, shape};
  char *in[4], *out[4];
  uint64_t seed = tu_rand() | 1;
  for (int r = 0; r < 4; ++r) {
    in[r] = poisoned(BYTES + PAST);
    out[r] = poisoned(BYTES + PAST);
    collgen__ref_fill_random(COLLGEN_DTYPE_I16, in[r], ROWS * COLS, &seed);
  }
  collgen_stream_t streams[4];
  make_streams(c, streams);
  collgen_generator_t *gen;
  cr_assert_eq(collgen_generator_create(&gen, cache_dir), COLLGEN_OK);
  collgen_shape_t sh;
  collgen_plan_t plan2, plan4;
  collgen_shape_init(&sh, COLLGEN_OP_SCATTER);
  sh.dtype = COLLGEN_DTYPE_I16;
  sh.ngpus = 4;
  sh.group_size = 2;
  sh.elems = 4 * COLS; /* chunk 0, the largest */
  cr_assert_eq(collgen_plan(gen, &sh, &plan2), COLLGEN_OK, "%s", collgen_generator_last_error(gen));
  sh.group_size = 4;
  sh.elems = 2 * COLS;
  cr_assert_eq(collgen_plan(gen, &sh, &plan4), COLLGEN_OK, "%s", collgen_generator_last_error(gen));
  collgen_generator_destroy(gen);
  cr_expect_str_eq(plan2.kernel, "collgen_scatter_b2_g2");
  cr_expect_eq(plan2.grid, 3, "24000 bytes: 1500 vectors, 3 blocks of 512");
  cr_expect_str_eq(plan4.kernel, "collgen_scatter_b2_g4");
  cr_expect_eq(plan4.grid, 2, "12000 bytes: 750 vectors, 2 blocks");

  /* groups of 2, root 1: only ranks 1 and 3 give an input */
  const void *roots1[4] = {NULL, in[1], NULL, in[3]};
  memset(stats, 0, sizeof *stats);
  cr_assert_eq(collgen_scatter(c, COLLGEN_DTYPE_I16, 2, shapes, roots1, (void *const *)out, 1, 2,
                               streams), COLLGEN_OK, "%s", collgen_comm_last_error(c));
  cr_expect_eq(stats->launches, 4);
  cr_expect_eq(stats->copies, 0);
  cr_expect_eq(stats->wrong_context, 0);
  for (int r = 0; r < 4; ++r) {
    const int base = r / 2 * 2;
    cr_expect_eq(stats->log[r].device, r);
    expect_scatter_launch(&stats->log[r], plan2.kernel, plan2.grid, 2, r - base, 1, ROWS,
                          ROW_BYTES, roots1 + base, (void *const *)out + base);
    cr_expect(all_poison(out[r], BYTES), "kernels do not run here");
  }
  /* one group of 4, root 2; the other inputs are never read, so not checked
  ** either (here at odd addresses) */
  const void *root2[4] = {in[0] + 1, NULL, in[2], in[3] + 1};
  memset(stats, 0, sizeof *stats);
  cr_assert_eq(collgen_scatter(c, COLLGEN_DTYPE_I16, 2, shapes, root2, (void *const *)out, 2, 0,
                               streams), COLLGEN_OK, "%s", collgen_comm_last_error(c));
  cr_expect_eq(stats->launches, 4);
  for (int r = 0; r < 4; ++r)
    expect_scatter_launch(&stats->log[r], plan4.kernel, plan4.grid, 4, r, 2, ROWS, ROW_BYTES,
                          root2, (void *const *)out);
  /* in place: each root's output at its own chunk (group rank 1: 4 rows in) */
  void *inplace[4] = {out[0], in[1] + 4 * ROW_BYTES, out[2], in[3] + 4 * ROW_BYTES};
  memset(stats, 0, sizeof *stats);
  cr_assert_eq(collgen_scatter(c, COLLGEN_DTYPE_I16, 2, shapes, roots1, inplace, 1, 2, streams),
               COLLGEN_OK, "%s", collgen_comm_last_error(c));
  cr_expect_eq(stats->launches, 4);
  cr_expect_eq(stats->log[1].params.out[1], in[1] + 4 * ROW_BYTES);
  cr_expect_eq(stats->log[1].params.in[1], in[1]);
  /* refused: the root's output 3 rows in (chunk 1 of a group of 2 starts at
  ** row 4), and a NULL output of a rank with a chunk; nothing loaded,
  ** launched or written */
  void *offchunk[4] = {out[0], in[1] + 3 * ROW_BYTES, out[2], out[3]};
  void *no_out[4] = {out[0], out[1], out[2], NULL};
  memset(stats, 0, sizeof *stats);
  cr_expect_eq(collgen_scatter(c, COLLGEN_DTYPE_I16, 2, shapes, roots1, offchunk, 1, 2, streams),
               COLLGEN_ERR_INVALID_ARG);
  cr_expect(strstr(collgen_comm_last_error(c), "only exact in-place is allowed"), "%s",
            collgen_comm_last_error(c));
  cr_expect_eq(collgen_scatter(c, COLLGEN_DTYPE_I16, 2, shapes, root2, no_out, 2, 0, streams),
               COLLGEN_ERR_INVALID_ARG);
  cr_expect(strstr(collgen_comm_last_error(c), "output of rank 3 is NULL"), "%s",
            collgen_comm_last_error(c));
  cr_expect_eq(stats->launches + stats->copies + stats->module_loads, 0);
  for (int r = 0; r < 4; ++r) cr_expect(all_poison(out[r], BYTES + PAST), "rank %d", r);

  /* [3, 5] f64 over 4 ranks: chunks 1, 1, 1, 0. Rank 3 passes no output,
  ** as the root (its own chunk is empty) and as a peer */
  int64_t small[2] = {3, 5};
  const int64_t *sshapes[4] = {small, small, small, small};
  for (int root = 0; root < 4; root += 3) {
    const void *only[4] = {NULL, NULL, NULL, NULL};
    only[root] = in[root];
    void *outs[4] = {out[0], out[1], out[2], NULL};
    memset(stats, 0, sizeof *stats);
    cr_assert_eq(collgen_scatter(c, COLLGEN_DTYPE_F64, 2, sshapes, only, outs, root, 0, streams),
                 COLLGEN_OK, "root %d: %s", root, collgen_comm_last_error(c));
    cr_expect_eq(stats->launches, 4, "an empty chunk's rank still takes part");
    for (int r = 0; r < 4; ++r)
      expect_scatter_launch(&stats->log[r], "collgen_scatter_b8_g4", 1, 4, r, root, 3, 40, only,
                            outs);
  }

  /* groups of one: each rank copies its whole input, bit for bit */
  memset(stats, 0, sizeof *stats);
  cr_assert_eq(collgen_scatter(c, COLLGEN_DTYPE_I16, 2, shapes, (const void *const *)in,
                               (void *const *)out, 0, 1, streams), COLLGEN_OK, "%s",
               collgen_comm_last_error(c));
  cr_expect_eq(stats->launches, 0);
  cr_expect_eq(stats->copies, 4);
  cr_expect_eq(stats->module_loads, 0, "nothing to compile for a copy");
  for (int r = 0; r < 4; ++r) {
    cr_expect(memcmp(out[r], in[r], BYTES) == 0, "rank %d", r);
    cr_expect(all_poison(out[r] + BYTES, PAST), "rank %d: nothing written past the input", r);
  }
  cr_assert_eq(collgen_scatter(c, COLLGEN_DTYPE_I16, 2, shapes, (const void *const *)in,
                               (void *const *)in, 0, 1, streams), COLLGEN_OK);
  cr_expect_eq(stats->copies, 4, "in place: nothing to do");
  /* zero rows: nothing, with no buffer at all */
  int64_t none[2] = {0, COLS};
  const int64_t *nshapes[4] = {none, none, none, none};
  const void *no_in[4] = {NULL, NULL, NULL, NULL};
  void *no_outs[4] = {NULL, NULL, NULL, NULL};
  cr_expect_eq(collgen_scatter(c, COLLGEN_DTYPE_I16, 2, nshapes, no_in, no_outs, 3, 0, streams),
               COLLGEN_OK, "%s", collgen_comm_last_error(c));
  cr_expect_eq(stats->launches + stats->copies, 4);
  for (int r = 0; r < 4; ++r) {
    free(in[r]);
    free(out[r]);
  }
  collgen_comm_destroy(c);
  unsetenv("FAKE_CUDA_DEVICES");
}

/* reduce_scatter_sum: 7 rows of 3 bf16 over groups of 3 (chunks of 3, 2, 2
** rows): each rank launched once with the group's kernel, its inputs
** pointing at its chunk of every rank's input and its count; the chunk
** starts (6 and 10 bytes) are not 16-byte aligned, so the kernel is scalar.
** A group of one copies the whole input. */
Test(hostpath, reduce_scatter_sum_points_each_rank_at_its_chunk) {
  setenv("FAKE_CUDA_DEVICES", "3", 1);
  collgen_comm_t *c = make_comm(3);
  int64_t shape[2] = {7, 3};
  const int64_t *shapes[3] = {shape, shape, shape};
  void *in[3], *out[3];
  for (int r = 0; r < 3; ++r) {
    in[r] = poisoned(7 * 3 * 2);
    out[r] = poisoned(7 * 3 * 2);
  }
  collgen_stream_t streams[3];
  make_streams(c, streams);
  memset(stats, 0, sizeof *stats);
  cr_assert_eq(collgen_reduce_scatter_sum(c, COLLGEN_DTYPE_BF16, 2, shapes,
                                          (const void *const *)in, out, 0, streams),
               COLLGEN_OK, "%s", collgen_comm_last_error(c));
  cr_expect_eq(stats->launches, 3);
  cr_expect_eq(stats->copies, 0);
  cr_expect_eq(stats->wrong_context, 0);
  const int64_t want_start[3] = {0, 3, 5}, want_count[3] = {3, 2, 2};
  for (int r = 0; r < 3; ++r) {
    const collgen__kparams *kp = &stats->log[r].params;
    cr_expect_eq(stats->log[r].device, r);
    cr_expect_str_eq(stats->log[r].kernel, "collgen_reduce_scatter_sum_bf16_g3_v1");
    cr_expect_eq(kp->rank, (unsigned)r);
    cr_expect_eq(kp->count, (unsigned long long)(want_count[r] * 3), "rank %d", r);
    for (int k = 0; k < 3; ++k) {
      cr_expect_eq(kp->in[k], (const char *)in[k] + want_start[r] * 3 * 2, "rank %d in %d", r, k);
      cr_expect_eq(kp->out[k], out[k]);
    }
  }
  /* aligned chunks (8 rows of 8 bf16: 16-byte rows): the vector kernel */
  int64_t wide[2] = {8, 8};
  const int64_t *wshapes[3] = {wide, wide, wide};
  void *win[3], *wout[3];
  for (int r = 0; r < 3; ++r) {
    win[r] = poisoned(8 * 8 * 2);
    wout[r] = poisoned(8 * 8 * 2);
  }
  cr_assert_eq(collgen_reduce_scatter_sum(c, COLLGEN_DTYPE_BF16, 2, wshapes,
                                          (const void *const *)win, wout, 0, streams),
               COLLGEN_OK, "%s", collgen_comm_last_error(c));
  cr_expect_str_eq(stats->log[3].kernel, "collgen_reduce_scatter_sum_bf16_g3_v8");
  /* groups of one: a copy of the whole input, nothing launched */
  cr_assert_eq(collgen_reduce_scatter_sum(c, COLLGEN_DTYPE_BF16, 2, shapes,
                                          (const void *const *)in, out, 1, streams),
               COLLGEN_OK, "%s", collgen_comm_last_error(c));
  cr_expect_eq(stats->launches, 6);
  cr_expect_eq(stats->copies, 3);
  /* the fake driver copies on the host: every output is its input */
  for (int r = 0; r < 3; ++r) cr_expect(memcmp(out[r], in[r], 7 * 3 * 2) == 0, "rank %d", r);
  /* zero rows: nothing at all */
  int64_t none[2] = {0, 3};
  const int64_t *nshapes[3] = {none, none, none};
  cr_expect_eq(collgen_reduce_scatter_sum(c, COLLGEN_DTYPE_BF16, 2, nshapes,
                                          (const void *const *)in, out, 0, streams),
               COLLGEN_OK);
  cr_expect_eq(stats->launches, 6);
  cr_expect_eq(stats->copies, 3);
  for (int r = 0; r < 3; ++r) {
    free(in[r]);
    free(out[r]);
    free(win[r]);
    free(wout[r]);
  }
  collgen_comm_destroy(c);
  unsetenv("FAKE_CUDA_DEVICES");
}

/* reduce_scatter_rmsnorm: every rank launches (a group of one too: add and
** normalize, no copy); rank r's kernel pulls every rank's x from the first
** row of r's chunk (collgen__scatter_chunk), count is r's chunk, residual_in
** is NULL when the call has none (a NULL array, or only NULL entries);
** zero rows launch nothing. */
Test(hostpath, reduce_scatter_rmsnorm_launches_each_rank_on_its_chunk) {
  setenv("FAKE_CUDA_DEVICES", "3", 1);
  collgen_comm_t *c = make_comm(3);
  enum { ROWS = 7, COLS = 1024, ROW_BYTES = COLS * 2 };
  int64_t shape[2] = {ROWS, COLS}, none[2] = {0, COLS};
  const int64_t *shapes[3] = {shape, shape, shape}, *empty[3] = {none, none, none};
  void *x[3], *res[3], *normed[3], *gamma[3], *q[3];
  float *scales[3];
  for (int r = 0; r < 3; ++r) {
    x[r] = poisoned(ROWS * ROW_BYTES);
    res[r] = poisoned(ROWS * ROW_BYTES);
    normed[r] = poisoned(ROWS * ROW_BYTES);
    q[r] = poisoned(ROWS * COLS);
    scales[r] = poisoned(ROWS * sizeof(float));
    gamma[r] = poisoned(ROW_BYTES);
  }
  collgen_stream_t streams[3];
  make_streams(c, streams);
  static const int groups[] = {0, 1};
  for (size_t k = 0; k < 2; ++k) {
    const int g = groups[k] ? groups[k] : 3;
    /* residual_in: none (a NULL array), none (every entry NULL), given */
    void *no_res[3] = {NULL, NULL, NULL};
    for (int res_form = 0; res_form < 3; ++res_form) {
      const int with_res = res_form == 2;
      memset(stats, 0, sizeof *stats);
      cr_assert_eq(collgen_reduce_scatter_rmsnorm(
                       c, COLLGEN_DTYPE_BF16, 2, shapes, (const void *const *)x,
                       with_res ? (const void *const *)res
                                : res_form ? (const void *const *)no_res : NULL,
                       normed, res,
                       (const void *const *)gamma, 1e-6f, 1.0f, groups[k], streams),
                   COLLGEN_OK, "group %d: %s", g, collgen_comm_last_error(c));
      cr_expect_eq(stats->launches, 3, "group %d", g);
      cr_expect_eq(stats->copies, 0, "group %d: no copy, even alone", g);
      cr_expect_eq(stats->wrong_context, 0);
      for (int r = 0; r < 3; ++r) {
        const collgen__kparams *kp = &stats->log[r].params;
        const int base = r / g * g;
        int64_t start = 0, count = 0;
        collgen__scatter_chunk(ROWS, g, r - base, &start, &count);
        cr_expect(strstr(stats->log[r].kernel, g == 3 ? "reduce_scatter_rmsnorm_bf16_g3_c1024"
                                                      : "reduce_scatter_rmsnorm_bf16_g1_c1024"),
                  "%s", stats->log[r].kernel);
        cr_expect_eq(stats->log[r].grid, g == 3 ? 3u : 7u, "a block per row of the largest chunk");
        cr_expect_eq(kp->count, (unsigned long long)count, "rank %d", r);
        for (int m = 0; m < g; ++m)
          cr_expect_eq(kp->in[m], (char *)x[base + m] + start * ROW_BYTES, "rank %d peer %d", r, m);
        cr_expect_eq(kp->out[r - base], res[r]);
        cr_expect_eq(kp->residual_in, with_res ? res[r] : NULL, "rank %d", r);
        cr_expect_eq(kp->normed, normed[r]);
      }
    }
  }
  memset(stats, 0, sizeof *stats);
  cr_assert_eq(collgen_reduce_scatter_rmsnorm_fp8(
                   c, COLLGEN_DTYPE_BF16, 2, shapes, (const void *const *)x, NULL, q, scales, res,
                   (const void *const *)gamma, 1e-6f, 0.0f, COLLGEN_FP8_DYNAMIC, 0.0f, 0, streams),
               COLLGEN_OK, "%s", collgen_comm_last_error(c));
  cr_expect(strstr(stats->log[1].kernel, "_e4m3_dynamic"), "%s", stats->log[1].kernel);
  cr_expect_eq(stats->log[1].params.normed, q[1]);
  cr_expect_eq(stats->log[1].params.row_scales, scales[1]);
  memset(stats, 0, sizeof *stats);
  cr_expect_eq(collgen_reduce_scatter_rmsnorm(c, COLLGEN_DTYPE_BF16, 2, empty,
                                              (const void *const *)x, NULL, normed, res,
                                              (const void *const *)gamma, 1e-6f, 0.0f, 0, streams),
               COLLGEN_OK);
  cr_expect_eq(stats->launches + stats->copies + stats->module_loads, 0, "zero rows: nothing");
  for (int r = 0; r < 3; ++r) {
    cr_expect(all_poison(x[r], ROWS * ROW_BYTES), "the fake driver runs no kernel");
    free(x[r]), free(res[r]), free(normed[r]), free(q[r]), free(scales[r]), free(gamma[r]);
  }
  collgen_comm_destroy(c);
}

/* collgen_run is the entry points' call: a broadcast built by hand
** launches what collgen_broadcast launches, and scalars that are not
** values of the op (a fractional or out-of-range root, a NaN eps, an FP8
** mode not in the catalog) or a role the mode does not write are refused
** naming them, before anything is launched or written. */
Test(hostpath, collgen_run_is_the_entry_points_call_and_checks_scalars) {
  setenv("FAKE_CUDA_DEVICES", "2", 1);
  collgen_comm_t *c = make_comm(2);
  int64_t shape[1] = {1000};
  const int64_t *shapes[2] = {shape, shape};
  void *in[2] = {poisoned(2000), poisoned(2000)}, *out[2] = {poisoned(2000), poisoned(2000)};
  uint64_t seed = tu_rand() | 1;
  for (int r = 0; r < 2; ++r) collgen__ref_fill_random(COLLGEN_DTYPE_BF16, in[r], 1000, &seed);
  collgen_stream_t streams[2];
  make_streams(c, streams);
  collgen_call_t call;
  memset(&call, 0, sizeof call);
  call.op = COLLGEN_OP_BROADCAST;
  call.dtype = COLLGEN_DTYPE_BF16;
  call.tensor_rank = 1;
  call.shapes = shapes;
  call.buffers[0] = (const void *const *)in;
  call.buffers[1] = (const void *const *)out;
  call.scalars[0] = 1; /* root */
  call.streams = streams;
  memset(stats, 0, sizeof *stats);
  cr_assert_eq(collgen_run(c, &call), COLLGEN_OK, "%s", collgen_comm_last_error(c));
  cr_expect_eq(stats->launches, 2);
  const fake_cuda_launch_t first = stats->log[0];
  memset(stats, 0, sizeof *stats);
  cr_assert_eq(collgen_broadcast(c, COLLGEN_DTYPE_BF16, 1, shapes, (const void *const *)in, out,
                                 1, 0, streams), COLLGEN_OK);
  cr_expect_eq(stats->launches, 2);
  cr_expect_str_eq(stats->log[0].kernel, first.kernel);
  cr_expect_eq(memcmp(&stats->log[0].params, &first.params, sizeof first.params), 0,
               "the same kernel parameters");
  static const struct {
    collgen_op_t op;
    double scalars[4];
    const char *why;
  } bad[] = {
      {COLLGEN_OP_BROADCAST, {0.5}, "root must be an integer, got 0.5"},
      {COLLGEN_OP_BROADCAST, {2}, "root 2 is not a group rank (0..1)"},
      {COLLGEN_OP_ALLREDUCE_RESIDUAL_RMSNORM, {NAN}, "eps must be finite and >= 0"},
      {COLLGEN_OP_ALLREDUCE_RESIDUAL_RMSNORM, {1e-6, 0, 9}, "FP8 mode 9"},
      {COLLGEN_OP_ALLREDUCE_RESIDUAL_RMSNORM, {1e-6, 0, 0, 2.0},
       "static_scale must be 0 with FP8 mode none"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; ++i) {
    static const int64_t rows_cols[2] = {10, 100}; /* the norm op's [rows, cols] */
    const int64_t *norm_shapes[2] = {rows_cols, rows_cols};
    collgen_call_t b = call;
    b.op = bad[i].op;
    if (b.op != COLLGEN_OP_BROADCAST) {
      b.tensor_rank = 2;
      b.shapes = norm_shapes;
    }
    memcpy(b.scalars, bad[i].scalars, sizeof b.scalars);
    memset(stats, 0, sizeof *stats);
    cr_expect_eq(collgen_run(c, &b), COLLGEN_ERR_INVALID_ARG, "%s", bad[i].why);
    cr_expect(strstr(collgen_comm_last_error(c), bad[i].why), "%s: %s", bad[i].why,
              collgen_comm_last_error(c));
    cr_expect_eq(stats->launches + stats->copies, 0);
  }
  cr_expect_eq(collgen_run(c, NULL), COLLGEN_ERR_INVALID_ARG);
  cr_expect(strstr(collgen_last_error(), "call is NULL"));
  cr_expect_eq(collgen_rank_run(c, &call), COLLGEN_ERR_INVALID_ARG, "rank_run on comm_create");
  for (int r = 0; r < 2; ++r) {
    free(in[r]);
    free(out[r]);
  }
  collgen_comm_destroy(c);
}
