/*
 * fuzz_peer — arbitrary event sequences into ccoip_peer_step (docs/core.md
 * §3). The input is a little program: each opcode byte picks an event.
 * The harness plays the driver, the master and the other peers: it records
 * what the peer sends (calls to the master, data frames, connections it
 * dials, I/O and kernels it issues) so that the fuzzer can answer them with
 * well-formed frames built from the following bytes (hello and join results,
 * topology plans and verdicts, collective commence/verdict, shared-state
 * verdicts with outdated keys, probe requests, optimize verdicts; p2p HELLO /
 * HELLO_ACK, STATE_REQUEST and STATE_RESPONSE frames of other peers) and
 * complete its I/O, as well as with raw bytes and garbage events.
 * Properties checked after every step:
 *   - the step returns pcclSuccess, or pcclInvalidArgument exactly for the
 *     events the peer does not take; never pcclInternalError (queue bound);
 *   - every SEND is one well-formed frame: a PeerToMaster control frame on
 *     the master connection, a data frame (80-byte header + exactly its
 *     payload, STATE_REQUEST/STATE_RESPONSE payloads decodable) elsewhere;
 *   - every NOTIFY completes a command that was submitted and not yet
 *     completed, with a known result code; action types and op slots are
 *     in range; LOG text is NUL-terminated;
 *   - no assertion fires and ASan/UBSan stay quiet.
 * Corpus: corpus/peer/ (replayed by fuzz_replay_peer with gcc). FUZZ_VERBOSE=1
 * prints every action.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ccoip_frame.h"
#include "ccoip_peer.h"
#include "ccoip_ring.h"
#include "fuzz_common.h"

#define FZ_MAX_OPS 4u
#define FZ_CALLS   64u
#define FZ_IOS     128u
#define FZ_CONNS   32u
#define FZ_CMDS    64u
#define FZ_KEYS    4u

typedef struct fz {
    const uint8_t *d;
    size_t n, i;
} fz;

static uint8_t fz_byte(fz *f)
{
    return f->i < f->n ? f->d[f->i++] : 0;
}

/* A call the peer made to the master, not answered yet by the harness. */
typedef struct fz_call {
    uint64_t call_id;
    int body;
    uint64_t epoch, tag, seq, revision;
} fz_call;

typedef struct fz_io {
    uint64_t io_id;
    ccoip_action_type type;
    ccoip_quant_meta quant;
    pcclDataType_t dtype;
    uint32_t op_slot;
} fz_io;

/* A connection the peer dialed (or that the harness accepted for it). */
typedef struct fz_conn {
    uint64_t conn;
    bool accepted, up;
    bool has_hello; /* the peer sent a HELLO on it (answer: HELLO_ACK) */
    ccoip_data_header hello;
    bool has_request; /* the peer sent a STATE_REQUEST on it (answer: STATE_RESPONSE) */
    uint64_t req_tag, req_seq, req_revision;
    uint32_t req_keys[FZ_KEYS]; /* key indices in request order */
    uint32_t req_nkeys;
    bool has_challenge; /* authenticated: the peer sent a CHALLENGE on it (accepted) */
    uint8_t challenge[CCOIP_AUTH_NONCE_BYTES];
} fz_conn;

/* Shared-state key names (sorted, as the peer sorts them). */
static const char *const fz_names[FZ_KEYS] = {"bias", "step", "w.0", "w.1"};

typedef struct fz_world {
    ccoip_peer *p;
    uint64_t now;
    fz_call calls[FZ_CALLS];
    uint32_t ncalls;
    fz_io ios[FZ_IOS];
    uint32_t nios;
    fz_conn conns[FZ_CONNS];
    uint32_t nconns;
    uint64_t cmds[FZ_CMDS];
    uint32_t ncmds;
    uint64_t next_cmd, next_accept, next_seq, next_round;
    /* What the harness told the peer (to build consistent answers). */
    uint64_t plan_epoch;
    uint64_t ring[8];
    uint32_t ring_n;
    uint64_t last_tag, last_seq;
    /* Shared state: the keys of the last SYNC submitted, and the last vote. */
    pcclDataType_t key_dtype[FZ_KEYS];
    uint64_t key_count[FZ_KEYS];
    uint64_t key_expected[FZ_KEYS];
    uint32_t key_mask;
    uint64_t sync_revision, sync_round;
    uint64_t sync_distributor; /* the last verdict's distributor (a STATE_OFFER names it) */
    bool listen_pending[3];
    /* Per op slot: the quantization the peer last asked for (QUANTIZE action). */
    ccoip_quant_meta slot_quant[FZ_MAX_OPS + 2u];
    /* Authenticated runs (one input in four): the peer's configuration and its Hello nonce, so
     * the harness answers with the master's real proof and plans carry link keys. */
    ccoip_auth_config auth;
    uint8_t hello_nonce[CCOIP_AUTH_NONCE_BYTES];
} fz_world;

static fz_world W;
static uint8_t fz_arena_mem[1 << 16];
static uint8_t fz_frame[1 << 14];
static int fz_verbose = -1;

static uint64_t fz_hash_value(uint8_t b)
{
    return 0x5000u + (b & 3u);
}

static fz_conn *fz_conn_find(uint64_t conn)
{
    for (uint32_t i = 0; i < W.nconns; i++) {
        if (W.conns[i].conn == conn) return &W.conns[i];
    }
    return NULL;
}

static fz_conn *fz_conn_add(uint64_t conn, bool accepted)
{
    fz_conn *c = fz_conn_find(conn);
    if (c != NULL) return c;
    if (W.nconns == FZ_CONNS) {
        memmove(&W.conns[0], &W.conns[1], (FZ_CONNS - 1u) * sizeof(fz_conn));
        W.nconns--;
    }
    c = &W.conns[W.nconns++];
    memset(c, 0, sizeof(*c));
    c->conn = conn;
    c->accepted = accepted;
    return c;
}

static void fz_conn_drop(uint64_t conn)
{
    for (uint32_t i = 0; i < W.nconns; i++) {
        if (W.conns[i].conn == conn) {
            W.conns[i] = W.conns[--W.nconns];
            return;
        }
    }
}

static int fz_key_index(const uint8_t *name, uint64_t len)
{
    for (int k = 0; k < (int)FZ_KEYS; k++) {
        if (strlen(fz_names[k]) == len && memcmp(fz_names[k], name, (size_t)len) == 0) return k;
    }
    return -1;
}

