/*
 * sim_internal.h — the simulator's world: nodes (one master, peer
 * processes), connection endpoints, frames in flight, the workload of each
 * peer and the checkers' records. Shared by sim_world.c (the driver),
 * sim_app.c (the workload) and sim_check.c (the checkers).
 */
#ifndef SIM_INTERNAL_H
#define SIM_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ccoip_exec.h"
#include "ccoip_sm.h"
#include "ccoip_trace.h"
#include "sim.h"
#include "sim_heap.h"
#include "sim_net.h"
#include "sim_rng.h"
#include "sim_trace.h"

#define SIM_NONE32 UINT32_MAX

/* Hash of a key pair for the simulator's open-addressing indexes (endpoints by (node, id),
 * rings by (epoch, group), op inputs by (epoch, seq)); lookups compare whole keys. */
static inline uint64_t sim_pair_hash(uint64_t a, uint64_t b)
{
    uint64_t z = b ^ (a * 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 31)) * 0xbf58476d1ce4e5b9ull;
    return z ^ (z >> 29);
}
#define SIM_EP_CACHE 8u /**< Endpoint lookups cached per node (a power of two). */
#define SIM_MAX_OPS  8u /**< Collective op slots per peer (ccoip_peer_config.max_ops). */
/* Slots the driver maps: max_ops collectives + the shared-state sync (max_ops, max_ops + 1). */
#define SIM_OP_SLOTS   (SIM_MAX_OPS + 2u)
#define SIM_STATE_KEYS 3u /**< Shared-state keys of the workload. */
#define SIM_STATE_ELEMS                                                                            \
    64u /**< Floats per key (the last key, allow_content_inequality, has half). */
#define SIM_STATE_BYTES        (SIM_STATE_ELEMS * 4u)
#define SIM_MAX_TAGS           4u
#define SIM_MS                 ((uint64_t)1000000u)
#define SIM_SEC                ((uint64_t)1000000000u)
#define SIM_CONNECT_TIMEOUT_NS (3u * SIM_SEC)
#define SIM_INBOX_MAX          256u /**< Data frames parked per endpoint before a matching RING_RECV. */

typedef enum sim_evk {
    EVK_START = 1,
    EVK_DELIVER,     /* a = frame */
    EVK_ACCEPT,      /* a = endpoint (listener side) */
    EVK_CONN_UP,     /* a = endpoint (dialer side) */
    EVK_CONN_FAIL,   /* a = endpoint (dialer side) */
    EVK_CONN_CLOSED, /* a = endpoint */
    EVK_TIMER,       /* node, a = generation */
    EVK_IO_DONE,     /* node, a = io id */
    EVK_KERNEL,      /* node, a = io id */
    EVK_APP,         /* node, a = app generation */
    EVK_SCRIPT,      /* a = script index */
    EVK_CHURN,       /* a = churn kind */
    EVK_PHASE,       /* churn ends */
    EVK_RESTART,     /* a = host: a new process on it */
    EVK_EP_BROKEN,   /* a = endpoint: its stream broke under its owner */
    EVK_PROBE,       /* node, a = io id: a PROBE finished */
    EVK_FAULT,       /* node, a = 1: crash, 0: hang (a phase fault, sim_fault.c) */
    EVK_FAULT_CHECK  /* a = fault generation: the survivors' bound is due */
} sim_evk;

typedef struct sim_ev {
    uint32_t kind;
    uint32_t node;
    uint64_t a;
    uint64_t b;
} sim_ev;

typedef enum sim_node_state {
    NODE_ALIVE = 0,
    NODE_HUNG = 1,
    NODE_DEAD = 2 /* crashed or exited: never runs again */
} sim_node_state;

typedef enum sim_ep_state { EP_CONNECTING = 0, EP_OPEN = 1, EP_CLOSED = 2 } sim_ep_state;

