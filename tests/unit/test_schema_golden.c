/*
 * test_schema_golden.c — the generated codec against protoc's bytes.
 *
 * schema/gen/golden_vectors.h holds what `protoc --encode` made of every
 * sample in schema/golden/samples/ (one per message, with every field set,
 * plus one envelope per oneof body). Here, on every platform (native and
 * WASM): each vector decodes and re-encodes to the same bytes (round trip of
 * every message), the samples built field by field in C encode to protoc's
 * bytes, decoded values are the sample's, and corrupted or truncated vectors
 * are rejected cleanly. The native ctest schema_protoc_crosscheck repeats the
 * comparison against protoc at test time.
 */
#include <stdlib.h>
#include <string.h>

#include "../../schema/gen/golden_vectors.h"
#include "../../schema/golden/golden_samples.h"
#include "ccoip_pb.h"
#include "ptest.h"

static uint64_t arena_mem[1u << 15];

static const golden_vector *vector_by_id(const char *id)
{
    for (uint32_t i = 0; i < GOLDEN_VECTOR_COUNT; i++) {
        if (strcmp(golden_vectors[i].id, id) == 0) return &golden_vectors[i];
    }
    return NULL;
}

/* Decodes v into *msg_out (malloc'd, caller frees); the arena is arena_mem. */
static pcclResult_t decode_vector(const golden_vector *v, const uint8_t *bytes, uint64_t len,
                                  void **msg_out)
{
    const ccoip_pb_message_desc *d = ccoip_pb_find_message(v->type);
    ccoip_pb_arena a;
    PT_ASSERT(d != NULL, "type %s", v->type);
    PT_ASSERT(ccoip_pb_arena_bound(len) <= sizeof(arena_mem), "arena for %s", v->id);
    ccoip_pb_arena_init(&a, arena_mem, sizeof(arena_mem));
    *msg_out = calloc(1, (size_t)d->struct_size);
    PT_ASSERT(*msg_out != NULL, "calloc");
    return d->decode(bytes, len, NULL, &a, *msg_out);
}

PTEST(schema_golden, every_message_has_a_vector)
{
    PT_ASSERT(GOLDEN_VECTOR_COUNT == CCOIP_PB_MESSAGE_COUNT + 15 + 13, "%u vectors",
              GOLDEN_VECTOR_COUNT);
    for (uint32_t i = 0; i < CCOIP_PB_MESSAGE_COUNT; i++) {
        const char *name = ccoip_pb_messages[i].name + strlen("ccoip.");
        PT_ASSERT(vector_by_id(name) != NULL, "no golden vector for %s", name);
    }
}

PTEST(schema_golden, every_vector_round_trips)
{
    uint8_t out[4096];
    for (uint32_t i = 0; i < GOLDEN_VECTOR_COUNT; i++) {
        const golden_vector *v = &golden_vectors[i];
        const ccoip_pb_message_desc *d = ccoip_pb_find_message(v->type);
        uint64_t len = 0, size = 0;
        void *m;
        PT_ASSERT(decode_vector(v, v->bytes, v->len, &m) == pcclSuccess, "%s: decode", v->id);
        PT_ASSERT(d->encoded_size(m, &size) == pcclSuccess && size == v->len,
                  "%s: size %llu vs %llu", v->id, (unsigned long long)size,
                  (unsigned long long)v->len);
        PT_ASSERT(d->encode(m, out, sizeof(out), &len) == pcclSuccess, "%s: encode", v->id);
        PT_ASSERT(len == v->len && memcmp(out, v->bytes, (size_t)len) == 0,
                  "%s: re-encoding differs from protoc", v->id);
        free(m);
    }
}

PTEST(schema_golden, c_built_samples_match_protoc)
{
    uint8_t out[4096];
    PT_ASSERT(GOLDEN_SAMPLE_COUNT >= 15, "samples");
    for (uint32_t i = 0; i < GOLDEN_SAMPLE_COUNT; i++) {
        const golden_vector *v = vector_by_id(golden_samples[i].id);
        uint64_t len = 0;
        PT_ASSERT(v != NULL, "no vector %s", golden_samples[i].id);
        PT_ASSERT(golden_samples[i].build(out, sizeof(out), &len) == pcclSuccess, "%s: encode",
                  v->id);
        PT_ASSERT(len == v->len && memcmp(out, v->bytes, (size_t)len) == 0,
                  "%s: our encoding differs from protoc's", v->id);
    }
}

