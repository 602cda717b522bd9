/*
 * peer.c — the CCoIP peer: create / step / poll, commands, the control
 * connection (sending, calls), liveness, failure. The master's frames are
 * handled in peer_master.c, p2p links in peer_wire.c, the ring all-reduce in
 * peer_ring.c. docs/core.md §3.
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "peer_internal.h"

void ccoip_peer_config_default(ccoip_peer_config *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->p2p_pool_size = 1;
    cfg->max_ops = 16;
    cfg->max_world = 1024;
    cfg->max_state_keys = 64;
    cfg->heartbeat_ms = 250;
    cfg->evict_ms = 2000;
    cfg->max_message_bytes = CCOIP_PB_DEFAULT_MAX_MESSAGE_BYTES;
}

uint64_t ccoip_peer_decode_arena_bytes(const ccoip_peer_config *cfg)
{
    uint64_t m = cfg != NULL ? cfg->max_message_bytes : 0;
    if (m == 0) m = CCOIP_PB_DEFAULT_MAX_MESSAGE_BYTES;
    return ccoip_pb_arena_bound(m + CCOIP_CTRL_HEADER_BYTES);
}

pcclResult_t ccoip_peer_create(const ccoip_peer_config *cfg, uint64_t seed, ccoip_peer **out)
{
    if (cfg == NULL || out == NULL) return pcclInvalidArgument;
    *out = NULL;
    ccoip_peer_config c = *cfg, d;
    ccoip_peer_config_default(&d);
    if (c.p2p_pool_size == 0) c.p2p_pool_size = d.p2p_pool_size;
    if (c.max_ops == 0) c.max_ops = d.max_ops;
    if (c.max_world == 0) c.max_world = d.max_world;
    if (c.heartbeat_ms == 0) c.heartbeat_ms = d.heartbeat_ms;
    if (c.evict_ms == 0) c.evict_ms = d.evict_ms;
    if (c.max_message_bytes == 0) c.max_message_bytes = d.max_message_bytes;
    if (c.max_state_keys == 0) c.max_state_keys = d.max_state_keys;
    if (c.max_ops > 4096u || c.max_world > CCOIP_RING_WORLD_MAX ||
        c.p2p_pool_size > CCOIP_P2P_POOL_MAX || c.evict_ms <= c.heartbeat_ms ||
        c.max_message_bytes > ((uint64_t)1 << 30) || c.max_state_keys > 65536u) {
        return pcclInvalidArgument;
    }
    if (c.decode_arena != NULL && c.decode_arena_bytes < ccoip_peer_decode_arena_bytes(&c)) {
        return pcclInvalidArgument;
    }
    if (c.action_queue_depth == 0) c.action_queue_depth = 64u * c.max_ops + 256u;
    if (c.out_bytes == 0) {
        c.out_bytes = 65536u + 16u * (uint64_t)c.max_world +
                      2u * (uint64_t)c.max_state_keys * (CCOIP_STATE_NAME_MAX + 48u);
    }
    bool has_url = c.master_url != NULL && c.master_url[0] != '\0';
    if (has_url && strlen(c.master_url) >= CCOIP_URL_MAX) return pcclInvalidArgument;
    if (!has_url && c.master_ip_len != 4 && c.master_ip_len != 16) return pcclInvalidArgument;
    ccoip_peer *p = calloc(1, sizeof(*p));
    if (p == NULL) return pcclSystemError;
    p->cfg = c;
    if (has_url) memcpy(p->ctl.master_url, c.master_url, strlen(c.master_url) + 1u);
    p->cfg.master_url = NULL; /* never keep the caller's pointer */
    ccoip_codec_limits_default(&p->lim);
    p->lim.pb.max_message_bytes = c.max_message_bytes;
    p->rng = seed;
    p->ctl.hb_ms = c.heartbeat_ms;
    p->ctl.evict_ms = c.evict_ms;
    p->ctl.next_call = 1;
    p->next_conn = 2;
    p->next_io = 1;
    p->ctl.calls_cap = 2u * c.max_ops + 8u;
    /* Plus one pair link per receive that may run at once (docs/protocol.md §8.5). */
    p->wire.acc_cap = P_ACC_MAX + 2u * (c.p2p_pool_size - 1u) + c.max_ops;
    /* The fixed-size tables in one zeroed block (freed through p->ctl.calls): most of them (probes,
     * samples, the shared-state keys) stay untouched in a run that never optimizes or syncs,
     * and a block this large comes zeroed from the system without being written, so untouched
     * pages cost no memory. A simulator runs thousands of peers (docs/simulator.md, Scale). */
    const uint64_t sizes[] = {
        (uint64_t)p->ctl.calls_cap * sizeof(p_call),
        (uint64_t)c.max_world * sizeof(uint64_t),
        (uint64_t)c.max_world * sizeof(uint64_t),
        (uint64_t)c.max_ops * sizeof(p_op),
        (uint64_t)p->wire.acc_cap * sizeof(p_acc),
        (uint64_t)c.max_state_keys * sizeof(p_skey),
        (uint64_t)c.max_state_keys * P_SS_MAX * sizeof(uint64_t),
        (uint64_t)c.max_state_keys * sizeof(ccoip_pb_shared_state_entry),
        (uint64_t)c.max_state_keys * sizeof(ccoip_pb_bytes),
        (uint64_t)c.max_state_keys * sizeof(ccoip_pb_shared_state_key),
        (uint64_t)c.max_world * sizeof(p_probe),
        (uint64_t)c.max_world * sizeof(ccoip_pb_bandwidth_sample),
    };
    enum { NTAB = sizeof(sizes) / sizeof(sizes[0]) };
    uint64_t offs[NTAB], total = 0;
    for (uint32_t i = 0; i < NTAB; i++) {
        offs[i] = total;
        total += (sizes[i] + 63u) & ~(uint64_t)63u; /* cache-line aligned tables */
    }
    uint8_t *blk = calloc(1, (size_t)total);
    p->tables = blk;
    if (blk != NULL) {
        p->ctl.calls = (p_call *)(void *)(blk + offs[0]);
        p->ring.ids = (uint64_t *)(void *)(blk + offs[1]);
        p->wire.plan_ring = (uint64_t *)(void *)(blk + offs[2]);
        p->ops = (p_op *)(void *)(blk + offs[3]);
        p->wire.acc = (p_acc *)(void *)(blk + offs[4]);
        p->ss.skeys = (p_skey *)(void *)(blk + offs[5]);
        p->ss.sends = (uint64_t *)(void *)(blk + offs[6]);
        p->ss.entries = (ccoip_pb_shared_state_entry *)(void *)(blk + offs[7]);
        p->ss.names = (ccoip_pb_bytes *)(void *)(blk + offs[8]);
        p->ss.vkeys = (ccoip_pb_shared_state_key *)(void *)(blk + offs[9]);
        p->opt.probes = (p_probe *)(void *)(blk + offs[10]);
        p->opt.samples = (ccoip_pb_bandwidth_sample *)(void *)(blk + offs[11]);
    }
    p->arena_cap = ccoip_peer_decode_arena_bytes(&c);
    p->arena_owned = c.decode_arena == NULL;
    p->arena_mem = p->arena_owned ? malloc((size_t)p->arena_cap) : c.decode_arena;
    p->cfg.decode_arena = NULL; /* the pointer lives in arena_mem only */
    /* Headroom for a relayed op's initiate and result (§6.8.2), whatever out_bytes says: pages
     * never touched cost no memory. */
    pcclResult_t r = sm_out_init(&p->out, c.action_queue_depth,
                                 c.out_bytes + 2u * CCOIP_RELAY_MAX_BYTES + 4096u);
    if (p->ss.skeys == NULL || p->ss.sends == NULL || p->ss.entries == NULL ||
        p->ss.names == NULL || p->ss.vkeys == NULL || p->opt.probes == NULL ||
        p->opt.samples == NULL) {
        r = pcclSystemError;
    }
    if (p->ctl.calls == NULL || p->ring.ids == NULL || p->wire.plan_ring == NULL ||
        p->ops == NULL || p->wire.acc == NULL || p->arena_mem == NULL || r != pcclSuccess) {
        ccoip_peer_destroy(p);
        return r == pcclInvalidArgument ? r : pcclSystemError;
    }
    *out = p;
    return pcclSuccess;
}

