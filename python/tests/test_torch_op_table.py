"""collgen/torch/op_table.py without torch: one row per catalog op, the
_fp8 forms where the library has them, the schemas the torch layer
registers, each row's C call against the entry points' declarations, and
the shape rules (the fake implementations' and the eager path's) on a
stand-in communicator and tensors. collgen.torch itself needs torch, so
the table is loaded from its file (it imports nothing of the package)."""

import importlib.util
import math
import os
import re

import pytest

from collgen import _abi, _abi_functions
from collgen.catalog import MOVES_BITS, OPS as CATALOG_OPS
from conftest import PACKAGE_DIR


def _load_table():
    spec = importlib.util.spec_from_file_location(
        "collgen_torch_op_table", os.path.join(PACKAGE_DIR, "torch", "op_table.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


table = _load_table()
VARIANTS = {v.name: v for row in table.OPS for v in row.variants()}


def test_every_catalog_op_has_exactly_one_row():
    ops = [row.op for row in table.OPS]
    assert sorted(ops) == sorted(CATALOG_OPS), "rows per catalog op"
    assert len({row.name for row in table.OPS}) == len(table.OPS)
    assert len(VARIANTS) == sum(len(row.variants()) for row in table.OPS)


def test_an_fp8_form_where_the_library_has_one():
    functions = {f[0] for f in _abi.FUNCTIONS}
    for row in table.OPS:
        assert row.fp8 == (f"collgen_rank_{row.op}_fp8" in functions), row.name


def test_every_row_has_its_public_method_and_no_path_of_its_own():
    # The rows drive the one eager / torch.ops / local path of
    # communicator.py; an op's own code is its public method alone.
    with open(os.path.join(PACKAGE_DIR, "torch", "communicator.py")) as f:
        source = f.read()
    for row in table.OPS:
        assert f"    def {row.name}(self, " in source, row.name
        assert re.search(rf'self\._run\(\s*"{row.name}", ', source), row.name
        own = re.findall(rf"def (_\w*{row.name}\w*)\(", source)
        assert own == [], f"{row.name} has methods of its own: {own}"
    with open(os.path.join(PACKAGE_DIR, "torch", "ops.py")) as f:
        assert not any(row.name in line for row in table.OPS for line in f
                       if not line.lstrip().startswith("#")), "ops.py names an op"


def _declared(name):
    """The argument types of a function of the generated _abi_functions."""
    return next(args for n, _, args in _abi_functions.FUNCTIONS if n == name)


@pytest.mark.parametrize("v", list(VARIANTS.values()), ids=list(VARIANTS))
def test_the_call_of_every_variant_is_its_entry_points(v):
    # call: the entry points' buffers and scalars between the shapes and
    # group_size, by name, each of the C type the header declares.
    types = dict(zip(v.arg_names, v.arg_types))
    tensors = [n for n in v.arg_names if types[n].startswith("Tensor")]
    scalars = [n for n in v.arg_names[:-2] if types[n] in ("int", "float")]
    named = tensors + list(v.output_names) + scalars + (["fp8_mode"] if v.fp8 else [])
    assert sorted(v.call) == sorted(named), v.name
    assert set(v.row.inputs) == set(tensors[1:]), "a shape rule for every other tensor"
    suffix = "_fp8" if v.fp8 else ""
    rank = _declared(f"collgen_rank_{v.row.op}{suffix}")
    local = _declared(f"collgen_{v.row.op}{suffix}")
    assert len(rank) == len(local) == 4 + len(v.call) + 2, v.name
    every = "shard_rows" in v.arg_names
    assert rank[:4] == ["c_void_p", "c_int", "c_int", "**c_int64" if every else "*c_int64"]
    assert local[:4] == ["c_void_p", "c_int", "c_int", "**c_int64"]
    assert rank[-2:] == ["c_int", "c_void_p"] and local[-2:] == ["c_int", "*c_void_p"]
    buffers = [n for n in v.call if n in tensors or n in v.output_names]
    assert list(v.call[:len(buffers)]) == buffers, f"{v.name}: the buffers come first"
    for name, r, m in zip(v.call, rank[4:], local[4:]):
        if name in tensors or name in v.output_names:
            want = "*c_float" if name == "scales" else "c_void_p"
            assert (r, m) == (want, "*" + want), f"{v.name}: {name}"
        else:
            want = "c_float" if types.get(name) == "float" else "c_int"
            assert (r, m) == (want, want), f"{v.name}: {name}"


def test_schemas():
    # The registered schemas of the torch layer (as before the table).
    assert VARIANTS["all_reduce"].schema == \
        "all_reduce(Tensor x, int comm, int group_size) -> Tensor"
    assert VARIANTS["all_gather_rmsnorm"].schema == (
        "all_gather_rmsnorm(Tensor shard, Tensor weight, float eps, float weight_offset, "
        "int[] shard_rows, int comm, int group_size) -> (Tensor, Tensor)")
    assert VARIANTS["reduce_scatter_rmsnorm_fp8"].schema == (
        "reduce_scatter_rmsnorm_fp8(Tensor x, Tensor? residual, Tensor weight, float eps, "
        "float weight_offset, float static_scale, int comm, int group_size) "
        "-> (Tensor, Tensor, Tensor)")
    for v in VARIANTS.values():
        assert v.arg_names[-2:] == ("comm", "group_size"), v.name
        assert len(set(v.arg_names)) == len(v.arg_names), v.name
        assert v.schema.startswith(f"{v.name}(Tensor "), v.name
        assert ("static_scale" in v.arg_names) == v.fp8 == v.name.endswith("_fp8")
        assert v.schema.count("Tensor") - v.schema.split("->")[0].count("Tensor") == \
            len(v.outputs), v.name


def test_the_copy_only_ops_are_the_catalogs():
    # The torch layer reads "moves bits" from here, never from the table.
    assert MOVES_BITS["broadcast"] and MOVES_BITS["all_gather"]
    assert not MOVES_BITS["allreduce_sum"] and not MOVES_BITS["reduce_scatter_rmsnorm"]
    assert set(MOVES_BITS) == set(CATALOG_OPS)


class _Tensor:
    def __init__(self, *shape):
        self.shape = shape

    def numel(self):
        return math.prod(self.shape)


class _Comm:
    """The Communicator's two shape helpers, with 4 ranks, this one rank 1."""
    rank = 1

    def _group_rows(self, rows, group_size):
        assert group_size == 0
        return sum(rows)

    def _chunk_rows(self, rows, group_size):
        return rows // 4 + (1 < rows % 4)


def _rules(name, x, **args):
    """(the outputs' (shape, dtype), the comms looked up, {input: shape}) of
    variant ``name`` for x and ``args``."""
    v = VARIANTS[name]
    a = dict(zip(v.arg_names, [x] + [None] * (len(v.arg_names) - 1)), comm=5, group_size=0)
    a.update(args)
    looked_up = []

    def comm():
        looked_up.append(a["comm"])
        return _Comm()

    shapes = [(rule(comm, x, a), dtype) for rule, dtype in v.outputs]
    return shapes, looked_up, {n: rule(comm, x, a) for n, rule in v.row.inputs.items()}


def _outputs(name, x, **args):
    return _rules(name, x, **args)[:2]


@pytest.mark.parametrize("shape", [(6, 8), (3, 5, 8), (0, 8)])
def test_output_rules(shape):
    x = _Tensor(*shape)
    rows = math.prod(shape[:-1])
    assert _outputs("all_reduce", x) == ([(None, None)], [])
    assert _outputs("broadcast", x) == ([(None, None)], [])
    got, comms = _outputs("all_gather", x, shard_rows=[shape[0], 2, 0, 1])
    assert got == [((shape[0] + 3,) + shape[1:], None)] and comms == [5]
    got, _, inputs = _rules("all_gather_rmsnorm", x, shard_rows=(rows, 1, 1, 1))
    assert got == [((rows + 3, 8), None)] * 2 and inputs == {"weight": (8,)}
    got, _ = _outputs("reduce_scatter", x)
    assert got == [((shape[0] // 4 + (1 < shape[0] % 4),) + shape[1:], None)]
    count = rows // 4 + (1 < rows % 4)
    got, _, inputs = _rules("reduce_scatter_rmsnorm", x)
    assert got == [((count, 8), None)] * 2
    assert inputs == {"residual": (count, 8), "weight": (8,)}, "residual: like residual_out"
    got, comms, inputs = _rules("fused_add_rmsnorm", x)
    assert got == [(None, None)] * 2 and comms == []
    assert inputs == {"residual": None, "weight": (8,)}
    for static, n in ((0.0, 1), (2.5, 0)):
        got = _outputs("fused_add_rmsnorm_fp8", x, static_scale=static)[0]
        assert got == [(None, "fp8"), (None, None), ((rows * n,), "f32")]
        got = _outputs("reduce_scatter_rmsnorm_fp8", x, static_scale=static)[0]
        assert got == [((count, 8), "fp8"), ((count, 8), None), ((count * n,), "f32")]
