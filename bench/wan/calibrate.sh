#!/usr/bin/env bash
# Calibrates the WAN testbed (issue 23, docs/wan.md): the delay line's own
# ceiling (iperf3 between two peer namespaces, no rate limit: Gbit/s, and the
# packets/s and CPU seconds the delay line's stats count) with and without
# --offload, 1 and 8 streams, at RTT 0 and 50 ms, for both clocks; then the
# RTT accuracy (ping, median of --pings) at 0/20/50/100 ms for both clocks.
# Prints Markdown tables. Runs as root; uses its own testbed name (wcal).
#
#   bench/wan/calibrate.sh [--build DIR] [--secs S] [--pings K] [--quick]
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=build/rel
SECS=8
PINGS=40
QUICK=0
while [[ $# -gt 0 ]]; do
  case $1 in
    --build) BUILD=$2; shift 2 ;;
    --secs) SECS=$2; shift 2 ;;
    --pings) PINGS=$2; shift 2 ;;
    --quick) QUICK=1; SECS=3; PINGS=10; shift ;;
    *) echo "calibrate: unknown argument $1" >&2; exit 2 ;;
  esac
done
command -v iperf3 >/dev/null || { echo "calibrate: needs iperf3 (scripts/install-deps.sh)" >&2; exit 2; }
command -v ping >/dev/null || { echo "calibrate: needs ping (iputils-ping)" >&2; exit 2; }
TB=scripts/wan-testbed.sh
NAME=wcal
trap '$TB down --name $NAME >/dev/null 2>&1 || true' EXIT

# total packets/bytes/read/cpu from the delay line's live stats
dl_stats() { $TB status --name $NAME | awk '/^total/ { print $3, $5, $15, $17 + $19 }'; }

echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'), load: $(cut -d' ' -f1-3 /proc/loadavg)," \
  "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) cores," \
  "kernel $(uname -r), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
echo
echo "### Ceiling (iperf3 -t $SECS, p0 -> p1, no rate limit)"
echo
echo "| offload | clock | RTT ms | streams | Gbit/s (receiver) | delay line kpkt/s | delay line CPU % | retransmits | load |"
echo "|---|---|---|---|---|---|---|---|---|"
CLOCKS="epoll spin"
RTTS="0 50"
[[ $QUICK -eq 1 ]] && { CLOCKS=epoll; }
for off in 0 1; do
  for clock in $CLOCKS; do
    for rtt in $RTTS; do
      args=(--peers 2 --rtt-ms "$rtt" --name $NAME --clock "$clock" --build "$BUILD")
      [[ $off -eq 1 ]] && args+=(--offload)
      $TB up "${args[@]}" >/dev/null
      for streams in 1 8; do
        $TB exec p1 --name $NAME -- iperf3 -s -1 -D -B 10.77.0.11
        sleep 0.3
        read -r p0 _ r0 c0 <<<"$(dl_stats)"
        out=$($TB exec p0 --name $NAME -- iperf3 -c 10.77.0.11 -t "$SECS" -f m -P "$streams")
        read -r p1 _ r1 c1 <<<"$(dl_stats)"
        rx=$(grep receiver <<<"$out" | tail -n1 | awk '{ for (i = 1; i <= NF; i++) if ($i == "Mbits/sec") print $(i - 1) }')
        re=$(grep sender <<<"$out" | tail -n1 | awk '{ for (i = 1; i <= NF; i++) if ($i == "Mbits/sec") print $(i + 1) }')
        awk -v o="$off" -v c="$clock" -v r="$rtt" -v s="$streams" -v rx="$rx" -v re="$re" \
          -v p="$((r1 - r0))" -v cpu0="$c0" -v cpu1="$c1" -v t="$SECS" -v l="$(cut -d' ' -f1 /proc/loadavg)" \
          'BEGIN { printf "| %s | %s | %s | %s | %.2f | %.0f | %.0f | %s | %s |\n",
                   o ? "yes" : "no", c, r, s, rx / 1000, p / t / 1000, (cpu1 - cpu0) / t * 100, re, l }'
        : "$p0" "$p1"
      done
    done
  done
done
$TB down --name $NAME >/dev/null

echo
echo "### RTT accuracy (ping -c $PINGS -i 0.05, p0 -> p1; 56-byte payload)"
echo
echo "| clock | set RTT ms | median ms | min ms | max ms | median error % |"
echo "|---|---|---|---|---|---|"
for clock in $CLOCKS; do
  for rtt in 0 20 50 100; do
    $TB up --peers 2 --rtt-ms "$rtt" --name $NAME --clock "$clock" --build "$BUILD" >/dev/null
    $TB exec p0 --name $NAME -- ping -c "$PINGS" -i 0.05 10.77.0.11 |
      sed -n 's/.*time=\([0-9.]*\) ms/\1/p' | sort -g |
      awk -v c="$clock" -v r="$rtt" '{ v[NR] = $1 } END {
        m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
        e = r > 0 ? sprintf("%+.2f", (m - r) / r * 100) : "n/a"
        printf "| %s | %s | %.3f | %.3f | %.3f | %s |\n", c, r, m, v[1], v[NR], e }'
  done
done
