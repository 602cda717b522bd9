/*
 * peer_state.c — shared-state synchronization on the peer
 * (docs/protocol.md §6.7, §8.3; docs/core.md §3.5): hash the tensors
 * (HASH kernels), vote, fetch the outdated tensors from the distributor into
 * scratch, verify every one, then adopt (COPY into the tensors), report;
 * and serve STATE_REQUESTs of other peers straight from the tensors.
 */
#include <string.h>

#include "ccoip_dtype.h"
#include "peer_internal.h"

static uint32_t state_slot(const ccoip_peer *p)
{
    return p->cfg.max_ops;
}

static ccoip_span_ref state_tensor(const ccoip_peer *p, const p_skey *k)
{
    ccoip_span_ref r;
    memset(&r, 0, sizeof(r));
    r.op_slot = state_slot(p);
    r.region = CCOIP_REGION_TENSOR;
    r.tensor = k->index;
    r.length = k->bytes;
    return r;
}

static ccoip_span_ref state_scratch(const ccoip_peer *p, const p_skey *k)
{
    ccoip_span_ref r;
    memset(&r, 0, sizeof(r));
    r.op_slot = state_slot(p) + 1u;
    r.region = CCOIP_REGION_SCRATCH;
    r.offset = k->scratch_off;
    r.length = k->bytes;
    return r;
}

static int state_name_cmp(const char *a, uint32_t alen, const uint8_t *b, uint64_t blen)
{
    uint64_t n = alen < blen ? alen : blen;
    int c = memcmp(a, b, (size_t)n);
    if (c != 0) return c;
    return alen < blen ? -1 : (alen > blen ? 1 : 0);
}

static p_skey *state_find(ccoip_peer *p, const uint8_t *name, uint64_t len)
{
    uint32_t lo = 0, hi = p->ss.nkeys;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2u;
        int c = state_name_cmp(p->ss.skeys[mid].name, p->ss.skeys[mid].name_len, name, len);
        if (c == 0) return &p->ss.skeys[mid];
        if (c < 0) {
            lo = mid + 1u;
        } else {
            hi = mid;
        }
    }
    return NULL;
}

/* Ends the command: CANCEL what may still touch its buffers, OP_END, NOTIFY. */
static void state_finish(ccoip_peer *p, pcclResult_t r)
{
    uint32_t s = state_slot(p);
    if (p->ss.scratch) {
        ccoip_action *a = sm_out_push(&p->out, CCOIP_ACT_CANCEL);
        if (a != NULL) a->op_slot = s + 1u;
        a = sm_out_push(&p->out, CCOIP_ACT_OP_END);
        if (a != NULL) a->op_slot = s + 1u;
    }
    if (p->ss.nsends > 0 || p->ss.io != 0) {
        ccoip_action *a = sm_out_push(&p->out, CCOIP_ACT_CANCEL);
        if (a != NULL) a->op_slot = s;
    }
    if (p->ss.conn_open) {
        ccoip_action *a = sm_out_push(&p->out, CCOIP_ACT_CLOSE);
        if (a != NULL) a->conn = p->ss.conn;
    }
    ccoip_action *a = sm_out_push(&p->out, CCOIP_ACT_OP_END);
    if (a != NULL) a->op_slot = s;
    a = sm_out_push(&p->out, CCOIP_ACT_NOTIFY);
    if (a != NULL) {
        a->cmd_id = p->ss.cmd;
        a->result = r;
        a->world_size = p->ring.world;
        a->op_slot = s;
        if (r == pcclSuccess) {
            a->rx_bytes = p->ss.rx;
            a->tx_bytes = p->ss.tx;
            a->revision = p->ss.popular;
        }
    }
    p_set_sync(p, PSS_NONE);
    p->ss.io = 0;
    p->ss.nsends = 0;
    p->ss.await_offer = false;
    p->ss.conn_open = false;
    p->ss.conn = CCOIP_CONN_NONE;
    p->ss.scratch = false;
    p->ss.nkeys = 0;
}

static void state_send_done(ccoip_peer *p, bool ok)
{
    ccoip_pb_peer_to_master env;
    memset(&env, 0, sizeof(env));
    env.call_id = p_call_new(p, PC_SYNC_DONE, 0);
    env.body_case = CCOIP_PB_PEER_TO_MASTER_BODY_SYNC_DONE;
    env.body.sync_done.success = ok;
    env.body.sync_done.rx_bytes = p->ss.rx;
    env.body.sync_done.tx_bytes = p->ss.tx;
    p_send(p, &env);
    p_set_sync(p, PSS_DONE_WAIT);
}

