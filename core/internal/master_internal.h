/*
 * master_internal.h — the master's state, shared by master.c (sessions,
 * hello/join, liveness, dispatch), master_topology.c (topology votes, the
 * p2p phase, ring building, pending-peer queries) and master_collective.c
 * (collective votes and verdicts). docs/core.md §2 describes the states.
 */
#ifndef CCOIP_MASTER_INTERNAL_H
#define CCOIP_MASTER_INTERNAL_H

#include <assert.h>

#include "ccoip_algo.h"
#include "ccoip_master.h"
#include "ccoip_peer.h"
#include "ccoip_ring.h"
#include "ccoip_sm_internal.h"

/** Room one relayed answer needs beyond the result bytes (frame header and verdict fields). */
#define M_RELAY_FRAME_BYTES 256u

/** Endpoint kinds the master stores per peer (EndpointKind values 0..2). */
#define M_ENDPOINT_KINDS 3u

/** A listen endpoint a peer announced in Join: its port only (a url is never kept or passed
 *  on: docs/protocol.md §2). */
typedef struct m_endpoint {
    bool has;
    uint32_t port;
} m_endpoint;

/** Session states of a peer slot (docs/core.md §2.1). */
typedef enum m_peer_state {
    MP_FREE = 0,
    MP_HELLO = 1,   /**< connected, Hello not received yet */
    MP_NEW = 2,     /**< Hello answered, Join not received yet */
    MP_PENDING = 3, /**< joined, waiting to be admitted */
    MP_ACCEPTED = 4 /**< member of its group's ring */
} m_peer_state;

typedef struct m_peer {
    /* The fields the walks over all peers read come first (one cache line per peer). */
    m_peer_state state;
    uint32_t group;
    uint64_t id;
    bool in_phase;   /**< P2P phase (§6.4) */
    bool rewire;     /**< its group lost its ring: in the next REWIRE phase (docs/core.md §2.2) */
    bool reported;   /**< P2P phase */
    bool report_ok;  /**< P2P phase */
    bool no_inbound; /**< a dial to it failed (§6.4): its ring links are dialled from it */
    bool relay_succ; /**< its plan's link to succ goes through the master's relay (§8.6) */
    bool relay_failed; /**< a relayed link of it failed: no more relayed links for it */
    bool topo_voted;   /**< Topology vote (§6.3). */
    bool topo_accept;  /**< Topology vote (§6.3). */
    bool pend_voted;   /**< Pending-peers vote (§6.5). */
    uint8_t sync_st;   /**< MS_*: shared-state sync (§6.7, master_state.c) */
    uint8_t opt_st;    /**< MO_*: topology optimization (§6.6, master_optimize.c) */
    bool opt_failed;   /**< a probe of this round failed or is missing */
    /* Ring position in the current (or planned) ring of its group. */
    uint32_t rank;
    uint32_t ring_size;
    uint32_t pred;       /**< slot index */
    uint32_t succ;       /**< slot index */
    uint32_t n_ops;      /**< collective ops it has a member record in (limit max_ops) */
    uint64_t ring_epoch; /**< epoch of the last ring it was admitted to (its group's epoch) */
    uint32_t ring_key;   /**< Join.ring_key: rings list a group by (ring_key, id) */
    uint64_t conn;
    uint64_t up_ns;        /**< CONN_UP: the session must have joined by up_ns + evict_ms */
    uint64_t last_recv_ns; /**< the last frame legal in its state (docs/protocol.md §6.10) */
    uint64_t last_send_ns;
    uint64_t hb_counter;
    uint64_t topo_call;
    uint64_t pend_call;
    uint64_t report_call;
    uint64_t sync_call;
    uint64_t sync_rev;
    int32_t sync_strategy;
    uint32_t sync_nkeys;
    bool sync_ok;
    uint32_t sync_load; /**< receivers assigned to this distributor */
    uint32_t sync_dist; /**< slot of its distributor (ASSIGNED receivers), else M_SLOT_NONE */
    bool sync_fetch;    /**< it fetches keys from sync_dist this round */
    uint64_t opt_call;
    /** A p2p phase that failed early sent it the verdict of this epoch as a notification
     *  before its report (docs/protocol.md §6.4): a late report of it is dropped. */
    uint64_t early_epoch;
    /** Its probe round failed at the deadline while it was still probing (docs/protocol.md
     *  §6.6): its late bandwidth report is dropped and its optimize_done answered with failure. */
    bool opt_late;
    uint8_t ip[16];
    uint32_t ip_len;
    m_endpoint ep[M_ENDPOINT_KINDS];
    /* Authenticated runs (docs/protocol.md §6.1.1): the challenges of its Hello exchange. */
    uint8_t auth_nonce[CCOIP_AUTH_NONCE_BYTES];      /**< the master's, sent in HelloResult */
    uint8_t auth_peer_nonce[CCOIP_AUTH_NONCE_BYTES]; /**< the peer's, from Hello (0s: none) */
} m_peer;

