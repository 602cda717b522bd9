#!/usr/bin/env python3
"""Churn soak test: a ccoip_master and N itest_soak_peer processes on 127.0.0.1.

For --seconds (default 60, env PCCL_SOAK_SECONDS) a controller driven by a
seeded RNG (--seed, env PCCL_SOAK_SEED, else the clock; always printed) picks
random peers and SIGKILLs them (restarted after 0-2 s), or SIGSTOPs them for
0.2-3 s (then SIGCONT, or SIGKILL and a restart), or SIGSTOPs them for good
(a hung machine: never resumed, SIGKILLed at the end; a new process takes its
slot after 0.5-2 s), keeping at least two peers
running, two of them holding the newest revision (the state lives only in
the peers). The peers loop: update topology, sync shared state, exact all-reduce,
revision + 1 (itest_soak_peer.c). Then a calm phase: every peer running,
until every live peer has completed a common revision well past the churn.

Fails (exit 1) on: any wrong all-reduce result (a peer's own exact check);
two different (world size, contribution sum) pairs for one revision, or two
peers entering one revision's all-reduce with different shared state (the
hash of their last sync); a running (not stopped) peer without
output for --hang-s seconds, a call returning pcclTimeout, a peer exiting on
its own; no revision completed for --hang-s seconds; no all-reduce completed
within evict (1 s) + 2 s + 3 s of a peer stopped for good (a phase waiting on
the hung member); unexpected result codes;
the calm phase or the stop exceeding their bounds; the master not exiting 0
on SIGTERM. Everything is bounded; every child is killed on exit.

Under sanitizers set PCCL_SOAK_SCALE (e.g. 3) to stretch the time bounds.
"""
import argparse
import collections
import os
import random
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time


def now_ms():
    return int(time.monotonic() * 1000)


class Peer:
    def __init__(self, slot):
        self.slot = slot
        self.inc = -1
        self.proc = None
        self.state = "dead"  # running | stopped | dead
        self.resume_at = None  # stopped: when to act; dead: when to restart
        self.resume_kill = False
        self.out_path = None
        self.last_size = 0
        self.last_change = 0.0


