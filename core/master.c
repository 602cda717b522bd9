/*
 * master.c — the CCoIP master: sessions (hello, join, leave), liveness
 * (heartbeats, eviction of silent peers), dispatch of peer frames, and the
 * step/poll/deadline entry points. Topology votes and the p2p phase are in
 * master_topology.c, collectives in master_collective.c. docs/core.md §2.
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "master_internal.h"

void ccoip_master_config_default(ccoip_master_config *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->max_peers = 64;
    cfg->max_ops = 64;
    cfg->heartbeat_ms = 250;
    cfg->evict_ms = 2000;
    cfg->vote_timeout_ms = 60000;
    cfg->ring_search_budget = 100000;
    cfg->max_state_keys = 64;
    cfg->probe_bytes = (uint64_t)1 << 20;
    cfg->min_collective_world = 2;
    cfg->max_message_bytes = CCOIP_PB_DEFAULT_MAX_MESSAGE_BYTES;
    cfg->max_unjoined_per_addr = 16;
}

static void master_resolve_config(ccoip_master_config *c)
{
    ccoip_master_config d;
    ccoip_master_config_default(&d);
    if (c->max_peers == 0) c->max_peers = d.max_peers;
    if (c->max_ops == 0) c->max_ops = d.max_ops;
    if (c->heartbeat_ms == 0) c->heartbeat_ms = d.heartbeat_ms;
    if (c->evict_ms == 0) c->evict_ms = d.evict_ms;
    if (c->vote_timeout_ms == 0) c->vote_timeout_ms = d.vote_timeout_ms;
    if (c->ring_search_budget == 0) c->ring_search_budget = d.ring_search_budget;
    if (c->max_state_keys == 0) c->max_state_keys = d.max_state_keys;
    if (c->probe_bytes == 0) c->probe_bytes = d.probe_bytes;
    if (c->min_collective_world == 0) c->min_collective_world = d.min_collective_world;
    if (c->max_message_bytes == 0) c->max_message_bytes = d.max_message_bytes;
    if (c->max_unjoined_per_addr == 0) c->max_unjoined_per_addr = d.max_unjoined_per_addr;
    if (c->action_queue_depth == 0 && c->max_peers <= (1u << 20) && c->max_ops <= 4096u) {
        uint64_t q = (uint64_t)c->max_peers * ((uint64_t)c->max_ops + 8u) + 256u;
        c->action_queue_depth = q > UINT32_MAX ? UINT32_MAX : (uint32_t)q;
    }
    if (c->relay_max_bytes > CCOIP_RELAY_MAX_BYTES) c->relay_max_bytes = CCOIP_RELAY_MAX_BYTES;
    if (c->out_bytes == 0) {
        c->out_bytes = 65536u + (uint64_t)c->max_peers * (1024u + 24u * (uint64_t)c->max_peers) +
                       (uint64_t)c->max_peers * c->max_state_keys * (CCOIP_STATE_NAME_MAX + 32u);
        /* One relayed op's answers (§6.8.2); more in one step wait for the next. */
        if (c->relay_max_bytes > 0) {
            c->out_bytes += (uint64_t)c->max_peers * ((uint64_t)c->relay_max_bytes + 128u);
        }
    }
    /* Every member's answer of one relayed op must fit one step's output: a smaller out_bytes
     * lowers the bound (to 0, off, when nothing fits). */
    if (c->relay_max_bytes > 0 && c->max_peers > 0) {
        const uint64_t per = c->out_bytes / c->max_peers;
        const uint64_t fit = per > M_RELAY_FRAME_BYTES ? per - M_RELAY_FRAME_BYTES : 0u;
        if (c->relay_max_bytes > fit) c->relay_max_bytes = (uint32_t)fit;
    }
}

