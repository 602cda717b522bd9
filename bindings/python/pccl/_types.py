"""Enums of include/pccl.h and the mapping of numpy / torch element types."""

import enum
import sys


class ReduceOp(enum.IntEnum):
    """pcclRedOp_t. BAND, BOR and BXOR (pccl additions) take integer types only.

    PREMUL_SUM (pcclPremulSum): every member's input times its own factor, then
    summed; float types only. Its factor travels in the collective-set options:
    all_reduce (pcclAllReduce) refuses it (InvalidArgument, from libpccl);
    Communicator.reduce / reduce_scatter take it with the default factor 1.0."""

    SUM = 0
    AVG = 1
    PROD = 2
    MAX = 3
    MIN = 4
    BAND = 5
    BOR = 6
    BXOR = 7
    PREMUL_SUM = 8


class Attribute(enum.IntEnum):
    """pcclAttribute_t."""

    GLOBAL_WORLD_SIZE = 1
    PEER_GROUP_WORLD_SIZE = 2
    NUM_DISTINCT_PEER_GROUPS = 3
    LARGEST_PEER_GROUP_WORLD_SIZE = 4
    # aliases of PEER_GROUP_WORLD_SIZE: PCCL's documentation and its Python package
    CURRENT_WORLD_SIZE = 2
    LOCAL_WORLD_SIZE = 2
    # pccl extensions: tensor bytes copied in memory, low 31 bits and the bits above
    COPIED_BYTES = 5
    COPIED_BYTES_HIGH = 6
    # pccl extensions: this peer's index in its group's ring of the current epoch (-1 while in
    # no installed ring) and that epoch (0 before any)
    RANK = 7
    EPOCH = 8


class SharedStateSyncStrategy(enum.IntEnum):
    """pcclSharedStateSyncStrategy_t."""

    ENFORCE_POPULAR = 0
    RECEIVE_ONLY = 1
    SEND_ONLY = 2


class DeviceType(enum.IntEnum):
    """pcclDeviceType_t."""

    CPU = 0
    CUDA = 1

    @staticmethod
    def from_torch_device_type(device_type):
        """'cpu' -> CPU, 'cuda' -> CUDA, anything else ('meta', 'mps', ...) -> None, as
        PCCL. A torch.device is accepted too (its .type is used)."""
        s = getattr(device_type, "type", device_type)
        return {"cpu": DeviceType.CPU, "cuda": DeviceType.CUDA}.get(s)


class DistributionHint(enum.IntEnum):
    """pcclDistributionHint_t."""

    NONE = 0
    NORMAL = 1
    UNIFORM = 2


class Algorithm(enum.IntEnum):
    """pcclAlgorithm_t: the algorithm of an op (docs/algorithms.md)."""

    AUTO = 0
    RELAY = 1
    DIRECT = 2
    RING = 3
    RING_STRIPED = 4
    HALVING_DOUBLING = 5


class TuneKind(enum.IntFlag):
    """pcclTuneOptions_t.kinds (PCCL_TUNE_*): the kinds Communicator.tune tunes."""

    ALL_REDUCE = 1 << 0
    BROADCAST = 1 << 1
    REDUCE = 1 << 2
    ALL_GATHER = 1 << 3
    REDUCE_SCATTER = 1 << 4
    ALL_TO_ALL = 1 << 5
    GATHER = 1 << 6
    SCATTER = 1 << 7
    BARRIER = 1 << 8
    ALL = 0x1FF


class QuantizationAlgorithm(enum.IntEnum):
    """pcclQuantizationAlgorithm_t."""

    NONE = 0
    MIN_MAX = 1
    ZERO_POINT_SCALE = 2


_SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 8, 7: 8, 8: 2, 9: 2, 10: 4, 11: 8}

# DataType name -> numpy dtype name (bfloat16: numpy has none)
_NUMPY_NAMES = {
    "UINT8": "uint8",
    "INT8": "int8",
    "INT16": "int16",
    "UINT16": "uint16",
    "UINT32": "uint32",
    "INT32": "int32",
    "UINT64": "uint64",
    "INT64": "int64",
    "FLOAT16": "float16",
    "FLOAT": "float32",
    "DOUBLE": "float64",
}

# DataType name -> torch dtype attribute (torch 1.13 has no uint16/32/64)
_TORCH_NAMES = {
    "UINT8": "uint8",
    "INT8": "int8",
    "INT16": "int16",
    "UINT16": "uint16",
    "UINT32": "uint32",
    "INT32": "int32",
    "UINT64": "uint64",
    "INT64": "int64",
    "FLOAT16": "float16",
    "BFLOAT16": "bfloat16",
    "FLOAT": "float32",
    "DOUBLE": "float64",
}


class DataType(enum.IntEnum):
    """pcclDataType_t (PCCL 1.0 numbering: INT16 = 2 before UINT16 = 3)."""

    UINT8 = 0
    INT8 = 1
    INT16 = 2
    UINT16 = 3
    UINT32 = 4
    INT32 = 5
    UINT64 = 6
    INT64 = 7
    FLOAT16 = 8
    BFLOAT16 = 9
    FLOAT = 10
    DOUBLE = 11
    # aliases
    FLOAT32 = 10
    FLOAT64 = 11

    @property
    def size(self):
        """Bytes per element."""
        return _SIZES[int(self)]

    def to_numpy_dtype(self):
        import numpy as np

        name = _NUMPY_NAMES.get(self.name)
        if name is None:
            raise ValueError(f"numpy has no dtype for {self.name}")
        return np.dtype(name)

    @staticmethod
    def from_numpy_dtype(dtype):
        """The DataType of a numpy dtype. Unsupported ones (complex, bool, non-native byte
        order, ...) raise UnsupportedDTypeError, an AssertionError as PCCL's."""
        dt = DataType._numpy_or_none(dtype)
        if dt is None:
            from ._errors import UnsupportedDTypeError

            raise UnsupportedDTypeError(f"Unsupported dtype: {dtype}")
        return dt

    @staticmethod
    def _numpy_or_none(dtype):
        import numpy as np

        dtype = np.dtype(dtype)
        if not dtype.isnative or dtype.fields is not None or dtype.subdtype is not None:
            return None
        for name, np_name in _NUMPY_NAMES.items():
            if dtype == np.dtype(np_name):
                return DataType[name]
        return None

    def to_torch_dtype(self):
        import torch

        dt = getattr(torch, _TORCH_NAMES[self.name], None)
        if dt is None:
            raise ValueError(f"this torch has no dtype for {self.name}")
        return dt

    @staticmethod
    def from_torch_dtype(dtype):
        """The DataType of a torch dtype. Unsupported ones raise UnsupportedDTypeError, a
        ValueError as PCCL's."""
        dt = DataType._torch_or_none(dtype)
        if dt is None:
            from ._errors import UnsupportedDTypeError

            raise UnsupportedDTypeError(f"Unsupported dtype: {dtype}")
        return dt

    @staticmethod
    def _torch_or_none(dtype):
        torch = sys.modules.get("torch")
        if torch is None:
            return None
        for name, t_name in _TORCH_NAMES.items():
            if getattr(torch, t_name, None) is dtype:
                return DataType[name]
        return None
