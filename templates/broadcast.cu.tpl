// collgen broadcast: ${kernel}
// ${dtype}: ${esize}-byte elements (every dtype of that size shares this
// kernel), group of ${G}, ${VEC} element(s) per access, ${BLOCK} threads
// per block. The root (p.root, a group rank) sends its input; every other
// rank pulls it over the link into its own output, and the root copies its
// input into its output unless they are the same buffer. Bits are moved,
// never interpreted.
% include("common.cuh.tpl")
% include("signal.cuh.tpl")

// Vectors each thread keeps in flight per loop trip: more outstanding
// loads hide NVLink latency.
#define UNROLL 4

// Copies elements [0, n) of src into dst with this thread's share of the
// grid: whole vectors first, then the scalar tail.
__device__ __forceinline__ void copy_elems(void *dst, const void *src, unsigned long long n,
                                           unsigned long long tid, unsigned long long stride) {
  const unsigned long long nvec = n / VEC;
  for (unsigned long long i = tid; i < nvec; i += UNROLL * stride) {
    vec_t v[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u)
      if (i + u * stride < nvec) v[u] = load_vec(src, i + u * stride);
#pragma unroll
    for (int u = 0; u < UNROLL; ++u)
      if (i + u * stride < nvec) store_vec(dst, i + u * stride, v[u]);
  }
% if VEC > 1 then
  for (unsigned long long i = nvec * VEC + tid; i < n; i += stride)
    ((elem_t *)dst)[i] = ((const elem_t *)src)[i];
% end
}

extern "C" __global__ void __launch_bounds__(${BLOCK}) ${kernel}(const collgen_kparams p) {
  barrier_prologue();
  if (!group_barrier(p)) return;  // the root's input is ready
  const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
  const unsigned long long tid = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
  const void *src = p.in[p.root];
  void *dst = p.out[p.rank];
  if (dst != src) copy_elems(dst, src, p.count, tid, stride);
  group_barrier(p);  // every rank is done reading the root's input
}
