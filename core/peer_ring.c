/*
 * peer_ring.c — the data movement of one ring all-reduce on an op slot
 * (docs/protocol.md §8.2; docs/semantics.md §5; docs/core.md §3.4): the
 * reduce-scatter and all-gather steps as RING_SEND/RING_RECV and kernel
 * actions (striped, quantized, zero-copy, premultiplied), the small
 * all-reduce's gather, and the completions that pace them. The op's life
 * around it (submit, commence, verdict, abort, restore) is peer_op.c's; the
 * other kinds' data movement peer_coll.c's.
 */
#include <string.h>

#include "ccoip_coll.h"
#include "ccoip_dtype.h"
#include "ccoip_quant.h"
#include "ccoip_reduce.h"
#include "peer_internal.h"

static bool ring_quantized(const p_op *o)
{
    return o->a.quant_algorithm != pcclQuantNone;
}

static bool ring_gather(const p_op *o);

/* An out-of-place, unquantized ring over two or more peers copies nothing (ccoip_sm.h v6): the
 * reduce-scatter reads its own contribution from SEND (the first send, and the base of every
 * reduction: each chunk is reduced into RECV exactly once) and the all-gather fills the rest. */
static bool ring_zero_copy(const p_op *o)
{
    return !o->a.in_place && !ring_quantized(o) && o->world > 1 && !ring_gather(o) &&
           !p_hd_active(o) && o->a.op != pcclPremulSum;
}

/* PREMUL_SUM (v12): this member's input times its own factor, into RECV (in place: after the
 * backup); the reductions that follow are pcclSum's. */
static void ring_premul(ccoip_peer *p, uint32_t i, ccoip_region from, p_op_sub sub)
{
    p_op *o = &p->ops[i];
    const uint64_t bytes = o->a.count * o->esize;
    ccoip_action *a = p_ring_kernel(p, i, CCOIP_ACT_SCALE, sub);
    if (a == NULL) return;
    a->src = p_ring_span(i, from, 0, bytes);
    a->dst = p_ring_span(i, CCOIP_REGION_RECV, 0, bytes);
    a->count = o->a.count;
    a->scale = o->a.premul;
}

/* The base of the reduce-scatter's reduction of the chunk at elements [off, off + count). */
static ccoip_span_ref ring_rs_base(const p_op *o, uint32_t i, uint64_t off, uint64_t count)
{
    ccoip_span_ref none = {0};
    if (!ring_zero_copy(o)) return none;
    return p_ring_span(i, CCOIP_REGION_SEND, off * o->esize, count * o->esize);
}

/* The stripes of a step moving count elements over a pool of `pool` connections
 * (ccoip_ring_stripes; 1: not striped). The quantized and the small all-reduce never stripe. */
static uint32_t ring_stripes(const p_op *o, uint64_t count, uint32_t pool)
{
    if (ring_quantized(o) || ring_gather(o) || o->algo == CCOIP_ALGO_RING || p_hd_active(o))
        return 1u;
    return ccoip_ring_stripes(count * o->esize, pool);
}

static ccoip_span_ref span_part(ccoip_span_ref r, uint64_t off, uint64_t len)
{
    r.offset += off;
    r.length = len;
    return r;
}

/* One ring step's I/O: a RING_SEND and a RING_RECV per stripe (docs/protocol.md §8.2), stripe
 * j on pool connection j (one stripe: the op's connection). announce: the reduce-scatter's
 * RING_RECVs announce their REDUCE (contract v5, v6: a driver may fuse it). sub == POS_SG_IO
 * (the small all-reduce): the send is quiet (io_id 0, no IO_DONE, contract v8): the next step
 * forwards the input just received from another slot, so only the receive paces the step, and
 * the op's success (every member received every input) implies every send was delivered. */
