/*
 * fuzz_algo_table — the two decoders of the group's algorithm table (core/algo.c,
 * docs/algorithms.md): the wire form a plan or a tuning answer carries
 * (ccoip_algo_table_decode) and the text form pcclTuneLoad reads (ccoip_algo_table_parse).
 * The first input byte picks the decoder.
 *
 * Properties: the result is pcclSuccess or pcclInvalidArgument; an accepted wire table
 * re-encodes to exactly its bytes; an accepted text re-formats to a text that parses to the
 * same table (and formats identically); every accepted entry names an algorithm.
 */
#include <string.h>

#include "ccoip_algo.h"
#include "fuzz_common.h"

static void check_entries(const ccoip_algo_table *t)
{
    for (uint32_t c = 0; c < CCOIP_ALGO_KINDS; c++)
        for (uint32_t w = 0; w < CCOIP_ALGO_ROWS; w++)
            for (uint32_t k = 0; k < CCOIP_ALGO_SIZES; k++)
                FUZZ_CHECK(ccoip_algo_name(t->algo[c][w][k]) != NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0) return 0;
    ccoip_algo_table t, u;
    const uint8_t *in = data + 1;
    const size_t n = size - 1u;
    if ((data[0] & 1u) == 0) {
        const pcclResult_t rc = ccoip_algo_table_decode(in, n, &t);
        FUZZ_CHECK(rc == pcclSuccess || rc == pcclInvalidArgument);
        if (rc != pcclSuccess) return 0;
        check_entries(&t);
        uint8_t out[CCOIP_ALGO_TABLE_BYTES];
        ccoip_algo_table_encode(&t, out);
        FUZZ_CHECK(n == sizeof out && memcmp(out, in, sizeof out) == 0);
        return 0;
    }
    const pcclResult_t rc = ccoip_algo_table_parse((const char *)in, n, &t);
    FUZZ_CHECK(rc == pcclSuccess || rc == pcclInvalidArgument);
    if (rc != pcclSuccess) return 0;
    check_entries(&t);
    static char text[32768], again[32768]; /* a whole table: about 22 KB */
    const size_t len = ccoip_algo_table_format(&t, text, sizeof text);
    FUZZ_CHECK(len < sizeof text);
    FUZZ_CHECK(ccoip_algo_table_parse(text, len, &u) == pcclSuccess);
    FUZZ_CHECK(memcmp(&t, &u, sizeof t) == 0);
    FUZZ_CHECK(ccoip_algo_table_format(&u, again, sizeof again) == len);
    FUZZ_CHECK(memcmp(text, again, len) == 0);
    return 0;
}
