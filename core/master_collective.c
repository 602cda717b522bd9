/*
 * master_collective.c — collective operations on the master
 * (docs/protocol.md §6.8, docs/core.md §2.4): the initiate vote per
 * (group, tag) with agreement on every parameter, commence with (epoch,
 * seq), the completion vote, and exactly one verdict per op and member.
 * Send / recv's differences are master_p2p.c's.
 *
 * Scale (issue 5): the op table (master_coll_table.c) finds an op by
 * (group, tag) and keeps its members sorted by peer id, so no pass walks
 * every peer or every op. A progress pass examines only the ops that changed
 * (the dirty list), plus every voting op when the topology changed
 * (op_world_sig); deadlines sit in a FIFO in time order.
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "ccoip_coll.h"
#include "ccoip_dtype.h"
#include "ccoip_quant.h"
#include "ccoip_reduce.h"
#include "master_internal.h"

static void coll_send_verdict(ccoip_master *m, uint32_t op, uint32_t slot, uint64_t call)
{
    const m_op *o = &m->coll.ops[op];
    ccoip_pb_master_to_peer env;
    memset(&env, 0, sizeof(env));
    env.call_id = call;
    env.body_case = CCOIP_PB_MASTER_TO_PEER_BODY_COLLECTIVE_VERDICT;
    env.body.collective_verdict.tag = o->tag;
    env.body.collective_verdict.seq = o->seq;
    env.body.collective_verdict.aborted = o->aborted;
    env.body.collective_verdict.reason = o->aborted ? o->reason : CCOIP_PB_REASON_UNSPECIFIED;
    m_send(m, slot, &env);
}

/* Aborts a running op: every member without its verdict gets it now (§6.8). */
static void coll_abort(ccoip_master *m, uint32_t op, int32_t reason)
{
    m_op *o = &m->coll.ops[op];
    if (o->aborted) return;
    o->aborted = true;
    o->reason = reason;
    sm_log(&m->out, CCOIP_LOG_INFO, "master: collective tag %U seq %U aborted (reason %d)", o->tag,
           o->seq, reason);
    for (uint32_t k = 0; k < o->mem_n; k++) {
        m_op_member *mm = &o->mem[k];
        if ((mm->flags & MOM_MEMBER) == 0 || (mm->flags & MOM_VERDICT) != 0) continue;
        mm->flags |= MOM_VERDICT;
        if (m->cfg.canary_skip_abort_verdict) continue; /* TEST ONLY: break the rule */
        coll_send_verdict(m, op, mm->slot, (mm->flags & MOM_COMPLETED) ? mm->call : 0);
    }
}

/* Frees a running op once every remaining member completed; sends the success verdicts. */
static void coll_try_finish(ccoip_master *m, uint32_t op)
{
    m_op *o = &m->coll.ops[op];
    if (o->n_done < o->n_member) return;
    if (!o->aborted) {
        for (uint32_t k = 0; k < o->mem_n; k++) {
            m_op_member *mm = &o->mem[k];
            if (!(mm->flags & MOM_MEMBER) || (mm->flags & MOM_VERDICT)) continue;
            mm->flags |= MOM_VERDICT;
            coll_send_verdict(m, op, mm->slot, mm->call);
        }
    }
    m_op_free(m, op);
}

/* Accepted members of slot's group: its ring size while its group's ring is settled (every
 * accepted member of a group is in its ring then), else counted. */
static uint32_t coll_group_size(const ccoip_master *m, uint32_t slot)
{
    const m_peer *me = &m->sess.peers[slot];
    if (me->state == MP_ACCEPTED && !me->rewire && !me->in_phase && me->ring_size > 0) {
        return me->ring_size;
    }
    uint32_t group = me->group, n = 0;
    for (uint32_t i = 0; i < m->sess.order_n; i++) {
        const m_peer *p = &m->sess.peers[m->sess.order[i]];
        if (p->state == MP_ACCEPTED && p->group == group) n++;
    }
    return n;
}

