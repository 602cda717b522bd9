/*
 * mpi_coll_bench.c — the Open MPI reference of the collective benchmark:
 * MPI_Bcast, MPI_Reduce (MPI_SUM), MPI_Allgather, MPI_Reduce_scatter_block
 * (MPI_SUM), MPI_Alltoall, MPI_Gather, MPI_Scatter, MPI_Barrier and a ring shift
 * of MPI_Irecv + MPI_Isend + MPI_Waitall (sendrecv) on float32,
 * measured exactly as pccl_coll_bench measures pccl (same sizes, warm-ups,
 * iteration counts, data, exact check and output rows; coll_common.h).
 *
 *   mpirun --allow-run-as-root --oversubscribe -np N --mca btl self,tcp \
 *          --mca btl_tcp_if_include lo mpi_coll_bench --coll NAME
 *          [--min BYTES] [--max BYTES] [--step 2|4] [--warmup W]
 *          [--iters-min A] [--iters-max B] [--iter-bytes BYTES]
 *
 * NAME: broadcast reduce allgather reducescatter alltoall gather scatter
 * sendrecv barrier. sendrecv: each rank posts MPI_Irecv from rank - 1 and
 * MPI_Isend to rank + 1 (tag 0), then MPI_Waitall on both. Root (broadcast,
 * reduce, gather, scatter): rank 0. Per size: W warm-ups, K timed operations
 * (K = clamp(iter-bytes / size, A, B); barrier: B), one more untimed
 * operation; the output is NaN-poisoned before the last warm-up and the last
 * operation and checked exactly after them. Out of place (broadcast works on
 * one buffer, as MPI_Bcast does). Every operation starts after an untimed
 * MPI_Barrier (not for the barrier benchmark) and its time is the slowest
 * rank's wall time around the call (coll_common.h, "Timing"). Rank 0 prints
 *   size count iters time_us min_us max_us algbw busbw tx_bytes
 * with time_us the median of those times, count = size / 4 and tx_bytes "-"
 * (MPI does not report it). Barrier prints one row, size 0. Built by
 * scripts/bench-collectives.sh, and by ref_smoke.sh for its smoke test, with
 * mpicc.
 */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll_common.h"

