/*
 * ccoip_hash.h — content hashes of shared state (XXH3-64).
 *
 * The hashed bytes are explicit fields, never struct memory (DESIGN.md §2
 * rule 5), so every platform and every implementation of CCoIP computes the
 * same value (docs/semantics.md §Hashing):
 *
 *   tensor hash = XXH3_64bits(seed 0) of
 *       u32 LE name length || name bytes (no NUL) || u32 LE dtype ||
 *       u64 LE element count || element bytes (little-endian, as in memory)
 *   state hash  = XXH3_64bits(seed 0) of the u64 LE tensor hashes, in
 *       ascending bytewise order of the tensor names
 *
 * Data may have any alignment.
 */
#ifndef CCOIP_HASH_H
#define CCOIP_HASH_H

#include <stdint.h>

#include "pccl_types.h"

/** A named tensor to hash. Counts are uint64_t (size_t is 32 bits on wasm32). */
typedef struct ccoip_hash_entry {
    const char *name; /**< NUL-terminated key. */
    const void *data; /**< count elements of dtype; may be NULL when count is 0. */
    uint64_t count;
    pcclDataType_t dtype;
} ccoip_hash_entry;

/**
 * One step of splitmix64: advances *state and returns 64 mixed bits. The one
 * integer PRNG of the project (the machines, the simulator, the tests): the
 * same sequence on every platform.
 */
static inline uint64_t ccoip_splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

/** XXH3-64 (seed 0) of len bytes. */
uint64_t ccoip_hash_bytes(const void *data, uint64_t len);

/**
 * The tensor hash of one entry (see the header comment).
 * Returns pcclInvalidArgument for a NULL name, an invalid dtype, or NULL
 * data with count > 0.
 */
pcclResult_t ccoip_hash_tensor(const ccoip_hash_entry *entry, uint64_t *hash_out);

/**
 * The state hash of n entries, in canonical (bytewise name) order whatever
 * their order in the array. Uses no heap. Returns pcclInvalidArgument for an
 * invalid entry or two entries with the same name.
 */
pcclResult_t ccoip_hash_state(const ccoip_hash_entry *entries, uint32_t n, uint64_t *hash_out);

#endif /* CCOIP_HASH_H */
