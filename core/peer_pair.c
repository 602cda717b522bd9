/*
 * peer_pair.c — send / recv (docs/protocol.md §6.8.4, §8.5): the data of one
 * op goes over a pair link of its own. At the commence the sender dials the
 * receiver's p2p endpoint (the commence names it) and sends a pair HELLO
 * (step CCOIP_DATA_PAIR_STEP, offset = the op's seq; in an authenticated run
 * proven with the op's pair key over the receiver's CHALLENGE); the receiver
 * binds it to its receive of that (sender, epoch, seq), posts one RING_RECV
 * of its whole buffer and answers HELLO_ACK; the sender then writes one
 * RING_SEND. Each member completes when its transfer did; the master's one
 * verdict ends the op, which closes the link at both ends. Everything else —
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
        ccoip_action *a = sm_out_push(&p->out, CCOIP_ACT_CONNECT);
        if (a == NULL) return;
        o->pair_conn = p->next_conn++;
        o->pair = PP_DIALING;
        a->conn = o->pair_conn;
        memcpy(a->ip, o->pair_ip, (size_t)o->pair_ip_len);
        a->ip_len = o->pair_ip_len;
        a->port = o->pair_port;
        o->ptx = 1u;
        o->stx[0] = o->pair_conn;
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
        uint8_t challenge[CCOIP_AUTH_NONCE_BYTES];
        ccoip_auth_nonce_from_u64(h.tag, h.seq, challenge);
        pair_send_hello(p, i, challenge);
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
    const uint32_t i = pair_op_of_conn(p, conn);
    if (i == UINT32_MAX || p->ops[i].a.kind != CCOIP_COLL_SEND) return false;
    p_op *o = &p->ops[i];
    o->pair_conn = CCOIP_CONN_NONE; /* reported closed: no CLOSE for it */
    o->stx[0] = CCOIP_CONN_NONE;
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

void p_pair_release(ccoip_peer *p, uint32_t i)
{
    p_op *o = &p->ops[i];
    if (o->pair == PP_NONE || o->pair_conn == CCOIP_CONN_NONE) return;
    if (o->a.kind == CCOIP_COLL_RECV) {
        for (uint32_t k = 0; k < p->wire.acc_cap; k++) {
            if (p->wire.acc[k].state == PA_PAIR && p->wire.acc[k].conn == o->pair_conn) {
                p_wire_acc_close(p, k);
                break;
            }
        }
    } else {
        ccoip_action *a = sm_out_push(&p->out, CCOIP_ACT_CLOSE);
        if (a != NULL) a->conn = o->pair_conn;
    }
    o->pair_conn = CCOIP_CONN_NONE;
}
