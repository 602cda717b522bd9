/*
 * pccl_coll.c — the collective set beyond all-reduce in the C ABI
 * (include/pccl.h; docs/collectives.md): argument checks, the rank, world
 * and epoch an op is pinned to, buffer aliasing (in place), one command per
 * op, and its work object (wait, wait with a timeout, poll, free).
 */
#define _POSIX_C_SOURCE 200809L
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ccoip_coll.h"
#include "ccoip_dtype.h"
#include "ccoip_quant.h"
#include "ccoip_reduce.h"
#include "pccl.h"
#include "pccl_internal.h"
#include "pt.h"

/* A timed-out op is cancelled on every member by the master (docs/collectives.md §4): the call
 * waits this much longer for that verdict before it gives up on the master (which the peer
 * itself declares lost after evict_ms, 2 s by default). */
#define PCCL_CANCEL_GRACE_MS 5000u

struct pcclWork_t {
    pcclComm_t *comm;
    pt_driver *d;
    uint32_t handle;
    uint32_t slot; /* comm->async[slot] */
    uint64_t tag;
    uint32_t wait_ms; /* pcclWorkWait's bound; 0: none */
    bool abort_on_error;
    const char *what;
    bool done;
    pcclResult_t result;
    pcclCollectiveInfo_t info;
    pccl_stage stage; /* a list variant's staging (pccl_coll_list.c); mem NULL: none */
    /* A composite op's next phases (pccl_work_chain). */
    pccl_chain_fn chain;
    void *chain_ctx;
    void (*chain_free)(void *);
};

void pccl_work_chain(pcclWork_t *w, pccl_chain_fn fn, void *ctx, void (*free_ctx)(void *))
{
    w->chain = fn;
    w->chain_ctx = ctx;
    w->chain_free = free_ctx;
}

static void chain_end(pcclWork_t *w)
{
    if (w->chain_free != NULL) w->chain_free(w->chain_ctx);
    w->chain = NULL;
    w->chain_ctx = NULL;
    w->chain_free = NULL;
}

static const char *result_text(pcclResult_t r)
{
#define PCCL_RESULT_TEXT_(name, value, text)                                                       \
    case name:                                                                                     \
        return text;
    switch (r) {
        PCCL_RESULT_MAP(PCCL_RESULT_TEXT_)
    }
#undef PCCL_RESULT_TEXT_
    return "unknown result";
}

static const char *kind_name(ccoip_coll_kind k)
{
    static const char *const names[CCOIP_COLL_KINDS_ALL] = {
        "all-reduce", "broadcast", "reduce",  "all-gather", "reduce-scatter", "all-to-all",
        "gather",     "scatter",   "barrier", "send",       "recv",           "tune"};
    return (uint32_t)k < CCOIP_COLL_KINDS_ALL ? names[k] : "collective";
}

/* The first version of pcclCollectiveOptions_t ended with premul_scalar (32 bytes): callers
 * compiled with it get no quantization. */
#define PCCL_COLLECTIVE_OPTIONS_V1_SIZE offsetof(pcclCollectiveOptions_t, quantization_options)
/* The second ended with quantization_options (40 bytes): no algorithm, pcclAlgoAuto. */
#define PCCL_COLLECTIVE_OPTIONS_V2_SIZE offsetof(pcclCollectiveOptions_t, algorithm)

pcclResult_t pccl_coll_options_read(const pcclCollectiveOptions_t *o, pcclCollectiveOptions_t *out)
{
    const pcclCollectiveOptions_t defaults = PCCL_COLLECTIVE_OPTIONS_INIT;
    *out = defaults;
    if (o == NULL) return pcclSuccess;
    if (o->struct_size != sizeof *o && o->struct_size != PCCL_COLLECTIVE_OPTIONS_V1_SIZE &&
        o->struct_size != PCCL_COLLECTIVE_OPTIONS_V2_SIZE) {
        pt_log(CCOIP_LOG_ERROR, "pccl",
               "collective options: struct_size %u, this library's is %u (or %u / %u of its "
               "earlier versions; use PCCL_COLLECTIVE_OPTIONS_INIT)",
               (unsigned)o->struct_size, (unsigned)sizeof *o,
               (unsigned)PCCL_COLLECTIVE_OPTIONS_V1_SIZE,
               (unsigned)PCCL_COLLECTIVE_OPTIONS_V2_SIZE);
        return pcclInvalidArgument;
    }
    if (o->reserved != 0 || (o->flags & ~PCCL_COLLECTIVE_ABORT_ON_ERROR) != 0) {
        pt_log(CCOIP_LOG_ERROR, "pccl",
               "collective options: reserved must be 0 and flags only PCCL_COLLECTIVE_*");
        return pcclInvalidArgument;
    }
    /* Only the caller's bytes are read: the fields beyond its struct_size keep the defaults. */
    memcpy(out, o, o->struct_size);
    out->struct_size = (uint32_t)sizeof *out;
    if (out->algorithm > (uint32_t)pcclAlgoHalvingDoubling || out->reserved2 != 0) {
        pt_log(CCOIP_LOG_ERROR, "pccl",
               "collective options: unknown algorithm %u (pcclAlgorithm_t), or reserved2 not 0",
               (unsigned)out->algorithm);
        return pcclInvalidArgument;
    }
    if ((uint32_t)out->quantization_options.algorithm > (uint32_t)pcclQuantZeroPointScale) {
        pt_log(CCOIP_LOG_ERROR, "pccl", "collective options: unknown quantization algorithm %d",
               (int)out->quantization_options.algorithm);
        return pcclInvalidArgument;
    }
    return pcclSuccess;
}

