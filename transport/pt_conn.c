/*
 * pt_conn.c — connections: the table, framing (control and data headers),
 * sending and receiving, matching data frames to posted receives, held
 * frames, and the listeners.
 */
#define _GNU_SOURCE
#include <sys/epoll.h>

#include "pt_internal.h"

pt_conn *pt_conn_new(pt_driver *d, uint64_t id, bool data)
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
    if (pt_nng_stream_init(&c->ns, id, pt_dp_done, d) != 0) {
        free(c);
        return NULL;
    }
    c->dp = &pt_nng_ops;
    c->dp_t = &c->ns;
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
        pt_q_core(d, &ev);
    }
}

/* Frees c: stops its data plane and aios (their callbacks have run when this returns). */
void pt_conn_free(pt_driver *d, pt_conn *c)
{
    if (c->dp != &pt_nng_ops) { /* a transport took the stream over */
        if (c->ep_added) (void)epoll_ctl(d->epfd, EPOLL_CTL_DEL, c->dp->fd(c->dp_t), NULL);
        d->n_links--;
        c->dp->close(c->dp_t); /* when it returns, no buffer is touched any more */
        c->dp = &pt_nng_ops;
        c->dp_t = &c->ns;
    }
    pt_nng_stream_fini(&c->ns);
    if (c->accepted && c->listener < PT_MAX_LISTENERS) {
        pt_listener *l = &d->listeners[c->listener];
        l->n_acc--;
        d->acc_total--;
        c->accepted = false;
        pt_listener_arm(d, l); /* a paused listener accepts again */
    }
    if (c->dial_aio != NULL) {
        /* A dial that completed queued its stream in a DIALED event: that
         * event owns it (on_dialed closes it when the conn is gone). */
        nng_aio_stop(c->dial_aio);
        nng_aio_free(c->dial_aio);
    }
    if (c->dialer != NULL) nng_stream_dialer_free(c->dialer);
    pt_splice_detach(c); /* before the stream goes: the pipe reads and writes it */
    if (c->confirm != NULL) {
        nng_stream_close(c->confirm);
        nng_stream_free(c->confirm);
        c->confirm = NULL;
    }
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
void pt_conn_close(pt_driver *d, pt_conn *c, bool tell_core)
{
    if (c->probe != PROBE_NONE) {
        pt_probe_end(d, c); /* the core never hears of probe connections */
        return;
    }
    const uint64_t id = c->id;
    ios_fail_on_conn(d, id);
    pt_conn_free(d, c);
    if (tell_core) {
        ccoip_event ev;
        memset(&ev, 0, sizeof ev);
        ev.type = CCOIP_EV_CONN_CLOSED;
        ev.conn = id;
        pt_q_core(d, &ev);
    }
}

/* ---- deadlines, take-over ---- */

/* Bytes moved on a connection with an idle deadline: it moves later (never past life_ns). */
static void conn_refresh(pt_conn *c)
{
    uint64_t dl = pt_now_ns() + (uint64_t)c->idle_ms * 1000000u;
    if (c->life_ns != 0 && dl > c->life_ns) dl = c->life_ns;
    c->dl_ns = dl;
    pt_tdl_note(c->d, dl);
}

/* A complete frame arrived on c: it has proven itself (the first-frame deadline is off). */
static void frame_done(pt_conn *c)
{
    c->frames_rx++;
    if (c->proven) return;
    c->proven = true;
    c->dl_ns = 0;
    if (c->idle_ms > 0 && c->proven) conn_refresh(c);
}

/* The POSIX TCP take-over (threads, the /proc scan) of a connection: a dialled one at once, an
 * accepted one only after it proved itself (its first complete frame, which the core did not
 * answer by closing it) and with no nng I/O under way (reads are held meanwhile). Which
 * transport (transport/README.md, "Adding a transport"): the POSIX TCP link for plain tcp://
 * (pt_tcp_open declines TLS and ipc), never for probes, on the master for at most
 * PT_MASTER_MAX_LINKS connections. */
static void takeover_maybe(pt_driver *d, pt_conn *c)
{
    if (!c->takeover_pending || !c->proven || c->send_busy || c->recv_busy || c->relay) return;
    c->takeover_pending = false;
    if (d->is_master && d->n_links >= PT_MASTER_MAX_LINKS) return;
    void *t = pt_tcp_open(c->ns.s, c->id, pt_dp_done, d, d->epfd >= 0); /* NULL: stays on nng */
    if (t != NULL) {
        c->dp = &pt_tcp_ops;
        c->dp_t = t;
        d->n_links++;
    }
    pt_log(CCOIP_LOG_DEBUG, d->who, "connection %" PRIu64 ": %s data plane", c->id, c->dp->name);
}

void pt_sweep(pt_driver *d)
{
    const uint64_t now = pt_now_ns();
    d->tdl = UINT64_MAX;
    for (uint32_t k = 0; k < PT_MAX_LISTENERS; k++) {
        pt_listener *l = &d->listeners[k];
        if (l->rearm_at == 0) continue;
        if (now >= l->rearm_at) {
            l->rearm_at = 0;
            pt_listener_arm(d, l);
        } else {
            pt_tdl_note(d, l->rearm_at);
        }
    }
    for (uint32_t i = 0; i < d->nconns; i++) {
        pt_conn *c = d->conns[i];
        if (c->confirm == NULL) continue;
        nng_stream *s = c->confirm;
        if (pt_stream_connected(s)) {
            c->confirm = NULL;
            pt_dialed(d, c, 0, s);
        } else if (now - c->dial_ns >= (uint64_t)PT_DIAL_TIMEOUT_MS * 1000000u) {
            c->confirm = NULL;
            nng_stream_close(s);
            nng_stream_free(s);
            pt_dialed(d, c, NNG_ETIMEDOUT, NULL);
        } else {
            pt_tdl_note(d, now + (uint64_t)PT_CONFIRM_POLL_MS * 1000000u);
            continue;
        }
        i = (uint32_t)-1; /* the core may have changed the table: rescan */
    }
    uint32_t first = 0, idle = 0;
    for (uint32_t i = 0; i < d->nconns; i++) {
        pt_conn *c = d->conns[i];
        if (c->dl_ns == 0) continue;
        if (now < c->dl_ns) {
            pt_tdl_note(d, c->dl_ns);
            continue;
        }
        if (c->proven) {
            idle++;
        } else {
            first++;
        }
        c->dl_ns = 0;
        pt_conn_close(d, c, true); /* probe targets: freed, the core never heard of them */
        i = (uint32_t)-1;          /* table changed: rescan */
    }
    if (first + idle > 0 && now >= d->sweep_log_at) {
        d->sweep_log_at = now + (uint64_t)PT_ACCEPT_LOG_MS * 1000000u;
        pt_log(CCOIP_LOG_WARN, d->who,
               "closed %u accepted connection(s) with no complete frame within %u ms and %u idle "
               "past their deadline (slow or silent remotes)",
               first, PT_FIRST_FRAME_MS, idle);
    }
}

/* ---- sending ---- */

static void send_kick(pt_driver *d, pt_conn *c);

void pt_send_enqueue(pt_driver *d, pt_conn *c, pt_sitem *it)
{
    const uint64_t owned = it->bytes != NULL ? it->len : 0;
    const uint32_t max_items = c->data ? PT_SQ_MAX_ITEMS_DATA : PT_SQ_MAX_ITEMS_CTRL;
    if (c->sq_overflow || c->sq_items >= max_items || c->sq_owned + owned > d->sq_max_owned) {
        if (!c->sq_overflow) {
            /* The remote does not read (or not fast enough): the queue would grow without bound. */
            pt_log(CCOIP_LOG_WARN, d->who,
                   "connection %" PRIu64 ": send queue over its bound (%u frames, %" PRIu64
                   " bytes queued; at most %u, %" PRIu64 "): the remote does not read, closing it",
                   c->id, c->sq_items, c->sq_owned, max_items, d->sq_max_owned);
            c->sq_overflow = true;
            pt_q_close(d, c->id);
        }
        free(it->bytes);
        free(it);
        return;
    }
    c->sq_items++;
    c->sq_owned += owned;
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
    if (c->send_busy || !c->up || c->sq_head == NULL) return;
    takeover_maybe(d, c);
    const pt_sitem *it = c->sq_head;
    const uint8_t *a, *b = NULL;
    uint64_t na, nb = 0;
    if (it->done < it->len) {
        a = (it->ring ? it->hdr : it->bytes) + it->done;
        na = it->len - it->done;
        if (it->payload_len > 0) {
            b = it->payload;
            nb = it->payload_len;
        }
    } else {
        const uint64_t off = it->done - it->len;
        a = it->payload + off;
        na = it->payload_len - off;
    }
    c->send_busy = true;
    c->dp->send(c->dp_t, a, na, b, nb);
}

void pt_on_sent(pt_driver *d, pt_conn *c, int rv, uint64_t count)
{
    c->send_busy = false;
    if (rv != 0 || c->sq_head == NULL) {
        pt_log(rv == NNG_ECLOSED ? CCOIP_LOG_DEBUG : CCOIP_LOG_INFO, d->who,
               "connection %" PRIu64 ": send failed: %s", c->id, nng_strerror(rv));
        pt_conn_close(d, c, true);
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
    pt_sq_forget(c, it);
    if (c->idle_ms > 0 && c->proven) conn_refresh(c);
    if (it->probe_last) c->probe_sent_all = true;
    /* After PROBE_ACCEPT a prober writes only PROBE_DATA: each one written paces the next. */
    const bool probe_data = c->probe == PROBE_PROBER && c->probe_accepted;
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
                pt_q_core(d, &ev);
                break;
            }
        }
    }
    free(it->bytes);
    free(it);
    send_kick(d, c);
    if (c->rd_held) { /* reads were held for a take-over that waited for this send */
        c->rd_held = false;
        pt_rd_next(c);
    }
    if (probe_data) pt_probe_sent(d, c); /* last: it may free c */
}