PTEST(schema_golden, decoded_values_are_the_samples)
{
    const golden_vector *v = vector_by_id("TopologyPlan");
    ccoip_pb_topology_plan *t;
    ccoip_pb_shared_state_sync_vote *s;
    ccoip_pb_master_to_peer *m;
    ccoip_pb_hello_result *hr;
    void *p;
    PT_ASSERT(decode_vector(v, v->bytes, v->len, &p) == pcclSuccess, "TopologyPlan");
    t = p;
    PT_ASSERT(t->epoch == 13 && t->unchanged && t->has_world && t->world.global == 3, "scalars");
    PT_ASSERT(t->ring_count == 4 && t->ring[0] == 2 && t->ring[3] == 1000000, "ring");
    PT_ASSERT(t->neighbours_count == 2 && t->neighbours[1].peer_id == 9, "neighbours");
    PT_ASSERT(t->neighbours[1].endpoints_count == 1 && t->neighbours[1].endpoints[0].ip.len == 16 &&
                  t->neighbours[1].endpoints[0].ip.data[15] == 1 &&
                  t->neighbours[1].endpoints[0].port == 40001,
              "nested endpoint");
    free(p);
    v = vector_by_id("SharedStateSyncVote");
    PT_ASSERT(decode_vector(v, v->bytes, v->len, &p) == pcclSuccess, "SharedStateSyncVote");
    s = p;
    PT_ASSERT(s->revision == 41 && s->strategy == CCOIP_PB_SYNC_STRATEGY_SEND_ONLY, "vote");
    PT_ASSERT(s->keys_count == 3 &&
                  ccoip_pb_bytes_eq(s->keys[1].name, ccoip_pb_str("optimizer.step")),
              "key names");
    PT_ASSERT(s->keys[2].hash == UINT64_MAX && s->keys[2].dtype == CCOIP_PB_DATA_TYPE_DOUBLE &&
                  s->keys[1].allow_content_inequality,
              "key fields");
    free(p);
    v = vector_by_id("MasterToPeer");
    PT_ASSERT(decode_vector(v, v->bytes, v->len, &p) == pcclSuccess, "MasterToPeer");
    m = p;
    PT_ASSERT(m->call_id == 7 && m->deadline_ms == 30000 &&
                  m->status == CCOIP_PB_STATUS_INVALID_USAGE &&
                  m->reason == CCOIP_PB_REASON_KEY_SET_MISMATCH,
              "envelope header");
    PT_ASSERT(m->body_case == CCOIP_PB_MASTER_TO_PEER_BODY_TOPOLOGY_PLAN &&
                  m->body.topology_plan.ring_count == 2,
              "body");
    free(p);
    v = vector_by_id("HelloResult");
    PT_ASSERT(decode_vector(v, v->bytes, v->len, &p) == pcclSuccess, "HelloResult");
    hr = p;
    PT_ASSERT(hr->peer_id == UINT64_MAX && hr->evict_ms == 2000, "hello result");
    free(p);
}

/* Every prefix and every single-bit corruption decodes or fails cleanly; what decodes re-encodes.
 */
PTEST(schema_golden, corrupted_vectors_fail_cleanly)
{
    uint8_t out[4096];
    uint64_t decoded = 0, rejected = 0;
    for (uint32_t i = 0; i < GOLDEN_VECTOR_COUNT; i++) {
        const golden_vector *v = &golden_vectors[i];
        const ccoip_pb_message_desc *d = ccoip_pb_find_message(v->type);
        for (uint64_t k = 0; k <= v->len * 8u + v->len; k++) {
            uint8_t *copy = malloc((size_t)v->len + 1u);
            uint64_t n = v->len, len = 0;
            pcclResult_t rc;
            void *m;
            PT_ASSERT(copy != NULL, "malloc");
            memcpy(copy, v->bytes, (size_t)v->len);
            if (k < v->len) {
                n = k; /* a prefix (protobuf is not self-delimiting: it may still decode) */
            } else {
                uint64_t bit = k - v->len;
                if (bit >= v->len * 8u) bit = 0;
                copy[bit / 8u] ^= (uint8_t)(1u << (bit % 8u));
            }
            rc = decode_vector(v, copy, n, &m);
            PT_ASSERT(rc == pcclSuccess || rc == pcclProtocolError, "%s/%llu: rc %d", v->id,
                      (unsigned long long)k, rc);
            if (rc == pcclSuccess) {
                pcclResult_t erc = d->encode(m, out, sizeof(out), &len);
                /* Only an enum value unknown to this build may stop re-encoding. */
                PT_ASSERT(erc == pcclSuccess || erc == pcclInvalidArgument, "%s: encode", v->id);
                decoded++;
            } else {
                rejected++;
            }
            free(m);
            free(copy);
        }
    }
    PT_LOG("corrupted vectors: %llu decoded, %llu rejected", (unsigned long long)decoded,
           (unsigned long long)rejected);
    PT_ASSERT(rejected > 0 && decoded > 0, "both outcomes occur");
}
