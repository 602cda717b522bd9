#!/usr/bin/env bash
# The cross-language ring (issue 8): a C, a Python, a Go and a Rust peer join one ccoip_master
# and run the same protocol together:
#   tests/crosslang/run.sh BUILD_DIR [PEER_C]
# BUILD_DIR holds bindings/libpccl/libpccl.so and master/ccoip_master (cmake targets pccl and
# ccoip_master); PEER_C is the C peer (default BUILD_DIR/tests/crosslang/peer_c). The script
# builds the Go peer (bindings/go/cmd/pcclpeer, offline, caches under BUILD_DIR/go) and the Rust
# peer (example `peer`, offline, CARGO_TARGET_DIR=BUILD_DIR/rust-target, shared with
# bindings/rust/test.sh), runs tests/crosslang/peer.py with /usr/bin/python3, then a master and
# the four peers with rank values 1..4, world 4, K steps. Every peer follows
#   connect; update the topology until the world is 4; for s in 0..K-1: update_topology;
#   sync the shared state (int32 "state" of C elements, revision s, ENFORCE_POPULAR);
#   all-reduce SUM of v[j] = V*(s+1)+j; print "step s world W sum ..."; state += sum;
#   then, on the epoch of the last completed call, three ops of the collective set on int32
#   buffers, each printing "OP rank R world W data ..." with the rank R and world W it reports
#   (a call failing with UpdateTopologyFailed updates the topology and is sized and run again):
#     bcast          broadcast from rank 0 of C elements, the root's holding 1000*V+j;
#     allgather      all-gather of V*100+j (C elements each): all W*C elements printed;
#     reducescatter  SUM reduce-scatter of W*C elements V*(k+1): this rank's block printed;
#   then sync revision K and print "hash H" (FNV-1a 64 of the state's little-endian bytes).
# The Go peer starts with a divergent state (all 3) that the first synchronization repairs.
# Ranks are ring positions, not values: the script takes each peer's rank from its bcast line,
# requires the four ranks to be 0..3 and the same on all three lines, and computes every line
# from that rank -> value map (block r of the all-gather is rank r's V*100+j; the broadcast
# carries rank 0's 1000*V+j; rank R's reduce-scatter block is sum(V)*(R*C+j+1)).
# Passes when every peer printed exactly the sums, collective results and hash this script
# computes itself, and the Go peer received its whole state at revision 0 and nothing later.
# Exit status: 0 pass, 1 failure, 2 usage, 77 go or cargo missing (skip).
# Environment: CROSSLANG_STEPS (default 5), CROSSLANG_COUNT (default 8), GO, CARGO, PYTHON.
set -euo pipefail

