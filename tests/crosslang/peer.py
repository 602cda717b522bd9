#!/usr/bin/python3
"""The Python peer of the cross-language test (tests/crosslang/run.sh).

Same protocol as peer_c.c, the Go pcclpeer and the Rust peer example:

    peer.py --master HOST:PORT|URL --steps K --rank-value V --world N [--count C]
            [--timeout-ms T]

1. Connects and updates the topology until the group has N peers.
2. For each step s = 0..K-1: updates the topology; synchronizes the shared state
   (one int32 tensor "state" of C elements, default 8, revision s, ENFORCE_POPULAR);
   all-reduces (SUM, tag 0) v[j] = V*(s+1)+j into a separate buffer; prints
   "step s world W sum a,b,..."; state[j] += sum[j] (wrapping int32).
3. Runs three ops of the collective set on the epoch of the last completed call
   (each retried after an update of the topology while it fails with
   UpdateTopologyFailed), on int32 buffers, R the rank and W the world the op
   reports: broadcast from rank 0 of C elements, the root's holding 1000*V+j
   (the others' -1), printing "bcast rank R world W data a,b,..."; all-gather of
   V*100+j (C elements each), printing "allgather rank R world W data ..." (all
   W*C elements, block r from rank r); reduce-scatter SUM of W*C elements
   V*(k+1), printing "reducescatter rank R world W data ..." (this rank's block).
4. Synchronizes revision K and prints "hash H": FNV-1a 64 over the state's
   little-endian int32 bytes, 16 lowercase hex digits.

Uses the public API of bindings/python (pccl) only: step 3 is the Communicator's
broadcast, all_gather and reduce_scatter (pcclBroadcast, pcclAllGather,
pcclReduceScatter).
Exit status: 0 success, 1 a pccl call failed, 2 bad usage or admission timeout.
"""
import argparse
import sys
import time

import numpy as np

import pccl


def fnv1a64(data):
    h = 0xCBF29CE484222325
    for b in data:
        h ^= b
        h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def update_topology(comm, deadline):
    """update_topology, retried while it fails with UpdateTopologyFailed."""
    while True:
        try:
            comm.update_topology()
            return
        except pccl.UpdateTopologyFailed:
            if time.monotonic() > deadline:
                raise


def collective(comm, name, v, count, deadline):
    """One op of step 3 ("bcast", "allgather" or "reducescatter"), sized for the rank and
    world of the last completed call; UpdateTopologyFailed (the membership changed before every
    member started it) updates the topology and sizes and runs the op again."""
    while True:
        rank = comm.get_attribute(pccl.Attribute.RANK)
        world = comm.get_attribute(pccl.Attribute.PEER_GROUP_WORLD_SIZE)
        try:
            if name == "bcast":
                out = (np.arange(count, dtype=np.int32) + v * 1000 if rank == 0
                       else np.full(count, -1, dtype=np.int32))
                info = comm.broadcast(out, 0)
            elif name == "allgather":
                out = np.zeros(world * count, dtype=np.int32)
                info = comm.all_gather(np.arange(count, dtype=np.int32) + v * 100, out)
            else:
                send = (np.arange(1, world * count + 1, dtype=np.int64) * v).astype(np.int32)
                out = np.zeros(count, dtype=np.int32)
                info = comm.reduce_scatter(send, out, op=pccl.ReduceOp.SUM)
        except pccl.UpdateTopologyFailed:
            if time.monotonic() > deadline:
                raise
            update_topology(comm, deadline)
            continue
        print(f"{name} rank {info.rank} world {info.world_size} data "
              f"{','.join(str(int(x)) for x in out)}", flush=True)
        return


def run(args):
    timeout_s = args.timeout_ms / 1000.0
    comm = pccl.Communicator(args.master, peer_group=0, timeout_ms=args.timeout_ms)
    try:
        comm.connect(n_attempts=3)
        admitted = time.monotonic()
        while True:
            ws = comm.get_attribute(pccl.Attribute.CURRENT_WORLD_SIZE)
            if ws >= args.world:
                break
            if time.monotonic() - admitted > timeout_s:
                print(f"peer.py: world stays {ws} < {args.world}", file=sys.stderr)
                return 2
            try:
                comm.update_topology()
            except pccl.UpdateTopologyFailed:
                pass

        state = np.zeros(args.count, dtype=np.int32)
        shared = pccl.SharedState([pccl.TensorInfo.from_numpy(state, "state")])
        send = np.zeros(args.count, dtype=np.int32)
        total = np.zeros(args.count, dtype=np.int32)
        j = np.arange(args.count, dtype=np.int64)
        for s in range(args.steps):
            update_topology(comm, time.monotonic() + timeout_s)
            shared.revision = s
            comm.sync_shared_state(shared, pccl.SharedStateSyncStrategy.ENFORCE_POPULAR)
            # V*(s+1)+j computed in 64 bits, then wrapped to int32 like the other peers.
            send[:] = ((args.rank_value * (s + 1) + j) & 0xFFFFFFFF).astype(np.uint32).view(np.int32)
            info = comm.all_reduce(send, total, op=pccl.ReduceOp.SUM, tag=0)
            print(f"step {s} world {info.world_size} sum {','.join(str(int(x)) for x in total)}",
                  flush=True)
            state += total  # in place (the shared state's memory), wrapping
        for name in ("bcast", "allgather", "reducescatter"):
            collective(comm, name, args.rank_value, args.count, time.monotonic() + timeout_s)
        shared.revision = args.steps
        comm.sync_shared_state(shared, pccl.SharedStateSyncStrategy.ENFORCE_POPULAR)
        print(f"hash {fnv1a64(state.astype('<i4').tobytes()):016x}", flush=True)
        return 0
    finally:
        comm.close()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--master", required=True)
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--rank-value", type=int, required=True)
    p.add_argument("--world", type=int, required=True)
    p.add_argument("--count", type=int, default=8)
    p.add_argument("--timeout-ms", type=int, default=30000)
    args = p.parse_args()  # exits 2 on bad usage
    if args.steps < 0 or args.world < 1 or args.count < 1 or args.timeout_ms < 1:
        p.error("--steps >= 0, --world >= 1, --count >= 1, --timeout-ms >= 1")
    try:
        return run(args)
    except pccl.PCCLError as e:
        print(f"peer.py: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
