#!/usr/bin/env python3
"""Writes the hand-made seeds of fuzz_transport (the input format is in fuzz_transport.c).

Usage: python3 tests/fuzz/gen_transport_seeds.py tests/fuzz/corpus
Frames are taken from the codec targets' seeds (corpus/ctrl_p2m, corpus/data_header) and
changed where a seed needs it (lengths, kinds).
"""
import os
import struct
import sys

corpus = sys.argv[1]
out = os.path.join(corpus, "transport")
os.makedirs(out, exist_ok=True)

MASTER, P2P, STATE, PROBE = 0, 1, 2, 3
RESET = 4
WHOLE = 7
NEXT = b"\xfe\xedNC"  # the next connection


def opts(port, chunk=WHOLE, pause=0, reset=False):
    """Bytes 0 and 1: the port, the ending, chunks of 2^chunk bytes, the pause (0..3)."""
    return bytes([port | (RESET if reset else 0), chunk | (pause << 3)])


def frame(directory, name):
    with open(os.path.join(corpus, directory, name), "rb") as f:
        return f.read()


def ctrl(name):
    return frame("ctrl_p2m", name)


def data(name, **fields):
    """A data header from corpus/data_header with fields replaced (kind, epoch, tag, seq, chunk,
    step, offset, length; little-endian at their offsets in the 80-byte layout)."""
    h = bytearray(frame("data_header", name))
    layout = {"kind": (6, "<B"), "epoch": (8, "<Q"), "tag": (16, "<Q"), "seq": (24, "<Q"),
              "chunk": (32, "<I"), "step": (36, "<I"), "offset": (40, "<Q"),
              "length": (48, "<Q")}
    for k, v in fields.items():
        off, fmt = layout[k]
        struct.pack_into(fmt, h, off, v)
    return bytes(h)


def ctrl_header(payload_bytes):
    """A control header (from the HELLO seed) announcing payload_bytes."""
    return ctrl("hello")[:8] + struct.pack("<I", payload_bytes)


GARBAGE = bytes((i * 37 + 11) & 0xFF for i in range(96))
seeds = {
    # master control port
    "master_hello_garbage": opts(MASTER) + ctrl("hello") + GARBAGE,
    "master_session": opts(MASTER) + ctrl("hello") + ctrl("join") + ctrl("heartbeat")
    + ctrl("update_topology") + ctrl("leave"),
    "master_hello_truncated": opts(MASTER) + ctrl("hello")[:30],
    "master_header_truncated": opts(MASTER) + ctrl("hello")[:7],
    "master_oversized_length": opts(MASTER) + ctrl_header(0xFFFFFFFF) + GARBAGE[:16],
    "master_max_length_unsent": opts(MASTER) + ctrl("hello") + ctrl_header(1 << 20) + b"\x08",
    "master_one_byte_at_a_time": opts(MASTER, chunk=0, pause=1) + ctrl("hello") + ctrl("join"),
    "master_reset_mid_frame": opts(MASTER, chunk=2, pause=2, reset=True) + ctrl("hello")
    + ctrl("join")[:20],
    "master_four_connections": opts(MASTER) + ctrl("hello") + NEXT + ctrl("hello") + ctrl("join")
    + NEXT + GARBAGE[:12] + NEXT + ctrl_header(64),
    # a peer's p2p port
    "p2p_hello_junk": opts(P2P) + data("hello") + GARBAGE,
    "p2p_hello_with_payload": opts(P2P) + data("hello", length=16) + GARBAGE[:16],
    "p2p_hello_far_epoch": opts(P2P) + data("hello", epoch=1 << 40),
    "p2p_ring_chunk_truncated": opts(P2P) + data("ring_chunk")[:80] + GARBAGE[:40],
    "p2p_ring_chunk_oversized": opts(P2P) + data("ring_chunk", length=(1 << 63) + 1),
    "p2p_state_data_from_stranger": opts(P2P) + data("state_data", length=4) + b"abcd",
    "p2p_one_byte_at_a_time": opts(P2P, chunk=0, pause=1) + data("hello") + data("ring_chunk"),
    # a peer's shared-state port
    "state_request": opts(STATE) + data("state_request"),
    "state_request_truncated": opts(STATE) + data("state_request", length=100) + GARBAGE[:10],
    "state_request_oversized": opts(STATE) + data("state_request", length=1 << 40),
    "state_data_from_stranger": opts(STATE) + data("state_data", length=8) + GARBAGE[:8],
    "state_ring_chunk_from_stranger": opts(STATE) + data("ring_chunk", length=0),
    "state_data_from_stranger_reset": opts(STATE, reset=True) + data("state_data", length=0),
    "state_hello_then_request": opts(STATE, chunk=3, pause=1) + data("hello")
    + data("state_request"),
    # a peer's bandwidth-probe port
    "probe_request_then_nothing": opts(PROBE) + data("probe_request"),
    "probe_request_reset": opts(PROBE, reset=True) + data("probe_request"),
    "probe_request_then_data": opts(PROBE, chunk=5, pause=2) + data("probe_request", offset=64)
    + data("probe_data", offset=0, length=32) + bytes(32) + data("probe_data", length=48)
    + bytes(16),
    "probe_two_requests": opts(PROBE) + data("probe_request") + data("probe_request"),
    "probe_hello": opts(PROBE) + data("hello") + GARBAGE[:20],
    "probe_one_byte_at_a_time": opts(PROBE, chunk=0, pause=1) + data("probe_request", offset=4)
    + data("probe_data", length=4) + b"abcd",
    "probe_four_connections": opts(PROBE) + data("probe_request") + NEXT + data("probe_request")
    + NEXT + data("probe_data") + NEXT + GARBAGE[:50],
}
for name, seed in seeds.items():
    with open(os.path.join(out, name), "wb") as f:
        f.write(seed)
print(f"{len(seeds)} seeds in {out}")
