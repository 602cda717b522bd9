//! Raw declarations of libpccl's C ABI, `include/pccl.h` (with `ccoip.h` and `ccoip_inet.h`).
//!
//! Everything here mirrors the header one to one: `#[repr(C)]` structs with the same fields in
//! the same order, C enums as integer type aliases with one constant per enumerator (as bindgen
//! emits them, so an unknown value coming from C is never undefined behaviour), the `#define`
//! constants, and every `PCCL_EXPORT` function. `tests/abi.rs` compiles a C program against
//! `pccl.h` and checks every size, alignment, field offset and constant against this file, and
//! checks that every exported function of the header is declared here.
//!
//! Thread-safety is the header's: a communicator may be called from any thread, one call at a
//! time (awaiting an async all-reduce may overlap `pcclArePeersPending`); a master takes one
//! call at a time except `pcclInterruptMaster` (any thread, any time); `pcclInit`,
//! `pcclGetVersion` and `pcclGetBuildInfo` are safe from any thread. The `pccl` crate encodes
//! these rules in types.
#![allow(non_camel_case_types, non_upper_case_globals, non_snake_case)]

use std::os::raw::{c_char, c_int, c_uint, c_void};

// ---------------------------------------------------------------------------
// ccoip_inet.h / ccoip.h
// ---------------------------------------------------------------------------

/// `ccoip_inet_protocol_t`: address family of a [`ccoip_inet_address_t`].
pub type ccoip_inet_protocol_t = c_uint;
pub const inetIPv4: ccoip_inet_protocol_t = 0;
pub const inetIPv6: ccoip_inet_protocol_t = 1;

/// An IPv4 address in network order: `{127, 0, 0, 1}` is 127.0.0.1.
#[repr(C)]
#[derive(Debug, Copy, Clone, Default, PartialEq, Eq)]
pub struct ccoip_ipv4_address_t {
    pub data: [u8; 4],
}

/// An IPv6 address in network order.
#[repr(C)]
#[derive(Debug, Copy, Clone, Default, PartialEq, Eq)]
pub struct ccoip_ipv6_address_t {
    pub data: [u8; 16],
}

/// An IP address; `protocol` says which member is meaningful (not a union).
#[repr(C)]
#[derive(Debug, Copy, Clone, Default, PartialEq, Eq)]
pub struct ccoip_inet_address_t {
    pub protocol: ccoip_inet_protocol_t,
    pub ipv4: ccoip_ipv4_address_t,
    pub ipv6: ccoip_ipv6_address_t,
}

/// An IP address and a TCP port in host order.
#[repr(C)]
#[derive(Debug, Copy, Clone, Default, PartialEq, Eq)]
pub struct ccoip_socket_address_t {
    pub inet: ccoip_inet_address_t,
    pub port: u16,
}

pub const CCOIP_PROTOCOL_PORT_MASTER: u16 = 48148;
pub const CCOIP_PROTOCOL_PORT_SHARED_STATE: u16 = 48149;
pub const CCOIP_PROTOCOL_PORT_P2P: u16 = 48150;
pub const CCOIP_PROTOCOL_PORT_BANDWIDTH_BENCHMARK: u16 = 48151;

// ---------------------------------------------------------------------------
// Versions
// ---------------------------------------------------------------------------

pub const PCCL_VERSION_MAJOR: u32 = 0;
pub const PCCL_VERSION_MINOR: u32 = 1;
pub const PCCL_VERSION_PATCH: u32 = 0;
pub const PCCL_VERSION_HEX: u32 =
    (PCCL_VERSION_MAJOR << 16) | (PCCL_VERSION_MINOR << 8) | PCCL_VERSION_PATCH;

// ---------------------------------------------------------------------------
// Result codes
// ---------------------------------------------------------------------------

/// `pcclResult_t`. 0..12 are PCCL 1.0's; 13..18 are appended by pccl (append-only).
pub type pcclResult_t = c_uint;
pub const pcclSuccess: pcclResult_t = 0;
pub const pcclNotInitialized: pcclResult_t = 1;
pub const pcclInternalError: pcclResult_t = 2;
pub const pcclInvalidArgument: pcclResult_t = 3;
pub const pcclInvalidUsage: pcclResult_t = 4;
pub const pcclTooFewPeers: pcclResult_t = 5;
pub const pcclMasterConnectionFailed: pcclResult_t = 6;
pub const pcclRankConnectionFailed: pcclResult_t = 7;
pub const pcclRankConnectionLost: pcclResult_t = 8;
pub const pcclNoSharedStateAvailable: pcclResult_t = 9;
pub const pcclPendingAsyncOps: pcclResult_t = 10;
pub const pcclUpdateTopologyFailed: pcclResult_t = 11;
pub const pcclTopologyOptimizationFailed: pcclResult_t = 12;
pub const pcclTimeout: pcclResult_t = 13;
pub const pcclSystemError: pcclResult_t = 14;
pub const pcclRemoteError: pcclResult_t = 15;
pub const pcclSharedStateSyncFailed: pcclResult_t = 16;
pub const pcclProtocolError: pcclResult_t = 17;
pub const pcclAuthenticationFailed: pcclResult_t = 18;
/// Alias of [`pcclTopologyOptimizationFailed`] (PCCL's documentation's name).
pub const pcclOptimizeTopologyFailed: pcclResult_t = pcclTopologyOptimizationFailed;

/// Number of distinct result codes (one more than the largest value).
pub const PCCL_RESULT_COUNT: u32 = 19;

