/*
 * test_hash.c — shared-state hashing (core/hash.c) against XXH3-64 computed
 * here over a byte layout built by hand from the header's specification.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "ccoip_dtype.h"
#include "ccoip_hash.h"
#include "ptest.h"
#include "test_rng.h"

#define XXH_INLINE_ALL
#include "xxhash.h"

/* XXH3_64bits of zero bytes with seed 0 (xxHash's published value). */
#define XXH3_EMPTY UINT64_C(0x2D06800538D394C2)

/* Appends v as n little-endian bytes. */
static size_t put_le(unsigned char *out, size_t at, uint64_t v, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        out[at + i] = (unsigned char)(v >> (8u * i));
    return at + n;
}

/* The tensor hash, from the header's layout, with one-shot XXH3. */
static uint64_t ref_tensor_hash(const char *name, pcclDataType_t dt, const void *data,
                                uint64_t count)
{
    const size_t name_len = strlen(name);
    const size_t data_len = (size_t)count * ccoip_dtype_size(dt);
    unsigned char *buf = malloc(4u + name_len + 4u + 8u + data_len);
    PT_ASSERT(buf != NULL, "malloc");
    size_t at = put_le(buf, 0, name_len, 4);
    memcpy(buf + at, name, name_len);
    at += name_len;
    at = put_le(buf, at, (uint64_t)dt, 4);
    at = put_le(buf, at, count, 8);
    if (data_len > 0) memcpy(buf + at, data, data_len);
    at += data_len;
    const uint64_t h = (uint64_t)XXH3_64bits(buf, at);
    free(buf);
    return h;
}

static uint64_t tensor_hash(const char *name, pcclDataType_t dt, const void *data, uint64_t count)
{
    const ccoip_hash_entry e = {name, data, count, dt};
    uint64_t h = 0;
    const pcclResult_t res = ccoip_hash_tensor(&e, &h);
    PT_ASSERT(res == pcclSuccess, "ccoip_hash_tensor(%s) returned %d", name, (int)res);
    return h;
}

static uint64_t state_hash(const ccoip_hash_entry *e, uint32_t n)
{
    uint64_t h = 0;
    const pcclResult_t res = ccoip_hash_state(e, n, &h);
    PT_ASSERT(res == pcclSuccess, "ccoip_hash_state returned %d", (int)res);
    return h;
}

PTEST(hash, bytes_match_xxh3)
{
    /* Lengths across XXH3's internal size classes. */
    static const size_t lens[] = {0, 1, 3, 4, 8, 9, 16, 17, 128, 129, 240, 241, 1024, 100003};
    unsigned char *buf = malloc(100003u);
    PT_ASSERT(buf != NULL, "malloc");
    test_rng rng;
    test_rng_seed(&rng, 401);
    PT_LOG("seed 401");
    for (size_t i = 0; i < 100003u; i++)
        buf[i] = (unsigned char)test_rng_next(&rng);
    for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++) {
        const uint64_t want = (uint64_t)XXH3_64bits(buf, lens[k]);
        const uint64_t got = ccoip_hash_bytes(buf, lens[k]);
        PT_ASSERT(got == want, "len %zu: %#llx, want %#llx", lens[k], (unsigned long long)got,
                  (unsigned long long)want);
    }
    PT_ASSERT(ccoip_hash_bytes(NULL, 0) == XXH3_EMPTY, "empty input: %#llx",
              (unsigned long long)ccoip_hash_bytes(NULL, 0));
    free(buf);
}

