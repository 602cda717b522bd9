#!/usr/bin/env bash
# wan_impair (label wan): the delay line's jitter and loss. 2 peers, 10 ms
# RTT, +-2 ms jitter and 10 % loss each way (seeded); 300 pings, 3 ms apart
# (closer than the jitter's spread, so without the no-reordering rule replies
# would overtake each other). Checks: every lost ping is one the delay line
# says it dropped (its `lost` count equals requests + replies missing); the
# loss rate is that of 10 % each way (1 - 0.9^2 = 19 %, within 4 standard
# deviations); replies come back in order; the RTTs spread over the jitter:
# min in 6..8 ms (never early, and jitter did pull some down), max >= 12,
# median 9..11.5 (no upper bound on the max: a loaded machine delays some).
#   impair.sh BUILD_DIR
set -euo pipefail
BUILD=$1
# shellcheck source=common.sh
source "$(dirname "$0")/common.sh"
wan_require ping
NAME="wi$$"
wan_up "$NAME" --peers 2 --rtt-ms 10 --jitter-ms 2 --loss-pct 10 --seed 23
OUT=$("$TB" exec p0 --name "$NAME" -- ping -n -c 300 -i 0.003 -W 1 "$("$TB" addr p1 --name "$NAME")" || true)
LOST=$("$TB" status --name "$NAME" | awk '/^total/ { print $9 }')
FAIL=0
# shellcheck disable=SC2086
read -r SENT GOT <<<"$(awk '/packets transmitted/ { print $1, $4 }' <<<"$OUT")"
echo "sent $SENT, received $GOT, the delay line lost $LOST"
if [[ $((SENT - GOT)) -ne $LOST ]]; then
  echo "FAIL: $((SENT - GOT)) pings missing, the delay line dropped $LOST"
  FAIL=1
fi
# 19 % of 300 (standard deviation 2.3 %): 9.8 .. 28.2 %
if ! awk -v s="$SENT" -v g="$GOT" 'BEGIN { l = (s - g) / s; exit !(l >= 0.098 && l <= 0.282) }'; then
  echo "FAIL: loss $(((SENT - GOT) * 100 / SENT)) %, want 19 % (9.8 .. 28.2)"
  FAIL=1
fi
if ! sed -n 's/.*icmp_seq=\([0-9]*\) .*/\1/p' <<<"$OUT" | awk 'NR > 1 && $1 <= p { bad = 1 } { p = $1 } END { exit bad }'; then
  echo "FAIL: replies out of order"
  FAIL=1
fi
if ! sed -n 's/.*time=\([0-9.]*\) ms/\1/p' <<<"$OUT" | sort -g |
  awk '{ v[NR] = $1 } END { m = v[int((NR + 1) / 2)]
       printf "rtt min %.2f median %.2f max %.2f ms over %d\n", v[1], m, v[NR], NR
       exit !(v[1] >= 6 && v[1] <= 8 && v[NR] >= 12 && m >= 9 && m <= 11.5) }'; then
  echo "FAIL: the RTTs do not spread over 10 +- 4 ms (min in 6..8, max >= 12, median 9..11.5)"
  FAIL=1
fi
"$TB" down --name "$NAME"
[[ $FAIL -eq 0 ]] && echo "ok: loss, order and jitter as set"
exit $FAIL
