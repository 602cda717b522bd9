/*
 * test_coll_peers.c — the collectives beyond all-reduce (core/peer_coll.c,
 * the master's agreement in core/master_collective.c) run by real peer and
 * master machines in the in-memory harness: exact results of every kind at
 * N = 2, 3, 4 for every root, in and out of place, striped over a pool of
 * two; disagreement (pcclInvalidUsage for all); an op pinned to a stale
 * epoch (pcclUpdateTopologyFailed for all, nothing touched); a peer killed
 * mid-op (pcclRankConnectionLost for the survivors, in-place inputs
 * restored, the retry on the shrunken ring exact); timeouts (a member that
 * never initiates, a member frozen mid-op: pcclTimeout for everyone alive);
 * the barrier; quantized reduce-scatter and reduce against a reference
 * built from the same quantize/dequantize kernels (bit for bit).
 */
#include <stdlib.h>
#include <string.h>

#include "ccoip_coll.h"
#include "ccoip_master.h"
#include "ccoip_peer.h"
#include "ccoip_quant.h"
#include "ccoip_reduce.h"
#include "ccoip_ring.h"
#include "ptest.h"
#include "sm_harness.h"

#define NMAX 4u

typedef struct op_bufs {
    int32_t *send, *recv;
    uint64_t send_bytes, recv_bytes;
    uint32_t rank;
    uint64_t cmd;
} op_bufs;

static uint32_t g_relay_max; /* the master relay's bound for worlds made now (0: off) */

static smh *world_of(uint32_t n, uint32_t pool)
{
    return smh_ring_of(n, pool, g_relay_max, 0);
}

static int32_t in_val(uint32_t rank, uint64_t i)
{
    return (int32_t)((rank * 7919u + (uint32_t)i * 31u + 5u) % 20011u) - 10000;
}

/* Submits one op at harness peer i (its rank and epoch read from its machine). in_place uses the
 * aliasing ccoip_coll_plan_make documents. */
static void submit(smh *h, uint32_t i, ccoip_coll_kind kind, uint64_t count, uint32_t root,
                   pcclRedOp_t op, bool in_place, uint64_t tag, uint32_t timeout_ms, op_bufs *b)
{
    ccoip_peer *p = smh_peer(h, i);
    const uint32_t world = ccoip_peer_world_size(p);
    const int32_t rank = ccoip_peer_rank(p);
    PT_ASSERT(rank >= 0, "peer %u has a rank", i);
    b->rank = (uint32_t)rank;
    PT_ASSERT(ccoip_coll_sizes(kind, count, 4, world, b->rank, root, &b->send_bytes,
                               &b->recv_bytes) == pcclSuccess,
              "sizes");
    const uint64_t blk = count * 4u;
    const uint64_t big = b->send_bytes > b->recv_bytes ? b->send_bytes : b->recv_bytes;
    int32_t *mem = calloc(1, (size_t)big + 4u);
    b->send = mem;
    b->recv = NULL;
    if (kind == CCOIP_COLL_BROADCAST) {
        b->recv = mem;
    } else if (!in_place) {
        b->recv = calloc(1, (size_t)b->recv_bytes + 4u);
        memset(b->recv, 0x5A, (size_t)b->recv_bytes);
    } else if (kind == CCOIP_COLL_ALL_GATHER) {
        b->recv = mem;
        b->send = mem + (uint64_t)b->rank * count;
    } else if (kind == CCOIP_COLL_REDUCE_SCATTER) {
        b->recv = mem + (uint64_t)b->rank * count;
    } else if (kind == CCOIP_COLL_GATHER && b->rank == root) {
        b->recv = mem;
        b->send = mem + (uint64_t)root * count;
    } else if (kind == CCOIP_COLL_SCATTER && b->rank == root) {
        b->recv = mem + (uint64_t)root * count;
    } else {
        b->recv = mem;
    }
    (void)blk;
    if (kind != CCOIP_COLL_BROADCAST || b->rank == root) {
        for (uint64_t k = 0; k < b->send_bytes / 4u; k++)
            b->send[k] = in_val(b->rank, k);
    }
    ccoip_allreduce_args a;
    memset(&a, 0, sizeof a);
    a.tag = tag;
    a.count = count;
    a.dtype = pcclInt32;
    a.op = op;
    a.quant_algorithm = pcclQuantNone;
    a.in_place = in_place;
    a.kind = kind;
    a.root = root;
    a.pinned_epoch = ccoip_peer_epoch(p);
    a.world = world;
    a.send_bytes = b->send_bytes;
    a.recv_bytes = b->recv_bytes;
    a.timeout_ms = timeout_ms;
    b->cmd = smh_allreduce(h, i, &a, b->send, b->recv);
}

static void free_bufs(op_bufs *b, ccoip_coll_kind kind, bool in_place)
{
    int32_t *mem = b->send;
    if (in_place && (kind == CCOIP_COLL_ALL_GATHER || kind == CCOIP_COLL_GATHER)) {
        if (b->recv != NULL && b->recv < b->send) mem = b->recv;
    }
    if (!in_place && kind != CCOIP_COLL_BROADCAST) free(b->recv);
    free(mem);
}

static int32_t sum_of(uint32_t n, uint64_t i)
{
    uint32_t s = 0;
    for (uint32_t r = 0; r < n; r++)
        s += (uint32_t)in_val(r, i);
    return (int32_t)s;
}

