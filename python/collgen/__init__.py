"""collgen: generated multi-GPU collectives, from Python.

Pure Python over libcollgen.so (ctypes): no compiler at install time, any
torch build. The library is found through ``$COLLGEN_LIBRARY``, next to
this package, then the system loader; its catalog (statuses, ops, dtypes,
FP8 modes, struct sizes) is read at import, and a library whose structs
differ from this package's declarations is refused.

Core (framework-neutral): ``Communicator``, ``UniqueId``, the exceptions
(``Error`` and one subclass per status). PyTorch: ``collgen.torch``.
"""

from ._library import LibraryNotFound
from . import _abi  # noqa: F401  (declares the functions, checks struct sizes)
from ._abi import lib as _lib
from .catalog import CONSTANTS, COPY_ONLY_DTYPES, DTYPES, FP8_MODES, OPS, TRANSPORTS
from .communicator import Communicator, Registration
from .errors import *  # noqa: F401,F403  (Error and one class per status)
from .errors import Error, error_class
from .unique_id import UniqueId

__version__ = _lib.collgen_version().decode()


def library_path():
    """The path of the loaded libcollgen.so."""
    return _lib._name