static void ring_io(ccoip_peer *p, uint32_t i, const ccoip_ring_step *st, ccoip_span_ref src,
                    const ccoip_quant_meta *meta, ccoip_span_ref dst, p_op_sub sub, bool announce)
{
    p_op *o = &p->ops[i];
    o->sub = sub;
    const uint32_t ntx = sub == POS_SG_IO ? 1u : ring_stripes(o, st->send.count, o->ptx);
    const uint32_t nrx = sub == POS_SG_IO ? 1u : ring_stripes(o, st->recv.count, o->prx);
    o->io_send = sub == POS_SG_IO ? 0 : p->next_io;
    p->next_io += o->io_send != 0 ? ntx : 0u;
    o->send_left = o->io_send != 0 ? (1u << ntx) - 1u : 0u;
    o->io_recv = p->next_io;
    p->next_io += nrx;
    o->recv_left = (1u << nrx) - 1u;
    for (uint32_t j = 0; j < ntx; j++) {
        const ccoip_span c = ccoip_ring_chunk(st->send.count, ntx, j);
        ccoip_action *s =
            p_ring_io_push(p, i, CCOIP_ACT_RING_SEND, o->io_send != 0 ? o->io_send + j : 0,
                           ntx == 1u ? o->tx_conn : o->stx[j], st->send_chunk);
        if (s == NULL) return; /* overflow: the step fails */
        s->src = ntx == 1u ? src : span_part(src, c.offset * o->wsize, c.count * o->wsize);
        if (meta != NULL) s->quant = *meta;
    }
    for (uint32_t j = 0; j < nrx; j++) {
        const ccoip_span c = ccoip_ring_chunk(st->recv.count, nrx, j);
        ccoip_action *r = p_ring_io_push(p, i, CCOIP_ACT_RING_RECV, o->io_recv + j,
                                         nrx == 1u ? o->rx_conn : o->srx[j], st->recv_chunk);
        if (r == NULL) return;
        r->dst = nrx == 1u ? dst : span_part(dst, c.offset * o->wsize, c.count * o->wsize);
        if (announce) {
            /* The REDUCE ring_after_io will ask for (contract v5, v6): a driver may fuse it. */
            const uint64_t at = st->recv.offset + c.offset;
            r->reduce = true;
            r->red_op = o->a.op;
            r->count = c.count;
            r->src = p_ring_span(i, CCOIP_REGION_RECV, at * o->esize, c.count * o->esize);
            r->base = ring_rs_base(o, i, at, c.count);
        }
    }
    o->tx_bytes += src.length;
    o->rx_bytes += dst.length;
}

/* The direct all-reduce (CCOIP_ALGO_DIRECT: an all-gather of whole inputs, reduced in rank
 * order; the rule picks it for small ones, ccoip_ring_use_gather). */
static bool ring_gather(const p_op *o)
{
    return o->algo == CCOIP_ALGO_DIRECT && o->world >= 2u;
}

/* Rank k's input: its SCRATCH slot, or our own input (BACKUP in place, else SEND). */
static ccoip_span_ref gather_input(const p_op *o, uint32_t i, uint32_t k)
{
    const uint64_t bytes = o->a.count * o->esize;
    if (k == o->rank) {
        return p_ring_span(i, o->a.in_place ? CCOIP_REGION_BACKUP : CCOIP_REGION_SEND, 0, bytes);
    }
    return p_ring_span(i, CCOIP_REGION_SCRATCH, (uint64_t)k * bytes, bytes);
}

/* At N = 3 both neighbours are all the others: each input goes straight to both, in one step
 * over the ring's links both ways (the right one's is the link we dialled, the left one's the
 * one we accepted), instead of N - 1 forwarding steps. */
static bool gather_both_ways(const p_op *o)
{
    return o->world == 3u;
}

static void gather_both_step(ccoip_peer *p, uint32_t i)
{
    p_op *o = &p->ops[i];
    o->step = 0;
    o->sub = POS_SG_IO;
    const uint32_t right = (o->rank + 1u) % o->world, left = (o->rank + o->world - 1u) % o->world;
    const ccoip_span_ref mine = gather_input(o, i, o->rank);
    /* Quiet sends, as below; the two receives pace the step. */
    o->io_send = 0;
    o->send_left = 0;
    o->io_recv = p->next_io;
    p->next_io += 2u;
    o->recv_left = 3u;
    const uint64_t to[2] = {o->tx_conn, o->rx_conn};
    for (uint32_t j = 0; j < 2u; j++) {
        ccoip_action *s = p_ring_io_push(p, i, CCOIP_ACT_RING_SEND, 0, to[j], o->rank);
        if (s == NULL) return; /* overflow: the step fails */
        s->src = mine;
    }
    const uint32_t from[2] = {left, right};
    const uint64_t on[2] = {o->rx_conn, o->tx_conn};
    for (uint32_t j = 0; j < 2u; j++) {
        ccoip_action *r = p_ring_io_push(p, i, CCOIP_ACT_RING_RECV, o->io_recv + j, on[j], from[j]);
        if (r == NULL) return;
        r->dst = gather_input(o, i, from[j]);
    }
    o->tx_bytes += 2u * mine.length;
    o->rx_bytes += 2u * mine.length;
}

