/*
 * test_state.c — shared-state synchronization (core/master_state.c,
 * core/peer_state.c) through the in-memory harness: only differing tensors
 * move, newcomers receive everything including allow_content_inequality
 * keys, outdated peers are spread over distributors, the revision rule, key
 * set mismatch, strategies, and a distributor lost mid-transfer (local state
 * untouched, retry succeeds).
 */
#include <string.h>

#include "ccoip_master.h"
#include "ccoip_peer.h"
#include "ptest.h"
#include "sm_harness.h"

#define NP 5u

typedef struct st_peer {
    float a[8];
    uint32_t b[5];
    float c[3]; /* allow_content_inequality */
} st_peer;

static void st_keys(ccoip_state_key k[3], uint64_t b_count)
{
    memset(k, 0, 3 * sizeof(ccoip_state_key));
    /* Submitted out of name order on purpose: the core sorts. */
    k[0].name = "weights_b";
    k[0].dtype = pcclUint32;
    k[0].count = b_count;
    k[1].name = "weights_a";
    k[1].dtype = pcclFloat;
    k[1].count = 8;
    k[2].name = "optimizer_c";
    k[2].dtype = pcclFloat;
    k[2].count = 3;
    k[2].allow_content_inequality = true;
}

static void st_fill(st_peer *s, uint32_t seed)
{
    for (uint32_t i = 0; i < 8; i++)
        s->a[i] = (float)(seed * 100u + i);
    for (uint32_t i = 0; i < 5; i++)
        s->b[i] = seed * 1000u + i;
    for (uint32_t i = 0; i < 3; i++)
        s->c[i] = (float)(seed * 10u + i) + 0.5f;
}

static uint64_t st_sync(smh *h, uint32_t peer, st_peer *s, uint64_t rev,
                        pcclSharedStateSyncStrategy_t strat, uint64_t b_count)
{
    ccoip_state_key k[3];
    st_keys(k, b_count);
    ccoip_sync_args a;
    memset(&a, 0, sizeof(a));
    a.revision = rev;
    a.strategy = strat;
    a.num_keys = 3;
    a.keys = k;
    void *t[3] = {s->b, s->a, s->c};
    return smh_sync(h, peer, &a, t);
}

static smh *st_world(uint32_t n)
{
    ccoip_master_config mc;
    ccoip_master_config_default(&mc);
    mc.min_collective_world = 1;
    smh *h = smh_create(&mc, NULL);
    if (!smh_form_ring(h, n, 0)) {
        smh_destroy(h);
        return NULL;
    }
    return h;
}

/* Runs one round where every live peer in `who` syncs; returns results in r[]. */
static void st_round(smh *h, const uint32_t *who, uint32_t n, st_peer *s, const uint64_t *rev,
                     pcclSharedStateSyncStrategy_t strat, uint64_t *cmd)
{
    for (uint32_t i = 0; i < n; i++)
        cmd[who[i]] = st_sync(h, who[i], &s[who[i]], rev[i], strat, 5);
    smh_run(h);
}

