/*
 * sim_check_state.c — the shared-state and topology-optimization checkers:
 * after each successful sync the compared tensors are identical on every
 * member of the round (the members the master sent one success
 * SYNC_DONE_VERDICT in one step); the revision a peer gets is the verdict's
 * popular revision and never below what it submitted; an outdated peer's
 * rx_bytes are the bytes of the keys its verdict named; per completed round
 * the distributors' tx equals the fetchers' rx; a failed sync leaves each
 * tensor untouched or wholly the verified content its verdict named; the
 * ring a successful pcclOptimizeTopology installs has the optimal cost
 * (brute force over the permutations, N <= 7) of the link costs the virtual
 * network gives (on a clean network only).
 */
#include <stdlib.h>
#include <string.h>

#include "ccoip_hash.h"
#include "ccoip_tsp.h"
#include "sim_check_int.h"

/* The round of (round, group) (the newest such), or NULL. */
static sim_syncrec *syncrec_find(sim_checker *ck, uint64_t round, uint32_t group)
{
    for (uint32_t i = ck->syncrecs_len; i-- > 0;) {
        if (ck->syncrecs[i].round == round && ck->syncrecs[i].group == group) {
            return &ck->syncrecs[i];
        }
    }
    return NULL;
}

void check_sync_verdict(sim_checker *ck, uint32_t dst, const ccoip_pb_shared_state_sync_verdict *v)
{
    sim_world *w = ck->w;
    sim_chk_node *n = chk_node(ck, dst);
    n->sync_popular = v->popular_revision;
    n->sync_outdated = v->outdated;
    n->sync_vround = w->res->events;
    n->sync_expect_rx = 0;
    memset(n->sync_fetch, 0, sizeof n->sync_fetch);
    for (uint64_t k = 0; k < v->outdated_keys_count; k++) {
        const ccoip_pb_bytes *nm = &v->outdated_keys[k].name;
        const uint32_t ki = nm->len > 0 && nm->data[0] >= 'a' && nm->data[0] < 'a' + SIM_STATE_KEYS
                                ? (uint32_t)(nm->data[0] - 'a')
                                : 0;
        n->sync_fetch[ki] = true;
        n->sync_expect_hash[ki] = v->outdated_keys[k].expected_hash;
        /* The workload's keys: the last (allow_content_inequality) has half the bytes. */
        const bool aci = nm->len == 11 && memcmp(nm->data, "c.local_rng", 11) == 0;
        n->sync_expect_rx += aci ? SIM_STATE_BYTES / 2u : SIM_STATE_BYTES;
        if (aci) w->seen_expect |= SIM_EXPECT_ACI_FETCH;
        if (!aci && app_of(ck->wl, dst)->sync_rev == v->popular_revision) {
            w->seen_expect |= SIM_EXPECT_STATE_REPAIR;
        }
    }
}

/* A success SYNC_DONE_VERDICT: one master step answers every member of the round. */
void check_sync_done_verdict(sim_checker *ck, uint32_t dst)
{
    sim_world *w = ck->w;
    sim_chk_node *n = chk_node(ck, dst);
    const uint32_t group = w->nodes[dst].group;
    n->sync_round = w->res->events;
    sim_syncrec *r = syncrec_find(ck, n->sync_round, group);
    if (r == NULL) {
        if (!sim_grow(&ck->syncrecs, &ck->syncrecs_cap, ck->syncrecs_len, sizeof *ck->syncrecs, 64u,
                      false)) {
            world_fail(w, SIM_CRASH, "out of memory (sync records)");
            return;
        }
        r = &ck->syncrecs[ck->syncrecs_len++];
        memset(r, 0, sizeof *r);
        r->round = n->sync_round;
        r->group = group;
        r->revision = n->sync_popular;
        for (uint32_t i = 1; i < w->num_nodes; i++) {
            r->voters +=
                chk_node(ck, i)->sync_vround == n->sync_vround && w->nodes[i].group == group;
        }
    }
    r->sent++;
}

