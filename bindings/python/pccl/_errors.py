"""Result codes of pcclResult_t and the exception raised for each one."""

import enum


class Result(enum.IntEnum):
    """pcclResult_t. Values 0..12 are PCCL 1.0's; 13..18 are appended by pccl."""

    SUCCESS = 0
    NOT_INITIALIZED = 1
    INTERNAL_ERROR = 2
    INVALID_ARGUMENT = 3
    INVALID_USAGE = 4
    TOO_FEW_PEERS = 5
    MASTER_CONNECTION_FAILED = 6
    RANK_CONNECTION_FAILED = 7
    RANK_CONNECTION_LOST = 8
    NO_SHARED_STATE_AVAILABLE = 9
    PENDING_ASYNC_OPS = 10
    UPDATE_TOPOLOGY_FAILED = 11
    TOPOLOGY_OPTIMIZATION_FAILED = 12
    TIMEOUT = 13
    SYSTEM_ERROR = 14
    REMOTE_ERROR = 15
    SHARED_STATE_SYNC_FAILED = 16
    PROTOCOL_ERROR = 17
    AUTHENTICATION_FAILED = 18
    # alias: the name PCCL's documentation uses
    OPTIMIZE_TOPOLOGY_FAILED = 12


# (C name, message) per code, as PCCL_RESULT_MAP in include/pccl.h.
RESULT_INFO = {
    0: ("pcclSuccess", "success"),
    1: ("pcclNotInitialized", "pcclInit was not called"),
    2: ("pcclInternalError", "internal error"),
    3: ("pcclInvalidArgument", "invalid argument"),
    4: ("pcclInvalidUsage", "invalid usage"),
    5: ("pcclTooFewPeers", "too few peers"),
    6: ("pcclMasterConnectionFailed", "master connection failed"),
    7: ("pcclRankConnectionFailed", "peer connection failed"),
    8: ("pcclRankConnectionLost", "peer connection lost"),
    9: ("pcclNoSharedStateAvailable", "no shared state available"),
    10: ("pcclPendingAsyncOps", "asynchronous operations pending"),
    11: ("pcclUpdateTopologyFailed", "update topology failed"),
    12: ("pcclTopologyOptimizationFailed", "topology optimization failed"),
    13: ("pcclTimeout", "timed out"),
    14: ("pcclSystemError", "system error"),
    15: ("pcclRemoteError", "remote error"),
    16: ("pcclSharedStateSyncFailed", "shared state synchronization failed"),
    17: ("pcclProtocolError", "protocol error"),
    18: ("pcclAuthenticationFailed", "authentication failed"),
}


def _result_name(result):
    return result.name if isinstance(result, Result) else str(result)


class PCCLError(Exception):
    """Base class of every error pccl raises.

    PCCLError(result, func_name) is PCCL 1.0's constructor: result is a
    Result (or its int), func_name the C function that returned it; the
    message is PCCL's: "pcclConnect failed with error: INVALID_USAGE", and
    str() appends ": INVALID_USAGE" as PCCL's __str__ does.

    pccl's additions: .function (= func_name), and the keyword form
    PCCLError(message="...", result=..., function=...) the binding uses for
    arguments it refuses before calling C (function is None then). A
    subclass called without a result takes its own code (InvalidUsage() has
    Result.INVALID_USAGE). A str as the first positional argument is taken as
    the message (InvalidArgument("tag must be ...")).
    """

    result_code = None  # set on each subclass

    def __init__(self, result=None, func_name=None, *, message=None, function=None):
        if isinstance(result, str):  # PCCLError("message") / Subclass("message")
            message, result = result, None
        if function is None:
            function = func_name
        if result is None:
            result = self.result_code
        try:
            result = Result(result) if result is not None else None
        except ValueError:
            pass
        self.result = result
        self.function = function
        if message is None:
            message = f"{function} failed with error: {_result_name(result)}"
        super().__init__(message)

    def __str__(self):
        base = super().__str__()
        return base if self.result is None else f"{base}: {_result_name(self.result)}"

    @staticmethod
    def check(result, func_name=None):
        """Raises the exception for a non-zero result code (PCCL's API)."""
        if int(getattr(result, "value", result)) != 0:
            raise error_for(result, func_name)

    @property
    def describe(self):
        """The C name and the header's text of the result code, e.g. 'pcclTooFewPeers (too few peers)'."""
        try:
            cname, text = RESULT_INFO[int(self.result)]
        except (KeyError, TypeError, ValueError):
            return f"unknown pccl result {self.result}"
        return f"{cname} ({text})"


class NotInitialized(PCCLError):
    result_code = Result.NOT_INITIALIZED


class InternalError(PCCLError):
    result_code = Result.INTERNAL_ERROR


class InvalidArgument(PCCLError):
    result_code = Result.INVALID_ARGUMENT


class InvalidUsage(PCCLError):
    result_code = Result.INVALID_USAGE


class TooFewPeers(PCCLError):
    result_code = Result.TOO_FEW_PEERS


class MasterConnectionFailed(PCCLError):
    result_code = Result.MASTER_CONNECTION_FAILED


class RankConnectionFailed(PCCLError):
    result_code = Result.RANK_CONNECTION_FAILED


