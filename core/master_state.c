/*
 * master_state.c — shared-state synchronization on the master
 * (docs/protocol.md §6.7, docs/core.md §2.5): per peer group, a vote of
 * every accepted member, the revision rule, the election of the popular key
 * set and content, distributor assignment by load, and the completion vote.
 */
#include <stdlib.h>
#include <string.h>

#include "master_internal.h"

static m_skey *sync_keys(ccoip_master *m, uint32_t slot)
{
    return &m->sync.skeys[(uint64_t)slot * m->cfg.max_state_keys];
}

static m_sgroup *sync_group(ccoip_master *m, uint32_t group, bool create)
{
    m_sgroup *free_g = NULL;
    for (uint32_t i = 0; i < m->sync.sg_hi; i++) {
        m_sgroup *g = &m->sync.sgroups[i];
        if (g->used && g->group == group) return g;
        if (!g->used && free_g == NULL) free_g = g;
    }
    if (create && free_g == NULL && m->sync.sg_hi < m->cfg.max_peers)
        free_g = &m->sync.sgroups[m->sync.sg_hi];
    if (!create) return NULL;
    if (free_g == NULL) {
        /* Reuse the entry of a group without members and without a sync in flight. */
        for (uint32_t i = 0; i < m->sync.sg_hi && free_g == NULL; i++) {
            m_sgroup *g = &m->sync.sgroups[i];
            bool members = false;
            for (uint32_t k = 0; k < m->sess.order_n; k++) {
                if (m->sess.peers[m->sess.order[k]].group == g->group) members = true;
            }
            if (!members && !g->transfer) free_g = g;
        }
    }
    if (free_g == NULL) return NULL;
    if ((uint32_t)(free_g - m->sync.sgroups) >= m->sync.sg_hi)
        m->sync.sg_hi = (uint32_t)(free_g - m->sync.sgroups) + 1u;
    memset(free_g, 0, sizeof(*free_g));
    free_g->used = true;
    free_g->group = group;
    return free_g;
}

/* Answers the vote with a refusal and evicts the voter (a program bug, DESIGN.md §3). */
static void sync_refuse_evict(ccoip_master *m, uint32_t slot, int32_t reason, const char *why)
{
    m_sync_fail_vote(m, slot, reason, why);
    m_evict(m, slot, reason, why);
}

void m_sync_on_vote(ccoip_master *m, uint32_t slot, uint64_t call,
                    const ccoip_pb_shared_state_sync_vote *v)
{
    m_peer *p = m_peer_at(m, slot);
    if (p->sync_st != MS_NONE) {
        m_answer_status(m, slot, call, CCOIP_PB_STATUS_INVALID_USAGE,
                        CCOIP_PB_REASON_ILLEGAL_MESSAGE, "a shared-state sync is already running");
        return;
    }
    if (!ccoip_pb_sync_strategy_is_known(v->strategy) || v->keys_count > m->cfg.max_state_keys) {
        m_evict(m, slot, CCOIP_PB_REASON_ILLEGAL_MESSAGE, "sync vote: strategy or key count");
        return;
    }
    m_skey *ks = sync_keys(m, slot);
    for (uint64_t i = 0; i < v->keys_count; i++) {
        const ccoip_pb_shared_state_key *k = &v->keys[i];
        bool bad = k->name.len == 0 || k->name.len >= CCOIP_STATE_NAME_MAX ||
                   !ccoip_pb_data_type_is_known(k->dtype) || k->hash_type != 0;
        if (!bad && i > 0) {
            /* Keys arrive sorted bytewise by name, without duplicates. */
            const m_skey *prev = &ks[i - 1u];
            uint64_t n = prev->name_len < k->name.len ? prev->name_len : k->name.len;
            int c = memcmp(prev->name, k->name.data, (size_t)n);
            bad = c > 0 || (c == 0 && prev->name_len >= k->name.len);
        }
        if (bad) {
            m_evict(m, slot, CCOIP_PB_REASON_ILLEGAL_MESSAGE, "sync vote: invalid key");
            return;
        }
        m_skey *d = &ks[i];
        memset(d, 0, sizeof(*d));
        memcpy(d->name, k->name.data, (size_t)k->name.len);
        d->name_len = (uint32_t)k->name.len;
        d->hash = k->hash;
        d->dtype = k->dtype;
        d->count = k->count;
        d->aci = k->allow_content_inequality;
    }
    m_sgroup *g = sync_group(m, p->group, true);
    if (g == NULL) {
        m_answer_status(m, slot, call, CCOIP_PB_STATUS_INVALID_USAGE,
                        CCOIP_PB_REASON_RESOURCE_LIMIT, "too many peer groups");
        return;
    }
    m_peer_set_sync(p, MS_VOTED);
    p->sync_call = call;
    p->sync_rev = v->revision;
    p->sync_strategy = v->strategy;
    p->sync_nkeys = (uint32_t)v->keys_count;
    p->sync_ok = false;
    if (g->has_next && v->revision > g->next) {
        sync_refuse_evict(m, slot, CCOIP_PB_REASON_REVISION_INCREMENT_VIOLATION,
                          "shared-state revision skipped");
        return;
    }
    if (!g->transfer && !g->has_first) {
        g->has_first = true;
        g->first_ns = m->now;
    }
    m->mm.dirty = true;
}

