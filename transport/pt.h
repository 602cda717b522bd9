/*
 * pt.h — the native runtime of pccl (DESIGN.md §5): one driver thread per
 * core object (master or peer) that owns it, nng streams for the control
 * and data planes, a kernel worker thread, timers from the core's deadline.
 *
 * Threads: the driver thread is the only one that touches the core object,
 * connections and listeners. nng aio callbacks only lock, enqueue an event
 * and signal. Application threads post commands (pt_cmd_submit) and wait
 * for their completion (pt_cmd_wait); any number of threads may wait at
 * once. The runtime never calls application code.
 */
#ifndef PT_H
#define PT_H

#include <stdbool.h>
#include <stdint.h>

#include "ccoip_master.h"
#include "ccoip_peer.h"
#include "ccoip_sm.h"
#include "pccl.h"

/** The most peers a master serves (ccoip_master --max-peers, pcclMasterCreateParams_t.max_peers):
 * its connection table (1,024) less 64 slots for connections that have not joined yet. */
#define PT_MASTER_MAX_PEERS 960u

/** One core object and the threads that drive it. */
typedef struct pt_driver pt_driver;

/** Sets the stderr log threshold (CCOIP_LOG_*). Default: PCCL_LOG_LEVEL, else WARN. */
void pt_log_set_level(int level);
/** The current stderr log threshold. */
int pt_log_level(void);
/** Writes one log line to stderr when level is at or below the threshold. */
void pt_log(int level, const char *who, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/** Monotonic clock in nanoseconds (CLOCK_MONOTONIC). */
uint64_t pt_now_ns(void);

/**
 * Creates a master driver listening on listen_url (tcp://host:port with port
 * 0 allowed, ipc://path). The listener is bound on return; *bound_port
 * (may be NULL) receives the TCP port (0 for ipc). The driver thread is not
 * started: call pt_driver_start.
 * Returns pcclSuccess; pcclInvalidArgument (bad url or config);
 * pcclSystemError (listen failed, e.g. the port is in use; out of memory).
 */
pcclResult_t pt_master_create(const char *listen_url, const ccoip_master_config *cfg,
                              pt_driver **out, uint32_t *bound_port);

/**
 * Creates a peer driver and starts its thread (START is fed at once, so the
 * p2p listener is bound on return). bind_host is where the peer listens
 * ("127.0.0.1", "0.0.0.0", ...).
 * Returns pcclSuccess; pcclInvalidArgument; pcclSystemError.
 */
pcclResult_t pt_peer_create(const ccoip_peer_config *cfg, const char *bind_host, pt_driver **out);

/** Starts the driver thread of a master. pcclInvalidUsage when already started. */
pcclResult_t pt_driver_start(pt_driver *d);
/** Asks the driver thread to stop (closes every connection). Any thread; idempotent. */
void pt_driver_stop(pt_driver *d);
/** Waits for the driver thread to exit (returns at once when it never started). */
void pt_driver_join(pt_driver *d);
/** Stops, joins and frees (NULL is fine). */
void pt_driver_destroy(pt_driver *d);
/** True while the driver thread runs. */
bool pt_driver_running(pt_driver *d);

/** Result of one command, filled from the NOTIFY that completed it. */
typedef struct pt_cmd_result {
    pcclResult_t result;
    uint64_t tx_bytes;
    uint64_t rx_bytes;
    uint32_t world_size;
    bool peers_pending;
    uint64_t revision; /**< SYNC_SHARED_STATE: the revision the state now has. */
} pt_cmd_result;

/**
 * Posts a command to a peer driver. For CCOIP_CMD_ALL_REDUCE, sendbuf and
 * recvbuf (count * element size bytes each; a command of another kind:
 * cmd->allreduce.send_bytes / recv_bytes, and they may alias) stay bound to
 * the command until it completes. *handle identifies the command for pt_cmd_wait.
 * Returns pcclSuccess; pcclInvalidUsage (too many commands in flight, the
 * driver stopped).
 */
pcclResult_t pt_cmd_submit(pt_driver *d, ccoip_cmd *cmd, void *sendbuf, void *recvbuf,
                           uint64_t bytes, uint32_t *handle);

/**
 * Posts a CCOIP_CMD_SYNC_SHARED_STATE command: tensors[i] (tensor_bytes[i]
 * bytes) is the memory of key i as submitted in cmd->sync.keys (CCOIP_REGION_TENSOR,
 * span.tensor = i). The arrays are copied; the memory stays bound until the
 * command completes. Returns as pt_cmd_submit (pcclSystemError: out of memory).
 */
pcclResult_t pt_cmd_submit_sync(pt_driver *d, ccoip_cmd *cmd, void *const *tensors,
                                const uint64_t *tensor_bytes, uint32_t n, uint32_t *handle);

/**
 * Waits for a command. timeout_ms 0 waits without bound. On pcclTimeout the
 * command is abandoned (its result is discarded when it completes) unless
 * keep is true (then wait again later).
 * Returns the command's result (also in *out when not NULL), or pcclTimeout.
 */
pcclResult_t pt_cmd_wait(pt_driver *d, uint32_t handle, uint32_t timeout_ms, bool keep,
                         pt_cmd_result *out);

/** True when the command has completed (pt_cmd_wait then returns at once); never blocks. */
bool pt_cmd_poll(pt_driver *d, uint32_t handle);

/** Snapshot of a peer's state, updated by the driver after every step. */
typedef struct pt_peer_info {
    uint64_t id;
    uint32_t world_size;
    bool accepted;
    bool failed;
    bool pending;           /**< ccoip_peer_is_pending: joined, waiting to be admitted */
    ccoip_world_info world; /**< Membership counts of the last verdict (ccoip_peer_world_info). */
    /** Tensor bytes copied in memory (COPY kernels) since creation, as of the last NOTIFY. */
    uint64_t copied_bytes;
    /** ccoip_peer_rank: index in the installed ring, -1 while none (PCCL_ATTRIBUTE_RANK). */
    int32_t rank;
    /** ccoip_peer_epoch: the epoch of the last installed ring, 0 before any. */
    uint64_t epoch;
    /** ccoip_peer_algo_table and ccoip_peer_relay_max (the algorithm choice, pcclTune). */
    ccoip_algo_table algo_table;
    uint64_t relay_max;
} pt_peer_info;

/** Copies the latest peer snapshot. */
void pt_peer_info_get(pt_driver *d, pt_peer_info *out);

/** Snapshot of a master's state. */
typedef struct pt_master_info {
    uint64_t epoch;
    uint32_t accepted;
    uint32_t pending;
} pt_master_info;

/** Copies the latest master snapshot. */
void pt_master_info_get(pt_driver *d, pt_master_info *out);

#endif /* PT_H */
