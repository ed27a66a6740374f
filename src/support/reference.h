/*
** reference.h -- CPU reference of every op's math, for the tests, `collgen
** demo` and collgen-bench (test support, not part of libcollgen). Every
** function aborts with a message on a dtype the catalog does not know.
*/
#ifndef COLLGEN_REFERENCE_H
#define COLLGEN_REFERENCE_H
#include <stdint.h>

#include "collgen.h"

/* Element i of a buffer of `dtype`, as f32. */
float collgen__ref_load(collgen_dtype_t dtype, const void *p, int64_t i);
/* Stores f rounded once to `dtype` at element i. */
void collgen__ref_store(collgen_dtype_t dtype, void *p, int64_t i, float f);

/* Fills n elements with uniform values in [-1, 1) rounded to dtype (any
** bit pattern for a copy-only dtype), drawn
** from the xorshift64 state *state (must not be 0); the caller owns the state,
** so it decides between fresh and reproducible data. */
void collgen__ref_fill_random(collgen_dtype_t dtype, void *p, int64_t n, uint64_t *state);

/* out[i] = round(sum over g = 0..group-1 in order of f32(in[g][i])): the
** exact order and rounding of the kernels, so results match bit for bit. */
void collgen__ref_allreduce(collgen_dtype_t dtype, int64_t n, int group,
                            const void *const *in, void *out);

/* Group rank `rank`'s part of reduce_scatter_sum: every in[g] holds
** [rows, cols]; out ([count, cols]) = the rows of the rank's chunk
** (collgen__scatter_chunk) summed as collgen__ref_allreduce sums them. */
void collgen__ref_reduce_scatter_sum(collgen_dtype_t dtype, int64_t rows, int64_t cols,
                                     int group, int rank, const void *const *in, void *out);

/* Gathers `group` shards (rows[g] x cols) into residual and writes
** normed = round(x * rsqrt(mean(x^2) + eps) * (gamma + weight_offset)),
** accumulating in double (the tests bound the kernels' f32 error). */
void collgen__ref_allgather_rmsnorm(collgen_dtype_t dtype, int group,
                                    const int64_t *rows, int64_t cols,
                                    const void *const *in, const void *gamma,
                                    float eps, float weight_offset,
                                    void *normed, void *residual);

/* Per element i of the [rows, cols] tensors, with f32 sums rounded once:
**   residual_out[i] = round(x[0][i] + ... + x[group-1][i] + residual_in[i])
** added in exactly that order (the kernels' order, so it matches bit for
** bit), then normed from the rounded residual_out as in
** collgen__ref_allgather_rmsnorm (in double; the tests bound the kernels'
** f32 error). residual_out may be residual_in (in place). */
void collgen__ref_allreduce_residual_rmsnorm(collgen_dtype_t dtype, int group, int64_t rows,
                                             int64_t cols, const void *const *x,
                                             const void *residual_in, const void *gamma,
                                             float eps, float weight_offset, void *normed,
                                             void *residual_out);

/* Group rank i's outputs of reduce_scatter_rmsnorm: x[g] are the group's
** [rows, cols] inputs; chunk i of the rows (collgen__scatter_chunk: count
** rows from start) gets, in the order of
** collgen__ref_allreduce_residual_rmsnorm (bit for bit),
**   residual_out = round(x[0] + ... + x[group-1] + residual_in)
** (no residual_in term when it is NULL) as [count, cols], then normed from
** it in double (skipped when normed is NULL: FP8 checks use
** collgen__ref_fp8_row_ok on residual_out). residual_out may be residual_in. */
void collgen__ref_reduce_scatter_rmsnorm(collgen_dtype_t dtype, int group, int i, int64_t rows,
                                         int64_t cols, const void *const *x,
                                         const void *residual_in, const void *gamma, float eps,
                                         float weight_offset, void *normed, void *residual_out);

/* The FP8 output of allreduce_residual_rmsnorm
** (collgen_allreduce_residual_rmsnorm_fp8): residual_out as
** collgen__ref_allreduce_residual_rmsnorm, then each row of normed_f32
** (collgen__ref_normed_f32_row) quantized by collgen__ref_e4m3_row into q
** (rows * cols codes) and, for COLLGEN_FP8_DYNAMIC, row_scales (rows
** floats; unused, may be NULL, for COLLGEN_FP8_STATIC). */
void collgen__ref_allreduce_residual_rmsnorm_fp8(
    collgen_dtype_t dtype, int group, int64_t rows, int64_t cols, const void *const *x,
    const void *residual_in, const void *gamma, float eps, float weight_offset,
    collgen_fp8_mode_t mode, float static_scale, uint8_t *q, float *row_scales,
    void *residual_out);