#define MO_NONE    0u
#define MO_VOTED   1u /**< voted optimize_topology */
#define MO_PROBING 2u /**< got its probe requests */
#define MO_DONE    3u /**< sent optimize_done */

#define MS_NONE     0u /**< not in a sync */
#define MS_VOTED    1u /**< voted, waiting for the election */
#define MS_ASSIGNED 2u /**< got its verdict, waiting for its sync_done */
#define MS_DONE     3u /**< sent sync_done */

/** One key of a stored sync vote. */
typedef struct m_skey {
    uint8_t name[CCOIP_STATE_NAME_MAX];
    uint32_t name_len;
    uint64_t hash;
    int32_t dtype;
    uint64_t count;
    bool aci;
} m_skey;

/** Shared-state bookkeeping of one peer group. */
typedef struct m_sgroup {
    bool used;
    uint32_t group;
    bool has_next; /**< a sync of the group succeeded: `next` is known */
    uint64_t next;
    bool transfer; /**< verdicts sent, waiting for every sync_done */
    uint64_t popular_rev;
    uint64_t round; /**< the running round's number (m->sync.next_round) */
    bool has_first;
    uint64_t first_ns;
} m_sgroup;

/** One member of a collective operation; an op's members are kept sorted by peer id. */
typedef struct m_op_member {
    uint64_t id;        /**< the peer's id (sort key) */
    uint64_t call;      /**< initiate call (voting) or complete call (running) */
    uint64_t opt_epoch; /**< optimistic start (protocol §6.8.1): its ring's epoch; 0: none */
    uint64_t pin_epoch; /**< the epoch its initiate was pinned to (§6.8.3); 0: none */
    uint64_t done_call; /**< MOM_EARLY: the completion call that came while voting */
    uint8_t *relay;     /**< master relay (§6.8.2): a copy of its input (voting); else NULL */
    uint64_t relay_len; /**< bytes of relay (0 also for an empty input, §6.8.3) */
    uint32_t slot;
    uint8_t flags;
    bool p2p_send;     /**< send / recv (§6.8.4): its ballot is the SEND */
    uint32_t p2p_root; /**< send / recv: the rank its ballot names (the other member's) */
} m_op_member;

#define MOM_MEMBER    0x01u /**< part of the running op */
#define MOM_VOTED     0x02u /**< initiated (voting) */
#define MOM_COMPLETED 0x04u /**< sent collective_complete */
#define MOM_VERDICT   0x08u /**< its one verdict was sent */
#define MOM_EARLY     0x10u /**< optimistic: completed while the op was voting */
#define MOM_EARLY_AB  0x20u /**< ... and reported an abort */
#define MOM_EARLY_NF  0x40u /**< ... with REASON_NON_FINITE */

typedef enum m_op_state { MOP_FREE = 0, MOP_VOTING = 1, MOP_RUNNING = 2 } m_op_state;

typedef struct m_op {
    m_op_state state;
    uint32_t group;
    uint64_t tag;
    uint64_t seq;
    uint64_t epoch;
    uint32_t world;
    /* Parameters of the first ballot; later ballots must equal them. */
    uint64_t count;
    int32_t dtype;
    int32_t op;
    int32_t quant_algorithm;
    int32_t quant_dtype;
    int32_t kind;       /**< CollectiveKind (§6.8.3) */
    uint32_t root;      /**< rooted kinds: the root's rank */
    uint32_t algorithm; /**< the resolved algorithm the ballots name (0: relayed) */
    bool mismatch;
    bool relay; /**< master relay (§6.8.2): answered with the result when the vote completes */
    bool has_first;
    uint64_t first_ns;  /**< first ballot (voting) / first completion (running) */
    uint32_t timer_gen; /**< bumped whenever first_ns is (re)armed: stale timer entries lose */
    bool aborted;
    bool dirty; /**< queued for the next progress pass */
    int32_t reason;
    /* Counters, so that a pass over the ops does not walk every peer. */
    uint32_t n_voted;  /**< members with MOM_VOTED (voting) */
    uint32_t n_member; /**< members with MOM_MEMBER (running) */
    uint32_t n_done;   /**< members with MOM_MEMBER and MOM_COMPLETED (running) */
    uint32_t anchor;   /**< slot of a voter (voting), or M_SLOT_NONE if unknown */
    /* Members, sorted by peer id (the order the old dense table was walked in). */
    m_op_member *mem;
    uint32_t mem_n, mem_cap;
} m_op;

/** A vote/completion deadline: ops arm them in time order, so a FIFO stays sorted. */
typedef struct m_op_timer {
    uint64_t due_ns;
    uint32_t op;
    uint32_t gen;
} m_op_timer;

typedef enum m_phase_kind { MPH_NONE = 0, MPH_ADMIT = 1, MPH_REWIRE = 2 } m_phase_kind;

/*
 * The master's state, one sub-struct per concern, each owned (initialized, freed, and changed)
 * by the file named on it; other files read it and call that file's functions (docs/core.md
 * §2.7). The per-slot record m_peer holds each concern's per-peer fields.
 */

