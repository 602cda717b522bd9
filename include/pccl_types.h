/*
 * pccl_types.h — the value types of pccl's public API: result codes (and
 * their X-macro), data types, devices, reduction operators, attributes,
 * shared-state strategies, distribution hints and quantization algorithms.
 *
 * Types only: no function, struct or handle. pccl.h includes it; the pure
 * core (core/) and the wire codec (schema/) include it instead of pccl.h
 * (the tidy test enforces that), so they depend on the API's values and not
 * on its functions (docs/architecture.md).
 *
 * This header compiles as C99, C11 and C++ (checked by tests/header).
 */
#ifndef PCCL_TYPES_H
#define PCCL_TYPES_H

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Result codes                                                             */
/* ------------------------------------------------------------------------ */

/**
 * Result of every pccl call. Values 0..12 are PCCL 1.0's, in PCCL's order;
 * pccl appends new codes after them and never renumbers (append-only).
 */
typedef enum pcclResult_t {
    /** The call succeeded. */
    pcclSuccess = 0,
    /** pcclInit was not called before a call that needs it. */
    pcclNotInitialized = 1,
    /** A bug in pccl: an internal invariant failed. Please report it. */
    pcclInternalError = 2,
    /** An argument is invalid: a NULL pointer, an unknown enum value, a count too large. */
    pcclInvalidArgument = 3,
    /**
     * The call is not legal now: not connected, a collective's parameters
     * disagree between peers, a shared-state key set differs from the popular
     * one, a protocol version mismatch. A program bug, not a network fault.
     */
    pcclInvalidUsage = 4,
    /** Fewer than two peers are in the group: update the topology and retry. */
    pcclTooFewPeers = 5,
    /** The master is unreachable, gone, or has evicted this peer. */
    pcclMasterConnectionFailed = 6,
    /** A p2p connection to another peer could not be established. */
    pcclRankConnectionFailed = 7,
    /** A peer was lost during the operation; buffers are restored; retry. */
    pcclRankConnectionLost = 8,
    /** No peer holds shared state to distribute. */
    pcclNoSharedStateAvailable = 9,
    /** The call is not allowed while asynchronous collectives are running. */
    pcclPendingAsyncOps = 10,
    /** A member dropped or a new link failed while updating the topology: retry. */
    pcclUpdateTopologyFailed = 11,
    /** A bandwidth probe or the re-wiring failed while optimizing the topology: retry. */
    pcclTopologyOptimizationFailed = 12,

    /* ---- codes pccl appends (not in PCCL 1.0) ---- */

    /** A blocking call's timeout elapsed before the operation finished. */
    pcclTimeout = 13,
    /** The operating system refused a resource (sockets, threads, memory). */
    pcclSystemError = 14,
    /** A remote peer or the master reported an error it could not recover from. */
    pcclRemoteError = 15,
    /** Shared state could not be synchronized (name used by PCCL's README). */
    pcclSharedStateSyncFailed = 16,
    /**
     * A frame violated the CCoIP wire contract: truncated, oversized, a bad
     * magic, an overflowing varint, a wrong wire type. The connection that
     * carried it is closed.
     */
    pcclProtocolError = 17,
    /**
     * Authentication failed (docs/security.md): the master requires a run token and this
     * peer has none or a different one, or this peer has a run token and the master could
     * not prove it holds the same. pccl addition (PCCL 1.0 has no value 18).
     */
    pcclAuthenticationFailed = 18,

    /** Alias: the name PCCL's documentation uses for pcclTopologyOptimizationFailed. */
    pcclOptimizeTopologyFailed = pcclTopologyOptimizationFailed
} pcclResult_t;

/**
 * X-macro table of every distinct result code: X(name, value, message).
 * Bindings and tools generate name tables from it; tests/header checks it
 * against the enum.
 */
