#!/usr/bin/env bash
# Integration scenarios on 127.0.0.1 with real processes (ctest label
# "integration"). Every wait is bounded; every process is killed on exit.
#
#   run.sh MASTER_BIN PEER_BIN SCENARIO [N] [POOL]
#
# Scenarios: allreduce N | kill-peer | kill-peer-small N | mismatch N | algo N | stop-peer |
#            kill-peer-mid-op |
#            master-death | garbage |
#            optimize N | sync | concurrent N | ipc-allreduce N | ipc-sync | tls-allreduce N
# POOL: every peer's p2p_connection_pool_size (default 0, i.e. the runtime's default, 2).
# concurrent: two async all-reduces per step issued in opposite tag orders by
#             even and odd peers (4 MiB each): both complete with exact sums.
# ipc-*: the master listens on ipc://$TMP/master.sock (peer links stay tcp).
# tls-*: the master listens on tls+tcp://127.0.0.1:0 with a self-signed
#        certificate made here by openssl (PCCL_TLS_CERT/KEY/CA); peers verify it.
set -u
MASTER=$1
PEER=$2
SCENARIO=$3
N=${4:-2}
POOL=${5:-0}
# Eviction bound (ms); sanitizer runs may scale it (tsan.sh does).
EVICT_MS=${PCCL_ITEST_EVICT_MS:-1000}
TMP=$(mktemp -d)
PIDS=()
WD=
cleanup() {
  [[ -n "$WD" ]] && kill -TERM "$WD" 2>/dev/null
  for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done
  wait 2>/dev/null
  if [[ -n "${PCCL_ITEST_KEEP:-}" ]]; then echo "logs kept in $TMP"; else rm -rf "$TMP"; fi
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*"
  for f in "$TMP"/*.out "$TMP"/*.log; do echo "--- $f"; tail -n 40 "$f"; done
  exit 1
}
export PCCL_LOG_LEVEL=${PCCL_LOG_LEVEL:-INFO}

MASTER_TRANSPORT=tcp
case "$SCENARIO" in
ipc-*) MASTER_TRANSPORT=ipc SCENARIO=${SCENARIO#ipc-} ;;
tls-*) MASTER_TRANSPORT=tls SCENARIO=${SCENARIO#tls-} ;;
esac

make_cert() { # DIR NAME: a self-signed P-256 certificate for DNS:localhost
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
    -subj /CN=localhost -addext subjectAltName=DNS:localhost \
    -keyout "$1/$2.key" -out "$1/$2.pem" >/dev/null 2>&1 || fail "openssl cannot make a certificate"
}

start_master() {
  local listen=tcp://127.0.0.1:0
  case "$MASTER_TRANSPORT" in
  ipc) listen=ipc://$TMP/master.sock ;;
  tls)
    command -v openssl >/dev/null || fail "openssl is not installed"
    make_cert "$TMP" ca
    # mbedTLS 2 matches DNS names only: verify the master as "localhost".
    export PCCL_TLS_CERT=$TMP/ca.pem PCCL_TLS_KEY=$TMP/ca.key PCCL_TLS_CA=$TMP/ca.pem
    export PCCL_TLS_SERVER_NAME=localhost
    listen=tls+tcp://127.0.0.1:0
    ;;
  esac
  "$MASTER" --listen "$listen" --print-port --heartbeat-ms 100 --evict-ms $EVICT_MS \
    --vote-timeout-ms 10000 >"$TMP/master.out" 2>"$TMP/master.log" &
  MPID=$!
  PIDS+=("$MPID")
  for _ in $(seq 100); do
    PORT=$(sed -n 's/^PORT \([0-9]*\)$/\1/p' "$TMP/master.out" 2>/dev/null)
    [[ -n "$PORT" ]] && break
    sleep 0.05
  done
  [[ -n "${PORT:-}" ]] || fail "master did not report its port"
  case "$MASTER_TRANSPORT" in
  ipc) URL=ipc://$TMP/master.sock ;;
  tls) URL="tls+tcp://127.0.0.1:$PORT" ;;
  *) URL="tcp://127.0.0.1:$PORT" ;;
  esac
}

start_peer() { # index world mode steps count
  "$PEER" --url "$URL" --index "$1" --world "$2" --mode "$3" --steps "$4" --count "$5" \
    --evict-ms $EVICT_MS --pool "$POOL" >"$TMP/peer$1.out" 2>"$TMP/peer$1.log" &
  PIDS+=($!)
  PEER_PID[$1]=$!
}

wait_line() { # file pattern seconds
  for _ in $(seq $(($3 * 20))); do
    grep -q "$2" "$1" 2>/dev/null && return 0
    sleep 0.05
  done
  return 1
}

wait_peers() { # first last
  local rc=0
  for i in $(seq "$1" "$2"); do
    if ! wait "${PEER_PID[$i]}"; then echo "peer $i exited with an error"; rc=1; fi
  done
  return $rc
}

declare -A PEER_PID
# Watchdog: the whole scenario is bounded; on expiry print the logs and fail.
BUDGET=${PCCL_ITEST_BUDGET:-25}
trap 'fail "watchdog: scenario exceeded ${BUDGET}s"' USR1
(
  trap 'kill "$S" 2>/dev/null; exit 0' TERM
  sleep "$BUDGET" &
  S=$!
  wait "$S" && kill -USR1 $$
) >/dev/null 2>&1 &
WD=$!
start_master
case "$SCENARIO" in
allreduce)
  # Over TLS the p2p links are tls+tcp:// too (PCCL_TLS_P2P): DEBUG logs show every dial.
  [[ "$MASTER_TRANSPORT" == tls ]] && export PCCL_LOG_LEVEL=DEBUG
  for i in $(seq 0 $((N - 1))); do start_peer "$i" "$N" normal 6 100000; done
  wait_peers 0 $((N - 1)) || fail "allreduce with $N peers"
  if [[ "$MASTER_TRANSPORT" == tls ]]; then
    unset PCCL_LOG_LEVEL
    # Every peer dialled its ring neighbour over TLS (a port other than the master's), and
    # nothing was dialled in plain tcp://.
    for i in $(seq 0 $((N - 1))); do
      grep -E "dialing tls\+tcp://127\.0\.0\.1:[0-9]+" "$TMP/peer$i.log" \
        | grep -v -q ":$PORT\$" || fail "peer $i dialled no p2p link over tls+tcp://"
      ! grep -q "dialing tcp://" "$TMP/peer$i.log" || fail "peer $i dialled a plain tcp:// link"
    done
    echo "p2p links over TLS: ok"
    # PCCL_TLS_P2P=0 keeps them plain: a second world of two peers so configured.
    for i in 0 1; do
      PCCL_TLS_P2P=0 PCCL_LOG_LEVEL=DEBUG start_peer "$i" 2 normal 2 1000
    done
    wait_peers 0 1 || fail "allreduce with PCCL_TLS_P2P=0"
    grep -q "dialing tcp://127\.0\.0\.1:" "$TMP/peer0.log" "$TMP/peer1.log" \
      || fail "PCCL_TLS_P2P=0: no plain tcp:// p2p link"
    echo "PCCL_TLS_P2P=0 p2p links over tcp: ok"

    # Refused: a peer trusting another CA, a peer without a client
    # certificate (the master requires one: PCCL_TLS_CA is set), a peer
    # checking another name, and plain tcp:// to the TLS port. Each connect
    # must fail (exit 2 with result 6, pcclMasterConnectionFailed) at once.
    make_cert "$TMP" other
    refused() { # label env... (runs a peer of a 1-peer world)
      local label=$1
      shift
      env "$@" "$PEER" --url "${TLS_URL:-$URL}" --index 9 --world 1 --mode normal --steps 1 \
        --count 10 >"$TMP/refused.out" 2>"$TMP/refused.log"
      local rc=$?
      TLS_URL=
      [[ $rc -eq 2 ]] && grep -q "connect: 6" "$TMP/refused.log" \
        || fail "$label: exit $rc, want a refused connect"
      echo "refused as expected: $label"
    }
    refused "untrusted CA" PCCL_TLS_CA="$TMP/other.pem"
    refused "no client certificate" PCCL_TLS_CERT= PCCL_TLS_KEY=
    refused "client certificate of another CA" PCCL_TLS_CERT="$TMP/other.pem" \
      PCCL_TLS_KEY="$TMP/other.key"
    refused "wrong server name" PCCL_TLS_SERVER_NAME=elsewhere
    TLS_URL="tcp://127.0.0.1:$PORT"
    refused "plain tcp to the TLS port"
  fi
  ;;
kill-peer)
  for i in 0 1; do start_peer "$i" 3 survivor 3 1000000; done
  start_peer 2 3 survivor 1000000 1000000
  wait_line "$TMP/peer2.out" REDUCING 20 || fail "victim never reduced"
  sleep 0.3
  kill -9 "${PEER_PID[2]}"
  wait_peers 0 1 || fail "survivors"
  grep -h -E "LOST|SHRUNK" "$TMP"/peer[01].out
  ;;
stop-peer)
  # A SIGSTOPped peer keeps its sockets open: only the heartbeat deadline
  # (evict_ms) can remove it. Survivors must see the loss within the bound
  # and finish on the shrunken ring; the frozen peer is killed at the end.
  for i in 0 1; do start_peer "$i" 3 survivor 3 1000000; done
  start_peer 2 3 survivor 1000000 1000000
  wait_line "$TMP/peer2.out" REDUCING 20 || fail "victim never reduced"
  sleep 0.3
  kill -STOP "${PEER_PID[2]}"
  wait_peers 0 1 || fail "survivors"
  grep -h -E "LOST|SHRUNK" "$TMP"/peer[01].out
  kill -9 "${PEER_PID[2]}" 2>/dev/null
  ;;
kill-peer-small)
  # Issue 7's small-message path (optimistic start, inline kernels): back-to-back
  # 4 KiB all-reduces with exact sums; the peer with the highest index is
  # SIGKILLed mid-stream; the survivors see the loss (or a shrunken ring) and
  # then run 300 more exact ones.
  for i in $(seq 0 $((N - 2))); do start_peer "$i" "$N" survivor 300 1024; done
  start_peer $((N - 1)) "$N" survivor 1000000 1024
  wait_line "$TMP/peer$((N - 1)).out" REDUCING 20 || fail "victim never reduced"
  sleep 0.5
  kill -9 "${PEER_PID[$((N - 1))]}"
  wait_peers 0 $((N - 2)) || fail "survivors"
  grep -h -E "LOST|SHRUNK" "$TMP"/peer*.out
  ;;
algo)
  # Forced algorithms (docs/algorithms.md): 20 steps of 1024 int32 (the relay takes them),
  # each algorithm 3 times; every fourth step the first peer disagrees: pcclInvalidUsage
  # everywhere.
  for i in $(seq 0 $((N - 1))); do start_peer "$i" "$N" algo 20 1024; done
  wait_peers 0 $((N - 1)) || fail "peers"
  grep -h DONE "$TMP"/peer*.out
  [[ $(grep -c "refused 5 ring 3 striped 3 direct 3 hd 3 relay 3" "$TMP"/peer*.out |
       awk -F: '{s += $2} END {print s}') -eq $N ]] || fail "not every peer ran every algorithm"
  ;;
mismatch)
  for i in $(seq 0 $((N - 1))); do start_peer "$i" "$N" mismatch 30 1024; done
  wait_peers 0 $((N - 1)) || fail "peers"
  grep -h DONE "$TMP"/peer*.out
  [[ $(grep -c "refused 10" "$TMP"/peer*.out | awk -F: '{s += $2} END {print s}') -eq $N ]] \
    || fail "not every peer saw 10 refusals"
  ;;
kill-peer-mid-op)
  # The victim dies inside its 4th all-reduce: the survivors' copy of that
  # operation must fail with pcclRankConnectionLost, then succeed on 2 peers.
  # The victim waits until its operation has commenced (its receive buffer
  # changes), then dies 2 ms later: with 64 MiB operations that lands
  # inside the ring.
  for i in 0 1; do start_peer "$i" 3 survivor 3 16000000; done
  start_peer 2 3 victim 3 16000000
  wait_peers 0 1 || fail "survivors"
  grep -h -E "LOST|SHRUNK" "$TMP"/peer[01].out
  grep -q LOST "$TMP"/peer0.out "$TMP"/peer1.out || fail "no survivor saw pcclRankConnectionLost"
  ;;
master-death)
  for i in 0 1; do start_peer "$i" 2 master-death 0 100000; done
  wait_line "$TMP/peer0.out" REDUCING 20 || fail "peers never reduced"
  wait_line "$TMP/peer1.out" REDUCING 20 || fail "peers never reduced"
  sleep 0.3
  kill -9 "$MPID"
  wait_peers 0 1 || fail "peers after master death"
  ;;
garbage)
  trap '' PIPE
  for i in 0 1; do start_peer "$i" 2 normal 30 10000; done
  wait_line "$TMP/peer0.out" REDUCING 20 || fail "peers never reduced"
  exec 3<>"/dev/tcp/127.0.0.1/$PORT" || fail "cannot open a raw connection"
  printf 'GET / HTTP/1.1\r\nHost: x\r\n\r\nthis is not a ccoip frame at all' >&3 2>/dev/null
  # The master must close the garbage connection: reading it ends (EOF or
  # reset) well before the 5 s bound.
  timeout 5 cat <&3 >/dev/null 2>&1
  [[ $? -ne 124 ]] || fail "garbage connection was not closed"
  exec 3<&-
  wait_peers 0 1 || fail "peers after garbage"
  grep -q "malformed" "$TMP/master.log" || fail "no log line for the garbage"
  kill -0 "$MPID" || fail "master died"
  ;;
optimize)
  for i in $(seq 0 $((N - 1))); do start_peer "$i" "$N" optimize 6 100000; done
  wait_peers 0 $((N - 1)) || fail "optimize topology with $N peers"
  grep -h OPTIMIZED "$TMP"/peer*.out
  ;;
striped)
  for i in $(seq 0 $((N - 1))); do start_peer "$i" "$N" striped 4 1000000; done
  wait_peers 0 $((N - 1)) || fail "striped all-reduces with $N peers, pool $POOL"
  ;;
concurrent)
  for i in $(seq 0 $((N - 1))); do start_peer "$i" "$N" concurrent 4 1000000; done
  wait_peers 0 $((N - 1)) || fail "concurrent all-reduces with $N peers, pool $POOL"
  grep -h CONCURRENT "$TMP"/peer*.out
  ;;
sync)
  # 3 peers (peer 2 divergent), then a late joiner (index 3) after revision 1.
  for i in 0 1 2; do start_peer "$i" 3 sync 0 100000; done
  for i in 0 1 2; do wait_line "$TMP/peer$i.out" SYNCED1 20 || fail "peer $i never synced revision 1"; done
  start_peer 3 4 sync-late 0 100000
  wait_peers 0 3 || fail "shared-state sync"
  grep -h SYNCED "$TMP"/peer*.out
  ;;
*)
  fail "unknown scenario $SCENARIO"
  ;;
esac
if [[ "$SCENARIO" != master-death ]]; then
  # Graceful shutdown on SIGTERM: exit status 0 within 5 s.
  kill -TERM "$MPID"
  for _ in $(seq 100); do kill -0 "$MPID" 2>/dev/null || break; sleep 0.05; done
  kill -0 "$MPID" 2>/dev/null && fail "master ignored SIGTERM"
  wait "$MPID" || fail "master exited with an error after SIGTERM"
fi
echo "PASS: $MASTER_TRANSPORT $SCENARIO $N pool $POOL"
