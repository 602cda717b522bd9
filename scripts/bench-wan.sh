#!/usr/bin/env bash
# Bandwidth at distance (issue 23, docs/wan.md): all-reduce of 64 and 256 MiB
# across the WAN testbed (scripts/wan-testbed.sh), N = 2, 3, 4 peers, RTT
# 0 / 20 / 50 / 100 ms, every pair a --rate-mbit link, pccl with connection
# pools 1..16 and concurrent operations, beside Open MPI (TCP btl) and Gloo
# (torch.distributed) in the same run, on the same testbed. Runs as root.
#
#   scripts/bench-wan.sh [--quick] [--ns "2 4 3"] [--rtts "0 20 50 100"]
#                        [--min 64M] [--max 256M] [--rate-mbit 1000]
#                        [--pccl "1:1 2:1 4:1 8:1 4:4 1:1:k"] [--refs "ompi gloo"]
#                        [--warmup 1] [--iters 2] [--no-offload] [--clock epoll|spin]
#                        [--build DIR] [--out DIR] [--name NAME]
#
# --pccl: the pccl systems, POOL:CONCURRENT each (p2p_connection_pool_size,
# at most 8: a larger pool is clamped to 8 by pcclCreateCommunicator; all-reduces
# in flight per operation, bench/wan/pccl_wan_bench.c); a third field "k": with
# PCCL_TCP_SNDBUF=kernel (socket buffers left to autotuning: the before of
# transport/pt_sockbuf.c). --refs:
# the reference systems ("" for none). For each N and RTT the testbed is
# brought up once (with --offload unless --no-offload: the delay line passes
# 64 KiB TCP segments, so 1 Gbit/s per pair stays far below its ceiling;
# docs/wan.md) and every system runs once, in an order that rotates from one
# testbed to the next. Each run records the load average and the delay line's
# drops. Then bench/wan/summarize.py prints the tables (OUT/summary.md) and
# /usr/bin/python3 bench/wan/plot.py draws busbw against RTT per system
# (OUT/wan_busbw.png, .svg). Every benchmark checks its results exactly; the
# script fails when a run fails, never on speed.
# --quick: N = 2 and 3, RTT 0 and 50, 64 MiB only, pools 1 and 4, one timed
# operation: a smoke check in about 3 minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

NS="2 4 3"
RTTS="0 20 50 100"
MIN=64M
MAX=256M
RATE=1000
PCCL_SYS="1:1 2:1 4:1 8:1 4:4 1:1:k"
REFS="ompi gloo"
WARMUP=1
ITERS=2
OFFLOAD=1
CLOCK=epoll
BUILD=build/bench-wan
OUT=
NAME=bw
while [[ $# -gt 0 ]]; do
  case $1 in
    --quick) NS="2 3"; RTTS="0 50"; MAX=64M; PCCL_SYS="1:1 4:1 4:4 1:1:k"; ITERS=1; shift ;;
    --ns) NS=$2; shift 2 ;;
    --rtts) RTTS=$2; shift 2 ;;
    --min) MIN=$2; shift 2 ;;
    --max) MAX=$2; shift 2 ;;
    --rate-mbit) RATE=$2; shift 2 ;;
    --pccl) PCCL_SYS=$2; shift 2 ;;
    --refs) REFS=$2; shift 2 ;;
    --warmup) WARMUP=$2; shift 2 ;;
    --iters) ITERS=$2; shift 2 ;;
    --no-offload) OFFLOAD=0; shift ;;
    --clock) CLOCK=$2; shift 2 ;;
    --build) BUILD=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --name) NAME=$2; shift 2 ;;
    -h|--help) sed -n '2,27p' "$0"; exit 0 ;;
    *) echo "bench-wan: unknown argument $1" >&2; exit 2 ;;
  esac
done
[[ $(id -u) -eq 0 ]] || { echo "bench-wan: needs root (network namespaces)" >&2; exit 2; }
[[ -n "$OUT" ]] || OUT="$BUILD/wan-results/$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$OUT"
TB=$ROOT/scripts/wan-testbed.sh

