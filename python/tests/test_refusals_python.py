"""Refusals the package makes itself, before any C call (options, ints C
would truncate, per-rank lists, array-interface objects), each naming the
argument and leaving the stand-in untouched; and accepted calls, to show
that the untouched-checks of the refusal tests can tell."""

import os
import re

import pytest

import collgen
from conftest import BUFFER_BYTES
from fakecuda import DeviceArray


def create(e, **options):
    """Communicator([0, 1]) with options, in the env's cache directory."""
    return collgen.Communicator([0, 1], cache_dir=e.cache_dir, **options)


def bf16(ptrs, shape, **cai):
    """bf16 array-interface objects (typestr <u2) over ``ptrs``."""
    return [DeviceArray(p, shape, "<u2", **cai) for p in ptrs]


# (exception class, fragment of str(exception), call)
CASES = {
    "unknown option": (TypeError, "unknown option 'timeout'", lambda e: create(e, timeout=5)),
    "timeout_ms 2^40": (ValueError, "timeout_ms: 1099511627776 is outside -2147483648..",
                        lambda e: create(e, timeout_ms=2**40)),
    "launch_mask -1": (ValueError, "launch_mask: -1 is outside 0..4294967295",
                       lambda e: create(e, launch_mask=-1)),
    "staging_bytes 2^64": (ValueError, "staging_bytes: 18446744073709551616 is outside",
                           lambda e: create(e, staging_bytes=2**64)),
    "max_blocks float": (TypeError, "max_blocks must be an int, not float",
                         lambda e: create(e, max_blocks=1.5)),
    "unknown transport": (ValueError, "transport: unknown value 'ib'",
                          lambda e: create(e, transport="ib")),
    "cache_dir with NUL": (ValueError, "cache_dir: holds a NUL character",
                           lambda e: collgen.Communicator([0, 1], cache_dir="a\0b")),
    "device 2^31": (ValueError, "devices[1]: 2147483648 is outside",
                    lambda e: collgen.Communicator([0, 2**31], cache_dir=e.cache_dir)),
    "group_size 2^33": (ValueError, "group_size: 8589934592 is outside -2147483648..2147483647",
                        lambda e: e.comm.all_reduce(e.IN, e.OUT, group_size=2**33, dtype="bf16",
                                                    shape=(1000,))),
    "dtype name": (ValueError, "input[0]: dtype: unknown value 'bf17'; known: bf16, f16, f32",
                   lambda e: e.comm.all_reduce(e.IN, e.OUT, dtype="bf17", shape=(1000,))),
    "rmsnorm dtype name": (ValueError, "dtype: unknown value 'e4m3'",
                           lambda e: e.comm.all_gather_rmsnorm(e.IN, e.GAM, e.NRM, e.RES, 1e-6,
                                                               dtype="e4m3", shape=(4, 1024))),
    "one input for 2 ranks": (ValueError, "input: 1 entries for 2 ranks",
                              lambda e: e.comm.all_reduce(e.IN[:1], e.OUT, dtype="bf16",
                                                          shape=(1000,))),
    "three outputs for 2 ranks": (ValueError, "output: 3 entries for 2 ranks",
                                  lambda e: e.comm.all_reduce(e.IN, e.OUT + e.SPR[:1],
                                                              dtype="bf16", shape=(1000,))),
    "three streams for 2 ranks": (ValueError, "stream: 3 entries for 2 ranks",
                                  lambda e: e.comm.all_reduce(e.IN, e.OUT, dtype="bf16",
                                                              shape=(1000,), stream=[0, 0, 0])),
    "a pointer, not a list": (TypeError, "input: one process for all GPUs takes a sequence",
                              lambda e: e.comm.all_reduce(e.IN[0], e.OUT, dtype="bf16",
                                                          shape=(1000,))),
    "raw pointer without shape": (TypeError, "input[0]: a raw pointer needs shape=",
                                  lambda e: e.comm.all_reduce(e.IN, e.OUT, dtype="bf16")),
    "pointer as a str": (TypeError, "input[1] must be a device pointer (int)",
                         lambda e: e.comm.all_reduce([e.IN[0], "0x10"], e.OUT, dtype="bf16",
                                                     shape=(1000,))),
    "tensor ranks differ": (ValueError, "input[1]: shape (1000, 5) has 2 dimensions but "
                                        "input[0]'s (1000,) has 1: the ranks' shapes differ",
                            lambda e: e.comm.all_reduce(
                                [DeviceArray(e.IN[0], (1000,)), DeviceArray(e.IN[1], (1000, 5))],
                                e.OUT, dtype="bf16")),
    "strided array": (ValueError, "input[1]: must be contiguous (strides (400, 2))",
                      lambda e: e.comm.all_reduce(
                          [DeviceArray(e.IN[0], (10, 100)),
                           DeviceArray(e.IN[1], (10, 100), strides=(400, 2))],
                          e.OUT, dtype="bf16")),
    "strided shard": (ValueError, "shard[0]: must be contiguous (strides (2, 8))",
                      lambda e: e.comm.all_gather_rmsnorm(
                          bf16(e.IN[:1], (4, 1024), strides=(2, 8)) + e.IN[1:], e.GAM, e.NRM,
                          e.RES, 1e-6, dtype="bf16", shape=(4, 1024))),
    "bf16 array without dtype": (TypeError, "input: its dtype is not known from the array",
                                 lambda e: e.comm.all_reduce(bf16(e.IN, (1000,)), e.OUT)),
    "array dtype size": (ValueError, "input[0]: dtype bf16 has 2-byte elements, the array 4-byte "
                                     "ones (<f4)",
                         lambda e: e.comm.all_reduce([DeviceArray(p, (1000,), "<f4") for p in e.IN],
                                                     e.OUT, dtype="bf16")),
    "big-endian array": (ValueError, "input[0]: typestr '>f4' is not little-endian",
                         lambda e: e.comm.all_reduce([DeviceArray(p, (1000,), ">f4") for p in e.IN],
                                                     e.OUT)),
    "scales without fp8": (TypeError, "scales: only with fp8='dynamic'",
                           lambda e: e.comm.fused_add_rmsnorm(e.IN, e.RES, e.GAM, e.NRM, e.OUT,
                                                              1e-6, scales=e.SPR, dtype="bf16",
                                                              shape=(4, 1024))),
    "fp8 mode name": (ValueError, "fp8: unknown value 'e5m2'",
                      lambda e: e.comm.fused_add_rmsnorm(e.IN, e.RES, e.GAM, e.NRM, e.OUT, 1e-6,
                                                         fp8="e5m2", dtype="bf16",
                                                         shape=(4, 1024))),
}


