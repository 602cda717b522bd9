/*
 * pccl.h — the public C ABI of pccl, a fault-tolerant collective
 * communication library implementing the PCCL API over IP.
 *
 * Compatibility: source- and binary-compatible with PCCL 1.0 and its
 * reference documentation (DESIGN.md §6, docs/pccl10.md). Every struct PCCL
 * 1.0 defines has PCCL 1.0's exact size, alignment and field offsets (checked
 * by tests/abi); every function PCCL 1.0 exports is exported under its name
 * with its signature. What pccl adds lives in its own structs, versioned by a
 * struct_size field, passed to ...Ex functions. Result codes are
 * append-only. Names that differ between PCCL's header and its documentation
 * are aliases of each other.
 *
 * This header compiles as C99, C11 and C++ (checked by tests/header).
 *
 * Functions are declared here as the library implements them (libpccl,
 * bindings/libpccl/ over the runtime in transport/).
 */
#ifndef PCCL_H
#define PCCL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ccoip.h"
#include "ccoip_inet.h"
#include "pccl_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Version and export macros                                                */
/* ------------------------------------------------------------------------ */

/** Major version of this header. Incompatible ABI changes bump it. */
#define PCCL_VERSION_MAJOR (0)
/** Minor version of this header. Appended functions and fields bump it. */
#define PCCL_VERSION_MINOR (1)
/** Patch version of this header. */
#define PCCL_VERSION_PATCH (0)
/** The version as one integer: 0xMMmmpp. */
#define PCCL_VERSION_HEX                                                                           \
    ((PCCL_VERSION_MAJOR << 16) | (PCCL_VERSION_MINOR << 8) | (PCCL_VERSION_PATCH))

/**
 * Marks a symbol exported from libpccl. The library is built with hidden
 * visibility; only symbols carrying this macro are exported.
 */
#if defined(_WIN32)
#if defined(PCCL_BUILDING_LIBRARY)
#define PCCL_EXPORT __declspec(dllexport)
#else
#define PCCL_EXPORT __declspec(dllimport)
#endif
#elif defined(__GNUC__) || defined(__clang__)
#define PCCL_EXPORT __attribute__((visibility("default")))
#else
#define PCCL_EXPORT
#endif

/** Marks a pointer parameter that may be NULL (documentation only, as in PCCL). */
#define PCCL_NULLABLE

/* ------------------------------------------------------------------------ */
/* Structs and handles                                                      */
/* ------------------------------------------------------------------------ */

/** A communicator: one peer's membership in a run. Opaque. */
typedef struct pcclComm_t pcclComm_t;

/** Information about a rank. Opaque (declared by PCCL 1.0, unused by its API). */
typedef struct pcclRankInfo_t pcclRankInfo_t;

/** A master node running in this process. Opaque. */
typedef struct pcclMasterInstanceState_t pcclMasterInstance_t;

/**
 * Parameters of pcclCreateCommunicator: PCCL 1.0's struct, with its exact
 * size (36 bytes), alignment and field offsets (DESIGN.md §6). Never append
 * to it: pccl's own options are in pcclCommCreateOptions_t.
 */
typedef struct pcclCommCreateParams_t {
    /** Address of the master (unless pcclCommCreateOptions_t.master_url is set). */
    ccoip_socket_address_t master_address;
    /** Peer group: collectives and shared state are scoped to it. */
    uint32_t peer_group;
    /**
     * Connections per ring neighbour (0 means pccl's default, 2; PCCL 1.0 used 1). Every
     * value is accepted: pccl opens at most 8 (CCOIP_P2P_POOL_MAX) and clamps larger values
     * to 8 with a log line. Concurrent all-reduces spread over the connections, and one
     * large all-reduce is striped over all of them (docs/protocol.md §8.2).
     */
    uint32_t p2p_connection_pool_size;
} pcclCommCreateParams_t;

/**
 * pccl's options of a communicator beyond PCCL 1.0's parameters, for
 * pcclCreateCommunicatorEx. Versioned by its size: set struct_size to
 * sizeof(pcclCommCreateOptions_t) (PCCL_COMM_CREATE_OPTIONS_INIT does), so a
 * library of a later version knows which fields the caller has. Zero fields
 * mean the default. Later versions only append fields.
 */
typedef struct pcclCommCreateOptions_t {
    /** sizeof(pcclCommCreateOptions_t) as the caller compiled it. */
    uint32_t struct_size;
    /** Upper bound of every blocking call, in milliseconds; 0 means no bound. */
    uint32_t timeout_ms;
    /** Heartbeat interval to the master in milliseconds; 0 means 250. */
    uint32_t heartbeat_ms;
    /** Must be 0. */
    uint32_t reserved;
    /**
     * Master URL, overriding params->master_address when not NULL and not
     * empty: "tcp://host:port", "tls+tcp://host:port" or "ipc:///path".
     * Copied by pcclCreateCommunicatorEx.
     */
    const char *master_url;
    /**
     * Ring order: a group's ring lists its members by (ring_key, peer id)
     * (docs/protocol.md §6.3). 0 (default) everywhere keeps the order of
     * joining. Members that each set their intended rank + 1 get those ranks
     * once the group holds all of them (pccl.torchcomms sets it from RANK; a
     * split's children from their parent rank). Added after the first version:
     * a struct_size without it means 0.
     */
    uint32_t ring_key;
    /** Must be 0. */
    uint32_t reserved2;
} pcclCommCreateOptions_t;

/** An initializer of pcclCommCreateOptions_t: every option at its default. */
#define PCCL_COMM_CREATE_OPTIONS_INIT                                                              \
    {                                                                                              \
        (uint32_t)sizeof(pcclCommCreateOptions_t), 0u, 0u, 0u, NULL, 0u, 0u                        \
    }

/** Statistics of one all-reduce. */
typedef struct pcclReduceInfo_t {
    /** Peers that took part in the operation. */
    uint32_t local_world_size;
    /** Bytes this peer sent on the ring. */
    uint64_t tx_bytes;
    /** Bytes this peer received on the ring. */
    uint64_t rx_bytes;
} pcclReduceInfo_t;

/** The element type of an all-reduce's operands, with a distribution hint. */
typedef struct pcclReduceOperandDescriptor_t {
    pcclDataType_t datatype;
    pcclDistributionHint_t distribution_hint;
} pcclReduceOperandDescriptor_t;

/** Quantization of an all-reduce's traffic. */
typedef struct pcclQuantizationOptions_t {
    /** The type elements travel in (ignored when algorithm is pcclQuantNone). */
    pcclDataType_t quantized_datatype;
    pcclQuantizationAlgorithm_t algorithm;
} pcclQuantizationOptions_t;

/** One all-reduce: element count, operator, tag, operand type, quantization. */
typedef struct pcclReduceDescriptor_t {
    /** Number of elements (not bytes). */
    size_t count;
    pcclRedOp_t op;
    /** Identifies the operation among concurrent ones; unique while in flight. */
    uint64_t tag;
    pcclReduceOperandDescriptor_t src_descriptor;
    pcclQuantizationOptions_t quantization_options;
} pcclReduceDescriptor_t;

/** One all-reduce with its buffers, for pcclAllReduceMultipleWithRetry. */
typedef struct pcclReduceSingleDescriptor_t {
    void *sendbuf;
    void *recvbuf;
    pcclReduceDescriptor_t descriptor;
} pcclReduceOpDescriptor_t;

