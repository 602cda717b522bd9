/*
 * mpi_allreduce_bench.c — the Open MPI reference of the all-reduce benchmark
 * (issue 7): MPI_Allreduce of float32 with MPI_SUM, measured exactly as
 * pccl_allreduce_bench measures pccl (same sizes, warm-ups, iteration counts,
 * data, exact check and output rows), so the two tables compare line by line.
 *
 *   mpirun --allow-run-as-root --oversubscribe -np N --mca btl self,tcp \
 *          --mca btl_tcp_if_include lo mpi_allreduce_bench [--min BYTES]
 *          [--max BYTES] [--step 2|4] [--warmup W] [--iters-min A]
 *          [--iters-max B] [--iter-bytes BYTES]
 *
 * Rank i sends (i + 1) * (1 + j % 251) at element j; the sum must be
 * S * (1 + j % 251), S = N(N + 1)/2, exactly (checked after the warm-ups and
 * after one more untimed operation into a poisoned buffer). Rank 0 prints
 *   size count iters time_us min_us max_us algbw busbw tx_bytes
 * with time_us the median of its per-operation wall times and tx_bytes "-"
 * (MPI does not report it). Built by scripts/bench-allreduce.sh with mpicc.
 */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *x, const void *y)
{
    const double a = *(const double *)x;
    const double b = *(const double *)y;
    return (a > b) - (a < b);
}

static int parse_bytes(const char *s, uint64_t *out)
{
    char *end = NULL;
    const unsigned long long v = strtoull(s, &end, 10);
    if (end == s) return 0;
    uint64_t mul = 1;
    if (*end == 'K' || *end == 'k') {
        mul = 1024u;
        end++;
    } else if (*end == 'M' || *end == 'm') {
        mul = 1024u * 1024u;
        end++;
    } else if (*end == 'G' || *end == 'g') {
        mul = 1024u * 1024u * 1024u;
        end++;
    }
    if (*end != '\0') return 0;
    *out = (uint64_t)v * mul;
    return 1;
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
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *a = argv[i], *v = argv[i + 1];
        uint64_t b = 0;
        if (strcmp(a, "--min") == 0 && parse_bytes(v, &b))
            min_bytes = b;
        else if (strcmp(a, "--max") == 0 && parse_bytes(v, &b))
            max_bytes = b;
        else if (strcmp(a, "--iter-bytes") == 0 && parse_bytes(v, &b))
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
            if (rank == 0) fprintf(stderr, "mpi_allreduce_bench: bad argument %s\n", a);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    if (step < 2 || min_bytes < 4u || max_bytes < min_bytes || iters_min == 0 ||
        iters_max < iters_min) {
        if (rank == 0) fprintf(stderr, "mpi_allreduce_bench: bad arguments\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    float *send = malloc((size_t)max_bytes);
    float *recv = malloc((size_t)max_bytes);
    double *times = malloc((size_t)iters_max * sizeof *times);
    if (send == NULL || recv == NULL || times == NULL) MPI_Abort(MPI_COMM_WORLD, 2);
    if (rank == 0) {
        printf("# system ompi N %d quant none warmup %u\n", world, warmup);
        printf("# %10s %11s %6s %11s %11s %11s %8s %8s %12s\n", "size", "count", "iters", "time_us",
               "min_us", "max_us", "algbw", "busbw", "tx_bytes");
    }
    const unsigned s = (unsigned)(world * (world + 1) / 2);
    int bad = 0;
    for (uint64_t bytes = min_bytes; bytes <= max_bytes && !bad; bytes *= step) {
        const uint64_t size = bytes - bytes % sizeof(float);
        const uint64_t count = size / sizeof(float);
        uint64_t iters = iter_bytes / size;
        if (iters < iters_min) iters = iters_min;
        if (iters > iters_max) iters = iters_max;
        for (uint64_t j = 0; j < count; j++)
            send[j] = (float)((unsigned)(rank + 1) * (1u + (unsigned)(j % 251u)));
        const uint64_t total = warmup + iters + 1u;
        for (uint64_t k = 0; k < total && !bad; k++) {
            const int checked = k + 1u == warmup || k + 1u == total;
            if (checked) memset(recv, 0xff, (size_t)size);
            const double t0 = MPI_Wtime();
            MPI_Allreduce(send, recv, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
            const double dt = (MPI_Wtime() - t0) * 1e6;
            if (k >= warmup && k < warmup + iters) times[k - warmup] = dt;
            if (checked) {
                for (uint64_t j = 0; j < count; j++) {
                    const float want = (float)(s * (1u + (unsigned)(j % 251u)));
                    if (recv[j] != want) {
                        fprintf(stderr,
                                "mpi_allreduce_bench %d: WRONG RESULT at %" PRIu64
                                " bytes, element %" PRIu64 ": got %.9g want %.9g\n",
                                rank, size, j, (double)recv[j], (double)want);
                        bad = 1;
                        break;
                    }
                }
            }
        }
        if (!bad && rank == 0) {
            qsort(times, (size_t)iters, sizeof *times, cmp_double);
            const double med =
                iters % 2u ? times[iters / 2u] : 0.5 * (times[iters / 2u - 1u] + times[iters / 2u]);
            const double algbw = (double)size / (med * 1e-6) / 1e9;
            const double busbw = algbw * 2.0 * (double)(world - 1) / (double)world;
            printf("%12" PRIu64 " %11" PRIu64 " %6" PRIu64 " %11.1f %11.1f %11.1f %8.3f %8.3f "
                   "%12s\n",
                   size, count, iters, med, times[0], times[iters - 1u], algbw, busbw, "-");
        }
    }
    if (bad) MPI_Abort(MPI_COMM_WORLD, 1);
    if (rank == 0) printf("# done, results verified exactly\n");
    free(send);
    free(recv);
    free(times);
    MPI_Finalize();
    return 0;
}
