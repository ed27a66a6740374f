"""The library's catalog, as Python reads it: ops, dtypes, FP8 modes,
transports and rank states by name, with their values.

Everything here comes from ``collgen_catalog_entry``; look-ups of an
unknown name raise ``ValueError`` naming the argument and the known
names, never a default. Importing this module loads nothing: the tables
are computed at the first access to any of them (PEP 562 ``__getattr__``),
which loads the library (collgen._abi) and raises LibraryNotFound when it
cannot be loaded.
"""

from typing import Any, Dict, FrozenSet, Mapping, TypeVar

__all__ = ["OPS", "DTYPES", "FP8_MODES", "TRANSPORTS", "RANK_STATES", "STATUSES", "CONSTANTS",
           "COPY_ONLY_DTYPES", "MOVES_BITS", "ROLES", "SCALARS", "dtype_bytes", "lookup"]

# The tables, bound by _load() at the first access (the library's first use).
OPS: Dict[str, int]
DTYPES: Dict[str, int]
FP8_MODES: Dict[str, int]
TRANSPORTS: Dict[str, int]
RANK_STATES: Dict[int, str]
STATUSES: Dict[str, int]
CONSTANTS: Dict[str, int]
# The dtypes only moved as bits (integers, bytes, f64): the ops that compute
# on elements refuse them.
COPY_ONLY_DTYPES: FrozenSet[str]
# Per op: True for an op that only moves bits (it takes the copy-only
# dtypes too), False for one that computes on elements.
MOVES_BITS: Dict[str, bool]
# Per op: its buffer roles and scalar arguments, name -> index in
# collgen_call_t's buffers[] / scalars[] (catalog tables op_role, op_scalar).
ROLES: Dict[str, Dict[str, int]]
SCALARS: Dict[str, Dict[str, int]]
_DTYPE_BYTES: Dict[str, int]


_TABLES = ("OPS", "DTYPES", "FP8_MODES", "TRANSPORTS", "RANK_STATES", "STATUSES", "CONSTANTS",
           "COPY_ONLY_DTYPES", "MOVES_BITS", "ROLES", "SCALARS", "_DTYPE_BYTES")


def _per_op(rows: Any, ops: Mapping[int, str]) -> Dict[str, Dict[str, int]]:
    """{op: {name: index}} of a table of one row per (op, name), each op's
    rows in its order."""
    out: Dict[str, Dict[str, int]] = {name: {} for name in ops.values()}
    for e in rows:
        names = out[ops[e.value]]
        names[e.name] = len(names)
    return out


def _load() -> None:
    """Binds every table above from the library's catalog (loading it)."""
    from ._abi import catalog, constants
    globals().update(
        OPS={e.name: e.value for e in catalog["op"]},
        DTYPES={e.name: e.value for e in catalog["dtype"]},
        FP8_MODES={e.name: e.value for e in catalog["fp8"]},
        TRANSPORTS={e.name: e.value for e in catalog["transport"]},
        RANK_STATES={e.value: e.name for e in catalog["rank_state"]},
        STATUSES={e.name: e.value for e in catalog["status"]},
        CONSTANTS=dict(constants),
        _DTYPE_BYTES={e.name: e.detail for e in catalog["dtype"]},
        COPY_ONLY_DTYPES=frozenset(e.name for e in catalog["dtype_reduces"] if not e.detail),
        MOVES_BITS={e.name: not e.detail for e in catalog["op_computes"]})
    by_value = {e.value: e.name for e in catalog["op"]}
    globals().update(ROLES=_per_op(catalog["op_role"], by_value),
                     SCALARS=_per_op(catalog["op_scalar"], by_value))


def __getattr__(name: str) -> Any:
    """A table above, computed at the first access to any of them."""
    if name in _TABLES:
        _load()
        return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


V = TypeVar("V")


def lookup(table: Mapping[str, V], name: str, argument: str) -> V:
    """The value of ``name`` in ``table`` (a dict above); ``argument`` names
    the caller's argument in the ValueError raised for an unknown name."""
    if not isinstance(name, str):
        raise TypeError(f"{argument} must be a str (one of {', '.join(table)}), "
                        f"not {type(name).__name__}")
    try:
        return table[name]
    except KeyError:
        raise ValueError(f"{argument}: unknown value {name!r}; known: {', '.join(table)}") from None


def dtype_bytes(name: str) -> int:
    """Bytes per element of the dtype called ``name`` ("bf16": 2)."""
    if "_DTYPE_BYTES" not in globals():
        _load()
    lookup(DTYPES, name, "dtype")
    return _DTYPE_BYTES[name]
