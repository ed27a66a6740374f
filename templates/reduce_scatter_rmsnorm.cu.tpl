// collgen reduce_scatter_rmsnorm: ${kernel}
// dtype ${dtype}, group of ${G}, cols ${COLS}, ${VEC} element(s) per access,
// ${BLOCK} threads per block, barrier pull, row ${ITEMS > 0 and ("held in registers (" .. ITEMS .. " vector(s) per thread)") or "streamed in a loop"}.
// Every rank holds x as [rows, cols]; group rank i owns chunk i of the rows
// (collgen__scatter_chunk) and holds residual_in (optional) and the outputs
// as [count_i, cols]. p.in[g] points at rank g's x at the first row of this
// rank's chunk and p.count is count_i, so per row of the chunk:
//   s            = x_0 + x_1 + ... + x_{G-1}  (f32, in group rank order,
//                                              the allreduce_sum order)
//   residual_out = round(s + residual_in)     (round(s) without residual_in)
//   normed       = round(r * rsqrt(sum(r^2) / cols + eps) * (gamma + weight_offset))
// with r = f32(residual_out), the rounded value, and all math in f32. The
// kernel is allreduce_residual_rmsnorm's one-shot kernel over the chunk.
% include("residual_rmsnorm.cuh.tpl")
