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

/* ------------------------------------------------------------------------ */
/* Abandoning a command (pcclTimeout): its buffers are the caller's again    */
/* ------------------------------------------------------------------------ */

/* A range of the caller's memory and the shadow copy that replaces it. */
typedef struct pt_range {
    uint8_t *u;
    uint64_t n;
    uint8_t *s;
} pt_range;

typedef struct pt_ranges {
    pt_range *r;
    uint32_t n;
} pt_ranges;

static uint8_t *xlate(const pt_ranges *rs, const uint8_t *p)
{
    for (uint32_t i = 0; p != NULL && i < rs->n; i++) {
        if (p >= rs->r[i].u && p < rs->r[i].u + rs->r[i].n) return rs->r[i].s + (p - rs->r[i].u);
    }
    return (uint8_t *)p;
}

static bool in_ranges(const pt_ranges *rs, const uint8_t *p)
{
    return xlate(rs, p) != p;
}

static bool job_touches(const pt_ranges *rs, const pt_job *j)
{
    return in_ranges(rs, j->k.dst) || in_ranges(rs, j->k.src) || in_ranges(rs, j->k.base);
}

/* Moves everything of the driver that points into the caller's ranges onto their shadows
 * (baton held: the connections, op slots and queued kernels are ours). What cannot be moved
 * because a thread is using it right now stops: a send or a payload receive under way on it
 * closes its connection (as CANCEL does, rule 8; the core hears CONN_CLOSED), a running
 * kernel on it is waited for. Then the caller's bytes are copied into the shadows, so the op
 * goes on with exactly what it had (the other peers' results are unaffected). */
static void unbind(pt_driver *d, pt_cmd *cmd, const pt_ranges *rs)
{
    for (uint32_t ci = 0; ci < d->nconns; ci++) {
        pt_conn *c = d->conns[ci];
        bool brk = false;
        for (pt_sitem *it = c->sq_head; it != NULL; it = it->next) {
            if (!it->ring || !in_ranges(rs, it->payload)) continue;
            if (it == c->sq_head && c->send_busy) {
                brk = true;
            } else {
                it->payload = xlate(rs, it->payload);
            }
        }
        if (c->data && c->rd == RD_PAYLOAD && !c->rd_ctrl) {
            const bool fuse =
                c->rd_fused && (in_ranges(rs, c->rd_fuse.target) || in_ranges(rs, c->rd_fuse.base));
            if ((fuse || in_ranges(rs, c->rd_dst)) && c->recv_busy) {
                brk = true;
            } else {
                c->rd_dst = xlate(rs, c->rd_dst);
                c->rd_fuse.target = xlate(rs, c->rd_fuse.target);
                c->rd_fuse.base = xlate(rs, c->rd_fuse.base);
            }
        }
        if (brk) {
            pt_log(CCOIP_LOG_INFO, d->who,
                   "connection %" PRIu64 ": a timed-out call's buffer is in use on it: closing it",
                   c->id);
            pt_conn_close(d, c, true); /* when it returns, no thread touches the buffer */
            ci = (uint32_t)-1;
        }
    }
    pthread_mutex_lock(&d->kmu);
    for (pt_job *j = d->kq_head; j != NULL; j = j->next) {
        j->k.dst = xlate(rs, j->k.dst);
        j->k.src = xlate(rs, j->k.src);
        j->k.base = xlate(rs, j->k.base);
    }
    /* The running kernel finishes (queue jobs after it are moved already). */
    while (d->kcur != NULL && job_touches(rs, d->kcur))
        pthread_cond_wait(&d->kcv_idle, &d->kmu);
    pthread_mutex_unlock(&d->kmu);
    for (uint32_t i = 0; i < rs->n; i++)
        memcpy(rs->r[i].s, rs->r[i].u, (size_t)rs->r[i].n);
    for (uint32_t s = 0; s < PT_MAX_SLOTS; s++) {
        ccoip_exec_slot *xs = &d->xslots[s];
        if (!xs->used || xs->cmd_id != cmd->cmd_id) continue;
        xs->send = xlate(rs, xs->send);
        xs->recv = xlate(rs, xs->recv);
        pt_slot *o = &d->slots[s];
        for (uint32_t t = 0; o->tensors != NULL && t < xs->ntensors; t++)
            o->tensors[t] = xlate(rs, o->tensors[t]);
    }
    pthread_mutex_lock(&d->mu);
    cmd->sendbuf = xlate(rs, cmd->sendbuf);
    cmd->recvbuf = xlate(rs, cmd->recvbuf);
    for (uint32_t t = 0; cmd->tensors != NULL && t < cmd->ntensors; t++)
        cmd->tensors[t] = xlate(rs, cmd->tensors[t]);
    pthread_mutex_unlock(&d->mu);
}

