/*
 * pccl_coll_bench.c — the collective benchmark over libpccl's collective set
 * beyond all-reduce (include/pccl.h: pcclBroadcast, pcclReduce, pcclAllGather,
 * pcclReduceScatter, pcclAllToAll, pcclGather, pcclScatter, pcclBarrier) and
 * of point-to-point transfers (pcclSendAsync / pcclRecvAsync), in the style
 * of nccl-tests and of bench/allreduce/pccl_allreduce_bench.c. One process
 * per peer; bench/collectives/launch.sh starts a ccoip_master and N of these
 * on 127.0.0.1.
 *
 *   pccl_coll_bench --url tcp://127.0.0.1:PORT --index I --world N --coll NAME
 *       [--min BYTES] [--max BYTES] [--step 2|4] [--warmup W]
 *       [--iters-min A] [--iters-max B] [--iter-bytes BYTES]
 *       [--timeout-ms T] [--pool K] [--table FILE]
 *
 * NAME: broadcast reduce allgather reducescatter alltoall gather scatter
 * sendrecv barrier. sendrecv is a ring shift (coll_common.h): each rank
 * posts pcclSendAsync of its tensor to rank + 1 and pcclRecvAsync from
 * rank - 1 on one tag (two ops: their pairs differ), then waits for the send
 * and the receive; the timed region covers both posts and both waits. Each
 * peer connects and updates the topology until the group holds N peers (as
 * pccl_allreduce_bench), then reads its rank
 * (PCCL_ATTRIBUTE_RANK); the root of the rooted collectives is rank 0, and
 * rank 0 prints (so launch.sh passes every peer's stdout through). Sizes,
 * data, exact checks, busbw factors and timing: coll_common.h (the same as
 * mpi_coll_bench.c and gloo_coll_bench.py). Per size: W warm-ups, K timed
 * operations (K = clamp(iter-bytes / size, A, B); barrier: B), one more
 * untimed operation; the output is NaN-poisoned before the last warm-up and
 * the last operation and checked exactly after them. Out of place (broadcast
 * works on one buffer). Every operation starts after an untimed pcclBarrier
 * (not for the barrier benchmark); its time is the slowest peer's, exchanged
 * after the size's last operation with an untimed pcclAllReduce MAX. Every
 * call gets a fresh tag. A failed call, a wrong element, or an operation that
 * ran on another world or rank than the one read at the start (the group
 * changed) ends the run with exit code 1 (setup errors: 2).
 *
 * Rank 0 prints one row per size (the format of the all-reduce benchmark):
 *   size count iters time_us min_us max_us algbw busbw tx_bytes copied_bytes
 * tx_bytes = the bytes rank 0 sent in the last timed operation
 * (pcclCollectiveInfo_t.tx_bytes), copied_bytes = the tensor bytes its
 * runtime copied in memory during it (PCCL_ATTRIBUTE_COPIED_BYTES read
 * before and after, outside the timed region).
 *
 * --table FILE installs an algorithm table (pcclTuneLoad of a file pcclTuneSave or pccl-tune
 * wrote, docs/algorithms.md) once the group is whole, before the first size: the "tuned"
 * system of scripts/bench-collectives.sh.
 *
 * sendrecv also prints, after each size's row, a comment line with rank 0's
 * phases (medians over the timed operations, µs from the start of the
 * operation): '# phases post P send S recv R' — P when both async calls have
 * returned, S when the send's wait returned, R when the receive's did.
 */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "coll_common.h"
#include "pccl.h"
#include "pccl_bench_peer.h"

typedef struct options {
    const char *url;
    uint32_t index;
    uint32_t world;
    coll_kind coll;
    uint64_t min_bytes;
    uint64_t max_bytes;
    uint32_t step;
    uint32_t warmup;
    uint32_t iters_min;
    uint32_t iters_max;
    uint64_t iter_bytes;
    uint32_t timeout_ms;
    uint32_t pool;     /* p2p_connection_pool_size (0: the library's default) */
    const char *table; /* --table: a tuned algorithm table to install (NULL: none) */
} options;

static void usage(void)
{
    fprintf(stderr, "usage: pccl_coll_bench --url URL --index I --world N --coll NAME\n"
                    "  [--min BYTES] [--max BYTES] [--step 2|4] [--warmup W] [--iters-min A]\n"
                    "  [--iters-max B] [--iter-bytes BYTES] [--timeout-ms T] [--pool K]\n"
                    "  [--table FILE]\n"
                    "  NAME: broadcast reduce allgather reducescatter alltoall gather scatter "
                    "sendrecv barrier\n");
}