@pytest.mark.parametrize("what", CASES)
def test_refused_by_python(bad_env, what):
    exc, fragment, call = CASES[what]
    with pytest.raises(exc) as e:
        call(bad_env)
    assert type(e.value) is exc, f"{type(e.value).__name__}: {e.value}"
    assert not isinstance(e.value, collgen.Error), "refused by the library, not by Python"
    assert fragment in str(e.value)
    bad_env.assert_untouched()


def test_integer_arrays_take_their_copy_only_dtype_and_are_refused(bad_env):
    """An array's typestr names its catalog dtype (a bool's bytes are u8);
    allreduce_sum computes, so the library refuses each copy-only one
    before anything is launched."""
    assert collgen.COPY_ONLY_DTYPES == {"u8", "i8", "i16", "i32", "i64", "f64"}
    for typestr, name in (("|u1", "u8"), ("|b1", "u8"), ("|i1", "i8"), ("<i2", "i16"),
                          ("<i4", "i32"), ("<i8", "i64"), ("<f8", "f64")):
        with pytest.raises(collgen.InvalidArgument) as e:
            bad_env.comm.all_reduce([DeviceArray(p, (1000,), typestr) for p in bad_env.IN],
                                    [DeviceArray(p, (1000,), typestr) for p in bad_env.OUT])
        assert f"allreduce_sum computes on elements: {name} is a copy-only dtype" in \
            e.value.message, typestr
        bad_env.assert_untouched()


def test_accepted_allreduce_launches_once_per_rank(bad_env):
    e = bad_env
    data = [os.urandom(2000) for _ in range(2)]
    for p, d in zip(e.IN, data):
        e.driver.write(p, d)
    e.comm.all_reduce(e.IN, e.OUT, dtype="bf16", shape=(1000,))
    s = e.driver.stats
    assert (s.launches, s.wrong_context) == (2, 0)
    assert [e.driver.read(p, 2000) for p in e.IN] == data    # inputs are only read
    e.driver.reset_stats()
    e.comm.all_reduce(bf16(e.IN, (10, 100)), bf16(e.OUT, (10, 100)), dtype="bf16")
    assert e.driver.stats.launches == 2


def test_accepted_static_fp8_in_local_mode(bad_env):
    e = bad_env
    e.comm.fused_add_rmsnorm(e.IN, e.RES, e.GAM, e.NRM, e.OUT, 1e-6, fp8=0.5, dtype="bf16",
                             shape=(4, 1024))
    assert e.driver.stats.launches == 2


def test_untouched_check_sees_one_written_byte(bad_env):
    e = bad_env
    at = int.from_bytes(os.urandom(2), "little") % BUFFER_BYTES
    e.driver.write(e.GAM[1] + at, b"\x00")
    assert e.buffers.written() == [(1, 4)]
    with pytest.raises(AssertionError):
        e.assert_untouched()


def test_too_small_output_array_is_refused(bad_env):
    e = bad_env
    with pytest.raises(ValueError, match="output"):
        e.comm.all_reduce(bf16(e.IN, (1000,)), bf16(e.OUT, (10,)), dtype="bf16")
    bad_env.assert_untouched()


