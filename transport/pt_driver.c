/*
 * pt_driver.c — the driver of one core object (pt.h): its thread, which pops
 * events from one locked queue (aio completions, kernel completions,
 * application commands), turns them into core events, steps the core and
 * executes every action it drains (pt_actions.c); waiting (epoll, spin, the
 * baton); creation and destruction. Action handlers never step the core
 * themselves: what they cause (a failed I/O, a closed connection) is queued
 * as an event, so action payloads stay valid while the queue drains
 * (ccoip_sm.h ownership rules).
 */
#define _GNU_SOURCE
#include <sched.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "ccoip_probe.h"
#include "pt_internal.h"

/* ------------------------------------------------------------------------ */
/* Core access                                                              */
/* ------------------------------------------------------------------------ */

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
         * meanwhile (docs/core.md §3.6). */
        d->pinfo.id = ccoip_peer_id(d->p);
        d->pinfo.accepted = ccoip_peer_is_accepted(d->p);
        d->pinfo.pending = ccoip_peer_is_pending(d->p);
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

static uint64_t core_deadline(pt_driver *d);

void pt_core_feed(pt_driver *d, ccoip_event *ev)
{
    if (d->core_broken) return;
    uint64_t now = pt_now_ns();
    if (now < d->last_now) now = d->last_now;
    d->last_now = now;
    ev->now_ns = now;
    if (d->trace != NULL) pt_trace_event(d, ev);
    const pcclResult_t rc = d->is_master ? ccoip_master_step(d->m, ev) : ccoip_peer_step(d->p, ev);
    if (d->trace != NULL) pt_trace_step(d, rc);
    if (rc == pcclInternalError) {
        pt_log(CCOIP_LOG_ERROR, d->who, "core step failed (bounded table overflow): %d", (int)rc);
        d->core_broken = true;
    } else if (rc != pcclSuccess) {
        pt_log(CCOIP_LOG_DEBUG, d->who, "core step(event %d) returned %d", (int)ev->type, (int)rc);
    }
    ccoip_action a;
    while (d->is_master ? ccoip_master_poll(d->m, &a) : ccoip_peer_poll(d->p, &a)) {
        if (d->trace != NULL) pt_trace_action(d, &a);
        pt_act_run(d, &a);
    }
    if (d->trace != NULL) pt_trace_checkpoint(d, core_deadline(d));
    who_update(d);
    snapshot(d);
}

static uint64_t core_deadline(pt_driver *d)
{
    return d->is_master ? ccoip_master_deadline_ns(d->m) : ccoip_peer_deadline_ns(d->p);
}

/* ------------------------------------------------------------------------ */
/* The driver thread                                                        */
/* ------------------------------------------------------------------------ */

static void on_accepted(pt_driver *d, pt_ev *ev)
{
    pt_listener *l = &d->listeners[ev->listener];
    l->armed = false;
    if (ev->rv != 0) {
        if (ev->rv == NNG_ECLOSED) return;
        /* EMFILE, ENFILE or any other error: accepting again at once would spin (the error
         * persists); back off instead (pt_sweep re-arms). */
        pt_listener_failed(d, l, ev->rv);
        return;
    }
    l->streak = 0;
    const uint64_t id = d->next_accept_id++;
    const bool relay = d->is_master && ev->listener == CCOIP_MASTER_LISTENER_RELAY;
    pt_conn *c = pt_conn_new(d, id, !d->is_master || relay); /* the relay's frames: data */
    if (c == NULL) {
        nng_stream_close(ev->stream);
        nng_stream_free(ev->stream);
        pt_listener_arm(d, l);
        return;
    }
    c->accepted = true;
    c->listener = ev->listener;
    c->relay = relay;
    l->n_acc++;
    d->acc_total++;
    if (!d->is_master && ev->listener == CCOIP_LISTENER_BANDWIDTH) {
        c->probe = PROBE_TARGET; /* served here; the core never hears of it */
        c->idle_ms = PT_PROBE_IDLE_MS;
        c->life_ns = pt_now_ns() + (uint64_t)PT_PROBE_MAX_MS * 1000000u;
        pt_conn_up(d, c, ev->stream);
        pt_probe_target_up(d, c);
        pt_listener_arm(d, l);
        return;
    }
    if (!d->is_master && ev->listener == CCOIP_LISTENER_SHARED_STATE) c->idle_ms = PT_STATE_IDLE_MS;
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
    pt_conn_up(d, c, ev->stream);
    pt_log(CCOIP_LOG_DEBUG, d->who, "connection %" PRIu64 " accepted", id);
    pt_core_feed(d, &cev);
    pt_listener_arm(d, l);
}

