/*
 * test_p2p_peers.c — send / recv (core/peer_pair.c, core/master_p2p.c;
 * docs/protocol.md §6.8.4, §8.5) run by real peer and master machines in
 * the in-memory harness: exact bytes for every pair of ranks at N = 2, 3, 4;
 * every rank sending and receiving at once on one tag (the pairs' tags
 * differ); a send beside a collective of the same tag; a multi-frame
 * transfer; a send with no receive (pcclTimeout: the op's own timeout, or
 * the master's vote timeout; nobody evicted); the sender killed mid-transfer
 * and the receiver frozen (the survivor fails, exactly once); an
 * authenticated run, where a pair HELLO without the op's key is closed.
 */
#include <stdlib.h>
#include <string.h>

#include "ccoip_auth.h"
#include "ccoip_coll.h"
#include "ccoip_master.h"
#include "ccoip_peer.h"
#include "ptest.h"
#include "sm_harness.h"

typedef struct p2p_op {
    uint8_t *buf;
    uint64_t bytes;
    uint64_t cmd;
} p2p_op;

static smh *world_of(uint32_t n, uint32_t pool, uint32_t vote_timeout_ms)
{
    return smh_ring_of(n, pool, 0, vote_timeout_ms);
}

/* Harness peer i's rank. */
static uint32_t rank_of(smh *h, uint32_t i)
{
    const int32_t r = ccoip_peer_rank(smh_peer(h, i));
    PT_ASSERT(r >= 0, "peer %u has a rank", i);
    return (uint32_t)r;
}

/* The harness peer of rank r. */
static uint32_t peer_of(smh *h, uint32_t n, uint32_t r)
{
    for (uint32_t i = 0; i < n; i++) {
        if (rank_of(h, i) == r) return i;
    }
    PT_ASSERT(false, "rank %u has a peer", r);
    return 0;
}

static uint8_t byte_of(uint32_t src, uint32_t dst, uint64_t k)
{
    return (uint8_t)(src * 37u + dst * 101u + (uint32_t)(k * 13u) + (uint32_t)(k >> 9));
}

/* Submits a send (kind SEND, to rank other) or a receive (RECV, from rank other) of `bytes` at
 * harness peer i, tagged as libpccl tags them (ccoip_p2p_tag). */
static void p2p_submit(smh *h, uint32_t i, ccoip_coll_kind kind, uint32_t other, uint64_t bytes,
                       uint64_t user_tag, uint32_t timeout_ms, p2p_op *op)
{
    ccoip_peer *p = smh_peer(h, i);
    const uint32_t me = rank_of(h, i);
    op->bytes = bytes;
    op->buf = malloc((size_t)bytes + 1u);
    if (kind == CCOIP_COLL_SEND) {
        for (uint64_t k = 0; k < bytes; k++)
            op->buf[k] = byte_of(me, other, k);
    } else {
        memset(op->buf, 0xA5, (size_t)bytes);
    }
    ccoip_allreduce_args a;
    memset(&a, 0, sizeof a);
    a.tag = kind == CCOIP_COLL_SEND ? ccoip_p2p_tag(user_tag, me, other)
                                    : ccoip_p2p_tag(user_tag, other, me);
    a.count = bytes;
    a.dtype = pcclUint8;
    a.op = pcclSum;
    a.kind = kind;
    a.root = other;
    a.pinned_epoch = ccoip_peer_epoch(p);
    a.world = ccoip_peer_world_size(p);
    a.send_bytes = kind == CCOIP_COLL_SEND ? bytes : 0;
    a.recv_bytes = kind == CCOIP_COLL_RECV ? bytes : 0;
    a.timeout_ms = timeout_ms;
    op->cmd = kind == CCOIP_COLL_SEND ? smh_allreduce(h, i, &a, op->buf, NULL)
                                      : smh_allreduce(h, i, &a, NULL, op->buf);
}

static void expect_received(const p2p_op *op, uint32_t src, uint32_t dst)
{
    for (uint64_t k = 0; k < op->bytes; k++) {
        PT_ASSERT(op->buf[k] == byte_of(src, dst, k), "%u -> %u: byte %llu is %u, not %u", src, dst,
                  (unsigned long long)k, op->buf[k], byte_of(src, dst, k));
    }
}

static void expect_result(smh *h, uint32_t i, const p2p_op *op, pcclResult_t want)
{
    pcclResult_t r = pcclSuccess;
    PT_ASSERT(smh_done(h, i, op->cmd, &r), "peer %u's op finished", i);
    PT_ASSERT(r == want, "peer %u: result %d, want %d", i, (int)r, (int)want);
    PT_ASSERT(smh_notify_count(h, i, op->cmd) == 1, "peer %u: exactly one NOTIFY", i);
}

