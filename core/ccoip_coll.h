/*
 * ccoip_coll.h — the schedules of the collectives beyond all-reduce, as pure
 * functions (docs/protocol.md §6.8.3, docs/collectives.md).
 *
 * N members in ring order 0 .. N-1 (the ranks of the op's epoch); rank r sends
 * only to (r + 1) mod N and receives only from (r - 1) mod N, over the ring's
 * links, so a collective needs no link the ring does not have. An op is a plan
 * (ccoip_coll_plan_make): prologue copies, then steps 0 .. nsteps-1, then
 * epilogue copies. In step t a rank posts up to two sends
 * and two receives (frames keyed by step t and a chunk id both ends compute
 * alike), and after they all completed, at most one reduction (dst = base op
 * received) — then the next step. Offsets and lengths are in bytes.
 *
 *   all-gather      N-1 steps: in step t rank r sends block (r - t) mod N and
 *                   receives block (r - t - 1) mod N, both in RECV. Step 0
 *                   sends straight from SEND; the own block is copied last.
 *   reduce-scatter  N-1 steps: in step s rank r sends its partial of block
 *                   (r - s - 1) mod N (step 0: its input), receives the
 *                   predecessor's partial of block (r - s - 2) mod N and reduces
 *                   it with its own input block into an accumulator; the last
 *                   step's block is r, reduced into RECV. Block k is reduced in
 *                   the order x_k op (x_{k-1} op (... op (x_{k+2} op x_{k+1}))).
 *   reduce          the reduce-scatter over N chunks of the tensor
 *                   (ccoip_ring_chunk), then N-1 steps gathering the chunks
 *                   along the ring into the root's RECV (forwarded hop by hop).
 *   broadcast       a pipelined chain from the root: the tensor in S slices;
 *                   the member at distance d from the root receives slice
 *                   t - d + 1 and forwards slice t - d in step t (S + N - 2
 *                   steps).
 *   gather, scatter chains towards / away from the root (N-1 steps), blocks
 *                   forwarded hop by hop through scratch.
 *   all-to-all      ring forwarding: in step t (1 .. N-1) rank r sends the
 *                   blocks that rank r - t + 1 addressed to ranks t .. N-1 hops
 *                   away from it: the first (for r + 1) as chunk 0, the rest
 *                   (forwarded next step) as chunk 1.
 *   barrier         no steps: the master's vote is the barrier.
 *
 * No allocation, no I/O: runs under emcc and in the core.
 */
#ifndef CCOIP_COLL_H
#define CCOIP_COLL_H

#include <stdbool.h>
#include <stdint.h>

#include "ccoip_sm.h"
#include "pccl_types.h"

/** Pieces (sends or receives) one step may post at most. */
#define CCOIP_COLL_PIECES 2u
/** Slices a broadcast is cut into at most, and the bytes it aims for per slice. */
#define CCOIP_COLL_BCAST_SLICES_MAX  64u
#define CCOIP_COLL_BCAST_SLICE_BYTES ((uint64_t)1 << 20)

/** A byte range of one of the op's regions; `on` false: none. */
typedef struct ccoip_coll_xfer {
    bool on;
    ccoip_region region;
    uint64_t offset;
    uint64_t bytes;
    uint32_t chunk; /**< sends and receives: the frame's chunk id */
} ccoip_coll_xfer;

/** dst = src (a COPY kernel). */
typedef struct ccoip_coll_copy {
    ccoip_coll_xfer src, dst;
} ccoip_coll_copy;

/** What one rank does in one step. */
typedef struct ccoip_coll_step {
    ccoip_coll_xfer send[CCOIP_COLL_PIECES];
    ccoip_coll_xfer recv[CCOIP_COLL_PIECES];
    /** After the I/O: red_dst = red_base op recv[0] over red_count elements. */
    bool reduce;
    ccoip_coll_xfer red_dst, red_base;
    uint64_t red_count;
    /** Then (AVG, the last reduction of a chunk): red_dst /= world. */
    bool finalize;
} ccoip_coll_step;

/** One rank's whole op. */
typedef struct ccoip_coll_plan {
    ccoip_coll_kind kind;
    pcclRedOp_t op;
    uint32_t world, rank, root;
    uint64_t count; /**< elements (of a block or of the tensor: ccoip_coll_sizes) */
    uint64_t esize;
    bool in_place;
    uint64_t send_bytes, recv_bytes, scratch_bytes, backup_bytes;
    uint32_t nsteps;
    uint32_t slices; /**< broadcast: S */
    /** Before step 0, in order (the backup of an in-place op first). */
    uint32_t npro;
    ccoip_coll_copy pro[4];
    /** After the last step. */
    uint32_t nepi;
    ccoip_coll_copy epi[1];
} ccoip_coll_plan;