/* A SEND on a p2p / shared-state connection: one data frame, exactly. */
static void fz_check_data_send(const ccoip_action *a)
{
    ccoip_data_header h;
    FUZZ_CHECK(a->data != NULL && a->len >= CCOIP_DATA_HEADER_BYTES);
    FUZZ_CHECK(ccoip_data_header_decode(a->data, a->len, NULL, &h) == pcclSuccess);
    FUZZ_CHECK(a->len == CCOIP_DATA_HEADER_BYTES + h.length);
    fz_conn *c = fz_conn_find(a->conn);
    const uint8_t *pl = a->data + CCOIP_DATA_HEADER_BYTES;
    ccoip_pb_arena arena;
    ccoip_pb_arena_init(&arena, fz_arena_mem, sizeof(fz_arena_mem));
    switch (h.kind) {
    case CCOIP_DATA_HELLO:
        if (c != NULL) {
            c->has_hello = true;
            c->hello = h;
        }
        break;
    case CCOIP_DATA_HELLO_ACK:
        break;
    case CCOIP_DATA_STATE_OFFER: /* a distributor that dials (§8.3) */
    case CCOIP_DATA_RELAY_JOIN:  /* a relayed link's end (§8.6) */
        FUZZ_CHECK(h.length == (ccoip_auth_on(&W.auth) ? CCOIP_DATA_PROOF_BYTES : 0u));
        break;
    case CCOIP_DATA_CHALLENGE:
        FUZZ_CHECK(ccoip_auth_on(&W.auth) && h.length == 0);
        if (c != NULL) {
            c->has_challenge = true;
            ccoip_auth_nonce_from_u64(h.tag, h.seq, c->challenge);
        }
        break;
    case CCOIP_DATA_STATE_REQUEST: {
        ccoip_pb_shared_state_request rq;
        FUZZ_CHECK(ccoip_pb_shared_state_request_decode(pl, h.length, NULL, &arena, &rq) ==
                   pcclSuccess);
        if (c != NULL) {
            c->has_request = true;
            c->req_tag = h.tag;
            c->req_seq = h.seq;
            c->req_revision = rq.revision;
            c->req_nkeys = 0;
            for (uint64_t j = 0; j < rq.keys_count && c->req_nkeys < FZ_KEYS; j++) {
                int k = fz_key_index(rq.keys[j].data, rq.keys[j].len);
                FUZZ_CHECK(k >= 0); /* the peer only asks for keys it was given */
                c->req_keys[c->req_nkeys++] = (uint32_t)k;
            }
        }
        break;
    }
    case CCOIP_DATA_STATE_RESPONSE: {
        ccoip_pb_shared_state_response rs;
        FUZZ_CHECK(ccoip_pb_shared_state_response_decode(pl, h.length, NULL, &arena, &rs) ==
                   pcclSuccess);
        break;
    }
    default:
        FUZZ_CHECK(0); /* RING_CHUNK / STATE_DATA / probes are the driver's, not SENDs */
    }
}

static void fz_check_master_send(const ccoip_action *a)
{
    ccoip_pb_arena arena;
    ccoip_pb_peer_to_master env;
    ccoip_pb_arena_init(&arena, fz_arena_mem, sizeof(fz_arena_mem));
    FUZZ_CHECK(a->data != NULL && a->len >= CCOIP_CTRL_HEADER_BYTES);
    /* Contract v9: a relayed initiate goes on with its input span (the driver appends it):
     * decode the frame with stand-in bytes in its place. */
    static uint8_t whole[CCOIP_CTRL_HEADER_BYTES + (1u << 16) + CCOIP_RELAY_MAX_BYTES];
    const uint8_t *frame = a->data;
    uint64_t flen = a->len;
    if (a->src.length > 0) {
        FUZZ_CHECK(a->src.length <= CCOIP_RELAY_MAX_BYTES &&
                   a->len <= sizeof whole - a->src.length);
        FUZZ_CHECK(a->op_slot < FZ_MAX_OPS && a->src.region != CCOIP_REGION_SCRATCH);
        memcpy(whole, a->data, (size_t)a->len);
        memset(whole + a->len, 0x5a, (size_t)a->src.length);
        frame = whole;
        flen = a->len + a->src.length;
    }
    FUZZ_CHECK(ccoip_ctrl_decode_p2m(frame, flen, NULL, &arena, &env) == pcclSuccess);
    FUZZ_CHECK(env.body_case != CCOIP_PB_PEER_TO_MASTER_BODY_NONE);
    if (a->src.length > 0) {
        FUZZ_CHECK(env.body_case == CCOIP_PB_PEER_TO_MASTER_BODY_COLLECTIVE_INITIATE &&
                   env.body.collective_initiate.relay &&
                   env.body.collective_initiate.relay_data.len == a->src.length &&
                   env.body.collective_initiate.relay_data.data[0] == 0x5a);
    }
    if (fz_verbose)
        fprintf(stderr, "  -> master call=%llu body=%d\n", (unsigned long long)env.call_id,
                (int)env.body_case);
    if (env.body_case == CCOIP_PB_PEER_TO_MASTER_BODY_HELLO &&
        env.body.hello.nonce.len == CCOIP_AUTH_NONCE_BYTES) {
        memcpy(W.hello_nonce, env.body.hello.nonce.data, CCOIP_AUTH_NONCE_BYTES);
    }
    if (env.call_id == 0) return;
    if (W.ncalls == FZ_CALLS) {
        memmove(&W.calls[0], &W.calls[1], (FZ_CALLS - 1u) * sizeof(fz_call));
        W.ncalls--;
    }
    fz_call *c = &W.calls[W.ncalls++];
    memset(c, 0, sizeof(*c));
    c->call_id = env.call_id;
    c->body = (int)env.body_case;
    switch (env.body_case) {
    case CCOIP_PB_PEER_TO_MASTER_BODY_P2P_ESTABLISHED:
        c->epoch = env.body.p2p_established.epoch;
        break;
    case CCOIP_PB_PEER_TO_MASTER_BODY_COLLECTIVE_INITIATE:
        c->tag = env.body.collective_initiate.tag;
        break;
    case CCOIP_PB_PEER_TO_MASTER_BODY_COLLECTIVE_COMPLETE:
        c->tag = env.body.collective_complete.tag;
        c->seq = env.body.collective_complete.seq;
        break;
    case CCOIP_PB_PEER_TO_MASTER_BODY_SYNC_VOTE:
        c->revision = env.body.sync_vote.revision;
        W.sync_revision = c->revision;
        for (uint64_t j = 0; j < env.body.sync_vote.keys_count; j++) {
            const ccoip_pb_shared_state_key *k = &env.body.sync_vote.keys[j];
            FUZZ_CHECK(fz_key_index(k->name.data, k->name.len) >= 0);
            if (j > 0) { /* sorted, unique: the master evicts otherwise */
                const ccoip_pb_shared_state_key *q = &env.body.sync_vote.keys[j - 1u];
                FUZZ_CHECK(fz_key_index(q->name.data, q->name.len) <
                           fz_key_index(k->name.data, k->name.len));
            }
        }
        break;
    default:
        break;
    }
}

static void fz_track_io(const ccoip_action *a)
{
    if (W.nios == FZ_IOS) {
        memmove(&W.ios[0], &W.ios[1], (FZ_IOS - 1u) * sizeof(fz_io));
        W.nios--;
    }
    fz_io *io = &W.ios[W.nios++];
    io->io_id = a->io_id;
    io->type = a->type;
    io->quant = a->quant;
    io->dtype = a->dtype;
    io->op_slot = a->op_slot;
    if (a->type == CCOIP_ACT_QUANTIZE) W.slot_quant[a->op_slot] = a->quant;
}

