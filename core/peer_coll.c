/*
 * peer_coll.c — running the collectives beyond all-reduce on an op slot
 * (docs/protocol.md §6.8.3, docs/collectives.md): the plan of
 * core/ccoip_coll.h walked as actions — prologue COPYs, per step the
 * RING_SENDs and RING_RECVs of its pieces (striped over the link pools like
 * the ring's, §8.2) and its REDUCE (announced on the receive, so a driver may
 * fuse it) and FINALIZE, then the epilogue COPYs. Initiate, commence, the
 * verdict, the abort path and the restore are the all-reduce's
 * (peer_ring.c): this file only moves the data.
 *
 * Quantized (a reduce-scatter or a reduce with quant_algorithm set,
 * docs/semantics.md §6): each reducing step first QUANTIZEs the piece it sends
 * into QSEND (scratch after the plan's own), sends the codes with their
 * metadata (one stripe), receives the predecessor's codes into the plan's
 * landing slot, then COPYs its own input into the reduction's target and
 * DEQUANTIZEs the codes onto it (dst = own op value(codes)), then FINALIZE.
 * The reduce's gather to the root moves reduced chunks unquantized.
 */
#include <string.h>

#include "ccoip_coll.h"
#include "ccoip_quant.h"
#include "peer_internal.h"

/* The op's plan (recomputed: the slot keeps only its arguments, epoch, world and rank). */
static bool coll_plan(const p_op *o, ccoip_coll_plan *pl)
{
    return ccoip_coll_plan_make(o->a.kind, o->a.count, o->esize, o->a.op, o->world, o->rank,
                                o->a.root, o->a.in_place, pl) == pcclSuccess;
}

/* PREMUL_SUM (v12): the steps read this member's input from a premultiplied copy at the end of
 * SCRATCH (after the plan's own scratch) instead of SEND. */
static bool coll_premul(const p_op *o)
{
    return o->a.op == pcclPremulSum && ccoip_coll_reduces(o->a.kind);
}

/* A quantized op: only the kinds that reduce reach here with quantization (submit, master). */
static bool coll_quantized(const p_op *o)
{
    return o->a.quant_algorithm != pcclQuantNone && ccoip_coll_reduces(o->a.kind);
}

/* A step whose transfer is quantized: a quantized op's reducing step. */
static bool coll_qstep(const p_op *o, const ccoip_coll_step *st)
{
    return coll_quantized(o) && st->reduce;
}

/* QSEND, the codes of the piece a quantized step sends: after the plan's scratch, room for the
 * largest piece (a reduce-scatter's block, a reduce's largest chunk); none unquantized. */
static uint64_t coll_qsend_bytes(const p_op *o, const ccoip_coll_plan *pl)
{
    if (!coll_quantized(o) || pl->world < 2) return 0;
    const uint64_t n = pl->world;
    const uint64_t elems = pl->kind == CCOIP_COLL_REDUCE_SCATTER
                               ? pl->count
                               : pl->count / n + (pl->count % n != 0 ? 1u : 0u);
    return elems * o->wsize;
}

static ccoip_coll_xfer coll_fix(const p_op *o, const ccoip_coll_plan *pl, ccoip_coll_xfer x)
{
    if (coll_premul(o) && x.region == CCOIP_REGION_SEND) {
        x.region = CCOIP_REGION_SCRATCH;
        x.offset += pl->scratch_bytes;
    }
    return x;
}

static ccoip_span_ref coll_span(const p_op *o, const ccoip_coll_plan *pl, uint32_t i,
                                const ccoip_coll_xfer *x)
{
    const ccoip_coll_xfer f = coll_fix(o, pl, *x);
    return p_ring_span(i, f.region, f.offset, f.bytes);
}

/* Pushes the COPY kernels of list[0 .. n) (one KERNEL_DONE each; run in order on the slot),
 * then, when premul, the SCALE of SEND into its premultiplied copy. */