void m_sync_drop_vote(ccoip_master *m, uint32_t slot)
{
    m_peer *p = m_peer_at(m, slot);
    if (p->sync_st != MS_VOTED) return;
    m_peer_set_sync(p, MS_NONE);
    p->sync_call = 0;
    m_sgroup *g = sync_group(m, p->group, false);
    if (g == NULL || g->transfer) return;
    /* The vote's deadline goes when its last ballot does. */
    bool voters = false;
    for (uint32_t k = 0; k < m->sess.order_n && !voters; k++) {
        const m_peer *q = &m->sess.peers[m->sess.order[k]];
        voters = q->group == p->group && q->state == MP_ACCEPTED && q->sync_st == MS_VOTED;
    }
    if (!voters) g->has_first = false;
}

void m_sync_fail_vote(ccoip_master *m, uint32_t slot, int32_t reason, const char *detail)
{
    m_peer *p = m_peer_at(m, slot);
    if (p->sync_st != MS_VOTED) return;
    m_answer_status(m, slot, p->sync_call, CCOIP_PB_STATUS_INVALID_USAGE, reason, detail);
    m_sync_drop_vote(m, slot);
}

void m_sync_on_done(ccoip_master *m, uint32_t slot, uint64_t call,
                    const ccoip_pb_shared_state_sync_done *d)
{
    m_peer *p = m_peer_at(m, slot);
    if (p->sync_st == MS_NONE) {
        /* Crossed the notification that failed its round (m_sync_on_loss): nothing to answer. */
        sm_log(&m->out, CCOIP_LOG_DEBUG, "master: late sync_done of peer %U ignored", p->id);
        return;
    }
    if (p->sync_st != MS_ASSIGNED) {
        m_evict(m, slot, CCOIP_PB_REASON_ILLEGAL_MESSAGE, "sync_done outside a sync");
        return;
    }
    m_peer_set_sync(p, MS_DONE);
    p->sync_call = call;
    p->sync_ok = d->success;
    m_sgroup *g = sync_group(m, p->group, false);
    if (g != NULL && !g->has_first) {
        g->has_first = true;
        g->first_ns = m->now;
    }
}

/* Same key set (names, dtypes, counts, allow_content_inequality) in the same (sorted) order. */
static bool sync_same_schema(ccoip_master *m, uint32_t a, uint32_t b)
{
    const m_peer *pa = &m->sess.peers[a], *pb = &m->sess.peers[b];
    if (pa->sync_nkeys != pb->sync_nkeys) return false;
    const m_skey *ka = sync_keys(m, a), *kb = sync_keys(m, b);
    for (uint32_t i = 0; i < pa->sync_nkeys; i++) {
        if (ka[i].name_len != kb[i].name_len || ka[i].dtype != kb[i].dtype ||
            ka[i].count != kb[i].count || ka[i].aci != kb[i].aci ||
            memcmp(ka[i].name, kb[i].name, ka[i].name_len) != 0) {
            return false;
        }
    }
    return true;
}

/* Equal hashes on every compared (not allow_content_inequality) key. */
static bool sync_same_content(ccoip_master *m, uint32_t a, uint32_t b)
{
    const m_skey *ka = sync_keys(m, a), *kb = sync_keys(m, b);
    for (uint32_t i = 0; i < m->sess.peers[a].sync_nkeys; i++) {
        if (!ka[i].aci && ka[i].hash != kb[i].hash) return false;
    }
    return true;
}

