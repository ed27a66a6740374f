"""collgen.torch: collgen's collectives for PyTorch programs (torch >= 2.4).

* ``Communicator(group=None, device=None, **options)``: one process per
  GPU, bootstrapped from a ``torch.distributed`` ProcessGroup (gloo or
  NCCL, the default group or a subgroup).
* ``Communicator.local(devices, **options)``: one process driving several
  GPUs; every op then takes and returns lists of tensors.
* A method for every collgen op, on the current stream, with outputs
  allocated when not given: ``all_reduce`` (allreduce_sum),
  ``all_gather_rmsnorm`` (allgather_rmsnorm), ``fused_add_rmsnorm``
  (allreduce_residual_rmsnorm, FP8 output too), ``all_gather``,
  ``reduce_scatter`` (reduce_scatter_sum), ``broadcast`` and
  ``reduce_scatter_rmsnorm`` (FP8 output too); the same ops as
  ``torch.ops.collgen.*`` (functional, with fake implementations; one per
  row of op_table.py, plus an ``_fp8`` form for the FP8 ones), so
  ``torch.compile(fullgraph=True)`` traces through them and CUDA graphs
  capture them. Every op runs one generic path driven by its row of
  op_table.py (collgen/torch/communicator.py).

Importing collgen.torch loads no library (torch.ops.collgen.* are
registered without it): the first Communicator does. See docs/python.md.
"""

from typing import TYPE_CHECKING, Any, Tuple

import torch as _torch


def _version_tuple(v: str) -> Tuple[int, ...]:
    out = []
    for part in v.split("+")[0].split(".")[:2]:
        digits = "".join(ch for ch in part if ch.isdigit())
        out.append(int(digits or 0))
    return tuple(out)


if _version_tuple(_torch.__version__) < (2, 4) or not hasattr(_torch.library, "register_fake"):
    raise ImportError(f"collgen.torch needs torch >= 2.4 (torch.library.register_fake); "
                      f"this is torch {_torch.__version__}. The core package `collgen` works "
                      "without torch.")

from . import communicator as _communicator  # noqa: E402
from .communicator import Communicator  # noqa: E402
from . import ops  # noqa: E402,F401  (registers torch.ops.collgen.*)

if TYPE_CHECKING:
    from .communicator import TORCH_DTYPES

__all__ = ["Communicator", "TORCH_DTYPES"]


def __getattr__(name: str) -> Any:
    """TORCH_DTYPES, made from the library's catalog at its first use."""
    if name == "TORCH_DTYPES":
        return _communicator.TORCH_DTYPES
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
