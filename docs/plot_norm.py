#!/usr/bin/env python3
"""Draws tests/bench/norm_vs_torch.py's CSV: the fused residual add +
RMSNorm of one GPU, collgen and torch.compile, as time per call and as
collgen's speed-up over torch.compile per shape.

usage: /usr/bin/python3 docs/plot_norm.py CSV PNG
Needs matplotlib (Debian: apt-get install python3-matplotlib).
"""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__.strip().splitlines()[-2])
    with open(sys.argv[1]) as fh:
        rows = [r for r in csv.DictReader(fh) if r["compile_us"] and r["collgen_us"]]
    rows.sort(key=lambda r: (int(r["cols"]), int(r["rows"])))
    names = [f'{r["rows"]}x{r["cols"]}' for r in rows]
    speedup = [float(r["compile_us"]) / float(r["collgen_us"]) for r in rows]
    fig, ax = plt.subplots(figsize=(10, 4))
    bars = ax.bar(names, speedup, color=["tab:green" if s >= 1 else "tab:red" for s in speedup])
    ax.axhline(1.0, color="black", linewidth=0.8)
    for b, r in zip(bars, rows):
        ax.text(b.get_x() + b.get_width() / 2, b.get_height(), f'{float(r["collgen_us"]):.3g}',
                ha="center", va="bottom", fontsize=7)
    ax.set_ylabel("torch.compile time / collgen time")
    ax.set_title("Fused residual add + RMSNorm, bf16, one H200 (labels: collgen us per call)")
    ax.set_ylim(0, max(speedup) * 1.15)
    plt.setp(ax.get_xticklabels(), rotation=45, ha="right", fontsize=8)
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=110)


if __name__ == "__main__":
    main()
