/*
 * test_auth.c — authenticated runs (docs/protocol.md §6.1.1, §8.0, §8.1, §8.3;
 * docs/security.md): the run key proven on the master link both ways, per-epoch link keys
 * proven in p2p HELLOs that answer the acceptor's own CHALLENGE (a replayed or guessed HELLO
 * is closed), the group key proven by shared-state requests. Real machines through the
 * in-memory harness for whole runs; a bare master and a bare peer for what a rogue sends.
 * The MAC is the core's keyed stand-in (any pure function will do; the runtime's is HMAC-SHA-256).
 */
#include <stdlib.h>
#include <string.h>

#include "ccoip_auth.h"
#include "ccoip_frame.h"
#include "ccoip_hash.h"
#include "ccoip_master.h"
#include "ccoip_peer.h"
#include "ptest.h"
#include "sm_harness.h"

/* A configuration whose run key is all `run` and secret all `secret`. */
static ccoip_auth_config auth_with(uint8_t run, uint8_t secret)
{
    ccoip_auth_config a;
    memset(&a, 0, sizeof(a));
    a.mac = ccoip_auth_standin_mac;
    memset(a.run_key, run, sizeof(a.run_key));
    memset(a.secret, secret, sizeof(a.secret));
    return a;
}

/* ------------------------------------------------------------------------ */
/* Whole runs through the harness                                            */
/* ------------------------------------------------------------------------ */

static smh *harness(bool master_auth, uint8_t master_run)
{
    ccoip_master_config mc;
    ccoip_master_config_default(&mc);
    if (master_auth) mc.auth = auth_with(master_run, 0x10);
    ccoip_peer_config pc;
    ccoip_peer_config_default(&pc);
    return smh_create(&mc, &pc);
}

/* Same token everywhere: the ring forms (every HELLO proven with its epoch's link key) and
 * all-reduces give exact sums. */
PTEST(auth, authenticated_ring_allreduces_exact_sums)
{
    smh *h = harness(true, 7);
    const ccoip_auth_config pa = auth_with(7, 0x20);
    smh_set_peer_auth(h, &pa);
    PT_ASSERT(smh_form_ring(h, 3, 0), "ring of 3 formed with authentication");
    int32_t in[3][64], out[3][64];
    uint64_t c[3];
    ccoip_allreduce_args a;
    memset(&a, 0, sizeof(a));
    a.tag = 1;
    a.count = 64;
    a.dtype = pcclInt32;
    a.op = pcclSum;
    a.quant_algorithm = pcclQuantNone;
    for (uint32_t i = 0; i < 3; i++) {
        for (uint32_t k = 0; k < 64; k++)
            in[i][k] = (int32_t)(1000 * i + k);
        c[i] = smh_allreduce(h, i, &a, in[i], out[i]);
    }
    smh_run(h);
    for (uint32_t i = 0; i < 3; i++) {
        pcclResult_t r = pcclInternalError;
        PT_ASSERT(smh_done(h, i, c[i], &r) && r == pcclSuccess, "peer %u: %d", i, (int)r);
        for (uint32_t k = 0; k < 64; k++)
            PT_ASSERT(out[i][k] == (int32_t)(3000 + 3 * k), "peer %u [%u] = %d", i, k, out[i][k]);
    }
    smh_destroy(h);
}

/* One peer's connect, and what the master holds afterwards. */
static pcclResult_t connect_one(smh *h)
{
    smh_add_peer(h, 0);
    const uint64_t c = smh_submit(h, 0, CCOIP_CMD_CONNECT);
    smh_run(h);
    pcclResult_t r = pcclInternalError;
    PT_ASSERT(smh_done(h, 0, c, &r), "connect finished");
    return r;
}

/* A different token: the peer finds the master's proof wrong and fails its connect with
 * pcclAuthenticationFailed; the master admits nobody. */
PTEST(auth, wrong_token_fails_connect)
{
    smh *h = harness(true, 7);
    const ccoip_auth_config pa = auth_with(8, 0x20);
    smh_set_peer_auth(h, &pa);
    PT_ASSERT(connect_one(h) == pcclAuthenticationFailed, "wrong token");
    PT_ASSERT(ccoip_master_num_pending(smh_master(h)) == 0, "nobody pending");
    PT_ASSERT(smh_log_count(h, "authentication failed") >= 1, "logged");
    smh_destroy(h);
}

