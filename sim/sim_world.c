/*
 * sim_world.c — the simulator's driver of core/ccoip_sm.h: the event loop,
 * connections over the virtual network, data frames into posted receives,
 * kernels on real buffers, timers, churn and the run's two phases.
 */
#include <assert.h>
#include <stdarg.h>
#include <stdio.h> /* vsnprintf only: formatting into buffers, no I/O */
#include <stdlib.h>
#include <string.h>

#include "ccoip_dtype.h"
#include "ccoip_hash.h"
#include "ccoip_quant.h"
#include "ccoip_reduce.h"
#include "sim_internal.h"

/* ------------------------------------------------------------------------ */
/* Failure reporting and logging                                            */
/* ------------------------------------------------------------------------ */

void world_fail(sim_world *w, sim_status st, const char *fmt, ...)
{
    if (w->failed) return;
    w->failed = true;
    w->res->status = st;
    va_list ap;
    va_start(ap, fmt);
    char msg[400];
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(w->res->message, sizeof w->res->message, "t=%llu.%06llums %s",
             (unsigned long long)(w->now / SIM_MS), (unsigned long long)(w->now % SIM_MS), msg);
}

void world_log(sim_world *w, const char *fmt, ...)
{
    if (w->cfg.log == NULL) return;
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    w->cfg.log(w->cfg.log_ctx, line);
}

/* ------------------------------------------------------------------------ */
/* Trace recording (core/ccoip_trace.h)                                     */
/* ------------------------------------------------------------------------ */

/* Makes room for n more bytes of node's trace. */
static uint8_t *rec_room(sim_world *w, sim_node *n, uint64_t need)
{
    if (need == 0) {
        world_fail(w, SIM_CRASH, "trace: a record cannot be encoded");
        return NULL;
    }
    if (n->rec_len + need > n->rec_cap) {
        uint64_t ncap = n->rec_cap == 0 ? 4096u : n->rec_cap * 2u;
        while (ncap < n->rec_len + need)
            ncap *= 2u;
        uint8_t *x = realloc(n->rec, (size_t)ncap);
        if (x == NULL) {
            world_fail(w, SIM_CRASH, "out of memory (trace)");
            return NULL;
        }
        n->rec = x;
        n->rec_cap = ncap;
    }
    return n->rec + n->rec_len;
}

/* Writes a POLLED record for the actions polled since the last record. */
static void rec_flush_polled(sim_world *w, sim_node *n)
{
    if (n->rec_polled == 0) return;
    const uint64_t need = ccoip_trace_encode_polled(n->rec_polled, NULL, 0);
    uint8_t *p = rec_room(w, n, need);
    if (p == NULL) return;
    n->rec_len += ccoip_trace_encode_polled(n->rec_polled, p, need);
    n->rec_polled = 0;
}

static void rec_event(sim_world *w, sim_node *n, const ccoip_event *ev)
{
    rec_flush_polled(w, n);
    const uint64_t need = ccoip_trace_encode_event(ev, NULL, 0);
    uint8_t *p = rec_room(w, n, need);
    if (p == NULL) return;
    n->rec_len += ccoip_trace_encode_event(ev, p, need);
    n->rec_events++;
}

static void rec_set_port(sim_world *w, sim_node *n, uint32_t listener, uint32_t port)
{
    rec_flush_polled(w, n);
    const uint64_t need = ccoip_trace_encode_set_port(listener, port, NULL, NULL, 0);
    uint8_t *p = rec_room(w, n, need);
    if (p == NULL) return;
    n->rec_len += ccoip_trace_encode_set_port(listener, port, NULL, p, need);
}

static void rec_checkpoint(sim_world *w, sim_node *n)
{
    n->rec_polled = 0; /* a checkpoint drains every action */
    const uint64_t need = ccoip_trace_encode_checkpoint(0, 0, NULL, 0);
    uint8_t *p = rec_room(w, n, need);
    if (p == NULL) return;
    n->rec_len += ccoip_trace_encode_checkpoint(n->rec_events, n->rec_hash.hash, p, need);
}

static void rec_header(sim_world *w, sim_node *n, const ccoip_trace_header *h)
{
    const uint64_t need = ccoip_trace_encode_header(h, NULL, 0);
    uint8_t *p = rec_room(w, n, need);
    if (p == NULL) return;
    n->rec_len += ccoip_trace_encode_header(h, p, need);
    ccoip_trace_hasher_init(&n->rec_hash);
}

/* End of the run: every machine's trace gets its trailer and goes to the sink. */
static void rec_finish(sim_world *w)
{
    if (!w->cfg.record_trace) return;
    for (uint32_t i = 0; i < w->num_nodes; i++) {
        sim_node *n = &w->nodes[i];
        if (n->rec == NULL) continue;
        const uint64_t need = ccoip_trace_encode_trailer(0, 0, 0, NULL, 0);
        if (n->rec_len + need > n->rec_cap) {
            uint8_t *x = realloc(n->rec, (size_t)(n->rec_len + need));
            if (x == NULL) continue;
            n->rec = x;
            n->rec_cap = n->rec_len + need;
        }
        n->rec_len += ccoip_trace_encode_trailer(n->rec_events, n->rec_hash.actions,
                                                 n->rec_hash.hash, n->rec + n->rec_len, need);
        if (w->cfg.record_sink != NULL) {
            w->cfg.record_sink(w->cfg.record_ctx, i, n->is_master, n->rec, n->rec_len);
        }
    }
}

/* ------------------------------------------------------------------------ */
/* Event pool and heap                                                      */
/* ------------------------------------------------------------------------ */

/* An event travels inline in the queue: a in the payload, (node, b, kind) in the aux word. */
#define EV_AUX(kind, node, b) (((uint64_t)(node) << 32) | ((uint64_t)(b) << 8) | (uint64_t)(kind))

bool world_push(sim_world *w, uint64_t t, uint32_t kind, uint32_t node, uint64_t a, uint64_t b)
{
    if (b >= ((uint64_t)1 << 24) || kind > 0xffu) {
        world_fail(w, SIM_CRASH, "event field out of range (kind %u b %llu)", kind,
                   (unsigned long long)b);
        return false;
    }
    if (t < w->now) t = w->now;
    if (!sim_heap_push2(&w->heap, t, a, EV_AUX(kind, node, b))) {
        world_fail(w, SIM_CRASH, "event queue bound hit (%llu events)",
                   (unsigned long long)w->heap.max_items);
        return false;
    }
    return true;
}

/* Pushes node's live timer under its reserved key (world_feed) and tracks it. */
static void timer_push(sim_world *w, uint32_t node)
{
    sim_node *n = &w->nodes[node];
    if (!sim_heap_push_seq(&w->heap, n->timer_t, n->timer_seq, n->timer_gen,
                           EV_AUX(EVK_TIMER, node, 0))) {
        world_fail(w, SIM_CRASH, "event queue bound hit (%llu events)",
                   (unsigned long long)w->heap.max_items);
        return;
    }
    n->timer_q = n->timer_t;
    n->timer_qgen = n->timer_gen;
}

/* ------------------------------------------------------------------------ */
/* Endpoints                                                                */
/* ------------------------------------------------------------------------ */

static uint64_t ep_hash(uint32_t node, uint64_t id)
{
    return sim_pair_hash(node, id);
}

static uint32_t ep_lookup(sim_world *w, uint32_t node, uint64_t id)
{
    /* A node uses a handful of connections at a time: a small cache in the node first
     * (endpoints are never removed, so a cached (id, endpoint) stays true). */
    sim_node *n = node < w->num_nodes ? &w->nodes[node] : NULL;
    const uint32_t c = (uint32_t)(id & (SIM_EP_CACHE - 1u));
    if (n != NULL && n->epc_e1[c] != 0 && n->epc_id[c] == id) return n->epc_e1[c] - 1u;
    if (id > CCOIP_CONN_ACCEPTED_BASE && id - CCOIP_CONN_ACCEPTED_BASE - 1u < w->acc_len) {
        /* Accepted connections: ids the driver hands out in order, a direct table. */
        const uint32_t e = w->acc_tab[id - CCOIP_CONN_ACCEPTED_BASE - 1u];
        if (w->eps[e].node == node) {
            if (n != NULL) {
                n->epc_id[c] = id;
                n->epc_e1[c] = e + 1u;
            }
            return e;
        }
    }
    const uint64_t mask = w->ep_map_cap - 1u;
    for (uint64_t i = ep_hash(node, id) & mask;; i = (i + 1u) & mask) {
        const sim_ep_slot *sl = &w->ep_map[i];
        if (sl->e == SIM_NONE32) return SIM_NONE32;
        if (sl->node == node && sl->id == id) {
            if (n != NULL) {
                n->epc_id[c] = id;
                n->epc_e1[c] = sl->e + 1u;
            }
            return sl->e;
        }
    }
}

static void ep_map_insert(sim_world *w, uint32_t e)
{
    const uint64_t mask = w->ep_map_cap - 1u;
    uint64_t i = ep_hash(w->eps[e].node, w->eps[e].id) & mask;
    while (w->ep_map[i].e != SIM_NONE32)
        i = (i + 1u) & mask;
    w->ep_map[i] = (sim_ep_slot){w->eps[e].id, w->eps[e].node, e};
}

/* A new endpoint of node with connection id; accepted: id is w->next_accept_id (taken). */
static uint32_t ep_new(sim_world *w, uint32_t node, uint64_t id, bool accepted)
{
    if (ep_lookup(w, node, id) != SIM_NONE32) {
        world_fail(w, SIM_CRASH, "node %u reused connection id %llu", node, (unsigned long long)id);
        return SIM_NONE32;
    }
    if (w->eps_len == w->eps_cap) {
        const uint32_t ncap = w->eps_cap * 2u;
        sim_ep *n = aligned_alloc(64, (size_t)ncap * sizeof *n);
        if (n == NULL) {
            world_fail(w, SIM_CRASH, "out of memory (endpoints)");
            return SIM_NONE32;
        }
        memcpy(n, w->eps, (size_t)w->eps_len * sizeof *n);
        free(w->eps);
        w->eps = n;
        w->eps_cap = ncap;
    }
    if (accepted) {
        if (id != CCOIP_CONN_ACCEPTED_BASE + 1u + w->acc_len) {
            world_fail(w, SIM_CRASH, "accepted connection id %llu out of order",
                       (unsigned long long)id);
            return SIM_NONE32;
        }
        if (w->acc_len == w->acc_cap) {
            const uint32_t ncap = w->acc_cap == 0 ? 1024u : 2u * w->acc_cap;
            uint32_t *t = realloc(w->acc_tab, (size_t)ncap * sizeof *t);
            if (t == NULL) {
                world_fail(w, SIM_CRASH, "out of memory (accepted endpoints)");
                return SIM_NONE32;
            }
            w->acc_tab = t;
            w->acc_cap = ncap;
        }
    } else if ((uint64_t)(w->ep_map_len + 1u) * 2u > w->ep_map_cap) {
        const uint64_t ncap = w->ep_map_cap * 2u;
        sim_ep_slot *m = malloc((size_t)ncap * sizeof *m);
        if (m == NULL) {
            world_fail(w, SIM_CRASH, "out of memory (endpoint map)");
            return SIM_NONE32;
        }
        free(w->ep_map);
        w->ep_map = m;
        w->ep_map_cap = ncap;
        memset(m, 0xff, (size_t)ncap * sizeof *m);
        for (uint32_t i = 0; i < w->eps_len; i++) {
            if (!w->eps[i].accepted) ep_map_insert(w, i);
        }
    }
    const uint32_t e = w->eps_len++;
    memset(&w->eps[e], 0, sizeof w->eps[e]);
    w->eps[e].node = node;
    w->eps[e].id = id;
    w->eps[e].other = SIM_NONE32;
    w->eps[e].state = EP_CONNECTING;
    w->eps[e].next_of_node = SIM_NONE32;
    sim_node *n = &w->nodes[node];
    if (n->ep_last1 != 0) {
        w->eps[n->ep_last1 - 1u].next_of_node = e;
    } else {
        n->ep_first1 = e + 1u;
    }
    n->ep_last1 = e + 1u;
    w->eps[e].accepted = accepted;
    if (accepted) {
        w->acc_tab[w->acc_len++] = e;
    } else {
        ep_map_insert(w, e);
        w->ep_map_len++;
    }
    return e;
}

/* ------------------------------------------------------------------------ */
/* Frames                                                                   */
/* ------------------------------------------------------------------------ */

#define SIM_FRAME_KEEP (64u * 1024u) /* a frame slot keeps a buffer up to this size */

