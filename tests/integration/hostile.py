#!/usr/bin/env python3
"""Hostile networks: bounded resources (docs/runtime-tests.md, docs/security.md; label "hostile").

A ccoip_master (heartbeat 100 ms, eviction 1 s) and three itest_soak_peer processes on 127.0.0.1
train in a loop (update topology, sync, exact all-reduce); then one attack, bounded in count and
time, from this process:

  master-flood  a valid HELLO, then 14-byte PeerToMaster{call_id=n} frames as fast as the socket
                takes them, never reading the answers (6 s or 256 MB). The master's VmRSS must
                stay within 64 MB of what it was, and a fourth, honest peer must join and
                all-reduce afterwards.
  slow-reader   the same while reading 1 KiB of answers every 100 ms (a reader far slower than
                the answers it asks for).
  probe-flood   peer 0 runs with RLIMIT_NOFILE 256 (prlimit) and optimizes once (so it listens on
                its bandwidth-probe port); 1,100 idle sockets to that port for 12 s. Peer 0 may log
                at most 40 'accept failed' lines (no accept spin) and every peer must keep
                all-reducing.
  slowloris     on peer 0's p2p, shared-state and probe ports and on the master: 4 connections each that send
                nothing and 4 that send a byte per second (a frame header, never completed); one
                probe that sends its PROBE_REQUEST and then nothing. Every one must be closed by
                the remote within 5 s + 3 s (the probe: 10 s idle + 3 s), peer 0 must keep its
                communicator (no RECONNECT) and the peers keep all-reducing.
  max-peers     ccoip_master --max-peers 2000 must refuse to start (the connection table holds
                1,024 connections) with an error naming the bound.
  auth          an authenticated run (PCCL_RUN_TOKEN_FILE, docs/security.md): a peer with a wrong
                token and one with none fail their connect with pcclAuthenticationFailed (18); a
                client that knows the token joins by the HMAC handshake (this script computes
                it), and its Join replayed on another connection is refused (status 18, closed),
                as is a Join without a proof; a stranger on peer 0's p2p, shared-state and probe
                ports gets a CHALLENGE and is closed for a HELLO, a STATE_REQUEST or a
                PROBE_REQUEST without a valid proof, served nothing. The honest peers keep
                all-reducing exactly.
  tls-without-ca  a tls+tcp:// master with a certificate but no PCCL_TLS_CA must refuse to start
                (its listener would authenticate nobody) with an error naming PCCL_TLS_CA and
                PCCL_TLS_ALLOW_UNAUTHENTICATED, also with that variable 0; with it 1 the master
                starts and logs a WARN line, a peer without it refuses to listen (exit 2, connect
                result 3), and two peers with it all-reduce over tls+tcp:// (needs openssl).

Passes when the checks hold and every peer exits 0 at the end. Every wait is bounded; every child
is killed on exit.
"""
import argparse
import hashlib
import hmac
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

CTRL_MAGIC = b"CCoC"
DATA_MAGIC = b"CCoD"


def ctrl_frame(payload):
    return CTRL_MAGIC + struct.pack("<HBBI", 1, 1, 0, len(payload)) + payload


def varint(n):
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        out += bytes([b | (0x80 if n else 0)])
        if not n:
            return out


def hello_frame():
    hello = b"\x08\x01\x10\x01"  # Hello{min_version=1, max_version=1}
    return ctrl_frame(b"\x08\x01" + b"\x82\x01" + varint(len(hello)) + hello)


def data_header(kind, tag=0, offset=0, length=0):
    return (DATA_MAGIC + struct.pack("<HBB", 1, kind, 0) + struct.pack("<QQQ", 0, tag, 0)
            + struct.pack("<II", 0, 0) + struct.pack("<QQ", offset, length) + bytes(24))