/* No token against an authenticating master, and a token against a master without one. */
PTEST(auth, one_side_without_a_token_fails_connect)
{
    smh *h = harness(true, 7);
    PT_ASSERT(connect_one(h) == pcclAuthenticationFailed, "peer without a token");
    PT_ASSERT(ccoip_master_num_pending(smh_master(h)) == 0, "nobody pending");
    smh_destroy(h);
    h = harness(false, 0);
    const ccoip_auth_config pa = auth_with(7, 0x20);
    smh_set_peer_auth(h, &pa);
    PT_ASSERT(connect_one(h) == pcclAuthenticationFailed, "master without a token");
    smh_destroy(h);
}

/* ------------------------------------------------------------------------ */
/* A bare master: the Join proof (§6.1.1)                                    */
/* ------------------------------------------------------------------------ */

static uint8_t g_arena[1u << 16];

typedef struct m_seen {
    ccoip_pb_master_to_peer env; /* the last SEND, decoded (bytes in g_arena) */
    bool sent, closed;
} m_seen;

static m_seen m_step(ccoip_master *m, const ccoip_event *ev)
{
    m_seen s;
    memset(&s, 0, sizeof(s));
    PT_ASSERT(ccoip_master_step(m, ev) == pcclSuccess, "master step");
    ccoip_action a;
    while (ccoip_master_poll(m, &a)) {
        if (a.type == CCOIP_ACT_CLOSE && a.conn == ev->conn) s.closed = true;
        if (a.type != CCOIP_ACT_SEND || a.conn != ev->conn) continue;
        ccoip_pb_arena ar;
        ccoip_pb_arena_init(&ar, g_arena, sizeof(g_arena));
        PT_ASSERT(ccoip_ctrl_decode_m2p(a.data, a.len, NULL, &ar, &s.env) == pcclSuccess, "m2p");
        s.sent = true;
    }
    return s;
}

static m_seen m_send(ccoip_master *m, uint64_t conn, const ccoip_pb_peer_to_master *env)
{
    static uint8_t buf[1024];
    uint64_t len = 0;
    PT_ASSERT(ccoip_ctrl_encode_p2m(env, NULL, buf, sizeof(buf), &len) == pcclSuccess, "encode");
    ccoip_event ev;
    memset(&ev, 0, sizeof(ev));
    ev.type = CCOIP_EV_RECV;
    ev.now_ns = 5000;
    ev.conn = conn;
    ev.data = buf;
    ev.len = len;
    return m_step(m, &ev);
}

/* A session's Hello exchange: our nonce is all `n`; returns its id, the master's nonce. */
static uint64_t m_hello(ccoip_master *m, const ccoip_auth_config *pa, uint64_t conn, uint8_t n,
                        uint8_t master_nonce[CCOIP_AUTH_NONCE_BYTES])
{
    ccoip_event ev;
    memset(&ev, 0, sizeof(ev));
    ev.type = CCOIP_EV_CONN_UP;
    ev.now_ns = 4000;
    ev.conn = conn;
    ev.accepted = true;
    (void)m_step(m, &ev);
    uint8_t nonce[CCOIP_AUTH_NONCE_BYTES];
    memset(nonce, n, sizeof(nonce));
    ccoip_pb_peer_to_master env;
    memset(&env, 0, sizeof(env));
    env.call_id = 1;
    env.body_case = CCOIP_PB_PEER_TO_MASTER_BODY_HELLO;
    env.body.hello.min_version = CCOIP_PROTOCOL_VERSION_MIN;
    env.body.hello.max_version = CCOIP_PROTOCOL_VERSION_MAX;
    env.body.hello.nonce.data = nonce;
    env.body.hello.nonce.len = sizeof(nonce);
    m_seen s = m_send(m, conn, &env);
    const ccoip_pb_hello_result *hr = &s.env.body.hello;
    PT_ASSERT(s.sent && s.env.status == CCOIP_PB_STATUS_SUCCESS, "hello answered");
    PT_ASSERT(hr->nonce.len == CCOIP_AUTH_NONCE_BYTES && hr->proof.len == CCOIP_AUTH_MAC_BYTES,
              "challenge and proof");
    memcpy(master_nonce, hr->nonce.data, CCOIP_AUTH_NONCE_BYTES);
    /* The master's proof: the run key over our nonce, its nonce and the id. */
    uint8_t want[CCOIP_AUTH_MAC_BYTES];
    ccoip_auth_mac(pa, pa->run_key, "pccl master proof", nonce, sizeof(nonce), master_nonce,
                   CCOIP_AUTH_NONCE_BYTES, &hr->peer_id, 1, want);
    PT_ASSERT(memcmp(want, hr->proof.data, sizeof(want)) == 0, "the master proves the run key");
    return hr->peer_id;
}

