/*
 * sim.h — the deterministic discrete-event simulator (DESIGN.md §7).
 *
 * One master and N peers of core/ run against a virtual network in virtual
 * time. A seed fixes everything: the network, the churn, the workload and
 * every random choice of the state machines. The loop always fires the
 * earliest event (ties in scheduling order), feeds it to one machine, runs
 * the actions that machine emits, and then runs the checkers.
 *
 * Two phases (TigerBeetle's VOPR): during the first churn_ns the churn
 * processes (join, graceful leave, crash, hang, restart) and network faults
 * run; after it the network heals and, within liveness_bound_ns, every live
 * peer must be admitted and finish `steps` all-reduces.
 *
 * Pure and deterministic like core/: no clocks, no rand, no stdio (text goes
 * through the log callback). All counts and times are uint64_t.
 */
#ifndef SIM_H
#define SIM_H

#include <stdbool.h>
#include <stdint.h>

#include "pccl_types.h"
#include "sim_net.h"
#include "sim_sm.h"

/** Peer hosts whose link a scenario may configure (sim_config.host_up_bps, ...). */
#define SIM_HOST_CFG_MAX 32u

/** Outcomes and the CLI's exit codes. */
typedef enum sim_status {
    SIM_OK = 0,
    SIM_CRASH = 1, /**< A machine returned an error, emitted an illegal action, or a bound hit. */
    SIM_LIVENESS = 2,    /**< Something did not finish within the bound after churn stopped. */
    SIM_CORRECTNESS = 3, /**< A safety checker failed. */
    SIM_UNAVAILABLE = 4  /**< No state machines to drive (core/ccoip_{master,peer}.h missing). */
} sim_status;

/** Deliberately broken rules (--canary): the checkers must catch each. */
typedef enum sim_canary {
    SIM_CANARY_NONE = 0,
    /** core: the peer does not restore in-place buffers on abort (ccoip_peer_config). */
    SIM_CANARY_SKIP_RESTORE = 1u << 0,
    /** core: the master skips the abort verdict (ccoip_master_config). */
    SIM_CANARY_SKIP_ABORT_VERDICT = 1u << 1,
    /** sim: the driver flips one bit in the result of one REDUCE kernel. */
    SIM_CANARY_CORRUPT_REDUCE = 1u << 2,
    /** sim: the driver ignores COPY actions that read the BACKUP region (no restore). */
    SIM_CANARY_DROP_RESTORE_COPY = 1u << 3,
    /** sim: the driver duplicates the first NOTIFY of an all-reduce (two verdicts). */
    SIM_CANARY_DOUBLE_NOTIFY = 1u << 4,
    /** sim: the driver flips one bit of the first COPY that adopts a fetched tensor. */
    SIM_CANARY_CORRUPT_ADOPT = 1u << 5,
    /** sim: PROBE reports the reverse link's duration (the optimizer sees a wrong matrix). */
    SIM_CANARY_SWAP_PROBE = 1u << 6,
    /** sim: the driver flips one bit of the first ring chunk a collective other than the
     *  all-reduce receives (sim_config.coll_kind), as it lands. */
    SIM_CANARY_CORRUPT_RECV = 1u << 7,
    /** sim: the first successful NOTIFY of an op (a run with --kind) reports
     *  pcclRankConnectionLost to the application (one member disagrees with the verdict). */
    SIM_CANARY_FLIP_VERDICT = 1u << 8,
    /** sim: the driver flips one bit of the first relayed result it writes (the master's
     *  answer, docs/protocol.md §6.8.2, §6.8.3), as it lands in RECV. */
    SIM_CANARY_CORRUPT_RELAY = 1u << 9,
    /** sim: with --kind p2p, the first successful NOTIFY of a send / recv that moved bytes
     *  reports one byte fewer (rx_bytes at a receiver, tx_bytes at a sender). */
    SIM_CANARY_SHORT_P2P = 1u << 10
} sim_canary;

/** sim_config.coll_kind: each op draws its kind (sim_app.c); below it, a ccoip_coll_kind. */
#define SIM_KIND_MIX 9u
/** sim_config.coll_kind: send / recv (docs/collectives-p2p.md): each round every member sends to
 *  rank + k and receives from rank - k, or one pair exchanges while the others idle (sim_app.c).
 *  Needs tags <= SIM_MAX_TAGS / 2 (a send and a receive per tag). */
