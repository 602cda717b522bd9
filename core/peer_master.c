/*
 * peer_master.c — the master's frames to the peer (docs/protocol.md §5, §6):
 * each decoded and matched to the call it answers (hello, join, topology
 * votes and their verdicts, pending-peers queries; collectives, shared state
 * and optimization are handed to their files), or taken as a notification
 * (re-wiring plans, early verdicts, eviction). docs/core.md §3.
 */
#include <string.h>

#include "peer_internal.h"

/* Fails the connect with pcclAuthenticationFailed (docs/security.md). */
static void peer_auth_fail(ccoip_peer *p, const char *why)
{
    sm_log(&p->out, CCOIP_LOG_ERROR, "peer %U: authentication failed: %s", p->id, why);
    if (p->ctl.connect_pending) {
        p->ctl.connect_pending = false;
        p_notify(p, p->ctl.connect_cmd, pcclAuthenticationFailed);
    }
    p_fail(p, "authentication failed");
}

/*
 * §6.1.1: with a run key, the master must prove it over our nonce and its own, and our Join
 * proves it back (proof_out). Without one, a master that challenges us requires a token we do
 * not have. False when the connect failed.
 */
static bool peer_hello_authentic(ccoip_peer *p, const ccoip_pb_hello_result *h,
                                 uint8_t proof_out[CCOIP_AUTH_MAC_BYTES])
{
    if (!ccoip_auth_on(&p->cfg.auth)) {
        if (h->nonce.len == 0) return true;
        peer_auth_fail(p, "the master requires a run token and this peer has none");
        return false;
    }
    if (h->nonce.len != CCOIP_AUTH_NONCE_BYTES || h->proof.len != CCOIP_AUTH_MAC_BYTES) {
        peer_auth_fail(p, "the master does not authenticate (no run token there)");
        return false;
    }
    uint8_t want[CCOIP_AUTH_MAC_BYTES];
    ccoip_auth_mac(&p->cfg.auth, p->cfg.auth.run_key, "pccl master proof", p->auth_nonce,
                   CCOIP_AUTH_NONCE_BYTES, h->nonce.data, CCOIP_AUTH_NONCE_BYTES, &p->id, 1, want);
    if (!ccoip_auth_equal(want, h->proof.data, CCOIP_AUTH_MAC_BYTES)) {
        peer_auth_fail(p, "the master's proof is wrong (a different run token)");
        return false;
    }
    ccoip_auth_mac(&p->cfg.auth, p->cfg.auth.run_key, "pccl peer proof", h->nonce.data,
                   CCOIP_AUTH_NONCE_BYTES, p->auth_nonce, CCOIP_AUTH_NONCE_BYTES, &p->id, 1,
                   proof_out);
    return true;
}

static void peer_on_hello(ccoip_peer *p, const ccoip_pb_master_to_peer *env)
{
    if (env->status != CCOIP_PB_STATUS_SUCCESS ||
        env->body_case != CCOIP_PB_MASTER_TO_PEER_BODY_HELLO) {
        pcclResult_t r = env->status == CCOIP_PB_STATUS_SUCCESS
                             ? pcclProtocolError
                             : ccoip_status_to_result(env->status);
        if (p->ctl.connect_pending) {
            p->ctl.connect_pending = false;
            p_notify(p, p->ctl.connect_cmd, r);
        }
        p_fail(p, "hello refused");
        return;
    }
    const ccoip_pb_hello_result *h = &env->body.hello;
    if (h->peer_id == 0 || h->version < CCOIP_PROTOCOL_VERSION_MIN ||
        h->version > CCOIP_PROTOCOL_VERSION_MAX) {
        p_fail(p, "bad hello answer");
        return;
    }
    p->id = h->peer_id;
    uint8_t proof[CCOIP_AUTH_MAC_BYTES];
    if (!peer_hello_authentic(p, h, proof)) return;
    p->ring.relay_max = h->relay_max_bytes;
    if (h->heartbeat_ms != 0 && h->evict_ms > h->heartbeat_ms) {
        p->ctl.hb_ms = h->heartbeat_ms;
        p->ctl.evict_ms = h->evict_ms;
    }
    ccoip_pb_peer_to_master out;
    ccoip_pb_endpoint ep[3];
    memset(&out, 0, sizeof(out));
    memset(ep, 0, sizeof(ep));
    ep[0].kind = CCOIP_PB_ENDPOINT_KIND_P2P;
    ep[0].port = p->wire.p2p_port;
    ep[0].url.data = (const uint8_t *)p->wire.p2p_url;
    ep[0].url.len = strlen(p->wire.p2p_url);
    ep[1].kind = CCOIP_PB_ENDPOINT_KIND_SHARED_STATE;
    ep[1].port = p->ss.port;
    ep[1].url.data = (const uint8_t *)p->ss.url;
    ep[1].url.len = strlen(p->ss.url);
    uint64_t nep = 1;
    if (p->ss.listening) nep++;
    ep[nep].kind = CCOIP_PB_ENDPOINT_KIND_BANDWIDTH;
    ep[nep].port = p->opt.bw_port;
    ep[nep].url.data = (const uint8_t *)p->opt.bw_url;
    ep[nep].url.len = strlen(p->opt.bw_url);
    if (p->opt.bw_listening) nep++;
    out.call_id = p_call_new(p, PC_JOIN, 0);
    out.body_case = CCOIP_PB_PEER_TO_MASTER_BODY_JOIN;
    out.body.join.peer_group = p->cfg.peer_group;
    out.body.join.endpoints = ep;
    out.body.join.endpoints_count = nep;
    out.body.join.p2p_pool_size = p->cfg.p2p_pool_size;
    out.body.join.ring_key = p->cfg.ring_key;
    if (ccoip_auth_on(&p->cfg.auth)) {
        out.body.join.proof.data = proof;
        out.body.join.proof.len = CCOIP_AUTH_MAC_BYTES;
    }
    p_set_state(p, PS_JOIN);
    p_send(p, &out);
}

