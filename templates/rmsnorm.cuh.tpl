
// ---- RMSNorm rows (templates/rmsnorm.cuh.tpl) ----
// What both RMSNorm kernel families share: the row constants, the sum of
// squares over a block in a fixed order, one vector of the normed output
// (in the dtype, or float8 e4m3 for allreduce_residual_rmsnorm's FP8
// output) and, for the LL kernels, one 16-byte vector sent as two LL lines.

% -- MIN_BLOCKS, the second argument of the kernels' __launch_bounds__.
% -- A group-of-one ("local") kernel keeps at least 1024 threads per SM
% -- resident (so at most 64 registers a thread) while its row takes at
% -- most 48 of them (x, residual_in and gamma: 3 * ITEMS vectors, plus an
% -- f32 value per scalar): rows of other blocks load while one block sums
% -- its squares. Larger rows take 512 threads (128 registers; 64 spilled
% -- 892 bytes at 8 f32 vectors, 24 at 16 scalars), and so do FP8 epilogues
% -- (at 64 registers 4 bf16 vectors spilled 64 bytes, 160 with dynamic
% -- scaling). The other kernels ask for one block per SM.
% do
%   local words = VEC > 1 and VEC * esize // 4 or 1  -- registers per vector
%   local row_registers = ITEMS * (3 * words + (VEC > 1 and 0 or 1))
%   local local_threads = (row_registers <= 48 and FP8 == "none") and 1024 or 512
%   MIN_BLOCKS = algo == "local" and math.max(1, local_threads // BLOCK) or 1
% end
#define COLS ${COLS}ull            // columns per row
#define ROW_VECS ${COLS // VEC}ull // vector accesses per row
#define WARPS ${BLOCK // 32}

struct add_op {
  __device__ __forceinline__ float operator()(float a, float b) const { return a + b; }
};
% if FP8 == "dynamic" then
struct max_op {  // NaN loses to a number (fmaxf)
  __device__ __forceinline__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
% end

// Reduces v over the block with op, in a fixed order (same bits on every
// rank).
template <class Op> __device__ __forceinline__ float block_reduce(float v, Op op) {
  __shared__ float warp_vals[WARPS];
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, off));
  if ((threadIdx.x & 31) == 0) warp_vals[threadIdx.x >> 5] = v;
  __syncthreads();
  float total = warp_vals[0];
#pragma unroll
  for (int w = 1; w < WARPS; ++w) total = op(total, warp_vals[w]);
  __syncthreads();  // warp_vals may be reused by the next row
  return total;
}

__device__ __forceinline__ float block_sum(float v) { return block_reduce(v, add_op()); }

// The normed values of vector c before rounding (y may be x): from the
// row's f32 values x, scale = rsqrt(mean(x^2) + eps) and gamma vector c.
__device__ __forceinline__ void normed_f32(const collgen_kparams &p, const float *x, float scale,
                                           vec_t gamma, float *y) {
  float w[VEC];
  unpack(gamma, w);
#pragma unroll
  for (int k = 0; k < VEC; ++k) y[k] = (x[k] * scale) * (w[k] + p.weight_offset);
}

// Writes normed vector c of a row from its f32 values and gamma vector c.
__device__ __forceinline__ void write_normed(const collgen_kparams &p, unsigned long long row,
                                             unsigned long long c, const float *x, float scale,
                                             vec_t gamma) {
  float y[VEC];
  normed_f32(p, x, scale, gamma, y);
  store_vec(p.normed, row * ROW_VECS + c, pack(y));
}
% if FP8 ~= "none" then

// ---- normed as float8 e4m3, ${FP8} scaling ----
% if FP8 == "dynamic" then
// q = e4m3(y / divisor) with y = normed_f32 and the divisor row_scale():
// max|y| / 448 per row (a row whose scale is 0 gets code 0).
% else
// q = e4m3(y / divisor) with y = normed_f32 and the divisor static_scale.
% end
// Each quotient is the IEEE round-to-nearest y / divisor (what __fdiv_rn
// gives) and the conversion rounds to nearest even and saturates at +-448,
// so the CPU reference gets the same bytes from the same y.
//
// The divisor is one value per row, so the division is a reciprocal per row
// r = RN(1 / divisor) and five instructions per element: q0 = RN(y * r),
// then two FMA residual steps q' = q + r * (y - q * divisor). The first
// brings q0 (up to about 1.5 units off) within one unit of y / divisor; then
// the residual is a float exactly and the second step gives the correctly
// rounded quotient (Markstein's theorem: r within half a unit of
// 1 / divisor, q within one unit, exact residual). The residual is exact
// only away from the bottom of the f32 range, so the fast path is taken
// only for divisors in [2^-64, 2^64], and only for |q0| in (2^-20, 2^13):
// below, the code is a signed zero; above, +-448 or NaN, from q0 alone.
// Then |y| >= 2^-84 and the residual, a multiple of ulp(q) * ulp(divisor)
// >= 2^-43 * 2^-87, has no bit below 2^-130, above f32's last bit 2^-149
// (with 2^-100 as the bound, pairs like y = 2^-108, divisor = 2^-100 came
// out one unit off). tests/test_fp8_divide.c checks all of this on the CPU.
struct e4m3_divider {
  float divisor, r;  // r = 1 / divisor, rounded to nearest
  bool fast;         // divisor in [2^-64, 2^64]: the reciprocal path is exact
};

