/*
 * peer_relay.c — a ring link neither end can dial, through the master's
 * relay (docs/protocol.md §8.6). Both ends dial the relay port on the
 * master's address and send a RELAY_JOIN (epoch, the link's source and
 * destination, the pool connection, the role); authenticated runs: after the
 * master's CHALLENGE, with the link key's proof over it. The master splices
 * the two. Then the link's own hello runs end to end: the source goes on as
 * the dialler of §8.1 (peer_wire.c, its SUCC side dialled to the relay), the
 * destination takes its relay connections as accepted ones (an acc[] slot
 * waiting for the HELLO, its own CHALLENGE first when authenticated).
 */
#include <string.h>

#include "peer_internal.h"

bool p_relay_target(ccoip_peer *p, uint32_t s, uint32_t port)
{
    p->wire.dial_port[s] = port;
    p->wire.dial_url_len[s] = 0;
    p->wire.dial_url[s][0] = '\0';
    p->wire.dial_ip_len[s] = 0;
    const char *url = p->ctl.master_url;
    if (url[0] == '\0') {
        /* The master's address as configured. */
        memcpy(p->wire.dial_ip[s], p->cfg.master_ip, p->cfg.master_ip_len);
        p->wire.dial_ip_len[s] = p->cfg.master_ip_len;
        return p->cfg.master_ip_len == 4 || p->cfg.master_ip_len == 16;
    }
    /* The master's URL with the relay port: scheme://host[:port] -> scheme://host:relay (core/
     * links no string search: plain loops). */
    const size_t len = strlen(url);
    size_t host = 0;
    for (size_t i = 0; i + 2u < len && host == 0; i++) {
        if (url[i] == ':' && url[i + 1u] == '/' && url[i + 2u] == '/') host = i + 3u;
    }
    if (host == 0 || (len >= 4u && memcmp(url, "ipc:", 4) == 0)) return false;
    size_t after = host;
    if (url[host] == '[') { /* [v6 address] */
        while (after < len && url[after] != ']')
            after++;
        if (after == len) return false;
    }
    size_t keep = len;
    for (size_t i = after; i < len; i++) {
        if (url[i] == ':') keep = i;
    }
    if (keep + 12u >= CCOIP_URL_MAX) return false; /* ":" and at most 10 digits */
    memcpy(p->wire.dial_url[s], url, keep);
    p->wire.dial_url[s][keep] = ':';
    char digits[SM_U64_DEC_MAX];
    const uint32_t nd = sm_u64_dec(digits, port);
    memcpy(p->wire.dial_url[s] + keep + 1u, digits, nd);
    keep += 1u + nd;
    p->wire.dial_url[s][keep] = '\0';
    p->wire.dial_url_len[s] = (uint32_t)keep;
    return true;
}

void p_relay_join(ccoip_peer *p, uint64_t conn, uint32_t s, uint32_t k, const uint8_t *challenge)
{
    ccoip_data_header h;
    ccoip_data_header_init(&h, CCOIP_DATA_RELAY_JOIN);
    h.epoch = p->wire.plan_epoch;
    h.tag = s == P_SIDE_SUCC ? p->id : p->wire.plan_pred;
    h.seq = s == P_SIDE_SUCC ? p->wire.plan_succ : p->id;
    h.chunk = k;
    h.step = s == P_SIDE_SUCC ? 0u : 1u; /* the source dials through, the destination accepts */
    pcclResult_t r;
    if (challenge != NULL) {
        uint8_t proof[CCOIP_AUTH_MAC_BYTES];
        const uint64_t v[5] = {h.epoch, h.tag, h.seq, h.chunk, h.step};
        ccoip_auth_mac(&p->cfg.auth, s == P_SIDE_SUCC ? p->wire.succ_key : p->wire.pred_key,
                       "pccl relay join", challenge, CCOIP_AUTH_NONCE_BYTES, NULL, 0, v, 5, proof);
        r = sm_send_data_proof(&p->out, &p->lim, conn, &h, proof);
    } else {
        r = sm_send_data_header(&p->out, &p->lim, conn, &h);
    }
    if (r != pcclSuccess) p->out.overflow = true;
}