/** Handle of an asynchronous all-reduce: the communicator and the op's tag. */
typedef struct pcclAsyncReduceOp_t {
    pcclComm_t *comm;
    uint64_t tag;
} pcclAsyncReduceOp_t;

/** A 16-byte peer identifier (PCCL 1.0). */
typedef struct pcclRankUuid_t {
    uint8_t data[16];
} pcclRankUuid_t;

/** One named tensor of the shared state. The memory belongs to the application. */
typedef struct pcclTensorInfo_t {
    /** Key, unique within the shared state; NUL-terminated. */
    const char *name;
    /** The tensor's elements; updated in place by synchronization. */
    void *data;
    /** Number of elements. */
    size_t count;
    pcclDataType_t datatype;
    pcclDeviceType_t device_type;
    /** When true, peers may hold different content; newcomers still receive it. */
    bool allow_content_inequality;
} pcclTensorInfo_t;

/** The shared state of a peer group: a revision and a list of tensors. */
typedef struct pcclSharedState_t {
    /** Must advance by exactly 1 per synchronization. */
    uint64_t revision;
    /** Number of entries in infos. */
    size_t count;
    pcclTensorInfo_t *infos;
} pcclSharedState_t;

/** Statistics of one shared-state synchronization. */
typedef struct pcclSharedStateSyncInfo_t {
    /** Bytes this peer sent to outdated peers. */
    uint64_t tx_bytes;
    /** Bytes this peer received because its state was outdated. */
    uint64_t rx_bytes;
} pcclSharedStateSyncInfo_t;

/** Build-time features of the library. */
typedef struct pcclBuildInfo_t {
    bool has_cuda_support;
} pcclBuildInfo_t;

/* ------------------------------------------------------------------------ */
/* Functions                                                                */
/* ------------------------------------------------------------------------ */

/*
 * Thread-safety (DESIGN.md §6): a communicator may be called from any thread,
 * one call at a time; the one exception is that asynchronous all-reduces may
 * be awaited (pcclAwaitAsyncReduce*) while another thread calls
 * pcclArePeersPending. A master instance likewise takes one call at a time,
 * except pcclInterruptMaster, which any thread (or a signal-handling thread)
 * may call at any time. The library never calls application code on its own
 * threads. Functions without a communicator or master (pcclInit,
 * pcclGetBuildInfo, pcclGetVersion) are safe from any thread at any time.
 */

/**
 * Initializes the library. Idempotent.
 * Returns pcclSuccess.
 */
PCCL_EXPORT pcclResult_t pcclInit(void);

/**
 * The runtime version of the library as PCCL_VERSION_HEX (0xMMmmpp), which
 * may differ from the header's. version_out receives it.
 * Returns pcclSuccess; pcclInvalidArgument when version_out is NULL.
 */
PCCL_EXPORT pcclResult_t pcclGetVersion(uint32_t *version_out);

/**
 * Fills *info with build-time features.
 * Returns pcclSuccess; pcclInvalidArgument when info is NULL.
 */
PCCL_EXPORT pcclResult_t pcclGetBuildInfo(pcclBuildInfo_t *info);

/**
 * Creates a communicator (no network activity yet) with every pccl option at
 * its default (or from the environment: docs/protocol.md §2). params is
 * copied.
 * Returns pcclSuccess; pcclNotInitialized (pcclInit not called);
 * pcclInvalidArgument (NULL pointer, an invalid master address);
 * pcclSystemError.
 */
PCCL_EXPORT pcclResult_t pcclCreateCommunicator(const pcclCommCreateParams_t *params,
                                                pcclComm_t **comm_out);

/**
 * Creates a communicator with pccl's options (options may be NULL: the
 * defaults, as pcclCreateCommunicator). params and options are copied
 * (master_url included).
 * Returns as pcclCreateCommunicator, and pcclInvalidArgument for a
 * struct_size below 16 or above this library's sizeof(pcclCommCreateOptions_t)
 * (a header newer than the library), a nonzero reserved field, or a
 * master_url of 256 bytes or more (each with a log line saying which).
 */
PCCL_EXPORT pcclResult_t pcclCreateCommunicatorEx(
    const pcclCommCreateParams_t *params, PCCL_NULLABLE const pcclCommCreateOptions_t *options,
    pcclComm_t **comm_out);

/**
 * Leaves the run gracefully (when connected), stops the communicator's
 * threads and frees it. Asynchronous all-reduces must have been awaited.
 * Returns pcclSuccess; pcclNotInitialized; pcclInvalidArgument (NULL).
 */
PCCL_EXPORT pcclResult_t pcclDestroyCommunicator(pcclComm_t *communicator);

/**
 * Connects to the master and blocks until the accepted peers admit this one
 * (they call pcclUpdateTopology).
 * Returns pcclSuccess; pcclNotInitialized; pcclInvalidArgument (NULL);
 * pcclInvalidUsage (already connected, protocol version mismatch);
 * pcclMasterConnectionFailed (master unreachable or lost);
 * pcclTimeout (the options' timeout_ms elapsed); pcclSystemError.
 */
PCCL_EXPORT pcclResult_t pcclConnect(pcclComm_t *communicator);

/**
 * Votes to admit pending peers and re-wires the ring (a collective of every
 * accepted peer, all groups).
 * Returns pcclSuccess; pcclNotInitialized; pcclInvalidArgument;
 * pcclInvalidUsage (not connected); pcclPendingAsyncOps (an async all-reduce
 * is not awaited yet, or a work object's op has not finished: both share the
 * communicator's 16 slots of operations in flight); pcclUpdateTopologyFailed
 * (retry);
 * pcclMasterConnectionFailed; pcclTimeout.
 */
PCCL_EXPORT pcclResult_t pcclUpdateTopology(pcclComm_t *communicator);

/**
 * Whether peers wait for admission (a collective of every accepted peer).
 * May run while another thread awaits an asynchronous all-reduce.
 * Returns pcclSuccess; pcclNotInitialized; pcclInvalidArgument;
 * pcclInvalidUsage (not connected); pcclMasterConnectionFailed; pcclTimeout.
 */
PCCL_EXPORT pcclResult_t pcclArePeersPending(const pcclComm_t *communicator, bool *pending_out);

/**
 * Reorders the ring by measured bandwidth (a collective of every accepted
 * peer, all groups): each peer probes the links to the members of its group
 * the master does not know yet (a short burst of bytes to each one's
 * bandwidth endpoint), the master solves each group's ring as an asymmetric
 * TSP and starts a new epoch with it; the call returns once the peers have
 * re-wired. Pending peers are not admitted. Measurements are cached by the
 * master, so repeated calls probe only new links.
 * Returns pcclSuccess; pcclNotInitialized; pcclInvalidArgument;
 * pcclInvalidUsage (not connected); pcclPendingAsyncOps (an async all-reduce
 * is not awaited yet, or a work object's op has not finished);
 * pcclTopologyOptimizationFailed (a probe or the
 * re-wiring failed: retry); pcclMasterConnectionFailed; pcclTimeout.
 */
PCCL_EXPORT pcclResult_t pcclOptimizeTopology(const pcclComm_t *communicator);

