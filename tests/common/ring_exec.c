/*
 * ring_exec.c — an in-memory ring all-reduce (ring_exec.h).
 */
#include "ring_exec.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "ccoip_dtype.h"
#include "ccoip_quant.h"
#include "ccoip_reduce.h"
#include "ccoip_ring.h"

/* Per-rank scratch: what arrived in the current step, and (quantized only)
 * the codes of the chunk this rank forwards in the next all-gather step. */
typedef struct exec_rank {
    unsigned char *stage;
    ccoip_quant_meta stage_meta;
    unsigned char *fwd;
    ccoip_quant_meta fwd_meta;
} exec_rank;

typedef struct exec_ctx {
    void *const *bufs;
    uint32_t n;
    uint64_t count;
    pcclDataType_t dt;
    pcclRedOp_t op;
    pcclQuantizationAlgorithm_t qalg;
    pcclDataType_t qtype;
    uint32_t elem;      /* bytes of one dt element */
    uint32_t wire_elem; /* bytes of one element on the wire */
    exec_rank *ranks;
    uint64_t *tx;
    uint64_t *rx;
} exec_ctx;

static unsigned char *exec_at(void *buf, uint64_t offset, uint32_t elem)
{
    return (unsigned char *)buf + (size_t)(offset * elem);
}

/* Every rank sends its chunk of this step into its successor's staging area. */
static pcclResult_t exec_send_all(exec_ctx *x, uint32_t step)
{
    for (uint32_t r = 0; r < x->n; r++) {
        const uint32_t to = r + 1u == x->n ? 0 : r + 1u;
        ccoip_ring_step st;
        ccoip_ring_step peer;
        pcclResult_t res = ccoip_ring_step_get(x->count, x->n, r, step, &st);
        if (res != pcclSuccess) return res;
        res = ccoip_ring_step_get(x->count, x->n, to, step, &peer);
        if (res != pcclSuccess) return res;
        /* The schedule must pair every send with the successor's receive. */
        if (peer.recv_chunk != st.send_chunk || peer.recv.offset != st.send.offset ||
            peer.recv.count != st.send.count || peer.phase != st.phase) {
            return pcclInternalError;
        }
        const uint64_t cnt = st.send.count;
        const unsigned char *src = exec_at(x->bufs[r], st.send.offset, x->elem);
        exec_rank *dst = &x->ranks[to];
        if (x->qalg == pcclQuantNone) {
            if (cnt > 0) memcpy(dst->stage, src, (size_t)(cnt * x->elem));
        } else if (st.phase == CCOIP_RING_REDUCE_SCATTER) {
            /* The sender quantizes its current partial sum of the chunk. */
            res = ccoip_quant_compute_meta(x->qalg, x->dt, x->qtype, src, cnt, &dst->stage_meta);
            if (res != pcclSuccess) return res;
            res = ccoip_quantize(&dst->stage_meta, dst->stage, src, cnt);
            if (res != pcclSuccess) return res;
        } else {
            /* All-gather: forward the owner's codes verbatim. */
            if (cnt > 0) memcpy(dst->stage, x->ranks[r].fwd, (size_t)(cnt * x->wire_elem));
            dst->stage_meta = x->ranks[r].fwd_meta;
        }
        x->tx[r] += cnt * x->wire_elem;
        x->rx[to] += cnt * x->wire_elem;
    }
    return pcclSuccess;
}

/* Every rank folds what it received in this step into its buffer. */
static pcclResult_t exec_recv_all(exec_ctx *x, uint32_t step)
{
    for (uint32_t r = 0; r < x->n; r++) {
        ccoip_ring_step st;
        pcclResult_t res = ccoip_ring_step_get(x->count, x->n, r, step, &st);
        if (res != pcclSuccess) return res;
        const uint64_t cnt = st.recv.count;
        unsigned char *dst = exec_at(x->bufs[r], st.recv.offset, x->elem);
        exec_rank *me = &x->ranks[r];
        if (st.phase == CCOIP_RING_REDUCE_SCATTER) {
            if (x->qalg == pcclQuantNone) {
                res = ccoip_reduce_inplace(x->op, x->dt, dst, me->stage, cnt);
            } else {
                res = ccoip_dequantize_reduce(&me->stage_meta, x->op, dst, me->stage, cnt);
            }
            if (res != pcclSuccess) return res;
        } else if (x->qalg == pcclQuantNone) {
            if (cnt > 0) memcpy(dst, me->stage, (size_t)(cnt * x->elem));
        } else {
            res = ccoip_dequantize(&me->stage_meta, dst, me->stage, cnt);
            if (res != pcclSuccess) return res;
            /* These codes are what this rank forwards in the next step. */
            unsigned char *tmp = me->fwd;
            me->fwd = me->stage;
            me->stage = tmp;
            me->fwd_meta = me->stage_meta;
        }
    }
    return pcclSuccess;
}

