/*
** test_reference.c -- hand-computed cases for the library's 16-bit float
** rounding (dtype_convert.h: ties, subnormals, overflow, NaN) and for the
** test support's CPU reference of every op's math.
*/
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
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

/* e4m3 of y / divisor, as the kernels quantize: the division rounds in
** f32, the conversion to nearest even, saturating. */
Test(reference, fp8_row_quantization_hand_cases) {
  const float y[] = {1.0625f, 1.1875f, -1.0625f, 500.0f, -1e9f, 0.0f, 0x3p-10f, NAN};
  const uint8_t want[] = {0x38, 0x3a, 0xb8, 0x7e, 0xfe, 0x00, 0x02, 0x7f};
  uint8_t q[8];
  float scale = -1.0f;
  collgen__ref_e4m3_row(COLLGEN_FP8_STATIC, 1.0f, y, 8, q, &scale);
  for (int i = 0; i < 8; ++i)
    cr_expect_eq(q[i] & (i == 7 ? 0x7f : 0xff), want[i], "y[%d] = %g: got %#x want %#x", i,
                 (double)y[i], q[i], want[i]);
  cr_expect_eq(scale, -1.0f, "static: no scale written");
  const float z[] = {3.1875f, 0.7f};
  collgen__ref_e4m3_row(COLLGEN_FP8_STATIC, 3.0f, z, 1, q, &scale);
  cr_expect_eq(q[0], 0x38, "3.1875 / 3 = 1.0625 exactly: a tie, to even");
  collgen__ref_e4m3_row(COLLGEN_FP8_STATIC, 0.5f, z + 1, 1, q, &scale);
  cr_expect_eq(q[0], 0x3b, "0.7 / 0.5 = 1.4 -> 1.375");
  /* dynamic: the max (NaN ignored) maps to 448; the rest in proportion */
  const float d[] = {-2.0f, 0.5f, NAN, 0.015625f};
  collgen__ref_e4m3_row(COLLGEN_FP8_DYNAMIC, 0.0f, d, 4, q, &scale);
  cr_expect_eq(scale, 2.0f / 448.0f);
  cr_expect_eq(q[0], 0xfe, "-448");
  cr_expect_eq(q[1], 0x6e, "112 = 1.75 * 2^6");
  cr_expect_eq(q[2] & 0x7f, 0x7f, "NaN stays NaN");
  cr_expect_eq(q[3], 0x46, "3.5 = 1.75 * 2");
  const float nans[] = {NAN, -0.0f, 0.0f};
  collgen__ref_e4m3_row(COLLGEN_FP8_DYNAMIC, 0.0f, nans, 3, q, &scale);
  cr_expect_eq(scale, 0.0f, "a row of zeros and NaN: scale 0");
  cr_expect(q[0] == 0 && q[1] == 0 && q[2] == 0, "and every code 0 (not NaN, not -0)");
}

/* The FP8 reference of the whole op on f32 rows: a zero row (eps 0, so
** its normed_f32 is NaN), a row with one huge value (the others become
** small and subnormal codes), and saturation with a small static scale. */
Test(reference, residual_rmsnorm_fp8_zero_row_huge_value_and_saturation) {
  /* x summed over 2 ranks plus the residual: row 0 all 0; row 1
  ** {1000, 1, -1, 0.01} */
  float x0[8] = {0, 0, 0, 0, 1000.0f, 1.0f, 0, 0.01f}, x1[8] = {0, 0, 0, 0, 0, 0, -1.0f, 0};
  float res[8] = {0}, gamma[4] = {1.0f, 1.0f, 1.0f, 1.0f}, out[8], scales[2] = {-1, -1};
  uint8_t q[8];
  const void *x[2] = {x0, x1};
  collgen__ref_allreduce_residual_rmsnorm_fp8(COLLGEN_DTYPE_F32, 2, 2, 4, x, res, gamma, 0.0f,
                                              0.0f, COLLGEN_FP8_DYNAMIC, 0.0f, q, scales, out);
  cr_expect(out[4] == 1000.0f && out[6] == -1.0f && out[7] == 0.01f);
  cr_expect_eq(scales[0], 0.0f, "the zero row: scale 0, not NaN");
  for (int i = 0; i < 4; ++i) cr_expect_eq(q[i], 0, "zero row code %d: %#x", i, q[i]);
  double y0 = 1000.0 / sqrt((1e6 + 2.0 + (double)0.01f * 0.01f) / 4.0);
  cr_expect(fabs(scales[1] - y0 / 448.0) <= 1e-6 * y0 / 448.0, "scale %.9g want %.9g",
            (double)scales[1], y0 / 448.0);
  cr_expect_eq(q[4], 0x7e, "the huge value is the max: 448");
  cr_expect_eq(q[5], 0x2e, "448 / 1000 = 0.448 -> 0.4375");
  cr_expect_eq(q[6], 0xae, "-0.4375");
  cr_expect_eq(q[7], 0x02, "0.00448 -> 2 subnormal units of 2^-9");
  /* static 1/1024: y * 1024 = {2048 (saturates), 2.048, -2.048, 0.02048} */
  collgen__ref_allreduce_residual_rmsnorm_fp8(COLLGEN_DTYPE_F32, 2, 2, 4, x, res, gamma, 0.0f,
                                              0.0f, COLLGEN_FP8_STATIC, 1.0f / 1024, q, NULL,
                                              out);
  for (int i = 0; i < 4; ++i)
    cr_expect_eq(q[i] & 0x7f, 0x7f, "static: the zero row's NaN (eps 0) stays NaN, %#x", q[i]);
  cr_expect_eq(q[4], 0x7e, "saturates to 448");
  cr_expect_eq(q[5], 0x40, "2.048 -> 2");
  cr_expect_eq(q[6], 0xc0, "-2");
  cr_expect_eq(q[7], 0x0a, "0.02048 = 1.31 * 2^-6 -> 1.25 * 2^-6");
}

