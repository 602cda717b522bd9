/*
 * sim_app.c — the workload: each peer runs the training loop of the
 * reference hello world (pccl-examples.md), as commands submitted to its
 * state machine:
 *
 *   connect (retry until admitted)
 *   loop:
 *     iter > 0: update topology (retry on pcclUpdateTopologyFailed)
 *     world < 2: sleep, next iteration
 *     all-reduce (one per tag, concurrently); on pcclRankConnectionLost
 *       re-read the world size: retry while >= 2 peers, else next iteration
 *     success: next iteration
 *
 * With shared state (sim_config.shared_state) the full reference loop:
 *   update topology -> sync shared state (3 keys: two compared tensors of
 *   64 floats, one allow_content_inequality tensor of 32) -> optimize the
 *   topology at revisions that are multiples of optimize_every -> all-reduce
 *   -> revision + 1 and the new state. A retryable sync failure
 *   (pcclRankConnectionLost) is retried; the tensors must be untouched.
 *   The compared tensors at revision r are a function of (group, r), the
 *   other one of (peer, r); a new process starts at revision 0 with junk.
 *
 * With --kind p2p each step is a round of send / recv (app_p2p_phase): on
 * every tag, a shift (every rank sends to rank + k and receives from
 * rank - k, both submitted at once) or one pair while the others idle; a
 * failure is retried after a topology update, as for the other kinds.
 *
 * Inputs are real data derived from (peer, iteration, attempt, tag), kept
 * for the reference reduction; the pre-op receive buffer is kept for the
 * in-place restore check.
 */
#include <stdlib.h>
#include <string.h>

#include "ccoip_coll.h"
#include "ccoip_dtype.h"
#include "sim_app.h"

sim_appcmd *app_find_cmd(sim_app *a, uint64_t cmd_id)
{
    for (uint32_t i = 0; i < SIM_MAX_TAGS; i++) {
        if (a->cmds[i].used && a->cmds[i].cmd_id == cmd_id) return &a->cmds[i];
    }
    return NULL;
}

sim_appcmd *app_find_unbound_tag(sim_app *a, uint64_t tag)
{
    for (uint32_t i = 0; i < SIM_MAX_TAGS; i++) {
        const sim_appcmd *c = &a->cmds[i];
        if (c->used && !c->done && !c->commenced && c->wire_tag == tag) return &a->cmds[i];
    }
    return NULL;
}

static bool app_coll_mode(const sim_world *w)
{
    return w->cfg.coll_kind != 0;
}

/* The command slots a step uses: one per tag, a send and a receive per tag with send / recv. */
static uint32_t app_slots(const sim_world *w)
{
    return w->cfg.coll_kind == SIM_KIND_P2P ? 2u * w->cfg.tags : w->cfg.tags;
}

void app_schedule(sim_workload *wl, uint32_t node, uint64_t delay_ns)
{
    sim_app *a = app_of(wl, node);
    a->gen++;
    world_wake_at(wl->w, node, delay_ns, a->gen);
}

/* Submits cmd (its id given here) as the pending command; the application waits in state st. */
static void app_submit_cmd(sim_workload *wl, uint32_t node, const ccoip_cmd *cmd, sim_app_state st)
{
    sim_world *w = wl->w;
    sim_app *a = app_of(wl, node);
    ccoip_event ev;
    memset(&ev, 0, sizeof ev);
    ev.type = CCOIP_EV_SUBMIT;
    ev.cmd = *cmd;
    ev.cmd.cmd_id = ++a->next_cmd_id;
    a->pending_cmd = ev.cmd.cmd_id;
    a->pending_since_ns = w->now;
    a->state = st;
    world_feed(w, node, &ev);
}

/* A command without arguments (CONNECT, UPDATE_TOPOLOGY, OPTIMIZE_TOPOLOGY, LEAVE). */
static void app_submit(sim_workload *wl, uint32_t node, ccoip_cmd_type type, sim_app_state st)
{
    ccoip_cmd cmd;
    memset(&cmd, 0, sizeof cmd);
    cmd.type = type;
    app_submit_cmd(wl, node, &cmd, st);
}

