/* examples/collectives/rooted.c: broadcast, reduce, gather and scatter.
 *
 *   ccoip_master --listen tcp://127.0.0.1:48148 &
 *   for i in 1 2 3; do ./rooted tcp://127.0.0.1:48148 3 & done; wait
 *
 * The root is the last rank of the current epoch; every op is retried after
 * a membership change (the inputs are rebuilt from the new rank and world). */
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

static void show(int rank, int world, const char *what, const int32_t *v, int n)
{
    printf("rank %d/%d %s:", rank, world, what);
    for (int i = 0; i < n; i++)
        printf(" %d", v[i]);
    printf("\n");
}

static pcclResult_t attempt(pcclComm_t *comm)
{
    int rank = -1, world = 0;
    CHECK(pcclGetAttribute(comm, PCCL_ATTRIBUTE_RANK, &rank));
    CHECK(pcclGetAttribute(comm, PCCL_ATTRIBUTE_PEER_GROUP_WORLD_SIZE, &world));
    if (rank < 0) return pcclUpdateTopologyFailed; /* re-wiring: update the topology */
    if (world < 2) return pcclTooFewPeers;
    const int root = world - 1;

    /* Broadcast: the root's 4 elements land in every member's buf. */
    int32_t buf[4] = {0, 0, 0, 0};
    for (int k = 0; k < 4 && rank == root; k++)
        buf[k] = 100 + k;
    pcclResult_t r = pcclBroadcast(buf, 4, pcclInt32, root, NULL, comm, NULL);

    /* Reduce, in place at the root (sendbuf == recvbuf); the others pass no recvbuf. */
    int32_t red[4];
    for (int k = 0; k < 4; k++)
        red[k] = 10 * rank + k;
    if (r == pcclSuccess)
        r = pcclReduce(red, rank == root ? red : NULL, 4, pcclInt32, pcclSum, root, NULL, comm,
                       NULL);

    /* Gather: each member's 2 elements land in block `rank` of the root's world * 2. */
    const int32_t mine[2] = {10 * rank, 10 * rank + 1};
    int32_t *gathered = malloc(sizeof(int32_t) * 2 * (size_t)world);
    if (gathered == NULL) exit(1);
    if (r == pcclSuccess)
        r = pcclGather(mine, rank == root ? gathered : NULL, 2, pcclInt32, root, NULL, comm, NULL);

    /* Scatter: block r of the root's world * 2 elements lands in rank r's 2 elements. */
    int32_t *blocks = malloc(sizeof(int32_t) * 2 * (size_t)world);
    if (blocks == NULL) exit(1);
    for (int i = 0; i < 2 * world; i++)
        blocks[i] = 100 + i;
    int32_t got[2] = {0, 0};
    if (r == pcclSuccess)
        r = pcclScatter(rank == root ? blocks : NULL, got, 2, pcclInt32, root, NULL, comm, NULL);

    if (r == pcclSuccess) {
        show(rank, world, "broadcast", buf, 4);
        if (rank == root) show(rank, world, "reduce", red, 4);
        if (rank == root) show(rank, world, "gather", gathered, 2 * world);
        show(rank, world, "scatter", got, 2);
    }
    free(gathered);
    free(blocks);
    return r;
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