#define SIM_KIND_P2P 10u

/** Scripted events (scenarios). peer is the index of a peer process in creation order. */
typedef enum sim_script_kind {
    SIM_SCRIPT_JOIN = 1,           /**< A new peer process starts. */
    SIM_SCRIPT_LEAVE = 2,          /**< peer leaves gracefully at its next command. */
    SIM_SCRIPT_CRASH = 3,          /**< peer's process dies (its connections reset). */
    SIM_SCRIPT_HANG = 4,           /**< peer stops processing anything (connections stay open). */
    SIM_SCRIPT_RESTART = 5,        /**< peer crashes and a new process starts on its host. */
    SIM_SCRIPT_CUT = 6,            /**< peers peer and arg cannot reach each other, from time on. */
    SIM_SCRIPT_STALL = 7,          /**< peer's application sleeps arg ns before its next command. */
    SIM_SCRIPT_MISMATCH = 8,       /**< peer's next all-reduce uses count + 1 (a program bug). */
    SIM_SCRIPT_CRASH_MID_RING = 9, /**< peer crashes right after its arg-th next RING_SEND. */
    SIM_SCRIPT_DIVERGE = 10,       /**< peer corrupts a compared shared-state tensor (next sync). */
    SIM_SCRIPT_SKIP_REVISION = 11, /**< peer's next sync submits revision + 2 (a program bug). */
    SIM_SCRIPT_CRASH_MID_STATE = 12, /**< the sender of the arg-th next STATE_SEND (any peer)
                                          crashes right after it (peer is ignored). */
    /** Arms a phase fault: peer hangs (stops for good, like SIGSTOP) as soon as the master
     *  starts the next phase of kind (arg & 0xff) (sim_phase) whose ring has at least
     *  (arg >> 8) & 0xff members; bit 16 of arg: crash instead of hang. */
    SIM_SCRIPT_PHASE_FAULT = 13,
    /** peer's next step also all-reduces on a tag nobody else uses (SIM_MAX_TAGS - 1; needs
     *  tags < SIM_MAX_TAGS): the master must refuse it, evicting nobody (protocol §6.10). */
    SIM_SCRIPT_ROGUE_TAG = 14
} sim_script_kind;

/** The phases a phase fault can be timed into (sim_fault.c classifies the master's frames). */
typedef enum sim_phase {
    SIM_PH_ADMIT = 1,      /**< TopologyPlan answering votes ("admit phase") */
    SIM_PH_REWIRE = 2,     /**< TopologyPlan notification ("re-wire phase") */
    SIM_PH_OPT_REWIRE = 3, /**< OptimizeTopologyVerdict with a plan ("optimized re-wire") */
    SIM_PH_PROBE = 4,      /**< BandwidthProbeRequests (the optimization's probe phase) */
    SIM_PH_SYNC = 5,       /**< SharedStateSyncVerdict (shared-state distribution) */
    SIM_PH_COLLECTIVE = 6, /**< CollectiveCommence (a running all-reduce) */
    SIM_PH_END = 7
} sim_phase;
#define SIM_PHASE_FAULT_CRASH (1u << 16)

#define SIM_SCRIPT_MAX 32u

typedef struct sim_script_event {
    uint64_t time_ns;
    sim_script_kind kind;
    uint32_t peer;
    uint64_t arg;
} sim_script_event;

