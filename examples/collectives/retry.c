/* examples/collectives/retry.c: an all-gather that survives membership changes.
 *
 *   ccoip_master --listen tcp://127.0.0.1:48148 &
 *   for i in 1 2 3; do ./retry tcp://127.0.0.1:48148 3 & done; wait
 *
 * Each process waits until the group has WORLD members, then all-gathers
 * {10 * rank, 10 * rank + 1} and prints what it received. */
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

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s MASTER_URL WORLD\n", argv[0]);
        return 2;
    }
    CHECK(pcclInit());
    pcclComm_t *comm = join_group(argv[1], atoi(argv[2]));
    for (;;) {
        /* Ranks and world belong to the current epoch: read them again on every attempt. */
        int rank = -1, world = 0;
        CHECK(pcclGetAttribute(comm, PCCL_ATTRIBUTE_RANK, &rank));
        CHECK(pcclGetAttribute(comm, PCCL_ATTRIBUTE_PEER_GROUP_WORLD_SIZE, &world));
        pcclResult_t r = pcclUpdateTopologyFailed;
        if (rank >= 0 && world >= 2) {
            const int32_t mine[2] = {10 * rank, 10 * rank + 1};
            int32_t *all = malloc(sizeof(int32_t) * 2 * (size_t)world);
            if (all == NULL) return 1;
            pcclCollectiveInfo_t info;
            r = pcclAllGather(mine, all, 2, pcclInt32, NULL, comm, &info);
            if (r == pcclSuccess) {
                printf("rank %u/%u all-gather:", info.rank, info.world_size);
                for (int i = 0; i < 2 * world; i++)
                    printf(" %d", all[i]);
                printf("\n");
            }
            free(all);
            if (r == pcclSuccess) break;
        }
        switch (r) {
        case pcclUpdateTopologyFailed: /* the membership changed before the op started */
        case pcclRankConnectionLost:   /* a member was lost while it ran */
        case pcclTimeout:              /* a member's timeout cancelled it */
        case pcclTooFewPeers:          /* wait for others to join */
            r = pcclUpdateTopology(comm);
            if (r != pcclSuccess && r != pcclUpdateTopologyFailed) CHECK(r);
            continue;
        default:
            CHECK(r); /* a bug of the caller: pcclInvalidArgument, pcclInvalidUsage */
        }
    }
    CHECK(pcclDestroyCommunicator(comm));
    return 0;
}