pcclResult_t ccoip_master_create(const ccoip_master_config *cfg, uint64_t seed, ccoip_master **out)
{
    if (out == NULL) return pcclInvalidArgument;
    *out = NULL;
    ccoip_master_config c;
    if (cfg != NULL) {
        c = *cfg;
    } else {
        memset(&c, 0, sizeof(c));
    }
    master_resolve_config(&c);
    if (c.max_peers > (1u << 20) || c.max_ops > 4096u || c.evict_ms <= c.heartbeat_ms ||
        c.action_queue_depth == 0 || c.max_message_bytes > ((uint64_t)1 << 30) ||
        c.max_state_keys > 65536u) {
        return pcclInvalidArgument;
    }
    ccoip_master *m = calloc(1, sizeof(*m));
    if (m == NULL) return pcclSystemError;
    m->cfg = c;
    ccoip_codec_limits_default(&m->lim);
    m->lim.pb.max_message_bytes = c.max_message_bytes;
    m->rng = seed;
    const uint64_t np = c.max_peers;
    m->ids = calloc((size_t)np, sizeof(uint64_t));
    m->tmp_a = calloc((size_t)np, sizeof(uint32_t));
    m->tmp_b = calloc((size_t)np, sizeof(uint32_t));
    m->tmp_c = calloc((size_t)np + 1u, sizeof(uint32_t));
    m->tmp_used = calloc((size_t)np, 1);
    m->arena_cap = ccoip_pb_arena_bound(c.max_message_bytes + CCOIP_CTRL_HEADER_BYTES);
    m->arena_mem = malloc((size_t)m->arena_cap);
    pcclResult_t r = sm_out_init(&m->out, c.action_queue_depth, c.out_bytes);
    /* Each concern sizes its own tables from cfg (the init functions only allocate). */
    bool ok = r == pcclSuccess && m->ids != NULL && m->tmp_a != NULL && m->tmp_b != NULL &&
              m->tmp_c != NULL && m->tmp_used != NULL && m->arena_mem != NULL;
    ok = ok && m_sess_init(m) && m_live_init(m) && m_topo_init(m) && m_coll_init(m) &&
         m_sync_init(m) && m_opt_init(m) && m_splice_init(m);
    if (!ok) {
        ccoip_master_destroy(m);
        return pcclSystemError;
    }
    *out = m;
    return pcclSuccess;
}

void ccoip_master_destroy(ccoip_master *m)
{
    if (m == NULL) return;
    sm_out_free(&m->out);
    m_opt_deinit(m);
    m_splice_deinit(m);
    m_sync_deinit(m);
    m_coll_deinit(m);
    m_topo_deinit(m);
    m_live_deinit(m);
    m_sess_deinit(m);
    free(m->ids);
    free(m->tmp_a);
    free(m->tmp_b);
    free(m->tmp_c);
    free(m->tmp_used);
    free(m->arena_mem);
    free(m);
}

/* ------------------------------------------------------------------------ */
/* Sending                                                                   */
/* ------------------------------------------------------------------------ */

void m_send(ccoip_master *m, uint32_t slot, ccoip_pb_master_to_peer *env)
{
    m_peer *p = m_peer_at(m, slot);
    pcclResult_t r = sm_send_m2p(&m->out, &m->lim, p->conn, env);
    if (r != pcclSuccess) {
        /* Our own message did not fit a bound: a local resource limit. */
        m->out.overflow = true;
        return;
    }
    p->last_send_ns = m->now;
}

void m_answer_status(ccoip_master *m, uint32_t slot, uint64_t call, int32_t status, int32_t reason,
                     const char *detail)
{
    ccoip_pb_master_to_peer env;
    memset(&env, 0, sizeof(env));
    env.call_id = call;
    env.status = status;
    env.reason = reason;
    if (detail != NULL) {
        env.detail.data = (const uint8_t *)detail;
        env.detail.len = strlen(detail);
    }
    m_send(m, slot, &env);
}

/* Slots still saying hello have no id and are not in order[]; they are iterated by slot. */

static void master_remove(ccoip_master *m, uint32_t slot)
{
    m_peer *p = m_peer_at(m, slot);
    if (p->state == MP_FREE) return;
    m->mm.dirty = true;
    if (p->state >= MP_NEW) {
        m_opt_on_loss(m, slot);
        m_sync_on_loss(m, slot);
        m_coll_on_loss(m, slot);
        m_topo_on_loss(m, slot);
        for (uint32_t i = 0; i < m->sess.order_n; i++) {
            if (m->sess.order[i] == slot) {
                memmove(&m->sess.order[i], &m->sess.order[i + 1],
                        (size_t)(m->sess.order_n - i - 1u) * sizeof(uint32_t));
                m->sess.order_n--;
                break;
            }
        }
        m_clear_unreachable(m, slot);
    }
    m_conn_map_remove(m, slot);
    m_live_forget(m, slot);
    m_peer_set_state(m, p, MP_FREE); /* the counters it was in (n_acc, ...) */
    memset(p, 0, sizeof(*p));
}

