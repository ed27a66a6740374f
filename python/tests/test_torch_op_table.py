"""collgen/torch/op_table.py without torch: one row per catalog op, the
_fp8 forms where the library has them, the schemas the torch layer
registers, and the output rules (the fake implementations' shapes) on a
stand-in communicator and tensors. collgen.torch itself needs torch, so
the table is loaded from its file (it imports nothing of the package)."""

import importlib.util
import math
import os

import pytest

from collgen import _abi
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


def test_every_row_has_its_communicator_method():
    # ops.py calls Communicator._op_<name> (an AttributeError at import without it).
    with open(os.path.join(PACKAGE_DIR, "torch", "communicator.py")) as f:
        source = f.read()
    for row in table.OPS:
        assert f"    def _op_{row.name}(self, " in source, row.name


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
    """The Communicator's three shape helpers, with 4 ranks, this one rank 1."""
    rank = 1

    def _group_rows(self, rows, group_size):
        assert group_size == 0
        return sum(rows)

    def _scatter_shape(self, shape, group_size, rank):
        return (shape[0] // 4 + (rank < shape[0] % 4),) + tuple(shape[1:])

    def _chunk_rows(self, rows, group_size):
        return rows // 4 + (1 < rows % 4)


def _outputs(name, x, **args):
    v = VARIANTS[name]
    a = dict(zip(v.arg_names, [x] + [None] * (len(v.arg_names) - 1)), comm=5, group_size=0)
    a.update(args)
    looked_up = []

    def comm():
        looked_up.append(a["comm"])
        return _Comm()

    shapes = [(rule(comm, x, a), dtype) for rule, dtype in v.outputs]
    return shapes, looked_up


@pytest.mark.parametrize("shape", [(6, 8), (3, 5, 8), (0, 8)])
def test_output_rules(shape):
    x = _Tensor(*shape)
    rows = math.prod(shape[:-1])
    assert _outputs("all_reduce", x) == ([(None, None)], [])
    assert _outputs("broadcast", x) == ([(None, None)], [])
    got, comms = _outputs("all_gather", x, shard_rows=[shape[0], 2, 0, 1])
    assert got == [((shape[0] + 3,) + shape[1:], None)] and comms == [5]
    got, _ = _outputs("all_gather_rmsnorm", x, shard_rows=(rows, 1, 1, 1))
    assert got == [((rows + 3, 8), None)] * 2
    got, _ = _outputs("reduce_scatter", x)
    assert got == [((shape[0] // 4 + (1 < shape[0] % 4),) + shape[1:], None)]
    count = rows // 4 + (1 < rows % 4)
    assert _outputs("reduce_scatter_rmsnorm", x)[0] == [((count, 8), None)] * 2
    assert _outputs("fused_add_rmsnorm", x)[0] == [(None, None)] * 2
    for static, n in ((0.0, 1), (2.5, 0)):
        got, _ = _outputs("fused_add_rmsnorm_fp8", x, static_scale=static)
        assert got == [(None, "fp8"), (None, None), ((rows * n,), "f32")]
        got, _ = _outputs("reduce_scatter_rmsnorm_fp8", x, static_scale=static)
        assert got == [((count, 8), "fp8"), ((count, 8), None), ((count * n,), "f32")]
