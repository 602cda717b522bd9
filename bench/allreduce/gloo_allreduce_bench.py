#!/usr/bin/python3
"""The Gloo reference of the all-reduce benchmark (issue 7).

torch.distributed with the 'gloo' backend (Debian's python3-torch, run with
/usr/bin/python3) all-reduces float32 tensors with SUM, measured exactly as
pccl_allreduce_bench measures pccl: same sizes, warm-ups, iteration counts,
data, exact check and output rows.

    /usr/bin/python3 gloo_allreduce_bench.py --world N [--min BYTES] [--max BYTES]
        [--step 2|4] [--warmup W] [--iters-min A] [--iters-max B]
        [--iter-bytes BYTES] [--timeout S] [--rank R --port P [--addr A]]

Without --rank it is the launcher: it picks a free port on 127.0.0.1, starts N
copies of itself with GLOO_SOCKET_IFNAME=lo, MASTER_ADDR=127.0.0.1, prints
rank 0's table, bounds the run by --timeout seconds and kills its children
on exit. Rank i contributes (i + 1) * (1 + j % 251) at element j; the sum
must be S * (1 + j % 251), S = N(N + 1)/2, exactly. torch's all_reduce works
in place, so each operation starts with an untimed copy of the send buffer
into the working buffer; the timed region is the all_reduce call alone.
Rank 0 prints: size count iters time_us min_us max_us algbw busbw tx_bytes
(tx_bytes "-": Gloo does not report it).
"""
import argparse
import os
import signal
import socket
import subprocess
import sys
import time


def parse_bytes(s):
    mul = {"K": 1024, "M": 1024**2, "G": 1024**3}
    if s and s[-1].upper() in mul:
        return int(s[:-1]) * mul[s[-1].upper()]
    return int(s)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--world", type=int, required=True)
    p.add_argument("--rank", type=int, default=None)
    p.add_argument("--port", type=int, default=0)
    # Rank 0's address (the store), for ranks started elsewhere (bench/wan/: one per namespace).
    p.add_argument("--addr", default="127.0.0.1")
    p.add_argument("--min", type=parse_bytes, default=4096)
    p.add_argument("--max", type=parse_bytes, default=256 * 1024**2)
    p.add_argument("--step", type=int, default=4)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--iters-min", type=int, default=5)
    p.add_argument("--iters-max", type=int, default=200)
    p.add_argument("--iter-bytes", type=parse_bytes, default=1024**3)
    p.add_argument("--timeout", type=float, default=900.0)
    a = p.parse_args()
    if a.world < 2 or a.step < 2 or a.min < 4 or a.max < a.min or a.iters_min < 1 \
            or a.iters_max < a.iters_min:
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
                print(f"gloo_allreduce_bench: run exceeded {a.timeout:.0f} s", file=sys.stderr)
                return 1
            if code != 0:
                print(f"gloo_allreduce_bench: rank {r} exited with {code}", file=sys.stderr)
                rc = 1
        return rc
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
                p.wait()


def run(a):
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://{a.addr}:{a.port}",
                            rank=a.rank, world_size=a.world)
    n = a.world
    s = n * (n + 1) // 2
    maxcount = a.max // 4
    pattern_full = (torch.arange(maxcount, dtype=torch.int64) % 251 + 1).to(torch.float32)
    send_full = pattern_full * float(a.rank + 1)
    buf_full = torch.empty(maxcount, dtype=torch.float32)
    if a.rank == 0:
        print(f"# system gloo N {n} quant none warmup {a.warmup}", flush=True)
        print("# %10s %11s %6s %11s %11s %11s %8s %8s %12s" % (
            "size", "count", "iters", "time_us", "min_us", "max_us", "algbw", "busbw",
            "tx_bytes"), flush=True)
    size = a.min
    while size <= a.max:
        count = size // 4
        nbytes = count * 4
        iters = min(max(a.iter_bytes // nbytes, a.iters_min), a.iters_max)
        send = send_full[:count]
        buf = buf_full[:count]
        want = pattern_full[:count] * float(s)
        total = a.warmup + iters + 1
        times = []
        for k in range(total):
            checked = k + 1 == a.warmup or k + 1 == total
            buf.copy_(send)
            t0 = time.perf_counter()
            dist.all_reduce(buf, op=dist.ReduceOp.SUM)
            dt = (time.perf_counter() - t0) * 1e6
            if a.warmup <= k < a.warmup + iters:
                times.append(dt)
            if checked and not torch.equal(buf, want):
                bad = (buf != want).nonzero()[0].item()
                print(f"gloo_allreduce_bench {a.rank}: WRONG RESULT at {nbytes} bytes, element "
                      f"{bad}: got {buf[bad].item()} want {want[bad].item()}", file=sys.stderr)
                return 1
        if a.rank == 0:
            times.sort()
            m = len(times)
            med = times[m // 2] if m % 2 else 0.5 * (times[m // 2 - 1] + times[m // 2])
            algbw = nbytes / (med * 1e-6) / 1e9
            busbw = algbw * 2.0 * (n - 1) / n
            print("%12d %11d %6d %11.1f %11.1f %11.1f %8.3f %8.3f %12s" % (
                nbytes, count, iters, med, times[0], times[-1], algbw, busbw, "-"), flush=True)
        size *= a.step
    if a.rank == 0:
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
