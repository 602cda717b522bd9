/*
 * pccl_tune.c — pcclTune, pcclTuneSave, pcclTuneLoad, pcclGetAlgorithm: the group-wide
 * auto-tuner of the algorithm per collective kind (docs/algorithms.md, docs/protocol.md §6.8.5).
 *
 * For each kind asked for, every member times each candidate algorithm at each size class
 * (forced, so every member runs the same op; an all-reduce may start optimistically, as the
 * AUTO ops the table serves will: pccl_allreduce_agreed), then one tuning round of that kind
 * hands every member's timings to the master, which takes the median over members per (size,
 * algorithm), keeps the fastest, installs the (kind, world) row and answers every member with
 * the same table; later plans of the group carry it, so members that join later choose alike.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ccoip_algo.h"
#include "ccoip_dtype.h"
#include "pccl_internal.h"
#include "pt.h"

/* Below this size a class gets more timed runs, at most TUNE_SCALE_MAX times as many. */
#define TUNE_SCALE_BYTES ((uint64_t)1 << 20)
#define TUNE_SCALE_MAX   8u

/* The tuner's ops' tag: out of the way of an application's small tags. */
#define TUNE_TAG ((uint64_t)0x70636C54554E4500ull)

/* The largest block the other kinds are tuned at by default (their buffers hold N blocks). */
#define TUNE_COLL_MAX_BYTES ((uint64_t)16 << 20)

/* The text of a table file: at most this many bytes (a whole table is about 22 KB). */
#define TUNE_FILE_MAX 65536u

/* Runs the tuning round of kind: this member's report in, the group's table out. */
static pcclResult_t tune_round(const pcclComm_t *comm, const float *report, uint32_t kind)
{
    uint8_t *tbl = malloc(CCOIP_ALGO_TABLE_BYTES);
    if (tbl == NULL) return pcclInternalError;
    pcclWork_t *w = NULL;
    pcclCollectiveOptions_t o = PCCL_COLLECTIVE_OPTIONS_INIT;
    o.tag = TUNE_TAG | 0xFFu;
    /* (the round's root names the kind whose row it tunes) */
    const pcclResult_t r = pccl_coll_start(comm, CCOIP_COLL_TUNE, report, tbl, CCOIP_ALGO_TIMINGS,
                                           pcclFloat, pcclSum, (int)kind, &o, NULL, 0, &w);
    const pcclResult_t f = pccl_coll_finish(r, w, NULL);
    free(tbl);
    return f;
}

/* The group's world and relay limit now, or an error when the tuner cannot run. */
static pcclResult_t tune_world(const pcclComm_t *comm, pt_peer_info *info)
{
    pcclResult_t r = pccl_comm_check(comm);
    if (r != pcclSuccess) return r;
    pt_peer_info_get(comm->d, info);
    if (info->world_size < 2u) return pcclTooFewPeers;
    if (info->rank < 0) return pcclUpdateTopologyFailed;
    if (info->world_size > CCOIP_ALGO_WORLD_MAX) {
        pt_log(CCOIP_LOG_ERROR, "pccl", "tune: the table covers groups of 2 .. %u members, not %u",
               (unsigned)CCOIP_ALGO_WORLD_MAX, (unsigned)info->world_size);
        return pcclInvalidUsage;
    }
    if (info->relay_max == 0) {
        pt_log(CCOIP_LOG_ERROR, "pccl",
               "tune: the master's relay is off (relay_max_bytes 0): it cannot combine a table");
        return pcclInvalidUsage;
    }
    return pcclSuccess;
}

/* An unquantized op of kind over count elements (per block) of esize bytes in the group as
 * info sees it. */
static ccoip_algo_query kind_query(uint32_t kind, uint64_t count, uint64_t esize,
                                   const pt_peer_info *info)
{
    const ccoip_algo_query q = {(ccoip_coll_kind)kind, count, esize, info->world_size, false, false,
                                info->relay_max};
    return q;
}

/* The tuner's op of kind at size class k: its count of float32 elements (the barrier: 0). */
static uint64_t tune_count(uint32_t kind, uint32_t k)
{
    return kind == CCOIP_COLL_BARRIER ? 0u : ((uint64_t)1024 << k) / 4u;
}

