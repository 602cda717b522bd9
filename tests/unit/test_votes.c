/*
 * test_votes.c — a minority never evicts a majority (docs/protocol.md §6.10) in the votes and
 * report phases beyond collectives and topology votes (those: test_hostile.c): the shared-state
 * vote and its sync_done reports (§6.7), the optimization vote and its probe reports (§6.6), and
 * the reports of a p2p phase (§6.4). Through the in-memory harness with real peers: a member
 * that does not do its part is alive (it did not call, or its dial or probe hangs; it
 * heartbeats). At the deadline with V of N members done: 2V > N evicts the others
 * (REASON_VOTE_TIMEOUT); otherwise nobody is evicted and every call of the phase ends with an
 * error. Each test begins with a minority (or exactly half) that evicted the others before the
 * rule.
 */
#include <string.h>

#include "ccoip_frame.h"
#include "ccoip_master.h"
#include "ccoip_peer.h"
#include "ptest.h"
#include "sm_harness.h"

#define MS 1000000ull

static smh *world(uint32_t n)
{
    ccoip_master_config mc;
    ccoip_master_config_default(&mc);
    mc.vote_timeout_ms = 5000;
    smh *h = smh_create(&mc, NULL);
    PT_ASSERT(smh_form_ring(h, n, 0), "ring of %u formed", n);
    return h;
}

/* Runs what is queued, then moves past the deadline (5 s) of a phase that begins now; nothing of
 * the n calls c[0..n) ends before it. */
static void past_deadline(smh *h, const uint64_t *c, uint32_t n)
{
    smh_run(h);
    smh_advance(h, 4000u * MS);
    for (uint32_t i = 0; i < n; i++)
        PT_ASSERT(!smh_done(h, i, c[i], NULL), "peer %u: waits before the deadline", i);
    smh_advance(h, 1500u * MS);
}

/* The first n peers are all accepted; none was evicted. */
static void nobody_evicted(smh *h, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        PT_ASSERT(!ccoip_peer_is_failed(smh_peer(h, i)), "peer %u not evicted", i);
        PT_ASSERT(smh_master_sent(h, i, CCOIP_PB_MASTER_TO_PEER_BODY_EVICTION, 0,
                                  CCOIP_PB_REASON_VOTE_TIMEOUT) == 0,
                  "no eviction sent to peer %u", i);
    }
    PT_ASSERT(ccoip_master_num_accepted(smh_master(h)) == n, "%u accepted (%u)", n,
              ccoip_master_num_accepted(smh_master(h)));
}

/* Peer i was evicted once as a straggler (REASON_VOTE_TIMEOUT, logged `why`); peers 0..i-1 stay. */
static void straggler_evicted(smh *h, uint32_t i, const char *why)
{
    PT_ASSERT(ccoip_peer_is_failed(smh_peer(h, i)), "peer %u evicted", i);
    PT_ASSERT(smh_master_sent(h, i, CCOIP_PB_MASTER_TO_PEER_BODY_EVICTION, 0,
                              CCOIP_PB_REASON_VOTE_TIMEOUT) == 1,
              "peer %u: one eviction, REASON_VOTE_TIMEOUT", i);
    PT_ASSERT(smh_log_count(h, why) == 1, "logged: %s", why);
    nobody_evicted(h, i);
}

/* Calls c[from..to) ended with want, each with one NOTIFY. */
static void results(smh *h, uint32_t from, uint32_t to, const uint64_t *c, pcclResult_t want)
{
    for (uint32_t i = from; i < to; i++) {
        pcclResult_t r = pcclInternalError;
        PT_ASSERT(smh_done(h, i, c[i], &r), "peer %u: call done", i);
        PT_ASSERT(r == want, "peer %u: result %d, want %d", i, (int)r, (int)want);
        PT_ASSERT(smh_notify_count(h, i, c[i]) == 1, "peer %u: one NOTIFY", i);
    }
}

/* Ballots of peer i answered INVALID_USAGE / REASON_VOTE_UNMATCHED so far. */
static uint32_t unmatched(smh *h, uint32_t i)
{
    return smh_master_sent(h, i, CCOIP_PB_MASTER_TO_PEER_BODY_NONE, CCOIP_PB_STATUS_INVALID_USAGE,
                           CCOIP_PB_REASON_VOTE_UNMATCHED);
}