/** Peer sessions and the membership (master.c, master_peers.c; m_sess_init/_deinit). */
typedef struct m_sessions {
    m_peer *peers;   /**< [max_peers] */
    uint32_t *order; /**< slot indices of slots with an id, ascending peer id */
    uint32_t order_n;
    uint64_t next_id;
    uint32_t n_acc;      /**< peers in MP_ACCEPTED (kept by m_peer_set_state) */
    uint32_t n_unjoined; /**< slots in MP_HELLO or MP_NEW (kept by m_peer_set_state) */
    /* conn -> slot index, open addressing with linear probing, conn_cap = 2^k >= 2 max_peers. */
    uint32_t *conn_map;
    uint32_t conn_cap;
    /* World sizes of one snapshot (m_world_prepare): distinct groups in first-seen order with
     * their counts, and group -> index (a hash map for lookup only, conn_cap entries). */
    uint32_t *w_gid;
    uint32_t *w_cnt;
    uint32_t *w_map;
    uint32_t w_ngroups, w_global, w_largest;
} m_sessions;

/** Heartbeats and silence (master_live.c; m_live_init/_deinit; docs/core.md §2.3). */
typedef struct m_liveness {
    /** A lower bound of the earliest heartbeat/silence deadline. */
    uint64_t live_next;
    /* Every used slot in a binary min-heap on (deadline key, slot): a key is a lower bound of the
     * slot's deadline (sends and receives only move deadlines later and are not re-keyed), so a
     * liveness scan visits the due slots and the stale keys on top, never every slot. */
    uint64_t *lq_key; /**< [max_peers] key of slot s while it is in the heap */
    uint32_t *lq;     /**< [max_peers] heap of slots */
    uint32_t *lq_pos; /**< [max_peers] slot -> heap index, M_SLOT_NONE when not in it */
    uint32_t lq_len;
    uint32_t *lq_due; /**< [max_peers] scratch: the due slots of one scan */
    uint64_t *lq_ids; /**< [max_peers] scratch: their ids, sorted */
} m_liveness;

/** Topology votes, the p2p phase, links (master_topology.c; m_topo_init/_deinit; §2.2). */
typedef struct m_topology {
    uint64_t epoch;
    bool ring_healthy;
    m_phase_kind phase; /**< changed by m_set_phase only */
    uint64_t phase_start_ns;
    bool phase_failed;
    bool phase_answers_votes;
    bool topo_timer;
    uint64_t topo_first_ns;
    bool pend_timer;
    uint64_t pend_first_ns;
    /* Counters kept on state changes, so that progress passes need no walk over the peers. */
    uint32_t n_tv_acc;     /**< accepted peers with topo_voted */
    uint32_t n_pend_voted; /**< peers with pend_voted */
    uint32_t n_phase_wait; /**< peers in_phase that have not reported (during a phase) */
    uint64_t rewire_gen;   /**< bumped by m_mark_rewire*: collective votes re-check their group */
    uint8_t *unreach;      /**< bit matrix [max_peers][max_peers]: row from, column to */
    bool strict_links;     /**< ring search: only links dialled into peers that accept (§6.4) */
    bool relay_links;      /**< ring search: also links neither end can dial (relayed, §8.6) */
    uint8_t *slot_links;   /**< [max_peers] M_LINK_*: the slot may have bw / unreach entries */
} m_topology;

/** Collective ops (master_collective.c; m_coll_init/_deinit; docs/core.md §2.4). A pool grown on
 *  demand; a peer is in at most max_ops of them. (group, tag) -> op through an index. */
/** Groups whose tuned algorithm table the master keeps (§6.8.5). */
#define M_ALGO_GROUPS 64u

typedef struct m_collectives {
    m_op *ops;
    uint32_t ops_cap;
    uint32_t ops_hi;        /**< ops[ops_hi..] were never used */
    uint32_t ops_free_hint; /**< no free op below this index */
    uint32_t *op_index;     /**< [op_index_cap] op indices, UINT32_MAX empty */
    uint32_t op_index_cap;  /**< power of two, >= 2 * live ops */
    uint32_t ops_live;      /**< ops not MOP_FREE (kept by m_op_set_state) */
    uint32_t n_running;     /**< ops in MOP_RUNNING (kept by m_op_set_state) */
    uint32_t *op_dirty;     /**< ops to examine in the next progress pass */
    uint32_t op_dirty_n, op_dirty_cap;
    uint64_t op_world_sig; /**< topology signature of the last full pass (m_coll_progress) */
    bool relay_wait;       /**< a relayed op waits for room in the output pool: step again */
    uint64_t relayed_ops;  /**< ccoip_master_relayed_ops */
    m_op_timer *op_timers; /**< FIFO ring of deadlines */
    uint32_t op_timers_cap, op_timers_head, op_timers_n;
    uint64_t next_seq;
    /* The groups' tuned all-reduce tables (§6.8.5; master_relay.c): installed by a tuning
     * round, sent with every plan of the group. Bounded: the least recently installed of
     * M_ALGO_GROUPS gives way. */
    struct {
        uint32_t group;
        uint64_t installed; /**< the install counter's value when installed */
        ccoip_algo_table t;
    } algo[M_ALGO_GROUPS];
    uint32_t algo_n;
    uint64_t algo_installs;
} m_collectives;