/* Whether a can run the tuner's float32 op of kind at size class k. */
static bool applies(ccoip_algo a, uint32_t kind, uint32_t k, const pt_peer_info *info)
{
    const ccoip_algo_query q = kind_query(kind, tune_count(kind, k), 4u, info);
    return ccoip_algo_applies(a, &q);
}

/* One timed op of the tuner: kind at count elements, algorithm forced by co. */
static pcclResult_t tune_op(const pcclComm_t *comm, uint32_t kind, const void *send, void *recv,
                            uint64_t count, const pcclCollectiveOptions_t *co)
{
    if (kind == CCOIP_COLL_ALL_REDUCE) {
        const pcclReduceDescriptor_t d = {(size_t)count,
                                          pcclSum,
                                          co->tag,
                                          {pcclFloat, pcclDistributionNone},
                                          {pcclFloat, pcclQuantNone}};
        return pccl_allreduce_agreed(send, recv, &d, co, comm);
    }
    pcclWork_t *w = NULL;
    const pcclResult_t r = pccl_coll_start(comm, (ccoip_coll_kind)kind, send, recv, (size_t)count,
                                           pcclFloat, pcclSum, 0, co, NULL, 0, &w);
    return pccl_coll_finish(r, w, NULL);
}

/* Times every candidate of kind over size classes k_lo .. k_hi into report (median seconds per
 * (class, algorithm); 0: not run). t: scratch of n_max per candidate. */
static pcclResult_t tune_kind(const pcclComm_t *comm, uint32_t kind, uint32_t k_lo, uint32_t k_hi,
                              uint32_t iters, uint32_t warm, const pt_peer_info *info,
                              float *report, double *t, size_t n_max)
{
    uint64_t sl = 0, rl = 0;
    const uint32_t rank = info->rank > 0 ? (uint32_t)info->rank : 0u;
    if (ccoip_coll_sizes((ccoip_coll_kind)kind, tune_count(kind, k_hi), 4u, info->world_size, rank,
                         0, &sl, &rl) != pcclSuccess)
        return pcclInternalError;
    uint8_t *send = calloc(1, (size_t)(sl > 0 ? sl : 1u)),
            *recv = malloc((size_t)(rl > 0 ? rl : 1u));
    if (send == NULL || recv == NULL) {
        free(send);
        free(recv);
        return pcclInternalError;
    }
    memset(report, 0, CCOIP_ALGO_TIMINGS * sizeof *report);
    pcclResult_t r = pcclSuccess;
    for (uint32_t k = k_lo; k <= k_hi && r == pcclSuccess; k++) {
        const uint64_t bytes = (uint64_t)1024 << k;
        /* Small sizes are cheap and noisy: up to 8x the runs below 1 MiB. The candidates take
         * turns run by run, so a burst of load hits them all alike. */
        const uint64_t scale = bytes >= TUNE_SCALE_BYTES ? 1u : TUNE_SCALE_BYTES / bytes;
        const uint32_t n = iters * (uint32_t)(scale < TUNE_SCALE_MAX ? scale : TUNE_SCALE_MAX);
        pcclCollectiveOptions_t co[CCOIP_ALGO_COUNT];
        bool on[CCOIP_ALGO_COUNT];
        for (uint32_t c = 0; c < CCOIP_ALGO_COUNT; c++) {
            const pcclCollectiveOptions_t init = PCCL_COLLECTIVE_OPTIONS_INIT;
            co[c] = init;
            co[c].algorithm = c + 1u;
            co[c].tag = TUNE_TAG | (uint64_t)(k * CCOIP_ALGO_COUNT + c);
            on[c] = applies((ccoip_algo)(c + 1u), kind, k, info);
        }
        for (uint32_t i = 0; i < warm + n && r == pcclSuccess; i++) {
            for (uint32_t c = 0; c < CCOIP_ALGO_COUNT && r == pcclSuccess; c++) {
                if (!on[c]) continue;
                const uint64_t s = pt_now_ns();
                r = tune_op(comm, kind, send, recv, tune_count(kind, k), &co[c]);
                if (i >= warm) t[(size_t)c * n_max + (i - warm)] = (double)(pt_now_ns() - s) / 1e9;
            }
        }
        for (uint32_t c = 0; c < CCOIP_ALGO_COUNT && r == pcclSuccess; c++) {
            if (!on[c]) continue;
            const double med = ccoip_algo_median(t + (size_t)c * n_max, n);
            report[k * CCOIP_ALGO_COUNT + c] = med > 1e-9 ? (float)med : 1e-9f;
        }
    }
    free(send);
    free(recv);
    return r;
}