static bool sync_holds_popular(ccoip_master *m, uint32_t s)
{
    const m_skey *k = sync_keys(m, s);
    for (uint32_t i = 0; i < m->sess.peers[s].sync_nkeys; i++) {
        if (!k[i].aci && k[i].hash != m->sync.popular[i]) return false;
    }
    return true;
}

static bool sync_is_candidate(const m_peer *p, uint64_t prev)
{
    return p->sync_st == MS_VOTED && p->sync_strategy != CCOIP_PB_SYNC_STRATEGY_RECEIVE_ONLY &&
           p->sync_rev == prev;
}

static void sync_send_verdict(ccoip_master *m, uint32_t slot, uint64_t prev, uint32_t dist,
                              uint32_t nout)
{
    m_peer *p = m_peer_at(m, slot);
    ccoip_pb_master_to_peer env;
    memset(&env, 0, sizeof(env));
    env.call_id = p->sync_call;
    env.body_case = CCOIP_PB_MASTER_TO_PEER_BODY_SYNC_VERDICT;
    ccoip_pb_shared_state_sync_verdict *v = &env.body.sync_verdict;
    v->popular_revision = prev;
    v->round = m->sync.next_round; /* == the group's g->round, set just before */
    v->outdated = nout > 0;
    v->outdated_keys = m->sync.okeys;
    v->outdated_keys_count = nout;
    if (nout > 0) {
        const m_peer *d = &m->sess.peers[dist];
        v->distributor_peer = d->id;
        v->has_distributor = true;
        m_peer_endpoint(d, CCOIP_PB_ENDPOINT_KIND_SHARED_STATE, &v->distributor);
        v->distributor_dials = d->no_inbound; /* it dials us and offers (§8.3) */
    }
    if (p->no_inbound) {
        /* Its receivers cannot dial it (a peer behind NAT): it dials each of them. */
        uint64_t n = 0;
        for (uint32_t k = 0; k < m->sess.order_n; k++) {
            const uint32_t r = m->sess.order[k];
            const m_peer *q = &m->sess.peers[r];
            if (q->group != p->group || q->sync_dist != slot || !q->sync_fetch || r == slot)
                continue;
            if (q->sync_st != MS_VOTED && q->sync_st != MS_ASSIGNED) continue;
            ccoip_pb_peer_info *pi = &m->sync.dial_info[n];
            memset(pi, 0, sizeof(*pi));
            pi->peer_id = q->id;
            pi->peer_group = q->group;
            m_peer_endpoint(q, CCOIP_PB_ENDPOINT_KIND_SHARED_STATE, &m->sync.dial_eps[n]);
            pi->endpoints = &m->sync.dial_eps[n];
            pi->endpoints_count = 1;
            n++;
        }
        v->dial_receivers = m->sync.dial_info;
        v->dial_receivers_count = n;
    }
    m_send(m, slot, &env);
    m_peer_set_sync(p, MS_ASSIGNED);
    p->sync_call = 0;
}

/*
 * The election (§6.7), step by step. Each step walks the group's voters in ascending id, so the
 * outcome depends only on the votes. Steps 3 and 5 collect the members to refuse into tmp_d
 * (evictions change order[], so they run once every step that walks it is done).
 */

/* 1. The popular revision: `next` when some candidate votes it, else (first sync of the group,
 *    or every up-to-date member gone) the highest revision a non-receive-only member holds.
 *    False when no such member exists: every voter is answered NO_SHARED_STATE_AVAILABLE. */
static bool elect_revision(ccoip_master *m, m_sgroup *g, uint64_t *prev_out)
{
    uint64_t prev = 0;
    bool have = false;
    for (uint32_t k = 0; k < m->sess.order_n; k++) {
        const m_peer *p = &m->sess.peers[m->sess.order[k]];
        if (p->state != MP_ACCEPTED || p->group != g->group || p->sync_st != MS_VOTED) continue;
        if (p->sync_strategy == CCOIP_PB_SYNC_STRATEGY_RECEIVE_ONLY) continue;
        if (g->has_next && p->sync_rev == g->next) {
            prev = g->next;
            have = true;
            break;
        }
        if (!have || p->sync_rev > prev) prev = p->sync_rev;
        have = true;
    }
    g->has_first = false;
    if (!have) {
        for (uint32_t k = 0; k < m->sess.order_n; k++) {
            uint32_t s = m->sess.order[k];
            m_peer *p = &m->sess.peers[s];
            if (p->group != g->group || p->sync_st != MS_VOTED) continue;
            m_answer_status(m, s, p->sync_call, CCOIP_PB_STATUS_NO_SHARED_STATE_AVAILABLE,
                            CCOIP_PB_REASON_UNSPECIFIED, "no member distributes shared state");
            m_peer_set_sync(p, MS_NONE);
        }
        return false;
    }
    *prev_out = prev;
    return true;
}

