/*
 * sim_check_int.h — what the checker files share: the records the checkers
 * keep (by epoch, by op, by sync round), their per-node facts, and the
 * functions one checker file offers the others.
 *
 *   sim_check.c        the observer: the master's frames (membership, epochs,
 *                      evictions), NOTIFY routing, the end of the run;
 *   sim_check_ops.c    all-reduce results: inputs, the reference reduction,
 *                      bit identity, restore, epochs, master relay;
 *   sim_check_coll.c   the collective set (--kind): each member's output against a
 *                      reference of the members' inputs, one verdict per op, restore;
 *   sim_check_state.c  shared state and topology optimization;
 *   sim_check_live.c   liveness: the quiet-phase bound and the bound after a fault.
 */
#ifndef SIM_CHECK_INT_H
#define SIM_CHECK_INT_H

#include <stddef.h>

#include "sim_check.h"

/** The checkers' epoch key of relayed ops (docs/protocol.md §6.8.2): the master's seq alone
 *  names them; they belong to no ring epoch. */
#define SIM_RELAY_EPOCH UINT64_MAX

/*
 * An index of records by (epoch, seq), the first two fields of every record type it serves
 * (sim_oprec, sim_inrec): open addressing over record numbers, SIM_NONE32 empty; a key maps to
 * its latest record (sim_check_ops.c, seqidx_*).
 */
typedef struct sim_seqidx {
    uint32_t *slot;
    uint32_t cap;
} sim_seqidx;

/* A completed (epoch, seq) and what the checkers know of it. */
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
    uint64_t len;  /**< bytes of input */
    uint32_t algo; /**< the algorithm the member submitted (0: AUTO, or not an all-reduce's) */
} sim_inrec;

/* One commenced op of the collective set (by (epoch, seq)): the verdicts its members got. */
typedef struct sim_collrec {
    uint64_t epoch, seq;
    uint32_t kind, root, world; /* send / recv: kind SEND, root src << 16 | dst, world 2 */
    uint32_t ok, failed;        /* members that got success / a failure (master loss not counted) */
    pcclResult_t first_failure;
    uint32_t first_node; /* the first member that got a verdict */
} sim_collrec;

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

/* What the checkers know of one node (from the master's frames to it and its ring actions). */
typedef struct sim_chk_node {
    uint64_t max_epoch_seen;
    uint64_t verdict_epoch; /* epoch of the last successful TopologyVerdict it received */
    /* Optimistic ops (ring seq 0, docs/protocol.md §6.8.1): the checker's own op number,
     * (epoch, tag, n-th use of the tag in that epoch), the same on every member. */
    uint64_t opt_epoch[SIM_MAX_TAGS];
    uint32_t opt_uses[SIM_MAX_TAGS];
    /* Master relay (§6.8.2): the input each tag's relayed initiate carried (bound to the
     * master's seq when the master answers, even if this node died meanwhile). */
    uint8_t *relay_in[SIM_MAX_TAGS];
    uint64_t relay_in_len[SIM_MAX_TAGS];
    /* An op of the collective set (kind != all-reduce) relayed on the tag (§6.8.3): its
     * OP_BEGIN came before any commence. relay_in then holds the application's SEND as it
     * filled it (possibly no bytes: a barrier, a non-root's scatter), taken at OP_BEGIN, and
     * relay_pin the epoch the op was pinned to: the epoch whose ring ranks its inputs. */
    bool relay_coll[SIM_MAX_TAGS];
    uint64_t relay_pin[SIM_MAX_TAGS];
    /* Shared state: from the master's verdicts to this peer. */
    uint64_t sync_popular;   /* SYNC_VERDICT.popular_revision */
    uint64_t sync_expect_rx; /* bytes of the keys the verdict told it to fetch */
    bool sync_outdated;
    uint64_t sync_vround;                      /* master event that sent its SYNC_VERDICT */
    uint64_t sync_expect_hash[SIM_STATE_KEYS]; /* the verdict's expected hash per key ... */
    bool sync_fetch[SIM_STATE_KEYS];           /* ... of the keys it names */
    uint64_t sync_round; /* master event that sent its SYNC_DONE_VERDICT (success) */
} sim_chk_node;

