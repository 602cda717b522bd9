/*
 * itest_coll_peer.c — one peer process of the collective-set integration
 * tests (tests/integration/coll.py; docs/collectives.md): broadcast, reduce,
 * all-gather, reduce-scatter, all-to-all, gather, scatter and barrier through
 * libpccl, every result checked exactly (int32 data).
 *
 *   itest_coll_peer --url URL --index I --world N --mode MODE [--pool P]
 *
 * Element k of the input of rank r is in_val(r, k) (below); every output is
 * compared with the value computed from the inputs of the op's ranks.
 *
 * exact:     grows to N; for each kind, counts 1, 1000 and 300,001 (1.2 MB
 *            blocks: striped over a pool of 2), every root, out of place and
 *            in place (the aliasing of pccl.h); then every kind at once as work
 *            objects on distinct tags, issued in opposite orders by even and
 *            odd indices, waited with pcclWorkWaitTimeout and polled with
 *            pcclWorkIsCompleted; PREMUL_SUM; quantized reduce-scatter and reduce
 *            (float inputs the 8-bit codes carry exactly); the list and v variants;
 *            then a barrier; bad arguments get their codes.
 * victim:    grows to N, prints RUNNING, starts a large all-gather and SIGKILLs
 *            itself while it runs.
 * survivor:  grows to N, prints RUNNING, runs large all-gathers (timeout
 *            8 s) until one fails (pcclRankConnectionLost, pcclTimeout or
 *            pcclUpdateTopologyFailed: nothing else may come), within 12 s;
 *            then updates the topology until the group has N - 1 peers and
 *            runs exact rounds of every kind there. Prints RECOVERED.
 * timeout:   grows to N; index N - 1 sleeps 4 s before anything, the others
 *            start an all-gather with a 1,000 ms timeout: it must end with
 *            pcclTimeout within 1 .. 4 s; then everyone (the sleeper too) runs
 *            a barrier and an exact all-gather.
 * Exit: 0 ok, 1 wrong result, 2 setup, 3 a bound missed.
 */
#define _POSIX_C_SOURCE 200809L
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "itest_common.h"
#include "pccl.h"

enum kind { BCAST, REDUCE, ALLGATHER, REDSCAT, ALLTOALL, GATHER, SCATTER, NKINDS };
static const char *const KIND_NAME[NKINDS] = {
    "broadcast", "reduce", "all-gather", "reduce-scatter", "all-to-all", "gather", "scatter"};

static int g_index;

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static int32_t in_val(uint32_t rank, uint64_t k)
{
    return (int32_t)((rank * 7919u + (uint32_t)k * 31u + 5u) % 20011u) - 10000;
}

static int32_t sum_of(uint32_t n, uint64_t k)
{
    uint32_t s = 0;
    for (uint32_t r = 0; r < n; r++)
        s += (uint32_t)in_val(r, k);
    return (int32_t)s;
}

static bool rooted(int k)
{
    return k == BCAST || k == REDUCE || k == GATHER || k == SCATTER;
}

/* Elements of the send and receive buffers of rank r. */
static void sizes(int k, uint64_t count, uint32_t n, uint32_t r, uint32_t root, uint64_t *s,
                  uint64_t *rv)
{
    const bool at_root = r == root;
    switch (k) {
    case BCAST:
        *s = *rv = count;
        return;
    case REDUCE:
        *s = count;
        *rv = at_root ? count : 0;
        return;
    case ALLGATHER:
        *s = count;
        *rv = n * count;
        return;
    case REDSCAT:
        *s = n * count;
        *rv = count;
        return;
    case ALLTOALL:
        *s = *rv = n * count;
        return;
    case GATHER:
        *s = count;
        *rv = at_root ? n * count : 0;
        return;
    default:
        *s = at_root ? n * count : 0;
        *rv = count;
        return;
    }
}

static int32_t want(int k, uint32_t n, uint64_t count, uint32_t root, uint32_t r, uint64_t e)
{
    const uint64_t blk = e / count, off = e % count;
    switch (k) {
    case BCAST:
        return in_val(root, e);
    case REDUCE:
        return sum_of(n, e);
    case ALLGATHER:
    case GATHER:
        return in_val((uint32_t)blk, off);
    case REDSCAT:
        return sum_of(n, (uint64_t)r * count + e);
    case ALLTOALL:
        return in_val((uint32_t)blk, (uint64_t)r * count + off);
    default:
        return in_val(root, (uint64_t)r * count + e);
    }
}

typedef struct op {
    int kind;
    uint64_t count;
    uint32_t root, rank, world;
    bool in_place;
    int32_t *mem, *send, *recv;
    uint64_t send_n, recv_n;
} op;