static uint32_t frame_new(sim_world *w, uint64_t len)
{
    uint32_t f;
    if (w->frame_free_len > 0) {
        f = w->frame_free[--w->frame_free_len];
    } else {
        if (w->frames_len == w->frames_cap) {
            const uint32_t ncap = w->frames_cap * 2u;
            sim_frame *n = aligned_alloc(64, (size_t)ncap * sizeof *n);
            uint32_t *fl = realloc(w->frame_free, (size_t)ncap * sizeof *fl);
            if (fl != NULL) w->frame_free = fl;
            if (n == NULL || fl == NULL) {
                free(n);
                world_fail(w, SIM_CRASH, "out of memory (frames)");
                return SIM_NONE32;
            }
            memcpy(n, w->frames, (size_t)w->frames_len * sizeof *n);
            free(w->frames);
            w->frames = n;
            w->frames_cap = ncap;
        }
        f = w->frames_len++;
        w->frames[f].bytes = NULL;
        w->frames[f].bytes_cap = 0;
    }
    sim_frame *fr = &w->frames[f];
    /* A slot keeps its buffer: most frames fit the one of the frame before. */
    uint8_t *bytes = fr->bytes;
    uint32_t bytes_cap = fr->bytes_cap;
    const uint64_t need = len > 0 ? len : 1u;
    if (need > bytes_cap) {
        free(bytes);
        bytes_cap = 0;
        bytes = malloc((size_t)need);
        if (bytes == NULL) {
            fr->bytes = NULL;
            fr->bytes_cap = 0;
            world_fail(w, SIM_CRASH, "out of memory (frame bytes)");
            return SIM_NONE32;
        }
        if (need <= SIM_FRAME_KEEP) bytes_cap = (uint32_t)need;
    }
    memset(fr, 0, sizeof *fr);
    fr->used = true;
    fr->len = len;
    fr->bytes = bytes;
    fr->bytes_cap = bytes_cap;
    return f;
}

static void frame_free(sim_world *w, uint32_t f)
{
    sim_frame *fr = &w->frames[f];
    if (fr->bytes_cap == 0) {
        free(fr->bytes); /* larger than SIM_FRAME_KEEP: not kept */
        fr->bytes = NULL;
    }
    fr->used = false;
    w->frame_free[w->frame_free_len++] = f;
}

/* Puts frame f on the wire from endpoint src to its remote end. Returns the
 * time the last byte left the sender (its I/O completion). */
static uint64_t frame_send(sim_world *w, uint32_t src, uint32_t f)
{
    const sim_ep *s = &w->eps[src];
    sim_ep *d = &w->eps[s->other];
    w->frames[f].dst_ep = s->other;
    w->frames[f].src_node = s->node;
    uint64_t sent;
    uint64_t arr =
        sim_net_transit(&w->net, &w->net_rng, w->node_host[s->node], w->node_host[d->node], w->now,
                        w->frames[f].len + (w->frames[f].is_data ? 80u : 0u), &sent);
    if (arr == SIM_NET_FOREVER || d->stuck) {
        /* The stream is wedged: this frame and all later ones never arrive. */
        d->stuck = true;
        frame_free(w, f);
        return sent;
    }
    if (arr < d->last_arrival_ns) arr = d->last_arrival_ns;
    d->last_arrival_ns = arr;
    /* The destination endpoint rides along in the high word (a prefetch hint only). */
    world_push(w, arr, EVK_DELIVER, d->node, f | ((uint64_t)s->other << 32), 0);
    return sent;
}

/* ------------------------------------------------------------------------ */
/* Nodes                                                                    */
/* ------------------------------------------------------------------------ */

static bool node_runs(const sim_world *w, uint32_t node)
{
    return node < w->num_nodes && w->node_st[node] == (uint8_t)NODE_ALIVE;
}

/* A node's state, mirrored in w->node_st (one byte per node, so the checks on every event do not
 * miss the cache on the node's own record). */
static void node_set_state(sim_world *w, uint32_t node, sim_node_state st)
{
    w->nodes[node].state = st;
    w->node_st[node] = (uint8_t)st;
}

static void host_ip(uint32_t host, uint8_t ip[4])
{
    ip[0] = 10;
    ip[1] = (uint8_t)(host >> 16);
    ip[2] = (uint8_t)(host >> 8);
    ip[3] = (uint8_t)host;
}

/* A node's pending I/Os: n->ios lists record indexes into n->io_pool in the order the driver
 * walks them (a removal moves the last entry into the gap); records stay put, so a removal
 * copies 4 bytes instead of a whole record. */
static sim_io *io_at(sim_node *n, uint32_t i)
{
    return &n->io_pool[n->ios[i].rec];
}

static sim_io *io_find(sim_node *n, uint64_t io_id, uint32_t *idx_out)
{
    for (uint32_t i = 0; i < n->ios_len; i++) {
        if (n->ios[i].io_id == io_id) {
            if (idx_out != NULL) *idx_out = i;
            return io_at(n, i);
        }
    }
    return NULL;
}

static void io_remove(sim_node *n, uint32_t idx)
{
    n->io_free[n->io_free_len++] = n->ios[idx].rec;
    n->ios[idx] = n->ios[--n->ios_len];
    if (idx < n->ios_len) n->io_pool[n->ios[idx].rec].pos = idx;
}

/* The endpoint of a pending I/O (record and walk-order copy). */
static void io_set_ep(sim_node *n, sim_io *io, uint32_t e)
{
    io->ep = e;
    n->ios[io->pos].ep = e;
}

static sim_io *io_add(sim_world *w, sim_node *n, uint64_t io_id, sim_io_kind kind,
                      const ccoip_action *act)
{
    if (io_find(n, io_id, NULL) != NULL) {
        world_fail(w, SIM_CRASH, "io id %llu reused while pending", (unsigned long long)io_id);
        return NULL;
    }
    if (n->ios_len == n->ios_cap) {
        const uint32_t ncap = n->ios_cap == 0 ? 16u : n->ios_cap * 2u;
        if (ncap > 4096u) {
            world_fail(w, SIM_CRASH, "more than 4096 pending I/Os on one node");
            return NULL;
        }
        sim_io *x = realloc(n->io_pool, (size_t)ncap * sizeof *x);
        if (x != NULL) n->io_pool = x;
        sim_io_ref *y = realloc(n->ios, (size_t)ncap * sizeof *y);
        if (y != NULL) n->ios = y;
        uint32_t *z = realloc(n->io_free, (size_t)ncap * sizeof *z);
        if (z != NULL) n->io_free = z;
        if (x == NULL || y == NULL || z == NULL) {
            world_fail(w, SIM_CRASH, "out of memory (ios)");
            return NULL;
        }
        /* The new records are free (the pool is full exactly when the list is). */
        for (uint32_t r = ncap; r-- > n->ios_cap;)
            n->io_free[n->io_free_len++] = r;
        n->ios_cap = ncap;
    }
    const uint32_t rec = n->io_free[--n->io_free_len];
    const uint32_t pos = n->ios_len++;
    n->ios[pos] = (sim_io_ref){io_id, rec, SIM_NONE32};
    sim_io *io = &n->io_pool[rec];
    memset(io, 0, sizeof *io);
    io->pos = pos;
    io->io_id = io_id;
    io->kind = kind;
    io->op_slot = act->op_slot;
    io->ep = SIM_NONE32;
    io->dst = act->dst;
    io->type = act->type;
    io->chunk = act->chunk;
    io->step = act->step;
    io->epoch = act->epoch;
    io->tag = act->tag;
    io->seq = act->seq;
    io->result = pcclSuccess;
    return io;
}

/* The node's slot table as the core's executor sees it. */
static ccoip_exec node_exec(sim_node *n)
{
    ccoip_exec x = {n->ops, SIM_OP_SLOTS};
    return x;
}

/* Maps a span onto memory (ccoip_exec_span); NULL and a crash verdict when it does not map. */
static uint8_t *span_ptr(sim_world *w, uint32_t node, const ccoip_span_ref *s)
{
    const ccoip_exec x = node_exec(&w->nodes[node]);
    const char *why = "";
    uint8_t *p = ccoip_exec_span(&x, s, &why);
    if (p == NULL) {
        world_fail(w, SIM_CRASH,
                   "node %u: span (slot %u region %d offset %llu length %llu tensor %u): %s", node,
                   s->op_slot, (int)s->region, (unsigned long long)s->offset,
                   (unsigned long long)s->length, s->tensor, why);
    }
    return p;
}

/* Fails every pending send/receive on endpoint e of node (the stream broke). */
static void ios_fail_on_ep(sim_world *w, uint32_t node, uint32_t e)
{
    sim_node *n = &w->nodes[node];
    for (uint32_t i = 0; i < n->ios_len; i++) {
        if (n->ios[i].ep != e) continue;
        sim_io *io = io_at(n, i);
        if ((io->kind == IO_SEND || io->kind == IO_RECV) && io->ep == e && !io->delivered) {
            io->delivered = true;
            io->result = pcclRankConnectionLost;
            world_push(w, w->now, EVK_IO_DONE, node, io->io_id, 0);
        }
    }
}

/* The remote end of e goes away: its owner learns it after the frames in flight. */
static void ep_close_remote(sim_world *w, uint32_t e)
{
    sim_ep *s = &w->eps[e];
    if (s->other == SIM_NONE32) return;
    sim_ep *d = &w->eps[s->other];
    if (d->state == EP_CLOSED || d->stuck) return;
    const uint32_t hs = w->node_host[s->node], hd = w->node_host[d->node];
    uint64_t t = w->now + sim_net_latency(&w->net, hs, hd);
    uint64_t until;
    if (sim_net_blocked(&w->net, hs, hd, w->now, &until)) {
        if (until == SIM_NET_FOREVER) return; /* the FIN/RST never arrives */
        t = until + sim_net_latency(&w->net, hs, hd);
    }
    if (t < d->last_arrival_ns) t = d->last_arrival_ns;
    d->last_arrival_ns = t;
    world_push(w, t, d->state == EP_CONNECTING ? EVK_CONN_FAIL : EVK_CONN_CLOSED, d->node, s->other,
               0);
}

/* ------------------------------------------------------------------------ */
/* Kernels                                                                  */
/* ------------------------------------------------------------------------ */

static void kernel_run(sim_world *w, uint32_t node, sim_io *io, const ccoip_action *a)
{
    const ccoip_exec x = node_exec(&w->nodes[node]);
    ccoip_kernel k;
    const char *why = "";
    if (ccoip_kernel_prepare(&x, a, &k, &why) != pcclSuccess) {
        world_fail(w, SIM_CRASH, "node %u: kernel io %llu (type %d): %s", node,
                   (unsigned long long)a->io_id, (int)a->type, why);
        return;
    }
    /* Canaries (docs/simulator.md): a restore COPY that never happens, one flipped bit. */
    if (a->type == CCOIP_ACT_COPY && (w->cfg.canary & SIM_CANARY_DROP_RESTORE_COPY) &&
        a->src.region == CCOIP_REGION_BACKUP) {
        io->result = pcclSuccess;
        return;
    }
    io->result = ccoip_kernel_run(&k);
    io->quant_out = k.quant_out;
    io->hash = k.hash;
    if (a->type == CCOIP_ACT_REDUCE && (w->cfg.canary & SIM_CANARY_CORRUPT_REDUCE) &&
        w->corrupt_done == 0 && a->count > 0) {
        k.dst[0] ^= 1u;
        w->corrupt_done = 1;
    }
    if (a->type == CCOIP_ACT_COPY && (w->cfg.canary & SIM_CANARY_CORRUPT_ADOPT) &&
        a->dst.region == CCOIP_REGION_TENSOR && w->corrupt_done == 0 && a->dst.length > 0) {
        k.dst[0] ^= 1u;
        w->corrupt_done = 1;
    }
}

/* ------------------------------------------------------------------------ */
/* Actions                                                                  */
/* ------------------------------------------------------------------------ */

static uint32_t find_listener(sim_world *w, const uint8_t *ip, uint32_t ip_len, uint32_t port,
                              uint32_t *listener_out)
{
    if (ip_len != 4 || ip[0] != 10) return SIM_NONE32;
    const uint32_t host = ((uint32_t)ip[1] << 16) | ((uint32_t)ip[2] << 8) | ip[3];
    /* At most one process of a host is not dead: the newest one on it. */
    if (host >= w->host_node_cap) return SIM_NONE32;
    const uint32_t i = w->host_node[host];
    if (i != SIM_NONE32) {
        const sim_node *n = &w->nodes[i];
        if (n->host != host || n->state == NODE_DEAD) return SIM_NONE32;
        if (n->is_master && port == SIM_MASTER_PORT) {
            *listener_out = 0;
            return i;
        }
        for (uint32_t l = 0; l < 3u; l++) {
            if (n->ports[l] != 0 && n->ports[l] == port) {
                *listener_out = l;
                return i;
            }
        }
    }
    return SIM_NONE32;
}

