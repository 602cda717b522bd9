/*
 * itest_timeout_uaf.c — after a call returns pcclTimeout the library never touches the caller's
 * buffers again (docs/security.md, "Bounded resources"; label "hostile"). An in-process master
 * and two peers on their own threads: peer A's communicator has timeout_ms = 400, peer B's 20 s.
 * Each round A all-reduces (int32 SUM) while B joins late (700 ms: A's call times out while the
 * op waits for B) or almost at once (380 ms: A's call may time out while the op runs); as soon
 * as A's call returns pcclTimeout, A overwrites both its buffers with a poison pattern and frees
 * them. Then B's call must either fail or return exactly A's original input plus B's, and under
 * AddressSanitizer nothing may report a use after free (before the fix the abandoned op kept
 * reading A's send buffer and writing its receive buffer). Sizes: 4 KiB (the master relay),
 * 1 MiB and 16 MiB (the ring). A last round with both on time checks that A still works.
 * Exit 0 ok, 1 wrong, 2 setup.
 */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "itest_common.h"
#include "pccl.h"

static char g_url[64];

typedef struct round_spec {
    uint32_t count;
    long b_delay_ms;
} round_spec;

static const round_spec g_rounds[] = {
    {1024u, 700}, {262144u, 700}, {4194304u, 700}, {1024u, 380}, {262144u, 380}, {4194304u, 380},
};
#define NROUNDS (sizeof g_rounds / sizeof g_rounds[0])

static pthread_barrier_t g_bar;
static int g_a_timeouts;

static int connect_group(uint32_t timeout_ms, pcclComm_t **out)
{
    pcclCommCreateParams_t params;
    memset(&params, 0, sizeof params);
    pcclCommCreateOptions_t opts = PCCL_COMM_CREATE_OPTIONS_INIT;
    opts.master_url = g_url;
    opts.timeout_ms = timeout_ms;
    *out = NULL;
    if (pcclCreateCommunicatorEx(&params, &opts, out) != pcclSuccess) return 2;
    if (pcclConnect(*out) != pcclSuccess) return 2;
    for (int tries = 0; tries < 1500; tries++) {
        int ws = 0;
        if (pcclGetAttribute(*out, PCCL_ATTRIBUTE_CURRENT_WORLD_SIZE, &ws) != pcclSuccess) return 2;
        if (ws >= 2) return 0;
        bool pending = false;
        if (pcclArePeersPending(*out, &pending) == pcclSuccess && !pending) itest_sleep_ms(10);
        const pcclResult_t r = pcclUpdateTopology(*out);
        if (r != pcclSuccess && r != pcclUpdateTopologyFailed && r != pcclTimeout) return 2;
    }
    return 2;
}

static void desc_for(pcclReduceDescriptor_t *d, uint32_t count, uint64_t tag)
{
    memset(d, 0, sizeof *d);
    d->count = count;
    d->op = pcclSum;
    d->tag = tag;
    d->src_descriptor.datatype = pcclInt32;
    d->quantization_options.quantized_datatype = pcclInt32;
}

static int32_t a_value(uint32_t j)
{
    return (int32_t)(1u + j % 1000u);
}

static int32_t b_value(uint32_t j)
{
    return (int32_t)(1000000u + j % 777u);
}