/* Closes the session's connection and frees its slot (after whatever was sent to it). */
static void master_close(ccoip_master *m, uint32_t slot)
{
    ccoip_action *a = sm_out_push(&m->out, CCOIP_ACT_CLOSE);
    if (a != NULL) a->conn = m_peer_at(m, slot)->conn;
    master_remove(m, slot);
}

void m_evict(ccoip_master *m, uint32_t slot, int32_t reason, const char *detail)
{
    m_peer *p = m_peer_at(m, slot);
    if (p->state == MP_FREE) return;
    sm_log(&m->out, CCOIP_LOG_WARN, "master: evicting peer %U (conn %U): %s (reason %d)", p->id,
           p->conn, detail, reason);
    ccoip_pb_master_to_peer env;
    memset(&env, 0, sizeof(env));
    env.body_case = CCOIP_PB_MASTER_TO_PEER_BODY_EVICTION;
    env.body.eviction.reason = reason;
    env.body.eviction.detail.data = (const uint8_t *)detail;
    env.body.eviction.detail.len = strlen(detail);
    m_send(m, slot, &env);
    master_close(m, slot);
}

/* ------------------------------------------------------------------------ */
/* Frames                                                                    */
/* ------------------------------------------------------------------------ */

static void master_on_hello(ccoip_master *m, uint32_t slot, const ccoip_pb_peer_to_master *in)
{
    m_peer *p = m_peer_at(m, slot);
    const ccoip_pb_hello *h = &in->body.hello;
    uint32_t version = 0;
    pcclResult_t r = ccoip_version_negotiate(h->min_version, h->max_version, &version);
    ccoip_pb_master_to_peer env;
    memset(&env, 0, sizeof(env));
    env.call_id = in->call_id;
    env.body_case = CCOIP_PB_MASTER_TO_PEER_BODY_HELLO;
    env.body.hello.min_version = CCOIP_PROTOCOL_VERSION_MIN;
    env.body.hello.max_version = CCOIP_PROTOCOL_VERSION_MAX;
    if (r != pcclSuccess) {
        sm_log(&m->out, CCOIP_LOG_WARN,
               "master: conn %U speaks versions %u..%u, no overlap: closing", p->conn,
               h->min_version, h->max_version);
        env.status = CCOIP_PB_STATUS_INVALID_USAGE;
        env.reason = CCOIP_PB_REASON_VERSION_MISMATCH;
        m_send(m, slot, &env);
        master_close(m, slot);
        return;
    }
    p->id = m->sess.next_id++;
    m_peer_set_state(m, p, MP_NEW);
    m->sess.order[m->sess.order_n++] = slot; /* ids only grow: appending keeps order[] sorted */
    env.body.hello.version = version;
    env.body.hello.peer_id = p->id;
    env.body.hello.heartbeat_ms = m->cfg.heartbeat_ms;
    env.body.hello.evict_ms = m->cfg.evict_ms;
    env.body.hello.relay_max_bytes = m->cfg.relay_max_bytes;
    uint8_t proof[CCOIP_AUTH_MAC_BYTES];
    if (ccoip_auth_on(&m->cfg.auth)) {
        /* §6.1.1: our challenge, and our proof over the peer's (none: all zero). */
        if (h->nonce.len == CCOIP_AUTH_NONCE_BYTES)
            memcpy(p->auth_peer_nonce, h->nonce.data, CCOIP_AUTH_NONCE_BYTES);
        ccoip_auth_nonce(&m->cfg.auth, &m->auth_ctr, p->auth_nonce);
        ccoip_auth_mac(&m->cfg.auth, m->cfg.auth.run_key, "pccl master proof", p->auth_peer_nonce,
                       CCOIP_AUTH_NONCE_BYTES, p->auth_nonce, CCOIP_AUTH_NONCE_BYTES, &p->id, 1,
                       proof);
        env.body.hello.nonce.data = p->auth_nonce;
        env.body.hello.nonce.len = CCOIP_AUTH_NONCE_BYTES;
        env.body.hello.proof.data = proof;
        env.body.hello.proof.len = CCOIP_AUTH_MAC_BYTES;
    }
    m_send(m, slot, &env);
    m_live_touch(m, sm_add_sat(p->last_send_ns, sm_ms(m->cfg.heartbeat_ms)));
    m_live_arm(m, slot);
    sm_log(&m->out, CCOIP_LOG_INFO, "master: conn %U is peer %U", p->conn, p->id);
}

