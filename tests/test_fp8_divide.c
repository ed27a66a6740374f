/*
** test_fp8_divide.c -- the FP8 kernels' division, checked on the CPU.
**
** allreduce_residual_rmsnorm's FP8 output divides every normed value y by
** one divisor per row. templates/rmsnorm.cuh.tpl (e4m3_divider, divide) does
** it as a reciprocal per row and an FMA residual step per element, and
** claims the result is the correctly rounded y / divisor, the quotient the
** CPU reference computes. This file repeats that formula with the same IEEE
** operations (CPU float division and fmaf round to nearest like __frcp_rn,
** __fmul_rn and __fmaf_rn; this file is built with -ffp-contract=off) and
** checks the claim: the quotient's bits wherever the fast path applies, and
** the e4m3 code everywhere, over random pairs, the e4m3 rounding ties, and
** zeros, infinities and NaN. The GPU tests compare the kernels' bytes with
** the reference.
*/
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "dtype_convert.h"
#include "test_util.h"

/* The kernel's divide(make_divider(s), y), step for step. */
static float kernel_divide(float y, float s) {
  const float a = fabsf(s);
  if (!(a >= 0x1p-100f && a <= 0x1p100f)) return y / s;
  const float r = 1.0f / s;
  const float q0 = y * r, aq = fabsf(q0);
  if (!(aq > 0x1p-20f && aq < 0x1p13f)) return q0;
  return fmaf(fmaf(-q0, s, y), r, q0);
}

static uint32_t bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

/* A float with a random sign and 24 random significand bits, exponent in
** [lo, hi]. */
static float random_float(int lo, int hi) {
  uint64_t u = tu_rand();
  float m = 1.0f + (float)(u & 0x7fffffu) * 0x1p-23f;
  int e = lo + (int)((u >> 23) % (uint64_t)(hi - lo + 1));
  return ((u >> 40) & 1) ? -ldexpf(m, e) : ldexpf(m, e);
}

/* Counts the pairs whose e4m3 code differs from division's; *bits_off
** counts quotients with other bits where the quotient is one e4m3 can hold
** without saturating (|q| in [2^-12, 464]). */
static int check_pair(float y, float s, int *bits_off) {
  const float want = y / s, got = kernel_divide(y, s);
  if (!isnan(want) && fabsf(want) >= 0x1p-12f && fabsf(want) <= 464.0f && bits(got) != bits(want))
    ++*bits_off;
  return collgen__f32_to_e4m3_sat(got) != collgen__f32_to_e4m3_sat(want);
}

Test(fp8_divide, random_pairs_round_like_division) {
  int codes_off = 0, bits_off = 0;
  for (int i = 0; i < 4000000; ++i) {
    const float s = random_float(-110, 110);
    /* quotients from far below e4m3's smallest code to far past 448 */
    const float y = s * random_float(-30, 20);
    codes_off += check_pair(y, s, &bits_off);
  }
  cr_expect_eq(codes_off, 0, "%d codes differ from division's", codes_off);
  cr_expect_eq(bits_off, 0, "%d quotients differ from division's", bits_off);
}

/* y = t * s for t on or next to the midpoint between two e4m3 values, where
** a quotient one unit off would round to the other code. */
Test(fp8_divide, e4m3_rounding_ties_round_like_division) {
  int codes_off = 0, bits_off = 0;
  for (int code = 0; code < 0x7e; ++code) {
    const float mid = 0.5f * (collgen__e4m3_to_f32((uint8_t)code) +
                              collgen__e4m3_to_f32((uint8_t)(code + 1)));
    for (int i = 0; i < 20000; ++i) {
      const float s = fabsf(random_float(-100, 100));
      float t = mid;
      for (int step = (int)(tu_rand() % 5) - 2; step != 0; step += step > 0 ? -1 : 1)
        t = nextafterf(t, step > 0 ? INFINITY : 0.0f);
      const float y = (i & 1) ? -(t * s) : t * s;
      codes_off += check_pair(y, s, &bits_off);
      codes_off += check_pair(nextafterf(y, 0.0f), s, &bits_off);
    }
  }
  cr_expect_eq(codes_off, 0, "%d codes differ from division's at e4m3 ties", codes_off);
  cr_expect_eq(bits_off, 0, "%d quotients differ from division's at e4m3 ties", bits_off);
}

/* Zeros keep their sign (a negative zero row under a static scale is code
** 0x80), infinities saturate and NaN stays NaN, on both paths. */
Test(fp8_divide, zeros_infinities_and_nan_match_division) {
  const float ys[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 0x1p-149f, -0x1p-149f, 0x1p127f,
                      -0x1p127f, 3.0e38f};
  const float ss[] = {1.0f, 0x1p-100f, 0x1p100f, 0x1p-101f, 0x1p101f, 0x1p-126f, 0x1p-149f,
                      3.0e38f, 1.0f / 448.0f, 7.0f};
  for (size_t i = 0; i < sizeof ys / sizeof *ys; ++i)
    for (size_t j = 0; j < sizeof ss / sizeof *ss; ++j) {
      const float want = ys[i] / ss[j], got = kernel_divide(ys[i], ss[j]);
      cr_expect_eq(collgen__f32_to_e4m3_sat(got), collgen__f32_to_e4m3_sat(want),
                   "%a / %a: code %#x, division gives %#x", (double)ys[i], (double)ss[j],
                   collgen__f32_to_e4m3_sat(got), collgen__f32_to_e4m3_sat(want));
    }
}
