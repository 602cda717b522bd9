/*
 * pt_nng.h — the nng stream data plane (pt_dp.h): every connection's stream
 * as nng set it up (tcp://, tls+tcp://, ipc://), with one send and one
 * receive aio. Short sends and receives complete as they are (the driver
 * issues the rest). The connection embeds it for its whole life: a
 * transport that takes the stream over (pt_tcp.h) leaves it to nng to close.
 */
#ifndef PT_NNG_H
#define PT_NNG_H

#include <nng/nng.h>

#include "pt_dp.h"

typedef struct pt_nng_stream {
    nng_stream *s; /* NULL until the connection is up */
    nng_aio *send_aio;
    nng_aio *recv_aio;
    uint64_t conn;
    pt_dp_done_fn done;
    void *arg;
} pt_nng_stream;

/** The operations on a pt_nng_stream (t: the pt_nng_stream). */
extern const pt_dp_ops pt_nng_ops;

/** Allocates the aios (no stream yet). 0, or an nng error (then nothing is held). */
int pt_nng_stream_init(pt_nng_stream *ns, uint64_t conn, pt_dp_done_fn done, void *arg);
/** Closes the stream (if any), stops the aios (their callbacks have run when this returns)
 * and frees everything. */
void pt_nng_stream_fini(pt_nng_stream *ns);
/** False when s is a TCP stream whose connect has not completed (its peer address is not known
 *  yet: getpeername fails); true otherwise (streams that are not TCP too). */
bool pt_stream_connected(nng_stream *s);

#endif /* PT_NNG_H */
