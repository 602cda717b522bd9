/*
 * pccl_wan_topo.c — the pccl peer of the topology-on-shaped-links benchmark
 * and test (issue 23, scripts/bench-wan-topology.sh, tests/wan/topology.sh,
 * docs/wan.md "Topology on shaped links"). One process per peer, started in
 * the testbed's namespaces by bench/wan/wan_launch.sh.
 *
 *   pccl_wan_topo --url URL --index I --world N [--keys K0,K1,...] [--bytes B]
 *       [--warmup W] [--iters K] [--pool P] [--timeout-ms T]
 *
 * Peer I joins with ring_key = K_I (--keys, one per index; default 0: the
 * order of joining), so the first ring is the one the caller chose. Then:
 * the ring order, W + K all-reduces of B bytes (float sum; the median of the
 * last K is "before"), pcclOptimizeTopology (timed: probes, solve, re-wire),
 * the ring order again, W + K all-reduces again ("after"). Every all-reduce is
 * preceded by a barrier, so its time (on each peer) starts when all are
 * ready. Peer i contributes (i + 1) * (1 + j % 251) at element j, so every
 * element of every result must be N(N + 1)/2 * (1 + j % 251), exact in
 * float; every result is checked in full (a poisoned receive buffer). The
 * ring order is found by an all-reduce too: each peer puts its index + 1 at
 * its rank (PCCL_ATTRIBUTE_RANK), so the sum lists the indices in ring order
 * (every peer checks that it is a permutation).
 *
 * Peer 0 prints key-value lines (the script parses them):
 *   ring_before I I I I       indices in rank order before the optimization
 *   before_us MED MIN MAX     all-reduce time before
 *   optimize_us T             pcclOptimizeTopology's time
 *   ring_after I I I I
 *   after_us MED MIN MAX
 *   # done, results verified exactly
 * A wrong element, a bad ring or a failed call: exit 1 (setup: 2).
 */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pccl.h"
#include "pccl_bench_peer.h"

#define MAX_WORLD 32u

typedef struct options {
    const char *url;
    uint32_t index, world, warmup, iters, pool, timeout_ms;
    uint32_t keys[MAX_WORLD];
    uint64_t bytes;
} options;

/* "K0,K1,...": at most MAX_WORLD keys. */
static bool parse_keys(const char *s, uint32_t *keys)
{
    for (uint32_t i = 0; i < MAX_WORLD; i++) {
        char *end = NULL;
        keys[i] = (uint32_t)strtoul(s, &end, 10);
        if (end == s) return false;
        if (*end == '\0') return true;
        if (*end != ',') return false;
        s = end + 1;
    }
    return false;
}

static bool parse_args(int argc, char **argv, options *o)
{
    memset(o, 0, sizeof *o);
    o->world = 2;
    o->bytes = 64u << 20;
    o->warmup = 1;
    o->iters = 3;
    o->timeout_ms = 600000;
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *a = argv[i], *v = argv[i + 1];
        const uint32_t u = (uint32_t)strtoul(v, NULL, 10);
        if (strcmp(a, "--url") == 0) {
            o->url = v;
        } else if (strcmp(a, "--index") == 0) {
            o->index = u;
        } else if (strcmp(a, "--world") == 0) {
            o->world = u;
        } else if (strcmp(a, "--keys") == 0) {
            if (!parse_keys(v, o->keys)) return false;
        } else if (strcmp(a, "--bytes") == 0) {
            if (!pccl_bench_parse_bytes(v, &o->bytes)) return false;
        } else if (strcmp(a, "--warmup") == 0) {
            o->warmup = u;
        } else if (strcmp(a, "--iters") == 0) {
            o->iters = u;
        } else if (strcmp(a, "--pool") == 0) {
            o->pool = u;
        } else if (strcmp(a, "--timeout-ms") == 0) {
            o->timeout_ms = u;
        } else {
            return false;
        }
    }
    return argc % 2 == 1 && o->url != NULL && o->world >= 2 && o->world <= MAX_WORLD &&
           o->index < o->world && o->iters >= 1 && o->bytes >= 4u * o->world;
}

