/*
 * tsp.c — asymmetric TSP: exact Held–Karp up to CCOIP_TSP_EXACT_MAX nodes,
 * nearest neighbour + 2-opt + or-opt beyond. See ccoip_tsp.h.
 */
#include "ccoip_tsp.h"

#include <stdbool.h>
#include <string.h>

#define TSP_ALIGN 8u

static uint64_t tsp_align(uint64_t x)
{
    return (x + TSP_ALIGN - 1u) & ~(uint64_t)(TSP_ALIGN - 1u);
}

static uint64_t tsp_exact_bytes(uint32_t n)
{
    if (n < 2 || n > CCOIP_TSP_EXACT_MAX) return 0;
    uint64_t states = ((uint64_t)1 << (n - 1u)) * (n - 1u);
    return tsp_align(states * sizeof(uint64_t)) + tsp_align(states);
}

static uint64_t tsp_heur_bytes(uint32_t n)
{
    uint64_t nn = n;
    return 2u * tsp_align((nn + 1u) * sizeof(uint64_t)) + 2u * tsp_align(nn * sizeof(uint32_t)) +
           tsp_align(nn);
}

uint64_t ccoip_tsp_workspace_bytes(uint32_t n)
{
    if (n == 0 || n > CCOIP_TSP_N_MAX) return 0;
    uint64_t e = tsp_exact_bytes(n), h = tsp_heur_bytes(n);
    return (e > h ? e : h) + TSP_ALIGN; /* + slack to align the caller's pointer */
}

static uint8_t *tsp_base(void *work)
{
    uintptr_t p = (uintptr_t)work;
    p = (p + TSP_ALIGN - 1u) & ~(uintptr_t)(TSP_ALIGN - 1u);
    return (uint8_t *)p;
}

static uint64_t c_at(const uint64_t *cost, uint32_t n, uint32_t i, uint32_t j)
{
    return cost[(uint64_t)i * n + j];
}

uint64_t ccoip_tsp_link_cost(uint64_t bytes, uint64_t duration_us)
{
    if (bytes == 0) return CCOIP_TSP_COST_MAX;
    /* duration_us * 2^20 / bytes in 64 bits: the quotient's whole part shifted, plus the
     * remainder's share (r < bytes: exact while r < 2^44, else r over bytes in MiB, off by
     * less than 2^-24 relative). */
    const uint64_t q = duration_us / bytes, r = duration_us % bytes;
    if (q >= CCOIP_TSP_COST_MAX >> 20) return CCOIP_TSP_COST_MAX - 1u;
    const uint64_t frac = r < ((uint64_t)1 << 44) ? (r << 20) / bytes : r / (bytes >> 20);
    uint64_t c = (q << 20) + frac;
    if (c == 0) c = 1;
    if (c >= CCOIP_TSP_COST_MAX) c = CCOIP_TSP_COST_MAX - 1u;
    return c;
}

uint64_t ccoip_tsp_tour_cost(uint32_t n, const uint64_t *cost, const uint32_t *tour)
{
    if (n == 0 || cost == NULL || tour == NULL) return UINT64_MAX;
    /* Permutation check without memory: each node appears once (O(n^2), tests and checks only). */
    for (uint32_t i = 0; i < n; i++) {
        if (tour[i] >= n) return UINT64_MAX;
        for (uint32_t j = i + 1u; j < n; j++) {
            if (tour[i] == tour[j]) return UINT64_MAX;
        }
    }
    if (n == 1) return 0;
    uint64_t s = 0;
    for (uint32_t i = 0; i < n; i++)
        s += c_at(cost, n, tour[i], tour[(i + 1u) % n]);
    return s;
}

static bool tsp_args_ok(uint32_t n, const uint64_t *cost, const void *work, uint64_t work_bytes,
                        const uint32_t *tour, const uint64_t *cost_out, bool exact)
{
    if (n == 0 || n > CCOIP_TSP_N_MAX || cost == NULL || work == NULL || tour == NULL ||
        cost_out == NULL) {
        return false;
    }
    uint64_t need = exact ? ccoip_tsp_workspace_bytes(n) : tsp_heur_bytes(n) + TSP_ALIGN;
    if (work_bytes < need) return false;
    for (uint64_t k = 0; k < (uint64_t)n * n; k++) {
        if (cost[k] > CCOIP_TSP_COST_MAX) return false;
    }
    return true;
}