static void act_connect(sim_world *w, uint32_t node, const ccoip_action *a)
{
    const uint32_t e = ep_new(w, node, a->conn, false);
    if (e == SIM_NONE32) return;
    uint32_t listener = 0;
    const uint32_t target =
        a->len > 0 ? SIM_NONE32 : find_listener(w, a->ip, a->ip_len, a->port, &listener);
    const uint32_t ha = w->nodes[node].host;
    if (target == SIM_NONE32) {
        /* Nobody listens there: a reset after one round trip. */
        const uint64_t rtt = 2u * w->net.hosts[ha].latency_ns;
        world_push(w, w->now + rtt, EVK_CONN_FAIL, node, e, 0);
        return;
    }
    const uint32_t hb = w->nodes[target].host;
    uint64_t syn = w->now;
    uint64_t until;
    if (sim_net_blocked(&w->net, ha, hb, syn, &until) ||
        sim_net_blocked(&w->net, hb, ha, syn, &until)) {
        if (until == SIM_NET_FOREVER || until - w->now >= SIM_CONNECT_TIMEOUT_NS) {
            world_push(w, w->now + SIM_CONNECT_TIMEOUT_NS, EVK_CONN_FAIL, node, e, 0);
            return;
        }
        syn = until;
    }
    const uint64_t t_acc = syn + sim_net_latency(&w->net, ha, hb);
    const uint64_t t_up = t_acc + sim_net_latency(&w->net, hb, ha);
    const uint32_t r = ep_new(w, target, w->next_accept_id++, true);
    if (r == SIM_NONE32) return;
    w->eps[r].other = e;
    w->eps[r].listener = (uint8_t)listener; /* below 3 (find_listener) */
    w->eps[r].last_arrival_ns = t_acc;
    w->eps[e].other = r;
    w->eps[e].last_arrival_ns = t_up;
    world_push(w, t_acc, EVK_ACCEPT, target, r, 0);
    world_push(w, t_up, EVK_CONN_UP, node, e, 0);
}

static void act_send(sim_world *w, uint32_t node, const ccoip_action *a)
{
    const uint32_t e = ep_lookup(w, node, a->conn);
    if (e == SIM_NONE32) {
        world_fail(w, SIM_CRASH, "node %u: SEND on unknown connection %llu", node,
                   (unsigned long long)a->conn);
        return;
    }
    if (w->eps[e].state == EP_CLOSED || w->eps[e].other == SIM_NONE32) return;
    if (w->nodes[node].is_master) check_m2p_sent(w, w->eps[w->eps[e].other].node, a->data, a->len);
    /* v9: the frame goes on with the bytes of a span (a relayed all-reduce's input). */
    const uint8_t *tail = NULL;
    if (a->src.length > 0) {
        tail = span_ptr(w, node, &a->src);
        if (tail == NULL) return;
    }
    const uint32_t f = frame_new(w, a->len + a->src.length);
    if (f == SIM_NONE32) return;
    if (a->len > 0) memcpy(w->frames[f].bytes, a->data, (size_t)a->len);
    if (tail != NULL) {
        memcpy(w->frames[f].bytes + a->len, tail, (size_t)a->src.length);
        check_relay_initiate(w, node, w->frames[f].bytes, a->len + a->src.length, tail,
                             a->src.length);
    }
    frame_send(w, e, f);
}

/* v9: the master's relayed result into the op's span, at once. */
static void act_write(sim_world *w, uint32_t node, const ccoip_action *a)
{
    uint8_t *dst = span_ptr(w, node, &a->dst);
    if (dst == NULL) return;
    if (a->len != a->dst.length) {
        world_fail(w, SIM_CRASH, "node %u: WRITE of %llu bytes into a span of %llu", node,
                   (unsigned long long)a->len, (unsigned long long)a->dst.length);
        return;
    }
    if (a->len > 0) memcpy(dst, a->data, (size_t)a->len);
}

/* The frame f sent on e while it is on the wire (SIM_NONE32: it never lands, the peer's end was
 * stuck before or after the send). */
static uint32_t frame_on_wire(const sim_world *w, uint32_t e, uint32_t f, bool lost)
{
    return lost || w->eps[w->eps[e].other].stuck ? SIM_NONE32 : f;
}

/* A send's frame left at time sent: its record completes then (IO_DONE). NULL: no record. */
static sim_io *send_sent(sim_world *w, uint32_t node, uint64_t io_id, uint32_t e, uint32_t f,
                         bool lost, uint64_t sent)
{
    sim_io *io = io_find(&w->nodes[node], io_id, NULL);
    if (io == NULL) return NULL;
    io->delivered = true;
    io->frame = frame_on_wire(w, e, f, lost);
    io->sent_ns = sent;
    world_push(w, sent, EVK_IO_DONE, node, io_id, 0);
    return io;
}

static void act_ring_send(sim_world *w, uint32_t node, const ccoip_action *a)
{
    sim_node *n = &w->nodes[node];
    /* io_id 0: a quiet send (contract v8): its frame goes out, no record, no IO_DONE. */
    const bool quiet = a->io_id == 0;
    sim_io *io = NULL;
    if (!quiet) {
        io = io_add(w, n, a->io_id, IO_SEND, a);
        if (io == NULL) return;
        io->frame = SIM_NONE32;
    }
    const uint8_t *src = span_ptr(w, node, &a->src);
    if (src == NULL) return;
    check_ring_action(w, node, a);
    const uint32_t e = ep_lookup(w, node, a->conn);
    if (io != NULL) io_set_ep(n, io, e);
    if (e == SIM_NONE32 || w->eps[e].state != EP_OPEN || w->eps[e].other == SIM_NONE32 ||
        w->eps[e].torn) {
        if (io == NULL) return;
        io->delivered = true;
        io->result = pcclRankConnectionLost;
        world_push(w, w->now, EVK_IO_DONE, node, a->io_id, 0);
        return;
    }
    const uint32_t f = frame_new(w, a->src.length);
    if (f == SIM_NONE32) return;
    sim_frame *fr = &w->frames[f];
    fr->is_data = true;
    if (a->src.length > 0) memcpy(fr->bytes, src, (size_t)a->src.length);
    fr->epoch = a->epoch;
    fr->tag = a->tag;
    fr->seq = a->seq;
    fr->chunk = a->chunk;
    fr->step = a->step;
    fr->quant = a->quant;
    const bool lost = w->eps[w->eps[e].other].stuck;
    const uint64_t sent = frame_send(w, e, f);
    if (quiet) {
        sim_quiet *q = &n->quiet[n->quiet_next++ % SIM_QUIET_MAX];
        q->sent_ns = sent;
        q->frame = frame_on_wire(w, e, f, lost);
        q->ep = e;
        q->slot = a->op_slot;
    } else if (send_sent(w, node, a->io_id, e, f, lost, sent) == NULL) {
        return;
    }
    if (n->app.crash_after_sends > 0 && --n->app.crash_after_sends == 0) {
        world_log(w, "script: node %u crashes mid-ring", node);
        world_kill(w, node, false);
    }
}

static bool op_cancelled(const sim_node *n, const sim_frame *f)
{
    /* Only the entries written so far, and none when the frame is newer than all of them. */
    if (n->cancelled_next == 0 || f->epoch > n->cancelled_max_epoch) return false;
    const uint32_t used = n->cancelled_next < 32u ? n->cancelled_next : 32u;
    for (uint32_t i = 0; i < used; i++) {
        if (n->cancelled[i][0] == f->epoch && n->cancelled[i][1] == f->tag &&
            n->cancelled[i][2] == f->seq && (f->epoch | f->tag | f->seq) != 0) {
            return true;
        }
    }
    return false;
}

/* Breaks endpoint e under its owner: pending I/O fails, CONN_CLOSED follows,
 * the remote end learns it after the frames in flight. */
static void ep_break(sim_world *w, uint32_t e)
{
    sim_ep *ep = &w->eps[e];
    if (ep->state == EP_CLOSED || ep->torn) return;
    ep->torn = true;
    ios_fail_on_ep(w, ep->node, e);
    world_push(w, w->now, EVK_CONN_CLOSED, ep->node, e, 0);
    ep_close_remote(w, e);
}

/* Lands frame f into the posted receive io (the frame is consumed). */
static void recv_land(sim_world *w, uint32_t node, sim_io *io, uint32_t f)
{
    sim_frame *fr = &w->frames[f];
    uint8_t *dst = span_ptr(w, node, &io->dst);
    if (dst == NULL) return;
    if (fr->len != io->dst.length) {
        world_fail(w, SIM_CRASH,
                   "node %u: data frame of %llu bytes for a receive of %llu (epoch %llu seq %llu "
                   "step %u)",
                   node, (unsigned long long)fr->len, (unsigned long long)io->dst.length,
                   (unsigned long long)fr->epoch, (unsigned long long)fr->seq, fr->step);
        return;
    }
    if (fr->len > 0) memcpy(dst, fr->bytes, (size_t)fr->len);
    io->quant_in = fr->quant;
    io->delivered = true;
    world_push(w, w->now, EVK_IO_DONE, node, io->io_id, 0);
}

static void inbox_pop(sim_world *w, sim_ep *ep, bool free_it)
{
    if (free_it) frame_free(w, ep->inbox[0]);
    memmove(&ep->inbox[0], &ep->inbox[1], (size_t)(ep->inbox_len - 1u) * sizeof ep->inbox[0]);
    ep->inbox_len--;
}

/* Processes the frames at the head of e's stream (ccoip_sm.h, data
 * connections): control frames go to the core as RECV, ring chunks land in
 * the matching RING_RECV; a chunk with no RING_RECV yet holds the stream. */
static void ep_pump(sim_world *w, uint32_t e)
{
    sim_ep *ep = &w->eps[e];
    if (ep->pumping) return;
    ep->pumping = true;
    const uint32_t node = ep->node;
    while (!w->failed && ep->inbox_len > 0 && ep->state != EP_CLOSED && !ep->torn &&
           node_runs(w, node)) {
        const uint32_t f = ep->inbox[0];
        sim_frame *fr = &w->frames[f];
        if (!fr->is_data) {
            ccoip_event ev;
            memset(&ev, 0, sizeof ev);
            ev.type = CCOIP_EV_RECV;
            ev.conn = ep->id;
            ev.data = fr->bytes;
            ev.len = fr->len;
            inbox_pop(w, ep, false);
            world_feed(w, node, &ev);
            frame_free(w, f);
            ep = &w->eps[e];
            continue;
        }
        sim_node *n = &w->nodes[node];
        if (fr->is_state) {
            sim_io *st = NULL;
            for (uint32_t i = 0; i < n->ios_len; i++) {
                if (n->ios[i].ep != e) continue;
                sim_io *io = io_at(n, i);
                if (io->kind == IO_RECV && io->ep == e && !io->delivered &&
                    io->type == CCOIP_ACT_STATE_RECV && io->tag == fr->tag && io->seq == fr->seq &&
                    io->chunk == fr->chunk) {
                    st = io;
                    break;
                }
            }
            if (st == NULL) break; /* held until its STATE_RECV is posted */
            inbox_pop(w, ep, false);
            if (fr->len != st->dst.length) {
                w->protocol_violations++;
                st->delivered = true;
                st->result = pcclProtocolError;
                world_push(w, w->now, EVK_IO_DONE, node, st->io_id, 0);
                frame_free(w, f);
                ep_break(w, e);
                break;
            }
            recv_land(w, node, st, f);
            frame_free(w, f);
            continue;
        }
        if (fr->epoch < ep->max_recv_epoch || op_cancelled(n, fr)) {
            inbox_pop(w, ep, true); /* an older epoch's or a cancelled op's frame (§8.2) */
            continue;
        }
        sim_io *exact = NULL;
        sim_io *same_op = NULL;
        for (uint32_t i = 0; i < n->ios_len; i++) {
            if (n->ios[i].ep != e) continue;
            sim_io *io = io_at(n, i);
            if (io->kind != IO_RECV || io->ep != e || io->delivered ||
                io->type != CCOIP_ACT_RING_RECV) {
                continue;
            }
            if (io->epoch != fr->epoch || io->tag != fr->tag || io->seq != fr->seq) {
                continue;
            }
            if (io->chunk == fr->chunk && io->step == fr->step) {
                exact = io;
                break;
            }
            same_op = io;
        }
        if (exact != NULL) {
            inbox_pop(w, ep, false);
            recv_land(w, node, exact, f);
            frame_free(w, f);
            continue;
        }
        if (same_op != NULL) {
            /* Right op, wrong step or chunk: a protocol violation. */
            w->protocol_violations++;
            world_log(w,
                      "node %u: ring frame (epoch %llu seq %llu step %u chunk %u) does not match "
                      "its RING_RECV (step %u chunk %u): closing the connection",
                      node, (unsigned long long)fr->epoch, (unsigned long long)fr->seq, fr->step,
                      fr->chunk, same_op->step, same_op->chunk);
            same_op->delivered = true;
            same_op->result = pcclProtocolError;
            world_push(w, w->now, EVK_IO_DONE, node, same_op->io_id, 0);
            inbox_pop(w, ep, true);
            ep_break(w, e);
            break;
        }
        break; /* held until its RING_RECV is posted */
    }
    ep->pumping = false;
}

