/*
 * sim_rng.c — splitmix64 (sim_rng.h).
 */
#include "sim_rng.h"

#include "ccoip_hash.h"

void sim_rng_seed(sim_rng *r, uint64_t seed)
{
    r->state = seed ^ 0x5ec0de5eed5eed01ull;
}

uint64_t sim_rng_next(sim_rng *r)
{
    return ccoip_splitmix64(&r->state);
}

uint64_t sim_rng_below(sim_rng *r, uint64_t bound)
{
    if (bound == 0) return 0;
    /* Reject the top partial block so every value is equally likely. */
    const uint64_t limit = UINT64_MAX - (UINT64_MAX % bound);
    for (;;) {
        const uint64_t x = sim_rng_next(r);
        if (x < limit) return x % bound;
    }
}

uint64_t sim_rng_range(sim_rng *r, uint64_t lo, uint64_t hi)
{
    if (hi <= lo) return lo;
    if (lo == 0 && hi == UINT64_MAX) return sim_rng_next(r);
    return lo + sim_rng_below(r, hi - lo + 1u);
}

bool sim_rng_chance(sim_rng *r, uint32_t permille)
{
    if (permille == 0) return false;
    return sim_rng_below(r, 1000u) < permille;
}

sim_rng sim_rng_fork(sim_rng *r, uint64_t label)
{
    sim_rng child;
    sim_rng_seed(&child, sim_rng_next(r) ^ (label * 0xd1342543de82ef95ull));
    return child;
}

uint64_t sim_rng_exp(sim_rng *r, uint64_t mean)
{
    /* Inverse-CDF sampling on a 16-bit uniform with an integer log2 table:
     * -ln(u) ≈ (16 - log2(x)) * ln 2 with x uniform in [1, 65536]. The
     * fractional part of log2 is interpolated linearly, which is plenty for
     * a churn process. */
    const uint64_t x = sim_rng_below(r, 65536u) + 1u;
    uint32_t lg = 0;
    while ((x >> (lg + 1u)) != 0)
        lg++;
    /* log2(x) in 1/1024 units: integer part + linear fraction. */
    const uint64_t frac = ((x - ((uint64_t)1 << lg)) << 10) >> lg;
    const uint64_t log2_x = ((uint64_t)lg << 10) + frac;
    const uint64_t neg_log2_u = ((uint64_t)16u << 10) - log2_x; /* in 1/1024 */
    /* ln 2 ≈ 710 / 1024. */
    uint64_t w = mean / 1024u * neg_log2_u * 710u / 1024u +
                 (mean % 1024u) * neg_log2_u * 710u / (1024u * 1024u);
    if (w > mean * 20u) w = mean * 20u;
    return w;
}
