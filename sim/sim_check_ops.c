/*
 * sim_check_ops.c — the all-reduce checkers: every member's input recorded
 * at the op's first ring action (or, relayed, as its initiate carried it),
 * every completed all-reduce bit-identical on all members and equal to a
 * reference reduction of the inputs (exact: the ring order of the epoch for
 * floats, peer-id order for relayed ops), an aborted in-place all-reduce
 * restored, a send buffer never written, no op completed across an epoch;
 * and which op slot is a relayed op of the collective set (check_op_begin,
 * for sim_check_coll.c).
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "ccoip_algo.h"
#include "ccoip_hd.h"
#include "ccoip_reduce.h"
#include "ccoip_ring.h"
#include "sim_check_int.h"

static uint64_t commence_epoch(const sim_checker *ck, uint64_t seq, bool *found)
{
    *found = seq < ck->commence_cap && ck->commence_epoch_by_seq[seq] != UINT64_MAX;
    return *found ? ck->commence_epoch_by_seq[seq] : 0;
}

void check_commence(sim_checker *ck, const ccoip_pb_collective_commence *c)
{
    sim_world *w = ck->w;
    if (c->seq == 0) return; /* joins an optimistic ring (§6.8.1): no seq of its own */
    if (c->seq >= (uint64_t)1 << 24) {
        world_fail(w, SIM_CRASH, "collective seq %llu beyond the checker's table",
                   (unsigned long long)c->seq);
        return;
    }
    if (c->seq >= ck->commence_cap) {
        uint64_t ncap = ck->commence_cap == 0 ? 1024u : ck->commence_cap;
        while (ncap <= c->seq)
            ncap *= 2u;
        uint64_t *n = realloc(ck->commence_epoch_by_seq, (size_t)ncap * 8u);
        if (n == NULL) {
            world_fail(w, SIM_CRASH, "out of memory (seq table)");
            return;
        }
        for (uint64_t i = ck->commence_cap; i < ncap; i++)
            n[i] = UINT64_MAX;
        ck->commence_epoch_by_seq = n;
        ck->commence_cap = ncap;
    }
    if (ck->commence_epoch_by_seq[c->seq] != UINT64_MAX &&
        ck->commence_epoch_by_seq[c->seq] != c->epoch) {
        world_fail(w, SIM_CORRECTNESS, "seq %llu commenced in epochs %llu and %llu",
                   (unsigned long long)c->seq,
                   (unsigned long long)ck->commence_epoch_by_seq[c->seq],
                   (unsigned long long)c->epoch);
    }
    ck->commence_epoch_by_seq[c->seq] = c->epoch;
}

