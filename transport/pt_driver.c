/*
 * pt_driver.c — the driver of one core object over nng streams (pt.h).
 *
 * The driver thread pops events from one locked queue (aio completions,
 * kernel completions, application commands), turns them into core events,
 * steps the core and executes every action it drains. Action handlers never
 * step the core themselves: what they cause (a failed I/O, a closed
 * connection) is queued as an event, so action payloads stay valid while the
 * queue drains (ccoip_sm.h ownership rules).
 */
#define _GNU_SOURCE
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <nng/nng.h>
#include <nng/supplemental/tls/tls.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "ccoip_dtype.h"
#include "ccoip_frame.h"
#include "ccoip_hash.h"
#include "ccoip_quant.h"
#include "ccoip_reduce.h"
#include "ccoip_trace.h"
#include "pt.h"
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
#define PT_NO_SLOT         UINT32_MAX

/* Kernels of at most this many bytes run on the driver thread when the kernel
 * worker is idle (issue 7, small messages): a hand-off to the worker and back
 * costs more than the kernel. Receives of at most this size are not fused
 * (their payload is then usually read at once, without waking a link thread). */
#ifndef PT_INLINE_BYTES
#define PT_INLINE_BYTES ((uint64_t)512 << 10)
#endif

/* ------------------------------------------------------------------------ */
/* Logging and time                                                         */
/* ------------------------------------------------------------------------ */

static int g_log_level = -1;
static pthread_mutex_t g_log_mu = PTHREAD_MUTEX_INITIALIZER;

static int log_level_parse(const char *s)
{
    if (s == NULL) return CCOIP_LOG_WARN;
    if (strcasecmp(s, "ERROR") == 0) return CCOIP_LOG_ERROR;
    if (strcasecmp(s, "WARN") == 0 || strcasecmp(s, "WARNING") == 0) return CCOIP_LOG_WARN;
    if (strcasecmp(s, "INFO") == 0) return CCOIP_LOG_INFO;
    if (strcasecmp(s, "DEBUG") == 0) return CCOIP_LOG_DEBUG;
    return CCOIP_LOG_WARN;
}

void pt_log_set_level(int level)
{
    pthread_mutex_lock(&g_log_mu);
    g_log_level = level;
    pthread_mutex_unlock(&g_log_mu);
}

int pt_log_level(void)
{
    pthread_mutex_lock(&g_log_mu);
    if (g_log_level < 0) g_log_level = log_level_parse(getenv("PCCL_LOG_LEVEL"));
    const int l = g_log_level;
    pthread_mutex_unlock(&g_log_mu);
    return l;
}

