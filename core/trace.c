/*
 * trace.c — encoder, decoder and state hash of trace files (ccoip_trace.h).
 *
 * Encoding is done in two passes over the same field list: one to size the
 * record, one to write it when the caller's buffer is large enough. The
 * decoder reads through a cursor that fails (sticky) on the first read past
 * its end, so a lying length can never move it out of the buffer. Every
 * value has exactly one encoding (booleans are 0 or 1, URLs hold no NUL), so
 * a decoded record re-encodes to the same bytes (fuzz_trace checks it).
 */
#include "ccoip_trace.h"

#include <stddef.h>
#include <string.h>

#include "ccoip_hash.h"

/* ------------------------------------------------------------------------ */
/* Writer                                                                   */
/* ------------------------------------------------------------------------ */

typedef struct wbuf {
    uint8_t *out; /* NULL: only count */
    uint64_t pos;
} wbuf;

static void w_int(wbuf *w, uint64_t v, uint32_t n)
{
    if (w->out != NULL) {
        for (uint32_t i = 0; i < n; i++)
            w->out[w->pos + i] = (uint8_t)(v >> (8u * i));
    }
    w->pos += n;
}

static void w_u8(wbuf *w, uint8_t v)
{
    w_int(w, v, 1);
}
static void w_u32(wbuf *w, uint32_t v)
{
    w_int(w, v, 4);
}
static void w_u64(wbuf *w, uint64_t v)
{
    w_int(w, v, 8);
}

static void w_f64(wbuf *w, double d)
{
    uint64_t v;
    memcpy(&v, &d, sizeof v);
    w_u64(w, v);
}

static void w_raw(wbuf *w, const void *p, uint64_t n)
{
    if (w->out != NULL && n > 0) memcpy(w->out + w->pos, p, (size_t)n);
    w->pos += n;
}

static void w_meta(wbuf *w, const ccoip_quant_meta *m)
{
    w_u32(w, (uint32_t)m->algorithm);
    w_u32(w, (uint32_t)m->src_type);
    w_u32(w, (uint32_t)m->quant_type);
    w_f64(w, m->min_value);
    w_f64(w, m->max_value);
    w_f64(w, m->scale);
    w_u64(w, (uint64_t)m->zero_point);
}

static uint64_t url_len_of(const char *url)
{
    if (url == NULL) return 0;
    uint64_t n = 0;
    while (n < CCOIP_URL_MAX && url[n] != '\0')
        n++;
    return n;
}

/* cfg block sizes (the peer's plus its url bytes). */
#define CFG_MASTER_LEN (4u * 3u + 8u * 2u + 4u * 4u + 8u + 4u * 2u + 1u + 4u)
#define CFG_PEER_LEN   (4u + 4u + 16u + 4u * 6u + 8u + 8u + 4u + 4u + 4u + 1u)

static void w_header(wbuf *w, const ccoip_trace_header *h)
{
    w_raw(w, CCOIP_TRACE_MAGIC, 8);
    w_u32(w, CCOIP_TRACE_VERSION);
    w_u32(w, (uint32_t)h->machine);
    w_u64(w, h->seed);
    if (h->machine == CCOIP_TRACE_MASTER) {
        const ccoip_master_config *c = &h->master;
        w_u32(w, CFG_MASTER_LEN);
        w_u32(w, c->max_peers);
        w_u32(w, c->max_ops);
        w_u32(w, c->action_queue_depth);
        w_u64(w, c->out_bytes);
        w_u64(w, c->max_message_bytes);
        w_u32(w, c->heartbeat_ms);
        w_u32(w, c->evict_ms);
        w_u32(w, c->vote_timeout_ms);
        w_u32(w, c->max_state_keys);
        w_u64(w, c->probe_bytes);
        w_u32(w, c->ring_search_budget);
        w_u32(w, c->min_collective_world);
        w_u8(w, c->canary_skip_abort_verdict ? 1u : 0u);
        w_u32(w, c->relay_max_bytes);
    } else {
        const ccoip_peer_config *c = &h->peer;
        const uint64_t ul = url_len_of(c->master_url);
        w_u32(w, (uint32_t)(CFG_PEER_LEN + ul));
        w_u32(w, (uint32_t)ul);
        w_raw(w, c->master_url, ul);
        w_u32(w, c->master_ip_len);
        w_raw(w, c->master_ip, 16);
        w_u32(w, c->master_port);
        w_u32(w, c->peer_group);
        w_u32(w, c->p2p_pool_size);
        w_u32(w, c->max_ops);
        w_u32(w, c->max_world);
        w_u32(w, c->action_queue_depth);
        w_u64(w, c->out_bytes);
        w_u64(w, c->max_message_bytes);
        w_u32(w, c->max_state_keys);
        w_u32(w, c->heartbeat_ms);
        w_u32(w, c->evict_ms);
        w_u8(w, c->canary_skip_restore ? 1u : 0u);
    }
}

