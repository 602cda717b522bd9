#!/usr/bin/env python3
"""Summarizes the raw runs of scripts/bench-collectives.sh into Markdown tables.

    summarize.py RAW_DIR

RAW_DIR holds one file per run, named N<n>_<coll>_<system>_r<round>.txt, where
<coll> is broadcast, reduce, allgather, reducescatter, alltoall, gather,
scatter, sendrecv or barrier and <system> pccl, tuned (pccl with the run's tuned table), ompi
or gloo; each holds the rows the
benchmarks print (size count iters time_us min_us max_us algbw busbw tx_bytes,
and pccl adds copied_bytes) and '#' comment lines: '# load <1-min loadavg>'
records the load when the run started, '# done, ...' ends a complete run and
'# unsupported: <why>' a run of a system that lacks the collective (Gloo's
reduce-scatter in torch 1.13), shown as n/a, not as a failure.

For every (collective, N, size, system) the per-run medians are combined: a
cell is the median over rounds with the min..max over rounds in parentheses;
ratios are ratios of those medians. Sizes are labelled by the swept size they
came from (at N = 3 a 4 KiB point of a blocked collective is 4092 bytes; see
bench/collectives/coll_common.h). Targets, marked ok/MISS: busbw >= 1.2x
Open MPI (TCP) and >= Gloo at 64 and 256 MiB; 4 KiB latency <= 2.5x Open MPI.
Standard library only.
"""
import os
import re
import statistics
import sys

COLLS = ["broadcast", "reduce", "allgather", "reducescatter", "alltoall", "gather", "scatter",
         "sendrecv", "barrier"]
SYSTEMS = ["pccl", "ompi", "gloo"]
TARGET_SIZES = [64 << 20, 256 << 20]
OMPI_TARGET = 1.2
GLOO_TARGET = 1.0
LATENCY_SIZE = 4096
LATENCY_TARGET = 2.5
FACTORS = {"broadcast": "1", "reduce": "1", "allgather": "(N−1)/N", "reducescatter": "(N−1)/N",
           "alltoall": "(N−1)/N", "gather": "(N−1)/N", "scatter": "(N−1)/N", "sendrecv": "1"}


def nominal(size, n):
    """The swept size a row came from: the next power of two when the row is within one
    element per rank of it, else the row's own size."""
    if size <= 0:
        return size
    p = 1 << (size - 1).bit_length()
    return p if p - size < 4 * n else size


def fmt_size(b):
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= div and b % div == 0:
            return f"{b // div} {unit}"
    return f"{b} B"


def load_runs(raw):
    """Returns runs[(coll, n, system)][nominal size] = list of (busbw, time_us, tx, copied),
    loads, failures, unsupported[(coll, n, system)] = reason."""
    runs, loads, failures, unsupported = {}, [], [], {}
    name_re = re.compile(r"^N(\d+)_([a-z]+)_([a-z]+)_r(\d+)\.txt$")
    for fn in sorted(os.listdir(raw)):
        m = name_re.match(fn)
        if not m:
            continue
        n, coll, system = int(m.group(1)), m.group(2), m.group(3)
        done = False
        with open(os.path.join(raw, fn)) as f:
            for line in f:
                parts = line.split()
                if not parts:
                    continue
                if parts[0] == "#":
                    if len(parts) >= 3 and parts[1] == "load":
                        loads.append(float(parts[2]))
                    elif len(parts) >= 2 and parts[1] == "done,":
                        done = True
                    elif len(parts) >= 2 and parts[1] == "unsupported:":
                        unsupported[(coll, n, system)] = " ".join(parts[2:])
                        done = True
                    continue
                if len(parts) < 9:
                    continue
                size = int(parts[0])
                time_us, busbw = float(parts[3]), float(parts[7])
                tx = None if parts[8] == "-" else int(parts[8])
                cp = int(parts[9]) if len(parts) >= 10 and parts[9] != "-" else None
                runs.setdefault((coll, n, system), {}).setdefault(nominal(size, n), []).append(
                    (busbw, time_us, tx, cp, size))
        if not done:
            failures.append(fn)
    return runs, loads, failures, unsupported


def stat(values):
    if not values:
        return None
    return statistics.median(values), min(values), max(values)


def cell(s, digits=3, why=None):
    if s is None:
        return "n/a (unsupported)" if why else "n/a"
    med, lo, hi = s
    return f"{med:.{digits}f} ({lo:.{digits}f}–{hi:.{digits}f})"


def ratio(a, b):
    if a is None or b is None or b[0] == 0:
        return None
    return a[0] / b[0]


def rcell(r, target=None, at_most=False):
    if r is None:
        return "n/a"
    s = f"{r:.2f}×"
    if target is not None:
        good = r <= target if at_most else r >= target
        s += " ok" if good else " MISS"
    return s