static bool parse_args(int argc, char **argv, options *o)
{
    memset(o, 0, sizeof *o);
    o->world = 2;
    o->coll = COLL_COUNT;
    o->min_bytes = 4096u;
    o->max_bytes = 256u * 1024u * 1024u;
    o->step = 4;
    o->warmup = 2;
    o->iters_min = 5;
    o->iters_max = 200;
    o->iter_bytes = 1024u * 1024u * 1024u;
    o->timeout_ms = 120000;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (i + 1 >= argc) {
            fprintf(stderr, "pccl_coll_bench: %s needs a value\n", a);
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
        } else if (strcmp(a, "--coll") == 0) {
            const int k = coll_parse(v);
            if (k < 0) {
                fprintf(stderr, "pccl_coll_bench: unknown --coll %s\n", v);
                return false;
            }
            o->coll = (coll_kind)k;
        } else if (strcmp(a, "--min") == 0 && coll_parse_bytes(v, &b)) {
            o->min_bytes = b;
        } else if (strcmp(a, "--max") == 0 && coll_parse_bytes(v, &b)) {
            o->max_bytes = b;
        } else if (strcmp(a, "--iter-bytes") == 0 && coll_parse_bytes(v, &b)) {
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
        } else {
            fprintf(stderr, "pccl_coll_bench: bad argument %s %s\n", a, v);
            return false;
        }
    }
    if (o->url == NULL || o->coll == COLL_COUNT || o->world < 2 || o->world > COLL_MAX_WORLD ||
        o->index >= o->world || o->step < 2 || o->min_bytes < 4u * (uint64_t)o->world ||
        o->max_bytes < o->min_bytes || o->iters_min == 0 || o->iters_max < o->iters_min) {
        return false;
    }
    return true;
}

/* Rank 0's phases of one sendrecv (µs from its start); see the header. */
typedef struct phases {
    double post;
    double send;
    double recv;
} phases;

/*
 * The sendrecv ring shift: both halves posted on one tag, then the send and
 * the receive waited for. info gets the send's statistics (tx_bytes), and
 * the receive's world and rank are checked against the send's.
 */
static pcclResult_t run_sendrecv(pcclComm_t *comm, uint32_t rank, uint32_t world, float *send,
                                 float *recv, size_t c, const pcclCollectiveOptions_t *opts,
                                 pcclCollectiveInfo_t *info, double t0, phases *ph)
{
    pcclWork_t *ws = NULL;
    pcclWork_t *wr = NULL;
    pcclCollectiveInfo_t ri;
    memset(&ri, 0, sizeof ri);
    pcclResult_t rs =
        pcclSendAsync(send, c, pcclFloat, (int)coll_ring_to(rank, world), opts, comm, &ws);
    pcclResult_t rr =
        pcclRecvAsync(recv, c, pcclFloat, (int)coll_ring_from(rank, world), opts, comm, &wr);
    ph->post = pccl_bench_now_us() - t0;
    if (rs == pcclSuccess) rs = pcclWorkWait(ws, info);
    ph->send = pccl_bench_now_us() - t0;
    if (rr == pcclSuccess) rr = pcclWorkWait(wr, &ri);
    ph->recv = pccl_bench_now_us() - t0;
    pcclWorkFree(ws);
    pcclWorkFree(wr);
    if (rs != pcclSuccess) return rs;
    if (rr != pcclSuccess) return rr;
    if (ri.world_size != info->world_size || ri.rank != info->rank) {
        info->world_size = ri.world_size; /* the caller reports the mismatch */
        info->rank = ri.rank;
    }
    return pcclSuccess;
}

/* One collective of kind k; count per block (blocked kinds) or of the tensor. */
static pcclResult_t run_op(coll_kind k, pcclComm_t *comm, uint32_t rank, uint32_t world,
                           float *send, float *recv, uint64_t count,
                           const pcclCollectiveOptions_t *opts, pcclCollectiveInfo_t *info,
                           double t0, phases *ph)
{
    const size_t c = (size_t)count;
    switch (k) {
    case COLL_BROADCAST:
        return pcclBroadcast(send, c, pcclFloat, 0, opts, comm, info);
    case COLL_REDUCE:
        return pcclReduce(send, recv, c, pcclFloat, pcclSum, 0, opts, comm, info);
    case COLL_ALLGATHER:
        return pcclAllGather(send, recv, c, pcclFloat, opts, comm, info);
    case COLL_REDUCESCATTER:
        return pcclReduceScatter(send, recv, c, pcclFloat, pcclSum, opts, comm, info);
    case COLL_ALLTOALL:
        return pcclAllToAll(send, recv, c, pcclFloat, opts, comm, info);
    case COLL_GATHER:
        return pcclGather(send, recv, c, pcclFloat, 0, opts, comm, info);
    case COLL_SCATTER:
        return pcclScatter(send, recv, c, pcclFloat, 0, opts, comm, info);
    case COLL_SENDRECV:
        return run_sendrecv(comm, rank, world, send, recv, c, opts, info, t0, ph);
    case COLL_BARRIER:
    default:
        return pcclBarrier(opts, comm, info);
    }
}