void pt_log(int level, const char *who, const char *fmt, ...)
{
    if (level > pt_log_level()) return;
    static const char *const names[] = {"ERROR", "WARN", "INFO", "DEBUG"};
    char line[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    const uint64_t t = pt_now_ns();
    fprintf(stderr, "[pccl %" PRIu64 ".%06" PRIu64 " %s %s] %s\n", t / 1000000000u,
            (t / 1000u) % 1000000u, names[level >= 0 && level <= 3 ? level : 3], who, line);
}

uint64_t pt_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ------------------------------------------------------------------------ */
/* Types                                                                    */
/* ------------------------------------------------------------------------ */

typedef enum pt_ev_type {
    PT_EV_ACCEPTED = 1, /* listener accepted a stream */
    PT_EV_DIALED,       /* a dial finished (stream or error) */
    PT_EV_SENT,         /* send aio finished */
    PT_EV_RECEIVED,     /* recv aio finished */
    PT_EV_CORE,         /* a core event to feed as is (IO_DONE, KERNEL_DONE, CONN_CLOSED, SUBMIT) */
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
    nng_stream *s;
    nng_stream_dialer *dialer;
    nng_aio *dial_aio;
    nng_aio *send_aio;
    nng_aio *recv_aio;
    bool send_busy;
    bool recv_busy;
    pt_sitem *sq_head, *sq_tail;
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
    bool rd_ctrl; /* RD_PAYLOAD of a data connection lands in buf (STATE_REQUEST/RESPONSE) */
    /* POSIX TCP data plane (pt_tcp.h): the stream's socket, taken over; NULL: nng I/O */
    pt_tcp_link *link;
    bool rd_fused; /* the payload under way is reduced into rd_fuse.target (link only) */
    pt_tcp_fuse rd_fuse;
    /* bandwidth probes */
    pt_probe_role probe;
    uint64_t probe_io;
    uint64_t probe_want; /* bytes announced */
    uint64_t probe_got;  /* target: bytes drained */
    uint64_t probe_t0;
    uint32_t probe_tries;
    bool probe_accepted;
    bool probe_sent_all;
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
    bool fused; /* RING_RECV: its payload was reduced on arrival (pt_tcp.h) */
} pt_io;

typedef struct pt_slot {
    bool used;
    uint64_t cmd_id;
    uint8_t *send;
    uint8_t *recv;
    uint64_t bytes;
    uint8_t *scratch;
    uint64_t scratch_bytes;
    uint8_t *backup;
    uint64_t backup_bytes;
    uint64_t epoch, tag, seq; /* key of the op's ring frames, from its ring actions */
    bool keyed;
    /* RING_RECVs that fused their announced REDUCE (ccoip_sm.h v5): those REDUCEs complete at
     * once. One per stripe of a step (a striped step has one per pool connection, §8.2). */
    uint32_t nfused;
    ccoip_action fused[CCOIP_P2P_POOL_MAX]; /* the REDUCEs announced: red_op, dtype, count, ... */
    pcclResult_t fused_result[CCOIP_P2P_POOL_MAX];
    uint8_t **tensors; /* CCOIP_REGION_TENSOR (sync commands), owned copy of the arrays */
    uint64_t *tensor_bytes;
    uint32_t ntensors;
    /* scratch/backup point into these, kept across ops (grown, never shrunk): fresh buffers per
     * op cost a page fault and a zeroed page per 4 KiB above glibc's mmap threshold. */
    uint8_t *cache_scratch, *cache_backup;
    uint64_t cache_scratch_cap, cache_backup_cap;
} pt_slot;

/* Clears an op slot, keeping its buffer cache. */
static void slot_reset(pt_slot *o)
{
    uint8_t *cs = o->cache_scratch, *cb = o->cache_backup;
    uint64_t csc = o->cache_scratch_cap, cbc = o->cache_backup_cap;
    memset(o, 0, sizeof *o);
    o->cache_scratch = cs;
    o->cache_backup = cb;
    o->cache_scratch_cap = csc;
    o->cache_backup_cap = cbc;
}

/* A buffer of at least n bytes from a slot's cache (NULL when out of memory). */
static uint8_t *slot_cached(uint8_t **buf, uint64_t *cap, uint64_t n)
{
    if (*buf == NULL || *cap < n) {
        free(*buf);
        *buf = malloc((size_t)n);
        *cap = *buf != NULL ? n : 0;
    }
    return *buf;
}

typedef enum pt_cmd_state { CMD_FREE = 0, CMD_POSTED, CMD_DONE, CMD_ABANDONED } pt_cmd_state;

typedef struct pt_cmd {
    pt_cmd_state state;
    uint64_t cmd_id;
    void *sendbuf;
    void *recvbuf;
    uint64_t bytes;
    uint8_t **tensors; /* SYNC_SHARED_STATE: owned copies of the arrays */
    uint64_t *tensor_bytes;
    uint32_t ntensors;
    void *keys_mem; /* SYNC_SHARED_STATE: the keys (and names) the SUBMIT event points at */
    bool spin;      /* a latency-sensitive all-reduce (PT_SPIN_MAX_BYTES): counted in spin_cmds */
    pt_cmd_result res;
} pt_cmd;

typedef struct pt_job {
    uint64_t io_id;
    uint32_t slot;
    ccoip_action act;
    uint8_t *dst;
    const uint8_t *src;
    const uint8_t *base; /* REDUCE with a base (ccoip_sm.h v6): dst = base op src; else NULL */
    char name[CCOIP_STATE_NAME_MAX]; /* HASH: the key (copied: action bytes are borrowed) */
    bool skip; /* a REDUCE already done by a fused receive: completes with skip_result */
    pcclResult_t skip_result;
    struct pt_job *next;
} pt_job;

typedef struct pt_listener {
    struct pt_driver *d;
    uint32_t kind;
    nng_stream_listener *l;
    nng_aio *aio;
} pt_listener;

/* The master gives at most this many peer connections their own POSIX TCP link (two threads
 * each); the rest stay on nng streams, so a master of thousands of peers does not run thousands
 * of threads. Small groups get the low-latency control path. */
#define PT_MASTER_MAX_LINKS 64u

/* Spin-then-sleep (docs/benchmarks.md, "Waiting"): the default polling budget before a thread
 * sleeps while a latency-sensitive operation is in flight, and the largest all-reduce that
 * counts as one. PCCL_SPIN_US overrides the budget (0 turns spinning off). */
#define PT_SPIN_US_DEFAULT 200u
#define PT_SPIN_MAX_BYTES  (1024u * 1024u)

struct pt_driver {
    bool is_master;
    uint32_t n_links; /* connections on a POSIX TCP link */
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
    ccoip_codec_limits lim;

    pthread_mutex_t mu;
    pthread_cond_t cv_ev;
    pthread_cond_t cv_cmd;
    pt_ev *q_head, *q_tail;
    /* Waiting (issue 7): with epfd >= 0 the driving thread waits in epoll_wait on efd (written
     * by q_push while someone polls; guarded by mu) and the sockets of parked small receives
     * (pt_tcp.h; one-shot, armed when a receive parks, data.u64 = conn id). epfd < 0: cv_ev.
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
    uint64_t cancelled[PT_CANCELLED_KEYS][3];
    uint32_t cancelled_next;
    uint64_t next_accept_id;
    uint64_t last_now;
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

/* ------------------------------------------------------------------------ */
/* Event queue                                                              */
/* ------------------------------------------------------------------------ */

static void q_push(pt_driver *d, pt_ev *ev)
{
    ev->next = NULL;
    pthread_mutex_lock(&d->mu);
    if (d->q_tail != NULL) {
        d->q_tail->next = ev;
    } else {
        d->q_head = ev;
    }
    d->q_tail = ev;
    pthread_cond_broadcast(&d->cv_ev);
    if (d->polling > 0) {
        const uint64_t one = 1;
        (void)!write(d->efd, &one, sizeof one);
    }
    pthread_mutex_unlock(&d->mu);
}

/* Arms the one-shot epoll registration of c's socket when its small receive parked. */
static void park_arm(pt_driver *d, pt_conn *c)
{
    if (d->epfd < 0 || c->link == NULL || !pt_tcp_link_parked(c->link)) return;
    struct epoll_event e;
    memset(&e, 0, sizeof e);
    e.events = EPOLLIN | EPOLLONESHOT;
    e.data.u64 = c->id;
    const int fd = pt_tcp_link_fd(c->link);
    if (epoll_ctl(d->epfd, c->ep_added ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, fd, &e) == 0) {
        c->ep_added = true;
    }
}

static pt_ev *ev_new(pt_ev_type type)
{
    pt_ev *ev = calloc(1, sizeof *ev);
    if (ev == NULL) {
        fprintf(stderr, "pccl: out of memory for an event\n");
        abort();
    }
    ev->type = type;
    return ev;
}

static void q_core(pt_driver *d, const ccoip_event *cev)
{
    pt_ev *ev = ev_new(PT_EV_CORE);
    ev->core = *cev;
    q_push(d, ev);
}

/* ------------------------------------------------------------------------ */
/* aio callbacks: lock, enqueue, signal                                     */
/* ------------------------------------------------------------------------ */

/* Queues the outcome of a finished stream send or receive on c. */
static void q_io_result(pt_conn *c, pt_ev_type type, nng_aio *aio)
{
    pt_ev *ev = ev_new(type);
    ev->conn = c->id;
    ev->rv = nng_aio_result(aio);
    ev->count = nng_aio_count(aio);
    q_push(c->d, ev);
}

static void cb_send(void *arg)
{
    pt_conn *c = arg;
    q_io_result(c, PT_EV_SENT, c->send_aio);
}

static void cb_recv(void *arg)
{
    pt_conn *c = arg;
    q_io_result(c, PT_EV_RECEIVED, c->recv_aio);
}

/* A POSIX TCP link finished a whole send or receive (pt_tcp.h): the same
 * events as an nng aio's, one per request. */
static void cb_link(void *arg, uint64_t conn, bool send, int err, uint64_t count)
{
    pt_ev *ev = ev_new(send ? PT_EV_SENT : PT_EV_RECEIVED);
    ev->conn = conn;
    ev->rv = err != 0 ? NNG_ECONNRESET : 0;
    ev->count = count;
    q_push((pt_driver *)arg, ev);
}

static void cb_dial(void *arg)
{
    pt_conn *c = arg;
    pt_ev *ev = ev_new(PT_EV_DIALED);
    ev->conn = c->id;
    ev->rv = nng_aio_result(c->dial_aio);
    ev->stream = ev->rv == 0 ? nng_aio_get_output(c->dial_aio, 0) : NULL;
    q_push(c->d, ev);
}

static void cb_accept(void *arg)
{
    pt_listener *l = arg;
    pt_ev *ev = ev_new(PT_EV_ACCEPTED);
    ev->listener = l->kind;
    ev->rv = nng_aio_result(l->aio);
    ev->stream = ev->rv == 0 ? nng_aio_get_output(l->aio, 0) : NULL;
    q_push(l->d, ev);
}

/* ------------------------------------------------------------------------ */
/* Core access                                                              */
/* ------------------------------------------------------------------------ */

static void act_run(pt_driver *d, const ccoip_action *a);

static void snapshot(pt_driver *d)
{
    pthread_mutex_lock(&d->mu);
    if (d->is_master) {
        d->minfo.epoch = ccoip_master_epoch(d->m);
        d->minfo.accepted = ccoip_master_num_accepted(d->m);
        d->minfo.pending = ccoip_master_num_pending(d->m);
    } else {
        /* The world sizes pcclGetAttribute reports change only when an API call completes
         * (cmd_done): between calls they stay what the last call saw, even if a peer leaves
         * meanwhile (docs/semantics.md, "Attributes"). */
        d->pinfo.id = ccoip_peer_id(d->p);
        d->pinfo.accepted = ccoip_peer_is_accepted(d->p);
        d->pinfo.failed = ccoip_peer_is_failed(d->p);
    }
    pthread_mutex_unlock(&d->mu);
}

static void who_update(pt_driver *d)
{
    if (d->is_master) {
        snprintf(d->who, sizeof d->who, "master");
    } else {
        snprintf(d->who, sizeof d->who, "peer %" PRIu64, ccoip_peer_id(d->p));
    }
}

/* ------------------------------------------------------------------------ */
/* PCCL_TRACE (core/ccoip_trace.h): the trace of the core this driver owns  */
/* ------------------------------------------------------------------------ */

/* Records are encoded into a buffer written out when full and at destroy;
 * one larger than the buffer grows it. Any write failure closes the file
 * and turns tracing off for this core with one log line. The header is
 * written by the creating thread before the driver thread starts, records
 * by the driver thread, the trailer after it was joined. */
#define PT_TRACE_BUF_BYTES ((uint64_t)256 << 10)

typedef struct pt_trace {
    FILE *f;
    char path[4096];
    uint8_t *buf;
    uint64_t len, cap;
    ccoip_trace_hasher h;
    uint64_t events;
    uint64_t polled; /* actions polled since the last record */
} pt_trace;

static pthread_mutex_t g_trace_mu = PTHREAD_MUTEX_INITIALIZER;
static uint32_t g_trace_cores; /* traced cores created in this process */

static void trace_free(pt_driver *d)
{
    pt_trace *t = d->trace;
    if (t == NULL) return;
    if (t->f != NULL) fclose(t->f);
    free(t->buf);
    free(t);
    d->trace = NULL;
}

static void trace_fail(pt_driver *d, const char *what)
{
    pt_log(CCOIP_LOG_ERROR, d->who, "PCCL_TRACE: %s %s failed (%s): tracing is off for this core",
           what, d->trace->path, strerror(errno));
    trace_free(d);
}

static bool trace_flush(pt_driver *d)
{
    pt_trace *t = d->trace;
    if (t->len > 0 && fwrite(t->buf, 1, (size_t)t->len, t->f) != (size_t)t->len) {
        trace_fail(d, "writing");
        return false;
    }
    t->len = 0;
    return true;
}

/* Room for n more bytes (NULL: tracing just turned off). */
static uint8_t *trace_room(pt_driver *d, uint64_t n)
{
    pt_trace *t = d->trace;
    if (n == 0) {
        pt_log(CCOIP_LOG_ERROR, d->who, "PCCL_TRACE: a record cannot be encoded: tracing is off");
        trace_free(d);
        return NULL;
    }
    if (t->cap - t->len < n && !trace_flush(d)) return NULL;
    if (t->cap < n) {
        uint8_t *nb = realloc(t->buf, (size_t)n);
        if (nb == NULL) {
            errno = ENOMEM;
            trace_fail(d, "buffering for");
            return NULL;
        }
        t->buf = nb;
        t->cap = n;
    }
    return t->buf + t->len;
}

/* Appends one record: ENCODE_CALL is a ccoip_trace_encode_* call whose last
 * two arguments are `out, cap` (declared here): evaluated once with out NULL
 * to size the record, then again into the room reserved for it. */
#define TRACE_PUT(d, ENCODE_CALL_WITH_OUT_CAP)                                                     \
    do {                                                                                           \
        uint8_t *out = NULL;                                                                       \
        uint64_t cap = 0;                                                                          \
        const uint64_t need = ENCODE_CALL_WITH_OUT_CAP;                                            \
        out = trace_room((d), need);                                                               \
        if (out != NULL) {                                                                         \
            cap = need;                                                                            \
            (void)ENCODE_CALL_WITH_OUT_CAP;                                                        \
            (d)->trace->len += need;                                                               \
        }                                                                                          \
    } while (0)

/* A POLLED record for the actions polled since the last record, if any. */
static void trace_polled(pt_driver *d)
{
    if (d->trace == NULL || d->trace->polled == 0) return;
    const uint64_t n = d->trace->polled;
    d->trace->polled = 0;
    TRACE_PUT(d, ccoip_trace_encode_polled(n, out, cap));
}

/* Opens the trace when PCCL_TRACE is set: the first traced core of the
 * process writes to the path as given, the n-th after it to "<path>.<n>". */
static void trace_open(pt_driver *d, uint64_t seed, const ccoip_master_config *mcfg,
                       const ccoip_peer_config *pcfg)
{
    const char *env = getenv("PCCL_TRACE");
    if (env == NULL || env[0] == '\0') return;
    pt_trace *t = calloc(1, sizeof *t);
    if (t == NULL) {
        pt_log(CCOIP_LOG_ERROR, d->who, "PCCL_TRACE: out of memory: tracing is off");
        return;
    }
    pthread_mutex_lock(&g_trace_mu);
    const uint32_t n = g_trace_cores++;
    pthread_mutex_unlock(&g_trace_mu);
    int w = n == 0 ? snprintf(t->path, sizeof t->path, "%s", env)
                   : snprintf(t->path, sizeof t->path, "%s.%u", env, n);
    d->trace = t;
    if (w < 0 || (size_t)w >= sizeof t->path) {
        errno = ENAMETOOLONG;
        trace_fail(d, "opening");
        return;
    }
    t->buf = malloc((size_t)PT_TRACE_BUF_BYTES);
    t->cap = t->buf != NULL ? PT_TRACE_BUF_BYTES : 0;
    t->f = fopen(t->path, "wb");
    if (t->f == NULL || t->buf == NULL) {
        if (t->buf == NULL) errno = ENOMEM;
        trace_fail(d, "opening");
        return;
    }
    setvbuf(t->f, NULL, _IONBF, 0); /* buffered here: a failed write shows at once */
    ccoip_trace_hasher_init(&t->h);
    ccoip_trace_header h;
    memset(&h, 0, sizeof h);
    h.version = CCOIP_TRACE_VERSION;
    h.seed = seed;
    if (d->is_master) {
        h.machine = CCOIP_TRACE_MASTER;
        if (mcfg != NULL) h.master = *mcfg;
    } else {
        h.machine = CCOIP_TRACE_PEER;
        h.peer = *pcfg;
    }
    TRACE_PUT(d, ccoip_trace_encode_header(&h, out, cap));
    if (d->trace != NULL) pt_log(CCOIP_LOG_INFO, d->who, "PCCL_TRACE: writing %s", t->path);
}

/* EVENT before each step call. */
static void trace_event(pt_driver *d, const ccoip_event *ev)
{
    if (d->trace == NULL) return;
    trace_polled(d);
    if (d->trace == NULL) return;
    TRACE_PUT(d, ccoip_trace_encode_event(ev, out, cap));
    if (d->trace != NULL) d->trace->events++;
}

/* SET_PORT before a ccoip_peer_set_port call. */
static void trace_set_port(pt_driver *d, uint32_t listener, uint32_t port)
{
    if (d->trace == NULL) return;
    trace_polled(d);
    if (d->trace == NULL) return;
    TRACE_PUT(d, ccoip_trace_encode_set_port(listener, port, NULL, out, cap));
}

/* After draining: hash the deadline, CHECKPOINT. */
static void trace_checkpoint(pt_driver *d, uint64_t deadline_ns)
{
    if (d->trace == NULL) return;
    pt_trace *t = d->trace;
    ccoip_trace_hash_deadline(&t->h, deadline_ns);
    t->polled = 0; /* a CHECKPOINT drains every action */
    const uint64_t events = t->events, hash = t->h.hash;
    TRACE_PUT(d, ccoip_trace_encode_checkpoint(events, hash, out, cap));
}

/* TRAILER, flush, close (at destroy). */
static void trace_close(pt_driver *d)
{
    if (d->trace == NULL) return;
    pt_trace *t = d->trace;
    const uint64_t events = t->events, actions = t->h.actions, hash = t->h.hash;
    TRACE_PUT(d, ccoip_trace_encode_trailer(events, actions, hash, out, cap));
    if (d->trace == NULL || !trace_flush(d)) return;
    FILE *f = d->trace->f;
    d->trace->f = NULL;
    if (fclose(f) != 0) {
        trace_fail(d, "closing");
        return;
    }
    trace_free(d);
}

static uint64_t core_deadline(pt_driver *d);

static void core_feed(pt_driver *d, ccoip_event *ev)
{
    if (d->core_broken) return;
    uint64_t now = pt_now_ns();
    if (now < d->last_now) now = d->last_now;
    d->last_now = now;
    ev->now_ns = now;
    trace_event(d, ev);
    const pcclResult_t rc = d->is_master ? ccoip_master_step(d->m, ev) : ccoip_peer_step(d->p, ev);
    if (d->trace != NULL) ccoip_trace_hash_step(&d->trace->h, (int)rc);
    if (rc == pcclInternalError) {
        pt_log(CCOIP_LOG_ERROR, d->who, "core step failed (bounded table overflow): %d", (int)rc);
        d->core_broken = true;
    } else if (rc != pcclSuccess) {
        pt_log(CCOIP_LOG_DEBUG, d->who, "core step(event %d) returned %d", (int)ev->type, (int)rc);
    }
    ccoip_action a;
    while (d->is_master ? ccoip_master_poll(d->m, &a) : ccoip_peer_poll(d->p, &a)) {
        if (d->trace != NULL) {
            ccoip_trace_hash_action(&d->trace->h, &a);
            d->trace->polled++;
        }
        act_run(d, &a);
    }
    if (d->trace != NULL) trace_checkpoint(d, core_deadline(d));
    who_update(d);
    snapshot(d);
}

static uint64_t core_deadline(pt_driver *d)
{
    return d->is_master ? ccoip_master_deadline_ns(d->m) : ccoip_peer_deadline_ns(d->p);
}

/* ------------------------------------------------------------------------ */
/* Connections                                                              */
/* ------------------------------------------------------------------------ */

static pt_conn *conn_find(pt_driver *d, uint64_t id)
{
    for (uint32_t i = 0; i < d->nconns; i++) {
        if (d->conns[i]->id == id) return d->conns[i];
    }
    return NULL;
}

static pt_conn *conn_new(pt_driver *d, uint64_t id, bool data)
{
    if (d->nconns >= PT_MAX_CONNS) {
        pt_log(CCOIP_LOG_ERROR, d->who, "connection table full (%u)", PT_MAX_CONNS);
        return NULL;
    }
    pt_conn *c = calloc(1, sizeof *c);
    if (c == NULL) return NULL;
    c->id = id;
    c->d = d;
    c->data = data;
    if (nng_aio_alloc(&c->send_aio, cb_send, c) != 0 ||
        nng_aio_alloc(&c->recv_aio, cb_recv, c) != 0) {
        if (c->send_aio != NULL) nng_aio_free(c->send_aio);
        free(c);
        return NULL;
    }
    d->conns[d->nconns++] = c;
    return c;
}

/* Fails every pending ring I/O on conn (the stream broke or was closed). */
static void ios_fail_on_conn(pt_driver *d, uint64_t conn)
{
    for (uint32_t i = 0; i < d->ios_hi; i++) {
        pt_io *io = &d->ios[i];
        if (!io->used || io->done_queued || io->conn != conn) continue;
        if (io->kind != IO_SEND && io->kind != IO_RECV) continue;
        io->done_queued = true;
        ccoip_event ev;
        memset(&ev, 0, sizeof ev);
        ev.type = CCOIP_EV_IO_DONE;
        ev.done.io_id = io->io_id;
        ev.done.result = pcclRankConnectionLost;
        q_core(d, &ev);
    }
}

/* Frees c: stops its aios (their callbacks have run when this returns). */
static void conn_free(pt_driver *d, pt_conn *c)
{
    if (c->ep_added && c->link != NULL) {
        (void)epoll_ctl(d->epfd, EPOLL_CTL_DEL, pt_tcp_link_fd(c->link), NULL);
    }
    if (c->link != NULL) d->n_links--;
    pt_tcp_link_close(c->link); /* its threads are joined: no buffer is touched any more */
    c->link = NULL;
    if (c->s != NULL) nng_stream_close(c->s);
    if (c->dial_aio != NULL) {
        /* A dial that completed queued its stream in a DIALED event: that
         * event owns it (on_dialed closes it when the conn is gone). */
        nng_aio_stop(c->dial_aio);
        nng_aio_free(c->dial_aio);
    }
    nng_aio_stop(c->send_aio);
    nng_aio_stop(c->recv_aio);
    nng_aio_free(c->send_aio);
    nng_aio_free(c->recv_aio);
    if (c->s != NULL) nng_stream_free(c->s);
    if (c->dialer != NULL) nng_stream_dialer_free(c->dialer);
    while (c->sq_head != NULL) {
        pt_sitem *it = c->sq_head;
        c->sq_head = it->next;
        free(it->bytes);
        free(it);
    }
    free(c->buf);
    for (uint32_t i = 0; i < d->nconns; i++) {
        if (d->conns[i] == c) {
            d->conns[i] = d->conns[--d->nconns];
            break;
        }
    }
    free(c);
}

/* Closes c. When tell_core, the core learns it with CONN_CLOSED (after the
 * failed I/O completions); a CLOSE action does not tell it. */
static void probe_end(pt_driver *d, pt_conn *c);

static void conn_close(pt_driver *d, pt_conn *c, bool tell_core)
{
    if (c->probe != PROBE_NONE) {
        probe_end(d, c); /* the core never hears of probe connections */
        return;
    }
    const uint64_t id = c->id;
    ios_fail_on_conn(d, id);
    conn_free(d, c);
    if (tell_core) {
        ccoip_event ev;
        memset(&ev, 0, sizeof ev);
        ev.type = CCOIP_EV_CONN_CLOSED;
        ev.conn = id;
        q_core(d, &ev);
    }
}

/* ---- sending ---- */

static void send_kick(pt_driver *d, pt_conn *c);

static void send_enqueue(pt_driver *d, pt_conn *c, pt_sitem *it)
{
    it->next = NULL;
    if (c->sq_tail != NULL) {
        c->sq_tail->next = it;
    } else {
        c->sq_head = it;
    }
    c->sq_tail = it;
    send_kick(d, c);
}

static void send_kick(pt_driver *d, pt_conn *c)
{
    (void)d;
    if (c->send_busy || !c->up || c->sq_head == NULL) return;
    pt_sitem *it = c->sq_head;
    nng_iov iov[2];
    unsigned n = 0;
    const uint8_t *head = it->ring ? it->hdr : it->bytes;
    if (it->done < it->len) {
        iov[n].iov_buf = (void *)(uintptr_t)(head + it->done);
        iov[n].iov_len = (size_t)(it->len - it->done);
        n++;
        if (it->payload_len > 0) {
            iov[n].iov_buf = (void *)(uintptr_t)it->payload;
            iov[n].iov_len = (size_t)it->payload_len;
            n++;
        }
    } else {
        const uint64_t off = it->done - it->len;
        iov[n].iov_buf = (void *)(uintptr_t)(it->payload + off);
        iov[n].iov_len = (size_t)(it->payload_len - off);
        n++;
    }
    c->send_busy = true;
    if (c->link != NULL) {
        pt_tcp_link_send(c->link, iov[0].iov_buf, iov[0].iov_len, n > 1 ? iov[1].iov_buf : NULL,
                         n > 1 ? iov[1].iov_len : 0);
        return;
    }
    nng_aio_set_iov(c->send_aio, n, iov);
    nng_stream_send(c->s, c->send_aio);
}

static void on_sent(pt_driver *d, pt_conn *c, int rv, uint64_t count)
{
    c->send_busy = false;
    if (rv != 0 || c->sq_head == NULL) {
        pt_log(rv == NNG_ECLOSED ? CCOIP_LOG_DEBUG : CCOIP_LOG_INFO, d->who,
               "connection %" PRIu64 ": send failed: %s", c->id, nng_strerror(rv));
        conn_close(d, c, true);
        return;
    }
    pt_sitem *it = c->sq_head;
    it->done += count;
    if (it->done < it->len + it->payload_len) {
        send_kick(d, c); /* short write: continue where it stopped */
        return;
    }
    c->sq_head = it->next;
    if (c->sq_head == NULL) c->sq_tail = NULL;
    if (it->probe_last) c->probe_sent_all = true;
    if (it->ring && it->last) {
        for (uint32_t i = 0; i < d->ios_hi; i++) {
            pt_io *io = &d->ios[i];
            if (io->used && io->io_id == it->io_id && io->kind == IO_SEND && !io->done_queued) {
                io->done_queued = true;
                ccoip_event ev;
                memset(&ev, 0, sizeof ev);
                ev.type = CCOIP_EV_IO_DONE;
                ev.done.io_id = it->io_id;
                ev.done.result = pcclSuccess;
                q_core(d, &ev);
                break;
            }
        }
    }
    free(it->bytes);
    free(it);
    send_kick(d, c);
}

/* ---- receiving ---- */

static void recv_issue(pt_conn *c, uint8_t *dst, uint64_t want)
{
    if (c->link != NULL) {
        c->recv_busy = true;
        pt_tcp_link_recv(c->link, dst, want, NULL);
        park_arm(c->d, c);
        return;
    }
    nng_iov iov;
    iov.iov_buf = dst;
    iov.iov_len = (size_t)want;
    nng_aio_set_iov(c->recv_aio, 1, &iov);
    c->recv_busy = true;
    nng_stream_recv(c->s, c->recv_aio);
}

static void rd_next(pt_conn *c)
{
    if (c->recv_busy || !c->up) return;
    switch (c->rd) {
    case RD_HDR:
        recv_issue(c, c->hdr + c->rd_have, c->hdr_want - c->rd_have);
        break;
    case RD_PAYLOAD:
        if (c->data && c->rd_ctrl) {
            recv_issue(c, c->buf + CCOIP_DATA_HEADER_BYTES + c->rd_have, c->rd_want - c->rd_have);
        } else if (c->data && c->rd_fused && c->rd_have == 0) {
            c->recv_busy = true; /* the link reads it whole, reducing it as it arrives */
            pt_tcp_link_recv(c->link, NULL, c->rd_want, &c->rd_fuse);
        } else if (c->data) {
            recv_issue(c, c->rd_dst + c->rd_have, c->rd_want - c->rd_have);
        } else {
            recv_issue(c, c->buf + CCOIP_CTRL_HEADER_BYTES + c->rd_have, c->rd_want - c->rd_have);
        }
        break;
    case RD_DISCARD: {
        uint64_t n = c->rd_want - c->rd_have;
        if (n > PT_DISCARD_BYTES) n = PT_DISCARD_BYTES;
        recv_issue(c, c->discard, n);
        break;
    }
    case RD_HELD:
        break;
    }
}

static void rd_start_header(pt_conn *c)
{
    c->rd = RD_HDR;
    c->rd_have = 0;
    c->rd_ctrl = false;
    c->rd_fused = false;
    c->hdr_want = c->data ? CCOIP_DATA_HEADER_BYTES : CCOIP_CTRL_HEADER_BYTES;
}

static pt_io *io_find(pt_driver *d, uint64_t io_id)
{
    for (uint32_t i = 0; i < d->ios_hi; i++) {
        if (d->ios[i].used && d->ios[i].io_id == io_id) return &d->ios[i];
    }
    return NULL;
}

static uint8_t *span_ptr(pt_driver *d, const ccoip_span_ref *s)
{
    if (s->op_slot >= PT_MAX_SLOTS || !d->slots[s->op_slot].used) return NULL;
    pt_slot *o = &d->slots[s->op_slot];
    uint8_t *base = NULL;
    uint64_t size = 0;
    switch (s->region) {
    case CCOIP_REGION_SEND:
        base = o->send;
        size = o->bytes;
        break;
    case CCOIP_REGION_RECV:
        base = o->recv;
        size = o->bytes;
        break;
    case CCOIP_REGION_SCRATCH:
        base = o->scratch;
        size = o->scratch_bytes;
        break;
    case CCOIP_REGION_BACKUP:
        base = o->backup;
        size = o->backup_bytes;
        break;
    case CCOIP_REGION_TENSOR:
        if (s->tensor >= o->ntensors) return NULL;
        base = o->tensors[s->tensor];
        size = o->tensor_bytes[s->tensor];
        break;
    default:
        return NULL;
    }
    if (s->offset > size || s->length > size - s->offset) return NULL;
    if (base == NULL) return (uint8_t *)o; /* zero-length region: any valid pointer */
    return base + s->offset;
}

static bool key_cancelled(const pt_driver *d, const ccoip_data_header *h)
{
    if ((h->epoch | h->tag | h->seq) == 0) return false;
    for (uint32_t i = 0; i < PT_CANCELLED_KEYS; i++) {
        if (d->cancelled[i][0] == h->epoch && d->cancelled[i][1] == h->tag &&
            d->cancelled[i][2] == h->seq) {
            return true;
        }
    }
    return false;
}

static void io_done_queue(pt_driver *d, pt_io *io, pcclResult_t r)
{
    io->done_queued = true;
    ccoip_event ev;
    memset(&ev, 0, sizeof ev);
    ev.type = CCOIP_EV_IO_DONE;
    ev.done.io_id = io->io_id;
    ev.done.result = r;
    ev.done.quant = io->quant;
    q_core(d, &ev);
}

/* A RING_RECV that announces its REDUCE (ccoip_sm.h v5) over a link, whose
 * one frame covers the whole span: the link reduces the payload into the
 * REDUCE's destination as it arrives (pt_tcp.h); SCRATCH is never written. */
static void fuse_try(pt_driver *d, pt_conn *c, pt_io *io)
{
    const ccoip_action *a = &io->act;
    const ccoip_data_header *h = &c->dh;
    if (!a->reduce || h->offset != 0 || h->length != a->dst.length || h->length == 0) return;
    if (h->length <= PT_INLINE_BYTES) return; /* small: read inline, reduced inline */
    if (!ccoip_dtype_valid(a->dtype)) return;
    const uint64_t esz = ccoip_dtype_size(a->dtype);
    if (a->count == 0 || a->count * esz != h->length || a->src.length != h->length) return;
    if (a->src.op_slot != a->op_slot || a->dst.op_slot != a->op_slot) return;
    uint8_t *target = span_ptr(d, &a->src);
    if (target == NULL) return;
    const uint8_t *base = NULL;
    if (a->base.length > 0) {
        if (a->base.length != h->length || a->base.op_slot != a->op_slot) return;
        base = span_ptr(d, &a->base);
        if (base == NULL) return;
    }
    c->rd_fused = true;
    c->rd_fuse.target = target;
    c->rd_fuse.base = base;
    c->rd_fuse.op = a->red_op;
    c->rd_fuse.dtype = a->dtype;
    io->fused = true;
}

/* A ring frame header is in c->dh: land it, drop it, or hold it
 * (ccoip_sm.h, data connections). Returns false when c was closed. */
static bool ring_dispatch(pt_driver *d, pt_conn *c)
{
    const ccoip_data_header *h = &c->dh;
    if (h->epoch < c->max_recv_epoch || key_cancelled(d, h)) {
        c->rd = RD_DISCARD; /* an older epoch's or a cancelled op's frame (§8.2) */
        c->rd_have = 0;
        c->rd_want = h->length;
        if (h->length == 0) rd_start_header(c);
        rd_next(c);
        return true;
    }
    pt_io *exact = NULL, *same_op = NULL;
    for (uint32_t i = 0; i < d->ios_hi; i++) {
        pt_io *io = &d->ios[i];
        if (!io->used || io->done_queued || io->kind != IO_RECV || io->conn != c->id) continue;
        if (io->act.type != CCOIP_ACT_RING_RECV) continue;
        if (io->act.epoch != h->epoch || io->act.tag != h->tag || io->act.seq != h->seq) continue;
        if (io->act.chunk == h->chunk && io->act.step == h->step) {
            exact = io;
            break;
        }
        same_op = io;
    }
    pt_io *bad = NULL;
    const char *why = NULL;
    if (exact != NULL) {
        if (h->offset > exact->act.dst.length || h->length > exact->act.dst.length - h->offset) {
            bad = exact;
            why = "overruns its receive span";
        } else if (exact->frames > 0 && memcmp(&exact->quant, &h->quant, sizeof h->quant) != 0) {
            bad = exact;
            why = "changes quantization metadata";
        }
    } else if (same_op != NULL) {
        bad = same_op;
        why = "does not match its RING_RECV (step/chunk)";
    }
    if (bad != NULL) {
        pt_log(CCOIP_LOG_WARN, d->who,
               "connection %" PRIu64 ": ring frame (epoch %" PRIu64 " seq %" PRIu64
               " step %u chunk %u) %s: closing the connection",
               c->id, h->epoch, h->seq, h->step, h->chunk, why);
        io_done_queue(d, bad, pcclProtocolError);
        conn_close(d, c, true);
        return false;
    }
    if (exact == NULL) {
        c->rd = RD_HELD; /* held until its RING_RECV is posted or its op cancelled */
        return true;
    }
    uint8_t *dst = span_ptr(d, &exact->act.dst);
    assert(dst != NULL);
    if (exact->frames == 0) exact->quant = h->quant;
    exact->frames++;
    c->rd_io = exact->io_id;
    c->rd = RD_PAYLOAD;
    c->rd_have = 0;
    c->rd_want = h->length;
    c->rd_dst = dst + h->offset;
    c->rd_fused = false;
    if (c->link != NULL && exact->frames == 1) fuse_try(d, c, exact);
    if (h->length == 0) {
        if (exact->got >= exact->act.dst.length) io_done_queue(d, exact, pcclSuccess);
        rd_start_header(c);
    }
    rd_next(c);
    return true;
}

/* Starts reading the payload of the frame in c->dh into dst for io. */
static void payload_into(pt_driver *d, pt_conn *c, pt_io *io, uint8_t *dst)
{
    const ccoip_data_header *h = &c->dh;
    io->frames++;
    c->rd_io = io->io_id;
    c->rd = RD_PAYLOAD;
    c->rd_have = 0;
    c->rd_want = h->length;
    c->rd_dst = dst + h->offset;
    if (h->length == 0) {
        if (io->got >= io->act.dst.length) io_done_queue(d, io, pcclSuccess);
        rd_start_header(c);
    }
    rd_next(c);
}

/* A STATE_DATA header is in c->dh: land it in its STATE_RECV (matched on
 * tag, seq, chunk), drop it (cancelled fetch) or hold it. False when c was closed. */
static bool state_dispatch(pt_driver *d, pt_conn *c)
{
    const ccoip_data_header *h = &c->dh;
    if (key_cancelled(d, h)) {
        c->rd = RD_DISCARD;
        c->rd_have = 0;
        c->rd_want = h->length;
        if (h->length == 0) rd_start_header(c);
        rd_next(c);
        return true;
    }
    pt_io *exact = NULL;
    for (uint32_t i = 0; i < d->ios_hi; i++) {
        pt_io *io = &d->ios[i];
        if (!io->used || io->done_queued || io->kind != IO_RECV || io->conn != c->id) continue;
        if (io->act.type != CCOIP_ACT_STATE_RECV) continue;
        if (io->act.tag == h->tag && io->act.seq == h->seq && io->act.chunk == h->chunk) {
            exact = io;
            break;
        }
    }
    if (exact == NULL) {
        c->rd = RD_HELD; /* held until its STATE_RECV is posted */
        return true;
    }
    if (h->offset > exact->act.dst.length || h->length > exact->act.dst.length - h->offset) {
        pt_log(CCOIP_LOG_WARN, d->who,
               "connection %" PRIu64 ": STATE_DATA (seq %" PRIu64
               " chunk %u) overruns its tensor: closing the connection",
               c->id, h->seq, h->chunk);
        io_done_queue(d, exact, pcclProtocolError);
        conn_close(d, c, true);
        return false;
    }
    uint8_t *dst = span_ptr(d, &exact->act.dst);
    assert(dst != NULL);
    payload_into(d, c, exact, dst);
    return true;
}

static bool held_dispatch(pt_driver *d, pt_conn *c)
{
    return c->dh.kind == CCOIP_DATA_STATE_DATA ? state_dispatch(d, c) : ring_dispatch(d, c);
}

/* Re-examines held frames (after a RING_RECV, a STATE_RECV or a CANCEL). */
static void held_retry(pt_driver *d)
{
    for (uint32_t i = 0; i < d->nconns; i++) {
        pt_conn *c = d->conns[i];
        if (c->rd == RD_HELD) {
            if (!held_dispatch(d, c)) i = (uint32_t)-1; /* table changed: rescan */
        }
    }
}

/* ---- bandwidth probes (docs/protocol.md §8.4) ---- */

static uint8_t g_probe_zeros[PT_SLICE_BYTES]; /* PROBE_DATA payload (content ignored) */

/* Queues one header-only or zero-payload data frame (probe control). */
static bool send_header(pt_driver *d, pt_conn *c, const ccoip_data_header *h,
                        const uint8_t *payload, bool probe_last)
{
    pt_sitem *it = calloc(1, sizeof *it);
    if (it == NULL) return false;
    if (ccoip_data_header_encode(h, &d->lim, it->hdr, sizeof it->hdr) != pcclSuccess) {
        free(it);
        return false;
    }
    it->ring = true;
    it->len = CCOIP_DATA_HEADER_BYTES;
    it->payload = payload;
    it->payload_len = payload != NULL ? h->length : 0;
    it->slot = PT_NO_SLOT;
    it->probe_last = probe_last;
    send_enqueue(d, c, it);
    return true;
}

static void probe_done_queue(pt_driver *d, uint64_t io_id, bool ok, uint64_t bytes, uint64_t us)
{
    ccoip_event ev;
    memset(&ev, 0, sizeof ev);
    ev.type = CCOIP_EV_PROBE_DONE;
    ev.done.io_id = io_id;
    ev.done.result = ok ? pcclSuccess : pcclRankConnectionFailed;
    ev.done.probe_bytes = ok ? bytes : 0;
    ev.done.duration_us = ok ? us : 0;
    q_core(d, &ev);
}

/* A probe connection ended (closed by the remote, broke, or was refused). */
static void probe_end(pt_driver *d, pt_conn *c)
{
    if (c->probe == PROBE_PROBER) {
        const bool ok = c->probe_accepted && c->probe_sent_all;
        uint64_t us = (pt_now_ns() - c->probe_t0) / 1000u;
        if (us == 0) us = 1;
        pt_log(ok ? CCOIP_LOG_DEBUG : CCOIP_LOG_INFO, d->who,
               "probe %" PRIu64 ": %s (%" PRIu64 " bytes, %" PRIu64 " us)", c->id,
               ok ? "done" : "failed", c->probe_want, us);
        probe_done_queue(d, c->probe_io, ok, c->probe_want, us);
    }
    conn_free(d, c);
}

static void probe_dial(pt_driver *d, uint64_t conn, uint64_t io_id, const char *url, uint64_t want,
                       uint32_t tries);

/* A probe frame arrived on c (header in c->dh). */
static void probe_frame(pt_driver *d, pt_conn *c)
{
    const ccoip_data_header *h = &c->dh;
    if (c->probe == PROBE_TARGET) {
        if (h->kind == CCOIP_DATA_PROBE_REQUEST && !c->probe_accepted) {
            c->probe_accepted = true;
            c->probe_want = h->offset;
            ccoip_data_header a;
            ccoip_data_header_init(&a, CCOIP_DATA_PROBE_ACCEPT);
            a.tag = h->tag;
            if (!send_header(d, c, &a, NULL, false) || c->probe_want == 0) {
                conn_free(d, c);
                return;
            }
            rd_start_header(c);
            rd_next(c);
            return;
        }
        if (h->kind == CCOIP_DATA_PROBE_DATA && c->probe_accepted) {
            c->probe_got += h->length;
            c->rd = RD_DISCARD;
            c->rd_have = 0;
            c->rd_want = h->length;
            if (h->length == 0) {
                if (c->probe_got >= c->probe_want) {
                    conn_free(d, c);
                    return;
                }
                rd_start_header(c);
            }
            rd_next(c);
            return;
        }
    } else if (c->probe == PROBE_PROBER && !c->probe_accepted) {
        if (h->kind == CCOIP_DATA_PROBE_ACCEPT) {
            c->probe_accepted = true;
            c->probe_t0 = pt_now_ns();
            uint64_t slice = d->lim.max_data_payload_bytes;
            if (slice == 0 || slice > PT_SLICE_BYTES) slice = PT_SLICE_BYTES;
            for (uint64_t off = 0; off < c->probe_want; off += slice) {
                ccoip_data_header p;
                ccoip_data_header_init(&p, CCOIP_DATA_PROBE_DATA);
                p.offset = off;
                p.length = c->probe_want - off < slice ? c->probe_want - off : slice;
                if (!send_header(d, c, &p, g_probe_zeros, off + p.length >= c->probe_want)) {
                    probe_end(d, c);
                    return;
                }
            }
            rd_start_header(c);
            rd_next(c); /* the target's close ends the measurement */
            return;
        }
        if (h->kind == CCOIP_DATA_PROBE_BUSY && c->probe_tries + 1u < PT_PROBE_TRIES) {
            char url[sizeof c->probe_url];
            memcpy(url, c->probe_url, sizeof url);
            const uint64_t id = c->id, io = c->probe_io, want = c->probe_want;
            const uint32_t tries = c->probe_tries + 1u;
            conn_free(d, c);
            probe_dial(d, id, io, url, want, tries);
            return;
        }
    }
    pt_log(CCOIP_LOG_INFO, d->who, "probe connection %" PRIu64 ": unexpected frame kind %d", c->id,
           (int)h->kind);
    probe_end(d, c);
}

/* A data frame header is in c->dh (not HELLO/HELLO_ACK): route it by kind. */
static void data_frame(pt_driver *d, pt_conn *c)
{
    const ccoip_data_header *h = &c->dh;
    if (c->probe != PROBE_NONE) {
        probe_frame(d, c);
        return;
    }
    switch (h->kind) {
    case CCOIP_DATA_RING_CHUNK:
        ring_dispatch(d, c);
        return;
    case CCOIP_DATA_STATE_DATA:
        state_dispatch(d, c);
        return;
    case CCOIP_DATA_STATE_REQUEST:
    case CCOIP_DATA_STATE_RESPONSE: {
        /* Header + protobuf payload to the core as one RECV (ccoip_sm.h v3). */
        if (h->length > d->lim.pb.max_message_bytes) break;
        const uint64_t total = CCOIP_DATA_HEADER_BYTES + h->length;
        if (total > c->buf_cap) {
            uint8_t *nb = realloc(c->buf, (size_t)total);
            if (nb == NULL) break;
            c->buf = nb;
            c->buf_cap = total;
        }
        memcpy(c->buf, c->hdr, CCOIP_DATA_HEADER_BYTES);
        c->rd = RD_PAYLOAD;
        c->rd_ctrl = true;
        c->rd_have = 0;
        c->rd_want = h->length;
        if (h->length == 0) {
            ccoip_event ev;
            memset(&ev, 0, sizeof ev);
            ev.type = CCOIP_EV_RECV;
            ev.conn = c->id;
            ev.data = c->buf;
            ev.len = CCOIP_DATA_HEADER_BYTES;
            const uint64_t id = c->id;
            rd_start_header(c);
            core_feed(d, &ev);
            c = conn_find(d, id);
            if (c == NULL) return;
        }
        rd_next(c);
        return;
    }
    default:
        break;
    }
    pt_log(CCOIP_LOG_WARN, d->who,
           "connection %" PRIu64 ": unexpected data frame (kind %d, %" PRIu64 " bytes): closing it",
           c->id, (int)h->kind, h->length);
    conn_close(d, c, true);
}

static void on_received(pt_driver *d, pt_conn *c, int rv, uint64_t count)
{
    c->recv_busy = false;
    if (rv != 0 || count == 0) {
        pt_log(rv == NNG_ECLOSED || rv == NNG_ECONNSHUT ? CCOIP_LOG_DEBUG : CCOIP_LOG_INFO, d->who,
               "connection %" PRIu64 " closed: %s", c->id,
               rv != 0 ? nng_strerror(rv) : "end of stream");
        conn_close(d, c, true);
        return;
    }
    c->rd_have += count;
    switch (c->rd) {
    case RD_HDR: {
        if (c->rd_have < c->hdr_want) break;
        if (!c->data) {
            ccoip_ctrl_header h;
            const pcclResult_t r = ccoip_ctrl_header_decode(c->hdr, c->hdr_want, &d->lim, &h);
            if (r != pcclSuccess && r != pcclInvalidUsage) {
                pt_log(CCOIP_LOG_WARN, d->who,
                       "connection %" PRIu64 ": malformed control frame header: closing it", c->id);
                conn_close(d, c, true);
                return;
            }
            if ((uint64_t)h.payload_bytes > d->lim.pb.max_message_bytes) {
                pt_log(CCOIP_LOG_WARN, d->who,
                       "connection %" PRIu64 ": oversized control frame (%u bytes): closing it",
                       c->id, h.payload_bytes);
                conn_close(d, c, true);
                return;
            }
            const uint64_t total = CCOIP_CTRL_HEADER_BYTES + (uint64_t)h.payload_bytes;
            if (total > c->buf_cap) {
                uint8_t *nb = realloc(c->buf, (size_t)total);
                if (nb == NULL) {
                    conn_close(d, c, true);
                    return;
                }
                c->buf = nb;
                c->buf_cap = total;
            }
            memcpy(c->buf, c->hdr, CCOIP_CTRL_HEADER_BYTES);
            c->rd = RD_PAYLOAD;
            c->rd_have = 0;
            c->rd_want = h.payload_bytes;
            if (c->rd_want > 0) break;
            /* fall into the payload-complete path */
        } else {
            const pcclResult_t r = ccoip_data_header_decode(c->hdr, c->hdr_want, &d->lim, &c->dh);
            if (r != pcclSuccess) {
                pt_log(CCOIP_LOG_WARN, d->who,
                       "connection %" PRIu64 ": malformed data frame header: closing it", c->id);
                conn_close(d, c, true);
                return;
            }
            if (c->probe == PROBE_NONE &&
                (c->dh.kind == CCOIP_DATA_HELLO || c->dh.kind == CCOIP_DATA_HELLO_ACK)) {
                if (c->dh.length != 0) {
                    conn_close(d, c, true);
                    return;
                }
                rd_start_header(c);
                ccoip_event ev;
                memset(&ev, 0, sizeof ev);
                ev.type = CCOIP_EV_RECV;
                ev.conn = c->id;
                ev.data = c->hdr;
                ev.len = CCOIP_DATA_HEADER_BYTES;
                const uint64_t id = c->id;
                uint8_t copy[CCOIP_DATA_HEADER_BYTES];
                memcpy(copy, c->hdr, sizeof copy);
                ev.data = copy;
                core_feed(d, &ev);
                c = conn_find(d, id);
                if (c != NULL) rd_next(c);
                return;
            }
            data_frame(d, c);
            return;
        }
    }
        /* fallthrough */
    case RD_PAYLOAD:
        if (c->rd_have < c->rd_want) break;
        if (!c->data || c->rd_ctrl) {
            /* A whole control frame (control plane, or a data connection's control frame
             * behind its data header) goes to the core as one RECV. */
            ccoip_event ev;
            memset(&ev, 0, sizeof ev);
            ev.type = CCOIP_EV_RECV;
            ev.conn = c->id;
            ev.data = c->buf;
            ev.len = (c->data ? CCOIP_DATA_HEADER_BYTES : CCOIP_CTRL_HEADER_BYTES) + c->rd_want;
            const uint64_t id = c->id;
            rd_start_header(c);
            core_feed(d, &ev);
            c = conn_find(d, id);
            if (c == NULL) return;
        } else {
            pt_io *io = io_find(d, c->rd_io);
            if (io != NULL && !io->done_queued && io->fused && c->rd_fused &&
                io->slot < PT_MAX_SLOTS) {
                /* The announced REDUCE is done: remember it (act_kernel completes it). */
                pt_slot *o = &d->slots[io->slot];
                if (o->nfused < CCOIP_P2P_POOL_MAX) {
                    o->fused[o->nfused] = io->act;
                    o->fused_result[o->nfused] = pt_tcp_link_fuse_result(c->link);
                    o->nfused++;
                }
            }
            if (io != NULL && !io->done_queued) {
                io->got += c->rd_want;
                if (io->got >= io->act.dst.length) io_done_queue(d, io, pcclSuccess);
            }
            rd_start_header(c);
        }
        break;
    case RD_DISCARD:
        if (c->rd_have >= c->rd_want) {
            if (c->probe == PROBE_TARGET && c->probe_got >= c->probe_want) {
                conn_free(d, c); /* drained: closing tells the prober the time */
                return;
            }
            rd_start_header(c);
        }
        break;
    case RD_HELD:
        break;
    }
    rd_next(c);
}

static void conn_up(pt_driver *d, pt_conn *c, nng_stream *s)
{
    c->s = s;
    c->up = true;
    nng_stream_set_bool(s, NNG_OPT_TCP_NODELAY, true);
    if (c->probe == PROBE_NONE && pt_tcp_enabled() &&
        (!d->is_master || d->n_links < PT_MASTER_MAX_LINKS)) {
        c->link = pt_tcp_link_open(s, c->id, cb_link, d); /* NULL: stays on nng */
        if (c->link != NULL) d->n_links++;
        if (c->link != NULL && d->epfd >= 0) pt_tcp_link_set_park(c->link, true);
        pt_log(CCOIP_LOG_DEBUG, d->who, "connection %" PRIu64 ": %s data plane", c->id,
               c->link != NULL ? "POSIX TCP" : "nng stream");
    }
    rd_start_header(c);
    rd_next(c);
    send_kick(d, c);
}

/* ------------------------------------------------------------------------ */
/* Kernel worker                                                            */
/* ------------------------------------------------------------------------ */

static pcclResult_t kernel_exec(pt_driver *d, pt_job *j, ccoip_quant_meta *qout, uint64_t *hash)
{
    const ccoip_action *a = &j->act;
    const uint64_t esz = ccoip_dtype_valid(a->dtype) ? ccoip_dtype_size(a->dtype) : 0;
    pcclResult_t r = pcclSuccess;
    if (j->skip) return j->skip_result;
    switch (a->type) {
    case CCOIP_ACT_REDUCE:
    case CCOIP_ACT_FINALIZE: {
        if (esz == 0) return pcclInvalidArgument;
        const uint64_t per = PT_SLICE_BYTES / esz > 0 ? PT_SLICE_BYTES / esz : 1;
        for (uint64_t i = 0; i < a->count && r == pcclSuccess; i += per) {
            pthread_mutex_lock(&d->kmu);
            const bool cancel = d->kcur_cancel;
            pthread_mutex_unlock(&d->kmu);
            if (cancel) return pcclSuccess;
            const uint64_t n = a->count - i < per ? a->count - i : per;
            if (a->type == CCOIP_ACT_REDUCE && j->base != NULL) {
                r = ccoip_reduce(a->red_op, a->dtype, j->dst + i * esz, j->base + i * esz,
                                 j->src + i * esz, n);
            } else if (a->type == CCOIP_ACT_REDUCE) {
                r = ccoip_reduce_inplace(a->red_op, a->dtype, j->dst + i * esz, j->src + i * esz,
                                         n);
            } else {
                r = ccoip_reduce_finalize_avg(a->dtype, j->dst + i * esz, n, a->divisor);
            }
        }
        break;
    }
    case CCOIP_ACT_COPY:
        for (uint64_t i = 0; i < a->src.length; i += PT_SLICE_BYTES) {
            pthread_mutex_lock(&d->kmu);
            const bool cancel = d->kcur_cancel;
            pthread_mutex_unlock(&d->kmu);
            if (cancel) return pcclSuccess;
            const uint64_t n =
                a->src.length - i < PT_SLICE_BYTES ? a->src.length - i : PT_SLICE_BYTES;
            memmove(j->dst + i, j->src + i, (size_t)n);
            atomic_fetch_add_explicit(&d->copied_bytes, n, memory_order_relaxed);
        }
        break;
    case CCOIP_ACT_QUANTIZE: {
        ccoip_quant_meta meta;
        memset(&meta, 0, sizeof meta);
        r = ccoip_quant_compute_meta(a->quant.algorithm, a->quant.src_type, a->quant.quant_type,
                                     j->src, a->count, &meta);
        if (r == pcclSuccess) r = ccoip_quantize(&meta, j->dst, j->src, a->count);
        *qout = meta;
        break;
    }
    case CCOIP_ACT_DEQUANTIZE:
        if (a->reduce) {
            r = ccoip_dequantize_reduce(&a->quant, a->red_op, j->dst, j->src, a->count);
        } else {
            r = ccoip_dequantize(&a->quant, j->dst, j->src, a->count);
        }
        break;
    case CCOIP_ACT_GATHER_REDUCE:
        if (!ccoip_action_gather_ok(a)) return pcclInvalidArgument;
        r = ccoip_reduce_gather(a->red_op, a->dtype, j->dst, j->base, j->src, a->chunk, a->divisor,
                                a->count);
        break;
    case CCOIP_ACT_HASH: {
        if (esz == 0 || a->count > a->src.length / esz) return pcclInvalidArgument;
        ccoip_hash_entry e;
        e.name = j->name;
        e.data = j->src;
        e.count = a->count;
        e.dtype = a->dtype;
        r = ccoip_hash_tensor(&e, hash);
        break;
    }
    default:
        r = pcclInternalError;
        break;
    }
    return r;
}

static void *kworker_main(void *arg)
{
    pt_driver *d = arg;
    pthread_mutex_lock(&d->kmu);
    for (;;) {
        while (d->kq_head == NULL && !d->kstop)
            pthread_cond_wait(&d->kcv, &d->kmu);
        if (d->kstop) break;
        pt_job *j = d->kq_head;
        d->kq_head = j->next;
        if (d->kq_head == NULL) d->kq_tail = NULL;
        d->kcur = j;
        d->kcur_cancel = false;
        pthread_mutex_unlock(&d->kmu);
        ccoip_quant_meta qout;
        memset(&qout, 0, sizeof qout);
        uint64_t hash = 0;
        const pcclResult_t r = kernel_exec(d, j, &qout, &hash);
        pthread_mutex_lock(&d->kmu);
        const bool cancelled = d->kcur_cancel;
        d->kcur = NULL;
        pthread_cond_broadcast(&d->kcv_idle);
        pthread_mutex_unlock(&d->kmu);
        if (!cancelled) {
            ccoip_event ev;
            memset(&ev, 0, sizeof ev);
            ev.type = CCOIP_EV_KERNEL_DONE;
            ev.done.io_id = j->io_id;
            ev.done.result = r;
            ev.done.quant_out = qout;
            ev.done.hash = hash;
            q_core(d, &ev);
        }
        free(j);
        pthread_mutex_lock(&d->kmu);
    }
    pthread_mutex_unlock(&d->kmu);
    return NULL;
}

/* Removes queued kernels of slot and waits until the running one (if of slot) stopped. */
static void kernels_cancel(pt_driver *d, uint32_t slot)
{
    pthread_mutex_lock(&d->kmu);
    pt_job **pp = &d->kq_head;
    d->kq_tail = NULL;
    while (*pp != NULL) {
        pt_job *j = *pp;
        if (j->slot == slot) {
            *pp = j->next;
            free(j);
        } else {
            d->kq_tail = j;
            pp = &j->next;
        }
    }
    if (d->kcur != NULL && d->kcur->slot == slot) {
        d->kcur_cancel = true;
        while (d->kcur != NULL)
            pthread_cond_wait(&d->kcv_idle, &d->kmu);
    }
    pthread_mutex_unlock(&d->kmu);
}

/* ------------------------------------------------------------------------ */
/* Actions                                                                  */
/* ------------------------------------------------------------------------ */

static pt_io *io_add(pt_driver *d, const ccoip_action *a, pt_io_kind kind)
{
    for (uint32_t i = 0; i < PT_MAX_IOS; i++) {
        pt_io *io = &d->ios[i];
        if (io->used) continue;
        memset(io, 0, sizeof *io);
        io->used = true;
        if (i >= d->ios_hi) d->ios_hi = i + 1;
        io->kind = kind;
        io->io_id = a->io_id;
        io->slot = a->op_slot;
        io->conn = a->conn;
        io->act = *a;
        return io;
    }
    pt_log(CCOIP_LOG_ERROR, d->who, "pending I/O table full (%u)", PT_MAX_IOS);
    return NULL;
}

/* Frees an entry of the pending I/O table; the high-water mark follows the last used one. */
static void io_free(pt_driver *d, pt_io *io)
{
    io->used = false;
    while (d->ios_hi > 0 && !d->ios[d->ios_hi - 1].used)
        d->ios_hi--;
}

static void slot_key(pt_driver *d, const ccoip_action *a)
{
    if (a->op_slot >= PT_MAX_SLOTS) return;
    pt_slot *o = &d->slots[a->op_slot];
    o->epoch = a->epoch;
    o->tag = a->tag;
    o->seq = a->seq;
    o->keyed = true;
}

/* ------------------------------------------------------------------------ */
/* TLS (tls+tcp:// URLs)                                                    */
/* ------------------------------------------------------------------------ */

/* Reads a whole (small, PEM) file into a NUL-terminated buffer. */
static char *tls_read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) return NULL;
    char *buf = NULL;
    size_t len = 0;
    for (;;) {
        char *nb = realloc(buf, len + 4097u);
        if (nb == NULL) break;
        buf = nb;
        const size_t n = fread(buf + len, 1, 4096u, f);
        len += n;
        if (n < 4096u || len > (1u << 20)) {
            buf[len] = '\0';
            fclose(f);
            return buf;
        }
    }
    free(buf);
    fclose(f);
    return NULL;
}