echo "== building (Release) in $BUILD"
if [[ ! -f "$BUILD/CMakeCache.txt" ]]; then
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPCCL_BUILD_TESTS=OFF \
    >"$OUT/configure.log" 2>&1 || { cat "$OUT/configure.log"; exit 1; }
fi
cmake --build "$BUILD" -j 2 --target pccl ccoip_master pccl_wan_bench pccl-delayline \
  >"$OUT/build.log" 2>&1 || { tail -n 40 "$OUT/build.log"; exit 1; }
SYSTEMS=()
for s in $PCCL_SYS; do
  IFS=: read -r pool conc kern <<<"$s"
  SYSTEMS+=("pccl-p${pool}c${conc:-1}${kern:+k}")
done
for r in $REFS; do
  case $r in
    ompi)
      if command -v mpicc >/dev/null && command -v mpirun >/dev/null; then
        mkdir -p "$BUILD/mpi"
        mpicc -std=c11 -O2 -Wall -Wextra bench/allreduce/mpi_allreduce_bench.c \
          -o "$BUILD/mpi/mpi_allreduce_bench"
        SYSTEMS+=(ompi)
      else
        echo "bench-wan: no mpicc/mpirun (openmpi-bin, libopenmpi-dev): no Open MPI runs"
      fi ;;
    gloo)
      if /usr/bin/python3 -c 'import torch.distributed as d; assert d.is_available()' 2>/dev/null; then
        SYSTEMS+=(gloo)
      else
        echo "bench-wan: /usr/bin/python3 has no torch.distributed (python3-torch): no Gloo runs"
      fi ;;
    *) echo "bench-wan: unknown reference $r" >&2; exit 2 ;;
  esac
done

{
  echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) cores"
  echo "kernel: $(uname -r); tcp_congestion_control $(sysctl -n net.ipv4.tcp_congestion_control);" \
    "tcp_wmem $(sysctl -n net.ipv4.tcp_wmem | tr '\t' ' '); tcp_rmem $(sysctl -n net.ipv4.tcp_rmem | tr '\t' ' ');" \
    "wmem_max $(sysctl -n net.core.wmem_max); rmem_max $(sysctl -n net.core.rmem_max)"
  echo "testbed: rate ${RATE} Mbit/s per pair, offload $OFFLOAD, clock $CLOCK; N: $NS; RTT ms: $RTTS"
  echo "sizes: $MIN..$MAX x4; warmup $WARMUP, timed $ITERS; systems: ${SYSTEMS[*]}"
  echo "PCCL_TCP_SNDBUF=${PCCL_TCP_SNDBUF:-unset} PCCL_TCP_RCVBUF=${PCCL_TCP_RCVBUF:-unset}"
} | tee "$OUT/environment.txt"

