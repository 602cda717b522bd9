"""pccl.torchcomms: the TorchComms API on pccl, with real processes (FileStore rendezvous).

* the seed's "Basic Usage" and "Asynchronous Operations" examples (reference/, verbatim
  copies of /work/shared/reference/torchcomms-api.md) with the import, the backend and the
  device changed only -- plus the store path (one per test) and, for 3 processes, the
  store's worker count; the 3-process async run sends to every other rank (the verbatim
  example sends to rank 1 only, and a third rank would wait for a send that never comes);
* every op and dtype exact against numpy (peers/torchcomms_peer.py ops), 2 and 3 processes;
* a process killed mid-op: the survivors retry after update_topology and go on with 2;
* op timeouts (blocking and async) and the recovery after them; split.
"""

import os
import re
import signal
import time

import pytest

import harness

PEER = harness.HERE / "peers" / "torchcomms_peer.py"


def spawn_peers(procs, tmp_path, n, args, script=PEER, **env):
    # cwd: the test's directory (a process that aborts may leave a core file there)
    return [procs.python(f"peer{i}", script, args, cwd=tmp_path,
                         env=harness.child_env(RANK=i, WORLD_SIZE=n, **env)) for i in range(n)]


def edits_for(tmp_path, n, async_example):
    edits = [("import torchcomms\n", "from pccl import torchcomms  # edit: pccl's module\n"),
             ('"/tmp/torchcomm_test", 2)', f'"{tmp_path}/store", {n})  # edit: test store'),
             ('torch.device("cuda:0")', 'torch.device("cpu")  # edit: device'),
             ('new_comm("nccl"', 'new_comm("pccl"  # edit: backend\n    ')]
    if async_example:
        if n > 2:
            edits.append(("work = comm.send(send_tensor, dst=1, async_op=True)",
                          "works = [comm.send(send_tensor, dst=d, async_op=True)"
                          " for d in range(1, world_size)]  # edit: every rank receives\n"
                          "    work = works[-1]; [w.wait() for w in works]"))
        edits.append(("work.wait()\n", "work.wait()\nprint(f'Rank {rank}: got {recv_tensor}')"
                                       "  # edit: show it\n"))
    return edits


@pytest.mark.timeout_s(60)
@pytest.mark.parametrize("n", [2, 3])
@pytest.mark.parametrize("example", ["torchcomms_basic_usage.py", "torchcomms_async_ops.py"])
def test_seed_examples(procs, tmp_path, n, example):
    src = (harness.HERE / "reference" / example).read_text()
    path = tmp_path / example
    path.write_text(harness.apply_edits(src, edits_for(tmp_path, n, "async" in example)))
    peers = spawn_peers(procs, tmp_path, n, [], script=path)
    assert harness.wait_all(peers, 60) == [0] * n, procs.dump()
    outs = [p.output() for p in peers]
    ranks = sorted(int(re.search(r"Rank (\d+):", o).group(1)) for o in outs)
    assert ranks == list(range(n)), procs.dump()
    for o in outs:
        rank = int(re.search(r"Rank (\d+):", o).group(1))
        if "basic" in example:
            s = float(sum(range(n)))
            assert f"Rank {rank}: tensor([{s:.0f}., " in o, procs.dump()
        else:
            # the example sends rank 0's ones * 0: every receiver gets zeros (and rank 0 keeps them)
            assert f"Rank {rank}: got tensor([0., 0., " in o, procs.dump()


@pytest.mark.timeout_s(60)
@pytest.mark.parametrize("n", [2, 3])
def test_every_op_and_dtype_exact(procs, tmp_path, n):
    peers = spawn_peers(procs, tmp_path, n, [tmp_path / "store", "ops"])
    assert harness.wait_all(peers, 60) == [0] * n, procs.dump()
    for p in peers:
        assert re.search(r"OK rank \d+/%d: \d+ checks" % n, p.output()), procs.dump()


@pytest.mark.timeout_s(60)
def test_killed_mid_op_survivors_retry(procs, tmp_path):
    """A process (not the one running the embedded master) SIGKILLs itself while its part of an
    all-reduce runs; the survivors get the failure, update the topology and go on with 2."""
    peers = spawn_peers(procs, tmp_path, 3, [tmp_path / "store", "kill", 30])
    rcs = harness.wait_all(peers, 50)
    victims = [i for i, p in enumerate(peers) if "VICTIM True" in p.output()]
    assert len(victims) == 1 and rcs[victims[0]] == -signal.SIGKILL, procs.dump()
    assert "KILLING MYSELF" in peers[victims[0]].output(), procs.dump()
    survivors = [p for i, p in enumerate(peers) if i != victims[0]]
    assert [rcs[i] for i in range(3) if i != victims[0]] == [0, 0], procs.dump()
    for p in survivors:
        out = p.output()
        assert "DONE" in out, procs.dump()
        assert re.search(r"^RETRY (RankConnectionLost|UpdateTopologyFailed)", out, re.M), procs.dump()
        steps = [int(v) for v in re.findall(r"STEP \d+ (\d+) ", out)]
        assert steps == [3] * 5 + [2] * 25, procs.dump()  # step 6 failed, and ran again with 2
        assert "NOT RESTORED" not in out, procs.dump()  # in-place inputs restored bit for bit


