/*
 * sim_node.c — the processes of the world: the master and peer nodes, their
 * state machines and hosts, creation, death (crash, exit, hang), per-step
 * replacement, the release of dead processes' memory, and the liveness
 * phase's supervisor.
 */
#include <stdlib.h>
#include <string.h>

#include "sim_world_int.h"

/* Keeps w->live (running peers) and w->undone (running peers that have not
 * finished their steps) in step with node's state: O(1) per change. */
void node_recount(sim_world *w, uint32_t node)
{
    sim_node *n = &w->nodes[node];
    if (n->is_master) return;
    const bool live = n->state == NODE_ALIVE;
    const bool undone =
        live && (!n->admitted || n->steps_quiet + n->inherited_steps < w->cfg.steps);
    if (live != n->counted_live) {
        w->live += live ? 1u : (uint32_t)-1;
        n->counted_live = live;
    }
    if (undone != n->counted_undone) {
        w->undone += undone ? 1u : (uint32_t)-1;
        n->counted_undone = undone;
    }
}

static uint32_t default_group(const sim_world *w, uint32_t peer_index)
{
    if (w->cfg.group_size == 0) return 0;
    const uint32_t groups = (w->cfg.peers + w->cfg.group_size - 1u) / w->cfg.group_size;
    if (peer_index < w->cfg.peers) return peer_index / w->cfg.group_size;
    return groups > 0 ? peer_index % groups : 0;
}

uint32_t node_new(sim_world *w, bool is_master, uint32_t host)
{
    if (w->num_nodes >= w->cap_nodes) return SIM_NONE32;
    const uint32_t idx = w->num_nodes++;
    sim_node *n = &w->nodes[idx];
    memset(n, 0, sizeof *n);
    n->is_master = is_master;
    n->host = host;
    w->node_host[idx] = host;
    node_set_state(w, idx, NODE_ALIVE);
    n->timer_at = CCOIP_NO_DEADLINE;
    n->timer_q = CCOIP_NO_DEADLINE;
    n->rng = sim_rng_fork(&w->rng, idx);
    const uint64_t seed = sim_rng_next(&n->rng);
    if (is_master) {
        sim_master_params p = {
            SIM_MASTER_PORT,        w->cfg.heartbeat_ms,
            w->cfg.evict_ms,        w->cfg.vote_timeout_ms,
            w->cfg.max_peers + 1u,  (w->cfg.canary & SIM_CANARY_SKIP_ABORT_VERDICT) != 0,
            w->cfg.relay_max_bytes, w->cfg.auth != 0,
            w->cfg.probe_bytes};
        n->m = w->vt->master_create(&p, seed);
        if (w->cfg.record_trace) {
            ccoip_trace_header h;
            if (sim_sm_trace_header(true, &p, NULL, seed, &h)) rec_open(w, n, &h);
        }
    } else {
        sim_peer_params p;
        memset(&p, 0, sizeof p);
        host_ip(0, p.master_ip);
        p.master_port = SIM_MASTER_PORT;
        p.p2p_pool_size = w->cfg.p2p_pool_size;
        p.max_ops = SIM_MAX_OPS;
        p.heartbeat_ms = w->cfg.heartbeat_ms;
        p.evict_ms = w->cfg.evict_ms;
        p.canary_skip_restore = (w->cfg.canary & SIM_CANARY_SKIP_RESTORE) != 0;
        p.auth = w->cfg.auth != 0;
        n->peer_index = w->num_peers_created++;
        n->group = w->spawn_group != SIM_NONE32 ? w->spawn_group : default_group(w, n->peer_index);
        p.peer_group = n->group;
        w->node_group[idx] = n->group;
        n->m = w->vt->peer_create(&p, seed);
        if (w->cfg.record_trace) {
            ccoip_trace_header h;
            if (sim_sm_trace_header(false, NULL, &p, seed, &h)) rec_open(w, n, &h);
        }
    }
    if (host < w->host_node_cap) w->host_node[host] = idx;
    w->node_m[idx] = n->m;
    if (n->m == NULL) {
        world_fail(w, SIM_CRASH, "cannot create %s state machine", is_master ? "master" : "peer");
        return SIM_NONE32;
    }
    node_recount(w, idx);
    return idx;
}

