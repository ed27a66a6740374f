/*
** test_reference.c -- hand-computed cases for the library's 16-bit float
** rounding (dtype_convert.h: ties, subnormals, overflow, NaN) and for the
** test support's CPU reference of every op's math.
*/
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "dtype_convert.h"
#include "reference.h"

Test(reference, bf16_rounding) {
  cr_expect_eq(collgen__f32_to_bf16(1.0f), 0x3f80);
  cr_expect_eq(collgen__f32_to_bf16(-2.0f), 0xc000);
  cr_expect_eq(collgen__f32_to_bf16(1.00390625f), 0x3f80, "tie rounds to even (down)");
  cr_expect_eq(collgen__f32_to_bf16(1.01171875f), 0x3f82, "tie rounds to even (up)");
  cr_expect_eq(collgen__f32_to_bf16(1.0f + 0x1p-8f + 0x1p-20f), 0x3f81, "above tie rounds up");
  cr_expect_eq(collgen__f32_to_bf16(3.4e38f), 0x7f80, "overflow rounds to inf");
  cr_expect_eq(collgen__f32_to_bf16(INFINITY), 0x7f80);
  uint16_t nan = collgen__f32_to_bf16(NAN);
  cr_expect((nan & 0x7f80) == 0x7f80 && (nan & 0x7f) != 0, "NaN stays NaN: %#x", nan);
  cr_expect_eq(collgen__bf16_to_f32(0x3f81), 1.0078125f);
}

Test(reference, f16_rounding) {
  cr_expect_eq(collgen__f32_to_f16(1.0f), 0x3c00);
  cr_expect_eq(collgen__f32_to_f16(-0.0f), 0x8000);
  cr_expect_eq(collgen__f32_to_f16(0.1f), 0x2e66);
  cr_expect_eq(collgen__f32_to_f16(65504.0f), 0x7bff);
  cr_expect_eq(collgen__f32_to_f16(65519.0f), 0x7bff);
  cr_expect_eq(collgen__f32_to_f16(65520.0f), 0x7c00, "rounds to inf");
  cr_expect_eq(collgen__f32_to_f16(1.0f + 0x1p-11f), 0x3c00, "tie to even (down)");
  cr_expect_eq(collgen__f32_to_f16(1.0f + 0x3p-11f), 0x3c02, "tie to even (up)");
  cr_expect_eq(collgen__f32_to_f16(0x1p-14f), 0x0400, "smallest normal");
  cr_expect_eq(collgen__f32_to_f16(0x1p-24f), 0x0001, "smallest subnormal");
  cr_expect_eq(collgen__f32_to_f16(0x1p-25f), 0x0000, "half of it ties to zero");
  cr_expect_eq(collgen__f32_to_f16(0x3p-25f), 0x0002, "1.5 units ties to 2");
  cr_expect_eq(collgen__f32_to_f16(0x1.8p-24f * 1.01f), 0x0002);
  cr_expect_eq(collgen__f16_to_f32(0x0001), 0x1p-24f);
  cr_expect_eq(collgen__f16_to_f32(0x3555), 0.333251953125f);
  cr_expect_eq(collgen__f16_to_f32(0xfc00), -INFINITY);
  cr_expect(isnan(collgen__f16_to_f32(0x7e00)));
}

Test(reference, f16_round_trip_all_values) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff)) continue; /* NaNs */
    cr_assert_eq(collgen__f32_to_f16(collgen__f16_to_f32((uint16_t)h)), h, "h=%#x", h);
  }
}

Test(reference, e4m3_hand_cases) {
  cr_expect_eq(collgen__f32_to_e4m3_sat(1.0f), 0x38);
  cr_expect_eq(collgen__f32_to_e4m3_sat(-1.0f), 0xb8);
  cr_expect_eq(collgen__f32_to_e4m3_sat(448.0f), 0x7e, "largest finite");
  cr_expect_eq(collgen__f32_to_e4m3_sat(1e6f), 0x7e, "saturates");
  cr_expect_eq(collgen__f32_to_e4m3_sat(-INFINITY), 0xfe, "infinity saturates");
  cr_expect_eq(collgen__f32_to_e4m3_sat(NAN) & 0x7f, 0x7f, "NaN stays NaN");
  cr_expect_eq(collgen__f32_to_e4m3_sat(1.0625f), 0x38, "tie to even (down)");
  cr_expect_eq(collgen__f32_to_e4m3_sat(1.1875f), 0x3a, "tie to even (up)");
  cr_expect_eq(collgen__f32_to_e4m3_sat(0x1p-6f), 0x08, "smallest normal");
  cr_expect_eq(collgen__f32_to_e4m3_sat(0x1p-9f), 0x01, "smallest subnormal");
  cr_expect_eq(collgen__f32_to_e4m3_sat(0x1p-10f), 0x00, "half of it ties to zero");
  cr_expect_eq(collgen__f32_to_e4m3_sat(0x3p-10f), 0x02, "1.5 units tie to 2");
  cr_expect_eq(collgen__f32_to_e4m3_sat(0x1.ep-7f), 0x08, "rounds up into the normals");
  cr_expect_eq(collgen__e4m3_to_f32(0x7e), 448.0f);
  cr_expect_eq(collgen__e4m3_to_f32(0x01), 0x1p-9f);
  cr_expect(isnan(collgen__e4m3_to_f32(0xff)));
}

