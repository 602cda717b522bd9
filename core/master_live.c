/*
 * master_live.c — the master's liveness (docs/core.md §2.3): every slot's earliest heartbeat or
 * silence deadline in a binary min-heap, a lower bound (live_next) that lets a step skip the
 * scan, and the scan that sends heartbeats and evicts silent peers.
 */
#include <stdlib.h>
#include <string.h>

#include "master_internal.h"

/* ------------------------------------------------------------------------ */
/* Liveness deadlines (m->live.lq: a min-heap on (key, slot))                     */
/* ------------------------------------------------------------------------ */

/* The slot's earliest liveness deadline as m_live_scan acts on it: silence for a slot saying
 * hello, silence or a heartbeat to send for a peer with an id, and the join deadline
 * (up_ns + evict_ms, docs/protocol.md §6.2) for one that has not joined. */
static uint64_t live_deadline(const ccoip_master *m, uint32_t s)
{
    const m_peer *p = &m->sess.peers[s];
    uint64_t d = sm_add_sat(p->last_recv_ns, sm_ms(m->cfg.evict_ms));
    if (p->state >= MP_NEW) {
        uint64_t h = sm_add_sat(p->last_send_ns, sm_ms(m->cfg.heartbeat_ms));
        if (h < d) d = h;
    }
    if (p->state == MP_NEW) {
        uint64_t j = sm_add_sat(p->up_ns, sm_ms(m->cfg.evict_ms));
        if (j < d) d = j;
    }
    return d;
}

static bool live_less(const ccoip_master *m, uint32_t a, uint32_t b)
{
    if (m->live.lq_key[a] != m->live.lq_key[b]) return m->live.lq_key[a] < m->live.lq_key[b];
    return a < b;
}

static void live_place(ccoip_master *m, uint32_t i, uint32_t s)
{
    m->live.lq[i] = s;
    m->live.lq_pos[s] = i;
}

static void live_sift(ccoip_master *m, uint32_t i)
{
    const uint32_t s = m->live.lq[i];
    while (i > 0) {
        const uint32_t up = (i - 1u) / 2u;
        if (!live_less(m, s, m->live.lq[up])) break;
        live_place(m, i, m->live.lq[up]);
        i = up;
    }
    for (;;) {
        uint32_t c = 2u * i + 1u;
        if (c >= m->live.lq_len) break;
        if (c + 1u < m->live.lq_len && live_less(m, m->live.lq[c + 1u], m->live.lq[c])) c++;
        if (!live_less(m, m->live.lq[c], s)) break;
        live_place(m, i, m->live.lq[c]);
        i = c;
    }
    live_place(m, i, s);
}

/* Keys slot s with d (inserting it if it is not in the heap). */
static void live_set(ccoip_master *m, uint32_t s, uint64_t d)
{
    m->live.lq_key[s] = d;
    if (m->live.lq_pos[s] == M_SLOT_NONE) {
        live_place(m, m->live.lq_len++, s);
    }
    live_sift(m, m->live.lq_pos[s]);
}

void m_live_forget(ccoip_master *m, uint32_t s)
{
    const uint32_t i = m->live.lq_pos[s];
    if (i == M_SLOT_NONE) return;
    m->live.lq_pos[s] = M_SLOT_NONE;
    const uint32_t last = m->live.lq[--m->live.lq_len];
    if (i == m->live.lq_len) return;
    live_place(m, i, last);
    live_sift(m, i);
}

/* ------------------------------------------------------------------------ */
/* Liveness                                                                  */
/* ------------------------------------------------------------------------ */

void m_live_touch(ccoip_master *m, uint64_t t)
{
    if (t < m->live.live_next) m->live.live_next = t;
}

/*
 * Heartbeats and silence. Per-peer deadlines only move later (last_recv and last_send only grow)
 * and new ones are announced with m_live_touch, so live_next is a lower bound of the earliest
 * deadline: before it nothing is due and the scan is skipped; a scan handles every due peer and
 * makes live_next exact again.
 */
