/*
 * trace_writer.c — the driver side of core/ccoip_trace.h: the record
 * sequence every driver writes (EVENT, 'R', 'A' per action, POLLED,
 * CHECKPOINT, TRAILER) in one place, into a growable buffer the driver
 * reads or drains. Pure: the heap, no I/O.
 */
#include <stdlib.h>
#include <string.h>

#include "ccoip_trace.h"

void ccoip_trace_writer_init(ccoip_trace_writer *tw)
{
    memset(tw, 0, sizeof *tw);
    tw->error = pcclSuccess;
    ccoip_trace_hasher_init(&tw->hasher);
}

void ccoip_trace_writer_deinit(ccoip_trace_writer *tw)
{
    free(tw->buf);
    ccoip_trace_writer_init(tw);
}

void ccoip_trace_writer_drained(ccoip_trace_writer *tw)
{
    tw->len = 0;
}

/* Room for need more bytes (need 0: the record cannot be encoded); NULL and the sticky error
 * when there is none. */
static uint8_t *tw_room(ccoip_trace_writer *tw, uint64_t need)
{
    if (tw->error != pcclSuccess) return NULL;
    if (need == 0) {
        tw->error = pcclInvalidArgument;
        return NULL;
    }
    if (tw->len + need > tw->cap) {
        uint64_t ncap = tw->cap == 0 ? 4096u : tw->cap * 2u;
        while (ncap < tw->len + need)
            ncap *= 2u;
        uint8_t *x = realloc(tw->buf, (size_t)ncap);
        if (x == NULL) {
            tw->error = pcclInternalError;
            return NULL;
        }
        tw->buf = x;
        tw->cap = ncap;
    }
    return tw->buf + tw->len;
}

/* Appends one record: ENCODE is a ccoip_trace_encode_* call whose last two arguments are
 * `out, cap`, evaluated once with out NULL to size the record, then into the room made. */
#define TW_PUT(tw, ENCODE)                                                                         \
    do {                                                                                           \
        uint8_t *out = NULL;                                                                       \
        uint64_t cap = 0;                                                                          \
        const uint64_t need = (ENCODE);                                                            \
        out = tw_room((tw), need);                                                                 \
        if (out == NULL) return (tw)->error;                                                       \
        cap = need;                                                                                \
        (tw)->len += (ENCODE);                                                                     \
    } while (0)

pcclResult_t ccoip_trace_writer_header(ccoip_trace_writer *tw, const ccoip_trace_header *h)
{
    TW_PUT(tw, ccoip_trace_encode_header(h, out, cap));
    ccoip_trace_hasher_init(&tw->hasher);
    return pcclSuccess;
}

pcclResult_t ccoip_trace_writer_polled(ccoip_trace_writer *tw)
{
    if (tw->polled == 0) return tw->error;
    const uint64_t n = tw->polled;
    TW_PUT(tw, ccoip_trace_encode_polled(n, out, cap));
    tw->polled = 0;
    return pcclSuccess;
}

pcclResult_t ccoip_trace_writer_event(ccoip_trace_writer *tw, const ccoip_event *ev)
{
    const pcclResult_t rc = ccoip_trace_writer_polled(tw);
    if (rc != pcclSuccess) return rc;
    TW_PUT(tw, ccoip_trace_encode_event(ev, out, cap));
    tw->events++;
    return pcclSuccess;
}

pcclResult_t ccoip_trace_writer_set_port(ccoip_trace_writer *tw, uint32_t listener, uint32_t port,
                                         const char *url)
{
    const pcclResult_t rc = ccoip_trace_writer_polled(tw);
    if (rc != pcclSuccess) return rc;
    TW_PUT(tw, ccoip_trace_encode_set_port(listener, port, url, out, cap));
    return pcclSuccess;
}

void ccoip_trace_writer_step(ccoip_trace_writer *tw, int result)
{
    ccoip_trace_hash_step(&tw->hasher, result);
}

void ccoip_trace_writer_action(ccoip_trace_writer *tw, const ccoip_action *a)
{
    ccoip_trace_hash_action(&tw->hasher, a);
    tw->polled++;
}

pcclResult_t ccoip_trace_writer_checkpoint(ccoip_trace_writer *tw, uint64_t deadline_ns)
{
    ccoip_trace_hash_deadline(&tw->hasher, deadline_ns);
    tw->polled = 0; /* a checkpoint drains every action */
    const uint64_t events = tw->events, hash = tw->hasher.hash;
    TW_PUT(tw, ccoip_trace_encode_checkpoint(events, hash, out, cap));
    return pcclSuccess;
}

pcclResult_t ccoip_trace_writer_trailer(ccoip_trace_writer *tw)
{
    const uint64_t events = tw->events, actions = tw->hasher.actions, hash = tw->hasher.hash;
    TW_PUT(tw, ccoip_trace_encode_trailer(events, actions, hash, out, cap));
    return pcclSuccess;
}
