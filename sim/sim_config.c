/*
 * sim_config.c — default, swarm and scenario configurations (sim.h).
 */
#include <string.h>

#include "ccoip_algo.h"
#include "ccoip_dtype.h"
#include "ccoip_probe.h"
#include "ccoip_sm.h"
#include "sim.h"
#include "sim_rng.h"

#define MS  ((uint64_t)1000000u)
#define SEC ((uint64_t)1000000000u)

void sim_config_default(sim_config *cfg, uint64_t seed)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->seed = seed;
    cfg->peers = 4;
    cfg->max_peers = 32;
    cfg->steps = 3;
    cfg->churn_ns = 10u * SEC;
    cfg->latency_min_ns = 1u * MS;
    cfg->latency_max_ns = 20u * MS;
    cfg->bw_min_bps = 10u * 1000u * 1000u;
    cfg->bw_max_bps = 1000u * 1000u * 1000u;
    cfg->count = 64;
    cfg->dtype = pcclInt32;
    cfg->op = pcclSum;
    cfg->quant = pcclQuantNone;
    cfg->quant_dtype = pcclUint8;
    cfg->in_place = true;
    cfg->tags = 1;
    cfg->think_max_ns = 20u * MS;
    cfg->heartbeat_ms = 250;
    cfg->evict_ms = 2000;
    cfg->vote_timeout_ms = 10000;
    cfg->p2p_pool_size = 1;
    cfg->liveness_bound_ns = 120u * SEC;
    cfg->max_events = 20u * 1000u * 1000u;
}