/* Frames with body sent to each of the first n peers so far, into got[]. */
static void count_sent(smh *h, uint32_t n, int32_t body, uint32_t *got)
{
    for (uint32_t i = 0; i < n; i++)
        got[i] = smh_master_sent(h, i, body, 0, 0);
}

/* ------------------------------------------------------------------------ */
/* Votes: the shared-state sync and the topology optimization                */
/* ------------------------------------------------------------------------ */

/* One peer's ballot of the vote under test; the shared state lives here. */
typedef uint64_t (*ballot_fn)(smh *h, uint32_t peer);

static float g_w[4][4]; /* tensors of the sync ballots, per peer: equal content */
static float g_ww[4][4];

static uint64_t sync_ballot(smh *h, uint32_t peer)
{
    for (uint32_t k = 0; k < 4; k++)
        g_w[peer][k] = (float)k;
    return smh_sync_floats(h, peer, "w", g_w[peer], 4, 1);
}

static uint64_t optimize_ballot(smh *h, uint32_t peer)
{
    return smh_submit(h, peer, CCOIP_CMD_OPTIMIZE_TOPOLOGY);
}

/* Three peers, only peer 0 votes. Before: peers 1 and 2 were evicted at the deadline and peer
 * 0's call succeeded alone. Now: pcclInvalidUsage (VOTE_UNMATCHED), nobody evicted, and the next
 * vote of all three succeeds. */
static void vote_minority(ballot_fn ballot, const char *logged)
{
    smh *h = world(3);
    uint64_t c[3];
    c[0] = ballot(h, 0);
    past_deadline(h, c, 1);
    results(h, 0, 1, c, pcclInvalidUsage);
    PT_ASSERT(unmatched(h, 0) == 1, "peer 0: INVALID_USAGE / VOTE_UNMATCHED");
    nobody_evicted(h, 3);
    PT_ASSERT(smh_log_count(h, logged) == 1, "logged: %s", logged);
    for (uint32_t i = 0; i < 3; i++)
        c[i] = ballot(h, i);
    smh_run(h);
    results(h, 0, 3, c, pcclSuccess);
    smh_destroy(h);
}

/* Four peers: two vote (exactly half: before, the other two were evicted; now nobody, both get
 * pcclInvalidUsage), then three (a strict majority: the fourth is evicted, the three succeed). */
static void vote_majority(ballot_fn ballot, const char *why)
{
    smh *h = world(4);
    uint64_t c[4];
    for (uint32_t i = 0; i < 2; i++)
        c[i] = ballot(h, i);
    past_deadline(h, c, 2);
    results(h, 0, 2, c, pcclInvalidUsage);
    nobody_evicted(h, 4);
    for (uint32_t i = 0; i < 3; i++)
        c[i] = ballot(h, i);
    past_deadline(h, c, 3);
    straggler_evicted(h, 3, why);
    results(h, 0, 3, c, pcclSuccess);
    for (uint32_t i = 0; i < 3; i++)
        PT_ASSERT(unmatched(h, i) == (i < 2 ? 1u : 0u), "peer %u: refused once, at half", i);
    smh_destroy(h);
}

PTEST(votes, sync_vote_minority_evicts_nobody)
{
    vote_minority(sync_ballot, "shared-state vote timed out with 1 of 3 members");
}

PTEST(votes, sync_vote_majority_evicts_the_silent)
{
    vote_majority(sync_ballot, "did not vote the shared-state sync");
}

PTEST(votes, optimize_vote_minority_evicts_nobody)
{
    vote_minority(optimize_ballot, "optimization vote timed out with 1 of 3 peers");
}

PTEST(votes, optimize_vote_majority_evicts_the_silent)
{
    vote_majority(optimize_ballot, "did not vote the topology optimization");
}

/* ------------------------------------------------------------------------ */
/* Reports: sync_done (§6.7)                                                */
/* ------------------------------------------------------------------------ */

/* Peers [0, up) hold revision 1 (content 10..13), the others revision 0 (content of their own):
 * they must fetch from a distributor. */
