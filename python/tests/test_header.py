"""The package's C declarations (collgen._abi) against src/collgen.h: every
bound function's return and argument types, every public struct's fields
(names, order, types, array bounds) and the two callback typedefs. The
header is parsed here (comments stripped, bounds resolved through its
#defines, a struct declared by a field list such as COLLGEN_SHAPE_FIELDS
expanded from its rows); the checker is itself tested on wrong declarations."""

import ast
import ctypes
import re
import warnings
from ctypes import POINTER, c_char_p, c_void_p

import pytest

from collgen import _abi
from conftest import HEADER

SCALARS = {"int": ctypes.c_int, "float": ctypes.c_float, "double": ctypes.c_double,
           "size_t": ctypes.c_size_t, "int64_t": ctypes.c_int64, "unsigned": ctypes.c_uint,
           "char": ctypes.c_char, "unsigned char": ctypes.c_ubyte}
CALLBACKS = {"collgen_allgather_fn": _abi.ALLGATHER_FN, "collgen_log_fn": _abi.LOG_FN}


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
    """What collgen.h declares: ``functions`` {name: (ret, [arg types])},
    ``structs`` {typedef name: [(field, type)]}, ``callbacks`` {name: (ret,
    [args])}; types are the model of ``ctype_of`` (see there)."""

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
        self.structs = {}
        for m in re.finditer(r"typedef\s+struct\s+\w+\s*\{", code):
            body, end = _braced(code, m.end() - 1)
            name = re.match(r"\s*(\w+)\s*;", code[end:]).group(1)
            self.structs[name] = self._fields(body)
        self.callbacks = {
            m.group(2): (self._type(*_base_and_depth(m.group(1))), self._args(m.group(3)))
            for m in re.finditer(r"typedef\s+([\w\s\*]+?)\(\s*\*\s*(\w+)\s*\)\s*\(([^)]*)\)\s*;",
                                 code)}
        self.functions = {
            m.group(2): (self._type(*_base_and_depth(m.group(1))), self._args(m.group(3)))
            for m in re.finditer(r"COLLGEN_API\s+([\w\s\*]+?)\b(\w+)\s*\(([^)]*)\)\s*;", code)}

    def _type(self, base, depth):
        """The ctypes model of C type ``base`` behind ``depth`` pointers."""
        if depth == 0:
            if base in CALLBACKS:
                return CALLBACKS[base]
            if base in self.enums:
                return ctypes.c_int
            if base in self.pointers:
                return c_void_p
            if base == "void":
                return None
            if base in self.structs:
                return ("struct", base)
            return SCALARS[base]
        if depth == 1 and base == "char":
            return c_char_p
        if depth == 1 and (base == "void" or base in self.opaque):
            return c_void_p
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


# ---- the package's side, in the same model ------------------------------

def ctype_of(t):
    """A ctypes type in the comparison model: scalars and callback types as
    themselves, ("ptr", T), ("array", n, T), ("struct", public typedef name)
    or ("anon", [(field, T)]) for a struct the header declares inline."""
    public = {cls: name for name, cls in _abi.STRUCTS.items()}
    if isinstance(t, type) and issubclass(t, ctypes.Array):
        return ("array", t._length_, ctype_of(t._type_))
    if isinstance(t, type) and issubclass(t, ctypes._Pointer):
        return ("ptr", ctype_of(t._type_))
    if isinstance(t, type) and issubclass(t, ctypes.Structure):
        if t in public:
            return ("struct", public[t])
        return ("anon", [(n, ctype_of(ft)) for n, ft in t._fields_])
    return t


def struct_fields(cls):
    """[(field, type)] of a ctypes Structure in the comparison model."""
    return [(n, ctype_of(t)) for n, t in cls._fields_]


def function_mismatches(header, functions):
    """A line per function of ``functions`` (_abi.FUNCTIONS' form) that the
    header lacks or declares otherwise."""
    out = []
    for name, restype, argtypes in functions:
        if name not in header.functions:
            out.append(f"{name}: not declared COLLGEN_API in collgen.h")
            continue
        want_ret, want_args = header.functions[name]
        got = (ctype_of(restype), [ctype_of(a) for a in argtypes])
        if got != (want_ret, want_args):
            out.append(f"{name}: package {got}, header {(want_ret, want_args)}")
    return out


