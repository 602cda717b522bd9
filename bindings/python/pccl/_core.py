"""Communicator, shared state, all-reduce and master over libpccl (ctypes)."""

import atexit
import ctypes
import ipaddress
import operator
import signal
import socket
import sys
import threading
import time
import weakref

from . import _lib as L
from ._collectives import Collectives
from ._errors import (
    DTypeMismatchError,
    EmptySharedStateError,
    InvalidArgument,
    InvalidUsage,
    NonContiguousTensorError,
    NullPointerError,
    OverlappingBuffersError,
    ReadOnlyBufferError,
    Result,
    SizeMismatchError,
    UnsupportedDeviceError,
    UnsupportedDTypeError,
    UnsupportedTensorTypeError,
    error_for,
)
from ._tune import TuneMixin
from ._types import (
    DataType,
    DeviceType,
    DistributionHint,
    QuantizationAlgorithm,
    ReduceOp,
    SharedStateSyncStrategy,
)

DEFAULT_MASTER_PORT = 48148


def _check(rc, function):
    if rc != 0:
        raise error_for(rc, function)


# --------------------------------------------------------------------------
# Buffers: numpy arrays, torch tensors, raw pointers
# --------------------------------------------------------------------------


class _Buffer:
    """A flat view of an array's memory: pointer, element count, DataType."""

    __slots__ = ("ptr", "count", "dtype", "device", "owner", "nbytes")

    def __init__(self, ptr, count, dtype, device, owner):
        self.ptr = ptr
        self.count = count
        self.dtype = dtype
        self.device = device
        self.owner = owner  # keeps the memory alive while libpccl uses it
        self.nbytes = count * dtype.size


def _is_numpy(obj):
    np = sys.modules.get("numpy")
    return np is not None and isinstance(obj, np.ndarray)


def _is_torch(obj):
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(obj, torch.Tensor)


def _buffer_of(obj, what, writable, cpu_only=True):
    """Describes obj for libpccl, used in place (never copied); raises a TensorArgumentError."""
    if _is_numpy(obj):
        dt = DataType._numpy_or_none(obj.dtype)
        if dt is None:
            raise UnsupportedDTypeError(
                f"{what}: numpy dtype {obj.dtype.str} ({obj.dtype}) has no pccl DataType "
                "(supported: native-endian u/int8..64, float16, float32, float64)"
            )
        if not obj.flags["C_CONTIGUOUS"]:
            raise NonContiguousTensorError(
                f"{what}: numpy array is not C-contiguous (strides {obj.strides}); "
                "pccl works in place and does not copy: pass np.ascontiguousarray(a) yourself"
            )
        if writable and not obj.flags["WRITEABLE"]:
            raise ReadOnlyBufferError(f"{what}: numpy array is read-only, but pccl writes into it")
        return _Buffer(obj.__array_interface__["data"][0], int(obj.size), dt, DeviceType.CPU, obj)
    if _is_torch(obj):
        torch = sys.modules["torch"]
        if obj.layout != torch.strided:
            raise UnsupportedTensorTypeError(f"{what}: torch tensor layout {obj.layout} is not strided")
        dt = DataType._torch_or_none(obj.dtype)
        if dt is None:
            raise UnsupportedDTypeError(f"{what}: torch dtype {obj.dtype} has no pccl DataType")
        dev = obj.device.type
        if dev != "cpu":
            if cpu_only or dev != "cuda":
                raise UnsupportedDeviceError(
                    f"{what}: tensor is on device {obj.device}; libpccl takes CPU memory only"
                )
        if not obj.is_contiguous():
            raise NonContiguousTensorError(
                f"{what}: torch tensor is not contiguous (stride {tuple(obj.stride())}); "
                "pccl works in place and does not copy: pass t.contiguous() yourself"
            )
        if obj.is_conj() or obj.is_neg():
            raise UnsupportedTensorTypeError(f"{what}: tensor has a lazy conj/neg bit set")
        device = DeviceType.CPU if dev == "cpu" else DeviceType.CUDA
        return _Buffer(int(obj.data_ptr()), int(obj.numel()), dt, device, obj)
    raise UnsupportedTensorTypeError(
        f"{what}: expected a numpy.ndarray or a torch.Tensor, got {type(obj).__name__}"
    )


