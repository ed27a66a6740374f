"""torch.ops.collgen.*: collgen's ops as functional torch custom ops.

Every row of collgen/torch/op_table.py (schemas, outputs and the _fp8
forms are described there) is registered with
``torch.library.Library("collgen", "DEF")``: define + a CUDA kernel +
register_fake, the low-overhead way (``custom_op`` costs microseconds per
eager call). Each op takes the communicator as its handle (an int: Dynamo
cannot pass arbitrary objects) and allocates fresh outputs. The fake
implementation makes the outputs from the row's output rules alone; the
CUDA kernel calls the method ``_op_<row name>`` of the Communicator behind
comm with the schema's other arguments (static_scale, of an _fp8 form, as
``static=``). Nothing here names an op.
"""

import torch

from .communicator import FP8_DTYPE, Communicator, communicator_of
from .op_table import OPS

_DTYPES = {"fp8": FP8_DTYPE, "f32": torch.float32}


def _kernel(method, fp8):
    """The CUDA kernel of a variant: its arguments, comm and group_size last,
    passed to ``method`` (a Communicator method) of the comm's Communicator."""
    if not fp8:
        def kernel(*args):
            *rest, comm, group_size = args
            return method(communicator_of(comm), *rest, group_size)
        return kernel

    def kernel_fp8(*args):
        *rest, static_scale, comm, group_size = args
        if not static_scale >= 0:
            raise ValueError(f"static_scale: 0 (dynamic) or a scale > 0, not {static_scale}")
        return method(communicator_of(comm), *rest, group_size, static=float(static_scale))
    return kernel_fp8


def _fake(variant):
    """The fake implementation of a variant: its outputs by its output rules."""
    def fake(*args, **kwargs):
        a = dict(zip(variant.arg_names, args), **kwargs)
        x = a[variant.arg_names[0]]

        def comm():
            return communicator_of(a["comm"])

        outs = []
        for rule, dtype in variant.outputs:
            shape = rule(comm, x, a)
            if shape is None and dtype is None:
                outs.append(torch.empty_like(x))
            else:
                outs.append(x.new_empty(x.shape if shape is None else shape,
                                        dtype=x.dtype if dtype is None else _DTYPES[dtype]))
        return outs[0] if len(outs) == 1 else tuple(outs)
    return fake


_LIB = torch.library.Library("collgen", "DEF")
for _op in OPS:
    for _v in _op.variants():
        _LIB.define(_v.schema)
        _LIB.impl(_v.name, _kernel(getattr(Communicator, f"_op_{_op.name}"), _v.fp8), "CUDA")
        torch.library.register_fake(f"collgen::{_v.name}", _fake(_v))
