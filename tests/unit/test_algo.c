/*
 * test_algo.c — the algorithm collection's selection and tuned table (core/algo.c,
 * docs/algorithms.md): which algorithms apply where, the built-in rule, forced and tabled
 * choices, the wire encoding (malformed tables refused), the master's median combination
 * (ties, members that did not run a candidate), and the text form pcclTuneSave writes.
 */
#include <math.h>
#include <string.h>

#include "ccoip_algo.h"
#include "ptest.h"

#define CHECK(c) PT_ASSERT(c, "%s", #c)

static ccoip_algo_query ar(uint64_t bytes, uint32_t world)
{
    const ccoip_algo_query q = {CCOIP_COLL_ALL_REDUCE, bytes / 4u, 4u, world, false, false,
                                (uint64_t)32 << 10};
    return q;
}

PTEST(algo, names_and_size_classes)
{
    ccoip_algo a;
    CHECK(strcmp(ccoip_algo_name(CCOIP_ALGO_RING_STRIPED), "ring_striped") == 0);
    CHECK(strcmp(ccoip_algo_name(CCOIP_ALGO_HALVING_DOUBLING), "halving_doubling") == 0);
    CHECK(ccoip_algo_name(6) == NULL);
    CHECK(ccoip_algo_parse("direct", 6, &a) && a == CCOIP_ALGO_DIRECT);
    CHECK(!ccoip_algo_parse("direc", 5, &a) && !ccoip_algo_parse("rings", 5, &a));
    CHECK(ccoip_algo_size_class(1) == 0 && ccoip_algo_size_class(1024) == 0);
    CHECK(ccoip_algo_size_class(1025) == 1 && ccoip_algo_size_class(4096) == 2);
    CHECK(ccoip_algo_size_class((uint64_t)256 << 20) == 18);
    CHECK(ccoip_algo_size_class(UINT64_MAX) == 18);
}

