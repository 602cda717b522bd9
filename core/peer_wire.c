/*
 * peer_wire.c — the peer's p2p links (docs/protocol.md §6.4, §8.1): on a
 * TopologyPlan the peer drops the links of the previous epoch, dials its
 * ring successor (HELLO → HELLO_ACK) and accepts its predecessor, then
 * reports to the master. docs/core.md §3.3.
 *
 * Pools: connection 0's HELLO carries the dialer's p2p_pool_size in `step`
 * (0 = 1) and its HELLO_ACK the agreed size min(dialer's, acceptor's), also
 * 0 for 1; the dialer then dials connections 1 .. n-1 (HELLO `chunk` = the
 * index) and reports once every one is acknowledged. A pool of one sends
 * exactly the frames of a peer without pools.
 */
#include <string.h>

#include "peer_internal.h"

static void wire_send_hello(ccoip_peer *p, uint32_t k, const uint8_t *challenge);

static void wire_close(ccoip_peer *p, uint64_t conn)
{
    ccoip_action *a = sm_out_push(&p->out, CCOIP_ACT_CLOSE);
    if (a != NULL) a->conn = conn;
}

static void wire_report(ccoip_peer *p, bool ok)
{
    if (!p->wire.wiring) return;
    p->wire.wiring = false;
    p->wire.reported = true;
    ccoip_pb_peer_to_master env;
    memset(&env, 0, sizeof(env));
    env.call_id = p_call_new(p, PC_P2P, 0);
    env.body_case = CCOIP_PB_PEER_TO_MASTER_BODY_P2P_ESTABLISHED;
    env.body.p2p_established.epoch = p->wire.plan_epoch;
    env.body.p2p_established.success = ok;
    uint64_t unreachable = p->wire.plan_succ;
    if (!ok) {
        env.body.p2p_established.unreachable_peers = &unreachable;
        env.body.p2p_established.unreachable_peers_count = 1;
        sm_log(&p->out, CCOIP_LOG_WARN, "peer %U: cannot reach successor %U", p->id,
               p->wire.plan_succ);
    }
    p_send(p, &env);
}

/* The `step` of a HELLO / HELLO_ACK for a pool of n connections (0 means 1). */
static uint32_t wire_pool_code(uint32_t n)
{
    return n > 1u ? n : 0u;
}

static uint32_t wire_pool_decode(uint32_t step)
{
    return step == 0 ? 1u : step;
}

/* Forgets conn as an accepted link of the pool; true when it was one. */
static bool wire_rx_forget(ccoip_peer *p, uint64_t conn)
{
    if (conn == CCOIP_CONN_NONE) return false;
    for (uint32_t k = 0; k < CCOIP_P2P_POOL_MAX; k++) {
        if (p->wire.rx_conn[k] == conn) {
            p->wire.rx_conn[k] = CCOIP_CONN_NONE;
            return true;
        }
    }
    return false;
}

static void wire_rx_clear(ccoip_peer *p)
{
    for (uint32_t k = 0; k < CCOIP_P2P_POOL_MAX; k++)
        p->wire.rx_conn[k] = CCOIP_CONN_NONE;
    p->wire.rx_n = 0;
}

static void wire_tx_close_all(ccoip_peer *p)
{
    for (uint32_t k = 0; k < CCOIP_P2P_POOL_MAX; k++) {
        if (p->wire.tx_conn[k] != CCOIP_CONN_NONE) wire_close(p, p->wire.tx_conn[k]);
        p->wire.tx_conn[k] = CCOIP_CONN_NONE;
        p->wire.tx_state[k] = PT_NONE;
    }
    p->wire.tx_n = 0;
}

/* The index of conn in the dialled pool, or CCOIP_P2P_POOL_MAX. */
static uint32_t wire_tx_index(const ccoip_peer *p, uint64_t conn)
{
    if (conn == CCOIP_CONN_NONE) return CCOIP_P2P_POOL_MAX;
    for (uint32_t k = 0; k < CCOIP_P2P_POOL_MAX; k++) {
        if (p->wire.tx_conn[k] == conn) return k;
    }
    return CCOIP_P2P_POOL_MAX;
}