/** What a scenario expects beyond the generic checkers (checked at the end). */
typedef enum sim_expect {
    SIM_EXPECT_NONE = 0,
    SIM_EXPECT_ABORT = 1u << 0,           /**< Some all-reduce was aborted (RankConnectionLost). */
    SIM_EXPECT_EVICT_HEARTBEAT = 1u << 1, /**< Someone was evicted for heartbeat timeout. */
    SIM_EXPECT_EVICT_VOTE = 1u << 2,      /**< Someone was evicted at the vote deadline. */
    SIM_EXPECT_INVALID_USAGE = 1u << 3,   /**< Every member of one op got pcclInvalidUsage. */
    SIM_EXPECT_ADMIT_LATE = 1u << 4,      /**< A peer that joined later was admitted. */
    SIM_EXPECT_STATE_REPAIR = 1u << 5, /**< An up-to-date peer fetched a diverged compared key. */
    SIM_EXPECT_ACI_FETCH = 1u << 6,    /**< An outdated peer fetched an allow_inequality key. */
    SIM_EXPECT_SYNC_RETRY = 1u << 7,   /**< A sync failed with pcclRankConnectionLost, state
                                            untouched, and a retry succeeded. */
    SIM_EXPECT_OPTIMIZED = 1u << 8,    /**< An optimize-topology succeeded (ring cost checked). */
    SIM_EXPECT_PHASE_FAULT = 1u << 9,  /**< A scripted phase fault fired. */
    SIM_EXPECT_NO_EVICTION = 1u << 10  /**< Nobody was evicted (checked at the end). */
} sim_expect;

typedef struct sim_config {
    uint64_t seed;
    uint32_t peers;     /**< Peers at time 0. */
    uint32_t max_peers; /**< Bound on peer processes over the whole run. */
    uint32_t steps;     /**< All-reduces every live peer finishes after churn. */

    /* Churn: mean events per simulated minute during the churn phase. */
    uint32_t join_per_min;
    uint32_t leave_per_min;
    uint32_t crash_per_min;
    uint32_t hang_per_min;
    uint32_t restart_per_min;
    /** Phase faults: each arms a hang or crash of the next peer the master starts a phase
     *  with (a random sim_phase; docs/simulator.md). */
    uint32_t phase_fault_per_min;
    uint64_t churn_ns;

    /* Network. */
    uint64_t latency_min_ns;
    uint64_t latency_max_ns;
    uint64_t bw_min_bps;
    uint64_t bw_max_bps;
    uint32_t loss_permille;
    uint32_t partitions; /**< Random partition windows during churn. */
    uint32_t clogs;      /**< Random clog windows during churn. */

    /* Workload (the reference training loop). */
    uint64_t count;
    pcclDataType_t dtype;
    pcclRedOp_t op;
    pcclQuantizationAlgorithm_t quant;
    pcclDataType_t quant_dtype;
    bool in_place;
    uint32_t tags; /**< Concurrent all-reduces per step (distinct tags), 1..4. */
    /** Odd nodes issue a step's tags in reverse order (A: 0 1, B: 1 0; opposite orders). */
    bool reverse_tags;
    uint64_t think_max_ns;
    /**
     * The collective each op runs (--kind): a ccoip_coll_kind (0, the all-reduce, is the
     * default: the workload as before), or SIM_KIND_MIX (each op draws one). Every kind but 0
     * reads its rank, epoch and world from its machine, sizes its buffers with
     * ccoip_coll_sizes and pins the epoch; all members derive kind and root alike (sim_app.c).
     */
    uint32_t coll_kind;
    /** Per-op timeout (--op-timeout-ms; ccoip_allreduce_args.timeout_ms; 0: none). */
    uint32_t op_timeout_ms;
    /**
     * Shared state (the full reference loop): update topology -> sync shared
     * state -> all-reduce -> revision + 1. Off: the v2 loop.
     */
    bool shared_state;
    uint32_t diverge_bp; /**< Chance per sync (1/10000) a peer corrupts a compared tensor. */
    uint32_t
        optimize_every; /**< Optimize the topology at revisions that are multiples (0: never). */

    /* Core configuration. */
    uint32_t heartbeat_ms;
    uint32_t evict_ms;
    uint32_t vote_timeout_ms;
    uint32_t p2p_pool_size;   /**< Connections per ring neighbour (--pool), 1..8. */
    uint32_t relay_max_bytes; /**< Master relay bound (--relay-max-bytes; 0: off, the default). */
    /** The algorithm every member forces on its all-reduces (--algo NAME; a ccoip_algo,
     *  docs/algorithms.md; 0: AUTO, the rule). The swarm draws it (sim_config_swarm_algo). */
    uint32_t algo;
    /** Authenticated run (--auth 1; docs/protocol.md §6.1.1, §8.0): every machine gets the run
     *  key and a keyed stand-in for the MAC (sm_core.c). 0: off, the default. */
    uint32_t auth;

    uint64_t liveness_bound_ns; /**< After churn_ns. */
    uint64_t max_events;        /**< Hard bound on fired events (a liveness failure). */
    uint32_t canary;            /**< sim_canary bits. */

    sim_script_event script[SIM_SCRIPT_MAX];
    uint32_t script_len;
    uint32_t expect; /**< sim_expect bits. */

    /* Scale. */
    uint32_t group_size; /**< Peers per peer group (initial peers fill groups in order); 0 = one. */
    /**
     * Per-step churn: at each training step a peer is replaced (crashes, a new
     * process takes its group and step count) with this chance in 1/10000,
     * while its step count is below steps - 1. 100 = 1 % of peers per step.
     */
    uint32_t churn_per_step_bp;
    /** Link bandwidths of the first peers' hosts (bytes/s; 0: drawn): a known matrix. */
    uint64_t host_up_bps[SIM_HOST_CFG_MAX];
    uint64_t host_down_bps[SIM_HOST_CFG_MAX];
    /** One-way latency of the first peers' hosts to their region's core (0: drawn). */
    uint64_t host_latency_ns[SIM_HOST_CFG_MAX];
    /**
     * Regions (0: none; at most SIM_NET_REGION_MAX, sim_net.h): the first peers' hosts are in
     * region host_region[k] (the master's and later hosts in region 0); a frame from region r
     * to region s also takes region_latency_ns[r * SIM_NET_REGION_MAX + s] one way and crosses
     * at most region_bps[...] bytes per second (0: no bound).
     */
    uint32_t regions;
    uint32_t host_region[SIM_HOST_CFG_MAX];
    uint64_t region_latency_ns[SIM_NET_REGION_MAX * SIM_NET_REGION_MAX];
    uint64_t region_bps[SIM_NET_REGION_MAX * SIM_NET_REGION_MAX];
    /** The master's probe_bytes (0: the core's default, 1 MiB). */
    uint64_t probe_bytes;
    /** Probes bounded by time as well as bytes, as the TCP runtime's (core/ccoip_probe.h):
     *  a probe sends only the slices it starts within its window. false: all the bytes. */
    bool probe_timed;
    /** Every successful optimization must take at most this long, from the first member's
     *  call to the last member's success (simulated; 0: no bound; a liveness failure). */
    uint64_t optimize_bound_ns;
    /** Peer hosts that accept no connections (bit k: the k-th peer host, as host_up_bps; a
     *  peer behind NAT, docs/protocol.md §6.4): a dial to them is dropped (connect timeout). */
    uint32_t no_inbound_hosts;

    /**
     * Trace recording (core/ccoip_trace.h): one trace per state machine, handed
     * to record_sink at the end of the run (node 0 is the master).
     */
    bool record_trace;
    void (*record_sink)(void *ctx, uint32_t node, bool is_master, const uint8_t *bytes,
                        uint64_t len);
    void *record_ctx;

    /** The machines to drive; NULL = sim_sm_core(). */
    const sim_sm_vt *vt;
    /** Text output (trace lines, failure details); NULL = silent. */
    void (*log)(void *ctx, const char *line);
    void *log_ctx;
    bool trace; /**< Log one line per event fed to a machine. */
} sim_config;

