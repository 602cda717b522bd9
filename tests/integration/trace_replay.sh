#!/usr/bin/env bash
# Record a real run and replay it (DESIGN.md §5, core/ccoip_trace.h): a
# ccoip_master and 3 peers (itest_trace_peer: all-reduces, one shared-state
# sync with a divergent peer, more all-reduces) on 127.0.0.1, each process
# with its own PCCL_TRACE file; then `pccl-sim --replay` of every trace must
# exit 0 and report a full match (trailer included). Label "integration".
#
# Then one process with a master and 2 peers (itest_trace_multi): the traces
# are FILE, FILE.1, FILE.2 (creation order) and each replays.
#
#   trace_replay.sh MASTER_BIN PEER_BIN SIM_BIN MULTI_BIN
set -u
MASTER=$1
PEER=$2
SIM=$3
MULTI=$4
N=3
TMP=$(mktemp -d)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done
  wait 2>/dev/null
  rm -rf "$TMP"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*"
  for f in "$TMP"/*.out "$TMP"/*.log; do echo "--- $f"; tail -n 40 "$f"; done
  exit 1
}
export PCCL_LOG_LEVEL=${PCCL_LOG_LEVEL:-INFO}

PCCL_TRACE="$TMP/master.trace" "$MASTER" --listen tcp://127.0.0.1:0 --print-port \
  --heartbeat-ms 100 --evict-ms 2000 --vote-timeout-ms 10000 \
  >"$TMP/master.out" 2>"$TMP/master.log" &
MPID=$!
PIDS+=("$MPID")
PORT=
for _ in $(seq 200); do
  PORT=$(sed -n 's/^PORT \([0-9]*\)$/\1/p' "$TMP/master.out" 2>/dev/null)
  [[ -n "$PORT" ]] && break
  sleep 0.05
done
[[ -n "$PORT" ]] || fail "master did not report its port"

declare -a PEER_PID
for i in $(seq 0 $((N - 1))); do
  PCCL_TRACE="$TMP/peer$i.trace" timeout 60 "$PEER" --url "tcp://127.0.0.1:$PORT" --index "$i" \
    --world $N --steps 3 --count 10000 >"$TMP/peer$i.out" 2>"$TMP/peer$i.log" &
  PEER_PID[$i]=$!
  PIDS+=($!)
done
for i in $(seq 0 $((N - 1))); do
  wait "${PEER_PID[$i]}" || fail "peer $i exited with an error"
done
grep -h SYNCED "$TMP"/peer*.out
# Graceful master shutdown: its trace gets the trailer.
kill -TERM "$MPID"
for _ in $(seq 200); do kill -0 "$MPID" 2>/dev/null || break; sleep 0.05; done
kill -0 "$MPID" 2>/dev/null && fail "master ignored SIGTERM"
wait "$MPID" || fail "master exited with an error after SIGTERM"

n=0
for t in "$TMP"/master.trace "$TMP"/peer*.trace; do
  [[ -s "$t" ]] || fail "no trace at $t"
  out=$("$SIM" --replay "$t")
  rc=$?
  echo "$out"
  [[ $rc -eq 0 ]] || fail "replay of $(basename "$t") exited $rc"
  grep -q "^replay: match$" <<<"$out" || fail "replay of $(basename "$t") did not match to the trailer"
  n=$((n + 1))
done
[[ $n -eq $((N + 1)) ]] || fail "expected $((N + 1)) traces, replayed $n"
grep -q "PCCL_TRACE: writing" "$TMP"/peer0.log || fail "peer 0 did not log its trace file"

# Several cores in one process.
PCCL_TRACE="$TMP/multi.trace" timeout 60 "$MULTI" >"$TMP/multi.out" 2>"$TMP/multi.log" ||
  fail "itest_trace_multi exited with an error"
[[ ! -e "$TMP/multi.trace.3" ]] || fail "more traces than cores"
for t in "$TMP/multi.trace" "$TMP/multi.trace.1" "$TMP/multi.trace.2"; do
  [[ -s "$t" ]] || fail "no trace at $t"
  out=$("$SIM" --replay "$t")
  rc=$?
  echo "$out"
  [[ $rc -eq 0 ]] && grep -q "^replay: match$" <<<"$out" || fail "replay of $(basename "$t"): $rc"
done

# A trace that cannot be opened or written turns tracing off with one log
# line; the process runs on and exits 0.
for bad in "$TMP/no/such/dir/x.trace" /dev/full; do
  # In the foreground under timeout (SIGTERM after 2 s, its exit status kept).
  # It once ran in the background, polled for '^PORT ' in bad.out and was then
  # sent SIGTERM: the second pass could read the first pass's PORT line before
  # the new master truncated the file, and signal it before it had blocked
  # SIGTERM (CI failed so once: "exited with an error").
  rc=0
  PCCL_TRACE="$bad" timeout --preserve-status -s TERM 2 "$MASTER" \
    --listen tcp://127.0.0.1:0 --print-port >"$TMP/bad.out" 2>"$TMP/bad.log" || rc=$?
  [[ $rc -eq 0 ]] || fail "master with PCCL_TRACE=$bad exited $rc after SIGTERM"
  grep -q '^PORT ' "$TMP/bad.out" || fail "master with PCCL_TRACE=$bad did not listen"
  [[ $(grep -c "tracing is off" "$TMP/bad.log") -eq 1 ]] ||
    fail "PCCL_TRACE=$bad: expected one log line turning tracing off"
  grep -h "tracing is off" "$TMP/bad.log"
done
echo "PASS: $n traces of a real run and 3 of one process replayed to their state hash"
