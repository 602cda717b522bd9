/*
 * pccl_p2p.c — send and receive between two ranks (docs/collectives-p2p.md):
 * one op of kind SEND or RECV each, started like every collective of the set
 * (pccl_coll.c: argument checks, the rank, world and epoch the op is pinned
 * to, the pair's tag, a work object).
 */
#include "pccl_internal.h"

PCCL_EXPORT pcclResult_t pcclSendAsync(const void *sendbuf, size_t count, pcclDataType_t dtype,
                                       int peer, const pcclCollectiveOptions_t *options,
                                       const pcclComm_t *communicator, pcclWork_t **work_out)
{
    return pccl_coll_start(communicator, CCOIP_COLL_SEND, sendbuf, NULL, count, dtype, pcclSum,
                           peer, options, NULL, 0, work_out);
}

PCCL_EXPORT pcclResult_t pcclSend(const void *sendbuf, size_t count, pcclDataType_t dtype, int peer,
                                  const pcclCollectiveOptions_t *options,
                                  const pcclComm_t *communicator, pcclCollectiveInfo_t *info_out)
{
    pcclWork_t *w = NULL;
    const pcclResult_t r = pcclSendAsync(sendbuf, count, dtype, peer, options, communicator, &w);
    return pccl_coll_finish(r, w, info_out);
}

PCCL_EXPORT pcclResult_t pcclRecvAsync(void *recvbuf, size_t count, pcclDataType_t dtype, int peer,
                                       const pcclCollectiveOptions_t *options,
                                       const pcclComm_t *communicator, pcclWork_t **work_out)
{
    return pccl_coll_start(communicator, CCOIP_COLL_RECV, NULL, recvbuf, count, dtype, pcclSum,
                           peer, options, NULL, 0, work_out);
}

PCCL_EXPORT pcclResult_t pcclRecv(void *recvbuf, size_t count, pcclDataType_t dtype, int peer,
                                  const pcclCollectiveOptions_t *options,
                                  const pcclComm_t *communicator, pcclCollectiveInfo_t *info_out)
{
    pcclWork_t *w = NULL;
    const pcclResult_t r = pcclRecvAsync(recvbuf, count, dtype, peer, options, communicator, &w);
    return pccl_coll_finish(r, w, info_out);
}
