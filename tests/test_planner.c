/*
** test_planner.c -- the planner's choices and its refusals.
*/
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collgen.h"
#include "catalog.h"

static collgen_generator_t *gen;

static void setup(void) {
  setenv("COLLGEN_CACHE_DISABLE", "1", 1);
  cr_assert_eq(collgen_generator_create(&gen, NULL), COLLGEN_OK, "%s", collgen_last_error());
}
static void teardown(void) { collgen_generator_destroy(gen); }

static collgen_plan_t plan_ar(int ngpus, int group, int64_t elems, int aligned, int inplace) {
  collgen_shape_t s;
  collgen_plan_t p;
  collgen_shape_init(&s, COLLGEN_OP_ALLREDUCE_SUM);
  s.ngpus = ngpus;
  s.group_size = group;
  s.elems = elems;
  s.aligned16 = aligned;
  s.inplace = inplace;
  cr_assert_eq(collgen_plan(gen, &s, &p), COLLGEN_OK, "%s", collgen_generator_last_error(gen));
  return p;
}

TestSuite(planner, .init = setup, .fini = teardown);

Test(planner, allreduce_algorithms) {
  cr_expect_str_eq(plan_ar(2, 0, 1 << 30, 1, 0).algo, "twoshot");
  cr_expect_str_eq(plan_ar(2, 0, 1000, 0, 0).algo, "oneshot", "unaligned and small");
  cr_expect_str_eq(plan_ar(4, 0, 1024, 1, 0).algo, "ll", "small and aligned: LL push");
  cr_expect_str_eq(plan_ar(4, 0, 131072, 1, 0).algo, "ll", "256 KiB is still LL");
  cr_expect_str_eq(plan_ar(4, 0, 131073, 1, 0).algo, "twoshot");
  cr_expect_str_eq(plan_ar(2, 0, 131073, 1, 0).algo, "twoshot");
  cr_expect_str_eq(plan_ar(4, 0, 1024, 0, 0).algo, "oneshot", "LL needs 16-byte alignment");
  cr_expect_str_eq(plan_ar(4, 0, 64 << 20, 1, 0).algo, "twoshot");
  cr_expect_str_eq(plan_ar(4, 0, 1024, 1, 1).algo, "ll", "LL is safe in place");
  cr_expect_str_eq(plan_ar(4, 0, 1 << 20, 1, 1).algo, "twoshot", "in-place one-shot is not");
  cr_expect_str_eq(plan_ar(8, 1, 1024, 1, 1).algo, "oneshot", "a group of one just copies");
  collgen_plan_t p = plan_ar(2, 0, 10000003, 1, 0);
  cr_expect_eq(p.vec, 8);
  cr_expect_eq(p.group, 2);
  cr_expect_eq(p.block, 512);
  cr_expect_eq(p.grid, 128, "capped at the default");
  cr_expect_str_eq(p.kernel, "collgen_allreduce_twoshot_bf16_g2_v8");
  cr_expect_eq(plan_ar(2, 0, 1000003, 0, 0).vec, 1, "unaligned pointers: scalar kernel");
  cr_expect_eq(plan_ar(2, 0, (1 << 20) + 8 * 512 * 3, 0, 0).grid, 128);
  cr_expect_eq(plan_ar(2, 0, 512 * 3, 0, 0).grid, 3, "scalar one-shot: one element per thread");
  cr_expect_eq(plan_ar(2, 0, 8 * 512 * 2 * 100, 1, 0).grid, 100, "two-shot: half the vectors each");
  cr_expect_eq(plan_ar(2, 0, 4 * 256 * 3, 1, 0).grid, 3, "LL: one 8-byte line per thread");
  cr_expect_eq(plan_ar(2, 0, 1, 1, 0).grid, 1);
}

Test(planner, rmsnorm_shapes) {
  collgen_shape_t s;
  collgen_plan_t p;
  collgen_shape_init(&s, COLLGEN_OP_ALLGATHER_RMSNORM);
  s.rows = 8;
  s.cols = 8192;
  cr_assert_eq(collgen_plan(gen, &s, &p), COLLGEN_OK);
  cr_expect_str_eq(p.algo, "ll", "128 KiB gathered: barrier-free LL push");
  cr_expect_eq(p.vec, 8);
  cr_expect_eq(p.grid, 8, "one block per row");
  s.rows = 17;
  cr_assert_eq(collgen_plan(gen, &s, &p), COLLGEN_OK);
  cr_expect_str_eq(p.algo, "unrolled", "over 256 KiB: barriers");
  s.rows = 8;
  s.aligned16 = 0;
  cr_assert_eq(collgen_plan(gen, &s, &p), COLLGEN_OK);
  cr_expect_str_eq(p.algo, "unrolled", "LL needs 16-byte vectors");
  s.aligned16 = 1;
  s.cols = 7;
  cr_assert_eq(collgen_plan(gen, &s, &p), COLLGEN_OK);
  cr_expect_eq(p.vec, 1, "7 bf16 columns are not 16-byte rows");
  cr_expect_eq(p.block, 32);
  s.cols = 16384; /* wide rows: LL with 1024-thread blocks, groups up to 4 */
  s.rows = 8;
  cr_assert_eq(collgen_plan(gen, &s, &p), COLLGEN_OK);
  cr_expect_str_eq(p.algo, "ll");
  cr_expect_eq(p.block, 1024);
  cr_expect_eq(p.items, 2);
  s.ngpus = 8;
  s.group_size = 8;
  s.rows = 4;
  cr_assert_eq(collgen_plan(gen, &s, &p), COLLGEN_OK);
  cr_expect_str_eq(p.algo, "unrolled", "8 ranks of LL state at 1024 threads would spill");
  cr_expect_eq(p.block, 512);
  s.ngpus = 2;
  s.group_size = 0;
  s.cols = 9000;
  cr_assert_eq(collgen_plan(gen, &s, &p), COLLGEN_OK);
  cr_expect_eq(p.block, 576, "1125 vectors in 2 per thread: 563 threads, rounded to warps");
  s.dtype = COLLGEN_DTYPE_F32;
  s.cols = 12288;
  s.rows = 4; /* 192 KiB: within the LL size */
  cr_assert_eq(collgen_plan(gen, &s, &p), COLLGEN_OK);
  cr_expect_str_eq(p.algo, "unrolled", "3 f32 vectors per thread would spill");
  s.dtype = COLLGEN_DTYPE_BF16;
  s.group_size = 1; /* a group of one: the "local" kernel, one block per row */
  s.cols = 8192;
  s.rows = 100000;
  cr_assert_eq(collgen_plan(gen, &s, &p), COLLGEN_OK);
  cr_expect_str_eq(p.kernel, "collgen_allgather_rmsnorm_bf16_g1_c8192_v8_local_u2");
  cr_expect_eq(p.grid, 100000);
  cr_expect_eq(p.block, 512);
  cr_expect_eq(p.peer_reads, 0u, "its own shard only");
  s.group_size = 0;
  s.cols = 65536;
  s.rows = 100000;
  cr_assert_eq(collgen_plan(gen, &s, &p), COLLGEN_OK);
  cr_expect_str_eq(p.algo, "looped");
  cr_expect_eq(p.grid, 256);
  s.max_blocks = 4;
  cr_assert_eq(collgen_plan(gen, &s, &p), COLLGEN_OK);
  cr_expect_eq(p.grid, 4);
}

