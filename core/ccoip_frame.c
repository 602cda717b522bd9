/*
 * ccoip_frame.c — CCoIP framing (docs/protocol.md §3 control frames, §7 data
 * frames). Every multi-byte integer is little-endian and written byte by
 * byte: no struct is ever cast onto the wire (DESIGN.md §2 rule 5).
 */
#include "ccoip_frame.h"

#include <string.h>

/* The wire enums are pccl.h's enums (docs/protocol.md §9): keep them in step. */
_Static_assert(CCOIP_PB_STATUS_SUCCESS == (int)pcclSuccess, "status numbering");
_Static_assert(CCOIP_PB_STATUS_NOT_INITIALIZED == (int)pcclNotInitialized, "status numbering");
_Static_assert(CCOIP_PB_STATUS_INTERNAL_ERROR == (int)pcclInternalError, "status numbering");
_Static_assert(CCOIP_PB_STATUS_INVALID_ARGUMENT == (int)pcclInvalidArgument, "status numbering");
_Static_assert(CCOIP_PB_STATUS_INVALID_USAGE == (int)pcclInvalidUsage, "status numbering");
_Static_assert(CCOIP_PB_STATUS_TOO_FEW_PEERS == (int)pcclTooFewPeers, "status numbering");
_Static_assert(CCOIP_PB_STATUS_MASTER_CONNECTION_FAILED == (int)pcclMasterConnectionFailed,
               "status numbering");
_Static_assert(CCOIP_PB_STATUS_RANK_CONNECTION_FAILED == (int)pcclRankConnectionFailed,
               "status numbering");
_Static_assert(CCOIP_PB_STATUS_RANK_CONNECTION_LOST == (int)pcclRankConnectionLost,
               "status numbering");
_Static_assert(CCOIP_PB_STATUS_NO_SHARED_STATE_AVAILABLE == (int)pcclNoSharedStateAvailable,
               "status numbering");
_Static_assert(CCOIP_PB_STATUS_PENDING_ASYNC_OPS == (int)pcclPendingAsyncOps, "status numbering");
_Static_assert(CCOIP_PB_STATUS_UPDATE_TOPOLOGY_FAILED == (int)pcclUpdateTopologyFailed,
               "status numbering");
_Static_assert(CCOIP_PB_STATUS_TOPOLOGY_OPTIMIZATION_FAILED == (int)pcclTopologyOptimizationFailed,
               "status numbering");
_Static_assert(CCOIP_PB_STATUS_TIMEOUT == (int)pcclTimeout, "status numbering");
_Static_assert(CCOIP_PB_STATUS_SYSTEM_ERROR == (int)pcclSystemError, "status numbering");
_Static_assert(CCOIP_PB_STATUS_REMOTE_ERROR == (int)pcclRemoteError, "status numbering");
_Static_assert(CCOIP_PB_STATUS_SHARED_STATE_SYNC_FAILED == (int)pcclSharedStateSyncFailed,
               "status numbering");
_Static_assert(CCOIP_PB_STATUS_PROTOCOL_ERROR == (int)pcclProtocolError, "status numbering");
_Static_assert(CCOIP_PB_STATUS_AUTHENTICATION_FAILED == (int)pcclAuthenticationFailed,
               "status numbering");