/* collgen__ref_fp8_row_ok accepts the reference's own output, the code on
** the other side of a tie, and a scale a few ulps off; it refuses any other
** code and a scale off by 2^-13. */
Test(reference, fp8_row_check_bounds) {
  /* f32 row {1, -1, 1, -1}: rms 1 (eps 0), so y = x * (gamma + 1) exactly:
  ** {1.0625 (a tie), -1.1875 (a tie), 2.5, 1} */
  float r[4] = {1.0f, -1.0f, 1.0f, -1.0f}, g[4] = {0.0625f, 0.1875f, 1.5f, -2.0f};
  const collgen_dtype_t F32 = COLLGEN_DTYPE_F32;
  int64_t col = 99;
  static const uint8_t ref[4] = {0x38, 0xba, 0x42, 0x38}, other[4] = {0x39, 0xb9, 0x42, 0x38};
  static const uint8_t bad2[4] = {0x38, 0xba, 0x41, 0x38}, bad0[4] = {0x3a, 0xba, 0x42, 0x38};
  const collgen_fp8_mode_t ST = COLLGEN_FP8_STATIC, DYN = COLLGEN_FP8_DYNAMIC;
  cr_expect(collgen__ref_fp8_row_ok(F32, r, g, 0, 4, 0.0f, 1.0f, ST, 1.0f, ref, 0, &col));
  cr_expect(collgen__ref_fp8_row_ok(F32, r, g, 0, 4, 0.0f, 1.0f, ST, 1.0f, other, 0, &col),
            "either side of a tie");
  cr_expect(!collgen__ref_fp8_row_ok(F32, r, g, 0, 4, 0.0f, 1.0f, ST, 1.0f, bad2, 0, &col));
  cr_expect_eq(col, 2);
  cr_expect(!collgen__ref_fp8_row_ok(F32, r, g, 0, 4, 0.0f, 1.0f, ST, 1.0f, bad0, 0, &col));
  cr_expect_eq(col, 0);
  /* dynamic, on random bf16 rows: the reference passes; scales off */
  uint16_t res[4096], gamma[4096];
  uint64_t seed = 7;
  collgen__ref_fill_random(COLLGEN_DTYPE_BF16, res, 4096, &seed);
  collgen__ref_fill_random(COLLGEN_DTYPE_BF16, gamma, 4096, &seed);
  float y[4096], scale = 0.0f;
  uint8_t q[4096];
  collgen__ref_normed_f32_row(COLLGEN_DTYPE_BF16, res, gamma, 0, 4096, 1e-6f, 0.0f, y);
  collgen__ref_e4m3_row(DYN, 0.0f, y, 4096, q, &scale);
  const collgen_dtype_t BF = COLLGEN_DTYPE_BF16;
  cr_expect(collgen__ref_fp8_row_ok(BF, res, gamma, 0, 4096, 1e-6f, 0.0f, DYN, 0, q, scale, &col));
  cr_expect(collgen__ref_fp8_row_ok(BF, res, gamma, 0, 4096, 1e-6f, 0.0f, DYN, 0, q,
                                    scale * (1.0f + 0x1p-20f), &col), "a few ulps off");
  cr_expect(!collgen__ref_fp8_row_ok(BF, res, gamma, 0, 4096, 1e-6f, 0.0f, DYN, 0, q,
                                     scale * (1.0f + 0x1p-13f), &col), "2^-13 off");
  cr_expect_eq(col, -1, "the scale");
  cr_expect(!collgen__ref_fp8_row_ok(BF, res, gamma, 0, 4096, 1e-6f, 0.0f, DYN, 0, q, 0.0f, &col),
            "scale 0 for a nonzero row");
  int64_t k = 0;
  while (q[k] == 0 || (q[k] & 0x7f) >= 0x7d) ++k; /* a code with room for a neighbour */
  q[k] ^= 0x02;
  cr_expect(!collgen__ref_fp8_row_ok(BF, res, gamma, 0, 4096, 1e-6f, 0.0f, DYN, 0, q, scale,
                                     &col), "code %lld off by two", (long long)k);
  cr_expect_eq(col, k);
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

/* A copy-only dtype is moved, never computed on: fill_random draws any
** bits (every byte value shows up, the state advances as for the others),
** close compares exactly, and a reduction over it aborts. */
Test(reference, copy_only_dtypes_are_bits) {
  uint64_t state = 0x9e3779b97f4a7c15ull;
  unsigned char bytes[4 * 4096];
  collgen__ref_fill_random(COLLGEN_DTYPE_I32, bytes, 4096, &state);
  int seen[256] = {0}, distinct = 0;
  for (size_t i = 0; i < sizeof bytes; ++i) distinct += !seen[bytes[i]]++;
  cr_expect_eq(distinct, 256, "%d byte values", distinct);
  uint64_t again = 0x9e3779b97f4a7c15ull;
  unsigned char copy[4 * 4096];
  collgen__ref_fill_random(COLLGEN_DTYPE_I32, copy, 4096, &again);
  cr_expect(memcmp(bytes, copy, sizeof bytes) == 0 && again == state, "seeded");
  cr_expect(collgen__ref_close(COLLGEN_DTYPE_I64, 3.0, 3.0));
  cr_expect(!collgen__ref_close(COLLGEN_DTYPE_I64, 3.0, 3.0000001));
}

Test(reference, a_reduction_over_a_copy_only_dtype_aborts, .signal = SIGABRT) {
  int32_t a[4] = {1, 2, 3, 4}, out[4];
  const void *in[1] = {a};
  collgen__ref_allreduce(COLLGEN_DTYPE_I32, 4, 1, in, out);
}

/* Every rank gets the root's bytes (any dtype, copy-only too); the other
** inputs are never read (NULL here); the root may be in place. */
Test(reference, broadcast_copies_the_roots_bytes_only) {
  uint64_t root_in[5] = {1, 0x8000000000000001ull, 3, ~0ull, 5};
  uint64_t out1[5], out2[5], out3[5];
  memset(out1, 0xA5, sizeof out1);
  memset(out2, 0xA5, sizeof out2);
  memset(out3, 0xA5, sizeof out3);
  const void *in[3] = {NULL, root_in, NULL};
  void *out[3] = {out1, root_in, out2};
  collgen__ref_broadcast(COLLGEN_DTYPE_I64, 5, 3, 1, in, out);
  cr_expect_eq(memcmp(out1, root_in, sizeof root_in), 0);
  cr_expect_eq(memcmp(out2, root_in, sizeof root_in), 0);
  uint8_t bytes[7] = {1, 2, 3, 4, 5, 6, 7}, got[8];
  memset(got, 0xA5, sizeof got);
  const void *in8[1] = {bytes};
  void *out8[1] = {got};
  collgen__ref_broadcast(COLLGEN_DTYPE_U8, 7, 1, 0, in8, out8);
  cr_expect_eq(memcmp(got, bytes, 7), 0);
  cr_expect_eq(got[7], 0xA5, "nothing past n elements is written");
  void *out0[2] = {out3, out3};
  collgen__ref_broadcast(COLLGEN_DTYPE_F64, 0, 2, 1, in, out0);
  cr_expect_eq(out3[0], 0xA5A5A5A5A5A5A5A5ull, "zero elements write nothing");
}

/* all_gather: shards concatenated in group order, bit for bit, for any
** element size; an empty shard adds nothing; a shard already at its
** offset (in place) stays. */
Test(reference, all_gather_concatenates_shards_in_order) {
  const uint64_t a[2] = {0x0123456789abcdefull, 0xfedcba9876543210ull}, b[1] = {42};
  const void *in[3] = {a, NULL, b};
  const int64_t elems[3] = {2, 0, 1};
  uint64_t out[3] = {0};
  collgen__ref_all_gather(COLLGEN_DTYPE_F64, 3, elems, in, out);
  cr_expect(out[0] == a[0] && out[1] == a[1] && out[2] == b[0]);
  unsigned char bytes[5] = {1, 2, 3, 4, 5}, got[5];
  memcpy(got, bytes, sizeof got);
  const void *inplace[2] = {got, got + 2};
  const int64_t n[2] = {2, 3};
  collgen__ref_all_gather(COLLGEN_DTYPE_U8, 2, n, inplace, got);
  cr_expect(memcmp(got, bytes, sizeof got) == 0, "in place leaves the bytes");
}

/* scatter: group rank i gets rows chunk i of the root's input, bit for
** bit: 5 rows of 2 i16 over 3 ranks are chunks of 2, 2 and 1 rows (rows
** 0-1, 2-3, 4); over 6 ranks, 1 row each for ranks 0..4 and none for rank
** 5 (nothing written); in place at the chunk leaves the bytes. */
Test(reference, scatter_gives_each_rank_its_chunk_of_rows) {
  const uint16_t in[5][2] = {{0x0100, 0x8001}, {0x0200, 0xffff}, {0x0300, 0x7c00},
                             {0x0400, 0x0001}, {0x0500, 0xfe00}};
  uint16_t got[3][2][2];
  memset(got, 0xA5, sizeof got);
  for (int i = 0; i < 3; ++i) collgen__ref_scatter(COLLGEN_DTYPE_I16, 5, 2, 3, i, in, got[i]);
  cr_expect(memcmp(got[0], &in[0], 2 * sizeof in[0]) == 0, "rank 0: rows 0 and 1");
  cr_expect(memcmp(got[1], &in[2], 2 * sizeof in[0]) == 0, "rank 1: rows 2 and 3");
  cr_expect(got[2][0][0] == 0x0500 && got[2][0][1] == 0xfe00, "rank 2: row 4");
  cr_expect(got[2][1][0] == 0xA5A5 && got[2][1][1] == 0xA5A5, "rank 2: one row only");
  uint16_t one[2];
  for (int i = 0; i < 6; ++i) {
    memset(one, 0xA5, sizeof one);
    collgen__ref_scatter(COLLGEN_DTYPE_I16, 5, 2, 6, i, in, one);
    if (i < 5)
      cr_expect(one[0] == in[i][0] && one[1] == in[i][1], "of 6: rank %d gets row %d", i, i);
    else
      cr_expect(one[0] == 0xA5A5 && one[1] == 0xA5A5, "of 6: rank 5's chunk is empty");
  }
  /* 7 f64 rows of one over 2 ranks: 4 and 3; rank 1's in place at row 4 */
  double d[7] = {1.5, -0.0, 3.25, 1e300, -7.0, 0.125, 9.0}, want[7], d2[3];
  memcpy(want, d, sizeof d);
  collgen__ref_scatter(COLLGEN_DTYPE_F64, 7, 1, 2, 1, d, d + 4);
  cr_expect(memcmp(d, want, sizeof d) == 0, "in place leaves the bytes");
  collgen__ref_scatter(COLLGEN_DTYPE_F64, 7, 1, 2, 1, d, d2);
  cr_expect(memcmp(d2, want + 4, sizeof d2) == 0, "rank 1: rows 4..6");
}

Test(reference, reduce_scatter_sum_is_allreduce_rows_of_the_chunk) {
  /* 7 rows of 3 over 3 ranks: chunks of 3, 2, 2 rows. Each rank's part is
  ** exactly the allreduce sum's rows [start, start + count). */
  enum { ROWS = 7, COLS = 3, G = 3, N = ROWS * COLS };
  uint64_t state = 0x5eed5ca7u;
  uint16_t in[G][N], full[N], out[N];
  for (int g = 0; g < G; ++g) collgen__ref_fill_random(COLLGEN_DTYPE_BF16, in[g], N, &state);
  const void *ins[G] = {in[0], in[1], in[2]};
  collgen__ref_allreduce(COLLGEN_DTYPE_BF16, N, G, ins, full);
  const int want_start[G] = {0, 3, 5}, want_count[G] = {3, 2, 2};
  for (int r = 0; r < G; ++r) {
    memset(out, 0xff, sizeof out);
    collgen__ref_reduce_scatter_sum(COLLGEN_DTYPE_BF16, ROWS, COLS, G, r, ins, out);
    cr_expect_eq(memcmp(out, full + want_start[r] * COLS, (size_t)want_count[r] * COLS * 2), 0,
                 "rank %d", r);
    cr_expect_eq(out[want_count[r] * COLS], 0xffff, "rank %d wrote past its chunk", r);
  }
  /* more ranks than rows: rank 2 of 3 over 2 rows gets nothing */
  memset(out, 0xff, sizeof out);
  collgen__ref_reduce_scatter_sum(COLLGEN_DTYPE_BF16, 2, COLS, G, 2, ins, out);
  cr_expect_eq(out[0], 0xffff);
  /* f32 order: (1e8 + 1) - 1e8 = 0, as allreduce */
  float x[2] = {0, 1e8f}, y[2] = {0, 1.0f}, z[2] = {0, -1e8f}, o[1] = {5};
  const void *fin[3] = {x, y, z};
  collgen__ref_reduce_scatter_sum(COLLGEN_DTYPE_F32, 2, 1, 2, 1, fin, o);
  cr_expect_eq(o[0], 1e8f + 1.0f);
  collgen__ref_reduce_scatter_sum(COLLGEN_DTYPE_F32, 2, 1, 3, 1, fin, o);
  cr_expect_eq(o[0], 0.0f);
}

Test(reference, reduce_scatter_rmsnorm_chunks_sums_in_rank_order_and_normalizes) {
  /* 5 rows of 2 cols on 2 ranks: rank 0 owns rows 0..2, rank 1 rows 3..4.
  ** Row r of x0 is [r, 1e8], of x1 [1, -1e8]: in rank order the second
  ** column sums to 0 before the residual's 1 is added. */
  float x0[10], x1[10], res[6], gamma[2] = {1.0f, 1.0f}, out[6], normed[6];
  for (int r = 0; r < 5; ++r) {
    x0[2 * r] = (float)r, x0[2 * r + 1] = 1e8f;
    x1[2 * r] = 1.0f, x1[2 * r + 1] = -1e8f;
  }
  for (int k = 0; k < 6; ++k) res[k] = 1.0f;
  const void *x[2] = {x0, x1};
  collgen__ref_reduce_scatter_rmsnorm(COLLGEN_DTYPE_F32, 2, 1, 5, 2, x, res, gamma, 0.0f, 0.0f,
                                      normed, out);
  /* rows 3 and 4: [3 + 1 + 1, 0 + 1] and [4 + 1 + 1, 0 + 1] */
  cr_expect(out[0] == 5.0f && out[1] == 1.0f && out[2] == 6.0f && out[3] == 1.0f);
  cr_expect_float_eq(normed[0], 5.0f / sqrtf(13.0f), 1e-6);
  cr_expect_float_eq(normed[3], 1.0f / sqrtf(18.5f), 1e-6);
  /* rank 0 without residual_in: rows 0..2 are [r + 1, 0] */
  collgen__ref_reduce_scatter_rmsnorm(COLLGEN_DTYPE_F32, 2, 0, 5, 2, x, NULL, gamma, 0.0f, 0.0f,
                                      normed, out);
  for (int r = 0; r < 3; ++r) cr_expect(out[2 * r] == (float)(r + 1) && out[2 * r + 1] == 0.0f);
  cr_expect_float_eq(normed[0], sqrtf(2.0f), 1e-6);
  /* in place, and a group of one (the whole tensor); normed may be skipped */
  collgen__ref_reduce_scatter_rmsnorm(COLLGEN_DTYPE_F32, 1, 0, 2, 2, x, res, gamma, 0.0f, 0.0f,
                                      NULL, res);
  cr_expect(res[0] == 1.0f && res[1] == 1e8f + 1.0f && res[2] == 2.0f);
  /* bf16 rounds once: 1 + 2^-8 + 2^-8 (residual) = 1 + 2^-7 */
  uint16_t b0[1] = {0x3f80}, b1[1] = {0x3b80}, bres[1] = {0x3b80}, bg[1] = {0x3f80}, bo[1], bn[1];
  const void *bx[2] = {b0, b1};
  collgen__ref_reduce_scatter_rmsnorm(COLLGEN_DTYPE_BF16, 2, 0, 1, 1, bx, bres, bg, 0.0f, 0.0f,
                                      bn, bo);
  cr_expect_eq(bo[0], 0x3f81, "got %#x", bo[0]);
}
