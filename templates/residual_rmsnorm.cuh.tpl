% -- residual_rmsnorm.cuh.tpl -- the kernel of allreduce_residual_rmsnorm and
% -- reduce_scatter_rmsnorm (each family's .cu.tpl is its header comment and
% -- this): per row, the sum of x over the group in group-rank order, plus
% -- residual_in, rounded to residual_out, then RMSNorm (rmsnorm.cuh.tpl) into
% -- normed or its FP8 epilogue. p.in[g] is where rank g's x of this rank's
% -- rows starts: all of x for allreduce_residual_rmsnorm, this rank's chunk
% -- for reduce_scatter_rmsnorm (whose planner takes algo "oneshot" only).
% if FP8 == "dynamic" then
// normed is written as float8 e4m3 with dynamic scaling: q = e4m3(y / scale)
// with y the f32 value above before its rounding and scale = max|y| / 448
// per row, written to row_scales (templates/rmsnorm.cuh.tpl).
% elseif FP8 == "static" then
// normed is written as float8 e4m3 with static scaling: q = e4m3(y /
// static_scale) with y the f32 value above before its rounding
// (templates/rmsnorm.cuh.tpl).
% end
% -- residual_in may be left out (NULL: none) where the op's catalog says so
% local optional_residual = optional.residual_in == true
% include("common.cuh.tpl")
% include("signal.cuh.tpl")
% include("rmsnorm.cuh.tpl")

// acc += the f32 values of vector v.
__device__ __forceinline__ void accumulate(float *acc, vec_t v) {
  float y[VEC];
  unpack(v, y);
#pragma unroll
  for (int k = 0; k < VEC; ++k) acc[k] += y[k];
}

% if algo == "ll" then
// ---- LL push (x of every rank fits the LL lines; no barrier) ----
// Each rank pushes its own x to every peer as LL lines (signal.cuh.tpl) and
// sums the lines it receives. Peers never touch this rank's buffers, so
// residual_out may be residual_in. Every rank needs every line of every
// peer, which keeps the ranks within one call of each other: no tokens.

// Vector i of residual_out, rounded: x vector i of every rank in rank order
// (this rank's read locally, the peers' from their lines), then residual_in
// vector `res`. False when a wait timed out.
__device__ __forceinline__ bool residual_vec(const collgen_kparams &p, const collgen_signal *mine,
                                             const unsigned int *epoch, unsigned long long i,
                                             vec_t res, vec_t *out) {
  float acc[VEC];
#pragma unroll
  for (int g = 0; g < GROUP; ++g) {
    vec_t v;
    if (g == (int)p.rank) v = load_vec(p.in[g], i);  // pushed a moment ago: a cache hit
    else if (!ll_wait_vec(p, mine, g, epoch[g], i, &v)) return false;
    if (g == 0) unpack(v, acc);
    else accumulate(acc, v);
  }
  accumulate(acc, res);
  *out = pack(acc);
  return true;
}
% elseif not (algo == "local" and ITEMS > 0) then  -- the local row kernel loads its own
// Vector i of residual_out, rounded: x vector i of every rank, pulled over
// P2P with all loads in flight at once and summed in rank order, then this
// rank's residual_in vector i${optional_residual and " (none when residual_in is NULL)" or ""}.
__device__ __forceinline__ vec_t pull_residual(const collgen_kparams &p, unsigned long long i) {
  vec_t v[GROUP];
%   for g = 0, G - 1 do
  v[${g}] = load_vec(p.in[${g}], i);
%   end
%   if not optional_residual then
  const vec_t res = load_vec(p.residual_in, i);
%   end
  float acc[VEC];
  unpack(v[0], acc);
%   for g = 1, G - 1 do
  accumulate(acc, v[${g}]);
%   end
%   if optional_residual then
  if (p.residual_in != nullptr) accumulate(acc, load_vec(p.residual_in, i));  // block-uniform
%   else
  accumulate(acc, res);
%   end
  return pack(acc);
}
% end
% if algo == "rowsplit" then

// rowsplit: rank g owns the rows [slice_start(g), slice_start(g + 1)).
__device__ __forceinline__ unsigned long long slice_start(const collgen_kparams &p, unsigned int g) {
  return p.count * g / GROUP;
}
% end

