#!/usr/bin/env bash
# Benchmark of the collectives beyond all-reduce (broadcast, reduce, all-gather,
# reduce-scatter, all-to-all, gather, scatter, barrier) and of send/recv (a
# ring shift: sendrecv) of pccl beside Open MPI
# and Gloo, in the same run on the same machine (docs/benchmarks.md,
# "Collectives beyond all-reduce").
#
#   scripts/bench-collectives.sh [--quick] [--rounds R] [--ns "2 3 4"] [--min B] [--max B]
#                                [--colls "broadcast reduce ..."] [--systems "pccl ompi gloo"]
#                                [--build DIR] [--out DIR] [--load-max L] [--load-wait S]
#                                [--load-wait-total S] [--iter-bytes B] [--budget S] [--jobs J]
#                                [--tune-iters K]
#
# Builds (Release, its own build dir) libpccl, ccoip_master and pccl_coll_bench
# (CMake), and the Open MPI reference
# with mpicc; then for each N runs R rounds in which, for each collective,
# pccl (bench/collectives/launch.sh), Open MPI (mpirun, TCP btl over lo) and
# Gloo (torch.distributed through /usr/bin/python3, GLOO_SOCKET_IFNAME=lo) each
# sweep the sizes once, in an order that rotates every round. Before each round
# it waits (at most --load-wait seconds per round, --load-wait-total in all)
# for the 1-min load average to drop below --load-max; it records the load at
# the start of every run. Finally bench/collectives/summarize.py prints
# Markdown tables: medians over rounds with min–max spreads, ratios and the
# targets (busbw >= 1.2x Open MPI and >= Gloo at 64/256 MiB; 4 KiB latency
# <= 2.5x Open MPI). Raw outputs stay in --out (default:
# BUILD/collectives-results/<UTC time>).
#
# It never fails on speed (the machine is shared and noisy). It fails when a
# run fails or a result is wrong (every benchmark checks its results exactly).
# --iter-bytes B: timed iterations per size = clamp(B / size, 5, 200)
# (default 1G). --budget S: each run's time bound (default 600 s). --jobs J:
# build parallelism (default 2). --systems: a subset to run ("tuned": pccl with
# the table pccl-tune --local N --kinds <the collectives> measured for this N in
# this run, before its rounds: OUT/table_N<n>.txt, per block up to min(--max,
# 16 MiB), --tune-iters timed runs per size and algorithm, default 5;
# installed with pccl_coll_bench --table). --quick:
# sizes 4 KiB, 64 KiB, 1 MiB, 16 MiB (--max lowers the top), fewer
# iterations and one round.
set -euo pipefail
cd "$(dirname "$0")/.."

QUICK=0
ROUNDS=5
NS="2 3 4"
MIN=4K
MAX=256M
MAX_SET=
STEP=4
COLLS="broadcast reduce allgather reducescatter alltoall gather scatter sendrecv barrier"
WANT_SYSTEMS="pccl tuned ompi gloo"
TUNE_ITERS=5
BUILD=build/bench-collectives
OUT=
LOAD_MAX=1.5
LOAD_WAIT=60
LOAD_WAIT_TOTAL=600
ITER_BYTES=1G
BUDGET=600
JOBS=2
while [[ $# -gt 0 ]]; do
  case $1 in
    --quick) QUICK=1; shift ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --ns) NS=$2; shift 2 ;;
    --min) MIN=$2; shift 2 ;;
    --max) MAX=$2; MAX_SET=1; shift 2 ;;
    --colls) COLLS=$2; shift 2 ;;
    --systems) WANT_SYSTEMS=$2; shift 2 ;;
    --build) BUILD=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --load-max) LOAD_MAX=$2; shift 2 ;;
    --load-wait) LOAD_WAIT=$2; shift 2 ;;
    --load-wait-total) LOAD_WAIT_TOTAL=$2; shift 2 ;;
    --iter-bytes) ITER_BYTES=$2; shift 2 ;;
    --budget) BUDGET=$2; shift 2 ;;
    --jobs) JOBS=$2; shift 2 ;;
    --tune-iters) TUNE_ITERS=$2; shift 2 ;;
    -h|--help) sed -n '2,33p' "$0"; exit 0 ;;
    *) echo "bench-collectives: unknown argument $1" >&2; exit 2 ;;
  esac
