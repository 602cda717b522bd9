/*
 * sim_check_coll.c — the checkers of the collective set (--kind; core/ccoip_coll.h):
 *
 * - membership and inputs: when the master sends a member the CollectiveCommence of an op
 *   (epoch, seq), the member's input (what its application put in SEND) is recorded under
 *   (epoch, seq), as the relay records its inputs at the verdict; its first ring action must
 *   carry that (epoch, seq);
 * - the master relay (docs/protocol.md §6.8.3): an op whose OP_BEGIN comes before any commence
 *   is relayed; its input is taken from SEND then (check_op_begin; the initiate must carry
 *   exactly those bytes), and bound to (pinned epoch, seq) when the master's answer is sent
 *   to the member — its commence and verdict at once, so the command counts as commenced and
 *   its output goes through the very checks below (a member that died before the answer
 *   still counts, with the input it sent);
 * - results: every member whose op succeeded holds exactly the output its kind, rank and root
 *   define over the inputs of the op's members, taken in the ring order of the op's epoch (the
 *   TopologyVerdict's ring): broadcast the root's tensor; reduce (at the root) and
 *   reduce-scatter the reduction of chunk / block k in the schedule's order
 *   x_k op (x_{k-1} op (... op x_{k+1})), AVG divided once by the world; all-gather and gather
 *   (at the root) every member's block in rank order; scatter block `rank` of the root's
 *   input; all-to-all block `rank` of every member's input. Bit for bit (integers, floats
 *   and bitwise ops alike: the reference reduces in the schedule's order). The member's rank
 *   as its application read it must be its index in that ring, the commence's world the ring's
 *   size, and every member of the ring must have been commenced;
 * - send / recv (--kind p2p; docs/collectives-p2p.md): a successful receive holds, bit for
 *   bit, the input of the member that was rank src in the op's pinned epoch (recorded at its
 *   commence), of the same byte count, and nothing past it; both NOTIFYs report count * size
 *   bytes; the op's commenced members are exactly its two ranks (p2p_check_output). A send /
 *   recv may outlive an epoch change that spares its two members: its verdict is exempt from
 *   the epoch rule of sim_check_ops.c;
 * - one verdict: the members of one commenced op agree on success or failure (a member that
 *   lost its master is not counted; the two halves of a send / recv are one op);
 * - restore: a failed op leaves SEND as the application filled it (the kinds with a backup,
 *   reduce-scatter and all-to-all in place and reduce at the root in place, restore it; the
 *   others never write it), except a broadcast's non-root buffer, which is RECV too; an
 *   out-of-place op never writes SEND.
 */
#include <stdlib.h>
#include <string.h>

#include "ccoip_coll.h"
#include "ccoip_reduce.h"
#include "ccoip_ring.h"
#include "sim_check_int.h"

void check_coll_commence(sim_checker *ck, uint32_t dst, const ccoip_pb_collective_commence *cc)
{
    sim_world *w = ck->w;
    if (w->nodes[dst].m == NULL || w->nodes[dst].state != NODE_ALIVE) return;
    sim_appcmd *c = app_find_unbound_tag(app_of(ck->wl, dst), cc->tag);
    if (c == NULL || !c->coll || c->kind == 0) return;
    if (cc->seq == 0) {
        world_fail(w, SIM_CORRECTNESS,
                   "node %u: collective kind %u (tag %u) commenced optimistically (seq 0)", dst,
                   c->kind, c->tag);
        return;
    }
    c->commenced = true;
    c->epoch = cc->epoch;
    c->seq = cc->seq;
    c->commence_world = cc->world_size;
    inrec_add_bytes(ck, dst, cc->epoch, cc->seq, c->input, c->send_len);
}

void check_coll_bound(sim_checker *ck, uint32_t node, const sim_appcmd *c, const ccoip_action *act)
{
    sim_world *w = ck->w;
    if (!c->commenced || act->epoch != c->epoch || act->seq != c->seq || act->tag != c->wire_tag) {
        world_fail(w, SIM_CORRECTNESS,
                   "node %u: collective kind %u tag %u runs ring frames (epoch %llu, seq %llu, "
                   "tag %llu) it was not commenced with (epoch %llu, seq %llu)",
                   node, c->kind, c->tag, (unsigned long long)act->epoch,
                   (unsigned long long)act->seq, (unsigned long long)act->tag,
                   (unsigned long long)c->epoch, (unsigned long long)c->seq);
    }
}

