// collgen all_gather: ${kernel}
// ${dtype}: ${esize}-byte elements, moved as bits (every dtype of that size
// shares this kernel), group of ${G}, ${BLOCK} threads per block. After a
// barrier (every shard is ready) each rank pulls every peer's shard into
// its own output at the shard's byte offset (p.row_start), then a closing
// barrier (peers are done reading). A shard whose source, destination and
// size allow moves in 16-byte vectors, else element by element; the choice
// is made per shard at run time, so one kernel serves aligned and
// unaligned calls.
% include("common.cuh.tpl")
% include("signal.cuh.tpl")

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

extern "C" __global__ void __launch_bounds__(${BLOCK}, 1) ${kernel}(const collgen_kparams p) {
  barrier_prologue();
  if (!group_barrier(p)) return;  // every shard is ready to be read
  char *out = (char *)p.out[p.rank];
  // Each rank starts with the next rank's shard, so the ranks read from
  // different peers at a time; its own shard comes last (skipped in place).
  for (unsigned int step = 1; step <= GROUP; ++step) {
    const unsigned int owner = (p.rank + step) % GROUP;
    const char *src = (const char *)p.in[owner];
    char *dst = out + p.row_start[owner];
    if (src == dst) continue;  // in place: the shard is already there
    copy_shard(src, dst, p.row_start[owner + 1] - p.row_start[owner]);
  }
  group_barrier(p);  // peers are done reading this rank's shard
}
