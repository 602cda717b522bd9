#!/usr/bin/python3
"""The Gloo reference of the collective benchmark.

torch.distributed with the 'gloo' backend (Debian's python3-torch, run with
/usr/bin/python3) runs one collective on float32 tensors, measured exactly as
pccl_coll_bench measures pccl: same sizes, warm-ups, iteration counts, data,
exact check, timing and output rows (bench/collectives/coll_common.h).

    /usr/bin/python3 gloo_coll_bench.py --world N --coll NAME [--min BYTES]
        [--max BYTES] [--step 2|4] [--warmup W] [--iters-min A] [--iters-max B]
        [--iter-bytes BYTES] [--timeout S]

NAME and the torch call it times:
    broadcast      dist.broadcast(buf, src=0)
    reduce         dist.reduce(buf, dst=0, op=SUM)   (in place: buf is refilled
                   from the send buffer before each operation, untimed)
    allgather      dist.all_gather(views of one output tensor, send)
                   (all_gather_into_tensor is tried first; torch 1.13's Gloo lacks it)
    reducescatter  dist.reduce_scatter_tensor, else dist.reduce_scatter
                   (torch 1.13's Gloo has neither: the run prints
                   '# unsupported: ...' and no rows, and the summary shows n/a)
    alltoall       dist.all_to_all_single(out, send)
    gather         dist.gather(send, views of one output tensor at the root, dst=0)
    scatter        dist.scatter(out, views of the send tensor at the root, src=0)
    sendrecv       a ring shift: dist.irecv(out, src=rank - 1) and
                   dist.isend(send, dst=rank + 1), then wait() on both
    barrier        dist.barrier()

Without --rank it is the launcher: it picks a free port on 127.0.0.1, starts N
copies of itself with GLOO_SOCKET_IFNAME=lo, MASTER_ADDR=127.0.0.1, prints
rank 0's table, bounds the run by --timeout seconds and kills its children on
exit. Every operation starts after an untimed dist.barrier() (not for the
barrier benchmark); its time is the largest of the ranks' wall times around
the call (exchanged after the size's last operation with an untimed
all_reduce MAX). Rank 0 prints: size count iters time_us min_us max_us algbw
busbw tx_bytes (tx_bytes "-": Gloo does not report it).
"""
import argparse
import os
import signal
import socket
import subprocess
import sys
import time

COLLS = ["broadcast", "reduce", "allgather", "reducescatter", "alltoall", "gather", "scatter",
         "sendrecv", "barrier"]
BLOCKED = {"allgather", "reducescatter", "alltoall", "gather", "scatter"}


def parse_bytes(s):
    mul = {"K": 1024, "M": 1024**2, "G": 1024**3}
    if s and s[-1].upper() in mul:
        return int(s[:-1]) * mul[s[-1].upper()]
    return int(s)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--world", type=int, required=True)
    p.add_argument("--coll", choices=COLLS, required=True)
    p.add_argument("--rank", type=int, default=None)
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--min", type=parse_bytes, default=4096)
    p.add_argument("--max", type=parse_bytes, default=256 * 1024**2)
    p.add_argument("--step", type=int, default=4)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--iters-min", type=int, default=5)
    p.add_argument("--iters-max", type=int, default=200)
    p.add_argument("--iter-bytes", type=parse_bytes, default=1024**3)
    p.add_argument("--timeout", type=float, default=900.0)
    a = p.parse_args()
    if a.world < 2 or a.world > 255 or a.step < 2 or a.min < 4 * a.world or a.max < a.min \
            or a.iters_min < 1 or a.iters_max < a.iters_min:
        p.error("bad arguments")
    return a


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(a):
    port = free_port()
    env = dict(os.environ, GLOO_SOCKET_IFNAME="lo", MASTER_ADDR="127.0.0.1",
               MASTER_PORT=str(port), OMP_NUM_THREADS="1")
    args = list(sys.argv[1:])
    procs = []

    def on_signal(signum, _frame):
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        for r in range(a.world):
            out = None if r == 0 else subprocess.DEVNULL
            procs.append(subprocess.Popen(
                [sys.executable, os.path.abspath(__file__)] + args +
                ["--rank", str(r), "--port", str(port)], env=env, stdout=out))
        deadline = time.monotonic() + a.timeout
        rc = 0
        for r, p in enumerate(procs):
            left = deadline - time.monotonic()
            try:
                code = p.wait(timeout=max(left, 0.1))
            except subprocess.TimeoutExpired:
                print(f"gloo_coll_bench: run exceeded {a.timeout:.0f} s", file=sys.stderr)
                return 1
            if code != 0:
                print(f"gloo_coll_bench: rank {r} exited with {code}", file=sys.stderr)
                rc = 1
        return rc
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
                p.wait()


