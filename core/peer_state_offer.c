/*
 * peer_state_offer.c — shared-state transfer from a distributor that accepts
 * no connections (a peer behind NAT; docs/protocol.md §8.3): the master names
 * its receivers in its verdict, it dials each one's shared-state endpoint and
 * sends a STATE_OFFER; the receiver, told by its verdict to wait for that
 * offer instead of dialling, then sends its STATE_REQUEST on the offered
 * connection and the transfer runs as in the dialling direction.
 *
 * Authenticated runs: the receiver (acceptor) sends its CHALLENGE on accept;
 * the distributor answers with its own CHALLENGE and the STATE_OFFER, whose
 * proof is the group key over the receiver's challenge; the receiver's
 * STATE_REQUEST then proves the group key over the distributor's challenge,
 * as a request to an accepting distributor does.
 */
#include <string.h>

#include "peer_internal.h"

/* The proof of a STATE_OFFER: the group key of the epoch over the receiver's challenge and what
 * the offer asserts (distributor, receiver, round). */
static void offer_proof(const ccoip_peer *p, const uint8_t challenge[CCOIP_AUTH_NONCE_BYTES],
                        const ccoip_data_header *h, uint8_t out[CCOIP_AUTH_MAC_BYTES])
{
    const uint64_t v[3] = {h->tag, h->seq, h->epoch};
    ccoip_auth_mac(&p->cfg.auth, p->wire.group_key, "pccl state offer", challenge,
                   CCOIP_AUTH_NONCE_BYTES, NULL, 0, v, 3, out);
}

void p_offer_start(ccoip_peer *p, const ccoip_pb_shared_state_sync_verdict *v)
{
    for (uint64_t r = 0; r < v->dial_receivers_count; r++) {
        const ccoip_pb_peer_info *pi = &v->dial_receivers[r];
        const ccoip_pb_endpoint *ep = NULL;
        for (uint64_t e = 0; e < pi->endpoints_count; e++) {
            if (pi->endpoints[e].kind == CCOIP_PB_ENDPOINT_KIND_SHARED_STATE)
                ep = &pi->endpoints[e];
        }
        if (ep == NULL || pi->peer_id == p->id || ep->url.len >= CCOIP_URL_MAX ||
            (ep->url.len == 0 && ep->ip.len != 4 && ep->ip.len != 16)) {
            sm_log(&p->out, CCOIP_LOG_WARN,
                   "peer %U: sync verdict names receiver %U without a usable endpoint", p->id,
                   pi->peer_id);
            continue;
        }
        p_state_sconn_make_room(p);
        uint32_t i = 0;
        while (i < P_SS_MAX && p->ss.sconn[i].used)
            i++;
        if (i == P_SS_MAX) {
            sm_log(&p->out, CCOIP_LOG_WARN,
                   "peer %U: shared-state connections full: no offer to receiver %U", p->id,
                   pi->peer_id);
            continue;
        }
        ccoip_action *a = sm_out_push(&p->out, CCOIP_ACT_CONNECT);
        if (a == NULL) return;
        p_sconn *c = &p->ss.sconn[i];
        memset(c, 0, sizeof(*c));
        c->used = true;
        c->offer = true;
        c->to_peer = pi->peer_id;
        c->since_ns = p->now;
        c->conn = p->next_conn++;
        a->conn = c->conn;
        if (ep->url.len > 0) {
            uint8_t *u = sm_out_alloc(&p->out, ep->url.len);
            if (u != NULL) memcpy(u, ep->url.data, (size_t)ep->url.len);
            a->data = u;
            a->len = u != NULL ? ep->url.len : 0;
        } else {
            memcpy(a->ip, ep->ip.data, (size_t)ep->ip.len);
            a->ip_len = (uint32_t)ep->ip.len;
            a->port = ep->port;
        }
        sm_log(&p->out, CCOIP_LOG_INFO, "peer %U: dialling receiver %U to offer round %U", p->id,
               pi->peer_id, v->round);
    }
}

/* Sends the STATE_OFFER on served connection i (authenticated: our CHALLENGE first, then the
 * offer with its proof over the receiver's challenge). */
static void offer_send(ccoip_peer *p, uint32_t i, const uint8_t *receiver_challenge)
{
    p_sconn *c = &p->ss.sconn[i];
    ccoip_data_header h;
    ccoip_data_header_init(&h, CCOIP_DATA_STATE_OFFER);
    h.epoch = p->ss.round;
    h.tag = p->id;
    h.seq = c->to_peer;
    pcclResult_t r;
    if (receiver_challenge != NULL) {
        p_auth_challenge(p, c->conn, c->challenge); /* the request answers this one */
        uint8_t proof[CCOIP_AUTH_MAC_BYTES];
        offer_proof(p, receiver_challenge, &h, proof);
        r = sm_send_data_proof(&p->out, &p->lim, c->conn, &h, proof);
    } else {
        r = sm_send_data_header(&p->out, &p->lim, c->conn, &h);
    }
    if (r != pcclSuccess) p->out.overflow = true;
    c->offered = true;
    c->since_ns = p->now;
}