static uint64_t state_hash(const sim_app *a)
{
    /* The compared tensors (all but the last key), bytes in order. */
    return ccoip_hash_bytes(a->st, (uint64_t)(SIM_STATE_KEYS - 1u) * SIM_STATE_BYTES);
}

void check_sync_notify(sim_checker *ck, uint32_t node, const ccoip_action *act)
{
    sim_world *w = ck->w;
    const sim_chk_node *n = chk_node(ck, node);
    const sim_app *a = app_of(ck->wl, node);
    if (act->revision != n->sync_popular) {
        world_fail(w, SIM_CORRECTNESS,
                   "shared state: node %u adopted revision %llu, the verdict's popular revision "
                   "is %llu",
                   node, (unsigned long long)act->revision, (unsigned long long)n->sync_popular);
        return;
    }
    if (act->revision < a->sync_rev || act->revision < a->revision) {
        world_fail(w, SIM_CORRECTNESS,
                   "shared state: node %u revision went from %llu (submitted %llu) down to %llu",
                   node, (unsigned long long)a->revision, (unsigned long long)a->sync_rev,
                   (unsigned long long)act->revision);
        return;
    }
    if (!n->sync_outdated && act->rx_bytes != 0) {
        world_fail(w, SIM_CORRECTNESS, "shared state: node %u fetched %llu bytes without need",
                   node, (unsigned long long)act->rx_bytes);
        return;
    }
    if (act->rx_bytes != n->sync_expect_rx) {
        world_fail(w, SIM_CORRECTNESS,
                   "shared state: node %u rx_bytes %llu, its verdict named %llu bytes of keys",
                   node, (unsigned long long)act->rx_bytes, (unsigned long long)n->sync_expect_rx);
        return;
    }
    sim_syncrec *r = syncrec_find(ck, n->sync_round, w->nodes[node].group);
    if (r == NULL) {
        world_fail(w, SIM_CORRECTNESS, "shared state: node %u sync succeeded without a verdict",
                   node);
        return;
    }
    const uint64_t h = state_hash(a);
    if (r->notified == 0) {
        r->hash = h;
    } else if (r->hash != h) {
        world_fail(w, SIM_CORRECTNESS,
                   "shared state: after the sync of revision %llu (group %u) node %u holds other "
                   "content than the round's first member",
                   (unsigned long long)r->revision, r->group, node);
        return;
    }
    if (r->revision != act->revision) {
        world_fail(w, SIM_CORRECTNESS, "shared state: one round, two revisions (%llu, %llu)",
                   (unsigned long long)r->revision, (unsigned long long)act->revision);
        return;
    }
    r->notified++;
    r->rx += act->rx_bytes;
    r->tx += act->tx_bytes;
}

void check_sync_failed(sim_checker *ck, uint32_t node)
{
    sim_world *w = ck->w;
    const sim_chk_node *n = chk_node(ck, node);
    const sim_app *a = app_of(ck->wl, node);
    static const char *const names[SIM_STATE_KEYS] = {"a.weights", "b.moments", "c.local_rng"};
    for (uint32_t k = 0; k < SIM_STATE_KEYS; k++) {
        if (memcmp(a->st[k], a->st_pre[k], SIM_STATE_BYTES) == 0) continue;
        uint64_t h = 0;
        const uint64_t count = k == SIM_STATE_KEYS - 1u ? SIM_STATE_ELEMS / 2u : SIM_STATE_ELEMS;
        const ccoip_hash_entry e = {names[k], a->st[k], count, pcclFloat};
        if (!n->sync_fetch[k] || ccoip_hash_tensor(&e, &h) != pcclSuccess ||
            h != n->sync_expect_hash[k]) {
            world_fail(w, SIM_CORRECTNESS,
                       "shared state: node %u: a failed sync left tensor %s changed, and not to "
                       "the verified content its verdict named",
                       node, names[k]);
            return;
        }
    }
}