void m_auth_link_key(const ccoip_master *m, uint64_t epoch, uint64_t from, uint64_t to,
                     uint8_t out[CCOIP_AUTH_KEY_BYTES])
{
    const uint64_t v[3] = {epoch, from, to};
    ccoip_auth_mac(&m->cfg.auth, m->cfg.auth.secret, "pccl link key", NULL, 0, NULL, 0, v, 3, out);
}

void m_auth_group_key(const ccoip_master *m, uint64_t epoch, uint32_t group,
                      uint8_t out[CCOIP_AUTH_KEY_BYTES])
{
    const uint64_t v[2] = {epoch, group};
    ccoip_auth_mac(&m->cfg.auth, m->cfg.auth.secret, "pccl group key", NULL, 0, NULL, 0, v, 2, out);
}

/* §6.1.1: an authenticated master admits a Join only with the peer's proof of the run key over
 * both challenges. A Join without it is answered STATUS_AUTHENTICATION_FAILED and closed. */
static bool master_join_authentic(ccoip_master *m, uint32_t slot, const ccoip_pb_peer_to_master *in)
{
    m_peer *p = m_peer_at(m, slot);
    if (!ccoip_auth_on(&m->cfg.auth)) return true;
    const ccoip_pb_join *j = &in->body.join;
    uint8_t want[CCOIP_AUTH_MAC_BYTES];
    ccoip_auth_mac(&m->cfg.auth, m->cfg.auth.run_key, "pccl peer proof", p->auth_nonce,
                   CCOIP_AUTH_NONCE_BYTES, p->auth_peer_nonce, CCOIP_AUTH_NONCE_BYTES, &p->id, 1,
                   want);
    if (j->proof.len == CCOIP_AUTH_MAC_BYTES &&
        ccoip_auth_equal(j->proof.data, want, CCOIP_AUTH_MAC_BYTES)) {
        return true;
    }
    sm_log(&m->out, CCOIP_LOG_WARN, "master: peer %U (conn %U) failed authentication (%s): closing",
           p->id, p->conn, j->proof.len == 0 ? "no run-token proof" : "wrong run-token proof");
    m_answer_status(m, slot, in->call_id, CCOIP_PB_STATUS_AUTHENTICATION_FAILED,
                    CCOIP_PB_REASON_AUTH_FAILED, "authentication failed");
    master_close(m, slot);
    return false;
}

static void master_on_join(ccoip_master *m, uint32_t slot, const ccoip_pb_peer_to_master *in)
{
    m_peer *p = m_peer_at(m, slot);
    const ccoip_pb_join *j = &in->body.join;
    if (!master_join_authentic(m, slot, in)) return;
    for (uint64_t i = 0; i < j->endpoints_count; i++) {
        const ccoip_pb_endpoint *e = &j->endpoints[i];
        if (e->kind < 0 || (uint32_t)e->kind >= M_ENDPOINT_KINDS) continue; /* newer kinds */
        if (e->url.len >= CCOIP_URL_MAX || e->port > 65535u) {
            m_evict(m, slot, CCOIP_PB_REASON_ILLEGAL_MESSAGE, "join: endpoint url or port invalid");
            return;
        }
        /* Only the port is kept: other peers reach it at the address this master observed
         * (docs/protocol.md §2); a peer-supplied url is never passed on. */
        m_endpoint *me = &p->ep[e->kind];
        me->has = true;
        me->port = e->port;
    }
    if (!p->ep[CCOIP_PB_ENDPOINT_KIND_P2P].has) {
        m_evict(m, slot, CCOIP_PB_REASON_ILLEGAL_MESSAGE, "join: no p2p endpoint");
        return;
    }
    p->group = j->peer_group;
    p->ring_key = j->ring_key;
    m_peer_set_state(m, p, MP_PENDING);
    ccoip_pb_master_to_peer env;
    memset(&env, 0, sizeof(env));
    env.call_id = in->call_id;
    env.body_case = CCOIP_PB_MASTER_TO_PEER_BODY_JOIN;
    env.body.join.epoch = m->topo.epoch;
    env.body.join.has_world = true;
    m_world_prepare(m, false);
    m_world_sizes(m, p->group, &env.body.join.world);
    m_send(m, slot, &env);
    sm_log(&m->out, CCOIP_LOG_INFO, "master: peer %U joined group %u, pending", p->id, p->group);
}

