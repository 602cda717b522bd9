/*
 * master_collective.c — collective operations on the master
 * (docs/protocol.md §6.8, docs/core.md §2.4): the initiate vote per
 * (group, tag) with agreement on every parameter, commence with (epoch,
 * seq), the completion vote, and exactly one verdict per op and member.
 */
#include <string.h>

#include "ccoip_quant.h"
#include "master_internal.h"

static m_op_member *coll_mem(ccoip_master *m, uint32_t op, uint32_t slot)
{
    return &m->opm[(uint64_t)op * m->cfg.max_peers + slot];
}

static void coll_free(ccoip_master *m, uint32_t op)
{
    memset(&m->ops[op], 0, sizeof(m->ops[op]));
    memset(coll_mem(m, op, 0), 0, (size_t)m->cfg.max_peers * sizeof(m_op_member));
}

static void coll_send_verdict(ccoip_master *m, uint32_t op, uint32_t slot, uint64_t call)
{
    const m_op *o = &m->ops[op];
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
    m_op *o = &m->ops[op];
    if (o->aborted) return;
    o->aborted = true;
    o->reason = reason;
    sm_log(&m->out, CCOIP_LOG_INFO, "master: collective tag %U seq %U aborted (reason %d)", o->tag,
           o->seq, reason);
    for (uint32_t i = 0; i < m->order_n; i++) {
        uint32_t s = m->order[i];
        m_op_member *mm = coll_mem(m, op, s);
        if ((mm->flags & MOM_MEMBER) == 0 || (mm->flags & MOM_VERDICT) != 0) continue;
        mm->flags |= MOM_VERDICT;
        if (m->cfg.canary_skip_abort_verdict) continue; /* TEST ONLY: break the rule */
        coll_send_verdict(m, op, s, (mm->flags & MOM_COMPLETED) ? mm->call : 0);
    }
}

/* Frees a running op once every remaining member completed; sends the success verdicts. */
static void coll_try_finish(ccoip_master *m, uint32_t op)
{
    m_op *o = &m->ops[op];
    if (o->n_done < o->n_member) return;
    if (!o->aborted) {
        for (uint32_t i = 0; i < m->order_n; i++) {
            uint32_t s = m->order[i];
            m_op_member *mm = coll_mem(m, op, s);
            if (!(mm->flags & MOM_MEMBER) || (mm->flags & MOM_VERDICT)) continue;
            mm->flags |= MOM_VERDICT;
            coll_send_verdict(m, op, s, mm->call);
        }
    }
    coll_free(m, op);
}

/* Accepted members of slot's group: its ring size while its group's ring is settled (every
 * accepted member of a group is in its ring then), else counted. */
static uint32_t coll_group_size(const ccoip_master *m, uint32_t slot)
{
    const m_peer *me = &m->peers[slot];
    if (me->state == MP_ACCEPTED && !me->rewire && !me->in_phase && me->ring_size > 0) {
        return me->ring_size;
    }
    uint32_t group = me->group, n = 0;
    for (uint32_t i = 0; i < m->order_n; i++) {
        const m_peer *p = &m->peers[m->order[i]];
        if (p->state == MP_ACCEPTED && p->group == group) n++;
    }
    return n;
}

