"""The C declarations the package calls: public structs and one function table.

Array bounds come from the library's catalog constants, and at load time
every struct's ``ctypes.sizeof`` is compared with the size the library was
built with (catalog table "struct"); a library whose structs differ is
refused, naming both sizes. ``python/tests/test_header.py`` checks every
declaration here against ``collgen.h`` in CI.
"""

import ctypes
from ctypes import POINTER, c_char, c_char_p, c_float, c_int, c_int64, c_size_t, c_uint, c_void_p

from ._library import LibraryNotFound, catalog, constants, lib

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


STRUCTS = {
    "collgen_shape_t": Shape, "collgen_plan_t": Plan, "collgen_shape_class_t": ShapeClass,
    "collgen_kernel_info_t": KernelInfo, "collgen_comm_options_t": CommOptions,
    "collgen_comm_info_t": CommInfo, "collgen_comm_health_t": CommHealth,
    "collgen_unique_id_t": UniqueIdStruct,
}

# collgen_allgather_fn and collgen_log_fn
ALLGATHER_FN = ctypes.CFUNCTYPE(c_int, c_void_p, c_void_p, c_void_p, c_size_t)
LOG_FN = ctypes.CFUNCTYPE(None, c_int, c_char_p, c_void_p)

_P = c_void_p                 # any pointer: a handle, a buffer, a CUstream
_PP = POINTER(c_void_p)       # an array of pointers (one per rank)
_SHAPE = POINTER(c_int64)
_SHAPES = POINTER(POINTER(c_int64))
_HANDLE_OUT = POINTER(c_void_p)

