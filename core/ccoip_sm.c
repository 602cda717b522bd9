/*
 * ccoip_sm.c — shared plumbing of the state machines (ccoip_sm_internal.h).
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ccoip_dtype.h"
#include "ccoip_ring.h"
#include "ccoip_sm_internal.h"

pcclResult_t sm_out_init(sm_out *o, uint32_t depth, uint64_t pool_bytes)
{
    memset(o, 0, sizeof(*o));
    if (depth == 0 || pool_bytes == 0 || pool_bytes > ((uint64_t)1 << 40)) {
        return pcclInvalidArgument;
    }
    /* Queue and pool in one block (freed through q). Only the front of each is in use at a
     * time (the pool is recycled whenever the queue drains), and a large block comes from the
     * system untouched: pages never written cost no memory. */
    const uint64_t qbytes = ((uint64_t)depth * sizeof(ccoip_action) + 63u) & ~(uint64_t)63u;
    if (pool_bytes > SIZE_MAX - qbytes) return pcclSystemError;
    uint8_t *blk = malloc((size_t)(qbytes + pool_bytes));
    if (blk == NULL) return pcclSystemError;
    o->q = (ccoip_action *)(void *)blk;
    o->pool = blk + qbytes;
    o->cap = depth;
    o->pool_cap = pool_bytes;
    return pcclSuccess;
}

void sm_out_free(sm_out *o)
{
    free(o->q); /* the block of queue and pool (sm_out_init) */
    o->q = NULL;
    o->pool = NULL;
}

void sm_out_begin_step(sm_out *o)
{
    if (o->count == 0) {
        o->pool_used = 0;
        o->head = 0;
    }
}

ccoip_action *sm_out_push(sm_out *o, ccoip_action_type t)
{
    if (o->count == o->cap) {
        o->overflow = true;
        return NULL;
    }
    uint32_t idx = (o->head + o->count) % o->cap;
    ccoip_action *a = &o->q[idx];
    memset(a, 0, sizeof(*a));
    a->type = t;
    o->count++;
    return a;
}

uint8_t *sm_out_alloc(sm_out *o, uint64_t n)
{
    if (n > o->pool_cap - o->pool_used) {
        o->overflow = true;
        return NULL;
    }
    uint8_t *p = o->pool + o->pool_used;
    o->pool_used += n;
    return p;
}

bool sm_out_pop(sm_out *o, ccoip_action *out)
{
    if (o->count == 0) return false;
    *out = o->q[o->head];
    o->head = (o->head + 1) % o->cap;
    o->count--;
    return true;
}

const ccoip_action *sm_out_pop_ref(sm_out *o)
{
    if (o->count == 0) return NULL;
    const ccoip_action *a = &o->q[o->head];
    o->head = (o->head + 1) % o->cap;
    o->count--;
    return a;
}

/* A bounded text builder for LOG lines. */
typedef struct logb {
    char buf[CCOIP_LOG_TEXT_MAX];
    uint32_t len;
} logb;

static void logb_char(logb *b, char c)
{
    if (b->len + 1 < CCOIP_LOG_TEXT_MAX) b->buf[b->len++] = c;
}

uint32_t sm_u64_dec(char out[SM_U64_DEC_MAX], uint64_t v)
{
    char tmp[SM_U64_DEC_MAX];
    uint32_t n = 0;
    do {
        tmp[n++] = (char)('0' + (int)(v % 10u));
        v /= 10u;
    } while (v != 0 && n < sizeof(tmp));
    for (uint32_t i = 0; i < n; i++)
        out[i] = tmp[n - 1u - i];
    return n;
}

static void logb_u64(logb *b, uint64_t v)
{
    char d[SM_U64_DEC_MAX];
    const uint32_t n = sm_u64_dec(d, v);
    for (uint32_t i = 0; i < n; i++)
        logb_char(b, d[i]);
}