static void act_ring_recv(sim_world *w, uint32_t node, const ccoip_action *a)
{
    sim_node *n = &w->nodes[node];
    sim_io *io = io_add(w, n, a->io_id, IO_RECV, a);
    if (io == NULL) return;
    if (span_ptr(w, node, &a->dst) == NULL) return;
    check_ring_action(w, node, a);
    const uint32_t e = ep_lookup(w, node, a->conn);
    io_set_ep(n, io, e);
    if (e == SIM_NONE32 || w->eps[e].state == EP_CLOSED || w->eps[e].torn) {
        io->delivered = true;
        io->result = pcclRankConnectionLost;
        world_push(w, w->now, EVK_IO_DONE, node, a->io_id, 0);
        return;
    }
    if (a->epoch > w->eps[e].max_recv_epoch) w->eps[e].max_recv_epoch = a->epoch;
    ep_pump(w, e);
}

static void deliver(sim_world *w, uint32_t f)
{
    sim_frame *fr = &w->frames[f];
    const uint32_t e = fr->dst_ep;
    sim_ep *ep = &w->eps[e];
    if (fr->torn || ep->state == EP_CLOSED || ep->torn || !node_runs(w, ep->node)) {
        frame_free(w, f);
        return;
    }
    if (!fr->is_data && ep->inbox_len == 0) {
        if (!w->nodes[ep->node].is_master) check_m2p_recv(w, ep->node, fr->bytes, fr->len);
        ccoip_event ev;
        memset(&ev, 0, sizeof ev);
        ev.type = CCOIP_EV_RECV;
        ev.conn = ep->id;
        ev.data = fr->bytes;
        ev.len = fr->len;
        world_feed(w, ep->node, &ev);
        frame_free(w, f);
        return;
    }
    if (ep->inbox_len >= SIM_INBOX_MAX) {
        world_fail(w, SIM_CRASH, "node %u: more than %u frames held on one connection", ep->node,
                   SIM_INBOX_MAX);
        frame_free(w, f);
        return;
    }
    if (ep->inbox_len == ep->inbox_cap) {
        /* Grown on demand: most connections never hold more than a few frames, and a long run
         * makes millions of connections. */
        const uint32_t ncap = ep->inbox_cap == 0 ? 4u : 2u * ep->inbox_cap;
        uint32_t *x = realloc(ep->inbox, ncap * sizeof *ep->inbox);
        if (x != NULL) {
            ep->inbox = x;
            ep->inbox_cap = (uint16_t)ncap; /* at most SIM_INBOX_MAX */
        }
        if (x == NULL) {
            world_fail(w, SIM_CRASH, "out of memory (inbox)");
            return;
        }
    }
    ep->inbox[ep->inbox_len++] = f;
    ep_pump(w, e);
}

/* STATE_SEND: the bytes of src as one STATE_DATA frame (tag, seq, chunk). */
static void act_state_send(sim_world *w, uint32_t node, const ccoip_action *a)
{
    sim_node *n = &w->nodes[node];
    sim_io *io = io_add(w, n, a->io_id, IO_SEND, a);
    if (io == NULL) return;
    io->frame = SIM_NONE32;
    const uint8_t *src = span_ptr(w, node, &a->src);
    if (src == NULL) return;
    const uint32_t e = ep_lookup(w, node, a->conn);
    io_set_ep(n, io, e);
    if (e == SIM_NONE32 || w->eps[e].state != EP_OPEN || w->eps[e].other == SIM_NONE32 ||
        w->eps[e].torn) {
        io->delivered = true;
        io->result = pcclRankConnectionLost;
        world_push(w, w->now, EVK_IO_DONE, node, a->io_id, 0);
        return;
    }
    const uint32_t f = frame_new(w, a->src.length);
    if (f == SIM_NONE32) return;
    sim_frame *fr = &w->frames[f];
    fr->is_data = true;
    fr->is_state = true;
    if (a->src.length > 0) memcpy(fr->bytes, src, (size_t)a->src.length);
    fr->tag = a->tag;
    fr->seq = a->seq;
    fr->chunk = a->chunk;
    const bool lost = w->eps[w->eps[e].other].stuck;
    const uint64_t sent = frame_send(w, e, f);
    io = send_sent(w, node, a->io_id, e, f, lost, sent);
    if (io == NULL) return;
    if (w->crash_state_after > 0 && --w->crash_state_after == 0) {
        /* Killed mid-transfer: the frame is still on the wire and never completes. */
        world_log(w, "script: node %u crashes mid-transfer of shared state", node);
        if (io->frame != SIM_NONE32 && sent > w->now) w->frames[io->frame].torn = true;
        world_kill(w, node, false);
    }
}

static void act_state_recv(sim_world *w, uint32_t node, const ccoip_action *a)
{
    sim_node *n = &w->nodes[node];
    sim_io *io = io_add(w, n, a->io_id, IO_RECV, a);
    if (io == NULL) return;
    if (span_ptr(w, node, &a->dst) == NULL) return;
    const uint32_t e = ep_lookup(w, node, a->conn);
    io_set_ep(n, io, e);
    if (e == SIM_NONE32 || w->eps[e].state == EP_CLOSED || w->eps[e].torn) {
        io->delivered = true;
        io->result = pcclRankConnectionLost;
        world_push(w, w->now, EVK_IO_DONE, node, a->io_id, 0);
        return;
    }
    ep_pump(w, e);
}

uint64_t world_probe_us(const sim_world *w, uint32_t ha, uint32_t hb, uint64_t bytes)
{
    /* Connect (one round trip), the bytes at the link's rate, the close back. */
    const uint64_t lat = sim_net_latency(&w->net, ha, hb) + sim_net_latency(&w->net, hb, ha);
    uint64_t bw = w->net.hosts[ha].up_bps < w->net.hosts[hb].down_bps ? w->net.hosts[ha].up_bps
                                                                      : w->net.hosts[hb].down_bps;
    if (bw == 0) bw = 1;
    const uint64_t xfer_us = bytes / bw * 1000000u + (bytes % bw) * 1000000u / bw;
    return (2u * lat) / 1000u + xfer_us;
}

/* PROBE: measured on the virtual network (no streams: the link's configured rates). */
static void act_probe(sim_world *w, uint32_t node, const ccoip_action *a)
{
    sim_node *n = &w->nodes[node];
    sim_io *io = io_add(w, n, a->io_id, IO_PROBE, a);
    if (io == NULL) return;
    w->probe_bytes = a->count;
    uint32_t listener = 0;
    const uint32_t target =
        a->len > 0 ? SIM_NONE32 : find_listener(w, a->ip, a->ip_len, a->port, &listener);
    const uint32_t ha = n->host;
    uint64_t until = 0;
    if (target == SIM_NONE32 || listener != CCOIP_LISTENER_BANDWIDTH ||
        w->nodes[target].state != NODE_ALIVE ||
        sim_net_blocked(&w->net, ha, w->nodes[target].host, w->now, &until) ||
        sim_net_blocked(&w->net, w->nodes[target].host, ha, w->now, &until)) {
        io->result = pcclRankConnectionFailed;
        world_push(w, w->now + 2u * w->net.hosts[ha].latency_ns, EVK_PROBE, node, a->io_id, 0);
        return;
    }
    io->probe_bytes = a->count;
    io->duration_us = (w->cfg.canary & SIM_CANARY_SWAP_PROBE)
                          ? world_probe_us(w, w->nodes[target].host, ha, a->count)
                          : world_probe_us(w, ha, w->nodes[target].host, a->count);
    world_push(w, w->now + io->duration_us * 1000u, EVK_PROBE, node, a->io_id, 0);
}

static void act_kernel(sim_world *w, uint32_t node, const ccoip_action *a)
{
    sim_node *n = &w->nodes[node];
    sim_io *io = io_add(w, n, a->io_id, IO_KERNEL, a);
    if (io == NULL) return;
    /* Kernels of a slot run in queue order: the bytes change now, in
     * emission order, and the completions are reported in that order, at
     * about 4 GB/s plus a microsecond each. */
    kernel_run(w, node, io, a);
    uint64_t bytes = a->dst.length > a->src.length ? a->dst.length : a->src.length;
    if (a->base.length > bytes) bytes = a->base.length; /* GATHER_REDUCE reads every slot */
    const uint32_t slot = a->op_slot < SIM_OP_SLOTS ? a->op_slot : 0;
    uint64_t t = w->now > n->slot_busy_until[slot] ? w->now : n->slot_busy_until[slot];
    t += 1000u + bytes / 4u;
    n->slot_busy_until[slot] = t;
    world_push(w, t, EVK_KERNEL, node, a->io_id, 0);
}

static void act_cancel(sim_world *w, uint32_t node, const ccoip_action *a)
{
    sim_node *n = &w->nodes[node];
    if (a->op_slot < SIM_OP_SLOTS && n->opm[a->op_slot].bound) {
        const sim_opmeta *o = &n->opm[a->op_slot];
        uint64_t *k = n->cancelled[n->cancelled_next++ % 32u];
        k[0] = o->epoch;
        if (o->epoch > n->cancelled_max_epoch) n->cancelled_max_epoch = o->epoch;
        k[1] = o->tag;
        k[2] = o->seq;
    }
    for (uint32_t i = 0; i < n->ios_len;) {
        sim_io *io = io_at(n, i);
        if (io->op_slot != a->op_slot) {
            i++;
            continue;
        }
        if (io->kind == IO_SEND && io->frame != SIM_NONE32 && io->sent_ns > w->now &&
            io->result == pcclSuccess) {
            /* Abandoned mid-write: the frame is torn and the stream closes (rule 8). */
            w->frames[io->frame].torn = true;
            if (io->ep != SIM_NONE32) ep_break(w, io->ep);
        }
        io_remove(n, i);
    }
    for (uint32_t i = 0; i < SIM_QUIET_MAX; i++) {
        sim_quiet *q = &n->quiet[i];
        if (q->slot != a->op_slot || q->sent_ns <= w->now) continue;
        q->sent_ns = 0;
        if (q->frame == SIM_NONE32) continue;
        w->frames[q->frame].torn = true; /* abandoned mid-write, as above */
        ep_break(w, q->ep);
    }
    /* Its endpoints in creation order (index order, as a walk over every endpoint would; ones
     * made meanwhile are appended and visited too). */
    for (uint32_t e = n->ep_first1 - 1u; n->ep_first1 != 0 && e != SIM_NONE32;
         e = w->eps[e].next_of_node) {
        if (w->eps[e].node == node && w->eps[e].inbox_len > 0) ep_pump(w, e);
    }
}

