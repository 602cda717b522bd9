/*
 * fuzz_master — arbitrary event sequences into ccoip_master_step
 * (docs/core.md §5). The input is a little program: each opcode byte picks
 * an event (connection up/closed, time passing, raw bytes, or a well-formed
 * PeerToMaster frame built from the following bytes, so that the fuzzer
 * reaches deep states: hello, join, votes, p2p reports at the current
 * epoch, initiates, completions, shared-state sync votes with keys and
 * sync done, topology optimization votes, bandwidth reports and done).
 * Opcodes below 0xF0 keep their original meaning (op % 8); 0xF0..0xFF are
 * the extended opcodes (see fz_extended). Properties checked after every step:
 *   - the step returns pcclSuccess or pcclInvalidArgument (for the events
 *     the master does not take); never pcclInternalError (no bound hit);
 *   - every SEND is one well-formed MasterToPeer control frame, and what a
 *     peer would reject in a successful answer never comes (fz_check_m2p:
 *     rings without duplicates naming the receiver once, probe targets
 *     other than the receiver, sync verdicts with a distributor other than
 *     the receiver when outdated, unique outdated keys, ...);
 *   - the deadline never lies in the past after a TIMER at it;
 *   - no assertion fires (remote input never reaches an assert).
 * Corpus: corpus/master/ (replayed by fuzz_replay_master with gcc).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ccoip_frame.h"
#include "ccoip_master.h"
#include "fuzz_common.h"

typedef struct fz {
    const uint8_t *d;
    size_t n, i;
} fz;

static uint8_t fz_byte(fz *f)
{
    return f->i < f->n ? f->d[f->i++] : 0;
}

static uint64_t fz_conn(fz *f)
{
    return CCOIP_CONN_ACCEPTED_BASE + 1u + (uint64_t)(fz_byte(f) % 8u);
}

static uint8_t fz_arena[1 << 16];
static uint8_t fz_frame[1 << 14];
/* FUZZ_VERBOSE=1 prints every action (to check what a seed reaches). */
static int fz_verbose = -1;

/* The peer id the master gave each connection (HelloResult), 0 when unknown. */
static uint64_t fz_ids[8];

static uint64_t *fz_id_of(uint64_t conn)
{
    uint64_t k = conn - CCOIP_CONN_ACCEPTED_BASE - 1u;
    return k < 8u ? &fz_ids[k] : NULL;
}

/* A ring names every member once; the receiver (when its id is known) exactly once. */
static void fz_check_ring(const uint64_t *ring, uint64_t n, uint64_t self)
{
    uint64_t seen = 0;
    for (uint64_t i = 0; i < n; i++) {
        FUZZ_CHECK(ring[i] != 0);
        for (uint64_t j = 0; j < i; j++)
            FUZZ_CHECK(ring[j] != ring[i]);
        if (ring[i] == self) seen++;
    }
    FUZZ_CHECK(self == 0 || seen == 1);
}