/**
 * Reads an integer attribute (pcclAttribute_t) as last reported by the
 * master: up to date after pcclConnect / pcclUpdateTopology /
 * pcclOptimizeTopology and after an all-reduce fails. The global attributes
 * (GLOBAL_WORLD_SIZE, NUM_DISTINCT_PEER_GROUPS, LARGEST_PEER_GROUP_WORLD_SIZE)
 * are the counts of the master's last topology verdict over every group.
 * Returns pcclSuccess; pcclNotInitialized; pcclInvalidArgument (NULL, an
 * unknown attribute); pcclInvalidUsage (not connected).
 */
PCCL_EXPORT pcclResult_t pcclGetAttribute(const pcclComm_t *communicator, pcclAttribute_t attribute,
                                          int *p_attribute_out);

/**
 * Blocking ring all-reduce of descriptor->count elements. sendbuff ==
 * recvbuff reduces in place (restored bit-exactly on abort).
 * reduce_info_out may be NULL.
 * Returns pcclSuccess; pcclNotInitialized; pcclInvalidArgument (NULL
 * buffers, unknown dtype/op, unsupported quantization); pcclInvalidUsage
 * (not connected, the members disagree on count/dtype/op, tag in use);
 * pcclTooFewPeers; pcclRankConnectionLost (retry); pcclMasterConnectionFailed;
 * pcclTimeout (the op may still touch the buffers until the communicator
 * learns its verdict: do not reuse them before the next successful call).
 */
PCCL_EXPORT pcclResult_t pcclAllReduce(const void *sendbuff, void *recvbuff,
                                       const pcclReduceDescriptor_t *descriptor,
                                       const pcclComm_t *communicator,
                                       PCCL_NULLABLE pcclReduceInfo_t *reduce_info_out);

/**
 * Starts an all-reduce and returns; the buffers belong to the operation
 * until it is awaited. The handle is {communicator, tag}.
 * Returns pcclSuccess; pcclNotInitialized; pcclInvalidArgument (as
 * pcclAllReduce, and a tag already in flight on this communicator);
 * pcclInvalidUsage (not connected, too many operations in flight);
 * pcclTooFewPeers (this peer's group had fewer than two members at its last
 * topology update, as PCCL 1.0: returned from this call, nothing started).
 */
PCCL_EXPORT pcclResult_t pcclAllReduceAsync(const void *sendbuff, void *recvbuff,
                                            const pcclReduceDescriptor_t *descriptor,
                                            const pcclComm_t *communicator,
                                            pcclAsyncReduceOp_t *reduce_handle_out);

/**
 * Waits for an asynchronous all-reduce (bounded by the options' timeout_ms).
 * Returns the operation's result as pcclAllReduce; pcclInvalidArgument
 * (NULL, unknown handle).
 */
PCCL_EXPORT pcclResult_t pcclAwaitAsyncReduce(const pcclAsyncReduceOp_t *reduce_handle,
                                              PCCL_NULLABLE pcclReduceInfo_t *reduce_info_out);

/**
 * Waits at most timeout_ms (0: no bound) for an asynchronous all-reduce.
 * On pcclTimeout the operation is still in flight: await it again.
 * Returns as pcclAwaitAsyncReduce, or pcclTimeout.
 */
PCCL_EXPORT pcclResult_t
pcclAwaitAsyncReduceTimeout(const pcclAsyncReduceOp_t *reduce_handle, uint32_t timeout_ms,
                            PCCL_NULLABLE pcclReduceInfo_t *reduce_info_out);

/**
 * Runs count all-reduces, at most max_in_flight (<= 0 means 1) at a time,
 * retrying failed ones on the shrunken ring until all succeed. tx/rx bytes
 * are summed over the successful operations.
 * Returns pcclSuccess; pcclNotInitialized; pcclInvalidArgument;
 * pcclInvalidUsage; pcclTooFewPeers (fewer than two peers remain);
 * pcclMasterConnectionFailed; pcclTimeout.
 */
PCCL_EXPORT pcclResult_t pcclAllReduceMultipleWithRetry(
    const pcclReduceOpDescriptor_t *descriptors, size_t count, const pcclComm_t *communicator,
    PCCL_NULLABLE pcclReduceInfo_t *reduce_info_out, int max_in_flight);

/* ------------------------------------------------------------------------ */
/* The collective set beyond all-reduce (docs/collectives.md)               */
/* ------------------------------------------------------------------------ */

/*
 * Ranks: a peer's rank is its index in its group's ring of the current epoch
 * (PCCL_ATTRIBUTE_RANK, PCCL_ATTRIBUTE_EPOCH); world is
 * PCCL_ATTRIBUTE_PEER_GROUP_WORLD_SIZE. Every collective below is pinned to
 * the epoch the call reads when it starts: the caller sizes its buffers and
 * names its root for that world. When the group's membership changed before
 * every member started the op (a different epoch at any member, or at the
 * master), every member gets pcclUpdateTopologyFailed and nothing was
 * touched: update the topology, read rank and world again, retry. A member
 * lost while the op runs aborts it for every member (pcclRankConnectionLost),
 * as an all-reduce; so does (rarely) a ring that changed between the master's
 * commence and a member's start. Both are retried the same way.
 *
 * rank, world and epoch come from the communicator's last completed call:
 * they stay valid for sizing buffers until its next call completes (calls
 * of other threads on the same communicator included).
 *
 * Operations in flight: all-reduces and work objects share 16 slots per
 * communicator (a 17th is pcclInvalidUsage; a tag already in flight is
 * pcclInvalidUsage too).
 *
 * Outputs on failure: an input the op overwrites in place (a reduce at the
 * root with sendbuf == recvbuf, a reduce-scatter whose output aliases its
 * input block, an all-to-all in place) is restored bit for bit before the
 * call returns; an output that is not an input is undefined (its previous
 * contents are not kept) and never reported as a result.
 *
 * Every call has a blocking form and an ...Async form returning a work
 * object (pcclWork_t). Many may be in flight at once on distinct tags, issued
 * in any order across peers. Sizes are in elements; count is per rank where
 * the buffer holds one block per rank (world * count elements).
 */

/** A started collective (pcclWorkWait, pcclWorkIsCompleted, pcclWorkFree). Opaque. */
typedef struct pcclWork_t pcclWork_t;

/**
 * Options of one collective (NULL: every default). Versioned by its size as
 * pcclCommCreateOptions_t: initialize with PCCL_COLLECTIVE_OPTIONS_INIT.
 */