/* The expected element k of rank r's output. */
static int32_t want(ccoip_coll_kind kind, uint32_t n, uint64_t count, uint32_t root, uint32_t r,
                    uint64_t k)
{
    const uint64_t blk = count > 0 ? k / count : 0, off = count > 0 ? k % count : 0;
    switch (kind) {
    case CCOIP_COLL_BROADCAST:
        return in_val(root, k);
    case CCOIP_COLL_REDUCE:
        return sum_of(n, k);
    case CCOIP_COLL_ALL_GATHER:
    case CCOIP_COLL_GATHER:
        return in_val((uint32_t)blk, off);
    case CCOIP_COLL_REDUCE_SCATTER:
        return sum_of(n, (uint64_t)r * count + k);
    case CCOIP_COLL_ALL_TO_ALL:
        return in_val((uint32_t)blk, (uint64_t)r * count + off);
    case CCOIP_COLL_SCATTER:
        return in_val(root, (uint64_t)r * count + k);
    default:
        return 0;
    }
}

static void round_exact(uint32_t n, uint32_t pool, ccoip_coll_kind kind, uint64_t count,
                        uint32_t root, bool in_place)
{
    smh *h = world_of(n, pool);
    PT_ASSERT(h != NULL, "ring of %u formed", n);
    op_bufs b[NMAX];
    for (uint32_t i = 0; i < n; i++)
        submit(h, i, kind, count, root, pcclSum, in_place, 5, 0, &b[i]);
    smh_run(h);
    for (uint32_t i = 0; i < n; i++) {
        pcclResult_t r;
        PT_ASSERT(smh_done(h, i, b[i].cmd, &r) && r == pcclSuccess,
                  "kind %d n %u count %llu root %u in_place %d: peer %u (rank %u) r=%d", (int)kind,
                  n, (unsigned long long)count, root, (int)in_place, i, b[i].rank, (int)r);
        PT_ASSERT(smh_notify_count(h, i, b[i].cmd) == 1, "exactly one NOTIFY");
        for (uint64_t k = 0; k < b[i].recv_bytes / 4u; k++) {
            const int32_t w = want(kind, n, count, root, b[i].rank, k);
            PT_ASSERT(b[i].recv[k] == w,
                      "kind %d n %u count %llu root %u in_place %d: rank %u [%llu] %d != %d",
                      (int)kind, n, (unsigned long long)count, root, (int)in_place, b[i].rank,
                      (unsigned long long)k, b[i].recv[k], w);
        }
    }
    PT_ASSERT(smh_step_errors(h) == 0, "no step errors");
    for (uint32_t i = 0; i < n; i++)
        free_bufs(&b[i], kind, in_place);
    smh_destroy(h);
}

static const ccoip_coll_kind KINDS[] = {
    CCOIP_COLL_BROADCAST,  CCOIP_COLL_REDUCE, CCOIP_COLL_ALL_GATHER, CCOIP_COLL_REDUCE_SCATTER,
    CCOIP_COLL_ALL_TO_ALL, CCOIP_COLL_GATHER, CCOIP_COLL_SCATTER,
};

PTEST(coll_peers, every_kind_exact_n2_to_n4_every_root)
{
    for (size_t k = 0; k < sizeof KINDS / sizeof KINDS[0]; k++) {
        for (uint32_t n = 2; n <= NMAX; n++) {
            const uint32_t roots = ccoip_coll_rooted(KINDS[k]) ? n : 1u;
            for (uint32_t root = 0; root < roots; root++) {
                round_exact(n, 1, KINDS[k], 37, root, false);
                round_exact(n, 1, KINDS[k], 37, root, true);
            }
            round_exact(n, 1, KINDS[k], 1, 0, false); /* blocks shorter than the world */
        }
    }
}

PTEST(coll_peers, every_kind_striped_over_a_pool_of_two)
{
    /* 1.25 MiB blocks: every piece of a step is cut into two stripes, one per connection. */
    for (size_t k = 0; k < sizeof KINDS / sizeof KINDS[0]; k++)
        round_exact(3, 2, KINDS[k], (5u << 18) / 4u + 1u, 1, false);
}

PTEST(coll_peers, disagreeing_roots_are_invalid_usage_for_everyone)
{
    smh *h = world_of(3, 1);
    PT_ASSERT(h != NULL, "ring of 3");
    op_bufs b[3];
    for (uint32_t i = 0; i < 3; i++)
        submit(h, i, CCOIP_COLL_BROADCAST, 8, i == 2 ? 1u : 0u, pcclSum, false, 9, 0, &b[i]);
    smh_run(h);
    for (uint32_t i = 0; i < 3; i++) {
        pcclResult_t r;
        PT_ASSERT(smh_done(h, i, b[i].cmd, &r) && r == pcclInvalidUsage, "peer %u r=%d", i, (int)r);
        free_bufs(&b[i], CCOIP_COLL_BROADCAST, false);
    }
    smh_destroy(h);
}

PTEST(coll_peers, an_op_pinned_to_a_stale_epoch_is_refused_untouched)
{
    smh *h = world_of(3, 1);
    PT_ASSERT(h != NULL, "ring of 3");
    /* The pinned epoch is one the group no longer has: the op must not run with it. */
    op_bufs b[3];
    for (uint32_t i = 0; i < 3; i++) {
        ccoip_peer *p = smh_peer(h, i);
        const uint64_t ep = ccoip_peer_epoch(p);
        b[i].rank = (uint32_t)ccoip_peer_rank(p);
        b[i].send_bytes = 16;
        b[i].recv_bytes = 48;
        b[i].send = calloc(1, 16);
        b[i].recv = calloc(1, 48);
        memset(b[i].recv, 0x77, 48);
        ccoip_allreduce_args a;
        memset(&a, 0, sizeof a);
        a.tag = 3;
        a.count = 4;
        a.dtype = pcclInt32;
        a.kind = CCOIP_COLL_ALL_GATHER;
        a.pinned_epoch = ep > 1 ? ep - 1u : ep + 1u;
        a.send_bytes = 16;
        a.recv_bytes = 48;
        b[i].cmd = smh_allreduce(h, i, &a, b[i].send, b[i].recv);
    }
    smh_run(h);
    for (uint32_t i = 0; i < 3; i++) {
        pcclResult_t r;
        PT_ASSERT(smh_done(h, i, b[i].cmd, &r) && r == pcclUpdateTopologyFailed, "peer %u r=%d", i,
                  (int)r);
        for (uint32_t k = 0; k < 12; k++)
            PT_ASSERT(b[i].recv[k] == 0x77777777, "output untouched");
        free(b[i].send);
        free(b[i].recv);
    }
    smh_destroy(h);
}