/* Fills buf with count elements of data for (seed, peer, iter, attempt, tag). */
void app_fill(sim_world *w, uint8_t *buf, uint64_t count, uint64_t salt)
{
    sim_rng r;
    sim_rng_seed(&r, w->cfg.seed ^ (salt * 0x9e3779b97f4a7c15ull));
    const pcclDataType_t dt = w->cfg.dtype;
    const uint64_t esz = w->elem_bytes;
    for (uint64_t i = 0; i < count; i++) {
        uint64_t v = sim_rng_next(&r);
        uint8_t *p = buf + i * esz;
        if (dt == pcclFloat) {
            /* Small multiples of 1/8: exact in every format, finite for quantization. */
            const float f = (float)((int64_t)(v % 257u) - 128) / 8.0f;
            memcpy(p, &f, 4);
        } else if (dt == pcclDouble) {
            const double d = (double)((int64_t)(v % 257u) - 128) / 8.0;
            memcpy(p, &d, 8);
        } else if (dt == pcclFloat16 || dt == pcclBFloat16) {
            const float f = (float)((int64_t)(v % 33u) - 16) / 4.0f;
            const uint16_t h = dt == pcclFloat16 ? ccoip_f32_to_f16(f) : ccoip_f32_to_bf16(f);
            p[0] = (uint8_t)h;
            p[1] = (uint8_t)(h >> 8);
        } else {
            /* Integers: full-range bytes, little-endian, so sums wrap. PROD
             * gets odd small values so products do not collapse to 0. */
            if (w->cfg.op == pcclProd) v = (v % 7u) * 2u + 1u;
            for (uint64_t b = 0; b < esz; b++)
                p[b] = (uint8_t)(v >> (8u * (b % 8u)));
        }
    }
}

static const ccoip_state_key app_keys[SIM_STATE_KEYS] = {
    {"a.weights", pcclFloat, SIM_STATE_ELEMS, false},
    {"b.moments", pcclFloat, SIM_STATE_ELEMS, false},
    {"c.local_rng", pcclFloat, SIM_STATE_ELEMS / 2u, true},
};

/* The state of revision rev: compared keys from (group, rev), the other from (peer, rev). */
static void app_state_fill(sim_workload *wl, uint32_t node, bool junk)
{
    sim_world *w = wl->w;
    const sim_node *n = &w->nodes[node];
    sim_app *a = app_of(wl, node);
    for (uint32_t k = 0; k < SIM_STATE_KEYS; k++) {
        sim_rng r;
        uint64_t salt = app_keys[k].allow_content_inequality || junk
                            ? ((uint64_t)n->peer_index << 20) ^ 0xacu
                            : ((uint64_t)n->group << 20) ^ 0x5au;
        salt ^= (a->revision << 32) ^ ((uint64_t)k << 8) ^ (junk ? 0x777u : 0u);
        sim_rng_seed(&r, w->cfg.seed ^ (salt * 0x9e3779b97f4a7c15ull));
        for (uint64_t i = 0; i < app_keys[k].count; i++) {
            const float f = (float)((int64_t)(sim_rng_next(&r) % 257u) - 128) / 8.0f;
            uint32_t u;
            memcpy(&u, &f, 4);
            uint8_t *p = &a->st[k][i * 4u];
            p[0] = (uint8_t)u;
            p[1] = (uint8_t)(u >> 8);
            p[2] = (uint8_t)(u >> 16);
            p[3] = (uint8_t)(u >> 24);
        }
    }
}

static void app_reduce_phase(sim_workload *wl, uint32_t node);

static void app_sync(sim_workload *wl, uint32_t node)
{
    sim_world *w = wl->w;
    sim_node *n = &w->nodes[node];
    sim_app *a = app_of(wl, node);
    if (a->diverge_next ||
        (w->cfg.diverge_bp > 0 && sim_rng_below(&n->rng, 10000u) < w->cfg.diverge_bp)) {
        /* A deliberate divergence: one element of a compared tensor differs. */
        a->diverge_next = false;
        a->st[0][sim_rng_below(&n->rng, SIM_STATE_ELEMS) * 4u] ^= 0x10u;
    }
    memcpy(a->st_pre, a->st, sizeof a->st);
    a->sync_rev = a->revision;
    if (a->skip_revision_next) {
        a->skip_revision_next = false;
        a->sync_rev = a->revision + 2u; /* a program bug: the master must reject it */
    }
    ccoip_cmd cmd;
    memset(&cmd, 0, sizeof cmd);
    cmd.type = CCOIP_CMD_SYNC_SHARED_STATE;
    cmd.sync.revision = a->sync_rev;
    cmd.sync.strategy = PCCL_SHARED_STATE_SYNC_STRATEGY_ENFORCE_POPULAR;
    cmd.sync.num_keys = SIM_STATE_KEYS;
    cmd.sync.keys = app_keys;
    app_submit_cmd(wl, node, &cmd, APP_SYNCING);
}

