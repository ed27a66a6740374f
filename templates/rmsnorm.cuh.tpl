
// ---- RMSNorm rows (templates/rmsnorm.cuh.tpl) ----
// What both RMSNorm kernel families share: the row constants, the sum of
// squares over a block in a fixed order, one vector of the normed output
// and, for the LL kernels, one 16-byte vector sent as two LL lines.

#define COLS ${COLS}ull            // columns per row
#define ROW_VECS ${COLS // VEC}ull // vector accesses per row
#define WARPS ${BLOCK // 32}

// Sum over the block, in a fixed order (same bits on every rank).
__device__ __forceinline__ float block_sum(float v) {
  __shared__ float warp_sums[WARPS];
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  if ((threadIdx.x & 31) == 0) warp_sums[threadIdx.x >> 5] = v;
  __syncthreads();
  float total = 0.0f;
#pragma unroll
  for (int w = 0; w < WARPS; ++w) total += warp_sums[w];
  __syncthreads();  // warp_sums may be reused by the next row
  return total;
}

// Writes normed vector c of a row from its f32 values and gamma vector c.
__device__ __forceinline__ void write_normed(const collgen_kparams &p, unsigned long long row,
                                             unsigned long long c, const float *x, float scale,
                                             vec_t gamma) {
  float w[VEC], y[VEC];
  unpack(gamma, w);
#pragma unroll
  for (int k = 0; k < VEC; ++k) y[k] = (x[k] * scale) * (w[k] + p.weight_offset);
  store_vec(p.normed, row * ROW_VECS + c, pack(y));
}
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