static int connect_keyed(const options *o, pcclComm_t **comm)
{
    pcclCommCreateParams_t params;
    memset(&params, 0, sizeof params);
    params.p2p_connection_pool_size = o->pool;
    pcclCommCreateOptions_t opts = PCCL_COMM_CREATE_OPTIONS_INIT;
    opts.master_url = o->url;
    opts.timeout_ms = o->timeout_ms;
    opts.ring_key = o->keys[o->index];
    *comm = NULL;
    if (pcclCreateCommunicatorEx(&params, &opts, comm) != pcclSuccess) return 2;
    const pcclResult_t r = pcclConnect(*comm);
    if (r != pcclSuccess) {
        fprintf(stderr, "pccl_wan_topo %u: connect: %d\n", o->index, (int)r);
        return 2;
    }
    return 0;
}

static pcclReduceDescriptor_t sum_desc(uint64_t count, uint64_t tag)
{
    pcclReduceDescriptor_t d;
    memset(&d, 0, sizeof d);
    d.count = (size_t)count;
    d.op = pcclSum;
    d.tag = tag;
    d.src_descriptor.datatype = pcclFloat;
    d.src_descriptor.distribution_hint = pcclDistributionNone;
    d.quantization_options.algorithm = pcclQuantNone;
    return d;
}

/* The indices in rank order (ring[rank] = index), found by an all-reduce. 0, or 1. */
static int ring_order(pcclComm_t *comm, const options *o, uint64_t *tag, uint32_t *ring)
{
    int rank = -1, ws = 0;
    if (pcclGetAttribute(comm, PCCL_ATTRIBUTE_RANK, &rank) != pcclSuccess ||
        pcclGetAttribute(comm, PCCL_ATTRIBUTE_PEER_GROUP_WORLD_SIZE, &ws) != pcclSuccess ||
        (uint32_t)ws != o->world || rank < 0 || (uint32_t)rank >= o->world) {
        fprintf(stderr, "pccl_wan_topo %u: rank %d of world %d\n", o->index, rank, ws);
        return 1;
    }
    float in[MAX_WORLD], out[MAX_WORLD];
    memset(in, 0, sizeof in);
    in[rank] = (float)(o->index + 1u);
    const pcclReduceDescriptor_t d = sum_desc(o->world, (*tag)++);
    if (pcclAllReduce(in, out, &d, comm, NULL) != pcclSuccess) {
        fprintf(stderr, "pccl_wan_topo %u: ring order all-reduce failed\n", o->index);
        return 1;
    }
    bool seen[MAX_WORLD] = {false};
    for (uint32_t r = 0; r < o->world; r++) {
        const float v = out[r];
        if (!(v >= 1.0f && v <= (float)o->world) || seen[(uint32_t)v - 1u]) {
            fprintf(stderr, "pccl_wan_topo %u: ring order is not a permutation\n", o->index);
            return 1;
        }
        ring[r] = (uint32_t)v - 1u;
        seen[ring[r]] = true;
    }
    if (ring[rank] != o->index) return 1;
    return 0;
}

static void print_ring(const char *name, const uint32_t *ring, uint32_t n)
{
    printf("%s", name);
    for (uint32_t r = 0; r < n; r++)
        printf(" %u", ring[r]);
    printf("\n");
}

static int verify(const float *out, uint64_t count, const options *o)
{
    const float s = (float)(o->world * (o->world + 1u) / 2u);
    for (uint64_t j = 0; j < count; j++) {
        const float want = s * (float)(1u + (uint32_t)(j % 251u));
        if (out[j] != want) {
            fprintf(stderr,
                    "pccl_wan_topo %u: WRONG RESULT at element %" PRIu64 ": %.9g, want %.9g\n",
                    o->index, j, (double)out[j], (double)want);
            return 1;
        }
    }
    return 0;
}