/* Every op computes on elements, so each refuses every copy-only dtype
** (catalog.h, collgen__dtype_reduces), in a plan and in its variants,
** naming the op and the dtype, before its own checks. */
Test(planner, copy_only_dtypes_refused_by_computing_ops) {
  static const collgen_op_t ops[] = {COLLGEN_OP_ALLREDUCE_SUM, COLLGEN_OP_ALLGATHER_RMSNORM,
                                     COLLGEN_OP_ALLREDUCE_RESIDUAL_RMSNORM,
                                     COLLGEN_OP_REDUCE_SCATTER_SUM};
  static const struct { collgen_dtype_t dt; const char *name; } copy_only[] = {
      {COLLGEN_DTYPE_U8, "u8"}, {COLLGEN_DTYPE_I8, "i8"}, {COLLGEN_DTYPE_I16, "i16"},
      {COLLGEN_DTYPE_I32, "i32"}, {COLLGEN_DTYPE_I64, "i64"}, {COLLGEN_DTYPE_F64, "f64"}};
  static const char *const op_names[] = {"allreduce_sum", "allgather_rmsnorm",
                                         "allreduce_residual_rmsnorm", "reduce_scatter_sum"};
  for (size_t o = 0; o < sizeof ops / sizeof *ops; ++o)
    for (size_t d = 0; d < sizeof copy_only / sizeof *copy_only; ++d) {
      char want[200];
      snprintf(want, sizeof want,
               "planner: %s computes on elements: %s is a copy-only dtype (only the ops that "
               "move bits take it: all_gather, broadcast, scatter)", op_names[o],
               copy_only[d].name);
      collgen_shape_t s;
      collgen_plan_t p;
      collgen_shape_init(&s, ops[o]);
      s.dtype = copy_only[d].dt;
      s.cols = 0; /* the op's own checks would refuse this too: the dtype comes first */
      cr_expect_eq(collgen_plan(gen, &s, &p), COLLGEN_ERR_INVALID_ARG);
      cr_expect(strncmp(collgen_generator_last_error(gen), want, strlen(want)) == 0 &&
                    strstr(collgen_generator_last_error(gen), "all_gather"),
                "%s", collgen_generator_last_error(gen));
      collgen_shape_class_t cls;
      memset(&cls, 0, sizeof cls);
      int64_t cols = 4096;
      cls.op = ops[o];
      cls.dtype = copy_only[d].dt;
      cls.ngpus = 2;
      cls.cols = &cols;
      cls.cols_count = 1;
      snprintf(cls.arch, sizeof cls.arch, "sm_90");
      collgen_shape_t *shapes = (collgen_shape_t *)1;
      int count = 7;
      cr_expect_eq(collgen_plan_variants(gen, &cls, &shapes, &count), COLLGEN_ERR_INVALID_ARG);
      cr_expect(strncmp(collgen_generator_last_error(gen), want, strlen(want)) == 0,
                "%s", collgen_generator_last_error(gen));
      cr_expect_null(shapes);
      cr_expect_eq(count, 0);
    }
}

Test(planner, refuses_bad_shapes) {
  collgen_shape_t s;
  collgen_plan_t p;
  collgen_shape_init(&s, COLLGEN_OP_ALLREDUCE_SUM);
  s.ngpus = 6;
  s.group_size = 4;
  cr_expect_eq(collgen_plan(gen, &s, &p), COLLGEN_ERR_INVALID_ARG);
  cr_expect(strstr(collgen_generator_last_error(gen), "group_size 4 does not divide ngpus 6"),
            "%s", collgen_generator_last_error(gen));
  s.group_size = 0;
  s.ngpus = 9;
  cr_expect_eq(collgen_plan(gen, &s, &p), COLLGEN_ERR_INVALID_ARG);
  s.ngpus = 2;
  snprintf(s.arch, sizeof s.arch, "sm_70");
  cr_expect_eq(collgen_plan(gen, &s, &p), COLLGEN_ERR_INVALID_ARG);
  cr_expect(strstr(collgen_generator_last_error(gen), "unsupported arch 'sm_70'"));
  snprintf(s.arch, sizeof s.arch, "sm_90");
  s.tensor_rank = 9;
  cr_expect_eq(collgen_plan(gen, &s, &p), COLLGEN_ERR_INVALID_ARG);
  s.tensor_rank = 1;
  s.dtype = (collgen_dtype_t)19;
  cr_expect_eq(collgen_plan(gen, &s, &p), COLLGEN_ERR_INVALID_ARG);
  collgen_shape_init(&s, COLLGEN_OP_ALLGATHER_RMSNORM);
  s.cols = 0;
  cr_expect_eq(collgen_plan(gen, &s, &p), COLLGEN_ERR_INVALID_ARG);
  s.cols = 8;
  s.max_blocks = 300;
  cr_expect_eq(collgen_plan(gen, &s, &p), COLLGEN_ERR_INVALID_ARG);
}

/* Unaligned rows keep at most 24 scalars per thread in registers (32 spill
** 44-140 bytes, found when pregen started compiling the whole variant
** space); aligned rows keep up to 32 values. */
Test(planner, rmsnorm_scalar_rows_cap_at_24_values) {
  collgen_shape_t s;
  collgen_plan_t p;
  collgen_shape_init(&s, COLLGEN_OP_ALLGATHER_RMSNORM);
  s.rows = 1024; /* past the LL range */
  s.aligned16 = 0;
  s.cols = 512 * 24;
  cr_assert_eq(collgen_plan(gen, &s, &p), COLLGEN_OK, "%s", collgen_generator_last_error(gen));
  cr_expect_str_eq(p.algo, "unrolled");
  cr_expect_eq(p.items, 24);
  s.cols = 16384;
  cr_assert_eq(collgen_plan(gen, &s, &p), COLLGEN_OK);
  cr_expect_str_eq(p.algo, "looped", "32 scalars per thread: looped, not a spilling unroll");
  s.aligned16 = 1;
  cr_assert_eq(collgen_plan(gen, &s, &p), COLLGEN_OK);
  cr_expect_str_eq(p.algo, "unrolled", "aligned: 4 vectors of 8");
}

static collgen_plan_t plan_rr(int ngpus, int group, int64_t rows, int64_t cols,
                              collgen_dtype_t dt, int aligned) {
  collgen_shape_t s;
  collgen_plan_t p;
  collgen_shape_init(&s, COLLGEN_OP_ALLREDUCE_RESIDUAL_RMSNORM);
  s.ngpus = ngpus;
  s.group_size = group;
  s.rows = rows;
  s.cols = cols;
  s.dtype = dt;
  s.aligned16 = aligned;
  cr_assert_eq(collgen_plan(gen, &s, &p), COLLGEN_OK, "%s", collgen_generator_last_error(gen));
  return p;
}

