/*
 * ccoip_sm.h — events in, actions out: the contract between the pure state
 * machines of core/ (ccoip_master_*, ccoip_peer_*) and whatever drives them
 * (the nng runtime in transport/, the simulator in sim/). DESIGN.md §2.
 *
 * A driver feeds events with ccoip_<m>_step(m, &ev) and then drains actions
 * with ccoip_<m>_poll(m, &act) until it returns false; it asks
 * ccoip_<m>_deadline_ns(m) when to feed the next TIMER event. Nothing in
 * core/ blocks, allocates after init, reads a clock or touches the OS: time
 * is ev.now_ns, randomness is a PRNG seeded at init.
 *
 * Ownership: event payload bytes are borrowed for the duration of the step
 * call. Action payload bytes (SEND frames, LOG text) live in the state
 * machine and stay valid until the next step call. Tensor memory is never
 * named by pointer: the core names buffers by (op slot, region, offset,
 * length) and the driver maps them onto the application's memory.
 *
 * Connections: a connection is a reliable ordered byte stream carrying
 * complete frames (docs/protocol.md §3, §7). Ids are 64-bit and never reused
 * by one state machine: connections the core opens (CONNECT actions) get ids
 * below CCOIP_CONN_ACCEPTED_BASE chosen by the core; connections the driver
 * accepts on a listener get ids at or above it chosen by the driver and
 * announced with a CONN_UP event whose `accepted` is true.
 *
 * Data connections (peer only, docs/protocol.md §8): on a p2p connection the
 * driver reads data frames (80-byte header + payload). HELLO and HELLO_ACK
 * frames (no payload) are passed to the core as RECV events (data = the 80
 * header bytes). RING_CHUNK frames never reach the core as bytes: the driver
 * matches them against the RING_RECVs the core posted on that connection:
 *   - a frame whose epoch is older than the RING_RECV's (or than any posted
 *     on the connection) is dropped; a frame of a CANCELled op is dropped;
 *   - a frame that arrives before its RING_RECV is held (the driver stops
 *     reading that connection) until a matching RING_RECV or a CANCEL of its
 *     op resolves it;
 *   - a matching frame's payload lands at dst.offset + frame.offset; the
 *     RING_RECV completes (IO_DONE, result pcclSuccess) when dst.length bytes
 *     arrived; every frame of one RING_RECV must carry the same quantization
 *     metadata, which IO_DONE reports in done.quant (the core validates it);
 *   - a frame that matches (epoch, tag, seq) but not (step, chunk), or whose
 *     offset + length exceeds the span, or whose metadata differs from the
 *     first frame's, is a protocol violation: the driver closes the
 *     connection and completes the RING_RECV with pcclProtocolError.
 * A RING_SEND writes dst-less frames: header (epoch, tag, seq, chunk, step,
 * quant) + the bytes of src, in one or more RING_CHUNK frames (the driver may
 * slice, ~1 MiB each, each frame's offset relative to the span); a zero-length
 * span is sent as one frame with length 0 (and received as such).
 * A connection broken under a pending RING_SEND/RING_RECV completes it with
 * result pcclRankConnectionLost (then CONN_CLOSED follows).
 *
 * Kernels and CANCEL: actions of one op_slot are executed in queue order.
 * CANCEL(op_slot) returns only when no pending I/O or kernel of the slot
 * touches its buffers any more (a send left half-written closes its
 * connection, DESIGN.md §2 rule 8); no IO_DONE/KERNEL_DONE is reported for
 * what it cancelled. Actions of the slot queued after the CANCEL (the buffer
 * restore) run normally.
 *
 * Changes to this contract (newest last; keep in sync with docs/core.md):
 *   v1  (lead) first draft.
 *   v2  (core) ccoip_event.remote_ip/remote_ip_len on accepted CONN_UP (the
 *       master passes the observed address on to other peers, §2);
 *       CCOIP_ACT_FINALIZE (AVG division, field `divisor`); the data
 *       connection rules above; SEND/LOG bytes valid until the next step
 *       (unchanged) -- drivers that delay delivery must copy them.
 *       OP_BEGIN is emitted at commence (not at submit): a command that fails
 *       before it has no OP_BEGIN/OP_END. NOTIFY.world_size is the peer
 *       group's size as the peer knows it when the command completes.
 *   v3  (core, issue 5; additions only, v2 semantics unchanged)
 *       CollectiveComplete.reason / REASON_NON_FINITE (docs/protocol.md §6.8).
 *       Shared-state sync: CCOIP_CMD_SYNC_SHARED_STATE takes ccoip_sync_args;
 *       the command occupies op slot `max_ops` (CCOIP_REGION_TENSOR spans,
 *       `tensor` = index of the key as submitted) and, when it must fetch,
 *       op slot `max_ops + 1` (SCRATCH only); CCOIP_ACT_HASH (KERNEL_DONE
 *       carries done.hash); CCOIP_ACT_STATE_SEND / CCOIP_ACT_STATE_RECV
 *       (STATE_DATA frames, matched like RING_CHUNK frames but on
 *       (tag, seq, chunk) of kind STATE_DATA, in either direction of a
 *       shared-state connection); STATE_REQUEST / STATE_RESPONSE frames
 *       (header + payload) are RECV events and SEND actions. The peer now
 *       LISTENs on CCOIP_LISTENER_SHARED_STATE too (after P2P). NOTIFY.revision.
 *       Topology optimization: the peer LISTENs on CCOIP_LISTENER_BANDWIDTH
 *       too (third); the driver serves that listener itself (PROBE_REQUEST ->
 *       PROBE_ACCEPT, drain PROBE_DATA, close; no CONN_UP to the core).
 *       CCOIP_ACT_PROBE measures one directed link; CCOIP_EV_PROBE_DONE
 *       reports it (done.result, done.probe_bytes, done.duration_us).
 *   v4  (core, issues 6/7; no new event or action) p2p_pool_size 1..8: a peer
 *       dials up to that many connections to the same successor endpoint
 *       (HELLO chunk = index, step = pool size) and spreads ops over them;
 *       drivers already treat every p2p connection on its own.
 *   v5  (transport, issue 7; a hint only, drivers may ignore it) A RING_RECV
 *       with reduce = true announces the REDUCE the core will emit after its
 *       IO_DONE: dst = the RING_RECV's src span, src = its dst span, red_op,
 *       dtype, count. A driver may reduce the bytes into that span as they
 *       arrive instead of landing them in dst; it then completes that REDUCE
 *       (same spans, op, type, count) without touching memory.
 *   v6  (core, issue 7) REDUCE with base.length > 0: dst = base op src
 *       (base: same length as dst, read only; may equal dst, may not
 *       otherwise overlap it); base.length == 0 keeps dst = dst op src. A
 *       RING_RECV with reduce = true announces the base too (its `base`).
 *       An out-of-place, unquantized ring all-reduce no longer copies SEND
 *       into RECV first: its reduce-scatter sends its own chunk from SEND
 *       and reduces each received chunk as RECV = SEND op received (the
 *       all-gather then fills the rest of RECV), so no byte is copied.
 *   v7  (core, issues 5/7) CCOIP_ACT_GATHER_REDUCE: the small all-reduce's
 *       rank-order reduction of all inputs in one kernel (was a COPY and
 *       N - 1 REDUCEs, each a KERNEL_DONE round trip); nothing is copied.
 *   v8  (core, issues 5/7) a RING_SEND with io_id 0 is quiet: it is written
 *       like any other but reports no IO_DONE, neither success nor failure (a
 *       broken connection shows as CONN_CLOSED, and the pending RING_RECVs on
 *       it fail as before). CANCEL drops or tears it like a pending send. The
 *       small all-reduce's gather sends are quiet: only the receive paces a
 *       step (the next step forwards the input just received, from another
 *       slot), and the op's success means every member received every input,
 *       so every send was delivered. Half the small path's I/O completions go.
 *   v9  (core, issue 7) master relay (docs/protocol.md §6.8.2). A SEND with
 *       src.length > 0 is one frame: data[0 .. len) then the bytes of span
 *       src (of op_slot, bound by OP_BEGIN); the driver reads the span when it
 *       runs the action (it may copy it; the span may change afterwards).
 *       CCOIP_ACT_WRITE: dst = data[0 .. len), run in action order before
 *       the next action (no KERNEL_DONE). A relayed all-reduce emits
 *       OP_BEGIN (no SCRATCH), the initiate as such a SEND, then WRITE of the
 *       master's result into RECV, NOTIFY, OP_END; no ring I/O, no kernel.
 *   v10 (core, issue 7; no new event or action) striping (docs/protocol.md
 *       §8.2): a large unquantized ring step emits one RING_SEND and one
 *       RING_RECV per stripe, stripe j on pool connection j, all at once;
 *       after the step's I/O one REDUCE per stripe (each the one its
 *       RING_RECV announced, v5). So one op may have several receives, sends
 *       and kernels in flight on different connections; a driver that fuses
 *       must keep one fused REDUCE per receive, not one per op slot.
 *   v11 (core, issue 20) the collective set (docs/protocol.md §6.8.3):
 *       ccoip_allreduce_args gains kind, root, pinned_epoch, send_bytes /
 *       recv_bytes and timeout_ms; a CCOIP_CMD_ALL_REDUCE command of another
 *       kind runs that collective through the same actions. SEND and RECV may
 *       differ in length (ccoip_exec_slot.send_bytes / recv_bytes, bound from
 *       the command's send_bytes / recv_bytes; all-reduce: both count * size)
 *       and may alias (in-place kinds). One step of an op may post up to two
 *       RING_RECVs with different chunks on one connection (all-to-all): a
 *       frame matches the one with its (step, chunk). Some steps of an op post
 *       only a send or only a receive.
 *   v12 (core, issue 20) pcclPremulSum: CCOIP_ACT_SCALE (dst = src * scale,
 *       a kernel like FINALIZE, sliceable by elements) premultiplies this
 *       member's input before the ring; the reductions are pcclSum's.
 *       ccoip_allreduce_args.premul carries the member's own factor (never
 *       on the wire: members may differ).
 *   v13 (core, issue 20) send / recv (docs/protocol.md §6.8.4): kinds
 *       CCOIP_COLL_SEND / CCOIP_COLL_RECV (root = the other member's rank;
 *       SEND binds only SEND, RECV only RECV). The op's data goes over a pair
 *       link the sender dials (CONNECT to the receiver's p2p listener, a
 *       HELLO marked as a pair hello) and the receiver accepts: one RING_SEND
 *       and one RING_RECV of the whole buffer on that connection, which the
 *       op closes when it ends. No new action or event.
 */