/* times[i] = the largest of every peer's times[i] (an all-reduce MAX, untimed). */
static int max_over_peers(pcclComm_t *comm, double *times, uint64_t n, uint64_t *tag,
                          const options *o)
{
    pcclReduceDescriptor_t desc;
    memset(&desc, 0, sizeof desc);
    desc.count = (size_t)n;
    desc.op = pcclMax;
    desc.tag = (*tag)++;
    desc.src_descriptor.datatype = pcclDouble;
    desc.src_descriptor.distribution_hint = pcclDistributionNone;
    desc.quantization_options.algorithm = pcclQuantNone;
    const pcclResult_t r = pcclAllReduce(times, times, &desc, comm, NULL);
    if (r != pcclSuccess) {
        fprintf(stderr, "pccl_coll_bench %u: all-reduce MAX of the times: %d\n", o->index, (int)r);
        return 1;
    }
    return 0;
}

static int run_size(pcclComm_t *comm, const options *o, uint32_t rank, uint64_t bytes, float *send,
                    float *recv, double *times, double *ph_times, uint64_t *tag)
{
    const coll_kind k = o->coll;
    const uint32_t n = o->world;
    const uint64_t count = k == COLL_BARRIER ? 0u : coll_count(k, bytes, n);
    const uint64_t size = coll_size(k, count, n);
    uint64_t iters = o->iters_max;
    if (k != COLL_BARRIER) {
        iters = o->iter_bytes / size;
        if (iters < o->iters_min) iters = o->iters_min;
        if (iters > o->iters_max) iters = o->iters_max;
    }
    coll_fill(k, rank, n, count, send);
    float *out = k == COLL_BROADCAST ? send : recv; /* broadcast: one buffer */
    const uint64_t out_elems = coll_out_elems(k, rank, n, count);

    pcclCollectiveInfo_t info;
    uint32_t copied = 0; /* bytes copied by the last timed operation (< 2 GiB: mod 2^31 exact) */
    uint64_t tx = 0;
    const uint64_t total = (uint64_t)o->warmup + iters + 1u;
    for (uint64_t it = 0; it < total; it++) {
        const bool timed = it >= o->warmup && it < o->warmup + iters;
        const bool checked = it + 1u == o->warmup || it + 1u == total;
        if (checked && out_elems > 0 && !(k == COLL_BROADCAST && rank == 0))
            memset(out, 0xff, (size_t)(out_elems * sizeof(float))); /* NaN poison */
        pcclCollectiveOptions_t opts = PCCL_COLLECTIVE_OPTIONS_INIT;
        if (k != COLL_BARRIER) {
            /* A common start (untimed). */
            opts.tag = (*tag)++;
            const pcclResult_t rb = pcclBarrier(&opts, comm, NULL);
            if (rb != pcclSuccess) {
                fprintf(stderr, "pccl_coll_bench %u: barrier before %s: %d\n", o->index,
                        coll_names[k], (int)rb);
                return 1;
            }
        }
        opts.tag = (*tag)++;
        memset(&info, 0, sizeof info);
        uint32_t c0 = 0;
        if (timed && pccl_bench_copied_low(comm, &c0) != 0) return 1;
        phases ph = {0.0, 0.0, 0.0};
        const double t0 = pccl_bench_now_us();
        const pcclResult_t r = run_op(k, comm, rank, n, send, recv, count, &opts, &info, t0, &ph);
        const double dt = pccl_bench_now_us() - t0;
        if (r != pcclSuccess) {
            fprintf(stderr, "pccl_coll_bench %u: %s of %" PRIu64 " bytes: %d\n", o->index,
                    coll_names[k], size, (int)r);
            return 1;
        }
        if (info.world_size != n || info.rank != rank) {
            fprintf(stderr,
                    "pccl_coll_bench %u: %s ran as rank %u of %u, not rank %u of %u (the "
                    "group changed)\n",
                    o->index, coll_names[k], info.rank, info.world_size, rank, n);
            return 1;
        }
        if (timed) {
            times[it - o->warmup] = dt;
            ph_times[3u * (it - o->warmup)] = ph.post;
            ph_times[3u * (it - o->warmup) + 1u] = ph.send;
            ph_times[3u * (it - o->warmup) + 2u] = ph.recv;
            uint32_t c1 = 0;
            if (pccl_bench_copied_low(comm, &c1) != 0) return 1;
            copied = (c1 - c0) & 0x7fffffffu;
            tx = info.tx_bytes;
        }
        if (checked) {
            float want = 0.0f;
            const int64_t at = coll_verify(k, rank, n, count, out, &want);
            if (at >= 0) {
                fprintf(stderr,
                        "pccl_coll_bench %u (rank %u): %s WRONG RESULT at %" PRIu64
                        " bytes, element %" PRId64 ": got %.9g want %.9g\n",
                        o->index, rank, coll_names[k], size, at, (double)out[at], (double)want);
                return 1;
            }
        }
    }
    if (max_over_peers(comm, times, iters, tag, o) != 0) return 1;
    if (rank == 0) {
        const double med = coll_median(times, iters);
        const double algbw = (double)size / (med * 1e-6) / 1e9;
        const double busbw = algbw * coll_busbw_factor(k, n);
        printf("%12" PRIu64 " %11" PRIu64 " %6" PRIu64 " %11.1f %11.1f %11.1f %8.3f %8.3f "
               "%12" PRIu64 " %12" PRIu32 "\n",
               size, size / 4u, iters, med, times[0], times[iters - 1u], algbw, busbw, tx, copied);
        if (k == COLL_SENDRECV) {
            double m[3];
            for (uint32_t j = 0; j < 3u; j++) {
                for (uint64_t i = 0; i < iters; i++)
                    times[i] = ph_times[3u * i + j]; /* times is free again */
                m[j] = coll_median(times, iters);
            }
            printf("# phases post %.1f send %.1f recv %.1f\n", m[0], m[1], m[2]);
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
    if (pccl_bench_connect("pccl_coll_bench", o.index, o.url, o.pool, o.timeout_ms, &comm) != 0)
        return 2;
    int rc = pccl_bench_wait_for_world("pccl_coll_bench", comm, o.index, o.world, o.timeout_ms);
    if (rc != 0) return rc;
    if (o.table != NULL && pcclTuneLoad(comm, o.table) != pcclSuccess) {
        fprintf(stderr, "pccl_coll_bench %u: pcclTuneLoad %s failed\n", o.index, o.table);
        return 2;
    }
    int rank = -1;
    if (pcclGetAttribute(comm, PCCL_ATTRIBUTE_RANK, &rank) != pcclSuccess || rank < 0 ||
        (uint32_t)rank >= o.world) {
        fprintf(stderr, "pccl_coll_bench %u: no rank in a world of %u (%d)\n", o.index, o.world,
                rank);
        return 2;
    }

    float *send = malloc((size_t)o.max_bytes);
    float *recv = malloc((size_t)o.max_bytes);
    double *times = calloc((size_t)o.iters_max, sizeof *times);
    double *ph_times = calloc(3u * (size_t)o.iters_max, sizeof *ph_times);
    if (send == NULL || recv == NULL || times == NULL || ph_times == NULL) return 2;

    if (rank == 0) {
        printf("# system %s N %u coll %s warmup %u\n", o.table != NULL ? "tuned" : "pccl", o.world,
               coll_names[o.coll], o.warmup);
        printf("# %10s %11s %6s %11s %11s %11s %8s %8s %12s %12s\n", "size", "count", "iters",
               "time_us", "min_us", "max_us", "algbw", "busbw", "tx_bytes", "copied_bytes");
    }
    uint64_t tag = 1;
    for (uint64_t bytes = o.min_bytes; bytes <= o.max_bytes && rc == 0; bytes *= o.step) {
        rc = run_size(comm, &o, (uint32_t)rank, bytes, send, recv, times, ph_times, &tag);
        if (o.coll == COLL_BARRIER) break;
    }
    if (rc == 0 && rank == 0) printf("# done, results verified exactly\n");
    free(send);
    free(recv);
    free(times);
    free(ph_times);
    if (pcclDestroyCommunicator(comm) != pcclSuccess && rc == 0) rc = 1;
    return rc;
}