static bool master_is_call(uint32_t body)
{
    switch (body) {
    case CCOIP_PB_PEER_TO_MASTER_BODY_HEARTBEAT:
    case CCOIP_PB_PEER_TO_MASTER_BODY_LEAVE:
    case CCOIP_PB_PEER_TO_MASTER_BODY_BANDWIDTH_REPORT:
    case CCOIP_PB_PEER_TO_MASTER_BODY_COLLECTIVE_COMPLETE: /* may be a notification (§6.8) */
    case CCOIP_PB_PEER_TO_MASTER_BODY_COLLECTIVE_CANCEL:
        return false;
    default:
        return true;
    }
}

static void master_on_frame(ccoip_master *m, uint32_t slot, const uint8_t *data, uint64_t len)
{
    m_peer *p = m_peer_at(m, slot);
    ccoip_pb_arena arena;
    ccoip_pb_arena_init(&arena, m->arena_mem, m->arena_cap);
    ccoip_pb_peer_to_master in;
    pcclResult_t r = ccoip_ctrl_decode_p2m(data, len, &m->lim, &arena, &in);
    if (r != pcclSuccess) {
        m_evict(m, slot,
                r == pcclInvalidUsage ? CCOIP_PB_REASON_VERSION_MISMATCH
                                      : CCOIP_PB_REASON_MALFORMED_MESSAGE,
                "malformed control frame");
        return;
    }
    uint32_t body = (uint32_t)in.body_case;
    if (master_is_call(body) && in.call_id == 0 && body != CCOIP_PB_PEER_TO_MASTER_BODY_NONE) {
        m_evict(m, slot, CCOIP_PB_REASON_ILLEGAL_MESSAGE, "call without call_id");
        return;
    }
    if (p->state == MP_HELLO) {
        if (body != CCOIP_PB_PEER_TO_MASTER_BODY_HELLO) {
            m_evict(m, slot, CCOIP_PB_REASON_ILLEGAL_MESSAGE, "first frame is not hello");
            return;
        }
        p->last_recv_ns = m->now;
        master_on_hello(m, slot, &in);
        return;
    }
    if (p->state == MP_NEW && body != CCOIP_PB_PEER_TO_MASTER_BODY_JOIN &&
        body != CCOIP_PB_PEER_TO_MASTER_BODY_HEARTBEAT &&
        body != CCOIP_PB_PEER_TO_MASTER_BODY_LEAVE) {
        /* Nothing is answered before Join but Hello and Join (docs/protocol.md §6.2). */
        m_evict(m, slot, CCOIP_PB_REASON_ILLEGAL_MESSAGE, "a call before join");
        return;
    }
    /* Liveness counts only frames legal in the session's state (docs/protocol.md §6.10): an
     * unknown body, or a member's call from a peer that is not a member, is answered but does
     * not keep the session alive; the other illegal frames evict below. */
    const bool non_member_call =
        p->state != MP_ACCEPTED && (body == CCOIP_PB_PEER_TO_MASTER_BODY_COLLECTIVE_INITIATE ||
                                    body == CCOIP_PB_PEER_TO_MASTER_BODY_SYNC_VOTE ||
                                    body == CCOIP_PB_PEER_TO_MASTER_BODY_OPTIMIZE_TOPOLOGY);
    if (body != CCOIP_PB_PEER_TO_MASTER_BODY_NONE && !non_member_call) p->last_recv_ns = m->now;
    switch (in.body_case) {
    case CCOIP_PB_PEER_TO_MASTER_BODY_NONE:
        /* A body this master does not know: a newer peer (docs/protocol.md §5). */
        if (in.call_id != 0) {
            m_answer_status(m, slot, in.call_id, CCOIP_PB_STATUS_INVALID_USAGE,
                            CCOIP_PB_REASON_ILLEGAL_MESSAGE, "unknown message");
        }
        return;
    case CCOIP_PB_PEER_TO_MASTER_BODY_HEARTBEAT:
        return;
    case CCOIP_PB_PEER_TO_MASTER_BODY_LEAVE: {
        sm_log(&m->out, CCOIP_LOG_INFO, "master: peer %U leaves", p->id);
        master_close(m, slot);
        return;
    }
    case CCOIP_PB_PEER_TO_MASTER_BODY_JOIN:
        if (p->state != MP_NEW) break;
        master_on_join(m, slot, &in);
        return;
    case CCOIP_PB_PEER_TO_MASTER_BODY_UPDATE_TOPOLOGY:
        if (p->state != MP_PENDING && p->state != MP_ACCEPTED) break;
        m_topo_on_update_vote(m, slot, in.call_id, &in.body.update_topology);
        return;
    case CCOIP_PB_PEER_TO_MASTER_BODY_P2P_ESTABLISHED:
        if (p->state != MP_PENDING && p->state != MP_ACCEPTED) break;
        m_topo_on_p2p(m, slot, in.call_id, &in.body.p2p_established);
        return;
    case CCOIP_PB_PEER_TO_MASTER_BODY_PENDING_PEERS:
        if (p->state != MP_ACCEPTED) break;
        m_topo_on_pending_query(m, slot, in.call_id);
        return;
    case CCOIP_PB_PEER_TO_MASTER_BODY_COLLECTIVE_INITIATE:
        if (p->state != MP_ACCEPTED) {
            m_answer_status(m, slot, in.call_id, CCOIP_PB_STATUS_INVALID_USAGE,
                            CCOIP_PB_REASON_ILLEGAL_MESSAGE, "not a ring member");
            return;
        }
        m_coll_on_initiate(m, slot, in.call_id, &in.body.collective_initiate);
        return;
    case CCOIP_PB_PEER_TO_MASTER_BODY_COLLECTIVE_COMPLETE:
        if (p->state != MP_ACCEPTED) break;
        m_coll_on_complete(m, slot, in.call_id, &in.body.collective_complete);
        return;
    case CCOIP_PB_PEER_TO_MASTER_BODY_COLLECTIVE_CANCEL:
        if (p->state != MP_ACCEPTED) break;
        m_coll_on_cancel(m, slot, &in.body.collective_cancel);
        return;
    case CCOIP_PB_PEER_TO_MASTER_BODY_BANDWIDTH_REPORT:
        if (p->state != MP_ACCEPTED) break;
        m_opt_on_report(m, slot, &in.body.bandwidth_report);
        return;
    case CCOIP_PB_PEER_TO_MASTER_BODY_SYNC_VOTE:
        if (p->state != MP_ACCEPTED) {
            m_answer_status(m, slot, in.call_id, CCOIP_PB_STATUS_INVALID_USAGE,
                            CCOIP_PB_REASON_ILLEGAL_MESSAGE, "not a ring member");
            return;
        }
        m_sync_on_vote(m, slot, in.call_id, &in.body.sync_vote);
        return;
    case CCOIP_PB_PEER_TO_MASTER_BODY_SYNC_DONE:
        if (p->state != MP_ACCEPTED) break;
        m_sync_on_done(m, slot, in.call_id, &in.body.sync_done);
        return;
    case CCOIP_PB_PEER_TO_MASTER_BODY_OPTIMIZE_TOPOLOGY:
        if (p->state != MP_ACCEPTED) {
            m_answer_status(m, slot, in.call_id, CCOIP_PB_STATUS_INVALID_USAGE,
                            CCOIP_PB_REASON_ILLEGAL_MESSAGE, "not a ring member");
            return;
        }
        m_opt_on_vote(m, slot, in.call_id);
        return;
    case CCOIP_PB_PEER_TO_MASTER_BODY_OPTIMIZE_DONE:
        if (p->state != MP_ACCEPTED) break;
        m_opt_on_done(m, slot, in.call_id);
        return;
    case CCOIP_PB_PEER_TO_MASTER_BODY_HELLO:
        break;
    }
    m_evict(m, slot, CCOIP_PB_REASON_ILLEGAL_MESSAGE, "message not legal in this state");
}

