"""A peer of test_collectives.py: the collective set of pccl.Communicator (broadcast, reduce,
all_gather, reduce_scatter, all_to_all, gather, scatter, barrier, send / recv) on real
processes, checked exactly against numpy references computed here from every rank's
(deterministic) input.

  collectives_peer.py PORT INDEX WORLD {ops|errors|wait}

ops: every method, int32 and float32, numpy arrays and torch tensors, blocking and async, in
place where the C API allows it; every rank makes the same number of checks and prints
"OK rank R/W: K checks". errors: refused arguments and their exact exception classes.
wait: Work.wait(timeout=...) on a receive whose send comes later; a dropped running Work, and
close() with one, wait for its op.
Exits 1 on any mismatch (printing "MISMATCH" and the differences).
"""

import sys
import time
import weakref

import numpy as np
import torch

import pccl

N = 5  # elements per block (odd: uneven ring chunks)
DTYPES = ["int32", "float32"]


def data(dt, r, salt, n=N):
    """Rank r's input: small values, exact in int32 and float32 in every reduction here."""
    i = np.arange(n, dtype=np.int64)
    return ((i * 3 + r * 7 + salt * 11) % 23 - 9).astype(dt)


class Checker:
    def __init__(self):
        self.n = 0
        self.bad = []

    def eq(self, what, got, want):
        self.n += 1
        got = np.asarray(got)
        want = np.asarray(want)
        if got.dtype != want.dtype or got.shape != want.shape or not np.array_equal(got, want):
            self.bad.append(f"{what}: got {got.dtype} {got.tolist()} want {want.dtype} "
                            f"{want.tolist()}")

    def true(self, what, cond):
        self.n += 1
        if not cond:
            self.bad.append(what)

    def info(self, what, info, rank, world):
        self.true(f"{what}: info {info!r} (rank {rank}, world {world})",
                  isinstance(info, pccl.CollectiveInfo) and info.rank == rank
                  and info.world_size == world and info.epoch > 0)

    def raises(self, what, cls, fn, function="-"):
        """fn() raises exactly cls (and, unless function is "-", from that C function)."""
        self.n += 1
        try:
            fn()
        except Exception as e:  # noqa: BLE001
            if type(e) is not cls or (function != "-" and getattr(e, "function", None) != function):
                self.bad.append(f"{what}: raised {type(e).__name__} ({e!r}), want {cls.__name__}"
                                f" from {function}")
            return
        self.bad.append(f"{what}: nothing raised, want {cls.__name__}")


class Wrap:
    """numpy arrays, or torch tensors with their own memory."""

    def __init__(self, kind):
        self.kind = kind

    def t(self, a):
        a = np.array(a, copy=True)
        return a if self.kind == "numpy" else torch.from_numpy(a)

    def zeros(self, dt, n):
        return self.t(np.zeros(n, dtype=dt))

    @staticmethod
    def np(x):
        return x.numpy() if isinstance(x, torch.Tensor) else x


def done(work, ck, what, rank, world):
    """work is a Work; waits for it and checks its info."""
    ck.true(f"{what}: async returned {type(work).__name__}", isinstance(work, pccl.Work))
    ck.info(what, work.wait(), rank, world)