void sim_config_swarm(sim_config *cfg, uint64_t seed)
{
    sim_config_default(cfg, seed);
    sim_rng r;
    sim_rng_seed(&r, seed ^ 0x5357524du);
    cfg->peers = (uint32_t)sim_rng_range(&r, 2, 8);
    cfg->max_peers = cfg->peers + 24u;
    cfg->steps = (uint32_t)sim_rng_range(&r, 1, 4);
    cfg->churn_ns = sim_rng_range(&r, 2, 20) * SEC;
    /* Each churn kind is off in about half the runs (swarm testing). */
    cfg->join_per_min = sim_rng_chance(&r, 500) ? (uint32_t)sim_rng_range(&r, 1, 30) : 0;
    cfg->leave_per_min = sim_rng_chance(&r, 500) ? (uint32_t)sim_rng_range(&r, 1, 20) : 0;
    cfg->crash_per_min = sim_rng_chance(&r, 500) ? (uint32_t)sim_rng_range(&r, 1, 20) : 0;
    cfg->hang_per_min = sim_rng_chance(&r, 300) ? (uint32_t)sim_rng_range(&r, 1, 10) : 0;
    cfg->restart_per_min = sim_rng_chance(&r, 400) ? (uint32_t)sim_rng_range(&r, 1, 20) : 0;
    cfg->latency_min_ns = sim_rng_range(&r, 50, 5000) * 1000u;
    cfg->latency_max_ns = cfg->latency_min_ns + sim_rng_range(&r, 0, 100) * MS;
    cfg->bw_min_bps = sim_rng_range(&r, 1, 100) * 1000u * 1000u;
    cfg->bw_max_bps = cfg->bw_min_bps + sim_rng_range(&r, 0, 1000) * 1000u * 1000u;
    cfg->loss_permille = sim_rng_chance(&r, 500) ? (uint32_t)sim_rng_range(&r, 1, 50) : 0;
    cfg->partitions = sim_rng_chance(&r, 300) ? (uint32_t)sim_rng_range(&r, 1, 3) : 0;
    cfg->clogs = sim_rng_chance(&r, 300) ? (uint32_t)sim_rng_range(&r, 1, 4) : 0;
    static const pcclDataType_t dtypes[] = {pcclUint8,   pcclInt8,     pcclInt16,  pcclUint16,
                                            pcclUint32,  pcclInt32,    pcclUint64, pcclInt64,
                                            pcclFloat16, pcclBFloat16, pcclFloat,  pcclDouble};
    cfg->dtype = dtypes[sim_rng_below(&r, 12)];
    cfg->op = (pcclRedOp_t)sim_rng_below(&r, 5);
    cfg->count = sim_rng_range(&r, 0, 3) == 0 ? sim_rng_range(&r, 0, 7) : sim_rng_range(&r, 8, 300);
    cfg->in_place = sim_rng_chance(&r, 600);
    cfg->tags = (uint32_t)sim_rng_range(&r, 1, 2);
    const bool is_float = cfg->dtype == pcclFloat || cfg->dtype == pcclDouble ||
                          cfg->dtype == pcclFloat16 || cfg->dtype == pcclBFloat16;
    /* PROD overflows to inf over many peers, and non-finite chunks cannot be quantized (the
     * core then aborts the op with a retryable error every time: a livelock the simulator
     * found, reported to core); quantization is drawn with the other ops only. */
    if (is_float && cfg->op != pcclProd && sim_rng_chance(&r, 300)) {
        cfg->quant = sim_rng_chance(&r, 500) ? pcclQuantMinMax : pcclQuantZeroPointScale;
        static const pcclDataType_t qt[] = {pcclUint8, pcclInt8, pcclUint16, pcclInt16};
        cfg->quant_dtype = qt[sim_rng_below(&r, 4)];
    }
    cfg->think_max_ns = sim_rng_range(&r, 0, 100) * MS;
    cfg->heartbeat_ms = (uint32_t)sim_rng_range(&r, 50, 300);
    /* A lost segment costs an RTO (200 ms) plus a round trip, up to 4 in a row: an eviction
     * timeout below ~1 s would evict healthy peers on a lossy link, which is the
     * protocol's specified behaviour but not an interesting run. */
    cfg->evict_ms = cfg->heartbeat_ms * (uint32_t)sim_rng_range(&r, 4, 10);
    if (cfg->evict_ms < 1200u) cfg->evict_ms = 1200u;
    cfg->vote_timeout_ms = (uint32_t)sim_rng_range(&r, 3000, 15000);
    cfg->liveness_bound_ns = 180u * SEC;
    /* Issue 5 knobs (drawn last: the draws above keep their meaning). */
    cfg->shared_state = sim_rng_chance(&r, 700);
    cfg->diverge_bp =
        cfg->shared_state && sim_rng_chance(&r, 500) ? (uint32_t)sim_rng_range(&r, 100, 3000) : 0;
    /* Optimization is a global vote: only with one group (the default). */
    cfg->optimize_every =
        cfg->shared_state && sim_rng_chance(&r, 400) ? (uint32_t)sim_rng_range(&r, 1, 4) : 0;
    /* Liveness knob (drawn last): hangs and crashes timed into a phase (sim_fault.c). */
    cfg->phase_fault_per_min = sim_rng_chance(&r, 500) ? (uint32_t)sim_rng_range(&r, 2, 20) : 0;
}

static const char *const kind_names[] = {"all-reduce",     "broadcast",  "reduce", "all-gather",
                                         "reduce-scatter", "all-to-all", "gather", "scatter",
                                         "barrier",        "mix",        "p2p"};

bool sim_kind_from_name(const char *name, uint32_t *out)
{
    for (uint32_t k = 0; k <= SIM_KIND_P2P; k++) {
        if (strcmp(name, kind_names[k]) == 0) {
            *out = k;
            return true;
        }
    }
    return false;
}

const char *sim_kind_name(uint32_t kind)
{
    return kind <= SIM_KIND_P2P ? kind_names[kind] : "?";
}

const char *sim_op_kind_name(uint32_t kind)
{
    if (kind == CCOIP_COLL_SEND) return "send";
    if (kind == CCOIP_COLL_RECV) return "recv";
    return kind < CCOIP_COLL_KINDS ? kind_names[kind] : "?";
}

