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
 * Inputs are real data derived from (peer, iteration, attempt, tag), kept
 * for the reference reduction; the pre-op receive buffer is kept for the
 * in-place restore check.
 */
#include <stdlib.h>
#include <string.h>

#include "ccoip_dtype.h"
#include "sim_internal.h"

sim_appcmd *app_find_cmd(sim_node *n, uint64_t cmd_id)
{
    for (uint32_t i = 0; i < SIM_MAX_TAGS; i++) {
        if (n->app.cmds[i].used && n->app.cmds[i].cmd_id == cmd_id) return &n->app.cmds[i];
    }
    return NULL;
}

sim_appcmd *app_find_unbound_tag(sim_node *n, uint32_t tag)
{
    for (uint32_t i = 0; i < SIM_MAX_TAGS; i++) {
        const sim_appcmd *c = &n->app.cmds[i];
        if (c->used && !c->done && !c->commenced && c->tag == tag) return &n->app.cmds[i];
    }
    return NULL;
}

void app_schedule(sim_world *w, uint32_t node, uint64_t delay_ns)
{
    sim_app *a = &w->nodes[node].app;
    a->gen++;
    world_push(w, w->now + delay_ns, EVK_APP, node, a->gen, 0);
}

static void app_submit(sim_world *w, uint32_t node, ccoip_cmd_type type, sim_app_state st)
{
    sim_app *a = &w->nodes[node].app;
    ccoip_event ev;
    memset(&ev, 0, sizeof ev);
    ev.type = CCOIP_EV_SUBMIT;
    ev.cmd.type = type;
    ev.cmd.cmd_id = ++a->next_cmd_id;
    a->pending_cmd = ev.cmd.cmd_id;
    a->pending_since_ns = w->now;
    a->state = st;
    world_feed(w, node, &ev);
}

/* Fills buf with count elements of data for (seed, peer, iter, attempt, tag). */
static void app_fill(sim_world *w, uint8_t *buf, uint64_t count, uint64_t salt)
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
static void app_state_fill(sim_world *w, uint32_t node, bool junk)
{
    sim_node *n = &w->nodes[node];
    for (uint32_t k = 0; k < SIM_STATE_KEYS; k++) {
        sim_rng r;
        uint64_t salt = app_keys[k].allow_content_inequality || junk
                            ? ((uint64_t)n->peer_index << 20) ^ 0xacu
                            : ((uint64_t)n->group << 20) ^ 0x5au;
        salt ^= (n->app.revision << 32) ^ ((uint64_t)k << 8) ^ (junk ? 0x777u : 0u);
        sim_rng_seed(&r, w->cfg.seed ^ (salt * 0x9e3779b97f4a7c15ull));
        for (uint64_t i = 0; i < app_keys[k].count; i++) {
            const float f = (float)((int64_t)(sim_rng_next(&r) % 257u) - 128) / 8.0f;
            uint32_t u;
            memcpy(&u, &f, 4);
            uint8_t *p = &n->app.st[k][i * 4u];
            p[0] = (uint8_t)u;
            p[1] = (uint8_t)(u >> 8);
            p[2] = (uint8_t)(u >> 16);
            p[3] = (uint8_t)(u >> 24);
        }
    }
}

static void app_reduce_phase(sim_world *w, uint32_t node);

static void app_sync(sim_world *w, uint32_t node)
{
    sim_node *n = &w->nodes[node];
    sim_app *a = &n->app;
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
    ccoip_event ev;
    memset(&ev, 0, sizeof ev);
    ev.type = CCOIP_EV_SUBMIT;
    ev.cmd.type = CCOIP_CMD_SYNC_SHARED_STATE;
    ev.cmd.cmd_id = ++a->next_cmd_id;
    ev.cmd.sync.revision = a->sync_rev;
    ev.cmd.sync.strategy = PCCL_SHARED_STATE_SYNC_STRATEGY_ENFORCE_POPULAR;
    ev.cmd.sync.num_keys = SIM_STATE_KEYS;
    ev.cmd.sync.keys = app_keys;
    a->pending_cmd = ev.cmd.cmd_id;
    a->pending_since_ns = w->now;
    a->state = APP_SYNCING;
    world_feed(w, node, &ev);
}

/* After the topology update: sync, or straight to the all-reduces. */
static void app_after_update(sim_world *w, uint32_t node)
{
    if (w->cfg.shared_state) {
        app_sync(w, node);
    } else {
        app_reduce_phase(w, node);
    }
}

static void app_after_sync(sim_world *w, uint32_t node)
{
    sim_app *a = &w->nodes[node].app;
    /* Every member of the group leaves the sync with the same revision and world size, so
     * all decide alike (the vote is global: a member deciding otherwise would deadlock the
     * vote until the timeout). A re-sync of the same revision optimizes again. */
    if (w->cfg.optimize_every > 0 && a->world >= 2u && a->revision > 0 &&
        a->revision % w->cfg.optimize_every == 0) {
        ccoip_event ev;
        memset(&ev, 0, sizeof ev);
        ev.type = CCOIP_EV_SUBMIT;
        ev.cmd.type = CCOIP_CMD_OPTIMIZE_TOPOLOGY;
        ev.cmd.cmd_id = ++a->next_cmd_id;
        a->pending_cmd = ev.cmd.cmd_id;
        a->pending_since_ns = w->now;
        a->state = APP_OPTIMIZING;
        world_feed(w, node, &ev);
        return;
    }
    app_reduce_phase(w, node);
}

