/*
 * test_master.c — the master state machine (core/master*.c), driven through
 * the in-memory harness (tests/common/sm_harness.h) with real peers:
 * join and admission by unanimous vote, pending-peer queries, parameter
 * agreement, too few peers, stragglers, silent peers, unreachable links,
 * malformed input, the abort-verdict canary.
 */
#include <string.h>

#include "ccoip_dtype.h"
#include "ccoip_master.h"
#include "ptest.h"
#include "sm_harness.h"

static ccoip_allreduce_args ar_args(uint64_t tag, uint64_t count, pcclDataType_t dt, pcclRedOp_t op)
{
    ccoip_allreduce_args a;
    memset(&a, 0, sizeof(a));
    a.tag = tag;
    a.count = count;
    a.dtype = dt;
    a.op = op;
    a.quant_algorithm = pcclQuantNone;
    return a;
}

PTEST(master, join_three_admitted_by_unanimous_vote)
{
    smh *h = smh_create(NULL, NULL);
    for (uint32_t i = 0; i < 3; i++)
        smh_add_peer(h, 0);
    pcclResult_t r;
    uint32_t world = 0;
    PT_ASSERT(ccoip_peer_rank(smh_peer(h, 0)) == -1 && ccoip_peer_epoch(smh_peer(h, 0)) == 0,
              "no rank and epoch 0 before admission");
    uint64_t c0 = smh_submit(h, 0, CCOIP_CMD_CONNECT);
    smh_run(h);
    PT_ASSERT(smh_done_ex(h, 0, c0, &r, &world, NULL) && r == pcclSuccess && world == 1,
              "the first peer is admitted alone (r=%d world=%u)", (int)r, world);
    const uint64_t epoch1 = ccoip_peer_epoch(smh_peer(h, 0));
    PT_ASSERT(ccoip_peer_rank(smh_peer(h, 0)) == 0 && epoch1 > 0, "alone: rank 0, epoch %llu",
              (unsigned long long)epoch1);
    uint64_t c1 = smh_submit(h, 1, CCOIP_CMD_CONNECT);
    uint64_t c2 = smh_submit(h, 2, CCOIP_CMD_CONNECT);
    smh_run(h);
    PT_ASSERT(!smh_done(h, 1, c1, NULL) && !smh_done(h, 2, c2, NULL),
              "newcomers wait until the accepted peers vote");
    PT_ASSERT(ccoip_master_num_pending(smh_master(h)) == 2, "two pending, got %u",
              ccoip_master_num_pending(smh_master(h)));
    uint64_t q = smh_submit(h, 0, CCOIP_CMD_ARE_PEERS_PENDING);
    smh_run(h);
    bool pending = false;
    PT_ASSERT(smh_done_ex(h, 0, q, &r, NULL, &pending) && r == pcclSuccess && pending,
              "peer 0 sees pending peers");
    uint64_t u = smh_submit(h, 0, CCOIP_CMD_UPDATE_TOPOLOGY);
    smh_run(h);
    PT_ASSERT(smh_done_ex(h, 0, u, &r, &world, NULL) && r == pcclSuccess && world == 3,
              "update topology succeeds with world 3 (r=%d world=%u)", (int)r, world);
    PT_ASSERT(smh_done(h, 1, c1, &r) && r == pcclSuccess, "peer 1 admitted (r=%d)", (int)r);
    PT_ASSERT(smh_done(h, 2, c2, &r) && r == pcclSuccess, "peer 2 admitted (r=%d)", (int)r);
    PT_ASSERT(ccoip_master_num_accepted(smh_master(h)) == 3, "three accepted");
    uint64_t ring[4];
    uint32_t n = ccoip_master_ring(smh_master(h), 0, ring, 4);
    PT_ASSERT(n == 3 && ring[0] == 1 && ring[1] == 2 && ring[2] == 3,
              "ring sorted by id: n=%u %llu %llu %llu", n, (unsigned long long)ring[0],
              (unsigned long long)ring[1], (unsigned long long)ring[2]);
    for (uint32_t i = 0; i < 3; i++) {
        PT_ASSERT(ccoip_peer_epoch(smh_peer(h, i)) == ccoip_master_epoch(smh_master(h)),
                  "peer %u on the master's epoch", i);
    }
    /* Ranks (PCCL_ATTRIBUTE_RANK): each peer's index in the ring order, distinct, in 0..2; the
     * epoch (PCCL_ATTRIBUTE_EPOCH) is one for all and grew with the admission. */
    bool seen[3] = {false, false, false};
    for (uint32_t i = 0; i < 3; i++) {
        const ccoip_peer *pi = smh_peer(h, i);
        const int32_t rank = ccoip_peer_rank(pi);
        PT_ASSERT(rank >= 0 && rank < 3 && !seen[rank], "peer %u: rank %d distinct in 0..2", i,
                  (int)rank);
        seen[rank] = true;
        PT_ASSERT(ring[rank] == ccoip_peer_id(pi), "peer %u: rank %d is its index in the ring", i,
                  (int)rank);
        PT_ASSERT(ccoip_peer_epoch(pi) == ccoip_peer_epoch(smh_peer(h, 0)) &&
                      ccoip_peer_epoch(pi) > epoch1,
                  "peer %u: epoch %llu equal on all, grown from %llu", i,
                  (unsigned long long)ccoip_peer_epoch(pi), (unsigned long long)epoch1);
    }
    /* Every accepted peer must vote: two of three is not enough. */
    uint64_t q0 = smh_submit(h, 0, CCOIP_CMD_ARE_PEERS_PENDING);
    uint64_t q1 = smh_submit(h, 1, CCOIP_CMD_ARE_PEERS_PENDING);
    smh_run(h);
    PT_ASSERT(!smh_done(h, 0, q0, NULL) && !smh_done(h, 1, q1, NULL), "query waits for peer 2");
    uint64_t q2 = smh_submit(h, 2, CCOIP_CMD_ARE_PEERS_PENDING);
    smh_run(h);
    PT_ASSERT(smh_done_ex(h, 2, q2, &r, NULL, &pending) && r == pcclSuccess && !pending,
              "nobody pending any more");
    PT_ASSERT(smh_step_errors(h) == 0, "no step errors (%u)", smh_step_errors(h));
    smh_destroy(h);
}

