// collgen allgather_rmsnorm: ${kernel}
// dtype ${dtype}, group of ${G}, cols ${COLS}, ${VEC} element(s) per access,
// ${BLOCK} threads per block, row ${algo ~= "looped" and ("held in registers (" .. ITEMS .. " vector(s) per thread)") or "streamed in a loop"}${algo == "ll" and ", LL push (no barrier)" or ""}.
// Each block gathers whole rows from their owner rank (read once over the
// link), copies them to the residual output and writes
//   normed = round(x * rsqrt(sum(x^2) / cols + eps) * (gamma + weight_offset))
// with all math in f32. Every rank normalizes every gathered row itself.${algo == "local" and "\n// A group of one (\"local\"): no peer, one block per row, gamma loaded with\n// the row." or ""}
% include("common.cuh.tpl")
% include("signal.cuh.tpl")
% include("rmsnorm.cuh.tpl")

% if algo == "ll" then
// LL (small tensors, no barrier): the owner of a row reads vector c of it
// from its shard and pushes it as two LL lines (signal.cuh.tpl) to every
// peer; the other ranks wait for those lines. Every rank walks the rows in
// the same order with the same grid, so the pusher and the waiters of a
// row are the same block index on every rank.
__device__ __forceinline__ bool ll_row_vec(const collgen_kparams &p, collgen_signal *mine,
                                           const unsigned int *epoch, unsigned int owner,
                                           unsigned int owner_epoch, unsigned long long k,
                                           unsigned long long c, const void *src, vec_t *v) {
  const unsigned long long i = k * ROW_VECS + c;  // vector index in the owner's shard
  if (owner == p.rank) {
    *v = load_vec(src, c);
    ll_push_vec(p, epoch, i, *v);
    return true;
  }
  return ll_wait_vec(p, mine, owner, owner_epoch, i, v);
}

% end
extern "C" __global__ void __launch_bounds__(${BLOCK}, ${MIN_BLOCKS}) ${kernel}(const collgen_kparams p) {
  barrier_prologue();
% if algo == "ll" then
  __syncthreads();
  collgen_signal *mine = (collgen_signal *)p.signal[p.rank];
  unsigned int epoch[GROUP];
  ll_begin(p, mine, epoch);
  ll_send_tokens(p, epoch);  // a peer with an empty shard sends no lines
% else
  if (!group_barrier(p)) return;  // every shard is ready to be read
% end
  // Rows are visited interleaved by owner (row k of rank 0, row k of rank 1,
  // ...), so local and remote rows alternate and the link stays busy from
  // start to end. Steps past the end of a shorter shard are skipped.
  unsigned long long most = 0;  // rows of the largest shard
% for g = 0, G - 1 do
  most = max(most, p.row_start[${g + 1}] - p.row_start[${g}]);
% end
  for (unsigned long long step = blockIdx.x; step < most * GROUP; step += gridDim.x) {
    const unsigned int owner = step % GROUP;
    const unsigned long long k = step / GROUP;
    if (k >= p.row_start[owner + 1] - p.row_start[owner]) continue;  // block-uniform
    const unsigned long long row = p.row_start[owner] + k;
    const void *src = (const char *)p.in[owner] + k * COLS * sizeof(elem_t);
% if algo == "ll" then
    const unsigned int owner_epoch = epoch_of(epoch, owner);
% end
% if algo ~= "looped" then
%   -- a group of one keeps the row as loaded: for 16-bit types half the
%   -- registers of f32 values (rmsnorm.cuh.tpl's MIN_BLOCKS counts on it)
%   local packed = algo == "local"
%   if packed then
    vec_t xv[${ITEMS}];  // the row as loaded, unpacked where it is used
    float y[VEC];
%   else
    float x[${ITEMS}][VEC];
%   end
    float sumsq = 0.0f;
% -- LL with 1024 threads: 64 registers, no room
% local prefetch = (algo == "ll" and BLOCK <= 512) or algo == "local"
% if prefetch then
    // gamma is fetched before ${algo == "ll" and "the wait for the row, so its latency hides\n    // behind the link's" or "the row is used, so one latency covers both"}.
    vec_t gam[${ITEMS}];
#pragma unroll
    for (int it = 0; it < ${ITEMS}; ++it) {
      const unsigned long long c = threadIdx.x + it * ${BLOCK}ull;
      if (c < ROW_VECS) gam[it] = load_vec(p.gamma, c);
    }
% end
#pragma unroll
    for (int it = 0; it < ${ITEMS}; ++it) {
      const unsigned long long c = threadIdx.x + it * ${BLOCK}ull;
      if (c < ROW_VECS) {
% if algo == "ll" then
        vec_t v;
        if (!ll_row_vec(p, mine, epoch, owner, owner_epoch, k, c, src, &v)) return;  // timed out or aborted
% else
        const vec_t v = load_vec(src, c);
% end
        store_vec(p.residual, row * ROW_VECS + c, v);
%   if packed then
        xv[it] = v;
        unpack(v, y);
#pragma unroll
        for (int k = 0; k < VEC; ++k) sumsq += y[k] * y[k];
%   else
        unpack(v, x[it]);
#pragma unroll
        for (int k = 0; k < VEC; ++k) sumsq += x[it][k] * x[it][k];
%   end
      }
    }
    const float scale = rsqrtf(block_sum(sumsq) / (float)COLS + p.eps);
#pragma unroll
    for (int it = 0; it < ${ITEMS}; ++it) {
      const unsigned long long c = threadIdx.x + it * ${BLOCK}ull;
%   if packed then
      if (c < ROW_VECS) {
        unpack(xv[it], y);
        write_normed(p, row, c, y, scale, gam[it]);
      }
%   else
      if (c < ROW_VECS) write_normed(p, row, c, x[it], scale, ${prefetch and "gam[it]" or "load_vec(p.gamma, c)"});
%   end
    }
% else
    // Pass 1 reads the row over the link once, copying it to the residual
    // output; pass 2 re-reads that local copy (same thread, same vectors).
    float sumsq = 0.0f, x[VEC];
    for (unsigned long long c = threadIdx.x; c < ROW_VECS; c += ${BLOCK}) {
      const vec_t v = load_vec(src, c);
      store_vec(p.residual, row * ROW_VECS + c, v);
      unpack(v, x);
#pragma unroll
      for (int k = 0; k < VEC; ++k) sumsq += x[k] * x[k];
    }
    const float scale = rsqrtf(block_sum(sumsq) / (float)COLS + p.eps);
    for (unsigned long long c = threadIdx.x; c < ROW_VECS; c += ${BLOCK}) {
      unpack(load_vec(p.residual, row * ROW_VECS + c), x);
      write_normed(p, row, c, x, scale, load_vec(p.gamma, c));
    }
% end
  }
% if algo == "ll" then
  if (!ll_wait_tokens(p, mine, epoch)) return;
  ll_finish(p, mine, epoch);
% else
  group_barrier(p);  // peers are done reading this rank's shard
% end
}