static m_seen m_join(ccoip_master *m, uint64_t conn, const uint8_t *proof)
{
    ccoip_pb_endpoint ep;
    memset(&ep, 0, sizeof(ep));
    ep.kind = CCOIP_PB_ENDPOINT_KIND_P2P;
    ep.port = 7000;
    ccoip_pb_peer_to_master env;
    memset(&env, 0, sizeof(env));
    env.call_id = 2;
    env.body_case = CCOIP_PB_PEER_TO_MASTER_BODY_JOIN;
    env.body.join.endpoints = &ep;
    env.body.join.endpoints_count = 1;
    if (proof != NULL) {
        env.body.join.proof.data = proof;
        env.body.join.proof.len = CCOIP_AUTH_MAC_BYTES;
    }
    return m_send(m, conn, &env);
}

/* A Join without a proof, or with the proof of another session (replayed), is answered
 * STATUS_AUTHENTICATION_FAILED and closed; the session's own proof is admitted. */
PTEST(auth, join_needs_this_sessions_proof)
{
    ccoip_master_config mc;
    ccoip_master_config_default(&mc);
    mc.auth = auth_with(7, 0x10);
    ccoip_master *m = NULL;
    PT_ASSERT(ccoip_master_create(&mc, 1, &m) == pcclSuccess, "master");
    const ccoip_auth_config pa = auth_with(7, 0x20);
    uint8_t mn[3][CCOIP_AUTH_NONCE_BYTES];
    uint64_t id[3];
    for (uint32_t i = 0; i < 3; i++)
        id[i] = m_hello(m, &pa, 10 + i, (uint8_t)(0x40 + i), mn[i]);
    PT_ASSERT(memcmp(mn[0], mn[1], CCOIP_AUTH_NONCE_BYTES) != 0, "fresh challenge per session");
    uint8_t nonce0[CCOIP_AUTH_NONCE_BYTES], proof0[CCOIP_AUTH_MAC_BYTES];
    memset(nonce0, 0x40, sizeof(nonce0));
    ccoip_auth_mac(&pa, pa.run_key, "pccl peer proof", mn[0], CCOIP_AUTH_NONCE_BYTES, nonce0,
                   sizeof(nonce0), &id[0], 1, proof0);
    m_seen s = m_join(m, 11, proof0); /* session 0's proof on session 1 */
    PT_ASSERT(s.sent && s.env.status == CCOIP_PB_STATUS_AUTHENTICATION_FAILED &&
                  s.env.reason == CCOIP_PB_REASON_AUTH_FAILED && s.closed,
              "replayed proof refused (status %d)", (int)s.env.status);
    s = m_join(m, 12, NULL);
    PT_ASSERT(s.env.status == CCOIP_PB_STATUS_AUTHENTICATION_FAILED && s.closed, "no proof");
    s = m_join(m, 10, proof0);
    PT_ASSERT(s.env.status == CCOIP_PB_STATUS_SUCCESS && !s.closed &&
                  s.env.body_case == CCOIP_PB_MASTER_TO_PEER_BODY_JOIN,
              "own proof admitted");
    PT_ASSERT(ccoip_master_num_pending(m) == 1, "one pending");
    ccoip_master_destroy(m);
}

/* ------------------------------------------------------------------------ */
/* A bare peer: its p2p and shared-state listeners (§8.1, §8.3)              */
/* ------------------------------------------------------------------------ */

typedef struct p_seen {
    bool closed;
    bool sent_data;
    ccoip_data_header data; /* the last data header sent on the connection */
    uint8_t proof[CCOIP_AUTH_MAC_BYTES];
    bool sent_ctrl;
    ccoip_pb_peer_to_master env; /* the last control frame sent to the master */
} p_seen;