#ifndef CCOIP_SM_H
#define CCOIP_SM_H

#include <stdbool.h>
#include <stdint.h>

#include "ccoip_quant.h"
#include "pccl_types.h"

/** Connection ids at or above this value are chosen by the driver (accepted connections). */
#define CCOIP_CONN_ACCEPTED_BASE ((uint64_t)1 << 62)
/** No connection. */
#define CCOIP_CONN_NONE ((uint64_t)0)
/** No deadline (ccoip_*_deadline_ns). */
#define CCOIP_NO_DEADLINE UINT64_MAX
/** Bytes of text a LOG action carries at most (including the NUL). */
#define CCOIP_LOG_TEXT_MAX 256u

/* ------------------------------------------------------------------------ */
/* Events                                                                   */
/* ------------------------------------------------------------------------ */

typedef enum ccoip_event_type {
    /** First event: the machine starts (the peer does nothing until a SUBMIT). */
    CCOIP_EV_START = 1,
    /** One complete frame arrived on conn: data[0 .. len). */
    CCOIP_EV_RECV = 2,
    /** conn is established: a CONNECT succeeded, or the driver accepted it. */
    CCOIP_EV_CONN_UP = 3,
    /** conn is gone (closed by the remote, failed to connect, or broke). */
    CCOIP_EV_CONN_CLOSED = 4,
    /** The deadline the machine asked for has passed. */
    CCOIP_EV_TIMER = 5,
    /** The application submits a command (peer only). */
    CCOIP_EV_SUBMIT = 6,
    /** A RING_SEND or RING_RECV finished (peer only). */
    CCOIP_EV_IO_DONE = 7,
    /** A REDUCE, COPY, QUANTIZE or DEQUANTIZE finished (peer only). */
    CCOIP_EV_KERNEL_DONE = 8,
    /** A PROBE finished (peer only): done.io_id, result, probe_bytes, duration_us. */
    CCOIP_EV_PROBE_DONE = 9
} ccoip_event_type;

