/*
 * test_probe.c — the sending window of a bandwidth probe bounded by time
 * (core/probe.c): round trips times CCOIP_PROBE_WINDOW_RTTS, clamped, without
 * overflow.
 */
#include "ccoip_probe.h"
#include "ptest.h"

#define MS ((uint64_t)1000000)

PTEST(probe, window_is_round_trips_clamped)
{
    PT_ASSERT(ccoip_probe_window_ns(0) == CCOIP_PROBE_WINDOW_MIN_MS * MS, "no round trip");
    PT_ASSERT(ccoip_probe_window_ns(50000) == CCOIP_PROBE_WINDOW_MIN_MS * MS, "loopback");
    PT_ASSERT(ccoip_probe_window_ns(10u * MS) == CCOIP_PROBE_WINDOW_MIN_MS * MS,
              "10 ms: 160 ms is under the minimum");
    PT_ASSERT(ccoip_probe_window_ns(50u * MS) == 50u * MS * CCOIP_PROBE_WINDOW_RTTS, "50 ms");
    PT_ASSERT(ccoip_probe_window_ns(100u * MS) == 100u * MS * CCOIP_PROBE_WINDOW_RTTS, "100 ms");
    PT_ASSERT(ccoip_probe_window_ns(300u * MS) == CCOIP_PROBE_WINDOW_MAX_MS * MS, "300 ms: max");
    PT_ASSERT(ccoip_probe_window_ns(UINT64_MAX) == CCOIP_PROBE_WINDOW_MAX_MS * MS, "no overflow");
    /* Monotone across the range. */
    uint64_t last = 0;
    for (uint64_t rtt = 0; rtt < 400u * MS; rtt += MS / 4u) {
        const uint64_t w = ccoip_probe_window_ns(rtt);
        PT_ASSERT(w >= last, "monotone at %llu ns", (unsigned long long)rtt);
        last = w;
    }
}