/* The quantization of an op of `kind` (docs/semantics.md §6): only reduce and reduce-scatter
 * take one, not with PREMUL_SUM, and only a combination the all-reduce takes too. */
static pcclResult_t quant_check(ccoip_coll_kind kind, pcclDataType_t dtype, pcclRedOp_t op,
                                const pcclQuantizationOptions_t *q)
{
    if (q->algorithm == pcclQuantNone) return pcclSuccess;
    if (kind != CCOIP_COLL_REDUCE && kind != CCOIP_COLL_REDUCE_SCATTER) {
        pt_log(CCOIP_LOG_ERROR, "pccl",
               "%s: quantization applies to reduce and reduce-scatter only (the all-reduce "
               "takes it from its descriptor)",
               kind_name(kind));
        return pcclInvalidArgument;
    }
    if (op == pcclPremulSum) {
        pt_log(CCOIP_LOG_ERROR, "pccl", "%s: pcclPremulSum cannot be quantized", kind_name(kind));
        return pcclInvalidArgument;
    }
    if (!ccoip_dtype_valid(q->quantized_datatype) ||
        !ccoip_quant_supported(q->algorithm, dtype, q->quantized_datatype)) {
        pt_log(CCOIP_LOG_ERROR, "pccl",
               "%s: quantization algorithm %d cannot quantize data type %d into %d",
               kind_name(kind), (int)q->algorithm, (int)dtype, (int)q->quantized_datatype);
        return pcclInvalidArgument;
    }
    return pcclSuccess;
}

static bool overlap(const void *a, uint64_t an, const void *b, uint64_t bn)
{
    const uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
    return an > 0 && bn > 0 && x < y + bn && y < x + an;
}

/* Whether the op runs in place, as ccoip_coll_plan_make defines it per kind; an overlap that is
 * not the kind's in-place layout is refused (*bad). */
static bool in_place_of(ccoip_coll_kind kind, const uint8_t *send, uint64_t sb, const uint8_t *recv,
                        uint64_t rb, uint32_t rank, uint32_t root, uint64_t blk, bool *bad)
{
    *bad = false;
    bool in_place = false;
    switch (kind) {
    case CCOIP_COLL_BROADCAST:
    case CCOIP_COLL_BARRIER:
    case CCOIP_COLL_SEND: /* one buffer each */
    case CCOIP_COLL_RECV:
    case CCOIP_COLL_TUNE:
        return false;
    case CCOIP_COLL_ALL_GATHER:
        in_place = recv != NULL && send == recv + (uint64_t)rank * blk;
        break;
    case CCOIP_COLL_REDUCE_SCATTER:
        in_place = send != NULL && recv == send + (uint64_t)rank * blk;
        break;
    case CCOIP_COLL_GATHER:
        in_place = rank == root && recv != NULL && send == recv + (uint64_t)root * blk;
        break;
    case CCOIP_COLL_SCATTER:
        in_place = rank == root && send != NULL && recv == send + (uint64_t)root * blk;
        break;
    case CCOIP_COLL_ALL_REDUCE:
    case CCOIP_COLL_REDUCE:
    case CCOIP_COLL_ALL_TO_ALL:
        in_place = send == recv && sb > 0;
        break;
    }
    if (!in_place && overlap(send, sb, recv, rb)) *bad = true;
    return in_place;
}