uint64_t ccoip_trace_encode_header(const ccoip_trace_header *h, uint8_t *out, uint64_t cap)
{
    if (h == NULL || (h->machine != CCOIP_TRACE_MASTER && h->machine != CCOIP_TRACE_PEER)) return 0;
    if (h->machine == CCOIP_TRACE_PEER &&
        (url_len_of(h->peer.master_url) >= CCOIP_URL_MAX || h->peer.master_ip_len > 16u)) {
        return 0;
    }
    wbuf w = {NULL, 0};
    w_header(&w, h);
    if (out != NULL && w.pos <= cap) {
        wbuf x = {out, 0};
        w_header(&x, h);
    }
    return w.pos;
}

/* Record: u8 kind | u32 body_len | body. body() writes the body. */
typedef void (*body_fn)(wbuf *w, const void *arg);

static uint64_t encode_record(uint8_t kind, body_fn body, const void *arg, uint8_t *out,
                              uint64_t cap)
{
    wbuf s = {NULL, 0};
    body(&s, arg);
    if (s.pos > UINT32_MAX) return 0;
    const uint64_t total = 5u + s.pos;
    if (out != NULL && total <= cap) {
        wbuf w = {out, 0};
        w_u8(&w, kind);
        w_u32(&w, (uint32_t)s.pos);
        body(&w, arg);
    }
    return total;
}

/* The key list is recorded for a SUBMIT of a shared-state sync that has one
 * (the core reads sync.keys of no other event). */
static bool has_keys(const ccoip_event *ev)
{
    return ev->type == CCOIP_EV_SUBMIT && ev->cmd.type == CCOIP_CMD_SYNC_SHARED_STATE &&
           ev->cmd.sync.keys != NULL;
}

/* A key name as the core reads it: at most CCOIP_STATE_NAME_MAX bytes up to
 * the first NUL (a longer name is recorded as its first CCOIP_STATE_NAME_MAX
 * bytes, which the core rejects just the same). */
static uint64_t name_len_of(const char *name)
{
    uint64_t n = 0;
    while (n < CCOIP_STATE_NAME_MAX && name[n] != '\0')
        n++;
    return n;
}

/* The collective-set fields of an ALL_REDUCE command (ccoip_sm.h v11, v12): recorded after the
 * v2 fields of its SUBMIT event, and only when one differs from its default, so a trace without
 * them keeps its bytes (format v2; the record's length says whether they follow). */
static bool has_coll_ext(const ccoip_event *ev)
{
    const ccoip_allreduce_args *a = &ev->cmd.allreduce;
    return ev->type == CCOIP_EV_SUBMIT && ev->cmd.type == CCOIP_CMD_ALL_REDUCE &&
           (a->kind != CCOIP_COLL_ALL_REDUCE || a->root != 0 || a->pinned_epoch != 0 ||
            a->send_bytes != 0 || a->recv_bytes != 0 || a->timeout_ms != 0 || a->premul != 0.0 ||
            a->world != 0);
}

static uint64_t bits_of(double d)
{
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    return u;
}

