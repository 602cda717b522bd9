/*
 * test_hostile.c — hostile networks, the core's half (docs/protocol.md §2, §6.1, §6.2, §6.10,
 * §8.1). Session rules are checked on a bare master fed raw connections and frames (a rogue
 * is not a well-behaved harness peer); vote rules through the in-memory harness
 * (tests/common/sm_harness.h) with real peers; the p2p HELLO rules on a bare peer.
 */
#include <stdlib.h>
#include <string.h>

#include "ccoip_frame.h"
#include "ccoip_master.h"
#include "ccoip_peer.h"
#include "ptest.h"
#include "sm_harness.h"

#define MS 1000000ull

/* ------------------------------------------------------------------------ */
/* A bare master and what it said                                            */
/* ------------------------------------------------------------------------ */

typedef struct seen {
    uint32_t sends, closes, evictions;
    int32_t last_status, last_reason, evict_reason;
    bool closed[512];
    uint32_t plans;
    ccoip_pb_endpoint plan_ep; /* the first neighbour endpoint of the last plan (P2P) */
    uint8_t plan_ip[16];
    uint8_t plan_url[64];
    char log[4096];
} seen;

static uint8_t g_arena[1u << 16];

static void drain(ccoip_master *m, seen *s)
{
    ccoip_action a;
    while (ccoip_master_poll(m, &a)) {
        if (a.type == CCOIP_ACT_CLOSE) {
            s->closes++;
            if (a.conn < 512) s->closed[a.conn] = true;
        } else if (a.type == CCOIP_ACT_LOG) {
            size_t n = strlen(s->log);
            if (n + a.len + 2 < sizeof(s->log)) {
                memcpy(s->log + n, a.data, (size_t)a.len);
                s->log[n + a.len] = '\n';
                s->log[n + a.len + 1] = '\0';
            }
        } else if (a.type == CCOIP_ACT_SEND) {
            s->sends++;
            ccoip_pb_arena ar;
            ccoip_pb_arena_init(&ar, g_arena, sizeof(g_arena));
            ccoip_pb_master_to_peer env;
            if (ccoip_ctrl_decode_m2p(a.data, a.len, NULL, &ar, &env) != pcclSuccess) continue;
            s->last_status = env.status;
            s->last_reason = env.reason;
            if (env.body_case == CCOIP_PB_MASTER_TO_PEER_BODY_EVICTION) {
                s->evictions++;
                s->evict_reason = env.body.eviction.reason;
            }
            if (env.body_case == CCOIP_PB_MASTER_TO_PEER_BODY_TOPOLOGY_PLAN) {
                const ccoip_pb_topology_plan *pl = &env.body.topology_plan;
                s->plans++;
                memset(&s->plan_ep, 0, sizeof(s->plan_ep));
                if (pl->neighbours_count > 0 && pl->neighbours[0].endpoints_count > 0) {
                    s->plan_ep = pl->neighbours[0].endpoints[0];
                    if (s->plan_ep.ip.len > 0 && s->plan_ep.ip.len <= 16) {
                        memcpy(s->plan_ip, s->plan_ep.ip.data, (size_t)s->plan_ep.ip.len);
                    }
                    if (s->plan_ep.url.len > 0 && s->plan_ep.url.len < sizeof(s->plan_url)) {
                        memcpy(s->plan_url, s->plan_ep.url.data, (size_t)s->plan_ep.url.len);
                    }
                }
            }
        }
    }
}

static void ev_conn_up(ccoip_master *m, seen *s, uint64_t now, uint64_t conn, uint8_t ip_last)
{
    ccoip_event ev;
    memset(&ev, 0, sizeof(ev));
    ev.type = CCOIP_EV_CONN_UP;
    ev.now_ns = now;
    ev.conn = conn;
    ev.accepted = true;
    if (ip_last != 0) {
        ev.remote_ip[0] = 10;
        ev.remote_ip[3] = ip_last;
        ev.remote_ip_len = 4;
    }
    PT_ASSERT(ccoip_master_step(m, &ev) == pcclSuccess, "CONN_UP");
    drain(m, s);
}

static void ev_recv(ccoip_master *m, seen *s, uint64_t now, uint64_t conn, const uint8_t *d,
                    uint64_t len)
{
    ccoip_event ev;
    memset(&ev, 0, sizeof(ev));
    ev.type = CCOIP_EV_RECV;
    ev.now_ns = now;
    ev.conn = conn;
    ev.data = d;
    ev.len = len;
    PT_ASSERT(ccoip_master_step(m, &ev) == pcclSuccess, "RECV");
    drain(m, s);
}

static void ev_timer(ccoip_master *m, seen *s, uint64_t now)
{
    ccoip_event ev;
    memset(&ev, 0, sizeof(ev));
    ev.type = CCOIP_EV_TIMER;
    ev.now_ns = now;
    PT_ASSERT(ccoip_master_step(m, &ev) == pcclSuccess, "TIMER");
    drain(m, s);
}