static void gather_step(ccoip_peer *p, uint32_t i, uint32_t t)
{
    p_op *o = &p->ops[i];
    if (gather_both_ways(o)) {
        gather_both_step(p, i);
        return;
    }
    o->step = t;
    ccoip_ring_step st;
    memset(&st, 0, sizeof st);
    st.send_chunk = (o->rank + o->world - t % o->world) % o->world;
    st.recv_chunk = (o->rank + 2u * o->world - t % o->world - 1u) % o->world;
    ring_io(p, i, &st, gather_input(o, i, st.send_chunk), NULL, gather_input(o, i, st.recv_chunk),
            POS_SG_IO, false);
}

/* The rank-order reduction of every input into RECV, one kernel (contract v7). */
static void gather_sum(ccoip_peer *p, uint32_t i)
{
    p_op *o = &p->ops[i];
    const uint64_t bytes = o->a.count * o->esize;
    ccoip_action *a = p_ring_kernel(p, i, CCOIP_ACT_GATHER_REDUCE, POS_SG_SUM);
    if (a == NULL) return;
    a->src = gather_input(o, i, o->rank);
    a->base = p_ring_span(i, CCOIP_REGION_SCRATCH, 0, (uint64_t)o->world * bytes);
    a->dst = p_ring_span(i, CCOIP_REGION_RECV, 0, bytes);
    a->count = o->a.count;
    a->chunk = o->rank;
    a->divisor = o->world;
}

static void gather_after_sum(ccoip_peer *p, uint32_t i)
{
    p_op *o = &p->ops[i];
    if (o->a.op == pcclAvg) {
        const ccoip_span all = {0, o->a.count};
        p_ring_avg(p, i, all, POS_SG_FIN);
        return;
    }
    p_ring_done(p, i);
}

static ccoip_ring_step ring_step_of(const p_op *o)
{
    ccoip_ring_step st;
    pcclResult_t r = ccoip_ring_step_get(o->a.count, o->world, o->rank, o->step, &st);
    (void)r; /* step < num_steps, world and rank checked at commence */
    return st;
}

static void ring_ag_step(ccoip_peer *p, uint32_t i, uint32_t t)
{
    p_op *o = &p->ops[i];
    o->step = o->world - 1u + t;
    ccoip_ring_step st = ring_step_of(o);
    if (ring_quantized(o)) {
        uint32_t other = 1u - o->fwd_half;
        ring_io(
            p, i, &st,
            p_ring_span(i, CCOIP_REGION_SCRATCH, o->fwd_half * o->half, st.send.count * o->wsize),
            &o->fwd_meta,
            p_ring_span(i, CCOIP_REGION_SCRATCH, other * o->half, st.recv.count * o->wsize),
            POS_AG_IO, false);
        return;
    }
    ring_io(p, i, &st,
            p_ring_span(i, CCOIP_REGION_RECV, st.send.offset * o->esize, st.send.count * o->esize),
            NULL,
            p_ring_span(i, CCOIP_REGION_RECV, st.recv.offset * o->esize, st.recv.count * o->esize),
            POS_AG_IO, false);
}

static void ring_ag_next(ccoip_peer *p, uint32_t i)
{
    p_op *o = &p->ops[i];
    uint32_t t = o->step - (o->world - 1u) + 1u;
    if (t < o->world - 1u) {
        ring_ag_step(p, i, t);
    } else {
        p_ring_done(p, i);
    }
}