void sim_config_swarm_algo(sim_config *cfg)
{
    sim_rng r;
    sim_rng_seed(&r, cfg->seed ^ 0x414c474fu);
    cfg->algo = CCOIP_ALGO_AUTO;
    if (!sim_rng_chance(&r, 500)) return;
    const uint64_t bytes = cfg->count * ccoip_dtype_size(cfg->dtype);
    const bool quant = cfg->quant != pcclQuantNone;
    uint32_t cand[5], n = 0;
    if (!quant && bytes > 0 && bytes <= cfg->relay_max_bytes) cand[n++] = CCOIP_ALGO_RELAY;
    if (!quant && bytes > 0) cand[n++] = CCOIP_ALGO_DIRECT;
    cand[n++] = CCOIP_ALGO_RING;
    cand[n++] = CCOIP_ALGO_RING_STRIPED;
    /* (the ring where the world is not 2 or 4) */
    if (!quant) cand[n++] = CCOIP_ALGO_HALVING_DOUBLING;
    cfg->algo = cand[sim_rng_below(&r, n)];
}

void sim_config_swarm_kinds(sim_config *cfg)
{
    /* A stream of its own (the swarm's draws above keep their values): a fixed kind or the
     * mix, and an op timeout in about a third of the runs. */
    sim_rng r;
    sim_rng_seed(&r, cfg->seed ^ 0x4b494e44u);
    cfg->coll_kind = sim_rng_chance(&r, 500) ? SIM_KIND_MIX : 1u + (uint32_t)sim_rng_below(&r, 8);
    cfg->op_timeout_ms = sim_rng_chance(&r, 330) ? (uint32_t)sim_rng_range(&r, 2000, 10000) : 0;
    /* Drawn last (the draws above keep their values): the master relay in about 40 % of the
     * runs, 1, 2 or 4 KiB, so that with the swarm's counts, worlds and kinds some ops are
     * relayed (docs/protocol.md §6.8.3) and others, above the bound, run on the ring. */
    cfg->relay_max_bytes = sim_rng_chance(&r, 400) ? 1024u << sim_rng_below(&r, 3) : 0;
    /* Drawn after it (the draws above keep their values; only the kind of the seeds drawn here
     * changes): send / recv in about a fifth of the runs, with the op timeout and relay bound
     * drawn above (send / recv never relays: the bound then relays nothing). */
    if (sim_rng_chance(&r, 200)) cfg->coll_kind = SIM_KIND_P2P;
}

void sim_config_fit_op(sim_config *cfg)
{
    if (cfg->op != pcclBand && cfg->op != pcclBor && cfg->op != pcclBxor) return;
    switch (cfg->dtype) {
    case pcclFloat16:
        cfg->dtype = pcclInt16;
        break;
    case pcclBFloat16:
        cfg->dtype = pcclUint16;
        break;
    case pcclFloat:
        cfg->dtype = pcclInt32;
        break;
    case pcclDouble:
        cfg->dtype = pcclUint64;
        break;
    default:
        return; /* an integer type: kept */
    }
    cfg->quant = pcclQuantNone; /* quantization is drawn for float types only */
    cfg->quant_dtype = pcclUint8;
}

const char *const sim_scenario_names[] = {"join_during_allreduce",
                                          "kill_mid_ring",
                                          "hung_peer",
                                          "straggler",
                                          "unreachable_pair",
                                          "mismatched_params",
                                          "state_divergent_repair",
                                          "state_revision_skip",
                                          "state_newcomer_aci",
                                          "state_distributor_killed",
                                          "state_two_groups",
                                          "optimize_asymmetric",
                                          "hang_in_admit",
                                          "hang_in_optimized_rewire",
                                          "rogue_voter",
                                          "nat_peers",
                                          "optimize_regions16",
                                          NULL};