/* Cost of the directed link a -> b as the master computes it from a probe (µs per MiB). */
static uint64_t link_cost(const sim_world *w, uint32_t ha, uint32_t hb)
{
    const uint64_t want = w->probe_bytes != 0 ? w->probe_bytes : ((uint64_t)1 << 20);
    uint64_t bytes = 0;
    const uint64_t us = world_probe_us(w, ha, hb, want, &bytes);
    return ccoip_tsp_link_cost(bytes, us);
}

static uint64_t best_cost(const uint64_t *cost, uint32_t n, uint32_t *perm, uint32_t k, bool *used,
                          uint64_t acc, uint64_t best)
{
    if (acc >= best) return best;
    if (k == n) {
        const uint64_t t = acc + cost[perm[n - 1u] * n + perm[0]];
        return t < best ? t : best;
    }
    for (uint32_t i = 1; i < n; i++) {
        if (used[i]) continue;
        used[i] = true;
        perm[k] = i;
        best = best_cost(cost, n, perm, k + 1u, used, acc + cost[perm[k - 1u] * n + i], best);
        used[i] = false;
    }
    return best;
}

/* The optimum for 8 .. CHK_OPT_MAX members: Held–Karp over the subsets of 1 .. n-1 (written
 * here, independent of core/tsp.c, which solves exactly only up to CCOIP_TSP_EXACT_MAX);
 * dp[S * (n - 1) + j]: the cheapest path from 0 through the set S ending at j + 1. UINT64_MAX
 * when out of memory. */
static uint64_t held_karp(const uint64_t *cost, uint32_t n)
{
    const uint32_t m = n - 1u;
    const uint64_t sets = (uint64_t)1 << m;
    uint64_t *dp = malloc((size_t)(sets * m) * sizeof *dp);
    if (dp == NULL) return UINT64_MAX;
    for (uint64_t k = 0; k < sets * m; k++)
        dp[k] = UINT64_MAX;
    for (uint32_t j = 0; j < m; j++)
        dp[((uint64_t)1 << j) * m + j] = cost[j + 1u];
    for (uint64_t set = 1; set < sets; set++) {
        for (uint32_t j = 0; j < m; j++) {
            const uint64_t v = dp[set * m + j];
            if (v == UINT64_MAX || (set & ((uint64_t)1 << j)) == 0) continue;
            for (uint32_t t = 0; t < m; t++) {
                if (set & ((uint64_t)1 << t)) continue;
                const uint64_t nset = set | ((uint64_t)1 << t);
                const uint64_t c = v + cost[(j + 1u) * n + t + 1u];
                if (c < dp[nset * m + t]) dp[nset * m + t] = c;
            }
        }
    }
    uint64_t best = UINT64_MAX;
    for (uint32_t j = 0; j < m; j++) {
        const uint64_t v = dp[(sets - 1u) * m + j];
        if (v != UINT64_MAX && v + cost[(j + 1u) * n] < best) best = v + cost[(j + 1u) * n];
    }
    free(dp);
    return best;
}

/* Rings checked against the optimum: brute force up to 7 members, Held–Karp up to 16. */
#define CHK_OPT_MAX 16u

