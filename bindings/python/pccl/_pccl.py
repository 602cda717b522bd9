"""PCCL 1.0's module name for its API (PCCL's package does `from pccl._pccl import *`,
and some of its scripts import names from it): the same objects as `pccl`."""

from ._core import (  # noqa: F401
    AsyncReduceHandle, Communicator, MasterNode, QuantizationOptions, ReduceDescriptor, ReduceInfo,
    ReduceOpDescriptor, ReduceOperandDescriptor, SharedState, SharedStateSyncInfo, TensorInfo,
)
from ._errors import PCCLError, Result  # noqa: F401
from ._types import (  # noqa: F401
    Attribute, DataType, DeviceType, DistributionHint, QuantizationAlgorithm, ReduceOp,
    SharedStateSyncStrategy,
)

__all__ = [
    "AsyncReduceHandle", "Attribute", "Communicator", "DataType", "DeviceType", "DistributionHint",
    "MasterNode", "PCCLError", "QuantizationAlgorithm", "QuantizationOptions", "ReduceDescriptor",
    "ReduceInfo", "ReduceOp", "ReduceOpDescriptor", "ReduceOperandDescriptor", "Result",
    "SharedState", "SharedStateSyncInfo", "SharedStateSyncStrategy", "TensorInfo",
]