/// `PCCL_RESULT_MAP`: every distinct result code with its name and message, in value order.
pub const PCCL_RESULT_MAP: [(pcclResult_t, &str, &str); PCCL_RESULT_COUNT as usize] = [
    (pcclSuccess, "pcclSuccess", "success"),
    (
        pcclNotInitialized,
        "pcclNotInitialized",
        "pcclInit was not called",
    ),
    (pcclInternalError, "pcclInternalError", "internal error"),
    (
        pcclInvalidArgument,
        "pcclInvalidArgument",
        "invalid argument",
    ),
    (pcclInvalidUsage, "pcclInvalidUsage", "invalid usage"),
    (pcclTooFewPeers, "pcclTooFewPeers", "too few peers"),
    (
        pcclMasterConnectionFailed,
        "pcclMasterConnectionFailed",
        "master connection failed",
    ),
    (
        pcclRankConnectionFailed,
        "pcclRankConnectionFailed",
        "peer connection failed",
    ),
    (
        pcclRankConnectionLost,
        "pcclRankConnectionLost",
        "peer connection lost",
    ),
    (
        pcclNoSharedStateAvailable,
        "pcclNoSharedStateAvailable",
        "no shared state available",
    ),
    (
        pcclPendingAsyncOps,
        "pcclPendingAsyncOps",
        "asynchronous operations pending",
    ),
    (
        pcclUpdateTopologyFailed,
        "pcclUpdateTopologyFailed",
        "update topology failed",
    ),
    (
        pcclTopologyOptimizationFailed,
        "pcclTopologyOptimizationFailed",
        "topology optimization failed",
    ),
    (pcclTimeout, "pcclTimeout", "timed out"),
    (pcclSystemError, "pcclSystemError", "system error"),
    (pcclRemoteError, "pcclRemoteError", "remote error"),
    (
        pcclSharedStateSyncFailed,
        "pcclSharedStateSyncFailed",
        "shared state synchronization failed",
    ),
    (pcclProtocolError, "pcclProtocolError", "protocol error"),
    (
        pcclAuthenticationFailed,
        "pcclAuthenticationFailed",
        "authentication failed",
    ),
];

// ---------------------------------------------------------------------------
// Enums
// ---------------------------------------------------------------------------

/// `pcclDataType_t` (PCCL 1.0's numbering: Int16 = 2 before Uint16 = 3).
pub type pcclDataType_t = c_uint;
pub const pcclUint8: pcclDataType_t = 0;
pub const pcclInt8: pcclDataType_t = 1;
pub const pcclInt16: pcclDataType_t = 2;
pub const pcclUint16: pcclDataType_t = 3;
pub const pcclUint32: pcclDataType_t = 4;
pub const pcclInt32: pcclDataType_t = 5;
pub const pcclUint64: pcclDataType_t = 6;
pub const pcclInt64: pcclDataType_t = 7;
pub const pcclFloat16: pcclDataType_t = 8;
pub const pcclBFloat16: pcclDataType_t = 9;
pub const pcclFloat: pcclDataType_t = 10;
pub const pcclDouble: pcclDataType_t = 11;
pub const PCCL_DATA_TYPE_COUNT: u32 = 12;

/// `pcclDeviceType_t`: where a tensor's memory lives (collectives take CPU memory only).
pub type pcclDeviceType_t = c_uint;
pub const pcclDeviceCpu: pcclDeviceType_t = 0;
pub const pcclDeviceCuda: pcclDeviceType_t = 1;

/// `pcclRedOp_t`.
pub type pcclRedOp_t = c_uint;
pub const pcclSum: pcclRedOp_t = 0;
pub const pcclAvg: pcclRedOp_t = 1;
pub const pcclProd: pcclRedOp_t = 2;
pub const pcclMax: pcclRedOp_t = 3;
pub const pcclMin: pcclRedOp_t = 4;
pub const pcclBand: pcclRedOp_t = 5;
pub const pcclBor: pcclRedOp_t = 6;
pub const pcclBxor: pcclRedOp_t = 7;
/// Premultiplied sum: every member's input times its own factor
/// ([`pcclCollectiveOptions_t::premul_scalar`]), then summed as [`pcclSum`]; float types only.
/// [`pcclAllReduce`] refuses it (`pcclInvalidArgument`): use [`pcclAllReduceEx`].
pub const pcclPremulSum: pcclRedOp_t = 8;
pub const PCCL_RED_OP_COUNT: u32 = 9;

/// `pcclAttribute_t`.
pub type pcclAttribute_t = c_uint;
pub const PCCL_ATTRIBUTE_GLOBAL_WORLD_SIZE: pcclAttribute_t = 1;
pub const PCCL_ATTRIBUTE_PEER_GROUP_WORLD_SIZE: pcclAttribute_t = 2;
pub const PCCL_ATTRIBUTE_NUM_DISTINCT_PEER_GROUPS: pcclAttribute_t = 3;
pub const PCCL_ATTRIBUTE_LARGEST_PEER_GROUP_WORLD_SIZE: pcclAttribute_t = 4;
pub const PCCL_ATTRIBUTE_CURRENT_WORLD_SIZE: pcclAttribute_t = PCCL_ATTRIBUTE_PEER_GROUP_WORLD_SIZE;
/// pccl extension: tensor bytes copied in memory since creation, modulo 2^31.
pub const PCCL_ATTRIBUTE_COPIED_BYTES: pcclAttribute_t = 5;
/// pccl extension: tensor bytes copied in memory since creation, divided by 2^31.
pub const PCCL_ATTRIBUTE_COPIED_BYTES_HIGH: pcclAttribute_t = 6;
/// pccl extension: the caller's index in its peer group's ring of the current epoch; -1 while
/// it is in no installed ring.
pub const PCCL_ATTRIBUTE_RANK: pcclAttribute_t = 7;
/// pccl extension: the epoch of that ring (0 before any).
pub const PCCL_ATTRIBUTE_EPOCH: pcclAttribute_t = 8;

/// `pcclSharedStateSyncStrategy_t`.
pub type pcclSharedStateSyncStrategy_t = c_uint;
pub const PCCL_SHARED_STATE_SYNC_STRATEGY_ENFORCE_POPULAR: pcclSharedStateSyncStrategy_t = 0;
pub const PCCL_SHARED_STATE_SYNC_STRATEGY_RECEIVE_ONLY: pcclSharedStateSyncStrategy_t = 1;
pub const PCCL_SHARED_STATE_SYNC_STRATEGY_SEND_ONLY: pcclSharedStateSyncStrategy_t = 2;