/* The ranges of a command's buffers (send, recv, tensors; the same pointer once) and one block
 * for their shadows. False when out of memory; true with rs->n == 0 when there is nothing. */
static bool ranges_of(const pt_cmd *c, pt_ranges *rs, uint8_t **mem)
{
    rs->n = 0;
    *mem = NULL;
    const uint32_t cap = 2u + c->ntensors;
    rs->r = calloc(cap, sizeof *rs->r);
    if (rs->r == NULL) return false;
    uint64_t total = 0;
    uint8_t *const bufs[2] = {c->sendbuf, c->recvbuf};
    for (uint32_t i = 0; i < cap; i++) {
        uint8_t *u = i < 2u ? bufs[i] : c->tensors[i - 2u];
        const uint64_t n =
            i == 0 ? c->send_bytes : (i == 1u ? c->recv_bytes : c->tensor_bytes[i - 2u]);
        if (u == NULL || n == 0) continue;
        /* The same buffer once; the send and receive buffers of an in-place kind alias (one
         * holds the other, the API checked it): the larger range, once. */
        bool dup = false;
        for (uint32_t k = 0; k < rs->n; k++) {
            uint8_t *ku = rs->r[k].u;
            if (u >= ku && u + n <= ku + rs->r[k].n) {
                dup = true;
            } else if (ku >= u && ku + rs->r[k].n <= u + n) {
                total -= rs->r[k].n;
                rs->r[k].u = u;
                rs->r[k].n = n;
                total += n;
                dup = true;
            }
        }
        if (dup) continue;
        rs->r[rs->n].u = u;
        rs->r[rs->n].n = n;
        rs->n++;
        total += n;
    }
    if (rs->n == 0) return true;
    *mem = malloc((size_t)total);
    if (*mem == NULL) return false;
    uint64_t off = 0;
    for (uint32_t k = 0; k < rs->n; k++) {
        rs->r[k].s = *mem + off;
        off += rs->r[k].n;
    }
    return true;
}

void pt_shadows_gc(pt_driver *d, uint64_t cmd_id)
{
    for (uint32_t i = 0; i < PT_MAX_CMDS; i++) {
        if (d->cmds[i].state != CMD_FREE && d->cmds[i].cmd_id == cmd_id) return;
    }
    for (uint32_t s = 0; s < PT_MAX_SLOTS; s++) {
        if (d->xslots[s].used && d->xslots[s].cmd_id == cmd_id) return;
    }
    for (pt_shadow **pp = &d->shadows; *pp != NULL;) {
        pt_shadow *sh = *pp;
        if (sh->cmd_id == cmd_id) {
            *pp = sh->next;
            free(sh->mem);
            free(sh);
        } else {
            pp = &sh->next;
        }
    }
}

void pt_shadows_free_all(pt_driver *d)
{
    while (d->shadows != NULL) {
        pt_shadow *sh = d->shadows;
        d->shadows = sh->next;
        free(sh->mem);
        free(sh);
    }
}