static p_seen p_step(ccoip_peer *p, const ccoip_event *ev)
{
    p_seen s;
    memset(&s, 0, sizeof(s));
    PT_ASSERT(ccoip_peer_step(p, ev) == pcclSuccess, "peer step");
    ccoip_action a;
    while (ccoip_peer_poll(p, &a)) {
        if (a.type == CCOIP_ACT_LISTEN) ccoip_peer_set_port(p, a.listener, 7000 + a.listener, NULL);
        if (a.type == CCOIP_ACT_CLOSE && a.conn == ev->conn) s.closed = true;
        if (a.type != CCOIP_ACT_SEND) continue;
        if (a.conn == CCOIP_PEER_MASTER_CONN) {
            ccoip_pb_arena ar;
            ccoip_pb_arena_init(&ar, g_arena, sizeof(g_arena));
            PT_ASSERT(ccoip_ctrl_decode_p2m(a.data, a.len, NULL, &ar, &s.env) == pcclSuccess,
                      "p2m");
            s.sent_ctrl = true;
        } else if (a.conn == ev->conn) {
            PT_ASSERT(ccoip_data_header_decode(a.data, a.len, NULL, &s.data) == pcclSuccess,
                      "data header");
            if (a.len == CCOIP_DATA_HEADER_BYTES + CCOIP_AUTH_MAC_BYTES)
                memcpy(s.proof, a.data + CCOIP_DATA_HEADER_BYTES, CCOIP_AUTH_MAC_BYTES);
            s.sent_data = true;
        }
    }
    return s;
}

static p_seen p_recv(ccoip_peer *p, uint64_t conn, const uint8_t *d, uint64_t len)
{
    ccoip_event ev;
    memset(&ev, 0, sizeof(ev));
    ev.type = CCOIP_EV_RECV;
    ev.now_ns = 9000;
    ev.conn = conn;
    ev.data = d;
    ev.len = len;
    return p_step(p, &ev);
}

static p_seen p_from_master(ccoip_peer *p, const ccoip_pb_master_to_peer *env)
{
    static uint8_t buf[2048];
    uint64_t len = 0;
    PT_ASSERT(ccoip_ctrl_encode_m2p(env, NULL, buf, sizeof(buf), &len) == pcclSuccess, "encode");
    return p_recv(p, CCOIP_PEER_MASTER_CONN, buf, len);
}

enum { ME = 7, PRED = 5, SUCC = 9 };
static const uint8_t k_pred[CCOIP_AUTH_KEY_BYTES] = {0x55, 0x55, 0x55, 0x55, 0x55};
static const uint8_t k_succ[CCOIP_AUTH_KEY_BYTES] = {0x99, 0x99, 0x99, 0x99, 0x99};
static const uint8_t k_group[CCOIP_AUTH_KEY_BYTES] = {0x66, 0x66, 0x66, 0x66, 0x66};

/* A peer with a run key, taken by hand through Hello, Join and the plan of epoch 1 (ring
 * PRED -> ME -> SUCC) with the link keys above; checks its Join proof on the way. */