static bool coll_params_valid(const ccoip_master *m, const ccoip_pb_collective_initiate *ci)
{
    if (!ccoip_pb_collective_kind_is_known(ci->kind)) return false;
    /* A named algorithm (docs/algorithms.md), and none beside the relay's fields. */
    if (ci->algorithm > CCOIP_ALGO_LAST || (ci->relay && ci->algorithm != 0)) return false;
    if (ci->kind == CCOIP_PB_COLLECTIVE_KIND_TUNE) {
        /* §6.8.5: relayed, float32 timings of the fixed shape. */
        return ci->relay && ci->pinned_epoch != 0 && ci->optimistic_epoch == 0 &&
               ci->relay_data.len == 0 && ci->dtype == CCOIP_PB_DATA_TYPE_FLOAT &&
               ci->count == CCOIP_ALGO_TIMINGS && ci->relay_input.len == CCOIP_ALGO_TIMINGS * 4u &&
               ci->quant_algorithm == CCOIP_PB_QUANT_ALGORITHM_NONE && ci->root < CCOIP_ALGO_KINDS;
    }
    if (ci->kind != CCOIP_PB_COLLECTIVE_KIND_ALL_REDUCE) {
        /* §6.8.3: pinned to an epoch, never started optimistically; a relayed input fits the
         * relay; quantized only when it reduces (reduce, reduce-scatter), then never relayed
         * nor PREMUL_SUM. */
        const bool quant = ci->quant_algorithm != CCOIP_PB_QUANT_ALGORITHM_NONE;
        const bool reduces = ccoip_coll_reduces((ccoip_coll_kind)ci->kind);
        if (ci->pinned_epoch == 0 || ci->relay_data.len > 0 || ci->optimistic_epoch != 0 ||
            (ci->relay_input.len > 0 && !ci->relay) ||
            ci->relay_input.len > CCOIP_RELAY_MAX_BYTES ||
            (ci->relay && ci->op == CCOIP_PB_RED_OP_PREMUL_SUM) ||
            (quant && (!reduces || ci->relay || ci->op == CCOIP_PB_RED_OP_PREMUL_SUM)) ||
            !ccoip_pb_data_type_is_known(ci->dtype) || !ccoip_pb_red_op_is_known(ci->op)) {
            return false;
        }
        if (!reduces) return true;
        if (!ccoip_reduce_supported((pcclRedOp_t)ci->op, (pcclDataType_t)ci->dtype)) return false;
        if (!quant) return true;
        return ccoip_pb_quant_algorithm_is_known(ci->quant_algorithm) &&
               ccoip_pb_data_type_is_known(ci->quant_dtype) &&
               ccoip_quant_supported((pcclQuantizationAlgorithm_t)ci->quant_algorithm,
                                     (pcclDataType_t)ci->dtype, (pcclDataType_t)ci->quant_dtype);
    }
    if (!ccoip_pb_data_type_is_known(ci->dtype) || !ccoip_pb_red_op_is_known(ci->op) ||
        !ccoip_pb_quant_algorithm_is_known(ci->quant_algorithm) ||
        !ccoip_reduce_supported((pcclRedOp_t)ci->op, (pcclDataType_t)ci->dtype)) {
        return false; /* with a bitwise op on a float dtype, which has no kernel */
    }
    if (ci->relay_input.len > 0) return false; /* the other kinds' field */
    if (ci->relay || ci->relay_data.len > 0) {
        /* Relayed (§6.8.2): as every peer decides, with the whole input. */
        const uint64_t es = ccoip_dtype_size((pcclDataType_t)ci->dtype);
        return ci->relay && es > 0 && ci->count <= CCOIP_RELAY_MAX_BYTES / es &&
               ccoip_relay_use(ci->count * es, m->cfg.relay_max_bytes,
                               ci->quant_algorithm != CCOIP_PB_QUANT_ALGORITHM_NONE ||
                                   ci->op == CCOIP_PB_RED_OP_PREMUL_SUM) &&
               ci->relay_data.len == ci->count * es;
    }
    if (ci->quant_algorithm == CCOIP_PB_QUANT_ALGORITHM_NONE) return true;
    if (!ccoip_pb_data_type_is_known(ci->quant_dtype)) return false;
    return ccoip_quant_supported((pcclQuantizationAlgorithm_t)ci->quant_algorithm,
                                 (pcclDataType_t)ci->dtype, (pcclDataType_t)ci->quant_dtype);
}

