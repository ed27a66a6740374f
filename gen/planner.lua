-- The collgen planner: maps a call shape to a kernel spec.
--
-- Input (a shape, filled by the C side): op, dtype, ngpus, group_size
-- (already resolved, never 0), tensor_rank, elems, rows, cols, aligned16,
-- inplace, max_blocks (0 = default), arch.
-- Output (a spec): what the kernel source depends on (op, dtype, group,
-- algo, vec, block, cols, items) plus the launch grid. The grid is derived
-- from the shape alone, never from device queries, so every rank of a group
-- launches the same grid. The tensor rank is validated but not specialized
-- on: every kernel works on the flattened tensor, so specializing would only
-- multiply cache entries for identical code.

local M = {}

M.MAX_BLOCKS = 256        -- signal-buffer slots per rank; grids never exceed it
M.LL_LINES = 32768        -- LL lines per (bank, sender): 8 payload bytes each
M.DEFAULT_BLOCKS = 128    -- default grid cap for streaming kernels
M.DTYPE_BYTES = { bf16 = 2, f16 = 2, f32 = 4 }
M.ARCHS = { sm_80 = true, sm_86 = true, sm_89 = true, sm_90 = true,
            sm_90a = true, sm_100 = true, sm_100a = true, sm_120 = true }

-- Above the LL range, two-shot (reduce a slice, push it to every rank) is
-- used. With more than 2 ranks it moves 2(G-1)/G instead of (G-1) inputs per
-- rank; with 2 ranks it moves as many bytes as one-shot, but half of them as
-- posted writes, and measured 1-8% faster from 1 MB to 1 GB on 2 x H200
-- (docs/perf-notes.md). One-shot remains for unaligned small calls.
M.ONESHOT_MAX_BYTES = { default = 256 * 1024 }

-- Up to this many bytes the barrier-free LL push kernel is used (16-byte
-- aligned pointers only): one link crossing and no barrier round trips, at
-- the price of sending each byte twice (8 payload bytes per 16-byte line).
M.LL_MAX_BYTES = 256 * 1024

local function fail(msg) error("planner: " .. msg, 0) end

local function ceil_div(a, b) return (a + b - 1) // b end

local function clamp(v, lo, hi) return math.max(lo, math.min(hi, v)) end

local function round_up(v, m) return ceil_div(v, m) * m end

local function check_common(s)
  if not M.DTYPE_BYTES[s.dtype] then fail("unknown dtype '" .. tostring(s.dtype) .. "'") end
  if not M.ARCHS[s.arch] then fail("unsupported arch '" .. tostring(s.arch) .. "'") end
  if s.ngpus < 1 or s.ngpus > 8 then fail("ngpus must be 1..8, got " .. s.ngpus) end
  if s.group_size < 1 or s.ngpus % s.group_size ~= 0 then
    fail(string.format("group_size %d does not divide ngpus %d", s.group_size, s.ngpus))
  end
  if s.tensor_rank < 1 or s.tensor_rank > 8 then fail("tensor rank must be 1..8") end
  if s.max_blocks < 0 or s.max_blocks > M.MAX_BLOCKS then
    fail("max_blocks must be 0..256")
  end
end

local function grid_cap(s)
  if s.max_blocks > 0 then return s.max_blocks end
  return M.DEFAULT_BLOCKS
end

