// collgen allreduce_sum: ${kernel}
// dtype ${dtype}, group of ${G}, algorithm ${algo}, ${VEC} element(s) per
// access, ${BLOCK} threads per block. Sums are taken in f32 in rank order
// 0..${G - 1} and rounded once, so every rank and both algorithms produce the
// same bits for the same inputs.
% include("common.cuh.tpl")
% include("signal.cuh.tpl")

// Vectors each thread keeps in flight per loop trip: more outstanding
// loads hide NVLink latency; large groups already issue GROUP loads.
#define UNROLL ${G <= 4 and 2 or 1}

% include("sum_ranks.cuh.tpl")
% if algo == "ll" then
// ---- LL (low-latency) one-shot push, no barrier ----
// Every rank pushes each 8 bytes of its input as one LL line (protocol in
// signal.cuh.tpl) to every peer, then sums the lines it receives in rank
// order. Peers never touch our input or output, so in-place calls are safe.
#define EPL ${8 // esize}   // elements per line (8 payload bytes)

union line_payload {
  uint2 w;
  elem_t e[EPL];
};

// Line `line` of an input; elements past `count` read as zero.
__device__ __forceinline__ uint2 read_payload(const void *in, unsigned long long line,
                                              unsigned long long count) {
  if ((line + 1) * EPL <= count) return ((const uint2 *)in)[line];
  line_payload u;
  u.w = make_uint2(0u, 0u);
#pragma unroll
  for (int k = 0; k < EPL; ++k)
    if (line * EPL + k < count) u.e[k] = ((const elem_t *)in)[line * EPL + k];
  return u.w;
}

__device__ __forceinline__ void unpack_line(uint2 w, float *f) {
  line_payload u;
  u.w = w;
#pragma unroll
  for (int k = 0; k < EPL; ++k) f[k] = to_f32(u.e[k]);
}

// Rounds the sums once and writes the valid elements of a line.
__device__ __forceinline__ void write_line(void *out, unsigned long long line,
                                           unsigned long long count, const float *f) {
  line_payload u;
#pragma unroll
  for (int k = 0; k < EPL; ++k) u.e[k] = from_f32(f[k]);
  if ((line + 1) * EPL <= count) {
    ((uint2 *)out)[line] = u.w;
    return;
  }
#pragma unroll
  for (int k = 0; k < EPL; ++k)
    if (line * EPL + k < count) ((elem_t *)out)[line * EPL + k] = u.e[k];
}

extern "C" __global__ void __launch_bounds__(${BLOCK}) ${kernel}(const collgen_kparams p) {
  barrier_prologue();
  __syncthreads();
  collgen_signal *mine = (collgen_signal *)p.signal[p.rank];
  const unsigned int my_id = p.group_base + p.rank;
  unsigned int epoch[GROUP];
  ll_begin(p, mine, epoch);
  const unsigned long long lines = (p.count + EPL - 1) / EPL;
  const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
  for (unsigned long long line = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
       line < lines; line += stride) {
    const uint2 own = read_payload(p.in[p.rank], line, p.count);
#pragma unroll
    for (int g = 0; g < GROUP; ++g) {  // push our 8 bytes to every peer
      if (g == (int)p.rank) continue;
      collgen_signal *peer = (collgen_signal *)p.signal[g];
      store_line(&peer->ll_lines[epoch[g] & 1u][my_id][line], own, epoch[g]);
    }
    float acc[EPL], x[EPL];
#pragma unroll
    for (int g = 0; g < GROUP; ++g) {  // sum every rank's bytes in rank order
      uint2 w = own;
      if (g != (int)p.rank) {
        uint4 v;
        if (!ll_wait_line(p, &mine->ll_lines[epoch[g] & 1u][p.group_base + g][line], epoch[g], g, &v))
          return;  // timed out or aborted: the communicator is unusable now
        w = make_uint2(v.x, v.z);
      }
      if (g == 0) {
        unpack_line(w, acc);
      } else {
        unpack_line(w, x);
#pragma unroll
        for (int k = 0; k < EPL; ++k) acc[k] += x[k];
      }
    }
    write_line(p.out[p.rank], line, p.count, acc);
  }
  ll_finish(p, mine, epoch);
}
% else
extern "C" __global__ void __launch_bounds__(${BLOCK}) ${kernel}(const collgen_kparams p) {
  barrier_prologue();
  if (!group_barrier(p)) return;  // peers' inputs are ready, outputs free
  const unsigned long long n = p.count;
  const unsigned long long nvec = n / VEC;
  const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
  const unsigned long long tid = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
% if algo == "oneshot" then
  // One-shot: this rank pulls every input and writes only its own output.
  void *out = p.out[p.rank];
  for (unsigned long long i = tid; i < nvec; i += UNROLL * stride) {
    vec_t v[UNROLL][GROUP];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u)
      if (i + u * stride < nvec) load_ranks(p, i + u * stride, v[u]);
#pragma unroll
    for (int u = 0; u < UNROLL; ++u)
      if (i + u * stride < nvec) store_vec(out, i + u * stride, sum_ranks(v[u]));
  }
%   if VEC > 1 then
  for (unsigned long long i = nvec * VEC + tid; i < n; i += stride)
    ((elem_t *)out)[i] = sum_ranks_scalar(p, i);
%   end
% else
  // Two-shot: this rank reduces its slice of the vectors and pushes the sums
  // into every rank's output. Only this rank reads its slice, and it reads
  // each element before writing it, so in-place calls are safe.
  const unsigned long long begin = nvec * p.rank / GROUP;
  const unsigned long long end = nvec * (p.rank + 1) / GROUP;
  for (unsigned long long i = begin + tid; i < end; i += UNROLL * stride) {
    vec_t v[UNROLL][GROUP];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u)
      if (i + u * stride < end) load_ranks(p, i + u * stride, v[u]);
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      if (i + u * stride >= end) continue;
      const vec_t s = sum_ranks(v[u]);
%   for g = 0, G - 1 do
      store_vec(p.out[${g}], i + u * stride, s);
%   end
    }
  }
%   if VEC > 1 then
  if (p.rank == GROUP - 1) {  // the scalar tail belongs to the last rank
    for (unsigned long long i = nvec * VEC + tid; i < n; i += stride) {
      const elem_t s = sum_ranks_scalar(p, i);
%     for g = 0, G - 1 do
      ((elem_t *)p.out[${g}])[i] = s;
%     end
    }
  }
%   end
% end
  group_barrier(p);  // every rank is done reading inputs and writing outputs
}
% end
