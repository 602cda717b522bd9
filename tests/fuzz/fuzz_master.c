/*
 * fuzz_master — arbitrary event sequences into ccoip_master_step
 * (docs/core.md §5). The input is a little program: each opcode byte picks
 * an event (connection up/closed, time passing, raw bytes, or a well-formed
 * PeerToMaster frame built from the following bytes, so that the fuzzer
 * reaches deep states: hello, join, votes, p2p reports at the current
 * epoch, initiates, completions). Properties checked after every step:
 *   - the step returns pcclSuccess or pcclInvalidArgument (for the events
 *     the master does not take); never pcclInternalError (no bound hit);
 *   - every SEND is one well-formed MasterToPeer control frame;
 *   - the deadline never lies in the past after a TIMER at it;
 *   - no assertion fires (remote input never reaches an assert).
 * Corpus: corpus/master/ (replayed by fuzz_replay_master with gcc).
 */
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
            FUZZ_CHECK(ccoip_ctrl_decode_m2p(a.data, a.len, NULL, &arena, &env) == pcclSuccess);
            break;
        }
        case CCOIP_ACT_CLOSE:
            break;
        case CCOIP_ACT_LOG:
            FUZZ_CHECK(a.data != NULL && a.data[a.len] == '\0');
            break;
        default:
            FUZZ_CHECK(0); /* the master emits nothing else */
        }
    }
}

static void fz_step(ccoip_master *m, const ccoip_event *ev)
{
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ccoip_master_config cfg;
    ccoip_master_config_default(&cfg);
    cfg.max_peers = 8;
    cfg.max_ops = 4;
    cfg.vote_timeout_ms = 3000;
    ccoip_master *m = NULL;
    FUZZ_CHECK(ccoip_master_create(&cfg, 7, &m) == pcclSuccess);
    fz f = {data, size, 0};
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
        switch (op % 8u) {
        case 0:
            ev.type = CCOIP_EV_CONN_UP;
            ev.conn = fz_conn(&f);
            ev.accepted = true;
            ev.remote_ip_len = 4;
            ev.remote_ip[0] = 10;
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
