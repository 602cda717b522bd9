#!/usr/bin/env bash
# Authenticated vs plain runs of the pccl all-reduce benchmark, interleaved (issue 19;
# docs/benchmarks.md "Authentication"). Each round runs, for N = 2 and 4, one plain run and one
# authenticated run (PCCL_RUN_TOKEN_FILE set for the master and every peer), alternating which
# goes first, with the same build, sizes 4 KiB .. 256 MiB. Prints, per N and size, the median
# over rounds of each run's busbw (and of the 4 KiB time) and the ratio authenticated / plain.
#
#   auth_ab.sh BUILD_DIR [ROUNDS]     (default 3 rounds)
set -euo pipefail
BUILD=$1
ROUNDS=${2:-3}
HERE=$(cd "$(dirname "$0")" && pwd)
RAW=$(mktemp -d)
trap 'rm -rf "$RAW"' EXIT
TOKEN="$RAW/run.token"
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$TOKEN"
chmod 600 "$TOKEN"
ARGS=(--min 4096 --max 268435456 --step 4 --warmup 2 --iters-min 5 --iters-max 200
      --iter-bytes 512M)
for r in $(seq "$ROUNDS"); do
  for n in 2 4; do
    order=(plain auth)
    if (( r % 2 == 0 )); then order=(auth plain); fi
    for mode in "${order[@]}"; do
      out="$RAW/N${n}_${mode}_r${r}.txt"
      if [[ $mode == auth ]]; then
        PCCL_RUN_TOKEN_FILE="$TOKEN" "$HERE/pccl_launch.sh" "$BUILD" "$n" "${ARGS[@]}" >"$out"
      else
        env -u PCCL_RUN_TOKEN_FILE -u PCCL_RUN_TOKEN "$HERE/pccl_launch.sh" "$BUILD" "$n" \
          "${ARGS[@]}" >"$out"
      fi
      grep -q "results verified exactly" "$out" || { echo "auth_ab: $out failed"; exit 1; }
      echo "auth_ab: round $r N=$n $mode done" >&2
    done
  done
done
python3 - "$RAW" <<'PY'
import glob, os, re, statistics, sys
raw = sys.argv[1]
runs = {}  # (n, mode, size) -> [(busbw, time_us)]
for f in glob.glob(os.path.join(raw, "N*_*_r*.txt")):
    n, mode = re.match(r"N(\d+)_(\w+)_r\d+\.txt", os.path.basename(f)).groups()
    for line in open(f):
        w = line.split()
        if line.startswith("#") or len(w) < 8:
            continue
        runs.setdefault((int(n), mode, int(w[0])), []).append((float(w[7]), float(w[3])))
print("| N | size | plain busbw GB/s (min..max) | authenticated | ratio auth/plain |")
print("|---|---|---|---|---|")
for n in (2, 4):
    for size in (4096, 64 << 20, 256 << 20):
        p, a = runs.get((n, "plain", size)), runs.get((n, "auth", size))
        if not p or not a:
            continue
        k = 1 if size == 4096 else 0  # 4 KiB: time in us (latency), else busbw
        mp, ma = statistics.median(x[k] for x in p), statistics.median(x[k] for x in a)
        unit = " us" if k else ""
        rng = lambda xs: f"{min(x[k] for x in xs):.3g}..{max(x[k] for x in xs):.3g}"
        label = "4 KiB (time)" if k else f"{size >> 20} MiB"
        print(f"| {n} | {label} | {mp:.3g}{unit} ({rng(p)}) | {ma:.3g}{unit} ({rng(a)}) | "
              f"{ma / mp:.3f} |")
PY
