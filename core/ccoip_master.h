/*
 * ccoip_master.h — the CCoIP master as a pure state machine (DESIGN.md §2–3,
 * docs/core.md §2). Events in (ccoip_sm.h), actions out; no I/O, no clock.
 * Memory: every table is allocated by ccoip_master_create except the pool of
 * collective operations, which grows on demand (master_collective.c) and is
 * bounded by max_ops per peer times max_peers, so no remote can make it grow
 * without limit; a failed growth refuses the initiate (RESOURCE_LIMIT).
 *
 * The driver listens for control connections itself (the master emits no
 * LISTEN) and reports each accepted connection with CONN_UP (accepted = true,
 * remote_ip = the observed address), every complete control frame with RECV,
 * and every closed connection with CONN_CLOSED. The master answers with SEND
 * and CLOSE actions and LOG lines; it never emits NOTIFY, CONNECT, ring or
 * kernel actions.
 *
 * Thread-safety: none; one driver thread owns a ccoip_master.
 */
#ifndef CCOIP_MASTER_H
#define CCOIP_MASTER_H

#include <stdbool.h>
#include <stdint.h>

#include "ccoip_auth.h"
#include "ccoip_sm.h"
#include "pccl_types.h"

/** Configuration of a master. Zero fields take the documented defaults. */
typedef struct ccoip_master_config {
    /** Peers (connections) tracked at most; a further connection is closed. Default 64. */
    uint32_t max_peers;
    /** Collective operations (votes and running) one peer may be in at once; a further
     *  initiate gets INVALID_USAGE/RESOURCE_LIMIT. The op pool itself grows on demand.
     *  Default 64. */
    uint32_t max_ops;
    /** Actions queued at most between two steps. Default max_peers * (max_ops + 8) + 256. */
    uint32_t action_queue_depth;
    /** Bytes of SEND/LOG payload per step. Default 64 KiB + max_peers * (1024 + 24 * max_peers). */
    uint64_t out_bytes;
    /** Largest control payload accepted (codec limit). Default 1 MiB. */
    uint64_t max_message_bytes;
    /** Heartbeat period sent in HelloResult and used by the master. Default 250. */
    uint32_t heartbeat_ms;
    /** Silence after which a peer is evicted. Default 2000. */
    uint32_t evict_ms;
    /** A vote waits at most this long after its first ballot. Default 60000. */
    uint32_t vote_timeout_ms;
    /** Shared-state keys per sync vote at most. Default 64. */
    uint32_t max_state_keys;
    /** Bytes each bandwidth probe sends (BandwidthProbeRequests.probe_bytes). Default 1 MiB. */
    uint64_t probe_bytes;
    /** Hamiltonian-cycle search budget (expansions) per group ring. Default 100000. */
    uint32_t ring_search_budget;
    /**
     * Smallest group that may run a collective; smaller gets STATUS_TOO_FEW_PEERS
     * (DESIGN.md §3). Default 2. Tests set 1 to exercise the one-peer ring.
     */
    uint32_t min_collective_world;
    /**
     * TEST ONLY (canary): when true the master does not send abort verdicts
     * (it still marks them sent), breaking "exactly one verdict per op and
     * member" so that the simulator's checkers can be shown to catch it.
     * Never set outside tests.
     */
    bool canary_skip_abort_verdict;
    /**
     * Master relay (docs/protocol.md §6.8.2): an unquantized all-reduce of at most this many
     * bytes per input is reduced by the master (told to peers in HelloResult; clamped to
     * CCOIP_RELAY_MAX_BYTES, 64 KiB). 0 (the core's default): never. The runtime's master
     * (`ccoip_master --relay-max-bytes`) defaults to 32 KiB. Lowered so that one op's answers
     * to max_peers members fit out_bytes (out_bytes / max_peers - 256; the default out_bytes
     * makes room).
     */
    uint32_t relay_max_bytes;
    /**
     * Sessions from one observed address (CONN_UP.remote_ip) that have not joined yet (saying
     * hello, or hello answered and no Join yet) at most; a further connection from that address
     * is closed at once (docs/protocol.md §6.1). Connections without an observed address
     * (ipc://) are not counted. Default 16; UINT32_MAX: no limit.
     */
    uint32_t max_unjoined_per_addr;
    /**
     * Authenticated runs (docs/protocol.md §6.1.1; all zero: off). With a MAC set the master
     * proves the run key in HelloResult, admits a Join only with the peer's proof
     * (REASON_AUTH_FAILED otherwise), and issues each epoch's link keys and each sync round's
     * state key from its secret. Not part of a trace header.
     */
    ccoip_auth_config auth;
} ccoip_master_config;

