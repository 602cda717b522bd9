//! Enums, options and statistics of the API, mapped one to one onto pccl.h's.
use pccl_sys as sys;

/// `pcclDataType_t`: element types of tensors and collectives (PCCL 1.0's numbering).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DataType {
    Uint8,
    Int8,
    Int16,
    Uint16,
    Uint32,
    Int32,
    Uint64,
    Int64,
    /// IEEE binary16, stored as `u16` bits ([`F16`]).
    Float16,
    /// bfloat16, stored as `u16` bits ([`BF16`]).
    BFloat16,
    Float,
    Double,
}

impl DataType {
    /// Every data type, in value order.
    pub const ALL: [DataType; 12] = [
        DataType::Uint8,
        DataType::Int8,
        DataType::Int16,
        DataType::Uint16,
        DataType::Uint32,
        DataType::Int32,
        DataType::Uint64,
        DataType::Int64,
        DataType::Float16,
        DataType::BFloat16,
        DataType::Float,
        DataType::Double,
    ];

    /// The `pcclDataType_t` value.
    pub fn to_raw(self) -> sys::pcclDataType_t {
        match self {
            DataType::Uint8 => sys::pcclUint8,
            DataType::Int8 => sys::pcclInt8,
            DataType::Int16 => sys::pcclInt16,
            DataType::Uint16 => sys::pcclUint16,
            DataType::Uint32 => sys::pcclUint32,
            DataType::Int32 => sys::pcclInt32,
            DataType::Uint64 => sys::pcclUint64,
            DataType::Int64 => sys::pcclInt64,
            DataType::Float16 => sys::pcclFloat16,
            DataType::BFloat16 => sys::pcclBFloat16,
            DataType::Float => sys::pcclFloat,
            DataType::Double => sys::pcclDouble,
        }
    }

    /// The type of a `pcclDataType_t` value, `None` when unknown.
    pub fn from_raw(raw: sys::pcclDataType_t) -> Option<DataType> {
        DataType::ALL.iter().copied().find(|d| d.to_raw() == raw)
    }

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            DataType::Uint8 | DataType::Int8 => 1,
            DataType::Int16 | DataType::Uint16 | DataType::Float16 | DataType::BFloat16 => 2,
            DataType::Uint32 | DataType::Int32 | DataType::Float => 4,
            DataType::Uint64 | DataType::Int64 | DataType::Double => 8,
        }
    }
}

/// IEEE 754 binary16 as its bit pattern (`pcclFloat16`). pccl converts in software.
#[repr(transparent)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct F16(pub u16);

/// bfloat16 (the top half of a binary32) as its bit pattern (`pcclBFloat16`).
#[repr(transparent)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct BF16(pub u16);

impl BF16 {
    /// The bfloat16 nearest to `x` (round to nearest, ties to even; NaN stays a quiet NaN).
    pub fn from_f32(x: f32) -> BF16 {
        let b = x.to_bits();
        if x.is_nan() {
            return BF16(((b >> 16) as u16) | 0x0040);
        }
        let round = 0x7fff + ((b >> 16) & 1);
        BF16((b.wrapping_add(round) >> 16) as u16)
    }
    /// The exact binary32 value.
    pub fn to_f32(self) -> f32 {
        f32::from_bits((self.0 as u32) << 16)
    }
}

mod sealed {
    pub trait Sealed {}
}

/// Rust element types pccl can reduce and synchronize, with their `pcclDataType_t`.
///
/// Sealed: implemented for `u8 i8 i16 u16 u32 i32 u64 i64 f32 f64` and [`F16`], [`BF16`]. All
/// are plain bytes with no invalid bit patterns, which is what lets the library write them.
pub trait Element: sealed::Sealed + Copy + Send + Sync + 'static {
    /// The element's `pcclDataType_t`.
    const DATA_TYPE: DataType;
}

macro_rules! element {
    ($($t:ty => $d:ident),* $(,)?) => {$(
        impl sealed::Sealed for $t {}
        impl Element for $t {
            const DATA_TYPE: DataType = DataType::$d;
        }
    )*};
}

