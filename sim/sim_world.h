/*
 * sim_world.h — the simulator's world as its observers see it (the workload,
 * sim_app.c, and the checkers, sim_check*.c): nodes (one master, peer
 * processes), connection endpoints, frames in flight, the event queue, and
 * the observer interface through which the world reports what happens.
 *
 * The world never calls the workload or the checkers: they register a
 * sim_observer (world_observe) and the world calls its hooks; they call the
 * world (world_feed, world_push, world_kill, ...). The world's own files
 * (event loop, connections, actions, nodes, churn, recording) share
 * sim_world_int.h.
 */
#ifndef SIM_WORLD_H
#define SIM_WORLD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ccoip_exec.h"
#include "ccoip_frame.h"
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
    EVK_WAKE,        /* node, a = generation: an observer's wake-up (world_wake_at) */
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
    bool bound; /* (epoch, tag, seq) known from a ring action (what a CANCEL cancels) */
    uint64_t epoch, tag, seq;
} sim_opmeta;

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
    ccoip_trace_writer *rec; /* trace recording (NULL: off) */
    sim_io_ref *ios;         /* pending I/Os in walk order (records in io_pool) */
    sim_io *io_pool;         /* ios_cap records */
    uint32_t ios_len, ios_cap;
    uint32_t host;
    sim_node_state state;
    uint64_t timer_gen;
    uint64_t timer_at;
    /* Line 1: node_recount, frame matching, endpoint walks. */
    bool is_master;
    bool counted_live;   /* counted in sim_world.live */
    bool counted_undone; /* counted in sim_world.undone */
    /* The run's goal, reported by the workload: admitted, and the steps done after churn. */
    bool admitted;
    uint32_t cancelled_next;
    uint64_t cancelled_max_epoch; /* the newest epoch in cancelled[] */
    uint64_t inherited_steps;     /* per-step churn: steps of the process this one replaced */
    uint64_t steps_quiet;         /* steps completed after churn stopped */
    uint64_t crash_after_sends;   /* script: crash after this many more RING_SENDs (0: off) */
    uint32_t *io_free;            /* free records of io_pool (a stack) */
    uint32_t io_free_len;
    uint32_t group;
    uint32_t peer_index;
    /* Its endpoints in creation order, as index + 1 (0: none), so a kill closes them without a
     * walk over every endpoint of the run. */
    uint32_t ep_first1, ep_last1;
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
     * them; the workload binds the application's, sim_observer.bind_op) and the simulator's
     * own per-slot facts. */
    ccoip_exec_slot ops[SIM_OP_SLOTS];
    sim_opmeta opm[SIM_OP_SLOTS];
    uint64_t peer_id;                       /* from HelloResult (0: unknown) */
    uint64_t slot_busy_until[SIM_OP_SLOTS]; /* kernels of a slot complete in order */
    sim_quiet quiet[SIM_QUIET_MAX];         /* quiet sends, a ring (the oldest are long done) */
    uint32_t quiet_next;
    uint64_t cancelled[32][3]; /* (epoch, tag, seq) of cancelled ops, a ring */
    sim_rng rng;               /* the node's own randomness (its machine's seed, the workload) */
    uint64_t died_ns;
} sim_node;
_Static_assert(offsetof(sim_node, is_master) <= 64 &&
                   offsetof(sim_node, crash_after_sends) + 8u <= 128,
               "sim_node: the hot fields are in its first two cache lines");

/*
 * The observer interface. A module that follows the run (the workload, the
 * checkers) fills the hooks it needs (NULL: not interested) and registers the
 * struct with world_observe before world_start. Each hook gets the ctx it was
 * registered with. Hooks run inside the world's handling of an event, in
 * registration order (the checkers register before the workload, so they see
 * a NOTIFY before the workload acts on it); a hook may call the world
 * (world_feed, world_push, world_kill, world_fail ...).
 */
