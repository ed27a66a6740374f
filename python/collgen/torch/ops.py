"""torch.ops.collgen.*: collgen's ops as functional torch custom ops.

Every row of collgen/torch/op_table.py (schemas, outputs and the _fp8
forms are described there) is registered with
``torch.library.Library("collgen", "DEF")``: define + a CUDA kernel +
register_fake, the low-overhead way (``custom_op`` costs microseconds per
eager call). Each op takes the communicator as its handle (an int: Dynamo
cannot pass arbitrary objects) and allocates fresh outputs. The fake
implementation makes the outputs from the row's output rules alone; the
CUDA kernel is the op's entry of _EAGER below, called with the
Communicator and the schema's arguments but comm (static_scale, of an
_fp8 form, as ``static``).
"""

import torch

from .communicator import FP8_DTYPE, communicator_of
from .op_table import OPS

_DTYPES = {"fp8": FP8_DTYPE, "f32": torch.float32}


def _all_reduce(c, x, group_size):
    dt = c._tensor(x, "x", None)
    out = torch.empty_like(x)
    c._eager_all_reduce(dt, x, out, group_size)
    return out


def _all_gather_rmsnorm(c, shard, weight, eps, weight_offset, shard_rows, group_size):
    return c._eager_all_gather_rmsnorm(shard, weight, eps, weight_offset, list(shard_rows),
                                       group_size)


def _fused_add_rmsnorm(c, x, residual, weight, eps, weight_offset, group_size, static=None):
    return c._eager_fused(x, residual, weight, eps, weight_offset, None, static, group_size)


def _broadcast(c, x, root, group_size):
    dt = c._tensor(x, "x", None, op="broadcast")
    out = torch.empty_like(x)
    c._eager_broadcast(dt, x, out, root, group_size)
    return out


def _all_gather(c, x, shard_rows, group_size):
    return c._eager_all_gather(x, None, list(shard_rows), group_size)


def _reduce_scatter(c, x, group_size):
    dt = c._tensor(x, "x", None)
    out = x.new_empty(c._scatter_shape(x.shape, group_size, c.rank))
    c._eager_reduce_scatter(dt, x, out, group_size)
    return out


def _reduce_scatter_rmsnorm(c, x, residual, weight, eps, weight_offset, group_size,
                            static=None):
    out = c._eager_rs_norm(x, residual, weight, eps, weight_offset, None, static, group_size,
                           static is not None)
    if static is not None and len(out) == 2:   # a static scale: no scales, an empty tensor
        out = out + (x.new_empty((0,), dtype=torch.float32),)
    return out


# The eager work of each row of op_table.OPS, by its name.
_EAGER = {"all_reduce": _all_reduce, "all_gather_rmsnorm": _all_gather_rmsnorm,
          "fused_add_rmsnorm": _fused_add_rmsnorm, "broadcast": _broadcast,
          "all_gather": _all_gather, "reduce_scatter": _reduce_scatter,
          "reduce_scatter_rmsnorm": _reduce_scatter_rmsnorm}


def _kernel(eager, fp8):
    """The CUDA kernel of a variant: its arguments, comm and group_size last."""
    if not fp8:
        def kernel(*args):
            *rest, comm, group_size = args
            return eager(communicator_of(comm), *rest, group_size)
        return kernel

    def kernel_fp8(*args):
        *rest, static_scale, comm, group_size = args
        if not static_scale >= 0:
            raise ValueError(f"static_scale: 0 (dynamic) or a scale > 0, not {static_scale}")
        return eager(communicator_of(comm), *rest, group_size, static=float(static_scale))
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
        _LIB.impl(_v.name, _kernel(_EAGER[_op.name], _v.fp8), "CUDA")
        torch.library.register_fake(f"collgen::{_v.name}", _fake(_v))
