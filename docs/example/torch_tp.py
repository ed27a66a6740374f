"""torch_tp.py -- a tensor-parallel decoder stack on collgen, under CUDA graphs.

    torchrun --nproc-per-node 2 docs/example/torch_tp.py [--layers 8] [--steps 50]

Every layer is an MLP block split over the ranks: a column-parallel up
projection (each rank holds inner/N of its rows), SiLU, a row-parallel down
projection (each rank's output is a partial sum), then collgen's fused
allreduce + residual add + RMSNorm, which ends every tensor-parallel block.
One decode step (all layers) is captured in a CUDA graph and replayed on
new tokens.

The output is checked against a reference:
* one GPU per rank (NCCL available): the same stack with
  torch.distributed.all_reduce (NCCL) + a torch residual add + RMSNorm,
  timed in the same run;
* ranks sharing a GPU (e.g. 2 processes on one GPU; NCCL refuses that):
  a single-process computation of the whole stack (every rank's shard)
  on this rank.
It prints the time per step. With ranks sharing a GPU the processes are
time-sliced, so that time says nothing about speed.
"""

import argparse
import os

import torch
import torch.distributed as dist
import torch.nn.functional as F

import collgen.torch as ct


def shards(layer, rank, hidden, inner, nranks, device):
    """Rank `rank`'s weights of layer `layer`: the same on every process."""
    g = torch.Generator(device=device).manual_seed(1000 * layer + rank)
    up = torch.randn((inner // nranks, hidden), generator=g, device=device) * hidden ** -0.5
    down = torch.randn((hidden, inner // nranks), generator=g, device=device) * inner ** -0.5
    gamma = 1 + 0.1 * torch.randn((hidden,), generator=torch.Generator(device=device)
                                  .manual_seed(layer), device=device)
    return up.bfloat16(), down.bfloat16(), gamma.bfloat16()


def rmsnorm(r, gamma, eps):
    r32 = r.float()
    return (r32 * torch.rsqrt(r32.pow(2).mean(-1, keepdim=True) + eps) * gamma.float()).bfloat16()


def step_collgen(comm, layers, h, residual, eps):
    """One decode step: every layer, collgen's fused op between them."""
    for up, down, gamma in layers:
        partial = F.linear(F.silu(F.linear(h, up)), down)
        h, residual = comm.fused_add_rmsnorm(partial, residual, gamma, eps)
    return h, residual


def step_torch(layers, h, residual, eps):
    """The same step on torch.distributed (NCCL): all_reduce, add, RMSNorm."""
    for up, down, gamma in layers:
        partial = F.linear(F.silu(F.linear(h, up)), down)
        dist.all_reduce(partial)
        residual = (partial.float() + residual.float()).bfloat16()
        h = rmsnorm(residual, gamma, eps)
    return h, residual


def step_single(all_layers, h, residual, eps):
    """The whole stack in this process: every rank's partial sum, summed in
    f32 in rank order as collgen does."""
    for ranks in all_layers:
        s = None
        for up, down, _ in ranks:
            p = F.linear(F.silu(F.linear(h, up)), down).float()
            s = p if s is None else s + p
        residual = (s + residual.float()).bfloat16()
        h = rmsnorm(residual, ranks[0][2], eps)
    return h, residual


def graph_of(fn, *static):
    """A CUDA graph of fn(*static) after a warm-up on a side stream, and its outputs."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            fn(*static)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = fn(*static)
    return graph, out


def time_steps(graph, h_in, res_in, tokens, residuals):
    """Median µs of a replay, fed new tokens each step."""
    times = []
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for t, r in zip(tokens, residuals):
        h_in.copy_(t)
        res_in.copy_(r)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1000)
    return sorted(times)[len(times) // 2]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--hidden", type=int, default=4096)
    ap.add_argument("--inner", type=int, default=14336)
    ap.add_argument("--tokens", type=int, default=8)
    ap.add_argument("--steps", type=int, default=50)
    args = ap.parse_args()

    rank, nranks = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ.get("LOCAL_RANK", rank))
    ngpus = torch.cuda.device_count()
    shared = int(os.environ.get("LOCAL_WORLD_SIZE", nranks)) > ngpus
    device = torch.device("cuda", local_rank % ngpus)
    torch.cuda.set_device(device)
    dist.init_process_group("gloo" if shared else "nccl")
    eps = 1e-6

    # The two lines that adopt collgen's fused op: a communicator over the
    # process group, then comm.fused_add_rmsnorm(...) where the model ran
    # all_reduce + add + RMSNorm.
    comm = ct.Communicator(device=device, allow_shared_devices=int(shared))

    layers = [shards(i, rank, args.hidden, args.inner, nranks, device) for i in range(args.layers)]
    g = torch.Generator(device=device).manual_seed(7)
    tokens = [torch.randn((args.tokens, args.hidden), generator=g, device=device).bfloat16()
              for _ in range(args.steps)]
    residuals = [torch.randn((args.tokens, args.hidden), generator=g, device=device).bfloat16()
                 for _ in range(args.steps)]
    h_in, res_in = tokens[0].clone(), residuals[0].clone()

    graph, (h_out, res_out) = graph_of(lambda h, r: step_collgen(comm, layers, h, r, eps),
                                       h_in, res_in)
    us = time_steps(graph, h_in, res_in, tokens, residuals)

    # Check the last step against the reference.
    h_in.copy_(tokens[-1])
    res_in.copy_(residuals[-1])
    graph.replay()
    torch.cuda.synchronize()
    if shared:
        all_layers = [[shards(i, r, args.hidden, args.inner, nranks, device)
                       for r in range(nranks)] for i in range(args.layers)]
        want_h, want_res = step_single(all_layers, tokens[-1], residuals[-1], eps)
        what, torch_us = "a single-process computation", None
    else:
        tgraph, (th, tres) = graph_of(lambda h, r: step_torch(layers, h, r, eps), h_in, res_in)
        torch_us = time_steps(tgraph, h_in, res_in, tokens, residuals)
        h_in.copy_(tokens[-1])
        res_in.copy_(residuals[-1])
        tgraph.replay()
        torch.cuda.synchronize()
        want_h, want_res = th.clone(), tres.clone()
        what = "torch.distributed (NCCL) + torch RMSNorm"
    err = max((h_out.float() - want_h.float()).abs().max().item(),
              (res_out.float() - want_res.float()).abs().max().item())
    scale = max(want_h.float().abs().max().item(), want_res.float().abs().max().item())
    ok = err <= 2e-2 * scale
    same = [None] * nranks
    dist.all_gather_object(same, (h_out.float().sum().item(), res_out.float().sum().item()))
    ok = ok and len(set(same)) == 1

    if rank == 0:
        print(f"torch_tp: {nranks} ranks on {ngpus} GPU(s), {args.layers} layers, "
              f"{args.tokens} tokens x {args.hidden}, inner {args.inner}")
        print(f"collgen step (CUDA graph): {us:.1f} us" + (
            "  (ranks share a GPU: time-sliced, not a speed figure)" if shared else ""))
        if torch_us is not None:
            print(f"torch.distributed NCCL step (CUDA graph): {torch_us:.1f} us")
        print(f"output vs {what}: max |diff| {err:.3g} (of max |value| {scale:.3g}); "
              f"ranks {'agree' if len(set(same)) == 1 else 'DIFFER'}: {'PASS' if ok else 'FAIL'}")
    comm.close()
    dist.destroy_process_group()
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    main()
