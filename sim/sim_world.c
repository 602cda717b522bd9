/*
 * sim_world.c — the event loop of the simulator's driver of core/ccoip_sm.h
 * (DESIGN.md §7): the queue (min-heap on (time, seq)), feeding one machine
 * an event and running every action it emits, firing each kind of event,
 * the observers, and a world's life: create, start, run, destroy. The other
 * concerns are in the files sim_world_int.h lists.
 */
#include <stdarg.h>
#include <stdio.h> /* vsnprintf only: formatting into buffers, no I/O */
#include <stdlib.h>
#include <string.h>

#include "ccoip_dtype.h"
#include "sim_world_int.h"

/* ------------------------------------------------------------------------ */
/* Failure reporting and logging                                            */
/* ------------------------------------------------------------------------ */

void world_fail(sim_world *w, sim_status st, const char *fmt, ...)
{
    if (w->failed) return;
    w->failed = true;
    w->res->status = st;
    va_list ap;
    va_start(ap, fmt);
    char msg[400];
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(w->res->message, sizeof w->res->message, "t=%llu.%06llums %s",
             (unsigned long long)(w->now / SIM_MS), (unsigned long long)(w->now % SIM_MS), msg);
}

void world_log(sim_world *w, const char *fmt, ...)
{
    if (w->cfg.log == NULL) return;
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    w->cfg.log(w->cfg.log_ctx, line);
}

/* ------------------------------------------------------------------------ */
/* Event pool and heap                                                      */
/* ------------------------------------------------------------------------ */

/* An event travels inline in the queue: a in the payload, (node, b, kind) in the aux word. */
#define EV_AUX(kind, node, b) (((uint64_t)(node) << 32) | ((uint64_t)(b) << 8) | (uint64_t)(kind))

bool world_push(sim_world *w, uint64_t t, uint32_t kind, uint32_t node, uint64_t a, uint64_t b)
{
    if (b >= ((uint64_t)1 << 24) || kind > 0xffu) {
        world_fail(w, SIM_CRASH, "event field out of range (kind %u b %llu)", kind,
                   (unsigned long long)b);
        return false;
    }
    if (t < w->now) t = w->now;
    if (!sim_heap_push2(&w->heap, t, a, EV_AUX(kind, node, b))) {
        world_fail(w, SIM_CRASH, "event queue bound hit (%llu events)",
                   (unsigned long long)w->heap.max_items);
        return false;
    }
    return true;
}

void timer_push(sim_world *w, uint32_t node)
{
    sim_node *n = &w->nodes[node];
    if (!sim_heap_push_seq(&w->heap, n->timer_t, n->timer_seq, n->timer_gen,
                           EV_AUX(EVK_TIMER, node, 0))) {
        world_fail(w, SIM_CRASH, "event queue bound hit (%llu events)",
                   (unsigned long long)w->heap.max_items);
        return;
    }
    n->timer_q = n->timer_t;
    n->timer_qgen = n->timer_gen;
}