/** Shared-state sync (master_state.c; m_sync_init/_deinit; docs/core.md §2.5). */
typedef struct m_shared_state {
    m_skey *skeys;                 /**< [max_peers][max_state_keys] */
    m_sgroup *sgroups;             /**< [max_peers] */
    uint32_t sg_hi;                /**< sgroups[sg_hi..] were never used */
    uint64_t *popular;             /**< [max_state_keys] popular hash per key */
    uint32_t *tmp_d;               /**< [max_peers] members refused by an election */
    ccoip_pb_outdated_key *okeys;  /**< [max_state_keys] */
    ccoip_pb_peer_info *dial_info; /**< [max_peers] a dialling distributor's receivers (§8.3) */
    ccoip_pb_endpoint *dial_eps;   /**< [max_peers] their shared-state endpoints */
    uint64_t next_round; /**< shared-state rounds started (SharedStateSyncVerdict.round) */
} m_shared_state;

/** Topology optimization (master_optimize.c; m_opt_init/_deinit; docs/core.md §2.6). */
typedef struct m_optimization {
    uint64_t *bw;       /**< [max_peers][max_peers] link cost from->to; 0 = not measured */
    uint64_t *tsp_cost; /**< [max_peers][max_peers] one group's matrix */
    uint32_t *tsp_tour; /**< [max_peers] */
    void *tsp_work;     /**< ccoip_tsp_workspace_bytes(max_peers) */
    uint64_t tsp_work_bytes;
    ccoip_pb_probe_target *targets; /**< [max_peers] */
    bool opt_timer;
    uint64_t opt_first_ns;
    bool opt_ready; /**< every participant is done: install once the topology is idle */
    bool opt_any;   /**< some peer may have opt_st != MO_NONE */
} m_optimization;

/** Members blocked in different calls (master_mismatch.c; docs/core.md §2.5.1). */
typedef struct m_mismatch {
    bool dirty; /**< a blocking ballot arrived or a peer left: check for mismatched calls */
} m_mismatch;

/** One connection on the relay listener (master_splice.c). */
typedef enum m_splice_state { MSP_FREE = 0, MSP_WAIT_JOIN, MSP_JOINED, MSP_SPLICED } m_splice_state;
typedef struct m_splice {
    m_splice_state st;
    uint64_t conn;
    uint64_t since_ns; /**< accepted (joined) at: closed unless spliced by since + evict_ms */
    uint64_t epoch;
    uint64_t src, dst; /**< the link's ends (peer ids) */
    uint32_t chunk;    /**< pool index */
    uint32_t role;     /**< 0: the link's source (the dialler of §8.1), 1: its destination */
    uint8_t challenge[CCOIP_AUTH_NONCE_BYTES];
} m_splice;

/** The relay's connections: at most cap (M_SPLICE_MAX). */
typedef struct m_splices {
    m_splice *s;
    uint32_t cap;
    uint32_t relay_port; /**< 0: no relay */
} m_splices;

/** Relay connections the master holds at most (joined or waiting, both ends of every pool). */
#define M_SPLICE_MAX 64u
/** The optimizer's cost (µs per MiB) of a link only the master's relay can carry: far above any
 *  measured link (a ring avoids it when it can), far below CCOIP_TSP_COST_MAX (unusable). */
#define M_RELAY_LINK_COST ((uint64_t)1 << 30)

struct ccoip_master {
    /* The machine (master.c). */
    ccoip_master_config cfg;
    ccoip_codec_limits lim;
    uint64_t rng;
    uint64_t auth_ctr; /**< nonces drawn (ccoip_auth_nonce) */
    uint64_t now;
    sm_out out;
    /* Scratch for building messages and rings, any concern (sized max_peers; master.c). */
    uint64_t *ids;
    uint32_t *tmp_a;
    uint32_t *tmp_b;
    uint32_t *tmp_c;
    uint8_t *tmp_used;
    uint8_t *arena_mem; /**< the control-frame decode arena */
    uint64_t arena_cap;

    m_sessions sess;
    m_liveness live;
    m_topology topo;
    m_collectives coll;
    m_shared_state sync;
    m_optimization opt;
    m_mismatch mm;
    m_splices spl;
};

#define M_SLOT_NONE UINT32_MAX

/* The relay (master_splice.c; docs/protocol.md §8.6). */
bool m_splice_init(ccoip_master *m);
void m_splice_deinit(ccoip_master *m);
/** An accepted connection on the relay listener (CONN_UP). */
void m_splice_on_accept(ccoip_master *m, uint64_t conn);
/** A frame on conn: true when conn is a relay connection (the frame was taken). */
bool m_splice_on_recv(ccoip_master *m, uint64_t conn, const uint8_t *data, uint64_t len);
/** conn closed: true when it was a relay connection. */
bool m_splice_on_closed(ccoip_master *m, uint64_t conn);
void m_splice_timers(ccoip_master *m);
uint64_t m_splice_deadline(const ccoip_master *m);