/* 2. The popular key set among candidates (most votes; ties: the lowest id's set). Returns the
 *    slot of a member holding it (one exists: the member that set prev). */
static uint32_t elect_key_set(ccoip_master *m, const m_sgroup *g, uint64_t prev)
{
    uint32_t best = M_SLOT_NONE, best_n = 0;
    for (uint32_t k = 0; k < m->sess.order_n; k++) {
        uint32_t s = m->sess.order[k];
        const m_peer *p = &m->sess.peers[s];
        if (p->group != g->group || !sync_is_candidate(p, prev)) continue;
        uint32_t n = 0;
        for (uint32_t j = 0; j < m->sess.order_n; j++) {
            uint32_t t = m->sess.order[j];
            const m_peer *q = &m->sess.peers[t];
            if (q->group == g->group && sync_is_candidate(q, prev) && sync_same_schema(m, s, t))
                n++;
        }
        if (n > best_n) {
            best = s;
            best_n = n;
        }
    }
    return best;
}

/* 3. Voters whose key set differs from best's are refused: appended to tmp_d. */
static uint32_t elect_schema_misfits(ccoip_master *m, const m_sgroup *g, uint32_t best,
                                     uint32_t nev)
{
    for (uint32_t k = 0; k < m->sess.order_n; k++) {
        uint32_t s = m->sess.order[k];
        const m_peer *p = &m->sess.peers[s];
        if (p->group == g->group && p->sync_st == MS_VOTED && !sync_same_schema(m, s, best)) {
            m->sync.tmp_d[nev++] = s;
        }
    }
    return nev;
}

/* 4. Popular content per key among candidates (ties: the lowest id's hash) into m->popular. */
static void elect_content(ccoip_master *m, const m_sgroup *g, uint64_t prev, uint32_t best,
                          uint32_t nkeys)
{
    const m_skey *bk = sync_keys(m, best);
    for (uint32_t i = 0; i < nkeys; i++) {
        uint64_t h = bk[i].hash;
        uint32_t hn = 0;
        for (uint32_t k = 0; k < m->sess.order_n; k++) {
            uint32_t s = m->sess.order[k];
            const m_peer *p = &m->sess.peers[s];
            if (p->group != g->group || !sync_is_candidate(p, prev) ||
                !sync_same_schema(m, s, best)) {
                continue;
            }
            uint64_t mine = sync_keys(m, s)[i].hash;
            uint32_t n = 0;
            for (uint32_t j = 0; j < m->sess.order_n; j++) {
                uint32_t t = m->sess.order[j];
                const m_peer *q = &m->sess.peers[t];
                if (q->group == g->group && sync_is_candidate(q, prev) &&
                    sync_same_schema(m, t, best) && sync_keys(m, t)[i].hash == mine) {
                    n++;
                }
            }
            if (n > hn) {
                hn = n;
                h = mine;
            }
        }
        m->sync.popular[i] = h;
    }
    /* The per-key winners may be a combination no candidate holds: then the most popular
     * whole content wins instead (ties: lowest id), so a distributor always exists. */
    bool held = false;
    for (uint32_t k = 0; k < m->sess.order_n && !held; k++) {
        uint32_t s = m->sess.order[k];
        const m_peer *p = &m->sess.peers[s];
        held = p->group == g->group && sync_is_candidate(p, prev) && sync_same_schema(m, s, best) &&
               sync_holds_popular(m, s);
    }
    if (held) return;
    uint32_t w = best, wn = 0;
    for (uint32_t k = 0; k < m->sess.order_n; k++) {
        uint32_t s = m->sess.order[k];
        const m_peer *p = &m->sess.peers[s];
        if (p->group != g->group || !sync_is_candidate(p, prev) || !sync_same_schema(m, s, best)) {
            continue;
        }
        uint32_t n = 0;
        for (uint32_t j = 0; j < m->sess.order_n; j++) {
            uint32_t t = m->sess.order[j];
            const m_peer *q = &m->sess.peers[t];
            if (q->group == g->group && sync_is_candidate(q, prev) &&
                sync_same_schema(m, t, best) && sync_same_content(m, s, t)) {
                n++;
            }
        }
        if (n > wn) {
            wn = n;
            w = s;
        }
    }
    for (uint32_t i = 0; i < nkeys; i++)
        m->sync.popular[i] = sync_keys(m, w)[i].hash;
}