void world_feed(sim_world *w, uint32_t node, ccoip_event *ev)
{
    if (w->failed || !node_runs(w, node)) return;
    sim_node *n = &w->nodes[node];
    ev->now_ns = w->now;
    rec_trace_event(w, node, ev);
    w->res->events++;
    /* Recording: the EVENT before the step; 'R', every polled action (all of
     * them, even when the node dies or the run fails meanwhile) and 'D' into
     * the state hash; a CHECKPOINT after draining (ccoip_trace.h). */
    const bool rec = n->rec != NULL;
    if (rec) rec_event(w, n, ev);
    const int rc = w->vt->step(n->m, n->is_master, ev);
    if (rec) ccoip_trace_writer_step(n->rec, rc);
    if (rc != 0) {
        world_fail(w, SIM_CRASH, "node %u (%s) step(event %d) returned %d", node,
                   n->is_master ? "master" : "peer", (int)ev->type, rc);
        if (!rec) return;
    }
    /* Actions by reference when the machines offer it (no 320-byte copy per action): each is
     * used only until act_run steps this machine again (a re-entrant world_feed, after which
     * no handler reads its action). */
    ccoip_action copy;
    const ccoip_action *act;
    uint32_t guard = 0;
    while (rec || (!w->failed && n->state != NODE_DEAD)) {
        if (w->vt->poll_ref != NULL) {
            act = w->vt->poll_ref(n->m, n->is_master);
            if (act == NULL) break;
        } else {
            if (!w->vt->poll(n->m, n->is_master, &copy)) break;
            act = &copy;
        }
        if (rec) ccoip_trace_writer_action(n->rec, act);
        if (w->failed || n->state == NODE_DEAD) continue;
        if (++guard > 1000000u) {
            world_fail(w, SIM_CRASH, "node %u emitted more than 10^6 actions for one event", node);
            if (!rec) return;
            continue;
        }
        act_run(w, node, act);
    }
    if (rec) rec_checkpoint(w, n, w->vt->deadline_ns(n->m, n->is_master));
    node_recount(w, node);
    if (w->failed || n->state == NODE_DEAD) return;
    const uint64_t dl = w->vt->deadline_ns(n->m, n->is_master);
    if (dl != CCOIP_NO_DEADLINE && dl != n->timer_at) {
        n->timer_at = dl;
        n->timer_gen++;
        /* The key an immediate push would get, (max(dl, now), next seq), is reserved, so the
         * timer fires in exactly the same place of the order whether it is pushed now or
         * later; it is pushed now only when earlier than the node's queued entry (a deadline
         * pushed forward, as every heartbeat does, stays where it is), which else re-pushes it
         * when it pops. Fewer stale entries: a smaller heap. */
        n->timer_t = dl < w->now ? w->now : dl;
        n->timer_seq = sim_heap_take_seq(&w->heap);
        if (n->timer_q == CCOIP_NO_DEADLINE || n->timer_t < n->timer_q) timer_push(w, node);
    } else if (dl == CCOIP_NO_DEADLINE) {
        n->timer_at = CCOIP_NO_DEADLINE;
        n->timer_gen++;
    }
}

/* ------------------------------------------------------------------------ */
/* The loop                                                                 */
/* ------------------------------------------------------------------------ */