PTEST(master, mismatched_parameters_invalid_usage_everywhere)
{
    smh *h = smh_create(NULL, NULL);
    PT_ASSERT(smh_form_ring(h, 3, 0), "ring of 3 formed");
    int32_t a[3][4] = {{1, 2, 3, 4}, {1, 2, 3, 4}, {1, 2, 3, 4}};
    int32_t b[3][4];
    uint64_t c[3];
    for (uint32_t i = 0; i < 3; i++) {
        ccoip_allreduce_args args = ar_args(7, i == 1 ? 3 : 4, pcclInt32, pcclSum);
        c[i] = smh_allreduce(h, i, &args, a[i], b[i]);
    }
    smh_run(h);
    for (uint32_t i = 0; i < 3; i++) {
        pcclResult_t r;
        PT_ASSERT(smh_done(h, i, c[i], &r) && r == pcclInvalidUsage,
                  "peer %u gets pcclInvalidUsage (r=%d)", i, (int)r);
        PT_ASSERT(smh_notify_count(h, i, c[i]) == 1, "exactly one NOTIFY");
    }
    /* The tag is free again and a matching retry works. */
    for (uint32_t i = 0; i < 3; i++) {
        ccoip_allreduce_args args = ar_args(7, 4, pcclInt32, pcclSum);
        c[i] = smh_allreduce(h, i, &args, a[i], b[i]);
    }
    smh_run(h);
    for (uint32_t i = 0; i < 3; i++) {
        pcclResult_t r;
        PT_ASSERT(smh_done(h, i, c[i], &r) && r == pcclSuccess, "retry ok on %u (r=%d)", i, (int)r);
        PT_ASSERT(b[i][0] == 3 && b[i][3] == 12, "sum exact on %u: %d %d", i, b[i][0], b[i][3]);
    }
    smh_destroy(h);
}

/* Three peers run an in-place all-reduce of tag with n elements, peer `bad` with bad_n (a
 * mismatch): every member gets pcclInvalidUsage, exactly one NOTIFY, its buffer bit-exactly as
 * before. */
static void mismatch_in_place(smh *h, uint64_t tag, uint32_t n, uint32_t bad, uint32_t bad_n)
{
    int32_t x[3][64], orig[3][64];
    uint64_t c[3];
    PT_ASSERT(n <= 64, "at most 64 elements");
    for (uint32_t i = 0; i < 3; i++) {
        for (uint32_t j = 0; j < n; j++)
            x[i][j] = orig[i][j] = (int32_t)(100u * i + j);
        ccoip_allreduce_args args = ar_args(tag, i == bad ? bad_n : n, pcclInt32, pcclSum);
        args.in_place = true;
        c[i] = smh_allreduce(h, i, &args, x[i], x[i]);
    }
    smh_run(h);
    for (uint32_t i = 0; i < 3; i++) {
        pcclResult_t r;
        PT_ASSERT(smh_done(h, i, c[i], &r) && r == pcclInvalidUsage,
                  "peer %u gets pcclInvalidUsage (r=%d)", i, (int)r);
        PT_ASSERT(smh_notify_count(h, i, c[i]) == 1, "exactly one NOTIFY");
        PT_ASSERT(memcmp(x[i], orig[i], n * sizeof(int32_t)) == 0, "peer %u restored bit-exactly",
                  i);
    }
}

/* docs/protocol.md §6.8.1: mismatched parameters on the optimistic path (the rings already ran,
 * in place) give every member pcclInvalidUsage with its buffer restored bit-exactly; the group
 * is re-wired, and a matching retry is exact. */
PTEST(master, optimistic_mismatch_in_place_restored)
{
    smh *h = smh_create(NULL, NULL);
    PT_ASSERT(smh_form_ring(h, 3, 0), "ring of 3 formed");
    const uint64_t e0 = ccoip_master_epoch(smh_master(h));
    mismatch_in_place(h, 9, 40, 2, 36);
    for (uint32_t i = 0; i < 3; i++)
        PT_ASSERT(ccoip_peer_optimistic_starts(smh_peer(h, i)) == 1, "peer %u was optimistic", i);
    int32_t x[3][40];
    uint64_t c[3];
    for (uint32_t i = 0; i < 3; i++) {
        for (uint32_t j = 0; j < 40; j++)
            x[i][j] = (int32_t)(100u * i + j);
    }
    PT_ASSERT(ccoip_master_epoch(smh_master(h)) > e0, "the group was re-wired");
    for (uint32_t i = 0; i < 3; i++) {
        ccoip_allreduce_args args = ar_args(9, 40, pcclInt32, pcclSum);
        args.in_place = true;
        c[i] = smh_allreduce(h, i, &args, x[i], x[i]);
    }
    smh_run(h);
    for (uint32_t i = 0; i < 3; i++) {
        pcclResult_t r;
        PT_ASSERT(smh_done(h, i, c[i], &r) && r == pcclSuccess, "retry ok on %u (r=%d)", i, (int)r);
        for (uint32_t j = 0; j < 40; j++)
            PT_ASSERT(x[i][j] == (int32_t)(300u + 3u * j), "retry exact on %u", i);
    }
    PT_ASSERT(smh_step_errors(h) == 0, "no step errors");
    smh_destroy(h);
}

