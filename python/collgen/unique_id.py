"""UniqueId: the name of one rendezvous of a job's processes.

Made by one process (``UniqueId.new()``) and handed to every rank, as
bytes (``bytes(uid)``, 128 bytes) or as text (``str(uid)``, 256 hex
digits). Both forms are checked by the library when read back.
"""

import ctypes
from typing import Callable, Tuple, Union

from ._abi import UniqueIdStruct, constants, lib
from .errors import check, last_error

_BYTES = constants["UNIQUE_ID_BYTES"]
_TEXT_LEN = constants["UNIQUE_ID_TEXT_LEN"]


class UniqueId:
    """A collgen unique id. Hand it only to the job's processes: it holds
    the rendezvous secret."""

    __slots__ = ("_raw",)

    def __init__(self, raw: UniqueIdStruct) -> None:
        """Wraps a ``collgen_unique_id_t``; use new(), from_bytes() or from_text()."""
        if not isinstance(raw, UniqueIdStruct):
            raise TypeError("UniqueId(): use UniqueId.new(), UniqueId.from_bytes() or "
                            "UniqueId.from_text()")
        self._raw = raw

    @classmethod
    def new(cls) -> "UniqueId":
        """A fresh id (random tag and secret)."""
        raw = UniqueIdStruct()
        check(lib.collgen_get_unique_id(ctypes.byref(raw)), last_error)
        return cls(raw)

    @classmethod
    def from_text(cls, text: Union[str, bytes]) -> "UniqueId":
        """Reads the 256-hex-digit text form; ``collgen.InvalidArgument`` when
        it is not a valid id (the message names the first bad character or check)."""
        if isinstance(text, bytes):
            text = text.decode("ascii", errors="replace")
        if not isinstance(text, str):
            raise TypeError(f"text must be str, not {type(text).__name__}")
        if "\0" in text:
            raise ValueError("text: holds a NUL character")
        raw = UniqueIdStruct()
        check(lib.collgen_unique_id_from_text(text.encode("utf-8"), ctypes.byref(raw)),
              last_error)
        return cls(raw)

    @classmethod
    def from_bytes(cls, data: Union[bytes, bytearray, memoryview]) -> "UniqueId":
        """Reads the 128-byte form (as ``bytes(uid)`` gives it), checked as
        from_text() checks the text."""
        data = bytes(data)
        if len(data) != _BYTES:
            raise ValueError(f"data: a unique id is {_BYTES} bytes, not {len(data)}")
        return cls.from_text(data.hex())

    def __bytes__(self) -> bytes:
        return bytes(self._raw.internal)

    def __str__(self) -> str:
        buf = ctypes.create_string_buffer(_TEXT_LEN + 1)
        check(lib.collgen_unique_id_to_text(ctypes.byref(self._raw), buf, len(buf)), last_error)
        return buf.value.decode()

    def __repr__(self) -> str:
        return "UniqueId(<secret>)"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, UniqueId) and bytes(self) == bytes(other)

    def __hash__(self) -> int:
        return hash(bytes(self))

    def __reduce__(self) -> Tuple[Callable[[bytes], "UniqueId"], Tuple[bytes]]:
        return (UniqueId.from_bytes, (bytes(self),))
