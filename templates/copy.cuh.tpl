// Copying bytes with every thread of the grid, for the kernels that move
// bits (all_gather, scatter): 16-byte vectors where both pointers are
// aligned, then the element tail.
// 16-byte vectors each thread keeps in flight per loop trip: more
// outstanding loads hide the link's latency.
#define UNROLL 4

// Copies `bytes` (a multiple of sizeof(elem_t)) from src to dst with every
// thread of the grid: the 16-byte vectors first, then the element tail.
__device__ __forceinline__ void copy_shard(const char *src, char *dst, unsigned long long bytes) {
  const unsigned long long tid = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
  const unsigned long long threads = gridDim.x * (unsigned long long)blockDim.x;
  unsigned long long done = 0;  // bytes moved as vectors
  if ((((unsigned long long)src | (unsigned long long)dst) & 15ull) == 0) {
    const uint4 *s = (const uint4 *)src;
    uint4 *d = (uint4 *)dst;
    const unsigned long long n = bytes / 16;
    unsigned long long i = tid;
    for (; i + (UNROLL - 1) * threads < n; i += UNROLL * threads) {
      uint4 v[UNROLL];
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) v[u] = s[i + u * threads];
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) d[i + u * threads] = v[u];
    }
    for (; i < n; i += threads) d[i] = s[i];
    done = n * 16;
  }
  const elem_t *s = (const elem_t *)(src + done);
  elem_t *d = (elem_t *)(dst + done);
  const unsigned long long n = (bytes - done) / sizeof(elem_t);
  for (unsigned long long i = tid; i < n; i += threads) d[i] = s[i];
}