/* The fetch failed: the tensors were not touched (scratch only). Report and wait. */
void p_state_fetch_fail(ccoip_peer *p, const char *why)
{
    sm_log(&p->out, CCOIP_LOG_WARN, "peer %U: shared-state fetch failed: %s", p->id, why);
    p->ss.failed = true;
    p->ss.await_offer = false;
    ccoip_action *a = sm_out_push(&p->out, CCOIP_ACT_CANCEL);
    if (a != NULL) a->op_slot = state_slot(p) + 1u;
    if (p->ss.conn_open) {
        a = sm_out_push(&p->out, CCOIP_ACT_CLOSE);
        if (a != NULL) a->conn = p->ss.conn;
        p->ss.conn_open = false;
    }
    p->ss.io = 0;
    state_send_done(p, false);
}

static void state_hash(ccoip_peer *p, const p_skey *k, ccoip_span_ref src)
{
    ccoip_action *a = sm_out_push(&p->out, CCOIP_ACT_HASH);
    if (a == NULL) return;
    p->ss.io = p->next_io++;
    a->io_id = p->ss.io;
    a->op_slot = src.op_slot;
    a->src = src;
    a->data = (const uint8_t *)k->name;
    a->len = k->name_len;
    a->dtype = k->dtype;
    a->count = k->count;
}

static void state_vote(ccoip_peer *p)
{
    ccoip_pb_peer_to_master env;
    memset(&env, 0, sizeof(env));
    env.call_id = p_call_new(p, PC_SYNC_VOTE, 0);
    env.body_case = CCOIP_PB_PEER_TO_MASTER_BODY_SYNC_VOTE;
    env.body.sync_vote.revision = p->ss.rev;
    env.body.sync_vote.strategy = p->ss.strategy;
    for (uint32_t i = 0; i < p->ss.nkeys; i++) {
        const p_skey *k = &p->ss.skeys[i];
        ccoip_pb_shared_state_key *v = &p->ss.vkeys[i];
        memset(v, 0, sizeof(*v));
        v->name.data = (const uint8_t *)k->name;
        v->name.len = k->name_len;
        v->hash = k->hash;
        v->hash_type = CCOIP_PB_HASH_TYPE_XXH3_64;
        v->dtype = (int32_t)k->dtype;
        v->count = k->count;
        v->allow_content_inequality = k->aci;
    }
    env.body.sync_vote.keys = p->ss.vkeys;
    env.body.sync_vote.keys_count = p->ss.nkeys;
    p_send(p, &env);
    p_set_sync(p, PSS_VOTED);
}

/* Hashes key i (local tensors), or votes when all are hashed. */
static void state_hash_next(ccoip_peer *p, uint32_t i)
{
    p->ss.i = i;
    if (i >= p->ss.nkeys) {
        p->ss.io = 0;
        state_vote(p);
        return;
    }
    p_set_sync(p, PSS_HASHING);
    state_hash(p, &p->ss.skeys[i], state_tensor(p, &p->ss.skeys[i]));
}

