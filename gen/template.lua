-- The collgen template engine.
--
-- A template is CUDA C with two additions:
--   * a line whose first non-blank character is `%` is a Lua statement;
--   * `${expr}` anywhere in a text line is replaced by the value of expr.
-- A template compiles to a Lua chunk with exactly the template's line layout
-- (line N of the template is line N of the chunk), loaded under the chunk name
-- "@templates/<name>", so Lua errors read "templates/<name>:<line>: ...".
-- While rendering, `#line N "templates/<name>"` directives are emitted when
-- the output drifts from the template, so NVRTC errors also point back at the
-- template line. Rendering is deterministic: no table iteration order is used.

local M = {}

-- Splits text into lines; a trailing newline does not make an extra line.
local function split_lines(text)
  local lines = {}
  for line in (text .. "\n"):gmatch("(.-)\r?\n") do lines[#lines + 1] = line end
  if text:sub(-1) == "\n" then lines[#lines] = nil end
  return lines
end

-- Turns one text line into a Lua argument list: literal pieces as quoted
-- strings, ${expr} pieces as __str(expr). Braces inside expr must balance.
local function text_parts(line, name, lineno)
  local parts, pos = {}, 1
  while true do
    local s = line:find("${", pos, true)
    if not s then break end
    if s > pos then parts[#parts + 1] = string.format("%q", line:sub(pos, s - 1)) end
    local depth, i = 1, s + 2
    while i <= #line and depth > 0 do
      local c = line:sub(i, i)
      if c == "{" then depth = depth + 1 elseif c == "}" then depth = depth - 1 end
      i = i + 1
    end
    if depth > 0 then
      error(string.format("templates/%s:%d: unterminated ${ expression", name, lineno), 0)
    end
    parts[#parts + 1] = "__str(" .. line:sub(s + 2, i - 2) .. ")"
    pos = i
  end
  if pos <= #line then parts[#parts + 1] = string.format("%q", line:sub(pos)) end
  if #parts == 0 then parts[1] = '""' end
  return table.concat(parts, ", ")
end

-- Compiles template text to Lua source with the same line layout.
function M.translate(text, name)
  local out = {}
  for i, line in ipairs(split_lines(text)) do
    local code = line:match("^%s*%%(.*)$")
    if code then
      out[i] = code
    else
      out[i] = string.format("__emit(%d, %s)", i, text_parts(line, name, i))
    end
  end
  -- The chunk receives its environment as its argument; binding it on line 1
  -- keeps the line layout unchanged.
  out[1] = "local _ENV = ...; " .. (out[1] or "")
  return table.concat(out, "\n") .. "\n"
end

-- The name under which R.render_text compiles its text (never a file).
M.TEXT_NAME = "<text>"

-- Creates a renderer. `load_text(name)` returns a template's text;
-- `compile_chunk(code, chunkname)` loads Lua text (the chunk binds its
-- environment from its argument).
function M.new(load_text, compile_chunk, utils)
  local R = { cache = {} }

  local function compile(text, name)
    return compile_chunk(M.translate(text, name), "@templates/" .. name)
  end

  local function chunk_for(name)
    local fn = R.cache[name]
    if not fn then
      local text = load_text("templates/" .. name)
      if not text then error("no template named '" .. name .. "'", 0) end
      fn = compile(text, name)
      R.cache[name] = fn
    end
    return fn
  end

  -- Renders the template `name` (compiled: `top`) with variables `vars`.
  local function render(name, top, vars, line_directives)
    local out = {}
    local cur_file, next_line = nil, -1
    local env

    local function str(v)
      if v == nil then error("template expression is nil", 2) end
      if type(v) == "boolean" then return v and "true" or "false" end
      if math.type(v) == "float" then
        if v == math.floor(v) and math.abs(v) < 2^53 then
          return string.format("%d.0f", math.floor(v))
        end
        return string.format("%.9gf", v)
      end
      return tostring(v)
    end

    local function run(tname, fn)
      fn = fn or chunk_for(tname)
      local emit = function(lineno, ...)
        local text = table.concat({...})
        if line_directives and (cur_file ~= tname or next_line ~= lineno) then
          out[#out + 1] = string.format('#line %d "templates/%s"', lineno, tname)
        end
        out[#out + 1] = text
        cur_file, next_line = tname, lineno + 1
        if text:find("\n", 1, true) then next_line = -1 end
      end
      local saved_emit = rawget(env, "__emit")
      rawset(env, "__emit", emit)
      fn(env)
      rawset(env, "__emit", saved_emit)
      cur_file = nil
    end

    local mt = {
      __index = function(_, k)
        local v = vars[k]
        if v ~= nil then return v end
        v = utils[k]
        if v ~= nil then return v end
        error("undefined template variable '" .. tostring(k) .. "'", 2)
      end,
    }
    env = setmetatable({ __str = str, include = function(n) run(n) end }, mt)
    run(name, top)
    return table.concat(out, "\n") .. "\n"
  end

  -- Renders template `name` with variables `vars`. `line_directives` turns
  -- #line output on or off. Returns the CUDA C text.
  function R.render(name, vars, line_directives)
    return render(name, chunk_for(name), vars, line_directives)
  end

  -- Renders template text (not a file of the tree; it may include them)
  -- as R.render would; its errors name "templates/<text>".
  function R.render_text(text, vars, line_directives)
    return render(M.TEXT_NAME, compile(text, M.TEXT_NAME), vars, line_directives)
  end

  return R
end

return M
