/*
 * pt_splice.c — the master's relay pipes (docs/protocol.md §8.6): two
 * connections the core spliced (CCOIP_ACT_SPLICE) forward every byte to each
 * other, a bounded buffer per direction, on nng's own aio threads (a receive,
 * then sends until it is all out, then the next receive): the driver thread
 * does nothing per byte. When either direction fails (a close, an error) both
 * connections are closed through the driver (pt_q_close), whose CONN_CLOSED
 * tells the core; pt_conn_free stops the pipe before its streams go.
 */
#include <stdlib.h>
#include <string.h>

#include "pt_internal.h"

#define PT_PIPE_BUF (256u * 1024u)

typedef struct pt_pipe_dir {
    struct pt_pipe *pipe;
    nng_aio *aio;
    nng_stream *from, *to;
    uint64_t from_conn, to_conn;
    bool sending;
    size_t have, sent;
    uint8_t *buf;
} pt_pipe_dir;

struct pt_pipe {
    pt_driver *d;
    pt_pipe_dir dir[2];
    uint32_t refs; /* connections still holding it (freed at 0) */
};

static void pipe_recv(pt_pipe_dir *x)
{
    nng_iov iov = {.iov_buf = x->buf, .iov_len = PT_PIPE_BUF};
    x->sending = false;
    nng_aio_set_iov(x->aio, 1, &iov);
    nng_stream_recv(x->from, x->aio);
}

static void pipe_send(pt_pipe_dir *x)
{
    nng_iov iov = {.iov_buf = x->buf + x->sent, .iov_len = x->have - x->sent};
    x->sending = true;
    nng_aio_set_iov(x->aio, 1, &iov);
    nng_stream_send(x->to, x->aio);
}

static void pipe_cb(void *arg)
{
    pt_pipe_dir *x = arg;
    const int rv = nng_aio_result(x->aio);
    const size_t n = nng_aio_count(x->aio);
    if (rv != 0 || (!x->sending && n == 0)) {
        /* One side closed or failed: both go (the driver tells the core). */
        pt_q_close(x->pipe->d, x->from_conn);
        pt_q_close(x->pipe->d, x->to_conn);
        return;
    }
    if (!x->sending) {
        x->have = n;
        x->sent = 0;
        pipe_send(x);
        return;
    }
    x->sent += n;
    if (x->sent < x->have) {
        pipe_send(x);
    } else {
        pipe_recv(x);
    }
}

bool pt_splice(pt_driver *d, pt_conn *a, pt_conn *b)
{
    if (a == NULL || b == NULL || a == b || a->pipe != NULL || b->pipe != NULL ||
        a->dp != &pt_nng_ops || b->dp != &pt_nng_ops || a->ns.s == NULL || b->ns.s == NULL ||
        a->recv_busy || b->recv_busy) {
        return false;
    }
    pt_pipe *p = calloc(1, sizeof *p);
    if (p == NULL) return false;
    p->d = d;
    for (uint32_t i = 0; i < 2u; i++) {
        pt_pipe_dir *x = &p->dir[i];
        x->pipe = p;
        x->from = i == 0 ? a->ns.s : b->ns.s;
        x->to = i == 0 ? b->ns.s : a->ns.s;
        x->from_conn = i == 0 ? a->id : b->id;
        x->to_conn = i == 0 ? b->id : a->id;
        x->buf = malloc(PT_PIPE_BUF);
        if (x->buf == NULL || nng_aio_alloc(&x->aio, pipe_cb, x) != 0) {
            for (uint32_t j = 0; j <= i; j++) {
                if (p->dir[j].aio != NULL) nng_aio_free(p->dir[j].aio);
                free(p->dir[j].buf);
            }
            free(p);
            return false;
        }
    }
    p->refs = 2;
    a->pipe = p;
    b->pipe = p;
    pipe_recv(&p->dir[0]);
    pipe_recv(&p->dir[1]);
    pt_log(CCOIP_LOG_DEBUG, d->who, "connections %" PRIu64 " and %" PRIu64 " spliced", a->id,
           b->id);
    return true;
}

void pt_splice_detach(pt_conn *c)
{
    pt_pipe *p = c->pipe;
    if (p == NULL) return;
    c->pipe = NULL;
    /* Both directions touch this connection's stream: stop them (their callbacks have run when
     * nng_aio_stop returns; they only queue closes). */
    for (uint32_t i = 0; i < 2u; i++)
        nng_aio_stop(p->dir[i].aio);
    for (uint32_t i = 0; i < 2u; i++) {
        const uint64_t other = p->dir[i].from_conn == c->id ? p->dir[i].to_conn : 0u;
        if (other != 0) pt_q_close(p->d, other); /* the partner goes too */
    }
    if (--p->refs > 0) return;
    for (uint32_t i = 0; i < 2u; i++) {
        nng_aio_free(p->dir[i].aio);
        free(p->dir[i].buf);
    }
    free(p);
}
