/*
 * test_algo_peers.c — the algorithm collection on real peer and master machines in memory
 * (tests/common/sm_harness.c; docs/algorithms.md):
 *   - every all-reduce algorithm, forced, exact on integers and bit-identical across ranks on
 *     floats at N = 1..8 (ring and ring_striped also bit-identical to each other);
 *   - members forcing different algorithms: pcclInvalidUsage for all; an algorithm that cannot
 *     run the op: pcclInvalidArgument;
 *   - a tuning round installs one table, the master's median combination of the timings, at
 *     every member, and a peer that joins later receives it with its plan.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ccoip_algo.h"
#include "ccoip_master.h"
#include "ccoip_peer.h"
#include "ccoip_ring.h"
#include "ptest.h"
#include "sm_harness.h"

#define NMAX 8u

static smh *world_of(uint32_t n, uint32_t pool)
{
    return smh_ring_of(n, pool, (uint64_t)32 << 10, 0);
}

static uint64_t submit_op(smh *h, uint32_t i, pcclDataType_t dt, uint64_t count, uint32_t algo,
                          pcclRedOp_t op, uint64_t tag, const void *send, void *recv)
{
    ccoip_allreduce_args a;
    memset(&a, 0, sizeof a);
    a.tag = tag;
    a.count = count;
    a.dtype = dt;
    a.op = op;
    a.in_place = send == recv;
    if (op == pcclPremulSum) a.premul = 0.5 + 0.25 * (double)ccoip_peer_rank(smh_peer(h, i));
    a.quant_algorithm = pcclQuantNone;
    a.quant_dtype = dt;
    a.kind = CCOIP_COLL_ALL_REDUCE;
    a.world = ccoip_peer_world_size(smh_peer(h, i));
    a.send_bytes = a.recv_bytes = count * 4u;
    a.algorithm = algo;
    return smh_allreduce(h, i, &a, send, recv);
}

static uint64_t submit_ar(smh *h, uint32_t i, pcclDataType_t dt, uint64_t count, uint32_t algo,
                          uint64_t tag, const void *send, void *recv)
{
    return submit_op(h, i, dt, count, algo, pcclSum, tag, send, recv);
}

static int32_t ival(uint32_t r, uint64_t k)
{
    return (int32_t)((r * 7919u + (uint32_t)k * 131u + 3u) % 40009u) - 20000;
}

static float fval(uint32_t r, uint64_t k)
{
    /* values of many magnitudes: a different order of the sum changes the bits */
    return (float)ival(r, k) * (k % 3u == 0 ? 1e-3f : k % 3u == 1 ? 1.0f : 1e3f) + 0.1f;
}

/* One forced all-reduce (op; in place or not) at N members: int32 identical at every rank
 * (and exact for SUM), float32 identical at every rank; the results of rank 0 into i_out and
 * f_out (count elements; i_out may be NULL). PREMUL_SUM: floats only. */