#define M_LINK_BW      0x01u /**< slot_links: some bw[slot][*] or bw[*][slot] may be set */
#define M_LINK_UNREACH 0x02u /**< slot_links: some unreach bit of the slot may be set */

/* ------------------------------------------------------------------------ */
/* State transitions: one setter per state machine, checked against its table  */
/* (docs/core.md §2.7). Every change of one of these states goes through its    */
/* setter; the assertions stay on in release builds (DESIGN.md §2 rule 6), so   */
/* the fuzzers and the simulator's swarm find a transition the table lacks.     */
/* Bit `to` of the row `from` is set when from -> to is legal.                  */
/* ------------------------------------------------------------------------ */

#define M_TO(s) (1u << (s))

/** The session of a peer slot (m_peer.state; docs/core.md §2.1). */
static inline bool m_peer_state_legal(m_peer_state from, m_peer_state to)
{
    static const uint8_t next[5] = {
        [MP_FREE] = M_TO(MP_HELLO),                       /* CONN_UP */
        [MP_HELLO] = M_TO(MP_NEW) | M_TO(MP_FREE),        /* hello ok / mismatch, silence, close */
        [MP_NEW] = M_TO(MP_PENDING) | M_TO(MP_FREE),      /* join / leave, eviction, close */
        [MP_PENDING] = M_TO(MP_ACCEPTED) | M_TO(MP_FREE), /* phase succeeded / removal */
        [MP_ACCEPTED] = M_TO(MP_FREE),                    /* removal */
    };
    return (unsigned)from < 5u && (unsigned)to < 5u && ((next[from] >> to) & 1u) != 0;
}

/**
 * Sets a slot's session state. Keeps the counters that follow it: n_unjoined, n_acc and n_tv_acc
 * (an accepted peer's topology ballot counts), and, when the slot is freed, n_pend_voted (its
 * pending-peers ballot goes with it). The caller clears the record after MP_FREE.
 */
static inline void m_peer_set_state(ccoip_master *m, m_peer *p, m_peer_state to)
{
    assert(m_peer_state_legal(p->state, to));
    if (p->state == MP_HELLO || p->state == MP_NEW) m->sess.n_unjoined--;
    if (to == MP_HELLO || to == MP_NEW) m->sess.n_unjoined++;
    if (p->state == MP_ACCEPTED) {
        m->sess.n_acc--;
        if (p->topo_voted) m->topo.n_tv_acc--;
    }
    if (to == MP_ACCEPTED) {
        m->sess.n_acc++;
        if (p->topo_voted) m->topo.n_tv_acc++;
    }
    if (to == MP_FREE && p->pend_voted) m->topo.n_pend_voted--;
    p->state = to;
}

/** A collective op (m_op.state; docs/core.md §2.4). */
static inline bool m_op_state_legal(m_op_state from, m_op_state to)
{
    static const uint8_t next[3] = {
        [MOP_FREE] = M_TO(MOP_VOTING),                     /* first initiate */
        [MOP_VOTING] = M_TO(MOP_RUNNING) | M_TO(MOP_FREE), /* commence / refused, relayed */
        [MOP_RUNNING] = M_TO(MOP_FREE),                    /* verdicts sent */
    };
    return (unsigned)from < 3u && (unsigned)to < 3u && ((next[from] >> to) & 1u) != 0;
}

/** Sets an op's state; keeps ops_live (ops not free) and n_running. */
static inline void m_op_set_state(ccoip_master *m, m_op *o, m_op_state to)
{
    assert(m_op_state_legal(o->state, to));
    if (o->state == MOP_FREE) m->coll.ops_live++;
    if (to == MOP_FREE) m->coll.ops_live--;
    if (o->state == MOP_RUNNING) m->coll.n_running--;
    if (to == MOP_RUNNING) m->coll.n_running++;
    o->state = to;
}

/** The topology phase (ccoip_master.phase; docs/core.md §2.2). */
static inline bool m_phase_legal(m_phase_kind from, m_phase_kind to)
{
    static const uint8_t next[3] = {
        /* a vote completes (NONE: no member) / the ring is unhealthy / an optimized ring */
        [MPH_NONE] = M_TO(MPH_NONE) | M_TO(MPH_ADMIT) | M_TO(MPH_REWIRE),
        [MPH_ADMIT] = M_TO(MPH_NONE),  /* concluded */
        [MPH_REWIRE] = M_TO(MPH_NONE), /* concluded */
    };
    return (unsigned)from < 3u && (unsigned)to < 3u && ((next[from] >> to) & 1u) != 0;
}

static inline void m_set_phase(ccoip_master *m, m_phase_kind to)
{
    assert(m_phase_legal(m->topo.phase, to));
    m->topo.phase = to;
}