bool p_offer_on_conn_up(ccoip_peer *p, const ccoip_event *ev)
{
    if (ev->accepted) return false;
    for (uint32_t i = 0; i < P_SS_MAX; i++) {
        const p_sconn *c = &p->ss.sconn[i];
        if (!c->used || !c->offer || c->conn != ev->conn) continue;
        /* Authenticated: the offer answers the receiver's CHALLENGE (p_offer_on_recv). */
        if (!ccoip_auth_on(&p->cfg.auth)) offer_send(p, i, NULL);
        return true;
    }
    return false;
}

/* A receiver's accepted connection i carries the STATE_OFFER of the distributor its verdict
 * named: the connection becomes the fetch's (§8.3). */
static void offer_take(ccoip_peer *p, uint32_t i, const ccoip_data_header *h, const uint8_t *data,
                       uint64_t len)
{
    p_sconn *c = &p->ss.sconn[i];
    const bool auth = ccoip_auth_on(&p->cfg.auth);
    bool ok = p->ss.await_offer && p->ss.st == PSS_FETCHING && h->tag == p->ss.offer_from &&
              h->seq == p->id && h->epoch == p->ss.round &&
              len == CCOIP_DATA_HEADER_BYTES + (auth ? CCOIP_DATA_PROOF_BYTES : 0u) &&
              (!auth || c->has_peer_challenge);
    if (ok && auth) {
        uint8_t want[CCOIP_AUTH_MAC_BYTES];
        offer_proof(p, c->challenge, h, want);
        ok = ccoip_auth_equal(want, data + CCOIP_DATA_HEADER_BYTES, CCOIP_AUTH_MAC_BYTES);
    }
    if (!ok) {
        sm_log(&p->out, CCOIP_LOG_WARN,
               "peer %U: STATE_OFFER on conn %U not from the distributor of our round: closing",
               p->id, c->conn);
        p_state_sconn_close(p, i);
        return;
    }
    uint8_t challenge[CCOIP_AUTH_NONCE_BYTES];
    memcpy(challenge, c->peer_challenge, sizeof challenge);
    p->ss.conn = c->conn;
    p->ss.conn_open = true;
    p->ss.await_offer = false;
    c->used = false; /* the connection is the fetch's now, not a served one */
    p_state_send_request(p, auth ? challenge : NULL);
}

bool p_offer_on_recv(ccoip_peer *p, uint32_t i, const uint8_t *data, uint64_t len)
{
    p_sconn *c = &p->ss.sconn[i];
    ccoip_data_header h;
    if (ccoip_data_header_decode(data, len, &p->lim, &h) != pcclSuccess) return false;
    if (c->offer) {
        if (c->offered) return false; /* the receiver's STATE_REQUEST: served as usual */
        if (h.kind == CCOIP_DATA_CHALLENGE && len == CCOIP_DATA_HEADER_BYTES &&
            ccoip_auth_on(&p->cfg.auth)) {
            uint8_t challenge[CCOIP_AUTH_NONCE_BYTES];
            ccoip_auth_nonce_from_u64(h.tag, h.seq, challenge);
            offer_send(p, i, challenge);
            return true;
        }
        sm_log(&p->out, CCOIP_LOG_WARN, "peer %U: bad frame from receiver %U before the offer",
               p->id, c->to_peer);
        p_state_sconn_close(p, i);
        return true;
    }
    if (h.kind == CCOIP_DATA_CHALLENGE && len == CCOIP_DATA_HEADER_BYTES &&
        ccoip_auth_on(&p->cfg.auth) && !c->has_peer_challenge && !c->asked) {
        ccoip_auth_nonce_from_u64(h.tag, h.seq, c->peer_challenge);
        c->has_peer_challenge = true;
        return true;
    }
    if (h.kind == CCOIP_DATA_STATE_OFFER && !c->asked) {
        offer_take(p, i, &h, data, len);
        return true;
    }
    return false;
}

void p_offer_timers(ccoip_peer *p)
{
    if (!p->ss.await_offer || p->ss.st != PSS_FETCHING) return;
    if (p->now < sm_add_sat(p->ss.await_ns, sm_ms(p->ctl.evict_ms))) return;
    p_state_fetch_fail(p, "the distributor did not offer within evict_ms");
}