PTEST(coll_peers, a_peer_killed_mid_op_fails_it_for_all_and_restores_in_place_inputs)
{
    const ccoip_coll_kind kinds[] = {CCOIP_COLL_REDUCE_SCATTER, CCOIP_COLL_ALL_TO_ALL,
                                     CCOIP_COLL_REDUCE, CCOIP_COLL_BROADCAST};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        smh *h = world_of(4, 1);
        PT_ASSERT(h != NULL, "ring of 4");
        op_bufs b[4];
        int32_t *orig[4];
        smh_kill_on_ring_send(h, 3, 1); /* dies in its first send */
        /* Peer 3 is the root: it sends in every kind. The survivors' in-place inputs (a
         * reduce-scatter's, an all-to-all's) must come back bit for bit. */
        const uint32_t root = (uint32_t)ccoip_peer_rank(smh_peer(h, 3));
        for (uint32_t i = 0; i < 4; i++) {
            submit(h, i, kinds[k], 29, root, pcclSum, kinds[k] != CCOIP_COLL_BROADCAST, 4, 0,
                   &b[i]);
            orig[i] = malloc((size_t)b[i].send_bytes + 4u);
            memcpy(orig[i], b[i].send, (size_t)b[i].send_bytes);
        }
        smh_run(h);
        uint32_t lost = 0;
        for (uint32_t i = 0; i < 3; i++) {
            pcclResult_t r;
            PT_ASSERT(smh_done(h, i, b[i].cmd, &r), "peer %u done", i);
            PT_ASSERT(r == pcclRankConnectionLost, "kind %d: survivor %u r=%d", (int)kinds[k], i,
                      (int)r);
            lost++;
            if (kinds[k] != CCOIP_COLL_BROADCAST) {
                PT_ASSERT(memcmp(orig[i], b[i].send, (size_t)b[i].send_bytes) == 0,
                          "kind %d: peer %u's in-place input restored bit for bit", (int)kinds[k],
                          i);
            }
        }
        PT_ASSERT(lost == 3, "every survivor failed");
        /* The retry on the shrunken ring (new ranks, new epoch) is exact. */
        op_bufs c[3];
        for (uint32_t i = 0; i < 3; i++)
            submit(h, i, kinds[k], 29, 0, pcclSum, false, 4, 0, &c[i]);
        smh_run(h);
        for (uint32_t i = 0; i < 3; i++) {
            pcclResult_t r;
            PT_ASSERT(smh_done(h, i, c[i].cmd, &r) && r == pcclSuccess, "retry %u r=%d", i, (int)r);
            for (uint64_t e = 0; e < c[i].recv_bytes / 4u; e++) {
                PT_ASSERT(c[i].recv[e] == want(kinds[k], 3, 29, 0, c[i].rank, e),
                          "retry exact: kind %d rank %u [%llu]", (int)kinds[k], c[i].rank,
                          (unsigned long long)e);
            }
            free_bufs(&c[i], kinds[k], false);
        }
        for (uint32_t i = 0; i < 4; i++) {
            free_bufs(&b[i], kinds[k], kinds[k] != CCOIP_COLL_BROADCAST);
            free(orig[i]);
        }
        smh_destroy(h);
    }
}

PTEST(coll_peers, a_member_that_never_initiates_times_the_op_out_for_everyone)
{
    smh *h = world_of(3, 1);
    PT_ASSERT(h != NULL, "ring of 3");
    op_bufs b[3];
    for (uint32_t i = 0; i < 2; i++) /* peer 2 never calls */
        submit(h, i, CCOIP_COLL_ALL_GATHER, 8, 0, pcclSum, false, 6, 500, &b[i]);
    smh_run(h);
    smh_advance(h, 400ull * 1000000ull);
    for (uint32_t i = 0; i < 2; i++) {
        PT_ASSERT(!smh_done(h, i, b[i].cmd, NULL), "still waiting before the timeout");
    }
    smh_advance(h, 200ull * 1000000ull);
    for (uint32_t i = 0; i < 2; i++) {
        pcclResult_t r;
        PT_ASSERT(smh_done(h, i, b[i].cmd, &r) && r == pcclTimeout, "peer %u r=%d", i, (int)r);
        PT_ASSERT(smh_notify_count(h, i, b[i].cmd) == 1, "exactly one NOTIFY");
        free_bufs(&b[i], CCOIP_COLL_ALL_GATHER, false);
    }
    PT_ASSERT(ccoip_master_num_accepted(smh_master(h)) == 3, "nobody evicted for it");
    smh_destroy(h);
}