/* What a peer would reject in a successful answer is a master bug (docs/protocol.md §6). */
static void fz_check_m2p(uint64_t conn, const ccoip_pb_master_to_peer *env)
{
    uint64_t *idp = fz_id_of(conn);
    uint64_t self = idp != NULL ? *idp : 0;
    if (env->status != CCOIP_PB_STATUS_SUCCESS) return;
    switch (env->body_case) {
    case CCOIP_PB_MASTER_TO_PEER_BODY_HELLO:
        FUZZ_CHECK(env->body.hello.peer_id != 0);
        if (idp != NULL) *idp = env->body.hello.peer_id;
        break;
    case CCOIP_PB_MASTER_TO_PEER_BODY_TOPOLOGY_PLAN: {
        const ccoip_pb_topology_plan *pl = &env->body.topology_plan;
        if (pl->unchanged) break;
        FUZZ_CHECK(pl->ring_count >= 1);
        fz_check_ring(pl->ring, pl->ring_count, self);
        for (uint64_t k = 0; k < pl->neighbours_count; k++)
            FUZZ_CHECK(pl->neighbours[k].peer_id != self || self == 0);
        break;
    }
    case CCOIP_PB_MASTER_TO_PEER_BODY_TOPOLOGY_VERDICT:
        if (env->body.topology_verdict.success) {
            fz_check_ring(env->body.topology_verdict.ring, env->body.topology_verdict.ring_count,
                          self);
        }
        break;
    case CCOIP_PB_MASTER_TO_PEER_BODY_OPTIMIZE_VERDICT: {
        const ccoip_pb_optimize_topology_verdict *v = &env->body.optimize_verdict;
        if (v->success) FUZZ_CHECK(v->has_plan);
        if (v->has_plan && !v->plan.unchanged)
            fz_check_ring(v->plan.ring, v->plan.ring_count, self);
        break;
    }
    case CCOIP_PB_MASTER_TO_PEER_BODY_PROBE_REQUESTS:
        for (uint64_t k = 0; k < env->body.probe_requests.targets_count; k++) {
            const ccoip_pb_probe_target *t = &env->body.probe_requests.targets[k];
            FUZZ_CHECK(t->has_endpoint && t->peer_id != 0 && (self == 0 || t->peer_id != self));
        }
        break;
    case CCOIP_PB_MASTER_TO_PEER_BODY_SYNC_VERDICT: {
        const ccoip_pb_shared_state_sync_verdict *v = &env->body.sync_verdict;
        FUZZ_CHECK(v->outdated == (v->outdated_keys_count > 0));
        FUZZ_CHECK(v->outdated_keys_count <= 4u);
        if (v->outdated) {
            FUZZ_CHECK(v->has_distributor && v->distributor_peer != 0);
            FUZZ_CHECK(self == 0 || v->distributor_peer != self);
        }
        for (uint64_t k = 0; k < v->outdated_keys_count; k++) {
            FUZZ_CHECK(v->outdated_keys[k].name.len > 0 && v->outdated_keys[k].hash_type == 0);
            for (uint64_t j = 0; j < k; j++) {
                FUZZ_CHECK(v->outdated_keys[j].name.len != v->outdated_keys[k].name.len ||
                           memcmp(v->outdated_keys[j].name.data, v->outdated_keys[k].name.data,
                                  (size_t)v->outdated_keys[k].name.len) != 0);
            }
        }
        break;
    }
    case CCOIP_PB_MASTER_TO_PEER_BODY_COLLECTIVE_COMMENCE:
        FUZZ_CHECK(env->body.collective_commence.world_size >= 1);
        break;
    default:
        break;
    }
}

static void fz_check_actions(ccoip_master *m)
{
    ccoip_action a;
    while (ccoip_master_poll(m, &a)) {
        switch (a.type) {
        case CCOIP_ACT_SEND: {
            ccoip_pb_arena arena;
            ccoip_pb_master_to_peer env;
            ccoip_pb_arena_init(&arena, fz_arena, sizeof(fz_arena));
            FUZZ_CHECK(a.data != NULL && a.len >= CCOIP_CTRL_HEADER_BYTES);
            ccoip_data_header dh;
            if (a.len == CCOIP_DATA_HEADER_BYTES &&
                ccoip_data_header_decode(a.data, a.len, NULL, &dh) == pcclSuccess) {
                /* Only the relay's CHALLENGE is a data frame (authenticated runs, §8.6). */
                FUZZ_CHECK(dh.kind == CCOIP_DATA_CHALLENGE);
                break;
            }
            FUZZ_CHECK(ccoip_ctrl_decode_m2p(a.data, a.len, NULL, &arena, &env) == pcclSuccess);
            if (fz_verbose)
                fprintf(stderr, "SEND conn=%llx body=%d status=%d\n", (unsigned long long)a.conn,
                        (int)env.body_case, (int)env.status);
            fz_check_m2p(a.conn, &env);
            break;
        }
        case CCOIP_ACT_CLOSE:
            if (fz_verbose) fprintf(stderr, "CLOSE conn=%llx\n", (unsigned long long)a.conn);
            break;
        case CCOIP_ACT_SPLICE: /* the relay pairs two different connections (§8.6) */
            FUZZ_CHECK(a.conn != a.tag);
            break;
        case CCOIP_ACT_LOG:
            FUZZ_CHECK(a.data != NULL && a.data[a.len] == '\0');
            if (fz_verbose) fprintf(stderr, "LOG %s\n", (const char *)a.data);
            break;
        default:
            FUZZ_CHECK(0); /* the master emits nothing else */
        }
    }
}

static void fz_step(ccoip_master *m, const ccoip_event *ev)
{
    if (ev->type == CCOIP_EV_CONN_UP || ev->type == CCOIP_EV_CONN_CLOSED) {
        uint64_t *idp = fz_id_of(ev->conn);
        if (idp != NULL) *idp = 0; /* a new connection (the harness reuses ids) */
    }
    pcclResult_t r = ccoip_master_step(m, ev);
    FUZZ_CHECK(r == pcclSuccess || r == pcclInvalidArgument);
    fz_check_actions(m);
}