PTEST(algo, applicability_and_rule)
{
    ccoip_algo_query q = ar(4096, 3);
    CHECK(ccoip_algo_applies(CCOIP_ALGO_RELAY, &q) && ccoip_algo_applies(CCOIP_ALGO_DIRECT, &q));
    CHECK(ccoip_algo_default(&q) == CCOIP_ALGO_RELAY);
    q = ar((uint64_t)64 << 10, 3); /* above the relay's 32 KiB */
    CHECK(!ccoip_algo_applies(CCOIP_ALGO_RELAY, &q) && ccoip_algo_applies(CCOIP_ALGO_DIRECT, &q));
    CHECK(ccoip_algo_default(&q) == CCOIP_ALGO_RING_STRIPED);
    q = ar((uint64_t)16 << 10, 2);
    q.relay_max = 0; /* relay off: the small all-reduce takes the direct path */
    CHECK(ccoip_algo_default(&q) == CCOIP_ALGO_DIRECT);
    q = ar((uint64_t)8 << 20, 2);
    CHECK(!ccoip_algo_applies(CCOIP_ALGO_DIRECT, &q) && ccoip_algo_applies(CCOIP_ALGO_RING, &q));
    q = ar(4096, 2);
    q.quantized = true;
    CHECK(!ccoip_algo_applies(CCOIP_ALGO_RELAY, &q) && !ccoip_algo_applies(CCOIP_ALGO_DIRECT, &q));
    CHECK(ccoip_algo_default(&q) == CCOIP_ALGO_RING_STRIPED);
    q = ar(4096, 2);
    q.premul = true;
    CHECK(ccoip_algo_default(&q) == CCOIP_ALGO_RING_STRIPED);
    q = ar(4096, 2);
    q.kind = CCOIP_COLL_ALL_GATHER;
    CHECK(!ccoip_algo_applies(CCOIP_ALGO_DIRECT, &q) && ccoip_algo_applies(CCOIP_ALGO_RELAY, &q));
    q.kind = CCOIP_COLL_SEND;
    CHECK(!ccoip_algo_applies(CCOIP_ALGO_RELAY, &q) && ccoip_algo_applies(CCOIP_ALGO_RING, &q));
    CHECK(!ccoip_algo_applies(CCOIP_ALGO_AUTO, &q));
    /* halving-doubling: all-reduce at N = 2, 4 (a group of one: the master refuses it as any),
     * at least N elements, unquantized; PREMUL_SUM runs */
    const uint32_t hd_worlds[] = {1, 2, 3, 4, 5, 8};
    const bool hd_ok[] = {true, true, false, true, false, false};
    for (uint32_t w = 0; w < 6; w++) {
        q = ar((uint64_t)1 << 20, hd_worlds[w]);
        CHECK(ccoip_algo_applies(CCOIP_ALGO_HALVING_DOUBLING, &q) == hd_ok[w]);
    }
    q = ar(12, 4); /* 3 elements at N = 4 */
    CHECK(!ccoip_algo_applies(CCOIP_ALGO_HALVING_DOUBLING, &q));
    q = ar(16, 4);
    q.premul = true;
    CHECK(ccoip_algo_applies(CCOIP_ALGO_HALVING_DOUBLING, &q));
    q.quantized = true;
    CHECK(!ccoip_algo_applies(CCOIP_ALGO_HALVING_DOUBLING, &q));
    q = ar(4096, 4);
    q.kind = CCOIP_COLL_REDUCE_SCATTER;
    CHECK(!ccoip_algo_applies(CCOIP_ALGO_HALVING_DOUBLING, &q));
    CHECK(ccoip_algo_resolve(CCOIP_ALGO_HALVING_DOUBLING, NULL, &q) == CCOIP_ALGO_AUTO);
    /* forced where it does not fit: kept (it runs the ring there), never chosen by AUTO */
    q = ar(4096, 3);
    CHECK(ccoip_algo_forcible(CCOIP_ALGO_HALVING_DOUBLING, &q));
    CHECK(ccoip_algo_resolve(CCOIP_ALGO_HALVING_DOUBLING, NULL, &q) == CCOIP_ALGO_HALVING_DOUBLING);
    q.quantized = true;
    CHECK(ccoip_algo_resolve(CCOIP_ALGO_HALVING_DOUBLING, NULL, &q) == CCOIP_ALGO_AUTO);
    /* the tuning round: the relay only, nothing without it */
    q = ar(CCOIP_ALGO_TIMINGS * 4u, 3);
    q.kind = CCOIP_COLL_TUNE;
    CHECK(ccoip_algo_applies(CCOIP_ALGO_RELAY, &q) && !ccoip_algo_applies(CCOIP_ALGO_RING, &q));
    CHECK(!ccoip_algo_applies(CCOIP_ALGO_RING_STRIPED, &q));
    CHECK(ccoip_algo_resolve(CCOIP_ALGO_AUTO, NULL, &q) == CCOIP_ALGO_RELAY);
    CHECK(ccoip_algo_resolve(CCOIP_ALGO_RING, NULL, &q) == CCOIP_ALGO_AUTO);
    q.relay_max = 0;
    CHECK(ccoip_algo_default(&q) == CCOIP_ALGO_AUTO);
}

PTEST(algo, median)
{
    double a[5] = {5, 1, 4, 2, 3}, b[4] = {9, 1, 2, 7};
    CHECK(ccoip_algo_median(a, 5) == 3.0);
    CHECK(ccoip_algo_median(b, 4) == 4.5);
    CHECK(isnan(ccoip_algo_median(b, 0)));
}

