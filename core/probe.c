/*
 * probe.c — the sending window of a bandwidth probe bounded by time
 * (core/ccoip_probe.h, docs/protocol.md §8.4).
 */
#include "ccoip_probe.h"

uint64_t ccoip_probe_window_ns(uint64_t rtt_ns)
{
    const uint64_t lo = (uint64_t)CCOIP_PROBE_WINDOW_MIN_MS * 1000000u;
    const uint64_t hi = (uint64_t)CCOIP_PROBE_WINDOW_MAX_MS * 1000000u;
    if (rtt_ns >= hi / CCOIP_PROBE_WINDOW_RTTS) return hi;
    const uint64_t w = rtt_ns * CCOIP_PROBE_WINDOW_RTTS;
    return w < lo ? lo : w;
}
