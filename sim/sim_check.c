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
 * The observer decodes the master's control frames with the schema codec
 * (it never looks inside the machines).
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "ccoip_dtype.h"
#include "ccoip_frame.h"
#include "ccoip_hash.h"
#include "ccoip_reduce.h"
#include "ccoip_ring.h"
#include "sim_internal.h"

/* The world's decode arena, at least cap + 1 bytes (valid until the next decode). */
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

/* Decodes into the world's arena (valid until the next decode). */
static bool decode_m2p(sim_world *w, const uint8_t *frame, uint64_t len,
                       ccoip_pb_master_to_peer *out)
{
    ccoip_pb_arena arena;
    return dec_arena(w, len, &arena) &&
           ccoip_ctrl_decode_m2p(frame, len, NULL, &arena, out) == pcclSuccess;
}

static bool decode_p2m(sim_world *w, const uint8_t *frame, uint64_t len,
                       ccoip_pb_peer_to_master *out)
{
    ccoip_pb_arena arena;
    return dec_arena(w, len, &arena) &&
           ccoip_ctrl_decode_p2m(frame, len, NULL, &arena, out) == pcclSuccess;
}

/* Rings by (epoch, group): an open-addressing index over w->epochs. */
static uint64_t epoch_key_hash(uint64_t epoch, uint32_t group)
{
    return sim_pair_hash(epoch, group);
}

static sim_epochrec *epoch_find(sim_world *w, uint64_t epoch, uint32_t group)
{
    if (w->epoch_idx_cap == 0) return NULL;
    const uint64_t mask = w->epoch_idx_cap - 1u;
    for (uint64_t i = epoch_key_hash(epoch, group) & mask;; i = (i + 1u) & mask) {
        const uint32_t e = w->epoch_idx[i];
        if (e == SIM_NONE32) return NULL;
        if (w->epochs[e].epoch == epoch && w->epochs[e].group == group) return &w->epochs[e];
    }
}

static bool epoch_index(sim_world *w, uint32_t e)
{
    if ((uint64_t)(w->epochs_len + 1u) * 2u > w->epoch_idx_cap) {
        const uint64_t ncap = w->epoch_idx_cap == 0 ? 256u : w->epoch_idx_cap * 2u;
        uint32_t *x = malloc((size_t)ncap * sizeof *x);
        if (x == NULL) return false;
        memset(x, 0xff, (size_t)ncap * sizeof *x);
        free(w->epoch_idx);
        w->epoch_idx = x;
        w->epoch_idx_cap = ncap;
        for (uint32_t i = 0; i < w->epochs_len; i++) {
            if (i == e) continue;
            uint64_t j = epoch_key_hash(w->epochs[i].epoch, w->epochs[i].group) & (ncap - 1u);
            while (x[j] != SIM_NONE32)
                j = (j + 1u) & (ncap - 1u);
            x[j] = i;
        }
    }
    const uint64_t mask = w->epoch_idx_cap - 1u;
    uint64_t j = epoch_key_hash(w->epochs[e].epoch, w->epochs[e].group) & mask;
    while (w->epoch_idx[j] != SIM_NONE32)
        j = (j + 1u) & mask;
    w->epoch_idx[j] = e;
    return true;
}