static void send_env(ccoip_master *m, seen *s, uint64_t now, uint64_t conn,
                     const ccoip_pb_peer_to_master *env)
{
    uint8_t buf[1024];
    uint64_t len = 0;
    PT_ASSERT(ccoip_ctrl_encode_p2m(env, NULL, buf, sizeof(buf), &len) == pcclSuccess, "encode");
    ev_recv(m, s, now, conn, buf, len);
}

static void send_hello(ccoip_master *m, seen *s, uint64_t now, uint64_t conn)
{
    ccoip_pb_peer_to_master env;
    memset(&env, 0, sizeof(env));
    env.call_id = 1;
    env.body_case = CCOIP_PB_PEER_TO_MASTER_BODY_HELLO;
    env.body.hello.min_version = CCOIP_PROTOCOL_VERSION_MIN;
    env.body.hello.max_version = CCOIP_PROTOCOL_VERSION_MAX;
    send_env(m, s, now, conn, &env);
}

static void send_join(ccoip_master *m, seen *s, uint64_t now, uint64_t conn, uint32_t port,
                      const char *url)
{
    ccoip_pb_endpoint ep;
    memset(&ep, 0, sizeof(ep));
    ep.kind = CCOIP_PB_ENDPOINT_KIND_P2P;
    ep.port = port;
    ep.url.data = (const uint8_t *)url;
    ep.url.len = url != NULL ? strlen(url) : 0;
    ccoip_pb_peer_to_master env;
    memset(&env, 0, sizeof(env));
    env.call_id = 2;
    env.body_case = CCOIP_PB_PEER_TO_MASTER_BODY_JOIN;
    env.body.join.endpoints = &ep;
    env.body.join.endpoints_count = 1;
    send_env(m, s, now, conn, &env);
}

static void send_heartbeat(ccoip_master *m, seen *s, uint64_t now, uint64_t conn)
{
    ccoip_pb_peer_to_master env;
    memset(&env, 0, sizeof(env));
    env.body_case = CCOIP_PB_PEER_TO_MASTER_BODY_HEARTBEAT;
    env.body.heartbeat.counter = now;
    send_env(m, s, now, conn, &env);
}

static void send_vote(ccoip_master *m, seen *s, uint64_t now, uint64_t conn, uint64_t call)
{
    ccoip_pb_peer_to_master env;
    memset(&env, 0, sizeof(env));
    env.call_id = call;
    env.body_case = CCOIP_PB_PEER_TO_MASTER_BODY_UPDATE_TOPOLOGY;
    env.body.update_topology.accept_new_peers = true;
    send_env(m, s, now, conn, &env);
}

/* A PeerToMaster with call_id and no body: the frame the master cannot know (§5). */
static void send_bodiless(ccoip_master *m, seen *s, uint64_t now, uint64_t conn, uint8_t call)
{
    const uint8_t f[14] = {0x43, 0x43, 0x6f, 0x43, CCOIP_PROTOCOL_VERSION, 0, 1, 0, 2, 0,
                           0,    0,    0x08, call};
    ev_recv(m, s, now, conn, f, sizeof(f));
}

static ccoip_master *bare_master(uint32_t max_unjoined)
{
    ccoip_master_config c;
    ccoip_master_config_default(&c);
    c.max_unjoined_per_addr = max_unjoined;
    ccoip_master *m = NULL;
    PT_ASSERT(ccoip_master_create(&c, 1, &m) == pcclSuccess, "master_create");
    return m;
}

/* Rule (§6.2): nothing but Hello/Join/heartbeat/leave before Join; a call closes the session.
 * Before: the bodiless call was answered INVALID_USAGE and the session stayed. */
PTEST(hostile, call_before_join_closes_session)
{
    seen s;
    memset(&s, 0, sizeof(s));
    ccoip_master *m = bare_master(0);
    ev_conn_up(m, &s, 1000, 7, 1);
    send_hello(m, &s, 2000, 7);
    PT_ASSERT(s.sends == 1 && s.last_status == 0 && s.closes == 0, "hello answered");
    send_bodiless(m, &s, 3000, 7, 5);
    PT_ASSERT(s.closed[7], "the session is closed");
    PT_ASSERT(s.evictions == 1 && s.evict_reason == CCOIP_PB_REASON_ILLEGAL_MESSAGE,
              "evicted as an illegal message (reason %d)", s.evict_reason);
    PT_ASSERT(strstr(s.log, "a call before join") != NULL, "logged: %s", s.log);
    ccoip_master_destroy(m);
}

/* Rule (§6.10): only frames legal in the state count as heard from. Before: a stream of
 * bodiless calls kept a joined session alive forever without a heartbeat. */
