/*
 * master_relay.c — the master relay (docs/protocol.md §6.8.2, §6.8.3): a
 * small collective whose members sent their inputs with their initiates is
 * computed here and every member's output sent back as the answer to its
 * initiate. One round trip through the master instead of the ring's steps.
 *
 * All-reduce: the inputs reduced in peer-id order (AVG then / N). The other
 * kinds: each member's output as core/ccoip_coll.h defines it, from the
 * inputs by rank (the group's ring of the op's epoch) — a reduce-scatter's
 * block and a reduce's chunk reduced in the very order of the ring schedule,
 * so the relayed result is the same bits as the ring's.
 */
#include <stdlib.h>
#include <string.h>

#include "ccoip_coll.h"
#include "ccoip_dtype.h"
#include "ccoip_reduce.h"
#include "ccoip_ring.h"
#include "master_internal.h"

static void relay_send(ccoip_master *m, const m_op *o, const m_op_member *mm, const uint8_t *data,
                       uint64_t len)
{
    ccoip_pb_master_to_peer env;
    memset(&env, 0, sizeof(env));
    env.call_id = mm->call;
    env.body_case = CCOIP_PB_MASTER_TO_PEER_BODY_COLLECTIVE_VERDICT;
    env.body.collective_verdict.tag = o->tag;
    env.body.collective_verdict.seq = o->seq;
    env.body.collective_verdict.relay_result.data = data;
    env.body.collective_verdict.relay_result.len = len;
    m_send(m, mm->slot, &env);
}

/* The all-reduce (§6.8.2): one result for everyone, reduced in peer-id order. */
static int relay_all_reduce(ccoip_master *m, m_op *o)
{
    const pcclDataType_t dt = (pcclDataType_t)o->dtype;
    const pcclRedOp_t rop = (pcclRedOp_t)o->op;
    const uint64_t bytes = o->count * ccoip_dtype_size(dt);
    const uint64_t need = (uint64_t)o->n_voted * (bytes + M_RELAY_FRAME_BYTES);
    if (m->out.pool_cap - m->out.pool_used < need) return -1;
    uint8_t *res = malloc((size_t)bytes);
    if (res == NULL) return -1;
    uint32_t n = 0;
    pcclResult_t r = pcclSuccess;
    for (uint32_t k = 0; k < o->mem_n && r == pcclSuccess; k++) {
        const m_op_member *mm = &o->mem[k];
        if (!(mm->flags & MOM_VOTED) || mm->relay == NULL) continue;
        if (n++ == 0) {
            memcpy(res, mm->relay, (size_t)bytes);
        } else {
            r = ccoip_reduce_inplace(rop, dt, res, mm->relay, o->count);
        }
    }
    if (r == pcclSuccess && rop == pcclAvg) r = ccoip_reduce_finalize_avg(dt, res, o->count, n);
    /* Not reachable (validated at initiate); else refused like a mismatch. */
    const bool reduced = r == pcclSuccess && n > 0;
    o->seq = m->coll.next_seq++;
    for (uint32_t k = 0; k < o->mem_n; k++) {
        const m_op_member *mm = &o->mem[k];
        if (!(mm->flags & MOM_VOTED)) continue;
        if (!reduced) {
            m_answer_status(m, mm->slot, mm->call, CCOIP_PB_STATUS_INVALID_USAGE,
                            CCOIP_PB_REASON_COLLECTIVE_MISMATCH, "relay reduction failed");
            continue;
        }
        relay_send(m, o, mm, res, bytes);
    }
    free(res);
    return 0;
}

/* The reduction of elements [off, off + cnt) (bytes) of every input, in the reduce-scatter's
 * order for block k: acc = x_{k+1}; acc = x_{k+h} op acc for h = 2 .. N; AVG then / N. */
