/*
 * sim_app_coll.c — the workload's collective set (sim_config.coll_kind != 0,
 * docs/simulator.md): each op's kind and root, pinned to the ring the
 * application last read, and the rounds of send / recv (--kind p2p). The
 * training loop around them is sim_app.c's.
 */
#include <stdlib.h>
#include <string.h>

#include "ccoip_algo.h"
#include "ccoip_coll.h"
#include "ccoip_dtype.h"
#include "sim_app.h"
/* ------------------------------------------------------------------------ */
/* The collective set (sim_config.coll_kind != 0)                           */
/* ------------------------------------------------------------------------ */

static uint64_t app_mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x;
}

/* What an op is pinned to: the ring as the application last read it (sim_app.info_*). */
typedef struct app_pin {
    uint64_t epoch;
    uint32_t rank;
    uint32_t world;
} app_pin;

static void app_submit_coll(sim_workload *wl, uint32_t node, uint32_t slot, uint64_t wire_tag,
                            uint32_t kind, uint32_t root, uint64_t count, const app_pin *pin);

/* The kind and root of tag's next op: a function of what every member of the pinned epoch's
 * ring knows alike (seed, group, epoch, tag, the tag's successes in that epoch), so all submit
 * the same kind and root; members that read different epochs may disagree, and the master
 * then refuses the op (pcclUpdateTopologyFailed or pcclInvalidUsage): they update and retry. */
static void app_coll_pick(const sim_world *w, uint32_t group, uint64_t epoch, uint32_t tag,
                          uint64_t n, uint32_t world, uint32_t *kind, uint32_t *root)
{
    uint64_t h = app_mix64(w->cfg.seed ^ 0x636f6c6cull);
    h = app_mix64(h ^ epoch);
    h = app_mix64(h ^ ((uint64_t)group << 32) ^ tag);
    h = app_mix64(h ^ n);
    *kind = w->cfg.coll_kind == SIM_KIND_MIX ? (uint32_t)(h % CCOIP_COLL_KINDS) : w->cfg.coll_kind;
    *root = ccoip_coll_rooted((ccoip_coll_kind)*kind) ? (uint32_t)((h >> 32) % world) : 0;
}

/* One op of the collective set on tag, pinned as libpccl pins it (bindings/libpccl/
 * pccl_coll.c): rank, epoch and world as the last NOTIFY left them (sim_app.info_*), buffers
 * sized by ccoip_coll_sizes (aliased as ccoip_coll.h says when in place), the epoch and world
 * passed with the op (the world decides the master relay, ccoip_coll_relay_use). False when
 * no ring is installed (the caller updates the topology first). */
bool app_start_coll(sim_workload *wl, uint32_t node, uint32_t tag)
{
    sim_world *w = wl->w;
    sim_node *n = &w->nodes[node];
    sim_app *a = app_of(wl, node);
    if (w->vt->peer_ring == NULL) {
        world_fail(w, SIM_CRASH, "--kind: these state machines do not report their ring");
        return false;
    }
    const uint64_t epoch = a->info_epoch;
    const int32_t rank = a->info_rank;
    const uint32_t world = a->info_world;
    if (rank < 0 || world < 2u || (uint32_t)rank >= world || epoch == 0) return false;
    if (epoch != a->coll_epoch) {
        a->coll_epoch = epoch;
        memset(a->coll_n, 0, sizeof a->coll_n);
    }
    uint32_t kind = 0, root = 0;
    app_coll_pick(w, n->group, epoch, tag, a->coll_n[tag % SIM_MAX_TAGS], world, &kind, &root);
    if (kind == CCOIP_COLL_ALL_REDUCE) {
        /* An all-reduce of the mix: the workload's as before (unpinned), numbered like the rest. */
        app_start_allreduce(wl, node, tag);
        sim_appcmd *c = &a->cmds[tag];
        c->coll = true;
        c->rank = (uint32_t)rank;
        c->world = world;
        c->pin = epoch;
        return true;
    }
    const app_pin pin = {epoch, (uint32_t)rank, world};
    app_submit_coll(wl, node, tag, tag, kind, root, w->cfg.count, &pin);
    return true;
}

