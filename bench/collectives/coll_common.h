/*
 * coll_common.h — what the collective benchmarks (pccl_coll_bench.c,
 * mpi_coll_bench.c; gloo_coll_bench.py mirrors it in Python) share: the
 * collective names, the nccl-tests size and busbw conventions, the data every
 * rank contributes and the exact expected results. Header-only (static
 * inline), no dependency on pccl or MPI. docs/benchmarks.md, "Collectives
 * beyond all-reduce".
 *
 * Sizes (the `size` column), as nccl-tests: the bytes of the largest buffer of
 * the operation on one rank. For broadcast and reduce that is the tensor
 * (count elements), also for sendrecv (the tensor each rank sends, and
 * receives); for all-gather and gather the receive buffer (N blocks of
 * count elements), for reduce-scatter, scatter and all-to-all the send buffer
 * (N blocks). So a swept size S gives count = S / 4 (broadcast, reduce) or
 * S / (4N) per block (the others), rounded down: at N = 3 a 4096-byte sweep
 * point is a 4092-byte row. sendrecv: count = S / 4.
 *
 * sendrecv is a ring shift of point-to-point transfers: every rank sends its
 * tensor to rank + 1 and receives rank - 1's, both posted before either is
 * waited for (at N = 2 the two ranks swap tensors); the operation ends when
 * both halves have. Each rank's link carries size bytes each way.
 *
 * busbw = algbw * factor, algbw = size / time (GB/s, 1e9):
 *   broadcast, reduce, sendrecv:                    1
 *   all-gather, reduce-scatter, all-to-all,
 *   gather, scatter:                                (N - 1) / N
 * (nccl-tests' factors; for gather and scatter the root's link carries
 * (N - 1)/N of size, the blocks of the other ranks. sendrecv as nccl-tests'
 * sendrecv_perf: busbw = algbw = size / time, the bytes one rank sends, not
 * the sum over ranks.) Barrier moves no data:
 * its row has size 0, count 0 and algbw = busbw = 0; only its time counts.
 *
 * Data (float32, small integers, so every value and every sum is exact):
 *   data-movement collectives (broadcast, all-gather, all-to-all, gather,
 *   scatter, sendrecv: one block, b = 0): the element e of the block rank src
 *   destines to block b is
 *       val(src, b, e) = src * 65536 + b * 256 + 1 + e % 251     (< 2^24 for N <= 255)
 *   so a wrong source, a wrong block and a shifted element all show;
 *   reductions (reduce, reduce-scatter; SUM): rank i contributes
 *       (i + 1) * pat(b, e),  pat(b, e) = 1 + (e + 7 * b) % 251
 *   at element e of block b, so the sum is N(N + 1)/2 * pat(b, e) (< 2^24 for N <= 255).
 * The root of broadcast, reduce, gather and scatter is rank 0.
 *
 * Timing. Unlike the all-reduce benchmark (where no peer finishes before all
 * contributed, so peer 0's clock suffices), a rooted or one-sided operation
 * can return on one rank long before the others are done (an eager MPI_Bcast
 * at the root, an MPI_Gather at a root whose inputs already arrived), and
 * back-to-back operations then pipeline. So every operation starts after an
 * untimed barrier of the system under test, each rank times its own call,
 * and the operation's time is the largest of the ranks' times (exchanged
 * after the size's last operation, untimed). time_us is the median of those,
 * min_us/max_us their range. The barrier benchmark times barriers back to
 * back (no extra barrier), the largest rank's time each.
 */
#ifndef PCCL_BENCH_COLL_COMMON_H
#define PCCL_BENCH_COLL_COMMON_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define COLL_MAX_WORLD 255u

typedef enum coll_kind {
    COLL_BROADCAST,
    COLL_REDUCE,
    COLL_ALLGATHER,
    COLL_REDUCESCATTER,
    COLL_ALLTOALL,
    COLL_GATHER,
    COLL_SCATTER,
    COLL_SENDRECV,
    COLL_BARRIER,
    COLL_COUNT
} coll_kind;

static const char *const coll_names[COLL_COUNT] = {
    "broadcast", "reduce",  "allgather", "reducescatter", "alltoall",
    "gather",    "scatter", "sendrecv",  "barrier",
};

static inline int coll_parse(const char *s)
{
    for (int k = 0; k < (int)COLL_COUNT; k++) {
        if (strcmp(s, coll_names[k]) == 0) return k;
    }
    return -1;
}

/* Whether `size` covers N blocks (one per rank) rather than one tensor. */
static inline bool coll_blocked(coll_kind k)
{
    return k == COLL_ALLGATHER || k == COLL_REDUCESCATTER || k == COLL_ALLTOALL ||
           k == COLL_GATHER || k == COLL_SCATTER;
}

/* Elements per block (blocked kinds) or of the tensor, for a swept size. */
static inline uint64_t coll_count(coll_kind k, uint64_t bytes, uint32_t world)
{
    return coll_blocked(k) ? bytes / (4u * (uint64_t)world) : bytes / 4u;
}

/* The size column for that count (bytes of the largest buffer). */
static inline uint64_t coll_size(coll_kind k, uint64_t count, uint32_t world)
{
    return coll_blocked(k) ? count * 4u * world : count * 4u;
}

static inline double coll_busbw_factor(coll_kind k, uint32_t world)
{
    if (k == COLL_BROADCAST || k == COLL_REDUCE || k == COLL_SENDRECV) return 1.0;
    if (k == COLL_BARRIER) return 0.0;
    return (double)(world - 1u) / (double)world;
}