% if algo == "local" and ITEMS > 0 then
%   if STREAM then
%     if VEC == 1 then error("residual_rmsnorm.cuh.tpl: streamed rows need 16-byte vectors") end
// This call moves more bytes than the L2 holds (the planner's `stream`):
// the row's inputs are loaded without L1 allocation and its outputs stored
// evict-first, so they do not push the next rows' inputs out of the L2.
__device__ __forceinline__ vec_t load_row_vec(const void *base, unsigned long long i) {
  vec_t v;
  asm volatile("ld.global.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.raw.x), "=r"(v.raw.y), "=r"(v.raw.z), "=r"(v.raw.w)
               : "l"((const uint4 *)base + i));
  return v;
}
__device__ __forceinline__ void store_row_vec(void *base, unsigned long long i, vec_t v) {
  asm volatile("st.global.cs.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"((uint4 *)base + i),
               "r"(v.raw.x), "r"(v.raw.y), "r"(v.raw.z), "r"(v.raw.w) : "memory");
}
%   else
// The row's inputs and outputs take the plain accesses (the call fits
// the L2, or the planner streams on no other arch).
__device__ __forceinline__ vec_t load_row_vec(const void *base, unsigned long long i) {
  return load_vec(base, i);
}
__device__ __forceinline__ void store_row_vec(void *base, unsigned long long i, vec_t v) {
  store_vec(base, i, v);
}
%   end

