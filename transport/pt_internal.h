/*
 * pt_internal.h — private to transport/: the driver's internal types (events,
 * connections, pending I/O, op slots, commands, kernel jobs, listeners, the
 * driver itself) and the functions its files share. Not installed, not
 * included outside transport/; the runtime's API is pt.h.
 *
 * Threads: everything "owned by the driver thread" below belongs to the
 * thread holding the baton (the driver thread, or an application thread
 * stepping its SUBMIT, pt_cmd.c); `mu` guards the queue, the commands and the
 * snapshots; `kmu` the kernel worker's queue.
 *
 * Files (transport/README.md): pt_log.c, pt_events.c, pt_trace.c,
 * pt_conn.c, pt_probe.c, pt_kernel.c, pt_tls.c, pt_actions.c, pt_driver.c,
 * pt_cmd.c; the data-plane interface pt_dp.h and its implementations pt_nng.c
 * (nng streams) and pt_tcp.c (POSIX TCP).
 */
#ifndef PT_INTERNAL_H
#define PT_INTERNAL_H

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <nng/nng.h>
#include <nng/supplemental/tls/tls.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ccoip_dtype.h"
#include "ccoip_exec.h"
#include "ccoip_frame.h"
#include "ccoip_master.h"
#include "ccoip_peer.h"
#include "ccoip_sm.h"
#include "pt.h"
#include "pt_dp.h"
#include "pt_nng.h"
#include "pt_tcp.h"

/* Bounds (STYLE.md: limits on everything). */
#define PT_MAX_CONNS       1024u
#define PT_MAX_IOS         4096u
#define PT_MAX_CMDS        64u
#define PT_MAX_LISTENERS   3u
#define PT_MAX_SLOTS       64u
#define PT_CANCELLED_KEYS  64u
#define PT_SLICE_BYTES     ((uint64_t)1 << 20)
#define PT_DIAL_TIMEOUT_MS 5000
#define PT_DISCARD_BYTES   65536u
#define PT_PROBE_TRIES     50u
/* Bandwidth probes (docs/protocol.md §8.4): the prober sends PROBE_DATA until it sent the
 * bytes the core asked for or its window (core/ccoip_probe.h, from the round trip of
 * PROBE_REQUEST to PROBE_ACCEPT, or half the time from the dial to PROBE_ACCEPT when lower)
 * has passed. PT_PROBE_QUEUED slices are queued at a time, so it stops within about that many
 * slices (plus the socket's buffer) of the window's end. */
#define PT_PROBE_QUEUED 2u
#define PT_NO_SLOT      UINT32_MAX

/* Hostile networks: bounded resources (docs/security.md, transport/README.md "Limits").
 * Send queue per connection: frames queued and bytes of owned frame copies (control frames,
 * relayed spans); a remote that does not read past these is closed (the core hears
 * CONN_CLOSED). Zero-copy data frames (ring, state, probe) count as frames, not bytes. */
#define PT_SQ_MAX_ITEMS_CTRL  8192u
#define PT_SQ_MAX_ITEMS_DATA  65536u
#define PT_SQ_MAX_OWNED_BYTES ((uint64_t)16 << 20) /* or 4 x the control message limit */
/* Accepting: after a failed accept (EMFILE, ENFILE, any error) the listener waits before it
 * accepts again, 10 ms doubling up to 1 s; one log line per listener per second at most. */
#define PT_ACCEPT_BACKOFF_MIN_MS 10u
#define PT_ACCEPT_BACKOFF_MAX_MS 1000u
#define PT_ACCEPT_LOG_MS         1000u
/* Connection table slots an incoming flood cannot take (a peer's master connection and its
 * dialled links); and descriptors left to them: accepted connections are capped at
 * (RLIMIT_NOFILE - PT_FD_RESERVE) / 2 (a taken-over link holds two descriptors). */
#define PT_CONNS_RESERVED 64u
#define PT_FD_RESERVE     64u
/* Live accepted connections per peer listener (at the cap a listener stops accepting until
 * one closes; the kernel's backlog holds the rest). The master's listener: the table. */