/* LL while every rank's x fits the LL lines (256 KiB), one-shot pull up to
** the one-shot size (also 256 KiB) or for a group of one, row split above. */
Test(planner, residual_rmsnorm_algorithms) {
  const collgen_dtype_t BF = COLLGEN_DTYPE_BF16, F32 = COLLGEN_DTYPE_F32;
  collgen_plan_t p = plan_rr(2, 0, 8, 8192, BF, 1);
  cr_expect_str_eq(p.algo, "ll", "8 x 8192 bf16: 128 KiB per rank");
  cr_expect_str_eq(p.kernel, "collgen_allreduce_residual_rmsnorm_bf16_g2_c8192_v8_ll_u2");
  cr_expect_eq(p.grid, 8, "one block per row");
  cr_expect_eq(p.block, 512);
  cr_expect_eq(p.items, 2);
  cr_expect_str_eq(plan_rr(2, 0, 16, 8192, BF, 1).algo, "ll", "256 KiB is still LL");
  p = plan_rr(2, 0, 17, 8192, BF, 1);
  cr_expect_str_eq(p.algo, "rowsplit", "above the LL and one-shot size");
  cr_expect_eq(p.grid, 9, "a block per row of the longest slice (17 rows over 2 ranks)");
  p = plan_rr(8, 0, 8192, 8192, BF, 1);
  cr_expect_str_eq(p.algo, "rowsplit");
  cr_expect_eq(p.grid, 256, "1024 rows per slice, capped at the signal slots");
  p = plan_rr(2, 0, 8, 8192, BF, 0);
  cr_expect_str_eq(p.algo, "oneshot", "LL needs 16-byte vectors");
  cr_expect_eq(p.vec, 1);
  cr_expect_eq(p.items, 16, "8192 scalars over 512 threads");
  cr_expect_str_eq(plan_rr(2, 0, 17, 8192, BF, 0).algo, "rowsplit");
  p = plan_rr(4, 1, 100000, 8192, BF, 1);
  cr_expect_str_eq(p.algo, "local", "a group of one adds and normalizes (no copy, no barrier)");
  cr_expect_eq(p.group, 1);
  cr_expect_eq(p.grid, 100000, "one block per row: no signal slot bounds it");
  cr_expect_eq(p.block, 512, "1024 vectors, 2 per thread");
  cr_expect_eq(p.items, 2);
  cr_expect_eq(p.peer_reads, 0u, "no peer is read");
  cr_expect_eq(p.copy_from, -1, "a kernel runs");
  p = plan_rr(4, 1, 7, 5120, BF, 1);
  cr_expect_eq(p.block, 320, "640 vectors: 320 threads of 2, none idle");
  cr_expect_eq(p.items, 2);
  cr_expect_eq(p.grid, 7);
  p = plan_rr(4, 1, 7, 100, BF, 1);
  cr_expect_str_eq(p.kernel, "collgen_allreduce_residual_rmsnorm_bf16_g1_c100_v1_local_u2",
                   "100 scalars (200 bytes a row: unaligned), 2 a thread");
  cr_expect_eq(p.block, 64);
  p = plan_rr(4, 1, 7, 40000, BF, 1);
  cr_expect_str_eq(p.kernel, "collgen_allreduce_residual_rmsnorm_bf16_g1_c40000_v8_local_loop");
  cr_expect_eq(p.block, 512);
  cr_expect_str_eq(plan_rr(8, 0, 8, 8192, F32, 1).kernel,
                   "collgen_allreduce_residual_rmsnorm_f32_g8_c8192_v4_ll_u4",
                   "f32 at 8 ranks: 16 values per thread, still LL");
  p = plan_rr(2, 0, 8, 16384, BF, 1);
  cr_expect_str_eq(p.algo, "oneshot", "no 1024-thread LL rows for this op");
  cr_expect_eq(p.block, 512);
  cr_expect_eq(p.items, 4);
  cr_expect_str_eq(plan_rr(2, 0, 9, 16384, BF, 1).algo, "rowsplit");
  p = plan_rr(2, 0, 3, 40000, BF, 1);
  cr_expect_str_eq(p.algo, "oneshot");
  cr_expect_eq(p.items, 0, "40000 columns: the row is streamed in a loop");
  cr_expect_str_eq(p.kernel, "collgen_allreduce_residual_rmsnorm_bf16_g2_c40000_v8_oneshot_loop");
  cr_expect_str_eq(plan_rr(2, 0, 4, 40000, BF, 1).algo, "rowsplit");
  cr_expect_eq(plan_rr(2, 0, 0, 4096, BF, 1).grid, 1, "no rows: the runtime launches nothing");
}

Test(planner, residual_rmsnorm_refusals_and_grid_cap) {
  collgen_shape_t s;
  collgen_plan_t p;
  collgen_shape_init(&s, COLLGEN_OP_ALLREDUCE_RESIDUAL_RMSNORM);
  s.cols = 0;
  cr_expect_eq(collgen_plan(gen, &s, &p), COLLGEN_ERR_INVALID_ARG);
  cr_expect(strstr(collgen_generator_last_error(gen), "cols must be >= 1"), "%s",
            collgen_generator_last_error(gen));
  s.cols = 4096;
  s.rows = -1;
  cr_expect_eq(collgen_plan(gen, &s, &p), COLLGEN_ERR_INVALID_ARG);
  s.rows = 8;
  s.tensor_rank = 1;
  cr_expect_eq(collgen_plan(gen, &s, &p), COLLGEN_ERR_INVALID_ARG, "rank >= 2");
  s.tensor_rank = 2;
  s.rows = 100000;
  s.max_blocks = 4;
  cr_assert_eq(collgen_plan(gen, &s, &p), COLLGEN_OK);
  cr_expect_eq(p.grid, 4);
}