PTEST(coll_peers, a_member_frozen_mid_op_times_it_out_for_everyone_alive)
{
    smh *h = world_of(3, 1);
    PT_ASSERT(h != NULL, "ring of 3");
    op_bufs b[3];
    /* Only peer 0 sets a timeout: its cancel ends the op for the others too. */
    for (uint32_t i = 0; i < 3; i++)
        submit(h, i, CCOIP_COLL_REDUCE_SCATTER, 16, 0, pcclSum, true, 7, i == 0 ? 300u : 0u, &b[i]);
    int32_t *orig[3];
    for (uint32_t i = 0; i < 3; i++) {
        orig[i] = malloc((size_t)b[i].send_bytes);
        memcpy(orig[i], b[i].send, (size_t)b[i].send_bytes);
    }
    smh_freeze_peer(h, 2); /* stopped before it sends anything, its links stay open */
    smh_run(h);
    smh_advance(h, 350ull * 1000000ull);
    for (uint32_t i = 0; i < 2; i++) {
        pcclResult_t r;
        PT_ASSERT(smh_done(h, i, b[i].cmd, &r) && r == pcclTimeout, "peer %u r=%d", i, (int)r);
        PT_ASSERT(memcmp(orig[i], b[i].send, (size_t)b[i].send_bytes) == 0,
                  "peer %u's in-place input restored", i);
    }
    PT_ASSERT(smh_log_count(h, "timed out") >= 1, "the timeout is logged");
    for (uint32_t i = 0; i < 3; i++) {
        free_bufs(&b[i], CCOIP_COLL_REDUCE_SCATTER, true);
        free(orig[i]);
    }
    smh_destroy(h);
}

PTEST(coll_peers, barrier_completes_when_everyone_entered)
{
    smh *h = world_of(3, 1);
    PT_ASSERT(h != NULL, "ring of 3");
    op_bufs b[3];
    submit(h, 0, CCOIP_COLL_BARRIER, 0, 0, pcclSum, false, 1, 0, &b[0]);
    submit(h, 1, CCOIP_COLL_BARRIER, 0, 0, pcclSum, false, 1, 0, &b[1]);
    smh_run(h);
    PT_ASSERT(!smh_done(h, 0, b[0].cmd, NULL) && !smh_done(h, 1, b[1].cmd, NULL),
              "nobody leaves the barrier before the last enters");
    submit(h, 2, CCOIP_COLL_BARRIER, 0, 0, pcclSum, false, 1, 0, &b[2]);
    smh_run(h);
    for (uint32_t i = 0; i < 3; i++) {
        pcclResult_t r;
        PT_ASSERT(smh_done(h, i, b[i].cmd, &r) && r == pcclSuccess, "peer %u r=%d", i, (int)r);
        free_bufs(&b[i], CCOIP_COLL_BARRIER, false);
    }
    smh_destroy(h);
}

PTEST(coll_peers, unpinned_or_quantized_kinds_are_invalid_arguments)
{
    smh *h = world_of(2, 1);
    PT_ASSERT(h != NULL, "ring of 2");
    int32_t s[4] = {0}, r8[8] = {0};
    ccoip_allreduce_args a;
    memset(&a, 0, sizeof a);
    a.tag = 2;
    a.count = 4;
    a.dtype = pcclInt32;
    a.kind = CCOIP_COLL_ALL_GATHER;
    a.send_bytes = 16;
    a.recv_bytes = 32;
    uint64_t c = smh_allreduce(h, 0, &a, s, r8); /* not pinned */
    smh_run(h);
    pcclResult_t r;
    PT_ASSERT(smh_done(h, 0, c, &r) && r == pcclInvalidArgument, "unpinned: r=%d", (int)r);
    a.pinned_epoch = ccoip_peer_epoch(smh_peer(h, 0));
    a.quant_algorithm = pcclQuantMinMax;
    a.quant_dtype = pcclUint8;
    a.dtype = pcclFloat;
    c = smh_allreduce(h, 0, &a, s, r8);
    smh_run(h);
    PT_ASSERT(smh_done(h, 0, c, &r) && r == pcclInvalidArgument, "quantized: r=%d", (int)r);
    a.quant_algorithm = pcclQuantNone;
    a.kind = CCOIP_COLL_REDUCE_SCATTER;
    a.op = pcclBand;
    c = smh_allreduce(h, 0, &a, s, r8);
    smh_run(h);
    PT_ASSERT(smh_done(h, 0, c, &r) && r == pcclInvalidArgument, "bitwise on floats: r=%d", (int)r);
    smh_destroy(h);
}

/* PREMUL_SUM: each member's factor is its own (rank + 1, exact in binary32 with small integer
 * inputs), so the result is sum_r (r + 1) x_r exactly; the all-reduce (ring, in and out of
 * place), the reduce-scatter and the reduce (at the root, in place). */
static void premul_round(ccoip_coll_kind kind, uint32_t n, bool in_place)
{
    smh *h = world_of(n, 1);
    PT_ASSERT(h != NULL, "ring of %u", n);
    const uint64_t count = 1000; /* above the small all-reduce: the ring's path */
    float *send[NMAX], *recv[NMAX];
    uint64_t cmd[NMAX], sn[NMAX], rn[NMAX];
    uint32_t rank[NMAX];
    for (uint32_t i = 0; i < n; i++) {
        ccoip_peer *p = smh_peer(h, i);
        rank[i] = (uint32_t)ccoip_peer_rank(p);
        uint64_t sb = 0, rb = 0;
        if (kind == CCOIP_COLL_ALL_REDUCE) {
            sb = rb = count * 4u;
        } else {
            PT_ASSERT(ccoip_coll_sizes(kind, count, 4, n, rank[i], 0, &sb, &rb) == pcclSuccess,
                      "sizes");
        }
        sn[i] = sb / 4u;
        rn[i] = rb / 4u;
        send[i] = calloc((size_t)sn[i] + 1u, 4);
        for (uint64_t k = 0; k < sn[i]; k++)
            send[i][k] = (float)((int)(k % 97u) - 40 + (int)rank[i]);
        recv[i] = in_place
                      ? (kind == CCOIP_COLL_REDUCE_SCATTER ? send[i] + rank[i] * count : send[i])
                      : calloc((size_t)rn[i] + 1u, 4);
        ccoip_allreduce_args a;
        memset(&a, 0, sizeof a);
        a.tag = 12;
        a.count = count;
        a.dtype = pcclFloat;
        a.op = pcclPremulSum;
        a.in_place = in_place;
        a.kind = kind;
        a.premul = (double)(rank[i] + 1u);
        if (kind != CCOIP_COLL_ALL_REDUCE) {
            a.pinned_epoch = ccoip_peer_epoch(p);
            a.send_bytes = sb;
            a.recv_bytes = rb;
        }
        cmd[i] = smh_allreduce(h, i, &a, send[i], rn[i] > 0 ? recv[i] : NULL);
    }
    smh_run(h);
    for (uint32_t i = 0; i < n; i++) {
        pcclResult_t r;
        PT_ASSERT(smh_done(h, i, cmd[i], &r) && r == pcclSuccess, "kind %d peer %u r=%d", (int)kind,
                  i, (int)r);
        for (uint64_t k = 0; k < rn[i]; k++) {
            const uint64_t e = kind == CCOIP_COLL_REDUCE_SCATTER ? rank[i] * count + k : k;
            float want = 0;
            for (uint32_t q = 0; q < n; q++)
                want += (float)(q + 1u) * (float)((int)(e % 97u) - 40 + (int)q);
            PT_ASSERT(recv[i][k] == want, "kind %d n %u in_place %d rank %u [%llu]: %g != %g",
                      (int)kind, n, (int)in_place, rank[i], (unsigned long long)k,
                      (double)recv[i][k], (double)want);
        }
        if (!in_place) free(recv[i]);
        free(send[i]);
    }
    smh_destroy(h);
}

