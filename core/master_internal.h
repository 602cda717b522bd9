/*
 * master_internal.h — the master's state, shared by master.c (sessions,
 * hello/join, liveness, dispatch), master_topology.c (topology votes, the
 * p2p phase, ring building, pending-peer queries) and master_collective.c
 * (collective votes and verdicts). docs/core.md §2 describes the states.
 */
#ifndef CCOIP_MASTER_INTERNAL_H
#define CCOIP_MASTER_INTERNAL_H

#include "ccoip_master.h"
#include "ccoip_peer.h"
#include "ccoip_sm_internal.h"

/** Endpoint kinds the master stores per peer (EndpointKind values 0..2). */
#define M_ENDPOINT_KINDS 3u

typedef struct m_endpoint {
    bool has;
    uint32_t port;
    uint32_t url_len;
    uint8_t url[CCOIP_URL_MAX];
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
    m_peer_state state;
    uint64_t id;
    uint64_t conn;
    uint32_t group;
    uint8_t ip[16];
    uint32_t ip_len;
    m_endpoint ep[M_ENDPOINT_KINDS];
    uint64_t last_recv_ns;
    uint64_t last_send_ns;
    uint64_t hb_counter;
    /* Topology vote (§6.3). */
    bool topo_voted;
    bool topo_accept;
    uint64_t topo_call;
    /* Pending-peers vote (§6.5). */
    bool pend_voted;
    uint64_t pend_call;
    /* P2P phase (§6.4). */
    bool in_phase;
    bool reported;
    bool report_ok;
    uint64_t report_call;
    /* Ring position in the current (or planned) ring of its group. */
    uint32_t rank;
    uint32_t ring_size;
    uint32_t pred; /**< slot index */
    uint32_t succ; /**< slot index */
} m_peer;

/** Per-member record of one collective operation. */
typedef struct m_op_member {
    uint8_t flags;
    uint64_t call; /**< initiate call (voting) or complete call (running) */
} m_op_member;

#define MOM_MEMBER    0x01u /**< part of the running op */
#define MOM_VOTED     0x02u /**< initiated (voting) */
#define MOM_COMPLETED 0x04u /**< sent collective_complete */
#define MOM_VERDICT   0x08u /**< its one verdict was sent */

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
    bool mismatch;
    bool has_first;
    uint64_t first_ns; /**< first ballot (voting) / first completion (running) */
    bool aborted;
    int32_t reason;
} m_op;

typedef enum m_phase_kind { MPH_NONE = 0, MPH_ADMIT = 1, MPH_REWIRE = 2 } m_phase_kind;

struct ccoip_master {
    ccoip_master_config cfg;
    ccoip_codec_limits lim;
    uint64_t rng;
    uint64_t now;
    sm_out out;

    m_peer *peers;   /* [max_peers] */
    uint32_t *order; /* slot indices of used slots, ascending peer id */
    uint32_t order_n;
    uint64_t next_id;
    uint8_t *unreach; /* bit matrix [max_peers][max_peers]: row from, column to */

    m_op *ops;        /* [max_ops] */
    m_op_member *opm; /* [max_ops][max_peers] */
    uint64_t next_seq;

    uint64_t epoch;
    bool ring_healthy;
    m_phase_kind phase;
    uint64_t phase_start_ns;
    bool phase_failed;
    bool phase_answers_votes;
    bool topo_timer;
    uint64_t topo_first_ns;
    bool pend_timer;
    uint64_t pend_first_ns;

    /* Scratch for building messages and rings (sized max_peers). */
    uint64_t *ids;
    uint32_t *tmp_a;
    uint32_t *tmp_b;
    uint32_t *tmp_c;
    uint8_t *tmp_used;
    uint8_t *arena_mem;
    uint64_t arena_cap;
};

#define M_SLOT_NONE UINT32_MAX

/* master.c */
uint32_t m_next_by_id(const ccoip_master *m, uint64_t after_id);
uint32_t m_slot_by_id(const ccoip_master *m, uint64_t id);
m_peer *m_peer_at(ccoip_master *m, uint32_t slot);
void m_send(ccoip_master *m, uint32_t slot, ccoip_pb_master_to_peer *env);
void m_answer_status(ccoip_master *m, uint32_t slot, uint64_t call, int32_t status, int32_t reason,
                     const char *detail);
void m_evict(ccoip_master *m, uint32_t slot, int32_t reason, const char *detail);
uint32_t m_count_state(const ccoip_master *m, m_peer_state st);
void m_world_sizes(const ccoip_master *m, uint32_t group, bool include_phase,
                   ccoip_pb_world_sizes *out);
bool m_unreachable(const ccoip_master *m, uint32_t from, uint32_t to);
void m_set_unreachable(ccoip_master *m, uint32_t from, uint32_t to);

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

/* master_collective.c */
void m_coll_on_initiate(ccoip_master *m, uint32_t slot, uint64_t call,
                        const ccoip_pb_collective_initiate *ci);
void m_coll_on_complete(ccoip_master *m, uint32_t slot, uint64_t call,
                        const ccoip_pb_collective_complete *cc);
void m_coll_on_loss(ccoip_master *m, uint32_t slot);
void m_coll_abort_all(ccoip_master *m, int32_t reason);
bool m_coll_any_running(const ccoip_master *m);
bool m_coll_progress(ccoip_master *m);
void m_coll_timers(ccoip_master *m);
uint64_t m_coll_deadline(const ccoip_master *m);

#endif /* CCOIP_MASTER_INTERNAL_H */
