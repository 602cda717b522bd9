/*
 * pt_cmd.c — commands: application threads post SUBMIT events (or step them
 * themselves, the baton) and wait on a per-command slot; peer and master
 * snapshots.
 */
#define _GNU_SOURCE
#include <sched.h>
#include <time.h>

#include "pt_internal.h"

/* A command leaves flight (mu held): no longer a reason to spin. */
void pt_cmd_spin_end(pt_driver *d, pt_cmd *c)
{
    if (!c->spin) return;
    c->spin = false;
    d->spin_cmds--;
}

void pt_cmd_release(pt_cmd *c)
{
    free(c->tensors);
    free(c->tensor_bytes);
    free(c->keys_mem);
    c->keys_mem = NULL;
    c->tensors = NULL;
    c->tensor_bytes = NULL;
    c->ntensors = 0;
    c->state = CMD_FREE;
}

void pt_cmds_fail_all(pt_driver *d)
{
    for (uint32_t i = 0; i < PT_MAX_CMDS; i++) {
        pt_cmd *c = &d->cmds[i];
        if (c->state != CMD_FREE) pt_cmd_spin_end(d, c);
        if (c->state == CMD_POSTED) {
            c->res.result = pcclMasterConnectionFailed;
            c->state = CMD_DONE;
        } else if (c->state == CMD_ABANDONED) {
            pt_cmd_release(c);
        }
    }
}

static pcclResult_t cmd_submit(pt_driver *d, ccoip_cmd *cmd, void *sendbuf, void *recvbuf,
                               uint64_t bytes, uint8_t **tensors, uint64_t *tensor_bytes,
                               uint32_t ntensors, void *keys_mem, uint32_t *handle)
{
    pthread_mutex_lock(&d->mu);
    if (d->stop || !d->running) {
        pthread_mutex_unlock(&d->mu);
        free(tensors);
        free(tensor_bytes);
        free(keys_mem);
        return pcclInvalidUsage;
    }
    uint32_t idx = PT_MAX_CMDS;
    for (uint32_t i = 0; i < PT_MAX_CMDS; i++) {
        if (d->cmds[i].state == CMD_FREE) {
            idx = i;
            break;
        }
    }
    if (idx == PT_MAX_CMDS) {
        pthread_mutex_unlock(&d->mu);
        free(tensors);
        free(tensor_bytes);
        free(keys_mem);
        return pcclInvalidUsage;
    }
    pt_cmd *c = &d->cmds[idx];
    memset(c, 0, sizeof *c);
    c->state = CMD_POSTED;
    c->cmd_id = d->next_cmd_id++;
    c->sendbuf = sendbuf;
    c->recvbuf = recvbuf;
    c->bytes = bytes;
    c->tensors = tensors;
    c->tensor_bytes = tensor_bytes;
    c->ntensors = ntensors;
    c->keys_mem = keys_mem;
    c->spin = d->spin_ns > 0 && cmd->type == CCOIP_CMD_ALL_REDUCE && bytes <= PT_SPIN_MAX_BYTES;
    if (c->spin) d->spin_cmds++;
    cmd->cmd_id = c->cmd_id;
    ccoip_event ev;
    memset(&ev, 0, sizeof ev);
    ev.type = CCOIP_EV_SUBMIT;
    ev.cmd = *cmd;
    *handle = idx;
    if (d->epfd >= 0 && d->api_submit && cmd->type == CCOIP_CMD_ALL_REDUCE && d->core_started &&
        !d->busy && d->q_head == NULL) {
        /* Issue 7: the calling thread takes the baton and steps its SUBMIT itself (initiate
         * and the first ring sends go out from here); nothing queued is overtaken. */
        d->busy = true;
        pthread_mutex_unlock(&d->mu);
        pt_core_feed(d, &ev);
        pthread_mutex_lock(&d->mu);
        d->busy = false;
        pthread_cond_broadcast(&d->cv_baton);
        pthread_mutex_unlock(&d->mu);
        return pcclSuccess;
    }
    pthread_mutex_unlock(&d->mu);
    pt_q_core(d, &ev);
    return pcclSuccess;
}

pcclResult_t pt_cmd_submit(pt_driver *d, ccoip_cmd *cmd, void *sendbuf, void *recvbuf,
                           uint64_t bytes, uint32_t *handle)
{
    if (d == NULL || cmd == NULL || handle == NULL || d->is_master) return pcclInvalidArgument;
    return cmd_submit(d, cmd, sendbuf, recvbuf, bytes, NULL, NULL, 0, NULL, handle);
}

