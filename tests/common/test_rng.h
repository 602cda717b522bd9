/*
 * test_rng.h — a seeded, integer-only PRNG for tests (splitmix64): the same
 * sequence on every platform, so a failing seed reproduces everywhere.
 */
#ifndef TEST_RNG_H
#define TEST_RNG_H

#include <stdint.h>

typedef struct test_rng {
    uint64_t state;
} test_rng;

/** Seeds the generator. */
void test_rng_seed(test_rng *r, uint64_t seed);
/** Next 64 random bits. */
uint64_t test_rng_next(test_rng *r);
/** Uniform in [0, bound) for bound >= 1 (tiny modulo bias is fine for tests). */
uint64_t test_rng_below(test_rng *r, uint64_t bound);

#endif /* TEST_RNG_H */
