#!/usr/bin/env python3
"""The collective pages' examples (docs/collectives*.md, examples/collectives/).

(a) Every ```c block of docs/collectives*.md names its file on its first line
    ("/* examples/collectives/NAME.c...") and equals that file byte for byte;
    every examples/collectives/*.c is shown by exactly one block.
(b) Every example is compiled (C11, -Wall -Wextra -Wpedantic -Werror) against
    include/ and libpccl, then run as 2 and as 3 processes with a fresh
    ccoip_master on 127.0.0.1 (port 0), once with the master's default relay
    (these small ops go through the master, docs/protocol.md §6.8.3) and once
    with --relay-max-bytes 0 (the ring schedules); each process must exit 0
    and the printed lines, all processes together, must be exactly the
    expected ones (computed below from the world size).

  coll_examples.py --src SOURCE_DIR --cc CC --lib LIBPCCL_SO --master MASTER --out DIR

Every wait is bounded; every child is killed on exit. Exit 0 when all pass.
"""
import argparse
import glob
import os
import re
import subprocess
import sys
import time

BLOCK = re.compile(r"^```c\n(.*?)^```$", re.S | re.M)
NAME = re.compile(r"^/\* (examples/collectives/[a-z_]+\.c)")


def check_docs(src):
    errors = []
    shown = {}
    for md in sorted(glob.glob(os.path.join(src, "docs", "collectives*.md"))):
        text = open(md, encoding="utf-8").read()
        for block in BLOCK.findall(text):
            m = NAME.match(block)
            if not m:
                errors.append("%s: a ```c block that names no examples/collectives/ file: %r"
                              % (md, block[:60]))
                continue
            rel = m.group(1)
            path = os.path.join(src, rel)
            if rel in shown:
                errors.append("%s: shown twice (%s, %s)" % (rel, shown[rel], md))
            shown[rel] = md
            if not os.path.isfile(path):
                errors.append("%s: %s does not exist" % (md, rel))
            elif open(path, "rb").read() != block.encode("utf-8"):
                errors.append("%s: the block of %s differs from the file" % (md, rel))
    for path in sorted(glob.glob(os.path.join(src, "examples", "collectives", "*.c"))):
        rel = os.path.relpath(path, src)
        if rel not in shown:
            errors.append("%s is not shown in any docs/collectives*.md" % rel)
    return sorted(shown), errors


def expected(name, w):
    lines = []
    half = w * (w - 1) // 2
    for r in range(w):
        p = "rank %d/%d " % (r, w)
        gathered = " ".join("%d %d" % (10 * i, 10 * i + 1) for i in range(w))
        if name == "retry":
            lines.append(p + "all-gather: " + gathered)
        elif name == "rooted":
            root = w - 1
            lines.append(p + "broadcast: 100 101 102 103")
            if r == root:
                lines.append(p + "reduce: " + " ".join(str(10 * half + w * k) for k in range(4)))
                lines.append(p + "gather: " + gathered)
            lines.append(p + "scatter: %d %d" % (100 + 2 * r, 101 + 2 * r))
        elif name == "all":
            rs = " ".join(str(100 * half + w * j) for j in (2 * r, 2 * r + 1))
            a2a = " ".join(str(10 * i + r) for i in range(w))
            lines += [p + "all-gather: " + gathered, p + "all-gather in place: " + gathered,
                      p + "reduce-scatter: " + rs, p + "reduce-scatter in place: " + rs,
                      p + "all-to-all: " + a2a, p + "all-to-all in place: " + a2a]
        elif name == "barrier":
            lines += [p + "barrier passed",
                      p + "all-gather (tag 1): " + " ".join(str(i + 1) for i in range(w)),
                      p + "broadcast (tag 2): 42",
                      p + "all-gather (tag 3, timeout 500 ms): "
                      + ("skipped it" if r == w - 1 else "pcclTimeout")]
        elif name == "sendrecv":
            f = (r + w - 1) % w
            lines.append(p + "from rank %d: %d %d %d" % (f, 10 * f, 10 * f + 1, 10 * f + 2))
            if r == w - 1:
                lines.append(p + "from rank 0 (tag 7, 16 bytes): 7 8 9 10")
        else:
            return None
    return sorted(lines)


def kill_all(procs):
    for p in procs:
        if p.poll() is None:
            p.kill()
    for p in procs:
        try:
            p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass


