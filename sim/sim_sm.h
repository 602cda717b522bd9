/*
 * sim_sm.h — how the simulator reaches the state machines it drives.
 *
 * The simulator is the driver of core/ccoip_sm.h for one master and N peers.
 * It talks to them through this table so that the real machines of core/
 * (sim_sm_core(), sm_core.c) and test doubles can be swapped. The
 * parameters are the subset of the core configs the simulator sets.
 */
#ifndef SIM_SM_H
#define SIM_SM_H

#include <stdbool.h>
#include <stdint.h>

#include "ccoip_sm.h"
#include "ccoip_trace.h"

/** Port the simulated master listens on (the PCCL default). */
#define SIM_MASTER_PORT 48148u

typedef struct sim_master_params {
    uint32_t port;
    uint32_t heartbeat_ms;
    uint32_t evict_ms;
    uint32_t vote_timeout_ms;
    uint32_t max_peers;
    bool canary_skip_abort_verdict;
    uint32_t relay_max_bytes; /**< docs/protocol.md §6.8.2; 0: off */
    bool auth;                /**< authenticated run (sim_config.auth) */
    uint64_t probe_bytes;     /**< ccoip_master_config.probe_bytes (0: the default) */
} sim_master_params;

typedef struct sim_peer_params {
    uint8_t master_ip[4];
    uint32_t master_port;
    uint32_t peer_group;
    uint32_t p2p_pool_size;
    uint32_t max_ops;
    uint32_t heartbeat_ms;
    uint32_t evict_ms;
    bool canary_skip_restore;
    bool auth; /**< authenticated run (sim_config.auth) */
} sim_peer_params;

typedef struct sim_sm_vt {
    const char *name;
    /** Creates and initializes a master; NULL on failure. */
    void *(*master_create)(const sim_master_params *p, uint64_t seed);
    /** Creates and initializes a peer; NULL on failure. */
    void *(*peer_create)(const sim_peer_params *p, uint64_t seed);
    void (*destroy)(void *m, bool is_master);
    /** ccoip_*_step: 0 (pcclSuccess) or an error code. */
    int (*step)(void *m, bool is_master, const ccoip_event *ev);
    bool (*poll)(void *m, bool is_master, ccoip_action *out);
    uint64_t (*deadline_ns)(const void *m, bool is_master);
    /** ccoip_peer_set_port: the driver bound a LISTEN action to port. May be NULL. */
    void (*set_port)(void *m, ccoip_listener listener, uint32_t port);
    /** poll without the copy: the action, valid until the machine's next step, or NULL when
     * there is none. May be NULL (then poll is used). */
    const ccoip_action *(*poll_ref)(void *m, bool is_master);
    /** A hint: start loading what the machine's next step reads (stage 0: reads nothing of
     * the machine; stage 1: just before its step). May be NULL. */
    void (*prefetch)(const void *m, bool is_master, int stage);
    /** A peer's ring as the application reads it (ccoip_peer_epoch, ccoip_peer_rank,
     *  ccoip_peer_world_size). May be NULL (then only the all-reduce workload runs). */
    void (*peer_ring)(const void *m, uint64_t *epoch, int32_t *rank, uint32_t *world);
} sim_sm_vt;

/** The real state machines of core/, or NULL when this build does not have them yet. */
const sim_sm_vt *sim_sm_core(void);

/** The header of a trace of the machine these parameters create (sm_core.c); false when this
 *  build has no state machines. */
bool sim_sm_trace_header(bool is_master, const sim_master_params *mp, const sim_peer_params *pp,
                         uint64_t seed, ccoip_trace_header *out);

#endif /* SIM_SM_H */