void check_optimize_notify(sim_checker *ck, uint32_t node)
{
    sim_world *w = ck->w;
    const sim_node *me = &w->nodes[node];
    const sim_chk_node *mc = chk_node(ck, node);
    /* The master gives links it saw fail (a p2p connect during a clog, a partition, a cut,
     * a lossy stream) the "unusable" cost: the optimum of the configured matrix is the
     * reference only on a clean network. */
    if (w->cfg.clogs > 0 || w->cfg.partitions > 0 || w->lossy) return;
    for (uint32_t i = 0; i < w->cfg.script_len; i++) {
        if (w->cfg.script[i].kind == SIM_SCRIPT_CUT) return;
    }
    /* The ring this peer installed: its last successful TopologyVerdict (a later epoch the
     * master already announced to others, e.g. a re-wire after a crash, is not optimized). */
    const sim_epochrec *e = epoch_find(ck, mc->verdict_epoch, me->group);
    if (e == NULL || e->ring_len < 2u || e->ring_len > CHK_OPT_MAX) return;
    uint32_t hosts[CHK_OPT_MAX];
    for (uint32_t k = 0; k < e->ring_len; k++) {
        hosts[k] = SIM_NONE32;
        for (uint32_t i = 1; i < w->num_nodes; i++) {
            if (w->nodes[i].peer_id == e->ring[k] && w->nodes[i].state != NODE_DEAD) {
                hosts[k] = w->nodes[i].host;
            }
        }
        if (hosts[k] == SIM_NONE32) return; /* a member died meanwhile: nothing to compare */
    }
    const uint32_t n = e->ring_len;
    uint64_t cost[CHK_OPT_MAX * CHK_OPT_MAX];
    for (uint32_t i = 0; i < n; i++) {
        for (uint32_t j = 0; j < n; j++) {
            /* A peer behind NAT is not probed: the master takes the reverse link's cost; two
             * of them cannot link at all (CCOIP_TSP_COST_MAX). */
            const bool nat_i = world_host_no_inbound(w, hosts[i]);
            const bool nat_j = world_host_no_inbound(w, hosts[j]);
            cost[i * n + j] = i == j           ? 0
                              : nat_i && nat_j ? CCOIP_TSP_COST_MAX
                              : nat_j          ? link_cost(ck->w, hosts[j], hosts[i])
                                               : link_cost(ck->w, hosts[i], hosts[j]);
        }
    }
    uint64_t installed = 0;
    for (uint32_t k = 0; k < n; k++)
        installed += cost[k * n + (k + 1u) % n];
    /* The optimum of this epoch's ring, once per (epoch, group): every member checks the same
     * ring. */
    uint64_t best;
    if (ck->opt_epoch == e->epoch && ck->opt_group == me->group && ck->opt_best != 0) {
        best = ck->opt_best;
    } else if (n <= 7u) {
        uint32_t perm[7] = {0};
        bool used[7] = {true, false, false, false, false, false, false};
        best = best_cost(cost, n, perm, 1u, used, 0, UINT64_MAX);
    } else {
        best = held_karp(cost, n);
        if (best == UINT64_MAX) return; /* out of memory: nothing to compare */
    }
    ck->opt_epoch = e->epoch;
    ck->opt_group = me->group;
    ck->opt_best = best;
    w->res->optimize_cost = installed;
    w->res->optimize_best = best;
    /* Up to CCOIP_TSP_EXACT_MAX members the master solves exactly: the optimum. Beyond, its
     * heuristic must stay within 3/2 of it (the bound tests/unit/test_tsp.c holds it to);
     * SIM_EXPECT_OPTIMIZED still needs the optimum. */
    if (installed != best && (n <= CCOIP_TSP_EXACT_MAX || installed * 2u > best * 3u)) {
        world_fail(w, SIM_CORRECTNESS,
                   "optimize: group %u epoch %llu ring of %u costs %llu, the optimum is %llu",
                   me->group, (unsigned long long)e->epoch, n, (unsigned long long)installed,
                   (unsigned long long)best);
        return;
    }
    if (installed == best) w->seen_expect |= SIM_EXPECT_OPTIMIZED;
}

void check_sync_final(sim_checker *ck)
{
    sim_world *w = ck->w;
    for (uint32_t i = 0; i < ck->syncrecs_len; i++) {
        const sim_syncrec *r = &ck->syncrecs[i];
        /* Only rounds nobody was dropped from (a lost fetcher or distributor leaves bytes
         * counted on one side only). */
        if (r->notified == r->sent && r->sent == r->voters && r->rx != r->tx) {
            world_fail(w, SIM_CORRECTNESS,
                       "shared state: round of revision %llu (group %u): fetchers got %llu bytes, "
                       "distributors sent %llu",
                       (unsigned long long)r->revision, r->group, (unsigned long long)r->rx,
                       (unsigned long long)r->tx);
            return;
        }
    }
}