/** A peer's part in a shared-state sync (m_peer.sync_st, MS_*; docs/core.md §2.5). */
static inline bool m_sync_st_legal(uint8_t from, uint8_t to)
{
    static const uint8_t next[4] = {
        [MS_NONE] = M_TO(MS_VOTED),                     /* sync_vote */
        [MS_VOTED] = M_TO(MS_ASSIGNED) | M_TO(MS_NONE), /* verdict / refused */
        [MS_ASSIGNED] = M_TO(MS_DONE) | M_TO(MS_NONE),  /* sync_done / round failed */
        [MS_DONE] = M_TO(MS_NONE),                      /* done verdict */
    };
    return from < 4u && to < 4u && ((next[from] >> to) & 1u) != 0;
}

static inline void m_peer_set_sync(m_peer *p, uint8_t to)
{
    assert(m_sync_st_legal(p->sync_st, to));
    p->sync_st = to;
}

/** A peer's part in a topology optimization (m_peer.opt_st, MO_*; docs/core.md §2.6). */
static inline bool m_opt_st_legal(uint8_t from, uint8_t to)
{
    static const uint8_t next[4] = {
        [MO_NONE] = M_TO(MO_VOTED) | M_TO(MO_NONE),    /* optimize_topology / optimized phase */
        [MO_VOTED] = M_TO(MO_PROBING) | M_TO(MO_NONE), /* probe requests / ballot dropped */
        [MO_PROBING] = M_TO(MO_DONE) | M_TO(MO_NONE),  /* optimize_done / opt. phase, deadline */
        [MO_DONE] = M_TO(MO_NONE),                     /* verdict */
    };
    return from < 4u && to < 4u && ((next[from] >> to) & 1u) != 0;
}

static inline void m_peer_set_opt(m_peer *p, uint8_t to)
{
    assert(m_opt_st_legal(p->opt_st, to));
    p->opt_st = to;
}

/**
 * A minority never evicts a majority (docs/protocol.md §6.10): when a vote or a report phase
 * times out with `did` of its `of` members done, the others are evicted only when those done
 * are a strict majority; otherwise nobody is evicted and the phase fails for its members.
 */
static inline bool m_majority(uint32_t did, uint32_t of)
{
    return 2u * (uint64_t)did > of;
}

/* master.c: sessions, dispatch, entry points */
void m_send(ccoip_master *m, uint32_t slot, ccoip_pb_master_to_peer *env);
void m_answer_status(ccoip_master *m, uint32_t slot, uint64_t call, int32_t status, int32_t reason,
                     const char *detail);
/* Authenticated runs: the 32-byte key of the epoch's link from peer `from` to peer `to`
 * (TopologyPlan pred_key/succ_key), and of a group in an epoch (group_key, proven by
 * shared-state requests) (docs/protocol.md §8.0). Both drawn from the master's secret. */
void m_auth_link_key(const ccoip_master *m, uint64_t epoch, uint64_t from, uint64_t to,
                     uint8_t out[CCOIP_AUTH_KEY_BYTES]);
void m_auth_group_key(const ccoip_master *m, uint64_t epoch, uint32_t group,
                      uint8_t out[CCOIP_AUTH_KEY_BYTES]);

void m_evict(ccoip_master *m, uint32_t slot, int32_t reason, const char *detail);

/* master_peers.c: the peer table */
uint32_t m_next_by_id(const ccoip_master *m, uint64_t after_id);
uint32_t m_slot_by_id(const ccoip_master *m, uint64_t id);
/** The live slot of connection conn, M_SLOT_NONE when none. */
uint32_t m_slot_by_conn(const ccoip_master *m, uint64_t conn);
/** Adds / removes slot (by its conn) to / from the conn -> slot map. */
void m_conn_map_insert(ccoip_master *m, uint32_t slot);
void m_conn_map_remove(ccoip_master *m, uint32_t slot);
m_peer *m_peer_at(ccoip_master *m, uint32_t slot);
/** Fills e with how other peers reach p's endpoint of this kind (docs/protocol.md §2): the
 *  address observed on p's control connection (127.0.0.1 when none was, an ipc:// master) and
 *  the port p announced; never a url. */
void m_peer_endpoint(const m_peer *p, uint32_t kind, ccoip_pb_endpoint *e);
/** qsort comparators of uint32_t / uint64_t, ascending. */
int m_cmp_u32(const void *a, const void *b);
int m_cmp_u64(const void *a, const void *b);
uint32_t m_count_state(const ccoip_master *m, m_peer_state st);
/** Marks every accepted peer of group as needing a re-wire (ring unhealthy). */
void m_mark_rewire(ccoip_master *m, uint32_t group);
/** Marks every accepted peer as needing a re-wire. */
void m_mark_rewire_all(ccoip_master *m);
/** Counts the membership once (accepted peers, plus in-phase ones with include_phase);
 *  m_world_sizes then answers per group from that snapshot until the next prepare. */
void m_world_prepare(ccoip_master *m, bool include_phase);
void m_world_sizes(const ccoip_master *m, uint32_t group, ccoip_pb_world_sizes *out);
bool m_unreachable(const ccoip_master *m, uint32_t from, uint32_t to);
void m_set_unreachable(ccoip_master *m, uint32_t from, uint32_t to);
/** Forgets every unusable link from or to slot (it is being freed). */
void m_clear_unreachable(ccoip_master *m, uint32_t slot);

