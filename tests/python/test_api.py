"""In-process tests of the binding: header conformance (enums, result table,
struct layouts), library lookup, error classes, argument checking, MasterNode,
and two communicators on threads of one process."""

import ctypes
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import harness
import pccl
from pccl import _lib

# The enums and the result table live in pccl_types.h (included by pccl.h).
HEADER = harness.REPO / "include" / "pccl_types.h"


# ---------------------------------------------------------------- header conformance


def c_enums():
    """{enum type name: [(enumerator, value)]} from include/pccl_types.h, aliases resolved."""
    text = HEADER.read_text()
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    out = {}
    for body, name in re.findall(r"typedef enum \w+ \{(.*?)\} (\w+);", text, re.S):
        vals, items = {}, []
        for ename, expr in re.findall(r"(\w+)\s*=\s*([\w]+)", body):
            v = int(expr, 0) if expr[0].isdigit() else vals[expr]
            vals[ename] = v
            items.append((ename, v))
        out[name] = items
    return out


ENUM_MAP = {
    "pcclResult_t": (pccl.Result, "pccl"),
    "pcclDataType_t": (pccl.DataType, "pccl"),
    "pcclDeviceType_t": (pccl.DeviceType, "pcclDevice"),
    "pcclRedOp_t": (pccl.ReduceOp, "pccl"),
    "pcclAttribute_t": (pccl.Attribute, "PCCL_ATTRIBUTE_"),
    "pcclSharedStateSyncStrategy_t": (pccl.SharedStateSyncStrategy, "PCCL_SHARED_STATE_SYNC_STRATEGY_"),
    "pcclDistributionHint_t": (pccl.DistributionHint, "pcclDistribution"),
    "pcclQuantizationAlgorithm_t": (pccl.QuantizationAlgorithm, "pcclQuant"),
}


def norm(s):
    return s.replace("_", "").upper()


def test_enums_match_header():
    enums = c_enums()
    assert set(ENUM_MAP) <= set(enums), set(ENUM_MAP) - set(enums)
    for cname, (pyenum, prefix) in ENUM_MAP.items():
        py = {norm(k): int(v) for k, v in pyenum.__members__.items()}
        cvals = set()
        for ename, value in enums[cname]:
            cvals.add(value)
            if not ename.startswith(prefix):
                continue  # the doc-only aliases (PCCL_DISTRIBUTION_HINT_*, ...)
            key = norm(ename[len(prefix):])
            assert key in py, (cname, ename)
            assert py[key] == value, (cname, ename, py[key], value)
        assert set(py.values()) == cvals, (cname, set(py.values()) ^ cvals)


def test_result_table_matches_header():
    text = HEADER.read_text()
    rows = re.findall(r'X\((pccl\w+), (\d+), "([^"]*)"\)', text)
    assert len(rows) == int(re.search(r"#define PCCL_RESULT_COUNT \((\d+)\)", text).group(1))
    for cname, value, message in rows:
        assert pccl._errors.RESULT_INFO[int(value)] == (cname, message)


def test_struct_layouts_match_c(tmp_path):
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        pytest.skip("no C compiler")
    lines = ["#include <stdio.h>", "#include <stddef.h>", '#include "pccl.h"', "int main(void) {"]
    for cname, cls in _lib.C_STRUCTS.items():
        lines.append(f'printf("{cname} sizeof %zu %zu\\n", sizeof({cname}), _Alignof({cname}));')
        for fname, _ in cls._fields_:
            lines.append(f'printf("{cname} {fname} %zu\\n", offsetof({cname}, {fname}));')
    lines += ["return 0; }"]
    src = tmp_path / "layout.c"
    src.write_text("\n".join(lines) + "\n")
    exe = tmp_path / "layout"
    subprocess.run([cc, "-std=c11", "-I", str(harness.REPO / "include"), str(src), "-o", str(exe)],
                   check=True, timeout=60)
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True, timeout=10).stdout
    c = {}
    for line in out.splitlines():
        parts = line.split()
        c[(parts[0], parts[1])] = tuple(map(int, parts[2:]))
    n = 0
    for cname, cls in _lib.C_STRUCTS.items():
        assert c[(cname, "sizeof")] == (ctypes.sizeof(cls), ctypes.alignment(cls)), cname
        for fname, _ in cls._fields_:
            assert c[(cname, fname)] == (getattr(cls, fname).offset,), (cname, fname)
            n += 1
    assert n > 40


