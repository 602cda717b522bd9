/*
 * sim_fault.c — faults timed into a phase, and the survivors' bound after a
 * fault (docs/simulator.md "Phase faults").
 *
 * A phase fault is armed (by a script or by the phase-fault churn) for one
 * kind of phase (sim_phase). The first frame the master sends that starts
 * such a phase — a TopologyPlan answering votes (admit), a plan notification
 * (re-wire), an OptimizeTopologyVerdict with a plan (optimized re-wire),
 * BandwidthProbeRequests, a SharedStateSyncVerdict, a CollectiveCommence —
 * makes the victim (a scripted peer, else that frame's recipient) hang for
 * good (its sockets stay open, it never runs again: SIGSTOP) or crash, in
 * the same instant: the frame is still in flight, so the victim never acts
 * on the phase it is a member of.
 *
 * The bound: after a peer hangs, crashes or leaves at t, every command a
 * running peer submitted before t has its result by t + fault_bound_ns
 * (evict_ms, to notice a silent peer, plus SIM_FAULT_SLACK_NS plus 16 one-way
 * latencies for the re-wire and the retries that follow). Only the newest
 * fault is checked: a later fault, a partition or clog window, or frame loss
 * (lossy runs during churn) makes waits legitimately longer, so a fault
 * followed by one of those within its bound is not checked.
 */
#include <string.h>

#include "sim_world_int.h"

/** Room after evict_ms for the phase to fail, the re-wire and the callers' retries. */
#define SIM_FAULT_SLACK_NS (2u * SIM_SEC)

uint64_t fault_bound_ns(const sim_world *w)
{
    /* Peers behind NAT (--no-inbound): each is found out once, by a dial that waits for the
     * connect timeout and fails its phase; the next phase dials its links from it. */
    uint64_t nat = 0;
    for (uint32_t m = w->cfg.no_inbound_hosts; m != 0; m &= m - 1u)
        nat += SIM_CONNECT_TIMEOUT_NS + 16u * w->cfg.latency_max_ns;
    return (uint64_t)w->cfg.evict_ms * SIM_MS + SIM_FAULT_SLACK_NS + 16u * w->cfg.latency_max_ns +
           nat;
}

void fault_arm(sim_world *w, uint32_t phase, bool crash, uint32_t victim, uint32_t min_ring,
               uint32_t skip, bool scripted)
{
    if (phase == 0 || phase >= SIM_PH_END) return;
    w->pf_armed = true;
    w->pf_phase = phase;
    w->pf_crash = crash;
    w->pf_victim = victim;
    w->pf_min_ring = min_ring;
    w->pf_skip = skip;
    w->pf_scripted = scripted;
}

/* The phase a master frame starts, and the size of its ring (UINT32_MAX: not a ring). */
static uint32_t classify(const ccoip_pb_master_to_peer *m, uint32_t *ring)
{
    *ring = UINT32_MAX;
    switch (m->body_case) {
    case CCOIP_PB_MASTER_TO_PEER_BODY_TOPOLOGY_PLAN:
        *ring = (uint32_t)m->body.topology_plan.ring_count;
        return m->call_id != 0 ? SIM_PH_ADMIT : SIM_PH_REWIRE;
    case CCOIP_PB_MASTER_TO_PEER_BODY_OPTIMIZE_VERDICT:
        if (!m->body.optimize_verdict.success || !m->body.optimize_verdict.has_plan) return 0;
        *ring = (uint32_t)m->body.optimize_verdict.plan.ring_count;
        return SIM_PH_OPT_REWIRE;
    case CCOIP_PB_MASTER_TO_PEER_BODY_PROBE_REQUESTS:
        return SIM_PH_PROBE;
    case CCOIP_PB_MASTER_TO_PEER_BODY_SYNC_VERDICT:
        return m->status == CCOIP_PB_STATUS_SUCCESS ? SIM_PH_SYNC : 0;
    case CCOIP_PB_MASTER_TO_PEER_BODY_COLLECTIVE_COMMENCE:
        return SIM_PH_COLLECTIVE;
    default:
        return 0;
    }
}

void fault_on_m2p(sim_world *w, uint32_t dst_node, const ccoip_pb_master_to_peer *m)
{
    if (!w->pf_armed) return;
    if (w->quiet && !w->pf_scripted) {
        w->pf_armed = false; /* churn is over: no more faults */
        return;
    }
    uint32_t ring;
    const uint32_t ph = classify(m, &ring);
    if (ph != w->pf_phase || ring < w->pf_min_ring) return;
    if (w->pf_skip > 0) {
        w->pf_skip--;
        return;
    }
    const uint32_t victim = w->pf_victim != SIM_NONE32 ? w->pf_victim : dst_node;
    if (victim >= w->num_nodes || w->nodes[victim].state != NODE_ALIVE) return;
    w->pf_armed = false;
    world_log(w, "phase fault: %s node %u (peer %u) as the master starts phase kind %u",
              w->pf_crash ? "crash" : "hang", victim, w->nodes[victim].peer_index, ph);
    /* In this instant, after the master's step: the frame is in flight, never acted on. */
    world_push(w, w->now, EVK_FAULT, victim, w->pf_crash ? 1u : 0u, 0);
    if (w->pf_scripted) w->seen_expect |= SIM_EXPECT_PHASE_FAULT;
}

void fault_noted(sim_world *w)
{
    w->flt_gen++;
    w->flt_ns = w->now;
    world_push(w, w->now + fault_bound_ns(w), EVK_FAULT_CHECK, 0, w->flt_gen, 0);
}

void fault_net_window(sim_world *w, uint64_t until_ns)
{
    w->flt_gen++; /* a pending check is dropped */
    if (until_ns > w->net_busy_until) w->net_busy_until = until_ns;
}

void fault_check(sim_world *w, uint64_t gen)
{
    if (gen != w->flt_gen || w->failed) return; /* a newer fault or window: not checked */
    /* Loss breaks connections at random during churn (more faults than the one checked). */
    if (w->lossy && w->flt_ns < w->cfg.churn_ns) return;
    /* A network window that ended shortly before the fault may still have evictions due. */
    const uint64_t evict = (uint64_t)w->cfg.evict_ms * SIM_MS;
    if (w->net_busy_until != 0 && w->net_busy_until + evict >= w->flt_ns) return;
    w->res->fault_checks++;
    SIM_OBS_WORLD(w, fault_due); /* every live peer's command older than the fault is done */
}