struct sim_checker {
    sim_world *w;
    sim_workload *wl;
    sim_chk_node *nodes; /* cap_nodes entries, by node */
    uint32_t cap_nodes;
    sim_epochrec *epochs;
    uint32_t epochs_len, epochs_cap;
    uint32_t *epoch_idx; /* (epoch, group) -> index into epochs */
    uint64_t epoch_idx_cap;
    sim_oprec *oprecs;
    uint32_t oprecs_len, oprecs_cap;
    sim_seqidx oprec_idx; /* (epoch, seq) -> its oprec (one record per key) */
    sim_inrec *inrecs;
    uint32_t inrecs_len, inrecs_cap;
    /* (epoch, seq) -> its latest inrec: an op's members without a scan of every record ever
     * made (quadratic over a 10,000-peer run). */
    sim_seqidx inrec_idx;
    uint64_t *commence_epoch_by_seq; /* indexed by seq (bounded) */
    uint64_t commence_cap;
    sim_syncrec *syncrecs;
    uint32_t syncrecs_len, syncrecs_cap;
    sim_collrec *collrecs;
    uint32_t collrecs_len, collrecs_cap;
    sim_seqidx collrec_idx; /* (epoch, seq) -> its collrec */
    uint64_t coll_checked;  /* outputs compared with the reference (the summary) */
    uint64_t coll_relayed;  /* ... of them of relayed ops */
    /* The optimum of the last optimized ring checked (check_optimize_notify), by epoch and
     * group: its members check the same ring. */
    uint64_t opt_epoch, opt_best;
    uint32_t opt_group;
};

static inline sim_chk_node *chk_node(const sim_checker *ck, uint32_t node)
{
    return &ck->nodes[node];
}

/* sim_check.c */
/* The ring of (epoch, group), or NULL. */
sim_epochrec *epoch_find(const sim_checker *ck, uint64_t epoch, uint32_t group);

/* sim_check_ops.c */
/* The (epoch, seq) index (records begin with uint64_t epoch, seq; stride = sizeof a record). */
uint32_t seqidx_get(const sim_seqidx *x, const void *recs, size_t stride, uint64_t epoch,
                    uint64_t seq);
bool seqidx_put(sim_seqidx *x, const void *recs, size_t stride, uint32_t r, uint32_t *prev);
/* Inputs: the latest record of (epoch, seq) (chain by prev), and a new one (NULL: out of
 * memory, the world failed). */
uint32_t inrec_latest(const sim_checker *ck, uint64_t epoch, uint64_t seq);
sim_inrec *inrec_add_bytes(sim_checker *ck, uint32_t node, uint64_t epoch, uint64_t seq,
                           const uint8_t *input, uint64_t bytes);
uint64_t first_diff(const uint8_t *a, const uint8_t *b, uint64_t n);
void check_op_bound(void *ctx, uint32_t node, const ccoip_action *act);
/* OP_BEGIN of an op slot: a relayed op of the collective set is recognized (and its input
 * taken) here, since a barrier's or a non-root scatter's initiate carries no span. */
void check_op_begin(void *ctx, uint32_t node, const ccoip_action *act);
void check_relay_initiate(void *ctx, uint32_t node, const uint8_t *frame, uint64_t len,
                          const uint8_t *input, uint64_t bytes);
/* CollectiveCommence to a peer: the seq's epoch; CollectiveVerdict: epochs and relayed inputs. */
void check_commence(sim_checker *ck, const ccoip_pb_collective_commence *c);
void check_collective_verdict(sim_checker *ck, uint32_t dst, const ccoip_pb_collective_verdict *v);
void check_allreduce_notify(sim_checker *ck, uint32_t node, sim_appcmd *c, const ccoip_action *act);
void check_ops_free(sim_checker *ck);

/* sim_check_coll.c */
/* CollectiveCommence sent to dst: an op of the collective set commenced there (its members'
 * inputs recorded, as for relayed ops, before any member can complete). */
void check_coll_commence(sim_checker *ck, uint32_t dst, const ccoip_pb_collective_commence *cc);
/* Its first ring action must carry the commence's (epoch, seq). */
void check_coll_bound(sim_checker *ck, uint32_t node, const sim_appcmd *c, const ccoip_action *act);
void check_coll_notify(sim_checker *ck, uint32_t node, sim_appcmd *c, const ccoip_action *act);
/* The master's answer to a relayed op of the collective set (§6.8.3): the member's input
 * bound to (pinned epoch, the master's seq), the command marked commenced there. */
void check_coll_relay_verdict(sim_checker *ck, uint32_t dst, const ccoip_pb_collective_verdict *v);
void check_coll_free(sim_checker *ck);

/* sim_check_state.c */
void check_sync_verdict(sim_checker *ck, uint32_t dst, const ccoip_pb_shared_state_sync_verdict *v);
void check_sync_done_verdict(sim_checker *ck, uint32_t dst);
void check_sync_notify(sim_checker *ck, uint32_t node, const ccoip_action *act);
/* A failed sync: each tensor untouched, or wholly the verified content its verdict named. */
void check_sync_failed(sim_checker *ck, uint32_t node);
void check_optimize_notify(sim_checker *ck, uint32_t node);
/* End of the run: per round nobody was dropped from, the fetchers got what was sent. */
void check_sync_final(sim_checker *ck);

/* sim_check_live.c */
/* Liveness in the quiet phase: no command may wait longer than the op bound (tick). */
void check_progress(void *ctx);
/* The bound after a fault: every live peer's command older than the fault is done. */
void check_fault_due(void *ctx);

#endif /* SIM_CHECK_INT_H */
