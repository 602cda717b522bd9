/*
 * sim_check.c — the checkers, run as the simulation goes (after every step
 * of every machine, on what that step emitted or received):
 *
 * - membership: every successful TopologyVerdict of one epoch carries the
 *   same ring (one agreed membership per epoch);
 * - results: every completed all-reduce is bit-identical on all members and
 *   equal to a reference reduction of the members' inputs (exact for
 *   integers; for floats the reference follows the ring order of the epoch,
 *   so it is exact too; quantized ops are checked for identity only);
 * - restore: an aborted in-place all-reduce leaves the buffer as it was; a
 *   send buffer is never written;
 * - the collective set (--kind, sim_check_coll.c): every member whose op
 *   succeeded holds exactly the output its kind, rank and root define over the
 *   inputs of the op's members in the epoch's ring order (reductions in the
 *   schedule's order: bit for bit, floats too); the members of one op agree on
 *   success or failure; a failed op leaves the send buffer as it was (the
 *   restore of the kinds with a backup);
 * - epochs: no all-reduce completes on a peer that has seen a newer epoch,
 *   and the master never sends a peer a success verdict for an op of an
 *   older epoch than one that peer already got (epochs are per group: a
 *   re-wire of one group leaves the others' epochs running);
 * - verdicts: exactly one NOTIFY per command (sim_app.c counts them);
 * - shared state: after each successful sync the compared tensors are
 *   identical on every member of the round (the members the master sent
 *   one success SYNC_DONE_VERDICT in one step); the revision a peer gets is
 *   the verdict's popular revision and never below what it submitted; an
 *   outdated peer's rx_bytes are the bytes of the keys its verdict named;
 *   per completed round, the distributors' tx equals the fetchers' rx;
 * - topology optimization: the ring installed by a successful
 *   pcclOptimizeTopology has the optimal cost (brute force over the
 *   permutations, N <= 7) of the link costs the virtual network gives;
 * - scenario expectations at the end.
 *
 * The checkers follow the run as one observer of the world (sim_world.h,
 * registered before the workload so that they see each NOTIFY first): they
 * see the master's control frames as the world decoded them with the schema
 * codec (they never look inside the machines), each op's first ring action,
 * the NOTIFYs, and read the workload's commands and tensors (sim_app.h).
 * This file: the observer and the membership and epoch checks; the others
 * are in the files sim_check_int.h lists.
 */
#include <stdlib.h>
#include <string.h>

#include "sim_check_int.h"

/* Rings by (epoch, group): an open-addressing index over ck->epochs. */
static uint64_t epoch_key_hash(uint64_t epoch, uint32_t group)
{
    return sim_pair_hash(epoch, group);
}

sim_epochrec *epoch_find(const sim_checker *ck, uint64_t epoch, uint32_t group)
{
    if (ck->epoch_idx_cap == 0) return NULL;
    const uint64_t mask = ck->epoch_idx_cap - 1u;
    for (uint64_t i = epoch_key_hash(epoch, group) & mask;; i = (i + 1u) & mask) {
        const uint32_t e = ck->epoch_idx[i];
        if (e == SIM_NONE32) return NULL;
        if (ck->epochs[e].epoch == epoch && ck->epochs[e].group == group) return &ck->epochs[e];
    }
}

static bool epoch_index(sim_checker *ck, uint32_t e)
{
    if ((uint64_t)(ck->epochs_len + 1u) * 2u > ck->epoch_idx_cap) {
        const uint64_t ncap = ck->epoch_idx_cap == 0 ? 256u : ck->epoch_idx_cap * 2u;
        uint32_t *x = sim_index_new(ncap);
        if (x == NULL) return false;
        free(ck->epoch_idx);
        ck->epoch_idx = x;
        ck->epoch_idx_cap = ncap;
        for (uint32_t i = 0; i < ck->epochs_len; i++) {
            if (i == e) continue;
            uint64_t j = epoch_key_hash(ck->epochs[i].epoch, ck->epochs[i].group) & (ncap - 1u);
            while (x[j] != SIM_NONE32)
                j = (j + 1u) & (ncap - 1u);
            x[j] = i;
        }
    }
    const uint64_t mask = ck->epoch_idx_cap - 1u;
    uint64_t j = epoch_key_hash(ck->epochs[e].epoch, ck->epochs[e].group) & mask;
    while (ck->epoch_idx[j] != SIM_NONE32)
        j = (j + 1u) & mask;
    ck->epoch_idx[j] = e;
    return true;
}