static void run_case(uint32_t n, uint32_t algo, uint64_t count, uint32_t pool, pcclRedOp_t op,
                     bool in_place, int32_t *i_out, float *f_out)
{
    smh *h = world_of(n, pool);
    PT_ASSERT(h != NULL, "ring of %u", n);
    int32_t *is[NMAX] = {0}, *ir[NMAX] = {0};
    float *fs[NMAX] = {0}, *fr[NMAX] = {0};
    uint64_t ci[NMAX] = {0}, cf[NMAX] = {0};
    for (uint32_t i = 0; i < n; i++) {
        const uint32_t rank = (uint32_t)ccoip_peer_rank(smh_peer(h, i));
        is[i] = malloc((size_t)count * 4u);
        ir[i] = malloc((size_t)count * 4u);
        fs[i] = malloc((size_t)count * 4u);
        fr[i] = malloc((size_t)count * 4u);
        for (uint64_t k = 0; k < count; k++) {
            is[i][k] = ival(rank, k);
            fs[i][k] = fval(rank, k);
        }
        if (in_place) {
            memcpy(ir[i], is[i], (size_t)count * 4u);
            memcpy(fr[i], fs[i], (size_t)count * 4u);
        }
        const bool ints = op != pcclPremulSum;
        ci[i] =
            ints ? submit_op(h, i, pcclInt32, count, algo, op, 1, in_place ? ir[i] : is[i], ir[i])
                 : 0;
        cf[i] = submit_op(h, i, pcclFloat, count, algo, op, 2, in_place ? fr[i] : fs[i], fr[i]);
    }
    smh_run(h);
    uint32_t r0 = 0;
    for (uint32_t i = 0; i < n; i++) {
        pcclResult_t r;
        PT_ASSERT(ci[i] == 0 || (smh_done(h, i, ci[i], &r) && r == pcclSuccess),
                  "n %u algo %u int peer %u r=%d", n, algo, i, (int)r);
        PT_ASSERT(smh_done(h, i, cf[i], &r) && r == pcclSuccess, "n %u algo %u float peer %u r=%d",
                  n, algo, i, (int)r);
        for (uint64_t k = 0; k < count && op == pcclSum; k++) {
            int32_t want = 0;
            for (uint32_t q = 0; q < n; q++)
                want += ival(q, k);
            PT_ASSERT(ir[i][k] == want, "n %u algo %u peer %u [%llu] %d != %d", n, algo, i,
                      (unsigned long long)k, ir[i][k], want);
        }
        if (ccoip_peer_rank(smh_peer(h, i)) == 0) r0 = i;
    }
    for (uint32_t i = 0; i < n; i++) {
        PT_ASSERT(memcmp(fr[i], fr[r0], (size_t)count * 4u) == 0,
                  "n %u algo %u: peer %u's float result differs from rank 0's", n, algo, i);
        PT_ASSERT(ci[i] == 0 || memcmp(ir[i], ir[r0], (size_t)count * 4u) == 0,
                  "n %u algo %u: peer %u's int result differs from rank 0's", n, algo, i);
    }
    memcpy(f_out, fr[r0], (size_t)count * 4u);
    if (i_out != NULL) memcpy(i_out, ir[r0], (size_t)count * 4u);
    PT_ASSERT(smh_step_errors(h) == 0, "no step errors");
    for (uint32_t i = 0; i < n; i++) {
        free(is[i]);
        free(ir[i]);
        free(fs[i]);
        free(fr[i]);
    }
    smh_destroy(h);
}

static void run_algo(uint32_t n, uint32_t algo, uint64_t count, uint32_t pool, float *f_out)
{
    run_case(n, algo, count, pool, pcclSum, false, NULL, f_out);
}

PTEST(algo_peers, every_algorithm_exact_and_identical_n1_to_n8)
{
    static const uint32_t algos[] = {CCOIP_ALGO_RELAY, CCOIP_ALGO_DIRECT, CCOIP_ALGO_RING,
                                     CCOIP_ALGO_RING_STRIPED, CCOIP_ALGO_HALVING_DOUBLING};
    const uint64_t count = 1001; /* 4004 bytes: every algorithm applies */
    float *ring = malloc((size_t)count * 4u), *got = malloc((size_t)count * 4u),
          *relay = malloc((size_t)count * 4u);
    /* N = 1: every algorithm is refused alike (a group of one, as PCCL 1.0: pcclTooFewPeers) */
    smh *h = world_of(1, 1);
    PT_ASSERT(h != NULL, "a group of one");
    for (size_t a = 0; a < sizeof algos / sizeof algos[0]; a++) {
        const uint64_t c = submit_ar(h, 0, pcclFloat, count, algos[a], 1, ring, got);
        smh_run(h);
        pcclResult_t r;
        PT_ASSERT(smh_done(h, 0, c, &r) && r == pcclTooFewPeers, "n 1 algo %u r=%d", algos[a],
                  (int)r);
    }
    smh_destroy(h);
    for (uint32_t n = 2; n <= NMAX; n++) {
        for (size_t a = 0; a < sizeof algos / sizeof algos[0]; a++) {
            if (algos[a] == CCOIP_ALGO_HALVING_DOUBLING && n != 2u && n != 4u) continue; /* below */
            run_algo(n, algos[a], count, 1,
                     algos[a] == CCOIP_ALGO_RING    ? ring
                     : algos[a] == CCOIP_ALGO_RELAY ? relay
                                                    : got);
            if (algos[a] == CCOIP_ALGO_RING_STRIPED) {
                PT_ASSERT(memcmp(ring, got, (size_t)count * 4u) == 0,
                          "n %u: ring and ring_striped give the same bits", n);
            }
            if (algos[a] == CCOIP_ALGO_DIRECT) {
                /* ranks follow peer ids here: the master's order is the members' */
                PT_ASSERT(memcmp(relay, got, (size_t)count * 4u) == 0,
                          "n %u: relay and direct give the same bits", n);
            }
        }
    }
    free(ring);
    free(got);
    free(relay);
}