/* The ring shift of the sendrecv kind: rank r sends to rank + 1 and receives from rank - 1. */
static inline uint32_t coll_ring_to(uint32_t rank, uint32_t world)
{
    return (rank + 1u) % world;
}

static inline uint32_t coll_ring_from(uint32_t rank, uint32_t world)
{
    return (rank + world - 1u) % world;
}

static inline float coll_val(uint32_t src, uint32_t blk, uint64_t e)
{
    return (float)(src * 65536u + blk * 256u + 1u + (uint32_t)(e % 251u));
}

static inline uint32_t coll_pat(uint32_t blk, uint64_t e)
{
    return 1u + (uint32_t)((e + 7u * (uint64_t)blk) % 251u);
}

/*
 * Fills what rank `rank` sends (count per block or tensor). For broadcast
 * the root's buffer is `send` (the benchmark uses one buffer there).
 */
static inline void coll_fill(coll_kind k, uint32_t rank, uint32_t world, uint64_t count,
                             float *send)
{
    switch (k) {
    case COLL_BROADCAST:
        for (uint64_t e = 0; e < count; e++)
            send[e] = coll_val(0u, 0u, e);
        break;
    case COLL_REDUCE:
        for (uint64_t e = 0; e < count; e++)
            send[e] = (float)((rank + 1u) * coll_pat(0u, e));
        break;
    case COLL_REDUCESCATTER:
        for (uint32_t b = 0; b < world; b++)
            for (uint64_t e = 0; e < count; e++)
                send[(uint64_t)b * count + e] = (float)((rank + 1u) * coll_pat(b, e));
        break;
    case COLL_ALLGATHER:
    case COLL_GATHER:
    case COLL_SENDRECV:
        for (uint64_t e = 0; e < count; e++)
            send[e] = coll_val(rank, 0u, e);
        break;
    case COLL_ALLTOALL:
    case COLL_SCATTER:
        for (uint32_t b = 0; b < world; b++)
            for (uint64_t e = 0; e < count; e++)
                send[(uint64_t)b * count + e] = coll_val(k == COLL_SCATTER ? 0u : rank, b, e);
        break;
    default:
        break;
    }
}

/* Elements of the output that rank `rank` checks (0: it has no output). */
static inline uint64_t coll_out_elems(coll_kind k, uint32_t rank, uint32_t world, uint64_t count)
{
    switch (k) {
    case COLL_BROADCAST:
    case COLL_SENDRECV:
        return count;
    case COLL_REDUCE:
        return rank == 0u ? count : 0u;
    case COLL_ALLGATHER:
    case COLL_ALLTOALL:
        return count * world;
    case COLL_GATHER:
        return rank == 0u ? count * world : 0u;
    case COLL_REDUCESCATTER:
    case COLL_SCATTER:
        return count;
    default:
        return 0u;
    }
}

/* The exact value of output element i (0 <= i < coll_out_elems) on rank `rank`. */
static inline float coll_want(coll_kind k, uint32_t rank, uint32_t world, uint64_t count,
                              uint64_t i)
{
    const uint32_t s = world * (world + 1u) / 2u;
    const uint32_t b = (uint32_t)(i / (count ? count : 1u));
    const uint64_t e = i % (count ? count : 1u);
    switch (k) {
    case COLL_BROADCAST:
        return coll_val(0u, 0u, i);
    case COLL_REDUCE:
        return (float)(s * coll_pat(0u, i));
    case COLL_REDUCESCATTER:
        return (float)(s * coll_pat(rank, i));
    case COLL_ALLGATHER:
    case COLL_GATHER:
        return coll_val(b, 0u, e); /* block b came from rank b */
    case COLL_ALLTOALL:
        return coll_val(b, rank, e); /* block b came from rank b, its block `rank` */
    case COLL_SCATTER:
        return coll_val(0u, rank, i);
    case COLL_SENDRECV:
        return coll_val(coll_ring_from(rank, world), 0u, i); /* rank - 1's tensor */
    default:
        return 0.0f;
    }
}

/* Index of the first wrong output element, or -1 when all are exact. */
static inline int64_t coll_verify(coll_kind k, uint32_t rank, uint32_t world, uint64_t count,
                                  const float *out, float *want_out)
{
    const uint64_t n = coll_out_elems(k, rank, world, count);
    for (uint64_t i = 0; i < n; i++) {
        const float want = coll_want(k, rank, world, count, i);
        if (out[i] != want) {
            *want_out = want;
            return (int64_t)i;
        }
    }
    return -1;
}

static inline int coll_cmp_double(const void *x, const void *y)
{
    const double a = *(const double *)x;
    const double b = *(const double *)y;
    return (a > b) - (a < b);
}

/* Sorts times[0..n) and returns the median. */
static inline double coll_median(double *times, uint64_t n)
{
    qsort(times, (size_t)n, sizeof *times, coll_cmp_double);
    return n % 2u ? times[n / 2u] : 0.5 * (times[n / 2u - 1u] + times[n / 2u]);
}

/* Parses a byte count with an optional K, M or G suffix (powers of 1024). */
static inline bool coll_parse_bytes(const char *s, uint64_t *out)
{
    char *end = NULL;
    const unsigned long long v = strtoull(s, &end, 10);
    if (end == s) return false;
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
    if (*end != '\0') return false;
    *out = (uint64_t)v * mul;
    return true;
}

#endif
