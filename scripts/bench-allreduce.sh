#!/usr/bin/env bash
# All-reduce benchmark of pccl beside Open MPI and Gloo, in the same run on
# the same machine (issue 7; docs/benchmarks.md).
#
#   scripts/bench-allreduce.sh [--quick] [--rounds R] [--ns "2 3 4"] [--min B] [--max B]
#                              [--quant "minmax-u8 ..."] [--build DIR] [--out DIR]
#                              [--load-max L] [--load-wait S] [--load-wait-total S]
#                              [--iter-bytes B] [--no-tune] [--tune-iters K]
#                              [--algos "relay direct ring ring_striped halving_doubling"]
#
# Builds (Release, its own build dir) libpccl, ccoip_master and
# pccl_allreduce_bench, and the Open MPI reference with mpicc; then for each N
# runs R rounds in which pccl, Open MPI (mpirun, TCP btl over lo) and Gloo
# (torch.distributed through /usr/bin/python3, GLOO_SOCKET_IFNAME=lo) and the
# quantized pccl variants each sweep the sizes once, in an order that rotates
# every round. Before each round it waits (at most --load-wait seconds per
# round, --load-wait-total in all) for the 1-min load average to drop below
# --load-max; it records the load at the start of every run. Finally it prints
# Markdown tables: medians over rounds with min–max spreads, ratios and issue
# 7's targets.
# Tuned pccl (issue 22): for each N, before its rounds, pccl-tune --local N
# tunes the algorithm table over the run's sizes (--tune-iters timed runs per
# size and algorithm, default 7) into OUT/table_N<n>.txt; the system "tuned"
# is pccl with that table installed (pcclTuneLoad), beside "pccl", the fixed
# rule. --algos: pccl forcing each algorithm ("" for none), at the sizes it
# can run, for the best single algorithm. The summary adds their tables and
# issue 22's targets; /usr/bin/python3 with matplotlib draws busbw against
# size (OUT/allreduce_busbw.png and .svg; skipped, with a hint, without it).
# --no-tune: neither tuned nor forced runs.
# Raw outputs stay in --out (default: BUILD/allreduce-results/<UTC time>).
#
# It never fails on speed (the machine is shared and noisy). It fails when a
# run fails or a result is wrong (every benchmark checks its sums exactly).
# --iter-bytes B: timed iterations per size = clamp(B / size, 5, 200)
# (default 1G). --quick: fewer sizes (4 KiB, 64 KiB, 1 MiB, 16 MiB), fewer
# iterations and one round, for a smoke check in under two minutes.
set -euo pipefail
cd "$(dirname "$0")/.."

QUICK=0
ROUNDS=5
NS="2 3 4"
MIN=4K
MAX=256M
STEP=4
QUANTS="minmax-u8"
BUILD=build/bench-allreduce
OUT=
LOAD_MAX=1.5
LOAD_WAIT=60
LOAD_WAIT_TOTAL=600
ITER_BYTES=1G
TUNE=1
TUNE_ITERS=7
ALGOS="relay direct ring ring_striped halving_doubling"
while [[ $# -gt 0 ]]; do
  case $1 in
    --quick) QUICK=1; shift ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --ns) NS=$2; shift 2 ;;
    --min) MIN=$2; shift 2 ;;
    --max) MAX=$2; shift 2 ;;
    --quant) QUANTS=$2; shift 2 ;;
    --build) BUILD=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --load-max) LOAD_MAX=$2; shift 2 ;;
    --load-wait) LOAD_WAIT=$2; shift 2 ;;
    --load-wait-total) LOAD_WAIT_TOTAL=$2; shift 2 ;;
    --iter-bytes) ITER_BYTES=$2; shift 2 ;;
    --no-tune) TUNE=0; shift ;;
    --tune-iters) TUNE_ITERS=$2; shift 2 ;;
    --algos) ALGOS=$2; shift 2 ;;
    -h|--help) sed -n '2,38p' "$0"; exit 0 ;;
    *) echo "bench-allreduce: unknown argument $1" >&2; exit 2 ;;
  esac
done
ITER_ARGS=(--warmup 2 --iters-min 5 --iters-max 200 --iter-bytes "$ITER_BYTES")
if [[ $QUICK -eq 1 ]]; then
  ROUNDS=1
  MIN=4K
  MAX=16M
  STEP=16
  LOAD_WAIT=5
  LOAD_WAIT_TOTAL=5
  ITER_ARGS=(--warmup 1 --iters-min 3 --iters-max 20 --iter-bytes 64M)
  TUNE_ITERS=3
fi
[[ $TUNE -eq 1 ]] || ALGOS=""
SIZE_ARGS=(--min "$MIN" --max "$MAX" --step "$STEP")
[[ -n "$OUT" ]] || OUT="$BUILD/allreduce-results/$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$OUT"