void sm_log(sm_out *o, ccoip_log_level level, const char *fmt, ...)
{
    logb b;
    b.len = 0;
    va_list ap;
    va_start(ap, fmt);
    for (const char *f = fmt; *f != '\0'; f++) {
        if (*f != '%' || f[1] == '\0') {
            logb_char(&b, *f);
            continue;
        }
        f++;
        switch (*f) {
        case 's': {
            const char *s = va_arg(ap, const char *);
            if (s == NULL) s = "(null)";
            while (*s != '\0')
                logb_char(&b, *s++);
            break;
        }
        case 'U':
            logb_u64(&b, va_arg(ap, uint64_t));
            break;
        case 'u':
            logb_u64(&b, (uint64_t)va_arg(ap, uint32_t));
            break;
        case 'd': {
            int32_t v = va_arg(ap, int32_t);
            if (v < 0) {
                logb_char(&b, '-');
                logb_u64(&b, (uint64_t)(-(int64_t)v));
            } else {
                logb_u64(&b, (uint64_t)v);
            }
            break;
        }
        default:
            logb_char(&b, *f);
            break;
        }
    }
    va_end(ap);
    b.buf[b.len] = '\0';
    uint8_t *text = sm_out_alloc(o, (uint64_t)b.len + 1u);
    if (text == NULL) return;
    ccoip_action *a = sm_out_push(o, CCOIP_ACT_LOG);
    if (a == NULL) return;
    memcpy(text, b.buf, (size_t)b.len + 1u);
    a->level = level;
    a->data = text;
    a->len = b.len;
}

static pcclResult_t send_bytes_reserve(sm_out *o, uint64_t need, uint8_t **buf)
{
    *buf = sm_out_alloc(o, need);
    return *buf == NULL ? pcclInternalError : pcclSuccess;
}

pcclResult_t sm_send_m2p(sm_out *o, const ccoip_codec_limits *lim, uint64_t conn,
                         const ccoip_pb_master_to_peer *env)
{
    uint64_t need = 0;
    pcclResult_t r = ccoip_ctrl_encode_m2p(env, lim, NULL, 0, &need);
    if (r != pcclSuccess && r != pcclInvalidArgument) return r;
    if (need == 0) return pcclInternalError;
    uint8_t *buf;
    if (send_bytes_reserve(o, need, &buf) != pcclSuccess) return pcclInternalError;
    uint64_t len = 0;
    r = ccoip_ctrl_encode_m2p(env, lim, buf, need, &len);
    if (r != pcclSuccess) return r;
    ccoip_action *a = sm_out_push(o, CCOIP_ACT_SEND);
    if (a == NULL) return pcclInternalError;
    a->conn = conn;
    a->data = buf;
    a->len = len;
    return pcclSuccess;
}

/* Encodes env as a control frame into the pool: *buf, *len. */
static pcclResult_t encode_p2m(sm_out *o, const ccoip_codec_limits *lim,
                               const ccoip_pb_peer_to_master *env, uint8_t **buf, uint64_t *len)
{
    uint64_t need = 0;
    pcclResult_t r = ccoip_ctrl_encode_p2m(env, lim, NULL, 0, &need);
    if (r != pcclSuccess && r != pcclInvalidArgument) return r;
    if (need == 0) return pcclInternalError;
    if (send_bytes_reserve(o, need, buf) != pcclSuccess) return pcclInternalError;
    return ccoip_ctrl_encode_p2m(env, lim, *buf, need, len);
}

/* Stand-in bytes of a span-tailed frame's last field (contract v9). */
static const uint8_t g_span_zeros[CCOIP_RELAY_MAX_BYTES];

pcclResult_t sm_send_p2m_span(sm_out *o, const ccoip_codec_limits *lim, uint64_t conn,
                              ccoip_pb_peer_to_master *env, ccoip_pb_bytes *field, uint32_t op_slot,
                              ccoip_span_ref span)
{
    const uint64_t tail = span.length;
    if (tail == 0 || tail > sizeof g_span_zeros) return pcclInvalidArgument;
    field->data = g_span_zeros;
    field->len = tail;
    uint8_t *buf = NULL;
    uint64_t len = 0;
    const pcclResult_t r = encode_p2m(o, lim, env, &buf, &len);
    field->data = NULL;
    field->len = 0;
    if (r != pcclSuccess) return r;
    /* The field's bytes must be the frame's last: the stand-ins end it. */
    if (len <= tail || memcmp(buf + len - tail, g_span_zeros, (size_t)tail) != 0) {
        return pcclInvalidArgument;
    }
    ccoip_action *a = sm_out_push(o, CCOIP_ACT_SEND);
    if (a == NULL) return pcclInternalError;
    a->conn = conn;
    a->data = buf;
    a->len = len - tail;
    a->op_slot = op_slot;
    a->src = span;
    return pcclSuccess;
}

pcclResult_t sm_send_p2m(sm_out *o, const ccoip_codec_limits *lim, uint64_t conn,
                         const ccoip_pb_peer_to_master *env)
{
    uint8_t *buf = NULL;
    uint64_t len = 0;
    const pcclResult_t r = encode_p2m(o, lim, env, &buf, &len);
    if (r != pcclSuccess) return r;
    ccoip_action *a = sm_out_push(o, CCOIP_ACT_SEND);
    if (a == NULL) return pcclInternalError;
    a->conn = conn;
    a->data = buf;
    a->len = len;
    return pcclSuccess;
}

