"""collgen.torch.Communicator: collgen's ops on torch tensors.

Eager calls go straight to the C library on the current stream (a few
microseconds of Python); under ``torch.compile`` the same methods call the
functional ``torch.ops.collgen.*`` ops (collgen/torch/ops.py), so Dynamo
traces them without a graph break. Every tensor is checked before the
call (device, dtype, contiguity, shape), each failure a TypeError or
ValueError naming the argument; the library then checks the call again
before anything is launched.
"""

import itertools
from ctypes import POINTER, c_float, c_int64, c_void_p, cast

import torch
import torch.distributed as dist

from .. import communicator as _core
from .._abi import lib
from ..buffers import c_int_arg
from ..catalog import COPY_ONLY_DTYPES, DTYPES, FP8_MODES, MOVES_BITS
from ..errors import check
from ..unique_id import UniqueId
from .op_table import OPS

__all__ = ["Communicator", "TORCH_DTYPES"]

FP8_DTYPE = getattr(torch, "float8_e4m3fn", None)

# The one table of torch dtypes and the catalog dtype each is moved as.
# torch.bool and float8 tensors are moved as u8 (their bytes), so a catalog
# dtype may have several torch dtypes; TORCH_DTYPES gives each its first.
# python/gpu_tests/test_torch_gpu.py checks that every catalog dtype is
# here with the catalog's element size.
_TORCH_TABLE = ((torch.bfloat16, "bf16"), (torch.float16, "f16"), (torch.float32, "f32"),
                (torch.uint8, "u8"), (torch.int8, "i8"), (torch.int16, "i16"),
                (torch.int32, "i32"), (torch.int64, "i64"), (torch.float64, "f64"),
                (torch.bool, "u8"), (FP8_DTYPE, "u8"))
_NAME_OF = {td: name for td, name in _TORCH_TABLE if td is not None and name in DTYPES}
TORCH_DTYPES = {}
for _td, _name in _NAME_OF.items():
    TORCH_DTYPES.setdefault(_name, _td)
# The torch dtypes the ops that compute on elements take (not copy-only).
_VALUE_OF = {td: DTYPES[name] for td, name in _NAME_OF.items() if name not in COPY_ONLY_DTYPES}

# The current stream as an int, without making a torch.cuda.Stream object
# (about 2 us of each eager call otherwise); the public call where absent.
_RAW_STREAM = getattr(torch._C, "_cuda_getCurrentRawStream", None)
# The catalog op of each torch op name (op_table.py's rows).
_CATALOG_OP = {row.name: row.op for row in OPS}
# ctypes array types of 1..8 int64 dimensions, made once.
_DIMS = [None] + [c_int64 * n for n in range(1, 9)]

# handle -> Communicator, for the torch.ops.collgen ops (Dynamo passes the
# handle, an int, where it cannot pass an object).
_REGISTRY = {}
_NEXT_HANDLE = itertools.count(1)


def communicator_of(handle):
    """The live Communicator behind a handle, or ValueError."""
    try:
        return _REGISTRY[handle]
    except KeyError:
        raise ValueError(f"comm: no live collgen communicator has handle {handle} "
                         "(closed, or from another process)") from None


class _Array:
    """A tensor's memory as a ``__cuda_array_interface__`` of unsigned
    integers (the interface has no bf16), for the core's list calls; the
    core is told the dtype by name."""

    __slots__ = ("__cuda_array_interface__",)

    def __init__(self, t):
        self.__cuda_array_interface__ = {
            "shape": tuple(t.shape), "typestr": f"<u{t.element_size()}",
            "data": (t.data_ptr(), False), "strides": None, "version": 3}


def _arrays(tensors):
    return None if tensors is None else [_Array(t) for t in tensors]


_is_compiling = torch.compiler.is_compiling