/*
 * For a tls+ URL, builds an nng TLS configuration from the environment:
 *   PCCL_TLS_CERT, PCCL_TLS_KEY  own certificate and key (PEM files; required
 *                                 to listen, optional to dial);
 *   PCCL_TLS_CA                  CA chain (PEM file): when set, the other
 *                                 side's certificate is verified (dialers:
 *                                 the server's, against PCCL_TLS_SERVER_NAME
 *                                 or the URL's host; listeners: a client
 *                                 certificate is required - mutual TLS);
 *                                 when unset, a dialer encrypts without
 *                                 verifying (logged as a warning).
 * Returns 0 with *out NULL for other URLs; an nng error otherwise.
 */
static int tls_config_for(pt_driver *d, const char *url, bool server, nng_tls_config **out)
{
    *out = NULL;
    if (strncmp(url, "tls+", 4) != 0) return 0;
    const char *cert = getenv("PCCL_TLS_CERT");
    const char *key = getenv("PCCL_TLS_KEY");
    const char *ca = getenv("PCCL_TLS_CA");
    const char *name = getenv("PCCL_TLS_SERVER_NAME");
    if (cert != NULL && *cert == '\0') cert = NULL;
    if (key != NULL && *key == '\0') key = NULL;
    if (ca != NULL && *ca == '\0') ca = NULL;
    if (server && (cert == NULL || key == NULL)) {
        pt_log(CCOIP_LOG_ERROR, d->who, "%s: set PCCL_TLS_CERT and PCCL_TLS_KEY to listen", url);
        return NNG_EINVAL;
    }
    nng_tls_config *cfg = NULL;
    int rv = nng_tls_config_alloc(&cfg, server ? NNG_TLS_MODE_SERVER : NNG_TLS_MODE_CLIENT);
    if (rv != 0) return rv;
    if (cert != NULL && key != NULL) {
        char *c = tls_read_file(cert);
        char *k = tls_read_file(key);
        rv = c != NULL && k != NULL ? nng_tls_config_own_cert(cfg, c, k, NULL) : NNG_ENOENT;
        free(c);
        free(k);
        if (rv != 0)
            pt_log(CCOIP_LOG_ERROR, d->who, "TLS certificate %s / key %s: %s", cert, key,
                   nng_strerror(rv));
    }
    if (rv == 0 && ca != NULL) {
        rv = nng_tls_config_ca_file(cfg, ca);
        if (rv != 0) pt_log(CCOIP_LOG_ERROR, d->who, "TLS CA %s: %s", ca, nng_strerror(rv));
    }
    if (rv == 0 && !server && ca != NULL && name != NULL && *name != '\0') {
        rv = nng_tls_config_server_name(cfg, name);
    }
    if (rv == 0) {
        rv = nng_tls_config_auth_mode(cfg, ca != NULL ? NNG_TLS_AUTH_MODE_REQUIRED
                                                      : NNG_TLS_AUTH_MODE_NONE);
    }
    if (rv == 0 && !server && ca == NULL) {
        pt_log(CCOIP_LOG_WARN, d->who, "%s: PCCL_TLS_CA unset, the server is not verified", url);
    }
    if (rv != 0) {
        nng_tls_config_free(cfg);
        return rv;
    }
    *out = cfg;
    return 0;
}