static void coll_copies(ccoip_peer *p, uint32_t i, const ccoip_coll_plan *pl,
                        const ccoip_coll_copy *list, uint32_t n, bool premul, p_op_sub sub)
{
    p_op *o = &p->ops[i];
    uint64_t first = 0;
    for (uint32_t k = 0; k < n; k++) {
        ccoip_action *a = p_ring_kernel(p, i, CCOIP_ACT_COPY, sub);
        if (a == NULL) return; /* overflow: the step fails */
        if (k == 0) first = o->io_kernel;
        a->src = coll_span(o, pl, i, &list[k].src);
        a->dst = coll_span(o, pl, i, &list[k].dst);
        a->count = list[k].src.bytes / o->esize;
    }
    if (premul) {
        ccoip_action *a = p_ring_kernel(p, i, CCOIP_ACT_SCALE, sub);
        if (a == NULL) return;
        if (n == 0) first = o->io_kernel;
        a->src = p_ring_span(i, CCOIP_REGION_SEND, 0, pl->send_bytes);
        a->dst = p_ring_span(i, CCOIP_REGION_SCRATCH, pl->scratch_bytes, pl->send_bytes);
        a->count = pl->send_bytes / o->esize;
        a->scale = o->a.premul;
        n++;
    }
    o->io_kernel = first; /* p_ring_kernel gave ids first .. first + n - 1 */
    o->kern_left = (1u << n) - 1u;
}

/* Step t of the op's plan with every span through coll_fix (PREMUL_SUM reads the premultiplied
 * input): what both the I/O and the reduction after it act on. */
static void coll_step_at(const p_op *o, const ccoip_coll_plan *pl, uint32_t t, ccoip_coll_step *st)
{
    ccoip_coll_step_get(pl, t, st);
    for (uint32_t k = 0; k < CCOIP_COLL_PIECES; k++) {
        st->send[k] = coll_fix(o, pl, st->send[k]);
        st->recv[k] = coll_fix(o, pl, st->recv[k]);
    }
    st->red_dst = coll_fix(o, pl, st->red_dst);
    st->red_base = coll_fix(o, pl, st->red_base);
}

/* A quantized step's I/O (contract v5: the codes travel with send_meta in their frames, and
 * IO_DONE reports the received metadata in done.quant): QSEND's codes to the successor, the
 * predecessor's codes into the landing slot (recv[0], whose elements are at least as wide as
 * the codes), one stripe each, nothing announced (a driver fuses plain REDUCEs only). */
static void coll_qio(ccoip_peer *p, uint32_t i, const ccoip_coll_plan *pl,
                     const ccoip_coll_step *st)
{
    p_op *o = &p->ops[i];
    const uint64_t sn = st->send[0].bytes / o->esize * o->wsize;
    const uint64_t rn = st->red_count * o->wsize;
    o->sub = POS_C_IO;
    o->io_send = p->next_io++;
    o->send_left = 1u;
    o->io_recv = p->next_io++;
    o->recv_left = 1u;
    ccoip_action *a =
        p_ring_io_push(p, i, CCOIP_ACT_RING_SEND, o->io_send, o->tx_conn, st->send[0].chunk);
    if (a == NULL) return; /* overflow: the step fails */
    a->src = p_ring_span(i, CCOIP_REGION_SCRATCH, pl->scratch_bytes, sn);
    a->quant = o->send_meta;
    a = p_ring_io_push(p, i, CCOIP_ACT_RING_RECV, o->io_recv, o->rx_conn, st->recv[0].chunk);
    if (a == NULL) return;
    a->dst = p_ring_span(i, st->recv[0].region, st->recv[0].offset, rn);
    o->tx_bytes += sn;
    o->rx_bytes += rn;
}

/* A quantized step's QUANTIZE of the piece it sends into QSEND (its metadata comes back in
 * KERNEL_DONE's quant_out; POS_RS_QUANT: a non-finite element fails the op with
 * pcclInvalidArgument for every member, as the all-reduce's). */
static void coll_quantize(ccoip_peer *p, uint32_t i, const ccoip_coll_plan *pl,
                          const ccoip_coll_step *st)
{
    p_op *o = &p->ops[i];
    ccoip_action *a = p_ring_kernel(p, i, CCOIP_ACT_QUANTIZE, POS_RS_QUANT);
    if (a == NULL) return; /* overflow: the step fails */
    const uint64_t count = st->send[0].bytes / o->esize;
    a->src = p_ring_span(i, st->send[0].region, st->send[0].offset, st->send[0].bytes);
    a->dst = p_ring_span(i, CCOIP_REGION_SCRATCH, pl->scratch_bytes, count * o->wsize);
    a->count = count;
    a->quant.algorithm = o->a.quant_algorithm;
    a->quant.src_type = o->a.dtype;
    a->quant.quant_type = o->a.quant_dtype;
}