void ccoip_peer_destroy(ccoip_peer *p)
{
    if (p == NULL) return;
    sm_out_free(&p->out);
    free(p->tables); /* the block of every concern's tables (ccoip_peer_create) */
    if (p->arena_owned) free(p->arena_mem);
    free(p);
}

/* ------------------------------------------------------------------------ */
/* Helpers                                                                   */
/* ------------------------------------------------------------------------ */

void p_notify(ccoip_peer *p, uint64_t cmd, pcclResult_t result)
{
    ccoip_action *a = sm_out_push(&p->out, CCOIP_ACT_NOTIFY);
    if (a == NULL) return;
    a->cmd_id = cmd;
    a->result = result;
    a->world_size = p->ring.world;
}

static bool peer_master_up(const ccoip_peer *p)
{
    return p->state >= PS_HELLO && p->state <= PS_ACCEPTED;
}

void p_send(ccoip_peer *p, ccoip_pb_peer_to_master *env)
{
    if (!peer_master_up(p)) return;
    if (sm_send_p2m(&p->out, &p->lim, CCOIP_PEER_MASTER_CONN, env) != pcclSuccess) {
        p->out.overflow = true;
        return;
    }
    p->ctl.last_send_ns = p->now;
}

void p_send_span(ccoip_peer *p, ccoip_pb_peer_to_master *env, ccoip_pb_bytes *field,
                 uint32_t op_slot, ccoip_span_ref span)
{
    if (!peer_master_up(p)) return;
    if (sm_send_p2m_span(&p->out, &p->lim, CCOIP_PEER_MASTER_CONN, env, field, op_slot, span) !=
        pcclSuccess) {
        p->out.overflow = true;
        return;
    }
    p->ctl.last_send_ns = p->now;
}