void check_coll_relay_verdict(sim_checker *ck, uint32_t dst, const ccoip_pb_collective_verdict *v)
{
    sim_world *w = ck->w;
    sim_chk_node *dn = chk_node(ck, dst);
    const uint32_t t = (uint32_t)(v->tag % SIM_MAX_TAGS);
    const uint64_t pin = dn->relay_pin[t];
    /* The master answers only an op pinned to the group's current epoch: the member cannot
     * have seen a newer one (no op completes across an epoch change). */
    if (dn->max_epoch_seen > pin) {
        world_fail(w, SIM_CORRECTNESS,
                   "node %u: the master answers a relayed op pinned to epoch %llu (tag %llu, seq "
                   "%llu) after the peer saw epoch %llu",
                   dst, (unsigned long long)pin, (unsigned long long)v->tag,
                   (unsigned long long)v->seq, (unsigned long long)dn->max_epoch_seen);
        return;
    }
    /* Every member's input under (pinned epoch, the master's seq), before any member can
     * complete, as the commence records a ring op's; a member that died meanwhile counts. */
    inrec_add_bytes(ck, dst, pin, v->seq, dn->relay_in[t], dn->relay_in_len[t]);
    free(dn->relay_in[t]);
    dn->relay_in[t] = NULL;
    dn->relay_in_len[t] = 0;
    dn->relay_coll[t] = false;
    sim_appcmd *c =
        w->nodes[dst].m != NULL ? app_find_unbound_tag(app_of(ck->wl, dst), v->tag) : NULL;
    if (c == NULL || !c->coll || c->kind == 0) return;
    if (v->relay_result.len != c->recv_len) {
        world_fail(w, SIM_CORRECTNESS,
                   "node %u: relayed %s (tag %u) answered with %llu bytes for its %llu-byte "
                   "receive buffer",
                   dst, sim_op_kind_name(c->kind), c->tag, (unsigned long long)v->relay_result.len,
                   (unsigned long long)c->recv_len);
        return;
    }
    /* The answer is the op's commence and verdict at once: no commence names a world, so
     * the world the member pinned stands for it (checked against the epoch's ring). */
    c->commenced = true;
    c->relayed = true;
    c->epoch = pin;
    c->seq = v->seq;
    c->commence_world = c->world;
}

/* What every member of an op agrees on, besides (epoch, seq): its kind and root; for send /
 * recv, whose two members hold complementary kinds and roots, the pair (src << 16 | dst) under
 * kind SEND. */
static void coll_key(const sim_appcmd *c, uint32_t *kind, uint32_t *root)
{
    if (ccoip_coll_p2p((ccoip_coll_kind)c->kind)) {
        const bool send = c->kind == CCOIP_COLL_SEND;
        *kind = CCOIP_COLL_SEND;
        *root = ((send ? c->rank : c->root) << 16) | (send ? c->root : c->rank);
        return;
    }
    *kind = c->kind;
    *root = c->root;
}

/* The record of (epoch, seq), made on first use; NULL when out of memory. */
static sim_collrec *collrec_get(sim_checker *ck, const sim_appcmd *c, uint32_t node)
{
    const uint32_t r =
        seqidx_get(&ck->collrec_idx, ck->collrecs, sizeof *ck->collrecs, c->epoch, c->seq);
    if (r != SIM_NONE32) return &ck->collrecs[r];
    if (!sim_grow(&ck->collrecs, &ck->collrecs_cap, ck->collrecs_len, sizeof *ck->collrecs, 256u,
                  false)) {
        world_fail(ck->w, SIM_CRASH, "out of memory (collective records)");
        return NULL;
    }
    sim_collrec *x = &ck->collrecs[ck->collrecs_len++];
    memset(x, 0, sizeof *x);
    x->epoch = c->epoch;
    x->seq = c->seq;
    coll_key(c, &x->kind, &x->root);
    x->world = c->commence_world;
    x->first_node = node;
    uint32_t none;
    if (!seqidx_put(&ck->collrec_idx, ck->collrecs, sizeof *ck->collrecs, ck->collrecs_len - 1u,
                    &none)) {
        world_fail(ck->w, SIM_CRASH, "out of memory (collective index)");
        return NULL;
    }
    return x;
}

