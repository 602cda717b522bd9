/*
 * pt_dp.h — the data-plane interface of the native runtime (DESIGN.md §5):
 * what a connection's bytes travel over once nng has connected its stream.
 * Private to transport/ (transport/README.md, "The data-plane interface").
 *
 * Every connection starts on the nng stream itself (pt_nng.c: tcp://,
 * tls+tcp://, ipc://). At CONN_UP the driver may hand the stream to a
 * transport that takes it over (pt_tcp.c: the socket of a plain tcp://
 * stream, with a sender and a receiver thread); nng then never does I/O on
 * that stream again and only closes it with the connection. The driver keeps
 * every protocol decision (framing, matching, holding, cancelling) and talks
 * to either through the same table of operations, `c->dp->op(c->dp_t, ...)`.
 *
 * Contract of every implementation (the handle `t` is what its open returned):
 * - One send and one receive at a time per connection; the driver issues the
 *   next one after the completion of the previous.
 * - Completions are reported through the pt_dp_done_fn given at open, once
 *   per request, on any thread: the transport's own (an nng aio callback, a
 *   link thread) or the caller's, inside send/recv/poll, when a request
 *   completes at once. The callback only queues an event (pt_events.c), so
 *   it never re-enters the driver.
 * - Buffers handed to send/recv stay valid until their completion or close.
 * - No allocation and no copy per request on the hot path (the driver's
 *   frames go out from the application's buffers and land in them).
 */
#ifndef PT_DP_H
#define PT_DP_H

#include <stdbool.h>
#include <stdint.h>

#include "pccl.h"

/**
 * Completion of a send (send true) or a receive. rv: 0, or an nng error
 * code (NNG_ECLOSED, NNG_ECONNSHUT, NNG_ECONNRESET, ...) when the
 * connection broke. count: bytes moved (rv 0). A receive with rv 0 and
 * count 0 is the end of the stream. arg and conn are those given at open.
 */
typedef void (*pt_dp_done_fn)(void *arg, uint64_t conn, bool send, int rv, uint64_t count);

/** A reduction fused into a receive: target[0 .. want) op= received bytes, or, with base,
 * target = base op received bytes (ccoip_sm.h v6). */
typedef struct pt_dp_fuse {
    uint8_t *target;
    const uint8_t *base; /* NULL: target itself */
    pcclRedOp_t op;
    pcclDataType_t dtype;
} pt_dp_fuse;

typedef struct pt_dp_ops {
    /** For logs: "nng stream", "POSIX TCP". */
    const char *name;
    /** True when recv accepts a fuse (and fuse_result is set). */
    bool fuses;
    /**
     * Writes a[0 .. na) then b[0 .. nb) (nb may be 0, b then NULL). The
     * completion's count may be less than na + nb (a short write, nng): the
     * driver issues the rest as a new send.
     */
    void (*send)(void *t, const uint8_t *a, uint64_t na, const uint8_t *b, uint64_t nb);
    /**
     * Reads at least one and at most want bytes into dst (a short read: the
     * driver issues the rest), or with fuse != NULL (only when fuses) exactly
     * want bytes reduced into fuse->target instead (want a multiple of the
     * element size; dst unused). Returns true when the receive parked: it
     * makes no progress until the driver, having seen fd(t) readable,
     * calls poll(t). Returns false otherwise (it completes by itself).
     */
    bool (*recv)(void *t, uint8_t *dst, uint64_t want, const pt_dp_fuse *fuse);
    /**
     * Continues a parked receive without blocking (completing it through the
     * callback when its bytes are there). Returns true while it stays parked.
     * NULL when recv never parks. Only the thread that issues receives calls it.
     */
    bool (*poll)(void *t);
    /** The descriptor to watch for POLLIN while a receive is parked (poll != NULL). */
    int (*fd)(const void *t);
    /** The result of the last fused reduction (valid after its completion); NULL unless fuses. */
    pcclResult_t (*fuse_result)(void *t);
    /**
     * Stops the transport's I/O and frees t: when it returns, no completion
     * runs and no buffer handed to it is touched. NULL for the nng stream,
     * which the connection closes itself (pt_nng_stream_fini).
     */
    void (*close)(void *t);
} pt_dp_ops;

#endif /* PT_DP_H */