/* master_live.c: heartbeats and silence */
/** Lowers the liveness lower bound to at least t. */
void m_live_touch(ccoip_master *m, uint64_t t);
/** (Re)keys slot in the liveness heap with its current deadline. */
void m_live_arm(ccoip_master *m, uint32_t slot);
/** Takes slot out of the liveness heap (it is being freed). */
void m_live_forget(ccoip_master *m, uint32_t slot);
/** Sends due heartbeats and evicts silent slots (nothing before live_next). */
void m_live_scan(ccoip_master *m);

/* master_topology.c */
void m_topo_on_update_vote(ccoip_master *m, uint32_t slot, uint64_t call,
                           const ccoip_pb_update_topology_vote *v);
void m_topo_on_p2p(ccoip_master *m, uint32_t slot, uint64_t call,
                   const ccoip_pb_p2p_established *r);
void m_topo_on_pending_query(ccoip_master *m, uint32_t slot, uint64_t call);
void m_topo_on_loss(ccoip_master *m, uint32_t slot);
bool m_topo_progress(ccoip_master *m);
bool m_topo_vote_complete(const ccoip_master *m);
void m_topo_timers(ccoip_master *m);
uint64_t m_topo_deadline(const ccoip_master *m);

/* master_state.c */
void m_sync_on_vote(ccoip_master *m, uint32_t slot, uint64_t call,
                    const ccoip_pb_shared_state_sync_vote *v);
void m_sync_on_done(ccoip_master *m, uint32_t slot, uint64_t call,
                    const ccoip_pb_shared_state_sync_done *d);
bool m_sync_progress(ccoip_master *m);
void m_sync_on_loss(ccoip_master *m, uint32_t slot);
void m_sync_timers(ccoip_master *m);
/** Forgets slot's open sync ballot (its call was answered elsewhere). */
void m_sync_drop_vote(ccoip_master *m, uint32_t slot);
/** Answers slot's open sync ballot INVALID_USAGE / reason and forgets it. */
void m_sync_fail_vote(ccoip_master *m, uint32_t slot, int32_t reason, const char *detail);
uint64_t m_sync_deadline(const ccoip_master *m);

/* master_optimize.c */
void m_opt_on_vote(ccoip_master *m, uint32_t slot, uint64_t call);
void m_opt_on_report(ccoip_master *m, uint32_t slot, const ccoip_pb_bandwidth_report *r);
void m_opt_on_done(ccoip_master *m, uint32_t slot, uint64_t call);
void m_opt_on_loss(ccoip_master *m, uint32_t slot);
bool m_opt_progress(ccoip_master *m);
void m_opt_timers(ccoip_master *m);
/** Forgets slot's open optimize ballot (its call was answered elsewhere). */
void m_opt_drop_vote(ccoip_master *m, uint32_t slot);
/** Answers slot's open optimize ballot INVALID_USAGE / reason and forgets it. */
void m_opt_fail_vote(ccoip_master *m, uint32_t slot, int32_t reason, const char *detail);

/* master_topology.c: a ballot answered INVALID_USAGE / reason and forgotten (its counters, the
 * vote's timer when its last ballot goes). */
void m_topo_fail_vote(ccoip_master *m, uint32_t slot, int32_t reason, const char *detail);
void m_topo_fail_pending_query(ccoip_master *m, uint32_t slot, int32_t reason, const char *detail);

/* master_mismatch.c */
/** Members blocked in different calls (docs/protocol.md §6.12): fails them all at once. */
bool m_mismatch_progress(ccoip_master *m);
uint64_t m_opt_deadline(const ccoip_master *m);

/* master_topology.c, for the optimization */
void m_topo_fill_endpoints(const m_peer *p, ccoip_pb_endpoint *eps, uint64_t *count);
/** Starts a re-wire phase over the rings already set in rank/pred/succ; every member gets
 *  an OptimizeTopologyVerdict{success, plan} answering its opt_call. */
void m_topo_start_optimized_phase(ccoip_master *m);

/* master_coll_table.c: the op table (pool, index by (group, tag), members, dirty list,
 * deadlines) */
#define M_OP_NONE UINT32_MAX
/** The next op of (group, tag) from probe position *at on (advanced past it), or M_OP_NONE at
 *  the end of the chain; a tag may have a running op whose members still complete and a voting
 *  one for its next use. Start at m_op_probe_start (the index must exist: op_index_cap > 0). */
uint32_t m_op_probe(const ccoip_master *m, uint32_t group, uint64_t tag, uint32_t *at);
uint32_t m_op_probe_start(const ccoip_master *m, uint32_t group, uint64_t tag);
/** The op of (group, tag) in state st (and with seq, for a running one), or M_OP_NONE. */
uint32_t m_op_find(const ccoip_master *m, uint32_t group, uint64_t tag, m_op_state st,
                   uint64_t seq);
