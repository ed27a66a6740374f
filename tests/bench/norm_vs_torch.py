"""norm_vs_torch.py -- the fused residual add + RMSNorm of one GPU against torch.

    python3 tests/bench/norm_vs_torch.py [--csv FILE] [--shapes 8192x8192,...]
                                         [--only WAYS] [--label NAME] [--ranks N]
                                         [--processes K] [--rotate] [--no-settle]

A group of one rank of collgen's allreduce_residual_rmsnorm is a residual
add and an RMSNorm: residual_out = round(x + residual), normed =
round(r * rsqrt(mean(r^2) + eps) * weight) with r = f32(residual_out). Every
decoder layer runs it twice. This program times it, bf16, per shape
(tokens x hidden), in one process and one run, three ways and a copy:

  * torch eager:    the function below, op by op;
  * torch.compile:  the same function under Inductor (one Triton kernel),
                    compiled for each shape (dynamic=False);
  * collgen:        Communicator.local([device]).fused_add_rmsnorm;
  * copy:           not the op: a device copy of the same traffic (x and
                    residual as one [2, rows, cols] tensor into another),
                    what the memory system gives at this size, where a
                    fixed 4.4 TB/s floor does not say (collgen/copy).

Each way is first checked against the reference (f64 on the GPU, from the
same bf16 inputs): residual_out bit for bit, normed within one bf16 ulp;
a way that fails is reported and not timed. Timing: each way's call is
captured K times into one CUDA graph (same buffers every call), the graph
is replayed; the ways take turns replay by replay; the median of the
replays' event times over K is one call's time. Each timed replay comes
right after an untimed replay of the same graph (the settle replay), so
every way is timed after itself, never after another way's graph: on one
H200 the first replay after the eager graph was up to 8% slower at
in-L2 shapes and 2048 x 4096, for collgen and Inductor alike, and the
second one was not; --no-settle times each replay right after the
previous way's. Before each timed replay the GPU spins (SPIN_CYCLES)
so that the whole graph is queued when the start event fires: the time
is the GPU's, never the host's launch of K nodes (on one H200 no way's
time moved by more than the runs' spread with it; it rules the host
out). The HBM floor is 4 passes
of the tensor (x, residual in; residual_out, normed out) at 4.4 TB/s
(SPEC's measured H200 copy bandwidth); shapes whose traffic fits the L2
(the device's own size, 60 MiB on an H200) have no floor.

--only WAYS times only those ways (a comma list of collgen, eager,
compile, copy): `--only collgen` for an A/B of template trees, `--only
collgen,compile` or `collgen,eager` with --no-settle to see what another
way's graphs do to collgen's times (on one H200 either moved collgen's
in-L2 shapes by up to 13% before the settle replay).

--ranks N (2..8) times collgen alone over N ranks mapped onto the one GPU
(allow_shared_devices; the op then sums x over the ranks first, and the
ranks' kernels share the GPU, so the time is for A/B of one tree against
another, not a measure of a multi-GPU call); every rank's outputs are
checked against the reference of the sum.

--rotate gives every call of a graph other inputs: x and residual cycle
through S sets (S = enough to fill the L2 three times, at most 64), so that
where S sets exceed the L2 each call reads its inputs from HBM, as a layer
of a model does, instead of what the previous replay left in the L2 (the
cold-cache way Triton's do_bench times kernels). Every set is checked. The
outputs are the allocator's, reused call after call, in both ways.

--processes K (2..9) runs the whole comparison in K processes one after
the other and reports, per shape and way, the median of the K processes'
times, and the range of the per-process speed-ups: Inductor's time moves
by up to 17% between processes at small shapes (docs/benchmarks.md), more
than within one.

Prints a table and writes the CSV (--csv). Needs torch with CUDA and the
collgen package (PYTHONPATH=python, COLLGEN_LIBRARY=build/libcollgen.so).
"""

import argparse
import csv
import os
import statistics
import subprocess
import sys
import tempfile