PTEST(algo_peers, striped_and_plain_ring_same_bits_over_a_pool)
{
    /* 3 MiB at N = 3 (1 MiB chunks): ring_striped cuts each step over both connections (two
     * stripes of >= 512 KiB, ccoip_ring_stripes), ring does not */
    const uint64_t count = (3u << 20) / 4u + 7u;
    PT_ASSERT(ccoip_ring_stripes((count / 3u) * 4u, 2) == 2u, "the steps stripe");
    float *ring = malloc((size_t)count * 4u), *got = malloc((size_t)count * 4u);
    run_algo(3, CCOIP_ALGO_RING, count, 2, ring);
    run_algo(3, CCOIP_ALGO_RING_STRIPED, count, 2, got);
    PT_ASSERT(memcmp(ring, got, (size_t)count * 4u) == 0, "same bits");
    run_algo(2, CCOIP_ALGO_DIRECT, (1u << 20) / 4u, 2, got); /* 1 MiB direct */
    free(ring);
    free(got);
}

PTEST(algo_peers, members_forcing_different_algorithms_are_invalid_usage_for_all)
{
    /* forced ring vs ring_striped; forced direct vs AUTO (which resolves to relay here) */
    static const uint32_t first[2] = {CCOIP_ALGO_RING, CCOIP_ALGO_DIRECT};
    static const uint32_t rest[2] = {CCOIP_ALGO_RING_STRIPED, CCOIP_ALGO_AUTO};
    for (uint32_t t = 0; t < 2; t++) {
        smh *h = world_of(3, 1);
        PT_ASSERT(h != NULL, "ring of 3");
        int32_t s[3][64], r[3][64];
        uint64_t c[3];
        for (uint32_t i = 0; i < 3; i++) {
            for (uint32_t k = 0; k < 64; k++)
                s[i][k] = (int32_t)(i + k);
            memset(r[i], 0x5A, sizeof r[i]);
            c[i] = submit_ar(h, i, pcclInt32, 64, i == 1 ? first[t] : rest[t], 3, s[i], r[i]);
        }
        smh_run(h);
        for (uint32_t i = 0; i < 3; i++) {
            pcclResult_t res;
            PT_ASSERT(smh_done(h, i, c[i], &res) && res == pcclInvalidUsage, "case %u peer %u r=%d",
                      t, i, (int)res);
            PT_ASSERT(((const uint8_t *)r[i])[0] == 0x5A, "nothing written");
        }
        smh_destroy(h);
    }
}

PTEST(algo_peers, an_algorithm_that_cannot_run_the_op_is_an_invalid_argument)
{
    smh *h = world_of(2, 1);
    PT_ASSERT(h != NULL, "ring of 2");
    static int32_t s[(64u << 10) / 4u], r[(64u << 10) / 4u];
    /* relay above the master's 32 KiB; an unknown number */
    const uint64_t c1 = submit_ar(h, 0, pcclInt32, (64u << 10) / 4u, CCOIP_ALGO_RELAY, 4, s, r);
    const uint64_t c2 = submit_ar(h, 0, pcclInt32, 16, 9, 5, s, r);
    smh_run(h);
    pcclResult_t res;
    PT_ASSERT(smh_done(h, 0, c1, &res) && res == pcclInvalidArgument, "relay 64 KiB r=%d",
              (int)res);
    PT_ASSERT(smh_done(h, 0, c2, &res) && res == pcclInvalidArgument, "algorithm 9 r=%d", (int)res);
    smh_destroy(h);
}

/* Member i's report: class k's candidate c takes (k + 1) * (c + 1 + skew) ms, except that
 * direct is fastest below 64 KiB for the members' median. */
/* Peer i's tuning round of kind (the round's root) over a world of n: rep in, the table out. */
static uint64_t submit_tune(smh *h, uint32_t i, uint32_t n, uint32_t kind, const float *rep,
                            uint8_t *tbl)
{
    ccoip_allreduce_args a;
    memset(&a, 0, sizeof a);
    a.tag = 77;
    a.count = CCOIP_ALGO_TIMINGS;
    a.dtype = pcclFloat;
    a.op = pcclSum;
    a.quant_algorithm = pcclQuantNone;
    a.kind = CCOIP_COLL_TUNE;
    a.root = kind;
    a.pinned_epoch = ccoip_peer_epoch(smh_peer(h, i));
    a.world = n;
    a.send_bytes = CCOIP_ALGO_TIMINGS * 4u;
    a.recv_bytes = CCOIP_ALGO_TABLE_BYTES;
    return smh_allreduce(h, i, &a, rep, tbl);
}