/* Submits one op of the collective set (any kind but the all-reduce) in command slot `slot`:
 * on the wire tag wire_tag, of count elements, pinned to pin; its buffers sized by
 * ccoip_coll_sizes (aliased as ccoip_coll.h says when in place) and its input filled. */
static void app_submit_coll(sim_workload *wl, uint32_t node, uint32_t slot, uint64_t wire_tag,
                            uint32_t kind, uint32_t root, uint64_t count, const app_pin *pin)
{
    sim_world *w = wl->w;
    sim_node *n = &w->nodes[node];
    sim_app *a = app_of(wl, node);
    const uint32_t tag = slot, world = pin->world;
    const uint64_t epoch = pin->epoch;
    const int32_t rank = (int32_t)pin->rank;
    sim_appcmd *c = &a->cmds[tag];
    app_cmd_free(c);
    c->used = true;
    c->coll = true;
    c->tag = tag;
    c->wire_tag = wire_tag;
    c->cmd_id = ++a->next_cmd_id;
    c->submitted_ns = w->now;
    c->count = count;
    if (a->mismatch_next && tag == 0) {
        c->count++;
        a->mismatch_next = false;
    }
    c->kind = kind;
    c->root = root;
    c->rank = (uint32_t)rank;
    c->world = world;
    c->pin = epoch;
    const uint64_t esz = w->elem_bytes, b = c->count * esz;
    uint64_t sl = 0, rl = 0;
    if (ccoip_coll_sizes((ccoip_coll_kind)kind, c->count, esz, world, (uint32_t)rank, root, &sl,
                         &rl) != pcclSuccess) {
        world_fail(w, SIM_CRASH, "node %u: ccoip_coll_sizes refused kind %u count %llu world %u",
                   node, kind, (unsigned long long)c->count, world);
        return;
    }
    c->send_len = sl;
    c->recv_len = rl;
    const bool ip = w->cfg.in_place, at_root = (uint32_t)rank == root;
    /* One allocation when the buffers alias (ccoip_coll.h, in_place); the view's offset. */
    uint64_t one = 0, soff = 0, roff = 0;
    if (kind == CCOIP_COLL_BROADCAST) {
        one = b; /* one buffer, bound as both */
    } else if (ip && kind == CCOIP_COLL_ALL_GATHER) {
        one = rl;
        soff = (uint64_t)rank * b;
    } else if (ip && kind == CCOIP_COLL_REDUCE_SCATTER) {
        one = sl;
        roff = (uint64_t)rank * b;
    } else if (ip && (kind == CCOIP_COLL_ALL_TO_ALL || (kind == CCOIP_COLL_REDUCE && at_root))) {
        one = sl;
    } else if (ip && kind == CCOIP_COLL_GATHER && at_root) {
        one = rl;
        soff = (uint64_t)root * b;
    } else if (ip && kind == CCOIP_COLL_SCATTER && at_root) {
        one = sl;
        roff = (uint64_t)root * b;
    }
    c->aliased = one > 0 || kind == CCOIP_COLL_BROADCAST;
    c->alloc[0] = malloc((size_t)(c->aliased ? one : sl) + 1u);
    c->alloc[1] = c->aliased ? NULL : malloc((size_t)rl + 1u);
    c->input = malloc((size_t)sl + 1u);
    c->pre = malloc((size_t)rl + 1u);
    if (c->alloc[0] == NULL || (!c->aliased && c->alloc[1] == NULL) || c->input == NULL ||
        c->pre == NULL) {
        world_fail(w, SIM_CRASH, "out of memory (application buffers)");
        return;
    }
    /* A recognizable pattern where no input goes, then the input. */
    memset(c->alloc[0], 0xa5, (size_t)(c->aliased ? one : sl) + 1u);
    if (c->alloc[1] != NULL) memset(c->alloc[1], 0xa5, (size_t)rl + 1u);
    c->sendbuf = c->alloc[0] + soff;
    c->recvbuf = c->aliased ? c->alloc[0] + roff : c->alloc[1];
    app_fill(w, c->input, sl / esz,
             ((uint64_t)n->peer_index << 40) ^ (a->iter << 16) ^ (a->attempt << 4) ^ tag ^
                 ((uint64_t)kind << 36));
    memcpy(c->sendbuf, c->input, (size_t)sl);
    memcpy(c->pre, c->recvbuf, (size_t)rl);
    a->outstanding++;
    ccoip_event ev;
    memset(&ev, 0, sizeof ev);
    ev.type = CCOIP_EV_SUBMIT;
    ev.cmd.type = CCOIP_CMD_ALL_REDUCE;
    ev.cmd.cmd_id = c->cmd_id;
    ev.cmd.allreduce.tag = wire_tag;
    ev.cmd.allreduce.count = c->count;
    ev.cmd.allreduce.dtype = w->cfg.dtype;
    ev.cmd.allreduce.op = w->cfg.op;
    ev.cmd.allreduce.quant_algorithm = pcclQuantNone; /* §6.8.3: the other kinds are exact */
    ev.cmd.allreduce.quant_dtype = w->cfg.quant_dtype;
    ev.cmd.allreduce.in_place = c->aliased;
    ev.cmd.allreduce.kind = (ccoip_coll_kind)kind;
    ev.cmd.allreduce.root = root;
    ev.cmd.allreduce.pinned_epoch = epoch;
    ev.cmd.allreduce.world = world;
    ev.cmd.allreduce.send_bytes = sl;
    ev.cmd.allreduce.recv_bytes = rl;
    ev.cmd.allreduce.timeout_ms = w->cfg.op_timeout_ms;
    /* The run's forced algorithm (sim_config_swarm_algo) where it can run this op: ring and
     * ring_striped on every kind, direct on a non-empty all-reduce (the relay's bound depends on
     * the kind: left to the rule). The same on every member: each derives the op alike. */
    const uint32_t fa = w->cfg.algo;
    if (fa == CCOIP_ALGO_RING || fa == CCOIP_ALGO_RING_STRIPED ||
        (fa == CCOIP_ALGO_DIRECT && kind == CCOIP_COLL_ALL_REDUCE && c->count > 0) ||
        (fa == CCOIP_ALGO_HALVING_DOUBLING && kind == CCOIP_COLL_ALL_REDUCE)) {
        ev.cmd.allreduce.algorithm = fa;
    }
    c->algo = ev.cmd.allreduce.algorithm;
    world_feed(w, node, &ev);
}