static int url_for(const ccoip_action *a, bool tls, char *url, size_t cap)
{
    const char *scheme = tls ? "tls+tcp" : "tcp";
    if (a->len > 0) {
        if (a->len >= cap) return -1;
        memcpy(url, a->data, (size_t)a->len);
        url[a->len] = '\0';
        return 0;
    }
    if (a->ip_len == 4) {
        snprintf(url, cap, "%s://%u.%u.%u.%u:%u", scheme, a->ip[0], a->ip[1], a->ip[2], a->ip[3],
                 a->port);
        return 0;
    }
    if (a->ip_len == 16) {
        int n = snprintf(url, cap, "%s://[", scheme);
        for (uint32_t i = 0; i < 16; i += 2) {
            n += snprintf(url + n, cap - (size_t)n, "%s%x", i ? ":" : "",
                          (unsigned)((a->ip[i] << 8) | a->ip[i + 1]));
        }
        snprintf(url + n, cap - (size_t)n, "]:%u", a->port);
        return 0;
    }
    return -1;
}

static void act_connect(pt_driver *d, const ccoip_action *a)
{
    const bool data = !d->is_master && a->conn != CCOIP_PEER_MASTER_CONN;
    pt_conn *c = conn_new(d, a->conn, data);
    char url[300];
    ccoip_event ev;
    memset(&ev, 0, sizeof ev);
    ev.type = CCOIP_EV_CONN_CLOSED;
    ev.conn = a->conn;
    if (c == NULL || url_for(a, data && d->p2p_tls, url, sizeof url) != 0) {
        if (c != NULL) conn_free(d, c);
        q_core(d, &ev);
        return;
    }
    int rv = nng_stream_dialer_alloc(&c->dialer, url);
    nng_tls_config *tls = NULL;
    if (rv == 0) rv = tls_config_for(d, url, false, &tls);
    if (rv == 0 && tls != NULL) {
        rv = nng_stream_dialer_set_ptr(c->dialer, NNG_OPT_TLS_CONFIG, tls);
        nng_tls_config_free(tls); /* the dialer holds its own reference */
    }
    if (rv == 0) rv = nng_aio_alloc(&c->dial_aio, cb_dial, c);
    if (rv != 0) {
        pt_log(CCOIP_LOG_WARN, d->who, "connect to %s: %s", url, nng_strerror(rv));
        conn_free(d, c);
        q_core(d, &ev);
        return;
    }
    pt_log(CCOIP_LOG_DEBUG, d->who, "connection %" PRIu64 ": dialing %s", a->conn, url);
    nng_aio_set_timeout(c->dial_aio, PT_DIAL_TIMEOUT_MS);
    nng_stream_dialer_dial(c->dialer, c->dial_aio);
}

