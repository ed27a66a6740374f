"""The C declarations the package calls: public structs and the function table.

The structs are written here. Array bounds come from the library's catalog
constants, and at load time every struct's ``ctypes.sizeof`` is compared
with the size the library was built with (catalog table "struct"); a
library whose structs differ is refused, naming both sizes. The functions
and callback types are not written by hand: ``_abi_functions`` (generated
from ``collgen.h`` by ``python/tools/gen_abi.py``) lists every one, and
each is declared on the library here. ``python/tests/test_header.py``
checks every declaration against ``collgen.h`` in CI, and that the
generated module is current.

Importing this module is the package's first use of the library: it loads
it (collgen._library.loaded()), refuses it when its status table differs
from the package's exceptions or its structs from these declarations, and
declares every function; the rest of the package takes ``lib`` from here.
"""

import ctypes
from ctypes import POINTER, c_char, c_char_p, c_int, c_int64, c_size_t, c_uint, c_void_p
from typing import Any, Dict, Optional

from . import errors
from ._abi_functions import CALLBACKS, FUNCTIONS as _FUNCTIONS
from ._library import LibraryNotFound, loaded

lib, catalog, constants = loaded()

MAX_DEVICES = constants["MAX_DEVICES"]
UNIQUE_ID_BYTES = constants["UNIQUE_ID_BYTES"]
_ARCH = c_char * 16


class Shape(ctypes.Structure):
    """collgen_shape_t: the rows of COLLGEN_SHAPE_FIELDS in collgen.h"""
    _fields_ = [("op", c_int), ("dtype", c_int), ("ngpus", c_int), ("group_size", c_int),
                ("tensor_rank", c_int), ("elems", c_int64), ("rows", c_int64),
                ("cols", c_int64), ("aligned16", c_int), ("inplace", c_int), ("fp8", c_int),
                ("max_blocks", c_int), ("arch", _ARCH)]


class Plan(ctypes.Structure):
    """collgen_plan_t"""
    _fields_ = [("kernel", c_char * 96), ("algo", c_char * 16), ("canonical", c_char * 256),
                ("group", c_int), ("vec", c_int), ("block", c_int), ("grid", c_int),
                ("items", c_int), ("cols", c_int64), ("peer_reads", c_uint),
                ("peer_writes", c_uint), ("copy_from", c_int), ("copy_to", c_int)]


class ShapeClass(ctypes.Structure):
    """collgen_shape_class_t"""
    _fields_ = [("op", c_int), ("dtype", c_int), ("ngpus", c_int),
                ("group_sizes", POINTER(c_int)), ("group_size_count", c_int),
                ("cols", POINTER(c_int64)), ("cols_count", c_int),
                ("fp8_modes", POINTER(c_int)), ("fp8_mode_count", c_int), ("arch", _ARCH)]


class KernelInfo(ctypes.Structure):
    """collgen_kernel_info_t"""
    _fields_ = [("key", c_char * 65), ("kernel", c_char * 96), ("cache_hit", c_int),
                ("registers", c_int), ("spill_bytes", c_int), ("milliseconds", ctypes.c_double),
                ("cubin", c_void_p), ("cubin_size", c_size_t)]


class CommOptions(ctypes.Structure):
    """collgen_comm_options_t"""
    _fields_ = [("cache_dir", c_char_p), ("timeout_ms", c_int), ("max_blocks", c_int),
                ("allow_shared_devices", c_int), ("launch_mask", c_uint),
                ("staging_bytes", c_size_t), ("pdl", c_int), ("transport", c_int)]


class CommInfo(ctypes.Structure):
    """collgen_comm_info_t"""
    _fields_ = [("ndev", c_int), ("devices", c_int * MAX_DEVICES),
                ("arch", _ARCH * MAX_DEVICES), ("p2p", (c_int * MAX_DEVICES) * MAX_DEVICES),
                ("link", (_ARCH * MAX_DEVICES) * MAX_DEVICES),
                ("signal_bytes_per_rank", c_size_t), ("nhosts", c_int),
                ("host", c_int * MAX_DEVICES),
                ("route", (c_int * MAX_DEVICES) * MAX_DEVICES)]


