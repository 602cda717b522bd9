#!/usr/bin/env python3
"""Summarizes the raw runs of scripts/bench-allreduce.sh into Markdown tables.

    summarize.py RAW_DIR

RAW_DIR holds one file per run, named N<n>_<system>_r<round>.txt, where
<system> is pccl (the fixed rule), tuned (pccl with the run's tuned table),
ompi, gloo, pccl-<quant> or algo-<name> (pccl forcing one algorithm); each
holds the rows the benchmarks print (size count iters time_us min_us max_us
algbw busbw tx_bytes, pccl adds copied_bytes and the algorithm it ran) and
'#' comment lines; a line '# load <1-min loadavg>' records the load when the
run started. For every (N, size, system) the per-run medians are combined: the
table shows the median over rounds and the spread (min..max) over rounds.
Ratios are ratios of those medians. Standard library only.
"""
import os
import re
import statistics
import sys

SYSTEMS = ["pccl", "ompi", "gloo"]
TARGET_SIZES = [64 << 20, 256 << 20]
# pcclAlgorithm_t's names, in its order; forced runs are the systems algo-<name>.
ALGOS = ["relay", "direct", "ring", "ring_striped", "halving_doubling"]
# Issue 22's targets for tuned pccl: busbw >= 1.0x Open MPI at 64 KiB .. 256 MiB, >= 1.5x at
# TARGET_SIZES; time <= 1.5x Open MPI's at LATENCY_SIZES; within 5 % of the best single algorithm.
TUNED_MIN_SIZE = 64 << 10
LATENCY_SIZES = [4 << 10, 16 << 10]


def fmt_size(b):
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= div and b % div == 0:
            return f"{b // div} {unit}"
    return f"{b} B"


def load_runs(raw):
    """Returns runs[(n, system)][size] = list of (busbw, time_us, tx_bytes, copied_bytes),
    loads, failures, algos[(n, system)][size] = list of the algorithm names the rows give
    (copied_bytes None where the row has no 10th column; no name where it has no 11th)."""
    runs, loads, failures, algos = {}, [], [], {}
    name_re = re.compile(r"^N(\d+)_([a-z0-9_-]+)_r(\d+)\.txt$")
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
                if len(parts) >= 11:
                    algos.setdefault((n, system), {}).setdefault(size, []).append(parts[10])
        if not done:
            failures.append(fn)
    return runs, loads, failures, algos


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


def choice(algos, n, system, size):
    """The algorithm name the rows of (n, system) give at size (the commonest; '?': none)."""
    names = algos.get((n, system), {}).get(size)
    if not names:
        return "?"
    return max(sorted(set(names)), key=names.count)


def best_single(n, size, busbw):
    """(name, busbw stat) of the forced algorithm with the highest median busbw at size."""
    best = None
    for a in ALGOS:
        b = busbw(n, "algo-" + a, size)
        if b is not None and (best is None or b[0] > best[1][0]):
            best = (a, b)
    return best


