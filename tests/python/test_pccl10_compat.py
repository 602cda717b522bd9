"""PCCL 1.0's Python API where pccl's differed: each case is exercised the way
PCCL 1.0's own Python tests and scripts use it (python/tests of PCCL 1.0):

- a master script whose main() calls MasterNode(...).run() and returns keeps
  serving (PCCL's __del__ awaits termination) until SIGINT/SIGTERM;
- all_reduce_async in a world of 1 raises PCCLError, in a numpy-only and in a
  torch-only interpreter (the other package genuinely absent);
- AsyncReduceHandle.wait() returns (is_success, status, ReduceInfo), on
  failure too; p2p_connection_pool_size=16; PCCLError(result, func_name) and
  its message; ReduceOpDescriptor(sendbuf_ptr=, recvbuf_ptr=, ...),
  to_c()/to_c_inpl(); TensorInfo.from_numpy(tensor=); the inputs PCCL rejects.
"""

import ctypes
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

import harness
import pccl
from pccl import _lib

# PCCL 1.0's master scripts (tests/end_to_end/*/master.py, stress_tests/*/stresstest_master.py)
# verbatim but for the port.
MASTER_SCRIPT = '''\
from pccl import *

HOST: str = '127.0.0.1:{port}'


def main():
    print(f"Starting master node on {{HOST}}")
    master: MasterNode = MasterNode(listen_address=HOST)
    master.run()


if __name__ == '__main__':
    main()
'''

# the same with the master in a global: it is served from the interpreter's exit
GLOBAL_MASTER_SCRIPT = '''\
import pccl
master = pccl.MasterNode(listen_address='127.0.0.1:{port}')
master.run()
print("returned from run()", flush=True)
'''

# a master interrupted before the script returns ends with the script
INTERRUPTED_MASTER_SCRIPT = '''\
from pccl import MasterNode
def main():
    m = MasterNode(listen_address='127.0.0.1:{port}')
    m.run()
    m.interrupt()
main()
print("done", flush=True)
'''


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def spawn_script(procs, tmp_path, name, text):
    """Runs a script with SIGINT at its default (a shell may have started us with it ignored)."""
    path = tmp_path / f"{name}.py"
    path.write_text(text)
    launcher = ("import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
                "os.execv(sys.executable, [sys.executable, sys.argv[1]])")
    return procs.spawn(name, [harness.PY, "-c", launcher, str(path)])


def connect_alone(port, peer_group=0):
    c = pccl.Communicator(f"127.0.0.1:{port}", peer_group, timeout_ms=10000)
    c.connect(n_attempts=20, retry_delay=0.1)
    return c


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_master_script_that_returns_keeps_serving(procs, tmp_path, sig):
    port = free_port()
    pr = spawn_script(procs, tmp_path, "master", MASTER_SCRIPT.format(port=port))
    assert harness.wait_for(lambda: "Starting master node" in pr.output(), 20), pr.output()
    time.sleep(1.0)  # main() has long returned
    assert pr.p.poll() is None, pr.output()
    c0 = connect_alone(port)
    assert c0.get_attribute(pccl.Attribute.GLOBAL_WORLD_SIZE) == 1
    # a second peer is admitted too: the master really serves (not just a bound socket)
    c1 = pccl.Communicator(f"127.0.0.1:{port}", 0, timeout_ms=10000)
    t = threading.Thread(target=lambda: c1.connect(n_attempts=20, retry_delay=0.1))
    t.start()
    assert harness.wait_for(lambda: c0.are_peers_pending(), 10)
    c0.update_topology()
    t.join(20)
    assert not t.is_alive()
    assert c0.get_attribute(pccl.Attribute.GLOBAL_WORLD_SIZE) == 2
    c0.close()
    c1.close()
    assert pr.p.poll() is None
    pr.p.send_signal(sig)
    assert pr.wait(20) == 0, pr.output()
    # stopped and freed: the port can be bound again
    m = pccl.MasterNode(f"127.0.0.1:{port}")
    m.close()


def test_master_in_a_global_is_served_at_exit(procs, tmp_path):
    port = free_port()
    pr = spawn_script(procs, tmp_path, "gmaster", GLOBAL_MASTER_SCRIPT.format(port=port))
    assert harness.wait_for(lambda: "returned from run()" in pr.output(), 20), pr.output()
    time.sleep(0.5)
    assert pr.p.poll() is None, pr.output()
    connect_alone(port).close()
    pr.p.send_signal(signal.SIGTERM)
    assert pr.wait(20) == 0, pr.output()