/* Send / recv (SIM_KIND_P2P): round `round` of epoch `epoch` on tag t, as every member of the
 * epoch's ring derives it alike (seed, group, epoch, round, t): in about a quarter of the rounds
 * one pair (src sends to dst, the others idle on this tag), else a shift by k (every rank r
 * sends to r + k and receives from r - k); the count (cfg.count, or in an eighth of the rounds
 * 0 .. cfg.count elements), the caller's tag (distinct per round) and which half each member
 * submits first. */
typedef struct app_p2p_round {
    bool single;
    uint32_t src, dst; /* single */
    uint32_t k;        /* shift */
    uint64_t count;
    uint64_t user_tag;
    bool recv_first;
} app_p2p_round;

static void app_p2p_pick(const sim_world *w, uint32_t group, uint64_t epoch, uint64_t round,
                         uint32_t t, uint32_t world, app_p2p_round *out)
{
    uint64_t h = app_mix64(w->cfg.seed ^ 0x7032702070327032ull);
    h = app_mix64(h ^ epoch);
    h = app_mix64(h ^ ((uint64_t)group << 32) ^ t);
    h = app_mix64(h ^ round);
    const uint64_t h2 = app_mix64(h);
    out->single = h % 4u == 0;
    out->src = (uint32_t)((h >> 8) % world);
    out->dst = (out->src + 1u + (uint32_t)((h >> 24) % (world - 1u))) % world;
    out->k = 1u + (uint32_t)((h >> 40) % (world - 1u));
    out->count = h2 % 8u == 0 ? (h2 >> 8) % (w->cfg.count + 1u) : w->cfg.count;
    out->user_tag = (round << 8) | t;
    out->recv_first = ((h2 >> 4) & 1u) != 0;
}

