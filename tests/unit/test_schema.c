/*
 * test_schema.c — the rules of the generated control-plane codec
 * (schema/gen/ccoip_pb.h, docs/protocol.md §4): malformed input is rejected
 * with pcclProtocolError, unknown fields are skipped, limits hold, encoders
 * validate. Byte strings are written out by hand, field by field.
 */
#include <stdlib.h>
#include <string.h>

#include "ccoip_pb.h"
#include "ptest.h"

/* Arena for decoded repeated fields; 8-byte aligned storage. */
static uint64_t arena_mem[1u << 14];

static ccoip_pb_arena fresh_arena(void)
{
    ccoip_pb_arena a;
    ccoip_pb_arena_init(&a, arena_mem, sizeof(arena_mem));
    return a;
}

/* Decodes bytes through the type-erased table, into a zeroed struct of the type. */
static pcclResult_t decode_as(const char *type, const uint8_t *b, uint64_t n,
                              const ccoip_pb_limits *lim, void *out)
{
    const ccoip_pb_message_desc *d = ccoip_pb_find_message(type);
    ccoip_pb_arena a = fresh_arena();
    uint8_t *copy;
    pcclResult_t rc;
    PT_ASSERT(d != NULL, "unknown type %s", type);
    /* An exact-size copy, so that sanitizers see any read past the input. */
    copy = malloc((size_t)n + 1u);
    PT_ASSERT(copy != NULL, "malloc");
    if (n > 0) memcpy(copy, b, (size_t)n);
    rc = d->decode(copy, n, lim, &a, out);
    free(copy);
    return rc;
}

static pcclResult_t heartbeat(const uint8_t *b, uint64_t n, ccoip_pb_heartbeat *out)
{
    return decode_as("ccoip.Heartbeat", b, n, NULL, out);
}

PTEST(schema, varints_are_bounded)
{
    static const uint8_t max[] = {0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01};
    static const uint8_t over[] = {0x08, 0xff, 0xff, 0xff, 0xff, 0xff,
                                   0xff, 0xff, 0xff, 0xff, 0x02};
    static const uint8_t eleven[] = {0x08, 0xff, 0xff, 0xff, 0xff, 0xff,
                                     0xff, 0xff, 0xff, 0xff, 0x80, 0x01};
    static const uint8_t trunc[] = {0x08, 0xff};
    static const uint8_t tag_trunc[] = {0x80};
    ccoip_pb_heartbeat h;
    PT_ASSERT(heartbeat(max, sizeof(max), &h) == pcclSuccess, "10-byte varint of 2^64-1");
    PT_ASSERT(h.counter == UINT64_MAX, "counter %llu", (unsigned long long)h.counter);
    PT_ASSERT(heartbeat(over, sizeof(over), &h) == pcclProtocolError, "varint above 2^64-1");
    PT_ASSERT(heartbeat(eleven, sizeof(eleven), &h) == pcclProtocolError, "11-byte varint");
    PT_ASSERT(heartbeat(trunc, sizeof(trunc), &h) == pcclProtocolError, "truncated varint");
    PT_ASSERT(heartbeat(tag_trunc, sizeof(tag_trunc), &h) == pcclProtocolError, "truncated tag");
}

PTEST(schema, lengths_are_never_trusted)
{
    static const uint8_t short_len[] = {0x1a, 0x05, 'a', 'b'};
    static const uint8_t huge_len[] = {0x1a, 0xff, 0xff, 0xff, 0xff, 0xff,
                                       0xff, 0xff, 0xff, 0xff, 0x01, 'a'};
    static const uint8_t no_len[] = {0x1a};
    ccoip_pb_hello h;
    PT_ASSERT(decode_as("ccoip.Hello", short_len, sizeof(short_len), NULL, &h) == pcclProtocolError,
              "length beyond the input");
    PT_ASSERT(decode_as("ccoip.Hello", huge_len, sizeof(huge_len), NULL, &h) == pcclProtocolError,
              "length of 2^64-1");
    PT_ASSERT(decode_as("ccoip.Hello", no_len, sizeof(no_len), NULL, &h) == pcclProtocolError,
              "missing length");
}

