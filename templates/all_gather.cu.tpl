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

% include("copy.cuh.tpl")

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