static void ring_after_finalize(ccoip_peer *p, uint32_t i)
{
    p_op *o = &p->ops[i];
    if (o->world == 1) {
        p_ring_done(p, i);
        return;
    }
    if (ring_quantized(o)) {
        /* The owner adopts its own quantize→dequantize result (docs/semantics.md §5). */
        ccoip_span owned =
            ccoip_ring_chunk(o->a.count, o->world, ccoip_ring_owned_chunk(o->world, o->rank));
        ccoip_action *a = p_ring_kernel(p, i, CCOIP_ACT_QUANTIZE, POS_OWN_QUANT);
        if (a == NULL) return;
        a->src = p_ring_span(i, CCOIP_REGION_RECV, owned.offset * o->esize, owned.count * o->esize);
        a->dst = p_ring_span(i, CCOIP_REGION_SCRATCH, 0, owned.count * o->wsize);
        a->count = owned.count;
        a->quant.algorithm = o->a.quant_algorithm;
        a->quant.src_type = o->a.dtype;
        a->quant.quant_type = o->a.quant_dtype;
        return;
    }
    ring_ag_step(p, i, 0);
}

static void ring_after_rs(ccoip_peer *p, uint32_t i)
{
    p_op *o = &p->ops[i];
    if (o->a.op == pcclAvg && o->world > 1) {
        p_ring_avg(
            p, i, ccoip_ring_chunk(o->a.count, o->world, ccoip_ring_owned_chunk(o->world, o->rank)),
            POS_FINALIZE);
        return;
    }
    ring_after_finalize(p, i);
}

static void ring_rs_step(ccoip_peer *p, uint32_t i, uint32_t s)
{
    p_op *o = &p->ops[i];
    o->step = s;
    ccoip_ring_step st = ring_step_of(o);
    if (ring_quantized(o)) {
        ccoip_action *a = p_ring_kernel(p, i, CCOIP_ACT_QUANTIZE, POS_RS_QUANT);
        if (a == NULL) return;
        a->src =
            p_ring_span(i, CCOIP_REGION_RECV, st.send.offset * o->esize, st.send.count * o->esize);
        a->dst = p_ring_span(i, CCOIP_REGION_SCRATCH, 0, st.send.count * o->wsize);
        a->count = st.send.count;
        a->quant.algorithm = o->a.quant_algorithm;
        a->quant.src_type = o->a.dtype;
        a->quant.quant_type = o->a.quant_dtype;
        return;
    }
    /* Zero-copy: the first send is this peer's own chunk, straight from SEND. */
    const ccoip_region from = s == 0 && ring_zero_copy(o) ? CCOIP_REGION_SEND : CCOIP_REGION_RECV;
    ring_io(p, i, &st, p_ring_span(i, from, st.send.offset * o->esize, st.send.count * o->esize),
            NULL, p_ring_span(i, CCOIP_REGION_SCRATCH, 0, st.recv.count * o->esize), POS_RS_IO,
            true);
}

static bool ring_meta_ok(const p_op *o, const ccoip_quant_meta *m)
{
    return ccoip_quant_meta_check(m) == pcclSuccess && m->algorithm == o->a.quant_algorithm &&
           m->src_type == o->a.dtype && m->quant_type == o->a.quant_dtype;
}