/* ---- receiving ---- */

static void recv_issue(pt_conn *c, uint8_t *dst, uint64_t want, const pt_dp_fuse *fuse)
{
    c->recv_busy = true;
    if (c->dp->recv(c->dp_t, dst, want, fuse)) pt_park_arm(c->d, c);
}

void pt_rd_next(pt_conn *c)
{
    if (c->recv_busy || !c->up) return;
    if (c->relay && c->frames_rx > 0) return; /* the join read: the rest is the splice's */
    if (c->takeover_pending && c->proven) {
        if (c->send_busy) {
            c->rd_held = true; /* the take-over waits for nng's send to finish */
            return;
        }
        takeover_maybe(c->d, c);
    }
    switch (c->rd) {
    case RD_HDR:
        recv_issue(c, c->hdr + c->rd_have, c->hdr_want - c->rd_have, NULL);
        break;
    case RD_PAYLOAD:
        if (c->data && c->rd_ctrl) {
            recv_issue(c, c->buf + CCOIP_DATA_HEADER_BYTES + c->rd_have, c->rd_want - c->rd_have,
                       NULL);
        } else if (c->data && c->rd_fused && c->rd_have == 0) {
            /* The data plane reads it whole, reducing it as it arrives. */
            recv_issue(c, NULL, c->rd_want, &c->rd_fuse);
        } else if (c->data) {
            recv_issue(c, c->rd_dst + c->rd_have, c->rd_want - c->rd_have, NULL);
        } else {
            recv_issue(c, c->buf + CCOIP_CTRL_HEADER_BYTES + c->rd_have, c->rd_want - c->rd_have,
                       NULL);
        }
        break;
    case RD_DISCARD: {
        uint64_t n = c->rd_want - c->rd_have;
        if (n > PT_DISCARD_BYTES) n = PT_DISCARD_BYTES;
        recv_issue(c, c->discard, n, NULL);
        break;
    }
    case RD_HELD:
        break;
    }
}

