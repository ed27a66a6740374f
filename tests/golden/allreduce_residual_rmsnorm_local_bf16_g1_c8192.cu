// collgen allreduce_residual_rmsnorm: collgen_allreduce_residual_rmsnorm_bf16_g1_c8192_v8_local_u2
// dtype bf16, group of 1, cols 8192, 8 element(s) per access,
// 512 threads per block, algorithm local, row held in registers (2 vector(s) per thread).
// Every rank holds x, residual_in and the outputs as [rows, cols]. Per row:
//   s            = x_0 + x_1 + ... + x_{G-1}  (f32, in group rank order,
//                                              the allreduce_sum order)
//   residual_out = round(s + residual_in)
//   normed       = round(r * rsqrt(sum(r^2) / cols + eps) * (gamma + weight_offset))
// with r = f32(residual_out), the rounded value, and all math in f32. Every
// rank writes the same bits when residual_in is the same on every rank.
// ---- collgen common device code (templates/common.cuh.tpl) ----
// Kernel parameters, the element type bf16 and its f32 conversions, and
// 16-byte vector helpers. No CUDA headers are included: conversions use PTX
// cvt instructions, so NVRTC needs no include path.

// The device interface: limits, kernel parameters (here) and the signal
// buffer (signal.cuh.tpl), rendered from their one description in
// src/device_abi.h (catalog.abi). The host builds the same structs from it;
// the static_asserts below each struct fail compilation if any field's
// offset or size differs from the host's.
#define COLLGEN_MAX_DEVICES 8              // ranks per communicator: per-rank slots
#define COLLGEN_MAX_BLOCKS 256             // blocks per launch: per-block signal slots
#define COLLGEN_LOCAL_MAX_GRID 2147483647  // blocks per launch of a group of one (no signal slots)
#define COLLGEN_LL_LINES 32768             // 16-byte LL lines per (bank, sender)
#define COLLGEN_ABORT_MARK 4294967295      // a signal word after collgen_comm_abort (never a count)
#define COLLGEN_STOP_TIMEOUT 1             // status record: a wait passed its bound
#define COLLGEN_STOP_ABORTED 2             // status record: a wait or count read the abort mark
#define COLLGEN_PDL_MIN_SM 90              // programmatic dependent launch: oldest arch (sm_90 = 90)

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

// Launch parameters, passed by value (host: collgen__kparams).
struct collgen_kparams {
  const void *in[COLLGEN_MAX_DEVICES];                    // per-rank inputs / row shards (P2P pointers)
  void *out[COLLGEN_MAX_DEVICES];                         // every rank's output; allreduce_residual_rmsnorm: every residual_out
  void *signal[COLLGEN_MAX_DEVICES];                      // per-rank signal buffers
  void *normed;                                           // rmsnorm ops: this rank's normed output (e4m3 bytes with FP8 output)
  void *residual;                                         // allgather_rmsnorm: this rank's gathered rows
  const void *gamma;                                      // rmsnorm ops: this rank's gamma[cols]
  const void *residual_in;                                // allreduce_residual_rmsnorm: this rank's residual_in
  unsigned int *error;                                    // this rank's error record (host-mapped)
  unsigned long long count;                               // allreduce: elements; rmsnorm ops: (gathered) rows
  unsigned long long row_start[COLLGEN_MAX_DEVICES + 1];  // rmsnorm: first gathered row of each rank
  unsigned long long timeout_ns;                          // bound on every barrier wait
  float eps;                                              // rmsnorm epsilon
  float weight_offset;                                    // rmsnorm: added to gamma (1.0 = Gemma style)
  unsigned int rank;                                      // this rank's index in its group
  unsigned int group_base;                                // communicator index of the group's rank 0
  float static_scale;                                     // FP8 static output: normed is divided by it
  float *row_scales;                                      // FP8 dynamic output: this rank's scale of each row
  unsigned int root;                                      // broadcast: the group rank that sends
};
COLLGEN_ABI_CHECK(collgen_kparams, in, 0, 64);
COLLGEN_ABI_CHECK(collgen_kparams, out, 64, 64);
COLLGEN_ABI_CHECK(collgen_kparams, signal, 128, 64);
COLLGEN_ABI_CHECK(collgen_kparams, normed, 192, 8);
COLLGEN_ABI_CHECK(collgen_kparams, residual, 200, 8);
COLLGEN_ABI_CHECK(collgen_kparams, gamma, 208, 8);
COLLGEN_ABI_CHECK(collgen_kparams, residual_in, 216, 8);
COLLGEN_ABI_CHECK(collgen_kparams, error, 224, 8);
COLLGEN_ABI_CHECK(collgen_kparams, count, 232, 8);
COLLGEN_ABI_CHECK(collgen_kparams, row_start, 240, 72);
COLLGEN_ABI_CHECK(collgen_kparams, timeout_ns, 312, 8);
COLLGEN_ABI_CHECK(collgen_kparams, eps, 320, 4);
COLLGEN_ABI_CHECK(collgen_kparams, weight_offset, 324, 4);
COLLGEN_ABI_CHECK(collgen_kparams, rank, 328, 4);
COLLGEN_ABI_CHECK(collgen_kparams, group_base, 332, 4);
COLLGEN_ABI_CHECK(collgen_kparams, static_scale, 336, 4);
COLLGEN_ABI_CHECK(collgen_kparams, row_scales, 344, 8);
COLLGEN_ABI_CHECK(collgen_kparams, root, 352, 4);
static_assert(sizeof(collgen_kparams) == 360 &&
                  alignof(collgen_kparams) == 8,
              "collgen_kparams: size or alignment differs from the host's (src/device_abi.h)");