def test_exported_functions_are_declared():
    nm = shutil.which("nm")
    if nm is None:
        pytest.skip("no nm")
    out = subprocess.run([nm, "-D", "--defined-only", harness.lib_path()], capture_output=True,
                         text=True, check=True).stdout
    exported = set(re.findall(r" T (pccl\w+)$", out, re.M))
    assert exported == set(_lib.PROTOTYPES), exported ^ set(_lib.PROTOTYPES)


def header_functions():
    """{name: parameter count} of every PCCL_EXPORT function of include/pccl.h."""
    text = re.sub(r"/\*.*?\*/", "", (harness.REPO / "include" / "pccl.h").read_text(), flags=re.S)
    out = {}
    for decl in re.findall(r"^PCCL_EXPORT\s+([^;]*);", text, re.M):
        # the name: the first pccl identifier that is not a type (it may be parenthesized)
        m = next(m for m in re.finditer(r"\bpccl\w+", decl) if not m.group().endswith("_t"))
        params = decl[decl.index("(", m.end()) + 1:decl.rindex(")")].strip()
        out[m.group()] = 0 if params in ("", "void") else params.count(",") + 1
    return out


def test_prototypes_have_the_header_arity():
    header = header_functions()
    assert len(header) == 67, sorted(header)
    assert set(header) == set(_lib.PROTOTYPES), set(header) ^ set(_lib.PROTOTYPES)
    for name, n in header.items():
        assert len(_lib.PROTOTYPES[name]) == n, (name, n, len(_lib.PROTOTYPES[name]))
    lib = _lib.lib()
    assert lib.pcclWorkFree.restype is None  # void
    lib.pcclWorkFree(None)  # NULL is fine


def test_collective_options_init_matches_header(tmp_path):
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        pytest.skip("no C compiler")
    src = tmp_path / "init.c"
    src.write_text(
        '#include <stddef.h>\n#include <stdio.h>\n#include "pccl.h"\nint main(void) {\n'
        "const pcclCollectiveOptions_t o = PCCL_COLLECTIVE_OPTIONS_INIT;\n"
        'printf("%u %u %llu %u %u %.17g %u %d %d %u\\n", (unsigned)o.struct_size,\n'
        "(unsigned)o.timeout_ms, (unsigned long long)o.tag, (unsigned)o.flags,\n"
        "(unsigned)o.reserved, o.premul_scalar, (unsigned)PCCL_COLLECTIVE_ABORT_ON_ERROR,\n"
        "(int)o.quantization_options.quantized_datatype, (int)o.quantization_options.algorithm,\n"
        "(unsigned)offsetof(pcclCollectiveOptions_t, quantization_options));\nreturn 0; }\n")
    exe = tmp_path / "init"
    subprocess.run([cc, "-std=c11", "-I", str(harness.REPO / "include"), str(src), "-o", str(exe)],
                   check=True, timeout=60)
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True, timeout=10).stdout
    o = _lib.CollectiveOptions.init()
    fields = [o.struct_size, o.timeout_ms, o.tag, o.flags, o.reserved, o.premul_scalar]
    q = o.quantization_options
    assert out.split() == [str(v) for v in fields[:5]] + [
        "%.17g" % fields[5], str(_lib.COLLECTIVE_ABORT_ON_ERROR), str(q.quantized_datatype),
        str(q.algorithm), str(_lib.CollectiveOptions.quantization_options.offset)]


# ---------------------------------------------------------------- library lookup


def run_py(code, env, cwd="/"):
    return subprocess.run([sys.executable, "-c", code], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=60)


