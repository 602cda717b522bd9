/*
 * pt_probe.c — bandwidth probes (docs/protocol.md §8.4): the prober's dial,
 * request and timed PROBE_DATA (bounded by bytes and by a time window of
 * round trips), and the target the driver serves itself.
 * The core never hears of probe connections, only PROBE_DONE.
 */
#define _GNU_SOURCE
#include "ccoip_probe.h"
#include "pt_internal.h"

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
    pt_send_enqueue(d, c, it);
    return true;
}

void pt_probe_target_up(pt_driver *d, pt_conn *c)
{
    if (!ccoip_auth_on(&d->auth)) return;
    ccoip_data_header h;
    pt_auth_probe_challenge(d, c, &h);
    if (!send_header(d, c, &h, NULL, false)) pt_conn_free(d, c);
}

/* Sends the PROBE_REQUEST; challenge: the target's (authenticated runs), else NULL. */
static void probe_request(pt_driver *d, pt_conn *c, const ccoip_data_header *challenge)
{
    ccoip_data_header h;
    ccoip_data_header_init(&h, CCOIP_DATA_PROBE_REQUEST);
    h.tag = ccoip_peer_id(d->p);
    h.offset = c->probe_want;
    if (challenge != NULL) pt_auth_probe_sign(d, challenge, &h);
    c->probe_req_ns = pt_now_ns();
    if (!send_header(d, c, &h, NULL, false)) pt_probe_end(d, c);
}

/* Queues PROBE_DATA slices up to PT_PROBE_QUEUED in the send queue; once the announced total
 * is queued (its last slice ends the probe: the target closes when it has it all) or the
 * window has passed, the end of the probe: a PROBE_DATA of length 0, after which the target
 * closes. false: c was freed. */
static bool probe_fill(pt_driver *d, pt_conn *c)
{
    uint64_t slice = d->lim.max_data_payload_bytes;
    if (slice == 0 || slice > PT_SLICE_BYTES) slice = PT_SLICE_BYTES;
    while (!c->probe_sent_all && c->probe_queued < PT_PROBE_QUEUED) {
        ccoip_data_header p;
        ccoip_data_header_init(&p, CCOIP_DATA_PROBE_DATA);
        p.offset = c->probe_sent;
        const bool late = pt_now_ns() - c->probe_t0 >= c->probe_window_ns;
        const uint64_t left = c->probe_want - c->probe_sent;
        p.length = late ? 0 : left < slice ? left : slice;
        const bool last = late || p.length == left;
        if (!send_header(d, c, &p, p.length > 0 ? g_probe_zeros : NULL, last)) {
            pt_probe_end(d, c);
            return false;
        }
        c->probe_sent += p.length;
        c->probe_queued++;
        if (last) {
            /* Nothing more to queue: probe_sent_all is set when this frame is written. */
            c->probe_queued = PT_PROBE_QUEUED + 1u;
        }
    }
    return true;
}

void pt_probe_sent(pt_driver *d, pt_conn *c)
{
    if (c->probe_queued > PT_PROBE_QUEUED) return; /* the end is queued */
    if (c->probe_queued > 0) c->probe_queued--;
    (void)probe_fill(d, c);
}

void pt_probe_done_queue(pt_driver *d, uint64_t io_id, bool ok, uint64_t bytes, uint64_t us)
{
    ccoip_event ev;
    memset(&ev, 0, sizeof ev);
    ev.type = CCOIP_EV_PROBE_DONE;
    ev.done.io_id = io_id;
    ev.done.result = ok ? pcclSuccess : pcclRankConnectionFailed;
    ev.done.probe_bytes = ok ? bytes : 0;
    ev.done.duration_us = ok ? us : 0;
    pt_q_core(d, &ev);
}

/* A probe connection ended (closed by the remote, broke, or was refused). */
void pt_probe_end(pt_driver *d, pt_conn *c)
{
    if (c->probe == PROBE_PROBER) {
        const bool ok = c->probe_accepted && c->probe_sent_all && c->probe_sent > 0;
        uint64_t us = (pt_now_ns() - c->probe_t0) / 1000u;
        if (us == 0) us = 1;
        pt_log(ok ? CCOIP_LOG_DEBUG : CCOIP_LOG_INFO, d->who,
               "probe %" PRIu64 ": %s (%" PRIu64 " of %" PRIu64 " bytes, %" PRIu64
               " us, window %" PRIu64 " ms)",
               c->id, ok ? "done" : "failed", c->probe_sent, c->probe_want, us,
               c->probe_window_ns / 1000000u);
        pt_probe_done_queue(d, c->probe_io, ok, c->probe_sent, us);
    }
    pt_conn_free(d, c);
}

