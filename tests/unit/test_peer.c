/*
 * test_peer.c — the peer state machine (core/peer*.c) driving the ring
 * all-reduce, driven through the in-memory harness with a real master:
 * exact results for N = 1..4, count 0, AVG, quantization (bit-identical to
 * tests/common/ring_exec.c), concurrent tags, a peer killed mid-ring
 * (survivors get pcclRankConnectionLost, in-place buffers restored bit-exactly,
 * the next all-reduce runs on the shrunken ring), master loss, and the
 * restore canary.
 */
#include <stdlib.h>
#include <string.h>

#include "ccoip_master.h"
#include "ccoip_peer.h"
#include "ccoip_reduce.h"
#include "ccoip_ring.h"
#include "ptest.h"
#include "ring_exec.h"
#include "sm_harness.h"
#include "test_rng.h"

static ccoip_allreduce_args ar(uint64_t tag, uint64_t count, pcclDataType_t dt, pcclRedOp_t op,
                               bool in_place)
{
    ccoip_allreduce_args a;
    memset(&a, 0, sizeof(a));
    a.tag = tag;
    a.count = count;
    a.dtype = dt;
    a.op = op;
    a.quant_algorithm = pcclQuantNone;
    a.in_place = in_place;
    return a;
}

static smh *world_of(uint32_t n)
{
    ccoip_master_config mc;
    ccoip_master_config_default(&mc);
    mc.min_collective_world = 1; /* the one-peer ring is exercised too */
    smh *h = smh_create(&mc, NULL);
    if (!smh_form_ring(h, n, 0)) {
        smh_destroy(h);
        return NULL;
    }
    return h;
}

#define MAXN 4u
#define MAXC 37u

PTEST(peer, allreduce_exact_n1_to_n4)
{
    for (uint32_t n = 1; n <= MAXN; n++) {
        for (uint32_t variant = 0; variant < 3; variant++) {
            smh *h = world_of(n);
            PT_ASSERT(h != NULL, "ring of %u formed", n);
            uint64_t count = variant == 0 ? 0 : (variant == 1 ? 2 : MAXC); /* empty chunks too */
            uint32_t x[MAXN][MAXC], y[MAXN][MAXC];
            uint64_t c[MAXN];
            for (uint32_t i = 0; i < n; i++) {
                for (uint32_t k = 0; k < MAXC; k++) {
                    x[i][k] = 0xfffffff0u + i * 7u + k; /* the sum wraps */
                    y[i][k] = 0xdeadbeefu;
                }
                ccoip_allreduce_args a = ar(11, count, pcclUint32, pcclSum, false);
                c[i] = smh_allreduce(h, i, &a, x[i], y[i]);
            }
            smh_run(h);
            for (uint32_t i = 0; i < n; i++) {
                pcclResult_t r;
                PT_ASSERT(smh_done(h, i, c[i], &r) && r == pcclSuccess,
                          "n=%u count=%llu rank %u ok (r=%d)", n, (unsigned long long)count, i,
                          (int)r);
                PT_ASSERT(smh_notify_count(h, i, c[i]) == 1, "exactly one NOTIFY");
                for (uint32_t k = 0; k < MAXC; k++) {
                    uint32_t want = 0;
                    for (uint32_t j = 0; j < n; j++)
                        want += x[j][k];
                    if (k >= count) want = 0xdeadbeefu;
                    PT_ASSERT(y[i][k] == want, "n=%u rank %u [%u]: %u != %u", n, i, k, y[i][k],
                              want);
                }
                for (uint32_t k = 0; k < MAXC; k++) {
                    PT_ASSERT(x[i][k] == 0xfffffff0u + i * 7u + k, "send buffer untouched");
                }
            }
            PT_ASSERT(smh_step_errors(h) == 0, "no step errors");
            smh_destroy(h);
        }
    }
}

PTEST(peer, allreduce_avg_in_place_int)
{
    smh *h = world_of(3);
    PT_ASSERT(h != NULL, "ring of 3");
    int32_t x[3][8];
    uint64_t c[3];
    for (uint32_t i = 0; i < 3; i++) {
        for (uint32_t k = 0; k < 8; k++)
            x[i][k] = (int32_t)k * (i == 1 ? -5 : 3) - 1;
        ccoip_allreduce_args a = ar(2, 8, pcclInt32, pcclAvg, true);
        c[i] = smh_allreduce(h, i, &a, x[i], x[i]);
    }
    smh_run(h);
    for (uint32_t i = 0; i < 3; i++) {
        pcclResult_t r;
        PT_ASSERT(smh_done(h, i, c[i], &r) && r == pcclSuccess, "ok (r=%d)", (int)r);
        for (uint32_t k = 0; k < 8; k++) {
            int32_t sum = ((int32_t)k * 3 - 1) * 2 + ((int32_t)k * -5 - 1);
            PT_ASSERT(x[i][k] == sum / 3, "avg truncates toward zero: rank %u [%u] %d != %d", i, k,
                      x[i][k], sum / 3);
        }
    }
    smh_destroy(h);
}

PTEST(peer, quantized_matches_ring_exec_bit_for_bit)
{
    const uint32_t n = 3;
    const uint64_t count = 29;
    smh *h = world_of(n);
    PT_ASSERT(h != NULL, "ring of 3");
    float x[3][29], y[3][29], ref[3][29];
    test_rng rng;
    test_rng_seed(&rng, 77);
    for (uint32_t i = 0; i < n; i++) {
        for (uint32_t k = 0; k < count; k++) {
            x[i][k] = (float)((double)test_rng_below(&rng, 20001) / 1000.0 - 10.0);
            ref[i][k] = x[i][k];
        }
    }
    void *bufs[3] = {ref[0], ref[1], ref[2]};
    PT_ASSERT(ring_exec_allreduce(bufs, n, count, pcclFloat, pcclAvg, pcclQuantMinMax, pcclUint8,
                                  NULL, NULL) == pcclSuccess,
              "reference ran");
    uint64_t c[3];
    for (uint32_t i = 0; i < n; i++) {
        ccoip_allreduce_args a = ar(4, count, pcclFloat, pcclAvg, false);
        a.quant_algorithm = pcclQuantMinMax;
        a.quant_dtype = pcclUint8;
        c[i] = smh_allreduce(h, i, &a, x[i], y[i]);
    }
    smh_run(h);
    for (uint32_t i = 0; i < n; i++) {
        pcclResult_t r;
        PT_ASSERT(smh_done(h, i, c[i], &r) && r == pcclSuccess, "ok (r=%d)", (int)r);
        PT_ASSERT(memcmp(y[i], ref[i], sizeof(y[i])) == 0, "rank %u equals ring_exec bit for bit",
                  i);
        PT_ASSERT(memcmp(y[i], y[0], sizeof(y[i])) == 0, "rank %u bit-identical to rank 0", i);
    }
    smh_destroy(h);
}

