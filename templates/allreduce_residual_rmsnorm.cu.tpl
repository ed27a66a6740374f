// collgen allreduce_residual_rmsnorm: ${kernel}
// dtype ${dtype}, group of ${G}, cols ${COLS}, ${VEC} element(s) per access,
// ${BLOCK} threads per block, algorithm ${algo}, row ${ITEMS > 0 and ("held in registers (" .. ITEMS .. " vector(s) per thread)") or "streamed in a loop"}.
// Every rank holds x, residual_in and the outputs as [rows, cols]. Per row:
//   s            = x_0 + x_1 + ... + x_{G-1}  (f32, in group rank order,
//                                              the allreduce_sum order)
//   residual_out = round(s + residual_in)
//   normed       = round(r * rsqrt(sum(r^2) / cols + eps) * (gamma + weight_offset))
// with r = f32(residual_out), the rounded value, and all math in f32. Every
// rank writes the same bits when residual_in is the same on every rank.
% include("residual_rmsnorm.cuh.tpl")
