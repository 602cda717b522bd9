/*
 * master_optimize.c — topology optimization on the master (docs/protocol.md
 * §6.6, docs/core.md §2.6): a global vote, probe requests for the directed
 * links of each group not measured yet (cached per pair until a peer
 * leaves), bandwidth reports, the ring of each group solved as an asymmetric
 * TSP (core/ccoip_tsp.h), installed as a new epoch without admitting anyone.
 */
#include <stdlib.h>
#include <string.h>

#include "ccoip_tsp.h"
#include "master_internal.h"

static uint64_t *opt_bw(ccoip_master *m, uint32_t from, uint32_t to)
{
    return &m->opt.bw[(uint64_t)from * m->cfg.max_peers + to];
}

void m_opt_on_vote(ccoip_master *m, uint32_t slot, uint64_t call)
{
    m_peer *p = m_peer_at(m, slot);
    if (p->opt_st != MO_NONE) {
        m_answer_status(m, slot, call, CCOIP_PB_STATUS_INVALID_USAGE,
                        CCOIP_PB_REASON_ILLEGAL_MESSAGE, "an optimization is already running");
        return;
    }
    m_peer_set_opt(p, MO_VOTED);
    m->opt.opt_any = true;
    m->mm.dirty = true;
    p->opt_call = call;
    p->opt_failed = false;
    p->opt_late = false;
    if (!m->opt.opt_timer) {
        m->opt.opt_timer = true;
        m->opt.opt_first_ns = m->now;
    }
}

void m_opt_drop_vote(ccoip_master *m, uint32_t slot)
{
    m_peer *p = m_peer_at(m, slot);
    if (p->opt_st != MO_VOTED) return;
    m_peer_set_opt(p, MO_NONE);
    p->opt_call = 0;
    bool any = false;
    for (uint32_t k = 0; k < m->sess.order_n && !any; k++)
        any = m->sess.peers[m->sess.order[k]].opt_st != MO_NONE;
    if (!any) m->opt.opt_timer = false; /* the vote's deadline goes with its last ballot */
}

void m_opt_fail_vote(ccoip_master *m, uint32_t slot, int32_t reason, const char *detail)
{
    m_peer *p = m_peer_at(m, slot);
    if (p->opt_st != MO_VOTED) return;
    m_answer_status(m, slot, p->opt_call, CCOIP_PB_STATUS_INVALID_USAGE, reason, detail);
    m_opt_drop_vote(m, slot);
}

/* Answers call of slot with optimize_verdict { success = false }. */
static void opt_send_failure(ccoip_master *m, uint32_t slot, uint64_t call)
{
    ccoip_pb_master_to_peer env;
    memset(&env, 0, sizeof(env));
    env.call_id = call;
    env.body_case = CCOIP_PB_MASTER_TO_PEER_BODY_OPTIMIZE_VERDICT;
    env.body.optimize_verdict.success = false;
    m_send(m, slot, &env);
}

void m_opt_on_report(ccoip_master *m, uint32_t slot, const ccoip_pb_bandwidth_report *r)
{
    m_peer *p = m_peer_at(m, slot);
    if (p->opt_st == MO_NONE && p->opt_late) return; /* its round failed at the deadline */
    if (p->opt_st != MO_PROBING) {
        m_evict(m, slot, CCOIP_PB_REASON_ILLEGAL_MESSAGE, "bandwidth report outside a probe phase");
        return;
    }
    for (uint64_t i = 0; i < r->samples_count; i++) {
        const ccoip_pb_bandwidth_sample *smp = &r->samples[i];
        uint32_t to = m_slot_by_id(m, smp->to_peer);
        if (to == M_SLOT_NONE || to == slot) continue; /* gone meanwhile */
        if (smp->unreachable || smp->bytes == 0) {
            p->opt_failed = true; /* not cached: the retry measures it again */
            /* Unreachable: it likely accepts no connections (a peer behind NAT); the retry
             * measures the link from it instead, and its ring links are dialled from it. */
            if (smp->unreachable) m->sess.peers[to].no_inbound = true;
            sm_log(&m->out, CCOIP_LOG_WARN, "master: probe %U -> %U failed", p->id, smp->to_peer);
            continue;
        }
        *opt_bw(m, slot, to) = ccoip_tsp_link_cost(smp->bytes, smp->duration_us);
        m->topo.slot_links[slot] |= M_LINK_BW;
        m->topo.slot_links[to] |= M_LINK_BW;
    }
}