PTEST(master, too_few_peers)
{
    smh *h = smh_create(NULL, NULL);
    PT_ASSERT(smh_form_ring(h, 1, 0), "one peer");
    int32_t x[2] = {1, 2}, y[2];
    ccoip_allreduce_args args = ar_args(1, 2, pcclInt32, pcclSum);
    uint64_t c = smh_allreduce(h, 0, &args, x, y);
    smh_run(h);
    pcclResult_t r;
    PT_ASSERT(smh_done(h, 0, c, &r) && r == pcclTooFewPeers, "pcclTooFewPeers (r=%d)", (int)r);
    smh_destroy(h);
}

PTEST(master, straggler_evicted_at_vote_deadline)
{
    ccoip_master_config mc;
    ccoip_master_config_default(&mc);
    mc.vote_timeout_ms = 5000;
    smh *h = smh_create(&mc, NULL);
    PT_ASSERT(smh_form_ring(h, 3, 0), "ring of 3 formed");
    uint64_t u0 = smh_submit(h, 0, CCOIP_CMD_UPDATE_TOPOLOGY);
    uint64_t u1 = smh_submit(h, 1, CCOIP_CMD_UPDATE_TOPOLOGY);
    smh_advance(h, 4000u * 1000000u);
    PT_ASSERT(!smh_done(h, 0, u0, NULL), "still waiting for peer 2 before the deadline");
    PT_ASSERT(!ccoip_peer_is_failed(smh_peer(h, 2)), "peer 2 alive before the deadline");
    smh_advance(h, 1500u * 1000000u);
    pcclResult_t r;
    uint32_t world;
    PT_ASSERT(ccoip_peer_is_failed(smh_peer(h, 2)), "the straggler was evicted");
    PT_ASSERT(smh_done_ex(h, 0, u0, &r, &world, NULL) && r == pcclSuccess && world == 2,
              "peer 0's vote completes without it (r=%d world=%u)", (int)r, world);
    PT_ASSERT(smh_done(h, 1, u1, &r) && r == pcclSuccess, "peer 1 too (r=%d)", (int)r);
    PT_ASSERT(smh_log_count(h, "did not vote") == 1, "eviction logged");
    smh_destroy(h);
}

PTEST(master, silent_peer_evicted_after_evict_ms)
{
    smh *h = smh_create(NULL, NULL);
    PT_ASSERT(smh_form_ring(h, 3, 0), "ring of 3 formed");
    uint64_t e0 = ccoip_master_epoch(smh_master(h));
    smh_freeze_peer(h, 1);
    smh_advance(h, 1900u * 1000000u);
    PT_ASSERT(ccoip_master_num_accepted(smh_master(h)) == 3, "not yet evicted at 1.9 s");
    smh_advance(h, 200u * 1000000u);
    PT_ASSERT(ccoip_master_num_accepted(smh_master(h)) == 2, "evicted after 2 s, accepted %u",
              ccoip_master_num_accepted(smh_master(h)));
    PT_ASSERT(ccoip_master_epoch(smh_master(h)) > e0, "a new epoch started");
    PT_ASSERT(smh_log_count(h, "silent for evict_ms") == 1, "eviction logged");
    /* The survivors re-wired on their own and reduce on the ring of two. */
    int32_t x[2][3] = {{1, 2, 3}, {10, 20, 30}}, y[2][3];
    uint32_t who[2] = {0, 2};
    uint64_t c[2];
    for (uint32_t k = 0; k < 2; k++) {
        ccoip_allreduce_args args = ar_args(3, 3, pcclInt32, pcclSum);
        c[k] = smh_allreduce(h, who[k], &args, x[k], y[k]);
    }
    smh_run(h);
    for (uint32_t k = 0; k < 2; k++) {
        pcclResult_t r;
        PT_ASSERT(smh_done(h, who[k], c[k], &r) && r == pcclSuccess, "ok on %u (r=%d)", who[k],
                  (int)r);
        PT_ASSERT(y[k][0] == 11 && y[k][1] == 22 && y[k][2] == 33, "exact sum on %u", who[k]);
    }
    smh_destroy(h);
}