/* Buffers for one op, the aliasing of pccl.h when in place, the input filled. */
static void op_prepare(op *o, int kind, uint64_t count, uint32_t root, uint32_t rank,
                       uint32_t world, bool in_place)
{
    memset(o, 0, sizeof *o);
    o->kind = kind;
    o->count = count;
    o->root = root;
    o->rank = rank;
    o->world = world;
    o->in_place = in_place;
    sizes(kind, count, world, rank, root, &o->send_n, &o->recv_n);
    const uint64_t big = o->send_n > o->recv_n ? o->send_n : o->recv_n;
    o->mem = calloc((size_t)big + 1u, 4);
    o->send = o->mem;
    o->recv = NULL;
    if (kind == BCAST) {
        o->recv = o->mem;
    } else if (!in_place) {
        o->recv = o->recv_n > 0 ? malloc((size_t)o->recv_n * 4u) : NULL;
        if (o->recv != NULL) memset(o->recv, 0x5A, (size_t)o->recv_n * 4u);
    } else if (kind == ALLGATHER || (kind == GATHER && rank == root)) {
        o->recv = o->mem;
        o->send = o->mem + (uint64_t)(kind == ALLGATHER ? rank : root) * count;
    } else if (kind == REDSCAT || (kind == SCATTER && rank == root)) {
        o->recv = o->mem + (uint64_t)(kind == REDSCAT ? rank : root) * count;
    } else {
        o->recv = o->recv_n > 0 ? o->mem : NULL;
    }
    if (o->send_n == 0) o->send = NULL;
    if (kind != BCAST || rank == root) {
        for (uint64_t e = 0; e < o->send_n; e++)
            o->send[e] = in_val(rank, e);
    }
}

static void op_free(op *o)
{
    if (!o->in_place && o->kind != BCAST) free(o->recv);
    free(o->mem);
}

static pcclResult_t op_start(pcclComm_t *c, op *o, uint64_t tag, uint32_t timeout_ms,
                             pcclWork_t **w)
{
    pcclCollectiveOptions_t opt = PCCL_COLLECTIVE_OPTIONS_INIT;
    opt.tag = tag;
    opt.timeout_ms = timeout_ms;
    const int root = (int)o->root;
    switch (o->kind) {
    case BCAST:
        return pcclBroadcastAsync(o->recv, o->count, pcclInt32, root, &opt, c, w);
    case REDUCE:
        return pcclReduceAsync(o->send, o->recv, o->count, pcclInt32, pcclSum, root, &opt, c, w);
    case ALLGATHER:
        return pcclAllGatherAsync(o->send, o->recv, o->count, pcclInt32, &opt, c, w);
    case REDSCAT:
        return pcclReduceScatterAsync(o->send, o->recv, o->count, pcclInt32, pcclSum, &opt, c, w);
    case ALLTOALL:
        return pcclAllToAllAsync(o->send, o->recv, o->count, pcclInt32, &opt, c, w);
    case GATHER:
        return pcclGatherAsync(o->send, o->recv, o->count, pcclInt32, root, &opt, c, w);
    default:
        return pcclScatterAsync(o->send, o->recv, o->count, pcclInt32, root, &opt, c, w);
    }
}

static int op_check(const op *o)
{
    for (uint64_t e = 0; e < o->recv_n; e++) {
        const int32_t w = want(o->kind, o->world, o->count, o->root, o->rank, e);
        if (o->recv[e] != w) {
            fprintf(stderr,
                    "itest_coll_peer %d: %s count %llu root %u in_place %d world %u rank %u: "
                    "[%llu] = %d, want %d\n",
                    g_index, KIND_NAME[o->kind], (unsigned long long)o->count, o->root,
                    (int)o->in_place, o->world, o->rank, (unsigned long long)e, o->recv[e], w);
            return 1;
        }
    }
    return 0;
}

static int attrs(pcclComm_t *c, uint32_t *rank, uint32_t *world)
{
    int r = -1, w = 0;
    if (pcclGetAttribute(c, PCCL_ATTRIBUTE_RANK, &r) != pcclSuccess ||
        pcclGetAttribute(c, PCCL_ATTRIBUTE_PEER_GROUP_WORLD_SIZE, &w) != pcclSuccess || r < 0 ||
        w < 1) {
        return 2;
    }
    *rank = (uint32_t)r;
    *world = (uint32_t)w;
    return 0;
}

