/*
 * peer_internal.h — the peer's state, shared by peer.c (commands, the
 * control connection, topology, liveness), peer_wire.c (p2p links, §8.1)
 * and peer_ring.c (driving the ring all-reduce, §8.2). docs/core.md §3.
 */
#ifndef CCOIP_PEER_INTERNAL_H
#define CCOIP_PEER_INTERNAL_H

#include <assert.h>

#include "ccoip_algo.h"
#include "ccoip_peer.h"
#include "ccoip_ring.h"
#include "ccoip_sm_internal.h"

/**
 * Accepted p2p connections the peer tracks at once: P_ACC_MAX for a pool of
 * one, two more per extra pool connection (the current epoch's pool and one
 * of the next epoch held), p->wire.acc_cap in all.
 */
#define P_ACC_MAX 8u

typedef enum p_state {
    PS_INIT = 0,       /**< before START */
    PS_IDLE = 1,       /**< started, not connected */
    PS_CONNECTING = 2, /**< CONNECT to the master issued */
    PS_HELLO = 3,      /**< hello sent */
    PS_JOIN = 4,       /**< join sent */
    PS_PENDING = 5,    /**< joined, topology vote sent, waiting to be admitted */
    PS_ACCEPTED = 6,   /**< ring member */
    PS_FAILED = 7,     /**< master lost or evicted us: every command fails */
    PS_LEFT = 8        /**< left gracefully */
} p_state;

typedef enum p_call_kind {
    PC_NONE = 0,
    PC_HELLO,
    PC_JOIN,
    PC_TOPO_VOTE,
    PC_P2P,
    PC_PENDING,
    PC_INITIATE,
    PC_COMPLETE,
    PC_SYNC_VOTE,
    PC_SYNC_DONE,
    PC_OPT_VOTE,
    PC_OPT_DONE
} p_call_kind;

typedef struct p_call {
    p_call_kind kind;
    uint64_t call_id;
    uint32_t op;
} p_call;

/* PT_CHALLENGED: authenticated runs, connected and waiting for the acceptor's CHALLENGE. */
/* PT_RELAY_WAIT: a relayed link's connection to the master's relay (§8.6), authenticated runs:
 * waiting for the master's CHALLENGE before the RELAY_JOIN. */
typedef enum p_tx_state {
    PT_NONE = 0,
    PT_DIALING,
    PT_CHALLENGED,
    PT_HELLO_SENT,
    PT_UP,
    PT_RELAY_WAIT
} p_tx_state;
/* The two links of a plan (peer_wire.c): us -> successor, predecessor -> us. */
#define P_SIDE_SUCC 0u
#define P_SIDE_PRED 1u
/* PA_PAIR_HELD: a pair HELLO (§8.5) for a receive whose commence has not come yet; PA_PAIR: the
 * pair link of a running receive (its op owns it, peer_pair.c); PA_PAIR_IDLE: a pair link
 * between receives, waiting for the sender's next pair HELLO (the sender closes it). */
typedef enum p_acc_state {
    PA_FREE = 0,
    PA_WAIT_HELLO,
    PA_HELD,
    PA_UP,
    PA_PAIR_HELD,
    PA_PAIR,
    PA_PAIR_IDLE
} p_acc_state;

/** A HELLO for an epoch more than this beyond the newest the peer knows (its plan's, its
 *  JoinResult's) is refused at once, not held (docs/protocol.md §8.1). */
#define P_HELLO_EPOCH_AHEAD_MAX 1024u

typedef struct p_acc {
    p_acc_state state;
    uint64_t conn;
    uint64_t since_ns; /**< accepted at: closed unless up (a valid HELLO) by since + evict_ms */
    ccoip_data_header hello; /**< PA_HELD: a hello for an epoch we have no plan for yet */
    uint64_t epoch;          /**< PA_UP: the epoch the link was made for */
    /* Authenticated runs (docs/protocol.md §8.1): our CHALLENGE and the HELLO's proof. */
    uint8_t challenge[CCOIP_AUTH_NONCE_BYTES];
    uint8_t proof[CCOIP_AUTH_MAC_BYTES];
} p_acc;

typedef enum p_op_state {
    PO_FREE = 0,
    PO_INITIATING, /**< initiate sent, waiting for commence */
    PO_RUNNING,    /**< ring in progress */
    PO_RESTORING,  /**< aborted: restoring RECV from BACKUP */
    PO_COMPLETING  /**< complete sent, waiting for the verdict */
} p_op_state;

/** Pair links a sender keeps open between its sends (per receiving peer), and how long an idle
 *  one stays (docs/protocol.md §8.5). */
#define P_PAIR_CACHE   8u
#define P_PAIR_IDLE_MS 30000u

/** A pair link the sender dialled, kept for reuse (peer_pair.c). */
typedef struct p_pair_link {
    bool used;
    bool busy; /**< an op runs on it now */
    uint64_t conn;
    uint64_t peer;     /**< the receiver's peer id */
    uint64_t since_ns; /**< idle since */
    uint8_t ip[16];    /**< the receiver's p2p endpoint it was dialled to */
    uint32_t ip_len;
    uint32_t port;
    bool has_challenge; /**< authenticated runs: the receiver's CHALLENGE on this link */
    uint8_t challenge[CCOIP_AUTH_NONCE_BYTES];
} p_pair_link;

