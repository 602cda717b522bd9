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
    const uint32_t v = gray(rank);
    if (t < k) {
        /* Halving t: keep the half bit t names, send the other. */
        const uint32_t w = v ^ (1u << t);
        out->partner = gray_inverse(w);
        out->reduce = true;
        out->recv = range_of(count, v, t + 1u);
        out->send = range_of(count, w, t + 1u);
        return pcclSuccess;
    }
    /* Doubling: bit s = 2k - 1 - t, each side sends what it holds complete. */
    const uint32_t s = 2u * k - 1u - t;
    const uint32_t w = v ^ (1u << s);
    out->partner = gray_inverse(w);
    out->reduce = false;
    out->send = range_of(count, v, s + 1u);
    out->recv = range_of(count, w, s + 1u);
    return pcclSuccess;
}

ccoip_span ccoip_hd_owned(uint64_t count, uint32_t world, uint32_t rank)
{
    return range_of(count, gray(rank), log2_world(world));
}