local function plan_allreduce(s)
  local esize = M.DTYPE_BYTES[s.dtype]
  local g = s.group_size
  if s.elems < 0 then fail("elems must be >= 0") end
  local vec = s.aligned16 and (16 // esize) or 1
  local algo
  local bytes = s.elems * esize
  if g == 1 then
    algo = "oneshot"   -- a copy; the runtime uses cuMemcpyDtoDAsync instead (faster)
  elseif s.aligned16 and bytes <= math.min(M.LL_MAX_BYTES, M.LL_LINES * 8) then
    algo = "ll"        -- peers never read our buffers: in-place is safe too
  elseif s.inplace then
    algo = "twoshot"   -- one-shot would overwrite inputs peers still read
  else
    local limit = M.ONESHOT_MAX_BYTES[g] or M.ONESHOT_MAX_BYTES.default
    algo = (s.elems * esize <= limit) and "oneshot" or "twoshot"
  end
  local block = 512
  local work = ceil_div(s.elems, vec)          -- vectors this rank walks
  if algo == "twoshot" then work = ceil_div(work, g) end
  if algo == "ll" then block, work = 256, ceil_div(bytes, 8) end  -- one line per thread
  local grid = clamp(ceil_div(work, block), 1, grid_cap(s))
  return {
    op = s.op, dtype = s.dtype, group = g, algo = algo, vec = vec,
    block = block, grid = grid, cols = 0, items = 0, arch = s.arch,
    template = "allreduce.cu.tpl",
    kernel = string.format("collgen_allreduce_%s_%s_g%d_v%d", algo, s.dtype, g, vec),
  }
end

local function plan_allgather_rmsnorm(s)
  local esize = M.DTYPE_BYTES[s.dtype]
  local g = s.group_size
  if s.cols < 1 then fail("cols must be >= 1") end
  if s.rows < 0 then fail("rows must be >= 0") end
  local vec = 1
  if s.aligned16 and (s.cols * esize) % 16 == 0 then vec = 16 // esize end
  local nv = s.cols // vec                      -- vectors per row
  local block = math.min(512, round_up(nv, 32))
  local items = ceil_div(nv, block)
  local algo = "unrolled"
  if items * vec > 32 then                      -- row would not fit in registers
    algo, items, block = "looped", 0, 512
  end
  -- Small gathered tensors (every shard then fits the LL lines) use the
  -- barrier-free LL push; the row still sits in registers (at most 16
  -- values per thread: more spills next to the LL state).
  -- Wider rows (bf16/f16 up to 16384 cols, f32 up to 8192) fit with
  -- blocks of up to 1024 threads in groups of up to 4. __launch_bounds__
  -- (1024, 1) caps a thread at 64 registers, and the LL state grows with
  -- the group: 2 vectors per thread fit up to 4 ranks; 3 vectors (f32
  -- 12288) or 8 ranks spill (conformance measures it).
  local ll_ok = algo == "unrolled" and vec > 1 and g >= 2
                and s.rows * s.cols * esize <= M.LL_MAX_BYTES
  local wide_items = ceil_div(nv, 1024)
  if ll_ok and items * vec > 16 and wide_items * vec <= 16 and wide_items <= 2 and g <= 4 then
    block = round_up(ceil_div(nv, wide_items), 32)
    items = ceil_div(nv, block)
  end
  if ll_ok and items * vec <= 16 then
    algo = "ll"
  end
  local grid = clamp(s.rows, 1, math.min(M.MAX_BLOCKS, s.max_blocks > 0 and s.max_blocks or M.MAX_BLOCKS))
  local shape_tag = algo == "looped" and "loop" or (algo == "ll" and "ll" or "u") .. items
  return {
    op = s.op, dtype = s.dtype, group = g, algo = algo, vec = vec,
    block = block, grid = grid, cols = s.cols, items = items, arch = s.arch,
    template = "allgather_rmsnorm.cu.tpl",
    kernel = string.format("collgen_allgather_rmsnorm_%s_g%d_c%d_v%d_%s",
                           s.dtype, g, s.cols, vec, shape_tag),
  }
end

-- Returns the spec for a shape, or raises "planner: <reason>".
function M.plan(s)
  check_common(s)
  if s.op == "allreduce_sum" then return plan_allreduce(s) end
  if s.op == "allgather_rmsnorm" then return plan_allgather_rmsnorm(s) end
  fail("unknown op '" .. tostring(s.op) .. "'")
end

-- The fields that change the generated source, in a fixed order. The grid
-- is deliberately absent: it is a launch parameter, not part of the kernel.
M.KEY_FIELDS = { "op", "dtype", "group", "algo", "vec", "block", "cols", "items", "arch", "kernel" }

-- Returns the canonical text of a spec, used for the cache key.
function M.canonical(spec)
  local parts = {}
  for i, k in ipairs(M.KEY_FIELDS) do parts[i] = k .. "=" .. tostring(spec[k]) end
  return table.concat(parts, ";")
end

return M
