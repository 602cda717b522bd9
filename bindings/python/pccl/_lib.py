"""Finding and loading libpccl, and the ctypes mirror of include/pccl.h.

Every Structure below matches the C declaration field by field;
tests/python/test_api.py (test_struct_layouts_match_c) compiles a C program
that prints sizeof/_Alignof/offsetof of each one and compares them with these
classes. PCCL 1.0's structs keep PCCL 1.0's exact layout (DESIGN.md §6);
pccl's own options live in CommCreateOptions (pcclCreateCommunicatorEx).
"""

import ctypes
import ctypes.util
import glob
import os
import sys
import threading

# --------------------------------------------------------------------------
# Structures (include/ccoip_inet.h, include/pccl.h)
# --------------------------------------------------------------------------

c_enum = ctypes.c_int  # C enums of pccl.h: all values fit in int, 4 bytes on every supported ABI


class CcoipIpv4Address(ctypes.Structure):
    _fields_ = [("data", ctypes.c_uint8 * 4)]


class CcoipIpv6Address(ctypes.Structure):
    _fields_ = [("data", ctypes.c_uint8 * 16)]


class CcoipInetAddress(ctypes.Structure):
    _fields_ = [
        ("protocol", c_enum),
        ("ipv4", CcoipIpv4Address),
        ("ipv6", CcoipIpv6Address),
    ]


class CcoipSocketAddress(ctypes.Structure):
    _fields_ = [("inet", CcoipInetAddress), ("port", ctypes.c_uint16)]


class CommCreateParams(ctypes.Structure):
    _fields_ = [
        ("master_address", CcoipSocketAddress),
        ("peer_group", ctypes.c_uint32),
        ("p2p_connection_pool_size", ctypes.c_uint32),
    ]


class CommCreateOptions(ctypes.Structure):
    """pcclCommCreateOptions_t: pccl's options, versioned by struct_size."""

    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("timeout_ms", ctypes.c_uint32),
        ("heartbeat_ms", ctypes.c_uint32),
        ("reserved", ctypes.c_uint32),
        ("master_url", ctypes.c_char_p),
        ("ring_key", ctypes.c_uint32),
        ("reserved2", ctypes.c_uint32),
    ]


class CReduceInfo(ctypes.Structure):
    _fields_ = [
        ("local_world_size", ctypes.c_uint32),
        ("tx_bytes", ctypes.c_uint64),
        ("rx_bytes", ctypes.c_uint64),
    ]


class CReduceOperandDescriptor(ctypes.Structure):
    _fields_ = [("datatype", c_enum), ("distribution_hint", c_enum)]


class CQuantizationOptions(ctypes.Structure):
    _fields_ = [("quantized_datatype", c_enum), ("algorithm", c_enum)]


class CReduceDescriptor(ctypes.Structure):
    _fields_ = [
        ("count", ctypes.c_size_t),
        ("op", c_enum),
        ("tag", ctypes.c_uint64),
        ("src_descriptor", CReduceOperandDescriptor),
        ("quantization_options", CQuantizationOptions),
    ]


class CReduceOpDescriptor(ctypes.Structure):
    _fields_ = [
        ("sendbuf", ctypes.c_void_p),
        ("recvbuf", ctypes.c_void_p),
        ("descriptor", CReduceDescriptor),
    ]


class CAsyncReduceOp(ctypes.Structure):
    _fields_ = [("comm", ctypes.c_void_p), ("tag", ctypes.c_uint64)]


class CRankUuid(ctypes.Structure):
    _fields_ = [("data", ctypes.c_uint8 * 16)]


class CTensorInfo(ctypes.Structure):
    _fields_ = [
        ("name", ctypes.c_char_p),
        ("data", ctypes.c_void_p),
        ("count", ctypes.c_size_t),
        ("datatype", c_enum),
        ("device_type", c_enum),
        ("allow_content_inequality", ctypes.c_bool),
    ]


class CSharedState(ctypes.Structure):
    _fields_ = [
        ("revision", ctypes.c_uint64),
        ("count", ctypes.c_size_t),
        ("infos", ctypes.POINTER(CTensorInfo)),
    ]


class CSharedStateSyncInfo(ctypes.Structure):
    _fields_ = [("tx_bytes", ctypes.c_uint64), ("rx_bytes", ctypes.c_uint64)]


class CBuildInfo(ctypes.Structure):
    _fields_ = [("has_cuda_support", ctypes.c_bool)]