typedef struct sim_ep {
    /* One cache line (the array is 64-byte aligned). */
    _Alignas(64) uint64_t id; /* the connection id this node knows */
    uint64_t last_arrival_ns; /* frames to this endpoint arrive in order */
    uint64_t max_recv_epoch;  /* newest epoch of a RING_RECV posted here */
    uint32_t *inbox;          /* FIFO: frames held until a RING_RECV matches (head-of-line) */
    uint32_t node;
    uint32_t other;                /* endpoint index of the remote end, SIM_NONE32 when none */
    uint32_t next_of_node;         /* the node's next endpoint (creation order), SIM_NONE32 last */
    uint16_t inbox_len, inbox_cap; /* at most SIM_INBOX_MAX */
    uint8_t state;                 /* sim_ep_state */
    uint8_t listener;
    bool accepted;
    bool stuck; /* a frame to it was lost forever: later ones are too */
    bool torn;  /* a send was cancelled mid-frame: the stream is broken */
    bool pumping;
} sim_ep;
_Static_assert(sizeof(sim_ep) == 64, "sim_ep is one cache line");
_Static_assert(SIM_INBOX_MAX <= UINT16_MAX, "inbox_len fits 16 bits");

typedef struct sim_ep_slot {
    uint64_t id;
    uint32_t node;
    uint32_t e; /* SIM_NONE32: empty */
} sim_ep_slot;

typedef struct sim_frame {
    /* What delivery and matching read: the first cache line (the array is 64-byte aligned). */
    _Alignas(64) bool used;
    bool is_data;
    bool torn;     /* its sender cancelled it mid-write: never delivered */
    bool is_state; /* a STATE_DATA frame (matched on tag, seq, chunk) */
    uint32_t dst_ep;
    uint32_t src_node;
    uint32_t bytes_cap; /* the buffer stays with the slot for the next frame (up to 64 KiB) */
    uint8_t *bytes;
    uint64_t len;
    uint64_t epoch, tag, seq;
    uint32_t chunk, step;
    ccoip_quant_meta quant;
} sim_frame;
_Static_assert(offsetof(sim_frame, step) + 4u <= 64, "sim_frame: matched fields in line 0");

typedef enum sim_io_kind { IO_SEND = 1, IO_RECV = 2, IO_KERNEL = 3, IO_PROBE = 4 } sim_io_kind;

/* A pending I/O in a node's walk order: its record and, for scans without touching the
 * records, its id and endpoint (copies of io_pool[rec].io_id / .ep). */
typedef struct sim_io_ref {
    uint64_t io_id;
    uint32_t rec;
    uint32_t ep;
} sim_io_ref;

typedef struct sim_io {
    /* The first 64 bytes are what the scans over a node's I/Os read (io_find, ep_pump): copies of
     * the action's matching fields, so a scan touches one cache line per I/O. */
    uint64_t io_id;
    sim_io_kind kind;
    uint32_t ep;            /* IO_SEND / IO_RECV */
    bool delivered;         /* IO_RECV: the data is in place, IO_DONE scheduled */
    ccoip_action_type type; /* act.type */
    uint32_t op_slot;
    uint32_t chunk, step;     /* act.chunk, act.step */
    uint64_t epoch, tag, seq; /* act.epoch, act.tag, act.seq */
    ccoip_span_ref dst;       /* act.dst: where a receive lands (the rest of the action is not
                                 needed once it ran: no 320-byte copy per I/O) */
    pcclResult_t result;
    ccoip_quant_meta quant_in;
    ccoip_quant_meta quant_out;
    uint32_t frame;                    /* IO_SEND: the frame in flight */
    uint64_t sent_ns;                  /* IO_SEND: when its last byte leaves */
    uint64_t hash;                     /* HASH kernel */
    uint32_t pos;                      /* its index in the node's ios (walk order) */
    uint64_t probe_bytes, duration_us; /* IO_PROBE */
} sim_io;

/* What the simulator keeps of an op slot beside the executor's regions (ccoip_exec.h). */
typedef struct sim_opmeta {
    bool is_sync; /* the shared-state sync: TENSOR spans map onto the app's tensors */
    bool bound;   /* (epoch, seq) known from a ring action */
    uint64_t epoch, tag, seq;
} sim_opmeta;

typedef enum sim_app_state {
    APP_START = 0,
    APP_CONNECTING,
    APP_UPDATING,
    APP_REDUCING,
    APP_SLEEPING,
    APP_LEAVING,
    APP_GONE,
    APP_SYNCING,
    APP_OPTIMIZING
} sim_app_state;

/* One all-reduce command the application has submitted and not yet seen completed. */
typedef struct sim_appcmd {
    bool used;
    uint64_t cmd_id;
    uint32_t tag;
    bool done;
    pcclResult_t result;
    uint64_t count; /* elements (count + 1 for a deliberate mismatch) */
    uint8_t *input; /* what the application put in sendbuf */
    uint8_t *sendbuf;
    uint8_t *recvbuf; /* == sendbuf when in place */
    uint8_t *pre;     /* recvbuf before the op (in place: == input) */
    bool commenced;
    uint64_t epoch, seq;
    uint32_t notifies;
    uint64_t submitted_ns;
} sim_appcmd;

