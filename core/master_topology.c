/*
 * master_topology.c — topology votes (docs/protocol.md §6.3), the p2p phase
 * (§6.4), ring building that avoids unreachable links, re-wiring after a
 * loss, and the pending-peers query (§6.5). docs/core.md §2.2–2.3.
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "master_internal.h"

/* ------------------------------------------------------------------------ */
/* Votes                                                                     */
/* ------------------------------------------------------------------------ */

bool m_topo_vote_complete(const ccoip_master *m)
{
    if (m->sess.n_acc > 0) return m->topo.n_tv_acc == m->sess.n_acc;
    uint32_t accepted = 0, voters = 0;
    bool pending_voter = false;
    for (uint32_t i = 0; i < m->sess.order_n; i++) {
        const m_peer *p = &m->sess.peers[m->sess.order[i]];
        if (p->state == MP_ACCEPTED) {
            accepted++;
            if (p->topo_voted) voters++;
        } else if (p->state == MP_PENDING && p->topo_voted && !p->in_phase) {
            pending_voter = true;
        }
    }
    if (accepted > 0) return voters == accepted;
    /* Nobody to ask: waiting peers are admitted as soon as they vote. */
    return pending_voter;
}

void m_topo_on_update_vote(ccoip_master *m, uint32_t slot, uint64_t call,
                           const ccoip_pb_update_topology_vote *v)
{
    m_peer *p = m_peer_at(m, slot);
    if (p->topo_voted || (p->state == MP_PENDING && p->in_phase)) {
        m_evict(m, slot, CCOIP_PB_REASON_ILLEGAL_MESSAGE, "duplicate topology vote");
        return;
    }
    p->topo_voted = true;
    m->mm.dirty = true;
    if (p->state == MP_ACCEPTED) m->topo.n_tv_acc++;
    p->topo_accept = v->accept_new_peers;
    p->topo_call = call;
    if (p->state == MP_ACCEPTED && !m->topo.topo_timer) {
        m->topo.topo_timer = true;
        m->topo.topo_first_ns = m->now;
    }
}

void m_topo_on_pending_query(ccoip_master *m, uint32_t slot, uint64_t call)
{
    m_peer *p = m_peer_at(m, slot);
    if (p->pend_voted) {
        m_evict(m, slot, CCOIP_PB_REASON_ILLEGAL_MESSAGE, "duplicate pending-peers query");
        return;
    }
    p->pend_voted = true;
    m->mm.dirty = true;
    m->topo.n_pend_voted++;
    p->pend_call = call;
    if (!m->topo.pend_timer) {
        m->topo.pend_timer = true;
        m->topo.pend_first_ns = m->now;
    }
}

static bool topo_pending_progress(ccoip_master *m)
{
    uint32_t accepted = 0, voters = 0, pending = 0;
    if (m->topo.n_pend_voted == 0) return false; /* nobody asked */
    for (uint32_t i = 0; i < m->sess.order_n; i++) {
        const m_peer *p = &m->sess.peers[m->sess.order[i]];
        if (p->state == MP_ACCEPTED) {
            accepted++;
            if (p->pend_voted) voters++;
        } else if (p->state == MP_PENDING) {
            pending++;
        }
    }
    if (voters == 0 || voters != accepted) return false;
    for (uint32_t i = 0; i < m->sess.order_n; i++) {
        uint32_t s = m->sess.order[i];
        m_peer *p = &m->sess.peers[s];
        if (p->state != MP_ACCEPTED) continue;
        ccoip_pb_master_to_peer env;
        memset(&env, 0, sizeof(env));
        env.call_id = p->pend_call;
        env.body_case = CCOIP_PB_MASTER_TO_PEER_BODY_PENDING_PEERS;
        env.body.pending_peers.pending = pending > 0;
        env.body.pending_peers.num_pending = pending;
        m_send(m, s, &env);
        if (p->pend_voted) m->topo.n_pend_voted--;
        p->pend_voted = false;
        p->pend_call = 0;
    }
    m->topo.pend_timer = false;
    return true;
}

/* ------------------------------------------------------------------------ */
/* Rings                                                                     */
/* ------------------------------------------------------------------------ */

/* A ring link from -> to is usable when either end can dial the other: its connections carry
 * data both ways whoever dialled them (§6.4). Strict (the first search): by a dial that has not
 * failed to a peer that never refused one; loose: by any dial not known to fail (one into a
 * peer that refused another may still work, e.g. from its own LAN). */
static bool topo_link_ok(const ccoip_master *m, uint32_t from_slot, uint32_t to_slot)
{
    const m_peer *a = &m->sess.peers[from_slot], *b = &m->sess.peers[to_slot];
    const bool fwd = !m_unreachable(m, from_slot, to_slot);
    const bool rev = !m_unreachable(m, to_slot, from_slot);
    if (m->topo.strict_links) return (fwd && !b->no_inbound) || (rev && !a->no_inbound);
    return fwd || rev || (m->topo.relay_links && !a->relay_failed && !b->relay_failed);
}