/* Dials connection k of the pool to the plan's successor. */
static void wire_dial(ccoip_peer *p, uint32_t k)
{
    ccoip_action *a = sm_out_push(&p->out, CCOIP_ACT_CONNECT);
    if (a == NULL) return;
    p->wire.tx_conn[k] = p->next_conn++;
    p->wire.tx_state[k] = PT_DIALING;
    a->conn = p->wire.tx_conn[k];
    if (p->wire.succ_url_len > 0) {
        a->data = (const uint8_t *)p->wire.succ_url;
        a->len = p->wire.succ_url_len;
    }
    if (p->wire.succ_ip_len > 0) memcpy(a->ip, p->wire.succ_ip, (size_t)p->wire.succ_ip_len);
    a->ip_len = p->wire.succ_ip_len;
    a->port = p->wire.succ_port;
}

static void wire_acc_free(ccoip_peer *p, uint32_t i, bool close)
{
    if (close) wire_close(p, p->wire.acc[i].conn);
    wire_rx_forget(p, p->wire.acc[i].conn);
    memset(&p->wire.acc[i], 0, sizeof(p->wire.acc[i]));
}

/* The proof of a HELLO (authenticated runs, §8.1): the link's key over the acceptor's challenge
 * and every field the HELLO asserts. */
void p_wire_hello_proof(const ccoip_peer *p, const uint8_t key[CCOIP_AUTH_KEY_BYTES],
                        const uint8_t challenge[CCOIP_AUTH_NONCE_BYTES], const ccoip_data_header *h,
                        uint8_t out[CCOIP_AUTH_MAC_BYTES])
{
    const uint64_t v[5] = {h->epoch, h->tag, h->seq, h->chunk, h->step};
    ccoip_auth_mac(&p->cfg.auth, key, "pccl p2p hello", challenge, CCOIP_AUTH_NONCE_BYTES, NULL, 0,
                   v, 5, out);
}

/* Sends a CHALLENGE with a fresh nonce on an accepted connection (§8.0). */
void p_auth_challenge(ccoip_peer *p, uint64_t conn, uint8_t nonce[CCOIP_AUTH_NONCE_BYTES])
{
    ccoip_auth_nonce(&p->cfg.auth, &p->auth_ctr, nonce);
    ccoip_data_header c;
    ccoip_data_header_init(&c, CCOIP_DATA_CHALLENGE);
    ccoip_auth_nonce_to_u64(nonce, &c.tag, &c.seq);
    if (sm_send_data_header(&p->out, &p->lim, conn, &c) != pcclSuccess) p->out.overflow = true;
}

/* Checks a HELLO on accepted connection i against the plan (§8.1). */
static void wire_acc_check(ccoip_peer *p, uint32_t i)
{
    p_acc *a = &p->wire.acc[i];
    const ccoip_data_header *h = &a->hello;
    if (h->kind == CCOIP_DATA_HELLO && h->step == CCOIP_DATA_PAIR_STEP) {
        p_pair_on_hello(p, i); /* a send / recv's link (§8.5) */
        return;
    }
    if (h->kind != CCOIP_DATA_HELLO || h->seq != p->id || h->chunk >= CCOIP_P2P_POOL_MAX ||
        h->step > CCOIP_P2P_POOL_MAX) {
        wire_acc_free(p, i, true);
        return;
    }
    const uint64_t known =
        p->wire.plan_epoch > p->wire.known_epoch ? p->wire.plan_epoch : p->wire.known_epoch;
    if (h->epoch > known && h->epoch - known > P_HELLO_EPOCH_AHEAD_MAX) {
        sm_log(&p->out, CCOIP_LOG_WARN,
               "peer %U: HELLO for epoch %U, far beyond epoch %U: closing conn %U", p->id, h->epoch,
               known, a->conn);
        wire_acc_free(p, i, true);
        return;
    }
    if (!p->wire.wiring && !p->wire.reported && h->epoch > p->wire.plan_epoch) {
        a->state = PA_HELD; /* its dialer got the plan first */
        return;
    }
    if ((p->wire.wiring || p->wire.reported) && h->epoch > p->wire.plan_epoch) {
        a->state = PA_HELD;
        return;
    }
    uint32_t want = wire_pool_decode(h->step);
    uint32_t n = want < p->cfg.p2p_pool_size ? want : p->cfg.p2p_pool_size;
    bool ok = h->epoch == p->wire.plan_epoch && h->tag == p->wire.plan_pred && p->wire.plan_n >= 2;
    if (ok && h->chunk == 0) {
        ok = p->wire.rx_conn[0] == CCOIP_CONN_NONE;
    } else if (ok) {
        /* Connection 0 set the pool's size; the others follow its HELLO_ACK. */
        ok = p->wire.rx_n != 0 && h->chunk < p->wire.rx_n && n == p->wire.rx_n &&
             p->wire.rx_conn[h->chunk] == CCOIP_CONN_NONE;
    }
    if (!ok) {
        wire_acc_free(p, i, true);
        return;
    }
    if (ccoip_auth_on(&p->cfg.auth)) {
        uint8_t proof[CCOIP_AUTH_MAC_BYTES];
        p_wire_hello_proof(p, p->wire.pred_key, a->challenge, h, proof);
        if (!ccoip_auth_equal(proof, a->proof, CCOIP_AUTH_MAC_BYTES)) {
            sm_log(&p->out, CCOIP_LOG_WARN,
                   "peer %U: HELLO on conn %U with a wrong proof (not introduced by the master "
                   "for epoch %U): closing",
                   p->id, a->conn, h->epoch);
            wire_acc_free(p, i, true);
            return;
        }
    }
    if (h->chunk == 0) p->wire.rx_n = n;
    a->state = PA_UP;
    a->epoch = h->epoch;
    p->wire.rx_conn[h->chunk] = a->conn;
    ccoip_data_header ack;
    ccoip_data_header_init(&ack, CCOIP_DATA_HELLO_ACK);
    ack.epoch = h->epoch;
    ack.tag = h->tag;
    ack.seq = h->seq;
    ack.chunk = h->chunk;
    ack.step = wire_pool_code(n);
    if (sm_send_data_header(&p->out, &p->lim, a->conn, &ack) != pcclSuccess) {
        p->out.overflow = true;
    }
}