PTEST(master, unreachable_pair_ring_avoids_it)
{
    smh *h = smh_create(NULL, NULL);
    for (uint32_t i = 0; i < 4; i++)
        smh_add_peer(h, 0);
    smh_block_link(h, 0, 1);
    smh_block_link(h, 1, 0);
    pcclResult_t r;
    uint64_t c0 = smh_submit(h, 0, CCOIP_CMD_CONNECT);
    smh_run(h);
    PT_ASSERT(smh_done(h, 0, c0, &r) && r == pcclSuccess, "peer 0 admitted");
    const uint64_t epoch1 = ccoip_peer_epoch(smh_peer(h, 0));
    uint64_t cs[4];
    for (uint32_t i = 1; i < 4; i++)
        cs[i] = smh_submit(h, i, CCOIP_CMD_CONNECT);
    smh_run(h);
    uint64_t u = smh_submit(h, 0, CCOIP_CMD_UPDATE_TOPOLOGY);
    smh_run(h);
    PT_ASSERT(smh_done(h, 0, u, &r) && r == pcclUpdateTopologyFailed,
              "the first try fails on the unreachable link (r=%d)", (int)r);
    /* The failed phase tore down peer 0's ring; the master's re-wire (docs/protocol.md §6.4)
     * installed it alone again at a newer epoch: rank 0 there. The newcomers have no ring. */
    const uint64_t epoch2 = ccoip_peer_epoch(smh_peer(h, 0));
    PT_ASSERT(ccoip_peer_rank(smh_peer(h, 0)) == 0 && epoch2 > epoch1 &&
                  epoch2 == ccoip_master_epoch(smh_master(h)),
              "after the failed phase and the re-wire: rank %d epoch %llu (was %llu)",
              (int)ccoip_peer_rank(smh_peer(h, 0)), (unsigned long long)epoch2,
              (unsigned long long)epoch1);
    for (uint32_t i = 1; i < 4; i++) {
        PT_ASSERT(ccoip_peer_rank(smh_peer(h, i)) == -1 && ccoip_peer_epoch(smh_peer(h, i)) == 0,
                  "pending peer %u: no rank, epoch 0", i);
    }
    /* The second try dials the failed link from its other end (docs/protocol.md §6.4: a link
     * one end cannot dial is dialled by the other, as for a peer behind NAT); blocked both
     * ways, that fails too. */
    u = smh_submit(h, 0, CCOIP_CMD_UPDATE_TOPOLOGY);
    smh_run(h);
    PT_ASSERT(smh_done(h, 0, u, &r) && r == pcclUpdateTopologyFailed,
              "the reverse dial fails as well (r=%d)", (int)r);
    PT_ASSERT(smh_log_count(h, "cannot reach predecessor 1") == 1,
              "peer 2 dialled its predecessor 1 and could not reach it");
    u = smh_submit(h, 0, CCOIP_CMD_UPDATE_TOPOLOGY);
    smh_run(h);
    PT_ASSERT(smh_done(h, 0, u, &r) && r == pcclSuccess, "the retry succeeds (r=%d)", (int)r);
    for (uint32_t i = 1; i < 4; i++) {
        PT_ASSERT(smh_done(h, i, cs[i], &r) && r == pcclSuccess, "peer %u admitted (r=%d)", i,
                  (int)r);
    }
    uint64_t ring[4];
    uint32_t n = ccoip_master_ring(smh_master(h), 0, ring, 4);
    PT_ASSERT(n == 4 && ring[0] == 1 && ring[1] == 3 && ring[2] == 2 && ring[3] == 4,
              "ring 1 3 2 4 avoids 1<->2: %llu %llu %llu %llu", (unsigned long long)ring[0],
              (unsigned long long)ring[1], (unsigned long long)ring[2],
              (unsigned long long)ring[3]);
    for (uint32_t i = 0; i < 4; i++) {
        const ccoip_peer *pi = smh_peer(h, i);
        const int32_t rank = ccoip_peer_rank(pi);
        PT_ASSERT(rank >= 0 && rank < 4 && ring[rank] == ccoip_peer_id(pi),
                  "peer %u: rank %d is its index in the ring 1 3 2 4", i, (int)rank);
        PT_ASSERT(ccoip_peer_epoch(pi) == ccoip_master_epoch(smh_master(h)) &&
                      ccoip_peer_epoch(pi) > epoch2,
                  "peer %u: the new epoch", i);
    }
    int32_t x[4][5], y[4][5];
    uint64_t c[4];
    for (uint32_t i = 0; i < 4; i++) {
        for (uint32_t k = 0; k < 5; k++)
            x[i][k] = (int32_t)(i * 100u + k);
        ccoip_allreduce_args args = ar_args(9, 5, pcclInt32, pcclSum);
        c[i] = smh_allreduce(h, i, &args, x[i], y[i]);
    }
    smh_run(h);
    for (uint32_t i = 0; i < 4; i++) {
        PT_ASSERT(smh_done(h, i, c[i], &r) && r == pcclSuccess, "reduce ok on %u (r=%d)", i,
                  (int)r);
        for (uint32_t k = 0; k < 5; k++) {
            PT_ASSERT(y[i][k] == (int32_t)(600u + 4u * k), "exact on %u[%u]: %d", i, k, y[i][k]);
        }
    }
    smh_destroy(h);
}