void pt_rd_start_header(pt_conn *c)
{
    c->rd = RD_HDR;
    c->rd_have = 0;
    c->rd_ctrl = false;
    c->rd_fused = false;
    c->hdr_want = c->data ? CCOIP_DATA_HEADER_BYTES : CCOIP_CTRL_HEADER_BYTES;
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

/* A RING_RECV that announces its REDUCE (ccoip_sm.h v5) over a data plane that
 * fuses (pt_dp.h), whose one frame covers the whole span: the data plane reduces
 * the payload into the REDUCE's destination as it arrives; SCRATCH is never written. */
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
    uint8_t *target = pt_span_ptr(d, &a->src);
    if (target == NULL) return;
    const uint8_t *base = NULL;
    if (a->base.length > 0) {
        if (a->base.length != h->length || a->base.op_slot != a->op_slot) return;
        base = pt_span_ptr(d, &a->base);
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
bool pt_ring_dispatch(pt_driver *d, pt_conn *c)
{
    const ccoip_data_header *h = &c->dh;
    if (h->epoch < c->max_recv_epoch || key_cancelled(d, h)) {
        c->rd = RD_DISCARD; /* an older epoch's or a cancelled op's frame (§8.2) */
        c->rd_have = 0;
        c->rd_want = h->length;
        if (h->length == 0) pt_rd_start_header(c);
        pt_rd_next(c);
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
        pt_io_done_queue(d, bad, pcclProtocolError);
        pt_conn_close(d, c, true);
        return false;
    }
    if (exact == NULL) {
        c->rd = RD_HELD; /* held until its RING_RECV is posted or its op cancelled */
        return true;
    }
    uint8_t *dst = pt_span_ptr(d, &exact->act.dst);
    assert(dst != NULL);
    if (exact->frames == 0) exact->quant = h->quant;
    exact->frames++;
    c->rd_io = exact->io_id;
    c->rd = RD_PAYLOAD;
    c->rd_have = 0;
    c->rd_want = h->length;
    c->rd_dst = dst + h->offset;
    c->rd_fused = false;
    if (c->dp->fuses && exact->frames == 1) fuse_try(d, c, exact);
    if (h->length == 0) {
        if (exact->got >= exact->act.dst.length) pt_io_done_queue(d, exact, pcclSuccess);
        pt_rd_start_header(c);
    }
    pt_rd_next(c);
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
        if (io->got >= io->act.dst.length) pt_io_done_queue(d, io, pcclSuccess);
        pt_rd_start_header(c);
    }
    pt_rd_next(c);
}

/* Some STATE_RECV is posted on c (a fetch the core runs on it). */
static bool state_recv_posted(const pt_driver *d, const pt_conn *c)
{
    for (uint32_t i = 0; i < d->ios_hi; i++) {
        const pt_io *io = &d->ios[i];
        if (io->used && !io->done_queued && io->kind == IO_RECV && io->conn == c->id &&
            io->act.type == CCOIP_ACT_STATE_RECV) {
            return true;
        }
    }
    return false;
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
        if (h->length == 0) pt_rd_start_header(c);
        pt_rd_next(c);
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
        pt_io_done_queue(d, exact, pcclProtocolError);
        pt_conn_close(d, c, true);
        return false;
    }
    uint8_t *dst = pt_span_ptr(d, &exact->act.dst);
    assert(dst != NULL);
    payload_into(d, c, exact, dst);
    return true;
}

