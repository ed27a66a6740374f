// collgen reduce_scatter_sum: ${kernel}
// dtype ${dtype}, group of ${G}, ${VEC} element(s) per access, ${BLOCK}
// threads per block. Group rank i owns chunk i of the rows; the runtime
// points p.in[g] at chunk i of rank g's input and p.count at its elements.
// After a barrier, rank i pulls its chunk from every rank, sums in f32 in
// rank order 0..${G - 1} and rounds once (sum_ranks.cuh.tpl: allreduce_sum's
// bits), and writes only its own output; a closing barrier keeps inputs
// alive until every peer is done reading them.
% include("common.cuh.tpl")
% include("signal.cuh.tpl")

// Vectors each thread keeps in flight per loop trip (as allreduce).
#define UNROLL ${G <= 4 and 2 or 1}

% include("sum_ranks.cuh.tpl")
extern "C" __global__ void __launch_bounds__(${BLOCK}) ${kernel}(const collgen_kparams p) {
  barrier_prologue();
  if (!group_barrier(p)) return;  // peers' inputs are ready
  const unsigned long long n = p.count;
  const unsigned long long nvec = n / VEC;
  const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
  const unsigned long long tid = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
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
% if VEC > 1 then
  for (unsigned long long i = nvec * VEC + tid; i < n; i += stride)
    ((elem_t *)out)[i] = sum_ranks_scalar(p, i);
% end
  group_barrier(p);  // every rank is done reading inputs
}