static void fire(sim_world *w, const sim_ev *ev)
{
    ccoip_event e;
    memset(&e, 0, sizeof e);
    switch ((sim_evk)ev->kind) {
    case EVK_START:
        if (!node_runs(w, ev->node)) break;
        e.type = CCOIP_EV_START;
        world_feed(w, ev->node, &e);
        if (!w->nodes[ev->node].is_master) SIM_OBS_NODE(w, start, ev->node);
        break;
    case EVK_DELIVER:
        deliver(w, (uint32_t)ev->a);
        break;
    case EVK_ACCEPT: {
        sim_ep *ep = &w->eps[ev->a];
        if (ep->state != EP_CONNECTING || !node_runs(w, ep->node)) break;
        ep->state = EP_OPEN;
        e.type = CCOIP_EV_CONN_UP;
        e.conn = ep->id;
        e.accepted = true;
        e.listener = ep->listener;
        if (ep->other != SIM_NONE32) {
            host_ip(w->nodes[w->eps[ep->other].node].host, e.remote_ip);
            e.remote_ip_len = 4;
        }
        world_feed(w, ep->node, &e);
        break;
    }
    case EVK_CONN_UP: {
        sim_ep *ep = &w->eps[ev->a];
        if (ep->state != EP_CONNECTING || !node_runs(w, ep->node)) break;
        ep->state = EP_OPEN;
        e.type = CCOIP_EV_CONN_UP;
        e.conn = ep->id;
        world_feed(w, ep->node, &e);
        break;
    }
    case EVK_CONN_FAIL:
    case EVK_CONN_CLOSED: {
        sim_ep *ep = &w->eps[ev->a];
        if (ep->state == EP_CLOSED || !node_runs(w, ep->node)) break;
        ep->state = EP_CLOSED;
        /* The broken stream fails its pending I/O first (ccoip_sm.h), then CONN_CLOSED. */
        ios_fail_on_ep(w, ep->node, (uint32_t)ev->a);
        world_push(w, w->now, EVK_EP_BROKEN, ep->node, ev->a, 0);
        break;
    }
    case EVK_EP_BROKEN: {
        sim_ep *ep = &w->eps[ev->a];
        if (!node_runs(w, ep->node)) break;
        e.type = CCOIP_EV_CONN_CLOSED;
        e.conn = ep->id;
        world_feed(w, ep->node, &e);
        break;
    }
    case EVK_TIMER: {
        sim_node *n = &w->nodes[ev->node];
        if (!node_runs(w, ev->node)) break;
        if (ev->a == n->timer_gen && n->timer_at != CCOIP_NO_DEADLINE) {
            /* The live deadline's own key (it was pushed, so it was the tracked entry). */
            n->timer_q = CCOIP_NO_DEADLINE;
            n->timer_at = CCOIP_NO_DEADLINE;
            e.type = CCOIP_EV_TIMER;
            world_feed(w, ev->node, &e);
        } else if (ev->a == n->timer_qgen && w->now == n->timer_q) {
            /* The tracked entry of a deadline moved since: put the live key in its place. */
            n->timer_q = CCOIP_NO_DEADLINE;
            if (n->timer_at != CCOIP_NO_DEADLINE) timer_push(w, ev->node);
        }
        break;
    }
    case EVK_IO_DONE:
    case EVK_KERNEL: {
        if (!node_runs(w, ev->node)) break;
        sim_node *n = &w->nodes[ev->node];
        uint32_t idx;
        sim_io *io = io_find(n, ev->a, &idx);
        if (io == NULL) break; /* cancelled */
        e.type = ev->kind == EVK_KERNEL ? CCOIP_EV_KERNEL_DONE : CCOIP_EV_IO_DONE;
        e.done.io_id = io->io_id;
        e.done.result = io->result;
        if (ev->kind == EVK_KERNEL) {
            e.done.quant_out = io->quant_out;
            e.done.hash = io->hash;
        } else {
            e.done.quant = io->quant_in;
        }
        io_remove(n, idx);
        world_feed(w, ev->node, &e);
        break;
    }
    case EVK_PROBE: {
        if (!node_runs(w, ev->node)) break;
        sim_node *n = &w->nodes[ev->node];
        uint32_t idx;
        sim_io *io = io_find(n, ev->a, &idx);
        if (io == NULL) break;
        e.type = CCOIP_EV_PROBE_DONE;
        e.done.io_id = io->io_id;
        e.done.result = io->result;
        e.done.probe_bytes = io->probe_bytes;
        e.done.duration_us = io->duration_us;
        io_remove(n, idx);
        world_feed(w, ev->node, &e);
        break;
    }
    case EVK_WAKE:
        if (!node_runs(w, ev->node)) break;
        SIM_OBS_EACH(w, o)
        {
            if (o->wake != NULL) o->wake(o->ctx, ev->node, ev->a);
        }
        break;
    case EVK_SCRIPT:
        script_fire(w, (uint32_t)ev->a);
        break;
    case EVK_FAULT:
        if (ev->node >= w->num_nodes || w->nodes[ev->node].state != NODE_ALIVE) break;
        w->res->phase_faults++;
        if (ev->a != 0) {
            world_kill(w, ev->node, false);
        } else {
            node_hang(w, ev->node);
        }
        fault_noted(w);
        break;
    case EVK_FAULT_CHECK:
        fault_check(w, ev->a);
        break;
    case EVK_CHURN:
        churn_fire(w, (uint32_t)ev->a);
        break;
    case EVK_RESTART:
        if (!w->quiet || ev->b == 1u) world_spawn_peer(w, (uint32_t)ev->a);
        break;
    case EVK_PHASE:
        w->quiet = true;
        w->quiet_ns = w->now;
        world_log(w, "phase: churn over at %llu ms, %u live peers",
                  (unsigned long long)(w->now / SIM_MS), live_peers(w, false));
        for (uint32_t i = 1; i < w->num_nodes; i++) {
            w->nodes[i].steps_quiet = 0;
            node_recount(w, i);
        }
        /* The network heals: no more loss (fault windows already end with the churn). */
        w->cfg.loss_permille = 0;
        for (uint32_t h = 0; h < w->net.num_hosts; h++)
            w->net.hosts[h].loss_permille = 0;
        break;
    }
}