/* The stripes of a step moving `bytes` over a pool (ccoip_ring_stripes); RING: never. */
static uint32_t coll_stripes(const p_op *o, uint64_t bytes, uint32_t pool)
{
    return o->algo == CCOIP_ALGO_RING ? 1u : ccoip_ring_stripes(bytes, pool);
}

/* Posts step st's I/O: every piece, striped; the first receive of a reducing step announces
 * its REDUCE (contract v5, v6), stripe by stripe. */
static void coll_io(ccoip_peer *p, uint32_t i, const ccoip_coll_step *st)
{
    p_op *o = &p->ops[i];
    uint32_t ns = 0, nr = 0;
    for (uint32_t k = 0; k < CCOIP_COLL_PIECES; k++) {
        if (st->send[k].on) ns += coll_stripes(o, st->send[k].bytes, o->ptx);
        if (st->recv[k].on) nr += coll_stripes(o, st->recv[k].bytes, o->prx);
    }
    o->sub = POS_C_IO;
    o->io_send = ns > 0 ? p->next_io : 0;
    p->next_io += ns;
    o->send_left = ns > 0 ? (1u << ns) - 1u : 0u;
    o->io_recv = nr > 0 ? p->next_io : 0;
    p->next_io += nr;
    o->recv_left = nr > 0 ? (1u << nr) - 1u : 0u;
    uint32_t id = 0;
    for (uint32_t k = 0; k < CCOIP_COLL_PIECES; k++) {
        const ccoip_coll_xfer *x = &st->send[k];
        if (!x->on) continue;
        const uint32_t n = coll_stripes(o, x->bytes, o->ptx);
        for (uint32_t j = 0; j < n; j++) {
            /* Stripes split at element boundaries, alike at both ends. */
            const ccoip_span c = ccoip_ring_chunk(x->bytes / o->esize, n, j);
            ccoip_action *a = p_ring_io_push(p, i, CCOIP_ACT_RING_SEND, o->io_send + id++,
                                             n == 1u ? o->tx_conn : o->stx[j], x->chunk);
            if (a == NULL) return; /* overflow: the step fails */
            a->src = p_ring_span(i, x->region, x->offset + c.offset * o->esize, c.count * o->esize);
        }
        o->tx_bytes += x->bytes;
    }
    id = 0;
    for (uint32_t k = 0; k < CCOIP_COLL_PIECES; k++) {
        const ccoip_coll_xfer *x = &st->recv[k];
        if (!x->on) continue;
        const uint32_t n = coll_stripes(o, x->bytes, o->prx);
        for (uint32_t j = 0; j < n; j++) {
            const ccoip_span c = ccoip_ring_chunk(x->bytes / o->esize, n, j);
            const uint64_t off = c.offset * o->esize, len = c.count * o->esize;
            ccoip_action *a = p_ring_io_push(p, i, CCOIP_ACT_RING_RECV, o->io_recv + id++,
                                             n == 1u ? o->rx_conn : o->srx[j], x->chunk);
            if (a == NULL) return;
            a->dst = p_ring_span(i, x->region, x->offset + off, len);
            if (k == 0 && st->reduce) {
                a->reduce = true;
                a->red_op = o->a.op;
                a->count = c.count;
                a->src = p_ring_span(i, st->red_dst.region, st->red_dst.offset + off, len);
                a->base = p_ring_span(i, st->red_base.region, st->red_base.offset + off, len);
            }
        }
        o->rx_bytes += x->bytes;
    }
}

static bool coll_step_empty(const ccoip_coll_step *st)
{
    for (uint32_t k = 0; k < CCOIP_COLL_PIECES; k++) {
        if (st->send[k].on || st->recv[k].on) return false;
    }
    return true;
}