typedef struct pcclCollectiveOptions_t {
    /** sizeof(pcclCollectiveOptions_t) as the caller compiled it. */
    uint32_t struct_size;
    /**
     * Cancels the op on every member when it has not finished this many
     * milliseconds after it started here: every member's call returns
     * pcclTimeout and no buffer is touched after it returns. 0: the
     * communicator's default (environment PCCL_TIMEOUT_MS, else none).
     */
    uint32_t timeout_ms;
    /** Identifies the op among those in flight on the communicator (default 0). */
    uint64_t tag;
    /** PCCL_COLLECTIVE_* flags (default 0). */
    uint32_t flags;
    /** Must be 0. */
    uint32_t reserved;
    /**
     * pcclPremulSum: this member's factor (default 1.0); every member may pass
     * its own. Ignored by the other ops.
     */
    double premul_scalar;
    /**
     * Quantization of the traffic of pcclReduce and pcclReduceScatter (and
     * their Async and List forms), as pcclReduceDescriptor_t's for an
     * all-reduce (docs/semantics.md §3, §6). Default: algorithm pcclQuantNone
     * (quantized_datatype is then ignored). Every member must pass the same
     * algorithm and type (else pcclInvalidUsage for all). pcclInvalidArgument:
     * an algorithm other than pcclQuantNone on any other collective
     * (pcclAllReduceEx takes its quantization from its descriptor), with
     * pcclPremulSum, or an (algorithm, datatype, quantized_datatype) the
     * all-reduce refuses too. Added after the struct's first version: a
     * caller compiled with that header passes struct_size 32 (the fields up
     * to premul_scalar), which is still accepted, and gets no quantization.
     */
    pcclQuantizationOptions_t quantization_options;
    /**
     * The algorithm the op must run (a pcclAlgorithm_t; docs/algorithms.md).
     * Default pcclAlgoAuto: the group's tuned table (pcclTune), else the
     * built-in rule. Every member must pass the same (else pcclInvalidUsage
     * for all, before any data moves); one that cannot run the op (the relay
     * above the master's relay_max, direct on another kind than all-reduce or
     * above 4 MiB, any but ring / ring-striped for a quantized or PREMUL_SUM
     * op) is pcclInvalidArgument. Send / recv ignore it. Added after the
     * struct's second version (struct_size 40, up to quantization_options),
     * which is still accepted and means pcclAlgoAuto.
     */
    uint32_t algorithm;
    /** Must be 0. */
    uint32_t reserved2;
} pcclCollectiveOptions_t;

/** The algorithms of an op (docs/algorithms.md). */
typedef enum pcclAlgorithm_t {
    /** The group's tuned table for the op's size and world, else the built-in rule. */
    pcclAlgoAuto = 0,
    /** The master reduces / routes every member's input (one round trip; small ops). */
    pcclAlgoRelay = 1,
    /** All-reduce: every member gets every input and reduces them in rank order. */
    pcclAlgoDirect = 2,
    /** The ring schedule, one connection per step. */
    pcclAlgoRing = 3,
    /** The ring schedule, large steps striped over the link's connection pool. */
    pcclAlgoRingStriped = 4,
    /**
     * Recursive halving–doubling: a reduce-scatter by halving and an
     * all-gather by doubling, log2 N steps each, over the ring's links in both
     * directions. All-reduce of at least N elements at N = 2 or 4, unquantized.
     */
    pcclAlgoHalvingDoubling = 5
} pcclAlgorithm_t;

/**
 * Flag of pcclCollectiveOptions_t.flags: when the op fails or times out, the
 * library logs the call and its result and calls abort() (TorchComms'
 * abort_process_on_timeout_or_error). Also on for every op when the
 * environment has PCCL_ABORT_ON_ERROR=1 (or TORCHCOMM_ABORT_ON_ERROR=1) at
 * pcclConnect.
 */
#define PCCL_COLLECTIVE_ABORT_ON_ERROR 1u

/** An initializer of pcclCollectiveOptions_t: every option at its default. */
#define PCCL_COLLECTIVE_OPTIONS_INIT                                                               \
    {                                                                                              \
        (uint32_t)sizeof(pcclCollectiveOptions_t), 0u, 0u, 0u, 0u, 1.0,                            \
            {pcclUint8, pcclQuantNone}, 0u, 0u                                                     \
    }

/** Statistics of one finished collective. */
typedef struct pcclCollectiveInfo_t {
    /** Members of the op (the world its ranks refer to). */
    uint32_t world_size;
    /** This peer's rank in it. */
    uint32_t rank;
    /** The epoch it ran in. */
    uint64_t epoch;
    /** Bytes this peer sent and received on its links. */
    uint64_t tx_bytes;
    uint64_t rx_bytes;
} pcclCollectiveInfo_t;

/**
 * The all-reduce with the collective set's options and work object: as
 * pcclAllReduce (descriptor->tag is the tag; options' tag is ignored), plus
 * the options' timeout (cancelled on every member: pcclTimeout), abort on
 * error, and pcclPremulSum with options->premul_scalar (pcclAllReduce refuses
 * pcclPremulSum: it has no place for the factor). Its quantization is the
 * descriptor's: options->quantization_options must be pcclQuantNone (else
 * pcclInvalidArgument). Info: world_size, tx and rx
 * bytes of the op; rank and epoch as the call read them (an all-reduce is not
 * pinned to an epoch: its result does not depend on ranks).
 */
PCCL_EXPORT pcclResult_t pcclAllReduceEx(const void *sendbuff, void *recvbuff,
                                         const pcclReduceDescriptor_t *descriptor,
                                         PCCL_NULLABLE const pcclCollectiveOptions_t *options,
                                         const pcclComm_t *communicator,
                                         PCCL_NULLABLE pcclCollectiveInfo_t *info_out);
PCCL_EXPORT pcclResult_t pcclAllReduceExAsync(const void *sendbuff, void *recvbuff,
                                              const pcclReduceDescriptor_t *descriptor,
                                              PCCL_NULLABLE const pcclCollectiveOptions_t *options,
                                              const pcclComm_t *communicator,
                                              pcclWork_t **work_out);

/**
 * Broadcast: root's buf (count elements) is copied into every member's buf.
 * Returns pcclSuccess; pcclNotInitialized; pcclInvalidArgument (NULL buffer,
 * unknown dtype, root outside [0, world)); pcclInvalidUsage (not connected,
 * the members disagree on count, dtype or root, tag in flight); pcclTooFewPeers;
 * pcclUpdateTopologyFailed; pcclRankConnectionLost; pcclMasterConnectionFailed;
 * pcclTimeout.
 */
PCCL_EXPORT pcclResult_t pcclBroadcast(void *buf, size_t count, pcclDataType_t dtype, int root,
                                       PCCL_NULLABLE const pcclCollectiveOptions_t *options,
                                       const pcclComm_t *communicator,
                                       PCCL_NULLABLE pcclCollectiveInfo_t *info_out);
PCCL_EXPORT pcclResult_t pcclBroadcastAsync(void *buf, size_t count, pcclDataType_t dtype, int root,
                                            PCCL_NULLABLE const pcclCollectiveOptions_t *options,
                                            const pcclComm_t *communicator, pcclWork_t **work_out);

/**
 * Reduce: the reduction of every member's sendbuf (count elements) lands in
 * root's recvbuf (sendbuf == recvbuf: in place). recvbuf is not used on the
 * other members (may be NULL there); their sendbuf is only read.
 * Returns as pcclBroadcast, and pcclInvalidArgument for an op the dtype has
 * no kernel for (bitwise on floats) or a quantization it cannot take
 * (options->quantization_options: float dtypes into 8- or 16-bit codes, not
 * with pcclPremulSum); quantized, pcclInvalidArgument also for every member
 * when an input holds NaN or inf, and pcclInvalidUsage when the members
 * disagree on the quantization. Quantized results are deterministic but
 * lossy (docs/semantics.md §6).
 */