/* The ring link from -> to goes through the master's relay (§8.6): neither end can dial the
 * other, and the master relays. */
static bool topo_link_relayed(const ccoip_master *m, uint32_t from_slot, uint32_t to_slot)
{
    return m->spl.relay_port != 0 && m_unreachable(m, from_slot, to_slot) &&
           m_unreachable(m, to_slot, from_slot) && !m->sess.peers[from_slot].relay_failed &&
           !m->sess.peers[to_slot].relay_failed;
}

/*
 * Who dials the ring link from -> to (§6.4): its source, unless that dial failed before, or the
 * destination refused a dial (from anyone: it likely accepts no connections, a peer behind NAT)
 * while the source never did and can be dialled from the destination. True: the destination
 * dials (the link is reversed).
 */
static bool topo_link_reversed(const ccoip_master *m, uint32_t from_slot, uint32_t to_slot)
{
    const bool fwd = !m_unreachable(m, from_slot, to_slot);
    const bool rev = !m_unreachable(m, to_slot, from_slot);
    if (!rev) return false;
    if (!fwd) return true;
    return m->sess.peers[to_slot].no_inbound && !m->sess.peers[from_slot].no_inbound;
}

/*
 * Finds a Hamiltonian cycle over mem[0..n) (slots, ascending id) using only
 * reachable directed links; the cycle (member indices, starting at 0) goes
 * to cyc. Tries the sorted order first, then a depth-first search in id
 * order within the configured budget.
 */
static bool topo_find_cycle(ccoip_master *m, const uint32_t *mem, uint32_t n, uint32_t *cyc)
{
    bool sorted_ok = true;
    for (uint32_t i = 0; i < n && n > 1; i++) {
        if (!topo_link_ok(m, mem[i], mem[(i + 1u) % n])) {
            sorted_ok = false;
            break;
        }
    }
    if (sorted_ok) {
        for (uint32_t i = 0; i < n; i++)
            cyc[i] = i;
        return true;
    }
    uint32_t *nt = m->tmp_c;
    uint8_t *used = m->tmp_used;
    memset(used, 0, n);
    cyc[0] = 0;
    used[0] = 1;
    uint32_t pos = 1;
    nt[1] = 1;
    for (uint32_t budget = m->cfg.ring_search_budget; budget > 0; budget--) {
        if (pos == n) {
            if (topo_link_ok(m, mem[cyc[n - 1u]], mem[cyc[0]])) return true;
            pos--;
            used[cyc[pos]] = 0;
            continue;
        }
        uint32_t c = nt[pos];
        while (c < n && (used[c] != 0 || !topo_link_ok(m, mem[cyc[pos - 1u]], mem[c])))
            c++;
        if (c < n) {
            cyc[pos] = c;
            used[c] = 1;
            nt[pos] = c + 1u;
            pos++;
            if (pos < n) nt[pos] = 1;
        } else {
            pos--;
            if (pos == 0) return false;
            used[cyc[pos]] = 0;
        }
    }
    return false;
}

/*
 * Builds the ring of every group among the in-phase peers. Returns
 * M_SLOT_NONE on success, or the slot to evict: the member of a group
 * without a cycle that reaches (and is reached by) the fewest others, ties
 * on the lowest id (DESIGN.md §3 liveness).
 */
