#!/usr/bin/env bash
# wan_allreduce (label wan): a real pccl all-reduce across the testbed: the
# master in its namespace, 3 peers in theirs, 20 ms RTT, 500 Mbit/s per pair
# (htb), every byte through the delay line; pccl_allreduce_bench checks every
# result exactly (a wrong element fails the run). Twice: the default pool,
# then a pool of 4 connections on 4 MiB. Nothing about speed is asserted.
#   allreduce.sh BUILD_DIR
set -euo pipefail
BUILD=$1
# shellcheck source=common.sh
source "$(dirname "$0")/common.sh"
wan_require
for f in master/ccoip_master bench/allreduce/pccl_allreduce_bench bench/wan/pccl-delayline; do
  [[ -x $BUILD/$f ]] || { echo "FAIL: $BUILD/$f is missing"; exit 1; }
done
NAME="wa$$"
wan_up "$NAME" --peers 3 --rtt-ms 20 --rate-mbit 500
run() {
  local out
  out=$(PCCL_BENCH_BUDGET=40 "$ROOT/bench/wan/wan_launch.sh" "$NAME" "$BUILD" 3 \
    --iters-min 1 --iters-max 3 --warmup 1 --timeout-ms 30000 "$@")
  echo "$out"
  grep -q '^# done, results verified exactly' <<<"$out"
}
run --max 4M
run --pool 4 --min 4M --max 4M
"$TB" down --name "$NAME"
