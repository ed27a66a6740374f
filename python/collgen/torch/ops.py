"""torch.ops.collgen.*: collgen's ops as functional torch custom ops.

Registered with ``torch.library.Library("collgen", "DEF")`` (define + impl
+ register_fake, the low-overhead way; ``custom_op`` costs microseconds
per eager call). Each op takes the communicator as its handle (an int:
Dynamo cannot pass arbitrary objects), allocates fresh outputs, and never
returns an alias of an input, so torch.compile and CUDA graphs treat it
as a pure function. The fake implementations give the output shapes and
dtypes from the inputs alone.

  all_reduce(Tensor x, int comm, int group_size) -> Tensor
  all_gather_rmsnorm(Tensor shard, Tensor weight, float eps, float weight_offset,
                     int[] shard_rows, int comm, int group_size) -> (Tensor normed, Tensor residual)
  fused_add_rmsnorm(Tensor x, Tensor residual, Tensor weight, float eps, float weight_offset,
                    int comm, int group_size) -> (Tensor normed, Tensor residual_out)
  fused_add_rmsnorm_fp8(Tensor x, Tensor residual, Tensor weight, float eps,
                        float weight_offset, float static_scale, int comm, int group_size)
      -> (Tensor normed_fp8, Tensor residual_out, Tensor scales)
      static_scale 0.0 = a dynamic scale per row (scales: float32 [rows]); else
      that static scale (scales: empty).
  broadcast(Tensor x, int root, int comm, int group_size) -> Tensor
      group rank root's x on every rank (any dtype).
  all_gather(Tensor x, int[] shard_rows, int comm, int group_size) -> Tensor
      the group's shards [sum of its shard_rows, *x.shape[1:]], any dtype.
  reduce_scatter(Tensor x, int comm, int group_size) -> Tensor
      this rank's chunk of rows of the sum: [count, ...] (Communicator.reduce_scatter)
  reduce_scatter_rmsnorm(Tensor x, Tensor? residual, Tensor weight, float eps,
                         float weight_offset, int comm, int group_size)
      -> (Tensor normed, Tensor residual_out)   both [this rank's chunk of rows, cols]
  reduce_scatter_rmsnorm_fp8(... as above, float static_scale before comm)
      -> (Tensor normed_fp8, Tensor residual_out, Tensor scales)
"""

import torch

from .communicator import FP8_DTYPE, communicator_of

_LIB = torch.library.Library("collgen", "DEF")
_LIB.define("all_reduce(Tensor x, int comm, int group_size) -> Tensor")
_LIB.define("all_gather_rmsnorm(Tensor shard, Tensor weight, float eps, float weight_offset, "
            "int[] shard_rows, int comm, int group_size) -> (Tensor, Tensor)")
_LIB.define("fused_add_rmsnorm(Tensor x, Tensor residual, Tensor weight, float eps, "
            "float weight_offset, int comm, int group_size) -> (Tensor, Tensor)")
_LIB.define("fused_add_rmsnorm_fp8(Tensor x, Tensor residual, Tensor weight, float eps, "
            "float weight_offset, float static_scale, int comm, int group_size) "
            "-> (Tensor, Tensor, Tensor)")
_LIB.define("broadcast(Tensor x, int root, int comm, int group_size) -> Tensor")
_LIB.define("all_gather(Tensor x, int[] shard_rows, int comm, int group_size) -> Tensor")
_LIB.define("reduce_scatter(Tensor x, int comm, int group_size) -> Tensor")


def _all_reduce(x, comm, group_size):
    c = communicator_of(comm)
    dt = c._tensor(x, "x", None)
    out = torch.empty_like(x)
    c._eager_all_reduce(dt, x, out, group_size)
    return out


def _all_gather_rmsnorm(shard, weight, eps, weight_offset, shard_rows, comm, group_size):
    return communicator_of(comm)._eager_all_gather_rmsnorm(
        shard, weight, eps, weight_offset, list(shard_rows), group_size)


def _fused_add_rmsnorm(x, residual, weight, eps, weight_offset, comm, group_size):
    return communicator_of(comm)._eager_fused(x, residual, weight, eps, weight_offset, None,
                                              None, group_size)


def _fused_add_rmsnorm_fp8(x, residual, weight, eps, weight_offset, static_scale, comm,
                           group_size):
    if not static_scale >= 0:
        raise ValueError(f"static_scale: 0 (dynamic) or a scale > 0, not {static_scale}")
    return communicator_of(comm)._eager_fused(x, residual, weight, eps, weight_offset, None,
                                              float(static_scale), group_size)


def _broadcast(x, root, comm, group_size):
    c = communicator_of(comm)
    dt = c._tensor(x, "x", None, bits=True)
    out = torch.empty_like(x)
    c._eager_broadcast(dt, x, out, root, group_size)
    return out


def _reduce_scatter(x, comm, group_size):
    c = communicator_of(comm)
    dt = c._tensor(x, "x", None)
    out = x.new_empty(c._scatter_shape(x.shape, group_size, c.rank))
    c._eager_reduce_scatter(dt, x, out, group_size)
    return out


