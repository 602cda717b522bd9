#!/usr/bin/env python3
"""Writes the hand-made seeds of fuzz_master (sync, optimize) and fuzz_peer.

Usage: python3 tests/fuzz/gen_seeds.py tests/fuzz/corpus
Each seed is an opcode program (see the opcode tables in fuzz_master.c and
fuzz_peer.c); FUZZ_VERBOSE=1 build/h-fuzz/tests/fuzz/fuzz_<t> SEED shows what it reaches.
"""
import sys, os
out = sys.argv[1]
def w(d, name, seq):
    os.makedirs(os.path.join(out, d), exist_ok=True)
    open(os.path.join(out, d, name), 'wb').write(bytes(seq))

# ---- master: three peers, topology, then sync and optimize ----
def m_admit3():
    # peer 1 alone (epoch 1), then peers 2 and 3 join and peer 1 admits them (epoch 2)
    s = [0, 0, 4, 0, 0, 0xF5, 0, 0, 0, 6, 0, 0, 0, 6, 0, 1, 1]
    for c in (1, 2): s += [0, c, 4, c, 0, 0xF5, c, c, 0, 6, c, 0, 0]
    s += [6, 0, 0, 0]                           # the member votes: admit
    for c in range(3): s += [6, c, 1, 1]        # P2pEstablished at the epoch, success
    return s
base = m_admit3()
sync = []
sync += [0xF0, 0, 1, 0, 0x03, 0, 0, 0, 0]   # peer 1: rev 1, keys bias+step
sync += [0xF0, 1, 1, 0, 0x03, 0, 0, 0, 0]   # peer 2: same hashes
sync += [0xF0, 2, 1, 0, 0x03, 1, 0, 0, 0]   # peer 3: bias differs
sync += [0xF1, 0, 1, 0xF1, 1, 1, 0xF1, 2, 1]  # sync done
w('master', 'sync_three_outdated', base + sync)
sync2 = []
sync2 += [0xF0, 0, 0, 0, 0x0C, 7, 0x41, 3, 0x0A]  # w.0 (aci) + w.1
sync2 += [0xF0, 1, 0, 1, 0x0C, 8, 0x41, 4, 0x0A]  # receive only, differing hashes
sync2 += [0xF0, 2, 0, 2, 0x0C, 9, 0x41, 3, 0x0A]  # send only
sync2 += [0xF1, 0, 1, 0xF1, 1, 0, 0xF1, 2, 1]   # one fails
sync2 += [0xF0, 0, 2, 0, 0x0C, 7, 0x41, 3, 0x0A]  # a revision skipped
sync2 += [0xF6, 1, 0, 0xF6, 2, 2]                # unsorted / unknown dtype keys
w('master', 'sync_strategies', base + sync2)
opt = []
for c in range(3): opt += [0xF2, c]               # OptimizeTopology vote
opt += [0xF3, 0, 2, 1, 10, 50, 2, 12, 70]          # peer 1 -> 2, 3
opt += [0xF3, 1, 2, 0, 10, 40, 2, 9, 90]           # peer 2 -> 1, 3
opt += [0xF3, 2, 2, 0, 11, 30, 1, 9, 80]            # peer 3 -> 1, 2
for c in range(3): opt += [0xF4, c]               # OptimizeTopologyDone
for c in range(3): opt += [6, c, 1, 1]            # P2pEstablished of the new epoch
w('master', 'optimize_three', base + opt)
opt2 = []
for c in range(3): opt2 += [0xF2, c]
opt2 += [0xF3, 0, 1, 0x81]                        # unreachable
opt2 += [0xF4, 0, 0xF7, 0xF4, 1, 0xF3, 2, 0]      # timer at the deadline, more dones
opt2 += [0xF3, 1, 1, 2, 3, 4]                     # report outside the probe phase
opt2 += [0xF2, 0, 0xF2, 0, 0xF7, 0xF7]
w('master', 'optimize_timeout', base + opt2)

# ---- peer ----
admit1 = [9, 0, 0, 0, 4, 0, 1, 4, 0, 0, 4, 0, 0, 0, 0, 4, 0, 1]
w('peer', 'connect_admit', admit1)
sync_fetch = admit1 + [9, 6, 0x03, 0x00, 7, 0, 0, 7, 0, 0, 4, 0, 0, 0x01, 0x00, 0, 0xF0,
                       11, 3, 0xF0, 3, 0, 7, 0, 0, 7, 0, 0, 7, 0, 0, 4, 0, 1]