/**
 * The bytes of SEND and RECV a member of rank `rank` binds for one op:
 *   all-reduce, broadcast       count, count (broadcast: one buffer, bound as both)
 *   reduce                      count, count at the root (0 elsewhere)
 *   all-gather                  count, world * count
 *   reduce-scatter              world * count, count
 *   all-to-all                  world * count, world * count
 *   gather                      count, world * count at the root (0 elsewhere)
 *   scatter                     world * count at the root (0 elsewhere), count
 *   barrier                     0, 0
 *   send / recv                 count, 0 / 0, count (root: the other member's rank)
 * (elements of esize bytes). Returns pcclSuccess, or pcclInvalidArgument for an unknown kind,
 * world 0 or above CCOIP_RING_WORLD_MAX, rank or root >= world, esize 0, or sizes beyond 2^62.
 */
pcclResult_t ccoip_coll_sizes(ccoip_coll_kind kind, uint64_t count, uint64_t esize, uint32_t world,
                              uint32_t rank, uint32_t root, uint64_t *send_bytes,
                              uint64_t *recv_bytes);

/**
 * Master relay of the collective set (docs/protocol.md §6.8.3): true when an op of `kind` (not
 * ALL_REDUCE, which has ccoip_relay_use) over `world` members runs through the master — every
 * member's input with its initiate, its output in the answer — because no member's input or
 * output exceeds relay_max bytes (the master's HelloResult.relay_max_bytes; 0: off) nor
 * CCOIP_RELAY_MAX_BYTES, and world >= 2. The barrier (no data) always relays when relay_max > 0.
 * Every member decides alike from the agreed kind, count and type and the world of the epoch
 * the op is pinned to. A PREMUL_SUM op never relays (callers check: its inputs are scaled), nor
 * does a quantized reduce or reduce-scatter (callers check: the relay reduces exact inputs).
 */
bool ccoip_coll_relay_use(ccoip_coll_kind kind, uint64_t count, uint64_t esize, uint32_t world,
                          uint64_t relay_max);

/** True for the kinds that reduce (all-reduce, reduce, reduce-scatter): op and its kernels. */
bool ccoip_coll_reduces(ccoip_coll_kind kind);

/** True for the kinds that name a root. */
bool ccoip_coll_rooted(ccoip_coll_kind kind);

/** True for SEND and RECV (docs/protocol.md §6.8.4): two members, no plan, no relay. */
bool ccoip_coll_p2p(ccoip_coll_kind kind);

/**
 * The tag a send/recv goes by on the wire and in the peer's op table (docs/protocol.md §6.8.4):
 * a mix of the caller's tag and the pair (sender's rank src, receiver's rank dst), top bit set,
 * so that the sends and receives of one tag between different pairs, and a collective of the
 * same tag, are different ops. Both members compute it alike.
 */
uint64_t ccoip_p2p_tag(uint64_t tag, uint32_t src, uint32_t dst);

/**
 * Rank's plan of one op (any kind but ALL_REDUCE, which the ring of ccoip_ring.h runs).
 * in_place: SEND and RECV alias as the kind allows (all-gather: SEND is RECV's block `rank`;
 * reduce-scatter: RECV is SEND's block `rank`; all-to-all, reduce, broadcast: the same buffer;
 * gather at the root: SEND is RECV's block `root`; scatter at the root: RECV is SEND's block
 * `root`). Returns pcclSuccess, or pcclInvalidArgument (as ccoip_coll_sizes; ALL_REDUCE, SEND,
 * RECV).
 */
pcclResult_t ccoip_coll_plan_make(ccoip_coll_kind kind, uint64_t count, uint64_t esize,
                                  pcclRedOp_t op, uint32_t world, uint32_t rank, uint32_t root,
                                  bool in_place, ccoip_coll_plan *out);

/** Fills *st with what the plan's rank does in step t (t < nsteps; else an empty step). */
void ccoip_coll_step_get(const ccoip_coll_plan *pl, uint32_t t, ccoip_coll_step *st);

#endif /* CCOIP_COLL_H */