/** Where a send / recv's pair link is (peer_pair.c). */
typedef enum p_pair_state {
    PP_NONE = 0,
    PP_DIALING,    /**< send: CONNECT out */
    PP_CHALLENGED, /**< send, authenticated: connected, waiting for the CHALLENGE */
    PP_HELLO_SENT, /**< send: waiting for the HELLO_ACK */
    PP_WAIT_HELLO, /**< recv: waiting for the sender's HELLO */
    PP_TRANSFER,   /**< the one RING_SEND / RING_RECV is out */
    PP_DONE        /**< transferred: the completion is out */
} p_pair_state;

/** Where an op is within its ring (docs/core.md §3.4). */
typedef enum p_op_sub {
    POS_NONE = 0,
    POS_INIT_COPY,
    POS_BACKUP, /**< in place, PREMUL_SUM: the backup of RECV, before RECV is scaled */
    POS_RS_QUANT,
    POS_RS_IO,
    POS_RS_REDUCE,
    POS_FINALIZE,
    POS_OWN_QUANT,
    POS_OWN_DEQUANT,
    POS_AG_IO,
    POS_AG_DEQUANT,
    POS_SG_IO,  /**< small all-reduce: all-gather step (ccoip_ring_use_gather) */
    POS_SG_SUM, /**< small all-reduce: reducing the inputs in rank order */
    POS_SG_FIN, /**< small all-reduce: AVG division */
    POS_RESTORE,
    POS_HD_IO,  /**< halving–doubling: a step's send and receive (peer_hd.c) */
    POS_HD_RED, /**< halving–doubling: a halving's reduction */
    POS_HD_FIN, /**< halving–doubling: AVG division of the owned range */
    /* The other kinds (peer_coll.c, core/ccoip_coll.h): */
    POS_C_PRO, /**< prologue copies (backup, packing) */
    POS_C_IO,  /**< a step's sends and receives */
    POS_C_RED, /**< a step's reduction (and AVG division) */
    POS_C_EPI  /**< epilogue copies */
} p_op_sub;

typedef struct p_op {
    p_op_state state;
    p_op_sub sub;
    uint64_t cmd;
    ccoip_allreduce_args a;
    bool begun; /**< OP_BEGIN emitted */
    uint64_t seq;
    uint64_t epoch;
    uint32_t world;
    uint32_t rank;
    uint64_t tx_conn;
    uint64_t rx_conn;
    uint32_t step;
    /* This step's outstanding completions: bit j of *_left stands for the id io_* + j (a
     * striped step has one send, receive and reduction per stripe; 0: none outstanding). */
    uint64_t io_send;
    uint64_t io_recv;
    uint64_t io_kernel;
    uint32_t send_left, recv_left, kern_left;
    /* Striping (ccoip_ring_stripes): the link pools at ring_begin, stripe j on stx[j] / srx[j];
     * ptx = prx = 1 (stx[0] = tx_conn, srx[0] = rx_conn) when no step of the op stripes. */
    uint64_t stx[CCOIP_P2P_POOL_MAX];
    uint64_t srx[CCOIP_P2P_POOL_MAX];
    uint32_t ptx, prx;
    uint64_t esize; /**< bytes per element */
    uint64_t wsize; /**< bytes per element on the wire */
    uint64_t half;  /**< bytes of one scratch half (quantized) */
    ccoip_quant_meta send_meta;
    ccoip_quant_meta recv_meta;
    ccoip_quant_meta fwd_meta;
    uint32_t fwd_half;
    bool verdict_known;
    bool verdict_aborted;
    int32_t verdict_reason; /**< ccoip_pb_reason of an aborted verdict */
    int32_t abort_reason;   /**< reported in CollectiveComplete (REASON_NON_FINITE or 0) */
    bool complete_sent;
    bool restored; /**< the abort path (restore) already ran */
    /**
     * The backup of an in-place op is complete (its KERNEL_DONE came). Until then nothing has
     * written RECV (the op's first writes follow that completion), so an abort restores nothing:
     * a backup cancelled half-way would write its unfilled part over RECV.
     */
    bool backup_done;
    /**
     * Started optimistically (docs/protocol.md §6.8.1): the ring runs since the initiate,
     * its frames carry seq 0, the completion seq 0; the master sends no commence.
     */
    bool optimistic;
    bool refused; /**< optimistic, and the master refused the initiate (o->result says why) */
    bool relay;   /**< relayed by the master (§6.8.2): no ring; the answer carries the result */
    uint8_t algo; /**< the resolved ccoip_algo (docs/algorithms.md) */
    uint64_t tx_bytes;
    uint64_t rx_bytes;
    pcclResult_t result;   /**< what the NOTIFY will say */
    uint64_t backup_bytes; /**< BACKUP restored into RECV [0, backup_bytes) on abort (0: none) */
    /** The op's timeout (§6.8.3): at deadline_ns a CollectiveCancel goes out (once). */
    uint64_t deadline_ns;
    bool cancel_sent;
    /* Send / recv (peer_pair.c, docs/protocol.md §6.8.4, §8.5). */
    p_pair_state pair;
    uint64_t pair_conn; /**< the pair link: dialled (send) or accepted (recv); 0: none */
    uint64_t pair_peer; /**< the other member's peer id */
    uint8_t pair_key[CCOIP_AUTH_KEY_BYTES];
    uint8_t pair_ip[16]; /**< send: the receiver's p2p endpoint */
    uint32_t pair_ip_len;
    uint32_t pair_port;
    bool pair_reused; /**< send: on a kept link (redialled once if it closes before the ACK) */
    bool pair_has_challenge;
    uint8_t pair_challenge[CCOIP_AUTH_NONCE_BYTES]; /**< send: the receiver's CHALLENGE */
} p_op;