/* A member's optimization succeeded: the round's time so far (first call to this success),
 * against sim_config.optimize_bound_ns. */
static void app_optimized(sim_world *w)
{
    if (w->opt_round_ok++ == 0) w->res->optimize_rounds++;
    const uint64_t d = w->now - w->opt_round_t0;
    if (d > w->res->optimize_max_ns) {
        w->res->optimize_max_ns = d;
        w->res->optimize_members = w->opt_round_ok;
    } else if (d == w->res->optimize_max_ns && w->opt_round_ok > w->res->optimize_members) {
        w->res->optimize_members = w->opt_round_ok;
    }
    if (w->cfg.optimize_bound_ns != 0 && d > w->cfg.optimize_bound_ns) {
        world_fail(w, SIM_LIVENESS,
                   "optimize: a member succeeded %llu ms after the first call (bound %llu ms)",
                   (unsigned long long)(d / 1000000u),
                   (unsigned long long)(w->cfg.optimize_bound_ns / 1000000u));
    }
}

/* After the topology update: sync, or straight to the all-reduces. */
static void app_after_update(sim_workload *wl, uint32_t node)
{
    sim_world *w = wl->w;
    if (w->cfg.shared_state) {
        app_sync(wl, node);
    } else {
        app_reduce_phase(wl, node);
    }
}

static void app_after_sync(sim_workload *wl, uint32_t node)
{
    sim_world *w = wl->w;
    sim_app *a = app_of(wl, node);
    /* Every member of the group leaves the sync with the same revision and world size, so
     * all decide alike (the vote is global: a member deciding otherwise would deadlock the
     * vote until the timeout). A re-sync of the same revision optimizes again. With --kind
     * the workload does not optimize: the group re-wires after the optimization's verdict
     * (whether it succeeded or not), so the ops pinned right after it are refused as stale,
     * and the retry (update, re-sync) would optimize again, round after round; a retry that
     * skipped the re-sync or the optimization would disagree with a newcomer admitted by its
     * update, which syncs and optimizes (the calls then wait for each other). */
    if (w->cfg.optimize_every > 0 && !app_coll_mode(w) && a->world >= 2u && a->revision > 0 &&
        a->revision % w->cfg.optimize_every == 0) {
        /* The vote is global: no member succeeds before every one called, so a call after a
         * success starts the next round. */
        if (w->opt_round_ok > 0 || w->opt_round_t0 == 0) {
            w->opt_round_t0 = w->now;
            w->opt_round_ok = 0;
        }
        app_submit(wl, node, CCOIP_CMD_OPTIMIZE_TOPOLOGY, APP_OPTIMIZING);
        return;
    }
    app_reduce_phase(wl, node);
}

void app_cmd_free(sim_appcmd *c)
{
    if (c->coll && c->kind != 0) {
        free(c->alloc[0]);
        free(c->alloc[1]);
        free(c->pre);
        free(c->input);
        memset(c, 0, sizeof *c);
        return;
    }
    if (c->pre != c->input) free(c->pre);
    if (c->recvbuf != c->sendbuf) free(c->recvbuf);
    if (c->sendbuf != c->input) free(c->sendbuf);
    free(c->input);
    memset(c, 0, sizeof *c);
}

