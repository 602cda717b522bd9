#!/usr/bin/env bash
# Launches one pccl all-reduce benchmark run on 127.0.0.1: a ccoip_master on a
# free port and N pccl_allreduce_bench peers (indices 0..N-1). Peer 0's table
# goes to stdout; the other peers' and the master's output to a temporary
# directory that is printed (tail) when something fails. Bounded in time; every
# process it starts is killed on exit.
#
#   pccl_launch.sh BUILD_DIR N [pccl_allreduce_bench arguments...]
#
# Environment: PCCL_BENCH_BUDGET (seconds, default 900) bounds the whole run.
# PCCL_BENCH_PEER: another peer program (bench/collectives/launch.sh runs
# pccl_coll_bench through this script); PCCL_BENCH_ALL_STDOUT=1: every peer's
# stdout goes to stdout (the collectives' table comes from the peer that gets
# rank 0, not index 0). PCCL_BENCH_TESTBED=NAME: across the WAN testbed NAME
# that is up (scripts/wan-testbed.sh up --name NAME --peers >= N; docs/wan.md):
# the master in its namespace on its testbed address, peer i in namespace p<i>,
# so every control and data byte crosses the delay line (bench/wan/wan_launch.sh).
# PCCL_BENCH_LOGS=DIR: the master's and peers' logs are copied there at the end;
# PCCL_BENCH_MASTER_LOG: the master's --log-level (default WARN).
set -u
BUILD=$1
N=$2
shift 2
TESTBED=${PCCL_BENCH_TESTBED:-}
TB="$(cd "$(dirname "$0")/../.." && pwd)/scripts/wan-testbed.sh"
# on NODE CMD...: runs CMD (exec: a background `on` is CMD's own pid), in NODE's namespace of
# the testbed when there is one.
on() {
  local node=$1
  shift
  if [[ -n $TESTBED ]]; then exec "$TB" exec "$node" --name "$TESTBED" -- "$@"; fi
  exec "$@"
}
MASTER="$BUILD/master/ccoip_master"
PEER="${PCCL_BENCH_PEER:-$BUILD/bench/allreduce/pccl_allreduce_bench}"
for f in "$MASTER" "$PEER"; do
  [[ -x "$f" ]] || { echo "pccl_launch: $f is missing (build it first)" >&2; exit 2; }
done
TMP=$(mktemp -d)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done
  wait 2>/dev/null
  [[ -n ${PCCL_BENCH_LOGS:-} ]] && mkdir -p "$PCCL_BENCH_LOGS" && cp "$TMP"/* "$PCCL_BENCH_LOGS"/
  rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
fail() {
  echo "pccl_launch: FAIL: $*" >&2
  for f in "$TMP"/*; do echo "--- $f" >&2; tail -n 20 "$f" >&2; done
  exit 1
}

MADDR=127.0.0.1
if [[ -n $TESTBED ]]; then MADDR=$("$TB" addr m --name "$TESTBED") || fail "testbed $TESTBED"; fi
PCCL_LOG_LEVEL=${PCCL_LOG_LEVEL:-WARN} on m "$MASTER" --listen "tcp://$MADDR:0" --print-port \
  --log-level "${PCCL_BENCH_MASTER_LOG:-WARN}" >"$TMP/master.out" 2>"$TMP/master.log" &
PIDS+=($!)
PORT=
for _ in $(seq 200); do
  PORT=$(sed -n 's/^PORT \([0-9]*\)$/\1/p' "$TMP/master.out" 2>/dev/null)
  [[ -n "$PORT" ]] && break
  sleep 0.05
done
[[ -n "$PORT" ]] || fail "master did not report its port"
URL="tcp://$MADDR:$PORT"

declare -a PEER_PIDS
for i in $(seq 0 $((N - 1))); do
  if [[ $i -eq 0 || ${PCCL_BENCH_ALL_STDOUT:-0} == 1 ]]; then
    PCCL_LOG_LEVEL=${PCCL_LOG_LEVEL:-WARN} on "p$i" "$PEER" --url "$URL" --index "$i" \
      --world "$N" "$@" 2>"$TMP/peer$i.log" &
  else
    PCCL_LOG_LEVEL=${PCCL_LOG_LEVEL:-WARN} on "p$i" "$PEER" --url "$URL" --index "$i" \
      --world "$N" "$@" >"$TMP/peer$i.out" 2>"$TMP/peer$i.log" &
  fi
  PEER_PIDS[$i]=$!
  PIDS+=($!)
done

# Watchdog: bounded run.
BUDGET=${PCCL_BENCH_BUDGET:-900}
(
  trap 'kill "$S" 2>/dev/null; exit 0' TERM
  sleep "$BUDGET" &
  S=$!
  wait "$S" || exit 0
  touch "$TMP/timeout"
  for p in "${PEER_PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done
) >/dev/null 2>&1 &
WD=$!
PIDS+=($WD)

RC=0
for i in $(seq 0 $((N - 1))); do
  if ! wait "${PEER_PIDS[$i]}"; then
    RC=1
    echo "pccl_launch: peer $i exited with an error" >&2
  fi
done
kill "$WD" 2>/dev/null
[[ -e "$TMP/timeout" ]] && fail "run exceeded ${BUDGET}s"
[[ $RC -eq 0 ]] || fail "a peer failed"
exit 0