/* One blocking op of every kind at this count, every root, out of and in place: exact. */
static int exact_rounds(pcclComm_t *c, uint64_t count, bool every_root)
{
    uint32_t rank = 0, world = 0;
    if (attrs(c, &rank, &world) != 0) return 2;
    for (int k = 0; k < NKINDS; k++) {
        const uint32_t roots = rooted(k) && every_root ? world : 1u;
        for (uint32_t root = 0; root < roots; root++) {
            for (int ip = 0; ip < 2; ip++) {
                op o;
                op_prepare(&o, k, count, root, rank, world, ip == 1);
                pcclWork_t *w = NULL;
                pcclResult_t r = op_start(c, &o, 7, 0, &w);
                pcclCollectiveInfo_t info;
                memset(&info, 0, sizeof info);
                if (r == pcclSuccess) r = pcclWorkWait(w, &info);
                pcclWorkFree(w);
                int rc = 0;
                if (r != pcclSuccess) {
                    fprintf(stderr, "itest_coll_peer %d: %s count %llu root %u: result %d\n",
                            g_index, KIND_NAME[k], (unsigned long long)count, root, (int)r);
                    rc = 1;
                } else if (info.world_size != world || info.rank != rank) {
                    fprintf(stderr, "itest_coll_peer %d: info world %u rank %u, want %u %u\n",
                            g_index, info.world_size, info.rank, world, rank);
                    rc = 1;
                } else {
                    rc = op_check(&o);
                }
                op_free(&o);
                if (rc != 0) return rc;
            }
        }
    }
    return 0;
}

/* Every kind at once on distinct tags, opposite issue orders on even and odd indices. */
static int concurrent_round(pcclComm_t *c)
{
    uint32_t rank = 0, world = 0;
    if (attrs(c, &rank, &world) != 0) return 2;
    op o[NKINDS];
    pcclWork_t *w[NKINDS] = {NULL};
    for (int i = 0; i < NKINDS; i++) {
        const int k = g_index % 2 == 0 ? i : NKINDS - 1 - i;
        op_prepare(&o[k], k, 4099, (uint32_t)k % world, rank, world, false);
        const pcclResult_t r = op_start(c, &o[k], 100u + (uint64_t)k, 0, &w[k]);
        if (r != pcclSuccess) {
            fprintf(stderr, "itest_coll_peer %d: start %s: %d\n", g_index, KIND_NAME[k], (int)r);
            return 1;
        }
    }
    int rc = 0;
    const uint64_t t0 = now_ms();
    for (int k = 0; k < NKINDS; k++) {
        pcclResult_t r;
        while ((r = pcclWorkWaitTimeout(w[k], 50, NULL)) == pcclTimeout && now_ms() - t0 < 20000)
            ;
        bool done = false;
        if (pcclWorkIsCompleted(w[k], &done) != pcclSuccess || !done) {
            fprintf(stderr, "itest_coll_peer %d: %s not completed after its wait\n", g_index,
                    KIND_NAME[k]);
            rc = 3;
        }
        if (r != pcclSuccess) {
            fprintf(stderr, "itest_coll_peer %d: concurrent %s: %d\n", g_index, KIND_NAME[k],
                    (int)r);
            if (rc == 0) rc = r == pcclTimeout ? 3 : 1;
        } else if (rc == 0) {
            rc = op_check(&o[k]);
        }
        if (pcclWorkWait(w[k], NULL) != r) rc = 1; /* a second wait returns the same */
        pcclWorkFree(w[k]);
        op_free(&o[k]);
    }
    return rc;
}

