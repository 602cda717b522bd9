#!/usr/bin/env bash
# wan_churn (label wan): churn at distance, short. A master and 4 peers in
# their namespaces, 50 ms RTT, 1 Gbit/s per pair (htb, offload), the master's
# evict_ms 1000: peer 1 is killed (SIGKILL) in the middle of an all-reduce of
# 1 MiB, then, in a second group, stopped for good (SIGSTOP, evicted by
# heartbeat silence). scripts/bench-wan-churn.sh runs both; it fails unless
# every survivor's op failed with a retryable result (or the op already ran on
# the survivors), every survivor updated the topology to the 3 survivors and
# completed its next op there, checked exactly (uint32 sums naming the members)
# and bit-identical across survivors (FNV-1a of the result), and the 2 ops
# after it too. The recovery time is printed, not asserted.
#   churn.sh BUILD_DIR
set -euo pipefail
BUILD=$1
# shellcheck source=common.sh
source "$(dirname "$0")/common.sh"
wan_require
for f in master/ccoip_master bench/wan/pccl_wan_churn bench/wan/pccl-delayline; do
  [[ -x $BUILD/$f ]] || { echo "FAIL: $BUILD/$f is missing"; exit 1; }
done
NAME="wc$$"
OUT=$(mktemp -d)
trap '"$TB" down --name '"$NAME"' >/dev/null 2>&1 || true; rm -rf "$OUT"' EXIT
trap 'exit 130' INT TERM
rc=0
"$ROOT/scripts/bench-wan-churn.sh" --name "$NAME" --build "$BUILD" --out "$OUT" --peers 4 \
  --rtt-ms 50 --rate-mbit 1000 --sizes 1M --modes "kill stop" --reps 1 --evict-ms 1000 || rc=$?
if [[ $rc -ne 0 ]]; then
  for f in "$OUT"/*/peer*.log "$OUT"/*/master.log; do echo "--- $f"; tail -n 15 "$f"; done
  echo "FAIL: bench-wan-churn.sh exited $rc"
  exit 1
fi
# Both scenarios ran, each with every survivor's next op exact and identical.
for mode in kill stop; do
  awk -F'\t' -v m="$mode" '$1 == m && $12 == "yes" && $14 == "ok" { f = 1 } END { exit !f }' \
    "$OUT/runs.tsv" || { echo "FAIL: no successful $mode run"; cat "$OUT/runs.tsv"; exit 1; }
done
echo "PASS: the survivors' next op was exact and bit-identical after a kill and a stop"