/* A group of one (allreduce_residual_rmsnorm and reduce_scatter_rmsnorm)
** streams when its traffic, 4 x rows x cols x element size, lies above the
** 50 MiB band base of sm_90 (gen/planner.lua) and up to 1.4 times it
** (bf16 4096 cols: 1601 to 2240 rows), with 16-byte vectors, rows in
** registers and plain output; nothing else streams. */
Test(planner, groups_of_one_stream_just_above_the_l2_of_sm_90) {
  static const collgen_op_t ops[] = {COLLGEN_OP_ALLREDUCE_RESIDUAL_RMSNORM,
                                     COLLGEN_OP_REDUCE_SCATTER_RMSNORM};
  for (int o = 0; o < 2; ++o) {
    collgen_shape_t s;
    collgen_plan_t p;
    collgen_shape_init(&s, ops[o]);
    s.dtype = COLLGEN_DTYPE_BF16;
    s.ngpus = 1;
    s.group_size = 1;
    s.cols = 4096;
    strcpy(s.arch, "sm_90a");
    const struct { int64_t rows; int streams; } at[] = {
        {1, 0}, {1600, 0}, {1601, 1}, {2048, 1}, {2240, 1}, {2241, 0}, {100000, 0}};
    for (size_t i = 0; i < sizeof at / sizeof at[0]; ++i) {
      s.rows = at[i].rows;
      cr_assert_eq(collgen_plan(gen, &s, &p), COLLGEN_OK, "%s", collgen_generator_last_error(gen));
      cr_expect_eq(strstr(p.kernel, "_cs") != NULL, at[i].streams, "%lld rows: %s",
                   (long long)s.rows, p.kernel);
      cr_expect(strstr(p.canonical, at[i].streams ? ";stream=true;" : ";stream=false;"), "%s",
                p.canonical);
      cr_expect_eq(p.grid, s.rows, "one block per row either way");
    }
    s.rows = 2000;
    strcpy(s.arch, "sm_90");
    cr_assert_eq(collgen_plan(gen, &s, &p), COLLGEN_OK);
    cr_expect(strstr(p.kernel, "_cs"), "sm_90 too: %s", p.kernel);
    s.dtype = COLLGEN_DTYPE_F32; /* 16 KiB rows: 801 to 1120 rows */
    const struct { int64_t rows; int streams; } f32_at[] = {{800, 0}, {801, 1}, {1120, 1}, {1121, 0}};
    for (size_t i = 0; i < sizeof f32_at / sizeof f32_at[0]; ++i) {
      s.rows = f32_at[i].rows;
      cr_assert_eq(collgen_plan(gen, &s, &p), COLLGEN_OK);
      cr_expect_eq(strstr(p.kernel, "_cs") != NULL, f32_at[i].streams, "f32 %lld rows: %s",
                   (long long)s.rows, p.kernel);
    }
    s.dtype = COLLGEN_DTYPE_BF16;
    s.rows = 2000;
    static const char *const plain_archs[] = {"sm_80", "sm_89", "sm_100"};
    for (int a = 0; a < 3; ++a) {
      strcpy(s.arch, plain_archs[a]);
      cr_assert_eq(collgen_plan(gen, &s, &p), COLLGEN_OK);
      cr_expect(!strstr(p.kernel, "_cs"), "%s: %s", s.arch, p.kernel);
    }
    strcpy(s.arch, "sm_90a");
    s.fp8 = COLLGEN_FP8_DYNAMIC;
    cr_assert_eq(collgen_plan(gen, &s, &p), COLLGEN_OK);
    cr_expect(!strstr(p.kernel, "_cs"), "FP8 output: %s", p.kernel);
    s.fp8 = COLLGEN_FP8_NONE;
    s.aligned16 = 0;
    cr_assert_eq(collgen_plan(gen, &s, &p), COLLGEN_OK);
    cr_expect(!strstr(p.kernel, "_cs"), "scalar rows: %s", p.kernel);
    s.aligned16 = 1;
    s.cols = 40000; /* a looped row; 164 to 229 rows are in the traffic band */
    s.rows = 200;
    cr_assert_eq(collgen_plan(gen, &s, &p), COLLGEN_OK);
    cr_expect(!strstr(p.kernel, "_cs") && strstr(p.kernel, "_loop"), "%s", p.kernel);
    /* rows of 4 vectors per thread spilled when streamed: plain, inside
    ** their band too (bf16 16384 cols: 401 to 560 rows; f32 8192 the same) */
    s.cols = 16384;
    s.rows = 500;
    cr_assert_eq(collgen_plan(gen, &s, &p), COLLGEN_OK);
    cr_expect(!strstr(p.kernel, "_cs") && strstr(p.kernel, "_u4"), "%s", p.kernel);
    s.dtype = COLLGEN_DTYPE_F32;
    s.cols = 8192;
    cr_assert_eq(collgen_plan(gen, &s, &p), COLLGEN_OK);
    cr_expect(!strstr(p.kernel, "_cs") && strstr(p.kernel, "_u4"), "f32: %s", p.kernel);
    s.dtype = COLLGEN_DTYPE_BF16;
    s.cols = 8192; /* 2 vectors per thread: streams (801 to 1120 rows) */
    s.rows = 1000;
    cr_assert_eq(collgen_plan(gen, &s, &p), COLLGEN_OK);
    cr_expect(strstr(p.kernel, "_cs") && strstr(p.kernel, "_u2"), "%s", p.kernel);
    s.cols = 4096;
    s.rows = 2000;
    s.ngpus = 2;
    s.group_size = 2;
    cr_assert_eq(collgen_plan(gen, &s, &p), COLLGEN_OK);
    cr_expect(!strstr(p.kernel, "_cs") && strstr(p.canonical, ";stream=false;"),
              "only groups of one: %s", p.kernel);
  }
}

/* The class of bf16 allreduce_residual_rmsnorm calls on 2 ranks with cols
** 4096 and 40000 (sm_90). */
static const int64_t RR_CLASS_COLS[] = {4096, 40000};
static collgen_shape_class_t rr_class(void) {
  collgen_shape_class_t cls;
  memset(&cls, 0, sizeof cls);
  cls.op = COLLGEN_OP_ALLREDUCE_RESIDUAL_RMSNORM;
  cls.dtype = COLLGEN_DTYPE_BF16;
  cls.ngpus = 2;
  cls.cols = RR_CLASS_COLS;
  cls.cols_count = 2;
  return cls;
}

/* The variant list of the op covers each algorithm on both sides of its
** thresholds, aligned or not. */
Test(planner, residual_rmsnorm_variants_reach_every_algorithm) {
  collgen_shape_class_t cls = rr_class();
  collgen_shape_t *shapes = NULL;
  int count = 0;
  cr_assert_eq(collgen_plan_variants(gen, &cls, &shapes, &count), COLLGEN_OK, "%s",
               collgen_generator_last_error(gen));
  static const char *const want[] = {
      "_g2_c4096_v8_ll_u1",       "_g2_c4096_v8_rowsplit_u1", "_g2_c4096_v1_oneshot_u8",
      "_g2_c4096_v1_rowsplit_u8", "_g2_c40000_v8_oneshot_loop", "_g2_c40000_v8_rowsplit_loop",
      "_g1_c4096_v8_local_u2",    "_g1_c40000_v1_local_loop"};
  for (size_t w = 0; w < sizeof want / sizeof want[0]; ++w) {
    int found = 0;
    for (int i = 0; i < count; ++i) {
      collgen_plan_t p;
      cr_assert_eq(collgen_plan(gen, &shapes[i], &p), COLLGEN_OK);
      found |= strstr(p.kernel, want[w]) != NULL;
    }
    cr_expect(found, "no variant plans to *%s (%d variants)", want[w], count);
  }
  free(shapes);
}

