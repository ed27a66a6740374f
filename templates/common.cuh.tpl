// ---- collgen common device code (templates/common.cuh.tpl) ----
// Kernel parameters, the element type ${dtype} and its f32 conversions, and
// 16-byte vector helpers. No CUDA headers are included: conversions use PTX
// cvt instructions, so NVRTC needs no include path.

// The device interface: limits, kernel parameters (here) and the signal
// buffer (signal.cuh.tpl), rendered from their one description in
// src/device_abi.h (catalog.abi). The host builds the same structs from it;
// the static_asserts below each struct fail compilation if any field's
// offset or size differs from the host's.
% local width = 0
% for _, c in ipairs(abi.limits) do width = math.max(width, #c.name + #tostring(c.value) + 1) end
% for _, c in ipairs(abi.limits) do
#define ${string.format("%-" .. width .. "s", c.name .. " " .. c.value)}  // ${c.comment}
% end

// offsetof as a constant expression: NVRTC has neither <cstddef> nor
// __builtin_offsetof; __INTADDR__ is its (EDG) front end's primitive.
#ifdef __CUDACC_RTC__
#define COLLGEN_OFFSETOF(S, f) __INTADDR__(&((S *)0)->f)
#else
#define COLLGEN_OFFSETOF(S, f) __builtin_offsetof(S, f)
#endif
#define COLLGEN_ABI_CHECK(S, f, offset, size)                            \
  static_assert(COLLGEN_OFFSETOF(S, f) == offset && sizeof(S::f) == size, \
                #S "." #f ": offset or size differs from the host's (src/device_abi.h)")

// Launch parameters, passed by value (host: ${abi.kparams.host}).
struct collgen_kparams {
% width = 0
% for _, f in ipairs(abi.kparams.fields) do width = math.max(width, #f.decl + 1) end
% for _, f in ipairs(abi.kparams.fields) do
  ${string.format("%-" .. width .. "s", f.decl .. ";")}  // ${f.comment}
% end
};
% for _, f in ipairs(abi.kparams.fields) do
COLLGEN_ABI_CHECK(collgen_kparams, ${f.name}, ${f.offset}, ${f.size});
% end
static_assert(sizeof(collgen_kparams) == ${abi.kparams.size} &&
                  alignof(collgen_kparams) == ${abi.kparams.align},
              "collgen_kparams: size or alignment differs from the host's (src/device_abi.h)");

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
% elseif reduces then
%   error("common.cuh.tpl: no f32 conversions for dtype '" .. dtype .. "'")
% end
% -- a copy-only dtype (no accumulate type) is only moved: no conversions

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
%   if reduces then  -- a copy-only dtype is only moved: no unpacking
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
%   end
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
%   if reduces then
__device__ __forceinline__ void unpack(vec_t v, float *f) { f[0] = to_f32(v.raw); }
__device__ __forceinline__ vec_t pack(const float *f) {
  vec_t v;
  v.raw = from_f32(f[0]);
  return v;
}
%   end
% end
