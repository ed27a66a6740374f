"""collgen.torch.Communicator: collgen's ops on torch tensors.

Every op runs one generic path, driven by its row of op_table.py. The
public method turns its arguments into the row's (the arguments of
``torch.ops.collgen.<name>`` but comm and group_size, plus the outputs the
caller gave) and calls ``_run``, which

* under ``torch.compile`` calls ``torch.ops.collgen.<name>`` (registered by
  collgen/torch/ops.py, so Dynamo traces it without a graph break) and
  copies its results into the outputs the caller gave;
* otherwise checks every tensor (device, dtype, contiguity, and the shape
  the row's rule gives it), allocates the outputs the caller did not give
  by the row's output rules (the rules of the fake implementations), and
  calls the op's C entry point with the row's ``call`` arguments, on the
  current stream: ``collgen_rank_<op>`` for one process per GPU (a few
  microseconds of Python), ``collgen_<op>`` with every rank's tensors for
  ``Communicator.local``.

The CUDA kernel of ``torch.ops.collgen.<name>`` is the same eager path
(``_op``). A failed check is a TypeError or ValueError naming the
argument; the library then checks the call again before anything is
launched. Importing this module loads nothing: the library is loaded when
the first Communicator is made.
"""

import itertools
from ctypes import POINTER, c_int64, c_void_p, cast
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import torch
import torch.distributed as dist

from ..buffers import c_int_arg
from ..errors import check
from .op_table import OPS, X_ONLY, Variant, same

__all__ = ["Communicator", "TORCH_DTYPES"]

FP8_DTYPE = getattr(torch, "float8_e4m3fn", None)
# The torch dtype of an output that a row gives a dtype; None: x's.
OUTPUT_DTYPES = {"fp8": FP8_DTYPE, "f32": torch.float32}

# The one table of torch dtypes and the catalog dtype each is moved as.
# torch.bool and float8 tensors are moved as u8 (their bytes), so a catalog
# dtype may have several torch dtypes; TORCH_DTYPES gives each its first.
# python/gpu_tests/test_torch_gpu.py checks that every catalog dtype is
# here with the catalog's element size.
_TORCH_TABLE = ((torch.bfloat16, "bf16"), (torch.float16, "f16"), (torch.float32, "f32"),
                (torch.uint8, "u8"), (torch.int8, "i8"), (torch.int16, "i16"),
                (torch.int32, "i32"), (torch.int64, "i64"), (torch.float64, "f64"),
                (torch.bool, "u8"), (FP8_DTYPE, "u8"))

# A tensor, or (Communicator.local) a list of one tensor per rank.
Tensors = Union[torch.Tensor, List[torch.Tensor]]
TORCH_DTYPES: Dict[str, torch.dtype]   # computed at the first use (__getattr__)

# The current stream as an int, without making a torch.cuda.Stream object
# (about 2 us of each eager call otherwise); the public call where absent.
_RAW_STREAM = getattr(torch._C, "_cuda_getCurrentRawStream", None)
# Per row name (op_table.py): its catalog op, the name of its first
# argument, whether it works on rows, and the index of its argument
# shard_rows (the rows that have one).
_CATALOG_OP = {row.name: row.op for row in OPS}
_FIRST = {row.name: row.args.split(",")[0].split()[-1] for row in OPS}
_FLAT = {row.name: row.rows for row in OPS}
_SHARD_ARG = {row.name: row.variants()[0].arg_names.index("shard_rows") for row in OPS
              if "shard_rows" in row.variants()[0].arg_names}
# ctypes array types of 1..8 int64 dimensions, made once.
_DIMS: List[Any] = [None] + [c_int64 * n for n in range(1, 9)]
# The kinds of an entry point's scalars (_Plan.scalars).
_INT, _FLOAT, _MODE = range(3)
# The arguments by name, for a plan whose shape rules read x alone.
_NO_ARGS: Dict[str, Any] = {}

# handle -> Communicator, for the torch.ops.collgen ops (Dynamo passes the
# handle, an int, where it cannot pass an object).
_REGISTRY: Dict[int, "Communicator"] = {}
_NEXT_HANDLE = itertools.count(1)


def communicator_of(handle: int) -> "Communicator":
    """The live Communicator behind a handle, or ValueError."""
    try:
        return _REGISTRY[handle]
    except KeyError:
        raise ValueError(f"comm: no live collgen communicator has handle {handle} "
                         "(closed, or from another process)") from None


def new_output(x: torch.Tensor, shape: Optional[Tuple[int, ...]],
               dtype: Optional[str]) -> torch.Tensor:
    """A fresh output on x's device: x's shape (``shape`` None) and dtype
    (``dtype`` None, else a row's "fp8" or "f32"), as the eager op and the
    fake implementations make it."""
    if shape is None and dtype is None:
        return torch.empty_like(x)
    return x.new_empty(x.shape if shape is None else shape,
                       dtype=x.dtype if dtype is None else OUTPUT_DTYPES[dtype])