uint64_t p_call_new(ccoip_peer *p, p_call_kind kind, uint32_t op)
{
    for (uint32_t i = 0; i < p->ctl.calls_cap; i++) {
        if (p->ctl.calls[i].kind == PC_NONE) {
            p->ctl.calls[i].kind = kind;
            p->ctl.calls[i].call_id = p->ctl.next_call++;
            p->ctl.calls[i].op = op;
            return p->ctl.calls[i].call_id;
        }
    }
    /* Bounded by construction: at most two calls per op plus a few singletons. */
    p->out.overflow = true;
    return 0;
}

void p_call_drop_op(ccoip_peer *p, p_call_kind kind, uint32_t op)
{
    for (uint32_t i = 0; i < p->ctl.calls_cap; i++) {
        if (p->ctl.calls[i].kind == kind && p->ctl.calls[i].op == op)
            p->ctl.calls[i].kind = PC_NONE;
    }
}

p_call p_call_take(ccoip_peer *p, uint64_t call_id)
{
    p_call c = {PC_NONE, 0, 0};
    if (call_id == 0) return c;
    for (uint32_t i = 0; i < p->ctl.calls_cap; i++) {
        if (p->ctl.calls[i].kind != PC_NONE && p->ctl.calls[i].call_id == call_id) {
            c = p->ctl.calls[i];
            p->ctl.calls[i].kind = PC_NONE;
            break;
        }
    }
    return c;
}

void p_send_topo_vote(ccoip_peer *p)
{
    ccoip_pb_peer_to_master env;
    memset(&env, 0, sizeof(env));
    env.call_id = p_call_new(p, PC_TOPO_VOTE, 0);
    env.body_case = CCOIP_PB_PEER_TO_MASTER_BODY_UPDATE_TOPOLOGY;
    env.body.update_topology.accept_new_peers = true;
    p_send(p, &env);
}

static void p_fail_at(ccoip_peer *p, ccoip_log_level level, const char *why);

/* The master is gone (or evicted us): every command fails (DESIGN.md §3). */
void p_fail(ccoip_peer *p, const char *why)
{
    p_fail_at(p, CCOIP_LOG_ERROR, why);
}

/* As p_fail, logged at `level`: a graceful leave tears down the same way
 * but is not an error. */
