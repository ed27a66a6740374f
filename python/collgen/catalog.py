"""The library's catalog, as Python reads it: ops, dtypes, FP8 modes,
transports and rank states by name, with their values.

Everything here comes from ``collgen_catalog_entry``; look-ups of an
unknown name raise ``ValueError`` naming the argument and the known
names, never a default.
"""

from ._library import catalog, constants

__all__ = ["OPS", "DTYPES", "FP8_MODES", "TRANSPORTS", "RANK_STATES", "STATUSES", "CONSTANTS",
           "COPY_ONLY_DTYPES", "MOVES_BITS", "dtype_bytes", "lookup"]

OPS = {e.name: e.value for e in catalog["op"]}
DTYPES = {e.name: e.value for e in catalog["dtype"]}
FP8_MODES = {e.name: e.value for e in catalog["fp8"]}
TRANSPORTS = {e.name: e.value for e in catalog["transport"]}
RANK_STATES = {e.value: e.name for e in catalog["rank_state"]}
STATUSES = {e.name: e.value for e in catalog["status"]}
CONSTANTS = dict(constants)
_DTYPE_BYTES = {e.name: e.detail for e in catalog["dtype"]}
# The dtypes only moved as bits (integers, bytes, f64): the ops that compute
# on elements refuse them.
COPY_ONLY_DTYPES = frozenset(e.name for e in catalog["dtype_reduces"] if not e.detail)
# Per op: True for an op that only moves bits (it takes the copy-only
# dtypes too), False for one that computes on elements.
MOVES_BITS = {e.name: not e.detail for e in catalog["op_computes"]}


def lookup(table, name, argument):
    """The value of ``name`` in ``table`` (a dict above); ``argument`` names
    the caller's argument in the ValueError raised for an unknown name."""
    if not isinstance(name, str):
        raise TypeError(f"{argument} must be a str (one of {', '.join(table)}), "
                        f"not {type(name).__name__}")
    try:
        return table[name]
    except KeyError:
        raise ValueError(f"{argument}: unknown value {name!r}; known: {', '.join(table)}") from None


def dtype_bytes(name):
    """Bytes per element of the dtype called ``name`` ("bf16": 2)."""
    lookup(DTYPES, name, "dtype")
    return _DTYPE_BYTES[name]