def run_ops(comm, rank, world):
    ck = Checker()
    blk = lambda a, j: a[j * N:(j + 1) * N]  # noqa: E731
    for kind in ("numpy", "torch"):
        w = Wrap(kind)
        for dt in DTYPES:
            tag = f"{kind} {dt}"
            mine = [data(dt, r, 1) for r in range(world)]
            big = [data(dt, r, 2, n=N * world) for r in range(world)]
            total = np.sum(np.stack(big), axis=0).astype(dt)
            lowest = np.min(np.stack(big), axis=0)

            # broadcast: blocking from the last rank, async from rank 0
            for root, async_op in ((world - 1, False), (0, True)):
                b = w.t(mine[rank])
                res = comm.broadcast(b, root, async_op=async_op)
                what = f"{tag} broadcast root {root} async {async_op}"
                done(res, ck, what, rank, world) if async_op else ck.info(what, res, rank, world)
                ck.eq(what, w.np(b), mine[root])

            # reduce: out of place (recv None off the root), in place, async MAX
            root = 1 % world
            s = w.t(big[rank])
            r = w.zeros(dt, N * world) if rank == root else None
            ck.info(f"{tag} reduce", comm.reduce(s, r, root), rank, world)
            ck.eq(f"{tag} reduce", w.np(r) if rank == root else w.np(s),
                  total if rank == root else big[rank])
            s = w.t(big[rank])
            ck.info(f"{tag} reduce in place", comm.reduce(s, s, 0), rank, world)
            ck.eq(f"{tag} reduce in place", w.np(s), total if rank == 0 else big[rank])
            s, r = w.t(big[rank]), w.zeros(dt, N * world)  # recv given off the root: unused
            done(comm.reduce(s, r, root, pccl.ReduceOp.MIN, async_op=True), ck,
                 f"{tag} reduce async", rank, world)
            ck.eq(f"{tag} reduce async", w.np(r), lowest if rank == root else 0 * lowest)

            # all-gather: out of place, in place (send is this rank's block of recv), async
            r = w.zeros(dt, N * world)
            ck.info(f"{tag} all_gather", comm.all_gather(w.t(mine[rank]), r), rank, world)
            ck.eq(f"{tag} all_gather", w.np(r), np.concatenate(mine))
            r = w.zeros(dt, N * world)
            blk(r, rank)[:] = w.t(mine[rank])
            comm.all_gather(blk(r, rank), r)
            ck.eq(f"{tag} all_gather in place", w.np(r), np.concatenate(mine))
            r = w.zeros(dt, N * world)
            done(comm.all_gather(w.t(mine[rank]), r, async_op=True), ck, f"{tag} all_gather async",
                 rank, world)
            ck.eq(f"{tag} all_gather async", w.np(r), np.concatenate(mine))

            # reduce-scatter: SUM out of place, in place (recv is this rank's block), MIN async
            r = w.zeros(dt, N)
            ck.info(f"{tag} reduce_scatter", comm.reduce_scatter(w.t(big[rank]), r), rank, world)
            ck.eq(f"{tag} reduce_scatter", w.np(r), blk(total, rank))
            s = w.t(big[rank])
            comm.reduce_scatter(s, blk(s, rank))
            ck.eq(f"{tag} reduce_scatter in place", w.np(blk(s, rank)), blk(total, rank))
            r = w.zeros(dt, N)
            done(comm.reduce_scatter(w.t(big[rank]), r, op=pccl.ReduceOp.MIN, async_op=True), ck,
                 f"{tag} reduce_scatter async", rank, world)
            ck.eq(f"{tag} reduce_scatter async", w.np(r), blk(lowest, rank))

            # all-to-all: block j of rank i lands in block i of rank j
            want = np.concatenate([blk(big[i], rank) for i in range(world)])
            r = w.zeros(dt, N * world)
            ck.info(f"{tag} all_to_all", comm.all_to_all(w.t(big[rank]), r), rank, world)
            ck.eq(f"{tag} all_to_all", w.np(r), want)
            s = w.t(big[rank])
            comm.all_to_all(s, s)
            ck.eq(f"{tag} all_to_all in place", w.np(s), want)
            r = w.zeros(dt, N * world)
            done(comm.all_to_all(w.t(big[rank]), r, async_op=True), ck, f"{tag} all_to_all async",
                 rank, world)
            ck.eq(f"{tag} all_to_all async", w.np(r), want)

            # gather: recv None off the root; in place at the root; async
            root = world - 1
            r = w.zeros(dt, N * world) if rank == root else None
            ck.info(f"{tag} gather", comm.gather(w.t(mine[rank]), r, root), rank, world)
            ck.eq(f"{tag} gather", w.np(r) if rank == root else mine[rank],
                  np.concatenate(mine) if rank == root else mine[rank])
            r = w.zeros(dt, N * world)
            s = w.t(mine[rank])
            if rank == root:
                blk(r, root)[:] = s
                s = blk(r, root)
            comm.gather(s, r if rank == root else None, root)
            ck.eq(f"{tag} gather in place", w.np(r) if rank == root else w.np(s),
                  np.concatenate(mine) if rank == root else mine[rank])
            r = w.zeros(dt, N * world)
            done(comm.gather(w.t(mine[rank]), r, 0, async_op=True), ck, f"{tag} gather async",
                 rank, world)
            ck.eq(f"{tag} gather async", w.np(r),
                  np.concatenate(mine) if rank == 0 else 0 * np.concatenate(mine))

            # scatter: send None off the root; in place at the root; async
            root = 0
            r = w.zeros(dt, N)
            ck.info(f"{tag} scatter", comm.scatter(w.t(big[root]) if rank == root else None, r,
                                                   root), rank, world)
            ck.eq(f"{tag} scatter", w.np(r), blk(big[root], rank))
            s = w.t(big[rank])
            r = blk(s, rank) if rank == root else w.zeros(dt, N)
            comm.scatter(s if rank == root else None, r, root)
            ck.eq(f"{tag} scatter in place", w.np(r), blk(big[root], rank))
            root = world - 1
            r = w.zeros(dt, N)
            done(comm.scatter(w.t(big[rank]), r, root, async_op=True), ck, f"{tag} scatter async",
                 rank, world)  # send given off the root: not read
            ck.eq(f"{tag} scatter async", w.np(r), blk(big[root], rank))

            # send / recv around the ring: blocking (even ranks send first), then both async
            nxt, prv = (rank + 1) % world, (rank - 1) % world
            got = w.zeros(dt, N)
            if rank % 2 == 0:
                ck.info(f"{tag} send", comm.send(w.t(mine[rank]), nxt), rank, world)
                ck.info(f"{tag} recv", comm.recv(got, prv), rank, world)
            else:
                ck.info(f"{tag} recv", comm.recv(got, prv), rank, world)
                ck.info(f"{tag} send", comm.send(w.t(mine[rank]), nxt), rank, world)
            ck.eq(f"{tag} send/recv", w.np(got), mine[prv])
            got = w.zeros(dt, N)
            ref = weakref.ref(got)
            works = [comm.send(w.t(mine[rank]), nxt, tag=5, async_op=True),
                     comm.recv(got, prv, tag=5, async_op=True)]
            del got  # the Work keeps it alive until the op ended
            ck.true(f"{tag} recv async keeps its buffer", ref() is not None)
            out = ref()
            for x in works:
                done(x, ck, f"{tag} send/recv async", rank, world)
            ck.eq(f"{tag} send/recv async", w.np(out), mine[prv])

    # barrier, blocking and async; several async ops in flight on distinct tags
    ck.info("barrier", comm.barrier(), rank, world)
    done(comm.barrier(tag=3, async_op=True), ck, "barrier async", rank, world)
    outs = [np.zeros(N * world, dtype=np.int32) for _ in range(3)]
    works = [comm.all_gather(data("int32", rank, k), outs[k], tag=10 + k, async_op=True)
             for k in range(3)]
    for k in (2, 0, 1):
        done(works[k], ck, f"in flight {k}", rank, world)
        ck.eq(f"in flight {k}", outs[k],
              np.concatenate([data("int32", r, k) for r in range(world)]))
    return ck