static void work_finish(pcclWork_t *w, pcclResult_t r, const pt_cmd_result *res)
{
    w->done = true;
    w->result = r;
    if (r == pcclSuccess && res != NULL) {
        w->info.world_size = res->world_size;
        w->info.tx_bytes = res->tx_bytes;
        w->info.rx_bytes = res->rx_bytes;
    }
    if (w->stage.mem != NULL) {
        for (uint32_t i = 0; r == pcclSuccess && i < w->stage.n_out; i++) {
            memcpy(w->stage.out[i], w->stage.mem + w->stage.out_off + i * w->stage.block_bytes,
                   (size_t)w->stage.block_bytes);
        }
        free(w->stage.mem);
        w->stage.mem = NULL;
    }
    pcclComm_t *c = w->comm;
    pthread_mutex_lock(&c->mu);
    if (w->slot < PCCL_MAX_ASYNC && c->async[w->slot].used && c->async[w->slot].tag == w->tag) {
        c->async[w->slot].used = false;
    }
    pthread_mutex_unlock(&c->mu);
    if (r != pcclSuccess && w->abort_on_error) {
        pt_log(CCOIP_LOG_ERROR, "pccl", "%s (tag %llu) failed: %s (%d): aborting the process",
               w->what, (unsigned long long)w->tag, result_text(r), (int)r);
        abort();
    }
}

static pcclResult_t refuse(bool abort_on_error, ccoip_coll_kind kind, pcclResult_t r)
{
    if (abort_on_error) {
        pt_log(CCOIP_LOG_ERROR, "pccl", "%s: %s (%d): aborting the process", kind_name(kind),
               result_text(r), (int)r);
        abort();
    }
    return r;
}

/* Takes an async slot for the command's tag, posts it and wraps it in a work object. */
static pcclResult_t work_submit(pcclComm_t *c, ccoip_cmd *cmd, const void *send, void *recv,
                                uint64_t bytes, bool abort_on_error, const pcclCollectiveInfo_t *at,
                                const pccl_stage *stage, pcclWork_t **work_out)
{
    const ccoip_allreduce_args *a = &cmd->allreduce;
    const char *what = kind_name(a->kind);
    pcclWork_t *w = calloc(1, sizeof *w);
    if (w == NULL) return refuse(abort_on_error, a->kind, pcclSystemError);
    if (stage != NULL) w->stage = *stage; /* owned from here: freed by free_work_early or finish */
    pthread_mutex_lock(&c->mu);
    uint32_t slot = PCCL_MAX_ASYNC;
    for (uint32_t i = 0; i < PCCL_MAX_ASYNC; i++) {
        if (c->async[i].used && c->async[i].tag == a->tag) {
            pthread_mutex_unlock(&c->mu);
            free(w->stage.mem);
            free(w);
            pt_log(CCOIP_LOG_ERROR, "pccl", "%s: tag %llu is in flight already", what,
                   (unsigned long long)a->tag);
            return refuse(abort_on_error, a->kind, pcclInvalidUsage);
        }
        if (!c->async[i].used && slot == PCCL_MAX_ASYNC) slot = i;
    }
    if (slot == PCCL_MAX_ASYNC) {
        pthread_mutex_unlock(&c->mu);
        free(w->stage.mem);
        free(w);
        pt_log(CCOIP_LOG_ERROR, "pccl", "%s: %u operations are in flight already", what,
               (unsigned)PCCL_MAX_ASYNC);
        return refuse(abort_on_error, a->kind, pcclInvalidUsage);
    }
    uint32_t h = 0;
    const pcclResult_t r = pt_cmd_submit(c->d, cmd, (void *)(uintptr_t)send, recv, bytes, &h);
    if (r == pcclSuccess) {
        c->async[slot].used = true;
        c->async[slot].tag = a->tag;
        c->async[slot].handle = h;
    }
    pthread_mutex_unlock(&c->mu);
    if (r != pcclSuccess) {
        free(w->stage.mem);
        free(w);
        return refuse(abort_on_error, a->kind, r);
    }
    w->comm = c;
    w->d = c->d;
    w->handle = h;
    w->slot = slot;
    w->tag = a->tag;
    w->wait_ms = a->timeout_ms != 0 ? a->timeout_ms + PCCL_CANCEL_GRACE_MS : 0;
    w->abort_on_error = abort_on_error;
    w->what = what;
    w->info = *at;
    *work_out = w;
    return pcclSuccess;
}

static pcclResult_t coll_start(const pcclComm_t *comm, ccoip_coll_kind kind, const void *sendbuf,
                               void *recvbuf, size_t count, pcclDataType_t dtype, pcclRedOp_t op,
                               int root, const pcclCollectiveOptions_t *options,
                               const pccl_stage *stage, uint64_t require_epoch,
                               pcclWork_t **work_out);

pcclResult_t pccl_coll_start(const pcclComm_t *comm, ccoip_coll_kind kind, const void *sendbuf,
                             void *recvbuf, size_t count, pcclDataType_t dtype, pcclRedOp_t op,
                             int root, const pcclCollectiveOptions_t *options,
                             const pccl_stage *stage, uint64_t require_epoch, pcclWork_t **work_out)
{
    const pcclResult_t r = coll_start(comm, kind, sendbuf, recvbuf, count, dtype, op, root, options,
                                      stage, require_epoch, work_out);
    return r;
}