PTEST(hostile, garbage_calls_do_not_keep_a_session_alive)
{
    seen s;
    memset(&s, 0, sizeof(s));
    ccoip_master *m = bare_master(0);
    ev_conn_up(m, &s, 1000, 7, 1);
    send_hello(m, &s, 2000, 7);
    send_join(m, &s, 3000, 7, 5000, NULL);
    uint64_t t = 3000;
    for (uint32_t i = 0; i < 25 && !s.closed[7]; i++) {
        t += 100 * MS;
        send_bodiless(m, &s, t, 7, (uint8_t)(10 + i));
        ev_timer(m, &s, t + 1);
    }
    PT_ASSERT(s.closed[7] && s.evictions == 1 &&
                  s.evict_reason == CCOIP_PB_REASON_HEARTBEAT_TIMEOUT,
              "evicted for silence (closed %d, reason %d)", (int)s.closed[7], s.evict_reason);
    PT_ASSERT(t >= 2000 * MS && t <= 2200 * MS, "after evict_ms of legal silence (t=%llu ms)",
              (unsigned long long)(t / MS));
    ccoip_master_destroy(m);
}

/* Rule (§6.2): a session joins within evict_ms of CONN_UP or is closed (REASON_JOIN_TIMEOUT).
 * Before: hello plus heartbeats held the slot forever. */
PTEST(hostile, hello_without_join_is_closed_at_the_join_deadline)
{
    seen s;
    memset(&s, 0, sizeof(s));
    ccoip_master *m = bare_master(0);
    ev_conn_up(m, &s, 1000, 7, 1);
    send_hello(m, &s, 2000, 7);
    uint64_t t = 2000;
    while (t < 1900 * MS) {
        t += 100 * MS;
        send_heartbeat(m, &s, t, 7);
        ev_timer(m, &s, t + 1);
    }
    PT_ASSERT(!s.closed[7], "still open before the deadline");
    PT_ASSERT(ccoip_master_deadline_ns(m) <= 1000 + 2000 * MS, "deadline by the join bound");
    ev_timer(m, &s, 1000 + 2000 * MS);
    PT_ASSERT(s.closed[7] && s.evict_reason == CCOIP_PB_REASON_JOIN_TIMEOUT,
              "closed at CONN_UP + evict_ms (reason %d)", s.evict_reason);
    PT_ASSERT(strstr(s.log, "no join within evict_ms") != NULL, "logged");
    ccoip_master_destroy(m);
}

/* Rule (§6.1): at most max_unjoined_per_addr sessions per address that have not joined.
 * Before: the fourth connection got a slot like any other. */
PTEST(hostile, unjoined_sessions_per_address_are_bounded)
{
    seen s;
    memset(&s, 0, sizeof(s));
    ccoip_master *m = bare_master(3);
    for (uint64_t c = 1; c <= 3; c++)
        ev_conn_up(m, &s, 1000, c, 1);
    PT_ASSERT(s.closes == 0, "three from 10.0.0.1 accepted");
    ev_conn_up(m, &s, 1000, 4, 1);
    PT_ASSERT(s.closed[4] && s.closes == 1, "the fourth from 10.0.0.1 closed at once");
    ev_conn_up(m, &s, 1000, 5, 2);
    PT_ASSERT(!s.closed[5], "another address is not limited");
    send_hello(m, &s, 2000, 1);
    send_join(m, &s, 3000, 1, 5000, NULL);
    ev_conn_up(m, &s, 4000, 6, 1);
    PT_ASSERT(!s.closed[6], "a joined session no longer counts");
    ev_conn_up(m, &s, 4000, 8, 1);
    PT_ASSERT(s.closed[8], "three unjoined again: closed");
    ccoip_master_destroy(m);
}

/* Rule (§2): endpoints passed on are the observed address and the announced port, never a
 * peer-supplied url; no observed address (an ipc:// master) means 127.0.0.1. Before: the
 * plan carried the joiner's url verbatim ("ipc:///tmp/evil"). */