PTEST(coll_peers, premul_sum_all_reduce_reduce_scatter_and_reduce)
{
    for (uint32_t n = 2; n <= NMAX; n++) {
        premul_round(CCOIP_COLL_ALL_REDUCE, n, false);
        premul_round(CCOIP_COLL_ALL_REDUCE, n, true);
        premul_round(CCOIP_COLL_REDUCE_SCATTER, n, false);
        premul_round(CCOIP_COLL_REDUCE_SCATTER, n, true);
        premul_round(CCOIP_COLL_REDUCE, n, false);
    }
}

PTEST(coll_peers, premul_sum_on_integers_or_quantized_is_invalid)
{
    smh *h = world_of(2, 1);
    PT_ASSERT(h != NULL, "ring of 2");
    int32_t x[4] = {0};
    float f[4] = {0};
    ccoip_allreduce_args a;
    memset(&a, 0, sizeof a);
    a.tag = 1;
    a.count = 4;
    a.dtype = pcclInt32;
    a.op = pcclPremulSum;
    a.premul = 2.0;
    uint64_t c = smh_allreduce(h, 0, &a, x, x);
    smh_run(h);
    pcclResult_t r;
    PT_ASSERT(smh_done(h, 0, c, &r) && r == pcclInvalidArgument, "integers: r=%d", (int)r);
    a.dtype = pcclFloat;
    a.quant_algorithm = pcclQuantMinMax;
    a.quant_dtype = pcclUint8;
    c = smh_allreduce(h, 0, &a, f, f);
    smh_run(h);
    PT_ASSERT(smh_done(h, 0, c, &r) && r == pcclInvalidArgument, "quantized: r=%d", (int)r);
    smh_destroy(h);
}

/* The master relay (§6.8.3): small ops of every kind go through the master (one round trip),
 * exact for every root, in and out of place; a float reduce-scatter and reduce give the same
 * bits relayed as on the ring (the master reduces in the ring's order). */
PTEST(coll_peers, master_relay_every_kind_exact_and_bit_identical_to_the_ring)
{
    g_relay_max = 32u << 10;
    for (size_t k = 0; k < sizeof KINDS / sizeof KINDS[0]; k++) {
        for (uint32_t n = 2; n <= NMAX; n++) {
            const uint32_t roots = ccoip_coll_rooted(KINDS[k]) ? n : 1u;
            for (uint32_t root = 0; root < roots; root++) {
                round_exact(n, 1, KINDS[k], 37, root, false);
                round_exact(n, 1, KINDS[k], 37, root, true);
            }
        }
    }
    /* Relayed ops counted by the peers; a barrier relays too. */
    smh *h = world_of(3, 1);
    PT_ASSERT(h != NULL, "ring of 3");
    op_bufs b[3];
    for (uint32_t i = 0; i < 3; i++)
        submit(h, i, CCOIP_COLL_ALL_GATHER, 16, 0, pcclSum, false, 2, 0, &b[i]);
    smh_run(h);
    for (uint32_t i = 0; i < 3; i++) {
        pcclResult_t r;
        PT_ASSERT(smh_done(h, i, b[i].cmd, &r) && r == pcclSuccess, "relayed all-gather %u", i);
        PT_ASSERT(ccoip_peer_relayed_ops(smh_peer(h, i)) == 1, "peer %u relayed one op", i);
        free_bufs(&b[i], CCOIP_COLL_ALL_GATHER, false);
    }
    smh_destroy(h);
    /* Floats whose sums round: the relay's bits equal the ring's. */
    const ccoip_coll_kind fk[2] = {CCOIP_COLL_REDUCE_SCATTER, CCOIP_COLL_REDUCE};
    for (int kk = 0; kk < 2; kk++) {
        float out[2][NMAX][4 * 37];
        for (int relay = 0; relay < 2; relay++) {
            g_relay_max = relay ? (32u << 10) : 0u;
            smh *w = world_of(4, 1);
            PT_ASSERT(w != NULL, "ring of 4");
            float *in[NMAX], *res[NMAX];
            uint64_t cmd[NMAX], rn[NMAX];
            uint32_t rk[NMAX];
            for (uint32_t i = 0; i < 4; i++) {
                ccoip_peer *p = smh_peer(w, i);
                rk[i] = (uint32_t)ccoip_peer_rank(p);
                uint64_t sb = 0, rb = 0;
                PT_ASSERT(ccoip_coll_sizes(fk[kk], 37, 4, 4, rk[i], 0, &sb, &rb) == pcclSuccess,
                          "sizes");
                in[i] = malloc((size_t)sb);
                res[i] = calloc(1, (size_t)rb + 4u);
                rn[i] = rb / 4u;
                for (uint64_t e = 0; e < sb / 4u; e++)
                    in[i][e] = 0.1f * (float)(e + 1u) + 0.37f * (float)(rk[i] + 1u);
                ccoip_allreduce_args a;
                memset(&a, 0, sizeof a);
                a.tag = 4;
                a.count = 37;
                a.dtype = pcclFloat;
                a.op = pcclSum;
                a.kind = fk[kk];
                a.pinned_epoch = ccoip_peer_epoch(p);
                a.world = 4;
                a.send_bytes = sb;
                a.recv_bytes = rb;
                cmd[i] = smh_allreduce(w, i, &a, in[i], rb > 0 ? res[i] : NULL);
            }
            smh_run(w);
            for (uint32_t i = 0; i < 4; i++) {
                pcclResult_t r;
                PT_ASSERT(smh_done(w, i, cmd[i], &r) && r == pcclSuccess, "float op %u", i);
                PT_ASSERT(ccoip_peer_relayed_ops(smh_peer(w, i)) == (uint64_t)relay,
                          "relay %d on peer %u", relay, i);
                memset(out[relay][rk[i]], 0, sizeof out[relay][rk[i]]);
                memcpy(out[relay][rk[i]], res[i], (size_t)rn[i] * 4u);
                free(in[i]);
                free(res[i]);
            }
            smh_destroy(w);
        }
        PT_ASSERT(memcmp(out[0], out[1], sizeof out[0]) == 0,
                  "kind %d: relayed bits differ from the ring's", (int)fk[kk]);
    }
    g_relay_max = 0;
}