pcclResult_t pccl_coll_finish(pcclResult_t started, pcclWork_t *w, pcclCollectiveInfo_t *info_out)
{
    if (started != pcclSuccess) return started;
    const pcclResult_t r = pcclWorkWait(w, info_out);
    pcclWorkFree(w);
    return r;
}

/* What every start shares: clears *work_out, checks the communicator and reads the options (*o)
 * and whether a failure aborts the process (*abort_on_error). pcclSuccess, or the result the
 * call returns (an invalid option or work_out NULL: refused). */
static pcclResult_t start_prelude(const pcclComm_t *comm, ccoip_coll_kind kind,
                                  const pcclCollectiveOptions_t *options, pcclWork_t **work_out,
                                  pcclCollectiveOptions_t *o, bool *abort_on_error)
{
    if (work_out != NULL) *work_out = NULL;
    *abort_on_error = false;
    pcclResult_t r = pccl_comm_check(comm);
    if (r != pcclSuccess) return r;
    r = pccl_coll_options_read(options, o);
    *abort_on_error = comm->abort_on_error ||
                      (r == pcclSuccess && (o->flags & PCCL_COLLECTIVE_ABORT_ON_ERROR) != 0);
    if (r != pcclSuccess || work_out == NULL) {
        return refuse(*abort_on_error, kind, pcclInvalidArgument);
    }
    return pcclSuccess;
}

/* A group of fewer than two members (as PCCL 1.0: refused by the call, nothing started). */
static pcclResult_t too_few_peers(bool abort_on_error, ccoip_coll_kind kind, uint64_t tag,
                                  uint32_t world)
{
    pt_log(CCOIP_LOG_WARN, "pccl",
           "%s (tag %llu): the peer group has %u member(s); update the topology until others join",
           kind_name(kind), (unsigned long long)tag, (unsigned)world);
    return refuse(abort_on_error, kind, pcclTooFewPeers);
}

/* Frees a stage that no work object took over (the op could not start). */
static pcclResult_t stage_drop(const pccl_stage *stage, pcclResult_t r)
{
    if (stage != NULL) free(stage->mem);
    return r;
}

