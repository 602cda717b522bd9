#!/usr/bin/python3
"""Plots busbw against RTT per system from scripts/bench-wan.sh's raw runs.

    /usr/bin/python3 plot.py RAW_DIR [--rate-mbit R]

One figure: a row per size, a column per N; x = RTT (ms), y = busbw
(Gbit/s), one line per system (pccl configurations in blue shades, Open MPI
red, Gloo green), the link's rate dashed. Written to RAW_DIR/wan_busbw.png
and .svg. Without matplotlib (Debian: python3-matplotlib) it says so and
exits 0.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from summarize import fmt_size, label, load, sys_order  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("raw")
    p.add_argument("--rate-mbit", type=float, default=1000.0)
    a = p.parse_args()
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("plot: matplotlib is missing for " + sys.executable + " (Debian: apt-get install "
              "python3-matplotlib); no plot")
        return 0
    runs = load(a.raw)
    if not runs:
        print("plot: no runs in " + a.raw)
        return 0
    systems = sorted({s for (_n, _r, s) in runs}, key=sys_order)
    ns = sorted({n for (n, _r, _s) in runs})
    sizes = sorted({sz for rec in runs.values() for sz in rec["rows"]})
    fig, axes = plt.subplots(len(sizes), len(ns), figsize=(4.2 * len(ns), 3.4 * len(sizes)),
                             sharey=True, squeeze=False)
    pccl = [s for s in systems if s.startswith("pccl")]
    blues = plt.get_cmap("Blues")
    for i, sz in enumerate(sizes):
        for j, n in enumerate(ns):
            ax = axes[i][j]
            for s in systems:
                pts = sorted((r, rec["rows"][sz] * 8) for (n_, r, s_), rec in runs.items()
                             if n_ == n and s_ == s and sz in rec["rows"])
                if not pts:
                    continue
                if s.startswith("pccl"):
                    k = pccl.index(s)
                    style = {"color": blues(0.35 + 0.65 * k / max(len(pccl) - 1, 1)),
                             "marker": "x" if s.endswith("k") else "o" if s.endswith("c1") else "s"}
                else:
                    style = {"color": "tab:red" if s == "ompi" else "tab:green",
                             "marker": "^" if s == "ompi" else "v", "linewidth": 2}
                ax.plot([x for x, _ in pts], [y for _, y in pts], label=label(s), **style)
            ax.axhline(a.rate_mbit / 1000.0, color="gray", linestyle="--", linewidth=1)
            ax.set_title(f"{fmt_size(sz)}, N = {n}")
            ax.set_xlabel("RTT (ms)")
            if j == 0:
                ax.set_ylabel("busbw (Gbit/s)")
            ax.grid(True, alpha=0.3)
    axes[0][-1].legend(fontsize=7, loc="upper right")
    fig.suptitle(f"All-reduce across the WAN testbed, {a.rate_mbit:g} Mbit/s per pair")
    fig.tight_layout()
    for ext in ("png", "svg"):
        out = os.path.join(a.raw, "wan_busbw." + ext)
        fig.savefig(out, dpi=100)
    print("plot: " + os.path.join(a.raw, "wan_busbw.png"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