@pytest.mark.timeout_s(40)
def test_timeouts(procs, tmp_path):
    peers = spawn_peers(procs, tmp_path, 2, [tmp_path / "store", "timeout"])
    assert harness.wait_all(peers, 40) == [0, 0], procs.dump()
    out = "".join(p.output() for p in peers)
    t = float(re.search(r"^TIMEOUT (\S+)", out, re.M).group(1))
    ta = float(re.search(r"^ASYNC TIMEOUT (\S+)", out, re.M).group(1))
    assert 0.9 <= t < 3 and 0.4 <= ta < 3, procs.dump()
    assert out.count("AFTER 2") == 2, procs.dump()


@pytest.mark.timeout_s(30)
@pytest.mark.parametrize("abort", [None, "false"])
def test_torchcomm_environment(procs, tmp_path, abort):
    """TORCHCOMM_TIMEOUT_SECONDS=1 bounds an op given no timeout; TORCHCOMM_ABORT_ON_ERROR unset
    (TorchComms' default: true) aborts the process on it, "false" raises pccl.Timeout."""
    env = {"TORCHCOMM_TIMEOUT_SECONDS": "1"}
    if abort:
        env["TORCHCOMM_ABORT_ON_ERROR"] = abort
    peers = spawn_peers(procs, tmp_path, 2, [tmp_path / "store", "envtimeout"], **env)
    rcs = harness.wait_all(peers, 30)
    caller = next(i for i, p in enumerate(peers) if "CALLING" in p.output())
    out = peers[caller].output()
    if abort is None:
        assert rcs[caller] == -signal.SIGABRT and "RAISED" not in out, procs.dump()
    else:
        assert rcs[caller] == 0, procs.dump()
        t = float(re.search(r"^RAISED Timeout (\S+)", out, re.M).group(1))
        assert 0.9 <= t < 3, procs.dump()


@pytest.mark.timeout_s(40)
def test_split(procs, tmp_path):
    peers = spawn_peers(procs, tmp_path, 3, [tmp_path / "store", "split"])
    assert harness.wait_all(peers, 40) == [0, 0, 0], procs.dump()
    out = "".join(p.output() for p in peers)
    assert re.search(r"^CHILD \d 0/2 sum 1 recv 0$", out, re.M), procs.dump()
    assert re.search(r"^CHILD \d 1/2 sum 1 recv 42$", out, re.M), procs.dump()
    assert re.search(r"^ADMITTED 2$", out, re.M), procs.dump()
    assert out.count(" 3\n") >= 3 and len(re.findall(r"^PARENT \d 3$", out, re.M)) == 3, procs.dump()


def free_port():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.timeout_s(30)
@pytest.mark.parametrize("how", ["torchrun_env", "pccl_master_addr"])
def test_rendezvous_without_store(procs, tmp_path, how):
    if how == "torchrun_env":
        env = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": free_port()}
    else:
        env = {"PCCL_MASTER_ADDR": f"127.0.0.1:{harness.start_master(procs)}"}
    peers = spawn_peers(procs, tmp_path, 2, [], script=harness.HERE / "peers" /
                        "torchcomms_env_peer.py", **env)
    assert harness.wait_all(peers, 30) == [0, 0], procs.dump()
    out = "".join(p.output() for p in peers)
    pairs = re.findall(r"^rank (\d) env (\d) size 2 max 2$", out, re.M)
    assert sorted(r for r, _ in pairs) == ["0", "1"], procs.dump()
    assert all(r == e for r, e in pairs), procs.dump()  # get_rank() == RANK (ring_key)


# -- in this process: arguments refused before anything is sent --


@pytest.fixture
def comm1(monkeypatch):
    torch = pytest.importorskip("torch")
    from pccl import torchcomms as tc

    for k in ("WORLD_SIZE", "RANK", "PCCL_MASTER_ADDR", "MASTER_ADDR"):
        monkeypatch.delenv(k, raising=False)
    c = tc.new_comm("pccl", torch.device("cpu"), store=torch.distributed.HashStore(),
                    abort_process_on_timeout_or_error=False, name=f"unit{time.monotonic_ns()}")
    yield c
    c.finalize()