static void body_event(wbuf *w, const void *arg)
{
    const ccoip_event *ev = arg;
    w_u32(w, (uint32_t)ev->type);
    w_u64(w, ev->now_ns);
    w_u64(w, ev->conn);
    w_u8(w, ev->accepted ? 1u : 0u);
    w_u32(w, ev->listener);
    w_u32(w, ev->remote_ip_len);
    w_raw(w, ev->remote_ip, 16);
    const uint64_t len = ev->data != NULL ? ev->len : 0;
    w_u64(w, len);
    w_raw(w, ev->data, len);
    const ccoip_cmd *c = &ev->cmd;
    w_u32(w, (uint32_t)c->type);
    w_u64(w, c->cmd_id);
    w_u64(w, c->allreduce.tag);
    w_u64(w, c->allreduce.count);
    w_u32(w, (uint32_t)c->allreduce.dtype);
    w_u32(w, (uint32_t)c->allreduce.op);
    w_u32(w, (uint32_t)c->allreduce.quant_algorithm);
    w_u32(w, (uint32_t)c->allreduce.quant_dtype);
    w_u8(w, c->allreduce.in_place ? 1u : 0u);
    w_u64(w, c->sync.revision);
    w_u32(w, (uint32_t)c->sync.strategy);
    w_u32(w, c->sync.num_keys);
    const bool keys = has_keys(ev);
    w_u8(w, keys ? 1u : 0u);
    for (uint32_t i = 0; keys && i < c->sync.num_keys; i++) {
        const ccoip_state_key *k = &c->sync.keys[i];
        if (k->name == NULL) {
            w_u32(w, 0);
        } else {
            const uint64_t n = name_len_of(k->name);
            w_u32(w, (uint32_t)(n + 1u));
            w_raw(w, k->name, n);
            w_u8(w, 0);
        }
        w_u32(w, (uint32_t)k->dtype);
        w_u64(w, k->count);
        w_u8(w, k->allow_content_inequality ? 1u : 0u);
    }
    w_u64(w, ev->done.io_id);
    w_u32(w, (uint32_t)ev->done.result);
    w_meta(w, &ev->done.quant);
    w_meta(w, &ev->done.quant_out);
    w_u64(w, ev->done.hash);
    w_u64(w, ev->done.probe_bytes);
    w_u64(w, ev->done.duration_us);
    if (has_coll_ext(ev)) {
        const ccoip_allreduce_args *a = &c->allreduce;
        w_u32(w, (uint32_t)a->kind);
        w_u32(w, a->root);
        w_u64(w, a->pinned_epoch);
        w_u64(w, a->send_bytes);
        w_u64(w, a->recv_bytes);
        w_u32(w, a->timeout_ms);
        w_u64(w, bits_of(a->premul));
        w_u32(w, a->world);
    }
}

uint64_t ccoip_trace_encode_event(const ccoip_event *ev, uint8_t *out, uint64_t cap)
{
    if (ev == NULL || ev->remote_ip_len > 16u) return 0;
    if (has_keys(ev) && ev->cmd.sync.num_keys > CCOIP_TRACE_MAX_KEYS) return 0;
    return encode_record(CCOIP_TRACE_EVENT, body_event, ev, out, cap);
}

typedef struct set_port_args {
    uint32_t listener, port;
    const char *url;
    uint64_t url_len;
} set_port_args;

static void body_set_port(wbuf *w, const void *arg)
{
    const set_port_args *a = arg;
    w_u32(w, a->listener);
    w_u32(w, a->port);
    w_u32(w, (uint32_t)a->url_len);
    w_raw(w, a->url, a->url_len);
}

uint64_t ccoip_trace_encode_set_port(uint32_t listener, uint32_t port, const char *url,
                                     uint8_t *out, uint64_t cap)
{
    const set_port_args a = {listener, port, url, url_len_of(url)};
    if (a.url_len >= CCOIP_URL_MAX) return 0;
    return encode_record(CCOIP_TRACE_SET_PORT, body_set_port, &a, out, cap);
}

typedef struct u64x3 {
    uint32_t n;
    uint64_t v[3];
} u64x3;

static void body_u64s(wbuf *w, const void *arg)
{
    const u64x3 *a = arg;
    for (uint32_t i = 0; i < a->n; i++)
        w_u64(w, a->v[i]);
}

uint64_t ccoip_trace_encode_polled(uint64_t n, uint8_t *out, uint64_t cap)
{
    const u64x3 a = {1, {n, 0, 0}};
    return encode_record(CCOIP_TRACE_POLLED, body_u64s, &a, out, cap);
}