w('peer', 'sync_fetch', sync_fetch)
w('peer', 'sync_fetch_bad_hash', admit1 + [9, 6, 0x03, 0x00, 7, 0, 0, 7, 0, 0, 4, 0, 0, 0x01, 0x00,
                                            0, 0xF0, 11, 3, 0xF0, 3, 0, 7, 0, 0, 7, 0, 0x10, 4, 0, 1])
w('peer', 'sync_fetch_url', admit1 + [9, 6, 0x0F, 0x80, 7, 0, 0, 7, 0, 0, 7, 0, 0, 7, 0, 0,
                                       4, 0, 0, 0x0B, 0xA0, 0, 0xF0, 11, 3, 0xF0, 3, 0x30,
                                       1, 0xF0, 4, 0, 1])
sync_serve = admit1 + [9, 6, 0x03, 0x00, 7, 0, 0, 7, 0, 0, 10, 1, 11, 0, 0x21, 128, 0x03,
                       7, 0, 0, 7, 0, 0, 4, 0, 0, 0x00, 0x00, 4, 0, 1]
w('peer', 'sync_serve', sync_serve)
w('peer', 'sync_serve_refused', admit1 + [9, 6, 0x03, 0x00, 7, 0, 0, 7, 0, 0, 10, 1,
                                           11, 0, 0x21, 2, 0x13, 11, 0, 0x21, 0xC2, 0x23,
                                           4, 0, 0, 0x00, 0x00, 6, 2])
# Two-peer ring, hello exchange both ways, one all-reduce.
ring = [9, 0, 0, 0, 4, 0, 1, 4, 0, 0, 4, 0, 0, 0, 0x01, 0x00,  # plan: ring of 2, rank 0
        0, 0xF0, 11, 0, 0xF0, 1,                                # dial successor, HELLO_ACK
        10, 0, 11, 0, 0x20, 0,                                  # predecessor's HELLO
        4, 0, 1]                                               # verdict
w('peer', 'ring_two_wire', ring)
ar = ring + [9, 3, 0x00, 0xA4, 4, 0, 0] + [7, 0, 0] * 16 + [4, 0, 1]
w('peer', 'ring_two_allreduce', ar)
arq = ring + [9, 3, 0x30, 0xA5, 4, 0, 0] + [7, 0, 0] * 10 + [4, 0, 1]
w('peer', 'ring_two_allreduce_quant', arq)
# Quantized, ZeroPointScale, the predecessor's metadata broken: abort, restore the buffer.
w('peer', 'ring_two_allreduce_quant_bad_meta',
  ring + [9, 3, 0x50, 0xA5, 4, 0, 0] + [7, 0, 0] * 3 + [8, 0, 0x20] + [7, 0, 0] * 6
  + [4, 0, 0, 7, 0, 0])
w('peer', 'ring_two_abort', ring + [9, 3, 0x01, 0xA4, 4, 0, 0, 7, 0, 0, 7, 0, 0x0F, 1, 0xF0, 6, 1,
                                    4, 0, 0])
opt = admit1 + [9, 5, 4, 0, 0x01, 0x00, 7, 0, 0, 4, 0, 0x01, 0x00, 0x00, 4, 0, 1]
w('peer', 'optimize', opt)
w('peer', 'optimize_fail', admit1 + [9, 5, 4, 0, 0x03, 0xA0, 0xC0, 0x00, 7, 0, 0x20, 7, 0, 0,
                                      7, 1, 0, 4, 0, 0x07])
misc = admit1 + [9, 2, 4, 0, 1, 9, 1, 4, 0, 0, 0, 0x01, 4, 0, 1, 2, 0xFF, 2, 30, 6, 3, 6, 4, 9, 4]
w('peer', 'pending_update_evict', misc)
w('peer', 'garbage_events', admit1 + [11, 0xF0, 11, 0xFE, 11, 0xF3, 3, 0, 5, 1, 2, 3, 4, 5,
                                       11, 0, 0x22, 5, 20] + list(range(20)) + [1, 0])
w('peer', 'refused_hello', [9, 0, 0, 0, 4, 0, 0xE3, 9, 4])