def stop_all(procs):
    """Kills every process still running (resuming a stopped one first) and reaps them all."""
    for p in procs:
        if p.poll() is None:
            try:
                p.send_signal(signal.SIGCONT)
                p.kill()
            except OSError:
                pass
    for p in procs:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--master", required=True)
    ap.add_argument("--peer", required=True)
    ap.add_argument("--peers", type=int, default=5)
    ap.add_argument("--seconds", type=float,
                    default=float(os.environ.get("PCCL_SOAK_SECONDS", "60")))
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--count", type=int, default=50021)
    ap.add_argument("--hang-s", type=float, default=20.0)
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    ap.add_argument("--canary", action="store_true",
                    help="peers corrupt their state after some syncs (--corrupt-permille): "
                         "pass only if the divergence check reports it")
    ap.add_argument("--auth", action="store_true",
                    help="an authenticated run: master and peers share a run token "
                         "(PCCL_RUN_TOKEN_FILE, docs/security.md); no member may ever fail "
                         "authentication")
    ap.add_argument("--corrupt-permille", type=int, default=20,
                    help="canary: per-mille of syncs after which a peer corrupts its state")
    args = ap.parse_args()
    scale = float(os.environ.get("PCCL_SOAK_SCALE", "1"))
    seed = args.seed
    if seed is None:
        seed = int(os.environ.get("PCCL_SOAK_SEED", "0")) or (int(time.time() * 1000) % 1000000007)
    print(f"soak: seed {seed} (rerun with PCCL_SOAK_SEED={seed}), {args.peers} peers, "
          f"{args.seconds:.0f} s of churn, scale {scale}", flush=True)
    rng = random.Random(seed)
    hang_s = args.hang_s * scale
    timeout_ms = int(30000 * scale)
    work = tempfile.mkdtemp(prefix="pccl-soak-")
    stop_file = os.path.join(work, "stop")
    env = dict(os.environ)
    env.setdefault("PCCL_LOG_LEVEL", "INFO")
    if args.auth:
        token = os.path.join(work, "run.token")
        with open(token, "w") as f:
            f.write(random.Random(seed).randbytes(32).hex() + "\n")
        os.chmod(token, 0o600)
        env["PCCL_RUN_TOKEN_FILE"] = token
    procs = []
    t0 = time.monotonic()
    failures = []

    def fail(msg):
        failures.append(msg)
        print(f"soak: FAIL: {msg}", flush=True)

    master = subprocess.Popen(
        [args.master, "--listen", "tcp://127.0.0.1:0", "--print-port", "--heartbeat-ms", "100",
         "--evict-ms", "1000", "--vote-timeout-ms", "10000"],
        stdout=subprocess.PIPE, stderr=open(os.path.join(work, "master.log"), "w"), env=env)
    procs.append(master)
    peers = [Peer(i) for i in range(args.peers)]
    counts = collections.Counter()
    hung = []  # processes stopped for good (never resumed; SIGKILLed at the end)
    hang_checks = []  # monotonic times of those stops: an all-reduce must complete after each
    # evict_ms (1 s) + 2 s, plus 3 s for a temporary stop (up to 3 s) overlapping it.
    hang_progress_s = (1.0 + 2.0 + 3.0) * scale

    def cleanup():
        stop_all(procs)

    def dump_logs():
        names = sorted(os.listdir(work))
        for n in names:
            if not (n.endswith(".out") or n.endswith(".log")):
                continue
            path = os.path.join(work, n)
            with open(path, errors="replace") as f:
                lines = f.readlines()
            interesting = [l for l in lines if any(k in l for k in
                           ("WRONG", "HANG", "UNEXPECTED", "ERROR", "ASan", "runtime error",
                            "AddressSanitizer", "ThreadSanitizer"))]
            print(f"--- {n}: {len(lines)} lines; last 15 (+ {len(interesting)} flagged):")
            for l in interesting[:20] + lines[-15:]:
                print("    " + l.rstrip())

    try:
        line = ""
        if select.select([master.stdout], [], [], 10 * scale)[0]:
            line = master.stdout.readline().decode()
        if not line.startswith("PORT "):
            fail(f"master did not report its port: {line!r}")
            return finish(failures, work, args, dump_logs)
        url = f"tcp://127.0.0.1:{int(line.split()[1])}"

        def start(p):
            p.inc += 1
            p.out_path = os.path.join(work, f"peer{p.slot}.{p.inc}.out")
            cmd = [args.peer, "--url", url, "--slot", str(p.slot), "--inc", str(p.inc),
                   "--seed", str(seed), "--stop-file", stop_file, "--count", str(args.count),
                   "--timeout-ms", str(timeout_ms),
                   "--max-s", str(int(args.seconds + 120 * scale + 60))]
            if args.canary:
                cmd += ["--corrupt-permille", str(args.corrupt_permille)]
            p.proc = subprocess.Popen(
                cmd, stdout=open(p.out_path, "w"),
                stderr=open(os.path.join(work, f"peer{p.slot}.{p.inc}.log"), "w"), env=env)
            procs.append(p.proc)
            p.state = "running"
            p.last_size = 0
            p.last_change = time.monotonic()
            counts["start"] += 1

        def running():
            return [p for p in peers if p.state == "running"]

        def check_alive(now):
            """A running peer must not exit by itself nor stay silent."""
            for p in peers:
                if p.state == "dead":
                    continue
                rc = p.proc.poll()
                if rc is not None:
                    fail(f"peer {p.slot}.{p.inc} exited by itself with {rc}")
                    p.state = "dead"
                    p.resume_at = None
                    continue
                if p.state != "running":
                    continue
                size = os.path.getsize(p.out_path)
                if size != p.last_size:
                    p.last_size = size
                    p.last_change = now
                elif now - p.last_change > hang_s:
                    fail(f"peer {p.slot}.{p.inc} silent for {now - p.last_change:.1f} s")
                    p.last_change = now

        for p in peers:
            start(p)
        churn_end = time.monotonic() + args.seconds
        next_action = time.monotonic() + 2.0 * scale
        last_progress = (time.monotonic(), -1)
        while time.monotonic() < churn_end and not failures:
            time.sleep(0.05)
            now = time.monotonic()
            check_alive(now)
            # Scheduled resumptions and restarts.
            for p in peers:
                if p.resume_at is None or now < p.resume_at:
                    continue
                p.resume_at = None
                if p.state == "stopped":
                    if p.resume_kill:
                        p.proc.kill()
                        p.proc.wait()
                        p.state = "dead"
                        p.resume_at = now + rng.uniform(0.0, 1.0)
                        counts["kill-stopped"] += 1
                    else:
                        p.proc.send_signal(signal.SIGCONT)
                        p.state = "running"
                        p.last_change = now
                        counts["cont"] += 1
                elif p.state == "dead":
                    start(p)
            # Global progress: some revision must complete now and then.
            best = max_revision(peers)
            for t in list(hang_checks):
                if any(getattr(p, "r_time", 0) > t * 1000 for p in peers):
                    hang_checks.remove(t)
                elif now - t > hang_progress_s:
                    fail(f"no all-reduce completed within {hang_progress_s:.1f} s of a peer "
                         f"stopped for good")
                    hang_checks.remove(t)
            if best > last_progress[1]:
                last_progress = (now, best)
            elif now - last_progress[0] > hang_s:
                fail(f"no revision completed for {now - last_progress[0]:.1f} s (last {best})")
            if now < next_action:
                continue
            next_action = now + rng.uniform(0.3, 1.5) * scale
            # The shared state lives only in the peers: killing or stopping
            # every peer that holds the newest revision would legitimately
            # restart the run from an older one (and a stopped holder, once
            # continued, would then be ahead: REVISION_INCREMENT_VIOLATION).
            # So at least two up-to-date peers (running, last all-reduce at
            # the newest revision or the one before) always stay untouched.
            live = running()
            fresh = [p for p in live if last_r(p) >= last_progress[1] - 1]
            candidates = [p for p in live if p not in fresh or len(fresh) > 2]
            if len(live) <= 2 or not candidates:
                continue
            victim = rng.choice(candidates)
            what = rng.random()
            if what < 0.45:
                victim.proc.kill()
                victim.proc.wait()
                victim.state = "dead"
                victim.resume_at = now + rng.uniform(0.0, 2.0) * scale
                counts["kill"] += 1
            elif what < 0.85 and rng.random() < 0.2:
                # A hung machine: stopped for good; a new process takes the slot later.
                victim.proc.send_signal(signal.SIGSTOP)
                hung.append(victim.proc)
                hang_checks.append(now)
                victim.state = "dead"
                victim.resume_at = now + rng.uniform(0.5, 2.0) * scale
                counts["stop-forever"] += 1
            elif what < 0.85:
                victim.proc.send_signal(signal.SIGSTOP)
                victim.state = "stopped"
                victim.resume_at = now + rng.uniform(0.2, 3.0) * scale
                victim.resume_kill = rng.random() < 0.3
                counts["stop"] += 1
            else:
                counts["idle"] += 1
        churn_rev = max_revision(peers)
        print(f"soak: churn over after {time.monotonic() - t0:.1f} s at revision {churn_rev}: "
              + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())), flush=True)
        # Calm phase: every peer running, until each has completed a revision
        # >= churn_rev + 3 (all of them the same, checked below).
        for p in peers:
            if p.state == "stopped":
                p.proc.send_signal(signal.SIGCONT)
                p.state = "running"
                p.last_change = time.monotonic()
            elif p.state == "dead":
                start(p)
            p.resume_at = None
        target = churn_rev + 3
        calm_deadline = time.monotonic() + 30 * scale + 10
        while not failures:
            time.sleep(0.05)
            check_alive(time.monotonic())
            done = [last_r(p) >= target for p in peers]
            if all(done):
                break
            if time.monotonic() > calm_deadline:
                fail("calm phase: not every peer reached revision %d: %s" % (
                    target, [(p.slot, last_r(p)) for p in peers]))
        # The hung processes never resumed: killed now.
        for h in hung:
            h.kill()
            h.wait()
        # Stop: each peer leaves its loop at the stop file and exits 0.
        open(stop_file, "w").close()
        stop_deadline = time.monotonic() + 20 * scale + 5
        for p in peers:
            if p.state == "dead":
                continue
            try:
                rc = p.proc.wait(timeout=max(0.1, stop_deadline - time.monotonic()))
                if rc != 0:
                    fail(f"peer {p.slot}.{p.inc} exited {rc} after the stop file")
            except subprocess.TimeoutExpired:
                fail(f"peer {p.slot}.{p.inc} did not exit after the stop file")
        master.send_signal(signal.SIGTERM)
        try:
            if master.wait(timeout=10 * scale) != 0:
                fail("master exited with an error after SIGTERM")
        except subprocess.TimeoutExpired:
            fail("master ignored SIGTERM")
        analyze(work, fail)
        if args.auth:
            check_auth(work, fail)
        print(f"soak: wall {time.monotonic() - t0:.1f} s", flush=True)
        return finish(failures, work, args, dump_logs)
    finally:
        cleanup()