void p_wire_acc_close(ccoip_peer *p, uint32_t k)
{
    wire_acc_free(p, k, true);
}

void p_wire_close_all(ccoip_peer *p)
{
    wire_tx_close_all(p);
    for (uint32_t i = 0; i < p->wire.acc_cap; i++) {
        if (p->wire.acc[i].state != PA_FREE) wire_acc_free(p, i, true);
    }
    wire_rx_clear(p);
    p->wire.wiring = false;
    p->wire.reported = false;
}

void p_wire_on_plan(ccoip_peer *p, const ccoip_pb_topology_plan *plan)
{
    if (p->state != PS_PENDING && p->state != PS_ACCEPTED) return;
    if (plan->epoch <= p->wire.plan_epoch || plan->ring_count == 0 ||
        plan->ring_count > p->cfg.max_world) {
        p_fail(p, "topology plan of an old epoch or an impossible ring");
        return;
    }
    uint32_t n = (uint32_t)plan->ring_count, rank = UINT32_MAX;
    for (uint32_t i = 0; i < n; i++) {
        if (plan->ring[i] == p->id) {
            if (rank != UINT32_MAX)
                rank = UINT32_MAX - 1u;
            else
                rank = i;
        }
    }
    if (rank >= n) {
        p_fail(p, "topology plan without us (or with us twice)");
        return;
    }
    /* The group's tuned table (§6.8.5): the plan's, or none. */
    if (plan->algo_table.len == 0) {
        ccoip_algo_table_clear(&p->ring.table);
    } else if (ccoip_algo_table_decode(plan->algo_table.data, (size_t)plan->algo_table.len,
                                       &p->ring.table) != pcclSuccess) {
        p_fail(p, "topology plan with a malformed algorithm table");
        return;
    }
    uint64_t succ = plan->ring[(rank + 1u) % n], pred = plan->ring[(rank + n - 1u) % n];
    const ccoip_pb_endpoint *ep = NULL;
    if (n >= 2) {
        for (uint64_t k = 0; k < plan->neighbours_count && ep == NULL; k++) {
            const ccoip_pb_peer_info *nb = &plan->neighbours[k];
            if (nb->peer_id != succ) continue;
            for (uint64_t e = 0; e < nb->endpoints_count; e++) {
                if (nb->endpoints[e].kind == CCOIP_PB_ENDPOINT_KIND_P2P) {
                    ep = &nb->endpoints[e];
                    break;
                }
            }
        }
        if (ep == NULL || ep->url.len >= CCOIP_URL_MAX ||
            (ep->ip.len != 0 && ep->ip.len != 4 && ep->ip.len != 16)) {
            p_fail(p, "topology plan without a usable successor endpoint");
            return;
        }
    }
    if (ccoip_auth_on(&p->cfg.auth) && (plan->group_key.len != CCOIP_AUTH_KEY_BYTES ||
                                        (n >= 2 && (plan->pred_key.len != CCOIP_AUTH_KEY_BYTES ||
                                                    plan->succ_key.len != CCOIP_AUTH_KEY_BYTES)))) {
        p_fail(p, "topology plan without link keys in an authenticated run");
        return;
    }
    /* The previous epoch's ring is gone: nothing of it completes (§6.9). */
    p_ring_on_link_lost(p, CCOIP_CONN_NONE);
    wire_tx_close_all(p);
    for (uint32_t i = 0; i < p->wire.acc_cap; i++) {
        if (p->wire.acc[i].state == PA_UP ||
            (p->wire.acc[i].state == PA_HELD && p->wire.acc[i].hello.epoch < plan->epoch)) {
            wire_acc_free(p, i, true);
        }
    }
    wire_rx_clear(p);
    p->ring.ready = false;
    p->wire.plan_epoch = plan->epoch;
    p->wire.plan_n = n;
    p->wire.plan_rank = rank;
    p->wire.plan_pred = pred;
    p->wire.plan_succ = succ;
    memcpy(p->wire.plan_ring, plan->ring, (size_t)n * sizeof(uint64_t));
    p->wire.plan_world = plan->has_world ? plan->world.peer_group : n;
    memset(p->wire.pred_key, 0, sizeof(p->wire.pred_key));
    memset(p->wire.group_key, 0, sizeof(p->wire.group_key));
    if (plan->group_key.len == CCOIP_AUTH_KEY_BYTES)
        memcpy(p->wire.group_key, plan->group_key.data, CCOIP_AUTH_KEY_BYTES);
    memset(p->wire.succ_key, 0, sizeof(p->wire.succ_key));
    if (n >= 2 && plan->pred_key.len == CCOIP_AUTH_KEY_BYTES &&
        plan->succ_key.len == CCOIP_AUTH_KEY_BYTES) {
        memcpy(p->wire.pred_key, plan->pred_key.data, CCOIP_AUTH_KEY_BYTES);
        memcpy(p->wire.succ_key, plan->succ_key.data, CCOIP_AUTH_KEY_BYTES);
    }
    p->wire.wiring = true;
    p->wire.reported = false;
    sm_log(&p->out, CCOIP_LOG_INFO, "peer %U: plan epoch %U, rank %u of %u", p->id, plan->epoch,
           rank, n);
    if (n == 1) {
        wire_report(p, true);
        return;
    }
    p->wire.succ_url_len = (uint32_t)ep->url.len;
    if (ep->url.len > 0) memcpy(p->wire.succ_url, ep->url.data, (size_t)ep->url.len);
    p->wire.succ_url[ep->url.len] = '\0';
    p->wire.succ_ip_len = (uint32_t)ep->ip.len;
    if (ep->ip.len > 0) memcpy(p->wire.succ_ip, ep->ip.data, (size_t)ep->ip.len);
    p->wire.succ_port = ep->port;
    wire_dial(p, 0);
    for (uint32_t i = 0; i < p->wire.acc_cap; i++) {
        if (p->wire.acc[i].state == PA_HELD && p->wire.acc[i].hello.epoch == p->wire.plan_epoch) {
            wire_acc_check(p, i);
        }
    }
}