static void sync_round(smh *h, uint32_t n, uint32_t up, uint64_t *c)
{
    for (uint32_t i = 0; i < n; i++) {
        for (uint32_t k = 0; k < 4; k++)
            g_ww[i][k] = (i < up ? 10.0f : 20.0f + (float)i) + (float)k;
        c[i] = smh_sync_floats(h, i, "w", g_ww[i], 4, i < up ? 1u : 0u);
    }
}

/* Peer 0 is up to date, peers 1 and 2 must fetch from it and their dials hang: only peer 0
 * reports sync_done. Before: peers 1 and 2 were evicted at the deadline and peer 0's sync
 * succeeded. Now: the round fails for all three (pcclRankConnectionLost; peers 1 and 2 get the
 * verdict as a notification and adopt nothing), nobody is evicted, and the retry succeeds. */
PTEST(votes, sync_done_minority_fails_the_round)
{
    smh *h = world(3);
    smh_hang_link(h, 1, 0, true);
    smh_hang_link(h, 2, 0, true);
    uint64_t c[3];
    sync_round(h, 3, 1, c);
    past_deadline(h, c, 3);
    results(h, 0, 3, c, pcclRankConnectionLost);
    nobody_evicted(h, 3);
    uint32_t got[3];
    count_sent(h, 3, CCOIP_PB_MASTER_TO_PEER_BODY_SYNC_DONE_VERDICT, got);
    PT_ASSERT(got[0] == 1 && got[1] == 1 && got[2] == 1, "one sync_done_verdict each");
    PT_ASSERT(g_ww[1][0] == 21.0f && g_ww[2][3] == 25.0f, "nothing adopted");
    PT_ASSERT(smh_log_count(h, "shared-state round timed out with 1 of 3 members") == 1, "logged");
    smh_hang_link(h, 1, 0, false);
    smh_hang_link(h, 2, 0, false);
    sync_round(h, 3, 1, c);
    smh_run(h);
    results(h, 0, 3, c, pcclSuccess);
    for (uint32_t i = 1; i < 3; i++)
        PT_ASSERT(memcmp(g_ww[i], g_ww[0], sizeof(g_ww[0])) == 0, "peer %u fetched", i);
    smh_destroy(h);
}

/* Four peers, peers 2 and 3 must fetch and their dials hang: two of four report (exactly half:
 * before, peers 2 and 3 were evicted; now the round fails for all, nobody evicted). Then only
 * peer 3's dials hang: three of four report, peer 3 is evicted, the others' round succeeds. */
PTEST(votes, sync_done_majority_evicts_the_silent)
{
    smh *h = world(4);
    for (uint32_t d = 0; d < 2; d++) {
        smh_hang_link(h, 2, d, true);
        smh_hang_link(h, 3, d, true);
    }
    uint64_t c[4];
    sync_round(h, 4, 2, c);
    past_deadline(h, c, 4);
    results(h, 0, 4, c, pcclRankConnectionLost);
    nobody_evicted(h, 4);
    PT_ASSERT(smh_log_count(h, "shared-state round timed out with 2 of 4 members") == 1, "logged");
    for (uint32_t d = 0; d < 2; d++)
        smh_hang_link(h, 2, d, false);
    sync_round(h, 4, 2, c);
    past_deadline(h, c, 4);
    straggler_evicted(h, 3, "did not finish the shared-state sync");
    results(h, 0, 3, c, pcclSuccess);
    PT_ASSERT(memcmp(g_ww[2], g_ww[0], sizeof(g_ww[0])) == 0, "peer 2 fetched");
    smh_destroy(h);
}

/* ------------------------------------------------------------------------ */
/* Reports: bandwidth probes (§6.6)                                          */
/* ------------------------------------------------------------------------ */

/* Every one of the first n peers optimizes; the first probe of peers [done, n) hangs (their
 * first target is peer 0). */
static void probe_round(smh *h, uint32_t n, uint32_t done, uint64_t *c)
{
    for (uint32_t i = done; i < n; i++)
        smh_hang_probe(h, i, 0, true);
    for (uint32_t i = 0; i < n; i++)
        c[i] = smh_submit(h, i, CCOIP_CMD_OPTIMIZE_TOPOLOGY);
}

/* The hung probes of peers [from, n) end (failed): they report late. */
static void probes_end(smh *h, uint32_t from, uint32_t n)
{
    for (uint32_t i = from; i < n; i++)
        smh_hang_probe(h, i, 0, false);
    smh_run(h);
}