class RankConnectionLost(PCCLError):
    result_code = Result.RANK_CONNECTION_LOST


class NoSharedStateAvailable(PCCLError):
    result_code = Result.NO_SHARED_STATE_AVAILABLE


class PendingAsyncOps(PCCLError):
    result_code = Result.PENDING_ASYNC_OPS


class UpdateTopologyFailed(PCCLError):
    result_code = Result.UPDATE_TOPOLOGY_FAILED


class TopologyOptimizationFailed(PCCLError):
    result_code = Result.TOPOLOGY_OPTIMIZATION_FAILED


OptimizeTopologyFailed = TopologyOptimizationFailed


class Timeout(PCCLError, TimeoutError):
    result_code = Result.TIMEOUT


class PCCLSystemError(PCCLError, OSError):
    """pcclSystemError (named so that it does not shadow the builtin SystemError)."""

    result_code = Result.SYSTEM_ERROR

    def __init__(self, result=None, func_name=None, *, message=None, function=None):
        PCCLError.__init__(self, result, func_name, message=message, function=function)


class RemoteError(PCCLError):
    result_code = Result.REMOTE_ERROR


class SharedStateSyncFailed(PCCLError):
    result_code = Result.SHARED_STATE_SYNC_FAILED


class ProtocolError(PCCLError):
    result_code = Result.PROTOCOL_ERROR


class AuthenticationFailed(PCCLError):
    """The run tokens differ (docs/security.md): the master requires one this peer lacks or
    holds differently, or the master could not prove it holds this peer's (PCCL_RUN_TOKEN_FILE)."""

    result_code = Result.AUTHENTICATION_FAILED


# ---- errors the binding raises before calling C (all are InvalidArgument) ----
# Each is also the builtin exception PCCL 1.0 raises for the same input: its
# `assert`s (AssertionError) and ValueError (a wrong type, an unknown torch dtype).


class TensorArgumentError(InvalidArgument):
    """A tensor or buffer argument cannot be passed to libpccl as it is."""


class UnsupportedTensorTypeError(TensorArgumentError, TypeError, ValueError):
    """The object is neither a numpy array, a torch tensor nor a raw pointer."""


class UnsupportedDTypeError(TensorArgumentError, TypeError, ValueError, AssertionError):
    """The element type has no pcclDataType_t (e.g. complex, bool, object, big-endian)."""


class DTypeMismatchError(TensorArgumentError, TypeError, AssertionError):
    """send/recv element types differ, or differ from the operand descriptor."""


class NonContiguousTensorError(TensorArgumentError, ValueError, AssertionError):
    """The array or tensor is not C-contiguous; pass .copy() / .contiguous() explicitly."""


class SizeMismatchError(TensorArgumentError, ValueError, AssertionError):
    """send and recv have different element counts."""


class ReadOnlyBufferError(TensorArgumentError, ValueError):
    """A buffer pccl writes into (recv buffer, shared-state tensor) is read-only."""


class UnsupportedDeviceError(TensorArgumentError, ValueError, AssertionError):
    """The tensor is not in CPU memory (libpccl collectives take CPU memory only)."""


class OverlappingBuffersError(TensorArgumentError, ValueError):
    """send and recv overlap without being the same buffer (in place needs send is recv)."""


class NullPointerError(TensorArgumentError, ValueError):
    """TensorInfo(name, 0, ...): a raw data pointer of 0 (PCCL raises ValueError)."""


class EmptySharedStateError(InvalidArgument, AssertionError):
    """SharedState([]): a shared state needs at least one tensor (PCCL raises AssertionError)."""


ERROR_CLASSES = {
    Result.NOT_INITIALIZED: NotInitialized,
    Result.INTERNAL_ERROR: InternalError,
    Result.INVALID_ARGUMENT: InvalidArgument,
    Result.INVALID_USAGE: InvalidUsage,
    Result.TOO_FEW_PEERS: TooFewPeers,
    Result.MASTER_CONNECTION_FAILED: MasterConnectionFailed,
    Result.RANK_CONNECTION_FAILED: RankConnectionFailed,
    Result.RANK_CONNECTION_LOST: RankConnectionLost,
    Result.NO_SHARED_STATE_AVAILABLE: NoSharedStateAvailable,
    Result.PENDING_ASYNC_OPS: PendingAsyncOps,
    Result.UPDATE_TOPOLOGY_FAILED: UpdateTopologyFailed,
    Result.TOPOLOGY_OPTIMIZATION_FAILED: TopologyOptimizationFailed,
    Result.TIMEOUT: Timeout,
    Result.SYSTEM_ERROR: PCCLSystemError,
    Result.REMOTE_ERROR: RemoteError,
    Result.SHARED_STATE_SYNC_FAILED: SharedStateSyncFailed,
    Result.PROTOCOL_ERROR: ProtocolError,
    Result.AUTHENTICATION_FAILED: AuthenticationFailed,
}


def error_for(result, function=None):
    """The exception instance for a non-zero pcclResult_t."""
    try:
        cls = ERROR_CLASSES.get(Result(int(result)), PCCLError)
    except ValueError:
        cls = PCCLError
    return cls(int(getattr(result, "value", result)), function)
