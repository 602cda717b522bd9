/*
 * master_splice.c — the relay for ring links neither end can dial (two peers
 * behind NAT as neighbours; docs/protocol.md §8.6). Both ends of such a link
 * dial the master's relay listener and send a RELAY_JOIN naming the link, the
 * pool connection and their role; the master pairs the two joins of the
 * same connection and has its driver splice them (CCOIP_ACT_SPLICE): from
 * then on the bytes flow end to end and the link's own HELLO (§8.1) runs
 * through it. Bounded for a hostile network: M_SPLICE_MAX connections, each
 * closed unless spliced within evict_ms, a join for a link the current plan
 * does not relay closed at once; authenticated runs: the join proves the
 * link's key over the master's challenge.
 */
#include <stdlib.h>
#include <string.h>

#include "master_internal.h"

bool m_splice_init(ccoip_master *m)
{
    m->spl.cap = M_SPLICE_MAX;
    m->spl.s = calloc(M_SPLICE_MAX, sizeof(m_splice));
    return m->spl.s != NULL;
}

void m_splice_deinit(ccoip_master *m)
{
    free(m->spl.s);
    m->spl.s = NULL;
}

void ccoip_master_set_relay_port(ccoip_master *m, uint32_t port)
{
    if (m != NULL) m->spl.relay_port = port;
}

static void splice_close(ccoip_master *m, m_splice *x)
{
    ccoip_action *a = sm_out_push(&m->out, CCOIP_ACT_CLOSE);
    if (a != NULL) a->conn = x->conn;
    memset(x, 0, sizeof(*x));
}

static m_splice *splice_of(ccoip_master *m, uint64_t conn)
{
    for (uint32_t i = 0; i < m->spl.cap; i++) {
        if (m->spl.s[i].st != MSP_FREE && m->spl.s[i].conn == conn) return &m->spl.s[i];
    }
    return NULL;
}

void m_splice_on_accept(ccoip_master *m, uint64_t conn)
{
    m_splice *free_x = NULL, *oldest = NULL;
    for (uint32_t i = 0; i < m->spl.cap; i++) {
        m_splice *x = &m->spl.s[i];
        if (x->st == MSP_FREE) {
            if (free_x == NULL) free_x = x;
        } else if (x->st != MSP_SPLICED && (oldest == NULL || x->since_ns < oldest->since_ns)) {
            oldest = x;
        }
    }
    if (free_x == NULL && m->spl.relay_port != 0 && oldest != NULL) {
        /* Full: the connection waiting longest makes room (silent ones cannot lock ends out). */
        sm_log(&m->out, CCOIP_LOG_WARN,
               "master: relay connections full: closing conn %U (not spliced) to make room",
               oldest->conn);
        splice_close(m, oldest);
        free_x = oldest;
    }
    if (free_x == NULL || m->spl.relay_port == 0) {
        ccoip_action *a = sm_out_push(&m->out, CCOIP_ACT_CLOSE);
        if (a != NULL) a->conn = conn;
        return;
    }
    free_x->st = MSP_WAIT_JOIN;
    free_x->conn = conn;
    free_x->since_ns = m->now;
    if (!ccoip_auth_on(&m->cfg.auth)) return;
    /* The join answers this (docs/protocol.md §8.0). */
    ccoip_auth_nonce(&m->cfg.auth, &m->auth_ctr, free_x->challenge);
    ccoip_data_header c;
    ccoip_data_header_init(&c, CCOIP_DATA_CHALLENGE);
    ccoip_auth_nonce_to_u64(free_x->challenge, &c.tag, &c.seq);
    if (sm_send_data_header(&m->out, &m->lim, conn, &c) != pcclSuccess) m->out.overflow = true;
}

/* The link src -> dst is relayed in the current epoch's plan. */
static bool splice_planned(const ccoip_master *m, uint64_t src, uint64_t dst)
{
    const uint32_t a = m_slot_by_id(m, src), b = m_slot_by_id(m, dst);
    if (a == M_SLOT_NONE || b == M_SLOT_NONE) return false;
    const m_peer *p = &m->sess.peers[a];
    return p->relay_succ && p->succ == b && p->ring_size >= 2;
}