void m_opt_on_done(ccoip_master *m, uint32_t slot, uint64_t call)
{
    m_peer *p = m_peer_at(m, slot);
    if (p->opt_st == MO_NONE && p->opt_late) {
        /* Its round failed at the deadline while it was probing: the failure answers it now. */
        p->opt_late = false;
        opt_send_failure(m, slot, call);
        return;
    }
    if (p->opt_st != MO_PROBING) {
        m_evict(m, slot, CCOIP_PB_REASON_ILLEGAL_MESSAGE, "optimize_done outside a probe phase");
        return;
    }
    m_peer_set_opt(p, MO_DONE);
    p->opt_call = call;
}

void m_opt_on_loss(ccoip_master *m, uint32_t slot)
{
    /* Measurements to and from a leaving peer are forgotten (its slot may be reused); a slot
     * that never had one skips the walk (see master_clear_unreachable). */
    if ((m->topo.slot_links[slot] & M_LINK_BW) == 0) return;
    m->topo.slot_links[slot] = (uint8_t)(m->topo.slot_links[slot] & ~M_LINK_BW);
    for (uint32_t o = 0; o < m->cfg.max_peers; o++) {
        *opt_bw(m, slot, o) = 0;
        *opt_bw(m, o, slot) = 0;
    }
}

/* Every accepted peer voted: ask each for the links of its group not measured yet. */
static void opt_request_probes(ccoip_master *m)
{
    for (uint32_t k = 0; k < m->sess.order_n; k++) {
        uint32_t s = m->sess.order[k];
        m_peer *p = &m->sess.peers[s];
        if (p->state != MP_ACCEPTED) continue;
        uint64_t n = 0;
        for (uint32_t j = 0; j < m->sess.order_n; j++) {
            uint32_t t = m->sess.order[j];
            const m_peer *q = &m->sess.peers[t];
            if (t == s || q->state != MP_ACCEPTED || q->group != p->group) continue;
            /* A peer that refused a dial is not probed: the link is measured from it (§6.6). */
            if (*opt_bw(m, s, t) != 0 || m_unreachable(m, s, t) || q->no_inbound) continue;
            ccoip_pb_probe_target *tg = &m->opt.targets[n++];
            memset(tg, 0, sizeof(*tg));
            tg->peer_id = q->id;
            tg->has_endpoint = true;
            m_peer_endpoint(q, CCOIP_PB_ENDPOINT_KIND_BANDWIDTH, &tg->endpoint);
            tg->probe_bytes = m->cfg.probe_bytes;
        }
        ccoip_pb_master_to_peer env;
        memset(&env, 0, sizeof(env));
        env.call_id = p->opt_call;
        env.body_case = CCOIP_PB_MASTER_TO_PEER_BODY_PROBE_REQUESTS;
        env.body.probe_requests.epoch = m->topo.epoch;
        env.body.probe_requests.targets = m->opt.targets;
        env.body.probe_requests.targets_count = n;
        m_send(m, s, &env);
        m_peer_set_opt(p, MO_PROBING);
        p->opt_call = 0;
    }
    m->opt.opt_first_ns = m->now; /* the probe phase gets its own deadline */
}

static void opt_answer_failure(ccoip_master *m)
{
    for (uint32_t k = 0; k < m->sess.order_n; k++) {
        uint32_t s = m->sess.order[k];
        m_peer *p = &m->sess.peers[s];
        if (p->opt_st != MO_DONE) continue;
        opt_send_failure(m, s, p->opt_call);
        m_peer_set_opt(p, MO_NONE);
        p->opt_call = 0;
    }
    sm_log(&m->out, CCOIP_LOG_WARN, "master: topology optimization failed");
}

