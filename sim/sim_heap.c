/*
 * sim_heap.c — 4-ary min-heap on (time, seq) with a FIFO for zero-delay items (sim_heap.h).
 */
#include "sim_heap.h"

#include <stdlib.h>

static inline bool entry_less(const sim_heap_entry *a, const sim_heap_entry *b)
{
    if (a->time_ns != b->time_ns) return a->time_ns < b->time_ns;
    return a->key < b->key;
}

static void entry_out(const sim_heap_entry *e, sim_heap_item *out)
{
    out->time_ns = e->time_ns;
    out->seq = e->key >> SIM_HEAP_PAYLOAD_BITS;
    out->payload = e->key & SIM_HEAP_PAYLOAD_MAX;
}

bool sim_heap_init(sim_heap *h, uint64_t max_items)
{
    h->len = 0;
    h->cap = 256;
    h->max_items = max_items < SIM_HEAP_PAYLOAD_MAX + 1u ? max_items : SIM_HEAP_PAYLOAD_MAX + 1u;
    h->next_seq = 0;
    h->last_time = 0;
    h->fifo_head = h->fifo_len = 0;
    h->fifo_cap = 256;
    h->items = malloc((size_t)h->cap * sizeof *h->items);
    h->fifo = malloc((size_t)h->fifo_cap * sizeof *h->fifo);
    return h->items != NULL && h->fifo != NULL;
}

void sim_heap_deinit(sim_heap *h)
{
    free(h->items);
    free(h->fifo);
    h->items = NULL;
    h->fifo = NULL;
    h->len = h->cap = 0;
    h->fifo_len = h->fifo_cap = 0;
}

static bool fifo_push(sim_heap *h, const sim_heap_entry *e)
{
    if (h->fifo_len == h->fifo_cap) {
        const uint64_t ncap = h->fifo_cap * 2u;
        sim_heap_entry *n = malloc((size_t)ncap * sizeof *n);
        if (n == NULL) return false;
        for (uint64_t i = 0; i < h->fifo_len; i++)
            n[i] = h->fifo[(h->fifo_head + i) & (h->fifo_cap - 1u)];
        free(h->fifo);
        h->fifo = n;
        h->fifo_cap = ncap;
        h->fifo_head = 0;
    }
    h->fifo[(h->fifo_head + h->fifo_len) & (h->fifo_cap - 1u)] = *e;
    h->fifo_len++;
    return true;
}

bool sim_heap_push(sim_heap *h, uint64_t time_ns, uint64_t payload)
{
    if (h->len + h->fifo_len >= h->max_items || payload > SIM_HEAP_PAYLOAD_MAX ||
        h->next_seq >= (UINT64_C(1) << (64u - SIM_HEAP_PAYLOAD_BITS))) {
        return false;
    }
    const sim_heap_entry it = {time_ns, (h->next_seq << SIM_HEAP_PAYLOAD_BITS) | payload};
    if (time_ns == h->last_time) {
        /* After everything in the FIFO (same time, smaller seq). */
        if (!fifo_push(h, &it)) return false;
        h->next_seq++;
        return true;
    }
    if (h->len == h->cap) {
        const uint64_t ncap = h->cap * 2u;
        sim_heap_entry *n = realloc(h->items, (size_t)ncap * sizeof *n);
        if (n == NULL) return false;
        h->items = n;
        h->cap = ncap;
    }
    h->next_seq++;
    uint64_t i = h->len++;
    while (i > 0) {
        const uint64_t parent = (i - 1u) / 4u;
        if (!entry_less(&it, &h->items[parent])) break;
        h->items[i] = h->items[parent];
        i = parent;
    }
    h->items[i] = it;
    return true;
}

/* True when the FIFO's head comes before the heap's top. */
static bool fifo_first(const sim_heap *h)
{
    if (h->fifo_len == 0) return false;
    return h->len == 0 || entry_less(&h->fifo[h->fifo_head], &h->items[0]);
}

bool sim_heap_peek(const sim_heap *h, sim_heap_item *out)
{
    if (fifo_first(h)) {
        entry_out(&h->fifo[h->fifo_head], out);
        return true;
    }
    if (h->len == 0) return false;
    entry_out(&h->items[0], out);
    return true;
}

bool sim_heap_pop(sim_heap *h, sim_heap_item *out)
{
    if (fifo_first(h)) {
        entry_out(&h->fifo[h->fifo_head], out);
        h->fifo_head = (h->fifo_head + 1u) & (h->fifo_cap - 1u);
        h->fifo_len--;
        return true;
    }
    if (h->len == 0) return false;
    entry_out(&h->items[0], out);
    /* The FIFO is empty whenever time moves on (its items sort first). */
    if (out->time_ns > h->last_time) h->last_time = out->time_ns;
    const sim_heap_entry last = h->items[--h->len];
    const uint64_t n = h->len;
    sim_heap_entry *a = h->items;
    uint64_t i = 0;
    for (;;) {
        const uint64_t first = 4u * i + 1u;
        if (first >= n) break;
        uint64_t c = first;
        const uint64_t end = first + 4u < n ? first + 4u : n;
        for (uint64_t k = first + 1u; k < end; k++) {
            if (entry_less(&a[k], &a[c])) c = k;
        }
        if (!entry_less(&a[c], &last)) break;
        a[i] = a[c];
        i = c;
    }
    if (n > 0) a[i] = last;
    return true;
}
