"""The table of refused calls of tests/bad_inputs.c, through the Python
Communicator (one process, 2 stand-in devices): every row the Python API
can express, with the library's status class and message fragment, or
the Python refusal that comes first. After each: nothing launched, copied
or uploaded, and every poisoned buffer intact."""

import math
import os
import re

import pytest

import collgen
from conftest import REPO
from fakecuda import DeviceArray

BF, F32 = "bf16", "f32"
TYPESTR = {"bf16": "<u2", "f16": "<f2", "f32": "<f4", "u8": "|u1", "i32": "<i4"}
INV, ALIGN, NODEV = collgen.InvalidArgument, collgen.AlignmentError, collgen.NoDeviceError
SH = (4, 1024)          # the RMSNorm ops' rows x cols: 8 KiB of bf16 per rank
NAN, INF = math.nan, math.inf
MAX_ELEMS = collgen.CONSTANTS["MAX_ELEMS"]
MAX_TIMEOUT = collgen.CONSTANTS["MAX_TIMEOUT_MS"]


def arrays(ptrs, shapes, dtype):
    """Array-interface objects over ``ptrs``, one shape each."""
    return [DeviceArray(p, s, TYPESTR[dtype]) for p, s in zip(ptrs, shapes)]


def ar(e, dt, s0, s1, in0, in1, out0, out1, group=0):
    """bad_inputs.c's ar(): raw pointers with shape= when the ranks' shapes
    are equal, else array-interface inputs of each rank's shape."""
    if s0 == s1:
        return e.comm.all_reduce([in0, in1], [out0, out1], group_size=group, dtype=dt, shape=s0)
    return e.comm.all_reduce(arrays([in0, in1], [s0, s1], dt), [out0, out1], group_size=group,
                             dtype=dt)


def ag(e, dt, s0, s1, in0, nrm0, res0, gam0, eps=1e-6, wo=0.0, group=0):
    """bad_inputs.c's ag(): all_gather_rmsnorm, rank 1 on its own valid buffers."""
    shards, gam, shape = [in0, e.IN[1]], [gam0, e.GAM[1]], s0
    if s0 != s1:
        shards, gam, shape = arrays(shards, [s0, s1], dt), arrays(gam, [s0[-1:], s1[-1:]], dt), None
    return e.comm.all_gather_rmsnorm(shards, gam, [nrm0, e.NRM[1]], [res0, e.RES[1]], eps,
                                     weight_offset=wo, group_size=group, dtype=dt, shape=shape)


def rr(e, dt, s0, s1, x0, ri0, nrm0, ro0, gam0, eps=1e-6, wo=0.0, group=0):
    """bad_inputs.c's rr(): fused_add_rmsnorm, rank 1 on its own valid buffers."""
    xs, shape = [x0, e.IN[1]], s0
    if s0 != s1:
        xs, shape = arrays(xs, [s0, s1], dt), None
    return e.comm.fused_add_rmsnorm(xs, [ri0, e.RES[1]], [gam0, e.GAM[1]], [nrm0, e.NRM[1]],
                                    [ro0, e.OUT[1]], eps, weight_offset=wo, group_size=group,
                                    dtype=dt, shape=shape)


def rq(e, x0, q0, sc0, ro0, gam0, fp8, eps=1e-6):
    """bad_inputs.c's rq(): the FP8 op on bf16 [4, 1024]; ``fp8`` "dynamic"
    (row scales sc0, rank 1's SPR when sc0 is set) or a static scale."""
    scales = [sc0, e.SPR[1] if sc0 else 0] if fp8 == "dynamic" else None
    return e.comm.fused_add_rmsnorm([x0, e.IN[1]], e.RES, [gam0, e.GAM[1]], [q0, e.NRM[1]],
                                    [ro0, e.OUT[1]], eps, fp8=fp8, scales=scales, dtype=BF,
                                    shape=SH)


def bc(e, dt, s0, s1, in0, in1, out0, out1, root=0, group=0):
    """bad_inputs.c's bc(): broadcast, raw pointers with shape= when the
    ranks' shapes are equal, else array-interface outputs of each shape."""
    if s0 == s1:
        return e.comm.broadcast([in0, in1], [out0, out1], root, group_size=group, dtype=dt,
                                shape=s0)
    return e.comm.broadcast([in0, in1], arrays([out0, out1], [s0, s1], dt), root,
                            group_size=group, dtype=dt)


def sc(e, dt, s0, s1, in0, in1, out0, out1, root=0, group=0):
    """bad_inputs.c's sc(): scatter, raw pointers with shape= when the ranks'
    shapes are equal, else array-interface inputs of each shape."""
    if s0 == s1:
        return e.comm.scatter([in0, in1], [out0, out1], root, group_size=group, dtype=dt,
                              shape=s0)
    return e.comm.scatter(arrays([in0, in1], [s0, s1], dt), [out0, out1], root,
                          group_size=group, dtype=dt)


def BC(e, dt=BF, root=0, group=0, s=(1000,)):
    """bc() with valid buffers."""
    return bc(e, dt, s, s, e.IN[0], e.IN[1], e.OUT[0], e.OUT[1], root, group)


