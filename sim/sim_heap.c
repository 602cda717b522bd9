/*
 * sim_heap.c — 4-ary min-heap on (time, seq) with a FIFO for zero-delay items (sim_heap.h).
 */
#include "sim_heap.h"

#include <stdlib.h>

static inline bool key_less(const sim_heap_key *a, const sim_heap_key *b)
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
    h->last_time = 0;
    h->fifo_head = h->fifo_len = 0;
    h->fifo_cap = 256;
    h->keys = malloc((size_t)h->cap * sizeof *h->keys);
    h->vals = malloc((size_t)h->cap * sizeof *h->vals);
    h->fifo_keys = malloc((size_t)h->fifo_cap * sizeof *h->fifo_keys);
    h->fifo_vals = malloc((size_t)h->fifo_cap * sizeof *h->fifo_vals);
    return h->keys != NULL && h->vals != NULL && h->fifo_keys != NULL && h->fifo_vals != NULL;
}

void sim_heap_deinit(sim_heap *h)
{
    free(h->keys);
    free(h->vals);
    free(h->fifo_keys);
    free(h->fifo_vals);
    h->keys = NULL;
    h->vals = NULL;
    h->fifo_keys = NULL;
    h->fifo_vals = NULL;
    h->len = h->cap = 0;
    h->fifo_len = h->fifo_cap = 0;
}

static bool fifo_push(sim_heap *h, const sim_heap_key *k, const sim_heap_val *v)
{
    if (h->fifo_len == h->fifo_cap) {
        const uint64_t ncap = h->fifo_cap * 2u;
        sim_heap_key *nk = malloc((size_t)ncap * sizeof *nk);
        sim_heap_val *nv = malloc((size_t)ncap * sizeof *nv);
        if (nk == NULL || nv == NULL) {
            free(nk);
            free(nv);
            return false;
        }
        for (uint64_t i = 0; i < h->fifo_len; i++) {
            const uint64_t j = (h->fifo_head + i) & (h->fifo_cap - 1u);
            nk[i] = h->fifo_keys[j];
            nv[i] = h->fifo_vals[j];
        }
        free(h->fifo_keys);
        free(h->fifo_vals);
        h->fifo_keys = nk;
        h->fifo_vals = nv;
        h->fifo_cap = ncap;
        h->fifo_head = 0;
    }
    const uint64_t j = (h->fifo_head + h->fifo_len) & (h->fifo_cap - 1u);
    h->fifo_keys[j] = *k;
    h->fifo_vals[j] = *v;
    h->fifo_len++;
    return true;
}

uint64_t sim_heap_take_seq(sim_heap *h)
{
    return h->next_seq++;
}

/* Inserts (k, v) into the heap proper (any key: the pop compares the FIFO's head with it). */
static bool heap_insert(sim_heap *h, const sim_heap_key *kp, const sim_heap_val *v)
{
    const sim_heap_key k = *kp;
    if (h->len == h->cap) {
        const uint64_t ncap = h->cap * 2u;
        sim_heap_key *nk = realloc(h->keys, (size_t)ncap * sizeof *nk);
        if (nk == NULL) return false;
        h->keys = nk;
        sim_heap_val *nv = realloc(h->vals, (size_t)ncap * sizeof *nv);
        if (nv == NULL) return false;
        h->vals = nv;
        h->cap = ncap;
    }
    uint64_t i = h->len++;
    while (i > 0) {
        const uint64_t parent = (i - 1u) / 4u;
        if (!key_less(&k, &h->keys[parent])) break;
        h->keys[i] = h->keys[parent];
        h->vals[i] = h->vals[parent];
        i = parent;
    }
    h->keys[i] = k;
    h->vals[i] = *v;
    return true;
}

