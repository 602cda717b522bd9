/* examples/collectives/all.c: all-gather, reduce-scatter and all-to-all, out of
 * place and in place.
 *
 *   ccoip_master --listen tcp://127.0.0.1:48148 &
 *   for i in 1 2 3; do ./all tcp://127.0.0.1:48148 3 & done; wait */
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
    if (rank < 0) return pcclUpdateTopologyFailed;
    if (world < 2) return pcclTooFewPeers;
    const size_t n = (size_t)world;
    int32_t *ag = malloc(sizeof(int32_t) * 2 * n);    /* all-gather: world blocks of 2 */
    int32_t *ag_ip = malloc(sizeof(int32_t) * 2 * n); /* the same, in place */
    int32_t *rs_in = malloc(sizeof(int32_t) * 2 * n); /* reduce-scatter's input */
    int32_t *rs_ip = malloc(sizeof(int32_t) * 2 * n); /* the same, in place */
    int32_t *a2a_in = malloc(sizeof(int32_t) * n);    /* all-to-all: one element per rank */
    int32_t *a2a = malloc(sizeof(int32_t) * n);
    int32_t *a2a_ip = malloc(sizeof(int32_t) * n);
    if (!ag || !ag_ip || !rs_in || !rs_ip || !a2a_in || !a2a || !a2a_ip) exit(1);

    /* All-gather: {10 r, 10 r + 1} of every rank r lands in block r of everyone's ag. */
    const int32_t mine[2] = {10 * rank, 10 * rank + 1};
    pcclResult_t r = pcclAllGather(mine, ag, 2, pcclInt32, NULL, comm, NULL);
    /* In place: the input is already block `rank` of the output. */
    ag_ip[2 * rank] = mine[0];
    ag_ip[2 * rank + 1] = mine[1];
    if (r == pcclSuccess)
        r = pcclAllGather(ag_ip + 2 * rank, ag_ip, 2, pcclInt32, NULL, comm, NULL);

    /* Reduce-scatter (sum): block r of the sum of every rank's world * 2 elements lands in
     * rank r's 2 elements. */
    for (int j = 0; j < 2 * world; j++)
        rs_in[j] = rs_ip[j] = 100 * rank + j;
    int32_t rs[2] = {0, 0};
    if (r == pcclSuccess) r = pcclReduceScatter(rs_in, rs, 2, pcclInt32, pcclSum, NULL, comm, NULL);
    /* In place: the output is block `rank` of the input. */
    if (r == pcclSuccess)
        r = pcclReduceScatter(rs_ip, rs_ip + 2 * rank, 2, pcclInt32, pcclSum, NULL, comm, NULL);

    /* All-to-all: element j of rank i's input lands in element i of rank j's output. */
    for (int j = 0; j < world; j++)
        a2a_in[j] = a2a_ip[j] = 10 * rank + j;
    if (r == pcclSuccess) r = pcclAllToAll(a2a_in, a2a, 1, pcclInt32, NULL, comm, NULL);
    if (r == pcclSuccess) r = pcclAllToAll(a2a_ip, a2a_ip, 1, pcclInt32, NULL, comm, NULL);

    if (r == pcclSuccess) {
        show(rank, world, "all-gather", ag, 2 * world);
        show(rank, world, "all-gather in place", ag_ip, 2 * world);
        show(rank, world, "reduce-scatter", rs, 2);
        show(rank, world, "reduce-scatter in place", rs_ip + 2 * rank, 2);
        show(rank, world, "all-to-all", a2a, world);
        show(rank, world, "all-to-all in place", a2a_ip, world);
    }
    free(ag);
    free(ag_ip);
    free(rs_in);
    free(rs_ip);
    free(a2a_in);
    free(a2a);
    free(a2a_ip);
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