def _check_pair(send, recv):
    if send.dtype != recv.dtype:
        raise DTypeMismatchError(
            f"send is {send.dtype.name} but recv is {recv.dtype.name}; they must be equal"
        )
    if send.count != recv.count:
        raise SizeMismatchError(f"send has {send.count} elements but recv has {recv.count}")
    if send.ptr != recv.ptr and send.nbytes and recv.nbytes:
        if send.ptr < recv.ptr + recv.nbytes and recv.ptr < send.ptr + send.nbytes:
            raise OverlappingBuffersError(
                "send and recv overlap; for an in-place all-reduce pass the same array twice"
            )


# --------------------------------------------------------------------------
# Descriptors and infos
# --------------------------------------------------------------------------


class ReduceOperandDescriptor:
    """pcclReduceOperandDescriptor_t: element type and distribution hint."""

    def __init__(self, datatype, distribution_hint=DistributionHint.NONE):
        self.datatype = DataType(datatype)
        self.distribution_hint = DistributionHint(distribution_hint)

    def to_c(self):
        return L.CReduceOperandDescriptor(int(self.datatype), int(self.distribution_hint))

    def __repr__(self):
        return f"ReduceOperandDescriptor({self.datatype.name}, {self.distribution_hint.name})"


class QuantizationOptions:
    """pcclQuantizationOptions_t. The defaults are PCCL's class defaults
    (UINT8, MIN_MAX); all_reduce without quantization_options uses NONE."""

    def __init__(self, quantized_datatype=DataType.UINT8, algorithm=QuantizationAlgorithm.MIN_MAX):
        self.quantized_datatype = DataType(quantized_datatype)
        self.algorithm = QuantizationAlgorithm(algorithm)

    def to_c(self):
        return L.CQuantizationOptions(int(self.quantized_datatype), int(self.algorithm))

    def __repr__(self):
        return f"QuantizationOptions({self.quantized_datatype.name}, {self.algorithm.name})"


class ReduceDescriptor:
    """pcclReduceDescriptor_t."""

    def __init__(self, count, op, tag, operand_descriptor, quantization_options=None):
        self.count = int(count)
        self.op = ReduceOp(op)
        self.tag = int(tag)
        self.operand_descriptor = operand_descriptor
        self.quantization_options = quantization_options or QuantizationOptions(
            operand_descriptor.datatype, QuantizationAlgorithm.NONE
        )

    def to_c(self):
        return L.CReduceDescriptor(
            self.count,
            int(self.op),
            self.tag,
            self.operand_descriptor.to_c(),
            self.quantization_options.to_c(),
        )


def _bit_container_ok(buf_dtype, declared):
    # numpy has no bfloat16: uint16 arrays may carry FLOAT16 / BFLOAT16 bits,
    # and float16 arrays may be declared BFLOAT16 bits.
    return buf_dtype in (DataType.UINT16, DataType.FLOAT16) and declared in (
        DataType.FLOAT16,
        DataType.BFLOAT16,
    )


_BITWISE_OPS = (ReduceOp.BAND, ReduceOp.BOR, ReduceOp.BXOR)
_FLOAT_TYPES = (DataType.FLOAT16, DataType.BFLOAT16, DataType.FLOAT, DataType.DOUBLE)


def _make_descriptor(send, recv, op, tag, operand_descriptor, quantization_options):
    sb = _buffer_of(send, "send", writable=False)
    rb = sb if recv is send else _buffer_of(recv, "recv", writable=True)
    _check_pair(sb, rb)
    if operand_descriptor is None:
        operand_descriptor = ReduceOperandDescriptor(sb.dtype, DistributionHint.NONE)
    elif operand_descriptor.datatype != sb.dtype and not _bit_container_ok(
        sb.dtype, operand_descriptor.datatype
    ):
        raise DTypeMismatchError(
            f"operand_descriptor.datatype is {operand_descriptor.datatype.name} "
            f"but the buffers hold {sb.dtype.name}"
        )
    if quantization_options is None:
        quantization_options = QuantizationOptions(
            operand_descriptor.datatype, QuantizationAlgorithm.NONE
        )
    if isinstance(tag, bool) or not isinstance(tag, int) or not 0 <= tag < 2**64:
        raise InvalidArgument(f"tag must be an int in [0, 2**64), got {tag!r}")
    desc = ReduceDescriptor(sb.count, op, tag, operand_descriptor, quantization_options)
    if desc.op in _BITWISE_OPS and operand_descriptor.datatype in _FLOAT_TYPES:
        # as libpccl refuses it (pcclInvalidArgument): no float kernel for a bitwise op
        raise InvalidArgument(f"{desc.op.name} takes integer types, not {operand_descriptor.datatype.name}")
    return desc, sb, rb