/** Application commands (peer only). */
typedef enum ccoip_cmd_type {
    /** pcclConnect: hello + join; completes when admitted into the ring. */
    CCOIP_CMD_CONNECT = 1,
    /** pcclUpdateTopology: vote to admit pending peers and re-wire. */
    CCOIP_CMD_UPDATE_TOPOLOGY = 2,
    /** pcclArePeersPending. */
    CCOIP_CMD_ARE_PEERS_PENDING = 3,
    /** pcclAllReduceAsync: start one all-reduce (see ccoip_allreduce_args). */
    CCOIP_CMD_ALL_REDUCE = 4,
    /** Leave the run gracefully (pcclDestroyCommunicator). */
    CCOIP_CMD_LEAVE = 5,
    /** pcclOptimizeTopology (issue 5). */
    CCOIP_CMD_OPTIMIZE_TOPOLOGY = 6,
    /** pcclSynchronizeSharedState (issue 5). */
    CCOIP_CMD_SYNC_SHARED_STATE = 7
} ccoip_cmd_type;

/** Longest shared-state key name, including the NUL. */
#define CCOIP_STATE_NAME_MAX 128u

/** One tensor of a shared-state sync (the bytes are bound at OP_BEGIN, by index). */
typedef struct ccoip_state_key {
    const char *name; /**< NUL-terminated, unique, 1 .. CCOIP_STATE_NAME_MAX - 1 bytes. */
    pcclDataType_t dtype;
    uint64_t count; /**< Elements. */
    /** Content may differ between peers: not compared, but delivered to outdated peers. */
    bool allow_content_inequality;
} ccoip_state_key;

