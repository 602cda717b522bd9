"""The collective set on a Communicator (include/pccl.h): broadcast, reduce, all-gather,
reduce-scatter, all-to-all, gather, scatter, barrier, send and recv, blocking or async, and
Work, the work object of an async op (pcclWork_t), which pccl.torchcomms uses too.

Sizes follow the C calls (count elements per block), taken from the arrays; the checks of
what C cannot see (element counts against the world, dtypes) raise here, everything else
(root or peer out of range, overlaps other than the in-place layouts, a missing buffer at the
root) is libpccl's pcclInvalidArgument.
"""

import ctypes
import datetime
import operator
import weakref

from . import _core  # _core's Communicator inherits Collectives: names are read at call time
from . import _lib as L
from ._errors import DTypeMismatchError, InvalidArgument, Result, SizeMismatchError, error_for
from ._types import Attribute, ReduceOp

_U32_MAX = 2**32 - 1


def _seconds(timeout, what="timeout"):
    """A timeout (timedelta or seconds) in seconds, or None."""
    if timeout is None:
        return None
    if isinstance(timeout, datetime.timedelta):
        s = timeout.total_seconds()
    elif isinstance(timeout, (int, float)) and not isinstance(timeout, bool):
        s = float(timeout)
    else:
        raise TypeError(f"{what} must be a datetime.timedelta or seconds, got {timeout!r}")
    if s < 0:
        raise ValueError(f"{what} must not be negative, got {timeout!r}")
    return s


def _ms(seconds):
    if seconds is None:
        return 0
    return min(_U32_MAX, max(1, int(round(seconds * 1000))))


class CollectiveInfo:
    """pcclCollectiveInfo_t: the op's world and this peer's rank in it, its epoch, and the
    bytes this peer sent and received on its links."""

    __slots__ = ("world_size", "rank", "epoch", "tx_bytes", "rx_bytes")

    def __init__(self, world_size, rank, epoch, tx_bytes, rx_bytes):
        self.world_size = int(world_size)
        self.rank = int(rank)
        self.epoch = int(epoch)
        self.tx_bytes = int(tx_bytes)
        self.rx_bytes = int(rx_bytes)

    @classmethod
    def _of(cls, c):
        return cls(c.world_size, c.rank, c.epoch, c.tx_bytes, c.rx_bytes)

    def __repr__(self):
        return (f"CollectiveInfo(world_size={self.world_size}, rank={self.rank}, "
                f"epoch={self.epoch}, tx_bytes={self.tx_bytes}, rx_bytes={self.rx_bytes})")


class Work:
    """A started op (pcclWork_t): is_completed(), wait(timeout=None).

    wait() returns the op's CollectiveInfo (also .info afterwards) or raises its PCCLError;
    timeout (seconds or timedelta) bounds the wait: pccl.Timeout while the op still runs (it
    is not cancelled; wait again). The Work keeps the op's buffers and communicator alive
    until the op ended; a dropped Work of a running op waits for it (pcclWorkFree), and the
    communicator's close() ends its ops first."""

    def __init__(self, fn_name, c_work=None, keep=None, rc=0, on_fail=None, comm=None):
        self._fn = fn_name
        self._on_fail = on_fail
        self._w = c_work  # ctypes.c_void_p of a running op, or None once finished
        self._keep = keep  # the op's buffers and C arrays, alive until it ended
        self._comm = comm
        self._rc = None if c_work is not None else rc
        self.info = None
        if c_work is not None and comm is not None:
            comm._track(self)

    def is_completed(self):
        if self._rc is not None:
            return True
        done = ctypes.c_bool()
        rc = L.lib().pcclWorkIsCompleted(self._w, ctypes.byref(done))
        if rc != 0:
            raise error_for(rc, "pcclWorkIsCompleted")
        return bool(done.value)

    def wait(self, timeout=None):
        if self._rc is None:
            s = _seconds(timeout)
            info = L.CCollectiveInfo()
            if s is None:
                rc = L.lib().pcclWorkWait(self._w, ctypes.byref(info))
            else:
                rc = L.lib().pcclWorkWaitTimeout(self._w, _ms(s) if s > 0 else 0,
                                                 ctypes.byref(info))
                if rc == Result.TIMEOUT and not self.is_completed():  # still running
                    raise error_for(rc, "pcclWorkWaitTimeout")
            self._end(rc, info)
        if self._rc != 0:
            raise error_for(self._rc, self._fn)
        return self.info

    def _end(self, rc, info):
        self._rc = rc
        if rc == 0:
            self.info = CollectiveInfo._of(info)
        L.lib().pcclWorkFree(self._w)
        self._w = self._keep = self._comm = None
        if rc != 0 and self._on_fail is not None:
            self._on_fail()

    def _finish(self):
        """Ends the op without raising (before its communicator is destroyed)."""
        if self._rc is None:
            info = L.CCollectiveInfo()
            self._end(L.lib().pcclWorkWait(self._w, ctypes.byref(info)), info)

    def __del__(self):
        try:
            if self._w is not None:
                L.lib().pcclWorkFree(self._w)  # a running op is waited for first
                self._w = None
        except Exception:
            pass


