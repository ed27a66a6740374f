// collgen scatter: ${kernel}
// ${dtype}: ${esize}-byte elements, moved as bits (every dtype of that size
// shares this kernel), group of ${G}, ${BLOCK} threads per block. The root
// (p.root, a group rank) holds the input; after a barrier (the root's input
// is ready) each rank pulls its chunk of rows, bytes [p.row_start[rank],
// p.row_start[rank + 1]) of the root's input, into its own output; the
// root's own chunk is copied unless the output already sits there (in
// place). A closing barrier keeps the root's input until every rank is done
// reading it. A chunk whose source, destination and size allow moves in
// 16-byte vectors, else element by element, chosen at run time.
% include("common.cuh.tpl")
% include("signal.cuh.tpl")
% include("copy.cuh.tpl")

extern "C" __global__ void __launch_bounds__(${BLOCK}, 1) ${kernel}(const collgen_kparams p) {
  barrier_prologue();
  if (!group_barrier(p)) return;  // the root's input is ready to be read
  const char *src = (const char *)p.in[p.root] + p.row_start[p.rank];
  char *dst = (char *)p.out[p.rank];
  if (src != dst) copy_shard(src, dst, p.row_start[p.rank + 1] - p.row_start[p.rank]);
  group_barrier(p);  // every rank is done reading the root's input
}