void m_coll_on_initiate(ccoip_master *m, uint32_t slot, uint64_t call,
                        const ccoip_pb_collective_initiate *ci)
{
    m_peer *p = m_peer_at(m, slot);
    if (coll_group_size(m, slot) < m->cfg.min_collective_world) {
        m_answer_status(m, slot, call, CCOIP_PB_STATUS_TOO_FEW_PEERS, CCOIP_PB_REASON_UNSPECIFIED,
                        "too few peers in the group");
        return;
    }
    if (m_op_running_member(m, p->group, ci->tag, slot)) {
        m_answer_status(m, slot, call, CCOIP_PB_STATUS_INVALID_USAGE,
                        CCOIP_PB_REASON_ILLEGAL_MESSAGE, "tag already in use by a running op");
        return;
    }
    uint32_t op = m_op_find(m, p->group, ci->tag, MOP_VOTING, 0);
    if (p->n_ops >= m->cfg.max_ops) {
        m_answer_status(m, slot, call, CCOIP_PB_STATUS_INVALID_USAGE,
                        CCOIP_PB_REASON_RESOURCE_LIMIT, "too many collective operations");
        return;
    }
    if (op == M_OP_NONE) {
        if (!m_op_reserve(m)) {
            m_answer_status(m, slot, call, CCOIP_PB_STATUS_INVALID_USAGE,
                            CCOIP_PB_REASON_RESOURCE_LIMIT, "out of memory for collectives");
            return;
        }
        op = m_op_alloc(m, p->group, ci->tag);
        m_op *o = &m->coll.ops[op];
        o->count = ci->count;
        o->dtype = ci->dtype;
        o->op = ci->op;
        o->quant_algorithm = ci->quant_algorithm;
        o->quant_dtype = ci->quant_algorithm == CCOIP_PB_QUANT_ALGORITHM_NONE ? 0 : ci->quant_dtype;
        o->relay = ci->relay;
        o->kind = ci->kind;
        o->root = ci->root;
        o->algorithm = ci->algorithm;
        o->mismatch = !coll_params_valid(m, ci);
        m_op_arm(m, op);
    } else {
        m_op *o = &m->coll.ops[op];
        if (m_op_mem(m, op, slot) != NULL) {
            m_answer_status(m, slot, call, CCOIP_PB_STATUS_INVALID_USAGE,
                            CCOIP_PB_REASON_ILLEGAL_MESSAGE, "tag already initiated");
            return;
        }
        int32_t qd = ci->quant_algorithm == CCOIP_PB_QUANT_ALGORITHM_NONE ? 0 : ci->quant_dtype;
        const bool p2p = m_p2p_kind(o->kind) || m_p2p_kind(ci->kind);
        if (o->count != ci->count || o->dtype != ci->dtype || o->op != ci->op ||
            o->quant_algorithm != ci->quant_algorithm || o->quant_dtype != qd ||
            o->relay != ci->relay || (p2p ? !m_p2p_agree(o, ci) : o->kind != ci->kind) ||
            (!p2p && (o->root != ci->root || o->algorithm != ci->algorithm)) ||
            !coll_params_valid(m, ci)) {
            o->mismatch = true;
        }
    }
    m_op_member *mm = m_op_mem_add(m, op, slot);
    if (mm == NULL) {
        if (m->coll.ops[op].mem_n == 0) m_op_free(m, op);
        m_answer_status(m, slot, call, CCOIP_PB_STATUS_INVALID_USAGE,
                        CCOIP_PB_REASON_RESOURCE_LIMIT, "out of memory for collectives");
        return;
    }
    mm->flags = MOM_VOTED;
    mm->p2p_send = ci->kind == CCOIP_PB_COLLECTIVE_KIND_SEND;
    mm->p2p_root = ci->root;
    mm->call = call;
    mm->opt_epoch = ci->optimistic_epoch;
    mm->pin_epoch = ci->pinned_epoch;
    /* The relayed input: the all-reduce's relay_data, the other kinds' relay_input. */
    const ccoip_pb_bytes *rin =
        ci->kind == CCOIP_PB_COLLECTIVE_KIND_ALL_REDUCE ? &ci->relay_data : &ci->relay_input;
    if (ci->relay && !m->coll.ops[op].mismatch && rin->len > 0) {
        mm->relay = malloc((size_t)rin->len);
        if (mm->relay == NULL) {
            m->coll.ops[op].mismatch = true; /* refused below like any bad ballot */
        } else {
            memcpy(mm->relay, rin->data, (size_t)rin->len);
            mm->relay_len = rin->len;
        }
    }
    m->coll.ops[op].n_voted++;
    m->coll.ops[op].anchor = slot;
    m_op_mark_dirty(m, op);
}

/* An optimistic member's completion (seq 0, §6.8.1): the running op of (group, tag) it has not
 * completed yet, else the voting op it started optimistically (the completion is kept until the
 * vote resolves). False when it matches neither: the op was refused meanwhile (the refusal
 * answered the member's initiate; its completion crossed it and is dropped). */
static bool coll_complete_optimistic(ccoip_master *m, uint32_t slot, uint64_t call,
                                     const ccoip_pb_collective_complete *cc, uint32_t *running)
{
    const m_peer *p = &m->sess.peers[slot];
    *running = M_OP_NONE;
    if (m->coll.op_index_cap == 0) return false;
    uint32_t at = m_op_probe_start(m, p->group, cc->tag);
    for (uint32_t op = m_op_probe(m, p->group, cc->tag, &at); op != M_OP_NONE;
         op = m_op_probe(m, p->group, cc->tag, &at)) {
        m_op_member *mm = m_op_mem(m, op, slot);
        if (mm == NULL) continue;
        if (m->coll.ops[op].state == MOP_RUNNING && (mm->flags & MOM_MEMBER) &&
            !(mm->flags & MOM_COMPLETED)) {
            *running = op;
            return true;
        }
        if (m->coll.ops[op].state == MOP_VOTING && (mm->flags & MOM_VOTED) && mm->opt_epoch != 0 &&
            !(mm->flags & MOM_EARLY)) {
            mm->flags |= MOM_EARLY;
            mm->done_call = call;
            if (cc->aborted) {
                mm->flags |= MOM_EARLY_AB;
                if (cc->reason == CCOIP_PB_REASON_NON_FINITE) mm->flags |= MOM_EARLY_NF;
                m_mark_rewire(m, p->group); /* its ring failed: a link broke (as below) */
            }
            return true;
        }
    }
    return false;
}

