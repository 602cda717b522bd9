/*
 * sim_heap.h — the event queue of the simulator: a min-heap ordered by
 * (time, seq). seq is assigned on push and increases, so events at the same
 * time fire in the order they were scheduled (the canonical/raft fixture
 * rule: always the earliest event, ties by index). The payload is an opaque
 * value below 2^24 (an index into the world's event pool).
 *
 * Layout (scale, issue 5): a 4-ary heap of 16-byte entries, seq and payload
 * packed into one word (seq << 24 | payload; seq < 2^40), so the four
 * children of a node share one cache line. (time, seq) is a total order, so
 * the pop order is the same as any other heap's. Items for the time of the
 * last pop (zero-delay events) wait in a FIFO instead of the heap.
 */
#ifndef SIM_HEAP_H
#define SIM_HEAP_H

#include <stdbool.h>
#include <stdint.h>

#define SIM_HEAP_PAYLOAD_BITS 24u
#define SIM_HEAP_PAYLOAD_MAX  ((UINT64_C(1) << SIM_HEAP_PAYLOAD_BITS) - 1u)

typedef struct sim_heap_item {
    uint64_t time_ns;
    uint64_t seq;
    uint64_t payload;
} sim_heap_item;

typedef struct sim_heap_entry {
    uint64_t time_ns;
    uint64_t key; /**< seq << SIM_HEAP_PAYLOAD_BITS | payload */
} sim_heap_entry;

typedef struct sim_heap {
    sim_heap_entry *items;
    uint64_t len;
    uint64_t cap; /**< Grows on demand up to max_items. */
    uint64_t max_items;
    uint64_t next_seq;
    /* Items pushed for the time of the last pop skip the heap: they are later in (time, seq)
     * than everything popped and than each other, so a FIFO beside the heap keeps the order
     * (a pop takes the smaller of the FIFO's head and the heap's top). */
    uint64_t last_time;
    sim_heap_entry *fifo; /**< ring of fifo_cap entries (a power of two) */
    uint64_t fifo_head, fifo_len, fifo_cap;
} sim_heap;

/** Initializes an empty heap holding at most max_items (at most 2^24). Returns false when out of
 * memory. */
bool sim_heap_init(sim_heap *h, uint64_t max_items);
void sim_heap_deinit(sim_heap *h);
/** Pushes (time, next seq, payload). Returns false when the heap is full or payload does not fit
 * its 24 bits (a bound, never silent). */
bool sim_heap_push(sim_heap *h, uint64_t time_ns, uint64_t payload);
/** Pops the smallest (time, seq) into *out. Returns false when empty. */
bool sim_heap_pop(sim_heap *h, sim_heap_item *out);
/** The smallest item without removing it. Returns false when empty. */
bool sim_heap_peek(const sim_heap *h, sim_heap_item *out);

#endif /* SIM_HEAP_H */