/* An FP8 output plans as the plain op (so normed_f32 keeps its bits) with
** the mode in the kernel name and the cache key; it needs sm_89 and exists
** only for allreduce_residual_rmsnorm. */
Test(planner, residual_rmsnorm_fp8_plans_as_the_plain_op) {
  static const int64_t rows[] = {1, 8, 17, 300, 100000};
  static const int64_t cols[] = {1, 4095, 8192, 40000};
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; ++i)
    for (size_t k = 0; k < sizeof cols / sizeof cols[0]; ++k)
      for (int mode = COLLGEN_FP8_DYNAMIC; mode <= COLLGEN_FP8_STATIC; ++mode) {
        collgen_plan_t plain = plan_rr(2, 0, rows[i], cols[k], COLLGEN_DTYPE_BF16, 1), p;
        collgen_shape_t s;
        collgen_shape_init(&s, COLLGEN_OP_ALLREDUCE_RESIDUAL_RMSNORM);
        s.rows = rows[i];
        s.cols = cols[k];
        s.fp8 = (collgen_fp8_mode_t)mode;
        cr_assert_eq(collgen_plan(gen, &s, &p), COLLGEN_OK, "%s", collgen_generator_last_error(gen));
        cr_expect(strcmp(p.algo, plain.algo) == 0 && p.vec == plain.vec &&
                  p.block == plain.block && p.items == plain.items && p.grid == plain.grid,
                  "%s vs %s", p.kernel, plain.kernel);
        char want[128];
        snprintf(want, sizeof want, "%s_e4m3_%s", plain.kernel,
                 mode == COLLGEN_FP8_DYNAMIC ? "dynamic" : "static");
        cr_expect_str_eq(p.kernel, want);
        cr_expect(strstr(p.canonical, mode == COLLGEN_FP8_DYNAMIC ? ";fp8=dynamic;" : ";fp8=static;"),
                  "%s", p.canonical);
        cr_expect(strstr(plain.canonical, ";fp8=none;"), "%s", plain.canonical);
      }
  /* The one exception: f32 LL rows of more than 8 values per thread at 7-8
  ** ranks spill with dynamic scaling; they run one-shot with the same row
  ** layout. */
  collgen_plan_t ll = plan_rr(8, 0, 8, 8192, COLLGEN_DTYPE_F32, 1), p;
  collgen_shape_t s;
  collgen_shape_init(&s, COLLGEN_OP_ALLREDUCE_RESIDUAL_RMSNORM);
  s.ngpus = 8;
  s.rows = 8;
  s.cols = 8192;
  s.dtype = COLLGEN_DTYPE_F32;
  s.fp8 = COLLGEN_FP8_DYNAMIC;
  cr_assert_eq(collgen_plan(gen, &s, &p), COLLGEN_OK, "%s", collgen_generator_last_error(gen));
  cr_expect_str_eq(ll.algo, "ll");
  cr_expect_str_eq(p.algo, "oneshot");
  cr_expect(p.vec == ll.vec && p.block == ll.block && p.items == ll.items, "%s vs %s", p.kernel,
            ll.kernel);
  s.fp8 = COLLGEN_FP8_STATIC;
  cr_assert_eq(collgen_plan(gen, &s, &p), COLLGEN_OK);
  cr_expect_str_eq(p.algo, "ll", "static scaling fits");
  s.fp8 = COLLGEN_FP8_DYNAMIC;
  s.ngpus = 7;
  cr_assert_eq(collgen_plan(gen, &s, &p), COLLGEN_OK);
  cr_expect_str_eq(p.algo, "oneshot", "7 ranks spill too");
  s.ngpus = 6;
  cr_assert_eq(collgen_plan(gen, &s, &p), COLLGEN_OK);
  cr_expect_str_eq(p.algo, "ll", "6 ranks fit");
  collgen_shape_init(&s, COLLGEN_OP_ALLREDUCE_RESIDUAL_RMSNORM);
  s.fp8 = COLLGEN_FP8_DYNAMIC;
  snprintf(s.arch, sizeof s.arch, "sm_89");
  cr_expect_eq(collgen_plan(gen, &s, &p), COLLGEN_OK, "%s", collgen_generator_last_error(gen));
  snprintf(s.arch, sizeof s.arch, "sm_86");
  cr_expect_eq(collgen_plan(gen, &s, &p), COLLGEN_ERR_INVALID_ARG);
  cr_expect(strstr(collgen_generator_last_error(gen), "FP8 output (fp8 dynamic) needs sm_89 or "
                                                      "newer, not sm_86"),
            "%s", collgen_generator_last_error(gen));
  collgen_shape_init(&s, COLLGEN_OP_ALLGATHER_RMSNORM);
  s.fp8 = COLLGEN_FP8_STATIC;
  cr_expect_eq(collgen_plan(gen, &s, &p), COLLGEN_ERR_INVALID_ARG);
  cr_expect(strstr(collgen_generator_last_error(gen), "allgather_rmsnorm has no FP8 output"), "%s",
            collgen_generator_last_error(gen));
  collgen_shape_init(&s, COLLGEN_OP_ALLREDUCE_RESIDUAL_RMSNORM);
  s.fp8 = (collgen_fp8_mode_t)3;
  cr_expect_eq(collgen_plan(gen, &s, &p), COLLGEN_ERR_INVALID_ARG);
  cr_expect(strstr(collgen_generator_last_error(gen), "unknown fp8 mode 3"), "%s",
            collgen_generator_last_error(gen));
}

/* The variants of the op include both FP8 modes of every algorithm on
** sm_89 and newer, and none on sm_80; the other ops never get one. */
/* FP8 dynamic output adds a block max per row: f32 LL rows of more than 8
** values per thread at 7 or 8 ranks spilled (72 bytes at g8, 8192 cols,
** found by the CI conformance run), so those take the one-shot path; the
** plain op and static scaling keep LL. */
Test(planner, residual_rmsnorm_fp8_dynamic_wide_f32_rows_at_7_8_ranks_avoid_ll) {
  for (int g = 6; g <= 8; ++g) {
    collgen_shape_t s;
    collgen_plan_t p;
    collgen_shape_init(&s, COLLGEN_OP_ALLREDUCE_RESIDUAL_RMSNORM);
    s.ngpus = g;
    s.rows = 8;
    s.cols = 8192;
    s.dtype = COLLGEN_DTYPE_F32;
    for (int mode = COLLGEN_FP8_NONE; mode <= COLLGEN_FP8_STATIC; ++mode) {
      s.fp8 = (collgen_fp8_mode_t)mode;
      cr_assert_eq(collgen_plan(gen, &s, &p), COLLGEN_OK, "%s", collgen_generator_last_error(gen));
      const int avoid = mode == COLLGEN_FP8_DYNAMIC && g >= 7;
      cr_expect_str_eq(p.algo, avoid ? "oneshot" : "ll", "g%d mode %d: %s", g, mode, p.kernel);
    }
    s.cols = 4096; /* 8 values per thread: LL even with dynamic scaling */
    s.fp8 = COLLGEN_FP8_DYNAMIC;
    cr_assert_eq(collgen_plan(gen, &s, &p), COLLGEN_OK, "%s", collgen_generator_last_error(gen));
    cr_expect_str_eq(p.algo, "ll", "g%d 4096 cols: %s", g, p.kernel);
  }
}