PTEST(master, no_ring_evicts_the_least_reachable_peer)
{
    smh *h = smh_create(NULL, NULL);
    for (uint32_t i = 0; i < 3; i++)
        smh_add_peer(h, 0);
    /* Peer 2 (id 3) can neither reach nor be reached by peer 1 (id 2) and cannot reach 0. */
    smh_block_link(h, 1, 2);
    smh_block_link(h, 2, 1);
    smh_block_link(h, 2, 0);
    pcclResult_t r;
    uint64_t c0 = smh_submit(h, 0, CCOIP_CMD_CONNECT);
    smh_run(h);
    uint64_t c1 = smh_submit(h, 1, CCOIP_CMD_CONNECT);
    uint64_t c2 = smh_submit(h, 2, CCOIP_CMD_CONNECT);
    smh_run(h);
    for (int attempt = 0; attempt < 8; attempt++) {
        uint64_t u = smh_submit(h, 0, CCOIP_CMD_UPDATE_TOPOLOGY);
        smh_run(h);
        PT_ASSERT(smh_done(h, 0, u, &r), "update answered");
        if (r == pcclSuccess) break;
    }
    PT_ASSERT(r == pcclSuccess, "eventually succeeds (r=%d)", (int)r);
    PT_ASSERT(smh_done(h, 0, c0, &r) && r == pcclSuccess, "peer 0 ok");
    PT_ASSERT(smh_done(h, 1, c1, &r) && r == pcclSuccess, "peer 1 admitted (r=%d)", (int)r);
    PT_ASSERT(smh_done(h, 2, c2, &r) && r == pcclMasterConnectionFailed,
              "peer 2 evicted as unreachable (r=%d)", (int)r);
    PT_ASSERT(smh_log_count(h, "reaches the fewest others") == 1, "eviction logged");
    smh_destroy(h);
}

PTEST(master, malformed_frame_evicts_with_log)
{
    smh *h = smh_create(NULL, NULL);
    PT_ASSERT(smh_form_ring(h, 3, 0), "ring of 3 formed");
    uint64_t pend = smh_submit(h, 1, CCOIP_CMD_ARE_PEERS_PENDING);
    smh_run(h);
    static const uint8_t junk[] = {0x43, 0x43, 0x6f, 0x43, 1,    0,    1,   0,
                                   3,    0,    0,    0,    0xff, 0xff, 0xff};
    smh_inject_to_master(h, 1, junk, sizeof(junk));
    smh_run(h);
    pcclResult_t r;
    PT_ASSERT(smh_log_count(h, "malformed control frame") == 1, "eviction logged");
    PT_ASSERT(ccoip_peer_is_failed(smh_peer(h, 1)), "peer 1 was evicted");
    PT_ASSERT(smh_done(h, 1, pend, &r) && r == pcclMasterConnectionFailed,
              "its pending call fails with pcclMasterConnectionFailed (r=%d)", (int)r);
    PT_ASSERT(ccoip_master_num_accepted(smh_master(h)) == 2, "two left");
    /* A frame that is not even a header. */
    static const uint8_t tiny[] = {1, 2, 3};
    smh_inject_to_master(h, 2, tiny, sizeof(tiny));
    smh_run(h);
    PT_ASSERT(ccoip_peer_is_failed(smh_peer(h, 2)), "peer 2 evicted too");
    PT_ASSERT(smh_step_errors(h) == 0, "remote input never fails a step");
    smh_destroy(h);
}

PTEST(master, canary_skip_abort_verdict_is_observable)
{
    ccoip_master_config mc;
    ccoip_master_config_default(&mc);
    mc.canary_skip_abort_verdict = true;
    smh *h = smh_create(&mc, NULL);
    PT_ASSERT(smh_form_ring(h, 3, 0), "ring of 3 formed");
    int32_t x[3][6] = {{0}}, y[3][6];
    uint64_t c[3];
    smh_kill_on_ring_send(h, 2, 1);
    for (uint32_t i = 0; i < 3; i++) {
        ccoip_allreduce_args args = ar_args(5, 6, pcclInt32, pcclSum);
        c[i] = smh_allreduce(h, i, &args, x[i], y[i]);
    }
    smh_run(h);
    /* With the canary, a survivor that had not failed locally never hears the verdict. */
    uint32_t unanswered = 0;
    for (uint32_t i = 0; i < 2; i++) {
        if (!smh_done(h, i, c[i], NULL)) unanswered++;
    }
    PT_ASSERT(unanswered > 0, "the broken rule is visible: %u survivors without a verdict",
              unanswered);
    smh_destroy(h);
}

/* docs/protocol.md §6.8.2, master relay. */
static smh *relay_ring(uint32_t n, uint32_t relay_max)
{
    ccoip_master_config mc;
    ccoip_master_config_default(&mc);
    mc.relay_max_bytes = relay_max;
    smh *h = smh_create(&mc, NULL);
    if (!smh_form_ring(h, n, 0)) {
        smh_destroy(h);
        return NULL;
    }
    return h;
}

/* Every op and two dtypes, out of place and in place, at the bound and one element above it:
 * the relayed ones are exact and identical on every member (AVG too), never touch a ring, and
 * leave the send buffer alone; the one above the bound takes the ring. */