_Static_assert(PCCL_RESULT_COUNT == 19, "a new pcclResult_t needs a Status in ccoip.proto");
_Static_assert(CCOIP_PB_DATA_TYPE_UINT8 == (int)pcclUint8, "dtype numbering");
_Static_assert(CCOIP_PB_DATA_TYPE_INT8 == (int)pcclInt8, "dtype numbering");
_Static_assert(CCOIP_PB_DATA_TYPE_INT16 == (int)pcclInt16, "dtype numbering");
_Static_assert(CCOIP_PB_DATA_TYPE_UINT16 == (int)pcclUint16, "dtype numbering");
_Static_assert(CCOIP_PB_DATA_TYPE_UINT32 == (int)pcclUint32, "dtype numbering");
_Static_assert(CCOIP_PB_DATA_TYPE_INT32 == (int)pcclInt32, "dtype numbering");
_Static_assert(CCOIP_PB_DATA_TYPE_UINT64 == (int)pcclUint64, "dtype numbering");
_Static_assert(CCOIP_PB_DATA_TYPE_INT64 == (int)pcclInt64, "dtype numbering");
_Static_assert(CCOIP_PB_DATA_TYPE_FLOAT16 == (int)pcclFloat16, "dtype numbering");
_Static_assert(CCOIP_PB_DATA_TYPE_BFLOAT16 == (int)pcclBFloat16, "dtype numbering");
_Static_assert(CCOIP_PB_DATA_TYPE_FLOAT == (int)pcclFloat, "dtype numbering");
_Static_assert(CCOIP_PB_DATA_TYPE_DOUBLE == (int)pcclDouble, "dtype numbering");
_Static_assert(PCCL_DATA_TYPE_COUNT == 12, "a new pcclDataType_t needs a DataType");
_Static_assert(CCOIP_PB_RED_OP_SUM == (int)pcclSum, "op numbering");
_Static_assert(CCOIP_PB_RED_OP_AVG == (int)pcclAvg, "op numbering");
_Static_assert(CCOIP_PB_RED_OP_PROD == (int)pcclProd, "op numbering");
_Static_assert(CCOIP_PB_RED_OP_MAX == (int)pcclMax, "op numbering");
_Static_assert(CCOIP_PB_RED_OP_MIN == (int)pcclMin, "op numbering");
_Static_assert(CCOIP_PB_RED_OP_BAND == (int)pcclBand, "op numbering");
_Static_assert(CCOIP_PB_RED_OP_BOR == (int)pcclBor, "op numbering");
_Static_assert(CCOIP_PB_RED_OP_BXOR == (int)pcclBxor, "op numbering");
_Static_assert(CCOIP_PB_RED_OP_PREMUL_SUM == (int)pcclPremulSum, "op numbering");
_Static_assert(PCCL_RED_OP_COUNT == 9, "a new pcclRedOp_t needs a RedOp");
_Static_assert(CCOIP_PB_QUANT_ALGORITHM_NONE == (int)pcclQuantNone, "quant numbering");
_Static_assert(CCOIP_PB_QUANT_ALGORITHM_MIN_MAX == (int)pcclQuantMinMax, "quant numbering");
_Static_assert(CCOIP_PB_QUANT_ALGORITHM_ZERO_POINT_SCALE == (int)pcclQuantZeroPointScale,
               "quant numbering");
_Static_assert(CCOIP_PB_SYNC_STRATEGY_ENFORCE_POPULAR ==
                   (int)PCCL_SHARED_STATE_SYNC_STRATEGY_ENFORCE_POPULAR,
               "strategy numbering");
_Static_assert(CCOIP_PB_SYNC_STRATEGY_RECEIVE_ONLY ==
                   (int)PCCL_SHARED_STATE_SYNC_STRATEGY_RECEIVE_ONLY,
               "strategy numbering");
_Static_assert(CCOIP_PB_SYNC_STRATEGY_SEND_ONLY == (int)PCCL_SHARED_STATE_SYNC_STRATEGY_SEND_ONLY,
               "strategy numbering");

/* Magics: the ASCII bytes "CCoC" (control) and "CCoD" (data), in this order. */
static const uint8_t frame_ctrl_magic[4] = {0x43, 0x43, 0x6F, 0x43};
static const uint8_t frame_data_magic[4] = {0x43, 0x43, 0x6F, 0x44};

/* ---- little-endian helpers ---- */

static void frame_put_u16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static void frame_put_u32(uint8_t *p, uint32_t v)
{
    for (uint32_t i = 0; i < 4u; i++)
        p[i] = (uint8_t)(v >> (8u * i));
}

static void frame_put_u64(uint8_t *p, uint64_t v)
{
    for (uint32_t i = 0; i < 8u; i++)
        p[i] = (uint8_t)(v >> (8u * i));
}