/* Quantized reduce-scatter and reduce (docs/semantics.md §6). Float inputs that do not survive
 * 8-bit codes exactly, so the quantization shows. */
static float q_in(uint32_t rank, uint64_t e)
{
    return (float)((rank * 7919u + (uint32_t)e * 31u + 5u) % 2003u) / 97.0f - 10.0f;
}

/* The reference of one reduced piece: elements [off, off + cnt) of every rank's input, reduced
 * for owner rank k as the schedule does — the partial starts at rank k + 1; each next rank
 * (k + 2, ..., k) quantizes nothing of its own but receives value(codes of the partial) and
 * computes own op value; AVG divides at the owner. Built from the kernels themselves. */
static void q_ref(float *const *in, uint32_t n, uint32_t k, uint64_t off, uint64_t cnt,
                  pcclRedOp_t op, pcclQuantizationAlgorithm_t alg, pcclDataType_t qd, float *out)
{
    float *tmp = calloc((size_t)cnt + 1u, sizeof(float));
    uint8_t *codes = calloc((size_t)cnt * 2u + 1u, 1);
    memcpy(out, in[(k + 1u) % n] + off, (size_t)cnt * sizeof(float));
    for (uint32_t j = 2; j <= n; j++) {
        ccoip_quant_meta m;
        PT_ASSERT(ccoip_quant_compute_meta(alg, pcclFloat, qd, out, cnt, &m) == pcclSuccess,
                  "meta");
        PT_ASSERT(ccoip_quantize(&m, codes, out, cnt) == pcclSuccess, "quantize");
        PT_ASSERT(ccoip_dequantize(&m, tmp, codes, cnt) == pcclSuccess, "dequantize");
        memcpy(out, in[(k + j) % n] + off, (size_t)cnt * sizeof(float));
        PT_ASSERT(ccoip_reduce_inplace(op, pcclFloat, out, tmp, cnt) == pcclSuccess, "reduce");
    }
    if (op == pcclAvg) {
        PT_ASSERT(ccoip_reduce_finalize_avg(pcclFloat, out, cnt, n) == pcclSuccess, "avg");
    }
    free(tmp);
    free(codes);
}

typedef struct q_case {
    pcclRedOp_t op;
    pcclQuantizationAlgorithm_t alg;
    pcclDataType_t qd;
} q_case;