class MasterCreateParams(ctypes.Structure):
    _fields_ = [
        ("listen_url", ctypes.c_char_p),
        ("heartbeat_ms", ctypes.c_uint32),
        ("evict_ms", ctypes.c_uint32),
        ("vote_timeout_ms", ctypes.c_uint32),
        ("max_peers", ctypes.c_uint32),
    ]


class CollectiveOptions(ctypes.Structure):
    """pcclCollectiveOptions_t: options of one collective, versioned by struct_size.

    CollectiveOptions.init() is PCCL_COLLECTIVE_OPTIONS_INIT (every default).
    quantization_options applies to pcclReduce and pcclReduceScatter only; algorithm is a
    pcclAlgorithm_t (docs/algorithms.md; 0: auto). The library also accepts the earlier
    versions of the struct (struct_size 32, 40)."""

    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("timeout_ms", ctypes.c_uint32),
        ("tag", ctypes.c_uint64),
        ("flags", ctypes.c_uint32),
        ("reserved", ctypes.c_uint32),
        ("premul_scalar", ctypes.c_double),
        ("quantization_options", CQuantizationOptions),
        ("algorithm", ctypes.c_uint32),
        ("reserved2", ctypes.c_uint32),
    ]

    @classmethod
    def init(cls):
        # quantized_datatype pcclUint8 (0), algorithm pcclQuantNone (0), pcclAlgoAuto (0)
        return cls(ctypes.sizeof(cls), 0, 0, 0, 0, 1.0, CQuantizationOptions(0, 0), 0, 0)


class CTuneOptions(ctypes.Structure):
    """pcclTuneOptions_t (docs/algorithms.md); CTuneOptions.init() is PCCL_TUNE_OPTIONS_INIT."""

    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("iterations", ctypes.c_uint32),
        ("warmup", ctypes.c_uint32),
        ("kinds", ctypes.c_uint32),
        ("min_bytes", ctypes.c_uint64),
        ("max_bytes", ctypes.c_uint64),
    ]

    @classmethod
    def init(cls):
        return cls(ctypes.sizeof(cls), 0, 0, 0, 0, 0)


# pcclCollectiveOptions_t.flags
COLLECTIVE_ABORT_ON_ERROR = 1


class CCollectiveInfo(ctypes.Structure):
    """pcclCollectiveInfo_t: statistics of one finished collective."""

    _fields_ = [
        ("world_size", ctypes.c_uint32),
        ("rank", ctypes.c_uint32),
        ("epoch", ctypes.c_uint64),
        ("tx_bytes", ctypes.c_uint64),
        ("rx_bytes", ctypes.c_uint64),
    ]


# Names the ABI test checks: C type name -> ctypes class.
C_STRUCTS = {
    "ccoip_ipv4_address_t": CcoipIpv4Address,
    "ccoip_ipv6_address_t": CcoipIpv6Address,
    "ccoip_inet_address_t": CcoipInetAddress,
    "ccoip_socket_address_t": CcoipSocketAddress,
    "pcclCommCreateParams_t": CommCreateParams,
    "pcclCommCreateOptions_t": CommCreateOptions,
    "pcclReduceInfo_t": CReduceInfo,
    "pcclReduceOperandDescriptor_t": CReduceOperandDescriptor,
    "pcclQuantizationOptions_t": CQuantizationOptions,
    "pcclReduceDescriptor_t": CReduceDescriptor,
    "pcclReduceOpDescriptor_t": CReduceOpDescriptor,
    "pcclAsyncReduceOp_t": CAsyncReduceOp,
    "pcclRankUuid_t": CRankUuid,
    "pcclTensorInfo_t": CTensorInfo,
    "pcclSharedState_t": CSharedState,
    "pcclSharedStateSyncInfo_t": CSharedStateSyncInfo,
    "pcclBuildInfo_t": CBuildInfo,
    "pcclMasterCreateParams_t": MasterCreateParams,
    "pcclCollectiveOptions_t": CollectiveOptions,
    "pcclCollectiveInfo_t": CCollectiveInfo,
}

# --------------------------------------------------------------------------
# Function prototypes
# --------------------------------------------------------------------------

_vp = ctypes.c_void_p
_P = ctypes.POINTER
_R = ctypes.c_int  # pcclResult_t
_sz = ctypes.c_size_t
_int = ctypes.c_int
_Opt = _P(CollectiveOptions)
_Info = _P(CCollectiveInfo)
_Work = _P(_vp)  # pcclWork_t **: a pcclWork_t * is an opaque c_void_p here
_Bufs = _P(_vp)  # void *const * / const void *const *: an array of buffer addresses

