/*
 * pt_kernel.c — the kernel worker: REDUCE, COPY, FINALIZE, (DE)QUANTIZE,
 * GATHER_REDUCE and HASH in queue order on one thread per driver, in 1 MiB
 * slices that check for cancellation; small ones inline on the driver thread.
 */
#define _GNU_SOURCE
#include "pt_internal.h"

/* Runs a job's kernel (prepared by the core's executor): REDUCE, FINALIZE and COPY in slices
 * of about PT_SLICE_BYTES, checking for cancellation between them; the others whole. */
static pcclResult_t kernel_exec(pt_driver *d, pt_job *j, ccoip_quant_meta *qout, uint64_t *hash)
{
    if (j->skip) return j->skip_result;
    ccoip_kernel *k = &j->k;
    uint64_t unit_bytes = 0;
    const uint64_t units = ccoip_kernel_units(k, &unit_bytes);
    pcclResult_t r = pcclSuccess;
    if (unit_bytes == 0) {
        r = ccoip_kernel_run(k);
    } else {
        const uint64_t per = PT_SLICE_BYTES / unit_bytes > 0 ? PT_SLICE_BYTES / unit_bytes : 1;
        for (uint64_t i = 0; i < units && r == pcclSuccess; i += per) {
            pthread_mutex_lock(&d->kmu);
            const bool cancel = d->kcur_cancel;
            pthread_mutex_unlock(&d->kmu);
            if (cancel) return pcclSuccess;
            const uint64_t n = units - i < per ? units - i : per;
            r = ccoip_kernel_run_part(k, i, n);
            if (k->act.type == CCOIP_ACT_COPY) {
                atomic_fetch_add_explicit(&d->copied_bytes, n, memory_order_relaxed);
            }
        }
    }
    *qout = k->quant_out;
    *hash = k->hash;
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
    const ccoip_action *a = &j->k.act;
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