static void report_of(uint32_t i, float *rep)
{
    for (uint32_t k = 0; k < CCOIP_ALGO_SIZES; k++) {
        for (uint32_t c = 0; c < CCOIP_ALGO_COUNT; c++) {
            float t = (float)(k + 1u) * (float)(c + 1u) * 1e-3f;
            if (c + 1u == CCOIP_ALGO_DIRECT && k < 6u) t = i == 0 ? 1.0f : 1e-6f;
            rep[k * CCOIP_ALGO_COUNT + c] = t * (1.0f + 0.01f * (float)i);
        }
    }
}

PTEST(algo_peers, a_tuning_round_installs_one_table_everywhere_and_for_joiners)
{
    smh *h = world_of(3, 1);
    PT_ASSERT(h != NULL, "ring of 3");
    float rep[3][CCOIP_ALGO_TIMINGS];
    uint8_t tbl[3][CCOIP_ALGO_TABLE_BYTES];
    uint64_t c[3];
    for (uint32_t i = 0; i < 3; i++) {
        report_of(i, rep[i]);
        c[i] = submit_tune(h, i, 3, CCOIP_COLL_ALL_REDUCE, rep[i], tbl[i]);
    }
    smh_run(h);
    /* the expected table: the combination of the three reports */
    ccoip_algo_table want, got;
    ccoip_algo_table_clear(&want);
    const uint8_t *in[3] = {(const uint8_t *)rep[0], (const uint8_t *)rep[1],
                            (const uint8_t *)rep[2]};
    PT_ASSERT(ccoip_algo_combine(&want, CCOIP_COLL_ALL_REDUCE, 3, in, 3) == pcclSuccess, "combine");
    PT_ASSERT(want.algo[CCOIP_COLL_ALL_REDUCE][1][0] == CCOIP_ALGO_DIRECT &&
                  want.algo[CCOIP_COLL_ALL_REDUCE][1][7] == CCOIP_ALGO_RELAY,
              "the median: direct where two of three members found it fastest");
    for (uint32_t i = 0; i < 3; i++) {
        pcclResult_t r;
        PT_ASSERT(smh_done(h, i, c[i], &r) && r == pcclSuccess, "peer %u r=%d", i, (int)r);
        ccoip_peer_algo_table(smh_peer(h, i), &got);
        PT_ASSERT(memcmp(&got, &want, sizeof got) == 0, "peer %u holds the group's table", i);
        PT_ASSERT(ccoip_algo_table_decode(tbl[i], sizeof tbl[i], &got) == pcclSuccess &&
                      memcmp(&got, &want, sizeof got) == 0,
                  "peer %u's RECV has it", i);
    }
    /* AUTO now follows it: a 4 KiB all-reduce at N = 3 runs direct (the rule says relay) */
    const ccoip_algo_query q = {CCOIP_COLL_ALL_REDUCE, 1024, 4, 3, false, false, 32u << 10};
    PT_ASSERT(ccoip_algo_default(&q) == CCOIP_ALGO_RELAY, "the rule");
    ccoip_peer_algo_table(smh_peer(h, 0), &got);
    PT_ASSERT(ccoip_algo_resolve(CCOIP_ALGO_AUTO, &got, &q) == CCOIP_ALGO_DIRECT, "the table");
    /* every member runs an AUTO all-reduce with it: they agree */
    int32_t s[3][1024], out[3][1024];
    for (uint32_t i = 0; i < 3; i++) {
        for (uint32_t k = 0; k < 1024; k++)
            s[i][k] = (int32_t)(i * 1000u + k);
        c[i] = submit_ar(h, i, pcclInt32, 1024, CCOIP_ALGO_AUTO, 8, s[i], out[i]);
    }
    smh_run(h);
    for (uint32_t i = 0; i < 3; i++) {
        pcclResult_t r;
        PT_ASSERT(smh_done(h, i, c[i], &r) && r == pcclSuccess, "auto peer %u r=%d", i, (int)r);
        PT_ASSERT(out[i][5] == 3000 + 15, "exact");
    }
    /* a fourth peer joins: its plan carries the table */
    const uint32_t j = smh_add_peer(h, 0);
    const uint64_t cj = smh_submit(h, j, CCOIP_CMD_CONNECT);
    smh_run(h);
    uint64_t u[3];
    for (uint32_t i = 0; i < 3; i++)
        u[i] = smh_submit(h, i, CCOIP_CMD_UPDATE_TOPOLOGY);
    smh_run(h);
    pcclResult_t r;
    PT_ASSERT(smh_done(h, j, cj, &r) && r == pcclSuccess, "joined r=%d", (int)r);
    for (uint32_t i = 0; i < 3; i++)
        PT_ASSERT(smh_done(h, i, u[i], &r) && r == pcclSuccess, "update %u r=%d", i, (int)r);
    ccoip_peer_algo_table(smh_peer(h, j), &got);
    PT_ASSERT(memcmp(&got, &want, sizeof got) == 0, "the joiner holds the group's table");
    smh_destroy(h);
}