typedef unsigned short elem_t;
#define VEC 8              // elements per vector access
#define GROUP 1              // ranks in the group

__device__ __forceinline__ float to_f32(elem_t h) {
  return __uint_as_float(((unsigned int)h) << 16);
}
__device__ __forceinline__ elem_t from_f32(float f) {
  unsigned short h;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}

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
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    f[2 * k] = to_f32((elem_t)(w[k] & 0xffffu));
    f[2 * k + 1] = to_f32((elem_t)(w[k] >> 16));
  }
}
// Rounds VEC floats once each and packs them into a vector.
__device__ __forceinline__ vec_t pack(const float *f) {
  vec_t v;
  unsigned int w[4];
#pragma unroll
  for (int k = 0; k < 4; ++k)
    w[k] = (unsigned int)from_f32(f[2 * k]) | ((unsigned int)from_f32(f[2 * k + 1]) << 16);
  v.raw = make_uint4(w[0], w[1], w[2], w[3]);
  return v;
}
// ---- collgen barrier protocol (templates/signal.cuh.tpl) ----
// Each rank owns a signal buffer in its device memory, mapped by its peers.
// Block b of every rank of a group synchronizes only with block b of the
// others, so all ranks launch the same grid (the planner guarantees it).
//
// For each (block, peer) a rank keeps a monotonic 32-bit counter. At a
// barrier it increments the counter to v, writes v into the peer's
// peer_flag[v % 2][block][my rank] with a system-scope release store, then
// spins with system-scope acquire loads until its own
// peer_flag[v % 2][block][peer] equals v. Slots are indexed by communicator
// rank (group_base + group rank), not group rank: a pair of ranks then
// counts exactly the barriers it shares, whatever group sizes earlier calls
// used (indexing by group rank would desynchronize after a call with another
// group size and hang). Two banks keep a peer that is
// already at the next barrier from overwriting a slot not yet read. Counters
// never reset, so the state stays valid across CUDA-graph replays.
//
// Every wait is bounded by %globaltimer: past timeout_ns the thread records
// {COLLGEN_STOP_TIMEOUT, rank, peer, block} in the rank's host-mapped error
// record and the kernel returns without touching outputs further.
//
// Abort (collgen_comm_abort): the host overwrites, by DMA, first the count
// words of every rank's buffer (barrier counters and flags, LL epochs),
// then every byte of every buffer, with 0xFF. A kernel that reads
// ABORT_MARK where it expects a count signals nothing real; a wait in
// progress reads ABORT_MARK in the word it polls and stops. That costs one
// compare with a constant where a value is already loaded: no abort word is
// polled. Counters and epochs skip ABORT_MARK, so no live count equals it.

