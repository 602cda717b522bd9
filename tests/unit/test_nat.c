/*
 * test_nat.c — peers that accept no connections (behind NAT; docs/protocol.md §6.4, §6.6,
 * §8.3), through the in-memory harness with real machines: a dial to such a peer never
 * connects (smh_nat_peer: the SYN is dropped). The first phase that dials it fails at 3/4 of
 * its deadline with the link reported; the next one has the NAT'd peer dial both of its links;
 * all-reduces are exact. A NAT'd peer holding the only up-to-date shared state dials its
 * receiver and offers it (STATE_OFFER), also in an authenticated run; the optimizer measures
 * its links from it.
 */
#include <string.h>

#include "ccoip_auth.h"
#include "ccoip_master.h"
#include "ptest.h"
#include "sm_harness.h"

#define MS 1000000ull

static smh *nat_harness(bool auth)
{
    ccoip_master_config mc;
    ccoip_master_config_default(&mc);
    mc.vote_timeout_ms = 4000;
    ccoip_auth_config a;
    memset(&a, 0, sizeof(a));
    a.mac = ccoip_auth_standin_mac;
    memset(a.run_key, 7, sizeof(a.run_key));
    memset(a.secret, 0x10, sizeof(a.secret));
    if (auth) mc.auth = a;
    smh *h = smh_create(&mc, NULL);
    if (auth) {
        memset(a.secret, 0x20, sizeof(a.secret));
        smh_set_peer_auth(h, &a);
    }
    return h;
}

/* Peer 0 connects alone; peers 1 .. n-1 join; peer 0 updates until they are admitted. Returns the
 * number of updates that failed before (each a p2p phase that found an unreachable link). */
static uint32_t form(smh *h, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        smh_add_peer(h, 0);
    pcclResult_t r = pcclInternalError;
    const uint64_t c0 = smh_submit(h, 0, CCOIP_CMD_CONNECT);
    smh_run(h);
    PT_ASSERT(smh_done(h, 0, c0, &r) && r == pcclSuccess, "peer 0 admitted alone (r=%d)", (int)r);
    uint64_t c[4] = {0};
    for (uint32_t i = 1; i < n; i++)
        c[i] = smh_submit(h, i, CCOIP_CMD_CONNECT);
    smh_run(h);
    uint32_t failed = 0;
    for (uint32_t attempt = 0; attempt < 4; attempt++) {
        const uint64_t u = smh_submit(h, 0, CCOIP_CMD_UPDATE_TOPOLOGY);
        smh_run(h);
        if (!smh_done(h, 0, u, &r)) smh_advance(h, 3500u * MS); /* past 3/4 of 4 s */
        PT_ASSERT(smh_done(h, 0, u, &r), "update answered (attempt %u)", attempt);
        if (r == pcclSuccess) break;
        PT_ASSERT(r == pcclUpdateTopologyFailed, "a failed phase (r=%d)", (int)r);
        failed++;
    }
    PT_ASSERT(r == pcclSuccess, "the group formed");
    for (uint32_t i = 1; i < n; i++) {
        PT_ASSERT(smh_done(h, i, c[i], &r) && r == pcclSuccess, "peer %u admitted (r=%d)", i,
                  (int)r);
    }
    return failed;
}

static void nobody_evicted(smh *h, uint32_t n)
{
    PT_ASSERT(ccoip_master_num_accepted(smh_master(h)) == n, "%u accepted (%u)", n,
              ccoip_master_num_accepted(smh_master(h)));
    for (uint32_t i = 0; i < n; i++)
        PT_ASSERT(!ccoip_peer_is_failed(smh_peer(h, i)), "peer %u not evicted", i);
}

/* Peer 1 (id 2) is behind NAT: the first admit dials 1 -> 2 and fails at 3/4 of the deadline
 * (3 s, before the phase's 4 s), with the link reported; the retry has peer 1 dial its
 * predecessor; exact all-reduces; a later re-wire (peer 2 leaves) needs no failed phase. */