PTEST(peer, concurrent_tags)
{
    smh *h = world_of(3);
    PT_ASSERT(h != NULL, "ring of 3");
    uint64_t xa[3][10], ya[3][10];
    uint16_t xb[3][7], yb[3][7];
    uint64_t ca[3], cb[3];
    for (uint32_t i = 0; i < 3; i++) {
        for (uint32_t k = 0; k < 10; k++)
            xa[i][k] = (uint64_t)(i + 1) * 1000u + k;
        for (uint32_t k = 0; k < 7; k++)
            xb[i][k] = (uint16_t)(i * 3u + k);
        ccoip_allreduce_args a = ar(100, 10, pcclUint64, pcclSum, false);
        ccoip_allreduce_args b = ar(200, 7, pcclUint16, pcclMax, false);
        /* Different submission order per peer. */
        if (i % 2 == 0) {
            ca[i] = smh_allreduce(h, i, &a, xa[i], ya[i]);
            cb[i] = smh_allreduce(h, i, &b, xb[i], yb[i]);
        } else {
            cb[i] = smh_allreduce(h, i, &b, xb[i], yb[i]);
            ca[i] = smh_allreduce(h, i, &a, xa[i], ya[i]);
        }
    }
    smh_run(h);
    for (uint32_t i = 0; i < 3; i++) {
        pcclResult_t r1, r2;
        PT_ASSERT(smh_done(h, i, ca[i], &r1) && r1 == pcclSuccess, "tag 100 ok (r=%d)", (int)r1);
        PT_ASSERT(smh_done(h, i, cb[i], &r2) && r2 == pcclSuccess, "tag 200 ok (r=%d)", (int)r2);
        for (uint32_t k = 0; k < 10; k++) {
            PT_ASSERT(ya[i][k] == 6000u + 3u * k, "tag 100 exact [%u]", k);
        }
        for (uint32_t k = 0; k < 7; k++)
            PT_ASSERT(yb[i][k] == 6u + k, "tag 200 exact [%u]", k);
    }
    smh_destroy(h);
}

static void kill_mid_ring(bool canary)
{
    ccoip_master_config mc;
    ccoip_master_config_default(&mc);
    ccoip_peer_config pc;
    ccoip_peer_config_default(&pc);
    pc.canary_skip_restore = canary;
    smh *h = smh_create(&mc, &pc);
    PT_ASSERT(smh_form_ring(h, 4, 0), "ring of 4");
    int64_t x[4][13], orig[4][13];
    uint64_t c[4];
    for (uint32_t i = 0; i < 4; i++) {
        for (uint32_t k = 0; k < 13; k++)
            x[i][k] = orig[i][k] = (int64_t)(i * 1000u + k) - 500;
    }
    smh_kill_on_ring_send(h, 3, 3); /* dies in the middle of the reduce-scatter */
    for (uint32_t i = 0; i < 4; i++) {
        ccoip_allreduce_args a = ar(8, 13, pcclInt64, pcclSum, true);
        c[i] = smh_allreduce(h, i, &a, x[i], x[i]);
    }
    smh_run(h);
    uint32_t restored = 0;
    for (uint32_t i = 0; i < 3; i++) {
        pcclResult_t r;
        uint32_t world;
        PT_ASSERT(smh_done_ex(h, i, c[i], &r, &world, NULL) && r == pcclRankConnectionLost,
                  "survivor %u gets pcclRankConnectionLost (r=%d)", i, (int)r);
        PT_ASSERT(smh_notify_count(h, i, c[i]) == 1, "exactly one NOTIFY on %u", i);
        if (memcmp(x[i], orig[i], sizeof(x[i])) == 0) restored++;
    }
    if (canary) {
        PT_ASSERT(restored < 3, "with the canary some in-place buffer stays modified");
        smh_destroy(h);
        return;
    }
    PT_ASSERT(restored == 3, "in-place buffers restored bit-exactly (%u of 3)", restored);
    PT_ASSERT(ccoip_master_num_accepted(smh_master(h)) == 3, "three accepted");
    for (uint32_t i = 0; i < 3; i++) {
        PT_ASSERT(ccoip_peer_world_size(smh_peer(h, i)) == 3, "peer %u sees world 3", i);
        ccoip_allreduce_args a = ar(8, 13, pcclInt64, pcclSum, true);
        c[i] = smh_allreduce(h, i, &a, x[i], x[i]);
    }
    smh_run(h);
    for (uint32_t i = 0; i < 3; i++) {
        pcclResult_t r;
        PT_ASSERT(smh_done(h, i, c[i], &r) && r == pcclSuccess, "retry ok on %u (r=%d)", i, (int)r);
        for (uint32_t k = 0; k < 13; k++) {
            int64_t want = orig[0][k] + orig[1][k] + orig[2][k];
            PT_ASSERT(x[i][k] == want, "shrunken ring exact on %u[%u]", i, k);
        }
    }
    PT_ASSERT(smh_step_errors(h) == 0, "no step errors");
    smh_destroy(h);
}

PTEST(peer, peer_killed_mid_ring_restores_and_shrinks)
{
    kill_mid_ring(false);
}

PTEST(peer, canary_skip_restore_is_observable)
{
    kill_mid_ring(true);
}

PTEST(peer, master_loss_fails_calls)
{
    smh *h = world_of(3);
    PT_ASSERT(h != NULL, "ring of 3");
    int32_t x[3][4] = {{1, 2, 3, 4}, {5, 6, 7, 8}, {9, 10, 11, 12}}, y[4];
    /* Only peer 0 initiates: its call waits for the others when the master dies. */
    ccoip_allreduce_args a = ar(1, 4, pcclInt32, pcclSum, false);
    uint64_t c = smh_allreduce(h, 0, &a, x[0], y);
    smh_run(h);
    smh_kill_master(h);
    smh_run(h);
    pcclResult_t r;
    PT_ASSERT(smh_done(h, 0, c, &r) && r == pcclMasterConnectionFailed,
              "pcclMasterConnectionFailed (r=%d)", (int)r);
    uint64_t u = smh_submit(h, 1, CCOIP_CMD_UPDATE_TOPOLOGY);
    smh_run(h);
    PT_ASSERT(smh_done(h, 1, u, &r) && r == pcclMasterConnectionFailed,
              "later calls fail too (r=%d)", (int)r);
    for (uint32_t i = 0; i < 3; i++) {
        PT_ASSERT(ccoip_peer_rank(smh_peer(h, i)) == -1 && ccoip_peer_epoch(smh_peer(h, i)) > 0,
                  "peer %u: no rank without the master (PCCL_ATTRIBUTE_RANK -1), epoch kept", i);
    }
    smh_destroy(h);
}