static void peer_on_join(ccoip_peer *p, const ccoip_pb_master_to_peer *env)
{
    if (env->status != CCOIP_PB_STATUS_SUCCESS ||
        env->body_case != CCOIP_PB_MASTER_TO_PEER_BODY_JOIN) {
        if (p->ctl.connect_pending) {
            p->ctl.connect_pending = false;
            p_notify(p, p->ctl.connect_cmd, ccoip_status_to_result(env->status));
        }
        p_fail(p, env->status == CCOIP_PB_STATUS_AUTHENTICATION_FAILED
                      ? "join refused: authentication failed (no or a different run token)"
                      : "join refused");
        return;
    }
    p_set_state(p, PS_PENDING);
    p->wire.known_epoch = env->body.join.epoch;
    if (env->body.join.has_world) {
        p->ring.wi.global = env->body.join.world.global;
        p->ring.wi.peer_group = env->body.join.world.peer_group;
        p->ring.wi.num_peer_groups = env->body.join.world.num_peer_groups;
        p->ring.wi.largest_peer_group = env->body.join.world.largest_peer_group;
    }
    /* A pending peer votes right after Join and waits to be admitted (§6.3). */
    p_send_topo_vote(p);
}

/*
 * The TopologyVerdict of the plan being wired: the answer to our report, or (notified) a
 * notification when the master failed the phase before we reported (a member was lost,
 * docs/protocol.md §6.4). Then wiring stops, and a report already sent is never answered.
 */
static void peer_on_verdict(ccoip_peer *p, const ccoip_pb_master_to_peer *env, bool notified)
{
    if (env->body_case != CCOIP_PB_MASTER_TO_PEER_BODY_TOPOLOGY_VERDICT) {
        p_fail(p, "p2p report answered without a verdict");
        return;
    }
    const ccoip_pb_topology_verdict *v = &env->body.topology_verdict;
    if (notified) {
        if (v->epoch != p->wire.plan_epoch || (!p->wire.wiring && !p->wire.reported)) {
            sm_log(&p->out, CCOIP_LOG_DEBUG, "peer %U: verdict of epoch %U ignored", p->id,
                   v->epoch);
            return;
        }
        for (uint32_t i = 0; i < p->ctl.calls_cap; i++) {
            if (p->ctl.calls[i].kind == PC_P2P) p->ctl.calls[i].kind = PC_NONE;
        }
        p->wire.wiring = false;
        p->wire.reported = true;
    }
    if (!p->wire.reported || v->epoch != p->wire.plan_epoch) {
        p_fail(p, "topology verdict for another epoch");
        return;
    }
    p->wire.reported = false;
    bool ok = v->success && env->status == CCOIP_PB_STATUS_SUCCESS;
    if (v->has_world) {
        p->ring.world = v->world.peer_group;
        p->ring.wi.global = v->world.global;
        p->ring.wi.peer_group = v->world.peer_group;
        p->ring.wi.num_peer_groups = v->world.num_peer_groups;
        p->ring.wi.largest_peer_group = v->world.largest_peer_group;
    }
    if (ok) {
        p->ring.epoch = p->wire.plan_epoch;
        p->ring.ready = true;
        p->ring.opt_off = false;
        p->ring.rank = p->wire.plan_rank;
        p->ring.n = p->wire.plan_n;
        memcpy(p->ring.ids, p->wire.plan_ring, (size_t)p->wire.plan_n * sizeof(uint64_t));
        p->ring.world = p->wire.plan_n;
        p->ring.wi.peer_group = p->wire.plan_n;
    } else {
        p->ring.ready = false;
    }
    sm_log(&p->out, CCOIP_LOG_INFO, "peer %U: epoch %U p2p %s (rank %u of %u)", p->id, v->epoch,
           ok ? "established" : "failed", p->wire.plan_rank, p->wire.plan_n);
    if (p->state == PS_PENDING) {
        if (ok) {
            p_set_state(p, PS_ACCEPTED);
            if (p->ctl.connect_pending) {
                p->ctl.connect_pending = false;
                p_notify(p, p->ctl.connect_cmd, pcclSuccess);
            }
        } else {
            p_send_topo_vote(p); /* still waiting: vote again */
        }
        return;
    }
    p_opt_on_topology_verdict(p, v->epoch, ok);
    if (p->ctl.topo_pending && p->ctl.topo_cmd_epoch == v->epoch) {
        p->ctl.topo_pending = false;
        p_notify(p, p->ctl.topo_cmd, ok ? pcclSuccess : pcclUpdateTopologyFailed);
    }
}