/* 5. Receivers that may not receive (SEND_ONLY) are refused too: appended to tmp_d. */
static uint32_t elect_send_only_misfits(ccoip_master *m, const m_sgroup *g, uint64_t prev,
                                        uint32_t best, uint32_t nev)
{
    for (uint32_t k = 0; k < m->sess.order_n; k++) {
        uint32_t s = m->sess.order[k];
        const m_peer *p = &m->sess.peers[s];
        if (p->group != g->group || p->sync_st != MS_VOTED || !sync_same_schema(m, s, best)) {
            continue;
        }
        bool up = p->sync_rev == prev && sync_holds_popular(m, s);
        if (!up && p->sync_strategy == CCOIP_PB_SYNC_STRATEGY_SEND_ONLY) m->sync.tmp_d[nev++] = s;
    }
    return nev;
}

/* Refuses and evicts the nev members collected in tmp_d (steps 3 and 5). */
static void elect_evict_misfits(ccoip_master *m, uint32_t nev, uint32_t best, uint32_t nkeys)
{
    for (uint32_t i = 0; i < nev; i++) {
        uint32_t s = m->sync.tmp_d[i];
        if (m->sess.peers[s].state != MP_ACCEPTED) continue;
        bool schema = m->sess.peers[s].sync_nkeys != nkeys || !sync_same_schema(m, s, best);
        sync_refuse_evict(
            m, s, schema ? CCOIP_PB_REASON_KEY_SET_MISMATCH : CCOIP_PB_REASON_STRATEGY_CONFLICT,
            schema ? "shared-state key set differs from the popular set"
                   : "SEND_ONLY peer holds outdated shared state");
    }
}

/* The keys member s must fetch from dist (rule 4; into m->sync.okeys when fill). */
static uint32_t sync_fetch_keys(ccoip_master *m, uint32_t s, uint32_t dist, bool outdated,
                                uint32_t nkeys, bool fill)
{
    const m_skey *mk = sync_keys(m, s), *dk = sync_keys(m, dist);
    uint32_t nout = 0;
    for (uint32_t i = 0; i < nkeys; i++) {
        const bool fetch =
            mk[i].aci ? (outdated && mk[i].hash != dk[i].hash) : mk[i].hash != m->sync.popular[i];
        if (!fetch) continue;
        if (fill) {
            ccoip_pb_outdated_key *o = &m->sync.okeys[nout];
            memset(o, 0, sizeof(*o));
            o->name.data = dk[i].name;
            o->name.len = dk[i].name_len;
            o->expected_hash = dk[i].hash;
            o->hash_type = CCOIP_PB_HASH_TYPE_XXH3_64;
        }
        nout++;
    }
    return nout;
}

/* Distributor q serves receiver r better than d (rule 6): a pair that can connect (either end
 * accepts connections, §8.3), then one that accepts them (the receiver dials), then the fewer
 * receivers so far; ties keep d (the lower id). */
static bool sync_dist_better(const m_peer *r, const m_peer *q, const m_peer *d)
{
    const bool q_pair = !q->no_inbound || !r->no_inbound, d_pair = !d->no_inbound || !r->no_inbound;
    if (q_pair != d_pair) return q_pair;
    if (q->no_inbound != d->no_inbound) return !q->no_inbound;
    return q->sync_load < d->sync_load;
}

/* 6. Distributors: up-to-date candidates. Receivers, in ascending id, each take the distributor
 *    with the fewest receivers so far (ties: lowest id), one that accepts connections before
 *    one that refused a dial (sync_dist_better); every voter gets its verdict. False
 *    when no voter is left (every one was evicted): no round. */