pcclResult_t pt_cmd_submit_sync(pt_driver *d, ccoip_cmd *cmd, void *const *tensors,
                                const uint64_t *tensor_bytes, uint32_t n, uint32_t *handle)
{
    if (d == NULL || cmd == NULL || handle == NULL || d->is_master) return pcclInvalidArgument;
    if (n > 0 && (tensors == NULL || tensor_bytes == NULL)) return pcclInvalidArgument;
    const uint32_t nk = cmd->sync.num_keys;
    if (nk > 0 && cmd->sync.keys == NULL) return pcclInvalidArgument;
    uint8_t **t = NULL;
    uint64_t *b = NULL;
    /* The SUBMIT event is stepped later on the driver thread: it points at
     * copies of the keys and names that live as long as the command. */
    ccoip_state_key *keys = NULL;
    if (nk > 0) {
        keys = calloc(nk, sizeof *keys + CCOIP_STATE_NAME_MAX);
        if (keys == NULL) return pcclSystemError;
        char *names = (char *)(keys + nk);
        for (uint32_t i = 0; i < nk; i++) {
            keys[i] = cmd->sync.keys[i];
            char *nm = names + (size_t)i * CCOIP_STATE_NAME_MAX;
            if (cmd->sync.keys[i].name != NULL) {
                snprintf(nm, CCOIP_STATE_NAME_MAX, "%s", cmd->sync.keys[i].name);
                keys[i].name = nm;
            }
        }
    }
    if (n > 0) {
        t = malloc(n * sizeof *t);
        b = malloc(n * sizeof *b);
        if (t == NULL || b == NULL) {
            free(t);
            free(b);
            free(keys);
            return pcclSystemError;
        }
        for (uint32_t i = 0; i < n; i++) {
            t[i] = tensors[i];
            b[i] = tensor_bytes[i];
        }
    }
    ccoip_cmd copy = *cmd;
    copy.sync.keys = keys;
    const pcclResult_t r = cmd_submit(d, &copy, NULL, NULL, 0, t, b, n, keys, handle);
    cmd->cmd_id = copy.cmd_id;
    return r;
}

pcclResult_t pt_cmd_wait(pt_driver *d, uint32_t handle, uint32_t timeout_ms, bool keep,
                         pt_cmd_result *out)
{
    if (d == NULL || handle >= PT_MAX_CMDS) return pcclInvalidArgument;
    const uint64_t dl = timeout_ms > 0 ? pt_now_ns() + (uint64_t)timeout_ms * 1000000u : 0;
    pthread_mutex_lock(&d->mu);
    pt_cmd *c = &d->cmds[handle];
    if (c->state == CMD_POSTED && c->spin) {
        /* Spin-then-sleep (see wait_work): poll for a NOTIFY before sleeping. */
        const uint64_t seen = atomic_load_explicit(&d->notified, memory_order_acquire);
        uint64_t end = pt_now_ns() + d->spin_ns;
        if (dl != 0 && dl < end) end = dl;
        pthread_mutex_unlock(&d->mu);
        while (atomic_load_explicit(&d->notified, memory_order_acquire) == seen &&
               pt_now_ns() < end)
            sched_yield();
        pthread_mutex_lock(&d->mu);
    }
    while (c->state == CMD_POSTED) {
        if (dl == 0) {
            pthread_cond_wait(&d->cv_cmd, &d->mu);
            continue;
        }
        if (pt_now_ns() >= dl) break;
        struct timespec ts;
        ts.tv_sec = (time_t)(dl / 1000000000u);
        ts.tv_nsec = (long)(dl % 1000000000u);
        pthread_cond_timedwait(&d->cv_cmd, &d->mu, &ts);
    }
    pcclResult_t r;
    if (c->state == CMD_DONE) {
        r = c->res.result;
        if (out != NULL) *out = c->res;
        pt_cmd_release(c);
    } else {
        r = pcclTimeout;
        if (!keep && c->state == CMD_POSTED) c->state = CMD_ABANDONED;
    }
    pthread_mutex_unlock(&d->mu);
    return r;
}

void pt_peer_info_get(pt_driver *d, pt_peer_info *out)
{
    pthread_mutex_lock(&d->mu);
    *out = d->pinfo;
    pthread_mutex_unlock(&d->mu);
}

void pt_master_info_get(pt_driver *d, pt_master_info *out)
{
    pthread_mutex_lock(&d->mu);
    *out = d->minfo;
    pthread_mutex_unlock(&d->mu);
}
