/*
 * fuzz_pb_messages — every message decoder of the generated codec.
 *
 * Input: byte 0 picks the message type (index into ccoip_pb_messages), byte 1
 * the limits and arena profile, the rest is the protobuf payload.
 *   byte 1 bit 0: tight limits (depth 1, 3 elements, 8-byte strings)
 *   byte 1 bit 1: an arena of only 64 bytes (decoding may then run out of
 *                 arena, the one case where pcclInvalidArgument is allowed)
 * Properties: the result is one of the documented codes; a decoded message
 * re-encodes (unless it holds an unknown enum value), and re-encoding is a
 * fixed point.
 */
#include <stdlib.h>
#include <string.h>

#include "ccoip_pb.h"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const ccoip_pb_message_desc *d;
    ccoip_pb_limits lim;
    ccoip_pb_arena arena;
    bool small_arena;
    uint64_t cap, len1 = 0, len2 = 0;
    uint8_t *mem, *enc1 = NULL, *enc2 = NULL;
    void *m = NULL, *m2 = NULL;
    pcclResult_t rc;
    if (size < 2) return 0;
    d = &ccoip_pb_messages[data[0] % CCOIP_PB_MESSAGE_COUNT];
    ccoip_pb_limits_default(&lim);
    if (data[1] & 1u) {
        lim.max_depth = 1;
        lim.max_repeated = 3;
        lim.max_string_bytes = 8;
    }
    small_arena = (data[1] & 2u) != 0;
    data += 2;
    size -= 2;
    cap = small_arena ? 64u : ccoip_pb_arena_bound(2u * (uint64_t)size + 64u);
    mem = malloc((size_t)cap);
    m = calloc(1, (size_t)d->struct_size);
    m2 = calloc(1, (size_t)d->struct_size);
    FUZZ_CHECK(mem != NULL && m != NULL && m2 != NULL);
    /* Exactly the documented bound, unless the small-arena profile is on. */
    ccoip_pb_arena_init(&arena, mem, small_arena ? cap : ccoip_pb_arena_bound((uint64_t)size));
    rc = d->decode(data, size, &lim, &arena, m);
    FUZZ_CHECK(rc == pcclSuccess || rc == pcclProtocolError ||
               (small_arena && rc == pcclInvalidArgument));
    if (rc != pcclSuccess) goto done;
    if (d->encoded_size(m, &len1) != pcclSuccess) goto done; /* unknown enum value */
    enc1 = malloc((size_t)len1 + 1u);
    enc2 = malloc((size_t)len1 + 1u);
    FUZZ_CHECK(enc1 != NULL && enc2 != NULL);
    FUZZ_CHECK(d->encode(m, enc1, len1, &len1) == pcclSuccess);
    ccoip_pb_arena_init(&arena, mem, cap);
    rc = d->decode(enc1, len1, &lim, &arena, m2);
    FUZZ_CHECK(rc == pcclSuccess || (small_arena && rc == pcclInvalidArgument));
    if (rc != pcclSuccess) goto done;
    FUZZ_CHECK(d->encode(m2, enc2, len1, &len2) == pcclSuccess);
    FUZZ_CHECK(len1 == len2 && memcmp(enc1, enc2, (size_t)len1) == 0);
done:
    free(enc1);
    free(enc2);
    free(m);
    free(m2);
    free(mem);
    return 0;
}