def tuned_sections(ns, runs, algos, busbw, latency):
    """The tables of tuned pccl (issue 22): beside fixed pccl, Open MPI and Gloo, the forced
    algorithms, and the issue's targets met or missed."""
    forced = [a for a in ALGOS if any((n, "algo-" + a) in runs for n in ns)]
    print()
    print("### Tuned pccl (issue 22): the table of pccl-tune beside the fixed rule")
    print()
    print("fixed = pccl without a table (the built-in rule); tuned = pccl with the table "
          "pccl-tune measured for this N in this run (pcclTuneLoad); choice = the algorithm "
          "the op ran (pcclGetAlgorithm). Target: tuned/OMPI ≥ 1.0× at 64 KiB..256 MiB.")
    print()
    print("| N | size | fixed busbw | tuned busbw | Open MPI busbw | Gloo busbw | tuned/OMPI | "
          "tuned/fixed | tuned/Gloo | rule's choice | table's choice |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for n in ns:
        sizes = sorted({sz for s in SYSTEMS + ["tuned"] for sz in runs.get((n, s), {})})
        for sz in sizes:
            f, t, o, g = (busbw(n, s, sz) for s in ("pccl", "tuned", "ompi", "gloo"))
            target = 1.0 if sz >= TUNED_MIN_SIZE else None
            print(f"| {n} | {fmt_size(sz)} | {cell(f)} | {cell(t)} | {cell(o)} | {cell(g)} | "
                  f"{rcell(ratio(t, o), target)} | {rcell(ratio(t, f))} | {rcell(ratio(t, g))} | "
                  f"{choice(algos, n, 'pccl', sz)} | {choice(algos, n, 'tuned', sz)} |")
    if forced:
        print()
        print("### Forced algorithms (busbw, GB/s) and tuned pccl against the best of them")
        print()
        print("Each algorithm forced on every op (pcclCollectiveOptions_t.algorithm); '–': it "
              "cannot run that size. Target: tuned ≥ 0.95× the best single algorithm.")
        print()
        print("| N | size | " + " | ".join(forced) + " | best single | tuned | tuned/best |")
        print("|---|---|" + "---|" * len(forced) + "---|---|---|")
        for n in ns:
            sizes = sorted({sz for a in forced for sz in runs.get((n, "algo-" + a), {})})
            for sz in sizes:
                cells = []
                for a in forced:
                    b = busbw(n, "algo-" + a, sz)
                    cells.append("–" if b is None else f"{b[0]:.3f}")
                best = best_single(n, sz, busbw)
                t = busbw(n, "tuned", sz)
                bc = "n/a" if best is None else f"{best[0]} {best[1][0]:.3f}"
                tc = "n/a" if t is None else f"{t[0]:.3f} ({choice(algos, n, 'tuned', sz)})"
                r = None if best is None else ratio(t, best[1])
                print(f"| {n} | {fmt_size(sz)} | " + " | ".join(cells) +
                      f" | {bc} | {tc} | {rcell(r, 0.95)} |")
    print()
    print("### Issue 22 targets (tuned pccl)")
    print()
    print("| N | busbw ≥ 1.0× OMPI, 64 KiB..256 MiB | ≥ 1.5× OMPI at 64 MiB | ≥ 1.5× OMPI at "
          "256 MiB | 4 KiB time ≤ 1.5× OMPI | 16 KiB time ≤ 1.5× OMPI | tuned ≥ 0.95× best "
          "single |")
    print("|---|---|---|---|---|---|---|")

    def verdict(pairs, ok):
        """pairs: (size, ratio or None); 'met (...)' / 'MISSED at ...' / 'n/a'."""
        have = [(sz, r) for sz, r in pairs if r is not None]
        if not have:
            return "n/a"
        bad = [(sz, r) for sz, r in have if not ok(r)]
        if not bad:
            lo = min(have, key=lambda p: p[1])
            return f"met ({len(have)}/{len(have)}, lowest {lo[1]:.2f}× at {fmt_size(lo[0])})"
        return (f"MISSED at {len(bad)}/{len(have)}: " +
                ", ".join(f"{fmt_size(sz)} {r:.2f}×" for sz, r in bad))

    for n in ns:
        sizes = sorted(runs.get((n, "tuned"), {}))
        bw = verdict([(sz, ratio(busbw(n, "tuned", sz), busbw(n, "ompi", sz)))
                      for sz in sizes if sz >= TUNED_MIN_SIZE], lambda r: r >= 1.0)
        big = []
        for sz in TARGET_SIZES:
            r = ratio(busbw(n, "tuned", sz), busbw(n, "ompi", sz))
            big.append("n/a" if r is None else rcell(r, 1.5).replace("ok", "met")
                       .replace("MISS", "MISSED"))
        lat = []
        for sz in LATENCY_SIZES:
            r = ratio(latency(n, "tuned", sz), latency(n, "ompi", sz))
            lat.append("n/a" if r is None else f"{r:.2f}× " + ("met" if r <= 1.5 else "MISSED"))
        best = []
        for sz in sizes:
            b = best_single(n, sz, busbw)
            best.append((sz, None if b is None else ratio(busbw(n, "tuned", sz), b[1])))
        bs = verdict(best, lambda r: r >= 0.95)
        print(f"| {n} | {bw} | {big[0]} | {big[1]} | {lat[0]} | {lat[1]} | {bs} |")


def main():
    raw = sys.argv[1]
    runs, loads, failures, algos = load_runs(raw)
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
    if any(s == "tuned" or s.startswith("algo-") for (_n, s) in runs):
        tuned_sections(ns, runs, algos, busbw, latency)
    if failures:
        print()
        print("Runs that did not finish (no '# done' line): " + ", ".join(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