def read_lines(path):
    try:
        with open(path, errors="replace") as f:
            return f.read().splitlines()
    except OSError:
        return []


def last_r(p):
    """The last revision p's current incarnation all-reduced (-1: none), read incrementally."""
    if getattr(p, "r_path", None) != p.out_path:
        p.r_path, p.r_pos, p.r_best, p.r_tail = p.out_path, 0, -1, ""
    try:
        with open(p.out_path, errors="replace") as f:
            f.seek(p.r_pos)
            chunk = f.read()
            p.r_pos = f.tell()
    except OSError:
        return p.r_best
    text = p.r_tail + chunk
    lines = text.split("\n")
    p.r_tail = lines.pop()
    for l in lines:
        f = l.split()
        if len(f) >= 3 and f[1] == "R":
            p.r_best = int(f[2])
            p.r_time = int(f[0])  # CLOCK_MONOTONIC ms, as time.monotonic()
    return p.r_best


def max_revision(peers):
    return max(last_r(p) for p in peers)


def check_auth(work, fail):
    """Authentication was on everywhere and no honest member ever failed it."""
    on = bad = 0
    for n in os.listdir(work):
        if not n.endswith(".log"):
            continue
        with open(os.path.join(work, n), errors="replace") as f:
            for l in f:
                on += "authenticated run" in l
                bad += "authentication" in l and "failed" in l
    print(f"soak: authentication on in {on} processes, {bad} authentication failures", flush=True)
    if on < 2:
        fail("the run was not authenticated")
    if bad:
        fail(f"{bad} authentication failures among honest members")


