/*
 * pccl_coll_v.c — all-to-all with split sizes (pcclAllToAllV, TorchComms
 * all_to_all_v_single; docs/collectives.md): a composite of two collectives
 * of the same epoch, each with PCCL's failure contract.
 *
 *   1. An all-gather of every member's split sizes (its N send counts, then
 *      its N receive counts, as uint64): every member learns the whole
 *      matrix, checks that what i sends to j is what j expects from i, and
 *      finds the largest block. Every member decides alike, so a mismatch is
 *      pcclInvalidUsage everywhere.
 *   2. An all-to-all of blocks of that largest size: the input packed into a
 *      staging buffer (block j = the elements for rank j, zero padded), the
 *      output unpacked from the received blocks after success.
 *
 * Both phases use the caller's tag one after the other. The padding costs
 * bandwidth when the split sizes are skewed: N * max block per member on
 * the wire instead of the sum of its sizes (docs/collectives.md).
 */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>

#include "ccoip_dtype.h"
#include "pccl.h"
#include "pccl_internal.h"
#include "pt.h"

typedef struct a2av {
    int phase; /* 1: split sizes gathering; 2: the padded all-to-all */
    uint32_t world;
    uint64_t epoch; /* both phases run in it (the buffers are sized for its world) */
    uint64_t esize;
    const uint8_t *send;
    uint8_t *recv;
    uint64_t *counts; /* [2 world]: this member's send counts, then its receive counts */
    uint64_t *matrix; /* [world][2 world]: every member's, by rank */
    uint64_t maxblk;
    uint8_t *stage; /* [2][world][maxblk] elements: packed input, then received blocks */
    pcclCollectiveOptions_t opts;
} a2av;

static void a2av_free(void *p)
{
    a2av *v = p;
    if (v == NULL) return;
    free(v->counts);
    free(v->matrix);
    free(v->stage);
    free(v);
}

/* Phase 1 ended: check the matrix (alike on every member), pack, start phase 2. Phase 2
 * ended: unpack. */
static pcclResult_t a2av_next(void *ctx, const pcclComm_t *comm, pcclWork_t **next)
{
    a2av *v = ctx;
    const uint32_t n = v->world;
    *next = NULL;
    if (v->phase == 2) {
        uint64_t off = 0;
        for (uint32_t i = 0; i < n; i++) {
            const uint64_t cnt = v->counts[n + i];
            memcpy(v->recv + off * v->esize, v->stage + ((uint64_t)n + i) * v->maxblk * v->esize,
                   (size_t)(cnt * v->esize));
            off += cnt;
        }
        return pcclSuccess;
    }
    uint64_t maxblk = 0;
    for (uint32_t i = 0; i < n; i++) {
        for (uint32_t j = 0; j < n; j++) {
            const uint64_t sends = v->matrix[(uint64_t)i * 2u * n + j];
            const uint64_t expects = v->matrix[(uint64_t)j * 2u * n + n + i];
            if (sends != expects) {
                pt_log(CCOIP_LOG_ERROR, "pccl",
                       "all-to-all-v: rank %u sends %llu elements to rank %u, which expects %llu",
                       (unsigned)i, (unsigned long long)sends, (unsigned)j,
                       (unsigned long long)expects);
                return pcclInvalidUsage;
            }
            if (sends > maxblk) maxblk = sends;
        }
    }
    if (maxblk > ((uint64_t)1 << 40) / v->esize / n) {
        pt_log(CCOIP_LOG_ERROR, "pccl", "all-to-all-v: blocks of %llu elements are too large",
               (unsigned long long)maxblk);
        return pcclInvalidArgument;
    }
    v->maxblk = maxblk;
    const uint64_t half = (uint64_t)n * maxblk * v->esize;
    v->stage = calloc(1, half > 0 ? (size_t)(2u * half) : 1u); /* padding: zeros, never heap data */
    if (v->stage == NULL) return pcclSystemError;
    uint64_t off = 0;
    for (uint32_t j = 0; j < n; j++) {
        const uint64_t cnt = v->counts[j];
        memcpy(v->stage + (uint64_t)j * maxblk * v->esize, v->send + off * v->esize,
               (size_t)(cnt * v->esize));
        off += cnt;
    }
    v->phase = 2;
    pcclDataType_t dt = pcclUint8;
    switch (v->esize) {
    case 2:
        dt = pcclUint16;
        break;
    case 4:
        dt = pcclUint32;
        break;
    case 8:
        dt = pcclUint64;
        break;
    default:
        break;
    }
    return pccl_coll_start(comm, CCOIP_COLL_ALL_TO_ALL, v->stage, v->stage + half, (size_t)maxblk,
                           dt, pcclSum, 0, &v->opts, NULL, v->epoch, next);
}