typedef struct sim_result {
    sim_status status;
    char message[512];
    uint64_t trace_hash;
    uint64_t events;
    uint64_t end_ns;
    uint64_t ops_completed;
    uint64_t ops_aborted;
    uint64_t ops_failed_other;
    uint64_t joins;
    uint64_t leaves;
    uint64_t crashes;
    uint64_t hangs;
    uint64_t phase_faults;    /**< Hangs and crashes timed into a phase (included above). */
    uint64_t fault_checks;    /**< Faults whose survivors were checked against the bound. */
    uint64_t call_mismatches; /**< Calls failed as blocked in a call the others are not in. */
    uint64_t evictions;
    uint64_t replaced;            /**< Per-step churn replacements. */
    uint64_t syncs;               /**< Successful shared-state syncs (per peer). */
    uint64_t sync_fetches;        /**< ... of which fetched something. */
    uint64_t sync_failed;         /**< Failed syncs (per peer). */
    uint64_t sync_adopted_failed; /**< ... whose peer had adopted the verified state already. */
    uint64_t optimizes;           /**< Successful optimize-topology commands (per peer). */
    uint64_t optimize_rounds;     /**< Optimizations that succeeded everywhere (rounds). */
    uint64_t optimize_max_ns;     /**< The longest of them: first call to last success. */
    uint32_t optimize_members;    /**< Members of that round. */
    uint64_t optimize_cost;       /**< The last optimized ring checked: its cost (µs per MiB) */
    uint64_t optimize_best;       /**< ... and the optimum's (check_optimize_notify). */
    uint64_t epochs;
    uint64_t coll_checked; /**< --kind: outputs compared with the checker's reference. */
    uint64_t coll_relayed; /**< ... of them, outputs of ops the master relayed (§6.8.3). */
    /** --kind p2p: send / recv halves that succeeded after their member saw a newer epoch (the
     *  op outlived a membership change that spared its two members). */
    uint64_t p2p_outlived;
    uint64_t net_frames;
    uint64_t net_bytes;
    uint32_t live_peers_end;
} sim_result;