PTEST(peer, silent_master_detected)
{
    smh *h = world_of(2);
    PT_ASSERT(h != NULL, "ring of 2");
    uint64_t q = smh_submit(h, 0, CCOIP_CMD_ARE_PEERS_PENDING);
    smh_run(h);
    smh_freeze_master(h);
    smh_advance(h, 1900u * 1000000u);
    PT_ASSERT(!smh_done(h, 0, q, NULL), "still waiting at 1.9 s");
    smh_advance(h, 300u * 1000000u);
    pcclResult_t r;
    PT_ASSERT(smh_done(h, 0, q, &r) && r == pcclMasterConnectionFailed,
              "pcclMasterConnectionFailed after evict_ms (r=%d)", (int)r);
    PT_ASSERT(ccoip_peer_is_failed(smh_peer(h, 1)), "peer 1 failed too");
    smh_destroy(h);
}

PTEST(peer, invalid_arguments_rejected_locally)
{
    smh *h = world_of(2);
    PT_ASSERT(h != NULL, "ring of 2");
    int32_t x[2], y[2];
    ccoip_allreduce_args a = ar(1, 2, (pcclDataType_t)99, pcclSum, false);
    uint64_t c = smh_allreduce(h, 0, &a, x, y);
    smh_run(h);
    pcclResult_t r;
    PT_ASSERT(smh_done(h, 0, c, &r) && r == pcclInvalidArgument, "bad dtype (r=%d)", (int)r);
    a = ar(1, 2, pcclInt32, pcclSum, false);
    a.quant_algorithm = pcclQuantMinMax; /* integers cannot be quantized */
    a.quant_dtype = pcclUint8;
    c = smh_allreduce(h, 0, &a, x, y);
    smh_run(h);
    PT_ASSERT(smh_done(h, 0, c, &r) && r == pcclInvalidArgument, "bad quantization (r=%d)", (int)r);
    smh_destroy(h);
}

/* A quantized all-reduce over non-finite data (a NaN in the input, or a PROD
 * overflowing to inf mid-ring) cannot be quantized: every member gets
 * pcclInvalidArgument (not the retryable pcclRankConnectionLost), in-place
 * buffers are restored bit-exactly, and a finite retry succeeds. */
PTEST(peer, quantized_non_finite_is_invalid_argument_everywhere)
{
    const uint32_t n = 3;
    const uint64_t count = 12;
    for (uint32_t variant = 0; variant < 2; variant++) {
        smh *h = world_of(n);
        PT_ASSERT(h != NULL, "ring of 3");
        float x[3][12], orig[3][12];
        for (uint32_t i = 0; i < n; i++) {
            for (uint32_t k = 0; k < count; k++) {
                x[i][k] = variant == 0 ? (float)(i + k) : 1e30f;
            }
        }
        if (variant == 0) {
            float zero = 0.0f;
            x[1][5] = zero / zero; /* NaN in rank 1's chunk data */
        }
        memcpy(orig, x, sizeof(x));
        uint64_t c[3];
        for (uint32_t i = 0; i < n; i++) {
            ccoip_allreduce_args a =
                ar(9, count, pcclFloat, variant == 0 ? pcclSum : pcclProd, true);
            a.quant_algorithm = pcclQuantMinMax;
            a.quant_dtype = pcclUint8;
            c[i] = smh_allreduce(h, i, &a, x[i], x[i]);
        }
        smh_run(h);
        for (uint32_t i = 0; i < n; i++) {
            pcclResult_t r = pcclSuccess;
            PT_ASSERT(smh_done(h, i, c[i], &r) && r == pcclInvalidArgument,
                      "variant %u rank %u: pcclInvalidArgument (r=%d)", variant, i, (int)r);
            PT_ASSERT(smh_notify_count(h, i, c[i]) == 1, "exactly one NOTIFY");
            PT_ASSERT(memcmp(x[i], orig[i], sizeof(x[i])) == 0,
                      "variant %u rank %u: in-place buffer restored", variant, i);
        }
        PT_ASSERT(smh_log_count(h, "non-finite") >= 1, "the cause is logged");
        /* A retry with finite data works on the re-wired ring. */
        for (uint32_t i = 0; i < n; i++) {
            for (uint32_t k = 0; k < count; k++)
                x[i][k] = 1.0f;
            ccoip_allreduce_args a = ar(9, count, pcclFloat, pcclSum, true);
            a.quant_algorithm = pcclQuantMinMax;
            a.quant_dtype = pcclUint8;
            c[i] = smh_allreduce(h, i, &a, x[i], x[i]);
        }
        smh_run(h);
        for (uint32_t i = 0; i < n; i++) {
            pcclResult_t r = pcclInternalError;
            PT_ASSERT(smh_done(h, i, c[i], &r) && r == pcclSuccess, "retry rank %u ok (r=%d)", i,
                      (int)r);
            PT_ASSERT(x[i][0] == 3.0f && x[i][11] == 3.0f, "retry rank %u sums to 3", i);
        }
        PT_ASSERT(smh_step_errors(h) == 0, "no step errors");
        smh_destroy(h);
    }
}

/* ------------------------------------------------------------------------ */
/* Connection pools (docs/protocol.md §2, §8.1; issue 6/7)                   */
/* ------------------------------------------------------------------------ */

/* A ring 0 -> 1 -> ... -> n-1 -> 0 whose peer i has p2p_pool_size pools[i]. */
static smh *world_pools(uint32_t n, const uint32_t *pools)
{
    ccoip_master_config mc;
    ccoip_master_config_default(&mc);
    smh *h = smh_create(&mc, NULL);
    for (uint32_t i = 0; i < n; i++) {
        smh_set_pool(h, pools[i]);
        smh_add_peer(h, 0);
    }
    if (!smh_form_ring(h, n, 0)) {
        smh_destroy(h);
        return NULL;
    }
    return h;
}

#define PT_TAGS 5u
#define PT_CNT  23u

