"""Finds and loads libcollgen.so, and reads the library's catalog.

Nothing is loaded when the package is imported: ``loaded()`` loads the
library and reads its catalog at its first call (the package's first use
of the library: its first catalog table, Communicator, UniqueId or call)
and returns the same ``Library`` afterwards; ``lib``, ``catalog`` and
``constants`` here are its fields. collgen._abi, which declares the
functions and checks the library against the package, is where the rest
of the package gets them.

The search order is: ``$COLLGEN_LIBRARY`` (when set, the only place
tried: an explicit path that fails is an error, never a silent fallback);
next to the package (where ``cmake --install`` puts it); the system
loader. A failure raises :class:`LibraryNotFound` naming every place tried
and why each failed; the next use tries again.

The catalog (status codes, ops, dtypes, FP8 modes, transports, rank
states, struct sizes, constants) comes from ``collgen_catalog_count`` and
``collgen_catalog_entry``: nothing of ``collgen.h`` is copied here.
"""

import ctypes
import os
import threading
from typing import Any, Dict, Iterator, List, NamedTuple, Optional, Tuple

_SONAMES = ("libcollgen.so.0", "libcollgen.so")
_TABLES = ("status", "op", "op_computes", "op_role", "op_scalar", "dtype", "dtype_reduces",
           "fp8", "transport", "rank_state", "struct", "constant")


class LibraryNotFound(ImportError):
    """libcollgen.so could not be loaded; the message names every place tried."""


def _candidates() -> Iterator[Tuple[str, str]]:
    """Yields (description, path or soname) in search order."""
    explicit = os.environ.get("COLLGEN_LIBRARY")
    if explicit:
        yield "$COLLGEN_LIBRARY", explicit
        return
    here = os.path.dirname(os.path.abspath(__file__))
    for soname in _SONAMES:
        yield "next to the package", os.path.join(here, soname)
    for soname in _SONAMES:
        yield "the system loader", soname


def load_library() -> ctypes.CDLL:
    """Returns the loaded ``ctypes.CDLL`` of libcollgen.so.

    Raises LibraryNotFound listing each place tried and its error.
    """
    tried = []
    for where, path in _candidates():
        if os.sep in path and not os.path.exists(path):
            tried.append(f"  {where}: {path} (no such file)")
            continue
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            tried.append(f"  {where}: {path} ({e})")
            continue
        if not hasattr(lib, "collgen_catalog_entry"):
            tried.append(f"  {where}: {path} (loaded, but it has no collgen_catalog_entry: "
                         "a libcollgen older than this package)")
            continue
        return lib
    raise LibraryNotFound(
        "collgen: libcollgen.so could not be loaded; tried, in order:\n" + "\n".join(tried)
        + "\nSet COLLGEN_LIBRARY to the library's path, or install it with cmake --install.")


class Entry:
    """One catalog entry: ``name``, ``value`` and ``detail`` (see collgen.h)."""

    __slots__ = ("name", "value", "detail")

    def __init__(self, name: str, value: int, detail: int) -> None:
        self.name, self.value, self.detail = name, value, detail

    def __repr__(self) -> str:
        return f"Entry({self.name!r}, {self.value}, {self.detail})"


def read_catalog(lib: ctypes.CDLL) -> Dict[str, List[Entry]]:
    """Returns {table: [Entry, ...]} for every table of the library's catalog."""
    lib.collgen_catalog_count.restype = ctypes.c_int
    lib.collgen_catalog_count.argtypes = [ctypes.c_char_p]
    lib.collgen_catalog_entry.restype = ctypes.c_int
    lib.collgen_catalog_entry.argtypes = [
        ctypes.c_char_p, ctypes.c_int, ctypes.POINTER(ctypes.c_char_p),
        ctypes.POINTER(ctypes.c_int64), ctypes.POINTER(ctypes.c_int64)]
    catalog: Dict[str, List[Entry]] = {}
    for table in _TABLES:
        count = lib.collgen_catalog_count(table.encode())
        if count < 0:
            raise LibraryNotFound(f"collgen: the library has no catalog table '{table}'")
        rows = []
        for i in range(count):
            name, value, detail = ctypes.c_char_p(), ctypes.c_int64(), ctypes.c_int64()
            rc = lib.collgen_catalog_entry(table.encode(), i, ctypes.byref(name),
                                           ctypes.byref(value), ctypes.byref(detail))
            if rc != 0 or name.value is None:
                raise LibraryNotFound(f"collgen: catalog table '{table}' entry {i} unreadable")
            rows.append(Entry(name.value.decode(), value.value, detail.value))
        catalog[table] = rows
    return catalog


class Library(NamedTuple):
    """The loaded library (``ctypes.CDLL``, its functions not yet declared:
    collgen._abi does that), its catalog and its constants by name."""

    lib: ctypes.CDLL
    catalog: Dict[str, List[Entry]]
    constants: Dict[str, int]


_loaded: Optional[Library] = None
_lock = threading.Lock()


def loaded() -> Library:
    """The library, loaded and its catalog read at the first call; raises
    LibraryNotFound (and tries again at the next call) when it cannot be."""
    global _loaded
    with _lock:
        if _loaded is None:
            lib = load_library()
            catalog = read_catalog(lib)
            _loaded = Library(lib, catalog, {e.name: e.value for e in catalog["constant"]})
        return _loaded


lib: ctypes.CDLL
catalog: Dict[str, List[Entry]]
constants: Dict[str, int]


def __getattr__(name: str) -> Any:
    """``lib``, ``catalog`` and ``constants``: the fields of loaded()."""
    if name in Library._fields:
        return getattr(loaded(), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
