"""The TorchComms API on pccl: new_comm("pccl", "cpu", ...) and a TorchComm-shaped communicator.

Every op is one call of libpccl's collective set (include/pccl.h), on CPU tensors or numpy
arrays used in place. This module is `pccl.torchcomms`; it never imports (or shadows) an
installed `torchcomms` package. docs/python.md ("TorchComms") has the method table, the
rendezvous and the fault-tolerant mode.
"""

import atexit
import ctypes
import datetime
import logging
import os
import socket
import threading
import time
import weakref

from . import _core
from . import _lib as L
from ._collectives import Work, _ms, _seconds
from ._core import Communicator, MasterNode, _buffer_of, _is_torch
from ._errors import (
    DTypeMismatchError,
    OverlappingBuffersError,
    SizeMismatchError,
    UnsupportedDeviceError,
    UpdateTopologyFailed,
    error_for,
)
from ._types import Algorithm, Attribute, DataType, QuantizationAlgorithm

log = logging.getLogger("pccl.torchcomms")

BACKEND = "pccl"
DEFAULT_TIMEOUT_S = 600.0  # TorchComms' TORCHCOMM_TIMEOUT_SECONDS default
FINALIZE_WAIT_S = 60.0  # finalize waits at most this long for the other members
_FINALIZE_TAG = (1 << 61) | 0x46494E  # the finalize barrier's tag (outside _next_tag's)

__all__ = ["ReduceOp", "TorchComm", "TorchWork", "new_comm", "BACKEND"]


# --------------------------------------------------------------------------
# Reduction operations
# --------------------------------------------------------------------------


class ReduceOp:
    """A reduction: ReduceOp.SUM, PRODUCT, MIN, MAX, BAND, BOR, BXOR, AVG, PREMUL_SUM.

    ReduceOp.PREMUL_SUM(factor) is a premultiplied sum with this member's factor (each member
    may pass its own); the bare ReduceOp.PREMUL_SUM uses 1.0. Float types only."""

    __slots__ = ("name", "code", "factor")

    def __init__(self, name, code, factor=None):
        self.name = name
        self.code = code
        self.factor = factor

    def __call__(self, factor):
        if self.code != 8:
            raise TypeError(f"ReduceOp.{self.name} takes no factor")
        return ReduceOp(self.name, self.code, float(factor))

    def __eq__(self, other):
        return isinstance(other, ReduceOp) and (self.code, self.factor) == (other.code, other.factor)

    def __hash__(self):
        return hash((self.code, self.factor))

    def __repr__(self):
        return f"ReduceOp.{self.name}" + (f"({self.factor})" if self.factor is not None else "")


ReduceOp.SUM = ReduceOp("SUM", 0)
ReduceOp.AVG = ReduceOp("AVG", 1)
ReduceOp.PRODUCT = ReduceOp("PRODUCT", 2)
ReduceOp.MAX = ReduceOp("MAX", 3)
ReduceOp.MIN = ReduceOp("MIN", 4)
ReduceOp.BAND = ReduceOp("BAND", 5)
ReduceOp.BOR = ReduceOp("BOR", 6)
ReduceOp.BXOR = ReduceOp("BXOR", 7)
ReduceOp.PREMUL_SUM = ReduceOp("PREMUL_SUM", 8)


def _op(op):
    """(pcclRedOp_t, premul factor) of a ReduceOp, a pccl.ReduceOp or a name."""
    if isinstance(op, ReduceOp):
        return op.code, (1.0 if op.factor is None else op.factor)
    if isinstance(op, str) and hasattr(ReduceOp, op.upper()):
        return _op(getattr(ReduceOp, op.upper()))
    if isinstance(op, int) and not isinstance(op, bool) and 0 <= int(op) <= 8:
        return int(op), 1.0
    raise TypeError(f"op must be a pccl.torchcomms.ReduceOp, got {op!r}")


# --------------------------------------------------------------------------
# Options: timeouts, hints, environment
# --------------------------------------------------------------------------


def _env_bool(name, default):
    v = os.environ.get(name)
    if v is None or v.strip() == "":
        return default
    return v.strip().lower() in ("1", "true", "yes", "on")


# hints this module reads; any other "pccl::" hint (and every other hint) is ignored
_OP_HINTS = ("pccl::tag", "pccl::quantization", "pccl::quantized_dtype", "pccl::algorithm")
# Ops whose wire pccl may quantize (pccl::quantization); for the others the hint is ignored.
_QUANTIZED_OPS = ("all_reduce", "reduce", "reduce_scatter", "reduce_scatter_single")
_COMM_HINTS = ("pccl::master", "pccl::world_size", "pccl::heartbeat_ms", "pccl::master_evict_ms",
               "pccl::master_heartbeat_ms", "pccl::peer_group", "pccl::join_timeout_s")