PROTOTYPES = {
    "pcclInit": [],
    "pcclGetVersion": [_P(ctypes.c_uint32)],
    "pcclGetBuildInfo": [_P(CBuildInfo)],
    "pcclCreateCommunicator": [_P(CommCreateParams), _P(_vp)],
    "pcclCreateCommunicatorEx": [_P(CommCreateParams), _P(CommCreateOptions), _P(_vp)],
    "pcclDestroyCommunicator": [_vp],
    "pcclConnect": [_vp],
    "pcclUpdateTopology": [_vp],
    "pcclArePeersPending": [_vp, _P(ctypes.c_bool)],
    "pcclOptimizeTopology": [_vp],
    "pcclGetAttribute": [_vp, c_enum, _P(ctypes.c_int)],
    "pcclAllReduce": [_vp, _vp, _P(CReduceDescriptor), _vp, _P(CReduceInfo)],
    "pcclAllReduceAsync": [_vp, _vp, _P(CReduceDescriptor), _vp, _P(CAsyncReduceOp)],
    "pcclAwaitAsyncReduce": [_P(CAsyncReduceOp), _P(CReduceInfo)],
    "pcclAwaitAsyncReduceTimeout": [_P(CAsyncReduceOp), ctypes.c_uint32, _P(CReduceInfo)],
    "pcclAllReduceMultipleWithRetry": [
        _P(CReduceOpDescriptor),
        ctypes.c_size_t,
        _vp,
        _P(CReduceInfo),
        ctypes.c_int,
    ],
    # The collective set (pcclWork_t * is passed as c_void_p). Each blocking call's
    # last argument is its info_out, each ...Async call's its work_out.
    "pcclAllReduceEx": [_vp, _vp, _P(CReduceDescriptor), _Opt, _vp, _Info],
    "pcclAllReduceExAsync": [_vp, _vp, _P(CReduceDescriptor), _Opt, _vp, _Work],
    "pcclBroadcast": [_vp, _sz, c_enum, _int, _Opt, _vp, _Info],
    "pcclBroadcastAsync": [_vp, _sz, c_enum, _int, _Opt, _vp, _Work],
    "pcclReduce": [_vp, _vp, _sz, c_enum, c_enum, _int, _Opt, _vp, _Info],
    "pcclReduceAsync": [_vp, _vp, _sz, c_enum, c_enum, _int, _Opt, _vp, _Work],
    "pcclAllGather": [_vp, _vp, _sz, c_enum, _Opt, _vp, _Info],
    "pcclAllGatherAsync": [_vp, _vp, _sz, c_enum, _Opt, _vp, _Work],
    "pcclReduceScatter": [_vp, _vp, _sz, c_enum, c_enum, _Opt, _vp, _Info],
    "pcclReduceScatterAsync": [_vp, _vp, _sz, c_enum, c_enum, _Opt, _vp, _Work],
    "pcclAllToAll": [_vp, _vp, _sz, c_enum, _Opt, _vp, _Info],
    "pcclAllToAllAsync": [_vp, _vp, _sz, c_enum, _Opt, _vp, _Work],
    "pcclGather": [_vp, _vp, _sz, c_enum, _int, _Opt, _vp, _Info],
    "pcclGatherAsync": [_vp, _vp, _sz, c_enum, _int, _Opt, _vp, _Work],
    "pcclScatter": [_vp, _vp, _sz, c_enum, _int, _Opt, _vp, _Info],
    "pcclScatterAsync": [_vp, _vp, _sz, c_enum, _int, _Opt, _vp, _Work],
    "pcclBarrier": [_Opt, _vp, _Info],
    "pcclBarrierAsync": [_Opt, _vp, _Work],
    "pcclAllGatherList": [_vp, _Bufs, _sz, _sz, c_enum, _Opt, _vp, _Info],
    "pcclAllGatherListAsync": [_vp, _Bufs, _sz, _sz, c_enum, _Opt, _vp, _Work],
    "pcclReduceScatterList": [_Bufs, _sz, _vp, _sz, c_enum, c_enum, _Opt, _vp, _Info],
    "pcclReduceScatterListAsync": [_Bufs, _sz, _vp, _sz, c_enum, c_enum, _Opt, _vp, _Work],
    "pcclAllToAllList": [_Bufs, _Bufs, _sz, _sz, c_enum, _Opt, _vp, _Info],
    "pcclAllToAllListAsync": [_Bufs, _Bufs, _sz, _sz, c_enum, _Opt, _vp, _Work],
    "pcclGatherList": [_vp, _Bufs, _sz, _sz, c_enum, _int, _Opt, _vp, _Info],
    "pcclGatherListAsync": [_vp, _Bufs, _sz, _sz, c_enum, _int, _Opt, _vp, _Work],
    "pcclScatterList": [_Bufs, _sz, _vp, _sz, c_enum, _int, _Opt, _vp, _Info],
    "pcclScatterListAsync": [_Bufs, _sz, _vp, _sz, c_enum, _int, _Opt, _vp, _Work],
    "pcclAllToAllV": [_vp, _P(_sz), _vp, _P(_sz), c_enum, _Opt, _vp, _Info],
    "pcclAllToAllVAsync": [_vp, _P(_sz), _vp, _P(_sz), c_enum, _Opt, _vp, _Work],
    "pcclSend": [_vp, _sz, c_enum, _int, _Opt, _vp, _Info],
    "pcclSendAsync": [_vp, _sz, c_enum, _int, _Opt, _vp, _Work],
    "pcclRecv": [_vp, _sz, c_enum, _int, _Opt, _vp, _Info],
    "pcclRecvAsync": [_vp, _sz, c_enum, _int, _Opt, _vp, _Work],
    "pcclCommSplit": [_vp, _P(_int), _sz, _P(_vp)],
    "pcclTune": [_vp, _P(CTuneOptions)],
    "pcclTuneSave": [_vp, ctypes.c_char_p],
    "pcclTuneLoad": [_vp, ctypes.c_char_p],
    "pcclGetAlgorithm": [_vp, _sz, c_enum, _P(c_enum)],
    "pcclWorkWait": [_vp, _Info],
    "pcclWorkWaitTimeout": [_vp, ctypes.c_uint32, _Info],
    "pcclWorkIsCompleted": [_vp, _P(ctypes.c_bool)],
    "pcclWorkFree": [_vp],
    # PCCL 1.0's 4-argument function (the header's 3-argument form is a macro);
    # pcclSynchronizeSharedStateEx is the same function under pccl's old name.
    "pcclSynchronizeSharedState": [_vp, _P(CSharedState), c_enum, _P(CSharedStateSyncInfo)],
    "pcclSynchronizeSharedStateEx": [_vp, _P(CSharedState), c_enum, _P(CSharedStateSyncInfo)],
    "pcclCreateMaster": [CcoipSocketAddress, _P(_vp)],
    "pcclCreateMasterEx": [_P(MasterCreateParams), _P(_vp), _P(ctypes.c_uint16)],
    "pcclRunMaster": [_vp],
    "pcclInterruptMaster": [_vp],
    "pcclMasterAwaitTermination": [_vp],
    "pcclDestroyMaster": [_vp],
}