void m_coll_on_complete(ccoip_master *m, uint32_t slot, uint64_t call,
                        const ccoip_pb_collective_complete *cc)
{
    m_peer *p = m_peer_at(m, slot);
    uint32_t i = M_OP_NONE;
    if (cc->seq == 0) {
        if (!coll_complete_optimistic(m, slot, call, cc, &i)) {
            sm_log(&m->out, CCOIP_LOG_INFO,
                   "master: completion of refused optimistic op tag %U dropped", cc->tag);
            return;
        }
        if (i == M_OP_NONE) return; /* kept until the vote resolves */
    } else {
        i = m_op_find(m, p->group, cc->tag, MOP_RUNNING, cc->seq);
    }
    if (i != M_OP_NONE) {
        m_op *o = &m->coll.ops[i];
        m_op_member *mm = m_op_mem(m, i, slot);
        if (mm == NULL || !(mm->flags & MOM_MEMBER) || (mm->flags & MOM_COMPLETED)) {
            m_evict(m, slot, CCOIP_PB_REASON_ILLEGAL_MESSAGE,
                    "completion of an operation it is not in");
            return;
        }
        mm->flags |= MOM_COMPLETED;
        mm->call = call;
        o->n_done++;
        if (!o->has_first) m_op_arm(m, i);
        if (cc->aborted && !o->aborted) {
            /* Its ring failed locally: a link broke (or the member's data was not finite and
             * it stopped mid-ring, cancelling its I/O), so the ring is re-wired too. A
             * non-finite report is not retryable: the verdict says so to every member. */
            coll_abort(m, i,
                       cc->reason == CCOIP_PB_REASON_NON_FINITE ? CCOIP_PB_REASON_NON_FINITE
                                                                : CCOIP_PB_REASON_PEER_LOST);
            m_p2p_rewire(m, o);
        }
        coll_try_finish(m, i);
        return;
    }
    m_evict(m, slot, CCOIP_PB_REASON_ILLEGAL_MESSAGE, "completion of an operation it is not in");
}

static void coll_refuse(ccoip_master *m, uint32_t i, int32_t status, int32_t reason,
                        const char *detail, bool opt_here);

void m_coll_on_cancel(ccoip_master *m, uint32_t slot, const ccoip_pb_collective_cancel *cc)
{
    const m_peer *p = &m->sess.peers[slot];
    if (m->coll.op_index_cap == 0 || p->n_ops == 0) return;
    uint32_t at = m_op_probe_start(m, p->group, cc->tag);
    for (uint32_t op = m_op_probe(m, p->group, cc->tag, &at); op != M_OP_NONE;
         op = m_op_probe(m, p->group, cc->tag, &at)) {
        m_op *o = &m->coll.ops[op];
        const m_op_member *mm = m_op_mem(m, op, slot);
        if (mm == NULL) continue;
        if (o->state == MOP_RUNNING && (mm->flags & MOM_MEMBER) &&
            (cc->seq == 0 || cc->seq == o->seq)) {
            if (o->aborted) return; /* its verdict is out already */
            sm_log(&m->out, CCOIP_LOG_WARN,
                   "master: peer %U: collective tag %U seq %U timed out: aborting it", p->id,
                   o->tag, o->seq);
            /* Cancelled I/O may leave frames mid-link: the group re-wires, as after a failed
             * ring. */
            coll_abort(m, op, CCOIP_PB_REASON_OP_TIMEOUT);
            m_p2p_rewire(m, o);
            coll_try_finish(m, op);
            return;
        }
        if (o->state == MOP_VOTING && (mm->flags & MOM_VOTED) && cc->seq == 0) {
            bool opt_here = false;
            for (uint32_t k = 0; k < o->mem_n; k++) {
                if ((o->mem[k].flags & MOM_VOTED) && o->mem[k].opt_epoch != 0) opt_here = true;
            }
            coll_refuse(m, op, CCOIP_PB_STATUS_TIMEOUT, CCOIP_PB_REASON_OP_TIMEOUT,
                        "a member's timeout elapsed before every member initiated", opt_here);
            return;
        }
    }
    sm_log(&m->out, CCOIP_LOG_DEBUG, "master: cancel of tag %U seq %U: no such op (ended)", cc->tag,
           cc->seq);
}

