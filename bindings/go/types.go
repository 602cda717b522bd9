package pccl

// DataType is a pcclDataType_t: the element type of a tensor or collective.
type DataType int32

// Element types, numbered as in include/pccl.h (PCCL 1.0's order).
const (
	Uint8    DataType = 0
	Int8     DataType = 1
	Int16    DataType = 2
	Uint16   DataType = 3
	Uint32   DataType = 4
	Int32    DataType = 5
	Uint64   DataType = 6
	Int64    DataType = 7
	Float16  DataType = 8
	BFloat16 DataType = 9
	Float    DataType = 10
	Double   DataType = 11
)

var dtypeNames = [...]string{"uint8", "int8", "int16", "uint16", "uint32", "int32", "uint64",
	"int64", "float16", "bfloat16", "float32", "float64"}

func (d DataType) String() string {
	if d >= 0 && int(d) < len(dtypeNames) {
		return dtypeNames[d]
	}
	return "invalid"
}

// Size returns the size of one element in bytes (0 for an invalid type).
func (d DataType) Size() int {
	switch d {
	case Uint8, Int8:
		return 1
	case Int16, Uint16, Float16, BFloat16:
		return 2
	case Uint32, Int32, Float:
		return 4
	case Uint64, Int64, Double:
		return 8
	}
	return 0
}

// Half is an IEEE 754 binary16 value held as its bits (element type Float16).
type Half uint16

// BHalf is a bfloat16 value held as its bits (element type BFloat16).
type BHalf uint16

// Element is the set of Go element types a collective or tensor may hold.
// Half and BHalf carry float16/bfloat16 bits.
type Element interface {
	uint8 | int8 | int16 | uint16 | uint32 | int32 | uint64 | int64 |
		Half | BHalf | float32 | float64
}

// DataTypeOf returns the pccl element type of T.
func DataTypeOf[T Element]() DataType {
	var z T
	switch any(z).(type) {
	case uint8:
		return Uint8
	case int8:
		return Int8
	case int16:
		return Int16
	case uint16:
		return Uint16
	case uint32:
		return Uint32
	case int32:
		return Int32
	case uint64:
		return Uint64
	case int64:
		return Int64
	case Half:
		return Float16
	case BHalf:
		return BFloat16
	case float32:
		return Float
	case float64:
		return Double
	}
	panic("pccl: unreachable element type")
}

// ReduceOp is a pcclRedOp_t.
type ReduceOp int32

// Reduction operators. Integer arithmetic wraps; Avg on integers truncates
// toward zero (docs/semantics.md). Band, Bor and Bxor (pccl additions) are
// the bitwise AND, OR and XOR of integer types; with a float type an
// all-reduce fails with InvalidArgument. PremulSum (pcclPremulSum) multiplies
// every member's input by its own factor (CollectiveOptions.PremulScalar)
// before summing, float types only: Reduce, ReduceScatter and AllReduceEx
// take it; AllReduce has no place for the factor and refuses it
// (InvalidArgument, from libpccl).
const (
	Sum  ReduceOp = 0
	Avg  ReduceOp = 1
	Prod ReduceOp = 2
	Max  ReduceOp = 3
	Min  ReduceOp = 4
	Band ReduceOp = 5
	Bor  ReduceOp = 6
	Bxor ReduceOp = 7
	// PremulSum is pcclPremulSum (float types only).
	PremulSum ReduceOp = 8
)

// DistributionHint is a pcclDistributionHint_t, a hint for quantizers.
type DistributionHint int32

// Distribution hints.
const (
	DistributionNone    DistributionHint = 0
	DistributionNormal  DistributionHint = 1
	DistributionUniform DistributionHint = 2
)

// QuantizationAlgorithm is a pcclQuantizationAlgorithm_t.
type QuantizationAlgorithm int32

// Quantization algorithms.
const (
	QuantNone           QuantizationAlgorithm = 0
	QuantMinMax         QuantizationAlgorithm = 1
	QuantZeroPointScale QuantizationAlgorithm = 2
)

// Algorithm is a pcclAlgorithm_t: the algorithm an operation runs
// (CollectiveOptions.Algorithm, Communicator.AlgorithmFor).
type Algorithm int32

