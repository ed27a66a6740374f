/*
** dtype_convert.c -- IEEE 16-bit float conversions and rounding to a dtype
** (see dtype_convert.h).
*/
#include <math.h>
#include <string.h>

#include "dtype_convert.h"

static uint32_t bits_of(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float float_of(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

uint16_t collgen__f32_to_bf16(float f) {
  uint32_t u = bits_of(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

float collgen__bf16_to_f32(uint16_t h) { return float_of((uint32_t)h << 16); }

uint16_t collgen__f32_to_f16(float f) {
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

float collgen__f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0x1f) return float_of(sign | 0x7f800000u | (m << 13));
  if (e == 0) {
    float v = (float)m * 5.9604644775390625e-8f; /* m * 2^-24, exact */
    return sign ? -v : v;
  }
  return float_of(sign | ((e + 112u) << 23) | (m << 13));
}

uint8_t collgen__f32_to_e4m3_sat(float f) {
  const uint8_t sign = (uint8_t)((bits_of(f) >> 24) & 0x80u);
  if (isnan(f)) return sign | 0x7fu;
  const float a = fabsf(f);
  if (a >= 448.0f) return sign | 0x7eu;                /* saturate (inf too) */
  if (a < 0.015625f) {                                 /* below 2^-6: subnormal */
    /* units of 2^-9; nearbyintf rounds half to even; 8 units = code 0x08 */
    return sign | (uint8_t)nearbyintf(a * 512.0f);
  }
  int e;
  (void)frexpf(a, &e);                                 /* a = [0.5, 1) * 2^e */
  e -= 1;                                              /* a = [1, 2) * 2^e, e in -6..8 */
  float q = nearbyintf(ldexpf(a, 3 - e));              /* 8..16: 1.mmm in eighths, exact */
  if (q == 16.0f) {
    q = 8.0f;
    ++e;
  }
  return sign | (uint8_t)(((e + 7) << 3) | ((int)q - 8)); /* 448 = 0x7e at most */
}

float collgen__e4m3_to_f32(uint8_t q) {
  const int e = (q >> 3) & 0xf, m = q & 7;
  float v;
  if (e == 0xf && m == 7) v = NAN;
  else if (e == 0) v = ldexpf((float)m, -9);
  else v = ldexpf((float)(8 + m), e - 10);
  return (q & 0x80u) ? -v : v;
}

float collgen__dtype_round(collgen_dtype_t dtype, float f) {
  switch (dtype) {
  case COLLGEN_DTYPE_BF16: return collgen__bf16_to_f32(collgen__f32_to_bf16(f));
  case COLLGEN_DTYPE_F16: return collgen__f16_to_f32(collgen__f32_to_f16(f));
  case COLLGEN_DTYPE_F32: return f;
  default: break; /* copy-only dtypes have no rounding: nothing computes in them */
  }
  return NAN; /* not a dtype: visible, never a silent default */
}
