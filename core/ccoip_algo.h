/*
 * ccoip_algo.h — the algorithm collection, its selection by size, and the tuned table
 * (docs/algorithms.md), as pure functions.
 *
 * An op runs one named algorithm (pcclAlgorithm_t):
 *   RELAY         the master reduces / routes the inputs (docs/protocol.md §6.8.2, §6.8.3):
 *                 one round trip; inputs up to the master's relay_max (≤ 64 KiB).
 *   DIRECT        all-reduce only: every member gets every input (an all-gather of whole
 *                 inputs over the ring's links, N − 1 steps) and reduces the N inputs locally in
 *                 rank order 0 .. N − 1; inputs up to CCOIP_ALGO_DIRECT_MAX.
 *   RING          the ring schedule (ccoip_ring.h, ccoip_coll.h), one connection per step.
 *   RING_STRIPED  the ring schedule, each large step striped over the link's connection pool
 *                 (ccoip_ring_stripes): the same reduction order as RING, so the same bits.
 * AUTO picks one: the group's tuned table (installed by the master, per world size and size
 * class) where it has an entry that applies, else the built-in rule (ccoip_algo_default).
 * Every member resolves alike (same table, same parameters); the ballot carries the resolved
 * algorithm and the master refuses members that disagree (pcclInvalidUsage).
 *
 * No allocation, no I/O: runs under emcc and in the core.
 */
#ifndef CCOIP_ALGO_H
#define CCOIP_ALGO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ccoip_coll.h"
#include "pccl_types.h"

/** The algorithms (the numbers of pcclAlgorithm_t). */
typedef enum ccoip_algo {
    CCOIP_ALGO_AUTO = 0,
    CCOIP_ALGO_RELAY = 1,
    CCOIP_ALGO_DIRECT = 2,
    CCOIP_ALGO_RING = 3,
    CCOIP_ALGO_RING_STRIPED = 4,
    CCOIP_ALGO_HALVING_DOUBLING = 5
} ccoip_algo;

/** Named algorithms (RELAY .. HALVING_DOUBLING): the tuner's candidates. */
#define CCOIP_ALGO_COUNT 5u
/** The highest algorithm number. */
#define CCOIP_ALGO_LAST CCOIP_ALGO_HALVING_DOUBLING
/** Size classes of the table: 1 KiB << k for k = 0 .. CCOIP_ALGO_SIZES - 1 (1 KiB .. 256 MiB). */
#define CCOIP_ALGO_SIZES 19u
/** The table has rows for world sizes 2 .. CCOIP_ALGO_WORLD_MAX (larger groups: the rule). */
#define CCOIP_ALGO_WORLD_MAX 8u
#define CCOIP_ALGO_ROWS      (CCOIP_ALGO_WORLD_MAX - 1u)
/** The kinds with a table (ccoip_coll_kind ALL_REDUCE .. BARRIER; send / recv: one pair link). */
#define CCOIP_ALGO_KINDS CCOIP_COLL_KINDS
/** The encoded table: a version byte, then one byte per (kind, world, size class). */
#define CCOIP_ALGO_TABLE_VERSION 2u
#define CCOIP_ALGO_TABLE_BYTES   (1u + CCOIP_ALGO_KINDS * CCOIP_ALGO_ROWS * CCOIP_ALGO_SIZES)
/** The largest input the direct all-reduce takes (its scratch holds N inputs). */
#define CCOIP_ALGO_DIRECT_MAX ((uint64_t)4 << 20)
/** A tuning report: float seconds per (size class, candidate); <= 0 or not finite: not run. */
#define CCOIP_ALGO_TIMINGS (CCOIP_ALGO_SIZES * CCOIP_ALGO_COUNT)

/** The tuned choices: algo[kind][world - 2][size class], CCOIP_ALGO_AUTO: none. An op's size
 *  class: its count (per block, as ccoip_coll_sizes takes it) times the element size. */
typedef struct ccoip_algo_table {
    uint8_t algo[CCOIP_ALGO_KINDS][CCOIP_ALGO_ROWS][CCOIP_ALGO_SIZES];
} ccoip_algo_table;

/** "all_reduce", "broadcast", ... "barrier" (the table file's names); NULL for another kind. */
const char *ccoip_algo_kind_name(uint32_t kind);

