/*
 * ccoip_probe.h — how long a bandwidth probe sends (docs/protocol.md §8.4,
 * §6.6). A probe of a fixed number of bytes on a new TCP connection measures
 * TCP's ramp, not the link, whenever the bytes fit in the ramp: at 50 ms RTT
 * 1 MiB takes about as long on 1 Gbit/s as on 100 Mbit/s. A prober bounded by
 * time instead sends until the bytes the master asked for are sent or its
 * window has passed, whichever comes first, and reports the bytes it sent:
 * the window is CCOIP_PROBE_WINDOW_RTTS round trips (the ramp takes about
 * log2(bandwidth-delay product / initial window) of them, 7 to 12 for
 * 100 Mbit/s .. 10 Gbit/s at 50 ms), clamped to [CCOIP_PROBE_WINDOW_MIN_MS,
 * CCOIP_PROBE_WINDOW_MAX_MS]. The TCP runtime (transport/pt_probe.c) and the
 * simulator's model of it (sim/sim_act.c) use this one rule. Pure.
 */
#ifndef CCOIP_PROBE_H
#define CCOIP_PROBE_H

#include <stdint.h>

/** Round trips a prober bounded by time sends for. */
#define CCOIP_PROBE_WINDOW_RTTS 16u
/** The window's lower bound (short round trips, e.g. a LAN or loopback). */
#define CCOIP_PROBE_WINDOW_MIN_MS 200u
/** The window's upper bound: N - 1 probes per peer must fit the probe phase's deadline. */
#define CCOIP_PROBE_WINDOW_MAX_MS 2000u
/** The byte bound a master asks of probers bounded by time (its probe_bytes): the window, not
 *  the bytes, ends a probe below ~270 MB/s at the window's minimum. */
#define CCOIP_PROBE_BYTES_TIMED ((uint64_t)64 << 20)

/** The sending window for a measured round trip of rtt_ns (the rule above), in nanoseconds. */
uint64_t ccoip_probe_window_ns(uint64_t rtt_ns);

#endif /* CCOIP_PROBE_H */