/*
 * ntags concurrent uint32 sums (tag t+1, element k of peer i = (i+1)*(t+1)*1000 + k),
 * peer i submitting them starting at tag (i mod ntags)+1 (orders differ between
 * peers); every one must succeed with the exact sum.
 */
static void pool_concurrent_round(smh *h, uint32_t n, uint32_t ntags)
{
    static uint32_t x[SMH_MAX_PEERS][PT_TAGS][PT_CNT], y[SMH_MAX_PEERS][PT_TAGS][PT_CNT];
    uint64_t c[SMH_MAX_PEERS][PT_TAGS];
    for (uint32_t i = 0; i < n; i++) {
        for (uint32_t s = 0; s < ntags; s++) {
            const uint32_t t = (s + i) % ntags;
            for (uint32_t k = 0; k < PT_CNT; k++) {
                x[i][t][k] = (i + 1u) * (t + 1u) * 1000u + k;
                y[i][t][k] = 0xdeadbeefu;
            }
            ccoip_allreduce_args a = ar(t + 1u, PT_CNT, pcclUint32, pcclSum, false);
            c[i][t] = smh_allreduce(h, i, &a, x[i][t], y[i][t]);
        }
    }
    smh_run(h);
    const uint32_t sum_i = n * (n + 1u) / 2u;
    for (uint32_t i = 0; i < n; i++) {
        for (uint32_t t = 0; t < ntags; t++) {
            pcclResult_t r;
            PT_ASSERT(smh_done(h, i, c[i][t], &r) && r == pcclSuccess,
                      "peer %u tag %u completes (r=%d)", i, t + 1u, (int)r);
            for (uint32_t k = 0; k < PT_CNT; k++) {
                PT_ASSERT(y[i][t][k] == sum_i * (t + 1u) * 1000u + n * k,
                          "peer %u tag %u exact [%u]: %u", i, t + 1u, k, y[i][t][k]);
            }
        }
    }
}

PTEST(peer, pool_spreads_concurrent_ops_over_connections)
{
    const uint32_t pools[3] = {3, 3, 3};
    smh *h = world_pools(3, pools);
    PT_ASSERT(h != NULL, "ring of 3 with pools of 3");
    for (uint32_t i = 0; i < 3; i++) {
        PT_ASSERT(smh_p2p_links(h, i, (i + 1u) % 3u) == 3, "3 connections %u -> %u (got %u)", i,
                  (i + 1u) % 3u, smh_p2p_links(h, i, (i + 1u) % 3u));
        PT_ASSERT(smh_p2p_links(h, (i + 1u) % 3u, i) == 0, "none backwards");
    }
    /* Three ops in three orders: consecutive seqs, so three different connections. */
    pool_concurrent_round(h, 3, 3);
    for (uint32_t i = 0; i < 3; i++) {
        uint64_t tx[3], rx[3];
        for (uint32_t t = 0; t < 3; t++) {
            PT_ASSERT(smh_ring_conns(h, i, t + 1u, &tx[t], &rx[t]), "tag %u ran", t + 1u);
            PT_ASSERT(tx[t] != CCOIP_CONN_NONE && rx[t] != CCOIP_CONN_NONE, "on links");
        }
        PT_ASSERT(tx[0] != tx[1] && tx[1] != tx[2] && tx[0] != tx[2],
                  "peer %u sends the 3 ops on 3 connections", i);
        PT_ASSERT(rx[0] != rx[1] && rx[1] != rx[2] && rx[0] != rx[2],
                  "peer %u receives the 3 ops on 3 connections", i);
    }
    /* More concurrent ops than connections share them (seq mod 3). */
    pool_concurrent_round(h, 3, 5);
    PT_ASSERT(smh_step_errors(h) == 0, "no step errors");
    smh_destroy(h);
}

PTEST(peer, pool_size_is_the_min_of_both_ends)
{
    /* Link i -> i+1 uses min(pool of i, pool of i+1). */
    const uint32_t cases[3][4] = {{1, 3, 2, 0}, {4, 2, 3, 0}, {8, 8, 1, 0}};
    for (uint32_t cs = 0; cs < 3; cs++) {
        smh *h = world_pools(3, cases[cs]);
        PT_ASSERT(h != NULL, "ring of 3, case %u", cs);
        for (uint32_t i = 0; i < 3; i++) {
            const uint32_t j = (i + 1u) % 3u;
            const uint32_t want = cases[cs][i] < cases[cs][j] ? cases[cs][i] : cases[cs][j];
            PT_ASSERT(smh_p2p_links(h, i, j) == want,
                      "case %u: %u -> %u has %u connections (got %u)", cs, i, j, want,
                      smh_p2p_links(h, i, j));
        }
        pool_concurrent_round(h, 3, 4);
        PT_ASSERT(smh_step_errors(h) == 0, "no step errors");
        smh_destroy(h);
    }
}

PTEST(peer, pool_peer_killed_mid_ring_then_rewired)
{
    const uint32_t pools[4] = {2, 2, 2, 2};
    smh *h = world_pools(4, pools);
    PT_ASSERT(h != NULL, "ring of 4 with pools of 2");
    int64_t x[4][2][13], orig[4][2][13];
    uint64_t c[4][2];
    for (uint32_t i = 0; i < 4; i++) {
        for (uint32_t t = 0; t < 2; t++) {
            for (uint32_t k = 0; k < 13; k++)
                x[i][t][k] = orig[i][t][k] = (int64_t)(i * 1000u + t * 100u + k) - 500;
        }
    }
    smh_kill_on_ring_send(h, 3, 3); /* dies in the middle of the reduce-scatter */
    for (uint32_t i = 0; i < 4; i++) {
        for (uint32_t s = 0; s < 2; s++) {
            const uint32_t t = (s + i) % 2u;
            ccoip_allreduce_args a = ar(t + 1u, 13, pcclInt64, pcclSum, true);
            c[i][t] = smh_allreduce(h, i, &a, x[i][t], x[i][t]);
        }
    }
    smh_run(h);
    for (uint32_t i = 0; i < 3; i++) {
        for (uint32_t t = 0; t < 2; t++) {
            pcclResult_t r;
            PT_ASSERT(smh_done(h, i, c[i][t], &r) && r == pcclRankConnectionLost,
                      "survivor %u tag %u: pcclRankConnectionLost (r=%d)", i, t + 1u, (int)r);
            PT_ASSERT(memcmp(x[i][t], orig[i][t], sizeof(x[i][t])) == 0, "restored");
        }
    }
    for (uint32_t i = 0; i < 3; i++) {
        PT_ASSERT(smh_p2p_links(h, i, (i + 1u) % 3u) == 2, "re-wired pool %u -> %u", i,
                  (i + 1u) % 3u);
    }
    pool_concurrent_round(h, 3, 2);
    PT_ASSERT(smh_step_errors(h) == 0, "no step errors");
    smh_destroy(h);
}

