/*
 * itest_common.h — setup shared by the integration test programs: an
 * in-process master on a free port of 127.0.0.1, and the two-tensor shared
 * state ("a": int32, "b": float) the sync tests use.
 */
#ifndef ITEST_COMMON_H
#define ITEST_COMMON_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

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

#endif /* ITEST_COMMON_H */
