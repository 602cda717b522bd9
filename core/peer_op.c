/*
 * peer_op.c — the life of a collective op slot, shared by every kind
 * (docs/protocol.md §6.8; docs/core.md §3.4): submit and its checks, the
 * master relay, the optimistic start, the initiate's answers, commence,
 * completion, the one verdict, the abort path (CANCEL, restore from BACKUP,
 * NOTIFY), op timeouts (CollectiveCancel) and the loss of a link or of the
 * master. The data movement is peer_ring.c's (all-reduce) and
 * peer_coll.c's (the other kinds).
 */
#include <string.h>

#include "ccoip_coll.h"
#include "ccoip_dtype.h"
#include "ccoip_quant.h"
#include "ccoip_reduce.h"
#include "peer_internal.h"

ccoip_span_ref p_ring_span(uint32_t slot, ccoip_region region, uint64_t off, uint64_t len)
{
    ccoip_span_ref r = {0}; /* unused fields (tensor) are zero, as the contract says */
    r.op_slot = slot;
    r.region = region;
    r.offset = off;
    r.length = len;
    return r;
}

void p_ring_avg(ccoip_peer *p, uint32_t i, ccoip_span elems, p_op_sub sub)
{
    p_op *o = &p->ops[i];
    ccoip_action *a = p_ring_kernel(p, i, CCOIP_ACT_FINALIZE, sub);
    if (a == NULL) return;
    a->dst = p_ring_span(i, CCOIP_REGION_RECV, elems.offset * o->esize, elems.count * o->esize);
    a->count = elems.count;
    a->divisor = o->world;
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
    p_pair_release(p, i);
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
void p_op_after_restore(ccoip_peer *p, uint32_t i)
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
    /* A backup not known complete: nothing wrote RECV yet, so nothing to restore. */
    if (o->begun && o->backup_bytes > 0 && o->backup_done && !p->cfg.canary_skip_restore) {
        const uint64_t bytes = o->backup_bytes;
        ccoip_action *a = p_ring_kernel(p, i, CCOIP_ACT_COPY, POS_RESTORE);
        if (a == NULL) return;
        a->src = p_ring_span(i, CCOIP_REGION_BACKUP, 0, bytes);
        a->dst = p_ring_span(i, CCOIP_REGION_RECV, 0, bytes);
        a->count = bytes / o->esize;
        return;
    }
    p_op_after_restore(p, i);
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

void p_ring_done(ccoip_peer *p, uint32_t i)
{
    p_op *o = &p->ops[i];
    o->sub = POS_NONE;
    p_op_set_state(o, PO_COMPLETING);
    ring_send_complete(p, i, false, true);
}
static bool ring_links_up(const ccoip_peer *p);

/* A settled ring of at least two members whose links are all up: an op may start at once
 * (docs/protocol.md §6.8.1). */
static bool ring_can_start(const ccoip_peer *p)
{
    return p->state == PS_ACCEPTED && p->ring.ready && !p->wire.wiring && !p->wire.reported &&
           !p->ring.opt_off && p->ring.n >= 2 && ring_links_up(p);
}

/* The checks of a command of another kind than all-reduce (§6.8.3): pinned to an epoch,
 * quantized only if it reduces (reduce, reduce-scatter), a known dtype (the op of the kinds that
 * reduce and the quantization are checked with the all-reduce's). */
static bool ring_kind_ok(const ccoip_allreduce_args *a)
{
    if ((uint32_t)a->kind >= CCOIP_COLL_KINDS_ALL) return false;
    if (a->kind == CCOIP_COLL_ALL_REDUCE) return true;
    if (a->pinned_epoch == 0) return false;
    if (a->quant_algorithm != pcclQuantNone && !ccoip_coll_reduces(a->kind)) return false;
    return ccoip_dtype_valid(a->dtype);
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
    /* The algorithm (docs/algorithms.md): forced, or the group's table, or the rule; over the
     * world of the pinned epoch (the all-reduce: of the current ring, which it runs in). */
    if (a->algorithm > CCOIP_ALGO_LAST) return pcclInvalidArgument;
    const ccoip_algo_query q = {a->kind,
                                a->count,
                                es,
                                a->kind == CCOIP_COLL_ALL_REDUCE ? p->ring.n : a->world,
                                a->quant_algorithm != pcclQuantNone,
                                a->op == pcclPremulSum,
                                p->ring.relay_max};
    const ccoip_algo algo = ccoip_algo_resolve((ccoip_algo)a->algorithm, &p->ring.table, &q);
    /* Forced and it cannot run the op, or nothing can (a tuning round without the relay). */
    if (algo == CCOIP_ALGO_AUTO) return pcclInvalidArgument;
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
    /* (a tuning round: the kind whose row it tunes, docs/protocol.md §6.8.5) */
    env.body.collective_initiate.root =
        ccoip_coll_rooted(a->kind) || ccoip_coll_p2p(a->kind) || a->kind == CCOIP_COLL_TUNE
            ? a->root
            : 0;
    env.body.collective_initiate.pinned_epoch = a->pinned_epoch;
    const uint64_t bytes = a->count * es;
    o->algo = (uint8_t)algo;
    /* Not relayed: the ballot names the algorithm (the master checks that every member
     * resolved the same); a relayed one says so by its relay fields, whose bytes end it. */
    if (algo != CCOIP_ALGO_RELAY && !ccoip_coll_p2p(a->kind))
        env.body.collective_initiate.algorithm = (uint32_t)algo;
    if (algo == CCOIP_ALGO_RELAY) {
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
    /* A forced algorithm waits for the commence: members that disagree are refused before any
     * data moves (an optimistic ring would already run its own schedule). */
    const bool optimistic = ring_can_start(p) && a->kind == CCOIP_COLL_ALL_REDUCE &&
                            (a->algorithm == CCOIP_ALGO_AUTO || a->algo_agreed);
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
        p_ring_begin(p, free_slot);
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
    if (o->a.kind == CCOIP_COLL_TUNE) {
        /* The group's table (§6.8.5): in force from now on, as at every other member. */
        if (ccoip_algo_table_decode(v->relay_result.data, (size_t)v->relay_result.len,
                                    &p->ring.table) != pcclSuccess) {
            p_fail(p, "tuning answer with a malformed algorithm table");
            return;
        }
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
        if (p->wire.rx_conn[k] == CCOIP_CONN_NONE || p->wire.rx_state[k] != PT_UP) return false;
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
    /* A send / recv needs no ring link: its own pair link (peer_pair.c). */
    const bool p2p = ccoip_coll_p2p(o->a.kind);
    bool links = p2p || p->ring.n == 1 || ring_links_up(p);
    if (!p->ring.ready || cc->epoch != p->ring.epoch || cc->world_size != p->ring.n || !links ||
        cc->world_size == 0 || (o->a.pinned_epoch != 0 && o->a.pinned_epoch != cc->epoch)) {
        /* Not the ring we have: nothing was touched; report the abort (§6.9 fence). */
        sm_log(&p->out, CCOIP_LOG_WARN,
               "peer %U: commence tag %U for epoch %U/world %u, ring is epoch %U/world %u", p->id,
               cc->tag, cc->epoch, cc->world_size, p->ring.epoch, p->ring.n);
        o->result = pcclRankConnectionLost;
        p_op_after_restore(p, i);
        return;
    }
    if (p2p) {
        p_pair_begin(p, i, cc);
        return;
    }
    p_ring_begin(p, i);
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
        /* The ring's end (a new plan, CCOIP_CONN_NONE) leaves a send / recv's own link be. */
        bool uses = conn == CCOIP_CONN_NONE && !ccoip_coll_p2p(o->a.kind);
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
               "peer %U: collective (kind %d) tag %U timed out after %u ms: cancelling it", p->id,
               (int)o->a.kind, o->a.tag, o->a.timeout_ms);
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
