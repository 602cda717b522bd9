/*
 * sim_heap.h — the event queue of the simulator: a min-heap ordered by
 * (time, seq). seq is assigned on push and increases, so events at the same
 * time fire in the order they were scheduled (the canonical/raft fixture
 * rule: always the earliest event, ties by index). Each item carries its
 * event inline: a 64-bit payload and a 64-bit aux word.
 *
 * Layout (scale, issue 5): a 4-ary heap whose keys (time, seq) are 16-byte
 * entries, so the four children of a node share one cache line; the items'
 * payloads sit in a parallel array at the same positions (read once per
 * pop, never by the comparisons). (time, seq) is a total order, so the pop
 * order is the same as any other heap's. Items for the time of the last pop
 * (zero-delay events) wait in a FIFO instead of the heap.
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

typedef struct sim_heap_key {
    uint64_t time_ns;
    uint64_t seq;
} sim_heap_key;

typedef struct sim_heap_val {
    uint64_t payload;
    uint64_t aux;
} sim_heap_val;

typedef struct sim_heap {
    sim_heap_key *keys;
    sim_heap_val *vals; /**< vals[i] belongs to keys[i] */
    uint64_t len;
    uint64_t cap; /**< Grows on demand up to max_items. */
    uint64_t max_items;
    uint64_t next_seq;
    /* Items pushed for the time of the last pop skip the heap: they are later in (time, seq)
     * than everything popped and than each other, so a FIFO beside the heap keeps the order
     * (a pop takes the smaller of the FIFO's head and the heap's top). */
    uint64_t last_time;
    sim_heap_key *fifo_keys; /**< ring of fifo_cap entries (a power of two) */
    sim_heap_val *fifo_vals;
    uint64_t fifo_head, fifo_len, fifo_cap;
} sim_heap;

/** Initializes an empty heap holding at most max_items. Returns false when out of memory. */
bool sim_heap_init(sim_heap *h, uint64_t max_items);
void sim_heap_deinit(sim_heap *h);
/** Pushes (time, next seq, payload) with aux 0. Returns false when the heap is full (a bound,
 * never silent). */
bool sim_heap_push(sim_heap *h, uint64_t time_ns, uint64_t payload);
/** Pushes (time, next seq, payload, aux). Returns false when the heap is full. */
bool sim_heap_push2(sim_heap *h, uint64_t time_ns, uint64_t payload, uint64_t aux);
/** Takes the next seq without pushing (a push deferred or skipped keeps its place in the
 * order: sim_heap_push_seq inserts it later under this seq). */
uint64_t sim_heap_take_seq(sim_heap *h);
/** Pushes (time, seq, payload, aux) with a seq from sim_heap_take_seq (unique, any age).
 * Returns false when the heap is full. */
bool sim_heap_push_seq(sim_heap *h, uint64_t time_ns, uint64_t seq, uint64_t payload, uint64_t aux);
/** Pops the smallest (time, seq) into *out. Returns false when empty. */
bool sim_heap_pop(sim_heap *h, sim_heap_item *out);
/** sim_heap_pop, and the item's aux word into *aux. */
bool sim_heap_pop2(sim_heap *h, sim_heap_item *out, uint64_t *aux);
/** The smallest item without removing it. Returns false when empty. */
bool sim_heap_peek(const sim_heap *h, sim_heap_item *out);
/** The smallest item's value without removing it (NULL when empty). */
const sim_heap_val *sim_heap_peek_val(const sim_heap *h);

#endif /* SIM_HEAP_H */
