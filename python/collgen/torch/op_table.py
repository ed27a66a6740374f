"""The torch.ops.collgen ops, one row per collgen op: everything the torch
layer knows about an op besides its public method.

A row names the torch op, the catalog op it runs, its arguments before
the two every op ends with (``int comm, int group_size``: the
communicator's handle and the group size), its outputs (a name and a shape
rule each), the shape rule of every tensor argument but the first, and
``call``: the buffers and scalars of the op's C entry points
(``collgen_rank_<op>``, ``collgen_<op>``) in their order, by argument or
output name: its buffers, then its scalars (every entry point takes
``comm, dtype, tensor_rank, shapes`` before them and ``group_size`` and the
stream(s) after). ``rows``: the op works on rows, so the library is told
``x`` as [rows, cols], its leading dimensions flattened. A schema
argument ``int[] shard_rows`` is every rank's rows: the library is then
told every rank's shape (the gather ops' entry points take them).

A row with ``fp8`` is also registered as ``<name>_fp8``: ``float
static_scale`` before ``comm`` (0.0: a dynamic scale per row, else that
one static scale), the first output as float8 e4m3, and a third output
``scales`` (float32, one per row of the first output; empty for a static
scale). Its entry points are the ``_fp8`` ones, which take ``scales`` (NULL
unless dynamic) after the first output, and the FP8 mode and the static
scale after the other scalars.

Each op allocates fresh outputs and never returns an alias of an input, so
torch.compile and CUDA graphs treat it as a pure function. Whether an op
takes the copy-only dtypes is the catalog's (catalog.MOVES_BITS), not a
row's. collgen/torch/ops.py registers every variant (its fake implementation
is the output rules); collgen/torch/communicator.py runs every variant on
one generic path from these rows. This module needs neither torch nor the
library, so the CPU tests read it (python/tests/test_torch_op_table.py).
"""

import math
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

__all__ = ["OPS", "Op", "Variant", "X_ONLY"]

# A shape rule: (comm, x, a) -> a shape, or None for x's shape.
Rule = Callable[[Callable[[], Any], Any, Mapping[str, Any]], Optional[Tuple[int, ...]]]


# ---- shape rules: (comm, x, a) -> shape -----------------------------------
# x is the op's first argument (a tensor); a maps every argument name of
# the schema to its value; comm() is the Communicator behind a["comm"] (as
# the rank whose shapes are made), looked up only by the rules that need
# it. None: x's shape, allocated like x (torch.empty_like), as the eager op
# allocates it.

def same(comm: Callable[[], Any], x: Any, a: Mapping[str, Any]) -> Optional[Tuple[int, ...]]:
    """x's shape."""
    return None


def cols(comm: Callable[[], Any], x: Any, a: Mapping[str, Any]) -> Optional[Tuple[int, ...]]:
    """One per column of x: [cols] (a norm's weight)."""
    return (x.shape[-1],)


def gathered(comm: Callable[[], Any], x: Any, a: Mapping[str, Any]) -> Optional[Tuple[int, ...]]:
    """The group's shards along the first dimension: [sum of its shard_rows, *x.shape[1:]]."""
    return (comm()._group_rows(list(a["shard_rows"]), a["group_size"]),) + tuple(x.shape[1:])


def gathered_rows(comm: Callable[[], Any], x: Any,
                  a: Mapping[str, Any]) -> Optional[Tuple[int, ...]]:
    """The group's shards as rows: [sum of its shard_rows, cols]."""
    return (comm()._group_rows(list(a["shard_rows"]), a["group_size"]), x.shape[-1])


def scattered(comm: Callable[[], Any], x: Any, a: Mapping[str, Any]) -> Optional[Tuple[int, ...]]:
    """This rank's chunk of x's first dimension: [count, *x.shape[1:]]."""
    return (comm()._chunk_rows(x.shape[0], a["group_size"]),) + tuple(x.shape[1:])


