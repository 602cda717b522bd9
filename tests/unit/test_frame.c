/*
 * test_frame.c — CCoIP framing (core/ccoip_frame.h, docs/protocol.md §3, §7):
 * control frames around the golden envelopes, the 80-byte data header, and
 * every way a frame can be wrong.
 */
#include <stdlib.h>
#include <string.h>

#include "../../schema/gen/golden_vectors.h"
#include "ccoip_frame.h"
#include "ptest.h"

static uint64_t arena_mem[1u << 15];

static ccoip_pb_arena fresh_arena(void)
{
    ccoip_pb_arena a;
    ccoip_pb_arena_init(&a, arena_mem, sizeof(arena_mem));
    return a;
}

/* Frames the golden envelope payload v the way a peer or the master would. */
static uint64_t frame_of(const golden_vector *v, uint8_t *buf, uint64_t cap)
{
    uint64_t len = 0;
    ccoip_pb_arena a = fresh_arena();
    if (strcmp(v->type, "ccoip.PeerToMaster") == 0) {
        ccoip_pb_peer_to_master m;
        PT_ASSERT(ccoip_pb_peer_to_master_decode(v->bytes, v->len, NULL, &a, &m) == pcclSuccess,
                  "%s", v->id);
        PT_ASSERT(ccoip_ctrl_encode_p2m(&m, NULL, buf, cap, &len) == pcclSuccess, "%s", v->id);
    } else {
        ccoip_pb_master_to_peer m;
        PT_ASSERT(ccoip_pb_master_to_peer_decode(v->bytes, v->len, NULL, &a, &m) == pcclSuccess,
                  "%s", v->id);
        PT_ASSERT(ccoip_ctrl_encode_m2p(&m, NULL, buf, cap, &len) == pcclSuccess, "%s", v->id);
    }
    PT_ASSERT(len == CCOIP_CTRL_HEADER_BYTES + v->len, "%s: frame length", v->id);
    PT_ASSERT(memcmp(buf + CCOIP_CTRL_HEADER_BYTES, v->bytes, (size_t)v->len) == 0,
              "%s: payload is the envelope", v->id);
    return len;
}

static bool is_envelope(const golden_vector *v)
{
    return strcmp(v->type, "ccoip.PeerToMaster") == 0 || strcmp(v->type, "ccoip.MasterToPeer") == 0;
}

/* Decodes frame[0 .. n) as its direction (an exact-size copy, for sanitizers). */
static pcclResult_t decode_frame(bool p2m, const uint8_t *frame, uint64_t n)
{
    uint8_t *copy = malloc((size_t)n + 1u);
    ccoip_pb_arena a = fresh_arena();
    pcclResult_t rc;
    PT_ASSERT(copy != NULL, "malloc");
    if (n > 0) memcpy(copy, frame, (size_t)n);
    if (p2m) {
        ccoip_pb_peer_to_master m;
        rc = ccoip_ctrl_decode_p2m(copy, n, NULL, &a, &m);
    } else {
        ccoip_pb_master_to_peer m;
        rc = ccoip_ctrl_decode_m2p(copy, n, NULL, &a, &m);
    }
    free(copy);
    return rc;
}

PTEST(frame, ctrl_header_layout)
{
    const golden_vector *v = &golden_vectors[0];
    uint8_t buf[256];
    uint64_t len;
    ccoip_ctrl_header h;
    for (uint32_t i = 0; i < GOLDEN_VECTOR_COUNT; i++) {
        if (strcmp(golden_vectors[i].id, "PeerToMaster.heartbeat") == 0) v = &golden_vectors[i];
    }
    len = frame_of(v, buf, sizeof(buf));
    /* "CCoC", version 1, kind 1 (peer to master), flags 0, payload length, little-endian. */
    PT_ASSERT(buf[0] == 'C' && buf[1] == 'C' && buf[2] == 'o' && buf[3] == 'C', "magic");
    PT_ASSERT(buf[4] == 1 && buf[5] == 0 && buf[6] == 1 && buf[7] == 0, "version, kind, flags");
    PT_ASSERT(buf[8] == (uint8_t)v->len && buf[9] == 0 && buf[10] == 0 && buf[11] == 0, "length");
    PT_ASSERT(ccoip_ctrl_header_decode(buf, len, NULL, &h) == pcclSuccess, "header");
    PT_ASSERT(h.version == CCOIP_PROTOCOL_VERSION && h.kind == CCOIP_CTRL_PEER_TO_MASTER &&
                  h.payload_bytes == v->len,
              "decoded header");
    PT_ASSERT(ccoip_ctrl_header_decode(buf, CCOIP_CTRL_HEADER_BYTES, NULL, &h) == pcclSuccess,
              "the header alone is enough to learn the frame length");
}