/** Shared-state connections served at once (distributor side). */
#define P_SS_MAX 8u

/** Where the peer's shared-state sync is (docs/core.md §3.5). */
typedef enum p_sync_state {
    PSS_NONE = 0,
    PSS_HASHING,   /**< HASH of key sync_i in flight */
    PSS_VOTED,     /**< vote sent, waiting for the verdict */
    PSS_FETCHING,  /**< connecting / request sent / STATE_RECVs posted */
    PSS_VERIFYING, /**< HASH of fetched key sync_i (scratch) in flight */
    PSS_ADOPTING,  /**< COPY scratch -> tensor of key sync_i in flight */
    PSS_DONE_WAIT  /**< sync_done sent, waiting for its verdict */
} p_sync_state;

/** One key of the running sync, sorted by name. */
typedef struct p_skey {
    char name[CCOIP_STATE_NAME_MAX];
    uint32_t name_len;
    pcclDataType_t dtype;
    uint64_t count;
    uint64_t bytes;
    bool aci;
    uint32_t index; /**< as submitted (CCOIP_REGION_TENSOR) */
    uint64_t hash;  /**< local content */
    bool fetch;
    uint32_t fetch_pos; /**< position in the request */
    uint64_t expected;
    uint64_t scratch_off;
    uint64_t recv_io;
} p_skey;

typedef struct p_sconn {
    bool used;
    bool asked;        /**< a request arrived (and passed authentication) */
    uint64_t since_ns; /**< accepted (dialled) at */
    uint64_t conn;
    uint8_t challenge[CCOIP_AUTH_NONCE_BYTES]; /**< authenticated runs: our CHALLENGE (§8.3) */
    /* A connection we dialled to offer to a receiver (we accept no connections, §8.3). */
    bool offer;
    bool offered;     /**< the STATE_OFFER is sent: the receiver's request may come */
    uint64_t to_peer; /**< the receiver */
    /* On a receiver's accepted connection: the dialling distributor's CHALLENGE. */
    bool has_peer_challenge;
    uint8_t peer_challenge[CCOIP_AUTH_NONCE_BYTES];
} p_sconn;

typedef enum p_opt_state {
    POPT_NONE = 0,
    POPT_VOTED,     /**< optimize_topology sent */
    POPT_PROBING,   /**< PROBE of target opt_i in flight */
    POPT_DONE_WAIT, /**< optimize_done sent */
    POPT_REWIRING   /**< optimized plan received: waiting for its TopologyVerdict */
} p_opt_state;

typedef struct p_probe {
    uint64_t peer_id;
    uint8_t ip[16];
    uint32_t ip_len;
    uint32_t port;
    uint32_t url_len;
    char url[CCOIP_URL_MAX];
    uint64_t bytes;
} p_probe;

/*
 * The peer's state, one sub-struct per concern, each owned (initialized and changed) by the file
 * named on it; other files read it and call that file's functions (docs/core.md §3.7).
 * The fixed-size tables of every concern share one zeroed block (ccoip_peer_create: untouched
 * pages cost no memory when a simulator runs thousands of peers), freed through `tables`.
 */

/** The master connection: hello, join, calls, heartbeats, commands waiting for the master
 *  (peer.c). */
typedef struct p_control {
    char master_url[CCOIP_URL_MAX];
    uint32_t hb_ms;
    uint32_t evict_ms;
    uint64_t last_recv_ns;
    uint64_t last_send_ns;
    uint64_t hb_counter;
    uint64_t next_call;
    p_call *calls; /**< [calls_cap] */
    uint32_t calls_cap;
    bool connect_pending;
    uint64_t connect_cmd;
    bool topo_pending; /**< an UPDATE_TOPOLOGY command is outstanding */
    uint64_t topo_cmd;
    uint64_t topo_cmd_epoch; /**< the plan epoch that answered its vote (0: not yet) */
    bool pend_pending;
    uint64_t pend_cmd;
} p_control;

/** The ring the peer runs collectives on, as installed by a TopologyVerdict (peer.c), and
 *  its counters (peer_ring.c). The op slots are ccoip_peer.ops. */