def rooted_rows(op, call):
    """bad_inputs.c's rooted_cases(): what broadcast and scatter refuse
    alike, through `call` (bc or sc), each row named "<op> <label>"."""
    def ok(e, dt=BF, root=0, group=0, s=(1000,)):
        return call(e, dt, s, s, e.IN[0], e.IN[1], e.OUT[0], e.OUT[1], root, group)
    method = getattr(collgen.Communicator, op)
    return [(f"{op} {what}", exc, frag, fn) for what, exc, frag, fn in [
        ("comm NULL (Python)", ValueError, "the communicator is closed",
         lambda e: method(closed(e), e.IN, e.OUT, 0, dtype=BF, shape=(1000,))),
        ("root -1", INV, "root -1 is not a group rank (0..1)", lambda e: ok(e, root=-1)),
        ("root 2 of 2", INV, "root 2 is not a group rank (0..1)", lambda e: ok(e, root=2)),
        ("root 1, groups of one", INV, "root 1 is not a group rank (0..0)",
         lambda e: ok(e, root=1, group=1)),
        ("root 5, zero elements", INV, "root 5 is not a group rank",
         lambda e: ok(e, root=5, s=(0,))),
        ("dtype 9 (Python)", TypeError, "dtype must be a str", lambda e: ok(e, dt=9)),
        ("tensor rank 0", INV, "tensor rank 1..8", lambda e: ok(e, s=())),
        ("tensor rank 9", INV, "tensor rank 1..8", lambda e: ok(e, s=(1,) * 9)),
        ("shapes differ", INV, "shapes differ",
         lambda e: call(e, BF, (1000,), (999,), e.IN[0], e.IN[1], e.OUT[0], e.OUT[1])),
        ("same count, other dims", INV, "shapes differ",
         lambda e: call(e, BF, (10, 100), (100, 10), e.IN[0], e.IN[1], e.OUT[0], e.OUT[1])),
        ("negative dimension (Python)", ValueError, "shape[0]: -4 is outside",
         lambda e: ok(e, s=(-4,))),
        ("2^40 + 1 elements", INV, "COLLGEN_MAX_ELEMS", lambda e: ok(e, s=(MAX_ELEMS + 1,))),
        ("group_size 3", INV, "group_size 3 does not divide", lambda e: ok(e, group=3)),
        ("root's input NULL", INV, "input of rank 1 is NULL",
         lambda e: call(e, BF, (1000,), (1000,), e.IN[0], None, e.OUT[0], e.OUT[1], 1)),
        ("output of rank 0 NULL", INV, "output of rank 0 is NULL",
         lambda e: call(e, BF, (1000,), (1000,), None, e.IN[1], 0, e.OUT[1], 1)),
        ("f64 output at +4 bytes", ALIGN, "not aligned to its 8-byte",
         lambda e: call(e, "f64", (1000,), (1000,), e.IN[0], e.IN[1], e.OUT[0] + 4, e.OUT[1])),
        ("f64 root input at +4 bytes", ALIGN, "input of rank 0",
         lambda e: call(e, "f64", (1000,), (1000,), e.IN[0] + 4, None, e.OUT[0], e.OUT[1])),
        ("root's output 16 bytes into its input", INV, "only exact in-place is allowed",
         lambda e: call(e, BF, (1000,), (1000,), e.IN[0], None, e.IN[0] + 16, e.OUT[1])),
        ("groups of one: overlap still refused", INV, "partially overlaps",
         lambda e: call(e, BF, (1000,), (1000,), e.IN[0], e.IN[1], e.OUT[0], e.IN[1] + 2, 0, 1)),
    ]]


def rsn(e, x0, ri0, nrm0, ro0, gam0, dt=BF, eps=1e-6, fp8=None, s=SH):
    """bad_inputs.c's rsn(): reduce_scatter_rmsnorm, rank 1 on its own valid
    buffers (fp8 "dynamic": row scales SPR)."""
    return e.comm.reduce_scatter_rmsnorm([x0, e.IN[1]], [gam0, e.GAM[1]], [nrm0, e.NRM[1]],
                                         [ro0, e.OUT[1]], eps, residual=[ri0, e.RES[1]], fp8=fp8,
                                         scales=e.SPR if fp8 == "dynamic" else None, dtype=dt,
                                         shape=s)


def RSN(e, **kw):
    """rsn() of SH with valid buffers."""
    return rsn(e, e.IN[0], e.RES[0], e.NRM[0], e.OUT[0], e.GAM[0], **kw)


def create(e, devices, **options):
    """Communicator(devices) with options, in the env's cache directory."""
    return collgen.Communicator(devices, cache_dir=e.cache_dir, **options)


def closed(e):
    """A Communicator over devices 0 and 1, already closed (Python's NULL comm)."""
    c = create(e, [0, 1])
    c.close()
    return c


def row(what, exc, fragment, call):
    """A row as a named pytest parameter (the shapes the library must see:
    tensor rank and inner dimensions, passed as given)."""
    return pytest.param(what, exc, fragment, call, id=what)


def AR(e, dt=BF, group=0, s=(1000,)):
    """ar() with valid buffers."""
    return ar(e, dt, s, s, e.IN[0], e.IN[1], e.OUT[0], e.OUT[1], group)


def rs(e, dt, s0, s1, in0, in1, out0, out1, group=0):
    """bad_inputs.c's rs(): reduce_scatter, as ar()."""
    if s0 == s1:
        return e.comm.reduce_scatter([in0, in1], [out0, out1], group_size=group, dtype=dt,
                                     shape=s0)
    return e.comm.reduce_scatter(arrays([in0, in1], [s0, s1], dt), [out0, out1],
                                 group_size=group, dtype=dt)


def RS(e, dt=BF, group=0, s=(1000,), out0=None, out1=None):
    """rs() of bf16 [1000] (rank 1 owns rows 500..999), outputs replaceable."""
    return rs(e, dt, s, s, e.IN[0], e.IN[1], e.OUT[0] if out0 is None else out0,
              e.OUT[1] if out1 is None else out1, group)