PTEST(schema, wrong_wire_types_are_rejected)
{
    static const uint8_t len_for_varint[] = {0x0a, 0x00}; /* Heartbeat.counter as LEN */
    static const uint8_t varint_for_fixed[] = {0x09, 0x01, 0, 0, 0, 0, 0, 0, 0}; /* wt 1 */
    static const uint8_t fixed_for_varint[] = {0x08 | 5, 1, 0, 0, 0};
    ccoip_pb_heartbeat h;
    ccoip_pb_join_result j;
    ccoip_pb_shared_state_key k;
    static const uint8_t hash_as_varint[] = {0x10, 0x01}; /* SharedStateKey.hash (fixed64) */
    PT_ASSERT(heartbeat(len_for_varint, sizeof(len_for_varint), &h) == pcclProtocolError,
              "LEN for a uint64");
    PT_ASSERT(heartbeat(varint_for_fixed, sizeof(varint_for_fixed), &h) == pcclProtocolError,
              "I64 for a uint64");
    PT_ASSERT(heartbeat(fixed_for_varint, sizeof(fixed_for_varint), &h) == pcclProtocolError,
              "I32 for a uint64");
    PT_ASSERT(decode_as("ccoip.JoinResult", (const uint8_t[]){0x10, 0x01}, 2, NULL, &j) ==
                  pcclProtocolError,
              "VARINT for a message");
    PT_ASSERT(decode_as("ccoip.SharedStateKey", hash_as_varint, sizeof(hash_as_varint), NULL, &k) ==
                  pcclProtocolError,
              "VARINT for a fixed64");
}

PTEST(schema, groups_and_reserved_wire_types_are_rejected)
{
    ccoip_pb_heartbeat h;
    for (uint8_t wt = 3; wt <= 7; wt++) {
        uint8_t b[10] = {(uint8_t)((9u << 3) | wt), 0, 0, 0, 0, 0, 0, 0, 0, 0};
        pcclResult_t rc = heartbeat(b, sizeof(b), &h);
        if (wt == 5) {
            PT_ASSERT(rc == pcclProtocolError, "10 bytes are not one I32 field: %d", rc);
            PT_ASSERT(heartbeat(b, 5, &h) == pcclSuccess, "an unknown I32 field is skipped");
        } else {
            PT_ASSERT(rc == pcclProtocolError, "wire type %u accepted", wt);
        }
    }
    PT_ASSERT(heartbeat((const uint8_t[]){0x00, 0x00}, 2, &h) == pcclProtocolError,
              "field number 0");
    PT_ASSERT(heartbeat((const uint8_t[]){0xf8, 0xff, 0xff, 0xff, 0x1f, 0x00}, 6, &h) ==
                  pcclProtocolError,
              "field number above 2^29-1");
}

PTEST(schema, unknown_fields_are_skipped)
{
    /* counter = 5 between unknown fields of every wire type. */
    static const uint8_t b[] = {0x48, 0x96, 0x01,                               /* 9: varint */
                                0x51, 1,    2,    3,    4,        5,   6, 7, 8, /* 10: I64 */
                                0x08, 0x05,                                     /* 1: counter */
                                0x5a, 0x03, 0x0a, 0x01, 'x',                    /* 11: LEN */
                                0x65, 1,    2,    3,    4,                      /* 12: I32 */
                                0xf8, 0xff, 0xff, 0xff, 0x0f - 8, 0x2a};        /* large number */
    ccoip_pb_heartbeat h;
    uint8_t out[16];
    uint64_t len = 0;
    PT_ASSERT(heartbeat(b, sizeof(b), &h) == pcclSuccess, "unknown fields must be skipped");
    PT_ASSERT(h.counter == 5, "counter %llu", (unsigned long long)h.counter);
    PT_ASSERT(ccoip_pb_heartbeat_encode(&h, out, sizeof(out), &len) == pcclSuccess, "encode");
    PT_ASSERT(len == 2 && out[0] == 0x08 && out[1] == 0x05, "unknown fields are not re-encoded");
}

