/*
 * pt_actions.c — the action handlers (docs/core.md): pt_act_run executes one
 * action the core drained; op slots, spans and the pending I/O table. Handlers
 * never step the core: what they cause is queued as an event.
 */
#define _GNU_SOURCE
#include "pt_internal.h"

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
void pt_io_free(pt_driver *d, pt_io *io)
{
    io->used = false;
    while (d->ios_hi > 0 && !d->ios[d->ios_hi - 1].used)
        d->ios_hi--;
}

pt_io *pt_io_find(pt_driver *d, uint64_t io_id)
{
    for (uint32_t i = 0; i < d->ios_hi; i++) {
        if (d->ios[i].used && d->ios[i].io_id == io_id) return &d->ios[i];
    }
    return NULL;
}

/* A span's memory through the core's executor (ccoip_exec_span): NULL when it does not map. */
uint8_t *pt_span_ptr(pt_driver *d, const ccoip_span_ref *s)
{
    return ccoip_exec_span(&d->exec, s, NULL);
}

void pt_io_done_queue(pt_driver *d, pt_io *io, pcclResult_t r)
{
    io->done_queued = true;
    ccoip_event ev;
    memset(&ev, 0, sizeof ev);
    ev.type = CCOIP_EV_IO_DONE;
    ev.done.io_id = io->io_id;
    ev.done.result = r;
    ev.done.quant = io->quant;
    pt_q_core(d, &ev);
}

static void slot_key(pt_driver *d, const ccoip_action *a)
{
    ccoip_exec_key(&d->exec, a);
}

static void act_connect(pt_driver *d, const ccoip_action *a)
{
    const bool data = !d->is_master && a->conn != CCOIP_PEER_MASTER_CONN;
    pt_conn *c = pt_conn_new(d, a->conn, data);
    char url[300];
    ccoip_event ev;
    memset(&ev, 0, sizeof ev);
    ev.type = CCOIP_EV_CONN_CLOSED;
    ev.conn = a->conn;
    if (c == NULL || pt_url_for(a, data && d->p2p_tls, url, sizeof url) != 0) {
        if (c != NULL) pt_conn_free(d, c);
        pt_q_core(d, &ev);
        return;
    }
    const int rv = pt_dial_prepare(d, c, url);
    if (rv != 0) {
        pt_log(CCOIP_LOG_WARN, d->who, "connect to %s: %s", url, nng_strerror(rv));
        pt_conn_free(d, c);
        pt_q_core(d, &ev);
        return;
    }
    pt_log(CCOIP_LOG_DEBUG, d->who, "connection %" PRIu64 ": dialing %s", a->conn, url);
    c->dial_ns = pt_now_ns();
    nng_aio_set_timeout(c->dial_aio, PT_DIAL_TIMEOUT_MS);
    nng_stream_dialer_dial(c->dialer, c->dial_aio);
}

static void act_listen(pt_driver *d, const ccoip_action *a)
{
    char url[128];
    const char *scheme = d->p2p_tls ? "tls+tcp" : "tcp";
    snprintf(url, sizeof url, "%s://%s:0", scheme, d->bind_host);
    uint32_t port = 0;
    if (pt_listen_on(d, (uint32_t)a->listener, url, &port) == pcclSuccess) {
        pt_listener_arm(d, &d->listeners[a->listener]);
    }
    pt_trace_set_port(d, (uint32_t)a->listener, port);
    char adv[128];
    snprintf(adv, sizeof adv, "%s://%s:%u", scheme, d->bind_host, (unsigned)port);
    ccoip_peer_set_port(d->p, a->listener, port, d->advertise_url && port > 0 ? adv : NULL);
}