/* Starts loading what the next event in the queue will read first (its node's record, its
 * frame or endpoint) while the current one runs: the world is far larger than the caches.
 * A hint only: the next event may still change, nothing depends on it. */
static void prefetch_next(const sim_world *w)
{
    const sim_heap_val *v = sim_heap_peek_val(&w->heap);
    if (v == NULL) return;
    const uint32_t kind = (uint32_t)(v->aux & 0xffu);
    const uint32_t node = (uint32_t)(v->aux >> 32);
    if (kind == EVK_DELIVER) {
        const uint32_t f = (uint32_t)v->payload, e = (uint32_t)(v->payload >> 32);
        if (f < w->frames_len) __builtin_prefetch(&w->frames[f]);
        if (e < w->eps_len) __builtin_prefetch(&w->eps[e]);
        if (node < w->num_nodes) __builtin_prefetch(&w->nodes[node]);
    } else if (kind >= EVK_ACCEPT && kind <= EVK_CONN_CLOSED) {
        if (v->payload < w->eps_len) __builtin_prefetch(&w->eps[v->payload]);
        if (node < w->num_nodes) __builtin_prefetch(&w->nodes[node]);
    } else if (node < w->num_nodes) {
        __builtin_prefetch(&w->nodes[node]);
    }
    /* The machine's own memory (through the compact pointer array: no wait on the record). */
    if (w->vt->prefetch != NULL && node < w->num_nodes && w->node_m[node] != NULL) {
        w->vt->prefetch(w->node_m[node], node == 0, 0);
    }
}

static bool all_done(const sim_world *w)
{
    return w->quiet && w->undone == 0 && w->live >= 2u;
}

/* ------------------------------------------------------------------------ */
/* Observers                                                                */
/* ------------------------------------------------------------------------ */

bool world_observe(sim_world *w, const sim_observer *obs)
{
    if (w->nobs >= SIM_OBSERVERS_MAX) return false;
    w->obs[w->nobs++] = *obs;
    return true;
}

void world_wake_at(sim_world *w, uint32_t node, uint64_t delay_ns, uint64_t gen)
{
    world_push(w, w->now + delay_ns, EVK_WAKE, node, gen, 0);
}

bool sim_grow(void *arr, uint32_t *cap, uint32_t len, size_t elem, uint32_t first, bool aligned)
{
    if (len < *cap) return true;
    const uint32_t ncap = *cap == 0 ? first : 2u * *cap;
    void *old;
    memcpy(&old, arr, sizeof old);
    void *x;
    if (aligned) {
        x = aligned_alloc(64, (size_t)ncap * elem);
        if (x != NULL && len > 0) memcpy(x, old, (size_t)len * elem);
        if (x != NULL) free(old);
    } else {
        x = realloc(old, (size_t)ncap * elem);
    }
    if (x == NULL) return false;
    memcpy(arr, &x, sizeof x);
    *cap = ncap;
    return true;
}

uint32_t *sim_index_new(uint64_t n)
{
    uint32_t *x = malloc((size_t)n * sizeof *x);
    if (x != NULL) memset(x, 0xff, (size_t)n * sizeof *x);
    return x;
}

/* The decode arena for a frame of len bytes (valid until the next decode). */
static bool dec_arena(sim_world *w, uint64_t len, ccoip_pb_arena *arena)
{
    const uint64_t cap = ccoip_pb_arena_bound(len);
    if (cap == UINT64_MAX) return false;
    if (cap + 1u > w->dec_arena_cap) {
        uint64_t ncap = w->dec_arena_cap == 0 ? 4096u : w->dec_arena_cap;
        while (ncap < cap + 1u)
            ncap *= 2u;
        uint8_t *x = malloc((size_t)ncap);
        if (x == NULL) return false;
        free(w->dec_arena);
        w->dec_arena = x;
        w->dec_arena_cap = ncap;
    }
    ccoip_pb_arena_init(arena, w->dec_arena, cap);
    return true;
}