static void fz_send_frame(ccoip_master *m, uint64_t now, uint64_t conn,
                          const ccoip_pb_peer_to_master *env)
{
    uint64_t len = 0;
    if (ccoip_ctrl_encode_p2m(env, NULL, fz_frame, sizeof(fz_frame), &len) != pcclSuccess) return;
    ccoip_event ev;
    memset(&ev, 0, sizeof(ev));
    ev.type = CCOIP_EV_RECV;
    ev.now_ns = now;
    ev.conn = conn;
    ev.data = fz_frame;
    ev.len = len;
    fz_step(m, &ev);
}

/* Shared-state key names, sorted bytewise (the master wants sorted, unique keys). */
static const char *const fz_key_names[4] = {"bias", "step", "w.0", "w.1"};

/*
 * Extended opcodes 0xF0..0xFF (op & 7 picks the message):
 *   0 SharedStateSyncVote: conn, revision, strategy, key mask, then per key
 *     hash, dtype/count/allow_content_inequality byte
 *   1 SharedStateSyncDone: conn, success
 *   2 OptimizeTopologyVote: conn
 *   3 BandwidthReport: conn, n, then per sample to_peer, bytes, duration
 *   4 OptimizeTopologyDone: conn
 *   5 Join with all three endpoint kinds: conn, port, group
 *   6 SharedStateSyncVote with keys out of order or invalid: conn, variant
 *   7 TIMER at the master's own deadline (whatever it is)
 */