void m_coll_on_loss(ccoip_master *m, uint32_t slot)
{
    if (m->sess.peers[slot].n_ops == 0) return;
    for (uint32_t i = 0; i < m->coll.ops_hi && m->sess.peers[slot].n_ops > 0; i++) {
        m_op *o = &m->coll.ops[i];
        if (o->state == MOP_FREE) continue;
        m_op_member *mm = m_op_mem(m, i, slot);
        if (mm == NULL) continue;
        uint8_t flags = mm->flags;
        m_op_mem_remove(m, i, mm);
        if (flags & MOM_VOTED) o->n_voted--;
        if (o->anchor == slot) o->anchor = M_SLOT_NONE;
        m_op_mark_dirty(m, i);
        if (o->state == MOP_RUNNING && (flags & MOM_MEMBER)) {
            o->n_member--;
            if (flags & MOM_COMPLETED) o->n_done--;
            coll_abort(m, i, CCOIP_PB_REASON_PEER_LOST);
            /* The lost peer is no member any more; the others may all be done. */
            if (o->n_member == 0) {
                m_op_free(m, i);
            } else {
                coll_try_finish(m, i);
            }
        }
    }
}

void m_coll_abort_all(ccoip_master *m, int32_t reason)
{
    for (uint32_t i = 0; i < m->coll.ops_hi; i++) {
        if (m->coll.ops[i].state == MOP_RUNNING) coll_abort(m, i, reason);
    }
}

void m_coll_abort_group(ccoip_master *m, uint32_t group, int32_t reason)
{
    for (uint32_t i = 0; i < m->coll.ops_hi; i++) {
        /* A running send / recv keeps going: its pair link is no ring link, and the loss of
         * one of its two members aborts it (m_coll_on_loss). */
        if (m->coll.ops[i].state == MOP_RUNNING && m->coll.ops[i].group == group &&
            !m_p2p_kind(m->coll.ops[i].kind))
            coll_abort(m, i, reason);
    }
}

bool m_coll_any_running(const ccoip_master *m)
{
    return m->coll.n_running > 0;
}

/* The state a voting op's commence depends on outside the op itself: when it changes, every
 * voting op is examined again. */
static uint64_t coll_world_sig(const ccoip_master *m)
{
    uint64_t h = m->topo.epoch * 0x9e3779b97f4a7c15ull;
    h ^= ((uint64_t)m->topo.phase << 1) ^ ((uint64_t)m->topo.ring_healthy << 3) ^
         ((uint64_t)m_topo_vote_complete(m) << 4);
    h = (h ^ (h >> 29)) * 0xbf58476d1ce4e5b9ull;
    h ^= m->topo.rewire_gen * 0x94d049bb133111ebull ^ ((uint64_t)m->sess.n_acc << 32) ^
         m->sess.order_n;
    return h | 1u; /* never 0: 0 asks for a full pass */
}

/* Refuses a voting op: every voter's initiate is answered status / reason; the op is freed. */
static void coll_refuse(ccoip_master *m, uint32_t i, int32_t status, int32_t reason,
                        const char *detail, bool opt_here)
{
    m_op *o = &m->coll.ops[i];
    sm_log(&m->out, CCOIP_LOG_WARN, "master: collective tag %U refused (status %d, reason %d)",
           o->tag, status, reason);
    for (uint32_t k = 0; k < o->mem_n; k++) {
        m_op_member *mm = &o->mem[k];
        if (mm->flags & MOM_VOTED) m_answer_status(m, mm->slot, mm->call, status, reason, detail);
    }
    /* Optimistic members cancelled a ring of this epoch: its frames are keyed by (epoch,
     * tag) only, so the group gets a new epoch before the tag is used again. */
    if (opt_here) m_mark_rewire(m, o->group);
    m_op_free(m, i);
}

