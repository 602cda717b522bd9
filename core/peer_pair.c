/*
 * peer_pair.c — send / recv (docs/protocol.md §6.8.4, §8.5): the data of one
 * op goes over a pair link of its own. At the commence the sender dials the
 * receiver's p2p endpoint (the commence names it) and sends a pair HELLO
 * (step CCOIP_DATA_PAIR_STEP, offset = the op's seq; in an authenticated run
 * proven with the op's pair key over the receiver's CHALLENGE); the receiver
 * binds it to its receive of that (sender, epoch, seq), posts one RING_RECV
 * of its whole buffer and answers HELLO_ACK; the sender then writes one
 * RING_SEND. Each member completes when its transfer did; the master's one
 * verdict ends the op. After a success the link stays: the sender keeps it
 * (P_PAIR_CACHE per peer, closed after P_PAIR_IDLE_MS idle) and its next send
 * to that receiver sends the next pair HELLO on it (no dial); the receiver
 * keeps the accepted entry idle until that HELLO or the close. A kept link that
 * closes before its HELLO_ACK is dialled again once. A failed op closes its
 * link at both ends. Everything else —
 * initiate, commence, verdict, abort, timeout — is peer_op.c's, as for every
 * kind. docs/core.md §3.4.
 */
#include <string.h>

#include "ccoip_dtype.h"
#include "peer_internal.h"

/* The pair HELLO of op o (and its HELLO_ACK, kind aside: the fields are echoed). */
static void pair_hello_of(const ccoip_peer *p, const p_op *o, ccoip_data_kind kind, bool sender,
                          ccoip_data_header *h)
{
    ccoip_data_header_init(h, kind);
    h->epoch = o->epoch;
    h->tag = sender ? p->id : o->pair_peer;
    h->seq = sender ? o->pair_peer : p->id;
    h->chunk = 0;
    h->step = CCOIP_DATA_PAIR_STEP;
    h->offset = o->seq;
}

static uint32_t pair_op_of_conn(const ccoip_peer *p, uint64_t conn)
{
    if (conn == CCOIP_CONN_NONE) return UINT32_MAX;
    for (uint32_t i = 0; i < p->cfg.max_ops; i++) {
        if (p->ops[i].state != PO_FREE && p->ops[i].pair != PP_NONE && p->ops[i].pair_conn == conn)
            return i;
    }
    return UINT32_MAX;
}

/* The sender's HELLO, with its proof over challenge in an authenticated run. */
static void pair_send_hello(ccoip_peer *p, uint32_t i, const uint8_t *challenge)
{
    p_op *o = &p->ops[i];
    ccoip_data_header h;
    pair_hello_of(p, o, CCOIP_DATA_HELLO, true, &h);
    pcclResult_t r;
    if (challenge != NULL) {
        uint8_t proof[CCOIP_AUTH_MAC_BYTES];
        p_wire_hello_proof(p, o->pair_key, challenge, &h, proof);
        r = sm_send_data_proof(&p->out, &p->lim, o->pair_conn, &h, proof);
    } else {
        r = sm_send_data_header(&p->out, &p->lim, o->pair_conn, &h);
    }
    if (r != pcclSuccess) p->out.overflow = true;
    o->pair = PP_HELLO_SENT;
}

/* The sender's kept link to peer at (ip, port), or NULL. */
static p_pair_link *pair_cached(ccoip_peer *p, uint64_t peer, const uint8_t *ip, uint32_t ip_len,
                                uint32_t port)
{
    for (uint32_t k = 0; k < P_PAIR_CACHE; k++) {
        p_pair_link *l = &p->pairs[k];
        if (l->used && !l->busy && l->peer == peer && l->ip_len == ip_len && l->port == port &&
            memcmp(l->ip, ip, ip_len) == 0)
            return l;
    }
    return NULL;
}

static p_pair_link *pair_link_of(ccoip_peer *p, uint64_t conn)
{
    for (uint32_t k = 0; k < P_PAIR_CACHE; k++) {
        if (p->pairs[k].used && p->pairs[k].conn == conn) return &p->pairs[k];
    }
    return NULL;
}

static void pair_close(ccoip_peer *p, uint64_t conn)
{
    ccoip_action *a = sm_out_push(&p->out, CCOIP_ACT_CLOSE);
    if (a != NULL) a->conn = conn;
}

