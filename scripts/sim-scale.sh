#!/bin/sh
# The simulator at scale (issue 5): 10,000 peers in peer groups of 16,
# 64-float tensors, about 1 % of peers replaced per training step, 100 steps,
# on one core, with wall time and peak memory (/usr/bin/time -v).
#   scripts/sim-scale.sh [--sim PATH] [--peers N] [--steps N] [--churn BP] [--thp]
#                        [-- extra args]
# Without --sim it builds its own pccl-sim first (Release with link-time
# optimization, in build/sim-scale; about 10 % faster than a plain Release
# build, same trace hash). --thp backs malloc's large regions with transparent
# huge pages (GLIBC_TUNABLES=glibc.malloc.hugetlb=1: fewer TLB misses, about
# 10 % less CPU at 10,000 peers for about 40 % more memory; same trace hash).
# Exit: pccl-sim's exit code.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
sim=
peers=10000
steps=100
churn=100
thp=0
while [ $# -gt 0 ]; do
    case $1 in
        --sim) sim=$2; shift 2 ;;
        --peers) peers=$2; shift 2 ;;
        --steps) steps=$2; shift 2 ;;
        --churn) churn=$2; shift 2 ;;
        --thp) thp=1; shift ;;
        --) shift; break ;;
        *) echo "usage: $0 [--sim PATH] [--peers N] [--steps N] [--churn BP] [--thp] [-- args]" >&2
           exit 64 ;;
    esac
done
if [ -z "$sim" ]; then
    b=$root/build/sim-scale
    cmake -S "$root" -B "$b" -DCMAKE_BUILD_TYPE=Release -DCMAKE_INTERPROCEDURAL_OPTIMIZATION=ON \
        >/dev/null
    cmake --build "$b" --target pccl-sim -j 2 >/dev/null
    sim=$b/sim/pccl-sim
fi
[ -x "$sim" ] || { echo "sim-scale: no pccl-sim at $sim (build it Release)" >&2; exit 64; }
# Replacements: about churn/10000 of the peers per step, over the steps.
max=$((peers + peers * churn * steps / 10000 + 64))
set -- --seed 1 --peers "$peers" --max-peers "$max" --group-size 16 --float --count 64 \
    --steps "$steps" --churn-ms 0 --churn-per-step "$churn" --vote-timeout-ms 60000 \
    --liveness-ms 3600000 --max-events 4000000000 "$@"
if [ "$thp" = 1 ]; then
    GLIBC_TUNABLES=${GLIBC_TUNABLES:+$GLIBC_TUNABLES:}glibc.malloc.hugetlb=1
    export GLIBC_TUNABLES
fi
echo "sim-scale: $sim $*${GLIBC_TUNABLES:+ (GLIBC_TUNABLES=$GLIBC_TUNABLES)}"
if [ -x /usr/bin/time ]; then
    /usr/bin/time -v "$sim" "$@" 2>"${TMPDIR:-/tmp}/sim-scale.time.$$" && rc=0 || rc=$?
    grep -E "Elapsed|Maximum resident|User time" "${TMPDIR:-/tmp}/sim-scale.time.$$" || true
    rm -f "${TMPDIR:-/tmp}/sim-scale.time.$$"
else
    "$sim" "$@" && rc=0 || rc=$?
fi
exit "$rc"