static void p_fail_at(ccoip_peer *p, ccoip_log_level level, const char *why)
{
    if (p->state == PS_FAILED || p->state == PS_LEFT) return;
    if (level == CCOIP_LOG_ERROR) {
        sm_log(&p->out, level, "peer %U: master connection failed: %s", p->id, why);
    } else {
        sm_log(&p->out, level, "peer %U: %s", p->id, why);
    }
    bool master_open = p->state >= PS_CONNECTING && p->state <= PS_ACCEPTED && !p->master_closed;
    p_set_state(p, PS_FAILED);
    if (master_open) {
        ccoip_action *a = sm_out_push(&p->out, CCOIP_ACT_CLOSE);
        if (a != NULL) a->conn = CCOIP_PEER_MASTER_CONN;
    }
    p_wire_close_all(p);
    p_pair_close_idle(p);
    p_state_fail_all(p, pcclMasterConnectionFailed);
    p_opt_fail_all(p, pcclMasterConnectionFailed);
    if (p->ctl.connect_pending) {
        p->ctl.connect_pending = false;
        p_notify(p, p->ctl.connect_cmd, pcclMasterConnectionFailed);
    }
    if (p->ctl.topo_pending) {
        p->ctl.topo_pending = false;
        p_notify(p, p->ctl.topo_cmd, pcclMasterConnectionFailed);
    }
    if (p->ctl.pend_pending) {
        p->ctl.pend_pending = false;
        p_notify(p, p->ctl.pend_cmd, pcclMasterConnectionFailed);
    }
    p_ring_fail_all(p, pcclMasterConnectionFailed);
    memset(p->ctl.calls, 0, (size_t)p->ctl.calls_cap * sizeof(p_call));
    p->ring.ready = false;
}

/* ------------------------------------------------------------------------ */
/* Commands                                                                  */
/* ------------------------------------------------------------------------ */

static void peer_on_submit(ccoip_peer *p, const ccoip_cmd *cmd)
{
    if (p->state == PS_FAILED || p->state == PS_LEFT) {
        p_notify(p, cmd->cmd_id,
                 cmd->type == CCOIP_CMD_LEAVE ? pcclSuccess : pcclMasterConnectionFailed);
        return;
    }
    switch (cmd->type) {
    case CCOIP_CMD_CONNECT: {
        if (p->state != PS_IDLE || !p->wire.p2p_listening) {
            p_notify(p, cmd->cmd_id, pcclInvalidUsage);
            return;
        }
        ccoip_action *a = sm_out_push(&p->out, CCOIP_ACT_CONNECT);
        if (a == NULL) return;
        a->conn = CCOIP_PEER_MASTER_CONN;
        if (p->ctl.master_url[0] != '\0') {
            a->data = (const uint8_t *)p->ctl.master_url;
            a->len = strlen(p->ctl.master_url);
        } else {
            memcpy(a->ip, p->cfg.master_ip, p->cfg.master_ip_len);
            a->ip_len = p->cfg.master_ip_len;
            a->port = p->cfg.master_port;
        }
        p_set_state(p, PS_CONNECTING);
        p->ctl.connect_pending = true;
        p->ctl.connect_cmd = cmd->cmd_id;
        p->ctl.last_recv_ns = p->now;
        p->ctl.last_send_ns = p->now;
        return;
    }
    case CCOIP_CMD_UPDATE_TOPOLOGY:
        if (p->state != PS_ACCEPTED || p->ctl.topo_pending) {
            p_notify(p, cmd->cmd_id, pcclInvalidUsage);
            return;
        }
        p->ctl.topo_pending = true;
        p->ctl.topo_cmd = cmd->cmd_id;
        p->ctl.topo_cmd_epoch = 0;
        p_send_topo_vote(p);
        return;
    case CCOIP_CMD_ARE_PEERS_PENDING: {
        if (p->state != PS_ACCEPTED || p->ctl.pend_pending) {
            p_notify(p, cmd->cmd_id, pcclInvalidUsage);
            return;
        }
        p->ctl.pend_pending = true;
        p->ctl.pend_cmd = cmd->cmd_id;
        ccoip_pb_peer_to_master env;
        memset(&env, 0, sizeof(env));
        env.call_id = p_call_new(p, PC_PENDING, 0);
        env.body_case = CCOIP_PB_PEER_TO_MASTER_BODY_PENDING_PEERS;
        p_send(p, &env);
        return;
    }
    case CCOIP_CMD_ALL_REDUCE: {
        pcclResult_t r = p->state == PS_ACCEPTED ? p_ring_submit(p, cmd) : pcclInvalidUsage;
        if (r != pcclSuccess) p_notify(p, cmd->cmd_id, r);
        return;
    }
    case CCOIP_CMD_LEAVE: {
        if (peer_master_up(p)) {
            ccoip_pb_peer_to_master env;
            memset(&env, 0, sizeof(env));
            env.body_case = CCOIP_PB_PEER_TO_MASTER_BODY_LEAVE;
            env.body.leave.reason = CCOIP_PB_REASON_LEFT;
            p_send(p, &env);
        }
        p_fail_at(p, CCOIP_LOG_INFO, "leaving the run");
        p_set_state(p, PS_LEFT);
        p_notify(p, cmd->cmd_id, pcclSuccess);
        return;
    }
    case CCOIP_CMD_SYNC_SHARED_STATE: {
        pcclResult_t r = p->state == PS_ACCEPTED ? p_state_submit(p, cmd) : pcclInvalidUsage;
        if (r != pcclSuccess) p_notify(p, cmd->cmd_id, r);
        return;
    }
    case CCOIP_CMD_OPTIMIZE_TOPOLOGY: {
        pcclResult_t r = p->state == PS_ACCEPTED ? p_opt_submit(p, cmd) : pcclInvalidUsage;
        if (r != pcclSuccess) p_notify(p, cmd->cmd_id, r);
        return;
    }
    }
    p_notify(p, cmd->cmd_id, pcclInvalidArgument);
}