/* Admission (hostile networks, docs/protocol.md §8.1): when every slot is taken, the connection
 * waiting longest for its HELLO makes room for the new one, so silent connections cannot keep
 * the ring's own predecessor out (it sends its HELLO at once; they only ever wait). Links that
 * are up, and HELLOs held for a coming plan, are never displaced. */
static void wire_acc_make_room(ccoip_peer *p)
{
    uint32_t oldest = UINT32_MAX;
    for (uint32_t i = 0; i < p->wire.acc_cap; i++) {
        const p_acc *a = &p->wire.acc[i];
        if (a->state == PA_FREE) return;
        if ((a->state == PA_WAIT_HELLO || a->state == PA_PAIR_HELD || a->state == PA_PAIR_IDLE) &&
            (oldest == UINT32_MAX || a->since_ns < p->wire.acc[oldest].since_ns)) {
            oldest = i;
        }
    }
    if (oldest == UINT32_MAX) return;
    sm_log(&p->out, CCOIP_LOG_WARN,
           "peer %U: incoming links full: closing conn %U (no HELLO yet) to make room", p->id,
           p->wire.acc[oldest].conn);
    wire_acc_free(p, oldest, true);
}

bool p_wire_on_conn_up(ccoip_peer *p, const ccoip_event *ev)
{
    if (ev->accepted) {
        if (ev->listener != CCOIP_LISTENER_P2P || p->state == PS_FAILED || p->state == PS_LEFT) {
            wire_close(p, ev->conn);
            return true;
        }
        wire_acc_make_room(p);
        for (uint32_t i = 0; i < p->wire.acc_cap; i++) {
            if (p->wire.acc[i].state == PA_FREE) {
                p->wire.acc[i].state = PA_WAIT_HELLO;
                p->wire.acc[i].conn = ev->conn;
                p->wire.acc[i].since_ns = p->now;
                if (ccoip_auth_on(&p->cfg.auth))
                    p_auth_challenge(p, ev->conn, p->wire.acc[i].challenge);
                return true;
            }
        }
        sm_log(&p->out, CCOIP_LOG_WARN, "peer %U: too many incoming links, closing conn %U", p->id,
               ev->conn);
        wire_close(p, ev->conn);
        return true;
    }
    uint32_t k = wire_tx_index(p, ev->conn);
    if (k >= CCOIP_P2P_POOL_MAX || p->wire.tx_state[k] != PT_DIALING) return false;
    if (ccoip_auth_on(&p->cfg.auth)) {
        p->wire.tx_state[k] = PT_CHALLENGED; /* the HELLO answers the acceptor's CHALLENGE */
        return true;
    }
    wire_send_hello(p, k, NULL);
    return true;
}