/* One voting op: commence, refuse, or wait. True if it changed. */
static bool coll_progress_one(ccoip_master *m, uint32_t i, int *can_commence)
{
    m_op *o = &m->coll.ops[i];
    if (o->n_voted == 0) {
        m_op_free(m, i); /* every voter is gone: nobody waits for an answer */
        return true;
    }
    if (o->anchor == M_SLOT_NONE) {
        for (uint32_t k = 0; k < o->mem_n && o->anchor == M_SLOT_NONE; k++) {
            if (o->mem[k].flags & MOM_VOTED) o->anchor = o->mem[k].slot;
        }
    }
    /* Voters are accepted members of the group; while the group's ring is settled, every
     * accepted member is in it, so its size is the number of ballots required. An
     * unsettled group (re-wiring, in a phase) waits. */
    const m_peer *a = &m->sess.peers[o->anchor];
    if (a->rewire || a->in_phase) return false;
    uint32_t required = a->ring_size;
    uint64_t ring_epoch = a->ring_epoch;
    /* §6.8.3: an op pinned to an epoch runs only in that epoch, at every member (its ranks and
     * buffer sizes are that ring's): a ballot pinned to another one is refused at once, without
     * waiting for the others (a send whose receiver is gone gets its answer now). */
    bool pin_stale = false;
    for (uint32_t k = 0; k < o->mem_n; k++) {
        const m_op_member *mm = &o->mem[k];
        if ((mm->flags & MOM_VOTED) && mm->pin_epoch != 0 && mm->pin_epoch != ring_epoch)
            pin_stale = true;
    }
    if (!pin_stale && o->n_voted < m_p2p_ballots(o, required)) return false;
    /* Optimistic members (§6.8.1) already run the ring of their epoch: the op succeeds only if
     * every member does so in the group's current epoch. Otherwise it is aborted: with the
     * first early abort's reason, else REASON_EPOCH_CHANGED. */
    bool any_opt = false, opt_here = false;
    int32_t abort_reason = 0;
    for (uint32_t k = 0; k < o->mem_n; k++) {
        const m_op_member *mm = &o->mem[k];
        if (!(mm->flags & MOM_VOTED)) continue;
        if (mm->opt_epoch == 0) continue;
        any_opt = true;
        if (mm->opt_epoch == ring_epoch) opt_here = true;
        if ((mm->flags & MOM_EARLY_AB) && abort_reason == 0) {
            abort_reason =
                (mm->flags & MOM_EARLY_NF) ? CCOIP_PB_REASON_NON_FINITE : CCOIP_PB_REASON_PEER_LOST;
        }
        if (mm->opt_epoch != ring_epoch && abort_reason == 0) {
            abort_reason = CCOIP_PB_REASON_EPOCH_CHANGED;
        }
    }
    int32_t status = CCOIP_PB_STATUS_SUCCESS, reason = CCOIP_PB_REASON_UNSPECIFIED;
    const char *why = "too few peers";
    if (pin_stale) {
        /* First: members sized their buffers (and chose relay or ring) for other rings. */
        status = CCOIP_PB_STATUS_UPDATE_TOPOLOGY_FAILED;
        reason = CCOIP_PB_REASON_EPOCH_CHANGED;
        why = "the group's epoch changed: update the topology, read rank and world again";
    } else if (o->mismatch || !m_p2p_ranks_ok(m, o)) {
        status = CCOIP_PB_STATUS_INVALID_USAGE;
        reason = CCOIP_PB_REASON_COLLECTIVE_MISMATCH;
        why = "members disagree on the collective's parameters";
    } else if (required < m->cfg.min_collective_world) {
        status = CCOIP_PB_STATUS_TOO_FEW_PEERS;
    } else if ((ccoip_coll_rooted((ccoip_coll_kind)o->kind) || m_p2p_kind(o->kind)) &&
               o->root >= required) {
        /* A root (a send / recv: the other member) must be a rank of the group. */
        status = CCOIP_PB_STATUS_INVALID_ARGUMENT;
        why = "the root is not a rank of the group";
    } else if (!any_opt) {
        if (*can_commence < 0) *can_commence = m_topo_vote_complete(m) ? 0 : 1;
        if (*can_commence == 0) return false; /* wait for the topology vote */
    }
    if (status != CCOIP_PB_STATUS_SUCCESS) {
        coll_refuse(m, i, status, reason, why, opt_here);
        return true;
    }
    if (o->relay) {
        const int rr = m_relay_answer(m, o, required);
        if (rr < 0) {
            m->coll.relay_wait = true; /* the next step (at once) tries again */
            m_op_mark_dirty(m, i);
            return false;
        }
        if (rr > 0) {
            coll_refuse(m, i, CCOIP_PB_STATUS_INVALID_USAGE, CCOIP_PB_REASON_COLLECTIVE_MISMATCH,
                        "relayed inputs do not fit the collective", false);
            return true;
        }
        m->coll.relayed_ops++;
        m_op_free(m, i);
        return true;
    }
    m_op_set_state(m, o, MOP_RUNNING); /* n_running */
    o->seq = m->coll.next_seq++;
    o->epoch = ring_epoch; /* the group's epoch: its members' ring (§6.9) */
    o->world = required;
    o->has_first = false;
    o->timer_gen++;
    o->aborted = false;
    o->n_member = 0;
    o->n_done = 0;
    for (uint32_t k = 0; k < o->mem_n; k++) {
        m_op_member *mm = &o->mem[k];
        if (!(mm->flags & MOM_VOTED)) continue;
        if (abort_reason != 0 && mm->opt_epoch == 0) {
            /* The op is already lost: a member that waits for the commence gets the outcome as
             * the answer to its initiate and never sends a frame (which no other member would
             * expect: it would be held forever). Same result as the verdict gives the rest. */
            m_answer_status(m, mm->slot, mm->call,
                            abort_reason == CCOIP_PB_REASON_NON_FINITE
                                ? CCOIP_PB_STATUS_INVALID_ARGUMENT
                                : CCOIP_PB_STATUS_RANK_CONNECTION_LOST,
                            abort_reason, "collective aborted before it commenced");
            m_op_mem_remove(m, i, mm);
            k--;
            continue;
        }
        if (mm->opt_epoch != 0) {
            /* Already running: no commence; a completion that came early counts now. */
            const bool early = (mm->flags & MOM_EARLY) != 0;
            mm->flags = (uint8_t)(MOM_MEMBER | (early ? MOM_COMPLETED : 0u));
            mm->call = early ? mm->done_call : 0;
            o->n_member++;
            if (early) o->n_done++;
            continue;
        }
        ccoip_pb_master_to_peer env;
        memset(&env, 0, sizeof(env));
        env.call_id = mm->call;
        env.body_case = CCOIP_PB_MASTER_TO_PEER_BODY_COLLECTIVE_COMMENCE;
        env.body.collective_commence.tag = o->tag;
        /* Members that wait for the commence join an optimistic ring of this epoch: seq 0
         * tells them to key its frames by (epoch, tag) as the others do (§6.8.1). */
        env.body.collective_commence.seq = opt_here ? 0 : o->seq;
        env.body.collective_commence.epoch = o->epoch;
        env.body.collective_commence.world_size = required;
        m_p2p_commence(m, o, mm, &env);
        mm->flags = MOM_MEMBER;
        mm->call = 0;
        o->n_member++;
    }
    o->n_voted = 0;
    o->anchor = M_SLOT_NONE;
    if (o->n_done > 0) m_op_arm(m, i);
    if (abort_reason != 0) {
        coll_abort(m, i, abort_reason);
        if (opt_here) m_mark_rewire(m, o->group);
    }
    coll_try_finish(m, i);
    return true;
}

