/*
 * sim_act.c — the actions of core/ccoip_sm.h other than connections
 * (sim_conn.c): pending I/O records, spans through the core's executor,
 * kernels on real buffers, ring and state sends and receives, PROBE on the
 * virtual network, CANCEL, OP_BEGIN / OP_END, and the dispatch of every
 * action (act_run; NOTIFY goes to the observers).
 */
#include <stdlib.h>
#include <string.h>

#include "ccoip_probe.h"
#include "sim_world_int.h"

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

uint8_t *span_ptr(sim_world *w, uint32_t node, const ccoip_span_ref *s)
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

/* The master's control frame to dst: decoded once for the observers, then the phase faults. */
static void m2p_sent(sim_world *w, uint32_t dst, const uint8_t *frame, uint64_t len)
{
    ccoip_pb_master_to_peer m;
    if (!world_decode_m2p(w, frame, len, &m)) {
        world_fail(w, SIM_CRASH, "the master sent a frame the codec rejects (to node %u)", dst);
        return;
    }
    SIM_OBS_EACH(w, o)
    {
        if (o->m2p_sent != NULL) o->m2p_sent(o->ctx, dst, &m);
    }
    fault_on_m2p(w, dst, &m);
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
    if (w->nodes[node].is_master) m2p_sent(w, w->eps[w->eps[e].other].node, a->data, a->len);
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
        SIM_OBS_EACH(w, o)
        {
            if (o->relay_initiate == NULL) continue;
            o->relay_initiate(o->ctx, node, w->frames[f].bytes, a->len + a->src.length, tail,
                              a->src.length);
        }
    }
    frame_send(w, e, f);
}

/* v9: the master's relayed result into the op's span, at once. */
static void act_write(sim_world *w, uint32_t node, const ccoip_action *a)
{
    const ccoip_exec x = node_exec(&w->nodes[node]);
    const char *why = "";
    if (ccoip_exec_write(&x, a, &why) != pcclSuccess) {
        world_fail(w, SIM_CRASH, "node %u: WRITE of %llu bytes (span length %llu): %s", node,
                   (unsigned long long)a->len, (unsigned long long)a->dst.length, why);
        return;
    }
    /* Canary (docs/simulator.md): the first relayed result lands with one bit flipped; the
     * checkers must catch it (the all-reduce's reference, or the collective set's). */
    if ((w->cfg.canary & SIM_CANARY_CORRUPT_RELAY) && w->corrupt_done == 0 && a->len > 0) {
        uint8_t *p = span_ptr(w, node, &a->dst);
        if (p == NULL) return;
        p[0] ^= 1u;
        w->corrupt_done = 1;
    }
}

/* The first ring action of an op slot binds its (epoch, tag, seq) (what a CANCEL cancels) and
 * tells the observers; every later one must carry the same. */
static void op_key(sim_world *w, uint32_t node, const ccoip_action *a)
{
    sim_opmeta *o = &w->nodes[node].opm[a->op_slot];
    if (!o->bound) {
        o->bound = true;
        o->epoch = a->epoch;
        o->tag = a->tag;
        o->seq = a->seq;
        obs_op_bound(w, node, a);
        return;
    }
    if (o->epoch != a->epoch || o->seq != a->seq || o->tag != a->tag) {
        world_fail(w, SIM_CORRECTNESS,
                   "node %u: op slot %u mixes (epoch %llu, seq %llu) and (epoch %llu, seq %llu)",
                   node, a->op_slot, (unsigned long long)o->epoch, (unsigned long long)o->seq,
                   (unsigned long long)a->epoch, (unsigned long long)a->seq);
    }
}

/* The open endpoint a send (RING_SEND, STATE_SEND) goes out on; SIM_NONE32 when the connection
 * is gone (its record, if any, then fails at once). */
static uint32_t send_ep(sim_world *w, uint32_t node, sim_io *io, const ccoip_action *a)
{
    const uint32_t e = ep_lookup(w, node, a->conn);
    if (io != NULL) io_set_ep(&w->nodes[node], io, e);
    if (e == SIM_NONE32 || w->eps[e].state != EP_OPEN || w->eps[e].other == SIM_NONE32 ||
        w->eps[e].torn) {
        if (io != NULL) io_fail_now(w, node, io, pcclRankConnectionLost);
        return SIM_NONE32;
    }
    return e;
}