/*
 * The answer to our topology vote when the vote changed nothing (docs/protocol.md §6.3): our
 * ring, its epoch and its links stay as they are; only the world sizes are refreshed. The master
 * sends it only while our group's ring is settled, so it names the ring we hold.
 */
static void peer_on_unchanged(ccoip_peer *p, const ccoip_pb_topology_plan *plan)
{
    bool same = p->state == PS_ACCEPTED && p->ring.ready && !p->wire.wiring &&
                plan->epoch == p->ring.epoch && plan->ring_count == p->ring.n;
    for (uint32_t i = 0; same && i < p->ring.n; i++)
        same = plan->ring[i] == p->ring.ids[i];
    if (!same) {
        p_fail(p, "unchanged topology plan for a ring we do not hold");
        return;
    }
    if (plan->has_world) {
        p->ring.wi.global = plan->world.global;
        p->ring.wi.num_peer_groups = plan->world.num_peer_groups;
        p->ring.wi.largest_peer_group = plan->world.largest_peer_group;
    }
    sm_log(&p->out, CCOIP_LOG_INFO, "peer %U: topology unchanged, epoch %U (rank %u of %u)", p->id,
           plan->epoch, p->ring.rank, p->ring.n);
    if (p->ctl.topo_pending) {
        p->ctl.topo_pending = false;
        p_notify(p, p->ctl.topo_cmd, pcclSuccess);
    }
}

static void peer_on_topo_answer(ccoip_peer *p, const ccoip_pb_master_to_peer *env)
{
    if (env->status != CCOIP_PB_STATUS_SUCCESS ||
        env->body_case != CCOIP_PB_MASTER_TO_PEER_BODY_TOPOLOGY_PLAN) {
        pcclResult_t r = env->status == CCOIP_PB_STATUS_SUCCESS
                             ? pcclProtocolError
                             : ccoip_status_to_result(env->status);
        if (p->state == PS_PENDING) {
            if (p->ctl.connect_pending) {
                p->ctl.connect_pending = false;
                p_notify(p, p->ctl.connect_cmd, r);
            }
            p_fail(p, "admission refused");
        } else if (p->ctl.topo_pending) {
            p->ctl.topo_pending = false;
            p_notify(p, p->ctl.topo_cmd, r);
        }
        return;
    }
    if (env->body.topology_plan.unchanged) {
        peer_on_unchanged(p, &env->body.topology_plan);
        return;
    }
    if (p->ctl.topo_pending) p->ctl.topo_cmd_epoch = env->body.topology_plan.epoch;
    p_wire_on_plan(p, &env->body.topology_plan, env->deadline_ms);
}

static void peer_on_pending_answer(ccoip_peer *p, const ccoip_pb_master_to_peer *env)
{
    if (!p->ctl.pend_pending) return;
    p->ctl.pend_pending = false;
    ccoip_action *a = sm_out_push(&p->out, CCOIP_ACT_NOTIFY);
    if (a == NULL) return;
    a->cmd_id = p->ctl.pend_cmd;
    a->world_size = p->ring.world;
    if (env->status != CCOIP_PB_STATUS_SUCCESS ||
        env->body_case != CCOIP_PB_MASTER_TO_PEER_BODY_PENDING_PEERS) {
        a->result = env->status != CCOIP_PB_STATUS_SUCCESS ? ccoip_status_to_result(env->status)
                                                           : pcclProtocolError;
        return;
    }
    a->result = pcclSuccess;
    a->peers_pending = env->body.pending_peers.pending;
}