/* Dials a new pair link for send op i. */
static void pair_dial(ccoip_peer *p, uint32_t i)
{
    p_op *o = &p->ops[i];
    ccoip_action *a = sm_out_push(&p->out, CCOIP_ACT_CONNECT);
    if (a == NULL) return;
    o->pair_conn = p->next_conn++;
    o->pair = PP_DIALING;
    o->pair_reused = false;
    o->pair_has_challenge = false;
    a->conn = o->pair_conn;
    memcpy(a->ip, o->pair_ip, (size_t)o->pair_ip_len);
    a->ip_len = o->pair_ip_len;
    a->port = o->pair_port;
    o->ptx = 1u;
    o->stx[0] = o->pair_conn;
}

void p_pair_begin(ccoip_peer *p, uint32_t i, const ccoip_pb_collective_commence *cc)
{
    p_op *o = &p->ops[i];
    const bool sender = o->a.kind == CCOIP_COLL_SEND;
    o->rank = p->ring.rank;
    o->esize = ccoip_dtype_size(o->a.dtype);
    const ccoip_pb_endpoint *ep = NULL;
    for (uint64_t e = 0; cc->has_peer && e < cc->peer.endpoints_count && ep == NULL; e++) {
        if (cc->peer.endpoints[e].kind == CCOIP_PB_ENDPOINT_KIND_P2P) ep = &cc->peer.endpoints[e];
    }
    const bool auth = ccoip_auth_on(&p->cfg.auth);
    if (!cc->has_peer || cc->peer.peer_id == p->id ||
        (sender && (ep == NULL || (ep->ip.len != 4 && ep->ip.len != 16) || ep->port == 0 ||
                    ep->port > 65535u)) ||
        (auth && cc->pair_key.len != CCOIP_AUTH_KEY_BYTES) || o->a.root >= o->world ||
        o->a.root == o->rank) {
        /* Nothing was touched: the op fails as one whose ring is not ours (§6.9). */
        sm_log(&p->out, CCOIP_LOG_WARN,
               "peer %U: commence of %s tag %U names no usable other member: aborting it", p->id,
               sender ? "send" : "recv", o->a.tag);
        p_ring_abort(p, i, pcclRankConnectionLost, "unusable pair commence");
        return;
    }
    o->pair_peer = cc->peer.peer_id;
    if (auth) memcpy(o->pair_key, cc->pair_key.data, CCOIP_AUTH_KEY_BYTES);
    ccoip_action *b = sm_out_push(&p->out, CCOIP_ACT_OP_BEGIN);
    if (b == NULL) return;
    b->cmd_id = o->cmd;
    b->op_slot = i;
    o->begun = true;
    if (sender) {
        o->pair_ip_len = (uint32_t)ep->ip.len;
        memcpy(o->pair_ip, ep->ip.data, (size_t)ep->ip.len);
        o->pair_port = ep->port;
        p_pair_link *l = pair_cached(p, o->pair_peer, o->pair_ip, o->pair_ip_len, o->pair_port);
        if (l == NULL) {
            pair_dial(p, i);
            return;
        }
        /* A link kept from an earlier send to this peer: the next pair HELLO goes on it. */
        l->busy = true;
        o->pair_conn = l->conn;
        o->pair_reused = true;
        o->pair_has_challenge = l->has_challenge;
        memcpy(o->pair_challenge, l->challenge, sizeof o->pair_challenge);
        o->ptx = 1u;
        o->stx[0] = o->pair_conn;
        if (auth && !l->has_challenge) {
            /* Kept without the receiver's CHALLENGE (cannot happen): dial afresh. */
            l->busy = false;
            pair_dial(p, i);
            return;
        }
        pair_send_hello(p, i, auth ? o->pair_challenge : NULL);
        return;
    }
    o->pair = PP_WAIT_HELLO;
    /* Its HELLO may have come first (the sender's commence was earlier). */
    for (uint32_t k = 0; k < p->wire.acc_cap && o->pair == PP_WAIT_HELLO; k++) {
        if (p->wire.acc[k].state == PA_PAIR_HELD) p_pair_on_hello(p, k);
    }
}