/* acc (count elements) = x_k op (x_{k-1} op (... op x_{k+1})) over the n inputs' spans at
 * byte offset off (ccoip_coll.h: the reduce-scatter's order), AVG divided by n. False when
 * out of memory. */
static bool reduce_block(const sim_world *w, const uint8_t *const *in, uint32_t n, uint32_t k,
                         uint64_t off, uint64_t count, uint8_t *acc)
{
    const uint64_t bytes = count * w->elem_bytes;
    uint8_t *tmp = malloc((size_t)bytes + 1u);
    if (tmp == NULL) return false;
    memcpy(acc, in[(k + 1u) % n] + off, (size_t)bytes);
    for (uint32_t j = 2; j <= n; j++) {
        memcpy(tmp, in[(k + j) % n] + off, (size_t)bytes);
        ccoip_reduce_inplace(w->cfg.op, w->cfg.dtype, tmp, acc, count); /* x op acc */
        memcpy(acc, tmp, (size_t)bytes);
    }
    if (w->cfg.op == pcclAvg) ccoip_reduce_finalize_avg(w->cfg.dtype, acc, count, n);
    free(tmp);
    return true;
}

/* What rank r's RECV (recv_len bytes) must hold after the op, from the inputs by rank. */
static bool coll_reference(const sim_world *w, const sim_appcmd *c, const uint8_t *const *in,
                           uint32_t n, uint32_t r, uint8_t *out)
{
    const uint64_t esz = w->elem_bytes, cnt = c->count, b = cnt * esz;
    const uint32_t root = c->root;
    switch ((ccoip_coll_kind)c->kind) {
    case CCOIP_COLL_BROADCAST:
        memcpy(out, in[root], (size_t)b);
        return true;
    case CCOIP_COLL_REDUCE:
        if (r != root) return true;
        for (uint32_t k = 0; k < n; k++) {
            const ccoip_span sp = ccoip_ring_chunk(cnt, n, k);
            if (!reduce_block(w, in, n, k, sp.offset * esz, sp.count, out + sp.offset * esz)) {
                return false;
            }
        }
        return true;
    case CCOIP_COLL_REDUCE_SCATTER:
        return reduce_block(w, in, n, r, (uint64_t)r * b, cnt, out);
    case CCOIP_COLL_ALL_GATHER:
        for (uint32_t j = 0; j < n; j++)
            memcpy(out + (uint64_t)j * b, in[j], (size_t)b);
        return true;
    case CCOIP_COLL_GATHER:
        if (r != root) return true;
        for (uint32_t j = 0; j < n; j++)
            memcpy(out + (uint64_t)j * b, in[j], (size_t)b);
        return true;
    case CCOIP_COLL_SCATTER:
        memcpy(out, in[root] + (uint64_t)r * b, (size_t)b);
        return true;
    case CCOIP_COLL_ALL_TO_ALL:
        for (uint32_t j = 0; j < n; j++)
            memcpy(out + (uint64_t)j * b, in[j] + (uint64_t)r * b, (size_t)b);
        return true;
    case CCOIP_COLL_BARRIER:
    case CCOIP_COLL_ALL_REDUCE:
    case CCOIP_COLL_SEND: /* p2p_check_output */
    case CCOIP_COLL_RECV:
    case CCOIP_COLL_TUNE: /* not in the workload */
        return true;
    }
    return true;
}