static void app_cmd_free(sim_appcmd *c)
{
    if (c->pre != c->input) free(c->pre);
    if (c->recvbuf != c->sendbuf) free(c->recvbuf);
    if (c->sendbuf != c->input) free(c->sendbuf);
    free(c->input);
    memset(c, 0, sizeof *c);
}

static void app_start_allreduce(sim_world *w, uint32_t node, uint32_t tag)
{
    sim_node *n = &w->nodes[node];
    sim_app *a = &n->app;
    sim_appcmd *c = &a->cmds[tag];
    app_cmd_free(c);
    c->used = true;
    c->tag = tag;
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
    world_feed(w, node, &ev);
}

static void app_reduce_phase(sim_world *w, uint32_t node)
{
    sim_app *a = &w->nodes[node].app;
    if (a->world < 2u) {
        /* Alone: wait for someone to join, then the next iteration admits them. */
        a->iter++;
        a->state = APP_SLEEPING;
        app_schedule(w, node, 200u * SIM_MS);
        return;
    }
    a->state = APP_REDUCING;
    a->outstanding = 0;
    const bool reverse = w->cfg.reverse_tags && (node & 1u) != 0;
    for (uint32_t t = 0; t < w->cfg.tags && !w->failed; t++) {
        if (w->nodes[node].state != NODE_ALIVE) return;
        app_start_allreduce(w, node, reverse ? w->cfg.tags - 1u - t : t);
    }
    if (a->rogue_next && w->cfg.tags < SIM_MAX_TAGS && !w->failed) {
        /* A tag nobody else uses (not among the step's results: only its own checks). */
        a->rogue_next = false;
        app_start_allreduce(w, node, SIM_MAX_TAGS - 1u);
    }
}

static void app_next_iteration(sim_world *w, uint32_t node)
{
    sim_node *n = &w->nodes[node];
    sim_app *a = &n->app;
    a->attempt = 0;
    if (w->cfg.churn_per_step_bp > 0 && a->admitted &&
        a->successes_quiet + n->inherited_steps + 1u < w->cfg.steps &&
        sim_rng_below(&n->rng, 10000u) < w->cfg.churn_per_step_bp) {
        world_replace_peer(w, node);
        return;
    }
    if (a->leave_requested) {
        app_submit(w, node, CCOIP_CMD_LEAVE, APP_LEAVING);
        return;
    }
    if (a->iter > 0) {
        app_submit(w, node, CCOIP_CMD_UPDATE_TOPOLOGY, APP_UPDATING);
    } else {
        app_reduce_phase(w, node);
    }
}

void app_start(sim_world *w, uint32_t node)
{
    sim_app *a = &w->nodes[node].app;
    a->state = APP_START;
    a->revision = 0;
    app_state_fill(w, node, true); /* a new process: revision 0, its own junk */
    /* Processes do not all come up at the same instant. */
    app_schedule(w, node, sim_rng_below(&w->nodes[node].rng, 20u * SIM_MS));
}

void app_wake(sim_world *w, uint32_t node)
{
    sim_node *n = &w->nodes[node];
    sim_app *a = &n->app;
    if (n->state != NODE_ALIVE) return;
    if (a->stall_ns > 0 && a->state == APP_SLEEPING) {
        const uint64_t s = a->stall_ns;
        a->stall_ns = 0;
        app_schedule(w, node, s);
        return;
    }
    switch (a->state) {
    case APP_START:
        app_submit(w, node, CCOIP_CMD_CONNECT, APP_CONNECTING);
        break;
    case APP_SLEEPING:
        app_next_iteration(w, node);
        break;
    default:
        /* Busy: a leave request is honoured at the next command. */
        break;
    }
}

static void app_sleep(sim_world *w, uint32_t node, uint64_t ns)
{
    w->nodes[node].app.state = APP_SLEEPING;
    app_schedule(w, node, ns);
}

static void app_exit(sim_world *w, uint32_t node, const char *why)
{
    world_log(w, "peer node %u exits: %s", node, why);
    w->nodes[node].evicted = true;
    world_kill(w, node, true);
}

