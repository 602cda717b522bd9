/*
 * itest_split_peer.c — one peer process of the split integration test
 * (tests/integration/coll.py --peer itest_split_peer --scenario exact;
 * docs/collectives-split.md): pcclCommSplit through libpccl, every result
 * checked exactly.
 *
 *   itest_split_peer --url URL --index I --world N --mode exact
 *
 * exact: grows to N (N >= 3); ranks 0 .. N-2 split off (the list given in
 * descending order) while rank N-1 admits the children with
 * pcclUpdateTopology, as any member of the run does for newcomers; in the
 * child: world N-1, rank = the parent rank, an all-gather of the parent ranks
 * in child rank order, an exact all-reduce, a send / recv; bad arguments
 * (a list without the caller, a rank twice, out of range) are
 * pcclInvalidArgument and n = 0 gives no communicator; then every rank splits
 * the whole group again (a second child, world N) and runs an all-reduce
 * there; both children are destroyed and the parent's all-reduce is exact.
 * Exit: 0 ok, 1 wrong result, 2 setup, 3 a bound missed.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "itest_common.h"
#include "pccl.h"

static int g_index;

#define FAIL(code, ...)                                                                            \
    do {                                                                                           \
        fprintf(stderr, "itest_split_peer %d: ", g_index);                                         \
        fprintf(stderr, __VA_ARGS__);                                                              \
        fprintf(stderr, "\n");                                                                     \
        return (code);                                                                             \
    } while (0)

static int attr(pcclComm_t *c, pcclAttribute_t a)
{
    int v = -1;
    if (pcclGetAttribute(c, a, &v) != pcclSuccess) return -1;
    return v;
}

/* Sum of ranks 0 .. n-1 as an int32 all-reduce on comm, checked. */
static int allreduce_exact(pcclComm_t *comm, int n)
{
    const int rank = attr(comm, PCCL_ATTRIBUTE_RANK);
    int32_t in[5], out[5];
    for (int k = 0; k < 5; k++)
        in[k] = rank * 10 + k;
    pcclReduceDescriptor_t desc;
    memset(&desc, 0, sizeof desc);
    desc.count = 5;
    desc.op = pcclSum;
    desc.tag = 0;
    desc.src_descriptor.datatype = pcclInt32;
    desc.src_descriptor.distribution_hint = PCCL_DISTRIBUTION_HINT_NONE;
    desc.quantization_options.quantized_datatype = pcclInt32;
    desc.quantization_options.algorithm = pcclQuantNone;
    pcclResult_t r = pcclTimeout;
    for (int tries = 0; tries < 20 && r != pcclSuccess; tries++) {
        r = pcclAllReduce(in, out, &desc, comm, NULL);
        if (r != pcclSuccess) pcclUpdateTopology(comm);
    }
    if (r != pcclSuccess) FAIL(1, "all-reduce: %d", (int)r);
    for (int k = 0; k < 5; k++) {
        const int32_t want = (int32_t)(10 * n * (n - 1) / 2 + n * k);
        if (out[k] != want) FAIL(1, "all-reduce [%d] = %d, want %d", k, out[k], want);
    }
    return 0;
}

/* Rank N-1 outside the split: admits newcomers (pcclUpdateTopology, every accepted peer's vote)
 * until the run holds `global` peers. pcclArePeersPending is itself a vote of every accepted peer
 * (docs/protocol.md §6.5), which the splitting members do not cast: it is not used here. */
static int admit_until(pcclComm_t *c, int global)
{
    for (int tries = 0; tries < 100; tries++) {
        if (attr(c, PCCL_ATTRIBUTE_GLOBAL_WORLD_SIZE) >= global) return 0;
        const pcclResult_t r = pcclUpdateTopology(c);
        if (r != pcclSuccess && r != pcclUpdateTopologyFailed) FAIL(2, "update: %d", (int)r);
    }
    FAIL(3, "the run never held %d peers", global);
}