bool m_splice_on_recv(ccoip_master *m, uint64_t conn, const uint8_t *data, uint64_t len)
{
    m_splice *x = splice_of(m, conn);
    if (x == NULL) return false;
    ccoip_data_header h;
    const bool auth = ccoip_auth_on(&m->cfg.auth);
    const uint64_t proof_len = auth ? CCOIP_DATA_PROOF_BYTES : 0u;
    bool ok = x->st == MSP_WAIT_JOIN &&
              ccoip_data_header_decode(data, len, &m->lim, &h) == pcclSuccess &&
              h.kind == CCOIP_DATA_RELAY_JOIN && h.length == proof_len &&
              len == CCOIP_DATA_HEADER_BYTES + proof_len && h.chunk < CCOIP_P2P_POOL_MAX &&
              h.step <= 1u && h.epoch == m->topo.epoch && splice_planned(m, h.tag, h.seq);
    if (ok && auth) {
        uint8_t key[CCOIP_AUTH_KEY_BYTES], want[CCOIP_AUTH_MAC_BYTES];
        m_auth_link_key(m, h.epoch, h.tag, h.seq, key);
        const uint64_t v[5] = {h.epoch, h.tag, h.seq, h.chunk, h.step};
        ccoip_auth_mac(&m->cfg.auth, key, "pccl relay join", x->challenge, CCOIP_AUTH_NONCE_BYTES,
                       NULL, 0, v, 5, want);
        ok = ccoip_auth_equal(want, data + CCOIP_DATA_HEADER_BYTES, CCOIP_AUTH_MAC_BYTES);
    }
    for (uint32_t i = 0; ok && i < m->spl.cap; i++) {
        const m_splice *y = &m->spl.s[i];
        ok = !(y->st == MSP_JOINED && y->epoch == h.epoch && y->src == h.tag && y->dst == h.seq &&
               y->chunk == h.chunk && y->role == h.step); /* that end already joined */
    }
    if (!ok) {
        sm_log(&m->out, CCOIP_LOG_WARN,
               "master: relay conn %U: not a join of a link this epoch relays: closing", conn);
        splice_close(m, x);
        return true;
    }
    x->st = MSP_JOINED;
    x->epoch = h.epoch;
    x->src = h.tag;
    x->dst = h.seq;
    x->chunk = h.chunk;
    x->role = h.step;
    x->since_ns = m->now;
    for (uint32_t i = 0; i < m->spl.cap; i++) {
        m_splice *y = &m->spl.s[i];
        if (y == x || y->st != MSP_JOINED || y->epoch != x->epoch || y->src != x->src ||
            y->dst != x->dst || y->chunk != x->chunk || y->role == x->role) {
            continue;
        }
        ccoip_action *a = sm_out_push(&m->out, CCOIP_ACT_SPLICE);
        if (a == NULL) return true;
        a->conn = x->conn;
        a->tag = y->conn;
        x->st = MSP_SPLICED;
        y->st = MSP_SPLICED;
        sm_log(&m->out, CCOIP_LOG_INFO,
               "master: relaying link %U -> %U (connection %u) of epoch %U", x->src, x->dst,
               x->chunk, x->epoch);
        break;
    }
    return true;
}

bool m_splice_on_closed(ccoip_master *m, uint64_t conn)
{
    m_splice *x = splice_of(m, conn);
    if (x == NULL) return false;
    memset(x, 0, sizeof(*x));
    return true;
}

void m_splice_timers(ccoip_master *m)
{
    for (uint32_t i = 0; i < m->spl.cap; i++) {
        m_splice *x = &m->spl.s[i];
        if (x->st == MSP_FREE || x->st == MSP_SPLICED) continue;
        if (m->now < sm_add_sat(x->since_ns, sm_ms(m->cfg.evict_ms))) continue;
        sm_log(&m->out, CCOIP_LOG_WARN, "master: relay conn %U %s for evict_ms: closing", x->conn,
               x->st == MSP_WAIT_JOIN ? "sent no join" : "found no partner");
        splice_close(m, x);
    }
}

uint64_t m_splice_deadline(const ccoip_master *m)
{
    uint64_t d = CCOIP_NO_DEADLINE;
    for (uint32_t i = 0; i < m->spl.cap; i++) {
        const m_splice *x = &m->spl.s[i];
        if (x->st == MSP_FREE || x->st == MSP_SPLICED) continue;
        const uint64_t t = sm_add_sat(x->since_ns, sm_ms(m->cfg.evict_ms));
        if (t < d) d = t;
    }
    return d;
}