static uint32_t topo_build_rings(ccoip_master *m)
{
    uint32_t *mem = m->tmp_a, *cyc = m->tmp_b;
    /* In-phase peers by (group, position in order[]): each group's members in ascending id,
     * groups ascending, in one pass and a sort (not two walks over every peer per group). */
    uint64_t *keys = m->ids;
    uint32_t nk = 0;
    for (uint32_t i = 0; i < m->sess.order_n; i++) {
        const m_peer *p = &m->sess.peers[m->sess.order[i]];
        if (p->in_phase) keys[nk++] = ((uint64_t)p->group << 32) | i;
    }
    qsort(keys, nk, sizeof(uint64_t), m_cmp_u64);
    for (uint32_t at = 0; at < nk;) {
        const uint32_t group = (uint32_t)(keys[at] >> 32);
        uint32_t n = 0;
        bool keyed = false;
        while (at < nk && (uint32_t)(keys[at] >> 32) == group) {
            mem[n] = m->sess.order[(uint32_t)keys[at++]];
            keyed = keyed || m->sess.peers[mem[n]].ring_key != 0;
            n++;
        }
        /* Ring keys (Join.ring_key, a split's parent ranks): members by (key, id). Only groups
         * that use them pay for the (stable, insertion) sort; they are a split's few. */
        for (uint32_t i = 1; keyed && i < n; i++) {
            const uint32_t s = mem[i], key = m->sess.peers[s].ring_key;
            uint32_t j = i;
            for (; j > 0 && m->sess.peers[mem[j - 1u]].ring_key > key; j--)
                mem[j] = mem[j - 1u];
            mem[j] = s;
        }
        m->topo.strict_links = true;
        bool found = topo_find_cycle(m, mem, n, cyc);
        m->topo.strict_links = false;
        if (!found) found = topo_find_cycle(m, mem, n, cyc);
        if (!found && m->spl.relay_port != 0) {
            m->topo.relay_links = true; /* last: through the master's relay (§8.6) */
            found = topo_find_cycle(m, mem, n, cyc);
            m->topo.relay_links = false;
        }
        if (!found) {
            uint32_t victim = M_SLOT_NONE, best = UINT32_MAX;
            for (uint32_t i = 0; i < n; i++) {
                uint32_t reach = 0;
                for (uint32_t j = 0; j < n; j++) {
                    if (i == j) continue;
                    if (!m_unreachable(m, mem[i], mem[j])) reach++; /* dials that work */
                    if (!m_unreachable(m, mem[j], mem[i])) reach++;
                }
                if (reach < best) {
                    best = reach;
                    victim = mem[i];
                }
            }
            return victim;
        }
        for (uint32_t i = 0; i < n; i++) {
            m_peer *p = &m->sess.peers[mem[cyc[i]]];
            p->rank = i;
            p->ring_size = n;
            p->succ = mem[cyc[(i + 1u) % n]];
            p->pred = mem[cyc[(i + n - 1u) % n]];
        }
    }
    return M_SLOT_NONE;
}

/* Ring ids of the group of slot (following succ from rank 0) into m->ids. */
static uint32_t topo_fill_ring(ccoip_master *m, uint32_t slot)
{
    const m_peer *me = &m->sess.peers[slot];
    uint32_t s = slot;
    /* Walk back to rank 0. */
    for (uint32_t k = 0; k < me->ring_size && m->sess.peers[s].rank != 0; k++)
        s = m->sess.peers[s].pred;
    uint32_t n = 0;
    for (uint32_t k = 0; k < me->ring_size; k++) {
        m->ids[n++] = m->sess.peers[s].id;
        s = m->sess.peers[s].succ;
    }
    return n;
}

void m_topo_fill_endpoints(const m_peer *p, ccoip_pb_endpoint *eps, uint64_t *count)
{
    uint64_t n = 0;
    for (uint32_t k = 0; k < M_ENDPOINT_KINDS; k++) {
        if (!p->ep[k].has) continue;
        m_peer_endpoint(p, k, &eps[n]);
        n++;
    }
    *count = n;
}

/*
 * The plan for slot, answering `call` (0: a notification). `unchanged` (§6.3): the answer to a
 * topology vote that changes nothing: the member's ring of its group's current epoch and the
 * world sizes, without neighbours, keys or table (the member keeps its links and what it holds).
 */