PCCL_EXPORT pcclResult_t pcclAllToAllVAsync(const void *sendbuf, const size_t *send_counts,
                                            void *recvbuf, const size_t *recv_counts,
                                            pcclDataType_t dtype,
                                            const pcclCollectiveOptions_t *options,
                                            const pcclComm_t *communicator, pcclWork_t **work_out)
{
    if (work_out != NULL) *work_out = NULL;
    pcclResult_t r = pccl_comm_check(communicator);
    if (r != pcclSuccess) return r;
    if (work_out == NULL || send_counts == NULL || recv_counts == NULL ||
        !ccoip_dtype_valid(dtype)) {
        return pcclInvalidArgument;
    }
    pt_peer_info info;
    pt_peer_info_get(communicator->d, &info);
    const uint32_t n = info.world_size;
    if (n < 2) return pcclTooFewPeers;
    const uint64_t es = ccoip_dtype_size(dtype);
    uint64_t ssum = 0, rsum = 0;
    for (uint32_t j = 0; j < n; j++) {
        if (send_counts[j] > ((uint64_t)1 << 40) / es || recv_counts[j] > ((uint64_t)1 << 40) / es)
            return pcclInvalidArgument;
        ssum += send_counts[j];
        rsum += recv_counts[j];
    }
    if ((ssum > 0 && sendbuf == NULL) || (rsum > 0 && recvbuf == NULL)) return pcclInvalidArgument;
    const uintptr_t s = (uintptr_t)sendbuf, d = (uintptr_t)recvbuf;
    if (ssum > 0 && rsum > 0 && s < d + rsum * es && d < s + ssum * es) {
        pt_log(CCOIP_LOG_ERROR, "pccl", "all-to-all-v: send and receive buffers overlap");
        return pcclInvalidArgument;
    }
    a2av *v = calloc(1, sizeof *v);
    if (v == NULL) return pcclSystemError;
    v->phase = 1;
    v->world = n;
    v->esize = es;
    v->send = sendbuf;
    v->recv = recvbuf;
    /* The caller's struct may be the shorter first version: copied by its size. */
    if (pccl_coll_options_read(options, &v->opts) != pcclSuccess) {
        a2av_free(v);
        return pcclInvalidArgument;
    }
    v->counts = malloc(2u * n * sizeof(uint64_t));
    v->matrix = malloc((size_t)2u * n * n * sizeof(uint64_t));
    if (v->counts == NULL || v->matrix == NULL) {
        a2av_free(v);
        return pcclSystemError;
    }
    for (uint32_t j = 0; j < n; j++) {
        v->counts[j] = send_counts[j];
        v->counts[n + j] = recv_counts[j];
    }
    pcclWork_t *w = NULL;
    v->epoch = info.epoch;
    r = pccl_coll_start(communicator, CCOIP_COLL_ALL_GATHER, v->counts, v->matrix, 2u * n,
                        pcclUint64, pcclSum, 0, options, NULL, info.epoch, &w);
    if (r != pcclSuccess) {
        a2av_free(v);
        return r;
    }
    pccl_work_chain(w, a2av_next, v, a2av_free);
    *work_out = w;
    return pcclSuccess;
}

PCCL_EXPORT pcclResult_t pcclAllToAllV(const void *sendbuf, const size_t *send_counts,
                                       void *recvbuf, const size_t *recv_counts,
                                       pcclDataType_t dtype, const pcclCollectiveOptions_t *options,
                                       const pcclComm_t *communicator,
                                       pcclCollectiveInfo_t *info_out)
{
    pcclWork_t *w = NULL;
    const pcclResult_t r = pcclAllToAllVAsync(sendbuf, send_counts, recvbuf, recv_counts, dtype,
                                              options, communicator, &w);
    return pccl_coll_finish(r, w, info_out);
}