def struct_mismatches(header, structs):
    """A line per struct of ``structs`` ({typedef name: ctypes class}) whose
    fields differ from the header's."""
    out = []
    for name, cls in structs.items():
        if name not in header.structs:
            out.append(f"{name}: no such struct in collgen.h")
        elif struct_fields(cls) != header.structs[name]:
            out.append(f"{name}: package {struct_fields(cls)}\n  header  {header.structs[name]}")
    return out


@pytest.fixture(scope="module")
def header():
    """collgen.h, parsed."""
    with open(HEADER) as f:
        return Header(f.read())


# ---- the checks ---------------------------------------------------------

def test_parser_reads_the_whole_header(header):
    # Guards against a parser that finds little and so checks little.
    assert header.defines["COLLGEN_MAX_DEVICES"] == 8
    assert header.defines["COLLGEN_UNIQUE_ID_TEXT_LEN"] == 256
    assert len(header.functions) >= 40
    assert set(_abi.STRUCTS) <= set(header.structs)
    assert {"collgen_op_t", "collgen_dtype_t", "collgen_fp8_mode_t", "collgen_transport_t",
            "collgen_rank_state_t", "collgen_status_t"} <= header.enums
    assert header.structs["collgen_shape_t"][:3] == [
        ("op", ctypes.c_int), ("dtype", ctypes.c_int), ("ngpus", ctypes.c_int)]
    assert header.structs["collgen_shape_t"][-1] == ("arch", ("array", 16, ctypes.c_char))
    assert header.structs["collgen_plan_t"][3:8] == [(n, ctypes.c_int) for n in
                                                     ("group", "vec", "block", "grid", "items")]


def test_every_bound_function_matches_the_header(header):
    assert function_mismatches(header, _abi.FUNCTIONS) == []
    unbound = sorted(set(header.functions) - {f[0] for f in _abi.FUNCTIONS})
    if unbound:
        warnings.warn(f"collgen.h functions the package does not bind: {', '.join(unbound)}")


def test_every_struct_matches_the_header(header):
    assert struct_mismatches(header, _abi.STRUCTS) == []


def test_callback_types_match_the_header(header):
    for name, cb in CALLBACKS.items():
        ret, args = header.callbacks[name]
        assert (ctype_of(cb._restype_), [ctype_of(a) for a in cb._argtypes_]) == (ret, args), name


def test_checker_finds_wrong_declarations(header):
    wrong = [
        ("collgen_comm_create", ctypes.c_int,
         [POINTER(c_void_p), ctypes.c_int, POINTER(ctypes.c_int64), POINTER(_abi.CommOptions)]),
        ("collgen_rank_allreduce_sum", ctypes.c_int,
         [c_void_p, ctypes.c_int, ctypes.c_int, POINTER(ctypes.c_int64), c_void_p, c_void_p,
          ctypes.c_int]),
        ("collgen_status_name", None, [ctypes.c_int]),
        ("collgen_no_such_function", None, []),
    ]
    assert [m.split(":")[0] for m in function_mismatches(header, wrong)] == [w[0] for w in wrong]

    class Health(ctypes.Structure):
        _fields_ = [("ndev", ctypes.c_int), ("rank", _abi.RankHealth * 4)]

    class Options(ctypes.Structure):
        _fields_ = [(n, t) for n, t in reversed(_abi.CommOptions._fields_)]

    class Info(ctypes.Structure):
        _fields_ = [(n, ctypes.c_char * 16 * 8 * 8 if n == "p2p" else t)
                    for n, t in _abi.CommInfo._fields_]

    class Shape(ctypes.Structure):
        _fields_ = [(n, ctypes.c_int64 if n == "max_blocks" else t)
                    for n, t in _abi.Shape._fields_]

    bad = {"collgen_comm_health_t": Health, "collgen_comm_options_t": Options,
           "collgen_comm_info_t": Info, "collgen_shape_t": Shape, "collgen_nope_t": _abi.Plan}
    assert [m.split(":")[0] for m in struct_mismatches(header, bad)] == list(bad)