/*
 * optimize_regions16 (docs/simulator.md): 16 peers in 4 regions of 4 (us-east, us-west, europe,
 * asia), joined round-robin over the regions, so the first ring crosses a region at every hop.
 * Within a region: 0.5..2 ms one way to the region's core and 94..150 MB/s, up != down per
 * host; between regions: RTT 30..100 ms and 6..40 MB/s, not the same both ways. The master's
 * probes are the TCP runtime's (64 MiB bounded by a window of round trips, core/ccoip_probe.h)
 * and the master's probe deadline its default (60 s). Expected: the installed ring costs what
 * the optimum (Held–Karp in the checker) costs, and every member's pcclOptimizeTopology
 * returns within 60 s of the first call.
 */
static void config_regions16(sim_config *cfg)
{
    cfg->peers = 16;
    cfg->max_peers = 20;
    cfg->optimize_every = 2;
    cfg->vote_timeout_ms = 60000;
    cfg->probe_bytes = CCOIP_PROBE_BYTES_TIMED;
    cfg->probe_timed = true;
    cfg->optimize_bound_ns = 60u * SEC;
    cfg->liveness_bound_ns = 180u * SEC;
    /* MB/s up, down and one-way µs per host (host k is in region k % 4). */
    static const uint16_t up[16] = {125, 110, 94,  119, 100, 131, 97,  112,
                                    118, 95,  127, 104, 99,  121, 108, 115};
    static const uint16_t down[16] = {150, 140, 120, 133, 128, 145, 110, 138,
                                      141, 117, 149, 126, 122, 136, 131, 129};
    static const uint16_t lat_us[16] = {500,  800, 1200, 700, 1500, 600,  900, 1100,
                                        2000, 650, 1300, 750, 850,  1700, 950, 1050};
    for (uint32_t k = 0; k < 16; k++) {
        cfg->host_up_bps[k] = (uint64_t)up[k] * 1000u * 1000u;
        cfg->host_down_bps[k] = (uint64_t)down[k] * 1000u * 1000u;
        cfg->host_latency_ns[k] = (uint64_t)lat_us[k] * 1000u;
        cfg->host_region[k] = k % 4u;
    }
    /* Between regions r -> s: RTT (ms, both ways alike) and MB/s (per direction). */
    static const uint8_t rtt_ms[4][4] = {
        {0, 30, 80, 100}, {30, 0, 100, 60}, {80, 100, 0, 70}, {100, 60, 70, 0}};
    static const uint8_t mbps[4][4] = {
        {0, 40, 20, 8}, {25, 0, 10, 25}, {30, 6, 0, 15}, {12, 15, 20, 0}};
    cfg->regions = 4;
    for (uint32_t r = 0; r < 4; r++) {
        for (uint32_t t = 0; t < 4; t++) {
            if (r == t) continue;
            cfg->region_latency_ns[r * SIM_NET_REGION_MAX + t] = (uint64_t)rtt_ms[r][t] * MS / 2u;
            cfg->region_bps[r * SIM_NET_REGION_MAX + t] = (uint64_t)mbps[r][t] * 1000u * 1000u;
        }
    }
    cfg->expect = SIM_EXPECT_OPTIMIZED;
}

static void script_add(sim_config *cfg, uint64_t t, sim_script_kind k, uint32_t peer, uint64_t arg)
{
    if (cfg->script_len >= SIM_SCRIPT_MAX) return;
    cfg->script[cfg->script_len++] = (sim_script_event){t, k, peer, arg};
}