typedef struct p_ring_state {
    uint64_t epoch;
    bool ready; /**< installed (a successful verdict) */
    uint32_t world;
    ccoip_world_info wi; /**< as last told by the master */
    uint32_t rank;
    uint64_t *ids; /**< [max_world] the ring, by peer id */
    uint32_t n;
    /** An op of this epoch aborted: no optimistic start until the next epoch (§6.8.1). */
    bool opt_off;
    uint64_t opt_starts; /**< ccoip_peer_optimistic_starts */
    uint64_t opt_joins;  /**< ccoip_peer_optimistic_joins */
    uint64_t relay_max;  /**< HelloResult.relay_max_bytes: master relay (§6.8.2); 0 off */
    uint64_t relay_ops;  /**< ccoip_peer_relayed_ops */
    /** The group's tuned all-reduce table, as the master's last plan (or tuning round's
     *  answer) gave it (§6.8.5); all AUTO: none, the rule. */
    ccoip_algo_table table;
} p_ring_state;

/** The plan being wired and the p2p links (peer_wire.c; docs/core.md §3.3). */
typedef struct p_wiring {
    bool p2p_listening;
    uint32_t p2p_port;
    char p2p_url[CCOIP_URL_MAX];
    uint64_t plan_epoch;
    uint64_t known_epoch; /**< the JoinResult's epoch (HELLO plausibility, §8.1) */
    bool wiring;          /**< plan received, not yet reported */
    bool reported;        /**< reported, waiting for the verdict */
    uint64_t plan_pred;
    uint64_t plan_succ;
    uint32_t plan_rank;
    uint32_t plan_n;
    uint32_t plan_world;
    uint64_t *plan_ring; /**< [max_world] */
    /*
     * Who dials each link of plan_epoch (TopologyPlan.dial, docs/protocol.md §6.4): dials[s]
     * for side s (P_SIDE_SUCC: the link us -> succ, P_SIDE_PRED: pred -> us); dial_*[s] the
     * endpoint dialled for it (the neighbour's p2p listener, or the master's relay).
     */
    bool dials[2];
    bool relayed[2];
    /** Dials not acknowledged by then are reported unreachable: 3/4 of the plan's deadline, so
     *  the master learns of them before it gives up on the phase (§6.4). */
    uint64_t dial_deadline_ns;
    /* The destination's connections to the master's relay of a relayed link from pred (§8.6):
     * dialled and joined here, then accepted links (acc[]) as if the predecessor had dialled. */
    uint64_t rly_conn[CCOIP_P2P_POOL_MAX];
    p_tx_state rly_state[CCOIP_P2P_POOL_MAX];
    uint8_t dial_ip[2][16];
    uint32_t dial_ip_len[2];
    uint32_t dial_port[2];
    char dial_url[2][CCOIP_URL_MAX];
    uint32_t dial_url_len[2];
    /*
     * The link pools of plan_epoch (docs/protocol.md §8.1): tx_conn[k] to the successor,
     * rx_conn[k] from the predecessor, k < CCOIP_P2P_POOL_MAX, whichever side dialled them;
     * tx_state / rx_state PT_UP once acknowledged (dialled) or accepted.
     * tx_n / rx_n: the agreed pool sizes (0 until connection 0's HELLO_ACK / HELLO).
     */
    uint64_t tx_conn[CCOIP_P2P_POOL_MAX];
    p_tx_state tx_state[CCOIP_P2P_POOL_MAX];
    uint32_t tx_n;
    uint64_t rx_conn[CCOIP_P2P_POOL_MAX];
    p_tx_state rx_state[CCOIP_P2P_POOL_MAX];
    uint32_t rx_n;
    p_acc *acc; /**< [acc_cap] */
    uint32_t acc_cap;
    /* Authenticated runs: plan_epoch's keys of the links pred -> us and us -> succ (§8.1). */
    uint8_t pred_key[CCOIP_AUTH_KEY_BYTES];
    uint8_t succ_key[CCOIP_AUTH_KEY_BYTES];
    uint8_t group_key[CCOIP_AUTH_KEY_BYTES]; /**< plan_epoch's key of our group (§8.3) */
} p_wiring;

/** Topology optimization (peer_optimize.c; docs/core.md §3.6). */
typedef struct p_optimization {
    p_opt_state st; /**< changed by p_set_opt only */
    bool bw_listening;
    uint32_t bw_port;
    char bw_url[CCOIP_URL_MAX];
    uint64_t cmd;
    uint64_t epoch;
    uint32_t i;
    uint64_t io;
    uint32_t n;
    p_probe *probes;                    /**< [max_world] */
    ccoip_pb_bandwidth_sample *samples; /**< [max_world] */
} p_optimization;