static void fz_extended(ccoip_master *m, fz *f, uint64_t *now, ccoip_pb_peer_to_master *env,
                        uint8_t op)
{
    ccoip_pb_shared_state_key keys[4];
    ccoip_pb_bandwidth_sample smp[4];
    ccoip_pb_endpoint eps[3];
    uint64_t conn;
    memset(keys, 0, sizeof(keys));
    memset(smp, 0, sizeof(smp));
    memset(eps, 0, sizeof(eps));
    switch (op & 7u) {
    case 0: {
        conn = fz_conn(f);
        env->body_case = CCOIP_PB_PEER_TO_MASTER_BODY_SYNC_VOTE;
        env->body.sync_vote.revision = fz_byte(f) % 4u;
        env->body.sync_vote.strategy = fz_byte(f) % 4; /* 3: unknown */
        uint8_t mask = fz_byte(f);
        uint64_t n = 0;
        for (uint32_t k = 0; k < 4u; k++) {
            if ((mask & (1u << k)) == 0) continue;
            ccoip_pb_shared_state_key *key = &keys[n++];
            uint8_t h = fz_byte(f);
            uint8_t t = fz_byte(f);
            key->name.data = (const uint8_t *)fz_key_names[k];
            key->name.len = strlen(fz_key_names[k]);
            key->hash = 0x1000u + h;
            key->dtype = t % 12u;
            key->count = 1u + ((t >> 4) & 3u);
            key->allow_content_inequality = (t & 0x40u) != 0;
        }
        env->body.sync_vote.keys = keys;
        env->body.sync_vote.keys_count = n;
        break;
    }
    case 1:
        conn = fz_conn(f);
        env->body_case = CCOIP_PB_PEER_TO_MASTER_BODY_SYNC_DONE;
        env->body.sync_done.success = (fz_byte(f) & 3u) != 0;
        env->body.sync_done.rx_bytes = 16;
        env->body.sync_done.tx_bytes = 16;
        break;
    case 2:
        conn = fz_conn(f);
        env->body_case = CCOIP_PB_PEER_TO_MASTER_BODY_OPTIMIZE_TOPOLOGY;
        break;
    case 3: {
        conn = fz_conn(f);
        uint64_t n = fz_byte(f) % 5u;
        for (uint64_t i = 0; i < n; i++) {
            uint8_t b = fz_byte(f);
            smp[i].to_peer = 1u + (b & 7u);
            smp[i].unreachable = (b & 0x80u) != 0;
            smp[i].bytes = (b & 0x40u) ? 0u : ((uint64_t)1 + fz_byte(f)) << 14;
            smp[i].duration_us = (uint64_t)fz_byte(f) * 97u;
        }
        env->call_id = 0; /* a notification */
        env->body_case = CCOIP_PB_PEER_TO_MASTER_BODY_BANDWIDTH_REPORT;
        env->body.bandwidth_report.samples = smp;
        env->body.bandwidth_report.samples_count = n;
        break;
    }
    case 4:
        conn = fz_conn(f);
        env->body_case = CCOIP_PB_PEER_TO_MASTER_BODY_OPTIMIZE_DONE;
        break;
    case 5: {
        conn = fz_conn(f);
        uint32_t port = 2000u + fz_byte(f);
        for (uint32_t k = 0; k < 3u; k++) {
            eps[k].kind = (int32_t)k;
            eps[k].port = port + k;
        }
        env->body_case = CCOIP_PB_PEER_TO_MASTER_BODY_JOIN;
        env->body.join.peer_group = fz_byte(f) % 2u;
        env->body.join.endpoints = eps;
        env->body.join.endpoints_count = 3;
        break;
    }
    case 6: {
        conn = fz_conn(f);
        uint8_t v = fz_byte(f) % 4u;
        env->body_case = CCOIP_PB_PEER_TO_MASTER_BODY_SYNC_VOTE;
        env->body.sync_vote.revision = 1;
        keys[0].name.data = (const uint8_t *)"w.1";
        keys[0].name.len = 3;
        keys[1].name.data = (const uint8_t *)(v == 0 ? "w.0" : "w.1"); /* unsorted / duplicate */
        keys[1].name.len = 3;
        keys[1].dtype = v == 2 ? 12 : 0;    /* unknown dtype */
        keys[1].hash_type = v == 3 ? 1 : 0; /* unknown hash type */
        env->body.sync_vote.keys = keys;
        env->body.sync_vote.keys_count = 2;
        break;
    }
    default: {
        ccoip_event ev;
        uint64_t d = ccoip_master_deadline_ns(m);
        if (d == CCOIP_NO_DEADLINE || d <= *now) return;
        *now = d;
        memset(&ev, 0, sizeof(ev));
        ev.type = CCOIP_EV_TIMER;
        ev.now_ns = *now;
        fz_step(m, &ev);
        return;
    }
    }
    fz_send_frame(m, *now, conn, env);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (fz_verbose < 0) fz_verbose = getenv("FUZZ_VERBOSE") != NULL;
    memset(fz_ids, 0, sizeof(fz_ids));
    ccoip_master_config cfg;
    ccoip_master_config_default(&cfg);
    cfg.max_peers = 8;
    cfg.max_ops = 4;
    cfg.vote_timeout_ms = 3000;
    cfg.max_message_bytes = 1u << 16; /* a smaller decode arena: faster runs */
    cfg.max_state_keys = 3;           /* a vote with all 4 keys of fz_key_names is over the limit */
    cfg.relay_max_bytes = 64;         /* master relay (§6.8.2): small, so inputs reach it */
    /* A first byte 0xA5 (no older seed starts with it) makes the run authenticated. */
    const bool auth = size > 0 && data[0] == 0xA5u;
    if (auth) {
        /* Authenticated (docs/protocol.md §6.1.1): Joins without the session's proof refused. */
        cfg.auth.mac = ccoip_auth_standin_mac;
        memset(cfg.auth.run_key, 0x5a, sizeof(cfg.auth.run_key));
        memset(cfg.auth.secret, 0xa5, sizeof(cfg.auth.secret));
    }
    ccoip_master *m = NULL;
    FUZZ_CHECK(ccoip_master_create(&cfg, 7, &m) == pcclSuccess);
    ccoip_master_set_relay_port(m, 40000); /* the relay (§8.6): strangers on its port too */
    fz f = {data, size, auth ? 1u : 0u};
    uint64_t now = 1, call = 1;
    ccoip_event ev;
    memset(&ev, 0, sizeof(ev));
    ev.type = CCOIP_EV_START;
    ev.now_ns = now;
    fz_step(m, &ev);
    for (uint32_t guard = 0; f.i < f.n && guard < 4096u; guard++) {
        uint8_t op = fz_byte(&f);
        memset(&ev, 0, sizeof(ev));
        ev.now_ns = now;
        ccoip_pb_peer_to_master env;
        memset(&env, 0, sizeof(env));
        env.call_id = call++;
        uint64_t u64s[4];
        ccoip_pb_endpoint ep;
        if (op >= 0xF0u) {
            fz_extended(m, &f, &now, &env, op);
            continue;
        }
        switch (op % 8u) {
        case 0:
            ev.type = CCOIP_EV_CONN_UP;
            ev.conn = fz_conn(&f);
            ev.accepted = true;
            ev.remote_ip_len = 4;
            ev.remote_ip[0] = 10;
            /* op bit 3: on the relay listener (docs/protocol.md §8.6) */
            if (op & 8u) ev.listener = CCOIP_MASTER_LISTENER_RELAY;
            fz_step(m, &ev);
            break;
        case 1:
            ev.type = CCOIP_EV_CONN_CLOSED;
            ev.conn = fz_conn(&f);
            fz_step(m, &ev);
            break;
        case 2: {
            now += (uint64_t)fz_byte(&f) * 10000000u;
            uint64_t d = ccoip_master_deadline_ns(m);
            ev.type = CCOIP_EV_TIMER;
            ev.now_ns = now;
            fz_step(m, &ev);
            if (d <= now) {
                /* Whatever was due has been handled. */
                FUZZ_CHECK(ccoip_master_deadline_ns(m) > now ||
                           ccoip_master_deadline_ns(m) == CCOIP_NO_DEADLINE ||
                           ccoip_master_deadline_ns(m) >= d);
            }
            break;
        }
        case 3: {
            ev.type = CCOIP_EV_RECV;
            ev.conn = fz_conn(&f);
            size_t len = fz_byte(&f);
            if (len > f.n - f.i) len = f.n - f.i;
            ev.data = f.d + f.i;
            ev.len = len;
            f.i += len;
            fz_step(m, &ev);
            break;
        }
        case 4: {
            uint64_t conn = fz_conn(&f);
            env.body_case = CCOIP_PB_PEER_TO_MASTER_BODY_HELLO;
            env.body.hello.min_version = 1;
            env.body.hello.max_version = 1u + (fz_byte(&f) & 1u);
            fz_send_frame(m, now, conn, &env);
            break;
        }
        case 5: {
            uint64_t conn = fz_conn(&f);
            memset(&ep, 0, sizeof(ep));
            ep.kind = CCOIP_PB_ENDPOINT_KIND_P2P;
            ep.port = 1000u + fz_byte(&f);
            env.body_case = CCOIP_PB_PEER_TO_MASTER_BODY_JOIN;
            env.body.join.peer_group = fz_byte(&f) % 2u;
            env.body.join.endpoints = &ep;
            env.body.join.endpoints_count = 1;
            fz_send_frame(m, now, conn, &env);
            break;
        }
        case 6: {
            uint64_t conn = fz_conn(&f);
            uint8_t sub = fz_byte(&f) % 7u;
            switch (sub) {
            case 0:
                env.body_case = CCOIP_PB_PEER_TO_MASTER_BODY_UPDATE_TOPOLOGY;
                env.body.update_topology.accept_new_peers = (fz_byte(&f) & 1u) == 0;
                break;
            case 1:
                env.body_case = CCOIP_PB_PEER_TO_MASTER_BODY_P2P_ESTABLISHED;
                env.body.p2p_established.epoch = ccoip_master_epoch(m);
                env.body.p2p_established.success = (fz_byte(&f) & 3u) != 0;
                if (!env.body.p2p_established.success) {
                    u64s[0] = 1u + fz_byte(&f) % 8u;
                    env.body.p2p_established.unreachable_peers = u64s;
                    env.body.p2p_established.unreachable_peers_count = 1;
                }
                break;
            case 2:
                env.body_case = CCOIP_PB_PEER_TO_MASTER_BODY_PENDING_PEERS;
                break;
            case 3:
                env.body_case = CCOIP_PB_PEER_TO_MASTER_BODY_COLLECTIVE_INITIATE;
                env.body.collective_initiate.tag = fz_byte(&f) % 4u;
                env.body.collective_initiate.count = fz_byte(&f) % 8u;
                env.body.collective_initiate.dtype = fz_byte(&f) % 12;
                env.body.collective_initiate.op = fz_byte(&f) % 5;
                break;
            case 4:
                env.body_case = CCOIP_PB_PEER_TO_MASTER_BODY_COLLECTIVE_COMPLETE;
                env.body.collective_complete.tag = fz_byte(&f) % 4u;
                env.body.collective_complete.seq = fz_byte(&f) % 8u;
                env.body.collective_complete.aborted = (fz_byte(&f) & 1u) != 0;
                if (fz_byte(&f) & 1u) env.call_id = 0;
                break;
            case 5:
                env.body_case = CCOIP_PB_PEER_TO_MASTER_BODY_HEARTBEAT;
                env.call_id = 0;
                break;
            default:
                env.body_case = CCOIP_PB_PEER_TO_MASTER_BODY_LEAVE;
                env.call_id = 0;
                break;
            }
            fz_send_frame(m, now, conn, &env);
            break;
        }
        default:
            /* Events the master does not take, and garbage types. */
            ev.type = (ccoip_event_type)(6u + fz_byte(&f) % 8u);
            ev.conn = fz_conn(&f);
            fz_step(m, &ev);
            break;
        }
    }
    ccoip_master_destroy(m);
    return 0;
}