static void topo_send_plan(ccoip_master *m, uint32_t slot, uint64_t call, bool optimized,
                           bool unchanged)
{
    m_peer *p = m_peer_at(m, slot);
    ccoip_pb_master_to_peer env;
    ccoip_pb_peer_info nb[2];
    ccoip_pb_endpoint eps[2][M_ENDPOINT_KINDS];
    memset(&env, 0, sizeof(env));
    memset(nb, 0, sizeof(nb));
    env.call_id = call;
    env.deadline_ms = m->cfg.vote_timeout_ms;
    ccoip_pb_topology_plan *plan;
    if (optimized) {
        env.body_case = CCOIP_PB_MASTER_TO_PEER_BODY_OPTIMIZE_VERDICT;
        env.body.optimize_verdict.success = true;
        env.body.optimize_verdict.has_plan = true;
        plan = &env.body.optimize_verdict.plan;
    } else {
        env.body_case = CCOIP_PB_MASTER_TO_PEER_BODY_TOPOLOGY_PLAN;
        plan = &env.body.topology_plan;
    }
    plan->epoch = unchanged ? p->ring_epoch : m->topo.epoch;
    plan->unchanged = unchanged;
    uint64_t nn = 0;
    if (p->ring_size >= 2 && !unchanged) {
        /* Predecessor first, then successor (one entry when they coincide). */
        uint32_t who[2] = {p->pred, p->succ};
        for (uint32_t k = 0; k < 2; k++) {
            if (k == 1 && p->succ == p->pred) break;
            const m_peer *q = &m->sess.peers[who[k]];
            nb[nn].peer_id = q->id;
            nb[nn].peer_group = q->group;
            m_topo_fill_endpoints(q, eps[nn], &nb[nn].endpoints_count);
            nb[nn].endpoints = eps[nn];
            nn++;
        }
    }
    plan->neighbours = nb;
    plan->neighbours_count = nn;
    /* Who dials each link (§6.4, §8.6); an unchanged plan keeps the links as they are. */
    if (!unchanged) p->relay_succ = p->ring_size >= 2 && topo_link_relayed(m, slot, p->succ);
    if (p->ring_size >= 2 && !unchanged) {
        if (p->relay_succ) {
            plan->dial |= CCOIP_PB_DIAL_SUCC_RELAYED;
        } else if (topo_link_reversed(m, slot, p->succ)) {
            plan->dial |= CCOIP_PB_DIAL_SUCC_REVERSED;
        }
        if (topo_link_relayed(m, p->pred, slot)) {
            plan->dial |= CCOIP_PB_DIAL_PRED_RELAYED;
        } else if (topo_link_reversed(m, p->pred, slot)) {
            plan->dial |= CCOIP_PB_DIAL_PRED_REVERSED;
        }
        if ((plan->dial & (CCOIP_PB_DIAL_SUCC_RELAYED | CCOIP_PB_DIAL_PRED_RELAYED)) != 0)
            plan->relay_port = m->spl.relay_port;
    }
    uint8_t keys[3][CCOIP_AUTH_KEY_BYTES];
    if (ccoip_auth_on(&m->cfg.auth) && !unchanged) {
        m_auth_group_key(m, m->topo.epoch, p->group, keys[2]);
        plan->group_key.data = keys[2];
        plan->group_key.len = CCOIP_AUTH_KEY_BYTES;
    }
    if (p->ring_size >= 2 && ccoip_auth_on(&m->cfg.auth) && !unchanged) {
        /* The keys of this epoch's links pred -> p and p -> succ (docs/protocol.md §8.1). */
        m_auth_link_key(m, m->topo.epoch, m->sess.peers[p->pred].id, p->id, keys[0]);
        m_auth_link_key(m, m->topo.epoch, p->id, m->sess.peers[p->succ].id, keys[1]);
        plan->pred_key.data = keys[0];
        plan->pred_key.len = CCOIP_AUTH_KEY_BYTES;
        plan->succ_key.data = keys[1];
        plan->succ_key.len = CCOIP_AUTH_KEY_BYTES;
    }
    uint8_t tbl[CCOIP_ALGO_TABLE_BYTES];
    const ccoip_algo_table *tuned = m_algo_table_of(m, p->group);
    if (tuned != NULL && !unchanged) {
        /* The group's tuned table (§6.8.5): every member of the epoch holds the same. */
        ccoip_algo_table_encode(tuned, tbl);
        plan->algo_table.data = tbl;
        plan->algo_table.len = sizeof tbl;
    }
    plan->ring_count = topo_fill_ring(m, slot);
    plan->ring = m->ids;
    plan->has_world = true;
    m_world_sizes(m, p->group, &plan->world); /* prepared with include_phase by the caller */
    m_send(m, slot, &env);
}

/* Starts a p2p phase (§6.3/§6.4): a new epoch, rings, a plan to every member. */
static void topo_start_phase(ccoip_master *m, bool answer_votes)
{
    bool admit = answer_votes;
    for (uint32_t i = 0; i < m->sess.order_n; i++) {
        const m_peer *p = &m->sess.peers[m->sess.order[i]];
        if (p->state == MP_ACCEPTED && p->topo_voted && !p->topo_accept) admit = false;
    }
    m->topo.epoch++;
    /* An admit phase re-wires every group; a re-wire only the groups that lost their ring. */
    m->topo.n_phase_wait = 0;
    for (uint32_t i = 0; i < m->sess.order_n; i++) {
        m_peer *p = &m->sess.peers[m->sess.order[i]];
        p->in_phase = (p->state == MP_ACCEPTED && (answer_votes || p->rewire)) ||
                      (admit && p->state == MP_PENDING && p->topo_voted);
        p->reported = false;
        p->report_ok = false;
        if (p->in_phase) m->topo.n_phase_wait++;
    }
    for (uint32_t attempt = 0; attempt <= m->cfg.max_peers; attempt++) {
        uint32_t victim = topo_build_rings(m);
        if (victim == M_SLOT_NONE) break;
        m_evict(m, victim, CCOIP_PB_REASON_UNREACHABLE,
                "no ring avoids the links it cannot use; it reaches the fewest others");
    }
    m->topo.phase_failed = false;
    uint32_t members = 0;
    for (uint32_t i = 0; i < m->sess.order_n; i++) {
        if (m->sess.peers[m->sess.order[i]].in_phase) members++;
    }
    assert(members == m->topo.n_phase_wait);
    if (members == 0) {
        m_set_phase(m, MPH_NONE);
        m->topo.ring_healthy = true;
        return;
    }
    m_set_phase(m, admit ? MPH_ADMIT : MPH_REWIRE);
    m->topo.phase_start_ns = m->now;
    m->topo.phase_answers_votes = answer_votes;
    sm_log(&m->out, CCOIP_LOG_INFO, "master: epoch %U: %s phase with %u members", m->topo.epoch,
           admit ? "admit" : "re-wire", members);
    m_world_prepare(m, true);
    for (uint32_t i = 0; i < m->sess.order_n; i++) {
        uint32_t s = m->sess.order[i];
        m_peer *p = &m->sess.peers[s];
        if (!p->in_phase) continue;
        uint64_t call = 0;
        if (answer_votes && p->topo_voted) {
            call = p->topo_call;
            if (p->state == MP_ACCEPTED) m->topo.n_tv_acc--;
            p->topo_voted = false;
            p->topo_call = 0;
        }
        topo_send_plan(m, s, call, false, false);
    }
    if (answer_votes) m->topo.topo_timer = false;
}

