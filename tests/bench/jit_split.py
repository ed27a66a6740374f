"""jit_split.py -- where a cold JIT compile of each op spends its time.

    python3 tests/bench/jit_split.py [--cli build/collgen] [--runs 5]

Per op (the demo's shapes: 2 ranks, bf16, 4096 columns for the norm ops),
the median of RUNS of:
  * total:    `collgen compile` with an empty cache (process start, Lua
              state, render, NVRTC, cache write), wall time;
  * ms:       what `collgen compile` itself reports for the fetch;
  * render:   `collgen gen` (process start, Lua state, render) wall time;
  * nvrtc-ptx:   NVRTC of the rendered source to PTX only
              (--gpu-architecture=compute_90): front end + NVVM;
  * nvrtc-cubin: the same to a cubin (sm_90), collgen's options:
              + ptxas; ptxas = nvrtc-cubin - nvrtc-ptx.
NVRTC is called in this process through ctypes (libnvrtc.so.13), with the
options of gen/nvrtc.c (read from the source, not copied). Measure on an
idle machine.
"""

import argparse
import ctypes
import os
import re
import statistics
import subprocess
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
SHAPES = {
    "allreduce_sum": ["--ngpus", "2", "--elems", "1048576"],
    "allgather_rmsnorm": ["--ngpus", "2", "--rows", "8", "--cols", "4096"],
    "allreduce_residual_rmsnorm": ["--ngpus", "2", "--rows", "8", "--cols", "4096"],
}


def nvrtc_options():
    """collgen's NVRTC options, read from gen/nvrtc.c."""
    text = open(os.path.join(REPO, "gen", "nvrtc.c")).read()
    block = re.search(r"collgen__nvrtc_options\[\]\s*=\s*\{(.*?)NULL\}", text, re.S).group(1)
    return re.findall(r'"([^"]+)"', block)


def nvrtc_time(nvrtc, source, arch, options):
    """Seconds of one nvrtcCompileProgram of source for arch."""
    prog = ctypes.c_void_p()
    assert nvrtc.nvrtcCreateProgram(ctypes.byref(prog), source, b"k.cu", 0, None, None) == 0
    opts = [f"--gpu-architecture={arch}".encode()] + [o.encode() for o in options]
    argv = (ctypes.c_char_p * len(opts))(*opts)
    t0 = time.perf_counter()
    rc = nvrtc.nvrtcCompileProgram(prog, len(opts), argv)
    dt = time.perf_counter() - t0
    nvrtc.nvrtcDestroyProgram(ctypes.byref(prog))
    assert rc == 0, f"NVRTC failed ({rc}) for {arch}"
    return dt


def wall(cmd, env):
    t0 = time.perf_counter()
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    dt = time.perf_counter() - t0
    assert p.returncode == 0, p.stderr
    return dt, p.stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", default=os.path.join(REPO, "build", "collgen"))
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    try:
        nvrtc = ctypes.CDLL("libnvrtc.so.13")
    except OSError:
        nvrtc = ctypes.CDLL("/usr/local/cuda/lib64/libnvrtc.so.13")
    options = nvrtc_options()
    print(f"NVRTC options: --gpu-architecture=<arch> {' '.join(options)}; median of {args.runs}")
    print(f"{'op':28} {'total':>8} {'ms':>8} {'render':>8} {'ptx':>8} {'cubin':>8} {'ptxas':>8}")
    for op, flags in SHAPES.items():
        rows = {k: [] for k in ("total", "ms", "render", "ptx", "cubin")}
        for _ in range(args.runs):
            with tempfile.TemporaryDirectory() as cache:
                env = dict(os.environ, COLLGEN_CACHE_DIR=cache)
                dt, out = wall([args.cli, "compile", op, *flags], env)
                rows["total"].append(dt * 1000)
                m = re.search(r"([0-9.]+) ms", out)
                rows["ms"].append(float(m.group(1)) if m else float("nan"))
                dt, src = wall([args.cli, "gen", op, *flags], env)
                rows["render"].append(dt * 1000)
            source = src.encode()
            rows["ptx"].append(nvrtc_time(nvrtc, source, "compute_90", options) * 1000)
            rows["cubin"].append(nvrtc_time(nvrtc, source, "sm_90", options) * 1000)
        med = {k: statistics.median(v) for k, v in rows.items()}
        print(f"{op:28} {med['total']:8.1f} {med['ms']:8.1f} {med['render']:8.1f} "
              f"{med['ptx']:8.1f} {med['cubin']:8.1f} {med['cubin'] - med['ptx']:8.1f}")


if __name__ == "__main__":
    main()