pcclResult_t sm_send_data_header(sm_out *o, const ccoip_codec_limits *lim, uint64_t conn,
                                 const ccoip_data_header *h)
{
    uint8_t *buf;
    if (send_bytes_reserve(o, CCOIP_DATA_HEADER_BYTES, &buf) != pcclSuccess) {
        return pcclInternalError;
    }
    pcclResult_t r = ccoip_data_header_encode(h, lim, buf, CCOIP_DATA_HEADER_BYTES);
    if (r != pcclSuccess) return r;
    ccoip_action *a = sm_out_push(o, CCOIP_ACT_SEND);
    if (a == NULL) return pcclInternalError;
    a->conn = conn;
    a->data = buf;
    a->len = CCOIP_DATA_HEADER_BYTES;
    return pcclSuccess;
}

/* Header + protobuf payload in one pool allocation. */
static pcclResult_t send_state_frame(sm_out *o, const ccoip_codec_limits *lim, uint64_t conn,
                                     ccoip_data_header *h, uint64_t need, uint8_t **payload,
                                     ccoip_action **act)
{
    if (need > lim->pb.max_message_bytes) return pcclInvalidArgument;
    uint8_t *buf;
    if (send_bytes_reserve(o, CCOIP_DATA_HEADER_BYTES + need, &buf) != pcclSuccess) {
        return pcclInternalError;
    }
    h->length = need;
    pcclResult_t r = ccoip_data_header_encode(h, lim, buf, CCOIP_DATA_HEADER_BYTES);
    if (r != pcclSuccess) return r;
    ccoip_action *a = sm_out_push(o, CCOIP_ACT_SEND);
    if (a == NULL) return pcclInternalError;
    a->conn = conn;
    a->data = buf;
    a->len = CCOIP_DATA_HEADER_BYTES + need;
    *payload = buf + CCOIP_DATA_HEADER_BYTES;
    *act = a;
    return pcclSuccess;
}

pcclResult_t sm_send_data_proof(sm_out *o, const ccoip_codec_limits *lim, uint64_t conn,
                                ccoip_data_header *h, const uint8_t proof[CCOIP_DATA_PROOF_BYTES])
{
    uint8_t *payload;
    ccoip_action *a;
    const pcclResult_t r = send_state_frame(o, lim, conn, h, CCOIP_DATA_PROOF_BYTES, &payload, &a);
    if (r != pcclSuccess) return r;
    memcpy(payload, proof, CCOIP_DATA_PROOF_BYTES);
    return pcclSuccess;
}

pcclResult_t sm_send_state_request(sm_out *o, const ccoip_codec_limits *lim, uint64_t conn,
                                   ccoip_data_header *h, const ccoip_pb_shared_state_request *req)
{
    uint64_t need = 0, len = 0;
    pcclResult_t r = ccoip_pb_shared_state_request_encoded_size(req, &need);
    if (r != pcclSuccess) return r;
    uint8_t *payload;
    ccoip_action *a;
    r = send_state_frame(o, lim, conn, h, need, &payload, &a);
    if (r != pcclSuccess) return r;
    return ccoip_pb_shared_state_request_encode(req, payload, need, &len);
}

pcclResult_t sm_send_state_response(sm_out *o, const ccoip_codec_limits *lim, uint64_t conn,
                                    ccoip_data_header *h,
                                    const ccoip_pb_shared_state_response *resp)
{
    uint64_t need = 0, len = 0;
    pcclResult_t r = ccoip_pb_shared_state_response_encoded_size(resp, &need);
    if (r != pcclSuccess) return r;
    uint8_t *payload;
    ccoip_action *a;
    r = send_state_frame(o, lim, conn, h, need, &payload, &a);
    if (r != pcclSuccess) return r;
    return ccoip_pb_shared_state_response_encode(resp, payload, need, &len);
}

bool ccoip_action_gather_ok(const ccoip_action *a)
{
    if (a == NULL || !ccoip_dtype_valid(a->dtype) || a->divisor == 0 || a->chunk >= a->divisor) {
        return false;
    }
    const uint64_t len = a->dst.length, esz = ccoip_dtype_size(a->dtype);
    return a->count <= UINT64_MAX / esz && a->count * esz == len && a->src.length == len &&
           len <= UINT64_MAX / a->divisor && a->base.length == a->divisor * len;
}
