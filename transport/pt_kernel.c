/*
 * pt_kernel.c — the kernel worker: REDUCE, COPY, FINALIZE, (DE)QUANTIZE,
 * GATHER_REDUCE and HASH in queue order on one thread per driver, in 1 MiB
 * slices that check for cancellation; small ones inline on the driver thread.
 */
#define _GNU_SOURCE
#include "ccoip_hash.h"
#include "ccoip_quant.h"
#include "ccoip_reduce.h"
#include "pt_internal.h"

static pcclResult_t kernel_exec(pt_driver *d, pt_job *j, ccoip_quant_meta *qout, uint64_t *hash)
{
    const ccoip_action *a = &j->act;
    const uint64_t esz = ccoip_dtype_valid(a->dtype) ? ccoip_dtype_size(a->dtype) : 0;
    pcclResult_t r = pcclSuccess;
    if (j->skip) return j->skip_result;
    switch (a->type) {
    case CCOIP_ACT_REDUCE:
    case CCOIP_ACT_FINALIZE: {
        if (esz == 0) return pcclInvalidArgument;
        const uint64_t per = PT_SLICE_BYTES / esz > 0 ? PT_SLICE_BYTES / esz : 1;
        for (uint64_t i = 0; i < a->count && r == pcclSuccess; i += per) {
            pthread_mutex_lock(&d->kmu);
            const bool cancel = d->kcur_cancel;
            pthread_mutex_unlock(&d->kmu);
            if (cancel) return pcclSuccess;
            const uint64_t n = a->count - i < per ? a->count - i : per;
            if (a->type == CCOIP_ACT_REDUCE && j->base != NULL) {
                r = ccoip_reduce(a->red_op, a->dtype, j->dst + i * esz, j->base + i * esz,
                                 j->src + i * esz, n);
            } else if (a->type == CCOIP_ACT_REDUCE) {
                r = ccoip_reduce_inplace(a->red_op, a->dtype, j->dst + i * esz, j->src + i * esz,
                                         n);
            } else {
                r = ccoip_reduce_finalize_avg(a->dtype, j->dst + i * esz, n, a->divisor);
            }
        }
        break;
    }
    case CCOIP_ACT_COPY:
        for (uint64_t i = 0; i < a->src.length; i += PT_SLICE_BYTES) {
            pthread_mutex_lock(&d->kmu);
            const bool cancel = d->kcur_cancel;
            pthread_mutex_unlock(&d->kmu);
            if (cancel) return pcclSuccess;
            const uint64_t n =
                a->src.length - i < PT_SLICE_BYTES ? a->src.length - i : PT_SLICE_BYTES;
            memmove(j->dst + i, j->src + i, (size_t)n);
            atomic_fetch_add_explicit(&d->copied_bytes, n, memory_order_relaxed);
        }
        break;
    case CCOIP_ACT_QUANTIZE: {
        ccoip_quant_meta meta;
        memset(&meta, 0, sizeof meta);
        r = ccoip_quant_compute_meta(a->quant.algorithm, a->quant.src_type, a->quant.quant_type,
                                     j->src, a->count, &meta);
        if (r == pcclSuccess) r = ccoip_quantize(&meta, j->dst, j->src, a->count);
        *qout = meta;
        break;
    }
    case CCOIP_ACT_DEQUANTIZE:
        if (a->reduce) {
            r = ccoip_dequantize_reduce(&a->quant, a->red_op, j->dst, j->src, a->count);
        } else {
            r = ccoip_dequantize(&a->quant, j->dst, j->src, a->count);
        }
        break;
    case CCOIP_ACT_GATHER_REDUCE:
        if (!ccoip_action_gather_ok(a)) return pcclInvalidArgument;
        r = ccoip_reduce_gather(a->red_op, a->dtype, j->dst, j->base, j->src, a->chunk, a->divisor,
                                a->count);
        break;
    case CCOIP_ACT_HASH: {
        if (esz == 0 || a->count > a->src.length / esz) return pcclInvalidArgument;
        ccoip_hash_entry e;
        e.name = j->name;
        e.data = j->src;
        e.count = a->count;
        e.dtype = a->dtype;
        r = ccoip_hash_tensor(&e, hash);
        break;
    }
    default:
        r = pcclInternalError;
        break;
    }
    return r;
}