/*
 * Whether a completed topology vote changes nothing (§6.3): every accepted voter said true (a
 * false asks for a re-wire), no pending peer voted (nobody to admit), and every accepted peer
 * holds a settled ring (its group's last phase succeeded and no member was lost or reported a
 * broken link since).
 */
static bool topo_vote_changes_nothing(const ccoip_master *m)
{
    if (m->sess.n_acc == 0 || !m->topo.ring_healthy) return false;
    for (uint32_t i = 0; i < m->sess.order_n; i++) {
        const m_peer *p = &m->sess.peers[m->sess.order[i]];
        if (p->state == MP_ACCEPTED && (p->rewire || p->ring_epoch == 0 || !p->topo_accept))
            return false;
        if (p->state == MP_PENDING && p->topo_voted && !p->in_phase) return false;
    }
    return true;
}

/* Answers every accepted voter with an `unchanged` plan: no epoch, no p2p phase (§6.3). */
static void topo_answer_unchanged(ccoip_master *m)
{
    sm_log(&m->out, CCOIP_LOG_INFO,
           "master: topology vote changes nothing: rings and epochs kept, no p2p phase");
    m_world_prepare(m, false);
    for (uint32_t i = 0; i < m->sess.order_n; i++) {
        uint32_t s = m->sess.order[i];
        m_peer *p = &m->sess.peers[s];
        if (p->state != MP_ACCEPTED || !p->topo_voted) continue;
        const uint64_t call = p->topo_call;
        m->topo.n_tv_acc--;
        p->topo_voted = false;
        p->topo_call = 0;
        topo_send_plan(m, s, call, false, true);
    }
    m->topo.topo_timer = false;
}

void m_topo_start_optimized_phase(ccoip_master *m)
{
    m->topo.epoch++;
    uint32_t members = 0;
    for (uint32_t i = 0; i < m->sess.order_n; i++) {
        m_peer *p = &m->sess.peers[m->sess.order[i]];
        p->in_phase = p->state == MP_ACCEPTED;
        p->reported = false;
        p->report_ok = false;
        if (p->in_phase) members++;
    }
    m->topo.n_phase_wait = members;
    m->topo.phase_failed = false;
    m_set_phase(m, MPH_REWIRE);
    m->topo.phase_start_ns = m->now;
    m->topo.phase_answers_votes = false;
    sm_log(&m->out, CCOIP_LOG_INFO, "master: epoch %U: optimized re-wire phase with %u members",
           m->topo.epoch, members);
    m_world_prepare(m, true);
    for (uint32_t i = 0; i < m->sess.order_n; i++) {
        uint32_t s = m->sess.order[i];
        m_peer *p = &m->sess.peers[s];
        if (!p->in_phase) continue;
        topo_send_plan(m, s, p->opt_call, true, false);
        p->opt_call = 0;
        m_peer_set_opt(p, MO_NONE);
    }
}