/* Solves every group's ring; false when a ring would need an unusable or unmeasured link. */
static bool opt_solve(ccoip_master *m)
{
    uint32_t *mem = m->tmp_a;
    bool have_last = false;
    uint32_t last_group = 0;
    for (;;) {
        bool found = false;
        uint32_t group = 0;
        for (uint32_t i = 0; i < m->sess.order_n; i++) {
            const m_peer *p = &m->sess.peers[m->sess.order[i]];
            if (p->state != MP_ACCEPTED || (have_last && p->group <= last_group)) continue;
            if (!found || p->group < group) {
                group = p->group;
                found = true;
            }
        }
        if (!found) return true;
        have_last = true;
        last_group = group;
        uint32_t n = 0;
        for (uint32_t i = 0; i < m->sess.order_n; i++) {
            const m_peer *p = &m->sess.peers[m->sess.order[i]];
            if (p->state == MP_ACCEPTED && p->group == group) mem[n++] = m->sess.order[i];
        }
        for (uint32_t i = 0; i < n; i++) {
            for (uint32_t j = 0; j < n; j++) {
                uint64_t c = 0;
                if (i != j) {
                    /* Unmeasured because j accepts no connections: the reverse measurement
                     * stands in (a link carries data both ways whoever dials it, §6.4). */
                    c = *opt_bw(m, mem[i], mem[j]);
                    if (c == 0 && m->sess.peers[mem[j]].no_inbound) c = *opt_bw(m, mem[j], mem[i]);
                    if (m_unreachable(m, mem[i], mem[j]) && m_unreachable(m, mem[j], mem[i])) {
                        /* Neither end can dial: only through the master's relay (§8.6), the
                         * last resort. */
                        c = m->spl.relay_port != 0 ? M_RELAY_LINK_COST : CCOIP_TSP_COST_MAX;
                    } else if (c == 0) {
                        c = CCOIP_TSP_COST_MAX;
                    }
                }
                m->opt.tsp_cost[(uint64_t)i * n + j] = c;
            }
        }
        uint64_t cost = 0;
        if (ccoip_tsp_solve(n, m->opt.tsp_cost, 0, m->opt.tsp_work, m->opt.tsp_work_bytes,
                            m->opt.tsp_tour, &cost) != pcclSuccess) {
            return false;
        }
        if (n > 1 && cost >= CCOIP_TSP_COST_MAX) return false;
        sm_log(&m->out, CCOIP_LOG_INFO, "master: group %u optimized ring of %u, cost %U", group, n,
               cost);
        /* The tour (indices into mem) becomes the group's ring. */
        for (uint32_t i = 0; i < n; i++) {
            m_peer *p = &m->sess.peers[mem[m->opt.tsp_tour[i]]];
            p->rank = i;
            p->ring_size = n;
            p->succ = mem[m->opt.tsp_tour[(i + 1u) % n]];
            p->pred = mem[m->opt.tsp_tour[(i + n - 1u) % n]];
        }
    }
}

bool m_opt_progress(ccoip_master *m)
{
    uint32_t accepted = 0, voted = 0, probing = 0, done = 0;
    bool failed = false;
    if (!m->opt.opt_any) return false; /* nobody voted since the last idle pass */
    for (uint32_t k = 0; k < m->sess.order_n; k++) {
        const m_peer *p = &m->sess.peers[m->sess.order[k]];
        if (p->state != MP_ACCEPTED) continue;
        accepted++;
        if (p->opt_st == MO_VOTED) voted++;
        if (p->opt_st == MO_PROBING) probing++;
        if (p->opt_st == MO_DONE) {
            done++;
            if (p->opt_failed) failed = true;
        }
    }
    if (voted == 0 && probing == 0 && done == 0) {
        m->opt.opt_any = false;
        return false;
    }
    if (voted > 0 && voted == accepted) {
        opt_request_probes(m);
        return true;
    }
    if (done == 0 || probing > 0) return false;
    /* Every participant reported. Peers admitted meanwhile take no part: their links are
     * unmeasured, so the solve fails and the retry measures them. */
    m->opt.opt_timer = false;
    if (failed) {
        opt_answer_failure(m);
        return true;
    }
    /* Install only on an idle, healthy topology with no collective running (a re-wire). */
    if (m->topo.phase != MPH_NONE || !m->topo.ring_healthy || m_coll_any_running(m)) return false;
    if (!opt_solve(m)) {
        /* The rings may be half-rewritten: re-wire them (all groups) the ordinary way. */
        m_mark_rewire_all(m);
        opt_answer_failure(m);
        return true;
    }
    m_topo_start_optimized_phase(m);
    return true;
}