typedef struct sim_observer {
    void *ctx;
    /** A peer's machine took its START event. */
    void (*start)(void *ctx, uint32_t node);
    /** A wake-up the observer asked for (world_wake_at) is due and node runs. */
    void (*wake)(void *ctx, uint32_t node, uint64_t gen);
    /** A machine emitted NOTIFY (a command's verdict). */
    void (*notify)(void *ctx, uint32_t node, const ccoip_action *a);
    /**
     * OP_BEGIN: bind the application's regions of command a->cmd_id into slot
     * (send/recv/bytes, or the sync's tensors); the world adds scratch and
     * backup. True when this observer owns the command; the first that does
     * wins. False from all: the machine named an unknown command (a crash).
     */
    bool (*bind_op)(void *ctx, uint32_t node, const ccoip_action *a, ccoip_exec_slot *slot);
    /** OP_BEGIN bound slot a->op_slot to command a->cmd_id (after bind_op): every observer. */
    void (*op_begin)(void *ctx, uint32_t node, const ccoip_action *a);
    /** The first ring action of an op slot: its (epoch, tag, seq) are now known (n->opm). */
    void (*op_bound)(void *ctx, uint32_t node, const ccoip_action *a);
    /** A relayed initiate (contract v9: a SEND with a span): frame and the input it carries. */
    void (*relay_initiate)(void *ctx, uint32_t node, const uint8_t *frame, uint64_t len,
                           const uint8_t *input, uint64_t bytes);
    /** The master sent dst a control frame (decoded once by the world, valid for the call). */
    void (*m2p_sent)(void *ctx, uint32_t dst, const ccoip_pb_master_to_peer *m);
    /** A peer is about to receive a master's control frame (decoded, as above). */
    void (*m2p_recv)(void *ctx, uint32_t node, const ccoip_pb_master_to_peer *m);
    /** Churn or a script asks node's process to leave gracefully at its next command. */
    void (*leave)(void *ctx, uint32_t node);
    /** A script event for the application (STALL, MISMATCH, DIVERGE, SKIP_REVISION). */
    void (*script)(void *ctx, uint32_t node, const sim_script_event *s);
    /** node's process died (crash, exit, replacement); it never runs again. */
    void (*killed)(void *ctx, uint32_t node);
    /** node's memory goes back (a dead node, or the end of the run): free what is node's. */
    void (*release)(void *ctx, uint32_t node);
    /** Quiet phase, every 100 ms of simulated time (after the supervisor). */
    void (*tick)(void *ctx);
    /** The bound after the newest fault is due and the fault is checked (sim_fault.c). */
    void (*fault_due)(void *ctx);
    /** The loop is over (failed or not): final checks, reports. */
    void (*end)(void *ctx);
} sim_observer;
#define SIM_OBSERVERS_MAX 4u

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
    bool lossy; /* the run started with frame loss (the quiet phase clears cfg.loss_permille) */
    uint64_t quiet_ns;
    uint32_t seen_expect; /* scenario expectations seen (sim_config.expect), by any module */

    sim_observer obs[SIM_OBSERVERS_MAX];
    uint32_t nobs;

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
    uint32_t corrupt_done;
    uint32_t flip_done; /* SIM_CANARY_FLIP_VERDICT fired */
    uint32_t flip_node; /* ... and the node and command of the last OP_END */
    uint64_t flip_cmd;
    uint32_t flip_slot; /* ... and its op slot (SIM_CANARY_SHORT_P2P: an application op's) */
    uint8_t *dec_arena; /* the decode arena of master frames for the observers, grown on demand */
    uint64_t dec_arena_cap;
    uint64_t protocol_violations;
    uint64_t probe_bytes; /* of the last PROBE (the master's probe size) */
    /* The optimization under way (sim_app.c): its first member's call, successes so far. */
    uint64_t opt_round_t0;
    uint32_t opt_round_ok;
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

/* ------------------------------------------------------------------------ */
/* The world's interface (sim_world.c unless noted)                         */
/* ------------------------------------------------------------------------ */

/**
 * A world for cfg (already validated by sim_run), results into res; NULL when
 * out of memory (res->status is SIM_CRASH). Observers register next, then
 * world_start, world_run, world_destroy.
 */
sim_world *world_create(const sim_config *cfg, const sim_sm_vt *vt, sim_result *res);
/** Registers an observer (before world_start). False when SIM_OBSERVERS_MAX are registered. */
bool world_observe(sim_world *w, const sim_observer *obs);
/** Creates the master and the first peers, schedules churn, scripts and the phase change. */
void world_start(sim_world *w);
/** Runs the loop to its end, then the observers' end hooks and the recorded traces' sinks. */
void world_run(sim_world *w);
/** Frees everything (the observers' release hooks run for every node first). */
void world_destroy(sim_world *w);

void world_fail(sim_world *w, sim_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void world_log(sim_world *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/** Feeds ev to node's machine (now_ns set here) and runs the actions it emits. */
void world_feed(sim_world *w, uint32_t node, ccoip_event *ev);
/** The observers' wake hook for node at w->now + delay_ns, carrying gen (EVK_WAKE). */
void world_wake_at(sim_world *w, uint32_t node, uint64_t delay_ns, uint64_t gen);
/** node's process dies: graceful (an exit) or a crash (sim_node.c). */
void world_kill(sim_world *w, uint32_t node, bool graceful);
/** Per-step churn: node is replaced by a new process of its group (sim_node.c). */
void world_replace_peer(sim_world *w, uint32_t node);
/** A probe of want bytes from host_a to host_b on the virtual network: its duration in µs;
 *  *bytes_out (may be NULL) gets the bytes it sends (fewer than want when bounded by time,
 *  sim_config.probe_timed). */
uint64_t world_probe_us(const sim_world *w, uint32_t host_a, uint32_t host_b, uint64_t want,
                        uint64_t *bytes_out);
/** The host accepts no connections (sim_config.no_inbound_hosts: a peer behind NAT). */
bool world_host_no_inbound(const sim_world *w, uint32_t host);
/**
 * Room for one more element in a growable array: *(T **)arr holds len elements of elem bytes
 * in room for *cap; when full the room doubles (first when empty), 64-byte aligned when
 * aligned, the contents kept. False when out of memory (the array and *cap unchanged).
 */
bool sim_grow(void *arr, uint32_t *cap, uint32_t len, size_t elem, uint32_t first, bool aligned);
/** An index table of n slots, every one SIM_NONE32 (empty); NULL when out of memory. */
uint32_t *sim_index_new(uint64_t n);
/** Decodes a control frame into the world's decode arena (valid until the next decode). */
bool world_decode_m2p(sim_world *w, const uint8_t *frame, uint64_t len,
                      ccoip_pb_master_to_peer *out);
bool world_decode_p2m(sim_world *w, const uint8_t *frame, uint64_t len,
                      ccoip_pb_peer_to_master *out);
/** The survivors' bound after a fault: evict_ms + SIM_FAULT_SLACK + 16 one-way latencies. */
uint64_t fault_bound_ns(const sim_world *w);

#endif /* SIM_WORLD_H */