/* A successful op: node's RECV against the reference over the members' inputs. */
static void coll_check_output(sim_checker *ck, uint32_t node, const sim_appcmd *c)
{
    sim_world *w = ck->w;
    const sim_epochrec *er = epoch_find(ck, c->epoch, w->nodes[node].group);
    if (er == NULL) {
        world_fail(w, SIM_CORRECTNESS, "node %u: collective (epoch %llu, seq %llu) of no ring",
                   node, (unsigned long long)c->epoch, (unsigned long long)c->seq);
        return;
    }
    const uint32_t n = er->ring_len;
    if (c->commence_world != n || c->world != n || c->pin != c->epoch) {
        world_fail(w, SIM_CORRECTNESS,
                   "node %u: collective kind %u (epoch %llu, seq %llu) succeeded with world %u "
                   "(commence %u) pinned to epoch %llu, but the epoch's ring has %u members",
                   node, c->kind, (unsigned long long)c->epoch, (unsigned long long)c->seq,
                   c->world, c->commence_world, (unsigned long long)c->pin, n);
        return;
    }
    const uint64_t me = w->nodes[node].peer_id;
    if (c->rank >= n || er->ring[c->rank] != me) {
        world_fail(w, SIM_CORRECTNESS,
                   "node %u: read rank %u for epoch %llu, but it is not that rank of the ring",
                   node, c->rank, (unsigned long long)c->epoch);
        return;
    }
    const uint8_t **in = calloc((size_t)n + 1u, sizeof *in);
    uint8_t *ref = malloc((size_t)c->recv_len + 1u);
    if (in == NULL || ref == NULL) {
        free(in);
        free(ref);
        world_fail(w, SIM_CRASH, "out of memory (collective reference)");
        return;
    }
    uint32_t members = 0;
    for (uint32_t i = inrec_latest(ck, c->epoch, c->seq); i != SIM_NONE32; i = ck->inrecs[i].prev) {
        const sim_inrec *x = &ck->inrecs[i];
        uint32_t rank = n;
        for (uint32_t k = 0; k < n; k++) {
            if (er->ring[k] == x->peer_id) rank = k;
        }
        if (rank == n || in[rank] != NULL || x->input == NULL) {
            world_fail(w, SIM_CORRECTNESS,
                       "collective (epoch %llu, seq %llu): peer %llu commenced but is no member "
                       "of the epoch's ring (or twice)",
                       (unsigned long long)c->epoch, (unsigned long long)c->seq,
                       (unsigned long long)x->peer_id);
            goto out;
        }
        in[rank] = x->input;
        members++;
    }
    if (members != n) {
        world_fail(w, SIM_CORRECTNESS,
                   "node %u: collective kind %u (epoch %llu, seq %llu) succeeded, but %u of the "
                   "ring's %u members were commenced",
                   node, c->kind, (unsigned long long)c->epoch, (unsigned long long)c->seq, members,
                   n);
        goto out;
    }
    if (!coll_reference(w, c, in, n, c->rank, ref)) {
        world_fail(w, SIM_CRASH, "out of memory (collective reference)");
        goto out;
    }
    ck->coll_checked++;
    w->res->coll_checked++;
    if (c->relayed) {
        ck->coll_relayed++;
        w->res->coll_relayed++;
    }
    if (memcmp(ref, c->recvbuf, (size_t)c->recv_len) != 0) {
        world_fail(w, SIM_CORRECTNESS,
                   "node %u: %s%s (epoch %llu, seq %llu, tag %u, rank %u of %u, root %u) differs "
                   "from the reference at byte %llu of %llu",
                   node, c->relayed ? "relayed " : "", sim_op_kind_name(c->kind),
                   (unsigned long long)c->epoch, (unsigned long long)c->seq, c->tag, c->rank, n,
                   c->root, (unsigned long long)first_diff(ref, c->recvbuf, c->recv_len),
                   (unsigned long long)c->recv_len);
    }
out:
    free(in);
    free(ref);
}

/* A successful send / recv (docs/collectives-p2p.md): pinned to the epoch it ran in, as the
 * ranks of that epoch's ring; both members commenced, and no one else; the byte counts the
 * NOTIFY reports count * size; at the receiver RECV holds, bit for bit, the input of the member
 * that was rank src (its sender) in that epoch, and not a byte beyond it was written. */
