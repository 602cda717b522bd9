/*
 * pccl_bench_peer.h — what the pccl benchmark peers share
 * (bench/allreduce/pccl_allreduce_bench.c, bench/collectives/pccl_coll_bench.c,
 * bench/wan/pccl_wan_*.c): the clock, byte counts on the command line, the
 * median's comparison, connecting to the master and waiting until the group
 * has the run's world, and the copied-byte attribute. `name` prefixes every
 * message.
 */
#ifndef PCCL_BENCH_PEER_H
#define PCCL_BENCH_PEER_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pccl.h"

/* Parses a byte count with an optional K, M or G suffix (powers of 1024). */
static inline bool pccl_bench_parse_bytes(const char *s, uint64_t *out)
{
    char *end = NULL;
    const unsigned long long v = strtoull(s, &end, 10);
    if (end == s) return false;
    uint64_t mul = 1;
    if (*end == 'K' || *end == 'k') mul = 1024u;
    if (*end == 'M' || *end == 'm') mul = 1024u * 1024u;
    if (*end == 'G' || *end == 'g') mul = 1024u * 1024u * 1024u;
    if (mul > 1) end++;
    if (*end != '\0') return false;
    *out = (uint64_t)v * mul;
    return true;
}

/* qsort's comparison of doubles (ascending). */
static inline int pccl_bench_cmp_double(const void *x, const void *y)
{
    const double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

static inline double pccl_bench_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

static inline void pccl_bench_sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Creates and connects a communicator to url. 0, or 2 (setup failed, *comm may need
 * pcclDestroyCommunicator when not NULL). */
static inline int pccl_bench_connect(const char *name, uint32_t index, const char *url,
                                     uint32_t pool, uint32_t timeout_ms, pcclComm_t **comm)
{
    pcclCommCreateParams_t params;
    memset(&params, 0, sizeof params);
    params.p2p_connection_pool_size = pool;
    pcclCommCreateOptions_t opts = PCCL_COMM_CREATE_OPTIONS_INIT;
    opts.master_url = url;
    opts.timeout_ms = timeout_ms;
    *comm = NULL;
    if (pcclCreateCommunicatorEx(&params, &opts, comm) != pcclSuccess) return 2;
    const pcclResult_t r = pcclConnect(*comm);
    if (r != pcclSuccess) {
        fprintf(stderr, "%s %u: connect: %d\n", name, index, (int)r);
        return 2;
    }
    return 0;
}

/* Updates the topology until the group has exactly `world` members, within timeout_ms. 0, or 2
 * (an error, a larger group, or the time ran out). */
static inline int pccl_bench_wait_for_world(const char *name, pcclComm_t *comm, uint32_t index,
                                            uint32_t world, uint32_t timeout_ms)
{
    const double t0 = pccl_bench_now_us();
    for (;;) {
        int ws = 0;
        if (pcclGetAttribute(comm, PCCL_ATTRIBUTE_CURRENT_WORLD_SIZE, &ws) != pcclSuccess) return 2;
        if ((uint32_t)ws >= world) {
            if ((uint32_t)ws > world) {
                fprintf(stderr, "%s %u: world %d > %u\n", name, index, ws, world);
                return 2;
            }
            return 0;
        }
        if (pccl_bench_now_us() - t0 > (double)timeout_ms * 1e3) {
            fprintf(stderr, "%s %u: world stays %d < %u\n", name, index, ws, world);
            return 2;
        }
        bool pending = false;
        if (pcclArePeersPending(comm, &pending) == pcclSuccess && !pending) pccl_bench_sleep_ms(5);
        const pcclResult_t r = pcclUpdateTopology(comm);
        if (r != pcclSuccess && r != pcclUpdateTopologyFailed) {
            fprintf(stderr, "%s %u: update topology: %d\n", name, index, (int)r);
            return 2;
        }
    }
}

/* PCCL_ATTRIBUTE_COPIED_BYTES: the copied-byte count modulo 2^31. 0, or 1 when unreadable. */
static inline int pccl_bench_copied_low(pcclComm_t *comm, uint32_t *out)
{
    int v = 0;
    if (pcclGetAttribute(comm, PCCL_ATTRIBUTE_COPIED_BYTES, &v) != pcclSuccess || v < 0) return 1;
    *out = (uint32_t)v;
    return 0;
}

#endif /* PCCL_BENCH_PEER_H */