def test_interrupted_master_script_ends(procs, tmp_path):
    pr = spawn_script(procs, tmp_path, "imaster", INTERRUPTED_MASTER_SCRIPT.format(port=free_port()))
    assert pr.wait(20) == 0, pr.output()
    assert pr.output().strip().endswith("done"), pr.output()


def test_pccl_unit_test_pattern_reuses_the_port():
    """PCCL's unit tests: run(), interrupt(), drop -- the next master binds the same port."""
    port = free_port()
    for _ in range(3):
        m = pccl.MasterNode(listen_address=f"127.0.0.1:{port}")
        m.run()
        c = pccl.Communicator(f"127.0.0.1:{port}", 0)
        c.connect()
        m.interrupt()
        del c, m  # PCCL's __del__: awaits the (interrupted) master and frees it
    m = pccl.MasterNode(f"127.0.0.1:{port}")
    m.run()
    c = pccl.Communicator(f"127.0.0.1:{port}", 0)
    with pytest.raises(pccl.PCCLError) as ei:
        c.update_topology()  # not connected
    assert type(ei.value) is pccl.InvalidUsage and ei.value.result == pccl.Result.INVALID_USAGE
    del c
    m.interrupt()
    assert m.await_termination(timeout=10) is True
    m.close()


# ---------------------------------------------------------------- world of 1

WORLD_OF_ONE = '''\
import importlib, sys
def absent(name):
    try:
        importlib.import_module(name)
    except ImportError:
        return True
    return False
assert absent({absent!r}), "{absent} must not be importable here"
import {present}
import pccl
assert {absent!r} not in sys.modules
master = pccl.MasterNode(listen_address="127.0.0.1:0")
master.run()
c = pccl.Communicator(f"127.0.0.1:{{master.port}}", 0)
c.connect()
arr = {make}
try:
    c.all_reduce_async(arr, arr, op=pccl.ReduceOp.SUM)
    print("NO ERROR")
except pccl.PCCLError as e:
    print("RAISED", type(e).__name__, int(e.result), e.function, "|", str(e), "|")
print("UNTOUCHED", {sum_expr})
master.interrupt()
'''


def _module_paths(names):
    """The files/directories holding top-level modules (e.g. numpy's package directory)."""
    out = []
    for name in names:
        spec = importlib.util.find_spec(name)
        if spec is None:
            return None
        if spec.submodule_search_locations:
            out.extend(spec.submodule_search_locations)
        else:
            out.append(spec.origin)
    return out


@pytest.mark.parametrize("present,absent,deps,make,sum_expr", [
    ("numpy", "torch", ["numpy"], "numpy.arange(27, dtype=numpy.float64)", "float(arr.sum())"),
    ("torch", "numpy", ["torch", "typing_extensions"], "torch.arange(27, dtype=torch.float64)",
     "float(arr.sum())"),
])
def test_all_reduce_async_alone_raises(tmp_path, present, absent, deps, make, sum_expr):
    """PCCL's numpy_only / pytorch_only tests: a world of 1 raises from all_reduce_async,
    in an interpreter where the other package cannot be imported (python -S and a
    site directory holding only the packages needed)."""
    paths = _module_paths(deps)
    if paths is None:
        pytest.skip(f"{deps} not installed")
    site = tmp_path / "site"
    site.mkdir()
    for p in paths:
        os.symlink(p, site / os.path.basename(p))
    script = tmp_path / "alone.py"
    script.write_text(WORLD_OF_ONE.format(present=present, absent=absent, make=make,
                                          sum_expr=sum_expr))
    env = harness.child_env()
    env["PYTHONPATH"] = os.pathsep.join([str(site), str(harness.BINDINGS)])
    r = subprocess.run([sys.executable, "-S", str(script)], env=env, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    msg = "pcclAllReduceAsync failed with error: TOO_FEW_PEERS"
    assert f"RAISED TooFewPeers 5 pcclAllReduceAsync | {msg}: TOO_FEW_PEERS |" in r.stdout, r.stdout
    assert "UNTOUCHED 351.0" in r.stdout, r.stdout  # 0 + 1 + ... + 26, not reduced


def test_all_reduce_async_alone_raises_in_process():
    with pccl.MasterNode("127.0.0.1:0") as m:
        m.run()
        c = connect_alone(m.port)
        a = np.ones(8, np.float32)
        with pytest.raises(pccl.PCCLError) as ei:
            c.all_reduce_async(a, a, op=pccl.ReduceOp.SUM)
        assert type(ei.value) is pccl.TooFewPeers
        assert ei.value.result == pccl.Result.TOO_FEW_PEERS == 5
        assert ei.value.function == "pcclAllReduceAsync"
        assert not c._in_flight  # nothing was left in flight
        c.close()


# ---------------------------------------------------------------- two peers of this process


def connected_pair(master, **kw):
    comms = [pccl.Communicator(f"127.0.0.1:{master.port}", 0, timeout_ms=20000, **kw)
             for _ in range(2)]
    errors = []

    def join(i):
        try:
            c = comms[i]
            c.connect(n_attempts=3, retry_delay=0.1)
            deadline = time.monotonic() + 20
            while c.get_attribute(pccl.Attribute.GLOBAL_WORLD_SIZE) < 2:
                assert time.monotonic() < deadline
                c.update_topology()
                time.sleep(0.01)
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=join, args=(i,)) for i in range(2)]
    threads[0].start()
    time.sleep(0.1)
    threads[1].start()
    for t in threads:
        t.join(30)
    assert not errors and not any(t.is_alive() for t in threads), errors
    return comms