// One rank's signal buffer (host: collgen__signal, rendered from
// src/device_abi.h like collgen_kparams in common.cuh.tpl). The LL fields
// serve the LL kernels, see allreduce.cu.tpl.
struct collgen_signal {
  unsigned int counter[COLLGEN_MAX_BLOCKS][COLLGEN_MAX_DEVICES];       // [block][peer]: barriers passed (local)
  unsigned int peer_flag[2][COLLGEN_MAX_BLOCKS][COLLGEN_MAX_DEVICES];  // [barrier % 2][block][peer]: written by peers
  unsigned int ll_epoch[COLLGEN_MAX_DEVICES];                          // LL: calls shared with each peer
  unsigned int ll_done;                                                // LL: blocks of the running call that finished
  unsigned int abort_flag;                                             // nonzero: collgen_comm_abort ran (read by hosts)
  unsigned int ll_pad[6];                                              // pads the header to 64 bytes
  unsigned int ll_token[2][COLLGEN_MAX_BLOCKS][COLLGEN_MAX_DEVICES];   // LL: [epoch % 2][block][sender]
  uint4 ll_lines[2][COLLGEN_MAX_DEVICES][COLLGEN_LL_LINES];            // LL: [epoch % 2][sender][line]
};
COLLGEN_ABI_CHECK(collgen_signal, counter, 0, 8192);
COLLGEN_ABI_CHECK(collgen_signal, peer_flag, 8192, 16384);
COLLGEN_ABI_CHECK(collgen_signal, ll_epoch, 24576, 32);
COLLGEN_ABI_CHECK(collgen_signal, ll_done, 24608, 4);
COLLGEN_ABI_CHECK(collgen_signal, abort_flag, 24612, 4);
COLLGEN_ABI_CHECK(collgen_signal, ll_pad, 24616, 24);
COLLGEN_ABI_CHECK(collgen_signal, ll_token, 24640, 16384);
COLLGEN_ABI_CHECK(collgen_signal, ll_lines, 41024, 8388608);
static_assert(sizeof(collgen_signal) == 8429632 &&
                  alignof(collgen_signal) == 16,
              "collgen_signal: size or alignment differs from the host's (src/device_abi.h)");

// Every signal word reads this after an abort (host: COLLGEN_ABORT_MARK).
#define ABORT_MARK ((unsigned int)COLLGEN_ABORT_MARK)

// The next value of a barrier counter or LL epoch: ABORT_MARK is skipped
// (to 1, which has the same parity, so banks still alternate).
__device__ __forceinline__ unsigned int next_count(unsigned int c) {
  const unsigned int v = c + 1u;
  return v == ABORT_MARK ? 1u : v;
}

