/*
 * itest_p2p_peer.c — one peer process of the send / recv integration tests
 * (tests/integration/coll.py --peer itest_p2p_peer; docs/collectives-p2p.md):
 * pcclSend / pcclRecv and their work objects through libpccl, every byte
 * checked exactly.
 *
 *   itest_p2p_peer --url URL --index I --world N --mode MODE [--pool P]
 *
 * Byte k of what rank s sends to rank d is byte_of(s, d, k) (below).
 *
 * exact:     grows to N; every ordered pair (s, d) in turn, sizes 1, 1000 and
 *            3,000,001 bytes (the others wait at a barrier); then every rank
 *            sends to r + 1 and receives from r - 1 at once on tag 0, beside an
 *            all-gather of tag 0, as work objects; bad arguments (peer = own
 *            rank, peer >= world, peer < 0, a NULL buffer) are
 *            pcclInvalidArgument; a receive that disagrees with its send on the
 *            count is pcclInvalidUsage at both; a send nobody receives, with a
 *            600 ms timeout, is pcclTimeout within 0.6 .. 4 s.
 * victim:    grows to N, prints RUNNING, starts the exchange with 8 MB and
 *            SIGKILLs itself while it runs.
 * survivor:  grows to N, prints RUNNING, runs exchanges of 8 MB (timeout 8 s)
 *            until one fails (pcclRankConnectionLost, pcclTimeout or
 *            pcclUpdateTopologyFailed) within 12 s; then updates the topology
 *            until the group has N - 1 peers and runs exact exchanges there.
 *            Prints RECOVERED.
 * timeout:   grows to N; the ranks learn each other's index (an all-gather);
 *            index N - 1 sleeps 4 s, the others send to it with a 1,000 ms
 *            timeout: pcclTimeout within 1 .. 4 s; then everyone runs a
 *            barrier and an exact exchange.
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

static int g_index;

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static uint8_t byte_of(uint32_t src, uint32_t dst, uint64_t k)
{
    return (uint8_t)(src * 37u + dst * 101u + (uint32_t)(k * 13u) + (uint32_t)(k >> 9));
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

static pcclCollectiveOptions_t opts_of(uint64_t tag, uint32_t timeout_ms)
{
    pcclCollectiveOptions_t o = PCCL_COLLECTIVE_OPTIONS_INIT;
    o.tag = tag;
    o.timeout_ms = timeout_ms;
    return o;
}

static uint8_t *filled(uint32_t src, uint32_t dst, uint64_t bytes)
{
    uint8_t *b = malloc((size_t)bytes + 1u);
    if (b == NULL) exit(2);
    for (uint64_t k = 0; k < bytes; k++)
        b[k] = byte_of(src, dst, k);
    return b;
}

static int check(const uint8_t *b, uint32_t src, uint32_t dst, uint64_t bytes)
{
    for (uint64_t k = 0; k < bytes; k++) {
        if (b[k] != byte_of(src, dst, k)) {
            fprintf(stderr, "itest_p2p_peer %d: %u -> %u byte %llu is %u, want %u\n", g_index, src,
                    dst, (unsigned long long)k, b[k], byte_of(src, dst, k));
            return 1;
        }
    }
    return 0;
}

/* Every ordered pair in turn; the others wait at a barrier. */
static int pairs_exact(pcclComm_t *c, uint64_t bytes)
{
    uint32_t rank = 0, n = 0;
    if (attrs(c, &rank, &n) != 0) return 2;
    for (uint32_t s = 0; s < n; s++) {
        for (uint32_t d = 0; d < n; d++) {
            if (s == d) continue;
            const pcclCollectiveOptions_t o = opts_of(s * 100u + d, 0);
            pcclResult_t r = pcclSuccess;
            if (rank == s) {
                uint8_t *b = filled(s, d, bytes);
                r = pcclSend(b, bytes, pcclUint8, (int)d, &o, c, NULL);
                free(b);
            } else if (rank == d) {
                uint8_t *b = malloc((size_t)bytes + 1u);
                memset(b, 0xA5, (size_t)bytes);
                pcclCollectiveInfo_t info;
                r = pcclRecv(b, bytes, pcclUint8, (int)s, &o, c, &info);
                const int bad = r == pcclSuccess ? check(b, s, d, bytes) : 0;
                free(b);
                if (bad != 0) return bad;
                if (r == pcclSuccess && info.rx_bytes != bytes) {
                    fprintf(stderr, "itest_p2p_peer %d: rx_bytes %llu, want %llu\n", g_index,
                            (unsigned long long)info.rx_bytes, (unsigned long long)bytes);
                    return 1;
                }
            }
            if (r != pcclSuccess) {
                fprintf(stderr, "itest_p2p_peer %d: %u -> %u of %llu bytes: %d\n", g_index, s, d,
                        (unsigned long long)bytes, (int)r);
                return 1;
            }
            r = pcclBarrier(NULL, c, NULL);
            if (r != pcclSuccess) return 1;
        }
    }
    return 0;
}

/* Rank r sends to r + 1 and receives from r - 1 at once on tag 0 (with an all-gather of tag 0
 * when `with_gather`), as work objects: every result exact. timeout_ms bounds each op. */