bool sim_config_scenario(sim_config *cfg, const char *name)
{
    const uint64_t seed = cfg->seed;
    sim_config_default(cfg, seed);
    cfg->peers = 3;
    cfg->max_peers = 8;
    cfg->steps = 2;
    cfg->churn_ns = 8u * SEC;
    cfg->latency_min_ns = 2u * MS;
    cfg->latency_max_ns = 10u * MS;
    /* Slow enough links that a 64 KiB all-reduce takes tens of ms: churn lands mid-op. */
    cfg->bw_min_bps = 2u * 1000u * 1000u;
    cfg->bw_max_bps = 4u * 1000u * 1000u;
    cfg->count = 16384;
    cfg->dtype = pcclInt32;
    cfg->op = pcclSum;
    cfg->in_place = true;
    cfg->think_max_ns = 5u * MS;
    cfg->liveness_bound_ns = 60u * SEC;
    if (strcmp(name, "join_during_allreduce") == 0) {
        /* A fourth peer joins while the first all-reduces run; it is admitted at the next
         * update and takes part in later ones. */
        script_add(cfg, 1500u * MS, SIM_SCRIPT_JOIN, 0, 0);
        script_add(cfg, 1520u * MS, SIM_SCRIPT_JOIN, 0, 0);
        cfg->expect = SIM_EXPECT_ADMIT_LATE;
        return true;
    }
    if (strcmp(name, "kill_mid_ring") == 0) {
        /* Peer 2 crashes right after its third ring send of an op (4 peers: the
         * reduce-scatter is over, its neighbours have reduced into their buffers): the op
         * is aborted on the others (pcclRankConnectionLost, in-place buffers restored) and
         * retried on the shrunken ring. */
        cfg->peers = 4;
        script_add(cfg, 2u * SEC, SIM_SCRIPT_CRASH_MID_RING, 2, 3);
        cfg->expect = SIM_EXPECT_ABORT;
        return true;
    }
    if (strcmp(name, "hung_peer") == 0) {
        /* Peer 1 stops (SIGSTOP): its connections stay open, only heartbeats reveal it. */
        cfg->peers = 4;
        script_add(cfg, 2u * SEC, SIM_SCRIPT_HANG, 1, 0);
        cfg->expect = SIM_EXPECT_EVICT_HEARTBEAT;
        return true;
    }
    if (strcmp(name, "straggler") == 0) {
        /* Peer 1's application sleeps past the vote deadline before its next update: it
         * keeps heartbeating, so only the vote timeout evicts it. */
        cfg->peers = 4;
        cfg->vote_timeout_ms = 3000;
        script_add(cfg, 1u * SEC, SIM_SCRIPT_STALL, 1, 30u * SEC);
        cfg->expect = SIM_EXPECT_EVICT_VOTE;
        return true;
    }
    if (strcmp(name, "unreachable_pair") == 0) {
        /* Peers 0 and 1 cannot reach each other: the ring must avoid that link (4 peers
         * allow it) or the master evicts one of them. */
        cfg->peers = 4;
        script_add(cfg, 0, SIM_SCRIPT_CUT, 0, 1);
        return true;
    }
    if (strncmp(name, "state_", 6) == 0 || strncmp(name, "optimize_", 9) == 0) {
        /* The full loop with shared state; small all-reduces. */
        cfg->shared_state = true;
        cfg->count = 256;
        cfg->dtype = pcclFloat;
        cfg->peers = 4;
    }
    if (strcmp(name, "state_divergent_repair") == 0) {
        /* Peer 1's weights diverge by one element: the sync repairs exactly that key
         * (rx_bytes = its 256 bytes, the checker compares), the others fetch nothing. */
        script_add(cfg, 1500u * MS, SIM_SCRIPT_DIVERGE, 1, 0);
        script_add(cfg, 3000u * MS, SIM_SCRIPT_DIVERGE, 3, 0);
        cfg->expect = SIM_EXPECT_STATE_REPAIR;
        return true;
    }
    if (strcmp(name, "state_revision_skip") == 0) {
        /* Peer 2 submits revision + 2: pcclInvalidUsage, evicted; the others carry on. */
        script_add(cfg, 1500u * MS, SIM_SCRIPT_SKIP_REVISION, 2, 0);
        cfg->expect = SIM_EXPECT_INVALID_USAGE;
        return true;
    }
    if (strcmp(name, "state_newcomer_aci") == 0) {
        /* A new peer (revision 0, junk) is admitted: it receives the popular state,
         * including the allow_content_inequality key, from a distributor. */
        cfg->peers = 3;
        script_add(cfg, 1500u * MS, SIM_SCRIPT_JOIN, 0, 0);
        cfg->expect = SIM_EXPECT_ACI_FETCH | SIM_EXPECT_ADMIT_LATE;
        return true;
    }
    if (strcmp(name, "state_distributor_killed") == 0) {
        /* A newcomer fetches from peer 0 (the lowest id), which dies right after its first
         * STATE_SEND: the fetcher gets pcclRankConnectionLost with its tensors untouched,
         * and the retry (another distributor) succeeds. */
        cfg->peers = 3;
        script_add(cfg, 1400u * MS, SIM_SCRIPT_CRASH_MID_STATE, 0, 1);
        script_add(cfg, 1500u * MS, SIM_SCRIPT_JOIN, 0, 0);
        cfg->expect = SIM_EXPECT_SYNC_RETRY | SIM_EXPECT_ACI_FETCH;
        return true;
    }
    if (strcmp(name, "state_two_groups") == 0) {
        /* Two peer groups of 3 side by side: collectives and shared state per group (a
         * divergence in group 1 is repaired there), topology votes (update, optimize) global. */
        cfg->peers = 6;
        cfg->group_size = 3;
        cfg->optimize_every = 3;
        script_add(cfg, 1500u * MS, SIM_SCRIPT_DIVERGE, 4, 0);
        cfg->expect = SIM_EXPECT_STATE_REPAIR | SIM_EXPECT_OPTIMIZED;
        return true;
    }
    if (strcmp(name, "hang_in_optimized_rewire") == 0) {
        /* Four members optimize every 2nd revision: peer 1 stops for good right as the
         * master starts the optimized re-wire; a newcomer joins meanwhile. The re-wire must
         * fail once peer 1 is evicted, the survivors carry on, the newcomer is admitted. */
        cfg->shared_state = true;
        cfg->count = 256;
        cfg->dtype = pcclFloat;
        cfg->peers = 4;
        cfg->optimize_every = 2;
        script_add(cfg, 1000u * MS, SIM_SCRIPT_PHASE_FAULT, 1, SIM_PH_OPT_REWIRE);
        script_add(cfg, 2500u * MS, SIM_SCRIPT_JOIN, 0, 0);
        cfg->expect = SIM_EXPECT_PHASE_FAULT | SIM_EXPECT_EVICT_HEARTBEAT | SIM_EXPECT_ADMIT_LATE;
        return true;
    }
    if (strcmp(name, "optimize_asymmetric") == 0) {
        /* Five peers with a known asymmetric bandwidth matrix (up != down): the optimized
         * ring must cost what the brute-force optimum costs. */
        cfg->peers = 5;
        cfg->optimize_every = 2;
        static const uint64_t up[5] = {80, 5, 40, 10, 60};
        static const uint64_t down[5] = {7, 90, 12, 50, 20};
        for (uint32_t i = 0; i < 5; i++) {
            cfg->host_up_bps[i] = up[i] * 1000u * 1000u;
            cfg->host_down_bps[i] = down[i] * 1000u * 1000u;
        }
        cfg->expect = SIM_EXPECT_OPTIMIZED;
        return true;
    }
    if (strcmp(name, "nat_peers") == 0) {
        /* Four peers, two of them behind NAT (peers 1 and 3: dials to them are dropped), the
         * ring 0-1-2-3 puts each next to reachable ones: every link must be dialled from its
         * reachable end (§6.4), nobody evicted, every op exact. Then the topology is optimized
         * (its probes to peers 1 and 3 cannot be dialled either) and shared state synced. */
        cfg->peers = 4;
        cfg->no_inbound_hosts = (1u << 1) | (1u << 3);
        cfg->steps = 6;
        cfg->optimize_every = 2;
        cfg->shared_state = true;
        cfg->count = 256;
        cfg->dtype = pcclFloat;
        cfg->churn_ns = 0;
        cfg->expect = SIM_EXPECT_NO_EVICTION | SIM_EXPECT_OPTIMIZED;
        return true;
    }
    if (strcmp(name, "optimize_regions16") == 0) {
        config_regions16(cfg);
        return true;
    }
    if (strcmp(name, "hang_in_admit") == 0) {
        /* Three members and a newcomer: peer 1 stops for good (SIGSTOP, never resumed) right
         * as the master starts 'admit phase with 4 members'. It is evicted evict_ms later;
         * the phase must fail at once (not at the vote timeout), the survivors' update
         * returns, and the newcomer is admitted by the next admit phase. */
        script_add(cfg, 1400u * MS, SIM_SCRIPT_PHASE_FAULT, 1, SIM_PH_ADMIT | (4u << 8));
        script_add(cfg, 1500u * MS, SIM_SCRIPT_JOIN, 0, 0);
        cfg->expect = SIM_EXPECT_PHASE_FAULT | SIM_EXPECT_EVICT_HEARTBEAT | SIM_EXPECT_ADMIT_LATE;
        return true;
    }
    if (strcmp(name, "rogue_voter") == 0) {
        /* Peer 0's next step also all-reduces on a tag nobody else uses: at the vote deadline
         * the master refuses it (pcclInvalidUsage, REASON_VOTE_UNMATCHED, docs/protocol.md
         * §6.10); nobody is evicted and every peer's later steps succeed. */
        cfg->vote_timeout_ms = 3000;
        script_add(cfg, 1500u * MS, SIM_SCRIPT_ROGUE_TAG, 0, 0);
        cfg->expect = SIM_EXPECT_INVALID_USAGE | SIM_EXPECT_NO_EVICTION;
        return true;
    }
    if (strcmp(name, "mismatched_params") == 0) {
        /* Peer 0's next all-reduce uses another count: every member gets pcclInvalidUsage. */
        script_add(cfg, 1500u * MS, SIM_SCRIPT_MISMATCH, 0, 0);
        cfg->expect = SIM_EXPECT_INVALID_USAGE;
        return true;
    }
    return false;
}