/* A probe frame arrived on c (header in c->dh). */
void pt_probe_frame(pt_driver *d, pt_conn *c)
{
    const ccoip_data_header *h = &c->dh;
    if (c->probe == PROBE_TARGET) {
        if (h->kind == CCOIP_DATA_PROBE_REQUEST && !c->probe_accepted) {
            if (ccoip_auth_on(&d->auth) && !pt_auth_probe_check(d, c, h)) {
                pt_log(CCOIP_LOG_WARN, d->who,
                       "probe connection %" PRIu64 ": PROBE_REQUEST without a valid proof: closing",
                       c->id);
                pt_conn_free(d, c);
                return;
            }
            c->probe_accepted = true;
            c->probe_want = h->offset;
            ccoip_data_header a;
            ccoip_data_header_init(&a, CCOIP_DATA_PROBE_ACCEPT);
            a.tag = h->tag;
            if (!send_header(d, c, &a, NULL, false) || c->probe_want == 0) {
                pt_conn_free(d, c);
                return;
            }
            pt_rd_start_header(c);
            pt_rd_next(c);
            return;
        }
        if (h->kind == CCOIP_DATA_PROBE_DATA && c->probe_accepted) {
            c->probe_got += h->length;
            c->rd = RD_DISCARD;
            c->rd_have = 0;
            c->rd_want = h->length;
            if (h->length == 0) {
                /* The prober's window ended before the announced total (§8.4): it has
                 * everything the prober sent, so closing tells the prober the time. */
                pt_conn_free(d, c);
                return;
            }
            pt_rd_next(c);
            return;
        }
    } else if (c->probe == PROBE_PROBER && !c->probe_accepted) {
        if (h->kind == CCOIP_DATA_CHALLENGE && ccoip_auth_on(&d->auth)) {
            const uint64_t id = c->id;
            probe_request(d, c, h);
            c = pt_conn_find(d, id);
            if (c == NULL) return;
            pt_rd_start_header(c);
            pt_rd_next(c);
            return;
        }
        if (h->kind == CCOIP_DATA_PROBE_ACCEPT) {
            c->probe_accepted = true;
            c->probe_t0 = pt_now_ns();
            /* The round trip: the request's, or half the time since the dial began (connect
             * and request: two round trips on plain TCP; the dial may report a connection
             * before its handshake is done, the request then waits for it), whichever is
             * lower: queues and a busy target only ever add to either. */
            const uint64_t req = c->probe_t0 - c->probe_req_ns;
            const uint64_t half = (c->probe_t0 - c->probe_dial_ns) / 2u;
            c->probe_window_ns = ccoip_probe_window_ns(req < half ? req : half);
            c->probe_sent = 0;
            c->probe_queued = 0;
            if (!probe_fill(d, c)) return;
            pt_rd_start_header(c);
            pt_rd_next(c); /* the target's close ends the measurement */
            return;
        }
        if (h->kind == CCOIP_DATA_PROBE_BUSY && c->probe_tries + 1u < PT_PROBE_TRIES) {
            char url[sizeof c->probe_url];
            memcpy(url, c->probe_url, sizeof url);
            const uint64_t id = c->id, io = c->probe_io, want = c->probe_want;
            const uint32_t tries = c->probe_tries + 1u;
            pt_conn_free(d, c);
            pt_probe_dial(d, id, io, url, want, tries);
            return;
        }
    }
    pt_log(CCOIP_LOG_INFO, d->who, "probe connection %" PRIu64 ": unexpected frame kind %d", c->id,
           (int)h->kind);
    pt_probe_end(d, c);
}

void pt_probe_dial(pt_driver *d, uint64_t conn, uint64_t io_id, const char *url, uint64_t want,
                   uint32_t tries)
{
    pt_conn *c = pt_conn_new(d, conn, true);
    if (c == NULL) {
        pt_probe_done_queue(d, io_id, false, 0, 0);
        return;
    }
    c->probe = PROBE_PROBER;
    c->probe_io = io_id;
    c->probe_want = want;
    c->probe_tries = tries;
    snprintf(c->probe_url, sizeof c->probe_url, "%s", url);
    c->probe_dial_ns = pt_now_ns();
    const int rv = pt_dial_prepare(d, c, url);
    if (rv != 0) {
        pt_log(CCOIP_LOG_WARN, d->who, "probe %s: %s", url, nng_strerror(rv));
        pt_probe_end(d, c);
        return;
    }
    c->dial_ns = pt_now_ns();
    nng_aio_set_timeout(c->dial_aio, PT_DIAL_TIMEOUT_MS);
    nng_stream_dialer_dial(c->dialer, c->dial_aio);
}

void pt_probe_dialed(pt_driver *d, pt_conn *c, int rv, nng_stream *s)
{
    if (rv != 0 || s == NULL) {
        pt_log(CCOIP_LOG_INFO, d->who, "probe %s: connect failed: %s", c->probe_url,
               nng_strerror(rv));
        pt_probe_end(d, c);
        return;
    }
    pt_conn_up(d, c, s);
    /* Authenticated: the request answers the target's CHALLENGE (pt_probe_frame). */
    if (!ccoip_auth_on(&d->auth)) probe_request(d, c, NULL);
}