/** Shared-state sync and serving (peer_state.c; docs/core.md §3.5). */
typedef struct p_shared_state {
    p_sync_state st; /**< changed by p_set_sync only */
    bool listening;
    uint32_t port;
    char url[CCOIP_URL_MAX];
    p_skey *skeys; /**< [max_state_keys] */
    uint32_t nkeys;
    uint64_t cmd;
    uint64_t rev;
    int32_t strategy;
    uint32_t i;
    uint64_t io;
    uint64_t io_first; /**< PSS_ADOPTING: io id of the first COPY */
    uint64_t popular;
    uint64_t round;      /**< round of this command's verdict (0: none yet) */
    uint64_t round_last; /**< highest round of any verdict seen */
    uint64_t fetch_seq;  /**< fetches started (STATE_* header seq) */
    uint64_t conn;
    bool conn_open;
    bool requested; /**< the STATE_REQUEST of this fetch is sent (authenticated: after the
                         distributor's CHALLENGE) */
    /* The distributor dials us (§8.3): waiting since await_ns for its STATE_OFFER. */
    bool await_offer;
    uint64_t offer_from;
    uint64_t await_ns;
    uint32_t nfetch;
    uint32_t recv_pending;
    bool resp_ok;
    bool failed;  /**< the local fetch failed */
    bool abandon; /**< the master failed the round during the adoption */
    bool scratch; /**< OP_BEGIN of the scratch slot emitted */
    uint64_t rx;
    uint64_t tx;
    uint64_t *sends; /**< [max_state_keys * P_SS_MAX] io ids of pending STATE_SENDs */
    uint32_t nsends;
    p_sconn sconn[P_SS_MAX];
    ccoip_pb_shared_state_entry *entries; /**< [max_state_keys] */
    ccoip_pb_bytes *names;                /**< [max_state_keys] */
    ccoip_pb_shared_state_key *vkeys;     /**< [max_state_keys] */
} p_shared_state;

struct ccoip_peer {
    /* What every step touches first, in the record's first lines (a simulator steps thousands
     * of peers, each step a cache miss on its record: docs/simulator.md, Scale). */
    uint64_t now;
    sm_out out;
    p_state state; /**< changed by p_set_state only */
    bool master_closed;
    p_op *ops; /**< [max_ops] the all-reduce op slots (peer_ring.c) */
    uint64_t next_io;

    /* The machine (peer.c). */
    ccoip_peer_config cfg;
    ccoip_codec_limits lim;
    uint64_t rng;
    uint64_t id;
    uint64_t next_conn;
    uint64_t auth_ctr;                          /**< nonces drawn (ccoip_auth_nonce) */
    uint8_t auth_nonce[CCOIP_AUTH_NONCE_BYTES]; /**< ours, sent in Hello (§6.1.1) */
    uint8_t *tables; /**< the one block every concern's fixed-size tables live in */
    uint8_t *arena_mem;
    uint64_t arena_cap;
    bool arena_owned; /**< false: borrowed (ccoip_peer_config.decode_arena) */

    p_control ctl;
    p_ring_state ring;
    p_wiring wire;
    /** Send / recv: the sender's idle pair links, kept for the next send to the same peer
     *  (peer_pair.c). */
    p_pair_link pairs[P_PAIR_CACHE];
    p_optimization opt;
    p_shared_state ss;
};

/* ------------------------------------------------------------------------ */
/* State transitions: one setter per state machine, checked against its table  */
/* (docs/core.md §3.7). Every change of one of these states goes through its    */
/* setter; the assertions stay on in release builds (DESIGN.md §2 rule 6), so   */
/* the fuzzers and the simulator's swarm find a transition the table lacks.     */
/* Bit `to` of the row `from` is set when from -> to is legal.                  */
/* ------------------------------------------------------------------------ */

#define P_TO(s) (1u << (s))

/** The peer's own state (ccoip_peer.state; docs/core.md §3.1). */
static inline bool p_state_legal(p_state from, p_state to)
{
    /* Every live state may fail (master lost, evicted, LEAVE); LEAVE fails first, then LEFT. */
    enum { LIVE_FAIL = P_TO(PS_FAILED) };
    static const uint16_t next[9] = {
        [PS_INIT] = P_TO(PS_IDLE) | LIVE_FAIL,        /* START */
        [PS_IDLE] = P_TO(PS_CONNECTING) | LIVE_FAIL,  /* CONNECT command */
        [PS_CONNECTING] = P_TO(PS_HELLO) | LIVE_FAIL, /* CONN_UP of the master */
        [PS_HELLO] = P_TO(PS_JOIN) | LIVE_FAIL,       /* HelloResult */
        [PS_JOIN] = P_TO(PS_PENDING) | LIVE_FAIL,     /* JoinResult */
        [PS_PENDING] = P_TO(PS_ACCEPTED) | LIVE_FAIL, /* TopologyVerdict ok */
        [PS_ACCEPTED] = LIVE_FAIL,                    /* master lost, evicted, LEAVE */
        [PS_FAILED] = P_TO(PS_LEFT),                  /* LEAVE */
        [PS_LEFT] = 0,
    };
    return (unsigned)from < 9u && (unsigned)to < 9u && ((next[from] >> to) & 1u) != 0;
}

static inline void p_set_state(ccoip_peer *p, p_state to)
{
    assert(p_state_legal(p->state, to));
    p->state = to;
}