uint32_t sim_canary_from_name(const char *name)
{
    if (strcmp(name, "skip_restore") == 0) return SIM_CANARY_SKIP_RESTORE;
    if (strcmp(name, "skip_abort_verdict") == 0) return SIM_CANARY_SKIP_ABORT_VERDICT;
    if (strcmp(name, "corrupt_reduce") == 0) return SIM_CANARY_CORRUPT_REDUCE;
    if (strcmp(name, "drop_restore_copy") == 0) return SIM_CANARY_DROP_RESTORE_COPY;
    if (strcmp(name, "double_notify") == 0) return SIM_CANARY_DOUBLE_NOTIFY;
    if (strcmp(name, "corrupt_adopt") == 0) return SIM_CANARY_CORRUPT_ADOPT;
    if (strcmp(name, "swap_probe") == 0) return SIM_CANARY_SWAP_PROBE;
    if (strcmp(name, "corrupt_recv") == 0) return SIM_CANARY_CORRUPT_RECV;
    if (strcmp(name, "flip_verdict") == 0) return SIM_CANARY_FLIP_VERDICT;
    if (strcmp(name, "corrupt_relay") == 0) return SIM_CANARY_CORRUPT_RELAY;
    if (strcmp(name, "short_p2p") == 0) return SIM_CANARY_SHORT_P2P;
    return 0;
}

const char *sim_status_name(sim_status s)
{
    switch (s) {
    case SIM_OK:
        return "ok";
    case SIM_CRASH:
        return "crash";
    case SIM_LIVENESS:
        return "liveness";
    case SIM_CORRECTNESS:
        return "correctness";
    case SIM_UNAVAILABLE:
        return "unavailable";
    }
    return "?";
}