/* The call waiting for c timed out (mu held on entry and return): from now on no thread of the
 * library may touch the caller's buffers. Takes the baton (waiting for the thread that holds
 * it to finish its unit of work, at most PT_ABANDON_WAIT_MS), moves the op onto shadow copies
 * of the buffers (unbind) and marks c abandoned. Returns pcclTimeout, or c's own result when
 * it completed meanwhile (*done set; the caller reports it). */
static pcclResult_t cmd_abandon(pt_driver *d, pt_cmd *c, bool *done)
{
    *done = false;
    const uint64_t dl = pt_now_ns() + (uint64_t)PT_ABANDON_WAIT_MS * 1000000u;
    for (;;) {
        if (c->state != CMD_POSTED) {
            *done = c->state == CMD_DONE;
            return *done ? c->res.result : pcclTimeout;
        }
        if (!d->running) break; /* stopped: every connection and kernel was stopped first */
        if (!d->stop && !d->busy) break;
        if (pt_now_ns() >= dl) {
            pt_log(CCOIP_LOG_ERROR, d->who,
                   "command %" PRIu64 " timed out and the driver stayed busy for %u ms: its "
                   "buffers may still be used",
                   c->cmd_id, PT_ABANDON_WAIT_MS);
            c->state = CMD_ABANDONED;
            return pcclTimeout;
        }
        struct timespec ts;
        const uint64_t t = pt_now_ns() + 10000000u; /* re-check every 10 ms */
        ts.tv_sec = (time_t)(t / 1000000000u);
        ts.tv_nsec = (long)(t % 1000000000u);
        pthread_cond_timedwait(d->stop ? &d->cv_cmd : &d->cv_baton, &d->mu, &ts);
    }
    if (!d->running) {
        c->state = CMD_ABANDONED;
        return pcclTimeout;
    }
    d->busy = true;
    pthread_mutex_unlock(&d->mu);
    pt_ranges rs = {NULL, 0};
    uint8_t *mem = NULL;
    pt_shadow *sh = calloc(1, sizeof *sh);
    const bool ok = sh != NULL && ranges_of(c, &rs, &mem);
    if (ok && rs.n > 0) {
        unbind(d, c, &rs);
        sh->cmd_id = c->cmd_id;
        sh->mem = mem;
        sh->next = d->shadows;
        d->shadows = sh;
        sh = NULL;
        mem = NULL;
    }
    free(sh);
    free(mem);
    free(rs.r);
    pthread_mutex_lock(&d->mu);
    d->busy = false;
    pthread_cond_broadcast(&d->cv_baton);
    if (!ok) {
        pt_log(CCOIP_LOG_ERROR, d->who,
               "command %" PRIu64 " timed out; out of memory for copies of its buffers: they "
               "may still be used",
               c->cmd_id);
    }
    c->state = CMD_ABANDONED;
    return pcclTimeout;
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
    /* An all-reduce binds `bytes` each way; the other kinds the sizes their command carries. */
    const bool coll =
        cmd->type == CCOIP_CMD_ALL_REDUCE && cmd->allreduce.kind != CCOIP_COLL_ALL_REDUCE;
    c->send_bytes = coll ? cmd->allreduce.send_bytes : bytes;
    c->recv_bytes = coll ? cmd->allreduce.recv_bytes : bytes;
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
        bool done = false;
        if (!keep && c->state == CMD_POSTED) r = cmd_abandon(d, c, &done);
        if (done) {
            if (out != NULL) *out = c->res;
            pt_cmd_release(c);
        }
    }
    pthread_mutex_unlock(&d->mu);
    return r;
}

bool pt_cmd_poll(pt_driver *d, uint32_t handle)
{
    if (d == NULL || handle >= PT_MAX_CMDS) return false;
    pthread_mutex_lock(&d->mu);
    const bool done = d->cmds[handle].state == CMD_DONE;
    pthread_mutex_unlock(&d->mu);
    return done;
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