/* W + K timed, checked all-reduces; peer 0 prints "NAME median min max" (µs). 0, or 1. */
static int timed_phase(pcclComm_t *comm, const options *o, const char *name, const float *send,
                       float *recv, double *times, uint64_t *tag)
{
    const uint64_t count = o->bytes / sizeof(float);
    for (uint32_t k = 0; k < o->warmup + o->iters; k++) {
        memset(recv, 0xff, (size_t)count * sizeof(float)); /* NaN poison */
        if (pcclBarrier(NULL, comm, NULL) != pcclSuccess) {
            fprintf(stderr, "pccl_wan_topo %u: barrier failed\n", o->index);
            return 1;
        }
        const pcclReduceDescriptor_t d = sum_desc(count, (*tag)++);
        pcclReduceInfo_t info;
        memset(&info, 0, sizeof info);
        const double t0 = pccl_bench_now_us();
        const pcclResult_t r = pcclAllReduce(send, recv, &d, comm, &info);
        const double dt = pccl_bench_now_us() - t0;
        if (r != pcclSuccess || info.local_world_size != o->world) {
            fprintf(stderr, "pccl_wan_topo %u: all-reduce: %d (world %u)\n", o->index, (int)r,
                    info.local_world_size);
            return 1;
        }
        if (verify(recv, count, o) != 0) return 1;
        if (k >= o->warmup) times[k - o->warmup] = dt;
    }
    if (o->index == 0) {
        const uint32_t n = o->iters;
        qsort(times, n, sizeof *times, pccl_bench_cmp_double);
        const double med = n % 2u ? times[n / 2u] : 0.5 * (times[n / 2u - 1u] + times[n / 2u]);
        printf("%s %.0f %.0f %.0f\n", name, med, times[0], times[n - 1u]);
    }
    return 0;
}

int main(int argc, char **argv)
{
    options o;
    if (!parse_args(argc, argv, &o)) {
        fprintf(stderr, "usage: pccl_wan_topo --url URL --index I --world N [--keys K0,K1,...]\n"
                        "  [--bytes B] [--warmup W] [--iters K] [--pool P] [--timeout-ms T]\n");
        return 2;
    }
    const uint64_t count = o.bytes / sizeof(float);
    float *send = malloc((size_t)count * sizeof(float));
    float *recv = malloc((size_t)count * sizeof(float));
    double *times = calloc(o.iters, sizeof(double));
    if (send == NULL || recv == NULL || times == NULL) return 2;
    for (uint64_t j = 0; j < count; j++)
        send[j] = (float)((o.index + 1u) * (1u + (uint32_t)(j % 251u)));
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (pcclInit() != pcclSuccess) return 2;
    pcclComm_t *comm = NULL;
    int rc = connect_keyed(&o, &comm);
    if (rc == 0) rc = pccl_bench_wait_for_world("pccl_wan_topo", comm, o.index, o.world, 600000);
    if (rc == 0 && o.index == 0) {
        printf("# pccl_wan_topo N %u bytes %" PRIu64 " warmup %u iters %u pool %u\n", o.world,
               o.bytes, o.warmup, o.iters, o.pool);
    }
    uint64_t tag = 1;
    uint32_t ring[MAX_WORLD];
    if (rc == 0) rc = ring_order(comm, &o, &tag, ring);
    if (rc == 0 && o.index == 0) print_ring("ring_before", ring, o.world);
    if (rc == 0) rc = timed_phase(comm, &o, "before_us", send, recv, times, &tag);
    if (rc == 0 && pcclBarrier(NULL, comm, NULL) != pcclSuccess) rc = 1;
    if (rc == 0) {
        const double t0 = pccl_bench_now_us();
        const pcclResult_t r = pcclOptimizeTopology(comm);
        const double dt = pccl_bench_now_us() - t0;
        if (r != pcclSuccess) {
            fprintf(stderr, "pccl_wan_topo %u: optimize topology: %d\n", o.index, (int)r);
            rc = 1;
        } else if (o.index == 0) {
            printf("optimize_us %.0f\n", dt);
        }
    }
    if (rc == 0) rc = ring_order(comm, &o, &tag, ring);
    if (rc == 0 && o.index == 0) print_ring("ring_after", ring, o.world);
    if (rc == 0) rc = timed_phase(comm, &o, "after_us", send, recv, times, &tag);
    /* Leave together, so no peer finds a smaller group on its last operation. */
    if (rc == 0 && pcclBarrier(NULL, comm, NULL) != pcclSuccess) rc = 1;
    if (rc == 0 && o.index == 0) printf("# done, results verified exactly\n");
    if (comm != NULL && pcclDestroyCommunicator(comm) != pcclSuccess && rc == 0) rc = 1;
    free(send);
    free(recv);
    free(times);
    return rc;
}
