"""pccl: Python bindings of libpccl (ctypes, no compile step).

A superset of PCCL's Python package: Communicator, SharedState, TensorInfo,
all_reduce / all_reduce_async, MasterNode, the enums of include/pccl.h, and a
PCCLError subclass per result code. numpy arrays and CPU torch tensors are used
in place. libpccl is found through PCCL_LIBRARY, the build trees of this
checkout, the dynamic loader, or the installed library (see docs/python.md).
"""

from ._errors import (
    DTypeMismatchError,
    InternalError,
    InvalidArgument,
    InvalidUsage,
    MasterConnectionFailed,
    NoSharedStateAvailable,
    NonContiguousTensorError,
    NotInitialized,
    OptimizeTopologyFailed,
    OverlappingBuffersError,
    PCCLError,
    PCCLSystemError,
    PendingAsyncOps,
    ProtocolError,
    RankConnectionFailed,
    RankConnectionLost,
    ReadOnlyBufferError,
    RemoteError,
    Result,
    SharedStateSyncFailed,
    SizeMismatchError,
    TensorArgumentError,
    Timeout,
    TooFewPeers,
    TopologyOptimizationFailed,
    UnsupportedDeviceError,
    UnsupportedDTypeError,
    UnsupportedTensorTypeError,
    UpdateTopologyFailed,
    ERROR_CLASSES,
    error_for,
)
from ._lib import LibraryNotFoundError, library_path, load_library
from ._types import (
    Attribute,
    DataType,
    DeviceType,
    DistributionHint,
    QuantizationAlgorithm,
    ReduceOp,
    SharedStateSyncStrategy,
)
from ._core import (
    AsyncReduceHandle,
    BuildInfo,
    Communicator,
    MasterNode,
    QuantizationOptions,
    ReduceDescriptor,
    ReduceInfo,
    ReduceOpDescriptor,
    ReduceOperandDescriptor,
    SharedState,
    SharedStateSyncInfo,
    TensorInfo,
    get_build_info,
    get_version,
    init,
    parse_address,
)
from . import cuda

__version__ = "0.1.0"

__all__ = [n for n in dir() if not n.startswith("_") and n not in ("cuda",)]