static void check_verdict_ring(sim_checker *ck, uint32_t node, const ccoip_pb_topology_verdict *v)
{
    sim_world *w = ck->w;
    const uint32_t group = w->nodes[node].group;
    sim_epochrec *e = epoch_find(ck, v->epoch, group);
    if (e == NULL) {
        if (!sim_grow(&ck->epochs, &ck->epochs_cap, ck->epochs_len, sizeof *ck->epochs, 64u,
                      false)) {
            world_fail(w, SIM_CRASH, "out of memory (epochs)");
            return;
        }
        e = &ck->epochs[ck->epochs_len];
        e->epoch = v->epoch;
        e->group = group;
        if (!epoch_index(ck, ck->epochs_len)) {
            world_fail(w, SIM_CRASH, "out of memory (epoch index)");
            return;
        }
        ck->epochs_len++;
        e->ring_len = (uint32_t)v->ring_count;
        e->ring = malloc((size_t)(v->ring_count + 1u) * sizeof *e->ring);
        if (e->ring == NULL) {
            world_fail(w, SIM_CRASH, "out of memory (ring)");
            return;
        }
        if (v->ring_count > 0) memcpy(e->ring, v->ring, (size_t)v->ring_count * sizeof *e->ring);
        w->res->epochs++;
        return;
    }
    if (e->ring_len != v->ring_count ||
        (v->ring_count > 0 && memcmp(e->ring, v->ring, (size_t)v->ring_count * 8u) != 0)) {
        world_fail(w, SIM_CORRECTNESS,
                   "membership: epoch %llu group %u has two rings (%u members, then %llu for "
                   "node %u)",
                   (unsigned long long)v->epoch, group, e->ring_len,
                   (unsigned long long)v->ring_count, node);
    }
}

/* The master sent dst a control frame. */
static void chk_m2p_sent(void *ctx, uint32_t dst, const ccoip_pb_master_to_peer *m)
{
    sim_checker *ck = ctx;
    sim_world *w = ck->w;
    switch (m->body_case) {
    case CCOIP_PB_MASTER_TO_PEER_BODY_TOPOLOGY_VERDICT:
        if (m->body.topology_verdict.success)
            check_verdict_ring(ck, dst, &m->body.topology_verdict);
        break;
    case CCOIP_PB_MASTER_TO_PEER_BODY_COLLECTIVE_COMMENCE:
        check_commence(ck, &m->body.collective_commence);
        check_coll_commence(ck, dst, &m->body.collective_commence);
        break;
    case CCOIP_PB_MASTER_TO_PEER_BODY_COLLECTIVE_VERDICT:
        check_collective_verdict(ck, dst, &m->body.collective_verdict);
        break;
    case CCOIP_PB_MASTER_TO_PEER_BODY_SYNC_VERDICT:
        check_sync_verdict(ck, dst, &m->body.sync_verdict);
        break;
    case CCOIP_PB_MASTER_TO_PEER_BODY_SYNC_DONE_VERDICT:
        if (m->body.sync_done_verdict.success) check_sync_done_verdict(ck, dst);
        break;
    case CCOIP_PB_MASTER_TO_PEER_BODY_EVICTION:
        w->res->evictions++;
        if (m->body.eviction.reason == CCOIP_PB_REASON_HEARTBEAT_TIMEOUT) {
            w->seen_expect |= SIM_EXPECT_EVICT_HEARTBEAT;
        }
        if (m->body.eviction.reason == CCOIP_PB_REASON_VOTE_TIMEOUT) {
            w->seen_expect |= SIM_EXPECT_EVICT_VOTE;
        }
        break;
    default:
        break;
    }
}