/* Held–Karp over subsets of {1 .. n-1}; node j+1 is bit j. */
static void tsp_exact(uint32_t n, const uint64_t *cost, uint8_t *base, uint32_t *tour,
                      uint64_t *cost_out)
{
    uint32_t m = n - 1u;
    uint64_t nsets = (uint64_t)1 << m;
    uint64_t *dp = (uint64_t *)(void *)base;
    uint8_t *par = base + tsp_align(nsets * m * sizeof(uint64_t));
    for (uint64_t k = 0; k < nsets * m; k++) {
        dp[k] = UINT64_MAX;
        par[k] = 0xffu;
    }
    for (uint32_t j = 0; j < m; j++)
        dp[((uint64_t)1 << j) * m + j] = c_at(cost, n, 0, j + 1u);
    for (uint64_t s = 1; s < nsets; s++) {
        for (uint32_t j = 0; j < m; j++) {
            if (!((s >> j) & 1u)) continue;
            uint64_t v = dp[s * m + j];
            if (v == UINT64_MAX) continue;
            for (uint32_t k = 0; k < m; k++) {
                if ((s >> k) & 1u) continue;
                uint64_t t = s | ((uint64_t)1 << k);
                uint64_t nv = v + c_at(cost, n, j + 1u, k + 1u);
                if (nv < dp[t * m + k]) {
                    dp[t * m + k] = nv;
                    par[t * m + k] = (uint8_t)j;
                }
            }
        }
    }
    uint64_t full = nsets - 1u, best = UINT64_MAX;
    uint32_t last = 0;
    for (uint32_t j = 0; j < m; j++) {
        uint64_t v = dp[full * m + j] + c_at(cost, n, j + 1u, 0);
        if (v < best) {
            best = v;
            last = j;
        }
    }
    tour[0] = 0;
    uint64_t s = full;
    uint32_t j = last;
    for (uint32_t pos = n - 1u; pos >= 1u; pos--) {
        tour[pos] = j + 1u;
        uint8_t pj = par[s * m + j];
        s &= ~((uint64_t)1 << j);
        j = pj;
        if (pos == 1u) break;
    }
    *cost_out = best;
}

typedef struct tsp_heur {
    uint32_t n;
    const uint64_t *cost;
    uint32_t *t;   /* the tour */
    uint32_t *buf; /* scratch tour */
    uint64_t *fwd; /* fwd[p] = sum_{k<p} c(t[k], t[k+1]) */
    uint64_t *bwd; /* bwd[p] = sum_{k<p} c(t[k+1], t[k]) */
    uint8_t *seen;
} tsp_heur;

static void heur_prefix(tsp_heur *h)
{
    h->fwd[0] = h->bwd[0] = 0;
    for (uint32_t p = 0; p + 1u < h->n; p++) {
        h->fwd[p + 1u] = h->fwd[p] + c_at(h->cost, h->n, h->t[p], h->t[p + 1u]);
        h->bwd[p + 1u] = h->bwd[p] + c_at(h->cost, h->n, h->t[p + 1u], h->t[p]);
    }
}

/* One sweep of 2-opt moves (reverse positions i+1 .. j, 0 <= i, j <= n-1). */
static bool heur_two_opt(tsp_heur *h)
{
    uint32_t n = h->n;
    bool improved = false;
    heur_prefix(h);
    for (uint32_t i = 0; i + 2u < n; i++) {
        for (uint32_t j = i + 2u; j < n; j++) {
            uint32_t a = h->t[i], b = h->t[i + 1u], c = h->t[j], d = h->t[(j + 1u) % n];
            uint64_t old =
                c_at(h->cost, n, a, b) + (h->fwd[j] - h->fwd[i + 1u]) + c_at(h->cost, n, c, d);
            uint64_t nw =
                c_at(h->cost, n, a, c) + (h->bwd[j] - h->bwd[i + 1u]) + c_at(h->cost, n, b, d);
            if (nw < old) {
                for (uint32_t l = i + 1u, r = j; l < r; l++, r--) {
                    uint32_t x = h->t[l];
                    h->t[l] = h->t[r];
                    h->t[r] = x;
                }
                heur_prefix(h);
                improved = true;
            }
        }
    }
    return improved;
}

/* One sweep of or-opt moves: positions s .. s+len-1 (s >= 1) re-inserted after position p. */
static bool heur_or_opt(tsp_heur *h)
{
    uint32_t n = h->n;
    bool improved = false;
    for (uint32_t len = 1; len <= 3u; len++) {
        for (uint32_t s = 1; s + len <= n; s++) {
            uint32_t e = s + len - 1u;
            uint32_t prev = h->t[s - 1u], first = h->t[s], last = h->t[e],
                     next = h->t[(e + 1u) % n];
            uint64_t removed = c_at(h->cost, n, prev, first) + c_at(h->cost, n, last, next);
            uint64_t bridged = c_at(h->cost, n, prev, next);
            for (uint32_t p = 0; p < n; p++) {
                if (p + 1u >= s && p <= e) continue; /* adjacent to or inside the segment */
                uint32_t x = h->t[p], y = h->t[(p + 1u) % n];
                uint64_t old = removed + c_at(h->cost, n, x, y);
                uint64_t nw = bridged + c_at(h->cost, n, x, first) + c_at(h->cost, n, last, y);
                if (nw >= old) continue;
                /* Rebuild: the tour without the segment, the segment after x. */
                uint32_t k = 0;
                for (uint32_t q = 0; q < n; q++) {
                    if (q >= s && q <= e) continue;
                    h->buf[k++] = h->t[q];
                    if (q == p) {
                        for (uint32_t r = s; r <= e; r++)
                            h->buf[k++] = h->t[r];
                    }
                }
                memcpy(h->t, h->buf, (size_t)n * sizeof(uint32_t));
                improved = true;
                break; /* positions moved: continue with the next segment start */
            }
        }
    }
    return improved;
}