__device__ __forceinline__ unsigned long long globaltimer_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ __forceinline__ void store_release_sys(unsigned int *p, unsigned int v) {
  asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

__device__ __forceinline__ unsigned int load_acquire_sys(const unsigned int *p) {
  unsigned int v;
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// Records why this rank stopped (COLLGEN_STOP_TIMEOUT, or
// COLLGEN_STOP_ABORTED when a wait or a count read the abort mark, which
// another process may have written); the flag word is written last so the
// host never sees a half-written record.
__device__ void record_stop(const collgen_kparams &p, unsigned int peer, unsigned int why) {
  volatile unsigned int *e = p.error;
  e[1] = p.rank;
  e[2] = peer;
  e[3] = blockIdx.x;
  __threadfence_system();
  e[0] = why;
}

// Set once per block when the kernel must stop: a wait expired, or the
// communicator was aborted.
__shared__ int block_stopped;

// Must run first in every kernel (before group_barrier's barrier, or the
// LL kernels' __syncthreads, which order it before any wait sets the flag).
//
// Programmatic dependent launch (sm_90+; the communicator's `pdl` option
// launches every kernel with the programmatic-stream-serialization
// attribute): the kernel may then start while the previous kernel on its
// stream is still running. griddepcontrol.wait blocks until that kernel has
// completed and its writes are visible, so nothing is read or written
// before it: not the inputs, not the signal buffer. launch_dependents lets
// the next kernel on the stream start launching at once; that kernel waits
// in turn for this one to complete, so signalling first is always correct.
// Launched without the attribute, both return at once.
__device__ __forceinline__ void barrier_prologue() {
#if __CUDA_ARCH__ >= COLLGEN_PDL_MIN_SM * 10
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
  if (threadIdx.x == 0) block_stopped = 0;
}

// Synchronizes block blockIdx.x with the same block on every rank of the
// group. Writes of this block before the call are visible to the peers'
// blocks after theirs. Returns false (for the whole block) on timeout or
// abort.
__device__ bool group_barrier(const collgen_kparams &p) {
  return true;  // a group of one has nobody to wait for
}

// ---- LL lines (barrier-free push for small messages) ----
// Each 8 payload bytes travel in a 16-byte line {data0, flag, data1, flag}
// written with one volatile 16-byte store into the receiver's signal buffer
// at ll_lines[epoch % 2][sender][line]; the receiver polls its own buffer
// until both flags equal the epoch of this call, so data and "ready" arrive
// together (each 8-byte half is single-copy atomic). The epoch of a pair of
// ranks counts the LL calls they shared, so both sides agree whatever group
// sizes other calls used. Two banks: a peer can be at most one call ahead
// (it cannot finish call e+1 without our data of call e+1), so it never
// overwrites lines we have not read yet.

__device__ __forceinline__ void store_line(uint4 *dst, uint2 d, unsigned int flag) {
  asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(dst), "r"(d.x),
               "r"(flag), "r"(d.y), "r"(flag)
               : "memory");
}

__device__ __forceinline__ uint4 load_line(const uint4 *src) {
  uint4 v;
  asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(src)
               : "memory");
  return v;
}

// Waits (bounded) until `slot` holds a line of epoch `e` from group rank
// `peer`; returns false after recording a timeout, or on an abort (either
// half of the line reads ABORT_MARK).
__device__ __forceinline__ bool ll_wait_line(const collgen_kparams &p, const uint4 *slot,
                                             unsigned int e, unsigned int peer, uint4 *out) {
  if (e == ABORT_MARK) {  // aborted before this call began (ll_begin)
    record_stop(p, peer, COLLGEN_STOP_ABORTED);
    block_stopped = 1;
    return false;
  }
  uint4 v = load_line(slot);
  if (v.y != e || v.w != e) {
    const unsigned long long start = globaltimer_ns();
    do {
      const bool aborted = v.y == ABORT_MARK || v.w == ABORT_MARK;
      if (aborted || globaltimer_ns() - start > p.timeout_ns) {
        record_stop(p, peer, aborted ? COLLGEN_STOP_ABORTED : COLLGEN_STOP_TIMEOUT);
        block_stopped = 1;
        return false;
      }
      v = load_line(slot);
    } while (v.y != e || v.w != e);
  }
  *out = v;
  return true;
}

// Epochs of this call, per group rank (read by every thread at kernel
// start). After an abort a thread that reads ABORT_MARK in any epoch uses
// ABORT_MARK for all of them: its pushes then carry the mark (which only
// stops a peer's wait, as the host's fill does) and its waits stop at once.
// Every lane of a warp reads the same words, so a warp decides as one.
__device__ __forceinline__ void ll_begin(const collgen_kparams &p, const collgen_signal *mine,
                                         unsigned int *epoch) {
  bool aborted = false;
#pragma unroll
  for (int g = 0; g < GROUP; ++g) {
    const unsigned int last = mine->ll_epoch[p.group_base + g];
    aborted |= last == ABORT_MARK;
    epoch[g] = next_count(last);
  }
#pragma unroll
  for (int g = 0; g < GROUP; ++g)
    if (aborted) epoch[g] = ABORT_MARK;
}

