"""Device buffers as the package takes them: a raw device pointer (an int,
with ``shape=`` and ``dtype=``), or any object with
``__cuda_array_interface__`` (CuPy, Numba, PyTorch, ...).

``view()`` turns either into a :class:`View` (pointer, shape, dtype name)
and refuses, with a ``TypeError`` or ``ValueError`` naming the argument,
what the library cannot take: a strided array, a dtype the catalog does
not list, a shape that is not a tuple of non-negative int64 numbers.
Numbers that go to C are range-checked here (ctypes would truncate them).
"""

import ctypes
import operator
from typing import Any, Dict, Optional, Protocol, Sequence, Tuple, Type, Union

from . import catalog
from .catalog import dtype_bytes, lookup

__all__ = ["View", "view", "c_range", "int_in_c_range", "c_int_arg", "c_int64_arg",
           "CudaArray", "Buffer", "Buffers", "Streams", "Shape"]


class CudaArray(Protocol):
    """Anything with ``__cuda_array_interface__`` (CuPy, Numba, PyTorch, ...)."""

    @property
    def __cuda_array_interface__(self) -> Dict[str, Any]: ...


# One buffer of a call: a device pointer (an int, with shape= and dtype=) or
# an array-interface object.
Buffer = Union[int, CudaArray]
# A buffer argument of an op: this rank's buffer (one process per GPU) or a
# sequence with one per rank (one process for every GPU).
Buffers = Union[Buffer, Sequence[Optional[Buffer]]]
# A stream argument: None (the default stream), a CUstream handle (an int)
# or an object with .cuda_stream or .ptr (torch, CuPy); or one per rank.
Streams = Any
# A shape: a tuple of non-negative ints (an int n: (n,)).
Shape = Union[int, Sequence[int]]

_INT64 = (-(1 << 63), (1 << 63) - 1)


def _int_in(value: Any, argument: str, lo: int, hi: int) -> int:
    try:
        v = operator.index(value)
    except TypeError:
        raise TypeError(f"{argument} must be an int, not {type(value).__name__}") from None
    if isinstance(value, bool):
        raise TypeError(f"{argument} must be an int, not bool")
    if not lo <= v <= hi:
        raise ValueError(f"{argument}: {v} is outside {lo}..{hi}")
    return v


def c_range(ctype: Type[Any]) -> Tuple[int, int]:
    """(lowest, highest) value of a ctypes integer type."""
    bits = 8 * ctypes.sizeof(ctype)
    if ctype(-1).value < 0:
        return -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return 0, (1 << bits) - 1


def int_in_c_range(value: Any, argument: str, ctype: Type[Any]) -> int:
    """``value`` as a value of the ctypes integer type ``ctype``, or a
    TypeError / ValueError naming ``argument`` (never truncated)."""
    return _int_in(value, argument, *c_range(ctype))


def c_int_arg(value: Any, argument: str) -> int:
    """``value`` as a C int, or an error naming ``argument`` (never truncated)."""
    return int_in_c_range(value, argument, ctypes.c_int)


def c_int64_arg(value: Any, argument: str) -> int:
    """``value`` as an int64_t, or an error naming ``argument``."""
    return _int_in(value, argument, *_INT64)


class View:
    """One buffer of a call: ``ptr`` (int, 0 for none), ``shape`` (tuple of
    ints), ``dtype`` (a catalog name, or None when unknown), ``nbytes``
    (None for a raw pointer, whose size nobody knows) and ``readonly``."""

    __slots__ = ("ptr", "shape", "dtype", "nbytes", "readonly")

    def __init__(self, ptr: int, shape: Tuple[int, ...], dtype: Optional[str],
                 nbytes: Optional[int] = None, readonly: bool = False) -> None:
        self.ptr, self.shape, self.dtype = ptr, shape, dtype
        self.nbytes, self.readonly = nbytes, readonly

    @property
    def numel(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n


def _shape_arg(shape: Any, argument: str) -> Tuple[int, ...]:
    if isinstance(shape, int) and not isinstance(shape, bool):
        shape = (shape,)
    try:
        dims = tuple(shape)
    except TypeError:
        raise TypeError(f"{argument}: shape must be a tuple of ints, not "
                        f"{type(shape).__name__}") from None
    return tuple(_int_in(d, f"{argument}: shape[{i}]", 0, _INT64[1]) for i, d in enumerate(dims))


def _dtype_of_typestr(typestr: str, argument: str) -> Optional[str]:
    """The catalog dtype of an array-interface typestr ('<f2' -> 'f16',
    '<i4' -> 'i32', '|u1' -> 'u8', a bool '|b1' -> 'u8': its bytes), or
    None when the catalog has none of that kind and size (bf16 has no
    typestr, and '<u2' is how it is exposed: pass dtype=)."""
    if len(typestr) < 3 or typestr[0] not in "<|=":
        raise ValueError(f"{argument}: typestr {typestr!r} is not little-endian")
    kind, size = typestr[1], int(typestr[2:])
    if kind == "b":
        kind = "u"
    if kind in "fiu":
        name = f"{kind}{8 * size}"
        return name if name in catalog.DTYPES else None
    return None


def view(obj: Any, argument: str, dtype: Optional[str] = None,
         shape: Optional[Shape] = None) -> View:
    """A View of ``obj`` (an int pointer or an array-interface object).

    ``dtype`` (a catalog name) and ``shape`` are required with a raw
    pointer. An array keeps its own shape; ``dtype`` may name its type
    where the array interface cannot (bf16 data exposed as uint16), and
    must then match its element size.
    """
    if dtype is not None:
        lookup(catalog.DTYPES, dtype, f"{argument}: dtype")
    cai = getattr(obj, "__cuda_array_interface__", None)
    if cai is None:
        if isinstance(obj, bool) or not isinstance(obj, int):
            raise TypeError(f"{argument} must be a device pointer (int) or an object with "
                            f"__cuda_array_interface__, not {type(obj).__name__}")
        ptr = _int_in(obj, argument, 0, (1 << 64) - 1)
        if shape is None:
            raise TypeError(f"{argument}: a raw pointer needs shape=")
        return View(ptr, _shape_arg(shape, argument), dtype)
    dims = _shape_arg(cai["shape"], argument)
    typestr = cai["typestr"]
    try:
        itemsize = int(typestr[2:])
    except (TypeError, ValueError):
        raise ValueError(f"{argument}: typestr {typestr!r} is not an array-interface "
                         "type") from None
    data = cai.get("data")
    if data is None:
        data = (0, False)   # the interface's "no memory" (a zero-size array)
    strides = cai.get("strides")
    if strides is not None:
        expect, want = itemsize, []
        for d in reversed(dims):
            want.append(expect)
            expect *= d
        if tuple(strides) != tuple(reversed(want)) and 0 not in dims:
            raise ValueError(f"{argument}: must be contiguous (strides {tuple(strides)})")
    name = _dtype_of_typestr(typestr, argument)
    if dtype is not None:
        if dtype_bytes(dtype) != itemsize:
            raise ValueError(f"{argument}: dtype {dtype} has {dtype_bytes(dtype)}-byte elements, "
                             f"the array {itemsize}-byte ones ({typestr})")
        name = dtype
    numel = 1
    for d in dims:
        numel *= d
    ptr = _int_in(data[0], f"{argument}: data pointer", 0, (1 << 64) - 1)
    return View(ptr, dims, name, numel * itemsize, bool(data[1]))