done
ITER_ARGS=(--warmup 2 --iters-min 5 --iters-max 200 --iter-bytes "$ITER_BYTES")
if [[ $QUICK -eq 1 ]]; then
  ROUNDS=1
  MIN=4K
  [[ -n "$MAX_SET" ]] || MAX=16M
  STEP=16
  LOAD_WAIT=5
  LOAD_WAIT_TOTAL=5
  ITER_ARGS=(--warmup 1 --iters-min 3 --iters-max 20 --iter-bytes 64M)
fi
SIZE_ARGS=(--min "$MIN" --max "$MAX" --step "$STEP")
[[ -n "$OUT" ]] || OUT="$BUILD/collectives-results/$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$OUT"
wants() { [[ " $WANT_SYSTEMS " == *" $1 "* ]]; }

# ---- build ----------------------------------------------------------------
HAVE_PCCL=0
if wants pccl; then
  echo "== building (Release) in $BUILD"
  if [[ ! -f "$BUILD/CMakeCache.txt" ]]; then
    cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPCCL_BUILD_TESTS=OFF \
      >"$OUT/configure.log" 2>&1 || { cat "$OUT/configure.log"; exit 1; }
  fi
  cmake --build "$BUILD" -j "$JOBS" --target pccl ccoip_master pccl_coll_bench pccl-tune \
    >"$OUT/build.log" 2>&1 || { tail -n 40 "$OUT/build.log"; exit 1; }
  HAVE_PCCL=1
fi
HAVE_MPI=0
if wants ompi; then
  if command -v mpicc >/dev/null && command -v mpirun >/dev/null; then
    mkdir -p "$BUILD/mpi"
    mpicc -std=c11 -O2 -Wall -Wextra bench/collectives/mpi_coll_bench.c \
      -o "$BUILD/mpi/mpi_coll_bench"
    HAVE_MPI=1
  else
    echo "bench-collectives: mpicc/mpirun not found (apt-get install openmpi-bin" \
      "libopenmpi-dev): Open MPI columns will be n/a"
  fi
fi
HAVE_GLOO=0
if wants gloo; then
  if /usr/bin/python3 -c 'import torch.distributed as d; assert d.is_available()' 2>/dev/null; then
    HAVE_GLOO=1
  else
    echo "bench-collectives: /usr/bin/python3 has no torch.distributed (apt-get install" \
      "python3-torch): Gloo columns will be n/a"
  fi
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
  echo "sizes: $MIN..$MAX step x$STEP; rounds: $ROUNDS; N: $NS; collectives: $COLLS"
  echo "iterations: ${ITER_ARGS[*]}; run budget: ${BUDGET}s"
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
run_one() { # system coll n round
  local sys=$1 coll=$2 n=$3 r=$4 f="$OUT/N$3_$2_$1_r$4.txt" rc=0 t0
  echo "# load $(load1)" >"$f"
  t0=$(date +%s)
  case $sys in
    pccl)
      PCCL_BENCH_BUDGET=$BUDGET bench/collectives/launch.sh "$BUILD" "$n" --coll "$coll" \
        "${SIZE_ARGS[@]}" "${ITER_ARGS[@]}" >>"$f" 2>"$f.err" || rc=$? ;;
    tuned)
      PCCL_BENCH_BUDGET=$BUDGET bench/collectives/launch.sh "$BUILD" "$n" --coll "$coll" \
        "${SIZE_ARGS[@]}" "${ITER_ARGS[@]}" --table "$OUT/table_N$n.txt" >>"$f" 2>"$f.err" ||
        rc=$? ;;
    ompi)
      timeout -k 5 "$BUDGET" mpirun --allow-run-as-root --oversubscribe -np "$n" \
        --mca btl self,tcp --mca btl_tcp_if_include lo "$BUILD/mpi/mpi_coll_bench" \
        --coll "$coll" "${SIZE_ARGS[@]}" "${ITER_ARGS[@]}" >>"$f" 2>"$f.err" || rc=$? ;;
    gloo)
      /usr/bin/python3 bench/collectives/gloo_coll_bench.py --world "$n" --coll "$coll" \
        "${SIZE_ARGS[@]}" "${ITER_ARGS[@]}" --timeout "$BUDGET" >>"$f" 2>"$f.err" || rc=$? ;;
  esac
  local big note=
  big=$(awk '!/^#/ && NF >= 9 { b = ($1 == 0 ? $4 " us" : $8) } END { print b }' "$f")
  grep -q '^# unsupported' "$f" && note="  (unsupported)"
  [[ $rc -ne 0 ]] && note="  FAILED (rc $rc, see $f.err)"
  printf '   N=%s round %s %-13s %-5s %4ss  load %s  largest-size busbw %s%s\n' "$n" "$r" \
    "$coll" "$sys" "$(($(date +%s) - t0))" "$(sed -n 's/^# load //p' "$f")" "${big:-n/a}" \
    "$note"
  if [[ $rc -ne 0 ]]; then
    FAILED=1
    tail -n 5 "$f.err" | sed 's/^/     /'
  fi
  return 0
}

