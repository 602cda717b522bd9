/*
 * ccoip_hd.h — the recursive halving–doubling all-reduce's schedule over a ring's links
 * (docs/algorithms.md §1, docs/semantics.md §5.1).
 *
 * Reduce-scatter by recursive halving, then all-gather by recursive doubling, between
 * partners whose virtual ranks differ in one bit. The virtual rank of ring position p is its
 * Gray code p ^ (p >> 1), so that every partner is a ring neighbour while the world is 2 or
 * 4: the op needs no link beyond the ring's own, used in both directions (larger worlds would
 * need links to log2 N members; ccoip_algo_applies does not offer it there).
 *
 * Step t (0 .. 2k - 1, k = log2 world): t < k halves — the partner differs in bit t, the
 * member keeps the half of its range its bit t names (0: the lower) and sends the other, and
 * reduces the partner's copy of the kept half into its own; t >= k doubles in the reverse
 * order, each member sending the range it holds complete and receiving its partner's. Each
 * element is reduced once per halving by the member that keeps it and copied afterwards, so
 * every member ends with the same bits.
 */
#ifndef CCOIP_HD_H
#define CCOIP_HD_H

#include <stdbool.h>
#include <stdint.h>

#include "ccoip_ring.h"

/** Whether the schedule runs over a ring of `world` members (2 or 4) for `count` elements. */
bool ccoip_hd_fits(uint64_t count, uint32_t world);

/** One step of a member: the partner's ring position, the elements it sends and receives. */
typedef struct ccoip_hd_step {
    uint32_t partner; /**< ring position */
    bool reduce;      /**< a halving step: the received elements are reduced into ours */
    ccoip_span send;  /**< elements sent (offsets into the whole vector) */
    ccoip_span recv;  /**< elements received (a halving: into scratch, then reduced here) */
} ccoip_hd_step;

/** Number of steps (2 log2 world; 0 when the schedule does not fit). */
uint32_t ccoip_hd_steps(uint32_t world);

/** Step t of the member at ring position rank; pcclInvalidArgument when out of range. */
pcclResult_t ccoip_hd_step_get(uint64_t count, uint32_t world, uint32_t rank, uint32_t t,
                               ccoip_hd_step *out);

/** The elements the member at ring position rank holds fully reduced after the halvings. */
ccoip_span ccoip_hd_owned(uint64_t count, uint32_t world, uint32_t rank);

#endif /* CCOIP_HD_H */