def run_errors(comm, rank, world):
    """Every rank makes the same refused calls: nothing is started, and the communicator goes
    on (a last all-gather)."""
    ck = Checker()
    i32, f32 = np.zeros(N, np.int32), np.zeros(N, np.float32)
    big = np.zeros(N * world, np.int32)
    E = pccl
    ck.raises("all_gather recv size", E.SizeMismatchError,
              lambda: comm.all_gather(i32, np.zeros(N * world + 1, np.int32)), None)
    ck.raises("reduce_scatter send size", E.SizeMismatchError,
              lambda: comm.reduce_scatter(np.zeros(N * world - 1, np.int32), i32), None)
    ck.raises("all_to_all size not divisible", E.SizeMismatchError,
              lambda: comm.all_to_all(np.zeros(N * world + 1, np.int32),
                                      np.zeros(N * world + 1, np.int32)), None)
    ck.raises("gather recv size", E.SizeMismatchError,
              lambda: comm.gather(i32, np.zeros(N, np.int32), 0), None)
    ck.raises("scatter send size", E.SizeMismatchError,
              lambda: comm.scatter(np.zeros(N, np.int32), i32, 0), None)
    ck.raises("reduce recv size", E.SizeMismatchError,
              lambda: comm.reduce(i32, np.zeros(N + 1, np.int32), 0), None)
    ck.raises("reduce dtype", E.DTypeMismatchError, lambda: comm.reduce(i32, f32, 0), None)
    ck.raises("all_gather dtype (torch)", E.DTypeMismatchError,
              lambda: comm.all_gather(torch.zeros(N, dtype=torch.int32),
                                      torch.zeros(N * world)), None)
    ck.raises("scatter dtype", E.DTypeMismatchError,
              lambda: comm.scatter(big.astype(np.float32), i32, 0), None)
    ck.raises("broadcast complex", E.UnsupportedDTypeError,
              lambda: comm.broadcast(np.zeros(N, np.complex64), 0), None)
    ck.raises("send a list", E.UnsupportedTensorTypeError, lambda: comm.send([1, 2], 0), None)
    ck.raises("recv non-contiguous", E.NonContiguousTensorError,
              lambda: comm.recv(np.zeros(2 * N, np.int32)[::2], 0), None)
    ro = np.zeros(N, np.int32)
    ro.flags.writeable = False
    ck.raises("broadcast read-only", E.ReadOnlyBufferError, lambda: comm.broadcast(ro, 0), None)
    ck.raises("root not an int", TypeError, lambda: comm.broadcast(i32, "0"))
    ck.raises("op unknown", E.InvalidArgument, lambda: comm.reduce(i32, i32, 0, op=99), None)
    ck.raises("tag negative", E.InvalidArgument, lambda: comm.barrier(tag=-1), None)
    # refused by libpccl: out-of-range roots and peers, bitwise ops on floats
    ck.raises("broadcast root = world", E.InvalidArgument,
              lambda: comm.broadcast(i32, world), "pcclBroadcast")
    ck.raises("gather root -1", E.InvalidArgument,
              lambda: comm.gather(i32, big, -1), "pcclGather")
    ck.raises("reduce async root = world", E.InvalidArgument,
              lambda: comm.reduce(i32, i32, world, async_op=True), "pcclReduceAsync")
    ck.raises("scatter root = world + 3", E.InvalidArgument,
              lambda: comm.scatter(big, i32, world + 3), "pcclScatter")
    ck.raises("send to itself", E.InvalidArgument, lambda: comm.send(i32, rank), "pcclSend")
    ck.raises("recv from world", E.InvalidArgument, lambda: comm.recv(i32, world), "pcclRecv")
    ck.raises("reduce BAND float32", E.InvalidArgument,
              lambda: comm.reduce(f32, f32, 0, pccl.ReduceOp.BAND), "pcclReduce")
    out = np.zeros(N * world, np.int32)
    ck.info("all_gather after", comm.all_gather(data("int32", rank, 1), out), rank, world)
    ck.eq("all_gather after", out, np.concatenate([data("int32", r, 1) for r in range(world)]))
    return ck


