/*
 * fuzz_ctrl.h — the body of the two control-frame targets (fuzz_ctrl_p2m.c,
 * fuzz_ctrl_m2p.c), parametrized by direction with the FUZZ_CTRL_* macros.
 *
 * Properties checked on every input:
 * 1. decoding returns pcclSuccess, pcclProtocolError or pcclInvalidUsage,
 *    never pcclInvalidArgument: an arena of ccoip_pb_arena_bound(size) bytes
 *    always suffices;
 * 2. a decoded frame re-encodes (unless it holds enum values this build does
 *    not know, which encoders refuse), the re-encoding decodes, and encoding
 *    that again gives the same bytes (canonical encoding is a fixed point).
 */
#include <stdlib.h>
#include <string.h>

#include "ccoip_frame.h"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ccoip_codec_limits lim;
    ccoip_pb_arena arena;
    FUZZ_CTRL_MSG m, m2;
    uint64_t cap = ccoip_pb_arena_bound(2u * (uint64_t)size + 64u);
    uint8_t *mem = malloc((size_t)cap);
    uint8_t *enc1 = NULL, *enc2 = NULL;
    uint64_t len1 = 0, len2 = 0;
    pcclResult_t rc;
    FUZZ_CHECK(mem != NULL);
    ccoip_codec_limits_default(&lim);
    /* Exactly the documented bound, so that property 1 tests ccoip_pb_arena_bound. */
    ccoip_pb_arena_init(&arena, mem, ccoip_pb_arena_bound((uint64_t)size));
    rc = FUZZ_CTRL_DECODE(data, size, &lim, &arena, &m);
    FUZZ_CHECK(rc == pcclSuccess || rc == pcclProtocolError || rc == pcclInvalidUsage);
    if (rc != pcclSuccess) goto done;
    rc = FUZZ_CTRL_ENCODE(&m, &lim, NULL, 0, &len1);
    if (rc == pcclInvalidArgument && len1 == 0) goto done; /* unknown enum or no body */
    enc1 = malloc((size_t)len1);
    FUZZ_CHECK(enc1 != NULL);
    FUZZ_CHECK(FUZZ_CTRL_ENCODE(&m, &lim, enc1, len1, &len1) == pcclSuccess);
    ccoip_pb_arena_init(&arena, mem, cap); /* m is not used any more */
    FUZZ_CHECK(FUZZ_CTRL_DECODE(enc1, len1, &lim, &arena, &m2) == pcclSuccess);
    enc2 = malloc((size_t)len1);
    FUZZ_CHECK(enc2 != NULL);
    FUZZ_CHECK(FUZZ_CTRL_ENCODE(&m2, &lim, enc2, len1, &len2) == pcclSuccess);
    FUZZ_CHECK(len1 == len2 && memcmp(enc1, enc2, (size_t)len1) == 0);
done:
    free(enc1);
    free(enc2);
    free(mem);
    return 0;
}
