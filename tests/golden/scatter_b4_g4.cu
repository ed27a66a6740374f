// collgen scatter: collgen_scatter_b4_g4
// b4: 4-byte elements, moved as bits (every dtype of that size
// shares this kernel), group of 4, 512 threads per block. The root
// (p.root, a group rank) holds the input; after a barrier (the root's input
// is ready) each rank pulls its chunk of rows, bytes [p.row_start[rank],
// p.row_start[rank + 1]) of the root's input, into its own output; the
// root's own chunk is copied unless the output already sits there (in
// place). A closing barrier keeps the root's input until every rank is done
// reading it. A chunk whose source, destination and size allow moves in
// 16-byte vectors, else element by element, chosen at run time.
// ---- collgen common device code (templates/common.cuh.tpl) ----
// Kernel parameters, the element type b4 and its f32 conversions, and
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

typedef unsigned int elem_t;
#define VEC 4              // elements per vector access
#define GROUP 4              // ranks in the group


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
  __syncthreads();  // this block's earlier writes precede the release below
  if (threadIdx.x < GROUP) {
    const unsigned int peer = threadIdx.x;                // group rank
    const unsigned int peer_id = p.group_base + peer;      // communicator rank
    const unsigned int my_id = p.group_base + p.rank;
    collgen_signal *mine = (collgen_signal *)p.signal[p.rank];
    collgen_signal *theirs = (collgen_signal *)p.signal[peer];
    const unsigned int c = mine->counter[blockIdx.x][peer_id];
    if (c == ABORT_MARK) {  // aborted: signal nothing, stop the block
      record_stop(p, peer, COLLGEN_STOP_ABORTED);
      block_stopped = 1;
    } else {
      const unsigned int v = next_count(c);
      mine->counter[blockIdx.x][peer_id] = v;
      store_release_sys(&theirs->peer_flag[v & 1u][blockIdx.x][my_id], v);
      const unsigned int *slot = &mine->peer_flag[v & 1u][blockIdx.x][peer_id];
      const unsigned long long start = globaltimer_ns();
      unsigned int seen;
      while ((seen = load_acquire_sys(slot)) != v) {
        const bool aborted = seen == ABORT_MARK;
        if (aborted || globaltimer_ns() - start > p.timeout_ns) {
          record_stop(p, peer, aborted ? COLLGEN_STOP_ABORTED : COLLGEN_STOP_TIMEOUT);
          block_stopped = 1;
          break;
        }
      }
    }
  }
  __syncthreads();
  return block_stopped == 0;
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

extern "C" __global__ void __launch_bounds__(512, 1) collgen_scatter_b4_g4(const collgen_kparams p) {
  barrier_prologue();
  if (!group_barrier(p)) return;  // the root's input is ready to be read
  const char *src = (const char *)p.in[p.root] + p.row_start[p.rank];
  char *dst = (char *)p.out[p.rank];
  if (src != dst) copy_shard(src, dst, p.row_start[p.rank + 1] - p.row_start[p.rank]);
  group_barrier(p);  // every rank is done reading the root's input
}