PCCL_EXPORT pcclResult_t pcclTune(const pcclComm_t *communicator, const pcclTuneOptions_t *options)
{
    pcclTuneOptions_t o = PCCL_TUNE_OPTIONS_INIT;
    if (options != NULL) {
        if (options->struct_size != sizeof o || (options->kinds & ~PCCL_TUNE_ALL_KINDS) != 0) {
            pt_log(CCOIP_LOG_ERROR, "pccl",
                   "tune: struct_size %u (this library's %u) or "
                   "kinds 0x%x beyond PCCL_TUNE_ALL_KINDS: use PCCL_TUNE_OPTIONS_INIT",
                   (unsigned)options->struct_size, (unsigned)sizeof o, (unsigned)options->kinds);
            return pcclInvalidArgument;
        }
        o = *options;
    }
    const uint32_t kinds = o.kinds != 0 ? o.kinds : PCCL_TUNE_ALL_REDUCE;
    const uint32_t iters = o.iterations != 0 ? o.iterations : 3u;
    const uint32_t warm = o.warmup != 0 ? o.warmup : 1u;
    const uint64_t lo = o.min_bytes != 0 ? o.min_bytes : 1024u;
    if (iters > 1000u || warm > 1000u || (o.max_bytes != 0 && lo > o.max_bytes)) {
        pt_log(CCOIP_LOG_ERROR, "pccl", "tune: iterations / warmup above 1000 or min above max");
        return pcclInvalidArgument;
    }
    pt_peer_info info;
    pcclResult_t r = tune_world(communicator, &info);
    if (r != pcclSuccess) return r;
    float *report = calloc(CCOIP_ALGO_TIMINGS, sizeof *report);
    const size_t n_max = (size_t)iters * TUNE_SCALE_MAX;
    double *t = calloc(n_max * CCOIP_ALGO_COUNT, sizeof *t);
    if (report == NULL || t == NULL) {
        free(report);
        free(t);
        return pcclInternalError;
    }
    const uint64_t t0 = pt_now_ns();
    for (uint32_t kind = 0; kind < CCOIP_ALGO_KINDS && r == pcclSuccess; kind++) {
        if ((kinds & (1u << kind)) == 0) continue;
        /* The range per block; by default 256 MiB for the all-reduce, 16 MiB for the others
         * (their buffers hold N blocks); the barrier has one class (no data). */
        const uint64_t dflt = kind == CCOIP_COLL_ALL_REDUCE
                                  ? (uint64_t)1024 << (CCOIP_ALGO_SIZES - 1u)
                                  : TUNE_COLL_MAX_BYTES;
        const uint64_t hi = o.max_bytes != 0 ? o.max_bytes : dflt;
        const uint32_t k_lo = kind == CCOIP_COLL_BARRIER ? 0u : ccoip_algo_size_class(lo);
        const uint32_t k_hi =
            kind == CCOIP_COLL_BARRIER ? 0u : ccoip_algo_size_class(hi > lo ? hi : lo);
        r = tune_kind(communicator, kind, k_lo, k_hi, iters, warm, &info, report, t, n_max);
        if (r == pcclSuccess) r = tune_round(communicator, report, kind);
        if (r == pcclSuccess) {
            pt_log(CCOIP_LOG_INFO, "pccl", "tune: %s, %u members, sizes %llu .. %llu bytes",
                   ccoip_algo_kind_name(kind), (unsigned)info.world_size,
                   (unsigned long long)(1024ull << k_lo), (unsigned long long)(1024ull << k_hi));
        }
    }
    if (r == pcclSuccess) {
        pt_log(CCOIP_LOG_INFO, "pccl", "tune: done in %.1f s", (double)(pt_now_ns() - t0) / 1e9);
    } else {
        pt_log(CCOIP_LOG_WARN, "pccl", "tune: failed (%d); the group keeps its table", (int)r);
    }
    free(report);
    free(t);
    return r;
}