# Functions whose C return type is not pcclResult_t.
RESTYPES = {"pcclWorkFree": None}

# --------------------------------------------------------------------------
# Finding the library
# --------------------------------------------------------------------------


class LibraryNotFoundError(ImportError):
    """libpccl could not be found or loaded. `.tried` lists what was tried."""

    def __init__(self, message, tried):
        super().__init__(message)
        self.tried = list(tried)


_SONAMES = ("libpccl.so", "libpccl.so.0") if sys.platform != "darwin" else ("libpccl.dylib",)


def _source_tree_root():
    """The repository root when this package runs from bindings/python in a checkout."""
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.normpath(os.path.join(here, "..", "..", ".."))
    if os.path.isfile(os.path.join(root, "include", "pccl.h")):
        return root
    return None


def build_tree_candidates(root=None):
    """libpccl.so files in the build trees of a checkout, newest first."""
    root = root or _source_tree_root()
    if root is None:
        return []
    found = set()
    for pattern in (
        os.path.join(root, "build", "bindings", "libpccl", "libpccl.so"),
        os.path.join(root, "build", "*", "bindings", "libpccl", "libpccl.so"),
        os.path.join(root, "build*", "bindings", "libpccl", "libpccl.so"),
    ):
        found.update(p for p in glob.glob(pattern) if os.path.isfile(p))
    # sanitizer builds (ASan/TSan/...) cannot be loaded into a plain Python process
    found = [p for p in found if not _is_sanitizer_build(os.path.relpath(p, root))]
    # build/release first, then the most recently built
    return sorted(found, key=lambda p: (os.path.relpath(p, root).startswith(
        os.path.join("build", "release") + os.sep), os.path.getmtime(p)), reverse=True)


