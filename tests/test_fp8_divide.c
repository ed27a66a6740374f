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
#include <stdio.h>
#include <string.h>

#include "dtype_convert.h"
#include "test_util.h"

/* The kernel's bounds (rmsnorm.cuh.tpl, make_divider and divide): divisors
** whose magnitude lies in [FAST_MIN, FAST_MAX] take the reciprocal path, and
** there quotients q0 in (Q0_ZERO, Q0_SATURATED) get the residual step. */
#define FAST_MIN 0x1p-64f
#define FAST_MAX 0x1p64f
#define Q0_ZERO 0x1p-20f
#define Q0_SATURATED 0x1p13f

/* q + r * (y - q * s), with the kernel's two FMAs. */
static float residual_step(float y, float s, float r, float q) {
  return fmaf(fmaf(-q, s, y), r, q);
}

/* The kernel's divide(make_divider(s), y) up to its last step: returns 1
** with *r = 1 / s and *q = q1 (the first residual step) when (y, s) takes
** the residual steps; else 0 with *q the kernel's result. */
static int first_steps(float y, float s, float *r, float *q) {
  const float a = fabsf(s);
  if (!(a >= FAST_MIN && a <= FAST_MAX)) {
    *q = y / s;
    return 0;
  }
  *r = 1.0f / s;
  const float q0 = y * *r;
  const int steps = fabsf(q0) > Q0_ZERO && fabsf(q0) < Q0_SATURATED;
  *q = steps ? residual_step(y, s, *r, q0) : q0;
  return steps;
}

/* The kernel's divide(make_divider(s), y), step for step. */
static float kernel_divide(float y, float s) {
  float r = 0.0f, q = 0.0f;
  return first_steps(y, s, &r, &q) ? residual_step(y, s, r, q) : q;
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

/* The last residual step makes the quotient exact (Markstein) only if its
** residual y - q1 * s is a float exactly, which needs q1 within one unit of
** y / s (the first step's job) and no bit of the residual below f32's last
** subnormal bit. That is hardest where the fast path ends: the smallest
** divisors with the smallest quotients (the smallest y), and the largest
** divisors; and for quotients next to a midpoint between two floats, where
** rounding is closest. q1 * s has at most 48 significant bits, so
** y - q1 * s is exact in double and the float FMA must give the same number. */
static void check_residual(float y, float s, int *inexact, int *codes_off, int *bits_off) {
  float r = 0.0f, q1 = 0.0f;
  if (!first_steps(y, s, &r, &q1)) return;
  if ((double)fmaf(-q1, s, y) != (double)y - (double)q1 * (double)s) ++*inexact;
  *codes_off += check_pair(y, s, bits_off);
}

Test(fp8_divide, last_residual_is_exact_at_the_ends_of_the_fast_path) {
  int inexact = 0, codes_off = 0, bits_off = 0;
  for (int i = 0; i < 1000000; ++i) {
    const float ends[] = {FAST_MIN, FAST_MAX * 0x1p-4f};
    const float s = ends[i & 1] * ldexpf(fabsf(random_float(0, 0)), (int)(tu_rand() % 4));
    /* quotients from just inside Q0_ZERO up to just below Q0_SATURATED */
    const float t = ldexpf(fabsf(random_float(0, 0)), (int)(tu_rand() % 33) - 20);
    check_residual((tu_rand() & 1) ? -(t * s) : t * s, s, &inexact, &codes_off, &bits_off);
  }
  cr_expect_eq(inexact, 0, "%d residuals are not exact", inexact);
  cr_expect_eq(codes_off, 0, "%d codes differ from division's", codes_off);
  cr_expect_eq(bits_off, 0, "%d quotients differ from division's", bits_off);
}

/* y / s within a few units of the midpoint between two floats: the product
** of a random midpoint and s, and its neighbours. One residual step leaves
** the residual inexact for a few percent of these pairs; two must not. */
Test(fp8_divide, quotients_next_to_float_midpoints_round_like_division) {
  int inexact = 0, codes_off = 0, bits_off = 0;
  for (int i = 0; i < 1000000; ++i) {
    const float s = random_float(-60, 60);
    const float f = fabsf(random_float(-12, 8));
    const double mid = (double)f + 0.5 * ((double)nextafterf(f, INFINITY) - (double)f);
    float y = (float)(mid * (double)s);
    for (int step = (int)(tu_rand() % 5) - 2; step != 0; step += step > 0 ? -1 : 1)
      y = nextafterf(y, step > 0 ? INFINITY : 0.0f);
    check_residual(y, s, &inexact, &codes_off, &bits_off);
  }
  cr_expect_eq(inexact, 0, "%d residuals are not exact", inexact);
  cr_expect_eq(codes_off, 0, "%d codes differ from division's", codes_off);
  cr_expect_eq(bits_off, 0, "%d quotients differ from division's", bits_off);
}

/* Pairs that came out one unit off when the fast path began at 2^-100
** (the first CI failure, found by random_pairs_round_like_division). */
Test(fp8_divide, small_dividends_round_like_division) {
  const float pairs[][2] = {{0x1.2663bap-108f, -0x1.85d4eap-100f},
                            {-0x1.a6a96cp-111f, 0x1.fffe8p-100f},
                            {-0x1.0005fcp-107f, 0x1.6ce7f4p-100f},
                            {-0x1.897b94p-109f, 0x1.000036p-98f}};
  for (size_t i = 0; i < sizeof pairs / sizeof *pairs; ++i) {
    const float y = pairs[i][0], s = pairs[i][1];
    cr_expect_eq(bits(kernel_divide(y, s)), bits(y / s), "%a / %a: %a, division gives %a",
                 (double)y, (double)s, (double)kernel_divide(y, s), (double)(y / s));
  }
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
  const float ss[] = {1.0f, FAST_MIN, FAST_MAX, FAST_MIN * 0.5f, FAST_MAX * 2.0f, 0x1p-126f, 0x1p-149f,
                      3.0e38f, 1.0f / 448.0f, 7.0f};
  for (size_t i = 0; i < sizeof ys / sizeof *ys; ++i)
    for (size_t j = 0; j < sizeof ss / sizeof *ss; ++j) {
      const float want = ys[i] / ss[j], got = kernel_divide(ys[i], ss[j]);
      cr_expect_eq(collgen__f32_to_e4m3_sat(got), collgen__f32_to_e4m3_sat(want),
                   "%a / %a: code %#x, division gives %#x", (double)ys[i], (double)ss[j],
                   collgen__f32_to_e4m3_sat(got), collgen__f32_to_e4m3_sat(want));
    }
}