static pcclResult_t relay_reduce_block(const m_op *o, const uint8_t *const *in, uint32_t n,
                                       uint32_t k, uint64_t off, uint64_t cnt, uint8_t *dst)
{
    const pcclDataType_t dt = (pcclDataType_t)o->dtype;
    const uint64_t es = ccoip_dtype_size(dt);
    memcpy(dst, in[(k + 1u) % n] + off, (size_t)(cnt * es));
    pcclResult_t r = pcclSuccess;
    for (uint32_t h = 2; h <= n && r == pcclSuccess; h++)
        r = ccoip_reduce((pcclRedOp_t)o->op, dt, dst, in[(k + h) % n] + off, dst, cnt);
    if (r == pcclSuccess && o->op == pcclAvg) r = ccoip_reduce_finalize_avg(dt, dst, cnt, n);
    return r;
}

/* Rank r's output of a relayed op of another kind (ccoip_coll.h), into out (its recv size). */
static pcclResult_t relay_output(const m_op *o, const uint8_t *const *in, uint32_t n, uint32_t r,
                                 uint8_t *out)
{
    const uint64_t es = ccoip_dtype_size((pcclDataType_t)o->dtype);
    const uint64_t b = o->count * es;
    switch ((ccoip_coll_kind)o->kind) {
    case CCOIP_COLL_BROADCAST:
        memcpy(out, in[o->root], (size_t)b);
        return pcclSuccess;
    case CCOIP_COLL_REDUCE:
        for (uint32_t k = 0; k < n && r == o->root; k++) {
            const ccoip_span c = ccoip_ring_chunk(o->count, n, k);
            const pcclResult_t rr =
                relay_reduce_block(o, in, n, k, c.offset * es, c.count, out + c.offset * es);
            if (rr != pcclSuccess) return rr;
        }
        return pcclSuccess;
    case CCOIP_COLL_ALL_GATHER:
        for (uint32_t i = 0; i < n; i++)
            memcpy(out + (uint64_t)i * b, in[i], (size_t)b);
        return pcclSuccess;
    case CCOIP_COLL_REDUCE_SCATTER:
        return relay_reduce_block(o, in, n, r, (uint64_t)r * b, o->count, out);
    case CCOIP_COLL_ALL_TO_ALL:
        for (uint32_t i = 0; i < n; i++)
            memcpy(out + (uint64_t)i * b, in[i] + (uint64_t)r * b, (size_t)b);
        return pcclSuccess;
    case CCOIP_COLL_GATHER:
        for (uint32_t i = 0; i < n && r == o->root; i++)
            memcpy(out + (uint64_t)i * b, in[i], (size_t)b);
        return pcclSuccess;
    case CCOIP_COLL_SCATTER:
        memcpy(out, in[o->root] + (uint64_t)r * b, (size_t)b);
        return pcclSuccess;
    case CCOIP_COLL_BARRIER:
        return pcclSuccess;
    case CCOIP_COLL_ALL_REDUCE:
    case CCOIP_COLL_SEND: /* never relayed (ccoip_coll_relay_use) */
    case CCOIP_COLL_RECV:
    case CCOIP_COLL_TUNE: /* m_relay_answer: the table */
        break;
    }
    return pcclInvalidArgument;
}

const ccoip_algo_table *m_algo_table_of(const ccoip_master *m, uint32_t group)
{
    for (uint32_t k = 0; k < m->coll.algo_n; k++)
        if (m->coll.algo[k].group == group) return &m->coll.algo[k].t;
    return NULL;
}

/* The tuning round (§6.8.5): every member's timings (in[rank]) combined into the group's
 * table (its other worlds' rows kept), installed, and encoded into tbl for the answers. */
static pcclResult_t tune_install(ccoip_master *m, const m_op *o, const uint8_t *const *in,
                                 uint32_t world, uint8_t tbl[CCOIP_ALGO_TABLE_BYTES])
{
    ccoip_algo_table t;
    const ccoip_algo_table *old = m_algo_table_of(m, o->group);
    if (old != NULL)
        t = *old;
    else
        ccoip_algo_table_clear(&t);
    /* The kind whose row is tuned: the round's root (§6.8.5). */
    const pcclResult_t r = ccoip_algo_combine(&t, o->root, world, in, world);
    if (r != pcclSuccess) return r;
    uint32_t at = 0;
    while (at < m->coll.algo_n && m->coll.algo[at].group != o->group)
        at++;
    if (at == m->coll.algo_n) {
        if (m->coll.algo_n < M_ALGO_GROUPS) {
            m->coll.algo_n++;
        } else {
            at = 0; /* full: the least recently installed gives way */
            for (uint32_t k = 1; k < M_ALGO_GROUPS; k++)
                if (m->coll.algo[k].installed < m->coll.algo[at].installed) at = k;
        }
    }
    m->coll.algo[at].group = o->group;
    m->coll.algo[at].installed = ++m->coll.algo_installs;
    m->coll.algo[at].t = t;
    ccoip_algo_table_encode(&t, tbl);
    return pcclSuccess;
}