static void on_dialed(pt_driver *d, pt_ev *ev)
{
    pt_conn *c = pt_conn_find(d, ev->conn);
    if (c == NULL) {
        if (ev->stream != NULL) {
            nng_stream_close(ev->stream);
            nng_stream_free(ev->stream);
        }
        return;
    }
    if (ev->rv == 0 && ev->stream != NULL && !pt_stream_connected(ev->stream)) {
        /* nng 1.5.2 may complete a dial whose TCP connect is still in progress (seen across
         * the WAN testbed: "connected" 2 ms after the SYN at 10 ms RTT, to a peer that drops
         * every SYN); a HELLO on it waits for the kernel's SYN retries (minutes) and the dial
         * timeout never fires. Confirm it first: pt_sweep polls until the peer's address is
         * known (connected) or PT_DIAL_TIMEOUT_MS since the dial has passed. */
        c->confirm = ev->stream;
        pt_log(CCOIP_LOG_DEBUG, d->who, "connection %" PRIu64 ": dial reported early: confirming",
               ev->conn);
        pt_tdl_note(d, pt_now_ns() + (uint64_t)PT_CONFIRM_POLL_MS * 1000000u);
        return;
    }
    pt_dialed(d, c, ev->rv, ev->stream);
}

void pt_dialed(pt_driver *d, pt_conn *c, int rv, nng_stream *s)
{
    if (c->probe == PROBE_PROBER) {
        pt_probe_dialed(d, c, rv, s);
        return;
    }
    ccoip_event cev;
    memset(&cev, 0, sizeof cev);
    cev.conn = c->id;
    if (rv != 0 || s == NULL) {
        pt_log(CCOIP_LOG_INFO, d->who, "connection %" PRIu64 ": connect failed: %s", c->id,
               nng_strerror(rv));
        pt_conn_free(d, c);
        cev.type = CCOIP_EV_CONN_CLOSED;
    } else {
        pt_conn_up(d, c, s);
        cev.type = CCOIP_EV_CONN_UP;
    }
    pt_core_feed(d, &cev);
}

static void on_core_event(pt_driver *d, pt_ev *ev)
{
    ccoip_event *cev = &ev->core;
    if (cev->type == CCOIP_EV_IO_DONE || cev->type == CCOIP_EV_KERNEL_DONE) {
        pt_io *io = pt_io_find(d, cev->done.io_id);
        if (io == NULL) return; /* cancelled: no completion for it */
        pt_io_free(d, io);
    }
    pt_core_feed(d, cev);
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
        pt_conn_free(d, d->conns[d->nconns - 1]);
    for (uint32_t s = 0; s < PT_MAX_SLOTS; s++)
        pt_kernels_cancel(d, s);
    pt_kernel_stop(d);
    for (uint32_t s = 0; s < PT_MAX_SLOTS; s++) {
        free(d->slots[s].cache_scratch); /* scratch and backup point into these */
        free(d->slots[s].cache_backup);
        free(d->slots[s].tensors);
        free(d->slots[s].tensor_bytes);
        memset(&d->slots[s], 0, sizeof d->slots[s]);
        memset(&d->xslots[s], 0, sizeof d->xslots[s]);
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
    pt_cmds_fail_all(d); /* commands still waiting fail: the communicator is gone */
    pt_shadows_free_all(d);
    d->running = false;
    atomic_fetch_add_explicit(&d->notified, 1, memory_order_release);
    pthread_cond_broadcast(&d->cv_cmd);
    pthread_mutex_unlock(&d->mu);
}

typedef enum pt_work { W_NONE = 0, W_EVENT, W_TIMER, W_SWEEP, W_READY, W_STOP } pt_work;

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
    if (d->tdl <= now) return W_SWEEP;
    /* CCOIP_NO_DEADLINE is UINT64_MAX, as is "no transport deadline". */
    const uint64_t wdl = d->tdl < dl ? d->tdl : dl;
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
            pt_conn *c = pt_conn_find(d, ready[k]);
            if (c == NULL || c->dp->poll == NULL) continue;
            if (c->dp->poll(c->dp_t)) pt_park_arm(d, c); /* still parked: armed again */
        }
    } else if (w == W_SWEEP) {
        pt_sweep(d);
    } else if (w == W_TIMER) {
        ccoip_event t;
        memset(&t, 0, sizeof t);
        t.type = CCOIP_EV_TIMER;
        pt_core_feed(d, &t);
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
            c = pt_conn_find(d, ev->conn);
            if (c != NULL) pt_on_sent(d, c, ev->rv, ev->count);
            break;
        case PT_EV_RECEIVED:
            c = pt_conn_find(d, ev->conn);
            if (c != NULL) pt_on_received(d, c, ev->rv, ev->count);
            break;
        case PT_EV_CORE:
            on_core_event(d, ev);
            break;
        case PT_EV_CLOSE:
            c = pt_conn_find(d, ev->conn);
            if (c != NULL) pt_conn_close(d, c, true);
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
    pt_core_feed(d, &start);
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
    ccoip_exec_init(&d->exec, d->xslots, PT_MAX_SLOTS);
    d->is_master = is_master;
    d->next_accept_id = CCOIP_CONN_ACCEPTED_BASE;
    d->next_cmd_id = 1;
    ccoip_codec_limits_default(&d->lim);
    d->tdl = UINT64_MAX;
    /* Accepted connections: the table less the slots kept for our own links (a peer's master
     * connection, its dialled ring and state links), and the descriptors left after a reserve
     * (a taken-over link holds two). */
    d->acc_cap = is_master ? PT_MAX_CONNS : PT_MAX_CONNS - PT_CONNS_RESERVED;
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
        /* The master takes over at most PT_MASTER_MAX_LINKS connections; a peer, any. */
        const uint64_t spare = PT_FD_RESERVE + (is_master ? PT_MASTER_MAX_LINKS : 0u);
        uint64_t fds = 8u;
        if (rl.rlim_cur > spare + 16u) {
            fds = is_master ? rl.rlim_cur - spare : (rl.rlim_cur - spare) / 2u;
        }
        if (fds < d->acc_cap) d->acc_cap = (uint32_t)fds;
    }
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
    pt_trace_close(d);
    if (d->m != NULL) ccoip_master_destroy(d->m);
    if (d->p != NULL) ccoip_peer_destroy(d->p);
    free(d);
}