void p_pair_on_hello(ccoip_peer *p, uint32_t k)
{
    p_acc *a = &p->wire.acc[k];
    const ccoip_data_header *h = &a->hello;
    uint32_t i = UINT32_MAX;
    for (uint32_t j = 0; j < p->cfg.max_ops && i == UINT32_MAX; j++) {
        const p_op *o = &p->ops[j];
        if (o->state == PO_RUNNING && o->a.kind == CCOIP_COLL_RECV && o->pair == PP_WAIT_HELLO &&
            o->pair_peer == h->tag && o->epoch == h->epoch && o->seq == h->offset) {
            i = j;
        }
    }
    if (h->seq != p->id || h->chunk != 0) {
        p_wire_acc_close(p, k);
        return;
    }
    if (i == UINT32_MAX) {
        /* A receive still to commence (held until evict_ms, as a ring HELLO for a coming
         * plan), or a stranger's: the deadline or the admission of others closes it. */
        a->state = PA_PAIR_HELD;
        return;
    }
    p_op *o = &p->ops[i];
    if (ccoip_auth_on(&p->cfg.auth)) {
        uint8_t proof[CCOIP_AUTH_MAC_BYTES];
        p_wire_hello_proof(p, o->pair_key, a->challenge, h, proof);
        if (!ccoip_auth_equal(proof, a->proof, CCOIP_AUTH_MAC_BYTES)) {
            sm_log(&p->out, CCOIP_LOG_WARN,
                   "peer %U: pair HELLO on conn %U with a wrong proof (not introduced by the "
                   "master for seq %U): closing",
                   p->id, a->conn, h->offset);
            p_wire_acc_close(p, k);
            return;
        }
    }
    a->state = PA_PAIR;
    a->epoch = h->epoch;
    o->pair_conn = a->conn;
    o->prx = 1u;
    o->srx[0] = a->conn;
    /* The receive first: no frame of the op can arrive before it is posted. */
    o->io_recv = p->next_io++;
    o->recv_left = 1u;
    ccoip_action *r =
        p_ring_io_push(p, i, CCOIP_ACT_RING_RECV, o->io_recv, o->pair_conn, /*chunk=*/0);
    if (r == NULL) return;
    r->dst = p_ring_span(i, CCOIP_REGION_RECV, 0, o->a.recv_bytes);
    o->pair = PP_TRANSFER;
    ccoip_data_header ack;
    pair_hello_of(p, o, CCOIP_DATA_HELLO_ACK, false, &ack);
    if (sm_send_data_header(&p->out, &p->lim, o->pair_conn, &ack) != pcclSuccess)
        p->out.overflow = true;
}

bool p_pair_on_conn_up(ccoip_peer *p, const ccoip_event *ev)
{
    if (ev->accepted) return false;
    const uint32_t i = pair_op_of_conn(p, ev->conn);
    if (i == UINT32_MAX) return false;
    p_op *o = &p->ops[i];
    if (o->pair != PP_DIALING) return true;
    if (ccoip_auth_on(&p->cfg.auth)) {
        o->pair = PP_CHALLENGED; /* the HELLO answers the receiver's CHALLENGE */
        return true;
    }
    pair_send_hello(p, i, NULL);
    return true;
}

bool p_pair_on_recv(ccoip_peer *p, uint64_t conn, const uint8_t *data, uint64_t len)
{
    const uint32_t i = pair_op_of_conn(p, conn);
    if (i == UINT32_MAX || p->ops[i].a.kind != CCOIP_COLL_SEND) return false;
    p_op *o = &p->ops[i];
    ccoip_data_header h, want;
    const pcclResult_t r = ccoip_data_header_decode(data, len, &p->lim, &h);
    if (r == pcclSuccess && len == CCOIP_DATA_HEADER_BYTES && o->pair == PP_CHALLENGED &&
        h.kind == CCOIP_DATA_CHALLENGE) {
        ccoip_auth_nonce_from_u64(h.tag, h.seq, o->pair_challenge);
        o->pair_has_challenge = true; /* kept with the link: its next HELLOs answer it too */
        pair_send_hello(p, i, o->pair_challenge);
        return true;
    }
    pair_hello_of(p, o, CCOIP_DATA_HELLO_ACK, true, &want);
    const bool ok = r == pcclSuccess && len == CCOIP_DATA_HEADER_BYTES &&
                    o->pair == PP_HELLO_SENT && h.kind == CCOIP_DATA_HELLO_ACK &&
                    h.epoch == want.epoch && h.tag == want.tag && h.seq == want.seq &&
                    h.chunk == want.chunk && h.step == want.step && h.offset == want.offset;
    if (!ok) {
        p_ring_abort(p, i, pcclRankConnectionLost, "bad frame on the pair link");
        return true;
    }
    o->io_send = p->next_io++;
    o->send_left = 1u;
    ccoip_action *s = p_ring_io_push(p, i, CCOIP_ACT_RING_SEND, o->io_send, conn, /*chunk=*/0);
    if (s == NULL) return true;
    s->src = p_ring_span(i, CCOIP_REGION_SEND, 0, o->a.send_bytes);
    o->pair = PP_TRANSFER;
    return true;
}