void p_master_on_frame(ccoip_peer *p, const uint8_t *data, uint64_t len)
{
    ccoip_pb_arena arena;
    ccoip_pb_arena_init(&arena, p->arena_mem, p->arena_cap);
    ccoip_pb_master_to_peer env;
    pcclResult_t r = ccoip_ctrl_decode_m2p(data, len, &p->lim, &arena, &env);
    if (r != pcclSuccess) {
        p_fail(p, "malformed frame from the master");
        return;
    }
    p->ctl.last_recv_ns = p->now;
    if (env.body_case == CCOIP_PB_MASTER_TO_PEER_BODY_EVICTION) {
        sm_log(&p->out, CCOIP_LOG_ERROR, "peer %U: evicted by the master (reason %d)", p->id,
               env.body.eviction.reason);
        p_fail(p, "evicted");
        return;
    }
    if (env.call_id == 0) {
        switch (env.body_case) {
        case CCOIP_PB_MASTER_TO_PEER_BODY_HEARTBEAT:
            return;
        case CCOIP_PB_MASTER_TO_PEER_BODY_TOPOLOGY_PLAN:
            if (p->state != PS_ACCEPTED) break;
            p_wire_on_plan(p, &env.body.topology_plan, env.deadline_ms); /* re-wire (§6.9) */
            return;
        case CCOIP_PB_MASTER_TO_PEER_BODY_COLLECTIVE_VERDICT:
            if (p->state != PS_ACCEPTED) break;
            p_ring_on_verdict(p, &env.body.collective_verdict);
            return;
        case CCOIP_PB_MASTER_TO_PEER_BODY_TOPOLOGY_VERDICT:
            if (p->state != PS_ACCEPTED && p->state != PS_PENDING) break;
            peer_on_verdict(p, &env, true); /* a phase failed before we reported (§6.4) */
            return;
        case CCOIP_PB_MASTER_TO_PEER_BODY_SYNC_DONE_VERDICT:
            if (p->state != PS_ACCEPTED) break;
            p_state_on_round_failed(p);
            return;
        default:
            sm_log(&p->out, CCOIP_LOG_DEBUG, "peer %U: notification %u ignored", p->id,
                   (uint32_t)env.body_case);
            return;
        }
        p_fail(p, "notification not legal in this state");
        return;
    }
    p_call c = p_call_take(p, env.call_id);
    switch (c.kind) {
    case PC_HELLO:
        peer_on_hello(p, &env);
        return;
    case PC_JOIN:
        peer_on_join(p, &env);
        return;
    case PC_TOPO_VOTE:
        peer_on_topo_answer(p, &env);
        return;
    case PC_P2P:
        peer_on_verdict(p, &env, false);
        return;
    case PC_PENDING:
        peer_on_pending_answer(p, &env);
        return;
    case PC_INITIATE:
        if (env.status == CCOIP_PB_STATUS_SUCCESS &&
            env.body_case == CCOIP_PB_MASTER_TO_PEER_BODY_COLLECTIVE_VERDICT) {
            p_ring_on_relay_answer(p, c.op, &env.body.collective_verdict);
            return;
        }
        if (env.status != CCOIP_PB_STATUS_SUCCESS ||
            env.body_case != CCOIP_PB_MASTER_TO_PEER_BODY_COLLECTIVE_COMMENCE) {
            p_ring_on_initiate_error(p, c.op,
                                     env.status != CCOIP_PB_STATUS_SUCCESS
                                         ? ccoip_status_to_result(env.status)
                                         : pcclProtocolError);
            return;
        }
        p_ring_on_commence(p, c.op, &env);
        return;
    case PC_COMPLETE:
        if (env.body_case != CCOIP_PB_MASTER_TO_PEER_BODY_COLLECTIVE_VERDICT) {
            p_fail(p, "completion answered without a verdict");
            return;
        }
        p_ring_on_verdict(p, &env.body.collective_verdict);
        return;
    case PC_SYNC_VOTE:
    case PC_SYNC_DONE:
        p_state_on_answer(p, c.kind, &env);
        return;
    case PC_OPT_VOTE:
    case PC_OPT_DONE:
        p_opt_on_answer(p, c.kind, &env);
        return;
    case PC_NONE:
        break;
    }
    p_fail(p, "answer to a call never made");
}
