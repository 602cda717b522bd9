/*
 * ccoip_peer.h — a CCoIP peer (one communicator) as a pure state machine
 * (DESIGN.md §2–3, docs/core.md §3). Events in (ccoip_sm.h), actions out.
 *
 * Life: START → LISTEN(P2P) (the driver binds and calls ccoip_peer_set_port
 * before the next step) → SUBMIT CONNECT → CONNECT(master) → hello, join,
 * pending → admitted (NOTIFY of the CONNECT command). Then commands
 * (UPDATE_TOPOLOGY, ARE_PEERS_PENDING, ALL_REDUCE, LEAVE) each complete with
 * exactly one NOTIFY carrying their cmd_id. Re-wiring after a membership
 * change runs without a command (the master pushes a TopologyPlan).
 *
 * Connection ids chosen by the peer: CCOIP_PEER_MASTER_CONN for the master,
 * then 2, 3, ... for p2p dials (never reused).
 *
 * Thread-safety: none; one driver thread owns a ccoip_peer.
 */
#ifndef CCOIP_PEER_H
#define CCOIP_PEER_H

#include <stdbool.h>
#include <stdint.h>

#include "ccoip_algo.h"
#include "ccoip_auth.h"
#include "ccoip_sm.h"
#include "pccl_types.h"

/** The connection id of the control connection to the master. */
#define CCOIP_PEER_MASTER_CONN ((uint64_t)1)
/** Largest p2p_pool_size (connections per ring neighbour). */
#define CCOIP_P2P_POOL_MAX 8u
/** Longest master URL / endpoint URL the peer stores. */
#define CCOIP_URL_MAX 256u

/** Configuration of a peer. Zero fields take the documented defaults. */
typedef struct ccoip_peer_config {
    /** Master endpoint for the CONNECT action: a URL (NUL-terminated, copied) ... */
    const char *master_url;
    /** ... or, when master_url is NULL or empty, an address (4 or 16 bytes) and port. */
    uint8_t master_ip[16];
    uint32_t master_ip_len;
    uint32_t master_port;
    /** Peer group (collectives and shared state are scoped to it). */
    uint32_t peer_group;
    /** Join.ring_key (docs/protocol.md §6.3): the group's ring lists its members by (ring_key,
     *  peer id); 0 (default) everywhere is the order by peer id. */
    uint32_t ring_key;
    /**
     * Connections per ring neighbour, 1 .. CCOIP_P2P_POOL_MAX (default 1). Each
     * directed link uses min(dialer's, acceptor's) (agreed in the HELLO); an op
     * with sequence number seq uses connection seq mod that size.
     */
    uint32_t p2p_pool_size;
    /** Concurrent collective operations at most. Default 16. */
    uint32_t max_ops;
    /** Largest ring (peers of the group) the peer can take part in. Default 1024. */
    uint32_t max_world;
    /** Actions queued at most between two steps. Default 64 * max_ops + 256. */
    uint32_t action_queue_depth;
    /** Bytes of SEND/LOG payload per step. Default 64 KiB + 16 * max_world. */
    uint64_t out_bytes;
    /** Largest control payload accepted. Default 1 MiB. */
    uint64_t max_message_bytes;
    /** Shared-state keys per sync at most. Default 64. */
    uint32_t max_state_keys;
    /** Heartbeat period until the master's HelloResult says otherwise. Default 250. */
    uint32_t heartbeat_ms;
    /** Master silence that fails the peer, until HelloResult says otherwise. Default 2000. */
    uint32_t evict_ms;
    /**
     * TEST ONLY (canary): when true an aborted in-place all-reduce does not
     * restore the application's buffer from BACKUP, breaking "in-place
     * buffers are restored bit-exactly on abort" so that the simulator's
     * checkers can be shown to catch it. Never set outside tests.
     */
    bool canary_skip_restore;
    /**
     * Optional decode arena borrowed from the caller (NULL: the peer allocates its own): at
     * least ccoip_peer_decode_arena_bytes(cfg) bytes, used only while a step of this peer runs
     * and never read again after it, so machines stepped one at a time (the simulator) may share
     * one. It must outlive the peer. Not part of a trace header (behaviour does not depend on it).
     */
    uint8_t *decode_arena;
    uint64_t decode_arena_bytes;
    /**
     * Authenticated runs (docs/protocol.md §6.1.1, §8.0; all zero: off). With a MAC set the peer
     * proves the run key to the master and requires the master's proof, challenges every
     * accepted p2p and shared-state connection and accepts only proofs of the keys the master
     * issued for that epoch or round. Not part of a trace header: a trace of an authenticated
     * run does not replay (its keys are never written).
     */
    ccoip_auth_config auth;
} ccoip_peer_config;

typedef struct ccoip_peer ccoip_peer;

/** Bytes of decode arena a peer created with cfg (defaults applied) needs. */
uint64_t ccoip_peer_decode_arena_bytes(const ccoip_peer_config *cfg);

/** Fills *cfg with the defaults (all zero fields resolved; master_url stays NULL). */
void ccoip_peer_config_default(ccoip_peer_config *cfg);

/**
 * Allocates and initializes a peer. Zero fields of cfg take their defaults.
 * Returns pcclSuccess; pcclInvalidArgument for NULL cfg/out, a master_url
 * longer than CCOIP_URL_MAX - 1, no master endpoint, p2p_pool_size > CCOIP_P2P_POOL_MAX;
 * pcclSystemError when memory cannot be allocated.
 */