static uint32_t new_host(sim_world *w)
{
    sim_host_link l;
    memset(&l, 0, sizeof l);
    l.latency_ns = sim_rng_range(&w->rng, w->cfg.latency_min_ns, w->cfg.latency_max_ns) / 2u;
    l.up_bps = sim_rng_range(&w->rng, w->cfg.bw_min_bps, w->cfg.bw_max_bps);
    l.down_bps = sim_rng_range(&w->rng, w->cfg.bw_min_bps, w->cfg.bw_max_bps);
    l.loss_permille = w->cfg.loss_permille;
    /* Host 0 is the master's: peer hosts 1..SIM_HOST_CFG_MAX may have configured rates,
     * latencies and regions (a known matrix); the draws above happen anyway, so configuring
     * one host changes no other's. */
    const uint32_t k = w->net.num_hosts - 1u;
    if (w->net.num_hosts >= 1u && k < SIM_HOST_CFG_MAX) {
        if (w->cfg.host_up_bps[k] != 0) {
            l.up_bps = w->cfg.host_up_bps[k];
            l.down_bps = w->cfg.host_down_bps[k] != 0 ? w->cfg.host_down_bps[k] : l.up_bps;
        }
        if (w->cfg.host_latency_ns[k] != 0) l.latency_ns = w->cfg.host_latency_ns[k];
        l.region = w->cfg.host_region[k];
    }
    return sim_net_add_host(&w->net, &l);
}

uint32_t world_spawn_peer(sim_world *w, uint32_t host)
{
    if (w->num_peers_created >= w->cfg.max_peers) return SIM_NONE32;
    if (host == SIM_NONE32) host = new_host(w);
    if (host == SIM_NONE32) return SIM_NONE32;
    const uint32_t node = node_new(w, false, host);
    if (node == SIM_NONE32) return SIM_NONE32;
    w->res->joins++;
    world_push(w, w->now, EVK_START, node, 0, 0);
    return node;
}

void world_kill(sim_world *w, uint32_t node, bool graceful)
{
    sim_node *n = &w->nodes[node];
    if (n->state == NODE_DEAD) return;
    if (!graceful) w->res->crashes++;
    node_set_state(w, node, NODE_DEAD);
    if (sim_grow(&w->grave, &w->grave_cap, w->grave_len, sizeof *w->grave, 64u, false)) {
        w->grave[w->grave_len++] = node;
    }
    n->died_ns = w->now;
    SIM_OBS_NODE(w, killed, node);
    node_recount(w, node);
    /* The OS closes every socket of the process (in creation order, as a walk over all
     * endpoints would). */
    for (uint32_t e = n->ep_first1 - 1u; n->ep_first1 != 0 && e != SIM_NONE32;
         e = w->eps[e].next_of_node) {
        if (w->eps[e].node == node && w->eps[e].state != EP_CLOSED) {
            w->eps[e].state = EP_CLOSED;
            ep_close_remote(w, e);
        }
    }
}

uint32_t live_peers(const sim_world *w, bool include_hung)
{
    if (!include_hung) return w->live;
    uint32_t k = 0;
    for (uint32_t i = 1; i < w->num_nodes; i++) {
        if (w->nodes[i].state == NODE_ALIVE || w->nodes[i].state == NODE_HUNG) k++;
    }
    return k;
}

/* Per-step churn (sim_config.churn_per_step_bp): node's process is replaced
 * by a new one in its group that carries on its step count. */
void world_replace_peer(sim_world *w, uint32_t node)
{
    sim_node *n = &w->nodes[node];
    const uint64_t steps = n->steps_quiet + n->inherited_steps;
    w->spawn_group = n->group;
    const uint32_t fresh = world_spawn_peer(w, SIM_NONE32);
    w->spawn_group = SIM_NONE32;
    if (fresh == SIM_NONE32) return;
    w->nodes[fresh].inherited_steps = steps;
    world_kill(w, node, false);
    w->res->replaced++;
    fault_noted(w);
}

/* node hangs for good: it never runs again, its sockets stay open. */
void node_hang(sim_world *w, uint32_t node)
{
    node_set_state(w, node, NODE_HUNG);
    node_recount(w, node);
    w->res->hangs++;
}

