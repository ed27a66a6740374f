"""Exceptions: ``collgen.Error`` and one subclass per status code.

The subclasses are made from the library's status table, so a status
added to ``COLLGEN_ERRNO_MAP`` gets its exception without an edit here.
Each is named after its status in CamelCase plus ``Error``
(``COLLGEN_ERR_NO_P2P`` -> ``NoP2pError``); a few also derive from the
matching built-in exception, so ``except ValueError`` and
``except TimeoutError`` work as a Python user expects.
"""

import builtins

from ._abi import lib
from ._library import catalog


class Error(RuntimeError):
    """A collgen call failed.

    Attributes: ``status`` (the negative code), ``name`` (e.g.
    ``"COLLGEN_ERR_TIMEOUT"``) and ``message`` (the library's message).
    """

    status = None

    def __init__(self, message, status=None):
        if status is not None:
            self.status = status
        self.name = (lib.collgen_status_name(self.status).decode() if self.status is not None
                     else "COLLGEN_ERR_UNKNOWN")
        self.message = message
        super().__init__(f"{self.name}: {message}")


# Built-in bases of some statuses, and the friendlier names the docs use.
_BUILTIN_BASE = {
    "INVALID_ARG": builtins.ValueError, "NO_MEMORY": builtins.MemoryError,
    "TIMEOUT": builtins.TimeoutError, "IO": builtins.OSError,
    "UNSUPPORTED": builtins.NotImplementedError, "ALIGNMENT": builtins.ValueError,
}
_ALIASES = {"INVALID_ARG": "InvalidArgument"}


def _class_name(status_name):
    return "".join(part.capitalize() for part in status_name.split("_")) + "Error"


_BY_STATUS = {}
__all__ = ["Error", "error_class"]
for _entry in catalog["status"]:
    if _entry.value == 0:
        continue
    _name = _class_name(_entry.name)
    _bases = (Error,) + ((_BUILTIN_BASE[_entry.name],) if _entry.name in _BUILTIN_BASE else ())
    _cls = type(_name, _bases, {"status": _entry.value, "__module__": "collgen",
                                "__doc__": lib.collgen_status_str(_entry.value).decode()})
    globals()[_name] = _cls
    __all__.append(_name)
    if _entry.name in _ALIASES:
        globals()[_ALIASES[_entry.name]] = _cls
        __all__.append(_ALIASES[_entry.name])
    _BY_STATUS[_entry.value] = _cls


def error_class(status):
    """The exception class of a status code (``Error`` for an unknown one)."""
    return _BY_STATUS.get(status, Error)


def check(rc, message_of):
    """Raises the status's exception when ``rc`` is not 0.

    ``message_of`` is a callable giving the library's message (the
    communicator's last error, or the thread's).
    """
    if rc != 0:
        raise error_class(rc)(message_of(), rc)


def last_error():
    """The thread's last message (calls without a handle)."""
    return (lib.collgen_last_error() or b"").decode(errors="replace")
