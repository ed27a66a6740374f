"""torch.ops.collgen.*: collgen's ops as functional torch custom ops.

Every variant of collgen/torch/op_table.py (its schemas, outputs and _fp8
forms are described there) is registered with
``torch.library.Library("collgen", "DEF")``: define + a CUDA kernel +
register_fake, the low-overhead way (``custom_op`` costs microseconds per
eager call). Each op takes the communicator as its handle (an int: Dynamo
cannot pass arbitrary objects) and allocates fresh outputs. The fake
implementation makes the outputs from the row's output rules alone; the
CUDA kernel is the Communicator's one eager path (``_op``) behind comm.
Nothing here names an op, and registering loads no library.
"""

from typing import Any, Callable

import torch

from .communicator import communicator_of, new_output
from .op_table import OPS, Variant


def _kernel(variant: Variant) -> Callable[..., Any]:
    """The CUDA kernel of a variant: its arguments, comm and group_size last,
    run by the eager path of the comm's Communicator."""
    name = variant.name

    def kernel(*args: Any) -> Any:
        *rest, comm, group_size = args
        return communicator_of(comm)._op(name, rest, group_size)
    return kernel


def _fake(variant: Variant) -> Callable[..., Any]:
    """The fake implementation of a variant: its outputs by its output rules."""
    def fake(*args: Any, **kwargs: Any) -> Any:
        a = dict(zip(variant.arg_names, args), **kwargs)
        x = a[variant.arg_names[0]]

        def comm() -> Any:
            return communicator_of(a["comm"])

        outs = [new_output(x, rule(comm, x, a), dtype) for rule, dtype in variant.outputs]
        return outs[0] if len(outs) == 1 else tuple(outs)
    return fake


_LIB = torch.library.Library("collgen", "DEF")
for _op in OPS:
    for _v in _op.variants():
        _LIB.define(_v.schema)
        _LIB.impl(_v.name, _kernel(_v), "CUDA")
        torch.library.register_fake(f"collgen::{_v.name}", _fake(_v))
