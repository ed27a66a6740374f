#!/usr/bin/env python3
"""Turns collgen-bench CSV output into PNG charts.

usage: python3 docs/plot_bench.py MAIN.csv OUTDIR [MORE.csv ...]
Writes allreduce_latency.png, allreduce_bandwidth.png and
allgather_rmsnorm.png for MAIN.csv into OUTDIR and, when more CSVs are given
(other dtypes or group sizes of the same run), speedup_by_config.png with
NCCL time / collgen time (graph replay) for every CSV. Needs matplotlib
(Debian: apt-get install python3-matplotlib).
"""
import csv
import math
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

P2P_READ_GBS = 372.0  # SPEC section 4: kernel reading the peer, 2 x H200


def num(v):
    try:
        x = float(v)
        return x if math.isfinite(x) else None
    except ValueError:
        return None


def load(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def config(r):
    """'bf16, 2 x H200, groups of 2' for a CSV row."""
    return f"{r['dtype']}, {r['ngpus']} x H200, groups of {r.get('group') or r['ngpus']}"


def size_label(b):
    for unit, div in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if b >= div:
            return f"{b // div}{unit}"
    return f"{b}B"


def plot_allreduce(rows, out):
    ar = [r for r in rows if r["op"] == "allreduce_sum"]
    if not ar:
        return
    x = [int(r["bytes"]) for r in ar]
    fig, ax = plt.subplots(figsize=(9, 5))
    for key, label, style in (("collgen_graph_us", "collgen (graph)", "o-"),
                              ("collgen_eager_us", "collgen (eager)", "o--"),
                              ("nccl_graph_us", "NCCL (graph)", "s-"),
                              ("nccl_eager_us", "NCCL (eager)", "s--")):
        ax.plot(x, [num(r[key]) for r in ar], style, label=label, markersize=3)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(x[::2])
    ax.set_xticklabels([size_label(v) for v in x[::2]], rotation=45)
    ax.set_xlabel("bytes per GPU")
    ax.set_ylabel("latency (us, median)")
    ax.set_title(f"allreduce_sum {config(ar[0])}: latency")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(f"{out}/allreduce_latency.png", dpi=110)

    fig, ax = plt.subplots(figsize=(9, 5))
    ax.plot(x, [num(r["busbw_graph_GBs"]) for r in ar], "o-", label="collgen busbw (graph)",
            markersize=3)
    ax.plot(x, [num(r["nccl_busbw_graph_GBs"]) for r in ar], "s-", label="NCCL busbw (graph)",
            markersize=3)
    ax.axhline(P2P_READ_GBS, color="gray", linestyle=":", label=f"P2P read limit {P2P_READ_GBS:.0f} GB/s")
    ax.set_xscale("log", base=2)
    ax.set_xticks(x[::2])
    ax.set_xticklabels([size_label(v) for v in x[::2]], rotation=45)
    ax.set_xlabel("bytes per GPU")
    ax.set_ylabel("bus bandwidth (GB/s, nccl-tests definition)")
    ax.set_title(f"allreduce_sum {config(ar[0])}: bandwidth")
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(f"{out}/allreduce_bandwidth.png", dpi=110)


def plot_rmsnorm(rows, out):
    rr = [r for r in rows if r["op"] == "allgather_rmsnorm"]
    if not rr:
        return
    g = int(rr[0].get("group") or rr[0]["ngpus"])
    fig, ax = plt.subplots(figsize=(9, 5))
    for cols in sorted({int(r["cols"]) for r in rr}):
        sel = [r for r in rr if int(r["cols"]) == cols]
        x = [int(r["rows"]) for r in sel]
        line, = ax.plot(x, [num(r["collgen_graph_us"]) for r in sel], "o-", markersize=3,
                        label=f"collgen cols={cols}")
        ax.plot(x, [num(r["nccl_graph_us"]) for r in sel], "s--", markersize=3,
                color=line.get_color(), label=f"NCCL AG+RMSNorm cols={cols}")
        floor = [int(r["bytes"]) * (g - 1) / g / (P2P_READ_GBS * 1e3) for r in sel]
        ax.plot(x, floor, ":", color=line.get_color(), linewidth=1)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("gathered rows")
    ax.set_ylabel("latency (us, graph replay, median); dotted: link floor")
    ax.set_title(f"allgather_rmsnorm {config(rr[0])}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(f"{out}/allgather_rmsnorm.png", dpi=110)


def plot_speedups(tables, out):
    """NCCL / collgen graph-replay time for every CSV: allreduce by size,
    allgather_rmsnorm by rows at 4096 and 16384 cols."""
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 5))
    for rows in tables:
        ar = [r for r in rows if r["op"] == "allreduce_sum"]
        if ar:
            ax1.plot([int(r["bytes"]) for r in ar],
                     [(num(r["nccl_graph_us"]) or math.nan) / num(r["collgen_graph_us"]) for r in ar],
                     "o-", markersize=3, label=config(ar[0]))
        rr = [r for r in rows if r["op"] == "allgather_rmsnorm"]
        for cols, style in ((4096, "o-"), (16384, "s--")):
            sel = [r for r in rr if int(r["cols"]) == cols and num(r["nccl_graph_us"])]
            if sel:
                ax2.plot([int(r["rows"]) for r in sel],
                         [num(r["nccl_graph_us"]) / num(r["collgen_graph_us"]) for r in sel],
                         style, markersize=3, label=f"{config(sel[0])}, cols {cols}")
    for ax, xlabel, title in ((ax1, "bytes per GPU", "allreduce_sum"),
                              (ax2, "gathered rows", "allgather_rmsnorm")):
        ax.axhline(1.0, color="gray", linestyle=":")
        ax.set_xscale("log", base=2)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("NCCL time / collgen time (graph replay)")
        ax.set_title(f"{title}: speedup over NCCL")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(f"{out}/speedup_by_config.png", dpi=110)


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    rows = load(sys.argv[1])
    plot_allreduce(rows, sys.argv[2])
    plot_rmsnorm(rows, sys.argv[2])
    if len(sys.argv) > 3:
        plot_speedups([rows] + [load(p) for p in sys.argv[3:]], sys.argv[2])


if __name__ == "__main__":
    main()
