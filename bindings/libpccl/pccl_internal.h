/*
 * pccl_internal.h — what the files of libpccl share: the communicator's
 * struct and its checks. pccl.c has the library, the communicator, the
 * all-reduce, shared state and the master; pccl_coll.c the collective set
 * beyond all-reduce and its work objects (docs/collectives.md).
 */
#ifndef PCCL_INTERNAL_H
#define PCCL_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "ccoip_peer.h"
#include "pccl.h"
#include "pt.h"

/** Operations in flight per communicator (all-reduces and work objects together). */
#define PCCL_MAX_ASYNC 16u

struct pcclComm_t {
    pcclCommCreateParams_t params;
    uint32_t timeout_ms;   /* pcclCommCreateOptions_t.timeout_ms */
    uint32_t heartbeat_ms; /* pcclCommCreateOptions_t.heartbeat_ms */
    bool abort_on_error;   /* PCCL_ABORT_ON_ERROR / TORCHCOMM_ABORT_ON_ERROR at pcclConnect */
    char url[CCOIP_URL_MAX];
    bool has_url;
    pthread_mutex_t mu; /* guards driver, connected and async */
    pt_driver *d;
    bool connected;
    /* One entry per op in flight: its tag (unique among them) and its command. */
    struct {
        bool used;
        uint64_t tag;
        uint32_t handle;
    } async[PCCL_MAX_ASYNC];
};

/** pcclInit was called. */
bool pccl_initialized(void);

/** pcclNotInitialized, pcclInvalidArgument (NULL), pcclInvalidUsage (not connected), or
 *  pcclSuccess. */
pcclResult_t pccl_comm_check(const pcclComm_t *c);

#endif /* PCCL_INTERNAL_H */