/* Nearest neighbour from `start` (ties: the lowest index), rotated to begin at node 0. */
static void heur_nn(tsp_heur *h, uint32_t start)
{
    uint32_t n = h->n;
    memset(h->seen, 0, (size_t)n);
    h->buf[0] = start;
    h->seen[start] = 1;
    for (uint32_t k = 1; k < n; k++) {
        uint32_t cur = h->buf[k - 1u], best = UINT32_MAX;
        for (uint32_t j = 0; j < n; j++) {
            if (h->seen[j]) continue;
            if (best == UINT32_MAX || c_at(h->cost, n, cur, j) < c_at(h->cost, n, cur, best)) {
                best = j;
            }
        }
        h->buf[k] = best;
        h->seen[best] = 1;
    }
    uint32_t z = 0;
    while (h->buf[z] != 0)
        z++;
    for (uint32_t k = 0; k < n; k++)
        h->t[k] = h->buf[(z + k) % n];
}

static uint64_t heur_cost(const tsp_heur *h)
{
    if (h->n < 2u) return 0;
    uint64_t s = 0;
    for (uint32_t i = 0; i < h->n; i++)
        s += c_at(h->cost, h->n, h->t[i], h->t[(i + 1u) % h->n]);
    return s;
}

static void heur_run(uint32_t n, const uint64_t *cost, uint32_t max_passes, uint8_t *base,
                     uint32_t *tour, uint64_t *cost_out)
{
    tsp_heur h;
    uint64_t nn = n;
    h.n = n;
    h.cost = cost;
    h.fwd = (uint64_t *)(void *)base;
    base += tsp_align((nn + 1u) * sizeof(uint64_t));
    h.bwd = (uint64_t *)(void *)base;
    base += tsp_align((nn + 1u) * sizeof(uint64_t));
    h.buf = (uint32_t *)(void *)base;
    base += tsp_align(nn * sizeof(uint32_t));
    h.t = (uint32_t *)(void *)base; /* the candidate; the best so far is in tour */
    base += tsp_align(nn * sizeof(uint32_t));
    h.seen = base;
    if (max_passes == 0) max_passes = CCOIP_TSP_DEFAULT_PASSES;
    /* Multi-start: nearest neighbour from the first CCOIP_TSP_STARTS nodes, each improved by
     * local search; the best (ties: the earliest start) wins. */
    uint32_t starts = n < CCOIP_TSP_STARTS ? n : CCOIP_TSP_STARTS;
    uint64_t best = UINT64_MAX;
    for (uint32_t st = 0; st < starts; st++) {
        heur_nn(&h, st);
        if (n >= 4u) {
            for (uint32_t pass = 0; pass < max_passes; pass++) {
                bool a = heur_two_opt(&h);
                bool b = heur_or_opt(&h);
                if (!a && !b) break;
            }
        }
        uint64_t c = heur_cost(&h);
        if (c < best) {
            best = c;
            memcpy(tour, h.t, (size_t)n * sizeof(uint32_t));
        }
    }
    *cost_out = best;
}

pcclResult_t ccoip_tsp_heuristic(uint32_t n, const uint64_t *cost, uint32_t max_passes, void *work,
                                 uint64_t work_bytes, uint32_t *tour, uint64_t *cost_out)
{
    if (!tsp_args_ok(n, cost, work, work_bytes, tour, cost_out, false)) return pcclInvalidArgument;
    heur_run(n, cost, max_passes, tsp_base(work), tour, cost_out);
    return pcclSuccess;
}

pcclResult_t ccoip_tsp_solve(uint32_t n, const uint64_t *cost, uint32_t max_passes, void *work,
                             uint64_t work_bytes, uint32_t *tour, uint64_t *cost_out)
{
    if (!tsp_args_ok(n, cost, work, work_bytes, tour, cost_out, true)) return pcclInvalidArgument;
    if (n == 1) {
        tour[0] = 0;
        *cost_out = 0;
        return pcclSuccess;
    }
    if (n <= CCOIP_TSP_EXACT_MAX) {
        tsp_exact(n, cost, tsp_base(work), tour, cost_out);
    } else {
        heur_run(n, cost, max_passes, tsp_base(work), tour, cost_out);
    }
    return pcclSuccess;
}
