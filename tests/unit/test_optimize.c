/*
 * test_optimize.c — topology optimization (core/master_optimize.c,
 * core/peer_optimize.c) through the harness: the master asks only for
 * unmeasured links, solves the ring as an ATSP and installs it as a new
 * epoch (the peers re-wire and reduce on it); a failed probe fails the call
 * everywhere with pcclTopologyOptimizationFailed and the retry re-measures
 * only that link.
 */
#include <string.h>

#include "ccoip_master.h"
#include "ccoip_peer.h"
#include "ptest.h"
#include "sm_harness.h"

static smh *opt_world(uint32_t n)
{
    ccoip_master_config mc;
    ccoip_master_config_default(&mc);
    smh *h = smh_create(&mc, NULL);
    if (!smh_form_ring(h, n, 0)) {
        smh_destroy(h);
        return NULL;
    }
    return h;
}

static void opt_all(smh *h, uint32_t n, uint64_t *cmd)
{
    for (uint32_t i = 0; i < n; i++)
        cmd[i] = smh_submit(h, i, CCOIP_CMD_OPTIMIZE_TOPOLOGY);
    smh_run(h);
}

PTEST(optimize, cheapest_ring_installed_and_cached)
{
    smh *h = opt_world(4);
    PT_ASSERT(h != NULL, "ring of 4");
    uint64_t ring[8];
    PT_ASSERT(ccoip_master_ring(smh_master(h), 0, ring, 8) == 4 && ring[1] == 2,
              "sorted ring first");
    /* Cheap directed ring 0 -> 2 -> 1 -> 3 -> 0 (peer ids 1 3 2 4); everything else slow. */
    for (uint32_t i = 0; i < 4; i++) {
        for (uint32_t j = 0; j < 4; j++)
            smh_set_link_cost(h, i, j, 5000);
    }
    smh_set_link_cost(h, 0, 2, 10);
    smh_set_link_cost(h, 2, 1, 10);
    smh_set_link_cost(h, 1, 3, 10);
    smh_set_link_cost(h, 3, 0, 10);
    uint64_t epoch0 = ccoip_master_epoch(smh_master(h));
    uint64_t cmd[4];
    opt_all(h, 4, cmd);
    for (uint32_t i = 0; i < 4; i++) {
        pcclResult_t r = pcclInternalError;
        PT_ASSERT(smh_done(h, i, cmd[i], &r) && r == pcclSuccess, "peer %u optimized (r=%d)", i,
                  (int)r);
        PT_ASSERT(smh_notify_count(h, i, cmd[i]) == 1, "one NOTIFY");
        PT_ASSERT(ccoip_peer_epoch(smh_peer(h, i)) == epoch0 + 1u, "peer %u on the new epoch", i);
    }
    PT_ASSERT(smh_probe_count(h) == 12, "every directed link probed once (%u)", smh_probe_count(h));
    uint32_t n = ccoip_master_ring(smh_master(h), 0, ring, 8);
    PT_ASSERT(n == 4 && ring[0] == 1 && ring[1] == 3 && ring[2] == 2 && ring[3] == 4,
              "optimized ring 1 3 2 4 (got %llu %llu %llu %llu)", (unsigned long long)ring[0],
              (unsigned long long)ring[1], (unsigned long long)ring[2],
              (unsigned long long)ring[3]);
    PT_ASSERT(ccoip_master_num_accepted(smh_master(h)) == 4, "nobody lost");
    PT_ASSERT(smh_reduce_exact(h, 4, 3), "all-reduce on the optimized ring");
    /* Again: everything is cached, no probe runs, the ring stays. */
    opt_all(h, 4, cmd);
    for (uint32_t i = 0; i < 4; i++) {
        pcclResult_t r = pcclInternalError;
        PT_ASSERT(smh_done(h, i, cmd[i], &r) && r == pcclSuccess, "second optimize ok (r=%d)",
                  (int)r);
    }
    PT_ASSERT(smh_probe_count(h) == 12, "cached: no new probe (%u)", smh_probe_count(h));
    PT_ASSERT(ccoip_master_ring(smh_master(h), 0, ring, 8) == 4 && ring[1] == 3, "ring kept");
    PT_ASSERT(smh_step_errors(h) == 0, "no step errors");
    smh_destroy(h);
}