PTEST(schema, repeated_singular_fields_are_rejected)
{
    ccoip_pb_heartbeat h;
    ccoip_pb_join_result j;
    ccoip_pb_peer_to_master p;
    PT_ASSERT(heartbeat((const uint8_t[]){0x08, 0x01, 0x08, 0x02}, 4, &h) == pcclProtocolError,
              "a scalar twice");
    PT_ASSERT(decode_as("ccoip.JoinResult", (const uint8_t[]){0x12, 0x00, 0x12, 0x00}, 4, NULL,
                        &j) == pcclProtocolError,
              "a message twice");
    /* heartbeat (28) and leave (29): two members of one oneof. */
    PT_ASSERT(decode_as("ccoip.PeerToMaster", (const uint8_t[]){0xe2, 0x01, 0x00, 0xea, 0x01, 0x00},
                        6, NULL, &p) == pcclProtocolError,
              "two oneof members");
    PT_ASSERT(decode_as("ccoip.PeerToMaster", (const uint8_t[]){0xe2, 0x01, 0x00, 0xe2, 0x01, 0x00},
                        6, NULL, &p) == pcclProtocolError,
              "one oneof member twice");
    PT_ASSERT(decode_as("ccoip.PeerToMaster", (const uint8_t[]){0xe2, 0x01, 0x00}, 3, NULL, &p) ==
                  pcclSuccess,
              "one member");
    PT_ASSERT(p.body_case == CCOIP_PB_PEER_TO_MASTER_BODY_HEARTBEAT, "case %d", p.body_case);
}

PTEST(schema, scalars_are_strict)
{
    ccoip_pb_hello h;
    ccoip_pb_update_topology_vote v;
    ccoip_pb_leave l;
    static const uint8_t u32_over[] = {0x08, 0x80, 0x80, 0x80, 0x80, 0x10}; /* 2^32 */
    static const uint8_t u32_max[] = {0x08, 0xff, 0xff, 0xff, 0xff, 0x0f};
    static const uint8_t minus_one[] = {0x08, 0xff, 0xff, 0xff, 0xff, 0xff,
                                        0xff, 0xff, 0xff, 0xff, 0x01};
    static const uint8_t int32_over[] = {0x08, 0x80, 0x80, 0x80, 0x80, 0x08}; /* 2^31 */
    PT_ASSERT(decode_as("ccoip.Hello", u32_over, sizeof(u32_over), NULL, &h) == pcclProtocolError,
              "uint32 of 2^32");
    PT_ASSERT(decode_as("ccoip.Hello", u32_max, sizeof(u32_max), NULL, &h) == pcclSuccess &&
                  h.min_version == UINT32_MAX,
              "uint32 max");
    PT_ASSERT(decode_as("ccoip.UpdateTopologyVote", (const uint8_t[]){0x08, 0x02}, 2, NULL, &v) ==
                  pcclProtocolError,
              "bool of 2");
    PT_ASSERT(decode_as("ccoip.UpdateTopologyVote", (const uint8_t[]){0x08, 0x01}, 2, NULL, &v) ==
                      pcclSuccess &&
                  v.accept_new_peers,
              "bool of 1");
    /* Enums are open: unknown and negative values are kept, for the consumer to judge. */
    PT_ASSERT(decode_as("ccoip.Leave", minus_one, sizeof(minus_one), NULL, &l) == pcclSuccess,
              "enum -1");
    PT_ASSERT(l.reason == -1 && !ccoip_pb_reason_is_known(l.reason), "reason %d", l.reason);
    PT_ASSERT(decode_as("ccoip.Leave", (const uint8_t[]){0x08, 0xe8, 0x07}, 3, NULL, &l) ==
                      pcclSuccess &&
                  l.reason == 1000,
              "enum 1000 kept");
    PT_ASSERT(decode_as("ccoip.Leave", int32_over, sizeof(int32_over), NULL, &l) ==
                  pcclProtocolError,
              "enum beyond int32");
}