# --------------------------------------------------------------------------
# Argument checks
# --------------------------------------------------------------------------


def _int_arg(value, what, lo, hi):
    if isinstance(value, bool):
        raise TypeError(f"{what} must be an int, got {value!r}")
    try:
        v = operator.index(value)
    except TypeError:
        raise TypeError(f"{what} must be an int, got {value!r}") from None
    if not lo <= v < hi:
        raise InvalidArgument(f"{what} must be in [{lo}, {hi}), got {v}")
    return v


def _rank_arg(value, what):
    # the range [0, world) is libpccl's check (pcclInvalidArgument)
    return _int_arg(value, what, -(2**31), 2**31)


def _op_arg(op):
    if isinstance(op, bool):
        raise TypeError(f"op must be a pccl.ReduceOp, got {op!r}")
    try:
        return int(ReduceOp(op))
    except (ValueError, TypeError):
        raise InvalidArgument(f"op must be a pccl.ReduceOp, got {op!r}") from None


def _buf(obj, what, writable):
    return _core._buffer_of(obj, what, writable=writable)


def _same_dtype(a, b, what, a_name, b_name):
    if a.dtype != b.dtype:
        raise DTypeMismatchError(f"{what}: {b_name} is {b.dtype.name} but {a_name} is "
                                 f"{a.dtype.name}; they must be equal")


def _blocks(what, big, small, world, big_name, small_name):
    """big holds world blocks of small's element count."""
    if big.count != world * small.count:
        raise SizeMismatchError(f"{what}: {big_name} has {big.count} elements; it must hold "
                                f"world ({world}) x {small_name} ({small.count}) = "
                                f"{world * small.count}")


# --------------------------------------------------------------------------
# The methods
# --------------------------------------------------------------------------


