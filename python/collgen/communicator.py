"""Communicator: the framework-neutral core of the package.

Two process models, as in the C API:

* ``Communicator(devices=[0, 1, ...], **options)``: one process drives
  every GPU (``collgen_comm_create``); every buffer argument of an op is a
  sequence with one entry per rank, and ``stream`` a sequence of CUstreams.
* ``Communicator.init_rank(nranks, rank, unique_id, device, **options)``:
  one process per GPU (``collgen_comm_init_rank``, or
  ``collgen_comm_init_rank_callback`` with ``allgather=``); every buffer
  argument is this rank's own buffer, and ``stream`` one CUstream.

Buffers are device pointers (ints, with ``shape=`` and ``dtype=``) or
objects with ``__cuda_array_interface__``; outputs are given by the caller
(collgen.torch allocates them). Options are the fields of
``collgen_comm_options_t`` by name. Every failure raises a
``collgen.Error`` subclass carrying the library's message; the library
checks every call before anything is launched.
"""

import ctypes
import math
import os
import threading
from ctypes import POINTER, byref, c_float, c_int, c_int64, c_void_p
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

from ._abi import ALLGATHER_FN, Call, CommHealth, CommInfo, CommOptions, Shape, lib
from .buffers import Buffer, Buffers, Shape as ShapeArg, Streams
from .buffers import c_int64_arg, c_int_arg, int_in_c_range, view
from . import catalog as _catalog
from .catalog import DTYPES, FP8_MODES, OPS, RANK_STATES, TRANSPORTS, dtype_bytes, lookup
from .errors import InvalidArgument, check, last_error
from .unique_id import UniqueId

__all__ = ["Communicator", "Registration"]

_OPTION_TYPES = {field[0]: field[1] for field in CommOptions._fields_}


def make_options(options: Dict[str, Any]) -> Tuple[CommOptions, List[bytes]]:
    """A ``collgen_comm_options_t`` from keyword options, plus the objects it
    points to (kept alive by the caller). Unknown names raise TypeError, bad
    values ValueError, each naming the option."""
    o = CommOptions()
    lib.collgen_comm_options_init(byref(o))
    keep = []
    for name, value in options.items():
        if name not in _OPTION_TYPES:
            raise TypeError(f"unknown option {name!r}; known: {', '.join(_OPTION_TYPES)}")
        if name == "cache_dir":
            if value is not None:
                value = os.fsencode(value)
                if b"\0" in value:
                    raise ValueError("cache_dir: holds a NUL character")
                keep.append(value)
        elif name == "transport":
            value = lookup(TRANSPORTS, value, "transport")
        else:
            if isinstance(value, bool):   # allow_shared_devices=True, pdl=False
                value = int(value)
            value = int_in_c_range(value, name, _OPTION_TYPES[name])
        setattr(o, name, value)
    return o, keep


def _ptrs(values):
    return (c_void_p * len(values))(*values)


class Registration:
    """A buffer registered with ``Communicator.register`` (zero copy for
    the peers). ``deregister()`` ends it (collective)."""

    _handle: Optional[c_void_p]   # None once deregistered

    def __init__(self, comm: "Communicator", handle: c_void_p, ptr: int, nbytes: int) -> None:
        self._comm, self._handle, self.ptr, self.nbytes = comm, handle, ptr, nbytes

    def deregister(self) -> None:
        """Ends the registration on every rank (collective; bounded)."""
        if self._handle is not None:
            handle, self._handle = self._handle, None
            self._comm._registrations.discard(self)
            self._comm._check(lib.collgen_deregister_buffer(self._comm._ptr(), handle))