static bool coll_params_valid(const ccoip_pb_collective_initiate *ci)
{
    if (!ccoip_pb_data_type_is_known(ci->dtype) || !ccoip_pb_red_op_is_known(ci->op) ||
        !ccoip_pb_quant_algorithm_is_known(ci->quant_algorithm)) {
        return false;
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
    uint32_t voting = M_SLOT_NONE, free_op = M_SLOT_NONE;
    for (uint32_t i = 0; i < m->cfg.max_ops; i++) {
        const m_op *o = &m->ops[i];
        if (o->state == MOP_FREE) {
            if (free_op == M_SLOT_NONE) free_op = i;
            continue;
        }
        if (o->group != p->group || o->tag != ci->tag) continue;
        const m_op_member *mm = coll_mem(m, i, slot);
        if (o->state == MOP_VOTING) {
            voting = i;
        } else if ((mm->flags & MOM_MEMBER) && !(mm->flags & MOM_COMPLETED)) {
            m_answer_status(m, slot, call, CCOIP_PB_STATUS_INVALID_USAGE,
                            CCOIP_PB_REASON_ILLEGAL_MESSAGE, "tag already in use by a running op");
            return;
        }
    }
    if (voting == M_SLOT_NONE) {
        if (free_op == M_SLOT_NONE) {
            m_answer_status(m, slot, call, CCOIP_PB_STATUS_INVALID_USAGE,
                            CCOIP_PB_REASON_RESOURCE_LIMIT, "too many collective operations");
            return;
        }
        voting = free_op;
        m_op *o = &m->ops[voting];
        o->state = MOP_VOTING;
        o->group = p->group;
        o->tag = ci->tag;
        o->count = ci->count;
        o->dtype = ci->dtype;
        o->op = ci->op;
        o->quant_algorithm = ci->quant_algorithm;
        o->quant_dtype = ci->quant_algorithm == CCOIP_PB_QUANT_ALGORITHM_NONE ? 0 : ci->quant_dtype;
        o->has_first = true;
        o->first_ns = m->now;
        o->mismatch = !coll_params_valid(ci);
    } else {
        m_op *o = &m->ops[voting];
        m_op_member *mm = coll_mem(m, voting, slot);
        if (mm->flags & MOM_VOTED) {
            m_answer_status(m, slot, call, CCOIP_PB_STATUS_INVALID_USAGE,
                            CCOIP_PB_REASON_ILLEGAL_MESSAGE, "tag already initiated");
            return;
        }
        int32_t qd = ci->quant_algorithm == CCOIP_PB_QUANT_ALGORITHM_NONE ? 0 : ci->quant_dtype;
        if (o->count != ci->count || o->dtype != ci->dtype || o->op != ci->op ||
            o->quant_algorithm != ci->quant_algorithm || o->quant_dtype != qd ||
            !coll_params_valid(ci)) {
            o->mismatch = true;
        }
    }
    m_op_member *mm = coll_mem(m, voting, slot);
    mm->flags = MOM_VOTED;
    mm->call = call;
    m->ops[voting].n_voted++;
    m->ops[voting].anchor = slot;
}

void m_coll_on_complete(ccoip_master *m, uint32_t slot, uint64_t call,
                        const ccoip_pb_collective_complete *cc)
{
    m_peer *p = m_peer_at(m, slot);
    for (uint32_t i = 0; i < m->cfg.max_ops; i++) {
        m_op *o = &m->ops[i];
        if (o->state != MOP_RUNNING || o->group != p->group || o->tag != cc->tag ||
            o->seq != cc->seq) {
            continue;
        }
        m_op_member *mm = coll_mem(m, i, slot);
        if (!(mm->flags & MOM_MEMBER) || (mm->flags & MOM_COMPLETED)) break;
        mm->flags |= MOM_COMPLETED;
        mm->call = call;
        o->n_done++;
        if (!o->has_first) {
            o->has_first = true;
            o->first_ns = m->now;
        }
        if (cc->aborted && !o->aborted) {
            /* Its ring failed locally: a link broke (or the member's data was not finite and
             * it stopped mid-ring, cancelling its I/O), so the ring is re-wired too. A
             * non-finite report is not retryable: the verdict says so to every member. */
            coll_abort(m, i,
                       cc->reason == CCOIP_PB_REASON_NON_FINITE ? CCOIP_PB_REASON_NON_FINITE
                                                                : CCOIP_PB_REASON_PEER_LOST);
            m_mark_rewire(m, o->group);
        }
        coll_try_finish(m, i);
        return;
    }
    m_evict(m, slot, CCOIP_PB_REASON_ILLEGAL_MESSAGE, "completion of an operation it is not in");
}

void m_coll_on_loss(ccoip_master *m, uint32_t slot)
{
    for (uint32_t i = 0; i < m->cfg.max_ops; i++) {
        m_op *o = &m->ops[i];
        if (o->state == MOP_FREE) continue;
        m_op_member *mm = coll_mem(m, i, slot);
        uint8_t flags = mm->flags;
        mm->flags = 0;
        mm->call = 0;
        if (flags & MOM_VOTED) o->n_voted--;
        if (o->anchor == slot) o->anchor = M_SLOT_NONE;
        if (o->state == MOP_RUNNING && (flags & MOM_MEMBER)) {
            o->n_member--;
            if (flags & MOM_COMPLETED) o->n_done--;
            coll_abort(m, i, CCOIP_PB_REASON_PEER_LOST);
            /* The lost peer is no member any more; the others may all be done. */
            if (o->n_member == 0) {
                coll_free(m, i);
            } else {
                /* coll_try_finish walks order[], which still holds slot: its flags are 0. */
                coll_try_finish(m, i);
            }
        }
    }
}

void m_coll_abort_all(ccoip_master *m, int32_t reason)
{
    for (uint32_t i = 0; i < m->cfg.max_ops; i++) {
        if (m->ops[i].state == MOP_RUNNING) coll_abort(m, i, reason);
    }
}

void m_coll_abort_group(ccoip_master *m, uint32_t group, int32_t reason)
{
    for (uint32_t i = 0; i < m->cfg.max_ops; i++) {
        if (m->ops[i].state == MOP_RUNNING && m->ops[i].group == group) coll_abort(m, i, reason);
    }
}

bool m_coll_any_running(const ccoip_master *m)
{
    for (uint32_t i = 0; i < m->cfg.max_ops; i++) {
        if (m->ops[i].state == MOP_RUNNING) return true;
    }
    return false;
}

/* Resolves initiate votes whose every member has voted (in op-slot order). */
bool m_coll_progress(ccoip_master *m)
{
    bool changed = false;
    /* A group commences while its own ring is settled (not re-wiring, not in a phase); other
     * groups' re-wiring does not hold it up. A complete topology vote holds every group. */
    int can_commence = -1; /* computed on first need */
    for (uint32_t i = 0; i < m->cfg.max_ops; i++) {
        m_op *o = &m->ops[i];
        if (o->state != MOP_VOTING) continue;
        if (o->n_voted == 0) {
            coll_free(m, i); /* every voter is gone: nobody waits for an answer */
            changed = true;
            continue;
        }
        if (o->anchor == M_SLOT_NONE) {
            for (uint32_t k = 0; k < m->order_n && o->anchor == M_SLOT_NONE; k++) {
                if (coll_mem(m, i, m->order[k])->flags & MOM_VOTED) o->anchor = m->order[k];
            }
        }
        /* Voters are accepted members of the group; while the group's ring is settled, every
         * accepted member is in it, so its size is the number of ballots required. An
         * unsettled group (re-wiring, in a phase) waits. */
        const m_peer *a = &m->peers[o->anchor];
        if (a->rewire || a->in_phase) continue;
        uint32_t required = a->ring_size;
        if (o->n_voted < required) continue;
        uint64_t ring_epoch = a->ring_epoch;
        int32_t status = CCOIP_PB_STATUS_SUCCESS, reason = CCOIP_PB_REASON_UNSPECIFIED;
        if (o->mismatch) {
            status = CCOIP_PB_STATUS_INVALID_USAGE;
            reason = CCOIP_PB_REASON_COLLECTIVE_MISMATCH;
        } else if (required < m->cfg.min_collective_world) {
            status = CCOIP_PB_STATUS_TOO_FEW_PEERS;
        } else {
            if (can_commence < 0) can_commence = m_topo_vote_complete(m) ? 0 : 1;
            if (can_commence == 0) continue; /* wait for the topology vote */
        }
        if (status != CCOIP_PB_STATUS_SUCCESS) {
            sm_log(&m->out, CCOIP_LOG_WARN, "master: collective tag %U refused (status %d)", o->tag,
                   status);
            for (uint32_t k = 0; k < m->order_n; k++) {
                uint32_t s = m->order[k];
                m_op_member *mm = coll_mem(m, i, s);
                if (mm->flags & MOM_VOTED) {
                    m_answer_status(m, s, mm->call, status, reason,
                                    o->mismatch ? "members disagree on the collective's parameters"
                                                : "too few peers");
                }
            }
            coll_free(m, i);
            changed = true;
            continue;
        }
        o->state = MOP_RUNNING;
        o->seq = m->next_seq++;
        o->epoch = ring_epoch; /* the group's epoch: its members' ring (§6.9) */
        o->world = required;
        o->has_first = false;
        o->aborted = false;
        o->n_member = 0;
        o->n_done = 0;
        for (uint32_t k = 0; k < m->order_n; k++) {
            uint32_t s = m->order[k];
            m_op_member *mm = coll_mem(m, i, s);
            if (!(mm->flags & MOM_VOTED)) continue;
            ccoip_pb_master_to_peer env;
            memset(&env, 0, sizeof(env));
            env.call_id = mm->call;
            env.body_case = CCOIP_PB_MASTER_TO_PEER_BODY_COLLECTIVE_COMMENCE;
            env.body.collective_commence.tag = o->tag;
            env.body.collective_commence.seq = o->seq;
            env.body.collective_commence.epoch = o->epoch;
            env.body.collective_commence.world_size = required;
            m_send(m, s, &env);
            mm->flags = MOM_MEMBER;
            mm->call = 0;
            o->n_member++;
        }
        o->n_voted = 0;
        o->anchor = M_SLOT_NONE;
        changed = true;
    }
    return changed;
}

void m_coll_timers(ccoip_master *m)
{
    uint64_t to = sm_ms(m->cfg.vote_timeout_ms);
    for (uint32_t i = 0; i < m->cfg.max_ops; i++) {
        m_op *o = &m->ops[i];
        if (o->state == MOP_FREE || !o->has_first || m->now < sm_add_sat(o->first_ns, to)) {
            continue;
        }
        o->has_first = false; /* evict once per deadline */
        m_op_state st = o->state;
        uint32_t group = o->group;
        uint64_t last = 0;
        for (uint32_t s = m_next_by_id(m, 0); s != M_SLOT_NONE; s = m_next_by_id(m, last)) {
            last = m->peers[s].id;
            const m_peer *p = &m->peers[s];
            uint8_t f = coll_mem(m, i, s)->flags;
            if (st == MOP_VOTING && p->state == MP_ACCEPTED && p->group == group &&
                !(f & MOM_VOTED)) {
                m_evict(m, s, CCOIP_PB_REASON_VOTE_TIMEOUT, "did not initiate the collective");
            } else if (st == MOP_RUNNING && (f & MOM_MEMBER) && !(f & MOM_COMPLETED)) {
                m_evict(m, s, CCOIP_PB_REASON_VOTE_TIMEOUT, "did not complete the collective");
            }
            if (m->ops[i].state != st) break; /* freed by an eviction */
        }
    }
}

uint64_t m_coll_deadline(const ccoip_master *m)
{
    uint64_t d = CCOIP_NO_DEADLINE, to = sm_ms(m->cfg.vote_timeout_ms);
    for (uint32_t i = 0; i < m->cfg.max_ops; i++) {
        const m_op *o = &m->ops[i];
        if (o->state != MOP_FREE && o->has_first && sm_add_sat(o->first_ns, to) < d) {
            d = sm_add_sat(o->first_ns, to);
        }
    }
    return d;
}
