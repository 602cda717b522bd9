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

static void wire_send_hello(ccoip_peer *p, uint32_t s, uint32_t k, const uint8_t *challenge);

static void wire_close(ccoip_peer *p, uint64_t conn)
{
    ccoip_action *a = sm_out_push(&p->out, CCOIP_ACT_CLOSE);
    if (a != NULL) a->conn = conn;
}

/* Side s's pool: its connections, their states and its agreed size (tx_* / rx_*). */
static uint64_t *side_conn(ccoip_peer *p, uint32_t s)
{
    return s == P_SIDE_SUCC ? p->wire.tx_conn : p->wire.rx_conn;
}

static p_tx_state *side_state(ccoip_peer *p, uint32_t s)
{
    return s == P_SIDE_SUCC ? p->wire.tx_state : p->wire.rx_state;
}

static uint32_t *side_n(ccoip_peer *p, uint32_t s)
{
    return s == P_SIDE_SUCC ? &p->wire.tx_n : &p->wire.rx_n;
}

/* The link of side s runs from src to dst (its HELLO's tag and seq, whoever dials). */
static uint64_t side_src(const ccoip_peer *p, uint32_t s)
{
    return s == P_SIDE_SUCC ? p->id : p->wire.plan_pred;
}

static uint64_t side_dst(const ccoip_peer *p, uint32_t s)
{
    return s == P_SIDE_SUCC ? p->wire.plan_succ : p->id;
}

/* The neighbour at the other end of side s. */
static uint64_t side_peer(const ccoip_peer *p, uint32_t s)
{
    return s == P_SIDE_SUCC ? p->wire.plan_succ : p->wire.plan_pred;
}

/* The link key of side s (authenticated runs, §8.1): the same at both of its ends. */
static const uint8_t *side_key(const ccoip_peer *p, uint32_t s)
{
    return s == P_SIDE_SUCC ? p->wire.succ_key : p->wire.pred_key;
}

static void wire_report(ccoip_peer *p, bool ok, uint32_t failed_side)
{
    if (!p->wire.wiring) return;
    p->wire.wiring = false;
    p->wire.reported = true;
    /* One report outstanding at most: the master answered (or, crossing an early verdict,
     * dropped) an older plan's before it sent the newer one (a protocol breaker that sends plan
     * after plan cannot fill the call table). */
    p_call_drop_op(p, PC_P2P, 0);
    ccoip_pb_peer_to_master env;
    memset(&env, 0, sizeof(env));
    env.call_id = p_call_new(p, PC_P2P, 0);
    env.body_case = CCOIP_PB_PEER_TO_MASTER_BODY_P2P_ESTABLISHED;
    env.body.p2p_established.epoch = p->wire.plan_epoch;
    env.body.p2p_established.success = ok;
    /* The peer we could not dial (§6.4: the directed dial reporter -> it failed). */
    uint64_t unreachable = side_peer(p, failed_side);
    if (!ok) {
        env.body.p2p_established.unreachable_peers = &unreachable;
        env.body.p2p_established.unreachable_peers_count = 1;
        sm_log(&p->out, CCOIP_LOG_WARN, "peer %U: cannot reach %s %U%s", p->id,
               failed_side == P_SIDE_SUCC ? "successor" : "predecessor", unreachable,
               p->wire.relayed[failed_side] ? " through the master's relay" : "");
    }
    p_send(p, &env);
}