/* True when ev's observed address already has max_unjoined_per_addr sessions that have not
 * joined (docs/protocol.md §6.1). A walk over the slots only while that many exist at all. */
static bool master_addr_full(const ccoip_master *m, const ccoip_event *ev)
{
    const uint32_t limit = m->cfg.max_unjoined_per_addr;
    if (m->sess.n_unjoined < limit || (ev->remote_ip_len != 4 && ev->remote_ip_len != 16)) {
        return false;
    }
    uint32_t n = 0;
    for (uint32_t s = 0; s < m->cfg.max_peers && n < limit; s++) {
        const m_peer *p = &m->sess.peers[s];
        if ((p->state == MP_HELLO || p->state == MP_NEW) && p->ip_len == ev->remote_ip_len &&
            memcmp(p->ip, ev->remote_ip, ev->remote_ip_len) == 0) {
            n++;
        }
    }
    return n >= limit;
}

static void master_timers(ccoip_master *m)
{
    m_live_scan(m);
    m_topo_timers(m);
    m_coll_timers(m);
    m_sync_timers(m);
    m_opt_timers(m);
    m_splice_timers(m);
}

uint64_t ccoip_master_deadline_ns(const ccoip_master *m)
{
    if (m == NULL) return CCOIP_NO_DEADLINE;
    uint64_t d = m->live.live_next;
    uint64_t t = m_topo_deadline(m);
    if (t < d) d = t;
    t = m_coll_deadline(m);
    if (t < d) d = t;
    t = m_sync_deadline(m);
    if (t < d) d = t;
    t = m_opt_deadline(m);
    if (t < d) d = t;
    t = m_splice_deadline(m);
    if (t < d) d = t;
    return d;
}