PCCL_EXPORT pcclResult_t pcclReduce(const void *sendbuf, void *recvbuf, size_t count,
                                    pcclDataType_t dtype, pcclRedOp_t op, int root,
                                    PCCL_NULLABLE const pcclCollectiveOptions_t *options,
                                    const pcclComm_t *communicator,
                                    PCCL_NULLABLE pcclCollectiveInfo_t *info_out);
PCCL_EXPORT pcclResult_t pcclReduceAsync(const void *sendbuf, void *recvbuf, size_t count,
                                         pcclDataType_t dtype, pcclRedOp_t op, int root,
                                         PCCL_NULLABLE const pcclCollectiveOptions_t *options,
                                         const pcclComm_t *communicator, pcclWork_t **work_out);

/**
 * All-gather: every member's sendbuf (count elements) lands in block r of
 * every member's recvbuf (world * count elements), r the sender's rank.
 * sendbuf may be block `rank` of recvbuf (in place). Returns as pcclBroadcast.
 */
PCCL_EXPORT pcclResult_t pcclAllGather(const void *sendbuf, void *recvbuf, size_t count,
                                       pcclDataType_t dtype,
                                       PCCL_NULLABLE const pcclCollectiveOptions_t *options,
                                       const pcclComm_t *communicator,
                                       PCCL_NULLABLE pcclCollectiveInfo_t *info_out);
PCCL_EXPORT pcclResult_t pcclAllGatherAsync(const void *sendbuf, void *recvbuf, size_t count,
                                            pcclDataType_t dtype,
                                            PCCL_NULLABLE const pcclCollectiveOptions_t *options,
                                            const pcclComm_t *communicator, pcclWork_t **work_out);

/**
 * Reduce-scatter: block r of the reduction of every member's sendbuf
 * (world * count elements) lands in rank r's recvbuf (count elements).
 * recvbuf may be block `rank` of sendbuf (in place). Returns as pcclReduce.
 */
PCCL_EXPORT pcclResult_t pcclReduceScatter(const void *sendbuf, void *recvbuf, size_t count,
                                           pcclDataType_t dtype, pcclRedOp_t op,
                                           PCCL_NULLABLE const pcclCollectiveOptions_t *options,
                                           const pcclComm_t *communicator,
                                           PCCL_NULLABLE pcclCollectiveInfo_t *info_out);
PCCL_EXPORT pcclResult_t
pcclReduceScatterAsync(const void *sendbuf, void *recvbuf, size_t count, pcclDataType_t dtype,
                       pcclRedOp_t op, PCCL_NULLABLE const pcclCollectiveOptions_t *options,
                       const pcclComm_t *communicator, pcclWork_t **work_out);

/**
 * All-to-all: block j of rank i's sendbuf (world * count elements) lands in
 * block i of rank j's recvbuf. sendbuf == recvbuf: in place. Returns as
 * pcclBroadcast.
 */
PCCL_EXPORT pcclResult_t pcclAllToAll(const void *sendbuf, void *recvbuf, size_t count,
                                      pcclDataType_t dtype,
                                      PCCL_NULLABLE const pcclCollectiveOptions_t *options,
                                      const pcclComm_t *communicator,
                                      PCCL_NULLABLE pcclCollectiveInfo_t *info_out);
PCCL_EXPORT pcclResult_t pcclAllToAllAsync(const void *sendbuf, void *recvbuf, size_t count,
                                           pcclDataType_t dtype,
                                           PCCL_NULLABLE const pcclCollectiveOptions_t *options,
                                           const pcclComm_t *communicator, pcclWork_t **work_out);

/**
 * Gather: every member's sendbuf (count elements) lands in block r of root's
 * recvbuf (world * count elements; not used elsewhere, may be NULL there).
 * At the root, sendbuf may be block `root` of recvbuf (in place).
 * Returns as pcclBroadcast.
 */
PCCL_EXPORT pcclResult_t pcclGather(const void *sendbuf, void *recvbuf, size_t count,
                                    pcclDataType_t dtype, int root,
                                    PCCL_NULLABLE const pcclCollectiveOptions_t *options,
                                    const pcclComm_t *communicator,
                                    PCCL_NULLABLE pcclCollectiveInfo_t *info_out);
PCCL_EXPORT pcclResult_t pcclGatherAsync(const void *sendbuf, void *recvbuf, size_t count,
                                         pcclDataType_t dtype, int root,
                                         PCCL_NULLABLE const pcclCollectiveOptions_t *options,
                                         const pcclComm_t *communicator, pcclWork_t **work_out);

/**
 * Scatter: block r of root's sendbuf (world * count elements; not used
 * elsewhere, may be NULL there) lands in rank r's recvbuf (count elements).
 * At the root, recvbuf may be block `root` of sendbuf (in place).
 * Returns as pcclBroadcast.
 */
PCCL_EXPORT pcclResult_t pcclScatter(const void *sendbuf, void *recvbuf, size_t count,
                                     pcclDataType_t dtype, int root,
                                     PCCL_NULLABLE const pcclCollectiveOptions_t *options,
                                     const pcclComm_t *communicator,
                                     PCCL_NULLABLE pcclCollectiveInfo_t *info_out);
PCCL_EXPORT pcclResult_t pcclScatterAsync(const void *sendbuf, void *recvbuf, size_t count,
                                          pcclDataType_t dtype, int root,
                                          PCCL_NULLABLE const pcclCollectiveOptions_t *options,
                                          const pcclComm_t *communicator, pcclWork_t **work_out);

/**
 * Barrier: returns once every member of the group entered it (the master's
 * vote completing is the barrier; no data moves). Returns as pcclBroadcast.
 */
PCCL_EXPORT pcclResult_t pcclBarrier(PCCL_NULLABLE const pcclCollectiveOptions_t *options,
                                     const pcclComm_t *communicator,
                                     PCCL_NULLABLE pcclCollectiveInfo_t *info_out);
PCCL_EXPORT pcclResult_t pcclBarrierAsync(PCCL_NULLABLE const pcclCollectiveOptions_t *options,
                                          const pcclComm_t *communicator, pcclWork_t **work_out);

/*
 * List variants (TorchComms all_gather, reduce_scatter, all_to_all, gather and
 * scatter over tensor lists): the same ops over `n` separate buffers of count
 * elements each, n equal to the world. They run on one contiguous staging
 * block the library allocates: the inputs are copied in when the call
 * starts, the outputs copied out when the op succeeded (before the wait
 * returns); after a failure the caller's output buffers are untouched. The
 * copies cost memory bandwidth: the single-buffer forms avoid them.
 */

/** All-gather into recvbufs[0 .. n): recvbufs[r] receives rank r's sendbuf. */
PCCL_EXPORT pcclResult_t pcclAllGatherList(const void *sendbuf, void *const *recvbufs, size_t n,
                                           size_t count, pcclDataType_t dtype,
                                           PCCL_NULLABLE const pcclCollectiveOptions_t *options,
                                           const pcclComm_t *communicator,
                                           PCCL_NULLABLE pcclCollectiveInfo_t *info_out);
PCCL_EXPORT pcclResult_t
pcclAllGatherListAsync(const void *sendbuf, void *const *recvbufs, size_t n, size_t count,
                       pcclDataType_t dtype, PCCL_NULLABLE const pcclCollectiveOptions_t *options,
                       const pcclComm_t *communicator, pcclWork_t **work_out);