PTEST(frame, ctrl_round_trip_every_envelope)
{
    uint8_t buf[4096];
    uint32_t n = 0;
    for (uint32_t i = 0; i < GOLDEN_VECTOR_COUNT; i++) {
        const golden_vector *v = &golden_vectors[i];
        bool p2m = strcmp(v->type, "ccoip.PeerToMaster") == 0;
        uint64_t len;
        if (!is_envelope(v)) continue;
        len = frame_of(v, buf, sizeof(buf));
        PT_ASSERT(decode_frame(p2m, buf, len) == pcclSuccess, "%s", v->id);
        PT_ASSERT(decode_frame(!p2m, buf, len) == pcclProtocolError, "%s: wrong direction", v->id);
        n++;
    }
    PT_ASSERT(n == 30, "%u envelopes", n);
}

PTEST(frame, ctrl_every_prefix_and_any_trailer_rejected)
{
    uint8_t buf[4096];
    for (uint32_t i = 0; i < GOLDEN_VECTOR_COUNT; i++) {
        const golden_vector *v = &golden_vectors[i];
        bool p2m = strcmp(v->type, "ccoip.PeerToMaster") == 0;
        uint64_t len;
        if (!is_envelope(v)) continue;
        len = frame_of(v, buf, sizeof(buf) - 1);
        for (uint64_t k = 0; k < len; k++) {
            PT_ASSERT(decode_frame(p2m, buf, k) == pcclProtocolError, "%s: prefix of %llu bytes",
                      v->id, (unsigned long long)k);
        }
        buf[len] = 0;
        PT_ASSERT(decode_frame(p2m, buf, len + 1) == pcclProtocolError, "%s: trailing byte", v->id);
    }
}

PTEST(frame, ctrl_bad_headers)
{
    uint8_t buf[64];
    uint64_t len;
    ccoip_ctrl_header h;
    ccoip_codec_limits lim;
    ccoip_pb_peer_to_master m;
    memset(&m, 0, sizeof(m));
    m.body_case = CCOIP_PB_PEER_TO_MASTER_BODY_HEARTBEAT;
    m.body.heartbeat.counter = 3;
    PT_ASSERT(ccoip_ctrl_encode_p2m(&m, NULL, buf, sizeof(buf), &len) == pcclSuccess, "encode");
    buf[2] = 'x';
    PT_ASSERT(decode_frame(true, buf, len) == pcclProtocolError, "magic");
    buf[2] = 'o';
    buf[6] = 3;
    PT_ASSERT(decode_frame(true, buf, len) == pcclProtocolError, "kind 3");
    buf[6] = 1;
    buf[7] = 1;
    PT_ASSERT(decode_frame(true, buf, len) == pcclProtocolError, "flags");
    buf[7] = 0;
    buf[4] = 2;
    PT_ASSERT(decode_frame(true, buf, len) == pcclInvalidUsage, "version 2");
    PT_ASSERT(ccoip_ctrl_header_decode(buf, len, NULL, &h) == pcclInvalidUsage && h.version == 2,
              "the peer's version is reported");
    buf[4] = 0;
    PT_ASSERT(decode_frame(true, buf, len) == pcclInvalidUsage, "version 0");
    buf[4] = 1;
    ccoip_codec_limits_default(&lim);
    lim.pb.max_message_bytes = 2;
    PT_ASSERT(ccoip_ctrl_header_decode(buf, len, &lim, &h) == pcclProtocolError,
              "payload above the limit, from the header alone");
    buf[8] = 0xff;
    buf[11] = 0xff;
    PT_ASSERT(ccoip_ctrl_header_decode(buf, CCOIP_CTRL_HEADER_BYTES, NULL, &h) == pcclProtocolError,
              "a 4 GiB announcement");
    PT_ASSERT(ccoip_ctrl_header_decode(NULL, 12, NULL, &h) == pcclInvalidArgument, "NULL");
}