/** Parameters of one shared-state synchronization (docs/protocol.md §6.7). */
typedef struct ccoip_sync_args {
    uint64_t revision;
    pcclSharedStateSyncStrategy_t strategy;
    uint32_t num_keys;
    /** keys[0 .. num_keys), borrowed for the SUBMIT step (the core copies them). */
    const ccoip_state_key *keys;
} ccoip_sync_args;

/** Parameters of one all-reduce. */
/**
 * What a collective does (docs/protocol.md §6.8.3; the wire's CollectiveKind). ALL_REDUCE is 0,
 * so a zeroed ccoip_allreduce_args is an all-reduce as before.
 */
typedef enum ccoip_coll_kind {
    CCOIP_COLL_ALL_REDUCE = 0,
    CCOIP_COLL_BROADCAST = 1,
    CCOIP_COLL_REDUCE = 2,
    CCOIP_COLL_ALL_GATHER = 3,
    CCOIP_COLL_REDUCE_SCATTER = 4,
    CCOIP_COLL_ALL_TO_ALL = 5,
    CCOIP_COLL_GATHER = 6,
    CCOIP_COLL_SCATTER = 7,
    CCOIP_COLL_BARRIER = 8,
    /** Point to point (docs/protocol.md §6.8.4): root is the receiver's rank. */
    CCOIP_COLL_SEND = 9,
    /** Point to point: root is the sender's rank. */
    CCOIP_COLL_RECV = 10,
    /** The tuner's round (docs/protocol.md §6.8.5): always relayed; SEND is this member's
     *  timings (CCOIP_ALGO_TIMINGS float32), RECV the group's encoded algorithm table. */
    CCOIP_COLL_TUNE = 11
} ccoip_coll_kind;