bool pt_held_dispatch(pt_driver *d, pt_conn *c)
{
    return c->dh.kind == CCOIP_DATA_STATE_DATA ? state_dispatch(d, c) : pt_ring_dispatch(d, c);
}

/* Re-examines held frames (after a RING_RECV, a STATE_RECV or a CANCEL). */
void pt_held_retry(pt_driver *d)
{
    for (uint32_t i = 0; i < d->nconns; i++) {
        pt_conn *c = d->conns[i];
        if (c->rd == RD_HELD) {
            if (!pt_held_dispatch(d, c)) i = (uint32_t)-1; /* table changed: rescan */
        }
    }
}

/* A data frame header is in c->dh (not HELLO/HELLO_ACK): route it by kind. */
static void data_frame(pt_driver *d, pt_conn *c)
{
    const ccoip_data_header *h = &c->dh;
    if (c->probe != PROBE_NONE) {
        pt_probe_frame(d, c);
        return;
    }
    /* An accepted connection receives ring chunks only on the p2p port and STATE_DATA never (a
     * shared-state server sends it, docs/protocol.md §2, §8.3). Held for a receive that never
     * comes, such a frame would leave its connection unread, a closed remote unnoticed, until a
     * deadline (30 s on the shared-state port; found by fuzz_transport). */
    switch (h->kind) {
    case CCOIP_DATA_RING_CHUNK:
        if (c->accepted && c->listener != CCOIP_LISTENER_P2P) break;
        pt_ring_dispatch(d, c);
        return;
    case CCOIP_DATA_STATE_DATA:
        /* On an accepted connection only for a fetch the core made of it (a distributor that
         * dialled us to offer, §8.3): its STATE_RECVs are posted before the request goes. */
        if (c->accepted && !state_recv_posted(d, c)) break;
        state_dispatch(d, c);
        return;
    case CCOIP_DATA_HELLO: /* with its proof (authenticated runs): header + proof to the core */
    case CCOIP_DATA_STATE_OFFER:
    case CCOIP_DATA_RELAY_JOIN:
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
            pt_rd_start_header(c);
            pt_core_feed(d, &ev);
            c = pt_conn_find(d, id);
            if (c == NULL) return;
        }
        pt_rd_next(c);
        return;
    }
    default:
        break;
    }
    pt_log(CCOIP_LOG_WARN, d->who,
           "connection %" PRIu64 ": unexpected data frame (kind %d, %" PRIu64 " bytes): closing it",
           c->id, (int)h->kind, h->length);
    pt_conn_close(d, c, true);
}