PTEST(hostile, plans_carry_observed_address_never_a_url)
{
    seen s;
    memset(&s, 0, sizeof(s));
    ccoip_master *m = bare_master(0);
    ev_conn_up(m, &s, 1000, 1, 9);
    send_hello(m, &s, 1000, 1);
    send_join(m, &s, 1000, 1, 5001, "tcp://169.254.169.254:80");
    send_vote(m, &s, 1000, 1, 3); /* alone: admitted at once, epoch 1 */
    ccoip_pb_peer_to_master rep;
    memset(&rep, 0, sizeof(rep));
    rep.call_id = 4;
    rep.body_case = CCOIP_PB_PEER_TO_MASTER_BODY_P2P_ESTABLISHED;
    rep.body.p2p_established.epoch = 1;
    rep.body.p2p_established.success = true;
    send_env(m, &s, 2000, 1, &rep);
    PT_ASSERT(ccoip_master_num_accepted(m) == 1, "peer 1 accepted");
    ev_conn_up(m, &s, 3000, 2, 0); /* no observed address */
    send_hello(m, &s, 3000, 2);
    send_join(m, &s, 3000, 2, 5002, "ipc:///tmp/evil");
    send_vote(m, &s, 3000, 2, 3);
    s.plans = 0;
    send_vote(m, &s, 4000, 1, 5); /* admits peer 2: plans to both, peer 2's last */
    PT_ASSERT(s.plans == 2, "two plans (%u)", s.plans);
    PT_ASSERT(s.plan_ep.url.len == 0, "no url passed on");
    PT_ASSERT(s.plan_ep.ip.len == 4 && s.plan_ip[0] == 10 && s.plan_ip[3] == 9 &&
                  s.plan_ep.port == 5001,
              "peer 2 dials peer 1 at its observed address and announced port");
    ccoip_master_destroy(m);

    /* And the other direction: peer 1 dials peer 2 (no observed address) at loopback. */
    memset(&s, 0, sizeof(s));
    m = bare_master(0);
    ev_conn_up(m, &s, 1000, 1, 0);
    send_hello(m, &s, 1000, 1);
    send_join(m, &s, 1000, 1, 5001, "ipc:///tmp/evil");
    send_vote(m, &s, 1000, 1, 3);
    send_env(m, &s, 2000, 1, &rep);
    ev_conn_up(m, &s, 3000, 2, 9);
    send_hello(m, &s, 3000, 2);
    send_join(m, &s, 3000, 2, 5002, "tcp://169.254.169.254:80");
    send_vote(m, &s, 3000, 2, 3);
    send_vote(m, &s, 4000, 1, 5);
    PT_ASSERT(s.plan_ep.url.len == 0 && s.plan_ep.ip.len == 4 && s.plan_ip[0] == 127 &&
                  s.plan_ip[3] == 1 && s.plan_ep.port == 5001,
              "no observed address: 127.0.0.1 with the announced port");
    ccoip_master_destroy(m);
}

/* ------------------------------------------------------------------------ */
/* Votes: a minority never evicts a majority (§6.10)                          */
/* ------------------------------------------------------------------------ */

static ccoip_allreduce_args ar_args(uint64_t tag, uint64_t count)
{
    ccoip_allreduce_args a;
    memset(&a, 0, sizeof(a));
    a.tag = tag;
    a.count = count;
    a.dtype = pcclInt32;
    a.op = pcclSum;
    a.quant_algorithm = pcclQuantNone;
    return a;
}

static smh *ring3(void)
{
    ccoip_master_config mc;
    ccoip_master_config_default(&mc);
    mc.vote_timeout_ms = 5000;
    smh *h = smh_create(&mc, NULL);
    PT_ASSERT(smh_form_ring(h, 3, 0), "ring of 3 formed");
    return h;
}

/* One peer all-reduces on a tag nobody else uses. Before: at the vote deadline the master
 * evicted both others and the rogue stayed. Now: the rogue gets pcclInvalidUsage (reason
 * VOTE_UNMATCHED), nobody is evicted, the next all-reduce of all three succeeds. */
PTEST(hostile, rogue_collective_voter_gets_invalid_usage)
{
    smh *h = ring3();
    int32_t in[3][4] = {{1, 2, 3, 4}, {10, 20, 30, 40}, {100, 200, 300, 400}}, out[3][4];
    ccoip_allreduce_args lone = ar_args(77, 4);
    uint64_t c = smh_allreduce(h, 0, &lone, in[0], out[0]);
    smh_advance(h, 4000 * MS);
    PT_ASSERT(!smh_done(h, 0, c, NULL), "waiting before the deadline");
    smh_advance(h, 1500 * MS);
    pcclResult_t r;
    PT_ASSERT(smh_done(h, 0, c, &r) && r == pcclInvalidUsage, "rogue: pcclInvalidUsage (r=%d)",
              (int)r);
    for (uint32_t i = 0; i < 3; i++)
        PT_ASSERT(!ccoip_peer_is_failed(smh_peer(h, i)), "peer %u not evicted", i);
    PT_ASSERT(ccoip_master_num_accepted(smh_master(h)) == 3, "three accepted");
    PT_ASSERT(smh_log_count(h, "2 of 3 members") == 0 && smh_log_count(h, "1 of 3 members") == 1,
              "logged once");
    uint64_t cc[3];
    for (uint32_t i = 0; i < 3; i++) {
        ccoip_allreduce_args a = ar_args(1, 4);
        cc[i] = smh_allreduce(h, i, &a, in[i], out[i]);
    }
    smh_run(h);
    for (uint32_t i = 0; i < 3; i++) {
        uint32_t world = 0;
        PT_ASSERT(smh_done_ex(h, i, cc[i], &r, &world, NULL) && r == pcclSuccess && world == 3,
                  "peer %u: next all-reduce succeeds (r=%d world=%u)", i, (int)r, world);
        PT_ASSERT(out[i][0] == 111 && out[i][3] == 444, "peer %u: the sum", i);
    }
    smh_destroy(h);
}