static void q_round_pool(ccoip_coll_kind kind, uint32_t n, uint32_t pool, uint64_t count,
                         uint32_t root, bool in_place, q_case qc)
{
    smh *h = world_of(n, pool);
    PT_ASSERT(h != NULL, "ring of %u", n);
    float *send[NMAX], *recv[NMAX], *by_rank[NMAX];
    uint64_t cmd[NMAX], rn[NMAX];
    uint32_t rank[NMAX];
    for (uint32_t i = 0; i < n; i++) {
        ccoip_peer *p = smh_peer(h, i);
        rank[i] = (uint32_t)ccoip_peer_rank(p);
        uint64_t sb = 0, rb = 0;
        PT_ASSERT(ccoip_coll_sizes(kind, count, 4, n, rank[i], root, &sb, &rb) == pcclSuccess,
                  "sizes");
        rn[i] = rb / 4u;
        send[i] = calloc((size_t)(sb / 4u) + 1u, 4);
        for (uint64_t e = 0; e < sb / 4u; e++)
            send[i][e] = q_in(rank[i], e);
        by_rank[rank[i]] = malloc((size_t)sb + 4u);
        memcpy(by_rank[rank[i]], send[i], (size_t)sb);
        if (!in_place) {
            recv[i] = calloc((size_t)rn[i] + 1u, 4);
        } else {
            recv[i] =
                kind == CCOIP_COLL_REDUCE_SCATTER ? send[i] + (uint64_t)rank[i] * count : send[i];
        }
        ccoip_allreduce_args a;
        memset(&a, 0, sizeof a);
        a.tag = 21;
        a.count = count;
        a.dtype = pcclFloat;
        a.op = qc.op;
        a.quant_algorithm = qc.alg;
        a.quant_dtype = qc.qd;
        a.in_place = in_place;
        a.kind = kind;
        a.root = root;
        a.pinned_epoch = ccoip_peer_epoch(p);
        a.world = n;
        a.send_bytes = sb;
        a.recv_bytes = rb;
        cmd[i] = smh_allreduce(h, i, &a, send[i], rb > 0 ? recv[i] : NULL);
    }
    smh_run(h);
    float *want = calloc((size_t)count + 1u, sizeof(float));
    uint64_t lossy = 0;
    for (uint32_t i = 0; i < n; i++) {
        pcclResult_t r;
        PT_ASSERT(smh_done(h, i, cmd[i], &r) && r == pcclSuccess,
                  "kind %d n %u op %d alg %d qd %d: peer %u r=%d", (int)kind, n, (int)qc.op,
                  (int)qc.alg, (int)qc.qd, i, (int)r);
        PT_ASSERT(ccoip_peer_relayed_ops(smh_peer(h, i)) == 0, "a quantized op never relays");
        if (kind == CCOIP_COLL_REDUCE_SCATTER) {
            q_ref(by_rank, n, rank[i], (uint64_t)rank[i] * count, count, qc.op, qc.alg, qc.qd,
                  want);
        } else if (rn[i] > 0) {
            for (uint32_t k = 0; k < n; k++) {
                const ccoip_span c = ccoip_ring_chunk(count, n, k);
                q_ref(by_rank, n, k, c.offset, c.count, qc.op, qc.alg, qc.qd, want + c.offset);
            }
        }
        for (uint64_t e = 0; e < rn[i]; e++) {
            PT_ASSERT(memcmp(&recv[i][e], &want[e], 4) == 0,
                      "kind %d n %u root %u in_place %d op %d alg %d qd %d: rank %u [%llu] "
                      "%.9g != %.9g",
                      (int)kind, n, root, (int)in_place, (int)qc.op, (int)qc.alg, (int)qc.qd,
                      rank[i], (unsigned long long)e, (double)recv[i][e], (double)want[e]);
            const uint64_t at = kind == CCOIP_COLL_REDUCE_SCATTER ? rank[i] * count + e : e;
            float exact = 0;
            for (uint32_t q = 0; q < n; q++)
                exact += by_rank[q][at];
            if (qc.op == pcclSum && recv[i][e] != exact) lossy++;
        }
    }
    /* Chunks of one element are constant: they round-trip exactly. */
    PT_ASSERT(qc.op != pcclSum || count <= 2u * n || lossy > 0,
              "kind %d n %u: the codes lost nothing: not quantized?", (int)kind, n);
    PT_ASSERT(smh_step_errors(h) == 0, "no step errors");
    free(want);
    for (uint32_t i = 0; i < n; i++) {
        if (!in_place) free(recv[i]);
        free(send[i]);
        free(by_rank[rank[i]]);
    }
    smh_destroy(h);
}

static void q_round(ccoip_coll_kind kind, uint32_t n, uint64_t count, uint32_t root, bool in_place,
                    q_case qc)
{
    q_round_pool(kind, n, 1, count, root, in_place, qc);
}

static const q_case QCASES[] = {
    {pcclSum, pcclQuantMinMax, pcclUint8},
    {pcclAvg, pcclQuantZeroPointScale, pcclInt8},
    {pcclMax, pcclQuantMinMax, pcclInt16},
};

PTEST(coll_peers, quantized_reduce_scatter_and_reduce_match_the_kernels_bit_for_bit)
{
    for (size_t c = 0; c < sizeof QCASES / sizeof QCASES[0]; c++) {
        for (uint32_t n = 2; n <= NMAX; n++) {
            q_round(CCOIP_COLL_REDUCE_SCATTER, n, 301, 0, false, QCASES[c]);
            q_round(CCOIP_COLL_REDUCE_SCATTER, n, 301, 0, true, QCASES[c]);
            for (uint32_t root = 0; root < n; root++)
                q_round(CCOIP_COLL_REDUCE, n, 1001, root, false, QCASES[c]);
            q_round(CCOIP_COLL_REDUCE, n, 1001, n - 1u, true, QCASES[c]);
            q_round(CCOIP_COLL_REDUCE, n, 2, 0, false, QCASES[c]); /* empty chunks */
        }
    }
    /* Over a pool of two with 1.25 MiB chunks: the quantized steps take one connection (the
     * op's, alike at both ends), the reduce's unquantized gather stripes over both. */
    q_round_pool(CCOIP_COLL_REDUCE_SCATTER, 3, 2, (5u << 18) / 4u + 1u, 0, false, QCASES[1]);
    q_round_pool(CCOIP_COLL_REDUCE, 3, 2, 3u * ((5u << 18) / 4u + 1u), 2, false, QCASES[0]);
    /* Small enough for the master relay: quantized ops still take the ring (checked in q_round). */
    g_relay_max = 32u << 10;
    q_round(CCOIP_COLL_REDUCE_SCATTER, 3, 37, 0, false, QCASES[0]);
    q_round(CCOIP_COLL_REDUCE, 3, 37, 1, false, QCASES[0]);
    g_relay_max = 0;
}