pcclResult_t p_state_submit(ccoip_peer *p, const ccoip_cmd *cmd)
{
    const ccoip_sync_args *a = &cmd->sync;
    if (p->ss.st != PSS_NONE) return pcclInvalidUsage;
    if (a->num_keys > p->cfg.max_state_keys || (a->num_keys > 0 && a->keys == NULL) ||
        (uint32_t)a->strategy > (uint32_t)PCCL_SHARED_STATE_SYNC_STRATEGY_SEND_ONLY) {
        return pcclInvalidArgument;
    }
    /* Validate, then insert sorted by name (bytewise); duplicates are invalid. */
    uint32_t n = 0;
    for (uint32_t i = 0; i < a->num_keys; i++) {
        const ccoip_state_key *k = &a->keys[i];
        if (k->name == NULL || !ccoip_dtype_valid(k->dtype)) return pcclInvalidArgument;
        uint64_t len = 0;
        while (len < CCOIP_STATE_NAME_MAX && k->name[len] != '\0')
            len++;
        uint64_t es = ccoip_dtype_size(k->dtype);
        if (len == 0 || len >= CCOIP_STATE_NAME_MAX || k->count > UINT64_MAX / es) {
            return pcclInvalidArgument;
        }
        uint32_t pos = n;
        while (pos > 0 && state_name_cmp(p->ss.skeys[pos - 1u].name, p->ss.skeys[pos - 1u].name_len,
                                         (const uint8_t *)k->name, len) > 0) {
            pos--;
        }
        if (pos > 0 && state_name_cmp(p->ss.skeys[pos - 1u].name, p->ss.skeys[pos - 1u].name_len,
                                      (const uint8_t *)k->name, len) == 0) {
            return pcclInvalidArgument;
        }
        memmove(&p->ss.skeys[pos + 1u], &p->ss.skeys[pos], (size_t)(n - pos) * sizeof(p_skey));
        p_skey *d = &p->ss.skeys[pos];
        memset(d, 0, sizeof(*d));
        memcpy(d->name, k->name, (size_t)len);
        d->name_len = (uint32_t)len;
        d->dtype = k->dtype;
        d->count = k->count;
        d->bytes = k->count * es;
        d->aci = k->allow_content_inequality;
        d->index = i;
        n++;
    }
    p->ss.nkeys = n;
    p->ss.cmd = cmd->cmd_id;
    p->ss.rev = a->revision;
    p->ss.strategy = (int32_t)a->strategy;
    p->ss.popular = 0;
    p->ss.round = 0;
    p->ss.rx = p->ss.tx = 0;
    p->ss.failed = false;
    p->ss.abandon = false;
    p->ss.resp_ok = false;
    p->ss.scratch = false;
    p->ss.conn_open = false;
    p->ss.nsends = 0;
    ccoip_action *b = sm_out_push(&p->out, CCOIP_ACT_OP_BEGIN);
    if (b != NULL) {
        b->cmd_id = cmd->cmd_id;
        b->op_slot = state_slot(p);
    }
    state_hash_next(p, 0);
    return pcclSuccess;
}

/* The verdict names the keys to fetch: begin scratch, dial the distributor. */
static void state_on_verdict(ccoip_peer *p, const ccoip_pb_shared_state_sync_verdict *v)
{
    p->ss.popular = v->popular_revision;
    p->ss.round = v->round;
    if (v->round > p->ss.round_last) p->ss.round_last = v->round;
    for (uint32_t i = 0; i < p->ss.nkeys; i++)
        p->ss.skeys[i].fetch = false;
    p_offer_start(p, v); /* we accept no connections: we dial our receivers (§8.3) */
    if (!v->outdated || v->outdated_keys_count == 0) {
        state_send_done(p, true);
        return;
    }
    if (!v->has_distributor || v->outdated_keys_count > p->ss.nkeys ||
        v->distributor_peer == p->id) {
        p_fail(p, "sync verdict without a usable distributor");
        return;
    }
    uint64_t off = 0;
    for (uint64_t j = 0; j < v->outdated_keys_count; j++) {
        const ccoip_pb_outdated_key *o = &v->outdated_keys[j];
        p_skey *k = state_find(p, o->name.data, o->name.len);
        if (k == NULL || k->fetch || o->hash_type != CCOIP_PB_HASH_TYPE_XXH3_64) {
            p_fail(p, "sync verdict names an unknown key");
            return;
        }
        k->fetch = true;
        k->fetch_pos = (uint32_t)j;
        k->expected = o->expected_hash;
        k->scratch_off = off;
        off += k->bytes; /* cannot overflow: bounded by the sum of the submitted tensors */
    }
    const ccoip_pb_endpoint *ep = &v->distributor;
    if (ep->url.len >= CCOIP_URL_MAX || (ep->url.len == 0 && ep->ip.len != 4 && ep->ip.len != 16)) {
        p_fail(p, "sync verdict: bad distributor endpoint");
        return;
    }
    p->ss.nfetch = (uint32_t)v->outdated_keys_count;
    ccoip_action *b = sm_out_push(&p->out, CCOIP_ACT_OP_BEGIN);
    if (b != NULL) {
        b->cmd_id = p->ss.cmd;
        b->op_slot = state_slot(p) + 1u;
        b->scratch_bytes = off;
    }
    p->ss.scratch = true;
    p->ss.recv_pending = 0;
    p->ss.resp_ok = false;
    if (v->distributor_dials) {
        /* It accepts no connections: it dials us and offers (§8.3, p_offer_on_recv). */
        p->ss.await_offer = true;
        p->ss.offer_from = v->distributor_peer;
        p->ss.await_ns = p->now;
        p->ss.conn_open = false;
        p_set_sync(p, PSS_FETCHING);
        return;
    }
    ccoip_action *a = sm_out_push(&p->out, CCOIP_ACT_CONNECT);
    if (a == NULL) return;
    p->ss.conn = p->next_conn++;
    a->conn = p->ss.conn;
    if (ep->url.len > 0) {
        a->data = ep->url.data; /* borrowed from the decode arena: copy into the pool */
        uint8_t *u = sm_out_alloc(&p->out, ep->url.len);
        if (u != NULL) {
            memcpy(u, ep->url.data, (size_t)ep->url.len);
            a->data = u;
        }
        a->len = ep->url.len;
    } else {
        memcpy(a->ip, ep->ip.data, (size_t)ep->ip.len);
        a->ip_len = (uint32_t)ep->ip.len;
        a->port = ep->port;
    }
    p->ss.conn_open = true;
    p_set_sync(p, PSS_FETCHING);
}

