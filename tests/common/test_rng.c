#include "test_rng.h"

#include "ccoip_hash.h"

void test_rng_seed(test_rng *r, uint64_t seed)
{
    r->state = seed;
}

uint64_t test_rng_next(test_rng *r)
{
    return ccoip_splitmix64(&r->state);
}

uint64_t test_rng_below(test_rng *r, uint64_t bound)
{
    return test_rng_next(r) % bound;
}
