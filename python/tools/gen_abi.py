#!/usr/bin/env python3
"""Writes python/collgen/_abi_functions.py from src/collgen.h: every
COLLGEN_API function and callback typedef with its types, so that no
ctypes declaration of a function is written by hand.

  python3 python/tools/gen_abi.py          # rewrite the module
  python3 python/tools/gen_abi.py --check  # exit 1 if it is stale

The header is parsed here (class Header: comments stripped, bounds resolved
through its #defines, a struct declared by a field list such as
COLLGEN_SHAPE_FIELDS expanded from its rows). python/tests/test_header.py
uses the same parser to check the package's hand-written structs, and fails
when the checked-in module differs from what render() writes now. Standard
library only: the package never needs the header at run time.
"""

import argparse
import ast
import ctypes
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
HEADER = os.path.join(REPO, "src", "collgen.h")
OUTPUT = os.path.join(REPO, "python", "collgen", "_abi_functions.py")

SCALARS = {"int": ctypes.c_int, "float": ctypes.c_float, "double": ctypes.c_double,
           "size_t": ctypes.c_size_t, "int64_t": ctypes.c_int64, "unsigned": ctypes.c_uint,
           "char": ctypes.c_char, "unsigned char": ctypes.c_ubyte}
# The ctypes name of each type a scalar or pointer-sized argument becomes
# (ctypes aliases c_int64 to c_long: the name comes from here, not __name__).
CTYPES_NAMES = {t: "c_" + n for n, t in (
    ("int", ctypes.c_int), ("float", ctypes.c_float), ("double", ctypes.c_double),
    ("size_t", ctypes.c_size_t), ("int64", ctypes.c_int64), ("uint", ctypes.c_uint),
    ("char", ctypes.c_char), ("ubyte", ctypes.c_ubyte), ("char_p", ctypes.c_char_p),
    ("void_p", ctypes.c_void_p))}


# ---- the header ---------------------------------------------------------

def _constant(expr, defines):
    """The integer value of a #define expression (casts and suffixes dropped)."""
    expr = re.sub(r"\(\s*(?:u?int\d+_t|size_t|unsigned|int|long)\s*\)", "", expr)
    expr = re.sub(r"\b(\d+)[uUlL]+\b", r"\1", expr)
    expr = re.sub(r"\b[A-Z_][A-Z0-9_]*\b", lambda m: f"({defines[m.group(0)]})", expr)
    tree = ast.parse(expr, mode="eval")
    allowed = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Constant, ast.operator, ast.unaryop)
    if not all(isinstance(n, allowed) for n in ast.walk(tree)):
        raise ValueError(f"not a constant: {expr}")
    return eval(compile(tree, "<define>", "eval"))