// epoch[i] for a run-time group rank i. Only constant indices are read, so
// epoch[] stays in registers (a run-time index would put it in local memory).
__device__ __forceinline__ unsigned int epoch_of(const unsigned int *epoch, unsigned int i) {
  unsigned int e = epoch[0];
#pragma unroll
  for (int g = 1; g < GROUP; ++g)
    if (i == (unsigned int)g) e = epoch[g];
  return e;
}

// Tokens keep ranks in step when a peer may have nothing to send (an empty
// shard): without them a rank that only sends could run two calls ahead and
// overwrite lines not yet read. Each block sends its token for this call to
// every peer when it starts and, before it ends, waits for theirs; a peer's
// token of call e+1 exists only once the peer's kernel for call e has ended.
__device__ __forceinline__ void ll_send_tokens(const collgen_kparams &p, const unsigned int *epoch) {
  if (threadIdx.x < GROUP && threadIdx.x != p.rank) {
    collgen_signal *peer = (collgen_signal *)p.signal[threadIdx.x];
    const unsigned int e = epoch_of(epoch, threadIdx.x);
    volatile unsigned int *slot = &peer->ll_token[e & 1u][blockIdx.x][p.group_base + p.rank];
    *slot = e;
  }
}

// Waits (bounded) for every peer's token of this call; false on timeout.
__device__ __forceinline__ bool ll_wait_tokens(const collgen_kparams &p, collgen_signal *mine,
                                               const unsigned int *epoch) {
  if (threadIdx.x < GROUP && threadIdx.x != p.rank) {
    const unsigned int e = epoch_of(epoch, threadIdx.x);
    if (e == ABORT_MARK) {  // aborted before this call began (ll_begin)
      record_stop(p, threadIdx.x, COLLGEN_STOP_ABORTED);
      block_stopped = 1;
    } else {
      volatile unsigned int *slot = &mine->ll_token[e & 1u][blockIdx.x][p.group_base + threadIdx.x];
      const unsigned long long start = globaltimer_ns();
      unsigned int seen;
      while ((seen = *slot) != e) {
        const bool aborted = seen == ABORT_MARK;
        if (aborted || globaltimer_ns() - start > p.timeout_ns) {
          record_stop(p, threadIdx.x, aborted ? COLLGEN_STOP_ABORTED : COLLGEN_STOP_TIMEOUT);
          block_stopped = 1;
          break;
        }
      }
    }
  }
  __syncthreads();
  return block_stopped == 0;
}

// The last block to finish stores the new epochs; the next kernel on this
// stream starts after this one ends, so every block of it sees them.
__device__ __forceinline__ void ll_finish(const collgen_kparams &p, collgen_signal *mine,
                                          const unsigned int *epoch) {
  __syncthreads();
  if (threadIdx.x == 0 && atomicAdd(&mine->ll_done, 1u) == gridDim.x - 1) {
#pragma unroll
    for (int g = 0; g < GROUP; ++g) mine->ll_epoch[p.group_base + g] = epoch[g];
    mine->ll_done = 0;
  }
}

// ---- RMSNorm rows (templates/rmsnorm.cuh.tpl) ----
// What both RMSNorm kernel families share: the row constants, the sum of
// squares over a block in a fixed order, one vector of the normed output
// (in the dtype, or float8 e4m3 for allreduce_residual_rmsnorm's FP8
// output) and, for the LL kernels, one 16-byte vector sent as two LL lines.

#define COLS 8192ull            // columns per row
#define ROW_VECS 1024ull // vector accesses per row
#define WARPS 16

struct add_op {
  __device__ __forceinline__ float operator()(float a, float b) const { return a + b; }
};

// Reduces v over the block with op, in a fixed order (same bits on every
// rank).
template <class Op> __device__ __forceinline__ float block_reduce(float v, Op op) {
  __shared__ float warp_vals[WARPS];
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, off));
  if ((threadIdx.x & 31) == 0) warp_vals[threadIdx.x >> 5] = v;
  __syncthreads();
  float total = warp_vals[0];
#pragma unroll
  for (int w = 1; w < WARPS; ++w) total = op(total, warp_vals[w]);
  __syncthreads();  // warp_vals may be reused by the next row
  return total;
}