/* A data frame of the bytes at src: a ring chunk (epoch, tag, seq, chunk, step, quantization)
 * or a STATE_DATA frame (tag, seq, chunk). */
static uint32_t data_frame(sim_world *w, const ccoip_action *a, const uint8_t *src, bool is_state)
{
    const uint32_t f = frame_new(w, a->src.length);
    if (f == SIM_NONE32) return SIM_NONE32;
    sim_frame *fr = &w->frames[f];
    fr->is_data = true;
    fr->is_state = is_state;
    if (a->src.length > 0) memcpy(fr->bytes, src, (size_t)a->src.length);
    fr->tag = a->tag;
    fr->seq = a->seq;
    fr->chunk = a->chunk;
    if (!is_state) {
        fr->epoch = a->epoch;
        fr->step = a->step;
        fr->quant = a->quant;
    }
    return f;
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
    op_key(w, node, a);
    const uint32_t e = send_ep(w, node, io, a);
    if (e == SIM_NONE32) return;
    const uint32_t f = data_frame(w, a, src, false);
    if (f == SIM_NONE32) return;
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
    if (n->crash_after_sends > 0 && --n->crash_after_sends == 0) {
        world_log(w, "script: node %u crashes mid-ring", node);
        world_kill(w, node, false);
    }
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
    const uint32_t e = send_ep(w, node, io, a);
    if (e == SIM_NONE32) return;
    const uint32_t f = data_frame(w, a, src, true);
    if (f == SIM_NONE32) return;
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

/* RING_RECV (ring) or STATE_RECV: posted on its connection, which lands a held frame at once. */
static void act_recv(sim_world *w, uint32_t node, const ccoip_action *a, bool ring)
{
    sim_node *n = &w->nodes[node];
    sim_io *io = io_add(w, n, a->io_id, IO_RECV, a);
    if (io == NULL) return;
    if (span_ptr(w, node, &a->dst) == NULL) return;
    if (ring) op_key(w, node, a);
    const uint32_t e = ep_lookup(w, node, a->conn);
    io_set_ep(n, io, e);
    if (e == SIM_NONE32 || w->eps[e].state == EP_CLOSED || w->eps[e].torn) {
        io_fail_now(w, node, io, pcclRankConnectionLost);
        return;
    }
    if (ring && a->epoch > w->eps[e].max_recv_epoch) w->eps[e].max_recv_epoch = a->epoch;
    ep_pump(w, e);
}

uint64_t world_probe_us(const sim_world *w, uint32_t ha, uint32_t hb, uint64_t want,
                        uint64_t *bytes_out)
{
    /* Connect (one round trip), the bytes at the link's rate, the close back. */
    const uint64_t rtt = sim_net_latency(&w->net, ha, hb) + sim_net_latency(&w->net, hb, ha);
    uint64_t bw = sim_net_rate(&w->net, ha, hb);
    if (bw == 0) bw = 1;
    uint64_t bytes = want;
    if (w->cfg.probe_timed) {
        /* The TCP runtime's prober (transport/pt_probe.c): the slices (1 MiB) it starts
         * within its window (core/ccoip_probe.h), the window from the round trip. */
        const uint64_t slice = (uint64_t)1 << 20;
        const uint64_t win_ms = ccoip_probe_window_ns(rtt) / 1000000u;
        const uint64_t in_win = bw / 1000u * win_ms + bw % 1000u * win_ms / 1000u;
        const uint64_t started = (in_win / slice + 1u) * slice;
        if (started < bytes) bytes = started;
    }
    if (bytes_out != NULL) *bytes_out = bytes;
    const uint64_t xfer_us = bytes / bw * 1000000u + (bytes % bw) * 1000000u / bw;
    return (2u * rtt) / 1000u + xfer_us;
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
    io->duration_us =
        (w->cfg.canary & SIM_CANARY_SWAP_PROBE)
            ? world_probe_us(w, w->nodes[target].host, ha, a->count, &io->probe_bytes)
            : world_probe_us(w, ha, w->nodes[target].host, a->count, &io->probe_bytes);
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
    /* The application's regions, from the observer that owns the command: a collective's
     * buffers, or the shared-state sync's tensors (slot max_ops; max_ops + 1 is its fetch
     * scratch, no application memory). */
    ccoip_exec_slot o;
    memset(&o, 0, sizeof o);
    if (!obs_bind_op(w, node, a, &o)) {
        if (a->op_slot >= SIM_MAX_OPS) {
            world_fail(w, SIM_CRASH, "node %u: OP_BEGIN of slot %u for no sync command %llu", node,
                       a->op_slot, (unsigned long long)a->cmd_id);
        } else {
            world_fail(w, SIM_CRASH, "node %u: OP_BEGIN for unknown all-reduce command %llu", node,
                       (unsigned long long)a->cmd_id);
        }
        return;
    }
    memset(&n->opm[a->op_slot], 0, sizeof n->opm[a->op_slot]);
    o.used = true;
    o.cmd_id = a->cmd_id;
    o.scratch_bytes = a->scratch_bytes;
    const bool sync = a->op_slot >= SIM_MAX_OPS;
    o.backup_bytes = sync ? 0 : a->backup_bytes;
    n->ops[a->op_slot] = o;
    if (a->scratch_bytes > ((uint64_t)1 << 30) || o.backup_bytes > ((uint64_t)1 << 30)) {
        world_fail(w, SIM_CRASH, "node %u: OP_BEGIN asks for more than 1 GiB", node);
        return;
    }
    ccoip_exec_slot *s = &n->ops[a->op_slot];
    s->scratch = calloc(1, (size_t)(a->scratch_bytes + 1u));
    if (!sync) s->backup = calloc(1, (size_t)(a->backup_bytes + 1u));
    if (s->scratch == NULL || (!sync && s->backup == NULL)) {
        world_fail(w, SIM_CRASH, "out of memory (op)");
        return;
    }
    obs_op_begin(w, node, a);
}

void opbuf_release(sim_node *n, uint32_t slot)
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
    w->flip_node = node; /* SIM_CANARY_FLIP_VERDICT: the NOTIFY that follows is an op's */
    w->flip_cmd = n->ops[a->op_slot].cmd_id;
    w->flip_slot = a->op_slot;
    opbuf_release(n, a->op_slot);
}

