#!/usr/bin/env bash
# Runs PCCL's C++ "Hello World" (compiled unchanged by hello_world_compile.sh)
# to completion: a ccoip_master on 127.0.0.1:48148 (the port the example
# hard-codes) and 3 peers, each of which must exit 0 after "Reached revision".
# Skipped (exit 77) when the reference document is missing or port 48148 is
# busy. Every wait is bounded.
#
#   hello_world_run.sh EXAMPLES_MD INCLUDE_DIR LIBPCCL_SO OUT_DIR MASTER_BIN
set -u
MD=$1 INC=$2 LIB=$3 OUT=$4 MASTER=$5
PORT=48148
HERE=$(cd "$(dirname "$0")" && pwd)
"$HERE/hello_world_compile.sh" "$MD" "$INC" "$LIB" "$OUT" || exit $?
if (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; then
  echo "SKIP: port $PORT is busy (the example hard-codes it)"
  exit 77
fi
# A sanitizer build of libpccl needs its runtime loaded first in the
# (unsanitized) example process.
ASAN_RT=$(ldd "$LIB" 2>/dev/null | awk '/libasan/{print $3}')
[[ -n "$ASAN_RT" ]] && export LD_PRELOAD="$ASAN_RT"
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
  for f in "$TMP"/*; do echo "--- $f"; tail -n 30 "$f"; done
  exit 1
}
env -u LD_PRELOAD "$MASTER" --listen "tcp://127.0.0.1:$PORT" --print-port >"$TMP/master.out" 2>"$TMP/master.log" &
MPID=$!
PIDS+=("$MPID")
for _ in $(seq 100); do
  grep -q '^PORT' "$TMP/master.out" 2>/dev/null && break
  kill -0 "$MPID" 2>/dev/null || break
  sleep 0.05
done
if ! grep -q '^PORT' "$TMP/master.out" 2>/dev/null; then
  if grep -qi "in use\|address" "$TMP/master.log"; then
    echo "SKIP: port $PORT is busy (the example hard-codes it)"
    exit 77
  fi
  fail "master did not start"
fi
T0=$(date +%s%N)
PEERS=()
for i in 0 1 2; do
  timeout 60 "$OUT/hello_world" >"$TMP/peer$i.out" 2>"$TMP/peer$i.err" &
  PEERS+=($!)
  PIDS+=($!)
done
for i in 0 1 2; do
  wait "${PEERS[$i]}" || fail "hello world peer $i exited with status $?"
  grep -q "Reached revision" "$TMP/peer$i.out" || fail "peer $i did not reach the last revision"
  grep -q "Exiting" "$TMP/peer$i.out" || fail "peer $i did not exit cleanly"
done
T1=$(date +%s%N)
grep -h "Reached revision" "$TMP"/peer*.out
kill -TERM "$MPID"
for _ in $(seq 100); do kill -0 "$MPID" 2>/dev/null || break; sleep 0.05; done
kill -0 "$MPID" 2>/dev/null && fail "master ignored SIGTERM"
wait "$MPID" || fail "master exited with an error after SIGTERM"
echo "PASS: hello world, master + 3 peers, $(((T1 - T0) / 1000000)) ms"
