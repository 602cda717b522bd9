/*
 * test_mismatch.c — members blocked in different calls (core/master_mismatch.c,
 * docs/protocol.md §6.12), through the in-memory harness. (A p2p phase that
 * fails at once when a member hangs in it is the simulator's hang_in_* scenarios.)
 */
#include <string.h>

#include "ccoip_master.h"
#include "ptest.h"
#include "sm_harness.h"

#define MS 1000000u

typedef struct mm_state {
    float w[4];
} mm_state;

static uint64_t mm_sync(smh *h, uint32_t peer, mm_state *s, uint64_t rev)
{
    return smh_sync_floats(h, peer, "w", s->w, 4, rev);
}

PTEST(mismatch, optimize_vs_sync_fails_all_at_once)
{
    smh *h = smh_create(NULL, NULL);
    PT_ASSERT(smh_form_ring(h, 3, 0), "ring of 3 formed");
    mm_state st[3];
    memset(st, 0, sizeof(st));
    const uint64_t t0 = smh_now(h);
    uint64_t o0 = smh_submit(h, 0, CCOIP_CMD_OPTIMIZE_TOPOLOGY);
    uint64_t s1 = mm_sync(h, 1, &st[1], 0);
    smh_run(h);
    PT_ASSERT(!smh_done(h, 0, o0, NULL) && !smh_done(h, 1, s1, NULL),
              "peer 2 is not in a call yet: nothing fails");
    uint64_t s2 = mm_sync(h, 2, &st[2], 0);
    smh_run(h);
    pcclResult_t r0 = pcclSuccess, r1 = pcclSuccess, r2 = pcclSuccess;
    PT_ASSERT(smh_done(h, 0, o0, &r0) && r0 == pcclInvalidUsage,
              "the optimize fails with pcclInvalidUsage (r=%d)", (int)r0);
    PT_ASSERT(smh_done(h, 1, s1, &r1) && r1 == pcclInvalidUsage, "sync 1: pcclInvalidUsage (r=%d)",
              (int)r1);
    PT_ASSERT(smh_done(h, 2, s2, &r2) && r2 == pcclInvalidUsage, "sync 2: pcclInvalidUsage (r=%d)",
              (int)r2);
    PT_ASSERT(smh_now(h) - t0 < 1000u * MS, "at once, not at the vote timeout (%llu ms)",
              (unsigned long long)((smh_now(h) - t0) / MS));
    PT_ASSERT(smh_log_count(h, "pcclOptimizeTopology and pcclSynchronizeSharedState") == 1,
              "one log line names both calls");
    PT_ASSERT(ccoip_master_num_accepted(smh_master(h)) == 3, "nobody evicted");
    /* The same calls, now agreed, complete. */
    uint64_t s[3];
    for (uint32_t i = 0; i < 3; i++)
        s[i] = mm_sync(h, i, &st[i], 0);
    smh_run(h);
    for (uint32_t i = 0; i < 3; i++) {
        pcclResult_t r = pcclInternalError;
        PT_ASSERT(smh_done(h, i, s[i], &r) && r == pcclSuccess, "retried sync %u: r=%d", i, (int)r);
    }
    PT_ASSERT(smh_step_errors(h) == 0, "no step errors");
    smh_destroy(h);
}

PTEST(mismatch, update_vs_pending_query_fails_all)
{
    smh *h = smh_create(NULL, NULL);
    PT_ASSERT(smh_form_ring(h, 2, 0), "ring of 2 formed");
    uint64_t u = smh_submit(h, 0, CCOIP_CMD_UPDATE_TOPOLOGY);
    uint64_t q = smh_submit(h, 1, CCOIP_CMD_ARE_PEERS_PENDING);
    smh_run(h);
    pcclResult_t ru = pcclSuccess, rq = pcclSuccess;
    PT_ASSERT(smh_done(h, 0, u, &ru) && ru == pcclInvalidUsage, "update: pcclInvalidUsage (r=%d)",
              (int)ru);
    PT_ASSERT(smh_done(h, 1, q, &rq) && rq == pcclInvalidUsage, "pending: pcclInvalidUsage (r=%d)",
              (int)rq);
    PT_ASSERT(smh_log_count(h, "pcclUpdateTopology and pcclArePeersPending") == 1, "logged");
    smh_destroy(h);
}

PTEST(mismatch, an_allreduce_in_flight_is_not_blocked)
{
    /* A member with only an (asynchronous) all-reduce open may still be computing: no verdict. */
    smh *h = smh_create(NULL, NULL);
    PT_ASSERT(smh_form_ring(h, 3, 0), "ring of 3 formed");
    mm_state st[3];
    memset(st, 0, sizeof(st));
    ccoip_allreduce_args a;
    memset(&a, 0, sizeof(a));
    a.tag = 1;
    a.count = 4;
    a.dtype = pcclFloat;
    a.op = pcclSum;
    a.quant_algorithm = pcclQuantNone;
    float x[4] = {1, 2, 3, 4}, y[4];
    uint64_t o0 = smh_submit(h, 0, CCOIP_CMD_OPTIMIZE_TOPOLOGY);
    uint64_t s1 = mm_sync(h, 1, &st[1], 0);
    uint64_t a2 = smh_allreduce(h, 2, &a, x, y);
    smh_advance(h, 500u * MS);
    PT_ASSERT(!smh_done(h, 0, o0, NULL) && !smh_done(h, 1, s1, NULL) && !smh_done(h, 2, a2, NULL),
              "all still waiting");
    PT_ASSERT(smh_log_count(h, "blocked in a call") == 0, "no mismatch reported");
    smh_destroy(h);
}

PTEST(mismatch, groups_uniform_but_different_global_calls)
{
    /* Group 0 all in optimize, group 1 all in update: both are global votes, so neither ends. */
    smh *h = smh_create(NULL, NULL);
    const uint32_t g[4] = {0, 0, 1, 1};
    for (uint32_t i = 0; i < 4; i++)
        smh_add_peer(h, g[i]);
    pcclResult_t rc = pcclInternalError;
    uint64_t j[4];
    j[0] = smh_submit(h, 0, CCOIP_CMD_CONNECT);
    smh_run(h);
    PT_ASSERT(smh_done(h, 0, j[0], &rc) && rc == pcclSuccess, "peer 0 admitted");
    for (uint32_t i = 1; i < 4; i++)
        j[i] = smh_submit(h, i, CCOIP_CMD_CONNECT);
    smh_run(h);
    uint64_t u = smh_submit(h, 0, CCOIP_CMD_UPDATE_TOPOLOGY);
    smh_run(h);
    PT_ASSERT(smh_done(h, 0, u, &rc) && rc == pcclSuccess, "the others admitted");
    uint64_t c[4];
    c[0] = smh_submit(h, 0, CCOIP_CMD_OPTIMIZE_TOPOLOGY);
    c[1] = smh_submit(h, 1, CCOIP_CMD_OPTIMIZE_TOPOLOGY);
    c[2] = smh_submit(h, 2, CCOIP_CMD_UPDATE_TOPOLOGY);
    c[3] = smh_submit(h, 3, CCOIP_CMD_UPDATE_TOPOLOGY);
    smh_run(h);
    for (uint32_t i = 0; i < 4; i++) {
        pcclResult_t r = pcclSuccess;
        PT_ASSERT(smh_done(h, i, c[i], &r) && r == pcclInvalidUsage, "peer %u: r=%d", i, (int)r);
    }
    PT_ASSERT(smh_log_count(h, "all groups") == 1, "one line for all groups");
    smh_destroy(h);
}
