-- The collgen planner: maps a call shape to a kernel spec.
--
-- Input (a shape, filled by the C side): op, dtype, ngpus, group_size
-- (already resolved, never 0), tensor_rank, elems, rows, cols, aligned16,
-- inplace, fp8 (a name of catalog.fp8), max_blocks (0 = default), arch.
-- Output (a spec): what the kernel source depends on (op, dtype, group,
-- algo, vec, block, cols, items, fp8, stream) plus the launch grid and what the
-- runtime must know of the algorithm (check_runtime_facts below). The grid is derived
-- from the shape alone, never from device queries, so every rank of a group
-- launches the same grid. The tensor rank is validated but not specialized
-- on: every kernel works on the flattened tensor, so specializing would only
-- multiply cache entries for identical code.

local M = {}

-- Ops, dtypes, FP8 output modes, archs and the device limits come from the
-- catalog the C side pushes (src/catalog.h, src/device_abi.h); nothing here
-- repeats them.
local DTYPES, OPS, ARCHS, FP8 = catalog.dtypes, catalog.ops, catalog.archs, catalog.fp8
local MAX_DEVICES = catalog.limits.MAX_DEVICES
M.MAX_BLOCKS = catalog.limits.MAX_BLOCKS  -- signal-buffer slots per rank; no grid of a real group exceeds it
M.LL_LINES = catalog.limits.LL_LINES      -- LL lines per (bank, sender): 8 payload bytes each
M.DEFAULT_BLOCKS = 128    -- default grid cap for streaming kernels
-- A group of one touches no signal buffer, so its grid is not bound by
-- the signal slots: one block per row, up to the launch limit.
M.LOCAL_MAX_GRID = catalog.limits.LOCAL_MAX_GRID

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

-- Values per thread an RMSNorm row may keep in registers. A scalar row
-- (unaligned pointers) holds a register per value and per gamma: from 30
-- scalars ptxas needs ~120 of the 128 registers a 512-thread block allows
-- and at 32 it spills (conformance, NVRTC 13, groups of 2 and more); 24
-- keeps a margin. 16-byte vectors fit 32 values.
M.ROW_VALUES_MAX = { vector = 32, scalar = 24 }

local function fail(msg) error("planner: " .. msg, 0) end

local function ceil_div(a, b) return (a + b - 1) // b end

local function clamp(v, lo, hi) return math.max(lo, math.min(hi, v)) end

local function round_up(v, m) return ceil_div(v, m) * m end

-- The call-size thresholds, in the unit of the op's size field (elements
-- per rank for allreduce, gathered rows for allgather_rmsnorm, rows per
-- rank for allreduce_residual_rmsnorm). A planning function
-- compares the size against these and nothing else (the grid aside, which
-- is not part of the kernel); a size at or below one may plan differently
-- from one above it. M.variants probes each threshold and its neighbours.
local function ll_max_elems(s)
  return math.min(M.LL_MAX_BYTES, M.LL_LINES * 8) // DTYPES[s.dtype].bytes
end

local function oneshot_max_elems(s)
  local limit = M.ONESHOT_MAX_BYTES[s.group_size] or M.ONESHOT_MAX_BYTES.default
  return limit // DTYPES[s.dtype].bytes
end

local function ll_max_rows(s)   -- the whole pushed tensor fits the LL lines
  return M.LL_MAX_BYTES // (s.cols * DTYPES[s.dtype].bytes)
end

local function oneshot_max_rows(s)   -- rows per rank of a one-shot pull
  return oneshot_max_elems(s) // s.cols
end

-- What the runtime must know of a plan, named by the op's buffer roles
-- (catalog.ops[op].roles, src/catalog.h COLLGEN_ROLES_<op>); every
-- planning function sets them, and they reach C as collgen_plan_t's role
-- masks. They follow from the algorithm and are not part of the kernel
-- (M.KEY_FIELDS):
--   peer_reads:  the roles the kernel reads on peers directly (one process
--                per GPU: each is staged into the peers' view, region IN,
--                or read where it is when registered);
--   peer_writes: the roles the kernel writes on peers directly (one process
--                per GPU: written into staging, region OUT, and copied back);
--   copy:        { from = role, to = role } when the op over this group is
--                the identity: the runtime copies (cuMemcpyDtoDAsync) and
--                launches nothing; nil when the kernel runs.
local function check_runtime_facts(spec)
  local roles = OPS[spec.op].role
  local function check_role(field, name)
    if not roles[name] then
      fail(string.format("%s: spec field '%s' names no role '%s'", spec.op, field, tostring(name)))
    end
  end
  for _, field in ipairs({ "peer_reads", "peer_writes" }) do
    if type(spec[field]) ~= "table" then fail(spec.op .. ": spec has no list '" .. field .. "'") end
    for _, name in ipairs(spec[field]) do check_role(field, name) end
  end
  if spec.copy ~= nil then
    check_role("copy", spec.copy.from)
    check_role("copy", spec.copy.to)
  end
  return spec