def scattered_rows(comm: Callable[[], Any], x: Any,
                   a: Mapping[str, Any]) -> Optional[Tuple[int, ...]]:
    """This rank's chunk of x's rows (every dimension but the last): [count, cols]."""
    n = x.shape[-1]
    return (comm()._chunk_rows(x.numel() // n if n else 0, a["group_size"]), n)


# The rules that read x alone (neither comm nor a): the eager path calls
# them without making a.
X_ONLY = (same, cols)


class Variant:
    """One registered torch op of a row: ``name``, ``schema`` (the
    torch.library definition), ``arg_names`` (every argument, comm and
    group_size last) and ``arg_types`` ("Tensor", "Tensor?", "float",
    "int", "int[]"), ``outputs`` [(shape rule, dtype)]: dtype None (x's),
    "fp8" or "f32"; ``output_names``; ``call`` (the entry points' buffers
    and scalars by name; "fp8_mode" is the FP8 mode static_scale gives);
    ``fp8``: the _fp8 form of ``row``."""

    __slots__ = ("row", "name", "schema", "arg_names", "arg_types", "outputs", "output_names",
                 "call", "fp8")

    def __init__(self, row: "Op", name: str, args: str,
                 outputs: Sequence[Tuple[str, Rule, Optional[str]]], call: Sequence[str],
                 fp8: bool) -> None:
        self.row, self.name, self.fp8, self.call = row, name, fp8, tuple(call)
        self.outputs = tuple((rule, dtype) for _, rule, dtype in outputs)
        self.output_names = tuple(name for name, _, _ in outputs)
        args = f"{args}, int comm, int group_size"
        self.arg_names = tuple(arg.split()[-1] for arg in args.split(","))
        self.arg_types = tuple(arg.split()[0] for arg in args.split(","))
        ret = "Tensor" if len(outputs) == 1 else f"({', '.join(['Tensor'] * len(outputs))})"
        self.schema = f"{name}({args}) -> {ret}"


class Op:
    """One row: the torch op ``name`` running catalog op ``op``; ``args``,
    the schema's arguments before comm and group_size; ``outputs``
    [(name, shape rule)]; ``call``, the entry points' buffers and scalars
    (space-separated names of args and outputs); ``inputs`` {tensor
    argument: shape rule} for every tensor argument but the first (each of
    x's dtype); ``rows``: x is told as [rows, cols]; ``fp8``: also
    ``<name>_fp8``."""

    __slots__ = ("name", "op", "args", "outputs", "call", "inputs", "rows", "fp8")

    def __init__(self, name: str, op: str, args: str, outputs: Sequence[Tuple[str, Rule]],
                 call: str, inputs: Optional[Dict[str, Rule]] = None, rows: bool = False,
                 fp8: bool = False) -> None:
        self.name, self.op, self.args, self.outputs = name, op, args, list(outputs)
        self.call, self.inputs, self.rows, self.fp8 = call.split(), dict(inputs or {}), rows, fp8

    def variants(self) -> List[Variant]:
        """The torch ops of this row: itself, and its _fp8 form."""
        outputs = [(name, rule, None) for name, rule in self.outputs]
        out = [Variant(self, self.name, self.args, outputs, self.call, False)]
        if self.fp8:
            (first_name, first, _), rest = outputs[0], outputs[1:]

            def scales(comm: Callable[[], Any], x: Any,
                       a: Mapping[str, Any]) -> Optional[Tuple[int, ...]]:
                """One per row of the first output (dynamic scale), else none."""
                shape = first(comm, x, a)
                rows = math.prod((x.shape if shape is None else shape)[:-1])
                return (rows if a["static_scale"] == 0.0 else 0,)

            at = self.call.index(first_name) + 1
            out.append(Variant(self, f"{self.name}_fp8", f"{self.args}, float static_scale",
                               [(first_name, first, "fp8")] + rest + [("scales", scales, "f32")],
                               self.call[:at] + ["scales"] + self.call[at:]
                               + ["fp8_mode", "static_scale"], True))
        return out


_NORM = "Tensor weight, float eps, float weight_offset"
# The residual RMSNorm ops' entry points (one argument order for both).
_RESIDUAL_NORM_CALL = "x residual normed residual_out weight eps weight_offset"

OPS = (
    # the sum over the group, x's shape
    Op("all_reduce", "allreduce_sum", "Tensor x", [("out", same)], "x out"),
    # (normed, residual): the group's gathered rows and their RMSNorm
    Op("all_gather_rmsnorm", "allgather_rmsnorm", f"Tensor shard, {_NORM}, int[] shard_rows",
       [("normed", gathered_rows), ("residual", gathered_rows)],
       "shard normed residual weight eps weight_offset", {"weight": cols}, rows=True),
    # (normed, residual_out): residual_out = sum over the group + residual
    Op("fused_add_rmsnorm", "allreduce_residual_rmsnorm", f"Tensor x, Tensor residual, {_NORM}",
       [("normed", same), ("residual_out", same)], _RESIDUAL_NORM_CALL,
       {"residual": same, "weight": cols}, rows=True, fp8=True),
    # group rank root's x on every rank (any dtype)
    Op("broadcast", "broadcast", "Tensor x, int root", [("out", same)], "x out root"),
    # the group's shards [sum of its shard_rows, *x.shape[1:]], any dtype
    Op("all_gather", "all_gather", "Tensor x, int[] shard_rows", [("out", gathered)], "x out"),
    # this rank's chunk of rows of the sum (Communicator.reduce_scatter)
    Op("reduce_scatter", "reduce_scatter_sum", "Tensor x", [("out", scattered)], "x out"),
    # this rank's chunk of rows of group rank root's x (any dtype)
    Op("scatter", "scatter", "Tensor x, int root", [("out", scattered)], "x out root"),
    # (normed, residual_out), both [this rank's chunk of rows, cols]
    Op("reduce_scatter_rmsnorm", "reduce_scatter_rmsnorm",
       f"Tensor x, Tensor? residual, {_NORM}",
       [("normed", scattered_rows), ("residual_out", scattered_rows)], _RESIDUAL_NORM_CALL,
       {"residual": scattered_rows, "weight": cols}, rows=True, fp8=True),
)