/* A peer is about to take a master's control frame: the newest epoch it saw. */
static void chk_m2p_recv(void *ctx, uint32_t node, const ccoip_pb_master_to_peer *m)
{
    sim_checker *ck = ctx;
    sim_world *w = ck->w;
    sim_chk_node *n = chk_node(ck, node);
    uint64_t epoch = 0;
    switch (m->body_case) {
    case CCOIP_PB_MASTER_TO_PEER_BODY_TOPOLOGY_PLAN:
        epoch = m->body.topology_plan.epoch;
        break;
    case CCOIP_PB_MASTER_TO_PEER_BODY_TOPOLOGY_VERDICT:
        epoch = m->body.topology_verdict.success ? m->body.topology_verdict.epoch : 0;
        if (m->body.topology_verdict.success) {
            n->verdict_epoch = m->body.topology_verdict.epoch;
            /* Admitted late? (a peer created after the initial ones) */
            if (w->nodes[node].peer_index >= w->cfg.peers) {
                w->seen_expect |= SIM_EXPECT_ADMIT_LATE;
            }
        }
        break;
    case CCOIP_PB_MASTER_TO_PEER_BODY_COLLECTIVE_COMMENCE:
        epoch = m->body.collective_commence.epoch;
        break;
    default:
        break;
    }
    if (epoch > n->max_epoch_seen) n->max_epoch_seen = epoch;
}

/* A NOTIFY, before the workload acts on it: the verdict of an all-reduce (its first: the
 * workload reports a second one), or of the pending sync or optimize command. */
static void chk_notify(void *ctx, uint32_t node, const ccoip_action *act)
{
    sim_checker *ck = ctx;
    if (ck->w->nodes[node].is_master) return;
    sim_app *a = app_of(ck->wl, node);
    sim_appcmd *c = app_find_cmd(a, act->cmd_id);
    if (c != NULL) {
        if (c->notifies == 0 && c->coll && c->kind != 0) {
            check_coll_notify(ck, node, c, act);
        } else if (c->notifies == 0) {
            check_allreduce_notify(ck, node, c, act);
        }
        return;
    }
    if (act->cmd_id != a->pending_cmd || a->pending_cmd == 0) return;
    if (a->state == APP_SYNCING && act->result == pcclSuccess) {
        check_sync_notify(ck, node, act);
    } else if (a->state == APP_SYNCING && act->result == pcclRankConnectionLost) {
        check_sync_failed(ck, node);
    } else if (a->state == APP_OPTIMIZING && act->result == pcclSuccess) {
        check_optimize_notify(ck, node);
    }
}

/* The end of a run that passed so far: liveness, the shared-state rounds, expectations. */
static void chk_end(void *ctx)
{
    sim_checker *ck = ctx;
    sim_world *w = ck->w;
    if (w->failed) return;
    check_progress(ck);
    if (w->failed) return;
    check_sync_final(ck);
    if (w->failed) return;
    if ((w->cfg.expect & SIM_EXPECT_NO_EVICTION) && w->res->evictions == 0) {
        w->seen_expect |= SIM_EXPECT_NO_EVICTION;
    }
    const uint32_t missing = w->cfg.expect & ~w->seen_expect;
    if (missing != 0) {
        world_fail(w, SIM_CORRECTNESS, "scenario expectation not met (missing bits 0x%x)", missing);
    }
}

sim_checker *check_create(sim_world *w, sim_workload *wl)
{
    sim_checker *ck = calloc(1, sizeof *ck);
    if (ck != NULL) ck->nodes = calloc(w->cap_nodes, sizeof *ck->nodes);
    if (ck == NULL || ck->nodes == NULL) {
        free(ck);
        world_fail(w, SIM_CRASH, "out of memory (checkers)");
        return NULL;
    }
    ck->w = w;
    ck->wl = wl;
    ck->cap_nodes = w->cap_nodes;
    return ck;
}

sim_observer check_observer(sim_checker *ck)
{
    const sim_observer obs = {
        .ctx = ck,
        .notify = chk_notify,
        .op_begin = check_op_begin,
        .op_bound = check_op_bound,
        .relay_initiate = check_relay_initiate,
        .m2p_sent = chk_m2p_sent,
        .m2p_recv = chk_m2p_recv,
        .tick = check_progress,
        .fault_due = check_fault_due,
        .end = chk_end,
    };
    return obs;
}

void check_destroy(sim_checker *ck)
{
    if (ck == NULL) return;
    for (uint32_t i = 0; i < ck->epochs_len; i++)
        free(ck->epochs[i].ring);
    free(ck->epochs);
    free(ck->epoch_idx);
    check_ops_free(ck);
    free(ck->syncrecs);
    for (uint32_t i = 0; i < ck->cap_nodes; i++) {
        for (uint32_t t = 0; t < SIM_MAX_TAGS; t++)
            free(ck->nodes[i].relay_in[t]);
    }
    free(ck->nodes);
    free(ck);
}