PCCL_EXPORT pcclResult_t pcclTuneSave(const pcclComm_t *communicator, const char *path)
{
    if (path == NULL) return pcclInvalidArgument;
    pcclResult_t r = pccl_comm_check(communicator);
    if (r != pcclSuccess) return r;
    pt_peer_info info;
    pt_peer_info_get(communicator->d, &info);
    const size_t n = ccoip_algo_table_format(&info.algo_table, NULL, 0);
    char *text = malloc(n + 1u);
    if (text == NULL) return pcclInternalError;
    ccoip_algo_table_format(&info.algo_table, text, n + 1u);
    FILE *f = fopen(path, "w");
    bool ok = f != NULL && fwrite(text, 1, n, f) == n;
    if (f != NULL && fclose(f) != 0) ok = false;
    free(text);
    if (!ok) {
        pt_log(CCOIP_LOG_ERROR, "pccl", "tune: cannot write %s: %s", path, strerror(errno));
        return pcclInvalidArgument;
    }
    return pcclSuccess;
}

PCCL_EXPORT pcclResult_t pcclTuneLoad(const pcclComm_t *communicator, const char *path)
{
    if (path == NULL) return pcclInvalidArgument;
    pt_peer_info info;
    pcclResult_t r = tune_world(communicator, &info);
    if (r != pcclSuccess) return r;
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        pt_log(CCOIP_LOG_ERROR, "pccl", "tune: cannot read %s: %s", path, strerror(errno));
        return pcclInvalidArgument;
    }
    char *buf = malloc(TUNE_FILE_MAX);
    ccoip_algo_table *t = malloc(sizeof *t);
    if (buf == NULL || t == NULL) {
        fclose(f);
        free(buf);
        free(t);
        return pcclInternalError;
    }
    const size_t n = fread(buf, 1, TUNE_FILE_MAX, f);
    const bool whole = feof(f) != 0;
    fclose(f);
    const pcclResult_t pr = whole ? ccoip_algo_table_parse(buf, n, t) : pcclInvalidArgument;
    free(buf);
    if (pr != pcclSuccess) {
        pt_log(CCOIP_LOG_ERROR, "pccl", "tune: %s is not an algorithm table (docs/algorithms.md)",
               path);
        free(t);
        return pcclInvalidArgument;
    }
    /* Every kind's row of this world as a report the master's combination turns back into it:
     * the chosen algorithm fastest, the others that apply slower, none for an AUTO entry (a
     * kind the file has no row for: its row is cleared). One round per kind, every member
     * alike whatever its file holds. */
    float report[CCOIP_ALGO_TIMINGS];
    for (uint32_t kind = 0; kind < CCOIP_ALGO_KINDS && r == pcclSuccess; kind++) {
        memset(report, 0, sizeof report);
        for (uint32_t k = 0; k < CCOIP_ALGO_SIZES; k++) {
            const ccoip_algo a = (ccoip_algo)t->algo[kind][info.world_size - 2u][k];
            if (a == CCOIP_ALGO_AUTO || !applies(a, kind, k, &info)) continue;
            for (uint32_t c = 0; c < CCOIP_ALGO_COUNT; c++) {
                if (applies((ccoip_algo)(c + 1u), kind, k, &info))
                    report[k * CCOIP_ALGO_COUNT + c] = c + 1u == (uint32_t)a ? 1.0f : 2.0f;
            }
        }
        r = tune_round(communicator, report, kind);
    }
    free(t);
    return r;
}

PCCL_EXPORT pcclResult_t pcclGetAlgorithm(const pcclComm_t *communicator, size_t count,
                                          pcclDataType_t dtype, pcclAlgorithm_t *algorithm_out)
{
    if (algorithm_out == NULL || !ccoip_dtype_valid(dtype)) return pcclInvalidArgument;
    pcclResult_t r = pccl_comm_check(communicator);
    if (r != pcclSuccess) return r;
    pt_peer_info info;
    pt_peer_info_get(communicator->d, &info);
    const ccoip_algo_query q =
        kind_query(CCOIP_COLL_ALL_REDUCE, (uint64_t)count, ccoip_dtype_size(dtype), &info);
    *algorithm_out = (pcclAlgorithm_t)ccoip_algo_resolve(CCOIP_ALGO_AUTO, &info.algo_table, &q);
    return pcclSuccess;
}