PTEST(state, identical_then_one_differing_tensor)
{
    smh *h = st_world(3);
    PT_ASSERT(h != NULL, "ring of 3");
    st_peer s[NP];
    for (uint32_t i = 0; i < 3; i++)
        st_fill(&s[i], 1);
    uint32_t who[3] = {0, 1, 2};
    uint64_t rev[3] = {7, 7, 7}, cmd[NP];
    st_round(h, who, 3, s, rev, PCCL_SHARED_STATE_SYNC_STRATEGY_ENFORCE_POPULAR, cmd);
    for (uint32_t i = 0; i < 3; i++) {
        pcclResult_t r = pcclInternalError;
        uint64_t rx = 99, tx = 99, rv = 0;
        PT_ASSERT(smh_done(h, i, cmd[i], &r) && r == pcclSuccess, "peer %u first sync ok (r=%d)", i,
                  (int)r);
        PT_ASSERT(smh_sync_info(h, i, cmd[i], &rx, &tx, &rv), "info");
        PT_ASSERT(rx == 0 && tx == 0 && rv == 7,
                  "peer %u: nothing moved, revision 7 (%llu %llu %llu)", i, (unsigned long long)rx,
                  (unsigned long long)tx, (unsigned long long)rv);
        PT_ASSERT(smh_notify_count(h, i, cmd[i]) == 1, "one NOTIFY");
    }
    /* Next revision: peer 2's "weights_b" differs (and its aci key, which is not compared). */
    s[2].b[3] = 4242;
    s[2].c[0] = -1.0f;
    uint64_t rev2[3] = {8, 8, 8};
    st_round(h, who, 3, s, rev2, PCCL_SHARED_STATE_SYNC_STRATEGY_ENFORCE_POPULAR, cmd);
    uint64_t txsum = 0;
    for (uint32_t i = 0; i < 3; i++) {
        pcclResult_t r = pcclInternalError;
        uint64_t rx = 0, tx = 0, rv = 0;
        PT_ASSERT(smh_done(h, i, cmd[i], &r) && r == pcclSuccess, "peer %u second sync ok (r=%d)",
                  i, (int)r);
        PT_ASSERT(smh_sync_info(h, i, cmd[i], &rx, &tx, &rv), "info");
        PT_ASSERT(rv == 8, "revision 8");
        PT_ASSERT(rx == (i == 2 ? 20u : 0u), "peer %u rx %llu", i, (unsigned long long)rx);
        txsum += tx;
    }
    PT_ASSERT(txsum == 20, "only the differing tensor moved (tx %llu)", (unsigned long long)txsum);
    PT_ASSERT(s[2].b[3] == 1003u, "popular content adopted (%u)", s[2].b[3]);
    PT_ASSERT(s[2].c[0] == -1.0f, "aci key of an up-to-date peer untouched");
    PT_ASSERT(smh_step_errors(h) == 0, "no step errors");
    smh_destroy(h);
}

PTEST(state, newcomer_receives_everything_and_load_is_spread)
{
    /* Peers 0, 1 up to date; 2, 3 outdated (revision 0): each distributor serves one. */
    smh *h = st_world(4);
    PT_ASSERT(h != NULL, "ring of 4");
    st_peer s[NP];
    st_fill(&s[0], 1);
    st_fill(&s[1], 1);
    s[1].c[1] = 77.0f; /* aci content differs between the distributors */
    st_fill(&s[2], 2);
    st_fill(&s[3], 3);
    uint32_t who[4] = {0, 1, 2, 3};
    uint64_t rev[4] = {5, 5, 0, 0}, cmd[NP];
    st_round(h, who, 4, s, rev, PCCL_SHARED_STATE_SYNC_STRATEGY_ENFORCE_POPULAR, cmd);
    uint64_t tx[4] = {0}, rx[4] = {0};
    for (uint32_t i = 0; i < 4; i++) {
        pcclResult_t r = pcclInternalError;
        uint64_t rv = 0;
        PT_ASSERT(smh_done(h, i, cmd[i], &r) && r == pcclSuccess, "peer %u ok (r=%d)", i, (int)r);
        PT_ASSERT(smh_sync_info(h, i, cmd[i], &rx[i], &tx[i], &rv), "info");
        PT_ASSERT(rv == 5, "peer %u adopts revision 5 (%llu)", i, (unsigned long long)rv);
    }
    PT_ASSERT(rx[2] == 32u + 20u + 12u && rx[3] == 32u + 20u + 12u,
              "newcomers receive every tensor, aci included (%llu %llu)", (unsigned long long)rx[2],
              (unsigned long long)rx[3]);
    PT_ASSERT(tx[0] == 64u && tx[1] == 64u, "one newcomer per distributor (%llu %llu)",
              (unsigned long long)tx[0], (unsigned long long)tx[1]);
    PT_ASSERT(memcmp(s[2].a, s[0].a, sizeof(s[0].a)) == 0 &&
                  memcmp(s[3].b, s[0].b, sizeof(s[0].b)) == 0,
              "popular content adopted");
    PT_ASSERT(memcmp(s[2].c, s[0].c, sizeof(s[0].c)) == 0, "peer 2 got distributor 0's aci key");
    PT_ASSERT(memcmp(s[3].c, s[1].c, sizeof(s[0].c)) == 0, "peer 3 got distributor 1's aci key");
    /* Next round: everybody at revision 6, nothing moves. */
    uint64_t rev2[4] = {6, 6, 6, 6};
    s[3].c[2] = 1234.0f; /* aci: not compared */
    st_round(h, who, 4, s, rev2, PCCL_SHARED_STATE_SYNC_STRATEGY_ENFORCE_POPULAR, cmd);
    for (uint32_t i = 0; i < 4; i++) {
        pcclResult_t r = pcclInternalError;
        uint64_t x = 1, y = 1, rv = 0;
        PT_ASSERT(smh_done(h, i, cmd[i], &r) && r == pcclSuccess, "round 2 peer %u ok", i);
        PT_ASSERT(smh_sync_info(h, i, cmd[i], &x, &y, &rv) && x == 0 && y == 0 && rv == 6,
                  "round 2 peer %u: nothing moved", i);
    }
    smh_destroy(h);
}

