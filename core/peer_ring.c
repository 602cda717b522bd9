/*
 * peer_ring.c — driving one ring all-reduce per op slot (docs/protocol.md
 * §6.8, §8.2; docs/semantics.md §5; docs/core.md §3.4): initiate, commence,
 * the reduce-scatter and all-gather steps as RING_SEND/RING_RECV and kernel
 * actions, completion, the verdict, and the abort path (CANCEL, restore
 * from BACKUP, NOTIFY).
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

ccoip_span_ref p_ring_span(uint32_t slot, ccoip_region region, uint64_t off, uint64_t len)
{
    ccoip_span_ref r = {0}; /* unused fields (tensor) are zero, as the contract says */
    r.op_slot = slot;
    r.region = region;
    r.offset = off;
    r.length = len;
    return r;
}

static bool ring_gather(const p_op *o);

/* An out-of-place, unquantized ring over two or more peers copies nothing (ccoip_sm.h v6): the
 * reduce-scatter reads its own contribution from SEND (the first send, and the base of every
 * reduction: each chunk is reduced into RECV exactly once) and the all-gather fills the rest. */
static bool ring_zero_copy(const p_op *o)
{
    return !o->a.in_place && !ring_quantized(o) && o->world > 1 && !ring_gather(o) &&
           o->a.op != pcclPremulSum;
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

ccoip_action *p_ring_kernel(ccoip_peer *p, uint32_t i, ccoip_action_type t, p_op_sub sub)
{
    p_op *o = &p->ops[i];
    ccoip_action *a = sm_out_push(&p->out, t);
    o->sub = sub;
    if (a == NULL) return NULL;
    o->io_kernel = p->next_io++;
    o->kern_left = 1u;
    a->io_id = o->io_kernel;
    a->op_slot = i;
    a->dtype = o->a.dtype;
    a->red_op = o->a.op;
    return a;
}

static void ring_send_complete(ccoip_peer *p, uint32_t i, bool aborted, bool as_call)
{
    p_op *o = &p->ops[i];
    ccoip_pb_peer_to_master env;
    memset(&env, 0, sizeof(env));
    env.call_id = as_call ? p_call_new(p, PC_COMPLETE, i) : 0;
    env.body_case = CCOIP_PB_PEER_TO_MASTER_BODY_COLLECTIVE_COMPLETE;
    env.body.collective_complete.tag = o->a.tag;
    env.body.collective_complete.seq = o->seq;
    env.body.collective_complete.aborted = aborted;
    env.body.collective_complete.reason = aborted ? o->abort_reason : CCOIP_PB_REASON_UNSPECIFIED;
    p_send(p, &env);
    o->complete_sent = true;
}

/* The result every member reports for an op the master's verdict aborted (§6.8). */
static pcclResult_t ring_result_of_reason(int32_t reason)
{
    switch (reason) {
    case CCOIP_PB_REASON_NON_FINITE:
        return pcclInvalidArgument;
    case CCOIP_PB_REASON_OP_TIMEOUT:
        return pcclTimeout; /* a member's timeout cancelled the op for all (§6.8.3) */
    default:
        return pcclRankConnectionLost;
    }
}

static void ring_finish(ccoip_peer *p, uint32_t i)
{
    p_op *o = &p->ops[i];
    if (o->verdict_known && o->verdict_aborted && p->state == PS_ACCEPTED) {
        /* The master's verdict is the one outcome: every member reports the same result. */
        o->result = ring_result_of_reason(o->verdict_reason);
    }
    if (o->begun) {
        ccoip_action *a = sm_out_push(&p->out, CCOIP_ACT_OP_END);
        if (a != NULL) a->op_slot = i;
    }
    ccoip_action *a = sm_out_push(&p->out, CCOIP_ACT_NOTIFY);
    if (a != NULL) {
        a->cmd_id = o->cmd;
        a->result = o->result;
        a->world_size = p->ring.world;
        a->op_slot = i;
        if (o->result == pcclSuccess) {
            a->tx_bytes = o->tx_bytes;
            a->rx_bytes = o->rx_bytes;
        }
    }
    p_call_drop_op(p, PC_INITIATE, i);
    p_call_drop_op(p, PC_COMPLETE, i);
    p_op_set_state(o, PO_FREE);
    memset(o, 0, sizeof(*o));
}

static bool ring_master_alive(const ccoip_peer *p)
{
    return p->state == PS_ACCEPTED;
}

/* After the restore (or when none is needed): report, then NOTIFY (§6.8). */
static void ring_after_restore(ccoip_peer *p, uint32_t i)
{
    p_op *o = &p->ops[i];
    o->restored = true;
    o->sub = POS_NONE;
    if (o->refused) {
        /* The refusal answered the initiate: the op's one outcome, nothing to report. */
        ring_finish(p, i);
        return;
    }
    if (!ring_master_alive(p) || o->complete_sent) {
        ring_finish(p, i);
        return;
    }
    if (o->verdict_known) {
        /* The verdict came first: the completion is a notification, no second verdict. */
        ring_send_complete(p, i, true, false);
        ring_finish(p, i);
        return;
    }
    ring_send_complete(p, i, true, true);
    p_op_set_state(o, PO_COMPLETING);
}

static void ring_start_restore(ccoip_peer *p, uint32_t i)
{
    p_op *o = &p->ops[i];
    /* Frames of an optimistic op are keyed by (epoch, tag): after an abort, wait for the next
     * epoch (the master re-wires the group) before starting optimistically again (§6.8.1). */
    if (o->begun && o->epoch == p->ring.epoch) p->ring.opt_off = true;
    p_op_set_state(o, PO_RESTORING);
    if (o->begun && o->backup_bytes > 0 && !p->cfg.canary_skip_restore) {
        const uint64_t bytes = o->backup_bytes;
        ccoip_action *a = p_ring_kernel(p, i, CCOIP_ACT_COPY, POS_RESTORE);
        if (a == NULL) return;
        a->src = p_ring_span(i, CCOIP_REGION_BACKUP, 0, bytes);
        a->dst = p_ring_span(i, CCOIP_REGION_RECV, 0, bytes);
        a->count = bytes / o->esize;
        return;
    }
    ring_after_restore(p, i);
}

/* Abandons the op's ring: CANCEL its I/O, restore in-place buffers, report. */
void p_ring_abort(ccoip_peer *p, uint32_t i, pcclResult_t result, const char *why)
{
    p_op *o = &p->ops[i];
    if (o->state == PO_RESTORING) {
        if (result != pcclRankConnectionLost) o->result = result;
        return;
    }
    if (o->state == PO_COMPLETING && o->restored) {
        o->result = result;
        if (!ring_master_alive(p)) ring_finish(p, i);
        return;
    }
    sm_log(&p->out, CCOIP_LOG_INFO, "peer %U: collective (kind %d) tag %U seq %U aborted: %s",
           p->id, (int)o->a.kind, o->a.tag, o->seq, why);
    o->result = result;
    if (o->state == PO_RUNNING && o->begun) {
        ccoip_action *a = sm_out_push(&p->out, CCOIP_ACT_CANCEL);
        if (a != NULL) a->op_slot = i;
    }
    o->io_send = o->io_recv = o->io_kernel = 0;
    o->send_left = o->recv_left = o->kern_left = 0;
    ring_start_restore(p, i);
}

/* The stripes of a step moving count elements over a pool of `pool` connections
 * (ccoip_ring_stripes; 1: not striped). The quantized and the small all-reduce never stripe. */
static uint32_t ring_stripes(const p_op *o, uint64_t count, uint32_t pool)
{
    if (ring_quantized(o) || ring_gather(o)) return 1u;
    return ccoip_ring_stripes(count * o->esize, pool);
}

static ccoip_span_ref span_part(ccoip_span_ref r, uint64_t off, uint64_t len)
{
    r.offset += off;
    r.length = len;
    return r;
}

/* Pushes a RING_SEND or RING_RECV of op i's current step with the fields both share. */
ccoip_action *p_ring_io_push(ccoip_peer *p, uint32_t i, ccoip_action_type t, uint64_t io_id,
                                  uint64_t conn, uint32_t chunk)
{
    const p_op *o = &p->ops[i];
    ccoip_action *a = sm_out_push(&p->out, t);
    if (a == NULL) return NULL;
    a->io_id = io_id;
    a->op_slot = i;
    a->conn = conn;
    a->epoch = o->epoch;
    a->tag = o->a.tag;
    a->seq = o->seq;
    a->chunk = chunk;
    a->step = o->step;
    a->dtype = o->a.dtype;
    return a;
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


/* The small all-reduce (ccoip_ring_use_gather). */
static bool ring_gather(const p_op *o)
{
    return ccoip_ring_use_gather(o->a.count * o->esize, o->world,
                                 ring_quantized(o) || o->a.op == pcclPremulSum);
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

static void gather_step(ccoip_peer *p, uint32_t i, uint32_t t)
{
    p_op *o = &p->ops[i];
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
        ccoip_action *a = p_ring_kernel(p, i, CCOIP_ACT_FINALIZE, POS_SG_FIN);
        if (a == NULL) return;
        a->dst = p_ring_span(i, CCOIP_REGION_RECV, 0, o->a.count * o->esize);
        a->count = o->a.count;
        a->divisor = o->world;
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

void p_ring_done(ccoip_peer *p, uint32_t i)
{
    p_op *o = &p->ops[i];
    o->sub = POS_NONE;
    p_op_set_state(o, PO_COMPLETING);
    ring_send_complete(p, i, false, true);
}

static void ring_ag_step(ccoip_peer *p, uint32_t i, uint32_t t)
{
    p_op *o = &p->ops[i];
    o->step = o->world - 1u + t;
    ccoip_ring_step st = ring_step_of(o);
    if (ring_quantized(o)) {
        uint32_t other = 1u - o->fwd_half;
        ring_io(p, i, &st,
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
        ccoip_span owned =
            ccoip_ring_chunk(o->a.count, o->world, ccoip_ring_owned_chunk(o->world, o->rank));
        ccoip_action *a = p_ring_kernel(p, i, CCOIP_ACT_FINALIZE, POS_FINALIZE);
        if (a == NULL) return;
        a->dst = p_ring_span(i, CCOIP_REGION_RECV, owned.offset * o->esize, owned.count * o->esize);
        a->count = owned.count;
        a->divisor = o->world;
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
            NULL, p_ring_span(i, CCOIP_REGION_SCRATCH, 0, st.recv.count * o->esize), POS_RS_IO, true);
}

static bool ring_meta_ok(const p_op *o, const ccoip_quant_meta *m)
{
    return ccoip_quant_meta_check(m) == pcclSuccess && m->algorithm == o->a.quant_algorithm &&
           m->src_type == o->a.dtype && m->quant_type == o->a.quant_dtype;
}

static void ring_after_io(ccoip_peer *p, uint32_t i)
{
    p_op *o = &p->ops[i];
    if (o->a.kind != CCOIP_COLL_ALL_REDUCE) {
        p_coll_after_io(p, i);
        return;
    }
    if (o->sub == POS_SG_IO) {
        if (o->step + 2u < o->world) {
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
        p_ring_abort(p, i, pcclRankConnectionLost, "invalid quantization metadata from predecessor");
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
    a->src =
        p_ring_span(i, CCOIP_REGION_SCRATCH, (1u - o->fwd_half) * o->half, st.recv.count * o->wsize);
    a->dst = dst;
    a->count = st.recv.count;
    a->quant = o->recv_meta;
    a->reduce = false;
}

static void ring_after_kernel(ccoip_peer *p, uint32_t i, const ccoip_done *d)
{
    p_op *o = &p->ops[i];
    if (o->sub == POS_RESTORE) {
        ring_after_restore(p, i);
        return;
    }
    if (o->a.kind != CCOIP_COLL_ALL_REDUCE) {
        p_coll_after_kernel(p, i);
        return;
    }
    switch (o->sub) {
    case POS_INIT_COPY:
        if (ring_gather(o)) {
            gather_step(p, i, 0);
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
    case POS_RESTORE: /* above */
    case POS_NONE:
    case POS_RS_IO:
    case POS_AG_IO:
    case POS_SG_IO:
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

static void ring_begin(ccoip_peer *p, uint32_t i);
static bool ring_links_up(const ccoip_peer *p);

/* A settled ring of at least two members whose links are all up: an op may start at once
 * (docs/protocol.md §6.8.1). */
static bool ring_can_start(const ccoip_peer *p)
{
    return p->state == PS_ACCEPTED && p->ring.ready && !p->wire.wiring && !p->wire.reported &&
           !p->ring.opt_off && p->ring.n >= 2 && ring_links_up(p);
}

/* The checks of a command of another kind than all-reduce (§6.8.3): pinned to an epoch, not
 * quantized, a known dtype, and an op the dtype has a kernel for where the kind reduces. */
static bool ring_kind_ok(const ccoip_allreduce_args *a)
{
    if ((uint32_t)a->kind >= CCOIP_COLL_KINDS) return false;
    if (a->kind == CCOIP_COLL_ALL_REDUCE) return true;
    if (a->pinned_epoch == 0 || a->quant_algorithm != pcclQuantNone) return false;
    if (!ccoip_dtype_valid(a->dtype)) return false;
    return !ccoip_coll_reduces(a->kind) || ccoip_reduce_supported(a->op, a->dtype);
}

pcclResult_t p_ring_submit(ccoip_peer *p, const ccoip_cmd *cmd)
{
    const ccoip_allreduce_args *a = &cmd->allreduce;
    if (!ring_kind_ok(a)) return pcclInvalidArgument;
    const bool reducing = ccoip_coll_reduces(a->kind);
    /* A known dtype and op, and no bitwise op on a float dtype. */
    if (reducing && !ccoip_reduce_supported(a->op, a->dtype)) return pcclInvalidArgument;
    if (a->quant_algorithm != pcclQuantNone &&
        !ccoip_quant_supported(a->quant_algorithm, a->dtype, a->quant_dtype)) {
        return pcclInvalidArgument;
    }
    if ((uint32_t)a->quant_algorithm > (uint32_t)pcclQuantZeroPointScale) {
        return pcclInvalidArgument;
    }
    if (a->op == pcclPremulSum && a->quant_algorithm != pcclQuantNone) return pcclInvalidArgument;
    uint64_t es = ccoip_dtype_size(a->dtype);
    if (a->count > UINT64_MAX / 2u / es) return pcclInvalidArgument;
    uint32_t free_slot = UINT32_MAX;
    for (uint32_t i = 0; i < p->cfg.max_ops; i++) {
        if (p->ops[i].state == PO_FREE) {
            if (free_slot == UINT32_MAX) free_slot = i;
        } else if (p->ops[i].a.tag == a->tag) {
            return pcclInvalidUsage; /* one op per tag at a time */
        }
    }
    if (free_slot == UINT32_MAX) return pcclInvalidUsage;
    p_op *o = &p->ops[free_slot];
    memset(o, 0, sizeof(*o));
    p_op_set_state(o, PO_INITIATING);
    o->cmd = cmd->cmd_id;
    o->a = *a;
    if (a->quant_algorithm == pcclQuantNone) o->a.quant_dtype = pcclUint8; /* not on the wire */
    if (!reducing) o->a.op = pcclSum; /* not used: every member sends the same */
    o->result = pcclSuccess;
    o->deadline_ns = a->timeout_ms > 0 ? sm_add_sat(p->now, sm_ms(a->timeout_ms)) : 0;
    ccoip_pb_peer_to_master env;
    memset(&env, 0, sizeof(env));
    env.call_id = p_call_new(p, PC_INITIATE, free_slot);
    env.body_case = CCOIP_PB_PEER_TO_MASTER_BODY_COLLECTIVE_INITIATE;
    env.body.collective_initiate.tag = a->tag;
    env.body.collective_initiate.count = a->count;
    env.body.collective_initiate.dtype = (int32_t)a->dtype;
    env.body.collective_initiate.op = (int32_t)a->op;
    env.body.collective_initiate.quant_algorithm = (int32_t)a->quant_algorithm;
    env.body.collective_initiate.quant_dtype =
        a->quant_algorithm == pcclQuantNone ? 0 : (int32_t)a->quant_dtype;
    env.body.collective_initiate.op = (int32_t)o->a.op;
    env.body.collective_initiate.kind = (int32_t)a->kind;
    env.body.collective_initiate.root = ccoip_coll_rooted(a->kind) ? a->root : 0;
    env.body.collective_initiate.pinned_epoch = a->pinned_epoch;
    const uint64_t bytes = a->count * es;
    const bool relay =
        a->kind == CCOIP_COLL_ALL_REDUCE
            ? ccoip_relay_use(bytes, p->ring.relay_max,
                              a->quant_algorithm != pcclQuantNone || a->op == pcclPremulSum)
            : a->op != pcclPremulSum &&
                  ccoip_coll_relay_use(a->kind, a->count, es, a->world, p->ring.relay_max);
    if (relay) {
        /* Master relay (§6.8.2, §6.8.3): the input goes with the initiate, the answer brings
         * the output; no ring, nothing to restore (RECV is written only with the output). */
        o->relay = true;
        o->esize = es;
        ccoip_action *b = sm_out_push(&p->out, CCOIP_ACT_OP_BEGIN);
        if (b == NULL) return pcclSuccess; /* overflow: the step fails */
        b->cmd_id = o->cmd;
        b->op_slot = free_slot;
        o->begun = true;
        env.body.collective_initiate.relay = true;
        const bool ar = a->kind == CCOIP_COLL_ALL_REDUCE;
        const uint64_t in = ar ? bytes : a->send_bytes;
        if (in > 0) {
            ccoip_pb_bytes *field = ar ? &env.body.collective_initiate.relay_data
                                       : &env.body.collective_initiate.relay_input;
            p_send_span(p, &env, field, free_slot,
                        p_ring_span(free_slot,
                                    ar && a->in_place ? CCOIP_REGION_RECV : CCOIP_REGION_SEND, 0,
                                    in));
        } else {
            p_send(p, &env); /* a barrier, a scatter's non-root: no input */
        }
        o->tx_bytes = in;
        return pcclSuccess;
    }
    /* The other kinds wait for the commence (§6.8.3): small ones relay (one round trip), and
     * the commence's round trip is small beside a large one's data. */
    const bool optimistic = ring_can_start(p) && a->kind == CCOIP_COLL_ALL_REDUCE;
    if (optimistic) env.body.collective_initiate.optimistic_epoch = p->ring.epoch;
    p_send(p, &env);
    if (optimistic) {
        /* Optimistic start: the ring runs now, keyed by (epoch, tag) with seq 0; the master
         * only votes on the parameters and the outcome (§6.8.1). */
        o->optimistic = true;
        p->ring.opt_starts++;
        o->seq = 0;
        o->epoch = p->ring.epoch;
        o->world = p->ring.n;
        p_op_set_state(o, PO_RUNNING);
        ring_begin(p, free_slot);
    }
    return pcclSuccess;
}

void p_ring_on_initiate_error(ccoip_peer *p, uint32_t i, pcclResult_t r)
{
    if (i < p->cfg.max_ops && p->ops[i].optimistic && p->ops[i].state != PO_FREE &&
        !p->ops[i].refused) {
        /* Refused (mismatch, too few peers) while the ring ran: stop it, give the input back,
         * report the refusal's result; no completion follows (§6.8.1). */
        p_op *o = &p->ops[i];
        o->refused = true;
        switch (o->state) {
        case PO_RUNNING:
            p_ring_abort(p, i, r, "initiate refused");
            return;
        case PO_COMPLETING:
            o->result = r;
            if (o->restored) {
                ring_finish(p, i);
            } else {
                ring_start_restore(p, i);
            }
            return;
        default:
            o->result = r; /* restoring: finishes after the restore */
            return;
        }
    }
    if (i >= p->cfg.max_ops || p->ops[i].state != PO_INITIATING) {
        p_fail(p, "initiate answer for no op");
        return;
    }
    p->ops[i].result = r;
    ring_finish(p, i);
}

void p_ring_on_relay_answer(ccoip_peer *p, uint32_t i, const ccoip_pb_collective_verdict *v)
{
    if (i >= p->cfg.max_ops || p->ops[i].state != PO_INITIATING || !p->ops[i].relay ||
        v->tag != p->ops[i].a.tag) {
        p_fail(p, "relay answer for no op");
        return;
    }
    p_op *o = &p->ops[i];
    if (v->aborted) {
        o->result = ring_result_of_reason(v->reason);
        ring_finish(p, i);
        return;
    }
    const uint64_t bytes =
        o->a.kind == CCOIP_COLL_ALL_REDUCE ? o->a.count * o->esize : o->a.recv_bytes;
    if (v->relay_result.len != bytes) {
        p_fail(p, "relay result of the wrong size");
        return;
    }
    if (bytes > 0) {
        uint8_t *buf = sm_out_alloc(&p->out, bytes);
        ccoip_action *w = buf != NULL ? sm_out_push(&p->out, CCOIP_ACT_WRITE) : NULL;
        if (w == NULL) return; /* overflow: the step fails */
        memcpy(buf, v->relay_result.data, (size_t)bytes);
        w->op_slot = i;
        w->dst = p_ring_span(i, CCOIP_REGION_RECV, 0, bytes);
        w->data = buf;
        w->len = bytes;
    }
    o->seq = v->seq;
    o->rx_bytes = bytes;
    o->result = pcclSuccess;
    p->ring.relay_ops++;
    ring_finish(p, i);
}

/* Every connection of both pools of the current ring is up (docs/protocol.md §8.1). */
static bool ring_links_up(const ccoip_peer *p)
{
    if (p->wire.tx_n == 0 || p->wire.rx_n == 0) return false;
    for (uint32_t k = 0; k < p->wire.tx_n; k++) {
        if (p->wire.tx_state[k] != PT_UP) return false;
    }
    for (uint32_t k = 0; k < p->wire.rx_n; k++) {
        if (p->wire.rx_conn[k] == CCOIP_CONN_NONE) return false;
    }
    return true;
}

void p_ring_on_commence(ccoip_peer *p, uint32_t i, const ccoip_pb_master_to_peer *env)
{
    const ccoip_pb_collective_commence *cc = &env->body.collective_commence;
    if (i >= p->cfg.max_ops || p->ops[i].state != PO_INITIATING || cc->tag != p->ops[i].a.tag) {
        p_fail(p, "commence for no op");
        return;
    }
    p_op *o = &p->ops[i];
    o->seq = cc->seq;
    /* seq 0: others started it optimistically; its frames are keyed by (epoch, tag). */
    o->optimistic = cc->seq == 0;
    if (o->optimistic) p->ring.opt_joins++;
    o->epoch = cc->epoch;
    o->world = cc->world_size;
    p_op_set_state(o, PO_RUNNING);
    bool links = p->ring.n == 1 || ring_links_up(p);
    if (!p->ring.ready || cc->epoch != p->ring.epoch || cc->world_size != p->ring.n || !links ||
        cc->world_size == 0 || (o->a.pinned_epoch != 0 && o->a.pinned_epoch != cc->epoch)) {
        /* Not the ring we have: nothing was touched; report the abort (§6.9 fence). */
        sm_log(&p->out, CCOIP_LOG_WARN,
               "peer %U: commence tag %U for epoch %U/world %u, ring is epoch %U/world %u", p->id,
               cc->tag, cc->epoch, cc->world_size, p->ring.epoch, p->ring.n);
        o->result = pcclRankConnectionLost;
        ring_after_restore(p, i);
        return;
    }
    ring_begin(p, i);
}

/* Starts the ring of op i (epoch, world and seq set): OP_BEGIN and the first kernel. */
static void ring_begin(ccoip_peer *p, uint32_t i)
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
    b->backup_bytes = o->a.in_place ? bytes : 0;
    o->backup_bytes = b->backup_bytes;
    o->begun = true;
    if (ring_gather(o) && !o->a.in_place) {
        /* The small all-reduce writes RECV only with its rank-order sum (one GATHER_REDUCE
         * reading every input where it lies): copying SEND there first would be a waste. */
        gather_step(p, i, 0);
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
    ccoip_action *a = p_ring_kernel(p, i, CCOIP_ACT_COPY, POS_INIT_COPY);
    if (a == NULL) return;
    if (o->a.in_place) {
        a->src = p_ring_span(i, CCOIP_REGION_RECV, 0, bytes);
        a->dst = p_ring_span(i, CCOIP_REGION_BACKUP, 0, bytes);
    } else {
        a->src = p_ring_span(i, CCOIP_REGION_SEND, 0, bytes);
        a->dst = p_ring_span(i, CCOIP_REGION_RECV, 0, bytes);
    }
    a->count = o->a.count;
    if (o->a.op == pcclPremulSum) {
        /* In place: after the backup, RECV *= factor (kernels of a slot run in order). */
        const uint64_t first = o->io_kernel;
        ring_premul(p, i, CCOIP_REGION_RECV, POS_INIT_COPY);
        o->io_kernel = first;
        o->kern_left = 3u;
    }
}

void p_ring_on_verdict(ccoip_peer *p, const ccoip_pb_collective_verdict *v)
{
    for (uint32_t i = 0; i < p->cfg.max_ops; i++) {
        p_op *o = &p->ops[i];
        if (o->state != PO_RUNNING && o->state != PO_RESTORING && o->state != PO_COMPLETING) {
            continue;
        }
        if (o->a.tag != v->tag || (!o->optimistic && o->seq != v->seq)) continue;
        if (o->verdict_known) {
            sm_log(&p->out, CCOIP_LOG_WARN, "peer %U: second verdict for tag %U seq %U ignored",
                   p->id, v->tag, v->seq);
            return;
        }
        o->verdict_known = true;
        o->verdict_aborted = v->aborted;
        o->verdict_reason = v->reason;
        p_call_drop_op(p, PC_COMPLETE, i); /* the one verdict answers our completion too */
        switch (o->state) {
        case PO_RUNNING:
            if (!v->aborted) {
                p_fail(p, "success verdict before our completion");
                return;
            }
            p_ring_abort(p, i, ring_result_of_reason(v->reason), "abort verdict from the master");
            return;
        case PO_RESTORING:
            return; /* the completion goes out as a notification after the restore */
        case PO_COMPLETING:
            if (o->restored) {
                ring_finish(p, i);
            } else if (v->aborted) {
                o->result = ring_result_of_reason(v->reason);
                ring_start_restore(p, i);
            } else {
                o->result = pcclSuccess;
                ring_finish(p, i);
            }
            return;
        default:
            return;
        }
    }
    sm_log(&p->out, CCOIP_LOG_DEBUG, "peer %U: verdict for unknown tag %U seq %U ignored", p->id,
           v->tag, v->seq);
}

void p_ring_on_link_lost(ccoip_peer *p, uint64_t conn)
{
    for (uint32_t i = 0; i < p->cfg.max_ops; i++) {
        p_op *o = &p->ops[i];
        if (o->state != PO_RUNNING || !o->begun) continue;
        bool uses = conn == CCOIP_CONN_NONE;
        for (uint32_t k = 0; k < o->ptx; k++)
            uses = uses || o->stx[k] == conn;
        for (uint32_t k = 0; k < o->prx; k++)
            uses = uses || o->srx[k] == conn;
        if (uses) {
            p_ring_abort(p, i, pcclRankConnectionLost, "ring link lost");
        }
    }
}

void p_ring_fail_all(ccoip_peer *p, pcclResult_t r)
{
    for (uint32_t i = 0; i < p->cfg.max_ops; i++) {
        p_op *o = &p->ops[i];
        switch (o->state) {
        case PO_FREE:
            break;
        case PO_INITIATING:
            o->result = r;
            ring_finish(p, i);
            break;
        case PO_RUNNING:
            p_ring_abort(p, i, r, "master lost");
            break;
        case PO_RESTORING:
            o->result = r;
            break;
        case PO_COMPLETING:
            o->result = r;
            if (o->restored) {
                ring_finish(p, i);
            } else {
                ring_start_restore(p, i); /* the outcome is unknown: give the input back */
            }
            break;
        }
    }
}

void p_ring_timers(ccoip_peer *p)
{
    for (uint32_t i = 0; i < p->cfg.max_ops; i++) {
        p_op *o = &p->ops[i];
        if (o->state == PO_FREE || o->deadline_ns == 0 || o->cancel_sent ||
            p->now < o->deadline_ns) {
            continue;
        }
        o->cancel_sent = true;
        if (!ring_master_alive(p)) continue;
        /* The master decides for every member (§6.8.3): it aborts the running op, or refuses
         * its vote, with REASON_OP_TIMEOUT; an op that ended meanwhile keeps its verdict. */
        sm_log(&p->out, CCOIP_LOG_WARN,
               "peer %U: collective (kind %d) tag %U timed out after %u ms: cancelling it",
               p->id, (int)o->a.kind, o->a.tag, o->a.timeout_ms);
        ccoip_pb_peer_to_master env;
        memset(&env, 0, sizeof(env));
        env.body_case = CCOIP_PB_PEER_TO_MASTER_BODY_COLLECTIVE_CANCEL;
        env.body.collective_cancel.tag = o->a.tag;
        env.body.collective_cancel.seq = o->state == PO_INITIATING || o->optimistic ? 0 : o->seq;
        p_send(p, &env);
    }
}

uint64_t p_ring_deadline(const ccoip_peer *p)
{
    uint64_t d = CCOIP_NO_DEADLINE;
    for (uint32_t i = 0; i < p->cfg.max_ops; i++) {
        const p_op *o = &p->ops[i];
        if (o->state != PO_FREE && o->deadline_ns != 0 && !o->cancel_sent && o->deadline_ns < d)
            d = o->deadline_ns;
    }
    return d;
}