def analyze(work, fail):
    """Cross-peer checks over every incarnation's output.

    For each revision, every successful all-reduce must show the same (M, U)
    and every peer that completed it must have entered it with the same
    shared state: the hash its last sync printed. (Several sync rounds may
    run at one revision when an all-reduce fails, and a peer that perturbed
    its state before a re-sync may legitimately be elected then, so raw sync
    hashes of one revision may differ between rounds; the state a training
    step actually used may not.)
    """
    hashes = collections.defaultdict(set)
    synced = collections.defaultdict(set)
    reduces = collections.defaultdict(set)
    codes = collections.Counter()
    n_r = n_s = n_rx = n_reconnect = 0
    for n in sorted(os.listdir(work)):
        if not n.endswith(".out"):
            continue
        last_s = None
        for l in read_lines(os.path.join(work, n)):
            f = l.split()
            if len(f) < 2:
                continue
            tag = f[1]
            if tag == "S":
                last_s = (int(f[2]), f[3])
                synced[int(f[2])].add(f[3])
                n_s += 1
                n_rx += int(f[4]) > 0
            elif tag == "R":
                rev = int(f[2])
                reduces[rev].add((int(f[3]), int(f[4])))
                if last_s is None or last_s[0] != rev:
                    fail(f"{n}: all-reduce at revision {rev} without a sync at it: {l}")
                else:
                    hashes[rev].add(last_s[1])
                n_r += 1
            elif tag == "F":
                codes[f"{f[2]}:{f[3]}"] += 1
            elif tag == "RECONNECT":
                n_reconnect += 1
            elif tag in ("WRONG", "HANG", "UNEXPECTED"):
                fail(f"{n}: {l}")
    for rev, hs in sorted(hashes.items()):
        if len(hs) != 1:
            fail(f"revision {rev}: all-reduced from {len(hs)} different states {sorted(hs)}")
    for rev, ms in sorted(reduces.items()):
        if len(ms) != 1:
            fail(f"revision {rev}: different all-reduce results (M, U): {sorted(ms)}")
    resynced = sum(1 for hs in synced.values() if len(hs) > 1)
    print(f"soak: {len(reduces)} revisions, {n_r} exact all-reduces, {n_s} syncs "
          f"({n_rx} received state; {resynced} revisions re-elected a state after a failed "
          f"step), {n_reconnect} reconnects after eviction; failed calls (retried): "
          + (", ".join(f"{k} x{v}" for k, v in sorted(codes.items())) or "none"), flush=True)
    if len(reduces) < 10:
        fail(f"only {len(reduces)} revisions completed")


def finish(failures, work, args, dump_logs):
    if args.canary:
        caught = [f for f in failures if "different states" in f]
        print(f"soak: canary: {len(caught)} divergences caught, "
              f"{len(failures) - len(caught)} other failures")
        shutil.rmtree(work, ignore_errors=True)
        if caught and len(caught) == len(failures):
            print("soak: PASS (the canary's divergence was caught)")
            return 0
        print("soak: FAILED (the canary was not caught, or something else failed)")
        return 1
    if failures:
        dump_logs()
        print(f"soak: FAILED ({len(failures)} failures); logs in {work}")
        return 1
    print("soak: PASS")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    else:
        print(f"soak: logs in {work}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