PTEST(p2p_peers, every_pair_exact_n2_to_n4)
{
    for (uint32_t n = 2; n <= 4; n++) {
        smh *h = world_of(n, 1, 0);
        PT_ASSERT(h != NULL, "ring of %u", n);
        for (uint32_t src = 0; src < n; src++) {
            for (uint32_t dst = 0; dst < n; dst++) {
                if (src == dst) continue;
                const uint32_t ps = peer_of(h, n, src), pd = peer_of(h, n, dst);
                p2p_op s, r;
                /* The receive first on odd pairs, the send first on even ones. */
                if ((src + dst) % 2u == 1u) p2p_submit(h, pd, CCOIP_COLL_RECV, src, 1001, 3, 0, &r);
                p2p_submit(h, ps, CCOIP_COLL_SEND, dst, 1001, 3, 0, &s);
                if ((src + dst) % 2u == 0u) {
                    smh_run(h); /* the send waits for its receive */
                    PT_ASSERT(!smh_done(h, ps, s.cmd, NULL), "a send waits for its receive");
                    p2p_submit(h, pd, CCOIP_COLL_RECV, src, 1001, 3, 0, &r);
                }
                smh_run(h);
                expect_result(h, ps, &s, pcclSuccess);
                expect_result(h, pd, &r, pcclSuccess);
                expect_received(&r, src, dst);
                free(s.buf);
                free(r.buf);
            }
        }
        PT_ASSERT(smh_step_errors(h) == 0, "no step errors");
        PT_ASSERT(ccoip_master_num_accepted(smh_master(h)) == n, "nobody evicted");
        smh_destroy(h);
    }
}

PTEST(p2p_peers, every_rank_sends_and_receives_at_once_on_one_tag)
{
    /* The exchange of a pipeline stage or a halo: rank r sends to r + 1 and receives from r - 1,
     * all on tag 0, with an all-gather of tag 0 in flight too, over pools of one and two. */
    for (uint32_t pool = 1; pool <= 2; pool++) {
        const uint32_t n = 4;
        smh *h = world_of(n, pool, 0);
        PT_ASSERT(h != NULL, "ring of 4");
        p2p_op s[4], r[4];
        int32_t ag_send[4][3], ag_recv[4][12];
        uint64_t ag[4];
        for (uint32_t i = 0; i < n; i++) {
            const uint32_t me = rank_of(h, i);
            p2p_submit(h, i, CCOIP_COLL_SEND, (me + 1u) % n, 70000 + me, 0, 0, &s[i]);
            p2p_submit(h, i, CCOIP_COLL_RECV, (me + n - 1u) % n, 70000 + (me + n - 1u) % n, 0, 0,
                       &r[i]);
            ccoip_allreduce_args a;
            memset(&a, 0, sizeof a);
            a.count = 3;
            a.dtype = pcclInt32;
            a.kind = CCOIP_COLL_ALL_GATHER;
            a.pinned_epoch = ccoip_peer_epoch(smh_peer(h, i));
            a.world = n;
            a.send_bytes = 12;
            a.recv_bytes = 48;
            for (uint32_t k = 0; k < 3; k++)
                ag_send[i][k] = (int32_t)(me * 10u + k);
            ag[i] = smh_allreduce(h, i, &a, ag_send[i], ag_recv[i]);
        }
        smh_run(h);
        for (uint32_t i = 0; i < n; i++) {
            const uint32_t me = rank_of(h, i);
            expect_result(h, i, &s[i], pcclSuccess);
            expect_result(h, i, &r[i], pcclSuccess);
            expect_received(&r[i], (me + n - 1u) % n, me);
            pcclResult_t res;
            PT_ASSERT(smh_done(h, i, ag[i], &res) && res == pcclSuccess, "all-gather r=%d",
                      (int)res);
            for (uint32_t k = 0; k < 12; k++)
                PT_ASSERT(ag_recv[i][k] == (int32_t)((k / 3u) * 10u + k % 3u), "all-gather exact");
            free(s[i].buf);
            free(r[i].buf);
        }
        PT_ASSERT(smh_step_errors(h) == 0, "no step errors");
        smh_destroy(h);
    }
}

PTEST(p2p_peers, a_transfer_of_many_frames_is_exact)
{
    smh *h = world_of(3, 1, 0);
    PT_ASSERT(h != NULL, "ring of 3");
    const uint32_t ps = peer_of(h, 3, 2), pd = peer_of(h, 3, 0);
    p2p_op s, r;
    const uint64_t bytes = (3u << 20) + 17u; /* several ~1 MiB frames */
    p2p_submit(h, ps, CCOIP_COLL_SEND, 0, bytes, 11, 0, &s);
    p2p_submit(h, pd, CCOIP_COLL_RECV, 2, bytes, 11, 0, &r);
    smh_run(h);
    expect_result(h, ps, &s, pcclSuccess);
    expect_result(h, pd, &r, pcclSuccess);
    expect_received(&r, 2, 0);
    free(s.buf);
    free(r.buf);
    smh_destroy(h);
}