PTEST(hash, tensor_golden)
{
    static const float f[5] = {1.0f, -2.5f, 3.25f, 0.0f, 1e-20f};
    static const int64_t i64[3] = {-1, INT64_MIN, 42};
    unsigned char u8[1000];
    for (size_t i = 0; i < sizeof u8; i++)
        u8[i] = (unsigned char)(i * 7u + 3u);
    char long_name[301];
    for (size_t i = 0; i < 300; i++)
        long_name[i] = (char)('a' + (char)(i % 26u));
    long_name[300] = '\0';

    PT_ASSERT(tensor_hash("weights", pcclFloat, f, 5) ==
                  ref_tensor_hash("weights", pcclFloat, f, 5),
              "f32 tensor");
    PT_ASSERT(tensor_hash("", pcclDouble, NULL, 0) == ref_tensor_hash("", pcclDouble, NULL, 0),
              "empty name, no data");
    PT_ASSERT(tensor_hash(long_name, pcclUint8, u8, 1000) ==
                  ref_tensor_hash(long_name, pcclUint8, u8, 1000),
              "long name, u8");
    PT_ASSERT(tensor_hash("i", pcclInt64, i64, 3) == ref_tensor_hash("i", pcclInt64, i64, 3),
              "i64");
    PT_ASSERT(tensor_hash("\xc3\xa9t\xc3\xa9", pcclBFloat16, u8, 17) ==
                  ref_tensor_hash("\xc3\xa9t\xc3\xa9", pcclBFloat16, u8, 17),
              "UTF-8 name, bf16");

    /* One fully spelled-out layout: name "ab", dtype u16 (3), count 2. */
    static const unsigned char bytes[] = {2, 0, 0, 0, 'a', 'b', 3, 0,    0,    0,    2,
                                          0, 0, 0, 0, 0,   0,   0, 0x34, 0x12, 0xff, 0xee};
    static const uint16_t u16[2] = {0x1234, 0xeeff};
    PT_ASSERT(tensor_hash("ab", pcclUint16, u16, 2) == (uint64_t)XXH3_64bits(bytes, sizeof bytes),
              "hand-written layout");
}

PTEST(hash, state_golden_and_order_independent)
{
    static const float f[4] = {1.0f, 2.0f, 3.0f, 4.0f};
    static const uint8_t b[3] = {9, 8, 7};
    static const double d[2] = {0.5, -0.25};
    /* Canonical (bytewise, unsigned) order: "a" < "ab" < "b" < "z" < "\xc3\xa9". */
    ccoip_hash_entry e[5] = {
        {"z", f, 4, pcclFloat}, {"\xc3\xa9", b, 3, pcclUint8}, {"ab", d, 2, pcclDouble},
        {"a", f, 2, pcclFloat}, {"b", NULL, 0, pcclInt32},
    };
    const uint64_t th_a = ref_tensor_hash("a", pcclFloat, f, 2);
    const uint64_t th_ab = ref_tensor_hash("ab", pcclDouble, d, 2);
    const uint64_t th_b = ref_tensor_hash("b", pcclInt32, NULL, 0);
    const uint64_t th_z = ref_tensor_hash("z", pcclFloat, f, 4);
    const uint64_t th_e = ref_tensor_hash("\xc3\xa9", pcclUint8, b, 3);
    unsigned char layout[40];
    size_t at = 0;
    at = put_le(layout, at, th_a, 8);
    at = put_le(layout, at, th_ab, 8);
    at = put_le(layout, at, th_b, 8);
    at = put_le(layout, at, th_z, 8);
    at = put_le(layout, at, th_e, 8);
    const uint64_t want = (uint64_t)XXH3_64bits(layout, at);

    PT_ASSERT(state_hash(e, 5) == want, "state hash %#llx, want %#llx",
              (unsigned long long)state_hash(e, 5), (unsigned long long)want);

    /* Every permutation of the five entries (Heap's algorithm, iterative). */
    uint32_t c[5] = {0, 0, 0, 0, 0};
    uint32_t perms = 1;
    uint32_t i = 1;
    while (i < 5) {
        if (c[i] < i) {
            const uint32_t j = (i % 2u == 0) ? 0 : c[i];
            const ccoip_hash_entry tmp = e[j];
            e[j] = e[i];
            e[i] = tmp;
            perms++;
            PT_ASSERT(state_hash(e, 5) == want, "permutation %u changes the state hash", perms);
            c[i]++;
            i = 1;
        } else {
            c[i] = 0;
            i++;
        }
    }
    PT_ASSERT(perms == 120, "visited %u permutations", perms);

    /* A single entry: the hash of its one tensor hash. */
    unsigned char one[8];
    put_le(one, 0, th_z, 8);
    const ccoip_hash_entry z = {"z", f, 4, pcclFloat};
    PT_ASSERT(state_hash(&z, 1) == (uint64_t)XXH3_64bits(one, 8), "single-entry state");
}

PTEST(hash, empty_state)
{
    uint64_t h = 0;
    PT_ASSERT(ccoip_hash_state(NULL, 0, &h) == pcclSuccess, "empty state is valid");
    PT_ASSERT(h == (uint64_t)XXH3_64bits(NULL, 0), "empty state: %#llx", (unsigned long long)h);
    PT_ASSERT(h == XXH3_EMPTY, "empty state: %#llx, want %#llx", (unsigned long long)h,
              (unsigned long long)XXH3_EMPTY);
    const ccoip_hash_entry e = {"x", NULL, 0, pcclFloat};
    PT_ASSERT(ccoip_hash_state(&e, 0, &h) == pcclSuccess && h == XXH3_EMPTY,
              "zero entries of a non-NULL array");
}

