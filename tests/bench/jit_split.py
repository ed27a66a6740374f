"""jit_split.py -- where a cold JIT compile of each op spends its time.

    python3 tests/bench/jit_split.py [--build build] [--runs 5] [--ops a,b]

For every op of the catalog (the names `collgen compile --help` lists) at
one shape (2 ranks, bf16, 2^20 elements, 8 rows of 4096 columns; each op
reads the flags it has), the median of RUNS of three fresh processes:

  1. `collgen compile` with an empty cache: wall and CPU time (user+sys),
     and the fetch time it reports itself ("fetch"; the rest is process
     start, Lua state, plan and exit).
  2. collgen-jit-phases (tests/bench/jit_phases.c): the same steps, each
     timed in CPU ms: lua (generator: Lua state, bundle), plan, render,
     load (dlopen of NVRTC), compile (the process's first NVRTC compile),
     write (cache entry), again (the same compile once more, NVRTC warm).
     first-use = compile - again.
  3. NVRTC through ctypes on the rendered source with collgen's options
     (read from gen/nvrtc.c) plus --fdevice-time-trace, the first compile
     of a fresh process and a second one (two processes): front end (of it the builtin header NVRTC
     parses for every program), NVVM, ptxas, in ms from NVRTC's trace.

CPU time is what to compare on a shared machine; wall time is printed for
reference. Prints two tables (Markdown).
"""

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
SHAPE = ["--ngpus", "2", "--elems", "1048576", "--rows", "8", "--cols", "4096"]

# Run in a fresh Python process: one NVRTC compile of a source with a time
# trace (after an untraced one when argv[3] is "warm": NVRTC 13.0 was seen
# to abort with std::logic_error on a second traced compile in a process);
# prints the trace's totals as JSON.
TRACE_CHILD = r"""
import ctypes, json, sys
src, path, warm = open(sys.argv[1], 'rb').read(), sys.argv[2], sys.argv[3] == 'warm'
opts = [o.encode() for o in sys.argv[4:]]
try:
    nv = ctypes.CDLL('libnvrtc.so.13')
except OSError:
    nv = ctypes.CDLL('/usr/local/cuda/lib64/libnvrtc.so.13')
for o in ([opts] if warm else []) + [opts + [b'--fdevice-time-trace=' + path.encode()]]:
    prog = ctypes.c_void_p()
    assert nv.nvrtcCreateProgram(ctypes.byref(prog), src, b'k.cu', 0, None, None) == 0
    rc = nv.nvrtcCompileProgram(prog, len(o), (ctypes.c_char_p * len(o))(*o))
    nv.nvrtcDestroyProgram(ctypes.byref(prog))
    assert rc == 0, rc
t = {}
ev = [e for e in json.load(open(path + '.json'))['traceEvents'] if e.get('ph') == 'X']
t['span'] = (max(e['ts'] + e['dur'] for e in ev) - min(e['ts'] for e in ev)) / 1000
for e in ev:  # (NVRTC adds .json to the trace's name)
    name = e['name']
    if name == 'Processing Header File' and 'builtin' in e.get('args', {}).get('detail', ''):
        name = 'builtin header'
    t[name] = t.get(name, 0) + e['dur'] / 1000
print(json.dumps(t))
"""


def ops_of(cli):
    """The op names the CLI lists (`collgen compile --help`, line `OP:`)."""
    text = subprocess.run([cli, "compile", "--help"], capture_output=True, text=True).stdout
    return [o.strip() for o in re.search(r"OP: (.*)", text).group(1).split("|")]


def nvrtc_options():
    """collgen's NVRTC options, read from gen/nvrtc.c."""
    text = open(os.path.join(REPO, "gen", "nvrtc.c")).read()
    block = re.search(r"collgen__nvrtc_options\[\]\s*=\s*\{(.*?)NULL\}", text, re.S).group(1)
    return re.findall(r'"([^"]+)"', block)


