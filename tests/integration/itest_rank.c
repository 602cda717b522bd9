/*
 * itest_rank.c — PCCL_ATTRIBUTE_RANK and PCCL_ATTRIBUTE_EPOCH through libpccl
 * (docs/core.md §3.6; docs/design/collectives.md §1): an in-process master
 * and peers on their own threads.
 *
 * Phase 1: three peers connect and update the topology until their group has
 * 3 members. Right after its pcclConnect each peer has a rank in
 * 0 .. PEER_GROUP_WORLD_SIZE - 1 and an epoch > 0; once all three are in, the
 * ranks are distinct, in 0 .. 2, and the epochs equal on all three.
 * Phase 2: a fourth peer connects while the three update the topology: the
 * ranks are then distinct in 0 .. 3 and the epochs equal on all four and
 * larger than phase 1's (a new admission is a new epoch).
 * Phase 3: the master goes away; once a call of a peer failed with
 * pcclMasterConnectionFailed, its RANK is -1 (no installed ring) and its
 * EPOCH the last one. Exit 0 ok, 1 wrong, 2 setup.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "itest_common.h"
#include "pccl.h"

#define FIRST 3u /* phase 1's group */
#define ALL   4u /* with the late peer */

static char g_url[64];
static pthread_barrier_t g_b1; /* FIRST peers + main: phase 1 read */
static pthread_barrier_t g_b2; /* ALL peers + main: phase 2 read */
static pthread_barrier_t g_b3; /* ALL peers + main: the master is gone */

typedef struct peer_arg {
    uint32_t index;
    int rc;
    char msg[160];
    int rank[3];  /* per phase */
    int epoch[3]; /* per phase */
    int world[2];
} peer_arg;

static bool attrs(pcclComm_t *comm, int *rank, int *epoch, int *world)
{
    return pcclGetAttribute(comm, PCCL_ATTRIBUTE_RANK, rank) == pcclSuccess &&
           pcclGetAttribute(comm, PCCL_ATTRIBUTE_EPOCH, epoch) == pcclSuccess &&
           (world == NULL ||
            pcclGetAttribute(comm, PCCL_ATTRIBUTE_PEER_GROUP_WORLD_SIZE, world) == pcclSuccess);
}

static void *peer_main(void *arg)
{
    peer_arg *pa = arg;
    const bool late = pa->index >= FIRST;
    pcclCommCreateParams_t params;
    memset(&params, 0, sizeof params);
    pcclCommCreateOptions_t opts = PCCL_COMM_CREATE_OPTIONS_INIT;
    opts.master_url = g_url;
    opts.timeout_ms = 20000;
    pcclComm_t *comm = NULL;
    int rc = pcclCreateCommunicatorEx(&params, &opts, &comm) == pcclSuccess ? 0 : 2;
    if (rc == 0 && pcclConnect(comm) != pcclSuccess) rc = 2;
    int rank = -2, epoch = -2, world = 0;
    if (rc == 0 && !attrs(comm, &rank, &epoch, &world)) rc = 2;
    if (rc == 0 && (rank < 0 || rank >= world || epoch <= 0)) {
        snprintf(pa->msg, sizeof pa->msg, "after connect: rank %d of world %d, epoch %d", rank,
                 world, epoch);
        rc = 1;
    }
    if (!late) {
        if (rc == 0) rc = itest_grow_to(comm, FIRST);
        if (rc == 0 && !attrs(comm, &pa->rank[0], &pa->epoch[0], &pa->world[0])) rc = 2;
        pthread_barrier_wait(&g_b1);
        if (rc == 0) rc = itest_grow_to(comm, ALL);
    }
    if (rc == 0 && !attrs(comm, &pa->rank[1], &pa->epoch[1], &pa->world[1])) rc = 2;
    pthread_barrier_wait(&g_b2);
    pthread_barrier_wait(&g_b3);
    if (rc == 0) {
        const pcclResult_t r = pcclUpdateTopology(comm);
        if (r != pcclMasterConnectionFailed) {
            snprintf(pa->msg, sizeof pa->msg, "update without a master: %d", (int)r);
            rc = 1;
        }
    }
    if (rc == 0 && !attrs(comm, &pa->rank[2], &pa->epoch[2], NULL)) {
        snprintf(pa->msg, sizeof pa->msg, "attributes unreadable after the master's loss");
        rc = 1;
    }
    if (comm != NULL) pcclDestroyCommunicator(comm);
    pa->rc = rc;
    return NULL;
}