class ReduceOpDescriptor:
    """One all-reduce with its buffers, for Communicator.all_reduce_multiple_with_retry.

    ReduceOpDescriptor(sendbuf_ptr, recvbuf_ptr, reduce_descriptor) is PCCL's
    raw form (addresses the caller keeps valid); from_numpy / from_torch /
    from_arrays build one from arrays, checked and kept alive.
    """

    def __init__(self, sendbuf_ptr, recvbuf_ptr, reduce_descriptor, _keep=None):
        self.sendbuf_ptr = int(sendbuf_ptr)
        self.recvbuf_ptr = int(recvbuf_ptr)
        self.reduce_descriptor = reduce_descriptor
        self._keep = _keep

    # pccl's earlier names of the two addresses
    @property
    def sendbuf(self):
        return self.sendbuf_ptr

    @property
    def recvbuf(self):
        return self.recvbuf_ptr

    @classmethod
    def from_arrays(cls, send, recv, *, op=ReduceOp.SUM, tag=0, operand_descriptor=None,
                    quantization_options=None):
        desc, sb, rb = _make_descriptor(send, recv, op, tag, operand_descriptor,
                                        quantization_options)
        return cls(sb.ptr, rb.ptr, desc, _keep=(send, recv))

    @classmethod
    def from_numpy(cls, send, recv, reduce_descriptor=None, **kw):
        return cls._from(send, recv, reduce_descriptor, kw)

    @classmethod
    def from_torch(cls, send, recv, reduce_descriptor=None, **kw):
        return cls._from(send, recv, reduce_descriptor, kw)

    @classmethod
    def _from(cls, send, recv, rd, kw):
        if rd is None:
            return cls.from_arrays(send, recv, **kw)
        out = cls.from_arrays(send, recv, op=rd.op, tag=rd.tag,
                              operand_descriptor=rd.operand_descriptor,
                              quantization_options=rd.quantization_options)
        # PCCL reduces reduce_descriptor.count elements: a prefix is fine, more is not
        if rd.count != out.reduce_descriptor.count:
            if not 0 <= rd.count <= out.reduce_descriptor.count:
                raise SizeMismatchError(f"reduce_descriptor.count is {rd.count} but the buffers "
                                        f"hold {out.reduce_descriptor.count} elements")
            out.reduce_descriptor.count = int(rd.count)
        return out

    def to_c_inpl(self, c_desc):
        """Fills c_desc (a ctypes pcclReduceOpDescriptor_t) in place, as PCCL's to_c_inpl."""
        c_desc.sendbuf = self.sendbuf_ptr
        c_desc.recvbuf = self.recvbuf_ptr
        c_desc.descriptor = self.reduce_descriptor.to_c()

    def to_c(self):
        """A new ctypes pcclReduceOpDescriptor_t."""
        c_desc = L.CReduceOpDescriptor()
        self.to_c_inpl(c_desc)
        return c_desc

    def __repr__(self):
        return (f"ReduceOpDescriptor(sendbuf_ptr={self.sendbuf_ptr:#x}, "
                f"recvbuf_ptr={self.recvbuf_ptr:#x}, count={self.reduce_descriptor.count})")


class ReduceInfo:
    """pcclReduceInfo_t: peers that took part and bytes sent/received on the ring."""

    __slots__ = ("local_world_size", "tx_bytes", "rx_bytes")

    def __init__(self, local_world_size, tx_bytes, rx_bytes):
        self.local_world_size = int(local_world_size)
        self.tx_bytes = int(tx_bytes)
        self.rx_bytes = int(rx_bytes)

    @property
    def world_size(self):
        return self.local_world_size

    def __repr__(self):
        return (f"ReduceInfo(world_size={self.local_world_size}, tx_bytes={self.tx_bytes}, "
                f"rx_bytes={self.rx_bytes})")


class SharedStateSyncInfo:
    """pcclSharedStateSyncInfo_t."""

    __slots__ = ("tx_bytes", "rx_bytes")

    def __init__(self, tx_bytes, rx_bytes):
        self.tx_bytes = int(tx_bytes)
        self.rx_bytes = int(rx_bytes)

    def __repr__(self):
        return f"SharedStateSyncInfo(tx_bytes={self.tx_bytes}, rx_bytes={self.rx_bytes})"


# --------------------------------------------------------------------------
# Shared state
# --------------------------------------------------------------------------