/// `pcclDistributionHint_t`.
pub type pcclDistributionHint_t = c_uint;
pub const pcclDistributionNone: pcclDistributionHint_t = 0;
pub const pcclDistributionNormal: pcclDistributionHint_t = 1;
pub const pcclDistributionUniform: pcclDistributionHint_t = 2;
pub const PCCL_DISTRIBUTION_HINT_NONE: pcclDistributionHint_t = pcclDistributionNone;
pub const PCCL_DISTRIBUTION_HINT_NORMAL: pcclDistributionHint_t = pcclDistributionNormal;
pub const PCCL_DISTRIBUTION_HINT_UNIFORM: pcclDistributionHint_t = pcclDistributionUniform;
pub const PCCL_NORMAL_DISTRIBUTION_HINT: pcclDistributionHint_t = pcclDistributionNormal;
pub const PCCL_UNIFORM_DISTRIBUTION_HINT: pcclDistributionHint_t = pcclDistributionUniform;

/// `pcclQuantizationAlgorithm_t`.
pub type pcclQuantizationAlgorithm_t = c_uint;
pub const pcclQuantNone: pcclQuantizationAlgorithm_t = 0;
pub const pcclQuantMinMax: pcclQuantizationAlgorithm_t = 1;
pub const pcclQuantZeroPointScale: pcclQuantizationAlgorithm_t = 2;

/// `pcclAlgorithm_t`: the algorithm an op runs ([`pcclCollectiveOptions_t::algorithm`],
/// [`pcclGetAlgorithm`]).
pub type pcclAlgorithm_t = c_uint;
/// The group's tuned table for the op's size and world, else the built-in rule.
pub const pcclAlgoAuto: pcclAlgorithm_t = 0;
/// The master reduces / routes every member's input (one round trip; small ops).
pub const pcclAlgoRelay: pcclAlgorithm_t = 1;
/// All-reduce: every member gets every input and reduces them in rank order.
pub const pcclAlgoDirect: pcclAlgorithm_t = 2;
/// The ring schedule, one connection per step.
pub const pcclAlgoRing: pcclAlgorithm_t = 3;
/// The ring schedule, large steps striped over the link's connection pool.
pub const pcclAlgoRingStriped: pcclAlgorithm_t = 4;
pub const pcclAlgoHalvingDoubling: pcclAlgorithm_t = 5;

/// `pcclTuneOptions_t.kinds` bits: the kinds `pcclTune` tunes.
pub const PCCL_TUNE_ALL_REDUCE: u32 = 1 << 0;
pub const PCCL_TUNE_BROADCAST: u32 = 1 << 1;
pub const PCCL_TUNE_REDUCE: u32 = 1 << 2;
pub const PCCL_TUNE_ALL_GATHER: u32 = 1 << 3;
pub const PCCL_TUNE_REDUCE_SCATTER: u32 = 1 << 4;
pub const PCCL_TUNE_ALL_TO_ALL: u32 = 1 << 5;
pub const PCCL_TUNE_GATHER: u32 = 1 << 6;
pub const PCCL_TUNE_SCATTER: u32 = 1 << 7;
pub const PCCL_TUNE_BARRIER: u32 = 1 << 8;
pub const PCCL_TUNE_ALL_KINDS: u32 = 0x1FF;

// ---------------------------------------------------------------------------
// Opaque handles
// ---------------------------------------------------------------------------

/// `pcclComm_t`: a communicator (opaque; only used behind pointers).
#[repr(C)]
pub struct pcclComm_t {
    _opaque: [u8; 0],
    _not_send_sync: core::marker::PhantomData<(*mut u8, core::marker::PhantomPinned)>,
}

/// `pcclRankInfo_t` (opaque; declared by PCCL 1.0, unused by its API).
#[repr(C)]
pub struct pcclRankInfo_t {
    _opaque: [u8; 0],
    _not_send_sync: core::marker::PhantomData<(*mut u8, core::marker::PhantomPinned)>,
}

/// `struct pcclMasterInstanceState_t`, typedef'd as `pcclMasterInstance_t` (opaque).
#[repr(C)]
pub struct pcclMasterInstanceState_t {
    _opaque: [u8; 0],
    _not_send_sync: core::marker::PhantomData<(*mut u8, core::marker::PhantomPinned)>,
}
pub type pcclMasterInstance_t = pcclMasterInstanceState_t;

/// `pcclWork_t`: a started collective of the collective set (opaque; [`pcclWorkWait`],
/// [`pcclWorkIsCompleted`], [`pcclWorkFree`]).
#[repr(C)]
pub struct pcclWork_t {
    _opaque: [u8; 0],
    _not_send_sync: core::marker::PhantomData<(*mut u8, core::marker::PhantomPinned)>,
}

// ---------------------------------------------------------------------------
// Structs
// ---------------------------------------------------------------------------

/// `pcclCommCreateParams_t`: PCCL 1.0's struct with its exact layout (36 bytes, alignment 4).
/// `p2p_connection_pool_size`: 0 means pccl's default (2); values above 8 are clamped to 8.
/// pccl's own options are in [`pcclCommCreateOptions_t`].
#[repr(C)]
#[derive(Debug, Copy, Clone, Default, PartialEq, Eq)]
pub struct pcclCommCreateParams_t {
    pub master_address: ccoip_socket_address_t,
    pub peer_group: u32,
    pub p2p_connection_pool_size: u32,
}

