#!/usr/bin/env bash
# Topology on shaped links (issue 23, docs/wan.md "Topology on shaped links"):
# 4 peers A, B, C, D (p0 .. p3) on the WAN testbed (scripts/wan-testbed.sh)
# whose ring links A-B, B-C, C-D, D-A are fast (--fast-mbit) and whose
# diagonals A-C, B-D are slow (--slow-mbit), joined with ring keys that make
# the first ring A, C, B, D (two diagonals). bench/wan/pccl_wan_topo.c times
# an all-reduce of --bytes before and after pcclOptimizeTopology and the
# optimization itself (probes, solve, re-wire), checks every result exactly
# and prints the ring order before and after; bench/wan/topo_ring.sh says
# whether the ring installed uses only fast links. Runs as root.
#
#   scripts/bench-wan-topology.sh [--rtts "10 50"] [--fast-mbit 1000]
#       [--slow-mbit 100] [--bytes 64M] [--warmup 1] [--iters 3] [--reps 2]
#       [--offload "1"] [--build DIR] [--out DIR] [--name NAME]
#
# For each RTT (every pair, the master's too) and offload setting (1, the
# default: the delay line passes 64 KiB TCP segments, docs/wan.md; 0: 1500-byte
# packets, which the delay line cannot carry at 4 x 1 Gbit/s here, so the fast
# links are not fast: docs/wan.md "Topology on shaped links") the testbed is
# brought up once and the benchmark runs --reps times. Each run
# records the load average before it and the delay line's drops. The table
# (OUT/summary.md): median all-reduce time before and after (of --iters timed
# after --warmup), their ratio, the optimization's time, the rings, and
# whether the installed ring is the fast one. The script fails when a run
# fails (a wrong result, a failed call) or installs a ring with a slow link,
# never on speed.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

RTTS="10 50"
FAST=1000
SLOW=100
BYTES=64M
WARMUP=1
ITERS=3
REPS=2
OFFLOADS=1
BUILD=build/rel
OUT=
NAME=btopo
while [[ $# -gt 0 ]]; do
  case $1 in
    --rtts) RTTS=$2; shift 2 ;;
    --fast-mbit) FAST=$2; shift 2 ;;
    --slow-mbit) SLOW=$2; shift 2 ;;
    --bytes) BYTES=$2; shift 2 ;;
    --warmup) WARMUP=$2; shift 2 ;;
    --iters) ITERS=$2; shift 2 ;;
    --reps) REPS=$2; shift 2 ;;
    --offload) OFFLOADS=$2; shift 2 ;;
    --build) BUILD=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --name) NAME=$2; shift 2 ;;
    -h|--help) sed -n '2,26p' "$0"; exit 0 ;;
    *) echo "bench-wan-topology: unknown argument $1" >&2; exit 2 ;;
  esac
done
[[ $(id -u) -eq 0 ]] || { echo "bench-wan-topology: needs root (network namespaces)" >&2; exit 2; }
[[ -n "$OUT" ]] || OUT="$BUILD/wan-topology/$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$OUT"
TB=$ROOT/scripts/wan-testbed.sh

echo "== building (Release) in $BUILD"
if [[ ! -f "$BUILD/CMakeCache.txt" ]]; then
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPCCL_BUILD_TESTS=OFF \
    >"$OUT/configure.log" 2>&1 || { cat "$OUT/configure.log"; exit 1; }
fi
cmake --build "$BUILD" -j 2 --target pccl ccoip_master pccl_wan_topo pccl-delayline \
  >"$OUT/build.log" 2>&1 || { tail -n 40 "$OUT/build.log"; exit 1; }

{
  echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD 2>/dev/null || echo ' (+ uncommitted changes)')"
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) cores"
  echo "kernel: $(uname -r); tcp_congestion_control $(sysctl -n net.ipv4.tcp_congestion_control);" \
    "tcp_wmem $(sysctl -n net.ipv4.tcp_wmem | tr '\t' ' ')"
  echo "testbed: 4 peers, ring links ${FAST} Mbit/s, diagonals ${SLOW} Mbit/s; RTT ms: $RTTS;" \
    "offload: $OFFLOADS"
  echo "all-reduce: $BYTES float sum, warmup $WARMUP, timed $ITERS; runs per testbed: $REPS"
} | tee "$OUT/environment.txt"