/* All three optimize; the probes of peers 1 and 2 hang, peer 0 reports. Before: peers 1 and 2
 * were evicted at the deadline. Now: nobody is evicted; peer 0's call fails at once
 * (pcclTopologyOptimizationFailed); peers 1 and 2, whose probes end later (failed), get the same
 * failure for their late optimize_done (not an eviction); the retry of all three succeeds. */
PTEST(votes, probe_minority_fails_the_round)
{
    smh *h = world(3);
    uint64_t c[3];
    probe_round(h, 3, 1, c);
    past_deadline(h, c, 3);
    results(h, 0, 1, c, pcclTopologyOptimizationFailed);
    PT_ASSERT(!smh_done(h, 1, c[1], NULL) && !smh_done(h, 2, c[2], NULL), "1, 2 still probing");
    nobody_evicted(h, 3);
    PT_ASSERT(smh_log_count(h, "optimization probes timed out with 1 of 3 peers") == 1, "logged");
    probes_end(h, 1, 3);
    results(h, 1, 3, c, pcclTopologyOptimizationFailed);
    uint32_t got[3];
    count_sent(h, 3, CCOIP_PB_MASTER_TO_PEER_BODY_OPTIMIZE_VERDICT, got);
    PT_ASSERT(got[0] == 1 && got[1] == 1 && got[2] == 1, "one optimize_verdict each");
    nobody_evicted(h, 3);
    for (uint32_t i = 0; i < 3; i++)
        c[i] = smh_submit(h, i, CCOIP_CMD_OPTIMIZE_TOPOLOGY);
    smh_run(h);
    results(h, 0, 3, c, pcclSuccess);
    smh_destroy(h);
}

/* Four peers; the probes of peers 2 and 3 hang: two of four done (exactly half: the round fails
 * for all, nobody evicted). Then only peer 3's probe hangs: three of four done, peer 3 is
 * evicted, the three optimize their ring. */
PTEST(votes, probe_majority_evicts_the_silent)
{
    smh *h = world(4);
    uint64_t c[4];
    probe_round(h, 4, 2, c);
    past_deadline(h, c, 4);
    results(h, 0, 2, c, pcclTopologyOptimizationFailed);
    nobody_evicted(h, 4);
    probes_end(h, 2, 4);
    results(h, 2, 4, c, pcclTopologyOptimizationFailed);
    nobody_evicted(h, 4);
    probe_round(h, 4, 3, c);
    past_deadline(h, c, 4);
    straggler_evicted(h, 3, "did not finish its bandwidth probes");
    results(h, 0, 3, c, pcclSuccess);
    smh_destroy(h);
}

/* ------------------------------------------------------------------------ */
/* Reports: the p2p phase (§6.4)                                             */
/* ------------------------------------------------------------------------ */

/* Every one of the first n peers updates the topology, then the calls end with want, world n. */
static void updates(smh *h, uint32_t n, pcclResult_t want)
{
    uint64_t c[SMH_MAX_PEERS];
    for (uint32_t i = 0; i < n; i++)
        c[i] = smh_submit(h, i, CCOIP_CMD_UPDATE_TOPOLOGY);
    smh_run(h);
    results(h, 0, n, c, want);
    for (uint32_t i = 0; i < n; i++) {
        uint32_t world_size = 0;
        PT_ASSERT(smh_done_ex(h, i, c[i], NULL, &world_size, NULL) && world_size == n,
                  "peer %u: world %u (%u)", i, n, world_size);
    }
}

/* Newcomers in group 1 (n of them, connecting: pending) make the accepted peers' next topology
 * vote an admit phase, which re-wires every group (§6.3): a vote with nobody to admit changes
 * nothing and starts no phase. Returns the first newcomer's index. */
static uint32_t newcomers(smh *h, uint32_t n)
{
    const uint32_t first = smh_add_peer(h, 1);
    for (uint32_t i = 1; i < n; i++)
        smh_add_peer(h, 1);
    for (uint32_t i = 0; i < n; i++)
        smh_submit(h, first + i, CCOIP_CMD_CONNECT);
    smh_run(h);
    return first;
}

