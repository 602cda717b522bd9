/*
 * itest_copied_bytes.c — PCCL_ATTRIBUTE_COPIED_BYTES (+ _HIGH) counts exactly
 * the tensor bytes the runtime copies in memory (docs/benchmarks.md,
 * "copied_bytes"): an in-process master and 2 peers on their own threads.
 * Each peer checks that the counter is 0 after connecting (before any op),
 * then runs int32 SUM all-reduces of S bytes, out of place and in place, on
 * the small path (S = 4 KiB: all-gather + local reduction, docs/semantics.md
 * §5) and on the ring (S = 1 MiB), checks every result exactly and the
 * counter's growth per operation exactly:
 *   ring, out of place: 0 (SEND is the base of the reduce-scatter: ccoip_sm.h v6)
 *   ring, in place:     S (RECV -> BACKUP)
 *   small, out of place: 0 (one GATHER_REDUCE reads every input where it lies)
 *   small, in place:     S (RECV -> BACKUP)
 * With the master relay on (docs/protocol.md §6.8.2; PCCL_RELAY_MAX_BYTES
 * unset = 16 KiB, or >= S; ctest runs both ways) the small op instead copies
 *   relayed, either way:  2 S (the input into the initiate, the result into RECV)
 * and the peers' all-reduce info says so too (tx = rx = S).
 * Then a shared-state sync (revision 0, tensors "a" equal, "b" differs on
 * peer 1, which syncs RECEIVE_ONLY while peer 0 is SEND_ONLY): peer 1's
 * counter grows by exactly b's bytes (landed in scratch, then copied into
 * the tensor), peer 0's by 0.
 * Out of place, the send buffer must come back untouched; send and receive
 * buffers that overlap without being equal are pcclInvalidArgument (nothing
 * copied, nothing sent). Unknown attribute 9 stays pcclInvalidArgument. Exit 0 ok, 1 wrong, 2
 * setup.
 */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "itest_common.h"
#include "pccl.h"

#define WORLD       2u
#define SMALL_COUNT 1024u   /* 4 KiB of int32: the small path at N = 2 */
#define RING_COUNT  262144u /* 1 MiB of int32: the ring */

static char g_url[64];

/* The full 62-bit count from the two attributes; returns false on an error. */
static bool copied(pcclComm_t *comm, uint64_t *out)
{
    int lo = -1, hi = -1;
    if (pcclGetAttribute(comm, PCCL_ATTRIBUTE_COPIED_BYTES, &lo) != pcclSuccess ||
        pcclGetAttribute(comm, PCCL_ATTRIBUTE_COPIED_BYTES_HIGH, &hi) != pcclSuccess || lo < 0 ||
        hi < 0) {
        return false;
    }
    *out = ((uint64_t)hi << 31) | (uint64_t)lo;
    return true;
}

static bool g_relay; /* set by main before the peers start */

typedef struct peer_arg {
    uint32_t index;
    int rc;
    char msg[200];
} peer_arg;