PTEST(schema, strings_must_be_utf8_bytes_need_not)
{
    static const char *bad[] = {"\xff",     "\xc0\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80",
                                "\xe2\x82", "a\x80"};
    static const char *good[] = {"", "plain", "\xc3\xbc", "\xe2\x9c\x93", "\xf0\x9f\x98\x80"};
    ccoip_pb_hello h;
    ccoip_pb_endpoint e;
    uint8_t b[16];
    for (uint32_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        uint64_t n = strlen(bad[i]);
        b[0] = 0x1a;
        b[1] = (uint8_t)n;
        memcpy(b + 2, bad[i], (size_t)n);
        PT_ASSERT(decode_as("ccoip.Hello", b, n + 2, NULL, &h) == pcclProtocolError,
                  "invalid UTF-8 #%u accepted", i);
        /* The same bytes are fine in a bytes field (Endpoint.ip is field 2). */
        b[0] = 0x12;
        PT_ASSERT(decode_as("ccoip.Endpoint", b, n + 2, NULL, &e) == pcclSuccess,
                  "bytes field #%u rejected", i);
    }
    for (uint32_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        uint64_t n = strlen(good[i]);
        b[0] = 0x1a;
        b[1] = (uint8_t)n;
        memcpy(b + 2, good[i], (size_t)n);
        PT_ASSERT(decode_as("ccoip.Hello", b, n + 2, NULL, &h) == pcclSuccess,
                  "valid UTF-8 #%u rejected", i);
        PT_ASSERT(h.software.len == n, "length %llu", (unsigned long long)h.software.len);
    }
}

PTEST(schema, limits_are_enforced)
{
    ccoip_pb_limits lim;
    ccoip_pb_hello h;
    ccoip_pb_topology_plan t;
    static const uint8_t sw5[] = {0x1a, 0x05, 'a', 'b', 'c', 'd', 'e'};
    static const uint8_t ring3_packed[] = {0x22, 0x03, 0x01, 0x02, 0x03};
    static const uint8_t ring3_unpacked[] = {0x20, 0x01, 0x20, 0x02, 0x20, 0x03};
    static const uint8_t ring2_split[] = {0x22, 0x01, 0x01, 0x20, 0x02};
    ccoip_pb_limits_default(&lim);
    lim.max_string_bytes = 4;
    PT_ASSERT(decode_as("ccoip.Hello", sw5, sizeof(sw5), &lim, &h) == pcclProtocolError,
              "string above max_string_bytes");
    lim.max_string_bytes = 5;
    PT_ASSERT(decode_as("ccoip.Hello", sw5, sizeof(sw5), &lim, &h) == pcclSuccess,
              "string at max_string_bytes");
    lim.max_message_bytes = sizeof(sw5) - 1;
    PT_ASSERT(decode_as("ccoip.Hello", sw5, sizeof(sw5), &lim, &h) == pcclProtocolError,
              "input above max_message_bytes");
    /* bytes fields have their own bound (a relayed tensor): CollectiveVerdict.relay_result. */
    static const uint8_t res5[] = {0x2a, 0x05, 1, 2, 3, 4, 5};
    ccoip_pb_collective_verdict cv;
    ccoip_pb_limits_default(&lim);
    PT_ASSERT(lim.max_bytes_bytes == 65536u && lim.max_string_bytes == 4096u, "defaults");
    lim.max_bytes_bytes = 4;
    lim.max_string_bytes = 1;
    PT_ASSERT(decode_as("ccoip.CollectiveVerdict", res5, sizeof(res5), &lim, &cv) ==
                  pcclProtocolError,
              "bytes above max_bytes_bytes");
    lim.max_bytes_bytes = 5;
    PT_ASSERT(decode_as("ccoip.CollectiveVerdict", res5, sizeof(res5), &lim, &cv) == pcclSuccess &&
                  cv.relay_result.len == 5,
              "bytes at max_bytes_bytes, whatever max_string_bytes says");
    ccoip_pb_limits_default(&lim);
    lim.max_repeated = 2;
    PT_ASSERT(decode_as("ccoip.TopologyPlan", ring3_packed, sizeof(ring3_packed), &lim, &t) ==
                  pcclProtocolError,
              "3 packed elements, max 2");
    PT_ASSERT(decode_as("ccoip.TopologyPlan", ring3_unpacked, sizeof(ring3_unpacked), &lim, &t) ==
                  pcclProtocolError,
              "3 unpacked elements, max 2");
    PT_ASSERT(decode_as("ccoip.TopologyPlan", ring2_split, sizeof(ring2_split), &lim, &t) ==
                  pcclSuccess,
              "a packed run and an unpacked element, 2 in all");
    PT_ASSERT(t.ring_count == 2 && t.ring[0] == 1 && t.ring[1] == 2, "ring %llu",
              (unsigned long long)t.ring_count);
    PT_ASSERT(decode_as("ccoip.TopologyPlan", (const uint8_t[]){0x22, 0x02, 0x80, 0x80}, 4, NULL,
                        &t) == pcclProtocolError,
              "a varint running off the end of its packed run");
}