static void check_verdict_ring(sim_world *w, uint32_t node, const ccoip_pb_topology_verdict *v)
{
    const uint32_t group = w->nodes[node].group;
    sim_epochrec *e = epoch_find(w, v->epoch, group);
    if (e == NULL) {
        if (w->epochs_len == w->epochs_cap) {
            const uint32_t ncap = w->epochs_cap == 0 ? 64u : w->epochs_cap * 2u;
            sim_epochrec *n = realloc(w->epochs, (size_t)ncap * sizeof *n);
            if (n == NULL) {
                world_fail(w, SIM_CRASH, "out of memory (epochs)");
                return;
            }
            w->epochs = n;
            w->epochs_cap = ncap;
        }
        e = &w->epochs[w->epochs_len];
        e->epoch = v->epoch;
        e->group = group;
        if (!epoch_index(w, w->epochs_len)) {
            world_fail(w, SIM_CRASH, "out of memory (epoch index)");
            return;
        }
        w->epochs_len++;
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

static uint64_t commence_epoch(const sim_world *w, uint64_t seq, bool *found)
{
    *found = seq < w->commence_cap && w->commence_epoch_by_seq[seq] != UINT64_MAX;
    return *found ? w->commence_epoch_by_seq[seq] : 0;
}

static void inrec_add_bytes(sim_world *w, uint32_t node, uint64_t epoch, uint64_t seq,
                            const uint8_t *input, uint64_t bytes);

void check_relay_initiate(sim_world *w, uint32_t node, const uint8_t *frame, uint64_t len,
                          const uint8_t *input, uint64_t bytes)
{
    ccoip_pb_peer_to_master m;
    if (!decode_p2m(w, frame, len, &m) ||
        m.body_case != CCOIP_PB_PEER_TO_MASTER_BODY_COLLECTIVE_INITIATE ||
        !m.body.collective_initiate.relay) {
        world_fail(w, SIM_CORRECTNESS, "node %u: a SEND with a span that is no relayed initiate",
                   node);
        return;
    }
    sim_node *n = &w->nodes[node];
    const uint32_t t = (uint32_t)(m.body.collective_initiate.tag % SIM_MAX_TAGS);
    free(n->relay_in[t]);
    n->relay_in[t] = malloc((size_t)bytes + 1u);
    n->relay_in_len[t] = bytes;
    if (n->relay_in[t] == NULL) {
        world_fail(w, SIM_CRASH, "out of memory (relay inputs)");
        return;
    }
    memcpy(n->relay_in[t], input, (size_t)bytes);
}

void check_m2p_sent(sim_world *w, uint32_t dst_node, const uint8_t *frame, uint64_t len)
{
    ccoip_pb_master_to_peer m;
    if (!decode_m2p(w, frame, len, &m)) {
        world_fail(w, SIM_CRASH, "the master sent a frame the codec rejects (to node %u)",
                   dst_node);
        return;
    }
    uint64_t epoch = 0;
    switch (m.body_case) {
    case CCOIP_PB_MASTER_TO_PEER_BODY_TOPOLOGY_PLAN:
        epoch = m.body.topology_plan.epoch;
        break;
    case CCOIP_PB_MASTER_TO_PEER_BODY_TOPOLOGY_VERDICT:
        epoch = m.body.topology_verdict.epoch;
        if (m.body.topology_verdict.success)
            check_verdict_ring(w, dst_node, &m.body.topology_verdict);
        break;
    case CCOIP_PB_MASTER_TO_PEER_BODY_COLLECTIVE_COMMENCE: {
        const ccoip_pb_collective_commence *c = &m.body.collective_commence;
        epoch = c->epoch;
        if (c->seq == 0) break; /* joins an optimistic ring (§6.8.1): no seq of its own */
        if (c->seq >= (uint64_t)1 << 24) {
            world_fail(w, SIM_CRASH, "collective seq %llu beyond the checker's table",
                       (unsigned long long)c->seq);
            break;
        }
        if (c->seq >= w->commence_cap) {
            uint64_t ncap = w->commence_cap == 0 ? 1024u : w->commence_cap;
            while (ncap <= c->seq)
                ncap *= 2u;
            uint64_t *n = realloc(w->commence_epoch_by_seq, (size_t)ncap * 8u);
            if (n == NULL) {
                world_fail(w, SIM_CRASH, "out of memory (seq table)");
                break;
            }
            for (uint64_t i = w->commence_cap; i < ncap; i++)
                n[i] = UINT64_MAX;
            w->commence_epoch_by_seq = n;
            w->commence_cap = ncap;
        }
        if (w->commence_epoch_by_seq[c->seq] != UINT64_MAX &&
            w->commence_epoch_by_seq[c->seq] != c->epoch) {
            world_fail(w, SIM_CORRECTNESS, "seq %llu commenced in epochs %llu and %llu",
                       (unsigned long long)c->seq,
                       (unsigned long long)w->commence_epoch_by_seq[c->seq],
                       (unsigned long long)c->epoch);
        }
        w->commence_epoch_by_seq[c->seq] = c->epoch;
        break;
    }
    case CCOIP_PB_MASTER_TO_PEER_BODY_COLLECTIVE_VERDICT: {
        const ccoip_pb_collective_verdict *v = &m.body.collective_verdict;
        if (v->relay_result.len > 0) {
            /* Master relay (§6.8.2): the op is decided, and its every member is answered in
             * this step, before any can complete: bind each member's input (as its initiate
             * carried it) to the master's seq now, as the first ring action does for a ring op.
             * A member that died meanwhile still counts: its input is in the result. */
            sim_node *dn = &w->nodes[dst_node];
            const uint32_t t = (uint32_t)(v->tag % SIM_MAX_TAGS);
            if (dn->relay_in[t] == NULL || dn->relay_in_len[t] != v->relay_result.len) {
                world_fail(w, SIM_CORRECTNESS,
                           "relayed result of %llu bytes for tag %llu that node %u did not "
                           "initiate so",
                           (unsigned long long)v->relay_result.len, (unsigned long long)v->tag,
                           dst_node);
                break;
            }
            inrec_add_bytes(w, dst_node, SIM_RELAY_EPOCH, v->seq, dn->relay_in[t],
                            dn->relay_in_len[t]);
            free(dn->relay_in[t]);
            dn->relay_in[t] = NULL;
            sim_appcmd *c = dn->m != NULL ? app_find_unbound_tag(dn, (uint32_t)v->tag) : NULL;
            if (c != NULL) {
                c->commenced = true;
                c->epoch = SIM_RELAY_EPOCH;
                c->seq = v->seq;
            }
            break;
        }
        bool found;
        const uint64_t e = commence_epoch(w, v->seq, &found);
        /* Epochs are per group (docs/protocol.md §6.9): a re-wire of one group does not end
         * another group's epoch, so the rule is per member: no success verdict for an op of
         * epoch e to a peer that was already sent (and got) a newer epoch. */
        const uint64_t seen = w->nodes[dst_node].max_epoch_seen;
        if (!v->aborted && found && e < seen) {
            world_fail(w, SIM_CORRECTNESS,
                       "the master completes op seq %llu of epoch %llu for node %u after it saw "
                       "epoch %llu",
                       (unsigned long long)v->seq, (unsigned long long)e, dst_node,
                       (unsigned long long)seen);
        }
        break;
    }
    case CCOIP_PB_MASTER_TO_PEER_BODY_SYNC_VERDICT: {
        const ccoip_pb_shared_state_sync_verdict *v = &m.body.sync_verdict;
        sim_node *n = &w->nodes[dst_node];
        n->sync_popular = v->popular_revision;
        n->sync_outdated = v->outdated;
        n->sync_vround = w->res->events;
        n->sync_expect_rx = 0;
        memset(n->sync_fetch, 0, sizeof n->sync_fetch);
        for (uint64_t k = 0; k < v->outdated_keys_count; k++) {
            const ccoip_pb_bytes *nm = &v->outdated_keys[k].name;
            const uint32_t ki =
                nm->len > 0 && nm->data[0] >= 'a' && nm->data[0] < 'a' + SIM_STATE_KEYS
                    ? (uint32_t)(nm->data[0] - 'a')
                    : 0;
            n->sync_fetch[ki] = true;
            n->sync_expect_hash[ki] = v->outdated_keys[k].expected_hash;
            /* The workload's keys: the last (allow_content_inequality) has half the bytes. */
            const bool aci = nm->len == 11 && memcmp(nm->data, "c.local_rng", 11) == 0;
            n->sync_expect_rx += aci ? SIM_STATE_BYTES / 2u : SIM_STATE_BYTES;
            if (aci) w->seen_expect |= SIM_EXPECT_ACI_FETCH;
            if (!aci && n->app.sync_rev == v->popular_revision) {
                w->seen_expect |= SIM_EXPECT_STATE_REPAIR;
            }
        }
        break;
    }
    case CCOIP_PB_MASTER_TO_PEER_BODY_SYNC_DONE_VERDICT:
        if (m.body.sync_done_verdict.success) {
            /* One master step answers every member of the round. */
            sim_node *n = &w->nodes[dst_node];
            n->sync_round = w->res->events;
            sim_syncrec *r = NULL;
            for (uint32_t i = w->syncrecs_len; i-- > 0;) {
                if (w->syncrecs[i].round == n->sync_round && w->syncrecs[i].group == n->group) {
                    r = &w->syncrecs[i];
                    break;
                }
            }
            if (r == NULL) {
                if (w->syncrecs_len == w->syncrecs_cap) {
                    const uint32_t ncap = w->syncrecs_cap == 0 ? 64u : w->syncrecs_cap * 2u;
                    sim_syncrec *x = realloc(w->syncrecs, (size_t)ncap * sizeof *x);
                    if (x == NULL) {
                        world_fail(w, SIM_CRASH, "out of memory (sync records)");
                        break;
                    }
                    w->syncrecs = x;
                    w->syncrecs_cap = ncap;
                }
                r = &w->syncrecs[w->syncrecs_len++];
                memset(r, 0, sizeof *r);
                r->round = n->sync_round;
                r->group = n->group;
                r->revision = n->sync_popular;
                for (uint32_t i = 1; i < w->num_nodes; i++) {
                    r->voters +=
                        w->nodes[i].sync_vround == n->sync_vround && w->nodes[i].group == n->group;
                }
            }
            r->sent++;
        }
        break;
    case CCOIP_PB_MASTER_TO_PEER_BODY_EVICTION:
        w->res->evictions++;
        if (m.body.eviction.reason == CCOIP_PB_REASON_HEARTBEAT_TIMEOUT) {
            w->seen_expect |= SIM_EXPECT_EVICT_HEARTBEAT;
        }
        if (m.body.eviction.reason == CCOIP_PB_REASON_VOTE_TIMEOUT) {
            w->seen_expect |= SIM_EXPECT_EVICT_VOTE;
        }
        break;
    default:
        break;
    }
    if (epoch > w->master_max_epoch_sent) w->master_max_epoch_sent = epoch;
    if (m.status == CCOIP_PB_STATUS_INVALID_USAGE) {
        /* Both end a call that cannot complete, nobody evicted: the application retries
         * (docs/protocol.md §6.10, §6.12). */
        w->nodes[dst_node].call_mismatch =
            m.reason == CCOIP_PB_REASON_CALL_MISMATCH || m.reason == CCOIP_PB_REASON_VOTE_UNMATCHED;
        if (m.reason == CCOIP_PB_REASON_CALL_MISMATCH) w->res->call_mismatches++;
    }
    fault_on_m2p(w, dst_node, &m);
}

void check_m2p_recv(sim_world *w, uint32_t node, const uint8_t *frame, uint64_t len)
{
    ccoip_pb_master_to_peer m;
    sim_node *n = &w->nodes[node];
    if (decode_m2p(w, frame, len, &m)) {
        uint64_t epoch = 0;
        switch (m.body_case) {
        case CCOIP_PB_MASTER_TO_PEER_BODY_HELLO:
            n->peer_id = m.body.hello.peer_id;
            break;
        case CCOIP_PB_MASTER_TO_PEER_BODY_TOPOLOGY_PLAN:
            epoch = m.body.topology_plan.epoch;
            break;
        case CCOIP_PB_MASTER_TO_PEER_BODY_TOPOLOGY_VERDICT:
            epoch = m.body.topology_verdict.success ? m.body.topology_verdict.epoch : 0;
            if (m.body.topology_verdict.success) {
                n->verdict_epoch = m.body.topology_verdict.epoch;
                /* Admitted late? (a peer created after the initial ones) */
                if (n->peer_index >= w->cfg.peers) w->seen_expect |= SIM_EXPECT_ADMIT_LATE;
            }
            break;
        case CCOIP_PB_MASTER_TO_PEER_BODY_COLLECTIVE_COMMENCE:
            epoch = m.body.collective_commence.epoch;
            break;
        default:
            break;
        }
        if (epoch > n->max_epoch_seen) n->max_epoch_seen = epoch;
    }
}

/* sim_seqidx: the key of record r of an array of records (stride bytes each) that begin with
 * uint64_t epoch, seq. */
_Static_assert(offsetof(sim_oprec, epoch) == 0 && offsetof(sim_oprec, seq) == 8,
               "sim_oprec must begin with epoch, seq (sim_seqidx)");
_Static_assert(offsetof(sim_inrec, epoch) == 0 && offsetof(sim_inrec, seq) == 8,
               "sim_inrec must begin with epoch, seq (sim_seqidx)");

static const uint64_t *seqidx_key(const void *recs, size_t stride, uint32_t r)
{
    return (const uint64_t *)(const void *)((const uint8_t *)recs + (size_t)r * stride);
}

/* The slot of (epoch, seq): its entry or the empty slot where it goes. */
static uint32_t seqidx_slot(const sim_seqidx *x, const void *recs, size_t stride, uint64_t epoch,
                            uint64_t seq)
{
    const uint32_t mask = x->cap - 1u;
    uint32_t i = (uint32_t)sim_pair_hash(epoch, seq) & mask;
    for (;;) {
        const uint32_t r = x->slot[i];
        if (r == SIM_NONE32) return i;
        const uint64_t *k = seqidx_key(recs, stride, r);
        if (k[0] == epoch && k[1] == seq) return i;
        i = (i + 1u) & mask;
    }
}

/* The latest record of (epoch, seq), or SIM_NONE32. */
static uint32_t seqidx_get(const sim_seqidx *x, const void *recs, size_t stride, uint64_t epoch,
                           uint64_t seq)
{
    if (x->cap == 0) return SIM_NONE32;
    return x->slot[seqidx_slot(x, recs, stride, epoch, seq)];
}

/* Indexes record r, the newest (records 0 .. r-1 are indexed): it becomes its key's latest, and
 * *prev the record it replaced there (SIM_NONE32: none). False when out of memory. */
static bool seqidx_put(sim_seqidx *x, const void *recs, size_t stride, uint32_t r, uint32_t *prev)
{
    if ((uint64_t)(r + 2u) * 2u > x->cap) {
        const uint32_t ncap = x->cap == 0 ? 1024u : x->cap * 2u;
        uint32_t *idx = malloc((size_t)ncap * sizeof *idx);
        if (idx == NULL) return false;
        memset(idx, 0xff, (size_t)ncap * sizeof *idx);
        free(x->slot);
        x->slot = idx;
        x->cap = ncap;
        for (uint32_t i = 0; i < r; i++) { /* ascending: each key ends at its latest */
            const uint64_t *k = seqidx_key(recs, stride, i);
            x->slot[seqidx_slot(x, recs, stride, k[0], k[1])] = i;
        }
    }
    const uint64_t *k = seqidx_key(recs, stride, r);
    const uint32_t slot = seqidx_slot(x, recs, stride, k[0], k[1]);
    *prev = x->slot[slot];
    x->slot[slot] = r;
    return true;
}

/* The latest input record of (epoch, seq), or SIM_NONE32. */
static uint32_t inrec_latest(const sim_world *w, uint64_t epoch, uint64_t seq)
{
    return seqidx_get(&w->inrec_idx, w->inrecs, sizeof *w->inrecs, epoch, seq);
}

static void inrec_add(sim_world *w, uint32_t node, uint64_t epoch, uint64_t seq,
                      const sim_appcmd *c)
{
    inrec_add_bytes(w, node, epoch, seq, c->input, c->count * w->elem_bytes);
}

static void inrec_add_bytes(sim_world *w, uint32_t node, uint64_t epoch, uint64_t seq,
                            const uint8_t *input, uint64_t bytes)
{
    if (w->inrecs_len == w->inrecs_cap) {
        const uint32_t ncap = w->inrecs_cap == 0 ? 256u : w->inrecs_cap * 2u;
        sim_inrec *n = realloc(w->inrecs, (size_t)ncap * sizeof *n);
        if (n == NULL) {
            world_fail(w, SIM_CRASH, "out of memory (inputs)");
            return;
        }
        w->inrecs = n;
        w->inrecs_cap = ncap;
    }
    sim_inrec *r = &w->inrecs[w->inrecs_len++];
    r->epoch = epoch;
    r->seq = seq;
    r->node = node;
    r->peer_id = w->nodes[node].peer_id;
    r->input = NULL;
    if (!seqidx_put(&w->inrec_idx, w->inrecs, sizeof *w->inrecs, w->inrecs_len - 1u, &r->prev)) {
        world_fail(w, SIM_CRASH, "out of memory (input index)");
        return;
    }
    r->input = malloc((size_t)bytes + 1u);
    if (r->input == NULL) {
        world_fail(w, SIM_CRASH, "out of memory (inputs)");
        return;
    }
    memcpy(r->input, input, (size_t)bytes);
}

void check_ring_action(sim_world *w, uint32_t node, const ccoip_action *act)
{
    sim_node *n = &w->nodes[node];
    sim_opmeta *o = &n->opm[act->op_slot];
    if (!o->bound) {
        o->bound = true;
        o->epoch = act->epoch;
        o->tag = act->tag;
        o->seq = act->seq;
        sim_appcmd *c = app_find_cmd(n, n->ops[act->op_slot].cmd_id);
        if (c == NULL) return;
        c->commenced = true;
        c->epoch = act->epoch;
        c->seq = act->seq;
        if (act->seq == 0) {
            /* An optimistic op: its ring frames carry seq 0, keyed by (epoch, tag). The
             * checker numbers it (group, tag, n-th use in the epoch), high bit set. */
            const uint32_t t = (uint32_t)(act->tag % SIM_MAX_TAGS);
            if (n->opt_epoch[t] != act->epoch) {
                n->opt_epoch[t] = act->epoch;
                n->opt_uses[t] = 0;
            }
            n->opt_uses[t]++;
            c->seq = ((uint64_t)1 << 63) | ((uint64_t)n->group << 40) |
                     ((act->tag & 0xffffu) << 24) | n->opt_uses[t];
        }
        if (act->tag != c->tag) {
            world_fail(w, SIM_CORRECTNESS, "node %u: op of tag %u runs ring frames of tag %llu",
                       node, c->tag, (unsigned long long)act->tag);
            return;
        }
        inrec_add(w, node, act->epoch, c->seq, c);
        return;
    }
    if (o->epoch != act->epoch || o->seq != act->seq || o->tag != act->tag) {
        world_fail(w, SIM_CORRECTNESS,
                   "node %u: op slot %u mixes (epoch %llu, seq %llu) and (epoch %llu, seq %llu)",
                   node, act->op_slot, (unsigned long long)o->epoch, (unsigned long long)o->seq,
                   (unsigned long long)act->epoch, (unsigned long long)act->seq);
    }
}

/* The reference: integers fold in any order (wrapping ops commute); floats
 * follow the ring schedule of the epoch, rank r = ring[r]. Returns false
 * when it cannot be computed (the caller then checks identity only). */
static bool reference_run(sim_world *w, uint64_t epoch, uint64_t seq, const sim_inrec **members,
                          uint8_t **bufs, uint32_t world, uint64_t count, uint8_t *out);

static bool reference(sim_world *w, uint64_t epoch, uint64_t seq, uint32_t world, uint64_t count,
                      uint8_t *out)
{
    uint32_t k = 0;
    for (uint32_t i = inrec_latest(w, epoch, seq); i != SIM_NONE32; i = w->inrecs[i].prev)
        k++;
    if (k != world) {
        world_fail(w, SIM_CORRECTNESS,
                   "op (epoch %llu, seq %llu) completed with world %u but %u members ran it",
                   (unsigned long long)epoch, (unsigned long long)seq, world, k);
        return false;
    }
    const sim_inrec **members = malloc((size_t)(k + 1u) * sizeof *members);
    uint8_t **bufs = calloc((size_t)k + 1u, sizeof *bufs);
    if (members == NULL || bufs == NULL) {
        free(members);
        free(bufs);
        world_fail(w, SIM_CRASH, "out of memory (reference)");
        return false;
    }
    const bool ok = reference_run(w, epoch, seq, members, bufs, k, count, out);
    free(members);
    free(bufs);
    return ok;
}

static bool reference_run(sim_world *w, uint64_t epoch, uint64_t seq, const sim_inrec **members,
                          uint8_t **bufs, uint32_t world, uint64_t count, uint8_t *out)
{
    const pcclDataType_t dt = w->cfg.dtype;
    const uint64_t esz = w->elem_bytes;
    const uint64_t bytes = count * esz;
    /* The op's records in the order they were made (the chain runs newest first). */
    uint32_t k = 0;
    for (uint32_t i = inrec_latest(w, epoch, seq); i != SIM_NONE32 && k < world;
         i = w->inrecs[i].prev)
        members[k++] = &w->inrecs[i];
    for (uint32_t a = 0, b = k; a + 1u < b; a++, b--) {
        const sim_inrec *t = members[a];
        members[a] = members[b - 1u];
        members[b - 1u] = t;
    }
    if (k != world) {
        world_fail(w, SIM_CORRECTNESS,
                   "op (epoch %llu, seq %llu) completed with world %u but %u members ran it",
                   (unsigned long long)epoch, (unsigned long long)seq, world, k);
        return false;
    }
    const bool relay = epoch == SIM_RELAY_EPOCH;
    if (relay) {
        /* The master reduces in peer-id order (§6.8.2), floats included: bit for bit. */
        for (uint32_t a = 1; a < k; a++) {
            for (uint32_t b = a; b > 0 && members[b - 1u]->peer_id > members[b]->peer_id; b--) {
                const sim_inrec *t = members[b];
                members[b] = members[b - 1u];
                members[b - 1u] = t;
            }
        }
    }
    const bool is_float =
        dt == pcclFloat || dt == pcclDouble || dt == pcclFloat16 || dt == pcclBFloat16;
    if (relay || !is_float) {
        memcpy(out, members[0]->input, (size_t)bytes);
        for (uint32_t i = 1; i < k; i++)
            ccoip_reduce_inplace(w->cfg.op, dt, out, members[i]->input, count);
        if (w->cfg.op == pcclAvg) ccoip_reduce_finalize_avg(dt, out, count, k);
        return true;
    }
    if (w->cfg.quant != pcclQuantNone) return false;
    if (k == 0) return false;
    const sim_epochrec *er = epoch_find(w, epoch, w->nodes[members[0]->node].group);
    if (er == NULL || er->ring_len != k) return false;
    for (uint32_t r = 0; r < k; r++) {
        const sim_inrec *src = NULL;
        for (uint32_t i = 0; i < k; i++) {
            if (members[i]->peer_id == er->ring[r]) src = members[i];
        }
        bufs[r] = src != NULL ? malloc((size_t)bytes + 1u) : NULL;
        if (bufs[r] == NULL) {
            for (uint32_t j = 0; j < r; j++)
                free(bufs[j]);
            return false;
        }
        memcpy(bufs[r], src->input, (size_t)bytes);
    }
    if (ccoip_ring_use_gather(bytes, k, false)) {
        /* The small all-reduce: every member reduces the inputs in rank (ring) order. */
        memcpy(out, bufs[0], (size_t)bytes);
        for (uint32_t r = 1; r < k; r++)
            ccoip_reduce_inplace(w->cfg.op, dt, out, bufs[r], count);
        if (w->cfg.op == pcclAvg) ccoip_reduce_finalize_avg(dt, out, count, k);
        for (uint32_t r = 0; r < k; r++)
            free(bufs[r]);
        return true;
    }
    const uint32_t steps = ccoip_ring_num_steps(k);
    for (uint32_t s = 0; s < steps; s++) {
        if (s == k - 1u && w->cfg.op == pcclAvg) {
            for (uint32_t r = 0; r < k; r++) {
                const ccoip_span sp = ccoip_ring_chunk(count, k, ccoip_ring_owned_chunk(k, r));
                ccoip_reduce_finalize_avg(dt, bufs[r] + sp.offset * esz, sp.count, k);
            }
        }
        for (uint32_t r = 0; r < k; r++) {
            ccoip_ring_step st;
            ccoip_ring_step_get(count, k, r, s, &st);
            const uint8_t *from = bufs[(r + k - 1u) % k] + st.recv.offset * esz;
            uint8_t *to = bufs[r] + st.recv.offset * esz;
            if (st.phase == CCOIP_RING_REDUCE_SCATTER) {
                ccoip_reduce_inplace(w->cfg.op, dt, to, from, st.recv.count);
            } else if (st.recv.count > 0) {
                memcpy(to, from, (size_t)(st.recv.count * esz));
            }
        }
    }
    if (k == 1u && w->cfg.op == pcclAvg) ccoip_reduce_finalize_avg(dt, bufs[0], count, 1);
    memcpy(out, bufs[0], (size_t)bytes);
    for (uint32_t r = 0; r < k; r++)
        free(bufs[r]);
    return true;
}

/* The record of (epoch, seq) (there is at most one), or NULL. */
static sim_oprec *oprec_find(sim_world *w, uint64_t epoch, uint64_t seq)
{
    const uint32_t r = seqidx_get(&w->oprec_idx, w->oprecs, sizeof *w->oprecs, epoch, seq);
    return r == SIM_NONE32 ? NULL : &w->oprecs[r];
}

static uint64_t first_diff(const uint8_t *a, const uint8_t *b, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++) {
        if (a[i] != b[i]) return i;
    }
    return n;
}

void check_allreduce_notify(sim_world *w, uint32_t node, sim_appcmd *c, const ccoip_action *act)
{
    sim_node *n = &w->nodes[node];
    const uint64_t bytes = c->count * w->elem_bytes;
    if (!w->cfg.in_place && memcmp(c->sendbuf, c->input, (size_t)bytes) != 0) {
        world_fail(w, SIM_CORRECTNESS, "node %u: all-reduce tag %u wrote its send buffer", node,
                   c->tag);
        return;
    }
    switch (act->result) {
    case pcclSuccess: {
        if (!c->commenced) {
            world_fail(w, SIM_CORRECTNESS, "node %u: all-reduce tag %u succeeded without a ring",
                       node, c->tag);
            return;
        }
        if (n->max_epoch_seen > c->epoch) {
            world_fail(w, SIM_CORRECTNESS,
                       "node %u: op (epoch %llu, seq %llu) completed after the peer saw epoch %llu",
                       node, (unsigned long long)c->epoch, (unsigned long long)c->seq,
                       (unsigned long long)n->max_epoch_seen);
            return;
        }
        sim_oprec *r = oprec_find(w, c->epoch, c->seq);
        if (r == NULL) {
            if (w->oprecs_len == w->oprecs_cap) {
                const uint32_t ncap = w->oprecs_cap == 0 ? 256u : w->oprecs_cap * 2u;
                sim_oprec *x = realloc(w->oprecs, (size_t)ncap * sizeof *x);
                if (x == NULL) {
                    world_fail(w, SIM_CRASH, "out of memory (ops)");
                    return;
                }
                w->oprecs = x;
                w->oprecs_cap = ncap;
            }
            r = &w->oprecs[w->oprecs_len++];
            memset(r, 0, sizeof *r);
            r->epoch = c->epoch;
            r->seq = c->seq;
            r->tag = c->tag;
            r->world = act->world_size;
            uint32_t none;
            if (!seqidx_put(&w->oprec_idx, w->oprecs, sizeof *w->oprecs, w->oprecs_len - 1u,
                            &none)) {
                world_fail(w, SIM_CRASH, "out of memory (op index)");
                return;
            }
            r->result = malloc((size_t)bytes + 1u);
            if (r->result == NULL) {
                world_fail(w, SIM_CRASH, "out of memory (results)");
                return;
            }
            memcpy(r->result, c->recvbuf, (size_t)bytes);
            uint8_t *ref = malloc((size_t)bytes + 1u);
            if (ref == NULL) {
                world_fail(w, SIM_CRASH, "out of memory (reference)");
                return;
            }
            if (reference(w, c->epoch, c->seq, act->world_size, c->count, ref) &&
                memcmp(ref, c->recvbuf, (size_t)bytes) != 0) {
                world_fail(w, SIM_CORRECTNESS,
                           "node %u: op (epoch %llu, seq %llu, tag %u) differs from the reference "
                           "reduction at byte %llu",
                           node, (unsigned long long)c->epoch, (unsigned long long)c->seq, c->tag,
                           (unsigned long long)first_diff(ref, c->recvbuf, bytes));
            }
            free(ref);
            /* Every member ran the op (its inputs were all recorded at its first ring action,
             * before any member could complete): the inputs are no longer needed. */
            for (uint32_t i = inrec_latest(w, c->epoch, c->seq); i != SIM_NONE32;
                 i = w->inrecs[i].prev) {
                free(w->inrecs[i].input);
                w->inrecs[i].input = NULL;
            }
        } else if (memcmp(r->result, c->recvbuf, (size_t)bytes) != 0) {
            world_fail(w, SIM_CORRECTNESS,
                       "node %u: op (epoch %llu, seq %llu) is not bit-identical to another "
                       "member's result (byte %llu)",
                       node, (unsigned long long)c->epoch, (unsigned long long)c->seq,
                       (unsigned long long)first_diff(r->result, c->recvbuf, bytes));
        }
        if (r != NULL) r->results++;
        break;
    }
    case pcclRankConnectionLost:
    case pcclTimeout:
    case pcclMasterConnectionFailed:
    case pcclTooFewPeers:
    case pcclInvalidUsage:
        if (act->result == pcclRankConnectionLost) w->seen_expect |= SIM_EXPECT_ABORT;
        if (act->result == pcclInvalidUsage) w->seen_expect |= SIM_EXPECT_INVALID_USAGE;
        if (w->cfg.in_place && memcmp(c->recvbuf, c->pre, (size_t)bytes) != 0) {
            world_fail(w, SIM_CORRECTNESS,
                       "node %u: failed in-place all-reduce (tag %u, result %d) did not restore "
                       "its buffer (byte %llu differs)",
                       node, c->tag, (int)act->result,
                       (unsigned long long)first_diff(c->recvbuf, c->pre, bytes));
        }
        break;
    default:
        world_fail(w, SIM_CORRECTNESS, "node %u: all-reduce returned unexpected result %d", node,
                   (int)act->result);
        break;
    }
}

uint64_t check_op_bound_ns(const sim_world *w)
{
    /* A vote may wait for a straggler's eviction, which may wait for a
     * heartbeat eviction first; plus room for the transfer itself. */
    return ((uint64_t)w->cfg.vote_timeout_ms + 4u * (uint64_t)w->cfg.evict_ms) * SIM_MS +
           20u * SIM_SEC;
}

static void check_cmd_age(sim_world *w, uint32_t i, uint64_t since, const char *what)
{
    const uint64_t start = since > w->quiet_ns ? since : w->quiet_ns;
    if (w->now > start && w->now - start > check_op_bound_ns(w)) {
        world_fail(w, SIM_LIVENESS,
                   "node %u (peer %u): %s waits for its verdict since %llu ms (bound %llu ms after "
                   "churn stopped)",
                   i, w->nodes[i].peer_index, what, (unsigned long long)(since / SIM_MS),
                   (unsigned long long)(check_op_bound_ns(w) / SIM_MS));
    }
}

void check_progress(sim_world *w)
{
    if (!w->quiet) return;
    /* Every wait counts from quiet_ns at the earliest: none can exceed the bound yet (no walk
     * over every node's records). */
    if (w->now <= w->quiet_ns || w->now - w->quiet_ns <= check_op_bound_ns(w)) return;
    for (uint32_t i = 1; i < w->num_nodes && !w->failed; i++) {
        if (w->node_st[i] != (uint8_t)NODE_ALIVE) continue;
        const sim_node *n = &w->nodes[i];
        if (n->app.pending_cmd != 0) check_cmd_age(w, i, n->app.pending_since_ns, "a command");
        for (uint32_t t = 0; t < SIM_MAX_TAGS; t++) {
            const sim_appcmd *c = &n->app.cmds[t];
            if (c->used && !c->done) check_cmd_age(w, i, c->submitted_ns, "an all-reduce");
        }
    }
}

static uint64_t state_hash(const sim_node *n)
{
    /* The compared tensors (all but the last key), bytes in order. */
    return ccoip_hash_bytes(n->app.st, (uint64_t)(SIM_STATE_KEYS - 1u) * SIM_STATE_BYTES);
}

void check_sync_notify(sim_world *w, uint32_t node, const ccoip_action *act)
{
    sim_node *n = &w->nodes[node];
    const sim_app *a = &n->app;
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
    sim_syncrec *r = NULL;
    for (uint32_t i = w->syncrecs_len; i-- > 0;) {
        if (w->syncrecs[i].round == n->sync_round && w->syncrecs[i].group == n->group) {
            r = &w->syncrecs[i];
            break;
        }
    }
    if (r == NULL) {
        world_fail(w, SIM_CORRECTNESS, "shared state: node %u sync succeeded without a verdict",
                   node);
        return;
    }
    const uint64_t h = state_hash(n);
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
    if (n->sync_retry) {
        n->sync_retry = false;
        w->seen_expect |= SIM_EXPECT_SYNC_RETRY;
    }
}

void check_sync_failed(sim_world *w, uint32_t node)
{
    const sim_node *n = &w->nodes[node];
    static const char *const names[SIM_STATE_KEYS] = {"a.weights", "b.moments", "c.local_rng"};
    for (uint32_t k = 0; k < SIM_STATE_KEYS; k++) {
        if (memcmp(n->app.st[k], n->app.st_pre[k], SIM_STATE_BYTES) == 0) continue;
        uint64_t h = 0;
        const uint64_t count = k == SIM_STATE_KEYS - 1u ? SIM_STATE_ELEMS / 2u : SIM_STATE_ELEMS;
        const ccoip_hash_entry e = {names[k], n->app.st[k], count, pcclFloat};
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
    const uint64_t bytes = w->probe_bytes != 0 ? w->probe_bytes : ((uint64_t)1 << 20);
    const uint64_t us = world_probe_us(w, ha, hb, bytes);
    const uint64_t mib = bytes >> 20;
    uint64_t c = mib > 0 ? us / mib : (us << 20) / bytes;
    return c == 0 ? 1u : c;
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

void check_optimize_notify(sim_world *w, uint32_t node)
{
    const sim_node *me = &w->nodes[node];
    /* The master gives links it saw fail (a p2p connect during a clog, a partition, a cut,
     * a lossy stream) the "unusable" cost: the optimum of the configured matrix is the
     * reference only on a clean network. */
    if (w->cfg.clogs > 0 || w->cfg.partitions > 0 || w->lossy) return;
    for (uint32_t i = 0; i < w->cfg.script_len; i++) {
        if (w->cfg.script[i].kind == SIM_SCRIPT_CUT) return;
    }
    /* The ring this peer installed: its last successful TopologyVerdict (a later epoch the
     * master already announced to others, e.g. a re-wire after a crash, is not optimized). */
    const sim_epochrec *e = epoch_find(w, me->verdict_epoch, me->group);
    if (e == NULL || e->ring_len < 2u || e->ring_len > 7u) return;
    uint32_t hosts[7];
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
    uint64_t cost[49];
    for (uint32_t i = 0; i < n; i++) {
        for (uint32_t j = 0; j < n; j++)
            cost[i * n + j] = i == j ? 0 : link_cost(w, hosts[i], hosts[j]);
    }
    uint64_t installed = 0;
    for (uint32_t k = 0; k < n; k++)
        installed += cost[k * n + (k + 1u) % n];
    uint32_t perm[7] = {0};
    bool used[7] = {true, false, false, false, false, false, false};
    const uint64_t best = best_cost(cost, n, perm, 1u, used, 0, UINT64_MAX);
    if (installed != best) {
        world_fail(w, SIM_CORRECTNESS,
                   "optimize: group %u epoch %llu ring of %u costs %llu, the optimum is %llu",
                   me->group, (unsigned long long)e->epoch, n, (unsigned long long)installed,
                   (unsigned long long)best);
        return;
    }
    w->seen_expect |= SIM_EXPECT_OPTIMIZED;
}

void check_final(sim_world *w)
{
    check_progress(w);
    if (w->failed) return;
    for (uint32_t i = 0; i < w->syncrecs_len; i++) {
        const sim_syncrec *r = &w->syncrecs[i];
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
    if ((w->cfg.expect & SIM_EXPECT_NO_EVICTION) && w->res->evictions == 0) {
        w->seen_expect |= SIM_EXPECT_NO_EVICTION;
    }
    const uint32_t missing = w->cfg.expect & ~w->seen_expect;
    if (missing != 0) {
        world_fail(w, SIM_CORRECTNESS, "scenario expectation not met (missing bits 0x%x)", missing);
    }
}

void check_free(sim_world *w)
{
    for (uint32_t i = 0; i < w->epochs_len; i++)
        free(w->epochs[i].ring);
    for (uint32_t i = 0; i < w->oprecs_len; i++)
        free(w->oprecs[i].result);
    for (uint32_t i = 0; i < w->inrecs_len; i++)
        free(w->inrecs[i].input);
    free(w->epochs);
    free(w->epoch_idx);
    free(w->oprecs);
    free(w->oprec_idx.slot);
    free(w->dec_arena);
    free(w->inrecs);
    free(w->inrec_idx.slot);
    free(w->commence_epoch_by_seq);
}
