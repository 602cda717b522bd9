/*
 * sim_churn.c — churn and scripted events (docs/simulator.md "What a run
 * is"): joins, graceful leaves, crashes, hangs, restarts and phase faults as
 * Poisson processes during the churn phase, partitions and clogs as network
 * windows, and the scenarios' scripted events at their times.
 */
#include <string.h>

#include "sim_world_int.h"

/* A random peer in the given state (SIM_NONE32 when none). */
static uint32_t pick_peer(sim_world *w, sim_node_state st)
{
    uint32_t k = 0;
    for (uint32_t i = 1; i < w->num_nodes; i++)
        k += w->nodes[i].state == st;
    if (k == 0) return SIM_NONE32;
    uint64_t r = sim_rng_below(&w->rng, k);
    for (uint32_t i = 1; i < w->num_nodes; i++) {
        if (w->nodes[i].state != st) continue;
        if (r-- == 0) return i;
    }
    return SIM_NONE32;
}

static uint32_t node_of_peer(const sim_world *w, uint32_t peer_index)
{
    for (uint32_t i = 1; i < w->num_nodes; i++) {
        if (w->nodes[i].peer_index == peer_index) return i;
    }
    return SIM_NONE32;
}

enum {
    CHURN_JOIN = 1,
    CHURN_LEAVE,
    CHURN_CRASH,
    CHURN_HANG,
    CHURN_RESTART,
    CHURN_PHASE_FAULT,
    CHURN_PARTITION,
    CHURN_CLOG,
    CHURN_KIND_END
};

static uint32_t churn_rate(const sim_config *c, uint32_t kind)
{
    switch (kind) {
    case CHURN_JOIN:
        return c->join_per_min;
    case CHURN_LEAVE:
        return c->leave_per_min;
    case CHURN_CRASH:
        return c->crash_per_min;
    case CHURN_HANG:
        return c->hang_per_min;
    case CHURN_RESTART:
        return c->restart_per_min;
    case CHURN_PHASE_FAULT:
        return c->phase_fault_per_min;
    default:
        return 0;
    }
}

static void churn_schedule_next(sim_world *w, uint32_t kind)
{
    const uint32_t rate = churn_rate(&w->cfg, kind);
    if (rate == 0) return;
    const uint64_t mean = 60u * SIM_SEC / rate;
    const uint64_t t = w->now + 1u + sim_rng_exp(&w->rng, mean);
    if (t < w->cfg.churn_ns) world_push(w, t, EVK_CHURN, 0, kind, 0);
}

static void add_window(sim_world *w, sim_fault_kind kind)
{
    sim_fault f;
    memset(&f, 0, sizeof f);
    f.kind = kind;
    f.from_ns = w->now;
    const uint64_t max_dur = (uint64_t)w->cfg.evict_ms * 2u * SIM_MS;
    f.until_ns = w->now + sim_rng_range(&w->rng, 50u * SIM_MS,
                                        max_dur > 50u * SIM_MS ? max_dur : 100u * SIM_MS);
    if (f.until_ns > w->cfg.churn_ns) f.until_ns = w->cfg.churn_ns;
    const uint32_t a = pick_peer(w, NODE_ALIVE);
    if (a == SIM_NONE32) return;
    fault_net_window(w, f.until_ns);
    if (kind == SIM_FAULT_PARTITION) {
        f.set[f.set_len++] = w->nodes[a].host;
        const uint32_t b = pick_peer(w, NODE_ALIVE);
        if (b != SIM_NONE32 && b != a) f.set[f.set_len++] = w->nodes[b].host;
    } else {
        f.a = w->nodes[a].host;
        const uint32_t b = pick_peer(w, NODE_ALIVE);
        f.b = b == SIM_NONE32 || b == a ? 0u : w->nodes[b].host;
    }
    sim_net_add_fault(&w->net, &f);
}

void churn_fire(sim_world *w, uint32_t kind)
{
    if (w->quiet) return;
    uint32_t p;
    switch (kind) {
    case CHURN_JOIN:
        world_spawn_peer(w, SIM_NONE32);
        break;
    case CHURN_LEAVE:
        p = pick_peer(w, NODE_ALIVE);
        if (p != SIM_NONE32) {
            SIM_OBS_NODE(w, leave, p);
            fault_noted(w);
        }
        break;
    case CHURN_CRASH:
        p = pick_peer(w, NODE_ALIVE);
        if (p != SIM_NONE32) {
            world_kill(w, p, false);
            fault_noted(w);
        }
        break;
    case CHURN_HANG:
        p = pick_peer(w, NODE_ALIVE);
        if (p != SIM_NONE32) {
            node_hang(w, p);
            fault_noted(w);
        }
        break;
    case CHURN_RESTART:
        p = pick_peer(w, NODE_ALIVE);
        if (p != SIM_NONE32) {
            const uint32_t host = w->nodes[p].host;
            world_kill(w, p, false);
            world_push(w, w->now + sim_rng_range(&w->rng, 100u * SIM_MS, 2u * SIM_SEC), EVK_RESTART,
                       0, host, 0);
            fault_noted(w);
        }
        break;
    case CHURN_PHASE_FAULT: {
        /* The next phase of a random kind: its skip-th recipient hangs or crashes in it. */
        const uint32_t ph = SIM_PH_ADMIT + (uint32_t)sim_rng_below(&w->rng, SIM_PH_END - 1u);
        const bool crash = sim_rng_chance(&w->rng, 500);
        const uint32_t skip = (uint32_t)sim_rng_below(&w->rng, 4);
        fault_arm(w, ph, crash, SIM_NONE32, 0, skip, false);
        break;
    }
    case CHURN_PARTITION:
        add_window(w, SIM_FAULT_PARTITION);
        break;
    case CHURN_CLOG:
        add_window(w, SIM_FAULT_CLOG);
        break;
    default:
        break;
    }
    if (kind < CHURN_PARTITION) churn_schedule_next(w, kind);
}