static pcclResult_t coll_start(const pcclComm_t *comm, ccoip_coll_kind kind, const void *sendbuf,
                               void *recvbuf, size_t count, pcclDataType_t dtype, pcclRedOp_t op,
                               int root, const pcclCollectiveOptions_t *options,
                               const pccl_stage *stage, uint64_t require_epoch,
                               pcclWork_t **work_out)
{
    pcclCollectiveOptions_t o;
    bool abort_on_error = false;
    pcclResult_t r = start_prelude(comm, kind, options, work_out, &o, &abort_on_error);
    if (r != pcclSuccess) return stage_drop(stage, r);
    pcclComm_t *c = (pcclComm_t *)(uintptr_t)comm;
    const bool reduces = ccoip_coll_reduces(kind);
    if (!ccoip_dtype_valid(dtype) || (reduces && !ccoip_reduce_supported(op, dtype))) {
        pt_log(CCOIP_LOG_ERROR, "pccl", "%s: unknown data type %d or an op it has no kernel for",
               kind_name(kind), (int)dtype);
        return stage_drop(stage, refuse(abort_on_error, kind, pcclInvalidArgument));
    }
    if (quant_check(kind, dtype, op, &o.quantization_options) != pcclSuccess) {
        return stage_drop(stage, refuse(abort_on_error, kind, pcclInvalidArgument));
    }
    pt_peer_info info;
    pt_peer_info_get(c->d, &info);
    if (info.world_size < 2) {
        return stage_drop(stage, too_few_peers(abort_on_error, kind, o.tag, info.world_size));
    }
    if (info.rank < 0 || (require_epoch != 0 && info.epoch != require_epoch)) {
        pt_log(CCOIP_LOG_WARN, "pccl",
               "%s (tag %llu): this peer is in no ring now, or another than the op's: update the "
               "topology",
               kind_name(kind), (unsigned long long)o.tag);
        return stage_drop(stage, refuse(abort_on_error, kind, pcclUpdateTopologyFailed));
    }
    const uint32_t world = info.world_size, rank = (uint32_t)info.rank;
    const bool rooted = ccoip_coll_rooted(kind);
    if (rooted && (root < 0 || (uint32_t)root >= world)) {
        pt_log(CCOIP_LOG_ERROR, "pccl", "%s: root %d is not a rank of the group (world %u)",
               kind_name(kind), root, (unsigned)world);
        return stage_drop(stage, refuse(abort_on_error, kind, pcclInvalidArgument));
    }
    const bool p2p = ccoip_coll_p2p(kind);
    if (p2p && (root < 0 || (uint32_t)root >= world || (uint32_t)root == rank)) {
        pt_log(CCOIP_LOG_ERROR, "pccl",
               "%s: peer %d is not another rank of the group (rank %u of %u)", kind_name(kind),
               root, (unsigned)rank, (unsigned)world);
        return stage_drop(stage, refuse(abort_on_error, kind, pcclInvalidArgument));
    }
    /* (a tuning round's root: the kind it tunes, < CCOIP_ALGO_KINDS: pccl_tune.c) */
    const uint32_t rt = rooted || p2p || kind == CCOIP_COLL_TUNE ? (uint32_t)root : 0u;
    const uint64_t es = ccoip_dtype_size(dtype);
    uint64_t sb = 0, rb = 0;
    if (ccoip_coll_sizes(kind, (uint64_t)count, es, world, rank, rt, &sb, &rb) != pcclSuccess) {
        pt_log(CCOIP_LOG_ERROR, "pccl", "%s: count %llu is too large", kind_name(kind),
               (unsigned long long)count);
        return stage_drop(stage, refuse(abort_on_error, kind, pcclInvalidArgument));
    }
    const uint8_t *send = sb > 0 ? sendbuf : NULL;
    uint8_t *recv = rb > 0 ? recvbuf : NULL;
    if ((sb > 0 && send == NULL) || (rb > 0 && recv == NULL)) {
        pt_log(CCOIP_LOG_ERROR, "pccl", "%s: a NULL buffer where %llu bytes are needed",
               kind_name(kind), (unsigned long long)(send == NULL ? sb : rb));
        return stage_drop(stage, refuse(abort_on_error, kind, pcclInvalidArgument));
    }
    bool bad = false;
    const bool in_place =
        in_place_of(kind, send, sb, recv, rb, rank, rt, (uint64_t)count * es, &bad);
    if (bad) {
        pt_log(CCOIP_LOG_ERROR, "pccl",
               "%s: send and receive buffers overlap other than in the in-place layout",
               kind_name(kind));
        return stage_drop(stage, refuse(abort_on_error, kind, pcclInvalidArgument));
    }
    ccoip_cmd cmd;
    memset(&cmd, 0, sizeof cmd);
    cmd.type = CCOIP_CMD_ALL_REDUCE;
    ccoip_allreduce_args *a = &cmd.allreduce;
    /* A send / recv goes by its pair's tag (§6.8.4): sends and receives of one tag between
     * other pairs, and a collective of that tag, are other ops. */
    a->tag = !p2p                      ? o.tag
             : kind == CCOIP_COLL_SEND ? ccoip_p2p_tag(o.tag, rank, rt)
                                       : ccoip_p2p_tag(o.tag, rt, rank);
    a->count = (uint64_t)count;
    a->dtype = dtype;
    a->op = reduces ? op : pcclSum;
    a->quant_algorithm = o.quantization_options.algorithm;
    a->quant_dtype =
        a->quant_algorithm != pcclQuantNone ? o.quantization_options.quantized_datatype : dtype;
    a->in_place = in_place;
    a->kind = kind;
    a->root = rt;
    a->pinned_epoch = info.epoch;
    a->world = world;
    a->send_bytes = sb;
    a->recv_bytes = rb;
    a->timeout_ms = o.timeout_ms != 0 ? o.timeout_ms : c->timeout_ms;
    a->premul = o.premul_scalar;
    a->algorithm = o.algorithm;
    const pcclCollectiveInfo_t at = {world, rank, info.epoch, 0, 0};
    return work_submit(c, &cmd, send, recv, sb > rb ? sb : rb, abort_on_error, &at, stage,
                       work_out);
}

/* After an op of the work ended: a composite's next phase starts (the work is running again),
 * or the composite ends with its result. */
static void work_chain_step(pcclWork_t *w)
{
    while (w->done && w->chain != NULL) {
        if (w->result != pcclSuccess) {
            chain_end(w);
            return;
        }
        pcclWork_t *n = NULL;
        const pcclResult_t r = w->chain(w->chain_ctx, w->comm, &n);
        if (r != pcclSuccess || n == NULL) {
            w->result = r;
            chain_end(w);
            if (r != pcclSuccess && w->abort_on_error) {
                pt_log(CCOIP_LOG_ERROR, "pccl", "%s (tag %llu) failed: %s (%d): aborting", w->what,
                       (unsigned long long)w->tag, result_text(r), (int)r);
                abort();
            }
            return;
        }
        /* The next phase's command continues this work object. */
        w->d = n->d;
        w->handle = n->handle;
        w->slot = n->slot;
        w->tag = n->tag;
        w->wait_ms = n->wait_ms;
        w->stage = n->stage;
        w->info = n->info;
        w->done = false;
        free(n);
    }
}

