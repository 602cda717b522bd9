/*
 * test_tsp.c — the asymmetric TSP solver (core/tsp.c): exact cost equality
 * with brute force for random matrices N <= 8, the Held–Karp path up to 10,
 * heuristic quality (planted rings found exactly, within a bound of the
 * optimum on random instances, never worse than nearest neighbour),
 * determinism and argument checks; the link cost of a probe of any byte
 * count (ccoip_tsp_link_cost).
 */
#include <stdlib.h>
#include <string.h>

#include "ccoip_tsp.h"
#include "ptest.h"
#include "test_rng.h"

#define TMAX 64u

static uint64_t g_cost[TMAX * TMAX];
static uint64_t g_work[(1u << 14)]; /* 128 KiB, 8-aligned */

static void random_matrix(test_rng *r, uint32_t n, uint64_t maxc)
{
    for (uint32_t i = 0; i < n; i++) {
        for (uint32_t j = 0; j < n; j++) {
            g_cost[i * n + j] = i == j ? 0 : 1u + test_rng_below(r, maxc);
        }
    }
}

/* Brute force over permutations of 1 .. n-1 (Heap's algorithm, iterative). */
static uint64_t brute(uint32_t n)
{
    uint32_t t[TMAX], c[TMAX];
    for (uint32_t i = 0; i < n; i++) {
        t[i] = i;
        c[i] = 0;
    }
    uint64_t best = ccoip_tsp_tour_cost(n, g_cost, t);
    uint32_t m = n - 1u, *a = t + 1;
    uint32_t i = 1;
    while (i < m) {
        if (c[i] < i) {
            uint32_t k = (i % 2u == 0) ? 0 : c[i];
            uint32_t x = a[k];
            a[k] = a[i];
            a[i] = x;
            uint64_t v = ccoip_tsp_tour_cost(n, g_cost, t);
            if (v < best) best = v;
            c[i]++;
            i = 1;
        } else {
            c[i] = 0;
            i++;
        }
    }
    return best;
}

PTEST(tsp, exact_equals_brute_force_up_to_8)
{
    test_rng r;
    test_rng_seed(&r, 2026);
    for (uint32_t n = 1; n <= 8; n++) {
        for (uint32_t rep = 0; rep < 40; rep++) {
            random_matrix(&r, n, rep % 2 == 0 ? 1000u : 5u); /* many ties too */
            uint32_t tour[TMAX];
            uint64_t cost = 0;
            PT_ASSERT(ccoip_tsp_solve(n, g_cost, 0, g_work, sizeof(g_work), tour, &cost) ==
                          pcclSuccess,
                      "solve n=%u", n);
            PT_ASSERT(tour[0] == 0, "tour starts at 0");
            PT_ASSERT(ccoip_tsp_tour_cost(n, g_cost, tour) == cost,
                      "n=%u reported cost is the tour's", n);
            uint64_t b = n == 1 ? 0 : brute(n);
            PT_ASSERT(cost == b, "n=%u rep %u: exact %llu == brute %llu", n, rep,
                      (unsigned long long)cost, (unsigned long long)b);
        }
    }
}

