/*
 * pt_sockbuf.h — the send buffer of a taken-over TCP data link, sized from
 * what the kernel measures of the link (issue 23, docs/wan.md "Socket
 * buffers").
 *
 * Linux autotunes a TCP socket's buffers up to net.ipv4.tcp_wmem[2] (send,
 * 4 MiB by default) and tcp_rmem[2] (receive); one stream then carries at
 * most about the send buffer's payload per round trip, below the
 * bandwidth-delay product of a long fast path (1 Gbit/s x 50 ms = 6.25 MB).
 * An explicit SO_SNDBUF may go up to net.core.wmem_max (the kernel doubles
 * the value) but turns autotuning off: so pccl sets it only once the link's
 * measured bandwidth-delay product says autotuning's cap holds it back.
 * After each large send (PT_SOCKBUF_ADAPT_MIN) the link reads TCP_INFO: its
 * rate (bytes acknowledged per microsecond with data in flight since the
 * last look, tcpi_bytes_acked / tcpi_busy_time, or the kernel's latest rate
 * sample, tcpi_delivery_rate, when higher and not application-limited: the
 * average includes the ramp after an idle gap) times its minimum RTT is the
 * BDP it achieved; a buffer holds about half its size in payload (the rest
 * is the kernel's bookkeeping; measured: 55 %), so when that BDP reaches
 * 45 % of the buffer and the buffer already reached (3/4 of) tcp_wmem[2],
 * the link is carrying about all its buffer can hold each round trip: the
 * buffer is doubled (at most 2 x wmem_max, never lowered). A link slower than its buffer (a LAN, a
 * pool sharing the path, a slow receiver) never grows.
 *
 * Environment (read once per process):
 *   PCCL_TCP_SNDBUF   auto (default): the rule above; kernel | 0: never set;
 *                     BYTES (K/M/G suffix): SO_SNDBUF = that at take-over.
 *   PCCL_TCP_RCVBUF   kernel (default): receive autotuning (up to
 *                     tcp_rmem[2], usually above rmem_max, so an explicit
 *                     size would lower it); BYTES: SO_RCVBUF = that at
 *                     take-over (the window scale was negotiated before,
 *                     from tcp_rmem[2]).
 */
#ifndef PT_SOCKBUF_H
#define PT_SOCKBUF_H

#include <stdbool.h>
#include <stdint.h>

/** Sends of at least this many bytes are followed by a look at TCP_INFO. */
#define PT_SOCKBUF_ADAPT_MIN ((uint64_t)1 << 20)

/** What one link remembers between looks (its sender thread's). */
typedef struct pt_sockbuf_state {
    uint64_t busy_us; /* tcpi_busy_time at the last look */
    uint64_t acked;   /* tcpi_bytes_acked at the last look */
    bool done;        /* nothing more to do: a fixed size, the ceiling, or no TCP_INFO */
} pt_sockbuf_state;

/** At take-over of a connected TCP socket: the explicit sizes, if configured, and the
 * first look (st). */
void pt_sockbuf_open(int fd, pt_sockbuf_state *st);

/** After a large send on fd: the auto rule above. */
void pt_sockbuf_adapt(int fd, pt_sockbuf_state *st);

#endif