static void act_op_begin(sim_world *w, uint32_t node, const ccoip_action *a)
{
    sim_node *n = &w->nodes[node];
    if (a->op_slot >= SIM_OP_SLOTS || n->ops[a->op_slot].used) {
        world_fail(w, SIM_CRASH, "node %u: OP_BEGIN on slot %u (busy or out of range)", node,
                   a->op_slot);
        return;
    }
    if (a->op_slot >= SIM_MAX_OPS) {
        /* The shared-state sync: its tensors (slot max_ops) and fetch scratch (max_ops + 1). */
        if (n->app.state != APP_SYNCING || a->cmd_id != n->app.pending_cmd ||
            a->scratch_bytes > (uint64_t)SIM_STATE_KEYS * SIM_STATE_BYTES) {
            world_fail(w, SIM_CRASH, "node %u: OP_BEGIN of slot %u for no sync command %llu", node,
                       a->op_slot, (unsigned long long)a->cmd_id);
            return;
        }
        ccoip_exec_slot *o = &n->ops[a->op_slot];
        memset(o, 0, sizeof *o);
        memset(&n->opm[a->op_slot], 0, sizeof n->opm[a->op_slot]);
        o->used = true;
        n->opm[a->op_slot].is_sync = a->op_slot == SIM_MAX_OPS;
        if (a->op_slot == SIM_MAX_OPS) {
            for (uint32_t t = 0; t < SIM_STATE_KEYS; t++) {
                n->st_ptr[t] = n->app.st[t];
                n->st_bytes[t] = t == SIM_STATE_KEYS - 1u ? SIM_STATE_BYTES / 2u : SIM_STATE_BYTES;
            }
            o->tensors = n->st_ptr;
            o->tensor_bytes = n->st_bytes;
            o->ntensors = SIM_STATE_KEYS;
        }
        o->cmd_id = a->cmd_id;
        o->scratch_bytes = a->scratch_bytes;
        o->scratch = calloc(1, (size_t)(a->scratch_bytes + 1u));
        if (o->scratch == NULL) world_fail(w, SIM_CRASH, "out of memory (op)");
        return;
    }
    sim_appcmd *c = app_find_cmd(n, a->cmd_id);
    if (c == NULL) {
        world_fail(w, SIM_CRASH, "node %u: OP_BEGIN for unknown all-reduce command %llu", node,
                   (unsigned long long)a->cmd_id);
        return;
    }
    ccoip_exec_slot *o = &n->ops[a->op_slot];
    memset(o, 0, sizeof *o);
    memset(&n->opm[a->op_slot], 0, sizeof n->opm[a->op_slot]);
    o->used = true;
    o->cmd_id = a->cmd_id;
    o->send = c->sendbuf;
    o->recv = c->recvbuf;
    o->bytes = c->count * w->elem_bytes;
    o->scratch_bytes = a->scratch_bytes;
    o->backup_bytes = a->backup_bytes;
    if (a->scratch_bytes > ((uint64_t)1 << 30) || a->backup_bytes > ((uint64_t)1 << 30)) {
        world_fail(w, SIM_CRASH, "node %u: OP_BEGIN asks for more than 1 GiB", node);
        return;
    }
    o->scratch = calloc(1, (size_t)(a->scratch_bytes + 1u));
    o->backup = calloc(1, (size_t)(a->backup_bytes + 1u));
    if (o->scratch == NULL || o->backup == NULL) world_fail(w, SIM_CRASH, "out of memory (op)");
}

static void opbuf_release(sim_node *n, uint32_t slot)
{
    ccoip_exec_slot *o = &n->ops[slot];
    free(o->scratch);
    free(o->backup);
    memset(o, 0, sizeof *o);
    memset(&n->opm[slot], 0, sizeof n->opm[slot]);
}

static void act_op_end(sim_world *w, uint32_t node, const ccoip_action *a)
{
    sim_node *n = &w->nodes[node];
    if (a->op_slot >= SIM_OP_SLOTS || !n->ops[a->op_slot].used) {
        world_fail(w, SIM_CRASH, "node %u: OP_END on free slot %u", node, a->op_slot);
        return;
    }
    for (uint32_t i = 0; i < n->ios_len;) {
        if (io_at(n, i)->op_slot == a->op_slot && io_at(n, i)->kind == IO_KERNEL) {
            io_remove(n, i);
        } else {
            i++;
        }
    }
    opbuf_release(n, a->op_slot);
}

static void act_run(sim_world *w, uint32_t node, const ccoip_action *a)
{
    sim_node *n = &w->nodes[node];
    switch (a->type) {
    case CCOIP_ACT_SEND:
        act_send(w, node, a);
        break;
    case CCOIP_ACT_WRITE:
        act_write(w, node, a);
        break;
    case CCOIP_ACT_CONNECT:
        act_connect(w, node, a);
        break;
    case CCOIP_ACT_LISTEN:
        if ((uint32_t)a->listener < 3u) {
            n->ports[a->listener] = 40000u + (uint32_t)a->listener;
            if (w->vt->set_port != NULL && !n->is_master) {
                if (n->rec != NULL)
                    rec_set_port(w, n, (uint32_t)a->listener, n->ports[a->listener]);
                w->vt->set_port(n->m, a->listener, n->ports[a->listener]);
            }
        }
        break;
    case CCOIP_ACT_CLOSE: {
        const uint32_t e = ep_lookup(w, node, a->conn);
        if (e == SIM_NONE32 || w->eps[e].state == EP_CLOSED) break;
        w->eps[e].state = EP_CLOSED;
        ios_fail_on_ep(w, node, e);
        ep_close_remote(w, e);
        break;
    }
    case CCOIP_ACT_NOTIFY:
        app_notify(w, node, a);
        break;
    case CCOIP_ACT_RING_SEND:
        act_ring_send(w, node, a);
        break;
    case CCOIP_ACT_RING_RECV:
        act_ring_recv(w, node, a);
        break;
    case CCOIP_ACT_REDUCE:
    case CCOIP_ACT_COPY:
    case CCOIP_ACT_QUANTIZE:
    case CCOIP_ACT_DEQUANTIZE:
    case CCOIP_ACT_FINALIZE:
    case CCOIP_ACT_HASH:
    case CCOIP_ACT_GATHER_REDUCE:
        act_kernel(w, node, a);
        break;
    case CCOIP_ACT_CANCEL:
        act_cancel(w, node, a);
        break;
    case CCOIP_ACT_STATE_SEND:
        act_state_send(w, node, a);
        break;
    case CCOIP_ACT_STATE_RECV:
        act_state_recv(w, node, a);
        break;
    case CCOIP_ACT_PROBE:
        act_probe(w, node, a);
        break;
    case CCOIP_ACT_LOG:
        if (w->cfg.trace) {
            world_log(w, "  log node=%u level=%d %.*s", node, (int)a->level, (int)a->len,
                      a->data != NULL ? (const char *)a->data : "");
        }
        break;
    case CCOIP_ACT_OP_BEGIN:
        act_op_begin(w, node, a);
        break;
    case CCOIP_ACT_OP_END:
        act_op_end(w, node, a);
        break;
    default:
        world_fail(w, SIM_CRASH, "node %u emitted unknown action type %d", node, (int)a->type);
        break;
    }
}

/* ------------------------------------------------------------------------ */
/* Feeding a machine                                                        */
/* ------------------------------------------------------------------------ */

static void trace_event(sim_world *w, uint32_t node, const ccoip_event *ev)
{
    sim_trace *t = &w->trace;
    sim_trace_begin(t);
    sim_trace_u32(t, node);
    sim_trace_u32(t, (uint32_t)ev->type);
    sim_trace_u64(t, ev->now_ns);
    sim_trace_u64(t, ev->conn);
    sim_trace_u8(t, ev->accepted ? 1u : 0u);
    sim_trace_u32(t, ev->listener);
    sim_trace_bytes(t, ev->data, ev->len);
    if (ev->type == CCOIP_EV_SUBMIT) {
        const ccoip_cmd *c = &ev->cmd;
        sim_trace_u32(t, (uint32_t)c->type);
        sim_trace_u64(t, c->cmd_id);
        sim_trace_u64(t, c->allreduce.tag);
        sim_trace_u64(t, c->allreduce.count);
        sim_trace_u32(t, (uint32_t)c->allreduce.dtype);
        sim_trace_u32(t, (uint32_t)c->allreduce.op);
        sim_trace_u32(t, (uint32_t)c->allreduce.quant_algorithm);
        sim_trace_u32(t, (uint32_t)c->allreduce.quant_dtype);
        sim_trace_u8(t, c->allreduce.in_place ? 1u : 0u);
        if (c->type == CCOIP_CMD_SYNC_SHARED_STATE) {
            sim_trace_u64(t, c->sync.revision);
            sim_trace_u32(t, (uint32_t)c->sync.strategy);
            sim_trace_u32(t, c->sync.num_keys);
            for (uint32_t k = 0; k < c->sync.num_keys; k++) {
                const ccoip_state_key *sk = &c->sync.keys[k];
                sim_trace_bytes(t, (const uint8_t *)sk->name, strlen(sk->name));
                sim_trace_u32(t, (uint32_t)sk->dtype);
                sim_trace_u64(t, sk->count);
                sim_trace_u8(t, sk->allow_content_inequality ? 1u : 0u);
            }
        }
    }
    if (ev->type == CCOIP_EV_IO_DONE || ev->type == CCOIP_EV_KERNEL_DONE) {
        sim_trace_u64(t, ev->done.io_id);
        sim_trace_u32(t, (uint32_t)ev->done.result);
        sim_trace_u32(t, (uint32_t)ev->done.quant.algorithm);
        sim_trace_u32(t, (uint32_t)ev->done.quant_out.algorithm);
        sim_trace_u64(t, ev->done.hash);
    }
    if (ev->type == CCOIP_EV_PROBE_DONE) {
        sim_trace_u64(t, ev->done.io_id);
        sim_trace_u32(t, (uint32_t)ev->done.result);
        sim_trace_u64(t, ev->done.probe_bytes);
        sim_trace_u64(t, ev->done.duration_us);
    }
    sim_trace_end(t);
    if (w->cfg.trace) {
        world_log(
            w, "%llu.%06llu node=%u ev=%d conn=%llu len=%llu cmd=%d io=%llu res=%d h=%016llx",
            (unsigned long long)(ev->now_ns / SIM_MS), (unsigned long long)(ev->now_ns % SIM_MS),
            node, (int)ev->type, (unsigned long long)ev->conn, (unsigned long long)ev->len,
            ev->type == CCOIP_EV_SUBMIT ? (int)ev->cmd.type : 0, (unsigned long long)ev->done.io_id,
            (int)ev->done.result, (unsigned long long)t->hash);
    }
}

void world_feed(sim_world *w, uint32_t node, ccoip_event *ev)
{
    if (w->failed || !node_runs(w, node)) return;
    sim_node *n = &w->nodes[node];
    ev->now_ns = w->now;
    trace_event(w, node, ev);
    w->res->events++;
    /* Recording: the EVENT before the step; 'R', every polled action (all of
     * them, even when the node dies or the run fails meanwhile) and 'D' into
     * the state hash; a CHECKPOINT after draining (ccoip_trace.h). */
    const bool rec = n->rec != NULL;
    if (rec) rec_event(w, n, ev);
    const int rc = w->vt->step(n->m, n->is_master, ev);
    if (rec) {
        ccoip_trace_hash_step(&n->rec_hash, rc);
        n->rec_polled = 0;
    }
    if (rc != 0) {
        world_fail(w, SIM_CRASH, "node %u (%s) step(event %d) returned %d", node,
                   n->is_master ? "master" : "peer", (int)ev->type, rc);
        if (!rec) return;
    }
    /* Actions by reference when the machines offer it (no 320-byte copy per action): each is
     * used only until act_run steps this machine again (a re-entrant world_feed, after which
     * no handler reads its action). */
    ccoip_action copy;
    const ccoip_action *act;
    uint32_t guard = 0;
    while (rec || (!w->failed && n->state != NODE_DEAD)) {
        if (w->vt->poll_ref != NULL) {
            act = w->vt->poll_ref(n->m, n->is_master);
            if (act == NULL) break;
        } else {
            if (!w->vt->poll(n->m, n->is_master, &copy)) break;
            act = &copy;
        }
        if (rec) {
            ccoip_trace_hash_action(&n->rec_hash, act);
            n->rec_polled++;
        }
        if (w->failed || n->state == NODE_DEAD) continue;
        if (++guard > 1000000u) {
            world_fail(w, SIM_CRASH, "node %u emitted more than 10^6 actions for one event", node);
            if (!rec) return;
            continue;
        }
        act_run(w, node, act);
    }
    if (rec) {
        ccoip_trace_hash_deadline(&n->rec_hash, w->vt->deadline_ns(n->m, n->is_master));
        rec_checkpoint(w, n);
    }
    node_recount(w, node);
    if (w->failed || n->state == NODE_DEAD) return;
    const uint64_t dl = w->vt->deadline_ns(n->m, n->is_master);
    if (dl != CCOIP_NO_DEADLINE && dl != n->timer_at) {
        n->timer_at = dl;
        n->timer_gen++;
        /* The key an immediate push would get, (max(dl, now), next seq), is reserved, so the
         * timer fires in exactly the same place of the order whether it is pushed now or
         * later; it is pushed now only when earlier than the node's queued entry (a deadline
         * pushed forward, as every heartbeat does, stays where it is), which else re-pushes it
         * when it pops. Fewer stale entries: a smaller heap. */
        n->timer_t = dl < w->now ? w->now : dl;
        n->timer_seq = sim_heap_take_seq(&w->heap);
        if (n->timer_q == CCOIP_NO_DEADLINE || n->timer_t < n->timer_q) timer_push(w, node);
    } else if (dl == CCOIP_NO_DEADLINE) {
        n->timer_at = CCOIP_NO_DEADLINE;
        n->timer_gen++;
    }
}

/* ------------------------------------------------------------------------ */
/* Processes                                                                */
/* ------------------------------------------------------------------------ */

/* Keeps w->live (running peers) and w->undone (running peers that have not
 * finished their steps) in step with node's state: O(1) per change. */