static void topo_conclude(ccoip_master *m)
{
    bool success = !m->topo.phase_failed;
    if (m->topo.n_phase_wait > 0) {
        /* A member was lost (evicted, closed, left): the phase cannot succeed, and members that
         * dial or await the lost one would never report. Fail it now (§6.4): the members that
         * have not reported get the verdict as a notification. Likewise when it timed out with
         * half or fewer of its members reported (topo_phase_expired). */
        sm_log(&m->out, CCOIP_LOG_WARN,
               "master: epoch %U: a member was lost or the phase timed out, failing the p2p "
               "phase (%u members had not reported)",
               m->topo.epoch, m->topo.n_phase_wait);
    }
    for (uint32_t i = 0; i < m->sess.order_n; i++) {
        const m_peer *p = &m->sess.peers[m->sess.order[i]];
        if (p->in_phase && !p->report_ok) success = false;
    }
    for (uint32_t i = 0; i < m->sess.order_n; i++) {
        m_peer *p = &m->sess.peers[m->sess.order[i]];
        if (!p->in_phase) continue;
        if (success && p->state == MP_PENDING) {
            m_peer_set_state(m, p, MP_ACCEPTED); /* n_acc, n_tv_acc */
        }
        if (success) {
            p->rewire = false;
            p->ring_epoch = m->topo.epoch;
        }
    }
    if (!success) {
        /* Every group of the phase re-wires again (pending members stay pending). */
        for (uint32_t i = 0; i < m->sess.order_n; i++) {
            const m_peer *p = &m->sess.peers[m->sess.order[i]];
            if (p->in_phase && p->state == MP_ACCEPTED) m_mark_rewire(m, p->group);
        }
    }
    m_world_prepare(m, false);
    for (uint32_t i = 0; i < m->sess.order_n; i++) {
        uint32_t s = m->sess.order[i];
        m_peer *p = &m->sess.peers[s];
        if (!p->in_phase) continue;
        ccoip_pb_master_to_peer env;
        memset(&env, 0, sizeof(env));
        env.call_id = p->report_call; /* 0 (a notification) when it has not reported */
        if (!p->reported) p->early_epoch = m->topo.epoch;
        env.body_case = CCOIP_PB_MASTER_TO_PEER_BODY_TOPOLOGY_VERDICT;
        ccoip_pb_topology_verdict *v = &env.body.topology_verdict;
        v->epoch = m->topo.epoch;
        v->success = success;
        if (success) {
            v->ring_count = topo_fill_ring(m, s);
            v->ring = m->ids;
        }
        v->has_world = true;
        m_world_sizes(m, p->group, &v->world);
        m_send(m, s, &env);
        if (!success && p->state == MP_PENDING) p->topo_voted = false; /* it votes again */
    }
    for (uint32_t i = 0; i < m->sess.order_n; i++) {
        m_peer *p = &m->sess.peers[m->sess.order[i]];
        p->in_phase = false;
        p->reported = false;
        p->report_ok = false;
        p->report_call = 0;
    }
    m->topo.n_phase_wait = 0;
    /* Healthy iff no accepted peer still needs a re-wire (a loss outside the phase counts). */
    m->topo.ring_healthy = true;
    for (uint32_t i = 0; i < m->sess.order_n; i++) {
        const m_peer *p = &m->sess.peers[m->sess.order[i]];
        if (p->state == MP_ACCEPTED && p->rewire) m->topo.ring_healthy = false;
    }
    m_set_phase(m, MPH_NONE);
    sm_log(&m->out, CCOIP_LOG_INFO, "master: epoch %U: p2p phase %s", m->topo.epoch,
           success ? "succeeded" : "failed");
}

void m_topo_on_p2p(ccoip_master *m, uint32_t slot, uint64_t call, const ccoip_pb_p2p_established *r)
{
    m_peer *p = m_peer_at(m, slot);
    if (p->early_epoch != 0 && r->epoch == p->early_epoch) {
        /* Crossed the verdict that failed its phase early: the peer has its answer. */
        p->early_epoch = 0;
        return;
    }
    if (m->topo.phase == MPH_NONE || !p->in_phase || p->reported || r->epoch != m->topo.epoch) {
        m_evict(m, slot, CCOIP_PB_REASON_ILLEGAL_MESSAGE, "p2p report outside its phase");
        return;
    }
    p->reported = true;
    m->topo.n_phase_wait--;
    p->report_call = call;
    p->report_ok = r->success && r->unreachable_peers_count == 0;
    for (uint64_t i = 0; i < r->unreachable_peers_count; i++) {
        uint32_t to = m_slot_by_id(m, r->unreachable_peers[i]);
        if (to != M_SLOT_NONE && to != slot) {
            const m_peer *q = &m->sess.peers[to];
            if ((p->relay_succ && p->succ == to) || (q->relay_succ && q->succ == slot)) {
                p->relay_failed = true; /* it cannot use the relay: never planned again */
                sm_log(&m->out, CCOIP_LOG_WARN, "master: peer %U cannot use the relay", p->id);
            }
            m_set_unreachable(m, slot, to);
            m->sess.peers[to].no_inbound = true; /* its next links are dialled from it */
            sm_log(&m->out, CCOIP_LOG_WARN, "master: peer %U cannot reach peer %U", p->id,
                   m->sess.peers[to].id);
        }
    }
}

