/*
 * peer_internal.h — the peer's state, shared by peer.c (commands, the
 * control connection, topology, liveness), peer_wire.c (p2p links, §8.1)
 * and peer_ring.c (driving the ring all-reduce, §8.2). docs/core.md §3.
 */
#ifndef CCOIP_PEER_INTERNAL_H
#define CCOIP_PEER_INTERNAL_H

#include "ccoip_peer.h"
#include "ccoip_ring.h"
#include "ccoip_sm_internal.h"

/** Accepted p2p connections the peer tracks at once. */
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
    PC_COMPLETE
} p_call_kind;

typedef struct p_call {
    p_call_kind kind;
    uint64_t call_id;
    uint32_t op;
} p_call;

typedef enum p_tx_state { PT_NONE = 0, PT_DIALING, PT_HELLO_SENT, PT_UP } p_tx_state;
typedef enum p_acc_state { PA_FREE = 0, PA_WAIT_HELLO, PA_HELD, PA_UP } p_acc_state;

typedef struct p_acc {
    p_acc_state state;
    uint64_t conn;
    ccoip_data_header hello; /**< PA_HELD: a hello for an epoch we have no plan for yet */
    uint64_t epoch;          /**< PA_UP: the epoch the link was made for */
} p_acc;

typedef enum p_op_state {
    PO_FREE = 0,
    PO_INITIATING, /**< initiate sent, waiting for commence */
    PO_RUNNING,    /**< ring in progress */
    PO_RESTORING,  /**< aborted: restoring RECV from BACKUP */
    PO_COMPLETING  /**< complete sent, waiting for the verdict */
} p_op_state;

/** Where an op is within its ring (docs/core.md §3.4). */
typedef enum p_op_sub {
    POS_NONE = 0,
    POS_INIT_COPY,
    POS_RS_QUANT,
    POS_RS_IO,
    POS_RS_REDUCE,
    POS_FINALIZE,
    POS_OWN_QUANT,
    POS_OWN_DEQUANT,
    POS_AG_IO,
    POS_AG_DEQUANT,
    POS_RESTORE
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
    uint64_t io_send;
    uint64_t io_recv;
    uint64_t io_kernel;
    uint64_t esize; /**< bytes per element */
    uint64_t wsize; /**< bytes per element on the wire */
    uint64_t half;  /**< bytes of one scratch half (quantized) */
    ccoip_quant_meta send_meta;
    ccoip_quant_meta recv_meta;
    ccoip_quant_meta fwd_meta;
    uint32_t fwd_half;
    bool verdict_known;
    bool verdict_aborted;
    bool complete_sent;
    bool restored; /**< the abort path (restore) already ran */
    uint64_t tx_bytes;
    uint64_t rx_bytes;
    pcclResult_t result; /**< what the NOTIFY will say */
} p_op;

struct ccoip_peer {
    ccoip_peer_config cfg;
    char master_url[CCOIP_URL_MAX];
    ccoip_codec_limits lim;
    uint64_t rng;
    uint64_t now;
    sm_out out;
    p_state state;
    bool master_closed;

    uint64_t id;
    uint32_t hb_ms;
    uint32_t evict_ms;
    uint64_t last_recv_ns;
    uint64_t last_send_ns;
    uint64_t hb_counter;
    uint64_t next_call;
    uint64_t next_conn;
    uint64_t next_io;

    p_call *calls;
    uint32_t calls_cap;

    /* Commands waiting for the master. */
    bool connect_pending;
    uint64_t connect_cmd;
    bool topo_pending; /**< an UPDATE_TOPOLOGY command is outstanding */
    uint64_t topo_cmd;
    uint64_t topo_cmd_epoch; /**< the plan epoch that answered its vote (0: not yet) */
    bool pend_pending;
    uint64_t pend_cmd;

    /* Listener. */
    bool p2p_listening;
    uint32_t p2p_port;
    char p2p_url[CCOIP_URL_MAX];

    /* The ring the peer runs collectives on. */
    uint64_t epoch;
    bool ring_ready;
    uint32_t world;
    uint32_t rank;
    uint64_t *ring; /* [max_world] */
    uint32_t ring_n;

    /* The plan being wired. */
    uint64_t plan_epoch;
    bool wiring;   /**< plan received, not yet reported */
    bool reported; /**< reported, waiting for the verdict */
    uint64_t plan_pred;
    uint64_t plan_succ;
    uint32_t plan_rank;
    uint32_t plan_n;
    uint32_t plan_world;
    uint64_t *plan_ring; /* [max_world] */
    uint8_t succ_ip[16];
    uint32_t succ_ip_len;
    uint32_t succ_port;
    char succ_url[CCOIP_URL_MAX];
    uint64_t tx_conn;
    p_tx_state tx_state;
    uint64_t rx_conn; /**< the accepted link from the predecessor for plan_epoch */
    p_acc acc[P_ACC_MAX];

    p_op *ops; /* [max_ops] */
    uint8_t *arena_mem;
    uint64_t arena_cap;
};

/* peer.c */
void p_notify(ccoip_peer *p, uint64_t cmd, pcclResult_t result);
void p_send(ccoip_peer *p, ccoip_pb_peer_to_master *env);
uint64_t p_call_new(ccoip_peer *p, p_call_kind kind, uint32_t op);
void p_call_drop_op(ccoip_peer *p, p_call_kind kind, uint32_t op);
void p_fail(ccoip_peer *p, const char *why);

/* peer_wire.c */
void p_wire_on_plan(ccoip_peer *p, const ccoip_pb_topology_plan *plan);
bool p_wire_on_conn_up(ccoip_peer *p, const ccoip_event *ev);
bool p_wire_on_conn_closed(ccoip_peer *p, uint64_t conn);
bool p_wire_on_recv(ccoip_peer *p, uint64_t conn, const uint8_t *data, uint64_t len);
void p_wire_close_all(ccoip_peer *p);

/* peer_ring.c */
pcclResult_t p_ring_submit(ccoip_peer *p, const ccoip_cmd *cmd);
void p_ring_on_commence(ccoip_peer *p, uint32_t op, const ccoip_pb_master_to_peer *env);
void p_ring_on_initiate_error(ccoip_peer *p, uint32_t op, pcclResult_t r);
void p_ring_on_verdict(ccoip_peer *p, const ccoip_pb_collective_verdict *v);
bool p_ring_on_done(ccoip_peer *p, const ccoip_event *ev);
void p_ring_on_link_lost(ccoip_peer *p, uint64_t conn);
void p_ring_fail_all(ccoip_peer *p, pcclResult_t r);

#endif /* CCOIP_PEER_INTERNAL_H */