PTEST(optimize, failed_probe_fails_everywhere_then_retry)
{
    smh *h = opt_world(3);
    PT_ASSERT(h != NULL, "ring of 3");
    smh_fail_probe(h, 1, 2, true);
    uint64_t epoch0 = ccoip_master_epoch(smh_master(h));
    uint64_t cmd[3];
    opt_all(h, 3, cmd);
    for (uint32_t i = 0; i < 3; i++) {
        pcclResult_t r = pcclInternalError;
        PT_ASSERT(smh_done(h, i, cmd[i], &r) && r == pcclTopologyOptimizationFailed,
                  "peer %u: pcclTopologyOptimizationFailed (r=%d)", i, (int)r);
    }
    PT_ASSERT(ccoip_master_epoch(smh_master(h)) == epoch0, "no re-wire");
    PT_ASSERT(smh_probe_count(h) == 6, "six probes (%u)", smh_probe_count(h));
    PT_ASSERT(smh_reduce_exact(h, 3, 3), "the old ring still works");
    smh_fail_probe(h, 1, 2, false);
    opt_all(h, 3, cmd);
    for (uint32_t i = 0; i < 3; i++) {
        pcclResult_t r = pcclInternalError;
        PT_ASSERT(smh_done(h, i, cmd[i], &r) && r == pcclSuccess, "retry ok (r=%d)", (int)r);
    }
    /* A target that could not be dialled likely accepts no connections (docs/protocol.md
     * §6.6): the retry does not probe it again but takes the reverse link's measurement. */
    PT_ASSERT(smh_probe_count(h) == 6, "the failed link not probed again (%u)", smh_probe_count(h));
    PT_ASSERT(ccoip_master_epoch(smh_master(h)) == epoch0 + 1u, "new epoch");
    PT_ASSERT(smh_reduce_exact(h, 3, 3), "all-reduce after the optimization");
    smh_destroy(h);
}

PTEST(optimize, failed_rewire_fails_then_retry_avoids_the_link)
{
    smh *h = opt_world(4);
    PT_ASSERT(h != NULL, "ring of 4");
    for (uint32_t i = 0; i < 4; i++) {
        for (uint32_t j = 0; j < 4; j++)
            smh_set_link_cost(h, i, j, 5000);
    }
    smh_set_link_cost(h, 0, 2, 10);
    smh_set_link_cost(h, 2, 1, 10);
    smh_set_link_cost(h, 1, 3, 10);
    smh_set_link_cost(h, 3, 0, 10);
    /* The probe 0 -> 2 works, but a p2p connection 0 -> 2 cannot be made. */
    smh_block_link(h, 0, 2);
    uint64_t epoch0 = ccoip_master_epoch(smh_master(h));
    uint64_t cmd[4];
    opt_all(h, 4, cmd);
    for (uint32_t i = 0; i < 4; i++) {
        pcclResult_t r = pcclInternalError;
        PT_ASSERT(smh_done(h, i, cmd[i], &r) && r == pcclTopologyOptimizationFailed,
                  "peer %u: re-wiring failed (r=%d)", i, (int)r);
    }
    PT_ASSERT(ccoip_master_num_accepted(smh_master(h)) == 4, "nobody evicted");
    PT_ASSERT(ccoip_master_epoch(smh_master(h)) == epoch0 + 2u,
              "optimized epoch, then an ordinary re-wire (%llu -> %llu)",
              (unsigned long long)epoch0, (unsigned long long)ccoip_master_epoch(smh_master(h)));
    PT_ASSERT(smh_reduce_exact(h, 4, 3), "the re-wired ring works");
    opt_all(h, 4, cmd);
    for (uint32_t i = 0; i < 4; i++) {
        pcclResult_t r = pcclInternalError;
        PT_ASSERT(smh_done(h, i, cmd[i], &r) && r == pcclSuccess, "retry ok (r=%d)", (int)r);
    }
    /* The retry installs the optimum again: 1 -> 3 is now dialled from 3 (docs/protocol.md
     * §6.4), whose connections carry 1's data to 3. */
    uint64_t ring[8];
    PT_ASSERT(ccoip_master_ring(smh_master(h), 0, ring, 8) == 4, "ring of 4");
    bool uses = false;
    for (uint32_t k = 0; k < 4; k++)
        uses = uses || (ring[k] == 1 && ring[(k + 1u) % 4u] == 3);
    PT_ASSERT(uses, "the retry's ring is the optimum 1 3 2 4");
    PT_ASSERT(smh_log_count(h, "cannot reach") == 2, "only the first dial failed (%u)",
              smh_log_count(h, "cannot reach"));
    PT_ASSERT(smh_probe_count(h) == 12, "nothing re-probed (%u)", smh_probe_count(h));
    PT_ASSERT(smh_reduce_exact(h, 4, 3), "all-reduce on the retry's ring");
    smh_destroy(h);
}

PTEST(optimize, pending_peer_not_admitted)
{
    smh *h = opt_world(3);
    PT_ASSERT(h != NULL, "ring of 3");
    uint32_t late = smh_add_peer(h, 0);
    uint64_t c = smh_submit(h, late, CCOIP_CMD_CONNECT);
    smh_run(h);
    PT_ASSERT(ccoip_master_num_pending(smh_master(h)) == 1, "one pending peer");
    uint64_t cmd[3];
    opt_all(h, 3, cmd);
    for (uint32_t i = 0; i < 3; i++) {
        pcclResult_t r = pcclInternalError;
        PT_ASSERT(smh_done(h, i, cmd[i], &r) && r == pcclSuccess, "peer %u optimized (r=%d)", i,
                  (int)r);
    }
    pcclResult_t r;
    PT_ASSERT(!smh_done(h, late, c, &r), "the newcomer is still waiting");
    PT_ASSERT(ccoip_master_num_pending(smh_master(h)) == 1 &&
                  ccoip_master_num_accepted(smh_master(h)) == 3,
              "not admitted by the optimization");
    PT_ASSERT(smh_probe_count(h) == 6, "the newcomer is not probed (%u)", smh_probe_count(h));
    smh_destroy(h);
}