int m_relay_answer(ccoip_master *m, m_op *o, uint32_t world)
{
    if (o->kind == CCOIP_PB_COLLECTIVE_KIND_ALL_REDUCE) return relay_all_reduce(m, o);
    const ccoip_coll_kind kind = (ccoip_coll_kind)o->kind;
    const pcclDataType_t dt = (pcclDataType_t)o->dtype;
    if (!ccoip_dtype_valid(dt) || o->op == pcclPremulSum || o->n_voted != world ||
        !ccoip_coll_relay_use(kind, o->count, ccoip_dtype_size(dt), world,
                              m->cfg.relay_max_bytes)) {
        return 1;
    }
    /* Per member (by its index in o->mem): its rank and the bytes of its output. */
    typedef struct {
        uint32_t rank;
        uint64_t out_bytes;
    } relay_member;
    const uint8_t **in = calloc(world, sizeof *in);
    relay_member *rm = calloc(o->mem_n > 0 ? o->mem_n : 1u, sizeof *rm);
    if (in == NULL || rm == NULL) {
        free(in);
        free(rm);
        return -1;
    }
    /* Every rank of the ring exactly once, with an input of its size. */
    static const uint8_t empty[1] = {0};
    int bad = 0;
    uint64_t need = 0, biggest = 0;
    for (uint32_t k = 0; k < o->mem_n && bad == 0; k++) {
        const m_op_member *mm = &o->mem[k];
        if (!(mm->flags & MOM_VOTED)) continue;
        const uint32_t r = m->sess.peers[mm->slot].rank;
        uint64_t sb = 0, rb = 0;
        if (r >= world || in[r] != NULL ||
            ccoip_coll_sizes(kind, o->count, ccoip_dtype_size(dt), world, r, o->root, &sb, &rb) !=
                pcclSuccess ||
            mm->relay_len != sb) {
            bad = 1;
            break;
        }
        in[r] = mm->relay != NULL ? mm->relay : empty;
        rm[k].rank = r;
        rm[k].out_bytes = rb;
        need += rb + M_RELAY_FRAME_BYTES;
        if (rb > biggest) biggest = rb;
    }
    uint8_t *out = NULL;
    if (bad == 0 && m->out.pool_cap - m->out.pool_used < need) bad = -1;
    if (bad == 0) {
        out = malloc(biggest > 0 ? (size_t)biggest : 1u);
        if (out == NULL) bad = -1;
    }
    uint8_t tbl[CCOIP_ALGO_TABLE_BYTES];
    const bool tune = kind == CCOIP_COLL_TUNE;
    const bool tune_ok = bad == 0 && tune && tune_install(m, o, in, world, tbl) == pcclSuccess;
    if (bad == 0) {
        o->seq = m->coll.next_seq++;
        for (uint32_t k = 0; k < o->mem_n; k++) {
            const m_op_member *mm = &o->mem[k];
            if (!(mm->flags & MOM_VOTED)) continue;
            if (tune && tune_ok) {
                memcpy(out, tbl, sizeof tbl);
            } else if (tune || relay_output(o, in, world, rm[k].rank, out) != pcclSuccess) {
                m_answer_status(m, mm->slot, mm->call, CCOIP_PB_STATUS_INVALID_USAGE,
                                CCOIP_PB_REASON_COLLECTIVE_MISMATCH, "relay reduction failed");
                continue;
            }
            relay_send(m, o, mm, out, rm[k].out_bytes);
        }
    }
    free(out);
    free(in);
    free(rm);
    return bad;
}