def _told(flat: bool, x: torch.Tensor) -> Tuple[int, ...]:
    """The shape the library is told for x: [rows, cols] for an op on rows
    (its leading dimensions flattened), else x's own (a torch.Size: a tuple)."""
    if flat:
        n = x.shape[-1]
        return (x.numel() // n if n else 0, n)
    return x.shape


def _values(p: "_Plan", args: Sequence[Any], outs: Sequence[Any], static: Optional[float],
            n: Optional[int]) -> List[Any]:
    """The arguments of p's entry point between the shapes and group_size
    (its buffers, then its scalars): each buffer's pointer (``n`` None: one
    process per GPU) or array of every rank's (``n`` ranks; ``args`` and
    ``outs`` then hold lists), each scalar's value. The scales of a static
    FP8 scale are NULL."""
    pool = (*args, *outs)
    values: List[Any]
    if n is None:
        values = [0 if pool[k] is None else pool[k].data_ptr() for k in p.buffers]
        for k, typed in p.typed:
            values[k] = cast(c_void_p(values[k]), typed) if values[k] else None
    else:
        values = [(c_void_p * n)(*[0 if t is None else t.data_ptr()
                                   for t in pool[k] or [None] * n]) for k in p.buffers]
        for k, typed in p.typed:
            values[k] = (typed * n)(*[cast(c_void_p(q), typed) for q in values[k]])
    if p.scales >= 0 and static != 0.0:
        values[p.scales] = None
    for kind, at, name in p.scalars:
        values.append(c_int_arg(args[at], name) if kind == _INT else float(args[at])
                      if kind == _FLOAT else p.modes[0 if static == 0.0 else 1])
    return values


class _Plan:
    """A variant of op_table.py bound to the library: what its eager path
    needs, made once, from the row and the entry points' declarations.
    ``x_dtypes``: the catalog value of each torch dtype its x may have.
    Arguments are found by their position in the schema's. ``buffers``: the
    place in (*args, *outputs) of each buffer the entry points take (after
    the shapes), ``typed`` those of a typed pointer type (the FP8 scales,
    ``scales``), ``scalars`` (kind, position, name) of the scalars after
    them. ``needs_args``: some shape rule reads the arguments by name (the
    others read x alone)."""

    __slots__ = ("name", "op", "flat", "fp8", "first", "arg_names", "tensors", "optional",
                 "inputs", "outputs", "x_dtypes", "rank_fn", "local_fn", "every_shape", "buffers",
                 "typed", "scalars", "scales", "modes", "needs_args", "static_at")

    def __init__(self, v: Variant, x_dtypes: Dict[Any, int], lib: Any,
                 fp8_modes: Dict[str, int]) -> None:
        row = v.row
        self.name, self.op, self.flat, self.fp8 = v.name, row.op, row.rows, v.fp8
        self.arg_names, self.x_dtypes = v.arg_names, x_dtypes
        types = dict(zip(v.arg_names, v.arg_types))
        self.tensors = [n for n in v.arg_names if types[n].startswith("Tensor")]
        self.first = self.tensors[0]
        self.optional = {n for n in self.tensors if types[n] == "Tensor?"}
        at = {name: k for k, name in enumerate(v.arg_names)}
        self.inputs = [(at[name], name, rule) for name, rule in row.inputs.items()]
        self.outputs = [(name, rule, dtype) for name, (rule, dtype)
                        in zip(v.output_names, v.outputs)]
        self.needs_args = any(rule not in X_ONLY for rule in
                              [r for _, r in row.inputs.items()] + [r for r, _ in v.outputs])
        self.static_at = at.get("static_scale", -1)
        suffix = "_fp8" if v.fp8 else ""
        self.rank_fn = getattr(lib, f"collgen_rank_{row.op}{suffix}")
        self.local_fn = getattr(lib, f"collgen_{row.op}{suffix}")
        argtypes, local = self.rank_fn.argtypes, self.local_fn.argtypes
        if not len(argtypes) == len(local) == 4 + len(v.call) + 2:
            raise RuntimeError(f"collgen.torch: op_table's {v.name} has {len(v.call)} call "
                               f"arguments, collgen_rank_{row.op}{suffix} {len(argtypes) - 6}")
        self.every_shape = argtypes[3] is not POINTER(c_int64)
        # The entry points take their buffers, then their scalars: each
        # buffer by its place in (*args, *outputs), each scalar by kind.
        self.buffers: List[int] = []
        self.typed: List[Tuple[int, Any]] = []
        self.scalars: List[Tuple[int, int, str]] = []
        self.scales = -1
        outputs = {name: len(v.arg_names) - 2 + k for k, name in enumerate(v.output_names)}
        for k, name in enumerate(v.call):
            ctype = argtypes[4 + k]
            buffer = ctype is c_void_p or hasattr(ctype, "contents")
            if local[4 + k] is not (POINTER(ctype) if buffer else ctype):
                raise RuntimeError(f"collgen.torch: collgen_{row.op}{suffix} takes {name} as "
                                   f"{local[4 + k]}, not one per rank of "
                                   f"collgen_rank_{row.op}{suffix}'s {ctype}")
            if buffer != (name in outputs or name in self.tensors) or \
                    buffer and self.scalars:
                raise RuntimeError(f"collgen.torch: op_table's {v.name}: {name} is not where "
                                   f"collgen_rank_{row.op}{suffix} takes a buffer (buffers "
                                   "come first)")
            if buffer:
                if ctype is not c_void_p:
                    self.typed.append((len(self.buffers), ctype))
                if name == "scales" and v.fp8:
                    self.scales = len(self.buffers)
                self.buffers.append(outputs[name] if name in outputs else at[name])
            else:
                kind = _MODE if name == "fp8_mode" else _INT if types[name] == "int" else _FLOAT
                self.scalars.append((kind, at.get(name, -1), name))
        self.modes = (fp8_modes["dynamic"], fp8_modes["static"])


class _Loaded:
    """What the ops take from the library, made with the first Communicator
    (importing collgen.torch loads nothing): the torch dtype tables, the
    catalog's op facts and a _Plan per variant of op_table.py."""

    def __init__(self) -> None:
        from .. import _abi, catalog
        from ..communicator import scatter_chunk
        self.scatter_chunk = scatter_chunk
        self.dtypes, self.copy_only = catalog.DTYPES, catalog.COPY_ONLY_DTYPES
        self.moves_bits = catalog.MOVES_BITS
        self.name_of = {td: name for td, name in _TORCH_TABLE
                        if td is not None and name in catalog.DTYPES}
        self.torch_dtypes: Dict[str, torch.dtype] = {}
        for td, name in self.name_of.items():
            self.torch_dtypes.setdefault(name, td)
        bits_of = {td: catalog.DTYPES[name] for td, name in self.name_of.items()}
        # The torch dtypes the ops that compute on elements take (not copy-only).
        self.value_of = {td: v for td, v in bits_of.items()
                         if self.name_of[td] not in catalog.COPY_ONLY_DTYPES}
        self.plans = {v.name: _Plan(v, bits_of if catalog.MOVES_BITS[row.op] else self.value_of,
                                    _abi.lib, catalog.FP8_MODES)
                      for row in OPS for v in row.variants()}


_loaded: Optional[_Loaded] = None


def _load() -> _Loaded:
    global _loaded
    if _loaded is None:
        _loaded = _Loaded()
    return _loaded


def __getattr__(name: str) -> Any:
    """TORCH_DTYPES, computed at its first use (it loads the library)."""
    if name == "TORCH_DTYPES":
        return _load().torch_dtypes
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_is_compiling = torch.compiler.is_compiling


class _RankOf:
    """The communicator as rank ``rank`` sees it, for the shape rules
    (op_table.py): calling it gives itself, as the rules' comm() does."""

    __slots__ = ("comm", "rank")

    def __init__(self, comm: "Communicator", rank: int) -> None:
        self.comm, self.rank = comm, rank

    def __call__(self) -> "_RankOf":
        return self

    def _group_rows(self, shard_rows: Sequence[int], group_size: int) -> int:
        return self.comm._group_rows(shard_rows, group_size, self.rank)

    def _chunk_rows(self, rows: int, group_size: int) -> int:
        return self.comm._chunk_rows(rows, group_size, self.rank)


class Communicator:
    """A collgen communicator for torch tensors (see the module docstring)."""

    def __init__(self, group: Optional[Any] = None, device: Optional[Any] = None,
                 **options: Any) -> None:
        """One process per GPU over a torch.distributed ProcessGroup (default:
        the world). Rank 0 of the group makes the unique id, the group
        broadcasts it, and the ranks meet on collgen's socket (so cuMem
        handles travel between them). ``device``: this rank's GPU (default:
        the current CUDA device). ``options``: collgen_comm_options_t fields
        (timeout_ms, staging_bytes, cache_dir, transport, pdl, ...)."""
        from .. import communicator as core
        from ..unique_id import UniqueId
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
        comm = core.Communicator.init_rank(nranks, rank, box[0], dev.index, **options)
        self._init(comm, [dev], group)

    @classmethod
    def local(cls, devices: Sequence[Any], **options: Any) -> "Communicator":
        """One process driving ``devices`` (ints or torch devices, one rank
        each); every op takes and returns lists with one tensor per rank."""
        from .. import communicator as core
        devs = [cls._device_arg(d) for d in devices]
        comm = core.Communicator([d.index for d in devs], **options)
        self = cls.__new__(cls)
        self._init(comm, devs, None)
        return self

    def _init(self, core: Any, devices: List[torch.device], group: Optional[Any]) -> None:
        self._lib = _load()
        self._plans = self._lib.plans
        self._core = core
        self.devices = devices
        self.device = devices[0]
        self._index = self.device.index
        self.group = group
        self.rank, self.nranks = core.rank, core.nranks
        self.handle = next(_NEXT_HANDLE)
        self._h = core._ptr()
        self._tensors: List[torch.Tensor] = []   # tensors of empty(), alive until close()
        self._dims_cache: Dict[Tuple[int, ...], Any] = {}
        # Each rank as the shape rules see it (local mode: every rank).
        self._ranks = [_RankOf(self, r) for r in
                       (range(self.nranks) if self.rank is None else [self.rank])]
        # Ranks that share a GPU (allow_shared_devices) cannot share its
        # current stream: rank 0's kernel would wait for rank 1's, queued
        # behind it. They get a stream each, forked from and joined back
        # into the current stream around every call.
        shared = len({(d.type, d.index) for d in devices}) < len(devices)
        self._rank_streams = [torch.cuda.Stream(d) for d in devices] if shared else None
        _REGISTRY[self.handle] = self

    @staticmethod
    def _device_arg(device: Any) -> torch.device:
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
    def is_local(self) -> bool:
        """True for Communicator.local (lists of tensors)."""
        return self.rank is None

    def close(self) -> None:
        """Synchronizes this communicator's devices, ends every registration
        and frees it. Idempotent; also the context manager's exit."""
        handle = getattr(self, "handle", None)
        if handle is None or _REGISTRY.pop(handle, None) is None:
            return
        for d in self.devices:
            torch.cuda.synchronize(d)
        self._tensors.clear()
        self._core.close()

    def __enter__(self) -> "Communicator":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def abort(self) -> None:
        """Stops every kernel of the communicator now (safe from any thread);
        later calls raise collgen.AbortedError."""
        self._core.abort()

    def health(self) -> List[Dict[str, Any]]:
        """Per-rank state: [{"state": "ok"|"timed_out"|"aborted", "peer": ...}]."""
        return self._core.health()

    def info(self) -> Dict[str, Any]:
        """Devices, archs, P2P matrix, hosts and routes (see collgen.Communicator.info)."""
        return self._core.info()

    def check(self) -> None:
        """Raises collgen.TimeoutError / AbortedError if a wait gave up."""
        self._core.check()

    def prepare(self, op: str, dtype: torch.dtype, shape: Sequence[int], **kwargs: Any) -> None:
        """Loads the kernel of calls of ``op`` (a method's name, such as
        "all_reduce", or the catalog's, collgen.catalog.OPS) on ``dtype``
        (torch dtype) tensors of ``shape`` on every rank, so the first such
        call loads nothing."""
        op = _CATALOG_OP.get(op, op)
        self._core.prepare(op, self._dtype_name(dtype, "dtype"), tuple(shape), **kwargs)

    def register(self, tensor: torch.Tensor) -> Any:
        """Registers a CUDA tensor's memory for zero-copy reads by the peers
        (one process per GPU; collective: every rank, same order, same size).
        Returns a collgen.Registration."""
        self._tensor(tensor, "tensor", None, bits=True)
        reg = self._core.register(tensor.data_ptr(), tensor.numel() * tensor.element_size())
        reg.tensor = tensor
        return reg

    def empty(self, shape: Sequence[int], dtype: torch.dtype) -> torch.Tensor:
        """A new tensor on this rank's device, registered (see register())
        and kept alive until close(). Collective."""
        t = torch.empty(shape, dtype=dtype, device=self.device)
        self.register(t)
        self._tensors.append(t)
        return t

    # ---- argument checks -----------------------------------------------

    def _dtype_name(self, dtype: Any, argument: str) -> str:
        name_of = self._lib.name_of
        try:
            return name_of[dtype]
        except (KeyError, TypeError):
            raise TypeError(f"{argument}: collgen takes {', '.join(map(str, name_of))}, "
                            f"not {dtype}") from None

    def _tensor(self, t: Any, argument: str, dtype: Optional[torch.dtype],
                shape: Optional[Sequence[int]] = None, index: Optional[int] = None,
                bits: bool = False, op: Optional[str] = None) -> Optional[int]:
        """Checks one tensor (on device ``index``, default this rank's);
        returns its catalog dtype value. A copy-only dtype (an integer,
        bool, float8 or f64 tensor) only with ``bits`` (memory as such) or
        for an ``op`` (its catalog name) that the catalog says only moves
        bits (catalog.MOVES_BITS): the ops that compute on elements (``op``
        None, or computing) refuse it here, naming the argument."""
        lib = self._lib
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{argument} must be a torch.Tensor, not {type(t).__name__}")
        index = self._index if index is None else index
        if not t.is_cuda or t.get_device() != index:
            raise ValueError(f"{argument} is on {t.device}, the communicator's rank on "
                             f"{torch.device('cuda', index)}")
        if not t.is_contiguous():
            raise ValueError(f"{argument} must be contiguous")
        if dtype is not None and t.dtype != dtype:
            raise TypeError(f"{argument} has dtype {t.dtype}, expected {dtype}")
        if shape is not None and t.shape != shape:
            raise ValueError(f"{argument} has shape {tuple(t.shape)}, expected {tuple(shape)}")
        name = lib.name_of.get(t.dtype)
        if name is None:
            raise TypeError(f"{argument}: collgen takes {', '.join(map(str, lib.name_of))}, "
                            f"not {t.dtype}")
        if name in lib.copy_only and not (bits or op is not None and lib.moves_bits[op]):
            raise TypeError(f"{argument} has dtype {t.dtype}, which collgen only moves as bits "
                            f"({name} is a copy-only dtype); this op computes on elements: it "
                            f"takes {', '.join(map(str, lib.value_of))}")
        return lib.dtypes[name]

    def _expect(self, t: Any, argument: str, dtype: torch.dtype, shape: Sequence[int],
                index: int) -> None:
        """Checks a tensor of a call but its first (an input of x's dtype, or
        an output the caller gave): inlined for the common case, _tensor
        raising the message when a check fails."""
        if not isinstance(t, torch.Tensor) or t.dtype != dtype or t.shape != shape or \
                not t.is_cuda or t.get_device() != index or not t.is_contiguous():
            self._tensor(t, argument, dtype, shape, index)

    def _lists(self, *named: Tuple[str, Any]) -> None:
        """Local mode: checks every argument is a list of nranks tensors."""
        for name, v in named:
            if v is None:
                continue
            if not isinstance(v, (list, tuple)) or len(v) != self.nranks:
                raise TypeError(f"{name}: Communicator.local takes a list of {self.nranks} "
                                "tensors, one per rank")

    def _stream(self, device: Optional[torch.device] = None) -> int:
        if device is None and _RAW_STREAM is not None:
            return _RAW_STREAM(self._index)
        return torch.cuda.current_stream(device or self.device).cuda_stream

    def _local_call(self, call: Callable[[List[int]], int]) -> int:
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

    def _fail(self, rc: int) -> None:
        check(rc, self._core.last_error)

    def _dims(self, shape: Tuple[int, ...]) -> Any:
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

    # ---- shapes --------------------------------------------------------

    def _group_rows(self, shard_rows: Sequence[int], group_size: int,
                    rank: Optional[int] = None) -> int:
        """The rows gathered by the group of ``rank`` (default: this rank),
        from every rank's shard rows; ValueError when group_size does not
        divide the ranks."""
        g = c_int_arg(group_size, "group_size") or self.nranks
        if g <= 0 or self.nranks % g:
            raise ValueError(f"group_size: {group_size} does not divide the {self.nranks} ranks")
        first = ((self.rank if rank is None else rank) // g) * g
        return sum(shard_rows[first:first + g])

    def _chunk_rows(self, rows: int, group_size: int, rank: Optional[int] = None) -> int:
        """Rows of ``rank``'s chunk (default: this rank) of ``rows``
        scattered over its group; ValueError when group_size does not
        divide the ranks."""
        g = c_int_arg(group_size, "group_size") or self.nranks
        if g <= 0 or self.nranks % g:
            raise ValueError(f"group_size: {group_size} does not divide the {self.nranks} ranks")
        return self._lib.scatter_chunk(rows, g, (self.rank if rank is None else rank) % g)[1]

    def _shard_rows(self, shard_rows: Optional[Sequence[int]], mine: int) -> List[int]:
        """Every rank's shard rows (default: all ``mine``, this rank's),
        checked against this rank's."""
        rows = [mine] * self.nranks if shard_rows is None else [int(r) for r in shard_rows]
        if len(rows) != self.nranks:
            raise ValueError(f"shard_rows: {len(rows)} entries for {self.nranks} ranks")
        if rows[self.rank] != mine:
            raise ValueError(f"shard_rows[{self.rank}] is {rows[self.rank]}, but this rank's "
                             f"shard has {mine} rows")
        return rows

    @staticmethod
    def _fp8_arg(fp8: Any) -> Optional[float]:
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

    # ---- the one path of every op ----------------------------------------

    def _run(self, row: str, args: Tuple[Any, ...], group_size: int,
             given: Sequence[Any] = (), fp8: Any = None) -> Any:
        """Runs ``row`` of op_table.py (its name). ``args``: the schema's arguments
        before comm and group_size (a shard_rows of None: every rank's rows
        equal to this rank's); ``given``: the caller's outputs by position
        (None: allocated); ``fp8``: the public fp8= (the row's _fp8 form
        unless None). Returns the outputs: one, or a tuple (without the
        scales of a static FP8 scale); lists of tensors in local mode."""
        static = None if fp8 is None else self._fp8_arg(fp8)
        name = row
        if static is not None:
            name, args = row + "_fp8", args + (static,)
        if self.rank is None:   # Communicator.local
            outs = self._local(self._plans[name], args, group_size, given)
        else:
            if row in _SHARD_ARG:
                k = _SHARD_ARG[row]
                mine = self._own_rows(row, args[0])
                args = args[:k] + (self._shard_rows(args[k], mine),) + args[k + 1:]
            if _is_compiling():
                outs = self._compiled(name, args, group_size, given)
            else:
                outs = self._eager(self._plans[name], args, group_size, given)
        if static:   # a static scale: no scales to return
            outs = outs[:-1]
        return outs[0] if len(outs) == 1 else tuple(outs)

    def _own_rows(self, row: str, x: Any) -> int:
        """This rank's rows of the first argument of ``row`` (checked first)."""
        self._tensor(x, _FIRST[row], None, op=_CATALOG_OP[row])
        if x.dim() < 1:
            raise ValueError(f"{_FIRST[row]} must have at least one dimension")
        return _told(_FLAT[row], x)[0]

    def _compiled(self, name: str, args: Tuple[Any, ...], group_size: int,
                  given: Sequence[Any]) -> List[torch.Tensor]:
        """Under torch.compile: the functional torch.ops.collgen op, its
        results copied into the outputs the caller gave."""
        r = getattr(torch.ops.collgen, name)(*args, self.handle, group_size)
        outs = [r] if isinstance(r, torch.Tensor) else list(r)
        for k, g in enumerate(given):
            if g is not None:
                outs[k] = g.copy_(outs[k])
        return outs

    def _op(self, name: str, args: Sequence[Any], group_size: int) -> Any:
        """The CUDA kernel of torch.ops.collgen.<name> (ops.py): the eager
        path with every output fresh (an _fp8 form's scales too)."""
        outs = self._eager(self._plans[name], tuple(args), group_size, ())
        return outs[0] if len(outs) == 1 else tuple(outs)

    @staticmethod
    def _static_scale(static: Any) -> float:
        """The static_scale of an _fp8 form, checked: 0 (dynamic) or > 0."""
        if not static >= 0:
            raise ValueError(f"static_scale: 0 (dynamic) or a scale > 0, not {static}")
        return float(static)

    def _eager(self, p: _Plan, args: Tuple[Any, ...], group_size: int,
               given: Sequence[Any]) -> List[torch.Tensor]:
        """One process per GPU: checks this rank's tensors, makes the
        outputs not given, and calls collgen_rank_<op>."""
        static = self._static_scale(args[p.static_at]) if p.fp8 else None
        x = args[0]
        # The checks of _tensor, inlined for the common case (about 1 us of
        # the eager call); _tensor raises the message when one fails.
        dt = p.x_dtypes.get(getattr(x, "dtype", None))
        if dt is None or not isinstance(x, torch.Tensor) or not x.is_cuda or \
                x.get_device() != self._index or not x.is_contiguous():
            dt = self._tensor(x, p.first, None, op=p.op)
        if x.dim() < 1:
            raise ValueError(f"{p.first} must have at least one dimension")
        a = dict(zip(p.arg_names, args + (self.handle, group_size))) if p.needs_args else _NO_ARGS
        outs = self._rank_tensors(p, None, x, args, a, given, self._index)
        told = _told(True, x) if p.flat else x.shape
        if p.every_shape:
            self._dims(told)
            arrays = [_DIMS[len(told)](r, *told[1:]) for r in a["shard_rows"]]
            shapes = (POINTER(c_int64) * len(arrays))(*arrays)
        else:
            shapes = self._dims(told)
        values = _values(p, args, outs, static, None)
        if type(group_size) is not int or not -(1 << 31) <= group_size < (1 << 31):
            group_size = c_int_arg(group_size, "group_size")
        stream = _RAW_STREAM(self._index) if _RAW_STREAM is not None else self._stream()
        rc = p.rank_fn(self._h, dt, len(told), shapes, *values, group_size, stream)
        if rc:
            self._fail(rc)
        return outs

    def _local(self, p: _Plan, args: Tuple[Any, ...], group_size: int,
               given: Sequence[Any]) -> List[Any]:
        """Communicator.local: every tensor argument and given output a list
        with one tensor per rank; checks every rank's, makes the outputs
        not given, and calls collgen_<op> with every rank's."""
        n = self.nranks
        a = dict(zip(p.arg_names, args + (self.handle, group_size)))
        self._lists(*[(name, () if a[name] is None and name not in p.optional else a[name])
                      for name in p.tensors], *[(out[0], g) for out, g in zip(p.outputs, given)])
        static = self._static_scale(args[p.static_at]) if p.fp8 else None
        xs = a[p.first]
        x0 = xs[0]
        dt = self._tensor(x0, f"{p.first}[0]", None, index=self.devices[0].index, op=p.op)
        if x0.dim() < 1:
            raise ValueError(f"{p.first}[0] must have at least one dimension")
        told = [_told(p.flat, x0)]
        for r in range(1, n):
            x, label, index = xs[r], f"{p.first}[{r}]", self.devices[r].index
            if "shard_rows" not in a:
                self._tensor(x, label, x0.dtype, x0.shape, index, op=p.op)
            else:
                # shards: only the rows may differ
                self._tensor(x, label, x0.dtype, None, index, op=p.op)
                if x.dim() < 1 or _told(p.flat, x)[1:] != told[0][1:]:
                    need = f"{told[0][1]} columns" if p.flat else \
                        f"the shape [rows, {', '.join(map(str, told[0][1:]))}]"
                    raise ValueError(f"{label} has shape {tuple(x.shape)}; every shard needs "
                                     f"{need}")
            told.append(_told(p.flat, x))
        if "shard_rows" in a:
            a["shard_rows"] = [t[0] for t in told]
        per_rank = [self._rank_tensors(p, r, xs[r], args, a,
                                       [None if g is None else g[r] for g in given],
                                       self.devices[r].index) for r in range(n)]
        outs = [list(o) for o in zip(*per_rank)]
        shapes = (POINTER(c_int64) * n)(*[(c_int64 * len(t))(*t) for t in told])
        values = _values(p, args, outs, static, n)
        gs = c_int_arg(group_size, "group_size")
        self._fail(self._local_call(lambda streams: p.local_fn(
            self._h, dt, len(told[0]), shapes, *values, gs, (c_void_p * n)(*streams))))
        return [o if k >= len(given) or given[k] is None else given[k]   # the caller's own list
                for k, o in enumerate(outs)]

    def _rank_tensors(self, p: _Plan, r: Optional[int], x: torch.Tensor, args: Sequence[Any],
                      a: Dict[str, Any], given: Sequence[Any],
                      index: int) -> List[torch.Tensor]:
        """Checks the tensor arguments but x of rank ``r`` (None: this
        process's one rank; else local mode, ``args`` holding lists), on
        device ``index``, by their shape rules, and returns its outputs: the
        ``given`` ones checked, the others made. ``a``: the arguments by
        name, for the rules that read them."""
        me = self._ranks[0 if r is None else r]
        for at, name, rule in p.inputs:
            if args[at] is not None or name not in p.optional:   # left out: as a whole
                shape = rule(me, x, a)
                self._expect(args[at] if r is None else args[at][r],
                             name if r is None else f"{name}[{r}]", x.dtype,
                             x.shape if shape is None else shape, index)
        outs = []
        for k, (name, rule, dtype) in enumerate(p.outputs):
            shape = None if rule is same else rule(me, x, a)
            out = given[k] if k < len(given) else None
            if out is None:
                out = new_output(x, shape, dtype)
            elif not (isinstance(out, torch.Tensor) and out.dtype == x.dtype and dtype is None
                      and out.shape == (x.shape if shape is None else shape) and out.is_cuda
                      and out.get_device() == index and out.is_contiguous()):
                self._expect(out, name if r is None else f"{name}[{r}]",
                             x.dtype if dtype is None else OUTPUT_DTYPES[dtype],
                             x.shape if shape is None else shape, index)
            outs.append(out)
        return outs

    # ---- the ops ---------------------------------------------------------

    def all_reduce(self, x: Tensors, *, out: Optional[Tensors] = None,
                   group_size: int = 0) -> Tensors:
        """The sum of ``x`` over each group of ``group_size`` ranks (0: all),
        bitwise equal on every rank, into ``out`` (allocated when None; may
        be ``x``). Returns ``out``. Local mode: lists of tensors."""
        return self._run("all_reduce", (x,), group_size, (out,))

    def all_gather_rmsnorm(self, shard: Tensors, weight: Tensors, eps: float, *,
                           weight_offset: float = 0.0, shard_rows: Optional[Sequence[int]] = None,
                           group_size: int = 0) -> Tuple[Tensors, Tensors]:
        """Gathers the row shards of this rank's group (``shard``: [..., cols],
        leading dims flattened into rows) and normalizes every gathered row.
        Returns ``(normed, residual)``, both [gathered rows, cols]: the RMSNorm
        and the gathered rows themselves. ``shard_rows``: every rank's shard
        rows (default: all equal to this rank's; local mode: each shard's
        own)."""
        return self._run(
            "all_gather_rmsnorm", (shard, weight, eps, weight_offset, shard_rows), group_size)

    def fused_add_rmsnorm(self, x: Tensors, residual: Tensors, weight: Tensors, eps: float, *,
                          weight_offset: float = 0.0, residual_out: Optional[Tensors] = None,
                          fp8: Union[None, str, float] = None,
                          group_size: int = 0) -> Tuple[Tensors, ...]:
        """The end of a tensor-parallel block: ``residual_out = sum(x over the
        group) + residual`` and its RMSNorm. Returns ``(normed, residual_out)``,
        or ``(normed, residual_out, scales)`` with ``fp8="dynamic"`` (normed as
        torch.float8_e4m3fn, scales float32 [rows]); ``fp8=<float>`` is one
        static scale. ``residual_out=residual`` updates the residual in place."""
        return self._run(
            "fused_add_rmsnorm", (x, residual, weight, eps, weight_offset), group_size,
            (None, residual_out), fp8)

    def broadcast(self, x: Tensors, root: int = 0, *, out: Optional[Tensors] = None,
                  group_size: int = 0) -> Tensors:
        """Group rank ``root``'s ``x`` on every rank of its group (each group
        of ``group_size`` ranks, 0: all), bit-exact, any dtype (integers,
        bool, float8 and f64 too), into ``out`` (allocated when None; may be
        ``x``: the in-place broadcast). Every rank passes a tensor of the
        same shape; only the root's is read. Returns ``out``. Local mode:
        lists of tensors."""
        return self._run("broadcast", (x, root), group_size, (out,))

    def scatter(self, x: Tensors, root: int = 0, *, out: Optional[Tensors] = None,
                group_size: int = 0) -> Tensors:
        """Group rank ``root``'s ``x`` ([N, ...]; every rank passes a tensor of
        that shape, only the root's is read) cut into rows: group rank i
        gets rows chunk i (N // G each, one more for the first N % G ranks)
        as [count_i, ...], bit for bit, any dtype, in ``out`` (allocated when
        None). Returns ``out``. Local mode: lists of tensors."""
        return self._run("scatter", (x, root), group_size, (out,))

    def all_gather(self, x: Tensors, *, out: Optional[Tensors] = None,
                   shard_rows: Optional[Sequence[int]] = None, group_size: int = 0) -> Tensors:
        """The shards ``x`` ([rows, ...], any dtype; equal but for the first
        dimension, which may be 0) of this rank's group, concatenated in
        group-rank order: [sum of rows, ...], bit for bit. ``out``: the
        gathered tensor to write (allocated when None; ``x`` may be its own
        slice of it: in place). ``shard_rows``: every rank's rows (default:
        all equal to this rank's; local mode: each shard's own). Returns the
        gathered tensor. Local mode: lists of tensors."""
        return self._run("all_gather", (x, shard_rows), group_size, (out,))

    def reduce_scatter(self, x: Tensors, *, out: Optional[Tensors] = None,
                       group_size: int = 0) -> Tensors:
        """The sum of ``x`` ([N, ...], the same shape on every rank) over each
        group of ``group_size`` ranks (0: all); group rank i gets rows chunk
        i (N // G each, one more for the first N % G ranks) as [count_i,
        ...], allreduce's bits for those rows, into ``out`` (allocated when
        None; must not overlap ``x``). Returns ``out``. Local mode: lists."""
        return self._run("reduce_scatter", (x,), group_size, (out,))

    def reduce_scatter_rmsnorm(self, x: Tensors, weight: Tensors,
                               residual: Optional[Tensors] = None, eps: float = 1e-6, *,
                               weight_offset: float = 0.0, fp8: Union[None, str, float] = None,
                               residual_out: Optional[Tensors] = None,
                               group_size: int = 0) -> Tuple[Tensors, ...]:
        """Sequence parallelism: every rank holds ``x`` [rows, cols]; group
        rank i gets chunk i of the rows summed over the group, plus
        ``residual`` (optional, [count_i, cols]), as ``residual_out``, and
        its RMSNorm. Returns ``(normed, residual_out)``, or with
        ``fp8="dynamic"`` also ``scales`` (float32 [count_i]); ``fp8=<float>``
        is one static scale. ``residual_out=residual`` updates it in place.
        Local mode: lists of per-rank tensors (residual None or a list)."""
        return self._run(
            "reduce_scatter_rmsnorm", (x, residual, weight, eps, weight_offset), group_size,
            (None, residual_out), fp8)