/** Number of the group-wide kinds (ALL_REDUCE .. BARRIER): every member of the group takes part. */
#define CCOIP_COLL_KINDS 9u
/** Number of ccoip_coll_kind values (the group-wide kinds, SEND and RECV, then TUNE). */
#define CCOIP_COLL_KINDS_ALL 12u

typedef struct ccoip_allreduce_args {
    uint64_t tag;
    /** Elements: of the tensor (all-reduce, broadcast, reduce), else of one block
     *  (ccoip_coll_sizes). */
    uint64_t count;
    pcclDataType_t dtype;
    pcclRedOp_t op;
    /** Quantization of the traffic: all-reduce, and (contract v11) reduce and reduce-scatter,
     *  whose reducing steps send codes (docs/semantics.md §6); pcclQuantNone for the others. */
    pcclQuantizationAlgorithm_t quant_algorithm;
    pcclDataType_t quant_dtype;
    /**
     * sendbuf == recvbuf (all-reduce; for the other kinds the aliasing ccoip_coll_sizes
     * describes): the core keeps a backup where the op overwrites its input, and restores it
     * on abort.
     */
    bool in_place;
    /* ---- contract v11 (issue 20): the collective set ---- */
    ccoip_coll_kind kind; /**< 0: all-reduce */
    uint32_t root;        /**< broadcast, reduce, gather, scatter: the root's rank; send / recv: the
                               other member's rank */
    /**
     * The epoch whose ring the caller sized its buffers and named its root for (0: not pinned,
     * the all-reduce's). Every kind but ALL_REDUCE must be pinned; the master refuses the op
     * for every member (pcclUpdateTopologyFailed) unless every member pinned the group's
     * current epoch.
     */
    uint64_t pinned_epoch;
    /** The bytes of SEND and RECV the caller bound (must equal ccoip_coll_sizes). */
    uint64_t send_bytes, recv_bytes;
    /** The world of the pinned epoch's ring (the relay decision, ccoip_coll_relay_use). */
    uint32_t world;
    /**
     * Cancels the op on every member when it has not ended this long after its submission
     * (CollectiveCancel, §6.8.3): every member's command then completes with pcclTimeout.
     * 0: no timeout.
     */
    uint32_t timeout_ms;
    /** op pcclPremulSum: this member's factor (v12); every member may have its own. */
    double premul;
    /** The algorithm the caller forces (ccoip_algo, docs/algorithms.md; v13); 0: AUTO, the
     *  group's table or the rule. One that cannot run the op: pcclInvalidArgument. */
    uint32_t algorithm;
    /** Every member forces the same algorithm by construction (the tuner's runs): the op may
     *  start optimistically like an AUTO one (a forced op otherwise waits for the commence, so
     *  that members that disagree are refused before any data moves). */
    bool algo_agreed;
} ccoip_allreduce_args;

/** A command from the application. */
typedef struct ccoip_cmd {
    ccoip_cmd_type type;
    /** Chosen by the driver; echoed in the NOTIFY that completes the command. */
    uint64_t cmd_id;
    ccoip_allreduce_args allreduce; /**< CCOIP_CMD_ALL_REDUCE. */
    ccoip_sync_args sync;           /**< CCOIP_CMD_SYNC_SHARED_STATE. */
} ccoip_cmd;