static void act_send(pt_driver *d, const ccoip_action *a)
{
    pt_conn *c = pt_conn_find(d, a->conn);
    if (c == NULL) return; /* closed meanwhile: the core hears CONN_CLOSED */
    /* v9: a frame that goes on with a span's bytes (a relayed all-reduce's input, at most
     * 64 KiB): copied now, so the frame stays whole whatever happens to the op. */
    const uint8_t *tail = NULL;
    if (a->src.length > 0) {
        tail = pt_span_ptr(d, &a->src);
        if (tail == NULL) {
            pt_log(CCOIP_LOG_ERROR, d->who, "SEND: bad span; closing connection %" PRIu64, c->id);
            pt_conn_close(d, c, true);
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
    pt_send_enqueue(d, c, it);
}

/* v9: the master's relayed result into the op's span, now. */
static void act_write(pt_driver *d, const ccoip_action *a)
{
    const char *why = "";
    if (ccoip_exec_write(&d->exec, a, &why) != pcclSuccess) {
        pt_log(CCOIP_LOG_ERROR, d->who, "WRITE (%" PRIu64 " bytes): %s", a->len, why);
        return;
    }
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
    pt_conn *c = pt_conn_find(d, a->conn);
    const uint8_t *src = pt_span_ptr(d, &a->src);
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
        if (io != NULL) pt_io_done_queue(d, io, pcclRankConnectionLost);
        return;
    }
    it->ring = true;
    it->last = true;
    it->len = CCOIP_DATA_HEADER_BYTES;
    it->payload = src;
    it->payload_len = a->src.length;
    it->io_id = a->io_id;
    it->slot = a->op_slot;
    pt_send_enqueue(d, c, it);
}

static void act_ring_recv(pt_driver *d, const ccoip_action *a)
{
    pt_io *io = io_add(d, a, IO_RECV);
    if (io == NULL) return;
    slot_key(d, a);
    pt_conn *c = pt_conn_find(d, a->conn);
    if (c == NULL || pt_span_ptr(d, &a->dst) == NULL) {
        pt_io_done_queue(d, io, pcclRankConnectionLost);
        return;
    }
    if (a->epoch > c->max_recv_epoch) c->max_recv_epoch = a->epoch;
    if (c->rd == RD_HELD) pt_ring_dispatch(d, c);
}

/* STATE_SEND: the span as STATE_DATA frames of at most one slice each,
 * zero-copy from the tensor; IO_DONE when the last one is written. */
static void act_state_send(pt_driver *d, const ccoip_action *a)
{
    pt_io *io = io_add(d, a, IO_SEND);
    if (io == NULL) return;
    pt_conn *c = pt_conn_find(d, a->conn);
    const uint8_t *src = pt_span_ptr(d, &a->src);
    if (c == NULL || src == NULL) {
        if (src == NULL)
            pt_log(CCOIP_LOG_ERROR, d->who, "STATE_SEND io %" PRIu64 ": bad span", a->io_id);
        pt_io_done_queue(d, io, pcclRankConnectionLost);
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
            pt_conn_close(d, c, true); /* frames already queued would leave the stream torn */
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
        pt_send_enqueue(d, c, it);
    } while (off < len);
}

static void act_state_recv(pt_driver *d, const ccoip_action *a)
{
    pt_io *io = io_add(d, a, IO_RECV);
    if (io == NULL) return;
    slot_key(d, a);
    pt_conn *c = pt_conn_find(d, a->conn);
    if (c == NULL || pt_span_ptr(d, &a->dst) == NULL) {
        pt_io_done_queue(d, io, pcclRankConnectionLost);
        return;
    }
    if (c->rd == RD_HELD) pt_held_dispatch(d, c);
}

static void act_probe(pt_driver *d, const ccoip_action *a)
{
    char url[300];
    if (pt_url_for(a, d->p2p_tls, url, sizeof url) != 0) {
        pt_probe_done_queue(d, a->io_id, false, 0, 0);
        return;
    }
    pt_log(CCOIP_LOG_DEBUG, d->who, "probing peer %" PRIu64 " at %s (%" PRIu64 " bytes)", a->tag,
           url, a->count);
    pt_probe_dial(d, a->conn, a->io_id, url, a->count, 0);
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
    const ccoip_action *a = &j->k.act;
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
    const char *why = "out of memory";
    if (j == NULL || ccoip_kernel_prepare(&d->exec, a, &j->k, &why) != pcclSuccess) {
        pt_log(CCOIP_LOG_ERROR, d->who, "kernel io %" PRIu64 ": %s", a->io_id, why);
        free(j);
        io->done_queued = true;
        ccoip_event ev;
        memset(&ev, 0, sizeof ev);
        ev.type = CCOIP_EV_KERNEL_DONE;
        ev.done.io_id = a->io_id;
        ev.done.result = pcclInternalError;
        pt_q_core(d, &ev);
        return;
    }
    j->io_id = a->io_id;
    j->slot = a->op_slot;
    if (a->type == CCOIP_ACT_REDUCE && a->op_slot < PT_MAX_SLOTS) fuse_match(d, j);
    pt_kernel_submit(d, j);
}

static void act_cancel(pt_driver *d, const ccoip_action *a)
{
    const uint32_t slot = a->op_slot;
    const ccoip_exec_slot *xs = ccoip_exec_slot_at(&d->exec, slot);
    if (xs != NULL && xs->keyed) {
        uint64_t *k = d->cancelled[d->cancelled_next++ % PT_CANCELLED_KEYS];
        k[0] = xs->epoch;
        k[1] = xs->tag;
        k[2] = xs->seq;
    }
    pt_kernels_cancel(d, slot);
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
                pt_sq_forget(c, it);
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
            const pt_io *io = pt_io_find(d, c->rd_io);
            if (io != NULL && io->slot == slot) brk = true;
        }
        if (brk) {
            pt_log(CCOIP_LOG_INFO, d->who,
                   "connection %" PRIu64 ": op cancelled mid-frame: closing the connection", c->id);
            /* Remove the slot's I/O first so that no completion is reported for it. */
            for (uint32_t i = 0; i < d->ios_hi; i++) {
                if (d->ios[i].used && d->ios[i].slot == slot && d->ios[i].kind != IO_KERNEL &&
                    d->ios[i].conn == c->id) {
                    pt_io_free(d, &d->ios[i]);
                }
            }
            pt_conn_close(d, c, true);
            ci = (uint32_t)-1; /* table changed: rescan */
        }
    }
    for (uint32_t i = 0; i < d->ios_hi; i++) {
        if (d->ios[i].used && d->ios[i].slot == slot) pt_io_free(d, &d->ios[i]);
    }
    pt_held_retry(d);
}