/* Runs the plan from step t: the first step with I/O, else the epilogue, else the end. */
static void coll_from_step(ccoip_peer *p, uint32_t i, const ccoip_coll_plan *pl, uint32_t t)
{
    p_op *o = &p->ops[i];
    for (; t < pl->nsteps; t++) {
        ccoip_coll_step st;
        coll_step_at(o, pl, t, &st);
        if (coll_step_empty(&st)) continue; /* this rank has nothing to move in step t */
        o->step = t;
        if (coll_qstep(o, &st)) {
            coll_quantize(p, i, pl, &st);
        } else {
            coll_io(p, i, &st);
        }
        return;
    }
    o->step = pl->nsteps;
    if (pl->nepi > 0) {
        coll_copies(p, i, pl, pl->epi, pl->nepi, false, POS_C_EPI);
        return;
    }
    p_ring_done(p, i);
}

void p_coll_begin(ccoip_peer *p, uint32_t i)
{
    p_op *o = &p->ops[i];
    ccoip_coll_plan pl;
    if (!coll_plan(o, &pl) || pl.send_bytes != o->a.send_bytes ||
        pl.recv_bytes != o->a.recv_bytes) {
        /* The buffers were sized for another world or rank: nothing was touched. */
        sm_log(&p->out, CCOIP_LOG_WARN,
               "peer %U: collective tag %U (kind %d) does not fit world %u rank %u: its buffers "
               "are %U/%U bytes",
               p->id, o->a.tag, (int)o->a.kind, o->world, o->rank, o->a.send_bytes,
               o->a.recv_bytes);
        p_ring_abort(p, i, pcclUpdateTopologyFailed, "buffers sized for another ring");
        return;
    }
    /* Every piece may stripe over the whole pools: the op holds them (they are the ring's until
     * its epoch ends; a lost one aborts it, as a striped all-reduce). */
    o->ptx = o->prx = 1u;
    o->stx[0] = o->tx_conn;
    o->srx[0] = o->rx_conn;
    if (o->world > 1) {
        o->ptx = p->wire.tx_n;
        o->prx = p->wire.rx_n;
        memcpy(o->stx, p->wire.tx_conn, sizeof o->stx);
        memcpy(o->srx, p->wire.rx_conn, sizeof o->srx);
    }
    ccoip_action *b = sm_out_push(&p->out, CCOIP_ACT_OP_BEGIN);
    if (b == NULL) return;
    b->cmd_id = o->cmd;
    b->op_slot = i;
    b->scratch_bytes =
        pl.scratch_bytes + (coll_premul(o) ? pl.send_bytes : 0) + coll_qsend_bytes(o, &pl);
    b->backup_bytes = pl.backup_bytes;
    o->backup_bytes = pl.backup_bytes;
    o->begun = true;
    if (pl.npro > 0 || coll_premul(o)) {
        coll_copies(p, i, &pl, pl.pro, pl.npro, coll_premul(o), POS_C_PRO);
        return;
    }
    coll_from_step(p, i, &pl, 0);
}

/* A quantized step's reduction: red_dst = red_base (COPY), then red_dst = red_dst op
 * value(codes) (DEQUANTIZE with reduce), then the AVG division of a finished chunk; the kernels
 * of a slot run in order. Metadata that does not match the agreed quantization is the
 * predecessor breaking the protocol: the op aborts (docs/core.md §3.4). */