static uint16_t frame_get_u16(const uint8_t *p)
{
    return (uint16_t)(p[0] | (uint16_t)(p[1] << 8));
}

static uint32_t frame_get_u32(const uint8_t *p)
{
    uint32_t v = 0;
    for (uint32_t i = 0; i < 4u; i++)
        v |= (uint32_t)p[i] << (8u * i);
    return v;
}

static uint64_t frame_get_u64(const uint8_t *p)
{
    uint64_t v = 0;
    for (uint32_t i = 0; i < 8u; i++)
        v |= (uint64_t)p[i] << (8u * i);
    return v;
}

static uint64_t frame_f64_bits(double d)
{
    uint64_t bits;
    memcpy(&bits, &d, sizeof(bits));
    return bits;
}

static double frame_bits_f64(uint64_t bits)
{
    double d;
    memcpy(&d, &bits, sizeof(d));
    return d;
}

/* Finite: the exponent field is not all ones (no ±inf, no NaN). */
static bool frame_bits_finite(uint64_t bits)
{
    return ((bits >> 52) & 0x7FFu) != 0x7FFu;
}

static bool frame_version_supported(uint32_t v)
{
    return v >= CCOIP_PROTOCOL_VERSION_MIN && v <= CCOIP_PROTOCOL_VERSION_MAX;
}

static const ccoip_codec_limits *frame_limits(const ccoip_codec_limits *lim,
                                              ccoip_codec_limits *storage)
{
    if (lim != NULL) return lim;
    ccoip_codec_limits_default(storage);
    return storage;
}

void ccoip_codec_limits_default(ccoip_codec_limits *lim)
{
    ccoip_pb_limits_default(&lim->pb);
    lim->max_data_payload_bytes = CCOIP_DEFAULT_MAX_DATA_PAYLOAD_BYTES;
}

pcclResult_t ccoip_version_negotiate(uint32_t peer_min, uint32_t peer_max, uint32_t *version_out)
{
    if (version_out == NULL) return pcclInvalidArgument;
    *version_out = 0;
    if (peer_min == 0 || peer_min > peer_max) return pcclProtocolError;
    if (peer_max < CCOIP_PROTOCOL_VERSION_MIN || peer_min > CCOIP_PROTOCOL_VERSION_MAX) {
        return pcclInvalidUsage;
    }
    *version_out = peer_max < CCOIP_PROTOCOL_VERSION_MAX ? peer_max : CCOIP_PROTOCOL_VERSION_MAX;
    return pcclSuccess;
}

pcclResult_t ccoip_status_to_result(int32_t status)
{
    if (!ccoip_pb_status_is_known(status)) return pcclRemoteError;
    return (pcclResult_t)status;
}

/* ------------------------------------------------------------------------ */
/* Control plane (docs/protocol.md §3)                                      */
/* ------------------------------------------------------------------------ */

pcclResult_t ccoip_ctrl_header_decode(const uint8_t *buf, uint64_t len,
                                      const ccoip_codec_limits *lim, ccoip_ctrl_header *out)
{
    ccoip_codec_limits def;
    uint8_t kind;
    if (buf == NULL || out == NULL) return pcclInvalidArgument;
    lim = frame_limits(lim, &def);
    memset(out, 0, sizeof(*out));
    if (len < CCOIP_CTRL_HEADER_BYTES) return pcclProtocolError;
    if (memcmp(buf, frame_ctrl_magic, sizeof(frame_ctrl_magic)) != 0) return pcclProtocolError;
    /* The magic and the version field never change layout, so a peer of any
     * version gets "unsupported version" rather than garbage (§3 rule 2). */
    out->version = frame_get_u16(buf + 4);
    if (!frame_version_supported(out->version)) return pcclInvalidUsage;
    kind = buf[6];
    if (kind != CCOIP_CTRL_PEER_TO_MASTER && kind != CCOIP_CTRL_MASTER_TO_PEER) {
        return pcclProtocolError;
    }
    out->kind = (ccoip_ctrl_kind)kind;
    out->payload_bytes = frame_get_u32(buf + 8);
    if (buf[7] != 0) return pcclProtocolError; /* flags: none defined in version 1 */
    if (out->payload_bytes > lim->pb.max_message_bytes) return pcclProtocolError;
    return pcclSuccess;
}

