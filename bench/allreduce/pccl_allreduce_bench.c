/*
 * pccl_allreduce_bench.c — an all-reduce benchmark in the style of
 * nccl-tests, over libpccl (issue 7). One process per peer; the launcher
 * (pccl_launch.sh) starts a ccoip_master and N of these on 127.0.0.1.
 *
 *   pccl_allreduce_bench --url tcp://127.0.0.1:PORT --index I --world N
 *       [--min BYTES] [--max BYTES] [--step 2|4] [--warmup W]
 *       [--iters-min A] [--iters-max B] [--iter-bytes BYTES]
 *       [--quant none|minmax-u8|minmax-i8|minmax-u16|minmax-i16|zps-u8|zps-i8|zps-u16|zps-i16]
 *       [--timeout-ms T] [--pool K]
 *       [--algorithm auto|relay|direct|ring|ring_striped|halving_doubling]
 *       [--table FILE]
 *
 * Each peer connects, updates the topology until the group holds N peers,
 * then for each size (float32 elements, SUM) runs W warm-up all-reduces,
 * then K timed ones, K = clamp(iter-bytes / size, A, B) (the same on every
 * peer, so all peers run the same operations), then one more untimed
 * all-reduce into a poisoned receive buffer whose result is checked exactly:
 *   unquantized: peer i sends (i + 1) * (1 + j % 251) at element j, so the
 *                sum is S * (1 + j % 251), S = N(N + 1)/2 (exact in float);
 *   quantized:   peer i sends (i + 1) * (j % 2): every partial sum of a set
 *                of peers takes just two values per chunk, its min and max,
 *                which MinMax quantization carries exactly, so the sum is
 *                S * (j % 2) exactly.
 * The warm-up result is checked the same way. A wrong element or a failed
 * call ends the run with exit code 1 (setup errors: 2).
 *
 * --algorithm forces one of the all-reduce's algorithms (pcclCollectiveOptions_t.algorithm,
 * through pcclAllReduceEx); a size it cannot run (the first call is pcclInvalidArgument on
 * every peer alike: the relay above the master's relay_max, direct above 4 MiB) is skipped
 * with a '# skipped' line. --table installs an algorithm table (pcclTuneLoad, a file
 * pcclTuneSave or pccl-tune wrote) once the group is whole, before the first size.
 *
 * Peer 0 prints one row per size (the format all three systems share, see
 * docs/benchmarks.md):
 *   size count iters time_us min_us max_us algbw busbw tx_bytes copied_bytes
 * time_us is the median of peer 0's per-operation wall times (an all-reduce
 * completes on a peer only once all peers contributed), algbw = size /
 * time (GB/s, 1e9), busbw = algbw * 2(N-1)/N (the nccl-tests convention),
 * tx_bytes = the bytes peer 0 sent in the last timed operation, as reported
 * by pcclReduceInfo_t, copied_bytes = the tensor bytes peer 0's runtime
 * copied in memory during that operation (PCCL_ATTRIBUTE_COPIED_BYTES read
 * before and after it, outside the timed region; docs/benchmarks.md),
 * algo = the algorithm the operations ran: the forced one, else what
 * pcclGetAlgorithm says the group's table or the built-in rule chooses
 * ('-' for a quantized run, which pcclGetAlgorithm does not describe).
 */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pccl.h"
#include "pccl_bench_peer.h"

typedef struct quant_name {
    const char *name;
    pcclQuantizationAlgorithm_t algorithm;
    pcclDataType_t type;
} quant_name;

static const quant_name quant_names[] = {
    {"none", pcclQuantNone, pcclFloat},
    {"minmax-u8", pcclQuantMinMax, pcclUint8},
    {"minmax-i8", pcclQuantMinMax, pcclInt8},
    {"minmax-u16", pcclQuantMinMax, pcclUint16},
    {"minmax-i16", pcclQuantMinMax, pcclInt16},
    {"zps-u8", pcclQuantZeroPointScale, pcclUint8},
    {"zps-i8", pcclQuantZeroPointScale, pcclInt8},
    {"zps-u16", pcclQuantZeroPointScale, pcclUint16},
    {"zps-i16", pcclQuantZeroPointScale, pcclInt16},
};

typedef struct options {
    const char *url;
    uint32_t index;
    uint32_t world;
    uint64_t min_bytes;
    uint64_t max_bytes;
    uint32_t step;
    uint32_t warmup;
    uint32_t iters_min;
    uint32_t iters_max;
    uint64_t iter_bytes;
    const quant_name *quant;
    uint32_t timeout_ms;
    uint32_t pool;      /* p2p_connection_pool_size (0: the library's default) */
    uint32_t algorithm; /* pcclAlgorithm_t (pcclAlgoAuto: the table, else the rule) */
    const char *table;  /* --table: pcclTuneLoad's file, or NULL */
} options;