typedef struct sim_app {
    /* First: what node_recount reads after every step of the node. */
    bool admitted;
    sim_app_state state;
    uint64_t successes_quiet;   /* after churn stopped */
    uint64_t crash_after_sends; /* crash after this many more RING_SENDs (0: off) */
    uint64_t gen;               /* wake-ups of older generations are ignored */
    uint64_t next_cmd_id;
    uint64_t pending_cmd; /* CONNECT / UPDATE / LEAVE in flight (0: none) */
    uint64_t pending_since_ns;
    uint64_t iter;
    uint64_t attempt;
    uint32_t world;
    uint64_t successes;
    bool leave_requested;
    uint64_t stall_ns;
    bool mismatch_next;
    bool rogue_next; /* SIM_SCRIPT_ROGUE_TAG */
    sim_appcmd cmds[SIM_MAX_TAGS];
    uint32_t outstanding;
    /* Shared state (sim_config.shared_state): tensors, revision, sync bookkeeping. */
    uint8_t st[SIM_STATE_KEYS][SIM_STATE_BYTES];
    uint8_t st_pre[SIM_STATE_KEYS][SIM_STATE_BYTES]; /* before the pending sync */
    uint64_t revision;                               /* the revision the state has */
    uint64_t sync_rev;                               /* revision submitted with the pending sync */
    uint64_t syncs;                                  /* successful syncs */
    bool skip_revision_next; /* script: the next sync submits revision + 2 */
    bool diverge_next;       /* script: corrupt a compared tensor before the next sync */
} sim_app;

/* A quiet RING_SEND's frame still being written (contract v8: no I/O record): a CANCEL of its
 * slot before sent_ns tears it and breaks the stream, as for a pending send (rule 8). */
typedef struct sim_quiet {
    uint64_t sent_ns;
    uint32_t frame, ep, slot;
} sim_quiet;
#define SIM_QUIET_MAX 16u