void m_live_scan(ccoip_master *m)
{
    uint64_t evict = sm_ms(m->cfg.evict_ms), hb = sm_ms(m->cfg.heartbeat_ms);
    if (m->now < m->live.live_next) return;
    /* The due slots: keys are lower bounds, so a stale key on top is re-keyed, a due slot taken
     * out (put back below with its new deadline). */
    uint32_t n_due = 0;
    while (m->live.lq_len > 0 && m->live.lq_key[m->live.lq[0]] <= m->now) {
        const uint32_t s = m->live.lq[0];
        const uint64_t d = live_deadline(m, s);
        if (d > m->now) {
            live_set(m, s, d);
        } else {
            m_live_forget(m, s);
            m->live.lq_due[n_due++] = s;
        }
    }
    /* Act in the order a walk over every slot would: slots still saying hello by slot, then
     * peers in ascending id. Deadlines only move later, so no other slot becomes due meanwhile;
     * each condition is checked again when its slot's turn comes. */
    uint32_t n_hello = 0;
    for (uint32_t i = 0; i < n_due; i++) {
        if (m->sess.peers[m->live.lq_due[i]].state == MP_HELLO) {
            const uint32_t t = m->live.lq_due[n_hello];
            m->live.lq_due[n_hello++] = m->live.lq_due[i];
            m->live.lq_due[i] = t;
        }
    }
    qsort(m->live.lq_due, n_hello, sizeof(uint32_t), m_cmp_u32);
    for (uint32_t i = n_hello; i < n_due; i++)
        m->live.lq_ids[i - n_hello] = m->sess.peers[m->live.lq_due[i]].id;
    qsort(m->live.lq_ids, n_due - n_hello, sizeof(uint64_t), m_cmp_u64);
    for (uint32_t i = n_hello; i < n_due; i++)
        m->live.lq_due[i] = m_slot_by_id(m, m->live.lq_ids[i - n_hello]);
    for (uint32_t i = 0; i < n_due; i++) {
        const uint32_t s = m->live.lq_due[i];
        m_peer *p = &m->sess.peers[s];
        if (p->state == MP_FREE) continue;
        if (i < n_hello) {
            if (p->state == MP_HELLO && m->now >= sm_add_sat(p->last_recv_ns, evict)) {
                m_evict(m, s, CCOIP_PB_REASON_HEARTBEAT_TIMEOUT, "no hello in time");
            }
            continue;
        }
        if (p->state == MP_NEW && m->now >= sm_add_sat(p->up_ns, evict)) {
            m_evict(m, s, CCOIP_PB_REASON_JOIN_TIMEOUT, "no join within evict_ms");
            continue;
        }
        if (m->now >= sm_add_sat(p->last_recv_ns, evict)) {
            m_evict(m, s, CCOIP_PB_REASON_HEARTBEAT_TIMEOUT, "silent for evict_ms");
            continue;
        }
        if (m->now >= sm_add_sat(p->last_send_ns, hb)) {
            ccoip_pb_master_to_peer env;
            memset(&env, 0, sizeof(env));
            env.body_case = CCOIP_PB_MASTER_TO_PEER_BODY_HEARTBEAT;
            env.body.heartbeat.counter = ++p->hb_counter;
            m_send(m, s, &env);
        }
    }
    for (uint32_t i = 0; i < n_due; i++) {
        const uint32_t s = m->live.lq_due[i];
        if (m->sess.peers[s].state != MP_FREE) live_set(m, s, live_deadline(m, s));
    }
    /* live_next exact again: re-key stale tops until the top's key is its deadline. */
    m->live.live_next = CCOIP_NO_DEADLINE;
    while (m->live.lq_len > 0) {
        const uint32_t s = m->live.lq[0];
        const uint64_t d = live_deadline(m, s);
        if (d == m->live.lq_key[s]) {
            m->live.live_next = d;
            break;
        }
        live_set(m, s, d);
    }
}

void m_live_arm(ccoip_master *m, uint32_t slot)
{
    live_set(m, slot, live_deadline(m, slot));
}

bool m_live_init(ccoip_master *m)
{
    m_liveness *l = &m->live;
    const uint64_t np = m->cfg.max_peers;
    l->live_next = CCOIP_NO_DEADLINE;
    l->lq_key = calloc((size_t)np, sizeof(uint64_t));
    l->lq = calloc((size_t)np, sizeof(uint32_t));
    l->lq_pos = malloc((size_t)np * sizeof(uint32_t));
    l->lq_due = calloc((size_t)np, sizeof(uint32_t));
    l->lq_ids = calloc((size_t)np, sizeof(uint64_t));
    if (l->lq_pos != NULL) memset(l->lq_pos, 0xff, (size_t)np * sizeof(uint32_t));
    return l->lq_key != NULL && l->lq != NULL && l->lq_pos != NULL && l->lq_due != NULL &&
           l->lq_ids != NULL;
}

void m_live_deinit(ccoip_master *m)
{
    free(m->live.lq_key);
    free(m->live.lq);
    free(m->live.lq_pos);
    free(m->live.lq_due);
    free(m->live.lq_ids);
}