static void act_op_begin(pt_driver *d, const ccoip_action *a)
{
    if (a->op_slot >= PT_MAX_SLOTS) {
        pt_log(CCOIP_LOG_ERROR, d->who, "OP_BEGIN slot %u out of range", a->op_slot);
        return;
    }
    pt_slot *o = &d->slots[a->op_slot];
    ccoip_exec_slot *xs = &d->xslots[a->op_slot];
    slot_reset(o);
    memset(xs, 0, sizeof *xs);
    xs->used = true;
    xs->cmd_id = a->cmd_id;
    pthread_mutex_lock(&d->mu);
    for (uint32_t i = 0; i < PT_MAX_CMDS; i++) {
        pt_cmd *c = &d->cmds[i];
        if (c->state != CMD_FREE && c->cmd_id == a->cmd_id) {
            xs->send = c->sendbuf;
            xs->recv = c->recvbuf;
            xs->send_bytes = c->send_bytes;
            xs->recv_bytes = c->recv_bytes;
            if (c->ntensors > 0) {
                o->tensors = malloc(c->ntensors * sizeof *o->tensors);
                o->tensor_bytes = malloc(c->ntensors * sizeof *o->tensor_bytes);
                if (o->tensors != NULL && o->tensor_bytes != NULL) {
                    memcpy(o->tensors, c->tensors, c->ntensors * sizeof *o->tensors);
                    memcpy(o->tensor_bytes, c->tensor_bytes, c->ntensors * sizeof *o->tensor_bytes);
                    xs->tensors = o->tensors;
                    xs->tensor_bytes = o->tensor_bytes;
                    xs->ntensors = c->ntensors;
                }
            }
        }
    }
    pthread_mutex_unlock(&d->mu);
    xs->scratch_bytes = a->scratch_bytes;
    xs->backup_bytes = a->backup_bytes;
    xs->scratch = slot_cached(&o->cache_scratch, &o->cache_scratch_cap, a->scratch_bytes + 1u);
    xs->backup = slot_cached(&o->cache_backup, &o->cache_backup_cap, a->backup_bytes + 1u);
    if (xs->scratch == NULL || xs->backup == NULL) {
        pt_log(CCOIP_LOG_ERROR, d->who, "out of memory for op slot %u", a->op_slot);
        xs->scratch_bytes = 0;
        xs->backup_bytes = 0;
    }
}

