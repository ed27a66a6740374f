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
// {1, rank, peer, block} in the rank's host-mapped error record and the
// kernel returns without touching outputs further.

#define COLLGEN_MAX_BLOCKS ${MAX_BLOCKS}
#define COLLGEN_LL_LINES ${LL_LINES}   // 16-byte lines per (bank, sender)

struct collgen_signal {
  unsigned int counter[COLLGEN_MAX_BLOCKS][8];      // local: barriers passed
  unsigned int peer_flag[2][COLLGEN_MAX_BLOCKS][8]; // written by peers
  // Low-latency (LL) path, see the LL kernel in allreduce.cu.tpl:
  unsigned int ll_epoch[8];  // per communicator rank: LL calls shared with it
  unsigned int ll_done;      // blocks of the running LL call that finished
  unsigned int ll_pad[7];
  uint4 ll_lines[2][8][COLLGEN_LL_LINES];  // [epoch % 2][sender][line]
};

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

// Records a timeout; the flag word is written last so the host never sees a
// half-written record.
__device__ void record_timeout(const collgen_kparams &p, unsigned int peer) {
  volatile unsigned int *e = p.error;
  e[1] = p.rank;
  e[2] = peer;
  e[3] = blockIdx.x;
  __threadfence_system();
  e[0] = 1u;
}

// Set once per block when a wait expired; the kernel then stops.
__shared__ int block_timed_out;

// Must run first in every kernel (before group_barrier's __syncthreads).
__device__ __forceinline__ void barrier_prologue() {
  if (threadIdx.x == 0) block_timed_out = 0;
}

// Synchronizes block blockIdx.x with the same block on every rank of the
// group. Writes of this block before the call are visible to the peers'
// blocks after theirs. Returns false (for the whole block) on timeout.
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
    const unsigned int v = mine->counter[blockIdx.x][peer_id] + 1u;
    mine->counter[blockIdx.x][peer_id] = v;
    store_release_sys(&theirs->peer_flag[v & 1u][blockIdx.x][my_id], v);
    const unsigned int *slot = &mine->peer_flag[v & 1u][blockIdx.x][peer_id];
    const unsigned long long start = globaltimer_ns();
    while (load_acquire_sys(slot) != v) {
      if (globaltimer_ns() - start > p.timeout_ns) {
        record_timeout(p, peer);
        block_timed_out = 1;
        break;
      }
    }
  }
  __syncthreads();
  return block_timed_out == 0;
% end
}