typedef struct sim_node {
    /* Line 0: what every event of the node reads (the array is 64-byte aligned). */
    _Alignas(64) void *m;
    uint8_t *rec;    /* trace recording (NULL: off) */
    sim_io_ref *ios; /* pending I/Os in walk order (records in io_pool) */
    sim_io *io_pool; /* ios_cap records */
    uint32_t ios_len, ios_cap;
    uint32_t host;
    sim_node_state state;
    uint64_t timer_gen;
    uint64_t timer_at;
    /* Line 1: node_recount, frame matching, endpoint walks. */
    bool is_master;
    bool counted_live;   /* counted in sim_world.live */
    bool counted_undone; /* counted in sim_world.undone */
    uint32_t cancelled_next;
    uint64_t cancelled_max_epoch; /* the newest epoch in cancelled[] */
    uint64_t inherited_steps;     /* per-step churn: steps of the process this one replaced */
    uint32_t *io_free;            /* free records of io_pool (a stack) */
    uint32_t io_free_len;
    /* The application (its hot fields still in line 1). */
    sim_app app;
    /* Its endpoints in creation order, as index + 1 (0: none), so a kill closes them without a
     * walk over every endpoint of the run. */
    uint32_t ep_first1, ep_last1;
    uint32_t group;
    uint32_t peer_index;
    /* Lazy timer (world_feed, EVK_TIMER): the live deadline's queue key (timer_t, timer_seq) is
     * reserved when it is set but only pushed when it is earlier than the entry already queued
     * for the node (timer_q, carrying timer_qgen); that entry re-pushes the key when it pops. */
    uint64_t timer_t, timer_seq;
    uint64_t timer_q, timer_qgen;
    /* Recently looked-up connections: id -> endpoint + 1 (0: empty), slot id % SIM_EP_CACHE. */
    uint64_t epc_id[SIM_EP_CACHE];
    uint32_t epc_e1[SIM_EP_CACHE];
    uint32_t ports[3];
    /* Op slots: the regions each in-flight op bound (the core's executor resolves spans in
     * them), the simulator's own per-slot facts, and the sync's tensor pointers. */
    ccoip_exec_slot ops[SIM_OP_SLOTS];
    sim_opmeta opm[SIM_OP_SLOTS];
    uint8_t *st_ptr[SIM_STATE_KEYS];
    uint64_t st_bytes[SIM_STATE_KEYS];
    uint64_t peer_id; /* from HelloResult (0: unknown) */
    uint64_t max_epoch_seen;
    uint64_t last_commence_seq[SIM_MAX_TAGS];
    uint64_t last_commence_epoch[SIM_MAX_TAGS];
    bool commence_seen[SIM_MAX_TAGS];
    /* Optimistic ops (ring seq 0, docs/protocol.md §6.8.1): the checker's own op number,
     * (epoch, tag, n-th use of the tag in that epoch), the same on every member. */
    uint64_t opt_epoch[SIM_MAX_TAGS];
    uint32_t opt_uses[SIM_MAX_TAGS];
    /* Master relay (§6.8.2): the input each tag's relayed initiate carried (the checker binds
     * it to the master's seq when the master answers, even if this node died meanwhile). */
    uint8_t *relay_in[SIM_MAX_TAGS];
    uint64_t relay_in_len[SIM_MAX_TAGS];
    uint64_t slot_busy_until[SIM_OP_SLOTS]; /* kernels of a slot complete in order */
    sim_quiet quiet[SIM_QUIET_MAX];         /* quiet sends, a ring (the oldest are long done) */
    uint32_t quiet_next;
    uint64_t cancelled[32][3]; /* (epoch, tag, seq) of cancelled ops, a ring */
    sim_rng rng;
    uint64_t died_ns;
    bool evicted;
    /* shared-state checkers: from the master's verdicts to this peer */
    uint64_t sync_popular;   /* SYNC_VERDICT.popular_revision */
    uint64_t sync_expect_rx; /* bytes of the keys the verdict told it to fetch */
    bool sync_outdated;
    uint64_t sync_vround;                      /* master event that sent its SYNC_VERDICT */
    uint64_t sync_expect_hash[SIM_STATE_KEYS]; /* the verdict's expected hash per key ... */
    bool sync_fetch[SIM_STATE_KEYS];           /* ... of the keys it names */
    uint64_t sync_round;    /* master event that sent its SYNC_DONE_VERDICT (success) */
    uint64_t verdict_epoch; /* epoch of the last successful TopologyVerdict it received */
    bool sync_retry;        /* a sync failed retryably; the next success is a retry */
    bool call_mismatch;     /* the master's last refusal: REASON_CALL_MISMATCH (§6.12) */
    /* trace recording */
    uint64_t rec_len, rec_cap;
    uint64_t rec_events;
    uint64_t rec_polled; /* actions polled since the last record */
    ccoip_trace_hasher rec_hash;
} sim_node;
_Static_assert(offsetof(sim_node, is_master) <= 64 &&
                   offsetof(sim_node, app) + offsetof(sim_app, crash_after_sends) + 8u <= 128,
               "sim_node: the hot fields are in its first two cache lines");

/* A completed (epoch, seq) and what the checkers know of it. */
/*
 * An index of records by (epoch, seq), the first two fields of every record type it serves
 * (sim_oprec, sim_inrec): open addressing over record numbers, SIM_NONE32 empty; a key maps to
 * its latest record (sim_check.c, seqidx_*).
 */
typedef struct sim_seqidx {
    uint32_t *slot;
    uint32_t cap;
} sim_seqidx;

typedef struct sim_oprec {
    uint64_t epoch, seq, tag;
    uint32_t world;
    uint32_t results;
    uint8_t *result; /* the first member's result */
    bool invalid_usage_seen;
} sim_oprec;

typedef struct sim_epochrec {
    uint64_t epoch;
    uint32_t group;
    uint64_t *ring;
    uint32_t ring_len;
} sim_epochrec;

/* Inputs of the members of one (epoch, seq), for the reference reduction. */
typedef struct sim_inrec {
    uint64_t epoch, seq;
    uint64_t peer_id;
    uint32_t node;
    uint32_t prev; /**< the previous record of the same (epoch, seq), or SIM_NONE32 */
    uint8_t *input;
} sim_inrec;

/* One successful shared-state round of a group (members share its done verdict). */
typedef struct sim_syncrec {
    uint64_t round;
    uint32_t group;
    uint64_t revision;
    uint64_t hash; /* the compared tensors of the first member */
    uint32_t sent, notified;
    uint32_t voters; /* members of the round's SYNC_VERDICT step */
    uint64_t rx, tx;
} sim_syncrec;