static void act_op_end(pt_driver *d, const ccoip_action *a)
{
    if (a->op_slot >= PT_MAX_SLOTS) return;
    pt_kernels_cancel(d, a->op_slot);
    for (uint32_t i = 0; i < d->ios_hi; i++) {
        if (d->ios[i].used && d->ios[i].slot == a->op_slot && d->ios[i].kind == IO_KERNEL) {
            pt_io_free(d, &d->ios[i]);
        }
    }
    pt_slot *o = &d->slots[a->op_slot];
    free(o->tensors);
    free(o->tensor_bytes);
    slot_reset(o);
    const uint64_t cmd_id = d->xslots[a->op_slot].cmd_id;
    memset(&d->xslots[a->op_slot], 0, sizeof d->xslots[a->op_slot]);
    if (d->shadows != NULL) { /* an abandoned command's copies, once nothing uses them */
        pthread_mutex_lock(&d->mu);
        pt_shadows_gc(d, cmd_id);
        pthread_mutex_unlock(&d->mu);
    }
}

static void act_notify(pt_driver *d, const ccoip_action *a)
{
    pthread_mutex_lock(&d->mu);
    /* The waiting call may read attributes as soon as it wakes: publish the
     * world size the command completed with before waking it. */
    d->pinfo.world_size = a->world_size;
    d->pinfo.id = ccoip_peer_id(d->p);
    d->pinfo.accepted = ccoip_peer_is_accepted(d->p);
    d->pinfo.pending = ccoip_peer_is_pending(d->p);
    d->pinfo.failed = ccoip_peer_is_failed(d->p);
    ccoip_peer_world_info(d->p, &d->pinfo.world);
    d->pinfo.world.peer_group = a->world_size;
    d->pinfo.rank = ccoip_peer_rank(d->p);
    d->pinfo.epoch = ccoip_peer_epoch(d->p);
    ccoip_peer_algo_table(d->p, &d->pinfo.algo_table);
    d->pinfo.relay_max = ccoip_peer_relay_max(d->p);
    /* Every kernel of the op completed before the core notified (KERNEL_DONE is queued after
     * the kernel's bytes were counted). */
    d->pinfo.copied_bytes = atomic_load_explicit(&d->copied_bytes, memory_order_relaxed);
    for (uint32_t i = 0; i < PT_MAX_CMDS; i++) {
        pt_cmd *c = &d->cmds[i];
        if (c->state == CMD_FREE || c->cmd_id != a->cmd_id) continue;
        pt_cmd_spin_end(d, c);
        if (c->state == CMD_ABANDONED) {
            pt_cmd_release(c);
            pt_shadows_gc(d, a->cmd_id);
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

void pt_act_run(pt_driver *d, const ccoip_action *a)
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
        pt_conn *c = pt_conn_find(d, a->conn);
        if (c != NULL) pt_conn_close(d, c, false);
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
    case CCOIP_ACT_SCALE:
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
    case CCOIP_ACT_SPLICE: { /* the master's relay (pt_splice.c) */
        pt_conn *x = pt_conn_find(d, a->conn), *y = pt_conn_find(d, a->tag);
        if (!pt_splice(d, x, y)) {
            pt_log(CCOIP_LOG_WARN, d->who,
                   "cannot splice connections %" PRIu64 " and %" PRIu64 ": closing them", a->conn,
                   a->tag);
            if (x != NULL) pt_conn_close(d, x, true);
            y = pt_conn_find(d, a->tag);
            if (y != NULL) pt_conn_close(d, y, true);
        }
        break;
    }
    default:
        pt_log(CCOIP_LOG_WARN, d->who, "action type %d not supported by this runtime",
               (int)a->type);
        break;
    }
}
