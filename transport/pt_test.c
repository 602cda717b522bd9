/*
 * pt_test.c — hooks for tests of the runtime (pt_test.h).
 */
#define _GNU_SOURCE
#include "pt_test.h"
#include "pt_internal.h"

uint32_t pt_test_listener_port(pt_driver *d, uint32_t kind)
{
    if (d == NULL || kind >= PT_MAX_LISTENERS || d->listeners[kind].l == NULL) return 0;
    int port = 0;
    if (nng_stream_listener_get_int(d->listeners[kind].l, NNG_OPT_TCP_BOUND_PORT, &port) != 0) {
        return 0;
    }
    return (uint32_t)port;
}
