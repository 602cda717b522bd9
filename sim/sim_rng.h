/*
 * sim_rng.h — the simulator's only source of randomness: splitmix64, integer
 * only, so a seed gives the same sequence natively and under WASM.
 */
#ifndef SIM_RNG_H
#define SIM_RNG_H

#include <stdbool.h>
#include <stdint.h>

typedef struct sim_rng {
    uint64_t state;
} sim_rng;

/** Seeds r. Every seed, 0 included, is fine. */
void sim_rng_seed(sim_rng *r, uint64_t seed);
/** Next 64 random bits. */
uint64_t sim_rng_next(sim_rng *r);
/** Uniform in [0, bound) for bound >= 1 (rejection sampling: no modulo bias); 0 when bound is 0. */
uint64_t sim_rng_below(sim_rng *r, uint64_t bound);
/** Uniform in [lo, hi] (lo <= hi). */
uint64_t sim_rng_range(sim_rng *r, uint64_t lo, uint64_t hi);
/** True with probability permille / 1000. */
bool sim_rng_chance(sim_rng *r, uint32_t permille);
/** An independent generator for a sub-stream (e.g. one per peer), derived from r and a label. */
sim_rng sim_rng_fork(sim_rng *r, uint64_t label);
/** Exponentially distributed wait with the given mean, in integer arithmetic (at most 20 means). */
uint64_t sim_rng_exp(sim_rng *r, uint64_t mean);

#endif /* SIM_RNG_H */