void p_state_on_answer(ccoip_peer *p, p_call_kind kind, const ccoip_pb_master_to_peer *env)
{
    if (kind == PC_SYNC_VOTE) {
        if (p->ss.st != PSS_VOTED) {
            p_fail(p, "sync verdict for no vote");
            return;
        }
        if (env->status != CCOIP_PB_STATUS_SUCCESS) {
            state_finish(p, ccoip_status_to_result(env->status));
            return;
        }
        if (env->body_case != CCOIP_PB_MASTER_TO_PEER_BODY_SYNC_VERDICT) {
            p_fail(p, "sync vote answered without a verdict");
            return;
        }
        state_on_verdict(p, &env->body.sync_verdict);
        return;
    }
    if (p->ss.st != PSS_DONE_WAIT ||
        env->body_case != CCOIP_PB_MASTER_TO_PEER_BODY_SYNC_DONE_VERDICT) {
        p_fail(p, "unexpected sync done answer");
        return;
    }
    bool ok = env->status == CCOIP_PB_STATUS_SUCCESS && env->body.sync_done_verdict.success &&
              !p->ss.failed;
    /* Any member's failure fails the round for all: every member retries (retryable). */
    state_finish(p, ok ? pcclSuccess : pcclRankConnectionLost);
}

static uint32_t state_sconn(const ccoip_peer *p, uint64_t conn)
{
    for (uint32_t i = 0; i < P_SS_MAX; i++) {
        if (p->ss.sconn[i].used && p->ss.sconn[i].conn == conn) return i;
    }
    return UINT32_MAX;
}

/* The proof of a STATE_REQUEST (authenticated runs, §8.3): the group key of the epoch over the
 * distributor's challenge and what the request asks for. */
static void state_request_proof(const ccoip_peer *p,
                                const uint8_t challenge[CCOIP_AUTH_NONCE_BYTES],
                                const ccoip_data_header *h,
                                const ccoip_pb_shared_state_request *req,
                                uint8_t out[CCOIP_AUTH_MAC_BYTES])
{
    const uint64_t v[4] = {h->tag, h->seq, req->round, req->revision};
    ccoip_auth_mac(&p->cfg.auth, p->wire.group_key, "pccl state request", challenge,
                   CCOIP_AUTH_NONCE_BYTES, NULL, 0, v, 4, out);
}

/* Closes served connection i and frees its slot. */
void p_state_sconn_close(ccoip_peer *p, uint32_t i)
{
    ccoip_action *a = sm_out_push(&p->out, CCOIP_ACT_CLOSE);
    if (a != NULL) a->conn = p->ss.sconn[i].conn;
    p->ss.sconn[i].used = false;
}

/* Admission (hostile networks): with every served slot taken, the connection that has waited
 * longest without a request makes room, so idle connections cannot lock requesters out. */
void p_state_sconn_make_room(ccoip_peer *p)
{
    uint32_t oldest = UINT32_MAX;
    for (uint32_t i = 0; i < P_SS_MAX; i++) {
        const p_sconn *c = &p->ss.sconn[i];
        if (!c->used) return;
        if (!c->asked && (oldest == UINT32_MAX || c->since_ns < p->ss.sconn[oldest].since_ns))
            oldest = i;
    }
    if (oldest == UINT32_MAX) return;
    sm_log(&p->out, CCOIP_LOG_WARN,
           "peer %U: shared-state connections full: closing conn %U (no request) to make room",
           p->id, p->ss.sconn[oldest].conn);
    p_state_sconn_close(p, oldest);
}