/// `pcclCommCreateOptions_t`: pccl's options of a communicator, for
/// [`pcclCreateCommunicatorEx`]. Versioned by `struct_size` (set it to
/// `size_of::<pcclCommCreateOptions_t>()`, as [`PCCL_COMM_CREATE_OPTIONS_INIT`] and `Default`
/// do); zero fields mean the default; `reserved` must be 0. `master_url`, when not null and not
/// empty, overrides `pcclCommCreateParams_t::master_address`.
#[repr(C)]
#[derive(Debug, Copy, Clone, PartialEq, Eq)]
pub struct pcclCommCreateOptions_t {
    pub struct_size: u32,
    pub timeout_ms: u32,
    pub heartbeat_ms: u32,
    pub reserved: u32,
    pub master_url: *const c_char,
    /// The group's ring lists its members by (`ring_key`, peer id); 0: order of joining.
    pub ring_key: u32,
    pub reserved2: u32,
}

/// `PCCL_COMM_CREATE_OPTIONS_INIT`: every option at its default.
pub const PCCL_COMM_CREATE_OPTIONS_INIT: pcclCommCreateOptions_t = pcclCommCreateOptions_t {
    struct_size: core::mem::size_of::<pcclCommCreateOptions_t>() as u32,
    timeout_ms: 0,
    heartbeat_ms: 0,
    reserved: 0,
    master_url: core::ptr::null(),
    ring_key: 0,
    reserved2: 0,
};

impl Default for pcclCommCreateOptions_t {
    /// [`PCCL_COMM_CREATE_OPTIONS_INIT`].
    fn default() -> Self {
        PCCL_COMM_CREATE_OPTIONS_INIT
    }
}

/// `pcclReduceInfo_t`: statistics of one all-reduce.
#[repr(C)]
#[derive(Debug, Copy, Clone, Default, PartialEq, Eq)]
pub struct pcclReduceInfo_t {
    pub local_world_size: u32,
    pub tx_bytes: u64,
    pub rx_bytes: u64,
}

/// `pcclReduceOperandDescriptor_t`.
#[repr(C)]
#[derive(Debug, Copy, Clone, Default, PartialEq, Eq)]
pub struct pcclReduceOperandDescriptor_t {
    pub datatype: pcclDataType_t,
    pub distribution_hint: pcclDistributionHint_t,
}

/// `pcclQuantizationOptions_t`.
#[repr(C)]
#[derive(Debug, Copy, Clone, Default, PartialEq, Eq)]
pub struct pcclQuantizationOptions_t {
    pub quantized_datatype: pcclDataType_t,
    pub algorithm: pcclQuantizationAlgorithm_t,
}

/// `pcclReduceDescriptor_t`: count (elements), op, tag, operand type, quantization.
#[repr(C)]
#[derive(Debug, Copy, Clone, Default, PartialEq, Eq)]
pub struct pcclReduceDescriptor_t {
    pub count: usize,
    pub op: pcclRedOp_t,
    pub tag: u64,
    pub src_descriptor: pcclReduceOperandDescriptor_t,
    pub quantization_options: pcclQuantizationOptions_t,
}

/// `struct pcclReduceSingleDescriptor_t`, typedef'd as `pcclReduceOpDescriptor_t`.
#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct pcclReduceSingleDescriptor_t {
    pub sendbuf: *mut c_void,
    pub recvbuf: *mut c_void,
    pub descriptor: pcclReduceDescriptor_t,
}
pub type pcclReduceOpDescriptor_t = pcclReduceSingleDescriptor_t;

/// `pcclAsyncReduceOp_t`: handle of an asynchronous all-reduce.
#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct pcclAsyncReduceOp_t {
    pub comm: *mut pcclComm_t,
    pub tag: u64,
}

/// `pcclRankUuid_t`: a 16-byte peer identifier.
#[repr(C)]
#[derive(Debug, Copy, Clone, Default, PartialEq, Eq)]
pub struct pcclRankUuid_t {
    pub data: [u8; 16],
}

/// `pcclTensorInfo_t`: one named tensor of the shared state (memory owned by the caller).
#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct pcclTensorInfo_t {
    pub name: *const c_char,
    pub data: *mut c_void,
    pub count: usize,
    pub datatype: pcclDataType_t,
    pub device_type: pcclDeviceType_t,
    pub allow_content_inequality: bool,
}

/// `pcclSharedState_t`: a revision and a list of tensors.
#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct pcclSharedState_t {
    pub revision: u64,
    pub count: usize,
    pub infos: *mut pcclTensorInfo_t,
}

/// `pcclSharedStateSyncInfo_t`: statistics of one shared-state synchronization.
#[repr(C)]
#[derive(Debug, Copy, Clone, Default, PartialEq, Eq)]
pub struct pcclSharedStateSyncInfo_t {
    pub tx_bytes: u64,
    pub rx_bytes: u64,
}

/// `pcclBuildInfo_t`: build-time features.
#[repr(C)]
#[derive(Debug, Copy, Clone, Default, PartialEq, Eq)]
pub struct pcclBuildInfo_t {
    pub has_cuda_support: bool,
}

/// `pcclMasterCreateParams_t`. Zero fields mean the defaults.
#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct pcclMasterCreateParams_t {
    pub listen_url: *const c_char,
    pub heartbeat_ms: u32,
    pub evict_ms: u32,
    pub vote_timeout_ms: u32,
    pub max_peers: u32,
}

/// `pcclCollectiveOptions_t`: options of one collective of the collective set (a null pointer
/// means every default). Versioned by `struct_size` as [`pcclCommCreateOptions_t`]: start from
/// [`PCCL_COLLECTIVE_OPTIONS_INIT`] (or `Default`). `timeout_ms` 0: the communicator's default;
/// `flags`: `PCCL_COLLECTIVE_*`; `reserved` must be 0; `premul_scalar`: this member's factor
/// for [`pcclPremulSum`] (default 1.0); `quantization_options`: quantization of
/// [`pcclReduce`] and [`pcclReduceScatter`] only (default `pcclQuantNone`; any other
/// collective refuses it); `algorithm`: a [`pcclAlgorithm_t`] the op must run (default
/// [`pcclAlgoAuto`]; every member must pass the same, else `pcclInvalidUsage` for all; one that
/// cannot run the op is `pcclInvalidArgument`); `reserved2` must be 0. The library also accepts
/// the struct's earlier versions: `struct_size` 32 (without `quantization_options`) and 40
/// (without `algorithm`, meaning [`pcclAlgoAuto`]).
#[repr(C)]
#[derive(Debug, Copy, Clone, PartialEq)]
pub struct pcclCollectiveOptions_t {
    pub struct_size: u32,
    pub timeout_ms: u32,
    pub tag: u64,
    pub flags: u32,
    pub reserved: u32,
    pub premul_scalar: f64,
    pub quantization_options: pcclQuantizationOptions_t,
    /// A [`pcclAlgorithm_t`] (the header declares the field `uint32_t`).
    pub algorithm: u32,
    pub reserved2: u32,
}