PTEST(p2p_peers, a_send_without_receive_times_out_and_nobody_is_evicted)
{
    smh *h = world_of(3, 1, 2000);
    PT_ASSERT(h != NULL, "ring of 3");
    p2p_op a, b;
    /* With the op's timeout: pcclTimeout when it elapses, not before. */
    p2p_submit(h, 0, CCOIP_COLL_SEND, rank_of(h, 1), 64, 1, 300, &a);
    smh_run(h);
    smh_advance(h, 250ull * 1000000ull);
    PT_ASSERT(!smh_done(h, 0, a.cmd, NULL), "still waiting before its timeout");
    smh_advance(h, 100ull * 1000000ull);
    expect_result(h, 0, &a, pcclTimeout);
    /* Without one: the master's vote timeout refuses it. */
    p2p_submit(h, 1, CCOIP_COLL_RECV, rank_of(h, 2), 64, 2, 0, &b);
    smh_run(h);
    smh_advance(h, 1500ull * 1000000ull);
    PT_ASSERT(!smh_done(h, 1, b.cmd, NULL), "still waiting before the vote timeout");
    smh_advance(h, 600ull * 1000000ull);
    expect_result(h, 1, &b, pcclTimeout);
    PT_ASSERT(ccoip_master_num_accepted(smh_master(h)) == 3, "nobody evicted for it");
    /* The group goes on: a matched pair right after is exact. */
    p2p_op s, r;
    p2p_submit(h, 2, CCOIP_COLL_SEND, rank_of(h, 0), 5000, 1, 0, &s);
    p2p_submit(h, 0, CCOIP_COLL_RECV, rank_of(h, 2), 5000, 1, 0, &r);
    smh_run(h);
    expect_result(h, 2, &s, pcclSuccess);
    expect_result(h, 0, &r, pcclSuccess);
    expect_received(&r, rank_of(h, 2), rank_of(h, 0));
    free(a.buf);
    free(b.buf);
    free(s.buf);
    free(r.buf);
    smh_destroy(h);
}

PTEST(p2p_peers, the_sender_killed_mid_transfer_fails_the_receive)
{
    smh *h = world_of(3, 1, 0);
    PT_ASSERT(h != NULL, "ring of 3");
    const uint32_t ps = peer_of(h, 3, 1), pd = peer_of(h, 3, 2);
    p2p_op s, r;
    smh_kill_on_ring_send(h, ps, 1); /* dies in its one send */
    p2p_submit(h, ps, CCOIP_COLL_SEND, 2, 4096, 8, 0, &s);
    p2p_submit(h, pd, CCOIP_COLL_RECV, 1, 4096, 8, 0, &r);
    smh_run(h);
    expect_result(h, pd, &r, pcclRankConnectionLost);
    PT_ASSERT(smh_step_errors(h) == 0, "no step errors");
    free(s.buf);
    free(r.buf);
    smh_destroy(h);
}

PTEST(p2p_peers, a_frozen_receiver_times_the_send_out)
{
    smh *h = world_of(3, 1, 0);
    PT_ASSERT(h != NULL, "ring of 3");
    const uint32_t ps = peer_of(h, 3, 0), pd = peer_of(h, 3, 1);
    p2p_op s, r;
    p2p_submit(h, ps, CCOIP_COLL_SEND, 1, 4096, 4, 400, &s);
    p2p_submit(h, pd, CCOIP_COLL_RECV, 0, 4096, 4, 0, &r);
    smh_freeze_peer(h, pd); /* stopped before it handles anything: never resumed */
    smh_run(h);
    smh_advance(h, 450ull * 1000000ull);
    expect_result(h, ps, &s, pcclTimeout);
    free(s.buf);
    free(r.buf);
    smh_destroy(h);
}

PTEST(p2p_peers, an_authenticated_pair_link_is_exact)
{
    ccoip_auth_config auth;
    memset(&auth, 0, sizeof auth);
    auth.mac = ccoip_auth_standin_mac; /* the core's keyed stand-in (the runtime's: HMAC) */
    memset(auth.run_key, 7, sizeof auth.run_key);
    memset(auth.secret, 0x10, sizeof auth.secret);
    ccoip_master_config mc;
    ccoip_master_config_default(&mc);
    mc.auth = auth;
    smh *h = smh_create(&mc, NULL);
    memset(auth.secret, 0x20, sizeof auth.secret);
    smh_set_peer_auth(h, &auth);
    PT_ASSERT(smh_form_ring(h, 3, 0), "ring of 3");
    const uint32_t ps = peer_of(h, 3, 0), pd = peer_of(h, 3, 2);
    p2p_op s, r;
    p2p_submit(h, ps, CCOIP_COLL_SEND, 2, 3000, 6, 0, &s);
    p2p_submit(h, pd, CCOIP_COLL_RECV, 0, 3000, 6, 0, &r);
    smh_run(h);
    expect_result(h, ps, &s, pcclSuccess);
    expect_result(h, pd, &r, pcclSuccess);
    expect_received(&r, 0, 2);
    free(s.buf);
    free(r.buf);
    smh_destroy(h);
}

