/* examples/collectives/sendrecv.c: send and receive between two ranks.
 *
 *   ccoip_master --listen tcp://127.0.0.1:48148 &
 *   for i in 1 2 3; do ./sendrecv tcp://127.0.0.1:48148 3 & done; wait
 *
 * 1. a ring shift: every rank sends 3 values to rank + 1 and receives 3 from
 *    rank - 1, both in flight at once on tag 0 (pcclSendAsync, pcclRecvAsync);
 * 2. rank 0 sends 4 values to the last rank on tag 7 (blocking calls; the
 *    others do nothing);
 * 3. a barrier, so that nobody leaves while the others still exchange.
 * Everything is retried after a membership change (ranks are read again). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "pccl.h"

#define CHECK(stmt)                                                                                \
    do {                                                                                           \
        pcclResult_t r_ = (stmt);                                                                  \
        if (r_ != pcclSuccess) {                                                                   \
            fprintf(stderr, "%s failed: %d\n", #stmt, (int)r_);                                    \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

/* Connects and updates the topology until the group has `want` members. */
static pcclComm_t *join_group(const char *url, int want)
{
    pcclCommCreateParams_t params = {0};
    pcclCommCreateOptions_t opts = PCCL_COMM_CREATE_OPTIONS_INIT;
    opts.master_url = url;
    pcclComm_t *comm = NULL;
    CHECK(pcclCreateCommunicatorEx(&params, &opts, &comm));
    CHECK(pcclConnect(comm));
    for (int world = 0;;) {
        CHECK(pcclGetAttribute(comm, PCCL_ATTRIBUTE_PEER_GROUP_WORLD_SIZE, &world));
        if (world >= want) return comm;
        bool pending = false;
        CHECK(pcclArePeersPending(comm, &pending));
        if (!pending) nanosleep(&(struct timespec){0, 10000000L}, NULL);
        const pcclResult_t r = pcclUpdateTopology(comm); /* admits the peers waiting to join */
        if (r != pcclSuccess && r != pcclUpdateTopologyFailed) CHECK(r);
    }
}

static pcclResult_t attempt(pcclComm_t *comm)
{
    int rank = -1, world = 0;
    CHECK(pcclGetAttribute(comm, PCCL_ATTRIBUTE_RANK, &rank));
    CHECK(pcclGetAttribute(comm, PCCL_ATTRIBUTE_PEER_GROUP_WORLD_SIZE, &world));
    if (rank < 0) return pcclUpdateTopologyFailed;
    if (world < 2) return pcclTooFewPeers;

    /* 1. The ring shift: a send and a receive of one tag are two ops (their pairs differ). */
    const int to = (rank + 1) % world, from = (rank + world - 1) % world;
    const int32_t out[3] = {10 * rank, 10 * rank + 1, 10 * rank + 2};
    int32_t in[3] = {0, 0, 0};
    pcclWork_t *ws = NULL, *wr = NULL;
    pcclResult_t rs = pcclSendAsync(out, 3, pcclInt32, to, NULL, comm, &ws);
    pcclResult_t rr = pcclRecvAsync(in, 3, pcclInt32, from, NULL, comm, &wr);
    if (rs == pcclSuccess) rs = pcclWorkWait(ws, NULL);
    if (rr == pcclSuccess) rr = pcclWorkWait(wr, NULL);
    pcclWorkFree(ws);
    pcclWorkFree(wr);
    if (rs != pcclSuccess) return rs;
    if (rr != pcclSuccess) return rr;
    printf("rank %d/%d from rank %d: %d %d %d\n", rank, world, from, (int)in[0], (int)in[1],
           (int)in[2]);

    /* 2. Rank 0 to the last rank, tag 7: only those two call. */
    pcclCollectiveOptions_t o = PCCL_COLLECTIVE_OPTIONS_INIT;
    o.tag = 7;
    pcclResult_t r = pcclSuccess;
    if (rank == 0) {
        const int32_t msg[4] = {7, 8, 9, 10};
        r = pcclSend(msg, 4, pcclInt32, world - 1, &o, comm, NULL);
    } else if (rank == world - 1) {
        int32_t msg[4] = {0, 0, 0, 0};
        pcclCollectiveInfo_t info;
        r = pcclRecv(msg, 4, pcclInt32, 0, &o, comm, &info);
        if (r == pcclSuccess)
            printf("rank %d/%d from rank 0 (tag 7, %llu bytes): %d %d %d %d\n", rank, world,
                   (unsigned long long)info.rx_bytes, (int)msg[0], (int)msg[1], (int)msg[2],
                   (int)msg[3]);
    }
    /* 3. Nobody leaves (pcclDestroyCommunicator) while others still exchange. */
    return r == pcclSuccess ? pcclBarrier(NULL, comm, NULL) : r;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s MASTER_URL WORLD\n", argv[0]);
        return 2;
    }
    CHECK(pcclInit());
    pcclComm_t *comm = join_group(argv[1], atoi(argv[2]));
    for (;;) {
        pcclResult_t r = attempt(comm);
        if (r == pcclSuccess) break;
        if (r != pcclUpdateTopologyFailed && r != pcclRankConnectionLost && r != pcclTimeout &&
            r != pcclTooFewPeers)
            CHECK(r);
        r = pcclUpdateTopology(comm); /* then read rank and world again: attempt() does */
        if (r != pcclSuccess && r != pcclUpdateTopologyFailed) CHECK(r);
    }
    CHECK(pcclDestroyCommunicator(comm));
    return 0;
}