#define PCCL_RESULT_MAP(X)                                                                         \
    X(pcclSuccess, 0, "success")                                                                   \
    X(pcclNotInitialized, 1, "pcclInit was not called")                                            \
    X(pcclInternalError, 2, "internal error")                                                      \
    X(pcclInvalidArgument, 3, "invalid argument")                                                  \
    X(pcclInvalidUsage, 4, "invalid usage")                                                        \
    X(pcclTooFewPeers, 5, "too few peers")                                                         \
    X(pcclMasterConnectionFailed, 6, "master connection failed")                                   \
    X(pcclRankConnectionFailed, 7, "peer connection failed")                                       \
    X(pcclRankConnectionLost, 8, "peer connection lost")                                           \
    X(pcclNoSharedStateAvailable, 9, "no shared state available")                                  \
    X(pcclPendingAsyncOps, 10, "asynchronous operations pending")                                  \
    X(pcclUpdateTopologyFailed, 11, "update topology failed")                                      \
    X(pcclTopologyOptimizationFailed, 12, "topology optimization failed")                          \
    X(pcclTimeout, 13, "timed out")                                                                \
    X(pcclSystemError, 14, "system error")                                                         \
    X(pcclRemoteError, 15, "remote error")                                                         \
    X(pcclSharedStateSyncFailed, 16, "shared state synchronization failed")                        \
    X(pcclProtocolError, 17, "protocol error")                                                     \
    X(pcclAuthenticationFailed, 18, "authentication failed")

/** Number of distinct result codes (one more than the largest value). */
#define PCCL_RESULT_COUNT (19)

/* ------------------------------------------------------------------------ */
/* Enums                                                                    */
/* ------------------------------------------------------------------------ */

/**
 * Element types of tensors and collectives. The numbering is PCCL 1.0's
 * public one (note Int16 = 2 before Uint16 = 3).
 */
typedef enum pcclDataType_t {
    pcclUint8 = 0,
    pcclInt8 = 1,
    pcclInt16 = 2,
    pcclUint16 = 3,
    pcclUint32 = 4,
    pcclInt32 = 5,
    pcclUint64 = 6,
    pcclInt64 = 7,
    pcclFloat16 = 8,  /**< IEEE 754 binary16, stored as uint16_t bits. */
    pcclBFloat16 = 9, /**< bfloat16 (the top half of a binary32), stored as uint16_t bits. */
    pcclFloat = 10,   /**< IEEE 754 binary32. */
    pcclDouble = 11   /**< IEEE 754 binary64. */
} pcclDataType_t;

/** Number of pcclDataType_t values (they are 0 .. PCCL_DATA_TYPE_COUNT - 1). */
#define PCCL_DATA_TYPE_COUNT (12)

/** Where a tensor's memory lives. Collectives accept CPU memory only. */
typedef enum pcclDeviceType_t { pcclDeviceCpu = 0, pcclDeviceCuda = 1 } pcclDeviceType_t;

/**
 * Reduction operators. Integer arithmetic wraps (two's complement); pcclAvg
 * on integers is the wrapped sum divided by the number of peers, truncated
 * toward zero; pcclMin/pcclMax propagate NaN. docs/semantics.md has the
 * exact rules for every type. Values 0..4 are PCCL 1.0's; pccl appends the
 * bitwise operators after them (append-only).
 */
typedef enum pcclRedOp_t {
    pcclSum = 0,
    pcclAvg = 1,
    pcclProd = 2,
    pcclMax = 3,
    pcclMin = 4,

    /* ---- operators pccl appends (not in PCCL 1.0) ---- */

    /**
     * Bitwise AND, OR and XOR of the elements' bits: integer data types only
     * (an all-reduce of a float type with one of them is pcclInvalidArgument).
     */
    pcclBand = 5,
    pcclBor = 6,
    pcclBxor = 7,
    /**
     * Premultiplied sum (TorchComms PREMUL_SUM): every member's input is first
     * multiplied by its own scalar (pcclCollectiveOptions_t.premul_scalar, so
     * only the ...Ex / collective-set calls can ask for it), then summed as
     * pcclSum. Float data types only (pcclInvalidArgument otherwise);
     * docs/semantics.md §2 has the exact rounding.
     */
    pcclPremulSum = 8
} pcclRedOp_t;

/** Number of pcclRedOp_t values. */
#define PCCL_RED_OP_COUNT (9)