void app_start_allreduce(sim_workload *wl, uint32_t node, uint32_t tag)
{
    sim_world *w = wl->w;
    sim_node *n = &w->nodes[node];
    sim_app *a = app_of(wl, node);
    sim_appcmd *c = &a->cmds[tag];
    app_cmd_free(c);
    c->used = true;
    c->tag = tag;
    c->wire_tag = tag;
    c->cmd_id = ++a->next_cmd_id;
    c->submitted_ns = w->now;
    c->count = w->cfg.count;
    if (a->mismatch_next && tag == 0) {
        c->count++;
        a->mismatch_next = false;
    }
    const uint64_t bytes = c->count * w->elem_bytes;
    c->input = malloc((size_t)bytes + 1u);
    c->sendbuf = malloc((size_t)bytes + 1u);
    if (c->input == NULL || c->sendbuf == NULL) {
        world_fail(w, SIM_CRASH, "out of memory (application buffers)");
        return;
    }
    app_fill(w, c->input, c->count,
             ((uint64_t)n->peer_index << 40) ^ (a->iter << 16) ^ (a->attempt << 4) ^ tag);
    memcpy(c->sendbuf, c->input, (size_t)bytes);
    if (w->cfg.in_place) {
        c->recvbuf = c->sendbuf;
        c->pre = c->input;
    } else {
        c->recvbuf = malloc((size_t)bytes + 1u);
        c->pre = malloc((size_t)bytes + 1u);
        if (c->recvbuf == NULL || c->pre == NULL) {
            world_fail(w, SIM_CRASH, "out of memory (application buffers)");
            return;
        }
        /* A recognizable pattern: a failed op must not leave half a result... in
         * the receive buffer of a non-in-place op it may, so only in-place is checked. */
        memset(c->recvbuf, 0xa5, (size_t)bytes);
        memcpy(c->pre, c->recvbuf, (size_t)bytes);
    }
    a->outstanding++;
    ccoip_event ev;
    memset(&ev, 0, sizeof ev);
    ev.type = CCOIP_EV_SUBMIT;
    ev.cmd.type = CCOIP_CMD_ALL_REDUCE;
    ev.cmd.cmd_id = c->cmd_id;
    ev.cmd.allreduce.tag = tag;
    ev.cmd.allreduce.count = c->count;
    ev.cmd.allreduce.dtype = w->cfg.dtype;
    ev.cmd.allreduce.op = w->cfg.op;
    ev.cmd.allreduce.quant_algorithm = w->cfg.quant;
    ev.cmd.allreduce.quant_dtype = w->cfg.quant_dtype;
    ev.cmd.allreduce.in_place = w->cfg.in_place;
    ev.cmd.allreduce.timeout_ms = w->cfg.op_timeout_ms;
    /* The run's forced algorithm (halving-doubling runs the ring on a world it does not fit:
     * the checker's reference follows the world the op ran in). */
    c->algo = w->cfg.algo;
    ev.cmd.allreduce.algorithm = c->algo;
    c->send_len = c->recv_len = bytes;
    world_feed(w, node, &ev);
}

static void app_reduce_phase(sim_workload *wl, uint32_t node)
{
    sim_world *w = wl->w;
    sim_app *a = app_of(wl, node);
    if (a->world < 2u) {
        /* Alone: wait for someone to join, then the next iteration admits them. */
        a->iter++;
        a->state = APP_SLEEPING;
        app_schedule(wl, node, 200u * SIM_MS);
        return;
    }
    a->state = APP_REDUCING;
    a->outstanding = 0;
    if (w->cfg.coll_kind == SIM_KIND_P2P) {
        app_p2p_phase(wl, node);
        return;
    }
    const bool reverse = w->cfg.reverse_tags && (node & 1u) != 0;
    for (uint32_t t = 0; t < w->cfg.tags && !w->failed; t++) {
        if (w->nodes[node].state != NODE_ALIVE) return;
        const uint32_t tag = reverse ? w->cfg.tags - 1u - t : t;
        if (!app_coll_mode(w)) {
            app_start_allreduce(wl, node, tag);
        } else if (!app_start_coll(wl, node, tag)) {
            if (t > 0 || w->failed) {
                world_fail(w, SIM_CRASH, "node %u: the ring vanished between two submissions",
                           node);
                return;
            }
            /* No ring installed (rank -1): update the topology first. */
            a->iter = a->iter > 0 ? a->iter : 1u;
            a->state = APP_SLEEPING;
            app_schedule(wl, node, 10u * SIM_MS);
            return;
        }
    }
    if (a->rogue_next && w->cfg.tags < SIM_MAX_TAGS && !w->failed) {
        /* A tag nobody else uses (not among the step's results: only its own checks). */
        a->rogue_next = false;
        app_start_allreduce(wl, node, SIM_MAX_TAGS - 1u);
    }
}