element!(
    u8 => Uint8, i8 => Int8, i16 => Int16, u16 => Uint16, u32 => Uint32, i32 => Int32,
    u64 => Uint64, i64 => Int64, F16 => Float16, BF16 => BFloat16, f32 => Float, f64 => Double,
);

/// `pcclRedOp_t`. Integer arithmetic wraps; `Avg` on integers truncates toward zero;
/// `Min`/`Max` propagate NaN (docs/semantics.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    Sum,
    Avg,
    Prod,
    Max,
    Min,
    /// Bitwise AND (pccl addition): integer types only; with a float type the all-reduce
    /// fails with `InvalidArgument`.
    Band,
    /// Bitwise OR (pccl addition): integer types only.
    Bor,
    /// Bitwise XOR (pccl addition): integer types only.
    Bxor,
    /// Premultiplied sum (`pcclPremulSum`): each member's input times its own factor
    /// ([`crate::CollectiveOptions::premul_scalar`]), then summed; float types only. Only
    /// the collective set takes it ([`crate::Communicator::all_reduce_with`], `reduce`,
    /// `reduce_scatter`); the plain all-reduce has no place for the factor and libpccl
    /// refuses it there (`InvalidArgument`).
    PremulSum,
}

impl ReduceOp {
    /// The `pcclRedOp_t` value.
    pub fn to_raw(self) -> sys::pcclRedOp_t {
        match self {
            ReduceOp::Sum => sys::pcclSum,
            ReduceOp::Avg => sys::pcclAvg,
            ReduceOp::Prod => sys::pcclProd,
            ReduceOp::Max => sys::pcclMax,
            ReduceOp::Min => sys::pcclMin,
            ReduceOp::Band => sys::pcclBand,
            ReduceOp::Bor => sys::pcclBor,
            ReduceOp::Bxor => sys::pcclBxor,
            ReduceOp::PremulSum => sys::pcclPremulSum,
        }
    }
}

/// `pcclDistributionHint_t`: a hint for quantizers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum DistributionHint {
    #[default]
    None,
    Normal,
    Uniform,
}

impl DistributionHint {
    /// The `pcclDistributionHint_t` value.
    pub fn to_raw(self) -> sys::pcclDistributionHint_t {
        match self {
            DistributionHint::None => sys::pcclDistributionNone,
            DistributionHint::Normal => sys::pcclDistributionNormal,
            DistributionHint::Uniform => sys::pcclDistributionUniform,
        }
    }
}

/// `pcclQuantizationAlgorithm_t`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum QuantizationAlgorithm {
    #[default]
    None,
    MinMax,
    ZeroPointScale,
}

impl QuantizationAlgorithm {
    /// The `pcclQuantizationAlgorithm_t` value.
    pub fn to_raw(self) -> sys::pcclQuantizationAlgorithm_t {
        match self {
            QuantizationAlgorithm::None => sys::pcclQuantNone,
            QuantizationAlgorithm::MinMax => sys::pcclQuantMinMax,
            QuantizationAlgorithm::ZeroPointScale => sys::pcclQuantZeroPointScale,
        }
    }
}

/// `pcclAlgorithm_t`: the algorithm an operation runs ([`crate::CollectiveOptions::algorithm`],
/// [`crate::Communicator::algorithm_for`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Algorithm {
    /// The group's tuned table ([`crate::Communicator::tune`]) for the operation's size and
    /// world, else the built-in rule.
    #[default]
    Auto,
    /// The master reduces / routes every member's input: one round trip, inputs up to the
    /// master's relay bound (32 KiB by default, at most 64 KiB).
    Relay,
    /// All-reduce only: every member gets every input and reduces them in rank order (inputs
    /// up to 4 MiB).
    Direct,
    /// The ring schedule, one connection per step.
    Ring,
    /// The ring schedule, large steps striped over the link's connection pool (the same
    /// reduction order as `Ring`, so the same bits).
    RingStriped,
    /// All-reduce only: recursive halving then doubling over the ring's links both ways, at
    /// N = 2 or 4 with at least N elements (forced on another world it runs the ring).
    HalvingDoubling,
}

