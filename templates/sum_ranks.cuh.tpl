% -- sum_ranks.cuh.tpl: the summation of every rank's elements, shared by
% -- the reducing ops (allreduce.cu.tpl, reduce_scatter_sum.cu.tpl). Sums in
% -- f32 in group-rank order 0..G-1 and rounds once, so every op that
% -- includes it gives the same bits for the same elements. p.in[g] is rank
% -- g's input where this rank reads (an op offsets it to its chunk); needs
% -- common.cuh.tpl (vec_t, load_vec, unpack, pack) and G, VEC.
// Loads element vector i of every rank's input.
__device__ __forceinline__ void load_ranks(const collgen_kparams &p, unsigned long long i,
                                           vec_t *v) {
% for g = 0, G - 1 do
  v[${g}] = load_vec(p.in[${g}], i);
% end
}

// Sums one vector of every rank, in rank order, in f32; rounds once.
__device__ __forceinline__ vec_t sum_ranks(const vec_t *v) {
  float acc[VEC];
  unpack(v[0], acc);
% if G > 1 then
  float x[VEC];
% end
% for g = 1, G - 1 do
  unpack(v[${g}], x);
#pragma unroll
  for (int k = 0; k < VEC; ++k) acc[k] += x[k];
% end
  return pack(acc);
}

% if VEC > 1 then
// Sums scalar element i (the tail past the last whole vector).
__device__ __forceinline__ elem_t sum_ranks_scalar(const collgen_kparams &p, unsigned long long i) {
  float acc = to_f32(((const elem_t *)p.in[0])[i]);
%   for g = 1, G - 1 do
  acc += to_f32(((const elem_t *)p.in[${g}])[i]);
%   end
  return from_f32(acc);
}
% end