PTEST(state, revision_skip_and_key_set_mismatch_evict)
{
    smh *h = st_world(4);
    PT_ASSERT(h != NULL, "ring of 4");
    st_peer s[NP];
    for (uint32_t i = 0; i < 4; i++)
        st_fill(&s[i], 1);
    uint32_t who[4] = {0, 1, 2, 3};
    uint64_t rev[4] = {3, 3, 3, 3}, cmd[NP];
    st_round(h, who, 4, s, rev, PCCL_SHARED_STATE_SYNC_STRATEGY_ENFORCE_POPULAR, cmd);
    for (uint32_t i = 0; i < 4; i++) {
        pcclResult_t r = pcclInternalError;
        PT_ASSERT(smh_done(h, i, cmd[i], &r) && r == pcclSuccess, "round 1 peer %u ok", i);
    }
    /* Peer 3 skips revision 4; peer 2 submits a different count for weights_b. */
    for (uint32_t i = 0; i < 4; i++) {
        uint64_t rv = i == 3 ? 5u : 4u;
        cmd[i] = st_sync(h, i, &s[i], rv, PCCL_SHARED_STATE_SYNC_STRATEGY_ENFORCE_POPULAR,
                         i == 2 ? 4u : 5u);
    }
    smh_run(h);
    pcclResult_t r = pcclInternalError;
    PT_ASSERT(smh_done(h, 3, cmd[3], &r) && r == pcclInvalidUsage, "skip: pcclInvalidUsage (%d)",
              (int)r);
    PT_ASSERT(ccoip_peer_is_failed(smh_peer(h, 3)), "skipper evicted");
    PT_ASSERT(smh_done(h, 2, cmd[2], &r) && r == pcclInvalidUsage,
              "key set mismatch: pcclInvalidUsage (%d)", (int)r);
    PT_ASSERT(ccoip_peer_is_failed(smh_peer(h, 2)), "mismatching peer evicted");
    for (uint32_t i = 0; i < 2; i++) {
        uint64_t rx, tx, rv;
        PT_ASSERT(smh_done(h, i, cmd[i], &r) && r == pcclSuccess, "peer %u ok (%d)", i, (int)r);
        PT_ASSERT(smh_sync_info(h, i, cmd[i], &rx, &tx, &rv) && rv == 4, "revision 4");
    }
    PT_ASSERT(smh_notify_count(h, 2, cmd[2]) == 1 && smh_notify_count(h, 3, cmd[3]) == 1,
              "exactly one NOTIFY for the evicted");
    PT_ASSERT(ccoip_master_num_accepted(smh_master(h)) == 2, "two left");
    smh_destroy(h);
}