/* Every code round-trips, and random floats go to the nearest code (ties
** to the even code), found here by scanning all codes. */
Test(reference, e4m3_nearest_even_against_a_scan) {
  for (int q = 0; q < 256; ++q) {
    if ((q & 0x7f) == 0x7f) continue; /* NaN */
    cr_assert_eq(collgen__f32_to_e4m3_sat(collgen__e4m3_to_f32((uint8_t)q)), q == 0x80 ? 0x80 : q,
                 "code %#x", q);
  }
  uint64_t state = 0x243f6a8885a308d3ull;
  for (int i = 0; i < 200000; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    float a = ldexpf((float)(state >> 40) / 16777216.0f, (int)((state >> 8) % 24) - 14);
    float f = (state & 1) ? -a : a;
    int best = -1;
    float best_err = INFINITY;
    for (int q = 0; q <= 0x7e; ++q) {
      float err = fabsf(collgen__e4m3_to_f32((uint8_t)q) - a);
      if (err < best_err || (err == best_err && (q & 1) == 0)) {
        best = q;
        best_err = err;
      }
    }
    int want = (a > 448.0f ? 0x7e : best) | ((state & 1) ? 0x80 : 0);
    cr_assert_eq(collgen__f32_to_e4m3_sat(f), want, "f=%a", (double)f);
  }
}

Test(reference, allreduce_sums_in_rank_order_and_rounds_once) {
  /* bf16: 1 + 2^-8 + 2^-8 = 1 + 2^-7 exactly in f32, representable in bf16.
  ** Rounding after each add would give 1 + 0 + 0 = 1 instead. */
  uint16_t a[1] = {0x3f80}, b[1] = {0x3b80}, c[1] = {0x3b80}, out[1] = {0};
  const void *in[3] = {a, b, c};
  cr_expect_eq(collgen__bf16_to_f32(0x3b80), 0x1p-8f);
  collgen__ref_allreduce(COLLGEN_DTYPE_BF16, 1, 3, in, out);
  cr_expect_eq(out[0], 0x3f81, "got %#x", out[0]);
  /* f32: order matters: (1e8 + 1) - 1e8 = 0 in f32 */
  float x[1] = {1e8f}, y[1] = {1.0f}, z[1] = {-1e8f}, o[1];
  const void *fin[3] = {x, y, z};
  collgen__ref_allreduce(COLLGEN_DTYPE_F32, 1, 3, fin, o);
  cr_expect_eq(o[0], 0.0f);
}

Test(reference, rmsnorm_hand_case) {
  /* rows [3, 4] and [0, 0]: mean square 12.5 and 0. */
  float shard0[2] = {3.0f, 4.0f}, shard1[2] = {0.0f, 0.0f};
  float gamma[2] = {0.0f, 0.5f}, normed[4], resid[4];
  const void *in[2] = {shard0, shard1};
  int64_t rows[2] = {1, 1};
  collgen__ref_allgather_rmsnorm(COLLGEN_DTYPE_F32, 2, rows, 2, in, gamma, 0.0f, 1.0f, normed,
                                 resid);
  cr_expect_eq(resid[0], 3.0f);
  cr_expect_eq(resid[1], 4.0f);
  cr_expect_eq(resid[2], 0.0f);
  cr_expect_float_eq(normed[0], 3.0f / sqrtf(12.5f) * 1.0f, 1e-6);
  cr_expect_float_eq(normed[1], 4.0f / sqrtf(12.5f) * 1.5f, 1e-6);
  cr_expect(isnan(normed[2]) || normed[2] == 0.0f, "0/0 row with eps 0");
  /* eps keeps an all-zero row finite */
  collgen__ref_allgather_rmsnorm(COLLGEN_DTYPE_F32, 2, rows, 2, in, gamma, 1e-6f, 0.0f, normed,
                                 resid);
  cr_expect_eq(normed[2], 0.0f);
  cr_expect_float_eq(normed[1], 4.0f / sqrtf(12.5f + 1e-6f) * 0.5f, 1e-6);
}

Test(reference, rmsnorm_empty_shard) {
  uint16_t s0[3] = {0x3f80, 0x4000, 0x4040}; /* 1 2 3 */
  uint16_t gamma[3] = {0x3f80, 0x3f80, 0x3f80}, normed[3], resid[3];
  const void *in[2] = {NULL, s0};
  int64_t rows[2] = {0, 1};
  collgen__ref_allgather_rmsnorm(COLLGEN_DTYPE_BF16, 2, rows, 3, in, gamma, 0.0f, 0.0f, normed,
                                 resid);
  cr_expect(memcmp(resid, s0, sizeof s0) == 0);
  /* scale = 1/sqrt(14/3) = 0.46291; 1*s = 0.46291 -> bf16 0x3eed (0.462890625) */
  cr_expect_eq(normed[0], 0x3eed, "got %#x", normed[0]);
}

