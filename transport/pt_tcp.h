/*
 * pt_tcp.h — the POSIX TCP data plane of the native runtime (DESIGN.md §5,
 * issue 7): a plain tcp:// data connection set up by nng is taken over by
 * two threads of its own, a sender and a receiver, doing blocking I/O on
 * the socket (TCP_NODELAY, socket buffers left to kernel autotuning). nng
 * never reads or writes that stream again; it only closes it.
 *
 * The driver thread keeps every protocol decision (framing, matching,
 * holding, cancelling): a link executes one send (two buffers, written
 * whole) and one receive (exactly `want` bytes) at a time and reports each
 * once it is complete, not per partial read or write. A receive may fuse a
 * reduction: the bytes are read into a small (L2-sized) scratch, slice by
 * slice, and reduced straight into the target (target op= bytes), so the
 * reduction of one slice overlaps the transfer of the next. A small request
 * is first tried without blocking on the caller's thread (MSG_DONTWAIT): what
 * the socket takes or already holds costs no thread hand-off.
 *
 * pt_tcp_link_close shuts the socket down (waking a thread blocked in
 * read/write), joins both threads and closes the descriptor: when it
 * returns, no thread touches any buffer handed to the link.
 */
#ifndef PT_TCP_H
#define PT_TCP_H

#include <nng/nng.h>
#include <stdbool.h>
#include <stdint.h>

#include "pccl.h"

typedef struct pt_tcp_link pt_tcp_link;

/**
 * Completion of a link's send or receive, called on the link's thread, or
 * on the caller's thread inside pt_tcp_link_send/recv when a small request
 * (at most 512 KiB, not fused) completes at once without blocking.
 * err 0: count bytes were moved (all of them; a receive with count 0 is the
 * end of the stream). err != 0: the connection broke (errno value).
 */
typedef void (*pt_tcp_cb)(void *arg, uint64_t conn, bool send, int err, uint64_t count);

/** A reduction fused into a receive: target[0 .. want) op= received bytes, or, with base,
 * target = base op received bytes (ccoip_sm.h v6). */
typedef struct pt_tcp_fuse {
    uint8_t *target;
    const uint8_t *base; /* NULL: target itself */
    pcclRedOp_t op;
    pcclDataType_t dtype;
} pt_tcp_fuse;

/** False when PCCL_DATAPLANE=nng (every data connection stays on nng streams). */
bool pt_tcp_enabled(void);

/**
 * Takes over the socket of a plain TCP stream (not TLS, not ipc): a
 * duplicate of its descriptor in blocking mode, TCP_NODELAY. Returns NULL
 * (the stream stays with nng) when it is not one or the threads fail.
 */
pt_tcp_link *pt_tcp_link_open(nng_stream *s, uint64_t conn, pt_tcp_cb cb, void *arg);

/** Writes a[0 .. na) then b[0 .. nb) completely (one send at a time). */
void pt_tcp_link_send(pt_tcp_link *l, const uint8_t *a, uint64_t na, const uint8_t *b, uint64_t nb);

/**
 * Reads exactly want bytes into dst, or with fuse != NULL reduces them
 * into fuse->target instead (want a multiple of the element size; dst
 * unused). One receive at a time.
 */
void pt_tcp_link_recv(pt_tcp_link *l, uint8_t *dst, uint64_t want, const pt_tcp_fuse *fuse);

/**
 * Parking (issue 7, small messages): with parking on, a small receive (at
 * most 512 KiB, not fused) that finds no bytes does not wake the receiver
 * thread; it is parked instead, and the caller (the driver thread, which
 * polls pt_tcp_link_fd for POLLIN) continues it with pt_tcp_link_poll, which
 * never blocks and completes it through the callback on the caller's thread.
 * Only the thread that issues receives may call these.
 */
void pt_tcp_link_set_park(pt_tcp_link *l, bool on);
bool pt_tcp_link_parked(const pt_tcp_link *l);
int pt_tcp_link_fd(const pt_tcp_link *l);
void pt_tcp_link_poll(pt_tcp_link *l);

/** The result of the last fused reduction (valid after its completion). */
pcclResult_t pt_tcp_link_fuse_result(pt_tcp_link *l);

/** Shuts down, joins the threads, closes the descriptor, frees l. */
void pt_tcp_link_close(pt_tcp_link *l);

#endif /* PT_TCP_H */