#define PT_ACCEPT_CAP_P2P   128u
#define PT_ACCEPT_CAP_STATE 64u
#define PT_ACCEPT_CAP_PROBE 16u
#define PT_RELAY_ACCEPT_CAP 64u /* the master's relay listener (M_SPLICE_MAX in the core) */
/* Deadlines: an accepted connection must complete its first frame within PT_FIRST_FRAME_MS
 * (slowloris on any port); a probe target must move bytes every PT_PROBE_IDLE_MS and end
 * within PT_PROBE_MAX_MS; a shared-state server connection must move bytes (either way)
 * every PT_STATE_IDLE_MS. */
#define PT_FIRST_FRAME_MS 5000u
#define PT_PROBE_IDLE_MS  10000u
#define PT_PROBE_MAX_MS   60000u
#define PT_STATE_IDLE_MS  30000u
/* pt_cmd_wait after a timeout: the longest it waits to unbind the caller's buffers. */
#define PT_ABANDON_WAIT_MS 10000u

/* Kernels of at most this many bytes run on the driver thread when the kernel
 * worker is idle (issue 7, small messages): a hand-off to the worker and back
 * costs more than the kernel. Receives of at most this size are not fused
 * (their payload is then usually read at once, without waking a link thread). */
#ifndef PT_INLINE_BYTES
#define PT_INLINE_BYTES ((uint64_t)512 << 10)
#endif

typedef enum pt_ev_type {
    PT_EV_ACCEPTED = 1, /* listener accepted a stream */
    PT_EV_DIALED,       /* a dial finished (stream or error) */
    PT_EV_SENT,         /* send aio finished */
    PT_EV_RECEIVED,     /* recv aio finished */
    PT_EV_CORE,         /* a core event to feed as is (IO_DONE, KERNEL_DONE, CONN_CLOSED, SUBMIT) */
    PT_EV_CLOSE,        /* close connection `conn` (its send queue overflowed); the core hears it */
    PT_EV_STOP
} pt_ev_type;

typedef struct pt_ev {
    pt_ev_type type;
    uint64_t conn;
    uint32_t listener;
    int rv;
    uint64_t count;
    nng_stream *stream;
    ccoip_event core;
    struct pt_ev *next;
} pt_ev;

typedef enum pt_rd_state {
    RD_HDR = 1, /* reading a frame header */
    RD_PAYLOAD, /* reading a control payload (or data payload into rd_dst) */
    RD_HELD,    /* a ring frame waits for its RING_RECV */
    RD_DISCARD, /* reading a dropped frame's payload into the void */
} pt_rd_state;

typedef struct pt_sitem {
    uint8_t hdr[CCOIP_DATA_HEADER_BYTES];
    uint8_t *bytes; /* control frame copy (owned) */
    uint64_t len;   /* bytes of hdr/bytes part */
    const uint8_t *payload;
    uint64_t payload_len;
    uint64_t done; /* bytes written so far (header part first) */
    uint64_t io_id;
    uint32_t slot;
    bool ring;       /* hdr + payload from a span (data frame) */
    bool last;       /* completes io_id (IO_DONE) when written */
    bool probe_last; /* the last PROBE_DATA frame of a probe */
    struct pt_sitem *next;
} pt_sitem;

/* A connection the driver serves itself (bandwidth probes, docs/protocol.md §8.4). */
typedef enum pt_probe_role { PROBE_NONE = 0, PROBE_PROBER, PROBE_TARGET } pt_probe_role;

