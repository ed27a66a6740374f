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

/* Fills n elements with uniform values in [-1, 1) rounded to dtype, drawn
** from the xorshift64 state *state (must not be 0); the caller owns the state,
** so it decides between fresh and reproducible data. */
void collgen__ref_fill_random(collgen_dtype_t dtype, void *p, int64_t n, uint64_t *state);

/* out[i] = round(sum over g = 0..group-1 in order of f32(in[g][i])): the
** exact order and rounding of the kernels, so results match bit for bit. */
void collgen__ref_allreduce(collgen_dtype_t dtype, int64_t n, int group,
                            const void *const *in, void *out);

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

/* 1 / sqrt(mean(x^2) + eps) of row r of a [rows, cols] tensor, in double. */
double collgen__ref_rmsnorm_scale(collgen_dtype_t dtype, const void *residual,
                                  int64_t r, int64_t cols, float eps);
/* 1 if `got` (as stored in dtype) is within the kernels' error bound of
** the exact value: one output ulp for bf16/f16 (f32 math then one
** rounding), 64 ulps for f32 (f32 accumulation over the row). */
int collgen__ref_close(collgen_dtype_t dtype, double got, double exact);
#endif
