/*
 * itest_peer.c — one peer process of the integration tests
 * (tests/integration/run.sh). Connects to the master, waits until the group
 * has --world peers, then runs all-reduces whose exact integer results it
 * checks: peer i contributes (i + 1) * (k + 1) + j to element j of step k, so
 * the sum over a set S of peers is (k + 1) * sum(i + 1) + |S| * j. Peers are
 * indexed 0 .. world-1 by --index; after a loss, the survivors are the peers
 * with index < world size (the tests always kill the highest index).
 *
 *   itest_peer --url URL --index I --world N [--steps K] [--count C]
 *              [--mode normal|survivor|master-death|...] [--evict-ms E] [--pool P]
 *
 * --pool P: p2p_connection_pool_size (0 = the runtime default, 2).
 *
 * normal:       K exact all-reduces (blocking, async, in place), exit 0.
 * survivor:     all-reduces until one fails with pcclRankConnectionLost, or
 *               succeeds on a smaller ring (the loss fell between two ops),
 *               in at most E + 3000 ms; then K more on the shrunken ring.
 * victim:       K all-reduces, then SIGKILLs itself in the middle of the next.
 * master-death: all-reduces until one fails with pcclMasterConnectionFailed
 *               within E + 3000 ms; every later call fails the same way.
 * mismatch:     K steps of small exact all-reduces; at every third step the peer
 *               with index 0 gives a count one smaller (in place, so the
 *               optimistic ring of docs/protocol.md §6.8.1 has already run on
 *               the others): every peer must get pcclInvalidUsage and find its
 *               in-place buffer bit-exactly as before; the other steps exact.
 * algo:         K steps of exact in-place all-reduces, each with a forced algorithm
 *               (pcclCollectiveOptions_t.algorithm: ring, ring_striped, direct,
 *               halving_doubling in turn, and
 *               relay when C fits 32 KiB); at every fourth step the peer with index 0 forces
 *               another one than the others: every peer must get pcclInvalidUsage with its
 *               buffer bit-exactly as before. pcclGetAlgorithm must name an algorithm.
 * concurrent:   K steps of two truly concurrent async all-reduces, tags 2k+1
 *               and 2k+2: even indices issue 2k+1 then 2k+2, odd indices
 *               2k+2 then 2k+1 (opposite orders); both must complete with
 *               exact sums, each awaited within 20 s (no deadlock). Also
 *               checks that a pool of 9 is pcclInvalidArgument.
 * striped:      K steps of a MIN out of place then a MAX in place (run with a pool of 2 and
 *               a count of 10^6: each step's chunk is striped over both connections,
 *               docs/protocol.md §8.2): min = (k + 1) + j mod 1000 (peer 0's),
 *               max = world (k + 1) + j mod 1000. A reduction applied twice, or to a
 *               stripe never received, breaks MIN/MAX where a SUM over zeros would not.
 * optimize:     pcclOptimizeTopology (retried on pcclTopologyOptimizationFailed),
 *               then as normal.
 * sync:         shared state of two tensors ("a" int32, "b" float, C elements
 *               each); the peer with index world-1 holds a different "b". Syncs
 *               revision 0 (the divergent peer must receive exactly "b", the
 *               others nothing), then revision 1 (nobody receives); checks the
 *               content after each; then admits one late joiner (world + 1)
 *               and syncs revision 2 with it. Prints SYNCED0/SYNCED1/SYNCED2.
 * sync-late:    the late joiner: syncs with revision 0 and zeroed tensors,
 *               must receive both tensors and revision 2.
 * Prints "READY" once admitted with the full world, "REDUCING" before the
 * all-reduce loop. Exit codes: 0 ok, 1 wrong result, 2 setup, 3 bound missed.
 */
#define _POSIX_C_SOURCE 200809L
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "itest_common.h"
#include "pccl.h"

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static int check(const int32_t *out, uint64_t count, uint32_t k, uint32_t members)
{
    const uint32_t s = members * (members + 1u) / 2u;
    for (uint64_t j = 0; j < count; j++) {
        const int32_t want = (int32_t)((k + 1u) * s + members * (uint32_t)(j % 1000u));
        if (out[j] != want) {
            fprintf(stderr, "itest_peer: step %u element %llu: got %d want %d (members %u)\n", k,
                    (unsigned long long)j, out[j], want, members);
            return 1;
        }
    }
    return 0;
}