/* The ring is 0 -> 1 -> 2 -> 0; the dials 1 -> 2 and 2 -> 0 hang, so of group 0 only peer 0
 * reports; a newcomer alone in group 1 (admitted by the phase) reports too: 2 of 4. Before:
 * peers 1 and 2 were evicted at the deadline. Now: the phase fails (pcclUpdateTopologyFailed on
 * all three; 1 and 2 get the verdict as a notification), nobody is evicted, and the master
 * re-wires the accepted peers (1 of 3 report). A member that is really gone is still removed at
 * once: peer 2 dies during that re-wire, which fails right then (no deadline), and 0 and 1
 * re-wire and carry on (admitting the newcomer). */
PTEST(votes, p2p_minority_fails_the_phase)
{
    smh *h = world(3);
    smh_hang_link(h, 1, 2, true);
    smh_hang_link(h, 2, 0, true);
    newcomers(h, 1);
    uint32_t before[3], after[3];
    count_sent(h, 3, CCOIP_PB_MASTER_TO_PEER_BODY_TOPOLOGY_VERDICT, before);
    uint64_t c[3];
    for (uint32_t i = 0; i < 3; i++)
        c[i] = smh_submit(h, i, CCOIP_CMD_UPDATE_TOPOLOGY);
    past_deadline(h, c, 3);
    results(h, 0, 3, c, pcclUpdateTopologyFailed);
    nobody_evicted(h, 3);
    count_sent(h, 3, CCOIP_PB_MASTER_TO_PEER_BODY_TOPOLOGY_VERDICT, after);
    for (uint32_t i = 0; i < 3; i++)
        PT_ASSERT(after[i] == before[i] + 1u, "peer %u: one verdict", i);
    PT_ASSERT(smh_log_count(h, "p2p phase timed out with 2 of 4 members reported") == 1, "logged");
    /* The re-wire that followed hangs the same way; peer 2 dies in it. */
    const uint64_t t = smh_now(h);
    smh_kill_peer(h, 2);
    smh_run(h);
    PT_ASSERT(smh_now(h) == t, "no time passed");
    nobody_evicted(h, 2);
    updates(h, 2, pcclSuccess);
    smh_destroy(h);
}

/* The ring is 0 -> 1 -> 2 -> 3 -> 0. The dials 2 -> 3 and 3 -> 0 hang; two newcomers in group 1
 * (ring 4 -> 5 -> 4) make the vote an admit phase, and their dial 4 -> 5 hangs: three of six
 * report (exactly half: before, 2, 3 and 4 were evicted; now the phase fails for all, nobody
 * evicted). The re-wire of group 0 that follows still hangs at 2 -> 3 and 3 -> 0: two of four,
 * half again. Then only 3 -> 0 hangs: once a re-wire has three of four reports, peer 3 is
 * evicted and the three re-wire and update (admitting the newcomers). */
PTEST(votes, p2p_majority_evicts_the_silent)
{
    smh *h = world(4);
    smh_hang_link(h, 2, 3, true);
    smh_hang_link(h, 3, 0, true);
    const uint32_t nc = newcomers(h, 2);
    smh_hang_link(h, nc, nc + 1u, true);
    uint64_t c[4];
    for (uint32_t i = 0; i < 4; i++)
        c[i] = smh_submit(h, i, CCOIP_CMD_UPDATE_TOPOLOGY);
    past_deadline(h, c, 4);
    results(h, 0, 4, c, pcclUpdateTopologyFailed);
    nobody_evicted(h, 4);
    PT_ASSERT(smh_log_count(h, "p2p phase timed out with 3 of 6 members reported") == 1, "logged");
    smh_hang_link(h, nc, nc + 1u, false);
    /* The re-wire that started then still hangs at 2 -> 3 (that dial is lost): half again. */
    smh_hang_link(h, 2, 3, false);
    past_deadline(h, c, 0);
    nobody_evicted(h, 4);
    PT_ASSERT(smh_log_count(h, "p2p phase timed out with 2 of 4 members reported") == 1, "logged");
    /* The next re-wire: only 3 -> 0 hangs, three of four report. */
    past_deadline(h, c, 0);
    straggler_evicted(h, 3, "did not report its p2p links");
    updates(h, 3, pcclSuccess);
    smh_destroy(h);
}