/** Completion of a RING_SEND / RING_RECV, or of a kernel. */
typedef struct ccoip_done {
    /** The `io_id` of the action that finished. */
    uint64_t io_id;
    /** pcclSuccess, or why it failed (the connection broke: pcclRankConnectionLost). */
    pcclResult_t result;
    /** RING_RECV: the quantization metadata that came in the frame header. */
    ccoip_quant_meta quant;
    /** QUANTIZE: the metadata computed for the codes. */
    ccoip_quant_meta quant_out;
    /** HASH: ccoip_hash_tensor of the span (name, dtype, count of the action). */
    uint64_t hash;
    /** PROBE_DONE: bytes the target acknowledged and the time they took (integers). */
    uint64_t probe_bytes;
    uint64_t duration_us;
} ccoip_done;

/** One input to a state machine. */
typedef struct ccoip_event {
    ccoip_event_type type;
    /** Monotonic time in nanoseconds; never decreases between events. */
    uint64_t now_ns;
    /** RECV, CONN_UP, CONN_CLOSED: the connection. */
    uint64_t conn;
    /** CONN_UP: true when the driver accepted conn on a listener. */
    bool accepted;
    /** CONN_UP on an accepted connection: which listener (a ccoip_listener value). */
    uint32_t listener;
    /**
     * CONN_UP on an accepted connection: the remote address as observed
     * (4 bytes IPv4 or 16 bytes IPv6; remote_ip_len 0 when unknown, e.g. ipc://).
     * The master hands it to other peers as the endpoint's ip (docs/protocol.md §2).
     */
    uint8_t remote_ip[16];
    uint32_t remote_ip_len;
    /** RECV: the frame (borrowed for the call). */
    const uint8_t *data;
    uint64_t len;
    /** SUBMIT. */
    ccoip_cmd cmd;
    /** IO_DONE, KERNEL_DONE. */
    ccoip_done done;
} ccoip_event;

/* ------------------------------------------------------------------------ */
/* Actions                                                                  */
/* ------------------------------------------------------------------------ */