bool p_pair_on_conn_closed(ccoip_peer *p, uint64_t conn)
{
    p_pair_link *l = pair_link_of(p, conn);
    if (l != NULL) memset(l, 0, sizeof *l); /* reported closed: no CLOSE for it */
    const uint32_t i = pair_op_of_conn(p, conn);
    if (i == UINT32_MAX || p->ops[i].a.kind != CCOIP_COLL_SEND) return l != NULL;
    p_op *o = &p->ops[i];
    o->pair_conn = CCOIP_CONN_NONE;
    o->stx[0] = CCOIP_CONN_NONE;
    if (o->state == PO_RUNNING && o->pair_reused && o->pair == PP_HELLO_SENT) {
        /* The receiver closed the kept link (its admission made room, it restarted) before
         * it saw our HELLO: nothing of the op was on it. Dial afresh, once. */
        sm_log(&p->out, CCOIP_LOG_INFO, "peer %U: kept pair link to %U closed: dialling again",
               p->id, o->pair_peer);
        pair_dial(p, i);
        return true;
    }
    if (o->state == PO_RUNNING && o->pair != PP_DONE) {
        p_ring_abort(p, i, pcclRankConnectionLost, "pair link lost");
    }
    return true;
}

void p_pair_after_io(ccoip_peer *p, uint32_t i)
{
    p_op *o = &p->ops[i];
    if (o->a.kind == CCOIP_COLL_SEND) {
        o->tx_bytes = o->a.send_bytes;
    } else {
        o->rx_bytes = o->a.recv_bytes;
    }
    o->pair = PP_DONE;
    p_ring_done(p, i);
}

/* The sender keeps op i's link (a success: the stream is clean, every frame was read). */
static void pair_keep(ccoip_peer *p, const p_op *o)
{
    p_pair_link *l = pair_link_of(p, o->pair_conn);
    if (l == NULL) {
        /* A free entry, else the one idle longest makes room (a busy one is never taken). */
        for (uint32_t k = 0; k < P_PAIR_CACHE && l == NULL; k++) {
            if (!p->pairs[k].used) l = &p->pairs[k];
        }
        for (uint32_t k = 0; k < P_PAIR_CACHE && l == NULL; k++) {
            p_pair_link *c = &p->pairs[k];
            if (!c->busy) l = c;
        }
        for (uint32_t k = 0; k < P_PAIR_CACHE && l != NULL && l->used; k++) {
            p_pair_link *c = &p->pairs[k];
            if (!c->busy && c->since_ns < l->since_ns) l = c;
        }
        if (l == NULL) {
            pair_close(p, o->pair_conn);
            return;
        }
        if (l->used) pair_close(p, l->conn);
        memset(l, 0, sizeof *l);
        l->used = true;
        l->conn = o->pair_conn;
        l->peer = o->pair_peer;
        memcpy(l->ip, o->pair_ip, sizeof l->ip);
        l->ip_len = o->pair_ip_len;
        l->port = o->pair_port;
    }
    l->busy = false;
    l->since_ns = p->now;
    l->has_challenge = o->pair_has_challenge;
    memcpy(l->challenge, o->pair_challenge, sizeof l->challenge);
}

void p_pair_release(ccoip_peer *p, uint32_t i)
{
    p_op *o = &p->ops[i];
    if (o->pair == PP_NONE || o->pair_conn == CCOIP_CONN_NONE) return;
    const bool keep = o->pair == PP_DONE && o->result == pcclSuccess && !o->verdict_aborted &&
                      p->state == PS_ACCEPTED;
    if (o->a.kind == CCOIP_COLL_RECV) {
        for (uint32_t k = 0; k < p->wire.acc_cap; k++) {
            if (p->wire.acc[k].state == PA_PAIR && p->wire.acc[k].conn == o->pair_conn) {
                if (keep) {
                    p->wire.acc[k].state = PA_PAIR_IDLE;
                    p->wire.acc[k].since_ns = p->now;
                } else {
                    p_wire_acc_close(p, k);
                }
                break;
            }
        }
    } else if (keep) {
        pair_keep(p, o);
    } else {
        p_pair_link *l = pair_link_of(p, o->pair_conn);
        if (l != NULL) memset(l, 0, sizeof *l);
        pair_close(p, o->pair_conn);
    }
    o->pair_conn = CCOIP_CONN_NONE;
}

void p_pair_timers(ccoip_peer *p)
{
    for (uint32_t k = 0; k < P_PAIR_CACHE; k++) {
        p_pair_link *l = &p->pairs[k];
        if (!l->used || l->busy || p->now < sm_add_sat(l->since_ns, sm_ms(P_PAIR_IDLE_MS)))
            continue;
        pair_close(p, l->conn);
        memset(l, 0, sizeof *l);
    }
}

void p_pair_close_idle(ccoip_peer *p)
{
    for (uint32_t k = 0; k < P_PAIR_CACHE; k++) {
        p_pair_link *l = &p->pairs[k];
        if (!l->used || l->busy) continue;
        pair_close(p, l->conn);
        memset(l, 0, sizeof *l);
    }
}