/* Resolves initiate votes whose every member has voted (in op order). */
bool m_coll_progress(ccoip_master *m)
{
    m_op_timers_prune(m);
    m->coll.relay_wait = false;
    bool changed = false;
    /* A group commences while its own ring is settled (not re-wiring, not in a phase); other
     * groups' re-wiring does not hold it up. A complete topology vote holds every group. */
    int can_commence = -1; /* computed on first need */
    uint64_t sig = coll_world_sig(m);
    if (sig != m->coll.op_world_sig) {
        m->coll.op_world_sig = sig;
        for (uint32_t k = 0; k < m->coll.op_dirty_n; k++)
            m->coll.ops[m->coll.op_dirty[k]].dirty = false;
        m->coll.op_dirty_n = 0;
        for (uint32_t i = 0; i < m->coll.ops_hi; i++) {
            if (m->coll.ops[i].state == MOP_VOTING && coll_progress_one(m, i, &can_commence)) {
                changed = true;
            }
        }
        return changed;
    }
    if (m->coll.op_dirty_n == 0) return false;
    /* The ops that changed, in op order (the order a full pass takes). */
    qsort(m->coll.op_dirty, m->coll.op_dirty_n, sizeof(uint32_t), m_cmp_u32);
    uint32_t n = m->coll.op_dirty_n;
    m->coll.op_dirty_n = 0;
    for (uint32_t k = 0; k < n; k++) {
        uint32_t i = m->coll.op_dirty[k];
        m->coll.ops[i].dirty = false;
        if (m->coll.ops[i].state == MOP_VOTING && coll_progress_one(m, i, &can_commence)) {
            changed = true;
        }
    }
    return changed;
}

/*
 * An expired op (docs/protocol.md §6.10). A minority never evicts a majority: the members that
 * hold it up (voting: accepted members of the group that did not initiate; running: members
 * that did not complete) are evicted only when those that did are a strict majority of the
 * group (voting) or of the op's members (running). Otherwise nobody is evicted: a voting op is
 * refused (INVALID_USAGE / REASON_VOTE_UNMATCHED to its voters), a running op is aborted
 * (REASON_VOTE_TIMEOUT: pcclRankConnectionLost on every member) and its group re-wires.
 */
