#!/usr/bin/env python3
"""Tables of scripts/bench-wan.sh's raw runs (issue 23, docs/wan.md).

    python3 summarize.py RAW_DIR [--rate-mbit R]

Reads RAW_DIR/N<n>_rtt<ms>_<system>.txt (rows: size count iters time_us
min_us max_us algbw busbw ...; '#' lines: the load and the delay line's
drops) and prints Markdown: per size, one row per (N, RTT) with every
system's busbw in Gbit/s and its share of the link's rate, the best pccl
configuration, and its ratio to Open MPI and to Gloo; then issue 23's targets
at 50 ms RTT (best pccl >= 80 % of the link, >= 2x Open MPI and Gloo).
busbw = algbw * 2(N-1)/N: for a ring all-reduce, what each link carries.
"""
import argparse
import glob
import os
import re
import sys


def load(raw):
    """{(n, rtt, system): {"rows": {size: busbw GB/s}, "load": str, "drops": int, "ok": bool}}"""
    runs = {}
    for path in glob.glob(os.path.join(raw, "N*_rtt*_*.txt")):
        m = re.match(r"N(\d+)_rtt(\d+)_(.+)\.txt$", os.path.basename(path))
        if not m:
            continue
        rec = {"rows": {}, "load": "?", "drops": 0, "ok": False}
        with open(path) as f:
            for line in f:
                if line.startswith("# load "):
                    rec["load"] = line.split()[2]
                elif line.startswith("# delay line drops "):
                    rec["drops"] = int(line.split()[4] or 0)
                elif line.startswith("# done, results verified exactly"):
                    rec["ok"] = True
                elif not line.startswith("#"):
                    f_ = line.split()
                    if len(f_) >= 8:
                        rec["rows"][int(f_[0])] = float(f_[7])
        runs[(int(m.group(1)), int(m.group(2)), m.group(3))] = rec
    return runs


def sys_order(s):
    if s.startswith("pccl-p"):
        p, c = s[6:].split("c")
        k = c.endswith("k")
        return (0, int(c.rstrip("k")), int(p), k)
    return (1 if s == "ompi" else 2, 0, 0, False)


def label(s):
    if s.startswith("pccl-p"):
        p, c = s[6:].split("c")
        k = " (kernel sndbuf)" if c.endswith("k") else ""
        c = c.rstrip("k")
        return f"pccl pool {p}" + (f" ×{c} ops" if c != "1" else "") + k
    return {"ompi": "Open MPI", "gloo": "Gloo"}.get(s, s)


def fmt_size(b):
    return f"{b >> 20} MiB" if b >= 1 << 20 else f"{b >> 10} KiB"


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("raw")
    p.add_argument("--rate-mbit", type=float, default=1000.0)
    a = p.parse_args()
    runs = load(a.raw)
    if not runs:
        print("summarize: no runs in " + a.raw, file=sys.stderr)
        return 1
    link = a.rate_mbit / 1000.0  # Gbit/s
    systems = sorted({s for (_n, _r, s) in runs}, key=sys_order)
    ns = sorted({n for (n, _r, _s) in runs})
    rtts = sorted({r for (_n, r, _s) in runs})
    sizes = sorted({sz for rec in runs.values() for sz in rec["rows"]})
    failed = [k for k, rec in runs.items() if not rec["ok"]]
    print(f"busbw in Gbit/s (busbw GB/s × 8) and its % of the {link:g} Gbit/s link; "
          "best = the best pccl configuration of the row.\n")
    best_at = {}
    for sz in sizes:
        print(f"#### {fmt_size(sz)}\n")
        print("| N | RTT ms | " + " | ".join(label(s) for s in systems) +
              " | best pccl | best/Open MPI | best/Gloo | load |")
        print("|---|---|" + "---|" * len(systems) + "---|---|---|---|")
        for n in ns:
            for r in rtts:
                cells, best, loads = [], None, []
                for s in systems:
                    rec = runs.get((n, r, s))
                    v = rec["rows"].get(sz) if rec else None
                    if rec:
                        loads.append(float(rec["load"]) if rec["load"] != "?" else 0.0)
                    if v is None:
                        cells.append("n/a" if not rec or rec["ok"] else "FAIL")
                        continue
                    g = v * 8
                    cells.append(f"{g:.3f} ({g / link * 100:.0f} %)")
                    if s.startswith("pccl") and (best is None or g > best[1]):
                        best = (s, g)
                if not loads:
                    continue
                ref = {}
                for s in ("ompi", "gloo"):
                    rec = runs.get((n, r, s))
                    v = rec["rows"].get(sz) if rec else None
                    ref[s] = f"{best[1] / (v * 8):.2f}×" if best and v else "n/a"
                best_at[(sz, n, r)] = (best, ref)
                bl = f"{label(best[0])}: {best[1] / link * 100:.0f} %" if best else "n/a"
                print(f"| {n} | {r} | " + " | ".join(cells) +
                      f" | {bl} | {ref['ompi']} | {ref['gloo']} | "
                      f"{min(loads):.2f}–{max(loads):.2f} |")
        print()
    # The plot's numbers: busbw against RTT, one row per system.
    for sz in sizes:
        print(f"#### busbw (Gbit/s) against RTT, {fmt_size(sz)}\n")
        print("| system | N | " + " | ".join(f"{r} ms" for r in rtts) + " |")
        print("|---|---|" + "---|" * len(rtts))
        for s in systems:
            for n in ns:
                cells = []
                for r in rtts:
                    rec = runs.get((n, r, s))
                    v = rec["rows"].get(sz) if rec else None
                    cells.append(f"{v * 8:.2f}" if v is not None else "n/a")
                print(f"| {label(s)} | {n} | " + " | ".join(cells) + " |")
        print()
    if 50 in rtts:
        print("#### Issue 23's targets at 50 ms RTT (best pccl configuration)\n")
        print("| size | N | best pccl | % of link (≥ 80) | × Open MPI (≥ 2) | × Gloo (≥ 2) |")
        print("|---|---|---|---|---|---|")
        for sz in sizes:
            for n in ns:
                best, ref = best_at.get((sz, n, 50), (None, {"ompi": "n/a", "gloo": "n/a"}))
                if best is None:
                    continue
                pct = best[1] / link * 100
                print(f"| {fmt_size(sz)} | {n} | {label(best[0])} | {pct:.0f} % "
                      f"{'met' if pct >= 80 else 'missed'} | {ref['ompi']} | {ref['gloo']} |")
        print()
    drops = sum(rec["drops"] for rec in runs.values())
    print(f"Delay line queue drops over all runs: {drops}.")
    if failed:
        print("Failed runs: " + ", ".join(f"N={n} RTT={r} {s}" for (n, r, s) in sorted(failed)))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