def AG(e, **kw):
    """ag() of SH with valid buffers."""
    return ag(e, kw.pop("dt", BF), SH, SH, e.IN[0], e.NRM[0], e.RES[0], e.GAM[0], **kw)


def RR(e, **kw):
    """rr() of SH with valid buffers."""
    return rr(e, kw.pop("dt", BF), SH, SH, e.IN[0], e.RES[0], e.NRM[0], e.OUT[0], e.GAM[0], **kw)


def ga(e, dt, s0, s1, in0, in1, out0, out1, group=0):
    """bad_inputs.c's ga(): all_gather over both ranks' shards and outputs
    (raw pointers with shape= when the shards are equal)."""
    if s0 == s1:
        return e.comm.all_gather([in0, in1], [out0, out1], group_size=group, dtype=dt, shape=s0)
    return e.comm.all_gather(arrays([in0, in1], [s0, s1], dt), [out0, out1], group_size=group,
                             dtype=dt)


def GA(e, dt=BF, group=0, s=SH):
    """ga() of SH with valid buffers."""
    return ga(e, dt, s, s, e.IN[0], e.IN[1], e.OUT[0], e.OUT[1], group)


def RQ(e, fp8, **kw):
    """rq() with valid buffers."""
    return rq(e, e.IN[0], e.NRM[0], e.SPR[0], e.OUT[0], e.GAM[0], fp8, **kw)