class TensorInfo:
    """One named tensor of the shared state, used in place.

    TensorInfo(name, data, allow_content_inequality=False) with a numpy array or
    a torch tensor; or PCCL's raw form TensorInfo(name, data_ptr, numel=...,
    dtype=DataType..., device_type=DeviceType.CPU, allow_content_inequality=...)
    where data_ptr is an address (int) the caller keeps valid; 0 raises
    NullPointerError (a ValueError, as PCCL).
    """

    def __init__(self, name, data=None, allow_content_inequality=False, *, numel=None,
                 dtype=None, device_type=DeviceType.CPU, data_ptr=None):
        if data is None:
            data = data_ptr
        if not isinstance(name, str) or not name:
            raise InvalidArgument(f"tensor name must be a non-empty str, got {name!r}")
        encoded = name.encode("utf-8")
        if len(encoded) > 127 or b"\0" in encoded:
            raise InvalidArgument(f"tensor name must be 1..127 bytes without NUL: {name!r}")
        if isinstance(data, int) and not isinstance(data, bool):
            if data == 0:
                raise NullPointerError("Invalid data pointer: nullptr")
            if numel is None or dtype is None:
                raise InvalidArgument("a raw data pointer needs numel= and dtype=")
            buf = _Buffer(int(data), int(numel), DataType(dtype), DeviceType(device_type), None)
        else:
            buf = _buffer_of(data, f"tensor {name!r}", writable=True, cpu_only=False)
        self.name = name
        self.data = data
        self.allow_content_inequality = bool(allow_content_inequality)
        self._buf = buf
        self._name_bytes = encoded

    @classmethod
    def from_numpy(cls, tensor, name, *, allow_content_inequality=False):
        if not _is_numpy(tensor):
            raise UnsupportedTensorTypeError(f"from_numpy expects a numpy.ndarray, got {type(tensor).__name__}")
        return cls(name, tensor, allow_content_inequality)

    @classmethod
    def from_torch(cls, tensor, name, *, allow_content_inequality=False):
        if not _is_torch(tensor):
            raise UnsupportedTensorTypeError(f"from_torch expects a torch.Tensor, got {type(tensor).__name__}")
        return cls(name, tensor, allow_content_inequality)

    @property
    def numel(self):
        return self._buf.count

    @property
    def dtype(self):
        return self._buf.dtype

    @property
    def device_type(self):
        return self._buf.device

    @property
    def data_ptr(self):
        return self._buf.ptr

    def to_c(self):
        return L.CTensorInfo(self._name_bytes, self._buf.ptr, self._buf.count,
                             int(self._buf.dtype), int(self._buf.device),
                             self.allow_content_inequality)

    def __repr__(self):
        return (f"TensorInfo({self.name!r}, numel={self.numel}, dtype={self.dtype.name}, "
                f"allow_content_inequality={self.allow_content_inequality})")


class SharedState:
    """pcclSharedState_t: a revision and tensors, kept as one C struct."""

    def __init__(self, tensor_infos, revision=0):
        infos = list(tensor_infos)
        if not infos:
            raise EmptySharedStateError("At least one tensor info must be provided")
        seen = set()
        for ti in infos:
            if not isinstance(ti, TensorInfo):
                raise InvalidArgument(f"SharedState takes TensorInfo objects, got {type(ti).__name__}")
            if ti.name in seen:
                raise InvalidArgument(f"duplicate tensor name {ti.name!r} in shared state")
            seen.add(ti.name)
        self.tensor_infos = infos
        self._array = (L.CTensorInfo * len(infos))(*[ti.to_c() for ti in infos])
        self._c = L.CSharedState(int(revision), len(infos),
                                 ctypes.cast(self._array, ctypes.POINTER(L.CTensorInfo)))

    @property
    def revision(self):
        return int(self._c.revision)

    @revision.setter
    def revision(self, value):
        if not 0 <= int(value) < 2**64:
            raise InvalidArgument(f"revision out of range: {value}")
        self._c.revision = int(value)

    def push_revision(self):
        self._c.revision += 1

    def __len__(self):
        return len(self.tensor_infos)

    def __repr__(self):
        return f"SharedState(revision={self.revision}, tensors={[t.name for t in self.tensor_infos]})"


# --------------------------------------------------------------------------
# Async all-reduce handle
# --------------------------------------------------------------------------