pcclResult_t ccoip_peer_create(const ccoip_peer_config *cfg, uint64_t seed, ccoip_peer **out);

/** Frees a peer (NULL is fine). */
void ccoip_peer_destroy(ccoip_peer *p);

/**
 * Feeds one event. Never blocks. Input from the master or other peers never
 * fails the step: a malformed master frame fails the peer
 * (pcclMasterConnectionFailed for every command), a malformed p2p frame
 * closes that connection.
 * Returns pcclSuccess; pcclInvalidArgument for NULL arguments or an event
 * type the peer does not know (IO_DONE/KERNEL_DONE with an unknown io_id are
 * ignored with a LOG line); pcclInternalError when the action queue
 * overflowed.
 */
pcclResult_t ccoip_peer_step(ccoip_peer *p, const ccoip_event *ev);

/** Takes the next action; false when none is left. Payload bytes live until the next step. */
bool ccoip_peer_poll(ccoip_peer *p, ccoip_action *out);

/** When to feed the next TIMER event (absolute ns); CCOIP_NO_DEADLINE when none. */
uint64_t ccoip_peer_deadline_ns(const ccoip_peer *p);

/**
 * ccoip_peer_poll without the copy, for drivers that run each action before stepping the
 * machine again (the simulator, docs/simulator.md "Scale"): the same queue in the same order.
 * Returns the oldest queued action, or NULL when the queue is empty or p is NULL. The action
 * (the struct) stays valid until the machine's next step, which may reuse its slot; its payload
 * bytes, like a polled action's, until the next step.
 */
const ccoip_action *ccoip_peer_poll_ref(ccoip_peer *p);

/**
 * A hint for drivers of many machines; no effect on behaviour or output. Starts loading the
 * parts of p's memory its next step reads first: stage 0 reads nothing of p (the record's first
 * lines: action queue, clock, state, table pointers); stage 1, to be called once those are
 * loaded, the op table. A NULL p or a compiler without prefetch builtins: nothing.
 */
void ccoip_peer_prefetch(const ccoip_peer *p, int stage);

/**
 * The driver reports where a LISTEN action bound: port (and url when the
 * endpoint must be reached by URL, e.g. ipc://; NULL otherwise). Call it
 * after draining the LISTEN and before the next step.
 * Returns pcclSuccess, or pcclInvalidArgument (unknown listener, url too long).
 */
pcclResult_t ccoip_peer_set_port(ccoip_peer *p, ccoip_listener listener, uint32_t port,
                                 const char *url);

/* Introspection for tests, checkers and logs. */

/** The id the master assigned (0 before hello completes). */
uint64_t ccoip_peer_id(const ccoip_peer *p);
/** Epoch of the ring the peer runs collectives on (0 before admission). */
uint64_t ccoip_peer_epoch(const ccoip_peer *p);
/** The group's tuned all-reduce table as this peer holds it (§6.8.5; all AUTO: none). */
void ccoip_peer_algo_table(const ccoip_peer *p, ccoip_algo_table *out);
/** The master's relay limit (HelloResult.relay_max_bytes; 0: relay off). */
uint64_t ccoip_peer_relay_max(const ccoip_peer *p);
/**
 * This peer's rank: its index in the ring of the last successful TopologyVerdict
 * (ccoip_peer_epoch), or -1 while no ring is installed (before admission, from a
 * TopologyPlan until its verdict, after a failed verdict, after failing). PCCL_ATTRIBUTE_RANK.
 */
int32_t ccoip_peer_rank(const ccoip_peer *p);
/** True once admitted and not failed. */
bool ccoip_peer_is_accepted(const ccoip_peer *p);
/** True between its JoinResult and its admission: joined, its admission vote sent. */
bool ccoip_peer_is_pending(const ccoip_peer *p);
/** True after the master was lost or evicted this peer. */
bool ccoip_peer_is_failed(const ccoip_peer *p);
/** Group world size as last told by the master. */
uint32_t ccoip_peer_world_size(const ccoip_peer *p);
/** Membership counts (pcclGetAttribute): DESIGN.md §3 "Peer groups". */
typedef struct ccoip_world_info {
    uint32_t global;             /**< accepted peers, all groups */
    uint32_t peer_group;         /**< accepted peers of this peer's group (CURRENT_WORLD_SIZE) */
    uint32_t num_peer_groups;    /**< groups with at least one accepted peer */
    uint32_t largest_peer_group; /**< accepted peers of the largest group */
} ccoip_world_info;
/**
 * The counts of the last TopologyVerdict (or JoinResult before admission);
 * peer_group equals ccoip_peer_world_size.
 */
void ccoip_peer_world_info(const ccoip_peer *p, ccoip_world_info *out);
/**
 * All-reduces this peer started optimistically (docs/protocol.md §6.8.1: the ring ran from the
 * initiate, without waiting for the master's commence), and those that joined an optimistic
 * ring through a commence with seq 0.
 */
uint64_t ccoip_peer_optimistic_starts(const ccoip_peer *p);
uint64_t ccoip_peer_optimistic_joins(const ccoip_peer *p);
/** All-reduces this peer had reduced by the master relay (docs/protocol.md §6.8.2). */
uint64_t ccoip_peer_relayed_ops(const ccoip_peer *p);
/** The op slot a SYNC_SHARED_STATE command occupies (tensors); scratch is this + 1. */
uint32_t ccoip_peer_sync_slot(const ccoip_peer *p);

#endif /* CCOIP_PEER_H */
