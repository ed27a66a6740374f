/*
** reference.c -- CPU reference math for collgen's ops (see reference.h).
** Conversions come from the library (dtype_convert.h); an unknown dtype is
** a bug in the caller and aborts here, never a fall-through to a default.
** A copy-only dtype (no accumulate type) is only moved: fill_random draws
** its bits and close compares them exactly; the reductions and the f32
** load/store refuse it (abort), as the ops that compute do.
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalog.h"
#include "dtype_convert.h"
#include "reference.h"
#include "shape.h"

static _Noreturn void unknown_dtype(const char *fn, collgen_dtype_t dtype) {
  fprintf(stderr, "%s: unknown dtype %d\n", fn, (int)dtype);
  abort();
}

/* Element size of a dtype the catalog knows; aborts otherwise. */
static size_t elem_bytes(const char *fn, collgen_dtype_t dtype) {
  if (!collgen__dtype_find(dtype)) unknown_dtype(fn, dtype);
  return (size_t)collgen__dtype_bytes(dtype);
}

/* Element size of a dtype the ops compute on; aborts for a copy-only or
** unknown one. */
static size_t reduce_bytes(const char *fn, collgen_dtype_t dtype) {
  size_t n = elem_bytes(fn, dtype);
  if (!collgen__dtype_reduces(dtype)) {
    fprintf(stderr, "%s: %s is a copy-only dtype: nothing computes on it\n", fn,
            collgen__dtype_name(dtype));
    abort();
  }
  return n;
}

float collgen__ref_load(collgen_dtype_t dtype, const void *p, int64_t i) {
  switch (dtype) {
  case COLLGEN_DTYPE_BF16: return collgen__bf16_to_f32(((const uint16_t *)p)[i]);
  case COLLGEN_DTYPE_F16: return collgen__f16_to_f32(((const uint16_t *)p)[i]);
  case COLLGEN_DTYPE_F32: return ((const float *)p)[i];
  default: break;
  }
  reduce_bytes(__func__, dtype);
  unknown_dtype(__func__, dtype);
}

void collgen__ref_store(collgen_dtype_t dtype, void *p, int64_t i, float f) {
  switch (dtype) {
  case COLLGEN_DTYPE_BF16: ((uint16_t *)p)[i] = collgen__f32_to_bf16(f); return;
  case COLLGEN_DTYPE_F16: ((uint16_t *)p)[i] = collgen__f32_to_f16(f); return;
  case COLLGEN_DTYPE_F32: ((float *)p)[i] = f; return;
  default: break;
  }
  reduce_bytes(__func__, dtype);
  unknown_dtype(__func__, dtype);
}

void collgen__ref_fill_random(collgen_dtype_t dtype, void *p, int64_t n, uint64_t *state) {
  const size_t esize = elem_bytes(__func__, dtype);
  const int bits = !collgen__dtype_reduces(dtype);
  uint64_t s = *state;
  for (int64_t i = 0; i < n; ++i) {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    if (bits) { /* any bit pattern: the low esize bytes of the state */
      uint8_t *e = (uint8_t *)p + (size_t)i * esize;
      for (size_t b = 0; b < esize; ++b) e[b] = (uint8_t)(s >> (8 * b));
    } else {
      collgen__ref_store(dtype, p, i, (float)((s >> 40) & 0xffffff) / 16777216.0f * 2.0f - 1.0f);
    }
  }
  *state = s;
}

void collgen__ref_allreduce(collgen_dtype_t dtype, int64_t n, int group,
                            const void *const *in, void *out) {
  reduce_bytes(__func__, dtype);
  for (int64_t i = 0; i < n; ++i) {
    volatile float acc = collgen__ref_load(dtype, in[0], i); /* no excess precision */
    for (int g = 1; g < group; ++g) acc = acc + collgen__ref_load(dtype, in[g], i);
    collgen__ref_store(dtype, out, i, acc);
  }
}