PTEST(tsp, exact_up_to_10_beats_heuristic_and_is_deterministic)
{
    test_rng r;
    test_rng_seed(&r, 7);
    uint64_t worst_num = 0, worst_den = 1;
    for (uint32_t n = 9; n <= CCOIP_TSP_EXACT_MAX; n++) {
        for (uint32_t rep = 0; rep < 20; rep++) {
            random_matrix(&r, n, 1000u);
            uint32_t t1[TMAX], t2[TMAX], th[TMAX];
            uint64_t c1 = 0, c2 = 0, ch = 0;
            PT_ASSERT(ccoip_tsp_workspace_bytes(n) <= sizeof(g_work), "workspace bounded");
            PT_ASSERT(ccoip_tsp_solve(n, g_cost, 0, g_work, sizeof(g_work), t1, &c1) == pcclSuccess,
                      "solve");
            PT_ASSERT(ccoip_tsp_solve(n, g_cost, 0, g_work, sizeof(g_work), t2, &c2) == pcclSuccess,
                      "solve again");
            PT_ASSERT(c1 == c2 && memcmp(t1, t2, n * sizeof(uint32_t)) == 0, "deterministic");
            PT_ASSERT(ccoip_tsp_tour_cost(n, g_cost, t1) == c1, "valid tour");
            PT_ASSERT(ccoip_tsp_heuristic(n, g_cost, 0, g_work, sizeof(g_work), th, &ch) ==
                          pcclSuccess,
                      "heuristic");
            PT_ASSERT(ccoip_tsp_tour_cost(n, g_cost, th) == ch, "heuristic tour valid");
            PT_ASSERT(c1 <= ch, "exact %llu <= heuristic %llu", (unsigned long long)c1,
                      (unsigned long long)ch);
            if (ch * worst_den > worst_num * c1) {
                worst_num = ch;
                worst_den = c1;
            }
        }
    }
    /* Quality: on these random instances the heuristic stays within 1.5x of the optimum. */
    PT_ASSERT(worst_num * 2u <= worst_den * 3u, "heuristic within 1.5x (worst %llu / %llu)",
              (unsigned long long)worst_num, (unsigned long long)worst_den);
}

PTEST(tsp, heuristic_finds_planted_rings_beyond_exact)
{
    test_rng r;
    test_rng_seed(&r, 99);
    for (uint32_t n = 11; n <= TMAX; n += 7) {
        /* A random ring of cost-1 edges; every other edge costs 100..199. */
        uint32_t perm[TMAX];
        for (uint32_t i = 0; i < n; i++)
            perm[i] = i;
        for (uint32_t i = n - 1u; i > 0; i--) {
            uint32_t j = (uint32_t)test_rng_below(&r, i + 1u);
            uint32_t x = perm[i];
            perm[i] = perm[j];
            perm[j] = x;
        }
        for (uint32_t i = 0; i < n; i++) {
            for (uint32_t j = 0; j < n; j++)
                g_cost[i * n + j] = 100u + test_rng_below(&r, 100u);
        }
        for (uint32_t i = 0; i < n; i++)
            g_cost[perm[i] * n + perm[(i + 1u) % n]] = 1u;
        uint32_t t[TMAX];
        uint64_t c = 0;
        PT_ASSERT(ccoip_tsp_workspace_bytes(n) <= sizeof(g_work), "workspace bounded");
        PT_ASSERT(ccoip_tsp_solve(n, g_cost, 0, g_work, sizeof(g_work), t, &c) == pcclSuccess,
                  "solve n=%u", n);
        PT_ASSERT(c == n, "n=%u: planted ring found (cost %llu)", n, (unsigned long long)c);
        PT_ASSERT(ccoip_tsp_tour_cost(n, g_cost, t) == c, "valid tour");
    }
}

PTEST(tsp, local_search_improves_on_nearest_neighbour)
{
    /* More local-search passes are never worse than one, and better on some instance. */
    test_rng r;
    test_rng_seed(&r, 5);
    uint32_t better = 0;
    for (uint32_t rep = 0; rep < 30; rep++) {
        uint32_t n = 20u + rep;
        random_matrix(&r, n, 1000u);
        uint32_t t[TMAX], t1[TMAX];
        uint64_t c = 0, c1 = 0;
        PT_ASSERT(ccoip_tsp_heuristic(n, g_cost, 0, g_work, sizeof(g_work), t, &c) == pcclSuccess,
                  "heuristic");
        PT_ASSERT(ccoip_tsp_heuristic(n, g_cost, 1, g_work, sizeof(g_work), t1, &c1) == pcclSuccess,
                  "one pass");
        PT_ASSERT(c <= c1, "more passes never worse (%llu <= %llu)", (unsigned long long)c,
                  (unsigned long long)c1);
        if (c < c1) better++;
        PT_ASSERT(ccoip_tsp_tour_cost(n, g_cost, t) == c, "valid");
    }
    PT_ASSERT(better > 0, "further passes improve some instance (%u)", better);
}