PTEST(master, relay_exact_every_op)
{
    smh *h = relay_ring(3, 64);
    PT_ASSERT(h != NULL, "ring of 3 formed");
    static const pcclRedOp_t ops[] = {pcclSum, pcclAvg, pcclProd, pcclMax, pcclMin};
    uint64_t tag = 1, relayed = 0;
    for (uint32_t oi = 0; oi < 5; oi++) {
        for (uint32_t variant = 0; variant < 4; variant++) {
            const bool in_place = (variant & 1u) != 0;
            const bool f32 = (variant & 2u) != 0;
            const uint32_t count = 16; /* 64 bytes: at the bound */
            int32_t si[3][16], ri[3][16];
            float sf[3][16], rf[3][16];
            uint64_t c[3];
            for (uint32_t i = 0; i < 3; i++) {
                for (uint32_t j = 0; j < count; j++) {
                    si[i][j] = (int32_t)((i + 1u) * (j + 1u)) - 5;
                    sf[i][j] = (float)si[i][j] * 0.5f;
                    ri[i][j] = in_place ? si[i][j] : -77;
                    rf[i][j] = in_place ? sf[i][j] : -77.0f;
                }
                ccoip_allreduce_args args =
                    ar_args(tag, count, f32 ? pcclFloat : pcclInt32, ops[oi]);
                args.in_place = in_place;
                void *recv = f32 ? (void *)rf[i] : (void *)ri[i];
                void *send = in_place ? recv : (f32 ? (void *)sf[i] : (void *)si[i]);
                c[i] = smh_allreduce(h, i, &args, send, recv);
            }
            smh_run(h);
            relayed++;
            for (uint32_t i = 0; i < 3; i++) {
                pcclResult_t r;
                PT_ASSERT(smh_done(h, i, c[i], &r) && r == pcclSuccess,
                          "op %u variant %u peer %u: r=%d", oi, variant, i, (int)r);
                PT_ASSERT(ccoip_peer_relayed_ops(smh_peer(h, i)) == relayed, "peer %u relayed %llu",
                          i, (unsigned long long)ccoip_peer_relayed_ops(smh_peer(h, i)));
                for (uint32_t j = 0; j < count; j++) {
                    const int32_t x0 = (int32_t)(j + 1u) - 5, x1 = (int32_t)(2u * (j + 1u)) - 5,
                                  x2 = (int32_t)(3u * (j + 1u)) - 5;
                    int32_t want;
                    switch (ops[oi]) {
                    case pcclSum:
                        want = x0 + x1 + x2;
                        break;
                    case pcclAvg:
                        want = (x0 + x1 + x2) / 3;
                        break;
                    case pcclProd:
                        want = x0 * x1 * x2;
                        break;
                    case pcclMax:
                        want = x2 > x1 ? (x2 > x0 ? x2 : x0) : (x1 > x0 ? x1 : x0);
                        break;
                    default:
                        want = x0 < x1 ? (x0 < x2 ? x0 : x2) : (x1 < x2 ? x1 : x2);
                        break;
                    }
                    if (!f32) {
                        if (ops[oi] == pcclAvg) {
                            /* integer AVG: the library's rounding, the same on every member */
                            PT_ASSERT(ri[i][j] == ri[0][j], "int AVG identical at %u", j);
                            continue;
                        }
                        PT_ASSERT(ri[i][j] == want, "op %u peer %u [%u] = %d, want %d", oi, i, j,
                                  ri[i][j], want);
                        if (!in_place)
                            PT_ASSERT(si[i][j] == (int32_t)((i + 1u) * (j + 1u)) - 5, "send kept");
                    } else {
                        PT_ASSERT(memcmp(&rf[i][j], &rf[0][j], sizeof(float)) == 0,
                                  "f32 bit-identical on every member");
                        if (ops[oi] == pcclSum || ops[oi] == pcclMax || ops[oi] == pcclMin) {
                            PT_ASSERT(rf[i][j] == (float)want * 0.5f,
                                      "f32 op %u [%u] = %g, want %g", oi, j, (double)rf[i][j],
                                      (double)want * 0.5);
                        }
                    }
                }
            }
            tag++;
        }
    }
    PT_ASSERT(ccoip_master_relayed_ops(smh_master(h)) == relayed, "master relayed %llu ops",
              (unsigned long long)ccoip_master_relayed_ops(smh_master(h)));
    PT_ASSERT(ccoip_peer_optimistic_starts(smh_peer(h, 0)) == 0, "no ring ran");
    /* 68 bytes: above the bound, the ring (exact all the same). */
    int32_t x[3][17], y[3][17];
    uint64_t c[3];
    for (uint32_t i = 0; i < 3; i++) {
        for (uint32_t j = 0; j < 17; j++)
            x[i][j] = (int32_t)(i * 100u + j);
        ccoip_allreduce_args args = ar_args(tag, 17, pcclInt32, pcclSum);
        c[i] = smh_allreduce(h, i, &args, x[i], y[i]);
    }
    smh_run(h);
    for (uint32_t i = 0; i < 3; i++) {
        pcclResult_t r;
        PT_ASSERT(smh_done(h, i, c[i], &r) && r == pcclSuccess, "ring op ok (r=%d)", (int)r);
        PT_ASSERT(y[i][16] == 300 + 48, "ring sum exact: %d", y[i][16]);
        PT_ASSERT(ccoip_peer_relayed_ops(smh_peer(h, i)) == relayed, "not relayed");
    }
    PT_ASSERT(smh_step_errors(h) == 0, "no step errors");
    smh_destroy(h);
}

/* The bitwise ops at N = 3 on each path an all-reduce can take, with exact results: 64 bytes
 * (the master relay, bound 64), 4 KiB (the small all-gather, above the relay bound) and 256 KiB
 * (the ring), for a 1-, 4- and 8-byte integer type, in and out of place. Then a bitwise op on a
 * float type: every member's submit is pcclInvalidArgument, and the ring stays usable. */
static uint64_t bits_input(uint32_t peer, uint64_t j)
{
    uint64_t z = (j + 1u) * UINT64_C(0x9e3779b97f4a7c15) + peer * UINT64_C(0xbf58476d1ce4e5b9);
    return z ^ (z >> 29) ^ ((uint64_t)peer << 61);
}