/* Each owner finalizes its fully reduced chunk before the all-gather. */
static pcclResult_t exec_finalize_all(exec_ctx *x)
{
    for (uint32_t r = 0; r < x->n; r++) {
        const ccoip_span span = ccoip_ring_chunk(x->count, x->n, ccoip_ring_owned_chunk(x->n, r));
        unsigned char *p = exec_at(x->bufs[r], span.offset, x->elem);
        exec_rank *me = &x->ranks[r];
        pcclResult_t res;
        if (x->op == pcclAvg) {
            res = ccoip_reduce_finalize_avg(x->dt, p, span.count, x->n);
            if (res != pcclSuccess) return res;
        }
        if (x->qalg != pcclQuantNone) {
            /* Adopt the quantize→dequantize result, so the owner holds
             * exactly what every other rank will decode. */
            res = ccoip_quant_compute_meta(x->qalg, x->dt, x->qtype, p, span.count, &me->fwd_meta);
            if (res != pcclSuccess) return res;
            res = ccoip_quantize(&me->fwd_meta, me->fwd, p, span.count);
            if (res != pcclSuccess) return res;
            res = ccoip_dequantize(&me->fwd_meta, p, me->fwd, span.count);
            if (res != pcclSuccess) return res;
        }
    }
    return pcclSuccess;
}

pcclResult_t ring_exec_allreduce(void *const *bufs, uint32_t n, uint64_t count, pcclDataType_t dt,
                                 pcclRedOp_t op, pcclQuantizationAlgorithm_t qalg,
                                 pcclDataType_t qtype, uint64_t *tx_bytes, uint64_t *rx_bytes)
{
    if (n == 0 || n > CCOIP_RING_WORLD_MAX || !ccoip_reduce_supported(op, dt)) {
        return pcclInvalidArgument;
    }
    if (qalg != pcclQuantNone && !ccoip_quant_supported(qalg, dt, qtype)) {
        return pcclInvalidArgument;
    }
    if (count > 0) {
        if (bufs == NULL) return pcclInvalidArgument;
        for (uint32_t r = 0; r < n; r++) {
            if (bufs[r] == NULL) return pcclInvalidArgument;
        }
    }

    exec_ctx x;
    memset(&x, 0, sizeof x);
    x.bufs = bufs;
    x.n = n;
    x.count = count;
    x.dt = dt;
    x.op = op;
    x.qalg = qalg;
    x.qtype = qtype;
    x.elem = ccoip_dtype_size(dt);
    x.wire_elem = qalg == pcclQuantNone ? x.elem : ccoip_dtype_size(qtype);

    /* Staging holds one chunk (elements or codes); the largest chunk has
     * ceil(count / n) elements. */
    const uint64_t chunk_max = count / n + (count % n != 0 ? 1u : 0u);
    const uint64_t stage_bytes = chunk_max * x.wire_elem;
    if (stage_bytes > SIZE_MAX / 2u / n) return pcclInvalidArgument;
    const size_t stage_sz = (size_t)stage_bytes;
    x.ranks = calloc(n, sizeof *x.ranks);
    unsigned char *pool = malloc(stage_sz * 2u * n + 1u);
    x.tx = calloc(n, sizeof *x.tx);
    x.rx = calloc(n, sizeof *x.rx);
    pcclResult_t res = pcclSuccess;
    if (x.ranks == NULL || pool == NULL || x.tx == NULL || x.rx == NULL) {
        res = pcclSystemError;
        goto done;
    }
    for (uint32_t r = 0; r < n; r++) {
        x.ranks[r].stage = pool + (size_t)r * 2u * stage_sz;
        x.ranks[r].fwd = x.ranks[r].stage + stage_sz;
    }

    const uint32_t steps = ccoip_ring_num_steps(n);
    const uint32_t half = n - 1u;
    for (uint32_t s = 0; s < half && res == pcclSuccess; s++) {
        res = exec_send_all(&x, s);
        if (res == pcclSuccess) res = exec_recv_all(&x, s);
    }
    if (res == pcclSuccess) res = exec_finalize_all(&x);
    for (uint32_t s = half; s < steps && res == pcclSuccess; s++) {
        res = exec_send_all(&x, s);
        if (res == pcclSuccess) res = exec_recv_all(&x, s);
    }
    if (res == pcclSuccess) {
        for (uint32_t r = 0; r < n; r++) {
            if (tx_bytes != NULL) tx_bytes[r] = x.tx[r];
            if (rx_bytes != NULL) rx_bytes[r] = x.rx[r];
        }
    }

done:
    free(x.rx);
    free(x.tx);
    free(pool);
    free(x.ranks);
    return res;
}