/* Waits for the work's current op at most timeout_ms (keep: 0 waits without bound and a
 * timeout leaves the op running; !keep: the communicator's rule, abandoning it). pcclTimeout
 * while it runs; else its result, composites followed phase after phase. */
static pcclResult_t work_progress(pcclWork_t *w, uint32_t timeout_ms, bool keep, bool poll_only)
{
    while (!w->done) {
        if (poll_only && !pt_cmd_poll(w->d, w->handle)) return pcclTimeout;
        pt_cmd_result res;
        memset(&res, 0, sizeof res);
        res.result = (pcclResult_t)-1; /* stays so while the command is not done */
        const pcclResult_t r = pt_cmd_wait(w->d, w->handle, timeout_ms, keep, &res);
        if (keep && r == pcclTimeout && res.result == (pcclResult_t)-1) return pcclTimeout;
        work_finish(w, r, &res);
        work_chain_step(w);
    }
    return w->result;
}

PCCL_EXPORT pcclResult_t pcclWorkWait(pcclWork_t *work, pcclCollectiveInfo_t *info_out)
{
    if (work == NULL) return pcclInvalidArgument;
    (void)work_progress(work, work->wait_ms, false, false);
    if (work->result == pcclSuccess && info_out != NULL) *info_out = work->info;
    return work->result;
}

PCCL_EXPORT pcclResult_t pcclWorkWaitTimeout(pcclWork_t *work, uint32_t timeout_ms,
                                             pcclCollectiveInfo_t *info_out)
{
    if (work == NULL) return pcclInvalidArgument;
    const pcclResult_t r = work_progress(work, timeout_ms, timeout_ms > 0, timeout_ms == 0);
    if (!work->done) return r; /* pcclTimeout: still running */
    if (work->result == pcclSuccess && info_out != NULL) *info_out = work->info;
    return work->result;
}

PCCL_EXPORT pcclResult_t pcclWorkIsCompleted(pcclWork_t *work, bool *completed_out)
{
    if (work == NULL || completed_out == NULL) return pcclInvalidArgument;
    (void)work_progress(work, 0, false, true); /* a finished phase may start the next one */
    *completed_out = work->done;
    return pcclSuccess;
}

PCCL_EXPORT void pcclWorkFree(pcclWork_t *work)
{
    if (work == NULL) return;
    if (!work->done) (void)pcclWorkWait(work, NULL);
    chain_end(work);
    free(work);
}

/* The blocking form: start, wait, free. */
static pcclResult_t coll_run(const pcclComm_t *comm, ccoip_coll_kind kind, const void *sendbuf,
                             void *recvbuf, size_t count, pcclDataType_t dtype, pcclRedOp_t op,
                             int root, const pcclCollectiveOptions_t *options,
                             pcclCollectiveInfo_t *info_out)
{
    pcclWork_t *w = NULL;
    const pcclResult_t r =
        coll_start(comm, kind, sendbuf, recvbuf, count, dtype, op, root, options, NULL, 0, &w);
    return pccl_coll_finish(r, w, info_out);
}

static pcclResult_t allreduce_start(const void *sendbuff, void *recvbuff,
                                    const pcclReduceDescriptor_t *descriptor,
                                    const pcclCollectiveOptions_t *options,
                                    const pcclComm_t *communicator, bool agreed,
                                    pcclWork_t **work_out)
{
    pcclCollectiveOptions_t o;
    bool abort_on_error = false;
    pcclResult_t r =
        start_prelude(communicator, CCOIP_COLL_ALL_REDUCE, options, work_out, &o, &abort_on_error);
    if (r != pcclSuccess) return r;
    if (quant_check(CCOIP_COLL_ALL_REDUCE, pcclFloat, pcclSum, &o.quantization_options) !=
        pcclSuccess) {
        return refuse(abort_on_error, CCOIP_COLL_ALL_REDUCE, pcclInvalidArgument);
    }
    pcclComm_t *c = (pcclComm_t *)(uintptr_t)communicator;
    ccoip_cmd cmd;
    memset(&cmd, 0, sizeof cmd);
    cmd.type = CCOIP_CMD_ALL_REDUCE;
    uint64_t bytes = 0;
    r = pccl_reduce_args(sendbuff, recvbuff, descriptor, &cmd.allreduce, &bytes);
    if (r != pcclSuccess) return refuse(abort_on_error, CCOIP_COLL_ALL_REDUCE, r);
    pt_peer_info info;
    pt_peer_info_get(c->d, &info);
    if (info.world_size < 2) {
        return too_few_peers(abort_on_error, CCOIP_COLL_ALL_REDUCE, cmd.allreduce.tag,
                             info.world_size);
    }
    cmd.allreduce.timeout_ms = o.timeout_ms != 0 ? o.timeout_ms : c->timeout_ms;
    cmd.allreduce.premul = o.premul_scalar;
    cmd.allreduce.algorithm = o.algorithm;
    cmd.allreduce.algo_agreed = agreed;
    const pcclCollectiveInfo_t at = {info.world_size, info.rank > 0 ? (uint32_t)info.rank : 0u,
                                     info.epoch, 0, 0};
    return work_submit(c, &cmd, sendbuff, recvbuff, bytes, abort_on_error, &at, NULL, work_out);
}