void node_recount(sim_world *w, uint32_t node)
{
    sim_node *n = &w->nodes[node];
    if (n->is_master) return;
    const bool live = n->state == NODE_ALIVE;
    const bool undone =
        live && (!n->app.admitted || n->app.successes_quiet + n->inherited_steps < w->cfg.steps);
    if (live != n->counted_live) {
        w->live += live ? 1u : (uint32_t)-1;
        n->counted_live = live;
    }
    if (undone != n->counted_undone) {
        w->undone += undone ? 1u : (uint32_t)-1;
        n->counted_undone = undone;
    }
}

static uint32_t default_group(const sim_world *w, uint32_t peer_index)
{
    if (w->cfg.group_size == 0) return 0;
    const uint32_t groups = (w->cfg.peers + w->cfg.group_size - 1u) / w->cfg.group_size;
    if (peer_index < w->cfg.peers) return peer_index / w->cfg.group_size;
    return groups > 0 ? peer_index % groups : 0;
}

static uint32_t node_new(sim_world *w, bool is_master, uint32_t host)
{
    if (w->num_nodes >= w->cap_nodes) return SIM_NONE32;
    const uint32_t idx = w->num_nodes++;
    sim_node *n = &w->nodes[idx];
    memset(n, 0, sizeof *n);
    n->is_master = is_master;
    n->host = host;
    w->node_host[idx] = host;
    node_set_state(w, idx, NODE_ALIVE);
    n->timer_at = CCOIP_NO_DEADLINE;
    n->timer_q = CCOIP_NO_DEADLINE;
    n->rng = sim_rng_fork(&w->rng, idx);
    const uint64_t seed = sim_rng_next(&n->rng);
    if (is_master) {
        sim_master_params p = {
            SIM_MASTER_PORT,       w->cfg.heartbeat_ms,
            w->cfg.evict_ms,       w->cfg.vote_timeout_ms,
            w->cfg.max_peers + 1u, (w->cfg.canary & SIM_CANARY_SKIP_ABORT_VERDICT) != 0,
            w->cfg.relay_max_bytes};
        n->m = w->vt->master_create(&p, seed);
        if (w->cfg.record_trace) {
            ccoip_trace_header h;
            if (sim_sm_trace_header(true, &p, NULL, seed, &h)) rec_header(w, n, &h);
        }
    } else {
        sim_peer_params p;
        memset(&p, 0, sizeof p);
        host_ip(0, p.master_ip);
        p.master_port = SIM_MASTER_PORT;
        p.p2p_pool_size = w->cfg.p2p_pool_size;
        p.max_ops = SIM_MAX_OPS;
        p.heartbeat_ms = w->cfg.heartbeat_ms;
        p.evict_ms = w->cfg.evict_ms;
        p.canary_skip_restore = (w->cfg.canary & SIM_CANARY_SKIP_RESTORE) != 0;
        n->peer_index = w->num_peers_created++;
        n->group = w->spawn_group != SIM_NONE32 ? w->spawn_group : default_group(w, n->peer_index);
        p.peer_group = n->group;
        w->node_group[idx] = n->group;
        n->m = w->vt->peer_create(&p, seed);
        if (w->cfg.record_trace) {
            ccoip_trace_header h;
            if (sim_sm_trace_header(false, NULL, &p, seed, &h)) rec_header(w, n, &h);
        }
    }
    if (host < w->host_node_cap) w->host_node[host] = idx;
    w->node_m[idx] = n->m;
    if (n->m == NULL) {
        world_fail(w, SIM_CRASH, "cannot create %s state machine", is_master ? "master" : "peer");
        return SIM_NONE32;
    }
    node_recount(w, idx);
    return idx;
}

static uint32_t new_host(sim_world *w)
{
    sim_host_link l;
    memset(&l, 0, sizeof l);
    l.latency_ns = sim_rng_range(&w->rng, w->cfg.latency_min_ns, w->cfg.latency_max_ns) / 2u;
    l.up_bps = sim_rng_range(&w->rng, w->cfg.bw_min_bps, w->cfg.bw_max_bps);
    l.down_bps = sim_rng_range(&w->rng, w->cfg.bw_min_bps, w->cfg.bw_max_bps);
    l.loss_permille = w->cfg.loss_permille;
    /* Host 0 is the master's: peer hosts 1..8 may have configured rates (a known matrix). */
    const uint32_t k = w->net.num_hosts - 1u;
    if (w->net.num_hosts >= 1u && k < 8u && w->cfg.host_up_bps[k] != 0) {
        l.up_bps = w->cfg.host_up_bps[k];
        l.down_bps = w->cfg.host_down_bps[k] != 0 ? w->cfg.host_down_bps[k] : l.up_bps;
    }
    return sim_net_add_host(&w->net, &l);
}

uint32_t world_spawn_peer(sim_world *w, uint32_t host)
{
    if (w->num_peers_created >= w->cfg.max_peers) return SIM_NONE32;
    if (host == SIM_NONE32) host = new_host(w);
    if (host == SIM_NONE32) return SIM_NONE32;
    const uint32_t node = node_new(w, false, host);
    if (node == SIM_NONE32) return SIM_NONE32;
    w->res->joins++;
    world_push(w, w->now, EVK_START, node, 0, 0);
    return node;
}

void world_kill(sim_world *w, uint32_t node, bool graceful)
{
    sim_node *n = &w->nodes[node];
    if (n->state == NODE_DEAD) return;
    if (!graceful) w->res->crashes++;
    node_set_state(w, node, NODE_DEAD);
    if (w->grave_len == w->grave_cap) {
        const uint32_t ncap = w->grave_cap == 0 ? 64u : 2u * w->grave_cap;
        uint32_t *g = realloc(w->grave, (size_t)ncap * sizeof *g);
        if (g != NULL) {
            w->grave = g;
            w->grave_cap = ncap;
        }
    }
    if (w->grave_len < w->grave_cap) w->grave[w->grave_len++] = node;
    n->died_ns = w->now;
    n->app.state = APP_GONE;
    node_recount(w, node);
    /* The OS closes every socket of the process (in creation order, as a walk over all
     * endpoints would). */
    for (uint32_t e = n->ep_first1 - 1u; n->ep_first1 != 0 && e != SIM_NONE32;
         e = w->eps[e].next_of_node) {
        if (w->eps[e].node == node && w->eps[e].state != EP_CLOSED) {
            w->eps[e].state = EP_CLOSED;
            ep_close_remote(w, e);
        }
    }
}

static uint32_t live_peers(const sim_world *w, bool include_hung)
{
    if (!include_hung) return w->live;
    uint32_t k = 0;
    for (uint32_t i = 1; i < w->num_nodes; i++) {
        if (w->nodes[i].state == NODE_ALIVE || w->nodes[i].state == NODE_HUNG) k++;
    }
    return k;
}

/* Per-step churn (sim_config.churn_per_step_bp): node's process is replaced
 * by a new one in its group that carries on its step count. */
void world_replace_peer(sim_world *w, uint32_t node)
{
    sim_node *n = &w->nodes[node];
    const uint64_t steps = n->app.successes_quiet + n->inherited_steps;
    w->spawn_group = n->group;
    const uint32_t fresh = world_spawn_peer(w, SIM_NONE32);
    w->spawn_group = SIM_NONE32;
    if (fresh == SIM_NONE32) return;
    w->nodes[fresh].inherited_steps = steps;
    world_kill(w, node, false);
    w->res->replaced++;
    fault_noted(w);
}

/* A random peer in the given state (SIM_NONE32 when none). */
static uint32_t pick_peer(sim_world *w, sim_node_state st)
{
    uint32_t k = 0;
    for (uint32_t i = 1; i < w->num_nodes; i++)
        k += w->nodes[i].state == st;
    if (k == 0) return SIM_NONE32;
    uint64_t r = sim_rng_below(&w->rng, k);
    for (uint32_t i = 1; i < w->num_nodes; i++) {
        if (w->nodes[i].state != st) continue;
        if (r-- == 0) return i;
    }
    return SIM_NONE32;
}

static uint32_t node_of_peer(const sim_world *w, uint32_t peer_index)
{
    for (uint32_t i = 1; i < w->num_nodes; i++) {
        if (w->nodes[i].peer_index == peer_index) return i;
    }
    return SIM_NONE32;
}

/* ------------------------------------------------------------------------ */
/* Churn and scripts                                                        */
/* ------------------------------------------------------------------------ */

enum {
    CHURN_JOIN = 1,
    CHURN_LEAVE,
    CHURN_CRASH,
    CHURN_HANG,
    CHURN_RESTART,
    CHURN_PHASE_FAULT,
    CHURN_PARTITION,
    CHURN_CLOG,
    CHURN_KIND_END
};

static uint32_t churn_rate(const sim_config *c, uint32_t kind)
{
    switch (kind) {
    case CHURN_JOIN:
        return c->join_per_min;
    case CHURN_LEAVE:
        return c->leave_per_min;
    case CHURN_CRASH:
        return c->crash_per_min;
    case CHURN_HANG:
        return c->hang_per_min;
    case CHURN_RESTART:
        return c->restart_per_min;
    case CHURN_PHASE_FAULT:
        return c->phase_fault_per_min;
    default:
        return 0;
    }
}

static void churn_schedule_next(sim_world *w, uint32_t kind)
{
    const uint32_t rate = churn_rate(&w->cfg, kind);
    if (rate == 0) return;
    const uint64_t mean = 60u * SIM_SEC / rate;
    const uint64_t t = w->now + 1u + sim_rng_exp(&w->rng, mean);
    if (t < w->cfg.churn_ns) world_push(w, t, EVK_CHURN, 0, kind, 0);
}

static void add_window(sim_world *w, sim_fault_kind kind)
{
    sim_fault f;
    memset(&f, 0, sizeof f);
    f.kind = kind;
    f.from_ns = w->now;
    const uint64_t max_dur = (uint64_t)w->cfg.evict_ms * 2u * SIM_MS;
    f.until_ns = w->now + sim_rng_range(&w->rng, 50u * SIM_MS,
                                        max_dur > 50u * SIM_MS ? max_dur : 100u * SIM_MS);
    if (f.until_ns > w->cfg.churn_ns) f.until_ns = w->cfg.churn_ns;
    const uint32_t a = pick_peer(w, NODE_ALIVE);
    if (a == SIM_NONE32) return;
    fault_net_window(w, f.until_ns);
    if (kind == SIM_FAULT_PARTITION) {
        f.set[f.set_len++] = w->nodes[a].host;
        const uint32_t b = pick_peer(w, NODE_ALIVE);
        if (b != SIM_NONE32 && b != a) f.set[f.set_len++] = w->nodes[b].host;
    } else {
        f.a = w->nodes[a].host;
        const uint32_t b = pick_peer(w, NODE_ALIVE);
        f.b = b == SIM_NONE32 || b == a ? 0u : w->nodes[b].host;
    }
    sim_net_add_fault(&w->net, &f);
}

static void churn_fire(sim_world *w, uint32_t kind)
{
    if (w->quiet) return;
    uint32_t p;
    switch (kind) {
    case CHURN_JOIN:
        world_spawn_peer(w, SIM_NONE32);
        break;
    case CHURN_LEAVE:
        p = pick_peer(w, NODE_ALIVE);
        if (p != SIM_NONE32) {
            w->nodes[p].app.leave_requested = true;
            app_wake(w, p);
            fault_noted(w);
        }
        break;
    case CHURN_CRASH:
        p = pick_peer(w, NODE_ALIVE);
        if (p != SIM_NONE32) {
            world_kill(w, p, false);
            fault_noted(w);
        }
        break;
    case CHURN_HANG:
        p = pick_peer(w, NODE_ALIVE);
        if (p != SIM_NONE32) {
            node_set_state(w, p, NODE_HUNG);
            node_recount(w, p);
            w->res->hangs++;
            fault_noted(w);
        }
        break;
    case CHURN_RESTART:
        p = pick_peer(w, NODE_ALIVE);
        if (p != SIM_NONE32) {
            const uint32_t host = w->nodes[p].host;
            world_kill(w, p, false);
            world_push(w, w->now + sim_rng_range(&w->rng, 100u * SIM_MS, 2u * SIM_SEC), EVK_RESTART,
                       0, host, 0);
            fault_noted(w);
        }
        break;
    case CHURN_PHASE_FAULT: {
        /* The next phase of a random kind: its skip-th recipient hangs or crashes in it. */
        const uint32_t ph = SIM_PH_ADMIT + (uint32_t)sim_rng_below(&w->rng, SIM_PH_END - 1u);
        const bool crash = sim_rng_chance(&w->rng, 500);
        const uint32_t skip = (uint32_t)sim_rng_below(&w->rng, 4);
        fault_arm(w, ph, crash, SIM_NONE32, 0, skip, false);
        break;
    }
    case CHURN_PARTITION:
        add_window(w, SIM_FAULT_PARTITION);
        break;
    case CHURN_CLOG:
        add_window(w, SIM_FAULT_CLOG);
        break;
    default:
        break;
    }
    if (kind < CHURN_PARTITION) churn_schedule_next(w, kind);
}