/* Sends connection k's HELLO (§8.1); in an authenticated run with its proof over the
 * acceptor's challenge. */
static void wire_send_hello(ccoip_peer *p, uint32_t k, const uint8_t *challenge)
{
    ccoip_data_header h;
    ccoip_data_header_init(&h, CCOIP_DATA_HELLO);
    h.epoch = p->wire.plan_epoch;
    h.tag = p->id;
    h.seq = p->wire.plan_succ;
    h.chunk = k;
    h.step = wire_pool_code(p->cfg.p2p_pool_size);
    pcclResult_t r;
    if (challenge != NULL) {
        uint8_t proof[CCOIP_AUTH_MAC_BYTES];
        p_wire_hello_proof(p, p->wire.succ_key, challenge, &h, proof);
        r = sm_send_data_proof(&p->out, &p->lim, p->wire.tx_conn[k], &h, proof);
    } else {
        r = sm_send_data_header(&p->out, &p->lim, p->wire.tx_conn[k], &h);
    }
    if (r != pcclSuccess) p->out.overflow = true;
    p->wire.tx_state[k] = PT_HELLO_SENT;
}

bool p_wire_on_conn_closed(ccoip_peer *p, uint64_t conn)
{
    uint32_t k = wire_tx_index(p, conn);
    if (k < CCOIP_P2P_POOL_MAX) {
        p->wire.tx_conn[k] = CCOIP_CONN_NONE;
        p->wire.tx_state[k] = PT_NONE;
        wire_report(p, false); /* nothing when the pool was already reported */
        p_ring_on_link_lost(p, conn);
        return true;
    }
    for (uint32_t i = 0; i < p->wire.acc_cap; i++) {
        if (p->wire.acc[i].state != PA_FREE && p->wire.acc[i].conn == conn) {
            wire_acc_free(p, i, false);
            p_ring_on_link_lost(p, conn);
            return true;
        }
    }
    return false;
}