static void *peer_a(void *arg)
{
    int *rc = arg;
    pcclComm_t *comm = NULL;
    *rc = connect_group(400, &comm);
    pthread_barrier_wait(&g_bar);
    for (uint32_t r = 0; r < NROUNDS && *rc == 0; r++) {
        const uint32_t n = g_rounds[r].count;
        int32_t *send = malloc((size_t)n * 4u);
        int32_t *recv = malloc((size_t)n * 4u);
        if (send == NULL || recv == NULL) {
            *rc = 2;
            break;
        }
        for (uint32_t j = 0; j < n; j++) {
            send[j] = a_value(j);
            recv[j] = -1;
        }
        pcclReduceDescriptor_t d;
        desc_for(&d, n, 100u + r);
        pthread_barrier_wait(&g_bar); /* B starts its delay */
        const pcclResult_t res = pcclAllReduce(send, recv, &d, comm, NULL);
        if (res == pcclTimeout) {
            g_a_timeouts++;
            memset(send, 0xAB, (size_t)n * 4u); /* the caller reuses and frees its buffers */
            memset(recv, 0xCD, (size_t)n * 4u);
        }
        free(send);
        free(recv);
        printf("round %u (%u int32, B after %ld ms): A's call returned %d\n", r, n,
               g_rounds[r].b_delay_ms, (int)res);
        pthread_barrier_wait(&g_bar); /* B's call returned */
    }
    /* On time: A still works (4 KiB, both at once). */
    if (*rc == 0) {
        int32_t send[1024], recv[1024];
        for (uint32_t j = 0; j < 1024u; j++)
            send[j] = a_value(j);
        pcclReduceDescriptor_t d;
        desc_for(&d, 1024u, 999u);
        pthread_barrier_wait(&g_bar);
        pcclResult_t res = pcclTimeout;
        for (int t = 0; t < 20 && res == pcclTimeout; t++)
            res = pcclAllReduce(send, recv, &d, comm, NULL);
        for (uint32_t j = 0; j < 1024u && res == pcclSuccess; j++) {
            if (recv[j] != a_value(j) + b_value(j)) {
                fprintf(stderr, "A: final round wrong at %u: %d\n", j, recv[j]);
                *rc = 1;
                break;
            }
        }
        if (res != pcclSuccess) {
            fprintf(stderr, "A: final round returned %d\n", (int)res);
            *rc = 1;
        }
    }
    itest_sleep_ms(300);
    if (comm != NULL) pcclDestroyCommunicator(comm);
    return NULL;
}

static void *peer_b(void *arg)
{
    int *rc = arg;
    pcclComm_t *comm = NULL;
    *rc = connect_group(20000, &comm);
    pthread_barrier_wait(&g_bar);
    for (uint32_t r = 0; r < NROUNDS && *rc == 0; r++) {
        const uint32_t n = g_rounds[r].count;
        int32_t *send = malloc((size_t)n * 4u);
        int32_t *recv = malloc((size_t)n * 4u);
        if (send == NULL || recv == NULL) {
            *rc = 2;
            break;
        }
        for (uint32_t j = 0; j < n; j++)
            send[j] = b_value(j);
        pcclReduceDescriptor_t d;
        desc_for(&d, n, 100u + r);
        pthread_barrier_wait(&g_bar);
        itest_sleep_ms(g_rounds[r].b_delay_ms);
        const pcclResult_t res = pcclAllReduce(send, recv, &d, comm, NULL);
        for (uint32_t j = 0; j < n && res == pcclSuccess; j++) {
            if (recv[j] != a_value(j) + b_value(j)) {
                fprintf(stderr, "B: round %u: wrong sum at %u: %d, want %d\n", r, j, recv[j],
                        a_value(j) + b_value(j));
                *rc = 1;
                break;
            }
        }
        printf("round %u: B's call returned %d%s\n", r, (int)res,
               res == pcclSuccess && *rc == 0 ? " (exact)" : "");
        free(send);
        free(recv);
        pthread_barrier_wait(&g_bar);
    }
    if (*rc == 0) {
        int32_t send[1024], recv[1024];
        for (uint32_t j = 0; j < 1024u; j++)
            send[j] = b_value(j);
        pcclReduceDescriptor_t d;
        desc_for(&d, 1024u, 999u);
        pthread_barrier_wait(&g_bar);
        const pcclResult_t res = pcclAllReduce(send, recv, &d, comm, NULL);
        if (res != pcclSuccess) {
            fprintf(stderr, "B: final round returned %d\n", (int)res);
            *rc = 1;
        }
    }
    itest_sleep_ms(300);
    if (comm != NULL) pcclDestroyCommunicator(comm);
    return NULL;
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (pcclInit() != pcclSuccess) return 2;
    pcclMasterInstance_t *m = NULL;
    if (itest_start_master(&m, g_url, sizeof g_url) != 0) return 2;
    pthread_barrier_init(&g_bar, NULL, 2);
    int rca = 0, rcb = 0;
    pthread_t ta, tb;
    if (pthread_create(&ta, NULL, peer_a, &rca) != 0) return 2;
    if (pthread_create(&tb, NULL, peer_b, &rcb) != 0) return 2;
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    pcclInterruptMaster(m);
    pcclMasterAwaitTermination(m);
    pcclDestroyMaster(m);
    pthread_barrier_destroy(&g_bar);
    int rc = rca != 0 ? rca : rcb;
    if (rc == 0 && g_a_timeouts == 0) {
        fprintf(stderr, "no call of A timed out: the test checked nothing\n");
        rc = 2;
    }
    if (rc == 0)
        printf("DONE: %d timed-out calls, no buffer touched after pcclTimeout\n", g_a_timeouts);
    return rc;
}