void p_relay_dial_acc(ccoip_peer *p, uint32_t k)
{
    if (k >= CCOIP_P2P_POOL_MAX || p->wire.rly_conn[k] != CCOIP_CONN_NONE) return;
    ccoip_action *a = sm_out_push(&p->out, CCOIP_ACT_CONNECT);
    if (a == NULL) return;
    p->wire.rly_conn[k] = p->next_conn++;
    p->wire.rly_state[k] = PT_DIALING;
    a->conn = p->wire.rly_conn[k];
    p_wire_connect_to(p, P_SIDE_PRED, a); /* the relay endpoint is kept in dial_*[PRED] */
}

/* The destination's relay connection k joined: from now on an accepted link of the pool. */
static void relay_accept(ccoip_peer *p, uint32_t k, const uint8_t *challenge)
{
    const uint64_t conn = p->wire.rly_conn[k];
    p_relay_join(p, conn, P_SIDE_PRED, k, challenge);
    p->wire.rly_conn[k] = CCOIP_CONN_NONE;
    p->wire.rly_state[k] = PT_NONE;
    if (!p_wire_acc_take(p, conn)) {
        ccoip_action *a = sm_out_push(&p->out, CCOIP_ACT_CLOSE);
        if (a != NULL) a->conn = conn;
    }
}

static uint32_t relay_index(const ccoip_peer *p, uint64_t conn)
{
    if (conn == CCOIP_CONN_NONE) return CCOIP_P2P_POOL_MAX;
    for (uint32_t k = 0; k < CCOIP_P2P_POOL_MAX; k++) {
        if (p->wire.rly_conn[k] == conn) return k;
    }
    return CCOIP_P2P_POOL_MAX;
}

bool p_relay_on_conn_up(ccoip_peer *p, const ccoip_event *ev)
{
    const uint32_t k = relay_index(p, ev->conn);
    if (ev->accepted || k >= CCOIP_P2P_POOL_MAX || p->wire.rly_state[k] != PT_DIALING) return false;
    if (ccoip_auth_on(&p->cfg.auth)) {
        p->wire.rly_state[k] = PT_RELAY_WAIT; /* the join answers the master's CHALLENGE */
        return true;
    }
    relay_accept(p, k, NULL);
    return true;
}

bool p_relay_on_recv(ccoip_peer *p, uint64_t conn, const uint8_t *data, uint64_t len)
{
    const uint32_t k = relay_index(p, conn);
    if (k >= CCOIP_P2P_POOL_MAX) return false;
    ccoip_data_header h;
    if (p->wire.rly_state[k] == PT_RELAY_WAIT && len == CCOIP_DATA_HEADER_BYTES &&
        ccoip_data_header_decode(data, len, &p->lim, &h) == pcclSuccess &&
        h.kind == CCOIP_DATA_CHALLENGE) {
        uint8_t challenge[CCOIP_AUTH_NONCE_BYTES];
        ccoip_auth_nonce_from_u64(h.tag, h.seq, challenge);
        relay_accept(p, k, challenge);
        return true;
    }
    sm_log(&p->out, CCOIP_LOG_WARN, "peer %U: bad frame from the master's relay, closing", p->id);
    ccoip_action *a = sm_out_push(&p->out, CCOIP_ACT_CLOSE);
    if (a != NULL) a->conn = conn;
    p->wire.rly_conn[k] = CCOIP_CONN_NONE;
    p->wire.rly_state[k] = PT_NONE;
    return true;
}

bool p_relay_on_closed(ccoip_peer *p, uint64_t conn)
{
    const uint32_t k = relay_index(p, conn);
    if (k >= CCOIP_P2P_POOL_MAX) return false;
    p->wire.rly_conn[k] = CCOIP_CONN_NONE;
    p->wire.rly_state[k] = PT_NONE;
    return true;
}

void p_relay_reset(ccoip_peer *p)
{
    for (uint32_t k = 0; k < CCOIP_P2P_POOL_MAX; k++) {
        if (p->wire.rly_conn[k] != CCOIP_CONN_NONE) {
            ccoip_action *a = sm_out_push(&p->out, CCOIP_ACT_CLOSE);
            if (a != NULL) a->conn = p->wire.rly_conn[k];
        }
        p->wire.rly_conn[k] = CCOIP_CONN_NONE;
        p->wire.rly_state[k] = PT_NONE;
    }
}
