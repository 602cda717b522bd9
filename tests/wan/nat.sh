#!/usr/bin/env bash
# wan_nat (label wan): peers behind NAT (docs/wan.md, docs/protocol.md §6.4, §8.6): an
# nftables ruleset in a peer's namespace drops every new inbound connection
# (scripts/wan-testbed.sh --nat), so nobody can dial it; it dials out. 3 peers, p1 behind NAT;
# 4 peers, p1 and p3 behind NAT; 2 peers both behind NAT (their links through the master's
# relay); 10 ms RTT, 200 Mbit/s. Each run must form its group (the link into a NAT'd peer is
# dialled from it after one failed phase; between two, relayed) and pccl_allreduce_bench checks
# every result exactly. The master's log must show the dials it could not make learnt (and the
# relayed links for the pair), and no peer evicted.
#   nat.sh BUILD_DIR
set -euo pipefail
BUILD=$1
# shellcheck source=common.sh
source "$(dirname "$0")/common.sh"
wan_require nft
for f in master/ccoip_master bench/allreduce/pccl_allreduce_bench bench/wan/pccl-delayline; do
  [[ -x $BUILD/$f ]] || { echo "FAIL: $BUILD/$f is missing"; exit 1; }
done
NAME="wn$$"
LOGS=$(mktemp -d)
trap '"$TB" down --name "$NAME" >/dev/null 2>&1 || true; rm -rf "$LOGS"' EXIT
run() { # peers nat-list
  "$TB" up --name "$NAME" --build "$BUILD" --peers "$1" --rtt-ms 10 --rate-mbit 200 --nat "$2"
  # The NAT rules hold: a dial into p1 times out (dropped), where it would be refused at once.
  local rc=0
  "$TB" exec m --name "$NAME" -- timeout 2 bash -c \
    "exec 3<>/dev/tcp/$("$TB" addr p1 --name "$NAME")/9" 2>/dev/null || rc=$?
  [[ $rc -eq 124 ]] || { echo "FAIL: a dial into p1 was not dropped (rc $rc) despite --nat"; exit 1; }
  rm -rf "$LOGS"/*
  local out
  out=$(PCCL_LOG_LEVEL=INFO PCCL_BENCH_MASTER_LOG=INFO PCCL_BENCH_LOGS=$LOGS PCCL_BENCH_BUDGET=60 \
    "$ROOT/bench/wan/wan_launch.sh" "$NAME" "$BUILD" "$1" \
    --min 64K --max 1M --iters-min 1 --iters-max 2 --warmup 1 --timeout-ms 30000)
  echo "$out"
  grep -q '^# done, results verified exactly' <<<"$out" || { echo "FAIL: results"; exit 1; }
  # Evictions before the first peer leaves at the end (two NAT'd peers left alone by the others'
  # leaving cannot be linked: the master then evicts one, as it should).
  local learnt evicted first_leave
  learnt=$(grep -c 'cannot reach peer' "$LOGS/master.log" || true)
  first_leave=$(cat "$LOGS"/peer*.log | sed -n 's/^\[pccl \([0-9.]*\) .*leaving the run.*/\1/p' |
    sort -g | head -1)
  evicted=$(sed -n 's/^\[pccl \([0-9.]*\) .*master: evicting.*/\1/p' "$LOGS/master.log" |
    awk -v t="${first_leave:-1e99}" '$1 < t' | wc -l)
  echo "master: $learnt unreachable dial(s) learnt, $evicted eviction(s) before the end"
  [[ $learnt -ge 1 ]] || { echo "FAIL: no dial into a NAT'd peer was reported"; exit 1; }
  [[ $evicted -eq 0 ]] || { echo "FAIL: a peer was evicted"; grep evict "$LOGS/master.log"; exit 1; }
  if [[ ${3:-} == relay ]]; then
    local relayed
    relayed=$(grep -c 'master: relaying link' "$LOGS/master.log" || true)
    echo "master: $relayed relayed connection(s)"
    [[ $relayed -ge 2 ]] || { echo "FAIL: the pair's links were not relayed"; exit 1; }
  fi
  "$TB" down --name "$NAME"
  echo "ok: $1 peers, behind NAT: p${2//,/ p}"
}
run 3 1
run 4 1,3
run 2 0,1 relay