typedef struct pt_conn {
    uint64_t id;
    struct pt_driver *d;
    bool data; /* data-plane framing (80-byte headers) */
    bool up;
    bool accepted;
    uint32_t listener;
    /* The data plane its bytes go over (pt_dp.h): c->dp->op(c->dp_t, ...). &pt_nng_ops with
     * dp_t = &ns until a transport takes the stream over at CONN_UP (pt_tcp_ops, its link). */
    const pt_dp_ops *dp;
    void *dp_t;
    pt_nng_stream ns; /* the stream as nng connected it (closed with the connection) */
    nng_stream_dialer *dialer;
    nng_aio *dial_aio;
    uint64_t dial_ns;    /* when its dial started */
    nng_stream *confirm; /* dialled: nng reported the connect before TCP completed it (pt_sweep) */
    /* The master's relay (pt_splice.c, docs/protocol.md §8.6): accepted on its relay listener,
     * the core reads its first frame only (the join); then spliced to its partner. */
    bool relay;
    uint32_t frames_rx; /* complete frames received */
    struct pt_pipe *pipe;
    bool send_busy;
    bool recv_busy;
    pt_sitem *sq_head, *sq_tail;
    uint32_t sq_items; /* frames queued (PT_SQ_MAX_ITEMS_*) */
    uint64_t sq_owned; /* bytes of owned frame copies queued (d->sq_max_owned) */
    bool sq_overflow;  /* over a bound: closing (PT_EV_CLOSE queued), further frames dropped */
    /* Proving itself (accepted connections): no complete frame yet -> deadline dl_ns; the
     * POSIX TCP take-over (threads, /proc scan) waits until the first complete frame. */
    bool proven;
    bool takeover_pending;
    bool rd_held;     /* pt_rd_next held the next read for the take-over (pt_on_sent resumes it) */
    uint64_t dl_ns;   /* close at this time unless refreshed (0: none); pt_sweep */
    uint32_t idle_ms; /* refresh dl_ns on every byte moved (probe target, state server) */
    uint64_t life_ns; /* and never later than this (probe target; 0: none) */
    /* reader */
    pt_rd_state rd;
    uint8_t hdr[CCOIP_DATA_HEADER_BYTES];
    uint64_t hdr_want;
    uint64_t rd_have;
    uint8_t *buf; /* control frame (header + payload) */
    uint64_t buf_cap;
    uint64_t rd_want;
    uint8_t *rd_dst;
    ccoip_data_header dh;
    uint64_t rd_io; /* io_id the payload lands in */
    uint64_t max_recv_epoch;
    bool rd_ctrl;  /* RD_PAYLOAD of a data connection lands in buf (STATE_REQUEST/RESPONSE) */
    bool rd_fused; /* the payload under way is reduced into rd_fuse.target (dp->fuses only) */
    pt_dp_fuse rd_fuse;
    /* bandwidth probes */
    pt_probe_role probe;
    uint64_t probe_io;
    uint64_t probe_want; /* bytes announced */
    uint64_t probe_got;  /* target: bytes drained */
    uint64_t probe_t0;
    uint64_t probe_dial_ns;   /* prober: when its dial began */
    uint64_t probe_req_ns;    /* prober: when PROBE_REQUEST was queued */
    uint64_t probe_window_ns; /* prober: sending stops this long after PROBE_ACCEPT */
    uint64_t probe_sent;      /* prober: PROBE_DATA bytes queued */
    uint32_t probe_queued;    /* prober: PROBE_DATA frames queued and not yet written */
    uint32_t probe_tries;
    bool probe_accepted;
    bool probe_sent_all;
    uint8_t probe_nonce[CCOIP_AUTH_NONCE_BYTES]; /* target, authenticated: our CHALLENGE */
    char probe_url[300];
    uint8_t discard[PT_DISCARD_BYTES];
    bool ep_added; /* its socket is registered in the driver's epoll set */
} pt_conn;

typedef enum pt_io_kind { IO_SEND = 1, IO_RECV, IO_KERNEL } pt_io_kind;

typedef struct pt_io {
    bool used;
    bool done_queued;
    pt_io_kind kind;
    uint64_t io_id;
    uint32_t slot;
    uint64_t conn;
    ccoip_action act;
    uint64_t got;
    uint32_t frames;
    ccoip_quant_meta quant;
    bool fused; /* RING_RECV: its payload was reduced on arrival (pt_dp.h, fuses) */
} pt_io;

/* What the driver keeps of an op slot beside its regions, which are the core executor's
 * (d->xslots, ccoip_exec.h: bound at OP_BEGIN, spans resolved and checked there). */
