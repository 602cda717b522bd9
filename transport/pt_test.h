/*
 * pt_test.h — hooks for tests of the runtime (tests/fuzz/fuzz_transport.c): not part of the
 * runtime's API (pt.h), never used by the library itself.
 */
#ifndef PT_TEST_H
#define PT_TEST_H

#include <stdint.h>

#include "pt.h"

/**
 * The TCP port a peer driver's listener of kind (ccoip_listener: p2p, shared state, bandwidth
 * probe) is bound to; 0 when it does not listen on TCP. The listeners are bound when the core
 * starts, before any command runs: call it after a command of d completed and before d stops.
 */
uint32_t pt_test_listener_port(pt_driver *d, uint32_t kind);

#endif /* PT_TEST_H */
