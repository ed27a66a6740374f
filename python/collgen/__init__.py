"""collgen: generated multi-GPU collectives, from Python.

Pure Python over libcollgen.so (ctypes): no compiler at install time, any
torch build. Importing the package loads nothing: the library is found
(``$COLLGEN_LIBRARY``, next to this package, then the system loader) and
loaded at its first use, the first access to a name below that needs it
(``Communicator``, ``UniqueId``, a catalog table, ``__version__``) or a
call such as ``library_path()``; a library that cannot be loaded raises
``LibraryNotFound`` there, and one whose status codes or structs differ
from this package's declarations is refused.

Core (framework-neutral): ``Communicator``, ``UniqueId``, the exceptions
(``Error`` and one subclass per status, usable without the library).
PyTorch: ``collgen.torch``.
"""

import importlib
from typing import TYPE_CHECKING, Any, List

from . import catalog
from ._library import LibraryNotFound
from .errors import Error, error_class
# One class per status (after .errors, which they derive from and which
# imports them; straight from the generated module, so type checkers see them).
from ._errors_generated import *  # noqa: F401,F403
from . import _errors_generated

if TYPE_CHECKING:
    from .catalog import CONSTANTS, COPY_ONLY_DTYPES, DTYPES, FP8_MODES, OPS, TRANSPORTS
    from .communicator import Communicator, Registration
    from .unique_id import UniqueId

    __version__: str

# The names made at their first use (which loads the library): name -> the
# module that holds it.
_LAZY = {
    "Communicator": "communicator", "Registration": "communicator", "UniqueId": "unique_id",
    "CONSTANTS": "catalog", "COPY_ONLY_DTYPES": "catalog", "DTYPES": "catalog",
    "FP8_MODES": "catalog", "OPS": "catalog", "TRANSPORTS": "catalog",
}
# Submodules reachable as attributes of the package without an import of
# their own (collgen.communicator.scatter_chunk), imported at first access.
_SUBMODULES = ("_abi", "_abi_functions", "buffers", "communicator", "unique_id")

__all__ = ["Error", "LibraryNotFound", "error_class", "library_path"] + list(_LAZY)
__all__ += _errors_generated.__all__


def _loaded_abi() -> Any:
    """collgen._abi, imported (the library loaded) at the first call."""
    return importlib.import_module("._abi", __name__)


def library_path() -> str:
    """The path of the loaded libcollgen.so (loading it at the first call)."""
    return str(_loaded_abi().lib._name)


def __getattr__(name: str) -> Any:
    """The names of _LAZY, __version__ and the submodules, at their first
    use: imports their module (loading the library) and keeps the value."""
    if name in _LAZY:
        value = getattr(importlib.import_module("." + _LAZY[name], __name__), name)
    elif name == "__version__":
        value = _loaded_abi().lib.collgen_version().decode()
    elif name in _SUBMODULES:
        value = importlib.import_module("." + name, __name__)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> List[str]:
    return sorted(set(globals()) | set(_LAZY) | {"__version__"})
