/*
 * pccl_coll_list.c — the list variants of the collective set (include/pccl.h,
 * docs/collectives.md): all-gather, reduce-scatter, all-to-all, gather and
 * scatter over `n` separate buffers, run as the single-buffer op on one
 * staging block (pccl_stage: inputs copied in at the start, outputs copied
 * out when the op succeeded, the caller's outputs untouched on failure).
 */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>

#include "ccoip_coll.h"
#include "ccoip_dtype.h"
#include "pccl.h"
#include "pccl_internal.h"
#include "pt.h"

/* The bytes of one block, after checking n against the world and every pointer of a list
 * (lists may be NULL where unused). pcclInvalidArgument otherwise, with a log line. */
static pcclResult_t list_check(const pcclComm_t *comm, const char *what, size_t n, size_t count,
                               pcclDataType_t dtype, const void *const *a, const void *const *b,
                               uint64_t *block, uint64_t *epoch)
{
    pcclResult_t r = pccl_comm_check(comm);
    if (r != pcclSuccess) return r;
    if (!ccoip_dtype_valid(dtype)) return pcclInvalidArgument;
    pt_peer_info info;
    pt_peer_info_get(comm->d, &info);
    *epoch = info.epoch; /* the op starts in it or not at all: the staging is sized for it */
    uint64_t sb = 0, rb = 0;
    const uint32_t world = info.world_size > 0 ? info.world_size : 1u;
    if (ccoip_coll_sizes(CCOIP_COLL_ALL_TO_ALL, (uint64_t)count, ccoip_dtype_size(dtype), world, 0,
                         0, &sb, &rb) != pcclSuccess) {
        pt_log(CCOIP_LOG_ERROR, "pccl", "%s: count %llu is too large", what,
               (unsigned long long)count);
        return pcclInvalidArgument;
    }
    if ((a != NULL || b != NULL) && n != info.world_size) {
        pt_log(CCOIP_LOG_ERROR, "pccl", "%s: a list of %llu buffers, the group has %u members",
               what, (unsigned long long)n, (unsigned)info.world_size);
        return pcclInvalidArgument;
    }
    *block = (uint64_t)count * ccoip_dtype_size(dtype);
    for (size_t i = 0; i<n && * block> 0; i++) {
        if ((a != NULL && a[i] == NULL) || (b != NULL && b[i] == NULL)) {
            pt_log(CCOIP_LOG_ERROR, "pccl", "%s: list entry %llu is NULL", what,
                   (unsigned long long)i);
            return pcclInvalidArgument;
        }
    }
    return pcclSuccess;
}

/* This peer's rank as the next op will be pinned to (-1: none). */
static int rank_of(const pcclComm_t *comm)
{
    pt_peer_info info;
    pt_peer_info_get(comm->d, &info);
    return info.rank;
}

/* A staging block of n blocks; with `in`, the blocks copied from it. */
static uint8_t *stage_alloc(size_t n, uint64_t block, const void *const *in)
{
    uint8_t *mem = malloc(n * block > 0 ? (size_t)(n * block) : 1u);
    for (size_t i = 0; mem != NULL && in != NULL && i < n; i++)
        memcpy(mem + i * block, in[i], (size_t)block);
    return mem;
}

PCCL_EXPORT pcclResult_t pcclAllGatherListAsync(const void *sendbuf, void *const *recvbufs,
                                                size_t n, size_t count, pcclDataType_t dtype,
                                                const pcclCollectiveOptions_t *options,
                                                const pcclComm_t *communicator,
                                                pcclWork_t **work_out)
{
    uint64_t blk = 0, ep = 0;
    if (recvbufs == NULL) return pcclInvalidArgument;
    pcclResult_t r = list_check(communicator, "all-gather (list)", n, count, dtype, NULL,
                                (const void *const *)recvbufs, &blk, &ep);
    if (r != pcclSuccess) return r;
    pccl_stage st = {stage_alloc(n, blk, NULL), recvbufs, (uint32_t)n, 0, blk};
    if (st.mem == NULL) return pcclSystemError;
    return pccl_coll_start(communicator, CCOIP_COLL_ALL_GATHER, sendbuf, st.mem, count, dtype,
                           pcclSum, 0, options, &st, ep, work_out);
}

