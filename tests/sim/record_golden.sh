#!/bin/sh
# Re-records the simulator's golden traces (tests/sim/golden/) from a native
# build: the scenario trace hashes and the swarm seeds the WASM build must
# reproduce. Run after an intended change of the state machines or the
# simulator, and say why in the commit.
#   tests/sim/record_golden.sh [BUILD_DIR]   (default: build-sim)
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build-sim}
sim=$build/sim/pccl-sim
gold=$root/tests/sim/golden
mkdir -p "$gold"
for s in join_during_allreduce kill_mid_ring hung_peer straggler unreachable_pair mismatched_params \
    state_divergent_repair state_revision_skip state_newcomer_aci state_distributor_killed \
    state_two_groups optimize_asymmetric hang_in_admit hang_in_optimized_rewire rogue_voter \
    nat_peers optimize_regions16; do
    "$sim" --scenario "$s" --seed 1 --quiet | grep -E '^(seed=|trace_hash=)' > "$gold/$s.txt"
    echo "$s: $(tail -1 "$gold/$s.txt")"
done
"$sim" --peers 300 --steps 3 --seed 1 --quiet | grep -E '^(seed=|trace_hash=)' > "$gold/peers_300.txt"
echo "peers_300: $(tail -1 "$gold/peers_300.txt")"
"$sim" --swarm --seeds 1:24 | grep -E '^seed=' > "$gold/swarm_1_24.txt"
echo "swarm 1..24: $(wc -l < "$gold/swarm_1_24.txt") seeds"
"$sim" --swarm --seeds 1:12 --relay-max-bytes 4096 | grep -E '^seed=' > "$gold/relay_1_12.txt"
echo "relay swarm 1..12: $(wc -l < "$gold/relay_1_12.txt") seeds"
"$sim" --swarm --seeds 1:12 --auth 1 --pool 2 | grep -E '^seed=' > "$gold/auth_1_12.txt"
echo "authenticated swarm 1..12: $(wc -l < "$gold/auth_1_12.txt") seeds"
# The collective set (--kind, docs/simulator.md): every op draws its kind under the swarm's churn,
# and the kill_mid_ring scenario with mixed kinds.
"$sim" --swarm --seeds 1:24 --kind mix | grep -E '^seed=' > "$gold/coll_mix_1_24.txt"
echo "collective mix swarm 1..24: $(wc -l < "$gold/coll_mix_1_24.txt") seeds"
"$sim" --scenario kill_mid_ring --seed 1 --quiet --kind mix | grep -E '^(seed=|trace_hash=)' \
    > "$gold/kill_mid_ring_mix.txt"
echo "kill_mid_ring --kind mix: $(tail -1 "$gold/kill_mid_ring_mix.txt")"
# The collective set through the master relay: mixed kinds at a 1 KiB bound (relayed and ring
# ops under the swarm's churn), and kill_mid_ring with 200-element ops.
"$sim" --swarm --seeds 1:24 --kind mix --relay-max-bytes 1024 | grep -E '^seed=' \
    > "$gold/coll_relay_1_24.txt"
echo "collective relay swarm 1..24: $(wc -l < "$gold/coll_relay_1_24.txt") seeds"
"$sim" --scenario kill_mid_ring --seed 1 --quiet --kind mix --count 200 --relay-max-bytes 1024 \
    | grep -E '^(seed=|trace_hash=)' > "$gold/kill_mid_ring_relay.txt"
echo "kill_mid_ring --kind mix, relayed: $(tail -1 "$gold/kill_mid_ring_relay.txt")"
# Send / recv under the swarm's churn, and kill_mid_ring with send / recv rounds.
"$sim" --swarm --seeds 1:24 --kind p2p | grep -E '^seed=' > "$gold/coll_p2p_1_24.txt"
echo "send / recv swarm 1..24: $(wc -l < "$gold/coll_p2p_1_24.txt") seeds"
"$sim" --scenario kill_mid_ring --seed 1 --quiet --kind p2p | grep -E '^(seed=|trace_hash=)' \
    > "$gold/kill_mid_ring_p2p.txt"
echo "kill_mid_ring --kind p2p: $(tail -1 "$gold/kill_mid_ring_p2p.txt")"