# (name, restype, argtypes): every C function the package calls.
FUNCTIONS = [
    ("collgen_status_str", c_char_p, [c_int]),
    ("collgen_status_name", c_char_p, [c_int]),
    ("collgen_last_error", c_char_p, []),
    ("collgen_version", c_char_p, []),
    ("collgen_set_log_handler", None, [LOG_FN, c_void_p]),
    ("collgen_comm_options_init", None, [POINTER(CommOptions)]),
    ("collgen_comm_create", c_int, [_HANDLE_OUT, c_int, POINTER(c_int), POINTER(CommOptions)]),
    ("collgen_comm_destroy", None, [_P]),
    ("collgen_comm_last_error", c_char_p, [_P]),
    ("collgen_comm_info", c_int, [_P, POINTER(CommInfo)]),
    ("collgen_comm_check", c_int, [_P]),
    ("collgen_comm_health", c_int, [_P, POINTER(CommHealth)]),
    ("collgen_comm_abort", c_int, [_P]),
    ("collgen_comm_prepare", c_int, [_P, POINTER(Shape), c_int]),
    ("collgen_allreduce_sum", c_int, [_P, c_int, c_int, _SHAPES, _PP, _PP, c_int, _PP]),
    ("collgen_allgather_rmsnorm", c_int,
     [_P, c_int, c_int, _SHAPES, _PP, _PP, _PP, _PP, c_float, c_float, c_int, _PP]),
    ("collgen_allreduce_residual_rmsnorm", c_int,
     [_P, c_int, c_int, _SHAPES, _PP, _PP, _PP, _PP, _PP, c_float, c_float, c_int, _PP]),
    ("collgen_allreduce_residual_rmsnorm_fp8", c_int,
     [_P, c_int, c_int, _SHAPES, _PP, _PP, _PP, POINTER(POINTER(c_float)), _PP, _PP, c_float,
      c_float, c_int, c_float, c_int, _PP]),
    ("collgen_broadcast", c_int, [_P, c_int, c_int, _SHAPES, _PP, _PP, c_int, c_int, _PP]),
    ("collgen_reduce_scatter_rmsnorm", c_int,
     [_P, c_int, c_int, _SHAPES, _PP, _PP, _PP, _PP, _PP, c_float, c_float, c_int, _PP]),
    ("collgen_reduce_scatter_rmsnorm_fp8", c_int,
     [_P, c_int, c_int, _SHAPES, _PP, _PP, _PP, POINTER(POINTER(c_float)), _PP, _PP, c_float,
      c_float, c_int, c_float, c_int, _PP]),
    ("collgen_scatter_chunk", c_int,
     [c_int64, c_int, c_int, POINTER(c_int64), POINTER(c_int64)]),
    ("collgen_get_unique_id", c_int, [POINTER(UniqueIdStruct)]),
    ("collgen_unique_id_to_text", c_int, [POINTER(UniqueIdStruct), c_char_p, c_size_t]),
    ("collgen_unique_id_from_text", c_int, [c_char_p, POINTER(UniqueIdStruct)]),
    ("collgen_comm_init_rank", c_int,
     [_HANDLE_OUT, c_int, POINTER(UniqueIdStruct), c_int, c_int, POINTER(CommOptions)]),
    ("collgen_comm_init_rank_callback", c_int,
     [_HANDLE_OUT, c_int, ALLGATHER_FN, c_void_p, c_int, c_int, POINTER(CommOptions)]),
    ("collgen_rank_allreduce_sum", c_int, [_P, c_int, c_int, _SHAPE, _P, _P, c_int, _P]),
    ("collgen_rank_allgather_rmsnorm", c_int,
     [_P, c_int, c_int, _SHAPES, _P, _P, _P, _P, c_float, c_float, c_int, _P]),
    ("collgen_rank_allreduce_residual_rmsnorm", c_int,
     [_P, c_int, c_int, _SHAPE, _P, _P, _P, _P, _P, c_float, c_float, c_int, _P]),
    ("collgen_rank_allreduce_residual_rmsnorm_fp8", c_int,
     [_P, c_int, c_int, _SHAPE, _P, _P, _P, POINTER(c_float), _P, _P, c_float, c_float, c_int,
      c_float, c_int, _P]),
    ("collgen_rank_broadcast", c_int, [_P, c_int, c_int, _SHAPE, _P, _P, c_int, c_int, _P]),
    ("collgen_all_gather", c_int, [_P, c_int, c_int, _SHAPES, _PP, _PP, c_int, _PP]),
    ("collgen_rank_all_gather", c_int, [_P, c_int, c_int, _SHAPES, _P, _P, c_int, _P]),
    ("collgen_reduce_scatter_sum", c_int, [_P, c_int, c_int, _SHAPES, _PP, _PP, c_int, _PP]),
    ("collgen_rank_reduce_scatter_sum", c_int, [_P, c_int, c_int, _SHAPE, _P, _P, c_int, _P]),
    ("collgen_rank_reduce_scatter_rmsnorm", c_int,
     [_P, c_int, c_int, _SHAPE, _P, _P, _P, _P, _P, c_float, c_float, c_int, _P]),
    ("collgen_rank_reduce_scatter_rmsnorm_fp8", c_int,
     [_P, c_int, c_int, _SHAPE, _P, _P, _P, POINTER(c_float), _P, _P, c_float, c_float, c_int,
      c_float, c_int, _P]),
    ("collgen_register_buffer", c_int, [_P, _P, c_size_t, _HANDLE_OUT]),
    ("collgen_deregister_buffer", c_int, [_P, _P]),
    ("collgen_catalog_count", c_int, [c_char_p]),
    ("collgen_catalog_entry", c_int,
     [c_char_p, c_int, POINTER(c_char_p), POINTER(c_int64), POINTER(c_int64)]),
]


def _check_struct_sizes():
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


def _declare():
    for name, restype, argtypes in FUNCTIONS:
        try:
            fn = getattr(lib, name)
        except AttributeError:
            raise LibraryNotFound(f"collgen: the library lacks {name}: it is older than this "
                                  "package") from None
        fn.restype, fn.argtypes = restype, argtypes


_check_struct_sizes()
_declare()
