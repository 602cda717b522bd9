#!/usr/bin/env bash
# wan_rtt (label wan): a testbed of 2 peers and the master at 40 ms RTT; the
# delay line's RTT, the median of 15 pings, must be within 10 % of 40 ms on
# peer -> peer and master -> peer paths; at 0 ms RTT it must stay under 4 ms
# (10 % of 40: the delay line adds no delay of its own beyond scheduling).
#   rtt.sh BUILD_DIR
set -euo pipefail
BUILD=$1
# shellcheck source=common.sh
source "$(dirname "$0")/common.sh"
wan_require ping
NAME="wr$$"

median_rtt() { # from to -> median ping RTT in ms
  "$TB" exec "$1" --name "$NAME" -- ping -c 15 -i 0.05 -W 2 "$("$TB" addr "$2" --name "$NAME")" |
    sed -n 's/.*time=\([0-9.]*\) ms/\1/p' | sort -g |
    awk '{ v[NR] = $1 } END { if (NR < 10) { print "lost"; exit }
      print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
FAIL=0
check() { # set_ms lo hi from to
  local m
  m=$(median_rtt "$4" "$5")
  if [[ $m != lost ]] && awk -v m="$m" -v lo="$2" -v hi="$3" 'BEGIN { exit !(m >= lo && m <= hi) }'; then
    echo "ok: RTT $4 -> $5 set $1 ms, median $m ms (allowed $2..$3)"
  else
    echo "FAIL: RTT $4 -> $5 set $1 ms, median $m ms (allowed $2..$3)"
    FAIL=1
  fi
}
wan_up "$NAME" --peers 2 --rtt-ms 40
check 40 36 44 p0 p1
check 40 36 44 m p1
wan_up "$NAME" --peers 2 --rtt-ms 0
check 0 0 4 p1 p0
"$TB" down --name "$NAME"
exit $FAIL
