/*
** reference.c -- CPU reference math for collgen's ops (see reference.h).
** Conversions come from the library (dtype_convert.h); an unknown dtype is
** a bug in the caller and aborts here, never a fall-through to a default.
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalog.h"
#include "dtype_convert.h"
#include "reference.h"

static _Noreturn void unknown_dtype(const char *fn, collgen_dtype_t dtype) {
  fprintf(stderr, "%s: unknown dtype %d\n", fn, (int)dtype);
  abort();
}

/* Element size of a dtype the catalog knows; aborts otherwise. */
static size_t elem_bytes(const char *fn, collgen_dtype_t dtype) {
  if (!collgen__dtype_find(dtype)) unknown_dtype(fn, dtype);
  return (size_t)collgen__dtype_bytes(dtype);
}

float collgen__ref_load(collgen_dtype_t dtype, const void *p, int64_t i) {
  switch (dtype) {
  case COLLGEN_DTYPE_BF16: return collgen__bf16_to_f32(((const uint16_t *)p)[i]);
  case COLLGEN_DTYPE_F16: return collgen__f16_to_f32(((const uint16_t *)p)[i]);
  case COLLGEN_DTYPE_F32: return ((const float *)p)[i];
  }
  unknown_dtype(__func__, dtype);
}

void collgen__ref_store(collgen_dtype_t dtype, void *p, int64_t i, float f) {
  switch (dtype) {
  case COLLGEN_DTYPE_BF16: ((uint16_t *)p)[i] = collgen__f32_to_bf16(f); return;
  case COLLGEN_DTYPE_F16: ((uint16_t *)p)[i] = collgen__f32_to_f16(f); return;
  case COLLGEN_DTYPE_F32: ((float *)p)[i] = f; return;
  }
  unknown_dtype(__func__, dtype);
}

void collgen__ref_fill_random(collgen_dtype_t dtype, void *p, int64_t n, uint64_t *state) {
  elem_bytes(__func__, dtype);
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
  elem_bytes(__func__, dtype);
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

/* normed = round(x * scale * (gamma + weight_offset)) for `rows` rows of
** x (residual), in double. */
static void norm_rows(collgen_dtype_t dtype, int64_t rows, int64_t cols, const void *residual,
                      const void *gamma, float eps, float weight_offset, void *normed) {
  for (int64_t r = 0; r < rows; ++r) {
    double scale = collgen__ref_rmsnorm_scale(dtype, residual, r, cols, eps);
    for (int64_t c = 0; c < cols; ++c) {
      double x = collgen__ref_load(dtype, residual, r * cols + c);
      double w = (double)collgen__ref_load(dtype, gamma, c) + (double)weight_offset;
      collgen__ref_store(dtype, normed, r * cols + c, (float)(x * scale * w));
    }
  }
}

void collgen__ref_allgather_rmsnorm(collgen_dtype_t dtype, int group,
                                    const int64_t *rows, int64_t cols,
                                    const void *const *in, const void *gamma,
                                    float eps, float weight_offset,
                                    void *normed, void *residual) {
  size_t esize = elem_bytes(__func__, dtype);
  int64_t row = 0;
  for (int g = 0; g < group; ++g) {
    memcpy((char *)residual + (size_t)(row * cols) * esize, in[g],
           (size_t)(rows[g] * cols) * esize);
    row += rows[g];
  }
  norm_rows(dtype, row, cols, residual, gamma, eps, weight_offset, normed);
}

void collgen__ref_allreduce_residual_rmsnorm(collgen_dtype_t dtype, int group, int64_t rows,
                                             int64_t cols, const void *const *x,
                                             const void *residual_in, const void *gamma,
                                             float eps, float weight_offset, void *normed,
                                             void *residual_out) {
  elem_bytes(__func__, dtype);
  for (int64_t i = 0; i < rows * cols; ++i) {
    volatile float acc = collgen__ref_load(dtype, x[0], i); /* no excess precision */
    for (int g = 1; g < group; ++g) acc = acc + collgen__ref_load(dtype, x[g], i);
    acc = acc + collgen__ref_load(dtype, residual_in, i);
    collgen__ref_store(dtype, residual_out, i, acc);
  }
  norm_rows(dtype, rows, cols, residual_out, gamma, eps, weight_offset, normed);
}

int collgen__ref_close(collgen_dtype_t dtype, double got, double exact) {
  int bits = 0, ulps = 1; /* stored mantissa bits; tolerance in output ulps */
  switch (dtype) {
  case COLLGEN_DTYPE_BF16: bits = 7; break;
  case COLLGEN_DTYPE_F16: bits = 10; break;
  case COLLGEN_DTYPE_F32: bits = 23; ulps = 64; break;
  }
  if (bits == 0) unknown_dtype(__func__, dtype);
  double mag = fabs(exact);
  double ulp = mag > 0 ? ldexp(1.0, ilogb(mag) - bits) : 0;
  return fabs(got - exact) <= ulps * ulp + 1e-7;
}