# (what, exception class, message fragment, call). The names are those of
# bad_inputs.c; "(Python)" marks a refusal the package makes first.
CASES = [
    # comm_cases
    ("0 devices", INV, "ndev must be 1..8", lambda e: create(e, [])),
    ("9 devices", INV, "ndev must be 1..8", lambda e: create(e, [0, 1, 2, 3, 4, 5, 6, 7, 0])),
    ("device listed twice", INV, "listed twice", lambda e: create(e, [0, 0])),
    ("negative device", NODEV, "device -1 does not exist", lambda e: create(e, [0, -1])),
    ("device past the last", NODEV, "does not exist", lambda e: create(e, [0, 2])),
    ("max_blocks -1", INV, "max_blocks must be 0..256", lambda e: create(e, [0, 1], max_blocks=-1)),
    ("max_blocks 257", INV, "max_blocks must be 0..256",
     lambda e: create(e, [0, 1], max_blocks=257)),
    ("timeout_ms -5", INV, "timeout_ms must be", lambda e: create(e, [0, 1], timeout_ms=-5)),
    ("timeout_ms past 24 h", INV, "timeout_ms must be",
     lambda e: create(e, [0, 1], timeout_ms=MAX_TIMEOUT + 1)),
    ("comm_info NULL comm (Python)", ValueError, "the communicator is closed",
     lambda e: closed(e).info()),
    ("comm_check NULL (Python)", ValueError, "the communicator is closed",
     lambda e: closed(e).check()),
    # allreduce_cases
    ("allreduce comm NULL (Python)", ValueError, "the communicator is closed",
     lambda e: closed(e).all_reduce(e.IN, e.OUT, dtype=BF, shape=(1000,))),
    ("dtype 9 (Python)", TypeError, "dtype must be a str", lambda e: AR(e, dt=9)),
    ("dtype -1 (Python)", TypeError, "dtype must be a str", lambda e: AR(e, dt=-1)),
    ("tensor rank 0", INV, "tensor rank 1..8", lambda e: AR(e, s=())),
    ("i32 allreduce", INV, "allreduce_sum computes on elements: i32 is a copy-only dtype",
     lambda e: AR(e, dt="i32")),
    ("u8 allreduce, groups of one (a copy)", INV, "u8 is a copy-only dtype",
     lambda e: AR(e, dt="u8", group=1)),
    ("i16 allgather_rmsnorm", INV,
     "allgather_rmsnorm computes on elements: i16 is a copy-only dtype",
     lambda e: AG(e, dt="i16")),
    ("i64 residual op", INV,
     "allreduce_residual_rmsnorm computes on elements: i64 is a copy-only dtype",
     lambda e: RR(e, dt="i64")),
    ("fp8 u8 x", INV, "allreduce_residual_rmsnorm computes on elements: u8 is a copy-only dtype",
     lambda e: e.comm.fused_add_rmsnorm(e.IN, e.RES, e.GAM, e.NRM, e.OUT, 1e-6, fp8="dynamic",
                                        scales=e.SPR, dtype="u8", shape=SH)),
    ("tensor rank 9", INV, "tensor rank 1..8", lambda e: AR(e, s=(1,) * 9)),
    ("negative dimension (Python)", ValueError, "shape[0]: -4 is outside",
     lambda e: AR(e, s=(-4,))),
    ("shapes differ", INV, "shapes differ",
     lambda e: ar(e, BF, (1000,), (999,), e.IN[0], e.IN[1], e.OUT[0], e.OUT[1])),
    ("same count, other dims", INV, "shapes differ",
     lambda e: ar(e, BF, (10, 100), (100, 10), e.IN[0], e.IN[1], e.OUT[0], e.OUT[1])),
    ("2^40 x 2^40 (wraps to 0)", INV, "COLLGEN_MAX_ELEMS", lambda e: AR(e, s=(1 << 40, 1 << 40))),
    ("2^64 elements (wraps to 0)", INV, "COLLGEN_MAX_ELEMS",
     lambda e: AR(e, s=(1 << 22, 1 << 21, 1 << 21))),
    ("2^40 + 1 elements", INV, "COLLGEN_MAX_ELEMS", lambda e: AR(e, s=(MAX_ELEMS + 1,))),
    ("group_size 3 of 2", INV, "group_size 3 does not divide", lambda e: AR(e, group=3)),
    ("group_size -1", INV, "group_size -1 does not divide", lambda e: AR(e, group=-1)),
    ("group_size 9", INV, "group_size 9 does not divide", lambda e: AR(e, group=9)),
    ("input of rank 1 NULL", INV, "input of rank 1 is NULL",
     lambda e: ar(e, BF, (1000,), (1000,), e.IN[0], 0, e.OUT[0], e.OUT[1])),
    ("output of rank 0 NULL", INV, "output of rank 0 is NULL",
     lambda e: ar(e, BF, (1000,), (1000,), e.IN[0], e.IN[1], 0, e.OUT[1])),
    ("bf16 input at an odd byte", ALIGN, "not aligned to its 2-byte",
     lambda e: ar(e, BF, (1000,), (1000,), e.IN[0] + 1, e.IN[1], e.OUT[0], e.OUT[1])),
    ("f32 output at +2 bytes", ALIGN, "not aligned to its 4-byte",
     lambda e: ar(e, F32, (1000,), (1000,), e.IN[0], e.IN[1], e.OUT[0], e.OUT[1] + 2)),
    ("output 16 bytes into input", INV, "partially overlaps",
     lambda e: ar(e, BF, (1000,), (1000,), e.IN[0], e.IN[1], e.IN[0] + 16, e.OUT[1])),
    ("input 16 bytes into output", INV, "partially overlaps",
     lambda e: ar(e, BF, (1000,), (1000,), e.IN[0], e.OUT[1] + 16, e.OUT[0], e.OUT[1])),
    ("groups of one: overlap still refused", INV, "partially overlaps",
     lambda e: ar(e, BF, (1000,), (1000,), e.IN[0], e.IN[1], e.IN[0] + 2, e.OUT[1], 1)),
    # broadcast_cases and scatter_cases (rooted_cases, then scatter's own)
    *rooted_rows("broadcast", bc),
    *rooted_rows("scatter", sc),
    ("scatter root 1's output at chunk 0 of its input", INV, "is the same buffer as",
     lambda e: sc(e, BF, (1000,), (1000,), None, e.IN[1], e.OUT[0], e.IN[1], 1)),
    ("scatter root 0's output at rank 1's chunk", INV, "only exact in-place is allowed",
     lambda e: sc(e, BF, (1000,), (1000,), e.IN[0], None, e.IN[0] + 1000, e.OUT[1], 0)),
    ("scatter root 1's output an element past its chunk", INV, "partially overlaps",
     lambda e: sc(e, BF, (1000,), (1000,), None, e.IN[1], e.OUT[0], e.IN[1] + 1002, 1)),
    ("scatter [999]: root 1's output at 499 rows, not its start of 500", INV,
     "only exact in-place is allowed",
     lambda e: sc(e, BF, (999,), (999,), None, e.IN[1], e.OUT[0], e.IN[1] + 998, 1)),
    ("scatter i64 (copy-only) gets to the buffer checks", INV, "output of rank 0 is NULL",
     lambda e: sc(e, "i64", (1000,), (1000,), e.IN[0], None, None, e.OUT[1], 0)),
    ("scatter [3] u8: the one-row chunk needs its output", INV, "output of rank 1 is NULL",
     lambda e: sc(e, "u8", (3,), (3,), e.IN[0], None, e.OUT[0], None, 0)),
    ("scatter non-root bf16 output at an odd byte", ALIGN, "output of rank 1 (",
     lambda e: sc(e, BF, (1000,), (1000,), e.IN[0], None, e.OUT[0], e.OUT[1] + 1, 0)),
    # rmsnorm_cases (all_gather_rmsnorm)
    ("rmsnorm comm NULL (Python)", ValueError, "the communicator is closed",
     lambda e: closed(e).all_gather_rmsnorm(e.IN, e.GAM, e.NRM, e.RES, 1e-6, dtype=BF, shape=SH)),
    row("rmsnorm tensor rank 1", INV, "needs tensor rank 2..8",
        lambda e: ag(e, BF, (4096,), (4096,), e.IN[0], e.NRM[0], e.RES[0], e.GAM[0])),
    ("rmsnorm dtype 13 (Python)", TypeError, "dtype must be a str", lambda e: AG(e, dt=13)),
    ("eps NaN", INV, "eps must be finite", lambda e: AG(e, eps=NAN)),
    ("eps -1", INV, "eps must be finite", lambda e: AG(e, eps=-1.0)),
    ("eps inf", INV, "eps must be finite", lambda e: AG(e, eps=INF)),
    ("weight_offset inf", INV, "weight_offset must be a finite number", lambda e: AG(e, wo=-INF)),
    ("weight_offset NaN", INV, "weight_offset must be a finite number", lambda e: AG(e, wo=NAN)),
    ("cols differ", INV, "only dimension 0 may differ",
     lambda e: ag(e, BF, SH, (4, 512), e.IN[0], e.NRM[0], e.RES[0], e.GAM[0])),
    row("inner dims differ", INV, "only dimension 0 may differ",
        lambda e: ag(e, BF, (2, 2, 1024), (2, 1, 1024), e.IN[0], e.NRM[0], e.RES[0], e.GAM[0])),
    ("negative rows (Python)", ValueError, "shard[0]: shape[0]: -1 is outside",
     lambda e: ag(e, BF, (-1, 1024), SH, e.IN[0], e.NRM[0], e.RES[0], e.GAM[0])),
    ("gathered 2^40 x 4096", INV, "COLLGEN_MAX_ELEMS",
     lambda e: ag(e, BF, (1 << 39, 4096), (1 << 39, 4096), e.IN[0], e.NRM[0], e.RES[0], e.GAM[0])),
    ("rmsnorm group_size 3", INV, "group_size 3 does not divide", lambda e: AG(e, group=3)),
    ("input of rank 0 NULL", INV, "input of rank 0 is NULL",
     lambda e: ag(e, BF, SH, SH, 0, e.NRM[0], e.RES[0], e.GAM[0])),
    ("normed of rank 0 NULL", INV, "normed output of rank 0 is NULL",
     lambda e: ag(e, BF, SH, SH, e.IN[0], 0, e.RES[0], e.GAM[0])),
    ("gamma at an odd byte", ALIGN, "gamma of rank 0",
     lambda e: ag(e, BF, SH, SH, e.IN[0], e.NRM[0], e.RES[0], e.GAM[0] + 1)),
    ("residual at an odd byte", ALIGN, "residual output of rank 0",
     lambda e: ag(e, BF, SH, SH, e.IN[0], e.NRM[0], e.RES[0] + 3, e.GAM[0])),
    ("normed is residual", INV, "is the same buffer as",
     lambda e: ag(e, BF, SH, SH, e.IN[0], e.RES[0], e.RES[0], e.GAM[0])),
    ("normed overlaps residual", INV, "partially overlaps",
     lambda e: ag(e, BF, SH, SH, e.IN[0], e.SPR[0], e.SPR[0] + 8192, e.GAM[0])),
    ("input inside residual", INV, "partially overlaps",
     lambda e: ag(e, BF, SH, SH, e.RES[0] + 4096, e.NRM[0], e.RES[0], e.GAM[0])),
    ("input is residual", INV, "input",
     lambda e: ag(e, BF, SH, SH, e.RES[0], e.NRM[0], e.RES[0], e.GAM[0])),
    ("input overlaps normed", INV, "partially overlaps",
     lambda e: ag(e, BF, SH, SH, e.NRM[0] + 2048, e.NRM[0], e.RES[0], e.GAM[0])),
    ("gamma inside normed", INV, "partially overlaps",
     lambda e: ag(e, BF, SH, SH, e.IN[0], e.NRM[0], e.RES[0], e.NRM[0] + 4096)),
    ("gamma is residual", INV, "gamma",
     lambda e: ag(e, BF, SH, SH, e.IN[0], e.NRM[0], e.RES[0], e.RES[0])),
    ("groups of one: overlap still refused", INV, "partially overlaps",
     lambda e: ag(e, BF, SH, SH, e.RES[0] + 2, e.NRM[0], e.RES[0], e.GAM[0], group=1)),
    # residual_rmsnorm_cases (fused_add_rmsnorm)
    ("residual op comm NULL (Python)", ValueError, "the communicator is closed",
     lambda e: closed(e).fused_add_rmsnorm(e.IN, e.RES, e.GAM, e.NRM, e.OUT, 1e-6, dtype=BF,
                                           shape=SH)),
    row("residual op tensor rank 1", INV, "needs tensor rank 2..8",
        lambda e: rr(e, BF, (4096,), (4096,), e.IN[0], e.RES[0], e.NRM[0], e.OUT[0], e.GAM[0])),
    ("residual op dtype 15 (Python)", TypeError, "dtype must be a str", lambda e: RR(e, dt=15)),
    ("residual op eps NaN", INV, "eps must be finite", lambda e: RR(e, eps=NAN)),
    ("residual op eps -1e-6", INV, "eps must be finite", lambda e: RR(e, eps=-1e-6)),
    ("residual op eps inf", INV, "eps must be finite", lambda e: RR(e, eps=INF)),
    ("residual op weight_offset NaN", INV, "weight_offset must be a finite number", lambda e: RR(e, wo=NAN)),
    ("residual op shapes differ", INV, "shapes differ",
     lambda e: rr(e, BF, SH, (4, 512), e.IN[0], e.RES[0], e.NRM[0], e.OUT[0], e.GAM[0])),
    row("residual op rows differ (3-D)", INV, "shapes differ",
        lambda e: rr(e, BF, (2, 2, 1024), (4, 1, 1024), e.IN[0], e.RES[0], e.NRM[0], e.OUT[0],
                     e.GAM[0])),
    ("residual op negative rows (Python)", ValueError, "shape[0]: -4 is outside",
     lambda e: rr(e, BF, (-4, 1024), (-4, 1024), e.IN[0], e.RES[0], e.NRM[0], e.OUT[0],
                  e.GAM[0])),
    ("residual op 2^50 elements", INV, "COLLGEN_MAX_ELEMS",
     lambda e: rr(e, BF, (1 << 30, 1 << 20), (1 << 30, 1 << 20), e.IN[0], e.RES[0], e.NRM[0],
                  e.OUT[0], e.GAM[0])),
    ("residual op group_size 3", INV, "group_size 3 does not divide", lambda e: RR(e, group=3)),
    ("x of rank 0 NULL", INV, "x of rank 0 is NULL",
     lambda e: rr(e, BF, SH, SH, 0, e.RES[0], e.NRM[0], e.OUT[0], e.GAM[0])),
    ("residual_out of rank 0 NULL", INV, "residual_out of rank 0 is NULL",
     lambda e: rr(e, BF, SH, SH, e.IN[0], e.RES[0], e.NRM[0], 0, e.GAM[0])),
    ("residual_in at an odd byte", ALIGN, "residual_in of rank 0",
     lambda e: rr(e, BF, SH, SH, e.IN[0], e.RES[0] + 1, e.NRM[0], e.OUT[0], e.GAM[0])),
    ("f32 gamma at +2 bytes", ALIGN, "not aligned to its 4-byte",
     lambda e: rr(e, F32, SH, SH, e.IN[0], e.RES[0], e.NRM[0], e.OUT[0], e.GAM[0] + 2)),
    ("normed is residual_out", INV, "is the same buffer as",
     lambda e: rr(e, BF, SH, SH, e.IN[0], e.RES[0], e.OUT[0], e.OUT[0], e.GAM[0])),
    ("normed is residual_in", INV, "is the same buffer as",
     lambda e: rr(e, BF, SH, SH, e.IN[0], e.RES[0], e.RES[0], e.OUT[0], e.GAM[0])),
    ("x is residual_out", INV, "is the same buffer as",
     lambda e: rr(e, BF, SH, SH, e.OUT[0], e.RES[0], e.NRM[0], e.OUT[0], e.GAM[0])),
    ("residual_out 16 bytes into residual_in", INV, "only exact in-place is allowed",
     lambda e: rr(e, BF, SH, SH, e.IN[0], e.RES[0], e.NRM[0], e.RES[0] + 16, e.GAM[0])),
    ("normed overlaps x", INV, "partially overlaps",
     lambda e: rr(e, BF, SH, SH, e.IN[0], e.RES[0], e.IN[0] + 4096, e.OUT[0], e.GAM[0])),
    ("gamma inside residual_out", INV, "partially overlaps",
     lambda e: rr(e, BF, SH, SH, e.IN[0], e.RES[0], e.NRM[0], e.OUT[0], e.OUT[0] + 2048)),
    ("residual op, groups of one: overlap still refused", INV, "partially overlaps",
     lambda e: rr(e, BF, SH, SH, e.IN[0], e.RES[0], e.SPR[0] + 2, e.SPR[0] + 8192, e.GAM[0],
                  group=1)),
    # residual_rmsnorm_fp8_cases (fused_add_rmsnorm with fp8=)
    ("fp8 comm NULL (Python)", ValueError, "the communicator is closed",
     lambda e: closed(e).fused_add_rmsnorm(e.IN, e.RES, e.GAM, e.NRM, e.OUT, 1e-6, fp8="dynamic",
                                           scales=e.SPR, dtype=BF, shape=SH)),
    ("fp8 mode NONE (Python)", ValueError, "fp8: 'dynamic' or a static scale",
     lambda e: RQ(e, "none")),
    ("fp8 static scale 0", INV, "static_scale must be finite and > 0", lambda e: RQ(e, 0.0)),
    ("fp8 static scale -1", INV, "static_scale must be finite and > 0", lambda e: RQ(e, -1.0)),
    ("fp8 static scale NaN", INV, "static_scale must be finite and > 0", lambda e: RQ(e, NAN)),
    ("fp8 static scale inf", INV, "static_scale must be finite and > 0", lambda e: RQ(e, INF)),
    ("fp8 static with row_scales (Python)", TypeError, "scales: not with a static fp8 scale",
     lambda e: e.comm.fused_add_rmsnorm(e.IN, e.RES, e.GAM, e.NRM, e.OUT, 1e-6, fp8=0.5,
                                        scales=e.SPR, dtype=BF, shape=SH)),
    ("fp8 eps NaN", INV, "eps must be finite", lambda e: RQ(e, "dynamic", eps=NAN)),
    ("fp8 dtype 14 (Python)", TypeError, "dtype must be a str",
     lambda e: e.comm.fused_add_rmsnorm(e.IN, e.RES, e.GAM, e.NRM, e.OUT, 1e-6, fp8="dynamic",
                                        scales=e.SPR, dtype=4, shape=SH)),
    ("row_scales array NULL (dynamic) (Python)", TypeError, "scales: one process for all GPUs",
     lambda e: e.comm.fused_add_rmsnorm(e.IN, e.RES, e.GAM, e.NRM, e.OUT, 1e-6, fp8="dynamic",
                                        dtype=BF, shape=SH)),
    ("normed_fp8 of rank 0 NULL", INV, "normed_fp8 output of rank 0 is NULL",
     lambda e: rq(e, e.IN[0], 0, e.SPR[0], e.OUT[0], e.GAM[0], "dynamic")),
    ("row_scales of rank 0 NULL", INV, "row_scales of rank 0 is NULL",
     lambda e: rq(e, e.IN[0], e.NRM[0], 0, e.OUT[0], e.GAM[0], "dynamic")),
    ("row_scales at +2 bytes", ALIGN, "row_scales of rank 0",
     lambda e: rq(e, e.IN[0], e.NRM[0], e.SPR[0] + 2, e.OUT[0], e.GAM[0], "dynamic")),
    ("normed_fp8 inside x", INV, "partially overlaps",
     lambda e: rq(e, e.IN[0], e.IN[0] + 4096, e.SPR[0], e.OUT[0], e.GAM[0], "dynamic")),
    ("normed_fp8 is residual_out", INV, "is the same buffer as",
     lambda e: rq(e, e.IN[0], e.OUT[0], e.SPR[0], e.OUT[0], e.GAM[0], 0.5)),
    ("normed_fp8 overlaps residual_in", INV, "partially overlaps",
     lambda e: rq(e, e.IN[0], e.RES[0] + 8190, e.SPR[0], e.OUT[0], e.GAM[0], 0.5)),
    ("row_scales inside normed_fp8", INV, "partially overlaps",
     lambda e: rq(e, e.IN[0], e.NRM[0], e.NRM[0] + 4080, e.OUT[0], e.GAM[0], "dynamic")),
    ("row_scales inside gamma", INV, "partially overlaps",
     lambda e: rq(e, e.IN[0], e.NRM[0], e.GAM[0] + 8, e.OUT[0], e.GAM[0], "dynamic")),
    ("row_scales inside residual_out", INV, "partially overlaps",
     lambda e: rq(e, e.IN[0], e.NRM[0], e.OUT[0] + 64, e.OUT[0], e.GAM[0], "dynamic")),
    # all_gather_cases
    ("all_gather comm NULL (Python)", ValueError, "the communicator is closed",
     lambda e: closed(e).all_gather(e.IN, e.OUT, dtype=BF, shape=SH)),
    ("all_gather dtype 13 (Python)", TypeError, "dtype must be a str", lambda e: GA(e, dt=13)),
    row("all_gather tensor rank 0", INV, "needs tensor rank 1..8", lambda e: GA(e, s=())),
    row("all_gather inner dims differ", INV, "only dimension 0 may differ",
        lambda e: ga(e, BF, (2, 2, 1024), (2, 1, 1024), e.IN[0], e.IN[1], e.OUT[0], e.OUT[1])),
    ("all_gather negative rows (Python)", ValueError, "shard[0]: shape[0]: -1 is outside",
     lambda e: ga(e, BF, (-1, 1024), SH, e.IN[0], e.IN[1], e.OUT[0], e.OUT[1])),
    ("all_gather gathered past 2^40", INV, "COLLGEN_MAX_ELEMS",
     lambda e: GA(e, dt="u8", s=((1 << 39) + 1,))),
    ("all_gather group_size 3", INV, "group_size 3 does not divide", lambda e: GA(e, group=3)),
    ("all_gather input of rank 0 NULL", INV, "input of rank 0 is NULL",
     lambda e: ga(e, BF, SH, SH, 0, e.IN[1], e.OUT[0], e.OUT[1])),
    ("all_gather output of rank 1 NULL", INV, "output of rank 1 is NULL",
     lambda e: ga(e, BF, SH, SH, e.IN[0], e.IN[1], e.OUT[0], 0)),
    ("i32 all_gather input at +2 bytes", ALIGN, "input of rank 0 (",
     lambda e: ga(e, "i32", SH, SH, e.IN[0] + 2, e.IN[1], e.OUT[0], e.OUT[1])),
    ("all_gather input inside output off its offset", INV, "partially overlaps",
     lambda e: ga(e, BF, SH, SH, e.OUT[0] + 2, e.IN[1], e.OUT[0], e.OUT[1])),
    ("all_gather rank 1's input at rank 0's offset", INV, "is the same buffer as",
     lambda e: ga(e, BF, SH, SH, e.IN[0], e.OUT[1], e.OUT[0], e.OUT[1])),
    ("all_gather input over the output's end", INV, "partially overlaps",
     lambda e: ga(e, BF, SH, SH, e.IN[0], e.OUT[1] + 8194, e.OUT[0], e.OUT[1])),
    ("all_gather groups of one: overlap still refused", INV, "partially overlaps",
     lambda e: ga(e, BF, SH, SH, e.OUT[0] + 2, e.IN[1], e.OUT[0], e.OUT[1], group=1)),
    # reduce_scatter_cases
    ("reduce_scatter comm NULL (Python)", ValueError, "the communicator is closed",
     lambda e: closed(e).reduce_scatter(e.IN, e.OUT, dtype=BF, shape=(1000,))),
    ("reduce_scatter tensor rank 0", INV, "tensor rank 1..8", lambda e: RS(e, s=())),
    ("i64 reduce_scatter", INV, "reduce_scatter_sum computes on elements: i64 is a copy-only "
     "dtype", lambda e: RS(e, dt="i64")),
    ("u8 reduce_scatter, groups of one (a copy)", INV, "u8 is a copy-only dtype",
     lambda e: RS(e, dt="u8", group=1)),
    ("reduce_scatter shapes differ", INV, "shapes differ",
     lambda e: rs(e, BF, (1000,), (999,), e.IN[0], e.IN[1], e.OUT[0], e.OUT[1])),
    ("reduce_scatter rows differ", INV, "shapes differ",
     lambda e: rs(e, BF, (10, 100), (100, 10), e.IN[0], e.IN[1], e.OUT[0], e.OUT[1])),
    ("reduce_scatter output of rank 1 NULL", INV, "output of rank 1 is NULL",
     lambda e: RS(e, out1=0)),
    ("reduce_scatter output is the input", INV, "is the same buffer as",
     lambda e: RS(e, out0=e.IN[0])),
    ("reduce_scatter output at its own chunk", INV, "partially overlaps",
     lambda e: RS(e, out1=e.IN[1] + 1000)),
    ("reduce_scatter output at an odd byte", ALIGN, "not aligned to its 2-byte",
     lambda e: RS(e, out0=e.OUT[0] + 1)),
    ("reduce_scatter, groups of one: overlap still refused", INV, "partially overlaps",
     lambda e: RS(e, group=1, out0=e.IN[0] + 2)),
    # reduce_scatter_rmsnorm_cases
    ("rs norm comm NULL (Python)", ValueError, "the communicator is closed",
     lambda e: closed(e).reduce_scatter_rmsnorm(e.IN, e.GAM, e.NRM, e.OUT, 1e-6, dtype=BF,
                                                shape=SH)),
    row("rs norm tensor rank 1", INV, "needs tensor rank 2..8", lambda e: RSN(e, s=(4096,))),
    ("rs norm i32", INV, "reduce_scatter_rmsnorm computes on elements: i32 is a copy-only",
     lambda e: RSN(e, dt="i32")),
    ("rs norm eps NaN", INV, "eps must be finite", lambda e: RSN(e, eps=NAN)),
    ("rs norm shapes differ", INV, "shapes differ",
     lambda e: e.comm.reduce_scatter_rmsnorm(arrays(e.IN, [SH, (4, 512)], BF), e.GAM, e.NRM,
                                             e.OUT, 1e-6, residual=e.RES, dtype=BF)),
    ("rs norm residual_in of rank 0 NULL", INV, "residual_in of rank 0 is NULL",
     lambda e: rsn(e, e.IN[0], 0, e.NRM[0], e.OUT[0], e.GAM[0])),
    ("rs norm x of rank 0 NULL", INV, "x of rank 0 is NULL",
     lambda e: rsn(e, 0, e.RES[0], e.NRM[0], e.OUT[0], e.GAM[0])),
    ("rs norm residual_out inside x", INV, "partially overlaps",
     lambda e: rsn(e, e.IN[0], e.RES[0], e.NRM[0], e.IN[0] + 4096, e.GAM[0])),
    ("rs norm normed is residual_out", INV, "is the same buffer as",
     lambda e: rsn(e, e.IN[0], e.RES[0], e.OUT[0], e.OUT[0], e.GAM[0])),
    ("rs norm residual_out at an odd byte", ALIGN, "residual_out of rank 0",
     lambda e: rsn(e, e.IN[0], e.RES[0], e.NRM[0], e.OUT[0] + 1, e.GAM[0])),
    ("rs norm fp8 mode NONE (Python)", ValueError, "fp8: 'dynamic' or a static scale",
     lambda e: RSN(e, fp8="none")),
    ("rs norm fp8 static scale 0", INV, "static_scale must be finite and > 0",
     lambda e: RSN(e, fp8=0.0)),
    ("rs norm fp8 row_scales inside normed_fp8", INV, "partially overlaps",
     lambda e: e.comm.reduce_scatter_rmsnorm(e.IN, e.GAM, e.NRM, e.OUT, 1e-6, residual=e.RES,
                                             fp8="dynamic", scales=[e.NRM[0] + 2040, e.SPR[1]],
                                             dtype=BF, shape=SH)),
]


