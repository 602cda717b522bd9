/*
 * pccl_wan_bench.c — the pccl side of the bandwidth-at-distance benchmark
 * (issue 23, scripts/bench-wan.sh, docs/wan.md). One process per peer,
 * started in the testbed's namespaces by bench/wan/wan_launch.sh.
 *
 *   pccl_wan_bench --url URL --index I --world N [--min BYTES] [--max BYTES]
 *       [--step F] [--warmup W] [--iters K] [--pool P] [--concurrent C]
 *       [--timeout-ms T]
 *
 * As PCCL programs run it (one all-reduce per tensor, several in flight), an
 * operation of S bytes here is C all-reduces of S / C bytes each, on distinct
 * tags, started together with pcclAllReduceAsync and all awaited; its time is
 * from the first start to the last completion, timed on peer 0. --concurrent
 * 1 is one pcclAllReduce-sized operation. --pool is p2p_connection_pool_size.
 * Peer i contributes (i + 1) * (1 + j % 251) at element j of every part, so
 * every element of the result is N(N + 1)/2 * (1 + j % 251), exact in float;
 * the warm-up and the last timed operation are checked in full (a poisoned
 * receive buffer). A wrong element or a failed call: exit 1 (setup: 2).
 * Peer 0 prints, per size, the row all the benchmarks share
 * (docs/benchmarks.md): size count iters time_us min_us max_us algbw busbw
 * tx_bytes (the C parts' sum, as pcclReduceInfo_t counts it).
 */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pccl.h"
#include "pccl_bench_peer.h"

#define MAX_CONCURRENT 16 /* the runtime's bound on operations in flight */

typedef struct options {
    const char *url;
    uint32_t index, world, step, warmup, iters, pool, concurrent, timeout_ms;
    uint64_t min_bytes, max_bytes;
} options;

static bool parse_args(int argc, char **argv, options *o)
{
    memset(o, 0, sizeof *o);
    o->world = 2;
    o->min_bytes = o->max_bytes = 64u << 20;
    o->step = 4;
    o->warmup = 1;
    o->iters = 3;
    o->concurrent = 1;
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
        } else if (strcmp(a, "--min") == 0 || strcmp(a, "--max") == 0) {
            if (!pccl_bench_parse_bytes(v, a[3] == 'i' ? &o->min_bytes : &o->max_bytes))
                return false;
        } else if (strcmp(a, "--step") == 0) {
            o->step = u;
        } else if (strcmp(a, "--warmup") == 0) {
            o->warmup = u;
        } else if (strcmp(a, "--iters") == 0) {
            o->iters = u;
        } else if (strcmp(a, "--pool") == 0) {
            o->pool = u;
        } else if (strcmp(a, "--concurrent") == 0) {
            o->concurrent = u;
        } else if (strcmp(a, "--timeout-ms") == 0) {
            o->timeout_ms = u;
        } else {
            return false;
        }
    }
    return argc % 2 == 1 && o->url != NULL && o->world >= 2 && o->index < o->world &&
           o->step >= 2 && o->iters >= 1 && o->concurrent >= 1 && o->concurrent <= MAX_CONCURRENT &&
           o->min_bytes >= 4u * o->concurrent && o->max_bytes >= o->min_bytes;
}

/* One operation: C concurrent all-reduces over the C parts of send/recv. */
static int run_op(pcclComm_t *comm, const options *o, uint64_t count, const float *send,
                  float *recv, uint64_t *tag, uint64_t *tx)
{
    pcclAsyncReduceOp_t h[MAX_CONCURRENT];
    const uint64_t part = count / o->concurrent;
    *tx = 0;
    for (uint32_t c = 0; c < o->concurrent; c++) {
        const uint64_t off = part * c;
        const uint64_t n = c + 1u == o->concurrent ? count - off : part;
        pcclReduceDescriptor_t d;
        memset(&d, 0, sizeof d);
        d.count = (size_t)n;
        d.op = pcclSum;
        d.tag = (*tag)++;
        d.src_descriptor.datatype = pcclFloat;
        d.src_descriptor.distribution_hint = pcclDistributionNone;
        d.quantization_options.algorithm = pcclQuantNone;
        const pcclResult_t r = pcclAllReduceAsync(send + off, recv + off, &d, comm, &h[c]);
        if (r != pcclSuccess) {
            fprintf(stderr, "pccl_wan_bench %u: start: %d\n", o->index, (int)r);
            return 1;
        }
    }
    int rc = 0;
    for (uint32_t c = 0; c < o->concurrent; c++) {
        pcclReduceInfo_t info;
        memset(&info, 0, sizeof info);
        const pcclResult_t r = pcclAwaitAsyncReduce(&h[c], &info);
        if (r != pcclSuccess || info.local_world_size != o->world) {
            fprintf(stderr, "pccl_wan_bench %u: all-reduce: %d (world %u)\n", o->index, (int)r,
                    info.local_world_size);
            rc = 1;
        }
        *tx += info.tx_bytes;
    }
    return rc;
}