void check_collective_verdict(sim_checker *ck, uint32_t dst, const ccoip_pb_collective_verdict *v)
{
    sim_world *w = ck->w;
    /* A send / recv (its tag has the top bit, ccoip_p2p_tag) never relays, and the membership
     * may change under it without ending it when it spares its two members
     * (docs/collectives-p2p.md): its epoch is checked at the members' NOTIFY
     * (sim_check_coll.c). */
    if ((v->tag >> 63) != 0) return;
    if (!v->aborted && chk_node(ck, dst)->relay_coll[v->tag % SIM_MAX_TAGS]) {
        /* The answer to a relayed op of the collective set (§6.8.3): its result may be empty
         * (a barrier, a non-root's reduce or gather), so the op, not the length, says so. */
        check_coll_relay_verdict(ck, dst, v);
        return;
    }
    if (v->relay_result.len > 0) {
        /* Master relay (§6.8.2): the op is decided, and its every member is answered in this
         * step, before any can complete: bind each member's input (as its initiate carried it)
         * to the master's seq now, as the first ring action does for a ring op. A member that
         * died meanwhile still counts: its input is in the result. */
        sim_chk_node *dn = chk_node(ck, dst);
        const uint32_t t = (uint32_t)(v->tag % SIM_MAX_TAGS);
        if (dn->relay_in[t] == NULL || dn->relay_in_len[t] != v->relay_result.len) {
            world_fail(w, SIM_CORRECTNESS,
                       "relayed result of %llu bytes for tag %llu that node %u did not initiate "
                       "so",
                       (unsigned long long)v->relay_result.len, (unsigned long long)v->tag, dst);
            return;
        }
        inrec_add_bytes(ck, dst, SIM_RELAY_EPOCH, v->seq, dn->relay_in[t], dn->relay_in_len[t]);
        free(dn->relay_in[t]);
        dn->relay_in[t] = NULL;
        sim_appcmd *c =
            w->nodes[dst].m != NULL ? app_find_unbound_tag(app_of(ck->wl, dst), v->tag) : NULL;
        if (c != NULL) {
            c->commenced = true;
            c->epoch = SIM_RELAY_EPOCH;
            c->seq = v->seq;
        }
        return;
    }
    bool found;
    const uint64_t e = commence_epoch(ck, v->seq, &found);
    /* Epochs are per group (docs/protocol.md §6.9): a re-wire of one group does not end another
     * group's epoch, so the rule is per member: no success verdict for an op of epoch e to a
     * peer that was already sent (and got) a newer epoch. */
    const uint64_t seen = chk_node(ck, dst)->max_epoch_seen;
    if (!v->aborted && found && e < seen) {
        world_fail(w, SIM_CORRECTNESS,
                   "the master completes op seq %llu of epoch %llu for node %u after it saw "
                   "epoch %llu",
                   (unsigned long long)v->seq, (unsigned long long)e, dst,
                   (unsigned long long)seen);
    }
}

void check_relay_initiate(void *ctx, uint32_t node, const uint8_t *frame, uint64_t len,
                          const uint8_t *input, uint64_t bytes)
{
    sim_checker *ck = ctx;
    sim_world *w = ck->w;
    ccoip_pb_peer_to_master m;
    if (!world_decode_p2m(w, frame, len, &m) ||
        m.body_case != CCOIP_PB_PEER_TO_MASTER_BODY_COLLECTIVE_INITIATE ||
        !m.body.collective_initiate.relay) {
        world_fail(w, SIM_CORRECTNESS, "node %u: a SEND with a span that is no relayed initiate",
                   node);
        return;
    }
    sim_chk_node *n = chk_node(ck, node);
    const uint32_t t = (uint32_t)(m.body.collective_initiate.tag % SIM_MAX_TAGS);
    if (n->relay_coll[t]) {
        /* An op of the collective set: its input was taken from the application at OP_BEGIN;
         * the initiate must carry exactly that (its SEND, relay_input: §6.8.3). */
        if (m.body.collective_initiate.kind == 0 || n->relay_in[t] == NULL ||
            n->relay_in_len[t] != bytes ||
            (bytes > 0 && memcmp(n->relay_in[t], input, (size_t)bytes) != 0)) {
            world_fail(w, SIM_CORRECTNESS,
                       "node %u: the relayed initiate of tag %u carries %llu bytes that are not "
                       "the op's send buffer (%llu bytes)",
                       node, t, (unsigned long long)bytes, (unsigned long long)n->relay_in_len[t]);
        }
        return;
    }
    free(n->relay_in[t]);
    n->relay_in[t] = malloc((size_t)bytes + 1u);
    n->relay_in_len[t] = bytes;
    if (n->relay_in[t] == NULL) {
        world_fail(w, SIM_CRASH, "out of memory (relay inputs)");
        return;
    }
    memcpy(n->relay_in[t], input, (size_t)bytes);
}