typedef struct pt_slot {
    /* RING_RECVs that fused their announced REDUCE (ccoip_sm.h v5): those REDUCEs complete at
     * once. One per stripe of a step (a striped step has one per pool connection, §8.2). */
    uint32_t nfused;
    ccoip_action fused[CCOIP_P2P_POOL_MAX]; /* the REDUCEs announced: red_op, dtype, count, ... */
    pcclResult_t fused_result[CCOIP_P2P_POOL_MAX];
    uint8_t **tensors; /* CCOIP_REGION_TENSOR (sync commands): owned copies of the arrays */
    uint64_t *tensor_bytes;
    /* scratch/backup point into these, kept across ops (grown, never shrunk): fresh buffers per
     * op cost a page fault and a zeroed page per 4 KiB above glibc's mmap threshold. */
    uint8_t *cache_scratch, *cache_backup;
    uint64_t cache_scratch_cap, cache_backup_cap;
} pt_slot;

typedef enum pt_cmd_state { CMD_FREE = 0, CMD_POSTED, CMD_DONE, CMD_ABANDONED } pt_cmd_state;

typedef struct pt_cmd {
    pt_cmd_state state;
    uint64_t cmd_id;
    void *sendbuf;
    void *recvbuf;
    uint64_t send_bytes, recv_bytes; /* may alias (in-place kinds: one range holds the other) */
    uint8_t **tensors;               /* SYNC_SHARED_STATE: owned copies of the arrays */
    uint64_t *tensor_bytes;
    uint32_t ntensors;
    void *keys_mem; /* SYNC_SHARED_STATE: the keys (and names) the SUBMIT event points at */
    bool spin;      /* a latency-sensitive all-reduce (PT_SPIN_MAX_BYTES): counted in spin_cmds */
    pt_cmd_result res;
} pt_cmd;

typedef struct pt_job {
    uint64_t io_id;
    uint32_t slot;
    ccoip_kernel k; /* the kernel, resolved and checked by the core's executor */
    bool skip;      /* a REDUCE already done by a fused receive: completes with skip_result */
    pcclResult_t skip_result;
    struct pt_job *next;
} pt_job;

typedef struct pt_listener {
    struct pt_driver *d;
    uint32_t kind;
    nng_stream_listener *l;
    nng_aio *aio;
    bool armed;         /* an accept is pending on aio */
    bool paused;        /* at its cap: accepting again when a connection closes */
    uint32_t n_acc;     /* live connections it accepted */
    uint32_t cap;       /* at most this many */
    uint32_t streak;    /* accept failures in a row */
    uint64_t rearm_at;  /* backing off until then (0: not) */
    uint64_t log_at;    /* next accept-failure log line not before then */
    uint64_t log_quiet; /* failures not logged since the last line */
} pt_listener;

/* The master gives at most this many peer connections their own POSIX TCP link (two threads
 * each); the rest stay on nng streams, so a master of thousands of peers does not run thousands
 * of threads. Small groups get the low-latency control path. */
#define PT_MASTER_MAX_LINKS 64u
_Static_assert(PT_MASTER_MAX_PEERS + 64u == PT_MAX_CONNS, "pt.h: the master's table less 64");

/* An abandoned command's buffers (pt_cmd.c): the copies its op slots were rebound to. */
typedef struct pt_shadow {
    uint64_t cmd_id;
    uint8_t *mem;
    struct pt_shadow *next;
} pt_shadow;

/* Spin-then-sleep (docs/benchmarks.md, "Waiting"): the default polling budget before a thread
 * sleeps while a latency-sensitive operation is in flight, and the largest all-reduce that
 * counts as one. PCCL_SPIN_US overrides the budget (0 turns spinning off). */
#define PT_SPIN_US_DEFAULT 200u
#define PT_SPIN_MAX_BYTES  (1024u * 1024u)

struct pt_driver {
    bool is_master;
    uint32_t n_links; /* connections a transport took over (pt_tcp.h: two threads each) */
    ccoip_master *m;
    ccoip_peer *p;
    char who[48];
    char bind_host[64];
    /* The master cannot observe this peer's address (ipc:// master): the
     * peer advertises its listeners as tcp://bind_host:port URLs. */
    bool advertise_url;
    /* p2p links (ring, shared state, probes) over tls+tcp:// too: the master URL is tls+ and
     * PCCL_TLS_P2P is not "0" (docs/runtime-tests.md, tls+tcp://). */
    bool p2p_tls;
    bool tls_warned; /* the master logged its unauthenticated-TLS warning (pt_tls.c) */
    ccoip_codec_limits lim;
    /* Authenticated runs (pt_auth.c): the configuration the core got too; auth_ctr counts the
     * probe challenges drawn from its secret. */
    ccoip_auth_config auth;
    uint64_t auth_ctr;