static int bad_arguments(pcclComm_t *c)
{
    int32_t buf[8] = {0};
    int rc = 0;
    pcclWork_t *w = NULL;
#define EXPECT(call, code)                                                                         \
    do {                                                                                           \
        const pcclResult_t got_ = (call);                                                          \
        if (got_ != (code)) {                                                                      \
            fprintf(stderr, "itest_coll_peer %d: %s = %d, want %d\n", g_index, #call, (int)got_,   \
                    (int)(code));                                                                  \
            rc = 1;                                                                                \
        }                                                                                          \
    } while (0)
    EXPECT(pcclBroadcast(buf, 8, pcclInt32, 99, NULL, c, NULL), pcclInvalidArgument);
    EXPECT(pcclBroadcast(buf, 8, pcclInt32, -1, NULL, c, NULL), pcclInvalidArgument);
    EXPECT(pcclBroadcast(buf, 8, (pcclDataType_t)99, 0, NULL, c, NULL), pcclInvalidArgument);
    EXPECT(pcclReduceScatter(buf, buf + 1, 1, pcclFloat, pcclBxor, NULL, c, NULL),
           pcclInvalidArgument);
    EXPECT(pcclAllGather(NULL, buf, 1, pcclInt32, NULL, c, NULL), pcclInvalidArgument);
    EXPECT(pcclAllGather(buf, buf + 1, 2, pcclInt32, NULL, c, NULL), pcclInvalidArgument);
    EXPECT(pcclAllToAll(buf, buf + 1, 1, pcclInt32, NULL, c, NULL), pcclInvalidArgument);
    EXPECT(pcclBarrierAsync(NULL, c, NULL), pcclInvalidArgument);
    pcclCollectiveOptions_t bad = PCCL_COLLECTIVE_OPTIONS_INIT;
    bad.struct_size = 8;
    EXPECT(pcclBarrier(&bad, c, NULL), pcclInvalidArgument);
    bad = (pcclCollectiveOptions_t)PCCL_COLLECTIVE_OPTIONS_INIT;
    bad.flags = 0x80u;
    EXPECT(pcclBarrier(&bad, c, NULL), pcclInvalidArgument);
    /* Quantization: only reduce and reduce-scatter, of a float type into an 8- or 16-bit one. */
    bad = (pcclCollectiveOptions_t)PCCL_COLLECTIVE_OPTIONS_INIT;
    bad.quantization_options.algorithm = pcclQuantMinMax;
    bad.quantization_options.quantized_datatype = pcclUint8;
    EXPECT(pcclBroadcast(buf, 2, pcclFloat, 0, &bad, c, NULL), pcclInvalidArgument);
    EXPECT(pcclAllGather(buf, buf + 4, 1, pcclFloat, &bad, c, NULL), pcclInvalidArgument);
    EXPECT(pcclReduceScatter(buf, buf + 4, 1, pcclInt32, pcclSum, &bad, c, NULL),
           pcclInvalidArgument);
    EXPECT(pcclWorkWait(NULL, NULL), pcclInvalidArgument);
    EXPECT(pcclBarrier(NULL, NULL, NULL), pcclInvalidArgument);
    pcclWorkFree(NULL);
    (void)w;
#undef EXPECT
    return rc;
}

/* PREMUL_SUM with each rank's own factor rank + 1 (exact in binary32 here): the all-reduce
 * through pcclAllReduceEx (in place) and the reduce-scatter; pcclAllReduce refuses the op. */
static int premul_round(pcclComm_t *c)
{
    uint32_t rank = 0, world = 0;
    if (attrs(c, &rank, &world) != 0) return 2;
    enum { C = 5000 };
    float *x = malloc((size_t)world * C * sizeof(float)), *y = malloc(C * sizeof(float));
    if (x == NULL || y == NULL) return 2;
    for (uint64_t k = 0; k < (uint64_t)world * C; k++)
        x[k] = (float)((int)(k % 89u) - 30 + (int)rank);
    pcclCollectiveOptions_t opt = PCCL_COLLECTIVE_OPTIONS_INIT;
    opt.premul_scalar = (double)(rank + 1u);
    pcclReduceDescriptor_t d;
    memset(&d, 0, sizeof d);
    d.count = C;
    d.op = pcclPremulSum;
    d.tag = 21;
    d.src_descriptor.datatype = pcclFloat;
    d.quantization_options.algorithm = pcclQuantNone;
    int rc = 0;
    if (pcclAllReduce(x, x, &d, c, NULL) != pcclInvalidArgument) {
        fprintf(stderr, "itest_coll_peer %d: pcclAllReduce took pcclPremulSum\n", g_index);
        rc = 1;
    }
    pcclCollectiveInfo_t info;
    memset(&info, 0, sizeof info);
    pcclResult_t r = pcclAllReduceEx(x, x, &d, &opt, c, &info);
    for (uint64_t k = 0; rc == 0 && k < C; k++) {
        float want = 0;
        for (uint32_t q = 0; q < world; q++)
            want += (float)(q + 1u) * (float)((int)(k % 89u) - 30 + (int)q);
        if (r != pcclSuccess || x[k] != want) {
            fprintf(stderr, "itest_coll_peer %d: premul all-reduce r=%d [%llu] %g != %g\n", g_index,
                    (int)r, (unsigned long long)k, (double)x[k], (double)want);
            rc = 1;
        }
    }
    for (uint64_t k = 0; k < (uint64_t)world * C; k++)
        x[k] = (float)((int)(k % 89u) - 30 + (int)rank);
    opt.tag = 22;
    r = rc == 0 ? pcclReduceScatter(x, y, C, pcclFloat, pcclPremulSum, &opt, c, NULL) : r;
    for (uint64_t k = 0; rc == 0 && k < C; k++) {
        const uint64_t e = (uint64_t)rank * C + k;
        float want = 0;
        for (uint32_t q = 0; q < world; q++)
            want += (float)(q + 1u) * (float)((int)(e % 89u) - 30 + (int)q);
        if (r != pcclSuccess || y[k] != want) {
            fprintf(stderr, "itest_coll_peer %d: premul reduce-scatter r=%d [%llu] %g != %g\n",
                    g_index, (int)r, (unsigned long long)k, (double)y[k], (double)want);
            rc = 1;
        }
    }
    free(x);
    free(y);
    return rc;
}