PTEST(nat, nat_peer_joins_its_links_dialled_from_it)
{
    smh *h = nat_harness(false);
    smh_nat_peer(h, 1);
    PT_ASSERT(form(h, 3) == 1, "exactly one failed phase");
    PT_ASSERT(smh_log_count(h, "peer 1: dial to 2 not connected by 3/4 of the phase deadline") == 1,
              "peer 0 gave up its dial at 3/4 of the deadline");
    PT_ASSERT(smh_log_count(h, "master: peer 1 cannot reach peer 2") == 1, "the master learnt it");
    nobody_evicted(h, 3);
    PT_ASSERT(smh_reduce_exact(h, 3, 3), "exact all-reduce of 3 with a peer behind NAT");
    smh_kill_peer(h, 2);
    smh_run(h);
    uint64_t u[2];
    for (uint32_t i = 0; i < 2; i++)
        u[i] = smh_submit(h, i, CCOIP_CMD_UPDATE_TOPOLOGY);
    smh_run(h);
    for (uint32_t i = 0; i < 2; i++) {
        pcclResult_t r = pcclInternalError;
        PT_ASSERT(smh_done(h, i, u[i], &r) && r == pcclSuccess,
                  "peer %u: the re-wired pair updates (r=%d)", i, (int)r);
    }
    PT_ASSERT(smh_log_count(h, "cannot reach") == 2, "no dial to the NAT'd peer again (%u)",
              smh_log_count(h, "cannot reach"));
    PT_ASSERT(smh_reduce_exact(h, 2, 3), "exact all-reduce of the pair");
    smh_destroy(h);
}

/* Two peers behind NAT among four (1 and 3): the ring puts each between reachable ones and
 * every link is dialled from its reachable end; the optimizer does not probe them (their links
 * are measured from them) and installs a ring it can wire. */
PTEST(nat, two_nat_peers_ring_and_optimize)
{
    smh *h = nat_harness(false);
    smh_nat_peer(h, 1);
    smh_nat_peer(h, 3);
    form(h, 4);
    nobody_evicted(h, 4);
    PT_ASSERT(smh_reduce_exact(h, 4, 3), "exact all-reduce of 4");
    const uint32_t probes = smh_probe_count(h);
    uint64_t c[4];
    for (uint32_t i = 0; i < 4; i++)
        c[i] = smh_submit(h, i, CCOIP_CMD_OPTIMIZE_TOPOLOGY);
    smh_run(h);
    for (uint32_t i = 0; i < 4; i++) {
        pcclResult_t r = pcclInternalError;
        PT_ASSERT(smh_done(h, i, c[i], &r) && r == pcclSuccess, "optimize ok on %u (r=%d)", i,
                  (int)r);
    }
    /* 12 directed links, 6 into a NAT'd peer: those are not probed. */
    PT_ASSERT(smh_probe_count(h) - probes == 6, "6 probes (%u)", smh_probe_count(h) - probes);
    uint64_t ring[4];
    PT_ASSERT(ccoip_master_ring(smh_master(h), 0, ring, 4) == 4, "ring of 4");
    for (uint32_t k = 0; k < 4; k++) {
        const bool nat_k = ring[k] == 2 || ring[k] == 4,
                   nat_next = ring[(k + 1) % 4] == 2 || ring[(k + 1) % 4] == 4;
        PT_ASSERT(!(nat_k && nat_next), "no two NAT'd peers adjacent");
    }
    PT_ASSERT(smh_reduce_exact(h, 4, 3), "exact all-reduce on the optimized ring");
    smh_destroy(h);
}

/* Peer 0 (behind NAT) holds the only up-to-date state: its receiver cannot dial it, so it dials
 * the receiver and offers (§8.3); the receiver gets the content exactly. */