PCCL_EXPORT pcclResult_t pcclAllReduceExAsync(const void *sendbuff, void *recvbuff,
                                              const pcclReduceDescriptor_t *descriptor,
                                              const pcclCollectiveOptions_t *options,
                                              const pcclComm_t *communicator, pcclWork_t **work_out)
{
    return allreduce_start(sendbuff, recvbuff, descriptor, options, communicator, false, work_out);
}

PCCL_EXPORT pcclResult_t pcclAllReduceEx(const void *sendbuff, void *recvbuff,
                                         const pcclReduceDescriptor_t *descriptor,
                                         const pcclCollectiveOptions_t *options,
                                         const pcclComm_t *communicator,
                                         pcclCollectiveInfo_t *info_out)
{
    pcclWork_t *w = NULL;
    const pcclResult_t r =
        allreduce_start(sendbuff, recvbuff, descriptor, options, communicator, false, &w);
    return pccl_coll_finish(r, w, info_out);
}

pcclResult_t pccl_allreduce_agreed(const void *sendbuff, void *recvbuff,
                                   const pcclReduceDescriptor_t *descriptor,
                                   const pcclCollectiveOptions_t *options,
                                   const pcclComm_t *communicator)
{
    pcclWork_t *w = NULL;
    const pcclResult_t r =
        allreduce_start(sendbuff, recvbuff, descriptor, options, communicator, true, &w);
    return pccl_coll_finish(r, w, NULL);
}

PCCL_EXPORT pcclResult_t pcclBroadcast(void *buf, size_t count, pcclDataType_t dtype, int root,
                                       const pcclCollectiveOptions_t *options,
                                       const pcclComm_t *communicator,
                                       pcclCollectiveInfo_t *info_out)
{
    return coll_run(communicator, CCOIP_COLL_BROADCAST, buf, buf, count, dtype, pcclSum, root,
                    options, info_out);
}

PCCL_EXPORT pcclResult_t pcclBroadcastAsync(void *buf, size_t count, pcclDataType_t dtype, int root,
                                            const pcclCollectiveOptions_t *options,
                                            const pcclComm_t *communicator, pcclWork_t **work_out)
{
    return coll_start(communicator, CCOIP_COLL_BROADCAST, buf, buf, count, dtype, pcclSum, root,
                      options, NULL, 0, work_out);
}

PCCL_EXPORT pcclResult_t pcclReduce(const void *sendbuf, void *recvbuf, size_t count,
                                    pcclDataType_t dtype, pcclRedOp_t op, int root,
                                    const pcclCollectiveOptions_t *options,
                                    const pcclComm_t *communicator, pcclCollectiveInfo_t *info_out)
{
    return coll_run(communicator, CCOIP_COLL_REDUCE, sendbuf, recvbuf, count, dtype, op, root,
                    options, info_out);
}

PCCL_EXPORT pcclResult_t pcclReduceAsync(const void *sendbuf, void *recvbuf, size_t count,
                                         pcclDataType_t dtype, pcclRedOp_t op, int root,
                                         const pcclCollectiveOptions_t *options,
                                         const pcclComm_t *communicator, pcclWork_t **work_out)
{
    return coll_start(communicator, CCOIP_COLL_REDUCE, sendbuf, recvbuf, count, dtype, op, root,
                      options, NULL, 0, work_out);
}

PCCL_EXPORT pcclResult_t pcclAllGather(const void *sendbuf, void *recvbuf, size_t count,
                                       pcclDataType_t dtype, const pcclCollectiveOptions_t *options,
                                       const pcclComm_t *communicator,
                                       pcclCollectiveInfo_t *info_out)
{
    return coll_run(communicator, CCOIP_COLL_ALL_GATHER, sendbuf, recvbuf, count, dtype, pcclSum, 0,
                    options, info_out);
}

PCCL_EXPORT pcclResult_t pcclAllGatherAsync(const void *sendbuf, void *recvbuf, size_t count,
                                            pcclDataType_t dtype,
                                            const pcclCollectiveOptions_t *options,
                                            const pcclComm_t *communicator, pcclWork_t **work_out)
{
    return coll_start(communicator, CCOIP_COLL_ALL_GATHER, sendbuf, recvbuf, count, dtype, pcclSum,
                      0, options, NULL, 0, work_out);
}

