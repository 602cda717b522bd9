"""A peer of test_tune.py: joins a world of N, tunes the group (1 KiB .. 64 KiB, one timed
run), saves the table, prints the algorithm an AUTO 4 KiB all-reduce runs, and runs a forced
all-reduce of every algorithm (exact).

  tune_peer.py PORT WORLD OUTFILE
"""

import sys
import time

import numpy as np

import pccl


def main():
    port, world, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    comm = pccl.Communicator(f"127.0.0.1:{port}", 0, timeout_ms=60000)
    comm.connect(n_attempts=10, retry_delay=0.2)
    for _ in range(600):
        if comm.get_attribute(pccl.Attribute.GLOBAL_WORLD_SIZE) >= world:
            break
        try:
            comm.update_topology()
        except pccl.UpdateTopologyFailed:
            pass
        time.sleep(0.01)
    comm.tune(max_bytes=65536, iterations=1)
    comm.tune_save(out)
    algo = comm.get_algorithm(1024, pccl.DataType.FLOAT)
    print(f"AUTO 4096 {algo.name}", flush=True)
    rank = comm.get_attribute(pccl.Attribute.RANK)
    from pccl import _lib as L
    import ctypes
    for a in (pccl.Algorithm.RELAY, pccl.Algorithm.DIRECT, pccl.Algorithm.RING,
              pccl.Algorithm.RING_STRIPED, pccl.Algorithm.HALVING_DOUBLING):
        x = np.arange(100, dtype=np.int32) + rank
        o = L.CollectiveOptions.init()
        o.algorithm = int(a)
        d = L.CReduceDescriptor(100, 0, 10 + int(a), L.CReduceOperandDescriptor(5, 0),
                                L.CQuantizationOptions(5, 0))
        rc = L.lib().pcclAllReduceEx(x.ctypes.data, x.ctypes.data, ctypes.byref(d),
                                     ctypes.byref(o), comm._handle(), None)
        want = np.arange(100, dtype=np.int32) * world + sum(range(world))
        assert rc == 0 and np.array_equal(x, want), (a, rc, x[:4])
    print("FORCED ok", flush=True)
    # leave together (a member leaving early re-wires the others)
    L.lib().pcclBarrier(None, comm._handle(), None)
    comm.close()


if __name__ == "__main__":
    main()