Test(planner, residual_rmsnorm_variants_include_fp8_where_the_arch_has_it) {
  collgen_shape_class_t cls = rr_class();
  static const char *const archs[] = {"sm_90", "sm_80"};
  for (int a = 0; a < 2; ++a) {
    snprintf(cls.arch, sizeof cls.arch, "%s", archs[a]);
    collgen_shape_t *shapes = NULL;
    int count = 0, plain = 0, streamed = 0, fp8[3] = {0};
    cr_assert_eq(collgen_plan_variants(gen, &cls, &shapes, &count), COLLGEN_OK, "%s",
                 collgen_generator_last_error(gen));
    for (int i = 0; i < count; ++i) {
      collgen_plan_t p;
      cr_assert_eq(collgen_plan(gen, &shapes[i], &p), COLLGEN_OK);
      cr_expect_eq(strstr(p.kernel, "_e4m3_") != NULL, shapes[i].fp8 != COLLGEN_FP8_NONE, "%s",
                   p.kernel);
      fp8[shapes[i].fp8]++;
      plain += shapes[i].fp8 == COLLGEN_FP8_NONE;
      streamed += strstr(p.kernel, "_cs") != NULL;
    }
    cr_expect_gt(plain, 0);
    /* sm_90 streams the aligned group of one at 4096 cols just above the
    ** L2 (plain output only); sm_80 never streams */
    cr_expect_eq(streamed, a == 0 ? 1 : 0, "%s: %d streamed kernels", archs[a], streamed);
    if (a == 0)
      cr_expect(fp8[COLLGEN_FP8_DYNAMIC] == plain - streamed &&
                    fp8[COLLGEN_FP8_STATIC] == plain - streamed,
                "%s: %d plain (%d streamed), %d dynamic, %d static kernels", archs[a], plain,
                streamed, fp8[COLLGEN_FP8_DYNAMIC], fp8[COLLGEN_FP8_STATIC]);
    else
      cr_expect(fp8[COLLGEN_FP8_DYNAMIC] + fp8[COLLGEN_FP8_STATIC] == 0, "sm_80: no FP8 kernel");
    free(shapes);
  }
  cls.op = COLLGEN_OP_ALLGATHER_RMSNORM;
  snprintf(cls.arch, sizeof cls.arch, "sm_90");
  collgen_shape_t *shapes = NULL;
  int count = 0;
  cr_assert_eq(collgen_plan_variants(gen, &cls, &shapes, &count), COLLGEN_OK);
  for (int i = 0; i < count; ++i) cr_expect_eq(shapes[i].fp8, COLLGEN_FP8_NONE);
  free(shapes);
}

/* A class may list its FP8 modes: only those are planned; a mode the arch
** lacks, an unknown one or an empty list is refused. */
Test(planner, residual_rmsnorm_variants_of_listed_fp8_modes) {
  collgen_shape_class_t cls = rr_class();
  collgen_fp8_mode_t only_static = COLLGEN_FP8_STATIC, bogus = (collgen_fp8_mode_t)9;
  cls.fp8_modes = &only_static;
  cls.fp8_mode_count = 1;
  collgen_shape_t *shapes = NULL;
  int count = 0;
  cr_assert_eq(collgen_plan_variants(gen, &cls, &shapes, &count), COLLGEN_OK, "%s",
               collgen_generator_last_error(gen));
  cr_expect_gt(count, 0);
  for (int i = 0; i < count; ++i) cr_expect_eq(shapes[i].fp8, COLLGEN_FP8_STATIC);
  free(shapes);
  snprintf(cls.arch, sizeof cls.arch, "sm_80");
  cr_expect_eq(collgen_plan_variants(gen, &cls, &shapes, &count), COLLGEN_ERR_INVALID_ARG);
  cr_expect(strstr(collgen_generator_last_error(gen), "needs sm_89 or newer, not sm_80"), "%s",
            collgen_generator_last_error(gen));
  cr_expect_null(shapes);
  cls.fp8_modes = &bogus;
  cr_expect_eq(collgen_plan_variants(gen, &cls, &shapes, &count), COLLGEN_ERR_INVALID_ARG);
  cr_expect(strstr(collgen_generator_last_error(gen), "unknown fp8 mode 9"), "%s",
            collgen_generator_last_error(gen));
  cls.fp8_mode_count = 0;
  cr_expect_eq(collgen_plan_variants(gen, &cls, &shapes, &count), COLLGEN_ERR_INVALID_ARG);
  cr_expect(strstr(collgen_generator_last_error(gen), "list of fp8 modes is empty"), "%s",
            collgen_generator_last_error(gen));
}

/* What each plan tells the runtime (collgen_plan_t's role masks, bits in
** the order of COLLGEN_ROLES_<op>), per algorithm: the roles peers read
** and write directly, and the copy of a group where the op is the
** identity. */
Test(planner, plans_say_what_the_runtime_needs) {
  enum { AR_INPUT = 1u << 0, AR_OUTPUT = 1u << 1, RR_X = 1u << 0, RR_RESIDUAL_OUT = 1u << 3,
         AG_INPUT = 1u << 0 };
  const struct {
    collgen_plan_t p;
    const char *algo;
    unsigned reads, writes;
  } want[] = {
      {plan_ar(4, 0, 1024, 1, 0), "ll", 0, 0},
      {plan_ar(2, 0, 1000, 0, 0), "oneshot", AR_INPUT, 0},
      {plan_ar(2, 0, 1 << 30, 1, 0), "twoshot", AR_INPUT, AR_OUTPUT},
      {plan_rr(2, 0, 8, 8192, COLLGEN_DTYPE_BF16, 1), "ll", 0, 0},
      {plan_rr(2, 0, 8, 8192, COLLGEN_DTYPE_BF16, 0), "oneshot", RR_X, 0},
      {plan_rr(2, 0, 17, 8192, COLLGEN_DTYPE_BF16, 1), "rowsplit", RR_X, RR_RESIDUAL_OUT},
      {plan_rr(4, 1, 100000, 8192, COLLGEN_DTYPE_BF16, 1), "local", 0, 0},
  };
  for (size_t i = 0; i < sizeof want / sizeof *want; ++i) {
    cr_expect_str_eq(want[i].p.algo, want[i].algo, "case %zu", i);
    cr_expect_eq(want[i].p.peer_reads, want[i].reads, "%s", want[i].p.kernel);
    cr_expect_eq(want[i].p.peer_writes, want[i].writes, "%s", want[i].p.kernel);
    cr_expect_eq(want[i].p.copy_from, -1, "%s: a kernel runs", want[i].p.kernel);
    cr_expect_eq(want[i].p.copy_to, -1, "%s", want[i].p.kernel);
  }
  collgen_plan_t p = plan_ar(4, 1, 1 << 20, 1, 0);
  cr_expect_eq(p.copy_from, 0, "allreduce over one rank copies input ...");
  cr_expect_eq(p.copy_to, 1, "... into output");
  cr_expect_eq(p.peer_reads | p.peer_writes, 0u);
  collgen_shape_t s;
  collgen_shape_init(&s, COLLGEN_OP_ALLGATHER_RMSNORM);
  s.cols = 8192;
  for (int64_t rows = 8; rows <= 4096; rows *= 512) {
    s.rows = rows;
    cr_assert_eq(collgen_plan(gen, &s, &p), COLLGEN_OK, "%s", collgen_generator_last_error(gen));
    cr_expect_eq(p.peer_reads, strcmp(p.algo, "ll") == 0 ? 0u : (unsigned)AG_INPUT, "%s", p.kernel);
    cr_expect_eq(p.peer_writes, 0u, "%s", p.kernel);
    cr_expect_eq(p.copy_from, -1, "%s", p.kernel);
  }
}