static void frame_ctrl_put_header(uint8_t *buf, ccoip_ctrl_kind kind, uint32_t payload_bytes)
{
    memcpy(buf, frame_ctrl_magic, sizeof(frame_ctrl_magic));
    frame_put_u16(buf + 4, (uint16_t)CCOIP_PROTOCOL_VERSION);
    buf[6] = (uint8_t)kind;
    buf[7] = 0;
    frame_put_u32(buf + 8, payload_bytes);
}

/* Checks the payload size and the room for the frame; sets *len_out. */
static pcclResult_t frame_ctrl_begin(const ccoip_codec_limits *lim, uint64_t payload, uint8_t *buf,
                                     uint64_t cap, uint64_t *len_out)
{
    if (payload > lim->pb.max_message_bytes || payload > UINT32_MAX) return pcclInvalidArgument;
    *len_out = CCOIP_CTRL_HEADER_BYTES + payload;
    if (buf == NULL || cap < *len_out) return pcclInvalidArgument;
    return pcclSuccess;
}

pcclResult_t ccoip_ctrl_encode_p2m(const ccoip_pb_peer_to_master *m, const ccoip_codec_limits *lim,
                                   uint8_t *buf, uint64_t cap, uint64_t *len_out)
{
    ccoip_codec_limits def;
    uint64_t payload = 0, written = 0;
    pcclResult_t rc;
    if (len_out == NULL) return pcclInvalidArgument;
    *len_out = 0;
    if (m == NULL) return pcclInvalidArgument;
    if (m->body_case == CCOIP_PB_PEER_TO_MASTER_BODY_NONE) return pcclInvalidArgument;
    lim = frame_limits(lim, &def);
    rc = ccoip_pb_peer_to_master_encoded_size(m, &payload);
    if (rc != pcclSuccess) return rc;
    rc = frame_ctrl_begin(lim, payload, buf, cap, len_out);
    if (rc != pcclSuccess) return rc;
    rc = ccoip_pb_peer_to_master_encode(m, buf + CCOIP_CTRL_HEADER_BYTES, payload, &written);
    if (rc != pcclSuccess) return rc;
    frame_ctrl_put_header(buf, CCOIP_CTRL_PEER_TO_MASTER, (uint32_t)payload);
    return pcclSuccess;
}

pcclResult_t ccoip_ctrl_encode_m2p(const ccoip_pb_master_to_peer *m, const ccoip_codec_limits *lim,
                                   uint8_t *buf, uint64_t cap, uint64_t *len_out)
{
    ccoip_codec_limits def;
    uint64_t payload = 0, written = 0;
    pcclResult_t rc;
    if (len_out == NULL) return pcclInvalidArgument;
    *len_out = 0;
    if (m == NULL) return pcclInvalidArgument;
    lim = frame_limits(lim, &def);
    rc = ccoip_pb_master_to_peer_encoded_size(m, &payload);
    if (rc != pcclSuccess) return rc;
    rc = frame_ctrl_begin(lim, payload, buf, cap, len_out);
    if (rc != pcclSuccess) return rc;
    rc = ccoip_pb_master_to_peer_encode(m, buf + CCOIP_CTRL_HEADER_BYTES, payload, &written);
    if (rc != pcclSuccess) return rc;
    frame_ctrl_put_header(buf, CCOIP_CTRL_MASTER_TO_PEER, (uint32_t)payload);
    return pcclSuccess;
}

