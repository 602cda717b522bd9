/*
 * master_peers.c — the master's peer table (docs/core.md §2.1): slots by id (order[]) and by
 * connection (a hash map), the per-group world sizes of one snapshot, re-wire marks, and the
 * matrix of links reported unusable. Sessions themselves (hello, join, removal) are in
 * master.c.
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "master_internal.h"

int m_cmp_u32(const void *a, const void *b)
{
    const uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

int m_cmp_u64(const void *a, const void *b)
{
    const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static const uint8_t m_loopback[4] = {127, 0, 0, 1};

void m_peer_endpoint(const m_peer *p, uint32_t kind, ccoip_pb_endpoint *e)
{
    memset(e, 0, sizeof(*e));
    e->kind = (int32_t)kind;
    if (p->ip_len > 0) {
        e->ip.data = p->ip;
        e->ip.len = p->ip_len;
    } else {
        e->ip.data = m_loopback;
        e->ip.len = sizeof(m_loopback);
    }
    e->port = p->ep[kind].port;
}

m_peer *m_peer_at(ccoip_master *m, uint32_t slot)
{
    assert(slot < m->cfg.max_peers);
    return &m->sess.peers[slot];
}

uint32_t m_count_state(const ccoip_master *m, m_peer_state st)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < m->sess.order_n; i++) {
        if (m->sess.peers[m->sess.order[i]].state == st) n++;
    }
    return n;
}

void m_mark_rewire(ccoip_master *m, uint32_t group)
{
    for (uint32_t i = 0; i < m->sess.order_n; i++) {
        m_peer *p = &m->sess.peers[m->sess.order[i]];
        if (p->state == MP_ACCEPTED && p->group == group) p->rewire = true;
    }
    m->topo.ring_healthy = false;
    m->topo.rewire_gen++;
}

void m_mark_rewire_all(ccoip_master *m)
{
    for (uint32_t i = 0; i < m->sess.order_n; i++) {
        m_peer *p = &m->sess.peers[m->sess.order[i]];
        if (p->state == MP_ACCEPTED) p->rewire = true;
    }
    m->topo.ring_healthy = false;
    m->topo.rewire_gen++;
}

bool m_unreachable(const ccoip_master *m, uint32_t from, uint32_t to)
{
    uint64_t bit = (uint64_t)from * m->cfg.max_peers + to;
    return (((unsigned)m->topo.unreach[bit / 8u] >> (bit % 8u)) & 1u) != 0;
}

void m_set_unreachable(ccoip_master *m, uint32_t from, uint32_t to)
{
    uint64_t bit = (uint64_t)from * m->cfg.max_peers + to;
    m->topo.unreach[bit / 8u] = (uint8_t)(m->topo.unreach[bit / 8u] | (1u << (bit % 8u)));
    m->topo.slot_links[from] |= M_LINK_UNREACH;
    m->topo.slot_links[to] |= M_LINK_UNREACH;
}

void m_clear_unreachable(ccoip_master *m, uint32_t slot)
{
    /* Only slots that ever had a mark pay the O(max_peers) walk (a column walk touches a page
     * per row: done for every loss, it would fault the whole matrix in at 10,000 peers). */
    if ((m->topo.slot_links[slot] & M_LINK_UNREACH) == 0) return;
    m->topo.slot_links[slot] = (uint8_t)(m->topo.slot_links[slot] & ~M_LINK_UNREACH);
    for (uint32_t o = 0; o < m->cfg.max_peers; o++) {
        uint64_t b1 = (uint64_t)slot * m->cfg.max_peers + o;
        uint64_t b2 = (uint64_t)o * m->cfg.max_peers + slot;
        m->topo.unreach[b1 / 8u] = (uint8_t)(m->topo.unreach[b1 / 8u] & ~(1u << (b1 % 8u)));
        m->topo.unreach[b2 / 8u] = (uint8_t)(m->topo.unreach[b2 / 8u] & ~(1u << (b2 % 8u)));
    }
}

static uint32_t world_hash(const ccoip_master *m, uint32_t group)
{
    uint64_t z = ((uint64_t)group + 1u) * 0x9e3779b97f4a7c15ull;
    z ^= z >> 31;
    return (uint32_t)(z & (m->sess.conn_cap - 1u));
}

void m_world_prepare(ccoip_master *m, bool include_phase)
{
    /* Clear only the map entries of the previous snapshot. */
    for (uint32_t k = 0; k < m->sess.w_ngroups; k++) {
        uint32_t i = world_hash(m, m->sess.w_gid[k]);
        while (m->sess.w_map[i] != M_SLOT_NONE) {
            m->sess.w_map[i] = M_SLOT_NONE;
            i = (i + 1u) & (m->sess.conn_cap - 1u);
        }
    }
    m->sess.w_ngroups = 0;
    m->sess.w_global = 0;
    m->sess.w_largest = 0;
    for (uint32_t n = 0; n < m->sess.order_n; n++) {
        const m_peer *p = &m->sess.peers[m->sess.order[n]];
        bool counted = p->state == MP_ACCEPTED || (include_phase && p->in_phase);
        if (!counted) continue;
        m->sess.w_global++;
        uint32_t i = world_hash(m, p->group), k;
        for (;; i = (i + 1u) & (m->sess.conn_cap - 1u)) {
            k = m->sess.w_map[i];
            if (k == M_SLOT_NONE || m->sess.w_gid[k] == p->group) break;
        }
        if (k == M_SLOT_NONE) {
            k = m->sess.w_ngroups++;
            m->sess.w_map[i] = k;
            m->sess.w_gid[k] = p->group;
            m->sess.w_cnt[k] = 0;
        }
        m->sess.w_cnt[k]++;
        if (m->sess.w_cnt[k] > m->sess.w_largest) m->sess.w_largest = m->sess.w_cnt[k];
    }
}