PTEST(algo, resolve_forced_table_rule)
{
    ccoip_algo_table t;
    ccoip_algo_table_clear(&t);
    CHECK(ccoip_algo_table_empty(&t));
    ccoip_algo_query q = ar((uint64_t)64 << 10, 3);
    CHECK(ccoip_algo_resolve(CCOIP_ALGO_AUTO, &t, &q) == CCOIP_ALGO_RING_STRIPED);
    t.algo[CCOIP_COLL_ALL_REDUCE][3 - 2][ccoip_algo_size_class((uint64_t)64 << 10)] =
        CCOIP_ALGO_DIRECT;
    CHECK(!ccoip_algo_table_empty(&t));
    CHECK(ccoip_algo_resolve(CCOIP_ALGO_AUTO, &t, &q) == CCOIP_ALGO_DIRECT);
    /* another kind reads its own row: a broadcast's entry, the all-gather's empty one */
    q.kind = CCOIP_COLL_BROADCAST;
    CHECK(ccoip_algo_resolve(CCOIP_ALGO_AUTO, &t, &q) == CCOIP_ALGO_RING_STRIPED);
    t.algo[CCOIP_COLL_BROADCAST][3 - 2][ccoip_algo_size_class((uint64_t)64 << 10)] =
        CCOIP_ALGO_RING;
    CHECK(ccoip_algo_resolve(CCOIP_ALGO_AUTO, &t, &q) == CCOIP_ALGO_RING);
    q.kind = CCOIP_COLL_ALL_GATHER;
    CHECK(ccoip_algo_resolve(CCOIP_ALGO_AUTO, &t, &q) == CCOIP_ALGO_RING_STRIPED);
    q.kind = CCOIP_COLL_ALL_REDUCE;
    /* another world's row, or a tabled entry that does not apply: the rule */
    q.world = 4;
    CHECK(ccoip_algo_resolve(CCOIP_ALGO_AUTO, &t, &q) == CCOIP_ALGO_RING_STRIPED);
    q.world = 3;
    q.quantized = true;
    CHECK(ccoip_algo_resolve(CCOIP_ALGO_AUTO, &t, &q) == CCOIP_ALGO_RING_STRIPED);
    q.quantized = false;
    /* forced wins; forced and impossible: AUTO (the caller refuses the op) */
    CHECK(ccoip_algo_resolve(CCOIP_ALGO_RING, &t, &q) == CCOIP_ALGO_RING);
    CHECK(ccoip_algo_resolve(CCOIP_ALGO_RELAY, &t, &q) == CCOIP_ALGO_AUTO);
    /* another kind reads its own row (tabled RING above; forced relay here: AUTO) */
    q.kind = CCOIP_COLL_BROADCAST;
    CHECK(ccoip_algo_resolve(CCOIP_ALGO_AUTO, &t, &q) == CCOIP_ALGO_RING);
}

PTEST(algo, encoding)
{
    ccoip_algo_table t, u;
    ccoip_algo_table_clear(&t);
    t.algo[CCOIP_COLL_ALL_REDUCE][0][0] = CCOIP_ALGO_RELAY;
    t.algo[CCOIP_COLL_ALL_REDUCE][6][18] = CCOIP_ALGO_RING;
    uint8_t b[CCOIP_ALGO_TABLE_BYTES];
    ccoip_algo_table_encode(&t, b);
    CHECK(b[0] == CCOIP_ALGO_TABLE_VERSION);
    CHECK(ccoip_algo_table_decode(b, sizeof b, &u) == pcclSuccess);
    CHECK(memcmp(&t, &u, sizeof t) == 0);
    CHECK(ccoip_algo_table_decode(b, sizeof b - 1u, &u) == pcclInvalidArgument);
    CHECK(ccoip_algo_table_decode(NULL, 0, &u) == pcclInvalidArgument);
    b[5] = 6; /* no such algorithm */
    CHECK(ccoip_algo_table_decode(b, sizeof b, &u) == pcclInvalidArgument);
    b[5] = 0;
    b[0] = 1; /* another version (v1: the all-reduce's rows only) */
    CHECK(ccoip_algo_table_decode(b, sizeof b, &u) == pcclInvalidArgument);
}