def run_wait(comm, rank, world):
    """Rank 0 receives from rank 1, which sends only after rank 0's bounded waits timed out
    (a barrier of another tag tells it); then a dropped running Work waits for its op, and so
    does close() for a Work still held. Two processes."""
    ck = Checker()
    want = data("float32", 1, 4)
    if rank == 0:
        got = torch.zeros(N)
        wk = comm.recv(got, 1, tag=7, async_op=True)
        t0 = time.monotonic()
        ck.raises("wait(timeout=0.3)", pccl.Timeout, lambda: wk.wait(timeout=0.3),
                  "pcclWorkWaitTimeout")
        dt = time.monotonic() - t0
        ck.true(f"wait(timeout=0.3) took {dt:.3f} s", 0.25 <= dt < 2.5)
        ck.raises("wait(timeout=0)", pccl.Timeout, lambda: wk.wait(timeout=0),
                  "pcclWorkWaitTimeout")
        ck.true("still running", wk.is_completed() is False)
        comm.barrier(tag=1)  # rank 1 sends now
        info = wk.wait(timeout=20)
        ck.info("wait(timeout=20)", info, rank, world)
        ck.true("completed", wk.is_completed() is True and wk.info is info)
        ck.true("wait again", wk.wait() is info)
        ck.eq("received", got.numpy(), want)
        comm.barrier(tag=2)
        late = torch.zeros(N)
        wk = comm.recv(late, 1, tag=8, async_op=True)
        t0 = time.monotonic()
        del wk  # pcclWorkFree waits for the running op
        dt = time.monotonic() - t0
        ck.true(f"dropping a running Work waited {dt:.3f} s", dt >= 0.3)
        ck.eq("received by the dropped Work", late.numpy(), want * 2)
        last = torch.zeros(N)
        pending = comm.recv(last, 1, tag=9, async_op=True)
        comm.barrier(tag=3)
        t0 = time.monotonic()
        comm.close()  # ends the running op first (the Work's), then leaves
        dt = time.monotonic() - t0
        ck.true(f"close() waited {dt:.3f} s for the running Work", dt >= 0.3)
        ck.true("closed: completed", pending.is_completed() is True)
        ck.info("closed: wait", pending.wait(), rank, world)
        ck.eq("received before close", last.numpy(), want * 3)
    else:
        comm.barrier(tag=1)
        if rank == 1:
            ck.info("send", comm.send(torch.from_numpy(want.copy()), 0, tag=7), rank, world)
        comm.barrier(tag=2)
        if rank == 1:
            time.sleep(0.6)
            comm.send(torch.from_numpy(want * 2), 0, tag=8)
        comm.barrier(tag=3)
        if rank == 1:
            time.sleep(0.6)
            comm.send(torch.from_numpy(want * 3), 0, tag=9)
    return ck


def join(comm, world):
    deadline = time.monotonic() + 30
    while comm.get_attribute(pccl.Attribute.GLOBAL_WORLD_SIZE) < world or \
            comm.get_attribute(pccl.Attribute.RANK) < 0:
        if time.monotonic() > deadline:
            raise RuntimeError("world never complete")
        try:
            comm.update_topology()
        except pccl.UpdateTopologyFailed:
            pass
        time.sleep(0.01)


def main():
    port, index, world, mode = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    comm = pccl.Communicator(f"127.0.0.1:{port}", 0, timeout_ms=30000, ring_key=index + 1)
    comm.connect(n_attempts=10, retry_delay=0.2)
    join(comm, world)
    rank = comm.get_attribute(pccl.Attribute.RANK)
    print(f"JOINED index {index} rank {rank}", flush=True)
    ck = {"ops": run_ops, "errors": run_errors, "wait": run_wait}[mode](comm, rank, world)
    if mode != "wait":  # (wait: rank 0 closed already)
        comm.barrier(tag=99)  # nobody leaves while another still runs an op
    comm.close()
    if ck.bad:
        print("MISMATCH\n" + "\n".join(ck.bad), flush=True)
        return 1
    print(f"OK rank {rank}/{world}: {ck.n} checks", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