static void run_op(coll_kind k, float *send, float *recv, int count, int rank, int world)
{
    switch (k) {
    case COLL_BROADCAST:
        MPI_Bcast(send, count, MPI_FLOAT, 0, MPI_COMM_WORLD);
        break;
    case COLL_REDUCE:
        MPI_Reduce(send, recv, count, MPI_FLOAT, MPI_SUM, 0, MPI_COMM_WORLD);
        break;
    case COLL_ALLGATHER:
        MPI_Allgather(send, count, MPI_FLOAT, recv, count, MPI_FLOAT, MPI_COMM_WORLD);
        break;
    case COLL_REDUCESCATTER:
        MPI_Reduce_scatter_block(send, recv, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        break;
    case COLL_ALLTOALL:
        MPI_Alltoall(send, count, MPI_FLOAT, recv, count, MPI_FLOAT, MPI_COMM_WORLD);
        break;
    case COLL_GATHER:
        MPI_Gather(send, count, MPI_FLOAT, recv, count, MPI_FLOAT, 0, MPI_COMM_WORLD);
        break;
    case COLL_SCATTER:
        MPI_Scatter(send, count, MPI_FLOAT, recv, count, MPI_FLOAT, 0, MPI_COMM_WORLD);
        break;
    case COLL_SENDRECV: {
        MPI_Request req[2];
        MPI_Irecv(recv, count, MPI_FLOAT, (int)coll_ring_from((uint32_t)rank, (uint32_t)world), 0,
                  MPI_COMM_WORLD, &req[0]);
        MPI_Isend(send, count, MPI_FLOAT, (int)coll_ring_to((uint32_t)rank, (uint32_t)world), 0,
                  MPI_COMM_WORLD, &req[1]);
        MPI_Waitall(2, req, MPI_STATUSES_IGNORE);
        break;
    }
    case COLL_BARRIER:
    default:
        MPI_Barrier(MPI_COMM_WORLD);
        break;
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank = 0, world = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    setvbuf(stdout, NULL, _IOLBF, 0);

    uint64_t min_bytes = 4096u, max_bytes = 256u * 1024u * 1024u,
             iter_bytes = 1024u * 1024u * 1024u;
    unsigned step = 4, warmup = 2, iters_min = 5, iters_max = 200;
    int kind = -1;
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *a = argv[i], *v = argv[i + 1];
        uint64_t b = 0;
        if (strcmp(a, "--coll") == 0)
            kind = coll_parse(v);
        else if (strcmp(a, "--min") == 0 && coll_parse_bytes(v, &b))
            min_bytes = b;
        else if (strcmp(a, "--max") == 0 && coll_parse_bytes(v, &b))
            max_bytes = b;
        else if (strcmp(a, "--iter-bytes") == 0 && coll_parse_bytes(v, &b))
            iter_bytes = b;
        else if (strcmp(a, "--step") == 0)
            step = (unsigned)strtoul(v, NULL, 10);
        else if (strcmp(a, "--warmup") == 0)
            warmup = (unsigned)strtoul(v, NULL, 10);
        else if (strcmp(a, "--iters-min") == 0)
            iters_min = (unsigned)strtoul(v, NULL, 10);
        else if (strcmp(a, "--iters-max") == 0)
            iters_max = (unsigned)strtoul(v, NULL, 10);
        else {
            if (rank == 0) fprintf(stderr, "mpi_coll_bench: bad argument %s\n", a);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    if (kind < 0 || step < 2 || min_bytes < 4u * (uint64_t)world || max_bytes < min_bytes ||
        iters_min == 0 || iters_max < iters_min || world < 2 || (unsigned)world > COLL_MAX_WORLD ||
        max_bytes / 4u > (uint64_t)INT32_MAX) {
        if (rank == 0)
            fprintf(stderr, "mpi_coll_bench: bad arguments (--coll broadcast|reduce|allgather|"
                            "reducescatter|alltoall|gather|scatter|sendrecv|barrier)\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    const coll_kind k = (coll_kind)kind;
    const uint32_t r = (uint32_t)rank, n = (uint32_t)world;
    float *send = malloc((size_t)max_bytes);
    float *recv = malloc((size_t)max_bytes);
    double *times = malloc((size_t)iters_max * sizeof *times);
    if (times != NULL) memset(times, 0, (size_t)iters_max * sizeof *times);
    if (send == NULL || recv == NULL || times == NULL) MPI_Abort(MPI_COMM_WORLD, 2);
    if (rank == 0) {
        printf("# system ompi N %d coll %s warmup %u\n", world, coll_names[k], warmup);
        printf("# %10s %11s %6s %11s %11s %11s %8s %8s %12s\n", "size", "count", "iters", "time_us",
               "min_us", "max_us", "algbw", "busbw", "tx_bytes");
    }
    int bad = 0;
    for (uint64_t bytes = min_bytes; bytes <= max_bytes && !bad; bytes *= step) {
        const uint64_t count = k == COLL_BARRIER ? 0u : coll_count(k, bytes, n);
        const uint64_t size = coll_size(k, count, n);
        uint64_t iters = iters_max;
        if (k != COLL_BARRIER) {
            iters = iter_bytes / size;
            if (iters < iters_min) iters = iters_min;
            if (iters > iters_max) iters = iters_max;
        }
        coll_fill(k, r, n, count, send);
        /* Broadcast: one buffer, the root's is its send buffer. */
        float *out = k == COLL_BROADCAST ? send : recv;
        const uint64_t out_elems = coll_out_elems(k, r, n, count);
        const uint64_t total = warmup + iters + 1u;
        for (uint64_t it = 0; it < total && !bad; it++) {
            const int checked = it + 1u == warmup || it + 1u == total;
            if (checked && out_elems > 0 && !(k == COLL_BROADCAST && r == 0))
                memset(out, 0xff, (size_t)(out_elems * sizeof(float)));
            /* A common start (untimed); the barrier benchmark times barriers back to back. */
            if (k != COLL_BARRIER) MPI_Barrier(MPI_COMM_WORLD);
            const double t0 = MPI_Wtime();
            run_op(k, send, recv, (int)count, rank, world);
            const double dt = (MPI_Wtime() - t0) * 1e6;
            if (it >= warmup && it < warmup + iters) times[it - warmup] = dt;
            if (checked) {
                float want = 0.0f;
                const int64_t at = coll_verify(k, r, n, count, out, &want);
                if (at >= 0) {
                    fprintf(stderr,
                            "mpi_coll_bench %d: %s WRONG RESULT at %" PRIu64
                            " bytes, element %" PRId64 ": got %.9g want %.9g\n",
                            rank, coll_names[k], size, at, (double)out[at], (double)want);
                    bad = 1;
                }
            }
        }
        if (bad) break;
        /* The operation's time: the slowest rank's (untimed exchange). */
        MPI_Reduce(rank == 0 ? MPI_IN_PLACE : times, times, (int)iters, MPI_DOUBLE, MPI_MAX, 0,
                   MPI_COMM_WORLD);
        if (rank == 0) {
            const double med = coll_median(times, iters);
            const double algbw = (double)size / (med * 1e-6) / 1e9;
            const double busbw = algbw * coll_busbw_factor(k, n);
            printf("%12" PRIu64 " %11" PRIu64 " %6" PRIu64 " %11.1f %11.1f %11.1f %8.3f %8.3f "
                   "%12s\n",
                   size, size / 4u, iters, med, times[0], times[iters - 1u], algbw, busbw, "-");
        }
        if (k == COLL_BARRIER) break;
    }
    if (bad) MPI_Abort(MPI_COMM_WORLD, 1);
    if (rank == 0) printf("# done, results verified exactly\n");
    free(send);
    free(recv);
    free(times);
    MPI_Finalize();
    return 0;
}