/* Ranks of peers [0, n) distinct in 0 .. n - 1, epochs equal; returns the epoch or -1. */
static int check_phase(const peer_arg *pa, uint32_t n, int phase)
{
    bool seen[ALL] = {false};
    for (uint32_t i = 0; i < n; i++) {
        const int r = pa[i].rank[phase];
        if (pa[i].world[phase] != (int)n || r < 0 || r >= (int)n || seen[r] ||
            pa[i].epoch[phase] != pa[0].epoch[phase] || pa[i].epoch[phase] <= 0) {
            fprintf(stderr,
                    "itest_rank: phase %d peer %u: rank %d world %d epoch %d (peer 0: %d)\n",
                    phase + 1, i, r, pa[i].world[phase], pa[i].epoch[phase], pa[0].epoch[phase]);
            return -1;
        }
        seen[r] = true;
    }
    return pa[0].epoch[phase];
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (pcclInit() != pcclSuccess) return 2;
    pcclMasterInstance_t *m = NULL;
    if (itest_start_master(&m, g_url, sizeof g_url) != 0) return 2;
    pthread_barrier_init(&g_b1, NULL, FIRST + 1u);
    pthread_barrier_init(&g_b2, NULL, ALL + 1u);
    pthread_barrier_init(&g_b3, NULL, ALL + 1u);
    pthread_t th[ALL];
    peer_arg pa[ALL];
    memset(pa, 0, sizeof pa);
    for (uint32_t i = 0; i < FIRST; i++) {
        pa[i].index = i;
        if (pthread_create(&th[i], NULL, peer_main, &pa[i]) != 0) return 2;
    }
    pthread_barrier_wait(&g_b1);
    int rc = 0;
    bool ok = true;
    for (uint32_t i = 0; i < FIRST; i++)
        ok = ok && pa[i].rc == 0;
    const int e1 = ok ? check_phase(pa, FIRST, 0) : 0;
    if (e1 < 0) rc = 1;
    pa[FIRST].index = FIRST;
    if (pthread_create(&th[FIRST], NULL, peer_main, &pa[FIRST]) != 0) return 2;
    pthread_barrier_wait(&g_b2);
    ok = rc == 0;
    for (uint32_t i = 0; i < ALL; i++)
        ok = ok && pa[i].rc == 0;
    if (ok) {
        const int e2 = check_phase(pa, ALL, 1);
        if (e2 < 0 || e2 <= e1) {
            fprintf(stderr, "itest_rank: epoch %d after the admission, %d before\n", e2, e1);
            rc = 1;
        }
    }
    pcclInterruptMaster(m);
    pcclMasterAwaitTermination(m);
    pcclDestroyMaster(m);
    pthread_barrier_wait(&g_b3);
    for (uint32_t i = 0; i < ALL; i++) {
        pthread_join(th[i], NULL);
        if (pa[i].rc != 0) {
            fprintf(stderr, "itest_rank: peer %u failed (%d): %s\n", i, pa[i].rc, pa[i].msg);
            if (rc == 0 || pa[i].rc == 1) rc = pa[i].rc;
        } else if (rc == 0 && (pa[i].rank[2] != -1 || pa[i].epoch[2] != pa[i].epoch[1])) {
            fprintf(stderr, "itest_rank: peer %u without a master: rank %d epoch %d (was %d)\n", i,
                    pa[i].rank[2], pa[i].epoch[2], pa[i].epoch[1]);
            rc = 1;
        }
    }
    if (rc == 0) printf("DONE: ranks distinct per epoch, epochs equal and growing\n");
    return rc;
}
