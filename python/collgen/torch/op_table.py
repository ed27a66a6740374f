"""The torch.ops.collgen ops, one row per collgen op.

A row names the torch op, the catalog op it runs, its arguments before
the two every op ends with (``int comm, int group_size``: the
communicator's handle and the group size), and a rule per output for the
fake implementation (the shapes torch.compile traces with). A row with
``fp8`` is also registered as ``<name>_fp8``: ``float static_scale``
before ``comm`` (0.0: a dynamic scale per row, else that one static
scale), the first output as float8 e4m3, and a third output ``scales``
(float32, one per row of the first output; empty for a static scale).

Each op allocates fresh outputs and never returns an alias of an input, so
torch.compile and CUDA graphs treat it as a pure function. Whether an op
takes the copy-only dtypes is the catalog's (catalog.MOVES_BITS), not a
row's. collgen/torch/ops.py registers every row; its eager work is the
Communicator's method ``_op_<name>`` (collgen/torch/communicator.py),
with the schema's arguments but comm. This module needs neither torch nor the
library, so the CPU tests read it (python/tests/test_torch_op_table.py).
"""

import math

__all__ = ["OPS", "Op", "Variant"]


# ---- output rules: (comm, x, a) -> shape --------------------------------
# x is the op's first argument (a tensor); a maps every argument name of
# the schema to its value; comm() is the Communicator behind a["comm"],
# looked up only by the rules that need it. None: x's shape, allocated
# like x (torch.empty_like), as the eager op allocates it.

def same(comm, x, a):
    """x's shape."""
    return None


def gathered(comm, x, a):
    """The group's shards along the first dimension: [sum of its shard_rows, *x.shape[1:]]."""
    return (comm()._group_rows(list(a["shard_rows"]), a["group_size"]),) + tuple(x.shape[1:])


def gathered_rows(comm, x, a):
    """The group's shards as rows: [sum of its shard_rows, cols]."""
    return (comm()._group_rows(list(a["shard_rows"]), a["group_size"]), x.shape[-1])


def scattered(comm, x, a):
    """This rank's chunk of x's first dimension: [count, *x.shape[1:]]."""
    c = comm()
    return tuple(c._scatter_shape(x.shape, a["group_size"], c.rank))


def scattered_rows(comm, x, a):
    """This rank's chunk of x's rows (every dimension but the last): [count, cols]."""
    cols = x.shape[-1]
    return (comm()._chunk_rows(x.numel() // cols if cols else 0, a["group_size"]), cols)


class Variant:
    """One registered torch op: ``name``, ``schema`` (the torch.library
    definition), ``arg_names`` (every argument, comm and group_size last),
    ``outputs`` [(shape rule, dtype)]: dtype None (x's), "fp8" or "f32";
    ``fp8``: the _fp8 form of its row."""

    __slots__ = ("name", "schema", "arg_names", "outputs", "fp8")

    def __init__(self, name, args, outputs, fp8):
        self.name, self.outputs, self.fp8 = name, tuple(outputs), fp8
        args = f"{args}, int comm, int group_size"
        self.arg_names = tuple(arg.split()[-1] for arg in args.split(","))
        ret = "Tensor" if len(outputs) == 1 else f"({', '.join(['Tensor'] * len(outputs))})"
        self.schema = f"{name}({args}) -> {ret}"


class Op:
    """One row: the torch op ``name`` running catalog op ``op``; ``args``,
    the schema's arguments before comm and group_size; ``outputs``, the
    output rules (above) with their dtypes; ``fp8``: also ``<name>_fp8``."""

    __slots__ = ("name", "op", "args", "outputs", "fp8")

    def __init__(self, name, op, args, outputs, fp8=False):
        self.name, self.op, self.args, self.outputs, self.fp8 = name, op, args, outputs, fp8

    def variants(self):
        """The torch ops of this row: itself, and its _fp8 form."""
        out = [Variant(self.name, self.args, [(r, None) for r in self.outputs], False)]
        if self.fp8:
            first, rest = self.outputs[0], self.outputs[1:]

            def scales(comm, x, a):
                """One per row of the first output (dynamic scale), else none."""
                shape = first(comm, x, a)
                rows = math.prod((x.shape if shape is None else shape)[:-1])
                return (rows if a["static_scale"] == 0.0 else 0,)

            out.append(Variant(f"{self.name}_fp8", f"{self.args}, float static_scale",
                               [(first, "fp8")] + [(r, None) for r in rest] + [(scales, "f32")],
                               True))
        return out


_NORM = "Tensor weight, float eps, float weight_offset"

OPS = (
    # the sum over the group, x's shape
    Op("all_reduce", "allreduce_sum", "Tensor x", [same]),
    # (normed, residual): the group's gathered rows and their RMSNorm
    Op("all_gather_rmsnorm", "allgather_rmsnorm", f"Tensor shard, {_NORM}, int[] shard_rows",
       [gathered_rows, gathered_rows]),
    # (normed, residual_out): residual_out = sum over the group + residual
    Op("fused_add_rmsnorm", "allreduce_residual_rmsnorm", f"Tensor x, Tensor residual, {_NORM}",
       [same, same], fp8=True),
    # group rank root's x on every rank (any dtype)
    Op("broadcast", "broadcast", "Tensor x, int root", [same]),
    # the group's shards [sum of its shard_rows, *x.shape[1:]], any dtype
    Op("all_gather", "all_gather", "Tensor x, int[] shard_rows", [gathered]),
    # this rank's chunk of rows of the sum (Communicator.reduce_scatter)
    Op("reduce_scatter", "reduce_scatter_sum", "Tensor x", [scattered]),
    # (normed, residual_out), both [this rank's chunk of rows, cols]
    Op("reduce_scatter_rmsnorm", "reduce_scatter_rmsnorm",
       f"Tensor x, Tensor? residual, {_NORM}", [scattered_rows, scattered_rows], fp8=True),
)