/* broadcast: one pull kernel per element size, group size and vector
** width (16-byte vectors of any element size when aligned); every dtype,
** copy-only ones included, as the size class of its element ("b2": bf16,
** f16 and i16 share a kernel); peers read the input only; a group of one
** copies input into output; in place and the call size change no kernel. */
Test(planner, broadcast_plans_and_variants) {
  static const struct { collgen_dtype_t dt; const char *name; int vec; } dts[] = {
      {COLLGEN_DTYPE_BF16, "b2", 8}, {COLLGEN_DTYPE_F32, "b4", 4}, {COLLGEN_DTYPE_U8, "b1", 16},
      {COLLGEN_DTYPE_I16, "b2", 8},  {COLLGEN_DTYPE_I64, "b8", 2}, {COLLGEN_DTYPE_F64, "b8", 2}};
  for (size_t d = 0; d < sizeof dts / sizeof *dts; ++d)
    for (int aligned = 0; aligned <= 1; ++aligned) {
      collgen_shape_t s;
      collgen_plan_t p;
      collgen_shape_init(&s, COLLGEN_OP_BROADCAST);
      s.dtype = dts[d].dt;
      s.ngpus = 4;
      s.elems = 1000003;
      s.aligned16 = aligned;
      s.inplace = 1;
      cr_assert_eq(collgen_plan(gen, &s, &p), COLLGEN_OK, "%s", collgen_generator_last_error(gen));
      char want[96];
      snprintf(want, sizeof want, "collgen_broadcast_%s_g4_v%d", dts[d].name,
               aligned ? dts[d].vec : 1);
      cr_expect_str_eq(p.kernel, want);
      cr_expect_str_eq(p.algo, "pull");
      cr_expect_eq(p.peer_reads, 1u, "%s: peers read the input", p.kernel);
      cr_expect_eq(p.peer_writes, 0u);
      cr_expect_eq(p.copy_from, -1);
      const int64_t vecs = (1000003 + p.vec - 1) / p.vec, blocks = (vecs + 511) / 512;
      cr_expect_eq(p.grid, blocks < 128 ? blocks : 128, "%s: a vector per thread, capped",
                   p.kernel);
      s.elems = 0;
      cr_expect_eq(collgen_plan(gen, &s, &p), COLLGEN_OK, "a zero-size call plans (copy-only probe)");
      cr_expect_eq(p.grid, 1);
      s.group_size = 1;
      s.elems = 10;
      cr_assert_eq(collgen_plan(gen, &s, &p), COLLGEN_OK);
      cr_expect_eq(p.copy_from, 0, "a group of one copies input ...");
      cr_expect_eq(p.copy_to, 1, "... into output");
      cr_expect_eq(p.peer_reads | p.peer_writes, 0u);
    }
  collgen_shape_class_t cls;
  memset(&cls, 0, sizeof cls);
  cls.op = COLLGEN_OP_BROADCAST;
  cls.dtype = COLLGEN_DTYPE_U8;
  cls.ngpus = 8;
  snprintf(cls.arch, sizeof cls.arch, "sm_90");
  collgen_shape_t *shapes = NULL;
  int count = 0;
  cr_assert_eq(collgen_plan_variants(gen, &cls, &shapes, &count), COLLGEN_OK, "%s",
               collgen_generator_last_error(gen));
  cr_expect_eq(count, 6, "groups of 2, 4, 8 (one is a copy) x aligned or not: %d", count);
  free(shapes);
}

/* The ops that move bits by pulling a shard or chunk per rank (all_gather,
** scatter): every dtype plans (a zero-size call too), one pull kernel per
** element size ("b<bytes>", the same canonical spec for every dtype of a
** size) and group whatever the size, alignment or in place; a group of one
** is a copy input -> output; peers read the input; a class has one kernel
** per group size. */
static void expect_pull_per_element_size(collgen_op_t op, const char *name) {
  for (int d = COLLGEN_DTYPE_BF16; d <= COLLGEN_DTYPE_F64; ++d) {
    collgen_shape_t s;
    collgen_plan_t p, q;
    collgen_shape_init(&s, op);
    s.dtype = (collgen_dtype_t)d;
    s.ngpus = 4;
    s.group_size = 4;
    s.elems = 0;
    cr_assert_eq(collgen_plan(gen, &s, &p), COLLGEN_OK, "%s", collgen_generator_last_error(gen));
    cr_expect_str_eq(p.algo, "pull");
    cr_expect_eq(p.copy_from, -1);
    cr_expect_eq(p.grid, 1);
    cr_expect_eq(p.vec * collgen__dtype_bytes((collgen_dtype_t)d), 16);
    const int bytes = collgen__dtype_bytes((collgen_dtype_t)d);
    char want[64];
    snprintf(want, sizeof want, "collgen_%s_b%d_g4", name, bytes);
    cr_expect_str_eq(p.kernel, want);
    for (int e = COLLGEN_DTYPE_BF16; e < d; ++e) /* every earlier dtype of the size */
      if (collgen__dtype_bytes((collgen_dtype_t)e) == bytes) {
        collgen_shape_t same = s;
        same.dtype = (collgen_dtype_t)e;
        cr_assert_eq(collgen_plan(gen, &same, &q), COLLGEN_OK);
        cr_expect_str_eq(q.canonical, p.canonical, "one spec for every dtype of a size");
      }
    s.elems = (int64_t)1 << 30;
    s.aligned16 = 0;
    s.inplace = 1;
    cr_assert_eq(collgen_plan(gen, &s, &q), COLLGEN_OK);
    cr_expect_str_eq(q.kernel, p.kernel, "the size, alignment and in place pick no other kernel");
    cr_expect_eq(q.grid, 128);
    cr_expect(q.peer_reads == 1u && q.peer_writes == 0u, "peers read the input only");
    s.group_size = 1;
    cr_assert_eq(collgen_plan(gen, &s, &q), COLLGEN_OK);
    cr_expect(q.copy_from == 0 && q.copy_to == 1 && q.peer_reads == 0u,
              "a group of one copies input to output");
  }
  collgen_shape_class_t cls;
  memset(&cls, 0, sizeof cls);
  cls.op = op;
  cls.dtype = COLLGEN_DTYPE_U8;
  cls.ngpus = 8;
  snprintf(cls.arch, sizeof cls.arch, "sm_90");
  collgen_shape_t *shapes = NULL;
  int count = 0;
  cr_assert_eq(collgen_plan_variants(gen, &cls, &shapes, &count), COLLGEN_OK);
  cr_expect_eq(count, 3, "%s: groups of 2, 4 and 8: one kernel each (got %d)", name, count);
  free(shapes);
}

Test(planner, all_gather_plans_every_dtype_one_kernel_per_group) {
  expect_pull_per_element_size(COLLGEN_OP_ALL_GATHER, "all_gather");
}