static void ring_after_io(ccoip_peer *p, uint32_t i)
{
    p_op *o = &p->ops[i];
    if (ccoip_coll_p2p(o->a.kind)) {
        p_pair_after_io(p, i);
        return;
    }
    if (o->a.kind != CCOIP_COLL_ALL_REDUCE) {
        p_coll_after_io(p, i);
        return;
    }
    if (o->sub == POS_HD_IO) {
        p_hd_after_io(p, i);
        return;
    }
    if (o->sub == POS_SG_IO) {
        if (o->step + 2u < o->world && !gather_both_ways(o)) {
            gather_step(p, i, o->step + 1u);
        } else {
            gather_sum(p, i);
        }
        return;
    }
    ccoip_ring_step st = ring_step_of(o);
    bool q = ring_quantized(o);
    if (q && !ring_meta_ok(o, &o->recv_meta)) {
        /* The predecessor broke the protocol: abort the op (docs/core.md §3.4). */
        p_ring_abort(p, i, pcclRankConnectionLost,
                     "invalid quantization metadata from predecessor");
        return;
    }
    ccoip_span_ref dst =
        p_ring_span(i, CCOIP_REGION_RECV, st.recv.offset * o->esize, st.recv.count * o->esize);
    if (o->sub == POS_RS_IO && q) {
        ccoip_action *a = p_ring_kernel(p, i, CCOIP_ACT_DEQUANTIZE, POS_RS_REDUCE);
        if (a == NULL) return;
        a->dst = dst;
        a->count = st.recv.count;
        a->src = p_ring_span(i, CCOIP_REGION_SCRATCH, o->half, st.recv.count * o->wsize);
        a->quant = o->recv_meta;
        a->reduce = true;
        return;
    }
    if (o->sub == POS_RS_IO) {
        /* One REDUCE per stripe received, each the one its RING_RECV announced. */
        const uint32_t n = ring_stripes(o, st.recv.count, o->prx);
        uint64_t first = 0;
        for (uint32_t j = 0; j < n; j++) {
            const ccoip_span c = ccoip_ring_chunk(st.recv.count, n, j);
            const uint64_t at = st.recv.offset + c.offset;
            ccoip_action *a = p_ring_kernel(p, i, CCOIP_ACT_REDUCE, POS_RS_REDUCE);
            if (a == NULL) return; /* overflow: the step fails */
            if (j == 0) first = o->io_kernel;
            a->dst = p_ring_span(i, CCOIP_REGION_RECV, at * o->esize, c.count * o->esize);
            a->count = c.count;
            a->src = p_ring_span(i, CCOIP_REGION_SCRATCH, c.offset * o->esize, c.count * o->esize);
            a->base = ring_rs_base(o, i, at, c.count);
        }
        o->io_kernel = first; /* ring_kernel gave ids first .. first + n - 1 */
        o->kern_left = (1u << n) - 1u;
        return;
    }
    /* All-gather. */
    if (!q) {
        ring_ag_next(p, i);
        return;
    }
    ccoip_action *a = p_ring_kernel(p, i, CCOIP_ACT_DEQUANTIZE, POS_AG_DEQUANT);
    if (a == NULL) return;
    a->src = p_ring_span(i, CCOIP_REGION_SCRATCH, (1u - o->fwd_half) * o->half,
                         st.recv.count * o->wsize);
    a->dst = dst;
    a->count = st.recv.count;
    a->quant = o->recv_meta;
    a->reduce = false;
}

static void ring_after_kernel(ccoip_peer *p, uint32_t i, const ccoip_done *d)
{
    p_op *o = &p->ops[i];
    if (o->sub == POS_RESTORE) {
        p_op_after_restore(p, i);
        return;
    }
    if (o->a.kind != CCOIP_COLL_ALL_REDUCE) {
        p_coll_after_kernel(p, i, d);
        return;
    }
    switch (o->sub) {
    case POS_BACKUP:
        o->backup_done = true;
        ring_premul(p, i, CCOIP_REGION_RECV, POS_INIT_COPY);
        return;
    case POS_INIT_COPY:
        if (o->a.in_place) o->backup_done = true;
        if (ring_gather(o)) {
            gather_step(p, i, 0);
        } else if (p_hd_active(o)) {
            p_hd_step(p, i, 0);
        } else if (o->world == 1) {
            ring_after_rs(p, i);
        } else {
            ring_rs_step(p, i, 0);
        }
        return;
    case POS_RS_QUANT: {
        o->send_meta = d->quant_out;
        ccoip_ring_step st = ring_step_of(o);
        ring_io(p, i, &st, p_ring_span(i, CCOIP_REGION_SCRATCH, 0, st.send.count * o->wsize),
                &o->send_meta,
                p_ring_span(i, CCOIP_REGION_SCRATCH, o->half, st.recv.count * o->wsize), POS_RS_IO,
                false);
        return;
    }
    case POS_RS_REDUCE:
        if (o->step + 1u < o->world - 1u) {
            ring_rs_step(p, i, o->step + 1u);
        } else {
            ring_after_rs(p, i);
        }
        return;
    case POS_FINALIZE:
        ring_after_finalize(p, i);
        return;
    case POS_OWN_QUANT: {
        o->fwd_meta = d->quant_out;
        o->fwd_half = 0;
        ccoip_span owned =
            ccoip_ring_chunk(o->a.count, o->world, ccoip_ring_owned_chunk(o->world, o->rank));
        ccoip_action *a = p_ring_kernel(p, i, CCOIP_ACT_DEQUANTIZE, POS_OWN_DEQUANT);
        if (a == NULL) return;
        a->src = p_ring_span(i, CCOIP_REGION_SCRATCH, 0, owned.count * o->wsize);
        a->dst = p_ring_span(i, CCOIP_REGION_RECV, owned.offset * o->esize, owned.count * o->esize);
        a->count = owned.count;
        a->quant = o->fwd_meta;
        a->reduce = false;
        return;
    }
    case POS_OWN_DEQUANT:
        ring_ag_step(p, i, 0);
        return;
    case POS_AG_DEQUANT:
        o->fwd_half = 1u - o->fwd_half;
        o->fwd_meta = o->recv_meta;
        ring_ag_next(p, i);
        return;
    case POS_SG_SUM:
        gather_after_sum(p, i);
        return;
    case POS_SG_FIN:
        p_ring_done(p, i);
        return;
    case POS_HD_RED:
    case POS_HD_FIN:
        p_hd_after_kernel(p, i);
        return;
    case POS_RESTORE: /* above */
    case POS_NONE:
    case POS_RS_IO:
    case POS_AG_IO:
    case POS_SG_IO:
    case POS_HD_IO:
    case POS_C_PRO:
    case POS_C_IO:
    case POS_C_RED:
    case POS_C_EPI:
        break;
    }
}