static pcclResult_t listen_on(pt_driver *d, uint32_t kind, const char *url, uint32_t *port_out)
{
    if (kind >= PT_MAX_LISTENERS) return pcclInvalidArgument;
    pt_listener *l = &d->listeners[kind];
    if (l->l != NULL) return pcclInvalidUsage;
    l->d = d;
    l->kind = kind;
    int rv = nng_stream_listener_alloc(&l->l, url);
    nng_tls_config *tls = NULL;
    if (rv == 0) rv = tls_config_for(d, url, true, &tls);
    if (rv == 0 && tls != NULL) {
        rv = nng_stream_listener_set_ptr(l->l, NNG_OPT_TLS_CONFIG, tls);
        nng_tls_config_free(tls); /* the listener holds its own reference */
    }
    if (rv == 0) rv = nng_stream_listener_listen(l->l);
    if (rv == 0) rv = nng_aio_alloc(&l->aio, cb_accept, l);
    if (rv != 0) {
        pt_log(CCOIP_LOG_ERROR, d->who, "listen on %s: %s", url, nng_strerror(rv));
        if (l->l != NULL) nng_stream_listener_free(l->l);
        l->l = NULL;
        return rv == NNG_EINVAL || rv == NNG_EADDRINVAL || rv == NNG_ENOTSUP ? pcclInvalidArgument
                                                                             : pcclSystemError;
    }
    int port = 0;
    if (strncmp(url, "tcp", 3) == 0 || strncmp(url, "tls+tcp", 7) == 0) {
        nng_stream_listener_get_int(l->l, NNG_OPT_TCP_BOUND_PORT, &port);
    }
    if (port_out != NULL) *port_out = (uint32_t)port;
    pt_log(CCOIP_LOG_DEBUG, d->who, "listening on %s (port %d)", url, port);
    return pcclSuccess;
}

static void act_listen(pt_driver *d, const ccoip_action *a)
{
    char url[128];
    const char *scheme = d->p2p_tls ? "tls+tcp" : "tcp";
    snprintf(url, sizeof url, "%s://%s:0", scheme, d->bind_host);
    uint32_t port = 0;
    if (listen_on(d, (uint32_t)a->listener, url, &port) == pcclSuccess) {
        nng_stream_listener_accept(d->listeners[a->listener].l, d->listeners[a->listener].aio);
    }
    trace_set_port(d, (uint32_t)a->listener, port);
    char adv[128];
    snprintf(adv, sizeof adv, "%s://%s:%u", scheme, d->bind_host, (unsigned)port);
    ccoip_peer_set_port(d->p, a->listener, port, d->advertise_url && port > 0 ? adv : NULL);
}

static void act_send(pt_driver *d, const ccoip_action *a)
{
    pt_conn *c = conn_find(d, a->conn);
    if (c == NULL) return; /* closed meanwhile: the core hears CONN_CLOSED */
    /* v9: a frame that goes on with a span's bytes (a relayed all-reduce's input, at most
     * 64 KiB): copied now, so the frame stays whole whatever happens to the op. */
    const uint8_t *tail = NULL;
    if (a->src.length > 0) {
        tail = span_ptr(d, &a->src);
        if (tail == NULL) {
            pt_log(CCOIP_LOG_ERROR, d->who, "SEND: bad span; closing connection %" PRIu64, c->id);
            conn_close(d, c, true);
            return;
        }
    }
    const uint64_t total = a->len + a->src.length;
    pt_sitem *it = calloc(1, sizeof *it);
    if (it == NULL) return;
    it->bytes = malloc(total > 0 ? (size_t)total : 1u);
    if (it->bytes == NULL) {
        free(it);
        return;
    }
    if (a->len > 0) memcpy(it->bytes, a->data, (size_t)a->len);
    if (tail != NULL) {
        memcpy(it->bytes + a->len, tail, (size_t)a->src.length);
        atomic_fetch_add_explicit(&d->copied_bytes, a->src.length, memory_order_relaxed);
    }
    it->len = total;
    send_enqueue(d, c, it);
}

/* v9: the master's relayed result into the op's span, now. */
static void act_write(pt_driver *d, const ccoip_action *a)
{
    uint8_t *dst = span_ptr(d, &a->dst);
    if (dst == NULL || a->len != a->dst.length) {
        pt_log(CCOIP_LOG_ERROR, d->who, "WRITE: bad span (%" PRIu64 " bytes)", a->len);
        return;
    }
    if (a->len > 0) memcpy(dst, a->data, (size_t)a->len);
    atomic_fetch_add_explicit(&d->copied_bytes, a->len, memory_order_relaxed);
}

static void act_ring_send(pt_driver *d, const ccoip_action *a)
{
    /* io_id 0: a quiet send (contract v8): no record, no IO_DONE; a broken connection shows
     * as CONN_CLOSED only. */
    pt_io *io = NULL;
    if (a->io_id != 0) {
        io = io_add(d, a, IO_SEND);
        if (io == NULL) return;
    }
    slot_key(d, a);
    pt_conn *c = conn_find(d, a->conn);
    const uint8_t *src = span_ptr(d, &a->src);
    ccoip_data_header h;
    ccoip_data_header_init(&h, CCOIP_DATA_RING_CHUNK);
    h.epoch = a->epoch;
    h.tag = a->tag;
    h.seq = a->seq;
    h.chunk = a->chunk;
    h.step = a->step;
    h.offset = 0;
    h.length = a->src.length;
    h.quant = a->quant;
    pt_sitem *it = calloc(1, sizeof *it);
    if (c == NULL || src == NULL || it == NULL ||
        ccoip_data_header_encode(&h, &d->lim, it->hdr, sizeof it->hdr) != pcclSuccess) {
        if (src == NULL || (it != NULL && c != NULL)) {
            pt_log(CCOIP_LOG_ERROR, d->who, "RING_SEND io %" PRIu64 ": bad span or header",
                   a->io_id);
        }
        free(it);
        if (io != NULL) io_done_queue(d, io, pcclRankConnectionLost);
        return;
    }
    it->ring = true;
    it->last = true;
    it->len = CCOIP_DATA_HEADER_BYTES;
    it->payload = src;
    it->payload_len = a->src.length;
    it->io_id = a->io_id;
    it->slot = a->op_slot;
    send_enqueue(d, c, it);
}

static void act_ring_recv(pt_driver *d, const ccoip_action *a)
{
    pt_io *io = io_add(d, a, IO_RECV);
    if (io == NULL) return;
    slot_key(d, a);
    pt_conn *c = conn_find(d, a->conn);
    if (c == NULL || span_ptr(d, &a->dst) == NULL) {
        io_done_queue(d, io, pcclRankConnectionLost);
        return;
    }
    if (a->epoch > c->max_recv_epoch) c->max_recv_epoch = a->epoch;
    if (c->rd == RD_HELD) ring_dispatch(d, c);
}

/* STATE_SEND: the span as STATE_DATA frames of at most one slice each,
 * zero-copy from the tensor; IO_DONE when the last one is written. */