/* Validates the header of a complete frame of the expected kind. */
static pcclResult_t frame_ctrl_check(const uint8_t *frame, uint64_t len,
                                     const ccoip_codec_limits *lim, ccoip_ctrl_kind want)
{
    ccoip_ctrl_header h;
    pcclResult_t rc = ccoip_ctrl_header_decode(frame, len, lim, &h);
    if (rc != pcclSuccess) return rc;
    if (h.kind != want) return pcclProtocolError;
    /* Exactly one frame: a prefix is truncated, anything after it is garbage. */
    if (len - CCOIP_CTRL_HEADER_BYTES != h.payload_bytes) return pcclProtocolError;
    return pcclSuccess;
}

pcclResult_t ccoip_ctrl_decode_p2m(const uint8_t *frame, uint64_t len,
                                   const ccoip_codec_limits *lim, ccoip_pb_arena *arena,
                                   ccoip_pb_peer_to_master *out)
{
    ccoip_codec_limits def;
    pcclResult_t rc;
    if (frame == NULL || out == NULL) return pcclInvalidArgument;
    lim = frame_limits(lim, &def);
    rc = frame_ctrl_check(frame, len, lim, CCOIP_CTRL_PEER_TO_MASTER);
    if (rc != pcclSuccess) return rc;
    return ccoip_pb_peer_to_master_decode(frame + CCOIP_CTRL_HEADER_BYTES,
                                          len - CCOIP_CTRL_HEADER_BYTES, &lim->pb, arena, out);
}

pcclResult_t ccoip_ctrl_decode_m2p(const uint8_t *frame, uint64_t len,
                                   const ccoip_codec_limits *lim, ccoip_pb_arena *arena,
                                   ccoip_pb_master_to_peer *out)
{
    ccoip_codec_limits def;
    pcclResult_t rc;
    if (frame == NULL || out == NULL) return pcclInvalidArgument;
    lim = frame_limits(lim, &def);
    rc = frame_ctrl_check(frame, len, lim, CCOIP_CTRL_MASTER_TO_PEER);
    if (rc != pcclSuccess) return rc;
    return ccoip_pb_master_to_peer_decode(frame + CCOIP_CTRL_HEADER_BYTES,
                                          len - CCOIP_CTRL_HEADER_BYTES, &lim->pb, arena, out);
}

/* ------------------------------------------------------------------------ */
/* Data plane (docs/protocol.md §7)                                         */
/* ------------------------------------------------------------------------ */

/* Byte offsets of the data-frame header fields (§7.1). */
enum {
    DATA_OFF_MAGIC = 0,
    DATA_OFF_VERSION = 4,
    DATA_OFF_KIND = 6,
    DATA_OFF_FLAGS = 7,
    DATA_OFF_EPOCH = 8,
    DATA_OFF_TAG = 16,
    DATA_OFF_SEQ = 24,
    DATA_OFF_CHUNK = 32,
    DATA_OFF_STEP = 36,
    DATA_OFF_OFFSET = 40,
    DATA_OFF_LENGTH = 48,
    DATA_OFF_QALGO = 56,
    DATA_OFF_QSRC = 57,
    DATA_OFF_QTYPE = 58,
    DATA_OFF_RESERVED = 59, /* 5 bytes, zero */
    DATA_OFF_QA = 64,
    DATA_OFF_QB = 72
};

/* Kinds whose frames never carry a payload. */
static bool frame_kind_empty(uint32_t kind)
{
    return kind == CCOIP_DATA_HELLO_ACK || kind == CCOIP_DATA_PROBE_REQUEST ||
           kind == CCOIP_DATA_PROBE_ACCEPT || kind == CCOIP_DATA_PROBE_BUSY ||
           kind == CCOIP_DATA_CHALLENGE;
}

/* Kinds that carry no payload, or in an authenticated run exactly a proof (§8.0). */
static bool frame_kind_proof(uint32_t kind)
{
    return kind == CCOIP_DATA_HELLO || kind == CCOIP_DATA_STATE_OFFER ||
           kind == CCOIP_DATA_RELAY_JOIN;
}

/*
 * The rules of §7.2 that do not depend on the encoding, on raw field values:
 * shared by the encoder (a violation is the caller's bug) and the decoder (a
 * violation is the remote's).
 */
