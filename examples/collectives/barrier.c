/* examples/collectives/barrier.c: a barrier, work objects, and a timeout.
 *
 *   ccoip_master --listen tcp://127.0.0.1:48148 &
 *   for i in 1 2 3; do ./barrier tcp://127.0.0.1:48148 3 & done; wait
 *
 * 1. a barrier;
 * 2. two ops in flight at once on tags 1 and 2, started in opposite orders by
 *    even and odd ranks, one polled, both waited for;
 * 3. once, an all-gather on tag 3 with a 500 ms timeout that the last rank
 *    never calls: every other member gets pcclTimeout; then all meet in a
 *    barrier. */
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

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static pcclResult_t attempt(pcclComm_t *comm)
{
    int rank = -1, world = 0;
    CHECK(pcclGetAttribute(comm, PCCL_ATTRIBUTE_RANK, &rank));
    CHECK(pcclGetAttribute(comm, PCCL_ATTRIBUTE_PEER_GROUP_WORLD_SIZE, &world));
    if (rank < 0) return pcclUpdateTopologyFailed;
    if (world < 2) return pcclTooFewPeers;

    /* 1. Returns once every member of the group entered it. */
    pcclResult_t r = pcclBarrier(NULL, comm, NULL);
    if (r != pcclSuccess) return r;

    /* 2. An all-gather (tag 1) and a broadcast from rank 0 (tag 2) in flight at once. */
    pcclCollectiveOptions_t o1 = PCCL_COLLECTIVE_OPTIONS_INIT, o2 = PCCL_COLLECTIVE_OPTIONS_INIT;
    o1.tag = 1;
    o2.tag = 2;
    const int32_t mine = rank + 1;
    int32_t *ag = malloc(sizeof(int32_t) * (size_t)world);
    if (ag == NULL) exit(1);
    int32_t bc = rank == 0 ? 42 : 0;
    pcclWork_t *w1 = NULL, *w2 = NULL;
    pcclResult_t r1, r2;
    if (rank % 2 == 0) {
        r1 = pcclAllGatherAsync(&mine, ag, 1, pcclInt32, &o1, comm, &w1);
        r2 = pcclBroadcastAsync(&bc, 1, pcclInt32, 0, &o2, comm, &w2);
    } else {
        r2 = pcclBroadcastAsync(&bc, 1, pcclInt32, 0, &o2, comm, &w2);
        r1 = pcclAllGatherAsync(&mine, ag, 1, pcclInt32, &o1, comm, &w1);
    }
    if (r2 == pcclSuccess) { /* poll the broadcast (other work could go here) */
        bool done = false;
        while (pcclWorkIsCompleted(w2, &done) == pcclSuccess && !done)
            nanosleep(&(struct timespec){0, 1000000L}, NULL);
        pcclCollectiveInfo_t info;
        r2 = pcclWorkWait(w2, &info); /* returns at once now */
    }
    if (r1 == pcclSuccess) r1 = pcclWorkWait(w1, NULL);
    pcclWorkFree(w1); /* free both before pcclUpdateTopology (NULL is fine) */
    pcclWorkFree(w2);
    r = r1 != pcclSuccess ? r1 : r2;
    if (r == pcclSuccess) {
        printf("rank %d/%d barrier passed\n", rank, world);
        printf("rank %d/%d all-gather (tag 1):", rank, world);
        for (int i = 0; i < world; i++)
            printf(" %d", ag[i]);
        printf("\nrank %d/%d broadcast (tag 2): %d\n", rank, world, bc);
    }
    free(ag);
    return r;
}

/* 3. A member that never calls: the others' op is cancelled after its timeout. Run once: a
 * cancel may re-wire the group (a new epoch), so the barrier after it is retried on its own. */
static void timeout_demo(pcclComm_t *comm)
{
    int rank = -1, world = 0;
    CHECK(pcclGetAttribute(comm, PCCL_ATTRIBUTE_RANK, &rank));
    CHECK(pcclGetAttribute(comm, PCCL_ATTRIBUTE_PEER_GROUP_WORLD_SIZE, &world));
    const char *outcome = "skipped it";
    if (rank != world - 1) {
        pcclCollectiveOptions_t o3 = PCCL_COLLECTIVE_OPTIONS_INIT;
        o3.tag = 3;
        o3.timeout_ms = 500;
        const int32_t mine = rank + 1;
        int32_t *late = malloc(sizeof(int32_t) * (size_t)world);
        if (late == NULL) exit(1);
        const double t0 = now_ms();
        const pcclResult_t r = pcclAllGather(&mine, late, 1, pcclInt32, &o3, comm, NULL);
        const double took = now_ms() - t0;
        free(late);
        if (r != pcclTimeout) CHECK(r == pcclSuccess ? pcclInternalError : r);
        /* The first member whose timeout elapses cancels the op for all: a member that
         * started a little later sees it end a little before its own 500 ms. */
        outcome = took >= 250.0 ? "pcclTimeout" : "pcclTimeout too early";
    } else {
        nanosleep(&(struct timespec){1, 0}, NULL); /* busy elsewhere, then the barrier */
    }
    for (;;) { /* everyone together again */
        pcclResult_t r = pcclBarrier(NULL, comm, NULL);
        if (r == pcclSuccess) break;
        if (r != pcclUpdateTopologyFailed && r != pcclRankConnectionLost && r != pcclTimeout)
            CHECK(r);
        r = pcclUpdateTopology(comm);
        if (r != pcclSuccess && r != pcclUpdateTopologyFailed) CHECK(r);
    }
    printf("rank %d/%d all-gather (tag 3, timeout 500 ms): %s\n", rank, world, outcome);
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
    timeout_demo(comm);
    CHECK(pcclDestroyCommunicator(comm));
    return 0;
}