load1() { cut -d' ' -f1 /proc/loadavg; }
FAILED=0
PORT=29500
run_one() { # sys n rtt
  local sys=$1 n=$2 rtt=$3 f="$OUT/N$2_rtt$3_$1.txt" rc=0 t0 d0 d1
  echo "# load $(load1)" >"$f"
  d0=$("$TB" status --name "$NAME" | awk '/^total/ { print $7 }')
  t0=$(date +%s)
  case $sys in
    pccl-*)
      local pool=${sys#pccl-p} conc sndbuf=auto
      [[ $pool == *k ]] && { sndbuf=kernel; pool=${pool%k}; }
      conc=${pool#*c}
      pool=${pool%c*}
      PCCL_TCP_SNDBUF=$sndbuf PCCL_BENCH_PEER="$BUILD/bench/wan/pccl_wan_bench" PCCL_BENCH_BUDGET=900 \
        bench/wan/wan_launch.sh "$NAME" "$BUILD" "$n" --min "$MIN" --max "$MAX" --step 4 \
        --warmup "$WARMUP" --iters "$ITERS" --pool "$pool" --concurrent "$conc" \
        >>"$f" 2>"$f.err" || rc=$? ;;
    ompi)
      local hosts
      hosts=$(seq -s, -f 'p%g' 0 $((n - 1)))
      PCCL_WAN_NAME=$NAME "$TB" exec m --name "$NAME" -- timeout -k 5 900 mpirun \
        --allow-run-as-root --oversubscribe -np "$n" --host "$hosts" \
        --mca plm_rsh_agent "$ROOT/bench/wan/mpi_agent.sh" --mca plm_rsh_no_tree_spawn 1 \
        --mca oob_tcp_if_include wan0 --mca btl self,tcp --mca btl_tcp_if_include wan0 \
        "$ROOT/$BUILD/mpi/mpi_allreduce_bench" --min "$MIN" --max "$MAX" --step 4 \
        --warmup "$WARMUP" --iters-min "$ITERS" --iters-max "$ITERS" >>"$f" 2>"$f.err" || rc=$? ;;
    gloo)
      local pids=() i addr
      PORT=$((PORT + 1))
      addr=$("$TB" addr p0 --name "$NAME")
      for i in $(seq 0 $((n - 1))); do
        local o=/dev/null
        [[ $i -eq 0 ]] && o=$f.out0
        GLOO_SOCKET_IFNAME=wan0 OMP_NUM_THREADS=1 "$TB" exec "p$i" --name "$NAME" -- \
          timeout -k 5 900 /usr/bin/python3 bench/allreduce/gloo_allreduce_bench.py --world "$n" \
          --rank "$i" --port "$PORT" --addr "$addr" --min "$MIN" --max "$MAX" --step 4 \
          --warmup "$WARMUP" --iters-min "$ITERS" --iters-max "$ITERS" >"$o" 2>>"$f.err" &
        pids+=($!)
      done
      for i in "${pids[@]}"; do wait "$i" || rc=1; done
      cat "$f.out0" >>"$f"
      rm -f "$f.out0" ;;
  esac
  d1=$("$TB" status --name "$NAME" | awk '/^total/ { print $7 }')
  echo "# delay line drops $((d1 - d0))" >>"$f"
  if ! grep -q "^# done, results verified exactly" "$f" && [[ $rc -eq 0 ]]; then rc=1; fi
  local big
  big=$(awk '!/^#/ && NF >= 8 { b = $8 } END { print b }' "$f")
  printf '   N=%s RTT=%-3s %-12s %4ss  load %s  largest-size busbw %s GB/s%s\n' "$n" "$rtt" "$sys" \
    "$(($(date +%s) - t0))" "$(sed -n 's/^# load //p' "$f")" "${big:-n/a}" \
    "$([[ $rc -ne 0 ]] && echo "  FAILED (rc $rc, see $f.err)")"
  if [[ $rc -ne 0 ]]; then
    FAILED=1
    tail -n 5 "$f.err" | sed 's/^/     /'
  fi
  return 0
}

trap '"$TB" down --name "$NAME" >/dev/null 2>&1 || true' EXIT
K=${#SYSTEMS[@]}
ROT=0
echo "== running: ${SYSTEMS[*]}"
for n in $NS; do
  for rtt in $RTTS; do
    args=(--peers "$n" --rtt-ms "$rtt" --rate-mbit "$RATE" --clock "$CLOCK" --name "$NAME"
      --build "$BUILD")
    [[ $OFFLOAD -eq 1 ]] && args+=(--offload)
    "$TB" up "${args[@]}" >"$OUT/testbed_N${n}_rtt${rtt}.log"
    for i in $(seq 0 $((K - 1))); do
      run_one "${SYSTEMS[$(((i + ROT) % K))]}" "$n" "$rtt"
    done
    ROT=$((ROT + 1))
    "$TB" down --name "$NAME" >>"$OUT/testbed_N${n}_rtt${rtt}.log"
  done
done

echo
echo "== results ($OUT)"
echo
S=0
python3 bench/wan/summarize.py "$OUT" --rate-mbit "$RATE" | tee "$OUT/summary.md" || S=1
/usr/bin/python3 bench/wan/plot.py "$OUT" --rate-mbit "$RATE" || S=1
if [[ $FAILED -ne 0 || $S -ne 0 ]]; then
  echo "bench-wan: some runs failed (see above)" >&2
  exit 1
fi