static void coll_qreduce(ccoip_peer *p, uint32_t i, const ccoip_coll_step *st)
{
    p_op *o = &p->ops[i];
    const ccoip_quant_meta *m = &o->recv_meta;
    if (ccoip_quant_meta_check(m) != pcclSuccess || m->algorithm != o->a.quant_algorithm ||
        m->src_type != o->a.dtype || m->quant_type != o->a.quant_dtype) {
        p_ring_abort(p, i, pcclRankConnectionLost,
                     "invalid quantization metadata from predecessor");
        return;
    }
    const uint64_t bytes = st->red_count * o->esize;
    ccoip_action *a = p_ring_kernel(p, i, CCOIP_ACT_COPY, POS_C_RED);
    if (a == NULL) return; /* overflow: the step fails */
    const uint64_t first = o->io_kernel;
    a->src = p_ring_span(i, st->red_base.region, st->red_base.offset, bytes);
    a->dst = p_ring_span(i, st->red_dst.region, st->red_dst.offset, bytes);
    a->count = st->red_count;
    a = p_ring_kernel(p, i, CCOIP_ACT_DEQUANTIZE, POS_C_RED);
    if (a == NULL) return;
    a->src = p_ring_span(i, st->recv[0].region, st->recv[0].offset, st->red_count * o->wsize);
    a->dst = p_ring_span(i, st->red_dst.region, st->red_dst.offset, bytes);
    a->count = st->red_count;
    a->quant = *m;
    a->reduce = true;
    uint32_t nk = 2u;
    if (st->finalize) {
        a = p_ring_kernel(p, i, CCOIP_ACT_FINALIZE, POS_C_RED);
        if (a == NULL) return;
        a->dst = p_ring_span(i, st->red_dst.region, st->red_dst.offset, bytes);
        a->count = st->red_count;
        a->divisor = o->world;
        nk++;
    }
    o->io_kernel = first; /* p_ring_kernel gave ids first .. first + nk - 1 */
    o->kern_left = (1u << nk) - 1u;
}

void p_coll_after_io(ccoip_peer *p, uint32_t i)
{
    p_op *o = &p->ops[i];
    ccoip_coll_plan pl;
    if (!coll_plan(o, &pl)) {
        p_ring_abort(p, i, pcclInternalError, "plan lost");
        return;
    }
    ccoip_coll_step st;
    coll_step_at(o, &pl, o->step, &st);
    if (!st.reduce) {
        coll_from_step(p, i, &pl, o->step + 1u);
        return;
    }
    if (coll_qstep(o, &st)) {
        coll_qreduce(p, i, &st);
        return;
    }
    /* One REDUCE per stripe received, each the one its RING_RECV announced; then the AVG
     * division of the finished chunk (kernels of a slot run in order). */
    const uint32_t n = coll_stripes(o, st.recv[0].bytes, o->prx);
    uint64_t first = 0;
    for (uint32_t j = 0; j < n; j++) {
        const ccoip_span c = ccoip_ring_chunk(st.red_count, n, j);
        const uint64_t off = c.offset * o->esize, len = c.count * o->esize;
        ccoip_action *a = p_ring_kernel(p, i, CCOIP_ACT_REDUCE, POS_C_RED);
        if (a == NULL) return; /* overflow: the step fails */
        if (j == 0) first = o->io_kernel;
        a->dst = p_ring_span(i, st.red_dst.region, st.red_dst.offset + off, len);
        a->src = p_ring_span(i, st.recv[0].region, st.recv[0].offset + off, len);
        a->base = p_ring_span(i, st.red_base.region, st.red_base.offset + off, len);
        a->count = c.count;
    }
    uint32_t nk = n;
    if (st.finalize) {
        ccoip_action *a = p_ring_kernel(p, i, CCOIP_ACT_FINALIZE, POS_C_RED);
        if (a == NULL) return;
        a->dst = p_ring_span(i, st.red_dst.region, st.red_dst.offset, st.red_dst.bytes);
        a->count = st.red_count;
        a->divisor = o->world;
        nk++;
    }
    o->io_kernel = first;
    o->kern_left = (1u << nk) - 1u;
}

void p_coll_after_kernel(ccoip_peer *p, uint32_t i, const ccoip_done *d)
{
    p_op *o = &p->ops[i];
    ccoip_coll_plan pl;
    if (!coll_plan(o, &pl)) {
        p_ring_abort(p, i, pcclInternalError, "plan lost");
        return;
    }
    switch (o->sub) {
    case POS_C_PRO:
        /* The prologue (its backup first) only reads RECV; the steps write it. */
        o->backup_done = true;
        coll_from_step(p, i, &pl, 0);
        return;
    case POS_C_RED:
        coll_from_step(p, i, &pl, o->step + 1u);
        return;
    case POS_RS_QUANT: {
        /* A quantized step's codes are ready: post its I/O with their metadata. */
        ccoip_coll_step st;
        coll_step_at(o, &pl, o->step, &st);
        o->send_meta = d->quant_out;
        coll_qio(p, i, &pl, &st);
        return;
    }
    case POS_C_EPI:
        p_ring_done(p, i);
        return;
    default:
        return;
    }
}