def _quantization(hints, where):
    """pccl::quantization ("none", "min_max", "zero_point_scale") and pccl::quantized_dtype
    (a pccl DataType name, default "uint8") -> (algorithm, dtype) of pcclQuantizationOptions_t."""
    name = str(hints.get("pccl::quantization", "none")).strip().upper().replace("MINMAX", "MIN_MAX")
    if name not in QuantizationAlgorithm.__members__:
        raise ValueError(f"{where}: hint pccl::quantization must be one of "
                         f"{[m.lower() for m in QuantizationAlgorithm.__members__]}, got "
                         f"{hints['pccl::quantization']!r}")
    dt = str(hints.get("pccl::quantized_dtype", "uint8")).strip().upper()
    if dt not in DataType.__members__:
        raise ValueError(f"{where}: hint pccl::quantized_dtype must be a pccl dtype name "
                         f"({', '.join(m.lower() for m in DataType.__members__)}), got {dt.lower()!r}")
    return int(QuantizationAlgorithm[name]), int(DataType[dt])


def _check_hints(hints, known, where):
    if not hints:
        return {}
    if not isinstance(hints, dict):
        raise TypeError(f"hints must be a dict of str to str, got {type(hints).__name__}")
    for k in hints:
        if k not in known:
            log.debug("%s: hint %r ignored (not a pccl option here)", where, k)
    return hints


class TorchWork(Work):
    """An op's work object: is_completed(), wait(). wait() raises the op's PCCLError and
    returns True; wait(timeout) (seconds or timedelta) is a bounded wait (pccl.Timeout when
    still running; the op is not cancelled by it). pccl.Work (_collectives.py) is the rest."""

    def wait(self, timeout=None):
        super().wait(timeout)
        return True


# --------------------------------------------------------------------------
# Buffers
# --------------------------------------------------------------------------


def _buf(t, what, writable):
    if not (_is_torch(t) or type(t).__module__ == "numpy"):
        raise TypeError(f"{what}: expected a torch.Tensor or numpy.ndarray, got {type(t).__name__}")
    return _buffer_of(t, what, writable=writable)


def _same_dtype(a, b, what):
    if a.dtype != b.dtype:
        raise DTypeMismatchError(f"{what}: dtype {b.dtype.name} differs from {a.dtype.name}")


def _ptr_array(bufs):
    arr = (ctypes.c_void_p * max(1, len(bufs)))()
    for i, b in enumerate(bufs):
        arr[i] = b.ptr
    return arr


def _shape(t):
    return tuple(int(d) for d in t.shape)


def _check_world_shape(big, small, n, what):
    """big holds n blocks of small's shape: their concatenation along dim 0, or their stack
    (torch.distributed's rule for all_gather_into_tensor / reduce_scatter_tensor)."""
    bs, ss = _shape(big), _shape(small)
    cat = (n * ss[0],) + ss[1:] if ss else (n,)
    if bs != cat and bs != (n,) + ss:
        raise SizeMismatchError(f"{what}: shape {bs} is neither the concatenation {cat} nor the "
                                f"stack {(n,) + ss} of the world's ({n}) blocks of shape {ss}")


def _rows(t):
    shape = tuple(t.shape)
    if len(shape) == 0:
        raise ValueError("all_to_all_v_single: tensors need at least one dimension")
    return shape[0]


# --------------------------------------------------------------------------
# Rendezvous
# --------------------------------------------------------------------------


def _local_host():
    h = os.environ.get("PCCL_MASTER_HOST")
    if h:
        return h
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("10.255.255.255", 1))
            ip = s.getsockname()[0]
            if ip and not ip.startswith("0."):
                return ip
    except OSError:
        pass
    return "127.0.0.1"


class _EnvWithout:
    """Removes environment variables while libpccl reads them (abort_process_on_timeout_or_error=False
    must win over TORCHCOMM_ABORT_ON_ERROR / PCCL_ABORT_ON_ERROR, read by pcclConnect)."""

    def __init__(self, names):
        self.names = names
        self.saved = {}

    def __enter__(self):
        for n in self.names:
            if n in os.environ:
                self.saved[n] = os.environ.pop(n)

    def __exit__(self, *exc):
        os.environ.update(self.saved)


def _world_size_from(hints):
    for v in (hints.get("pccl::world_size"), os.environ.get("TORCHCOMM_SIZE"),
              os.environ.get("WORLD_SIZE")):
        if v:
            return int(v)
    return None