static void distributor_offers(bool auth)
{
    smh *h = nat_harness(auth);
    smh_nat_peer(h, 0);
    form(h, 2);
    float w0[4] = {1.5f, -2.0f, 3.25f, 8.0f}, w1[4] = {0};
    const uint64_t s0 = smh_sync_floats(h, 0, "w", w0, 4, 1);
    const uint64_t s1 = smh_sync_floats(h, 1, "w", w1, 4, 0);
    smh_run(h);
    pcclResult_t r0 = pcclInternalError, r1 = pcclInternalError;
    PT_ASSERT(smh_done(h, 0, s0, &r0) && r0 == pcclSuccess, "distributor's sync ok (r=%d)",
              (int)r0);
    PT_ASSERT(smh_done(h, 1, s1, &r1) && r1 == pcclSuccess, "receiver's sync ok (r=%d)", (int)r1);
    PT_ASSERT(memcmp(w0, w1, sizeof w0) == 0, "the receiver holds the distributor's content");
    uint64_t rx = 0, tx = 0;
    uint64_t rev = 0;
    PT_ASSERT(smh_sync_info(h, 1, s1, &rx, &tx, &rev) && rx == sizeof w0 && rev == 1,
              "rx %llu bytes", (unsigned long long)rx);
    PT_ASSERT(smh_log_count(h, "peer 1: dialling receiver 2 to offer") == 1, "offered");
    nobody_evicted(h, 2);
    smh_destroy(h);
}

PTEST(nat, nat_distributor_dials_and_offers)
{
    distributor_offers(false);
}

PTEST(nat, nat_distributor_offers_authenticated)
{
    distributor_offers(true);
}

/* Two peers that both accept no connections (docs/protocol.md §8.6): the direct dial fails, the
 * other end's dial fails, then the master plans the link through its relay: both ends dial the
 * relay, join, the master splices them, and the link's own HELLO runs end to end. Exact all-reduces
 * over it; in an authenticated run too (the joins prove the link key over the master's challenge,
 * the HELLO the peers' own). Without the relay the master evicts one of them. */
static void two_nat_peers(bool auth, bool relay)
{
    smh *h = nat_harness(auth);
    if (relay) smh_enable_relay(h);
    smh_nat_peer(h, 0);
    smh_nat_peer(h, 1);
    if (!relay) {
        for (uint32_t i = 0; i < 2; i++)
            smh_add_peer(h, 0);
        const uint64_t c0 = smh_submit(h, 0, CCOIP_CMD_CONNECT);
        smh_run(h);
        const uint64_t c1 = smh_submit(h, 1, CCOIP_CMD_CONNECT);
        smh_run(h);
        for (uint32_t attempt = 0; attempt < 4; attempt++) {
            const uint64_t u = smh_submit(h, 0, CCOIP_CMD_UPDATE_TOPOLOGY);
            smh_run(h);
            if (!smh_done(h, 0, u, NULL)) smh_advance(h, 3500u * MS);
        }
        pcclResult_t r0 = pcclInternalError;
        PT_ASSERT(smh_done(h, 0, c0, &r0), "peer 0 connected");
        PT_ASSERT(smh_log_count(h, "reaches the fewest others") == 1,
                  "no relay: one of the two is evicted");
        (void)c1;
        smh_destroy(h);
        return;
    }
    /* A ring of two: each dials the other in the first phase, both dials fail. */
    PT_ASSERT(form(h, 2) == 1, "one failed phase (both dials)");
    PT_ASSERT(smh_log_count(h, "goes through the master's relay") == 4,
              "both links of both peers relayed (%u)",
              smh_log_count(h, "goes through the master's relay"));
    PT_ASSERT(smh_log_count(h, "master: relaying link") >= 2, "both links spliced (%u)",
              smh_log_count(h, "master: relaying link"));
    nobody_evicted(h, 2);
    PT_ASSERT(smh_reduce_exact(h, 2, 3), "exact all-reduce through the relay");
    PT_ASSERT(smh_reduce_exact(h, 2, 4), "and again");
    smh_destroy(h);
}

PTEST(nat, two_nat_peers_linked_through_the_relay)
{
    two_nat_peers(false, true);
}

PTEST(nat, two_nat_peers_relay_authenticated)
{
    two_nat_peers(true, true);
}

PTEST(nat, two_nat_peers_without_relay_one_is_evicted)
{
    two_nat_peers(false, false);
}