/* The names of pcclAlgorithm_t, as docs/algorithms.md and the table files spell them. */
static const char *const algo_names[] = {"auto", "relay",        "direct",
                                         "ring", "ring_striped", "halving_doubling"};

static const char *algo_name(uint32_t a)
{
    return a < sizeof algo_names / sizeof algo_names[0] ? algo_names[a] : "?";
}

static void usage(void)
{
    fprintf(stderr, "usage: pccl_allreduce_bench --url URL --index I --world N [--min BYTES]\n"
                    "  [--max BYTES] [--step 2|4] [--warmup W] [--iters-min A] [--iters-max B]\n"
                    "  [--iter-bytes BYTES] [--quant none|minmax-u8|...|zps-i16]\n"
                    "  [--timeout-ms T] [--pool K] [--table FILE]\n"
                    "  [--algorithm auto|relay|direct|ring|ring_striped]\n");
}

static bool parse_args(int argc, char **argv, options *o)
{
    memset(o, 0, sizeof *o);
    o->world = 2;
    o->min_bytes = 4096u;
    o->max_bytes = 256u * 1024u * 1024u;
    o->step = 4;
    o->warmup = 2;
    o->iters_min = 5;
    o->iters_max = 200;
    o->iter_bytes = 1024u * 1024u * 1024u;
    o->quant = &quant_names[0];
    o->timeout_ms = 120000;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (i + 1 >= argc) {
            fprintf(stderr, "pccl_allreduce_bench: %s needs a value\n", a);
            return false;
        }
        const char *v = argv[++i];
        uint64_t b = 0;
        if (strcmp(a, "--url") == 0) {
            o->url = v;
        } else if (strcmp(a, "--index") == 0) {
            o->index = (uint32_t)strtoul(v, NULL, 10);
        } else if (strcmp(a, "--world") == 0) {
            o->world = (uint32_t)strtoul(v, NULL, 10);
        } else if (strcmp(a, "--min") == 0 && pccl_bench_parse_bytes(v, &b)) {
            o->min_bytes = b;
        } else if (strcmp(a, "--max") == 0 && pccl_bench_parse_bytes(v, &b)) {
            o->max_bytes = b;
        } else if (strcmp(a, "--iter-bytes") == 0 && pccl_bench_parse_bytes(v, &b)) {
            o->iter_bytes = b;
        } else if (strcmp(a, "--step") == 0) {
            o->step = (uint32_t)strtoul(v, NULL, 10);
        } else if (strcmp(a, "--warmup") == 0) {
            o->warmup = (uint32_t)strtoul(v, NULL, 10);
        } else if (strcmp(a, "--iters-min") == 0) {
            o->iters_min = (uint32_t)strtoul(v, NULL, 10);
        } else if (strcmp(a, "--iters-max") == 0) {
            o->iters_max = (uint32_t)strtoul(v, NULL, 10);
        } else if (strcmp(a, "--pool") == 0) {
            o->pool = (uint32_t)strtoul(v, NULL, 10);
        } else if (strcmp(a, "--timeout-ms") == 0) {
            o->timeout_ms = (uint32_t)strtoul(v, NULL, 10);
        } else if (strcmp(a, "--table") == 0) {
            o->table = v;
        } else if (strcmp(a, "--algorithm") == 0) {
            o->algorithm = UINT32_MAX;
            for (uint32_t n = 0; n < sizeof algo_names / sizeof algo_names[0]; n++) {
                if (strcmp(v, algo_names[n]) == 0) o->algorithm = n;
            }
            if (o->algorithm == UINT32_MAX) {
                fprintf(stderr, "pccl_allreduce_bench: unknown --algorithm %s\n", v);
                return false;
            }
        } else if (strcmp(a, "--quant") == 0) {
            o->quant = NULL;
            for (size_t q = 0; q < sizeof quant_names / sizeof quant_names[0]; q++) {
                if (strcmp(v, quant_names[q].name) == 0) o->quant = &quant_names[q];
            }
            if (o->quant == NULL) {
                fprintf(stderr, "pccl_allreduce_bench: unknown --quant %s\n", v);
                return false;
            }
        } else {
            fprintf(stderr, "pccl_allreduce_bench: bad argument %s %s\n", a, v);
            return false;
        }
    }
    if (o->url == NULL || o->world < 2 || o->index >= o->world || o->step < 2 ||
        o->min_bytes < 4u || o->max_bytes < o->min_bytes || o->iters_min == 0 ||
        o->iters_max < o->iters_min) {
        return false;
    }
    return true;
}