typedef struct sim_world {
    sim_config cfg;
    const sim_sm_vt *vt;
    sim_result *res;
    sim_rng rng;     /* world decisions (churn targets, faults) */
    sim_rng net_rng; /* network loss */
    sim_heap heap;
    sim_net net;
    sim_trace trace;
    uint64_t now;
    bool failed;
    bool done;
    bool quiet; /* churn over */

    sim_node *nodes;
    void *nodes_mem;      /* the allocation nodes sits in (64-byte aligned inside it) */
    uint8_t *node_st;     /* nodes[i].state, one byte each */
    uint32_t *node_group; /* nodes[i].group (supervise_groups walks these, not the records) */
    uint32_t *node_host;  /* nodes[i].host (every frame sent reads two) */
    void **node_m;        /* nodes[i].m (the next event's machine is prefetched) */
    uint32_t *sup_cnt, *sup_lone; /* supervise_groups' tables, reused */
    uint32_t sup_cap;
    uint32_t *grave; /* nodes killed since the last event, to release (bury_dead) */
    uint32_t grave_len, grave_cap;
    uint32_t num_nodes, cap_nodes;
    uint32_t num_peers_created;

    sim_ep *eps;
    uint32_t eps_len, eps_cap;
    /* (node, id) -> endpoint: open addressing, linear probing; keys kept in the slots, so a
     * probe touches no endpoint */
    sim_ep_slot *ep_map;
    uint64_t ep_map_cap;
    uint32_t ep_map_len; /* endpoints in ep_map: the dialled ones */
    /* Accepted endpoints by id - CCOIP_CONN_ACCEPTED_BASE - 1 (the driver's ids, in order). */
    uint32_t *acc_tab;
    uint32_t acc_len, acc_cap;
    uint64_t next_accept_id;

    sim_frame *frames;
    uint32_t frames_len, frames_cap;
    uint32_t *frame_free;
    uint32_t frame_free_len;

    uint64_t elem_bytes;
    uint64_t op_bytes;
    uint32_t corrupt_done;
    bool double_notify_done;

    /* checkers */
    sim_epochrec *epochs;
    uint32_t epochs_len, epochs_cap;
    uint32_t *epoch_idx; /* (epoch, group) -> index into epochs */
    uint64_t epoch_idx_cap;
    sim_oprec *oprecs;
    uint32_t oprecs_len, oprecs_cap;
    uint8_t *dec_arena; /* the observer's decode arena (check_m2p_*), grown on demand */
    uint64_t dec_arena_cap;
    sim_seqidx oprec_idx; /* (epoch, seq) -> its oprec (one record per key) */
    sim_inrec *inrecs;
    uint32_t inrecs_len, inrecs_cap;
    /* (epoch, seq) -> its latest inrec: an op's members without a scan of every record ever
     * made (quadratic over a 10,000-peer run). */
    sim_seqidx inrec_idx;
    uint64_t master_max_epoch_sent;
    uint64_t *commence_epoch_by_seq; /* indexed by seq (bounded) */
    uint64_t commence_cap;
    uint32_t seen_expect;
    uint64_t quiet_ns;
    uint64_t protocol_violations;
    sim_syncrec *syncrecs;
    uint32_t syncrecs_len, syncrecs_cap;
    uint64_t probe_bytes; /* of the last PROBE (the master's probe size) */
    bool lossy; /* the run started with frame loss (the quiet phase clears cfg.loss_permille) */
    uint64_t crash_state_after; /* script: the sender of the n-th next STATE_SEND crashes */

    /* scale: O(1) bookkeeping instead of scans */
    uint32_t *host_node; /* host -> its newest node (SIM_NONE32: none) */
    uint32_t host_node_cap;
    uint32_t live;        /* peers in NODE_ALIVE */
    uint32_t undone;      /* live peers not yet admitted or short of their steps */
    uint32_t spawn_group; /* group of the next spawned peer (SIM_NONE32: by index) */
    uint64_t next_progress_ns;

    /* Phase faults and the survivors' bound after a fault (sim_fault.c). */
    bool pf_armed;
    bool pf_crash;
    bool pf_scripted;        /* armed by a script: may fire after churn too */
    uint32_t pf_phase;       /* sim_phase */
    uint32_t pf_min_ring;    /* the phase's ring must have at least this many members */
    uint32_t pf_victim;      /* node to fault, or SIM_NONE32: the recipient of the frame */
    uint32_t pf_skip;        /* matching frames to let pass first */
    uint64_t flt_ns;         /* the newest fault (hang, crash, leave) */
    uint64_t flt_gen;        /* bumped by every fault and network window: the newest is checked */
    uint64_t net_busy_until; /* the latest end of a partition or clog window */
} sim_world;