def _what(case):
    """The name of a row of CASES (a tuple or a pytest.param)."""
    return case.values[0] if hasattr(case, "values") else case[0]


@pytest.mark.parametrize("what, exc, fragment, call", CASES, ids=[_what(c) for c in CASES])
def test_refused(bad_env, what, exc, fragment, call):
    with pytest.raises(exc) as e:
        call(bad_env)
    assert type(e.value) is exc, f"{what}: {type(e.value).__name__}: {e.value}"
    assert fragment in (e.value.message if isinstance(e.value, collgen.Error) else str(e.value))
    bad_env.assert_untouched()


# The rows of bad_inputs.c that Python cannot express: NULL arrays and
# NULL outputs (the package always passes its own), an out-of-range count,
# and raw enum values the package's argument types cannot carry.
INEXPRESSIBLE = {
    "comm out NULL", "-1 devices", "devices NULL", "comm_info NULL info", "shapes NULL",
    "streams NULL", "inputs NULL", "outputs NULL", "shape of rank 1 NULL", "shard shapes NULL",
    "rmsnorm inputs NULL", "normed NULL", "residual NULL", "gammas NULL",
    "residual op shapes NULL", "residual op streams NULL", "x array NULL",
    "residual_in array NULL", "normed array NULL", "residual_out array NULL",
    "residual op gammas NULL", "fp8 mode 7", "fp8 dynamic with a static scale",
    "normed_fp8 array NULL", "fp8 residual_out array NULL",
    "broadcast shapes NULL", "broadcast streams NULL", "broadcast inputs NULL",
    "broadcast outputs NULL",
    "scatter shapes NULL", "scatter streams NULL", "scatter inputs NULL", "scatter outputs NULL",
    "all_gather shapes NULL", "all_gather inputs NULL", "all_gather outputs NULL",
    "reduce_scatter streams NULL",
}


def test_every_row_of_the_c_table_is_here_or_inexpressible():
    with open(os.path.join(REPO, "tests", "bad_inputs.c")) as f:
        text = f.read()
    rows = set(re.findall(r'CASE(?:_TLS)?\(\s*"([^"]+)"', text))
    # rooted_cases(e, fn, "op") names its rows "op <label>" at run time
    labels = re.findall(r'RCASE\(\w+,\s*"([^"]+)"', text)
    for op in re.findall(r'rooted_cases\(e, collgen_\w+, "(\w+)"\)', text):
        rows |= {f"{op} {label}" for label in labels}
    here = {_what(c).removesuffix(" (Python)") for c in CASES}
    assert len(rows) > 100
    assert rows - here - INEXPRESSIBLE == set()
    assert here - rows == set() and here & INEXPRESSIBLE == set()