/* Reports success once every pool this peer dials is acknowledged (§6.4). */
static void wire_report_if_up(ccoip_peer *p)
{
    for (uint32_t s = 0; s < 2u; s++) {
        if (!p->wire.dials[s]) continue;
        const uint32_t n = *side_n(p, s);
        if (n == 0) return;
        for (uint32_t j = 0; j < n; j++) {
            if (side_state(p, s)[j] != PT_UP) return;
        }
    }
    wire_report(p, true, P_SIDE_SUCC);
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

/* Forgets conn as an accepted connection of either side's pool; true when it was one. */
static bool wire_acc_forget(ccoip_peer *p, uint64_t conn)
{
    if (conn == CCOIP_CONN_NONE) return false;
    for (uint32_t s = 0; s < 2u; s++) {
        if (p->wire.dials[s]) continue;
        for (uint32_t k = 0; k < CCOIP_P2P_POOL_MAX; k++) {
            if (side_conn(p, s)[k] == conn) {
                side_conn(p, s)[k] = CCOIP_CONN_NONE;
                side_state(p, s)[k] = PT_NONE;
                return true;
            }
        }
    }
    return false;
}

/* Closes the connections this peer dialled (accepted ones close with their acc slot) and
 * empties both pools. */
static void wire_links_reset(ccoip_peer *p)
{
    p_relay_reset(p);
    for (uint32_t s = 0; s < 2u; s++) {
        for (uint32_t k = 0; k < CCOIP_P2P_POOL_MAX; k++) {
            if (p->wire.dials[s] && side_conn(p, s)[k] != CCOIP_CONN_NONE)
                wire_close(p, side_conn(p, s)[k]);
            side_conn(p, s)[k] = CCOIP_CONN_NONE;
            side_state(p, s)[k] = PT_NONE;
        }
        *side_n(p, s) = 0;
    }
}

/* Finds conn among the connections this peer dialled: true with its side and index. */
static bool wire_dialled(const ccoip_peer *p, uint64_t conn, uint32_t *s_out, uint32_t *k_out)
{
    if (conn == CCOIP_CONN_NONE) return false;
    for (uint32_t s = 0; s < 2u; s++) {
        if (!p->wire.dials[s]) continue;
        const uint64_t *c = s == P_SIDE_SUCC ? p->wire.tx_conn : p->wire.rx_conn;
        for (uint32_t k = 0; k < CCOIP_P2P_POOL_MAX; k++) {
            if (c[k] == conn) {
                *s_out = s;
                *k_out = k;
                return true;
            }
        }
    }
    return false;
}

/* Dials connection k of side s's pool (the neighbour's p2p listener, or the master's relay). */
static void wire_dial(ccoip_peer *p, uint32_t s, uint32_t k)
{
    ccoip_action *a = sm_out_push(&p->out, CCOIP_ACT_CONNECT);
    if (a == NULL) return;
    side_conn(p, s)[k] = p->next_conn++;
    side_state(p, s)[k] = PT_DIALING;
    a->conn = side_conn(p, s)[k];
    p_wire_connect_to(p, s, a);
}

void p_wire_connect_to(const ccoip_peer *p, uint32_t s, ccoip_action *a)
{
    if (p->wire.dial_url_len[s] > 0) {
        a->data = (const uint8_t *)p->wire.dial_url[s];
        a->len = p->wire.dial_url_len[s];
    }
    if (p->wire.dial_ip_len[s] > 0)
        memcpy(a->ip, p->wire.dial_ip[s], (size_t)p->wire.dial_ip_len[s]);
    a->ip_len = p->wire.dial_ip_len[s];
    a->port = p->wire.dial_port[s];
}

static void wire_acc_free(ccoip_peer *p, uint32_t i, bool close)
{
    if (close) wire_close(p, p->wire.acc[i].conn);
    wire_acc_forget(p, p->wire.acc[i].conn);
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

/* The side whose link a HELLO names, as its acceptor (§8.1): PRED when the predecessor dials
 * its link to us (the default), SUCC when the successor dials our link to it (the plan reversed
 * it); 2 when neither. */
static uint32_t wire_acc_side(const ccoip_peer *p, const ccoip_data_header *h)
{
    if (h->tag == p->wire.plan_pred && h->seq == p->id && !p->wire.dials[P_SIDE_PRED])
        return P_SIDE_PRED;
    if (h->tag == p->id && h->seq == p->wire.plan_succ && !p->wire.dials[P_SIDE_SUCC])
        return P_SIDE_SUCC;
    return 2u;
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
    if (h->kind != CCOIP_DATA_HELLO || (h->seq != p->id && h->tag != p->id) ||
        h->chunk >= CCOIP_P2P_POOL_MAX || h->step > CCOIP_P2P_POOL_MAX) {
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
    const uint32_t want = wire_pool_decode(h->step);
    const uint32_t n = want < p->cfg.p2p_pool_size ? want : p->cfg.p2p_pool_size;
    const uint32_t s = wire_acc_side(p, h);
    bool ok = h->epoch == p->wire.plan_epoch && s < 2u && p->wire.plan_n >= 2;
    uint64_t *conns = ok ? side_conn(p, s) : NULL;
    uint32_t *pn = ok ? side_n(p, s) : NULL;
    if (ok && h->chunk == 0) {
        ok = conns[0] == CCOIP_CONN_NONE;
    } else if (ok) {
        /* Connection 0 set the pool's size; the others follow its HELLO_ACK. */
        ok = *pn != 0 && h->chunk < *pn && n == *pn && conns[h->chunk] == CCOIP_CONN_NONE;
    }
    if (!ok) {
        wire_acc_free(p, i, true);
        return;
    }
    if (ccoip_auth_on(&p->cfg.auth)) {
        uint8_t proof[CCOIP_AUTH_MAC_BYTES];
        p_wire_hello_proof(p, side_key(p, s), a->challenge, h, proof);
        if (!ccoip_auth_equal(proof, a->proof, CCOIP_AUTH_MAC_BYTES)) {
            sm_log(&p->out, CCOIP_LOG_WARN,
                   "peer %U: HELLO on conn %U with a wrong proof (not introduced by the master "
                   "for epoch %U): closing",
                   p->id, a->conn, h->epoch);
            wire_acc_free(p, i, true);
            return;
        }
    }
    if (h->chunk == 0) *pn = n;
    if (h->chunk == 0 && s == P_SIDE_PRED && p->wire.relayed[P_SIDE_PRED]) {
        for (uint32_t j = 1; j < n; j++)
            p_relay_dial_acc(p, j); /* the pool's other connections, through the relay too */
    }
    a->state = PA_UP;
    a->epoch = h->epoch;
    conns[h->chunk] = a->conn;
    side_state(p, s)[h->chunk] = PT_UP;
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
    wire_links_reset(p);
    for (uint32_t i = 0; i < p->wire.acc_cap; i++) {
        if (p->wire.acc[i].state != PA_FREE) wire_acc_free(p, i, true);
    }
    p->wire.wiring = false;
    p->wire.reported = false;
}

void p_wire_on_plan(ccoip_peer *p, const ccoip_pb_topology_plan *plan, uint32_t deadline_ms)
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
    const uint64_t succ = plan->ring[(rank + 1u) % n], pred = plan->ring[(rank + n - 1u) % n];
    /* Who dials each link (§6.4): by default we dial the successor and accept the predecessor. */
    const uint32_t bits = n >= 2 ? plan->dial : 0u;
    /* Neither end can dial: both dial the master's relay (§8.6); we go on as the source's
     * dialler (SUCC) or as the destination's acceptor (PRED). */
    const bool relayed[2] = {(bits & CCOIP_PB_DIAL_SUCC_RELAYED) != 0 && plan->relay_port != 0,
                             (bits & CCOIP_PB_DIAL_PRED_RELAYED) != 0 && plan->relay_port != 0};
    const bool dials[2] = {relayed[0] || (bits & CCOIP_PB_DIAL_SUCC_REVERSED) == 0,
                           !relayed[1] && (bits & CCOIP_PB_DIAL_PRED_REVERSED) != 0};
    const ccoip_pb_endpoint *ep[2] = {NULL, NULL};
    for (uint32_t side = 0; side < 2u && n >= 2; side++) {
        if (!dials[side] || relayed[side]) continue;
        const uint64_t want = side == P_SIDE_SUCC ? succ : pred;
        for (uint64_t k = 0; k < plan->neighbours_count && ep[side] == NULL; k++) {
            const ccoip_pb_peer_info *nb = &plan->neighbours[k];
            if (nb->peer_id != want) continue;
            for (uint64_t e = 0; e < nb->endpoints_count; e++) {
                if (nb->endpoints[e].kind == CCOIP_PB_ENDPOINT_KIND_P2P) {
                    ep[side] = &nb->endpoints[e];
                    break;
                }
            }
        }
        const ccoip_pb_endpoint *e = ep[side];
        if (e == NULL || e->url.len >= CCOIP_URL_MAX ||
            (e->ip.len != 0 && e->ip.len != 4 && e->ip.len != 16)) {
            p_fail(p, "topology plan without a usable endpoint of a neighbour we dial");
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
    wire_links_reset(p);
    for (uint32_t i = 0; i < p->wire.acc_cap; i++) {
        if (p->wire.acc[i].state == PA_UP ||
            (p->wire.acc[i].state == PA_HELD && p->wire.acc[i].hello.epoch < plan->epoch)) {
            wire_acc_free(p, i, true);
        }
    }
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
    p->wire.dials[P_SIDE_SUCC] = dials[P_SIDE_SUCC];
    p->wire.dials[P_SIDE_PRED] = dials[P_SIDE_PRED];
    p->wire.relayed[P_SIDE_SUCC] = relayed[P_SIDE_SUCC];
    p->wire.relayed[P_SIDE_PRED] = relayed[P_SIDE_PRED];
    p->wire.dial_deadline_ns =
        deadline_ms == 0 ? CCOIP_NO_DEADLINE : sm_add_sat(p->now, sm_ms(deadline_ms) / 4u * 3u);
    if (n == 1) {
        wire_report(p, true, P_SIDE_SUCC);
        return;
    }
    for (uint32_t side = 0; side < 2u; side++) {
        const ccoip_pb_endpoint *e = ep[side];
        if (e == NULL) continue;
        p->wire.dial_url_len[side] = (uint32_t)e->url.len;
        if (e->url.len > 0) memcpy(p->wire.dial_url[side], e->url.data, (size_t)e->url.len);
        p->wire.dial_url[side][e->url.len] = '\0';
        p->wire.dial_ip_len[side] = (uint32_t)e->ip.len;
        if (e->ip.len > 0) memcpy(p->wire.dial_ip[side], e->ip.data, (size_t)e->ip.len);
        p->wire.dial_port[side] = e->port;
        wire_dial(p, side, 0);
    }
    for (uint32_t side = 0; side < 2u; side++) {
        if (!relayed[side]) continue;
        if (!p_relay_target(p, side, plan->relay_port)) {
            p_fail(p, "topology plan relays a link, but the master's address is not known");
            return;
        }
        sm_log(&p->out, CCOIP_LOG_INFO, "peer %U: the link %s %U goes through the master's relay",
               p->id, side == P_SIDE_SUCC ? "to" : "from", side_peer(p, side));
        if (side == P_SIDE_SUCC) {
            wire_dial(p, side, 0);
        } else {
            p_relay_dial_acc(p, 0);
        }
    }
    if (!dials[P_SIDE_SUCC] && !dials[P_SIDE_PRED] && !relayed[P_SIDE_PRED]) {
        sm_log(&p->out, CCOIP_LOG_INFO, "peer %U: both links of epoch %U dialled to us", p->id,
               plan->epoch);
        wire_report(p, true, P_SIDE_SUCC); /* our neighbours' reports cover both links */
    }
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

bool p_wire_acc_take(ccoip_peer *p, uint64_t conn)
{
    wire_acc_make_room(p);
    for (uint32_t i = 0; i < p->wire.acc_cap; i++) {
        if (p->wire.acc[i].state == PA_FREE) {
            p->wire.acc[i].state = PA_WAIT_HELLO;
            p->wire.acc[i].conn = conn;
            p->wire.acc[i].since_ns = p->now;
            if (ccoip_auth_on(&p->cfg.auth)) p_auth_challenge(p, conn, p->wire.acc[i].challenge);
            return true;
        }
    }
    return false;
}

bool p_wire_on_conn_up(ccoip_peer *p, const ccoip_event *ev)
{
    if (ev->accepted) {
        if (ev->listener != CCOIP_LISTENER_P2P || p->state == PS_FAILED || p->state == PS_LEFT) {
            wire_close(p, ev->conn);
            return true;
        }
        if (!p_wire_acc_take(p, ev->conn)) {
            sm_log(&p->out, CCOIP_LOG_WARN, "peer %U: too many incoming links, closing conn %U",
                   p->id, ev->conn);
            wire_close(p, ev->conn);
        }
        return true;
    }
    if (p_relay_on_conn_up(p, ev)) return true;
    uint32_t s, k;
    if (!wire_dialled(p, ev->conn, &s, &k) || side_state(p, s)[k] != PT_DIALING) return false;
    if (ccoip_auth_on(&p->cfg.auth)) {
        /* The HELLO answers the acceptor's CHALLENGE; through the relay the master's first. */
        side_state(p, s)[k] = p->wire.relayed[s] ? PT_RELAY_WAIT : PT_CHALLENGED;
        return true;
    }
    if (p->wire.relayed[s]) p_relay_join(p, ev->conn, s, k, NULL);
    wire_send_hello(p, s, k, NULL);
    return true;
}

/* Sends the HELLO of connection k of side s's pool (§8.1): it names the link (tag its source,
 * seq its destination), whichever end dials; in an authenticated run with its proof over the
 * acceptor's challenge. */
static void wire_send_hello(ccoip_peer *p, uint32_t s, uint32_t k, const uint8_t *challenge)
{
    ccoip_data_header h;
    ccoip_data_header_init(&h, CCOIP_DATA_HELLO);
    h.epoch = p->wire.plan_epoch;
    h.tag = side_src(p, s);
    h.seq = side_dst(p, s);
    h.chunk = k;
    h.step = wire_pool_code(p->cfg.p2p_pool_size);
    const uint64_t conn = side_conn(p, s)[k];
    pcclResult_t r;
    if (challenge != NULL) {
        uint8_t proof[CCOIP_AUTH_MAC_BYTES];
        p_wire_hello_proof(p, side_key(p, s), challenge, &h, proof);
        r = sm_send_data_proof(&p->out, &p->lim, conn, &h, proof);
    } else {
        r = sm_send_data_header(&p->out, &p->lim, conn, &h);
    }
    if (r != pcclSuccess) p->out.overflow = true;
    side_state(p, s)[k] = PT_HELLO_SENT;
}

bool p_wire_on_conn_closed(ccoip_peer *p, uint64_t conn)
{
    if (p_relay_on_closed(p, conn)) return true;
    uint32_t s, k;
    if (wire_dialled(p, conn, &s, &k)) {
        side_conn(p, s)[k] = CCOIP_CONN_NONE;
        side_state(p, s)[k] = PT_NONE;
        wire_report(p, false, s); /* nothing when the pools were already reported */
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
    uint32_t s, k;
    if (wire_dialled(p, conn, &s, &k)) {
        p_tx_state *st = side_state(p, s);
        pcclResult_t r = ccoip_data_header_decode(data, len, &p->lim, &h);
        if (r == pcclSuccess && len == CCOIP_DATA_HEADER_BYTES && st[k] == PT_RELAY_WAIT &&
            h.kind == CCOIP_DATA_CHALLENGE) {
            /* The master's: join, then wait for the destination's through the splice. */
            uint8_t challenge[CCOIP_AUTH_NONCE_BYTES];
            ccoip_auth_nonce_from_u64(h.tag, h.seq, challenge);
            p_relay_join(p, conn, s, k, challenge);
            st[k] = PT_CHALLENGED;
            return true;
        }
        if (r == pcclSuccess && len == CCOIP_DATA_HEADER_BYTES && st[k] == PT_CHALLENGED &&
            h.kind == CCOIP_DATA_CHALLENGE) {
            uint8_t challenge[CCOIP_AUTH_NONCE_BYTES];
            ccoip_auth_nonce_from_u64(h.tag, h.seq, challenge);
            wire_send_hello(p, s, k, challenge);
            return true;
        }
        bool ok = r == pcclSuccess && len == CCOIP_DATA_HEADER_BYTES && st[k] == PT_HELLO_SENT &&
                  h.kind == CCOIP_DATA_HELLO_ACK && h.epoch == p->wire.plan_epoch &&
                  h.tag == side_src(p, s) && h.seq == side_dst(p, s) && h.chunk == k;
        uint32_t n = ok ? wire_pool_decode(h.step) : 0;
        if (ok) ok = k == 0 ? n <= p->cfg.p2p_pool_size : n == *side_n(p, s);
        if (!ok) {
            sm_log(&p->out, CCOIP_LOG_WARN, "peer %U: bad frame from the %s we dialled, closing",
                   p->id, s == P_SIDE_SUCC ? "successor" : "predecessor");
            wire_close(p, conn);
            p_wire_on_conn_closed(p, conn);
            return true;
        }
        st[k] = PT_UP;
        if (k == 0) {
            *side_n(p, s) = n;
            for (uint32_t j = 1; j < n; j++)
                wire_dial(p, s, j);
        }
        wire_report_if_up(p);
        return true;
    }
    if (p_relay_on_recv(p, conn, data, len)) return true;
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
            const bool was_link = wire_acc_forget(p, conn) || a->state == PA_PAIR;
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

/* A dial of the plan still not connected at dial_deadline_ns (a SYN dropped by a NAT waits for
 * the transport's connect timeout, which may exceed the phase's): reported unreachable now, so
 * that the next plan dials that link from its other end (§6.4). A connected link waiting for its
 * HELLO_ACK (a hung acceptor) is left to the phase's own rules. */
static void wire_dial_expired(ccoip_peer *p)
{
    if (!p->wire.wiring || p->now < p->wire.dial_deadline_ns) return;
    for (uint32_t s = 0; s < 2u; s++) {
        if (!p->wire.dials[s]) continue;
        bool connecting = false;
        for (uint32_t k = 0; k < CCOIP_P2P_POOL_MAX; k++) {
            if (side_conn(p, s)[k] != CCOIP_CONN_NONE && side_state(p, s)[k] == PT_DIALING)
                connecting = true;
        }
        if (!connecting) continue;
        sm_log(&p->out, CCOIP_LOG_WARN,
               "peer %U: dial to %U not connected by 3/4 of the phase deadline", p->id,
               side_peer(p, s));
        for (uint32_t k = 0; k < CCOIP_P2P_POOL_MAX; k++) {
            if (side_conn(p, s)[k] != CCOIP_CONN_NONE) wire_close(p, side_conn(p, s)[k]);
            side_conn(p, s)[k] = CCOIP_CONN_NONE;
            side_state(p, s)[k] = PT_NONE;
        }
        wire_report(p, false, s);
        return;
    }
}

void p_wire_timers(ccoip_peer *p)
{
    wire_dial_expired(p);
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