static ccoip_peer *planned_peer(const ccoip_auth_config *pa)
{
    ccoip_peer_config c;
    ccoip_peer_config_default(&c);
    c.master_url = "tcp://master";
    c.auth = *pa;
    ccoip_peer *p = NULL;
    PT_ASSERT(ccoip_peer_create(&c, 1, &p) == pcclSuccess, "peer_create");
    ccoip_event ev;
    memset(&ev, 0, sizeof(ev));
    ev.type = CCOIP_EV_START;
    ev.now_ns = 1000;
    (void)p_step(p, &ev);
    ev.type = CCOIP_EV_SUBMIT;
    ev.cmd.type = CCOIP_CMD_CONNECT;
    ev.cmd.cmd_id = 1;
    (void)p_step(p, &ev);
    memset(&ev, 0, sizeof(ev));
    ev.type = CCOIP_EV_CONN_UP;
    ev.now_ns = 2000;
    ev.conn = CCOIP_PEER_MASTER_CONN;
    p_seen s = p_step(p, &ev);
    PT_ASSERT(s.sent_ctrl && s.env.body.hello.nonce.len == CCOIP_AUTH_NONCE_BYTES, "Hello nonce");
    uint8_t nonce[CCOIP_AUTH_NONCE_BYTES], mnonce[CCOIP_AUTH_NONCE_BYTES], proof[32];
    memcpy(nonce, s.env.body.hello.nonce.data, sizeof(nonce));
    memset(mnonce, 0x33, sizeof(mnonce));
    const uint64_t id = ME;
    ccoip_auth_mac(pa, pa->run_key, "pccl master proof", nonce, sizeof(nonce), mnonce,
                   sizeof(mnonce), &id, 1, proof);
    ccoip_pb_master_to_peer m;
    memset(&m, 0, sizeof(m));
    m.call_id = s.env.call_id;
    m.body_case = CCOIP_PB_MASTER_TO_PEER_BODY_HELLO;
    m.body.hello.version = CCOIP_PROTOCOL_VERSION;
    m.body.hello.peer_id = ME;
    m.body.hello.heartbeat_ms = 250;
    m.body.hello.evict_ms = 2000;
    m.body.hello.nonce.data = mnonce;
    m.body.hello.nonce.len = sizeof(mnonce);
    m.body.hello.proof.data = proof;
    m.body.hello.proof.len = sizeof(proof);
    s = p_from_master(p, &m);
    PT_ASSERT(s.sent_ctrl && s.env.body_case == CCOIP_PB_PEER_TO_MASTER_BODY_JOIN, "Join");
    uint8_t want[CCOIP_AUTH_MAC_BYTES];
    ccoip_auth_mac(pa, pa->run_key, "pccl peer proof", mnonce, sizeof(mnonce), nonce, sizeof(nonce),
                   &id, 1, want);
    PT_ASSERT(s.env.body.join.proof.len == CCOIP_AUTH_MAC_BYTES &&
                  memcmp(s.env.body.join.proof.data, want, sizeof(want)) == 0,
              "the Join proves the run key over both nonces");
    memset(&m, 0, sizeof(m));
    m.call_id = s.env.call_id;
    m.body_case = CCOIP_PB_MASTER_TO_PEER_BODY_JOIN;
    s = p_from_master(p, &m);
    PT_ASSERT(s.sent_ctrl && s.env.body_case == CCOIP_PB_PEER_TO_MASTER_BODY_UPDATE_TOPOLOGY,
              "topology vote");
    static const uint64_t ring[3] = {PRED, ME, SUCC};
    static const uint8_t lo[4] = {127, 0, 0, 1};
    ccoip_pb_endpoint eps[2];
    ccoip_pb_peer_info nb[2];
    memset(eps, 0, sizeof(eps));
    memset(nb, 0, sizeof(nb));
    for (uint32_t i = 0; i < 2; i++) {
        eps[i].kind = CCOIP_PB_ENDPOINT_KIND_P2P;
        eps[i].ip.data = lo;
        eps[i].ip.len = 4;
        eps[i].port = 7100 + i;
        nb[i].peer_id = i == 0 ? PRED : SUCC;
        nb[i].endpoints = &eps[i];
        nb[i].endpoints_count = 1;
    }
    memset(&m, 0, sizeof(m));
    m.call_id = s.env.call_id;
    m.body_case = CCOIP_PB_MASTER_TO_PEER_BODY_TOPOLOGY_PLAN;
    ccoip_pb_topology_plan *pl = &m.body.topology_plan;
    pl->epoch = 1;
    pl->neighbours = nb;
    pl->neighbours_count = 2;
    pl->ring = ring;
    pl->ring_count = 3;
    pl->pred_key.data = k_pred;
    pl->pred_key.len = CCOIP_AUTH_KEY_BYTES;
    pl->succ_key.data = k_succ;
    pl->succ_key.len = CCOIP_AUTH_KEY_BYTES;
    pl->group_key.data = k_group;
    pl->group_key.len = CCOIP_AUTH_KEY_BYTES;
    (void)p_from_master(p, &m);
    return p;
}