void m_topo_on_loss(ccoip_master *m, uint32_t slot)
{
    m_peer *p = m_peer_at(m, slot);
    if (p->in_phase) {
        m->topo.phase_failed = true;
        p->in_phase = false;
        if (!p->reported) m->topo.n_phase_wait--;
    }
    if (p->state == MP_ACCEPTED) m_mark_rewire(m, p->group);
}

#ifdef CCOIP_SLOW_CHECKS
/* The counters kept on state changes agree with a walk (debug builds only). */
static void topo_check_counters(const ccoip_master *m)
{
    uint32_t acc = 0, tv = 0, pv = 0;
    for (uint32_t i = 0; i < m->sess.order_n; i++) {
        const m_peer *p = &m->sess.peers[m->sess.order[i]];
        if (p->state == MP_ACCEPTED) {
            acc++;
            if (p->topo_voted) tv++;
        }
        if (p->pend_voted) pv++;
    }
    assert(acc == m->sess.n_acc && tv == m->topo.n_tv_acc && pv == m->topo.n_pend_voted);
}
#endif

bool m_topo_progress(ccoip_master *m)
{
#ifdef CCOIP_SLOW_CHECKS
    topo_check_counters(m);
#endif
    bool changed = topo_pending_progress(m);
    if (m->topo.phase != MPH_NONE) {
        /* Wait for every report, unless a member was lost: then the phase fails at once. */
        if (m->topo.n_phase_wait > 0 && !m->topo.phase_failed) return changed;
        topo_conclude(m);
        return true;
    }
    if (m->sess.n_acc == 0) m->topo.ring_healthy = true;
    if (!m->topo.ring_healthy) {
        /* A member is gone or a link broke: nothing of the affected groups' epoch completes
         * (§6.9); the other groups keep their rings, epochs and running ops. */
        bool any = false;
        for (uint32_t i = 0; i < m->sess.order_n && !any; i++) {
            const m_peer *p = &m->sess.peers[m->sess.order[i]];
            any = p->state == MP_ACCEPTED && p->rewire;
        }
        if (!any) m_mark_rewire_all(m);
        uint32_t *groups = m->sync.tmp_d, ng = 0;
        for (uint32_t i = 0; i < m->sess.order_n; i++) {
            const m_peer *p = &m->sess.peers[m->sess.order[i]];
            if (p->state != MP_ACCEPTED || !p->rewire) continue;
            bool seen = false;
            for (uint32_t k = 0; k < ng && !seen; k++)
                seen = groups[k] == p->group;
            if (!seen) groups[ng++] = p->group;
        }
        for (uint32_t k = 0; k < ng; k++)
            m_coll_abort_group(m, groups[k], CCOIP_PB_REASON_EPOCH_CHANGED);
        topo_start_phase(m, false);
        return true;
    }
    if (m_topo_vote_complete(m)) {
        /* Nothing to admit and every ring settled: answer at once, even while collectives
         * run, since no epoch changes (§6.3). */
        if (topo_vote_changes_nothing(m)) {
            topo_answer_unchanged(m);
            return true;
        }
        if (m_coll_any_running(m)) return changed; /* admit once the running ops finish */
        topo_start_phase(m, true);
        return true;
    }
    return changed;
}

void m_topo_fail_vote(ccoip_master *m, uint32_t slot, int32_t reason, const char *detail)
{
    m_peer *p = m_peer_at(m, slot);
    if (!p->topo_voted) return;
    m_answer_status(m, slot, p->topo_call, CCOIP_PB_STATUS_INVALID_USAGE, reason, detail);
    p->topo_voted = false;
    p->topo_call = 0;
    if (p->state == MP_ACCEPTED) m->topo.n_tv_acc--;
    if (m->topo.n_tv_acc == 0) m->topo.topo_timer = false;
}

void m_topo_fail_pending_query(ccoip_master *m, uint32_t slot, int32_t reason, const char *detail)
{
    m_peer *p = m_peer_at(m, slot);
    if (!p->pend_voted) return;
    m_answer_status(m, slot, p->pend_call, CCOIP_PB_STATUS_INVALID_USAGE, reason, detail);
    p->pend_voted = false;
    p->pend_call = 0;
    m->topo.n_pend_voted--;
    if (m->topo.n_pend_voted == 0) m->topo.pend_timer = false;
}

/*
 * A vote of every accepted peer (topology, pending query) timed out with `voters` of them in it
 * (docs/protocol.md §6.10): a strict majority evicts the accepted peers that did not vote (as
 * stragglers); otherwise (half or fewer voted) nobody is evicted and every voter's ballot fails
 * with INVALID_USAGE / REASON_VOTE_UNMATCHED. A minority never evicts a majority.
 */