# ---- build ----------------------------------------------------------------
echo "== building (Release) in $BUILD"
if [[ ! -f "$BUILD/CMakeCache.txt" ]]; then
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPCCL_BUILD_TESTS=OFF \
    >"$OUT/configure.log" 2>&1 || { cat "$OUT/configure.log"; exit 1; }
fi
cmake --build "$BUILD" -j 2 --target pccl ccoip_master pccl_allreduce_bench pccl-tune \
  >"$OUT/build.log" 2>&1 ||
  { tail -n 40 "$OUT/build.log"; exit 1; }

HAVE_MPI=0
if command -v mpicc >/dev/null && command -v mpirun >/dev/null; then
  mkdir -p "$BUILD/mpi"
  mpicc -std=c11 -O2 -Wall -Wextra bench/allreduce/mpi_allreduce_bench.c \
    -o "$BUILD/mpi/mpi_allreduce_bench"
  HAVE_MPI=1
else
  echo "bench-allreduce: mpicc/mpirun not found (apt-get install openmpi-bin libopenmpi-dev):" \
    "Open MPI columns will be n/a"
fi
HAVE_GLOO=0
if /usr/bin/python3 -c 'import torch.distributed as d; assert d.is_available()' 2>/dev/null; then
  HAVE_GLOO=1
else
  echo "bench-allreduce: /usr/bin/python3 has no torch.distributed (apt-get install" \
    "python3-torch): Gloo columns will be n/a"
fi

# ---- environment record ---------------------------------------------------
{
  echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)" \
    "($(git status --porcelain -- include core transport bindings/libpccl master 2>/dev/null |
      wc -l) uncommitted changes in the library's sources)"
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) cores"
  echo "kernel: $(uname -r)"
  [[ $HAVE_MPI -eq 1 ]] && echo "open mpi: $(mpirun --version 2>/dev/null | head -n1)"
  [[ $HAVE_GLOO -eq 1 ]] && echo "torch: $(/usr/bin/python3 -c 'import torch; print(torch.__version__)')"
  echo "sizes: $MIN..$MAX step x$STEP; rounds: $ROUNDS; N: $NS; quantized: ${QUANTS:-none}"
  echo "iterations: ${ITER_ARGS[*]}"
  if [[ $TUNE -eq 1 ]]; then
    echo "tuned: pccl-tune --local N over $MIN..$MAX, --iters $TUNE_ITERS;" \
      "forced algorithms: ${ALGOS:-none}"
  fi
} | tee "$OUT/environment.txt"

# ---- runs ---------------------------------------------------------------------
load1() { cut -d' ' -f1 /proc/loadavg; }
WAITED_TOTAL=0
wait_quiet() {
  local waited=0
  while awk -v l="$(load1)" -v m="$LOAD_MAX" 'BEGIN { exit !(l >= m) }'; do
    [[ $waited -ge $LOAD_WAIT || $WAITED_TOTAL -ge $LOAD_WAIT_TOTAL ]] && break
    sleep 5
    waited=$((waited + 5))
    WAITED_TOTAL=$((WAITED_TOTAL + 5))
  done
  if [[ $waited -gt 0 ]]; then
    echo "   (waited ${waited}s for load < $LOAD_MAX; now $(load1); ${WAITED_TOTAL}s in all)"
  fi
  return 0
}

FAILED=0
run_one() { # system n round
  local sys=$1 n=$2 r=$3 f="$OUT/N$2_$1_r$3.txt" rc=0 t0
  echo "# load $(load1)" >"$f"
  t0=$(date +%s)
  case $sys in
    pccl)
      PCCL_BENCH_BUDGET=900 bench/allreduce/pccl_launch.sh "$BUILD" "$n" "${SIZE_ARGS[@]}" \
        "${ITER_ARGS[@]}" >>"$f" 2>"$f.err" || rc=$? ;;
    tuned)
      PCCL_BENCH_BUDGET=900 bench/allreduce/pccl_launch.sh "$BUILD" "$n" "${SIZE_ARGS[@]}" \
        "${ITER_ARGS[@]}" --table "$(realpath "$OUT/table_N$n.txt")" >>"$f" 2>"$f.err" ||
        rc=$? ;;
    algo-*)
      PCCL_BENCH_BUDGET=900 bench/allreduce/pccl_launch.sh "$BUILD" "$n" "${SIZE_ARGS[@]}" \
        "${ITER_ARGS[@]}" --algorithm "${sys#algo-}" >>"$f" 2>"$f.err" || rc=$? ;;
    pccl-*)
      PCCL_BENCH_BUDGET=900 bench/allreduce/pccl_launch.sh "$BUILD" "$n" "${SIZE_ARGS[@]}" \
        "${ITER_ARGS[@]}" --quant "${sys#pccl-}" >>"$f" 2>"$f.err" || rc=$? ;;
    ompi)
      timeout -k 5 900 mpirun --allow-run-as-root --oversubscribe -np "$n" --mca btl self,tcp \
        --mca btl_tcp_if_include lo "$BUILD/mpi/mpi_allreduce_bench" "${SIZE_ARGS[@]}" \
        "${ITER_ARGS[@]}" >>"$f" 2>"$f.err" || rc=$? ;;
    gloo)
      /usr/bin/python3 bench/allreduce/gloo_allreduce_bench.py --world "$n" "${SIZE_ARGS[@]}" \
        "${ITER_ARGS[@]}" --timeout 900 >>"$f" 2>"$f.err" || rc=$? ;;
  esac
  local big
  big=$(awk '!/^#/ && NF >= 9 { b = $8 } END { print b }' "$f")
  printf '   N=%s round %s %-14s %4ss  load %s  largest-size busbw %s%s\n' "$n" "$r" "$sys" \
    "$(($(date +%s) - t0))" "$(sed -n 's/^# load //p' "$f")" "${big:-n/a}" \
    "$([[ $rc -ne 0 ]] && echo "  FAILED (rc $rc, see $f.err)")"
  if [[ $rc -ne 0 ]]; then
    FAILED=1
    tail -n 5 "$f.err" | sed 's/^/     /'
  fi
  return 0
}