/*
 * The optimization's deadline (docs/protocol.md §6.6, §6.10): `vote_timeout_ms` after the vote's
 * first ballot, then after the probe requests. A minority never evicts a majority: the accepted
 * peers that did not vote, or the participants still probing, are evicted only when the voters
 * are a strict majority of the accepted peers, or those done a strict majority of the
 * participants. Otherwise nobody is evicted: every voter's ballot fails (INVALID_USAGE /
 * REASON_VOTE_UNMATCHED), or the round fails: optimize_verdict { success = false } answers the
 * participants done now and those still probing at their optimize_done (opt_late: they have no
 * call open to answer before).
 */
void m_opt_timers(ccoip_master *m)
{
    if (!m->opt.opt_timer ||
        m->now < sm_add_sat(m->opt.opt_first_ns, sm_ms(m->cfg.vote_timeout_ms))) {
        return;
    }
    m->opt.opt_timer = false;
    bool probing = false;
    for (uint32_t k = 0; k < m->sess.order_n; k++) {
        if (m->sess.peers[m->sess.order[k]].opt_st == MO_PROBING) probing = true;
    }
    uint32_t members = 0, did = 0;
    for (uint32_t k = 0; k < m->sess.order_n; k++) {
        const m_peer *p = &m->sess.peers[m->sess.order[k]];
        if (p->state != MP_ACCEPTED) continue;
        if (probing && (p->opt_st == MO_PROBING || p->opt_st == MO_DONE)) {
            members++;
            if (p->opt_st == MO_DONE) did++;
        } else if (!probing) {
            members++;
            if (p->opt_st == MO_VOTED) did++;
        }
    }
    if (!m_majority(did, members)) {
        sm_log(&m->out, CCOIP_LOG_WARN,
               "master: topology optimization %s timed out with %u of %u peers: failing it",
               probing ? "probes" : "vote", did, members);
        for (uint32_t k = 0; k < m->sess.order_n; k++) {
            const uint32_t s = m->sess.order[k];
            m_peer *p = &m->sess.peers[s];
            if (p->state != MP_ACCEPTED) continue;
            if (probing && p->opt_st == MO_PROBING) {
                m_peer_set_opt(p, MO_NONE);
                p->opt_late = true;
            } else if (!probing) {
                m_opt_fail_vote(m, s, CCOIP_PB_REASON_VOTE_UNMATCHED,
                                "half or fewer of the peers voted the optimization in time");
            }
        }
        if (probing) opt_answer_failure(m);
        return;
    }
    uint64_t last = 0;
    for (uint32_t s = m_next_by_id(m, 0); s != M_SLOT_NONE; s = m_next_by_id(m, last)) {
        const m_peer *p = &m->sess.peers[s];
        last = p->id;
        if (p->state != MP_ACCEPTED) continue;
        if (probing ? p->opt_st == MO_PROBING : p->opt_st == MO_NONE) {
            m_evict(m, s, CCOIP_PB_REASON_VOTE_TIMEOUT,
                    probing ? "did not finish its bandwidth probes"
                            : "did not vote the topology optimization");
        }
    }
}

uint64_t m_opt_deadline(const ccoip_master *m)
{
    return m->opt.opt_timer ? sm_add_sat(m->opt.opt_first_ns, sm_ms(m->cfg.vote_timeout_ms))
                            : CCOIP_NO_DEADLINE;
}

bool m_opt_init(ccoip_master *m)
{
    m_optimization *o = &m->opt;
    const uint64_t np = m->cfg.max_peers;
    o->bw = calloc((size_t)(np * np), sizeof(uint64_t));
    o->tsp_cost = calloc((size_t)(np * np), sizeof(uint64_t));
    o->tsp_tour = calloc((size_t)np, sizeof(uint32_t));
    o->tsp_work_bytes = ccoip_tsp_workspace_bytes((uint32_t)np);
    o->tsp_work = malloc((size_t)o->tsp_work_bytes);
    o->targets = calloc((size_t)np, sizeof(ccoip_pb_probe_target));
    return o->bw != NULL && o->tsp_cost != NULL && o->tsp_tour != NULL && o->tsp_work != NULL &&
           o->targets != NULL;
}

void m_opt_deinit(ccoip_master *m)
{
    free(m->opt.bw);
    free(m->opt.tsp_cost);
    free(m->opt.tsp_tour);
    free(m->opt.tsp_work);
    free(m->opt.targets);
}