/* Quantized reduce-scatter and reduce (docs/semantics.md §6) with inputs the codes carry
 * exactly: rank r's element e is v(e) (r + 1) with v(e) = e mod 256, so every partial the ring
 * quantizes is v(e) S for one S per chunk, spanning 0 .. 255 S (chunks of at least 256
 * elements): MinMax and ZeroPointScale 8-bit codes are then exactly v(e). The reduce-scatter
 * (MinMax, uint8, SUM; a large block and one small enough for the master relay) must give
 * v(e) T, T = N (N + 1) / 2, and move one byte per element (tx_bytes (N - 1) count: the ring,
 * not the relay); the reduce (ZeroPointScale, int8, AVG) v(e) T / N at the root. */
static int quant_round(pcclComm_t *c)
{
    uint32_t rank = 0, world = 0;
    if (attrs(c, &rank, &world) != 0) return 2;
    const uint64_t counts[2] = {3000, 512};
    const float t = (float)(world * (world + 1u) / 2u);
    int rc = 0;
    for (int i = 0; i < 2 && rc == 0; i++) {
        const uint64_t n = counts[i];
        float *x = malloc((size_t)(world * n) * sizeof(float)), *y = malloc(n * sizeof(float));
        if (x == NULL || y == NULL) return 2;
        for (uint64_t e = 0; e < world * n; e++)
            x[e] = (float)(e % 256u) * (float)(rank + 1u);
        pcclCollectiveOptions_t opt = PCCL_COLLECTIVE_OPTIONS_INIT;
        opt.tag = 40u + (uint64_t)i;
        opt.quantization_options.algorithm = pcclQuantMinMax;
        opt.quantization_options.quantized_datatype = pcclUint8;
        pcclCollectiveInfo_t info;
        memset(&info, 0, sizeof info);
        const pcclResult_t r =
            pcclReduceScatter(x, y, (size_t)n, pcclFloat, pcclSum, &opt, c, &info);
        if (r != pcclSuccess || info.tx_bytes != (uint64_t)(world - 1u) * n) {
            fprintf(stderr, "itest_coll_peer %d: quantized reduce-scatter r=%d tx_bytes %llu\n",
                    g_index, (int)r, (unsigned long long)info.tx_bytes);
            rc = 1;
        }
        for (uint64_t k = 0; rc == 0 && k < n; k++) {
            const float want = (float)(((uint64_t)rank * n + k) % 256u) * t;
            if (y[k] != want) {
                fprintf(stderr, "itest_coll_peer %d: quantized reduce-scatter [%llu] %g != %g\n",
                        g_index, (unsigned long long)k, (double)y[k], (double)want);
                rc = 1;
            }
        }
        free(x);
        free(y);
    }
    enum { C = 5000 };
    float *x = malloc(C * sizeof(float)), *y = malloc(C * sizeof(float));
    if (x == NULL || y == NULL) return 2;
    for (uint64_t e = 0; e < C; e++) {
        x[e] = (float)(e % 256u) * (float)(rank + 1u);
        y[e] = -1.0f;
    }
    const uint32_t root = world - 1u;
    pcclCollectiveOptions_t opt = PCCL_COLLECTIVE_OPTIONS_INIT;
    opt.tag = 42;
    opt.quantization_options.algorithm = pcclQuantZeroPointScale;
    opt.quantization_options.quantized_datatype = pcclInt8;
    const pcclResult_t r =
        rc == 0 ? pcclReduce(x, y, C, pcclFloat, pcclAvg, (int)root, &opt, c, NULL) : pcclSuccess;
    if (r != pcclSuccess) {
        fprintf(stderr, "itest_coll_peer %d: quantized reduce r=%d\n", g_index, (int)r);
        rc = 1;
    }
    for (uint64_t k = 0; rc == 0 && rank == root && k < C; k++) {
        const float want = (float)(k % 256u) * t / (float)world;
        if (y[k] != want) {
            fprintf(stderr, "itest_coll_peer %d: quantized reduce [%llu] %g != %g\n", g_index,
                    (unsigned long long)k, (double)y[k], (double)want);
            rc = 1;
        }
    }
    /* Two elements over N chunks: pieces of one element (constant: carried exactly) and, for
     * N > 2, empty ones, whose frames carry only metadata. */
    float tiny[2] = {3.0f * (float)(rank + 1u), -5.0f}, out[2] = {0, 0};
    opt.tag = 43;
    opt.quantization_options.algorithm = pcclQuantMinMax;
    opt.quantization_options.quantized_datatype = pcclUint8;
    const pcclResult_t r2 =
        rc == 0 ? pcclReduce(tiny, out, 2, pcclFloat, pcclSum, 0, &opt, c, NULL) : pcclSuccess;
    if (rc == 0 && (r2 != pcclSuccess ||
                    (rank == 0 && (out[0] != 3.0f * t || out[1] != -5.0f * (float)world)))) {
        fprintf(stderr, "itest_coll_peer %d: quantized reduce of 2: r=%d %g %g\n", g_index, (int)r2,
                (double)out[0], (double)out[1]);
        rc = 1;
    }
    free(x);
    free(y);
    return rc;
}