/* Submits member `me`'s half of the round (slots 2t: its send, 2t + 1: its receive). */
static void app_p2p_submit(sim_workload *wl, uint32_t node, uint32_t t, bool send, uint32_t other,
                           const app_p2p_round *rd, const app_pin *pin)
{
    const uint32_t me = pin->rank;
    const uint64_t wire =
        send ? ccoip_p2p_tag(rd->user_tag, me, other) : ccoip_p2p_tag(rd->user_tag, other, me);
    app_submit_coll(wl, node, 2u * t + (send ? 0u : 1u), wire,
                    send ? CCOIP_COLL_SEND : CCOIP_COLL_RECV, other, rd->count, pin);
}

/* One round of send / recv on every tag (both halves of a member at once), pinned as
 * app_start_coll pins. A member with nothing to do in the round (another pair's) counts it as
 * a step and goes on to the next (the update waits for the pair). */
void app_p2p_phase(sim_workload *wl, uint32_t node)
{
    sim_world *w = wl->w;
    sim_node *n = &w->nodes[node];
    sim_app *a = app_of(wl, node);
    if (w->vt->peer_ring == NULL) {
        world_fail(w, SIM_CRASH, "--kind: these state machines do not report their ring");
        return;
    }
    const app_pin pin = {a->info_epoch, (uint32_t)a->info_rank, a->info_world};
    if (a->info_rank < 0 || pin.world < 2u || pin.rank >= pin.world || pin.epoch == 0) {
        /* No ring installed: update the topology first. */
        a->iter = a->iter > 0 ? a->iter : 1u;
        a->state = APP_SLEEPING;
        app_schedule(wl, node, 10u * SIM_MS);
        return;
    }
    if (pin.epoch != a->p2p_epoch) {
        a->p2p_epoch = pin.epoch;
        a->p2p_round = 0;
    }
    const uint64_t round = a->p2p_round++;
    for (uint32_t s = 0; s < SIM_MAX_TAGS; s++)
        app_cmd_free(&a->cmds[s]);
    for (uint32_t t = 0; t < w->cfg.tags && !w->failed; t++) {
        if (n->state != NODE_ALIVE) return;
        app_p2p_round rd;
        app_p2p_pick(w, n->group, pin.epoch, round, t, pin.world, &rd);
        const uint32_t me = pin.rank;
        bool do_send, do_recv;
        uint32_t to, from;
        if (rd.single) {
            do_send = me == rd.src;
            do_recv = me == rd.dst;
            to = rd.dst;
            from = rd.src;
        } else {
            do_send = do_recv = true;
            to = (me + rd.k) % pin.world;
            from = (me + pin.world - rd.k) % pin.world;
        }
        if (do_recv && rd.recv_first) app_p2p_submit(wl, node, t, false, from, &rd, &pin);
        if (do_send && !w->failed) app_p2p_submit(wl, node, t, true, to, &rd, &pin);
        if (do_recv && !rd.recv_first && !w->failed) {
            app_p2p_submit(wl, node, t, false, from, &rd, &pin);
        }
    }
    if (a->rogue_next && 2u * w->cfg.tags < SIM_MAX_TAGS && !w->failed) {
        /* As app_reduce_phase: an all-reduce on a tag nobody else uses (a free slot). */
        a->rogue_next = false;
        app_start_allreduce(wl, node, SIM_MAX_TAGS - 1u);
    }
    if (a->outstanding == 0 && !w->failed) {
        /* Idle this round: a step done. */
        a->successes++;
        n->steps_quiet++;
        a->iter++;
        app_sleep(wl, node, sim_rng_below(&n->rng, w->cfg.think_max_ns + 1u));
    }
}
