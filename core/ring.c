/*
 * ring.c — the ring all-reduce schedule (ccoip_ring.h).
 *
 * Pure arithmetic on (count, world, rank, step): no state, no allocation.
 * The header comment is the specification; this file only evaluates it.
 */
#include "ccoip_ring.h"

#include <assert.h>
#include <stddef.h>

/* (a - b) mod world for a, b < world, without leaving unsigned range. */
static uint32_t ring_sub_mod(uint32_t a, uint32_t b, uint32_t world)
{
    assert(a < world && b < world);
    return a >= b ? a - b : world - (b - a);
}

ccoip_span ccoip_ring_chunk(uint64_t count, uint32_t world, uint32_t c)
{
    assert(world >= 1 && c < world);
    const uint64_t base = count / world;
    const uint64_t rem = count % world;
    ccoip_span span;
    /* The first rem chunks hold base + 1 elements, so chunk c starts after
     * c chunks of base elements plus min(c, rem) extra ones. */
    span.offset = (uint64_t)c * base + (c < rem ? (uint64_t)c : rem);
    span.count = base + (c < rem ? 1u : 0u);
    return span;
}

uint32_t ccoip_ring_num_steps(uint32_t world)
{
    return world == 0 ? 0 : 2u * (world - 1u);
}

uint32_t ccoip_ring_owned_chunk(uint32_t world, uint32_t rank)
{
    assert(world >= 1 && rank < world);
    return rank + 1u == world ? 0 : rank + 1u;
}

pcclResult_t ccoip_ring_step_get(uint64_t count, uint32_t world, uint32_t rank, uint32_t step,
                                 ccoip_ring_step *out)
{
    if (out == NULL || world == 0 || world > CCOIP_RING_WORLD_MAX || rank >= world ||
        step >= ccoip_ring_num_steps(world)) {
        return pcclInvalidArgument;
    }
    const uint32_t half = world - 1u;
    if (step < half) {
        /* Reduce-scatter: send (r - s), receive (r - s - 1). */
        out->phase = CCOIP_RING_REDUCE_SCATTER;
        out->send_chunk = ring_sub_mod(rank, step, world);
        out->recv_chunk = ring_sub_mod(out->send_chunk, 1u, world);
    } else {
        /* All-gather, t = s - (N - 1): send (r + 1 - t), receive (r - t). */
        const uint32_t t = step - half;
        out->phase = CCOIP_RING_ALL_GATHER;
        out->send_chunk = ring_sub_mod(ccoip_ring_owned_chunk(world, rank), t, world);
        out->recv_chunk = ring_sub_mod(rank, t, world);
    }
    out->send = ccoip_ring_chunk(count, world, out->send_chunk);
    out->recv = ccoip_ring_chunk(count, world, out->recv_chunk);
    return pcclSuccess;
}

uint64_t ccoip_ring_elements_sent(uint64_t count, uint32_t world, uint32_t rank)
{
    assert(world >= 1 && world <= CCOIP_RING_WORLD_MAX && rank < world);
    if (world == 1) return 0;
    /* Reduce-scatter sends every chunk but the owned one (r + 1); the
     * all-gather sends every chunk but (r + 2), the one the successor owns. */
    const uint32_t owned = ccoip_ring_owned_chunk(world, rank);
    const uint32_t next_owned = ccoip_ring_owned_chunk(world, owned);
    return (count - ccoip_ring_chunk(count, world, owned).count) +
           (count - ccoip_ring_chunk(count, world, next_owned).count);
}