PTEST(frame, ctrl_encoders_validate)
{
    uint8_t buf[64];
    uint64_t len = 0;
    ccoip_codec_limits lim;
    ccoip_pb_peer_to_master p;
    ccoip_pb_master_to_peer m;
    memset(&p, 0, sizeof(p));
    memset(&m, 0, sizeof(m));
    PT_ASSERT(ccoip_ctrl_encode_p2m(&p, NULL, buf, sizeof(buf), &len) == pcclInvalidArgument,
              "a peer frame needs a body");
    m.status = CCOIP_PB_STATUS_INVALID_USAGE;
    m.reason = CCOIP_PB_REASON_VERSION_MISMATCH;
    PT_ASSERT(ccoip_ctrl_encode_m2p(&m, NULL, buf, sizeof(buf), &len) == pcclSuccess,
              "a body-less error answer");
    PT_ASSERT(decode_frame(false, buf, len) == pcclSuccess, "decodes");
    p.body_case = CCOIP_PB_PEER_TO_MASTER_BODY_HELLO;
    p.body.hello.software = ccoip_pb_str("0123456789");
    PT_ASSERT(ccoip_ctrl_encode_p2m(&p, NULL, buf, 10, &len) == pcclInvalidArgument, "small cap");
    PT_ASSERT(len == CCOIP_CTRL_HEADER_BYTES + 15, "needed %llu", (unsigned long long)len);
    ccoip_codec_limits_default(&lim);
    lim.pb.max_message_bytes = 8;
    PT_ASSERT(ccoip_ctrl_encode_p2m(&p, &lim, buf, sizeof(buf), &len) == pcclInvalidArgument,
              "payload above the limit");
    PT_ASSERT(ccoip_ctrl_encode_p2m(&p, NULL, buf, sizeof(buf), NULL) == pcclInvalidArgument,
              "NULL len_out");
}

PTEST(frame, version_negotiation_and_status)
{
    uint32_t v = 0;
    PT_ASSERT(ccoip_version_negotiate(1, 1, &v) == pcclSuccess && v == 1, "1..1");
    PT_ASSERT(ccoip_version_negotiate(1, 9, &v) == pcclSuccess && v == 1, "1..9");
    PT_ASSERT(ccoip_version_negotiate(2, 3, &v) == pcclInvalidUsage && v == 0, "2..3");
    PT_ASSERT(ccoip_version_negotiate(0, 1, &v) == pcclProtocolError, "0..1");
    PT_ASSERT(ccoip_version_negotiate(3, 2, &v) == pcclProtocolError, "3..2");
    PT_ASSERT(ccoip_status_to_result(CCOIP_PB_STATUS_RANK_CONNECTION_LOST) ==
                  pcclRankConnectionLost,
              "known status");
    PT_ASSERT(ccoip_status_to_result(4242) == pcclRemoteError, "unknown status");
}

/* A hand-computed data header: RING_CHUNK, MinMax over float → uint8. */
static const uint8_t golden_ring_minmax[CCOIP_DATA_HEADER_BYTES] = {
    'C',  'C',  'o',  'D', 0x01, 0x00, 0x03, 0x00, /* magic, ver, kind, flags */
    0x05, 0,    0,    0,   0,    0,    0,    0,    /* epoch 5 */
    0x11, 0,    0,    0,   0,    0,    0,    0,    /* tag 17 */
    0x63, 0,    0,    0,   0,    0,    0,    0,    /* seq 99 */
    0x01, 0,    0,    0,   0x02, 0,    0,    0,    /* chunk 1, step 2 */
    0x00, 0x10, 0,    0,   0,    0,    0,    0,    /* offset 4096 */
    0x00, 0x01, 0,    0,   0,    0,    0,    0,    /* length 256 */
    0x01, 0x0a, 0x00, 0,   0,    0,    0,    0,    /* MinMax, f32, u8 */
    0,    0,    0,    0,   0,    0,    0xf8, 0xbf, /* min -1.5 */
    0,    0,    0,    0,   0,    0,    0x02, 0x40, /* max 2.25 */
};

static ccoip_data_header ring_minmax(void)
{
    ccoip_data_header h;
    ccoip_data_header_init(&h, CCOIP_DATA_RING_CHUNK);
    h.epoch = 5;
    h.tag = 17;
    h.seq = 99;
    h.chunk = 1;
    h.step = 2;
    h.offset = 4096;
    h.length = 256;
    h.quant.algorithm = pcclQuantMinMax;
    h.quant.src_type = pcclFloat;
    h.quant.quant_type = pcclUint8;
    h.quant.min_value = -1.5;
    h.quant.max_value = 2.25;
    return h;
}