/* ------------------------------------------------------------------------ */
/* Striping one large op over the pool (docs/protocol.md §8.2; issue 7)      */
/* ------------------------------------------------------------------------ */

/* Per peer: tag 1 uint32 SUM out of place, tag 2 int32 MAX in place, tag 3 f32 AVG out of
 * place, all of count elements, submitted at once in a peer-dependent order. */
typedef struct st_bufs {
    uint32_t *su, *ru;
    int32_t *xi, *oi;
    float *sf, *rf;
} st_bufs;

static int32_t st_i32(uint32_t i, uint64_t k)
{
    return (int32_t)(((uint32_t)k * 2654435761u + i * 40503u) % 100000u) - 50000;
}

/* Input j (j < n) goes to harness peer ids[j] (ids NULL: peer j). */
static void st_submit(smh *h, const uint32_t *ids, uint32_t n, uint64_t count, st_bufs *b,
                      uint64_t c[][3])
{
    for (uint32_t i = 0; i < n; i++) {
        const uint32_t id = ids != NULL ? ids[i] : i;
        for (uint64_t k = 0; k < count; k++) {
            b[i].su[k] = (i + 1u) * 7u + (uint32_t)(k % 1000u);
            b[i].ru[k] = 0xdeadbeefu;
            b[i].xi[k] = b[i].oi[k] = st_i32(i, k);
            b[i].sf[k] = (float)((i + 1u) * (uint32_t)(k % 64u));
            b[i].rf[k] = -1.0f;
        }
        for (uint32_t s = 0; s < 3; s++) {
            const uint32_t t = (s + i) % 3u;
            ccoip_allreduce_args a;
            if (t == 0) {
                a = ar(1, count, pcclUint32, pcclSum, false);
                c[i][0] = smh_allreduce(h, id, &a, b[i].su, b[i].ru);
            } else if (t == 1) {
                a = ar(2, count, pcclInt32, pcclMax, true);
                c[i][1] = smh_allreduce(h, id, &a, b[i].xi, b[i].xi);
            } else {
                a = ar(3, count, pcclFloat, pcclAvg, false);
                c[i][2] = smh_allreduce(h, id, &a, b[i].sf, b[i].rf);
            }
        }
    }
}

/* Every result exact (f32: bit-identical on every peer and equal to S·(k mod 64) / n). */
static void st_check(uint32_t n, uint64_t count, const st_bufs *b)
{
    const uint32_t sum_i = n * (n + 1u) / 2u;
    for (uint32_t i = 0; i < n; i++) {
        for (uint64_t k = 0; k < count; k++) {
            const uint32_t want_u = 7u * sum_i + n * (uint32_t)(k % 1000u);
            PT_ASSERT(b[i].ru[k] == want_u, "peer %u SUM [%llu] = %u, want %u", i,
                      (unsigned long long)k, b[i].ru[k], want_u);
            int32_t want_i = st_i32(0, k);
            for (uint32_t j = 1; j < n; j++) {
                if (st_i32(j, k) > want_i) want_i = st_i32(j, k);
            }
            PT_ASSERT(b[i].xi[k] == want_i, "peer %u MAX [%llu] = %d, want %d", i,
                      (unsigned long long)k, b[i].xi[k], want_i);
            const float want_f = (float)(sum_i * (uint32_t)(k % 64u)) / (float)n;
            PT_ASSERT(memcmp(&b[i].rf[k], &b[0].rf[k], sizeof(float)) == 0 && b[i].rf[k] == want_f,
                      "peer %u AVG [%llu] = %a, want %a", i, (unsigned long long)k,
                      (double)b[i].rf[k], (double)want_f);
        }
    }
}

static bool st_alloc(st_bufs *b, uint32_t n, uint64_t count)
{
    bool ok = true;
    for (uint32_t i = 0; i < n; i++) {
        b[i].su = malloc((size_t)count * 4u);
        b[i].ru = malloc((size_t)count * 4u);
        b[i].xi = malloc((size_t)count * 4u);
        b[i].oi = malloc((size_t)count * 4u);
        b[i].sf = malloc((size_t)count * 4u);
        b[i].rf = malloc((size_t)count * 4u);
        ok = ok && b[i].su && b[i].ru && b[i].xi && b[i].oi && b[i].sf && b[i].rf;
    }
    return ok;
}

static void st_free(st_bufs *b, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        free(b[i].su);
        free(b[i].ru);
        free(b[i].xi);
        free(b[i].oi);
        free(b[i].sf);
        free(b[i].rf);
    }
}

PTEST(peer, pool_stripes_one_large_op_exactly)
{
    /* Chunks of ~1.6 MB: 3 stripes of at least CCOIP_RING_STRIPE_MIN where the link's pool
     * allows (link i -> i+1 has min(pool i, pool i+1) connections); pool 1: not striped. */
    static const uint32_t pools[5][4] = {{2, 2}, {3, 2, 3}, {4, 4, 4, 4}, {3, 1, 3}, {1, 1}};
    static const uint32_t worlds[5] = {2, 3, 4, 3, 2};
    for (uint32_t cs = 0; cs < 5; cs++) {
        const uint32_t n = worlds[cs];
        const uint64_t count = (uint64_t)n * 400000u + 5u;
        st_bufs b[4];
        memset(b, 0, sizeof b);
        PT_ASSERT(st_alloc(b, n, count), "buffers");
        smh *h = world_pools(n, pools[cs]);
        PT_ASSERT(h != NULL, "ring %u formed", cs);
        uint64_t c[4][3];
        st_submit(h, NULL, n, count, b, c);
        smh_run(h);
        for (uint32_t i = 0; i < n; i++) {
            for (uint32_t t = 0; t < 3; t++) {
                pcclResult_t r;
                PT_ASSERT(smh_done(h, i, c[i][t], &r) && r == pcclSuccess,
                          "case %u peer %u tag %u completes (r=%d)", cs, i, t + 1u, (int)r);
            }
        }
        st_check(n, count, b);
        /* Each op ran over every connection of both pools (2.4 MB per 1.6 MB chunk: the
         * chunk's stripes are min(pool, 3)). */
        for (uint32_t i = 0; i < n; i++) {
            const uint32_t pin = pools[cs][(i + n - 1u) % n], pout = pools[cs][(i + 1u) % n];
            const uint32_t me = pools[cs][i];
            const uint32_t want_tx = me < pout ? me : pout, want_rx = me < pin ? me : pin;
            for (uint32_t t = 1; t <= 3; t++) {
                uint32_t ntx = 0, nrx = 0;
                PT_ASSERT(smh_ring_conn_sets(h, i, t, &ntx, &nrx), "tag %u ran", t);
                PT_ASSERT(ntx == (want_tx < 3u ? want_tx : 3u) &&
                              nrx == (want_rx < 3u ? want_rx : 3u),
                          "case %u peer %u tag %u: sent on %u, received on %u connections "
                          "(want %u, %u)",
                          cs, i, t, ntx, nrx, want_tx, want_rx);
            }
        }
        PT_ASSERT(smh_step_errors(h) == 0, "no step errors");
        smh_destroy(h);
        st_free(b, n);
    }
}