    pthread_mutex_t mu;
    pthread_cond_t cv_ev;
    pthread_cond_t cv_cmd;
    pt_ev *q_head, *q_tail;
    /* Waiting (issue 7): with epfd >= 0 the driving thread waits in epoll_wait on efd (written
     * by q_push while someone polls; guarded by mu) and the sockets of parked small receives
     * (pt_dp.h; one-shot, armed when a receive parks, data.u64 = conn id). epfd < 0: cv_ev.
     * The baton: one thread at a time steps the core and runs its actions ("owned by the
     * driver thread" below means: by the baton holder). busy: an application thread holds it
     * to step its all-reduce SUBMIT itself (the queue being empty); the driver thread yields
     * meanwhile (cv_baton). */
    uint32_t polling;
    int efd;
    int epfd;
    bool busy;
    uint64_t deferred[64]; /* parked links found readable while busy, for the driver thread */
    uint32_t ndeferred;
    bool core_started; /* START was stepped: others may take the baton */
    bool api_submit;   /* PCCL_API_SUBMIT=0: every SUBMIT goes through the queue */
    /* Spin-then-sleep (docs/benchmarks.md, "Waiting"): while a small all-reduce is in flight
     * (spin_cmds > 0; the master: while a collective op is live) the driving thread polls
     * without blocking, yielding the core between polls, for up to spin_ns before it sleeps,
     * and the calling thread polls `notified` the same way before its condition variable. */
    uint64_t spin_ns;          /* PCCL_SPIN_US (default PT_SPIN_US_DEFAULT); 0: never spin */
    uint32_t spin_cmds;        /* posted commands with spin set (guarded by mu) */
    uint64_t linger_until;     /* spin until then although nothing is in flight (guarded by mu) */
    _Atomic uint64_t notified; /* NOTIFY count: a spinning caller's cue to look */
    pthread_cond_t cv_baton;
    bool stop;
    bool started;
    bool running;
    bool joined;
    pthread_t thread;

    /* kernel worker */
    pthread_mutex_t kmu;
    pthread_cond_t kcv;
    pthread_cond_t kcv_idle;
    pt_job *kq_head, *kq_tail;
    pt_job *kcur;
    bool kcur_cancel;
    bool kstop;
    bool kstarted;
    pthread_t kthread;

    /* owned by the driver thread */
    pt_conn *conns[PT_MAX_CONNS];
    uint32_t nconns;
    pt_listener listeners[PT_MAX_LISTENERS];
    pt_io ios[PT_MAX_IOS];
    uint32_t ios_hi; /* every used entry lies in ios[0 .. ios_hi): the scans stop there */
    pt_slot slots[PT_MAX_SLOTS];
    ccoip_exec_slot xslots[PT_MAX_SLOTS]; /* the op slots' regions (ccoip_exec.h) */
    ccoip_exec exec;                      /* over xslots */
    uint64_t cancelled[PT_CANCELLED_KEYS][3];
    uint32_t cancelled_next;
    uint64_t next_accept_id;
    uint64_t last_now;
    /* Bounded resources (pt_conn.c): the earliest transport deadline (listener back-off,
     * connection deadlines; UINT64_MAX none; may be early: pt_sweep recomputes it), live
     * accepted connections and their cap (table and descriptors), the send-queue byte bound. */
    uint64_t tdl;
    uint32_t acc_total;
    uint32_t acc_cap;
    uint64_t sq_max_owned;
    uint64_t sweep_log_at; /* rate limit of the deadline sweep's log line */
    /* Abandoned commands' shadow buffers (pt_cmd.c): what their op slots were rebound to. */
    pt_shadow *shadows;
    bool core_broken;
    struct pt_trace *trace; /* PCCL_TRACE: NULL when off (or after a write failure) */
    /* Tensor bytes the COPY kernel moved with memmove since creation (docs/benchmarks.md,
     * "copied_bytes"): added by whichever thread runs the kernel, published to pinfo at NOTIFY. */
    _Atomic uint64_t copied_bytes;