SYSTEMS=()
[[ $HAVE_PCCL -eq 1 ]] && SYSTEMS+=(pccl)
[[ $HAVE_PCCL -eq 1 ]] && wants tuned && SYSTEMS+=(tuned)
[[ $HAVE_MPI -eq 1 ]] && SYSTEMS+=(ompi)
[[ $HAVE_GLOO -eq 1 ]] && SYSTEMS+=(gloo)
K=${#SYSTEMS[@]}
[[ $K -gt 0 ]] || { echo "bench-collectives: no system to run" >&2; exit 1; }
echo "== running: systems ${SYSTEMS[*]}, interleaved per collective, rotating order"
# The tuner's kinds for the collectives of this run (sendrecv has nothing to choose).
tune_kinds() {
  local k out=
  for c in $COLLS; do
    case $c in
      allgather) k=all_gather ;; reducescatter) k=reduce_scatter ;; alltoall) k=all_to_all ;;
      sendrecv) continue ;; *) k=$c ;;
    esac
    out="${out:+$out,}$k"
  done
  echo "$out"
}
bytes_of() { numfmt --from=iec "$1"; }
for n in $NS; do
  if [[ " ${SYSTEMS[*]} " == *" tuned "* ]]; then
    kinds=$(tune_kinds)
    tmax=$(bytes_of "$MAX")
    [[ $tmax -le 16777216 ]] || tmax=16777216
    t0=$(date +%s)
    if [[ -n $kinds ]] && timeout -k 5 "$BUDGET" "$BUILD/master/pccl-tune" --local "$n" \
        --kinds "$kinds" --min "$(bytes_of "$MIN")" --max "$tmax" --iters "$TUNE_ITERS" \
        --out "$OUT/table_N$n.txt" >"$OUT/tune_N$n.log" 2>&1; then
      printf '   N=%s tune %4ss  load %s  (%s)\n' "$n" "$(($(date +%s) - t0))" "$(load1)" \
        "$OUT/table_N$n.txt"
    else
      echo "   N=$n tune FAILED (see $OUT/tune_N$n.log)"
      tail -n 5 "$OUT/tune_N$n.log" | sed 's/^/     /'
      FAILED=1
    fi
  fi
  for r in $(seq 1 "$ROUNDS"); do
    wait_quiet
    for coll in $COLLS; do
      for i in $(seq 0 $((K - 1))); do
        # Rotate the order every round, and reverse it every other round, so no
        # system always runs first, or always right after the same one.
        j=$(((i + r - 1) % K))
        [[ $((r % 2)) -eq 0 ]] && j=$(((K - 1 - i + r) % K))
        run_one "${SYSTEMS[$j]}" "$coll" "$n" "$r"
      done
    done
  done
done

echo
echo "== results ($OUT)"
echo
S=0
python3 bench/collectives/summarize.py "$OUT" | tee "$OUT/summary.md" || S=1
if [[ $FAILED -ne 0 || $S -ne 0 ]]; then
  echo "bench-collectives: some runs failed (see above)" >&2
  exit 1
fi