PTEST(peer, pool_striping_changes_no_float_result)
{
    /* Random binary32 inputs (not exactly summable): the striped ring (pools of 3) and the
     * unstriped one (pools of 1) give the same bits on every peer (docs/protocol.md §8.2). */
    const uint32_t n = 3;
    const uint64_t count = (uint64_t)n * 400000u + 5u;
    float *x[3], *y[2][3];
    test_rng r;
    test_rng_seed(&r, 0x5717u);
    for (uint32_t i = 0; i < n; i++) {
        x[i] = malloc((size_t)count * sizeof(float));
        y[0][i] = malloc((size_t)count * sizeof(float));
        y[1][i] = malloc((size_t)count * sizeof(float));
        PT_ASSERT(x[i] != NULL && y[0][i] != NULL && y[1][i] != NULL, "buffers");
        for (uint64_t k = 0; k < count; k++) {
            x[i][k] = (float)((double)(int64_t)(test_rng_next(&r) % 2000001u) / 977.0 - 1000.0);
        }
    }
    static const uint32_t pools[2][3] = {{3, 3, 3}, {1, 1, 1}};
    for (uint32_t v = 0; v < 2; v++) {
        smh *h = world_pools(n, pools[v]);
        PT_ASSERT(h != NULL, "ring with pools of %u", pools[v][0]);
        uint64_t c[3];
        for (uint32_t i = 0; i < n; i++) {
            ccoip_allreduce_args a = ar(7, count, pcclFloat, pcclSum, false);
            c[i] = smh_allreduce(h, i, &a, x[i], y[v][i]);
        }
        smh_run(h);
        for (uint32_t i = 0; i < n; i++) {
            pcclResult_t res;
            PT_ASSERT(smh_done(h, i, c[i], &res) && res == pcclSuccess, "peer %u completes", i);
            uint32_t ntx = 0, nrx = 0;
            PT_ASSERT(smh_ring_conn_sets(h, i, 7, &ntx, &nrx) && ntx == pools[v][0] &&
                          nrx == pools[v][0],
                      "peer %u used %u / %u connections", i, ntx, nrx);
        }
        smh_destroy(h);
    }
    for (uint32_t i = 0; i < n; i++) {
        PT_ASSERT(memcmp(y[0][i], y[1][i], (size_t)count * sizeof(float)) == 0,
                  "peer %u: striped = unstriped bit for bit", i);
        PT_ASSERT(memcmp(y[0][i], y[0][0], (size_t)count * sizeof(float)) == 0, "peers agree");
    }
    for (uint32_t i = 0; i < n; i++) {
        free(x[i]);
        free(y[0][i]);
        free(y[1][i]);
    }
}

PTEST(peer, pool_striped_op_peer_killed_then_rewired)
{
    /* A member dies in the middle of a striped reduce-scatter: every survivor gets
     * pcclRankConnectionLost with its in-place input restored bit for bit, the ring re-wires
     * with full pools and the next striped ops are exact. */
    const uint32_t pools[4] = {2, 2, 2, 2};
    smh *h = world_pools(4, pools);
    PT_ASSERT(h != NULL, "ring of 4 with pools of 2");
    const uint64_t count = 4u * 300000u + 3u;
    st_bufs b[4];
    memset(b, 0, sizeof b);
    PT_ASSERT(st_alloc(b, 4, count), "buffers");
    smh_kill_on_ring_send(h, 2, 3); /* the third RING_SEND: step 1's first stripe */
    uint64_t c[4][3];
    st_submit(h, NULL, 4, count, b, c);
    smh_run(h);
    for (uint32_t i = 0; i < 4; i++) {
        if (i == 2) continue;
        for (uint32_t t = 0; t < 3; t++) {
            pcclResult_t r;
            PT_ASSERT(smh_done(h, i, c[i][t], &r) && r == pcclRankConnectionLost,
                      "survivor %u tag %u: pcclRankConnectionLost (r=%d)", i, t + 1u, (int)r);
        }
        PT_ASSERT(memcmp(b[i].xi, b[i].oi, (size_t)count * 4u) == 0, "survivor %u: input restored",
                  i);
    }
    for (uint32_t i = 0; i < 3; i++) {
        const uint32_t from = i < 2 ? i : 3u, to = i < 1 ? 1u : (i == 1 ? 3u : 0u);
        PT_ASSERT(smh_p2p_links(h, from, to) == 2, "re-wired pool %u -> %u", from, to);
    }
    /* The survivors (harness peers 0, 1, 3) run the three ops again, striped and exact. */
    static const uint32_t live[3] = {0, 1, 3};
    st_bufs s[3];
    memset(s, 0, sizeof s);
    PT_ASSERT(st_alloc(s, 3, count), "buffers");
    uint64_t c2[3][3];
    st_submit(h, live, 3, count, s, c2);
    smh_run(h);
    for (uint32_t j = 0; j < 3; j++) {
        for (uint32_t t = 0; t < 3; t++) {
            pcclResult_t r;
            PT_ASSERT(smh_done(h, live[j], c2[j][t], &r) && r == pcclSuccess,
                      "peer %u tag %u completes after the re-wire (r=%d)", live[j], t + 1u, (int)r);
            uint32_t ntx = 0, nrx = 0;
            PT_ASSERT(smh_ring_conn_sets(h, live[j], t + 1u, &ntx, &nrx) && ntx >= 2u && nrx >= 2u,
                      "peer %u tag %u striped (%u, %u connections)", live[j], t + 1u, ntx, nrx);
        }
    }
    st_check(3, count, s);
    st_free(s, 3);
    PT_ASSERT(smh_step_errors(h) == 0, "no step errors");
    smh_destroy(h);
    st_free(b, 4);
}