Test(reference, residual_rmsnorm_adds_in_rank_order_then_residual_and_rounds_once) {
  /* bf16: 1 + 2^-8 (x) + 2^-8 (residual) = 1 + 2^-7 exactly in f32. Rounding
  ** the sum of x first (to 1, the tie goes to even) would give 1 again. */
  uint16_t x0[1] = {0x3f80}, x1[1] = {0x3b80}, res[1] = {0x3b80}, gamma[1] = {0x3f80};
  uint16_t out[1] = {0}, normed[1] = {0};
  const void *x[2] = {x0, x1};
  collgen__ref_allreduce_residual_rmsnorm(COLLGEN_DTYPE_BF16, 2, 1, 1, x, res, gamma, 0.0f, 0.0f,
                                          normed, out);
  cr_expect_eq(out[0], 0x3f81, "got %#x", out[0]);
  cr_expect_eq(normed[0], 0x3f80, "x / |x| = 1, got %#x", normed[0]);
  /* f32: the residual comes last: (1e8 + -1e8) + 1 = 1, whereas adding it
  ** before the second rank gives (1e8 + 1) + -1e8 = 0. */
  float a[1] = {1e8f}, b[1] = {-1e8f}, r[1] = {1.0f}, g[1] = {1.0f}, o[1], n[1];
  const void *fx[2] = {a, b};
  collgen__ref_allreduce_residual_rmsnorm(COLLGEN_DTYPE_F32, 2, 1, 1, fx, r, g, 0.0f, 0.0f, n, o);
  cr_expect_eq(o[0], 1.0f);
  /* in place: residual_out may be residual_in */
  collgen__ref_allreduce_residual_rmsnorm(COLLGEN_DTYPE_F32, 2, 1, 1, fx, r, g, 0.0f, 0.0f, n, r);
  cr_expect_eq(r[0], 1.0f);
  cr_expect_eq(n[0], 1.0f);
}

Test(reference, residual_rmsnorm_normalizes_residual_out) {
  /* rows [3, 4] + [0, 0] and [1, 2] + [-1, -2] with residuals [0, 0], [5, 5]:
  ** residual_out [3, 4] (mean square 12.5) and [5, 5] (25). */
  float x0[4] = {3.0f, 4.0f, 1.0f, 2.0f}, x1[4] = {0.0f, 0.0f, -1.0f, -2.0f};
  float res[4] = {0.0f, 0.0f, 5.0f, 5.0f}, gamma[2] = {0.0f, 0.5f}, out[4], normed[4];
  const void *x[2] = {x0, x1};
  collgen__ref_allreduce_residual_rmsnorm(COLLGEN_DTYPE_F32, 2, 2, 2, x, res, gamma, 0.0f, 1.0f,
                                          normed, out);
  cr_expect(out[0] == 3.0f && out[1] == 4.0f && out[2] == 5.0f && out[3] == 5.0f);
  cr_expect_float_eq(normed[0], 3.0f / sqrtf(12.5f) * 1.0f, 1e-6);
  cr_expect_float_eq(normed[1], 4.0f / sqrtf(12.5f) * 1.5f, 1e-6);
  cr_expect_float_eq(normed[2], 1.0f, 1e-6);
  cr_expect_float_eq(normed[3], 1.5f, 1e-6);
}

Test(reference, closeness_bound) {
  cr_expect(collgen__ref_close(COLLGEN_DTYPE_BF16, 1.0, 1.0 + 0x1p-8));
  cr_expect(collgen__ref_close(COLLGEN_DTYPE_BF16, 1.0078125, 1.0 + 0x1p-8));
  cr_expect(!collgen__ref_close(COLLGEN_DTYPE_BF16, 1.015625, 1.0));
  cr_expect(!collgen__ref_close(COLLGEN_DTYPE_F32, 1.001, 1.0));
  cr_expect(collgen__ref_close(COLLGEN_DTYPE_F32, 1.0 + 0x1p-20, 1.0));
}

Test(reference, random_fill_is_bounded_rounded_and_seeded) {
  uint16_t a[4096], b[4096];
  uint64_t s1 = 42, s2 = 42, s3 = 43;
  collgen__ref_fill_random(COLLGEN_DTYPE_BF16, a, 4096, &s1);
  collgen__ref_fill_random(COLLGEN_DTYPE_BF16, b, 4096, &s2);
  cr_expect(memcmp(a, b, sizeof a) == 0, "same state, same values");
  cr_expect_eq(s1, s2);
  collgen__ref_fill_random(COLLGEN_DTYPE_BF16, b, 4096, &s3);
  cr_expect(memcmp(a, b, sizeof a) != 0, "another state, other values");
  int negative = 0, zero = 0;
  for (int i = 0; i < 4096; ++i) {
    float v = collgen__bf16_to_f32(a[i]);
    cr_assert(v >= -1.0f && v <= 1.0f, "value %g out of range", v);
    negative += v < 0;
    zero += v == 0.0f;
  }
  cr_expect(negative > 1500 && negative < 2600, "both signs: %d negative of 4096", negative);
  cr_expect_lt(zero, 16, "not mostly zeros");
}
