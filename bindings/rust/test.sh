#!/usr/bin/env bash
# Tests of the Rust bindings against a pccl build tree:
#   bindings/rust/test.sh BUILD_DIR
# BUILD_DIR holds bindings/libpccl/libpccl.so and master/ccoip_master (cmake targets pccl and
# ccoip_master). Cargo builds into BUILD_DIR/rust-target, offline (no crates.io). Runs
#   1. cargo test: pccl-sys's ABI check against include/pccl.h, the safe crate's in-process
#      master + peers tests (all-reduce, shared state, the collective set, split), and its
#      doctests (including compile_fail ones);
#   2. the hello example (a master and three peers in one process);
#   3. three `peer` example processes against the ccoip_master executable (the cross-language
#      protocol of tests/crosslang, one peer starting with a divergent state): exact sums per
#      step, an exact broadcast, all-gather and reduce-scatter, one shared-state fingerprint, and
#      the divergent peer repaired at revision 0.
# Exits nonzero on any failure. CARGO selects the cargo binary (default: cargo on PATH).
set -euo pipefail

if [ $# -ne 1 ]; then
    echo "usage: $0 BUILD_DIR" >&2
    exit 2
fi
BUILD_DIR=$(cd "$1" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
CARGO=${CARGO:-cargo}
LIB_DIR="$BUILD_DIR/bindings/libpccl"
MASTER="$BUILD_DIR/master/ccoip_master"
[ -f "$LIB_DIR/libpccl.so" ] || { echo "rust: no $LIB_DIR/libpccl.so (build target pccl)" >&2; exit 2; }
[ -x "$MASTER" ] || { echo "rust: no $MASTER (build target ccoip_master)" >&2; exit 2; }

export PCCL_LIB_DIR="$LIB_DIR"
export CARGO_TARGET_DIR="$BUILD_DIR/rust-target"
export CARGO_NET_OFFLINE=true
export PCCL_LOG_LEVEL=${PCCL_LOG_LEVEL:-error}
WORK=$(mktemp -d)
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    rm -rf "$WORK"
}
trap cleanup EXIT

cd "$HERE"
echo "rust: $("$CARGO" --version)"
rc=0
timeout 240 "$CARGO" test --offline --workspace --no-fail-fast -j2 > "$WORK/test.log" 2>&1 || rc=$?
grep -E "^test |^test result" "$WORK/test.log" || true
if [ "$rc" -ne 0 ]; then
    echo "rust: cargo test failed with status $rc (log follows)" >&2
    cat "$WORK/test.log" >&2
    exit 1
fi

timeout 60 "$CARGO" run --offline -q --example hello > "$WORK/hello.out"
grep -q "^all 3 peers hold shared state [0-9a-f]\{16\}$" "$WORK/hello.out" || {
    echo "rust: hello example output unexpected:" >&2; cat "$WORK/hello.out" >&2; exit 1; }
echo "rust: hello ok: $(tail -1 "$WORK/hello.out")"

"$CARGO" build --offline -q --example peer
PEER="$CARGO_TARGET_DIR/debug/examples/peer"
timeout 60 "$MASTER" --listen tcp://127.0.0.1:0 --print-port > "$WORK/master.out" 2>"$WORK/master.err" &
PIDS+=($!)
PORT=""
for _ in $(seq 1 100); do
    PORT=$(awk '/^PORT/ {print $2}' "$WORK/master.out" 2>/dev/null || true)
    [ -n "$PORT" ] && break
    sleep 0.05
done
[ -n "$PORT" ] || { echo "rust: the master printed no port" >&2; exit 1; }
for v in 1 10 100; do
    extra=()
    [ "$v" = 100 ] && extra=(--diverge --verbose)
    timeout 60 "$PEER" --master "127.0.0.1:$PORT" --steps 3 --rank-value "$v" --world 3 "${extra[@]}" \
        > "$WORK/peer$v.out" 2> "$WORK/peer$v.err" &
    PIDS+=($!)
done
fail=0
for i in 1 2 3; do
    wait "${PIDS[$i]}" || { echo "rust: peer $i failed:" >&2; cat "$WORK"/peer*.err >&2; fail=1; }
done
[ "$fail" = 0 ] || exit 1
# After the steps, a broadcast from rank 0, an all-gather and a reduce-scatter (tests/crosslang):
# ranks are ring positions, read from each peer's bcast line; C = 8 elements, values sum to 111.
VAL_OF=()
for v in 1 10 100; do
    r=$(awk '/^bcast rank / {print $3}' "$WORK/peer$v.out")
    [ -n "$r" ] || { echo "rust: peer $v printed no bcast line" >&2; cat "$WORK/peer$v.out" >&2; exit 1; }
    VAL_OF[$r]=$v
done
[ -n "${VAL_OF[0]:-}" ] && [ -n "${VAL_OF[1]:-}" ] && [ -n "${VAL_OF[2]:-}" ] ||
    { echo "rust: the peers' ranks are not 0, 1, 2" >&2; exit 1; }
seq_join() { local IFS=,; echo "$*"; }
for v in 1 10 100; do
    r=$(awk '/^bcast rank / {print $3}' "$WORK/peer$v.out")
    b=(); g=(); s=()
    for j in $(seq 0 7); do b+=($((1000 * VAL_OF[0] + j))); s+=($((111 * (r * 8 + j + 1)))); done
    for k in $(seq 0 23); do g+=($((VAL_OF[k / 8] * 100 + k % 8))); done
    {
        echo "step 0 world 3 sum 111,114,117,120,123,126,129,132"
        echo "step 1 world 3 sum 222,225,228,231,234,237,240,243"
        echo "step 2 world 3 sum 333,336,339,342,345,348,351,354"
        echo "bcast rank $r world 3 data $(seq_join "${b[@]}")"
        echo "allgather rank $r world 3 data $(seq_join "${g[@]}")"
        echo "reducescatter rank $r world 3 data $(seq_join "${s[@]}")"
        echo "hash 484dfb342d13cb7d"
    } > "$WORK/want$v"
    diff -u "$WORK/want$v" "$WORK/peer$v.out" || { echo "rust: peer $v output differs" >&2; exit 1; }
done
grep -q "^peer: revision 0 rx 32 tx 0$" "$WORK/peer100.err" || {
    echo "rust: the divergent peer did not receive its 32 bytes at revision 0:" >&2; cat "$WORK/peer100.err" >&2; exit 1; }
grep -q "^peer: revision 3 rx 0 tx 0$" "$WORK/peer100.err" || {
    echo "rust: the divergent peer's final synchronization moved data:" >&2; cat "$WORK/peer100.err" >&2; exit 1; }
echo "rust: 3 peer processes: exact sums, identical shared state"
echo "rust: all ok"