/* Whether id is one of the outstanding ids base + j (bit j of left); *bit is that bit. */
static bool ring_outstanding(uint64_t id, uint64_t base, uint32_t left, uint32_t *bit)
{
    if (base == 0 || id < base || id - base >= 32u) return false;
    *bit = 1u << (uint32_t)(id - base);
    return (left & *bit) != 0;
}

bool p_ring_on_done(ccoip_peer *p, const ccoip_event *ev)
{
    uint64_t id = ev->done.io_id;
    if (id == 0) return false;
    for (uint32_t i = 0; i < p->cfg.max_ops; i++) {
        p_op *o = &p->ops[i];
        if (o->state != PO_RUNNING && o->state != PO_RESTORING) continue;
        uint32_t bit = 0;
        const bool io = ev->type == CCOIP_EV_IO_DONE;
        const bool sent = io && ring_outstanding(id, o->io_send, o->send_left, &bit);
        if (sent || (io && ring_outstanding(id, o->io_recv, o->recv_left, &bit))) {
            if (sent) {
                o->send_left &= ~bit;
                if (o->send_left == 0) o->io_send = 0;
            } else {
                o->recv_left &= ~bit;
                if (o->recv_left == 0) o->io_recv = 0;
                o->recv_meta = ev->done.quant;
            }
            if (ev->done.result != pcclSuccess) {
                p_ring_abort(p, i, pcclRankConnectionLost, "ring I/O failed");
            } else if (o->send_left == 0 && o->recv_left == 0) {
                ring_after_io(p, i);
            }
            return true;
        }
        if (ev->type == CCOIP_EV_KERNEL_DONE &&
            ring_outstanding(id, o->io_kernel, o->kern_left, &bit)) {
            o->kern_left &= ~bit;
            if (o->kern_left == 0) o->io_kernel = 0;
            if (ev->done.result != pcclSuccess && o->sub != POS_RESTORE) {
                if (ev->done.result == pcclInvalidArgument &&
                    (o->sub == POS_RS_QUANT || o->sub == POS_OWN_QUANT)) {
                    /* NaN/inf cannot be quantized: not retryable (docs/core.md §3.4). */
                    o->abort_reason = CCOIP_PB_REASON_NON_FINITE;
                    p_ring_abort(p, i, pcclInvalidArgument, "non-finite data cannot be quantized");
                } else {
                    p_ring_abort(p, i, pcclRankConnectionLost, "kernel failed");
                }
            } else if (o->kern_left == 0) {
                ring_after_kernel(p, i, &ev->done);
            }
            return true;
        }
    }
    return false;
}

