#!/usr/bin/python3
"""Plots busbw against size from the raw runs of scripts/bench-allreduce.sh.

    /usr/bin/python3 plot.py RAW_DIR [--png-dpi D] [--name NAME]

One figure, a subplot per N: busbw (median over rounds, GB/s, log scale)
against the all-reduce's size (log scale), one line each for fixed-rule
pccl, tuned pccl, Open MPI and Gloo (those the run has), the min..max over
rounds shaded. Written to RAW_DIR/NAME.png and RAW_DIR/NAME.svg (NAME:
allreduce_busbw). Needs matplotlib (Debian: apt-get install
python3-matplotlib); without it, it says so and exits 0 so the benchmark
does not fail for want of a plot.
"""
import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from summarize import fmt_size, load_runs  # noqa: E402

LINES = [  # system, label, style
    ("pccl", "pccl (fixed rule)", {"color": "tab:blue", "linestyle": "--", "marker": "o"}),
    ("tuned", "pccl (tuned)", {"color": "tab:blue", "linestyle": "-", "marker": "s"}),
    ("ompi", "Open MPI TCP", {"color": "tab:red", "linestyle": "-", "marker": "^"}),
    ("gloo", "Gloo", {"color": "tab:green", "linestyle": "-", "marker": "v"}),
]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("raw")
    p.add_argument("--png-dpi", type=int, default=100)
    p.add_argument("--name", default="allreduce_busbw")
    a = p.parse_args()
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("plot: matplotlib is missing for " + sys.executable + " (Debian: apt-get install "
              "python3-matplotlib); no plot")
        return 0
    runs = load_runs(a.raw)[0]
    ns = sorted({n for (n, s) in runs if s in {sys_ for sys_, _l, _s in LINES}})
    if not ns:
        print("plot: no pccl / Open MPI / Gloo runs in " + a.raw + "; no plot")
        return 0
    fig, axes = plt.subplots(1, len(ns), figsize=(4.2 * len(ns), 3.6), sharey=True,
                             squeeze=False)
    for ax, n in zip(axes[0], ns):
        for system, label, style in LINES:
            d = runs.get((n, system))
            if not d:
                continue
            sizes = sorted(d)
            med = [statistics.median(r[0] for r in d[sz]) for sz in sizes]
            lo = [min(r[0] for r in d[sz]) for sz in sizes]
            hi = [max(r[0] for r in d[sz]) for sz in sizes]
            ax.plot(sizes, med, label=label, markersize=3.5, linewidth=1.3, **style)
            if any(h > l for h, l in zip(hi, lo)):
                ax.fill_between(sizes, lo, hi, color=style["color"], alpha=0.12, linewidth=0)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ticks = sorted({sz for s, _l, _st in LINES for sz in runs.get((n, s), {})})
        ax.set_xticks(ticks)
        ax.set_xticklabels([fmt_size(t).replace(" ", "") for t in ticks], rotation=60,
                           fontsize=7)
        ax.minorticks_off()
        ax.set_title(f"N = {n}", fontsize=10)
        ax.set_xlabel("all-reduce size (float32)", fontsize=8)
        ax.grid(True, which="major", alpha=0.3)
        ax.tick_params(axis="y", labelsize=7)
    axes[0][0].set_ylabel("busbw (GB/s)", fontsize=8)
    axes[0][0].legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    out = os.path.join(a.raw, a.name)
    fig.savefig(out + ".png", dpi=a.png_dpi)
    fig.savefig(out + ".svg")
    print(f"plot: wrote {out}.png and {out}.svg")
    return 0


if __name__ == "__main__":
    sys.exit(main())