PTEST(state, strategies)
{
    smh *h = st_world(3);
    PT_ASSERT(h != NULL, "ring of 3");
    st_peer s[NP];
    st_fill(&s[0], 1);
    st_fill(&s[1], 1);
    st_fill(&s[2], 9);
    /* RECEIVE_ONLY peer 2 (same revision, different content) receives. */
    uint64_t cmd[NP];
    cmd[0] = st_sync(h, 0, &s[0], 1, PCCL_SHARED_STATE_SYNC_STRATEGY_ENFORCE_POPULAR, 5);
    cmd[1] = st_sync(h, 1, &s[1], 1, PCCL_SHARED_STATE_SYNC_STRATEGY_SEND_ONLY, 5);
    cmd[2] = st_sync(h, 2, &s[2], 1, PCCL_SHARED_STATE_SYNC_STRATEGY_RECEIVE_ONLY, 5);
    smh_run(h);
    pcclResult_t r = pcclInternalError;
    for (uint32_t i = 0; i < 3; i++) {
        PT_ASSERT(smh_done(h, i, cmd[i], &r) && r == pcclSuccess, "peer %u ok (%d)", i, (int)r);
    }
    PT_ASSERT(memcmp(s[2].b, s[0].b, sizeof(s[0].b)) == 0, "receive-only peer received");
    /* SEND_ONLY with differing content: refused and evicted. */
    s[1].a[0] = -5.0f;
    cmd[0] = st_sync(h, 0, &s[0], 2, PCCL_SHARED_STATE_SYNC_STRATEGY_ENFORCE_POPULAR, 5);
    cmd[1] = st_sync(h, 1, &s[1], 2, PCCL_SHARED_STATE_SYNC_STRATEGY_SEND_ONLY, 5);
    cmd[2] = st_sync(h, 2, &s[2], 2, PCCL_SHARED_STATE_SYNC_STRATEGY_ENFORCE_POPULAR, 5);
    smh_run(h);
    PT_ASSERT(smh_done(h, 1, cmd[1], &r) && r == pcclInvalidUsage, "send-only conflict (%d)",
              (int)r);
    PT_ASSERT(ccoip_peer_is_failed(smh_peer(h, 1)), "send-only peer evicted");
    PT_ASSERT(smh_done(h, 0, cmd[0], &r) && r == pcclSuccess, "peer 0 ok");
    PT_ASSERT(smh_done(h, 2, cmd[2], &r) && r == pcclSuccess, "peer 2 ok");
    /* Everybody RECEIVE_ONLY: nobody distributes. */
    cmd[0] = st_sync(h, 0, &s[0], 3, PCCL_SHARED_STATE_SYNC_STRATEGY_RECEIVE_ONLY, 5);
    cmd[2] = st_sync(h, 2, &s[2], 3, PCCL_SHARED_STATE_SYNC_STRATEGY_RECEIVE_ONLY, 5);
    smh_run(h);
    PT_ASSERT(smh_done(h, 0, cmd[0], &r) && r == pcclNoSharedStateAvailable, "none available (%d)",
              (int)r);
    PT_ASSERT(smh_done(h, 2, cmd[2], &r) && r == pcclNoSharedStateAvailable, "none available");
    smh_destroy(h);
}