bool world_decode_m2p(sim_world *w, const uint8_t *frame, uint64_t len,
                      ccoip_pb_master_to_peer *out)
{
    ccoip_pb_arena arena;
    return dec_arena(w, len, &arena) &&
           ccoip_ctrl_decode_m2p(frame, len, NULL, &arena, out) == pcclSuccess;
}

bool world_decode_p2m(sim_world *w, const uint8_t *frame, uint64_t len,
                      ccoip_pb_peer_to_master *out)
{
    ccoip_pb_arena arena;
    return dec_arena(w, len, &arena) &&
           ccoip_ctrl_decode_p2m(frame, len, NULL, &arena, out) == pcclSuccess;
}

/* ------------------------------------------------------------------------ */
/* A world's life                                                           */
/* ------------------------------------------------------------------------ */

sim_world *world_create(const sim_config *cfg, const sim_sm_vt *vt, sim_result *res)
{
    sim_world *w = calloc(1, sizeof *w);
    if (w == NULL) {
        res->status = SIM_CRASH;
        return NULL;
    }
    w->cfg = *cfg;
    if (w->cfg.max_peers < w->cfg.peers) w->cfg.max_peers = w->cfg.peers;
    w->vt = vt;
    w->res = res;
    w->lossy = cfg->loss_permille > 0;
    sim_rng_seed(&w->rng, cfg->seed);
    w->net_rng = sim_rng_fork(&w->rng, 0x6e6574u);
    sim_trace_init(&w->trace);
    w->elem_bytes = ccoip_dtype_size(cfg->dtype);
    w->cap_nodes = w->cfg.max_peers + 1u;
    /* 64-byte aligned records (sim_node's hot lines), zeroed lazily by the system. */
    w->nodes_mem = calloc((size_t)w->cap_nodes * sizeof *w->nodes + 64u, 1);
    w->nodes = w->nodes_mem == NULL
                   ? NULL
                   : (sim_node *)(void *)(((uintptr_t)w->nodes_mem + 63u) & ~(uintptr_t)63u);
    w->node_st = calloc(w->cap_nodes, 1);
    w->node_group = calloc(w->cap_nodes, sizeof *w->node_group);
    w->node_host = calloc(w->cap_nodes, sizeof *w->node_host);
    w->node_m = calloc(w->cap_nodes, sizeof *w->node_m);
    w->eps_cap = 256;
    w->eps = aligned_alloc(64, w->eps_cap * sizeof *w->eps);
    w->ep_map_cap = 1024;
    w->ep_map = malloc((size_t)w->ep_map_cap * sizeof *w->ep_map);
    w->frames_cap = 1024;
    w->frames = aligned_alloc(64, w->frames_cap * sizeof *w->frames);
    w->frame_free = malloc(w->frames_cap * sizeof *w->frame_free);
    w->next_accept_id = CCOIP_CONN_ACCEPTED_BASE + 1u;
    w->spawn_group = SIM_NONE32;
    w->host_node_cap = w->cap_nodes + 2u;
    w->host_node = sim_index_new(w->host_node_cap);
    const bool ok = w->host_node != NULL && w->nodes != NULL && w->node_st != NULL &&
                    w->node_group != NULL && w->node_host != NULL && w->node_m != NULL &&
                    w->eps != NULL && w->ep_map != NULL && w->frames != NULL &&
                    w->frame_free != NULL && sim_heap_init(&w->heap, 1u << 24) &&
                    sim_net_init(&w->net, w->cap_nodes + 1u, 1024u);
    if (!ok) {
        world_fail(w, SIM_CRASH, "out of memory at start");
    } else {
        memset(w->ep_map, 0xff, (size_t)w->ep_map_cap * sizeof *w->ep_map);
    }
    return w;
}

