/*
 * itest_common.h — setup shared by the integration test programs: an
 * in-process master on a free port of 127.0.0.1, and the two-tensor shared
 * state ("a": int32, "b": float) the sync tests use.
 */
#ifndef ITEST_COMMON_H
#define ITEST_COMMON_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "pccl.h"

/* Starts a master on tcp://127.0.0.1:0 (heartbeat 100 ms, eviction 2 s, vote timeout 10 s) and
 * writes its URL. Returns 0, or 2 when it cannot start. */
static inline int itest_start_master(pcclMasterInstance_t **m, char *url, size_t url_len)
{
    pcclMasterCreateParams_t mp;
    memset(&mp, 0, sizeof mp);
    mp.listen_url = "tcp://127.0.0.1:0";
    mp.heartbeat_ms = 100;
    mp.evict_ms = 2000;
    mp.vote_timeout_ms = 10000;
    uint16_t port = 0;
    *m = NULL;
    if (pcclCreateMasterEx(&mp, m, &port) != pcclSuccess || pcclRunMaster(*m) != pcclSuccess) {
        return 2;
    }
    snprintf(url, url_len, "tcp://127.0.0.1:%u", (unsigned)port);
    return 0;
}

/* The content of the sync tests' keys: a[j] = j everywhere; b[j] = j / 2, or -1 on the peer
 * whose state diverges (the one the sync must repair). */
static inline void itest_fill_ab(int32_t *a, float *b, uint64_t count, bool divergent)
{
    for (uint64_t j = 0; j < count; j++) {
        a[j] = (int32_t)j;
        b[j] = divergent ? -1.0f : (float)j * 0.5f;
    }
}

/* The shared state of the sync tests: key "a" (int32) and key "b" (float), count each. */
static inline void itest_state_ab(pcclSharedState_t *st, pcclTensorInfo_t infos[2], int32_t *a,
                                  float *b, uint64_t count)
{
    memset(infos, 0, 2 * sizeof *infos);
    infos[0].name = "a";
    infos[0].data = a;
    infos[0].count = count;
    infos[0].datatype = pcclInt32;
    infos[1].name = "b";
    infos[1].data = b;
    infos[1].count = count;
    infos[1].datatype = pcclFloat;
    memset(st, 0, sizeof *st);
    st->count = 2;
    st->infos = infos;
}

static inline void itest_sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Creates a communicator for url, connects it and updates the topology until its group has
 * world peers (at most ~1,500 tries). Returns 0 with *out set, or 2 (*out may still need
 * pcclDestroyCommunicator when not NULL). */
/* Updates the topology until the caller's group has `world` members: 0, or 2 on an error. */
static inline int itest_grow_to(pcclComm_t *comm, uint32_t world)
{
    for (int tries = 0;; tries++) {
        int ws = 0;
        if (pcclGetAttribute(comm, PCCL_ATTRIBUTE_CURRENT_WORLD_SIZE, &ws) != pcclSuccess ||
            tries > 1500)
            return 2;
        if ((uint32_t)ws >= world) return 0;
        bool pending = false;
        if (pcclArePeersPending(comm, &pending) == pcclSuccess && !pending) itest_sleep_ms(10);
        const pcclResult_t r = pcclUpdateTopology(comm);
        if (r != pcclSuccess && r != pcclUpdateTopologyFailed) return 2;
    }
}

/* As itest_connect_group, with a connection pool size (0: the default) and a timeout. */
static inline int itest_connect_group_ex(const char *url, uint32_t world, uint32_t pool,
                                         uint32_t timeout_ms, pcclComm_t **out)
{
    pcclCommCreateParams_t params;
    memset(&params, 0, sizeof params);
    params.p2p_connection_pool_size = pool;
    pcclCommCreateOptions_t opts = PCCL_COMM_CREATE_OPTIONS_INIT;
    opts.master_url = url;
    opts.timeout_ms = timeout_ms;
    *out = NULL;
    if (pcclCreateCommunicatorEx(&params, &opts, out) != pcclSuccess) return 2;
    if (pcclConnect(*out) != pcclSuccess) return 2;
    return itest_grow_to(*out, world);
}

static inline int itest_connect_group(const char *url, uint32_t world, pcclComm_t **out)
{
    return itest_connect_group_ex(url, world, 0, 20000, out);
}

#endif /* ITEST_COMMON_H */
