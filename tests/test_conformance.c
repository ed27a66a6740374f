/*
** test_conformance.c -- template conformance over the planner's own variant
** space: for every op x 3 dtypes x sm_90 and sm_80 x ngpus 2..8, every
** kernel collgen_plan_variants lists (every group size, any size, aligned
** or not, in place or not, both FP8 output modes of allreduce_residual_rmsnorm
** on sm_90; the RMSNorm ops for the cols below). For every
** distinct kernel: the source is byte-identical from two fresh Lua states,
** NVRTC compiles it without warnings, the cubin exports the kernel symbol
** with the parameter block the runtime builds (sizeof(collgen__kparams),
** one parameter), and ptxas reports no spills.
*/
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalog.h"
#include "collgen.h"
#include "cubin_info.h"
#include "device_abi.h"

#define MAX_SEEN 1024

/* One cols per RMSNorm kernel family: one lane (1), a partial block of
** scalars (100), one full item per thread (4096), a partial last item and
** odd item counts (5120), 16 values per thread (8192), the wide LL rows
** and 32 scalars per thread (16384), the looped kernel (40000). Other cols
** (7, 1000, 2048, 4095, ...) only change constants within these families. */
static const int64_t COLS[] = {1, 100, 4096, 5120, 8192, 16384, 40000};

typedef struct {
  collgen_generator_t *a, *b;
  char seen[MAX_SEEN][256];
  int nseen, checked;
} conformance;

static void check_spec(conformance *c, const collgen_shape_t *s) {
  collgen_plan_t plan;
  cr_assert_eq(collgen_plan(c->a, s, &plan), COLLGEN_OK, "%s", collgen_generator_last_error(c->a));
  for (int i = 0; i < c->nseen; ++i)
    if (strcmp(c->seen[i], plan.canonical) == 0) return;
  cr_assert_lt(c->nseen, MAX_SEEN);
  snprintf(c->seen[c->nseen++], 256, "%s", plan.canonical);

  char *src_a = NULL, *src_b = NULL;
  cr_assert_eq(collgen_generate_source(c->a, s, 1, &src_a), COLLGEN_OK);
  cr_assert_eq(collgen_generate_source(c->b, s, 1, &src_b), COLLGEN_OK);
  cr_expect_str_eq(src_a, src_b, "%s: source differs between two Lua states", plan.kernel);
  free(src_a);
  free(src_b);

  collgen_kernel_info_t info;
  int rc = collgen_get_kernel(c->a, s, &info);
  cr_assert_eq(rc, COLLGEN_OK, "%s: %s", plan.kernel, collgen_generator_last_error(c->a));
  cr_assert_eq(info.cache_hit, 0, "a fresh memory-only cache must compile");
  const char *log = collgen_generator_last_log(c->a);
  cr_expect(!strstr(log, "warning"), "%s: NVRTC warnings:\n%s", plan.kernel, log);
  cr_expect_eq(info.spill_bytes, 0, "%s spills %d bytes", plan.kernel, info.spill_bytes);
  cr_expect(info.registers > 0 && info.registers * plan.block <= 65536,
            "%s: %d registers x %d threads", plan.kernel, info.registers, plan.block);
  collgen__cubin_kernel k;
  cr_assert_eq(collgen__cubin_inspect(info.cubin, info.cubin_size, plan.kernel, &k), 0);
  cr_expect(k.found, "%s: symbol missing from the cubin", plan.kernel);
  cr_expect_eq(k.param_count, 1, "%s: %d parameters", plan.kernel, k.param_count);
  cr_expect_eq(k.param_bytes, (int)sizeof(collgen__kparams), "%s: parameter block %d bytes",
               plan.kernel, k.param_bytes);
  cr_expect_eq(k.registers, info.registers, "%s: .nv.info and the reported count disagree",
               plan.kernel);
  cr_expect_eq(k.frame_bytes, 0, "%s uses %d bytes of local memory:\n%s", plan.kernel,
               k.frame_bytes, log);
  c->checked++;
}