void pt_on_received(pt_driver *d, pt_conn *c, int rv, uint64_t count)
{
    c->recv_busy = false;
    if (rv != 0 || count == 0) {
        pt_log(rv == NNG_ECLOSED || rv == NNG_ECONNSHUT ? CCOIP_LOG_DEBUG : CCOIP_LOG_INFO, d->who,
               "connection %" PRIu64 " closed: %s", c->id,
               rv != 0 ? nng_strerror(rv) : "end of stream");
        pt_conn_close(d, c, true);
        return;
    }
    c->rd_have += count;
    if (c->idle_ms > 0 && c->proven) conn_refresh(c);
    switch (c->rd) {
    case RD_HDR: {
        if (c->rd_have < c->hdr_want) break;
        if (!c->data) {
            ccoip_ctrl_header h;
            const pcclResult_t r = ccoip_ctrl_header_decode(c->hdr, c->hdr_want, &d->lim, &h);
            if (r != pcclSuccess && r != pcclInvalidUsage) {
                pt_log(CCOIP_LOG_WARN, d->who,
                       "connection %" PRIu64 ": malformed control frame header: closing it", c->id);
                pt_conn_close(d, c, true);
                return;
            }
            if ((uint64_t)h.payload_bytes > d->lim.pb.max_message_bytes) {
                pt_log(CCOIP_LOG_WARN, d->who,
                       "connection %" PRIu64 ": oversized control frame (%u bytes): closing it",
                       c->id, h.payload_bytes);
                pt_conn_close(d, c, true);
                return;
            }
            const uint64_t total = CCOIP_CTRL_HEADER_BYTES + (uint64_t)h.payload_bytes;
            if (total > c->buf_cap) {
                uint8_t *nb = realloc(c->buf, (size_t)total);
                if (nb == NULL) {
                    pt_conn_close(d, c, true);
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
                pt_conn_close(d, c, true);
                return;
            }
            /* Header-only link frames go to the core as they are; an authenticated HELLO
             * (its proof behind the header) takes the payload path of data_frame. */
            if (c->probe == PROBE_NONE && c->dh.length == 0 &&
                (c->dh.kind == CCOIP_DATA_HELLO || c->dh.kind == CCOIP_DATA_HELLO_ACK ||
                 c->dh.kind == CCOIP_DATA_CHALLENGE || c->dh.kind == CCOIP_DATA_STATE_OFFER ||
                 c->dh.kind == CCOIP_DATA_RELAY_JOIN)) {
                frame_done(c);
                pt_rd_start_header(c);
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
                pt_core_feed(d, &ev);
                c = pt_conn_find(d, id);
                if (c != NULL) pt_rd_next(c);
                return;
            }
            if (c->dh.length == 0) frame_done(c);
            data_frame(d, c);
            return;
        }
    }
        /* fallthrough */
    case RD_PAYLOAD:
        if (c->rd_have < c->rd_want) break;
        frame_done(c);
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
            pt_rd_start_header(c);
            pt_core_feed(d, &ev);
            c = pt_conn_find(d, id);
            if (c == NULL) return;
        } else {
            pt_io *io = pt_io_find(d, c->rd_io);
            if (io != NULL && !io->done_queued && io->fused && c->rd_fused &&
                io->slot < PT_MAX_SLOTS) {
                /* The announced REDUCE is done: remember it (act_kernel completes it). */
                pt_slot *o = &d->slots[io->slot];
                if (o->nfused < CCOIP_P2P_POOL_MAX) {
                    o->fused[o->nfused] = io->act;
                    o->fused_result[o->nfused] = c->dp->fuse_result(c->dp_t);
                    o->nfused++;
                }
            }
            if (io != NULL && !io->done_queued) {
                io->got += c->rd_want;
                if (io->got >= io->act.dst.length) pt_io_done_queue(d, io, pcclSuccess);
            }
            pt_rd_start_header(c);
        }
        break;
    case RD_DISCARD:
        if (c->rd_have >= c->rd_want) {
            frame_done(c);
            if (c->probe == PROBE_TARGET && c->probe_got >= c->probe_want) {
                pt_conn_free(d, c); /* drained: closing tells the prober the time */
                return;
            }
            pt_rd_start_header(c);
        }
        break;
    case RD_HELD:
        break;
    }
    pt_rd_next(c);
}