/* A connection's bound on bytes of owned frame copies queued: PT_SQ_MAX_OWNED_BYTES, or four
 * control messages of the largest size when that is more. */
static uint64_t sq_max_owned(const pt_driver *d)
{
    const uint64_t four = 4u * ((uint64_t)d->lim.pb.max_message_bytes + CCOIP_DATA_HEADER_BYTES);
    return four > PT_SQ_MAX_OWNED_BYTES ? four : PT_SQ_MAX_OWNED_BYTES;
}

static uint64_t seed_random(void)
{
    uint64_t s = 0;
    if (getrandom(&s, sizeof s, 0) != (ssize_t)sizeof s) s = pt_now_ns();
    return s;
}

/* The relay listener (docs/protocol.md §8.6): on the control listener's host, the port of
 * PCCL_RELAY_PORT (default 0: any; "off": no relay). A master on ipc:// has none (its peers
 * share its host). Failing to listen is logged, not fatal: links nobody can dial stay unlinked. */
static void master_relay_listen(pt_driver *d, const char *listen_url)
{
    const char *env = getenv("PCCL_RELAY_PORT");
    if (env != NULL && strcmp(env, "off") == 0) return;
    const char *host = strstr(listen_url, "://");
    if (host == NULL || strncmp(listen_url, "ipc", 3) == 0) return;
    const char *after = host + 3;
    if (*after == '[') after = strchr(after, ']');
    const char *colon = after != NULL ? strrchr(after, ':') : NULL;
    if (colon == NULL) return;
    const long want = env != NULL && env[0] != '\0' ? strtol(env, NULL, 10) : 0;
    char url[320];
    snprintf(url, sizeof url, "%.*s:%ld", (int)(colon - listen_url), listen_url,
             want >= 0 && want <= 65535 ? want : 0L);
    uint32_t port = 0;
    if (pt_listen_on(d, CCOIP_MASTER_LISTENER_RELAY, url, &port) != pcclSuccess || port == 0) {
        pt_log(CCOIP_LOG_WARN, "master", "no relay (%s): peers that nobody can dial stay unlinked",
               url);
        return;
    }
    ccoip_master_set_relay_port(d->m, port);
    pt_log(CCOIP_LOG_INFO, "master", "relay for links nobody can dial on port %u", (unsigned)port);
}