/* Accepts conn on listener l; returns the nonce of the CHALLENGE the peer sent on it. */
static void p_accept(ccoip_peer *p, uint64_t conn, ccoip_listener l,
                     uint8_t nonce[CCOIP_AUTH_NONCE_BYTES])
{
    ccoip_event ev;
    memset(&ev, 0, sizeof(ev));
    ev.type = CCOIP_EV_CONN_UP;
    ev.now_ns = 8000;
    ev.conn = conn;
    ev.accepted = true;
    ev.listener = l;
    p_seen s = p_step(p, &ev);
    PT_ASSERT(!s.closed && s.sent_data && s.data.kind == CCOIP_DATA_CHALLENGE,
              "a CHALLENGE on accept");
    ccoip_auth_nonce_from_u64(s.data.tag, s.data.seq, nonce);
}

/* The predecessor's HELLO for connection 0 of epoch 1, proven with key over challenge (NULL:
 * without a proof). */
static p_seen p_hello(ccoip_peer *p, const ccoip_auth_config *pa, uint64_t conn, const uint8_t *key,
                      const uint8_t *challenge)
{
    ccoip_data_header h;
    ccoip_data_header_init(&h, CCOIP_DATA_HELLO);
    h.epoch = 1;
    h.tag = PRED;
    h.seq = ME;
    uint8_t buf[CCOIP_DATA_HEADER_BYTES + CCOIP_AUTH_MAC_BYTES];
    if (challenge != NULL) {
        const uint64_t v[5] = {h.epoch, h.tag, h.seq, h.chunk, h.step};
        ccoip_auth_mac(pa, key, "pccl p2p hello", challenge, CCOIP_AUTH_NONCE_BYTES, NULL, 0, v, 5,
                       buf + CCOIP_DATA_HEADER_BYTES);
        h.length = CCOIP_AUTH_MAC_BYTES;
    }
    PT_ASSERT(ccoip_data_header_encode(&h, NULL, buf, sizeof(buf)) == pcclSuccess, "HELLO");
    return p_recv(p, conn, buf, CCOIP_DATA_HEADER_BYTES + h.length);
}

/* Only a HELLO proven with this epoch's key of the link from the predecessor, over the
 * CHALLENGE of its own connection, is acknowledged: one replayed from another connection,
 * one without a proof and one under another key are closed. */
PTEST(auth, p2p_hello_must_answer_its_own_challenge)
{
    const ccoip_auth_config pa = auth_with(7, 0x20);
    ccoip_peer *p = planned_peer(&pa);
    uint8_t c900[CCOIP_AUTH_NONCE_BYTES], c901[CCOIP_AUTH_NONCE_BYTES];
    uint8_t c902[CCOIP_AUTH_NONCE_BYTES], c903[CCOIP_AUTH_NONCE_BYTES];
    p_accept(p, 900, CCOIP_LISTENER_P2P, c900);
    p_accept(p, 901, CCOIP_LISTENER_P2P, c901);
    PT_ASSERT(memcmp(c900, c901, sizeof(c900)) != 0, "a fresh challenge per connection");
    p_seen s = p_hello(p, &pa, 901, k_pred, c900); /* conn 900's HELLO, replayed on 901 */
    PT_ASSERT(s.closed && !s.sent_data, "replayed HELLO closed");
    s = p_hello(p, &pa, 900, NULL, NULL);
    PT_ASSERT(s.closed && !s.sent_data, "HELLO without a proof closed");
    p_accept(p, 902, CCOIP_LISTENER_P2P, c902);
    s = p_hello(p, &pa, 902, k_succ, c902);
    PT_ASSERT(s.closed && !s.sent_data, "HELLO under another link's key closed");
    p_accept(p, 903, CCOIP_LISTENER_P2P, c903);
    s = p_hello(p, &pa, 903, k_pred, c903);
    PT_ASSERT(!s.closed && s.sent_data && s.data.kind == CCOIP_DATA_HELLO_ACK,
              "proven HELLO acknowledged");
    ccoip_peer_destroy(p);
}

/* A STATE_REQUEST on the shared-state port: without the group key's proof over the port's
 * CHALLENGE the connection is closed unanswered; with it, answered (here: nothing to serve). */