typedef struct ccoip_master ccoip_master;

/** Fills *cfg with the defaults (all zero fields resolved). */
void ccoip_master_config_default(ccoip_master_config *cfg);

/**
 * Allocates and initializes a master. cfg NULL means the defaults; zero
 * fields of cfg take their defaults. seed feeds the master's PRNG (peer ids
 * are a counter starting at 1 and do not depend on it).
 * Returns pcclSuccess; pcclInvalidArgument for out == NULL or an invalid
 * configuration (max_peers above 1 << 20, evict_ms <= heartbeat_ms, ...);
 * pcclSystemError when memory cannot be allocated.
 */
pcclResult_t ccoip_master_create(const ccoip_master_config *cfg, uint64_t seed, ccoip_master **out);

/** The master's listener for the relay (docs/protocol.md §8.6); its control listener is 0. */
#define CCOIP_MASTER_LISTENER_RELAY 1u

/**
 * The relay (docs/protocol.md §8.6): the driver listens on `port` (its listener
 * CCOIP_MASTER_LISTENER_RELAY, on the control listener's host) and the master plans links that
 * neither end can dial through it. 0 (the default): no relay; such pairs are not linked.
 */
void ccoip_master_set_relay_port(ccoip_master *m, uint32_t port);

/** Frees a master (NULL is fine). Pending actions are discarded. */
void ccoip_master_destroy(ccoip_master *m);

/**
 * Feeds one event. Never blocks. Afterwards drain ccoip_master_poll.
 * Remote input never fails the step: a malformed or illegal frame evicts
 * the peer that sent it (with a LOG line).
 * Returns pcclSuccess; pcclInvalidArgument for a NULL argument or an event
 * the master does not take (SUBMIT, IO_DONE, KERNEL_DONE, an unknown type,
 * a RECV/CONN_CLOSED on an unknown connection is ignored with a LOG line and
 * is not an error); pcclInternalError when a bounded table or the action
 * queue overflowed (the master dropped output; it is no longer reliable).
 */
pcclResult_t ccoip_master_step(ccoip_master *m, const ccoip_event *ev);

/** Takes the next action; false when none is left. Payload bytes live until the next step. */
bool ccoip_master_poll(ccoip_master *m, ccoip_action *out);

/** When to feed the next TIMER event (absolute ns); CCOIP_NO_DEADLINE when none. */
uint64_t ccoip_master_deadline_ns(const ccoip_master *m);

/**
 * ccoip_master_poll without the copy, for drivers that run each action before stepping the
 * machine again (the simulator, docs/simulator.md "Scale"): the same queue in the same order.
 * Returns the oldest queued action, or NULL when the queue is empty or m is NULL. The action
 * (the struct) stays valid until the machine's next step, which may reuse its slot; its payload
 * bytes, like a polled action's, until the next step. It pops the same queue as
 * ccoip_master_poll; the two may be mixed.
 */
const ccoip_action *ccoip_master_poll_ref(ccoip_master *m);

/* ------------------------------------------------------------------------ */
/* Read-only introspection, for tests, the simulator's checkers and logs.    */
/* ------------------------------------------------------------------------ */

/** The current epoch (docs/protocol.md §6.9). */
uint64_t ccoip_master_epoch(const ccoip_master *m);
/** Peers admitted into a ring (all groups). */
uint32_t ccoip_master_num_accepted(const ccoip_master *m);
/** Peers joined but not admitted yet. */
uint32_t ccoip_master_num_pending(const ccoip_master *m);
/** Collective operations being voted on or running (all groups): the runtime's cue that
 * completions are due soon (it polls before sleeping, docs/benchmarks.md "Waiting"). */
uint32_t ccoip_master_ops_live(const ccoip_master *m);
/** All-reduces the master answered with a relayed result (docs/protocol.md §6.8.2). */
uint64_t ccoip_master_relayed_ops(const ccoip_master *m);
/**
 * Copies the ring order (peer ids) of group into ids[0 .. cap) and returns
 * its length (which may exceed cap). Only accepted peers; 0 for an unknown group.
 */
uint32_t ccoip_master_ring(const ccoip_master *m, uint32_t group, uint64_t *ids, uint32_t cap);

#endif /* CCOIP_MASTER_H */