static void run_matrix(collgen_op_t op, collgen_dtype_t dtype, const char *arch) {
  setenv("COLLGEN_CACHE_DISABLE", "1", 1);
  conformance *c = calloc(1, sizeof *c);
  cr_assert(c);
  cr_assert_eq(collgen_generator_create(&c->a, NULL), COLLGEN_OK, "%s", collgen_last_error());
  cr_assert_eq(collgen_generator_create(&c->b, NULL), COLLGEN_OK, "%s", collgen_last_error());
  for (int ngpus = 2; ngpus <= 8; ++ngpus) {
    collgen_shape_class_t cls;
    memset(&cls, 0, sizeof cls);
    cls.op = op;
    cls.dtype = dtype;
    cls.ngpus = ngpus;
    cls.cols = COLS;
    cls.cols_count = (int)(sizeof COLS / sizeof COLS[0]);
    snprintf(cls.arch, sizeof cls.arch, "%s", arch);
    collgen_shape_t *shapes = NULL;
    int count = 0;
    cr_assert_eq(collgen_plan_variants(c->a, &cls, &shapes, &count), COLLGEN_OK, "%s",
                 collgen_generator_last_error(c->a));
    cr_assert_gt(count, 0);
    for (int i = 0; i < count; ++i) check_spec(c, &shapes[i]);
    free(shapes);
  }
  cr_log_info("%s %s %s: %d distinct kernels checked", collgen__op_name(op),
              collgen__dtype_name(dtype), arch, c->checked);
  cr_expect_gt(c->checked, 10);
  collgen_generator_destroy(c->a);
  collgen_generator_destroy(c->b);
  free(c);
}

#define MATRIX(op, dt, arch)                                                    \
  Test(conformance, op##_##dt##_##arch, .timeout = 900) {                       \
    run_matrix(COLLGEN_OP_##op, COLLGEN_DTYPE_##dt, #arch);                     \
  }

MATRIX(ALLREDUCE_SUM, BF16, sm_90)
MATRIX(ALLREDUCE_SUM, F16, sm_90)
MATRIX(ALLREDUCE_SUM, F32, sm_90)
MATRIX(ALLREDUCE_SUM, BF16, sm_80)
MATRIX(ALLREDUCE_SUM, F16, sm_80)
MATRIX(ALLREDUCE_SUM, F32, sm_80)
MATRIX(ALLGATHER_RMSNORM, BF16, sm_90)
MATRIX(ALLGATHER_RMSNORM, F16, sm_90)
MATRIX(ALLGATHER_RMSNORM, F32, sm_90)
MATRIX(ALLGATHER_RMSNORM, BF16, sm_80)
MATRIX(ALLGATHER_RMSNORM, F16, sm_80)
MATRIX(ALLGATHER_RMSNORM, F32, sm_80)
MATRIX(ALLREDUCE_RESIDUAL_RMSNORM, BF16, sm_90)
MATRIX(ALLREDUCE_RESIDUAL_RMSNORM, F16, sm_90)
MATRIX(ALLREDUCE_RESIDUAL_RMSNORM, F32, sm_90)
MATRIX(ALLREDUCE_RESIDUAL_RMSNORM, BF16, sm_80)
MATRIX(ALLREDUCE_RESIDUAL_RMSNORM, F16, sm_80)
MATRIX(ALLREDUCE_RESIDUAL_RMSNORM, F32, sm_80)

/* The other supported archs compile too (one spec each per op, and the
** FP8 output where the arch has it). */
Test(conformance, other_archs) {
  setenv("COLLGEN_CACHE_DISABLE", "1", 1);
  conformance *c = calloc(1, sizeof *c);
  cr_assert_eq(collgen_generator_create(&c->a, NULL), COLLGEN_OK);
  cr_assert_eq(collgen_generator_create(&c->b, NULL), COLLGEN_OK);
  static const char *const archs[] = {"sm_86", "sm_89", "sm_90a", "sm_100", "sm_120"};
  for (size_t i = 0; i < sizeof archs / sizeof archs[0]; ++i)
    for (int op = 0; op < collgen__op_count(); ++op) {
      collgen_shape_t s;
      collgen_shape_init(&s, collgen__op_at(op)->op);
      snprintf(s.arch, sizeof s.arch, "%s", archs[i]);
      check_spec(c, &s);
    }
  static const char *const fp8_archs[] = {"sm_89", "sm_90a", "sm_100", "sm_120"};
  for (size_t i = 0; i < sizeof fp8_archs / sizeof fp8_archs[0]; ++i) {
    collgen_shape_t s;
    collgen_shape_init(&s, COLLGEN_OP_ALLREDUCE_RESIDUAL_RMSNORM);
    s.fp8 = i % 2 ? COLLGEN_FP8_STATIC : COLLGEN_FP8_DYNAMIC;
    snprintf(s.arch, sizeof s.arch, "%s", fp8_archs[i]);
    check_spec(c, &s);
  }
  cr_expect_eq(c->checked, 5 * collgen__op_count() + 4);
  collgen_generator_destroy(c->a);
  collgen_generator_destroy(c->b);
  free(c);
}
