"""python_host_overhead.py -- host time per call of an 8 KB allreduce from
Python, one process per GPU, eager: the C call, the package's method, and
the torch.ops.collgen op.

    python3 tests/bench/python_host_overhead.py [--nranks 2]

Starts nranks processes (gloo bootstrap; they may share one GPU: the time
measured is the host's, from a call to its return, so time-slicing does
not enter it). Every way of calling is first checked against the torch
reference. Each is then timed as bursts of BURST calls (timed) followed
by a synchronize (not timed), the ways taking turns burst by burst; the
median over bursts, per call, is printed by rank 0, with the cost of a trivial ctypes call
(collgen_comm_check) as the floor of any call through ctypes.
"""

import argparse
import os
import socket
import subprocess
import sys
import time

BURST, BURSTS = 50, 100


def worker():
    import torch
    import torch.distributed as dist

    import collgen.torch as ct
    from collgen._abi import lib
    from ctypes import c_int64

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dev = torch.device("cuda", rank % torch.cuda.device_count())
    torch.cuda.set_device(dev)
    dist.init_process_group("gloo")
    shared = world > torch.cuda.device_count()
    comm = ct.Communicator(device=dev, allow_shared_devices=int(shared))
    n = 4096  # 8 KB of bf16
    g = torch.Generator(device=dev).manual_seed(1)
    xs = [torch.randn(n, generator=g, device=dev).bfloat16() for _ in range(world)]
    x, out = xs[rank], torch.empty_like(xs[rank])
    want = xs[0].float()
    for t in xs[1:]:
        want = want + t.float()
    want = want.bfloat16()

    h, dt = comm._h, 0
    shape = (c_int64 * 1)(n)
    stream = torch.cuda.current_stream().cuda_stream
    xp, op = x.data_ptr(), out.data_ptr()
    c_call = lambda: lib.collgen_rank_allreduce_sum(h, dt, 1, shape, xp, op, 0, stream)  # noqa
    ways = {
        "C call (ctypes, arguments prebuilt)": c_call,
        "method comm.all_reduce(x, out=out)": lambda: comm.all_reduce(x, out=out),
        "torch.ops.collgen.all_reduce(x, handle, 0)":
            lambda: torch.ops.collgen.all_reduce(x, comm.handle, 0),
        "floor: a trivial ctypes call (collgen_comm_check)": lambda: lib.collgen_comm_check(h),
    }
    for name, fn in ways.items():
        if name.startswith("floor"):
            continue
        out.fill_(float("nan"))
        r = fn()
        torch.cuda.synchronize()
        got = out if not isinstance(r, torch.Tensor) else r
        assert isinstance(r, (int, torch.Tensor)) and (not isinstance(r, int) or r == 0), r
        assert torch.equal(got, want), f"{name}: wrong result"
    # The ways take turns, one burst each per round, so that drift of the
    # machine (clocks, the other rank's work) reaches all of them alike.
    per_call = {name: [] for name in ways}
    dist.barrier()
    for _ in range(BURSTS):
        for name, fn in ways.items():
            t0 = time.perf_counter()
            for _ in range(BURST):
                fn()
            per_call[name].append((time.perf_counter() - t0) / BURST * 1e6)
            torch.cuda.synchronize()
    results = {name: sorted(v)[len(v) // 2] for name, v in per_call.items()}
    comm.check()
    if rank == 0:
        print(f"host time per call, 8 KB bf16 allreduce, {world} processes"
              f"{' sharing one GPU' if shared else ''}, eager, median of {BURSTS} bursts of "
              f"{BURST}:")
        for name, us in results.items():
            print(f"  {us:7.2f} us  {name}")
        c = results["C call (ctypes, arguments prebuilt)"]
        for name in list(results)[1:3]:
            print(f"  {results[name] - c:+7.2f} us over the C call: {name}")
    comm.close()
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nranks", type=int, default=2)
    args = ap.parse_args()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, WORLD_SIZE=str(args.nranks), MASTER_ADDR="127.0.0.1",
               MASTER_PORT=str(port), COLLGEN_HOST_OVERHEAD_WORKER="1")
    procs = [subprocess.Popen([sys.executable, __file__], env=dict(env, RANK=str(r)))
             for r in range(args.nranks)]
    rc = 0
    for p in procs:
        try:
            rc |= p.wait(timeout=300)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            raise SystemExit("python_host_overhead: a rank ran past 300 s")
    raise SystemExit(rc)


if __name__ == "__main__":
    if os.environ.get("COLLGEN_HOST_OVERHEAD_WORKER"):
        worker()
    else:
        main()