typedef enum ccoip_action_type {
    /** Write the frame data[0 .. len) to conn (in order with earlier SENDs on conn); with
     * src.length > 0 the frame goes on with the bytes of span src (v9). */
    CCOIP_ACT_SEND = 1,
    /** Open connection conn to endpoint (url or ip:port). CONN_UP or CONN_CLOSED follows. */
    CCOIP_ACT_CONNECT = 2,
    /** Start listening (listener kind); the driver reports the bound port with ccoip_peer_set_port.
     */
    CCOIP_ACT_LISTEN = 3,
    /** Close conn. No CONN_CLOSED event follows for it. */
    CCOIP_ACT_CLOSE = 4,
    /** Complete an application command (cmd_id) with a result. */
    CCOIP_ACT_NOTIFY = 5,
    /** Send a data frame: header fields + bytes of a buffer span (zero-copy). IO_DONE follows. */
    CCOIP_ACT_RING_SEND = 6,
    /** Receive a data frame whose header matches into a buffer span. IO_DONE follows. */
    CCOIP_ACT_RING_RECV = 7,
    /** dst = dst op src over count elements, or dst = base op src when base.length > 0 (v6).
     * KERNEL_DONE follows. */
    CCOIP_ACT_REDUCE = 8,
    /** dst = src, bytes. KERNEL_DONE follows. */
    CCOIP_ACT_COPY = 9,
    /** Quantize src into codes at dst (compute the metadata). KERNEL_DONE carries it. */
    CCOIP_ACT_QUANTIZE = 10,
    /** dst (op)= dequantize(codes at src, quant); op COPY semantics when reduce is false. */
    CCOIP_ACT_DEQUANTIZE = 11,
    /** Abandon every pending RING_SEND/RING_RECV/kernel of op_slot; no IO_DONE for them. */
    CCOIP_ACT_CANCEL = 12,
    /** A log line (text, NUL-terminated) at level. */
    CCOIP_ACT_LOG = 13,
    /**
     * An all-reduce command (cmd_id) now occupies op_slot: the driver binds
     * the command's send/recv buffers to the slot and provides scratch_bytes
     * of SCRATCH and, when backup_bytes > 0, that much BACKUP.
     */
    CCOIP_ACT_OP_BEGIN = 14,
    /** op_slot is free again; its regions may be released. */
    CCOIP_ACT_OP_END = 15,
    /**
     * Finish an AVG: dst (count elements of dtype) /= divisor, by
     * ccoip_reduce_finalize_avg. red_op is pcclAvg. KERNEL_DONE follows.
     */
    CCOIP_ACT_FINALIZE = 16,
    /**
     * hash = ccoip_hash_tensor({name = data[0 .. len), dtype, count, bytes of src});
     * KERNEL_DONE carries it in done.hash.
     */
    CCOIP_ACT_HASH = 17,
    /**
     * Send the bytes of src as STATE_DATA frames on conn (header: epoch, tag,
     * seq, chunk; offsets relative to src; zero bytes: one empty frame). IO_DONE follows.
     */
    CCOIP_ACT_STATE_SEND = 18,
    /**
     * Receive STATE_DATA frames of (tag, seq, chunk) on conn into dst; IO_DONE when
     * dst.length bytes arrived. Frames are held until posted; a frame that does not
     * fit (offset + length beyond dst) is a protocol violation (close, pcclProtocolError).
     */
    CCOIP_ACT_STATE_RECV = 19,
    /**
     * Measure the link to a peer's bandwidth endpoint (ip/ip_len/port, or the url in
     * data/len): connect, PROBE_REQUEST (see
     * docs/protocol.md §8.4), send `count` bytes of PROBE_DATA, time until the target
     * closes. `tag` = the target's peer id. CCOIP_EV_PROBE_DONE follows (result
     * pcclRankConnectionFailed when it could not connect or was cut off).
     */
    CCOIP_ACT_PROBE = 20,
    /**
     * The small all-reduce's reduction (v7): dst (count elements of dtype) =
     * x_0 op x_1 op ... op x_{divisor-1}, left to right (rank order), by
     * ccoip_reduce_gather, where x_k is the k-th of `divisor` consecutive
     * slots of dst.length bytes in `base`, except x_chunk = src (this peer's
     * own input). AVG is not divided here (FINALIZE follows). KERNEL_DONE follows.
     */
    CCOIP_ACT_GATHER_REDUCE = 21,
    /** dst = data[0 .. len) (len = dst.length), at once, in action order (v9). No KERNEL_DONE. */
    CCOIP_ACT_WRITE = 22,
    /**
     * PREMUL_SUM's premultiplication (v12): dst = src * scale over count elements of dtype (a
     * float type), by ccoip_reduce_scale; dst equal to src or disjoint. KERNEL_DONE follows.
     */
    CCOIP_ACT_SCALE = 23,
    /**
     * Master only (docs/protocol.md §8.6): from now on forward every byte read on conn to the
     * connection `tag` and back; nothing of either reaches the core any more but their
     * CONN_CLOSED (when one closes, the transport closes the other).
     */
    CCOIP_ACT_SPLICE = 24
} ccoip_action_type;

/** Buffers of one collective operation, named by region. */
typedef enum ccoip_region {
    CCOIP_REGION_SEND = 1,    /**< The application's send buffer (read only). */
    CCOIP_REGION_RECV = 2,    /**< The application's receive buffer (the result). */
    CCOIP_REGION_SCRATCH = 3, /**< Driver-owned staging, at least scratch_bytes of the op. */
    CCOIP_REGION_BACKUP = 4,  /**< Driver-owned copy of RECV for in-place restore. */
    CCOIP_REGION_TENSOR = 5   /**< Shared-state tensor `tensor` of a SYNC command (read/write). */
} ccoip_region;