def test_too_small_rmsnorm_buffers_are_refused(bad_env):
    e = bad_env
    sh = (4, 1024)
    with pytest.raises(ValueError, match=r"weight\[0\]: the array holds 1024 bytes; the call "
                                         r"reads 2048"):
        e.comm.fused_add_rmsnorm(bf16(e.IN, sh), bf16(e.RES, sh), bf16(e.GAM, (512,)),
                                 bf16(e.NRM, sh), bf16(e.OUT, sh), 1e-6, dtype="bf16")
    with pytest.raises(ValueError, match=r"residual\[0\]: the array holds 8192 bytes; the call "
                                         r"writes 16384"):
        e.comm.all_gather_rmsnorm(bf16(e.IN, sh), bf16(e.GAM, (1024,)), bf16(e.NRM, (8, 1024)),
                                  bf16(e.RES, sh), 1e-6, dtype="bf16")
    with pytest.raises(ValueError, match=r"scales\[0\]: the array holds 8 bytes; the call writes 16"):
        e.comm.fused_add_rmsnorm(bf16(e.IN, sh), bf16(e.RES, sh), bf16(e.GAM, (1024,)),
                                 bf16(e.NRM, sh), bf16(e.OUT, sh), 1e-6, dtype="bf16",
                                 fp8="dynamic", scales=[DeviceArray(p, (2,), "<f4")
                                                        for p in e.SPR])
    bad_env.assert_untouched()


def test_read_only_output_is_refused(bad_env):
    e = bad_env
    outs = bf16(e.OUT, (1000,))
    outs[1].__cuda_array_interface__["data"] = (e.OUT[1], True)
    with pytest.raises(ValueError, match=r"output\[1\]: the array is read-only"):
        e.comm.all_reduce(bf16(e.IN, (1000,)), outs, dtype="bf16")
    bad_env.assert_untouched()


def test_shard_rows_is_refused_in_local_mode(bad_env):
    e = bad_env
    with pytest.raises(TypeError, match="shard_rows: one process for all GPUs"):
        e.comm.all_gather_rmsnorm(bf16(e.IN, (4, 1024)), bf16(e.GAM, (1024,)), e.NRM, e.RES,
                                  1e-6, dtype="bf16", shard_rows=[4, 4])
    bad_env.assert_untouched()


def test_error_without_status_is_unknown():
    err = collgen.Error("made by hand")
    assert err.name == "COLLGEN_ERR_UNKNOWN" and err.message == "made by hand"


def test_scatter_chunk_is_the_contract_rule():
    """N // G rows each, one more for the first N % G ranks, in rank order."""
    from collgen.communicator import scatter_chunk
    assert [scatter_chunk(7, 3, i) for i in range(3)] == [(0, 3), (3, 2), (5, 2)]
    assert [scatter_chunk(2, 4, i) for i in range(4)] == [(0, 1), (1, 1), (2, 0), (2, 0)]
    assert [scatter_chunk(8, 2, i) for i in range(2)] == [(0, 4), (4, 4)]
    for n in range(20):
        for g in range(1, 9):
            chunks = [scatter_chunk(n, g, i) for i in range(g)]
            assert sum(c for _, c in chunks) == n
            assert all(s + c == chunks[i + 1][0] for i, (s, c) in enumerate(chunks[:-1]))


def test_scatter_chunk_refuses_bad_arguments():
    """The library's checks (collgen_scatter_chunk), raised with its message."""
    from collgen.communicator import scatter_chunk
    for args, word in (((-1, 2, 0), "rows is -1"), ((4, 0, 0), "group_size is 0"),
                       ((4, 2, 2), "group_rank 2 is not in [0, 2)"),
                       ((4, 2, -1), "group_rank -1")):
        with pytest.raises(collgen.InvalidArgument, match=re.escape(word)):
            scatter_chunk(*args)
    start, count = scatter_chunk((1 << 40) + 3, 7, 6)
    assert start + count == (1 << 40) + 3


def test_reduce_scatter_launches_once_per_rank_and_sizes_outputs(bad_env):
    """Accepted: one launch per rank, inputs only read. An array output
    smaller than its rank's chunk (rank 0 of [7, 100] gets 4 rows) is
    refused by Python before anything is launched."""
    e = bad_env
    data = [os.urandom(1400) for _ in range(2)]
    for p, d in zip(e.IN, data):
        e.driver.write(p, d)
    e.comm.reduce_scatter(bf16(e.IN, (7, 100)), [bf16([e.OUT[0]], (4, 100))[0],
                                                 bf16([e.OUT[1]], (3, 100))[0]], dtype="bf16")
    assert (e.driver.stats.launches, e.driver.stats.wrong_context) == (2, 0)
    assert [e.driver.read(p, 1400) for p in e.IN] == data
    e.driver.reset_stats()
    with pytest.raises(ValueError) as err:
        e.comm.reduce_scatter(bf16(e.IN, (7, 100)), [bf16([e.OUT[0]], (3, 100))[0],
                                                     bf16([e.OUT[1]], (3, 100))[0]],
                              dtype="bf16")
    assert "output[0]: the array holds 600 bytes; the call writes 800" in str(err.value)
    assert e.driver.stats.launches == 0