def test_wait_returns_reduce_info_on_failure():
    with pccl.MasterNode("127.0.0.1:0") as m:
        m.run()
        c0, c1 = connected_pair(m)
        x = np.arange(10, dtype=np.int32)
        h = c0.all_reduce_async(x, x, op=pccl.ReduceOp.SUM, tag=3)
        time.sleep(0.2)
        c1.close()  # the other peer leaves without taking part: tag 3 cannot complete
        result = h.wait()
        is_success, status, info = result
        assert is_success is False
        assert status == pccl.Result.TOO_FEW_PEERS and isinstance(status, int)
        assert isinstance(info, pccl.ReduceInfo)
        assert (info.local_world_size, info.tx_bytes, info.rx_bytes) == (0, 0, 0)
        assert h.wait() is result  # cached
        assert x.tolist() == list(range(10))  # restored
        with pytest.raises(pccl.TooFewPeers):
            h.result()
        c0.close()


def test_pool_size_16_and_reduce_op_descriptors():
    torch = pytest.importorskip("torch")
    with pccl.MasterNode("127.0.0.1:0") as m:
        m.run()
        comms = connected_pair(m, p2p_connection_pool_size=16)
        sends = [[np.arange(1000, dtype=np.float32) * (i + 1) + k for k in range(3)]
                 for i in range(2)]
        tsends = [torch.full((64,), float(i + 1)) for i in range(2)]
        out, errors = {}, []

        def peer(i):
            try:
                descs = []
                for k, a in enumerate(sends[i]):
                    rd = pccl.ReduceDescriptor(
                        count=a.size, op=pccl.ReduceOp.SUM, tag=k,
                        operand_descriptor=pccl.ReduceOperandDescriptor(
                            datatype=pccl.DataType.FLOAT,
                            distribution_hint=pccl.DistributionHint.NORMAL),
                        quantization_options=pccl.QuantizationOptions(
                            quantized_datatype=pccl.DataType.FLOAT,
                            algorithm=pccl.QuantizationAlgorithm.NONE))
                    # PCCL's raw form, with keywords: the caller keeps the arrays alive
                    descs.append(pccl.ReduceOpDescriptor(sendbuf_ptr=a.ctypes.data,
                                                         recvbuf_ptr=a.ctypes.data,
                                                         reduce_descriptor=rd))
                # and the stress test's from_torch(send=, recv=, reduce_descriptor=)
                t = tsends[i]
                descs.append(pccl.ReduceOpDescriptor.from_torch(
                    send=t, recv=t, reduce_descriptor=pccl.ReduceDescriptor(
                        count=t.numel(), op=pccl.ReduceOp.SUM, tag=3,
                        operand_descriptor=pccl.ReduceOperandDescriptor(
                            datatype=pccl.DataType.FLOAT,
                            distribution_hint=pccl.DistributionHint.NORMAL),
                        quantization_options=pccl.QuantizationOptions(
                            quantized_datatype=pccl.DataType.FLOAT,
                            algorithm=pccl.QuantizationAlgorithm.NONE))))
                info = comms[i].all_reduce_multiple_with_retry(descs, max_in_flight=8)
                x = np.full(5, i + 1, np.int64)
                one = comms[i].all_reduce(x, x, op=pccl.ReduceOp.SUM, tag=9)
                out[i] = (info.local_world_size, one.local_world_size, x.tolist())
            except Exception as e:  # noqa: BLE001
                errors.append(e)

        threads = [threading.Thread(target=peer, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert not errors and not any(t.is_alive() for t in threads), errors
        for i in range(2):
            assert out[i] == (2, 2, [3] * 5)
            for k in range(3):
                assert np.array_equal(sends[i][k], np.arange(1000, dtype=np.float32) * 3 + 2 * k)
            assert tsends[i].tolist() == [3.0] * 64
        for c in comms:
            c.close()


# ---------------------------------------------------------------- constructors and conversions


def test_pccl_error_constructor_and_message():
    e = pccl.PCCLError(pccl.Result.TOO_FEW_PEERS, "pcclAllReduceAsync")
    assert type(e) is pccl.PCCLError
    assert e.result is pccl.Result.TOO_FEW_PEERS and e.function == "pcclAllReduceAsync"
    assert e.args == ("pcclAllReduceAsync failed with error: TOO_FEW_PEERS",)
    assert str(e) == "pcclAllReduceAsync failed with error: TOO_FEW_PEERS: TOO_FEW_PEERS"
    e = pccl.PCCLError(8, func_name="pcclAwaitAsyncReduce")
    assert e.result is pccl.Result.RANK_CONNECTION_LOST
    assert str(e) == ("pcclAwaitAsyncReduce failed with error: RANK_CONNECTION_LOST: "
                      "RANK_CONNECTION_LOST")
    with pytest.raises(pccl.PCCLError) as ei:
        pccl.PCCLError.check(4, "pcclUpdateTopology")
    assert type(ei.value) is pccl.InvalidUsage
    assert str(ei.value) == "pcclUpdateTopology failed with error: INVALID_USAGE: INVALID_USAGE"
    pccl.PCCLError.check(pccl.Result.SUCCESS, "f")  # no raise
    # pccl's own refusals keep a message of their own
    e = pccl.InvalidArgument("tag must be an int")
    assert e.result is pccl.Result.INVALID_ARGUMENT and e.function is None
    assert str(e) == "tag must be an int: INVALID_ARGUMENT"


def test_star_import_has_pccl10_names():
    ns = {}
    exec("from pccl import *", ns)  # noqa: S102
    for name in ["cuda", "Communicator", "MasterNode", "ReduceOp", "Attribute",
                 "SharedStateSyncStrategy", "DataType", "DistributionHint",
                 "QuantizationAlgorithm", "ReduceOperandDescriptor", "QuantizationOptions",
                 "ReduceDescriptor", "TensorInfo", "SharedState", "SharedStateSyncInfo",
                 "ReduceInfo", "ReduceOpDescriptor", "AsyncReduceHandle", "PCCLError"]:
        assert ns[name] is getattr(pccl, name), name
    assert ns["cuda"].is_available() is False
    from pccl._pccl import ReduceDescriptor, ReduceOpDescriptor  # PCCL's internal module name

    assert ReduceOpDescriptor is pccl.ReduceOpDescriptor and ReduceDescriptor is pccl.ReduceDescriptor


def test_reduce_op_descriptor_to_c():
    a = np.zeros(6, np.float32)
    b = np.zeros(6, np.float32)
    rd = pccl.ReduceDescriptor(6, pccl.ReduceOp.MAX, 77,
                               pccl.ReduceOperandDescriptor(pccl.DataType.FLOAT,
                                                            pccl.DistributionHint.UNIFORM),
                               pccl.QuantizationOptions(pccl.DataType.UINT8,
                                                        pccl.QuantizationAlgorithm.MIN_MAX))
    d = pccl.ReduceOpDescriptor(sendbuf_ptr=a.ctypes.data, recvbuf_ptr=b.ctypes.data,
                                reduce_descriptor=rd)
    assert (d.sendbuf_ptr, d.recvbuf_ptr, d.reduce_descriptor) == (a.ctypes.data, b.ctypes.data, rd)
    assert (d.sendbuf, d.recvbuf) == (d.sendbuf_ptr, d.recvbuf_ptr)

    def fields(c):
        q = c.descriptor
        return (c.sendbuf, c.recvbuf, q.count, q.op, q.tag, q.src_descriptor.datatype,
                q.src_descriptor.distribution_hint, q.quantization_options.quantized_datatype,
                q.quantization_options.algorithm)

    want = (a.ctypes.data, b.ctypes.data, 6, 3, 77, 10, 2, 0, 1)
    c = d.to_c()
    assert isinstance(c, _lib.CReduceOpDescriptor) and fields(c) == want
    arr = (_lib.CReduceOpDescriptor * 2)()
    assert d.to_c_inpl(arr[1]) is None
    assert fields(arr[1]) == want and arr[0].descriptor.count == 0
    # from_numpy with a descriptor of fewer elements reduces a prefix, more is refused
    rd.count = 4
    assert pccl.ReduceOpDescriptor.from_numpy(a, b, rd).reduce_descriptor.count == 4
    rd.count = 7
    with pytest.raises(pccl.SizeMismatchError):
        pccl.ReduceOpDescriptor.from_numpy(a, b, rd)


def test_tensor_info_and_shared_state_like_pccl():
    a = np.arange(5, dtype=np.int64)
    ti = pccl.TensorInfo.from_numpy(tensor=a, name="a", allow_content_inequality=True)
    assert (ti.name, ti.data_ptr, ti.numel, ti.dtype, ti.device_type, ti.allow_content_inequality) == \
        ("a", a.ctypes.data, 5, pccl.DataType.INT64, pccl.DeviceType.CPU, True)
    raw = pccl.TensorInfo("raw", a.ctypes.data, numel=5, dtype=pccl.DataType.INT64,
                          device_type=pccl.DeviceType.CPU, allow_content_inequality=False)
    assert (raw.data_ptr, raw.numel) == (a.ctypes.data, 5)
    with pytest.raises(ValueError) as ei:
        pccl.TensorInfo("x", 0, numel=1, dtype=pccl.DataType.FLOAT, device_type=pccl.DeviceType.CPU,
                        allow_content_inequality=False)
    assert ei.value.args == ("Invalid data pointer: nullptr",)
    with pytest.raises(ValueError):
        pccl.TensorInfo("x", data_ptr=0, numel=1, dtype=pccl.DataType.FLOAT,
                        device_type=pccl.DeviceType.CPU, allow_content_inequality=False)
    with pytest.raises(AssertionError) as ei:
        pccl.SharedState([])
    assert ei.value.args == ("At least one tensor info must be provided",)
    s = pccl.SharedState([ti, raw])
    s.revision = 41
    s.push_revision()
    assert s.revision == 42 and len(s) == 2
    assert pccl.DeviceType.from_torch_device_type("meta") is None
    assert pccl.DeviceType.from_torch_device_type("mps") is None
    assert pccl.DeviceType.from_torch_device_type("cpu") is pccl.DeviceType.CPU
    assert pccl.DeviceType.from_torch_device_type("cuda") is pccl.DeviceType.CUDA


def test_refused_tensors_raise_pccl10_builtin_classes():
    """PCCL 1.0 asserts (AssertionError) on non-contiguous, mismatched or non-CPU inputs and
    raises ValueError for a wrong type: pccl's classes are those too."""
    c = pccl.Communicator("127.0.0.1:1", 0)  # never connected: refused before C
    a = np.arange(10, dtype=np.float32)
    for send, recv, builtin in ((a[::2], np.zeros(5, np.float32), AssertionError),
                                (a, np.zeros(10, np.float64), AssertionError),
                                (a, np.zeros(11, np.float32), AssertionError),
                                ([1.0], [2.0], ValueError)):
        with pytest.raises(builtin) as ei:
            c.all_reduce_async(send, recv, op=pccl.ReduceOp.SUM)
        assert isinstance(ei.value, pccl.InvalidArgument)
    with pytest.raises(AssertionError):
        pccl.TensorInfo.from_numpy(a[::2], "x")
    torch = pytest.importorskip("torch")
    with pytest.raises(AssertionError):
        c.all_reduce(torch.zeros(4, device="meta"), torch.zeros(4, device="meta"), op=pccl.ReduceOp.SUM)
    with pytest.raises(ValueError):
        c.all_reduce(torch.zeros(4, dtype=torch.complex64), torch.zeros(4, dtype=torch.complex64),
                     op=pccl.ReduceOp.SUM)
    c.close()


def test_dtype_conversions_reject_like_pccl():
    assert pccl.DataType.from_numpy_dtype(np.dtype(np.float32)) is pccl.DataType.FLOAT
    with pytest.raises(AssertionError):  # PCCL: assert dtype_clazz in dtype_map
        pccl.DataType.from_numpy_dtype(np.dtype(np.complex64))
    torch = pytest.importorskip("torch")
    assert pccl.DataType.from_torch_dtype(torch.bfloat16) is pccl.DataType.BFLOAT16
    with pytest.raises(ValueError) as ei:  # PCCL: ValueError(f'Unsupported dtype: {dtype}')
        pccl.DataType.from_torch_dtype(torch.complex64)
    assert ei.value.args == ("Unsupported dtype: torch.complex64",)