def pb_fields(buf):
    """The top-level fields of a protobuf message: {number: [value, ...]} (varint or bytes)."""
    out, i = {}, 0
    while i < len(buf):
        key, i = read_varint(buf, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = read_varint(buf, i)
        elif wt == 2:
            n, i = read_varint(buf, i)
            v, i = buf[i:i + n], i + n
        elif wt == 1:
            v, i = buf[i:i + 8], i + 8
        elif wt == 5:
            v, i = buf[i:i + 4], i + 4
        else:
            raise ValueError(f"wire type {wt}")
        out.setdefault(num, []).append(v)
    return out


def read_varint(buf, i):
    v, shift = 0, 0
    while True:
        b = buf[i]
        i += 1
        v |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return v, i


def pb_bytes(num, data):
    return varint(num << 3 | 2) + varint(len(data)) + data


def auth_mac(key, label, a=b"", b=b"", vals=()):
    """The message layout of every proof (docs/protocol.md §8.0), HMAC-SHA-256."""
    m = label.encode() + b"\0" + bytes([len(a)]) + a + bytes([len(b)]) + b
    m += b"".join(struct.pack("<Q", v) for v in vals)
    return hmac.new(key, m, hashlib.sha256).digest()


def vmrss_kb(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def listening_ports(pid):
    """The TCP ports pid listens on, in the order its sockets were created (inode order)."""
    inodes = set()
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                t = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            m = re.match(r"socket:\[(\d+)\]", t)
            if m:
                inodes.add(int(m.group(1)))
    except OSError:
        return []
    found = []
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(name) as f:
                next(f)
                for line in f:
                    w = line.split()
                    if w[3] == "0A" and int(w[9]) in inodes:
                        found.append((int(w[9]), int(w[1].split(":")[1], 16)))
        except OSError:
            pass
    return [p for _, p in sorted(found)]


class Run:
    def __init__(self, args):
        self.args = args
        self.scale = float(os.environ.get("PCCL_SOAK_SCALE", "1"))
        self.work = tempfile.mkdtemp(prefix="pccl-hostile-")
        self.stop_file = os.path.join(self.work, "stop")
        self.env = dict(os.environ)
        self.env["PCCL_LOG_LEVEL"] = "INFO"
        # Under ASan freed memory waits in a quarantine (256 MB by default), which would count
        # as the master's RSS after a flood of short-lived frames: keep it small (no effect
        # without ASan).
        asan = self.env.get("ASAN_OPTIONS", "")
        self.env["ASAN_OPTIONS"] = (asan + ":" if asan else "") + "quarantine_size_mb=16"
        self.procs = []
        self.peers = {}
        self.failures = []
        self.url = None
        self.master = None

    def fail(self, msg):
        self.failures.append(msg)
        print(f"hostile: FAIL: {msg}", flush=True)

    def start_master(self, extra=(), listen="tcp://127.0.0.1:0"):
        log = open(os.path.join(self.work, "master.log"), "w")
        self.master = subprocess.Popen(
            [self.args.master, "--listen", listen, "--print-port", "--heartbeat-ms",
             "100", "--evict-ms", "1000", "--vote-timeout-ms", "30000", *extra],
            stdout=subprocess.PIPE, stderr=log, env=self.env)
        self.procs.append(self.master)
        line = self.master.stdout.readline().decode()
        if not line.startswith("PORT "):
            self.fail(f"master did not report its port: {line!r}")
            return False
        self.port = int(line.split()[1])
        self.url = f"{listen.split('://')[0]}://127.0.0.1:{self.port}"
        return True

    def start_peer(self, slot, prefix=(), extra=(), env=None):
        cmd = [*prefix, self.args.peer, "--url", self.url, "--slot", str(slot), "--inc", "0",
               "--seed", "7", "--stop-file", self.stop_file, "--count", "1021",
               "--diverge-pct", "0", "--timeout-ms", str(int(20000 * self.scale)),
               "--max-s", str(int(120 * self.scale)), *extra]
        out = open(os.path.join(self.work, f"peer{slot}.out"), "w")
        self.peers[slot] = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                            env=self.env if env is None else env)
        self.procs.append(self.peers[slot])

    def lines(self, slot):
        try:
            with open(os.path.join(self.work, f"peer{slot}.out"), errors="replace") as f:
                return [l.split() for l in f if re.match(r"^\d+ ", l)]
        except OSError:
            return []

    def count_in_log(self, name, pattern):
        try:
            with open(os.path.join(self.work, name), errors="replace") as f:
                return sum(1 for l in f if pattern in l)
        except OSError:
            return 0

    def wait_for(self, pred, seconds):
        t_end = time.monotonic() + seconds * self.scale
        while time.monotonic() < t_end:
            if pred():
                return True
            time.sleep(0.05)
        return pred()

    def allreduced_since(self, slots, t_ms):
        return all(any(w[1] == "R" and int(w[0]) > t_ms for w in self.lines(s)) for s in slots)

    def group_up(self, slots):
        if not self.wait_for(lambda: self.allreduced_since(slots, 0), 30):
            self.fail(f"peers {slots} did not all complete an all-reduce")
            return False
        return True

    def progress_after(self, slots, t_ms, what, seconds=20):
        if not self.wait_for(lambda: self.allreduced_since(slots, t_ms), seconds):
            late = [s for s in slots if not self.allreduced_since([s], t_ms)]
            self.fail(f"peers {late} made no progress (exact all-reduce) {what}")

    def finish_peers(self, slots):
        if self.master is not None and self.master.poll() is not None:
            self.fail(f"the master exited ({self.master.returncode}) during the test")
        for s in slots:
            bad = [w for w in self.lines(s) if w[1] in ("WRONG", "HANG", "UNEXPECTED")]
            if bad:
                self.fail(f"peer {s}: {' '.join(bad[0][1:])}")
        open(self.stop_file, "w").close()
        for s in slots:
            try:
                rc = self.peers[s].wait(timeout=30 * self.scale)
            except subprocess.TimeoutExpired:
                self.fail(f"peer {s} did not stop")
                continue
            if rc != 0:
                self.fail(f"peer {s} exited {rc}")

    def cleanup(self):
        for p in self.procs:
            if p.poll() is None:
                try:
                    p.kill()
                except OSError:
                    pass
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass

    def report(self):
        if self.failures:
            for n in sorted(os.listdir(self.work)):
                if n.endswith(".out") or n.endswith(".log"):
                    with open(os.path.join(self.work, n), errors="replace") as f:
                        ls = f.readlines()
                    print(f"--- {n}: last 20 of {len(ls)} lines")
                    for l in ls[-20:]:
                        print("    " + l.rstrip()[:300])
        if self.args.keep or self.failures:
            print(f"hostile: logs in {self.work}")
        else:
            shutil.rmtree(self.work, ignore_errors=True)
        print("hostile: " + ("FAILED" if self.failures else "ok"), flush=True)
        return 1 if self.failures else 0


def now_ms():
    return int(time.monotonic() * 1000)


def flood_master(run, rate_per_s, read_every_s, seconds, max_bytes):
    """HELLO, then PeerToMaster{call_id=n} frames (14 bytes each) without reading (or reading
    1 KiB every read_every_s). Returns (bytes sent, peak VmRSS kB, how it ended)."""
    s = socket.create_connection(("127.0.0.1", run.port), timeout=5)
    s.sendall(hello_frame())
    batch = b"".join(ctrl_frame(b"\x08" + bytes([1 + i % 127])) for i in range(4096))
    sent, peak, ended = 0, 0, "time"
    t0 = time.monotonic()
    next_read = t0 + (read_every_s or 0)
    s.settimeout(0.2)
    while time.monotonic() - t0 < seconds and sent < max_bytes:
        peak = max(peak, vmrss_kb(run.master.pid))
        try:
            n = s.send(batch)
            sent += n
        except socket.timeout:
            pass
        except OSError as e:
            ended = f"closed by the master ({e.__class__.__name__})"
            break
        if read_every_s and time.monotonic() >= next_read:
            next_read += read_every_s
            try:
                if not s.recv(1024):
                    ended = "closed by the master (end of stream)"
                    break
            except socket.timeout:
                pass
            except OSError as e:
                ended = f"closed by the master ({e.__class__.__name__})"
                break
        if rate_per_s:
            time.sleep(len(batch) / 14.0 / rate_per_s)
    for _ in range(10):  # what the master still holds once the flood stops
        peak = max(peak, vmrss_kb(run.master.pid))
        time.sleep(0.05)
    s.close()
    return sent, peak, ended


def attack_master(run, slow):
    if not run.start_master():
        return
    for slot in range(3):
        run.start_peer(slot)
    if not run.group_up([0, 1, 2]):
        return
    base = vmrss_kb(run.master.pid)
    t_attack = now_ms()
    if slow:
        sent, peak, ended = flood_master(run, 0, 0.1, 6 * run.scale, 256 << 20)
    else:
        sent, peak, ended = flood_master(run, 0, 0, 6 * run.scale, 256 << 20)
    grew = (peak - base) / 1024.0
    print(f"hostile: sent {sent / 1e6:.1f} MB of frames; master VmRSS {base / 1024.0:.1f} MB "
          f"before, peak {peak / 1024.0:.1f} MB (+{grew:.1f} MB); {ended}", flush=True)
    if grew > 64:
        run.fail(f"the master's VmRSS grew by {grew:.1f} MB under the flood (bound 64 MB)")
    if run.master.poll() is not None:
        run.fail(f"the master exited ({run.master.returncode})")
        return
    run.progress_after([0, 1, 2], t_attack, "after the flood")
    t_join = now_ms()
    run.start_peer(3)
    run.progress_after([3], t_join, "(a peer joining after the flood)", 30)
    run.finish_peers([0, 1, 2, 3])


def attack_probe_flood(run):
    if not run.start_master():
        return
    if shutil.which("prlimit") is None:
        print("hostile: prlimit not found: skipped")
        return
    opt = ("--optimize-every", "1000000")  # optimizes once (revision 0): the probe port opens
    run.start_peer(0, prefix=("prlimit", "--nofile=256:256", "--"), extra=opt)
    run.start_peer(1, extra=opt)
    run.start_peer(2, extra=opt)
    if not run.group_up([0, 1, 2]):
        return
    victim = run.peers[0].pid
    # prlimit execs the peer: same pid. Its third listener (creation order) is the probe port.
    if not run.wait_for(lambda: len(listening_ports(victim)) >= 3, 20):
        run.fail(f"peer 0 does not listen on its probe port: {listening_ports(victim)}")
        return
    port = listening_ports(victim)[-1]
    before = run.count_in_log("peer0.out", "accept failed")
    t_attack = now_ms()
    socks = []
    for _ in range(1100):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        try:
            s.connect(("127.0.0.1", port))
        except (BlockingIOError, InterruptedError):
            pass
        except OSError:
            s.close()
            continue
        socks.append(s)
    print(f"hostile: {len(socks)} idle sockets to peer 0's probe port {port}", flush=True)
    time.sleep(12 * run.scale)
    spins = run.count_in_log("peer0.out", "accept failed") - before
    print(f"hostile: peer 0 logged {spins} 'accept failed' lines in 12 s", flush=True)
    if spins > 40:
        run.fail(f"peer 0 logged {spins} 'accept failed' lines (accept spin; bound 40)")
    if run.peers[0].poll() is not None:
        run.fail(f"peer 0 exited ({run.peers[0].returncode}) under the flood")
    run.progress_after([0, 1, 2], t_attack + 2000, "during the flood", 5)
    for s in socks:
        s.close()
    run.progress_after([0, 1, 2], now_ms(), "after the flood")
    run.finish_peers([0, 1, 2])


def attack_slowloris(run):
    if not run.start_master():
        return
    for slot in range(3):
        run.start_peer(slot, extra=("--optimize-every", "1000000"))
    if not run.group_up([0, 1, 2]):
        return
    victim = run.peers[0].pid
    if not run.wait_for(lambda: len(listening_ports(victim)) >= 3, 20):
        run.fail(f"peer 0 does not listen on 3 ports: {listening_ports(victim)}")
        return
    ports = listening_ports(victim)
    # Listeners in creation order: p2p, shared state, bandwidth probe. On the p2p port silent
    # connections fill the incoming-link slots; a newcomer displaces the one waiting longest
    # for its HELLO (docs/security.md, admission), so the ring's links stay and a re-wire's
    # predecessor still gets in.
    targets = [("master", run.port), ("peer 0 p2p port", ports[0]),
               ("peer 0 shared-state port", ports[1]), ("peer 0 probe port", ports[2])]
    conns = []  # (what, socket, trickle bytes, bound s)
    for what, port in targets:
        trickle = hello_frame() if what == "master" else data_header(1)
        for i in range(8):  # fewer than the probe port's cap (16): all accepted at once
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            s.setblocking(False)
            conns.append([f"{what} ({'silent' if i < 4 else 'a byte per second'})", s,
                          b"" if i < 4 else trickle, 8.0])
    # A probe that asks for 1 MiB and then sends nothing (the probe port: the last listener).
    s = socket.create_connection(("127.0.0.1", ports[-1]), timeout=5)
    s.sendall(data_header(7, tag=1, offset=1 << 20))
    s.setblocking(False)
    conns.append(["peer 0 probe port (PROBE_REQUEST, then silent)", s, b"", 13.0])
    t0 = time.monotonic()
    t_attack = now_ms()
    closed_at = {}
    sent = [0] * len(conns)
    while time.monotonic() - t0 < 16 * run.scale and len(closed_at) < len(conns):
        el = time.monotonic() - t0
        for i, (what, s, trickle, bound) in enumerate(conns):
            if i in closed_at:
                continue
            try:
                if s.recv(4096) == b"":
                    closed_at[i] = el
                    continue
            except BlockingIOError:
                pass
            except OSError:
                closed_at[i] = el
                continue
            if trickle and sent[i] < min(len(trickle) - 1, int(el) + 1):
                try:
                    s.send(trickle[sent[i]:sent[i] + 1])
                    sent[i] += 1
                except OSError:
                    closed_at[i] = el
        time.sleep(0.05)
    worst = {}
    for i, (what, s, trickle, bound) in enumerate(conns):
        t = closed_at.get(i)
        if t is None or t > bound * run.scale:
            worst.setdefault(what, t)
        s.close()
    for what, t in worst.items():
        run.fail(f"{what}: still open after {16 * run.scale:.0f} s" if t is None
                 else f"{what}: closed only after {t:.1f} s")
    print(f"hostile: {len(closed_at)} of {len(conns)} slow connections closed by the remote, "
          f"the last after {max(closed_at.values(), default=0):.1f} s", flush=True)
    run.progress_after([0, 1, 2], t_attack, "during and after the slowloris")
    if any(w[1] == "RECONNECT" and int(w[0]) > t_attack for w in run.lines(0)):
        run.fail("peer 0 lost its master connection during the slowloris (RECONNECT)")
    run.finish_peers([0, 1, 2])


def read_frame(s, seconds):
    """One control frame's payload, or None when the remote closed (or nothing came)."""
    s.settimeout(seconds)
    buf = b""
    try:
        while len(buf) < 12:
            c = s.recv(12 - len(buf))
            if not c:
                return None
            buf += c
        n = struct.unpack("<I", buf[8:12])[0]
        body = b""
        while len(body) < n:
            c = s.recv(n - len(body))
            if not c:
                return None
            body += c
        return body
    except OSError:
        return None


def closed_by_remote(s, seconds):
    """True when the remote closes s within seconds; what it sent meanwhile is returned too."""
    s.settimeout(0.2)
    got, t_end = b"", time.monotonic() + seconds
    while time.monotonic() < t_end:
        try:
            c = s.recv(4096)
        except socket.timeout:
            continue
        except OSError:
            return True, got
        if not c:
            return True, got
        got += c
    return False, got


def master_handshake(run, run_key, nonce):
    """Connects and says Hello with nonce; returns (socket, peer id, master nonce, proof ok)."""
    s = socket.create_connection(("127.0.0.1", run.port), timeout=5)
    hello = b"\x08\x01\x10\x01" + pb_bytes(4, nonce)
    s.sendall(ctrl_frame(b"\x08\x01" + pb_bytes(16, hello)))
    env = pb_fields(read_frame(s, 5) or b"")
    hr = pb_fields(env.get(16, [b""])[0])
    pid, mnonce = hr.get(2, [0])[0], hr.get(8, [b""])[0]
    ok = hr.get(9, [b""])[0] == auth_mac(run_key, "pccl master proof", nonce, mnonce, (pid,))
    return s, pid, mnonce, ok


def join_frame(proof):
    join = pb_bytes(2, b"\x18\x01")  # endpoints { kind: P2P, port: 1 }
    if proof is not None:
        join += pb_bytes(4, proof)
    return ctrl_frame(b"\x08\x02" + pb_bytes(17, join))


def join_answer(s):
    """(status, closed) of the answer to a Join."""
    env = pb_fields(read_frame(s, 5) or b"")
    closed, _ = closed_by_remote(s, 3) if env.get(3, [0])[0] != 0 else (False, b"")
    return env.get(3, [0])[0], closed


def attack_auth(run):
    token = os.path.join(run.work, "run.token")
    with open(token, "w") as f:
        f.write(os.urandom(32).hex() + "\n")
    os.chmod(token, 0o600)
    with open(token, "rb") as f:
        run_key = hashlib.sha256(f.read().strip()).digest()
    run.env["PCCL_RUN_TOKEN_FILE"] = token
    if not run.start_master():
        return
    for slot in range(3):
        run.start_peer(slot, extra=("--optimize-every", "1000000"))
    if not run.group_up([0, 1, 2]):
        return
    t_attack = now_ms()
    # Peers with a wrong token and with none: pcclConnect fails with pcclAuthenticationFailed.
    wrong = os.path.join(run.work, "wrong.token")
    with open(wrong, "w") as f:
        f.write(os.urandom(32).hex())
    os.chmod(wrong, 0o600)
    good_env = run.env
    for slot, env in ((3, dict(good_env, PCCL_RUN_TOKEN_FILE=wrong)),
                      (4, {k: v for k, v in good_env.items() if k != "PCCL_RUN_TOKEN_FILE"})):
        run.env = env
        run.start_peer(slot)
        run.env = good_env
        try:
            rc = run.peers[slot].wait(timeout=20 * run.scale)
        except subprocess.TimeoutExpired:
            run.fail(f"peer {slot} ({'wrong' if slot == 3 else 'no'} token) did not give up")
            continue
        fails = [w for w in run.lines(slot) if w[1] == "F"]
        print(f"hostile: peer {slot} ({'wrong' if slot == 3 else 'no'} token) exited {rc}: "
              f"{[' '.join(w[1:]) for w in fails]}", flush=True)
        if rc == 0 or not any(w[2:4] == ["connect", "18"] for w in fails):
            run.fail(f"peer {slot}: connect did not fail with pcclAuthenticationFailed (18)")
    # A client that knows the token joins; its Join replayed on another session is refused.
    s1, pid1, mn1, ok = master_handshake(run, run_key, os.urandom(16))
    if not ok:
        run.fail("the master's HelloResult proof is not the run key's")
    n1 = os.urandom(16)
    s1.close()
    s1, pid1, mn1, ok = master_handshake(run, run_key, n1)
    legit = join_frame(auth_mac(run_key, "pccl peer proof", mn1, n1, (pid1,)))
    s1.sendall(legit)
    st, _ = join_answer(s1)
    if st != 0:
        run.fail(f"a Join with the run key's proof was refused (status {st})")
    s1.sendall(ctrl_frame(b"\xea\x01\x00"))  # Leave: this client never trains
    s1.close()
    s2, _, _, _ = master_handshake(run, run_key, os.urandom(16))
    s2.sendall(legit)
    st, closed = join_answer(s2)
    print(f"hostile: replayed Join: status {st}, closed {closed}", flush=True)
    if st != 18 or not closed:
        run.fail(f"a replayed Join was not refused (status {st}, closed {closed})")
    s2.close()
    s3 = socket.create_connection(("127.0.0.1", run.port), timeout=5)
    s3.sendall(hello_frame())
    read_frame(s3, 5)
    s3.sendall(join_frame(None))
    st, closed = join_answer(s3)
    if st != 18 or not closed:
        run.fail(f"a Join without a proof was not refused (status {st}, closed {closed})")
    s3.close()
    # A stranger on peer 0's ports: a CHALLENGE first, then closed for an unproven request.
    victim = run.peers[0].pid
    if not run.wait_for(lambda: len(listening_ports(victim)) >= 3, 20):
        run.fail(f"peer 0 does not listen on 3 ports: {listening_ports(victim)}")
        return
    ports = listening_ports(victim)
    hello = data_header(1, tag=1, length=32)[:80] + os.urandom(32)
    request = data_header(4, tag=1, length=2) + b"\x08\x01"  # SharedStateRequest{revision 1}
    probe = data_header(7, tag=1, offset=1 << 20)
    for what, port, frame, refuse in (("p2p", ports[0], hello, b""),
                                      ("shared-state", ports[1], request, b"CCoD"),
                                      ("probe", ports[2], probe, b"CCoD")):
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        s.settimeout(5)
        try:
            ch = s.recv(80)
        except OSError:
            ch = b""
        if len(ch) < 80 or ch[:4] != DATA_MAGIC or ch[6] != 11:
            run.fail(f"peer 0's {what} port sent no CHALLENGE ({ch[:8]!r})")
        s.sendall(frame)
        closed, got = closed_by_remote(s, 3)
        print(f"hostile: {what} port: CHALLENGE, then closed {closed} after an unproven "
              f"request ({len(got)} bytes served)", flush=True)
        if not closed or (refuse and refuse in got):
            run.fail(f"peer 0's {what} port served or kept a stranger without a proof")
        s.close()
    run.progress_after([0, 1, 2], t_attack, "during and after the authentication attacks")
    run.finish_peers([0, 1, 2])


def attack_max_peers(run):
    p = subprocess.Popen([run.args.master, "--listen", "tcp://127.0.0.1:0", "--print-port",
                          "--max-peers", "2000"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=run.env)
    run.procs.append(p)
    try:
        out, err = p.communicate(timeout=5)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        run.fail("ccoip_master --max-peers 2000 started (it must refuse: 1,024 table slots)")
        return
    err = err.decode(errors="replace")
    print(f"hostile: ccoip_master --max-peers 2000 exited {p.returncode}: {err.strip()}")
    if p.returncode == 0 or b"PORT" in out:
        run.fail("ccoip_master --max-peers 2000 was accepted")
    elif "960" not in err:
        run.fail(f"the error does not name the bound (960): {err!r}")


def make_cert(work):
    """A self-signed P-256 certificate for DNS:localhost and its key (PEM files), or None when
    openssl is missing."""
    if shutil.which("openssl") is None:
        return None
    pem, key = os.path.join(work, "cert.pem"), os.path.join(work, "cert.key")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=DNS:localhost", "-keyout", key, "-out", pem],
                   check=True, capture_output=True)
    return pem, key


def attack_tls_without_ca(run):
    cert = make_cert(run.work)
    if cert is None:
        print("hostile: openssl not found: skipped")
        return
    for v in ("PCCL_TLS_CA", "PCCL_TLS_ALLOW_UNAUTHENTICATED", "PCCL_TLS_P2P"):
        run.env.pop(v, None)
    run.env["PCCL_TLS_CERT"], run.env["PCCL_TLS_KEY"] = cert
    listen = "tls+tcp://127.0.0.1:0"
    for value in (None, "0"):  # no CA, no opt-in (or not "1"): refused at once
        env = dict(run.env)
        what = "PCCL_TLS_ALLOW_UNAUTHENTICATED unset"
        if value is not None:
            env["PCCL_TLS_ALLOW_UNAUTHENTICATED"] = value
            what = f"PCCL_TLS_ALLOW_UNAUTHENTICATED={value}"
        p = subprocess.Popen([run.args.master, "--listen", listen, "--print-port"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        run.procs.append(p)
        try:
            out, err = p.communicate(timeout=5 * run.scale)
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()
            run.fail(f"a tls+ master without PCCL_TLS_CA started ({what})")
            continue
        err = err.decode(errors="replace")
        print(f"hostile: tls+ master without a CA, {what}: exit {p.returncode}: "
              f"{err.strip().splitlines()[0] if err.strip() else ''}", flush=True)
        if p.returncode == 0 or b"PORT" in out:
            run.fail(f"a tls+ master without PCCL_TLS_CA was accepted ({what})")
        elif "PCCL_TLS_CA" not in err or "PCCL_TLS_ALLOW_UNAUTHENTICATED" not in err:
            run.fail(f"the error names neither PCCL_TLS_CA nor the opt-in: {err!r}")
    run.env["PCCL_TLS_ALLOW_UNAUTHENTICATED"] = "1"
    if not run.start_master(listen=listen):
        return
    if run.count_in_log("master.log", "nobody is authenticated") != 1:
        run.fail("the opted-in master logged no WARN line saying nobody is authenticated")
    # A peer of this master listens on tls+tcp:// too: without the opt-in it refuses.
    env = dict(run.env)
    del env["PCCL_TLS_ALLOW_UNAUTHENTICATED"]
    run.start_peer(9, env=env)
    try:
        rc = run.peers[9].wait(timeout=20 * run.scale)
    except subprocess.TimeoutExpired:
        rc = None
    refused = run.count_in_log("peer9.out", "refusing to listen") > 0
    if rc != 2 or not any(w[1:3] == ["F", "connect"] and w[3] == "3" for w in run.lines(9)) \
            or not refused:
        run.fail(f"a peer without the opt-in did not refuse (exit {rc}, 'refusing to listen' "
                 f"logged: {refused})")
    else:
        print("hostile: a peer without the opt-in refused to listen (exit 2, connect result 3)")
    for slot in (0, 1):
        run.start_peer(slot)
    if run.group_up([0, 1]):
        if run.count_in_log("peer0.out", "nobody is authenticated") != 1:
            run.fail("an opted-in peer logged no WARN line saying nobody is authenticated")
        print("hostile: opted in: the master and two peers all-reduce over tls+tcp://", flush=True)
        run.finish_peers([0, 1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--master", required=True)
    ap.add_argument("--peer", required=True)
    ap.add_argument("--attack", required=True,
                    choices=("master-flood", "slow-reader", "probe-flood", "slowloris",
                             "max-peers", "auth", "tls-without-ca"))
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    run = Run(args)
    try:
        if args.attack == "master-flood":
            attack_master(run, slow=False)
        elif args.attack == "slow-reader":
            attack_master(run, slow=True)
        elif args.attack == "probe-flood":
            attack_probe_flood(run)
        elif args.attack == "slowloris":
            attack_slowloris(run)
        elif args.attack == "auth":
            attack_auth(run)
        elif args.attack == "tls-without-ca":
            attack_tls_without_ca(run)
        else:
            attack_max_peers(run)
    finally:
        run.cleanup()
    return run.report()


if __name__ == "__main__":
    sys.exit(main())