void act_run(sim_world *w, uint32_t node, const ccoip_action *a)
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
    case CCOIP_ACT_CLOSE:
        act_close(w, node, a);
        break;
    case CCOIP_ACT_NOTIFY:
        if ((w->cfg.canary & SIM_CANARY_FLIP_VERDICT) && w->cfg.coll_kind != 0 &&
            !w->nodes[node].is_master && w->flip_done == 0 && a->result == pcclSuccess &&
            w->flip_node == node && w->flip_cmd == a->cmd_id) {
            /* Canary (docs/simulator.md): one member reports a failure for an op that
             * succeeded (an op's NOTIFY follows its OP_END). */
            ccoip_action flipped = *a;
            flipped.result = pcclRankConnectionLost;
            w->flip_done = 1;
            obs_notify(w, node, &flipped);
            break;
        }
        if ((w->cfg.canary & SIM_CANARY_SHORT_P2P) && w->cfg.coll_kind == SIM_KIND_P2P &&
            !w->nodes[node].is_master && w->flip_done == 0 && a->result == pcclSuccess &&
            w->flip_node == node && w->flip_cmd == a->cmd_id && w->flip_slot < SIM_MAX_OPS &&
            (a->rx_bytes > 0 || a->tx_bytes > 0)) {
            /* Canary (docs/simulator.md): a send / recv reports one byte fewer than it moved. */
            ccoip_action shorted = *a;
            if (shorted.rx_bytes > 0) {
                shorted.rx_bytes--;
            } else {
                shorted.tx_bytes--;
            }
            w->flip_done = 1;
            obs_notify(w, node, &shorted);
            break;
        }
        obs_notify(w, node, a);
        break;
    case CCOIP_ACT_RING_SEND:
        act_ring_send(w, node, a);
        break;
    case CCOIP_ACT_RING_RECV:
        act_recv(w, node, a, true);
        break;
    case CCOIP_ACT_CANCEL:
        act_cancel(w, node, a);
        break;
    case CCOIP_ACT_STATE_SEND:
        act_state_send(w, node, a);
        break;
    case CCOIP_ACT_STATE_RECV:
        act_recv(w, node, a, false);
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
        if (ccoip_kernel_action(a->type)) {
            act_kernel(w, node, a);
        } else {
            world_fail(w, SIM_CRASH, "node %u emitted unknown action type %d", node, (int)a->type);
        }
        break;
    }
}