static void act_state_send(pt_driver *d, const ccoip_action *a)
{
    pt_io *io = io_add(d, a, IO_SEND);
    if (io == NULL) return;
    pt_conn *c = conn_find(d, a->conn);
    const uint8_t *src = span_ptr(d, &a->src);
    if (c == NULL || src == NULL) {
        if (src == NULL)
            pt_log(CCOIP_LOG_ERROR, d->who, "STATE_SEND io %" PRIu64 ": bad span", a->io_id);
        io_done_queue(d, io, pcclRankConnectionLost);
        return;
    }
    uint64_t slice = d->lim.max_data_payload_bytes;
    if (slice == 0 || slice > PT_SLICE_BYTES) slice = PT_SLICE_BYTES;
    const uint64_t len = a->src.length;
    uint64_t off = 0;
    do {
        ccoip_data_header h;
        ccoip_data_header_init(&h, CCOIP_DATA_STATE_DATA);
        h.epoch = a->epoch;
        h.tag = a->tag;
        h.seq = a->seq;
        h.chunk = a->chunk;
        h.offset = off;
        h.length = len - off < slice ? len - off : slice;
        pt_sitem *it = calloc(1, sizeof *it);
        if (it == NULL ||
            ccoip_data_header_encode(&h, &d->lim, it->hdr, sizeof it->hdr) != pcclSuccess) {
            free(it);
            pt_log(CCOIP_LOG_ERROR, d->who, "STATE_SEND io %" PRIu64 ": cannot frame", a->io_id);
            conn_close(d, c, true); /* frames already queued would leave the stream torn */
            return;
        }
        it->ring = true;
        it->len = CCOIP_DATA_HEADER_BYTES;
        it->payload = src + off;
        it->payload_len = h.length;
        it->io_id = a->io_id;
        it->slot = a->op_slot;
        off += h.length;
        it->last = off >= len;
        send_enqueue(d, c, it);
    } while (off < len);
}

static void act_state_recv(pt_driver *d, const ccoip_action *a)
{
    pt_io *io = io_add(d, a, IO_RECV);
    if (io == NULL) return;
    slot_key(d, a);
    pt_conn *c = conn_find(d, a->conn);
    if (c == NULL || span_ptr(d, &a->dst) == NULL) {
        io_done_queue(d, io, pcclRankConnectionLost);
        return;
    }
    if (c->rd == RD_HELD) held_dispatch(d, c);
}

static void probe_dial(pt_driver *d, uint64_t conn, uint64_t io_id, const char *url, uint64_t want,
                       uint32_t tries)
{
    pt_conn *c = conn_new(d, conn, true);
    if (c == NULL) {
        probe_done_queue(d, io_id, false, 0, 0);
        return;
    }
    c->probe = PROBE_PROBER;
    c->probe_io = io_id;
    c->probe_want = want;
    c->probe_tries = tries;
    snprintf(c->probe_url, sizeof c->probe_url, "%s", url);
    int rv = nng_stream_dialer_alloc(&c->dialer, url);
    nng_tls_config *tls = NULL;
    if (rv == 0) rv = tls_config_for(d, url, false, &tls);
    if (rv == 0 && tls != NULL) {
        rv = nng_stream_dialer_set_ptr(c->dialer, NNG_OPT_TLS_CONFIG, tls);
        nng_tls_config_free(tls); /* the dialer holds its own reference */
    }
    if (rv == 0) rv = nng_aio_alloc(&c->dial_aio, cb_dial, c);
    if (rv != 0) {
        pt_log(CCOIP_LOG_WARN, d->who, "probe %s: %s", url, nng_strerror(rv));
        probe_end(d, c);
        return;
    }
    nng_aio_set_timeout(c->dial_aio, PT_DIAL_TIMEOUT_MS);
    nng_stream_dialer_dial(c->dialer, c->dial_aio);
}

static void act_probe(pt_driver *d, const ccoip_action *a)
{
    char url[300];
    if (url_for(a, d->p2p_tls, url, sizeof url) != 0) {
        probe_done_queue(d, a->io_id, false, 0, 0);
        return;
    }
    pt_log(CCOIP_LOG_DEBUG, d->who, "probing peer %" PRIu64 " at %s (%" PRIu64 " bytes)", a->tag,
           url, a->count);
    probe_dial(d, a->conn, a->io_id, url, a->count, 0);
}

static bool span_eq(const ccoip_span_ref *x, const ccoip_span_ref *y)
{
    return x->op_slot == y->op_slot && x->region == y->region && x->offset == y->offset &&
           x->length == y->length && x->tensor == y->tensor;
}

/* The REDUCE a fused RING_RECV announced (same spans, op, type, count) is already done. */
static void fuse_match(pt_driver *d, pt_job *j)
{
    pt_slot *o = &d->slots[j->slot];
    const ccoip_action *a = &j->act;
    for (uint32_t k = 0; k < o->nfused; k++) {
        const ccoip_action *f = &o->fused[k];
        if (span_eq(&a->dst, &f->src) && span_eq(&a->src, &f->dst) && span_eq(&a->base, &f->base) &&
            a->red_op == f->red_op && a->dtype == f->dtype && a->count == f->count) {
            j->skip = true;
            j->skip_result = o->fused_result[k];
            o->nfused--;
            o->fused[k] = o->fused[o->nfused];
            o->fused_result[k] = o->fused_result[o->nfused];
            pt_log(CCOIP_LOG_DEBUG, d->who, "REDUCE io %" PRIu64 " fused into its receive",
                   j->io_id);
            return;
        }
    }
}

static void act_kernel(pt_driver *d, const ccoip_action *a)
{
    pt_io *io = io_add(d, a, IO_KERNEL);
    if (io == NULL) return;
    pt_job *j = calloc(1, sizeof *j);
    const bool hash = a->type == CCOIP_ACT_HASH;
    uint8_t *dst = hash ? span_ptr(d, &a->src) : span_ptr(d, &a->dst);
    const uint8_t *src = a->type == CCOIP_ACT_FINALIZE || hash ? dst : span_ptr(d, &a->src);
    const bool has_base =
        (a->type == CCOIP_ACT_REDUCE || a->type == CCOIP_ACT_GATHER_REDUCE) && a->base.length > 0;
    const uint8_t *base = has_base ? span_ptr(d, &a->base) : NULL;
    if (j == NULL || dst == NULL || src == NULL || (has_base && base == NULL) ||
        (has_base && a->type == CCOIP_ACT_REDUCE && a->base.length != a->dst.length) ||
        (a->type == CCOIP_ACT_GATHER_REDUCE && !has_base) ||
        (hash && a->len >= CCOIP_STATE_NAME_MAX)) {
        pt_log(CCOIP_LOG_ERROR, d->who, "kernel io %" PRIu64 ": bad span", a->io_id);
        free(j);
        io->done_queued = true;
        ccoip_event ev;
        memset(&ev, 0, sizeof ev);
        ev.type = CCOIP_EV_KERNEL_DONE;
        ev.done.io_id = a->io_id;
        ev.done.result = pcclInternalError;
        q_core(d, &ev);
        return;
    }
    j->io_id = a->io_id;
    j->slot = a->op_slot;
    j->act = *a;
    j->dst = dst;
    j->src = src;
    j->base = base;
    if (a->type == CCOIP_ACT_REDUCE && a->op_slot < PT_MAX_SLOTS) fuse_match(d, j);
    if (hash && a->len > 0) memcpy(j->name, a->data, (size_t)a->len);
    pthread_mutex_lock(&d->kmu);
    const uint64_t kbytes = a->src.length > a->dst.length ? a->src.length : a->dst.length;
    if (d->kq_head == NULL && d->kcur == NULL && kbytes <= PT_INLINE_BYTES) {
        /* Small, and nothing of any slot queued before it: run it here, in queue order. */
        d->kcur_cancel = false;
        pthread_mutex_unlock(&d->kmu);
        ccoip_event ev;
        memset(&ev, 0, sizeof ev);
        ev.type = CCOIP_EV_KERNEL_DONE;
        ev.done.io_id = j->io_id;
        ev.done.result = kernel_exec(d, j, &ev.done.quant_out, &ev.done.hash);
        free(j);
        q_core(d, &ev);
        return;
    }
    if (d->kq_tail != NULL) {
        d->kq_tail->next = j;
    } else {
        d->kq_head = j;
    }
    d->kq_tail = j;
    pthread_cond_signal(&d->kcv);
    pthread_mutex_unlock(&d->kmu);
}

static void act_cancel(pt_driver *d, const ccoip_action *a)
{
    const uint32_t slot = a->op_slot;
    if (slot < PT_MAX_SLOTS && d->slots[slot].keyed) {
        uint64_t *k = d->cancelled[d->cancelled_next++ % PT_CANCELLED_KEYS];
        k[0] = d->slots[slot].epoch;
        k[1] = d->slots[slot].tag;
        k[2] = d->slots[slot].seq;
    }
    kernels_cancel(d, slot);
    if (slot < PT_MAX_SLOTS) d->slots[slot].nfused = 0; /* no REDUCE of the op follows */
    /* Sends of the slot: a queued one is dropped; one under way (partly
     * written, or with its payload in an aio) closes its connection (rule 8).
     * Receives landing in the slot's buffers likewise close theirs. */
    for (uint32_t ci = 0; ci < d->nconns; ci++) {
        pt_conn *c = d->conns[ci];
        bool brk = false;
        for (pt_sitem **pp = &c->sq_head; *pp != NULL;) {
            pt_sitem *it = *pp;
            if (it->ring && it->slot == slot) {
                if (it == c->sq_head && (c->send_busy || it->done > 0)) {
                    brk = true;
                    pp = &it->next;
                    continue;
                }
                *pp = it->next;
                free(it->bytes);
                free(it);
            } else {
                pp = &it->next;
            }
        }
        c->sq_tail = NULL;
        for (pt_sitem *it = c->sq_head; it != NULL; it = it->next)
            c->sq_tail = it;
        if (c->rd == RD_PAYLOAD && c->data) {
            const pt_io *io = io_find(d, c->rd_io);
            if (io != NULL && io->slot == slot) brk = true;
        }
        if (brk) {
            pt_log(CCOIP_LOG_INFO, d->who,
                   "connection %" PRIu64 ": op cancelled mid-frame: closing the connection", c->id);
            /* Remove the slot's I/O first so that no completion is reported for it. */
            for (uint32_t i = 0; i < d->ios_hi; i++) {
                if (d->ios[i].used && d->ios[i].slot == slot && d->ios[i].kind != IO_KERNEL &&
                    d->ios[i].conn == c->id) {
                    io_free(d, &d->ios[i]);
                }
            }
            conn_close(d, c, true);
            ci = (uint32_t)-1; /* table changed: rescan */
        }
    }
    for (uint32_t i = 0; i < d->ios_hi; i++) {
        if (d->ios[i].used && d->ios[i].slot == slot) io_free(d, &d->ios[i]);
    }
    held_retry(d);
}

static void act_op_begin(pt_driver *d, const ccoip_action *a)
{
    if (a->op_slot >= PT_MAX_SLOTS) {
        pt_log(CCOIP_LOG_ERROR, d->who, "OP_BEGIN slot %u out of range", a->op_slot);
        return;
    }
    pt_slot *o = &d->slots[a->op_slot];
    slot_reset(o);
    o->used = true;
    o->cmd_id = a->cmd_id;
    pthread_mutex_lock(&d->mu);
    for (uint32_t i = 0; i < PT_MAX_CMDS; i++) {
        pt_cmd *c = &d->cmds[i];
        if (c->state != CMD_FREE && c->cmd_id == a->cmd_id) {
            o->send = c->sendbuf;
            o->recv = c->recvbuf;
            o->bytes = c->bytes;
            if (c->ntensors > 0) {
                o->tensors = malloc(c->ntensors * sizeof *o->tensors);
                o->tensor_bytes = malloc(c->ntensors * sizeof *o->tensor_bytes);
                if (o->tensors != NULL && o->tensor_bytes != NULL) {
                    memcpy(o->tensors, c->tensors, c->ntensors * sizeof *o->tensors);
                    memcpy(o->tensor_bytes, c->tensor_bytes, c->ntensors * sizeof *o->tensor_bytes);
                    o->ntensors = c->ntensors;
                }
            }
        }
    }
    pthread_mutex_unlock(&d->mu);
    o->scratch_bytes = a->scratch_bytes;
    o->backup_bytes = a->backup_bytes;
    o->scratch = slot_cached(&o->cache_scratch, &o->cache_scratch_cap, a->scratch_bytes + 1u);
    o->backup = slot_cached(&o->cache_backup, &o->cache_backup_cap, a->backup_bytes + 1u);
    if (o->scratch == NULL || o->backup == NULL) {
        pt_log(CCOIP_LOG_ERROR, d->who, "out of memory for op slot %u", a->op_slot);
        o->scratch_bytes = 0;
        o->backup_bytes = 0;
    }
}

static void act_op_end(pt_driver *d, const ccoip_action *a)
{
    if (a->op_slot >= PT_MAX_SLOTS) return;
    kernels_cancel(d, a->op_slot);
    for (uint32_t i = 0; i < d->ios_hi; i++) {
        if (d->ios[i].used && d->ios[i].slot == a->op_slot && d->ios[i].kind == IO_KERNEL) {
            io_free(d, &d->ios[i]);
        }
    }
    pt_slot *o = &d->slots[a->op_slot];
    free(o->tensors);
    free(o->tensor_bytes);
    slot_reset(o);
}

/* A command leaves flight (mu held): no longer a reason to spin. */
static void cmd_spin_end(pt_driver *d, pt_cmd *c)
{
    if (!c->spin) return;
    c->spin = false;
    d->spin_cmds--;
}

static void cmd_release(pt_cmd *c)
{
    free(c->tensors);
    free(c->tensor_bytes);
    free(c->keys_mem);
    c->keys_mem = NULL;
    c->tensors = NULL;
    c->tensor_bytes = NULL;
    c->ntensors = 0;
    c->state = CMD_FREE;
}

static void act_notify(pt_driver *d, const ccoip_action *a)
{
    pthread_mutex_lock(&d->mu);
    /* The waiting call may read attributes as soon as it wakes: publish the
     * world size the command completed with before waking it. */
    d->pinfo.world_size = a->world_size;
    d->pinfo.id = ccoip_peer_id(d->p);
    d->pinfo.accepted = ccoip_peer_is_accepted(d->p);
    d->pinfo.failed = ccoip_peer_is_failed(d->p);
    ccoip_peer_world_info(d->p, &d->pinfo.world);
    d->pinfo.world.peer_group = a->world_size;
    /* Every kernel of the op completed before the core notified (KERNEL_DONE is queued after
     * the kernel's bytes were counted). */
    d->pinfo.copied_bytes = atomic_load_explicit(&d->copied_bytes, memory_order_relaxed);
    for (uint32_t i = 0; i < PT_MAX_CMDS; i++) {
        pt_cmd *c = &d->cmds[i];
        if (c->state == CMD_FREE || c->cmd_id != a->cmd_id) continue;
        cmd_spin_end(d, c);
        if (c->state == CMD_ABANDONED) {
            cmd_release(c);
            break;
        }
        c->res.result = a->result;
        c->res.tx_bytes = a->tx_bytes;
        c->res.rx_bytes = a->rx_bytes;
        c->res.world_size = a->world_size;
        c->res.peers_pending = a->peers_pending;
        c->res.revision = a->revision;
        c->state = CMD_DONE;
        break;
    }
    atomic_fetch_add_explicit(&d->notified, 1, memory_order_release);
    pthread_cond_broadcast(&d->cv_cmd);
    pthread_mutex_unlock(&d->mu);
}