static bool elect_assign(ccoip_master *m, m_sgroup *g, uint64_t prev, uint32_t nkeys)
{
    for (uint32_t k = 0; k < m->sess.order_n; k++)
        m->sess.peers[m->sess.order[k]].sync_load = 0;
    uint32_t ref = M_SLOT_NONE;
    for (uint32_t k = 0; k < m->sess.order_n; k++) {
        uint32_t s = m->sess.order[k];
        if (m->sess.peers[s].group == g->group && m->sess.peers[s].sync_st == MS_VOTED) {
            ref = s;
            break;
        }
    }
    g->popular_rev = prev;
    if (ref == M_SLOT_NONE) return false; /* everybody was evicted */
    g->transfer = true;
    g->round = ++m->sync.next_round;
    /* Receivers first (a distributor that dials its receivers names them all in its verdict),
     * then every voter's verdict. */
    for (uint32_t k = 0; k < m->sess.order_n; k++) {
        uint32_t s = m->sess.order[k];
        m_peer *p = &m->sess.peers[s];
        if (p->group != g->group || p->sync_st != MS_VOTED) continue;
        const bool outdated = p->sync_rev < prev;
        const m_skey *mk = sync_keys(m, s);
        bool need = false;
        for (uint32_t i = 0; i < nkeys && !need; i++) {
            need = (!mk[i].aci && mk[i].hash != m->sync.popular[i]) || (outdated && mk[i].aci);
        }
        uint32_t dist = M_SLOT_NONE;
        for (uint32_t j = 0; need && j < m->sess.order_n; j++) {
            uint32_t t = m->sess.order[j];
            const m_peer *q = &m->sess.peers[t];
            bool cand = q->sync_st == MS_VOTED &&
                        q->sync_strategy != CCOIP_PB_SYNC_STRATEGY_RECEIVE_ONLY &&
                        q->sync_rev == prev;
            if (t == s || q->group != g->group || !cand || !sync_holds_popular(m, t)) continue;
            if (dist == M_SLOT_NONE || sync_dist_better(p, q, &m->sess.peers[dist])) dist = t;
        }
        p->sync_dist = dist;
        /* Something to fetch (the allow-inequality keys of an outdated member may already
         * match its distributor's): only then does a dialling distributor dial it. */
        p->sync_fetch = dist != M_SLOT_NONE && sync_fetch_keys(m, s, dist, outdated, nkeys, false);
        if (dist != M_SLOT_NONE) m->sess.peers[dist].sync_load++;
    }
    for (uint32_t k = 0; k < m->sess.order_n; k++) {
        uint32_t s = m->sess.order[k];
        m_peer *p = &m->sess.peers[s];
        if (p->group != g->group || p->sync_st != MS_VOTED) continue;
        const uint32_t dist = p->sync_dist;
        const uint32_t nout =
            dist == M_SLOT_NONE ? 0 : sync_fetch_keys(m, s, dist, p->sync_rev < prev, nkeys, true);
        sync_send_verdict(m, s, prev, dist, nout);
    }
    return true;
}

/* Every accepted member of g voted: elect, classify, assign distributors (§6.7). */
static void sync_elect(ccoip_master *m, m_sgroup *g)
{
    uint64_t prev = 0;
    if (!elect_revision(m, g, &prev)) return;
    const uint32_t best = elect_key_set(m, g, prev);
    if (best == M_SLOT_NONE) return; /* unreachable: the member that set prev is one */
    uint32_t nev = elect_schema_misfits(m, g, best, 0);
    const uint32_t nkeys = m->sess.peers[best].sync_nkeys;
    elect_content(m, g, prev, best, nkeys);
    nev = elect_send_only_misfits(m, g, prev, best, nev);
    elect_evict_misfits(m, nev, best, nkeys);
    if (!elect_assign(m, g, prev, nkeys)) return;
    sm_log(&m->out, CCOIP_LOG_INFO, "master: group %u shared state revision %U elected", g->group,
           prev);
}

/* Every member of the round sent sync_done: answer all, close the round. */
static void sync_finish(ccoip_master *m, m_sgroup *g)
{
    bool ok = true;
    for (uint32_t k = 0; k < m->sess.order_n; k++) {
        const m_peer *p = &m->sess.peers[m->sess.order[k]];
        if (p->group == g->group && p->sync_st == MS_DONE && !p->sync_ok) ok = false;
    }
    for (uint32_t k = 0; k < m->sess.order_n; k++) {
        uint32_t s = m->sess.order[k];
        m_peer *p = &m->sess.peers[s];
        if (p->group != g->group || p->sync_st != MS_DONE) continue;
        ccoip_pb_master_to_peer env;
        memset(&env, 0, sizeof(env));
        env.call_id = p->sync_call;
        env.body_case = CCOIP_PB_MASTER_TO_PEER_BODY_SYNC_DONE_VERDICT;
        env.body.sync_done_verdict.success = ok;
        m_send(m, s, &env);
        m_peer_set_sync(p, MS_NONE);
        p->sync_call = 0;
    }
    if (ok) {
        g->has_next = true;
        g->next = g->popular_rev + 1u;
    }
    g->transfer = false;
    g->has_first = false;
    /* Votes that arrived during the transfer start the next round's timer now. */
    for (uint32_t k = 0; k < m->sess.order_n; k++) {
        const m_peer *p = &m->sess.peers[m->sess.order[k]];
        if (p->group == g->group && p->sync_st == MS_VOTED) {
            g->has_first = true;
            g->first_ns = m->now;
            break;
        }
    }
    sm_log(&m->out, CCOIP_LOG_INFO, "master: group %u shared state sync %s", g->group,
           ok ? "done" : "failed");
}

