/*
 * sim_heap.h — the event queue of the simulator: a binary min-heap ordered by
 * (time, seq). seq is assigned on push and increases, so events at the same
 * time fire in the order they were scheduled (the canonical/raft fixture
 * rule: always the earliest event, ties by index). The payload is an opaque
 * 64-bit value (an index into the world's event pool).
 */
#ifndef SIM_HEAP_H
#define SIM_HEAP_H

#include <stdbool.h>
#include <stdint.h>

typedef struct sim_heap_item {
    uint64_t time_ns;
    uint64_t seq;
    uint64_t payload;
} sim_heap_item;

typedef struct sim_heap {
    sim_heap_item *items;
    uint64_t len;
    uint64_t cap; /**< Grows on demand up to max_items. */
    uint64_t max_items;
    uint64_t next_seq;
} sim_heap;

/** Initializes an empty heap holding at most max_items. Returns false when out of memory. */
bool sim_heap_init(sim_heap *h, uint64_t max_items);
void sim_heap_deinit(sim_heap *h);
/** Pushes (time, next seq, payload). Returns false when the heap is full (a bound, never silent).
 */
bool sim_heap_push(sim_heap *h, uint64_t time_ns, uint64_t payload);
/** Pops the smallest (time, seq) into *out. Returns false when empty. */
bool sim_heap_pop(sim_heap *h, sim_heap_item *out);
/** The smallest item without removing it. Returns false when empty. */
bool sim_heap_peek(const sim_heap *h, sim_heap_item *out);

#endif /* SIM_HEAP_H */