class AsyncReduceHandle:
    """An in-flight all-reduce. wait() -> (is_success, status, info)."""

    def __init__(self, comm, c_handle, keep):
        self._comm = comm
        self._c = c_handle
        self._keep = keep
        self._result = None
        self._lock = threading.Lock()

    @property
    def tag(self):
        return int(self._c.tag)

    @property
    def done(self):
        return self._result is not None

    def wait(self, timeout_ms=None):
        """Waits for the operation. Returns (is_success, status, info), as PCCL:
        status is a Result (an int), info a ReduceInfo, on failure too (with
        what the library reported, typically zeros).

        The result is cached: later calls return it again. With timeout_ms, a
        timeout returns (False, Result.TIMEOUT, ReduceInfo(0, 0, 0)) and the
        operation stays in flight (call wait() again); without it the wait is
        bounded only by the communicator's timeout_ms.
        """
        with self._lock:
            if self._result is not None:
                return self._result
            info = L.CReduceInfo()
            lib = L.lib()
            if timeout_ms is None:
                rc = lib.pcclAwaitAsyncReduce(ctypes.byref(self._c), ctypes.byref(info))
            else:
                t = max(1, int(timeout_ms))
                rc = lib.pcclAwaitAsyncReduceTimeout(ctypes.byref(self._c), t, ctypes.byref(info))
                if rc == Result.TIMEOUT:
                    return (False, Result.TIMEOUT, ReduceInfo(0, 0, 0))
            try:
                status = Result(rc)
            except ValueError:
                status = rc
            self._result = (rc == 0, status,
                            ReduceInfo(info.local_world_size, info.tx_bytes, info.rx_bytes))
            self._comm._forget(self)
            self._keep = None
            return self._result

    def result(self):
        """Like wait(), but returns the ReduceInfo or raises the PCCLError."""
        ok, status, info = self.wait()
        if not ok:
            raise error_for(status, "pcclAwaitAsyncReduce")
        return info


# --------------------------------------------------------------------------
# Communicator
# --------------------------------------------------------------------------


def parse_address(address, default_port=DEFAULT_MASTER_PORT):
    """'ip:port', '[ipv6]:port', 'host:port' or 'host' -> CcoipSocketAddress."""
    if not isinstance(address, str):
        raise InvalidArgument(f"address must be a str, got {type(address).__name__}")
    host, port = address, default_port
    if address.startswith("["):
        end = address.find("]")
        if end < 0:
            raise InvalidArgument(f"bad address {address!r}")
        host = address[1:end]
        rest = address[end + 1:]
        if rest:
            if not rest.startswith(":"):
                raise InvalidArgument(f"bad address {address!r}")
            port = rest[1:]
    elif address.count(":") == 1:
        host, port = address.split(":")
    try:
        port = int(port)
    except ValueError:
        raise InvalidArgument(f"bad port in address {address!r}") from None
    if not 0 <= port <= 65535:
        raise InvalidArgument(f"port out of range in address {address!r}")
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except socket.gaierror as e:
            raise InvalidArgument(f"cannot resolve {host!r}: {e}") from None
        infos.sort(key=lambda i: 0 if i[0] == socket.AF_INET else 1)
        ip = ipaddress.ip_address(infos[0][4][0])
    sa = L.CcoipSocketAddress()
    sa.port = port
    if ip.version == 4:
        sa.inet.protocol = 0
        sa.inet.ipv4.data[:] = list(ip.packed)
    else:
        sa.inet.protocol = 1
        sa.inet.ipv6.data[:] = list(ip.packed)
    return sa


