/*
 * test_groups.c — peer groups (DESIGN.md §3): collectives and shared state
 * are scoped to a group, topology votes (update, optimize) span every group,
 * and the membership counts a peer reports (global, group = CURRENT_WORLD_SIZE,
 * number of groups, largest group) follow the master.
 */
#include <string.h>

#include "ccoip_master.h"
#include "ccoip_peer.h"
#include "ptest.h"
#include "sm_harness.h"

/* Peers 0, 1, 2 in group 0; peers 3, 4 in group 7. */
static smh *groups_world(void)
{
    smh *h = smh_create(NULL, NULL);
    uint32_t g[5] = {0, 0, 0, 7, 7};
    for (uint32_t i = 0; i < 5; i++)
        smh_add_peer(h, g[i]);
    uint64_t c[5];
    pcclResult_t r;
    c[0] = smh_submit(h, 0, CCOIP_CMD_CONNECT);
    smh_run(h);
    if (!smh_done(h, 0, c[0], &r) || r != pcclSuccess) return NULL;
    for (uint32_t i = 1; i < 5; i++)
        c[i] = smh_submit(h, i, CCOIP_CMD_CONNECT);
    smh_run(h);
    uint64_t u = smh_submit(h, 0, CCOIP_CMD_UPDATE_TOPOLOGY);
    smh_run(h);
    if (!smh_done(h, 0, u, &r) || r != pcclSuccess) return NULL;
    for (uint32_t i = 1; i < 5; i++) {
        if (!smh_done(h, i, c[i], &r) || r != pcclSuccess) return NULL;
    }
    return h;
}

PTEST(groups, world_sizes_reported)
{
    smh *h = groups_world();
    PT_ASSERT(h != NULL, "two groups formed");
    for (uint32_t i = 0; i < 5; i++) {
        ccoip_world_info wi;
        ccoip_peer_world_info(smh_peer(h, i), &wi);
        uint32_t mine = i < 3 ? 3u : 2u;
        PT_ASSERT(wi.global == 5 && wi.peer_group == mine && wi.num_peer_groups == 2 &&
                      wi.largest_peer_group == 3,
                  "peer %u: global %u group %u groups %u largest %u", i, wi.global, wi.peer_group,
                  wi.num_peer_groups, wi.largest_peer_group);
        PT_ASSERT(ccoip_peer_world_size(smh_peer(h, i)) == mine, "CURRENT_WORLD_SIZE = group");
    }
    uint64_t ring[8];
    PT_ASSERT(ccoip_master_ring(smh_master(h), 7, ring, 8) == 2 && ring[0] == 4 && ring[1] == 5,
              "group 7 has its own ring");
    /* A peer of group 0 leaves: only group 0 re-wires (epochs are per group, docs/core.md
     * §2.2); every group's peers see the new global count at their next topology update. */
    uint64_t l = smh_submit(h, 2, CCOIP_CMD_LEAVE);
    smh_run(h);
    pcclResult_t r;
    PT_ASSERT(smh_done(h, 2, l, &r) && r == pcclSuccess, "left");
    ccoip_world_info wi;
    ccoip_peer_world_info(smh_peer(h, 3), &wi);
    PT_ASSERT(wi.global == 5 && wi.peer_group == 2, "group 7 did not re-wire (global %u)",
              wi.global);
    uint32_t rest[4] = {0, 1, 3, 4};
    uint64_t u[4];
    for (uint32_t i = 0; i < 4; i++)
        u[i] = smh_submit(h, rest[i], CCOIP_CMD_UPDATE_TOPOLOGY);
    smh_run(h);
    for (uint32_t i = 0; i < 4; i++)
        PT_ASSERT(smh_done(h, rest[i], u[i], &r) && r == pcclSuccess, "updated");
    ccoip_peer_world_info(smh_peer(h, 3), &wi);
    PT_ASSERT(wi.global == 4 && wi.peer_group == 2 && wi.num_peer_groups == 2 &&
                  wi.largest_peer_group == 2,
              "after the leave, group 7 sees global %u group %u largest %u", wi.global,
              wi.peer_group, wi.largest_peer_group);
    ccoip_peer_world_info(smh_peer(h, 0), &wi);
    PT_ASSERT(wi.global == 4 && wi.peer_group == 2, "group 0 shrank to %u", wi.peer_group);
    smh_destroy(h);
}