/* sm_core.c: the header of a trace of the machine these parameters create. */
bool sim_sm_trace_header(bool is_master, const sim_master_params *mp, const sim_peer_params *pp,
                         uint64_t seed, ccoip_trace_header *out);

/* sim_world.c */
void world_fail(sim_world *w, sim_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void world_log(sim_world *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
bool world_push(sim_world *w, uint64_t t, uint32_t kind, uint32_t node, uint64_t a, uint64_t b);
void world_feed(sim_world *w, uint32_t node, ccoip_event *ev);
void world_kill(sim_world *w, uint32_t node, bool graceful);
uint32_t world_spawn_peer(sim_world *w, uint32_t host);
void world_replace_peer(sim_world *w, uint32_t node);
void node_recount(sim_world *w, uint32_t node);

/* Link a -> b as the virtual network has it: PROBE duration of bytes (deterministic). */
uint64_t world_probe_us(const sim_world *w, uint32_t host_a, uint32_t host_b, uint64_t bytes);

/* sim_app.c */
void app_start(sim_world *w, uint32_t node);
void app_wake(sim_world *w, uint32_t node);
void app_notify(sim_world *w, uint32_t node, const ccoip_action *act);
sim_appcmd *app_find_cmd(sim_node *n, uint64_t cmd_id);
/** A relayed initiate (contract v9: a SEND with a span) of node: remember its input. */
void check_relay_initiate(sim_world *w, uint32_t node, const uint8_t *frame, uint64_t len,
                          const uint8_t *input, uint64_t bytes);
/** The all-reduce of tag in flight that no ring bound yet (a relayed one), or NULL. */
sim_appcmd *app_find_unbound_tag(sim_node *n, uint32_t tag);
/** The checker's epoch key of relayed ops (docs/protocol.md §6.8.2): the master's seq alone
 * names them; they belong to no ring epoch. */
#define SIM_RELAY_EPOCH UINT64_MAX
void app_schedule(sim_world *w, uint32_t node, uint64_t delay_ns);

/* sim_fault.c */
/** The survivors' bound after a fault: evict_ms + SIM_FAULT_SLACK + 16 one-way latencies. */
uint64_t fault_bound_ns(const sim_world *w);
/** Arms a phase fault (a script or the phase-fault churn). */
void fault_arm(sim_world *w, uint32_t phase, bool crash, uint32_t victim, uint32_t min_ring,
               uint32_t skip, bool scripted);
/** A frame the master sends to dst_node: fires an armed phase fault on a match. */
void fault_on_m2p(sim_world *w, uint32_t dst_node, const void *env);
/** A peer hung, crashed or left at w->now: its survivors are checked at now + bound. */
void fault_noted(sim_world *w);
/** A partition or clog window until until_ns: no fault is checked across it. */
void fault_net_window(sim_world *w, uint64_t until_ns);
/** EVK_FAULT_CHECK: every live peer's command older than the fault must be done. */
void fault_check(sim_world *w, uint64_t gen);

/* sim_check.c */
void check_m2p_sent(sim_world *w, uint32_t dst_node, const uint8_t *frame, uint64_t len);
void check_m2p_recv(sim_world *w, uint32_t node, const uint8_t *frame, uint64_t len);
void check_ring_action(sim_world *w, uint32_t node, const ccoip_action *act);
void check_allreduce_notify(sim_world *w, uint32_t node, sim_appcmd *c, const ccoip_action *act);
void check_final(sim_world *w);
void check_sync_notify(sim_world *w, uint32_t node, const ccoip_action *act);
/* A failed sync: each tensor untouched, or wholly the verified content its verdict named. */
void check_sync_failed(sim_world *w, uint32_t node);
void check_optimize_notify(sim_world *w, uint32_t node);
/* Liveness: after churn, no command may wait longer than the op bound. */
void check_progress(sim_world *w);
uint64_t check_op_bound_ns(const sim_world *w);
void check_free(sim_world *w);

#endif /* SIM_INTERNAL_H */