end

-- Whether an op can write normed as float8 e4m3 (catalog.fp8 modes other
-- than "none"; catalog.ops[op].fp8, COLLGEN_OP_MAP): the epilogue of
-- templates/rmsnorm.cuh.tpl, which only such an op's template renders
-- with a mode.
local function writes_fp8(op) return OPS[op] ~= nil and OPS[op].fp8 end

-- The ops that only move bits, never compute on elements (catalog.ops[op].
-- computes false, COLLGEN_OP_MAP): the only ones that take a copy-only
-- dtype (a catalog dtype without acc_type). Named in catalog order, as
-- the runtime's refusal names them (runtime/op_driver.c).
local function bits_only_names()
  local t = {}
  for name, op in pairs(OPS) do
    if not op.computes then t[#t + 1] = name end
  end
  table.sort(t, function(a, b) return OPS[a].value < OPS[b].value end)
  return #t > 0 and table.concat(t, ", ") or "none yet"
end

-- The ops that only move bits plan by element size, not by dtype: their
-- spec's dtype is the size class "b<bytes>", an unsigned type of that many
-- bytes, so one kernel (one cubin, one cache entry) serves every dtype of
-- a size: bf16, f16 and i16 share "b2". Every byte size of the catalog's
-- dtypes has a class here (checked when the generator starts).
M.SIZE_CLASSES = {
  b1 = { bytes = 1, ctype = "unsigned char" },
  b2 = { bytes = 2, ctype = "unsigned short" },
  b4 = { bytes = 4, ctype = "unsigned int" },
  b8 = { bytes = 8, ctype = "unsigned long long" },
}
for name, d in pairs(DTYPES) do
  if not M.SIZE_CLASSES["b" .. d.bytes] then
    error(string.format("planner: no size class for %s's %d-byte elements", name, d.bytes), 0)
  end
end

-- The dtype a spec of shape s names: the call's, or its size class for an
-- op that only moves bits.
local function spec_dtype(s)
  if OPS[s.op].computes then return s.dtype end
  return "b" .. DTYPES[s.dtype].bytes
end

-- The element type a spec's dtype names (a catalog dtype or a size
-- class): { bytes, ctype, acc_type (nil: moved as bits) }, or nil.
function M.element_type(name)
  return DTYPES[name] or M.SIZE_CLASSES[name]
end

local function check_common(s)
  local d = DTYPES[s.dtype]
  if not d then fail("unknown dtype '" .. tostring(s.dtype) .. "'") end
  if not OPS[s.op] then fail("unknown op '" .. tostring(s.op) .. "'") end
  if not d.acc_type and OPS[s.op].computes then
    fail(string.format("%s computes on elements: %s is a copy-only dtype (only the ops "
                       .. "that move bits take it: %s)", s.op, s.dtype, bits_only_names()))
  end
  local sm = ARCHS[s.arch]
  if not sm then fail("unsupported arch '" .. tostring(s.arch) .. "'") end
  if sm < d.min_sm then
    fail(string.format("%s needs sm_%d or newer, not %s", s.dtype, d.min_sm, s.arch))
  end
  local f = FP8[s.fp8]
  if not f then fail("unknown fp8 mode '" .. tostring(s.fp8) .. "'") end
  if s.fp8 ~= "none" and not writes_fp8(s.op) then
    fail(string.format("%s has no FP8 output (fp8 %s)", s.op, s.fp8))
  end
  if sm < f.min_sm then
    fail(string.format("FP8 output (fp8 %s) needs sm_%d or newer, not %s", s.fp8, f.min_sm,
                       s.arch))
  end
  if s.ngpus < 1 or s.ngpus > MAX_DEVICES then
    fail(string.format("ngpus must be 1..%d, got %d", MAX_DEVICES, s.ngpus))
  end
  if s.group_size < 1 or s.ngpus % s.group_size ~= 0 then
    fail(string.format("group_size %d does not divide ngpus %d", s.group_size, s.ngpus))
  end
  if s.tensor_rank < OPS[s.op].min_rank or s.tensor_rank > 8 then
    fail(string.format("%s needs tensor rank %d..8", s.op, OPS[s.op].min_rank))
  end
  if s.max_blocks < 0 or s.max_blocks > M.MAX_BLOCKS then
    fail("max_blocks must be 0.." .. M.MAX_BLOCKS)
  end