uint64_t ccoip_trace_encode_checkpoint(uint64_t events, uint64_t state_hash, uint8_t *out,
                                       uint64_t cap)
{
    const u64x3 a = {2, {events, state_hash, 0}};
    return encode_record(CCOIP_TRACE_CHECKPOINT, body_u64s, &a, out, cap);
}

uint64_t ccoip_trace_encode_trailer(uint64_t events, uint64_t actions, uint64_t state_hash,
                                    uint8_t *out, uint64_t cap)
{
    const u64x3 a = {3, {events, actions, state_hash}};
    return encode_record(CCOIP_TRACE_TRAILER, body_u64s, &a, out, cap);
}

/* ------------------------------------------------------------------------ */
/* Reader                                                                   */
/* ------------------------------------------------------------------------ */

typedef struct cur {
    const uint8_t *p;
    uint64_t len;
    uint64_t pos;
    bool bad;
} cur;

static bool c_take(cur *c, uint64_t n, const uint8_t **out)
{
    if (c->bad || n > c->len - c->pos) {
        c->bad = true;
        *out = NULL;
        return false;
    }
    *out = c->p + c->pos;
    c->pos += n;
    return true;
}

static uint64_t c_int(cur *c, uint32_t n)
{
    const uint8_t *b;
    if (!c_take(c, n, &b)) return 0;
    uint64_t v = 0;
    for (uint32_t i = 0; i < n; i++)
        v |= (uint64_t)b[i] << (8u * i);
    return v;
}

static uint8_t c_u8(cur *c)
{
    return (uint8_t)c_int(c, 1);
}
static uint32_t c_u32(cur *c)
{
    return (uint32_t)c_int(c, 4);
}
static uint64_t c_u64(cur *c)
{
    return c_int(c, 8);
}

static double c_f64(cur *c)
{
    const uint64_t v = c_u64(c);
    double d;
    memcpy(&d, &v, sizeof d);
    return d;
}

static bool c_bool(cur *c)
{
    const uint8_t v = c_u8(c);
    if (v > 1u) c->bad = true;
    return v == 1u;
}

static void c_raw(cur *c, void *dst, uint64_t n)
{
    const uint8_t *b;
    if (c_take(c, n, &b) && n > 0) memcpy(dst, b, (size_t)n);
}

static void c_meta(cur *c, ccoip_quant_meta *m)
{
    m->algorithm = (pcclQuantizationAlgorithm_t)c_u32(c);
    m->src_type = (pcclDataType_t)c_u32(c);
    m->quant_type = (pcclDataType_t)c_u32(c);
    m->min_value = c_f64(c);
    m->max_value = c_f64(c);
    m->scale = c_f64(c);
    m->zero_point = (int64_t)c_u64(c);
}

/* A string of u32 length < CCOIP_URL_MAX into dst (NUL-terminated). */
static void c_url(cur *c, char *dst)
{
    const uint32_t n = c_u32(c);
    if (n >= CCOIP_URL_MAX) {
        c->bad = true;
        dst[0] = '\0';
        return;
    }
    c_raw(c, dst, n);
    if (!c->bad && n > 0 && memchr(dst, '\0', n) != NULL) c->bad = true; /* one encoding */
    dst[c->bad ? 0 : n] = '\0';
}