    /* guarded by mu */
    pt_cmd cmds[PT_MAX_CMDS];
    uint64_t next_cmd_id;
    pt_peer_info pinfo;
    pt_master_info minfo;
};
/* ---- pt_events.c: the event queue and the nng aio callbacks ---- */

/** Queues a core event to be fed as is (copied). Any thread. */
void pt_q_core(pt_driver *d, const ccoip_event *cev);
typedef struct pt_pipe pt_pipe;
/** Splices a and b (the master's relay, CCOIP_ACT_SPLICE): every byte of one goes to the other;
 *  false when they cannot be (then the caller closes both). */
bool pt_splice(pt_driver *d, pt_conn *a, pt_conn *b);
/** c goes: stops its pipe (if any) and queues its partner's closing. */
void pt_splice_detach(pt_conn *c);
/** Queues the closing of connection conn (PT_EV_CLOSE). */
void pt_q_close(pt_driver *d, uint64_t conn);
/** nng aio callbacks of dials and accepts (arg: the pt_conn, the pt_listener). */
void pt_cb_dial(void *arg);
void pt_cb_accept(void *arg);
/** Every data plane's completion (pt_dp_done_fn; arg: the driver): a SENT or RECEIVED event. */
void pt_dp_done(void *arg, uint64_t conn, bool send, int rv, uint64_t count);

/* ---- pt_trace.c: PCCL_TRACE ---- */

/** Opens the trace when PCCL_TRACE is set and writes its header (creating thread). */
void pt_trace_open(pt_driver *d, uint64_t seed, const ccoip_master_config *mcfg,
                   const ccoip_peer_config *pcfg);
/** EVENT before each step call (d->trace != NULL: the caller tests it, so tracing off costs
 * one pointer test per step and per action). */
void pt_trace_event(pt_driver *d, const ccoip_event *ev);
/** Hashes a step's result (d->trace != NULL). */
void pt_trace_step(pt_driver *d, pcclResult_t rc);
/** Hashes a polled action (d->trace != NULL). */
void pt_trace_action(pt_driver *d, const ccoip_action *a);
/** SET_PORT before a ccoip_peer_set_port call. */
void pt_trace_set_port(pt_driver *d, uint32_t listener, uint32_t port);
/** After draining: the deadline hashed, CHECKPOINT. */
void pt_trace_checkpoint(pt_driver *d, uint64_t deadline_ns);
/** TRAILER, flush, close (at destroy; NULL trace is fine). */
void pt_trace_close(pt_driver *d);

/* ---- pt_driver.c: the driver thread ---- */

/** Steps the core with ev (its now_ns is set here) and runs every action it drains. */
void pt_core_feed(pt_driver *d, ccoip_event *ev);

/* ---- pt_conn.c: connections, framing, sending and receiving, held frames, listeners ---- */

/** The connection with this id, or NULL (inline: looked up for every event). */
static inline pt_conn *pt_conn_find(pt_driver *d, uint64_t id)
{
    for (uint32_t i = 0; i < d->nconns; i++) {
        if (d->conns[i]->id == id) return d->conns[i];
    }
    return NULL;
}
/** A new connection (not up yet) in the table; NULL when full or out of memory. */
pt_conn *pt_conn_new(pt_driver *d, uint64_t id, bool data);
/** Frees c: stops its I/O (no callback runs and no buffer is touched when this returns). */
void pt_conn_free(pt_driver *d, pt_conn *c);
/** Closes c: fails its pending I/O; when tell_core, the core learns it with CONN_CLOSED. */
void pt_conn_close(pt_driver *d, pt_conn *c, bool tell_core);
/** The stream s of c is connected: a transport takes it over or it stays on nng; reading starts. */
void pt_conn_up(pt_driver *d, pt_conn *c, nng_stream *s);
/** Queues a frame on c (it is sent after the ones before it). Over c's send-queue bounds the
 * frame is dropped and c's closing is queued (PT_EV_CLOSE): c stays valid for the caller. */