/* The list variants: every kind over separate buffers, exact, root = world - 1. */
static int list_round(pcclComm_t *c)
{
    uint32_t rank = 0, world = 0;
    if (attrs(c, &rank, &world) != 0) return 2;
    enum { C = 777 };
    const uint32_t root = world - 1u;
    int32_t *in[8], *out[8];
    for (uint32_t i = 0; i < world; i++) {
        in[i] = malloc(C * sizeof(int32_t));
        out[i] = malloc(C * sizeof(int32_t));
        for (uint64_t k = 0; k < C; k++) {
            in[i][k] = in_val(rank, (uint64_t)i * C + k); /* block i of the single form */
            out[i][k] = 0x5A5A5A5A;
        }
    }
    int32_t own[C], one[C];
    for (uint64_t k = 0; k < C; k++) {
        own[k] = in_val(rank, k);
        one[k] = 0x5A5A5A5A;
    }
    int rc = 0;
    pcclResult_t r;
#define LIST_CHECK(name, cond, want)                                                               \
    do {                                                                                           \
        if (r != pcclSuccess) {                                                                    \
            fprintf(stderr, "itest_coll_peer %d: %s list: %d\n", g_index, name, (int)r);           \
            rc = 1;                                                                                \
        }                                                                                          \
        for (uint32_t i = 0; rc == 0 && i < world && (cond); i++)                                  \
            for (uint64_t k = 0; rc == 0 && k < C; k++)                                            \
                if (out[i][k] != (want)) {                                                         \
                    fprintf(stderr, "itest_coll_peer %d: %s list [%u][%llu] %d != %d\n", g_index,  \
                            name, i, (unsigned long long)k, out[i][k], (int)(want));               \
                    rc = 1;                                                                        \
                }                                                                                  \
    } while (0)
    r = pcclAllGatherList(own, (void *const *)out, world, C, pcclInt32, NULL, c, NULL);
    LIST_CHECK("all-gather", true, in_val(i, k));
    r = rc == 0 ? pcclAllToAllList((const void *const *)in, (void *const *)out, world, C, pcclInt32,
                                   NULL, c, NULL)
                : r;
    LIST_CHECK("all-to-all", true, in_val(i, (uint64_t)rank * C + k));
    r = rc == 0
            ? pcclGatherList(own, (void *const *)out, world, C, pcclInt32, (int)root, NULL, c, NULL)
            : r;
    LIST_CHECK("gather", rank == root, in_val(i, k));
    r = rc == 0 ? pcclReduceScatterList((const void *const *)in, world, one, C, pcclInt32, pcclSum,
                                        NULL, c, NULL)
                : r;
    for (uint64_t k = 0; rc == 0 && k < C; k++) {
        if (r != pcclSuccess || one[k] != sum_of(world, (uint64_t)rank * C + k)) {
            fprintf(stderr, "itest_coll_peer %d: reduce-scatter list r=%d [%llu]\n", g_index,
                    (int)r, (unsigned long long)k);
            rc = 1;
        }
    }
    r = rc == 0 ? pcclScatterList((const void *const *)in, world, one, C, pcclInt32, (int)root,
                                  NULL, c, NULL)
                : r;
    for (uint64_t k = 0; rc == 0 && k < C; k++) {
        if (r != pcclSuccess || one[k] != in_val(root, (uint64_t)rank * C + k)) {
            fprintf(stderr, "itest_coll_peer %d: scatter list r=%d [%llu]\n", g_index, (int)r,
                    (unsigned long long)k);
            rc = 1;
        }
    }
    /* A list that is not one buffer per member is refused. */
    if (rc == 0 && pcclAllGatherList(own, (void *const *)out, world + 1u, C, pcclInt32, NULL, c,
                                     NULL) != pcclInvalidArgument) {
        fprintf(stderr, "itest_coll_peer %d: a list of world + 1 buffers was taken\n", g_index);
        rc = 1;
    }
#undef LIST_CHECK
    for (uint32_t i = 0; i < world; i++) {
        free(in[i]);
        free(out[i]);
    }
    return rc;
}

/* All-to-all-v: rank i sends split(i, j) elements to rank j (zeros included), element k of
 * them in_val(i, 1000 j + k); then a call where rank 0 expects one element too many from rank 1
 * must be pcclInvalidUsage on every member. */