PTEST(groups, collectives_and_shared_state_per_group)
{
    smh *h = groups_world();
    PT_ASSERT(h != NULL, "two groups formed");
    /* The same tag in both groups: two independent all-reduces. */
    uint32_t x[5][4], y[5][4];
    uint64_t c[5];
    for (uint32_t i = 0; i < 5; i++) {
        for (uint32_t k = 0; k < 4; k++)
            x[i][k] = (i + 1u) * 10u + k;
        ccoip_allreduce_args a;
        memset(&a, 0, sizeof(a));
        a.tag = 1;
        a.count = 4;
        a.dtype = pcclUint32;
        a.op = pcclSum;
        c[i] = smh_allreduce(h, i, &a, x[i], y[i]);
    }
    smh_run(h);
    for (uint32_t i = 0; i < 5; i++) {
        pcclResult_t r;
        uint32_t world = 0;
        PT_ASSERT(smh_done_ex(h, i, c[i], &r, &world, NULL) && r == pcclSuccess,
                  "peer %u reduced (r=%d)", i, (int)r);
        uint32_t want0 = i < 3 ? (10u + 20u + 30u) : (40u + 50u);
        uint32_t n = i < 3 ? 3u : 2u;
        PT_ASSERT(y[i][0] == want0 && y[i][3] == want0 + 3u * n, "peer %u: its group's sum %u", i,
                  y[i][0]);
        PT_ASSERT(world == n, "NOTIFY world size is the group's (%u)", world);
    }
    /* Shared state: different revisions and key sets per group, both fine. */
    float a0[3][4], b1[2][2];
    memset(a0, 0, sizeof(a0));
    memset(b1, 0, sizeof(b1));
    a0[2][1] = 9.0f; /* peer 2 differs: it receives from group 0 only */
    uint64_t s[5];
    for (uint32_t i = 0; i < 5; i++) {
        s[i] = i < 3 ? smh_sync_floats(h, i, "w", a0[i], 4, 5)
                     : smh_sync_floats(h, i, "other", b1[i - 3u], 2, 9);
    }
    smh_run(h);
    for (uint32_t i = 0; i < 5; i++) {
        pcclResult_t r = pcclInternalError;
        uint64_t rx, tx, rv;
        PT_ASSERT(smh_done(h, i, s[i], &r) && r == pcclSuccess, "peer %u synced (r=%d)", i, (int)r);
        PT_ASSERT(smh_sync_info(h, i, s[i], &rx, &tx, &rv) && rv == (i < 3 ? 5u : 9u),
                  "peer %u: its group's revision (%llu)", i, (unsigned long long)rv);
        PT_ASSERT(rx == (i == 2 ? 16u : 0u), "peer %u rx %llu", i, (unsigned long long)rx);
    }
    PT_ASSERT(a0[2][1] == 0.0f, "peer 2 adopted its group's popular content");
    smh_destroy(h);
}

PTEST(groups, topology_votes_span_all_groups)
{
    smh *h = groups_world();
    PT_ASSERT(h != NULL, "two groups formed");
    uint64_t epoch = ccoip_master_epoch(smh_master(h));
    uint64_t u[5];
    for (uint32_t i = 0; i < 3; i++)
        u[i] = smh_submit(h, i, CCOIP_CMD_UPDATE_TOPOLOGY);
    smh_run(h);
    pcclResult_t r;
    PT_ASSERT(!smh_done(h, 0, u[0], &r), "group 0 alone does not complete the vote");
    PT_ASSERT(ccoip_master_epoch(smh_master(h)) == epoch, "no phase yet");
    for (uint32_t i = 3; i < 5; i++)
        u[i] = smh_submit(h, i, CCOIP_CMD_UPDATE_TOPOLOGY);
    smh_run(h);
    for (uint32_t i = 0; i < 5; i++) {
        PT_ASSERT(smh_done(h, i, u[i], &r) && r == pcclSuccess, "peer %u updated (r=%d)", i,
                  (int)r);
    }
    /* Nobody to admit and every ring settled: the vote changes nothing (§6.3), no phase. */
    PT_ASSERT(ccoip_master_epoch(smh_master(h)) == epoch, "no phase: the rings are kept");
    /* Optimization is global too; rings stay per group. */
    uint64_t o[5];
    for (uint32_t i = 0; i < 4; i++)
        o[i] = smh_submit(h, i, CCOIP_CMD_OPTIMIZE_TOPOLOGY);
    smh_run(h);
    PT_ASSERT(smh_probe_count(h) == 0, "no probe before every peer voted");
    o[4] = smh_submit(h, 4, CCOIP_CMD_OPTIMIZE_TOPOLOGY);
    smh_run(h);
    PT_ASSERT(smh_probe_count(h) == 3u * 2u + 2u * 1u, "probes within groups only (%u)",
              smh_probe_count(h));
    for (uint32_t i = 0; i < 5; i++) {
        PT_ASSERT(smh_done(h, i, o[i], &r) && r == pcclSuccess, "peer %u optimized (r=%d)", i,
                  (int)r);
    }
    uint64_t ring[8];
    PT_ASSERT(ccoip_master_ring(smh_master(h), 0, ring, 8) == 3 &&
                  ccoip_master_ring(smh_master(h), 7, ring, 8) == 2,
              "rings per group");
    smh_destroy(h);
}
