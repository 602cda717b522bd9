/*
 * pccl_split.c — pcclCommSplit (TorchComms split(ranks); docs/collectives-split.md): a
 * communicator of its own over a subset of the parent group's ranks, built on peer groups.
 *
 * Every member of the subset:
 *   1. derives the child's peer group from (parent group, the sorted ranks, how many splits of
 *      that subset this communicator made before), top bit set — a failed split counts not,
 *      so its retry uses the same group;
 *   2. connects a new communicator in that group with ring_key = its parent rank + 1 (so the
 *      child's ranks follow the parent's), up to joined-and-pending;
 *   3. meets the others over the parent (send / recv of one byte to and from the subset's
 *      lowest rank): every child is pending before anyone votes, so one admission takes them
 *      all;
 *   4. votes on the parent (pcclUpdateTopology) until its child is admitted — every accepted
 *      peer of the run votes for an admission (docs/protocol.md §6.3): the parent group's
 *      other ranks and other groups admit the children at their next pcclUpdateTopology, as
 *      any newcomer;
 *   5. checks that the child's group has every member.
 * Bounded by the parent's timeout (60 s without one); on any failure the child is destroyed.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pccl_internal.h"

/** The split's bound when the communicator has no timeout. */
#define SPLIT_DEFAULT_TIMEOUT_MS 60000u
/** After a vote on the parent, how long the child's admission may take to show. */
#define SPLIT_ADMIT_GRACE_MS 2000u

static uint64_t split_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void split_sleep_ms(long ms)
{
    struct timespec ts = {0, ms * 1000000L};
    nanosleep(&ts, NULL);
}

static uint64_t split_mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h = (h ^ (h >> 31)) * 0xbf58476d1ce4e5b9ull;
    return h ^ (h >> 29);
}