def _join(comm, world, deadline):
    """update_topology until the group has `world` members (the admissions of new peers)."""
    while True:
        if comm.get_attribute(Attribute.PEER_GROUP_WORLD_SIZE) >= world and \
                comm.get_attribute(Attribute.RANK) >= 0:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"pccl.torchcomms: the group did not reach {world} members in time")
        try:
            comm.update_topology()
        except UpdateTopologyFailed:
            pass
        time.sleep(0.01)


# --------------------------------------------------------------------------
# The communicator
# --------------------------------------------------------------------------


class TorchComm:
    """TorchComm over one pccl communicator. Ranks and size are those of pccl's current epoch
    (get_rank / get_size read them again after update_topology)."""

    def __init__(self, comm, *, timeout_s, abort, name, store, prefix, master=None,
                 parent=None):
        self._comm = comm  # pccl.Communicator
        self._timeout_s = timeout_s
        self._abort = abort
        self._name = name
        self._store = store
        self._prefix = prefix
        self._master = master  # an embedded MasterNode this process runs, or None
        self._parent = parent
        self._splits = 0
        self._reset_tags()

    # -- identity --

    def get_rank(self):
        return self._live().get_attribute(Attribute.RANK)

    def get_size(self):
        return self._live().get_attribute(Attribute.PEER_GROUP_WORLD_SIZE)

    def _live(self):
        if self._comm is None:
            raise RuntimeError("the communicator was finalized")
        return self._comm

    def get_name(self):
        return self._name

    def get_backend(self):
        return BACKEND

    def get_device(self):
        import torch

        return torch.device("cpu")

    @property
    def pccl_communicator(self):
        """The underlying pccl.Communicator (shared state, topology, attributes)."""
        return self._comm

    # -- fault-tolerant mode --

    def update_topology(self):
        """Admits joining peers and re-wires after a loss (pcclUpdateTopology); read
        get_rank / get_size again afterwards."""
        self._reset_tags()
        self._live().update_topology()

    def are_peers_pending(self):
        return self._live().are_peers_pending()

    def finalize(self):
        """Leaves the run and frees the communicator. A process that runs the embedded master
        keeps it up until the others finalized (bounded by 30 s)."""
        c = self._comm
        if c is None:
            return
        _unfinalized.discard(self)
        try:
            size = self.get_size()
        except Exception:
            size = 1
        if size > 1:
            self._finalize_barrier()
        self._comm = None
        c.close()
        if self._store is not None and self._prefix is not None:
            try:
                self._store.add(self._prefix + "/finalized", 1)
            except Exception:
                pass
        if self._master is not None:
            end = time.monotonic() + 30
            while self._store is not None and time.monotonic() < end:
                try:
                    if self._store.add(self._prefix + "/finalized", 0) >= size:
                        break
                except Exception:
                    break
                time.sleep(0.05)
            self._master.close()
            self._master = None

    def _finalize_barrier(self):
        """Leaving changes the group's epoch, which refuses the ops of the others still pinned
        to it (a send to a third rank still waiting for its receiver). So a member leaves once
        every member reached finalize: a barrier of its own tag (never matched by the ops of
        the run), no abort, at most min(timeout, FINALIZE_WAIT_S). It fails at once when the
        membership already changed (a member died or left): then there is nothing to wait for."""
        o = L.CollectiveOptions.init()
        o.tag = _FINALIZE_TAG
        o.timeout_ms = _ms(min(self._timeout_s, FINALIZE_WAIT_S))
        rc = L.lib().pcclBarrier(ctypes.byref(o), self._h(), None)
        if rc != 0:
            log.debug("finalize: the barrier with the other members ended with %d; leaving", rc)

    def __del__(self):
        try:
            if self._comm is not None and self._parent is not None:
                self._comm.close()
        except Exception:
            pass

    # -- plumbing --

    def _next_tag(self, pair):
        """Tags of async ops. Ops in flight together need distinct tags (pccl matches ops by
        tag); a blocking op uses tag 0. An async collective takes the next number of the
        group's sequence (every member issues the collectives in the same order); an async
        send / recv the next number of its directed pair (src, dst), which the two members
        count alike. A failed op gives its number back when it is the latest (a member that
        never called a timed-out op stays in step); update_topology starts every sequence
        again."""
        k = self._seq.get(pair, 0) + 1
        self._seq[pair] = k
        if pair is None:
            return k % (1 << 60)
        src, dst = pair
        return (1 << 62) | ((src & 0xFFFF) << 40) | ((dst & 0xFFFF) << 24) | (k & 0xFFFFFF)

    def _failed(self, pair, tag):
        if tag and self._last_tag.get(pair) == tag:
            self._seq[pair] = self._seq.get(pair, 1) - 1
            self._last_tag[pair] = None

    def _reset_tags(self):
        self._seq = {}  # None (collectives) or (src, dst) -> the last async tag number issued
        self._last_tag = {}

    def _options(self, timeout, hints, where, premul=1.0, pair=None, async_op=False):
        hints = _check_hints(hints, _OP_HINTS, where)
        o = L.CollectiveOptions.init()
        s = _seconds(timeout)
        o.timeout_ms = _ms(self._timeout_s if s is None else s)
        if "pccl::quantization" in hints or "pccl::quantized_dtype" in hints:
            if where in _QUANTIZED_OPS:
                algo, qdt = _quantization(hints, where)
                o.quantization_options = L.CQuantizationOptions(qdt, algo)
            else:
                log.debug("%s: quantization hints ignored (pccl quantizes reducing ops only)", where)
        if "pccl::algorithm" in hints:
            # docs/algorithms.md: every member must name the same one (else InvalidUsage)
            name = str(hints["pccl::algorithm"]).strip().upper()
            if name not in Algorithm.__members__:
                raise ValueError(f"{where}: hint pccl::algorithm must be one of "
                                 f"{[m.lower() for m in Algorithm.__members__]}, got "
                                 f"{hints['pccl::algorithm']!r}")
            o.algorithm = int(Algorithm[name])
        if "pccl::tag" in hints:
            o.tag = int(hints["pccl::tag"])
        elif async_op:
            o.tag = self._next_tag(pair)
            self._last_tag[pair] = o.tag
        self._pending = (pair, o.tag)
        if self._abort:
            o.flags = L.COLLECTIVE_ABORT_ON_ERROR
        o.premul_scalar = float(premul)
        return o

    def _h(self):
        return self._live()._handle()

    def _run(self, name, async_op, args_sync, args_async, keep):
        lib = L.lib()
        pair, tag = self._pending
        if async_op:
            w = ctypes.c_void_p()
            rc = getattr(lib, name + "Async")(*args_async, ctypes.byref(w))
            if rc != 0:
                self._failed(pair, tag)
                raise error_for(rc, name + "Async")
            return TorchWork(name, w, keep, on_fail=lambda: self._failed(pair, tag),
                             comm=self._comm)
        rc = getattr(lib, name)(*args_sync, None)
        if rc != 0:
            raise error_for(rc, name)
        return TorchWork(name, rc=0)

    def _call(self, name, async_op, args, keep):
        return self._run(name, async_op, args + [self._h()], args + [self._h()], keep)

    def _peer(self, peer, what):
        if isinstance(peer, bool) or not isinstance(peer, int):
            raise TypeError(f"{what} must be an int rank, got {peer!r}")
        return peer

    # -- point to point --

    def send(self, tensor, dst, async_op=False, hints=None, timeout=None):
        b = _buf(tensor, "send: tensor", False)
        dst = self._peer(dst, "dst")
        o = self._options(timeout, hints, "send", pair=(self.get_rank(), dst), async_op=async_op)
        return self._call("pcclSend", async_op, [b.ptr, b.count, int(b.dtype),
                                                 self._peer(dst, "dst"), ctypes.byref(o)], (tensor, o))

    def recv(self, tensor, src, async_op=False, hints=None, timeout=None):
        b = _buf(tensor, "recv: tensor", True)
        src = self._peer(src, "src")
        o = self._options(timeout, hints, "recv", pair=(src, self.get_rank()), async_op=async_op)
        return self._call("pcclRecv", async_op, [b.ptr, b.count, int(b.dtype),
                                                 self._peer(src, "src"), ctypes.byref(o)], (tensor, o))

    # -- collectives --

    def broadcast(self, tensor, root, async_op=False, hints=None, timeout=None):
        b = _buf(tensor, "broadcast: tensor", True)
        o = self._options(timeout, hints, "broadcast", async_op=async_op)
        return self._call("pcclBroadcast", async_op, [b.ptr, b.count, int(b.dtype),
                                                      self._peer(root, "root"), ctypes.byref(o)],
                          (tensor, o))

    def all_reduce(self, tensor, op, async_op=False, hints=None, timeout=None):
        b = _buf(tensor, "all_reduce: tensor", True)
        code, factor = _op(op)
        o = self._options(timeout, hints, "all_reduce", factor, async_op=async_op)
        q = L.CQuantizationOptions(o.quantization_options.quantized_datatype,
                                   o.quantization_options.algorithm)
        o.quantization_options = L.CQuantizationOptions(0, 0)  # the descriptor carries it
        d = L.CReduceDescriptor(b.count, code, o.tag, L.CReduceOperandDescriptor(int(b.dtype), 0),
                                L.CQuantizationOptions(q.quantized_datatype if q.algorithm
                                                       else int(b.dtype), q.algorithm))
        return self._call("pcclAllReduceEx", async_op,
                          [b.ptr, b.ptr, ctypes.byref(d), ctypes.byref(o)], (tensor, o, d))

    def reduce(self, tensor, root, op, async_op=False, hints=None, timeout=None):
        b = _buf(tensor, "reduce: tensor", True)
        code, factor = _op(op)
        o = self._options(timeout, hints, "reduce", factor, async_op=async_op)
        return self._call("pcclReduce", async_op,
                          [b.ptr, b.ptr, b.count, int(b.dtype), code, self._peer(root, "root"),
                           ctypes.byref(o)], (tensor, o))

    def _list(self, tensors, what, ref, writable, n=None, ref_t=None):
        """The list's buffers: one tensor per rank, each of ref's dtype and of ref_t's shape
        (of ref's element count when ref_t is None)."""
        if not isinstance(tensors, (list, tuple)):
            raise TypeError(f"{what} must be a list of tensors, got {type(tensors).__name__}")
        n = self.get_size() if n is None else n
        if len(tensors) != n:
            raise ValueError(f"{what} has {len(tensors)} tensors; the world has {n} ranks")
        bufs = [_buf(t, f"{what}[{i}]", writable) for i, t in enumerate(tensors)]
        for i, bb in enumerate(bufs):
            _same_dtype(ref, bb, f"{what}[{i}]")
            if bb.count != ref.count:
                raise SizeMismatchError(f"{what}[{i}] has {bb.count} elements, expected {ref.count}")
            if ref_t is not None and _shape(tensors[i]) != _shape(ref_t):
                raise SizeMismatchError(f"{what}[{i}] has shape {_shape(tensors[i])}, expected "
                                        f"{_shape(ref_t)}")
        return bufs

    def all_gather(self, tensor_list, tensor, async_op=False, hints=None, timeout=None):
        b = _buf(tensor, "all_gather: tensor", False)
        outs = self._list(tensor_list, "all_gather: tensor_list", b, True, ref_t=tensor)
        arr = _ptr_array(outs)
        o = self._options(timeout, hints, "all_gather", async_op=async_op)
        return self._call("pcclAllGatherList", async_op,
                          [b.ptr, arr, len(outs), b.count, int(b.dtype), ctypes.byref(o)],
                          (tensor, tensor_list, arr, o))

    def all_gather_single(self, output, input, async_op=False, hints=None, timeout=None):
        ib = _buf(input, "all_gather_single: input", False)
        ob = _buf(output, "all_gather_single: output", True)
        _same_dtype(ib, ob, "all_gather_single: output")
        n = self.get_size()
        if ob.count != n * ib.count:
            raise SizeMismatchError(f"all_gather_single: output has {ob.count} elements, expected "
                                    f"world ({n}) x input ({ib.count})")
        _check_world_shape(output, input, n, "all_gather_single: output")
        o = self._options(timeout, hints, "all_gather_single", async_op=async_op)
        return self._call("pcclAllGather", async_op,
                          [ib.ptr, ob.ptr, ib.count, int(ib.dtype), ctypes.byref(o)],
                          (input, output, o))

    def reduce_scatter(self, output, input_list, op, async_op=False, hints=None, timeout=None):
        ob = _buf(output, "reduce_scatter: output", True)
        ins = self._list(input_list, "reduce_scatter: input_list", ob, False, ref_t=output)
        arr = _ptr_array(ins)
        code, factor = _op(op)
        o = self._options(timeout, hints, "reduce_scatter", factor, async_op=async_op)
        return self._call("pcclReduceScatterList", async_op,
                          [arr, len(ins), ob.ptr, ob.count, int(ob.dtype), code, ctypes.byref(o)],
                          (output, input_list, arr, o))

    def reduce_scatter_single(self, output, input, op, async_op=False, hints=None, timeout=None):
        ib = _buf(input, "reduce_scatter_single: input", False)
        ob = _buf(output, "reduce_scatter_single: output", True)
        _same_dtype(ib, ob, "reduce_scatter_single: output")
        n = self.get_size()
        if ib.count != n * ob.count:
            raise SizeMismatchError(f"reduce_scatter_single: input has {ib.count} elements, "
                                    f"expected world ({n}) x output ({ob.count})")
        _check_world_shape(input, output, n, "reduce_scatter_single: input")
        code, factor = _op(op)
        o = self._options(timeout, hints, "reduce_scatter_single", factor, async_op=async_op)
        return self._call("pcclReduceScatter", async_op,
                          [ib.ptr, ob.ptr, ob.count, int(ob.dtype), code, ctypes.byref(o)],
                          (input, output, o))

    def all_to_all_single(self, output, input, async_op=False, hints=None, timeout=None):
        ib = _buf(input, "all_to_all_single: input", False)
        ob = _buf(output, "all_to_all_single: output", True)
        _same_dtype(ib, ob, "all_to_all_single: output")
        n = self.get_size()
        if ib.count != ob.count or ib.count % n:
            raise SizeMismatchError(f"all_to_all_single: input ({ib.count}) and output "
                                    f"({ob.count}) must have equal sizes divisible by the world ({n})")
        if _shape(input) != _shape(output) or not _shape(input) or _shape(input)[0] % n:
            raise SizeMismatchError(f"all_to_all_single: input {_shape(input)} and output "
                                    f"{_shape(output)} must have one shape whose dim 0 the world "
                                    f"({n}) divides")
        o = self._options(timeout, hints, "all_to_all_single", async_op=async_op)
        return self._call("pcclAllToAll", async_op,
                          [ib.ptr, ob.ptr, ib.count // n, int(ib.dtype), ctypes.byref(o)],
                          (input, output, o))

    def all_to_all(self, output_tensor_list, input_tensor_list, async_op=False, hints=None,
                   timeout=None):
        if not input_tensor_list:
            raise ValueError("all_to_all: input_tensor_list is empty")
        ref = _buf(input_tensor_list[0], "all_to_all: input_tensor_list[0]", False)
        t0 = input_tensor_list[0]
        ins = self._list(input_tensor_list, "all_to_all: input_tensor_list", ref, False, ref_t=t0)
        outs = self._list(output_tensor_list, "all_to_all: output_tensor_list", ref, True, ref_t=t0)
        ia, oa = _ptr_array(ins), _ptr_array(outs)
        o = self._options(timeout, hints, "all_to_all", async_op=async_op)
        return self._call("pcclAllToAllList", async_op,
                          [ia, oa, len(ins), ref.count, int(ref.dtype), ctypes.byref(o)],
                          (output_tensor_list, input_tensor_list, ia, oa, o))

    def all_to_all_v_single(self, output, input, output_split_sizes, input_split_sizes,
                            async_op=False, hints=None, timeout=None):
        """Split sizes count rows (dim 0), as torch.distributed.all_to_all_single."""
        ib = _buf(input, "all_to_all_v_single: input", False)
        ob = _buf(output, "all_to_all_v_single: output", True)
        _same_dtype(ib, ob, "all_to_all_v_single: output")
        if ib.nbytes and ob.nbytes and ib.ptr < ob.ptr + ob.nbytes and ob.ptr < ib.ptr + ib.nbytes:
            raise OverlappingBuffersError("all_to_all_v_single: input and output must not overlap")
        n = self.get_size()
        counts = []
        for t, b, splits, what in ((input, ib, input_split_sizes, "input"),
                                   (output, ob, output_split_sizes, "output")):
            rows = _rows(t)
            row = b.count // rows if rows else 0
            splits = [int(s) for s in splits]
            if len(splits) != n or any(s < 0 for s in splits):
                raise ValueError(f"all_to_all_v_single: {what}_split_sizes needs {n} sizes >= 0")
            if sum(splits) != rows:
                raise SizeMismatchError(f"all_to_all_v_single: {what}_split_sizes sum to "
                                        f"{sum(splits)}, but {what} has {rows} rows")
            counts.append((ctypes.c_size_t * n)(*[s * row for s in splits]))
        o = self._options(timeout, hints, "all_to_all_v_single", async_op=async_op)
        return self._call("pcclAllToAllV", async_op,
                          [ib.ptr, counts[0], ob.ptr, counts[1], int(ib.dtype), ctypes.byref(o)],
                          (input, output, counts, o))

    def barrier(self, async_op=False, hints=None, timeout=None):
        o = self._options(timeout, hints, "barrier", async_op=async_op)
        return self._call("pcclBarrier", async_op, [ctypes.byref(o)], (o,))

    def scatter(self, output_tensor, input_tensor_list, root, async_op=False, hints=None,
                timeout=None):
        ob = _buf(output_tensor, "scatter: output_tensor", True)
        root = self._peer(root, "root")
        ins = []
        if self.get_rank() == root:
            ins = self._list(input_tensor_list, "scatter: input_tensor_list", ob, False,
                             ref_t=output_tensor)
        arr = _ptr_array(ins) if ins else None
        o = self._options(timeout, hints, "scatter", async_op=async_op)
        return self._call("pcclScatterList", async_op,
                          [arr, len(ins), ob.ptr, ob.count, int(ob.dtype), root, ctypes.byref(o)],
                          (output_tensor, input_tensor_list, arr, o))

    def gather(self, output_tensor_list, input_tensor, root, async_op=False, hints=None,
               timeout=None):
        ib = _buf(input_tensor, "gather: input_tensor", False)
        root = self._peer(root, "root")
        outs = []
        if self.get_rank() == root:
            outs = self._list(output_tensor_list, "gather: output_tensor_list", ib, True,
                              ref_t=input_tensor)
        arr = _ptr_array(outs) if outs else None
        o = self._options(timeout, hints, "gather", async_op=async_op)
        return self._call("pcclGatherList", async_op,
                          [ib.ptr, arr, len(outs), ib.count, int(ib.dtype), root, ctypes.byref(o)],
                          (input_tensor, output_tensor_list, arr, o))

    # -- split --

    def split(self, ranks, name=None, hints=None):
        """A communicator over `ranks` (pcclCommSplit), called by exactly the listed ranks.
        The other ranks of the group call split([]), which returns None after admitting the
        new communicator's members (the size comes from the store, or hints
        {"pccl::split_size": n}); other groups of the run must update_topology meanwhile."""
        hints = hints or {}
        ranks = [int(r) for r in ranks]
        seq = self._splits
        self._splits += 1
        key = f"{self._prefix}/split/{seq}" if self._prefix else None
        if not ranks:
            n = hints.get("pccl::split_size")
            if n is None and self._store is not None:
                n = self._store.get(key).decode()
            if n is None:
                raise ValueError("split([]): a non-member needs the store or hints "
                                 "{'pccl::split_size': n} to admit the new members")
            self._admit(int(n))
            return None
        me = self.get_rank()
        if me not in ranks:
            raise ValueError(f"split: rank {me} is not in {ranks}; non-members call split([])")
        if self._store is not None and me == min(ranks):
            self._store.set(key, str(len(ranks)))
        arr = (ctypes.c_int * len(ranks))(*ranks)
        child = ctypes.c_void_p()
        with self._env_guard():
            rc = L.lib().pcclCommSplit(self._h(), arr, len(ranks), ctypes.byref(child))
        if rc != 0:
            raise error_for(rc, "pcclCommSplit")
        c = Communicator.__new__(Communicator)
        c._h, c._url, c.address, c.peer_group = child, None, self._comm.address, None
        c._in_flight, c._lock = {}, threading.Lock()
        cname = name or f"{self._name}/split{seq}"
        return TorchComm(c, timeout_s=self._timeout_s, abort=self._abort, name=cname,
                         store=self._store, prefix=(f"{self._prefix}/s{seq}-{min(ranks)}"
                                                     if self._prefix else None),
                         parent=self)

    def _admit(self, n):
        start = self._comm.get_attribute(Attribute.GLOBAL_WORLD_SIZE)
        end = time.monotonic() + (self._timeout_s or 60)
        while self._comm.get_attribute(Attribute.GLOBAL_WORLD_SIZE) < start + n:
            if time.monotonic() > end:
                raise TimeoutError("split([]): the new communicator's members were not admitted")
            try:
                self._comm.update_topology()
            except UpdateTopologyFailed:
                pass
            time.sleep(0.01)

    def _env_guard(self):
        return _EnvWithout(() if self._abort else ("TORCHCOMM_ABORT_ON_ERROR", "PCCL_ABORT_ON_ERROR"))


# --------------------------------------------------------------------------
# new_comm
# --------------------------------------------------------------------------


class _EmbeddedMaster(MasterNode):
    """The master new_comm runs for a store rendezvous: stopped by finalize(), or when it is
    dropped or the interpreter exits (a plain MasterNode that runs keeps serving then)."""

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


def _store_from_env(rank, world):
    addr, port = os.environ.get("MASTER_ADDR"), os.environ.get("MASTER_PORT")
    if not addr or not port:
        return None
    import torch.distributed as dist

    # torchrun's agent hosts the store already (TORCHELASTIC_USE_AGENT_STORE); otherwise rank 0
    is_server = rank == 0 and os.environ.get("TORCHELASTIC_USE_AGENT_STORE") != "True"
    return dist.TCPStore(addr, int(port), world, is_server, datetime.timedelta(seconds=300))


def new_comm(backend, device, *, store=None, timeout=None, abort_process_on_timeout_or_error=None,
             name=None, hints=None):
    """A TorchComm on pccl. backend "pccl"; device "cpu" (torch.device or str).

    Rendezvous, first match: hints["pccl::master"] or PCCL_MASTER_ADDR (a running master,
    "host:port" or a URL); the store (the first process to arrive starts an embedded master
    and publishes its address under "pccl/torchcomms/<name>/master"); the torchrun
    environment (MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE: a TCPStore there). The call
    returns once the group has WORLD_SIZE (or hints["pccl::world_size"]) members."""
    if backend != BACKEND:
        raise ValueError(f"pccl.torchcomms: backend must be {BACKEND!r}, got {backend!r}")
    dev = getattr(device, "type", device)
    if not isinstance(dev, str):
        raise TypeError(f"device must be a torch.device or str, got {device!r}")
    if dev.split(":")[0] != "cpu":
        raise UnsupportedDeviceError(
            f"pccl.torchcomms: device {device} is not supported; pccl moves host memory only "
            "(use device 'cpu' and CPU tensors)")
    hints = _check_hints(hints, _COMM_HINTS, "new_comm")
    name = name or "default"
    ts = _seconds(timeout)
    if ts is None:
        env = os.environ.get("TORCHCOMM_TIMEOUT_SECONDS")
        ts = float(env) if env else DEFAULT_TIMEOUT_S
    abort = abort_process_on_timeout_or_error
    if abort is None:
        abort = _env_bool("TORCHCOMM_ABORT_ON_ERROR", True)
    world = _world_size_from(hints)
    rank_env = os.environ.get("TORCHCOMM_RANK") or os.environ.get("RANK")

    master = None
    prefix = None
    address = hints.get("pccl::master") or os.environ.get("PCCL_MASTER_ADDR")
    if not address:
        if store is None:
            if world is None or rank_env is None:
                raise ValueError("pccl.torchcomms.new_comm: no rendezvous: pass store=, or set "
                                 "PCCL_MASTER_ADDR, or MASTER_ADDR/MASTER_PORT/RANK/WORLD_SIZE")
            store = _store_from_env(int(rank_env), world)
            if store is None:
                raise ValueError("pccl.torchcomms.new_comm: no store and no MASTER_ADDR/"
                                 "MASTER_PORT (or PCCL_MASTER_ADDR) in the environment")
        prefix = f"pccl/torchcomms/{name}"
        if store.add(prefix + "/arrivals", 1) == 1:
            # the first process to arrive runs the master for the whole run
            master = _EmbeddedMaster("0.0.0.0:0",
                                     heartbeat_ms=int(hints.get("pccl::master_heartbeat_ms", 0)),
                                     evict_ms=int(hints.get("pccl::master_evict_ms", 0)))
            master.run()
            _core._masters.discard(master)  # not served at exit: it ends with this process
            store.set(prefix + "/master", f"{_local_host()}:{master.port}")
        address = store.get(prefix + "/master").decode()
    if world is None:
        world = 1
        log.debug("new_comm: no WORLD_SIZE; not waiting for other members")

    with _EnvWithout(() if abort else ("TORCHCOMM_ABORT_ON_ERROR", "PCCL_ABORT_ON_ERROR")):
        # With RANK known, the ring orders the members by it (pcclCommCreateOptions_t.ring_key):
        # get_rank() == RANK once the group holds every member.
        ring_key = int(rank_env) + 1 if rank_env is not None and rank_env.isdigit() else 0
        comm = Communicator(address, int(hints.get("pccl::peer_group", 0)),
                            timeout_ms=_ms(ts), heartbeat_ms=int(hints.get("pccl::heartbeat_ms", 0)),
                            ring_key=ring_key)
        comm.connect(n_attempts=20, retry_delay=0.25)
    join_s = float(hints.get("pccl::join_timeout_s", ts))
    _join(comm, world, time.monotonic() + join_s)
    tc = TorchComm(comm, timeout_s=ts, abort=abort, name=name, store=store, prefix=prefix,
                   master=master)
    _unfinalized.add(tc)
    return tc


# Communicators not finalized when the interpreter exits are finalized then (while threads
# can still start: an embedded master's shutdown needs one).
_unfinalized = weakref.WeakSet()


@atexit.register
def _finalize_at_exit():
    for c in list(_unfinalized):
        try:
            c.finalize()
        except Exception:
            pass