static pcclResult_t exchange(pcclComm_t *c, uint64_t bytes, bool with_gather, uint32_t timeout_ms,
                             bool kill_self)
{
    uint32_t rank = 0, n = 0;
    if (attrs(c, &rank, &n) != 0) return pcclInternalError;
    const uint32_t to = (rank + 1u) % n, from = (rank + n - 1u) % n;
    uint8_t *sb = filled(rank, to, bytes), *rb = malloc((size_t)bytes + 1u);
    memset(rb, 0x5A, (size_t)bytes);
    int32_t gin = (int32_t)rank * 3 + 1, gout[64];
    const pcclCollectiveOptions_t o = opts_of(0, timeout_ms);
    pcclWork_t *ws = NULL, *wr = NULL, *wg = NULL;
    /* Even ranks post the receive first, odd ones the send: any order works. */
    pcclResult_t r1 = pcclSuccess, r2 = pcclSuccess, r3 = pcclSuccess;
    if (rank % 2u == 0u) r2 = pcclRecvAsync(rb, bytes, pcclUint8, (int)from, &o, c, &wr);
    r1 = pcclSendAsync(sb, bytes, pcclUint8, (int)to, &o, c, &ws);
    if (rank % 2u == 1u) r2 = pcclRecvAsync(rb, bytes, pcclUint8, (int)from, &o, c, &wr);
    if (with_gather) r3 = pcclAllGatherAsync(&gin, gout, 1, pcclInt32, &o, c, &wg);
    if (kill_self) {
        itest_sleep_ms(30);
        raise(SIGKILL); /* mid-op: its pair links break under the others */
    }
    if (r1 == pcclSuccess) r1 = pcclWorkWait(ws, NULL);
    if (r2 == pcclSuccess) r2 = pcclWorkWait(wr, NULL);
    if (with_gather && r3 == pcclSuccess) r3 = pcclWorkWait(wg, NULL);
    pcclWorkFree(ws);
    pcclWorkFree(wr);
    pcclWorkFree(wg);
    pcclResult_t r = r1 != pcclSuccess ? r1 : r2 != pcclSuccess ? r2 : r3;
    if (r == pcclSuccess && check(rb, from, rank, bytes) != 0) r = pcclInternalError;
    for (uint32_t k = 0; with_gather && r == pcclSuccess && k < n; k++) {
        if (gout[k] != (int32_t)k * 3 + 1) r = pcclInternalError;
    }
    free(sb);
    free(rb);
    return r;
}

static int mode_exact(pcclComm_t *c)
{
    const uint64_t sizes[] = {1, 1000, 3000001};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        const int rc = pairs_exact(c, sizes[k]);
        if (rc != 0) return rc;
    }
    for (int round = 0; round < 3; round++) {
        const pcclResult_t r = exchange(c, 100000u + (uint64_t)round * 777u, true, 0, false);
        if (r != pcclSuccess) {
            fprintf(stderr, "itest_p2p_peer %d: exchange %d: %d\n", g_index, round, (int)r);
            return 1;
        }
    }
    uint32_t rank = 0, n = 0;
    if (attrs(c, &rank, &n) != 0) return 2;
    uint8_t buf[16] = {0};
    const pcclCollectiveOptions_t o = opts_of(42, 0);
    const int bad_peers[] = {(int)rank, (int)n, -1};
    for (size_t k = 0; k < 3; k++) {
        if (pcclSend(buf, 16, pcclUint8, bad_peers[k], &o, c, NULL) != pcclInvalidArgument ||
            pcclRecv(buf, 16, pcclUint8, bad_peers[k], &o, c, NULL) != pcclInvalidArgument) {
            fprintf(stderr, "itest_p2p_peer %d: peer %d not refused\n", g_index, bad_peers[k]);
            return 1;
        }
    }
    if (pcclSend(NULL, 16, pcclUint8, (int)((rank + 1u) % n), &o, c, NULL) != pcclInvalidArgument) {
        return 1;
    }
    /* Rank 0 sends 16 bytes to rank 1, which expects 17: pcclInvalidUsage at both. */
    pcclResult_t r = pcclSuccess;
    uint8_t big[17] = {0};
    if (rank == 0) r = pcclSend(buf, 16, pcclUint8, 1, &o, c, NULL);
    if (rank == 1) r = pcclRecv(big, 17, pcclUint8, 0, &o, c, NULL);
    if ((rank == 0 || rank == 1) && r != pcclInvalidUsage) {
        fprintf(stderr, "itest_p2p_peer %d: disagreeing counts gave %d\n", g_index, (int)r);
        return 1;
    }
    /* A send nobody receives, with a 600 ms timeout. */
    if (rank == 0) {
        const pcclCollectiveOptions_t t = opts_of(43, 600);
        const uint64_t t0 = now_ms();
        r = pcclSend(buf, 16, pcclUint8, (int)n - 1, &t, c, NULL);
        const uint64_t took = now_ms() - t0;
        if (r != pcclTimeout || took < 550 || took > 4000) {
            fprintf(stderr, "itest_p2p_peer %d: unreceived send: %d after %llu ms\n", g_index,
                    (int)r, (unsigned long long)took);
            return r != pcclTimeout ? 1 : 3;
        }
        printf("UNRECEIVED_TIMEOUT %llu ms\n", (unsigned long long)took);
    }
    return pcclBarrier(NULL, c, NULL) == pcclSuccess ? 0 : 1;
}