static int split_cmp_int(const void *a, const void *b)
{
    const int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* The child's peer group: the same at every member that made the same successful splits of
 * this subset before (not the epoch: members may read it on either side of a re-wire); top bit
 * set (user groups stay below 2^31). *slot: the entry to count the split in once it succeeded
 * (UINT32_MAX: the table is full). */
static uint32_t split_group(pcclComm_t *c, const int *sorted, size_t n, uint32_t *slot)
{
    uint64_t key = split_mix(0x73706c6974ull, n);
    for (size_t i = 0; i < n; i++)
        key = split_mix(key, (uint64_t)(uint32_t)sorted[i]);
    uint32_t count = 0;
    pthread_mutex_lock(&c->mu);
    uint32_t k = 0;
    while (k < c->splits_n && c->splits[k].key != key)
        k++;
    if (k == c->splits_n && c->splits_n < sizeof c->splits / sizeof c->splits[0]) {
        c->splits[k].key = key;
        c->splits[k].count = 0;
        c->splits_n++;
    }
    if (k < c->splits_n) count = c->splits[k].count;
    *slot = k < c->splits_n ? k : UINT32_MAX;
    pthread_mutex_unlock(&c->mu);
    const uint64_t g = split_mix(split_mix(key, c->params.peer_group), count);
    return (uint32_t)(g >> 33) | 0x80000000u;
}

/* Step 3: every member's child is pending; the lowest rank gathers a byte from each and
 * answers each with one. */
static pcclResult_t split_meet(pcclComm_t *c, const int *sorted, size_t n, int rank, uint32_t group,
                               uint32_t timeout_ms)
{
    pcclCollectiveOptions_t o = PCCL_COLLECTIVE_OPTIONS_INIT;
    o.timeout_ms = timeout_ms;
    const uint64_t tag = ((uint64_t)group << 32) | 0x53504cu; /* "SPL" */
    uint8_t b = 1;
    if (rank != sorted[0]) {
        o.tag = tag;
        pcclResult_t r = pcclSend(&b, 1, pcclUint8, sorted[0], &o, c, NULL);
        o.tag = tag + 1u;
        if (r == pcclSuccess) r = pcclRecv(&b, 1, pcclUint8, sorted[0], &o, c, NULL);
        return r;
    }
    pcclWork_t **w = calloc(n, sizeof *w);
    uint8_t *bytes = calloc(n, 1);
    if (w == NULL || bytes == NULL) {
        free(w);
        free(bytes);
        return pcclSystemError;
    }
    pcclResult_t r = pcclSuccess;
    for (int phase = 0; phase < 2 && r == pcclSuccess; phase++) {
        o.tag = tag + (uint64_t)phase;
        for (size_t i = 1; i < n && r == pcclSuccess; i++) {
            r = phase == 0 ? pcclRecvAsync(&bytes[i], 1, pcclUint8, sorted[i], &o, c, &w[i])
                           : pcclSendAsync(&b, 1, pcclUint8, sorted[i], &o, c, &w[i]);
        }
        for (size_t i = 1; i < n; i++) {
            if (w[i] == NULL) continue;
            const pcclResult_t rw = pcclWorkWait(w[i], NULL);
            if (r == pcclSuccess) r = rw;
            pcclWorkFree(w[i]);
            w[i] = NULL;
        }
    }
    free(w);
    free(bytes);
    return r;
}

PCCL_EXPORT pcclResult_t pcclCommSplit(pcclComm_t *communicator, const int *ranks, size_t n,
                                       pcclComm_t **child_out)
{
    if (child_out == NULL) return pcclInvalidArgument;
    *child_out = NULL;
    pcclResult_t r = pccl_comm_check(communicator);
    if (r != pcclSuccess) return r;
    if (n == 0) return pcclSuccess; /* TorchComms: an empty list yields no communicator */
    pcclComm_t *c = communicator;
    pt_peer_info info;
    pt_peer_info_get(c->d, &info);
    if (info.rank < 0) {
        pt_log(CCOIP_LOG_WARN, "pccl",
               "pcclCommSplit: this peer is in no ring now: update the topology first");
        return pcclUpdateTopologyFailed;
    }
    if (ranks == NULL || n > info.world_size) {
        pt_log(CCOIP_LOG_ERROR, "pccl", "pcclCommSplit: %zu ranks of a group of %u", n,
               (unsigned)info.world_size);
        return pcclInvalidArgument;
    }
    int *sorted = malloc(n * sizeof *sorted);
    if (sorted == NULL) return pcclSystemError;
    memcpy(sorted, ranks, n * sizeof *sorted);
    qsort(sorted, n, sizeof *sorted, split_cmp_int);
    bool mine = false, bad = false;
    for (size_t i = 0; i < n; i++) {
        bad = bad || sorted[i] < 0 || (uint32_t)sorted[i] >= info.world_size ||
              (i > 0 && sorted[i] == sorted[i - 1]);
        mine = mine || sorted[i] == info.rank;
    }
    if (bad || !mine) {
        pt_log(CCOIP_LOG_ERROR, "pccl", "pcclCommSplit: %s (rank %d of %u)",
               bad ? "a rank out of range or listed twice" : "the list does not hold this rank",
               (int)info.rank, (unsigned)info.world_size);
        free(sorted);
        return pcclInvalidArgument;
    }
    const uint32_t timeout_ms = c->timeout_ms != 0 ? c->timeout_ms : SPLIT_DEFAULT_TIMEOUT_MS;
    const uint64_t deadline = split_now_ms() + timeout_ms;
    uint32_t slot = UINT32_MAX;
    const uint32_t group = split_group(c, sorted, n, &slot);
    pcclComm_t *child = NULL;
    r = pccl_comm_clone(c, group, (uint32_t)info.rank + 1u, &child);
    uint32_t h = 0;
    if (r == pcclSuccess) r = pccl_connect_start(child, &h);
    bool started = r == pcclSuccess;
    /* 2. Joined: its admission vote is at the master. */
    while (r == pcclSuccess) {
        pt_peer_info ci;
        pt_peer_info_get(child->d, &ci);
        if (ci.pending || ci.accepted) break;
        if (ci.failed || pt_cmd_poll(child->d, h)) {
            r = pcclMasterConnectionFailed;
        } else if (split_now_ms() >= deadline) {
            r = pcclTimeout;
        } else {
            split_sleep_ms(1);
        }
    }
    /* 3. Everyone's child is pending. */
    if (r == pcclSuccess) {
        const uint64_t now = split_now_ms();
        r = split_meet(c, sorted, n, info.rank, group,
                       now < deadline ? (uint32_t)(deadline - now) : 1u);
    }
    /* 4. Admission: this member's vote on the parent, while its own child waits. After a vote,
     *    the child's plan follows the parent's by moments: wait for it before voting again (a
     *    vote with nobody left to admit would wait for every other peer of the run). */
    uint64_t quiet_until = 0;
    while (r == pcclSuccess && !pt_cmd_poll(child->d, h)) {
        const uint64_t now = split_now_ms();
        if (now >= deadline) {
            r = pcclTimeout;
            break;
        }
        pt_peer_info ci;
        pt_peer_info_get(child->d, &ci);
        if (!ci.pending || now < quiet_until) {
            split_sleep_ms(1);
            continue;
        }
        const pcclResult_t v = pcclUpdateTopology(c);
        if (v != pcclSuccess && v != pcclUpdateTopologyFailed) r = v;
        quiet_until = split_now_ms() + SPLIT_ADMIT_GRACE_MS;
    }
    if (started) {
        const uint64_t now = split_now_ms();
        const pcclResult_t rc = pccl_connect_finish(child, h,
                                                    r != pcclSuccess ? 1u
                                                    : now < deadline ? (uint32_t)(deadline - now)
                                                                     : 1u);
        if (r == pcclSuccess) r = rc;
    }
    /* 5. Every member in: the child's group holds the whole subset. */
    if (r == pcclSuccess) {
        int world = 0;
        r = pcclGetAttribute(child, PCCL_ATTRIBUTE_PEER_GROUP_WORLD_SIZE, &world);
        if (r == pcclSuccess && (size_t)world != n) {
            pt_log(CCOIP_LOG_WARN, "pccl",
                   "pcclCommSplit: the child group has %d of its %zu members: a member's "
                   "admission came apart from the others'",
                   world, n);
            r = pcclUpdateTopologyFailed;
        }
    }
    free(sorted);
    if (r != pcclSuccess) {
        pt_log(CCOIP_LOG_WARN, "pccl", "pcclCommSplit: failed (%d): no communicator", (int)r);
        if (child != NULL) pcclDestroyCommunicator(child);
        return r;
    }
    if (slot != UINT32_MAX) {
        pthread_mutex_lock(&c->mu);
        c->splits[slot].count++;
        pthread_mutex_unlock(&c->mu);
    }
    *child_out = child;
    return pcclSuccess;
}