// Row `row` of a group of one: residual_out = round(x + residual_in${optional_residual and " (or x)" or ""}),
// written, then its normed output. Nobody to wait for, so every load of
// the row (x, residual_in, gamma) goes out before any value is used: one
// latency covers them all. The row stays in registers as packed
// residual_out vectors (for 16-bit types half the registers of f32 values)
// and is unpacked where it is used.
__device__ __forceinline__ void norm_row(const collgen_kparams &p, unsigned long long row) {
  const unsigned long long base = row * ROW_VECS;  // the row's first vector
%   if optional_residual then
  const bool has_residual = p.residual_in != nullptr;  // block-uniform
%   end
  vec_t r[${ITEMS}], res[${ITEMS}], gam[${ITEMS}];
#pragma unroll
  for (int it = 0; it < ${ITEMS}; ++it) {
    const unsigned long long c = threadIdx.x + it * ${BLOCK}ull;
    if (c < ROW_VECS) {
      r[it] = load_row_vec(p.in[0], base + c);
%   if optional_residual then
      if (has_residual) res[it] = load_row_vec(p.residual_in, base + c);
%   else
      res[it] = load_row_vec(p.residual_in, base + c);
%   end
      gam[it] = load_vec(p.gamma, c);
    }
  }
  float sumsq = 0.0f, y[VEC];
#pragma unroll
  for (int it = 0; it < ${ITEMS}; ++it) {
    const unsigned long long c = threadIdx.x + it * ${BLOCK}ull;
    if (c < ROW_VECS) {
      unpack(r[it], y);
%   if optional_residual then
      if (has_residual) accumulate(y, res[it]);
%   else
      accumulate(y, res[it]);
%   end
      r[it] = pack(y);  // residual_out, rounded
      store_row_vec(p.out[p.rank], base + c, r[it]);
      unpack(r[it], y);
#pragma unroll
      for (int k = 0; k < VEC; ++k) sumsq += y[k] * y[k];
    }
  }
  const float scale = rsqrtf(block_sum(sumsq) / (float)COLS + p.eps);
%   if FP8 == "dynamic" then
  // The row's largest |normed value| gives its scale; the codes follow
  // from the same values, computed again.
  float m = 0.0f;
#pragma unroll
  for (int it = 0; it < ${ITEMS}; ++it) {
    const unsigned long long c = threadIdx.x + it * ${BLOCK}ull;
    if (c < ROW_VECS) {
      unpack(r[it], y);
      normed_f32(p, y, scale, gam[it], y);
      m = abs_max(m, y);
    }
  }
  const e4m3_divider divider = make_divider(row_scale(p, row, m));
%   elseif FP8 == "static" then
  const e4m3_divider divider = make_divider(p.static_scale);
%   end
#pragma unroll
  for (int it = 0; it < ${ITEMS}; ++it) {
    const unsigned long long c = threadIdx.x + it * ${BLOCK}ull;
    if (c < ROW_VECS) {
      unpack(r[it], y);
      normed_f32(p, y, scale, gam[it], y);
%   if FP8 == "none" then
      store_row_vec(p.normed, row * ROW_VECS + c, pack(y));
%   else
      store_e4m3(p, row, c, y, divider);
%   end
    }
  }
}
% else
% if algo == "ll" then
// Row `row`: computes its residual_out, writes it to this rank's output,
// then writes its normed output. False when a wait timed out.
__device__ __forceinline__ bool norm_row(const collgen_kparams &p, const collgen_signal *mine,
                                         const unsigned int *epoch, unsigned long long row) {
% elseif algo == "oneshot" or algo == "local" then
// Row `row`: computes its residual_out, writes it to this rank's output,
// then writes its normed output.
__device__ __forceinline__ void norm_row(const collgen_kparams &p, unsigned long long row) {
% else
// Row `row`: normalizes the local copy of its residual_out, which the row's
// owner wrote before the barrier.
__device__ __forceinline__ void norm_row(const collgen_kparams &p, unsigned long long row) {
% end
  const unsigned long long base = row * ROW_VECS;  // the row's first vector
% if ITEMS > 0 then
%   -- Only residual_in is prefetched: gamma too made f32 rows of 16 values
%   -- at 8 ranks spill (conformance).
%   local prefetch = algo == "ll"
%   if algo == "ll" then
  // This rank's x goes out to every peer first: its lines travel while
  // this thread waits for the peers'.
#pragma unroll
  for (int it = 0; it < ${ITEMS}; ++it) {
    const unsigned long long c = threadIdx.x + it * ${BLOCK}ull;
    if (c < ROW_VECS) ll_push_vec(p, epoch, base + c, load_vec(p.in[p.rank], base + c));
  }
%   end
%   if prefetch then
  // residual_in is fetched before the waits, so its latency hides behind
  // the link's.
  vec_t res[${ITEMS}];
#pragma unroll
  for (int it = 0; it < ${ITEMS}; ++it) {
    const unsigned long long c = threadIdx.x + it * ${BLOCK}ull;
    if (c < ROW_VECS) res[it] = load_vec(p.residual_in, base + c);
  }
%   end
  float x[${ITEMS}][VEC];  // the row of residual_out, rounded, as f32
  float sumsq = 0.0f;
#pragma unroll
  for (int it = 0; it < ${ITEMS}; ++it) {
    const unsigned long long c = threadIdx.x + it * ${BLOCK}ull;
    if (c < ROW_VECS) {
%   if algo == "ll" then
      vec_t r;
      if (!residual_vec(p, mine, epoch, base + c, ${prefetch and "res[it]" or "load_vec(p.residual_in, base + c)"}, &r)) return false;
      store_vec(p.out[p.rank], base + c, r);
%   elseif algo == "oneshot" then
      const vec_t r = pull_residual(p, base + c);
      store_vec(p.out[p.rank], base + c, r);
%   else
      const vec_t r = load_vec(p.out[p.rank], base + c);
%   end
      unpack(r, x[it]);
#pragma unroll
      for (int k = 0; k < VEC; ++k) sumsq += x[it][k] * x[it][k];
    }
  }
  const float scale = rsqrtf(block_sum(sumsq) / (float)COLS + p.eps);
%   if FP8 == "none" then
#pragma unroll
  for (int it = 0; it < ${ITEMS}; ++it) {
    const unsigned long long c = threadIdx.x + it * ${BLOCK}ull;
    if (c < ROW_VECS) write_normed(p, row, c, x[it], scale, load_vec(p.gamma, c));
  }
%   else
%     if FP8 == "dynamic" then
  // The row's normed values y replace x (still in registers) and give the
  // row its scale; then the e4m3 codes of y / scale go out.
  float m = 0.0f;
%     else
  // The row's normed values y replace x (still in registers); then the e4m3
  // codes of y / static_scale go out.
%     end
#pragma unroll
  for (int it = 0; it < ${ITEMS}; ++it) {
    const unsigned long long c = threadIdx.x + it * ${BLOCK}ull;
    if (c < ROW_VECS) {
      normed_f32(p, x[it], scale, load_vec(p.gamma, c), x[it]);
%     if FP8 == "dynamic" then
      m = abs_max(m, x[it]);
%     end
    }
  }
%     if FP8 == "dynamic" then
  const e4m3_divider divider = make_divider(row_scale(p, row, m));
%     else
  const e4m3_divider divider = make_divider(p.static_scale);
%     end
#pragma unroll
  for (int it = 0; it < ${ITEMS}; ++it) {
    const unsigned long long c = threadIdx.x + it * ${BLOCK}ull;
    if (c < ROW_VECS) store_e4m3(p, row, c, x[it], divider);
  }
%   end
% else
%   static_assert(algo ~= "ll", "LL rows are held in registers")
%   local computes = algo == "oneshot" or algo == "local"
  // Pass 1 ${computes and "computes the row of residual_out and writes it" or "reads the row of residual_out"}, summing its
  // squares; pass 2 re-reads that local copy (same thread, same vectors).
  float sumsq = 0.0f, x[VEC];
  for (unsigned long long c = threadIdx.x; c < ROW_VECS; c += ${BLOCK}) {
%   if computes then
    const vec_t r = pull_residual(p, base + c);
    store_vec(p.out[p.rank], base + c, r);
%   else
    const vec_t r = load_vec(p.out[p.rank], base + c);
%   end
    unpack(r, x);
#pragma unroll
    for (int k = 0; k < VEC; ++k) sumsq += x[k] * x[k];
  }
  const float scale = rsqrtf(block_sum(sumsq) / (float)COLS + p.eps);
%   if FP8 == "dynamic" then
  // FP8: one more pass finds the largest |normed value| for the row's
  // scale; the last pass computes the same values again and writes codes.
  float m = 0.0f;
  for (unsigned long long c = threadIdx.x; c < ROW_VECS; c += ${BLOCK}) {
    unpack(load_vec(p.out[p.rank], base + c), x);
    normed_f32(p, x, scale, load_vec(p.gamma, c), x);
    m = abs_max(m, x);
  }
  const e4m3_divider divider = make_divider(row_scale(p, row, m));
%   elseif FP8 == "static" then
  const e4m3_divider divider = make_divider(p.static_scale);
%   end
  for (unsigned long long c = threadIdx.x; c < ROW_VECS; c += ${BLOCK}) {
    unpack(load_vec(p.out[p.rank], base + c), x);
%   if FP8 == "none" then
    write_normed(p, row, c, x, scale, load_vec(p.gamma, c));
%   else
    normed_f32(p, x, scale, load_vec(p.gamma, c), x);
    store_e4m3(p, row, c, x, divider);
%   end
  }
% end
% if algo == "ll" then
  return true;
% end
}
% end

extern "C" __global__ void __launch_bounds__(${BLOCK}, ${MIN_BLOCKS}) ${kernel}(const collgen_kparams p) {
  barrier_prologue();
% if algo == "ll" then
  __syncthreads();
  collgen_signal *mine = (collgen_signal *)p.signal[p.rank];
  unsigned int epoch[GROUP];
  ll_begin(p, mine, epoch);
  for (unsigned long long row = blockIdx.x; row < p.count; row += gridDim.x)
    if (!norm_row(p, mine, epoch, row)) return;  // timed out: the communicator is unusable now
  ll_finish(p, mine, epoch);
% elseif algo == "local" then
  // A group of one: no peer, no barrier. Block b normalizes rows b, b +
  // gridDim.x, ... (the planner's grid is one block per row).
  for (unsigned long long row = blockIdx.x; row < p.count; row += gridDim.x) norm_row(p, row);
% elseif algo == "oneshot" then
  // One-shot: each rank pulls every rank's x for every row and normalizes
  // the rows itself; it writes only its own outputs and reads only its own
  // residual_in, so residual_out may be residual_in.
  if (!group_barrier(p)) return;  // every rank's x is ready to be read
  for (unsigned long long row = blockIdx.x; row < p.count; row += gridDim.x) norm_row(p, row);
  group_barrier(p);  // no peer still reads this rank's x
% else
  // Row split, phase 1: this rank sums the rows of its slice (block b takes
  // rows b, b + gridDim.x, ... of it), adds its own residual_in and writes
  // the row of residual_out into every rank. Only the slice's owner reads or
  // writes those rows of residual_in / residual_out, and it reads each
  // vector before it writes it, so residual_out may be residual_in.
  if (!group_barrier(p)) return;  // every x is ready, every residual_out free
  const unsigned long long own = slice_start(p, p.rank);
  const unsigned long long own_rows = slice_start(p, p.rank + 1) - own;
  for (unsigned long long k = blockIdx.x; k < own_rows; k += gridDim.x) {
    const unsigned long long base = (own + k) * ROW_VECS;
    for (unsigned long long c = threadIdx.x; c < ROW_VECS; c += ${BLOCK}) {
      const vec_t r = pull_residual(p, base + c);
%   for g = 0, G - 1 do
      store_vec(p.out[${g}], base + c, r);
%   end
    }
  }
  // After this barrier block b holds the rows that block b of every rank
  // wrote, and no peer reads this rank's x any more.
  if (!group_barrier(p)) return;
  // Phase 2: block b normalizes row k of every slice for the k it took in
  // phase 1, from the local copy of residual_out.
  const unsigned long long most = (p.count + GROUP - 1) / GROUP;  // rows of the longest slice
  for (unsigned long long k = blockIdx.x; k < most; k += gridDim.x)
    for (unsigned int g = 0; g < GROUP; ++g)
      if (k < slice_start(p, g + 1) - slice_start(p, g)) norm_row(p, slice_start(p, g) + k);
% end
}