static int run_op(pcclComm_t *comm, peer_arg *pa, uint32_t count, bool in_place, uint64_t tag,
                  uint64_t want_copied)
{
    int32_t *send = malloc(count * sizeof *send);
    int32_t *recv = malloc(count * sizeof *recv);
    if (send == NULL || recv == NULL) return 2;
    for (uint32_t j = 0; j < count; j++) {
        send[j] = (int32_t)((pa->index + 1u) * (1u + j % 1000u));
        recv[j] = in_place ? send[j] : -1;
    }
    pcclReduceDescriptor_t desc;
    memset(&desc, 0, sizeof desc);
    desc.count = count;
    desc.op = pcclSum;
    desc.tag = tag;
    desc.src_descriptor.datatype = pcclInt32;
    desc.quantization_options.quantized_datatype = pcclInt32;
    int rc = 0;
    uint64_t c0 = 0, c1 = 0;
    pcclReduceInfo_t info;
    if (!copied(comm, &c0)) rc = 1;
    if (rc == 0 && pcclAllReduce(in_place ? recv : send, recv, &desc, comm, &info) != pcclSuccess) {
        snprintf(pa->msg, sizeof pa->msg, "all-reduce %u elements failed", count);
        rc = 1;
    }
    for (uint32_t j = 0; j < count && rc == 0; j++) {
        if (recv[j] != (int32_t)(3u * (1u + j % 1000u))) {
            snprintf(pa->msg, sizeof pa->msg, "wrong sum at %u: %d", j, recv[j]);
            rc = 1;
        } else if (!in_place && send[j] != (int32_t)((pa->index + 1u) * (1u + j % 1000u))) {
            snprintf(pa->msg, sizeof pa->msg, "send buffer written at %u: %d", j, send[j]);
            rc = 1;
        }
    }
    const uint64_t bytes = (uint64_t)count * 4u;
    if (rc == 0 && g_relay && count == SMALL_COUNT &&
        (info.tx_bytes != bytes || info.rx_bytes != bytes)) {
        snprintf(pa->msg, sizeof pa->msg,
                 "relayed %" PRIu64 " bytes: info tx %" PRIu64 " rx %" PRIu64
                 ", want both %" PRIu64,
                 bytes, info.tx_bytes, info.rx_bytes, bytes);
        rc = 1;
    }
    if (rc == 0 && (!copied(comm, &c1) || c1 - c0 != want_copied)) {
        snprintf(pa->msg, sizeof pa->msg,
                 "%u bytes %s: copied %" PRIu64 " bytes (counter %" PRIu64 " -> %" PRIu64
                 "), want %" PRIu64,
                 count * 4u, in_place ? "in place" : "out of place", c1 - c0, c0, c1, want_copied);
        rc = 1;
    }
    free(send);
    free(recv);
    return rc;
}

/* Send and receive buffers overlapping (not equal), either way round: pcclInvalidArgument
 * before anything runs (both peers see it locally, nothing goes to the master). */
static int run_overlap(pcclComm_t *comm, peer_arg *pa)
{
    static int32_t bufs[WORLD][64];
    int32_t *b = bufs[pa->index];
    pcclReduceDescriptor_t desc;
    memset(&desc, 0, sizeof desc);
    desc.count = 32;
    desc.op = pcclSum;
    desc.tag = 9;
    desc.src_descriptor.datatype = pcclInt32;
    desc.quantization_options.quantized_datatype = pcclInt32;
    uint64_t c0 = 0, c1 = 0;
    if (!copied(comm, &c0)) return 1;
    const pcclResult_t r1 = pcclAllReduce(b, b + 31, &desc, comm, NULL);
    const pcclResult_t r2 = pcclAllReduce(b + 1, b, &desc, comm, NULL);
    if (r1 != pcclInvalidArgument || r2 != pcclInvalidArgument) {
        snprintf(pa->msg, sizeof pa->msg, "overlapping buffers: %d and %d, want %d", (int)r1,
                 (int)r2, (int)pcclInvalidArgument);
        return 1;
    }
    if (!copied(comm, &c1) || c1 != c0) {
        snprintf(pa->msg, sizeof pa->msg, "overlapping buffers copied %" PRIu64 " bytes", c1 - c0);
        return 1;
    }
    return 0;
}

#define STATE_COUNT 4096u

static int run_sync(pcclComm_t *comm, peer_arg *pa)
{
    static int32_t as[WORLD][STATE_COUNT];
    static float bs[WORLD][STATE_COUNT];
    int32_t *a = as[pa->index];
    float *b = bs[pa->index];
    const bool divergent = pa->index == 1u;
    itest_fill_ab(a, b, STATE_COUNT, divergent);
    pcclTensorInfo_t infos[2];
    pcclSharedState_t st;
    itest_state_ab(&st, infos, a, b, STATE_COUNT);
    pcclSharedStateSyncInfo_t info;
    memset(&info, 0, sizeof info);
    uint64_t c0 = 0, c1 = 0;
    if (!copied(comm, &c0)) return 1;
    const pcclResult_t r =
        pcclSynchronizeSharedState(comm, &st,
                                   divergent ? PCCL_SHARED_STATE_SYNC_STRATEGY_RECEIVE_ONLY
                                             : PCCL_SHARED_STATE_SYNC_STRATEGY_SEND_ONLY,
                                   &info);
    if (r != pcclSuccess) {
        snprintf(pa->msg, sizeof pa->msg, "sync failed: %d", (int)r);
        return 1;
    }
    for (uint32_t j = 0; j < STATE_COUNT; j++) {
        if (a[j] != (int32_t)j || b[j] != (float)j * 0.5f) {
            snprintf(pa->msg, sizeof pa->msg, "shared state element %u", j);
            return 1;
        }
    }
    const uint64_t want = divergent ? STATE_COUNT * 4u : 0u;
    if (!copied(comm, &c1) || c1 - c0 != want || info.rx_bytes != want) {
        snprintf(pa->msg, sizeof pa->msg,
                 "sync: copied %" PRIu64 " bytes, received %" PRIu64 ", want %" PRIu64, c1 - c0,
                 info.rx_bytes, want);
        return 1;
    }
    return 0;
}