/*
 * Fails g's round for every member still in it (docs/protocol.md §6.7): sync_done_verdict
 * { success = false } as the answer to a member's sync_done or, to a member that has not sent
 * one, as a notification (call_id 0; a sync_done crossing it is ignored, m_sync_on_done).
 */
static void sync_fail_round(ccoip_master *m, m_sgroup *g)
{
    for (uint32_t k = 0; k < m->sess.order_n; k++) {
        uint32_t s = m->sess.order[k];
        m_peer *q = &m->sess.peers[s];
        if (q->group != g->group || (q->sync_st != MS_ASSIGNED && q->sync_st != MS_DONE)) continue;
        ccoip_pb_master_to_peer env;
        memset(&env, 0, sizeof(env));
        env.call_id = q->sync_st == MS_DONE ? q->sync_call : 0;
        env.body_case = CCOIP_PB_MASTER_TO_PEER_BODY_SYNC_DONE_VERDICT;
        env.body.sync_done_verdict.success = false;
        m_send(m, s, &env);
        m_peer_set_sync(q, MS_NONE);
        q->sync_call = 0;
    }
    g->transfer = false;
    g->has_first = false;
}

/*
 * A member leaves during a transfer. If it was the distributor of a receiver still fetching,
 * that receiver could wait forever (a hung distributor keeps its connection open): the round
 * fails now for every member — the answer to a member's sync_done, or a sync_done_verdict
 * notification (call_id 0) to a member still fetching (docs/protocol.md §6.7).
 */
void m_sync_on_loss(ccoip_master *m, uint32_t slot)
{
    m_peer *x = m_peer_at(m, slot);
    if (x->sync_st != MS_ASSIGNED && x->sync_st != MS_DONE) return;
    m_sgroup *g = sync_group(m, x->group, false);
    if (g == NULL || !g->transfer) return;
    bool orphan = false;
    for (uint32_t k = 0; k < m->sess.order_n; k++) {
        const m_peer *q = &m->sess.peers[m->sess.order[k]];
        if (m->sess.order[k] != slot && q->group == x->group && q->sync_st == MS_ASSIGNED &&
            q->sync_dist == slot) {
            orphan = true;
        }
    }
    if (!orphan) return;
    m_peer_set_sync(x, MS_NONE);
    sync_fail_round(m, g);
    sm_log(&m->out, CCOIP_LOG_WARN,
           "master: group %u shared state sync failed: distributor %U lost", g->group, x->id);
}

bool m_sync_progress(ccoip_master *m)
{
    bool changed = false;
    for (uint32_t i = 0; i < m->sync.sg_hi; i++) {
        m_sgroup *g = &m->sync.sgroups[i];
        if (!g->used) continue;
        uint32_t members = 0, voted = 0, in_round = 0, done = 0;
        for (uint32_t k = 0; k < m->sess.order_n; k++) {
            const m_peer *p = &m->sess.peers[m->sess.order[k]];
            if (p->group != g->group) continue;
            if (p->state == MP_ACCEPTED) members++;
            if (p->sync_st == MS_VOTED) voted++;
            if (p->sync_st == MS_ASSIGNED || p->sync_st == MS_DONE) in_round++;
            if (p->sync_st == MS_DONE) done++;
        }
        if (g->transfer) {
            if (done == in_round) {
                if (in_round == 0) {
                    g->transfer = false; /* every member of the round is gone */
                } else {
                    sync_finish(m, g);
                }
                changed = true;
            }
            continue;
        }
        if (voted > 0 && voted == members) {
            sync_elect(m, g);
            changed = true;
        }
    }
    return changed;
}

/*
 * A group's sync deadline (docs/protocol.md §6.7, §6.10): `vote_timeout_ms` after the vote's first
 * ballot, or after the round's first sync_done. A minority never evicts a majority: the members
 * that hold it up (accepted members of the group that did not vote; members of the round that
 * did not send sync_done) are evicted only when those that did are a strict majority (of the
 * group's accepted members; of the round's members). Otherwise nobody is evicted: every voter's
 * ballot fails (INVALID_USAGE / REASON_VOTE_UNMATCHED), or the round fails for all its members.
 */