def run(master_bin, exe, world, out, env, budget, relay):
    procs = []
    logs = []
    try:
        mlog = open(os.path.join(out, "master.log"), "w")
        logs.append(mlog)
        margs = [master_bin, "--listen", "tcp://127.0.0.1:0", "--print-port"]
        if relay != "default":
            margs += ["--relay-max-bytes", relay]
        master = subprocess.Popen(margs,
                                  stdout=subprocess.PIPE, stderr=mlog,
                                  env={k: v for k, v in env.items() if k != "LD_PRELOAD"})
        procs.append(master)
        port = None
        deadline = time.monotonic() + 10
        while port is None and time.monotonic() < deadline:
            line = master.stdout.readline().decode()
            if not line:
                break
            if line.startswith("PORT "):
                port = int(line.split()[1])
        if port is None:
            return None, "the master did not start"
        url = "tcp://127.0.0.1:%d" % port
        peers = []
        for i in range(world):
            o = open(os.path.join(out, "peer%d.out" % i), "w+")
            e = open(os.path.join(out, "peer%d.err" % i), "w+")
            logs += [o, e]
            p = subprocess.Popen([exe, url, str(world)], stdout=o, stderr=e, env=env)
            procs.append(p)
            peers.append((p, o, e))
        deadline = time.monotonic() + budget
        lines = []
        for i, (p, o, e) in enumerate(peers):
            try:
                rc = p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                return None, "process %d still runs after %.0f s" % (i, budget)
            o.seek(0)
            lines += o.read().splitlines()
            if rc != 0:
                e.seek(0)
                return None, "process %d exited with %d: %s" % (i, rc, e.read()[-2000:])
        return sorted(lines), None
    finally:
        kill_all(procs)
        for f in logs:
            f.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--src", required=True)
    ap.add_argument("--cc", default="cc")
    ap.add_argument("--lib", required=True)
    ap.add_argument("--master", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--worlds", default="2,3")
    ap.add_argument("--relays", default="default,0", help="the master's --relay-max-bytes values")
    ap.add_argument("--budget", type=float, default=60.0, help="seconds per run")
    args = ap.parse_args()
    files, errors = check_docs(args.src)
    for e in errors:
        print("FAIL (docs):", e)
    if not files:
        print("FAIL: no example found in docs/collectives*.md")
        return 1
    print("docs: %d example blocks equal their files" % len(files) if not errors else
          "docs: %d problem(s)" % len(errors))
    os.makedirs(args.out, exist_ok=True)
    libdir = os.path.dirname(os.path.abspath(args.lib))
    env = dict(os.environ)
    env.setdefault("PCCL_LOG_LEVEL", "ERROR")
    # A sanitizer build of libpccl needs its runtime loaded first in the (unsanitized) example.
    ldd = subprocess.run(["ldd", args.lib], capture_output=True, text=True).stdout
    asan = [l.split()[2] for l in ldd.splitlines() if "libasan" in l and "=>" in l]
    if asan:
        env["LD_PRELOAD"] = asan[0]
        env.setdefault("ASAN_OPTIONS", "detect_leaks=0")
    failed = bool(errors)
    for rel in files:
        name = os.path.splitext(os.path.basename(rel))[0]
        exe = os.path.join(args.out, name)
        cmd = [args.cc, "-std=c11", "-Wall", "-Wextra", "-Wpedantic", "-Werror",
               "-I", os.path.join(args.src, "include"), os.path.join(args.src, rel), "-o", exe,
               "-L", libdir, "-lpccl", "-Wl,-rpath," + libdir]
        c = subprocess.run(cmd, capture_output=True, text=True)
        if c.returncode != 0:
            print("FAIL: %s does not compile:\n%s" % (rel, c.stderr[-3000:]))
            failed = True
            continue
        for w, relay in [(int(x), y) for y in args.relays.split(",")
                         for x in args.worlds.split(",")]:
            want = expected(name, w)
            if want is None:
                print("FAIL: %s: no expected output is known (add it to coll_examples.py)" % rel)
                failed = True
                break
            rundir = os.path.join(args.out, "%s-%d-relay-%s" % (name, w, relay))
            os.makedirs(rundir, exist_ok=True)
            t0 = time.monotonic()
            got, why = run(args.master, exe, w, rundir, env, args.budget, relay)
            took = time.monotonic() - t0
            if why is not None or got != want:
                if why is not None:
                    print("FAIL: %s with %d processes (relay %s): %s" % (rel, w, relay, why))
                else:
                    print("FAIL: %s with %d processes (relay %s) printed:\n  %s\nwant:\n  %s"
                          % (rel, w, relay, "\n  ".join(got), "\n  ".join(want)))
                for log in sorted(glob.glob(os.path.join(rundir, "*.log")) +
                                  glob.glob(os.path.join(rundir, "*.err"))):
                    tail = open(log, errors="replace").read()[-3000:]
                    if tail:
                        print("--- %s\n%s" % (log, tail))
                kept = rundir + "-failed-%d" % int(time.time())
                os.rename(rundir, kept)  # the next run must not overwrite it
                print("(kept in %s)" % kept)
                failed = True
            else:
                print("ok: %s with %d processes (relay %s), %d exact lines, %.1f s"
                      % (rel, w, relay, len(got), took))
    print("FAIL" if failed else "PASS")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