static void app_next_iteration(sim_workload *wl, uint32_t node)
{
    sim_world *w = wl->w;
    sim_node *n = &w->nodes[node];
    sim_app *a = app_of(wl, node);
    a->attempt = 0;
    if (w->cfg.churn_per_step_bp > 0 && n->admitted &&
        n->steps_quiet + n->inherited_steps + 1u < w->cfg.steps &&
        sim_rng_below(&n->rng, 10000u) < w->cfg.churn_per_step_bp) {
        world_replace_peer(w, node);
        return;
    }
    if (a->leave_requested) {
        app_submit(wl, node, CCOIP_CMD_LEAVE, APP_LEAVING);
        return;
    }
    if (a->iter > 0) {
        app_submit(wl, node, CCOIP_CMD_UPDATE_TOPOLOGY, APP_UPDATING);
    } else {
        app_reduce_phase(wl, node);
    }
}

static void app_start(sim_workload *wl, uint32_t node)
{
    sim_world *w = wl->w;
    sim_app *a = app_of(wl, node);
    a->state = APP_START;
    a->revision = 0;
    a->info_rank = -1;              /* no ring before the first NOTIFY */
    app_state_fill(wl, node, true); /* a new process: revision 0, its own junk */
    /* Processes do not all come up at the same instant. */
    app_schedule(wl, node, sim_rng_below(&w->nodes[node].rng, 20u * SIM_MS));
}

static void app_wake(sim_workload *wl, uint32_t node)
{
    sim_world *w = wl->w;
    sim_node *n = &w->nodes[node];
    sim_app *a = app_of(wl, node);
    if (n->state != NODE_ALIVE) return;
    if (a->stall_ns > 0 && a->state == APP_SLEEPING) {
        const uint64_t s = a->stall_ns;
        a->stall_ns = 0;
        app_schedule(wl, node, s);
        return;
    }
    switch (a->state) {
    case APP_START:
        app_submit(wl, node, CCOIP_CMD_CONNECT, APP_CONNECTING);
        break;
    case APP_SLEEPING:
        app_next_iteration(wl, node);
        break;
    default:
        /* Busy: a leave request is honoured at the next command. */
        break;
    }
}

void app_sleep(sim_workload *wl, uint32_t node, uint64_t ns)
{
    app_of(wl, node)->state = APP_SLEEPING;
    app_schedule(wl, node, ns);
}

static void app_exit(sim_workload *wl, uint32_t node, const char *why)
{
    sim_world *w = wl->w;
    world_log(w, "peer node %u exits: %s", node, why);
    world_kill(w, node, true);
}

static void app_allreduce_done(sim_workload *wl, uint32_t node, sim_appcmd *c,
                               const ccoip_action *act)
{
    sim_world *w = wl->w;
    sim_node *n = &w->nodes[node];
    sim_app *a = app_of(wl, node);
    c->notifies++;
    if (c->notifies > 1u) {
        world_fail(w, SIM_CORRECTNESS,
                   "node %u: all-reduce command %llu (tag %u) got a second verdict (result %d)",
                   node, (unsigned long long)c->cmd_id, c->tag, (int)act->result);
        return;
    }
    c->done = true;
    c->result = act->result;
    if (w->failed) return; /* a checker caught the verdict (they see it first) */
    if ((w->cfg.canary & SIM_CANARY_DOUBLE_NOTIFY) && !wl->double_notify_done) {
        wl->double_notify_done = true;
        app_allreduce_done(wl, node, c, act);
        return;
    }
    if (a->outstanding > 0) a->outstanding--;
    if (act->result == pcclSuccess) {
        w->res->ops_completed++;
    } else if (act->result == pcclRankConnectionLost) {
        w->res->ops_aborted++;
    } else {
        w->res->ops_failed_other++;
    }
    if (a->outstanding > 0) return;

    /* Every all-reduce of this step has its verdict. */
    bool all_ok = true;
    bool lost = false;
    bool master_gone = false;
    for (uint32_t t = 0; t < app_slots(w); t++) {
        if (!a->cmds[t].used) continue; /* send / recv: no op of this member in the slot */
        const pcclResult_t r = a->cmds[t].result;
        if (r != pcclSuccess) all_ok = false;
        if (r == pcclRankConnectionLost || r == pcclTimeout) lost = true;
        if (r == pcclMasterConnectionFailed) master_gone = true;
    }
    a->world = act->world_size;
    if (master_gone) {
        app_exit(wl, node, "pcclMasterConnectionFailed");
        return;
    }
    if (app_coll_mode(w)) {
        /* Every member of an op got its one verdict: the successes of the epoch the ops were
         * pinned to count alike everywhere (the next ops' kinds and roots). */
        for (uint32_t t = 0; t < app_slots(w); t++) {
            const sim_appcmd *ct = &a->cmds[t];
            if (ct->coll && ct->result == pcclSuccess && ct->pin == a->coll_epoch) {
                a->coll_n[t]++;
            }
        }
        if (!all_ok) {
            /* pcclUpdateTopologyFailed (a stale pin), pcclRankConnectionLost, pcclTimeout,
             * pcclInvalidUsage (members that read different epochs disagreed on kind or root),
             * pcclTooFewPeers: update the topology, read rank and world again, retry. */
            a->attempt++;
            a->iter = a->iter > 0 ? a->iter : 1u;
            app_sleep(wl, node, 10u * SIM_MS);
            return;
        }
    }
    if (all_ok) {
        if (w->cfg.shared_state) {
            /* The step is applied: the next revision of the state. */
            a->revision++;
            app_state_fill(wl, node, false);
        }
        a->successes++;
        n->steps_quiet++;
        a->iter++;
        app_sleep(wl, node, sim_rng_below(&n->rng, w->cfg.think_max_ns + 1u));
        return;
    }
    if (lost && a->world >= 2u) {
        /* Retry the step's all-reduces on the shrunken ring. */
        a->attempt++;
        app_reduce_phase(wl, node);
        return;
    }
    /* pcclTooFewPeers, pcclInvalidUsage (a program bug: skip the step), or
     * alone after a loss: next iteration. */
    a->iter++;
    app_sleep(wl, node, 10u * SIM_MS);
}