// Algorithms, numbered as in include/pccl.h.
const (
	// AlgoAuto (the zero value) runs the group's tuned table (Tune) for the
	// operation's size and world, else the built-in rule.
	AlgoAuto Algorithm = 0
	// AlgoRelay: the master reduces / routes every member's input; one round
	// trip, inputs up to the master's relay bound (32 KiB by default, at most
	// 64 KiB).
	AlgoRelay Algorithm = 1
	// AlgoDirect (all-reduce only): every member gets every input and
	// reduces them in rank order; inputs up to 4 MiB.
	AlgoDirect Algorithm = 2
	// AlgoRing: the ring schedule, one connection per step.
	AlgoRing Algorithm = 3
	// AlgoRingStriped: the ring schedule, large steps striped over the link's
	// connection pool (the same reduction order as AlgoRing, so the same bits).
	AlgoRingStriped Algorithm = 4
	// AlgoHalvingDoubling (all-reduce only): recursive halving then doubling
	// over the ring's links both ways, at N = 2 or 4 with at least N elements;
	// forced on another world it runs the ring.
	AlgoHalvingDoubling Algorithm = 5
)

var algoNames = [...]string{"auto", "relay", "direct", "ring", "ring_striped", "halving_doubling"}

// String returns the name TuneSave's files use: "auto", "relay", "direct",
// "ring", "ring_striped" or "halving_doubling" ("invalid" for another value).
func (a Algorithm) String() string {
	if a >= 0 && int(a) < len(algoNames) {
		return algoNames[a]
	}
	return "invalid"
}

// Quantization says how an all-reduce's traffic is quantized on the wire.
// The zero value is no quantization.
type Quantization struct {
	Algorithm QuantizationAlgorithm
	// DataType is the type elements travel in (ignored for QuantNone).
	DataType DataType
}

// ReduceOptions describes one all-reduce; the zero value is a Sum with tag 0
// and no quantization. All peers of the group must pass the same options.
type ReduceOptions struct {
	Op ReduceOp
	// Tag identifies the operation among concurrent ones on a communicator;
	// unique while in flight, and equal on every peer for the same operation.
	Tag          uint64
	Distribution DistributionHint
	Quantization Quantization
}

// ReduceInfo holds the statistics of one all-reduce (pcclReduceInfo_t).
type ReduceInfo struct {
	WorldSize int    // peers that took part
	TxBytes   uint64 // bytes this peer sent on the ring
	RxBytes   uint64 // bytes this peer received on the ring
}

// Attribute is a pcclAttribute_t, read with Communicator.Attribute.
type Attribute int32

// Communicator attributes.
const (
	// GlobalWorldSize counts the accepted peers of all peer groups.
	GlobalWorldSize Attribute = 1
	// PeerGroupWorldSize counts the accepted peers of the caller's peer group.
	PeerGroupWorldSize Attribute = 2
	// NumDistinctPeerGroups counts the groups with at least one accepted peer.
	NumDistinctPeerGroups Attribute = 3
	// LargestPeerGroupWorldSize counts the accepted peers of the largest group.
	LargestPeerGroupWorldSize Attribute = 4
	// CurrentWorldSize is PCCL's documented alias of PeerGroupWorldSize.
	CurrentWorldSize = PeerGroupWorldSize
	// CopiedBytes (pccl extension) is the number of tensor bytes the runtime
	// copied in memory since the communicator was created, modulo 2^31
	// (docs/benchmarks.md, "copied_bytes").
	CopiedBytes Attribute = 5
	// CopiedBytesHigh (pccl extension) is that count divided by 2^31.
	CopiedBytesHigh Attribute = 6
	// Rank (pccl extension) is the caller's index in its peer group's ring of
	// the current epoch, 0 .. PeerGroupWorldSize-1; -1 while it is in no
	// installed ring (a failed re-wiring, the master lost). It changes only
	// inside Connect, UpdateTopology and OptimizeTopology.
	Rank Attribute = 7
	// Epoch (pccl extension) is the epoch of the ring Rank refers to: equal on
	// every member, larger after each admission or re-wiring; 0 before any.
	Epoch Attribute = 8
)

// SyncStrategy is a pcclSharedStateSyncStrategy_t.
type SyncStrategy int32

// Shared-state synchronization strategies.
const (
	// EnforcePopular votes with the local content and receives the popular
	// content where it differs.
	EnforcePopular SyncStrategy = 0
	// ReceiveOnly does not vote; it receives the popular content.
	ReceiveOnly SyncStrategy = 1
	// SendOnly votes and distributes but never receives: differing content
	// is an error (InvalidUsage, and the master evicts the peer).
	SendOnly SyncStrategy = 2
)

// SyncInfo holds the statistics of one shared-state synchronization.
type SyncInfo struct {
	TxBytes uint64 // bytes sent to outdated peers
	RxBytes uint64 // bytes received because this peer was outdated
}