PTEST(hash, every_change_changes_hash)
{
    uint32_t data[64];
    for (uint32_t i = 0; i < 64; i++)
        data[i] = i * 2654435761u;
    const uint64_t base = tensor_hash("layer.0", pcclUint32, data, 64);

    /* One bit, in every byte position and bit. */
    unsigned char *bytes = (unsigned char *)data;
    for (size_t byte = 0; byte < sizeof data; byte++) {
        for (unsigned bit = 0; bit < 8; bit++) {
            bytes[byte] ^= (unsigned char)(1u << bit);
            const uint64_t h = tensor_hash("layer.0", pcclUint32, data, 64);
            bytes[byte] ^= (unsigned char)(1u << bit);
            PT_ASSERT(h != base, "flipping bit %u of byte %zu keeps the hash", bit, byte);
        }
    }
    PT_ASSERT(tensor_hash("layer.0", pcclUint32, data, 64) == base, "restored data, same hash");
    PT_ASSERT(tensor_hash("layer.1", pcclUint32, data, 64) != base, "renamed tensor");
    PT_ASSERT(tensor_hash("layer.0 ", pcclUint32, data, 64) != base, "name with a trailing space");
    PT_ASSERT(tensor_hash("layer.0", pcclInt32, data, 64) != base, "same bytes, other dtype");
    PT_ASSERT(tensor_hash("layer.0", pcclFloat, data, 64) != base, "same bytes, float dtype");
    PT_ASSERT(tensor_hash("layer.0", pcclUint32, data, 63) != base, "one element fewer");
    PT_ASSERT(tensor_hash("layer.0", pcclUint16, data, 128) != base, "same bytes, u16 x 128");
    PT_ASSERT(tensor_hash("layer.0", pcclUint8, data, 256) != base, "same bytes, u8 x 256");
    /* The length prefix separates name from data: moving a byte across the
     * boundary changes the hash. */
    static const unsigned char ab[2] = {'b', 'c'};
    PT_ASSERT(tensor_hash("a", pcclUint8, ab, 2) != tensor_hash("ab", pcclUint8, ab + 1, 1),
              "name/data boundary");

    /* In a state, changing one tensor changes the state hash. */
    uint32_t other[4] = {1, 2, 3, 4};
    ccoip_hash_entry e[2] = {{"layer.0", data, 64, pcclUint32}, {"bias", other, 4, pcclUint32}};
    const uint64_t s0 = state_hash(e, 2);
    other[2] ^= 0x100u;
    PT_ASSERT(state_hash(e, 2) != s0, "state hash follows a data change");
    other[2] ^= 0x100u;
    e[1].name = "bias2";
    PT_ASSERT(state_hash(e, 2) != s0, "state hash follows a rename");
    e[1].name = "bias";
    e[1].dtype = pcclInt32;
    PT_ASSERT(state_hash(e, 2) != s0, "state hash follows a dtype change");
    e[1].dtype = pcclUint32;
    e[1].count = 3;
    PT_ASSERT(state_hash(e, 2) != s0, "state hash follows a count change");
    e[1].count = 4;
    PT_ASSERT(state_hash(e, 2) == s0, "restored state, same hash");
    PT_ASSERT(state_hash(e, 1) != s0, "dropping a tensor changes the state hash");
}

PTEST(hash, unaligned_data_same_hash)
{
    double aligned[33];
    for (int i = 0; i < 33; i++)
        aligned[i] = (double)i * 0.3 - 4.0;
    unsigned char *raw = malloc(sizeof aligned + 16u);
    PT_ASSERT(raw != NULL, "malloc");
    const uint64_t want = tensor_hash("d", pcclDouble, aligned, 33);
    for (size_t off = 0; off < 16; off++) {
        memcpy(raw + off, aligned, sizeof aligned);
        PT_ASSERT(tensor_hash("d", pcclDouble, raw + off, 33) == want, "offset %zu", off);
        const ccoip_hash_entry e = {"d", raw + off, 33, pcclDouble};
        const ccoip_hash_entry a = {"d", aligned, 33, pcclDouble};
        PT_ASSERT(state_hash(&e, 1) == state_hash(&a, 1), "state, offset %zu", off);
    }
    free(raw);
}