/* ------------------------------------------------------------------------ */
/* Entry points                                                              */
/* ------------------------------------------------------------------------ */

static void peer_timers(ccoip_peer *p)
{
    p_wire_timers(p);
    if (!peer_master_up(p)) return;
    if (p->now >= sm_add_sat(p->ctl.last_recv_ns, sm_ms(p->ctl.evict_ms))) {
        p_fail(p, "master silent for evict_ms");
        return;
    }
    if (p->state >= PS_JOIN && p->now >= sm_add_sat(p->ctl.last_send_ns, sm_ms(p->ctl.hb_ms))) {
        ccoip_pb_peer_to_master env;
        memset(&env, 0, sizeof(env));
        env.body_case = CCOIP_PB_PEER_TO_MASTER_BODY_HEARTBEAT;
        env.body.heartbeat.counter = ++p->ctl.hb_counter;
        p_send(p, &env);
    }
    p_ring_timers(p);
    p_pair_timers(p);
    p_offer_timers(p);
}

uint64_t ccoip_peer_deadline_ns(const ccoip_peer *p)
{
    if (p == NULL) return CCOIP_NO_DEADLINE;
    /* With the master up the peer steps at least every heartbeat period, which checks the
     * accepted connections' HELLO deadlines (p_wire_timers) often enough. */
    if (!peer_master_up(p)) return p_wire_deadline(p);
    uint64_t d = sm_add_sat(p->ctl.last_recv_ns, sm_ms(p->ctl.evict_ms));
    if (p->state >= PS_JOIN) {
        uint64_t h = sm_add_sat(p->ctl.last_send_ns, sm_ms(p->ctl.hb_ms));
        if (h < d) d = h;
    }
    const uint64_t t = p_ring_deadline(p);
    return t < d ? t : d;
}