def _is_sanitizer_build(relpath):
    first = relpath.split(os.sep)[:2]
    return any(tag in part for part in first for tag in ("san", "fuzz", "wasm", "cov"))


def _installed_candidates():
    prefixes = []
    for p in (sys.prefix, getattr(sys, "base_prefix", sys.prefix), "/usr/local", "/usr"):
        if p not in prefixes:
            prefixes.append(p)
    multiarch = getattr(sys.implementation, "_multiarch", None)
    out = []
    for prefix in prefixes:
        dirs = [os.path.join(prefix, "lib"), os.path.join(prefix, "lib64")]
        if multiarch:
            dirs.insert(1, os.path.join(prefix, "lib", multiarch))
        for d in dirs:
            for name in _SONAMES:
                p = os.path.join(d, name)
                if os.path.isfile(p):
                    out.append(p)
    return out


def bundled_path():
    """The libpccl.so a wheel carries (pccl/_native, docs/packaging.md), or None."""
    p = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_native", "libpccl.so")
    return p if os.path.isfile(p) else None


def candidate_paths():
    """Where load_library looks, in order: (source, path-or-name) pairs."""
    out = []
    env = os.environ.get("PCCL_LIBRARY")
    if env:
        out.append(("PCCL_LIBRARY", env))
        return out  # an explicit choice is never silently replaced
    bundled = bundled_path()
    if bundled:
        # an installed wheel's own library: built with this package, so it comes first
        out.append(("bundled", bundled))
    for p in build_tree_candidates():
        out.append(("build tree", p))
    for name in _SONAMES:
        out.append(("dynamic loader", name))
    for p in _installed_candidates():
        out.append(("installed", p))
    found = ctypes.util.find_library("pccl")
    if found:
        out.append(("find_library", found))
    return out


_lock = threading.Lock()
_lib = None
_lib_path = None


def _declare(lib):
    for name, argtypes in PROTOTYPES.items():
        fn = getattr(lib, name)
        fn.argtypes = argtypes
        fn.restype = RESTYPES.get(name, _R)


def load_library(path=None):
    """Loads libpccl (once per process) and calls pcclInit. Returns the CDLL.

    path: an explicit file; otherwise PCCL_LIBRARY, then the library bundled in
    an installed wheel (pccl/_native/libpccl.so), then the build trees of
    this checkout, then the dynamic loader's search path (LD_LIBRARY_PATH,
    ld.so cache), then <prefix>/lib of this Python and /usr/local, /usr, then
    ctypes.util.find_library("pccl").
    """
    global _lib, _lib_path
    with _lock:
        if _lib is not None and path is None:
            return _lib
        tried = []
        cands = [("argument", path)] if path is not None else candidate_paths()
        for source, cand in cands:
            if source in ("PCCL_LIBRARY", "argument") and not os.path.isfile(cand):
                tried.append(f"{source}: {cand} (no such file)")
                continue
            try:
                lib = ctypes.CDLL(cand)
                _declare(lib)
            except (OSError, AttributeError) as e:
                tried.append(f"{source}: {cand} ({e})")
                continue
            rc = lib.pcclInit()
            if rc != 0:
                tried.append(f"{source}: {cand} (pcclInit returned {rc})")
                continue
            _lib = lib
            _lib_path = cand
            return lib
        raise LibraryNotFoundError(
            "libpccl not found; set PCCL_LIBRARY=/path/to/libpccl.so. Tried:\n  "
            + "\n  ".join(tried),
            tried,
        )


def lib():
    return _lib if _lib is not None else load_library()


def _mapped_path(soname):
    """The file the dynamic loader mapped for soname (Linux: /proc/self/maps), or None."""
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                parts = line.split(None, 5)
                if len(parts) == 6 and os.path.basename(parts[5].strip()).startswith(soname):
                    return parts[5].strip()
    except OSError:
        pass
    return None


def library_path():
    """Path of the loaded libpccl (loading it if needed)."""
    lib()
    if _lib_path and os.sep not in _lib_path:
        return _mapped_path(_lib_path) or _lib_path
    return _lib_path