static void *peer_main(void *arg)
{
    peer_arg *pa = arg;
    pcclComm_t *comm = NULL;
    int rc = itest_connect_group(g_url, WORLD, &comm);
    if (comm == NULL) {
        pa->rc = 2;
        return NULL;
    }
    uint64_t c = 1;
    if (rc == 0 && (!copied(comm, &c) || c != 0)) {
        snprintf(pa->msg, sizeof pa->msg, "counter %" PRIu64 " before any op, want 0", c);
        rc = 1;
    }
    int v = 0;
    if (rc == 0 && pcclGetAttribute(comm, (pcclAttribute_t)9, &v) != pcclInvalidArgument) {
        snprintf(pa->msg, sizeof pa->msg, "attribute 9 accepted");
        rc = 1;
    }
    if (rc == 0) rc = run_overlap(comm, pa);
    const uint64_t small = SMALL_COUNT * 4u, ring = RING_COUNT * 4u;
    const bool relay = g_relay;
    if (rc == 0) rc = run_op(comm, pa, RING_COUNT, false, 1, 0);
    if (rc == 0) rc = run_op(comm, pa, RING_COUNT, true, 2, ring);
    if (rc == 0) rc = run_op(comm, pa, SMALL_COUNT, false, 3, relay ? 2u * small : 0);
    if (rc == 0) rc = run_op(comm, pa, SMALL_COUNT, true, 4, relay ? 2u * small : small);
    const uint64_t total = ring + (relay ? 4u * small : small);
    if (rc == 0 && (!copied(comm, &c) || c != total)) {
        snprintf(pa->msg, sizeof pa->msg, "total %" PRIu64 ", want %" PRIu64, c, total);
        rc = 1;
    }
    if (rc == 0) rc = run_sync(comm, pa);
    if (pcclDestroyCommunicator(comm) != pcclSuccess && rc == 0) rc = 1;
    pa->rc = rc;
    return NULL;
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (pcclInit() != pcclSuccess) return 2;
    const char *rv = getenv("PCCL_RELAY_MAX_BYTES");
    g_relay = rv == NULL || rv[0] == '\0' || strtoull(rv, NULL, 10) >= SMALL_COUNT * 4u;
    pcclMasterInstance_t *m = NULL;
    if (itest_start_master(&m, g_url, sizeof g_url) != 0) return 2;
    pthread_t th[WORLD];
    peer_arg pa[WORLD];
    memset(pa, 0, sizeof pa);
    for (uint32_t i = 0; i < WORLD; i++) {
        pa[i].index = i;
        if (pthread_create(&th[i], NULL, peer_main, &pa[i]) != 0) return 2;
    }
    int rc = 0;
    for (uint32_t i = 0; i < WORLD; i++) {
        pthread_join(th[i], NULL);
        if (pa[i].rc != 0) {
            fprintf(stderr, "itest_copied_bytes: peer %u failed (%d): %s\n", i, pa[i].rc,
                    pa[i].msg);
            if (rc == 0 || pa[i].rc == 1) rc = pa[i].rc;
        }
    }
    pcclInterruptMaster(m);
    pcclMasterAwaitTermination(m);
    pcclDestroyMaster(m);
    if (rc == 0) printf("DONE: copied bytes exact (master relay %s)\n", g_relay ? "on" : "off");
    return rc;
}