/* The same all-reduce submitted by peers 0..2 (send[i] to recv[i]), then run to quiescence. */
static void allreduce3(smh *h, uint64_t c[3], ccoip_allreduce_args args,
                       unsigned char (*send)[256u << 10], unsigned char (*recv)[256u << 10])
{
    for (uint32_t i = 0; i < 3; i++)
        c[i] = smh_allreduce(h, i, &args, send[i], recv[i]);
    smh_run(h);
}

PTEST(master, bitwise_ops_exact_on_relay_gather_and_ring)
{
    smh *h = relay_ring(3, 64);
    PT_ASSERT(h != NULL, "ring of 3 formed");
    static const pcclRedOp_t ops[] = {pcclBand, pcclBor, pcclBxor};
    static const pcclDataType_t types[] = {pcclUint8, pcclInt32, pcclInt64};
    static const uint64_t sizes[] = {64, 4096, 256u << 10};
    enum { MAXB = 256u << 10 };
    static unsigned char send[3][MAXB], recv[3][MAXB];
    uint64_t tag = 1, relayed = 0;
    for (uint32_t s = 0; s < 3; s++) {
        for (uint32_t t = 0; t < 3; t++) {
            for (uint32_t o = 0; o < 3; o++) {
                const uint32_t es = ccoip_dtype_size(types[t]);
                const uint64_t count = sizes[s] / es;
                const bool in_place = ((s + t + o) & 1u) != 0;
                uint64_t c[3];
                for (uint32_t i = 0; i < 3; i++) {
                    for (uint64_t j = 0; j < count; j++) {
                        const uint64_t v = bits_input(i, j);
                        memcpy(send[i] + j * es, &v, es); /* little-endian: the low bytes */
                    }
                    if (in_place) {
                        memcpy(recv[i], send[i], (size_t)sizes[s]);
                    } else {
                        memset(recv[i], 0x77, (size_t)sizes[s]);
                    }
                    ccoip_allreduce_args args = ar_args(tag, count, types[t], ops[o]);
                    args.in_place = in_place;
                    c[i] = smh_allreduce(h, i, &args, in_place ? recv[i] : send[i], recv[i]);
                }
                smh_run(h);
                if (s == 0) relayed++;
                for (uint32_t i = 0; i < 3; i++) {
                    pcclResult_t r;
                    PT_ASSERT(smh_done(h, i, c[i], &r) && r == pcclSuccess,
                              "%s op %d %llu bytes peer %u: r=%d", ccoip_dtype_name(types[t]),
                              (int)ops[o], (unsigned long long)sizes[s], i, (int)r);
                    for (uint64_t j = 0; j < count; j++) {
                        const uint64_t x0 = bits_input(0, j), x1 = bits_input(1, j),
                                       x2 = bits_input(2, j);
                        const uint64_t want = ops[o] == pcclBand  ? (x0 & x1 & x2)
                                              : ops[o] == pcclBor ? (x0 | x1 | x2)
                                                                  : (x0 ^ x1 ^ x2);
                        uint64_t got = 0;
                        memcpy(&got, recv[i] + j * es, es);
                        const uint64_t mask = es == 8 ? UINT64_MAX : (UINT64_C(1) << (8 * es)) - 1;
                        PT_ASSERT(got == (want & mask),
                                  "%s op %d %llu bytes peer %u [%llu] = %#llx, want %#llx",
                                  ccoip_dtype_name(types[t]), (int)ops[o],
                                  (unsigned long long)sizes[s], i, (unsigned long long)j,
                                  (unsigned long long)got, (unsigned long long)(want & mask));
                    }
                    PT_ASSERT(ccoip_peer_relayed_ops(smh_peer(h, i)) == relayed,
                              "peer %u relayed %llu, want %llu", i,
                              (unsigned long long)ccoip_peer_relayed_ops(smh_peer(h, i)),
                              (unsigned long long)relayed);
                }
                tag++;
            }
        }
    }
    PT_ASSERT(ccoip_master_relayed_ops(smh_master(h)) == relayed, "master relayed %llu ops",
              (unsigned long long)ccoip_master_relayed_ops(smh_master(h)));
    /* A float type with a bitwise op: refused at submit on every member, nothing sent. */
    static const pcclDataType_t floats[] = {pcclFloat16, pcclBFloat16, pcclFloat, pcclDouble};
    for (uint32_t f = 0; f < 4; f++) {
        uint64_t c[3];
        allreduce3(h, c, ar_args(tag, 8, floats[f], ops[f % 3]), send, recv);
        for (uint32_t i = 0; i < 3; i++) {
            pcclResult_t r;
            PT_ASSERT(smh_done(h, i, c[i], &r) && r == pcclInvalidArgument,
                      "%s bitwise peer %u: r=%d, want pcclInvalidArgument",
                      ccoip_dtype_name(floats[f]), i, (int)r);
        }
        tag++;
    }
    uint64_t c[3];
    allreduce3(h, c, ar_args(tag, 4, pcclInt32, pcclBxor), send, recv);
    for (uint32_t i = 0; i < 3; i++) {
        pcclResult_t r;
        PT_ASSERT(smh_done(h, i, c[i], &r) && r == pcclSuccess, "after the refusals: r=%d", (int)r);
        PT_ASSERT(!ccoip_peer_is_failed(smh_peer(h, i)), "peer %u stays", i);
    }
    smh_destroy(h);
}

/* Relay off (the core's default): nothing is relayed. Relay on: a count mismatch is
 * pcclInvalidUsage on every member with in-place buffers untouched; one peer alone gets
 * pcclTooFewPeers. */
