#include "test_rng.h"

void test_rng_seed(test_rng *r, uint64_t seed)
{
    r->state = seed;
}

uint64_t test_rng_next(test_rng *r)
{
    uint64_t z = (r->state += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

uint64_t test_rng_below(test_rng *r, uint64_t bound)
{
    return test_rng_next(r) % bound;
}