static void app_notify(sim_workload *wl, uint32_t node, const ccoip_action *act)
{
    sim_world *w = wl->w;
    sim_node *n = &w->nodes[node];
    sim_app *a = app_of(wl, node);
    if (n->is_master) {
        world_fail(w, SIM_CRASH, "the master emitted NOTIFY");
        return;
    }
    if (w->vt->peer_ring != NULL) {
        /* The application's view of its ring until the next NOTIFY, as libpccl's. */
        uint32_t ring_world = 0;
        w->vt->peer_ring(n->m, &a->info_epoch, &a->info_rank, &ring_world);
        a->info_world = act->world_size;
    }
    sim_appcmd *c = app_find_cmd(a, act->cmd_id);
    if (c != NULL) {
        app_allreduce_done(wl, node, c, act);
        return;
    }
    if (act->cmd_id != a->pending_cmd || a->pending_cmd == 0) {
        world_fail(w, SIM_CORRECTNESS, "node %u: NOTIFY for command %llu that is not pending", node,
                   (unsigned long long)act->cmd_id);
        return;
    }
    a->pending_cmd = 0;
    switch (a->state) {
    case APP_CONNECTING:
        if (act->result == pcclSuccess) {
            n->admitted = true;
            a->world = act->world_size;
            a->iter = 0;
            app_after_update(wl, node);
        } else if (act->result == pcclMasterConnectionFailed) {
            app_exit(wl, node, "connect failed");
        } else {
            app_exit(wl, node, "connect refused");
        }
        break;
    case APP_UPDATING:
        if (act->result == pcclSuccess) {
            a->world = act->world_size;
            app_after_update(wl, node);
        } else if (act->result == pcclUpdateTopologyFailed ||
                   (act->result == pcclInvalidUsage && a->call_mismatch)) {
            /* (the others were blocked in another call, docs/protocol.md §6.12: retry) */
            app_sleep(wl, node, 100u * SIM_MS);
            a->state = APP_SLEEPING;
            a->iter = a->iter > 0 ? a->iter : 1u; /* retry the update */
        } else if (act->result == pcclMasterConnectionFailed) {
            app_exit(wl, node, "evicted or master gone (update topology)");
        } else {
            world_fail(w, SIM_CORRECTNESS, "node %u: pcclUpdateTopology returned %d", node,
                       (int)act->result);
        }
        break;
    case APP_SYNCING:
        a->world = act->world_size;
        if (act->result == pcclSuccess) {
            if (a->sync_retry) {
                a->sync_retry = false;
                w->seen_expect |= SIM_EXPECT_SYNC_RETRY;
            }
            a->revision = act->revision;
            a->syncs++;
            w->res->syncs++;
            if (act->rx_bytes > 0) w->res->sync_fetches++;
            app_after_sync(wl, node);
        } else if (act->result == pcclRankConnectionLost) {
            w->res->sync_failed++;
            if (w->failed) break; /* a checker: the failed sync changed a tensor wrongly */
            if (memcmp(a->st, a->st_pre, sizeof a->st) != 0) w->res->sync_adopted_failed++;
            a->sync_retry = true;
            app_sync(wl, node); /* retryable: the same revision again */
        } else if (act->result == pcclMasterConnectionFailed) {
            app_exit(wl, node, "evicted or master gone (sync)");
        } else if (act->result == pcclInvalidUsage && a->call_mismatch) {
            app_sync(wl, node); /* the others were blocked in another call (§6.12): retry */
        } else if (act->result == pcclInvalidUsage) {
            w->seen_expect |= SIM_EXPECT_INVALID_USAGE;
            app_exit(wl, node, "sync rejected: pcclInvalidUsage");
        } else {
            world_fail(w, SIM_CORRECTNESS, "node %u: pcclSynchronizeSharedState returned %d", node,
                       (int)act->result);
        }
        break;
    case APP_OPTIMIZING:
        a->world = act->world_size;
        if (act->result == pcclSuccess) {
            w->res->optimizes++;
            app_optimized(w);
            if (w->failed) break;
            app_reduce_phase(wl, node);
        } else if (act->result == pcclMasterConnectionFailed) {
            app_exit(wl, node, "evicted or master gone (optimize)");
        } else if (act->result == pcclTopologyOptimizationFailed ||
                   act->result == pcclUpdateTopologyFailed ||
                   act->result == pcclRankConnectionLost || act->result == pcclTooFewPeers ||
                   (act->result == pcclInvalidUsage && a->call_mismatch)) {
            app_reduce_phase(wl, node); /* best effort: carry on with the ring as it is */
        } else {
            world_fail(w, SIM_CORRECTNESS, "node %u: pcclOptimizeTopology returned %d", node,
                       (int)act->result);
        }
        break;
    case APP_LEAVING:
        w->res->leaves++;
        world_kill(w, node, true);
        break;
    default:
        world_fail(w, SIM_CORRECTNESS, "node %u: unexpected NOTIFY in app state %d", node,
                   (int)a->state);
        break;
    }
}