void m_world_sizes(const ccoip_master *m, uint32_t group, ccoip_pb_world_sizes *out)
{
    memset(out, 0, sizeof(*out));
    out->global = m->sess.w_global;
    out->num_peer_groups = m->sess.w_ngroups;
    out->largest_peer_group = m->sess.w_largest;
    for (uint32_t i = world_hash(m, group);; i = (i + 1u) & (m->sess.conn_cap - 1u)) {
        uint32_t k = m->sess.w_map[i];
        if (k == M_SLOT_NONE) break;
        if (m->sess.w_gid[k] == group) {
            out->peer_group = m->sess.w_cnt[k];
            break;
        }
    }
}

/* ------------------------------------------------------------------------ */
/* Slots                                                                     */
/* ------------------------------------------------------------------------ */

/* conn -> slot: a hash map for lookup only (never iterated). */
static uint32_t conn_hash(const ccoip_master *m, uint64_t conn)
{
    uint64_t z = conn * 0x9e3779b97f4a7c15ull;
    z ^= z >> 29;
    return (uint32_t)(z & (m->sess.conn_cap - 1u));
}

uint32_t m_slot_by_conn(const ccoip_master *m, uint64_t conn)
{
    for (uint32_t i = conn_hash(m, conn);; i = (i + 1u) & (m->sess.conn_cap - 1u)) {
        uint32_t s = m->sess.conn_map[i];
        if (s == M_SLOT_NONE) return M_SLOT_NONE;
        if (m->sess.peers[s].conn == conn && m->sess.peers[s].state != MP_FREE) return s;
    }
}

void m_conn_map_insert(ccoip_master *m, uint32_t slot)
{
    uint32_t i = conn_hash(m, m->sess.peers[slot].conn);
    while (m->sess.conn_map[i] != M_SLOT_NONE)
        i = (i + 1u) & (m->sess.conn_cap - 1u);
    m->sess.conn_map[i] = slot;
}

/* Backward-shift deletion (linear probing): no tombstones, so the table never fills. */
void m_conn_map_remove(ccoip_master *m, uint32_t slot)
{
    const uint32_t mask = m->sess.conn_cap - 1u;
    uint32_t i = conn_hash(m, m->sess.peers[slot].conn);
    while (m->sess.conn_map[i] != slot) {
        if (m->sess.conn_map[i] == M_SLOT_NONE) return;
        i = (i + 1u) & mask;
    }
    uint32_t j = i;
    for (;;) {
        j = (j + 1u) & mask;
        uint32_t s = m->sess.conn_map[j];
        if (s == M_SLOT_NONE) break;
        uint32_t h = conn_hash(m, m->sess.peers[s].conn);
        /* Move s into the hole at i unless its home lies cyclically in (i, j]. */
        bool stays = (i <= j) ? (i < h && h <= j) : (i < h || h <= j);
        if (stays) continue;
        m->sess.conn_map[i] = s;
        i = j;
    }
    m->sess.conn_map[i] = M_SLOT_NONE;
}

/* The used slot with the smallest id greater than after_id (order[] is sorted by id). */
uint32_t m_next_by_id(const ccoip_master *m, uint64_t after_id)
{
    uint32_t lo = 0, hi = m->sess.order_n;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2u;
        if (m->sess.peers[m->sess.order[mid]].id <= after_id) {
            lo = mid + 1u;
        } else {
            hi = mid;
        }
    }
    return lo < m->sess.order_n ? m->sess.order[lo] : M_SLOT_NONE;
}

uint32_t m_slot_by_id(const ccoip_master *m, uint64_t id)
{
    if (id == 0) return M_SLOT_NONE;
    uint32_t s = m_next_by_id(m, id - 1u);
    return (s != M_SLOT_NONE && m->sess.peers[s].id == id) ? s : M_SLOT_NONE;
}

/* ------------------------------------------------------------------------ */
/* Init / deinit                                                             */
/* ------------------------------------------------------------------------ */

bool m_sess_init(ccoip_master *m)
{
    m_sessions *t = &m->sess;
    const uint64_t np = m->cfg.max_peers;
    t->next_id = 1;
    t->peers = calloc((size_t)np, sizeof(m_peer));
    t->order = calloc((size_t)np, sizeof(uint32_t));
    t->conn_cap = 4;
    while (t->conn_cap < 2u * np)
        t->conn_cap *= 2u;
    t->conn_map = malloc((size_t)t->conn_cap * sizeof(uint32_t));
    if (t->conn_map != NULL) memset(t->conn_map, 0xff, (size_t)t->conn_cap * sizeof(uint32_t));
    t->w_gid = calloc((size_t)np, sizeof(uint32_t));
    t->w_cnt = calloc((size_t)np, sizeof(uint32_t));
    t->w_map = malloc((size_t)t->conn_cap * sizeof(uint32_t));
    if (t->w_map != NULL) memset(t->w_map, 0xff, (size_t)t->conn_cap * sizeof(uint32_t));
    return t->peers != NULL && t->order != NULL && t->conn_map != NULL && t->w_gid != NULL &&
           t->w_cnt != NULL && t->w_map != NULL;
}

void m_sess_deinit(ccoip_master *m)
{
    free(m->sess.peers);
    free(m->sess.order);
    free(m->sess.conn_map);
    free(m->sess.w_gid);
    free(m->sess.w_cnt);
    free(m->sess.w_map);
}
