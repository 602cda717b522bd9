#!/usr/bin/env python3
"""Summarizes the raw runs of scripts/bench-allreduce.sh into Markdown tables.

    summarize.py RAW_DIR

RAW_DIR holds one file per run, named N<n>_<system>_r<round>.txt, where
<system> is pccl, ompi, gloo or pccl-<quant>; each holds the rows the
benchmarks print (size count iters time_us min_us max_us algbw busbw
tx_bytes, and pccl adds copied_bytes) and '#' comment lines; a line '# load <1-min loadavg>' records the
load when the run started. For every (N, size, system) the per-run medians are
combined: the table shows the median over rounds and the spread (min..max)
over rounds. Ratios are ratios of those medians. Standard library only.
"""
import os
import re
import statistics
import sys

SYSTEMS = ["pccl", "ompi", "gloo"]
TARGET_SIZES = [64 << 20, 256 << 20]


def fmt_size(b):
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= div and b % div == 0:
            return f"{b // div} {unit}"
    return f"{b} B"


def load_runs(raw):
    """Returns runs[(n, system)][size] = list of (busbw, time_us, tx_bytes, copied_bytes),
    loads, failures (copied_bytes None where the row has no 10th column)."""
    runs, loads, failures = {}, [], []
    name_re = re.compile(r"^N(\d+)_([a-z0-9-]+)_r(\d+)\.txt$")
    for fn in sorted(os.listdir(raw)):
        m = name_re.match(fn)
        if not m:
            continue
        n, system = int(m.group(1)), m.group(2)
        done = False
        with open(os.path.join(raw, fn)) as f:
            for line in f:
                parts = line.split()
                if not parts:
                    continue
                if parts[0] == "#":
                    if len(parts) >= 3 and parts[1] == "load":
                        loads.append(float(parts[2]))
                    if len(parts) >= 2 and parts[1] == "done,":
                        done = True
                    continue
                if len(parts) < 9:
                    continue
                size = int(parts[0])
                time_us, busbw = float(parts[3]), float(parts[7])
                tx = None if parts[8] == "-" else int(parts[8])
                cp = int(parts[9]) if len(parts) >= 10 and parts[9] != "-" else None
                runs.setdefault((n, system), {}).setdefault(size, []).append(
                    (busbw, time_us, tx, cp))
        if not done:
            failures.append(fn)
    return runs, loads, failures


def stat(values):
    if not values:
        return None
    return statistics.median(values), min(values), max(values)


def cell(s, digits=3):
    if s is None:
        return "n/a"
    med, lo, hi = s
    return f"{med:.{digits}f} ({lo:.{digits}f}–{hi:.{digits}f})"


def ratio(a, b):
    if a is None or b is None or b[0] == 0:
        return None
    return a[0] / b[0]


def rcell(r, target=None):
    if r is None:
        return "n/a"
    s = f"{r:.2f}×"
    if target is not None:
        s += " ok" if r >= target else " MISS"
    return s


