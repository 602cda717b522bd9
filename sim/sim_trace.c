/*
 * sim_trace.c — the XXH3 trace chain (sim_trace.h).
 */
#include "sim_trace.h"

#include <assert.h>

#include "ccoip_hash.h"

static void trace_put(sim_trace *t, uint64_t v, uint32_t n)
{
    assert(t->len + n <= sizeof t->buf);
    for (uint32_t i = 0; i < n; i++)
        t->buf[t->len++] = (uint8_t)(v >> (8u * i));
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
    trace_put(t, t->hash, 8);
}

void sim_trace_u8(sim_trace *t, uint8_t v)
{
    trace_put(t, v, 1);
}

void sim_trace_u32(sim_trace *t, uint32_t v)
{
    trace_put(t, v, 4);
}

void sim_trace_u64(sim_trace *t, uint64_t v)
{
    trace_put(t, v, 8);
}

void sim_trace_bytes(sim_trace *t, const void *data, uint64_t len)
{
    trace_put(t, len, 8);
    trace_put(t, len > 0 ? ccoip_hash_bytes(data, len) : 0, 8);
}

void sim_trace_end(sim_trace *t)
{
    t->hash = ccoip_hash_bytes(t->buf, t->len);
    t->records++;
    t->len = 0;
}