PTEST(peer, pool_size_bounds)
{
    ccoip_peer_config pc;
    ccoip_peer_config_default(&pc);
    pc.master_url = "tcp://master";
    ccoip_peer *p = NULL;
    pc.p2p_pool_size = CCOIP_P2P_POOL_MAX;
    PT_ASSERT(ccoip_peer_create(&pc, 1, &p) == pcclSuccess && p != NULL, "pool 8 accepted");
    ccoip_peer_destroy(p);
    p = NULL;
    pc.p2p_pool_size = CCOIP_P2P_POOL_MAX + 1u;
    PT_ASSERT(ccoip_peer_create(&pc, 1, &p) == pcclInvalidArgument && p == NULL, "pool 9 refused");
}

/* Issue 7, docs/protocol.md §6.8.1: in a settled ring every all-reduce starts optimistically (no
 * commence); many back-to-back small ops, alternating in place, are all exact. */
PTEST(peer, optimistic_back_to_back_exact)
{
    smh *h = world_of(3);
    PT_ASSERT(h != NULL, "ring of 3");
    int32_t x[3][64], y[3][64];
    for (uint32_t k = 0; k < 40; k++) {
        const bool in_place = k % 2u == 1u;
        uint64_t c[3];
        for (uint32_t i = 0; i < 3; i++) {
            for (uint32_t j = 0; j < 64; j++)
                x[i][j] = (int32_t)((i + 1u) * (k + 1u) + j);
            ccoip_allreduce_args a = ar(k % 5u, 64, pcclInt32, pcclSum, in_place);
            c[i] = smh_allreduce(h, i, &a, x[i], in_place ? x[i] : y[i]);
        }
        smh_run(h);
        for (uint32_t i = 0; i < 3; i++) {
            pcclResult_t r;
            PT_ASSERT(smh_done(h, i, c[i], &r) && r == pcclSuccess, "op %u on %u (r=%d)", k, i,
                      (int)r);
            const int32_t *out = in_place ? x[i] : y[i];
            for (uint32_t j = 0; j < 64; j++)
                PT_ASSERT(out[j] == (int32_t)(6u * (k + 1u) + 3u * j), "op %u exact", k);
        }
    }
    for (uint32_t i = 0; i < 3; i++) {
        PT_ASSERT(ccoip_peer_optimistic_starts(smh_peer(h, i)) == 40,
                  "peer %u started all 40 optimistically (%llu)", i,
                  (unsigned long long)ccoip_peer_optimistic_starts(smh_peer(h, i)));
    }
    PT_ASSERT(smh_step_errors(h) == 0, "no step errors");
    smh_destroy(h);
}

/* Back-to-back optimistic ops, one peer killed mid-ring: the survivors' op fails retryably with
 * the in-place input restored bit-exactly, every later op is exact on the shrunken ring, and
 * the optimistic start resumes in the new epoch. */
PTEST(peer, optimistic_kill_mid_stream_exact)
{
    smh *h = world_of(4);
    PT_ASSERT(h != NULL, "ring of 4");
    /* Inside its 6th op: the small all-reduce sends 3 frames per op at N = 4, the ring 6. */
    const uint32_t per_op = ccoip_ring_use_gather(29u * 8u, 4, false) ? 3u : 6u;
    smh_kill_on_ring_send(h, 3, per_op * 5u + 2u);
    int64_t x[4][29], orig[4][29];
    uint32_t alive = 4, lost = 0, after = 0;
    for (uint32_t k = 0; k < 30 && after < 10; k++) {
        uint64_t c[4];
        for (uint32_t i = 0; i < alive; i++) {
            for (uint32_t j = 0; j < 29; j++)
                x[i][j] = orig[i][j] = (int64_t)(i + 1u) * 1000003 * (k + 1u) - (int64_t)j;
            ccoip_allreduce_args a = ar(7, 29, pcclInt64, pcclSum, true);
            c[i] = smh_allreduce(h, i, &a, x[i], x[i]);
        }
        smh_run(h);
        if (alive == 4 && k >= 5) alive = 3; /* peer 3 died in op 5 */
        for (uint32_t i = 0; i < alive; i++) {
            pcclResult_t r;
            uint32_t world;
            PT_ASSERT(smh_done_ex(h, i, c[i], &r, &world, NULL), "op %u done on %u", k, i);
            PT_ASSERT(smh_notify_count(h, i, c[i]) == 1, "exactly one NOTIFY");
            if (r == pcclRankConnectionLost) {
                PT_ASSERT(memcmp(x[i], orig[i], sizeof(x[i])) == 0, "op %u restored on %u", k, i);
                if (i == 0) lost++;
                continue;
            }
            PT_ASSERT(r == pcclSuccess, "op %u on %u: r=%d", k, i, (int)r);
            for (uint32_t j = 0; j < 29; j++) {
                int64_t want = 0;
                for (uint32_t m = 0; m < world; m++)
                    want += orig[m][j];
                PT_ASSERT(x[i][j] == want, "op %u exact on %u (world %u)", k, i, world);
            }
            if (i == 0 && world == 3) after++;
        }
    }
    PT_ASSERT(lost >= 1, "the kill was seen (%u)", lost);
    PT_ASSERT(after == 10, "10 exact ops on the shrunken ring (%u)", after);
    PT_ASSERT(ccoip_peer_optimistic_starts(smh_peer(h, 0)) >= 5 + 10,
              "optimistic before and after the re-wire (%llu)",
              (unsigned long long)ccoip_peer_optimistic_starts(smh_peer(h, 0)));
    PT_ASSERT(smh_step_errors(h) == 0, "no step errors");
    smh_destroy(h);
}

/* The small all-reduce (ccoip_ring_use_gather): float SUM and AVG, in place and not, are
 * bit-identical on every member and equal to the inputs reduced in ring (rank) order, computed
 * here with the same kernels; a size above the threshold still runs the ring (checked too). */