pcclResult_t pt_master_create(const char *listen_url, const ccoip_master_config *cfg,
                              pt_driver **out, uint32_t *bound_port)
{
    if (listen_url == NULL || out == NULL) return pcclInvalidArgument;
    *out = NULL;
    if (cfg != NULL && cfg->max_peers > PT_MASTER_MAX_PEERS) {
        pt_log(CCOIP_LOG_ERROR, "master",
               "max_peers %u: at most %u (the connection table holds %u connections, %u of them "
               "kept for connections that have not joined yet)",
               cfg->max_peers, PT_MASTER_MAX_PEERS, PT_MAX_CONNS,
               PT_MAX_CONNS - PT_MASTER_MAX_PEERS);
        return pcclInvalidArgument;
    }
    ccoip_master_config mc;
    if (cfg != NULL) {
        mc = *cfg;
    } else {
        memset(&mc, 0, sizeof mc);
    }
    pcclResult_t r = pt_auth_load("master", &mc.auth);
    if (r != pcclSuccess) return r;
    if (!ccoip_auth_on(&mc.auth) && strncmp(listen_url, "ipc://", 6) != 0 &&
        strstr(listen_url, "://127.") == NULL && strstr(listen_url, "://localhost") == NULL &&
        strstr(listen_url, "://[::1]") == NULL) {
        pt_log(CCOIP_LOG_WARN, "master",
               "%s: no run token: anyone who reaches this port may join the run "
               "(PCCL_RUN_TOKEN_FILE, docs/security.md)",
               listen_url);
    }
    /* This driver's probes are bounded by time too (pt_probe.c, core/ccoip_probe.h): the byte
     * bound can be large enough for fast links (docs/protocol.md §8.4). */
    if (mc.probe_bytes == 0) mc.probe_bytes = CCOIP_PROBE_BYTES_TIMED;
    pt_driver *d = driver_alloc(true);
    if (d == NULL) return pcclSystemError;
    d->auth = mc.auth;
    cfg = &mc;
    const uint64_t seed = seed_random();
    r = ccoip_master_create(cfg, seed, &d->m);
    if (r == pcclSuccess) pt_trace_open(d, seed, cfg, NULL);
    if (r == pcclSuccess) {
        if (cfg != NULL && cfg->max_message_bytes > 0) {
            d->lim.pb.max_message_bytes = cfg->max_message_bytes;
        }
        d->sq_max_owned = sq_max_owned(d);
        r = pt_listen_on(d, 0, listen_url, bound_port);
    }
    if (r == pcclSuccess) master_relay_listen(d, listen_url);
    if (r != pcclSuccess) {
        driver_free(d);
        return r;
    }
    *out = d;
    return pcclSuccess;
}

static pcclResult_t thread_start(pt_driver *d)
{
    if (pt_kernel_start(d) != pcclSuccess) return pcclSystemError;
    pthread_mutex_lock(&d->mu);
    d->started = true;
    d->running = true;
    pthread_mutex_unlock(&d->mu);
    if (pthread_create(&d->thread, NULL, driver_main, d) != 0) {
        pt_kernel_stop(d);
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
    if (d->is_master) pt_listener_arm(d, &d->listeners[0]);
    if (d->is_master && d->listeners[CCOIP_MASTER_LISTENER_RELAY].l != NULL)
        pt_listener_arm(d, &d->listeners[CCOIP_MASTER_LISTENER_RELAY]);
    return thread_start(d);
}

pcclResult_t pt_peer_create(const ccoip_peer_config *cfg, const char *bind_host, pt_driver **out)
{
    if (cfg == NULL || out == NULL || bind_host == NULL || strlen(bind_host) > 60) {
        return pcclInvalidArgument;
    }
    *out = NULL;
    ccoip_peer_config pc = *cfg;
    pcclResult_t r = pt_auth_load("peer", &pc.auth);
    if (r != pcclSuccess) return r;
    cfg = &pc;
    pt_driver *d = driver_alloc(false);
    if (d == NULL) return pcclSystemError;
    d->auth = pc.auth;
    d->pinfo.rank = -1; /* no ring before the first NOTIFY (PCCL_ATTRIBUTE_RANK) */
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
    if (d->p2p_tls && pt_tls_listen_allowed(d, "p2p listeners on tls+tcp://", true) != 0) {
        driver_free(d); /* its listeners would authenticate nobody (docs/security.md) */
        return pcclInvalidArgument;
    }
    const uint64_t seed = seed_random();
    r = ccoip_peer_create(cfg, seed, &d->p);
    if (r == pcclSuccess) pt_trace_open(d, seed, NULL, cfg);
    if (r == pcclSuccess && cfg->max_message_bytes > 0) {
        d->lim.pb.max_message_bytes = cfg->max_message_bytes;
    }
    d->sq_max_owned = sq_max_owned(d);
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