void check_op_begin(void *ctx, uint32_t node, const ccoip_action *act)
{
    sim_checker *ck = ctx;
    sim_world *w = ck->w;
    if (act->op_slot >= SIM_MAX_OPS) return; /* the shared-state sync's slots */
    const sim_appcmd *c = app_find_cmd(app_of(ck->wl, node), act->cmd_id);
    if (c == NULL) return;
    /* Every op of the tag begins here: what a former relayed op left is dropped (a refused
     * relay gets no verdict to consume it). */
    sim_chk_node *n = chk_node(ck, node);
    const uint32_t t = c->tag % SIM_MAX_TAGS;
    free(n->relay_in[t]);
    n->relay_in[t] = NULL;
    n->relay_in_len[t] = 0;
    n->relay_coll[t] = false;
    /* A ring op of the collective set begins at its commence (check_coll_commence ran when
     * the master sent it); one that begins before is relayed (§6.8.3: the master's answer is
     * its outcome). Its input now, as the application filled SEND: the member may die before
     * the answer, which still counts its input. */
    if (!c->coll || c->kind == 0 || c->commenced) return;
    n->relay_coll[t] = true;
    n->relay_pin[t] = c->pin;
    n->relay_in_len[t] = c->send_len;
    n->relay_in[t] = malloc((size_t)c->send_len + 1u);
    if (n->relay_in[t] == NULL) {
        world_fail(w, SIM_CRASH, "out of memory (relay inputs)");
        return;
    }
    if (c->send_len > 0) memcpy(n->relay_in[t], c->input, (size_t)c->send_len);
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
uint32_t seqidx_get(const sim_seqidx *x, const void *recs, size_t stride, uint64_t epoch,
                    uint64_t seq)
{
    if (x->cap == 0) return SIM_NONE32;
    return x->slot[seqidx_slot(x, recs, stride, epoch, seq)];
}

/* Indexes record r, the newest (records 0 .. r-1 are indexed): it becomes its key's latest, and
 * *prev the record it replaced there (SIM_NONE32: none). False when out of memory. */
bool seqidx_put(sim_seqidx *x, const void *recs, size_t stride, uint32_t r, uint32_t *prev)
{
    if ((uint64_t)(r + 2u) * 2u > x->cap) {
        const uint32_t ncap = x->cap == 0 ? 1024u : x->cap * 2u;
        uint32_t *idx = sim_index_new(ncap);
        if (idx == NULL) return false;
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
uint32_t inrec_latest(const sim_checker *ck, uint64_t epoch, uint64_t seq)
{
    return seqidx_get(&ck->inrec_idx, ck->inrecs, sizeof *ck->inrecs, epoch, seq);
}

static void inrec_add(sim_checker *ck, uint32_t node, uint64_t epoch, uint64_t seq,
                      const sim_appcmd *c)
{
    sim_world *w = ck->w;
    sim_inrec *r = inrec_add_bytes(ck, node, epoch, seq, c->input, c->count * w->elem_bytes);
    if (r != NULL) r->algo = c->algo;
}

sim_inrec *inrec_add_bytes(sim_checker *ck, uint32_t node, uint64_t epoch, uint64_t seq,
                           const uint8_t *input, uint64_t bytes)
{
    sim_world *w = ck->w;
    if (!sim_grow(&ck->inrecs, &ck->inrecs_cap, ck->inrecs_len, sizeof *ck->inrecs, 256u, false)) {
        world_fail(w, SIM_CRASH, "out of memory (inputs)");
        return NULL;
    }
    sim_inrec *r = &ck->inrecs[ck->inrecs_len++];
    r->epoch = epoch;
    r->seq = seq;
    r->node = node;
    r->peer_id = w->nodes[node].peer_id;
    r->input = NULL;
    r->len = bytes;
    r->algo = 0;
    if (!seqidx_put(&ck->inrec_idx, ck->inrecs, sizeof *ck->inrecs, ck->inrecs_len - 1u,
                    &r->prev)) {
        world_fail(w, SIM_CRASH, "out of memory (input index)");
        return NULL;
    }
    r->input = malloc((size_t)bytes + 1u);
    if (r->input == NULL) {
        world_fail(w, SIM_CRASH, "out of memory (inputs)");
        return NULL;
    }
    memcpy(r->input, input, (size_t)bytes);
    return r;
}

/* The first ring action of an op: the command commenced; its (epoch, seq) as the checkers number
 * it, and its input recorded for the reference reduction. */
void check_op_bound(void *ctx, uint32_t node, const ccoip_action *act)
{
    sim_checker *ck = ctx;
    sim_world *w = ck->w;
    const sim_node *wn = &w->nodes[node];
    sim_appcmd *c = app_find_cmd(app_of(ck->wl, node), wn->ops[act->op_slot].cmd_id);
    if (c == NULL) return;
    if (c->coll && c->kind != 0) {
        check_coll_bound(ck, node, c, act);
        return;
    }
    c->commenced = true;
    c->epoch = act->epoch;
    c->seq = act->seq;
    if (act->seq == 0) {
        /* An optimistic op: its ring frames carry seq 0, keyed by (epoch, tag). The checker
         * numbers it (group, tag, n-th use in the epoch), high bit set. */
        sim_chk_node *n = chk_node(ck, node);
        const uint32_t t = (uint32_t)(act->tag % SIM_MAX_TAGS);
        if (n->opt_epoch[t] != act->epoch) {
            n->opt_epoch[t] = act->epoch;
            n->opt_uses[t] = 0;
        }
        n->opt_uses[t]++;
        c->seq = ((uint64_t)1 << 63) | ((uint64_t)wn->group << 40) | ((act->tag & 0xffffu) << 24) |
                 n->opt_uses[t];
    }
    if (act->tag != c->tag) {
        world_fail(w, SIM_CORRECTNESS, "node %u: op of tag %u runs ring frames of tag %llu", node,
                   c->tag, (unsigned long long)act->tag);
        return;
    }
    inrec_add(ck, node, act->epoch, c->seq, c);
}

/* The reference: integers fold in any order (wrapping ops commute); floats
 * follow the ring schedule of the epoch, rank r = ring[r]. Returns false
 * when it cannot be computed (the caller then checks identity only). */
static bool reference_run(sim_checker *ck, uint64_t epoch, uint64_t seq, const sim_inrec **members,
                          uint8_t **bufs, uint32_t world, uint64_t count, uint8_t *out);

static bool reference(sim_checker *ck, uint64_t epoch, uint64_t seq, uint32_t world, uint64_t count,
                      uint8_t *out)
{
    sim_world *w = ck->w;
    uint32_t k = 0;
    for (uint32_t i = inrec_latest(ck, epoch, seq); i != SIM_NONE32; i = ck->inrecs[i].prev)
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
    const bool ok = reference_run(ck, epoch, seq, members, bufs, k, count, out);
    free(members);
    free(bufs);
    return ok;
}

static bool reference_run(sim_checker *ck, uint64_t epoch, uint64_t seq, const sim_inrec **members,
                          uint8_t **bufs, uint32_t world, uint64_t count, uint8_t *out)
{
    sim_world *w = ck->w;
    const pcclDataType_t dt = w->cfg.dtype;
    const uint64_t esz = w->elem_bytes;
    const uint64_t bytes = count * esz;
    /* The op's records in the order they were made (the chain runs newest first). */
    uint32_t k = 0;
    for (uint32_t i = inrec_latest(ck, epoch, seq); i != SIM_NONE32 && k < world;
         i = ck->inrecs[i].prev)
        members[k++] = &ck->inrecs[i];
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
    const sim_epochrec *er = epoch_find(ck, epoch, w->nodes[members[0]->node].group);
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
    if (members[0]->algo == CCOIP_ALGO_HALVING_DOUBLING && ccoip_hd_fits(count, k)) {
        /* Halving-doubling (ccoip_hd.h) by ring rank: each step's partner ranges are disjoint
         * from what the partner writes in that step, so the steps run in place. */
        const uint32_t steps = ccoip_hd_steps(k);
        for (uint32_t t = 0; t < steps; t++) {
            if (t == steps / 2u && w->cfg.op == pcclAvg) {
                for (uint32_t r = 0; r < k; r++) {
                    const ccoip_span sp = ccoip_hd_owned(count, k, r);
                    ccoip_reduce_finalize_avg(dt, bufs[r] + sp.offset * esz, sp.count, k);
                }
            }
            for (uint32_t r = 0; r < k; r++) {
                ccoip_hd_step st;
                ccoip_hd_step_get(count, k, r, t, &st);
                const uint8_t *from = bufs[st.partner] + st.recv.offset * esz;
                uint8_t *to = bufs[r] + st.recv.offset * esz;
                if (st.reduce) {
                    ccoip_reduce_inplace(w->cfg.op, dt, to, from, st.recv.count);
                } else {
                    memcpy(to, from, (size_t)(st.recv.count * esz));
                }
            }
        }
        memcpy(out, bufs[0], (size_t)bytes);
        for (uint32_t r = 0; r < k; r++)
            free(bufs[r]);
        return true;
    }
    if (w->cfg.algo == CCOIP_ALGO_DIRECT ||
        (w->cfg.algo == CCOIP_ALGO_AUTO && ccoip_ring_use_gather(bytes, k, false))) {
        /* The direct all-reduce (forced, or the rule's small one): every member reduces the
         * inputs in rank (ring) order. */
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
static sim_oprec *oprec_find(sim_checker *ck, uint64_t epoch, uint64_t seq)
{
    const uint32_t r = seqidx_get(&ck->oprec_idx, ck->oprecs, sizeof *ck->oprecs, epoch, seq);
    return r == SIM_NONE32 ? NULL : &ck->oprecs[r];
}

uint64_t first_diff(const uint8_t *a, const uint8_t *b, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++) {
        if (a[i] != b[i]) return i;
    }
    return n;
}

void check_allreduce_notify(sim_checker *ck, uint32_t node, sim_appcmd *c, const ccoip_action *act)
{
    sim_world *w = ck->w;
    const sim_chk_node *n = chk_node(ck, node);
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
        sim_oprec *r = oprec_find(ck, c->epoch, c->seq);
        if (r == NULL) {
            if (!sim_grow(&ck->oprecs, &ck->oprecs_cap, ck->oprecs_len, sizeof *ck->oprecs, 256u,
                          false)) {
                world_fail(w, SIM_CRASH, "out of memory (ops)");
                return;
            }
            r = &ck->oprecs[ck->oprecs_len++];
            memset(r, 0, sizeof *r);
            r->epoch = c->epoch;
            r->seq = c->seq;
            r->tag = c->tag;
            r->world = act->world_size;
            uint32_t none;
            if (!seqidx_put(&ck->oprec_idx, ck->oprecs, sizeof *ck->oprecs, ck->oprecs_len - 1u,
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
            if (reference(ck, c->epoch, c->seq, act->world_size, c->count, ref) &&
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
            for (uint32_t i = inrec_latest(ck, c->epoch, c->seq); i != SIM_NONE32;
                 i = ck->inrecs[i].prev) {
                free(ck->inrecs[i].input);
                ck->inrecs[i].input = NULL;
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

void check_ops_free(sim_checker *ck)
{
    for (uint32_t i = 0; i < ck->oprecs_len; i++)
        free(ck->oprecs[i].result);
    for (uint32_t i = 0; i < ck->inrecs_len; i++)
        free(ck->inrecs[i].input);
    free(ck->oprecs);
    free(ck->oprec_idx.slot);
    free(ck->inrecs);
    free(ck->inrec_idx.slot);
    free(ck->commence_epoch_by_seq);
    check_coll_free(ck);
}