def main():
    raw = sys.argv[1]
    runs, loads, failures = load_runs(raw)
    ns = sorted({n for (n, _s) in runs})
    quants = sorted({s for (_n, s) in runs if s.startswith("pccl-")})
    rounds = max((len(v) for d in runs.values() for v in d.values()), default=0)

    def busbw(n, system, size):
        rows = runs.get((n, system), {}).get(size)
        return stat([r[0] for r in rows]) if rows else None

    def latency(n, system, size):
        rows = runs.get((n, system), {}).get(size)
        return stat([r[1] for r in rows]) if rows else None

    def tx(n, system, size):
        rows = runs.get((n, system), {}).get(size)
        vals = [r[2] for r in rows or [] if r[2] is not None]
        return statistics.median(vals) if vals else None

    def copied(n, system, size):
        rows = runs.get((n, system), {}).get(size)
        vals = [r[3] for r in rows or [] if r[3] is not None]
        return statistics.median(vals) if vals else None

    def ccell(n, system, size):
        c = copied(n, system, size)
        return "n/a" if c is None else f"{c / size:.2f}"

    print(f"Rounds per system: up to {rounds}. busbw in GB/s (1e9 B/s), nccl-tests convention "
          "busbw = size/time × 2(N−1)/N; cells are the median over rounds (min–max over rounds) "
          "of each run's median time.")
    if loads:
        print(f"1-min load average at run starts: median {statistics.median(loads):.2f}, "
              f"min {min(loads):.2f}, max {max(loads):.2f} (2 cores).")
    print()
    print("### Bus bandwidth, all sizes")
    print()
    print("pccl copied/size: tensor bytes peer 0's runtime copied in memory per operation "
          "(copied_bytes, PCCL_ATTRIBUTE_COPIED_BYTES) over the operation's size.")
    print()
    print("| N | size | pccl busbw | Open MPI busbw | Gloo busbw | pccl/OMPI | pccl/Gloo | "
          "pccl copied/size |")
    print("|---|---|---|---|---|---|---|---|")
    for n in ns:
        sizes = sorted({sz for s in SYSTEMS for sz in runs.get((n, s), {})})
        for sz in sizes:
            p, o, g = (busbw(n, s, sz) for s in SYSTEMS)
            print(f"| {n} | {fmt_size(sz)} | {cell(p)} | {cell(o)} | {cell(g)} | "
                  f"{rcell(ratio(p, o))} | {rcell(ratio(p, g))} | {ccell(n, 'pccl', sz)} |")
    print()
    print("### Issue 7 targets")
    print()
    print("| N | size | pccl/OMPI busbw (target ≥ 1.5×) | pccl/Gloo busbw (target ≥ "
          "1× ; ≥ 1.5× at N=2) |")
    print("|---|---|---|---|")
    shown = 0
    for n in ns:
        for sz in TARGET_SIZES:
            p, o, g = (busbw(n, s, sz) for s in SYSTEMS)
            if p is None and o is None and g is None:
                continue
            shown += 1
            print(f"| {n} | {fmt_size(sz)} | {rcell(ratio(p, o), 1.5)} | "
                  f"{rcell(ratio(p, g), 1.5 if n == 2 else 1.0)} |")
    if not shown:
        print("| – | 64/256 MiB not measured in this run | | |")
    print()
    print("### 4 KiB latency (median time per all-reduce, µs)")
    print()
    print("| N | pccl | Open MPI | Gloo | pccl/OMPI (target ≤ 2.5×) | pccl/Gloo |")
    print("|---|---|---|---|---|---|")
    for n in ns:
        p, o, g = (latency(n, s, 4096) for s in SYSTEMS)
        r = ratio(p, o)
        rc = "n/a" if r is None else f"{r:.2f}× " + ("ok" if r <= 2.5 else "MISS")
        print(f"| {n} | {cell(p, 0)} | {cell(o, 0)} | {cell(g, 0)} | {rc} | "
              f"{rcell(ratio(p, g))} |")
    if quants:
        print()
        print("### Quantized all-reduce (pccl): bytes moved per peer")
        print()
        print("busbw counts the float32 payload; tx = bytes peer 0 sent per operation "
              "(pcclReduceInfo_t.tx_bytes).")
        print()
        print("| N | size | quant | busbw | unquantized busbw | tx bytes | unquantized tx "
              "bytes | tx ratio | copied/size |")
        print("|---|---|---|---|---|---|---|---|---|")
        for n in ns:
            for q in quants:
                for sz in sorted(runs.get((n, q), {})):
                    b, b0 = busbw(n, q, sz), busbw(n, "pccl", sz)
                    t, t0 = tx(n, q, sz), tx(n, "pccl", sz)
                    tr = f"{t / t0:.3f}" if t is not None and t0 else "n/a"
                    print(f"| {n} | {fmt_size(sz)} | {q[5:]} | {cell(b)} | {cell(b0)} | "
                          f"{'n/a' if t is None else int(t)} | {'n/a' if t0 is None else int(t0)} "
                          f"| {tr} | {ccell(n, q, sz)} |")
    if failures:
        print()
        print("Runs that did not finish (no '# done' line): " + ", ".join(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