bool p_wire_on_recv(ccoip_peer *p, uint64_t conn, const uint8_t *data, uint64_t len)
{
    ccoip_data_header h;
    uint32_t k = wire_tx_index(p, conn);
    if (k < CCOIP_P2P_POOL_MAX) {
        pcclResult_t r = ccoip_data_header_decode(data, len, &p->lim, &h);
        if (r == pcclSuccess && len == CCOIP_DATA_HEADER_BYTES &&
            p->wire.tx_state[k] == PT_CHALLENGED && h.kind == CCOIP_DATA_CHALLENGE) {
            uint8_t challenge[CCOIP_AUTH_NONCE_BYTES];
            ccoip_auth_nonce_from_u64(h.tag, h.seq, challenge);
            wire_send_hello(p, k, challenge);
            return true;
        }
        bool ok = r == pcclSuccess && len == CCOIP_DATA_HEADER_BYTES &&
                  p->wire.tx_state[k] == PT_HELLO_SENT && h.kind == CCOIP_DATA_HELLO_ACK &&
                  h.epoch == p->wire.plan_epoch && h.tag == p->id && h.seq == p->wire.plan_succ &&
                  h.chunk == k;
        uint32_t n = ok ? wire_pool_decode(h.step) : 0;
        if (ok) ok = k == 0 ? n <= p->cfg.p2p_pool_size : n == p->wire.tx_n;
        if (!ok) {
            sm_log(&p->out, CCOIP_LOG_WARN, "peer %U: bad frame from successor, closing link",
                   p->id);
            wire_close(p, conn);
            p_wire_on_conn_closed(p, conn);
            return true;
        }
        p->wire.tx_state[k] = PT_UP;
        if (k == 0) {
            p->wire.tx_n = n;
            for (uint32_t j = 1; j < n; j++)
                wire_dial(p, j);
        }
        for (uint32_t j = 0; j < p->wire.tx_n; j++) {
            if (p->wire.tx_state[j] != PT_UP) return true;
        }
        wire_report(p, true);
        return true;
    }
    for (uint32_t i = 0; i < p->wire.acc_cap; i++) {
        p_acc *a = &p->wire.acc[i];
        if (a->state == PA_FREE || a->conn != conn) continue;
        pcclResult_t r = ccoip_data_header_decode(data, len, &p->lim, &h);
        /* Authenticated runs: exactly a HELLO with its proof; otherwise a bare header. */
        const uint64_t proof_len = ccoip_auth_on(&p->cfg.auth) ? CCOIP_DATA_PROOF_BYTES : 0;
        /* A kept pair link (PA_PAIR_IDLE) takes its sender's next pair HELLO (§8.5). */
        const bool next_pair = a->state == PA_PAIR_IDLE && r == pcclSuccess &&
                               h.kind == CCOIP_DATA_HELLO && h.step == CCOIP_DATA_PAIR_STEP;
        if (r != pcclSuccess || len != CCOIP_DATA_HEADER_BYTES + proof_len ||
            h.length != proof_len || (a->state != PA_WAIT_HELLO && !next_pair)) {
            sm_log(&p->out, CCOIP_LOG_WARN, "peer %U: bad frame on incoming conn %U, closing",
                   p->id, conn);
            const bool was_link = wire_rx_forget(p, conn) || a->state == PA_PAIR;
            wire_acc_free(p, i, true);
            if (was_link) p_ring_on_link_lost(p, conn);
            return true;
        }
        a->hello = h;
        if (next_pair) a->since_ns = p->now; /* a held HELLO's deadline counts from now */
        if (proof_len > 0) memcpy(a->proof, data + CCOIP_DATA_HEADER_BYTES, CCOIP_DATA_PROOF_BYTES);
        wire_acc_check(p, i);
        return true;
    }
    return false;
}

/* An accepted connection must be up (a valid HELLO for a plan we have) within evict_ms of being
 * accepted; one still waiting for its HELLO, or holding one for a plan that never came, is
 * closed (docs/protocol.md §8.1). */
static uint64_t wire_acc_deadline(const ccoip_peer *p, const p_acc *a)
{
    return sm_add_sat(a->since_ns, sm_ms(p->ctl.evict_ms));
}

void p_wire_timers(ccoip_peer *p)
{
    for (uint32_t i = 0; i < p->wire.acc_cap; i++) {
        p_acc *a = &p->wire.acc[i];
        if ((a->state != PA_WAIT_HELLO && a->state != PA_HELD && a->state != PA_PAIR_HELD) ||
            p->now < wire_acc_deadline(p, a)) {
            continue;
        }
        sm_log(&p->out, CCOIP_LOG_WARN, "peer %U: incoming conn %U %s for evict_ms: closing", p->id,
               a->conn, a->state == PA_WAIT_HELLO ? "sent no HELLO" : "held its HELLO");
        wire_acc_free(p, i, true);
    }
}

uint64_t p_wire_deadline(const ccoip_peer *p)
{
    uint64_t d = CCOIP_NO_DEADLINE;
    for (uint32_t i = 0; i < p->wire.acc_cap; i++) {
        const p_acc *a = &p->wire.acc[i];
        if (a->state != PA_WAIT_HELLO && a->state != PA_HELD && a->state != PA_PAIR_HELD) continue;
        const uint64_t t = wire_acc_deadline(p, a);
        if (t < d) d = t;
    }
    return d;
}
