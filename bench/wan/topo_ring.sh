#!/usr/bin/env bash
# Whether a ring order of the topology benchmark (bench/wan/pccl_wan_topo.c's
# "ring_after I I I ..." line: peer indices in rank order) uses only the fast
# links of its testbed: peers i and i + 1 (mod N) are joined by a fast link,
# every other pair by a slow one (scripts/bench-wan-topology.sh,
# tests/wan/topology.sh). Prints "fast" or "slow: I-J ..." (the slow pairs the
# ring uses); exit 0 when fast, 1 when not, 2 when the order is not a
# permutation of 0 .. N-1.
#
#   topo_ring.sh I0 I1 ... I(N-1)
set -u
N=$#
[[ $N -ge 2 ]] || { echo "topo_ring: need a ring of at least 2" >&2; exit 2; }
RING=("$@")
declare -A SEEN
for i in "${RING[@]}"; do
  [[ $i =~ ^[0-9]+$ && $i -lt $N && -z ${SEEN[$i]:-} ]] || {
    echo "topo_ring: not a permutation of 0..$((N - 1)): ${RING[*]}" >&2
    exit 2
  }
  SEEN[$i]=1
done
SLOW=()
for r in $(seq 0 $((N - 1))); do
  a=${RING[$r]}
  b=${RING[$(((r + 1) % N))]}
  d=$(((a - b + N) % N))
  [[ $d -eq 1 || $d -eq $((N - 1)) ]] || SLOW+=("$a-$b")
done
if [[ ${#SLOW[@]} -eq 0 ]]; then
  echo fast
  exit 0
fi
echo "slow: ${SLOW[*]}"
exit 1