end

local function grid_cap(s)
  if s.max_blocks > 0 then return s.max_blocks end
  return M.DEFAULT_BLOCKS
end

local function plan_allreduce(s)
  local esize = DTYPES[s.dtype].bytes
  local g = s.group_size
  if s.elems < 0 then fail("elems must be >= 0") end
  local vec = s.aligned16 and (16 // esize) or 1
  local algo
  local bytes = s.elems * esize
  local copy = nil
  if g == 1 then       -- the identity: the runtime copies (faster than any kernel)
    algo, copy = "oneshot", { from = "input", to = "output" }
  elseif s.aligned16 and s.elems <= ll_max_elems(s) then
    algo = "ll"        -- peers never read our buffers: in-place is safe too
  elseif s.inplace then
    algo = "twoshot"   -- one-shot would overwrite inputs peers still read
  else
    algo = (s.elems <= oneshot_max_elems(s)) and "oneshot" or "twoshot"
  end
  local block = 512
  local work = ceil_div(s.elems, vec)          -- vectors this rank walks
  if algo == "twoshot" then work = ceil_div(work, g) end
  if algo == "ll" then block, work = 256, ceil_div(bytes, 8) end  -- one line per thread
  local grid = clamp(ceil_div(work, block), 1, grid_cap(s))
  -- LL pushes into the peers' signal buffers only; one-shot pulls every
  -- peer's input; two-shot also pushes its slice's sums into every output.
  local reads = (copy or algo == "ll") and {} or { "input" }
  return {
    op = s.op, dtype = s.dtype, group = g, algo = algo, vec = vec,
    block = block, grid = grid, cols = 0, items = 0, fp8 = s.fp8, arch = s.arch,
    template = OPS[s.op].template,
    kernel = string.format("collgen_allreduce_%s_%s_g%d_v%d", algo, s.dtype, g, vec),
    peer_reads = reads, peer_writes = algo == "twoshot" and { "output" } or {}, copy = copy,
  }
end

-- How a block holds a row of s.cols: 16-byte vectors when the pointers
-- and the row allow, at most 512 threads, `items` vectors per thread in
-- registers, or the row streamed in a loop (items 0) when a thread would
-- hold more than ROW_VALUES_MAX values. Returns vec, vectors per row,
-- block, items.
local function row_layout(s)
  if s.cols < 1 then fail("cols must be >= 1") end
  if s.rows < 0 then fail("rows must be >= 0") end
  local esize = DTYPES[s.dtype].bytes
  local vec = 1
  if s.aligned16 and (s.cols * esize) % 16 == 0 then vec = 16 // esize end
  local nv = s.cols // vec                      -- vectors per row
  local block = math.min(512, round_up(nv, 32))
  local items = ceil_div(nv, block)
  if items * vec > M.ROW_VALUES_MAX[vec > 1 and "vector" or "scalar"] then
    return vec, nv, 512, 0                      -- row would not fit in registers
  end
  return vec, nv, block, items
end

-- How a block of the group-of-one kernel ("local", residual norm ops)
-- holds a row: M.LOCAL_ROW_VECS vectors per thread (16-byte vectors when
-- aligned), as few threads as that allows up to M.LOCAL_MAX_BLOCK, every
-- thread of the block with as many vectors as the others (5120 bf16
-- columns: 320 threads of 2 vectors, not 512 threads of which 128 hold
-- two and 384 one). Rows wider than M.ROW_VALUES_MAX values per thread are
-- streamed
-- (items 0). Chosen by measurement on one H200 against torch.compile
-- (tests/bench/norm_vs_torch.py, docs/perf-notes.md).
M.LOCAL_ROW_VECS = 2
M.LOCAL_MAX_BLOCK = 512
local function local_row_layout(s)
  local vec, nv = row_layout(s)
  local items = M.LOCAL_ROW_VECS
  if ceil_div(nv, items) > M.LOCAL_MAX_BLOCK then items = ceil_div(nv, M.LOCAL_MAX_BLOCK) end
  items = math.max(1, math.min(items, ceil_div(nv, 32)))  -- at least a warp of work
  local block = round_up(ceil_div(nv, items), 32)
  items = ceil_div(nv, block)
  if items * vec > M.ROW_VALUES_MAX[vec > 1 and "vector" or "scalar"] then
    return vec, nv, M.LOCAL_MAX_BLOCK, 0                -- streamed in a loop
  end
  return vec, nv, block, items
end

-- The cache hints of the group-of-one norm row ("local", rows in
-- registers, 16-byte vectors, plain normed output): spec.stream. x and
-- residual_in are then loaded without L1 allocation and both outputs
-- stored evict-first (st.global.cs). Measured on one H200 (sm_90;
-- docs/perf-notes.md, "Streaming hints in the band"), by the call's traffic (x and
-- residual_in read, residual_out and normed written: 4 x rows x row
-- bytes), at every width from 1024 to 8192 bf16 columns alike:
--   * traffic up to the L2: much slower (2048 x 2048: 6.3 -> 8.7 us);
--   * from the L2 to 1.44 times it: 1.5-7% faster (2048 x 4096, 1.28
--     times: 18.0 -> 16.8 us);
--   * from 1.5 times it: 1-3% slower, level at 4 times and more.
-- So the planner streams where the traffic lies in (L2, STREAM_MAX_L2S x
-- L2], with "L2" the band's base STREAM_L2_BYTES: 50 MiB, the figure the
-- band was measured against. The H200 reports 60 MiB of L2;
-- a 60 MiB base would drop the measured gains at 1.0-1.125 times 50 MiB
-- and take in 2600 x 4096 (+1-3%), so the base stays as measured. Other
-- archs, not measured, keep the plain accesses.
M.STREAM_L2_BYTES = { sm_90 = 50 * 1024 * 1024, sm_90a = 50 * 1024 * 1024 }
M.STREAM_MAX_L2S = { num = 7, den = 5 }   -- 1.4: below the 1.44 still measured faster

