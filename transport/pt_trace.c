/*
 * pt_trace.c — PCCL_TRACE (core/ccoip_trace.h): the trace of the core a
 * driver owns, so that `pccl-sim --replay FILE` re-runs it (transport/README.md).
 */
#define _GNU_SOURCE
#include "ccoip_trace.h"
#include "pt_internal.h"

/* The records are encoded by the core's trace writer (ccoip_trace_writer, core/ccoip_trace.h),
 * the same sequence the simulator writes; this file drains its buffer to the file whenever it
 * passes PT_TRACE_BUF_BYTES, and at destroy. Any failure (encoding, memory, a write) closes the
 * file and turns tracing off for this core with one log line. The header is written by the
 * creating thread before the driver thread starts, records by the driver thread, the trailer
 * after it was joined. */
#define PT_TRACE_BUF_BYTES ((uint64_t)256 << 10)

typedef struct pt_trace {
    FILE *f;
    char path[4096];
    ccoip_trace_writer w;
} pt_trace;

static pthread_mutex_t g_trace_mu = PTHREAD_MUTEX_INITIALIZER;
static uint32_t g_trace_cores; /* traced cores created in this process */

static void trace_free(pt_driver *d)
{
    pt_trace *t = d->trace;
    if (t == NULL) return;
    if (t->f != NULL) fclose(t->f);
    ccoip_trace_writer_deinit(&t->w);
    free(t);
    d->trace = NULL;
}

static void trace_fail(pt_driver *d, const char *what)
{
    pt_log(CCOIP_LOG_ERROR, d->who, "PCCL_TRACE: %s %s failed (%s): tracing is off for this core",
           what, d->trace->path, strerror(errno));
    trace_free(d);
}

/* Writes the records the writer holds out to the file. */
static bool trace_flush(pt_driver *d)
{
    pt_trace *t = d->trace;
    if (t->w.len > 0 && fwrite(t->w.buf, 1, (size_t)t->w.len, t->f) != (size_t)t->w.len) {
        trace_fail(d, "writing");
        return false;
    }
    ccoip_trace_writer_drained(&t->w);
    return true;
}

/* After an append: a failure turns tracing off; a full buffer is written out. */
static void trace_after(pt_driver *d, pcclResult_t r)
{
    if (r != pcclSuccess) {
        pt_log(CCOIP_LOG_ERROR, d->who,
               "PCCL_TRACE: a record cannot be written (%d): tracing is off", (int)r);
        trace_free(d);
        return;
    }
    if (d->trace->w.len >= PT_TRACE_BUF_BYTES) (void)trace_flush(d);
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
    ccoip_trace_writer_init(&t->w);
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
    t->f = fopen(t->path, "wb");
    if (t->f == NULL) {
        trace_fail(d, "opening");
        return;
    }
    setvbuf(t->f, NULL, _IONBF, 0); /* buffered by the writer: a failed write shows at once */
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
    trace_after(d, ccoip_trace_writer_header(&t->w, &h));
    if (d->trace != NULL) pt_log(CCOIP_LOG_INFO, d->who, "PCCL_TRACE: writing %s", t->path);
}

/* EVENT before each step call. */
void pt_trace_event(pt_driver *d, const ccoip_event *ev)
{
    if (d->trace == NULL) return;
    trace_after(d, ccoip_trace_writer_event(&d->trace->w, ev));
}

/* SET_PORT before a ccoip_peer_set_port call. */
void pt_trace_set_port(pt_driver *d, uint32_t listener, uint32_t port)
{
    if (d->trace == NULL) return;
    trace_after(d, ccoip_trace_writer_set_port(&d->trace->w, listener, port, NULL));
}

/* After draining: hash the deadline, CHECKPOINT. */
void pt_trace_checkpoint(pt_driver *d, uint64_t deadline_ns)
{
    if (d->trace == NULL) return;
    trace_after(d, ccoip_trace_writer_checkpoint(&d->trace->w, deadline_ns));
}

/* TRAILER, flush, close (at destroy). */
void pt_trace_close(pt_driver *d)
{
    if (d->trace == NULL) return;
    trace_after(d, ccoip_trace_writer_trailer(&d->trace->w));
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
    ccoip_trace_writer_step(&d->trace->w, (int)rc);
}

void pt_trace_action(pt_driver *d, const ccoip_action *a)
{
    ccoip_trace_writer_action(&d->trace->w, a);
}
