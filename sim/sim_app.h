/*
 * sim_app.h — the workload (sim_app.c): each peer process runs the reference
 * training loop as commands submitted to its state machine. It follows the
 * world as an observer (sim_world.h) and keeps one sim_app per node; the
 * checkers read it (the commands' buffers, the shared state) through here.
 */
#ifndef SIM_APP_H
#define SIM_APP_H

#include "sim_world.h"

typedef enum sim_app_state {
    APP_START = 0,
    APP_CONNECTING,
    APP_UPDATING,
    APP_REDUCING,
    APP_SLEEPING,
    APP_LEAVING,
    APP_GONE,
    APP_SYNCING,
    APP_OPTIMIZING
} sim_app_state;

/* One all-reduce command the application has submitted and not yet seen completed. */
typedef struct sim_appcmd {
    bool used;
    uint64_t cmd_id;
    uint32_t tag;      /* the command's slot in sim_app.cmds (the tag but for send / recv) */
    uint64_t wire_tag; /* the tag its frames and the master's messages carry (send / recv:
                        * ccoip_p2p_tag of the round's tag and the pair; else tag) */
    bool done;
    pcclResult_t result;
    uint64_t count; /* elements (count + 1 for a deliberate mismatch) */
    uint8_t *input; /* what the application put in sendbuf */
    uint8_t *sendbuf;
    uint8_t *recvbuf; /* == sendbuf when in place */
    uint8_t *pre;     /* recvbuf before the op (in place: == input) */
    bool commenced;
    uint64_t epoch, seq;
    uint32_t notifies;
    uint64_t submitted_ns;
    /* The collective set (sim_config.coll_kind != 0): what this member read from its machine
     * and submitted. kind 0 (an all-reduce of the mix) keeps the buffers above. */
    bool coll;               /* submitted by the collective workload (any kind, 0 included) */
    uint32_t kind;           /* ccoip_coll_kind */
    uint32_t root;           /* rooted kinds, send / recv (the other member); else 0 */
    uint32_t rank;           /* ccoip_peer_rank at submission */
    uint32_t world;          /* ccoip_peer_world_size at submission */
    uint64_t pin;            /* ccoip_peer_epoch at submission (pinned for every kind but 0) */
    uint64_t send_len;       /* bytes bound as SEND (ccoip_coll_sizes) */
    uint64_t recv_len;       /* bytes bound as RECV */
    bool aliased;            /* SEND and RECV alias (ccoip_coll.h in_place) */
    uint8_t *alloc[2];       /* the memory sendbuf / recvbuf point into (kind != 0) */
    uint32_t commence_world; /* the master's CollectiveCommence.world_size (checkers) */
    bool relayed;            /* the master relayed it: its answer was the commence (checkers) */
    uint32_t algo;           /* the algorithm it was submitted with (pcclCollectiveOptions_t) */
} sim_appcmd;