/* A collective initiate the peer's own checks would never send: injected as peer `peer`'s, with a
 * call id its core never used. */
static void inject_initiate(smh *h, uint32_t peer, uint64_t tag, int32_t dtype, int32_t op)
{
    ccoip_pb_peer_to_master env;
    memset(&env, 0, sizeof(env));
    env.call_id = UINT64_C(1) << 40;
    env.body_case = CCOIP_PB_PEER_TO_MASTER_BODY_COLLECTIVE_INITIATE;
    env.body.collective_initiate.tag = tag;
    env.body.collective_initiate.count = 4;
    env.body.collective_initiate.dtype = dtype;
    env.body.collective_initiate.op = op;
    uint8_t buf[256];
    uint64_t len = 0;
    PT_ASSERT(ccoip_ctrl_encode_p2m(&env, NULL, buf, sizeof(buf), &len) == pcclSuccess, "encode");
    smh_inject_to_master(h, peer, buf, len);
}

static uint32_t coll_mismatches(smh *h, uint32_t peer)
{
    return smh_master_sent(h, peer, CCOIP_PB_MASTER_TO_PEER_BODY_NONE,
                           CCOIP_PB_STATUS_INVALID_USAGE, CCOIP_PB_REASON_COLLECTIVE_MISMATCH);
}

/* Every member initiates a bitwise op on a float type (peers that skipped the submit check):
 * the master has no kernel for it and refuses the collective as a parameter mismatch, to every
 * member. The same initiates with an integer type are no mismatch. (The answers go to a call
 * the harness peers never made, so what the peers do with them is not the point here.) */
PTEST(hostile, bitwise_op_on_a_float_type_is_a_collective_mismatch)
{
    for (int integer = 0; integer < 2; integer++) {
        smh *h = ring3();
        for (uint32_t i = 0; i < 3; i++) {
            inject_initiate(h, i, 900,
                            integer ? CCOIP_PB_DATA_TYPE_INT32 : CCOIP_PB_DATA_TYPE_FLOAT,
                            CCOIP_PB_RED_OP_BXOR);
        }
        smh_run(h);
        for (uint32_t i = 0; i < 3; i++) {
            PT_ASSERT(coll_mismatches(h, i) == (integer ? 0u : 1u),
                      "%s: peer %u got %u mismatch refusals", integer ? "int32" : "float", i,
                      coll_mismatches(h, i));
        }
        smh_destroy(h);
    }
}

/* A majority still evicts its straggler: two of three initiate, the third is evicted at the
 * deadline, the two reduce. (Unchanged behaviour.) */
PTEST(hostile, majority_of_initiators_evicts_the_straggler)
{
    smh *h = ring3();
    int32_t in[2][4] = {{1, 2, 3, 4}, {10, 20, 30, 40}}, out[2][4];
    uint64_t c[2];
    for (uint32_t i = 0; i < 2; i++) {
        ccoip_allreduce_args a = ar_args(5, 4);
        c[i] = smh_allreduce(h, i, &a, in[i], out[i]);
    }
    smh_advance(h, 5500 * MS);
    smh_run(h);
    PT_ASSERT(ccoip_peer_is_failed(smh_peer(h, 2)), "the straggler was evicted");
    for (uint32_t i = 0; i < 2; i++) {
        pcclResult_t r;
        PT_ASSERT(smh_done(h, i, c[i], &r) && (r == pcclSuccess || r == pcclRankConnectionLost),
                  "peer %u ends (r=%d)", i, (int)r);
        PT_ASSERT(!ccoip_peer_is_failed(smh_peer(h, i)), "peer %u stays", i);
    }
    smh_destroy(h);
}

/* One peer votes on the topology alone. Before: both others were evicted and the rogue's
 * update succeeded with world 1. Now: its update returns pcclInvalidUsage, nobody evicted. */
PTEST(hostile, rogue_topology_voter_gets_invalid_usage)
{
    smh *h = ring3();
    uint64_t u = smh_submit(h, 0, CCOIP_CMD_UPDATE_TOPOLOGY);
    smh_advance(h, 5500 * MS);
    pcclResult_t r;
    PT_ASSERT(smh_done(h, 0, u, &r) && r == pcclInvalidUsage, "rogue: pcclInvalidUsage (r=%d)",
              (int)r);
    for (uint32_t i = 0; i < 3; i++)
        PT_ASSERT(!ccoip_peer_is_failed(smh_peer(h, i)), "peer %u not evicted", i);
    uint64_t v[3];
    for (uint32_t i = 0; i < 3; i++)
        v[i] = smh_submit(h, i, CCOIP_CMD_UPDATE_TOPOLOGY);
    smh_run(h);
    for (uint32_t i = 0; i < 3; i++) {
        uint32_t world = 0;
        PT_ASSERT(smh_done_ex(h, i, v[i], &r, &world, NULL) && r == pcclSuccess && world == 3,
                  "peer %u: the next update succeeds (r=%d world=%u)", i, (int)r, world);
    }
    smh_destroy(h);
}