/* Submits a float op of `kind` at peer i with the given quantization; returns its command. */
static uint64_t q_submit(smh *h, uint32_t i, ccoip_coll_kind kind, pcclRedOp_t op,
                         pcclQuantizationAlgorithm_t alg, pcclDataType_t qd, float *send,
                         float *recv)
{
    ccoip_peer *p = smh_peer(h, i);
    const uint32_t n = ccoip_peer_world_size(p);
    const uint32_t rank = (uint32_t)ccoip_peer_rank(p);
    uint64_t sb = 0, rb = 0;
    PT_ASSERT(ccoip_coll_sizes(kind, 8, 4, n, rank, 0, &sb, &rb) == pcclSuccess, "sizes");
    ccoip_allreduce_args a;
    memset(&a, 0, sizeof a);
    a.tag = 23;
    a.count = kind == CCOIP_COLL_BARRIER ? 0 : 8;
    a.dtype = pcclFloat;
    a.op = op;
    a.quant_algorithm = alg;
    a.quant_dtype = qd;
    a.kind = kind;
    a.pinned_epoch = ccoip_peer_epoch(p);
    a.world = n;
    a.send_bytes = kind == CCOIP_COLL_BARRIER ? 0 : sb;
    a.recv_bytes = kind == CCOIP_COLL_BARRIER ? 0 : rb;
    a.premul = 1.0;
    return smh_allreduce(h, i, &a, send, recv);
}

PTEST(coll_peers, members_disagreeing_on_quantization_are_invalid_usage_for_everyone)
{
    const ccoip_coll_kind kinds[2] = {CCOIP_COLL_REDUCE_SCATTER, CCOIP_COLL_REDUCE};
    for (int k = 0; k < 2; k++) {
        for (int variant = 0; variant < 2; variant++) {
            smh *h = world_of(3, 1);
            PT_ASSERT(h != NULL, "ring of 3");
            float send[3][24], recv[3][24];
            uint64_t cmd[3];
            for (uint32_t i = 0; i < 3; i++) {
                for (int e = 0; e < 24; e++)
                    send[i][e] = (float)e;
                /* Peer 2 differs: unquantized (variant 0) or another code type (variant 1). */
                pcclQuantizationAlgorithm_t alg = pcclQuantMinMax;
                pcclDataType_t qd = pcclUint8;
                if (i == 2 && variant == 0) alg = pcclQuantNone;
                if (i == 2 && variant == 1) qd = pcclUint16;
                cmd[i] = q_submit(h, i, kinds[k], pcclSum, alg, qd, send[i], recv[i]);
            }
            smh_run(h);
            for (uint32_t i = 0; i < 3; i++) {
                pcclResult_t r;
                PT_ASSERT(smh_done(h, i, cmd[i], &r) && r == pcclInvalidUsage,
                          "kind %d variant %d: peer %u r=%d", (int)kinds[k], variant, i, (int)r);
            }
            smh_destroy(h);
        }
    }
}

PTEST(coll_peers, quantizing_a_kind_that_does_not_reduce_is_an_invalid_argument)
{
    const ccoip_coll_kind kinds[] = {CCOIP_COLL_BROADCAST,  CCOIP_COLL_ALL_GATHER,
                                     CCOIP_COLL_ALL_TO_ALL, CCOIP_COLL_GATHER,
                                     CCOIP_COLL_SCATTER,    CCOIP_COLL_BARRIER};
    smh *h = world_of(2, 1);
    PT_ASSERT(h != NULL, "ring of 2");
    float send[16] = {0}, recv[16] = {0};
    pcclResult_t r;
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        const uint64_t c =
            q_submit(h, 0, kinds[k], pcclSum, pcclQuantMinMax, pcclUint8, send, recv);
        smh_run(h);
        PT_ASSERT(smh_done(h, 0, c, &r) && r == pcclInvalidArgument, "kind %d: r=%d", (int)kinds[k],
                  (int)r);
    }
    /* Combinations the all-reduce refuses too: PREMUL_SUM, a float code type, an unknown
     * algorithm. */
    uint64_t c = q_submit(h, 0, CCOIP_COLL_REDUCE_SCATTER, pcclPremulSum, pcclQuantMinMax,
                          pcclUint8, send, recv);
    smh_run(h);
    PT_ASSERT(smh_done(h, 0, c, &r) && r == pcclInvalidArgument, "premul: r=%d", (int)r);
    c = q_submit(h, 0, CCOIP_COLL_REDUCE, pcclSum, pcclQuantMinMax, pcclFloat16, send, recv);
    smh_run(h);
    PT_ASSERT(smh_done(h, 0, c, &r) && r == pcclInvalidArgument, "fp16 codes: r=%d", (int)r);
    c = q_submit(h, 0, CCOIP_COLL_REDUCE, pcclSum, (pcclQuantizationAlgorithm_t)7, pcclUint8, send,
                 recv);
    smh_run(h);
    PT_ASSERT(smh_done(h, 0, c, &r) && r == pcclInvalidArgument, "algorithm 7: r=%d", (int)r);
    smh_destroy(h);
}

PTEST(coll_peers, a_quantized_reduce_scatter_of_non_finite_data_is_invalid_for_everyone)
{
    smh *h = world_of(3, 1);
    PT_ASSERT(h != NULL, "ring of 3");
    float send[3][24], recv[3][8];
    uint64_t cmd[3];
    for (uint32_t i = 0; i < 3; i++) {
        for (int e = 0; e < 24; e++)
            send[i][e] = (float)e;
        if (i == 1) send[i][5] = 1.0f / 0.0f;
        cmd[i] = q_submit(h, i, CCOIP_COLL_REDUCE_SCATTER, pcclSum, pcclQuantMinMax, pcclUint8,
                          send[i], recv[i]);
    }
    smh_run(h);
    for (uint32_t i = 0; i < 3; i++) {
        pcclResult_t r;
        PT_ASSERT(smh_done(h, i, cmd[i], &r) && r == pcclInvalidArgument, "peer %u r=%d", i,
                  (int)r);
    }
    smh_destroy(h);
}