_LIB.define("reduce_scatter_rmsnorm(Tensor x, Tensor? residual, Tensor weight, float eps, "
            "float weight_offset, int comm, int group_size) -> (Tensor, Tensor)")
_LIB.define("reduce_scatter_rmsnorm_fp8(Tensor x, Tensor? residual, Tensor weight, float eps, "
            "float weight_offset, float static_scale, int comm, int group_size) "
            "-> (Tensor, Tensor, Tensor)")


def _reduce_scatter_rmsnorm(x, residual, weight, eps, weight_offset, comm, group_size):
    return communicator_of(comm)._eager_rs_norm(x, residual, weight, eps, weight_offset, None,
                                                None, group_size, False)


def _reduce_scatter_rmsnorm_fp8(x, residual, weight, eps, weight_offset, static_scale, comm,
                                group_size):
    if not static_scale >= 0:
        raise ValueError(f"static_scale: 0 (dynamic) or a scale > 0, not {static_scale}")
    normed, res, *scales = communicator_of(comm)._eager_rs_norm(
        x, residual, weight, eps, weight_offset, None, float(static_scale), group_size, True)
    return normed, res, scales[0] if scales else x.new_empty((0,), dtype=torch.float32)


_LIB.impl("reduce_scatter_rmsnorm", _reduce_scatter_rmsnorm, "CUDA")
_LIB.impl("reduce_scatter_rmsnorm_fp8", _reduce_scatter_rmsnorm_fp8, "CUDA")
_LIB.impl("all_reduce", _all_reduce, "CUDA")
_LIB.impl("all_gather_rmsnorm", _all_gather_rmsnorm, "CUDA")
_LIB.impl("fused_add_rmsnorm", _fused_add_rmsnorm, "CUDA")
_LIB.impl("fused_add_rmsnorm_fp8", _fused_add_rmsnorm_fp8, "CUDA")
_LIB.impl("broadcast", _broadcast, "CUDA")


def _all_gather(x, shard_rows, comm, group_size):
    return communicator_of(comm)._eager_all_gather(x, None, list(shard_rows), group_size)


_LIB.impl("all_gather", _all_gather, "CUDA")
_LIB.impl("reduce_scatter", _reduce_scatter, "CUDA")


@torch.library.register_fake("collgen::all_reduce")
def _all_reduce_fake(x, comm, group_size):
    return torch.empty_like(x)


@torch.library.register_fake("collgen::all_gather_rmsnorm")
def _all_gather_rmsnorm_fake(shard, weight, eps, weight_offset, shard_rows, comm, group_size):
    c = communicator_of(comm)
    rows = c._group_rows(list(shard_rows), group_size)
    normed = shard.new_empty((rows, shard.shape[-1]))
    return normed, torch.empty_like(normed)


@torch.library.register_fake("collgen::fused_add_rmsnorm")
def _fused_add_rmsnorm_fake(x, residual, weight, eps, weight_offset, comm, group_size):
    return torch.empty_like(x), torch.empty_like(x)


@torch.library.register_fake("collgen::fused_add_rmsnorm_fp8")
def _fused_add_rmsnorm_fp8_fake(x, residual, weight, eps, weight_offset, static_scale, comm,
                                group_size):
    rows = x.numel() // x.shape[-1]
    scales = x.new_empty((rows if static_scale == 0.0 else 0,), dtype=torch.float32)
    return x.new_empty(x.shape, dtype=FP8_DTYPE), torch.empty_like(x), scales


@torch.library.register_fake("collgen::broadcast")
def _broadcast_fake(x, root, comm, group_size):
    return torch.empty_like(x)


@torch.library.register_fake("collgen::all_gather")
def _all_gather_fake(x, shard_rows, comm, group_size):
    rows = communicator_of(comm)._group_rows(list(shard_rows), group_size)
    return x.new_empty((rows,) + tuple(x.shape[1:]))


@torch.library.register_fake("collgen::reduce_scatter")
def _reduce_scatter_fake(x, comm, group_size):
    c = communicator_of(comm)
    return x.new_empty(c._scatter_shape(x.shape, group_size, c.rank))


def _rs_chunk(x, comm, group_size):
    """The [count, cols] shape of this rank's chunk of x."""
    cols = x.shape[-1]
    return (communicator_of(comm)._chunk_rows(x.numel() // cols if cols else 0, group_size), cols)


@torch.library.register_fake("collgen::reduce_scatter_rmsnorm")
def _reduce_scatter_rmsnorm_fake(x, residual, weight, eps, weight_offset, comm, group_size):
    shape = _rs_chunk(x, comm, group_size)
    return x.new_empty(shape), x.new_empty(shape)


@torch.library.register_fake("collgen::reduce_scatter_rmsnorm_fp8")
def _reduce_scatter_rmsnorm_fp8_fake(x, residual, weight, eps, weight_offset, static_scale, comm,
                                     group_size):
    shape = _rs_chunk(x, comm, group_size)
    scales = x.new_empty((shape[0] if static_scale == 0.0 else 0,), dtype=torch.float32)
    return x.new_empty(shape, dtype=FP8_DTYPE), x.new_empty(shape), scales