PTEST(p2p_peers, a_receive_of_another_pair_under_the_same_tag_is_a_mismatch)
{
    /* Two pairs' tags colliding (a 2^-64 chance, forced here): rank 0 sends to rank 1, rank 2
     * receives from rank 0 under that very tag. The master checks each names the other's rank:
     * both get pcclInvalidUsage, no byte lands. */
    smh *h = world_of(3, 1, 0);
    PT_ASSERT(h != NULL, "ring of 3");
    const uint32_t p0 = peer_of(h, 3, 0), p2 = peer_of(h, 3, 2);
    p2p_op s, r;
    p2p_submit(h, p0, CCOIP_COLL_SEND, 1, 64, 9, 0, &s);
    r.bytes = 64;
    r.buf = malloc(65);
    memset(r.buf, 0xA5, 64);
    ccoip_allreduce_args a;
    memset(&a, 0, sizeof a);
    a.tag = ccoip_p2p_tag(9, 0, 1); /* the send's tag, not ccoip_p2p_tag(9, 0, 2) */
    a.count = 64;
    a.dtype = pcclUint8;
    a.kind = CCOIP_COLL_RECV;
    a.root = 0;
    a.pinned_epoch = ccoip_peer_epoch(smh_peer(h, p2));
    a.world = 3;
    a.recv_bytes = 64;
    r.cmd = smh_allreduce(h, p2, &a, NULL, r.buf);
    smh_run(h);
    expect_result(h, p0, &s, pcclInvalidUsage);
    expect_result(h, p2, &r, pcclInvalidUsage);
    for (uint32_t k = 0; k < 64; k++)
        PT_ASSERT(r.buf[k] == 0xA5, "no byte landed");
    free(s.buf);
    free(r.buf);
    smh_destroy(h);
}

PTEST(p2p_peers, the_pair_link_is_kept_for_the_next_send_and_dialled_again_when_lost)
{
    /* Ranks 0 and 2 of 4 are no ring neighbours: every link between them is a pair link. */
    smh *h = world_of(4, 1, 0);
    PT_ASSERT(h != NULL, "ring of 4");
    const uint32_t ps = peer_of(h, 4, 0), pd = peer_of(h, 4, 2);
    PT_ASSERT(smh_p2p_links(h, ps, pd) == 0, "no link before");
    for (uint32_t round = 0; round < 3; round++) {
        p2p_op s, r;
        p2p_submit(h, ps, CCOIP_COLL_SEND, 2, 2000 + round, round, 0, &s);
        p2p_submit(h, pd, CCOIP_COLL_RECV, 0, 2000 + round, round, 0, &r);
        smh_run(h);
        expect_result(h, ps, &s, pcclSuccess);
        expect_result(h, pd, &r, pcclSuccess);
        expect_received(&r, 0, 2);
        PT_ASSERT(smh_p2p_links(h, ps, pd) == 1, "round %u: one pair link, kept", round);
        free(s.buf);
        free(r.buf);
    }
    /* A send refused for want of its receive (it never commenced) leaves the kept link alone;
     * the next send uses it. */
    p2p_op a;
    p2p_submit(h, ps, CCOIP_COLL_SEND, 2, 64, 50, 200, &a);
    smh_run(h);
    smh_advance(h, 300ull * 1000000ull);
    expect_result(h, ps, &a, pcclTimeout);
    p2p_op s, r;
    p2p_submit(h, ps, CCOIP_COLL_SEND, 2, 777, 51, 0, &s);
    p2p_submit(h, pd, CCOIP_COLL_RECV, 0, 777, 51, 0, &r);
    smh_run(h);
    expect_result(h, ps, &s, pcclSuccess);
    expect_result(h, pd, &r, pcclSuccess);
    expect_received(&r, 0, 2);
    PT_ASSERT(smh_p2p_links(h, ps, pd) == 1, "still the one pair link");
    /* Idle for P_PAIR_IDLE_MS (30 s): the sender closes it. */
    smh_advance(h, 31000ull * 1000000ull);
    PT_ASSERT(smh_p2p_links(h, ps, pd) == 0, "the idle link closed");
    PT_ASSERT(smh_step_errors(h) == 0, "no step errors");
    free(a.buf);
    free(s.buf);
    free(r.buf);
    smh_destroy(h);
}