/* MIN / MAX of fill(.., i, k) over peers 0 .. members-1: peer (mult - 1)'s values. */
static int check_extreme(const int32_t *out, uint64_t count, uint32_t k, uint32_t mult,
                         const char *what)
{
    for (uint64_t j = 0; j < count; j++) {
        const int32_t want = (int32_t)(mult * (k + 1u) + (uint32_t)(j % 1000u));
        if (out[j] != want) {
            fprintf(stderr, "itest_peer: %s step %u element %llu: got %d want %d\n", what, k,
                    (unsigned long long)j, out[j], want);
            return 1;
        }
    }
    return 0;
}

static int state_check(const int32_t *a, const float *b, uint64_t count, uint32_t index)
{
    for (uint64_t j = 0; j < count; j++) {
        if (a[j] != (int32_t)j || b[j] != (float)j * 0.5f) {
            fprintf(stderr, "itest_peer %u: shared state element %llu: a %d b %g\n", index,
                    (unsigned long long)j, a[j], (double)b[j]);
            return 1;
        }
    }
    return 0;
}

static int sync_once(pcclComm_t *comm, pcclSharedState_t *st, uint32_t index, uint64_t want_rx,
                     uint64_t want_rev, const char *label)
{
    pcclSharedStateSyncInfo_t info;
    memset(&info, 0, sizeof info);
    const uint64_t t0 = now_ms();
    const pcclResult_t r = pcclSynchronizeSharedState(comm, st, &info);
    if (r != pcclSuccess) {
        fprintf(stderr, "itest_peer %u: %s: sync %d\n", index, label, (int)r);
        return 1;
    }
    printf("%s %u rev %llu rx %llu tx %llu in %llu ms\n", label, index,
           (unsigned long long)st->revision, (unsigned long long)info.rx_bytes,
           (unsigned long long)info.tx_bytes, (unsigned long long)(now_ms() - t0));
    if (info.rx_bytes != want_rx || st->revision != want_rev) {
        fprintf(stderr, "itest_peer %u: %s: rx %llu (want %llu) revision %llu (want %llu)\n", index,
                label, (unsigned long long)info.rx_bytes, (unsigned long long)want_rx,
                (unsigned long long)st->revision, (unsigned long long)want_rev);
        return 1;
    }
    return 0;
}

static int run_sync(pcclComm_t *comm, uint32_t index, uint32_t world, uint64_t count, bool late)
{
    int32_t *a = calloc((size_t)(count > 0 ? count : 1u), sizeof *a);
    float *b = calloc((size_t)(count > 0 ? count : 1u), sizeof *b);
    if (a == NULL || b == NULL) return 2;
    pcclTensorInfo_t infos[2];
    pcclSharedState_t st;
    itest_state_ab(&st, infos, a, b, count);
    int rc = 0;
    if (late) {
        /* Zeroed tensors, revision 0: everything comes from a distributor. */
        rc = sync_once(comm, &st, index, 2u * count * 4u, 2, "SYNCED2");
        if (rc == 0) rc = state_check(a, b, count, index);
    } else {
        const bool divergent = index == world - 1u;
        itest_fill_ab(a, b, count, divergent);
        rc = sync_once(comm, &st, index, divergent ? count * 4u : 0u, 0, "SYNCED0");
        if (rc == 0) rc = state_check(a, b, count, index);
        st.revision++;
        if (rc == 0) rc = sync_once(comm, &st, index, 0, 1, "SYNCED1");
        if (rc == 0) rc = state_check(a, b, count, index);
        /* Admit the late joiner. */
        int ws = 0;
        for (int tries = 0; rc == 0; tries++) {
            if (pcclGetAttribute(comm, PCCL_ATTRIBUTE_CURRENT_WORLD_SIZE, &ws) != pcclSuccess) {
                rc = 2;
                break;
            }
            if ((uint32_t)ws > world) break;
            if (tries > 2000) {
                fprintf(stderr, "itest_peer %u: late joiner never came\n", index);
                rc = 3;
                break;
            }
            bool pending = false;
            if (pcclArePeersPending(comm, &pending) == pcclSuccess && !pending) sleep_ms(10);
            const pcclResult_t r = pcclUpdateTopology(comm);
            if (r != pcclSuccess && r != pcclUpdateTopologyFailed) rc = 2;
        }
        st.revision++;
        if (rc == 0) rc = sync_once(comm, &st, index, 0, 2, "SYNCED2");
        if (rc == 0) rc = state_check(a, b, count, index);
    }
    free(a);
    free(b);
    return rc;
}