static int mode_victim(pcclComm_t *c)
{
    printf("RUNNING\n");
    fflush(stdout);
    for (int tries = 0; tries < 1000; tries++) {
        (void)exchange(c, 8u << 20, false, 0, true); /* does not return: it kills itself */
        itest_sleep_ms(10);
    }
    return 3;
}

static int recover_to(pcclComm_t *c, uint32_t n)
{
    for (int tries = 0;; tries++) {
        pcclResult_t r = pcclUpdateTopology(c);
        if (r != pcclSuccess && r != pcclUpdateTopologyFailed) return 2;
        int ws = 0, rk = -1;
        pcclGetAttribute(c, PCCL_ATTRIBUTE_PEER_GROUP_WORLD_SIZE, &ws);
        pcclGetAttribute(c, PCCL_ATTRIBUTE_RANK, &rk);
        if ((uint32_t)ws == n && rk >= 0) return 0;
        if (tries > 300) return 3;
        itest_sleep_ms(20);
    }
}

static int mode_survivor(pcclComm_t *c, uint32_t n)
{
    printf("RUNNING\n");
    fflush(stdout);
    const uint64_t t0 = now_ms();
    for (;;) {
        uint32_t rank = 0, world = 0;
        if (attrs(c, &rank, &world) != 0) {
            /* No rank: the loss already re-wires the ring (ccoip_peer_rank is -1 from the
             * plan until its verdict). Recover as after a failed exchange. */
            printf("REWIRING after %llu ms\n", (unsigned long long)(now_ms() - t0));
            break;
        }
        const pcclResult_t r = exchange(c, 8u << 20, false, 8000, false);
        if (r == pcclInternalError) return 1; /* a wrong byte */
        if (r == pcclSuccess && world == n) {
            if (now_ms() - t0 > 12000) return 3;
            continue;
        }
        if (r == pcclSuccess) break; /* the loss fell between two exchanges */
        if (r != pcclRankConnectionLost && r != pcclTimeout && r != pcclUpdateTopologyFailed) {
            fprintf(stderr, "itest_p2p_peer %d: the loss gave %d\n", g_index, (int)r);
            return 1;
        }
        if (now_ms() - t0 > 12000) return 3;
        printf("FAILED_WITH %d after %llu ms\n", (int)r, (unsigned long long)(now_ms() - t0));
        break;
    }
    int rc = recover_to(c, n - 1u);
    if (rc != 0) return rc;
    for (int round = 0; round < 3; round++) {
        pcclResult_t r = exchange(c, 1u << 20, true, 0, false);
        if (r == pcclUpdateTopologyFailed || r == pcclRankConnectionLost) {
            round--; /* the others were still settling: once more on the settled ring */
            if (recover_to(c, n - 1u) != 0) return 3;
            continue;
        }
        if (r != pcclSuccess) return 1;
    }
    printf("RECOVERED\n");
    return 0;
}

static int mode_timeout(pcclComm_t *c, uint32_t n)
{
    uint32_t rank = 0, world = 0;
    if (attrs(c, &rank, &world) != 0) return 2;
    int32_t idx = g_index, all[64];
    if (pcclAllGather(&idx, all, 1, pcclInt32, NULL, c, NULL) != pcclSuccess) return 2;
    uint32_t sleeper = 0;
    for (uint32_t k = 0; k < world; k++) {
        if (all[k] == (int32_t)n - 1) sleeper = k;
    }
    if ((uint32_t)g_index == n - 1u) {
        itest_sleep_ms(4000);
    } else {
        uint8_t buf[64] = {0};
        const pcclCollectiveOptions_t o = opts_of(7, 1000);
        const uint64_t t0 = now_ms();
        const pcclResult_t r = pcclSend(buf, 64, pcclUint8, (int)sleeper, &o, c, NULL);
        const uint64_t took = now_ms() - t0;
        if (r != pcclTimeout || took < 950 || took > 4000) {
            fprintf(stderr, "itest_p2p_peer %d: send to the sleeper: %d after %llu ms\n", g_index,
                    (int)r, (unsigned long long)took);
            return r != pcclTimeout ? 1 : 3;
        }
        printf("TIMEDOUT %llu ms\n", (unsigned long long)took);
    }
    pcclResult_t r = pcclTimeout;
    for (int tries = 0; tries < 20 && r != pcclSuccess; tries++) {
        r = pcclBarrier(NULL, c, NULL);
        if (r == pcclUpdateTopologyFailed || r == pcclRankConnectionLost) pcclUpdateTopology(c);
    }
    if (r != pcclSuccess) return 1;
    return exchange(c, 1u << 16, false, 0, false) == pcclSuccess ? 0 : 1;
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
    if (url == NULL || n > 64 || pcclInit() != pcclSuccess) return 2;
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