class Communicator:
    """A collgen communicator (see the module docstring)."""

    def __init__(self, devices: Sequence[int], **options: Any) -> None:
        """One process driving ``devices`` (CUDA ordinals, one rank each)."""
        try:
            devs = [c_int_arg(d, f"devices[{i}]") for i, d in enumerate(devices)]
        except TypeError:
            if not hasattr(devices, "__iter__"):
                raise TypeError("devices must be a sequence of CUDA device ordinals") from None
            raise
        opts, keep = make_options(options)
        handle = c_void_p()
        rc = lib.collgen_comm_create(byref(handle), len(devs), (c_int * max(1, len(devs)))(*devs),
                                     byref(opts))
        check(rc, last_error)
        self._setup(handle, keep, nranks=len(devs), rank=None, devices=devs)

    @classmethod
    def init_rank(cls, nranks: int, rank: int,
                  unique_id: Union[UniqueId, str, bytes, bytearray, memoryview, None] = None,
                  device: int = 0, *,
                  allgather: Optional[Callable[[bytes], Sequence[bytes]]] = None,
                  **options: Any) -> "Communicator":
        """This process's rank of a communicator whose other ranks are other
        processes. Pass the same ``unique_id`` (a UniqueId, its bytes or its
        text) to every rank, or instead ``allgather``: a callable
        ``allgather(mine: bytes) -> list of nranks bytes`` (the application's
        own exchange, e.g. over a torch store). Collective and bounded by
        ``timeout_ms``: a rank that never comes raises ``collgen.TimeoutError``
        naming it."""
        nranks = c_int_arg(nranks, "nranks")
        rank = c_int_arg(rank, "rank")
        device = c_int_arg(device, "device")
        opts, keep = make_options(options)
        handle = c_void_p()
        if allgather is not None:
            if unique_id is not None:
                raise TypeError("pass unique_id or allgather, not both")
            if not callable(allgather):
                raise TypeError("allgather must be callable")
            failure = []

            def exchange(ctx, mine, all_out, nbytes):
                try:
                    parts = list(allgather(ctypes.string_at(mine, nbytes)))
                    if len(parts) != nranks or any(len(p) != nbytes for p in parts):
                        raise ValueError(f"allgather must return {nranks} items of {nbytes} bytes")
                    ctypes.memmove(all_out, b"".join(bytes(p) for p in parts), nranks * nbytes)
                    return 0
                except BaseException as e:  # reported below; C sees a failure
                    failure.append(e)
                    return 1

            fn = ALLGATHER_FN(exchange)
            rc = lib.collgen_comm_init_rank_callback(byref(handle), nranks, fn, None, rank,
                                                     device, byref(opts))
            if rc != 0 and failure:
                if isinstance(failure[0], (TypeError, ValueError)):
                    raise InvalidArgument(f"allgather raised {failure[0]!r}") from failure[0]
                raise failure[0]
        else:
            uid = _unique_id_arg(unique_id)
            rc = lib.collgen_comm_init_rank(byref(handle), nranks, byref(uid._raw), rank, device,
                                            byref(opts))
        check(rc, last_error)
        self = cls.__new__(cls)
        self._setup(handle, keep, nranks=nranks, rank=rank, devices=[device])
        return self

    def _setup(self, handle, keep, nranks, rank, devices):
        self._handle = handle
        self._keep = keep
        self._registrations = set()
        self._lock = threading.Lock()
        self.nranks, self.rank, self.devices = nranks, rank, list(devices)

    # ---- state -------------------------------------------------------

    @property
    def is_local(self) -> bool:
        """True for one process driving every GPU (list arguments)."""
        return self.rank is None

    def _ptr(self):
        h = self._handle
        if h is None or not h.value:
            raise ValueError("the communicator is closed")
        return h

    def last_error(self) -> str:
        """The library's message of this communicator's last error."""
        h = self._handle
        if h is None or not h.value:
            return last_error()
        return (lib.collgen_comm_last_error(h) or b"").decode(errors="replace")

    def _check(self, rc):
        check(rc, self.last_error)

    def close(self) -> None:
        """Ends every registration and frees the communicator. The caller's
        streams must be synchronized. Idempotent."""
        with self._lock:
            h, self._handle = getattr(self, "_handle", None), None
        if h is not None and h.value:
            self._registrations.clear()   # collgen_comm_destroy ends them
            lib.collgen_comm_destroy(h)

    def __enter__(self) -> "Communicator":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def abort(self) -> None:
        """Stops every kernel of the communicator now (any thread); later calls
        raise ``collgen.AbortedError``."""
        self._check(lib.collgen_comm_abort(self._ptr()))

    def check(self) -> None:
        """Raises ``TimeoutError`` or ``AbortedError`` if a kernel gave up
        waiting or the communicator was aborted; else returns None."""
        self._check(lib.collgen_comm_check(self._ptr()))

    def health(self) -> List[Dict[str, Any]]:
        """Each rank's state: a list of ``{"state": "ok" | "timed_out" |
        "aborted", "peer": rank waited for or None}``. No CUDA call."""
        h = CommHealth()
        self._check(lib.collgen_comm_health(self._ptr(), byref(h)))
        return [{"state": RANK_STATES.get(h.rank[r].state, str(h.rank[r].state)),
                 "peer": h.rank[r].peer if h.rank[r].peer >= 0 else None}
                for r in range(h.ndev)]

    def info(self) -> Dict[str, Any]:
        """Devices, archs, the P2P matrix and links, hosts, and each group's
        transport per group size (``route[group_size]`` = list per group)."""
        i = CommInfo()
        self._check(lib.collgen_comm_info(self._ptr(), byref(i)))
        n = i.ndev
        names = {v: k for k, v in TRANSPORTS.items()}
        return {
            "nranks": n, "devices": list(i.devices[:n]),
            "arch": [i.arch[r].value.decode() for r in range(n)],
            "p2p": [[bool(i.p2p[a][b]) for b in range(n)] for a in range(n)],
            "link": [[i.link[a][b].value.decode() for b in range(n)] for a in range(n)],
            "signal_bytes_per_rank": i.signal_bytes_per_rank, "nhosts": i.nhosts,
            "host": list(i.host[:n]),
            "route": {s: [names[i.route[s - 1][g]] for g in range(n // s)]
                      for s in range(1, n + 1) if n % s == 0},
        }

    def prepare(self, op: str, dtype: str, shape: Sequence[int], *, group_size: int = 0,
                inplace: bool = False, aligned: bool = True, fp8: str = "none") -> None:
        """Loads, on every rank, the kernel calls of ``op`` with this
        ``dtype`` and ``shape`` need, so that the first such call loads
        nothing (load while the GPUs are idle: loading waits for them).
        ``shape``: the tensor shape of a call (for all_gather_rmsnorm, the
        gathered output)."""
        s = Shape()
        s.op = lookup(OPS, op, "op")
        s.dtype = lookup(DTYPES, dtype, "dtype")
        s.fp8 = lookup(FP8_MODES, fp8, "fp8")
        dims = [c_int64_arg(d, f"shape[{k}]") for k, d in enumerate(tuple(shape))]
        if not dims:
            raise ValueError("shape: needs at least one dimension")
        s.tensor_rank = len(dims)
        n = 1
        for d in dims:
            n *= d
        s.elems = c_int64_arg(n, "shape (elements)")
        s.cols = dims[-1]
        s.rows = c_int64_arg(n // dims[-1] if dims[-1] else 0, "shape (rows)")
        s.group_size = c_int_arg(group_size, "group_size")
        s.inplace, s.aligned16 = int(bool(inplace)), int(bool(aligned))
        self._check(lib.collgen_comm_prepare(self._ptr(), byref(s), 1))

    def register(self, ptr: Buffer, nbytes: int) -> Registration:
        """Registers ``nbytes`` of device memory at ``ptr`` (an int or an
        array-interface object) so that peers read it without a staging
        copy (one process per GPU; collective, in the same order on every
        rank, with the same nbytes). Returns a Registration."""
        p = view(ptr, "ptr", shape=()).ptr if not isinstance(ptr, int) else ptr
        nbytes = c_int64_arg(nbytes, "nbytes")
        if nbytes <= 0:
            raise ValueError(f"nbytes: must be > 0, not {nbytes}")
        h = c_void_p()
        self._check(lib.collgen_register_buffer(self._ptr(), p, nbytes, byref(h)))
        reg = Registration(self, h, p, nbytes)
        self._registrations.add(reg)
        return reg

    # ---- ops ---------------------------------------------------------

    def _per_rank(self, value, argument):
        """The list of per-rank values of an argument (local mode: a
        sequence of nranks; one process per GPU: the one value)."""
        if not self.is_local:
            return [value]
        if isinstance(value, (str, bytes)) or not hasattr(value, "__len__"):
            raise TypeError(f"{argument}: one process for all GPUs takes a sequence with one "
                            f"entry per rank ({self.nranks})")
        if len(value) != self.nranks:
            raise ValueError(f"{argument}: {len(value)} entries for {self.nranks} ranks")
        return list(value)

    def _streams(self, stream):
        if stream is None:
            return [0] * (self.nranks if self.is_local else 1)
        items = self._per_rank(stream, "stream")
        out = []
        for i, s in enumerate(items):
            s = getattr(s, "cuda_stream", s)  # torch.cuda.Stream, cupy Stream
            s = getattr(s, "ptr", s)
            if isinstance(s, bool) or not isinstance(s, int) or s < 0:
                raise TypeError(f"stream[{i}] must be a CUstream handle (int)")
            out.append(s)
        return out

    def _views(self, value, argument, dtype, shape, output=False, need_bytes=None):
        """Views of one argument's per-rank buffers. An array-interface
        buffer must hold at least ``need_bytes[r]`` bytes (what the call
        reads or writes there), and an output must be writable; a raw
        pointer is taken on trust (the library cannot see its size)."""
        items = self._per_rank(value, argument)
        views = []
        for r, v in enumerate(items):
            name = argument if len(items) == 1 else f"{argument}[{r}]"
            w = view(v, name, dtype, shape)
            if w.nbytes is not None:
                if output and w.readonly:
                    raise ValueError(f"{name}: the array is read-only")
                need = need_bytes[r] if need_bytes is not None else None
                if need is not None and w.nbytes < need:
                    raise ValueError(f"{name}: the array holds {w.nbytes} bytes; the call "
                                     f"{'writes' if output else 'reads'} {need}")
            views.append(w)
        return views

    @staticmethod
    def _dtype(views, dtype, argument):
        name = dtype or views[0].dtype
        if name is None:
            raise TypeError(f"{argument}: its dtype is not known from the array (bf16 has no "
                            "array-interface type); pass dtype=")
        return lookup(DTYPES, name, "dtype"), name

    @staticmethod
    def _same_ndim(views, argument):
        """The tensor rank every rank's view shares (the library reads that
        many dimensions of every rank's shape)."""
        ndim = len(views[0].shape)
        for r, v in enumerate(views):
            if len(v.shape) != ndim:
                raise ValueError(f"{argument}[{r}]: shape {v.shape} has {len(v.shape)} dimensions "
                                 f"but {argument}[0]'s {views[0].shape} has {ndim}: the ranks' "
                                 "shapes differ")
        return ndim

    @staticmethod
    def _shape_arrays(views, ndim):
        """One ctypes dims array per view (the shapes _run_op passes)."""
        return [(c_int64 * max(1, ndim))(*v.shape) for v in views]

    def _run_op(self, op, dt, ndim, shapes, buffers, scalars, group_size, streams):
        """The one call of every op: a collgen_call_t run by collgen_run
        (one process, every rank) or collgen_rank_run (this rank).
        ``shapes``: one ctypes dims array per rank, or (one process per GPU,
        ranks of one shape) this rank's alone; ``buffers``: {role: the
        pointers of every rank, or this rank's one}, ``scalars``: {name:
        value}, both named as the catalog names the op's roles and scalars
        (catalog.ROLES, catalog.SCALARS). Returns the status."""
        call = Call()
        call.op, call.dtype, call.tensor_rank, call.group_size = OPS[op], dt, ndim, group_size
        if len(shapes) != self.nranks:
            shapes = shapes * self.nranks
        call.shapes = (POINTER(c_int64) * len(shapes))(*shapes)
        roles, names = _catalog.ROLES[op], _catalog.SCALARS[op]
        keep = []   # the pointer arrays live until the call returns
        for role, ptrs in buffers.items():
            if self.is_local:
                keep.append(_ptrs([p or 0 for p in ptrs]))
                call.buffers[roles[role]] = ctypes.cast(keep[-1], POINTER(c_void_p))
            else:
                call.mine[roles[role]] = ptrs[0] or None
        for name, value in scalars.items():
            call.scalars[names[name]] = value
        if self.is_local:
            keep.append(_ptrs(streams))
            call.streams = ctypes.cast(keep[-1], POINTER(c_void_p))
            return lib.collgen_run(self._ptr(), byref(call))
        call.stream = streams[0] or None
        return lib.collgen_rank_run(self._ptr(), byref(call))

    def all_reduce(self, input: Buffers, output: Buffers, *, group_size: int = 0,
                   stream: Streams = None, dtype: Optional[str] = None,
                   shape: Optional[ShapeArg] = None) -> None:
        """Sums ``input`` over each group of ``group_size`` ranks (0 = all)
        into ``output`` (may be ``input``). Bitwise equal on every rank."""
        ins = self._views(input, "input", dtype, shape)
        dt, name = self._dtype(ins, dtype, "input")
        size = [v.numel * dtype_bytes(name) for v in ins]
        outs = self._views(output, "output", name, shape or ins[0].shape, True, size)
        g = c_int_arg(group_size, "group_size")
        streams = self._streams(stream)
        ndim = self._same_ndim(ins, "input")
        arrays = self._shape_arrays(ins, ndim)
        rc = self._run_op("allreduce_sum", dt, ndim, arrays,
                          {"input": [v.ptr for v in ins], "output": [v.ptr for v in outs]}, {},
                          g, streams)
        self._check(rc)

    def reduce_scatter(self, input: Buffers, output: Buffers, *, group_size: int = 0,
                       stream: Streams = None, dtype: Optional[str] = None,
                       shape: Optional[ShapeArg] = None) -> None:
        """Sums ``input`` ([N, ...], the same on every rank of a group) over
        each group of ``group_size`` ranks (0 = all); group rank i gets the
        rows of chunk i (:func:`scatter_chunk`) in ``output`` ([count_i,
        ...]): allreduce's bits for those rows. ``output`` may not overlap
        ``input``."""
        ins = self._views(input, "input", dtype, shape)
        dt, name = self._dtype(ins, dtype, "input")
        ndim = self._same_ndim(ins, "input")
        g = c_int_arg(group_size, "group_size")
        me = range(self.nranks) if self.is_local else [self.rank]
        size = [self._chunk_bytes(v, name, g, r) for v, r in zip(ins, me)]
        outs = self._views(output, "output", name, (), True, size)
        streams = self._streams(stream)
        arrays = self._shape_arrays(ins, ndim)
        rc = self._run_op("reduce_scatter_sum", dt, ndim, arrays,
                          {"input": [v.ptr for v in ins], "output": [v.ptr for v in outs]}, {},
                          g, streams)
        self._check(rc)

    def _chunk_bytes(self, v, dtype_name, group_size, rank):
        """Bytes of `rank`'s chunk of view v, or None when the group size is
        bad or the view has no rows (the library then refuses the call)."""
        g = group_size or self.nranks
        if g <= 0 or self.nranks % g or not v.shape:
            return None
        rows = v.shape[0]
        _, count = scatter_chunk(rows, g, rank % g)
        return (v.numel // rows if rows else 0) * count * dtype_bytes(dtype_name)

    def _group_rows(self, rows, group_size, rank):
        """Rows gathered by `rank`'s group, or 0 when group_size is bad (the
        library then refuses the call with its own message)."""
        g = group_size or self.nranks
        if g <= 0 or self.nranks % g:
            return 0
        first = rank // g * g
        return sum(rows[first:first + g])

    def _shard_rows(self, shard_rows, mine):
        """One process per GPU: every rank's shard rows, from ``shard_rows``
        (default: all equal to this rank's ``mine``), checked against it."""
        rows = [mine] * self.nranks if shard_rows is None else [
            c_int64_arg(r, f"shard_rows[{i}]") for i, r in enumerate(shard_rows)]
        if len(rows) != self.nranks:
            raise ValueError(f"shard_rows: {len(rows)} entries for {self.nranks} ranks")
        if rows[self.rank] != mine:
            raise ValueError(f"shard_rows[{self.rank}] is {rows[self.rank]} but this rank's "
                             f"shard has {mine} rows")
        return rows

    def all_gather_rmsnorm(self, shard: Buffers, weight: Buffers, normed: Buffers,
                           residual: Buffers, eps: float, *, weight_offset: float = 0.0,
                           shard_rows: Optional[Sequence[int]] = None, group_size: int = 0,
                           stream: Streams = None, dtype: Optional[str] = None,
                           shape: Optional[ShapeArg] = None) -> None:
        """Gathers every rank's row shard of its group into ``residual`` and
        writes its RMSNorm into ``normed`` (both [sum of rows, cols]).
        One process per GPU: ``shard_rows`` lists every rank's shard rows
        (default: all equal to this rank's); the shards are then described
        to the library as [rows, cols]."""
        shards = self._views(shard, "shard", dtype, shape)
        dt, name = self._dtype(shards, dtype, "shard")
        b = dtype_bytes(name)
        g = c_int_arg(group_size, "group_size")
        cols = shards[0].shape[-1] if shards[0].shape else 0
        if self.is_local:
            if shard_rows is not None:
                raise TypeError("shard_rows: one process for all GPUs reads every shard's rows "
                                "from its own shape")
            ndim = self._same_ndim(shards, "shard")
            rows = [v.numel // v.shape[-1] if v.shape and v.shape[-1] else 0 for v in shards]
            arrays = self._shape_arrays(shards, ndim)
        else:
            rows = self._shard_rows(shard_rows, shards[0].numel // cols if cols else 0)
            ndim = 2
            arrays = self._shape_arrays([_Dims((r, cols)) for r in rows], 2)
        me = range(self.nranks) if self.is_local else [self.rank]
        own_cols = [v.shape[-1] if v.shape else 0 for v in shards]   # differ: refused below
        out_bytes = [self._group_rows(rows, g, r) * c * b for r, c in zip(me, own_cols)]
        gam = self._views(weight, "weight", name, (cols,), need_bytes=[c * b for c in own_cols])
        nrm = self._views(normed, "normed", name, (), True, out_bytes)
        res = self._views(residual, "residual", name, (), True, out_bytes)
        streams = self._streams(stream)
        wo = float(weight_offset)
        rc = self._run_op("allgather_rmsnorm", dt, ndim, arrays,
                          {"input": [v.ptr for v in shards], "normed": [v.ptr for v in nrm],
                           "residual": [v.ptr for v in res], "gamma": [v.ptr for v in gam]},
                          {"eps": float(eps), "weight_offset": wo}, g, streams)
        self._check(rc)

    def fused_add_rmsnorm(self, x: Buffers, residual: Buffers, weight: Buffers, normed: Buffers,
                          residual_out: Buffers, eps: float, *, weight_offset: float = 0.0,
                          fp8: Union[None, str, float] = None, scales: Optional[Buffers] = None,
                          group_size: int = 0, stream: Streams = None,
                          dtype: Optional[str] = None, shape: Optional[ShapeArg] = None) -> None:
        """Allreduce of ``x`` plus ``residual`` into ``residual_out`` (may be
        ``residual``), and its RMSNorm into ``normed``. ``fp8``: None (normed
        in the dtype), "dynamic" (normed as float8 e4m3, a float32 scale per
        row into ``scales``) or a float (one static scale)."""
        self._residual_norm("allreduce_residual_rmsnorm", False, x, residual, weight, normed,
                            residual_out, eps, weight_offset, fp8, scales, group_size, stream,
                            dtype, shape)

    def reduce_scatter_rmsnorm(self, x: Buffers, weight: Buffers, normed: Buffers,
                               residual_out: Buffers, eps: float, *,
                               residual: Optional[Buffers] = None, weight_offset: float = 0.0,
                               fp8: Union[None, str, float] = None,
                               scales: Optional[Buffers] = None, group_size: int = 0,
                               stream: Streams = None, dtype: Optional[str] = None,
                               shape: Optional[ShapeArg] = None) -> None:
        """Sequence parallelism: every rank holds ``x`` [rows, cols]; group
        rank i gets chunk i of the rows (``scatter_chunk``) summed over the
        group, plus ``residual`` (optional, [count_i, cols]) into
        ``residual_out`` (may be ``residual``), and its RMSNorm into
        ``normed``; ``fp8`` as in ``fused_add_rmsnorm``."""
        self._residual_norm("reduce_scatter_rmsnorm", True, x, residual, weight, normed,
                            residual_out, eps, weight_offset, fp8, scales, group_size, stream,
                            dtype, shape)

    def _residual_norm(self, op, chunked, x, residual, weight, normed, residual_out, eps,
                       weight_offset, fp8, scales, group_size, stream, dtype, shape):
        """The residual RMSNorm ops (same arguments in C): ``chunked``, each
        rank's residual and outputs are its chunk of x's rows, and the
        residual may be None."""
        xs = self._views(x, "x", dtype, shape)
        dt, name = self._dtype(xs, dtype, "x")
        b = dtype_bytes(name)
        ndim = self._same_ndim(xs, "x")
        row_shape = xs[0].shape
        cols = row_shape[-1] if row_shape else 0
        rows = xs[0].numel // cols if cols else 0
        n = len(xs)
        if fp8 is None:
            mode, static = None, 0.0
            if scales is not None:
                raise TypeError("scales: only with fp8='dynamic'")
        elif isinstance(fp8, str):
            lookup(FP8_MODES, fp8, "fp8")
            if fp8 != "dynamic":
                raise ValueError("fp8: 'dynamic' or a static scale (float)")
            mode, static = FP8_MODES["dynamic"], 0.0
        elif isinstance(fp8, (int, float)) and not isinstance(fp8, bool):
            mode, static = FP8_MODES["static"], float(fp8)
            if scales is not None:
                raise TypeError("scales: not with a static fp8 scale")
        else:
            raise TypeError(f"fp8 must be None, 'dynamic' or a float, not {type(fp8).__name__}")
        g = c_int_arg(group_size, "group_size")
        me = range(self.nranks) if self.is_local else [self.rank]
        size = g or self.nranks
        out_rows = [scatter_chunk(rows, size, r % size)[1] if size > 0 and self.nranks % size == 0
                    else 0 for r in me] if chunked else [rows] * n
        full = [k * cols * b for k in out_rows]
        out_shape = () if chunked else row_shape
        res = [None] * n if chunked and residual is None else \
            self._views(residual, "residual", name, out_shape, need_bytes=full)
        gam = self._views(weight, "weight", name, row_shape[-1:], need_bytes=[cols * b] * n)
        out_res = self._views(residual_out, "residual_out", name, out_shape, True, full)
        nrm = self._views(normed, "normed", None, (), True,
                          full if mode is None else [k * cols for k in out_rows])
        sc = self._views(scales, "scales", "f32", (), True, [k * 4 for k in out_rows]) \
            if mode == FP8_MODES["dynamic"] else [None] * n
        arrays = self._shape_arrays(xs, ndim)
        streams = self._streams(stream)
        eps, wo = float(eps), float(weight_offset)

        def ptrs(vs):
            return [0 if v is None else v.ptr for v in vs]

        buffers = {"x": ptrs(xs), "residual_in": ptrs(res), "residual_out": ptrs(out_res),
                   "gamma": ptrs(gam)}
        if mode is None:
            buffers["normed"] = ptrs(nrm)
        else:
            buffers["normed_fp8"] = ptrs(nrm)
            if mode == FP8_MODES["dynamic"]:   # static: no row_scales at all (NULL)
                buffers["row_scales"] = ptrs(sc)
        rc = self._run_op(op, dt, ndim, arrays, buffers,
                          {"eps": eps, "weight_offset": wo, "fp8": mode or 0,
                           "static_scale": static}, g, streams)
        self._check(rc)

    def all_gather(self, shard: Buffers, output: Buffers, *,
                   shard_rows: Optional[Sequence[int]] = None, group_size: int = 0,
                   stream: Streams = None, dtype: Optional[str] = None,
                   shape: Optional[ShapeArg] = None) -> None:
        """Gathers every rank's shard of its group ([rows_d, ...], equal but
        for the first dimension, which may be 0) into ``output`` ([sum of
        rows, ...], group-rank order, bit for bit). Any dtype. In place: a
        shard that already sits at its offset in ``output``. One process
        per GPU: ``shard_rows`` lists every rank's shard rows (default: all
        equal to this rank's)."""
        shards = self._views(shard, "shard", dtype, shape)
        dt, name = self._dtype(shards, dtype, "shard")
        b = dtype_bytes(name)
        g = c_int_arg(group_size, "group_size")
        me = range(self.nranks) if self.is_local else [self.rank]
        if self.is_local:
            if shard_rows is not None:
                raise TypeError("shard_rows: one process for all GPUs reads every shard's rows "
                                "from its own shape")
            ndim = self._same_ndim(shards, "shard")
            rows = [v.shape[0] if v.shape else 0 for v in shards]
            arrays = self._shape_arrays(shards, ndim)
        else:
            inner = tuple(shards[0].shape[1:])
            rows = self._shard_rows(shard_rows, shards[0].shape[0] if shards[0].shape else 0)
            ndim = max(1, len(shards[0].shape))
            arrays = self._shape_arrays([_Dims((r,) + inner) for r in rows], ndim)
        row_bytes = [math.prod(v.shape[1:]) * b for v in shards]
        outs = self._views(output, "output", name, (), True,
                           [self._group_rows(rows, g, r) * rb for r, rb in zip(me, row_bytes)])
        streams = self._streams(stream)
        rc = self._run_op("all_gather", dt, ndim, arrays,
                          {"input": [v.ptr for v in shards], "output": [v.ptr for v in outs]}, {},
                          g, streams)
        self._check(rc)


    def scatter(self, input: Optional[Buffers], output: Optional[Buffers], root: int = 0, *,
                group_size: int = 0, stream: Streams = None, dtype: Optional[str] = None,
                shape: Optional[ShapeArg] = None) -> None:
        """Group rank ``root``'s ``input`` ([N, ...]) cut into rows: group rank
        i gets rows chunk i (:func:`scatter_chunk`) in ``output`` ([count_i,
        ...]), bit-exact, any dtype. Every rank's ``input`` has the root's
        shape, but only the roots' are read: the other entries may be None
        when ``shape`` (and, for a raw pointer, ``dtype``) says it. An empty
        chunk's output may be None. The root's output may sit in its input
        at its own chunk."""
        r0 = c_int_arg(root, "root")
        g = c_int_arg(group_size, "group_size")
        raw: Any   # the inputs, one per rank (None: 0), or this rank's
        if self.is_local:
            raw = [0 if v is None else v for v in self._per_rank(input, "input")]
            out_raw: Any = [0 if v is None else v for v in self._per_rank(output, "output")]
        else:
            raw = 0 if input is None else input
            out_raw = 0 if output is None else output
        ins = self._views(raw, "input", dtype, shape)
        dt, name = self._dtype(ins, dtype, "input")
        ndim = self._same_ndim(ins, "input")
        me = range(self.nranks) if self.is_local else [self.rank]
        size = [self._chunk_bytes(v, name, g, r) for v, r in zip(ins, me)]
        outs = self._views(out_raw, "output", name, (), True, size)
        streams = self._streams(stream)
        arrays = self._shape_arrays(ins, ndim)
        rc = self._run_op("scatter", dt, ndim, arrays,
                          {"input": [v.ptr for v in ins], "output": [v.ptr for v in outs]},
                          {"root": r0}, g, streams)
        self._check(rc)

    def broadcast(self, input: Optional[Buffers], output: Buffers, root: int = 0, *,
                  group_size: int = 0, stream: Streams = None, dtype: Optional[str] = None,
                  shape: Optional[ShapeArg] = None) -> None:
        """Copies group rank ``root``'s ``input`` into every ``output`` of its
        group (each group of ``group_size`` ranks, 0 = all), bit-exact, any
        dtype. Only the roots' inputs are read: the other entries may be
        None (one process per GPU: ``input`` may be None off the root). The
        root's output may be its input."""
        r0 = c_int_arg(root, "root")
        g = c_int_arg(group_size, "group_size")
        outs = self._views(output, "output", dtype, shape, True)
        dt, name = self._dtype(outs, dtype, "output")
        size = [v.numel * dtype_bytes(name) for v in outs]
        raw: Any   # the inputs, one per rank (None: 0), or this rank's
        if self.is_local:
            raw = [0 if v is None else v for v in self._per_rank(input, "input")]
        else:
            raw = 0 if input is None else input
        ins = self._views(raw, "input", name, shape or outs[0].shape, False, size)
        streams = self._streams(stream)
        ndim = self._same_ndim(outs, "output")
        arrays = self._shape_arrays(outs, ndim)
        rc = self._run_op("broadcast", dt, ndim, arrays,
                          {"input": [v.ptr for v in ins], "output": [v.ptr for v in outs]},
                          {"root": r0}, g, streams)
        self._check(rc)


def scatter_chunk(n: int, g: int, i: int) -> Tuple[int, int]:
    """(start, count): the rows group rank i of g owns when n rows are
    scattered (reduce_scatter, reduce_scatter_rmsnorm): the library's
    collgen_scatter_chunk, so the package sizes outputs by the rule the
    runtime applies. Bad arguments raise InvalidArgument."""
    start, count = c_int64(), c_int64()
    rc = lib.collgen_scatter_chunk(c_int64_arg(n, "rows"), c_int_arg(g, "group_size"),
                                   c_int_arg(i, "group_rank"), byref(start), byref(count))
    check(rc, last_error)
    return start.value, count.value


class _Dims:
    """A shape alone, where the library needs one that no buffer has (the
    peers' shards in all_gather_rmsnorm)."""

    __slots__ = ("shape",)

    def __init__(self, shape):
        self.shape = shape


def _unique_id_arg(unique_id):
    if isinstance(unique_id, UniqueId):
        return unique_id
    if isinstance(unique_id, str):
        return UniqueId.from_text(unique_id)
    if isinstance(unique_id, (bytes, bytearray, memoryview)):
        return UniqueId.from_bytes(unique_id)
    raise TypeError("unique_id must be a collgen.UniqueId, its bytes or its text, not "
                    f"{type(unique_id).__name__}")