/* ------------------------------------------------------------------------ */
/* The peer's p2p listener (§8.1)                                            */
/* ------------------------------------------------------------------------ */

static ccoip_peer *bare_peer(void)
{
    ccoip_peer_config c;
    ccoip_peer_config_default(&c);
    c.master_url = "tcp://master";
    ccoip_peer *p = NULL;
    PT_ASSERT(ccoip_peer_create(&c, 1, &p) == pcclSuccess, "peer_create");
    ccoip_event ev;
    memset(&ev, 0, sizeof(ev));
    ev.type = CCOIP_EV_START;
    ev.now_ns = 1000;
    PT_ASSERT(ccoip_peer_step(p, &ev) == pcclSuccess, "START");
    ccoip_action a;
    while (ccoip_peer_poll(p, &a)) {
        if (a.type == CCOIP_ACT_LISTEN) ccoip_peer_set_port(p, a.listener, 7000 + a.listener, NULL);
    }
    return p;
}

/* True when stepping ev made p close conn. */
static bool peer_closes(ccoip_peer *p, const ccoip_event *ev, uint64_t conn)
{
    PT_ASSERT(ccoip_peer_step(p, ev) == pcclSuccess, "step");
    bool closed = false;
    ccoip_action a;
    while (ccoip_peer_poll(p, &a)) {
        if (a.type == CCOIP_ACT_CLOSE && a.conn == conn) closed = true;
    }
    return closed;
}

static ccoip_event accepted(uint64_t now, uint64_t conn)
{
    ccoip_event ev;
    memset(&ev, 0, sizeof(ev));
    ev.type = CCOIP_EV_CONN_UP;
    ev.now_ns = now;
    ev.conn = conn;
    ev.accepted = true;
    ev.listener = CCOIP_LISTENER_P2P;
    return ev;
}

/* A RECV at now on conn of the data frame h, encoded into buf (header only). */
static ccoip_event frame_in(uint64_t now, uint64_t conn, const ccoip_data_header *h,
                            uint8_t buf[CCOIP_DATA_HEADER_BYTES])
{
    PT_ASSERT(ccoip_data_header_encode(h, NULL, buf, CCOIP_DATA_HEADER_BYTES) == pcclSuccess,
              "encode");
    ccoip_event ev;
    memset(&ev, 0, sizeof(ev));
    ev.type = CCOIP_EV_RECV;
    ev.now_ns = now;
    ev.conn = conn;
    ev.data = buf;
    ev.len = CCOIP_DATA_HEADER_BYTES;
    return ev;
}

/* An accepted connection that never says HELLO is closed evict_ms later. Before: kept. */
PTEST(hostile, incoming_link_without_hello_is_closed)
{
    ccoip_peer *p = bare_peer();
    ccoip_event ev = accepted(2000, 900);
    PT_ASSERT(!peer_closes(p, &ev, 900), "accepted");
    PT_ASSERT(ccoip_peer_deadline_ns(p) == 2000 + 2000 * MS, "deadline at accept + evict_ms");
    memset(&ev, 0, sizeof(ev));
    ev.type = CCOIP_EV_TIMER;
    ev.now_ns = 2000 + 1999 * MS;
    PT_ASSERT(!peer_closes(p, &ev, 900), "open before the deadline");
    ev.now_ns = 2000 + 2000 * MS;
    PT_ASSERT(peer_closes(p, &ev, 900), "closed at accept + evict_ms");
    ccoip_peer_destroy(p);
}

/* A HELLO for epoch 2^64 - 1 is refused at once. Before: held (until a plan of that epoch). */
PTEST(hostile, hello_far_beyond_the_epoch_is_refused)
{
    ccoip_peer *p = bare_peer();
    ccoip_event ev = accepted(2000, 901);
    PT_ASSERT(!peer_closes(p, &ev, 901), "accepted");
    ccoip_data_header h;
    ccoip_data_header_init(&h, CCOIP_DATA_HELLO);
    h.epoch = UINT64_MAX;
    h.tag = 5;
    h.seq = 0; /* our id before hello: 0 */
    uint8_t buf[CCOIP_DATA_HEADER_BYTES];
    ev = frame_in(3000, 901, &h, buf);
    PT_ASSERT(peer_closes(p, &ev, 901), "refused at once");
    /* A HELLO one epoch ahead is still held (its dialer got the plan first). */
    ev = accepted(4000, 902);
    PT_ASSERT(!peer_closes(p, &ev, 902), "accepted");
    h.epoch = 1;
    ev = frame_in(5000, 902, &h, buf);
    PT_ASSERT(!peer_closes(p, &ev, 902), "held");
    ccoip_peer_destroy(p);
}