# Tunes N's table (pccl-tune: a master and N peers of its own) into OUT/table_N<n>.txt.
to_bytes() { # 4K, 16M, 1G, 4096 -> bytes
  local v=$1 m=1
  case $v in
    *[kK]) m=1024 ;;
    *[mM]) m=$((1024 * 1024)) ;;
    *[gG]) m=$((1024 * 1024 * 1024)) ;;
  esac
  [[ $m -gt 1 ]] && v=${v%?}
  echo $((v * m))
}
tune() { # n: 0 when the table was written
  local n=$1 t0 rc=0 log="$OUT/tune_N$1.log"
  echo "# load $(load1)" >"$log"
  t0=$(date +%s)
  timeout -k 5 900 "$BUILD/master/pccl-tune" --local "$n" --out "$OUT/table_N$n.txt" \
    --min "$(to_bytes "$MIN")" --max "$(to_bytes "$MAX")" --iters "$TUNE_ITERS" \
    >>"$log" 2>&1 || rc=$?
  printf '   N=%s tune %4ss  load %s  %s\n' "$n" "$(($(date +%s) - t0))" \
    "$(sed -n 's/^# load //p' "$log")" \
    "$([[ $rc -eq 0 ]] && grep -m1 "^world $n:" "$OUT/table_N$n.txt" ||
      echo "FAILED (rc $rc, see $log)")"
  return "$rc"
}

SYSTEMS=(pccl)
[[ $TUNE -eq 1 ]] && SYSTEMS+=(tuned)
[[ $HAVE_MPI -eq 1 ]] && SYSTEMS+=(ompi)
[[ $HAVE_GLOO -eq 1 ]] && SYSTEMS+=(gloo)
for q in $QUANTS; do SYSTEMS+=("pccl-$q"); done
for a in $ALGOS; do SYSTEMS+=("algo-$a"); done
echo "== running: systems ${SYSTEMS[*]}, interleaved, rotating order"
for n in $NS; do
  RUN=("${SYSTEMS[@]}")
  if [[ $TUNE -eq 1 ]]; then
    wait_quiet
    if ! tune "$n"; then
      FAILED=1
      RUN=()
      for s in "${SYSTEMS[@]}"; do [[ $s == tuned ]] || RUN+=("$s"); done
    fi
  fi
  K=${#RUN[@]}
  for r in $(seq 1 "$ROUNDS"); do
    wait_quiet
    for i in $(seq 0 $((K - 1))); do
      # Rotate the order every round, and reverse it every other round, so no
      # system always runs first, or always right after the same one.
      j=$(((i + r - 1) % K))
      [[ $((r % 2)) -eq 0 ]] && j=$(((K - 1 - i + r) % K))
      run_one "${RUN[$j]}" "$n" "$r"
    done
  done
done

echo
echo "== results ($OUT)"
echo
S=0
python3 bench/allreduce/summarize.py "$OUT" | tee "$OUT/summary.md" || S=1
if [[ -x /usr/bin/python3 ]]; then
  /usr/bin/python3 bench/allreduce/plot.py "$OUT" || S=1
else
  echo "bench-allreduce: no /usr/bin/python3 (apt-get install python3-matplotlib): no plot"
fi
if [[ $FAILED -ne 0 || $S -ne 0 ]]; then
  echo "bench-allreduce: some runs failed (see above)" >&2
  exit 1
fi