typedef struct frame_data_raw {
    uint32_t version, kind, qalgo, qsrc, qtype;
    uint64_t offset, length, qa, qb;
} frame_data_raw;

static bool frame_data_valid(const frame_data_raw *r, const ccoip_codec_limits *lim)
{
    if (r->kind == 0 || r->kind >= CCOIP_DATA_KIND_END) return false;
    if (r->length > lim->max_data_payload_bytes) return false;
    if (r->offset > UINT64_MAX - r->length) return false;
    if (frame_kind_empty(r->kind) && r->length != 0) return false;
    if (frame_kind_proof(r->kind) && r->length != 0 && r->length != CCOIP_DATA_PROOF_BYTES)
        return false;
    if ((r->kind == CCOIP_DATA_STATE_REQUEST || r->kind == CCOIP_DATA_STATE_RESPONSE) &&
        r->length > lim->pb.max_message_bytes) {
        return false;
    }
    if (r->qalgo == pcclQuantNone) {
        return r->qsrc == 0 && r->qtype == 0 && r->qa == 0 && r->qb == 0;
    }
    if (r->kind != CCOIP_DATA_RING_CHUNK) return false;
    if (r->qsrc >= PCCL_DATA_TYPE_COUNT || r->qtype >= PCCL_DATA_TYPE_COUNT) return false;
    if (r->qalgo == pcclQuantMinMax) {
        /* qa = min, qb = max: finite and ordered. */
        if (!frame_bits_finite(r->qa) || !frame_bits_finite(r->qb)) return false;
        return frame_bits_f64(r->qa) <= frame_bits_f64(r->qb);
    }
    if (r->qalgo == pcclQuantZeroPointScale) {
        /* qa = scale, finite and positive; qb = the zero point, any int64. */
        return frame_bits_finite(r->qa) && frame_bits_f64(r->qa) > 0.0;
    }
    return false;
}

void ccoip_data_header_init(ccoip_data_header *h, ccoip_data_kind kind)
{
    memset(h, 0, sizeof(*h));
    h->version = (uint16_t)CCOIP_PROTOCOL_VERSION;
    h->kind = kind;
    h->quant.algorithm = pcclQuantNone;
}

pcclResult_t ccoip_data_header_encode(const ccoip_data_header *h, const ccoip_codec_limits *lim,
                                      uint8_t *buf, uint64_t cap)
{
    ccoip_codec_limits def;
    frame_data_raw r;
    if (h == NULL || buf == NULL || cap < CCOIP_DATA_HEADER_BYTES) return pcclInvalidArgument;
    lim = frame_limits(lim, &def);
    if (!frame_version_supported(h->version)) return pcclInvalidArgument;
    memset(&r, 0, sizeof(r));
    r.version = h->version;
    r.kind = (uint32_t)h->kind;
    r.offset = h->offset;
    r.length = h->length;
    r.qalgo = (uint32_t)h->quant.algorithm;
    if (h->quant.algorithm != pcclQuantNone) {
        r.qsrc = (uint32_t)h->quant.src_type;
        r.qtype = (uint32_t)h->quant.quant_type;
        if (h->quant.algorithm == pcclQuantMinMax) {
            r.qa = frame_f64_bits(h->quant.min_value);
            r.qb = frame_f64_bits(h->quant.max_value);
        } else {
            r.qa = frame_f64_bits(h->quant.scale);
            r.qb = (uint64_t)h->quant.zero_point; /* two's complement */
        }
    }
    if (!frame_data_valid(&r, lim)) return pcclInvalidArgument;
    memset(buf, 0, CCOIP_DATA_HEADER_BYTES);
    memcpy(buf + DATA_OFF_MAGIC, frame_data_magic, sizeof(frame_data_magic));
    frame_put_u16(buf + DATA_OFF_VERSION, h->version);
    buf[DATA_OFF_KIND] = (uint8_t)r.kind;
    buf[DATA_OFF_FLAGS] = 0;
    frame_put_u64(buf + DATA_OFF_EPOCH, h->epoch);
    frame_put_u64(buf + DATA_OFF_TAG, h->tag);
    frame_put_u64(buf + DATA_OFF_SEQ, h->seq);
    frame_put_u32(buf + DATA_OFF_CHUNK, h->chunk);
    frame_put_u32(buf + DATA_OFF_STEP, h->step);
    frame_put_u64(buf + DATA_OFF_OFFSET, h->offset);
    frame_put_u64(buf + DATA_OFF_LENGTH, h->length);
    buf[DATA_OFF_QALGO] = (uint8_t)r.qalgo;
    buf[DATA_OFF_QSRC] = (uint8_t)r.qsrc;
    buf[DATA_OFF_QTYPE] = (uint8_t)r.qtype;
    frame_put_u64(buf + DATA_OFF_QA, r.qa);
    frame_put_u64(buf + DATA_OFF_QB, r.qb);
    return pcclSuccess;
}