/* The victim's deliberate racy read of a receive buffer the library is
 * writing (test code, not the library): hidden from ThreadSanitizer. */
#if defined(__clang__) || (defined(__GNUC__) && __GNUC__ >= 8)
#define ITEST_NO_TSAN __attribute__((no_sanitize("thread")))
#else
#define ITEST_NO_TSAN
#endif
ITEST_NO_TSAN static int32_t peek_racy(const int32_t *p)
{
    return *(const volatile int32_t *)p;
}

static void fill(int32_t *buf, uint64_t count, uint32_t index, uint32_t k)
{
    for (uint64_t j = 0; j < count; j++)
        buf[j] = (int32_t)((index + 1u) * (k + 1u) + (uint32_t)(j % 1000u));
}

int main(int argc, char **argv)
{
    const char *url = NULL;
    const char *mode = "normal";
    uint32_t index = 0, world = 2, steps = 5, evict_ms = 2000, pool = 0;
    uint64_t count = 1000;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--url") == 0)
            url = argv[i + 1];
        else if (strcmp(argv[i], "--index") == 0)
            index = (uint32_t)atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--world") == 0)
            world = (uint32_t)atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--steps") == 0)
            steps = (uint32_t)atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--count") == 0)
            count = (uint64_t)atoll(argv[i + 1]);
        else if (strcmp(argv[i], "--mode") == 0)
            mode = argv[i + 1];
        else if (strcmp(argv[i], "--evict-ms") == 0)
            evict_ms = (uint32_t)atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--pool") == 0)
            pool = (uint32_t)atoi(argv[i + 1]);
    }
    if (url == NULL) return 2;
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (pcclInit() != pcclSuccess) return 2;
    pcclCommCreateParams_t params;
    memset(&params, 0, sizeof params);
    pcclCommCreateOptions_t opts = PCCL_COMM_CREATE_OPTIONS_INIT;
    opts.master_url = url;
    opts.timeout_ms = 20000;
    pcclComm_t *comm = NULL;
    params.p2p_connection_pool_size = pool;
    if (pcclCreateCommunicatorEx(&params, &opts, &comm) != pcclSuccess) return 2;
    pcclResult_t r = pcclConnect(comm);
    if (r != pcclSuccess) {
        fprintf(stderr, "itest_peer %u: connect: %d\n", index, (int)r);
        pcclDestroyCommunicator(comm);
        return 2;
    }
    int ws = 0;
    const uint64_t t_admit = now_ms();
    for (int tries = 0;; tries++) {
        if (pcclGetAttribute(comm, PCCL_ATTRIBUTE_CURRENT_WORLD_SIZE, &ws) != pcclSuccess) return 2;
        if ((uint32_t)ws >= world) break;
        /* Bounded in time, not in tries: a slow (sanitized, loaded) peer may
         * take seconds to start while the others spin through votes. */
        if (now_ms() - t_admit > 15000u) {
            fprintf(stderr, "itest_peer %u: world stays %d < %u after %d tries\n", index, ws, world,
                    tries);
            pcclDestroyCommunicator(comm);
            return 2;
        }
        r = pcclUpdateTopology(comm);
        if (r != pcclSuccess && r != pcclUpdateTopologyFailed) {
            fprintf(stderr, "itest_peer %u: update topology: %d\n", index, (int)r);
            return 2;
        }
    }
    printf("READY %u world %d\n", index, ws);
    if (strcmp(mode, "sync") == 0 || strcmp(mode, "sync-late") == 0) {
        const int rc = run_sync(comm, index, world, count, strcmp(mode, "sync-late") == 0);
        if (rc != 0) return rc;
        printf("DONE %u\n", index);
        return pcclDestroyCommunicator(comm) == pcclSuccess ? 0 : 1;
    }
    if (strcmp(mode, "optimize") == 0) {
        const uint64_t t0 = now_ms();
        for (int tries = 0;; tries++) {
            r = pcclOptimizeTopology(comm);
            if (r == pcclSuccess) break;
            if (r != pcclTopologyOptimizationFailed || tries >= 20) {
                fprintf(stderr, "itest_peer %u: optimize topology: %d\n", index, (int)r);
                return 1;
            }
            sleep_ms(50);
        }
        if (pcclGetAttribute(comm, PCCL_ATTRIBUTE_CURRENT_WORLD_SIZE, &ws) != pcclSuccess ||
            (uint32_t)ws != world) {
            fprintf(stderr, "itest_peer %u: world %d after optimize\n", index, ws);
            return 1;
        }
        printf("OPTIMIZED %u in %llu ms\n", index, (unsigned long long)(now_ms() - t0));
        mode = "normal";
    }
    printf("REDUCING %u\n", index);

    int32_t *a = malloc((size_t)(count > 0 ? count : 1u) * sizeof *a);
    int32_t *b = malloc((size_t)(count > 0 ? count : 1u) * sizeof *b);
    if (a == NULL || b == NULL) return 2;
    pcclReduceDescriptor_t desc;
    memset(&desc, 0, sizeof desc);
    desc.count = count;
    desc.op = pcclSum;
    desc.src_descriptor.datatype = pcclInt32;
    desc.quantization_options.quantized_datatype = pcclInt32;

    if (strcmp(mode, "normal") == 0) {
        for (uint32_t k = 0; k < steps; k++) {
            fill(a, count, index, k);
            pcclReduceInfo_t info;
            memset(&info, 0, sizeof info);
            desc.tag = k;
            if (k % 3u == 0) {
                r = pcclAllReduce(a, b, &desc, comm, &info);
            } else if (k % 3u == 1) {
                pcclAsyncReduceOp_t h;
                r = pcclAllReduceAsync(a, b, &desc, comm, &h);
                if (r == pcclSuccess) r = pcclAwaitAsyncReduceTimeout(&h, 20000, &info);
            } else {
                r = pcclAllReduce(a, a, &desc, comm, &info); /* in place */
                memcpy(b, a, (size_t)count * sizeof *a);
            }
            if (r != pcclSuccess) {
                fprintf(stderr, "itest_peer %u: step %u: all-reduce %d\n", index, k, (int)r);
                return 1;
            }
            if (check(b, count, k, world) != 0) return 1;
            if (info.local_world_size != world) {
                fprintf(stderr, "itest_peer %u: local_world_size %u\n", index,
                        info.local_world_size);
                return 1;
            }
        }
        /* The many-ops entry point, with exact results too. */
        pcclReduceOpDescriptor_t ops[3];
        int32_t *bufs[3];
        for (uint32_t o = 0; o < 3u; o++) {
            bufs[o] = malloc((size_t)(count > 0 ? count : 1u) * sizeof *a);
            if (bufs[o] == NULL) return 2;
            fill(bufs[o], count, index, 100u + o);
            memset(&ops[o], 0, sizeof ops[o]);
            ops[o].sendbuf = bufs[o];
            ops[o].recvbuf = bufs[o];
            ops[o].descriptor = desc;
            ops[o].descriptor.tag = 1000u + o;
        }
        r = pcclAllReduceMultipleWithRetry(ops, 3, comm, NULL, 2);
        if (r != pcclSuccess) {
            fprintf(stderr, "itest_peer %u: multiple: %d\n", index, (int)r);
            return 1;
        }
        for (uint32_t o = 0; o < 3u; o++) {
            if (check(bufs[o], count, 100u + o, world) != 0) return 1;
            free(bufs[o]);
        }
        printf("DONE %u\n", index);
    } else if (strcmp(mode, "striped") == 0) {
        for (uint32_t k = 0; k < steps; k++) {
            pcclReduceInfo_t info;
            fill(a, count, index, k);
            memset(b, 0, (size_t)count * sizeof *b);
            desc.tag = 2u * k + 1u;
            desc.op = pcclMin;
            r = pcclAllReduce(a, b, &desc, comm, &info);
            if (r == pcclSuccess) {
                desc.tag = 2u * k + 2u;
                desc.op = pcclMax;
                r = pcclAllReduce(a, a, &desc, comm, &info);
            }
            if (r != pcclSuccess) {
                fprintf(stderr, "itest_peer %u: striped step %u: %d\n", index, k, (int)r);
                return 1;
            }
            if (check_extreme(b, count, k, 1u, "MIN") != 0 ||
                check_extreme(a, count, k, world, "MAX") != 0) {
                return 1;
            }
        }
        printf("DONE %u\n", index);
    } else if (strcmp(mode, "concurrent") == 0) {
        for (uint32_t k = 0; k < steps; k++) {
            /* Op o (0, 1) has tag 2k+1+o and data of "step" 2k+o. */
            const uint32_t ks[2] = {(2u * k) % 1000u, (2u * k + 1u) % 1000u};
            fill(a, count, index, ks[0]);
            fill(b, count, index, ks[1]);
            pcclReduceDescriptor_t d[2] = {desc, desc};
            d[0].tag = 2u * k + 1u;
            d[1].tag = 2u * k + 2u;
            pcclAsyncReduceOp_t h[2];
            const uint32_t first = index % 2u; /* odd indices start with the second tag */
            const uint64_t t0 = now_ms();
            for (uint32_t n = 0; n < 2u; n++) {
                const uint32_t o = n == 0 ? first : 1u - first;
                r = pcclAllReduceAsync(o == 0 ? a : b, o == 0 ? a : b, &d[o], comm, &h[o]);
                if (r != pcclSuccess) {
                    fprintf(stderr, "itest_peer %u: step %u: async tag %llu: %d\n", index, k,
                            (unsigned long long)d[o].tag, (int)r);
                    return 1;
                }
            }
            for (uint32_t o = 0; o < 2u; o++) {
                pcclReduceInfo_t info;
                memset(&info, 0, sizeof info);
                r = pcclAwaitAsyncReduceTimeout(&h[o], 20000, &info);
                if (r != pcclSuccess) {
                    fprintf(stderr, "itest_peer %u: step %u: await tag %llu: %d\n", index, k,
                            (unsigned long long)d[o].tag, (int)r);
                    return r == pcclTimeout ? 3 : 1;
                }
                if (info.local_world_size != world) {
                    fprintf(stderr, "itest_peer %u: local_world_size %u\n", index,
                            info.local_world_size);
                    return 1;
                }
            }
            if (check(a, count, ks[0], world) != 0 || check(b, count, ks[1], world) != 0) return 1;
            printf("CONCURRENT %u step %u tags %llu+%llu in %llu ms\n", index, k,
                   (unsigned long long)d[first].tag, (unsigned long long)d[1u - first].tag,
                   (unsigned long long)(now_ms() - t0));
        }
        printf("DONE %u\n", index);
    } else if (strcmp(mode, "algo") == 0) {
        int32_t *keep = malloc((size_t)(count > 0 ? count : 1u) * sizeof *keep);
        if (keep == NULL) return 2;
        pcclAlgorithm_t chosen = pcclAlgoAuto;
        if (pcclGetAlgorithm(comm, count, pcclInt32, &chosen) != pcclSuccess ||
            chosen < pcclAlgoRelay || chosen > pcclAlgoHalvingDoubling) {
            fprintf(stderr, "itest_peer %u: pcclGetAlgorithm gave %d\n", index, (int)chosen);
            return 1;
        }
        const bool relay_fits = (uint64_t)count * sizeof(int32_t) <= (32u << 10);
        uint32_t refused = 0, ran[6] = {0};
        for (uint32_t k = 0; k < steps; k++) {
            fill(a, count, index, k % 1000u);
            memcpy(keep, a, (size_t)count * sizeof *a);
            pcclReduceDescriptor_t d = desc;
            d.tag = k;
            pcclCollectiveOptions_t o = PCCL_COLLECTIVE_OPTIONS_INIT;
            /* (halving_doubling runs the ring at N = 3) */
            static const pcclAlgorithm_t cycle[5] = {pcclAlgoRing, pcclAlgoRingStriped,
                                                     pcclAlgoDirect, pcclAlgoHalvingDoubling,
                                                     pcclAlgoRelay};
            const uint32_t good = k - k / 4u; /* the steps before that were not refused */
            o.algorithm = (uint32_t)cycle[good % (relay_fits ? 5u : 4u)];
            const bool bad = k % 4u == 3u;
            if (bad && index == 0)
                o.algorithm = o.algorithm == pcclAlgoRing ? pcclAlgoRingStriped : pcclAlgoRing;
            r = pcclAllReduceEx(a, a, &d, &o, comm, NULL);
            if (bad) {
                if (r != pcclInvalidUsage || memcmp(a, keep, (size_t)count * sizeof *a) != 0) {
                    fprintf(stderr, "itest_peer %u: step %u: disagreeing algorithms gave %d%s\n",
                            index, k, (int)r, r == pcclInvalidUsage ? " and a changed buffer" : "");
                    return 1;
                }
                refused++;
                continue;
            }
            if (r != pcclSuccess) {
                fprintf(stderr, "itest_peer %u: step %u: algorithm %u: %d\n", index, k,
                        (unsigned)o.algorithm, (int)r);
                return 1;
            }
            if (check(a, count, k % 1000u, world) != 0) return 1;
            ran[o.algorithm]++;
        }
        free(keep);
        printf("DONE %u refused %u ring %u striped %u direct %u hd %u relay %u\n", index, refused,
               ran[pcclAlgoRing], ran[pcclAlgoRingStriped], ran[pcclAlgoDirect],
               ran[pcclAlgoHalvingDoubling], ran[pcclAlgoRelay]);
    } else if (strcmp(mode, "mismatch") == 0) {
        int32_t *keep = malloc((size_t)(count > 0 ? count : 1u) * sizeof *keep);
        if (keep == NULL) return 2;
        uint32_t refused = 0;
        for (uint32_t k = 0; k < steps; k++) {
            fill(a, count, index, k % 1000u);
            memcpy(keep, a, (size_t)count * sizeof *a);
            pcclReduceDescriptor_t d = desc;
            d.tag = k;
            const bool bad = k % 3u == 1u;
            if (bad && index == 0 && count > 0) d.count = count - 1u;
            r = pcclAllReduce(a, a, &d, comm, NULL);
            if (bad) {
                if (r != pcclInvalidUsage) {
                    fprintf(stderr, "itest_peer %u: step %u: mismatch gave %d\n", index, k, (int)r);
                    return 1;
                }
                if (memcmp(a, keep, (size_t)count * sizeof *a) != 0) {
                    fprintf(stderr, "itest_peer %u: step %u: buffer not restored\n", index, k);
                    return 1;
                }
                refused++;
                continue;
            }
            /* Right after a refusal the group may be re-wiring: a retryable loss is allowed. */
            for (uint32_t t = 0; r == pcclRankConnectionLost && t < 20u; t++) {
                memcpy(a, keep, (size_t)count * sizeof *a);
                r = pcclAllReduce(a, a, &d, comm, NULL);
            }
            if (r != pcclSuccess) {
                fprintf(stderr, "itest_peer %u: step %u: all-reduce %d\n", index, k, (int)r);
                return 1;
            }
            if (check(a, count, k % 1000u, world) != 0) return 1;
        }
        free(keep);
        printf("DONE %u refused %u\n", index, refused);
    } else if (strcmp(mode, "survivor") == 0) {
        uint32_t after = 0;
        bool lost = false;
        for (uint32_t k = 0; k < 100000u && after < steps; k++) {
            fill(a, count, index, k % 1000u);
            desc.tag = k;
            pcclReduceInfo_t info;
            memset(&info, 0, sizeof info);
            const uint64_t t0 = now_ms();
            r = pcclAllReduce(a, b, &desc, comm, &info);
            const uint64_t dt = now_ms() - t0;
            if (r == pcclSuccess) {
                if (check(b, count, k % 1000u, info.local_world_size) != 0) return 1;
                if (!lost && info.local_world_size < world) {
                    /* The peer died between two operations: the next one
                     * simply ran on the shrunken ring. */
                    if (dt > evict_ms + 3000u) return 3;
                    printf("SHRUNK %u after %llu ms\n", index, (unsigned long long)dt);
                    lost = true;
                }
                if (lost) after++;
                continue;
            }
            if (r != pcclRankConnectionLost && r != pcclTooFewPeers) {
                fprintf(stderr, "itest_peer %u: all-reduce %d\n", index, (int)r);
                return 1;
            }
            if (dt > evict_ms + 3000u) {
                fprintf(stderr, "itest_peer %u: loss reported after %llu ms\n", index,
                        (unsigned long long)dt);
                return 3;
            }
            if (!lost) printf("LOST %u after %llu ms\n", index, (unsigned long long)dt);
            lost = true;
            if (pcclGetAttribute(comm, PCCL_ATTRIBUTE_CURRENT_WORLD_SIZE, &ws) != pcclSuccess) {
                return 1;
            }
            if (r == pcclTooFewPeers) sleep_ms(20);
        }
        if (!lost || after < steps) return 1;
        if (pcclGetAttribute(comm, PCCL_ATTRIBUTE_CURRENT_WORLD_SIZE, &ws) != pcclSuccess) return 1;
        printf("DONE %u world %d\n", index, ws);
    } else if (strcmp(mode, "victim") == 0) {
        /* K operations, then dies by SIGKILL in the middle of the next one. */
        for (uint32_t k = 0;; k++) {
            fill(a, count, index, k % 1000u);
            desc.tag = k;
            if (k == steps) {
                /* Die only once the operation runs on every member. Since the
                 * optimistic start (docs/protocol.md §6.8.1) the victim's own ring
                 * starts before the others initiate, so it waits until the first
                 * element of some chunk holds the full sum over all members: the
                 * reduce-scatter has then carried every member's data around the
                 * ring (and about half of the 64 MiB ring is still to run). A racy
                 * read, but of plain int32 memory, in a test. */
                b[0] = a[0] ^ 0x5a5a5a5a;
                pcclAsyncReduceOp_t h;
                r = pcclAllReduceAsync(a, b, &desc, comm, &h);
                if (r != pcclSuccess) return 1;
                const uint32_t s = world * (world + 1u) / 2u;
                const uint64_t base = count / world, rem = count % world;
                const uint64_t t_wait = now_ms();
                for (bool full = false; !full && now_ms() - t_wait < 20000u;) {
                    for (uint64_t c = 0; c < world && !full; c++) {
                        const uint64_t j = c * base + (c < rem ? c : rem);
                        const int32_t want =
                            (int32_t)((k % 1000u + 1u) * s + world * (uint32_t)(j % 1000u));
                        if (j < count && peek_racy(b + j) == want) full = true;
                    }
                    if (!full) sleep_ms(1);
                }
                sleep_ms(2);
                printf("DYING %u at step %u\n", index, k);
                raise(SIGKILL);
            }
            r = pcclAllReduce(a, b, &desc, comm, NULL);
            if (r != pcclSuccess || check(b, count, k % 1000u, world) != 0) return 1;
        }
    } else if (strcmp(mode, "master-death") == 0) {
        for (uint32_t k = 0;; k++) {
            fill(a, count, index, k % 1000u);
            desc.tag = k;
            const uint64_t t0 = now_ms();
            r = pcclAllReduce(a, b, &desc, comm, NULL);
            const uint64_t dt = now_ms() - t0;
            if (r == pcclSuccess) {
                if (check(b, count, k % 1000u, world) != 0) return 1;
                continue;
            }
            if (r != pcclMasterConnectionFailed && r != pcclRankConnectionLost) {
                fprintf(stderr, "itest_peer %u: all-reduce %d\n", index, (int)r);
                return 1;
            }
            if (dt > evict_ms + 3000u) return 3;
            if (r == pcclMasterConnectionFailed) break;
        }
        bool pending = false;
        r = pcclArePeersPending(comm, &pending);
        if (r != pcclMasterConnectionFailed) return 1;
        r = pcclUpdateTopology(comm);
        if (r != pcclMasterConnectionFailed) return 1;
        printf("DONE %u master lost\n", index);
    } else {
        return 2;
    }
    free(a);
    free(b);
    if (pcclDestroyCommunicator(comm) != pcclSuccess) return 1;
    return 0;
}
