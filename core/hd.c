/*
 * hd.c — the recursive halving–doubling schedule (ccoip_hd.h).
 */
#include "ccoip_hd.h"

#include <stddef.h>

static uint32_t log2_world(uint32_t world)
{
    return world == 2u ? 1u : world == 4u ? 2u : 0u;
}

bool ccoip_hd_fits(uint64_t count, uint32_t world)
{
    return log2_world(world) != 0 && count >= world;
}

uint32_t ccoip_hd_steps(uint32_t world)
{
    return 2u * log2_world(world);
}

static uint32_t gray(uint32_t pos)
{
    return pos ^ (pos >> 1);
}

static uint32_t gray_inverse(uint32_t v)
{
    uint32_t pos = v;
    for (uint32_t s = v >> 1; s != 0; s >>= 1)
        pos ^= s;
    return pos;
}

/* The range virtual rank v holds after its first `halvings` halvings. */
static ccoip_span range_of(uint64_t count, uint32_t v, uint32_t halvings)
{
    uint64_t lo = 0, hi = count;
    for (uint32_t s = 0; s < halvings; s++) {
        const uint64_t mid = lo + (hi - lo) / 2u;
        if ((v >> s) & 1u) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    ccoip_span r = {lo, hi - lo};
    return r;
}

pcclResult_t ccoip_hd_step_get(uint64_t count, uint32_t world, uint32_t rank, uint32_t t,
                               ccoip_hd_step *out)
{
    const uint32_t k = log2_world(world);
    if (!ccoip_hd_fits(count, world) || rank >= world || t >= 2u * k || out == NULL)
        return pcclInvalidArgument;
    /* Halving t works on bit t: the member keeps the half that bit names and sends the other.
     * Doubling t works on bit 2k - 1 - t: each side sends the range it holds complete. */
    const bool halving = t < k;
    const uint32_t b = halving ? t : 2u * k - 1u - t;
    const uint32_t v = gray(rank), w = v ^ (1u << b);
    const ccoip_span mine = range_of(count, v, b + 1u), theirs = range_of(count, w, b + 1u);
    out->partner = gray_inverse(w);
    out->reduce = halving;
    out->send = halving ? theirs : mine;
    out->recv = halving ? mine : theirs;
    return pcclSuccess;
}

ccoip_span ccoip_hd_owned(uint64_t count, uint32_t world, uint32_t rank)
{
    return range_of(count, gray(rank), log2_world(world));
}