static void p2p_check_output(sim_checker *ck, uint32_t node, const sim_appcmd *c,
                             const ccoip_action *act)
{
    sim_world *w = ck->w;
    const bool send = c->kind == CCOIP_COLL_SEND;
    const sim_epochrec *er = epoch_find(ck, c->epoch, w->nodes[node].group);
    if (er == NULL) {
        world_fail(w, SIM_CORRECTNESS, "node %u: %s (epoch %llu, seq %llu) of no ring", node,
                   send ? "send" : "recv", (unsigned long long)c->epoch,
                   (unsigned long long)c->seq);
        return;
    }
    const uint32_t n = er->ring_len;
    const uint64_t me = w->nodes[node].peer_id;
    if (c->pin != c->epoch || c->world != n || c->commence_world != n || c->rank >= n ||
        er->ring[c->rank] != me || c->root >= n || c->root == c->rank) {
        world_fail(w, SIM_CORRECTNESS,
                   "node %u: %s (epoch %llu, seq %llu, tag %u) succeeded pinned to epoch %llu as "
                   "rank %u of %u with the other member rank %u (commence world %u), but the "
                   "epoch's ring has %u members and that is not its rank",
                   node, send ? "send" : "recv", (unsigned long long)c->epoch,
                   (unsigned long long)c->seq, c->tag, (unsigned long long)c->pin, c->rank,
                   c->world, c->root, c->commence_world, n);
        return;
    }
    const uint64_t bytes = send ? c->send_len : c->recv_len;
    const uint64_t told = send ? act->tx_bytes : act->rx_bytes;
    if (bytes != c->count * w->elem_bytes || told != bytes) {
        world_fail(w, SIM_CORRECTNESS,
                   "node %u: %s (epoch %llu, seq %llu, tag %u) of %llu elements succeeded with "
                   "%llu bytes %s (buffer %llu bytes)",
                   node, send ? "send" : "recv", (unsigned long long)c->epoch,
                   (unsigned long long)c->seq, c->tag, (unsigned long long)c->count,
                   (unsigned long long)told, send ? "sent" : "received", (unsigned long long)bytes);
        return;
    }
    const uint64_t src_id = er->ring[send ? c->rank : c->root];
    const uint64_t dst_id = er->ring[send ? c->root : c->rank];
    const sim_inrec *in = NULL;
    uint32_t members = 0;
    for (uint32_t i = inrec_latest(ck, c->epoch, c->seq); i != SIM_NONE32; i = ck->inrecs[i].prev) {
        const sim_inrec *x = &ck->inrecs[i];
        members++;
        if (x->peer_id == src_id) {
            in = x;
        } else if (x->peer_id != dst_id) {
            members = 3u; /* a third member */
        }
    }
    if (members != 2u || in == NULL) {
        world_fail(w, SIM_CORRECTNESS,
                   "node %u: %s (epoch %llu, seq %llu) succeeded, but its commenced members are "
                   "not exactly its sender (peer %llu) and receiver (peer %llu)",
                   node, send ? "send" : "recv", (unsigned long long)c->epoch,
                   (unsigned long long)c->seq, (unsigned long long)src_id,
                   (unsigned long long)dst_id);
        return;
    }
    if (chk_node(ck, node)->max_epoch_seen > c->epoch) w->res->p2p_outlived++;
    if (send) return;
    ck->coll_checked++;
    w->res->coll_checked++;
    if (in->input == NULL || in->len != c->recv_len) {
        world_fail(w, SIM_CORRECTNESS,
                   "node %u: recv (epoch %llu, seq %llu) of %llu bytes succeeded, but its sender "
                   "sent %llu",
                   node, (unsigned long long)c->epoch, (unsigned long long)c->seq,
                   (unsigned long long)c->recv_len, (unsigned long long)in->len);
        return;
    }
    if (memcmp(in->input, c->recvbuf, (size_t)c->recv_len) != 0 ||
        c->recvbuf[c->recv_len] != 0xa5u) {
        world_fail(w, SIM_CORRECTNESS,
                   "node %u: recv (epoch %llu, seq %llu, tag %u, rank %u from rank %u of %u) "
                   "differs from the sender's input at byte %llu of %llu",
                   node, (unsigned long long)c->epoch, (unsigned long long)c->seq, c->tag, c->rank,
                   c->root, n, (unsigned long long)first_diff(in->input, c->recvbuf, c->recv_len),
                   (unsigned long long)c->recv_len);
    }
}