bool p_state_on_conn_up(ccoip_peer *p, const ccoip_event *ev)
{
    if (ev->accepted) {
        if (ev->listener != CCOIP_LISTENER_SHARED_STATE) return false;
        p_state_sconn_make_room(p);
        for (uint32_t i = 0; i < P_SS_MAX; i++) {
            if (!p->ss.sconn[i].used) {
                memset(&p->ss.sconn[i], 0, sizeof(p->ss.sconn[i]));
                p->ss.sconn[i].used = true;
                p->ss.sconn[i].conn = ev->conn;
                p->ss.sconn[i].since_ns = p->now;
                if (ccoip_auth_on(&p->cfg.auth))
                    p_auth_challenge(p, ev->conn, p->ss.sconn[i].challenge);
                return true;
            }
        }
        ccoip_action *a = sm_out_push(&p->out, CCOIP_ACT_CLOSE);
        if (a != NULL) a->conn = ev->conn;
        return true;
    }
    if (p_offer_on_conn_up(p, ev)) return true;
    if (!p->ss.conn_open || ev->conn != p->ss.conn) return false;
    if (p->ss.st != PSS_FETCHING) return true;
    p->ss.requested = false;
    /* Authenticated: the request answers the distributor's CHALLENGE (state_on_response). */
    if (!ccoip_auth_on(&p->cfg.auth)) p_state_send_request(p, NULL);
    return true;
}

/* Sends the fetch's STATE_REQUEST (keys in verdict order) and posts one STATE_RECV per key into
 * scratch; challenge: the distributor's (authenticated runs), else NULL. */
void p_state_send_request(ccoip_peer *p, const uint8_t *challenge)
{
    p->ss.requested = true;
    /* Request the keys in verdict order; post one STATE_RECV per key into scratch. */
    uint32_t n = 0;
    for (uint32_t i = 0; i < p->ss.nkeys; i++) {
        if (p->ss.skeys[i].fetch) {
            p->ss.names[p->ss.skeys[i].fetch_pos].data = (const uint8_t *)p->ss.skeys[i].name;
            p->ss.names[p->ss.skeys[i].fetch_pos].len = p->ss.skeys[i].name_len;
            n++;
        }
    }
    ccoip_pb_shared_state_request req;
    memset(&req, 0, sizeof(req));
    req.revision = p->ss.popular;
    req.round = p->ss.round;
    req.keys = p->ss.names;
    req.keys_count = n;
    ccoip_data_header h;
    ccoip_data_header_init(&h, CCOIP_DATA_STATE_REQUEST);
    /* (tag, seq) = (own id, fetch number): unique per fetch, so frames of a cancelled
     * earlier fetch can never match this one's STATE_RECVs. */
    p->ss.fetch_seq++;
    h.tag = p->id;
    h.seq = p->ss.fetch_seq;
    uint8_t proof[CCOIP_AUTH_MAC_BYTES];
    if (challenge != NULL) {
        state_request_proof(p, challenge, &h, &req, proof);
        req.proof.data = proof;
        req.proof.len = CCOIP_AUTH_MAC_BYTES;
    }
    if (sm_send_state_request(&p->out, &p->lim, p->ss.conn, &h, &req) != pcclSuccess) {
        p->out.overflow = true;
        return;
    }
    for (uint32_t i = 0; i < p->ss.nkeys; i++) {
        p_skey *k = &p->ss.skeys[i];
        if (!k->fetch) continue;
        ccoip_action *a = sm_out_push(&p->out, CCOIP_ACT_STATE_RECV);
        if (a == NULL) return;
        k->recv_io = p->next_io++;
        a->io_id = k->recv_io;
        a->op_slot = state_slot(p) + 1u;
        a->conn = p->ss.conn;
        a->tag = p->id;
        a->seq = p->ss.fetch_seq;
        a->chunk = k->fetch_pos;
        a->dst = state_scratch(p, k);
        p->ss.recv_pending++;
    }
}

