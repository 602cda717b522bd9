/*
 * pt_trace.c — PCCL_TRACE (core/ccoip_trace.h): the trace of the core a
 * driver owns, so that `pccl-sim --replay FILE` re-runs it (transport/README.md).
 */
#define _GNU_SOURCE
#include "ccoip_trace.h"
#include "pt_internal.h"

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
void pt_trace_open(pt_driver *d, uint64_t seed, const ccoip_master_config *mcfg,
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
void pt_trace_event(pt_driver *d, const ccoip_event *ev)
{
    if (d->trace == NULL) return;
    trace_polled(d);
    if (d->trace == NULL) return;
    TRACE_PUT(d, ccoip_trace_encode_event(ev, out, cap));
    if (d->trace != NULL) d->trace->events++;
}

/* SET_PORT before a ccoip_peer_set_port call. */
void pt_trace_set_port(pt_driver *d, uint32_t listener, uint32_t port)
{
    if (d->trace == NULL) return;
    trace_polled(d);
    if (d->trace == NULL) return;
    TRACE_PUT(d, ccoip_trace_encode_set_port(listener, port, NULL, out, cap));
}

/* After draining: hash the deadline, CHECKPOINT. */
void pt_trace_checkpoint(pt_driver *d, uint64_t deadline_ns)
{
    if (d->trace == NULL) return;
    pt_trace *t = d->trace;
    ccoip_trace_hash_deadline(&t->h, deadline_ns);
    t->polled = 0; /* a CHECKPOINT drains every action */
    const uint64_t events = t->events, hash = t->h.hash;
    TRACE_PUT(d, ccoip_trace_encode_checkpoint(events, hash, out, cap));
}

/* TRAILER, flush, close (at destroy). */
void pt_trace_close(pt_driver *d)
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

void pt_trace_step(pt_driver *d, pcclResult_t rc)
{
    ccoip_trace_hash_step(&d->trace->h, (int)rc);
}

void pt_trace_action(pt_driver *d, const ccoip_action *a)
{
    ccoip_trace_hash_action(&d->trace->h, a);
    d->trace->polled++;
}