def test_library_lookup_env_var_and_errors(tmp_path):
    env = harness.child_env()
    r = run_py("import pccl; print(pccl.library_path()); print(pccl.get_version())", env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0] == harness.lib_path()
    assert r.stdout.splitlines()[1] == "(0, 1, 0)"
    # an explicit PCCL_LIBRARY that does not exist is an error (never silently replaced)
    env["PCCL_LIBRARY"] = str(tmp_path / "nope" / "libpccl.so")
    r = run_py("import pccl\ntry:\n pccl.Communicator('127.0.0.1:1')\n"
               "except pccl.LibraryNotFoundError as e:\n print('NOTFOUND', e.tried)\n", env)
    assert r.returncode == 0, r.stderr
    assert "NOTFOUND" in r.stdout and str(tmp_path / "nope") in r.stdout
    # a file that is not a library
    bad = tmp_path / "libpccl.so"
    bad.write_text("not an ELF file")
    env["PCCL_LIBRARY"] = str(bad)
    r = run_py("import pccl\ntry:\n pccl.get_version()\nexcept ImportError as e:\n print('ERR', e)\n", env)
    assert "ERR libpccl not found" in r.stdout, r.stdout + r.stderr


def test_library_lookup_build_tree_and_loader(tmp_path):
    env = harness.child_env()
    del env["PCCL_LIBRARY"]
    # from the source tree: a build tree of this checkout is found
    r = run_py("import pccl; print(pccl.library_path())", env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().startswith(str(harness.REPO / "build")), r.stdout
    # a copy of the package outside the checkout: the dynamic loader's path (LD_LIBRARY_PATH)
    shutil.copytree(harness.BINDINGS / "pccl", tmp_path / "pkg" / "pccl")
    env["PYTHONPATH"] = str(tmp_path / "pkg")
    env["LD_LIBRARY_PATH"] = os.path.dirname(harness.lib_path())
    r = run_py("import pccl; print(pccl.__file__); print(pccl.library_path())", env)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith(str(tmp_path)), lines
    assert os.path.samefile(lines[1], harness.lib_path()), lines


def test_venv_install_offline(tmp_path):
    """pip install --no-build-isolation --no-index into a --system-site-packages venv."""
    probe = subprocess.run([sys.executable, "-c", "import ensurepip, setuptools, wheel"],
                           capture_output=True, timeout=60)
    if probe.returncode != 0:
        pytest.skip("needs python3-venv, python3-setuptools and python3-wheel (Debian packages)")
    src = tmp_path / "src"
    shutil.copytree(harness.BINDINGS, src, ignore=shutil.ignore_patterns("build", "*.egg-info",
                                                                         "__pycache__"))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True,
                   timeout=120)
    # setup.py bundles libpccl (docs/packaging.md): the copy outside the checkout names the
    # repository, and this test's build tree is reused rather than compiled again
    pip_env = dict(os.environ, PCCL_SOURCE_DIR=str(harness.REPO),
                   PCCL_WHEEL_BUILD_DIR=str(Path(harness.lib_path()).parents[2]))
    r = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q",
                        "--no-build-isolation", "--no-index", str(src)],
                       capture_output=True, text=True, timeout=180, env=pip_env)
    assert r.returncode == 0, r.stdout + r.stderr
    env = {k: v for k, v in harness.child_env().items() if k != "PYTHONPATH"}
    code = ("import pccl, numpy; print(pccl.__file__); print(pccl.library_path());"
            "m = pccl.MasterNode('127.0.0.1:0'); m.run(); print(m.port > 0); m.close()")
    r = subprocess.run([str(venv / "bin" / "python"), "-c", code], env=env, cwd=str(tmp_path),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith(str(venv)), lines
    assert lines[1] == harness.lib_path() and lines[2] == "True", lines


# ---------------------------------------------------------------- errors


def test_error_classes():
    assert set(pccl.ERROR_CLASSES) == set(pccl.Result) - {pccl.Result.SUCCESS}
    seen = set()
    for code in range(1, 19):
        e = pccl.error_for(code, "pcclX")
        assert type(e) is pccl.ERROR_CLASSES[pccl.Result(code)]
        assert isinstance(e, pccl.PCCLError)
        assert e.result == code and e.function == "pcclX"
        # PCCL 1.0's message: "<func> failed with error: <NAME>", str() appends ": <NAME>"
        name = pccl.Result(code).name
        assert e.args == (f"pcclX failed with error: {name}",)
        assert str(e) == f"pcclX failed with error: {name}: {name}"
        assert e.describe.startswith(pccl._errors.RESULT_INFO[code][0] + " (")
        seen.add(type(e))
    assert len(seen) == 18  # a distinct class per code
    assert pccl.error_for(12).__class__ is pccl.OptimizeTopologyFailed
    assert isinstance(pccl.error_for(13), TimeoutError)
    assert isinstance(pccl.error_for(14), OSError)
    e = pccl.error_for(99, "pcclY")
    assert type(e) is pccl.PCCLError and e.result == 99
    pccl.PCCLError.check(0, "f")
    with pytest.raises(pccl.RankConnectionLost):
        pccl.PCCLError.check(8, "f")
    for cls, extra in ((pccl.UnsupportedDTypeError, TypeError), (pccl.DTypeMismatchError, TypeError),
                       (pccl.NonContiguousTensorError, ValueError),
                       (pccl.SizeMismatchError, ValueError), (pccl.ReadOnlyBufferError, ValueError),
                       (pccl.UnsupportedDeviceError, ValueError),
                       (pccl.UnsupportedTensorTypeError, TypeError)):
        assert issubclass(cls, pccl.InvalidArgument) and issubclass(cls, extra)
        assert cls().result == pccl.Result.INVALID_ARGUMENT


@pytest.fixture
def comm():
    c = pccl.Communicator("127.0.0.1:1", 0)  # never connected
    yield c
    c.close()


def test_bad_numpy_inputs(comm):
    a = np.arange(10, dtype=np.int32)
    cases = [
        (np.zeros(4, np.complex64), np.zeros(4, np.complex64), pccl.UnsupportedDTypeError),
        (np.zeros(4, np.bool_), np.zeros(4, np.bool_), pccl.UnsupportedDTypeError),
        (np.zeros(4, ">i4"), np.zeros(4, ">i4"), pccl.UnsupportedDTypeError),
        (np.zeros(4, object), np.zeros(4, object), pccl.UnsupportedDTypeError),
        (a[::2], np.zeros(5, np.int32), pccl.NonContiguousTensorError),
        (np.zeros((4, 3), np.float32).T, np.zeros((3, 4), np.float32), pccl.NonContiguousTensorError),
        (np.zeros(5, np.int32), np.zeros(5, np.int32)[::-1], pccl.NonContiguousTensorError),
        (a, np.zeros(10, np.float32), pccl.DTypeMismatchError),
        (a, np.zeros(11, np.int32), pccl.SizeMismatchError),
        (a, np.broadcast_to(np.int32(0), (10,)), pccl.NonContiguousTensorError),  # stride 0
        ([1, 2, 3], [0, 0, 0], pccl.UnsupportedTensorTypeError),
    ]
    for send, recv, exc in cases:
        with pytest.raises(exc):
            comm.all_reduce(send, recv)
        with pytest.raises(exc):
            comm.all_reduce_async(send, recv)
    ro = np.zeros(10, np.int32)
    ro.setflags(write=False)
    with pytest.raises(pccl.ReadOnlyBufferError):
        comm.all_reduce(a, ro)
    big = np.zeros(20, np.int32)
    with pytest.raises(pccl.OverlappingBuffersError):
        comm.all_reduce(big[:10], big[5:15])
    with pytest.raises(pccl.DTypeMismatchError):
        comm.all_reduce(a, a, operand_descriptor=pccl.ReduceOperandDescriptor(pccl.DataType.FLOAT))
    with pytest.raises(pccl.InvalidArgument):
        comm.all_reduce(a, a, tag=-1)
    for op in (pccl.ReduceOp.BAND, pccl.ReduceOp.BOR, pccl.ReduceOp.BXOR):
        for ft in (np.float16, np.float32, np.float64):  # bitwise ops: integer types only
            with pytest.raises(pccl.InvalidArgument):
                comm.all_reduce(np.zeros(4, ft), np.zeros(4, ft), op=op)
            with pytest.raises(pccl.InvalidArgument):
                comm.all_reduce_async(np.zeros(4, ft), np.zeros(4, ft), op=op)
    with pytest.raises(pccl.NonContiguousTensorError):
        pccl.TensorInfo.from_numpy(a[::2], "x")
    with pytest.raises(pccl.ReadOnlyBufferError):
        pccl.TensorInfo.from_numpy(ro, "x")
    with pytest.raises(pccl.UnsupportedTensorTypeError):
        pccl.TensorInfo.from_numpy([1.0], "x")
    with pytest.raises(pccl.InvalidArgument):
        pccl.SharedState([pccl.TensorInfo("x", a), pccl.TensorInfo("x", np.zeros(3, np.int8))])
    with pytest.raises(pccl.InvalidArgument):
        pccl.TensorInfo("", a)


def test_bad_torch_inputs(comm):
    torch = pytest.importorskip("torch")
    t = torch.arange(12, dtype=torch.float32)
    with pytest.raises(pccl.UnsupportedDTypeError):
        comm.all_reduce(torch.zeros(4, dtype=torch.complex64), torch.zeros(4, dtype=torch.complex64))
    with pytest.raises(pccl.UnsupportedDTypeError):
        comm.all_reduce(torch.zeros(4, dtype=torch.bool), torch.zeros(4, dtype=torch.bool))
    m = t.view(3, 4)
    with pytest.raises(pccl.NonContiguousTensorError):
        comm.all_reduce(m.t(), torch.zeros(4, 3))
    with pytest.raises(pccl.NonContiguousTensorError):
        pccl.TensorInfo.from_torch(m.t(), "w")
    with pytest.raises(pccl.UnsupportedDeviceError):
        comm.all_reduce(torch.zeros(4, device="meta"), torch.zeros(4, device="meta"))
    with pytest.raises(pccl.UnsupportedTensorTypeError):
        comm.all_reduce(torch.zeros(4).to_sparse(), torch.zeros(4).to_sparse())
    with pytest.raises(pccl.DTypeMismatchError):
        comm.all_reduce(t, torch.zeros(12, dtype=torch.float64))
    with pytest.raises(pccl.UnsupportedTensorTypeError):
        pccl.TensorInfo.from_torch(np.zeros(3), "x")
    # a parameter (requires_grad) and a 0-dim tensor are fine for shared state, in place
    p = torch.nn.Parameter(torch.zeros(3, 2))
    ti = pccl.TensorInfo.from_torch(p, "p")
    assert ti.data_ptr == p.data_ptr() and ti.numel == 6 and ti.dtype == pccl.DataType.FLOAT
    s = pccl.TensorInfo.from_torch(torch.tensor(5.0), "step")
    assert s.numel == 1
    bf = pccl.TensorInfo.from_torch(torch.zeros(2, dtype=torch.bfloat16), "bf")
    assert bf.dtype == pccl.DataType.BFLOAT16


def test_unconnected_communicator_is_invalid_usage(comm):
    a = np.arange(10, dtype=np.int32)
    state = pccl.SharedState([pccl.TensorInfo.from_numpy(np.zeros(4, np.float32), "w")])
    calls = {
        "pcclAllReduce": lambda: comm.all_reduce(a, a),
        "pcclAllReduceAsync": lambda: comm.all_reduce_async(a, a),
        "pcclUpdateTopology": comm.update_topology,
        "pcclOptimizeTopology": comm.optimize_topology,
        "pcclArePeersPending": comm.are_peers_pending,
        "pcclGetAttribute": lambda: comm.get_attribute(pccl.Attribute.GLOBAL_WORLD_SIZE),
        "pcclSynchronizeSharedState": lambda: comm.sync_shared_state(state),
    }
    for fn, call in calls.items():
        with pytest.raises(pccl.InvalidUsage) as ei:
            call()
        assert ei.value.result == pccl.Result.INVALID_USAGE and ei.value.function == fn
    comm.close()
    with pytest.raises(pccl.InvalidUsage):
        comm.update_topology()


def test_connect_to_nothing_is_master_connection_failed():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    c = pccl.Communicator(f"127.0.0.1:{port}", 0, timeout_ms=5000)
    t0 = time.monotonic()
    with pytest.raises(pccl.MasterConnectionFailed):
        c.connect(n_attempts=2, retry_delay=0.05)
    assert time.monotonic() - t0 < 15
    c.close()


def test_run_token_mismatch_is_authentication_failed(monkeypatch):
    """libpccl reads PCCL_RUN_TOKEN when the master is created and at each connect: a peer
    without the master's token, with another one, or with one the master lacks is refused,
    at once and without retries."""
    monkeypatch.setenv("PCCL_RUN_TOKEN", "a" * 32)
    with pccl.MasterNode("127.0.0.1:0") as m:
        m.run()
        for token in (None, "b" * 32):
            if token is None:
                monkeypatch.delenv("PCCL_RUN_TOKEN")
            else:
                monkeypatch.setenv("PCCL_RUN_TOKEN", token)
            c = pccl.Communicator(f"127.0.0.1:{m.port}", 0, timeout_ms=5000)
            t0 = time.monotonic()
            with pytest.raises(pccl.AuthenticationFailed) as ei:
                c.connect(n_attempts=5, retry_delay=2.0)
            assert time.monotonic() - t0 < 2.0  # not retried
            assert ei.value.result == pccl.Result.AUTHENTICATION_FAILED
            assert ei.value.describe == "pcclAuthenticationFailed (authentication failed)"
            c.close()
    monkeypatch.delenv("PCCL_RUN_TOKEN")
    with pccl.MasterNode("127.0.0.1:0") as m:
        m.run()
        monkeypatch.setenv("PCCL_RUN_TOKEN", "a" * 32)
        c = pccl.Communicator(f"127.0.0.1:{m.port}", 0, timeout_ms=5000)
        with pytest.raises(pccl.AuthenticationFailed):
            c.connect(n_attempts=1)
        c.close()


def test_address_parsing():
    sa = pccl.parse_address("10.1.2.3:4567")
    assert sa.inet.protocol == 0 and list(sa.inet.ipv4.data) == [10, 1, 2, 3] and sa.port == 4567
    sa = pccl.parse_address("[::1]:99")
    assert sa.inet.protocol == 1 and list(sa.inet.ipv6.data) == [0] * 15 + [1] and sa.port == 99
    assert pccl.parse_address("127.0.0.1").port == 48148
    assert list(pccl.parse_address("localhost:1").inet.ipv4.data) == [127, 0, 0, 1]
    for bad in ("1.2.3.4:x", "1.2.3.4:70000", "[::1", 5):
        with pytest.raises(pccl.InvalidArgument):
            pccl.parse_address(bad)
    # any pool size is accepted, as PCCL 1.0 (the library clamps values above 8)
    pccl.Communicator("127.0.0.1:1", 0, p2p_connection_pool_size=9).close()
    with pytest.raises(pccl.InvalidArgument):
        pccl.Communicator("127.0.0.1:1", 0, p2p_connection_pool_size=-1)


def test_dtype_mapping():
    for dt in pccl.DataType:
        if dt == pccl.DataType.BFLOAT16:
            with pytest.raises(ValueError):
                dt.to_numpy_dtype()
            continue
        npd = dt.to_numpy_dtype()
        assert pccl.DataType.from_numpy_dtype(npd) == dt and npd.itemsize == dt.size
    torch = pytest.importorskip("torch")
    for dt in pccl.DataType:
        try:
            td = dt.to_torch_dtype()
        except ValueError:
            assert dt.name in ("UINT16", "UINT32", "UINT64")  # torch 1.13 has no such types
            continue
        assert pccl.DataType.from_torch_dtype(td) == dt
        assert torch.empty(0, dtype=td).element_size() == dt.size


# ---------------------------------------------------------------- master and threads


def test_all_reduce_refuses_premul_sum():
    # pcclAllReduce has no place for the factor: libpccl refuses the op (before the
    # group's size is looked at), and the binding passes that through.
    assert int(pccl.ReduceOp.PREMUL_SUM) == 8
    m = pccl.MasterNode("127.0.0.1:0")
    m.run()
    c = pccl.Communicator(f"127.0.0.1:{m.port}", 0, timeout_ms=10000)
    try:
        c.connect(n_attempts=3, retry_delay=0.1)
        a = np.arange(4, dtype=np.float32)
        for call in (c.all_reduce, c.all_reduce_async):
            with pytest.raises(pccl.InvalidArgument) as ei:
                call(a, a, op=pccl.ReduceOp.PREMUL_SUM)
            assert ei.value.result == pccl.Result.INVALID_ARGUMENT
            assert ei.value.function in ("pcclAllReduce", "pcclAllReduceAsync")
        assert np.array_equal(a, np.arange(4, dtype=np.float32))  # untouched
        with pytest.raises(pccl.TooFewPeers):  # the same call with SUM gets further
            c.all_reduce(a, a, op=pccl.ReduceOp.SUM)
    finally:
        c.close()
        m.interrupt()
        m.await_termination()
        m.close()


def test_master_node_lifecycle():
    m = pccl.MasterNode("127.0.0.1:0")
    assert m.port > 0
    m.run()
    with pytest.raises(pccl.InvalidUsage):
        m.run()
    c = pccl.Communicator(f"127.0.0.1:{m.port}", 3, timeout_ms=10000)
    c.connect(n_attempts=3, retry_delay=0.1)
    attrs = [c.get_attribute(a) for a in pccl.Attribute]
    # alone in group 3; COPIED_BYTES(_HIGH): nothing yet; RANK 0 in a ring of one, EPOCH > 0
    assert attrs[:7] == [1, 1, 1, 1, 0, 0, 0] and attrs[7] > 0, attrs
    assert c.are_peers_pending() is False
    a = np.arange(4, dtype=np.float32)
    with pytest.raises(pccl.TooFewPeers):
        c.all_reduce(a, a)
    with pytest.raises(pccl.InvalidUsage):
        c.connect()  # already connected
    c.close()
    m.interrupt()
    m.await_termination()
    m.close()
    m.close()  # idempotent
    with pytest.raises(pccl.PCCLSystemError):
        busy = socket.socket()
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        try:
            pccl.MasterNode(f"127.0.0.1:{busy.getsockname()[1]}")
        finally:
            busy.close()


def test_two_communicators_on_threads():
    """ctypes releases the GIL: two peers of one process run collectives on two threads."""
    with pccl.MasterNode("127.0.0.1:0") as m:
        m.run()
        comms = [pccl.Communicator(f"127.0.0.1:{m.port}", 0, timeout_ms=20000) for _ in range(2)]
        results, errors = {}, []

        def peer(i):
            try:
                c = comms[i]
                c.connect(n_attempts=3, retry_delay=0.1)
                deadline = time.monotonic() + 20
                while c.get_attribute(pccl.Attribute.GLOBAL_WORLD_SIZE) < 2:
                    assert time.monotonic() < deadline
                    if c.are_peers_pending() or i == 0:
                        c.update_topology()
                    time.sleep(0.01)
                x = np.full(1000, i + 1, dtype=np.int64)
                h = c.all_reduce_async(x, x, op=pccl.ReduceOp.SUM, tag=5)
                ok, status, info = h.wait()
                state = pccl.SharedState([pccl.TensorInfo("x", np.full(3, 7 + i, np.int16))])
                sinfo = c.sync_shared_state(state)
                results[i] = (ok, status, info.world_size, int(x.sum()), state.tensor_infos[0].data.tolist(),
                              sinfo.rx_bytes)
            except Exception as e:  # noqa: BLE001
                errors.append(e)

        threads = [threading.Thread(target=peer, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert not any(t.is_alive() for t in threads)
        assert not errors, errors
        for i in range(2):
            assert results[i][:4] == (True, pccl.Result.SUCCESS, 2, 3000)
        # two different contents, no majority: both end with the same one
        assert results[0][4] == results[1][4] and results[0][4] in ([7] * 3, [8] * 3)
        assert sorted(r[5] for r in results.values()) == [0, 6]
        for c in comms:
            c.close()


def test_python_m_pccl_master(procs):
    """python3 -m pccl.master serves peers and stops cleanly on SIGTERM."""
    import signal

    pr = procs.spawn("pymaster", [sys.executable, "-m", "pccl.master", "--listen-address",
                                  "127.0.0.1:0"])
    m = harness.wait_for(lambda: re.search(r"^PORT (\d+)$", pr.output(), re.M), 20)
    assert m, pr.output()
    c = pccl.Communicator(f"127.0.0.1:{m.group(1)}", 0, timeout_ms=10000)
    c.connect(n_attempts=3, retry_delay=0.1)
    assert c.get_attribute(pccl.Attribute.GLOBAL_WORLD_SIZE) == 1
    c.close()
    pr.kill(signal.SIGTERM)
    assert pr.wait(20) == 0, pr.output()


def connected_pair(master):
    """Two communicators of this process admitted together (threads: connect blocks)."""
    comms = [pccl.Communicator(f"127.0.0.1:{master.port}", 0, timeout_ms=20000) for _ in range(2)]
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


def test_async_wait_timeout_keeps_the_operation():
    with pccl.MasterNode("127.0.0.1:0") as m:
        m.run()
        c0, c1 = connected_pair(m)
        x0 = np.arange(100, dtype=np.int32)
        x1 = np.arange(100, dtype=np.int32) * 10
        h0 = c0.all_reduce_async(x0, x0, op=pccl.ReduceOp.SUM, tag=42)
        # the other peer has not started tag 42: the wait times out, the op stays in flight
        ok, status, info = h0.wait(timeout_ms=200)
        assert (ok, status) == (False, pccl.Result.TIMEOUT)
        assert (info.local_world_size, info.tx_bytes, info.rx_bytes) == (0, 0, 0)
        assert not h0.done
        with pytest.raises(pccl.InvalidArgument):  # the tag is still in flight
            c0.all_reduce_async(x0, x0, tag=42)
        t = threading.Thread(target=lambda: c1.all_reduce(x1, x1, op=pccl.ReduceOp.SUM, tag=42))
        t.start()
        ok, status, info = h0.wait()
        t.join(20)
        assert (ok, status, info.world_size) == (True, pccl.Result.SUCCESS, 2) and h0.done
        assert h0.result().world_size == 2  # cached
        assert np.array_equal(x0, np.arange(100, dtype=np.int32) * 11) and np.array_equal(x0, x1)
        # the default (ENFORCE_POPULAR) and an explicit strategy of the shared-state sync
        s0 = pccl.SharedState([pccl.TensorInfo("w", np.full(5, 3, np.float64))])
        s1 = pccl.SharedState([pccl.TensorInfo("w", np.zeros(5, np.float64))])
        res = {}
        t = threading.Thread(target=lambda: res.setdefault(1, c1.sync_shared_state(
            s1, strategy=pccl.SharedStateSyncStrategy.RECEIVE_ONLY)))
        t.start()
        res[0] = c0.sync_shared_state(s0)
        t.join(20)
        assert (res[0].tx_bytes, res[0].rx_bytes) == (40, 0)
        assert (res[1].tx_bytes, res[1].rx_bytes) == (0, 40)
        assert s1.tensor_infos[0].data.tolist() == [3.0] * 5
        for c in (c0, c1):
            c.close()