/* ------------------------------------------------------------------------ */
/* The workload as an observer of the world (sim_world.h)                   */
/* ------------------------------------------------------------------------ */

static void app_on_start(void *ctx, uint32_t node)
{
    app_start(ctx, node);
}

static void app_on_wake(void *ctx, uint32_t node, uint64_t gen)
{
    sim_workload *wl = ctx;
    if (gen == app_of(wl, node)->gen) app_wake(wl, node);
}

static void app_on_notify(void *ctx, uint32_t node, const ccoip_action *act)
{
    app_notify(ctx, node, act);
}

/* OP_BEGIN: the command's buffers, or the sync's tensors (slot max_ops) and fetch scratch
 * (max_ops + 1: no application memory). */
static bool app_on_bind_op(void *ctx, uint32_t node, const ccoip_action *act, ccoip_exec_slot *slot)
{
    sim_workload *wl = ctx;
    sim_app *a = app_of(wl, node);
    if (act->op_slot >= SIM_MAX_OPS) {
        if (a->state != APP_SYNCING || act->cmd_id != a->pending_cmd ||
            act->scratch_bytes > (uint64_t)SIM_STATE_KEYS * SIM_STATE_BYTES) {
            return false;
        }
        if (act->op_slot == SIM_MAX_OPS) {
            for (uint32_t t = 0; t < SIM_STATE_KEYS; t++) {
                a->st_ptr[t] = a->st[t];
                a->st_bytes[t] = t == SIM_STATE_KEYS - 1u ? SIM_STATE_BYTES / 2u : SIM_STATE_BYTES;
            }
            slot->tensors = a->st_ptr;
            slot->tensor_bytes = a->st_bytes;
            slot->ntensors = SIM_STATE_KEYS;
        }
        return true;
    }
    const sim_appcmd *c = app_find_cmd(a, act->cmd_id);
    if (c == NULL) return false;
    slot->send = c->sendbuf;
    slot->recv = c->recvbuf;
    /* Contract v11: the command's send_bytes / recv_bytes (all-reduce: both count * size). */
    slot->send_bytes = c->send_len;
    slot->recv_bytes = c->recv_len;
    return true;
}