import torch

import collgen.torch as ct

HBM_BYTES_PER_S = 4.4e12
BF16_BYTES = torch.empty((), dtype=torch.bfloat16).element_size()
EPS = 1e-6
# GPU cycles spun before each timed replay (~0.2 ms at 1.98 GHz; longer at idle
# clocks): longer than the host takes to launch a graph of 200 calls.
SPIN_CYCLES = 400_000
# The table, then the other hidden sizes of common models.
DEFAULT_SHAPES = ("1x8192,128x8192,512x4096,2048x4096,8192x4096,8192x8192,32768x8192,"
                  "1x4096,128x4096,2048x8192,"
                  "512x5120,2048x5120,8192x5120,512x6144,2048x6144,8192x6144")


def fused(x, residual, weight, eps: float):
    """The op in torch: what collgen computes, in f32 with bf16 rounding."""
    r = (x.float() + residual.float()).to(x.dtype)
    rf = r.float()
    normed = rf * torch.rsqrt(rf.pow(2).mean(-1, keepdim=True) + eps) * weight.float()
    return normed.to(x.dtype), r


def reference(xs, residual, weight, eps):
    """f64 reference of the same bf16 inputs: (normed as f64, residual_out)
    with residual_out = round(sum of xs in f32, in rank order, + residual)."""
    acc = xs[0].float()
    for x in xs[1:]:
        acc = acc + x.float()
    r = (acc + residual.float()).to(residual.dtype)
    rd = r.double()
    normed = rd * torch.rsqrt(rd.pow(2).mean(-1, keepdim=True) + eps) * weight.double()
    return normed, r


def ulps_off(got, want_f64):
    """Largest distance in bf16 ulps between got and the f64 values: got is
    compared with the two bf16 neighbours of each value (0 when got is the
    rounding of want, 1 when it is the other neighbour)."""
    rounded = want_f64.to(got.dtype)

    def key(t):  # monotonic integer order of bf16/f16 bit patterns
        i = t.view(torch.int16).to(torch.int32)
        return torch.where(i < 0, -(i & 0x7FFF), i)

    return int((key(got) - key(rounded)).abs().max().item()) if got.numel() else 0


def check(name, out, ref):
    """None, or what is wrong with out: (normed, residual_out), or lists of
    them, one per rank (every rank checked; all must hold the same bits)."""
    normed, res = out
    if isinstance(normed, list):
        for r, (nr, rr) in enumerate(zip(normed, res)):
            problem = check(f"{name} rank {r}", (nr, rr), ref)
            if problem:
                return problem
            if not torch.equal(nr.view(torch.int16), normed[0].view(torch.int16)):
                return f"{name}: rank {r}'s normed differs from rank 0's"
        return None
    want_normed, want_res = ref
    if not torch.equal(res.view(torch.int16), want_res.view(torch.int16)):
        bad = int((res.view(torch.int16) != want_res.view(torch.int16)).sum())
        return f"{name}: residual_out differs from round(x + residual) at {bad} elements"
    off = ulps_off(normed, want_normed)
    if off > 1:
        return f"{name}: normed is {off} bf16 ulps from the f64 reference (at most 1 allowed)"
    return None


def captured(fn, calls):
    """A CUDA graph of `calls` calls of fn (warmed up first, outside)."""
    fn()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn()
    graph.replay()
    torch.cuda.synchronize()
    return graph


def cell(v, w=9, p=2):
    """v right-aligned in w columns with p decimals, or '-' for None."""
    return f"{v:>{w}.{p}f}" if v is not None else f"{'-':>{w}}"


def write_csv(path, rows):
    """The table as CSV: floats with 3 decimals, None as an empty field."""
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0].keys()))
        w.writeheader()
        for r in rows:
            w.writerow({k: "" if v is None else (f"{v:.3f}" if isinstance(v, float) else v)
                        for k, v in r.items()})