/// Flag of [`pcclCollectiveOptions_t::flags`]: abort() the process when the op fails or times
/// out (after logging the call and its result).
pub const PCCL_COLLECTIVE_ABORT_ON_ERROR: u32 = 1;

/// `PCCL_COLLECTIVE_OPTIONS_INIT`: every option at its default.
pub const PCCL_COLLECTIVE_OPTIONS_INIT: pcclCollectiveOptions_t = pcclCollectiveOptions_t {
    struct_size: core::mem::size_of::<pcclCollectiveOptions_t>() as u32,
    timeout_ms: 0,
    tag: 0,
    flags: 0,
    reserved: 0,
    premul_scalar: 1.0,
    quantization_options: pcclQuantizationOptions_t {
        quantized_datatype: pcclUint8,
        algorithm: pcclQuantNone,
    },
    algorithm: pcclAlgoAuto,
    reserved2: 0,
};

impl Default for pcclCollectiveOptions_t {
    /// [`PCCL_COLLECTIVE_OPTIONS_INIT`].
    fn default() -> Self {
        PCCL_COLLECTIVE_OPTIONS_INIT
    }
}

/// `pcclCollectiveInfo_t`: statistics of one finished collective.
#[repr(C)]
#[derive(Debug, Copy, Clone, Default, PartialEq, Eq)]
pub struct pcclCollectiveInfo_t {
    pub world_size: u32,
    pub rank: u32,
    pub epoch: u64,
    pub tx_bytes: u64,
    pub rx_bytes: u64,
}

/// `pcclTuneOptions_t`: options of [`pcclTune`] (a null pointer means every default).
/// Versioned by `struct_size`: start from [`PCCL_TUNE_OPTIONS_INIT`] (or `Default`).
/// `iterations`: timed runs per (size, algorithm), the median kept (0: 3); `warmup`: untimed
/// runs before them (0: 1); `kinds`: the kinds tuned, `PCCL_TUNE_*` bits (0: the all-reduce);
/// `min_bytes` / `max_bytes`: the smallest and largest sizes tuned (per block), rounded to size
/// classes (0: 1 KiB, and 256 MiB for the all-reduce, 16 MiB for the other kinds).
#[repr(C)]
#[derive(Debug, Copy, Clone, PartialEq, Eq)]
pub struct pcclTuneOptions_t {
    pub struct_size: u32,
    pub iterations: u32,
    pub warmup: u32,
    pub kinds: u32,
    pub min_bytes: u64,
    pub max_bytes: u64,
}

/// `PCCL_TUNE_OPTIONS_INIT`: every option at its default.
pub const PCCL_TUNE_OPTIONS_INIT: pcclTuneOptions_t = pcclTuneOptions_t {
    struct_size: core::mem::size_of::<pcclTuneOptions_t>() as u32,
    iterations: 0,
    warmup: 0,
    kinds: 0,
    min_bytes: 0,
    max_bytes: 0,
};

impl Default for pcclTuneOptions_t {
    /// [`PCCL_TUNE_OPTIONS_INIT`].
    fn default() -> Self {
        PCCL_TUNE_OPTIONS_INIT
    }
}

// ---------------------------------------------------------------------------
// Functions (every PCCL_EXPORT of pccl.h)
// ---------------------------------------------------------------------------

