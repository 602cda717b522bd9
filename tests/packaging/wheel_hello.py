"""Runs PCCL's Python hello world (tests/python/reference/hello_world.py) with 3 peers and the
master of an installed wheel, and checks the results exactly.

  VENV/bin/python tests/packaging/wheel_hello.py VENV WORK_DIR

Nothing comes from the checkout at run time but the script text: the peers run VENV's Python
with PYTHONPATH, PCCL_LIBRARY and LD_LIBRARY_PATH removed and WORK_DIR as their working
directory, so `import pccl` is the installed package and libpccl its bundled copy; the master is
the wheel's `ccoip_master` console script. The two edits are those of
tests/python/test_reference_hello.py (the harness's port; the reference's world_size read before
assignment). Exit status 0 when every check passes.
"""

import ast
import os
import re
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
PYTESTS = HERE.parent / "python"
N_PEERS = 3
MAX_STEPS = 5
RESULT_RE = re.compile(r"local_iter=(\d+), All-Reduce => result=(\[[^\]]*\]), Tx=(\d+), Rx=(\d+)")


def fail(msg, procs=()):
    print(f"wheel hello: FAIL: {msg}", file=sys.stderr)
    for name, p, log in procs:
        print(f"--- {name} (exit {p.poll()})\n{Path(log).read_text()[-3000:]}", file=sys.stderr)
    sys.exit(1)


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PCCL_LIBRARY", "PCCL_MASTER", "LD_LIBRARY_PATH")}
    env.update(PYTHONUNBUFFERED="1", PYTHONDONTWRITEBYTECODE="1", OMP_NUM_THREADS="1",
               PCCL_LOG_LEVEL=os.environ.get("PCCL_LOG_LEVEL", "WARN"))
    env.update(extra)
    return env


def edit_once(src, old, new):
    if src.count(old) != 1:
        fail(f"edit target occurs {src.count(old)} times: {old!r}")
    return src.replace(old, new)


def main():
    venv, work = Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve()
    work.mkdir(parents=True, exist_ok=True)
    py = venv / "bin" / "python"

    # The installed package loads its bundled libpccl, which finds its bundled nng (RUNPATH).
    probe = subprocess.run(
        [str(py), "-c", "import pccl; print(pccl.__file__); print(pccl.library_path())"],
        env=clean_env(), cwd=work, capture_output=True, text=True, timeout=60)
    if probe.returncode != 0:
        fail(f"import pccl: {probe.stderr}")
    pkg_file, lib = probe.stdout.split()
    if not pkg_file.startswith(str(venv)) or not lib.startswith(str(venv)) \
            or not lib.endswith("/pccl/_native/libpccl.so"):
        fail(f"not the wheel's package and library: {pkg_file} {lib}")
    ldd = subprocess.run(["ldd", lib], capture_output=True, text=True, check=True).stdout
    nng = [ln for ln in ldd.splitlines() if "libnng" in ln]
    if len(nng) != 1 or os.path.dirname(lib) not in nng[0]:
        fail(f"libnng is not the bundled copy:\n{ldd}")
    print(f"wheel hello: pccl from {pkg_file}, libpccl {lib}, {nng[0].strip()}")

    procs = []
    mlog = work / "master.log"
    master = subprocess.Popen([str(venv / "bin" / "ccoip_master"), "--listen", "tcp://127.0.0.1:0",
                               "--print-port"], env=clean_env(), cwd=work,
                              stdout=subprocess.PIPE, stderr=open(mlog, "w"), text=True)
    procs.append(("master", master, mlog))
    try:
        line = master.stdout.readline()
        m = re.match(r"PORT (\d+)$", line.strip())
        if not m:
            fail(f"the master printed {line!r}, not its port", procs)
        port = m.group(1)

        src = (PYTESTS / "reference" / "hello_world.py").read_text()
        src = edit_once(src, "MASTER_PORT = 48148",
                        "MASTER_PORT = int(__import__('os').environ['PCCL_TEST_MASTER_PORT'])")
        src = edit_once(src, '    print("[Peer] Connected!")\n',
                        '    print("[Peer] Connected!")\n'
                        "    world_size = comm.get_attribute(pccl.Attribute.GLOBAL_WORLD_SIZE)\n")
        script = work / "hello_world.py"
        script.write_text(src)
        go = work / "go"
        peers = []
        for i in range(N_PEERS):
            log = work / f"peer{i}.log"
            p = subprocess.Popen([str(py), str(PYTESTS / "peers" / "start_together.py"), str(go),
                                  str(N_PEERS), str(script)],
                                 env=clean_env(PCCL_TEST_MASTER_PORT=port), cwd=work,
                                 stdout=open(log, "w"), stderr=subprocess.STDOUT)
            peers.append((f"peer{i}", p, log))
            procs.append(peers[-1])
        deadline = time.monotonic() + 60
        while not all("READY" in Path(log).read_text() for _, _, log in peers):
            if time.monotonic() > deadline or any(p.poll() is not None for _, p, _ in peers):
                fail("the peers did not all get READY", procs)
            time.sleep(0.05)
        go.touch()
        for name, p, _ in peers:
            try:
                rc = p.wait(timeout=max(1.0, deadline + 60 - time.monotonic()))
            except subprocess.TimeoutExpired:
                fail(f"{name} did not finish", procs)
            if rc != 0:
                fail(f"{name} exited with {rc}", procs)

        results = []
        for name, _, log in peers:
            out = Path(log).read_text()
            if f"Reached revision {MAX_STEPS} => done." not in out or "Traceback" in out:
                fail(f"{name} did not reach revision {MAX_STEPS}", procs)
            res = [(int(a), ast.literal_eval(b)) for a, b, _, _ in RESULT_RE.findall(out)]
            if not res:
                fail(f"{name} printed no all-reduce result", procs)
            results.append(res)
        # The last all-reduce ran with all 3 peers: identical on every peer and exactly
        # sum over peers of (local_iter*10 + k + 1) = 10*sum(local_iter) + 3*(k+1) (exact in float32).
        last = [r[-1] for r in results]
        total_iter = sum(it for it, _ in last)
        want = [10.0 * total_iter + N_PEERS * (k + 1) for k in range(4)]
        for name_res, (_, vals) in zip(peers, last):
            if vals != want:
                fail(f"{name_res[0]}: last all-reduce {vals}, want {want}", procs)
        print(f"wheel hello: 3 peers reached revision {MAX_STEPS}; last all-reduce {want} on all")
    finally:
        for _, p, _ in procs:
            if p.poll() is None:
                p.terminate()
        for _, p, _ in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
    if master.returncode not in (0, -15):
        fail(f"the master exited with {master.returncode} after SIGTERM", procs)
    print("wheel hello: ok")


if __name__ == "__main__":
    main()