/* Every fetched tensor arrived and the response was valid: verify the first one. */
static void state_verify_next(ccoip_peer *p, uint32_t from)
{
    for (uint32_t i = from; i < p->ss.nkeys; i++) {
        if (!p->ss.skeys[i].fetch) continue;
        p_set_sync(p, PSS_VERIFYING);
        p->ss.i = i;
        state_hash(p, &p->ss.skeys[i], state_scratch(p, &p->ss.skeys[i]));
        return;
    }
    /* All verified: close the connection, adopt (COPY scratch -> tensor). */
    if (p->ss.conn_open) {
        ccoip_action *a = sm_out_push(&p->out, CCOIP_ACT_CLOSE);
        if (a != NULL) a->conn = p->ss.conn;
        p->ss.conn_open = false;
    }
    p_set_sync(p, PSS_ADOPTING);
    p->ss.i = UINT32_MAX;
    p->ss.io_first = p->next_io;
    for (uint32_t i = 0; i < p->ss.nkeys; i++) {
        if (!p->ss.skeys[i].fetch) continue;
        ccoip_action *a = sm_out_push(&p->out, CCOIP_ACT_COPY);
        if (a == NULL) return;
        p->ss.io = p->next_io++;
        p->ss.i = i; /* the last COPY's completion ends the adoption (one slot: in order) */
        a->io_id = p->ss.io;
        a->op_slot = state_slot(p);
        a->src = state_scratch(p, &p->ss.skeys[i]);
        a->dst = state_tensor(p, &p->ss.skeys[i]);
        a->count = p->ss.skeys[i].bytes;
    }
}

static void state_check_fetched(ccoip_peer *p)
{
    if (p->ss.st == PSS_FETCHING && p->ss.resp_ok && p->ss.recv_pending == 0) {
        state_verify_next(p, 0);
    }
}

static void state_on_response(ccoip_peer *p, const uint8_t *data, uint64_t len)
{
    ccoip_data_header h;
    if (p->ss.st != PSS_FETCHING && p->ss.st != PSS_VERIFYING) return; /* late: ignored */
    if (ccoip_auth_on(&p->cfg.auth) && !p->ss.requested && p->ss.st == PSS_FETCHING) {
        if (ccoip_data_header_decode(data, len, &p->lim, &h) != pcclSuccess ||
            h.kind != CCOIP_DATA_CHALLENGE || len != CCOIP_DATA_HEADER_BYTES) {
            p_state_fetch_fail(p, "the distributor sent no CHALLENGE");
            return;
        }
        uint8_t challenge[CCOIP_AUTH_NONCE_BYTES];
        ccoip_auth_nonce_from_u64(h.tag, h.seq, challenge);
        p_state_send_request(p, challenge);
        return;
    }
    if (ccoip_data_header_decode(data, len, &p->lim, &h) != pcclSuccess ||
        h.kind != CCOIP_DATA_STATE_RESPONSE || len != CCOIP_DATA_HEADER_BYTES + h.length ||
        p->ss.st != PSS_FETCHING || p->ss.resp_ok) {
        p_state_fetch_fail(p, "bad frame from the distributor");
        return;
    }
    ccoip_pb_arena arena;
    ccoip_pb_arena_init(&arena, p->arena_mem, p->arena_cap);
    ccoip_pb_shared_state_response r;
    if (ccoip_pb_shared_state_response_decode(data + CCOIP_DATA_HEADER_BYTES, h.length, &p->lim.pb,
                                              &arena, &r) != pcclSuccess) {
        p_state_fetch_fail(p, "malformed STATE_RESPONSE");
        return;
    }
    if (r.status != CCOIP_PB_STATUS_SUCCESS || r.revision != p->ss.popular ||
        r.entries_count != p->ss.nfetch) {
        p_state_fetch_fail(p, "distributor refused or serves another revision");
        return;
    }
    for (uint32_t i = 0; i < p->ss.nkeys; i++) {
        const p_skey *k = &p->ss.skeys[i];
        if (!k->fetch) continue;
        const ccoip_pb_shared_state_entry *e = &r.entries[k->fetch_pos];
        if (state_name_cmp(k->name, k->name_len, e->name.data, e->name.len) != 0 ||
            e->byte_length != k->bytes || e->hash != k->expected) {
            p_state_fetch_fail(p, "distributor's entry differs from the popular content");
            return;
        }
    }
    p->ss.resp_ok = true;
    state_check_fetched(p);
}

