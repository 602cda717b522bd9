/*
 * test_topology_unchanged.c — a topology vote that changes nothing (docs/protocol.md §6.3):
 * with nobody to admit and every ring settled, the master answers every voter with an
 * `unchanged` plan: no new epoch, no p2p phase, the links kept (the next all-reduce runs on
 * them). After a member is lost, the master's own re-wire is the only phase: the survivors'
 * vote is answered unchanged by it, not with a second phase (issue 23, churn at distance: each
 * phase costs several round trips). A newcomer still gets an admit phase.
 */
#include <string.h>

#include "ccoip_frame.h"
#include "ccoip_master.h"
#include "ccoip_peer.h"
#include "ptest.h"
#include "sm_harness.h"

/* Runs an all-reduce (uint32 SUM of 8 elements, tag) on the first n peers: every result exact
 * (peer i contributes (i + 1) * (j + 1)) and the world n. */
static void allreduce_exact(smh *h, uint32_t n, uint64_t tag)
{
    uint32_t x[SMH_MAX_PEERS][8], y[SMH_MAX_PEERS][8];
    uint64_t c[SMH_MAX_PEERS];
    for (uint32_t i = 0; i < n; i++) {
        for (uint32_t j = 0; j < 8; j++)
            x[i][j] = (i + 1u) * (j + 1u);
        ccoip_allreduce_args a;
        memset(&a, 0, sizeof(a));
        a.tag = tag;
        a.count = 8;
        a.dtype = pcclUint32;
        a.op = pcclSum;
        a.quant_algorithm = pcclQuantNone;
        c[i] = smh_allreduce(h, i, &a, x[i], y[i]);
    }
    smh_run(h);
    const uint32_t s = n * (n + 1u) / 2u;
    for (uint32_t i = 0; i < n; i++) {
        pcclResult_t r = pcclInternalError;
        uint32_t world = 0;
        PT_ASSERT(smh_done_ex(h, i, c[i], &r, &world, NULL) && r == pcclSuccess && world == n,
                  "peer %u: all-reduce (r=%d, world %u)", i, (int)r, world);
        for (uint32_t j = 0; j < 8; j++)
            PT_ASSERT(y[i][j] == s * (j + 1u), "peer %u element %u: %u", i, j, y[i][j]);
    }
}

/* The first n peers update the topology; every call succeeds with world `want`. */
static void update_all(smh *h, uint32_t n, uint32_t want)
{
    uint64_t u[SMH_MAX_PEERS];
    for (uint32_t i = 0; i < n; i++)
        u[i] = smh_submit(h, i, CCOIP_CMD_UPDATE_TOPOLOGY);
    smh_run(h);
    for (uint32_t i = 0; i < n; i++) {
        pcclResult_t r = pcclInternalError;
        uint32_t world = 0;
        PT_ASSERT(smh_done_ex(h, i, u[i], &r, &world, NULL) && r == pcclSuccess && world == want,
                  "peer %u updated (r=%d, world %u)", i, (int)r, world);
    }
}

static uint32_t sent(smh *h, uint32_t peer, int32_t body)
{
    return smh_master_sent(h, peer, body, 0, 0);
}

PTEST(unchanged, vote_with_nobody_to_admit_keeps_rings_and_epoch)
{
    smh *h = smh_ring_of(3, 1, 0, 0);
    PT_ASSERT(h != NULL, "ring of 3");
    allreduce_exact(h, 3, 1);
    const uint64_t epoch = ccoip_master_epoch(smh_master(h));
    uint32_t plans[3], verdicts[3];
    for (uint32_t i = 0; i < 3; i++) {
        plans[i] = sent(h, i, CCOIP_PB_MASTER_TO_PEER_BODY_TOPOLOGY_PLAN);
        verdicts[i] = sent(h, i, CCOIP_PB_MASTER_TO_PEER_BODY_TOPOLOGY_VERDICT);
    }
    for (uint32_t round = 0; round < 3; round++) {
        update_all(h, 3, 3);
        PT_ASSERT(ccoip_master_epoch(smh_master(h)) == epoch, "round %u: no new epoch", round);
        for (uint32_t i = 0; i < 3; i++) {
            PT_ASSERT(ccoip_peer_epoch(smh_peer(h, i)) == epoch &&
                          ccoip_peer_rank(smh_peer(h, i)) == (int32_t)i,
                      "peer %u keeps epoch and rank", i);
            PT_ASSERT(sent(h, i, CCOIP_PB_MASTER_TO_PEER_BODY_TOPOLOGY_PLAN) ==
                          plans[i] + round + 1u,
                      "peer %u: one plan per vote (its answer)", i);
            PT_ASSERT(sent(h, i, CCOIP_PB_MASTER_TO_PEER_BODY_TOPOLOGY_VERDICT) == verdicts[i],
                      "peer %u: no p2p phase, no verdict", i);
        }
        /* The links were kept: the next all-reduce runs on them. */
        allreduce_exact(h, 3, 2u + round);
    }
    PT_ASSERT(smh_log_count(h, "topology vote changes nothing") == 3, "logged per vote");
    smh_destroy(h);
}

PTEST(unchanged, survivors_vote_after_a_loss_costs_no_second_phase)
{
    smh *h = smh_ring_of(4, 2, 0, 0);
    PT_ASSERT(h != NULL, "ring of 4, pools of 2");
    const uint64_t epoch = ccoip_master_epoch(smh_master(h));
    smh_kill_peer(h, 3);
    /* The survivors vote at once, as an application does after a failed op: the votes cross the
     * master's re-wire, which is the only phase. */
    update_all(h, 3, 3);
    PT_ASSERT(ccoip_master_epoch(smh_master(h)) == epoch + 1u, "one phase: the re-wire (%llu)",
              (unsigned long long)ccoip_master_epoch(smh_master(h)));
    for (uint32_t i = 0; i < 3; i++)
        PT_ASSERT(ccoip_peer_epoch(smh_peer(h, i)) == epoch + 1u, "peer %u on the new ring", i);
    allreduce_exact(h, 3, 7);
    smh_destroy(h);
}

PTEST(unchanged, newcomer_still_gets_an_admit_phase)
{
    smh *h = smh_ring_of(2, 1, 0, 0);
    PT_ASSERT(h != NULL, "ring of 2");
    const uint64_t epoch = ccoip_master_epoch(smh_master(h));
    const uint32_t nc = smh_add_peer(h, 0);
    const uint64_t c = smh_submit(h, nc, CCOIP_CMD_CONNECT);
    smh_run(h);
    update_all(h, 2, 3);
    pcclResult_t r = pcclInternalError;
    PT_ASSERT(smh_done(h, nc, c, &r) && r == pcclSuccess, "newcomer admitted (r=%d)", (int)r);
    PT_ASSERT(ccoip_master_epoch(smh_master(h)) == epoch + 1u, "an admit phase");
    update_all(h, 3, 3);
    PT_ASSERT(ccoip_master_epoch(smh_master(h)) == epoch + 1u, "then nothing changes");
    allreduce_exact(h, 3, 1);
    smh_destroy(h);
}