__device__ __forceinline__ float block_sum(float v) { return block_reduce(v, add_op()); }

// The normed values of vector c before rounding (y may be x): from the
// row's f32 values x, scale = rsqrt(mean(x^2) + eps) and gamma vector c.
__device__ __forceinline__ void normed_f32(const collgen_kparams &p, const float *x, float scale,
                                           vec_t gamma, float *y) {
  float w[VEC];
  unpack(gamma, w);
#pragma unroll
  for (int k = 0; k < VEC; ++k) y[k] = (x[k] * scale) * (w[k] + p.weight_offset);
}

// Writes normed vector c of a row from its f32 values and gamma vector c.
__device__ __forceinline__ void write_normed(const collgen_kparams &p, unsigned long long row,
                                             unsigned long long c, const float *x, float scale,
                                             vec_t gamma) {
  float y[VEC];
  normed_f32(p, x, scale, gamma, y);
  store_vec(p.normed, row * ROW_VECS + c, pack(y));
}

// acc += the f32 values of vector v.
__device__ __forceinline__ void accumulate(float *acc, vec_t v) {
  float y[VEC];
  unpack(v, y);
#pragma unroll
  for (int k = 0; k < VEC; ++k) acc[k] += y[k];
}


// The row's inputs and outputs take the plain accesses (the call fits
// the L2, or the planner streams on no other arch).
__device__ __forceinline__ vec_t load_row_vec(const void *base, unsigned long long i) {
  return load_vec(base, i);
}
__device__ __forceinline__ void store_row_vec(void *base, unsigned long long i, vec_t v) {
  store_vec(base, i, v);
}

// Row `row` of a group of one: residual_out = round(x + residual_in),
// written, then its normed output. Nobody to wait for, so every load of
// the row (x, residual_in, gamma) goes out before any value is used: one
// latency covers them all. The row stays in registers as packed
// residual_out vectors (for 16-bit types half the registers of f32 values)
// and is unpacked where it is used.
__device__ __forceinline__ void norm_row(const collgen_kparams &p, unsigned long long row) {
  const unsigned long long base = row * ROW_VECS;  // the row's first vector
  vec_t r[2], res[2], gam[2];
#pragma unroll
  for (int it = 0; it < 2; ++it) {
    const unsigned long long c = threadIdx.x + it * 512ull;
    if (c < ROW_VECS) {
      r[it] = load_row_vec(p.in[0], base + c);
      res[it] = load_row_vec(p.residual_in, base + c);
      gam[it] = load_vec(p.gamma, c);
    }
  }
  float sumsq = 0.0f, y[VEC];
#pragma unroll
  for (int it = 0; it < 2; ++it) {
    const unsigned long long c = threadIdx.x + it * 512ull;
    if (c < ROW_VECS) {
      unpack(r[it], y);
      accumulate(y, res[it]);
      r[it] = pack(y);  // residual_out, rounded
      store_row_vec(p.out[p.rank], base + c, r[it]);
      unpack(r[it], y);
#pragma unroll
      for (int k = 0; k < VEC; ++k) sumsq += y[k] * y[k];
    }
  }
  const float scale = rsqrtf(block_sum(sumsq) / (float)COLS + p.eps);
#pragma unroll
  for (int it = 0; it < 2; ++it) {
    const unsigned long long c = threadIdx.x + it * 512ull;
    if (c < ROW_VECS) {
      unpack(r[it], y);
      normed_f32(p, y, scale, gam[it], y);
      store_row_vec(p.normed, row * ROW_VECS + c, pack(y));
    }
  }
}

extern "C" __global__ void __launch_bounds__(512, 2) collgen_allreduce_residual_rmsnorm_bf16_g1_c8192_v8_local_u2(const collgen_kparams p) {
  barrier_prologue();
  // A group of one: no peer, no barrier. Block b normalizes rows b, b +
  // gridDim.x, ... (the planner's grid is one block per row).
  for (unsigned long long row = blockIdx.x; row < p.count; row += gridDim.x) norm_row(p, row);
}
