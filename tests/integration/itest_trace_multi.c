/*
 * itest_trace_multi.c — several traced cores in one process (PCCL_TRACE
 * naming, transport/README.md): an in-process master and 2 peers on their
 * own threads, 2 exact all-reduces each, then everything is destroyed. The
 * master (created first) writes PCCL_TRACE, the peers PCCL_TRACE.1 and
 * PCCL_TRACE.2; trace_replay.sh replays all three. Exit 0 ok, 1 wrong
 * result, 2 setup.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "itest_common.h"
#include "pccl.h"

#define WORLD 2u
#define COUNT 4096u

static char g_url[64];

static void *peer_main(void *arg)
{
    const uint32_t index = *(const uint32_t *)arg;
    static int32_t bufs[WORLD][2][COUNT];
    int32_t *a = bufs[index][0], *b = bufs[index][1];
    pcclComm_t *comm = NULL;
    intptr_t rc = itest_connect_group(g_url, WORLD, &comm);
    if (comm == NULL) return (void *)2;
    pcclReduceDescriptor_t desc;
    memset(&desc, 0, sizeof desc);
    desc.count = COUNT;
    desc.op = pcclSum;
    desc.src_descriptor.datatype = pcclInt32;
    desc.quantization_options.quantized_datatype = pcclInt32;
    for (uint32_t k = 0; k < 2u && rc == 0; k++) {
        for (uint32_t j = 0; j < COUNT; j++)
            a[j] = (int32_t)((index + 1u) * (k + 1u) + j);
        desc.tag = k;
        pcclReduceInfo_t info;
        if (pcclAllReduce(a, b, &desc, comm, &info) != pcclSuccess) {
            rc = 1;
            break;
        }
        for (uint32_t j = 0; j < COUNT && rc == 0; j++) {
            if (b[j] != (int32_t)(3u * (k + 1u) + 2u * j)) rc = 1;
        }
    }
    if (pcclDestroyCommunicator(comm) != pcclSuccess && rc == 0) rc = 1;
    return (void *)rc;
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (pcclInit() != pcclSuccess) return 2;
    pcclMasterInstance_t *m = NULL;
    if (itest_start_master(&m, g_url, sizeof g_url) != 0) return 2;
    pthread_t th[WORLD];
    uint32_t idx[WORLD];
    for (uint32_t i = 0; i < WORLD; i++) {
        idx[i] = i;
        if (pthread_create(&th[i], NULL, peer_main, &idx[i]) != 0) return 2;
    }
    int rc = 0;
    for (uint32_t i = 0; i < WORLD; i++) {
        void *r = NULL;
        pthread_join(th[i], &r);
        if (r != NULL) {
            fprintf(stderr, "itest_trace_multi: peer %u failed (%d)\n", i, (int)(intptr_t)r);
            rc = (int)(intptr_t)r;
        }
    }
    pcclInterruptMaster(m);
    pcclMasterAwaitTermination(m);
    pcclDestroyMaster(m);
    if (rc == 0) printf("DONE\n");
    return rc;
}
