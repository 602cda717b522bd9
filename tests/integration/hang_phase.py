#!/usr/bin/env python3
"""A member that hangs for good inside a p2p phase (docs/runtime-tests.md).

A ccoip_master (heartbeat 100 ms, eviction --evict-ms, vote timeout 30 s) and
four itest_soak_peer processes on 127.0.0.1 train in a loop (update topology,
sync, optionally optimize, exact all-reduce). Then, reading the master's log
as it is written:

  --phase admit     a fifth peer joins; the instant the master logs
                    'admit phase with 5 members', peer 1 is SIGSTOPped;
  --phase optimize  the peers optimize the topology every 4th revision; the
                    instant the master logs 'optimized re-wire phase', peer 1
                    is SIGSTOPped and a fifth peer starts.

Peer 1 is never resumed (a hung machine; killed at the end). Passes when every
survivor completes its next call (any result: a line of output) within
evict_ms + 2 s of the stop, makes progress again (an exact all-reduce) and the
newcomer is admitted and completes an all-reduce. Before the fix the master
waited for the hung member's neighbour to report until the vote timeout (30 s),
so the survivors and the newcomer stalled. Every wait is bounded; every child
is killed on exit.
"""
import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

from soak import stop_all  # the soak's process cleanup (same folder)


def now_ms():
    return int(time.monotonic() * 1000)  # CLOCK_MONOTONIC, as the peers print


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--master", required=True)
    ap.add_argument("--peer", required=True)
    ap.add_argument("--phase", choices=("admit", "optimize"), required=True)
    ap.add_argument("--evict-ms", type=int, default=1000)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    scale = float(os.environ.get("PCCL_SOAK_SCALE", "1"))
    bound_ms = args.evict_ms + 2000
    work = tempfile.mkdtemp(prefix="pccl-hang-")
    stop_file = os.path.join(work, "stop")
    env = dict(os.environ)
    env["PCCL_LOG_LEVEL"] = "INFO"
    procs = []
    failures = []
    trigger = ("admit phase with 5 members" if args.phase == "admit"
               else "optimized re-wire phase")
    fired = threading.Event()
    stop_at = [0]
    peers = {}

    def fail(msg):
        failures.append(msg)
        print(f"hang_phase: FAIL: {msg}", flush=True)

    master = subprocess.Popen(
        [args.master, "--listen", "tcp://127.0.0.1:0", "--print-port", "--heartbeat-ms", "100",
         "--evict-ms", str(args.evict_ms), "--vote-timeout-ms", "30000"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    procs.append(master)
    armed = threading.Event()
    master_log = open(os.path.join(work, "master.log"), "w")

    def pump():
        # The master's log, line by line: the stop lands the instant the phase starts.
        for raw in master.stderr:
            line = raw.decode(errors="replace")
            if armed.is_set() and not fired.is_set() and trigger in line:
                peers[1].send_signal(signal.SIGSTOP)
                stop_at[0] = now_ms()
                fired.set()
                master_log.write(f"[hang_phase: peer 1 stopped at {stop_at[0]}]\n")
            master_log.write(line)
        master_log.flush()

    def start_peer(slot):
        cmd = [args.peer, "--url", url, "--slot", str(slot), "--inc", "0", "--seed", "7",
               "--stop-file", stop_file, "--count", "1021", "--diverge-pct", "0",
               "--timeout-ms", str(int(20000 * scale)), "--max-s", str(int(120 * scale))]
        if args.phase == "optimize":
            cmd += ["--optimize-every", "4"]
        out = open(os.path.join(work, f"peer{slot}.out"), "w")
        peers[slot] = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
        procs.append(peers[slot])

    def lines(slot):
        with open(os.path.join(work, f"peer{slot}.out"), errors="replace") as f:
            return [l.split() for l in f if re.match(r"^\d+ ", l)]

    def wait_for(pred, seconds):
        t_end = time.monotonic() + seconds * scale
        while time.monotonic() < t_end:
            if pred():
                return True
            time.sleep(0.02)
        return pred()

    try:
        line = master.stdout.readline().decode()
        if not line.startswith("PORT "):
            fail(f"master did not report its port: {line!r}")
            return finish(failures, work, args)
        url = f"tcp://127.0.0.1:{int(line.split()[1])}"
        threading.Thread(target=pump, daemon=True).start()
        for slot in range(4):
            start_peer(slot)
        if not wait_for(lambda: all(any(w[1] == "R" for w in lines(s)) for s in range(4)), 20):
            fail("the four peers did not all complete an all-reduce")
            return finish(failures, work, args)
        armed.set()
        if args.phase == "admit":
            start_peer(4)
        if not fired.wait(20 * scale):
            fail(f"the master never logged '{trigger}'")
            return finish(failures, work, args)
        t_stop = stop_at[0]
        print(f"hang_phase: peer 1 stopped right after '{trigger}'", flush=True)
        if args.phase == "optimize":
            start_peer(4)
        # Every survivor's next call returns within evict_ms + 2 s.
        wait_for(lambda: all(any(int(w[0]) > t_stop for w in lines(s)) for s in (0, 2, 3)),
                 (bound_ms + 1000) / 1000.0)
        for s in (0, 2, 3):
            after = [w for w in lines(s) if int(w[0]) > t_stop]
            if not after:
                fail(f"peer {s}: no call returned within {bound_ms + 1000} ms of the stop")
                continue
            dt = int(after[0][0]) - t_stop
            print(f"hang_phase: peer {s}: next call returned after {dt} ms "
                  f"({' '.join(after[0][1:3])})", flush=True)
            if dt > bound_ms * scale:
                fail(f"peer {s}: next call returned {dt} ms after the stop (bound {bound_ms} ms)")
        # Progress: the survivors and the newcomer complete exact all-reduces.
        if not wait_for(lambda: all(any(w[1] == "R" and int(w[0]) > t_stop for w in lines(s))
                                    for s in (0, 2, 3, 4)), 15):
            fail("the survivors and the newcomer did not all complete an all-reduce "
                 "after the stop")
        for s in (0, 2, 3, 4):
            bad = [w for w in lines(s) if w[1] in ("WRONG", "HANG", "UNEXPECTED")]
            if bad:
                fail(f"peer {s}: {' '.join(bad[0][1:])}")
        open(stop_file, "w").close()
        for s in (0, 2, 3, 4):
            try:
                rc = peers[s].wait(timeout=20 * scale)
            except subprocess.TimeoutExpired:
                fail(f"peer {s} did not stop")
                continue
            if rc != 0:
                fail(f"peer {s} exited {rc}")
    finally:
        stop_all(procs)
    return finish(failures, work, args)


def finish(failures, work, args):
    if failures:
        for n in sorted(os.listdir(work)):
            if n.endswith(".out") or n.endswith(".log"):
                with open(os.path.join(work, n), errors="replace") as f:
                    ls = f.readlines()
                print(f"--- {n}: last 25 of {len(ls)} lines")
                for l in ls[-25:]:
                    print("    " + l.rstrip())
    if args.keep or failures:
        print(f"hang_phase: logs in {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    print("hang_phase: " + ("FAILED" if failures else "ok"), flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