/* A report: seconds per (class, candidate), 0: not run. */
static void put_time(uint8_t *r, uint32_t k, ccoip_algo a, float s)
{
    memcpy(r + (size_t)(k * CCOIP_ALGO_COUNT + (uint32_t)a - 1u) * 4u, &s, 4);
}

PTEST(algo, combine_median_over_members)
{
    static uint8_t rep[3][CCOIP_ALGO_TIMINGS * 4u];
    memset(rep, 0, sizeof rep);
    /* class 0: ring 1,1,9 (median 1) beats direct 2,2,0.5 (median 2): one slow member does not
     * decide */
    const float ring[3] = {1.0f, 1.0f, 9.0f}, direct[3] = {2.0f, 2.0f, 0.5f};
    for (uint32_t m = 0; m < 3; m++) {
        put_time(rep[m], 0, CCOIP_ALGO_RING, ring[m]);
        put_time(rep[m], 0, CCOIP_ALGO_DIRECT, direct[m]);
        /* class 1: relay not run by member 2: out; ring_striped vs ring tie: the lower number */
        if (m != 2) put_time(rep[m], 1, CCOIP_ALGO_RELAY, 0.1f);
        put_time(rep[m], 1, CCOIP_ALGO_RING, 3.0f);
        put_time(rep[m], 1, CCOIP_ALGO_RING_STRIPED, 3.0f);
        /* class 2: NaN and negatives are "not run" */
        put_time(rep[m], 2, CCOIP_ALGO_RING, NAN);
        put_time(rep[m], 2, CCOIP_ALGO_DIRECT, -1.0f);
    }
    const uint8_t *in[3] = {rep[0], rep[1], rep[2]};
    ccoip_algo_table t;
    ccoip_algo_table_clear(&t);
    t.algo[CCOIP_COLL_ALL_REDUCE][4 - 2][0] = CCOIP_ALGO_RELAY; /* another world's row is kept */
    CHECK(ccoip_algo_combine(&t, CCOIP_COLL_ALL_REDUCE, 3, in, 3) == pcclSuccess);
    CHECK(t.algo[CCOIP_COLL_ALL_REDUCE][1][0] == CCOIP_ALGO_RING);
    CHECK(t.algo[CCOIP_COLL_ALL_REDUCE][1][1] == CCOIP_ALGO_RING);
    CHECK(t.algo[CCOIP_COLL_ALL_REDUCE][1][2] == CCOIP_ALGO_AUTO);
    CHECK(t.algo[CCOIP_COLL_ALL_REDUCE][1][18] == CCOIP_ALGO_AUTO);
    CHECK(t.algo[CCOIP_COLL_ALL_REDUCE][2][0] == CCOIP_ALGO_RELAY);
    /* even count: the mean of the two middle ones (ring 1,9 → 5 loses to direct 2,2 → 2) */
    CHECK(ccoip_algo_combine(&t, CCOIP_COLL_ALL_REDUCE, 2, in + 1, 2) == pcclSuccess);
    CHECK(t.algo[CCOIP_COLL_ALL_REDUCE][0][0] == CCOIP_ALGO_DIRECT);
    CHECK(ccoip_algo_combine(&t, CCOIP_COLL_ALL_REDUCE, 1, in, 1) == pcclInvalidArgument);
    CHECK(ccoip_algo_combine(&t, CCOIP_COLL_ALL_REDUCE, 9, in, 3) == pcclInvalidArgument);
    /* another kind's row: only that row changes; a kind beyond the table is refused */
    ccoip_algo_table before = t;
    CHECK(ccoip_algo_combine(&t, CCOIP_COLL_ALL_GATHER, 3, in, 3) == pcclSuccess);
    CHECK(t.algo[CCOIP_COLL_ALL_GATHER][1][0] == CCOIP_ALGO_RING);
    before.algo[CCOIP_COLL_ALL_GATHER][1][0] = CCOIP_ALGO_RING;
    before.algo[CCOIP_COLL_ALL_GATHER][1][1] = CCOIP_ALGO_RING;
    CHECK(memcmp(&t, &before, sizeof t) == 0);
    CHECK(ccoip_algo_combine(&t, CCOIP_ALGO_KINDS, 3, in, 3) == pcclInvalidArgument);
}