/* scatter plans as all_gather does, with kernels of its own;
** its elems are those of the largest chunk (group rank 0's): 16-byte
** vectors, 512 threads, a block per 512 vectors. */
Test(planner, scatter_plans_every_dtype_one_kernel_per_group) {
  expect_pull_per_element_size(COLLGEN_OP_SCATTER, "scatter");
  collgen_shape_t s;
  collgen_plan_t p;
  collgen_shape_init(&s, COLLGEN_OP_SCATTER);
  s.dtype = COLLGEN_DTYPE_I16;
  s.ngpus = 2;
  s.elems = 4 * 3000; /* 24000 bytes: 1500 vectors */
  cr_assert_eq(collgen_plan(gen, &s, &p), COLLGEN_OK, "%s", collgen_generator_last_error(gen));
  cr_expect_str_eq(p.kernel, "collgen_scatter_b2_g2");
  cr_expect(strncmp(p.canonical, "op=scatter;dtype=b2;group=2;algo=pull;", 38) == 0, "%s",
            p.canonical);
  cr_expect_eq(p.block, 512);
  cr_expect_eq(p.grid, 3);
  cr_expect_eq(p.vec, 8);
  s.elems = 4 * 3000 + 1; /* a partial vector more: 1501 vectors, still 3 blocks */
  cr_assert_eq(collgen_plan(gen, &s, &p), COLLGEN_OK);
  cr_expect_eq(p.grid, 3);
  s.elems = 512 * 8 * 3 + 1; /* 1537 vectors */
  cr_assert_eq(collgen_plan(gen, &s, &p), COLLGEN_OK);
  cr_expect_eq(p.grid, 4);
  s.max_blocks = 2;
  cr_assert_eq(collgen_plan(gen, &s, &p), COLLGEN_OK);
  cr_expect_eq(p.grid, 2, "capped by max_blocks");
  s.elems = -1;
  cr_expect_eq(collgen_plan(gen, &s, &p), COLLGEN_ERR_INVALID_ARG);
  cr_expect(strstr(collgen_generator_last_error(gen), "elems must be >= 0"), "%s",
            collgen_generator_last_error(gen));
}

static collgen_plan_t plan_rs(int ngpus, int group, int64_t rows, int64_t cols, int aligned,
                              collgen_dtype_t dt) {
  collgen_shape_t s;
  collgen_plan_t p;
  collgen_shape_init(&s, COLLGEN_OP_REDUCE_SCATTER_SUM);
  s.dtype = dt;
  s.ngpus = ngpus;
  s.group_size = group;
  s.rows = rows;
  s.cols = cols;
  s.elems = rows * cols;
  s.aligned16 = aligned;
  cr_assert_eq(collgen_plan(gen, &s, &p), COLLGEN_OK, "%s", collgen_generator_last_error(gen));
  return p;
}

Test(planner, reduce_scatter_sum_pulls_its_chunk_or_copies) {
  enum { RS_INPUT = 1u << 0 };
  collgen_plan_t p = plan_rs(4, 0, 1000, 4096, 1, COLLGEN_DTYPE_BF16);
  cr_expect_str_eq(p.algo, "pull");
  cr_expect_str_eq(p.kernel, "collgen_reduce_scatter_sum_bf16_g4_v8");
  cr_expect_eq(p.peer_reads, RS_INPUT, "peers read the inputs");
  cr_expect_eq(p.peer_writes, 0u, "each rank writes its own output only");
  cr_expect_eq(p.copy_from, -1);
  cr_expect_eq(p.grid, 128, "capped at the default");
  cr_expect_eq(plan_rs(2, 0, 3, 4096, 1, COLLGEN_DTYPE_F32).grid, 4,
               "grid of the largest chunk: 2 rows of 1024 vectors");
  p = plan_rs(2, 0, 7, 3, 0, COLLGEN_DTYPE_F16);
  cr_expect_eq(p.vec, 1, "unaligned chunk starts: scalar kernel");
  cr_expect_str_eq(p.kernel, "collgen_reduce_scatter_sum_f16_g2_v1");
  p = plan_rs(4, 1, 1000, 4096, 1, COLLGEN_DTYPE_BF16);
  cr_expect_eq(p.copy_from, 0, "a group of one copies input ...");
  cr_expect_eq(p.copy_to, 1, "... into output");
  cr_expect_eq(p.peer_reads | p.peer_writes, 0u);
  /* its variants: one kernel per group size above 1 and vector width */
  collgen_shape_class_t cls;
  memset(&cls, 0, sizeof cls);
  cls.op = COLLGEN_OP_REDUCE_SCATTER_SUM;
  cls.dtype = COLLGEN_DTYPE_BF16;
  cls.ngpus = 8;
  snprintf(cls.arch, sizeof cls.arch, "sm_90");
  collgen_shape_t *shapes = NULL;
  int count = 0;
  cr_assert_eq(collgen_plan_variants(gen, &cls, &shapes, &count), COLLGEN_OK, "%s",
               collgen_generator_last_error(gen));
  cr_expect_eq(count, 6, "g2, g4, g8 x v8, v1");
  free(shapes);
}

/* reduce_scatter_rmsnorm: one algorithm (the barrier pull, "oneshot") that
** reads x on the peers, the row layouts of allreduce_residual_rmsnorm, and
** for a group of one that op's "local" kernel; rows are the largest
** chunk's (the grid).
** Its variants: per group size and cols, aligned or not, each FP8 mode. */
Test(planner, reduce_scatter_rmsnorm_plans_and_variants) {
  collgen_shape_t s;
  collgen_plan_t p;
  collgen_shape_init(&s, COLLGEN_OP_REDUCE_SCATTER_RMSNORM);
  s.ngpus = 4;
  s.rows = 3;
  s.cols = 8192;
  cr_assert_eq(collgen_plan(gen, &s, &p), COLLGEN_OK, "%s", collgen_generator_last_error(gen));
  cr_expect_str_eq(p.kernel, "collgen_reduce_scatter_rmsnorm_bf16_g4_c8192_v8_u2");
  cr_expect_str_eq(p.algo, "oneshot");
  cr_expect_eq(p.grid, 3, "one block per row of the chunk");
  cr_expect_eq(p.peer_reads, 1u << 0, "x");
  cr_expect_eq(p.peer_writes, 0u);
  cr_expect_eq(p.copy_from, -1, "a kernel runs");
  s.group_size = 1;
  s.rows = 100000;
  s.aligned16 = 0;
  s.fp8 = COLLGEN_FP8_STATIC;
  cr_assert_eq(collgen_plan(gen, &s, &p), COLLGEN_OK, "%s", collgen_generator_last_error(gen));
  cr_expect_str_eq(p.kernel, "collgen_reduce_scatter_rmsnorm_bf16_g1_c8192_v1_local_u16_e4m3_static",
                   "a group of one adds and normalizes (no copy)");
  cr_expect_str_eq(p.algo, "local");
  cr_expect_eq(p.grid, 100000, "one block per row");
  cr_expect_eq(p.peer_reads, 0u, "no peer is read");
  cr_expect_eq(p.copy_from, -1);
  strcpy(s.arch, "sm_80");
  cr_expect_eq(collgen_plan(gen, &s, &p), COLLGEN_ERR_INVALID_ARG, "FP8 needs sm_89");
  collgen_shape_class_t cls;
  memset(&cls, 0, sizeof cls);
  cls.op = COLLGEN_OP_REDUCE_SCATTER_RMSNORM;
  cls.dtype = COLLGEN_DTYPE_BF16;
  cls.ngpus = 8;
  cls.cols = RR_CLASS_COLS;
  cls.cols_count = 2;
  collgen_shape_t *shapes = NULL;
  int count = 0;
  cr_assert_eq(collgen_plan_variants(gen, &cls, &shapes, &count), COLLGEN_OK, "%s",
               collgen_generator_last_error(gen));
  cr_expect_eq(count, 4 * 2 * 2 * 3 + 1, "group sizes 1, 2, 4, 8 x 2 cols x aligned or not x 3 "
               "FP8 modes, and the group of one at 4096 cols streamed above the L2; got %d",
               count);
  free(shapes);
}