static void app_allreduce_done(sim_world *w, uint32_t node, sim_appcmd *c, const ccoip_action *act)
{
    sim_node *n = &w->nodes[node];
    sim_app *a = &n->app;
    c->notifies++;
    if (c->notifies > 1u) {
        world_fail(w, SIM_CORRECTNESS,
                   "node %u: all-reduce command %llu (tag %u) got a second verdict (result %d)",
                   node, (unsigned long long)c->cmd_id, c->tag, (int)act->result);
        return;
    }
    c->done = true;
    c->result = act->result;
    check_allreduce_notify(w, node, c, act);
    if (w->failed) return;
    if ((w->cfg.canary & SIM_CANARY_DOUBLE_NOTIFY) && !w->double_notify_done) {
        w->double_notify_done = true;
        app_allreduce_done(w, node, c, act);
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
    for (uint32_t t = 0; t < w->cfg.tags; t++) {
        const pcclResult_t r = a->cmds[t].result;
        if (r != pcclSuccess) all_ok = false;
        if (r == pcclRankConnectionLost || r == pcclTimeout) lost = true;
        if (r == pcclMasterConnectionFailed) master_gone = true;
    }
    a->world = act->world_size;
    if (master_gone) {
        app_exit(w, node, "pcclMasterConnectionFailed");
        return;
    }
    if (all_ok) {
        if (w->cfg.shared_state) {
            /* The step is applied: the next revision of the state. */
            a->revision++;
            app_state_fill(w, node, false);
        }
        a->successes++;
        a->successes_quiet++;
        a->iter++;
        app_sleep(w, node, sim_rng_below(&n->rng, w->cfg.think_max_ns + 1u));
        return;
    }
    if (lost && a->world >= 2u) {
        /* Retry the step's all-reduces on the shrunken ring. */
        a->attempt++;
        app_reduce_phase(w, node);
        return;
    }
    /* pcclTooFewPeers, pcclInvalidUsage (a program bug: skip the step), or
     * alone after a loss: next iteration. */
    a->iter++;
    app_sleep(w, node, 10u * SIM_MS);
}

void app_notify(sim_world *w, uint32_t node, const ccoip_action *act)
{
    sim_node *n = &w->nodes[node];
    sim_app *a = &n->app;
    if (n->is_master) {
        world_fail(w, SIM_CRASH, "the master emitted NOTIFY");
        return;
    }
    sim_appcmd *c = app_find_cmd(n, act->cmd_id);
    if (c != NULL) {
        app_allreduce_done(w, node, c, act);
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
            a->admitted = true;
            a->world = act->world_size;
            a->iter = 0;
            app_after_update(w, node);
        } else if (act->result == pcclMasterConnectionFailed) {
            app_exit(w, node, "connect failed");
        } else {
            app_exit(w, node, "connect refused");
        }
        break;
    case APP_UPDATING:
        if (act->result == pcclSuccess) {
            a->world = act->world_size;
            app_after_update(w, node);
        } else if (act->result == pcclUpdateTopologyFailed ||
                   (act->result == pcclInvalidUsage && n->call_mismatch)) {
            /* (the others were blocked in another call, docs/protocol.md §6.12: retry) */
            app_sleep(w, node, 100u * SIM_MS);
            a->state = APP_SLEEPING;
            a->iter = a->iter > 0 ? a->iter : 1u; /* retry the update */
        } else if (act->result == pcclMasterConnectionFailed) {
            app_exit(w, node, "evicted or master gone (update topology)");
        } else {
            world_fail(w, SIM_CORRECTNESS, "node %u: pcclUpdateTopology returned %d", node,
                       (int)act->result);
        }
        break;
    case APP_SYNCING:
        a->world = act->world_size;
        if (act->result == pcclSuccess) {
            check_sync_notify(w, node, act);
            a->revision = act->revision;
            a->syncs++;
            w->res->syncs++;
            if (act->rx_bytes > 0) w->res->sync_fetches++;
            app_after_sync(w, node);
        } else if (act->result == pcclRankConnectionLost) {
            w->res->sync_failed++;
            check_sync_failed(w, node);
            if (w->failed) break;
            if (memcmp(a->st, a->st_pre, sizeof a->st) != 0) w->res->sync_adopted_failed++;
            n->sync_retry = true;
            app_sync(w, node); /* retryable: the same revision again */
        } else if (act->result == pcclMasterConnectionFailed) {
            app_exit(w, node, "evicted or master gone (sync)");
        } else if (act->result == pcclInvalidUsage && n->call_mismatch) {
            app_sync(w, node); /* the others were blocked in another call (§6.12): retry */
        } else if (act->result == pcclInvalidUsage) {
            w->seen_expect |= SIM_EXPECT_INVALID_USAGE;
            app_exit(w, node, "sync rejected: pcclInvalidUsage");
        } else {
            world_fail(w, SIM_CORRECTNESS, "node %u: pcclSynchronizeSharedState returned %d", node,
                       (int)act->result);
        }
        break;
    case APP_OPTIMIZING:
        a->world = act->world_size;
        if (act->result == pcclSuccess) {
            w->res->optimizes++;
            check_optimize_notify(w, node);
            app_reduce_phase(w, node);
        } else if (act->result == pcclMasterConnectionFailed) {
            app_exit(w, node, "evicted or master gone (optimize)");
        } else if (act->result == pcclTopologyOptimizationFailed ||
                   act->result == pcclUpdateTopologyFailed ||
                   act->result == pcclRankConnectionLost || act->result == pcclTooFewPeers ||
                   (act->result == pcclInvalidUsage && n->call_mismatch)) {
            app_reduce_phase(w, node); /* best effort: carry on with the ring as it is */
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