PTEST(hash, invalid_arguments)
{
    static const float f[2] = {1.0f, 2.0f};
    uint64_t h = 0;
    const ccoip_hash_entry null_name = {NULL, f, 2, pcclFloat};
    PT_ASSERT(ccoip_hash_tensor(&null_name, &h) == pcclInvalidArgument, "NULL name");
    const ccoip_hash_entry null_data = {"x", NULL, 2, pcclFloat};
    PT_ASSERT(ccoip_hash_tensor(&null_data, &h) == pcclInvalidArgument, "NULL data, count 2");
    const ccoip_hash_entry bad_dt = {"x", f, 2, (pcclDataType_t)PCCL_DATA_TYPE_COUNT};
    PT_ASSERT(ccoip_hash_tensor(&bad_dt, &h) == pcclInvalidArgument, "invalid dtype");
    const ccoip_hash_entry neg_dt = {"x", f, 2, (pcclDataType_t)-1};
    PT_ASSERT(ccoip_hash_tensor(&neg_dt, &h) == pcclInvalidArgument, "negative dtype");
    const ccoip_hash_entry huge = {"x", f, UINT64_MAX / 2u, pcclFloat};
    PT_ASSERT(ccoip_hash_tensor(&huge, &h) == pcclInvalidArgument, "byte count overflows");
    const ccoip_hash_entry ok = {"x", f, 2, pcclFloat};
    PT_ASSERT(ccoip_hash_tensor(&ok, NULL) == pcclInvalidArgument, "NULL output");
    PT_ASSERT(ccoip_hash_tensor(NULL, &h) == pcclInvalidArgument, "NULL entry");

    /* Errors leave *hash_out alone. */
    h = 12345;
    const ccoip_hash_entry dup[3] = {
        {"a", f, 2, pcclFloat}, {"b", f, 1, pcclFloat}, {"a", f, 1, pcclFloat}};
    PT_ASSERT(ccoip_hash_state(dup, 3, &h) == pcclInvalidArgument, "duplicate names");
    PT_ASSERT(h == 12345, "output untouched on error");
    const ccoip_hash_entry with_null[2] = {{"a", f, 2, pcclFloat}, {NULL, f, 1, pcclFloat}};
    PT_ASSERT(ccoip_hash_state(with_null, 2, &h) == pcclInvalidArgument, "NULL name in state");
    const ccoip_hash_entry with_bad[2] = {{"a", f, 2, pcclFloat}, {"b", NULL, 1, pcclFloat}};
    PT_ASSERT(ccoip_hash_state(with_bad, 2, &h) == pcclInvalidArgument, "invalid entry in state");
    PT_ASSERT(ccoip_hash_state(NULL, 1, &h) == pcclInvalidArgument, "NULL array, n = 1");
    PT_ASSERT(ccoip_hash_state(dup, 2, NULL) == pcclInvalidArgument, "NULL output");
    PT_ASSERT(ccoip_hash_state(dup, 2, &h) == pcclSuccess, "the first two are distinct");
}

PTEST(hash, many_entries_canonical)
{
    /* 200 entries given in a scrambled order hash like the sorted array. */
    enum { N = 200 };
    static char names[N][8];
    static uint32_t vals[N];
    static ccoip_hash_entry sorted[N];
    static ccoip_hash_entry scrambled[N];
    for (uint32_t i = 0; i < N; i++) {
        /* Zero-padded decimal: lexicographic order == numeric order. */
        names[i][0] = 'k';
        names[i][1] = (char)('0' + (char)(i / 100u));
        names[i][2] = (char)('0' + (char)(i / 10u % 10u));
        names[i][3] = (char)('0' + (char)(i % 10u));
        names[i][4] = '\0';
        vals[i] = i ^ 0x5a5a5a5au;
        sorted[i] = (ccoip_hash_entry){names[i], &vals[i], 1, pcclUint32};
    }
    for (uint32_t i = 0; i < N; i++)
        scrambled[i] = sorted[(i * 7u + 3u) % N];
    uint8_t layout[8 * N];
    for (uint32_t i = 0; i < N; i++) {
        put_le(layout, 8u * i, ref_tensor_hash(names[i], pcclUint32, &vals[i], 1), 8);
    }
    const uint64_t want = (uint64_t)XXH3_64bits(layout, sizeof layout);
    PT_ASSERT(state_hash(sorted, N) == want, "sorted");
    PT_ASSERT(state_hash(scrambled, N) == want, "scrambled");
}