static pcclResult_t decode_data(const uint8_t *b, uint64_t n, ccoip_data_header *out)
{
    uint8_t *copy = malloc((size_t)n + 1u);
    pcclResult_t rc;
    PT_ASSERT(copy != NULL, "malloc");
    if (n > 0) memcpy(copy, b, (size_t)n);
    rc = ccoip_data_header_decode(copy, n, NULL, out);
    free(copy);
    return rc;
}

PTEST(frame, data_header_golden_bytes)
{
    ccoip_data_header h = ring_minmax(), d;
    uint8_t buf[CCOIP_DATA_HEADER_BYTES];
    PT_ASSERT(ccoip_data_header_encode(&h, NULL, buf, sizeof(buf)) == pcclSuccess, "encode");
    PT_ASSERT(memcmp(buf, golden_ring_minmax, sizeof(buf)) == 0, "layout of docs/protocol.md §7");
    PT_ASSERT(decode_data(golden_ring_minmax, sizeof(golden_ring_minmax), &d) == pcclSuccess,
              "decode");
    PT_ASSERT(d.kind == CCOIP_DATA_RING_CHUNK && d.epoch == 5 && d.tag == 17 && d.seq == 99 &&
                  d.chunk == 1 && d.step == 2 && d.offset == 4096 && d.length == 256,
              "fields");
    PT_ASSERT(d.quant.algorithm == pcclQuantMinMax && d.quant.src_type == pcclFloat &&
                  d.quant.min_value == -1.5 && d.quant.max_value == 2.25,
              "quant");
    for (uint64_t k = 0; k < sizeof(buf); k++) {
        PT_ASSERT(decode_data(buf, k, &d) == pcclProtocolError, "prefix of %llu bytes",
                  (unsigned long long)k);
    }
}

PTEST(frame, data_header_round_trip_every_kind)
{
    uint8_t buf[CCOIP_DATA_HEADER_BYTES];
    for (uint32_t k = 1; k < CCOIP_DATA_KIND_END; k++) {
        ccoip_data_header h, d;
        ccoip_data_header_init(&h, (ccoip_data_kind)k);
        h.epoch = 1000u + k;
        h.tag = UINT64_MAX - k;
        h.seq = k;
        h.chunk = UINT32_MAX;
        h.step = k;
        h.offset = (uint64_t)1 << 40;
        if (k == CCOIP_DATA_RING_CHUNK || k == CCOIP_DATA_STATE_DATA ||
            k == CCOIP_DATA_PROBE_DATA) {
            h.length = (uint64_t)1 << 30;
        } else if (k == CCOIP_DATA_STATE_REQUEST || k == CCOIP_DATA_STATE_RESPONSE) {
            h.length = 100;
        }
        if (k == CCOIP_DATA_RING_CHUNK) {
            h.quant.algorithm = pcclQuantZeroPointScale;
            h.quant.src_type = pcclDouble;
            h.quant.quant_type = pcclInt8;
            h.quant.scale = 0.0078125;
            h.quant.zero_point = -3;
        }
        PT_ASSERT(ccoip_data_header_encode(&h, NULL, buf, sizeof(buf)) == pcclSuccess, "kind %u",
                  k);
        PT_ASSERT(decode_data(buf, sizeof(buf), &d) == pcclSuccess, "kind %u decode", k);
        PT_ASSERT(memcmp(&h.quant, &d.quant, sizeof(h.quant)) == 0 || k != CCOIP_DATA_RING_CHUNK,
                  "quant");
        PT_ASSERT(d.kind == h.kind && d.epoch == h.epoch && d.tag == h.tag && d.seq == h.seq &&
                      d.chunk == h.chunk && d.step == h.step && d.offset == h.offset &&
                      d.length == h.length && d.quant.zero_point == h.quant.zero_point,
                  "kind %u fields", k);
    }
}

/* Applies one corruption to a copy of the golden header and expects the decoder to refuse. */
static void expect_rejected(uint32_t at, uint8_t value, pcclResult_t want, const char *what)
{
    uint8_t b[CCOIP_DATA_HEADER_BYTES];
    ccoip_data_header d;
    memcpy(b, golden_ring_minmax, sizeof(b));
    b[at] = value;
    PT_ASSERT(decode_data(b, sizeof(b), &d) == want, "%s", what);
}