/* ------------------------------------------------------------------------ */
/* Entry points                                                              */
/* ------------------------------------------------------------------------ */

static void master_progress(ccoip_master *m)
{
    /* Each pass either changes a phase or an op's state; bounded anyway. */
    for (uint32_t i = 0; i < 4u * m->cfg.max_peers + 4u * m->cfg.max_ops + 16u; i++) {
        bool changed = m_topo_progress(m);
        changed = m_coll_progress(m) || changed;
        changed = m_sync_progress(m) || changed;
        changed = m_opt_progress(m) || changed;
        if (!changed) changed = m_mismatch_progress(m); /* only once the votes settled */
        if (!changed) break;
    }
}

pcclResult_t ccoip_master_step(ccoip_master *m, const ccoip_event *ev)
{
    if (m == NULL || ev == NULL) return pcclInvalidArgument;
    sm_out_begin_step(&m->out);
    if (ev->now_ns > m->now) m->now = ev->now_ns;
    pcclResult_t rc = pcclSuccess;
    switch (ev->type) {
    case CCOIP_EV_START:
        sm_log(&m->out, CCOIP_LOG_INFO, "master: started");
        break;
    case CCOIP_EV_TIMER:
        break;
    case CCOIP_EV_CONN_UP: {
        if (ev->accepted && ev->listener == CCOIP_MASTER_LISTENER_RELAY &&
            ev->conn != CCOIP_CONN_NONE) {
            m_splice_on_accept(m, ev->conn); /* a relay connection (§8.6), not a session */
            break;
        }
        if (ev->conn == CCOIP_CONN_NONE || m_slot_by_conn(m, ev->conn) != M_SLOT_NONE) {
            sm_log(&m->out, CCOIP_LOG_WARN, "master: CONN_UP for bad or known conn %U", ev->conn);
            rc = pcclInvalidArgument;
            break;
        }
        if (master_addr_full(m, ev)) {
            sm_log(&m->out, CCOIP_LOG_WARN,
                   "master: %u sessions from the address of conn %U have not joined: closing it",
                   m->cfg.max_unjoined_per_addr, ev->conn);
            ccoip_action *a = sm_out_push(&m->out, CCOIP_ACT_CLOSE);
            if (a != NULL) a->conn = ev->conn;
            break;
        }
        uint32_t slot = M_SLOT_NONE;
        for (uint32_t s = 0; s < m->cfg.max_peers; s++) {
            if (m->sess.peers[s].state == MP_FREE) {
                slot = s;
                break;
            }
        }
        if (slot == M_SLOT_NONE) {
            sm_log(&m->out, CCOIP_LOG_WARN, "master: peer table full, closing conn %U", ev->conn);
            ccoip_action *a = sm_out_push(&m->out, CCOIP_ACT_CLOSE);
            if (a != NULL) a->conn = ev->conn;
            break;
        }
        m_peer *p = &m->sess.peers[slot];
        memset(p, 0, sizeof(*p));
        m_peer_set_state(m, p, MP_HELLO);
        p->conn = ev->conn;
        p->up_ns = m->now;
        p->last_recv_ns = m->now;
        p->last_send_ns = m->now;
        m_conn_map_insert(m, slot);
        m_live_touch(m, sm_add_sat(m->now, sm_ms(m->cfg.heartbeat_ms)));
        m_live_touch(m, sm_add_sat(m->now, sm_ms(m->cfg.evict_ms)));
        m_live_arm(m, slot);
        if (ev->remote_ip_len == 4 || ev->remote_ip_len == 16) {
            memcpy(p->ip, ev->remote_ip, ev->remote_ip_len);
            p->ip_len = ev->remote_ip_len;
        }
        break;
    }
    case CCOIP_EV_RECV: {
        if (ev->data != NULL && m_splice_on_recv(m, ev->conn, ev->data, ev->len)) break;
        uint32_t slot = m_slot_by_conn(m, ev->conn);
        if (slot == M_SLOT_NONE) {
            sm_log(&m->out, CCOIP_LOG_DEBUG, "master: frame on unknown conn %U dropped", ev->conn);
            break;
        }
        if (ev->data == NULL && ev->len != 0) {
            rc = pcclInvalidArgument;
            break;
        }
        master_on_frame(m, slot, ev->data, ev->len);
        break;
    }
    case CCOIP_EV_CONN_CLOSED: {
        if (m_splice_on_closed(m, ev->conn)) break;
        uint32_t slot = m_slot_by_conn(m, ev->conn);
        if (slot == M_SLOT_NONE) break;
        sm_log(&m->out, CCOIP_LOG_INFO, "master: peer %U connection closed",
               m->sess.peers[slot].id);
        master_remove(m, slot);
        break;
    }
    default:
        rc = pcclInvalidArgument;
        break;
    }
    master_timers(m);
    master_progress(m);
    if (m->out.overflow) return pcclInternalError;
    return rc;
}

