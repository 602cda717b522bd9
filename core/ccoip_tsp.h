/*
 * ccoip_tsp.h — the asymmetric travelling-salesman solver the master uses to
 * order a peer group's ring by measured link cost (DESIGN.md §3 "Topology
 * optimization", docs/core.md §2.6). Pure, deterministic, integer-only, no
 * allocation: the caller passes a workspace of ccoip_tsp_workspace_bytes(n).
 *
 *   n <= CCOIP_TSP_EXACT_MAX: exact (Held–Karp dynamic programming over
 *       subsets, O(2^n · n^2) time, 2^(n-1) · (n-1) states);
 *   n >  CCOIP_TSP_EXACT_MAX: nearest neighbour from each of the nodes
 *       0 .. CCOIP_TSP_STARTS-1 (ties: lowest index), each improved by local
 *       search alternating 2-opt (segment reversal, evaluated in O(1) with
 *       prefix sums of the forward and backward path costs) and or-opt (move
 *       a segment of 1..3 nodes, direction kept), first improvement, at most
 *       max_passes passes; the cheapest result wins (ties: earliest start).
 *       Time O(STARTS · passes · n^3) worst case (a reversal costs O(n)).
 *
 * Costs: cost[i * n + j] is the cost of the directed edge i → j (the
 * diagonal is ignored), each at most CCOIP_TSP_COST_MAX; callers mark an
 * unusable edge with CCOIP_TSP_COST_MAX, so a tour of cost >= that value
 * uses one. Sums cannot overflow (n <= 2^20, costs <= 2^40).
 */
#ifndef CCOIP_TSP_H
#define CCOIP_TSP_H

#include <stdint.h>

#include "pccl_types.h"

/** Largest n solved exactly. */
#define CCOIP_TSP_EXACT_MAX 10u
/** Largest n accepted. */
#define CCOIP_TSP_N_MAX ((uint32_t)1 << 20)
/** Largest edge cost; also "unusable". */
#define CCOIP_TSP_COST_MAX ((uint64_t)1 << 40)
/** Nearest-neighbour starts of the heuristic (nodes 0 .. STARTS-1). */
#define CCOIP_TSP_STARTS 8u
/** Default local-search passes (per start). */
#define CCOIP_TSP_DEFAULT_PASSES 64u

/** Bytes of workspace ccoip_tsp_solve needs for n nodes (0 for n == 0 or n > CCOIP_TSP_N_MAX). */
uint64_t ccoip_tsp_workspace_bytes(uint32_t n);

/**
 * Finds a cyclic tour over nodes 0 .. n-1 starting at node 0: tour[0] = 0,
 * tour[k] → tour[k+1] and tour[n-1] → tour[0] are its edges; *cost_out its
 * total cost. Exact for n <= CCOIP_TSP_EXACT_MAX (ties: the tour the DP meets
 * first, deterministic), heuristic beyond (max_passes 0 means the default).
 * Returns pcclSuccess; pcclInvalidArgument for NULL pointers, n == 0,
 * n > CCOIP_TSP_N_MAX, a cost above CCOIP_TSP_COST_MAX, or a workspace smaller
 * than ccoip_tsp_workspace_bytes(n).
 */
pcclResult_t ccoip_tsp_solve(uint32_t n, const uint64_t *cost, uint32_t max_passes, void *work,
                             uint64_t work_bytes, uint32_t *tour, uint64_t *cost_out);

/** The heuristic alone, for any n >= 1 (tests compare it with the exact solver). */
pcclResult_t ccoip_tsp_heuristic(uint32_t n, const uint64_t *cost, uint32_t max_passes, void *work,
                                 uint64_t work_bytes, uint32_t *tour, uint64_t *cost_out);

/**
 * The cost of a directed link from one bandwidth probe (docs/protocol.md §6.6): microseconds per
 * MiB, duration_us * 2^20 / bytes rounded down, for any bytes >= 1 (a probe bounded by time
 * sends any number of bytes, not only whole MiB); at least 1 and below CCOIP_TSP_COST_MAX
 * (saturating). bytes == 0 (no measurement) gives CCOIP_TSP_COST_MAX.
 */
uint64_t ccoip_tsp_link_cost(uint64_t bytes, uint64_t duration_us);

/** Cost of a tour (n nodes), or UINT64_MAX when tour is not a permutation of 0 .. n-1. */
uint64_t ccoip_tsp_tour_cost(uint32_t n, const uint64_t *cost, const uint32_t *tour);

#endif /* CCOIP_TSP_H */
