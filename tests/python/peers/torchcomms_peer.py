"""A peer of test_torchcomms.py: one process of a TorchComm run over pccl.torchcomms, with
FileStore rendezvous (RANK / WORLD_SIZE in the environment).

  torchcomms_peer.py STORE_PATH {ops|kill|timeout|split}

ops: every TorchComm op, for every dtype, checked exactly against a numpy reference
computed here from every rank's (deterministic) input. Exits non-zero on a mismatch.
"""

import datetime
import os
import signal
import sys
import time

import numpy as np
import torch

import pccl
from pccl import torchcomms as tc

TORCH_DTYPES = ["uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32",
                "float64"]
NUMPY_ONLY = ["uint16", "uint32", "uint64"]  # torch 1.13 has no such tensors: numpy arrays
N = 7  # elements per block (odd: uneven ring chunks)


def is_float(dt):
    return dt.startswith("float") or dt == "bfloat16"


def np_dtype(dt):
    return np.float32 if dt == "bfloat16" else np.dtype(dt)


def data(dt, r, salt, n=N, kind="sum"):
    """Rank r's input: small values, exact in every type and in every reduction of <= 4 ranks."""
    i = np.arange(n, dtype=np.int64)
    if kind == "prod":
        v = (i + r + salt) % 3 + 1  # 1..3
    elif kind == "bits":
        v = (i * 37 + r * 101 + salt * 13) % 128
    else:
        v = (i * 3 + r * 5 + salt) % 20
    return v.astype(np_dtype(dt))


class Wrap:
    """numpy <-> the tensor type under test (torch tensor, or numpy for NUMPY_ONLY)."""

    def __init__(self, dt):
        self.dt = dt
        self.torch = dt not in NUMPY_ONLY

    def t(self, a):
        if not self.torch:
            return np.array(a, copy=True)
        x = torch.from_numpy(np.ascontiguousarray(a).copy())
        return x.to(torch.bfloat16) if self.dt == "bfloat16" else x

    def zeros(self, n):
        return self.t(np.zeros(n, dtype=np_dtype(self.dt)))

    def np(self, x):
        if not self.torch:
            return x
        return x.float().numpy() if self.dt == "bfloat16" else x.numpy()


