"""norm_ncu.py -- a few eager calls of collgen's and Inductor's fused
residual add + RMSNorm per shape, for ncu to time kernel by kernel
(not a benchmark: ncu serializes kernels). Checks both against the same
reference as norm_vs_torch.py first.

    ncu --clock-control none --cache-control none -k regex:'collgen|triton' \
        python3 tests/bench/norm_ncu.py 128x4096,2048x4096
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import norm_vs_torch as nvt  # noqa: E402
import collgen.torch as ct  # noqa: E402

dev = torch.device("cuda", 0)
comm = ct.Communicator.local([dev])
compiled = torch.compile(nvt.fused, dynamic=False)
gen = torch.Generator(device=dev).manual_seed(7)
for rows, cols in nvt.parse_shapes(sys.argv[1]):
    x = torch.randn(rows, cols, generator=gen, device=dev).bfloat16()
    residual = torch.randn(rows, cols, generator=gen, device=dev).bfloat16()
    weight = (torch.rand(cols, generator=gen, device=dev) + 0.5).bfloat16()
    ref = nvt.reference([x], residual, weight, nvt.EPS)
    ways = {"collgen": lambda: comm.fused_add_rmsnorm([x], [residual], [weight], nvt.EPS),
            "compile": lambda: compiled(x, residual, weight, nvt.EPS)}
    for name, f in ways.items():
        problem = nvt.check(name, f(), ref)
        print(f"{rows}x{cols} {name}: {'ok' if not problem else problem}", flush=True)
    torch.cuda.synchronize()
    for _ in range(5):
        for f in ways.values():
            f()
    torch.cuda.synchronize()
comm.close()
