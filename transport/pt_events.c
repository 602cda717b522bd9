/*
 * pt_events.c — the driver's event queue and the nng aio callbacks that feed
 * it. Callbacks run on nng's threads (or a link's): they only lock, enqueue
 * and signal; every decision is taken on the driver thread.
 */
#define _GNU_SOURCE
#include <unistd.h>

#include "pt_internal.h"

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

void pt_q_core(pt_driver *d, const ccoip_event *cev)
{
    pt_ev *ev = ev_new(PT_EV_CORE);
    ev->core = *cev;
    q_push(d, ev);
}

void pt_q_close(pt_driver *d, uint64_t conn)
{
    pt_ev *ev = ev_new(PT_EV_CLOSE);
    ev->conn = conn;
    q_push(d, ev);
}

/* ------------------------------------------------------------------------ */
/* aio callbacks: lock, enqueue, signal                                     */
/* ------------------------------------------------------------------------ */

/* A data plane finished a send or a receive (pt_dp.h): an nng aio's callback, a link's
 * thread, or the driver thread inside send/recv/poll. */
void pt_dp_done(void *arg, uint64_t conn, bool send, int rv, uint64_t count)
{
    pt_ev *ev = ev_new(send ? PT_EV_SENT : PT_EV_RECEIVED);
    ev->conn = conn;
    ev->rv = rv;
    ev->count = count;
    q_push((pt_driver *)arg, ev);
}

void pt_cb_dial(void *arg)
{
    pt_conn *c = arg;
    pt_ev *ev = ev_new(PT_EV_DIALED);
    ev->conn = c->id;
    ev->rv = nng_aio_result(c->dial_aio);
    ev->stream = ev->rv == 0 ? nng_aio_get_output(c->dial_aio, 0) : NULL;
    q_push(c->d, ev);
}

void pt_cb_accept(void *arg)
{
    pt_listener *l = arg;
    pt_ev *ev = ev_new(PT_EV_ACCEPTED);
    ev->listener = l->kind;
    ev->rv = nng_aio_result(l->aio);
    ev->stream = ev->rv == 0 ? nng_aio_get_output(l->aio, 0) : NULL;
    q_push(l->d, ev);
}
