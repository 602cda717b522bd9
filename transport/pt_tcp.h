/*
 * pt_tcp.h — the POSIX TCP data plane of the native runtime (DESIGN.md §5,
 * issue 7): a plain tcp:// data connection set up by nng is taken over by
 * two threads of its own, a sender and a receiver, doing blocking I/O on
 * the socket (TCP_NODELAY; socket buffers: kernel autotuning, and past its
 * cap a send buffer grown when the kernel says it held the link back,
 * pt_sockbuf.h). nng
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
 * It implements the data-plane interface (pt_dp.h) as pt_tcp_ops, with
 * parking (poll, fd) and fused receives. Its close shuts the socket down
 * (waking a thread blocked in read/write), joins both threads and closes
 * the descriptor: when it returns, no thread touches any buffer handed to
 * the link.
 */
#ifndef PT_TCP_H
#define PT_TCP_H

#include <nng/nng.h>
#include <stdbool.h>
#include <stdint.h>

#include "pt_dp.h"

/** False when PCCL_DATAPLANE=nng (every data connection stays on nng streams). */
bool pt_tcp_enabled(void);

/**
 * Takes over the socket of a plain TCP stream (not TLS, not ipc): a
 * duplicate of its descriptor in blocking mode, TCP_NODELAY. Returns the
 * handle for pt_tcp_ops, or NULL (the stream stays with nng) when it is not
 * one or the threads fail. Completions go to done(arg, conn, ...) with rv 0
 * or NNG_ECONNRESET. With park, a small receive (at most 512 KiB, not
 * fused) that finds no bytes parks (pt_dp.h) instead of waking the
 * receiver thread (issue 7, small messages).
 */
void *pt_tcp_open(nng_stream *s, uint64_t conn, pt_dp_done_fn done, void *arg, bool park);

/**
 * The operations on a link: send writes both buffers whole; recv reads
 * exactly want bytes (never short), may fuse, and parks when opened with
 * park. A request of at most 512 KiB (not fused) is first tried with
 * MSG_DONTWAIT on the caller's thread and may complete there.
 */
extern const pt_dp_ops pt_tcp_ops;

#endif /* PT_TCP_H */