def val(torch, src, blk, count):
    """coll_common.h's val(src, b, e) for e in [0, count): float32, exact."""
    e = torch.arange(count, dtype=torch.int64) % 251
    return (e + (src * 65536 + blk * 256 + 1)).to(torch.float32)


def pat(torch, blk, count):
    """coll_common.h's pat(b, e) = 1 + (e + 7b) % 251, as int64."""
    return (torch.arange(count, dtype=torch.int64) + 7 * blk) % 251 + 1


def run(a):
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{a.port}",
                            rank=a.rank, world_size=a.world)
    n, r, coll = a.world, a.rank, a.coll
    s = n * (n + 1) // 2
    if r == 0:
        print(f"# system gloo N {n} coll {coll} warmup {a.warmup}", flush=True)
        print("# %10s %11s %6s %11s %11s %11s %8s %8s %12s" % (
            "size", "count", "iters", "time_us", "min_us", "max_us", "algbw", "busbw",
            "tx_bytes"), flush=True)
    factor = {"broadcast": 1.0, "reduce": 1.0, "sendrecv": 1.0, "barrier": 0.0}.get(
        coll, (n - 1) / n)
    nbytes_sweep = a.min
    while nbytes_sweep <= a.max:
        if coll == "barrier":
            count = 0
        elif coll in BLOCKED:
            count = nbytes_sweep // (4 * n)
        else:
            count = nbytes_sweep // 4
        size = count * 4 * (n if coll in BLOCKED else 1)
        iters = a.iters_max if coll == "barrier" else \
            min(max(a.iter_bytes // size, a.iters_min), a.iters_max)

        # Inputs, outputs and the exact expected output of this rank (None: none).
        refill = None
        op_args = None
        want = None
        out = None
        if coll == "broadcast":
            src = val(torch, 0, 0, count)
            out = src if r == 0 else torch.empty(count, dtype=torch.float32)
            want = val(torch, 0, 0, count)

            def op():
                dist.broadcast(out, src=0)
        elif coll == "reduce":
            send = (pat(torch, 0, count) * (r + 1)).to(torch.float32)
            out = torch.empty(count, dtype=torch.float32)
            want = (pat(torch, 0, count) * s).to(torch.float32) if r == 0 else None

            def refill():
                out.copy_(send)

            def op():
                dist.reduce(out, dst=0, op=dist.ReduceOp.SUM)
        elif coll == "allgather":
            send = val(torch, r, 0, count)
            out = torch.empty(n * count, dtype=torch.float32)
            views = list(out.split(count))
            want = torch.cat([val(torch, b, 0, count) for b in range(n)])
            into_tensor = hasattr(dist, "all_gather_into_tensor")

            def op():
                nonlocal into_tensor
                if into_tensor:
                    try:
                        dist.all_gather_into_tensor(out, send)
                        return
                    except RuntimeError:
                        into_tensor = False  # every rank fails alike, before any data moves
                dist.all_gather(views, send)
        elif coll == "reducescatter":
            send = torch.cat([(pat(torch, b, count) * (r + 1)).to(torch.float32)
                              for b in range(n)])
            out = torch.empty(count, dtype=torch.float32)
            want = (pat(torch, r, count) * s).to(torch.float32)
            op_args = list(send.split(count))
            tried = []
            for name in ("reduce_scatter_tensor", "reduce_scatter"):
                if not hasattr(dist, name):
                    continue
                try:
                    if name == "reduce_scatter_tensor":
                        dist.reduce_scatter_tensor(out, send, op=dist.ReduceOp.SUM)
                    else:
                        dist.reduce_scatter(out, op_args, op=dist.ReduceOp.SUM)
                    break
                except RuntimeError as e:
                    tried.append(f"{name}: {e}")
            else:
                if r == 0:
                    print(f"# unsupported: torch {torch.__version__} Gloo has no reduce-scatter ("
                          + "; ".join(tried) + ")", flush=True)
                dist.destroy_process_group()
                return 0
            use_tensor = name == "reduce_scatter_tensor"

            def op():
                if use_tensor:
                    dist.reduce_scatter_tensor(out, send, op=dist.ReduceOp.SUM)
                else:
                    dist.reduce_scatter(out, op_args, op=dist.ReduceOp.SUM)
        elif coll == "alltoall":
            send = torch.cat([val(torch, r, b, count) for b in range(n)])
            out = torch.empty(n * count, dtype=torch.float32)
            want = torch.cat([val(torch, b, r, count) for b in range(n)])

            def op():
                dist.all_to_all_single(out, send)
        elif coll == "gather":
            send = val(torch, r, 0, count)
            out = torch.empty(n * count, dtype=torch.float32) if r == 0 else None
            views = list(out.split(count)) if r == 0 else None
            want = torch.cat([val(torch, b, 0, count) for b in range(n)]) if r == 0 else None

            def op():
                dist.gather(send, views, dst=0)
        elif coll == "scatter":
            send = torch.cat([val(torch, 0, b, count) for b in range(n)])
            views = list(send.split(count)) if r == 0 else None
            out = torch.empty(count, dtype=torch.float32)
            want = val(torch, 0, r, count)

            def op():
                dist.scatter(out, views, src=0)
        elif coll == "sendrecv":
            send = val(torch, r, 0, count)
            out = torch.empty(count, dtype=torch.float32)
            want = val(torch, (r + n - 1) % n, 0, count)

            def op():
                works = [dist.irecv(out, src=(r + n - 1) % n), dist.isend(send, dst=(r + 1) % n)]
                for w in works:
                    w.wait()
        else:
            def op():
                dist.barrier()

        total = a.warmup + iters + 1
        times = torch.zeros(iters, dtype=torch.float64)
        for k in range(total):
            checked = k + 1 == a.warmup or k + 1 == total
            if refill is not None:
                refill()  # reduce: the input, never the result (r + 1 != N(N + 1)/2)
            elif checked and want is not None and not (coll == "broadcast" and r == 0):
                out.fill_(float("nan"))
            if coll != "barrier":
                dist.barrier()
            t0 = time.perf_counter()
            op()
            dt = (time.perf_counter() - t0) * 1e6
            if a.warmup <= k < a.warmup + iters:
                times[k - a.warmup] = dt
            if checked and want is not None and not torch.equal(out, want):
                bad = (out != want).nonzero()[0].item()
                print(f"gloo_coll_bench {r}: {coll} WRONG RESULT at {size} bytes, element "
                      f"{bad}: got {out[bad].item()} want {want[bad].item()}", file=sys.stderr)
                return 1
        dist.all_reduce(times, op=dist.ReduceOp.MAX)  # the slowest rank's time, untimed
        if r == 0:
            ts = sorted(times.tolist())
            m = len(ts)
            med = ts[m // 2] if m % 2 else 0.5 * (ts[m // 2 - 1] + ts[m // 2])
            algbw = size / (med * 1e-6) / 1e9
            print("%12d %11d %6d %11.1f %11.1f %11.1f %8.3f %8.3f %12s" % (
                size, size // 4, iters, med, ts[0], ts[-1], algbw, algbw * factor, "-"),
                flush=True)
        if coll == "barrier":
            break
        nbytes_sweep *= a.step
    if r == 0:
        print("# done, results verified exactly", flush=True)
    dist.destroy_process_group()
    return 0


def main():
    a = parse_args()
    if a.rank is None:
        return launch(a)
    return run(a)


if __name__ == "__main__":
    sys.exit(main())
