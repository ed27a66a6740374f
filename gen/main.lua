-- Entry point of the Lua side of the generator, called from gen/lua_host.c.
-- `import`, `read_source`, `compile_chunk` and the `catalog` table (ops,
-- dtypes, archs, device limits and struct layouts: gen/lua_catalog.h) come
-- from the C host; there is no io, os, load or require in this environment.
-- The environment, string, math, table and catalog are read-only, and every
-- call runs within the sandbox's time and memory budgets (docs/templates.md).

local planner = import("planner")
local template = import("template")

local M = {}

-- Helpers visible to every template (read-only).
local utils = setmetatable({
  -- Integer range [a, b] as a list, for `% for _, i in ipairs(range(0, n-1))`.
  range = function(a, b)
    local t = {}
    for i = a, b do t[#t + 1] = i end
    return t
  end,
  join = function(list, sep) return table.concat(list, sep) end,
  static_assert = function(cond, msg)
    if not cond then error("template assertion failed: " .. msg, 2) end
  end,
  string = string, math = math, table = table, ipairs = ipairs,
  tostring = tostring, error = error, type = type,
}, { __newindex = function() error("template utilities are read-only", 2) end })

local renderer = template.new(read_source, compile_chunk, utils)

function M.plan(shape) return planner.plan(shape) end

function M.canonical(spec) return planner.canonical(spec) end

-- Every kernel the planner can pick for a shape class (planner.variants).
function M.variants(class) return planner.variants(class) end

-- The roles a call of op may leave out (catalog.ops[op].role[id].optional),
-- as a set of role ids.
local function optional_roles(op)
  local set, o = {}, catalog.ops[op]
  for id, r in pairs(o and o.role or {}) do set[id] = r.optional or nil end
  return set
end

-- The template variables of a spec (a fresh table per render).
local function vars_of(spec)
  local d = planner.element_type(spec.dtype)  -- a catalog dtype or a size class ("b2")
  if not d then error("planner: unknown dtype '" .. tostring(spec.dtype) .. "'", 0) end
  return {
    spec = spec, kernel = spec.kernel, dtype = spec.dtype, ctype = d.ctype,
    esize = d.bytes, reduces = d.acc_type ~= nil, G = spec.group, VEC = spec.vec,
    BLOCK = spec.block,
    COLS = spec.cols, ITEMS = spec.items, algo = spec.algo, FP8 = spec.fp8, STREAM = spec.stream,
    abi = catalog.abi, optional = optional_roles(spec.op),
  }
end

-- Renders the CUDA C of a spec. `line_directives` adds #line directives
-- pointing at the templates.
function M.render(spec, line_directives)
  return renderer.render(spec.template, vars_of(spec), line_directives)
end

-- Renders template text with the variables of a spec, for tests and the
-- fuzzer (gen/lua_host.h, collgen__lua_render_text).
function M.render_text(spec, text, line_directives)
  return renderer.render_text(text, vars_of(spec), line_directives)
end

return M