static void act_run(pt_driver *d, const ccoip_action *a)
{
    switch (a->type) {
    case CCOIP_ACT_WRITE:
        act_write(d, a);
        break;
    case CCOIP_ACT_SEND:
        act_send(d, a);
        break;
    case CCOIP_ACT_CONNECT:
        act_connect(d, a);
        break;
    case CCOIP_ACT_LISTEN:
        act_listen(d, a);
        break;
    case CCOIP_ACT_CLOSE: {
        pt_conn *c = conn_find(d, a->conn);
        if (c != NULL) conn_close(d, c, false);
        break;
    }
    case CCOIP_ACT_NOTIFY:
        act_notify(d, a);
        break;
    case CCOIP_ACT_RING_SEND:
        act_ring_send(d, a);
        break;
    case CCOIP_ACT_RING_RECV:
        act_ring_recv(d, a);
        break;
    case CCOIP_ACT_REDUCE:
    case CCOIP_ACT_COPY:
    case CCOIP_ACT_QUANTIZE:
    case CCOIP_ACT_DEQUANTIZE:
    case CCOIP_ACT_FINALIZE:
        act_kernel(d, a);
        break;
    case CCOIP_ACT_CANCEL:
        act_cancel(d, a);
        break;
    case CCOIP_ACT_LOG:
        pt_log((int)a->level, d->who, "%.*s", (int)a->len,
               a->data != NULL ? (const char *)a->data : "");
        break;
    case CCOIP_ACT_OP_BEGIN:
        act_op_begin(d, a);
        break;
    case CCOIP_ACT_OP_END:
        act_op_end(d, a);
        break;
    case CCOIP_ACT_HASH:
    case CCOIP_ACT_GATHER_REDUCE:
        act_kernel(d, a);
        break;
    case CCOIP_ACT_STATE_SEND:
        act_state_send(d, a);
        break;
    case CCOIP_ACT_STATE_RECV:
        act_state_recv(d, a);
        break;
    case CCOIP_ACT_PROBE:
        act_probe(d, a);
        break;
    default:
        pt_log(CCOIP_LOG_WARN, d->who, "action type %d not supported by this runtime",
               (int)a->type);
        break;
    }
}

/* ------------------------------------------------------------------------ */
/* The driver thread                                                        */
/* ------------------------------------------------------------------------ */

static void on_accepted(pt_driver *d, pt_ev *ev)
{
    pt_listener *l = &d->listeners[ev->listener];
    if (ev->rv != 0) {
        if (ev->rv == NNG_ECLOSED) return;
        pt_log(CCOIP_LOG_WARN, d->who, "accept failed: %s", nng_strerror(ev->rv));
    } else {
        const uint64_t id = d->next_accept_id++;
        pt_conn *c = conn_new(d, id, !d->is_master);
        if (c == NULL) {
            nng_stream_close(ev->stream);
            nng_stream_free(ev->stream);
        } else if (!d->is_master && ev->listener == CCOIP_LISTENER_BANDWIDTH) {
            c->accepted = true;
            c->listener = ev->listener;
            c->probe = PROBE_TARGET; /* served here; the core never hears of it */
            conn_up(d, c, ev->stream);
        } else {
            c->accepted = true;
            c->listener = ev->listener;
            ccoip_event cev;
            memset(&cev, 0, sizeof cev);
            cev.type = CCOIP_EV_CONN_UP;
            cev.conn = id;
            cev.accepted = true;
            cev.listener = ev->listener;
            nng_sockaddr sa;
            if (nng_stream_get_addr(ev->stream, NNG_OPT_REMADDR, &sa) == 0) {
                if (sa.s_family == NNG_AF_INET) {
                    memcpy(cev.remote_ip, &sa.s_in.sa_addr, 4);
                    cev.remote_ip_len = 4;
                } else if (sa.s_family == NNG_AF_INET6) {
                    memcpy(cev.remote_ip, sa.s_in6.sa_addr, 16);
                    cev.remote_ip_len = 16;
                }
            }
            conn_up(d, c, ev->stream);
            pt_log(CCOIP_LOG_DEBUG, d->who, "connection %" PRIu64 " accepted", id);
            core_feed(d, &cev);
        }
    }
    if (l->l != NULL) nng_stream_listener_accept(l->l, l->aio);
}

static void on_dialed(pt_driver *d, pt_ev *ev)
{
    pt_conn *c = conn_find(d, ev->conn);
    if (c == NULL) {
        if (ev->stream != NULL) {
            nng_stream_close(ev->stream);
            nng_stream_free(ev->stream);
        }
        return;
    }
    if (c->probe == PROBE_PROBER) {
        if (ev->rv != 0 || ev->stream == NULL) {
            pt_log(CCOIP_LOG_INFO, d->who, "probe %s: connect failed: %s", c->probe_url,
                   nng_strerror(ev->rv));
            probe_end(d, c);
            return;
        }
        conn_up(d, c, ev->stream);
        ccoip_data_header h;
        ccoip_data_header_init(&h, CCOIP_DATA_PROBE_REQUEST);
        h.tag = ccoip_peer_id(d->p);
        h.offset = c->probe_want;
        if (!send_header(d, c, &h, NULL, false)) probe_end(d, c);
        return;
    }
    ccoip_event cev;
    memset(&cev, 0, sizeof cev);
    cev.conn = ev->conn;
    if (ev->rv != 0 || ev->stream == NULL) {
        pt_log(CCOIP_LOG_INFO, d->who, "connection %" PRIu64 ": connect failed: %s", ev->conn,
               nng_strerror(ev->rv));
        conn_free(d, c);
        cev.type = CCOIP_EV_CONN_CLOSED;
    } else {
        conn_up(d, c, ev->stream);
        cev.type = CCOIP_EV_CONN_UP;
    }
    core_feed(d, &cev);
}

static void on_core_event(pt_driver *d, pt_ev *ev)
{
    ccoip_event *cev = &ev->core;
    if (cev->type == CCOIP_EV_IO_DONE || cev->type == CCOIP_EV_KERNEL_DONE) {
        pt_io *io = io_find(d, cev->done.io_id);
        if (io == NULL) return; /* cancelled: no completion for it */
        io_free(d, io);
    }
    core_feed(d, cev);
}

static void driver_shutdown(pt_driver *d)
{
    for (uint32_t k = 0; k < PT_MAX_LISTENERS; k++) {
        pt_listener *l = &d->listeners[k];
        if (l->l == NULL) continue;
        /* An accepted stream is owned by its queued ACCEPTED event (freed
         * with the queue below), never by the aio. */
        nng_stream_listener_close(l->l);
        nng_aio_stop(l->aio);
        nng_aio_free(l->aio);
        nng_stream_listener_free(l->l);
        l->l = NULL;
    }
    while (d->nconns > 0)
        conn_free(d, d->conns[d->nconns - 1]);
    for (uint32_t s = 0; s < PT_MAX_SLOTS; s++)
        kernels_cancel(d, s);
    pthread_mutex_lock(&d->kmu);
    d->kstop = true;
    pthread_cond_broadcast(&d->kcv);
    pthread_mutex_unlock(&d->kmu);
    if (d->kstarted) pthread_join(d->kthread, NULL);
    d->kstarted = false;
    for (uint32_t s = 0; s < PT_MAX_SLOTS; s++) {
        free(d->slots[s].cache_scratch); /* scratch and backup point into these */
        free(d->slots[s].cache_backup);
        free(d->slots[s].tensors);
        free(d->slots[s].tensor_bytes);
        memset(&d->slots[s], 0, sizeof d->slots[s]);
    }
    pthread_mutex_lock(&d->mu);
    while (d->q_head != NULL) {
        pt_ev *ev = d->q_head;
        d->q_head = ev->next;
        if (ev->stream != NULL && (ev->type == PT_EV_ACCEPTED || ev->type == PT_EV_DIALED)) {
            nng_stream_close(ev->stream);
            nng_stream_free(ev->stream);
        }
        free(ev);
    }
    d->q_tail = NULL;
    /* Commands still waiting fail: the communicator is gone. */
    for (uint32_t i = 0; i < PT_MAX_CMDS; i++) {
        pt_cmd *c = &d->cmds[i];
        if (c->state != CMD_FREE) cmd_spin_end(d, c);
        if (c->state == CMD_POSTED) {
            c->res.result = pcclMasterConnectionFailed;
            c->state = CMD_DONE;
        } else if (c->state == CMD_ABANDONED) {
            cmd_release(c);
        }
    }
    d->running = false;
    atomic_fetch_add_explicit(&d->notified, 1, memory_order_release);
    pthread_cond_broadcast(&d->cv_cmd);
    pthread_mutex_unlock(&d->mu);
}

typedef enum pt_work { W_NONE = 0, W_EVENT, W_TIMER, W_READY, W_STOP } pt_work;

/* The driver thread waits (mu held; released while sleeping) until there is work: a queued
 * event, the core's deadline, readable parked links (their ids in ready[0 .. *nready)), stop;
 * W_NONE when it woke without work (the caller asks again), also without consuming anything
 * while an application thread holds the baton. */
static pt_work wait_work(pt_driver *d, uint64_t *ready, uint32_t *nready)
{
    *nready = 0;
    if (d->stop) return W_STOP;
    if (d->busy) return W_NONE; /* an application thread steps its SUBMIT */
    if (d->ndeferred > 0) {
        for (uint32_t k = 0; k < d->ndeferred; k++)
            ready[k] = d->deferred[k];
        *nready = d->ndeferred;
        d->ndeferred = 0;
        return W_READY;
    }
    if (d->q_head != NULL) return W_EVENT;
    const uint64_t dl = core_deadline(d);
    const uint64_t now = pt_now_ns();
    if (dl != CCOIP_NO_DEADLINE && dl <= now) return W_TIMER;
    const uint64_t wdl = dl;
    if (d->epfd < 0) {
        if (wdl == CCOIP_NO_DEADLINE) {
            pthread_cond_wait(&d->cv_ev, &d->mu);
        } else {
            /* cv_ev uses CLOCK_MONOTONIC (driver_alloc). */
            struct timespec ts;
            ts.tv_sec = (time_t)(wdl / 1000000000u);
            ts.tv_nsec = (long)(wdl % 1000000000u);
            pthread_cond_timedwait(&d->cv_ev, &d->mu, &ts);
        }
        return W_NONE;
    }
    int timeout = -1;
    if (wdl != CCOIP_NO_DEADLINE) {
        const uint64_t ms = (wdl - now + 999999u) / 1000000u;
        timeout = ms > 1000000u ? 1000000 : (int)ms;
    }
    struct epoll_event ev[64];
    /* Spin while a latency-sensitive operation is in flight, and for spin_ns after the last
     * one (the next one usually follows at once). */
    bool spin = false;
    if (d->spin_ns > 0) {
        if (d->is_master ? ccoip_master_ops_live(d->m) > 0 : d->spin_cmds > 0) {
            d->linger_until = now + d->spin_ns;
            spin = true;
        } else {
            spin = now < d->linger_until;
        }
    }
    d->polling++;
    pthread_mutex_unlock(&d->mu);
    int n = 0;
    if (spin) {
        /* Spin-then-sleep: a wake-up of a sleeping thread costs 15-50 us on a virtual machine
         * (an idle vCPU must be woken); polling keeps it awake, yielding to every other
         * runnable thread between polls, until work, the deadline or spin_ns. */
        uint64_t end = now + d->spin_ns;
        if (wdl != CCOIP_NO_DEADLINE && wdl < end) end = wdl;
        for (;;) {
            n = epoll_wait(d->epfd, ev, 64, 0);
            if (n != 0 || pt_now_ns() >= end) break;
            sched_yield();
        }
    }
    if (n == 0) n = epoll_wait(d->epfd, ev, 64, timeout);
    pthread_mutex_lock(&d->mu);
    d->polling--;
    bool wake = false;
    for (int k = 0; k < n; k++) {
        if (ev[k].data.u64 == 0) {
            wake = true;
        } else {
            ready[(*nready)++] = ev[k].data.u64;
        }
    }
    if (d->busy) {
        /* An application thread holds the baton (and the connections): keep what fired for
         * later (one-shot: it fires once), drain nothing. */
        for (uint32_t k = 0; k < *nready && d->ndeferred < 64u; k++)
            d->deferred[d->ndeferred++] = ready[k];
        *nready = 0;
        return W_NONE;
    }
    if (wake) {
        uint64_t drain;
        while (read(d->efd, &drain, sizeof drain) > 0) {
        }
    }
    return *nready > 0 ? W_READY : W_NONE;
}

/* Does one unit of work (mu held on entry, released during the work, held on return). */
static void do_work(pt_driver *d, pt_work w, const uint64_t *ready, uint32_t nready)
{
    d->busy = true;
    pt_ev *ev = NULL;
    if (w == W_EVENT) {
        ev = d->q_head;
        d->q_head = ev->next;
        if (d->q_head == NULL) d->q_tail = NULL;
    }
    pthread_mutex_unlock(&d->mu);
    if (w == W_READY) {
        /* Continue the readable parked receives here: completions are queued. */
        for (uint32_t k = 0; k < nready; k++) {
            pt_conn *c = conn_find(d, ready[k]);
            if (c == NULL || c->link == NULL) continue;
            pt_tcp_link_poll(c->link);
            park_arm(d, c);
        }
    } else if (w == W_TIMER) {
        ccoip_event t;
        memset(&t, 0, sizeof t);
        t.type = CCOIP_EV_TIMER;
        core_feed(d, &t);
    } else if (ev != NULL) {
        pt_conn *c;
        switch (ev->type) {
        case PT_EV_ACCEPTED:
            on_accepted(d, ev);
            break;
        case PT_EV_DIALED:
            on_dialed(d, ev);
            break;
        case PT_EV_SENT:
            c = conn_find(d, ev->conn);
            if (c != NULL) on_sent(d, c, ev->rv, ev->count);
            break;
        case PT_EV_RECEIVED:
            c = conn_find(d, ev->conn);
            if (c != NULL) on_received(d, c, ev->rv, ev->count);
            break;
        case PT_EV_CORE:
            on_core_event(d, ev);
            break;
        case PT_EV_STOP:
            break;
        }
        free(ev);
    }
    pthread_mutex_lock(&d->mu);
    d->busy = false;
}

static void *driver_main(void *arg)
{
    pt_driver *d = arg;
    ccoip_event start;
    memset(&start, 0, sizeof start);
    start.type = CCOIP_EV_START;
    core_feed(d, &start);
    uint64_t ready[64];
    uint32_t nready = 0;
    pthread_mutex_lock(&d->mu);
    d->core_started = true;
    for (;;) {
        if (d->stop) {
            while (d->busy) /* an application thread finishes its SUBMIT */
                pthread_cond_wait(&d->cv_baton, &d->mu);
            break;
        }
        if (d->busy) {
            pthread_cond_wait(&d->cv_baton, &d->mu);
            continue;
        }
        const pt_work w = wait_work(d, ready, &nready);
        if (w == W_STOP) break;
        if (w == W_NONE) continue;
        do_work(d, w, ready, nready);
    }
    pthread_mutex_unlock(&d->mu);
    driver_shutdown(d);
    return NULL;
}

/* ------------------------------------------------------------------------ */
/* Construction                                                             */
/* ------------------------------------------------------------------------ */

