"""The one-process-per-GPU bootstrap through the package: ranks as real
processes (rank_process.py) on the stand-in driver, joined by a unique id
or by an allgather= callback of the test's own; a missing rank is a
collgen.TimeoutError naming it; the callback's failures reach the caller."""

import json
import os
import subprocess
import time

import pytest

import collgen
from conftest import HERE, PYTHON, library_env

RANK = os.path.join(HERE, "rank_process.py")
ROUTE_2 = {"1": ["p2p", "p2p"], "2": ["p2p"]}


def run_ranks(argvs, env, timeout=60):
    """Runs one rank_process.py per argv at once; returns [(exit status,
    its JSON line, stderr)]. Every process is killed past ``timeout``."""
    procs = [subprocess.Popen([PYTHON, RANK, *argv], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for argv in argvs]
    deadline = time.monotonic() + timeout
    results = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=max(0.1, deadline - time.monotonic()))
            lines = out.strip().splitlines()
            results.append((p.returncode, json.loads(lines[-1]) if lines else None, err))
    except subprocess.TimeoutExpired:
        pytest.fail(f"a rank ran past {timeout} s")
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return results


def rank_env(fake_cuda_path, cache_dir, timeout_ms):
    """The ranks' environment: this checkout's package, the stand-in driver."""
    return library_env(COLLGEN_CUDA_LIBRARY=fake_cuda_path, RANK_CACHE_DIR=cache_dir,
                       RANK_TIMEOUT_MS=str(timeout_ms))


def assert_joined(results):
    """Both ranks joined one 2-rank P2P communicator and ran one allreduce."""
    for rank, (rc, seen, err) in enumerate(results):
        assert rc == 0, f"rank {rank}: exit {rc}, {seen}, {err}"
        assert seen["nranks"] == 2 and seen["route"] == ROUTE_2 and seen["host"] == [0, 0]
        assert (seen["launches"], seen["wrong_context"], seen["input_kept"]) == (1, 0, True)


def test_two_ranks_join_with_a_unique_id(fake_cuda_path, cache_dir):
    uid = str(collgen.UniqueId.new())
    results = run_ranks([["uid", "2", str(r), uid] for r in range(2)],
                        rank_env(fake_cuda_path, cache_dir, 20000))
    assert_joined(results)


def test_a_missing_rank_times_out_naming_it(fake_cuda_path, cache_dir):
    started = time.monotonic()
    [(rc, seen, err)] = run_ranks([["uid", "2", "0", str(collgen.UniqueId.new())]],
                                  rank_env(fake_cuda_path, cache_dir, 1500))
    assert rc == 3, err
    name, message = seen["error"]
    assert name == "TimeoutError" and collgen.TimeoutError.__name__ == name
    assert "rank 1 of 2 never joined" in message
    assert 1.4 <= seen["seconds"] < 5 and time.monotonic() - started < 10


def test_two_ranks_join_through_an_allgather_callback(fake_cuda_path, cache_dir, tmp_path):
    exchange = tmp_path / "exchange"
    exchange.mkdir()
    results = run_ranks([["allgather", "2", str(r), str(exchange)] for r in range(2)],
                        rank_env(fake_cuda_path, cache_dir, 20000))
    assert_joined(results)
    calls = [seen["exchanges"] for _, seen, _ in results]
    assert calls[0] == calls[1] > 0
    assert sorted(os.listdir(exchange)) == [f"{k}.{r}" for k in range(calls[0]) for r in range(2)]


def _init(cache_dir, allgather):
    """Rank 0 of 2 joining through ``allgather``, in this process."""
    return collgen.Communicator.init_rank(2, 0, device=0, allgather=allgather,
                                          cache_dir=cache_dir, timeout_ms=2000)


def test_allgather_errors_reach_the_caller(driver, cache_dir):
    handles = driver.stats.vmm_handles

    def refuses(mine):
        raise ValueError("no peers today")

    with pytest.raises(collgen.InvalidArgument) as e:
        _init(cache_dir, refuses)
    assert e.value.status == collgen.InvalidArgument.status
    assert e.value.message == "allgather raised ValueError('no peers today')"
    assert isinstance(e.value.__cause__, ValueError)

    with pytest.raises(collgen.InvalidArgument) as e:
        _init(cache_dir, lambda mine: [mine])
    assert "allgather must return 2 items of" in e.value.message

    def breaks(mine):
        raise KeyError("store gone")

    with pytest.raises(KeyError, match="store gone"):
        _init(cache_dir, breaks)
    assert driver.stats.vmm_handles == handles, "a failed join left VMM memory behind"


def test_init_rank_argument_errors(driver, cache_dir):
    uid = collgen.UniqueId.new()
    with pytest.raises(TypeError, match="pass unique_id or allgather, not both"):
        collgen.Communicator.init_rank(2, 0, uid, allgather=lambda m: [m, m], cache_dir=cache_dir)
    with pytest.raises(TypeError, match="allgather must be callable"):
        collgen.Communicator.init_rank(2, 0, allgather=5, cache_dir=cache_dir)
    with pytest.raises(TypeError, match="unique_id must be a collgen.UniqueId, its bytes or its "
                                        "text, not int"):
        collgen.Communicator.init_rank(2, 0, 7, cache_dir=cache_dir)
    with pytest.raises(ValueError, match="rank: 4294967296 is outside"):
        collgen.Communicator.init_rank(2, 2**32, uid, cache_dir=cache_dir)