static void script_fire(sim_world *w, uint32_t i)
{
    const sim_script_event *s = &w->cfg.script[i];
    const uint32_t node = node_of_peer(w, s->peer);
    world_log(w, "script[%u]: kind %d peer %u (node %d)", i, (int)s->kind, s->peer,
              node == SIM_NONE32 ? -1 : (int)node);
    if (s->kind != SIM_SCRIPT_JOIN && s->kind != SIM_SCRIPT_CUT && node == SIM_NONE32) return;
    switch (s->kind) {
    case SIM_SCRIPT_JOIN:
        world_spawn_peer(w, SIM_NONE32);
        break;
    case SIM_SCRIPT_LEAVE:
        w->nodes[node].app.leave_requested = true;
        app_wake(w, node);
        fault_noted(w);
        break;
    case SIM_SCRIPT_CRASH:
        world_kill(w, node, false);
        fault_noted(w);
        break;
    case SIM_SCRIPT_HANG:
        if (w->nodes[node].state == NODE_ALIVE) {
            node_set_state(w, node, NODE_HUNG);
            node_recount(w, node);
            w->res->hangs++;
            fault_noted(w);
        }
        break;
    case SIM_SCRIPT_RESTART: {
        const uint32_t host = w->nodes[node].host;
        world_kill(w, node, false);
        world_push(w, w->now + 500u * SIM_MS, EVK_RESTART, 0, host, 0);
        fault_noted(w);
        break;
    }
    case SIM_SCRIPT_PHASE_FAULT:
        fault_arm(w, (uint32_t)(s->arg & 0xffu), (s->arg & SIM_PHASE_FAULT_CRASH) != 0, node,
                  (uint32_t)((s->arg >> 8) & 0xffu), 0, true);
        break;
    case SIM_SCRIPT_CUT: {
        const uint32_t other = node_of_peer(w, (uint32_t)s->arg);
        if (node == SIM_NONE32 || other == SIM_NONE32) break;
        sim_fault f;
        memset(&f, 0, sizeof f);
        f.kind = SIM_FAULT_CUT;
        f.a = w->nodes[node].host;
        f.b = w->nodes[other].host;
        f.from_ns = w->now;
        f.until_ns = SIM_NET_FOREVER;
        sim_net_add_fault(&w->net, &f);
        break;
    }
    case SIM_SCRIPT_STALL:
        w->nodes[node].app.stall_ns = s->arg;
        break;
    case SIM_SCRIPT_MISMATCH:
        w->nodes[node].app.mismatch_next = true;
        break;
    case SIM_SCRIPT_ROGUE_TAG:
        w->nodes[node].app.rogue_next = true;
        break;
    case SIM_SCRIPT_CRASH_MID_RING:
        w->nodes[node].app.crash_after_sends = s->arg > 0 ? s->arg : 1u;
        break;
    case SIM_SCRIPT_DIVERGE:
        w->nodes[node].app.diverge_next = true;
        break;
    case SIM_SCRIPT_SKIP_REVISION:
        w->nodes[node].app.skip_revision_next = true;
        break;
    case SIM_SCRIPT_CRASH_MID_STATE:
        w->crash_state_after = s->arg > 0 ? s->arg : 1u; /* whoever distributes next */
        break;
    }
}

/* ------------------------------------------------------------------------ */
/* The loop                                                                 */
/* ------------------------------------------------------------------------ */

static void fire(sim_world *w, const sim_ev *ev)
{
    ccoip_event e;
    memset(&e, 0, sizeof e);
    switch ((sim_evk)ev->kind) {
    case EVK_START:
        if (!node_runs(w, ev->node)) break;
        e.type = CCOIP_EV_START;
        world_feed(w, ev->node, &e);
        if (!w->nodes[ev->node].is_master) app_start(w, ev->node);
        break;
    case EVK_DELIVER:
        deliver(w, (uint32_t)ev->a);
        break;
    case EVK_ACCEPT: {
        sim_ep *ep = &w->eps[ev->a];
        if (ep->state != EP_CONNECTING || !node_runs(w, ep->node)) break;
        ep->state = EP_OPEN;
        e.type = CCOIP_EV_CONN_UP;
        e.conn = ep->id;
        e.accepted = true;
        e.listener = ep->listener;
        if (ep->other != SIM_NONE32) {
            host_ip(w->nodes[w->eps[ep->other].node].host, e.remote_ip);
            e.remote_ip_len = 4;
        }
        world_feed(w, ep->node, &e);
        break;
    }
    case EVK_CONN_UP: {
        sim_ep *ep = &w->eps[ev->a];
        if (ep->state != EP_CONNECTING || !node_runs(w, ep->node)) break;
        ep->state = EP_OPEN;
        e.type = CCOIP_EV_CONN_UP;
        e.conn = ep->id;
        world_feed(w, ep->node, &e);
        break;
    }
    case EVK_CONN_FAIL:
    case EVK_CONN_CLOSED: {
        sim_ep *ep = &w->eps[ev->a];
        if (ep->state == EP_CLOSED || !node_runs(w, ep->node)) break;
        ep->state = EP_CLOSED;
        /* The broken stream fails its pending I/O first (ccoip_sm.h), then CONN_CLOSED. */
        ios_fail_on_ep(w, ep->node, (uint32_t)ev->a);
        world_push(w, w->now, EVK_EP_BROKEN, ep->node, ev->a, 0);
        break;
    }
    case EVK_EP_BROKEN: {
        sim_ep *ep = &w->eps[ev->a];
        if (!node_runs(w, ep->node)) break;
        e.type = CCOIP_EV_CONN_CLOSED;
        e.conn = ep->id;
        world_feed(w, ep->node, &e);
        break;
    }
    case EVK_TIMER: {
        sim_node *n = &w->nodes[ev->node];
        if (!node_runs(w, ev->node)) break;
        if (ev->a == n->timer_gen && n->timer_at != CCOIP_NO_DEADLINE) {
            /* The live deadline's own key (it was pushed, so it was the tracked entry). */
            n->timer_q = CCOIP_NO_DEADLINE;
            n->timer_at = CCOIP_NO_DEADLINE;
            e.type = CCOIP_EV_TIMER;
            world_feed(w, ev->node, &e);
        } else if (ev->a == n->timer_qgen && w->now == n->timer_q) {
            /* The tracked entry of a deadline moved since: put the live key in its place. */
            n->timer_q = CCOIP_NO_DEADLINE;
            if (n->timer_at != CCOIP_NO_DEADLINE) timer_push(w, ev->node);
        }
        break;
    }
    case EVK_IO_DONE:
    case EVK_KERNEL: {
        if (!node_runs(w, ev->node)) break;
        sim_node *n = &w->nodes[ev->node];
        uint32_t idx;
        sim_io *io = io_find(n, ev->a, &idx);
        if (io == NULL) break; /* cancelled */
        e.type = ev->kind == EVK_KERNEL ? CCOIP_EV_KERNEL_DONE : CCOIP_EV_IO_DONE;
        e.done.io_id = io->io_id;
        e.done.result = io->result;
        if (ev->kind == EVK_KERNEL) {
            e.done.quant_out = io->quant_out;
            e.done.hash = io->hash;
        } else {
            e.done.quant = io->quant_in;
        }
        io_remove(n, idx);
        world_feed(w, ev->node, &e);
        break;
    }
    case EVK_PROBE: {
        if (!node_runs(w, ev->node)) break;
        sim_node *n = &w->nodes[ev->node];
        uint32_t idx;
        sim_io *io = io_find(n, ev->a, &idx);
        if (io == NULL) break;
        e.type = CCOIP_EV_PROBE_DONE;
        e.done.io_id = io->io_id;
        e.done.result = io->result;
        e.done.probe_bytes = io->probe_bytes;
        e.done.duration_us = io->duration_us;
        io_remove(n, idx);
        world_feed(w, ev->node, &e);
        break;
    }
    case EVK_APP:
        if (node_runs(w, ev->node) && ev->a == w->nodes[ev->node].app.gen) app_wake(w, ev->node);
        break;
    case EVK_SCRIPT:
        script_fire(w, (uint32_t)ev->a);
        break;
    case EVK_FAULT:
        if (ev->node >= w->num_nodes || w->nodes[ev->node].state != NODE_ALIVE) break;
        w->res->phase_faults++;
        if (ev->a != 0) {
            world_kill(w, ev->node, false);
        } else {
            node_set_state(w, ev->node, NODE_HUNG);
            node_recount(w, ev->node);
            w->res->hangs++;
        }
        fault_noted(w);
        break;
    case EVK_FAULT_CHECK:
        fault_check(w, ev->a);
        break;
    case EVK_CHURN:
        churn_fire(w, (uint32_t)ev->a);
        break;
    case EVK_RESTART:
        if (!w->quiet || ev->b == 1u) world_spawn_peer(w, (uint32_t)ev->a);
        break;
    case EVK_PHASE:
        w->quiet = true;
        w->quiet_ns = w->now;
        world_log(w, "phase: churn over at %llu ms, %u live peers",
                  (unsigned long long)(w->now / SIM_MS), live_peers(w, false));
        for (uint32_t i = 1; i < w->num_nodes; i++) {
            w->nodes[i].app.successes_quiet = 0;
            node_recount(w, i);
        }
        /* The network heals: no more loss (fault windows already end with the churn). */
        w->cfg.loss_permille = 0;
        for (uint32_t h = 0; h < w->net.num_hosts; h++)
            w->net.hosts[h].loss_permille = 0;
        break;
    }
}

/* Starts loading what the next event in the queue will read first (its node's record, its
 * frame or endpoint) while the current one runs: the world is far larger than the caches.
 * A hint only: the next event may still change, nothing depends on it. */
static void prefetch_next(const sim_world *w)
{
    const sim_heap_val *v = sim_heap_peek_val(&w->heap);
    if (v == NULL) return;
    const uint32_t kind = (uint32_t)(v->aux & 0xffu);
    const uint32_t node = (uint32_t)(v->aux >> 32);
    if (kind == EVK_DELIVER) {
        const uint32_t f = (uint32_t)v->payload, e = (uint32_t)(v->payload >> 32);
        if (f < w->frames_len) __builtin_prefetch(&w->frames[f]);
        if (e < w->eps_len) __builtin_prefetch(&w->eps[e]);
        if (node < w->num_nodes) __builtin_prefetch(&w->nodes[node]);
    } else if (kind >= EVK_ACCEPT && kind <= EVK_CONN_CLOSED) {
        if (v->payload < w->eps_len) __builtin_prefetch(&w->eps[v->payload]);
        if (node < w->num_nodes) __builtin_prefetch(&w->nodes[node]);
    } else if (node < w->num_nodes) {
        __builtin_prefetch(&w->nodes[node]);
    }
    /* The machine's own memory (through the compact pointer array: no wait on the record). */
    if (w->vt->prefetch != NULL && node < w->num_nodes && w->node_m[node] != NULL) {
        w->vt->prefetch(w->node_m[node], node == 0, 0);
    }
}

/* Liveness phase: a supervisor keeps at least two peers running. */
static void supervise(sim_world *w)
{
    if (!w->quiet) return;
    uint32_t live = live_peers(w, false);
    while (live < 2u && w->num_peers_created < w->cfg.max_peers) {
        if (world_spawn_peer(w, SIM_NONE32) == SIM_NONE32) break;
        live++;
    }
}

/* Liveness phase, peer groups: a peer left alone in its group (the others crashed or never got
 * in) can never complete a collective (TOO_FEW_PEERS) however long it runs. When one is still
 * short of its steps 5 s after churn stopped, the supervisor starts a partner in its group, as
 * an operator would. Checked with the progress checker (every 100 ms simulated). */