__device__ __forceinline__ e4m3_divider make_divider(float divisor) {
  const float a = fabsf(divisor);
  return {divisor, __frcp_rn(divisor), a >= 0x1p-64f && a <= 0x1p64f};
}

// RN(y / d.divisor), bit for bit.
__device__ __forceinline__ float divide(const e4m3_divider &d, float y) {
  if (!d.fast) return __fdiv_rn(y, d.divisor);
  const float q0 = __fmul_rn(y, d.r), a = fabsf(q0);
  if (!(a > 0x1p-20f && a < 0x1p13f)) return q0;
  const float q1 = __fmaf_rn(__fmaf_rn(-q0, d.divisor, y), d.r, q0);
  return __fmaf_rn(__fmaf_rn(-q1, d.divisor, y), d.r, q1);
}

// Two codes: e4m3(lo) in the low byte, e4m3(hi) in the high byte (sm_89+).
__device__ __forceinline__ unsigned int e4m3x2(float lo, float hi) {
  unsigned short d;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(d) : "f"(hi), "f"(lo));
  return d;
}

// Writes the VEC codes of y / d.divisor as vector c of the row (VEC bytes).
%   if FP8 == "dynamic" then
// A row whose divisor is 0 gets code 0.
%   end
__device__ __forceinline__ void store_e4m3(const collgen_kparams &p, unsigned long long row,
                                           unsigned long long c, const float *y,
                                           const e4m3_divider &d) {
  float q[VEC];
#pragma unroll
%   if FP8 == "dynamic" then
  for (int k = 0; k < VEC; ++k) q[k] = d.divisor != 0.0f ? divide(d, y[k]) : 0.0f;
%   else
  for (int k = 0; k < VEC; ++k) q[k] = divide(d, y[k]);
%   end
  unsigned char *out = (unsigned char *)p.normed + row * COLS + c * VEC;
%   if VEC == 1 then
  *out = (unsigned char)e4m3x2(q[0], 0.0f);
%   elseif VEC == 4 then
  *(unsigned int *)out = e4m3x2(q[0], q[1]) | e4m3x2(q[2], q[3]) << 16;
%   elseif VEC == 8 then
  *(uint2 *)out = make_uint2(e4m3x2(q[0], q[1]) | e4m3x2(q[2], q[3]) << 16,
                             e4m3x2(q[4], q[5]) | e4m3x2(q[6], q[7]) << 16);
%   else
%     error("rmsnorm.cuh.tpl: no e4m3 store for " .. VEC .. " elements per vector")
%   end
}
%   if FP8 == "dynamic" then

// m = max(m, |y[k]|) over a vector.
__device__ __forceinline__ float abs_max(float m, const float *y) {
#pragma unroll
  for (int k = 0; k < VEC; ++k) m = fmaxf(m, fabsf(y[k]));
  return m;
}

// The row's scale from every thread's abs_max: max / 448, written to
// row_scales[row] by thread 0.
__device__ __forceinline__ float row_scale(const collgen_kparams &p, unsigned long long row,
                                           float m) {
  const float s = __fdiv_rn(block_reduce(m, max_op()), 448.0f);
  if (threadIdx.x == 0) p.row_scales[row] = s;
  return s;
}
%   end
% end
% if algo == "ll" then

// Vector i of a tensor travels as LL lines 2i and 2i + 1 (signal.cuh.tpl).
// Sends this rank's vector v to every peer.
__device__ __forceinline__ void ll_push_vec(const collgen_kparams &p, const unsigned int *epoch,
                                            unsigned long long i, vec_t v) {
  const uint2 lo = make_uint2(v.raw.x, v.raw.y), hi = make_uint2(v.raw.z, v.raw.w);
#pragma unroll
  for (int g = 0; g < GROUP; ++g) {
    if (g == (int)p.rank) continue;
    uint4 *dst = &((collgen_signal *)p.signal[g])->ll_lines[epoch[g] & 1u][p.group_base + p.rank][2 * i];
    store_line(dst, lo, epoch[g]);
    store_line(dst + 1, hi, epoch[g]);
  }
}

// Waits (bounded) for vector i from group rank `from`, whose epoch of this
// call is e; false after recording a timeout.
__device__ __forceinline__ bool ll_wait_vec(const collgen_kparams &p, const collgen_signal *mine,
                                            unsigned int from, unsigned int e,
                                            unsigned long long i, vec_t *v) {
  const uint4 *slot = &mine->ll_lines[e & 1u][p.group_base + from][2 * i];
  uint4 a, b;
  if (!ll_wait_line(p, slot, e, from, &a) || !ll_wait_line(p, slot + 1, e, from, &b))
    return false;
  v->raw = make_uint4(a.x, a.z, b.x, b.z);
  return true;
}
% end