/** Makes room for one more live op: pool and index. False on allocation failure. */
bool m_op_reserve(ccoip_master *m);
/** The lowest free op, now voting for (group, tag); m_op_reserve first. */
uint32_t m_op_alloc(ccoip_master *m, uint32_t group, uint64_t tag);
void m_op_free(ccoip_master *m, uint32_t op);
/** The member record of slot in op, or NULL. */
m_op_member *m_op_mem(ccoip_master *m, uint32_t op, uint32_t slot);
/** True if slot is in a running op of (group, tag) and has not completed it yet. */
bool m_op_running_member(ccoip_master *m, uint32_t group, uint64_t tag, uint32_t slot);
/** Adds slot to op (it must not be there); NULL on allocation failure. */
m_op_member *m_op_mem_add(ccoip_master *m, uint32_t op, uint32_t slot);
void m_op_mem_remove(ccoip_master *m, uint32_t op, m_op_member *mm);
/** Queues op for the next progress pass. */
void m_op_mark_dirty(ccoip_master *m, uint32_t op);
/** Arms op's deadline at now + vote timeout. */
void m_op_arm(ccoip_master *m, uint32_t op);
/** The deadline entry t is op's current one. */
bool m_op_timer_live(const ccoip_master *m, const m_op_timer *t);
/** Drops stale deadlines from the FIFO's head. */
void m_op_timers_prune(ccoip_master *m);

/* master_collective.c */
void m_coll_on_initiate(ccoip_master *m, uint32_t slot, uint64_t call,
                        const ccoip_pb_collective_initiate *ci);
/**
 * Master relay (master_relay.c, §6.8.2, §6.8.3): answers every voter of the voting op o (its
 * inputs in the members' relay copies, the group's ring of `world` members settled) with its
 * output. 0: answered (the caller frees the op); -1: this step's output pool has no room for
 * the answers, nothing sent (retry); 1: the inputs do not fit the op (a rank twice or missing,
 * a wrong input size, an op the relay does not take): nothing sent, refuse it.
 */
int m_relay_answer(ccoip_master *m, m_op *o, uint32_t world);
/** The group's tuned all-reduce table (§6.8.5), or NULL when it has none. */
const ccoip_algo_table *m_algo_table_of(const ccoip_master *m, uint32_t group);

/* master_p2p.c: send / recv (§6.8.4) */
/** True for COLLECTIVE_KIND_SEND and _RECV. */
bool m_p2p_kind(int32_t kind);
/** The voting op o (one ballot so far) of a send / recv and ballot ci are its two roles. */
bool m_p2p_agree(const m_op *o, const ccoip_pb_collective_initiate *ci);
/** A send / recv's two voters name each other's rank in the group's current ring (true for
 *  the other kinds). */
bool m_p2p_ranks_ok(const ccoip_master *m, const m_op *o);
/** Ballots op o needs to commence: 2 for a send / recv, else every member of the group. */
uint32_t m_p2p_ballots(const m_op *o, uint32_t group_size);
/** After a failed op: the group re-wires, unless the op is a send / recv (no ring link). */
void m_p2p_rewire(ccoip_master *m, const m_op *o);
/** Sends member mm its commence env; a send / recv's names the other member and the key. */
void m_p2p_commence(ccoip_master *m, const m_op *o, const m_op_member *mm,
                    ccoip_pb_master_to_peer *env);

/** A member's op timed out (CollectiveCancel, §6.8.3): abort or refuse it for every member. */
void m_coll_on_cancel(ccoip_master *m, uint32_t slot, const ccoip_pb_collective_cancel *cc);
void m_coll_on_complete(ccoip_master *m, uint32_t slot, uint64_t call,
                        const ccoip_pb_collective_complete *cc);
void m_coll_on_loss(ccoip_master *m, uint32_t slot);
void m_coll_abort_all(ccoip_master *m, int32_t reason);
/** Aborts the running ops of group (not its sends / recvs: their links are their own). */
void m_coll_abort_group(ccoip_master *m, uint32_t group, int32_t reason);
bool m_coll_any_running(const ccoip_master *m);
bool m_coll_progress(ccoip_master *m);
void m_coll_timers(ccoip_master *m);
uint64_t m_coll_deadline(const ccoip_master *m);

/*
 * Per-concern init / deinit, called by ccoip_master_create / _destroy: each sizes its own tables
 * from m->cfg on a zeroed master (false: an allocation failed; the master is then destroyed)
 * and frees them (safe after a failed or partial init).
 */
bool m_sess_init(ccoip_master *m); /* master_peers.c */
void m_sess_deinit(ccoip_master *m);
bool m_live_init(ccoip_master *m); /* master_live.c */
void m_live_deinit(ccoip_master *m);
bool m_topo_init(ccoip_master *m); /* master_topology.c */
void m_topo_deinit(ccoip_master *m);
bool m_coll_init(ccoip_master *m); /* master_collective.c */
void m_coll_deinit(ccoip_master *m);
bool m_sync_init(ccoip_master *m); /* master_state.c */
void m_sync_deinit(ccoip_master *m);
bool m_opt_init(ccoip_master *m); /* master_optimize.c */
void m_opt_deinit(ccoip_master *m);

#endif /* CCOIP_MASTER_INTERNAL_H */