def parse_shapes(text):
    shapes = []
    for item in text.split(","):
        rows, _, cols = item.strip().partition("x")
        try:
            r, c = int(rows), int(cols)
        except ValueError:
            raise SystemExit(f"--shapes: '{item}' is not ROWSxCOLS")
        if not (1 <= r <= 1 << 20 and 1 <= c <= 1 << 16):
            raise SystemExit(f"--shapes: '{item}' out of range (rows 1..2^20, cols 1..65536)")
        shapes.append((r, c))
    return shapes


WAYS = ("collgen", "eager", "compile", "copy")


def parse_ways(text):
    """--only's comma list of ways, in WAYS' order (the order they take turns)."""
    names = [w.strip() for w in text.split(",")]
    bad = [w for w in names if w not in WAYS]
    if bad or not names:
        raise argparse.ArgumentTypeError(f"'{text}': each of {', '.join(WAYS)}")
    return tuple(w for w in WAYS if w in names)


def over_processes(args):
    """Runs this program args.processes times (the same arguments, one
    process each, CSVs in a temporary folder), then prints and writes
    (--csv) per shape the median over the processes of each way's time,
    the speed-up over torch.compile of those medians and the range of the
    processes' own speed-ups. Returns the worst exit status."""
    argv, skip = [], False
    for a in sys.argv[1:]:  # this run's arguments less --processes and --csv
        if skip:
            skip = False
        elif a in ("--processes", "--csv"):
            skip = True
        elif not a.startswith(("--processes=", "--csv=")):
            argv.append(a)
    runs, worst = [], 0
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(args.processes):
            path = os.path.join(tmp, f"{k}.csv")
            print(f"== process {k + 1} of {args.processes}", flush=True)
            rc = subprocess.call([sys.executable, os.path.abspath(__file__), *argv, "--csv", path])
            worst = max(worst, rc)
            if os.path.exists(path):
                with open(path) as fh:
                    runs.append(list(csv.DictReader(fh)))
    if not runs:
        return worst or 1
    ways = ("eager_us", "compile_us", "collgen_us", "copy_us")
    out = []
    print(f"# medians over {len(runs)} processes")
    print(f"{'shape':>12} {'eager us':>9} {'compile us':>10} {'collgen us':>10} "
          f"{'vs compile':>10} {'per process':>13} {'copy us':>8} {'collgen/copy':>12}")
    for i, first in enumerate(runs[0]):
        same = [r[i] for r in runs if i < len(r) and (r[i]["rows"], r[i]["cols"]) ==
                (first["rows"], first["cols"])]
        med = {}
        for w in ways:
            vals = [float(r[w]) for r in same if r.get(w)]
            med[w] = statistics.median(vals) if len(vals) == len(same) else None
        ratios = [float(r["compile_us"]) / float(r["collgen_us"]) for r in same
                  if r["compile_us"] and r["collgen_us"]]
        speedup = med["compile_us"] / med["collgen_us"] if med["compile_us"] and med["collgen_us"] \
            else None
        span = f"{min(ratios):.2f}-{max(ratios):.2f}" if ratios else "-"
        of_copy = med["copy_us"] / med["collgen_us"] * 100 if med["copy_us"] and med["collgen_us"] \
            else None

        print(f"{first['rows'] + 'x' + first['cols']:>12} {cell(med['eager_us'], 9)} "
              f"{cell(med['compile_us'], 10)} {cell(med['collgen_us'], 10)} {cell(speedup, 9)}x "
              f"{span:>13} {cell(med['copy_us'], 8)} "
              f"{(f'{of_copy:.1f}%' if of_copy else '-'):>12}", flush=True)
        out.append({"label": first["label"], "ranks": first["ranks"], "rows": first["rows"],
                    "cols": first["cols"], "processes": len(same),
                    "input_sets": first.get("input_sets", "1"), "settle": first.get("settle", "0"),
                    **med, "floor_us": first["floor_us"],
                    "speedup_min": min(ratios) if ratios else None,
                    "speedup_max": max(ratios) if ratios else None})
    if args.csv:
        write_csv(args.csv, out)
    return worst


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[1].strip())
    ap.add_argument("--shapes", default=DEFAULT_SHAPES, help="ROWSxCOLS,... (bf16)")
    ap.add_argument("--csv", help="write the table as CSV here")
    ap.add_argument("--only", type=parse_ways, default=WAYS,
                    help="the ways to time, a comma list of collgen, eager, compile, copy "
                         "(all; collgen alone for an A/B of kernels)")
    ap.add_argument("--label", default="", help="a tag for the CSV's label column")
    ap.add_argument("--replays", type=int, default=15)
    ap.add_argument("--ranks", type=int, default=1, help="ranks mapped onto the GPU (collgen only)")
    ap.add_argument("--processes", type=int, default=1, help="run in K processes, report medians")
    ap.add_argument("--rotate", action="store_true",
                    help="inputs cycle through sets filling 3x the L2 (a cold L2 every call)")
    ap.add_argument("--no-settle", dest="settle", action="store_false",
                    help="no untimed replay of the same graph before each timed one "
                         "(each way then follows the previous way's graph)")
    args = ap.parse_args()
    if not 1 <= args.processes <= 9:
        raise SystemExit("--processes: 1..9")
    if args.processes > 1:
        return over_processes(args)
    if not 3 <= args.replays <= 1000:
        raise SystemExit("--replays: 3..1000")
    if not 1 <= args.ranks <= 8:
        raise SystemExit("--ranks: 1..8")
    if args.ranks > 1:
        args.only = ("collgen",)
    torch.backends.cuda.matmul.allow_tf32 = False
    for knob in ("cache_size_limit", "recompile_limit"):  # one compile per shape
        if hasattr(torch._dynamo.config, knob):
            setattr(torch._dynamo.config, knob, 1024)
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    nranks = args.ranks
    comm = ct.Communicator.local([dev] * nranks, allow_shared_devices=int(nranks > 1))
    compiled = torch.compile(fused, dynamic=False)
    gen = torch.Generator(device=dev).manual_seed(1234)
    rows_out = []
    l2_bytes = torch.cuda.get_device_properties(dev).L2_cache_size  # the floor's bound
    print(f"# {torch.cuda.get_device_name(dev)} (L2 {l2_bytes / 2**20:g} MiB), "
          f"torch {torch.__version__}, bf16, "
          f"median of {args.replays} graph replays, {nranks} rank(s), "
          f"{'inputs rotating (cold L2)' if args.rotate else 'the same inputs every call'}, "
          f"{'each after a replay of itself' if args.settle else 'each after the previous way'}",
          flush=True)
    head = f"{'shape':>12} {'eager us':>9} {'compile us':>10} {'collgen us':>10} " \
           f"{'vs compile':>10} {'floor us':>8} {'collgen/floor':>13} {'copy us':>8} " \
           f"{'collgen/copy':>12}"
    print(head, flush=True)
    failures = 0
    for rows, cols in parse_shapes(args.shapes):
        input_bytes = (nranks + 1) * rows * cols * BF16_BYTES  # x of every rank, residual
        nsets = min(64, -(-3 * l2_bytes // input_bytes)) if args.rotate else 1
        weight = (torch.rand(cols, generator=gen, device=dev) + 0.5).bfloat16()
        sets = []  # (xs, residual once per rank, reference)
        copy_sources = []  # per set: x and residual stacked (the copy way)
        for _ in range(nsets):
            xs = [torch.randn(rows, cols, generator=gen, device=dev).bfloat16()
                  for _ in range(nranks)]
            residual = torch.randn(rows, cols, generator=gen, device=dev).bfloat16()
            sets.append((xs, [residual] * nranks, reference(xs, residual, weight, EPS)))
            if "copy" in args.only:  # the copy way's source: the same bytes, one tensor
                copy_sources.append(torch.stack([xs[0], residual]))
        copy_dest = torch.empty((2, rows, cols), dtype=torch.bfloat16, device=dev) \
            if "copy" in args.only else None
        weights = [weight] * nranks
        turn = [0]  # the set the next call reads (calls cycle through them)

        def next_set():
            s = sets[turn[0] % nsets]
            turn[0] += 1
            return s

        def collgen_call():
            xs, residuals, _ = next_set()
            return comm.fused_add_rmsnorm(xs, residuals, weights, EPS)

        def eager_call():
            xs, residuals, _ = next_set()
            return fused(xs[0], residuals[0], weight, EPS)

        def compile_call():
            xs, residuals, _ = next_set()
            return compiled(xs[0], residuals[0], weight, EPS)

        def copy_call():
            k = turn[0] % nsets
            next_set()
            return copy_dest.copy_(copy_sources[k]), k

        def check_way(name, f, k):
            if name != "copy":
                return check(f"{name} set {k}", f(), sets[k][2])
            copy_dest.fill_(float("nan"))  # poisoned: a copy that writes nothing fails
            got, src = f()
            same = torch.equal(got.view(torch.int16), copy_sources[src].view(torch.int16))
            return None if same else f"copy set {k}: the destination differs from the source"

        ways = {name: f for name, f in (("collgen", collgen_call), ("eager", eager_call),
                                        ("compile", compile_call), ("copy", copy_call))
                if name in args.only}
        problems = {}
        for name, f in ways.items():  # every set, in turn order
            turn[0] = 0
            problems[name] = next(filter(None, (check_way(name, f, k) for k in range(nsets))), None)
        for problem in filter(None, problems.values()):
            print(f"{rows}x{cols}: CHECK FAILED (not timed): {problem}", flush=True)
            failures += 1
        ways = {name: f for name, f in ways.items() if not problems[name]}
        traffic = 4 * rows * cols * BF16_BYTES
        calls = max(5, min(200, int(3e-3 / max(traffic / HBM_BYTES_PER_S, 3e-6))))
        calls = -(-calls // nsets) * nsets  # whole turns through the sets
        graphs = {name: captured(f, calls) for name, f in ways.items()}
        times = {name: [] for name in graphs}
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        for _ in range(args.replays):
            for name, g in graphs.items():
                if args.settle:
                    g.replay()  # untimed: what runs before the timed replay is this way's own
                torch.cuda._sleep(SPIN_CYCLES)  # the graph queues while this runs
                start.record()
                g.replay()
                stop.record()
                stop.synchronize()
                times[name].append(start.elapsed_time(stop) * 1e3 / calls)
        us = {name: statistics.median(t) for name, t in times.items()}
        floor = traffic / HBM_BYTES_PER_S * 1e6 if traffic > l2_bytes else None
        row = {"label": args.label, "ranks": nranks, "rows": rows, "cols": cols, "calls_per_graph": calls,
               "input_sets": nsets, "settle": int(args.settle),
               "eager_us": us.get("eager"), "compile_us": us.get("compile"),
               "collgen_us": us.get("collgen"), "copy_us": us.get("copy"), "floor_us": floor}
        rows_out.append(row)

        ratio = (us["compile"] / us["collgen"]) if "compile" in us and "collgen" in us else None
        eff = (floor / us["collgen"] * 100) if floor and "collgen" in us else None
        of_copy = (us["copy"] / us["collgen"] * 100) if "copy" in us and "collgen" in us else None
        print(f"{f'{rows}x{cols}':>12} {cell(us.get('eager'))} {cell(us.get('compile'), 10)} "
              f"{cell(us.get('collgen'), 10)} {cell(ratio, 9)}x {cell(floor, 8, 1)} "
              f"{(f'{eff:.1f}%' if eff else '-'):>13} {cell(us.get('copy'), 8)} "
              f"{(f'{of_copy:.1f}%' if of_copy else '-'):>12}", flush=True)
        torch.cuda.empty_cache()
    if args.csv:
        write_csv(args.csv, rows_out)
    comm.close()
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