PTEST(master, relay_refusals)
{
    smh *h = relay_ring(2, 0);
    PT_ASSERT(h != NULL, "ring of 2");
    int32_t a[2][4] = {{1, 2, 3, 4}, {5, 6, 7, 8}}, b[2][4];
    uint64_t c[2];
    for (uint32_t i = 0; i < 2; i++) {
        ccoip_allreduce_args args = ar_args(1, 4, pcclInt32, pcclSum);
        c[i] = smh_allreduce(h, i, &args, a[i], b[i]);
    }
    smh_run(h);
    for (uint32_t i = 0; i < 2; i++) {
        pcclResult_t r;
        PT_ASSERT(smh_done(h, i, c[i], &r) && r == pcclSuccess && b[i][3] == 12, "gather path ok");
        PT_ASSERT(ccoip_peer_relayed_ops(smh_peer(h, i)) == 0, "relay off: nothing relayed");
    }
    smh_destroy(h);

    h = relay_ring(3, 4096);
    PT_ASSERT(h != NULL, "ring of 3");
    mismatch_in_place(h, 5, 8, 1, 7); /* relayed: nothing was written, nothing to restore */
    PT_ASSERT(ccoip_master_relayed_ops(smh_master(h)) == 0, "nothing relayed");
    PT_ASSERT(smh_step_errors(h) == 0, "no step errors");
    smh_destroy(h);

    h = relay_ring(1, 4096);
    PT_ASSERT(h != NULL, "one peer");
    ccoip_allreduce_args args = ar_args(2, 4, pcclInt32, pcclSum);
    uint64_t e = smh_allreduce(h, 0, &args, a[0], b[0]);
    smh_run(h);
    pcclResult_t r;
    PT_ASSERT(smh_done(h, 0, e, &r) && r == pcclTooFewPeers, "too few peers (r=%d)", (int)r);
    smh_destroy(h);
}

/* A member that never initiates (frozen, then evicted): the relayed op of the others waits,
 * then completes among the survivors once the group is re-wired, exact over their inputs. */
PTEST(master, relay_member_lost_while_voting)
{
    smh *h = relay_ring(3, 4096);
    PT_ASSERT(h != NULL, "ring of 3");
    smh_freeze_peer(h, 1);
    int32_t x[3][4] = {{1, 2, 3, 4}, {100, 100, 100, 100}, {10, 20, 30, 40}}, y[3][4];
    uint32_t who[2] = {0, 2};
    uint64_t c[2];
    for (uint32_t k = 0; k < 2; k++) {
        ccoip_allreduce_args args = ar_args(4, 4, pcclInt32, pcclSum);
        c[k] = smh_allreduce(h, who[k], &args, x[who[k]], y[who[k]]);
    }
    smh_advance(h, 1000u * 1000000u);
    PT_ASSERT(!smh_done(h, 0, c[0], NULL), "waits for peer 1's ballot");
    smh_advance(h, 3000u * 1000000u);
    for (uint32_t k = 0; k < 2; k++) {
        pcclResult_t r;
        uint32_t world;
        PT_ASSERT(smh_done_ex(h, who[k], c[k], &r, &world, NULL) && r == pcclSuccess && world == 2,
                  "survivor %u completes (r=%d world=%u)", who[k], (int)r, world);
        PT_ASSERT(y[who[k]][0] == 11 && y[who[k]][3] == 44, "exact over the survivors on %u",
                  who[k]);
    }
    PT_ASSERT(ccoip_master_relayed_ops(smh_master(h)) == 1, "relayed once");
    smh_destroy(h);
}

/* The relay bound shrinks to what one step's output can answer: max_peers 4, out_bytes 5000 ->
 * 5000 / 4 - 256 = 994 bytes. A 992-byte op is relayed, a 996-byte one takes the peers' ring;
 * both exact. */
PTEST(master, relay_bound_fits_the_output)
{
    ccoip_master_config mc;
    ccoip_master_config_default(&mc);
    mc.max_peers = 4;
    mc.out_bytes = 5000;
    mc.action_queue_depth = 256;
    mc.relay_max_bytes = 4096;
    smh *h = smh_create(&mc, NULL);
    PT_ASSERT(smh_form_ring(h, 3, 0), "ring of 3");
    static const uint32_t counts[2] = {248, 249}; /* 992 and 996 bytes */
    for (uint32_t t = 0; t < 2; t++) {
        int32_t x[3][249], y[3][249];
        uint64_t c[3];
        for (uint32_t i = 0; i < 3; i++) {
            for (uint32_t j = 0; j < counts[t]; j++)
                x[i][j] = (int32_t)(1000u * i + j);
            ccoip_allreduce_args args = ar_args(t + 1u, counts[t], pcclInt32, pcclSum);
            c[i] = smh_allreduce(h, i, &args, x[i], y[i]);
        }
        smh_run(h);
        for (uint32_t i = 0; i < 3; i++) {
            pcclResult_t r;
            PT_ASSERT(smh_done(h, i, c[i], &r) && r == pcclSuccess, "op %u peer %u (r=%d)", t, i,
                      (int)r);
            PT_ASSERT(y[i][counts[t] - 1u] == (int32_t)(3000u + 3u * (counts[t] - 1u)),
                      "exact on %u", i);
        }
        PT_ASSERT(ccoip_master_relayed_ops(smh_master(h)) == 1, "only the 992-byte op relayed");
    }
    PT_ASSERT(smh_step_errors(h) == 0, "no step errors");
    smh_destroy(h);
}