PCCL_EXPORT pcclResult_t pcclAllGatherList(const void *sendbuf, void *const *recvbufs, size_t n,
                                           size_t count, pcclDataType_t dtype,
                                           const pcclCollectiveOptions_t *options,
                                           const pcclComm_t *communicator,
                                           pcclCollectiveInfo_t *info_out)
{
    pcclWork_t *w = NULL;
    const pcclResult_t r =
        pcclAllGatherListAsync(sendbuf, recvbufs, n, count, dtype, options, communicator, &w);
    return pccl_coll_finish(r, w, info_out);
}

PCCL_EXPORT pcclResult_t pcclReduceScatterListAsync(const void *const *sendbufs, size_t n,
                                                    void *recvbuf, size_t count,
                                                    pcclDataType_t dtype, pcclRedOp_t op,
                                                    const pcclCollectiveOptions_t *options,
                                                    const pcclComm_t *communicator,
                                                    pcclWork_t **work_out)
{
    uint64_t blk = 0, ep = 0;
    if (sendbufs == NULL) return pcclInvalidArgument;
    pcclResult_t r = list_check(communicator, "reduce-scatter (list)", n, count, dtype, sendbufs,
                                NULL, &blk, &ep);
    if (r != pcclSuccess) return r;
    pccl_stage st = {stage_alloc(n, blk, sendbufs), NULL, 0, 0, blk};
    if (st.mem == NULL) return pcclSystemError;
    return pccl_coll_start(communicator, CCOIP_COLL_REDUCE_SCATTER, st.mem, recvbuf, count, dtype,
                           op, 0, options, &st, ep, work_out);
}

PCCL_EXPORT pcclResult_t pcclReduceScatterList(const void *const *sendbufs, size_t n, void *recvbuf,
                                               size_t count, pcclDataType_t dtype, pcclRedOp_t op,
                                               const pcclCollectiveOptions_t *options,
                                               const pcclComm_t *communicator,
                                               pcclCollectiveInfo_t *info_out)
{
    pcclWork_t *w = NULL;
    const pcclResult_t r = pcclReduceScatterListAsync(sendbufs, n, recvbuf, count, dtype, op,
                                                      options, communicator, &w);
    return pccl_coll_finish(r, w, info_out);
}

PCCL_EXPORT pcclResult_t pcclAllToAllListAsync(const void *const *sendbufs, void *const *recvbufs,
                                               size_t n, size_t count, pcclDataType_t dtype,
                                               const pcclCollectiveOptions_t *options,
                                               const pcclComm_t *communicator,
                                               pcclWork_t **work_out)
{
    uint64_t blk = 0, ep = 0;
    if (sendbufs == NULL || recvbufs == NULL) return pcclInvalidArgument;
    pcclResult_t r = list_check(communicator, "all-to-all (list)", n, count, dtype, sendbufs,
                                (const void *const *)recvbufs, &blk, &ep);
    if (r != pcclSuccess) return r;
    /* One block: the inputs, then the outputs. */
    uint8_t *mem = malloc(2u * n * blk > 0 ? (size_t)(2u * n * blk) : 1u);
    if (mem == NULL) return pcclSystemError;
    for (size_t i = 0; i < n; i++)
        memcpy(mem + i * blk, sendbufs[i], (size_t)blk);
    pccl_stage st = {mem, recvbufs, (uint32_t)n, (uint64_t)n * blk, blk};
    return pccl_coll_start(communicator, CCOIP_COLL_ALL_TO_ALL, mem, mem + n * blk, count, dtype,
                           pcclSum, 0, options, &st, ep, work_out);
}

