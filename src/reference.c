/*
** reference.c -- CPU reference math for collgen's ops and IEEE 16-bit
** conversions written out bit by bit (no compiler _Float16 needed).
*/
#include <math.h>
#include <string.h>

#include "internal.h"
#include "reference.h"

static uint32_t bits_of(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float float_of(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

uint16_t collgen__ref_f32_to_bf16(float f) {
  uint32_t u = bits_of(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

float collgen__ref_bf16_to_f32(uint16_t h) { return float_of((uint32_t)h << 16); }

uint16_t collgen__ref_f32_to_f16(float f) {
  uint32_t u = bits_of(f);
  uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
  uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return sign | 0x7e00u;          /* NaN */
  if (a >= 0x477ff000u) return sign | 0x7c00u;         /* rounds to inf */
  if (a < 0x38800000u) {                               /* f16 subnormal/zero */
    /* value = a * 2^-24 units: shift the 24-bit significand */
    if (a < 0x33000000u) return sign;                  /* < half of min subnormal */
    int e = (int)(a >> 23);
    uint32_t m = (a & 0x7fffffu) | 0x800000u;
    int shift = 126 - e;                               /* 14 + (113 - e) - ... */
    /* f16 subnormal unit is 2^-24; m * 2^(e-150) / 2^-24 = m * 2^(e-126) */
    uint32_t q = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1u))) ++q;
    return sign | (uint16_t)q;
  }
  uint32_t r = a + 0xfffu + ((a >> 13) & 1u);          /* round mantissa to 10 bits */
  return sign | (uint16_t)((r - 0x38000000u) >> 13);
}

float collgen__ref_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0x1f) return float_of(sign | 0x7f800000u | (m << 13));
  if (e == 0) {
    float v = (float)m * 5.9604644775390625e-8f; /* m * 2^-24, exact */
    return sign ? -v : v;
  }
  return float_of(sign | ((e + 112u) << 23) | (m << 13));
}

float collgen__ref_load(collgen_dtype_t dtype, const void *p, int64_t i) {
  if (dtype == COLLGEN_DTYPE_F32) return ((const float *)p)[i];
  uint16_t h = ((const uint16_t *)p)[i];
  return dtype == COLLGEN_DTYPE_BF16 ? collgen__ref_bf16_to_f32(h) : collgen__ref_f16_to_f32(h);
}

void collgen__ref_store(collgen_dtype_t dtype, void *p, int64_t i, float f) {
  if (dtype == COLLGEN_DTYPE_F32) ((float *)p)[i] = f;
  else if (dtype == COLLGEN_DTYPE_BF16) ((uint16_t *)p)[i] = collgen__ref_f32_to_bf16(f);
  else ((uint16_t *)p)[i] = collgen__ref_f32_to_f16(f);
}

float collgen__ref_round(collgen_dtype_t dtype, float f) {
  if (dtype == COLLGEN_DTYPE_BF16) return collgen__ref_bf16_to_f32(collgen__ref_f32_to_bf16(f));
  if (dtype == COLLGEN_DTYPE_F16) return collgen__ref_f16_to_f32(collgen__ref_f32_to_f16(f));
  return f;
}

void collgen__ref_fill_random(collgen_dtype_t dtype, void *p, int64_t n, uint64_t *state) {
  uint64_t s = *state;
  for (int64_t i = 0; i < n; ++i) {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    collgen__ref_store(dtype, p, i, (float)((s >> 40) & 0xffffff) / 16777216.0f * 2.0f - 1.0f);
  }
  *state = s;
}

void collgen__ref_allreduce(collgen_dtype_t dtype, int64_t n, int group,
                            const void *const *in, void *out) {
  for (int64_t i = 0; i < n; ++i) {
    volatile float acc = collgen__ref_load(dtype, in[0], i); /* no excess precision */
    for (int g = 1; g < group; ++g) acc = acc + collgen__ref_load(dtype, in[g], i);
    collgen__ref_store(dtype, out, i, acc);
  }
}

double collgen__ref_rmsnorm_scale(collgen_dtype_t dtype, const void *residual,
                                  int64_t r, int64_t cols, float eps) {
  double ss = 0;
  for (int64_t k = 0; k < cols; ++k) {
    double x = collgen__ref_load(dtype, residual, r * cols + k);
    ss += x * x;
  }
  return 1.0 / sqrt(ss / (double)cols + (double)eps);
}

void collgen__ref_allgather_rmsnorm(collgen_dtype_t dtype, int group,
                                    const int64_t *rows, int64_t cols,
                                    const void *const *in, const void *gamma,
                                    float eps, float weight_offset,
                                    void *normed, void *residual) {
  size_t esize = (size_t)collgen__dtype_bytes(dtype);
  int64_t row = 0;
  for (int g = 0; g < group; ++g) {
    memcpy((char *)residual + (size_t)(row * cols) * esize, in[g],
           (size_t)(rows[g] * cols) * esize);
    row += rows[g];
  }
  for (int64_t r = 0; r < row; ++r) {
    double scale = collgen__ref_rmsnorm_scale(dtype, residual, r, cols, eps);
    for (int64_t c = 0; c < cols; ++c) {
      double x = collgen__ref_load(dtype, residual, r * cols + c);
      double w = (double)collgen__ref_load(dtype, gamma, c) + (double)weight_offset;
      collgen__ref_store(dtype, normed, r * cols + c, (float)(x * scale * w));
    }
  }
}

int collgen__ref_close(collgen_dtype_t dtype, double got, double exact) {
  int bits = dtype == COLLGEN_DTYPE_BF16 ? 7 : dtype == COLLGEN_DTYPE_F16 ? 10 : 23;
  double mag = fabs(exact);
  double ulp = mag > 0 ? ldexp(1.0, ilogb(mag) - bits) : 0;
  double tol = (dtype == COLLGEN_DTYPE_F32 ? 64 : 1) * ulp + 1e-7;
  return fabs(got - exact) <= tol;
}