void pt_send_enqueue(pt_driver *d, pt_conn *c, pt_sitem *it);
/** Removes it's share of c's send-queue bounds (it leaves the queue; the caller frees it). */
static inline void pt_sq_forget(pt_conn *c, const pt_sitem *it)
{
    c->sq_items--;
    if (it->bytes != NULL) c->sq_owned -= it->len;
}
/** A send on c finished (rv an nng error or 0; count bytes written). */
void pt_on_sent(pt_driver *d, pt_conn *c, int rv, uint64_t count);
/** A receive on c finished (rv an nng error or 0; count 0: end of stream). */
void pt_on_received(pt_driver *d, pt_conn *c, int rv, uint64_t count);
/** Issues the next receive of c's reader state, if none is under way. */
void pt_rd_next(pt_conn *c);
/** Resets c's reader to read a frame header. */
void pt_rd_start_header(pt_conn *c);
/** Lands, drops or holds the ring frame whose header is in c->dh. False when c was closed. */
bool pt_ring_dispatch(pt_driver *d, pt_conn *c);
/** As pt_ring_dispatch for a held frame of any kind (ring or STATE_DATA). */
bool pt_held_dispatch(pt_driver *d, pt_conn *c);
/** Re-examines every held frame (after a RING_RECV, a STATE_RECV or a CANCEL). */
void pt_held_retry(pt_driver *d);
/** Arms the one-shot epoll registration of c's descriptor: its receive parked (pt_dp.h). */
void pt_park_arm(pt_driver *d, pt_conn *c);
/** Accepts on l when it may (not armed, not backing off, under its caps); else pauses it. */
void pt_listener_arm(pt_driver *d, pt_listener *l);
/** A listener's accept finished with error rv: back off (bounded, growing), log (rate-limited). */
void pt_listener_failed(pt_driver *d, pt_listener *l, int rv);
/** Notes a transport deadline (listener back-off, connection deadline) for the driver's wait. */
static inline void pt_tdl_note(pt_driver *d, uint64_t t)
{
    if (t != 0 && t < d->tdl) d->tdl = t;
}
/** The transport deadline passed: re-arms listeners, closes connections past their deadline,
 *  completes dials waiting for TCP to confirm them. */
void pt_sweep(pt_driver *d);
/** A dial of c ended (rv 0 and s: connected): to the prober, or to the core as CONN_UP / CLOSED. */
void pt_dialed(pt_driver *d, pt_conn *c, int rv, nng_stream *s);
/** How often a dial nng reported early is checked, and how long it may take in all. */
#define PT_CONFIRM_POLL_MS 2u
/** Binds listener kind on url. pcclSuccess, pcclInvalidArgument, pcclInvalidUsage, pcclSystemError.
 */
pcclResult_t pt_listen_on(pt_driver *d, uint32_t kind, const char *url, uint32_t *port_out);

/* ---- pt_auth.c: authenticated runs ---- */
/** HMAC-SHA-256 (libcrypto): the core's ccoip_mac_fn in the runtime. */
void pt_auth_mac(const uint8_t key[CCOIP_AUTH_KEY_BYTES], const uint8_t *msg, size_t len,
                 uint8_t out[CCOIP_AUTH_MAC_BYTES]);
/** Fills *auth from PCCL_RUN_TOKEN_FILE / PCCL_RUN_TOKEN unless auth->mac is set already;
 *  neither set: stays off. pcclInvalidArgument for an unreadable, short or long token. */
pcclResult_t pt_auth_load(const char *who, ccoip_auth_config *auth);
/** A probe target's CHALLENGE (nonce kept in c). */
void pt_auth_probe_challenge(pt_driver *d, pt_conn *c, ccoip_data_header *h);
/** Signs a PROBE_REQUEST (its epoch, seq) for the target's CHALLENGE. */
void pt_auth_probe_sign(const pt_driver *d, const ccoip_data_header *challenge,
                        ccoip_data_header *req);
/** True when a PROBE_REQUEST carries the proof for c's CHALLENGE. */
bool pt_auth_probe_check(const pt_driver *d, const pt_conn *c, const ccoip_data_header *req);

/* ---- pt_probe.c: bandwidth probes ---- */
/** An accepted probe connection is up: authenticated runs challenge it. */
void pt_probe_target_up(pt_driver *d, pt_conn *c);