/** An all-reduce op slot (p_op.state; docs/core.md §3.4). */
static inline bool p_op_state_legal(p_op_state from, p_op_state to)
{
    static const uint8_t next[5] = {
        [PO_FREE] = P_TO(PO_INITIATING),                         /* submit */
        [PO_INITIATING] = P_TO(PO_RUNNING) | P_TO(PO_FREE),      /* commence, optimistic / answer */
        [PO_RUNNING] = P_TO(PO_COMPLETING) | P_TO(PO_RESTORING), /* ring done / abort */
        [PO_RESTORING] = P_TO(PO_COMPLETING) | P_TO(PO_FREE),    /* restored: report / finish */
        [PO_COMPLETING] = P_TO(PO_RESTORING) | P_TO(PO_FREE),    /* aborted verdict / verdict */
    };
    return (unsigned)from < 5u && (unsigned)to < 5u && ((next[from] >> to) & 1u) != 0;
}

static inline void p_op_set_state(p_op *o, p_op_state to)
{
    assert(p_op_state_legal(o->state, to));
    o->state = to;
}

/** The shared-state sync (ccoip_peer.sync; docs/core.md §3.5). */
static inline bool p_sync_legal(p_sync_state from, p_sync_state to)
{
    /* Every state but NONE may end (failure, the master lost, the round failed). */
    enum { END = P_TO(PSS_NONE) };
    static const uint8_t next[7] = {
        [PSS_NONE] = P_TO(PSS_HASHING) | P_TO(PSS_VOTED),             /* submit (VOTED: no key) */
        [PSS_HASHING] = P_TO(PSS_HASHING) | P_TO(PSS_VOTED) | END,    /* next key / all hashed */
        [PSS_VOTED] = P_TO(PSS_FETCHING) | P_TO(PSS_DONE_WAIT) | END, /* verdict / refused */
        [PSS_FETCHING] = P_TO(PSS_VERIFYING) | P_TO(PSS_ADOPTING) | P_TO(PSS_DONE_WAIT) | END,
        [PSS_VERIFYING] = P_TO(PSS_VERIFYING) | P_TO(PSS_ADOPTING) | P_TO(PSS_DONE_WAIT) | END,
        [PSS_ADOPTING] = P_TO(PSS_DONE_WAIT) | END, /* copies done / round failed meanwhile */
        [PSS_DONE_WAIT] = END,                      /* sync_done_verdict */
    };
    return (unsigned)from < 7u && (unsigned)to < 7u && ((next[from] >> to) & 1u) != 0;
}

static inline void p_set_sync(ccoip_peer *p, p_sync_state to)
{
    assert(p_sync_legal(p->ss.st, to));
    p->ss.st = to;
}

/** The optimize command (ccoip_peer.opt; docs/core.md §3.6). */
static inline bool p_opt_legal(p_opt_state from, p_opt_state to)
{
    enum { END = P_TO(POPT_NONE) };
    static const uint8_t next[5] = {
        [POPT_NONE] = P_TO(POPT_VOTED),                                   /* submit */
        [POPT_VOTED] = P_TO(POPT_PROBING) | P_TO(POPT_DONE_WAIT) | END,   /* probe requests */
        [POPT_PROBING] = P_TO(POPT_PROBING) | P_TO(POPT_DONE_WAIT) | END, /* next / reported */
        [POPT_DONE_WAIT] = P_TO(POPT_REWIRING) | END, /* verdict: plan / failure */
        [POPT_REWIRING] = END,                        /* TopologyVerdict */
    };
    return (unsigned)from < 5u && (unsigned)to < 5u && ((next[from] >> to) & 1u) != 0;
}

static inline void p_set_opt(ccoip_peer *p, p_opt_state to)
{
    assert(p_opt_legal(p->opt.st, to));
    p->opt.st = to;
}

/* peer.c */
void p_notify(ccoip_peer *p, uint64_t cmd, pcclResult_t result);
void p_send(ccoip_peer *p, ccoip_pb_peer_to_master *env);
/** p_send of a frame that ends with the bytes of span (field: env's last bytes field; v9). */
void p_send_span(ccoip_peer *p, ccoip_pb_peer_to_master *env, ccoip_pb_bytes *field,
                 uint32_t op_slot, ccoip_span_ref span);
uint64_t p_call_new(ccoip_peer *p, p_call_kind kind, uint32_t op);
/* peer.c: the call call_id answers, taken out of the table ({PC_NONE} when none). */
p_call p_call_take(ccoip_peer *p, uint64_t call_id);
/* peer.c: the topology vote (docs/protocol.md §6.3) of a pending or updating peer. */
void p_send_topo_vote(ccoip_peer *p);
/* peer_master.c: one control frame from the master. */
void p_master_on_frame(ccoip_peer *p, const uint8_t *data, uint64_t len);
void p_call_drop_op(ccoip_peer *p, p_call_kind kind, uint32_t op);
void p_fail(ccoip_peer *p, const char *why);

/* peer_wire.c */
/* Authenticated runs: sends a CHALLENGE with a fresh nonce (kept in nonce) on an accepted
 * connection (peer_wire.c; docs/protocol.md §8.0). */
