"""GPU tests of collgen.torch (torch >= 2.4 and a CUDA device; skipped
otherwise, as in CI).

* Both process models on one GPU: Communicator.local with 2 and 4 ranks
  mapped onto it (small grids), in this process; and 2 and 4 processes
  (torch_worker.py), every op against the torch reference, bitwise equal
  on every rank; with 2 processes also torch.compile(fullgraph=True) of a
  TP block and torch.cuda.graph capture with 20 replays on new data.
* Faults: abort() from another thread, and a killed peer raising
  collgen.TimeoutError within the bound.
"""

import json
import os
import socket
import subprocess
import sys
import time

import pytest

torch = pytest.importorskip("torch")
try:
    import collgen.torch as ct
except ImportError as e:  # torch older than 2.4
    pytest.skip(f"collgen.torch unavailable: {e}", allow_module_level=True)
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import collgen  # noqa: E402
import torch_reference as ref  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
DEV = torch.device("cuda", 0)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_workers(scenario, nranks, tmp_path, timeout=480):
    """Runs torch_worker.py as nranks processes; returns each rank's results
    (rank 1 of "faults" writes its own before it is killed)."""
    port = _free_port()
    env = dict(os.environ, WORLD_SIZE=str(nranks), MASTER_ADDR="127.0.0.1",
               MASTER_PORT=str(port),
               PYTHONPATH=os.pathsep.join([HERE,
                                           os.environ.get("PYTHONPATH", "")]))
    procs = [subprocess.Popen([sys.executable, os.path.join(HERE, "torch_worker.py"), scenario,
                               str(tmp_path)], env=dict(env, RANK=str(r)),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
             for r in range(nranks)]
    deadline = time.monotonic() + timeout
    logs = []
    for p in procs:
        try:
            out, _ = p.communicate(timeout=max(1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            pytest.fail(f"{scenario} x{nranks}: a rank ran past {timeout} s")
        logs.append(out.decode(errors="replace"))
    results = []
    for r in range(nranks):
        path = tmp_path / f"{r}.json"
        assert path.exists(), f"rank {r} wrote no results; its output:\n{logs[r][-4000:]}"
        results.append(json.loads(path.read_text()))
    for r, p in enumerate(procs):
        assert p.returncode == 0, f"rank {r} exited {p.returncode}:\n{logs[r][-4000:]}"
    return results


def _failures(results):
    return {f"rank {r}: {k}": v for r, res in enumerate(results) for k, v in res.items()
            if not k.endswith(".seconds") and isinstance(v, str) and v != "ok"
            and k not in ("timeout_message",)}


@pytest.mark.parametrize("nranks", [2, 4])
def test_processes_every_op(nranks, tmp_path):
    results = run_workers("ops", nranks, tmp_path)
    bad = _failures(results)
    assert not bad, "\n".join(f"{k}:\n{v}" for k, v in bad.items())
    checks = [k for k in results[0] if not k.endswith(".seconds")]
    # every op's cases ran (the worker's lists), plus graph+compile with 2 ranks
    assert sum(k.startswith("all_reduce") for k in checks) >= 9
    assert sum(k.startswith("all_gather_rmsnorm") for k in checks) == 6
    assert sum(k.startswith("fused_add_rmsnorm") for k in checks) == 10
    assert sum(k.startswith("reduce_scatter_rmsnorm") for k in checks) == 4
    assert sum(k.startswith("scatter ") for k in checks) == 8
    if nranks == 2:
        assert any(k.startswith("torch.cuda.graph") for k in checks)
        assert sum(k.startswith("torch.compile") for k in checks) == 4
    else:
        assert "subgroup communicator" in checks


def test_faults(tmp_path):
    results = run_workers("faults", 2, tmp_path)
    bad = _failures(results)
    assert not bad, "\n".join(f"{k}:\n{v}" for k, v in bad.items())
    assert results[0]["a killed peer raises collgen.TimeoutError within the bound"] == "ok"
    assert results[0]["abort() from another thread ends a stuck call"] == "ok"
    print("abort:", results[0]["abort_seconds"], "s; timeout:", results[0]["timeout_seconds"],
          "s:", results[0]["timeout_message"])


# ---- one process, several ranks mapped onto one GPU --------------------

@pytest.fixture(params=[2, 4], ids=["local2", "local4"])
def local(request, tmp_path):
    comm = ct.Communicator.local([0] * request.param, allow_shared_devices=1, max_blocks=8,
                                 timeout_ms=60000, cache_dir=os.environ.get("COLLGEN_CACHE_DIR"))
    yield comm
    comm.close()


def _same(what, tensors):
    d = {ref.digest(t) for t in tensors}
    assert len(d) == 1, f"{what}: ranks differ"


def test_local_all_reduce(local):
    n = local.nranks
    local.prepare("all_reduce", torch.bfloat16, (4097,))
    info = local.info()
    assert info["nranks"] == n and info["devices"] == [0] * n and info["route"][n] == ["p2p"]
    assert local.health() == [{"state": "ok", "peer": None}] * n
    for dtype, size in ((torch.bfloat16, 4097), (torch.float32, 1 << 18)):
        xs = ref.inputs(11 + size, n, (size,), dtype)
        want = ref.group_sum(xs).to(dtype)
        outs = [torch.full_like(x, float("nan")) for x in xs]
        got = local.all_reduce(xs, out=outs)
        torch.cuda.synchronize()
        assert got is outs
        for o in outs:
            assert torch.equal(o, want)
        _same("all_reduce", outs)
        halves = local.all_reduce(xs, group_size=2)
        torch.cuda.synchronize()
        for r, o in enumerate(halves):
            first = r // 2 * 2
            assert torch.equal(o, ref.group_sum(xs[first:first + 2]).to(dtype))


def test_local_reduce_scatter(local):
    n = local.nranks
    for dtype, shape in ((torch.bfloat16, (4097, 3)), (torch.float32, (n - 1, 1000))):
        xs = ref.inputs(23 + shape[0], n, shape, dtype)
        want = torch.tensor_split(ref.group_sum(xs).to(dtype), n)
        got = local.reduce_scatter(xs)
        torch.cuda.synchronize()
        for r in range(n):
            assert torch.equal(got[r], want[r]), f"rank {r}"
        halves = local.reduce_scatter(xs, group_size=2)
        torch.cuda.synchronize()
        for r, o in enumerate(halves):
            first = r // 2 * 2
            part = torch.tensor_split(ref.group_sum(xs[first:first + 2]).to(dtype), 2)[r - first]
            assert torch.equal(o, part), f"rank {r} of groups of 2"


def test_local_all_gather_rmsnorm(local):
    n, cols = local.nranks, 1536
    g = torch.Generator(device=DEV).manual_seed(3)
    shards = [torch.randn((r % 3, cols), generator=g, device=DEV).to(torch.bfloat16)
              for r in range(n)]
    gamma = torch.randn((cols,), generator=g, device=DEV).to(torch.bfloat16)
    ref.poison_allocator(1 << 22)
    normed, residual = local.all_gather_rmsnorm(shards, [gamma] * n, 1e-5, weight_offset=1.0)
    torch.cuda.synchronize()
    for r in range(n):
        assert torch.equal(residual[r], torch.cat(shards))
        ref.assert_close_normed(normed[r], ref.rmsnorm_exact(residual[r], gamma, 1e-5, 1.0),
                                f"rank {r}")
    _same("normed", normed)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.uint8, torch.float64])
def test_local_all_gather(local, dtype):
    n = local.nranks
    g = torch.Generator(device=DEV).manual_seed(5)
    shards = [torch.randint(0, 255, (r % 3, 5, 7), generator=g, device=DEV).to(dtype)
              for r in range(n)]
    ref.poison_allocator(1 << 20)
    got = local.all_gather(shards)
    halves = local.all_gather(shards, group_size=2)
    torch.cuda.synchronize()
    for r in range(n):
        assert torch.equal(got[r], torch.cat(shards))
        first = r // 2 * 2
        assert torch.equal(halves[r], torch.cat(shards[first:first + 2]))
    _same("all_gather", got)


@pytest.mark.parametrize("fp8", [None, "dynamic"])
def test_local_reduce_scatter_rmsnorm(local, fp8):
    n, rows, cols = local.nranks, 7, 4096
    g = torch.Generator(device=DEV).manual_seed(23)
    xs = [torch.randn((rows, cols), generator=g, device=DEV).to(torch.bfloat16) for _ in range(n)]
    gamma = torch.randn((cols,), generator=g, device=DEV).to(torch.bfloat16)
    total = ref.group_sum(xs)
    chunks = [collgen.communicator.scatter_chunk(rows, n, r) for r in range(n)]
    residuals = [torch.randn((c, cols), generator=g, device=DEV).to(torch.bfloat16)
                 for _, c in chunks]
    out = local.reduce_scatter_rmsnorm(xs, [gamma] * n, [t.clone() for t in residuals], 1e-6,
                                       fp8=fp8)
    torch.cuda.synchronize()
    for r, (start, count) in enumerate(chunks):
        want = (total[start:start + count] + residuals[r].float()).to(torch.bfloat16)
        assert torch.equal(out[1][r], want), f"rank {r}"
        exact = ref.rmsnorm_exact(want, gamma, 1e-6, 0.0)
        if fp8 is None:
            ref.assert_close_normed(out[0][r], exact, f"rank {r}")
        else:
            ref.assert_fp8(out[0][r], out[2][r], exact, None, f"rank {r}")


@pytest.mark.parametrize("fp8", [None, "dynamic", 0.02])
def test_local_fused_add_rmsnorm(local, fp8):
    n, rows, cols = local.nranks, 6, 4096
    g = torch.Generator(device=DEV).manual_seed(21)
    xs = [torch.randn((rows, cols), generator=g, device=DEV).to(torch.bfloat16) for _ in range(n)]
    residual = torch.randn((rows, cols), generator=g, device=DEV).to(torch.bfloat16)
    gamma = torch.randn((cols,), generator=g, device=DEV).to(torch.bfloat16)
    want = (ref.group_sum(xs) + residual.float()).to(torch.bfloat16)
    ref.poison_allocator(1 << 22)
    out = local.fused_add_rmsnorm(xs, [residual.clone() for _ in range(n)], [gamma] * n, 1e-6,
                                  fp8=fp8)
    torch.cuda.synchronize()
    exact = ref.rmsnorm_exact(want, gamma, 1e-6, 0.0)
    for r in range(n):
        assert torch.equal(out[1][r], want)
        if fp8 is None:
            ref.assert_close_normed(out[0][r], exact, f"rank {r}")
        else:
            ref.assert_fp8(out[0][r], out[2][r] if fp8 == "dynamic" else None, exact,
                           None if fp8 == "dynamic" else fp8, f"rank {r}")
    _same("normed", out[0])


def test_local_broadcast(local):
    n = local.nranks
    for dtype, size in ((torch.bfloat16, 4097), (torch.int32, 1 << 18), (torch.uint8, 7)):
        xs = ref.bit_inputs(5 + size, n, (size,), dtype)
        for root in (0, n - 1):
            got = local.broadcast(xs, root)
            torch.cuda.synchronize()
            for o in got:
                assert ref.bits_equal(o, xs[root])
        halves = local.broadcast(xs, 1, group_size=2)
        torch.cuda.synchronize()
        for r, o in enumerate(halves):
            assert ref.bits_equal(o, xs[r // 2 * 2 + 1])
        inplace = [x.clone() for x in xs]
        assert local.broadcast(inplace, 0, out=inplace) is inplace
        torch.cuda.synchronize()
        for o in inplace:
            assert ref.bits_equal(o, xs[0])
    with pytest.raises(collgen.InvalidArgument, match="root 9 is not a group rank"):
        local.broadcast(xs, 9)


def _chunk(rows, g, i):
    """(start, count) of group rank i's chunk, written out here."""
    base, extra = divmod(rows, g)
    return i * base + min(i, extra), base + (i < extra)


def test_local_scatter(local):
    n = local.nranks
    for dtype, shape in ((torch.bfloat16, (4097,)), (torch.int32, (n + 1, 3)),
                         (torch.uint8, (1, 7)), (torch.float64, (0, 5))):
        xs = ref.bit_inputs(11 + shape[0], n, shape, dtype)
        for root in (0, n - 1):
            got = local.scatter(xs, root)
            torch.cuda.synchronize()
            for r, o in enumerate(got):
                start, count = _chunk(shape[0], n, r)
                assert o.shape == (count,) + shape[1:]
                assert ref.bits_equal(o, xs[root][start:start + count])
        halves = local.scatter(xs, 1, group_size=2)
        torch.cuda.synchronize()
        for r, o in enumerate(halves):
            start, count = _chunk(shape[0], 2, r % 2)
            assert ref.bits_equal(o, xs[r // 2 * 2 + 1][start:start + count])
    with pytest.raises(collgen.InvalidArgument, match="root 9 is not a group rank"):
        local.scatter(xs, 9)


def test_local_argument_checks(local):
    n = local.nranks
    x = torch.zeros(8, device=DEV, dtype=torch.bfloat16)
    with pytest.raises(TypeError, match="x: Communicator.local takes a list"):
        local.all_reduce(x)
    with pytest.raises(TypeError, match=r"x\[1\] has dtype"):
        local.all_reduce([x] + [x.float()] * (n - 1))
    with pytest.raises(ValueError, match=r"x\[0\] is on cpu"):
        local.all_reduce([x.cpu()] + [x] * (n - 1))
    with pytest.raises(collgen.InvalidArgument, match="group_size 3"):
        local.all_reduce([x] * n, group_size=3)


def test_torch_dtypes_follow_the_catalog():
    for name, value in collgen.DTYPES.items():
        assert name in ct.TORCH_DTYPES, f"catalog dtype {name} has no torch dtype"
        assert torch.empty((), dtype=ct.TORCH_DTYPES[name]).element_size() == \
            collgen.catalog.dtype_bytes(name)


def test_every_op_table_row_is_registered():
    from collgen.torch.op_table import OPS
    for row in OPS:
        for v in row.variants():
            registered = getattr(torch.ops.collgen, v.name).default._schema
            assert str(registered) == str(torch._C.parse_schema(f"collgen::{v.schema}")), v.name