/* A broadcast of 64 int32 from rank 0 at every member of h (tag), AUTO; exact. */
static void broadcast_exact(smh *h, uint32_t n, uint64_t tag)
{
    int32_t b[8][64];
    uint64_t c[8];
    for (uint32_t i = 0; i < n; i++) {
        const int rank = ccoip_peer_rank(smh_peer(h, i));
        for (uint32_t k = 0; k < 64; k++)
            b[i][k] = rank == 0 ? (int32_t)(k * 3u + 1u) : -1;
        ccoip_allreduce_args a;
        memset(&a, 0, sizeof a);
        a.tag = tag;
        a.count = 64;
        a.dtype = pcclInt32;
        a.op = pcclSum;
        a.quant_algorithm = pcclQuantNone;
        a.quant_dtype = pcclInt32;
        a.kind = CCOIP_COLL_BROADCAST;
        a.in_place = true;
        a.root = 0;
        a.pinned_epoch = ccoip_peer_epoch(smh_peer(h, i));
        a.world = n;
        a.send_bytes = a.recv_bytes = sizeof b[i];
        c[i] = smh_allreduce(h, i, &a, b[i], b[i]);
    }
    smh_run(h);
    for (uint32_t i = 0; i < n; i++) {
        pcclResult_t r;
        PT_ASSERT(smh_done(h, i, c[i], &r) && r == pcclSuccess, "broadcast peer %u r=%d", i,
                  (int)r);
        for (uint32_t k = 0; k < 64; k++)
            PT_ASSERT(b[i][k] == (int32_t)(k * 3u + 1u), "broadcast peer %u [%u]", i, k);
    }
}

PTEST(algo_peers, a_tuning_round_of_another_kind_installs_that_kinds_row)
{
    /* A broadcast round (root = the kind) whose timings make the ring fastest everywhere: the
     * broadcast row says ring, the all-reduce's stays empty; an AUTO broadcast of 256 bytes
     * (the rule: the relay) then runs the ring, exact. */
    smh *h = world_of(3, 1);
    PT_ASSERT(h != NULL, "ring of 3");
    broadcast_exact(h, 3, 40);
    uint64_t tx = 0, rx = 0;
    PT_ASSERT(!smh_ring_conns(h, 0, 40, &tx, &rx), "before: the relay (no ring frames)");
    float rep[3][CCOIP_ALGO_TIMINGS];
    uint8_t tbl[3][CCOIP_ALGO_TABLE_BYTES];
    uint64_t c[3];
    for (uint32_t i = 0; i < 3; i++) {
        memset(rep[i], 0, sizeof rep[i]);
        for (uint32_t k = 0; k < CCOIP_ALGO_SIZES; k++) {
            rep[i][k * CCOIP_ALGO_COUNT + CCOIP_ALGO_RELAY - 1u] = 2.0f;
            rep[i][k * CCOIP_ALGO_COUNT + CCOIP_ALGO_RING - 1u] = 1.0f + 0.1f * (float)i;
            rep[i][k * CCOIP_ALGO_COUNT + CCOIP_ALGO_RING_STRIPED - 1u] = 3.0f;
        }
        c[i] = submit_tune(h, i, 3, CCOIP_COLL_BROADCAST, rep[i], tbl[i]);
    }
    smh_run(h);
    for (uint32_t i = 0; i < 3; i++) {
        pcclResult_t r;
        PT_ASSERT(smh_done(h, i, c[i], &r) && r == pcclSuccess, "round peer %u r=%d", i, (int)r);
        ccoip_algo_table got;
        ccoip_peer_algo_table(smh_peer(h, i), &got);
        for (uint32_t k = 0; k < CCOIP_ALGO_SIZES; k++) {
            PT_ASSERT(got.algo[CCOIP_COLL_BROADCAST][1][k] == CCOIP_ALGO_RING, "peer %u class %u",
                      i, k);
            PT_ASSERT(got.algo[CCOIP_COLL_ALL_REDUCE][1][k] == CCOIP_ALGO_AUTO, "all-reduce row");
        }
    }
    broadcast_exact(h, 3, 41);
    PT_ASSERT(smh_ring_conns(h, 0, 41, &tx, &rx), "after: the ring (the tuned row)");
    smh_destroy(h);
}