class Communicator(Collectives, TuneMixin):
    """One peer's membership in a run (pcclComm_t).

    address: "ip:port", "[ipv6]:port", "host:port", or a URL
    ("tcp://host:port", "tls+tcp://host:port", "ipc:///path").
    timeout_ms bounds every blocking call (0: unbounded); heartbeat_ms is the
    heartbeat period to the master (0: 250 ms). Any p2p_connection_pool_size
    is accepted (0: the default, 2; the library opens at most 8). ring_key
    orders the group's ring (pcclCommCreateOptions_t.ring_key: members that
    each pass their intended rank + 1 get those ranks; 0: order of joining).
    The collective set (broadcast, reduce, all_gather, ..., send, recv) comes
    from Collectives (_collectives.py).
    """

    def __init__(self, address="127.0.0.1:48148", peer_group=0, p2p_connection_pool_size=0, *,
                 timeout_ms=0, heartbeat_ms=0, ring_key=0):
        lib = L.lib()
        params = L.CommCreateParams()
        options = L.CommCreateOptions()
        options.struct_size = ctypes.sizeof(L.CommCreateOptions)
        self._url = None
        if isinstance(address, str) and "://" in address:
            self._url = address.encode("utf-8")
            options.master_url = self._url
        else:
            params.master_address = parse_address(address)
        def u32(name, value):
            try:
                v = operator.index(value)  # int, numpy integers, ...
            except TypeError:
                v = None
            if v is None or isinstance(value, bool) or not 0 <= v < 2**32:
                raise InvalidArgument(f"{name} must be an int in [0, 2**32), got {value!r}")
            return v

        params.peer_group = u32("peer_group", peer_group)
        params.p2p_connection_pool_size = u32("p2p_connection_pool_size", p2p_connection_pool_size)
        options.timeout_ms = u32("timeout_ms", timeout_ms)
        options.heartbeat_ms = u32("heartbeat_ms", heartbeat_ms)
        options.ring_key = u32("ring_key", ring_key)
        self.address = address
        self.peer_group = params.peer_group
        self._in_flight = {}
        self._lock = threading.Lock()
        handle = ctypes.c_void_p()
        _check(lib.pcclCreateCommunicatorEx(ctypes.byref(params), ctypes.byref(options),
                                            ctypes.byref(handle)), "pcclCreateCommunicator")
        self._h = handle

    # -- lifecycle --

    def _handle(self):
        h = getattr(self, "_h", None)
        if h is None or not h.value:
            raise InvalidUsage("the communicator is closed", function=None)
        return h

    def close(self):
        """Awaits in-flight async ops, leaves the run and frees the communicator."""
        h = getattr(self, "_h", None)
        if h is None or not h.value:
            return
        self._end_works()
        for handle in list(self._in_flight.values()):
            handle.wait()
        self._h = None
        _check(L.lib().pcclDestroyCommunicator(h), "pcclDestroyCommunicator")

    destroy = close

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    # -- membership --

    def connect(self, n_attempts=5, retry_delay=1.0):
        """Connects to the master, retrying up to n_attempts times on connection
        failures (retry_delay seconds apart). Blocks until the peers admit us.
        AuthenticationFailed (the run tokens differ) is raised at once, as are errors
        in the arguments or the call."""
        h = self._handle()
        n = max(1, int(n_attempts))
        for attempt in range(n):
            rc = L.lib().pcclConnect(h)
            if rc == 0:
                return
            err = error_for(rc, "pcclConnect")
            if rc in (Result.INVALID_ARGUMENT, Result.INVALID_USAGE, Result.NOT_INITIALIZED,
                      Result.AUTHENTICATION_FAILED) or attempt == n - 1:
                raise err
            time.sleep(retry_delay)

    def update_topology(self):
        _check(L.lib().pcclUpdateTopology(self._handle()), "pcclUpdateTopology")

    def optimize_topology(self):
        _check(L.lib().pcclOptimizeTopology(self._handle()), "pcclOptimizeTopology")

    def are_peers_pending(self):
        out = ctypes.c_bool()
        _check(L.lib().pcclArePeersPending(self._handle(), ctypes.byref(out)),
               "pcclArePeersPending")
        return bool(out.value)

    def get_attribute(self, attribute):
        out = ctypes.c_int()
        _check(L.lib().pcclGetAttribute(self._handle(), int(attribute), ctypes.byref(out)),
               "pcclGetAttribute")
        return int(out.value)

    # -- shared state --

    def sync_shared_state(self, shared_state, strategy=SharedStateSyncStrategy.ENFORCE_POPULAR):
        """Synchronizes shared_state (in place); returns SharedStateSyncInfo.

        strategy: a SharedStateSyncStrategy (None: ENFORCE_POPULAR), passed to
        PCCL 1.0's 4-argument pcclSynchronizeSharedState.
        """
        if not isinstance(shared_state, SharedState):
            raise InvalidArgument(f"expected a SharedState, got {type(shared_state).__name__}")
        if strategy is None:
            strategy = SharedStateSyncStrategy.ENFORCE_POPULAR
        strategy = SharedStateSyncStrategy(int(getattr(strategy, "value", strategy)))
        info = L.CSharedStateSyncInfo()
        rc = L.lib().pcclSynchronizeSharedState(self._handle(), ctypes.byref(shared_state._c),
                                                int(strategy), ctypes.byref(info))
        _check(rc, "pcclSynchronizeSharedState")
        return SharedStateSyncInfo(info.tx_bytes, info.rx_bytes)

    # -- all-reduce --

    def all_reduce(self, send, recv, *, op=ReduceOp.SUM, tag=0, operand_descriptor=None,
                   quantization_options=None):
        """Blocking all-reduce of send into recv (pass the same array for in place).
        Returns ReduceInfo; raises a PCCLError subclass on failure."""
        desc, sb, rb = _make_descriptor(send, recv, op, tag, operand_descriptor,
                                        quantization_options)
        c_desc = desc.to_c()
        info = L.CReduceInfo()
        rc = L.lib().pcclAllReduce(sb.ptr, rb.ptr, ctypes.byref(c_desc), self._handle(),
                                   ctypes.byref(info))
        _check(rc, "pcclAllReduce")
        return ReduceInfo(info.local_world_size, info.tx_bytes, info.rx_bytes)

    def all_reduce_async(self, send, recv, *, op=ReduceOp.SUM, tag=0, operand_descriptor=None,
                         quantization_options=None):
        """Starts an all-reduce; returns an AsyncReduceHandle. The buffers belong
        to the operation until the handle is waited on (this communicator keeps
        them alive meanwhile)."""
        desc, sb, rb = _make_descriptor(send, recv, op, tag, operand_descriptor,
                                        quantization_options)
        c_desc = desc.to_c()
        c_handle = L.CAsyncReduceOp()
        with self._lock:
            rc = L.lib().pcclAllReduceAsync(sb.ptr, rb.ptr, ctypes.byref(c_desc), self._handle(),
                                            ctypes.byref(c_handle))
            _check(rc, "pcclAllReduceAsync")
            handle = AsyncReduceHandle(self, c_handle, (send, recv))
            self._in_flight[id(handle)] = handle
        return handle

    def _forget(self, handle):
        with self._lock:
            self._in_flight.pop(id(handle), None)

    def all_reduce_multiple_with_retry(self, descriptors, *, max_in_flight=4):
        """Runs all-reduces (ReduceOpDescriptor list), retrying failed ones until
        all succeed. Returns ReduceInfo with the summed tx/rx bytes."""
        descs = list(descriptors)
        arr = (L.CReduceOpDescriptor * max(1, len(descs)))()
        for i, d in enumerate(descs):
            d.to_c_inpl(arr[i])
        info = L.CReduceInfo()
        rc = L.lib().pcclAllReduceMultipleWithRetry(arr, len(descs), self._handle(),
                                                    ctypes.byref(info), int(max_in_flight))
        _check(rc, "pcclAllReduceMultipleWithRetry")
        return ReduceInfo(info.local_world_size, info.tx_bytes, info.rx_bytes)