class Header:
    """What collgen.h declares: ``functions`` {name: (ret, [arg types])} in
    declaration order, ``structs`` {typedef name: [(field, type)]},
    ``callbacks`` {name: (ret, [args])}, ``statuses`` [(name, code,
    description)] of COLLGEN_ERRNO_MAP in its order. A type is a ctypes scalar type,
    c_char_p, c_void_p (a handle or an opaque pointer), None (void),
    ("ptr", T), ("array", n, T), ("struct", public typedef name),
    ("callback", typedef name) or ("anon", [(field, T)]) for a struct
    declared inline."""

    def __init__(self, text):
        text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
        text = re.sub(r"//[^\n]*", " ", text)
        text = re.sub(r"\\\n", " ", text)
        self.defines = {}
        for m in re.finditer(r"^\s*#\s*define\s+(\w+)\s+(.+)$", text, flags=re.M):
            try:
                self.defines[m.group(1)] = _constant(m.group(2), self.defines)
            except (KeyError, ValueError, SyntaxError):
                pass
        # The status codes: XX(NAME, value, "description") of COLLGEN_ERRNO_MAP.
        m = re.search(r"^\s*#\s*define\s+COLLGEN_ERRNO_MAP\(\s*(\w+)\s*\)(.*)$", text, flags=re.M)
        self.statuses = [] if m is None else [
            (name, int(value), desc) for name, value, desc in re.findall(
                r"\b%s\(\s*(\w+)\s*,\s*(-?\d+)\s*,\s*\"([^\"\\]*)\"\s*\)" % m.group(1),
                m.group(2))]
        # Field lists (#define NAME(X) X(type, name, bound, ...) ...): a struct
        # body of NAME(MEMBER) declares "type name bound;" per row.
        self.field_lists = {}
        for m in re.finditer(r"^\s*#\s*define\s+(\w+)\((\w+)\)\s*(.*)$", text, flags=re.M):
            rows = re.findall(r"\b%s\(\s*([^,]+?)\s*,\s*(\w+)\s*,\s*([^,]*?)\s*," % m.group(2),
                              m.group(3))
            if rows and m.group(1).endswith("_FIELDS"):
                self.field_lists[m.group(1)] = "".join(f"{t} {n}{b};" for t, n, b in rows)
        code = re.sub(r"^\s*#.*$", " ", text, flags=re.M)
        for name, members in self.field_lists.items():
            code = re.sub(r"\b%s\(\s*\w+\s*\)" % name, lambda _: members, code)
        self.enums = set(re.findall(r"typedef\s+enum\s*\{[^}]*\}\s*(\w+)\s*;", code))
        self.opaque = set(re.findall(r"typedef\s+struct\s+\w+\s+(\w+)\s*;", code))
        self.pointers = set(re.findall(r"typedef\s+struct\s+\w+\s*\*\s*(\w+)\s*;", code))
        callback = r"typedef\s+([\w\s\*]+?)\(\s*\*\s*(\w+)\s*\)\s*\(([^)]*)\)\s*;"
        self.callback_names = {m.group(2) for m in re.finditer(callback, code)}
        self.structs = {}
        for m in re.finditer(r"typedef\s+struct\s+\w+\s*\{", code):
            body, end = _braced(code, m.end() - 1)
            name = re.match(r"\s*(\w+)\s*;", code[end:]).group(1)
            self.structs[name] = self._fields(body)
        self.callbacks = {
            m.group(2): (self._type(*_base_and_depth(m.group(1))), self._args(m.group(3)))
            for m in re.finditer(callback, code)}
        self.functions = {
            m.group(2): (self._type(*_base_and_depth(m.group(1))), self._args(m.group(3)))
            for m in re.finditer(r"COLLGEN_API\s+([\w\s\*]+?)\b(\w+)\s*\(([^)]*)\)\s*;", code)}

    def _type(self, base, depth):
        """The model (see the class) of C type ``base`` behind ``depth`` pointers."""
        if depth == 0:
            if base in self.callback_names:
                return ("callback", base)
            if base in self.enums:
                return ctypes.c_int
            if base in self.pointers:
                return ctypes.c_void_p
            if base == "void":
                return None
            if base in self.structs:
                return ("struct", base)
            return SCALARS[base]
        if depth == 1 and base == "char":
            return ctypes.c_char_p
        if depth == 1 and (base == "void" or base in self.opaque):
            return ctypes.c_void_p
        return ("ptr", self._type(base, depth - 1))

    def _args(self, text):
        """The models of a parameter list's types (names dropped)."""
        text = text.strip()
        if text == "void":
            return []
        out = []
        for arg in text.split(","):
            m = re.match(r"(.*?)\b(\w+)\s*$", arg.strip(), flags=re.S)
            out.append(self._type(*_base_and_depth(m.group(1))))
        return out

    def _fields(self, body):
        """[(name, type)] of a struct body (nested anonymous structs too)."""
        fields, pos = [], 0
        while pos < len(body):
            semi = body.find(";", pos)
            brace = body.find("{", pos)
            if semi < 0:
                break
            if 0 <= brace < semi:
                inner, end = _braced(body, brace)
                semi = body.find(";", end)
                kind = ("anon", self._fields(inner))
                decls = body[end:semi]
            else:
                decl = body[pos:semi]
                m = re.match(r"\s*((?:const\s+)?(?:unsigned\s+char|unsigned|\w+))\s+(.*)$", decl,
                             flags=re.S)
                kind, decls = m.group(1), m.group(2)
            for d in decls.split(","):
                m = re.match(r"\s*((?:\*\s*(?:const\s*)?)*)(\w+)\s*((?:\[[^\]]+\]\s*)*)$", d)
                depth = m.group(1).count("*")
                if isinstance(kind, tuple):
                    t = kind
                else:
                    t = self._type(*_base_and_depth(kind + " " + "*" * depth))
                for bound in reversed(re.findall(r"\[([^\]]+)\]", m.group(3))):
                    t = ("array", _constant(bound, self.defines), t)
                fields.append((m.group(2), t))
            pos = semi + 1
        return fields