def reduce_ref(dt, arrays, op):
    s = np.stack(arrays)
    if op == "SUM":
        return s.sum(axis=0).astype(s.dtype)
    if op == "PRODUCT":
        return s.prod(axis=0).astype(s.dtype)
    if op == "MIN":
        return s.min(axis=0)
    if op == "MAX":
        return s.max(axis=0)
    if op == "BAND":
        return np.bitwise_and.reduce(s, axis=0)
    if op == "BOR":
        return np.bitwise_or.reduce(s, axis=0)
    if op == "BXOR":
        return np.bitwise_xor.reduce(s, axis=0)
    if op == "PREMUL_SUM":
        return sum(a * (r + 1) for r, a in enumerate(arrays)).astype(s.dtype)
    if op == "AVG":
        if s.dtype.kind in "iu":  # the sum, divided and truncated toward zero (inputs >= 0 here)
            return (s.sum(axis=0).astype(s.dtype) // len(arrays)).astype(s.dtype)
        return (s.sum(axis=0) / len(arrays)).astype(s.dtype)
    raise ValueError(op)


def op_of(name, rank):
    return tc.ReduceOp.PREMUL_SUM(rank + 1) if name == "PREMUL_SUM" else getattr(tc.ReduceOp, name)


def ops_for(dt):
    if is_float(dt):
        return ["SUM", "PRODUCT", "MIN", "MAX", "PREMUL_SUM", "AVG"]
    return ["SUM", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR", "AVG"]


def kind_of(op):
    return {"PRODUCT": "prod", "BAND": "bits", "BOR": "bits", "BXOR": "bits"}.get(op, "sum")


class Checker:
    def __init__(self):
        self.n = 0
        self.bad = []

    def eq(self, what, got, want):
        self.n += 1
        got = np.asarray(got, dtype=np.float64 if got.dtype.kind == "f" else got.dtype)
        want = np.asarray(want, dtype=got.dtype)
        if got.shape != want.shape or not np.array_equal(got, want):
            self.bad.append(f"{what}: got {got.tolist()} want {want.tolist()}")


def quantized_checks(comm, ck):
    """The pccl::quantization hint reaches the wire: a min-max uint8 all-reduce (and
    reduce-scatter) of floats is within the quantization step of the exact sum, not equal to
    it, and bit-identical on every rank."""
    rank, world = comm.get_rank(), comm.get_size()
    hints = {"pccl::quantization": "min_max", "pccl::quantized_dtype": "uint8"}
    ins = [np.random.default_rng(100 + r).uniform(-1, 1, 4096).astype(np.float32)
           for r in range(world)]
    exact = np.sum(np.stack(ins).astype(np.float64), axis=0)
    for name in ("all_reduce", "reduce_scatter_single"):
        if name == "all_reduce":
            t = torch.from_numpy(ins[rank].copy())
            comm.all_reduce(t, tc.ReduceOp.SUM, hints=hints)
            got, want = t.numpy(), exact
        else:
            n = 4096 // world
            t = torch.zeros(n)
            comm.reduce_scatter_single(t, torch.from_numpy(ins[rank][:n * world].copy()),
                                       tc.ReduceOp.SUM, hints=hints)
            got, want = t.numpy(), exact[rank * n:(rank + 1) * n]
        ck.n += 1
        err = np.max(np.abs(got.astype(np.float64) - want))
        # one uint8 step of a [-world, world] range per reducing step
        if not (0 < err <= world * 2.0 * world / 255):
            ck.bad.append(f"quantized {name}: max error {err} (0 means not quantized)")
        everyone = [torch.zeros(got.size) for _ in range(world)]
        comm.all_gather(everyone, torch.from_numpy(got.copy()))
        if name == "all_reduce" and any(not np.array_equal(e.numpy(), got) for e in everyone):
            ck.bad.append("quantized all_reduce: ranks differ")
    # pccl::algorithm (docs/algorithms.md): each one exact (members naming different ones are
    # refused with InvalidUsage: this run aborts on errors, so tests/unit and the C, Go and
    # Rust tests check that)
    for name in ("relay", "direct", "ring", "ring_striped", "halving_doubling"):
        t = torch.arange(64, dtype=torch.int32) + rank
        comm.all_reduce(t, tc.ReduceOp.SUM, hints={"pccl::algorithm": name})
        ck.eq(f"all_reduce pccl::algorithm={name}", t.numpy(),
              np.arange(64, dtype=np.int32) * world + sum(range(world)))
    ck.n += 1
    try:
        comm.all_reduce(torch.zeros(4), tc.ReduceOp.SUM, hints={"pccl::quantization": "fancy"})
        ck.bad.append("an unknown pccl::quantization was accepted")
    except ValueError:
        pass


def run_ops(comm):
    rank, world = comm.get_rank(), comm.get_size()
    ck = Checker()
    for dt in TORCH_DTYPES + NUMPY_ONLY:
        w = Wrap(dt)
        for op in ops_for(dt):
            k = kind_of(op)
            same = op == "AVG" and is_float(dt)  # float AVG: one input everywhere, exact
            ins = [data(dt, 0 if same else r, 1, kind=k) for r in range(world)]
            ref = reduce_ref(dt, ins, op)
            t = w.t(ins[rank])
            comm.all_reduce(t, op_of(op, rank), async_op=False)
            ck.eq(f"{dt} all_reduce {op}", w.np(t), ref)
            root = (1 + len(op)) % world
            t = w.t(ins[rank])
            comm.reduce(t, root, op_of(op, rank), async_op=True).wait()
            if rank == root:
                ck.eq(f"{dt} reduce {op}", w.np(t), ref)
            # reduce-scatter: block j of every rank's input reduces into rank j
            ins2 = [data(dt, r, 2, n=N * world, kind=k) for r in range(world)]
            if same:
                ins2 = [data(dt, 0, 2, n=N * world)] * world
            ref2 = reduce_ref(dt, ins2, op)[rank * N:(rank + 1) * N]
            out = w.zeros(N)
            comm.reduce_scatter_single(out, w.t(ins2[rank]), op_of(op, rank), async_op=False)
            ck.eq(f"{dt} reduce_scatter_single {op}", w.np(out), ref2)
            out = w.zeros(N)
            lst = [w.t(ins2[rank][j * N:(j + 1) * N]) for j in range(world)]
            comm.reduce_scatter(out, lst, op_of(op, rank), async_op=True).wait()
            ck.eq(f"{dt} reduce_scatter {op}", w.np(out), ref2)
        mine = [data(dt, r, 3) for r in range(world)]
        # broadcast
        root = world - 1
        t = w.t(mine[rank])
        comm.broadcast(t, root, async_op=False)
        ck.eq(f"{dt} broadcast", w.np(t), mine[root])
        # all-gather, single and list
        out = w.zeros(N * world)
        comm.all_gather_single(out, w.t(mine[rank]), async_op=False)
        ck.eq(f"{dt} all_gather_single", w.np(out), np.concatenate(mine))
        outs = [w.zeros(N) for _ in range(world)]
        comm.all_gather(outs, w.t(mine[rank]), async_op=True).wait()
        for j in range(world):
            ck.eq(f"{dt} all_gather[{j}]", w.np(outs[j]), mine[j])
        # all-to-all: block j of rank i lands in block i of rank j
        a2a = [data(dt, r, 4, n=N * world) for r in range(world)]
        want = np.concatenate([a2a[i][rank * N:(rank + 1) * N] for i in range(world)])
        out = w.zeros(N * world)
        comm.all_to_all_single(out, w.t(a2a[rank]), async_op=False)
        ck.eq(f"{dt} all_to_all_single", w.np(out), want)
        outs = [w.zeros(N) for _ in range(world)]
        comm.all_to_all(outs, [w.t(a2a[rank][j * N:(j + 1) * N]) for j in range(world)],
                        async_op=True).wait()
        ck.eq(f"{dt} all_to_all", np.concatenate([w.np(o) for o in outs]), want)
        # all-to-all-v: rank i sends (i + j) % 3 + 1 rows of 2 to rank j
        sz = [[(i + j) % 3 + 1 for j in range(world)] for i in range(world)]
        src = [data(dt, r, 5, n=2 * sum(sz[r])).reshape(-1, 2) for r in range(world)]
        offs = [np.cumsum([0] + sz[i]) for i in range(world)]
        want = np.concatenate([src[i][offs[i][rank]:offs[i][rank + 1]] for i in range(world)])
        out = w.zeros(want.size)
        out = out.reshape(-1, 2)
        comm.all_to_all_v_single(out, w.t(src[rank]), [sz[i][rank] for i in range(world)],
                                 sz[rank], async_op=False)
        ck.eq(f"{dt} all_to_all_v_single", w.np(out), want)
        # scatter and gather
        root = 0
        out = w.zeros(N)
        lst = [w.t(a2a[root][j * N:(j + 1) * N]) for j in range(world)] if rank == root else []
        comm.scatter(out, lst, root, async_op=False)
        ck.eq(f"{dt} scatter", w.np(out), a2a[root][rank * N:(rank + 1) * N])
        root = world - 1
        outs = [w.zeros(N) for _ in range(world)] if rank == root else []
        comm.gather(outs, w.t(mine[rank]), root, async_op=True).wait()
        if rank == root:
            for j in range(world):
                ck.eq(f"{dt} gather[{j}]", w.np(outs[j]), mine[j])
        # send / recv around the ring, both in flight at once
        nxt, prv = (rank + 1) % world, (rank - 1) % world
        got = w.zeros(N)
        ws = [comm.send(w.t(mine[rank]), nxt, async_op=True), comm.recv(got, prv, async_op=True)]
        for x in ws:
            x.wait()
        ck.eq(f"{dt} send/recv", w.np(got), mine[prv])
    quantized_checks(comm, ck)
    comm.barrier(async_op=False)
    wk = comm.barrier(async_op=True)
    wk.wait()
    ck.n += 1
    if not wk.is_completed():
        ck.bad.append("barrier work not completed after wait")
    if ck.bad:
        print("MISMATCH\n" + "\n".join(ck.bad), flush=True)
        return 1
    print(f"OK rank {rank}/{world}: {ck.n} checks", flush=True)
    return 0


def retry(comm, fn, after_failure=None):
    """The fault-tolerant loop: on a failure, update the topology and run fn again."""
    while True:
        try:
            return fn()
        except pccl.PCCLError as e:
            print(f"RETRY {type(e).__name__}", flush=True)
            if after_failure is not None:
                after_failure()
            while True:
                try:
                    comm.update_topology()
                    break
                except pccl.PCCLError:
                    time.sleep(0.05)


def run_kill(comm, steps, store):
    """All-reduces `steps` times, retrying after update_topology. The victim (the first process
    that does not run the embedded master to claim it in the store) SIGKILLs itself while its
    part of step 6's all-reduce runs: the others are in that op, and it fails for them."""
    victim = comm._master is None and store.add("victim", 1) == 1
    print(f"VICTIM {victim}", flush=True)
    store.add("claimed", 1)
    while store.add("claimed", 0) < comm.get_size():  # every process decided before step 1
        time.sleep(0.01)
    i = 0
    while i < steps:
        # step 6 moves 16 MB: the victim dies while it is on the wire
        t = torch.ones(4_000_000 if i == 5 else 100_000)
        if victim and i == 5:
            # the same op as the others' blocking one (tag 0), started, then the process dies
            # (keep the work: dropping it would wait for the op, pcclWorkFree)
            work = comm.all_reduce(t, tc.ReduceOp.SUM, async_op=True, hints={"pccl::tag": "0"})
            assert work is not None
            print("KILLING MYSELF", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)

        def step():
            comm.all_reduce(t, tc.ReduceOp.SUM, async_op=False)
            return int(t[0])

        def check_restored():
            # docs/semantics.md: a failed in-place all-reduce leaves the buffer as it was
            # (test_killed_mid_op_survivors_retry fails on NOT RESTORED; it caught a backup
            # cancelled half-way being copied back, fixed in the core: backup_done).
            if not bool((t == 1).all()):
                u, c = torch.unique(t, return_counts=True)
                print(f"NOT RESTORED: values {u.tolist()[:8]} counts {c.tolist()[:8]} first "
                      f"{int((t != 1).nonzero()[0])}", flush=True)
            t.fill_(1.0)  # the retry rebuilds its input, as a fault-tolerant program should

        v = retry(comm, step, check_restored)
        if not bool((t == v).all()):
            u, c = torch.unique(t, return_counts=True)
            print(f"BAD step {i}: v {v} values {u.tolist()[:8]} counts {c.tolist()[:8]} "
                  f"first bad {int((t != v).nonzero()[0])}", flush=True)
            return 1
        i += 1
        print(f"STEP {i} {v} size {comm.get_size()}", flush=True)
        time.sleep(0.02)
    print("DONE", flush=True)
    return 0


def run_timeout(comm):
    rank = comm.get_rank()
    if rank == 0:
        t0 = time.monotonic()
        try:
            comm.all_reduce(torch.ones(4), tc.ReduceOp.SUM, async_op=False,
                            timeout=datetime.timedelta(seconds=1))
            print("NO TIMEOUT", flush=True)
            return 1
        except pccl.Timeout as e:
            assert isinstance(e, TimeoutError)
            print(f"TIMEOUT {time.monotonic() - t0:.2f}", flush=True)
        t0 = time.monotonic()
        wk = comm.barrier(async_op=True, timeout=0.5)
        try:
            wk.wait()
            print("NO ASYNC TIMEOUT", flush=True)
            return 1
        except TimeoutError:
            print(f"ASYNC TIMEOUT {time.monotonic() - t0:.2f}", flush=True)
    else:
        time.sleep(2)  # never calls those ops
    t = torch.ones(4)
    retry(comm, lambda: comm.all_reduce(t, tc.ReduceOp.SUM, async_op=False))
    print(f"AFTER {int(t[0])}", flush=True)
    return 0


def run_split(comm):
    rank, world = comm.get_rank(), comm.get_size()
    members = list(range(world - 1))
    if rank in members:
        child = comm.split(members)
        crank, csize = child.get_rank(), child.get_size()
        t = torch.tensor([float(rank)])
        child.all_reduce(t, tc.ReduceOp.SUM, async_op=False)
        got = torch.zeros(1)
        if crank == 0:
            child.send(torch.tensor([42.0]), 1, async_op=False)
        elif crank == 1:
            child.recv(got, 0, async_op=False)
        print(f"CHILD {rank} {crank}/{csize} sum {int(t[0])} recv {int(got[0])}", flush=True)
        child.barrier(async_op=False)
        child.finalize()
    else:
        assert comm.split([]) is None
        print(f"ADMITTED {rank}", flush=True)
    t = torch.ones(3)
    retry(comm, lambda: comm.all_reduce(t, tc.ReduceOp.SUM, async_op=False))
    print(f"PARENT {rank} {int(t[0])}", flush=True)
    return 0


def run_env_timeout(comm):
    """TORCHCOMM_TIMEOUT_SECONDS bounds an op without a timeout; TORCHCOMM_ABORT_ON_ERROR decides
    whether the failure aborts the process or raises."""
    if comm.get_rank() == 0:
        print("CALLING", flush=True)
        t0 = time.monotonic()
        try:
            comm.all_reduce(torch.ones(4), tc.ReduceOp.SUM, async_op=False)
            print("NO TIMEOUT", flush=True)
        except pccl.Timeout:
            print(f"RAISED Timeout {time.monotonic() - t0:.2f}", flush=True)
    else:
        time.sleep(2.5)  # never calls it
    os._exit(0)  # the peer may have aborted with the master: leave at once


def main():
    path, mode = sys.argv[1], sys.argv[2]
    store = torch.distributed.FileStore(path, int(os.environ["WORLD_SIZE"]))
    ft = mode in ("kill", "timeout", "split")
    comm = tc.new_comm("pccl", torch.device("cpu"), store=store,
                       abort_process_on_timeout_or_error=False if ft else None,
                       hints={"pccl::master_evict_ms": "1500", "pccl::master_heartbeat_ms": "100",
                              "pccl::heartbeat_ms": "100", "unknown::hint": "x"})
    print(f"JOINED rank {comm.get_rank()} size {comm.get_size()} "
          f"master {comm._master is not None}", flush=True)
    if mode == "ops":
        rc = run_ops(comm)
    elif mode == "kill":
        rc = run_kill(comm, int(sys.argv[3]), store)
    elif mode == "timeout":
        rc = run_timeout(comm)
    elif mode == "envtimeout":
        rc = run_env_timeout(comm)
    else:
        rc = run_split(comm)
    comm.finalize()
    return rc


if __name__ == "__main__":
    sys.exit(main())