# --------------------------------------------------------------------------
# Master
# --------------------------------------------------------------------------


def _listen_url(listen_address):
    if "://" in listen_address:
        return listen_address
    if listen_address.startswith("[") or listen_address.count(":") == 1:
        return "tcp://" + listen_address
    return f"tcp://{listen_address}:{DEFAULT_MASTER_PORT}"


class _Terminate(BaseException):
    """Raised by the temporary SIGTERM handler while a master serves until interrupted."""


def _on_sigterm(signum, frame):
    raise _Terminate()


# Masters that run(): the interpreter's exit serves each until it is interrupted.
_masters = weakref.WeakSet()


class MasterNode:
    """A master running in this process (on libpccl's own thread).

    listen_address: "ip:port" (port 0: any free port, read .port) or a URL
    ("tcp://host:port", "ipc:///path"). The listener is bound on construction;
    run() starts serving and returns at once.

    Lifetime, as PCCL 1.0: a master that was run() and not interrupt()ed keeps
    serving when it is dropped -- when the function holding it returns, or the
    script ends -- until it is interrupted: interrupt() from another thread,
    SIGINT (KeyboardInterrupt), or SIGTERM (handled while it waits, when the
    program has no SIGTERM handler of its own). So a script that calls run()
    and returns is a master process. Then it is stopped and freed.
    close() (and leaving a `with` block) stops and frees it at once.
    """

    def __init__(self, listen_address="0.0.0.0:48148", *, heartbeat_ms=0, evict_ms=0,
                 vote_timeout_ms=0, max_peers=0):
        lib = L.lib()
        self.listen_url = _listen_url(listen_address)
        self._url = self.listen_url.encode("utf-8")
        params = L.MasterCreateParams(self._url, int(heartbeat_ms), int(evict_ms),
                                      int(vote_timeout_ms), int(max_peers))
        handle = ctypes.c_void_p()
        port = ctypes.c_uint16()
        self._running = False
        self._interrupted = False
        self._waiter = None
        self._terminated = threading.Event()
        self._await_rc = 0
        self._lock = threading.Lock()
        _check(lib.pcclCreateMasterEx(ctypes.byref(params), ctypes.byref(handle),
                                      ctypes.byref(port)), "pcclCreateMasterEx")
        self._h = handle
        self.port = int(port.value)

    def _handle(self):
        h = getattr(self, "_h", None)
        if h is None or not h.value:
            raise InvalidUsage("the master is destroyed")
        return h

    @property
    def running(self):
        """Whether run() was called and the master has not terminated yet."""
        return self._running and not self._terminated.is_set()

    def run(self):
        """Starts serving (returns at once; the master runs on its own thread)."""
        _check(L.lib().pcclRunMaster(self._handle()), "pcclRunMaster")
        self._running = True
        _masters.add(self)

    def interrupt(self):
        """Asks the master to stop. Safe from any thread."""
        _check(L.lib().pcclInterruptMaster(self._handle()), "pcclInterruptMaster")
        self._interrupted = True

    def _start_waiter(self):
        # pcclMasterAwaitTermination runs once, on a helper thread, so that the
        # waiting thread stays responsive to signals (KeyboardInterrupt)
        with self._lock:
            if self._waiter is None:
                h = self._handle()
                done = self._terminated

                def wait():
                    try:
                        self._await_rc = L.lib().pcclMasterAwaitTermination(h)
                    finally:
                        done.set()

                self._waiter = threading.Thread(target=wait, name="pccl-master-await", daemon=True)
                self._waiter.start()
        return self._terminated

    def await_termination(self, timeout=None):
        """Waits until the master stopped (after interrupt()). Returns whether it
        did (False only when timeout, in seconds, elapsed). Signals are handled
        meanwhile (Ctrl-C raises KeyboardInterrupt here; the master keeps running)."""
        if not self._running:
            return True
        done = self._start_waiter()
        deadline = None if timeout is None else time.monotonic() + timeout
        while not done.wait(0.2):
            if deadline is not None and time.monotonic() >= deadline:
                return False
        _check(self._await_rc, "pcclMasterAwaitTermination")
        return True

    def serve_forever(self):
        """Serves until interrupted: interrupt() from another thread, SIGINT or
        SIGTERM (while waiting here, SIGTERM is handled as an interrupt unless the
        program installed its own handler). Then stops and frees the master.
        What a dropped master that runs does (PCCL's lifetime)."""
        if not self._running:
            self.close()
            return
        restore = None
        if threading.current_thread() is threading.main_thread():
            try:
                if signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None):
                    restore = signal.signal(signal.SIGTERM, _on_sigterm)
            except (ValueError, OSError, TypeError):
                restore = None
        try:
            try:
                self.await_termination()
            except (KeyboardInterrupt, _Terminate):
                pass
        finally:
            if restore is not None:
                try:
                    signal.signal(signal.SIGTERM, restore)
                except (ValueError, OSError, TypeError):
                    pass
        self.close()

    def close(self):
        """Stops (if running) and frees the master at once."""
        h = getattr(self, "_h", None)
        if h is None or not h.value:
            return
        pending = None
        if self._running:
            if not self._interrupted:
                self.interrupt()
            while True:
                try:
                    self.await_termination()
                    break
                except KeyboardInterrupt as e:  # interrupted already: termination is imminent
                    pending = e
        self._h = None
        self._running = False
        _masters.discard(self)
        _check(L.lib().pcclDestroyMaster(h), "pcclDestroyMaster")
        if pending is not None:
            raise pending

    destroy = close

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            if getattr(self, "_running", False) and not self._interrupted:
                self.serve_forever()  # PCCL: a running master is awaited, not killed
            else:
                self.close()
        except Exception:
            pass


