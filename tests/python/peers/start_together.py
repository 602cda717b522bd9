"""Runs a script as __main__ between a start barrier and an end barrier.

  start_together.py GO_FILE N_PEERS SCRIPT [ARGS...]

Start: imports numpy and pccl (loading libpccl) first, prints READY, waits (at most
60 s) for GO_FILE, then runs SCRIPT unchanged. The test creates GO_FILE when all
peers are READY, so that they connect within milliseconds of each other whatever
the machine's load.

End: the communicators the script created stay alive (this wrapper keeps a
reference) until all N_PEERS scripts have returned (GO_FILE.done.* files), so that
no peer leaves while another one still finishes its last step. pccl's
pcclGetAttribute reports membership changes between calls (the master re-wires
the survivors as soon as a peer leaves); the reference hello worlds re-read the
world size after their last all-reduce, and a peer that is a few milliseconds
late would otherwise find itself alone and wait for company forever.
"""

import glob
import os
import runpy
import sys
import time

import numpy  # noqa: F401

import pccl

_comms = []
_orig_init = pccl.Communicator.__init__


def _init(self, *args, **kwargs):
    _orig_init(self, *args, **kwargs)
    _comms.append(self)


pccl.Communicator.__init__ = _init


def wait_files(pattern, n, what):
    deadline = time.monotonic() + 60
    while len(glob.glob(pattern)) < n:
        if time.monotonic() > deadline:
            sys.exit(f"start_together: no {what}")
        time.sleep(0.005)


pccl.init()
print("READY", flush=True)
go, n_peers, script = sys.argv[1], int(sys.argv[2]), sys.argv[3]
wait_files(go, 1, "go signal")
sys.argv = sys.argv[3:]
runpy.run_path(script, run_name="__main__")
open(f"{go}.done.{os.getpid()}", "w").close()
wait_files(f"{go}.done.*", n_peers, "end barrier")
for c in _comms:
    c.close()
