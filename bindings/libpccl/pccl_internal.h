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
    uint32_t ring_key; /* Join.ring_key: a split's child joins with its parent rank + 1 */
    /* Splits made from this communicator (pccl_split.c): how many per (epoch, ranks) key, so
     * that a second split of one subset in one epoch makes another group. */
    struct {
        uint64_t key;
        uint32_t count;
    } splits[32];
    uint32_t splits_n;
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

/** pcclConnect in two halves (pccl.c): start (the driver, the CONNECT command submitted:
 *  *handle), then wait for the admission (bounded by timeout_ms, 0: none); a failed start or
 *  wait tears the driver down. */
pcclResult_t pccl_connect_start(pcclComm_t *c, uint32_t *handle);
pcclResult_t pccl_connect_finish(pcclComm_t *c, uint32_t handle, uint32_t timeout_ms);
/** A new, unconnected communicator with parent's master, options and parameters, in peer
 *  group peer_group, joining with ring_key (pccl_split.c). */
pcclResult_t pccl_comm_clone(const pcclComm_t *parent, uint32_t peer_group, uint32_t ring_key,
                             pcclComm_t **out);

/** pcclInit was called. */
bool pccl_initialized(void);

/** pcclNotInitialized, pcclInvalidArgument (NULL), pcclInvalidUsage (not connected), or
 *  pcclSuccess. */
pcclResult_t pccl_comm_check(const pcclComm_t *c);

/**
 * An all-reduce's arguments from its PCCL 1.0 descriptor (pccl.c): checks types, op,
 * quantization, counts and buffer overlap; *bytes_out = count * element size.
 */
pcclResult_t pccl_reduce_args(const void *sendbuff, const void *recvbuff,
                              const pcclReduceDescriptor_t *desc, ccoip_allreduce_args *out,
                              uint64_t *bytes_out);

/**
 * A list variant's staging (pccl_coll_list.c): one contiguous block the op runs on, owned by the
 * work object from pccl_coll_start on (freed when the op ends, or at once when it cannot
 * start); when the op succeeds, block i of mem + out_off (block_bytes each) is copied to out[i]
 * before the wait returns; on failure the caller's list is not touched.
 */
typedef struct pccl_stage {
    uint8_t *mem;
    void *const *out;
    uint32_t n_out;
    uint64_t out_off, block_bytes;
} pccl_stage;

/**
 * The caller's collective options (pccl_coll.c; NULL: every default) into *out, a struct of
 * this library's size: struct_size may be this header's or the first version's (without
 * quantization_options, which then keeps its default); only the caller's bytes are read.
 * pcclSuccess, or pcclInvalidArgument with a log line (another size, reserved not 0, unknown
 * flags or quantization algorithm).
 */
pcclResult_t pccl_coll_options_read(const pcclCollectiveOptions_t *o, pcclCollectiveOptions_t *out);

/**
 * Starts one op of the collective set (pccl_coll.c); stage may be NULL. require_epoch != 0: the
 * op starts only in that epoch (else pcclUpdateTopologyFailed, nothing started): the buffers of
 * a composite's later phase were sized for it.
 */
pcclResult_t pccl_coll_start(const pcclComm_t *comm, ccoip_coll_kind kind, const void *sendbuf,
                             void *recvbuf, size_t count, pcclDataType_t dtype, pcclRedOp_t op,
                             int root, const pcclCollectiveOptions_t *options,
                             const pccl_stage *stage, uint64_t require_epoch,
                             pcclWork_t **work_out);

/**
 * A composite op (pccl_coll_v.c): called each time the work's current op succeeded. It returns
 * pcclSuccess with *next set to the next phase's work (its command, tag and stage move into the
 * composite work object; *next itself is consumed), pcclSuccess with *next NULL when the
 * composite is complete, or the composite's result (an error). ctx is freed with free_ctx when
 * the work object is done.
 */
typedef pcclResult_t (*pccl_chain_fn)(void *ctx, const pcclComm_t *comm, pcclWork_t **next);
void pccl_work_chain(pcclWork_t *w, pccl_chain_fn fn, void *ctx, void (*free_ctx)(void *));

/**
 * A blocking all-reduce whose forced algorithm every member passes by construction (the
 * tuner's timed runs, pccl_tune.c): it may start optimistically, as an AUTO op does, so the
 * tuner times what AUTO will run (ccoip_allreduce_args.algo_agreed).
 */
pcclResult_t pccl_allreduce_agreed(const void *sendbuff, void *recvbuff,
                                   const pcclReduceDescriptor_t *descriptor,
                                   const pcclCollectiveOptions_t *options,
                                   const pcclComm_t *communicator);

/** The blocking form of a started op: wait, free. */
pcclResult_t pccl_coll_finish(pcclResult_t started, pcclWork_t *w, pcclCollectiveInfo_t *info_out);

#endif /* PCCL_INTERNAL_H */