PTEST(schema, nesting_is_bounded)
{
    /* MasterToPeer(0) > optimize_verdict(1) > plan(2) > neighbours(3) > endpoints(4). */
    static const uint8_t b[] = {0xb2, 0x01, 0x08, 0x12, 0x06, 0x1a, 0x04, 0x1a, 0x02, 0x18, 0x01};
    ccoip_pb_limits lim;
    ccoip_pb_master_to_peer m;
    ccoip_pb_limits_default(&lim);
    PT_ASSERT(CCOIP_PB_SCHEMA_MAX_DEPTH == 4, "schema depth %d", CCOIP_PB_SCHEMA_MAX_DEPTH);
    PT_ASSERT(decode_as("ccoip.MasterToPeer", b, sizeof(b), &lim, &m) == pcclSuccess, "depth 4");
    PT_ASSERT(m.body_case == CCOIP_PB_MASTER_TO_PEER_BODY_OPTIMIZE_VERDICT, "case");
    PT_ASSERT(m.body.optimize_verdict.plan.neighbours[0].endpoints[0].port == 1, "port");
    lim.max_depth = 3;
    PT_ASSERT(decode_as("ccoip.MasterToPeer", b, sizeof(b), &lim, &m) == pcclProtocolError,
              "depth 4 with max_depth 3");
}

PTEST(schema, decoding_borrows_the_input)
{
    static const uint8_t b[] = {0x08, 0x01, 0x1a, 0x03, 'a', 'b', 'c'};
    ccoip_pb_hello h;
    ccoip_pb_limits lim;
    ccoip_pb_limits_default(&lim);
    PT_ASSERT(ccoip_pb_hello_decode(b, sizeof(b), &lim, NULL, &h) == pcclSuccess,
              "no arena is needed without repeated fields");
    PT_ASSERT(h.software.data == b + 4 && h.software.len == 3, "string points into the input");
    PT_ASSERT(ccoip_pb_bytes_eq(h.software, ccoip_pb_str("abc")), "content");
    PT_ASSERT(ccoip_pb_hello_decode(NULL, 0, NULL, NULL, &h) == pcclSuccess && h.min_version == 0,
              "empty input is the default message");
    PT_ASSERT(ccoip_pb_hello_decode(NULL, 1, NULL, NULL, &h) == pcclInvalidArgument, "NULL input");
    PT_ASSERT(ccoip_pb_hello_decode(b, sizeof(b), NULL, NULL, NULL) == pcclInvalidArgument,
              "NULL out");
}

PTEST(schema, arena_exhaustion_is_the_callers_error)
{
    static const uint8_t ring[] = {0x22, 0x04, 0x01, 0x02, 0x03, 0x04};
    uint64_t small[2];
    ccoip_pb_arena a;
    ccoip_pb_topology_plan t;
    ccoip_pb_arena_init(&a, small, sizeof(small));
    PT_ASSERT(ccoip_pb_topology_plan_decode(ring, sizeof(ring), NULL, &a, &t) ==
                  pcclInvalidArgument,
              "4 elements in a 16-byte arena");
    PT_ASSERT(ccoip_pb_topology_plan_decode(ring, sizeof(ring), NULL, NULL, &t) ==
                  pcclInvalidArgument,
              "no arena");
    PT_ASSERT(ccoip_pb_arena_bound(sizeof(ring)) <= sizeof(arena_mem), "bound");
    a = fresh_arena();
    PT_ASSERT(ccoip_pb_topology_plan_decode(ring, sizeof(ring), NULL, &a, &t) == pcclSuccess,
              "decode");
    PT_ASSERT(a.used <= ccoip_pb_arena_bound(sizeof(ring)), "used %llu",
              (unsigned long long)a.used);
    PT_ASSERT((uintptr_t)t.ring % _Alignof(uint64_t) == 0, "aligned");
    PT_ASSERT(ccoip_pb_arena_bound(UINT64_MAX) == UINT64_MAX, "saturates");
}