/** What a choice depends on: the op, and what every member of it knows alike. */
typedef struct ccoip_algo_query {
    ccoip_coll_kind kind;
    uint64_t count, esize; /**< per block, as ccoip_coll_sizes */
    uint32_t world;
    bool quantized;     /**< quantized traffic: never relayed nor direct */
    bool premul;        /**< PREMUL_SUM: never relayed nor direct */
    uint64_t relay_max; /**< the master's relay_max_bytes (0: relay off) */
} ccoip_algo_query;

/** "relay", "direct", "ring", "ring_striped", "auto"; NULL for another number. */
const char *ccoip_algo_name(uint32_t algo);
/** The algorithm of a name (as ccoip_algo_name); false when unknown. */
bool ccoip_algo_parse(const char *name, size_t len, ccoip_algo *out);
/** Size class of an all-reduce of `bytes`: the least k with bytes <= 1 KiB << k, capped. */
uint32_t ccoip_algo_size_class(uint64_t bytes);
/** Whether algo (not AUTO) can run the op (a tuning round, CCOIP_COLL_TUNE: the relay only):
 *  the tuner's candidates and the table's choices. */
bool ccoip_algo_applies(ccoip_algo algo, const ccoip_algo_query *q);
/** Whether a caller may force algo on the op: where it applies, and halving-doubling on any
 *  unquantized all-reduce (it runs the ring where the world is not 2 or 4, or the count below
 *  it). Else the op is pcclInvalidArgument. */
bool ccoip_algo_forcible(ccoip_algo algo, const ccoip_algo_query *q);
/** The built-in rule: RELAY, DIRECT or RING_STRIPED (docs/algorithms.md); AUTO when none can
 *  run the op (a tuning round, relayed only, without the relay). */
ccoip_algo ccoip_algo_default(const ccoip_algo_query *q);
/**
 * The op's algorithm: `forced` when not AUTO (CCOIP_ALGO_AUTO returned when it does not
 * apply: the caller refuses the op), else the table's entry for (world, size class) when it
 * applies (table may be NULL), else the rule.
 */
ccoip_algo ccoip_algo_resolve(ccoip_algo forced, const ccoip_algo_table *table,
                              const ccoip_algo_query *q);

/** Clears every entry (AUTO). */
void ccoip_algo_table_clear(ccoip_algo_table *t);
/** True when no entry is set. */
bool ccoip_algo_table_empty(const ccoip_algo_table *t);
/** Encodes into out (CCOIP_ALGO_TABLE_BYTES). */
void ccoip_algo_table_encode(const ccoip_algo_table *t, uint8_t out[CCOIP_ALGO_TABLE_BYTES]);
/** Decodes: the version and length must match and every entry be a known algorithm. */
pcclResult_t ccoip_algo_table_decode(const uint8_t *in, size_t len, ccoip_algo_table *out);

/** The median of v[0 .. n) (sorts v; even n: the mean of the two middle values; n 0: NaN):
 *  the tuner's per-member time and the master's combination over members. */
double ccoip_algo_median(double *v, uint32_t n);

/**
 * The master's combination of a tuning round (§6.8.5): reports[m] (CCOIP_ALGO_TIMINGS floats,
 * little-endian IEEE binary32, as sent) from n members of a group of `world`; for every size
 * class the median over members of each candidate's time (a candidate any member did not run
 * is out), the fastest wins (ties: the lower number). The (kind, world) row of *t is
 * replaced; the other rows are kept. pcclInvalidArgument when kind or world is out of the
 * table's range.
 */
pcclResult_t ccoip_algo_combine(ccoip_algo_table *t, uint32_t kind, uint32_t world,
                                const uint8_t *const *reports, uint32_t n);

/**
 * Text form (pcclTuneSave / pcclTuneLoad): a comment line, then per tuned (kind, world) one
 * line "world N: <name of size class 0> ... <name of class 18>" ("auto" for no entry) for the
 * all-reduce (the v1 form) and "<kind> world N: ..." for the other kinds (ccoip_algo_kind_name).
 * ccoip_algo_table_format writes at most cap bytes (NUL-terminated) and returns the length it
 * needs; ccoip_algo_table_parse accepts that form (blank and '#' lines skipped).
 */
size_t ccoip_algo_table_format(const ccoip_algo_table *t, char *out, size_t cap);
pcclResult_t ccoip_algo_table_parse(const char *text, size_t len, ccoip_algo_table *out);

#endif /* CCOIP_ALGO_H */