static void fz_drain(void)
{
    ccoip_action a;
    while (ccoip_peer_poll(W.p, &a)) {
        if (fz_verbose && a.type != CCOIP_ACT_LOG)
            fprintf(stderr, "  act %d conn=%llx io=%llu slot=%u cmd=%llu res=%d\n", (int)a.type,
                    (unsigned long long)a.conn, (unsigned long long)a.io_id, a.op_slot,
                    (unsigned long long)a.cmd_id, (int)a.result);
        switch (a.type) {
        case CCOIP_ACT_SEND:
            if (a.conn == CCOIP_PEER_MASTER_CONN)
                fz_check_master_send(&a);
            else
                fz_check_data_send(&a);
            break;
        case CCOIP_ACT_CONNECT:
            FUZZ_CHECK(a.conn != CCOIP_CONN_NONE && a.conn < CCOIP_CONN_ACCEPTED_BASE);
            FUZZ_CHECK(a.ip_len == 0 || a.ip_len == 4 || a.ip_len == 16);
            FUZZ_CHECK(a.len < CCOIP_URL_MAX);
            fz_conn_add(a.conn, false);
            break;
        case CCOIP_ACT_LISTEN:
            FUZZ_CHECK((uint32_t)a.listener <= (uint32_t)CCOIP_LISTENER_BANDWIDTH);
            W.listen_pending[a.listener] = true;
            break;
        case CCOIP_ACT_CLOSE:
            fz_conn_drop(a.conn);
            break;
        case CCOIP_ACT_NOTIFY: {
            bool found = false;
            for (uint32_t i = 0; i < W.ncmds; i++) {
                if (W.cmds[i] == a.cmd_id) {
                    W.cmds[i] = W.cmds[--W.ncmds];
                    found = true;
                    break;
                }
            }
            FUZZ_CHECK(found); /* exactly one NOTIFY per submitted command */
            FUZZ_CHECK((uint32_t)a.result <= (uint32_t)pcclAuthenticationFailed);
            break;
        }
        case CCOIP_ACT_RING_SEND:
        case CCOIP_ACT_RING_RECV:
        case CCOIP_ACT_REDUCE:
        case CCOIP_ACT_COPY:
        case CCOIP_ACT_QUANTIZE:
        case CCOIP_ACT_DEQUANTIZE:
        case CCOIP_ACT_FINALIZE:
        case CCOIP_ACT_GATHER_REDUCE:
        case CCOIP_ACT_HASH:
        case CCOIP_ACT_STATE_SEND:
        case CCOIP_ACT_STATE_RECV:
        case CCOIP_ACT_PROBE:
            /* io_id 0: only a quiet RING_SEND (contract v8), which completes with nothing. */
            FUZZ_CHECK(a.io_id != 0 || a.type == CCOIP_ACT_RING_SEND);
            FUZZ_CHECK(a.op_slot < FZ_MAX_OPS + 2u);
            if (a.io_id == 0) break;
            if (a.type == CCOIP_ACT_PROBE) {
                FUZZ_CHECK(a.ip_len == 0 || a.ip_len == 4 || a.ip_len == 16);
                FUZZ_CHECK(a.len < CCOIP_URL_MAX);
            }
            fz_track_io(&a);
            break;
        case CCOIP_ACT_CANCEL:
        case CCOIP_ACT_OP_BEGIN:
        case CCOIP_ACT_OP_END:
            FUZZ_CHECK(a.op_slot < FZ_MAX_OPS + 2u);
            break;
        case CCOIP_ACT_WRITE: /* v9: a relayed result, the whole RECV of an all-reduce slot */
            FUZZ_CHECK(a.op_slot < FZ_MAX_OPS && a.dst.region == CCOIP_REGION_RECV);
            FUZZ_CHECK(a.data != NULL && a.len == a.dst.length && a.dst.offset == 0);
            FUZZ_CHECK(a.len > 0 && a.len <= CCOIP_RELAY_MAX_BYTES);
            break;
        case CCOIP_ACT_LOG:
            FUZZ_CHECK(a.data != NULL && a.data[a.len] == '\0');
            if (fz_verbose) fprintf(stderr, "  LOG %s\n", (const char *)a.data);
            break;
        default:
            FUZZ_CHECK(0);
        }
    }
    for (uint32_t l = 0; l < 3u; l++) {
        if (!W.listen_pending[l]) continue;
        W.listen_pending[l] = false;
        FUZZ_CHECK(ccoip_peer_set_port(W.p, (ccoip_listener)l, 4000u + l, NULL) == pcclSuccess);
    }
}

static void fz_step(ccoip_event *ev, bool known)
{
    if (ev->now_ns < W.now) ev->now_ns = W.now;
    W.now = ev->now_ns;
    if (fz_verbose)
        fprintf(stderr, "ev %d conn=%llx len=%llu\n", (int)ev->type, (unsigned long long)ev->conn,
                (unsigned long long)ev->len);
    pcclResult_t r = ccoip_peer_step(W.p, ev);
    if (known)
        FUZZ_CHECK(r == pcclSuccess);
    else
        FUZZ_CHECK(r == pcclSuccess || r == pcclInvalidArgument);
    fz_drain();
}

static void fz_recv(uint64_t conn, const uint8_t *data, uint64_t len)
{
    ccoip_event ev;
    memset(&ev, 0, sizeof(ev));
    ev.type = CCOIP_EV_RECV;
    ev.now_ns = W.now;
    ev.conn = conn;
    ev.data = data;
    ev.len = len;
    fz_step(&ev, true);
}

static void fz_send_m2p(ccoip_pb_master_to_peer *env)
{
    uint64_t len = 0;
    if (ccoip_ctrl_encode_m2p(env, NULL, fz_frame, sizeof(fz_frame), &len) != pcclSuccess) return;
    fz_recv(CCOIP_PEER_MASTER_CONN, fz_frame, len);
}

static void fz_send_data(uint64_t conn, const ccoip_data_header *h, const uint8_t *payload)
{
    if (ccoip_data_header_encode(h, NULL, fz_frame, sizeof(fz_frame)) != pcclSuccess) return;
    if (h->length > sizeof(fz_frame) - CCOIP_DATA_HEADER_BYTES) return;
    if (h->length > 0) memcpy(fz_frame + CCOIP_DATA_HEADER_BYTES, payload, (size_t)h->length);
    fz_recv(conn, fz_frame, CCOIP_DATA_HEADER_BYTES + h->length);
}

/* A connection to use: the master, a dialed or accepted one, or an unknown id. */
static uint64_t fz_pick_conn(fz *f)
{
    uint8_t b = fz_byte(f);
    if (b < 0x20u) return CCOIP_PEER_MASTER_CONN;
    if (b >= 0xF0u) return 2u + (b & 7u);
    if (W.nconns == 0) return CCOIP_PEER_MASTER_CONN;
    return W.conns[b % W.nconns].conn;
}