# The diagonals A-C (p0 p2) and B-D (p1 p3) are slow; every other pair (and the master's
# links) takes the defaults (--rate-mbit FAST). Ring keys 1, 3, 2, 4 for p0 .. p3: the first
# ring is p0, p2, p1, p3 (A, C, B, D).
KEYS=1,3,2,4
load1() { cut -d' ' -f1 /proc/loadavg; }
FAILED=0
ROWS=()
run_one() { # rtt offload rep
  local rtt=$1 off=$2 rep=$3 f="$OUT/rtt$1_off$2_rep$3.txt" rc=0 d0 d1 load t0
  load=$(load1)
  d0=$("$TB" status --name "$NAME" | awk '/^total/ { print $7 }')
  t0=$(date +%s)
  PCCL_BENCH_PEER="$BUILD/bench/wan/pccl_wan_topo" PCCL_BENCH_BUDGET=600 \
    PCCL_BENCH_LOGS="$OUT/logs_rtt${rtt}_off${off}_rep${rep}" PCCL_LOG_LEVEL=DEBUG \
    bench/wan/wan_launch.sh "$NAME" "$BUILD" 4 --keys "$KEYS" --bytes "$BYTES" \
    --warmup "$WARMUP" --iters "$ITERS" --timeout-ms 120000 >"$f" 2>"$f.err" || rc=$?
  d1=$("$TB" status --name "$NAME" | awk '/^total/ { print $7 }')
  grep -q '^# done, results verified exactly' "$f" || rc=1
  local before after opt rb ra fast ratio
  before=$(awk '$1 == "before_us" { print $2 }' "$f")
  after=$(awk '$1 == "after_us" { print $2 }' "$f")
  opt=$(awk '$1 == "optimize_us" { print $2 }' "$f")
  rb=$(sed -n 's/^ring_before //p' "$f")
  ra=$(sed -n 's/^ring_after //p' "$f")
  fast="n/a"
  if [[ -n $ra ]]; then
    # shellcheck disable=SC2086 # the ring's indices are words
    fast=$(bench/wan/topo_ring.sh $ra) || rc=1
  fi
  ratio=n/a
  [[ -n $before && -n $after ]] && ratio=$(awk -v b="$before" -v a="$after" 'BEGIN { printf "%.1f", b / a }')
  local ms='function ms(u) { return u == "" ? "n/a" : sprintf("%.0f", u / 1000) }'
  ROWS+=("$(awk -v r="$rtt" -v o="$off" -v k="$rep" -v b="$before" -v a="$after" -v x="$ratio" \
    -v p="$opt" -v rb="$rb" -v ra="$ra" -v fa="$fast" -v l="$load" -v dr="$((d1 - d0))" \
    "$ms"' BEGIN { printf "| %s | %s | %s | %s | %s | %s× | %s | %s | %s | %s | %s | %s |", r,
      o ? "yes" : "no", k, ms(b), ms(a), x, ms(p), rb, ra, fa, l, dr }')")
  printf '   RTT=%-3s offload=%s rep=%s %4ss  load %s  before %s us  after %s us  (%s×)  optimize %s us  ring %s -> %s (%s)%s\n' \
    "$rtt" "$off" "$rep" "$(($(date +%s) - t0))" "$load" "${before:-n/a}" "${after:-n/a}" "$ratio" \
    "${opt:-n/a}" "$rb" "$ra" "$fast" "$([[ $rc -ne 0 ]] && echo "  FAILED (rc $rc, see $f.err)")"
  if [[ $rc -ne 0 ]]; then
    FAILED=1
    tail -n 5 "$f.err" | sed 's/^/     /'
  fi
  return 0
}

trap '"$TB" down --name "$NAME" >/dev/null 2>&1 || true' EXIT
echo "== running"
for off in $OFFLOADS; do
  for rtt in $RTTS; do
    printf 'p0 p2 %s %s\np1 p3 %s %s\n' "$rtt" "$SLOW" "$rtt" "$SLOW" >"$OUT/matrix_rtt$rtt.txt"
    args=(--peers 4 --rtt-ms "$rtt" --rate-mbit "$FAST" --matrix "$OUT/matrix_rtt$rtt.txt"
      --name "$NAME" --build "$BUILD")
    [[ $off -eq 1 ]] && args+=(--offload)
    "$TB" up "${args[@]}" >"$OUT/testbed_rtt${rtt}_off$off.log"
    for rep in $(seq 1 "$REPS"); do run_one "$rtt" "$off" "$rep"; done
    "$TB" down --name "$NAME" >>"$OUT/testbed_rtt${rtt}_off$off.log"
  done
done

{
  echo "| RTT ms | offload | run | before ms | after ms | before / after | optimize ms | ring before | ring after | installed | load | drops |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
  printf '%s\n' "${ROWS[@]}"
} >"$OUT/summary.md"
echo
echo "== results ($OUT/summary.md)"
cat "$OUT/environment.txt" "$OUT/summary.md"
exit "$FAILED"