pcclResult_t ccoip_trace_reader_init(ccoip_trace_reader *r, const uint8_t *buf, uint64_t len,
                                     ccoip_trace_header *hdr)
{
    if (r == NULL || hdr == NULL || (buf == NULL && len > 0)) return pcclInvalidArgument;
    memset(r, 0, sizeof *r);
    memset(hdr, 0, sizeof *hdr);
    r->buf = buf;
    r->len = len;
    cur c = {buf, len, 0, false};
    const uint8_t *magic;
    if (!c_take(&c, 8, &magic) || memcmp(magic, CCOIP_TRACE_MAGIC, 8) != 0) {
        return pcclProtocolError;
    }
    hdr->version = c_u32(&c);
    const uint32_t machine = c_u32(&c);
    hdr->seed = c_u64(&c);
    const uint32_t cfg_len = c_u32(&c);
    if (c.bad || hdr->version != CCOIP_TRACE_VERSION ||
        (machine != CCOIP_TRACE_MASTER && machine != CCOIP_TRACE_PEER)) {
        return pcclProtocolError;
    }
    hdr->machine = (ccoip_trace_machine)machine;
    const uint8_t *cfg;
    if (!c_take(&c, cfg_len, &cfg)) return pcclProtocolError;
    cur k = {cfg, cfg_len, 0, false};
    if (machine == CCOIP_TRACE_MASTER) {
        ccoip_master_config *m = &hdr->master;
        m->max_peers = c_u32(&k);
        m->max_ops = c_u32(&k);
        m->action_queue_depth = c_u32(&k);
        m->out_bytes = c_u64(&k);
        m->max_message_bytes = c_u64(&k);
        m->heartbeat_ms = c_u32(&k);
        m->evict_ms = c_u32(&k);
        m->vote_timeout_ms = c_u32(&k);
        m->max_state_keys = c_u32(&k);
        m->probe_bytes = c_u64(&k);
        m->ring_search_budget = c_u32(&k);
        m->min_collective_world = c_u32(&k);
        m->canary_skip_abort_verdict = c_bool(&k);
        /* Appended later (master relay): absent in older traces, i.e. off. */
        if (k.len - k.pos >= 4u) m->relay_max_bytes = c_u32(&k);
    } else {
        ccoip_peer_config *p = &hdr->peer;
        c_url(&k, hdr->master_url);
        p->master_url = hdr->master_url[0] != '\0' ? hdr->master_url : NULL;
        p->master_ip_len = c_u32(&k);
        if (p->master_ip_len > 16u) k.bad = true;
        c_raw(&k, p->master_ip, 16);
        p->master_port = c_u32(&k);
        p->peer_group = c_u32(&k);
        p->p2p_pool_size = c_u32(&k);
        p->max_ops = c_u32(&k);
        p->max_world = c_u32(&k);
        p->action_queue_depth = c_u32(&k);
        p->out_bytes = c_u64(&k);
        p->max_message_bytes = c_u64(&k);
        p->max_state_keys = c_u32(&k);
        p->heartbeat_ms = c_u32(&k);
        p->evict_ms = c_u32(&k);
        p->canary_skip_restore = c_bool(&k);
    }
    if (k.bad) return pcclProtocolError;
    /* Trailing cfg bytes come from a later writer's appended fields: ignored. */
    r->pos = c.pos;
    return pcclSuccess;
}

/* A key name: u32 n (0: NULL) | n - 1 bytes without NUL | NUL. The name
 * points into the buffer (its NUL is part of the record). */
static const char *c_name(cur *c)
{
    const uint32_t n = c_u32(c);
    if (n == 0) return NULL;
    const uint8_t *b;
    if (n > CCOIP_STATE_NAME_MAX + 1u || !c_take(c, n, &b)) {
        c->bad = true;
        return NULL;
    }
    if (b[n - 1u] != 0 || (n > 1u && memchr(b, 0, n - 1u) != NULL)) {
        c->bad = true;
        return NULL;
    }
    return (const char *)b;
}

