"""The exceptions: one collgen.Error subclass per status of the library's
catalog, with the library's name and code, the built-in bases Python users
catch, and collgen.errors.check raising with the library's own message."""

import builtins

import pytest

import collgen
from collgen import errors
from collgen._abi import lib
from collgen.catalog import STATUSES


def test_every_status_has_its_own_class():
    failing = {name: code for name, code in STATUSES.items() if code != 0}
    assert STATUSES["OK"] == 0 and len(failing) == len(STATUSES) - 1 >= 18
    classes = {code: collgen.error_class(code) for code in failing.values()}
    assert len(set(classes.values())) == len(failing)
    for name, code in failing.items():
        cls = classes[code]
        assert issubclass(cls, collgen.Error) and cls is not collgen.Error
        assert cls.status == code
        camel = "".join(p.capitalize() for p in name.split("_")) + "Error"
        assert getattr(collgen, camel) is cls, camel
        assert cls.__doc__ == lib.collgen_status_str(code).decode()
        e = cls("what happened")
        assert e.status == code
        assert e.name == lib.collgen_status_name(code).decode() == f"COLLGEN_ERR_{name}"
        assert e.message == "what happened"
        assert str(e) == f"COLLGEN_ERR_{name}: what happened"


def test_ok_and_unknown_codes_have_no_subclass():
    assert collgen.error_class(0) is collgen.Error
    assert collgen.error_class(-999) is collgen.Error
    assert collgen.error_class(-1) is collgen.InvalidArgument


def test_builtin_bases():
    assert collgen.InvalidArgument is collgen.InvalidArgError
    assert collgen.InvalidArgument.status == STATUSES["INVALID_ARG"]
    assert issubclass(collgen.InvalidArgument, ValueError)
    assert issubclass(collgen.AlignmentError, ValueError)
    assert collgen.TimeoutError is not builtins.TimeoutError
    assert issubclass(collgen.TimeoutError, builtins.TimeoutError)
    assert issubclass(collgen.NoMemoryError, MemoryError)
    assert issubclass(collgen.IoError, OSError)
    assert issubclass(collgen.UnsupportedError, NotImplementedError)
    assert not issubclass(collgen.NoP2pError, (ValueError, OSError))
    with pytest.raises(ValueError):
        raise collgen.InvalidArgument("caught as a ValueError")


def test_check_passes_zero_without_asking_for_a_message():
    assert errors.check(0, lambda: pytest.fail("message asked for on success")) is None


def test_check_raises_with_the_library_message():
    table = b"no-such-table"
    rc = lib.collgen_catalog_entry(table, 0, None, None, None)
    assert rc == STATUSES["INVALID_ARG"]
    with pytest.raises(collgen.InvalidArgument) as e:
        errors.check(rc, errors.last_error)
    assert e.value.status == rc
    assert e.value.message == ("collgen_catalog: unknown table 'no-such-table' (known: status, op, "
                               "op_computes, op_fp8, op_role, op_scalar, op_scalar_default, "
                               "dtype, dtype_reduces, fp8, transport, rank_state, "
                               "struct, constant)")
    assert e.value.message == errors.last_error()