void m_sync_timers(ccoip_master *m)
{
    uint64_t to = sm_ms(m->cfg.vote_timeout_ms);
    for (uint32_t i = 0; i < m->sync.sg_hi; i++) {
        m_sgroup *g = &m->sync.sgroups[i];
        if (!g->used || !g->has_first || m->now < sm_add_sat(g->first_ns, to)) continue;
        g->has_first = false;
        uint32_t group = g->group;
        bool transfer = g->transfer;
        uint32_t members = 0, did = 0;
        for (uint32_t k = 0; k < m->sess.order_n; k++) {
            const m_peer *p = &m->sess.peers[m->sess.order[k]];
            if (p->group != group) continue;
            if (transfer && (p->sync_st == MS_ASSIGNED || p->sync_st == MS_DONE)) {
                members++;
                if (p->sync_st == MS_DONE) did++;
            } else if (!transfer && p->state == MP_ACCEPTED) {
                members++;
                if (p->sync_st == MS_VOTED) did++;
            }
        }
        if (!m_majority(did, members)) {
            sm_log(&m->out, CCOIP_LOG_WARN,
                   "master: group %u shared-state %s timed out with %u of %u members: failing it",
                   group, transfer ? "round" : "vote", did, members);
            if (transfer) {
                sync_fail_round(m, g);
                continue;
            }
            for (uint32_t k = 0; k < m->sess.order_n; k++) {
                uint32_t s = m->sess.order[k];
                if (m->sess.peers[s].group == group && m->sess.peers[s].state == MP_ACCEPTED) {
                    m_sync_fail_vote(m, s, CCOIP_PB_REASON_VOTE_UNMATCHED,
                                     "half or fewer of the group voted the sync in time");
                }
            }
            continue;
        }
        uint64_t last = 0;
        for (uint32_t s = m_next_by_id(m, 0); s != M_SLOT_NONE; s = m_next_by_id(m, last)) {
            const m_peer *p = &m->sess.peers[s];
            last = p->id;
            if (p->group != group || p->state != MP_ACCEPTED) continue;
            if (transfer ? p->sync_st == MS_ASSIGNED : p->sync_st != MS_VOTED) {
                m_evict(m, s, CCOIP_PB_REASON_VOTE_TIMEOUT,
                        transfer ? "did not finish the shared-state sync"
                                 : "did not vote the shared-state sync");
            }
        }
    }
}

uint64_t m_sync_deadline(const ccoip_master *m)
{
    uint64_t d = CCOIP_NO_DEADLINE, to = sm_ms(m->cfg.vote_timeout_ms);
    for (uint32_t i = 0; i < m->sync.sg_hi; i++) {
        const m_sgroup *g = &m->sync.sgroups[i];
        if (g->used && g->has_first && sm_add_sat(g->first_ns, to) < d) {
            d = sm_add_sat(g->first_ns, to);
        }
    }
    return d;
}

bool m_sync_init(ccoip_master *m)
{
    m_shared_state *y = &m->sync;
    const uint64_t np = m->cfg.max_peers, nk = m->cfg.max_state_keys;
    y->skeys = calloc((size_t)(np * nk), sizeof(m_skey));
    y->sgroups = calloc((size_t)np, sizeof(m_sgroup));
    y->popular = calloc((size_t)nk, sizeof(uint64_t));
    y->tmp_d = calloc((size_t)np, sizeof(uint32_t));
    y->okeys = calloc((size_t)nk, sizeof(ccoip_pb_outdated_key));
    y->dial_info = calloc((size_t)np, sizeof(ccoip_pb_peer_info));
    y->dial_eps = calloc((size_t)np, sizeof(ccoip_pb_endpoint));
    return y->skeys != NULL && y->sgroups != NULL && y->popular != NULL && y->tmp_d != NULL &&
           y->okeys != NULL && y->dial_info != NULL && y->dial_eps != NULL;
}

void m_sync_deinit(ccoip_master *m)
{
    free(m->sync.skeys);
    free(m->sync.sgroups);
    free(m->sync.popular);
    free(m->sync.tmp_d);
    free(m->sync.okeys);
    free(m->sync.dial_info);
    free(m->sync.dial_eps);
}