/** Reduce-scatter from sendbufs[0 .. n): rank r receives the reduction of every sendbufs[r]. */
PCCL_EXPORT pcclResult_t pcclReduceScatterList(const void *const *sendbufs, size_t n, void *recvbuf,
                                               size_t count, pcclDataType_t dtype, pcclRedOp_t op,
                                               PCCL_NULLABLE const pcclCollectiveOptions_t *options,
                                               const pcclComm_t *communicator,
                                               PCCL_NULLABLE pcclCollectiveInfo_t *info_out);
PCCL_EXPORT pcclResult_t pcclReduceScatterListAsync(
    const void *const *sendbufs, size_t n, void *recvbuf, size_t count, pcclDataType_t dtype,
    pcclRedOp_t op, PCCL_NULLABLE const pcclCollectiveOptions_t *options,
    const pcclComm_t *communicator, pcclWork_t **work_out);

/** All-to-all: sendbufs[j] of rank i lands in recvbufs[i] of rank j. */
PCCL_EXPORT pcclResult_t pcclAllToAllList(const void *const *sendbufs, void *const *recvbufs,
                                          size_t n, size_t count, pcclDataType_t dtype,
                                          PCCL_NULLABLE const pcclCollectiveOptions_t *options,
                                          const pcclComm_t *communicator,
                                          PCCL_NULLABLE pcclCollectiveInfo_t *info_out);
PCCL_EXPORT pcclResult_t pcclAllToAllListAsync(const void *const *sendbufs, void *const *recvbufs,
                                               size_t n, size_t count, pcclDataType_t dtype,
                                               PCCL_NULLABLE const pcclCollectiveOptions_t *options,
                                               const pcclComm_t *communicator,
                                               pcclWork_t **work_out);

/** Gather into the root's recvbufs[0 .. n) (not used elsewhere: may be NULL there, n ignored). */
PCCL_EXPORT pcclResult_t pcclGatherList(const void *sendbuf, void *const *recvbufs, size_t n,
                                        size_t count, pcclDataType_t dtype, int root,
                                        PCCL_NULLABLE const pcclCollectiveOptions_t *options,
                                        const pcclComm_t *communicator,
                                        PCCL_NULLABLE pcclCollectiveInfo_t *info_out);
PCCL_EXPORT pcclResult_t pcclGatherListAsync(const void *sendbuf, void *const *recvbufs, size_t n,
                                             size_t count, pcclDataType_t dtype, int root,
                                             PCCL_NULLABLE const pcclCollectiveOptions_t *options,
                                             const pcclComm_t *communicator, pcclWork_t **work_out);

/** Scatter the root's sendbufs[0 .. n) (not used elsewhere: may be NULL there, n ignored). */
PCCL_EXPORT pcclResult_t pcclScatterList(const void *const *sendbufs, size_t n, void *recvbuf,
                                         size_t count, pcclDataType_t dtype, int root,
                                         PCCL_NULLABLE const pcclCollectiveOptions_t *options,
                                         const pcclComm_t *communicator,
                                         PCCL_NULLABLE pcclCollectiveInfo_t *info_out);
PCCL_EXPORT pcclResult_t pcclScatterListAsync(const void *const *sendbufs, size_t n, void *recvbuf,
                                              size_t count, pcclDataType_t dtype, int root,
                                              PCCL_NULLABLE const pcclCollectiveOptions_t *options,
                                              const pcclComm_t *communicator,
                                              pcclWork_t **work_out);

/**
 * All-to-all with split sizes (TorchComms all_to_all_v_single): rank i sends
 * send_counts[j] elements to rank j, taken consecutively from sendbuf in rank
 * order, and receives recv_counts[j] elements from rank j into recvbuf,
 * consecutively in rank order; both arrays have world entries. What i sends
 * to j must be what j expects from i: otherwise every member gets
 * pcclInvalidUsage (every member checks the whole matrix alike). The buffers
 * must not overlap. It runs as two collectives of one epoch, each with the
 * usual failure contract: an all-gather of the split sizes, then an
 * all-to-all of blocks padded to the largest size (docs/collectives.md).
 * Returns as pcclAllToAll, and pcclInvalidUsage for inconsistent sizes.
 */
PCCL_EXPORT pcclResult_t pcclAllToAllV(const void *sendbuf, const size_t *send_counts,
                                       void *recvbuf, const size_t *recv_counts,
                                       pcclDataType_t dtype,
                                       PCCL_NULLABLE const pcclCollectiveOptions_t *options,
                                       const pcclComm_t *communicator,
                                       PCCL_NULLABLE pcclCollectiveInfo_t *info_out);
PCCL_EXPORT pcclResult_t pcclAllToAllVAsync(const void *sendbuf, const size_t *send_counts,
                                            void *recvbuf, const size_t *recv_counts,
                                            pcclDataType_t dtype,
                                            PCCL_NULLABLE const pcclCollectiveOptions_t *options,
                                            const pcclComm_t *communicator, pcclWork_t **work_out);

/**
 * Point to point (TorchComms send / recv): sends count elements of sendbuf to
 * rank `peer`, which must call pcclRecv (or pcclRecvAsync) naming this rank,
 * the same tag (options->tag), count and dtype. Only the two take part; many
 * sends and receives may be in flight at once, to and from any ranks, on one
 * tag or several (a pair's send and receive of one tag are one op; the same
 * tag between other pairs, or a collective of that tag, are other ops). The
 * data goes straight from the sender to the receiver over a connection of its
 * own. Ranks are those of the epoch of the communicator's last completed call
 * (pcclCollectiveInfo_t), as for every collective.
 *
 * Returns pcclSuccess when the receiver has every byte (both calls succeed
 * together: the master's one verdict); pcclInvalidArgument for peer < 0, peer
 * >= world, peer == own rank, a NULL buffer with count > 0, an unknown dtype;
 * pcclTooFewPeers; pcclInvalidUsage when the two disagree on count or dtype
 * (both calls), or the tag is in flight here; pcclTimeout when the op's
 * timeout (or the communicator's) elapses first — also for a send whose
 * receive never comes: with no timeout at all, the master refuses it after
 * its vote timeout (60 s by default) —; pcclRankConnectionLost when the other
 * member or the link between them fails, or the group's membership changes
 * under the op; pcclUpdateTopologyFailed when the group left the epoch the
 * ranks were read in (retry after pcclUpdateTopology). On failure the
 * receive buffer's contents are undefined (never reported as a result); the
 * send buffer is never written.
 */
PCCL_EXPORT pcclResult_t pcclSend(const void *sendbuf, size_t count, pcclDataType_t dtype, int peer,
                                  PCCL_NULLABLE const pcclCollectiveOptions_t *options,
                                  const pcclComm_t *communicator,
                                  PCCL_NULLABLE pcclCollectiveInfo_t *info_out);
PCCL_EXPORT pcclResult_t pcclSendAsync(const void *sendbuf, size_t count, pcclDataType_t dtype,
                                       int peer,
                                       PCCL_NULLABLE const pcclCollectiveOptions_t *options,
                                       const pcclComm_t *communicator, pcclWork_t **work_out);
