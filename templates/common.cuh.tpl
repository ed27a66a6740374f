// ---- collgen common device code (templates/common.cuh.tpl) ----
// Kernel parameters, the element type ${dtype} and its f32 conversions, and
// 16-byte vector helpers. No CUDA headers are included: conversions use PTX
// cvt instructions, so NVRTC needs no include path.

// Launch parameters, passed by value. The C side (runtime/kparams.h) builds
// the same struct; the conformance test checks the sizes agree.
struct collgen_kparams {
  const void *in[8];            // per-rank inputs / row shards (P2P pointers)
  void *out[8];                 // allreduce: every rank's output
  void *signal[8];              // per-rank signal buffers
  void *normed;                 // allgather_rmsnorm: this rank's normed output
  void *residual;               // allgather_rmsnorm: this rank's gathered rows
  const void *gamma;            // allgather_rmsnorm: this rank's gamma[cols]
  unsigned int *error;          // this rank's error record (host-mapped)
  unsigned long long count;     // allreduce: elements; rmsnorm: gathered rows
  unsigned long long row_start[9]; // rmsnorm: first gathered row of each rank
  unsigned long long timeout_ns;   // bound on every barrier wait
  float eps;                    // rmsnorm epsilon
  float weight_offset;          // rmsnorm: added to gamma (1.0 = Gemma style)
  unsigned int rank;            // this rank's index in its group
  unsigned int group_base;      // communicator index of the group's rank 0
};

typedef ${ctype} elem_t;
#define VEC ${VEC}              // elements per vector access
#define GROUP ${G}              // ranks in the group

% if dtype == "bf16" then
__device__ __forceinline__ float to_f32(elem_t h) {
  return __uint_as_float(((unsigned int)h) << 16);
}
__device__ __forceinline__ elem_t from_f32(float f) {
  unsigned short h;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}
% elseif dtype == "f16" then
__device__ __forceinline__ float to_f32(elem_t h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
}
__device__ __forceinline__ elem_t from_f32(float f) {
  unsigned short h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}
% elseif dtype == "f32" then
__device__ __forceinline__ float to_f32(elem_t h) { return h; }
__device__ __forceinline__ elem_t from_f32(float f) { return f; }
% else
%   error("common.cuh.tpl: no f32 conversions for dtype '" .. dtype .. "'")
% end

% if VEC > 1 then
// One 16-byte access moves VEC elements.
struct vec_t { uint4 raw; };

__device__ __forceinline__ vec_t load_vec(const void *base, unsigned long long i) {
  vec_t v;
  v.raw = ((const uint4 *)base)[i];
  return v;
}
__device__ __forceinline__ void store_vec(void *base, unsigned long long i, vec_t v) {
  ((uint4 *)base)[i] = v.raw;
}
// Unpacks a vector into VEC floats (element 0 in the low bits).
__device__ __forceinline__ void unpack(vec_t v, float *f) {
  const unsigned int w[4] = {v.raw.x, v.raw.y, v.raw.z, v.raw.w};
%   if esize == 2 then
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    f[2 * k] = to_f32((elem_t)(w[k] & 0xffffu));
    f[2 * k + 1] = to_f32((elem_t)(w[k] >> 16));
  }
%   elseif esize == 4 then
#pragma unroll
  for (int k = 0; k < 4; ++k) f[k] = __uint_as_float(w[k]);
%   else
%     error("common.cuh.tpl: no 16-byte vector unpacking for " .. esize .. "-byte elements")
%   end
}
// Rounds VEC floats once each and packs them into a vector.
__device__ __forceinline__ vec_t pack(const float *f) {
  vec_t v;
  unsigned int w[4];
%   if esize == 2 then
#pragma unroll
  for (int k = 0; k < 4; ++k)
    w[k] = (unsigned int)from_f32(f[2 * k]) | ((unsigned int)from_f32(f[2 * k + 1]) << 16);
%   elseif esize == 4 then
#pragma unroll
  for (int k = 0; k < 4; ++k) w[k] = __float_as_uint(f[k]);
%   else
%     error("common.cuh.tpl: no 16-byte vector packing for " .. esize .. "-byte elements")
%   end
  v.raw = make_uint4(w[0], w[1], w[2], w[3]);
  return v;
}
% else
// Scalar path: one element per access.
struct vec_t { elem_t raw; };

__device__ __forceinline__ vec_t load_vec(const void *base, unsigned long long i) {
  vec_t v;
  v.raw = ((const elem_t *)base)[i];
  return v;
}
__device__ __forceinline__ void store_vec(void *base, unsigned long long i, vec_t v) {
  ((elem_t *)base)[i] = v.raw;
}
__device__ __forceinline__ void unpack(vec_t v, float *f) { f[0] = to_f32(v.raw); }
__device__ __forceinline__ vec_t pack(const float *f) {
  vec_t v;
  v.raw = from_f32(f[0]);
  return v;
}
% end