-- The rows of a group-of-one norm call of shape s that stream are those
-- above stream_min_rows(s) up to stream_max_rows(s); both nil where the
-- kernel never does (no L2 size for the arch, or rows not 16-byte vectors).
local function stream_bounds(s)
  local l2 = M.STREAM_L2_BYTES[s.arch]
  local row_bytes = s.cols * DTYPES[s.dtype].bytes
  if not l2 or row_bytes % 16 ~= 0 then return nil end
  local max_traffic = l2 * M.STREAM_MAX_L2S.num // M.STREAM_MAX_L2S.den
  return l2 // (4 * row_bytes), max_traffic // (4 * row_bytes)
end
local function stream_min_rows(s) return (stream_bounds(s)) end
local function stream_max_rows(s) return select(2, stream_bounds(s)) end

-- Whether a group-of-one norm call of shape s with row layout vec, items
-- streams (stream_bounds). Only the measured layouts do: up to
-- M.LOCAL_ROW_VECS vectors per thread (bf16 up to 8192 columns, f32 up to
-- 4096). Wider rows (4 vectors per thread) spilled when streamed (bf16
-- 16384 columns: 32 bytes of stack, f32 8192: 8), which their plain
-- kernels do not.
local function local_streams(s, vec, items)
  local lo, hi = stream_bounds(s)
  return lo ~= nil and vec > 1 and items > 0 and items <= M.LOCAL_ROW_VECS and s.fp8 == "none"
    and s.rows > lo and s.rows <= hi
end

-- The grid cap of a norm kernel: the caller's max_blocks, else the signal
-- slots, or for the group-of-one kernel one block per row.
local function norm_grid_cap(s, algo)
  if s.max_blocks > 0 then return s.max_blocks end
  return algo == "local" and M.LOCAL_MAX_GRID or M.MAX_BLOCKS
end

-- Whether an LL kernel can hold the row of a row layout, and with which
-- block and items. The row stays in registers, at most 16 values per
-- thread (more spills next to the LL state). Wider rows (bf16/f16 up to
-- 16384 cols, f32 up to 8192) fit with blocks of up to 1024 threads in
-- groups of up to `wide_group`: __launch_bounds__(1024, 1) caps a thread at
-- 64 registers, and the LL state grows with the group. In allgather_rmsnorm
-- 2 vectors per thread fit up to 4 ranks; 3 vectors (f32 12288) or 8 ranks
-- spill (conformance measures it). Returns block, items, or nil when the
-- row does not fit.
local function ll_row_fit(g, vec, nv, block, items, wide_group)
  if items == 0 or vec == 1 or g < 2 then return nil end
  local wide_items = ceil_div(nv, 1024)
  if items * vec > 16 and wide_items * vec <= 16 and wide_items <= 2 and g <= wide_group then
    block = round_up(ceil_div(nv, wide_items), 32)
    items = ceil_div(nv, block)
  end
  if items * vec > 16 then return nil end
  return block, items