@atexit.register
def _serve_masters_at_exit():
    # a master kept in a global (or anywhere still alive at exit) that runs
    # and was not interrupted: the script ends as PCCL's does, by serving it
    for m in list(_masters):
        try:
            if m._running and not m._interrupted:
                m.serve_forever()
            else:
                m.close()
        except Exception:
            pass


# --------------------------------------------------------------------------
# Library-level helpers
# --------------------------------------------------------------------------


class BuildInfo:
    __slots__ = ("has_cuda_support",)

    def __init__(self, has_cuda_support):
        self.has_cuda_support = bool(has_cuda_support)

    def __repr__(self):
        return f"BuildInfo(has_cuda_support={self.has_cuda_support})"


def init():
    """Loads libpccl and calls pcclInit (done automatically on first use)."""
    L.lib()


def get_version():
    """The runtime version of libpccl as (major, minor, patch)."""
    v = ctypes.c_uint32()
    _check(L.lib().pcclGetVersion(ctypes.byref(v)), "pcclGetVersion")
    return ((v.value >> 16) & 0xFF, (v.value >> 8) & 0xFF, v.value & 0xFF)


def get_build_info():
    bi = L.CBuildInfo()
    _check(L.lib().pcclGetBuildInfo(ctypes.byref(bi)), "pcclGetBuildInfo")
    return BuildInfo(bi.has_cuda_support)