/** Receives count elements from rank `peer` into recvbuf: the other half of pcclSend. */
PCCL_EXPORT pcclResult_t pcclRecv(void *recvbuf, size_t count, pcclDataType_t dtype, int peer,
                                  PCCL_NULLABLE const pcclCollectiveOptions_t *options,
                                  const pcclComm_t *communicator,
                                  PCCL_NULLABLE pcclCollectiveInfo_t *info_out);
PCCL_EXPORT pcclResult_t pcclRecvAsync(void *recvbuf, size_t count, pcclDataType_t dtype, int peer,
                                       PCCL_NULLABLE const pcclCollectiveOptions_t *options,
                                       const pcclComm_t *communicator, pcclWork_t **work_out);

/**
 * Split (TorchComms split(ranks)): a new communicator over the ranks listed
 * (ranks of the caller's group in the epoch of its last completed call), for
 * every collective, send / recv and shared state among them, with the same
 * fault tolerance as any communicator; its ranks 0 .. n - 1 follow the
 * parent ranks' order. Called by every listed rank with the same set (any
 * order); n = 0 gives *child_out = NULL and pcclSuccess. The children join the
 * run as new peers of their own peer group (bit 31 set): every accepted peer of
 * the run must admit them — this call votes for its own parent; the group's
 * other ranks and other groups do so at their next pcclUpdateTopology, as for
 * any joining peer (pcclArePeersPending is true meanwhile). Bounded by the
 * communicator's timeout (60 s without one). Free the child with
 * pcclDestroyCommunicator (it leaves the run).
 *
 * Returns pcclSuccess with *child_out set; pcclInvalidArgument for NULL
 * arguments, a rank out of range or listed twice, or a list without the
 * caller's rank; pcclUpdateTopologyFailed when the caller is in no ring or
 * the membership changed during the split (update the topology, retry);
 * pcclTimeout when the children were not all admitted in time; the errors of
 * pcclConnect. On failure *child_out is NULL and nothing is left joined.
 */
PCCL_EXPORT pcclResult_t pcclCommSplit(pcclComm_t *communicator, const int *ranks, size_t n,
                                       pcclComm_t **child_out);

/*
 * The auto-tuner (docs/algorithms.md, docs/protocol.md §6.8.5). A group's
 * algorithm table: per collective kind, world size (2 .. 8) and size class
 * (powers of two, 1 KiB .. 256 MiB, of the op's count — per block for the
 * kinds that take blocks — times the element size) the algorithm pcclAlgoAuto
 * runs. The master keeps it for the group and sends it with every plan, so
 * every member — also one that joins later — chooses alike. A (kind, world)
 * without a tuned row uses the built-in rule.
 */

/* The kinds pcclTuneOptions_t.kinds selects (0: the all-reduce only). */
#define PCCL_TUNE_ALL_REDUCE     (1u << 0)
#define PCCL_TUNE_BROADCAST      (1u << 1)
#define PCCL_TUNE_REDUCE         (1u << 2)
#define PCCL_TUNE_ALL_GATHER     (1u << 3)
#define PCCL_TUNE_REDUCE_SCATTER (1u << 4)
#define PCCL_TUNE_ALL_TO_ALL     (1u << 5)
#define PCCL_TUNE_GATHER         (1u << 6)
#define PCCL_TUNE_SCATTER        (1u << 7)
#define PCCL_TUNE_BARRIER        (1u << 8)
#define PCCL_TUNE_ALL_KINDS      0x1FFu
typedef struct pcclTuneOptions_t {
    /** sizeof(pcclTuneOptions_t) as the caller compiled it. */
    uint32_t struct_size;
    /** Timed runs per (size, algorithm), the median kept (0: 3); sizes below 1 MiB take
     *  up to 8 times as many (1 MiB / size), and the algorithms take turns run by run. */
    uint32_t iterations;
    /** Untimed runs before them (0: 1). */
    uint32_t warmup;
    /** The kinds tuned, PCCL_TUNE_* bits (0: PCCL_TUNE_ALL_REDUCE). */
    uint32_t kinds;
    /** The smallest and largest sizes tuned (per block for the kinds that take blocks), in
     *  bytes, rounded to size classes (0: 1 KiB, and 256 MiB for the all-reduce, 16 MiB for
     *  the other kinds; the barrier has one class). */
    uint64_t min_bytes;
    uint64_t max_bytes;
} pcclTuneOptions_t;

/** An initializer of pcclTuneOptions_t: every option at its default. */
#define PCCL_TUNE_OPTIONS_INIT                                                                     \
    {                                                                                              \
        (uint32_t)sizeof(pcclTuneOptions_t), 0u, 0u, 0u, 0u, 0u                                    \
    }

/**
 * Tunes the group's ops of the kinds asked for (the all-reduce by default):
 * every member must call it with the same options, with no other op in
 * flight. For each kind, each member times every algorithm that applies at
 * each size class (float32 SUM, root 0, forced algorithms, warm-up first),
 * then the master takes each (size, algorithm)'s median over the members,
 * keeps the fastest and installs the (kind, world size) row; every member's
 * later pcclAlgoAuto ops of that kind use it. Returns pcclSuccess once the table
 * is installed (identical at every member); pcclTooFewPeers below 2 members;
 * pcclInvalidUsage above 8 members or with the master's relay off; the error
 * of a failed op (a member lost: update the topology and tune again; the
 * group keeps its previous table).
 */
PCCL_EXPORT pcclResult_t pcclTune(const pcclComm_t *communicator,
                                  PCCL_NULLABLE const pcclTuneOptions_t *options);

/** Writes the group's table as this member holds it to a text file (docs/algorithms.md). */
PCCL_EXPORT pcclResult_t pcclTuneSave(const pcclComm_t *communicator, const char *path);

/**
 * Installs every kind's row of the group's world size from a file pcclTuneSave
 * wrote (a kind the file has no row for is cleared), without timing anything:
 * every member calls it (a tuning round per kind; members that load different
 * files get the master's combination of them, still one table).
 * pcclInvalidArgument: the file is missing or malformed.
 */
PCCL_EXPORT pcclResult_t pcclTuneLoad(const pcclComm_t *communicator, const char *path);

/**
 * The algorithm a pcclAlgoAuto all-reduce of count elements of dtype would run
 * now, in the group's current world (unquantized, not PREMUL_SUM).
 */
PCCL_EXPORT pcclResult_t pcclGetAlgorithm(const pcclComm_t *communicator, size_t count,
                                          pcclDataType_t dtype, pcclAlgorithm_t *algorithm_out);

/**
 * Waits for a work object's op and returns its result; info_out (may be
 * NULL) gets its statistics on success. With a timeout (the op's, else the
 * communicator's timeout_ms) the wait is bounded by that timeout plus 5 s:
 * the timeout cancels the op on every member and the master's verdict
 * normally arrives within a round trip; only when the master is unreachable
 * does the wait give up (pcclTimeout; the op's buffers are then moved to
 * private copies, as for a timed-out all-reduce). The work object stays
 * valid (a second wait returns the same result) until pcclWorkFree.
 */
PCCL_EXPORT pcclResult_t pcclWorkWait(pcclWork_t *work,
                                      PCCL_NULLABLE pcclCollectiveInfo_t *info_out);

/**
 * Waits at most timeout_ms (0: returns at once) for the op. pcclTimeout: it
 * is still running (wait again); the op itself is not cancelled by this.
 */