pcclResult_t ccoip_data_header_decode(const uint8_t *buf, uint64_t len,
                                      const ccoip_codec_limits *lim, ccoip_data_header *out)
{
    ccoip_codec_limits def;
    frame_data_raw r;
    if (buf == NULL || out == NULL) return pcclInvalidArgument;
    lim = frame_limits(lim, &def);
    memset(out, 0, sizeof(*out));
    if (len < CCOIP_DATA_HEADER_BYTES) return pcclProtocolError;
    if (memcmp(buf + DATA_OFF_MAGIC, frame_data_magic, sizeof(frame_data_magic)) != 0) {
        return pcclProtocolError;
    }
    out->version = frame_get_u16(buf + DATA_OFF_VERSION);
    if (!frame_version_supported(out->version)) return pcclInvalidUsage;
    if (buf[DATA_OFF_FLAGS] != 0) return pcclProtocolError;
    for (uint32_t i = DATA_OFF_RESERVED; i < DATA_OFF_QA; i++) {
        if (buf[i] != 0) return pcclProtocolError;
    }
    memset(&r, 0, sizeof(r));
    r.version = out->version;
    r.kind = buf[DATA_OFF_KIND];
    r.offset = frame_get_u64(buf + DATA_OFF_OFFSET);
    r.length = frame_get_u64(buf + DATA_OFF_LENGTH);
    r.qalgo = buf[DATA_OFF_QALGO];
    r.qsrc = buf[DATA_OFF_QSRC];
    r.qtype = buf[DATA_OFF_QTYPE];
    r.qa = frame_get_u64(buf + DATA_OFF_QA);
    r.qb = frame_get_u64(buf + DATA_OFF_QB);
    if (!frame_data_valid(&r, lim)) return pcclProtocolError;
    out->kind = (ccoip_data_kind)r.kind;
    out->epoch = frame_get_u64(buf + DATA_OFF_EPOCH);
    out->tag = frame_get_u64(buf + DATA_OFF_TAG);
    out->seq = frame_get_u64(buf + DATA_OFF_SEQ);
    out->chunk = frame_get_u32(buf + DATA_OFF_CHUNK);
    out->step = frame_get_u32(buf + DATA_OFF_STEP);
    out->offset = r.offset;
    out->length = r.length;
    out->quant.algorithm = (pcclQuantizationAlgorithm_t)r.qalgo;
    if (r.qalgo != pcclQuantNone) {
        out->quant.src_type = (pcclDataType_t)r.qsrc;
        out->quant.quant_type = (pcclDataType_t)r.qtype;
        if (r.qalgo == pcclQuantMinMax) {
            out->quant.min_value = frame_bits_f64(r.qa);
            out->quant.max_value = frame_bits_f64(r.qb);
        } else {
            out->quant.scale = frame_bits_f64(r.qa);
            /* Two's complement back to int64 without an implementation-defined cast. */
            out->quant.zero_point =
                r.qb <= (uint64_t)INT64_MAX ? (int64_t)r.qb : -(int64_t)(~r.qb) - 1;
        }
    }
    return pcclSuccess;
}