PCCL_EXPORT pcclResult_t pcclAllToAllList(const void *const *sendbufs, void *const *recvbufs,
                                          size_t n, size_t count, pcclDataType_t dtype,
                                          const pcclCollectiveOptions_t *options,
                                          const pcclComm_t *communicator,
                                          pcclCollectiveInfo_t *info_out)
{
    pcclWork_t *w = NULL;
    const pcclResult_t r =
        pcclAllToAllListAsync(sendbufs, recvbufs, n, count, dtype, options, communicator, &w);
    return pccl_coll_finish(r, w, info_out);
}

PCCL_EXPORT pcclResult_t pcclGatherListAsync(const void *sendbuf, void *const *recvbufs, size_t n,
                                             size_t count, pcclDataType_t dtype, int root,
                                             const pcclCollectiveOptions_t *options,
                                             const pcclComm_t *communicator, pcclWork_t **work_out)
{
    pcclResult_t r = pccl_comm_check(communicator);
    if (r != pcclSuccess) return r;
    if (rank_of(communicator) != root) {
        return pccl_coll_start(communicator, CCOIP_COLL_GATHER, sendbuf, NULL, count, dtype,
                               pcclSum, root, options, NULL, 0, work_out);
    }
    uint64_t blk = 0, ep = 0;
    if (recvbufs == NULL) return pcclInvalidArgument;
    r = list_check(communicator, "gather (list)", n, count, dtype, NULL,
                   (const void *const *)recvbufs, &blk, &ep);
    if (r != pcclSuccess) return r;
    pccl_stage st = {stage_alloc(n, blk, NULL), recvbufs, (uint32_t)n, 0, blk};
    if (st.mem == NULL) return pcclSystemError;
    return pccl_coll_start(communicator, CCOIP_COLL_GATHER, sendbuf, st.mem, count, dtype, pcclSum,
                           root, options, &st, ep, work_out);
}

PCCL_EXPORT pcclResult_t pcclGatherList(const void *sendbuf, void *const *recvbufs, size_t n,
                                        size_t count, pcclDataType_t dtype, int root,
                                        const pcclCollectiveOptions_t *options,
                                        const pcclComm_t *communicator,
                                        pcclCollectiveInfo_t *info_out)
{
    pcclWork_t *w = NULL;
    const pcclResult_t r =
        pcclGatherListAsync(sendbuf, recvbufs, n, count, dtype, root, options, communicator, &w);
    return pccl_coll_finish(r, w, info_out);
}

PCCL_EXPORT pcclResult_t pcclScatterListAsync(const void *const *sendbufs, size_t n, void *recvbuf,
                                              size_t count, pcclDataType_t dtype, int root,
                                              const pcclCollectiveOptions_t *options,
                                              const pcclComm_t *communicator, pcclWork_t **work_out)
{
    pcclResult_t r = pccl_comm_check(communicator);
    if (r != pcclSuccess) return r;
    if (rank_of(communicator) != root) {
        return pccl_coll_start(communicator, CCOIP_COLL_SCATTER, NULL, recvbuf, count, dtype,
                               pcclSum, root, options, NULL, 0, work_out);
    }
    uint64_t blk = 0, ep = 0;
    if (sendbufs == NULL) return pcclInvalidArgument;
    r = list_check(communicator, "scatter (list)", n, count, dtype, sendbufs, NULL, &blk, &ep);
    if (r != pcclSuccess) return r;
    pccl_stage st = {stage_alloc(n, blk, sendbufs), NULL, 0, 0, blk};
    if (st.mem == NULL) return pcclSystemError;
    return pccl_coll_start(communicator, CCOIP_COLL_SCATTER, st.mem, recvbuf, count, dtype, pcclSum,
                           root, options, &st, ep, work_out);
}

PCCL_EXPORT pcclResult_t pcclScatterList(const void *const *sendbufs, size_t n, void *recvbuf,
                                         size_t count, pcclDataType_t dtype, int root,
                                         const pcclCollectiveOptions_t *options,
                                         const pcclComm_t *communicator,
                                         pcclCollectiveInfo_t *info_out)
{
    pcclWork_t *w = NULL;
    const pcclResult_t r =
        pcclScatterListAsync(sendbufs, n, recvbuf, count, dtype, root, options, communicator, &w);
    return pccl_coll_finish(r, w, info_out);
}