impl Algorithm {
    /// Every algorithm, in value order.
    pub const ALL: [Algorithm; 6] = [
        Algorithm::Auto,
        Algorithm::Relay,
        Algorithm::Direct,
        Algorithm::Ring,
        Algorithm::RingStriped,
        Algorithm::HalvingDoubling,
    ];

    /// The `pcclAlgorithm_t` value.
    pub fn to_raw(self) -> sys::pcclAlgorithm_t {
        match self {
            Algorithm::Auto => sys::pcclAlgoAuto,
            Algorithm::Relay => sys::pcclAlgoRelay,
            Algorithm::Direct => sys::pcclAlgoDirect,
            Algorithm::Ring => sys::pcclAlgoRing,
            Algorithm::RingStriped => sys::pcclAlgoRingStriped,
            Algorithm::HalvingDoubling => sys::pcclAlgoHalvingDoubling,
        }
    }

    /// The algorithm of a `pcclAlgorithm_t` value, `None` when unknown.
    pub fn from_raw(raw: sys::pcclAlgorithm_t) -> Option<Algorithm> {
        Algorithm::ALL.iter().copied().find(|a| a.to_raw() == raw)
    }

    /// The name the table files of [`crate::Communicator::tune_save`] use: `"auto"`,
    /// `"relay"`, `"direct"`, `"ring"`, `"ring_striped"`, `"halving_doubling"`.
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Auto => "auto",
            Algorithm::Relay => "relay",
            Algorithm::Direct => "direct",
            Algorithm::Ring => "ring",
            Algorithm::RingStriped => "ring_striped",
            Algorithm::HalvingDoubling => "halving_doubling",
        }
    }
}

/// How one all-reduce runs: operator, tag, distribution hint, wire quantization.
///
/// `From<ReduceOp>` lets every all-reduce take a bare operator (tag 0, no quantization).
/// The tag identifies the operation among concurrent ones: every peer must use the same tag
/// for the same operation, and tags in flight on one communicator must differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReduceOptions {
    pub op: ReduceOp,
    pub tag: u64,
    pub distribution_hint: DistributionHint,
    /// `Some((quantized type, algorithm))` quantizes float data on the wire.
    pub quantization: Option<(DataType, QuantizationAlgorithm)>,
}

impl ReduceOptions {
    /// `op` with tag 0, no hint, no quantization.
    pub fn new(op: ReduceOp) -> ReduceOptions {
        ReduceOptions {
            op,
            tag: 0,
            distribution_hint: DistributionHint::None,
            quantization: None,
        }
    }
    /// The same options with `tag`.
    pub fn tag(mut self, tag: u64) -> ReduceOptions {
        self.tag = tag;
        self
    }
    /// The same options with a distribution hint.
    pub fn distribution_hint(mut self, hint: DistributionHint) -> ReduceOptions {
        self.distribution_hint = hint;
        self
    }
    /// The same options quantizing the wire traffic to `datatype` with `algorithm`.
    pub fn quantize(
        mut self,
        datatype: DataType,
        algorithm: QuantizationAlgorithm,
    ) -> ReduceOptions {
        self.quantization = Some((datatype, algorithm));
        self
    }

    pub(crate) fn descriptor(&self, count: usize, dtype: DataType) -> sys::pcclReduceDescriptor_t {
        let (qdt, qalg) = match self.quantization {
            Some((d, a)) => (d, a),
            None => (dtype, QuantizationAlgorithm::None),
        };
        sys::pcclReduceDescriptor_t {
            count,
            op: self.op.to_raw(),
            tag: self.tag,
            src_descriptor: sys::pcclReduceOperandDescriptor_t {
                datatype: dtype.to_raw(),
                distribution_hint: self.distribution_hint.to_raw(),
            },
            quantization_options: sys::pcclQuantizationOptions_t {
                quantized_datatype: qdt.to_raw(),
                algorithm: qalg.to_raw(),
            },
        }
    }
}

impl From<ReduceOp> for ReduceOptions {
    fn from(op: ReduceOp) -> ReduceOptions {
        ReduceOptions::new(op)
    }
}