static size_t split(uint32_t i, uint32_t j)
{
    return (size_t)((i * 3u + j * 5u) % 7u) * 113u;
}

static int v_round(pcclComm_t *c)
{
    uint32_t rank = 0, world = 0;
    if (attrs(c, &rank, &world) != 0) return 2;
    size_t sc[8], rcn[8], ssum = 0, rsum = 0;
    for (uint32_t j = 0; j < world; j++) {
        sc[j] = split(rank, j);
        rcn[j] = split(j, rank);
        ssum += sc[j];
        rsum += rcn[j];
    }
    int32_t *s = malloc((ssum + 1u) * sizeof(int32_t)), *r = malloc((rsum + 2u) * sizeof(int32_t));
    size_t off = 0;
    for (uint32_t j = 0; j < world; j++)
        for (size_t k = 0; k < sc[j]; k++)
            s[off++] = in_val(rank, 1000u * j + k);
    pcclCollectiveOptions_t opt = PCCL_COLLECTIVE_OPTIONS_INIT;
    opt.tag = 31;
    pcclResult_t res = pcclAllToAllV(s, sc, r, rcn, pcclInt32, &opt, c, NULL);
    int rc = 0;
    off = 0;
    for (uint32_t j = 0; j < world && rc == 0; j++) {
        for (size_t k = 0; k < rcn[j] && rc == 0; k++, off++) {
            if (res != pcclSuccess || r[off] != in_val(j, 1000u * rank + k)) {
                fprintf(stderr, "itest_coll_peer %d: all-to-all-v r=%d from %u [%zu]\n", g_index,
                        (int)res, j, k);
                rc = 1;
            }
        }
    }
    if (rc == 0) {
        if (rank == 0) rcn[1 % world] += 1u;
        res = pcclAllToAllV(s, sc, r, rcn, pcclInt32, &opt, c, NULL);
        if (res != pcclInvalidUsage) {
            fprintf(stderr, "itest_coll_peer %d: inconsistent split sizes gave %d\n", g_index,
                    (int)res);
            rc = 1;
        }
    }
    free(s);
    free(r);
    return rc;
}

static int mode_exact(pcclComm_t *c)
{
    const uint64_t counts[] = {1, 1000, 300001};
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
        const int rc = exact_rounds(c, counts[i], counts[i] < 300001);
        if (rc != 0) return rc;
    }
    int rc = concurrent_round(c);
    if (rc == 0) rc = premul_round(c);
    if (rc == 0) rc = quant_round(c);
    if (rc == 0) rc = list_round(c);
    if (rc == 0) rc = v_round(c);
    if (rc != 0) return rc;
    pcclCollectiveInfo_t info;
    memset(&info, 0, sizeof info);
    const pcclResult_t r = pcclBarrier(NULL, c, &info);
    if (r != pcclSuccess) {
        fprintf(stderr, "itest_coll_peer %d: barrier: %d\n", g_index, (int)r);
        return 1;
    }
    return bad_arguments(c);
}

static int mode_victim(pcclComm_t *c)
{
    uint32_t rank = 0, world = 0;
    if (attrs(c, &rank, &world) != 0) return 2;
    printf("RUNNING\n");
    fflush(stdout);
    for (;;) {
        op o;
        op_prepare(&o, ALLGATHER, 4u << 20, 0, rank, world, false);
        pcclWork_t *w = NULL;
        if (op_start(c, &o, 9, 0, &w) == pcclSuccess) {
            itest_sleep_ms(30);
            raise(SIGKILL); /* mid-op: its links break under the others' sends */
        }
        op_free(&o);
        itest_sleep_ms(10);
    }
}