PTEST(algo, text_form)
{
    ccoip_algo_table t, u;
    ccoip_algo_table_clear(&t);
    for (uint32_t k = 0; k < CCOIP_ALGO_SIZES; k++) {
        t.algo[CCOIP_COLL_ALL_REDUCE][0][k] =
            (uint8_t)(k < 5 ? CCOIP_ALGO_RELAY : CCOIP_ALGO_RING_STRIPED);
        t.algo[CCOIP_COLL_ALL_REDUCE][2][k] = (uint8_t)(k % 5u);
    }
    /* another kind's row: "<kind> world N:" */
    for (uint32_t k = 0; k < CCOIP_ALGO_SIZES; k++)
        t.algo[CCOIP_COLL_BROADCAST][1][k] = (uint8_t)(k < 3 ? CCOIP_ALGO_RELAY : CCOIP_ALGO_RING);
    t.algo[CCOIP_COLL_BARRIER][2][0] = CCOIP_ALGO_RELAY;
    char buf[4096];
    const size_t n = ccoip_algo_table_format(&t, buf, sizeof buf);
    CHECK(strstr(buf, "\nbroadcast world 3: relay relay relay ring ring") != NULL);
    CHECK(strstr(buf, "\nbarrier world 4: relay auto auto") != NULL);
    CHECK(strstr(buf, "all_reduce") == NULL ||
          strstr(buf, "(\"world N:\" lines: all_reduce)") != NULL);
    CHECK(n < sizeof buf && strlen(buf) == n);
    CHECK(strstr(buf, "world 2: relay relay relay relay relay ring_striped") != NULL);
    CHECK(strstr(buf, "world 4: auto relay direct ring ring_striped auto") != NULL);
    CHECK(strstr(buf, "\nworld 3") == NULL);
    CHECK(ccoip_algo_table_parse(buf, n, &u) == pcclSuccess && memcmp(&t, &u, sizeof t) == 0);
    char small[16];
    CHECK(ccoip_algo_table_format(&t, small, sizeof small) == n && strlen(small) == 15);
    static const char *const bad[] = {
        "world 9: ring\n",
        "world 2: ring\n",
        "world 2 ring ring\n",
        "wrld 2: ring\n",
        "world 2: ring ring ring ring ring ring ring ring ring ring ring ring ring ring ring "
        "ring ring ring ring ring\n",
        "world 2: ring ring ring ring ring ring ring ring ring ring ring ring ring ring ring "
        "ring ring ring fast\n",
        "gossip world 2: ring ring ring ring ring ring ring ring ring ring ring ring ring ring "
        "ring ring ring ring ring\n",
        "broadcastworld 2: ring ring ring ring ring ring ring ring ring ring ring ring ring ring "
        "ring ring ring ring ring\n",
        "broadcast world 2 ring\n"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK(ccoip_algo_table_parse(bad[i], strlen(bad[i]), &u) == pcclInvalidArgument);
    const char ok[] = "# comment\n\n  world 3: ring ring ring ring ring ring ring ring ring ring "
                      "ring ring ring ring ring ring ring ring direct  \n";
    CHECK(ccoip_algo_table_parse(ok, strlen(ok), &u) == pcclSuccess);
    CHECK(u.algo[CCOIP_COLL_ALL_REDUCE][1][0] == CCOIP_ALGO_RING &&
          u.algo[CCOIP_COLL_ALL_REDUCE][1][18] == CCOIP_ALGO_DIRECT);
    CHECK(u.algo[CCOIP_COLL_ALL_REDUCE][0][0] == CCOIP_ALGO_AUTO);
}