static int mode_exact(pcclComm_t *c, int n)
{
    const int rank = attr(c, PCCL_ATTRIBUTE_RANK);
    if (rank < 0) return 2;
    pcclComm_t *child = NULL;
    /* Bad arguments and the empty list touch nothing. */
    const int others[1] = {(rank + 1) % n}, twice[2] = {rank, rank}, out_of_range[2] = {rank, n};
    if (pcclCommSplit(c, others, 1, &child) != pcclInvalidArgument || child != NULL ||
        pcclCommSplit(c, twice, 2, &child) != pcclInvalidArgument ||
        pcclCommSplit(c, out_of_range, 2, &child) != pcclInvalidArgument ||
        pcclCommSplit(c, NULL, 2, &child) != pcclInvalidArgument) {
        FAIL(1, "bad arguments were not refused");
    }
    if (pcclCommSplit(c, others, 0, &child) != pcclSuccess || child != NULL)
        FAIL(1, "n = 0 must give no communicator");
    /* 1. Ranks 0 .. n-2 split off; rank n-1 admits them. */
    int subset[64];
    for (int i = 0; i < n - 1; i++)
        subset[i] = n - 2 - i; /* any order */
    if (rank == n - 1) {
        const int rc = admit_until(c, n + (n - 1));
        if (rc != 0) return rc;
    } else {
        const pcclResult_t r = pcclCommSplit(c, subset, (size_t)(n - 1), &child);
        if (r != pcclSuccess || child == NULL) FAIL(1, "split: %d", (int)r);
        if (attr(child, PCCL_ATTRIBUTE_PEER_GROUP_WORLD_SIZE) != n - 1)
            FAIL(1, "child world %d", attr(child, PCCL_ATTRIBUTE_PEER_GROUP_WORLD_SIZE));
        if (attr(child, PCCL_ATTRIBUTE_RANK) != rank)
            FAIL(1, "child rank %d, parent rank %d", attr(child, PCCL_ATTRIBUTE_RANK), rank);
        int32_t mine = rank, all[64];
        if (pcclAllGather(&mine, all, 1, pcclInt32, NULL, child, NULL) != pcclSuccess)
            FAIL(1, "child all-gather");
        for (int i = 0; i < n - 1; i++) {
            if (all[i] != i) FAIL(1, "child rank %d holds parent rank %d", i, (int)all[i]);
        }
        int rc = allreduce_exact(child, n - 1);
        if (rc != 0) return rc;
        /* A send / recv in the child: child rank 0 to the last child rank. */
        int32_t msg[3] = {0, 0, 0};
        pcclResult_t r2 = pcclSuccess;
        if (rank == 0) {
            const int32_t v[3] = {41, 42, 43};
            r2 = pcclSend(v, 3, pcclInt32, n - 2, NULL, child, NULL);
        } else if (rank == n - 2) {
            r2 = pcclRecv(msg, 3, pcclInt32, 0, NULL, child, NULL);
            if (r2 == pcclSuccess && (msg[0] != 41 || msg[1] != 42 || msg[2] != 43))
                FAIL(1, "child recv %d %d %d", msg[0], msg[1], msg[2]);
        }
        if (r2 != pcclSuccess) FAIL(1, "child send / recv: %d", (int)r2);
        if (pcclBarrier(NULL, child, NULL) != pcclSuccess) FAIL(1, "child barrier");
    }
    printf("CHILD_OK\n");
    /* 2. The first child leaves; then everyone splits the whole group (a second child of
     *    world n) and runs an all-reduce there. */
    if (child != NULL && pcclDestroyCommunicator(child) != pcclSuccess) FAIL(1, "destroy child");
    child = NULL;
    int whole[64];
    for (int i = 0; i < n; i++)
        whole[i] = i;
    pcclComm_t *child2 = NULL;
    pcclResult_t r = pcclTimeout;
    for (int tries = 0; tries < 5 && r != pcclSuccess; tries++) {
        /* The first child's departure may re-wire after this peer read its rank: retry. */
        r = pcclCommSplit(c, whole, (size_t)n, &child2);
        if (r == pcclUpdateTopologyFailed) pcclUpdateTopology(c);
    }
    if (r != pcclSuccess || child2 == NULL) FAIL(1, "second split: %d", (int)r);
    if (attr(child2, PCCL_ATTRIBUTE_PEER_GROUP_WORLD_SIZE) != n ||
        attr(child2, PCCL_ATTRIBUTE_RANK) != attr(c, PCCL_ATTRIBUTE_RANK)) {
        FAIL(1, "second child: world %d rank %d",
             attr(child2, PCCL_ATTRIBUTE_PEER_GROUP_WORLD_SIZE), attr(child2, PCCL_ATTRIBUTE_RANK));
    }
    int rc = allreduce_exact(child2, n);
    if (rc != 0) return rc;
    if (pcclBarrier(NULL, child2, NULL) != pcclSuccess) FAIL(1, "second child barrier");
    if (pcclDestroyCommunicator(child2) != pcclSuccess) FAIL(1, "destroy second child");
    printf("CHILD2_OK\n");
    /* 3. The parent is whole and exact. */
    return allreduce_exact(c, n);
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *url = NULL, *mode = "exact";
    uint32_t n = 3;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--url") == 0) url = argv[i + 1];
        if (strcmp(argv[i], "--index") == 0) g_index = atoi(argv[i + 1]);
        if (strcmp(argv[i], "--world") == 0) n = (uint32_t)atoi(argv[i + 1]);
        if (strcmp(argv[i], "--mode") == 0) mode = argv[i + 1];
    }
    if (url == NULL || n < 3 || n > 64 || pcclInit() != pcclSuccess) return 2;
    pcclComm_t *c = NULL;
    if (itest_connect_group_ex(url, n, 0, 30000, &c) != 0) return 2;
    printf("READY\n");
    int rc = strcmp(mode, "exact") == 0 ? mode_exact(c, (int)n) : 2;
    if (rc == 0) printf("DONE\n");
    pcclDestroyCommunicator(c);
    return rc;
}