PTEST(peer, small_allreduce_rank_order_bit_identical)
{
    for (uint32_t n = 2; n <= 4; n++) {
        smh *h = world_of(n);
        PT_ASSERT(h != NULL, "ring of %u", n);
        uint64_t ring[4];
        PT_ASSERT(ccoip_master_ring(smh_master(h), 0, ring, 4) == n, "ring read");
        uint32_t rank_of[4];
        for (uint32_t i = 0; i < n; i++) {
            for (uint32_t r = 0; r < n; r++) {
                if (ring[r] == ccoip_peer_id(smh_peer(h, i))) rank_of[i] = r;
            }
        }
        test_rng rng;
        test_rng_seed(&rng, 77u + n);
        for (uint32_t v = 0; v < 4; v++) {
            const pcclRedOp_t op = v % 2u == 0 ? pcclSum : pcclAvg;
            const bool in_place = v >= 2u;
            enum { CNT = 1000 };
            static float x[4][CNT], y[4][CNT], in[4][CNT], want[CNT];
            PT_ASSERT(ccoip_ring_use_gather(CNT * 4u, n, false), "4000 bytes take the small path");
            for (uint32_t i = 0; i < n; i++) {
                for (uint32_t j = 0; j < CNT; j++) {
                    x[i][j] = in[i][j] =
                        (float)((int32_t)test_rng_below(&rng, 2000001u) - 1000000) /
                        (float)(1u + test_rng_below(&rng, 997u));
                }
            }
            /* Rank order: the member of rank 0 first. */
            for (uint32_t r = 0; r < n; r++) {
                for (uint32_t i = 0; i < n; i++) {
                    if (rank_of[i] != r) continue;
                    if (r == 0) {
                        memcpy(want, in[i], sizeof want);
                    } else {
                        ccoip_reduce_inplace(op, pcclFloat, (uint8_t *)want, (const uint8_t *)in[i],
                                             CNT);
                    }
                }
            }
            if (op == pcclAvg) ccoip_reduce_finalize_avg(pcclFloat, (uint8_t *)want, CNT, n);
            /* The order matters for these floats: the reverse order gives other bits. */
            static float alt[CNT];
            memcpy(alt, in[n - 1u], sizeof alt);
            for (uint32_t i = n - 1u; i-- > 0;)
                ccoip_reduce_inplace(pcclSum, pcclFloat, (uint8_t *)alt, (const uint8_t *)in[i],
                                     CNT);
            if (op == pcclAvg) ccoip_reduce_finalize_avg(pcclFloat, (uint8_t *)alt, CNT, n);
            /* (Two inputs commute exactly: only from three on does the order show in the bits.) */
            if (n >= 3)
                PT_ASSERT(memcmp(alt, want, sizeof want) != 0, "the data is order-sensitive");
            uint64_t c[4];
            for (uint32_t i = 0; i < n; i++) {
                ccoip_allreduce_args a = ar(3, CNT, pcclFloat, op, in_place);
                c[i] = smh_allreduce(h, i, &a, x[i], in_place ? x[i] : y[i]);
            }
            smh_run(h);
            for (uint32_t i = 0; i < n; i++) {
                pcclResult_t r;
                PT_ASSERT(smh_done(h, i, c[i], &r) && r == pcclSuccess, "n=%u v=%u on %u", n, v, i);
                PT_ASSERT(memcmp(in_place ? x[i] : y[i], want, sizeof want) == 0,
                          "n=%u v=%u: member %u is the rank-order reduction bit for bit", n, v, i);
            }
        }
        smh_destroy(h);
    }
    PT_ASSERT(!ccoip_ring_use_gather((uint64_t)64 << 10, 2, false), "64 KiB at N=2 runs the ring");
    PT_ASSERT(!ccoip_ring_use_gather((uint64_t)24 << 10, 4, false), "24 KiB at N=4 runs the ring");
    PT_ASSERT(ccoip_ring_use_gather((uint64_t)32 << 10, 3, false), "32 KiB at N=3 does not");
    PT_ASSERT(!ccoip_ring_use_gather(4096, 4, true), "quantized runs the ring");
}

/* A decode arena borrowed from the caller (ccoip_peer_config.decode_arena): refused when smaller
 * than ccoip_peer_decode_arena_bytes; one arena shared by every peer of a harness world (stepped
 * one at a time, as in the simulator) gives the same exact results as arenas of their own. */
PTEST(peer, shared_decode_arena)
{
    ccoip_peer_config pc;
    ccoip_peer_config_default(&pc);
    pc.master_url = "tcp://master";
    const uint64_t need = ccoip_peer_decode_arena_bytes(&pc);
    PT_ASSERT(need > 0 && need == ccoip_peer_decode_arena_bytes(NULL), "default bound %llu",
              (unsigned long long)need);
    uint8_t *arena = malloc((size_t)need);
    PT_ASSERT(arena != NULL, "arena");
    ccoip_peer *p = NULL;
    pc.decode_arena = arena;
    pc.decode_arena_bytes = need - 1u;
    PT_ASSERT(ccoip_peer_create(&pc, 1, &p) == pcclInvalidArgument && p == NULL,
              "one byte short: refused");
    pc.decode_arena_bytes = need;
    PT_ASSERT(ccoip_peer_create(&pc, 1, &p) == pcclSuccess && p != NULL, "exact size: accepted");
    ccoip_peer_destroy(p); /* must not free the borrowed arena (ASan would catch a double free) */

    ccoip_master_config mc;
    ccoip_master_config_default(&mc);
    ccoip_peer_config_default(&pc);
    pc.decode_arena = arena;
    pc.decode_arena_bytes = need;
    smh *h = smh_create(&mc, &pc);
    PT_ASSERT(smh_form_ring(h, 4, 0), "ring of 4 over one shared arena");
    enum { CNT = 1000 };
    static int32_t x[4][CNT], y[4][CNT];
    for (uint32_t i = 0; i < 4; i++) {
        for (uint32_t k = 0; k < CNT; k++)
            x[i][k] = (int32_t)(i * 100000u + k) - 7;
    }
    uint64_t c[4];
    for (uint32_t i = 0; i < 4; i++) {
        ccoip_allreduce_args a = ar(5, CNT, pcclInt32, pcclSum, false);
        c[i] = smh_allreduce(h, i, &a, x[i], y[i]);
    }
    smh_run(h);
    for (uint32_t i = 0; i < 4; i++) {
        pcclResult_t r;
        PT_ASSERT(smh_done(h, i, c[i], &r) && r == pcclSuccess, "member %u succeeds", i);
        for (uint32_t k = 0; k < CNT; k++) {
            const int32_t want = (int32_t)(600000u + 4u * k) - 28;
            if (y[i][k] != want)
                PT_ASSERT(false, "member %u element %u: %d != %d", i, k, y[i][k], want);
        }
    }
    smh_destroy(h);
    free(arena);
}