/* Admission: with every incoming slot held by silent connections, a new connection closes the
 * one waiting longest, not itself — the real predecessor (which says HELLO at once) gets in.
 * Before: "too many incoming links", the newcomer closed, the victim's ring never formed. The
 * same on the shared-state port (requesters are not locked out by idle connections). */
PTEST(hostile, silent_connections_make_room_for_new_ones)
{
    for (int state = 0; state < 2; state++) {
        ccoip_peer *p = bare_peer();
        const ccoip_listener l = state ? CCOIP_LISTENER_SHARED_STATE : CCOIP_LISTENER_P2P;
        /* P_ACC_MAX (pool of 1) plus one pair link per op (max_ops 16), and P_SS_MAX. */
        const uint32_t slots = state ? 8u : 8u + 16u;
        ccoip_event ev;
        for (uint32_t i = 0; i < slots; i++) {
            ev = accepted(2000 + i, 800 + i);
            ev.listener = l;
            PT_ASSERT(!peer_closes(p, &ev, 800 + i), "slot %u accepted", i);
        }
        ev = accepted(3000, 900);
        ev.listener = l;
        PT_ASSERT(ccoip_peer_step(p, &ev) == pcclSuccess, "step");
        bool closed_oldest = false, closed_new = false;
        ccoip_action a;
        while (ccoip_peer_poll(p, &a)) {
            if (a.type != CCOIP_ACT_CLOSE) continue;
            closed_oldest = closed_oldest || a.conn == 800;
            closed_new = closed_new || a.conn == 900;
        }
        PT_ASSERT(closed_oldest && !closed_new, "%s: the oldest silent connection made room",
                  state ? "shared state" : "p2p");
        ccoip_peer_destroy(p);
    }
}

/* A stranger's pair HELLO (send / recv, docs/protocol.md §8.5) for no receive of ours: held like
 * a ring HELLO for a coming plan, closed at accept + evict_ms; one naming another peer or a
 * chunk other than 0 is closed at once; held ones give way to newcomers when every slot is
 * taken (admission). */
PTEST(hostile, stray_pair_hellos_are_bounded)
{
    ccoip_peer *p = bare_peer();
    ccoip_data_header h;
    ccoip_data_header_init(&h, CCOIP_DATA_HELLO);
    h.epoch = 1;
    h.tag = 77;
    h.seq = 0; /* our id before hello: 0 */
    h.step = CCOIP_DATA_PAIR_STEP;
    h.offset = 12345;
    uint8_t buf[CCOIP_DATA_HEADER_BYTES];
    ccoip_event ev;
    /* Another peer named, then a chunk other than 0: closed at once. */
    for (int k = 0; k < 2; k++) {
        ev = accepted(2000, 950 + (uint64_t)k);
        PT_ASSERT(!peer_closes(p, &ev, 950 + (uint64_t)k), "accepted");
        ccoip_data_header bad = h;
        if (k == 0) bad.seq = 99;
        if (k == 1) bad.chunk = 1;
        ev = frame_in(3000, 950 + (uint64_t)k, &bad, buf);
        PT_ASSERT(peer_closes(p, &ev, 950 + (uint64_t)k), "bad pair HELLO %d closed at once", k);
    }
    /* Every slot (8 + 16) filled with held pair HELLOs. */
    const uint32_t slots = 8u + 16u;
    for (uint32_t i = 0; i < slots; i++) {
        ev = accepted(4000 + i, 1000 + i);
        PT_ASSERT(!peer_closes(p, &ev, 1000 + i), "slot %u accepted", i);
        ev = frame_in(4000 + i, 1000 + i, &h, buf);
        PT_ASSERT(!peer_closes(p, &ev, 1000 + i), "pair HELLO %u held", i);
    }
    /* A newcomer makes room: the oldest held one goes, not the newcomer. */
    ev = accepted(6000, 2000);
    PT_ASSERT(ccoip_peer_step(p, &ev) == pcclSuccess, "step");
    bool closed_oldest = false, closed_new = false;
    ccoip_action a;
    while (ccoip_peer_poll(p, &a)) {
        if (a.type != CCOIP_ACT_CLOSE) continue;
        closed_oldest = closed_oldest || a.conn == 1000;
        closed_new = closed_new || a.conn == 2000;
    }
    PT_ASSERT(closed_oldest && !closed_new, "the oldest held pair HELLO made room");
    /* The rest are closed at their accept + evict_ms. */
    memset(&ev, 0, sizeof(ev));
    ev.type = CCOIP_EV_TIMER;
    ev.now_ns = 4001 + 1999 * MS;
    PT_ASSERT(!peer_closes(p, &ev, 1001), "held before its deadline");
    ev.now_ns = 4001 + 2000 * MS;
    PT_ASSERT(peer_closes(p, &ev, 1001), "closed at accept + evict_ms");
    ccoip_peer_destroy(p);
}