PTEST(algo_peers, halving_doubling_every_op_in_place_and_uneven_counts)
{
    /* N = 2 and 4 (its partners are ring neighbours): every op, in place and not, counts that
     * halve unevenly down to count = N; ints equal the ring's (integer ops are exact under
     * every order), floats identical at every rank */
    static const uint64_t counts[] = {4, 5, 7, 1001, 65537};
    static const pcclRedOp_t ops[] = {pcclSum, pcclAvg, pcclProd, pcclMax, pcclMin, pcclPremulSum};
    for (uint32_t n = 2; n <= 4; n += 2) {
        for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
            const uint64_t count = counts[c];
            int32_t *ri = malloc((size_t)count * 4u), *hi = malloc((size_t)count * 4u);
            float *rf = malloc((size_t)count * 4u), *hf = malloc((size_t)count * 4u);
            for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
                const bool in_place = (c + o) % 2u == 1u;
                run_case(n, CCOIP_ALGO_RING, count, 1, ops[o], in_place, ri, rf);
                run_case(n, CCOIP_ALGO_HALVING_DOUBLING, count, 1, ops[o], in_place, hi, hf);
                PT_ASSERT(ops[o] == pcclPremulSum || memcmp(ri, hi, (size_t)count * 4u) == 0,
                          "n %u count %llu op %d: ints equal the ring's", n,
                          (unsigned long long)count, (int)ops[o]);
                if (n == 2u) {
                    /* two inputs: one reduction per element, commutative: the ring's bits */
                    PT_ASSERT(memcmp(rf, hf, (size_t)count * 4u) == 0,
                              "n 2 count %llu op %d: floats equal the ring's",
                              (unsigned long long)count, (int)ops[o]);
                }
            }
            free(ri);
            free(hi);
            free(rf);
            free(hf);
        }
    }
}

PTEST(algo_peers, halving_doubling_forced_where_it_does_not_fit_runs_the_ring)
{
    /* N = 3 (a partner would not be a neighbour), N = 5, and 3 elements at N = 4: the ring's
     * bits (a forcing program on a group whose size changes never fails for it) */
    static const uint32_t ns[3] = {3, 4, 5};
    static const uint64_t cs[3] = {1001, 3, 1001};
    for (uint32_t t = 0; t < 3; t++) {
        float ring[1001], hd[1001];
        run_algo(ns[t], CCOIP_ALGO_RING, cs[t], 1, ring);
        run_algo(ns[t], CCOIP_ALGO_HALVING_DOUBLING, cs[t], 1, hd);
        PT_ASSERT(memcmp(ring, hd, (size_t)cs[t] * 4u) == 0, "case %u: the ring's bits", t);
    }
    /* quantized: pcclInvalidArgument, nothing written */
    smh *h = world_of(4, 1);
    PT_ASSERT(h != NULL, "ring of 4");
    float s[64], r[64];
    memset(s, 0, sizeof s);
    memset(r, 0x5A, sizeof r);
    ccoip_allreduce_args a;
    memset(&a, 0, sizeof a);
    a.tag = 9;
    a.count = 64;
    a.dtype = pcclFloat;
    a.op = pcclSum;
    a.quant_algorithm = pcclQuantMinMax;
    a.quant_dtype = pcclUint8;
    a.kind = CCOIP_COLL_ALL_REDUCE;
    a.world = 4;
    a.send_bytes = a.recv_bytes = sizeof s;
    a.algorithm = CCOIP_ALGO_HALVING_DOUBLING;
    const uint64_t c = smh_allreduce(h, 0, &a, s, r);
    smh_run(h);
    pcclResult_t res;
    PT_ASSERT(smh_done(h, 0, c, &res) && res == pcclInvalidArgument, "r=%d", (int)res);
    PT_ASSERT(((const uint8_t *)r)[0] == 0x5A, "nothing written");
    smh_destroy(h);
}