/** A byte span of a region of one op. */
typedef struct ccoip_span_ref {
    uint32_t op_slot; /**< Which in-flight operation (0 .. max_ops-1). */
    ccoip_region region;
    uint64_t offset; /**< Bytes. */
    uint64_t length; /**< Bytes. */
    uint32_t tensor; /**< CCOIP_REGION_TENSOR: the key's index as submitted. */
} ccoip_span_ref;

/** Listener kinds a peer opens. */
typedef enum ccoip_listener {
    CCOIP_LISTENER_P2P = 0,
    CCOIP_LISTENER_SHARED_STATE = 1,
    CCOIP_LISTENER_BANDWIDTH = 2
} ccoip_listener;

/** Log levels of LOG actions. */
typedef enum ccoip_log_level {
    CCOIP_LOG_ERROR = 0,
    CCOIP_LOG_WARN = 1,
    CCOIP_LOG_INFO = 2,
    CCOIP_LOG_DEBUG = 3
} ccoip_log_level;

/** One output of a state machine. Fields not used by a type are zero. */
typedef struct ccoip_action {
    ccoip_action_type type;
    uint64_t conn;

    /* SEND: the frame. LOG: text (NUL-terminated, len excludes it). CONNECT: url. */
    const uint8_t *data;
    uint64_t len;

    /* CONNECT: endpoint as ip (4 or 16 bytes) + port when url is empty. */
    uint8_t ip[16];
    uint32_t ip_len;
    uint32_t port;

    /* LISTEN. */
    ccoip_listener listener;

    /* NOTIFY. */
    uint64_t cmd_id;
    pcclResult_t result;
    uint64_t tx_bytes;
    uint64_t rx_bytes;
    uint32_t world_size; /**< Group world size after the command (all commands). */
    bool peers_pending;  /**< ARE_PEERS_PENDING. */
    uint64_t revision;   /**< SYNC_SHARED_STATE success: the revision the state now has. */

    /* RING_SEND / RING_RECV / kernels. */
    uint64_t io_id; /**< Echoed in IO_DONE / KERNEL_DONE. */
    uint32_t op_slot;
    ccoip_span_ref src;
    ccoip_span_ref dst;
    /* RING_SEND: header fields to write; RING_RECV: header fields to expect. */
    uint64_t epoch;
    uint64_t tag;
    uint64_t seq;
    uint32_t chunk;
    uint32_t step;
    ccoip_quant_meta quant; /**< RING_SEND / DEQUANTIZE: metadata of the codes. */
    /* REDUCE / DEQUANTIZE. */
    ccoip_span_ref base; /**< REDUCE (and RING_RECV announcing one): dst = base op src (v6);
                          *   GATHER_REDUCE: the inputs' slots (v7). */
    pcclRedOp_t red_op;
    pcclDataType_t dtype;
    uint64_t count; /**< Elements. */
    bool reduce;    /**< DEQUANTIZE: accumulate (true) or overwrite (false). */
    /* OP_BEGIN: bytes of SCRATCH and BACKUP the op needs. */
    uint64_t scratch_bytes;
    uint64_t backup_bytes;
    /* FINALIZE: the number of contributions (the ring's world size). */
    uint32_t divisor;
    /* SCALE: the factor (v12). */
    double scale;

    /* LOG. */
    ccoip_log_level level;
} ccoip_action;

/**
 * Whether a GATHER_REDUCE's fields fit together (v7): a valid dtype, divisor >= 1, chunk <
 * divisor, dst.length = count elements, src.length = dst.length and base.length = divisor
 * slots of dst.length. Every driver checks this before it resolves the spans and runs
 * ccoip_reduce_gather.
 */
bool ccoip_action_gather_ok(const ccoip_action *a);

#endif /* CCOIP_SM_H */