extern "C" {
    pub fn pcclInit() -> pcclResult_t;
    pub fn pcclGetVersion(version_out: *mut u32) -> pcclResult_t;
    pub fn pcclGetBuildInfo(info: *mut pcclBuildInfo_t) -> pcclResult_t;

    pub fn pcclCreateCommunicator(
        params: *const pcclCommCreateParams_t,
        comm_out: *mut *mut pcclComm_t,
    ) -> pcclResult_t;
    /// `options` may be null (the defaults, as `pcclCreateCommunicator`).
    pub fn pcclCreateCommunicatorEx(
        params: *const pcclCommCreateParams_t,
        options: *const pcclCommCreateOptions_t,
        comm_out: *mut *mut pcclComm_t,
    ) -> pcclResult_t;
    pub fn pcclDestroyCommunicator(communicator: *mut pcclComm_t) -> pcclResult_t;
    pub fn pcclConnect(communicator: *mut pcclComm_t) -> pcclResult_t;
    pub fn pcclUpdateTopology(communicator: *mut pcclComm_t) -> pcclResult_t;
    pub fn pcclArePeersPending(
        communicator: *const pcclComm_t,
        pending_out: *mut bool,
    ) -> pcclResult_t;
    pub fn pcclOptimizeTopology(communicator: *const pcclComm_t) -> pcclResult_t;
    pub fn pcclGetAttribute(
        communicator: *const pcclComm_t,
        attribute: pcclAttribute_t,
        p_attribute_out: *mut c_int,
    ) -> pcclResult_t;

    pub fn pcclAllReduce(
        sendbuff: *const c_void,
        recvbuff: *mut c_void,
        descriptor: *const pcclReduceDescriptor_t,
        communicator: *const pcclComm_t,
        reduce_info_out: *mut pcclReduceInfo_t,
    ) -> pcclResult_t;
    pub fn pcclAllReduceAsync(
        sendbuff: *const c_void,
        recvbuff: *mut c_void,
        descriptor: *const pcclReduceDescriptor_t,
        communicator: *const pcclComm_t,
        reduce_handle_out: *mut pcclAsyncReduceOp_t,
    ) -> pcclResult_t;
    pub fn pcclAwaitAsyncReduce(
        reduce_handle: *const pcclAsyncReduceOp_t,
        reduce_info_out: *mut pcclReduceInfo_t,
    ) -> pcclResult_t;
    pub fn pcclAwaitAsyncReduceTimeout(
        reduce_handle: *const pcclAsyncReduceOp_t,
        timeout_ms: u32,
        reduce_info_out: *mut pcclReduceInfo_t,
    ) -> pcclResult_t;
    pub fn pcclAllReduceMultipleWithRetry(
        descriptors: *const pcclReduceOpDescriptor_t,
        count: usize,
        communicator: *const pcclComm_t,
        reduce_info_out: *mut pcclReduceInfo_t,
        max_in_flight: c_int,
    ) -> pcclResult_t;

    // The collective set (pointers documented as nullable in pccl.h may be null: `options`
    // means every default, `info_out` no statistics).
    pub fn pcclAllReduceEx(
        sendbuff: *const c_void,
        recvbuff: *mut c_void,
        descriptor: *const pcclReduceDescriptor_t,
        options: *const pcclCollectiveOptions_t,
        communicator: *const pcclComm_t,
        info_out: *mut pcclCollectiveInfo_t,
    ) -> pcclResult_t;
    pub fn pcclAllReduceExAsync(
        sendbuff: *const c_void,
        recvbuff: *mut c_void,
        descriptor: *const pcclReduceDescriptor_t,
        options: *const pcclCollectiveOptions_t,
        communicator: *const pcclComm_t,
        work_out: *mut *mut pcclWork_t,
    ) -> pcclResult_t;
    pub fn pcclBroadcast(
        buf: *mut c_void,
        count: usize,
        dtype: pcclDataType_t,
        root: c_int,
        options: *const pcclCollectiveOptions_t,
        communicator: *const pcclComm_t,
        info_out: *mut pcclCollectiveInfo_t,
    ) -> pcclResult_t;
    pub fn pcclBroadcastAsync(
        buf: *mut c_void,
        count: usize,
        dtype: pcclDataType_t,
        root: c_int,
        options: *const pcclCollectiveOptions_t,
        communicator: *const pcclComm_t,
        work_out: *mut *mut pcclWork_t,
    ) -> pcclResult_t;
    pub fn pcclReduce(
        sendbuf: *const c_void,
        recvbuf: *mut c_void,
        count: usize,
        dtype: pcclDataType_t,
        op: pcclRedOp_t,
        root: c_int,
        options: *const pcclCollectiveOptions_t,
        communicator: *const pcclComm_t,
        info_out: *mut pcclCollectiveInfo_t,
    ) -> pcclResult_t;
    pub fn pcclReduceAsync(
        sendbuf: *const c_void,
        recvbuf: *mut c_void,
        count: usize,
        dtype: pcclDataType_t,
        op: pcclRedOp_t,
        root: c_int,
        options: *const pcclCollectiveOptions_t,
        communicator: *const pcclComm_t,
        work_out: *mut *mut pcclWork_t,
    ) -> pcclResult_t;
    pub fn pcclAllGather(
        sendbuf: *const c_void,
        recvbuf: *mut c_void,
        count: usize,
        dtype: pcclDataType_t,
        options: *const pcclCollectiveOptions_t,
        communicator: *const pcclComm_t,
        info_out: *mut pcclCollectiveInfo_t,
    ) -> pcclResult_t;
    pub fn pcclAllGatherAsync(
        sendbuf: *const c_void,
        recvbuf: *mut c_void,
        count: usize,
        dtype: pcclDataType_t,
        options: *const pcclCollectiveOptions_t,
        communicator: *const pcclComm_t,
        work_out: *mut *mut pcclWork_t,
    ) -> pcclResult_t;
    pub fn pcclReduceScatter(
        sendbuf: *const c_void,
        recvbuf: *mut c_void,
        count: usize,
        dtype: pcclDataType_t,
        op: pcclRedOp_t,
        options: *const pcclCollectiveOptions_t,
        communicator: *const pcclComm_t,
        info_out: *mut pcclCollectiveInfo_t,
    ) -> pcclResult_t;
    pub fn pcclReduceScatterAsync(
        sendbuf: *const c_void,
        recvbuf: *mut c_void,
        count: usize,
        dtype: pcclDataType_t,
        op: pcclRedOp_t,
        options: *const pcclCollectiveOptions_t,
        communicator: *const pcclComm_t,
        work_out: *mut *mut pcclWork_t,
    ) -> pcclResult_t;
    pub fn pcclAllToAll(
        sendbuf: *const c_void,
        recvbuf: *mut c_void,
        count: usize,
        dtype: pcclDataType_t,
        options: *const pcclCollectiveOptions_t,
        communicator: *const pcclComm_t,
        info_out: *mut pcclCollectiveInfo_t,
    ) -> pcclResult_t;
    pub fn pcclAllToAllAsync(
        sendbuf: *const c_void,
        recvbuf: *mut c_void,
        count: usize,
        dtype: pcclDataType_t,
        options: *const pcclCollectiveOptions_t,
        communicator: *const pcclComm_t,
        work_out: *mut *mut pcclWork_t,
    ) -> pcclResult_t;
    pub fn pcclGather(
        sendbuf: *const c_void,
        recvbuf: *mut c_void,
        count: usize,
        dtype: pcclDataType_t,
        root: c_int,
        options: *const pcclCollectiveOptions_t,
        communicator: *const pcclComm_t,
        info_out: *mut pcclCollectiveInfo_t,
    ) -> pcclResult_t;
    pub fn pcclGatherAsync(
        sendbuf: *const c_void,
        recvbuf: *mut c_void,
        count: usize,
        dtype: pcclDataType_t,
        root: c_int,
        options: *const pcclCollectiveOptions_t,
        communicator: *const pcclComm_t,
        work_out: *mut *mut pcclWork_t,
    ) -> pcclResult_t;
    pub fn pcclScatter(
        sendbuf: *const c_void,
        recvbuf: *mut c_void,
        count: usize,
        dtype: pcclDataType_t,
        root: c_int,
        options: *const pcclCollectiveOptions_t,
        communicator: *const pcclComm_t,
        info_out: *mut pcclCollectiveInfo_t,
    ) -> pcclResult_t;
    pub fn pcclScatterAsync(
        sendbuf: *const c_void,
        recvbuf: *mut c_void,
        count: usize,
        dtype: pcclDataType_t,
        root: c_int,
        options: *const pcclCollectiveOptions_t,
        communicator: *const pcclComm_t,
        work_out: *mut *mut pcclWork_t,
    ) -> pcclResult_t;
    pub fn pcclBarrier(
        options: *const pcclCollectiveOptions_t,
        communicator: *const pcclComm_t,
        info_out: *mut pcclCollectiveInfo_t,
    ) -> pcclResult_t;
    pub fn pcclBarrierAsync(
        options: *const pcclCollectiveOptions_t,
        communicator: *const pcclComm_t,
        work_out: *mut *mut pcclWork_t,
    ) -> pcclResult_t;

    // List variants: `n` separate buffers of `count` elements, `n` equal to the world.
    pub fn pcclAllGatherList(
        sendbuf: *const c_void,
        recvbufs: *const *mut c_void,
        n: usize,
        count: usize,
        dtype: pcclDataType_t,
        options: *const pcclCollectiveOptions_t,
        communicator: *const pcclComm_t,
        info_out: *mut pcclCollectiveInfo_t,
    ) -> pcclResult_t;
    pub fn pcclAllGatherListAsync(
        sendbuf: *const c_void,
        recvbufs: *const *mut c_void,
        n: usize,
        count: usize,
        dtype: pcclDataType_t,
        options: *const pcclCollectiveOptions_t,
        communicator: *const pcclComm_t,
        work_out: *mut *mut pcclWork_t,
    ) -> pcclResult_t;
    pub fn pcclReduceScatterList(
        sendbufs: *const *const c_void,
        n: usize,
        recvbuf: *mut c_void,
        count: usize,
        dtype: pcclDataType_t,
        op: pcclRedOp_t,
        options: *const pcclCollectiveOptions_t,
        communicator: *const pcclComm_t,
        info_out: *mut pcclCollectiveInfo_t,
    ) -> pcclResult_t;
    pub fn pcclReduceScatterListAsync(
        sendbufs: *const *const c_void,
        n: usize,
        recvbuf: *mut c_void,
        count: usize,
        dtype: pcclDataType_t,
        op: pcclRedOp_t,
        options: *const pcclCollectiveOptions_t,
        communicator: *const pcclComm_t,
        work_out: *mut *mut pcclWork_t,
    ) -> pcclResult_t;
    pub fn pcclAllToAllList(
        sendbufs: *const *const c_void,
        recvbufs: *const *mut c_void,
        n: usize,
        count: usize,
        dtype: pcclDataType_t,
        options: *const pcclCollectiveOptions_t,
        communicator: *const pcclComm_t,
        info_out: *mut pcclCollectiveInfo_t,
    ) -> pcclResult_t;
    pub fn pcclAllToAllListAsync(
        sendbufs: *const *const c_void,
        recvbufs: *const *mut c_void,
        n: usize,
        count: usize,
        dtype: pcclDataType_t,
        options: *const pcclCollectiveOptions_t,
        communicator: *const pcclComm_t,
        work_out: *mut *mut pcclWork_t,
    ) -> pcclResult_t;
    pub fn pcclAllToAllV(
        sendbuf: *const c_void,
        send_counts: *const usize,
        recvbuf: *mut c_void,
        recv_counts: *const usize,
        dtype: pcclDataType_t,
        options: *const pcclCollectiveOptions_t,
        communicator: *const pcclComm_t,
        info_out: *mut pcclCollectiveInfo_t,
    ) -> pcclResult_t;
    pub fn pcclAllToAllVAsync(
        sendbuf: *const c_void,
        send_counts: *const usize,
        recvbuf: *mut c_void,
        recv_counts: *const usize,
        dtype: pcclDataType_t,
        options: *const pcclCollectiveOptions_t,
        communicator: *const pcclComm_t,
        work_out: *mut *mut pcclWork_t,
    ) -> pcclResult_t;
    /// Sends `count` elements to rank `peer`, which receives them with [`pcclRecv`] (same tag,
    /// count and type): docs/collectives-p2p.md.
    pub fn pcclSend(
        sendbuf: *const c_void,
        count: usize,
        dtype: pcclDataType_t,
        peer: c_int,
        options: *const pcclCollectiveOptions_t,
        communicator: *const pcclComm_t,
        info_out: *mut pcclCollectiveInfo_t,
    ) -> pcclResult_t;
    pub fn pcclSendAsync(
        sendbuf: *const c_void,
        count: usize,
        dtype: pcclDataType_t,
        peer: c_int,
        options: *const pcclCollectiveOptions_t,
        communicator: *const pcclComm_t,
        work_out: *mut *mut pcclWork_t,
    ) -> pcclResult_t;
    /// A communicator over the listed ranks of the caller's group (TorchComms `split`):
    /// docs/collectives-split.md. `n == 0` gives a null `child_out`.
    pub fn pcclCommSplit(
        communicator: *mut pcclComm_t,
        ranks: *const c_int,
        n: usize,
        child_out: *mut *mut pcclComm_t,
    ) -> pcclResult_t;
    /// Receives `count` elements from rank `peer`: the other half of [`pcclSend`].
    pub fn pcclRecv(
        recvbuf: *mut c_void,
        count: usize,
        dtype: pcclDataType_t,
        peer: c_int,
        options: *const pcclCollectiveOptions_t,
        communicator: *const pcclComm_t,
        info_out: *mut pcclCollectiveInfo_t,
    ) -> pcclResult_t;
    pub fn pcclRecvAsync(
        recvbuf: *mut c_void,
        count: usize,
        dtype: pcclDataType_t,
        peer: c_int,
        options: *const pcclCollectiveOptions_t,
        communicator: *const pcclComm_t,
        work_out: *mut *mut pcclWork_t,
    ) -> pcclResult_t;
    pub fn pcclGatherList(
        sendbuf: *const c_void,
        recvbufs: *const *mut c_void,
        n: usize,
        count: usize,
        dtype: pcclDataType_t,
        root: c_int,
        options: *const pcclCollectiveOptions_t,
        communicator: *const pcclComm_t,
        info_out: *mut pcclCollectiveInfo_t,
    ) -> pcclResult_t;
    pub fn pcclGatherListAsync(
        sendbuf: *const c_void,
        recvbufs: *const *mut c_void,
        n: usize,
        count: usize,
        dtype: pcclDataType_t,
        root: c_int,
        options: *const pcclCollectiveOptions_t,
        communicator: *const pcclComm_t,
        work_out: *mut *mut pcclWork_t,
    ) -> pcclResult_t;
    pub fn pcclScatterList(
        sendbufs: *const *const c_void,
        n: usize,
        recvbuf: *mut c_void,
        count: usize,
        dtype: pcclDataType_t,
        root: c_int,
        options: *const pcclCollectiveOptions_t,
        communicator: *const pcclComm_t,
        info_out: *mut pcclCollectiveInfo_t,
    ) -> pcclResult_t;
    pub fn pcclScatterListAsync(
        sendbufs: *const *const c_void,
        n: usize,
        recvbuf: *mut c_void,
        count: usize,
        dtype: pcclDataType_t,
        root: c_int,
        options: *const pcclCollectiveOptions_t,
        communicator: *const pcclComm_t,
        work_out: *mut *mut pcclWork_t,
    ) -> pcclResult_t;

    /// Waits for the op; `info_out` may be null. The work object stays valid until
    /// [`pcclWorkFree`].
    pub fn pcclWorkWait(work: *mut pcclWork_t, info_out: *mut pcclCollectiveInfo_t)
        -> pcclResult_t;
    /// `pcclTimeout`: still running after `timeout_ms` (the op is not cancelled).
    pub fn pcclWorkWaitTimeout(
        work: *mut pcclWork_t,
        timeout_ms: u32,
        info_out: *mut pcclCollectiveInfo_t,
    ) -> pcclResult_t;
    pub fn pcclWorkIsCompleted(work: *mut pcclWork_t, completed_out: *mut bool) -> pcclResult_t;
    /// Waits for a running op first; null is fine.
    pub fn pcclWorkFree(work: *mut pcclWork_t);

    /// PCCL 1.0's 4-argument function. (The header's 3-argument form is a C macro supplying
    /// `PCCL_SHARED_STATE_SYNC_STRATEGY_ENFORCE_POPULAR`.)
    pub fn pcclSynchronizeSharedState(
        communicator: *const pcclComm_t,
        shared_state: *mut pcclSharedState_t,
        strategy: pcclSharedStateSyncStrategy_t,
        sync_info_out: *mut pcclSharedStateSyncInfo_t,
    ) -> pcclResult_t;
    /// The same function as [`pcclSynchronizeSharedState`], under the name pccl 0.1 exported.
    pub fn pcclSynchronizeSharedStateEx(
        communicator: *const pcclComm_t,
        shared_state: *mut pcclSharedState_t,
        strategy: pcclSharedStateSyncStrategy_t,
        sync_info_out: *mut pcclSharedStateSyncInfo_t,
    ) -> pcclResult_t;

    /// Tunes the group's all-reduce algorithm table: every member calls it with the same
    /// options and no other op in flight; on success every member holds the same table.
    /// `options` may be null (every default).
    pub fn pcclTune(
        communicator: *const pcclComm_t,
        options: *const pcclTuneOptions_t,
    ) -> pcclResult_t;
    /// Writes the group's table as this member holds it to a text file (`path`: a C string).
    pub fn pcclTuneSave(communicator: *const pcclComm_t, path: *const c_char) -> pcclResult_t;
    /// Installs the row of the group's world size from a file [`pcclTuneSave`] wrote, without
    /// timing anything (a tuning round: every member calls it).
    pub fn pcclTuneLoad(communicator: *const pcclComm_t, path: *const c_char) -> pcclResult_t;
    /// The algorithm a [`pcclAlgoAuto`] all-reduce of `count` elements of `dtype` would run now.
    pub fn pcclGetAlgorithm(
        communicator: *const pcclComm_t,
        count: usize,
        dtype: pcclDataType_t,
        algorithm_out: *mut pcclAlgorithm_t,
    ) -> pcclResult_t;

    pub fn pcclCreateMaster(
        listen_address: ccoip_socket_address_t,
        p_master_handle_out: *mut *mut pcclMasterInstance_t,
    ) -> pcclResult_t;
    pub fn pcclCreateMasterEx(
        params: *const pcclMasterCreateParams_t,
        p_master_handle_out: *mut *mut pcclMasterInstance_t,
        bound_port_out: *mut u16,
    ) -> pcclResult_t;
    pub fn pcclRunMaster(master_instance: *mut pcclMasterInstance_t) -> pcclResult_t;
    pub fn pcclInterruptMaster(master_instance: *mut pcclMasterInstance_t) -> pcclResult_t;
    pub fn pcclMasterAwaitTermination(master_instance: *mut pcclMasterInstance_t) -> pcclResult_t;
    pub fn pcclDestroyMaster(master_instance: *mut pcclMasterInstance_t) -> pcclResult_t;
}