void script_fire(sim_world *w, uint32_t i)
{
    const sim_script_event *s = &w->cfg.script[i];
    const uint32_t node = node_of_peer(w, s->peer);
    world_log(w, "script[%u]: kind %d peer %u (node %d)", i, (int)s->kind, s->peer,
              node == SIM_NONE32 ? -1 : (int)node);
    if (s->kind != SIM_SCRIPT_JOIN && s->kind != SIM_SCRIPT_CUT && node == SIM_NONE32) return;
    switch (s->kind) {
    case SIM_SCRIPT_JOIN:
        world_spawn_peer(w, SIM_NONE32);
        break;
    case SIM_SCRIPT_LEAVE:
        SIM_OBS_NODE(w, leave, node);
        fault_noted(w);
        break;
    case SIM_SCRIPT_CRASH:
        world_kill(w, node, false);
        fault_noted(w);
        break;
    case SIM_SCRIPT_HANG:
        if (w->nodes[node].state == NODE_ALIVE) {
            node_hang(w, node);
            fault_noted(w);
        }
        break;
    case SIM_SCRIPT_RESTART: {
        const uint32_t host = w->nodes[node].host;
        world_kill(w, node, false);
        world_push(w, w->now + 500u * SIM_MS, EVK_RESTART, 0, host, 0);
        fault_noted(w);
        break;
    }
    case SIM_SCRIPT_PHASE_FAULT:
        fault_arm(w, (uint32_t)(s->arg & 0xffu), (s->arg & SIM_PHASE_FAULT_CRASH) != 0, node,
                  (uint32_t)((s->arg >> 8) & 0xffu), 0, true);
        break;
    case SIM_SCRIPT_CUT: {
        const uint32_t other = node_of_peer(w, (uint32_t)s->arg);
        if (node == SIM_NONE32 || other == SIM_NONE32) break;
        sim_fault f;
        memset(&f, 0, sizeof f);
        f.kind = SIM_FAULT_CUT;
        f.a = w->nodes[node].host;
        f.b = w->nodes[other].host;
        f.from_ns = w->now;
        f.until_ns = SIM_NET_FOREVER;
        sim_net_add_fault(&w->net, &f);
        break;
    }
    case SIM_SCRIPT_STALL:
    case SIM_SCRIPT_MISMATCH:
    case SIM_SCRIPT_ROGUE_TAG:
    case SIM_SCRIPT_DIVERGE:
    case SIM_SCRIPT_SKIP_REVISION:
        /* The application's own behaviour: the observers' script hook (the workload). */
        SIM_OBS_EACH(w, o)
        {
            if (o->script != NULL) o->script(o->ctx, node, s);
        }
        break;
    case SIM_SCRIPT_CRASH_MID_RING:
        w->nodes[node].crash_after_sends = s->arg > 0 ? s->arg : 1u;
        break;
    case SIM_SCRIPT_CRASH_MID_STATE:
        w->crash_state_after = s->arg > 0 ? s->arg : 1u; /* whoever distributes next */
        break;
    }
}

void churn_start(sim_world *w)
{
    for (uint32_t k = CHURN_JOIN; k < CHURN_PARTITION; k++)
        churn_schedule_next(w, k);
    for (uint32_t i = 0; i < w->cfg.partitions; i++) {
        world_push(w, sim_rng_below(&w->rng, w->cfg.churn_ns + 1u), EVK_CHURN, 0, CHURN_PARTITION,
                   0);
    }
    for (uint32_t i = 0; i < w->cfg.clogs; i++) {
        world_push(w, sim_rng_below(&w->rng, w->cfg.churn_ns + 1u), EVK_CHURN, 0, CHURN_CLOG, 0);
    }
    for (uint32_t i = 0; i < w->cfg.script_len; i++) {
        world_push(w, w->cfg.script[i].time_ns, EVK_SCRIPT, 0, i, 0);
    }
    /* The quiet phase begins (after every event scheduled so far at that instant). */
    world_push(w, w->cfg.churn_ns, EVK_PHASE, 0, 0, 0);
}
