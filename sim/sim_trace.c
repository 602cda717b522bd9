/*
 * sim_trace.c — the XXH3 trace chain (sim_trace.h).
 */
#include "sim_trace.h"

#include <assert.h>

#include "ccoip_hash.h"

/* Little-endian stores of fixed width (the compiler merges each into one store). */
static inline uint8_t *trace_room(sim_trace *t, uint32_t n)
{
    assert(t->len + n <= sizeof t->buf);
    uint8_t *p = t->buf + t->len;
    t->len += n;
    return p;
}

static inline void trace_put64(sim_trace *t, uint64_t v)
{
    uint8_t *p = trace_room(t, 8);
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
    p[4] = (uint8_t)(v >> 32);
    p[5] = (uint8_t)(v >> 40);
    p[6] = (uint8_t)(v >> 48);
    p[7] = (uint8_t)(v >> 56);
}

void sim_trace_init(sim_trace *t)
{
    t->hash = 0;
    t->records = 0;
    t->len = 0;
}

void sim_trace_begin(sim_trace *t)
{
    t->len = 0;
    trace_put64(t, t->hash);
}

void sim_trace_u8(sim_trace *t, uint8_t v)
{
    *trace_room(t, 1) = v;
}

void sim_trace_u32(sim_trace *t, uint32_t v)
{
    uint8_t *p = trace_room(t, 4);
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

void sim_trace_u64(sim_trace *t, uint64_t v)
{
    trace_put64(t, v);
}

void sim_trace_bytes(sim_trace *t, const void *data, uint64_t len)
{
    trace_put64(t, len);
    trace_put64(t, len > 0 ? ccoip_hash_bytes(data, len) : 0);
}

void sim_trace_end(sim_trace *t)
{
    t->hash = ccoip_hash_bytes(t->buf, t->len);
    t->records++;
    t->len = 0;
}