static int mode_survivor(pcclComm_t *c, uint32_t n)
{
    uint32_t rank = 0, world = 0;
    if (attrs(c, &rank, &world) != 0) return 2;
    printf("RUNNING\n");
    fflush(stdout);
    const uint64_t t0 = now_ms();
    for (;;) {
        if (attrs(c, &rank, &world) != 0) return 2;
        op o;
        op_prepare(&o, ALLGATHER, 4u << 20, 0, rank, world, false);
        pcclWork_t *w = NULL;
        pcclResult_t r = op_start(c, &o, 9, 8000, &w);
        if (r == pcclSuccess) r = pcclWorkWait(w, NULL);
        pcclWorkFree(w);
        const int chk = r == pcclSuccess ? op_check(&o) : 0;
        op_free(&o);
        if (chk != 0) return chk;
        if (r == pcclSuccess && world == n) {
            if (now_ms() - t0 > 12000) return 3;
            continue;
        }
        if (r == pcclSuccess && world < n) break; /* the loss fell between two ops */
        if (r != pcclRankConnectionLost && r != pcclTimeout && r != pcclUpdateTopologyFailed) {
            fprintf(stderr, "itest_coll_peer %d: the loss gave %d\n", g_index, (int)r);
            return 1;
        }
        if (now_ms() - t0 > 12000) {
            fprintf(stderr, "itest_coll_peer %d: failed only after %llu ms\n", g_index,
                    (unsigned long long)(now_ms() - t0));
            return 3;
        }
        printf("FAILED_WITH %d after %llu ms\n", (int)r, (unsigned long long)(now_ms() - t0));
        break;
    }
    /* Update until the dead peer is gone, then every kind exact on the smaller ring. */
    for (int tries = 0;; tries++) {
        pcclResult_t r = pcclUpdateTopology(c);
        if (r != pcclSuccess && r != pcclUpdateTopologyFailed) return 2;
        int ws = 0, rk = -1;
        pcclGetAttribute(c, PCCL_ATTRIBUTE_PEER_GROUP_WORLD_SIZE, &ws);
        pcclGetAttribute(c, PCCL_ATTRIBUTE_RANK, &rk);
        if ((uint32_t)ws == n - 1u && rk >= 0) break;
        if (tries > 300) return 3;
        itest_sleep_ms(20);
    }
    int rc = 0;
    for (int attempt = 0; attempt < 5; attempt++) {
        rc = exact_rounds(c, 1000, true);
        if (rc == 0) break;
        pcclUpdateTopology(c); /* a re-wire raced the first round: once more */
    }
    if (rc == 0) printf("RECOVERED\n");
    return rc;
}

static int mode_timeout(pcclComm_t *c, uint32_t n)
{
    uint32_t rank = 0, world = 0;
    if (attrs(c, &rank, &world) != 0) return 2;
    if ((uint32_t)g_index == n - 1u) {
        itest_sleep_ms(4000);
    } else {
        op o;
        op_prepare(&o, ALLGATHER, 100, 0, rank, world, false);
        pcclWork_t *w = NULL;
        const uint64_t t0 = now_ms();
        pcclResult_t r = op_start(c, &o, 3, 1000, &w);
        if (r == pcclSuccess) r = pcclWorkWait(w, NULL);
        const uint64_t took = now_ms() - t0;
        pcclWorkFree(w);
        op_free(&o);
        if (r != pcclTimeout) {
            fprintf(stderr, "itest_coll_peer %d: the timed-out op gave %d\n", g_index, (int)r);
            return 1;
        }
        if (took < 900 || took > 4000) {
            fprintf(stderr, "itest_coll_peer %d: the 1000 ms timeout took %llu ms\n", g_index,
                    (unsigned long long)took);
            return 3;
        }
        printf("TIMEDOUT %llu ms\n", (unsigned long long)took);
    }
    /* Everyone together again: a barrier (retried while the sleeper catches up) and an exact
     * all-gather. */
    pcclResult_t r = pcclTimeout;
    for (int tries = 0; tries < 20 && r != pcclSuccess; tries++) {
        r = pcclBarrier(NULL, c, NULL);
        if (r == pcclUpdateTopologyFailed || r == pcclRankConnectionLost) pcclUpdateTopology(c);
    }
    if (r != pcclSuccess) {
        fprintf(stderr, "itest_coll_peer %d: barrier after the timeout: %d\n", g_index, (int)r);
        return 1;
    }
    return exact_rounds(c, 1000, false);
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *url = NULL, *mode = "exact";
    uint32_t n = 2, pool = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--url") == 0) url = argv[i + 1];
        if (strcmp(argv[i], "--index") == 0) g_index = atoi(argv[i + 1]);
        if (strcmp(argv[i], "--world") == 0) n = (uint32_t)atoi(argv[i + 1]);
        if (strcmp(argv[i], "--mode") == 0) mode = argv[i + 1];
        if (strcmp(argv[i], "--pool") == 0) pool = (uint32_t)atoi(argv[i + 1]);
    }
    if (url == NULL || pcclInit() != pcclSuccess) return 2;
    pcclComm_t *c = NULL;
    if (itest_connect_group_ex(url, n, pool, 30000, &c) != 0) return 2;
    printf("READY\n");
    int rc = 2;
    if (strcmp(mode, "exact") == 0) rc = mode_exact(c);
    if (strcmp(mode, "victim") == 0) rc = mode_victim(c);
    if (strcmp(mode, "survivor") == 0) rc = mode_survivor(c, n);
    if (strcmp(mode, "timeout") == 0) rc = mode_timeout(c, n);
    if (rc == 0) printf("DONE\n");
    pcclDestroyCommunicator(c);
    return rc;
}