def main():
    raw = sys.argv[1]
    runs, loads, failures, unsupported = load_runs(raw)
    colls = [c for c in COLLS if any(k[0] == c for k in list(runs) + list(unsupported))]
    ns = sorted({k[1] for k in list(runs) + list(unsupported)})
    rounds = max((len(v) for d in runs.values() for v in d.values()), default=0)

    def rows(coll, n, system, size):
        return runs.get((coll, n, system), {}).get(size)

    def busbw(coll, n, system, size):
        r = rows(coll, n, system, size)
        return stat([x[0] for x in r]) if r else None

    def latency(coll, n, system, size):
        r = rows(coll, n, system, size)
        return stat([x[1] for x in r]) if r else None

    def per_size(coll, n, system, size, idx):
        r = rows(coll, n, system, size)
        vals = [x[idx] / x[4] for x in r or [] if x[idx] is not None and x[4] > 0]
        return f"{statistics.median(vals):.2f}" if vals else "n/a"

    def why(coll, n, system):
        return unsupported.get((coll, n, system))

    print(f"Rounds per system: up to {rounds}. busbw in GB/s (1e9 B/s), nccl-tests conventions "
          "(size = the largest buffer on one rank; busbw = size/time × 1 for broadcast, "
          "reduce and sendrecv (a ring shift: each rank sends size bytes to rank + 1 and "
          "receives size from rank − 1), × (N−1)/N for all-gather, reduce-scatter, all-to-all, "
          "gather and scatter); "
          "each operation starts after an untimed barrier and counts the slowest rank's time; "
          "cells are the median over rounds (min–max over rounds) of each run's median time.")
    if loads:
        print(f"1-min load average at run starts: median {statistics.median(loads):.2f}, "
              f"min {min(loads):.2f}, max {max(loads):.2f} ({os.cpu_count()} cores here).")
    if not any(k[2] == "pccl" for k in runs):
        print("pccl was not measured in this run (no pccl_coll_bench: see the script's output).")
    for (coll, n, system), reason in sorted(unsupported.items()):
        print(f"Unsupported: {system} {coll} at N = {n}: {reason}")
    for coll in [c for c in colls if c != "barrier"]:
        print()
        print(f"### {coll}: bus bandwidth (factor {FACTORS[coll]})")
        print()
        print("| N | size | pccl busbw | tuned busbw | Open MPI busbw | Gloo busbw | pccl/OMPI | "
              "tuned/OMPI | tuned/pccl | pccl/Gloo | pccl tx/size | pccl copied/size |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|")
        for n in ns:
            sizes = sorted({sz for s in SYSTEMS + ["tuned"]
                            for sz in runs.get((coll, n, s), {})})
            for sz in sizes:
                p, o, g = (busbw(coll, n, s, sz) for s in SYSTEMS)
                t = busbw(coll, n, "tuned", sz)
                print(f"| {n} | {fmt_size(sz)} | {cell(p, why=why(coll, n, 'pccl'))} | "
                      f"{cell(t)} | {cell(o, why=why(coll, n, 'ompi'))} | "
                      f"{cell(g, why=why(coll, n, 'gloo'))} | {rcell(ratio(p, o))} | "
                      f"{rcell(ratio(t, o))} | {rcell(ratio(t, p))} | "
                      f"{rcell(ratio(p, g))} | {per_size(coll, n, 'pccl', sz, 2)} | "
                      f"{per_size(coll, n, 'pccl', sz, 3)} |")
    print()
    print(f"### Targets: busbw ≥ {OMPI_TARGET}× Open MPI TCP and ≥ Gloo at 64 and 256 MiB")
    print()
    print(f"| collective | N | size | pccl/OMPI busbw (≥ {OMPI_TARGET}×) | "
          f"pccl/Gloo busbw (≥ {GLOO_TARGET:g}×) |")
    print("|---|---|---|---|---|")
    shown = 0
    for coll in [c for c in colls if c != "barrier"]:
        for n in ns:
            for sz in TARGET_SIZES:
                p, o, g = (busbw(coll, n, s, sz) for s in SYSTEMS)
                if p is None and o is None and g is None:
                    continue
                shown += 1
                gc = "n/a (Gloo unsupported)" if why(coll, n, "gloo") else \
                    rcell(ratio(p, g), GLOO_TARGET)
                print(f"| {coll} | {n} | {fmt_size(sz)} | {rcell(ratio(p, o), OMPI_TARGET)} | "
                      f"{gc} |")
    if not shown:
        print("| – | – | 64/256 MiB not measured in this run | | |")
    print()
    print(f"### {fmt_size(LATENCY_SIZE)} latency and barrier (median time per operation, µs; "
          f"target ≤ {LATENCY_TARGET}× Open MPI)")
    print()
    print("| collective | N | pccl | tuned | Open MPI | Gloo | pccl/OMPI | tuned/OMPI | "
          "pccl/Gloo |")
    print("|---|---|---|---|---|---|---|---|---|")
    for coll in colls:
        sz = 0 if coll == "barrier" else LATENCY_SIZE
        for n in ns:
            p, o, g = (latency(coll, n, s, sz) for s in SYSTEMS)
            t = latency(coll, n, "tuned", sz)
            if p is None and o is None and g is None and not why(coll, n, "gloo"):
                continue
            print(f"| {coll} | {n} | {cell(p, 0, why(coll, n, 'pccl'))} | {cell(t, 0)} | "
                  f"{cell(o, 0, why(coll, n, 'ompi'))} | {cell(g, 0, why(coll, n, 'gloo'))} | "
                  f"{rcell(ratio(p, o), LATENCY_TARGET, at_most=True)} | "
                  f"{rcell(ratio(t, o), LATENCY_TARGET, at_most=True)} | "
                  f"{rcell(ratio(p, g))} |")
    if failures:
        print()
        print("Runs that did not finish (no '# done' line): " + ", ".join(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
