"""pccl.Communicator's collective set (broadcast, reduce, all_gather, reduce_scatter, all_to_all,
gather, scatter, barrier, send, recv) and pccl.Work, with real processes against ccoip_master.

* every method, int32 and float32, numpy and torch, blocking, async and in place, exact
  against numpy (peers/collectives_peer.py ops), 2 and 3 processes;
* refused arguments (sizes, dtypes, roots and peers out of range, ...): the exact class;
* Work.wait(timeout=...), a dropped running Work and close() with a running Work;
* in this process: the exported names, TorchWork being a Work, the checks made before any
  C call.
"""

import re

import numpy as np
import pytest

import harness

PEER = harness.HERE / "peers" / "collectives_peer.py"


def run(procs, port, n, mode, deadline=60):
    peers = [procs.python(f"peer{i}", PEER, [port, i, n, mode]) for i in range(n)]
    assert harness.wait_all(peers, deadline) == [0] * n, procs.dump()
    outs = [p.output() for p in peers]
    ranks = sorted(int(re.search(r"^JOINED index \d+ rank (\d+)$", o, re.M).group(1))
                   for o in outs)
    assert ranks == list(range(n)), procs.dump()
    return outs


# checks per dtype and array kind: broadcast 5, reduce 7, all_gather, reduce_scatter,
# all_to_all, gather and scatter 6 each, send / recv 9 (an async op's Work: 2, its info and
# type); x 2 dtypes x 2 kinds; then the barriers 3 and three ops in flight 9
OPS_CHECKS = 51 * 4 + 3 + 9


@pytest.mark.timeout_s(60)
@pytest.mark.parametrize("n", [2, 3])
def test_every_method_exact(procs, master_port, n):
    outs = run(procs, master_port, n, "ops")
    for o in outs:
        assert re.search(r"^OK rank \d/%d: %d checks$" % (n, OPS_CHECKS), o, re.M), o


@pytest.mark.timeout_s(60)
def test_refused_arguments(procs, master_port):
    outs = run(procs, master_port, 2, "errors")
    for o in outs:
        assert re.search(r"^OK rank \d/2: 25 checks$", o, re.M), o


@pytest.mark.timeout_s(60)
def test_work_wait_timeout_drop_and_close(procs, master_port):
    outs = run(procs, master_port, 2, "wait")
    assert any(re.search(r"^OK rank 0/2: 14 checks$", o, re.M) for o in outs), outs
    assert any(re.search(r"^OK rank 1/2: 1 checks$", o, re.M) for o in outs), outs


# -- in this process --


def test_exports_and_torchwork():
    import pccl
    from pccl import _collectives, torchcomms

    assert pccl.Work is _collectives.Work and pccl.CollectiveInfo is _collectives.CollectiveInfo
    assert "Work" in pccl.__all__ and "CollectiveInfo" in pccl.__all__
    assert issubclass(torchcomms.TorchWork, pccl.Work)
    assert issubclass(pccl.Communicator, _collectives.Collectives)
    for name in ("broadcast", "reduce", "all_gather", "reduce_scatter", "all_to_all", "gather",
                 "scatter", "barrier", "send", "recv"):
        assert callable(getattr(pccl.Communicator, name)), name
    # a finished work (as a blocking TorchComm op returns): no C object
    w = torchcomms.TorchWork("pcclBarrier", rc=0)
    assert w.is_completed() is True and w.wait() is True and w.wait(timeout=1) is True
    w = pccl.Work("pcclBarrier", rc=13)
    with pytest.raises(pccl.Timeout) as e:
        w.wait()
    assert e.value.function == "pcclBarrier"
    assert _collectives._ms(0.0004) == 1 and _collectives._ms(None) == 0
    assert _collectives._ms(10**9) == 2**32 - 1


def test_checks_before_c_on_an_unconnected_communicator():
    """Checks that need no world raise before any C call; those that need it read the world
    (an unconnected communicator: InvalidUsage)."""
    import pccl

    c = pccl.Communicator("127.0.0.1:1", 0)
    try:
        a = np.zeros(4, np.int32)
        with pytest.raises(pccl.DTypeMismatchError):
            c.reduce(a, np.zeros(4, np.float32), 0)
        with pytest.raises(pccl.SizeMismatchError):
            c.reduce(a, np.zeros(5, np.int32), 0)
        with pytest.raises(pccl.UnsupportedTensorTypeError):
            c.broadcast([1, 2], 0)
        with pytest.raises(TypeError):
            c.send(a, 1.0)
        with pytest.raises(TypeError):
            c.send(a, True)
        with pytest.raises(pccl.InvalidArgument):
            c.barrier(timeout_ms=2**32)
        with pytest.raises(pccl.InvalidArgument):
            c.reduce(a, None, 0, op="SUM")
        with pytest.raises(pccl.InvalidUsage):
            c.all_gather(a, np.zeros(8, np.int32))  # the world of no group
        with pytest.raises(pccl.InvalidUsage) as e:
            c.barrier()
        assert e.value.function == "pcclBarrier"
    finally:
        c.close()