static pt_driver *driver_alloc(bool is_master)
{
    pt_driver *d = calloc(1, sizeof *d);
    if (d == NULL) return NULL;
    d->is_master = is_master;
    d->next_accept_id = CCOIP_CONN_ACCEPTED_BASE;
    d->next_cmd_id = 1;
    ccoip_codec_limits_default(&d->lim);
    pthread_mutex_init(&d->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&d->cv_ev, &ca);
    pthread_cond_init(&d->cv_cmd, &ca);
    pthread_cond_init(&d->cv_baton, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&d->kmu, NULL);
    pthread_cond_init(&d->kcv, NULL);
    pthread_cond_init(&d->kcv_idle, NULL);
    d->spin_ns = (uint64_t)PT_SPIN_US_DEFAULT * 1000u;
    const char *sp = getenv("PCCL_SPIN_US");
    if (sp != NULL && *sp != '\0') {
        char *end = NULL;
        const unsigned long long us = strtoull(sp, &end, 10);
        if (end != NULL && *end == '\0' && us <= 1000000u) {
            d->spin_ns = (uint64_t)us * 1000u;
        } else {
            pt_log(CCOIP_LOG_WARN, is_master ? "master" : "peer",
                   "PCCL_SPIN_US=%s ignored (0..1000000 microseconds)", sp);
        }
    }
    const char *ad = getenv("PCCL_API_SUBMIT");
    d->api_submit = ad == NULL || strcmp(ad, "0") != 0;
    /* PCCL_DRIVER_POLL=0: small receives go to the link threads (A/B comparisons). */
    const char *pe = getenv("PCCL_DRIVER_POLL");
    d->efd = -1;
    d->epfd = -1;
    if (pe == NULL || strcmp(pe, "0") != 0) {
        d->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        d->epfd = epoll_create1(EPOLL_CLOEXEC);
        struct epoll_event e;
        memset(&e, 0, sizeof e);
        e.events = EPOLLIN;
        e.data.u64 = 0; /* never a connection id */
        if (d->efd < 0 || d->epfd < 0 || epoll_ctl(d->epfd, EPOLL_CTL_ADD, d->efd, &e) != 0) {
            if (d->efd >= 0) close(d->efd);
            if (d->epfd >= 0) close(d->epfd);
            d->efd = -1;
            d->epfd = -1;
        }
    }
    snprintf(d->who, sizeof d->who, is_master ? "master" : "peer");
    return d;
}

static void driver_free(pt_driver *d)
{
    if (d->efd >= 0) close(d->efd);
    if (d->epfd >= 0) close(d->epfd);
    pthread_cond_destroy(&d->cv_baton);
    pthread_mutex_destroy(&d->mu);
    pthread_cond_destroy(&d->cv_ev);
    pthread_cond_destroy(&d->cv_cmd);
    pthread_mutex_destroy(&d->kmu);
    pthread_cond_destroy(&d->kcv);
    pthread_cond_destroy(&d->kcv_idle);
    trace_close(d);
    if (d->m != NULL) ccoip_master_destroy(d->m);
    if (d->p != NULL) ccoip_peer_destroy(d->p);
    free(d);
}

static uint64_t seed_random(void)
{
    uint64_t s = 0;
    if (getrandom(&s, sizeof s, 0) != (ssize_t)sizeof s) s = pt_now_ns();
    return s;
}

pcclResult_t pt_master_create(const char *listen_url, const ccoip_master_config *cfg,
                              pt_driver **out, uint32_t *bound_port)
{
    if (listen_url == NULL || out == NULL) return pcclInvalidArgument;
    *out = NULL;
    pt_driver *d = driver_alloc(true);
    if (d == NULL) return pcclSystemError;
    const uint64_t seed = seed_random();
    pcclResult_t r = ccoip_master_create(cfg, seed, &d->m);
    if (r == pcclSuccess) trace_open(d, seed, cfg, NULL);
    if (r == pcclSuccess) {
        if (cfg != NULL && cfg->max_message_bytes > 0) {
            d->lim.pb.max_message_bytes = cfg->max_message_bytes;
        }
        r = listen_on(d, 0, listen_url, bound_port);
    }
    if (r != pcclSuccess) {
        driver_free(d);
        return r;
    }
    *out = d;
    return pcclSuccess;
}

static pcclResult_t thread_start(pt_driver *d)
{
    if (pthread_create(&d->kthread, NULL, kworker_main, d) != 0) return pcclSystemError;
    d->kstarted = true;
    pthread_mutex_lock(&d->mu);
    d->started = true;
    d->running = true;
    pthread_mutex_unlock(&d->mu);
    if (pthread_create(&d->thread, NULL, driver_main, d) != 0) {
        pthread_mutex_lock(&d->kmu);
        d->kstop = true;
        pthread_cond_broadcast(&d->kcv);
        pthread_mutex_unlock(&d->kmu);
        pthread_join(d->kthread, NULL);
        d->kstarted = false;
        pthread_mutex_lock(&d->mu);
        d->started = false;
        d->running = false;
        pthread_mutex_unlock(&d->mu);
        return pcclSystemError;
    }
    return pcclSuccess;
}

pcclResult_t pt_driver_start(pt_driver *d)
{
    if (d == NULL) return pcclInvalidArgument;
    pthread_mutex_lock(&d->mu);
    const bool started = d->started;
    pthread_mutex_unlock(&d->mu);
    if (started) return pcclInvalidUsage;
    if (d->is_master && d->listeners[0].l != NULL) {
        nng_stream_listener_accept(d->listeners[0].l, d->listeners[0].aio);
    }
    return thread_start(d);
}

pcclResult_t pt_peer_create(const ccoip_peer_config *cfg, const char *bind_host, pt_driver **out)
{
    if (cfg == NULL || out == NULL || bind_host == NULL || strlen(bind_host) > 60) {
        return pcclInvalidArgument;
    }
    *out = NULL;
    pt_driver *d = driver_alloc(false);
    if (d == NULL) return pcclSystemError;
    snprintf(d->bind_host, sizeof d->bind_host, "%s", bind_host);
    /* Over ipc:// the master sees no remote IP: advertise a URL instead,
     * which needs a concrete bind host (not a wildcard). */
    d->advertise_url = cfg->master_url != NULL && strncmp(cfg->master_url, "ipc://", 6) == 0 &&
                       strcmp(bind_host, "0.0.0.0") != 0 && strcmp(bind_host, "::") != 0;
    const char *p2p_tls = getenv("PCCL_TLS_P2P");
    d->p2p_tls = cfg->master_url != NULL && strncmp(cfg->master_url, "tls+", 4) == 0 &&
                 (p2p_tls == NULL || strcmp(p2p_tls, "0") != 0);
    if (d->p2p_tls) {
        pt_log(CCOIP_LOG_INFO, d->who, "p2p links over tls+tcp:// (PCCL_TLS_P2P=0: plain tcp://)");
    }
    const uint64_t seed = seed_random();
    pcclResult_t r = ccoip_peer_create(cfg, seed, &d->p);
    if (r == pcclSuccess) trace_open(d, seed, NULL, cfg);
    if (r == pcclSuccess && cfg->max_message_bytes > 0) {
        d->lim.pb.max_message_bytes = cfg->max_message_bytes;
    }
    if (r == pcclSuccess) r = thread_start(d);
    if (r != pcclSuccess) {
        driver_free(d);
        return r;
    }
    *out = d;
    return pcclSuccess;
}

void pt_driver_stop(pt_driver *d)
{
    if (d == NULL) return;
    pthread_mutex_lock(&d->mu);
    d->stop = true;
    pthread_cond_broadcast(&d->cv_ev);
    pthread_cond_broadcast(&d->cv_baton);
    if (d->polling > 0) {
        const uint64_t one = 1;
        (void)!write(d->efd, &one, sizeof one);
    }
    pthread_mutex_unlock(&d->mu);
}

void pt_driver_join(pt_driver *d)
{
    if (d == NULL) return;
    pthread_mutex_lock(&d->mu);
    const bool join = d->started && !d->joined;
    d->joined = d->joined || join;
    pthread_mutex_unlock(&d->mu);
    if (join) pthread_join(d->thread, NULL);
}

bool pt_driver_running(pt_driver *d)
{
    pthread_mutex_lock(&d->mu);
    const bool r = d->running;
    pthread_mutex_unlock(&d->mu);
    return r;
}

void pt_driver_destroy(pt_driver *d)
{
    if (d == NULL) return;
    pt_driver_stop(d);
    pt_driver_join(d);
    if (!d->started) driver_shutdown(d);
    driver_free(d);
}

/* ------------------------------------------------------------------------ */
/* Commands                                                                 */
/* ------------------------------------------------------------------------ */

static pcclResult_t cmd_submit(pt_driver *d, ccoip_cmd *cmd, void *sendbuf, void *recvbuf,
                               uint64_t bytes, uint8_t **tensors, uint64_t *tensor_bytes,
                               uint32_t ntensors, void *keys_mem, uint32_t *handle)
{
    pthread_mutex_lock(&d->mu);
    if (d->stop || !d->running) {
        pthread_mutex_unlock(&d->mu);
        free(tensors);
        free(tensor_bytes);
        free(keys_mem);
        return pcclInvalidUsage;
    }
    uint32_t idx = PT_MAX_CMDS;
    for (uint32_t i = 0; i < PT_MAX_CMDS; i++) {
        if (d->cmds[i].state == CMD_FREE) {
            idx = i;
            break;
        }
    }
    if (idx == PT_MAX_CMDS) {
        pthread_mutex_unlock(&d->mu);
        free(tensors);
        free(tensor_bytes);
        free(keys_mem);
        return pcclInvalidUsage;
    }
    pt_cmd *c = &d->cmds[idx];
    memset(c, 0, sizeof *c);
    c->state = CMD_POSTED;
    c->cmd_id = d->next_cmd_id++;
    c->sendbuf = sendbuf;
    c->recvbuf = recvbuf;
    c->bytes = bytes;
    c->tensors = tensors;
    c->tensor_bytes = tensor_bytes;
    c->ntensors = ntensors;
    c->keys_mem = keys_mem;
    c->spin = d->spin_ns > 0 && cmd->type == CCOIP_CMD_ALL_REDUCE && bytes <= PT_SPIN_MAX_BYTES;
    if (c->spin) d->spin_cmds++;
    cmd->cmd_id = c->cmd_id;
    ccoip_event ev;
    memset(&ev, 0, sizeof ev);
    ev.type = CCOIP_EV_SUBMIT;
    ev.cmd = *cmd;
    *handle = idx;
    if (d->epfd >= 0 && d->api_submit && cmd->type == CCOIP_CMD_ALL_REDUCE && d->core_started &&
        !d->busy && d->q_head == NULL) {
        /* Issue 7: the calling thread takes the baton and steps its SUBMIT itself (initiate
         * and the first ring sends go out from here); nothing queued is overtaken. */
        d->busy = true;
        pthread_mutex_unlock(&d->mu);
        core_feed(d, &ev);
        pthread_mutex_lock(&d->mu);
        d->busy = false;
        pthread_cond_broadcast(&d->cv_baton);
        pthread_mutex_unlock(&d->mu);
        return pcclSuccess;
    }
    pthread_mutex_unlock(&d->mu);
    q_core(d, &ev);
    return pcclSuccess;
}

pcclResult_t pt_cmd_submit(pt_driver *d, ccoip_cmd *cmd, void *sendbuf, void *recvbuf,
                           uint64_t bytes, uint32_t *handle)
{
    if (d == NULL || cmd == NULL || handle == NULL || d->is_master) return pcclInvalidArgument;
    return cmd_submit(d, cmd, sendbuf, recvbuf, bytes, NULL, NULL, 0, NULL, handle);
}

pcclResult_t pt_cmd_submit_sync(pt_driver *d, ccoip_cmd *cmd, void *const *tensors,
                                const uint64_t *tensor_bytes, uint32_t n, uint32_t *handle)
{
    if (d == NULL || cmd == NULL || handle == NULL || d->is_master) return pcclInvalidArgument;
    if (n > 0 && (tensors == NULL || tensor_bytes == NULL)) return pcclInvalidArgument;
    const uint32_t nk = cmd->sync.num_keys;
    if (nk > 0 && cmd->sync.keys == NULL) return pcclInvalidArgument;
    uint8_t **t = NULL;
    uint64_t *b = NULL;
    /* The SUBMIT event is stepped later on the driver thread: it points at
     * copies of the keys and names that live as long as the command. */
    ccoip_state_key *keys = NULL;
    if (nk > 0) {
        keys = calloc(nk, sizeof *keys + CCOIP_STATE_NAME_MAX);
        if (keys == NULL) return pcclSystemError;
        char *names = (char *)(keys + nk);
        for (uint32_t i = 0; i < nk; i++) {
            keys[i] = cmd->sync.keys[i];
            char *nm = names + (size_t)i * CCOIP_STATE_NAME_MAX;
            if (cmd->sync.keys[i].name != NULL) {
                snprintf(nm, CCOIP_STATE_NAME_MAX, "%s", cmd->sync.keys[i].name);
                keys[i].name = nm;
            }
        }
    }
    if (n > 0) {
        t = malloc(n * sizeof *t);
        b = malloc(n * sizeof *b);
        if (t == NULL || b == NULL) {
            free(t);
            free(b);
            free(keys);
            return pcclSystemError;
        }
        for (uint32_t i = 0; i < n; i++) {
            t[i] = tensors[i];
            b[i] = tensor_bytes[i];
        }
    }
    ccoip_cmd copy = *cmd;
    copy.sync.keys = keys;
    const pcclResult_t r = cmd_submit(d, &copy, NULL, NULL, 0, t, b, n, keys, handle);
    cmd->cmd_id = copy.cmd_id;
    return r;
}

pcclResult_t pt_cmd_wait(pt_driver *d, uint32_t handle, uint32_t timeout_ms, bool keep,
                         pt_cmd_result *out)
{
    if (d == NULL || handle >= PT_MAX_CMDS) return pcclInvalidArgument;
    const uint64_t dl = timeout_ms > 0 ? pt_now_ns() + (uint64_t)timeout_ms * 1000000u : 0;
    pthread_mutex_lock(&d->mu);
    pt_cmd *c = &d->cmds[handle];
    if (c->state == CMD_POSTED && c->spin) {
        /* Spin-then-sleep (see wait_work): poll for a NOTIFY before sleeping. */
        const uint64_t seen = atomic_load_explicit(&d->notified, memory_order_acquire);
        uint64_t end = pt_now_ns() + d->spin_ns;
        if (dl != 0 && dl < end) end = dl;
        pthread_mutex_unlock(&d->mu);
        while (atomic_load_explicit(&d->notified, memory_order_acquire) == seen &&
               pt_now_ns() < end)
            sched_yield();
        pthread_mutex_lock(&d->mu);
    }
    while (c->state == CMD_POSTED) {
        if (dl == 0) {
            pthread_cond_wait(&d->cv_cmd, &d->mu);
            continue;
        }
        if (pt_now_ns() >= dl) break;
        struct timespec ts;
        ts.tv_sec = (time_t)(dl / 1000000000u);
        ts.tv_nsec = (long)(dl % 1000000000u);
        pthread_cond_timedwait(&d->cv_cmd, &d->mu, &ts);
    }
    pcclResult_t r;
    if (c->state == CMD_DONE) {
        r = c->res.result;
        if (out != NULL) *out = c->res;
        cmd_release(c);
    } else {
        r = pcclTimeout;
        if (!keep && c->state == CMD_POSTED) c->state = CMD_ABANDONED;
    }
    pthread_mutex_unlock(&d->mu);
    return r;
}

void pt_peer_info_get(pt_driver *d, pt_peer_info *out)
{
    pthread_mutex_lock(&d->mu);
    *out = d->pinfo;
    pthread_mutex_unlock(&d->mu);
}

void pt_master_info_get(pt_driver *d, pt_master_info *out)
{
    pthread_mutex_lock(&d->mu);
    *out = d->minfo;
    pthread_mutex_unlock(&d->mu);
}