static void decode_event(cur *c, ccoip_event *ev, ccoip_state_key *keys)
{
    memset(ev, 0, sizeof *ev);
    const uint32_t type = c_u32(c);
    if (type < CCOIP_EV_START || type > CCOIP_EV_PROBE_DONE) c->bad = true;
    ev->type = (ccoip_event_type)type;
    ev->now_ns = c_u64(c);
    ev->conn = c_u64(c);
    ev->accepted = c_bool(c);
    ev->listener = c_u32(c);
    ev->remote_ip_len = c_u32(c);
    if (ev->remote_ip_len > 16u) c->bad = true;
    c_raw(c, ev->remote_ip, 16);
    const uint64_t len = c_u64(c);
    const uint8_t *data = NULL;
    if (len > 0 && c_take(c, len, &data)) {
        ev->data = data;
        ev->len = len;
    }
    ccoip_cmd *cmd = &ev->cmd;
    cmd->type = (ccoip_cmd_type)c_u32(c);
    cmd->cmd_id = c_u64(c);
    cmd->allreduce.tag = c_u64(c);
    cmd->allreduce.count = c_u64(c);
    cmd->allreduce.dtype = (pcclDataType_t)c_u32(c);
    cmd->allreduce.op = (pcclRedOp_t)c_u32(c);
    cmd->allreduce.quant_algorithm = (pcclQuantizationAlgorithm_t)c_u32(c);
    cmd->allreduce.quant_dtype = (pcclDataType_t)c_u32(c);
    cmd->allreduce.in_place = c_bool(c);
    cmd->sync.revision = c_u64(c);
    cmd->sync.strategy = (pcclSharedStateSyncStrategy_t)c_u32(c);
    cmd->sync.num_keys = c_u32(c);
    if (c_bool(c)) {
        /* Only where the encoder writes keys, and never more than fit. */
        if (ev->type != CCOIP_EV_SUBMIT || cmd->type != CCOIP_CMD_SYNC_SHARED_STATE ||
            cmd->sync.num_keys > CCOIP_TRACE_MAX_KEYS) {
            c->bad = true;
        } else {
            for (uint32_t i = 0; i < cmd->sync.num_keys && !c->bad; i++) {
                ccoip_state_key *k = &keys[i];
                k->name = c_name(c);
                k->dtype = (pcclDataType_t)c_u32(c);
                k->count = c_u64(c);
                k->allow_content_inequality = c_bool(c);
            }
            cmd->sync.keys = keys;
        }
    }
    ev->done.io_id = c_u64(c);
    ev->done.result = (pcclResult_t)c_u32(c);
    c_meta(c, &ev->done.quant);
    c_meta(c, &ev->done.quant_out);
    ev->done.hash = c_u64(c);
    ev->done.probe_bytes = c_u64(c);
    ev->done.duration_us = c_u64(c);
    if (c->pos < c->len) {
        /* The collective-set extension (has_coll_ext): only on such a SUBMIT, and never all
         * defaults (one encoding per value). */
        ccoip_allreduce_args *a = &cmd->allreduce;
        a->kind = (ccoip_coll_kind)c_u32(c);
        a->root = c_u32(c);
        a->pinned_epoch = c_u64(c);
        a->send_bytes = c_u64(c);
        a->recv_bytes = c_u64(c);
        a->timeout_ms = c_u32(c);
        const uint64_t pb = c_u64(c);
        memcpy(&a->premul, &pb, sizeof pb);
        a->world = c_u32(c);
        if (!has_coll_ext(ev)) c->bad = true;
    }
}

pcclResult_t ccoip_trace_next(ccoip_trace_reader *r, ccoip_trace_record *rec, bool *done)
{
    if (r == NULL || rec == NULL || done == NULL) return pcclInvalidArgument;
    *done = false;
    if (r->pos > r->len) return pcclProtocolError;
    if (r->pos == r->len) {
        *done = true;
        return pcclSuccess;
    }
    if (r->ended) return pcclProtocolError; /* bytes after the trailer */
    cur c = {r->buf, r->len, r->pos, false};
    const uint8_t kind = c_u8(&c);
    const uint32_t body_len = c_u32(&c);
    const uint8_t *body;
    if (!c_take(&c, body_len, &body)) return pcclProtocolError;
    cur b = {body, body_len, 0, false};
    memset(rec, 0, offsetof(ccoip_trace_record, keys));
    rec->kind = (ccoip_trace_kind)kind;
    switch (kind) {
    case CCOIP_TRACE_EVENT:
        decode_event(&b, &rec->event, rec->keys);
        break;
    case CCOIP_TRACE_SET_PORT:
        rec->listener = c_u32(&b);
        rec->port = c_u32(&b);
        c_url(&b, rec->url);
        break;
    case CCOIP_TRACE_POLLED:
        rec->polled = c_u64(&b);
        break;
    case CCOIP_TRACE_CHECKPOINT:
        rec->events = c_u64(&b);
        rec->state_hash = c_u64(&b);
        break;
    case CCOIP_TRACE_TRAILER:
        rec->events = c_u64(&b);
        rec->actions = c_u64(&b);
        rec->state_hash = c_u64(&b);
        r->ended = true;
        break;
    default:
        return pcclProtocolError;
    }
    if (b.bad || b.pos != b.len) {
        r->ended = false;
        return pcclProtocolError;
    }
    r->pos = c.pos;
    return pcclSuccess;
}