/* A STATE_REQUEST on served connection i: answer from the tensors (§8.3). */
static void state_serve(ccoip_peer *p, uint32_t i, const uint8_t *data, uint64_t len)
{
    const uint64_t conn = p->ss.sconn[i].conn;
    ccoip_data_header h;
    if (ccoip_data_header_decode(data, len, &p->lim, &h) != pcclSuccess ||
        h.kind != CCOIP_DATA_STATE_REQUEST || len != CCOIP_DATA_HEADER_BYTES + h.length) {
        p_state_sconn_close(p, i);
        return;
    }
    ccoip_pb_arena arena;
    ccoip_pb_arena_init(&arena, p->arena_mem, p->arena_cap);
    ccoip_pb_shared_state_request req;
    pcclResult_t dr = ccoip_pb_shared_state_request_decode(data + CCOIP_DATA_HEADER_BYTES, h.length,
                                                           &p->lim.pb, &arena, &req);
    if (ccoip_auth_on(&p->cfg.auth)) {
        /* Only a member holding this epoch's group key, answering our challenge (§8.3). */
        uint8_t want[CCOIP_AUTH_MAC_BYTES];
        if (dr == pcclSuccess) state_request_proof(p, p->ss.sconn[i].challenge, &h, &req, want);
        if (dr != pcclSuccess || req.proof.len != CCOIP_AUTH_MAC_BYTES ||
            !ccoip_auth_equal(want, req.proof.data, CCOIP_AUTH_MAC_BYTES)) {
            sm_log(&p->out, CCOIP_LOG_WARN,
                   "peer %U: STATE_REQUEST on conn %U without a valid proof: closing", p->id, conn);
            p_state_sconn_close(p, i);
            return;
        }
    }
    p->ss.sconn[i].asked = true;
    ccoip_pb_shared_state_response resp;
    memset(&resp, 0, sizeof(resp));
    resp.status = CCOIP_PB_STATUS_SUCCESS;
    resp.revision = p->ss.rev;
    /* Serve only while our own sync of that revision runs and our hashes are known. */
    /* A request of an earlier (failed) round may arrive late: serve only this round's (before
     * our own verdict arrives, any round newer than every round we have seen). */
    bool round_ok = p->ss.round != 0 ? req.round == p->ss.round : req.round > p->ss.round_last;
    bool ok = dr == pcclSuccess && round_ok && p->ss.st >= PSS_VOTED && p->ss.rev == req.revision &&
              req.keys_count <= p->ss.nkeys &&
              p->ss.nsends + req.keys_count <= (uint64_t)p->cfg.max_state_keys * P_SS_MAX;
    for (uint64_t j = 0; ok && j < req.keys_count; j++) {
        p_skey *k = state_find(p, req.keys[j].data, req.keys[j].len);
        if (k == NULL) {
            ok = false;
            break;
        }
        ccoip_pb_shared_state_entry *e = &p->ss.entries[j];
        memset(e, 0, sizeof(*e));
        e->name.data = (const uint8_t *)k->name;
        e->name.len = k->name_len;
        e->byte_length = k->bytes;
        e->hash = k->hash;
        e->hash_type = CCOIP_PB_HASH_TYPE_XXH3_64;
    }
    if (ok) {
        resp.entries = p->ss.entries;
        resp.entries_count = req.keys_count;
    } else {
        resp.status = CCOIP_PB_STATUS_NO_SHARED_STATE_AVAILABLE;
    }
    ccoip_data_header rh;
    ccoip_data_header_init(&rh, CCOIP_DATA_STATE_RESPONSE);
    rh.tag = h.tag;
    rh.seq = h.seq;
    if (sm_send_state_response(&p->out, &p->lim, conn, &rh, &resp) != pcclSuccess) {
        p->out.overflow = true;
        return;
    }
    if (!ok) return;
    for (uint64_t j = 0; j < req.keys_count; j++) {
        const p_skey *k = state_find(p, req.keys[j].data, req.keys[j].len);
        ccoip_action *a = sm_out_push(&p->out, CCOIP_ACT_STATE_SEND);
        if (a == NULL || k == NULL) return;
        a->io_id = p->next_io++;
        a->op_slot = state_slot(p);
        a->conn = conn;
        a->tag = h.tag;
        a->seq = h.seq;
        a->chunk = (uint32_t)j;
        a->src = state_tensor(p, k);
        p->ss.sends[p->ss.nsends++] = a->io_id;
        p->ss.tx += k->bytes; /* bytes handed to the transport */
    }
}

bool p_state_on_recv(ccoip_peer *p, uint64_t conn, const uint8_t *data, uint64_t len)
{
    if (p->ss.conn_open && conn == p->ss.conn) {
        state_on_response(p, data, len);
        return true;
    }
    const uint32_t i = state_sconn(p, conn);
    if (i == UINT32_MAX) return false;
    if (!p_offer_on_recv(p, i, data, len)) state_serve(p, i, data, len);
    return true;
}

