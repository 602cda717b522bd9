"""Data-parallel training on the TorchComm API of pccl (pccl.torchcomms), with FileStore
rendezvous, surviving a worker that is killed and restarted.

  python3 examples/torchcomms_train.py demo [--workers 3] [--steps 60]
      runs the whole story on this machine: starts the workers, kills one (not the one
      that runs the embedded master) in the middle of training, starts it again, and
      checks that every worker finishes with the same model.
  python3 examples/torchcomms_train.py worker STORE_PATH STEPS
      one worker (WORLD_SIZE in the environment: how many workers to wait for at start).

Needs libpccl (PCCL_LIBRARY=/path/to/libpccl.so, or a build tree of this checkout) and
bindings/python on PYTHONPATH (the demo sets it for its workers).

The model is a linear regression y = X w on a fixed data set. Every step, each worker
takes its share (rows rank::world) of the step's batch, computes the gradient of its
share, and the all-reduce sums the shares into the gradient of the whole batch, so the
result does not depend on how many workers there are. The weights and the step number
are pccl shared state: synchronized at the start of every step, which is how a restarted
worker receives the current model (the popular revision wins).

Fault-tolerant mode: every step starts with update_topology() (admits a restarted worker,
drops a dead one); a failed step (a worker lost mid-op) is retried from the top with the
new rank and size. A step that did not complete changes nothing, so retrying it is exact.
"""

import hashlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

DIM, ROWS, BATCH, LR = 8, 256, 32, 0.05


def worker(store_path, steps):
    import torch

    import pccl
    from pccl import torchcomms

    store = torch.distributed.FileStore(store_path, int(os.environ.get("WORLD_SIZE", "2")))
    comm = torchcomms.new_comm(
        "pccl", torch.device("cpu"), store=store, name="train",
        abort_process_on_timeout_or_error=False,  # fault tolerant: errors are handled below
        hints={"pccl::master_evict_ms": "1500", "pccl::master_heartbeat_ms": "100",
               "pccl::heartbeat_ms": "100"})
    print(f"joined: rank {comm.get_rank()} of {comm.get_size()}, "
          f"runs master: {comm._master is not None}", flush=True)

    g = torch.Generator().manual_seed(0)  # the same data set in every worker
    x = torch.randn(ROWS, DIM, generator=g)
    y = x @ torch.linspace(-1.0, 1.0, DIM)
    w = torch.zeros(DIM)
    state = pccl.SharedState([pccl.TensorInfo("w", w)], revision=0)

    joined = True  # new_comm returned admitted: the others are past their update_topology
    while True:
        try:
            if not joined:
                comm.update_topology()
            joined = False
            rank, world = comm.get_rank(), comm.get_size()
            if world < 2 or rank < 0:
                time.sleep(0.05)
                continue
            comm.pccl_communicator.sync_shared_state(state)  # a newcomer receives w and the step
            step = state.revision
            if step >= steps:
                break
            lo = (step * BATCH) % ROWS
            xb, yb = x[lo:lo + BATCH][rank::world], y[lo:lo + BATCH][rank::world]
            grad = (2.0 / BATCH) * (xb.T @ (xb @ w - yb))  # this worker's share of the gradient
            comm.all_reduce(grad, torchcomms.ReduceOp.SUM, async_op=False)
            w -= LR * grad  # in place: w is the shared state's tensor
            state.revision = step + 1
            loss = float(((x @ w - y) ** 2).mean())
            print(f"step {step + 1} world {world} rank {rank} loss {loss:.6f}", flush=True)
            time.sleep(0.1)  # a slow step: time for the demo to kill and restart a worker
        except pccl.PCCLError as e:  # a worker was lost mid-op, or the membership changed
            print(f"retry: {type(e).__name__}", flush=True)
            time.sleep(0.05)
    digest = hashlib.sha256(w.numpy().tobytes()).hexdigest()[:16]
    print(f"done: step {state.revision} loss {float(((x @ w - y) ** 2).mean()):.6f} "
          f"w {digest}", flush=True)
    comm.finalize()


def demo(n, steps):
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, WORLD_SIZE=str(n), OMP_NUM_THREADS="1",
               PYTHONPATH=os.path.join(here, "..", "bindings", "python") + os.pathsep
               + os.environ.get("PYTHONPATH", ""))
    tmp = tempfile.mkdtemp(prefix="pccl_tc_train_")
    store = os.path.join(tmp, "store")

    def start(i, tag):
        out = open(os.path.join(tmp, f"worker{i}{tag}.log"), "w+")
        p = subprocess.Popen([sys.executable, os.path.abspath(__file__), "worker", store,
                              str(steps)], stdout=out, stderr=subprocess.STDOUT, env=env)
        return p, out

    def text(out):
        out.flush()
        out.seek(0)
        return out.read()

    workers = [start(i, "") for i in range(n)]
    ok = False
    try:
        # wait until training is under way, then kill a worker that does not host the master
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if all(re.search(r"^step (\d*[5-9]|\d{2,}) ", text(o), re.M) for _, o in workers):
                break
            time.sleep(0.05)
        else:
            raise SystemExit("training did not start:\n" + "".join(text(o) for _, o in workers))
        victim = next(i for i, (_, o) in enumerate(workers) if "runs master: False" in text(o))
        workers[victim][0].send_signal(signal.SIGKILL)
        workers[victim][0].wait()
        last = re.findall(r"^step \d+", text(workers[victim][1]), re.M)[-1]
        print(f"demo: killed worker {victim} after its {last}", flush=True)
        time.sleep(0.2)
        workers.append(start(victim, "-restarted"))
        print(f"demo: restarted worker {victim}", flush=True)
        alive = [w for i, w in enumerate(workers) if i != victim]
        for p, _ in alive:
            p.wait(timeout=120)
        done = [re.search(r"^done: step (\d+) loss (\S+) w (\w+)", text(o), re.M) for _, o in alive]
        if any(p.returncode != 0 for p, _ in alive) or not all(done):
            raise SystemExit("a worker failed:\n" + "\n".join(text(o)[-3000:] for _, o in alive))
        restarted = text(alive[-1][1])
        first = re.search(r"^step (\d+) world", restarted, re.M)
        print(f"demo: the restarted worker rejoined at step {first.group(1) if first else '?'}")
        for (p, o), m in zip(alive, done):
            print(f"demo: {os.path.basename(o.name)}: step {m.group(1)} loss {m.group(2)} "
                  f"w {m.group(3)}")
        if len({m.group(3) for m in done}) != 1 or len({m.group(1) for m in done}) != 1:
            raise SystemExit("demo: the workers disagree on the model")
        print("demo: ok, every worker holds the same model")
        ok = True
    finally:
        for p, o in workers:
            if p.poll() is None:
                p.kill()
                p.wait()
            o.close()
        if ok:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            print(f"demo: the workers' logs are in {tmp}")


def main(argv):
    if len(argv) >= 2 and argv[1] == "worker":
        worker(argv[2], int(argv[3]))
    elif len(argv) >= 2 and argv[1] == "demo":
        import argparse

        ap = argparse.ArgumentParser()
        ap.add_argument("--workers", type=int, default=3)
        ap.add_argument("--steps", type=int, default=60)
        a = ap.parse_args(argv[2:])
        demo(a.workers, a.steps)
    else:
        print(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
