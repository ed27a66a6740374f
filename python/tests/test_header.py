"""The package's C declarations (collgen._abi) against src/collgen.h: every
bound function's return and argument types, every public struct's fields
(names, order, types, array bounds) and the two callback typedefs; and the
generated modules against what their generators write from the header now:
the function table (collgen/_abi_functions.py, python/tools/gen_abi.py) and
the exceptions (collgen/_errors_generated.py, python/tools/gen_errors.py).
The header is parsed by gen_abi.Header; the checker is itself tested on
wrong declarations."""

import ctypes
import os
import sys
from ctypes import POINTER, c_void_p

import pytest

from collgen import _abi
from conftest import HEADER, PACKAGE_DIR, REPO

sys.path.insert(0, os.path.join(REPO, "python", "tools"))
import gen_abi  # noqa: E402
import gen_errors  # noqa: E402

CALLBACKS = {"collgen_allgather_fn": _abi.ALLGATHER_FN, "collgen_log_fn": _abi.LOG_FN}


# ---- the package's side, in the same model ------------------------------

def ctype_of(t):
    """A ctypes type in the comparison model: scalars and callback types as
    themselves, ("ptr", T), ("array", n, T), ("struct", public typedef name)
    ("callback", typedef name) or ("anon", [(field, T)]) for a struct the
    header declares inline: gen_abi.Header's model."""
    public = {cls: name for name, cls in _abi.STRUCTS.items()}
    callbacks = {cb: name for name, cb in CALLBACKS.items()}
    if t in callbacks:
        return ("callback", callbacks[t])
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
        return gen_abi.Header(f.read())


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
    assert [f[0] for f in _abi.FUNCTIONS] == list(header.functions)


# Each generator of the package from collgen.h: (module, the module it
# writes, a change of the header, lines its output then holds).
GENERATED = {
    "gen_abi": (gen_abi, "_abi_functions.py",
                ("COLLGEN_API int collgen_comm_check(collgen_comm_t *comm);",
                 "COLLGEN_API int collgen_comm_check(collgen_comm_t *comm, int x);"),
                ['("collgen_comm_check", "c_int", ["c_void_p", "c_int"])']),
    "gen_errors": (gen_errors, "_errors_generated.py",
                   ('XX(NCCL, -18, "an NCCL call failed")',
                    'XX(NCCL, -18, "an NCCL call failed") XX(NEW_THING, -19, "it broke")'),
                   ['class NewThingError(Error):\n    """it broke"""', '"NEW_THING": -19,',
                    "-19: NewThingError,"]),
}


@pytest.mark.parametrize("tool", list(GENERATED))
def test_the_generated_module_is_current(tool):
    # A header change without `python3 python/tools/<tool>.py` fails here.
    generator, module, _, _ = GENERATED[tool]
    with open(HEADER) as f:
        want = generator.render(f.read())
    with open(os.path.join(PACKAGE_DIR, module)) as f:
        got = f.read()
    assert got == want, f"python/collgen/{module} is stale: run python3 python/tools/{tool}.py"


@pytest.mark.parametrize("tool", list(GENERATED))
def test_the_generator_notices_a_changed_header(tool, tmp_path):
    generator, module, (old, new), lines = GENERATED[tool]
    with open(HEADER) as f:
        text = f.read()
    changed = text.replace(old, new)
    assert changed != text
    out = tmp_path / module
    out.write_text(generator.render(text))
    assert generator.main(["--check", "--header", HEADER, "--output", str(out)]) == 0
    header = tmp_path / "collgen.h"
    header.write_text(changed)
    assert generator.main(["--check", "--header", str(header), "--output", str(out)]) == 1
    assert generator.main(["--header", str(header), "--output", str(out)]) == 0
    for line in lines:
        assert line in out.read_text(), line


def test_the_exceptions_are_the_headers_statuses(header):
    from collgen import _errors_generated as generated
    assert list(generated.STATUSES.items()) == [(n, c) for n, c, _ in header.statuses]
    assert len(header.statuses) >= 19 and header.statuses[0][:2] == ("OK", 0)
    for name, code, desc in header.statuses[1:]:
        cls = generated.BY_STATUS[code]
        assert cls.__name__ == gen_errors.class_name(name) and cls.status == code
        assert cls.__doc__ == desc


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