/* What peer `index` contributes at element j (see the header comment). */
static float contribution(uint32_t index, uint64_t j, bool quantized)
{
    const uint32_t pattern = quantized ? (uint32_t)(j % 2u) : 1u + (uint32_t)(j % 251u);
    return (float)((index + 1u) * pattern);
}

static int verify(const float *out, uint64_t count, uint32_t world, bool quantized, uint32_t index,
                  uint64_t bytes)
{
    const uint32_t s = world * (world + 1u) / 2u;
    for (uint64_t j = 0; j < count; j++) {
        const uint32_t pattern = quantized ? (uint32_t)(j % 2u) : 1u + (uint32_t)(j % 251u);
        const float want = (float)(s * pattern);
        if (out[j] != want) {
            fprintf(stderr,
                    "pccl_allreduce_bench %u: WRONG RESULT at %" PRIu64 " bytes, element %" PRIu64
                    ": got %.9g want %.9g\n",
                    index, bytes, j, (double)out[j], (double)want);
            return 1;
        }
    }
    return 0;
}

static int run_size(pcclComm_t *comm, const options *o, uint64_t bytes, float *send, float *recv,
                    double *times, uint64_t *tag)
{
    const uint64_t count = bytes / sizeof(float);
    const bool quantized = o->quant->algorithm != pcclQuantNone;
    uint64_t iters = o->iter_bytes / bytes;
    if (iters < o->iters_min) iters = o->iters_min;
    if (iters > o->iters_max) iters = o->iters_max;

    for (uint64_t j = 0; j < count; j++)
        send[j] = contribution(o->index, j, quantized);

    pcclReduceDescriptor_t desc;
    memset(&desc, 0, sizeof desc);
    desc.count = (size_t)count;
    desc.op = pcclSum;
    desc.src_descriptor.datatype = pcclFloat;
    desc.src_descriptor.distribution_hint = pcclDistributionNone;
    desc.quantization_options.algorithm = o->quant->algorithm;
    desc.quantization_options.quantized_datatype = o->quant->type;

    pcclCollectiveOptions_t copts = PCCL_COLLECTIVE_OPTIONS_INIT;
    copts.algorithm = o->algorithm;
    if (o->algorithm == pcclAlgoHalvingDoubling &&
        ((o->world != 2u && o->world != 4u) || count < (uint64_t)o->world)) {
        /* It would run the ring there (docs/algorithms.md): not a column of its own. */
        if (o->index == 0)
            printf("# skipped %" PRIu64 ": algorithm %s does not apply\n", bytes,
                   algo_name(o->algorithm));
        return 0;
    }

    pcclReduceInfo_t info;
    uint32_t copied = 0; /* bytes copied by the last timed operation (< 2 GiB: mod 2^31 exact) */
    const uint64_t total = (uint64_t)o->warmup + iters + 1u;
    for (uint64_t k = 0; k < total; k++) {
        const bool timed = k >= o->warmup && k < o->warmup + iters;
        const bool checked = k + 1u == o->warmup || k + 1u == total;
        if (checked) memset(recv, 0xff, (size_t)bytes); /* NaN poison */
        memset(&info, 0, sizeof info);
        desc.tag = (*tag)++;
        uint32_t c0 = 0;
        if (timed && pccl_bench_copied_low(comm, &c0) != 0) return 1;
        const double t0 = pccl_bench_now_us();
        pcclResult_t r;
        if (o->algorithm == pcclAlgoAuto) {
            r = pcclAllReduce(send, recv, &desc, comm, &info);
        } else {
            pcclCollectiveInfo_t ci;
            memset(&ci, 0, sizeof ci);
            r = pcclAllReduceEx(send, recv, &desc, &copts, comm, &ci);
            info.local_world_size = ci.world_size;
            info.tx_bytes = ci.tx_bytes;
            info.rx_bytes = ci.rx_bytes;
        }
        const double dt = pccl_bench_now_us() - t0;
        if (r == pcclInvalidArgument && k == 0 && o->algorithm != pcclAlgoAuto) {
            /* Refused alike by every peer before any data moved: the algorithm cannot run
             * this size. */
            if (o->index == 0)
                printf("# skipped %" PRIu64 ": algorithm %s does not apply\n", bytes,
                       algo_name(o->algorithm));
            return 0;
        }
        if (r != pcclSuccess) {
            fprintf(stderr, "pccl_allreduce_bench %u: all-reduce of %" PRIu64 " bytes: %d\n",
                    o->index, bytes, (int)r);
            return 1;
        }
        if (info.local_world_size != o->world) {
            fprintf(stderr, "pccl_allreduce_bench %u: all-reduce ran on %u peers, not %u\n",
                    o->index, info.local_world_size, o->world);
            return 1;
        }
        if (timed) {
            times[k - o->warmup] = dt;
            uint32_t c1 = 0;
            if (pccl_bench_copied_low(comm, &c1) != 0) return 1;
            copied = (c1 - c0) & 0x7fffffffu;
        }
        if (checked && verify(recv, count, o->world, quantized, o->index, bytes) != 0) return 1;
        if (k + 2u == total && o->index == 0) {
            /* The last timed operation's statistics. */
            qsort(times, (size_t)iters, sizeof *times, pccl_bench_cmp_double);
            const double med =
                iters % 2u ? times[iters / 2u] : 0.5 * (times[iters / 2u - 1u] + times[iters / 2u]);
            const double algbw = (double)bytes / (med * 1e-6) / 1e9;
            const double busbw = algbw * 2.0 * (double)(o->world - 1u) / (double)o->world;
            pcclAlgorithm_t ran = (pcclAlgorithm_t)o->algorithm;
            if (ran == pcclAlgoAuto &&
                pcclGetAlgorithm(comm, (size_t)count, pcclFloat, &ran) != pcclSuccess) {
                return 1;
            }
            printf("%12" PRIu64 " %11" PRIu64 " %6" PRIu64 " %11.1f %11.1f %11.1f %8.3f %8.3f "
                   "%12" PRIu64 " %12" PRIu32 " %12s\n",
                   bytes, count, iters, med, times[0], times[iters - 1u], algbw, busbw,
                   info.tx_bytes, copied,
                   quantized && o->algorithm == pcclAlgoAuto ? "-" : algo_name((uint32_t)ran));
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    options o;
    if (!parse_args(argc, argv, &o)) {
        usage();
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (pcclInit() != pcclSuccess) return 2;
    pcclComm_t *comm = NULL;
    if (pccl_bench_connect("pccl_allreduce_bench", o.index, o.url, o.pool, o.timeout_ms, &comm) !=
        0)
        return 2;
    int rc =
        pccl_bench_wait_for_world("pccl_allreduce_bench", comm, o.index, o.world, o.timeout_ms);
    if (rc != 0) return rc;

    if (o.table != NULL) {
        const pcclResult_t r = pcclTuneLoad(comm, o.table);
        if (r != pcclSuccess) {
            fprintf(stderr, "pccl_allreduce_bench %u: pcclTuneLoad %s: %d\n", o.index, o.table,
                    (int)r);
            return 2;
        }
    }

    float *send = malloc((size_t)o.max_bytes);
    float *recv = malloc((size_t)o.max_bytes);
    const uint64_t iters_cap = o.iters_max;
    double *times = malloc((size_t)iters_cap * sizeof *times);
    if (send == NULL || recv == NULL || times == NULL) return 2;

    if (o.index == 0) {
        printf("# system pccl N %u quant %s warmup %u algorithm %s table %s\n", o.world,
               o.quant->name, o.warmup, algo_name(o.algorithm), o.table ? o.table : "none");
        printf("# %10s %11s %6s %11s %11s %11s %8s %8s %12s %12s %12s\n", "size", "count", "iters",
               "time_us", "min_us", "max_us", "algbw", "busbw", "tx_bytes", "copied_bytes", "algo");
    }
    uint64_t tag = 1;
    for (uint64_t bytes = o.min_bytes; bytes <= o.max_bytes && rc == 0; bytes *= o.step) {
        rc = run_size(comm, &o, bytes - bytes % sizeof(float), send, recv, times, &tag);
    }
    /* Leave together: a peer whose last sizes were all skipped would otherwise leave while
     * the others still start them, and they would find a smaller group (pcclTooFewPeers). */
    if (rc == 0 && pcclBarrier(NULL, comm, NULL) != pcclSuccess) {
        fprintf(stderr, "pccl_allreduce_bench %u: the final barrier failed\n", o.index);
        rc = 1;
    }
    if (rc == 0 && o.index == 0) printf("# done, results verified exactly\n");
    free(send);
    free(recv);
    free(times);
    if (pcclDestroyCommunicator(comm) != pcclSuccess && rc == 0) rc = 1;
    return rc;
}