/* An endpoint: ip of 4 bytes mostly; sometimes a URL, none, or odd lengths. */
static uint8_t fz_ipbuf[4096];
/*
 * Endpoints include the inputs of two findings of this target, fixed in
 * opt_on_requests (core/peer_optimize.c): a probe target with a URL plus an
 * ip longer than 16 bytes overflowed p_probe.ip[16], and a URL-only target
 * (ip.data NULL) was a memcpy from NULL. Their reproducers are in
 * corpus/peer/ (peer_probe_target_*). FUZZ_PEER_NO_ODD_IPS=1 keeps odd ip
 * lengths within 1..16 bytes and gives URL-only probe targets a 4-byte ip.
 */
static int fz_known_bugs = -1;

static void fz_endpoint(fz *f, ccoip_pb_endpoint *ep, int32_t kind)
{
    static const char url[] = "tcp://10.0.0.2:7000";
    const uint8_t *ipbuf = fz_ipbuf;
    uint8_t b = fz_byte(f);
    memset(ep, 0, sizeof(*ep));
    ep->kind = kind;
    ep->port = 5000u + (b & 0x0Fu);
    switch (b >> 5) {
    case 5:
        ep->url.data = (const uint8_t *)url;
        ep->url.len = sizeof(url) - 1u;
        if (!fz_known_bugs && kind == CCOIP_PB_ENDPOINT_KIND_BANDWIDTH) {
            ep->ip.data = ipbuf;
            ep->ip.len = 4;
        }
        break;
    case 6:
        ep->ip.data = ipbuf;
        ep->ip.len = 16;
        break;
    case 7: /* URL plus an ip of an odd length (up to 3969 bytes) */
        ep->url.data = (const uint8_t *)url;
        ep->url.len = sizeof(url) - 1u;
        ep->ip.data = ipbuf;
        ep->ip.len = fz_known_bugs ? 1u + (uint64_t)(b & 31u) * 128u : 1u + (b & 15u);
        break;
    default:
        ep->ip.data = ipbuf;
        ep->ip.len = (b & 0x10u) && (b >> 5) == 4 ? 0u : 4u;
        break;
    }
}

static uint64_t fz_peer_id(void)
{
    uint64_t id = ccoip_peer_id(W.p);
    return id != 0 ? id : 1u;
}

/* A ring for the next plan: n peers, the peer itself at rank r. */
static void fz_make_ring(fz *f)
{
    uint8_t b = fz_byte(f);
    uint32_t n = 1u + (b & 3u);
    uint32_t r = (uint32_t)(b >> 2) % n;
    uint64_t self = fz_peer_id();
    uint64_t other = 100;
    for (uint32_t i = 0; i < n; i++)
        W.ring[i] = i == r ? self : other++;
    if ((b & 0xC0u) == 0xC0u && n > 1u) W.ring[(r + 1u) % n] = self; /* twice: invalid */
    W.ring_n = n;
}

static void fz_plan(fz *f, ccoip_pb_topology_plan *plan, ccoip_pb_peer_info *nb,
                    ccoip_pb_endpoint *eps)
{
    uint8_t b = fz_byte(f);
    fz_make_ring(f);
    W.plan_epoch = (b & 0x80u) ? W.plan_epoch : W.plan_epoch + 1u + (b & 1u);
    plan->epoch = W.plan_epoch;
    plan->ring = W.ring;
    plan->ring_count = W.ring_n;
    plan->has_world = (b & 2u) != 0;
    plan->world.peer_group = W.ring_n;
    plan->world.global = W.ring_n;
    plan->world.num_peer_groups = 1;
    plan->world.largest_peer_group = W.ring_n;
    uint32_t nn = 0;
    for (uint32_t i = 0; i < W.ring_n && nn < 2u; i++) {
        if (W.ring[i] == fz_peer_id()) continue;
        nb[nn].peer_id = W.ring[i];
        fz_endpoint(f, &eps[nn], CCOIP_PB_ENDPOINT_KIND_P2P);
        nb[nn].endpoints = &eps[nn];
        nb[nn].endpoints_count = (b & 4u) ? 0u : 1u;
        nn++;
    }
    plan->neighbours = nb;
    plan->neighbours_count = nn;
    /* Who dials which link (§6.4): reversed, relayed through the master (§8.6, with a port). */
    plan->dial = ((b >> 4) & 7u) | ((b & 1u) << 3);
    plan->relay_port = (b & 0x40u) ? 40000u : 0u;
    if (ccoip_auth_on(&W.auth) && (b & 8u) == 0) {
        static const uint8_t key[CCOIP_AUTH_KEY_BYTES] = {0x42};
        plan->pred_key.data = key;
        plan->pred_key.len = CCOIP_AUTH_KEY_BYTES;
        plan->succ_key.data = key;
        plan->succ_key.len = CCOIP_AUTH_KEY_BYTES;
        plan->group_key.data = key;
        plan->group_key.len = CCOIP_AUTH_KEY_BYTES;
    }
}