PTEST(tsp, argument_checks)
{
    uint32_t t[4];
    uint64_t c;
    memset(g_cost, 0, sizeof(g_cost));
    PT_ASSERT(ccoip_tsp_solve(0, g_cost, 0, g_work, sizeof(g_work), t, &c) == pcclInvalidArgument,
              "n 0");
    PT_ASSERT(ccoip_tsp_solve(3, g_cost, 0, g_work, 8, t, &c) == pcclInvalidArgument,
              "small workspace");
    g_cost[1] = CCOIP_TSP_COST_MAX + 1u;
    PT_ASSERT(ccoip_tsp_solve(3, g_cost, 0, g_work, sizeof(g_work), t, &c) == pcclInvalidArgument,
              "cost too big");
    g_cost[1] = CCOIP_TSP_COST_MAX;
    PT_ASSERT(ccoip_tsp_solve(3, g_cost, 0, g_work, sizeof(g_work), t, &c) == pcclSuccess,
              "unusable edge allowed");
    PT_ASSERT(c < CCOIP_TSP_COST_MAX, "the unusable edge is avoided (%llu)", (unsigned long long)c);
    PT_ASSERT(ccoip_tsp_workspace_bytes(0) == 0 &&
                  ccoip_tsp_workspace_bytes(CCOIP_TSP_N_MAX + 1u) == 0,
              "workspace of invalid n");
    uint32_t bad[3] = {0, 1, 1};
    PT_ASSERT(ccoip_tsp_tour_cost(3, g_cost, bad) == UINT64_MAX, "not a permutation");
}

PTEST(tsp, link_cost_is_microseconds_per_mib_for_any_byte_count)
{
    const uint64_t mib = (uint64_t)1 << 20;
    /* Whole MiB, as fixed-size probes send: duration over MiB, as before. */
    PT_ASSERT(ccoip_tsp_link_cost(mib, 8389) == 8389, "1 MiB");
    PT_ASSERT(ccoip_tsp_link_cost(64u * mib, 640000) == 10000, "64 MiB");
    /* A probe cut by its time window: 1.5 MiB in 15 ms is 10 ms per MiB (whole MiB would
     * have said 15). */
    PT_ASSERT(ccoip_tsp_link_cost(3u * mib / 2u, 15000) == 10000, "1.5 MiB");
    PT_ASSERT(ccoip_tsp_link_cost(37u * mib + mib / 2u, 750000) == 20000, "37.5 MiB");
    /* Below a MiB: scaled up. */
    PT_ASSERT(ccoip_tsp_link_cost(mib / 4u, 100) == 400, "256 KiB");
    /* Rounded down, at least 1, below the cap, and 0 bytes is unusable. */
    PT_ASSERT(ccoip_tsp_link_cost(3u * mib, 10) == 3, "rounded down");
    PT_ASSERT(ccoip_tsp_link_cost(64u * mib, 0) == 1, "at least 1");
    PT_ASSERT(ccoip_tsp_link_cost(1, UINT64_MAX) == CCOIP_TSP_COST_MAX - 1u, "saturates");
    PT_ASSERT(ccoip_tsp_link_cost(mib, CCOIP_TSP_COST_MAX) == CCOIP_TSP_COST_MAX - 1u,
              "saturates at the cap");
    PT_ASSERT(ccoip_tsp_link_cost(0, 5) == CCOIP_TSP_COST_MAX, "no bytes");
    /* Huge byte counts (remainder beyond 2^44): still close. */
    const uint64_t big = (uint64_t)1 << 50;
    PT_ASSERT(ccoip_tsp_link_cost(big, big - 1u) == mib - 1u, "2^50 bytes");
    /* The order of two links is kept whatever their byte counts. */
    PT_ASSERT(ccoip_tsp_link_cost(20u * mib, 170000) < ccoip_tsp_link_cost(3u * mib, 250000),
              "faster link cheaper");
}