def _braced(text, start):
    """(the text inside the braces opening at ``start``, the index past them)."""
    depth = 0
    for i in range(start, len(text)):
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        if depth == 0:
            return text[start + 1:i], i + 1
    raise ValueError("unbalanced braces")


def _base_and_depth(text):
    """(base type name, pointer depth) of a C type, qualifiers dropped."""
    depth = text.count("*")
    words = [w for w in re.findall(r"\w+", text) if w != "const"]
    return " ".join(words), depth


# ---- the generated module -----------------------------------------------

def spell(t):
    """A function type of the model as the generated module writes it: a
    ctypes name, a struct's or callback's typedef name, or None, behind one
    "*" per pointer level."""
    if t is None:
        return None
    if isinstance(t, tuple) and t[0] == "ptr":
        inner = spell(t[1])
        if inner is None:
            raise ValueError("void** has no ctypes spelling here")
        return "*" + inner
    if isinstance(t, tuple) and t[0] in ("struct", "callback"):
        return t[1]
    if isinstance(t, tuple):
        raise ValueError(f"{t[0]} is not a function argument type")
    return CTYPES_NAMES[t]


def _quoted(name):
    return "None" if name is None else f'"{name}"'


def _entry(opening, ret, args):
    """One entry, ``opening`` + `ret, [args]),`, wrapped at 99 columns."""
    items = [_quoted(spell(a)) for a in args]
    line = f"{opening}{_quoted(spell(ret))}, [{', '.join(items)}]),"
    if len(line) <= 99:
        return line
    lines, cur = [f"{opening}{_quoted(spell(ret))},"], "     ["
    for i, item in enumerate(items):
        piece = item + ("," if i < len(items) - 1 else "]),")
        if not cur.endswith("[") and len(cur) + 1 + len(piece) > 99:
            lines.append(cur)
            cur = "      " + piece
        else:
            cur += ("" if cur.endswith("[") else " ") + piece
    return "\n".join(lines + [cur])


def render(header_text):
    """The text of python/collgen/_abi_functions.py for this header."""
    h = Header(header_text)
    lines = ['"""Generated by python/tools/gen_abi.py from src/collgen.h: do not edit.',
             "",
             "Every callback typedef and COLLGEN_API function of collgen.h, in the",
             "header's order: CALLBACKS {typedef: (return, [arguments])}, FUNCTIONS",
             "[(name, return, [arguments])]. A type is a ctypes name (c_void_p for a",
             "handle or an opaque pointer), a public struct's or a callback's typedef",
             'name, or None for void, behind one "*" per pointer level; collgen._abi',
             "makes the ctypes declarations from them. python/tests/test_header.py",
             "fails when this file is not what the generator writes now.",
             '"""',
             "",
             "CALLBACKS = {"]
    lines += [_entry(f'    "{name}": (', *sig) for name, sig in h.callbacks.items()]
    lines += ["}", "", "FUNCTIONS = ["]
    lines += [_entry(f'    ("{name}", ', *sig) for name, sig in h.functions.items()]
    lines += ["]", ""]
    return "\n".join(lines)


def run(argv, render_fn, output, tool):
    """The command line of a generator of the package from collgen.h:
    rewrite ``output`` with ``render_fn(header text)``, or with --check
    exit 1 when it differs (``tool``: the script, from the repository root)."""
    p = argparse.ArgumentParser(description=f"Writes {os.path.relpath(output, REPO)} from "
                                "src/collgen.h")
    p.add_argument("--check", action="store_true",
                   help="exit 1 when the module differs from what the header gives")
    p.add_argument("--header", default=HEADER)
    p.add_argument("--output", default=output)
    a = p.parse_args(argv)
    with open(a.header) as f:
        text = render_fn(f.read())
    try:
        with open(a.output) as f:
            current = f.read()
    except FileNotFoundError:
        current = None
    if a.check:
        if current != text:
            print(f"{a.output} is stale: run python3 {tool}", file=sys.stderr)
            return 1
        return 0
    if current != text:
        with open(a.output, "w") as f:
            f.write(text)
    return 0


def main(argv=None):
    return run(argv, render, OUTPUT, "python/tools/gen_abi.py")


if __name__ == "__main__":
    sys.exit(main())