class RankHealth(ctypes.Structure):
    """one entry of collgen_comm_health_t.rank"""
    _fields_ = [("state", c_int), ("peer", c_int)]


class CommHealth(ctypes.Structure):
    """collgen_comm_health_t"""
    _fields_ = [("ndev", c_int), ("rank", RankHealth * MAX_DEVICES)]


class UniqueIdStruct(ctypes.Structure):
    """collgen_unique_id_t"""
    _fields_ = [("internal", ctypes.c_ubyte * UNIQUE_ID_BYTES)]


class Call(ctypes.Structure):
    """collgen_call_t: one call of any op (collgen_run, collgen_rank_run)."""
    _fields_ = [("op", c_int), ("dtype", c_int), ("tensor_rank", c_int), ("group_size", c_int),
                ("shapes", POINTER(POINTER(c_int64))),
                ("buffers", POINTER(c_void_p) * constants["MAX_ROLES"]),
                ("mine", c_void_p * constants["MAX_ROLES"]),
                ("scalars", ctypes.c_double * constants["MAX_SCALARS"]),
                ("streams", POINTER(c_void_p)), ("stream", c_void_p)]


STRUCTS = {
    "collgen_shape_t": Shape, "collgen_plan_t": Plan, "collgen_shape_class_t": ShapeClass,
    "collgen_kernel_info_t": KernelInfo, "collgen_comm_options_t": CommOptions,
    "collgen_comm_info_t": CommInfo, "collgen_comm_health_t": CommHealth,
    "collgen_unique_id_t": UniqueIdStruct, "collgen_call_t": Call,
}


def _ctype(spelled: Optional[str]) -> Any:
    """The ctypes type of a type of _abi_functions (a ctypes name, a struct's
    or callback's typedef name, or None, behind one "*" per pointer level)."""
    if spelled is None:
        return None
    base = spelled.lstrip("*")
    t = _NAMED[base] if base in _NAMED else getattr(ctypes, base)
    for _ in range(len(spelled) - len(base)):
        t = POINTER(t)
    return t


# The typedef names a type may use: the structs above and the callbacks.
_NAMED: Dict[str, Any] = dict(STRUCTS)
_NAMED.update({name: ctypes.CFUNCTYPE(_ctype(ret), *map(_ctype, args))
               for name, (ret, args) in CALLBACKS.items()})
ALLGATHER_FN = _NAMED["collgen_allgather_fn"]
LOG_FN = _NAMED["collgen_log_fn"]

# (name, restype, argtypes): every function of collgen.h, made from the
# generated _abi_functions (python/tools/gen_abi.py).
FUNCTIONS = [(name, _ctype(ret), [_ctype(a) for a in args]) for name, ret, args in _FUNCTIONS]


def _check_statuses() -> None:
    """Refuses a library whose status codes differ from the exception
    classes (generated from collgen.h: collgen/_errors_generated.py)."""
    errors.check_statuses({e.name: e.value for e in catalog["status"]})


def _check_struct_sizes() -> None:
    """Refuses a library whose public structs differ from these declarations."""
    built = {e.name: e.value for e in catalog["struct"]}
    for name, cls in STRUCTS.items():
        if name not in built:
            raise LibraryNotFound(f"collgen: the library does not describe {name}; "
                                  "it does not match this package")
        if built[name] != ctypes.sizeof(cls):
            raise LibraryNotFound(
                f"collgen: {name} is {built[name]} bytes in the library but {ctypes.sizeof(cls)} "
                "in this package's declaration: the library and the package are from different "
                "versions of collgen.h; install them together")


def _declare() -> None:
    for name, restype, argtypes in FUNCTIONS:
        try:
            fn = getattr(lib, name)
        except AttributeError:
            raise LibraryNotFound(f"collgen: the library lacks {name}: it is older than this "
                                  "package") from None
        fn.restype, fn.argtypes = restype, argtypes


_check_statuses()
_check_struct_sizes()
_declare()