void p_auth_challenge(ccoip_peer *p, uint64_t conn, uint8_t nonce[CCOIP_AUTH_NONCE_BYTES]);
/* peer_wire.c: conn becomes an accepted p2p connection waiting for its HELLO (an acc[] slot,
 * room made as for an accepted one); false when no slot. */
bool p_wire_acc_take(ccoip_peer *p, uint64_t conn);
/* peer_wire.c: a CONNECT action's target: side s's dial endpoint (dial_url / ip / port). */
void p_wire_connect_to(const ccoip_peer *p, uint32_t s, ccoip_action *a);
/* peer_relay.c: links through the master's relay (docs/protocol.md §8.6). */
bool p_relay_target(ccoip_peer *p, uint32_t s, uint32_t port);
void p_relay_join(ccoip_peer *p, uint64_t conn, uint32_t s, uint32_t k, const uint8_t *challenge);
void p_relay_dial_acc(ccoip_peer *p, uint32_t k);
bool p_relay_on_conn_up(ccoip_peer *p, const ccoip_event *ev);
bool p_relay_on_recv(ccoip_peer *p, uint64_t conn, const uint8_t *data, uint64_t len);
bool p_relay_on_closed(ccoip_peer *p, uint64_t conn);
void p_relay_reset(ccoip_peer *p);
/* deadline_ms: the plan's (MasterToPeer.deadline_ms, the phase's bound; 0: none). */
void p_wire_on_plan(ccoip_peer *p, const ccoip_pb_topology_plan *plan, uint32_t deadline_ms);
bool p_wire_on_conn_up(ccoip_peer *p, const ccoip_event *ev);
bool p_wire_on_conn_closed(ccoip_peer *p, uint64_t conn);
bool p_wire_on_recv(ccoip_peer *p, uint64_t conn, const uint8_t *data, uint64_t len);
void p_wire_close_all(ccoip_peer *p);
/** Closes accepted connections without a valid HELLO (waiting or held) for evict_ms. */
void p_wire_timers(ccoip_peer *p);
/** The earliest such deadline; CCOIP_NO_DEADLINE when none waits. */
uint64_t p_wire_deadline(const ccoip_peer *p);

/* peer_state.c */
pcclResult_t p_state_submit(ccoip_peer *p, const ccoip_cmd *cmd);
void p_state_on_answer(ccoip_peer *p, p_call_kind kind, const ccoip_pb_master_to_peer *env);
bool p_state_on_conn_up(ccoip_peer *p, const ccoip_event *ev);
bool p_state_on_conn_closed(ccoip_peer *p, uint64_t conn);
bool p_state_on_recv(ccoip_peer *p, uint64_t conn, const uint8_t *data, uint64_t len);
bool p_state_on_done(ccoip_peer *p, const ccoip_event *ev);
void p_state_fail_all(ccoip_peer *p, pcclResult_t r);
/* peer_state.c, for peer_state_offer.c. */
void p_state_fetch_fail(ccoip_peer *p, const char *why);
void p_state_sconn_close(ccoip_peer *p, uint32_t i);
void p_state_sconn_make_room(ccoip_peer *p);
void p_state_send_request(ccoip_peer *p, const uint8_t *challenge);
/* peer_state_offer.c: shared state from a distributor that accepts no connections (§8.3). */
void p_offer_start(ccoip_peer *p, const ccoip_pb_shared_state_sync_verdict *v);
bool p_offer_on_conn_up(ccoip_peer *p, const ccoip_event *ev);
bool p_offer_on_recv(ccoip_peer *p, uint32_t i, const uint8_t *data, uint64_t len);
void p_offer_timers(ccoip_peer *p);
/** A sync_done_verdict notification: the master failed the round (its distributor left). */
void p_state_on_round_failed(ccoip_peer *p);

/* peer_optimize.c */
pcclResult_t p_opt_submit(ccoip_peer *p, const ccoip_cmd *cmd);
void p_opt_on_answer(ccoip_peer *p, p_call_kind kind, const ccoip_pb_master_to_peer *env);
bool p_opt_on_done(ccoip_peer *p, const ccoip_event *ev);
/** A TopologyVerdict of epoch arrived (ok: the ring is installed). */
void p_opt_on_topology_verdict(ccoip_peer *p, uint64_t epoch, bool ok);
void p_opt_fail_all(ccoip_peer *p, pcclResult_t r);