/** Queues PROBE_DONE for io_id. */
void pt_probe_done_queue(pt_driver *d, uint64_t io_id, bool ok, uint64_t bytes, uint64_t us);
/** Dials a probe connection (tries: BUSY answers so far). */
void pt_probe_dial(pt_driver *d, uint64_t conn, uint64_t io_id, const char *url, uint64_t want,
                   uint32_t tries);
/** A probe dial finished (rv an nng error or 0, s the stream). */
void pt_probe_dialed(pt_driver *d, pt_conn *c, int rv, nng_stream *s);
/** A probe frame arrived on c (header in c->dh). */
void pt_probe_frame(pt_driver *d, pt_conn *c);
/** A prober's PROBE_DATA frame was written: queue the next one, or the end of the probe. */
void pt_probe_sent(pt_driver *d, pt_conn *c);
/** A probe connection ended (closed by the remote, broke, or was refused): frees c. */
void pt_probe_end(pt_driver *d, pt_conn *c);

/* ---- pt_kernel.c: the kernel worker ---- */

/** Starts the worker thread. pcclSystemError when it cannot. */
pcclResult_t pt_kernel_start(pt_driver *d);
/** Stops and joins the worker (queued jobs must have been cancelled). */
void pt_kernel_stop(pt_driver *d);
/** Runs j inline (small, worker idle) or queues it; takes j. KERNEL_DONE is queued. */
void pt_kernel_submit(pt_driver *d, pt_job *j);
/** Removes queued kernels of slot and waits until the running one (if of slot) stopped. */
void pt_kernels_cancel(pt_driver *d, uint32_t slot);

/* ---- pt_tls.c: TLS configurations, URLs ---- */

/** Whether a tls+ listener may start (what: it, for the log): PCCL_TLS_CA is set, or
 * PCCL_TLS_ALLOW_UNAUTHENTICATED=1 accepts that nobody is authenticated (a WARN line when warn).
 * 0, or NNG_EINVAL with an ERROR line that names both variables. */
int pt_tls_listen_allowed(pt_driver *d, const char *what, bool warn);
/** For a tls+ URL, an nng TLS configuration from PCCL_TLS_*; 0 with *out NULL for others. */
int pt_tls_config_for(pt_driver *d, const char *url, bool server, nng_tls_config **out);
/** A dialer (with the run's TLS configuration for tls+ URLs) and the dial aio for c: 0 or the nng
 * error. */
int pt_dial_prepare(pt_driver *d, pt_conn *c, const char *url);
/** The URL a CONNECT or PROBE action names (its bytes, or its IP and port). 0, or -1. */
int pt_url_for(const ccoip_action *a, bool tls, char *url, size_t cap);

/* ---- pt_actions.c: action handlers, op slots, spans, the pending I/O table ---- */

/** Executes one action the core drained (never steps the core). */
void pt_act_run(pt_driver *d, const ccoip_action *a);
/** The pending I/O entry of io_id, or NULL. */
pt_io *pt_io_find(pt_driver *d, uint64_t io_id);
/** Frees an entry of the pending I/O table. */
void pt_io_free(pt_driver *d, pt_io *io);
/** Queues IO_DONE(r) for io. */
void pt_io_done_queue(pt_driver *d, pt_io *io, pcclResult_t r);
/** The bytes a span names, or NULL (no such slot, region or range). */
uint8_t *pt_span_ptr(pt_driver *d, const ccoip_span_ref *s);

/* ---- pt_cmd.c: commands ---- */

/** A command leaves flight (mu held): no longer a reason to spin. */
void pt_cmd_spin_end(pt_driver *d, pt_cmd *c);
/** Frees what a command owns and marks it free (mu held). */
void pt_cmd_release(pt_cmd *c);
/** Frees the shadow buffers of cmd_id once neither a command nor an op slot uses them. */
void pt_shadows_gc(pt_driver *d, uint64_t cmd_id);
/** Frees every shadow buffer (shutdown). */
void pt_shadows_free_all(pt_driver *d);
/** At shutdown (mu held): posted commands fail, abandoned ones are freed. */
void pt_cmds_fail_all(pt_driver *d);

#endif /* PT_INTERNAL_H */