static void coll_expire(ccoip_master *m, uint32_t i)
{
    m_op *o = &m->coll.ops[i];
    o->has_first = false; /* evict once per deadline */
    o->timer_gen++;
    m_op_state st = o->state;
    uint32_t group = o->group;
    if (st == MOP_VOTING && m_p2p_kind(o->kind)) {
        /* A send / recv whose other member never came (§6.8.4): refused, nobody evicted (the
         * rest of the group has no part in it). */
        sm_log(&m->out, CCOIP_LOG_WARN, "master: %s tag %U of group %u unmatched in time",
               o->kind == CCOIP_PB_COLLECTIVE_KIND_SEND ? "send" : "recv", o->tag, group);
        coll_refuse(m, i, CCOIP_PB_STATUS_TIMEOUT, CCOIP_PB_REASON_VOTE_UNMATCHED,
                    "no matching send or receive within the vote timeout", false);
        return;
    }
    if (st == MOP_VOTING) {
        uint32_t members = 0;
        uint64_t ring_epoch = 0;
        for (uint32_t k = 0; k < m->sess.order_n; k++) {
            const m_peer *p = &m->sess.peers[m->sess.order[k]];
            if (p->state != MP_ACCEPTED || p->group != group) continue;
            members++;
            ring_epoch = p->ring_epoch;
        }
        if (!m_majority(o->n_voted, members)) {
            bool opt_here = false;
            for (uint32_t k = 0; k < o->mem_n; k++) {
                const m_op_member *mm = &o->mem[k];
                if ((mm->flags & MOM_VOTED) && mm->opt_epoch != 0 && mm->opt_epoch == ring_epoch)
                    opt_here = true;
            }
            sm_log(&m->out, CCOIP_LOG_WARN,
                   "master: collective tag %U of group %u: %u of %u members initiated in time",
                   o->tag, group, o->n_voted, members);
            coll_refuse(m, i, CCOIP_PB_STATUS_INVALID_USAGE, CCOIP_PB_REASON_VOTE_UNMATCHED,
                        "half or fewer of the group initiated the collective in time", opt_here);
            return;
        }
    } else if (st == MOP_RUNNING && !o->aborted && !m_majority(o->n_done, o->n_member)) {
        sm_log(&m->out, CCOIP_LOG_WARN,
               "master: collective tag %U seq %U: %u of %u members completed in time: aborting",
               o->tag, o->seq, o->n_done, o->n_member);
        coll_abort(m, i, CCOIP_PB_REASON_VOTE_TIMEOUT);
        m_p2p_rewire(m, o);
        return;
    }
    uint64_t last = 0;
    for (uint32_t s = m_next_by_id(m, 0); s != M_SLOT_NONE; s = m_next_by_id(m, last)) {
        last = m->sess.peers[s].id;
        const m_peer *p = &m->sess.peers[s];
        const m_op_member *mm = m_op_mem(m, i, s);
        uint8_t f = mm != NULL ? mm->flags : 0;
        if (st == MOP_VOTING && p->state == MP_ACCEPTED && p->group == group && !(f & MOM_VOTED)) {
            m_evict(m, s, CCOIP_PB_REASON_VOTE_TIMEOUT, "did not initiate the collective");
        } else if (st == MOP_RUNNING && (f & MOM_MEMBER) && !(f & MOM_COMPLETED)) {
            m_evict(m, s, CCOIP_PB_REASON_VOTE_TIMEOUT, "did not complete the collective");
        }
        if (m->coll.ops[i].state != st) break; /* freed by an eviction */
    }
}

void m_coll_timers(ccoip_master *m)
{
    m_op_timers_prune(m);
    uint32_t n = 0;
    for (uint32_t k = 0; k < m->coll.op_timers_n; k++) {
        const m_op_timer *t =
            &m->coll.op_timers[(m->coll.op_timers_head + k) % m->coll.op_timers_cap];
        if (t->due_ns > m->now) break;
        if (m_op_timer_live(m, t)) n++;
    }
    if (n == 0) return;
    /* Every op due now, examined in op order (as a pass over the table would); evictions
     * below may touch the master's scratch arrays, so the list is its own. */
    uint32_t *due = malloc((size_t)n * sizeof(uint32_t));
    if (due == NULL) return; /* retried on the next step */
    uint32_t got = 0;
    for (uint32_t k = 0; k < m->coll.op_timers_n && got < n; k++) {
        const m_op_timer *t =
            &m->coll.op_timers[(m->coll.op_timers_head + k) % m->coll.op_timers_cap];
        if (t->due_ns > m->now) break;
        if (m_op_timer_live(m, t)) due[got++] = t->op;
    }
    qsort(due, got, sizeof(uint32_t), m_cmp_u32);
    for (uint32_t k = 0; k < got; k++) {
        const m_op *o = &m->coll.ops[due[k]];
        if (o->state == MOP_FREE || !o->has_first ||
            m->now < sm_add_sat(o->first_ns, sm_ms(m->cfg.vote_timeout_ms))) {
            continue;
        }
        coll_expire(m, due[k]);
    }
    free(due);
}

uint64_t m_coll_deadline(const ccoip_master *m)
{
    if (m->coll.relay_wait) return m->now;
    for (uint32_t k = 0; k < m->coll.op_timers_n; k++) {
        const m_op_timer *t =
            &m->coll.op_timers[(m->coll.op_timers_head + k) % m->coll.op_timers_cap];
        if (m_op_timer_live(m, t)) return t->due_ns;
    }
    return CCOIP_NO_DEADLINE;
}
