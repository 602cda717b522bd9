#!/usr/bin/env bash
# The live demo (issue 6): a ccoip_master and 4 peers on 127.0.0.1 train a
# small MLP together (examples/demo_train.c, data generated in the program).
# One peer is killed with SIGKILL mid-run and restarted: it rejoins and
# receives the popular shared state. At the end every peer prints the XXH3
# hash of its shared state; the demo fails unless all are identical.
#
#   scripts/demo.sh [--build DIR] [--master BIN] [--peer BIN] [--peers N]
#                   [--steps N] [--kill-at REV] [--step-ms MS] [--budget S] [--quiet]
#                   [--keep-logs]
#
# Defaults: --build build/release, 4 peers, 80 steps, kill at revision 25,
# 120 ms per step, 60 s budget. Peer 0 and the killed peer are shown live;
# every log is kept in a temporary directory that is removed on success
# (unless --keep-logs).
set -u
cd "$(dirname "$0")/.." || exit 2
BUILD=build/release
MASTER=
PEER=
NPEERS=4
STEPS=80
KILL_AT=25
STEP_MS=120
BUDGET=60
QUIET=0
KEEP_ALWAYS=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) BUILD=$2; shift 2 ;;
    --master) MASTER=$2; shift 2 ;;
    --peer) PEER=$2; shift 2 ;;
    --peers) NPEERS=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    --kill-at) KILL_AT=$2; shift 2 ;;
    --step-ms) STEP_MS=$2; shift 2 ;;
    --budget) BUDGET=$2; shift 2 ;;
    --quiet) QUIET=1; shift ;;
    --keep-logs) KEEP_ALWAYS=1; shift ;;
    *) echo "demo.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
MASTER=${MASTER:-$BUILD/master/ccoip_master}
PEER=${PEER:-$BUILD/examples/demo_train}
for b in "$MASTER" "$PEER"; do
  [[ -x "$b" ]] || { echo "demo.sh: $b not built" >&2; exit 2; }
done
((NPEERS >= 2 && KILL_AT >= 1 && KILL_AT < STEPS)) || { echo "demo.sh: bad sizes" >&2; exit 2; }
VICTIM=$((NPEERS - 1))
export PCCL_LOG_LEVEL=${PCCL_LOG_LEVEL:-WARN}

TMP=$(mktemp -d "${TMPDIR:-/tmp}/pccl-demo.XXXXXX")
PIDS=() # every process this script started (master, peers, log followers)
KEEP_LOGS=1
cleanup() {
  for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done
  wait 2>/dev/null
  if ((KEEP_LOGS)); then echo "demo: logs kept in $TMP"; else rm -rf "$TMP"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
fail() {
  echo "demo: FAIL: $*"
  for f in "$TMP"/*.out "$TMP"/*.err; do
    [[ -s "$f" ]] && { echo "--- $f"; tail -n 15 "$f"; }
  done
  exit 1
}
T0=$SECONDS
left() { echo $((BUDGET - (SECONDS - T0))); }

# --- master on a free loopback port
"$MASTER" --listen tcp://127.0.0.1:0 --print-port --heartbeat-ms 100 --evict-ms 1000 \
  --vote-timeout-ms 10000 >"$TMP/master.out" 2>"$TMP/master.err" &
MPID=$!
PIDS+=("$MPID")
PORT=
for _ in $(seq 200); do
  PORT=$(sed -n 's/^PORT \([0-9]*\)$/\1/p' "$TMP/master.out" 2>/dev/null)
  [[ -n "$PORT" ]] && break
  kill -0 "$MPID" 2>/dev/null || break
  sleep 0.05
done
[[ -n "$PORT" ]] || fail "the master did not report its port"
URL="tcp://127.0.0.1:$PORT"
echo "demo: master pid $MPID on $URL; $NPEERS peers, $STEPS steps, peer $VICTIM is killed at revision $KILL_AT"

declare -A PEER_PID
start_peer() { # index log-name min-world
  : >"$TMP/$2.out" # exists before its follower starts
  "$PEER" --url "$URL" --index "$1" --steps "$STEPS" --min-world "$3" --step-ms "$STEP_MS" \
    >"$TMP/$2.out" 2>"$TMP/$2.err" &
  local pid=$!
  PIDS+=("$pid")
  PEER_PID[$2]=$pid
  if ((!QUIET)) && { (($1 == 0)) || (($1 == VICTIM)); }; then
    tail -n +1 -f --pid="$pid" "$TMP/$2.out" 2>/dev/null &
    PIDS+=($!)
    disown "$!" # cleanup may kill it: no "Killed" job report in the demo's output
  fi
}

for i in $(seq 0 $((NPEERS - 1))); do start_peer "$i" "peer$i" "$NPEERS"; done

# --- kill the victim mid-run, then restart it
for _ in $(seq $(($(left) * 20))); do
  grep -Eq "\| rev +$KILL_AT \| world" "$TMP/peer$VICTIM.out" 2>/dev/null && break
  kill -0 "${PEER_PID[peer$VICTIM]}" 2>/dev/null || fail "peer $VICTIM exited early"
  sleep 0.05
done
grep -Eq "\| rev +$KILL_AT \| world" "$TMP/peer$VICTIM.out" || fail "peer $VICTIM never reached revision $KILL_AT"
kill -9 "${PEER_PID[peer$VICTIM]}"
wait "${PEER_PID[peer$VICTIM]}" 2>/dev/null
echo "demo: ==== SIGKILL peer $VICTIM (pid ${PEER_PID[peer$VICTIM]}) after revision $KILL_AT ===="
sleep 1
start_peer "$VICTIM" "peer$VICTIM.restarted" 1
echo "demo: ==== restarted peer $VICTIM (pid ${PEER_PID[peer$VICTIM.restarted]}) ===="

# --- wait (bounded) for every peer to finish
FINALS=()
for i in $(seq 0 $((NPEERS - 1))); do
  name=peer$i
  ((i == VICTIM)) && name=peer$VICTIM.restarted
  FINALS+=("$name")
done
for name in "${FINALS[@]}"; do
  pid=${PEER_PID[$name]}
  while kill -0 "$pid" 2>/dev/null; do
    (($(left) > 0)) || fail "budget of ${BUDGET}s exceeded"
    sleep 0.1
  done
  wait "$pid" || fail "$name exited with status $?"
done
ELAPSED=$((SECONDS - T0))

# --- compare the hashes
echo
echo "demo: final shared-state hashes (revision $STEPS):"
FIRST=
SAME=1
for name in "${FINALS[@]}"; do
  line=$(grep -E '\| FINAL revision' "$TMP/$name.out" | tail -n 1)
  [[ -n "$line" ]] || fail "$name printed no final hash"
  rev=$(sed -n 's/.*FINAL revision \([0-9]*\) hash.*/\1/p' <<<"$line")
  h=$(sed -n 's/.*hash \([0-9a-f]*\)$/\1/p' <<<"$line")
  printf '  %-18s revision %s  hash %s\n' "$name" "$rev" "$h"
  [[ "$rev" == "$STEPS" ]] || SAME=0
  [[ -z "$FIRST" ]] && FIRST=$h
  [[ "$h" == "$FIRST" ]] || SAME=0
done
grep -q "received the popular shared state" "$TMP/peer$VICTIM.restarted.out" ||
  fail "the restarted peer did not receive the shared state"
((SAME)) || fail "hashes differ"
echo "demo: ALL IDENTICAL ($NPEERS peers, one killed and restarted, ${ELAPSED}s)"
KEEP_LOGS=$KEEP_ALWAYS
exit 0