PTEST(schema, encoders_validate)
{
    ccoip_pb_hello h;
    ccoip_pb_leave l;
    ccoip_pb_topology_plan t;
    ccoip_pb_peer_to_master p;
    uint8_t buf[64];
    uint64_t len = 99;
    memset(&h, 0, sizeof(h));
    memset(&l, 0, sizeof(l));
    memset(&t, 0, sizeof(t));
    memset(&p, 0, sizeof(p));
    PT_ASSERT(ccoip_pb_hello_encode(NULL, buf, sizeof(buf), &len) == pcclInvalidArgument, "NULL");
    h.software = ccoip_pb_str("\xff");
    PT_ASSERT(ccoip_pb_hello_encode(&h, buf, sizeof(buf), &len) == pcclInvalidArgument,
              "invalid UTF-8");
    h.software.data = NULL;
    h.software.len = 3;
    PT_ASSERT(ccoip_pb_hello_encode(&h, buf, sizeof(buf), &len) == pcclInvalidArgument,
              "NULL string data");
    l.reason = 1000;
    PT_ASSERT(ccoip_pb_leave_encode(&l, buf, sizeof(buf), &len) == pcclInvalidArgument,
              "unknown enum value");
    t.ring_count = 2;
    PT_ASSERT(ccoip_pb_topology_plan_encode(&t, buf, sizeof(buf), &len) == pcclInvalidArgument,
              "repeated count without elements");
    p.body_case = (ccoip_pb_peer_to_master_body_case)99;
    PT_ASSERT(ccoip_pb_peer_to_master_encode(&p, buf, sizeof(buf), &len) == pcclInvalidArgument,
              "unknown oneof case");
    memset(&h, 0, sizeof(h));
    h.software = ccoip_pb_str("0123456789");
    PT_ASSERT(ccoip_pb_hello_encode(&h, buf, 5, &len) == pcclInvalidArgument, "cap too small");
    PT_ASSERT(len == 12, "len_out tells the size needed: %llu", (unsigned long long)len);
    PT_ASSERT(ccoip_pb_hello_encode(&h, NULL, 0, &len) == pcclInvalidArgument && len == 12,
              "a size query");
    PT_ASSERT(ccoip_pb_hello_encoded_size(&h, &len) == pcclSuccess && len == 12, "encoded_size");
    PT_ASSERT(ccoip_pb_hello_encode(&h, buf, 12, &len) == pcclSuccess, "exact cap");
}

PTEST(schema, enum_helpers_and_table)
{
    PT_ASSERT(strcmp(ccoip_pb_status_name(17), "STATUS_PROTOCOL_ERROR") == 0, "status name");
    PT_ASSERT(strcmp(ccoip_pb_status_name(18), "STATUS_AUTHENTICATION_FAILED") == 0, "status 18");
    PT_ASSERT(ccoip_pb_status_name(19) == NULL, "unknown status");
    PT_ASSERT(ccoip_pb_data_type_is_known(11) && !ccoip_pb_data_type_is_known(12), "dtypes");
    PT_ASSERT(CCOIP_PB_MESSAGE_COUNT == 39, "messages %d", CCOIP_PB_MESSAGE_COUNT);
    PT_ASSERT(ccoip_pb_find_message("ccoip.Hello") == &ccoip_pb_messages[3], "find");
    PT_ASSERT(ccoip_pb_find_message("ccoip.Nope") == NULL, "not found");
    PT_ASSERT(ccoip_pb_messages[3].struct_size == sizeof(ccoip_pb_hello), "size");
}
