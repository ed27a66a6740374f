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

// One rank's signal buffer (host: ${abi.signal.host}, rendered from
// src/device_abi.h like collgen_kparams in common.cuh.tpl). The LL fields
// serve the LL kernels, see allreduce.cu.tpl.
struct collgen_signal {
% local width = 0
% for _, f in ipairs(abi.signal.fields) do width = math.max(width, #f.decl + 1) end
% for _, f in ipairs(abi.signal.fields) do
  ${string.format("%-" .. width .. "s", f.decl .. ";")}  // ${f.comment}
% end
};
% for _, f in ipairs(abi.signal.fields) do
COLLGEN_ABI_CHECK(collgen_signal, ${f.name}, ${f.offset}, ${f.size});
% end
static_assert(sizeof(collgen_signal) == ${abi.signal.size} &&
                  alignof(collgen_signal) == ${abi.signal.align},
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
% if G == 1 then
  return true;  // a group of one has nobody to wait for
% else
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
% end
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