class Collectives:
    """The collective set of pccl.Communicator. Buffers: numpy arrays or CPU torch tensors,
    contiguous, used in place. Every method takes keyword-only tag (the op's tag: ops in flight
    together need distinct ones), timeout_ms (0: the communicator's) and async_op; it returns a
    CollectiveInfo, or with async_op=True a Work."""

    def _track(self, work):
        works = self.__dict__.get("_works")
        if works is None:
            works = self.__dict__["_works"] = weakref.WeakSet()
        works.add(work)

    def _end_works(self):
        for w in list(self.__dict__.get("_works", ())):
            w._finish()

    def _world(self):
        return self.get_attribute(Attribute.PEER_GROUP_WORLD_SIZE)

    def _start(self, fn, args, keep, tag, timeout_ms, async_op):
        o = L.CollectiveOptions.init()
        o.tag = _int_arg(tag, "tag", 0, 2**64)
        o.timeout_ms = _int_arg(timeout_ms, "timeout_ms", 0, 2**32)
        lib, h = L.lib(), self._handle()
        if async_op:
            w = ctypes.c_void_p()
            _core._check(getattr(lib, fn + "Async")(*args, ctypes.byref(o), h, ctypes.byref(w)),
                         fn + "Async")
            return Work(fn, w, keep, comm=self)
        info = L.CCollectiveInfo()
        _core._check(getattr(lib, fn)(*args, ctypes.byref(o), h, ctypes.byref(info)), fn)
        return CollectiveInfo._of(info)

    def broadcast(self, buf, root, *, tag=0, timeout_ms=0, async_op=False):
        """pcclBroadcast: root's buf is copied into every member's buf (same size and dtype)."""
        b = _buf(buf, "broadcast: buf", True)
        return self._start("pcclBroadcast", [b.ptr, b.count, int(b.dtype),
                                             _rank_arg(root, "root")],
                           (buf,), tag, timeout_ms, async_op)

    def reduce(self, send, recv, root, op=ReduceOp.SUM, *, tag=0, timeout_ms=0, async_op=False):
        """pcclReduce: the reduction of every member's send lands in root's recv (send's size;
        recv is send: in place; None on the other members)."""
        s = _buf(send, "reduce: send", recv is send)
        rptr = None
        if recv is not None and recv is not send:
            r = _buf(recv, "reduce: recv", True)
            _same_dtype(s, r, "reduce", "send", "recv")
            if r.count != s.count:
                raise SizeMismatchError(f"reduce: recv has {r.count} elements but send has "
                                        f"{s.count}; they must be equal")
            rptr = r.ptr
        elif recv is send:
            rptr = s.ptr
        return self._start("pcclReduce", [s.ptr, rptr, s.count, int(s.dtype), _op_arg(op),
                                          _rank_arg(root, "root")],
                           (send, recv), tag, timeout_ms, async_op)

    def all_gather(self, send, recv, *, tag=0, timeout_ms=0, async_op=False):
        """pcclAllGather: every member's send lands in block r (its rank) of every recv
        (world x send's elements; send may be this rank's block of recv: in place)."""
        s = _buf(send, "all_gather: send", False)
        r = _buf(recv, "all_gather: recv", True)
        _same_dtype(s, r, "all_gather", "send", "recv")
        _blocks("all_gather", r, s, self._world(), "recv", "send")
        return self._start("pcclAllGather", [s.ptr, r.ptr, s.count, int(s.dtype)],
                           (send, recv), tag, timeout_ms, async_op)

    def reduce_scatter(self, send, recv, op=ReduceOp.SUM, *, tag=0, timeout_ms=0,
                       async_op=False):
        """pcclReduceScatter: block r of the reduction of every member's send (world x recv's
        elements) lands in rank r's recv (recv may be this rank's block of send: in place)."""
        s = _buf(send, "reduce_scatter: send", False)
        r = _buf(recv, "reduce_scatter: recv", True)
        _same_dtype(s, r, "reduce_scatter", "send", "recv")
        _blocks("reduce_scatter", s, r, self._world(), "send", "recv")
        return self._start("pcclReduceScatter", [s.ptr, r.ptr, r.count, int(r.dtype),
                                                 _op_arg(op)],
                           (send, recv), tag, timeout_ms, async_op)

    def all_to_all(self, send, recv, *, tag=0, timeout_ms=0, async_op=False):
        """pcclAllToAll: block j of rank i's send lands in block i of rank j's recv (equal
        sizes the world divides; recv is send: in place)."""
        s = _buf(send, "all_to_all: send", recv is send)
        r = s if recv is send else _buf(recv, "all_to_all: recv", True)
        _same_dtype(s, r, "all_to_all", "send", "recv")
        world = self._world()
        if s.count != r.count or world < 1 or s.count % world:
            raise SizeMismatchError(f"all_to_all: send ({s.count} elements) and recv "
                                    f"({r.count}) must have one size the world ({world}) divides")
        return self._start("pcclAllToAll", [s.ptr, r.ptr, s.count // world, int(s.dtype)],
                           (send, recv), tag, timeout_ms, async_op)

    def gather(self, send, recv, root, *, tag=0, timeout_ms=0, async_op=False):
        """pcclGather: every member's send lands in block r (its rank) of root's recv (world x
        send's elements; None on the other members; send may be the root's block: in place)."""
        s = _buf(send, "gather: send", False)
        rptr = None
        if recv is not None:
            r = _buf(recv, "gather: recv", True)
            _same_dtype(s, r, "gather", "send", "recv")
            _blocks("gather", r, s, self._world(), "recv", "send")
            rptr = r.ptr
        return self._start("pcclGather", [s.ptr, rptr, s.count, int(s.dtype),
                                          _rank_arg(root, "root")],
                           (send, recv), tag, timeout_ms, async_op)

    def scatter(self, send, recv, root, *, tag=0, timeout_ms=0, async_op=False):
        """pcclScatter: block r of root's send (world x recv's elements; None on the other
        members) lands in rank r's recv (at the root, recv may be its block of send)."""
        r = _buf(recv, "scatter: recv", True)
        sptr = None
        if send is not None:
            s = _buf(send, "scatter: send", False)
            _same_dtype(r, s, "scatter", "recv", "send")
            _blocks("scatter", s, r, self._world(), "send", "recv")
            sptr = s.ptr
        return self._start("pcclScatter", [sptr, r.ptr, r.count, int(r.dtype),
                                           _rank_arg(root, "root")],
                           (send, recv), tag, timeout_ms, async_op)

    def barrier(self, *, tag=0, timeout_ms=0, async_op=False):
        """pcclBarrier: returns once every member of the group entered it."""
        return self._start("pcclBarrier", [], (), tag, timeout_ms, async_op)

    def send(self, buf, peer, *, tag=0, timeout_ms=0, async_op=False):
        """pcclSend: buf to rank peer, which calls recv naming this rank, the same tag, size
        and dtype."""
        b = _buf(buf, "send: buf", False)
        return self._start("pcclSend", [b.ptr, b.count, int(b.dtype), _rank_arg(peer, "peer")],
                           (buf,), tag, timeout_ms, async_op)

    def recv(self, buf, peer, *, tag=0, timeout_ms=0, async_op=False):
        """pcclRecv: fills buf from rank peer's send."""
        b = _buf(buf, "recv: buf", True)
        return self._start("pcclRecv", [b.ptr, b.count, int(b.dtype), _rank_arg(peer, "peer")],
                           (buf,), tag, timeout_ms, async_op)
