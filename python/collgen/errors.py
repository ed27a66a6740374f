"""Exceptions: ``collgen.Error`` and one subclass per status code.

The subclasses are class statements generated from collgen.h's
COLLGEN_ERRNO_MAP (``_errors_generated.py``, written by
``python/tools/gen_errors.py``), so type checkers see each of them; a
status added to the header gets its exception when the generator is run
again, and collgen._abi refuses a library whose status table differs from
the generated one (:func:`check_statuses`). Each is named after its status
in CamelCase plus ``Error`` (``COLLGEN_ERR_NO_P2P`` -> ``NoP2pError``); a
few also derive from the matching built-in exception, so
``except ValueError`` and ``except TimeoutError`` work as a Python user
expects. Nothing here loads the library.
"""

from typing import Callable, Dict, List, Mapping, Optional, Type

from ._library import LibraryNotFound


class Error(RuntimeError):
    """A collgen call failed.

    Attributes: ``status`` (the negative code), ``name`` (e.g.
    ``"COLLGEN_ERR_TIMEOUT"``) and ``message`` (the library's message).
    """

    status: Optional[int] = None

    def __init__(self, message: str, status: Optional[int] = None) -> None:
        if status is not None:
            self.status = status
        self.name = (_NAMES.get(self.status, "COLLGEN_ERR_UNKNOWN") if self.status is not None
                     else "COLLGEN_ERR_UNKNOWN")
        self.message = message
        super().__init__(f"{self.name}: {message}")


def error_class(status: int) -> Type[Error]:
    """The exception class of a status code (``Error`` for an unknown one)."""
    return _BY_STATUS.get(status, Error)


def check(rc: int, message_of: Callable[[], str]) -> None:
    """Raises the status's exception when ``rc`` is not 0.

    ``message_of`` is a callable giving the library's message (the
    communicator's last error, or the thread's).
    """
    if rc != 0:
        raise error_class(rc)(message_of(), rc)


def last_error() -> str:
    """The thread's last message (calls without a handle)."""
    from ._abi import lib   # the first use loads the library
    return (lib.collgen_last_error() or b"").decode(errors="replace")


def check_statuses(library: Mapping[str, int]) -> None:
    """Raises LibraryNotFound, naming each difference, when the library's
    status table (``{name: code}``, OK too) is not exactly the one the
    exception classes were generated from."""
    diffs: List[str] = []
    for name, code in library.items():
        if name not in STATUSES:
            diffs.append(f"the library has COLLGEN_ERR_{name} ({code}), the package does not")
        elif STATUSES[name] != code:
            diffs.append(f"COLLGEN_ERR_{name} is {code} in the library but {STATUSES[name]} in "
                         "the package")
    diffs += [f"the package has COLLGEN_ERR_{name} ({code}), the library does not"
              for name, code in STATUSES.items() if name not in library]
    if diffs:
        raise LibraryNotFound(
            "collgen: the library's status codes differ from this package's exceptions "
            "(collgen/_errors_generated.py): " + "; ".join(diffs) + ": the library and the "
            "package are from different versions of collgen.h; install them together")


# The generated subclasses derive from Error, so they are imported after it.
from . import _errors_generated  # noqa: E402
from ._errors_generated import *  # noqa: E402,F401,F403
from ._errors_generated import BY_STATUS as _BY_STATUS, STATUSES  # noqa: E402

__all__ = ["Error", "error_class"]
__all__ += _errors_generated.__all__
_NAMES: Dict[int, str] = {code: f"COLLGEN_ERR_{name}" for name, code in STATUSES.items()}
