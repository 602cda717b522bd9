/*
 * hash.c — content hashes of shared state (ccoip_hash.h).
 *
 * XXH3-64 with seed 0, inlined from Debian's xxhash.h (the build copies it
 * into a build include folder so emcc sees it too). The streaming state lives
 * on the stack; nothing here allocates. The hashed bytes are built field by
 * field in explicit little-endian order (DESIGN.md §2 rule 5).
 */
#include "ccoip_hash.h"

#include <assert.h>
#include <stddef.h>
#include <string.h>

#include "ccoip_dtype.h"

/* xxhash.h is used header-only. Its heap-state helpers (XXH3_createState)
 * reference malloc/free; this file keeps its states on the stack. */
#define XXH_INLINE_ALL
#include "xxhash.h"

/* Element bytes are hashed as they sit in memory, which the header defines
 * as little-endian: every supported target (x86-64, aarch64, wasm32) is. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "ccoip_hash assumes a little-endian host"
#endif

/* Largest slice handed to XXH3 at once: its lengths are size_t, which is
 * 32 bits on wasm32, while our byte counts are uint64_t. */
#define HASH_SLICE_BYTES ((uint64_t)1 << 30)

static void hash_put_u32le(uint8_t out[4], uint32_t v)
{
    for (unsigned i = 0; i < 4; i++)
        out[i] = (uint8_t)(v >> (8u * i));
}

static void hash_put_u64le(uint8_t out[8], uint64_t v)
{
    for (unsigned i = 0; i < 8; i++)
        out[i] = (uint8_t)(v >> (8u * i));
}

/* Feeds len bytes to the stream in slices that fit size_t. */
static void hash_update(XXH3_state_t *st, const void *data, uint64_t len)
{
    const unsigned char *p = (const unsigned char *)data;
    while (len > 0) {
        const uint64_t n = len < HASH_SLICE_BYTES ? len : HASH_SLICE_BYTES;
        const XXH_errorcode rc = XXH3_64bits_update(st, p, (size_t)n);
        assert(rc == XXH_OK);
        (void)rc;
        p += n;
        len -= n;
    }
}

uint64_t ccoip_hash_bytes(const void *data, uint64_t len)
{
    assert(data != NULL || len == 0);
    if (len <= HASH_SLICE_BYTES) return (uint64_t)XXH3_64bits(data, (size_t)len);
    XXH3_state_t st;
    const XXH_errorcode rc = XXH3_64bits_reset(&st);
    assert(rc == XXH_OK);
    (void)rc;
    hash_update(&st, data, len);
    return (uint64_t)XXH3_64bits_digest(&st);
}

/* Checks one entry; on success stores its name length and data byte count. */
static pcclResult_t hash_entry_check(const ccoip_hash_entry *e, uint32_t *name_len,
                                     uint64_t *data_bytes)
{
    if (e == NULL || e->name == NULL || !ccoip_dtype_valid(e->dtype)) return pcclInvalidArgument;
    if (e->data == NULL && e->count > 0) return pcclInvalidArgument;
    const size_t len = strlen(e->name);
    if ((uint64_t)len > UINT32_MAX) return pcclInvalidArgument;
    const uint32_t elem = ccoip_dtype_size(e->dtype);
    if (e->count > UINT64_MAX / elem) return pcclInvalidArgument;
    *name_len = (uint32_t)len;
    *data_bytes = e->count * elem;
    return pcclSuccess;
}

pcclResult_t ccoip_hash_tensor(const ccoip_hash_entry *entry, uint64_t *hash_out)
{
    uint32_t name_len = 0;
    uint64_t data_bytes = 0;
    if (hash_out == NULL) return pcclInvalidArgument;
    const pcclResult_t res = hash_entry_check(entry, &name_len, &data_bytes);
    if (res != pcclSuccess) return res;

    XXH3_state_t st;
    const XXH_errorcode rc = XXH3_64bits_reset(&st);
    assert(rc == XXH_OK);
    (void)rc;
    uint8_t field[8];
    hash_put_u32le(field, name_len);
    hash_update(&st, field, 4);
    hash_update(&st, entry->name, name_len);
    hash_put_u32le(field, (uint32_t)entry->dtype);
    hash_update(&st, field, 4);
    hash_put_u64le(field, entry->count);
    hash_update(&st, field, 8);
    hash_update(&st, entry->data, data_bytes);
    *hash_out = (uint64_t)XXH3_64bits_digest(&st);
    return pcclSuccess;
}

/* Bytewise name order: strcmp compares as unsigned char (C11 7.24.4). */
static int hash_name_cmp(const char *a, const char *b)
{
    return strcmp(a, b);
}

pcclResult_t ccoip_hash_state(const ccoip_hash_entry *entries, uint32_t n, uint64_t *hash_out)
{
    if (hash_out == NULL || (entries == NULL && n > 0)) return pcclInvalidArgument;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t name_len = 0;
        uint64_t data_bytes = 0;
        const pcclResult_t res = hash_entry_check(&entries[i], &name_len, &data_bytes);
        if (res != pcclSuccess) return res;
        for (uint32_t j = 0; j < i; j++) {
            if (hash_name_cmp(entries[i].name, entries[j].name) == 0) return pcclInvalidArgument;
        }
    }

    XXH3_state_t st;
    const XXH_errorcode rc = XXH3_64bits_reset(&st);
    assert(rc == XXH_OK);
    (void)rc;
    /* Canonical order without allocating: each round selects the smallest
     * name greater than the previous one. Names are distinct (checked
     * above), so n rounds visit every entry exactly once. */
    const char *prev = NULL;
    for (uint32_t k = 0; k < n; k++) {
        uint32_t best = n;
        for (uint32_t i = 0; i < n; i++) {
            if (prev != NULL && hash_name_cmp(entries[i].name, prev) <= 0) continue;
            if (best == n || hash_name_cmp(entries[i].name, entries[best].name) < 0) best = i;
        }
        assert(best < n);
        uint64_t th = 0;
        const pcclResult_t res = ccoip_hash_tensor(&entries[best], &th);
        assert(res == pcclSuccess);
        (void)res;
        uint8_t field[8];
        hash_put_u64le(field, th);
        hash_update(&st, field, 8);
        prev = entries[best].name;
    }
    *hash_out = (uint64_t)XXH3_64bits_digest(&st);
    return pcclSuccess;
}