class Communicator:
    """A collgen communicator for torch tensors (see the module docstring)."""

    def __init__(self, group=None, device=None, **options):
        """One process per GPU over a torch.distributed ProcessGroup (default:
        the world). Rank 0 of the group makes the unique id, the group
        broadcasts it, and the ranks meet on collgen's socket (so cuMem
        handles travel between them). ``device``: this rank's GPU (default:
        the current CUDA device). ``options``: collgen_comm_options_t fields
        (timeout_ms, staging_bytes, cache_dir, transport, pdl, ...)."""
        if not dist.is_available() or not dist.is_initialized():
            raise RuntimeError("collgen.torch.Communicator: torch.distributed is not initialized; "
                               "call torch.distributed.init_process_group() first, or use "
                               "Communicator.local(devices) for one process")
        group = group if group is not None else dist.group.WORLD
        rank, nranks = dist.get_rank(group), dist.get_world_size(group)
        if rank < 0:
            raise ValueError("group: this process is not a member of it")
        dev = self._device_arg(device)
        box = [str(UniqueId.new()) if rank == 0 else None]
        src = dist.get_global_rank(group, 0) if group is not dist.group.WORLD else 0
        bcast_dev = dev if dist.get_backend(group) == "nccl" else None
        dist.broadcast_object_list(box, src=src, group=group, device=bcast_dev)
        core = _core.Communicator.init_rank(nranks, rank, box[0], dev.index, **options)
        self._init(core, [dev], group)

    @classmethod
    def local(cls, devices, **options):
        """One process driving ``devices`` (ints or torch devices, one rank
        each); every op takes and returns lists with one tensor per rank."""
        devs = [cls._device_arg(d) for d in devices]
        core = _core.Communicator([d.index for d in devs], **options)
        self = cls.__new__(cls)
        self._init(core, devs, None)
        return self

    def _init(self, core, devices, group):
        self._core = core
        self.devices = devices
        self.device = devices[0]
        self._index = self.device.index
        self.group = group
        self.rank, self.nranks = core.rank, core.nranks
        self.handle = next(_NEXT_HANDLE)
        self._h = core._ptr()
        self._tensors = []   # tensors of empty(), alive until close()
        self._dims_cache = {}
        # Ranks that share a GPU (allow_shared_devices) cannot share its
        # current stream: rank 0's kernel would wait for rank 1's, queued
        # behind it. They get a stream each, forked from and joined back
        # into the current stream around every call.
        shared = len({(d.type, d.index) for d in devices}) < len(devices)
        self._rank_streams = [torch.cuda.Stream(d) for d in devices] if shared else None
        _REGISTRY[self.handle] = self

    @staticmethod
    def _device_arg(device):
        if device is None:
            if not torch.cuda.is_available():
                raise RuntimeError("device: no CUDA device is visible to torch")
            return torch.device("cuda", torch.cuda.current_device())
        d = torch.device("cuda", device) if isinstance(device, int) else torch.device(device)
        if d.type != "cuda":
            raise ValueError(f"device: must be a CUDA device, not {d}")
        if d.index is None:
            d = torch.device("cuda", torch.cuda.current_device())
        return d

    # ---- life ----------------------------------------------------------

    @property
    def is_local(self):
        """True for Communicator.local (lists of tensors)."""
        return self.rank is None

    def close(self):
        """Synchronizes this communicator's devices, ends every registration
        and frees it. Idempotent; also the context manager's exit."""
        if _REGISTRY.pop(getattr(self, "handle", None), None) is None:
            return
        for d in self.devices:
            torch.cuda.synchronize(d)
        self._tensors.clear()
        self._core.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def abort(self):
        """Stops every kernel of the communicator now (safe from any thread);
        later calls raise collgen.AbortedError."""
        self._core.abort()

    def health(self):
        """Per-rank state: [{"state": "ok"|"timed_out"|"aborted", "peer": ...}]."""
        return self._core.health()

    def info(self):
        """Devices, archs, P2P matrix, hosts and routes (see collgen.Communicator.info)."""
        return self._core.info()

    def check(self):
        """Raises collgen.TimeoutError / AbortedError if a wait gave up."""
        self._core.check()

    def prepare(self, op, dtype, shape, **kwargs):
        """Loads the kernel of calls of ``op`` (a method's name, such as
        "all_reduce", or the catalog's, collgen.catalog.OPS) on ``dtype`` (torch dtype) tensors of ``shape`` on every rank, so the
        first such call loads nothing."""
        op = _CATALOG_OP.get(op, op)
        self._core.prepare(op, self._dtype_name(dtype, "dtype"), tuple(shape), **kwargs)

    def register(self, tensor):
        """Registers a CUDA tensor's memory for zero-copy reads by the peers
        (one process per GPU; collective: every rank, same order, same size).
        Returns a collgen.Registration."""
        self._tensor(tensor, "tensor", dtype=None, bits=True)
        reg = self._core.register(tensor.data_ptr(), tensor.numel() * tensor.element_size())
        reg.tensor = tensor
        return reg

    def empty(self, shape, dtype):
        """A new tensor on this rank's device, registered (see register())
        and kept alive until close(). Collective."""
        t = torch.empty(shape, dtype=dtype, device=self.device)
        self.register(t)
        self._tensors.append(t)
        return t

    # ---- argument checks -----------------------------------------------

    @staticmethod
    def _dtype_name(dtype, argument):
        try:
            return _NAME_OF[dtype]
        except (KeyError, TypeError):
            raise TypeError(f"{argument}: collgen takes {', '.join(map(str, _NAME_OF))}, "
                            f"not {dtype}") from None

    def _tensor(self, t, argument, dtype, shape=None, device=None, any_dtype=False, bits=False,
                op=None):
        """Checks one tensor; returns its catalog dtype value. A copy-only
        dtype (an integer, bool, float8 or f64 tensor) only with ``bits``
        (memory as such) or for an ``op`` (its catalog name) that the
        catalog says only moves bits (catalog.MOVES_BITS): the ops that
        compute on elements (``op`` None, or computing) refuse it here,
        naming the argument."""
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{argument} must be a torch.Tensor, not {type(t).__name__}")
        if device is None:
            if not t.is_cuda or t.get_device() != self._index:
                raise ValueError(f"{argument} is on {t.device}, the communicator's rank on "
                                 f"{self.device}")
        elif t.device != device:
            raise ValueError(f"{argument} is on {t.device}, the communicator's rank on {device}")
        if not t.is_contiguous():
            raise ValueError(f"{argument} must be contiguous")
        if dtype is not None and t.dtype != dtype:
            raise TypeError(f"{argument} has dtype {t.dtype}, expected {dtype}")
        if shape is not None and t.shape != shape:
            raise ValueError(f"{argument} has shape {tuple(t.shape)}, expected {tuple(shape)}")
        if any_dtype:
            return None
        name = _NAME_OF.get(t.dtype)
        if name is None:
            raise TypeError(f"{argument}: collgen takes {', '.join(map(str, _NAME_OF))}, "
                            f"not {t.dtype}")
        if name in COPY_ONLY_DTYPES and not (bits or op is not None and MOVES_BITS[op]):
            raise TypeError(f"{argument} has dtype {t.dtype}, which collgen only moves as bits "
                            f"({name} is a copy-only dtype); this op computes on elements: it "
                            f"takes {', '.join(map(str, _VALUE_OF))}")
        return DTYPES[name]

    def _norm_input(self, x, argument):
        dt = self._tensor(x, argument, None)
        if x.dim() < 1:
            raise ValueError(f"{argument} must have at least one dimension (the last is cols)")
        return dt

    def _lists(self, *named):
        """Local mode: checks every argument is a list of nranks tensors."""
        for name, v in named:
            if v is None:
                continue
            if not isinstance(v, (list, tuple)) or len(v) != self.nranks:
                raise TypeError(f"{name}: Communicator.local takes a list of {self.nranks} "
                                "tensors, one per rank")

    def _stream(self, device=None):
        if device is None and _RAW_STREAM is not None:
            return _RAW_STREAM(self._index)
        return torch.cuda.current_stream(device or self.device).cuda_stream

    def _local_call(self, call):
        """Runs call(streams) with one stream per rank: each device's current
        stream, or (ranks sharing a GPU) the ranks' own streams, ordered
        after the current streams' work and before their later work."""
        if self._rank_streams is None:
            return call([self._stream(d) for d in self.devices])
        current = [torch.cuda.current_stream(d) for d in self.devices]
        for cur, mine in zip(current, self._rank_streams):
            mine.wait_stream(cur)
        try:
            return call([s.cuda_stream for s in self._rank_streams])
        finally:
            for cur, mine in zip(current, self._rank_streams):
                cur.wait_stream(mine)

    def _fail(self, rc):
        check(rc, self._core.last_error)

    # ---- all_reduce ------------------------------------------------------

    def all_reduce(self, x, *, out=None, group_size=0):
        """The sum of ``x`` over each group of ``group_size`` ranks (0: all),
        bitwise equal on every rank, into ``out`` (allocated when None; may
        be ``x``). Returns ``out``. Local mode: lists of tensors."""
        if self.rank is None:
            return self._local_all_reduce(x, out, group_size)
        if _is_compiling():
            r = torch.ops.collgen.all_reduce(x, self.handle, group_size)
            return out.copy_(r) if out is not None else r
        # The checks of _tensor, inlined for the common case (about 1 us of
        # the eager call); _tensor raises the message when one fails.
        dt = _VALUE_OF.get(getattr(x, "dtype", None))
        if dt is None or not isinstance(x, torch.Tensor) or not x.is_cuda or \
                x.get_device() != self._index or not x.is_contiguous():
            dt = self._tensor(x, "x", None)
        if out is None:
            out = torch.empty_like(x)
        elif not isinstance(out, torch.Tensor) or out.dtype != x.dtype or out.shape != x.shape \
                or not out.is_cuda or out.get_device() != self._index or not out.is_contiguous():
            self._tensor(out, "out", x.dtype, x.shape)
        self._eager_all_reduce(dt, x, out, group_size)
        return out

    def _dims(self, shape):
        """The int64 array of a tensor shape for the library, made once per
        shape (the library only reads it)."""
        dims = self._dims_cache.get(shape)
        if dims is None:
            if not 1 <= len(shape) <= 8:
                raise ValueError(f"collgen takes tensors of 1 to 8 dimensions, not {len(shape)}")
            if len(self._dims_cache) > 1024:
                self._dims_cache.clear()
            dims = self._dims_cache[shape] = _DIMS[len(shape)](*shape)
        return dims

    def _eager_all_reduce(self, dt, x, out, group_size):
        if type(group_size) is not int or not -(1 << 31) <= group_size < (1 << 31):
            group_size = c_int_arg(group_size, "group_size")
        stream = _RAW_STREAM(self._index) if _RAW_STREAM is not None else self._stream()
        rc = lib.collgen_rank_allreduce_sum(self._h, dt, x.dim(), self._dims(x.shape),
                                            x.data_ptr(), out.data_ptr(), group_size, stream)
        if rc:
            self._fail(rc)

    def _op_all_reduce(self, x, group_size):
        """torch.ops.collgen.all_reduce's work (ops.py; op_table.py's row)."""
        dt = self._tensor(x, "x", None)
        out = torch.empty_like(x)
        self._eager_all_reduce(dt, x, out, group_size)
        return out

    def _local_all_reduce(self, xs, outs, group_size):
        self._lists(("x", xs), ("out", outs))
        for r, x in enumerate(xs):
            self._tensor(x, f"x[{r}]", xs[0].dtype, xs[0].shape, self.devices[r])
        outs = outs or [torch.empty_like(x) for x in xs]
        for r, o in enumerate(outs):
            self._tensor(o, f"out[{r}]", xs[0].dtype, xs[0].shape, self.devices[r])
        self._local_call(lambda streams: self._core.all_reduce(
            _arrays(xs), _arrays(outs), group_size=group_size, dtype=_NAME_OF[xs[0].dtype],
            stream=streams))
        return outs

    # ---- all_gather_rmsnorm ---------------------------------------------

    def _group_rows(self, shard_rows, group_size, rank=None):
        """The rows gathered by the group of ``rank`` (default: this rank),
        from every rank's shard rows; ValueError when group_size does not
        divide the ranks."""
        g = c_int_arg(group_size, "group_size") or self.nranks
        if g <= 0 or self.nranks % g:
            raise ValueError(f"group_size: {group_size} does not divide the {self.nranks} ranks")
        first = ((self.rank if rank is None else rank) // g) * g
        return sum(shard_rows[first:first + g])

    def _shard_rows(self, shard_rows, mine):
        """Every rank's shard rows (default: all ``mine``, this rank's),
        checked against this rank's."""
        rows = [mine] * self.nranks if shard_rows is None else [int(r) for r in shard_rows]
        if len(rows) != self.nranks:
            raise ValueError(f"shard_rows: {len(rows)} entries for {self.nranks} ranks")
        if rows[self.rank] != mine:
            raise ValueError(f"shard_rows[{self.rank}] is {rows[self.rank]}, but this rank's "
                             f"shard has {mine} rows")
        return rows

    def all_gather_rmsnorm(self, shard, weight, eps, *, weight_offset=0.0, shard_rows=None,
                           group_size=0):
        """Gathers the row shards of this rank's group (``shard``: [..., cols],
        leading dims flattened into rows) and normalizes every gathered row.
        Returns ``(normed, residual)``, both [gathered rows, cols]: the RMSNorm
        and the gathered rows themselves. ``shard_rows``: every rank's shard
        rows (default: all equal to this rank's)."""
        if self.is_local:
            return self._local_all_gather_rmsnorm(shard, weight, eps, weight_offset, group_size)
        self._norm_input(shard, "shard")
        cols = shard.shape[-1]
        mine = shard.numel() // cols if cols else 0
        rows = self._shard_rows(shard_rows, mine)
        if _is_compiling():
            return torch.ops.collgen.all_gather_rmsnorm(shard, weight, eps, weight_offset, rows,
                                                        self.handle, group_size)
        return self._eager_all_gather_rmsnorm(shard, weight, eps, weight_offset, rows,
                                              group_size)

    def _eager_all_gather_rmsnorm(self, shard, weight, eps, weight_offset, rows, group_size):
        dt = self._tensor(shard, "shard", None)
        cols = shard.shape[-1]
        self._tensor(weight, "weight", shard.dtype, (cols,))
        total = self._group_rows(rows, group_size)
        normed = torch.empty((total, cols), dtype=shard.dtype, device=self.device)
        residual = torch.empty_like(normed)
        arrays = [(c_int64 * 2)(r, cols) for r in rows]
        shapes = (POINTER(c_int64) * len(arrays))(*arrays)
        self._fail(lib.collgen_rank_allgather_rmsnorm(
            self._h, dt, 2, shapes, shard.data_ptr(), normed.data_ptr(), residual.data_ptr(),
            weight.data_ptr(), float(eps), float(weight_offset), c_int_arg(group_size,
                                                                            "group_size"),
            self._stream()))
        return normed, residual

    def _op_all_gather_rmsnorm(self, shard, weight, eps, weight_offset, shard_rows, group_size):
        """torch.ops.collgen.all_gather_rmsnorm's work."""
        return self._eager_all_gather_rmsnorm(shard, weight, eps, weight_offset, list(shard_rows),
                                              group_size)

    def _local_all_gather_rmsnorm(self, shards, weights, eps, weight_offset, group_size):
        self._lists(("shard", shards), ("weight", weights))
        cols = shards[0].shape[-1] if shards[0].dim() else 0
        rows = []
        for r, s in enumerate(shards):
            self._tensor(s, f"shard[{r}]", shards[0].dtype, None, self.devices[r])
            if s.dim() < 1 or s.shape[-1] != cols:
                raise ValueError(f"shard[{r}] has shape {tuple(s.shape)}; every shard needs "
                                 f"{cols} columns")
            self._tensor(weights[r], f"weight[{r}]", shards[0].dtype, (cols,), self.devices[r])
            rows.append(s.numel() // cols if cols else 0)
        normed, residual = [], []
        for r in range(self.nranks):
            total = self._group_rows(rows, group_size, r)
            normed.append(torch.empty((total, cols), dtype=shards[0].dtype, device=self.devices[r]))
            residual.append(torch.empty_like(normed[-1]))
        self._local_call(lambda streams: self._core.all_gather_rmsnorm(
            _arrays(shards), _arrays(weights), _arrays(normed), _arrays(residual), eps,
            weight_offset=weight_offset, group_size=group_size, dtype=_NAME_OF[shards[0].dtype],
            stream=streams))
        return normed, residual

    # ---- fused_add_rmsnorm ----------------------------------------------

    def fused_add_rmsnorm(self, x, residual, weight, eps, *, weight_offset=0.0,
                          residual_out=None, fp8=None, group_size=0):
        """The end of a tensor-parallel block: ``residual_out = sum(x over the
        group) + residual`` and its RMSNorm. Returns ``(normed, residual_out)``,
        or ``(normed, residual_out, scales)`` with ``fp8="dynamic"`` (normed as
        torch.float8_e4m3fn, scales float32 [rows]); ``fp8=<float>`` is one
        static scale. ``residual_out=residual`` updates the residual in place."""
        if self.is_local:
            return self._local_fused(x, residual, weight, eps, weight_offset, residual_out, fp8,
                                     group_size)
        static = self._fp8_arg(fp8)
        if _is_compiling():
            if static is None:
                normed, res = torch.ops.collgen.fused_add_rmsnorm(
                    x, residual, weight, eps, weight_offset, self.handle, group_size)
                out = (normed, res)
            else:
                normed, res, scales = torch.ops.collgen.fused_add_rmsnorm_fp8(
                    x, residual, weight, eps, weight_offset, static, self.handle, group_size)
                out = (normed, res, scales) if fp8 == "dynamic" else (normed, res)
            if residual_out is not None:
                residual_out.copy_(res)
                out = (out[0], residual_out) + out[2:]
            return out
        return self._eager_fused(x, residual, weight, eps, weight_offset, residual_out, static,
                                 group_size, dynamic_out=fp8 == "dynamic")

    @staticmethod
    def _fp8_arg(fp8):
        """None (no FP8), 0.0 (dynamic) or the static scale."""
        if fp8 is None:
            return None
        if FP8_DTYPE is None:
            raise TypeError("fp8: this torch has no torch.float8_e4m3fn")
        if fp8 == "dynamic":
            return 0.0
        if isinstance(fp8, (int, float)) and not isinstance(fp8, bool):
            if not fp8 > 0 or fp8 == float("inf"):
                raise ValueError(f"fp8: a static scale must be finite and > 0, not {fp8}")
            return float(fp8)
        raise TypeError(f"fp8 must be None, 'dynamic' or a float scale, not {fp8!r}")

    def _eager_fused(self, x, residual, weight, eps, weight_offset, residual_out, static,
                     group_size, dynamic_out=True):
        dt = self._norm_input(x, "x")
        self._tensor(residual, "residual", x.dtype, x.shape)
        cols = x.shape[-1]
        rows = x.numel() // cols if cols else 0
        self._tensor(weight, "weight", x.dtype, (cols,))
        if residual_out is None:
            residual_out = torch.empty_like(x)
        else:
            self._tensor(residual_out, "residual_out", x.dtype, x.shape)
        shape = _DIMS[2](rows, cols)
        g = c_int_arg(group_size, "group_size")
        if static is None:
            normed = torch.empty_like(x)
            self._fail(lib.collgen_rank_allreduce_residual_rmsnorm(
                self._h, dt, 2, shape, x.data_ptr(), residual.data_ptr(), normed.data_ptr(),
                residual_out.data_ptr(), weight.data_ptr(), float(eps), float(weight_offset), g,
                self._stream()))
            return normed, residual_out
        normed = torch.empty(x.shape, dtype=FP8_DTYPE, device=self.device)
        dynamic = static == 0.0
        scales = torch.empty((rows if dynamic else 0,), dtype=torch.float32, device=self.device)
        mode = FP8_MODES["dynamic" if dynamic else "static"]
        self._fail(lib.collgen_rank_allreduce_residual_rmsnorm_fp8(
            self._h, dt, 2, shape, x.data_ptr(), residual.data_ptr(), normed.data_ptr(),
            cast(c_void_p(scales.data_ptr() if dynamic else 0), POINTER(c_float)),
            residual_out.data_ptr(), weight.data_ptr(), float(eps), float(weight_offset), mode,
            static, g, self._stream()))
        return (normed, residual_out, scales) if dynamic_out else (normed, residual_out)

    def _op_fused_add_rmsnorm(self, x, residual, weight, eps, weight_offset, group_size,
                              static=None):
        """torch.ops.collgen.fused_add_rmsnorm's work (and, with ``static``,
        the _fp8 form's: normed, residual_out, scales)."""
        return self._eager_fused(x, residual, weight, eps, weight_offset, None, static,
                                 group_size)

    def _local_fused(self, xs, residuals, weights, eps, weight_offset, residual_outs, fp8,
                     group_size):
        self._lists(("x", xs), ("residual", residuals), ("weight", weights),
                    ("residual_out", residual_outs))
        static = self._fp8_arg(fp8)
        x0 = xs[0]
        if x0.dim() < 1:
            raise ValueError("x[0] must have at least one dimension (the last is cols)")
        cols = x0.shape[-1]
        rows = x0.numel() // cols if cols else 0
        for r in range(self.nranks):
            d = self.devices[r]
            self._tensor(xs[r], f"x[{r}]", x0.dtype, x0.shape, d)
            self._tensor(residuals[r], f"residual[{r}]", x0.dtype, x0.shape, d)
            self._tensor(weights[r], f"weight[{r}]", x0.dtype, (cols,), d)
            if residual_outs is not None:
                self._tensor(residual_outs[r], f"residual_out[{r}]", x0.dtype, x0.shape, d)
        res_out = residual_outs or [torch.empty_like(x) for x in xs]
        ndt = x0.dtype if static is None else FP8_DTYPE
        normed = [torch.empty(x0.shape, dtype=ndt, device=d) for d in self.devices]
        dynamic = static == 0.0
        scales = [torch.empty((rows,), dtype=torch.float32, device=d) for d in self.devices] \
            if dynamic else None
        fp8_arg = None if static is None else ("dynamic" if dynamic else static)
        self._local_call(lambda streams: self._core.fused_add_rmsnorm(
            _arrays(xs), _arrays(residuals), _arrays(weights), _arrays(normed), _arrays(res_out),
            eps, weight_offset=weight_offset, fp8=fp8_arg, scales=_arrays(scales),
            group_size=group_size, dtype=_NAME_OF[x0.dtype], stream=streams))
        return (normed, res_out, scales) if dynamic else (normed, res_out)

    # ---- broadcast -------------------------------------------------------

    def broadcast(self, x, root=0, *, out=None, group_size=0):
        """Group rank ``root``'s ``x`` on every rank of its group (each group
        of ``group_size`` ranks, 0: all), bit-exact, any dtype (integers,
        bool, float8 and f64 too), into ``out`` (allocated when None; may be
        ``x``: the in-place broadcast). Every rank passes a tensor of the
        same shape; only the root's is read. Returns ``out``. Local mode:
        lists of tensors."""
        if self.rank is None:
            return self._local_broadcast(x, root, out, group_size)
        if _is_compiling():
            r = torch.ops.collgen.broadcast(x, root, self.handle, group_size)
            return out.copy_(r) if out is not None else r
        dt = self._tensor(x, "x", None, op="broadcast")
        if out is None:
            out = torch.empty_like(x)
        else:
            self._tensor(out, "out", x.dtype, x.shape, op="broadcast")
        self._eager_broadcast(dt, x, out, root, group_size)
        return out

    def _eager_broadcast(self, dt, x, out, root, group_size):
        if x.dim() < 1:
            raise ValueError("x must have at least one dimension")
        rc = lib.collgen_rank_broadcast(self._h, dt, x.dim(), self._dims(x.shape), x.data_ptr(),
                                        out.data_ptr(), c_int_arg(root, "root"),
                                        c_int_arg(group_size, "group_size"), self._stream())
        if rc:
            self._fail(rc)

    def _op_broadcast(self, x, root, group_size):
        """torch.ops.collgen.broadcast's work."""
        dt = self._tensor(x, "x", None, op="broadcast")
        out = torch.empty_like(x)
        self._eager_broadcast(dt, x, out, root, group_size)
        return out

    def _local_broadcast(self, xs, root, outs, group_size):
        self._lists(("x", xs), ("out", outs))
        for r, x in enumerate(xs):
            self._tensor(x, f"x[{r}]", xs[0].dtype, xs[0].shape, self.devices[r], op="broadcast")
        outs = outs or [torch.empty_like(x) for x in xs]
        for r, o in enumerate(outs):
            self._tensor(o, f"out[{r}]", xs[0].dtype, xs[0].shape, self.devices[r], op="broadcast")
        self._local_call(lambda streams: self._core.broadcast(
            _arrays(xs), _arrays(outs), root, group_size=group_size, dtype=_NAME_OF[xs[0].dtype],
            stream=streams))
        return outs
    # ---- all_gather -----------------------------------------------------

    def all_gather(self, x, *, out=None, shard_rows=None, group_size=0):
        """The shards ``x`` ([rows, ...], any dtype; equal but for the first
        dimension, which may be 0) of this rank's group, concatenated in
        group-rank order: [sum of rows, ...], bit for bit. ``out``: the
        gathered tensor to write (allocated when None; ``x`` may be its own
        slice of it: in place). ``shard_rows``: every rank's rows (default:
        all equal to this rank's). Returns the gathered tensor. Local mode:
        lists of tensors."""
        if self.rank is None:
            return self._local_all_gather(x, out, group_size)
        self._tensor(x, "x", None, op="all_gather")
        if x.dim() < 1:
            raise ValueError("x: all_gather needs a tensor of at least one dimension")
        rows = self._shard_rows(shard_rows, x.shape[0])
        if _is_compiling():
            r = torch.ops.collgen.all_gather(x, rows, self.handle, group_size)
            return out.copy_(r) if out is not None else r
        return self._eager_all_gather(x, out, rows, group_size)

    def _eager_all_gather(self, x, out, rows, group_size):
        dt = self._tensor(x, "x", None, op="all_gather")
        shape = (self._group_rows(rows, group_size),) + tuple(x.shape[1:])
        if out is None:
            out = torch.empty(shape, dtype=x.dtype, device=self.device)
        else:
            self._tensor(out, "out", x.dtype, shape, op="all_gather")
        arrays = [_DIMS[x.dim()](r, *x.shape[1:]) for r in rows]
        shapes = (POINTER(c_int64) * len(arrays))(*arrays)
        self._fail(lib.collgen_rank_all_gather(self._h, dt, x.dim(), shapes, x.data_ptr(),
                                               out.data_ptr(), c_int_arg(group_size, "group_size"),
                                               self._stream()))
        return out

    def _op_all_gather(self, x, shard_rows, group_size):
        """torch.ops.collgen.all_gather's work."""
        return self._eager_all_gather(x, None, list(shard_rows), group_size)

    def _local_all_gather(self, xs, outs, group_size):
        self._lists(("x", xs), ("out", outs))
        x0 = xs[0]
        for r, x in enumerate(xs):
            self._tensor(x, f"x[{r}]", x0.dtype, None, self.devices[r], op="all_gather")
            if x.dim() < 1 or x.shape[1:] != x0.shape[1:]:
                raise ValueError(f"x[{r}] has shape {tuple(x.shape)}; every shard needs the "
                                 f"shape [rows, {', '.join(map(str, x0.shape[1:]))}]")
        rows = [x.shape[0] for x in xs]
        if outs is None:
            outs = [torch.empty((self._group_rows(rows, group_size, r),) + tuple(x0.shape[1:]),
                                dtype=x0.dtype, device=d) for r, d in enumerate(self.devices)]
        self._local_call(lambda streams: self._core.all_gather(
            _arrays(xs), _arrays(outs), group_size=group_size, dtype=_NAME_OF[x0.dtype],
            stream=streams))
        return outs

    # ---- reduce_scatter -------------------------------------------------

    def _scatter_shape(self, shape, group_size, rank):
        """The shape of `rank`'s chunk of a [N, ...] tensor: [count, ...]."""
        g = c_int_arg(group_size, "group_size") or self.nranks
        if g <= 0 or self.nranks % g:
            raise ValueError(f"group_size: {group_size} does not divide the {self.nranks} ranks")
        if len(shape) < 1:
            raise ValueError("reduce_scatter needs at least one dimension (the rows)")
        return (_core.scatter_chunk(shape[0], g, rank % g)[1],) + tuple(shape[1:])

    def reduce_scatter(self, x, *, out=None, group_size=0):
        """The sum of ``x`` ([N, ...], the same shape on every rank) over each
        group of ``group_size`` ranks (0: all); group rank i gets rows chunk
        i (N // G each, one more for the first N % G ranks) as [count_i,
        ...], allreduce's bits for those rows, into ``out`` (allocated when
        None; must not overlap ``x``). Returns ``out``. Local mode: lists."""
        if self.rank is None:
            return self._local_reduce_scatter(x, out, group_size)
        if _is_compiling():
            r = torch.ops.collgen.reduce_scatter(x, self.handle, group_size)
            return out.copy_(r) if out is not None else r
        dt = self._tensor(x, "x", None)
        shape = self._scatter_shape(x.shape, group_size, self.rank)
        if out is None:
            out = torch.empty(shape, dtype=x.dtype, device=x.device)
        else:
            self._tensor(out, "out", x.dtype, torch.Size(shape))
        self._eager_reduce_scatter(dt, x, out, group_size)
        return out

    def _eager_reduce_scatter(self, dt, x, out, group_size):
        self._fail(lib.collgen_rank_reduce_scatter_sum(
            self._h, dt, x.dim(), self._dims(x.shape), x.data_ptr(), out.data_ptr(),
            c_int_arg(group_size, "group_size"), self._stream()))

    def _op_reduce_scatter(self, x, group_size):
        """torch.ops.collgen.reduce_scatter's work."""
        dt = self._tensor(x, "x", None)
        out = x.new_empty(self._scatter_shape(x.shape, group_size, self.rank))
        self._eager_reduce_scatter(dt, x, out, group_size)
        return out

    def _local_reduce_scatter(self, xs, outs, group_size):
        self._lists(("x", xs), ("out", outs))
        for r, x in enumerate(xs):
            self._tensor(x, f"x[{r}]", xs[0].dtype, xs[0].shape, self.devices[r])
        shapes = [self._scatter_shape(xs[0].shape, group_size, r) for r in range(self.nranks)]
        outs = outs or [torch.empty(s, dtype=xs[0].dtype, device=d)
                        for s, d in zip(shapes, self.devices)]
        for r, o in enumerate(outs):
            self._tensor(o, f"out[{r}]", xs[0].dtype, torch.Size(shapes[r]), self.devices[r])
        self._local_call(lambda streams: self._core.reduce_scatter(
            _arrays(xs), _arrays(outs), group_size=group_size, dtype=_NAME_OF[xs[0].dtype],
            stream=streams))
        return outs

    # ---- reduce_scatter_rmsnorm -------------------------------------------

    def _chunk_rows(self, rows, group_size, rank=None):
        """Rows of ``rank``'s chunk (default: this rank) of x's rows;
        ValueError when group_size does not divide the ranks."""
        g = c_int_arg(group_size, "group_size") or self.nranks
        if g <= 0 or self.nranks % g:
            raise ValueError(f"group_size: {group_size} does not divide the {self.nranks} ranks")
        return _core.scatter_chunk(rows, g, (self.rank if rank is None else rank) % g)[1]

    def reduce_scatter_rmsnorm(self, x, weight, residual=None, eps=1e-6, *, weight_offset=0.0,
                               fp8=None, residual_out=None, group_size=0):
        """Sequence parallelism: every rank holds ``x`` [rows, cols]; group
        rank i gets chunk i of the rows summed over the group, plus
        ``residual`` (optional, [count_i, cols]), as ``residual_out``, and
        its RMSNorm. Returns ``(normed, residual_out)``, or with
        ``fp8="dynamic"`` also ``scales`` (float32 [count_i]); ``fp8=<float>``
        is one static scale. ``residual_out=residual`` updates it in place.
        Local mode: lists of per-rank tensors (residual None or a list)."""
        static = self._fp8_arg(fp8)
        if not self.is_local and _is_compiling():
            if static is None:
                out = torch.ops.collgen.reduce_scatter_rmsnorm(
                    x, residual, weight, eps, weight_offset, self.handle, group_size)
            else:
                out = torch.ops.collgen.reduce_scatter_rmsnorm_fp8(
                    x, residual, weight, eps, weight_offset, static, self.handle, group_size)
                out = out if fp8 == "dynamic" else out[:2]
            if residual_out is not None:
                residual_out.copy_(out[1])
                out = (out[0], residual_out) + tuple(out[2:])
            return out
        return self._eager_rs_norm(x, residual, weight, eps, weight_offset, residual_out, static,
                                   group_size, fp8 == "dynamic")

    def _eager_rs_norm(self, xs, residuals, weights, eps, weight_offset, residual_outs, static,
                       group_size, dynamic_out):
        """Both modes: lists of one tensor per rank (local) or this rank's."""
        one = not self.is_local
        if one:
            xs, weights = [xs], [weights]
            residuals = None if residuals is None else [residuals]
            residual_outs = None if residual_outs is None else [residual_outs]
        else:
            self._lists(("x", xs), ("residual", residuals), ("weight", weights),
                        ("residual_out", residual_outs))
        x0 = xs[0]
        self._norm_input(x0, "x")
        cols = x0.shape[-1]
        rows = x0.numel() // cols if cols else 0
        ranks = [self.rank] if one else range(self.nranks)
        devices = [self.device] if one else self.devices
        counts = [self._chunk_rows(rows, group_size, r) for r in ranks]
        for k, (r, d) in enumerate(zip(ranks, devices)):
            self._tensor(xs[k], f"x[{r}]", x0.dtype, x0.shape, d)
            self._tensor(weights[k], f"weight[{r}]", x0.dtype, (cols,), d)
            for name, ts in (("residual", residuals), ("residual_out", residual_outs)):
                if ts is not None:
                    self._tensor(ts[k], f"{name}[{r}]", x0.dtype, (counts[k], cols), d)
        res_out = residual_outs or [x0.new_empty((n, cols), device=d)
                                    for n, d in zip(counts, devices)]
        ndt = x0.dtype if static is None else FP8_DTYPE
        normed = [torch.empty((n, cols), dtype=ndt, device=d) for n, d in zip(counts, devices)]
        dynamic = static == 0.0
        scales = [torch.empty((n,), dtype=torch.float32, device=d)
                  for n, d in zip(counts, devices)] if dynamic else None
        fp8_arg = None if static is None else ("dynamic" if dynamic else static)

        def call(streams):
            pick = (lambda v: None if v is None else v[0]) if one else (lambda v: v)
            self._core.reduce_scatter_rmsnorm(
                pick(_arrays(xs)), pick(_arrays(weights)), pick(_arrays(normed)),
                pick(_arrays(res_out)), eps, residual=pick(_arrays(residuals)),
                weight_offset=weight_offset, fp8=fp8_arg, scales=pick(_arrays(scales)),
                group_size=group_size, dtype=_NAME_OF[x0.dtype], stream=streams)

        if one:
            call(self._stream())
        else:
            self._local_call(call)
        out = (normed, res_out) + ((scales,) if dynamic and dynamic_out else ())
        return tuple(v[0] for v in out) if one else out

    def _op_reduce_scatter_rmsnorm(self, x, residual, weight, eps, weight_offset, group_size,
                                   static=None):
        """torch.ops.collgen.reduce_scatter_rmsnorm's work (and, with
        ``static``, the _fp8 form's: normed, residual_out, scales, empty
        for a static scale)."""
        out = self._eager_rs_norm(x, residual, weight, eps, weight_offset, None, static,
                                  group_size, static is not None)
        if static is not None and len(out) == 2:
            out = out + (x.new_empty((0,), dtype=torch.float32),)
        return out