def run(cmd, env=None):
    """(wall ms, CPU ms of the child, stdout) of one command."""
    t0 = time.perf_counter()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = (time.perf_counter() - t0) * 1000
    assert p.returncode == 0, f"{cmd}: {p.stderr}"
    cpu = (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000
    return wall, cpu, p.stdout


def measure(args, op, options):
    rows = {}

    def add(k, v):
        rows.setdefault(k, []).append(v)

    for _ in range(args.runs):
        with tempfile.TemporaryDirectory() as tmp:
            env = dict(os.environ, COLLGEN_CACHE_DIR=os.path.join(tmp, "c1"))
            wall, cpu, out = run([args.cli, "compile", op, *SHAPE], env)
            add("compile_wall", wall)
            add("compile_cpu", cpu)
            add("fetch", float(re.search(r"time:\s*([0-9.]+) ms", out).group(1)))
            _, _, out = run([args.phases, os.path.join(tmp, "c2"), op, *SHAPE])
            for k, v in re.findall(r"(\w+)=([0-9.]+)", out):
                add(k, float(v))
            _, _, src = run([args.cli, "gen", op, *SHAPE])
            path = os.path.join(tmp, "k.cu")
            with open(path, "w") as f:
                f.write(src)
            for i, mode in enumerate(("cold", "warm")):
                _, _, out = run([sys.executable, "-c", TRACE_CHILD, path,
                                 os.path.join(tmp, mode), mode, "--gpu-architecture=sm_90",
                                 *options])
                t = json.loads(out)
                # the front end's own total is not always in the trace: the rest
                t["front end"] = t["span"] - t["LibNVVM"] - t["Total PTXAS Time"]
                for k, name in (("fe", "front end"), ("builtin", "builtin header"),
                                ("nvvm", "LibNVVM"), ("ptxas", "Total PTXAS Time")):
                    add(f"{k}{i + 1}", t.get(name, 0.0))
    med = {k: statistics.median(v) for k, v in rows.items()}
    med["first_use"] = med["compile"] - med["again"]
    med["outside"] = med["compile_wall"] - med["fetch"]
    return med


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(REPO, "build"))
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--ops", help="comma list (default: every op)")
    args = ap.parse_args()
    args.cli = os.path.join(args.build, "collgen")
    args.phases = os.path.join(args.build, "tests", "collgen-jit-phases")
    options = nvrtc_options()
    ops = args.ops.split(",") if args.ops else ops_of(args.cli)
    results = {op: measure(args, op, options) for op in ops}
    print(f"NVRTC options: --gpu-architecture=sm_90 {' '.join(options)}; "
          f"median of {args.runs}; ms\n")
    cols = [("compile_wall", "`collgen compile` wall"), ("compile_cpu", "its CPU"),
            ("fetch", "its fetch (wall)"), ("lua", "Lua state"), ("plan", "plan"),
            ("render", "render"), ("load", "dlopen NVRTC"), ("compile", "first compile"),
            ("again", "same, NVRTC warm"), ("first_use", "first-use cost"),
            ("write", "cache write"), ("outside", "outside the fetch (wall)"), ("lines", "source lines")]
    print("| op | " + " | ".join(c[1] for c in cols) + " |")
    print("| --- " * (len(cols) + 1) + "|")
    for op, m in results.items():
        print(f"| {op} | " + " | ".join(f"{m[k]:.1f}" if k != "lines" else f"{m[k]:.0f}"
                                        for k, _ in cols) + " |")
    print("\nNVRTC's own trace (--fdevice-time-trace), first and second compile of a process:\n")
    cols = [("fe1", "front end"), ("builtin1", "of it builtin header"), ("nvvm1", "NVVM"),
            ("ptxas1", "ptxas"), ("fe2", "front end (2nd)"), ("builtin2", "builtin (2nd)"),
            ("nvvm2", "NVVM (2nd)"), ("ptxas2", "ptxas (2nd)")]
    print("| op | " + " | ".join(c[1] for c in cols) + " |")
    print("| --- " * (len(cols) + 1) + "|")
    for op, m in results.items():
        print(f"| {op} | " + " | ".join(f"{m[k]:.1f}" for k, _ in cols) + " |")


if __name__ == "__main__":
    main()
