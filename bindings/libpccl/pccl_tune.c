/*
 * pccl_tune.c — pcclTune, pcclTuneSave, pcclTuneLoad, pcclGetAlgorithm: the group-wide
 * auto-tuner of the all-reduce's algorithm (docs/algorithms.md, docs/protocol.md §6.8.5).
 *
 * Every member times each candidate algorithm at each size class (forced, so every member
 * runs the same op; allowed to start optimistically, as the AUTO ops the table serves will:
 * pccl_allreduce_agreed), then one tuning round hands every member's timings to the master, which
 * takes the median over members per (size, algorithm), keeps the fastest, installs the row
 * for the group's world size and answers every member with the same table; later plans of
 * the group carry it, so members that join later choose alike.
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

/* Runs the tuning round: this member's report in, the group's table out. */
static pcclResult_t tune_round(const pcclComm_t *comm, const float *report)
{
    uint8_t tbl[CCOIP_ALGO_TABLE_BYTES];
    pcclWork_t *w = NULL;
    pcclCollectiveOptions_t o = PCCL_COLLECTIVE_OPTIONS_INIT;
    o.tag = TUNE_TAG | 0xFFu;
    const pcclResult_t r = pccl_coll_start(comm, CCOIP_COLL_TUNE, report, tbl, CCOIP_ALGO_TIMINGS,
                                           pcclFloat, pcclSum, 0, &o, NULL, 0, &w);
    return pccl_coll_finish(r, w, NULL);
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

/* An unquantized all-reduce of count elements of esize bytes in the group as info sees it. */
static ccoip_algo_query ar_query(uint64_t count, uint64_t esize, const pt_peer_info *info)
{
    const ccoip_algo_query q = {CCOIP_COLL_ALL_REDUCE, count, esize, info->world_size, false, false,
                                info->relay_max};
    return q;
}

/* Whether a can run the tuner's float32 all-reduce of `bytes`. */
static bool applies(ccoip_algo a, uint64_t bytes, const pt_peer_info *info)
{
    const ccoip_algo_query q = ar_query(bytes / 4u, 4u, info);
    return ccoip_algo_applies(a, &q);
}

PCCL_EXPORT pcclResult_t pcclTune(const pcclComm_t *communicator, const pcclTuneOptions_t *options)
{
    pcclTuneOptions_t o = PCCL_TUNE_OPTIONS_INIT;
    if (options != NULL) {
        if (options->struct_size != sizeof o || options->reserved != 0) {
            pt_log(CCOIP_LOG_ERROR, "pccl",
                   "tune: struct_size %u (this library's %u) or "
                   "reserved not 0: use PCCL_TUNE_OPTIONS_INIT",
                   (unsigned)options->struct_size, (unsigned)sizeof o);
            return pcclInvalidArgument;
        }
        o = *options;
    }
    const uint32_t iters = o.iterations != 0 ? o.iterations : 3u;
    const uint32_t warm = o.warmup != 0 ? o.warmup : 1u;
    const uint64_t lo = o.min_bytes != 0 ? o.min_bytes : 1024u;
    const uint64_t hi = o.max_bytes != 0 ? o.max_bytes : (uint64_t)1024 << (CCOIP_ALGO_SIZES - 1u);
    if (iters > 1000u || warm > 1000u || lo > hi) {
        pt_log(CCOIP_LOG_ERROR, "pccl", "tune: iterations / warmup above 1000 or min above max");
        return pcclInvalidArgument;
    }
    pt_peer_info info;
    pcclResult_t r = tune_world(communicator, &info);
    if (r != pcclSuccess) return r;
    const uint32_t k_lo = ccoip_algo_size_class(lo), k_hi = ccoip_algo_size_class(hi);
    const uint64_t most = (uint64_t)1024 << k_hi;
    float *report = calloc(CCOIP_ALGO_TIMINGS, sizeof *report);
    const size_t n_max = (size_t)iters * TUNE_SCALE_MAX;
    double *t = calloc(n_max * CCOIP_ALGO_COUNT, sizeof *t);
    uint8_t *send = calloc(1, (size_t)most), *recv = malloc((size_t)most);
    if (report == NULL || t == NULL || send == NULL || recv == NULL) {
        free(report);
        free(t);
        free(send);
        free(recv);
        return pcclInternalError;
    }
    const uint64_t t0 = pt_now_ns();
    for (uint32_t k = k_lo; k <= k_hi && r == pcclSuccess; k++) {
        const uint64_t bytes = (uint64_t)1024 << k;
        /* Small sizes are cheap and noisy: up to 8x the runs below 1 MiB. The candidates take
         * turns run by run, so a burst of load hits them all alike. */
        const uint64_t scale = bytes >= TUNE_SCALE_BYTES ? 1u : TUNE_SCALE_BYTES / bytes;
        const uint32_t n = iters * (uint32_t)(scale < TUNE_SCALE_MAX ? scale : TUNE_SCALE_MAX);
        pcclCollectiveOptions_t co[CCOIP_ALGO_COUNT];
        pcclReduceDescriptor_t d[CCOIP_ALGO_COUNT];
        bool on[CCOIP_ALGO_COUNT];
        for (uint32_t c = 0; c < CCOIP_ALGO_COUNT; c++) {
            const pcclCollectiveOptions_t init = PCCL_COLLECTIVE_OPTIONS_INIT;
            co[c] = init;
            co[c].algorithm = c + 1u;
            co[c].tag = TUNE_TAG | (uint64_t)(k * CCOIP_ALGO_COUNT + c);
            const pcclReduceDescriptor_t dd = {(size_t)(bytes / 4u),
                                               pcclSum,
                                               co[c].tag,
                                               {pcclFloat, pcclDistributionNone},
                                               {pcclFloat, pcclQuantNone}};
            d[c] = dd;
            on[c] = applies((ccoip_algo)(c + 1u), bytes, &info);
        }
        for (uint32_t i = 0; i < warm + n && r == pcclSuccess; i++) {
            for (uint32_t c = 0; c < CCOIP_ALGO_COUNT && r == pcclSuccess; c++) {
                if (!on[c]) continue;
                const uint64_t s = pt_now_ns();
                r = pccl_allreduce_agreed(send, recv, &d[c], &co[c], communicator);
                if (i >= warm) t[(size_t)c * n_max + (i - warm)] = (double)(pt_now_ns() - s) / 1e9;
            }
        }
        for (uint32_t c = 0; c < CCOIP_ALGO_COUNT && r == pcclSuccess; c++) {
            if (!on[c]) continue;
            const double med = ccoip_algo_median(t + (size_t)c * n_max, n);
            report[k * CCOIP_ALGO_COUNT + c] = med > 1e-9 ? (float)med : 1e-9f;
        }
    }
    if (r == pcclSuccess) r = tune_round(communicator, report);
    if (r == pcclSuccess) {
        pt_log(CCOIP_LOG_INFO, "pccl", "tune: %u members, sizes %llu .. %llu bytes, %.1f s",
               (unsigned)info.world_size, (unsigned long long)(1024ull << k_lo),
               (unsigned long long)most, (double)(pt_now_ns() - t0) / 1e9);
    } else {
        pt_log(CCOIP_LOG_WARN, "pccl", "tune: failed (%d); the group keeps its table", (int)r);
    }
    free(report);
    free(t);
    free(send);
    free(recv);
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
    char buf[4096];
    const size_t n = fread(buf, 1, sizeof buf, f);
    const bool whole = feof(f) != 0;
    fclose(f);
    ccoip_algo_table t;
    if (!whole || ccoip_algo_table_parse(buf, n, &t) != pcclSuccess) {
        pt_log(CCOIP_LOG_ERROR, "pccl", "tune: %s is not an algorithm table (docs/algorithms.md)",
               path);
        return pcclInvalidArgument;
    }
    /* The row of this world as a report the master's combination turns back into it: the
     * chosen algorithm fastest, the others that apply slower, none for an AUTO entry. */
    float report[CCOIP_ALGO_TIMINGS];
    memset(report, 0, sizeof report);
    for (uint32_t k = 0; k < CCOIP_ALGO_SIZES; k++) {
        const ccoip_algo a = (ccoip_algo)t.algo[info.world_size - 2u][k];
        const uint64_t bytes = (uint64_t)1024 << k;
        if (a == CCOIP_ALGO_AUTO || !applies(a, bytes, &info)) continue;
        for (uint32_t c = 0; c < CCOIP_ALGO_COUNT; c++) {
            if (applies((ccoip_algo)(c + 1u), bytes, &info))
                report[k * CCOIP_ALGO_COUNT + c] = c + 1u == (uint32_t)a ? 1.0f : 2.0f;
        }
    }
    return tune_round(communicator, report);
}

PCCL_EXPORT pcclResult_t pcclGetAlgorithm(const pcclComm_t *communicator, size_t count,
                                          pcclDataType_t dtype, pcclAlgorithm_t *algorithm_out)
{
    if (algorithm_out == NULL || !ccoip_dtype_valid(dtype)) return pcclInvalidArgument;
    pcclResult_t r = pccl_comm_check(communicator);
    if (r != pcclSuccess) return r;
    pt_peer_info info;
    pt_peer_info_get(communicator->d, &info);
    const ccoip_algo_query q = ar_query((uint64_t)count, ccoip_dtype_size(dtype), &info);
    *algorithm_out = (pcclAlgorithm_t)ccoip_algo_resolve(CCOIP_ALGO_AUTO, &info.algo_table, &q);
    return pcclSuccess;
}