PTEST(state, distributor_lost_mid_transfer_then_retry)
{
    smh *h = st_world(3);
    PT_ASSERT(h != NULL, "ring of 3");
    st_peer s[NP], before;
    st_fill(&s[0], 1);
    st_fill(&s[1], 1);
    st_fill(&s[2], 2);
    before = s[2];
    uint32_t who[3] = {0, 1, 2};
    uint64_t rev[3] = {4, 4, 0}, cmd[NP];
    /* Peer 2 fetches from peer 0 (load 0, lowest id); peer 0 dies at its second STATE_SEND. */
    smh_kill_on_state_send(h, 0, 2);
    st_round(h, who, 3, s, rev, PCCL_SHARED_STATE_SYNC_STRATEGY_ENFORCE_POPULAR, cmd);
    smh_advance(h, 3000000000u);
    pcclResult_t r = pcclInternalError;
    PT_ASSERT(smh_done(h, 2, cmd[2], &r) && r == pcclRankConnectionLost,
              "receiver: pcclRankConnectionLost (%d)", (int)r);
    PT_ASSERT(memcmp(&s[2], &before, sizeof(before)) == 0, "receiver's state untouched");
    PT_ASSERT(smh_done(h, 1, cmd[1], &r) && r == pcclRankConnectionLost,
              "the round failed for every member (%d)", (int)r);
    PT_ASSERT(smh_log_count(h, "shared-state fetch failed") >= 1, "logged");
    /* Retry: peer 1 distributes now. */
    uint32_t who2[2] = {1, 2};
    uint64_t rev2[2] = {4, 0};
    st_round(h, who2, 2, s, rev2, PCCL_SHARED_STATE_SYNC_STRATEGY_ENFORCE_POPULAR, cmd);
    uint64_t rx, tx, rv;
    PT_ASSERT(smh_done(h, 2, cmd[2], &r) && r == pcclSuccess, "retry ok (%d)", (int)r);
    PT_ASSERT(smh_sync_info(h, 2, cmd[2], &rx, &tx, &rv) && rx == 64u && rv == 4,
              "retry received everything (rx %llu rev %llu)", (unsigned long long)rx,
              (unsigned long long)rv);
    PT_ASSERT(memcmp(&s[2], &s[1], sizeof(s[1])) == 0, "state equals the distributor's");
    PT_ASSERT(smh_done(h, 1, cmd[1], &r) && r == pcclSuccess, "distributor ok");
    smh_destroy(h);
}

PTEST(state, corrupted_transfer_fails_verification_untouched)
{
    smh *h = st_world(2);
    PT_ASSERT(h != NULL, "ring of 2");
    st_peer s[NP], before;
    st_fill(&s[0], 1);
    st_fill(&s[1], 2);
    before = s[1];
    uint32_t who[2] = {0, 1};
    uint64_t rev[2] = {3, 0}, cmd[NP];
    smh_corrupt_state_sends(h, 0, 1);
    st_round(h, who, 2, s, rev, PCCL_SHARED_STATE_SYNC_STRATEGY_ENFORCE_POPULAR, cmd);
    pcclResult_t r = pcclInternalError;
    PT_ASSERT(smh_done(h, 1, cmd[1], &r) && r == pcclRankConnectionLost,
              "receiver: verification failed (r=%d)", (int)r);
    PT_ASSERT(smh_done(h, 0, cmd[0], &r) && r == pcclRankConnectionLost, "the round failed");
    PT_ASSERT(memcmp(&s[1], &before, sizeof(before)) == 0, "nothing adopted");
    PT_ASSERT(smh_log_count(h, "expected hash") == 1, "hash mismatch logged");
    st_round(h, who, 2, s, rev, PCCL_SHARED_STATE_SYNC_STRATEGY_ENFORCE_POPULAR, cmd);
    PT_ASSERT(smh_done(h, 1, cmd[1], &r) && r == pcclSuccess, "retry ok (r=%d)", (int)r);
    PT_ASSERT(memcmp(&s[1], &s[0], sizeof(s[0])) == 0, "adopted after the retry");
    smh_destroy(h);
}

PTEST(state, straggler_evicted_at_the_vote_deadline)
{
    smh *h = st_world(3);
    PT_ASSERT(h != NULL, "ring of 3");
    st_peer s[NP];
    for (uint32_t i = 0; i < 3; i++)
        st_fill(&s[i], 1);
    uint32_t who[2] = {0, 1};
    uint64_t rev[2] = {1, 1}, cmd[NP];
    st_round(h, who, 2, s, rev, PCCL_SHARED_STATE_SYNC_STRATEGY_ENFORCE_POPULAR, cmd);
    pcclResult_t r;
    PT_ASSERT(!smh_done(h, 0, cmd[0], &r), "waits for peer 2");
    smh_advance(h, 61000000000u);
    PT_ASSERT(ccoip_peer_is_failed(smh_peer(h, 2)), "the straggler was evicted");
    for (uint32_t i = 0; i < 2; i++) {
        PT_ASSERT(smh_done(h, i, cmd[i], &r) && r == pcclSuccess, "peer %u synced (r=%d)", i,
                  (int)r);
    }
    PT_ASSERT(smh_log_count(h, "did not vote the shared-state sync") == 1, "logged");
    smh_destroy(h);
}