/// `pcclReduceInfo_t`: statistics of one all-reduce.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReduceInfo {
    /// Peers that took part.
    pub local_world_size: u32,
    /// Bytes this peer sent on the ring.
    pub tx_bytes: u64,
    /// Bytes this peer received on the ring.
    pub rx_bytes: u64,
}

impl From<sys::pcclReduceInfo_t> for ReduceInfo {
    fn from(i: sys::pcclReduceInfo_t) -> ReduceInfo {
        ReduceInfo {
            local_world_size: i.local_world_size,
            tx_bytes: i.tx_bytes,
            rx_bytes: i.rx_bytes,
        }
    }
}

/// `pcclAttribute_t`: integer attributes of a communicator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Attribute {
    /// Accepted peers in all peer groups.
    GlobalWorldSize,
    /// Accepted peers in the caller's peer group.
    PeerGroupWorldSize,
    /// Distinct peer groups with at least one accepted peer.
    NumDistinctPeerGroups,
    /// Accepted peers in the largest peer group.
    LargestPeerGroupWorldSize,
    /// pccl extension: the caller's index in its peer group's ring of the current epoch,
    /// `0 .. PeerGroupWorldSize`; -1 while it is in no installed ring (a failed re-wiring, the
    /// master lost). Changes only inside `connect`, `update_topology`, `optimize_topology`.
    Rank,
    /// pccl extension: the epoch of the ring [`Attribute::Rank`] refers to: equal on every
    /// member, larger after each admission or re-wiring; 0 before any.
    Epoch,
}

impl Attribute {
    /// PCCL's documentation's name for [`Attribute::PeerGroupWorldSize`].
    pub const CURRENT_WORLD_SIZE: Attribute = Attribute::PeerGroupWorldSize;

    /// The `pcclAttribute_t` value.
    pub fn to_raw(self) -> sys::pcclAttribute_t {
        match self {
            Attribute::GlobalWorldSize => sys::PCCL_ATTRIBUTE_GLOBAL_WORLD_SIZE,
            Attribute::PeerGroupWorldSize => sys::PCCL_ATTRIBUTE_PEER_GROUP_WORLD_SIZE,
            Attribute::NumDistinctPeerGroups => sys::PCCL_ATTRIBUTE_NUM_DISTINCT_PEER_GROUPS,
            Attribute::LargestPeerGroupWorldSize => {
                sys::PCCL_ATTRIBUTE_LARGEST_PEER_GROUP_WORLD_SIZE
            }
            Attribute::Rank => sys::PCCL_ATTRIBUTE_RANK,
            Attribute::Epoch => sys::PCCL_ATTRIBUTE_EPOCH,
        }
    }
}

/// `pcclSharedStateSyncStrategy_t`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum SyncStrategy {
    /// Vote with the local content; receive the popular content where it differs.
    #[default]
    EnforcePopular,
    /// Do not vote; receive the popular content.
    ReceiveOnly,
    /// Vote and distribute, never receive: differing content is an error (and an eviction).
    SendOnly,
}

impl SyncStrategy {
    /// The `pcclSharedStateSyncStrategy_t` value.
    pub fn to_raw(self) -> sys::pcclSharedStateSyncStrategy_t {
        match self {
            SyncStrategy::EnforcePopular => sys::PCCL_SHARED_STATE_SYNC_STRATEGY_ENFORCE_POPULAR,
            SyncStrategy::ReceiveOnly => sys::PCCL_SHARED_STATE_SYNC_STRATEGY_RECEIVE_ONLY,
            SyncStrategy::SendOnly => sys::PCCL_SHARED_STATE_SYNC_STRATEGY_SEND_ONLY,
        }
    }
}

/// `pcclSharedStateSyncInfo_t`: statistics of one shared-state synchronization.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SyncInfo {
    /// Bytes this peer sent to outdated peers.
    pub tx_bytes: u64,
    /// Bytes this peer received because its state was outdated (0 when up to date).
    pub rx_bytes: u64,
}

/// `pcclBuildInfo_t`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BuildInfo {
    pub has_cuda_support: bool,
}