void world_start(sim_world *w)
{
    if (w->failed) return;
    /* Regions (sim_config.regions): the tables as configured. */
    if (w->cfg.regions <= SIM_NET_REGION_MAX) {
        w->net.regions = w->cfg.regions;
        memcpy(w->net.region_latency_ns, w->cfg.region_latency_ns, sizeof w->net.region_latency_ns);
        memcpy(w->net.region_bps, w->cfg.region_bps, sizeof w->net.region_bps);
    }
    /* The master's host: a well-connected machine (in region 0 when there are regions). */
    sim_host_link ml;
    memset(&ml, 0, sizeof ml);
    ml.latency_ns = w->cfg.latency_min_ns / 2u;
    ml.up_bps = w->cfg.bw_max_bps;
    ml.down_bps = w->cfg.bw_max_bps;
    sim_net_add_host(&w->net, &ml);
    const uint32_t master = node_new(w, true, 0);
    if (master != SIM_NONE32) world_push(w, 0, EVK_START, master, 0, 0);
    for (uint32_t i = 0; i < w->cfg.peers && !w->failed; i++) {
        /* Staggered starts: processes do not all come up at once. */
        const uint32_t node = world_spawn_peer(w, SIM_NONE32);
        (void)node;
    }
    churn_start(w);
}

void world_run(sim_world *w)
{
    const uint64_t deadline = w->cfg.churn_ns + w->cfg.liveness_bound_ns;
    sim_heap_item it;
    uint64_t aux;
    while (!w->failed && !w->done) {
        if (!sim_heap_pop2(&w->heap, &it, &aux)) {
            world_fail(w, SIM_LIVENESS, "no more events but the run is not done");
            break;
        }
        if (it.time_ns > deadline) {
            w->now = deadline;
            world_fail(w, SIM_LIVENESS, "not done %llu ms after churn stopped",
                       (unsigned long long)(w->cfg.liveness_bound_ns / SIM_MS));
            break;
        }
        w->now = it.time_ns;
        const sim_ev ev = {(uint32_t)(aux & 0xffu), (uint32_t)(aux >> 32), it.payload,
                           (aux >> 8) & 0xffffffu};
        if (w->vt->prefetch != NULL && ev.node < w->num_nodes && w->node_m[ev.node] != NULL) {
            w->vt->prefetch(w->node_m[ev.node], ev.node == 0, 1);
        }
        prefetch_next(w);
        fire(w, &ev);
        if (w->grave_len > 0) bury_dead(w);
        if (w->res->events > w->cfg.max_events) {
            world_fail(w, SIM_LIVENESS, "more than %llu events",
                       (unsigned long long)w->cfg.max_events);
        }
        supervise(w);
        if (w->quiet && w->now >= w->next_progress_ns) {
            supervise_groups(w);
            SIM_OBS_WORLD(w, tick);
            w->next_progress_ns = w->now + 100u * SIM_MS;
        }
        if (!w->failed && all_done(w)) w->done = true;
    }
    SIM_OBS_WORLD(w, end);
    rec_finish(w);
    sim_result *out = w->res;
    out->trace_hash = w->trace.hash;
    out->end_ns = w->now;
    out->net_frames = w->net.frames;
    out->net_bytes = w->net.bytes;
    out->live_peers_end = live_peers(w, false);
    if (!w->failed) out->status = SIM_OK;
}

void world_destroy(sim_world *w)
{
    if (w == NULL) return;
    for (uint32_t i = 0; i < w->num_nodes; i++)
        node_release(w, i);
    free(w->grave);
    for (uint32_t f = 0; f < w->frames_len; f++)
        free(w->frames[f].bytes);
    for (uint32_t e = 0; e < w->eps_len; e++)
        free(w->eps[e].inbox);
    for (uint32_t i = 0; i < w->num_nodes; i++)
        rec_close(&w->nodes[i]);
    free(w->host_node);
    free(w->dec_arena);
    free(w->frames);
    free(w->frame_free);
    free(w->eps);
    free(w->ep_map);
    free(w->acc_tab);
    free(w->nodes_mem);
    free(w->node_st);
    free(w->node_group);
    free(w->node_host);
    free(w->node_m);
    free(w->sup_cnt);
    free(w->sup_lone);
    sim_heap_deinit(&w->heap);
    sim_net_deinit(&w->net);
    free(w);
}