typedef struct sim_app {
    sim_app_state state;
    uint64_t gen; /* wake-ups of older generations are ignored */
    uint64_t next_cmd_id;
    uint64_t pending_cmd; /* CONNECT / UPDATE / LEAVE in flight (0: none) */
    uint64_t pending_since_ns;
    uint64_t iter;
    uint64_t attempt;
    uint32_t world;
    uint64_t successes;
    bool leave_requested;
    uint64_t stall_ns;
    bool mismatch_next;
    bool rogue_next; /* SIM_SCRIPT_ROGUE_TAG */
    sim_appcmd cmds[SIM_MAX_TAGS];
    uint32_t outstanding;
    /* Shared state (sim_config.shared_state): tensors, revision, sync bookkeeping. */
    uint8_t st[SIM_STATE_KEYS][SIM_STATE_BYTES];
    uint8_t st_pre[SIM_STATE_KEYS][SIM_STATE_BYTES]; /* before the pending sync */
    uint64_t revision;                               /* the revision the state has */
    uint64_t sync_rev;                               /* revision submitted with the pending sync */
    uint64_t syncs;                                  /* successful syncs */
    bool skip_revision_next; /* script: the next sync submits revision + 2 */
    bool diverge_next;       /* script: corrupt a compared tensor before the next sync */
    bool sync_retry;         /* a sync failed retryably; the next success is a retry */
    bool call_mismatch;      /* the master's last refusal: REASON_CALL_MISMATCH (§6.12) */
    /* The sync's tensors as its op slot maps them (CCOIP_REGION_TENSOR). */
    uint8_t *st_ptr[SIM_STATE_KEYS];
    uint64_t st_bytes[SIM_STATE_KEYS];
    /* The collective set: successes per tag in epoch coll_epoch (every member of that
     * epoch's ring counts the same ops: one verdict per op), which with the epoch names each
     * op's kind and root alike on every member. */
    uint64_t coll_epoch;
    uint64_t coll_n[SIM_MAX_TAGS];
    /* What the application knows of its ring, as libpccl does (pcclGetAttribute; the
     * runtime's snapshot, transport/pt_actions.c act_notify): the machine's epoch and rank and
     * the NOTIFY's world size, taken at each NOTIFY of this peer; rank -1: no ring yet. The
     * collective set's ops are pinned to it (epoch, rank, world: sizes, root, relay). */
    uint64_t info_epoch;
    int32_t info_rank;
    uint32_t info_world;
    /* Send / recv (SIM_KIND_P2P): the rounds submitted in epoch p2p_epoch. Every member of the
     * epoch runs its rounds between the same unanimous topology updates, so the count, with
     * the epoch, names each round's pairs, sizes and tags alike on every member. */
    uint64_t p2p_epoch;
    uint64_t p2p_round;
} sim_app;

/* The workload of a run: one sim_app per node of the world. */
typedef struct sim_workload {
    sim_world *w;
    sim_app *apps;           /* w->cap_nodes entries, by node */
    bool double_notify_done; /* SIM_CANARY_DOUBLE_NOTIFY fired */
} sim_workload;

/** The workload of w; NULL (and w failed) when out of memory. */
sim_workload *app_create(sim_world *w);
/** Its observer, to register with world_observe (after the checkers'). */
sim_observer app_observer(sim_workload *wl);
/** Frees the workload (after world_destroy, whose release hooks freed the buffers). */
void app_destroy(sim_workload *wl);

/* Shared by the training loop (sim_app.c) and the collective set (sim_app_coll.c). */
/** Wakes node's application delay_ns from now. */
void app_schedule(sim_workload *wl, uint32_t node, uint64_t delay_ns);
/** Fills buf with count elements of the run's data, derived from salt. */
void app_fill(sim_world *w, uint8_t *buf, uint64_t count, uint64_t salt);
/** The application sleeps ns, then goes on with its loop. */
void app_sleep(sim_workload *wl, uint32_t node, uint64_t ns);
/** Frees a command's buffers and its slot. */
void app_cmd_free(sim_appcmd *c);
/** Starts the all-reduce of tag (the loop's op when no collective kind is set). */
void app_start_allreduce(sim_workload *wl, uint32_t node, uint32_t tag);
/** Starts tag's op of the collective set; false when it started none (sim_app_coll.c). */
bool app_start_coll(sim_workload *wl, uint32_t node, uint32_t tag);
/** One round of send / recv on every tag (sim_app_coll.c). */
void app_p2p_phase(sim_workload *wl, uint32_t node);

static inline sim_app *app_of(const sim_workload *wl, uint32_t node)
{
    return &wl->apps[node];
}

/** The all-reduce command cmd_id in flight, or NULL. */
sim_appcmd *app_find_cmd(sim_app *a, uint64_t cmd_id);
/** The command of wire tag (sim_appcmd.wire_tag) in flight that no ring bound yet (a relayed
 *  one, or one of the collective set before its commence), or NULL. */
sim_appcmd *app_find_unbound_tag(sim_app *a, uint64_t tag);

#endif /* SIM_APP_H */