/* Liveness phase: a supervisor keeps at least two peers running. */
void supervise(sim_world *w)
{
    if (!w->quiet) return;
    uint32_t live = live_peers(w, false);
    while (live < 2u && w->num_peers_created < w->cfg.max_peers) {
        if (world_spawn_peer(w, SIM_NONE32) == SIM_NONE32) break;
        live++;
    }
}

/* Liveness phase, peer groups: a peer left alone in its group (the others crashed or never got
 * in) can never complete a collective (TOO_FEW_PEERS) however long it runs. When one is still
 * short of its steps 5 s after churn stopped, the supervisor starts a partner in its group, as
 * an operator would. Checked with the progress checker (every 100 ms simulated). */
void supervise_groups(sim_world *w)
{
    if (w->now < w->quiet_ns + 5u * SIM_SEC || w->undone == 0) return;
    const uint32_t groups = w->num_nodes + 1u;
    if (groups > w->sup_cap) {
        /* Reused between checks; lone[g] is read only where cnt[g] says it was written. */
        free(w->sup_cnt);
        free(w->sup_lone);
        w->sup_cnt = malloc((size_t)groups * sizeof *w->sup_cnt);
        w->sup_lone = malloc((size_t)groups * sizeof *w->sup_lone);
        if (w->sup_cnt == NULL || w->sup_lone == NULL) {
            free(w->sup_cnt);
            free(w->sup_lone);
            w->sup_cnt = w->sup_lone = NULL;
            w->sup_cap = 0;
            return;
        }
        w->sup_cap = groups;
    }
    uint32_t *cnt = w->sup_cnt;
    uint32_t *lone = w->sup_lone;
    memset(cnt, 0, (size_t)groups * sizeof *cnt);
    /* The byte states and the group array: no walk over the nodes' records. */
    for (uint32_t i = 1; i < w->num_nodes; i++) {
        const uint32_t g = w->node_group[i];
        if (w->node_st[i] == (uint8_t)NODE_ALIVE && g <= w->num_nodes) {
            cnt[g]++;
            lone[g] = i;
        }
    }
    for (uint32_t g = 0; g < groups && w->num_peers_created < w->cfg.max_peers; g++) {
        if (cnt[g] != 1u || !w->nodes[lone[g]].counted_undone) continue;
        world_log(w, "supervisor: peer %u is alone in group %u: starting a partner",
                  w->nodes[lone[g]].peer_index, g);
        w->spawn_group = g;
        (void)world_spawn_peer(w, SIM_NONE32);
        w->spawn_group = SIM_NONE32;
    }
}

void node_release(sim_world *w, uint32_t i)
{
    sim_node *n = &w->nodes[i];
    if (n->m != NULL) w->vt->destroy(n->m, n->is_master);
    n->m = NULL;
    w->node_m[i] = NULL;
    for (uint32_t s = 0; s < SIM_OP_SLOTS; s++)
        opbuf_release(n, s);
    free(n->ios);
    free(n->io_pool);
    free(n->io_free);
    n->ios = NULL;
    n->io_pool = NULL;
    n->io_free = NULL;
    n->ios_len = n->ios_cap = n->io_free_len = 0;
    SIM_OBS_NODE(w, release, i);
}

/* Dead processes never run again: their memory goes back between events (not inside
 * world_kill, which may run inside the dying node's own step), unless the node records a
 * trace. A 10,000-peer run replaces about as many processes as it starts. */
void bury_dead(sim_world *w)
{
    for (uint32_t k = 0; k < w->grave_len; k++) {
        const uint32_t i = w->grave[k];
        if (w->nodes[i].rec != NULL) continue;
        node_release(w, i);
        /* Frames its closed connections still hold are never delivered. */
        const sim_node *n = &w->nodes[i];
        for (uint32_t e = n->ep_first1 - 1u; n->ep_first1 != 0 && e != SIM_NONE32;
             e = w->eps[e].next_of_node) {
            sim_ep *ep = &w->eps[e];
            if (ep->node != i) continue;
            for (uint32_t j = 0; j < ep->inbox_len; j++)
                frame_free(w, ep->inbox[j]);
            free(ep->inbox);
            ep->inbox = NULL;
            ep->inbox_len = ep->inbox_cap = 0;
        }
    }
    w->grave_len = 0;
}