void check_coll_notify(sim_checker *ck, uint32_t node, sim_appcmd *c, const ccoip_action *act)
{
    sim_world *w = ck->w;
    const pcclResult_t res = act->result;
    switch (res) {
    case pcclSuccess:
    case pcclRankConnectionLost:
    case pcclTimeout:
    case pcclMasterConnectionFailed:
    case pcclTooFewPeers:
    case pcclInvalidUsage:
    case pcclInvalidArgument:
    case pcclUpdateTopologyFailed:
        break;
    default:
        world_fail(w, SIM_CORRECTNESS, "node %u: %s (tag %u) returned unexpected result %d", node,
                   sim_op_kind_name(c->kind), c->tag, (int)res);
        return;
    }
    if (res == pcclRankConnectionLost) w->seen_expect |= SIM_EXPECT_ABORT;
    if (res == pcclInvalidUsage) w->seen_expect |= SIM_EXPECT_INVALID_USAGE;
    /* SEND as the application filled it: never written out of place; in place restored on
     * failure (or never written) -- but for a broadcast's non-root buffer, which is RECV. */
    const bool bcast_recv = c->kind == CCOIP_COLL_BROADCAST && c->rank != c->root;
    const bool send_kept = !c->aliased || (res != pcclSuccess && !bcast_recv);
    if (send_kept && memcmp(c->sendbuf, c->input, (size_t)c->send_len) != 0) {
        world_fail(w, SIM_CORRECTNESS,
                   "node %u: %s (tag %u, %s, result %d) %s its send buffer (byte %llu differs)",
                   node, sim_op_kind_name(c->kind), c->tag,
                   c->aliased ? "in place" : "out of place", (int)res,
                   c->aliased ? "did not restore" : "wrote",
                   (unsigned long long)first_diff(c->sendbuf, c->input, c->send_len));
        return;
    }
    if (res == pcclSuccess && !c->commenced) {
        world_fail(w, SIM_CORRECTNESS, "node %u: %s (tag %u) succeeded without a commence", node,
                   sim_op_kind_name(c->kind), c->tag);
        return;
    }
    if (!c->commenced || res == pcclMasterConnectionFailed) return;
    /* One verdict per op. */
    sim_collrec *x = collrec_get(ck, c, node);
    if (x == NULL) return;
    if (res == pcclSuccess) {
        x->ok++;
    } else {
        if (x->failed == 0) x->first_failure = res;
        x->failed++;
    }
    if (x->ok > 0 && x->failed > 0) {
        world_fail(w, SIM_CORRECTNESS,
                   "%s (epoch %llu, seq %llu): %u member(s) succeeded and %u failed (first "
                   "failure %d; node %u now got %d)",
                   sim_op_kind_name(c->kind), (unsigned long long)c->epoch,
                   (unsigned long long)c->seq, x->ok, x->failed, (int)x->first_failure, node,
                   (int)res);
        return;
    }
    uint32_t kind, root;
    coll_key(c, &kind, &root);
    if (x->kind != kind || x->root != root) {
        world_fail(w, SIM_CORRECTNESS,
                   "op (epoch %llu, seq %llu) ran as kind %u root %u and kind %u root %u",
                   (unsigned long long)c->epoch, (unsigned long long)c->seq, x->kind, x->root, kind,
                   root);
        return;
    }
    if (res != pcclSuccess) return;
    if (ccoip_coll_p2p((ccoip_coll_kind)c->kind)) {
        p2p_check_output(ck, node, c, act);
    } else {
        coll_check_output(ck, node, c);
    }
    if (x->ok == x->world) {
        /* Every member's output checked: the inputs are no longer needed. */
        for (uint32_t i = inrec_latest(ck, c->epoch, c->seq); i != SIM_NONE32;
             i = ck->inrecs[i].prev) {
            free(ck->inrecs[i].input);
            ck->inrecs[i].input = NULL;
        }
    }
}

void check_coll_free(sim_checker *ck)
{
    free(ck->collrecs);
    free(ck->collrec_idx.slot);
}