/** Integer attributes of a communicator, read with pcclGetAttribute. */
typedef enum pcclAttribute_t {
    /** Accepted peers in all peer groups. */
    PCCL_ATTRIBUTE_GLOBAL_WORLD_SIZE = 1,
    /** Accepted peers in the caller's peer group. */
    PCCL_ATTRIBUTE_PEER_GROUP_WORLD_SIZE = 2,
    /** Number of distinct peer groups with at least one accepted peer. */
    PCCL_ATTRIBUTE_NUM_DISTINCT_PEER_GROUPS = 3,
    /** Accepted peers in the largest peer group. */
    PCCL_ATTRIBUTE_LARGEST_PEER_GROUP_WORLD_SIZE = 4,
    /** Alias used by PCCL's documentation: the caller's peer group world size. */
    PCCL_ATTRIBUTE_CURRENT_WORLD_SIZE = PCCL_ATTRIBUTE_PEER_GROUP_WORLD_SIZE,
    /**
     * pccl extension: tensor bytes this communicator's runtime copied in memory
     * (memcpy/memmove, beyond what the sockets moved) since it was created,
     * modulo 2^31 (the low 31 bits; the difference of two reads modulo 2^31 is
     * exact while less than 2 GiB were copied between them). Which copies
     * count: docs/benchmarks.md, "copied_bytes". Updated when an all-reduce or
     * shared-state synchronization completes.
     */
    PCCL_ATTRIBUTE_COPIED_BYTES = 5,
    /** pccl extension: the copied-byte count divided by 2^31 (its high bits). */
    PCCL_ATTRIBUTE_COPIED_BYTES_HIGH = 6,
    /**
     * pccl extension: the caller's rank, its index (0 .. PEER_GROUP_WORLD_SIZE - 1) in its
     * peer group's ring of the current epoch (the last successful topology verdict). Changes
     * only when the epoch does, i.e. inside pcclConnect / pcclUpdateTopology /
     * pcclOptimizeTopology. -1 while the caller is in no installed ring: before its admission
     * completed, after a re-wiring failed (pcclUpdateTopology / pcclOptimizeTopology failed
     * after the old ring was torn down) until a later call installs one, and after the master
     * connection was lost.
     */
    PCCL_ATTRIBUTE_RANK = 7,
    /**
     * pccl extension: the epoch of the ring RANK refers to (equal on every member of a ring,
     * growing with each admission or re-wiring); 0 before any ring was installed. Kept after
     * a failed re-wiring (RANK is then -1). Saturates at INT_MAX.
     */
    PCCL_ATTRIBUTE_EPOCH = 8
} pcclAttribute_t;

/** How a peer takes part in shared-state synchronization (PCCL 1.0). */
typedef enum pcclSharedStateSyncStrategy_t {
    /** Vote with the local content; receive the popular content where it differs. */
    PCCL_SHARED_STATE_SYNC_STRATEGY_ENFORCE_POPULAR = 0,
    /** Do not vote; receive the popular content. */
    PCCL_SHARED_STATE_SYNC_STRATEGY_RECEIVE_ONLY = 1,
    /** Vote and distribute, but never receive: differing content is an error. */
    PCCL_SHARED_STATE_SYNC_STRATEGY_SEND_ONLY = 2
} pcclSharedStateSyncStrategy_t;

/** A hint about the distribution of values, for quantizers. */
typedef enum pcclDistributionHint_t {
    pcclDistributionNone = 0,
    pcclDistributionNormal = 1,
    pcclDistributionUniform = 2,
    /** Alias used by PCCL's documentation. */
    PCCL_DISTRIBUTION_HINT_NONE = pcclDistributionNone,
    /** Alias used by PCCL's documentation. */
    PCCL_DISTRIBUTION_HINT_NORMAL = pcclDistributionNormal,
    /** Alias used by PCCL's documentation. */
    PCCL_DISTRIBUTION_HINT_UNIFORM = pcclDistributionUniform,
    /** Alias used by older PCCL documentation. */
    PCCL_NORMAL_DISTRIBUTION_HINT = pcclDistributionNormal,
    /** Alias used by older PCCL documentation. */
    PCCL_UNIFORM_DISTRIBUTION_HINT = pcclDistributionUniform
} pcclDistributionHint_t;

/**
 * Quantization of collective traffic on the wire. Quantized all-reduces
 * still end bit-identical on every peer (docs/semantics.md).
 */
typedef enum pcclQuantizationAlgorithm_t {
    /** No quantization: elements travel in their own type. */
    pcclQuantNone = 0,
    /** Per-chunk min/max affine quantization. */
    pcclQuantMinMax = 1,
    /** Per-chunk zero-point/scale affine quantization. */
    pcclQuantZeroPointScale = 2
} pcclQuantizationAlgorithm_t;

#ifdef __cplusplus
}
#endif

#endif /* PCCL_TYPES_H */