static void topo_vote_expired(ccoip_master *m, bool pending_query)
{
    const uint32_t voters = pending_query ? m->topo.n_pend_voted : m->topo.n_tv_acc;
    const bool evict = m_majority(voters, m->sess.n_acc);
    if (!evict) {
        sm_log(&m->out, CCOIP_LOG_WARN,
               "master: %s vote timed out with %u of %u accepted peers: failing the voters",
               pending_query ? "pending-peers" : "topology", voters, m->sess.n_acc);
    }
    uint64_t last = 0;
    for (uint32_t s = m_next_by_id(m, 0); s != M_SLOT_NONE; s = m_next_by_id(m, last)) {
        const m_peer *p = &m->sess.peers[s];
        last = p->id;
        if (p->state != MP_ACCEPTED) continue;
        const bool voted = pending_query ? p->pend_voted : p->topo_voted;
        if (evict && !voted) {
            m_evict(m, s, CCOIP_PB_REASON_VOTE_TIMEOUT,
                    pending_query ? "did not ask for pending peers"
                                  : "did not vote on the topology");
        } else if (!evict && voted && pending_query) {
            m_topo_fail_pending_query(m, s, CCOIP_PB_REASON_VOTE_UNMATCHED,
                                      "half or fewer of the peers asked in time");
        } else if (!evict && voted) {
            m_topo_fail_vote(m, s, CCOIP_PB_REASON_VOTE_UNMATCHED,
                             "half or fewer of the peers voted in time");
        }
    }
    m->mm.dirty = true;
}

/*
 * The p2p phase's deadline (docs/protocol.md §6.4, §6.10): `vote_timeout_ms` after its plans. A
 * minority never evicts a majority: the members that did not report are evicted only when those
 * that did are a strict majority of the phase's members. Otherwise nobody is evicted and the
 * phase fails (phase_failed: topo_conclude answers the reporters and notifies the others, and
 * the master re-wires). A member whose connection closes is lost at once (m_topo_on_loss).
 */
static void topo_phase_expired(ccoip_master *m)
{
    uint32_t members = 0, reported = 0;
    for (uint32_t i = 0; i < m->sess.order_n; i++) {
        const m_peer *p = &m->sess.peers[m->sess.order[i]];
        if (!p->in_phase) continue;
        members++;
        if (p->reported) reported++;
    }
    if (!m_majority(reported, members)) {
        sm_log(&m->out, CCOIP_LOG_WARN,
               "master: epoch %U: p2p phase timed out with %u of %u members reported: failing it",
               m->topo.epoch, reported, members);
        m->topo.phase_failed = true;
        return;
    }
    uint64_t last = 0;
    for (uint32_t s = m_next_by_id(m, 0); s != M_SLOT_NONE; s = m_next_by_id(m, last)) {
        last = m->sess.peers[s].id;
        if (m->sess.peers[s].in_phase && !m->sess.peers[s].reported) {
            m_evict(m, s, CCOIP_PB_REASON_VOTE_TIMEOUT, "did not report its p2p links");
        }
    }
}

void m_topo_timers(ccoip_master *m)
{
    uint64_t to = sm_ms(m->cfg.vote_timeout_ms);
    if (m->topo.topo_timer && m->now >= sm_add_sat(m->topo.topo_first_ns, to)) {
        m->topo.topo_timer = false;
        topo_vote_expired(m, false);
    }
    if (m->topo.pend_timer && m->now >= sm_add_sat(m->topo.pend_first_ns, to)) {
        m->topo.pend_timer = false;
        topo_vote_expired(m, true);
    }
    if (m->topo.phase != MPH_NONE && m->now >= sm_add_sat(m->topo.phase_start_ns, to)) {
        topo_phase_expired(m);
    }
}

uint64_t m_topo_deadline(const ccoip_master *m)
{
    uint64_t d = CCOIP_NO_DEADLINE, to = sm_ms(m->cfg.vote_timeout_ms);
    if (m->topo.topo_timer) d = sm_add_sat(m->topo.topo_first_ns, to);
    if (m->topo.pend_timer && sm_add_sat(m->topo.pend_first_ns, to) < d) {
        d = sm_add_sat(m->topo.pend_first_ns, to);
    }
    if (m->topo.phase != MPH_NONE && sm_add_sat(m->topo.phase_start_ns, to) < d) {
        d = sm_add_sat(m->topo.phase_start_ns, to);
    }
    return d;
}

bool m_topo_init(ccoip_master *m)
{
    const uint64_t np = m->cfg.max_peers;
    m->topo.epoch = 0;
    m->topo.ring_healthy = true;
    m->topo.phase = MPH_NONE;
    m->topo.unreach = calloc((size_t)((np * np + 7u) / 8u), 1);
    m->topo.slot_links = calloc((size_t)np, 1);
    return m->topo.unreach != NULL && m->topo.slot_links != NULL;
}

void m_topo_deinit(ccoip_master *m)
{
    free(m->topo.unreach);
    free(m->topo.slot_links);
}
