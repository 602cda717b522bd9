/*
 * sim_check_live.c — the liveness checkers (docs/simulator.md "What a run is",
 * "Phase faults"): in the quiet phase no command waits longer than the op
 * bound (vote timeout + 4 × evict time + 20 s, counted from the end of churn
 * at the earliest), and after a fault every command a running peer submitted
 * before it has its result by the fault's bound (sim_fault.c decides which
 * fault is checked and when).
 */
#include "sim_check_int.h"

/* A check of one waiting command of node i, submitted at since. */
typedef void (*wait_check_fn)(sim_checker *ck, uint32_t i, uint64_t since, const char *what);

/* Every pending command of every running peer, in node order, until one fails. */
static void each_wait(sim_checker *ck, wait_check_fn check)
{
    sim_world *w = ck->w;
    for (uint32_t i = 1; i < w->num_nodes && !w->failed; i++) {
        if (w->node_st[i] != (uint8_t)NODE_ALIVE) continue;
        const sim_app *a = app_of(ck->wl, i);
        if (a->pending_cmd != 0) check(ck, i, a->pending_since_ns, "a command");
        for (uint32_t t = 0; t < SIM_MAX_TAGS; t++) {
            const sim_appcmd *c = &a->cmds[t];
            if (c->used && !c->done) check(ck, i, c->submitted_ns, "an all-reduce");
        }
    }
}

static uint64_t op_bound_ns(const sim_world *w)
{
    /* A vote may wait for a straggler's eviction, which may wait for a
     * heartbeat eviction first; plus room for the transfer itself. */
    return ((uint64_t)w->cfg.vote_timeout_ms + 4u * (uint64_t)w->cfg.evict_ms) * SIM_MS +
           20u * SIM_SEC;
}

static void cmd_age(sim_checker *ck, uint32_t i, uint64_t since, const char *what)
{
    sim_world *w = ck->w;
    const uint64_t start = since > w->quiet_ns ? since : w->quiet_ns;
    if (w->now > start && w->now - start > op_bound_ns(w)) {
        world_fail(w, SIM_LIVENESS,
                   "node %u (peer %u): %s waits for its verdict since %llu ms (bound %llu ms after "
                   "churn stopped)",
                   i, w->nodes[i].peer_index, what, (unsigned long long)(since / SIM_MS),
                   (unsigned long long)(op_bound_ns(w) / SIM_MS));
    }
}

void check_progress(void *ctx)
{
    sim_checker *ck = ctx;
    const sim_world *w = ck->w;
    if (!w->quiet) return;
    /* Every wait counts from quiet_ns at the earliest: none can exceed the bound yet (no walk
     * over every node's records). */
    if (w->now <= w->quiet_ns || w->now - w->quiet_ns <= op_bound_ns(w)) return;
    each_wait(ck, cmd_age);
}

static void cmd_after_fault(sim_checker *ck, uint32_t i, uint64_t since, const char *what)
{
    sim_world *w = ck->w;
    if (since > w->flt_ns || w->failed) return;
    world_fail(
        w, SIM_LIVENESS,
        "node %u (peer %u): %s submitted at %llu ms still waits at %llu ms, after a peer "
        "hung, crashed or left at %llu ms (bound: evict_ms %u + %llu ms)",
        i, w->nodes[i].peer_index, what, (unsigned long long)(since / SIM_MS),
        (unsigned long long)(w->now / SIM_MS), (unsigned long long)(w->flt_ns / SIM_MS),
        w->cfg.evict_ms,
        (unsigned long long)((fault_bound_ns(w) - (uint64_t)w->cfg.evict_ms * SIM_MS) / SIM_MS));
}

void check_fault_due(void *ctx)
{
    each_wait(ctx, cmd_after_fault);
}