bool sim_heap_push_seq(sim_heap *h, uint64_t time_ns, uint64_t seq, uint64_t payload, uint64_t aux)
{
    if (h->len + h->fifo_len >= h->max_items) return false;
    const sim_heap_key k = {time_ns, seq};
    const sim_heap_val v = {payload, aux};
    /* The FIFO only takes an item later than its tail (the seq may be an old one). */
    if (time_ns == h->last_time &&
        (h->fifo_len == 0 ||
         key_less(&h->fifo_keys[(h->fifo_head + h->fifo_len - 1u) & (h->fifo_cap - 1u)], &k))) {
        return fifo_push(h, &k, &v);
    }
    return heap_insert(h, &k, &v);
}

bool sim_heap_push2(sim_heap *h, uint64_t time_ns, uint64_t payload, uint64_t aux)
{
    if (h->len + h->fifo_len >= h->max_items) return false;
    const sim_heap_key k = {time_ns, h->next_seq};
    const sim_heap_val v = {payload, aux};
    /* Same time as the last pop: after everything in the FIFO (same time, smaller seq). */
    if (!(time_ns == h->last_time ? fifo_push(h, &k, &v) : heap_insert(h, &k, &v))) return false;
    h->next_seq++;
    return true;
}

bool sim_heap_push(sim_heap *h, uint64_t time_ns, uint64_t payload)
{
    return sim_heap_push2(h, time_ns, payload, 0);
}

/* True when the FIFO's head comes before the heap's top. */
static bool fifo_first(const sim_heap *h)
{
    if (h->fifo_len == 0) return false;
    return h->len == 0 || key_less(&h->fifo_keys[h->fifo_head], &h->keys[0]);
}

bool sim_heap_peek(const sim_heap *h, sim_heap_item *out)
{
    const sim_heap_key *k;
    const sim_heap_val *v;
    if (fifo_first(h)) {
        k = &h->fifo_keys[h->fifo_head];
        v = &h->fifo_vals[h->fifo_head];
    } else if (h->len > 0) {
        k = &h->keys[0];
        v = &h->vals[0];
    } else {
        return false;
    }
    out->time_ns = k->time_ns;
    out->seq = k->seq;
    out->payload = v->payload;
    return true;
}

const sim_heap_val *sim_heap_peek_val(const sim_heap *h)
{
    if (fifo_first(h)) return &h->fifo_vals[h->fifo_head];
    return h->len > 0 ? &h->vals[0] : NULL;
}

bool sim_heap_pop2(sim_heap *h, sim_heap_item *out, uint64_t *aux)
{
    if (fifo_first(h)) {
        const sim_heap_key *k = &h->fifo_keys[h->fifo_head];
        const sim_heap_val *v = &h->fifo_vals[h->fifo_head];
        out->time_ns = k->time_ns;
        out->seq = k->seq;
        out->payload = v->payload;
        *aux = v->aux;
        h->fifo_head = (h->fifo_head + 1u) & (h->fifo_cap - 1u);
        h->fifo_len--;
        return true;
    }
    if (h->len == 0) return false;
    out->time_ns = h->keys[0].time_ns;
    out->seq = h->keys[0].seq;
    out->payload = h->vals[0].payload;
    *aux = h->vals[0].aux;
    /* The FIFO is empty whenever time moves on (its items sort first). */
    if (out->time_ns > h->last_time) h->last_time = out->time_ns;
    const uint64_t n = --h->len;
    const sim_heap_key last = h->keys[n];
    const sim_heap_val lastv = h->vals[n];
    sim_heap_key *a = h->keys;
    uint64_t i = 0;
    for (;;) {
        const uint64_t first = 4u * i + 1u;
        if (first >= n) break;
        uint64_t c = first;
        const uint64_t end = first + 4u < n ? first + 4u : n;
        for (uint64_t k = first + 1u; k < end; k++) {
            if (key_less(&a[k], &a[c])) c = k;
        }
        if (!key_less(&a[c], &last)) break;
        a[i] = a[c];
        h->vals[i] = h->vals[c];
        i = c;
    }
    if (n > 0) {
        a[i] = last;
        h->vals[i] = lastv;
    }
    return true;
}

bool sim_heap_pop(sim_heap *h, sim_heap_item *out)
{
    uint64_t aux;
    return sim_heap_pop2(h, out, &aux);
}