bool p_state_on_conn_closed(ccoip_peer *p, uint64_t conn)
{
    if (p->ss.conn_open && conn == p->ss.conn) {
        p->ss.conn_open = false;
        if (p->ss.st == PSS_FETCHING || p->ss.st == PSS_VERIFYING) {
            p_state_fetch_fail(p, "distributor connection lost");
        }
        return true;
    }
    uint32_t i = state_sconn(p, conn);
    if (i == UINT32_MAX) return false;
    p->ss.sconn[i].used = false;
    return true;
}

bool p_state_on_done(ccoip_peer *p, const ccoip_event *ev)
{
    uint64_t id = ev->done.io_id;
    if (id == 0 || p->ss.st == PSS_NONE) return false;
    if (ev->type == CCOIP_EV_IO_DONE) {
        for (uint32_t i = 0; i < p->ss.nsends; i++) {
            if (p->ss.sends[i] != id) continue;
            p->ss.sends[i] = p->ss.sends[--p->ss.nsends];
            return true;
        }
        if (p->ss.st != PSS_FETCHING) return false;
        for (uint32_t i = 0; i < p->ss.nkeys; i++) {
            p_skey *k = &p->ss.skeys[i];
            if (!k->fetch || k->recv_io != id) continue;
            k->recv_io = 0;
            if (ev->done.result != pcclSuccess) {
                p_state_fetch_fail(p, "tensor transfer failed");
                return true;
            }
            p->ss.rx += k->bytes;
            p->ss.recv_pending--;
            state_check_fetched(p);
            return true;
        }
        return false;
    }
    if (p->ss.st == PSS_ADOPTING && id >= p->ss.io_first && id < p->ss.io) {
        return true; /* an earlier COPY of the adoption; the last one ends it */
    }
    if (id != p->ss.io) return false;
    p->ss.io = 0;
    switch (p->ss.st) {
    case PSS_HASHING:
        if (ev->done.result != pcclSuccess) {
            state_finish(p, pcclInvalidArgument);
            return true;
        }
        p->ss.skeys[p->ss.i].hash = ev->done.hash;
        state_hash_next(p, p->ss.i + 1u);
        return true;
    case PSS_VERIFYING: {
        const p_skey *k = &p->ss.skeys[p->ss.i];
        if (ev->done.result != pcclSuccess || ev->done.hash != k->expected) {
            p_state_fetch_fail(p, "received tensor does not have the expected hash");
            return true;
        }
        state_verify_next(p, p->ss.i + 1u);
        return true;
    }
    case PSS_ADOPTING:
        if (p->ss.abandon) {
            state_finish(p, pcclRankConnectionLost); /* the round failed meanwhile */
        } else {
            state_send_done(p, ev->done.result == pcclSuccess);
        }
        return true;
    default:
        return true;
    }
}

void p_state_on_round_failed(ccoip_peer *p)
{
    switch (p->ss.st) {
    case PSS_FETCHING:
    case PSS_VERIFYING:
        /* Nothing was adopted: cancel the fetch, end the command (no sync_done). */
        sm_log(&p->out, CCOIP_LOG_WARN, "peer %U: shared-state round failed by the master", p->id);
        state_finish(p, pcclRankConnectionLost);
        return;
    case PSS_ADOPTING:
        p->ss.abandon = true; /* verified content: finish the copies, then end */
        return;
    case PSS_DONE_WAIT:
        /* Our sync_done crossed the notification: the master will not answer it. */
        p_call_drop_op(p, PC_SYNC_DONE, 0);
        state_finish(p, pcclRankConnectionLost);
        return;
    default:
        sm_log(&p->out, CCOIP_LOG_DEBUG, "peer %U: sync_done_verdict notification ignored", p->id);
        return;
    }
}

void p_state_fail_all(ccoip_peer *p, pcclResult_t r)
{
    for (uint32_t i = 0; i < P_SS_MAX; i++) {
        if (!p->ss.sconn[i].used) continue;
        ccoip_action *a = sm_out_push(&p->out, CCOIP_ACT_CLOSE);
        if (a != NULL) a->conn = p->ss.sconn[i].conn;
        p->ss.sconn[i].used = false;
    }
    if (p->ss.st == PSS_NONE) return;
    p->ss.io = 1; /* force the CANCEL of the tensor slot (a kernel may be in flight) */
    state_finish(p, r);
}