/* A stranger's STATE_OFFER (docs/protocol.md §8.3) on the shared-state port of a peer that awaits
 * no offer (no sync of ours named a distributor that dials) is refused at once: the connection
 * is closed, never used for a fetch. The same for a reversed-link HELLO (tag = our id) naming a
 * successor we have no plan for. */
PTEST(hostile, stray_state_offer_is_refused)
{
    ccoip_peer *p = bare_peer();
    ccoip_event ev = accepted(2000, 950);
    ev.listener = CCOIP_LISTENER_SHARED_STATE;
    PT_ASSERT(!peer_closes(p, &ev, 950), "accepted");
    ccoip_data_header h;
    ccoip_data_header_init(&h, CCOIP_DATA_STATE_OFFER);
    h.epoch = 1;
    h.tag = 5;
    h.seq = 0;
    uint8_t buf[CCOIP_DATA_HEADER_BYTES];
    ev = frame_in(3000, 950, &h, buf);
    PT_ASSERT(peer_closes(p, &ev, 950), "a STATE_OFFER nobody awaits is refused");
    ev = accepted(4000, 951);
    PT_ASSERT(!peer_closes(p, &ev, 951), "accepted");
    ccoip_data_header_init(&h, CCOIP_DATA_HELLO);
    h.epoch = 0;
    h.tag = 0; /* our id before hello: 0 — a HELLO for a reversed link from us */
    h.seq = 7;
    ev = frame_in(5000, 951, &h, buf);
    PT_ASSERT(peer_closes(p, &ev, 951), "a reversed HELLO without a plan is refused");
    ccoip_peer_destroy(p);
}

/* True when stepping ev made m close conn. */
static bool master_closes(ccoip_master *m, const ccoip_event *ev, uint64_t conn)
{
    PT_ASSERT(ccoip_master_step(m, ev) == pcclSuccess, "step");
    bool closed = false;
    ccoip_action a;
    while (ccoip_master_poll(m, &a)) {
        if (a.type == CCOIP_ACT_CLOSE && a.conn == conn) closed = true;
    }
    return closed;
}

/* The master's relay port (docs/protocol.md §8.6) to a stranger: without a relay every connection
 * is closed at once; with one, a join for a link the current plan does not relay is closed at
 * once, a connection that says nothing is closed evict_ms after it came, and the connections
 * held at most are bounded (M_SPLICE_MAX: the oldest silent one makes room). */
PTEST(hostile, stranger_on_the_relay_port)
{
    ccoip_master *m = bare_master(16);
    ccoip_event ev;
    memset(&ev, 0, sizeof(ev));
    ev.type = CCOIP_EV_CONN_UP;
    ev.accepted = true;
    ev.listener = CCOIP_MASTER_LISTENER_RELAY;
    ev.now_ns = 1000;
    ev.conn = 700;
    PT_ASSERT(master_closes(m, &ev, 700), "no relay: closed at once");
    ccoip_master_set_relay_port(m, 41000);
    ev.conn = 701;
    PT_ASSERT(!master_closes(m, &ev, 701), "relay: accepted");
    ccoip_data_header h;
    ccoip_data_header_init(&h, CCOIP_DATA_RELAY_JOIN);
    h.epoch = 0;
    h.tag = 5;
    h.seq = 6;
    uint8_t buf[CCOIP_DATA_HEADER_BYTES];
    ccoip_event rx = frame_in(2000, 701, &h, buf);
    PT_ASSERT(master_closes(m, &rx, 701), "a join for a link nobody relays: closed at once");
    ev.conn = 702;
    ev.now_ns = 3000;
    PT_ASSERT(!master_closes(m, &ev, 702), "accepted");
    ccoip_event t;
    memset(&t, 0, sizeof(t));
    t.type = CCOIP_EV_TIMER;
    t.now_ns = 3000 + 1999 * MS;
    PT_ASSERT(!master_closes(m, &t, 702), "open before evict_ms");
    t.now_ns = 3000 + 2000 * MS;
    PT_ASSERT(master_closes(m, &t, 702), "silent: closed at evict_ms");
    for (uint32_t i = 0; i < 64; i++) {
        ev.conn = 800 + i;
        ev.now_ns = 5000 * MS + i;
        PT_ASSERT(!master_closes(m, &ev, 800 + i), "slot %u", i);
    }
    ev.conn = 900;
    ev.now_ns = 6000 * MS;
    PT_ASSERT(ccoip_master_step(m, &ev) == pcclSuccess, "step");
    bool oldest = false, newest = false;
    ccoip_action a;
    while (ccoip_master_poll(m, &a)) {
        if (a.type != CCOIP_ACT_CLOSE) continue;
        oldest = oldest || a.conn == 800;
        newest = newest || a.conn == 900;
    }
    PT_ASSERT(oldest && !newest, "full: the oldest silent connection made room");
    ccoip_master_destroy(m);
}
