#!/usr/bin/env bash
# wan_topology (label wan): pcclOptimizeTopology on shaped links. 4 peers
# A, B, C, D (p0 .. p3), 50 ms RTT; the ring links A-B, B-C, C-D, D-A carry
# 1 Gbit/s, the diagonals A-C, B-D 100 Mbit/s (the benchmark's links,
# scripts/bench-wan-topology.sh, with 8 MiB all-reduces to be short; the delay
# line passes TCP segments, --offload). Ring keys make the first ring
# A, C, B, D: checked, it uses both diagonals. After pcclOptimizeTopology
# (bandwidth probes through the delay line and htb) the installed ring must
# use only fast links (bench/wan/topo_ring.sh), and bench/wan/pccl_wan_topo.c
# checks every all-reduce result exactly, before and after. At 50 ms a probe
# of a fixed 1 MiB cannot tell these links apart (TCP is still ramping up;
# with such probes 6 of 9 runs installed a slow ring, docs/wan.md). Nothing
# about speed is asserted (the times are printed).
#   topology.sh BUILD_DIR
set -euo pipefail
BUILD=$1
# shellcheck source=common.sh
source "$(dirname "$0")/common.sh"
wan_require
for f in master/ccoip_master bench/wan/pccl_wan_topo bench/wan/pccl-delayline; do
  [[ -x $BUILD/$f ]] || { echo "FAIL: $BUILD/$f is missing"; exit 1; }
done
NAME="wt$$"
MATRIX=$(mktemp)
printf 'p0 p2 50 100\np1 p3 50 100\n' >"$MATRIX" # the diagonals; read by `up` only
wan_up "$NAME" --peers 4 --rtt-ms 50 --rate-mbit 1000 --offload --matrix "$MATRIX" ||
  { rm -f "$MATRIX"; exit 1; }
rm -f "$MATRIX"
out=$(PCCL_BENCH_PEER="$BUILD/bench/wan/pccl_wan_topo" PCCL_BENCH_BUDGET=70 \
  "$ROOT/bench/wan/wan_launch.sh" "$NAME" "$BUILD" 4 --keys 1,3,2,4 --bytes 8M --warmup 0 \
  --iters 1 --timeout-ms 60000)
echo "$out"
grep -q '^# done, results verified exactly' <<<"$out" || { echo "FAIL: no verified run"; exit 1; }
before=$(sed -n 's/^ring_before //p' <<<"$out")
after=$(sed -n 's/^ring_after //p' <<<"$out")
[[ $before == "0 2 1 3" ]] || { echo "FAIL: first ring $before, want 0 2 1 3 (ring keys)"; exit 1; }
# shellcheck disable=SC2086 # the ring's indices are words
"$ROOT/bench/wan/topo_ring.sh" $before >/dev/null && { echo "FAIL: first ring has no slow link"; exit 1; }
# shellcheck disable=SC2086
verdict=$("$ROOT/bench/wan/topo_ring.sh" $after) || { echo "FAIL: optimized ring $after: $verdict"; exit 1; }
echo "ok: optimized ring $after ($verdict)"
"$TB" down --name "$NAME"
