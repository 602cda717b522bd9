/*
 * itest_trace_peer.c — one peer of the trace record/replay integration test
 * (trace_replay.sh): connects, waits until the group has --world peers,
 * runs --steps exact all-reduces, one shared-state sync of two tensors (the
 * peer with index world-1 holds a different "b" and must receive it), then
 * --steps more all-reduces, and destroys the communicator (which writes the
 * PCCL_TRACE trailer). Prints "DONE <index>". Exit: 0 ok, 1 wrong result,
 * 2 setup, 3 bound missed.
 *
 *   itest_trace_peer --url URL --index I --world N [--steps K] [--count C]
 */
#define _POSIX_C_SOURCE 200809L
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "itest_common.h"
#include "pccl.h"

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Peer i contributes (i + 1) * (k + 1) + j % 1000 to element j of step k. */
static int reduce_steps(pcclComm_t *comm, uint32_t index, uint32_t world, uint32_t first,
                        uint32_t steps, uint64_t count)
{
    int32_t *a = malloc((size_t)count * sizeof *a);
    int32_t *b = malloc((size_t)count * sizeof *b);
    if (a == NULL || b == NULL) return 2;
    pcclReduceDescriptor_t desc;
    memset(&desc, 0, sizeof desc);
    desc.count = count;
    desc.op = pcclSum;
    desc.src_descriptor.datatype = pcclInt32;
    desc.quantization_options.quantized_datatype = pcclInt32;
    int rc = 0;
    for (uint32_t k = first; k < first + steps && rc == 0; k++) {
        for (uint64_t j = 0; j < count; j++)
            a[j] = (int32_t)((index + 1u) * (k + 1u) + (uint32_t)(j % 1000u));
        desc.tag = k;
        pcclReduceInfo_t info;
        memset(&info, 0, sizeof info);
        const pcclResult_t r = pcclAllReduce(a, b, &desc, comm, &info);
        if (r != pcclSuccess) {
            fprintf(stderr, "itest_trace_peer %u: step %u: all-reduce %d\n", index, k, (int)r);
            rc = 1;
            break;
        }
        const uint32_t s = world * (world + 1u) / 2u;
        for (uint64_t j = 0; j < count; j++) {
            const int32_t want = (int32_t)((k + 1u) * s + world * (uint32_t)(j % 1000u));
            if (b[j] != want) {
                fprintf(stderr, "itest_trace_peer %u: step %u element %llu: %d want %d\n", index, k,
                        (unsigned long long)j, b[j], want);
                rc = 1;
                break;
            }
        }
    }
    free(a);
    free(b);
    return rc;
}

static int sync_state(pcclComm_t *comm, uint32_t index, uint32_t world, uint64_t count)
{
    int32_t *a = malloc((size_t)count * sizeof *a);
    float *b = malloc((size_t)count * sizeof *b);
    if (a == NULL || b == NULL) return 2;
    const bool divergent = index == world - 1u;
    itest_fill_ab(a, b, count, divergent);
    pcclTensorInfo_t infos[2];
    pcclSharedState_t st;
    itest_state_ab(&st, infos, a, b, count);
    pcclSharedStateSyncInfo_t info;
    memset(&info, 0, sizeof info);
    int rc = 0;
    const pcclResult_t r = pcclSynchronizeSharedState(comm, &st, &info);
    if (r != pcclSuccess) {
        fprintf(stderr, "itest_trace_peer %u: sync %d\n", index, (int)r);
        rc = 1;
    } else if (info.rx_bytes != (divergent ? count * 4u : 0u)) {
        fprintf(stderr, "itest_trace_peer %u: sync received %llu bytes\n", index,
                (unsigned long long)info.rx_bytes);
        rc = 1;
    }
    for (uint64_t j = 0; j < count && rc == 0; j++) {
        if (a[j] != (int32_t)j || b[j] != (float)j * 0.5f) {
            fprintf(stderr, "itest_trace_peer %u: shared state element %llu\n", index,
                    (unsigned long long)j);
            rc = 1;
        }
    }
    if (rc == 0) printf("SYNCED %u rx %llu\n", index, (unsigned long long)info.rx_bytes);
    free(a);
    free(b);
    return rc;
}

int main(int argc, char **argv)
{
    const char *url = NULL;
    uint32_t index = 0, world = 3, steps = 3;
    uint64_t count = 10000;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--url") == 0)
            url = argv[i + 1];
        else if (strcmp(argv[i], "--index") == 0)
            index = (uint32_t)atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--world") == 0)
            world = (uint32_t)atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--steps") == 0)
            steps = (uint32_t)atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--count") == 0)
            count = (uint64_t)atoll(argv[i + 1]);
    }
    if (url == NULL || count == 0 || world == 0) return 2;
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (pcclInit() != pcclSuccess) return 2;
    pcclCommCreateParams_t params;
    memset(&params, 0, sizeof params);
    pcclCommCreateOptions_t opts = PCCL_COMM_CREATE_OPTIONS_INIT;
    opts.master_url = url;
    opts.timeout_ms = 20000;
    pcclComm_t *comm = NULL;
    if (pcclCreateCommunicatorEx(&params, &opts, &comm) != pcclSuccess) return 2;
    pcclResult_t r = pcclConnect(comm);
    if (r != pcclSuccess) {
        fprintf(stderr, "itest_trace_peer %u: connect: %d\n", index, (int)r);
        pcclDestroyCommunicator(comm);
        return 2;
    }
    int ws = 0;
    const uint64_t t0 = now_ms();
    for (;;) {
        if (pcclGetAttribute(comm, PCCL_ATTRIBUTE_CURRENT_WORLD_SIZE, &ws) != pcclSuccess) return 2;
        if ((uint32_t)ws >= world) break;
        if (now_ms() - t0 > 15000u) {
            fprintf(stderr, "itest_trace_peer %u: world stays %d < %u\n", index, ws, world);
            pcclDestroyCommunicator(comm);
            return 3;
        }
        bool pending = false;
        if (pcclArePeersPending(comm, &pending) == pcclSuccess && !pending) sleep_ms(10);
        r = pcclUpdateTopology(comm);
        if (r != pcclSuccess && r != pcclUpdateTopologyFailed) {
            fprintf(stderr, "itest_trace_peer %u: update topology: %d\n", index, (int)r);
            pcclDestroyCommunicator(comm);
            return 2;
        }
    }
    int rc = reduce_steps(comm, index, world, 0, steps, count);
    if (rc == 0) rc = sync_state(comm, index, world, count);
    if (rc == 0) rc = reduce_steps(comm, index, world, steps, steps, count);
    if (pcclDestroyCommunicator(comm) != pcclSuccess && rc == 0) rc = 1;
    if (rc == 0) printf("DONE %u\n", index);
    return rc;
}