void collgen__ref_reduce_scatter_sum(collgen_dtype_t dtype, int64_t rows, int64_t cols,
                                     int group, int rank, const void *const *in, void *out) {
  const int64_t esize = reduce_bytes(__func__, dtype);
  int64_t start = 0, count = 0;
  collgen__scatter_chunk(rows, group, rank, &start, &count);
  const void *chunk[COLLGEN_MAX_DEVICES];
  for (int g = 0; g < group; ++g) chunk[g] = (const char *)in[g] + start * cols * esize;
  collgen__ref_allreduce(dtype, count * cols, group, chunk, out);
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

void collgen__ref_normed_f32_row(collgen_dtype_t dtype, const void *residual, const void *gamma,
                                 int64_t r, int64_t cols, float eps, float weight_offset,
                                 float *y) {
  double scale = collgen__ref_rmsnorm_scale(dtype, residual, r, cols, eps);
  for (int64_t c = 0; c < cols; ++c) {
    double x = collgen__ref_load(dtype, residual, r * cols + c);
    double w = (double)collgen__ref_load(dtype, gamma, c) + (double)weight_offset;
    y[c] = (float)(x * scale * w);
  }
}

/* A row's worth of floats, or an abort (test support: no recovery). */
static float *row_buffer(const char *fn, int64_t cols) {
  float *y = malloc((size_t)(cols > 0 ? cols : 1) * sizeof *y);
  if (!y) {
    fprintf(stderr, "%s: out of memory\n", fn);
    abort();
  }
  return y;
}

/* normed = round(x * scale * (gamma + weight_offset)) for `rows` rows of
** x (residual), in double. */
static void norm_rows(collgen_dtype_t dtype, int64_t rows, int64_t cols, const void *residual,
                      const void *gamma, float eps, float weight_offset, void *normed) {
  float *y = row_buffer(__func__, cols);
  for (int64_t r = 0; r < rows; ++r) {
    collgen__ref_normed_f32_row(dtype, residual, gamma, r, cols, eps, weight_offset, y);
    for (int64_t c = 0; c < cols; ++c) collgen__ref_store(dtype, normed, r * cols + c, y[c]);
  }
  free(y);
}

void collgen__ref_allgather_rmsnorm(collgen_dtype_t dtype, int group,
                                    const int64_t *rows, int64_t cols,
                                    const void *const *in, const void *gamma,
                                    float eps, float weight_offset,
                                    void *normed, void *residual) {
  size_t esize = reduce_bytes(__func__, dtype);
  int64_t row = 0;
  for (int g = 0; g < group; ++g) {
    memcpy((char *)residual + (size_t)(row * cols) * esize, in[g],
           (size_t)(rows[g] * cols) * esize);
    row += rows[g];
  }
  norm_rows(dtype, row, cols, residual, gamma, eps, weight_offset, normed);
}

/* residual_out[i] = round(x[0][i] + ... + x[group-1][i] + residual_in[i])
** (no residual_in term when it is NULL). */
static void add_residual(collgen_dtype_t dtype, int group, int64_t n, const void *const *x,
                         const void *residual_in, void *residual_out) {
  for (int64_t i = 0; i < n; ++i) {
    volatile float acc = collgen__ref_load(dtype, x[0], i); /* no excess precision */
    for (int g = 1; g < group; ++g) acc = acc + collgen__ref_load(dtype, x[g], i);
    if (residual_in) acc = acc + collgen__ref_load(dtype, residual_in, i);
    collgen__ref_store(dtype, residual_out, i, acc);
  }
}

void collgen__ref_allreduce_residual_rmsnorm(collgen_dtype_t dtype, int group, int64_t rows,
                                             int64_t cols, const void *const *x,
                                             const void *residual_in, const void *gamma,
                                             float eps, float weight_offset, void *normed,
                                             void *residual_out) {
  reduce_bytes(__func__, dtype);
  add_residual(dtype, group, rows * cols, x, residual_in, residual_out);
  norm_rows(dtype, rows, cols, residual_out, gamma, eps, weight_offset, normed);
}

void collgen__ref_reduce_scatter_rmsnorm(collgen_dtype_t dtype, int group, int i, int64_t rows,
                                         int64_t cols, const void *const *x,
                                         const void *residual_in, const void *gamma, float eps,
                                         float weight_offset, void *normed, void *residual_out) {
  const size_t esize = reduce_bytes(__func__, dtype);
  int64_t start = 0, count = 0;
  collgen__scatter_chunk(rows, group, i, &start, &count);
  const void *chunk[COLLGEN_MAX_DEVICES];
  for (int g = 0; g < group; ++g) chunk[g] = (const char *)x[g] + (size_t)(start * cols) * esize;
  add_residual(dtype, group, count * cols, chunk, residual_in, residual_out);
  if (normed) norm_rows(dtype, count, cols, residual_out, gamma, eps, weight_offset, normed);
}

/* The dynamic scale of a row: max |y| / 448 in f32, NaN ignored (fmaxf). */
static float row_scale(const float *y, int64_t cols) {
  float m = 0.0f;
  for (int64_t c = 0; c < cols; ++c) m = fmaxf(m, fabsf(y[c]));
  return m / 448.0f;
}

/* The divisor of a row's values in `mode`; aborts on a mode without e4m3. */
static float divisor_of(const char *fn, collgen_fp8_mode_t mode, float static_scale,
                        const float *y, int64_t cols) {
  if (mode == COLLGEN_FP8_DYNAMIC) return row_scale(y, cols);
  if (mode == COLLGEN_FP8_STATIC) return static_scale;
  fprintf(stderr, "%s: FP8 mode %d has no e4m3 output\n", fn, (int)mode);
  abort();
}

void collgen__ref_e4m3_row(collgen_fp8_mode_t mode, float static_scale, const float *y,
                           int64_t cols, uint8_t *q, float *scale) {
  const float divisor = divisor_of(__func__, mode, static_scale, y, cols);
  if (mode == COLLGEN_FP8_DYNAMIC) *scale = divisor;
  for (int64_t c = 0; c < cols; ++c) {
    volatile float v = divisor != 0.0f ? y[c] / divisor : 0.0f; /* f32, round to nearest */
    q[c] = collgen__f32_to_e4m3_sat(v);
  }
}

void collgen__ref_allreduce_residual_rmsnorm_fp8(
    collgen_dtype_t dtype, int group, int64_t rows, int64_t cols, const void *const *x,
    const void *residual_in, const void *gamma, float eps, float weight_offset,
    collgen_fp8_mode_t mode, float static_scale, uint8_t *q, float *row_scales,
    void *residual_out) {
  reduce_bytes(__func__, dtype);
  add_residual(dtype, group, rows * cols, x, residual_in, residual_out);
  float *y = row_buffer(__func__, cols), unused = 0.0f;
  for (int64_t r = 0; r < rows; ++r) {
    collgen__ref_normed_f32_row(dtype, residual_out, gamma, r, cols, eps, weight_offset, y);
    collgen__ref_e4m3_row(mode, static_scale, y, cols, q + r * cols,
                          mode == COLLGEN_FP8_DYNAMIC ? &row_scales[r] : &unused);
  }
  free(y);
}

/* The codes a kernel may write for the reference ratio v: those of v
** moved by COLLGEN_REF_FP8_SLACK either way (one code unless v is that
** close to a rounding boundary). */
static int e4m3_close(uint8_t got, double v) {
  return got == collgen__f32_to_e4m3_sat((float)(v * (1.0 - COLLGEN_REF_FP8_SLACK))) ||
         got == collgen__f32_to_e4m3_sat((float)(v * (1.0 + COLLGEN_REF_FP8_SLACK)));
}

int collgen__ref_fp8_row_ok(collgen_dtype_t dtype, const void *residual_out, const void *gamma,
                            int64_t row, int64_t cols, float eps, float weight_offset,
                            collgen_fp8_mode_t mode, float static_scale, const uint8_t *q,
                            float scale, int64_t *bad_col) {
  float *y = row_buffer(__func__, cols);
  collgen__ref_normed_f32_row(dtype, residual_out, gamma, row, cols, eps, weight_offset, y);
  const float want = divisor_of(__func__, mode, static_scale, y, cols);
  int ok = 1;
  *bad_col = -1;
  if (mode == COLLGEN_FP8_DYNAMIC)
    ok = want == 0.0f ? scale == 0.0f
                      : fabs((double)scale - want) <= COLLGEN_REF_FP8_SLACK / 4 * want;
  for (int64_t c = 0; ok && c < cols; ++c) {
    ok = want == 0.0f ? q[c] == 0 : e4m3_close(q[c], (double)y[c] / want);
    if (!ok) *bad_col = c;
  }
  free(y);
  return ok;
}

int collgen__ref_close(collgen_dtype_t dtype, double got, double exact) {
  int bits = 0, ulps = 1; /* stored mantissa bits; tolerance in output ulps */
  switch (dtype) {
  case COLLGEN_DTYPE_BF16: bits = 7; break;
  case COLLGEN_DTYPE_F16: bits = 10; break;
  case COLLGEN_DTYPE_F32: bits = 23; ulps = 64; break;
  default: /* copy-only: moved bits, compared exactly */
    if (collgen__dtype_find(dtype) && !collgen__dtype_reduces(dtype)) return got == exact;
  }
  if (bits == 0) unknown_dtype(__func__, dtype);
  double mag = fabs(exact);
  double ulp = mag > 0 ? ldexp(1.0, ilogb(mag) - bits) : 0;
  return fabs(got - exact) <= ulps * ulp + 1e-7;
}

void collgen__ref_broadcast(collgen_dtype_t dtype, int64_t n, int group, int root,
                            const void *const *in, void *const *out) {
  const size_t bytes = (size_t)n * elem_bytes("collgen__ref_broadcast", dtype);
  for (int g = 0; g < group; ++g)
    if (out[g] != in[root]) memmove(out[g], in[root], bytes);
}

void collgen__ref_scatter(collgen_dtype_t dtype, int64_t rows, int64_t row_elems, int group,
                          int i, const void *in, void *out) {
  const size_t row_bytes = (size_t)row_elems * elem_bytes(__func__, dtype);
  /* the chunk rule written out here, not the runtime's function */
  const int64_t base = rows / group, extra = rows % group;
  const int64_t count = base + (i < extra), start = i * base + (i < extra ? i : extra);
  if (count) memmove(out, (const char *)in + (size_t)start * row_bytes, (size_t)count * row_bytes);
}

void collgen__ref_all_gather(collgen_dtype_t dtype, int group, const int64_t *elems,
                             const void *const *in, void *out) {
  const size_t esize = elem_bytes(__func__, dtype);
  size_t at = 0;
  for (int g = 0; g < group; ++g) {
    if (elems[g]) memmove((char *)out + at, in[g], (size_t)elems[g] * esize);
    at += (size_t)elems[g] * esize;
  }
}