pcclResult_t ccoip_peer_step(ccoip_peer *p, const ccoip_event *ev)
{
    if (p == NULL || ev == NULL) return pcclInvalidArgument;
    sm_out_begin_step(&p->out);
    if (ev->now_ns > p->now) p->now = ev->now_ns;
    pcclResult_t rc = pcclSuccess;
    switch (ev->type) {
    case CCOIP_EV_START:
        if (p->state != PS_INIT) break;
        p_set_state(p, PS_IDLE);
        {
            ccoip_action *a = sm_out_push(&p->out, CCOIP_ACT_LISTEN);
            if (a != NULL) a->listener = CCOIP_LISTENER_P2P;
            a = sm_out_push(&p->out, CCOIP_ACT_LISTEN);
            if (a != NULL) a->listener = CCOIP_LISTENER_SHARED_STATE;
            a = sm_out_push(&p->out, CCOIP_ACT_LISTEN);
            if (a != NULL) a->listener = CCOIP_LISTENER_BANDWIDTH;
        }
        break;
    case CCOIP_EV_TIMER:
        break;
    case CCOIP_EV_SUBMIT:
        peer_on_submit(p, &ev->cmd);
        break;
    case CCOIP_EV_CONN_UP:
        if (!ev->accepted && ev->conn == CCOIP_PEER_MASTER_CONN) {
            if (p->state != PS_CONNECTING) break;
            p_set_state(p, PS_HELLO);
            p->ctl.last_recv_ns = p->now;
            ccoip_pb_peer_to_master env;
            memset(&env, 0, sizeof(env));
            env.call_id = p_call_new(p, PC_HELLO, 0);
            env.body_case = CCOIP_PB_PEER_TO_MASTER_BODY_HELLO;
            env.body.hello.min_version = CCOIP_PROTOCOL_VERSION_MIN;
            env.body.hello.max_version = CCOIP_PROTOCOL_VERSION_MAX;
            env.body.hello.software.data = (const uint8_t *)"pccl/0.1.0";
            env.body.hello.software.len = 10;
            if (ccoip_auth_on(&p->cfg.auth)) {
                ccoip_auth_nonce(&p->cfg.auth, &p->auth_ctr, p->auth_nonce);
                env.body.hello.nonce.data = p->auth_nonce;
                env.body.hello.nonce.len = CCOIP_AUTH_NONCE_BYTES;
            }
            p_send(p, &env);
            break;
        }
        if (ev->accepted && ev->listener == CCOIP_LISTENER_BANDWIDTH) {
            /* The driver serves probes itself (ccoip_sm.h v3): not ours to keep. */
            ccoip_action *a = sm_out_push(&p->out, CCOIP_ACT_CLOSE);
            if (a != NULL) a->conn = ev->conn;
            break;
        }
        if (!p_state_on_conn_up(p, ev) && !p_pair_on_conn_up(p, ev) && !p_wire_on_conn_up(p, ev)) {
            sm_log(&p->out, CCOIP_LOG_DEBUG, "peer %U: CONN_UP for unknown conn %U", p->id,
                   ev->conn);
        }
        break;
    case CCOIP_EV_CONN_CLOSED:
        if (ev->conn == CCOIP_PEER_MASTER_CONN) {
            if (p->state >= PS_CONNECTING && p->state <= PS_ACCEPTED) {
                p->master_closed = true; /* no CLOSE for a connection reported closed */
                p_fail(p, "connection to the master closed");
            }
            break;
        }
        if (!p_state_on_conn_closed(p, ev->conn) && !p_pair_on_conn_closed(p, ev->conn))
            p_wire_on_conn_closed(p, ev->conn);
        break;
    case CCOIP_EV_RECV:
        if (ev->data == NULL && ev->len != 0) {
            rc = pcclInvalidArgument;
            break;
        }
        if (ev->conn == CCOIP_PEER_MASTER_CONN) {
            if (peer_master_up(p)) p_master_on_frame(p, ev->data, ev->len);
            break;
        }
        if (!p_state_on_recv(p, ev->conn, ev->data, ev->len) &&
            !p_pair_on_recv(p, ev->conn, ev->data, ev->len) &&
            !p_wire_on_recv(p, ev->conn, ev->data, ev->len)) {
            sm_log(&p->out, CCOIP_LOG_DEBUG, "peer %U: frame on unknown conn %U dropped", p->id,
                   ev->conn);
        }
        break;
    case CCOIP_EV_PROBE_DONE:
        if (!p_opt_on_done(p, ev)) {
            sm_log(&p->out, CCOIP_LOG_DEBUG, "peer %U: completion of unknown probe %U ignored",
                   p->id, ev->done.io_id);
        }
        break;
    case CCOIP_EV_IO_DONE:
    case CCOIP_EV_KERNEL_DONE:
        if (!p_ring_on_done(p, ev) && !p_state_on_done(p, ev)) {
            sm_log(&p->out, CCOIP_LOG_DEBUG, "peer %U: completion of unknown io %U ignored", p->id,
                   ev->done.io_id);
        }
        break;
    default:
        rc = pcclInvalidArgument;
        break;
    }
    peer_timers(p);
    if (p->out.overflow) return pcclInternalError;
    return rc;
}