PCCL_EXPORT pcclResult_t pcclWorkWaitTimeout(pcclWork_t *work, uint32_t timeout_ms,
                                             PCCL_NULLABLE pcclCollectiveInfo_t *info_out);

/** *completed_out = whether the op has finished (pcclWorkWait then returns at once). */
PCCL_EXPORT pcclResult_t pcclWorkIsCompleted(pcclWork_t *work, bool *completed_out);

/**
 * Frees a work object. A finished op's object is simply freed; a running
 * op's is first waited for (its buffers are the op's until it ends).
 * NULL is fine.
 */
PCCL_EXPORT void pcclWorkFree(pcclWork_t *work);

/**
 * Shared-state synchronization: PCCL 1.0's 4-argument function (this is the
 * exported symbol pcclSynchronizeSharedState), a collective of every
 * accepted peer of the caller's group. strategy: ENFORCE_POPULAR votes and
 * receives; RECEIVE_ONLY only receives (its content is not a candidate);
 * SEND_ONLY distributes but fails (pcclInvalidUsage, evicted) if it would
 * have to receive. The reference documentation's 3-argument form
 * pcclSynchronizeSharedState(comm, state, info) compiles too: the macro
 * below supplies ENFORCE_POPULAR.
 *
 * Each peer hashes its tensors and votes its revision; the
 * master picks the popular revision and content, and every peer whose
 * content (or revision) differs fetches the differing tensors from an
 * up-to-date peer, verifies their hashes, and only then overwrites its own
 * tensors in place. On success shared_state->revision is the group's
 * revision (a newcomer adopts it), and sync_info_out (may be NULL) has the
 * bytes this peer received (rx_bytes: 0 when it was up to date) and sent to
 * others (tx_bytes). The revision must advance by exactly 1 per successful
 * synchronization. Tensors: at most 64, unique names of 1..127 bytes, CPU
 * memory, not touched by the application during the call.
 * Returns pcclSuccess; pcclNotInitialized; pcclInvalidArgument (NULL state,
 * bad tensor info, duplicate names); pcclInvalidUsage (not connected; a
 * revision increment violation, key-set mismatch or strategy conflict: the
 * master evicts the peer); pcclNoSharedStateAvailable (only RECEIVE_ONLY
 * peers); pcclRankConnectionLost (the transfer or a peer failed: the
 * tensors are untouched, retry); pcclMasterConnectionFailed; pcclTimeout.
 */
PCCL_EXPORT pcclResult_t(pcclSynchronizeSharedState)(
    const pcclComm_t *communicator, pcclSharedState_t *shared_state,
    pcclSharedStateSyncStrategy_t strategy, PCCL_NULLABLE pcclSharedStateSyncInfo_t *sync_info_out);

/**
 * The same function as pcclSynchronizeSharedState (4 arguments), under the
 * name pccl 0.1 exported it. Kept for programs and bindings built then.
 */
PCCL_EXPORT pcclResult_t pcclSynchronizeSharedStateEx(
    const pcclComm_t *communicator, pcclSharedState_t *shared_state,
    pcclSharedStateSyncStrategy_t strategy, PCCL_NULLABLE pcclSharedStateSyncInfo_t *sync_info_out);

/*
 * pcclSynchronizeSharedState(comm, state, strategy, info) calls the function;
 * pcclSynchronizeSharedState(comm, state, info) supplies ENFORCE_POPULAR.
 * The macro picks by the number of arguments; a macro does not re-expand its
 * own name, so both expansions call the exported 4-argument function.
 * Taking the function's address (no parenthesis after the name) is not
 * affected.
 */
#define PCCL_SSS_PICK_(a, b, c, d, name, ...) name
#define PCCL_SSS3_(comm, state, info)                                                              \
    pcclSynchronizeSharedState(comm, state, PCCL_SHARED_STATE_SYNC_STRATEGY_ENFORCE_POPULAR, info)
#define pcclSynchronizeSharedState(...)                                                            \
    PCCL_SSS_PICK_(__VA_ARGS__, pcclSynchronizeSharedState, PCCL_SSS3_, pcclSSSTooFewArguments_,   \
                   pcclSSSTooFewArguments_)                                                        \
    (__VA_ARGS__)

/** Parameters of pcclCreateMasterEx. Zero fields mean the defaults. */
typedef struct pcclMasterCreateParams_t {
    /** Where to listen: "tcp://host:port" (port 0: any), "ipc:///path". NULL: 0.0.0.0:48148. */
    const char *listen_url;
    /** Heartbeat period in ms (0: 250). */
    uint32_t heartbeat_ms;
    /** Silence after which a peer is evicted, in ms (0: 2000). */
    uint32_t evict_ms;
    /** A vote waits at most this long after its first ballot, in ms (0: 60000). */
    uint32_t vote_timeout_ms;
    /** Peers tracked at most (0: 64; at most 960, the connection table less 64 slots for
     * connections that have not joined yet: more is pcclInvalidArgument). */
    uint32_t max_peers;
} pcclMasterCreateParams_t;

/**
 * Creates a master listening on listen_address (bound on return; the
 * listener is served once pcclRunMaster starts). Master functions do not
 * require pcclInit.
 * Returns pcclSuccess; pcclInvalidArgument (NULL); pcclSystemError (the port
 * is in use, out of memory).
 */
PCCL_EXPORT pcclResult_t pcclCreateMaster(ccoip_socket_address_t listen_address,
                                          pcclMasterInstance_t **p_master_handle_out);

/**
 * Creates a master from params (see pcclMasterCreateParams_t). When
 * bound_port_out is not NULL it receives the TCP port actually bound (for
 * port 0), 0 for ipc://.
 * Returns pcclSuccess; pcclInvalidArgument (NULL, bad URL, evict_ms <=
 * heartbeat_ms); pcclSystemError (listen failed).
 */
PCCL_EXPORT pcclResult_t pcclCreateMasterEx(const pcclMasterCreateParams_t *params,
                                            pcclMasterInstance_t **p_master_handle_out,
                                            PCCL_NULLABLE uint16_t *bound_port_out);

/**
 * Starts serving (non-blocking: the master runs on its own thread).
 * Returns pcclSuccess; pcclInvalidArgument (NULL); pcclInvalidUsage (already
 * running); pcclSystemError.
 */
PCCL_EXPORT pcclResult_t pcclRunMaster(pcclMasterInstance_t *master_instance);

/**
 * Asks the master to stop (closes every connection). Any thread, any time.
 * Returns pcclSuccess; pcclInvalidArgument (NULL).
 */
PCCL_EXPORT pcclResult_t pcclInterruptMaster(pcclMasterInstance_t *master_instance);

/**
 * Waits until the master stopped (after pcclInterruptMaster).
 * Returns pcclSuccess; pcclInvalidArgument (NULL).
 */
PCCL_EXPORT pcclResult_t pcclMasterAwaitTermination(pcclMasterInstance_t *master_instance);

/**
 * Frees a master (stopping it first if it still runs).
 * Returns pcclSuccess; pcclInvalidArgument (NULL).
 */
PCCL_EXPORT pcclResult_t pcclDestroyMaster(pcclMasterInstance_t *master_instance);

#ifdef __cplusplus
}
#endif

#endif /* PCCL_H */