PTEST(frame, data_header_rejects)
{
    ccoip_codec_limits lim;
    ccoip_data_header d;
    uint8_t b[CCOIP_DATA_HEADER_BYTES];
    expect_rejected(3, 'X', pcclProtocolError, "magic");
    expect_rejected(4, 2, pcclInvalidUsage, "version 2");
    expect_rejected(6, 0, pcclProtocolError, "kind 0");
    expect_rejected(6, CCOIP_DATA_KIND_END, pcclProtocolError, "kind 14");
    expect_rejected(6, CCOIP_DATA_STATE_DATA, pcclProtocolError, "quantized shared state");
    expect_rejected(7, 1, pcclProtocolError, "flags");
    for (uint32_t i = 59; i < 64; i++)
        expect_rejected(i, 1, pcclProtocolError, "reserved");
    expect_rejected(56, 3, pcclProtocolError, "algorithm 3");
    expect_rejected(57, 12, pcclProtocolError, "source type 12");
    expect_rejected(58, 12, pcclProtocolError, "quantized type 12");
    expect_rejected(71, 0x7f, pcclProtocolError, "min is NaN");
    expect_rejected(79, 0xc0, pcclProtocolError, "max below min");
    expect_rejected(55, 0x80, pcclProtocolError, "length above 1 GiB");
    memcpy(b, golden_ring_minmax, sizeof(b));
    memset(b + 40, 0xff, 8);
    PT_ASSERT(decode_data(b, sizeof(b), &d) == pcclProtocolError, "offset + length overflows");
    memcpy(b, golden_ring_minmax, sizeof(b));
    b[56] = 0; /* no quantization, but the metadata bytes are still set */
    PT_ASSERT(decode_data(b, sizeof(b), &d) == pcclProtocolError, "stray quantization bytes");
    memset(b + 57, 0, 2);
    memset(b + 64, 0, 16);
    PT_ASSERT(decode_data(b, sizeof(b), &d) == pcclSuccess, "unquantized ring chunk");
    b[6] = CCOIP_DATA_HELLO;
    PT_ASSERT(decode_data(b, sizeof(b), &d) == pcclProtocolError, "a payload on HELLO");
    memset(b + 48, 0, 8);
    PT_ASSERT(decode_data(b, sizeof(b), &d) == pcclSuccess, "HELLO");
    ccoip_codec_limits_default(&lim);
    lim.max_data_payload_bytes = 255;
    PT_ASSERT(ccoip_data_header_decode(golden_ring_minmax, sizeof(golden_ring_minmax), &lim, &d) ==
                  pcclProtocolError,
              "length above the configured limit");
}

PTEST(frame, data_header_encoder_validates)
{
    uint8_t buf[CCOIP_DATA_HEADER_BYTES];
    ccoip_data_header h = ring_minmax();
    PT_ASSERT(ccoip_data_header_encode(&h, NULL, buf, sizeof(buf) - 1) == pcclInvalidArgument,
              "cap");
    h.quant.max_value = -2.0;
    PT_ASSERT(ccoip_data_header_encode(&h, NULL, buf, sizeof(buf)) == pcclInvalidArgument,
              "max < min");
    h = ring_minmax();
    h.quant.algorithm = pcclQuantZeroPointScale;
    h.quant.scale = 0.0;
    PT_ASSERT(ccoip_data_header_encode(&h, NULL, buf, sizeof(buf)) == pcclInvalidArgument,
              "scale 0");
    h = ring_minmax();
    h.kind = CCOIP_DATA_PROBE_DATA;
    PT_ASSERT(ccoip_data_header_encode(&h, NULL, buf, sizeof(buf)) == pcclInvalidArgument,
              "quantized probe");
    h = ring_minmax();
    h.version = 7;
    PT_ASSERT(ccoip_data_header_encode(&h, NULL, buf, sizeof(buf)) == pcclInvalidArgument,
              "version");
    h = ring_minmax();
    h.kind = (ccoip_data_kind)0;
    PT_ASSERT(ccoip_data_header_encode(&h, NULL, buf, sizeof(buf)) == pcclInvalidArgument, "kind");
    h = ring_minmax();
    h.offset = UINT64_MAX;
    PT_ASSERT(ccoip_data_header_encode(&h, NULL, buf, sizeof(buf)) == pcclInvalidArgument,
              "offset overflow");
}