/* y[c] = normed_f32 of row r: x * rsqrt(mean(x^2) + eps) * (gamma + weight_offset)
** with x the row of `residual`, computed in double and rounded once to f32
** (the value the plain ops round to their dtype). */
void collgen__ref_normed_f32_row(collgen_dtype_t dtype, const void *residual, const void *gamma,
                                 int64_t r, int64_t cols, float eps, float weight_offset,
                                 float *y);

/* Quantizes one row of normed_f32 values y to e4m3 codes q as the kernels
** do, with f32 divisions rounded to nearest and e4m3 rounded to nearest
** even, saturating at +-448: COLLGEN_FP8_STATIC: q = e4m3(y / static_scale);
** COLLGEN_FP8_DYNAMIC: *scale = max|y| / 448 (NaN ignored) and
** q = e4m3(y / *scale), or 0x00 everywhere when *scale is 0. Aborts on
** another mode. Exact: given the kernels' own y it must give their bytes. */
void collgen__ref_e4m3_row(collgen_fp8_mode_t mode, float static_scale, const float *y,
                           int64_t cols, uint8_t *q, float *scale);

/* How far the kernels' ratio y / scale may be from the reference's,
** relatively, when q is compared (collgen__ref_fp8_row_ok): the kernels'
** normed_f32 differs from the reference's (double, then rounded) by their
** f32 sum order and rsqrtf, a few f32 ulps (2^-18 or less); 2^-14 leaves a
** margin of 16 and still checks all but about 0.15% of codes exactly
** (e4m3 codes are 2^-4 to 2^-3 apart, relatively). */
#define COLLGEN_REF_FP8_SLACK 0x1p-14

/* Checks row `row` of a kernel's FP8 output, codes q[0..cols-1] and (for
** COLLGEN_FP8_DYNAMIC) its scale, against the reference computed from the
** kernel's residual_out (bit for bit the reference's, checked separately):
**   - the scale within a relative COLLGEN_REF_FP8_SLACK / 4 of the
**     reference's max|y| / 448, and exactly 0 when that is 0 (then every
**     code must be 0x00);
**   - each code equal to e4m3(v) for v = y / divisor in the reference's
**     exact arithmetic, or, when v lies within a relative
**     COLLGEN_REF_FP8_SLACK of an e4m3 rounding boundary, to the code on
**     the boundary's other side.
** Returns 1 when the row passes; else 0 with *bad_col the first failing
** column (-1: the scale). */
int collgen__ref_fp8_row_ok(collgen_dtype_t dtype, const void *residual_out, const void *gamma,
                            int64_t row, int64_t cols, float eps, float weight_offset,
                            collgen_fp8_mode_t mode, float static_scale, const uint8_t *q,
                            float scale, int64_t *bad_col);

/* broadcast: out[g] = the bytes of in[root] (n elements of dtype, any
** dtype of the catalog) for every g = 0..group-1; out[root] may be
** in[root] (in place). The other ranks' inputs are never read. */
void collgen__ref_broadcast(collgen_dtype_t dtype, int64_t n, int group, int root,
                            const void *const *in, void *const *out);

/* 1 / sqrt(mean(x^2) + eps) of row r of a [rows, cols] tensor, in double. */
double collgen__ref_rmsnorm_scale(collgen_dtype_t dtype, const void *residual,
                                  int64_t r, int64_t cols, float eps);
/* 1 if `got` (as stored in dtype) is within the kernels' error bound of
** the exact value: one output ulp for bf16/f16 (f32 math then one
** rounding), 64 ulps for f32 (f32 accumulation over the row); equal for
** a copy-only dtype. */
int collgen__ref_close(collgen_dtype_t dtype, double got, double exact);
/* scatter: group rank i's part, out = rows chunk i (rows / group rows,
** one more for the first rows % group ranks, in group-rank order) of `in`, the root's input of rows x row_elems
** elements of any dtype, bit for bit. */
void collgen__ref_scatter(collgen_dtype_t dtype, int64_t rows, int64_t row_elems, int group,
                          int i, const void *in, void *out);

/* all_gather: the `group` shards in[g] (elems[g] elements of any dtype,
** copy-only ones too) concatenated in group order into out, bit for bit.
** A shard may already sit at its offset in out (in place). */
void collgen__ref_all_gather(collgen_dtype_t dtype, int group, const int64_t *elems,
                             const void *const *in, void *out);
#endif