/* Answer call c (well-formed for its kind; the status byte may make it an error). */
static void fz_answer(fz *f, const fz_call *c)
{
    ccoip_pb_master_to_peer env;
    ccoip_pb_peer_info nb[2];
    ccoip_pb_endpoint eps[4];
    ccoip_pb_outdated_key ok[FZ_KEYS];
    ccoip_pb_probe_target tg[3];
    ccoip_pb_peer_info rcv;
    ccoip_pb_endpoint rcv_ep;
    memset(&rcv, 0, sizeof(rcv));
    memset(&rcv_ep, 0, sizeof(rcv_ep));
    memset(&env, 0, sizeof(env));
    memset(nb, 0, sizeof(nb));
    memset(ok, 0, sizeof(ok));
    memset(tg, 0, sizeof(tg));
    env.call_id = c->call_id;
    uint8_t st = fz_byte(f);
    if ((st & 0xE0u) == 0xE0u) env.status = 1 + (st & 7); /* an error status */
    switch (c->body) {
    case CCOIP_PB_PEER_TO_MASTER_BODY_HELLO:
        env.body_case = CCOIP_PB_MASTER_TO_PEER_BODY_HELLO;
        env.body.hello.version = 1;
        env.body.hello.peer_id = 1u + (st & 3u);
        env.body.hello.heartbeat_ms = 100;
        env.body.hello.evict_ms = (st & 0x10u) ? 50u : 1000u;
        if (ccoip_auth_on(&W.auth) && (st & 8u) == 0) {
            /* The master's proof over the peer's nonce (st & 4: a wrong one). */
            static uint8_t mnonce[CCOIP_AUTH_NONCE_BYTES], proof[CCOIP_AUTH_MAC_BYTES];
            memset(mnonce, st, sizeof(mnonce));
            const uint64_t id = env.body.hello.peer_id;
            ccoip_auth_mac(&W.auth, W.auth.run_key, "pccl master proof", W.hello_nonce,
                           CCOIP_AUTH_NONCE_BYTES, mnonce, sizeof(mnonce), &id, 1, proof);
            if (st & 4u) proof[0] ^= 1u;
            env.body.hello.nonce.data = mnonce;
            env.body.hello.nonce.len = sizeof(mnonce);
            env.body.hello.proof.data = proof;
            env.body.hello.proof.len = sizeof(proof);
        }
        break;
    case CCOIP_PB_PEER_TO_MASTER_BODY_JOIN:
        env.body_case = CCOIP_PB_MASTER_TO_PEER_BODY_JOIN;
        env.body.join.epoch = W.plan_epoch;
        env.body.join.has_world = (st & 1u) != 0;
        env.body.join.world.global = 1;
        env.body.join.world.peer_group = 1;
        break;
    case CCOIP_PB_PEER_TO_MASTER_BODY_UPDATE_TOPOLOGY:
        env.body_case = CCOIP_PB_MASTER_TO_PEER_BODY_TOPOLOGY_PLAN;
        fz_plan(f, &env.body.topology_plan, nb, eps);
        break;
    case CCOIP_PB_PEER_TO_MASTER_BODY_P2P_ESTABLISHED:
        env.body_case = CCOIP_PB_MASTER_TO_PEER_BODY_TOPOLOGY_VERDICT;
        env.body.topology_verdict.epoch = (st & 0x10u) ? c->epoch + 1u : c->epoch;
        env.body.topology_verdict.success = (st & 3u) != 0;
        env.body.topology_verdict.ring = W.ring;
        env.body.topology_verdict.ring_count = W.ring_n;
        env.body.topology_verdict.has_world = (st & 4u) != 0;
        env.body.topology_verdict.world.peer_group = W.ring_n;
        break;
    case CCOIP_PB_PEER_TO_MASTER_BODY_PENDING_PEERS:
        env.body_case = CCOIP_PB_MASTER_TO_PEER_BODY_PENDING_PEERS;
        env.body.pending_peers.pending = (st & 1u) != 0;
        env.body.pending_peers.num_pending = st & 1u;
        break;
    case CCOIP_PB_PEER_TO_MASTER_BODY_COLLECTIVE_INITIATE:
        env.body_case = CCOIP_PB_MASTER_TO_PEER_BODY_COLLECTIVE_COMMENCE;
        env.body.collective_commence.tag = (st & 0x10u) ? c->tag + 1u : c->tag;
        env.body.collective_commence.seq = ++W.next_seq;
        env.body.collective_commence.epoch = ccoip_peer_epoch(W.p);
        env.body.collective_commence.world_size =
            (st & 8u) ? W.ring_n + 1u : ccoip_peer_world_size(W.p);
        W.last_tag = c->tag;
        W.last_seq = W.next_seq;
        break;
    case CCOIP_PB_PEER_TO_MASTER_BODY_COLLECTIVE_COMPLETE:
        env.body_case = CCOIP_PB_MASTER_TO_PEER_BODY_COLLECTIVE_VERDICT;
        env.body.collective_verdict.tag = c->tag;
        env.body.collective_verdict.seq = c->seq;
        env.body.collective_verdict.aborted = (st & 3u) == 0;
        env.body.collective_verdict.reason = (st & 4u) ? 0 : (int32_t)(st & 0x0Fu);
        break;
    case CCOIP_PB_PEER_TO_MASTER_BODY_SYNC_VOTE: {
        ccoip_pb_shared_state_sync_verdict *v = &env.body.sync_verdict;
        uint8_t mask = fz_byte(f);
        env.body_case = CCOIP_PB_MASTER_TO_PEER_BODY_SYNC_VERDICT;
        v->popular_revision = (st & 0x10u) ? c->revision + 1u : c->revision;
        v->round = ++W.next_round;
        W.sync_round = v->round;
        uint64_t n = 0;
        for (uint32_t k = 0; k < FZ_KEYS; k++) {
            if ((mask & (1u << k)) == 0) continue;
            ok[n].name.data = (const uint8_t *)fz_names[k];
            ok[n].name.len = strlen(fz_names[k]);
            ok[n].expected_hash = fz_hash_value((uint8_t)(mask >> 4));
            ok[n].hash_type = (mask & 0x80u) && (st & 1u) ? 1 : 0;
            W.key_expected[k] = ok[n].expected_hash;
            n++;
        }
        v->outdated = n > 0;
        v->outdated_keys = ok;
        v->outdated_keys_count = n;
        v->distributor_peer = (st & 2u) ? fz_peer_id() : 100u;
        v->has_distributor = (st & 4u) == 0;
        fz_endpoint(f, &v->distributor, CCOIP_PB_ENDPOINT_KIND_SHARED_STATE);
        W.sync_distributor = v->distributor_peer;
        /* A distributor that accepts no connections (§8.3): it dials us and offers; or we are
         * one, told to dial receivers. */
        v->distributor_dials = (st & 0x20u) != 0;
        if (st & 0x40u) {
            rcv.peer_id = 100u + (st & 1u);
            fz_endpoint(f, &rcv_ep, CCOIP_PB_ENDPOINT_KIND_SHARED_STATE);
            rcv.endpoints = &rcv_ep;
            rcv.endpoints_count = (st & 0x80u) ? 0u : 1u;
            v->dial_receivers = &rcv;
            v->dial_receivers_count = 1;
        }
        break;
    }
    case CCOIP_PB_PEER_TO_MASTER_BODY_SYNC_DONE:
        env.body_case = CCOIP_PB_MASTER_TO_PEER_BODY_SYNC_DONE_VERDICT;
        env.body.sync_done_verdict.success = (st & 3u) != 0;
        break;
    case CCOIP_PB_PEER_TO_MASTER_BODY_OPTIMIZE_TOPOLOGY: {
        uint32_t n = st % 4u;
        env.body_case = CCOIP_PB_MASTER_TO_PEER_BODY_PROBE_REQUESTS;
        for (uint32_t i = 0; i < n; i++) {
            tg[i].peer_id = 100u + i;
            tg[i].has_endpoint = (st & 0x10u) == 0;
            tg[i].probe_bytes = (st & 4u) ? 0u : 4096u;
            fz_endpoint(f, &tg[i].endpoint, CCOIP_PB_ENDPOINT_KIND_BANDWIDTH);
        }
        env.body.probe_requests.epoch = W.plan_epoch;
        env.body.probe_requests.targets = tg;
        env.body.probe_requests.targets_count = n;
        break;
    }
    case CCOIP_PB_PEER_TO_MASTER_BODY_OPTIMIZE_DONE:
        env.body_case = CCOIP_PB_MASTER_TO_PEER_BODY_OPTIMIZE_VERDICT;
        env.body.optimize_verdict.success = (st & 3u) != 0;
        env.body.optimize_verdict.has_plan = (st & 4u) == 0;
        if (env.body.optimize_verdict.has_plan)
            fz_plan(f, &env.body.optimize_verdict.plan, nb, eps);
        break;
    default:
        env.body_case = CCOIP_PB_MASTER_TO_PEER_BODY_HEARTBEAT;
        break;
    }
    if ((st & 0xE0u) == 0xC0u) {                /* the wrong answer for the call */
        memset(&env.body, 0, sizeof(env.body)); /* no stale bytes under the other member */
        env.body_case = (ccoip_pb_master_to_peer_body_case)(CCOIP_PB_MASTER_TO_PEER_BODY_HELLO +
                                                            (int)(st & 0x0Fu) % 12);
    }
    fz_send_m2p(&env);
}