/* ------------------------------------------------------------------------ */
/* State hash                                                               */
/* ------------------------------------------------------------------------ */

/* The largest 'A' record: 1 + 4 + 8 + 16 (payload) + 16 + 4 + 4 + 4 + 8 + 4 + 8 + 8 + 4 + 1
 * + 8 + 8 + 4 + 2 * 32 + 8 * 3 + 4 + 4 + 44 + 4 + 4 + 8 + 1 + 8 + 8 + 4 + 4 = 319, plus the
 * chain (8). */
#define HASH_REC_MAX 512u

static void chain(ccoip_trace_hasher *h, uint8_t *buf, uint64_t n)
{
    for (uint32_t i = 0; i < 8u; i++)
        buf[i] = (uint8_t)(h->hash >> (8u * i));
    h->hash = ccoip_hash_bytes(buf, n);
}

void ccoip_trace_hasher_init(ccoip_trace_hasher *h)
{
    h->hash = 0;
    h->actions = 0;
}

void ccoip_trace_hash_step(ccoip_trace_hasher *h, int result)
{
    uint8_t buf[16];
    wbuf w = {buf, 8};
    w_u8(&w, 'R');
    w_u32(&w, (uint32_t)result);
    chain(h, buf, w.pos);
}

static void w_span(wbuf *w, const ccoip_span_ref *s)
{
    w_u32(w, s->op_slot);
    w_u32(w, (uint32_t)s->region);
    w_u64(w, s->offset);
    w_u64(w, s->length);
    /* tensor names a key only in a TENSOR span; elsewhere it carries no meaning
     * (core/peer_ring.c's ring_span leaves it unset: hashing it there would make
     * the hash depend on stack contents). */
    w_u32(w, s->region == CCOIP_REGION_TENSOR ? s->tensor : 0u);
}

void ccoip_trace_hash_action(ccoip_trace_hasher *h, const ccoip_action *a)
{
    uint8_t buf[HASH_REC_MAX];
    wbuf w = {buf, 8};
    w_u8(&w, 'A');
    w_u32(&w, (uint32_t)a->type);
    w_u64(&w, a->conn);
    const uint64_t len = a->data != NULL ? a->len : 0;
    w_u64(&w, len);
    w_u64(&w, len > 0 ? ccoip_hash_bytes(a->data, len) : 0);
    w_raw(&w, a->ip, 16);
    w_u32(&w, a->ip_len);
    w_u32(&w, a->port);
    w_u32(&w, (uint32_t)a->listener);
    w_u64(&w, a->cmd_id);
    w_u32(&w, (uint32_t)a->result);
    w_u64(&w, a->tx_bytes);
    w_u64(&w, a->rx_bytes);
    w_u32(&w, a->world_size);
    w_u8(&w, a->peers_pending ? 1u : 0u);
    w_u64(&w, a->revision);
    w_u64(&w, a->io_id);
    w_u32(&w, a->op_slot);
    w_span(&w, &a->src);
    w_span(&w, &a->dst);
    w_u64(&w, a->epoch);
    w_u64(&w, a->tag);
    w_u64(&w, a->seq);
    w_u32(&w, a->chunk);
    w_u32(&w, a->step);
    w_meta(&w, &a->quant);
    w_u32(&w, (uint32_t)a->red_op);
    w_u32(&w, (uint32_t)a->dtype);
    w_u64(&w, a->count);
    w_u8(&w, a->reduce ? 1u : 0u);
    w_u64(&w, a->scratch_bytes);
    w_u64(&w, a->backup_bytes);
    w_u32(&w, a->divisor);
    w_u32(&w, (uint32_t)a->level);
    if (a->type == CCOIP_ACT_SCALE) w_u64(&w, bits_of(a->scale)); /* v12; others unchanged */
    chain(h, buf, w.pos);
    h->actions++;
}

void ccoip_trace_hash_deadline(ccoip_trace_hasher *h, uint64_t deadline_ns)
{
    uint8_t buf[24];
    wbuf w = {buf, 8};
    w_u8(&w, 'D');
    w_u64(&w, deadline_ns);
    chain(h, buf, w.pos);
}