/* The master refused a call as blocked in another one (docs/protocol.md §6.12), or as a vote
 * nobody else joined (§6.10): retried. */
static void app_on_m2p_sent(void *ctx, uint32_t dst, const ccoip_pb_master_to_peer *m)
{
    if (m->status != CCOIP_PB_STATUS_INVALID_USAGE) return;
    sim_workload *wl = ctx;
    /* Both end a call that cannot complete, nobody evicted: the application retries
     * (docs/protocol.md §6.10, §6.12). */
    app_of(wl, dst)->call_mismatch =
        m->reason == CCOIP_PB_REASON_CALL_MISMATCH || m->reason == CCOIP_PB_REASON_VOTE_UNMATCHED;
    if (m->reason == CCOIP_PB_REASON_CALL_MISMATCH) wl->w->res->call_mismatches++;
}

static void app_on_leave(void *ctx, uint32_t node)
{
    sim_workload *wl = ctx;
    app_of(wl, node)->leave_requested = true;
    app_wake(wl, node);
}

static void app_on_script(void *ctx, uint32_t node, const sim_script_event *s)
{
    sim_app *a = app_of(ctx, node);
    switch (s->kind) {
    case SIM_SCRIPT_STALL:
        a->stall_ns = s->arg;
        break;
    case SIM_SCRIPT_MISMATCH:
        a->mismatch_next = true;
        break;
    case SIM_SCRIPT_ROGUE_TAG:
        a->rogue_next = true;
        break;
    case SIM_SCRIPT_DIVERGE:
        a->diverge_next = true;
        break;
    case SIM_SCRIPT_SKIP_REVISION:
        a->skip_revision_next = true;
        break;
    default:
        break;
    }
}

static void app_on_killed(void *ctx, uint32_t node)
{
    app_of(ctx, node)->state = APP_GONE;
}

static void app_on_release(void *ctx, uint32_t node)
{
    sim_app *a = app_of(ctx, node);
    for (uint32_t c = 0; c < SIM_MAX_TAGS; c++)
        app_cmd_free(&a->cmds[c]);
}

/* A liveness failure: say who was stuck (what did not finish). */
static void app_on_end(void *ctx)
{
    const sim_workload *wl = ctx;
    sim_world *w = wl->w;
    if (!w->failed) return;
    for (uint32_t i = 1; i < w->num_nodes && w->res->status == SIM_LIVENESS; i++) {
        const sim_node *n = &w->nodes[i];
        const sim_app *a = app_of(wl, i);
        if (n->state != NODE_ALIVE) continue;
        world_log(w,
                  "  peer %u (node %u, id %llu): app state %d iter %llu admitted %d "
                  "successes %llu (after churn %llu) outstanding %u",
                  n->peer_index, i, (unsigned long long)n->peer_id, (int)a->state,
                  (unsigned long long)a->iter, (int)n->admitted, (unsigned long long)a->successes,
                  (unsigned long long)n->steps_quiet, a->outstanding);
    }
}

sim_workload *app_create(sim_world *w)
{
    sim_workload *wl = calloc(1, sizeof *wl);
    if (wl != NULL) wl->apps = calloc(w->cap_nodes, sizeof *wl->apps);
    if (wl == NULL || wl->apps == NULL) {
        free(wl);
        world_fail(w, SIM_CRASH, "out of memory (workload)");
        return NULL;
    }
    wl->w = w;
    return wl;
}

sim_observer app_observer(sim_workload *wl)
{
    const sim_observer obs = {
        .ctx = wl,
        .start = app_on_start,
        .wake = app_on_wake,
        .notify = app_on_notify,
        .bind_op = app_on_bind_op,
        .m2p_sent = app_on_m2p_sent,
        .leave = app_on_leave,
        .script = app_on_script,
        .killed = app_on_killed,
        .release = app_on_release,
        .end = app_on_end,
    };
    return obs;
}

void app_destroy(sim_workload *wl)
{
    if (wl == NULL) return;
    free(wl->apps);
    free(wl);
}