end

-- The kernel name's last part: how the row is held (`unrolled` names
-- items in registers, e.g. "u2" or "ll2"; items 0 is a looped row).
local function row_tag(unrolled, items)
  return items == 0 and "loop" or unrolled .. items
end

local function plan_allgather_rmsnorm(s)
  local g = s.group_size
  local vec, nv, block, items = (g == 1 and local_row_layout or row_layout)(s)
  local algo = items == 0 and "looped" or (g == 1 and "local" or "unrolled")
  -- Small gathered tensors (every shard then fits the LL lines) use the
  -- barrier-free LL push.
  local ll_block, ll_items = ll_row_fit(g, vec, nv, block, items, 4)
  if ll_block and s.rows <= ll_max_rows(s) then
    algo, block, items = "ll", ll_block, ll_items
  end
  local grid = clamp(s.rows, 1, norm_grid_cap(s, algo))
  return {
    op = s.op, dtype = s.dtype, group = g, algo = algo, vec = vec,
    block = block, grid = grid, cols = s.cols, items = items, fp8 = s.fp8, arch = s.arch,
    template = OPS[s.op].template,
    kernel = string.format("collgen_allgather_rmsnorm_%s_g%d_c%d_v%d_%s",
                           s.dtype, g, s.cols, vec,
                           row_tag(({ ll = "ll", ["local"] = "local_u" })[algo] or "u", items)),
    -- the barrier kernels pull every shard; LL pushes its own; a group
    -- of one reads its own
    peer_reads = (algo == "ll" or algo == "local") and {} or { "input" }, peer_writes = {},
  }
end

-- allreduce + residual add + RMSNorm; s.rows are the rows of each rank.
--   ll:       x of every rank fits the LL lines (16-byte aligned, row in
--             registers): each rank pushes its x to every peer, no barrier.
--   local:    a group of one: residual add and RMSNorm, no barrier, one
--             block per row (local_row_layout), gamma loaded with the row.
--   oneshot:  up to the one-shot size: each rank pulls every peer's rows
--             and normalizes them itself; two barriers.
--   rowsplit: above it: rank r sums the rows of its slice (rows*r/G ..
--             rows*(r+1)/G), writes residual_out into every rank, then each
--             rank normalizes all rows from its own copy; two barriers, and
--             2(G-1)/G instead of G-1 tensors over the links per rank.
-- In place needs nothing special: no algorithm reads a residual_in
-- another rank may overwrite (templates/allreduce_residual_rmsnorm.cu.tpl).
-- An FP8 output (s.fp8 "dynamic" or "static") plans as the plain op: the
-- same algorithm, layout and so the same sum order, so normed_f32 has the
-- same bits; only the epilogue and the kernel name's suffix differ.
local function plan_allreduce_residual_rmsnorm(s)
  local g = s.group_size
  local vec, nv, block, items = row_layout(s)
  -- No 1024-thread LL rows: summing the peers' lines next to the residual
  -- needs more than their 64 registers (3 ranks spilled 80 bytes, 2 left
  -- no margin).
  local ll_block, ll_items = ll_row_fit(g, vec, nv, block, items, 1)
  -- FP8 dynamic output adds a block max per row: f32 rows of more than 8
  -- values per thread at 7 or 8 ranks spilled (72 bytes at g8, 8192 cols),
  -- so they take the one-shot path.
  if ll_block and s.fp8 == "dynamic" and s.dtype == "f32" and g >= 7 and ll_items * vec > 8 then
    ll_block = nil
  end
  local algo
  if g == 1 then
    algo = "local"
    vec, nv, block, items = local_row_layout(s)
  elseif ll_block and s.rows <= ll_max_rows(s) then
    algo, block, items = "ll", ll_block, ll_items
  elseif s.rows <= oneshot_max_rows(s) then
    algo = "oneshot"
  else
    algo = "rowsplit"
  end
  local cap = norm_grid_cap(s, algo)
  local grid_rows = algo == "rowsplit" and ceil_div(s.rows, g) or s.rows  -- rowsplit: a slice
  local stream = algo == "local" and local_streams(s, vec, items)
  return {
    op = s.op, dtype = s.dtype, group = g, algo = algo, vec = vec,
    block = block, grid = clamp(grid_rows, 1, cap), cols = s.cols, items = items,
    fp8 = s.fp8, stream = stream, arch = s.arch, template = OPS[s.op].template,
    kernel = string.format("collgen_allreduce_residual_rmsnorm_%s_g%d_c%d_v%d_%s_%s%s%s",
                           s.dtype, g, s.cols, vec, algo, row_tag("u", items),
                           s.fp8 == "none" and "" or "_e4m3_" .. s.fp8, stream and "_cs" or ""),
    -- one-shot and row split pull every rank's x; row split pushes its
    -- slice's residual_out into every rank; LL pushes x only
    peer_reads = (algo == "ll" or algo == "local") and {} or { "x" },
    peer_writes = algo == "rowsplit" and { "residual_out" } or {},
  }
