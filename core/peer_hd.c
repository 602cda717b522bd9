/*
 * peer_hd.c — the recursive halving–doubling all-reduce on an op slot (CCOIP_ALGO_HALVING_
 * DOUBLING; the schedule is ccoip_hd.h's, docs/algorithms.md §1). peer_ring.c starts it
 * after the op's first copy into RECV (the backup, PREMUL_SUM's scaling) and hands it the
 * completions of its sub-steps; the op's life around it is peer_op.c's.
 *
 * Each step is one RING_SEND and one RING_RECV with the partner, over the ring link that
 * joins them (a neighbour: the right one's link is the one this member dialled, the left
 * one's the one it accepted; at N = 2 the ring's own directions). A halving receives into
 * SCRATCH and reduces into RECV (its RING_RECV announces the REDUCE, so a driver that can
 * reduces as the bytes arrive, contract v5); a doubling receives straight into RECV. Frames
 * carry the step and, as chunk, the sender's ring position. Out of place and not PREMUL_SUM
 * it copies nothing (as the ring, contract v6): the first halving sends from SEND and reduces
 * SEND's kept half with the partner's into RECV; RECV's other ranges are all written later.
 */
#include "ccoip_hd.h"
#include "peer_internal.h"

bool p_hd_active(const p_op *o)
{
    return o->algo == CCOIP_ALGO_HALVING_DOUBLING && o->a.kind == CCOIP_COLL_ALL_REDUCE &&
           o->a.quant_algorithm == pcclQuantNone && ccoip_hd_fits(o->a.count, o->world);
}

bool p_hd_zero_copy(const p_op *o)
{
    return !o->a.in_place && o->a.op != pcclPremulSum;
}

/* The base of step t's reduction: SEND's range for the first halving of a zero-copy op. */
static ccoip_span_ref hd_base(const p_op *o, uint32_t i, uint32_t t, ccoip_span recv)
{
    ccoip_span_ref none = {0};
    if (t != 0 || !p_hd_zero_copy(o)) return none;
    return p_ring_span(i, CCOIP_REGION_SEND, recv.offset * o->esize, recv.count * o->esize);
}

uint64_t p_hd_scratch_bytes(const p_op *o)
{
    return (o->a.count - o->a.count / 2u) * o->esize; /* the larger first half */
}

/* The connection to partner: our dialled link to the right neighbour, the accepted one from
 * the left (at N = 2 both neighbours are the partner: send right, receive from the left). */
static uint64_t hd_conn(const p_op *o, uint32_t partner, bool send)
{
    if (o->world == 2u) return send ? o->tx_conn : o->rx_conn;
    return partner == (o->rank + 1u) % o->world ? o->tx_conn : o->rx_conn;
}

static ccoip_hd_step hd_step_of(const p_op *o)
{
    ccoip_hd_step st;
    pcclResult_t r = ccoip_hd_step_get(o->a.count, o->world, o->rank, o->step, &st);
    (void)r; /* p_hd_active checked the world and count, the steps stay in range */
    return st;
}

void p_hd_step(ccoip_peer *p, uint32_t i, uint32_t t)
{
    p_op *o = &p->ops[i];
    o->step = t;
    o->sub = POS_HD_IO;
    const ccoip_hd_step st = hd_step_of(o);
    o->io_send = p->next_io++;
    o->send_left = 1u;
    o->io_recv = p->next_io++;
    o->recv_left = 1u;
    ccoip_action *s = p_ring_io_push(p, i, CCOIP_ACT_RING_SEND, o->io_send,
                                     hd_conn(o, st.partner, true), o->rank);
    if (s == NULL) return; /* overflow: the step fails */
    const ccoip_region from = t == 0 && p_hd_zero_copy(o) ? CCOIP_REGION_SEND : CCOIP_REGION_RECV;
    s->src = p_ring_span(i, from, st.send.offset * o->esize, st.send.count * o->esize);
    ccoip_action *r = p_ring_io_push(p, i, CCOIP_ACT_RING_RECV, o->io_recv,
                                     hd_conn(o, st.partner, false), st.partner);
    if (r == NULL) return;
    const ccoip_span_ref mine =
        p_ring_span(i, CCOIP_REGION_RECV, st.recv.offset * o->esize, st.recv.count * o->esize);
    if (st.reduce) {
        r->dst = p_ring_span(i, CCOIP_REGION_SCRATCH, 0, st.recv.count * o->esize);
        /* The REDUCE p_hd_after_io asks for (contract v5, v6): a driver may fuse it. */
        r->reduce = true;
        r->red_op = o->a.op;
        r->count = st.recv.count;
        r->src = mine;
        r->base = hd_base(o, i, t, st.recv);
    } else {
        r->dst = mine;
    }
    o->tx_bytes += st.send.count * o->esize;
    o->rx_bytes += st.recv.count * o->esize;
}

/* The next step after step o->step (and its reduction) finished, or the op's end. */
static void hd_next(ccoip_peer *p, uint32_t i)
{
    p_op *o = &p->ops[i];
    const uint32_t t = o->step + 1u;
    if (t < ccoip_hd_steps(o->world)) {
        p_hd_step(p, i, t);
    } else {
        p_ring_done(p, i);
    }
}

void p_hd_after_io(ccoip_peer *p, uint32_t i)
{
    p_op *o = &p->ops[i];
    const ccoip_hd_step st = hd_step_of(o);
    if (!st.reduce) {
        hd_next(p, i);
        return;
    }
    ccoip_action *a = p_ring_kernel(p, i, CCOIP_ACT_REDUCE, POS_HD_RED);
    if (a == NULL) return;
    a->dst = p_ring_span(i, CCOIP_REGION_RECV, st.recv.offset * o->esize, st.recv.count * o->esize);
    a->src = p_ring_span(i, CCOIP_REGION_SCRATCH, 0, st.recv.count * o->esize);
    a->base = hd_base(o, i, o->step, st.recv);
    a->count = st.recv.count;
}

void p_hd_after_kernel(ccoip_peer *p, uint32_t i)
{
    p_op *o = &p->ops[i];
    const uint32_t halvings = ccoip_hd_steps(o->world) / 2u;
    if (o->sub == POS_HD_RED && o->step + 1u == halvings && o->a.op == pcclAvg) {
        /* The reduce-scatter is over: AVG divides the owned range once, before the copies. */
        p_ring_avg(p, i, ccoip_hd_owned(o->a.count, o->world, o->rank), POS_HD_FIN);
        return;
    }
    hd_next(p, i);
}