static void *kworker_main(void *arg)
{
    pt_driver *d = arg;
    pthread_mutex_lock(&d->kmu);
    for (;;) {
        while (d->kq_head == NULL && !d->kstop)
            pthread_cond_wait(&d->kcv, &d->kmu);
        if (d->kstop) break;
        pt_job *j = d->kq_head;
        d->kq_head = j->next;
        if (d->kq_head == NULL) d->kq_tail = NULL;
        d->kcur = j;
        d->kcur_cancel = false;
        pthread_mutex_unlock(&d->kmu);
        ccoip_quant_meta qout;
        memset(&qout, 0, sizeof qout);
        uint64_t hash = 0;
        const pcclResult_t r = kernel_exec(d, j, &qout, &hash);
        pthread_mutex_lock(&d->kmu);
        const bool cancelled = d->kcur_cancel;
        d->kcur = NULL;
        pthread_cond_broadcast(&d->kcv_idle);
        pthread_mutex_unlock(&d->kmu);
        if (!cancelled) {
            ccoip_event ev;
            memset(&ev, 0, sizeof ev);
            ev.type = CCOIP_EV_KERNEL_DONE;
            ev.done.io_id = j->io_id;
            ev.done.result = r;
            ev.done.quant_out = qout;
            ev.done.hash = hash;
            pt_q_core(d, &ev);
        }
        free(j);
        pthread_mutex_lock(&d->kmu);
    }
    pthread_mutex_unlock(&d->kmu);
    return NULL;
}

/* Removes queued kernels of slot and waits until the running one (if of slot) stopped. */
void pt_kernels_cancel(pt_driver *d, uint32_t slot)
{
    pthread_mutex_lock(&d->kmu);
    pt_job **pp = &d->kq_head;
    d->kq_tail = NULL;
    while (*pp != NULL) {
        pt_job *j = *pp;
        if (j->slot == slot) {
            *pp = j->next;
            free(j);
        } else {
            d->kq_tail = j;
            pp = &j->next;
        }
    }
    if (d->kcur != NULL && d->kcur->slot == slot) {
        d->kcur_cancel = true;
        while (d->kcur != NULL)
            pthread_cond_wait(&d->kcv_idle, &d->kmu);
    }
    pthread_mutex_unlock(&d->kmu);
}

pcclResult_t pt_kernel_start(pt_driver *d)
{
    if (pthread_create(&d->kthread, NULL, kworker_main, d) != 0) return pcclSystemError;
    d->kstarted = true;
    return pcclSuccess;
}

void pt_kernel_stop(pt_driver *d)
{
    pthread_mutex_lock(&d->kmu);
    d->kstop = true;
    pthread_cond_broadcast(&d->kcv);
    pthread_mutex_unlock(&d->kmu);
    if (d->kstarted) pthread_join(d->kthread, NULL);
    d->kstarted = false;
}

void pt_kernel_submit(pt_driver *d, pt_job *j)
{
    const ccoip_action *a = &j->act;
    pthread_mutex_lock(&d->kmu);
    const uint64_t kbytes = a->src.length > a->dst.length ? a->src.length : a->dst.length;
    if (d->kq_head == NULL && d->kcur == NULL && kbytes <= PT_INLINE_BYTES) {
        /* Small, and nothing of any slot queued before it: run it here, in queue order. */
        d->kcur_cancel = false;
        pthread_mutex_unlock(&d->kmu);
        ccoip_event ev;
        memset(&ev, 0, sizeof ev);
        ev.type = CCOIP_EV_KERNEL_DONE;
        ev.done.io_id = j->io_id;
        ev.done.result = kernel_exec(d, j, &ev.done.quant_out, &ev.done.hash);
        free(j);
        pt_q_core(d, &ev);
        return;
    }
    if (d->kq_tail != NULL) {
        d->kq_tail->next = j;
    } else {
        d->kq_head = j;
    }
    d->kq_tail = j;
    pthread_cond_signal(&d->kcv);
    pthread_mutex_unlock(&d->kmu);
}