bool ccoip_master_poll(ccoip_master *m, ccoip_action *out)
{
    if (m == NULL || out == NULL) return false;
    return sm_out_pop(&m->out, out);
}

const ccoip_action *ccoip_master_poll_ref(ccoip_master *m)
{
    return m == NULL ? NULL : sm_out_pop_ref(&m->out);
}

uint64_t ccoip_master_epoch(const ccoip_master *m)
{
    return m->topo.epoch;
}

uint32_t ccoip_master_num_accepted(const ccoip_master *m)
{
    return m->sess.n_acc;
}

uint32_t ccoip_master_num_pending(const ccoip_master *m)
{
    return m_count_state(m, MP_PENDING);
}

uint64_t ccoip_master_relayed_ops(const ccoip_master *m)
{
    return m != NULL ? m->coll.relayed_ops : 0;
}

uint32_t ccoip_master_ops_live(const ccoip_master *m)
{
    return m->coll.ops_live;
}

uint32_t ccoip_master_ring(const ccoip_master *m, uint32_t group, uint64_t *ids, uint32_t cap)
{
    /* Follow succ from the rank-0 member. */
    uint32_t start = M_SLOT_NONE, n = 0;
    for (uint32_t i = 0; i < m->sess.order_n; i++) {
        const m_peer *p = &m->sess.peers[m->sess.order[i]];
        if (p->state == MP_ACCEPTED && p->group == group && p->rank == 0) {
            start = m->sess.order[i];
            break;
        }
    }
    if (start == M_SLOT_NONE) return 0;
    uint32_t s = start;
    do {
        if (n < cap && ids != NULL) ids[n] = m->sess.peers[s].id;
        n++;
        s = m->sess.peers[s].succ;
    } while (s != start && n <= m->cfg.max_peers);
    return n;
}