end

-- broadcast: after a barrier every non-root rank pulls the root's input
-- into its own output (16-byte vectors when every pointer is aligned, a
-- scalar tail), the root copies input to output unless in place; a
-- closing barrier keeps the root's input until the peers are done. One
-- kernel per element size, group size and vector width; a group of one is
-- a copy.
local function plan_broadcast(s)
  local esize, bits = DTYPES[s.dtype].bytes, spec_dtype(s)
  local g = s.group_size
  if s.elems < 0 then fail("elems must be >= 0") end
  local vec = s.aligned16 and (16 // esize) or 1
  local copy = g == 1 and { from = "input", to = "output" } or nil
  local block = 512
  return {
    op = s.op, dtype = bits, group = g, algo = "pull", vec = vec,
    block = block, grid = clamp(ceil_div(ceil_div(s.elems, vec), block), 1, grid_cap(s)),
    cols = 0, items = 0, fp8 = s.fp8, arch = s.arch, template = OPS[s.op].template,
    kernel = string.format("collgen_broadcast_%s_g%d_v%d", bits, g, vec),
    peer_reads = copy and {} or { "input" }, peer_writes = {}, copy = copy,
  }
end

-- The ops whose ranks pull byte ranges of peers' inputs into their own
-- output, s.elems being the most elements a rank moves (op `family`): one
-- kernel per element size (spec_dtype) and group, after a barrier, with a
-- closing barrier; 16-byte vectors where a range's pointers allow, chosen
-- at run time, else elements; a range already in place is skipped. A group
-- of one is a copy (nothing in place).
local function plan_pull_bytes(s, family)
  local g, esize, bits = s.group_size, DTYPES[s.dtype].bytes, spec_dtype(s)
  if s.elems < 0 then fail("elems must be >= 0") end
  local block = 512
  local grid = clamp(ceil_div(ceil_div(s.elems * esize, 16), block), 1, grid_cap(s))
  return {
    op = s.op, dtype = bits, group = g, algo = "pull", vec = 16 // esize,
    block = block, grid = grid, cols = 0, items = 0, fp8 = s.fp8, arch = s.arch,
    template = OPS[s.op].template,
    kernel = string.format("collgen_%s_%s_g%d", family, bits, g),
    peer_reads = g == 1 and {} or { "input" }, peer_writes = {},
    copy = g == 1 and { from = "input", to = "output" } or nil,
  }
end

-- all-gather; s.elems are the gathered elements: each rank pulls every
-- peer's shard into its output at the shard's offset.
local function plan_all_gather(s) return plan_pull_bytes(s, "all_gather") end

-- scatter; s.elems are the elements of the largest chunk (group rank 0's):
-- each rank pulls its chunk of the root's input; the closing barrier keeps
-- the root's input until the peers are done.
local function plan_scatter(s) return plan_pull_bytes(s, "scatter") end

-- reduce-scatter sum: s.rows = N, s.cols = elements per row, s.elems =
-- N * cols. One algorithm: after a barrier, rank i pulls its chunk of rows
-- from every rank and sums it (the one-shot pull of allreduce, on a chunk);
-- aligned16 already says whether every chunk start is 16-byte aligned
-- (runtime/op_reduce_scatter_sum.c). No LL variant yet.
local function plan_reduce_scatter_sum(s)
  local esize = DTYPES[s.dtype].bytes
  local g = s.group_size
  if s.elems < 0 then fail("elems must be >= 0") end
  local vec = s.aligned16 and (16 // esize) or 1
  local copy = g == 1 and { from = "input", to = "output" } or nil  -- the identity
  local block = 512
  local work = ceil_div(ceil_div(s.rows, g) * s.cols, vec)  -- vectors of the largest chunk
  return {
    op = s.op, dtype = s.dtype, group = g, algo = "pull", vec = vec,
    block = block, grid = clamp(ceil_div(work, block), 1, grid_cap(s)), cols = 0, items = 0,
    fp8 = s.fp8, arch = s.arch, template = OPS[s.op].template,
    kernel = string.format("collgen_reduce_scatter_sum_%s_g%d_v%d", s.dtype, g, vec),
    peer_reads = copy and {} or { "input" }, peer_writes = {}, copy = copy,
  }
end

-- reduce-scatter + residual add + RMSNorm; s.rows are the rows of the
-- largest chunk (chunk 0, collgen__scatter_chunk). One algorithm, the
-- barrier pull ("oneshot" of templates/residual_rmsnorm.cuh.tpl): after a
-- barrier each rank pulls its chunk's rows from every rank, sums them in
-- group-rank order, adds residual_in and normalizes; closing barrier. A
-- group of one runs allreduce_residual_rmsnorm's "local" kernel (add and
-- normalize, no barrier). Row layouts as
-- allreduce_residual_rmsnorm's; FP8 output plans alike.
local function plan_reduce_scatter_rmsnorm(s)
  local g = s.group_size
  local algo = g == 1 and "local" or "oneshot"
  local vec, _, block, items = (g == 1 and local_row_layout or row_layout)(s)
  local cap = norm_grid_cap(s, algo)
  local stream = algo == "local" and local_streams(s, vec, items)
  return {
    op = s.op, dtype = s.dtype, group = g, algo = algo, vec = vec,
    block = block, grid = clamp(s.rows, 1, cap), cols = s.cols, items = items,
    fp8 = s.fp8, stream = stream, arch = s.arch, template = OPS[s.op].template,
    kernel = string.format("collgen_reduce_scatter_rmsnorm_%s_g%d_c%d_v%d_%s%s%s%s",
                           s.dtype, g, s.cols, vec, algo == "local" and "local_" or "",
                           row_tag("u", items),
                           s.fp8 == "none" and "" or "_e4m3_" .. s.fp8, stream and "_cs" or ""),
    peer_reads = algo == "local" and {} or { "x" }, peer_writes = {},
  }
end

-- One planning function per op of the catalog; an op without one is an
-- error when the generator starts, not when a call arrives.
local PLANNERS = {
  allreduce_sum = plan_allreduce,
  allgather_rmsnorm = plan_allgather_rmsnorm,
  allreduce_residual_rmsnorm = plan_allreduce_residual_rmsnorm,
  broadcast = plan_broadcast,
  all_gather = plan_all_gather,
  reduce_scatter_sum = plan_reduce_scatter_sum,
  reduce_scatter_rmsnorm = plan_reduce_scatter_rmsnorm,
  scatter = plan_scatter,
}
for name in pairs(OPS) do
  if not PLANNERS[name] then error("planner: no planning function for op '" .. name .. "'", 0) end
end

-- Returns the spec for a shape, or raises "planner: <reason>".
function M.plan(s)
  check_common(s)
  local spec = PLANNERS[s.op](s)
  if spec.stream == nil then spec.stream = false end  -- only local norm rows stream
  return check_runtime_facts(spec)
end

-- The fields that change the generated source, in a fixed order. The grid
-- is deliberately absent: it is a launch parameter, not part of the kernel.
M.KEY_FIELDS = { "op", "dtype", "group", "algo", "vec", "block", "cols", "items", "fp8", "stream",
                 "arch", "kernel" }

-- Returns the canonical text of a spec, used for the cache key.
function M.canonical(spec)
  local parts = {}
  for i, k in ipairs(M.KEY_FIELDS) do parts[i] = k .. "=" .. tostring(spec[k]) end
  return table.concat(parts, ";")
end

-- What a call of each op can vary beyond its class: the size field and the
-- thresholds its planning function compares it against (above), and
-- whether the class lists cols. Every other field of a call is probed
-- over its whole (small) domain: the FP8 modes (writes_fp8) those the arch
-- has.
local VARIANT_AXES = {
  allreduce_sum = { size = "elems", thresholds = { ll_max_elems, oneshot_max_elems } },
  allgather_rmsnorm = { size = "rows", thresholds = { ll_max_rows }, per_cols = true },
  allreduce_residual_rmsnorm = { size = "rows",
                                 thresholds = { ll_max_rows, oneshot_max_rows, stream_min_rows,
                                               stream_max_rows },
                                 per_cols = true },
  broadcast = { size = "elems", thresholds = {} },
  all_gather = { size = "elems", thresholds = {} },  -- the kernel does not depend on the size
  reduce_scatter_sum = { size = "elems", thresholds = {} },
  reduce_scatter_rmsnorm = { size = "rows", thresholds = { stream_min_rows, stream_max_rows },
                             per_cols = true },
  scatter = { size = "elems", thresholds = {} },  -- the kernel does not depend on the size
}
for name in pairs(OPS) do
  if not VARIANT_AXES[name] then error("planner: no variant axes for op '" .. name .. "'", 0) end
end

M.HUGE_SIZE = 1 << 56   -- stands for every size above the last threshold

local function divisors(n)
  local t = {}
  for d = 1, n do if n % d == 0 then t[#t + 1] = d end end
  return t
end

-- Sizes to probe for a shape: 0, 1, each threshold and both its
-- neighbours, and a huge size; sorted, without duplicates.
local function size_probes(axes, s)
  local set, list = {}, {}
  local function add(v) if v >= 0 and not set[v] then set[v], list[#list + 1] = true, v end end
  add(0); add(1); add(M.HUGE_SIZE)
  for _, threshold in ipairs(axes.thresholds) do
    local t = threshold(s)   -- nil: the shape's kernel never crosses this one
    if t then add(t - 1); add(t); add(t + 1) end
  end
  table.sort(list)
  return list
end

-- The FP8 output modes a call of the class can ask for: "none" for ops
-- without FP8 output; else the class's list (class.fp8, checked when
-- planned), or by default every mode the arch supports, in name order.
local function fp8_probes(class)
  if not writes_fp8(class.op) then return { "none" } end
  if class.fp8 then return class.fp8 end
  local list = {}
  for name, f in pairs(FP8) do
    if ARCHS[class.arch] >= f.min_sm then list[#list + 1] = name end
  end
  table.sort(list)
  return list
end

local function copy_shape(s)
  local c = {}
  for k, v in pairs(s) do c[k] = v end
  return c
end

-- Every kernel the planner can pick for any call of a shape class:
-- class = { op, dtype, ngpus, arch, group_sizes (default: every divisor
-- of ngpus), cols (a list; needed by the RMSNorm ops), fp8 (a list of
-- mode names; default: every mode the arch supports) }. Any call means
-- any size (0 and huge included), 16-byte aligned or not, in place or not,
-- any max_blocks, each of the class's FP8 output modes (fp8_probes).
-- Returns a list of { shape, spec, canonical }, one per
-- distinct canonical text, where `shape` is a call that plans to `spec`.
-- Plans that are a copy (spec.copy) have no kernel and no entry.
-- Raises "planner: <reason>" on a bad class.
function M.variants(class)
  local axes = VARIANT_AXES[class.op]
  if not axes then fail("unknown op '" .. tostring(class.op) .. "'") end
  local cols_list = axes.per_cols and (class.cols or {}) or { 0 }
  if #cols_list == 0 then fail(class.op .. " needs a list of cols") end
  if class.fp8 and #class.fp8 == 0 then fail("the list of fp8 modes is empty") end
  local out, seen = {}, {}
  for _, g in ipairs(class.group_sizes or divisors(class.ngpus)) do
    for _, cols in ipairs(cols_list) do
      local base = {
        op = class.op, dtype = class.dtype, ngpus = class.ngpus, group_size = g,
        tensor_rank = OPS[class.op].min_rank, elems = 0, rows = 0, cols = cols,
        aligned16 = true, inplace = false, fp8 = "none", max_blocks = 0, arch = class.arch,
      }
      M.plan(base)   -- checks the op's own fields (cols) before the thresholds read them
      for _, size in ipairs(size_probes(axes, base)) do
        for _, aligned in ipairs({ true, false }) do
          for _, inplace in ipairs({ false, true }) do
            for _, fp8 in ipairs(fp8_probes(class)) do
              for _, max_blocks in ipairs({ 0, 1, M.MAX_BLOCKS }) do
                local s = copy_shape(base)
                s[axes.size], s.aligned16, s.inplace = size, aligned, inplace
                s.fp8, s.max_blocks = fp8, max_blocks
                local spec = M.plan(s)
                local text = M.canonical(spec)
                if not spec.copy and not seen[text] then
                  seen[text] = true
                  out[#out + 1] = { shape = s, spec = spec, canonical = text }
                end
              end
            end
          end
        end
      end
    end
  end
  return out
end

return M
