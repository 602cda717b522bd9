/*
 * ccoip_ring.h — the ring all-reduce schedule, as pure functions.
 *
 * N peers in ring order 0..N-1; rank r sends to (r+1) mod N and receives from
 * (r-1) mod N. The buffer of `count` elements is cut into N contiguous chunks:
 * with base = count / N and rem = count % N, chunk c has base + (c < rem ? 1 :
 * 0) elements, the first rem chunks one longer (chunks may be empty when
 * count < N; count 0 is legal).
 *
 * Reduce-scatter, steps s = 0 .. N-2: rank r sends chunk (r - s) mod N and
 * receives chunk (r - s - 1) mod N, which it reduces into its buffer. After
 * it, rank r holds the fully reduced chunk (r + 1) mod N: its owned chunk.
 * The owner finalizes it (AVG: divide by N; quantized: adopt its own
 * quantize→dequantize result) before sending it on.
 * All-gather, steps s = N-1 .. 2N-3 (t = s - (N-1)): rank r sends chunk
 * (r + 1 - t) mod N and receives chunk (r - t) mod N, which it copies (when
 * quantized: forwards the received codes verbatim, never re-quantizes).
 * N = 1 has no steps: the owned chunk is the whole buffer.
 *
 * Every rank ends with bit-identical data because each final chunk is
 * computed once, by its owner, and copied around the ring.
 */
#ifndef CCOIP_RING_H
#define CCOIP_RING_H

#include <stdbool.h>
#include <stdint.h>

#include "pccl_types.h"

/** Largest world size the schedule accepts. */
#define CCOIP_RING_WORLD_MAX (1u << 20)

/** A range of elements: [offset, offset + count). */
typedef struct ccoip_span {
    uint64_t offset;
    uint64_t count;
} ccoip_span;

/** The two phases of a ring all-reduce. */
typedef enum ccoip_ring_phase {
    CCOIP_RING_REDUCE_SCATTER = 0, /**< Received chunks are reduced into the buffer. */
    CCOIP_RING_ALL_GATHER = 1      /**< Received chunks are copied into the buffer. */
} ccoip_ring_phase;

/** What one rank does in one step. */
typedef struct ccoip_ring_step {
    ccoip_ring_phase phase;
    uint32_t send_chunk; /**< Chunk sent to the successor. */
    uint32_t recv_chunk; /**< Chunk received from the predecessor. */
    ccoip_span send;     /**< Elements of send_chunk. */
    ccoip_span recv;     /**< Elements of recv_chunk. */
} ccoip_ring_step;

/** Chunk c of a count-element buffer split for world peers. world >= 1, c < world. */
ccoip_span ccoip_ring_chunk(uint64_t count, uint32_t world, uint32_t c);

/** Number of steps of one all-reduce: 2 (world - 1); 0 for world 1. */
uint32_t ccoip_ring_num_steps(uint32_t world);

/** The chunk rank holds fully reduced after the reduce-scatter: (rank + 1) mod world. */
uint32_t ccoip_ring_owned_chunk(uint32_t world, uint32_t rank);

/**
 * Fills *out with what rank does in step.
 * Returns pcclSuccess, or pcclInvalidArgument when world is 0 or above
 * CCOIP_RING_WORLD_MAX, rank >= world, or step >= ccoip_ring_num_steps(world).
 */
pcclResult_t ccoip_ring_step_get(uint64_t count, uint32_t world, uint32_t rank, uint32_t step,
                                 ccoip_ring_step *out);

/**
 * Elements rank sends (and, equally, receives) over a whole all-reduce:
 * every chunk except one in each phase. Multiply by the wire element size
 * for bytes.
 */
uint64_t ccoip_ring_elements_sent(uint64_t count, uint32_t world, uint32_t rank);

/**
 * Small all-reduce (issue 7, docs/semantics.md §5): when it holds, the members run an all-gather
 * of whole inputs instead of the ring (N − 1 steps instead of 2·(N − 1)): in step t rank r sends
 * the input of rank (r − t) mod N and receives that of rank (r − t − 1) mod N (frame chunk = that
 * rank); then every member reduces the N inputs in rank order 0, 1, ..., N − 1 (AVG: then / N),
 * so every member ends bit-identical. Unquantized, at most 32 KiB per input and at most 64 KiB
 * moved per member (measured on loopback: beyond, the ring is faster).
 */
static inline bool ccoip_ring_use_gather(uint64_t bytes, uint32_t world, bool quantized)
{
    return world >= 2u && !quantized && bytes > 0 && bytes <= ((uint64_t)32 << 10) &&
           bytes <= ((uint64_t)64 << 10) / (world - 1u);
}

/** The least bytes one stripe of a striped ring step carries (ccoip_ring_stripes). */
#define CCOIP_RING_STRIPE_MIN ((uint64_t)512 << 10)

/**
 * Striping (issue 7, docs/protocol.md §8.2): over a link of `pool` connections (the size both
 * ends agreed, §8.1) an unquantized ring step that moves `bytes` is cut into this many stripes,
 * stripe j (elements ccoip_ring_chunk(chunk count, stripes, j) of the chunk) on connection j, so
 * one large all-reduce keeps every connection of the pool (and its threads) busy. 1: not
 * striped (the op's connection is seq mod pool, as before). Both ends compute it alike from the
 * chunk and the agreed size.
 */
static inline uint32_t ccoip_ring_stripes(uint64_t bytes, uint32_t pool)
{
    const uint64_t k = bytes / CCOIP_RING_STRIPE_MIN;
    if (pool < 2u || k < 2u) return 1u;
    return k < pool ? (uint32_t)k : pool;
}

/** The largest input the master relay takes (docs/protocol.md §6.8.2); a master's
 * relay_max_bytes is clamped to it. */
#define CCOIP_RELAY_MAX_BYTES ((uint64_t)64 << 10)

/**
 * Master relay (issue 7, docs/protocol.md §6.8.2): an unquantized all-reduce of 1 ..
 * relay_max bytes (the master's HelloResult.relay_max_bytes) is reduced by the master: every
 * member sends its input with its initiate, the master answers each with the result, reduced in
 * peer-id order (AVG: then / N). Every member decides alike: same master, same parameters.
 */
static inline bool ccoip_relay_use(uint64_t bytes, uint64_t relay_max, bool quantized)
{
    return !quantized && bytes > 0 && bytes <= relay_max && bytes <= CCOIP_RELAY_MAX_BYTES;
}

#endif /* CCOIP_RING_H */
