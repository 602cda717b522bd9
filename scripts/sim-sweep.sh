#!/bin/sh
# Swarm sweep of the simulator: runs pccl-sim --swarm over a seed range,
# split across the cores, and prints the reproduce line of every failure.
#   scripts/sim-sweep.sh [--sim PATH] [--seeds A:B] [--jobs N] [-- extra pccl-sim args]
# Exit: 0 when every seed passed, else the first failure's pccl-sim exit code.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
sim=$root/build-sim/sim/pccl-sim
seeds=1:500
jobs=$(nproc 2>/dev/null || echo 2)
while [ $# -gt 0 ]; do
    case $1 in
        --sim) sim=$2; shift 2 ;;
        --seeds) seeds=$2; shift 2 ;;
        --jobs) jobs=$2; shift 2 ;;
        --) shift; break ;;
        *) echo "usage: $0 [--sim PATH] [--seeds A:B] [--jobs N] [-- args]" >&2; exit 64 ;;
    esac
done
lo=${seeds%:*}
hi=${seeds#*:}
n=$((hi - lo + 1))
per=$(((n + jobs - 1) / jobs))
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
[ -x "$sim" ] || { echo "sim-sweep: no pccl-sim at $sim" >&2; exit 64; }
start=$(date +%s)
j=0
a=$lo
while [ "$a" -le "$hi" ]; do
    b=$((a + per - 1))
    [ "$b" -gt "$hi" ] && b=$hi
    ( if "$sim" --swarm --seeds "$a:$b" "$@" > "$tmp/out.$j" 2>&1; then echo 0; else echo $?; fi > "$tmp/rc.$j" ) &
    j=$((j + 1))
    a=$((b + 1))
done
wait
end=$(date +%s)
rc=0
fail=0
i=0
while [ "$i" -lt "$j" ]; do
    r=$(cat "$tmp/rc.$i")
    if [ "$r" != 0 ]; then
        [ "$rc" = 0 ] && rc=$r
        grep -E '^(seed=[0-9]+ (crash|liveness|correctness)|FAILED|reproduce:)' "$tmp/out.$i" || true
        fail=$((fail + $(grep -cE '^seed=[0-9]+ (crash|liveness|correctness)' "$tmp/out.$i" || true)))
    fi
    i=$((i + 1))
done
echo "sim-sweep: $n seeds ($seeds) on $j jobs in $((end - start)) s: $fail failed"
exit "$rc"
