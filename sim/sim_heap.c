/*
 * sim_heap.c — binary min-heap on (time, seq) (sim_heap.h).
 */
#include "sim_heap.h"

#include <stdlib.h>

static bool heap_less(const sim_heap_item *a, const sim_heap_item *b)
{
    if (a->time_ns != b->time_ns) return a->time_ns < b->time_ns;
    return a->seq < b->seq;
}

bool sim_heap_init(sim_heap *h, uint64_t max_items)
{
    h->len = 0;
    h->cap = 256;
    h->max_items = max_items;
    h->next_seq = 0;
    h->items = malloc((size_t)h->cap * sizeof *h->items);
    return h->items != NULL;
}

void sim_heap_deinit(sim_heap *h)
{
    free(h->items);
    h->items = NULL;
    h->len = h->cap = 0;
}

bool sim_heap_push(sim_heap *h, uint64_t time_ns, uint64_t payload)
{
    if (h->len >= h->max_items) return false;
    if (h->len == h->cap) {
        const uint64_t ncap = h->cap * 2u;
        sim_heap_item *n = realloc(h->items, (size_t)ncap * sizeof *n);
        if (n == NULL) return false;
        h->items = n;
        h->cap = ncap;
    }
    sim_heap_item it = {time_ns, h->next_seq++, payload};
    uint64_t i = h->len++;
    while (i > 0) {
        const uint64_t parent = (i - 1u) / 2u;
        if (!heap_less(&it, &h->items[parent])) break;
        h->items[i] = h->items[parent];
        i = parent;
    }
    h->items[i] = it;
    return true;
}

bool sim_heap_peek(const sim_heap *h, sim_heap_item *out)
{
    if (h->len == 0) return false;
    *out = h->items[0];
    return true;
}

bool sim_heap_pop(sim_heap *h, sim_heap_item *out)
{
    if (h->len == 0) return false;
    *out = h->items[0];
    const sim_heap_item last = h->items[--h->len];
    uint64_t i = 0;
    for (;;) {
        const uint64_t l = 2u * i + 1u;
        if (l >= h->len) break;
        uint64_t c = l;
        if (l + 1u < h->len && heap_less(&h->items[l + 1u], &h->items[l])) c = l + 1u;
        if (!heap_less(&h->items[c], &last)) break;
        h->items[i] = h->items[c];
        i = c;
    }
    if (h->len > 0) h->items[i] = last;
    return true;
}