if [ $# -lt 1 ] || [ $# -gt 2 ]; then
    echo "usage: $0 BUILD_DIR [PEER_C]" >&2
    exit 2
fi
BUILD_DIR=$(cd "$1" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
PEER_C=${2:-$BUILD_DIR/tests/crosslang/peer_c}
LIB_DIR="$BUILD_DIR/bindings/libpccl"
MASTER="$BUILD_DIR/master/ccoip_master"
GO=${GO:-go}
CARGO=${CARGO:-cargo}
PYTHON=${PYTHON:-/usr/bin/python3}
STEPS=${CROSSLANG_STEPS:-5}
COUNT=${CROSSLANG_COUNT:-8}
WORLD=4
VALUES=(1 2 3 4)
NAMES=(c python go rust)

[ -f "$LIB_DIR/libpccl.so" ] || { echo "crosslang: no $LIB_DIR/libpccl.so (build target pccl)" >&2; exit 2; }
[ -x "$MASTER" ] || { echo "crosslang: no $MASTER (build target ccoip_master)" >&2; exit 2; }
[ -x "$PEER_C" ] || { echo "crosslang: no C peer $PEER_C" >&2; exit 2; }
command -v "$GO" > /dev/null 2>&1 || { echo "crosslang: SKIP: go is not installed" >&2; exit 77; }
command -v "$CARGO" > /dev/null 2>&1 || { echo "crosslang: SKIP: cargo is not installed" >&2; exit 77; }
[ -x "$PYTHON" ] || { echo "crosslang: no $PYTHON" >&2; exit 1; }

WORK=$(mktemp -d "${TMPDIR:-/tmp}/pccl-crosslang.XXXXXX")
PIDS=()
# Children run under timeout(1), which passes SIGTERM on to its command (SIGKILL would orphan it).
cleanup() {
    local p alive=0
    for p in "${PIDS[@]}"; do kill -TERM "$p" 2> /dev/null && alive=1; done
    if [ "$alive" = 1 ]; then
        sleep 0.5
        for p in "${PIDS[@]}"; do pkill -KILL -P "$p" 2> /dev/null || true; kill -KILL "$p" 2> /dev/null || true; done
    fi
    for p in "${PIDS[@]}"; do wait "$p" 2> /dev/null || true; done
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
export PCCL_LOG_LEVEL=${PCCL_LOG_LEVEL:-error}

# --- build the Go and Rust peers (offline; Go against this build tree, not pkg-config) --------
t0=$(date +%s)
mkdir -p "$BUILD_DIR/go/cache" "$BUILD_DIR/go/path"
GO_PEER="$BUILD_DIR/crosslang/pcclpeer"
mkdir -p "$BUILD_DIR/crosslang"
if ! (cd "$ROOT/bindings/go" &&
    GOCACHE="$BUILD_DIR/go/cache" GOPATH="$BUILD_DIR/go/path" GOFLAGS=-mod=mod GOPROXY=off \
        GO111MODULE=on CGO_ENABLED=1 CGO_LDFLAGS="-L$LIB_DIR -Wl,-rpath,$LIB_DIR" \
        timeout 60 "$GO" build -tags pccl_no_pkgconfig -o "$GO_PEER" ./cmd/pcclpeer) \
        > "$WORK/go-build.log" 2>&1; then
    echo "crosslang: go build of pcclpeer failed:" >&2
    cat "$WORK/go-build.log" >&2
    exit 1
fi
RUST_TARGET="$BUILD_DIR/rust-target"
if ! (cd "$ROOT/bindings/rust" &&
    PCCL_LIB_DIR="$LIB_DIR" CARGO_TARGET_DIR="$RUST_TARGET" CARGO_NET_OFFLINE=true \
        timeout 120 "$CARGO" build --offline -q -j2 --example peer) > "$WORK/cargo-build.log" 2>&1; then
    echo "crosslang: cargo build of the peer example failed:" >&2
    cat "$WORK/cargo-build.log" >&2
    exit 1
fi
RUST_PEER="$RUST_TARGET/debug/examples/peer"
echo "crosslang: go and rust peers built in $(($(date +%s) - t0)) s"

# --- the expected output, computed independently of the peers ---------------------------------
"$PYTHON" - "$STEPS" "$COUNT" "$WORLD" "${VALUES[@]}" > "$WORK/want" << 'PY'
import struct, sys
steps, count, world = (int(x) for x in sys.argv[1:4])
values = [int(x) for x in sys.argv[4:]]
wrap = lambda x: (x + 2**31) % 2**32 - 2**31
state = [0] * count
for s in range(steps):
    total = [wrap(sum(v * (s + 1) + j for v in values)) for j in range(count)]
    state = [wrap(a + b) for a, b in zip(state, total)]
    print(f"step {s} world {world} sum {','.join(map(str, total))}")
h = 0xcbf29ce484222325
for b in struct.pack(f"<{count}i", *state):
    h = ((h ^ b) * 0x100000001b3) % 2**64
print(f"hash {h:016x}")
PY

# --- master and peers ---------------------------------------------------------------------------
timeout 75 "$MASTER" --listen tcp://127.0.0.1:0 --print-port > "$WORK/master.out" 2> "$WORK/master.err" &
PIDS+=($!)
PORT=""
for _ in $(seq 1 200); do
    PORT=$(awk '/^PORT/ {print $2}' "$WORK/master.out" 2> /dev/null || true)
    [ -n "$PORT" ] && break
    sleep 0.05
done
[ -n "$PORT" ] || { echo "crosslang: the master printed no port" >&2; cat "$WORK/master.err" >&2; exit 1; }
ADDR="127.0.0.1:$PORT"

common() { # VALUE: sets ARGS to the flags every peer takes
    ARGS=(--master "$ADDR" --steps "$STEPS" --rank-value "$1" --world "$WORLD" --count "$COUNT")
}
PEER_PIDS=()
start() { # name command...
    local name=$1
    shift
    timeout 45 "$@" > "$WORK/$name.out" 2> "$WORK/$name.err" &
    PIDS+=($!)
    PEER_PIDS+=($!)
}
common "${VALUES[0]}"
start c "$PEER_C" "${ARGS[@]}" --timeout-ms 30000
common "${VALUES[1]}"
start python env PYTHONPATH="$ROOT/bindings/python" PCCL_LIBRARY="$LIB_DIR/libpccl.so" \
    "$PYTHON" "$HERE/peer.py" "${ARGS[@]}" --timeout-ms 30000
common "${VALUES[2]}"
# The Go peer starts with a divergent state (all V): the first synchronization must repair it
# from the others' (popular) zeros, across languages.
start go "$GO_PEER" "${ARGS[@]}" --timeout 30s --diverge --verbose
common "${VALUES[3]}"
start rust "$RUST_PEER" "${ARGS[@]}" --timeout-ms 30000

fail=0
for i in 0 1 2 3; do
    rc=0
    wait "${PEER_PIDS[$i]}" || rc=$?
    if [ "$rc" -ne 0 ]; then
        echo "crosslang: the ${NAMES[$i]} peer (value ${VALUES[$i]}) exited with status $rc" >&2
        fail=1
    fi
done
# The collectives' lines: each peer's rank from its bcast line; the ranks must be 0..3.
RANKS=()
for i in 0 1 2 3; do
    RANKS+=("$(awk '$1 == "bcast" && $2 == "rank" {print $3; exit}' "$WORK/${NAMES[$i]}.out")")
done
if [ "$(printf '%s\n' "${RANKS[@]}" | sort -n | tr '\n' ' ')" != "0 1 2 3 " ]; then
    echo "crosslang: the peers' bcast ranks (c, python, go, rust) are '${RANKS[*]}', not 0..3" >&2
    fail=1
fi
for i in 0 1 2 3; do
    "$PYTHON" - "$COUNT" "$WORLD" "$i" "${VALUES[@]}" "${RANKS[@]}" > "$WORK/coll.$i" << 'PY'
import sys
count, world, me = (int(x) for x in sys.argv[1:4])
values = [int(x) for x in sys.argv[4:4 + world]]
ranks = [int(x) if x.lstrip("-").isdigit() else -1 for x in sys.argv[4 + world:4 + 2 * world]]
by_rank = {r: v for r, v in zip(ranks, values)}
val = lambda r: by_rank.get(r, 0)  # a missing rank: the check above already failed
wrap = lambda x: (x + 2**31) % 2**32 - 2**31
r = ranks[me]
csv = lambda xs: ",".join(str(wrap(x)) for x in xs)
print(f"bcast rank {r} world {world} data {csv(val(0) * 1000 + j for j in range(count))}")
print(f"allgather rank {r} world {world} data "
      f"{csv(val(b) * 100 + j for b in range(world) for j in range(count))}")
print(f"reducescatter rank {r} world {world} data "
      f"{csv(sum(values) * (r * count + j + 1) for j in range(count))}")
PY
    { head -n "$STEPS" "$WORK/want"; cat "$WORK/coll.$i"; tail -n 1 "$WORK/want"; } \
        > "$WORK/want.$i"
done
for i in 0 1 2 3; do
    n=${NAMES[$i]}
    if ! diff -u "$WORK/want.$i" "$WORK/$n.out" > "$WORK/$n.diff"; then
        echo "crosslang: the $n peer's output differs from the expected one:" >&2
        cat "$WORK/$n.diff" >&2
        fail=1
    fi
done
# The divergent Go peer received its whole state (4 bytes per element) at revision 0 and nothing
# afterwards; any other outcome would have changed its sums-based hash only by luck.
want_rx="pcclpeer: revision 0 rx $((4 * COUNT)) tx 0"
for r in $(seq 1 "$STEPS"); do want_rx="$want_rx
pcclpeer: revision $r rx 0 tx 0"; done
if [ "$(grep '^pcclpeer: revision' "$WORK/go.err" || true)" != "$want_rx" ]; then
    echo "crosslang: the divergent go peer's synchronizations differ from:" >&2
    echo "$want_rx" >&2
    fail=1
fi
if [ "$fail" -ne 0 ]; then
    for n in "${NAMES[@]}"; do
        [ -s "$WORK/$n.err" ] && { echo "--- $n stderr:" >&2; tail -20 "$WORK/$n.err" >&2; }
    done
    echo "--- master stderr:" >&2
    tail -20 "$WORK/master.err" >&2
    echo "crosslang: FAILED" >&2
    exit 1
fi
echo "crosslang: c, python, go and rust peers: $STEPS steps, exact sums, world $WORLD, divergent go state repaired, $(tail -1 "$WORK/want")"
echo "crosslang: broadcast, all-gather and reduce-scatter exact at ranks (c, python, go, rust) ${RANKS[*]}"
echo "crosslang: ok in $(($(date +%s) - t0)) s"