PCCL_EXPORT pcclResult_t pcclReduceScatter(const void *sendbuf, void *recvbuf, size_t count,
                                           pcclDataType_t dtype, pcclRedOp_t op,
                                           const pcclCollectiveOptions_t *options,
                                           const pcclComm_t *communicator,
                                           pcclCollectiveInfo_t *info_out)
{
    return coll_run(communicator, CCOIP_COLL_REDUCE_SCATTER, sendbuf, recvbuf, count, dtype, op, 0,
                    options, info_out);
}

PCCL_EXPORT pcclResult_t pcclReduceScatterAsync(const void *sendbuf, void *recvbuf, size_t count,
                                                pcclDataType_t dtype, pcclRedOp_t op,
                                                const pcclCollectiveOptions_t *options,
                                                const pcclComm_t *communicator,
                                                pcclWork_t **work_out)
{
    return coll_start(communicator, CCOIP_COLL_REDUCE_SCATTER, sendbuf, recvbuf, count, dtype, op,
                      0, options, NULL, 0, work_out);
}

PCCL_EXPORT pcclResult_t pcclAllToAll(const void *sendbuf, void *recvbuf, size_t count,
                                      pcclDataType_t dtype, const pcclCollectiveOptions_t *options,
                                      const pcclComm_t *communicator,
                                      pcclCollectiveInfo_t *info_out)
{
    return coll_run(communicator, CCOIP_COLL_ALL_TO_ALL, sendbuf, recvbuf, count, dtype, pcclSum, 0,
                    options, info_out);
}

PCCL_EXPORT pcclResult_t pcclAllToAllAsync(const void *sendbuf, void *recvbuf, size_t count,
                                           pcclDataType_t dtype,
                                           const pcclCollectiveOptions_t *options,
                                           const pcclComm_t *communicator, pcclWork_t **work_out)
{
    return coll_start(communicator, CCOIP_COLL_ALL_TO_ALL, sendbuf, recvbuf, count, dtype, pcclSum,
                      0, options, NULL, 0, work_out);
}

PCCL_EXPORT pcclResult_t pcclGather(const void *sendbuf, void *recvbuf, size_t count,
                                    pcclDataType_t dtype, int root,
                                    const pcclCollectiveOptions_t *options,
                                    const pcclComm_t *communicator, pcclCollectiveInfo_t *info_out)
{
    return coll_run(communicator, CCOIP_COLL_GATHER, sendbuf, recvbuf, count, dtype, pcclSum, root,
                    options, info_out);
}

PCCL_EXPORT pcclResult_t pcclGatherAsync(const void *sendbuf, void *recvbuf, size_t count,
                                         pcclDataType_t dtype, int root,
                                         const pcclCollectiveOptions_t *options,
                                         const pcclComm_t *communicator, pcclWork_t **work_out)
{
    return coll_start(communicator, CCOIP_COLL_GATHER, sendbuf, recvbuf, count, dtype, pcclSum,
                      root, options, NULL, 0, work_out);
}

PCCL_EXPORT pcclResult_t pcclScatter(const void *sendbuf, void *recvbuf, size_t count,
                                     pcclDataType_t dtype, int root,
                                     const pcclCollectiveOptions_t *options,
                                     const pcclComm_t *communicator, pcclCollectiveInfo_t *info_out)
{
    return coll_run(communicator, CCOIP_COLL_SCATTER, sendbuf, recvbuf, count, dtype, pcclSum, root,
                    options, info_out);
}

PCCL_EXPORT pcclResult_t pcclScatterAsync(const void *sendbuf, void *recvbuf, size_t count,
                                          pcclDataType_t dtype, int root,
                                          const pcclCollectiveOptions_t *options,
                                          const pcclComm_t *communicator, pcclWork_t **work_out)
{
    return coll_start(communicator, CCOIP_COLL_SCATTER, sendbuf, recvbuf, count, dtype, pcclSum,
                      root, options, NULL, 0, work_out);
}

PCCL_EXPORT pcclResult_t pcclBarrier(const pcclCollectiveOptions_t *options,
                                     const pcclComm_t *communicator, pcclCollectiveInfo_t *info_out)
{
    return coll_run(communicator, CCOIP_COLL_BARRIER, NULL, NULL, 0, pcclUint8, pcclSum, 0, options,
                    info_out);
}

PCCL_EXPORT pcclResult_t pcclBarrierAsync(const pcclCollectiveOptions_t *options,
                                          const pcclComm_t *communicator, pcclWork_t **work_out)
{
    return coll_start(communicator, CCOIP_COLL_BARRIER, NULL, NULL, 0, pcclUint8, pcclSum, 0,
                      options, NULL, 0, work_out);
}