static int verify(const float *out, uint64_t count, const options *o)
{
    const uint64_t part = count / o->concurrent;
    const float s = (float)(o->world * (o->world + 1u) / 2u);
    for (uint64_t j = 0; j < count; j++) {
        const uint64_t jj = j < part * o->concurrent ? j % part : j - part * (o->concurrent - 1u);
        const float want = s * (float)(1u + (uint32_t)(jj % 251u));
        if (out[j] != want) {
            fprintf(stderr,
                    "pccl_wan_bench %u: WRONG RESULT at element %" PRIu64 ": %.9g, want %.9g\n",
                    o->index, j, (double)out[j], (double)want);
            return 1;
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    options o;
    if (!parse_args(argc, argv, &o)) {
        fprintf(stderr, "usage: pccl_wan_bench --url URL --index I --world N [--min B] [--max B]\n"
                        "  [--step F] [--warmup W] [--iters K] [--pool P] [--concurrent C<=16]\n"
                        "  [--timeout-ms T]\n");
        return 2;
    }
    const uint64_t maxcount = o.max_bytes / sizeof(float);
    float *send = malloc((size_t)maxcount * sizeof(float));
    float *recv = malloc((size_t)maxcount * sizeof(float));
    double *times = calloc(o.iters, sizeof(double));
    if (send == NULL || recv == NULL || times == NULL) return 2;
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (pcclInit() != pcclSuccess) return 2;
    pcclComm_t *comm = NULL;
    int rc = pccl_bench_connect("pccl_wan_bench", o.index, o.url, o.pool, o.timeout_ms, &comm);
    if (rc == 0) rc = pccl_bench_wait_for_world("pccl_wan_bench", comm, o.index, o.world, 600000);
    if (rc == 0 && o.index == 0) {
        printf("# system pccl N %u pool %u concurrent %u warmup %u\n", o.world, o.pool,
               o.concurrent, o.warmup);
        printf("# %10s %11s %6s %11s %11s %11s %8s %8s %12s\n", "size", "count", "iters", "time_us",
               "min_us", "max_us", "algbw", "busbw", "tx_bytes");
        fflush(stdout);
    }
    uint64_t tag = 1;
    for (uint64_t bytes = o.min_bytes; rc == 0 && bytes <= o.max_bytes; bytes *= o.step) {
        const uint64_t count = bytes / sizeof(float);
        const uint64_t part = count / o.concurrent;
        for (uint64_t j = 0; j < count; j++) {
            const uint64_t jj = j < part * o.concurrent ? j % part : j - part * (o.concurrent - 1u);
            send[j] = (float)((o.index + 1u) * (1u + (uint32_t)(jj % 251u)));
        }
        uint64_t tx = 0;
        const uint32_t total = o.warmup + o.iters;
        for (uint32_t k = 0; rc == 0 && k < total; k++) {
            const bool checked = k + 1u == o.warmup || k + 1u == total;
            if (checked) memset(recv, 0xff, (size_t)count * sizeof(float)); /* NaN poison */
            const double t0 = pccl_bench_now_us();
            rc = run_op(comm, &o, count, send, recv, &tag, &tx);
            const double dt = pccl_bench_now_us() - t0;
            if (k >= o.warmup) times[k - o.warmup] = dt;
            if (rc == 0 && checked) rc = verify(recv, count, &o);
        }
        if (rc == 0 && o.index == 0) {
            qsort(times, o.iters, sizeof *times, pccl_bench_cmp_double);
            const uint32_t n = o.iters;
            const double med = n % 2u ? times[n / 2u] : 0.5 * (times[n / 2u - 1u] + times[n / 2u]);
            const double algbw = (double)(count * sizeof(float)) / (med * 1e-6) / 1e9;
            const double busbw = algbw * 2.0 * (double)(o.world - 1u) / (double)o.world;
            printf("%12" PRIu64 " %11" PRIu64 " %6u %11.1f %11.1f %11.1f %8.3f %8.3f %12" PRIu64
                   "\n",
                   (uint64_t)(count * sizeof(float)), count, n, med, times[0], times[n - 1u], algbw,
                   busbw, tx);
            fflush(stdout);
        }
    }
    /* Leave together, so no peer finds a smaller group on its last operation. */
    if (rc == 0 && pcclBarrier(NULL, comm, NULL) != pcclSuccess) rc = 1;
    if (rc == 0 && o.index == 0) printf("# done, results verified exactly\n");
    if (comm != NULL && pcclDestroyCommunicator(comm) != pcclSuccess && rc == 0) rc = 1;
    free(send);
    free(recv);
    free(times);
    return rc;
}
