#!/usr/bin/env python3
"""The collective set on real processes (docs/collectives.md; itest_coll_peer.c).

A ccoip_master (heartbeat 100 ms, eviction 1,000 ms) and N itest_coll_peer
processes on 127.0.0.1:

  --scenario exact     every peer runs mode exact (every kind, exact results,
                       in and out of place, concurrent work objects, quantized
                       reduce-scatter and reduce, barrier, bad arguments); all
                       must exit 0.
  --scenario kill      peer N-1 runs mode victim (SIGKILLs itself mid-op), the
                       others mode survivor: they must fail that op
                       (pcclRankConnectionLost / pcclTimeout /
                       pcclUpdateTopologyFailed) and then run every kind
                       exactly on the N-1 survivors.
  --scenario stop      like kill, but peer N-1 runs mode survivor too and is
                       SIGSTOPped for good once it printed RUNNING (a hung
                       machine, never resumed): the others must behave as in
                       kill (the master evicts the silent peer).
  --scenario timeout   mode timeout: N-1 peers start an op with a 1,000 ms
                       timeout that the last peer joins only 4 s later: they
                       get pcclTimeout within 1..4 s, then all run a barrier
                       and an exact all-gather together.

Every wait is bounded; every child is killed on exit. Exit 0 when all pass.
"""
import argparse
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

from soak import stop_all  # the soak's process cleanup (same folder)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--master", required=True)
    ap.add_argument("--peer", required=True)
    ap.add_argument("--world", type=int, default=3)
    ap.add_argument("--pool", type=int, default=2)
    ap.add_argument("--scenario", choices=("exact", "kill", "stop", "timeout"), required=True)
    ap.add_argument("--budget", type=float, default=100.0)
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="pccl-coll-")
    env = dict(os.environ)
    env.setdefault("PCCL_LOG_LEVEL", "WARN")
    procs = []
    try:
        master = subprocess.Popen(
            [args.master, "--listen", "tcp://127.0.0.1:0", "--print-port", "--heartbeat-ms",
             "100", "--evict-ms", "1000", "--vote-timeout-ms", "20000"],
            stdout=subprocess.PIPE, stderr=open(os.path.join(work, "master.log"), "w"), env=env)
        procs.append(master)
        port = None
        deadline = time.monotonic() + 10
        while port is None and time.monotonic() < deadline:
            line = master.stdout.readline().decode()
            if line.startswith("PORT "):
                port = int(line.split()[1])
        if port is None:
            print("coll: the master did not report its port")
            return 2
        url = f"tcp://127.0.0.1:{port}"
        n = args.world
        modes = {"exact": ["exact"] * n, "kill": ["survivor"] * (n - 1) + ["victim"],
                 "stop": ["survivor"] * n, "timeout": ["timeout"] * n}[args.scenario]
        peers, outs = [], []
        for i in range(n):
            out = open(os.path.join(work, f"peer{i}.out"), "w+")
            err = open(os.path.join(work, f"peer{i}.log"), "w")
            p = subprocess.Popen([args.peer, "--url", url, "--index", str(i), "--world", str(n),
                                  "--mode", modes[i], "--pool", str(args.pool)],
                                 stdout=out, stderr=err, env=env)
            procs.append(p)
            peers.append(p)
            outs.append(out)
        if args.scenario == "stop":
            # Stop the last peer for good once everyone runs the loop of large ops.
            t_end = time.monotonic() + 60
            while time.monotonic() < t_end:
                texts = [open(o.name).read() for o in outs]
                if all("RUNNING" in t for t in texts):
                    time.sleep(0.2)
                    peers[-1].send_signal(signal.SIGSTOP)
                    break
                if any(p.poll() is not None for p in peers):
                    break
                time.sleep(0.05)
            else:
                print("coll: the peers never all ran")
                return 1
        expect_exit = {i: 0 for i in range(n)}
        if args.scenario in ("kill", "stop"):
            expect_exit.pop(n - 1)
        t_end = time.monotonic() + args.budget
        while time.monotonic() < t_end and any(peers[i].poll() is None for i in expect_exit):
            time.sleep(0.1)
        failed = False
        for i, want in expect_exit.items():
            rc = peers[i].poll()
            text = open(outs[i].name).read()
            if rc != want:
                failed = True
                print(f"coll: peer {i} ({modes[i]}) exit {rc}, want {want}")
                print(open(os.path.join(work, f"peer{i}.log")).read()[-2000:])
            elif args.scenario in ("kill", "stop") and "RECOVERED" not in text:
                failed = True
                print(f"coll: peer {i} did not recover")
            else:
                print(f"coll: peer {i} ({modes[i]}) ok: {' '.join(text.split())}")
        if failed:
            print(open(os.path.join(work, "master.log")).read()[-3000:])
            return 1
        print(f"coll: {args.scenario} at N={n}: PASS")
        return 0
    finally:
        stop_all(procs)


if __name__ == "__main__":
    sys.exit(main())