static void supervise_groups(sim_world *w)
{
    if (w->now < w->quiet_ns + 5u * SIM_SEC || w->undone == 0) return;
    const uint32_t groups = w->num_nodes + 1u;
    if (groups > w->sup_cap) {
        /* Reused between checks; lone[g] is read only where cnt[g] says it was written. */
        free(w->sup_cnt);
        free(w->sup_lone);
        w->sup_cnt = malloc((size_t)groups * sizeof *w->sup_cnt);
        w->sup_lone = malloc((size_t)groups * sizeof *w->sup_lone);
        if (w->sup_cnt == NULL || w->sup_lone == NULL) {
            free(w->sup_cnt);
            free(w->sup_lone);
            w->sup_cnt = w->sup_lone = NULL;
            w->sup_cap = 0;
            return;
        }
        w->sup_cap = groups;
    }
    uint32_t *cnt = w->sup_cnt;
    uint32_t *lone = w->sup_lone;
    memset(cnt, 0, (size_t)groups * sizeof *cnt);
    /* The byte states and the group array: no walk over the nodes' records. */
    for (uint32_t i = 1; i < w->num_nodes; i++) {
        const uint32_t g = w->node_group[i];
        if (w->node_st[i] == (uint8_t)NODE_ALIVE && g <= w->num_nodes) {
            cnt[g]++;
            lone[g] = i;
        }
    }
    for (uint32_t g = 0; g < groups && w->num_peers_created < w->cfg.max_peers; g++) {
        if (cnt[g] != 1u || !w->nodes[lone[g]].counted_undone) continue;
        world_log(w, "supervisor: peer %u is alone in group %u: starting a partner",
                  w->nodes[lone[g]].peer_index, g);
        w->spawn_group = g;
        (void)world_spawn_peer(w, SIM_NONE32);
        w->spawn_group = SIM_NONE32;
    }
}

static bool all_done(const sim_world *w)
{
    return w->quiet && w->undone == 0 && w->live >= 2u;
}

/* Frees a node's state machine and buffers (idempotent). */
static void node_release(sim_world *w, uint32_t i)
{
    sim_node *n = &w->nodes[i];
    if (n->m != NULL) w->vt->destroy(n->m, n->is_master);
    n->m = NULL;
    w->node_m[i] = NULL;
    for (uint32_t s = 0; s < SIM_OP_SLOTS; s++)
        opbuf_release(n, s);
    free(n->ios);
    free(n->io_pool);
    free(n->io_free);
    n->ios = NULL;
    n->io_pool = NULL;
    n->io_free = NULL;
    n->ios_len = n->ios_cap = n->io_free_len = 0;
    for (uint32_t c = 0; c < SIM_MAX_TAGS; c++) {
        sim_appcmd *ac = &n->app.cmds[c];
        free(ac->input);
        if (ac->sendbuf != ac->input) free(ac->sendbuf);
        if (ac->recvbuf != ac->sendbuf) free(ac->recvbuf);
        if (ac->pre != ac->input) free(ac->pre);
        ac->input = ac->sendbuf = ac->recvbuf = ac->pre = NULL;
    }
}

/* Dead processes never run again: their memory goes back between events (not inside
 * world_kill, which may run inside the dying node's own step), unless the node records a
 * trace. A 10,000-peer run replaces about as many processes as it starts. */
static void bury_dead(sim_world *w)
{
    for (uint32_t k = 0; k < w->grave_len; k++) {
        const uint32_t i = w->grave[k];
        if (w->nodes[i].rec != NULL) continue;
        node_release(w, i);
        /* Frames its closed connections still hold are never delivered. */
        const sim_node *n = &w->nodes[i];
        for (uint32_t e = n->ep_first1 - 1u; n->ep_first1 != 0 && e != SIM_NONE32;
             e = w->eps[e].next_of_node) {
            sim_ep *ep = &w->eps[e];
            if (ep->node != i) continue;
            for (uint32_t j = 0; j < ep->inbox_len; j++)
                frame_free(w, ep->inbox[j]);
            free(ep->inbox);
            ep->inbox = NULL;
            ep->inbox_len = ep->inbox_cap = 0;
        }
    }
    w->grave_len = 0;
}

static void world_free(sim_world *w)
{
    for (uint32_t i = 0; i < w->num_nodes; i++)
        node_release(w, i);
    free(w->grave);
    for (uint32_t f = 0; f < w->frames_len; f++)
        free(w->frames[f].bytes);
    for (uint32_t e = 0; e < w->eps_len; e++)
        free(w->eps[e].inbox);
    for (uint32_t i = 0; i < w->num_nodes; i++) {
        free(w->nodes[i].rec);
        for (uint32_t t = 0; t < SIM_MAX_TAGS; t++)
            free(w->nodes[i].relay_in[t]);
    }
    free(w->host_node);
    free(w->syncrecs);
    check_free(w);
    free(w->frames);
    free(w->frame_free);
    free(w->eps);
    free(w->ep_map);
    free(w->acc_tab);
    free(w->nodes_mem);
    free(w->node_st);
    free(w->node_group);
    free(w->node_host);
    free(w->node_m);
    free(w->sup_cnt);
    free(w->sup_lone);
    sim_heap_deinit(&w->heap);
    sim_net_deinit(&w->net);
}

sim_status sim_run(const sim_config *cfg, sim_result *out)
{
    memset(out, 0, sizeof *out);
    const sim_sm_vt *vt = cfg->vt != NULL ? cfg->vt : sim_sm_core();
    if (vt == NULL) {
        out->status = SIM_UNAVAILABLE;
        snprintf(out->message, sizeof out->message,
                 "this build has no state machines to drive (core/ccoip_master.h, "
                 "core/ccoip_peer.h)");
        return out->status;
    }
    if (!ccoip_dtype_valid(cfg->dtype) || cfg->peers == 0 || cfg->tags == 0 ||
        cfg->tags > SIM_MAX_TAGS || cfg->p2p_pool_size > 8u /* CCOIP_P2P_POOL_MAX */) {
        out->status = SIM_CRASH;
        snprintf(out->message, sizeof out->message, "invalid configuration");
        return out->status;
    }
    sim_world *w = calloc(1, sizeof *w);
    if (w == NULL) {
        out->status = SIM_CRASH;
        return out->status;
    }
    w->cfg = *cfg;
    if (w->cfg.max_peers < w->cfg.peers) w->cfg.max_peers = w->cfg.peers;
    w->vt = vt;
    w->res = out;
    w->lossy = cfg->loss_permille > 0;
    sim_rng_seed(&w->rng, cfg->seed);
    w->net_rng = sim_rng_fork(&w->rng, 0x6e6574u);
    sim_trace_init(&w->trace);
    w->elem_bytes = ccoip_dtype_size(cfg->dtype);
    w->cap_nodes = w->cfg.max_peers + 1u;
    /* 64-byte aligned records (sim_node's hot lines), zeroed lazily by the system. */
    w->nodes_mem = calloc((size_t)w->cap_nodes * sizeof *w->nodes + 64u, 1);
    w->nodes = w->nodes_mem == NULL
                   ? NULL
                   : (sim_node *)(void *)(((uintptr_t)w->nodes_mem + 63u) & ~(uintptr_t)63u);
    w->node_st = calloc(w->cap_nodes, 1);
    w->node_group = calloc(w->cap_nodes, sizeof *w->node_group);
    w->node_host = calloc(w->cap_nodes, sizeof *w->node_host);
    w->node_m = calloc(w->cap_nodes, sizeof *w->node_m);
    w->eps_cap = 256;
    w->eps = aligned_alloc(64, w->eps_cap * sizeof *w->eps);
    w->ep_map_cap = 1024;
    w->ep_map = malloc((size_t)w->ep_map_cap * sizeof *w->ep_map);
    w->frames_cap = 1024;
    w->frames = aligned_alloc(64, w->frames_cap * sizeof *w->frames);
    w->frame_free = malloc(w->frames_cap * sizeof *w->frame_free);
    w->next_accept_id = CCOIP_CONN_ACCEPTED_BASE + 1u;
    w->spawn_group = SIM_NONE32;
    w->host_node_cap = w->cap_nodes + 2u;
    w->host_node = malloc((size_t)w->host_node_cap * sizeof *w->host_node);
    if (w->host_node != NULL)
        memset(w->host_node, 0xff, (size_t)w->host_node_cap * sizeof *w->host_node);
    const bool ok = w->host_node != NULL && w->nodes != NULL && w->node_st != NULL &&
                    w->node_group != NULL && w->node_host != NULL && w->node_m != NULL &&
                    w->eps != NULL && w->ep_map != NULL && w->frames != NULL &&
                    w->frame_free != NULL && sim_heap_init(&w->heap, 1u << 24) &&
                    sim_net_init(&w->net, w->cap_nodes + 1u, 1024u);
    if (!ok) {
        world_fail(w, SIM_CRASH, "out of memory at start");
    } else {
        memset(w->ep_map, 0xff, (size_t)w->ep_map_cap * sizeof *w->ep_map);
        /* The master's host: a well-connected machine. */
        sim_host_link ml = {w->cfg.latency_min_ns / 2u, w->cfg.bw_max_bps, w->cfg.bw_max_bps, 0, 0};
        sim_net_add_host(&w->net, &ml);
        const uint32_t master = node_new(w, true, 0);
        if (master != SIM_NONE32) world_push(w, 0, EVK_START, master, 0, 0);
        for (uint32_t i = 0; i < w->cfg.peers && !w->failed; i++) {
            /* Staggered starts: processes do not all come up at once. */
            const uint32_t node = world_spawn_peer(w, SIM_NONE32);
            (void)node;
        }
        for (uint32_t k = CHURN_JOIN; k < CHURN_PARTITION; k++)
            churn_schedule_next(w, k);
        for (uint32_t i = 0; i < w->cfg.partitions; i++) {
            world_push(w, sim_rng_below(&w->rng, w->cfg.churn_ns + 1u), EVK_CHURN, 0,
                       CHURN_PARTITION, 0);
        }
        for (uint32_t i = 0; i < w->cfg.clogs; i++) {
            world_push(w, sim_rng_below(&w->rng, w->cfg.churn_ns + 1u), EVK_CHURN, 0, CHURN_CLOG,
                       0);
        }
        for (uint32_t i = 0; i < w->cfg.script_len; i++) {
            world_push(w, w->cfg.script[i].time_ns, EVK_SCRIPT, 0, i, 0);
        }
        world_push(w, w->cfg.churn_ns, EVK_PHASE, 0, 0, 0);
    }

    const uint64_t deadline = w->cfg.churn_ns + w->cfg.liveness_bound_ns;
    sim_heap_item it;
    uint64_t aux;
    while (!w->failed && !w->done) {
        if (!sim_heap_pop2(&w->heap, &it, &aux)) {
            world_fail(w, SIM_LIVENESS, "no more events but the run is not done");
            break;
        }
        if (it.time_ns > deadline) {
            w->now = deadline;
            world_fail(w, SIM_LIVENESS, "not done %llu ms after churn stopped",
                       (unsigned long long)(w->cfg.liveness_bound_ns / SIM_MS));
            break;
        }
        w->now = it.time_ns;
        const sim_ev ev = {(uint32_t)(aux & 0xffu), (uint32_t)(aux >> 32), it.payload,
                           (aux >> 8) & 0xffffffu};
        if (w->vt->prefetch != NULL && ev.node < w->num_nodes && w->node_m[ev.node] != NULL) {
            w->vt->prefetch(w->node_m[ev.node], ev.node == 0, 1);
        }
        prefetch_next(w);
        fire(w, &ev);
        if (w->grave_len > 0) bury_dead(w);
        if (w->res->events > w->cfg.max_events) {
            world_fail(w, SIM_LIVENESS, "more than %llu events",
                       (unsigned long long)w->cfg.max_events);
        }
        supervise(w);
        if (w->quiet && w->now >= w->next_progress_ns) {
            supervise_groups(w);
            check_progress(w);
            w->next_progress_ns = w->now + 100u * SIM_MS;
        }
        if (!w->failed && all_done(w)) w->done = true;
    }
    if (!w->failed) check_final(w);
    rec_finish(w);
    if (w->failed) {
        /* Say who was stuck: a liveness report names what did not finish. */
        for (uint32_t i = 1; i < w->num_nodes && out->status == SIM_LIVENESS; i++) {
            const sim_node *n = &w->nodes[i];
            if (n->state != NODE_ALIVE) continue;
            world_log(w,
                      "  peer %u (node %u, id %llu): app state %d iter %llu admitted %d "
                      "successes %llu (after churn %llu) outstanding %u",
                      n->peer_index, i, (unsigned long long)n->peer_id, (int)n->app.state,
                      (unsigned long long)n->app.iter, (int)n->app.admitted,
                      (unsigned long long)n->app.successes,
                      (unsigned long long)n->app.successes_quiet, n->app.outstanding);
        }
    }
    out->trace_hash = w->trace.hash;
    out->end_ns = w->now;
    out->net_frames = w->net.frames;
    out->net_bytes = w->net.bytes;
    out->live_peers_end = live_peers(w, false);
    if (!w->failed) out->status = SIM_OK;
    const sim_status st = out->status;
    world_free(w);
    free(w);
    return st;
}