void pt_conn_up(pt_driver *d, pt_conn *c, nng_stream *s)
{
    c->ns.s = s;
    c->up = true;
    nng_stream_set_bool(s, NNG_OPT_TCP_NODELAY, true);
    if (c->probe == PROBE_NONE && pt_tcp_enabled()) {
        c->takeover_pending = true;
        if (!c->accepted) c->proven = true; /* dialled by us: taken over at once */
        takeover_maybe(d, c);
    }
    if (c->accepted && !c->proven) {
        c->dl_ns = pt_now_ns() + (uint64_t)PT_FIRST_FRAME_MS * 1000000u;
        pt_tdl_note(d, c->dl_ns);
    }
    pt_rd_start_header(c);
    pt_rd_next(c);
    send_kick(d, c);
}

/* Arms the one-shot epoll registration of c's descriptor: its receive parked (pt_dp.h). */
void pt_park_arm(pt_driver *d, pt_conn *c)
{
    if (d->epfd < 0) return;
    struct epoll_event e;
    memset(&e, 0, sizeof e);
    e.events = EPOLLIN | EPOLLONESHOT;
    e.data.u64 = c->id;
    const int fd = c->dp->fd(c->dp_t);
    if (epoll_ctl(d->epfd, c->ep_added ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, fd, &e) == 0) {
        c->ep_added = true;
    }
}

void pt_listener_arm(pt_driver *d, pt_listener *l)
{
    if (l->l == NULL || l->armed || l->rearm_at != 0) return;
    if (l->n_acc >= l->cap || d->acc_total >= d->acc_cap) {
        if (!l->paused) {
            pt_log(CCOIP_LOG_WARN, d->who,
                   "listener %u: %u connections (cap %u; all listeners %u, cap %u): not "
                   "accepting until one closes",
                   l->kind, l->n_acc, l->cap, d->acc_total, d->acc_cap);
        }
        l->paused = true;
        return;
    }
    l->paused = false;
    l->armed = true;
    nng_stream_listener_accept(l->l, l->aio);
}

void pt_listener_failed(pt_driver *d, pt_listener *l, int rv)
{
    const uint64_t now = pt_now_ns();
    if (l->streak < 16u) l->streak++;
    uint64_t ms = (uint64_t)PT_ACCEPT_BACKOFF_MIN_MS << (l->streak - 1u);
    if (ms > PT_ACCEPT_BACKOFF_MAX_MS) ms = PT_ACCEPT_BACKOFF_MAX_MS;
    l->rearm_at = now + ms * 1000000u;
    pt_tdl_note(d, l->rearm_at);
    if (now >= l->log_at) {
        pt_log(CCOIP_LOG_WARN, d->who,
               "listener %u: accept failed: %s (%" PRIu64
               " more since the last such line); accepting again in %" PRIu64 " ms",
               l->kind, nng_strerror(rv), l->log_quiet, ms);
        l->log_at = now + (uint64_t)PT_ACCEPT_LOG_MS * 1000000u;
        l->log_quiet = 0;
    } else {
        l->log_quiet++;
    }
}

pcclResult_t pt_listen_on(pt_driver *d, uint32_t kind, const char *url, uint32_t *port_out)
{
    if (kind >= PT_MAX_LISTENERS) return pcclInvalidArgument;
    pt_listener *l = &d->listeners[kind];
    if (l->l != NULL) return pcclInvalidUsage;
    l->d = d;
    l->kind = kind;
    l->cap = d->is_master && kind == CCOIP_MASTER_LISTENER_RELAY ? PT_RELAY_ACCEPT_CAP
             : d->is_master                                      ? PT_MAX_CONNS
             : kind == CCOIP_LISTENER_P2P                        ? PT_ACCEPT_CAP_P2P
             : kind == CCOIP_LISTENER_SHARED_STATE               ? PT_ACCEPT_CAP_STATE
                                                                 : PT_ACCEPT_CAP_PROBE;
    int rv = nng_stream_listener_alloc(&l->l, url);
    nng_tls_config *tls = NULL;
    if (rv == 0) rv = pt_tls_config_for(d, url, true, &tls);
    if (rv == 0 && tls != NULL) {
        rv = nng_stream_listener_set_ptr(l->l, NNG_OPT_TLS_CONFIG, tls);
        nng_tls_config_free(tls); /* the listener holds its own reference */
    }
    if (rv == 0) rv = nng_stream_listener_listen(l->l);
    if (rv == 0) rv = nng_aio_alloc(&l->aio, pt_cb_accept, l);
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
