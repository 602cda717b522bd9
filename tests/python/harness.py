"""Process and path helpers of the Python binding tests.

libpccl and ccoip_master come from PCCL_LIBRARY / PCCL_MASTER (set by run.sh),
else from the newest build tree of this checkout. Every child is started in its
own process group and killed when the test ends; every wait is bounded.
"""

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BINDINGS = REPO / "bindings" / "python"
HERE = Path(__file__).resolve().parent
PY = sys.executable


def _build_dirs():
    """Build trees of this checkout holding libpccl and ccoip_master, best first:
    build/release, then the most recently built; sanitizer/wasm/fuzz trees are skipped
    (their libpccl cannot be loaded into a plain Python)."""
    sys.path.insert(0, str(BINDINGS))
    from pccl._lib import build_tree_candidates

    dirs = []
    for lib in build_tree_candidates(str(REPO)):
        d = Path(lib).parents[2]
        if (d / "master" / "ccoip_master").is_file():
            dirs.append(d)
    return dirs


def lib_path():
    env = os.environ.get("PCCL_LIBRARY")
    if env:
        return env
    dirs = _build_dirs()
    return str(dirs[0] / "bindings" / "libpccl" / "libpccl.so") if dirs else None


def master_path():
    env = os.environ.get("PCCL_MASTER")
    if env:
        return env
    dirs = _build_dirs()
    return str(dirs[0] / "master" / "ccoip_master") if dirs else None


def child_env(**extra):
    env = dict(os.environ)
    env["PYTHONPATH"] = str(BINDINGS) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    lp = lib_path()
    if lp:
        env["PCCL_LIBRARY"] = lp
    env["PYTHONUNBUFFERED"] = "1"
    env.setdefault("PCCL_LOG_LEVEL", "WARN")
    env["OMP_NUM_THREADS"] = "1"  # 2 cores shared by several peers
    env["MKL_NUM_THREADS"] = "1"
    for k, v in extra.items():
        env[k] = str(v)
    return env


class Proc:
    def __init__(self, name, argv, outdir, env, cwd=None):
        self.name = name
        self.out_path = Path(outdir) / f"{name}.out"
        self._f = open(self.out_path, "wb")
        self.p = subprocess.Popen(argv, stdout=self._f, stderr=subprocess.STDOUT, env=env,
                                  cwd=cwd, start_new_session=True)

    @property
    def pid(self):
        return self.p.pid

    def output(self):
        self._f.flush()
        return self.out_path.read_text(errors="replace")

    def wait(self, timeout):
        try:
            return self.p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def kill(self, sig=signal.SIGKILL):
        if self.p.poll() is None:
            try:
                os.killpg(self.p.pid, sig)
            except ProcessLookupError:
                pass

    def close(self):
        self.kill()
        try:
            self.p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        self._f.close()


class Procs:
    """All children of one test; close() kills them."""

    def __init__(self, outdir):
        self.outdir = Path(outdir)
        self.procs = []

    def spawn(self, name, argv, env=None, cwd=None):
        pr = Proc(name, argv, self.outdir, env or child_env(), cwd)
        self.procs.append(pr)
        return pr

    def python(self, name, script, args=(), env=None, cwd=None):
        return self.spawn(name, [PY, str(script), *map(str, args)], env=env, cwd=cwd)

    def dump(self):
        parts = []
        for pr in self.procs:
            parts.append(f"----- {pr.name} (rc={pr.p.poll()}) -----\n{pr.output()[-6000:]}")
        return "\n".join(parts)

    def close(self):
        for pr in self.procs:
            pr.close()


def start_master(procs, evict_ms=3000):
    """Starts ccoip_master on 127.0.0.1 port 0; returns its port."""
    mp = master_path()
    if not mp or not os.access(mp, os.X_OK):
        raise RuntimeError("ccoip_master not found: set PCCL_MASTER or build target ccoip_master")
    pr = procs.spawn("master", [mp, "--listen", "tcp://127.0.0.1:0", "--print-port",
                                "--heartbeat-ms", "100", "--evict-ms", str(evict_ms),
                                "--vote-timeout-ms", "20000"],
                    env=child_env(PCCL_LOG_LEVEL=os.environ.get("PCCL_MASTER_LOG_LEVEL", "INFO")))
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        m = re.search(r"^PORT (\d+)$", pr.output(), re.M)
        if m:
            return int(m.group(1))
        if pr.p.poll() is not None:
            break
        time.sleep(0.05)
    raise RuntimeError("master did not print its port:\n" + pr.output())


def wait_all(procs_list, deadline_s):
    """Waits for every process until a shared deadline; returns the exit codes (None: still running)."""
    end = time.monotonic() + deadline_s
    rcs = []
    for pr in procs_list:
        rcs.append(pr.wait(max(0.0, end - time.monotonic())))
    return rcs


def wait_for(pred, timeout, interval=0.05):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = pred()
        if v:
            return v
        time.sleep(interval)
    return pred()


def apply_edits(src, edits):
    """Applies (old, new) replacements; each old text must occur exactly once."""
    for old, new in edits:
        n = src.count(old)
        if n != 1:
            raise AssertionError(f"edit target occurs {n} times, expected once: {old!r}")
        src = src.replace(old, new)
    return src