bool ccoip_peer_poll(ccoip_peer *p, ccoip_action *out)
{
    if (p == NULL || out == NULL) return false;
    return sm_out_pop(&p->out, out);
}

const ccoip_action *ccoip_peer_poll_ref(ccoip_peer *p)
{
    return p == NULL ? NULL : sm_out_pop_ref(&p->out);
}

void ccoip_peer_prefetch(const ccoip_peer *p, int stage)
{
#if defined(__GNUC__) || defined(__clang__)
    if (p == NULL) return;
    if (stage == 0) {
        __builtin_prefetch(&p->cfg.max_ops);
        __builtin_prefetch(&p->out);
        __builtin_prefetch(&p->state);
        __builtin_prefetch(&p->ring.epoch);
        __builtin_prefetch(&p->ops);
        return;
    }
    for (uint32_t i = 0; i < p->cfg.max_ops && i < 16u; i++)
        __builtin_prefetch(&p->ops[i]);
#else
    (void)p;
    (void)stage;
#endif
}

pcclResult_t ccoip_peer_set_port(ccoip_peer *p, ccoip_listener listener, uint32_t port,
                                 const char *url)
{
    if (p == NULL || port > 65535u) return pcclInvalidArgument;
    if (url != NULL && strlen(url) >= CCOIP_URL_MAX) return pcclInvalidArgument;
    if (listener == CCOIP_LISTENER_SHARED_STATE) {
        p->ss.port = port;
        p->ss.url[0] = '\0';
        if (url != NULL) memcpy(p->ss.url, url, strlen(url) + 1u);
        p->ss.listening = true;
        return pcclSuccess;
    }
    if (listener == CCOIP_LISTENER_BANDWIDTH) {
        p->opt.bw_port = port;
        p->opt.bw_url[0] = '\0';
        if (url != NULL) memcpy(p->opt.bw_url, url, strlen(url) + 1u);
        p->opt.bw_listening = true;
        return pcclSuccess;
    }
    if (listener != CCOIP_LISTENER_P2P) return pcclInvalidArgument;
    p->wire.p2p_port = port;
    p->wire.p2p_url[0] = '\0';
    if (url != NULL) memcpy(p->wire.p2p_url, url, strlen(url) + 1u);
    p->wire.p2p_listening = true;
    return pcclSuccess;
}

uint64_t ccoip_peer_id(const ccoip_peer *p)
{
    return p->id;
}

uint64_t ccoip_peer_epoch(const ccoip_peer *p)
{
    return p->ring.epoch;
}

void ccoip_peer_algo_table(const ccoip_peer *p, ccoip_algo_table *out)
{
    *out = p->ring.table;
}

uint64_t ccoip_peer_relay_max(const ccoip_peer *p)
{
    return p->ring.relay_max;
}

int32_t ccoip_peer_rank(const ccoip_peer *p)
{
    return p->ring.ready ? (int32_t)p->ring.rank : -1;
}

bool ccoip_peer_is_accepted(const ccoip_peer *p)
{
    return p->state == PS_ACCEPTED;
}

bool ccoip_peer_is_pending(const ccoip_peer *p)
{
    return p != NULL && p->state == PS_PENDING;
}

bool ccoip_peer_is_failed(const ccoip_peer *p)
{
    return p->state == PS_FAILED;
}

uint32_t ccoip_peer_world_size(const ccoip_peer *p)
{
    return p->ring.world;
}

uint64_t ccoip_peer_optimistic_starts(const ccoip_peer *p)
{
    return p != NULL ? p->ring.opt_starts : 0;
}

uint64_t ccoip_peer_optimistic_joins(const ccoip_peer *p)
{
    return p != NULL ? p->ring.opt_joins : 0;
}

uint64_t ccoip_peer_relayed_ops(const ccoip_peer *p)
{
    return p != NULL ? p->ring.relay_ops : 0;
}

uint32_t ccoip_peer_sync_slot(const ccoip_peer *p)
{
    return p->cfg.max_ops;
}

void ccoip_peer_world_info(const ccoip_peer *p, ccoip_world_info *out)
{
    *out = p->ring.wi;
}