/* peer_op.c (the op slot's life) and peer_ring.c (the all-reduce's data movement) */
pcclResult_t p_ring_submit(ccoip_peer *p, const ccoip_cmd *cmd);
void p_ring_on_commence(ccoip_peer *p, uint32_t op, const ccoip_pb_master_to_peer *env);
void p_ring_on_initiate_error(ccoip_peer *p, uint32_t op, pcclResult_t r);
void p_ring_on_verdict(ccoip_peer *p, const ccoip_pb_collective_verdict *v);
/** The master's answer to a relayed op's initiate (§6.8.2): its outcome and result. */
void p_ring_on_relay_answer(ccoip_peer *p, uint32_t i, const ccoip_pb_collective_verdict *v);
bool p_ring_on_done(ccoip_peer *p, const ccoip_event *ev);
void p_ring_on_link_lost(ccoip_peer *p, uint64_t conn);
void p_ring_fail_all(ccoip_peer *p, pcclResult_t r);
/** Ops past their timeout send CollectiveCancel (§6.8.3). */
void p_ring_timers(ccoip_peer *p);
/** The earliest op timeout not yet acted on; CCOIP_NO_DEADLINE when none. */
uint64_t p_ring_deadline(const ccoip_peer *p);
/* Shared with peer_coll.c: the op lifecycle's building blocks (peer_ring.c). */
ccoip_span_ref p_ring_span(uint32_t slot, ccoip_region region, uint64_t off, uint64_t len);
ccoip_action *p_ring_kernel(ccoip_peer *p, uint32_t i, ccoip_action_type t, p_op_sub sub);
/** AVG's division by the world of RECV's elements [offset, offset + count): one FINALIZE. */
void p_ring_avg(ccoip_peer *p, uint32_t i, ccoip_span elems, p_op_sub sub);
ccoip_action *p_ring_io_push(ccoip_peer *p, uint32_t i, ccoip_action_type t, uint64_t io_id,
                             uint64_t conn, uint32_t chunk);
void p_ring_done(ccoip_peer *p, uint32_t i);
void p_ring_abort(ccoip_peer *p, uint32_t i, pcclResult_t result, const char *why);
/** After an aborted op's restore (or when none is needed): report, then NOTIFY (peer_op.c). */
void p_op_after_restore(ccoip_peer *p, uint32_t i);
/** Starts the data movement of op i (epoch, world and seq set): peer_ring.c for an all-reduce,
 *  peer_coll.c for the other kinds. */
void p_ring_begin(ccoip_peer *p, uint32_t i);

/* peer_hd.c: the halving–doubling all-reduce (ccoip_hd.h) on a ring's links. */
/** Whether op i runs it (its algorithm, and the world and count fit; else the ring). */
bool p_hd_active(const p_op *o);
/** Out of place, not PREMUL_SUM: it starts at once, from SEND, with no copy into RECV. */
bool p_hd_zero_copy(const p_op *o);
uint64_t p_hd_scratch_bytes(const p_op *o);
/** Starts step t (the first: after the op's first copy into RECV). */
void p_hd_step(ccoip_peer *p, uint32_t i, uint32_t t);
void p_hd_after_io(ccoip_peer *p, uint32_t i);
void p_hd_after_kernel(ccoip_peer *p, uint32_t i);

/* peer_coll.c: the collectives beyond all-reduce (core/ccoip_coll.h) on an op slot whose
 * epoch, world, rank and connections ring_begin set. */
void p_coll_begin(ccoip_peer *p, uint32_t i);
void p_coll_after_io(ccoip_peer *p, uint32_t i);
void p_coll_after_kernel(ccoip_peer *p, uint32_t i, const ccoip_done *d);

/* peer_pair.c: send / recv over a pair link (docs/protocol.md §6.8.4, §8.5). */
/** Starts op i (commenced, epoch and seq set) with the commence's other member and key. */
void p_pair_begin(ccoip_peer *p, uint32_t i, const ccoip_pb_collective_commence *cc);
/** The op's one transfer finished. */
void p_pair_after_io(ccoip_peer *p, uint32_t i);
/** A pair HELLO arrived on accepted connection k (peer_wire.c): bind it to its receive, hold
 *  it for a receive still to commence, or close it. */
void p_pair_on_hello(ccoip_peer *p, uint32_t k);
/** The sender's pair links: CONN_UP, a frame, CONN_CLOSED. False: not a pair link. */
bool p_pair_on_conn_up(ccoip_peer *p, const ccoip_event *ev);
bool p_pair_on_recv(ccoip_peer *p, uint64_t conn, const uint8_t *data, uint64_t len);
bool p_pair_on_conn_closed(ccoip_peer *p, uint64_t conn);
/** Op i ends: after a success its pair link is kept for the next op of the pair (the sender's
 *  cache, the receiver's idle entry); else it is closed (both ends). */
void p_pair_release(ccoip_peer *p, uint32_t i);
/** The sender closes pair links idle for P_PAIR_IDLE_MS. */
void p_pair_timers(ccoip_peer *p);
/** Closes every idle kept pair link (the peer fails or leaves). */
void p_pair_close_idle(ccoip_peer *p);
/** The proof of a HELLO (peer_wire.c, §8.0): key over the acceptor's challenge and the
 *  HELLO's fields. */
void p_wire_hello_proof(const ccoip_peer *p, const uint8_t key[CCOIP_AUTH_KEY_BYTES],
                        const uint8_t challenge[CCOIP_AUTH_NONCE_BYTES], const ccoip_data_header *h,
                        uint8_t out[CCOIP_AUTH_MAC_BYTES]);
/** Closes accepted connection k (peer_wire.c) and frees its entry. */
void p_wire_acc_close(ccoip_peer *p, uint32_t k);

#endif /* CCOIP_PEER_INTERNAL_H */