/* A notification (call_id 0) from the master. */
static void fz_notify(fz *f)
{
    ccoip_pb_master_to_peer env;
    ccoip_pb_peer_info nb[2];
    ccoip_pb_endpoint eps[2];
    memset(&env, 0, sizeof(env));
    memset(nb, 0, sizeof(nb));
    uint8_t b = fz_byte(f);
    switch (b % 6u) {
    case 0:
        env.body_case = CCOIP_PB_MASTER_TO_PEER_BODY_TOPOLOGY_PLAN;
        fz_plan(f, &env.body.topology_plan, nb, eps);
        break;
    case 1:
        env.body_case = CCOIP_PB_MASTER_TO_PEER_BODY_COLLECTIVE_VERDICT;
        env.body.collective_verdict.tag = (b & 0x40u) ? W.last_tag + 1u : W.last_tag;
        env.body.collective_verdict.seq = W.last_seq;
        env.body.collective_verdict.aborted = (b & 0x80u) == 0;
        env.body.collective_verdict.reason = (b & 0x20u) ? 0 : 12;
        break;
    case 2:
        env.body_case = CCOIP_PB_MASTER_TO_PEER_BODY_SYNC_DONE_VERDICT;
        env.body.sync_done_verdict.success = false;
        break;
    case 3:
        env.body_case = CCOIP_PB_MASTER_TO_PEER_BODY_HEARTBEAT;
        env.body.heartbeat.counter = b;
        break;
    case 4:
        env.body_case = CCOIP_PB_MASTER_TO_PEER_BODY_EVICTION;
        env.body.eviction.reason = 3;
        break;
    default:
        env.body_case = CCOIP_PB_MASTER_TO_PEER_BODY_PENDING_PEERS;
        env.call_id = 1u + (b >> 4); /* an answer to a call that may never have been made */
        break;
    }
    fz_send_m2p(&env);
}

/* Completes an I/O or kernel the peer issued. */
static void fz_complete(fz *f)
{
    if (W.nios == 0) return;
    uint8_t b = fz_byte(f);
    uint8_t r = fz_byte(f);
    uint32_t i = b % W.nios;
    fz_io io = W.ios[i];
    W.ios[i] = W.ios[--W.nios];
    ccoip_event ev;
    memset(&ev, 0, sizeof(ev));
    ev.now_ns = W.now;
    switch (io.type) {
    case CCOIP_ACT_RING_SEND:
    case CCOIP_ACT_RING_RECV:
    case CCOIP_ACT_STATE_SEND:
    case CCOIP_ACT_STATE_RECV:
        ev.type = CCOIP_EV_IO_DONE;
        break;
    case CCOIP_ACT_PROBE:
        ev.type = CCOIP_EV_PROBE_DONE;
        break;
    default:
        ev.type = CCOIP_EV_KERNEL_DONE;
        break;
    }
    if ((r & 0xF0u) == 0xF0u) ev.type = (ccoip_event_type)(CCOIP_EV_IO_DONE + (r & 3u) % 3u);
    ev.done.io_id = io.io_id;
    ev.done.result = (r & 0x0Fu) == 0x0Fu ? pcclRankConnectionLost : pcclSuccess;
    ev.done.hash = fz_hash_value(r >> 4);
    ev.done.quant = io.quant;
    ev.done.quant_out = io.quant;
    if (io.type == CCOIP_ACT_QUANTIZE || io.type == CCOIP_ACT_RING_RECV) {
        /* Metadata as a real quantizer/sender would produce, sometimes broken. */
        ccoip_quant_meta *q = &ev.done.quant_out;
        *q = W.slot_quant[io.op_slot < FZ_MAX_OPS + 2u ? io.op_slot : 0u];
        if (q->algorithm == pcclQuantMinMax) {
            q->min_value = -1.0;
            q->max_value = (r & 0x20u) ? -2.0 : 1.0;
        } else if (q->algorithm == pcclQuantZeroPointScale) {
            q->scale = (r & 0x20u) ? 0.0 : 0.5;
            q->zero_point = (r & 0x40u) ? 1000 : 0;
        }
        if (io.type == CCOIP_ACT_RING_RECV) ev.done.quant = *q;
    }
    ev.done.probe_bytes = (r & 0x20u) ? 0u : ((uint64_t)1 << 20);
    ev.done.duration_us = 1000u + r;
    fz_step(&ev, true);
}

static void fz_submit(fz *f)
{
    ccoip_event ev;
    ccoip_state_key keys[FZ_KEYS];
    memset(&ev, 0, sizeof(ev));
    ev.type = CCOIP_EV_SUBMIT;
    ev.now_ns = W.now;
    uint8_t b = fz_byte(f);
    ev.cmd.type = (ccoip_cmd_type)(1u + b % 8u); /* 8: unknown */
    ev.cmd.cmd_id = ++W.next_cmd;
    switch (ev.cmd.type) {
    case CCOIP_CMD_ALL_REDUCE: {
        uint8_t x = fz_byte(f);
        uint8_t y = fz_byte(f);
        ev.cmd.allreduce.tag = x & 3u;
        /* Counts up to 15·10^6: chunks of megabytes are striped over a pool (§8.2). */
        ev.cmd.allreduce.count =
            (uint64_t)(y & 0x0Fu) * ((x & 0x80u) ? ((y & 0x02u) ? 1000000u : 1000u) : 1u);
        ev.cmd.allreduce.dtype = (pcclDataType_t)((y >> 4) % 13u);
        ev.cmd.allreduce.op = (pcclRedOp_t)((x >> 2) % 6u);
        ev.cmd.allreduce.quant_algorithm = (pcclQuantizationAlgorithm_t)((x >> 5) & 3u);
        ev.cmd.allreduce.quant_dtype = (x & 0x10u) ? pcclUint8 : pcclUint16;
        ev.cmd.allreduce.in_place = (y & 1u) != 0;
        break;
    }
    case CCOIP_CMD_SYNC_SHARED_STATE: {
        uint8_t mask = fz_byte(f);
        uint8_t t = fz_byte(f);
        uint32_t n = 0;
        for (uint32_t k = 0; k < FZ_KEYS; k++) {
            /* Submitted in reverse order: the peer sorts them. */
            uint32_t kk = FZ_KEYS - 1u - k;
            if ((mask & (1u << kk)) == 0) continue;
            keys[n].name = fz_names[kk];
            keys[n].dtype = (t & 0x80u) ? pcclFloat : pcclUint8;
            keys[n].count = 1u + (((uint32_t)t >> kk) & 3u);
            keys[n].allow_content_inequality = (mask & (0x10u << kk)) != 0;
            W.key_dtype[kk] = keys[n].dtype;
            W.key_count[kk] = keys[n].count;
            n++;
        }
        if ((t & 0x60u) == 0x60u && n > 0) keys[n - 1u].name = keys[0].name; /* duplicate */
        W.key_mask = mask & 0x0Fu;
        ev.cmd.sync.revision = t & 3u;
        ev.cmd.sync.strategy = (pcclSharedStateSyncStrategy_t)((t >> 2) % 4u); /* 3: invalid */
        ev.cmd.sync.num_keys = n;
        ev.cmd.sync.keys = keys;
        break;
    }
    default:
        break;
    }
    if (W.ncmds == FZ_CMDS) return; /* (never: the peer holds far fewer commands) */
    W.cmds[W.ncmds++] = ev.cmd.cmd_id;
    fz_step(&ev, true);
}