def test_backend_device_and_reduce_ops():
    torch = pytest.importorskip("torch")
    from pccl import torchcomms as tc

    with pytest.raises(ValueError, match="backend"):
        tc.new_comm("nccl", torch.device("cpu"))
    with pytest.raises(ValueError, match="cuda"):
        tc.new_comm("pccl", torch.device("cuda:0"))
    for name in ("SUM", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR", "PREMUL_SUM", "AVG"):
        assert isinstance(getattr(tc.ReduceOp, name), tc.ReduceOp)
    assert tc.ReduceOp.PREMUL_SUM(2.5).factor == 2.5
    with pytest.raises(TypeError):
        tc.ReduceOp.SUM(2.0)


def test_argument_checks(comm1):
    torch = pytest.importorskip("torch")
    import numpy as np

    import pccl
    from pccl import torchcomms as tc

    assert comm1.get_rank() == 0 and comm1.get_size() == 1
    with pytest.raises(ValueError, match="contiguous"):
        comm1.all_reduce(torch.ones(4, 4).t(), tc.ReduceOp.SUM)
    with pytest.raises(TypeError, match="dtype"):
        comm1.all_gather_single(torch.zeros(4, dtype=torch.int32), torch.ones(4))
    with pytest.raises(ValueError, match="elements"):
        comm1.all_gather_single(torch.zeros(3), torch.ones(4))
    with pytest.raises(TypeError, match="dtype"):
        comm1.all_reduce(torch.ones(2, dtype=torch.complex64), tc.ReduceOp.SUM)
    with pytest.raises(TypeError):
        comm1.all_reduce([1, 2], tc.ReduceOp.SUM)
    with pytest.raises(TypeError, match="ReduceOp"):
        comm1.all_reduce(np.ones(3), object())
    with pytest.raises(ValueError, match="tensors"):
        comm1.all_gather([torch.zeros(2), torch.zeros(2)], torch.ones(2))
    with pytest.raises(ValueError, match="split_sizes"):
        comm1.all_to_all_v_single(torch.zeros(4), torch.ones(4), [3], [4])
    # shapes: a list's tensors have the input's shape; a single tensor is the world's blocks
    # concatenated along dim 0 or stacked (torch.distributed's rule)
    with pytest.raises(ValueError, match="shape"):
        comm1.all_gather([torch.zeros(2, 2)], torch.ones(4))
    with pytest.raises(ValueError, match="shape"):
        comm1.all_gather_single(torch.zeros(2, 3), torch.ones(3, 2))
    with pytest.raises(ValueError, match="shape"):
        comm1.reduce_scatter_single(torch.zeros(3, 2), torch.ones(6), tc.ReduceOp.SUM)
    with pytest.raises(ValueError, match="shape"):
        comm1.all_to_all_single(torch.zeros(2, 3), torch.ones(3, 2))
    with pytest.raises(ValueError, match="shape"):
        comm1.scatter(torch.zeros(4), [torch.ones(2, 2)], 0)
    with pytest.raises(pccl.TooFewPeers):  # the stacked form passes the checks
        comm1.all_gather_single(torch.zeros(1, 3, 2), torch.ones(3, 2))
    with pytest.raises(ValueError, match="quantization"):
        comm1.all_reduce(torch.ones(4), tc.ReduceOp.SUM, hints={"pccl::quantization": "x"})
    with pytest.raises(ValueError, match="algorithm"):
        comm1.all_reduce(torch.ones(4), tc.ReduceOp.SUM, hints={"pccl::algorithm": "tree"})
    with pytest.raises(ValueError, match="quantized_dtype"):
        comm1.reduce(torch.ones(4), 0, tc.ReduceOp.SUM,
                     hints={"pccl::quantization": "min_max", "pccl::quantized_dtype": "u7"})
    with pytest.raises(ValueError, match="not in"):
        comm1.split([5])
    assert comm1.split([], hints={"pccl::split_size": 0}) is None


def test_unknown_hints_ignored_with_debug_log(comm1, caplog):
    torch = pytest.importorskip("torch")

    import pccl
    from pccl import torchcomms as tc

    caplog.set_level("DEBUG", logger="pccl.torchcomms")
    with pytest.raises(pccl.TooFewPeers):  # world 1: the call itself is refused
        comm1.all_reduce(torch.ones(2), tc.ReduceOp.SUM, hints={"torchcomm::ncclx::x": "true"})
    assert "torchcomm::ncclx::x" in caplog.text and "ignored" in caplog.text


@pytest.mark.timeout_s(90)
def test_example_train_kill_and_restart(procs, tmp_path):
    """examples/torchcomms_train.py demo: a worker killed mid-training and restarted; every
    worker ends with the same model."""
    demo = procs.python("demo", harness.REPO / "examples" / "torchcomms_train.py",
                        ["demo", "--workers", "3", "--steps", "60"], cwd=tmp_path)
    assert demo.wait(90) == 0, procs.dump()
    out = demo.output()
    assert "demo: ok, every worker holds the same model" in out, procs.dump()
    assert re.search(r"demo: killed worker \d after its step \d+", out), procs.dump()
    assert len(re.findall(r"^demo: worker\S+: step 60 ", out, re.M)) == 3, procs.dump()


@pytest.mark.timeout_s(30)
def test_exit_without_finalize(procs, tmp_path):
    """A program that never calls finalize() still exits (its embedded master stops)."""
    script = tmp_path / "nofin.py"
    script.write_text("import torch\nfrom pccl import torchcomms\n"
                      "c = torchcomms.new_comm('pccl', 'cpu', store=torch.distributed.HashStore())\n"
                      "print('size', c.get_size(), flush=True)\n")
    p = procs.python("nofin", script)
    assert p.wait(30) == 0 and "size 1" in p.output(), procs.dump()