PTEST(auth, state_request_needs_the_group_key)
{
    const ccoip_auth_config pa = auth_with(7, 0x20);
    ccoip_peer *p = planned_peer(&pa);
    for (uint32_t proven = 0; proven < 2; proven++) {
        const uint64_t conn = 950 + proven;
        uint8_t nonce[CCOIP_AUTH_NONCE_BYTES];
        p_accept(p, conn, CCOIP_LISTENER_SHARED_STATE, nonce);
        ccoip_pb_bytes key = {(const uint8_t *)"w", 1};
        ccoip_pb_shared_state_request req;
        memset(&req, 0, sizeof(req));
        req.revision = 1;
        req.round = 1;
        req.keys = &key;
        req.keys_count = 1;
        ccoip_data_header h;
        ccoip_data_header_init(&h, CCOIP_DATA_STATE_REQUEST);
        h.tag = PRED;
        h.seq = 1;
        uint8_t proof[CCOIP_AUTH_MAC_BYTES];
        if (proven) {
            const uint64_t v[4] = {h.tag, h.seq, req.round, req.revision};
            ccoip_auth_mac(&pa, k_group, "pccl state request", nonce, sizeof(nonce), NULL, 0, v, 4,
                           proof);
            req.proof.data = proof;
            req.proof.len = sizeof(proof);
        }
        uint8_t buf[256];
        uint64_t len = 0;
        PT_ASSERT(ccoip_pb_shared_state_request_encode(&req, buf + CCOIP_DATA_HEADER_BYTES,
                                                       sizeof(buf) - CCOIP_DATA_HEADER_BYTES,
                                                       &len) == pcclSuccess,
                  "request");
        h.length = len;
        PT_ASSERT(ccoip_data_header_encode(&h, NULL, buf, sizeof(buf)) == pcclSuccess, "header");
        p_seen s = p_recv(p, conn, buf, CCOIP_DATA_HEADER_BYTES + len);
        if (proven) {
            PT_ASSERT(!s.closed && s.sent_data && s.data.kind == CCOIP_DATA_STATE_RESPONSE,
                      "proven request answered");
        } else {
            PT_ASSERT(s.closed && !s.sent_data, "unproven request closed unanswered");
        }
    }
    ccoip_peer_destroy(p);
}

/* The data frames of §8.0: CHALLENGE carries nothing; HELLO nothing or exactly a proof. */
PTEST(auth, challenge_and_hello_lengths)
{
    uint8_t buf[CCOIP_DATA_HEADER_BYTES];
    ccoip_data_header h, d;
    ccoip_data_header_init(&h, CCOIP_DATA_CHALLENGE);
    h.tag = 0x0123456789abcdefu;
    h.seq = 0xfedcba9876543210u;
    PT_ASSERT(ccoip_data_header_encode(&h, NULL, buf, sizeof(buf)) == pcclSuccess, "challenge");
    PT_ASSERT(ccoip_data_header_decode(buf, sizeof(buf), NULL, &d) == pcclSuccess &&
                  d.kind == CCOIP_DATA_CHALLENGE && d.tag == h.tag && d.seq == h.seq,
              "round trip");
    h.length = 1;
    PT_ASSERT(ccoip_data_header_encode(&h, NULL, buf, sizeof(buf)) == pcclInvalidArgument,
              "challenge with a payload");
    ccoip_data_header_init(&h, CCOIP_DATA_HELLO);
    for (uint64_t len = 0; len <= 64; len++) {
        h.length = len;
        const pcclResult_t want =
            len == 0 || len == CCOIP_DATA_PROOF_BYTES ? pcclSuccess : pcclInvalidArgument;
        PT_ASSERT(ccoip_data_header_encode(&h, NULL, buf, sizeof(buf)) == want, "HELLO %u",
                  (unsigned)len);
    }
    uint8_t n[CCOIP_AUTH_NONCE_BYTES];
    uint64_t t = 0, s = 0;
    for (uint32_t i = 0; i < sizeof(n); i++)
        n[i] = (uint8_t)(i * 17u + 3u);
    ccoip_auth_nonce_to_u64(n, &t, &s);
    uint8_t back[CCOIP_AUTH_NONCE_BYTES];
    ccoip_auth_nonce_from_u64(t, s, back);
    PT_ASSERT(memcmp(n, back, sizeof(n)) == 0, "nonce <-> (tag, seq)");
    PT_ASSERT(ccoip_auth_equal(n, back, sizeof(n)) && !ccoip_auth_equal(n, buf, sizeof(n)),
              "equal");
}