/** Fills *cfg with the defaults for seed (a small, calm run). */
void sim_config_default(sim_config *cfg, uint64_t seed);
/** Draws every knob from seed ("swarm testing"). */
void sim_config_swarm(sim_config *cfg, uint64_t seed);
/** A bitwise op (pcclBand/pcclBor/pcclBxor, e.g. from --op) takes integer types only: a float
 * dtype becomes an integer type of its width, unquantized. Other ops: no change. */
void sim_config_fit_op(sim_config *cfg);
/** --kind NAME: "all-reduce", "broadcast", ..., "barrier" (ccoip_coll_kind), "mix" or "p2p". */
bool sim_kind_from_name(const char *name, uint32_t *out);
const char *sim_kind_name(uint32_t kind);
/** The name of an op's kind (a ccoip_coll_kind, send and recv included). */
const char *sim_op_kind_name(uint32_t kind);
/** Swarm with --kind swarm: draws coll_kind, op_timeout_ms, relay_max_bytes and whether the run
 *  is a send / recv one (SIM_KIND_P2P) from the seed (own stream). */
/** Swarm: draws cfg->algo (half of the runs force one that can run the run's all-reduces:
 *  relay within the relay bound, direct with a non-empty unquantized input, ring,
 *  ring_striped), from a stream of its own; call after the dtype and op are final. */
void sim_config_swarm_algo(sim_config *cfg);
void sim_config_swarm_kinds(sim_config *cfg);
/** Applies a named scenario; false for an unknown name. */
bool sim_config_scenario(sim_config *cfg, const char *name);
/** Names of the scenarios, NULL-terminated. */
extern const char *const sim_scenario_names[];
/** Canary by name ("skip_restore", ...); 0 for an unknown name. */
uint32_t sim_canary_from_name(const char *name);
const char *sim_status_name(sim_status s);

/** Runs one simulation. */
sim_status sim_run(const sim_config *cfg, sim_result *out);

/** Outcome of replaying one trace. */
typedef enum sim_replay_status {
    SIM_REPLAY_MATCH = 0,      /**< Same state hash at every checkpoint and at the end. */
    SIM_REPLAY_NO_TRAILER = 1, /**< Checkpoints matched; the trace ends without a trailer. */
    SIM_REPLAY_DECODE = 2,     /**< Malformed trace (pcclProtocolError from the decoder). */
    SIM_REPLAY_MISMATCH = 3,   /**< The machine emitted something else. */
    SIM_REPLAY_UNAVAILABLE = 4 /**< Cannot create the machine (no core, bad config). */
} sim_replay_status;

typedef struct sim_replay_result {
    sim_replay_status status;
    bool is_master;
    uint64_t seed;
    uint64_t events;
    uint64_t actions;
    uint64_t state_hash;    /**< What this replay computed. */
    uint64_t expected_hash; /**< What the trace says (trailer or failing checkpoint). */
    char message[256];
} sim_replay_result;

/** Re-creates the machine of a trace, feeds its events and compares state hashes. */
sim_replay_status sim_replay(const uint8_t *bytes, uint64_t len, sim_replay_result *out);

#endif /* SIM_H */