/* Starts the ring of op i (epoch, world and seq set): OP_BEGIN and the first kernel. */
void p_ring_begin(ccoip_peer *p, uint32_t i)
{
    p_op *o = &p->ops[i];
    o->rank = p->ring.rank;
    /* The pool spreads ops: seq (an optimistic op: its tag) mod the agreed size, the same on
     * both ends of a link. */
    const uint64_t key = o->optimistic ? o->a.tag : o->seq;
    o->tx_conn = p->ring.n == 1 ? CCOIP_CONN_NONE : p->wire.tx_conn[key % p->wire.tx_n];
    o->rx_conn = p->ring.n == 1 ? CCOIP_CONN_NONE : p->wire.rx_conn[key % p->wire.rx_n];
    o->esize = ccoip_dtype_size(o->a.dtype);
    o->wsize = ring_quantized(o) ? ccoip_dtype_size(o->a.quant_dtype) : o->esize;
    if (o->a.kind != CCOIP_COLL_ALL_REDUCE) {
        p_coll_begin(p, i);
        return;
    }
    uint64_t max_chunk = o->a.count / o->world + (o->a.count % o->world != 0 ? 1u : 0u);
    /* Striping (§8.2): an op with a step to stripe holds both pools (they are the ring's until
     * its epoch ends; a lost one aborts it); stripes follow each step's chunk. */
    o->ptx = o->prx = 1u;
    o->stx[0] = o->tx_conn;
    o->srx[0] = o->rx_conn;
    if (p->ring.n > 1 && ring_stripes(o, max_chunk, p->wire.tx_n) > 1u) {
        o->ptx = p->wire.tx_n;
        memcpy(o->stx, p->wire.tx_conn, sizeof o->stx);
    }
    if (p->ring.n > 1 && ring_stripes(o, max_chunk, p->wire.rx_n) > 1u) {
        o->prx = p->wire.rx_n;
        memcpy(o->srx, p->wire.rx_conn, sizeof o->srx);
    }
    o->half = max_chunk * o->wsize;
    uint64_t bytes = o->a.count * o->esize;
    ccoip_action *b = sm_out_push(&p->out, CCOIP_ACT_OP_BEGIN);
    if (b == NULL) return;
    b->cmd_id = o->cmd;
    b->op_slot = i;
    b->scratch_bytes =
        o->world == 1 ? 0 : (ring_quantized(o) ? 2u * o->half : max_chunk * o->esize);
    if (ring_gather(o)) b->scratch_bytes = (uint64_t)o->world * bytes; /* one slot per rank */
    if (p_hd_active(o)) b->scratch_bytes = p_hd_scratch_bytes(o);
    b->backup_bytes = o->a.in_place ? bytes : 0;
    o->backup_bytes = b->backup_bytes;
    o->begun = true;
    if (ring_gather(o) && !o->a.in_place) {
        /* The small all-reduce writes RECV only with its rank-order sum (one GATHER_REDUCE
         * reading every input where it lies): copying SEND there first would be a waste. */
        gather_step(p, i, 0);
        return;
    }
    if (p_hd_active(o) && p_hd_zero_copy(o)) {
        p_hd_step(p, i, 0);
        return;
    }
    if (ring_zero_copy(o)) {
        ring_rs_step(p, i, 0);
        return;
    }
    if (o->a.op == pcclPremulSum && !o->a.in_place) {
        ring_premul(p, i, CCOIP_REGION_SEND, POS_INIT_COPY); /* SEND * factor -> RECV */
        return;
    }
    /* In place, PREMUL_SUM: the backup first, alone; RECV *= factor once it is complete (a
     * RECV written before the backup is known complete could not be restored: backup_done). */
    const p_op_sub sub = o->a.in_place && o->a.op == pcclPremulSum ? POS_BACKUP : POS_INIT_COPY;
    ccoip_action *a = p_ring_kernel(p, i, CCOIP_ACT_COPY, sub);
    if (a == NULL) return;
    if (o->a.in_place) {
        a->src = p_ring_span(i, CCOIP_REGION_RECV, 0, bytes);
        a->dst = p_ring_span(i, CCOIP_REGION_BACKUP, 0, bytes);
    } else {
        a->src = p_ring_span(i, CCOIP_REGION_SEND, 0, bytes);
        a->dst = p_ring_span(i, CCOIP_REGION_RECV, 0, bytes);
    }
    a->count = o->a.count;
}