/* A data frame from another peer on conn (well-formed header; payload for state frames). */
static void fz_p2p_frame(fz *f)
{
    uint64_t conn = fz_pick_conn(f);
    fz_conn *c = fz_conn_find(conn);
    uint8_t b = fz_byte(f);
    ccoip_data_header h;
    uint8_t payload[1024];
    switch (b % 6u) {
    case 0: /* HELLO of our ring predecessor */
        ccoip_data_header_init(&h, CCOIP_DATA_HELLO);
        h.epoch = W.plan_epoch + ((b & 0x80u) ? 1u : 0u);
        h.seq = fz_peer_id();
        h.tag = 100;
        for (uint32_t i = 0; i < W.ring_n; i++) {
            if (W.ring[i] == fz_peer_id()) h.tag = W.ring[(i + W.ring_n - 1u) % W.ring_n];
        }
        if (b & 0x40u) h.tag++;
        if (b & 0x20u) { /* connection (b >> 1) & 3 of a pool of 2 or 3 (§8.1) */
            h.step = 2u + (b & 1u);
            h.chunk = (b >> 1) & 3u;
        }
        if (ccoip_auth_on(&W.auth) && c != NULL && c->has_challenge) {
            /* The proof over this connection's challenge with the plans' link key (§8.1);
             * b & 0x10: one bit wrong. */
            static const uint8_t key[CCOIP_AUTH_KEY_BYTES] = {0x42};
            const uint64_t v[5] = {h.epoch, h.tag, h.seq, h.chunk, h.step};
            ccoip_auth_mac(&W.auth, key, "pccl p2p hello", c->challenge, CCOIP_AUTH_NONCE_BYTES,
                           NULL, 0, v, 5, payload);
            if (b & 0x10u) payload[0] ^= 1u;
            h.length = CCOIP_DATA_PROOF_BYTES;
            fz_send_data(conn, &h, payload);
            break;
        }
        fz_send_data(conn, &h, fz_ipbuf); /* no payload */
        break;
    case 1: /* HELLO_ACK echoing the HELLO the peer sent on conn */
        if (ccoip_auth_on(&W.auth) && (b & 0x10u)) {
            /* Authenticated: the acceptor's CHALLENGE on a dialled connection (§8.0). */
            ccoip_data_header_init(&h, CCOIP_DATA_CHALLENGE);
            h.tag = W.now;
            h.seq = b;
            fz_send_data(conn, &h, fz_ipbuf);
            break;
        }
        ccoip_data_header_init(&h, CCOIP_DATA_HELLO_ACK);
        if (c != NULL && c->has_hello) {
            h.epoch = c->hello.epoch;
            h.tag = c->hello.tag;
            h.seq = c->hello.seq;
            if (b & 0x20u) { /* agree to the pool the HELLO offered (§8.1) */
                h.chunk = c->hello.chunk;
                h.step = c->hello.step;
            }
        }
        if (b & 0x40u) h.epoch++;
        fz_send_data(conn, &h, fz_ipbuf); /* no payload */
        break;
    case 2: { /* STATE_REQUEST of another peer */
        ccoip_pb_shared_state_request rq;
        ccoip_pb_bytes names[FZ_KEYS + 1u];
        uint8_t mask = fz_byte(f);
        memset(&rq, 0, sizeof(rq));
        uint64_t n = 0;
        for (uint32_t k = 0; k < FZ_KEYS; k++) {
            if ((mask & (1u << k)) == 0) continue;
            names[n].data = (const uint8_t *)fz_names[k];
            names[n].len = strlen(fz_names[k]);
            n++;
        }
        if ((mask & 0x10u) && n > 0) names[n++] = names[0]; /* a duplicate */
        rq.revision = (b & 0x40u) ? W.sync_revision + 1u : W.sync_revision;
        rq.round = (b & 0x80u) ? W.sync_round + 1u : W.sync_round;
        rq.keys = names;
        rq.keys_count = n;
        uint64_t len = 0;
        if (ccoip_pb_shared_state_request_encode(&rq, payload, sizeof(payload), &len) !=
            pcclSuccess)
            return;
        if (mask & 0x20u) len = len / 2u; /* truncated payload */
        ccoip_data_header_init(&h, CCOIP_DATA_STATE_REQUEST);
        h.tag = 100;
        h.seq = b;
        h.length = len;
        fz_send_data(conn, &h, payload);
        break;
    }
    case 3: { /* STATE_RESPONSE to the request the peer sent on conn */
        if ((c == NULL || !c->has_request) && (b & 0x08u)) {
            /* A STATE_OFFER of the distributor our verdict named (§8.3), or a stranger's. */
            ccoip_data_header_init(&h, CCOIP_DATA_STATE_OFFER);
            h.epoch = W.sync_round + ((b & 0x40u) ? 1u : 0u);
            h.tag = (b & 0x20u) ? 100u : W.sync_distributor;
            h.seq = fz_peer_id();
            if (ccoip_auth_on(&W.auth) && (b & 0x10u)) {
                memset(payload, b, CCOIP_DATA_PROOF_BYTES); /* a proof (wrong: no group key) */
                h.length = CCOIP_DATA_PROOF_BYTES;
            }
            fz_send_data(conn, &h, payload);
            break;
        }
        ccoip_pb_shared_state_response rs;
        ccoip_pb_shared_state_entry e[FZ_KEYS];
        uint8_t m = fz_byte(f);
        uint64_t tag = 0;
        memset(&rs, 0, sizeof(rs));
        memset(e, 0, sizeof(e));
        uint32_t n = 0;
        if (c != NULL && c->has_request) {
            for (uint32_t j = 0; j < c->req_nkeys; j++) {
                uint32_t k = c->req_keys[j];
                e[n].name.data = (const uint8_t *)fz_names[k];
                e[n].name.len = strlen(fz_names[k]);
                uint64_t es = W.key_dtype[k] == pcclFloat ? 4u : 1u;
                e[n].byte_length = W.key_count[k] * es + ((m & 0x10u) ? 1u : 0u);
                e[n].hash = W.key_expected[k] + ((m & 0x20u) ? 1u : 0u);
                n++;
            }
            rs.revision = c->req_revision;
            tag = c->req_tag;
        }
        if ((m & 0x40u) && n > 0) n--;
        rs.status = (m & 0x80u) ? 9 : 0;
        rs.entries = e;
        rs.entries_count = n;
        uint64_t len = 0;
        if (ccoip_pb_shared_state_response_encode(&rs, payload, sizeof(payload) - 1u, &len) !=
            pcclSuccess)
            return;
        ccoip_data_header_init(&h, CCOIP_DATA_STATE_RESPONSE);
        h.tag = tag;
        h.seq = c != NULL ? c->req_seq : 0u;
        h.length = (m & 0x08u) ? len + 1u : len; /* one byte too many announced */
        payload[len] = 0;
        fz_send_data(conn, &h, payload);
        break;
    }
    case 4: { /* a frame the driver should have kept (ring / state data, probes) */
        static const ccoip_data_kind kinds[4] = {CCOIP_DATA_RING_CHUNK, CCOIP_DATA_STATE_DATA,
                                                 CCOIP_DATA_PROBE_REQUEST, CCOIP_DATA_PROBE_DATA};
        ccoip_data_header_init(&h, kinds[(b >> 3) & 3u]);
        h.epoch = W.plan_epoch;
        h.tag = W.last_tag;
        h.seq = W.last_seq;
        h.length = (b & 0x80u) ? 8u : 0u;
        if (h.kind == CCOIP_DATA_PROBE_REQUEST) h.length = 0;
        memset(payload, 0, 8);
        fz_send_data(conn, &h, payload);
        break;
    }
    default: { /* a header with arbitrary fields, followed by raw bytes */
        uint8_t raw[CCOIP_DATA_HEADER_BYTES + 32u];
        memset(raw, 0, sizeof(raw));
        size_t len = fz_byte(f) % sizeof(raw);
        for (size_t i = 0; i < len && f->i < f->n; i++)
            raw[i] = fz_byte(f);
        ccoip_data_header_init(&h, (ccoip_data_kind)(1u + b % (CCOIP_DATA_KIND_END - 1u)));
        if (ccoip_data_header_encode(&h, NULL, raw, sizeof(raw)) == pcclSuccess && (b & 0x80u))
            len = CCOIP_DATA_HEADER_BYTES;
        fz_recv(conn, raw, len);
        break;
    }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (fz_verbose < 0) fz_verbose = getenv("FUZZ_VERBOSE") != NULL;
    if (fz_known_bugs < 0) fz_known_bugs = getenv("FUZZ_PEER_NO_ODD_IPS") == NULL;
    ccoip_peer_config cfg;
    ccoip_peer_config_default(&cfg);
    static const uint8_t master_ip[4] = {10, 0, 0, 1};
    memcpy(cfg.master_ip, master_ip, 4);
    memset(fz_ipbuf, 10, sizeof(fz_ipbuf));
    cfg.master_ip_len = 4;
    cfg.master_port = 48148;
    cfg.max_ops = FZ_MAX_OPS;
    cfg.max_world = 8;
    cfg.max_state_keys = FZ_KEYS;
    cfg.max_message_bytes = 1u << 16;               /* a smaller arena: faster runs */
    cfg.p2p_pool_size = 1u + (uint32_t)(size % 3u); /* pools of 1..3: striped steps too */
    memset(&W, 0, sizeof(W));
    /* A first byte 0xA5 (no older seed starts with it) makes the run authenticated. */
    const bool auth = size > 0 && data[0] == 0xA5u;
    if (auth) {
        /* An authenticated peer (docs/protocol.md §6.1.1, §8.0): every accepted connection is
         * challenged, HELLOs and requests carry proofs, the master must prove itself. */
        cfg.auth.mac = ccoip_auth_standin_mac;
        memset(cfg.auth.run_key, 0x5a, sizeof(cfg.auth.run_key));
        memset(cfg.auth.secret, 0xa5, sizeof(cfg.auth.secret));
        W.auth = cfg.auth;
    }
    W.now = 1;
    FUZZ_CHECK(ccoip_peer_create(&cfg, 11, &W.p) == pcclSuccess);
    fz f = {data, size, auth ? 1u : 0u};
    ccoip_event ev;
    memset(&ev, 0, sizeof(ev));
    ev.type = CCOIP_EV_START;
    ev.now_ns = W.now;
    fz_step(&ev, true);
    for (uint32_t guard = 0; f.i < f.n && guard < 4096u; guard++) {
        uint8_t op = fz_byte(&f);
        memset(&ev, 0, sizeof(ev));
        ev.now_ns = W.now;
        switch (op % 12u) {
        case 0: /* a connection the peer dialed (or the master's) comes up */
            ev.type = CCOIP_EV_CONN_UP;
            ev.conn = fz_pick_conn(&f);
            fz_step(&ev, true);
            break;
        case 1: /* a connection closes */
            ev.type = CCOIP_EV_CONN_CLOSED;
            ev.conn = fz_pick_conn(&f);
            fz_step(&ev, true);
            fz_conn_drop(ev.conn);
            break;
        case 2: { /* time passes (or jumps to the peer's deadline) */
            uint8_t b = fz_byte(&f);
            uint64_t d = ccoip_peer_deadline_ns(W.p);
            if (b == 0xFFu && d != CCOIP_NO_DEADLINE)
                W.now = d > W.now ? d : W.now;
            else
                W.now += (uint64_t)b * 10000000u;
            ev.type = CCOIP_EV_TIMER;
            ev.now_ns = W.now;
            fz_step(&ev, true);
            break;
        }
        case 3: { /* raw bytes on a connection */
            ev.type = CCOIP_EV_RECV;
            ev.conn = fz_pick_conn(&f);
            size_t len = fz_byte(&f);
            if (len > f.n - f.i) len = f.n - f.i;
            ev.data = f.d + f.i;
            ev.len = len;
            f.i += len;
            fz_step(&ev, true);
            break;
        }
        case 4: /* the master answers an outstanding call */
        case 5:
            if (W.ncalls > 0) {
                uint32_t i = fz_byte(&f) % W.ncalls;
                fz_call c = W.calls[i];
                W.calls[i] = W.calls[--W.ncalls];
                fz_answer(&f, &c);
            }
            break;
        case 6:
            fz_notify(&f);
            break;
        case 7:
        case 8:
            fz_complete(&f);
            break;
        case 9:
            fz_submit(&f);
            break;
        case 10: { /* the driver accepts a connection on a listener */
            uint8_t b = fz_byte(&f);
            ev.type = CCOIP_EV_CONN_UP;
            ev.accepted = true;
            ev.listener = b % 4u; /* 3: unknown */
            ev.conn = CCOIP_CONN_ACCEPTED_BASE + (++W.next_accept);
            ev.remote_ip_len = 4;
            ev.remote_ip[0] = 10;
            fz_conn_add(ev.conn, true);
            fz_step(&ev, true);
            break;
        }
        default: { /* p2p data frames, or events the peer does not take */
            uint8_t b = fz_byte(&f);
            if (b < 0xF0u) {
                fz_p2p_frame(&f);
            } else {
                ev.type = (ccoip_event_type)(b & 1u ? 0u : 10u + (b & 7u));
                if (b == 0xFEu) {
                    ev.type = CCOIP_EV_RECV; /* NULL data with a length */
                    ev.conn = CCOIP_PEER_MASTER_CONN;
                    ev.len = 4;
                }
                fz_step(&ev, false);
            }
            break;
        }
        }
    }
    ccoip_peer_destroy(W.p);
    W.p = NULL;
    return 0;
}
