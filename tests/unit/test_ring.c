/*
 * test_ring.c — the ring schedule (core/ring.c) and the in-memory ring
 * executor (tests/common/ring_exec.c) against independent references.
 */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "ccoip_dtype.h"
#include "ccoip_quant.h"
#include "ccoip_ring.h"
#include "ccoip_sm.h"
#include "ptest.h"
#include "ring_exec.h"
#include "test_rng.h"

#define WORLD_TEST_MAX 64u

/* ------------------------------------------------------------------------ */
/* Independent references                                                   */
/* ------------------------------------------------------------------------ */

/* Chunk size from the header's rule, computed without ccoip_ring_chunk. */
static uint64_t ref_chunk_size(uint64_t count, uint32_t n, uint32_t c)
{
    return count / n + ((uint64_t)c < count % n ? 1u : 0u);
}

static uint64_t ref_chunk_offset(uint64_t count, uint32_t n, uint32_t c)
{
    uint64_t off = 0;
    for (uint32_t i = 0; i < c; i++)
        off += ref_chunk_size(count, n, i);
    return off;
}

/* ------------------------------------------------------------------------ */
/* Schedule                                                                 */
/* ------------------------------------------------------------------------ */

static void expect_chunk(uint64_t count, uint32_t n, uint32_t c, uint64_t off, uint64_t cnt)
{
    const ccoip_span s = ccoip_ring_chunk(count, n, c);
    PT_ASSERT(s.offset == off && s.count == cnt,
              "chunk %u of count %llu / world %u: got [%llu, +%llu), want [%llu, +%llu)", c,
              (unsigned long long)count, n, (unsigned long long)s.offset,
              (unsigned long long)s.count, (unsigned long long)off, (unsigned long long)cnt);
}

PTEST(ring_schedule, chunk_boundaries_exact)
{
    /* count 0: every chunk empty. */
    for (uint32_t c = 0; c < 3; c++)
        expect_chunk(0, 3, c, 0, 0);
    /* count < N: the first `count` chunks hold one element. */
    expect_chunk(2, 5, 0, 0, 1);
    expect_chunk(2, 5, 1, 1, 1);
    expect_chunk(2, 5, 2, 2, 0);
    expect_chunk(2, 5, 3, 2, 0);
    expect_chunk(2, 5, 4, 2, 0);
    /* count not divisible by N: 10 = 3 + 3 + 2 + 2. */
    expect_chunk(10, 4, 0, 0, 3);
    expect_chunk(10, 4, 1, 3, 3);
    expect_chunk(10, 4, 2, 6, 2);
    expect_chunk(10, 4, 3, 8, 2);
    /* Divisible. */
    expect_chunk(12, 4, 3, 9, 3);
    /* N = 1: one chunk, the whole buffer. */
    expect_chunk(7, 1, 0, 0, 7);
    expect_chunk(0, 1, 0, 0, 0);
    /* Counts near the top of uint64_t do not overflow. */
    expect_chunk(UINT64_MAX, 2, 0, 0, (uint64_t)1 << 63);
    expect_chunk(UINT64_MAX, 2, 1, (uint64_t)1 << 63, ((uint64_t)1 << 63) - 1u);
    expect_chunk(UINT64_MAX, 64, 63, UINT64_MAX - UINT64_MAX / 64u, UINT64_MAX / 64u);
    expect_chunk(1000, CCOIP_RING_WORLD_MAX, CCOIP_RING_WORLD_MAX - 1u, 1000, 0);
    expect_chunk(1000, CCOIP_RING_WORLD_MAX, 999, 999, 1);
}

PTEST(ring_schedule, chunks_tile_buffer)
{
    static const uint64_t counts[] = {0, 1, 2, 3, 7, 63, 64, 65, 100, 1000, 4097};
    for (uint32_t n = 1; n <= WORLD_TEST_MAX; n++) {
        for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++) {
            const uint64_t count = counts[k];
            uint64_t next = 0;
            uint64_t min_sz = UINT64_MAX;
            uint64_t max_sz = 0;
            for (uint32_t c = 0; c < n; c++) {
                const ccoip_span s = ccoip_ring_chunk(count, n, c);
                PT_ASSERT(s.offset == next, "n=%u count=%llu chunk %u starts at %llu, want %llu", n,
                          (unsigned long long)count, c, (unsigned long long)s.offset,
                          (unsigned long long)next);
                PT_ASSERT(s.count == ref_chunk_size(count, n, c),
                          "n=%u count=%llu chunk %u has %llu elements, want %llu", n,
                          (unsigned long long)count, c, (unsigned long long)s.count,
                          (unsigned long long)ref_chunk_size(count, n, c));
                PT_ASSERT(s.offset == ref_chunk_offset(count, n, c), "n=%u chunk %u offset", n, c);
                if (c > 0) {
                    PT_ASSERT(s.count <= ccoip_ring_chunk(count, n, c - 1u).count,
                              "n=%u count=%llu: longer chunks come first", n,
                              (unsigned long long)count);
                }
                next = s.offset + s.count;
                if (s.count < min_sz) min_sz = s.count;
                if (s.count > max_sz) max_sz = s.count;
            }
            PT_ASSERT(next == count, "n=%u: chunks cover %llu of %llu elements", n,
                      (unsigned long long)next, (unsigned long long)count);
            PT_ASSERT(max_sz - min_sz <= 1, "n=%u count=%llu: chunk sizes differ by more than 1", n,
                      (unsigned long long)count);
        }
    }
}

PTEST(ring_schedule, step_counts_and_owner)
{
    PT_ASSERT(ccoip_ring_num_steps(1) == 0, "N=1 has no steps, got %u", ccoip_ring_num_steps(1));
    PT_ASSERT(ccoip_ring_num_steps(2) == 2, "N=2 has 2 steps, got %u", ccoip_ring_num_steps(2));
    PT_ASSERT(ccoip_ring_num_steps(64) == 126, "N=64 has 126 steps, got %u",
              ccoip_ring_num_steps(64));
    PT_ASSERT(ccoip_ring_num_steps(CCOIP_RING_WORLD_MAX) == 2u * (CCOIP_RING_WORLD_MAX - 1u),
              "N=max steps, got %u", ccoip_ring_num_steps(CCOIP_RING_WORLD_MAX));
    PT_ASSERT(ccoip_ring_owned_chunk(1, 0) == 0, "N=1 owns chunk 0, got %u",
              ccoip_ring_owned_chunk(1, 0));
    PT_ASSERT(ccoip_ring_owned_chunk(5, 4) == 0, "rank 4 of 5 owns chunk 0, got %u",
              ccoip_ring_owned_chunk(5, 4));
    PT_ASSERT(ccoip_ring_owned_chunk(5, 2) == 3, "rank 2 of 5 owns chunk 3, got %u",
              ccoip_ring_owned_chunk(5, 2));
}

/* One exact schedule, written out by hand from the header: N = 3. */
PTEST(ring_schedule, exact_steps_n3)
{
    /* [rank][step] = {send_chunk, recv_chunk} */
    static const uint32_t want[3][4][2] = {
        {{0, 2}, {2, 1}, {1, 0}, {0, 2}},
        {{1, 0}, {0, 2}, {2, 1}, {1, 0}},
        {{2, 1}, {1, 0}, {0, 2}, {2, 1}},
    };
    for (uint32_t r = 0; r < 3; r++) {
        for (uint32_t s = 0; s < 4; s++) {
            ccoip_ring_step st;
            PT_ASSERT(ccoip_ring_step_get(10, 3, r, s, &st) == pcclSuccess, "step_get r=%u s=%u", r,
                      s);
            PT_ASSERT(st.send_chunk == want[r][s][0] && st.recv_chunk == want[r][s][1],
                      "r=%u s=%u: send %u recv %u, want send %u recv %u", r, s, st.send_chunk,
                      st.recv_chunk, want[r][s][0], want[r][s][1]);
            PT_ASSERT(st.phase == (s < 2 ? CCOIP_RING_REDUCE_SCATTER : CCOIP_RING_ALL_GATHER),
                      "r=%u s=%u: phase %d", r, s, (int)st.phase);
            PT_ASSERT(st.send.offset == ref_chunk_offset(10, 3, st.send_chunk) &&
                          st.send.count == ref_chunk_size(10, 3, st.send_chunk),
                      "r=%u s=%u: send span", r, s);
            PT_ASSERT(st.recv.offset == ref_chunk_offset(10, 3, st.recv_chunk) &&
                          st.recv.count == ref_chunk_size(10, 3, st.recv_chunk),
                      "r=%u s=%u: recv span", r, s);
        }
    }
}

/*
 * For every N in 1..64 and every step: sends pair with the successor's
 * receives; per phase each rank receives every chunk but one exactly once;
 * and a simulation of which ranks' contributions each chunk holds shows that
 * nothing is counted twice, the owner ends the reduce-scatter with all of
 * them, and every rank ends with every chunk complete.
 */
PTEST(ring_schedule, pairing_coverage_contributions)
{
    const uint64_t count = 1000;
    static uint64_t mask[WORLD_TEST_MAX][WORLD_TEST_MAX]; /* [rank][chunk] contributors */
    static uint64_t incoming[WORLD_TEST_MAX];
    for (uint32_t n = 1; n <= WORLD_TEST_MAX; n++) {
        const uint64_t all = n == 64 ? UINT64_MAX : ((uint64_t)1 << n) - 1u;
        uint32_t seen_rs[WORLD_TEST_MAX][WORLD_TEST_MAX];
        uint32_t seen_ag[WORLD_TEST_MAX][WORLD_TEST_MAX];
        memset(seen_rs, 0, sizeof seen_rs);
        memset(seen_ag, 0, sizeof seen_ag);
        for (uint32_t r = 0; r < n; r++) {
            for (uint32_t c = 0; c < n; c++)
                mask[r][c] = (uint64_t)1 << r;
        }
        const uint32_t steps = ccoip_ring_num_steps(n);
        PT_ASSERT(steps == 2u * (n - 1u), "n=%u: %u steps", n, steps);
        for (uint32_t s = 0; s < steps; s++) {
            const bool rs = s < n - 1u;
            for (uint32_t r = 0; r < n; r++) {
                const uint32_t succ = (r + 1u) % n;
                ccoip_ring_step a;
                ccoip_ring_step b;
                PT_ASSERT(ccoip_ring_step_get(count, n, r, s, &a) == pcclSuccess, "n=%u r=%u s=%u",
                          n, r, s);
                PT_ASSERT(ccoip_ring_step_get(count, n, succ, s, &b) == pcclSuccess,
                          "n=%u r=%u s=%u", n, succ, s);
                PT_ASSERT(a.phase == (rs ? CCOIP_RING_REDUCE_SCATTER : CCOIP_RING_ALL_GATHER),
                          "n=%u r=%u s=%u: phase", n, r, s);
                PT_ASSERT(a.send_chunk == b.recv_chunk && a.send.offset == b.recv.offset &&
                              a.send.count == b.recv.count,
                          "n=%u s=%u: rank %u sends chunk %u but rank %u receives chunk %u", n, s,
                          r, a.send_chunk, succ, b.recv_chunk);
                PT_ASSERT(a.send_chunk < n && a.recv_chunk < n, "n=%u: chunk out of range", n);
                PT_ASSERT(a.send.offset == ref_chunk_offset(count, n, a.send_chunk) &&
                              a.send.count == ref_chunk_size(count, n, a.send_chunk),
                          "n=%u r=%u s=%u: send span", n, r, s);
                PT_ASSERT(a.recv.offset == ref_chunk_offset(count, n, a.recv_chunk) &&
                              a.recv.count == ref_chunk_size(count, n, a.recv_chunk),
                          "n=%u r=%u s=%u: recv span", n, r, s);
                if (rs) {
                    seen_rs[r][a.recv_chunk]++;
                } else {
                    seen_ag[r][a.recv_chunk]++;
                }
                incoming[succ] = mask[r][a.send_chunk];
            }
            for (uint32_t r = 0; r < n; r++) {
                ccoip_ring_step a;
                PT_ASSERT(ccoip_ring_step_get(count, n, r, s, &a) == pcclSuccess, "step_get");
                uint64_t *m = &mask[r][a.recv_chunk];
                if (rs) {
                    PT_ASSERT((*m & incoming[r]) == 0,
                              "n=%u s=%u: rank %u would count a contribution twice in chunk %u", n,
                              s, r, a.recv_chunk);
                    *m |= incoming[r];
                } else {
                    PT_ASSERT(incoming[r] == all, "n=%u s=%u: rank %u forwards a partial chunk", n,
                              s, r);
                    *m = incoming[r];
                }
            }
            if (s + 1u == n - 1u) {
                for (uint32_t r = 0; r < n; r++) {
                    const uint32_t own = ccoip_ring_owned_chunk(n, r);
                    PT_ASSERT(own == (r + 1u) % n, "n=%u r=%u owns %u", n, r, own);
                    PT_ASSERT(mask[r][own] == all, "n=%u: rank %u's owned chunk %u incomplete", n,
                              r, own);
                }
            }
        }
        for (uint32_t r = 0; r < n; r++) {
            const uint32_t own = (r + 1u) % n;
            for (uint32_t c = 0; c < n; c++) {
                PT_ASSERT(mask[r][c] == all, "n=%u: rank %u ends with chunk %u incomplete", n, r,
                          c);
                if (n > 1) {
                    PT_ASSERT(seen_rs[r][c] == (c == r ? 0u : 1u),
                              "n=%u: rank %u receives chunk %u %u times in reduce-scatter", n, r, c,
                              seen_rs[r][c]);
                    PT_ASSERT(seen_ag[r][c] == (c == own ? 0u : 1u),
                              "n=%u: rank %u receives chunk %u %u times in all-gather", n, r, c,
                              seen_ag[r][c]);
                }
            }
            if (n > 1) {
                ccoip_ring_step first_ag;
                PT_ASSERT(ccoip_ring_step_get(count, n, r, n - 1u, &first_ag) == pcclSuccess,
                          "step_get");
                PT_ASSERT(first_ag.send_chunk == own,
                          "n=%u: rank %u starts the all-gather with chunk %u, not its own %u", n, r,
                          first_ag.send_chunk, own);
            }
        }
    }
}

PTEST(ring_schedule, invalid_arguments)
{
    ccoip_ring_step st;
    PT_ASSERT(ccoip_ring_step_get(10, 0, 0, 0, &st) == pcclInvalidArgument, "world 0");
    PT_ASSERT(ccoip_ring_step_get(10, CCOIP_RING_WORLD_MAX + 1u, 0, 0, &st) == pcclInvalidArgument,
              "world above max");
    PT_ASSERT(ccoip_ring_step_get(10, 4, 4, 0, &st) == pcclInvalidArgument, "rank == world");
    PT_ASSERT(ccoip_ring_step_get(10, 4, 9, 0, &st) == pcclInvalidArgument, "rank > world");
    PT_ASSERT(ccoip_ring_step_get(10, 4, 0, 6, &st) == pcclInvalidArgument, "step == num_steps");
    PT_ASSERT(ccoip_ring_step_get(10, 4, 0, UINT32_MAX, &st) == pcclInvalidArgument, "step huge");
    PT_ASSERT(ccoip_ring_step_get(10, 1, 0, 0, &st) == pcclInvalidArgument, "N=1 has no step 0");
    PT_ASSERT(ccoip_ring_step_get(10, 4, 0, 0, NULL) == pcclInvalidArgument, "NULL out");
    PT_ASSERT(ccoip_ring_step_get(10, 4, 3, 5, &st) == pcclSuccess, "last valid step");
    PT_ASSERT(ccoip_ring_step_get(10, CCOIP_RING_WORLD_MAX, CCOIP_RING_WORLD_MAX - 1u,
                                  2u * (CCOIP_RING_WORLD_MAX - 1u) - 1u, &st) == pcclSuccess,
              "largest world");
}

PTEST(ring_schedule, elements_sent_matches_walk)
{
    static const uint64_t counts[] = {0, 1, 5, 63, 64, 65, 1000, 12345};
    PT_ASSERT(ccoip_ring_elements_sent(10, 4, 0) == 15, "10/4 rank 0: 20 - 3 - 2, got %llu",
              (unsigned long long)ccoip_ring_elements_sent(10, 4, 0));
    PT_ASSERT(ccoip_ring_elements_sent(10, 4, 3) == 14, "10/4 rank 3: 20 - 3 - 3, got %llu",
              (unsigned long long)ccoip_ring_elements_sent(10, 4, 3));
    PT_ASSERT(ccoip_ring_elements_sent(10, 1, 0) == 0, "N=1 sends nothing");
    for (uint32_t n = 1; n <= WORLD_TEST_MAX; n++) {
        for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++) {
            for (uint32_t r = 0; r < n; r++) {
                uint64_t sent = 0;
                uint64_t recvd = 0;
                for (uint32_t s = 0; s < ccoip_ring_num_steps(n); s++) {
                    ccoip_ring_step st;
                    PT_ASSERT(ccoip_ring_step_get(counts[k], n, r, s, &st) == pcclSuccess,
                              "step_get");
                    sent += st.send.count;
                    recvd += st.recv.count;
                }
                const uint64_t got = ccoip_ring_elements_sent(counts[k], n, r);
                PT_ASSERT(got == sent, "n=%u count=%llu r=%u: elements_sent %llu, walk %llu", n,
                          (unsigned long long)counts[k], r, (unsigned long long)got,
                          (unsigned long long)sent);
                /* Rank r receives what its predecessor sends. */
                const uint64_t pred = ccoip_ring_elements_sent(counts[k], n, (r + n - 1u) % n);
                PT_ASSERT(recvd == pred, "n=%u r=%u: received %llu, predecessor sent %llu", n, r,
                          (unsigned long long)recvd, (unsigned long long)pred);
            }
        }
    }
}

/* ------------------------------------------------------------------------ */
/* Executor fixtures                                                        */
/* ------------------------------------------------------------------------ */

typedef struct world {
    uint32_t n;
    uint64_t count;
    uint32_t elem;
    unsigned char *in;    /* n * count elements: each rank's input */
    unsigned char *store; /* the rank buffers */
    void *bufs[WORLD_TEST_MAX];
    uint64_t tx[WORLD_TEST_MAX];
    uint64_t rx[WORLD_TEST_MAX];
} world;

/* misalign: rank r's buffer starts r % 8 bytes past an aligned boundary. */
static void world_init(world *w, uint32_t n, uint64_t count, pcclDataType_t dt, bool misalign)
{
    memset(w, 0, sizeof *w);
    w->n = n;
    w->count = count;
    w->elem = ccoip_dtype_size(dt);
    const size_t bytes = (size_t)count * w->elem;
    const size_t stride = bytes + 16u;
    w->in = malloc(bytes * n + 1u);
    w->store = malloc(stride * n + 1u);
    PT_ASSERT(w->in != NULL && w->store != NULL, "malloc");
    for (uint32_t r = 0; r < n; r++) {
        w->bufs[r] = w->store + stride * r + (misalign ? r % 8u : 0u);
    }
}

static void world_load(world *w)
{
    const size_t bytes = (size_t)w->count * w->elem;
    for (uint32_t r = 0; r < w->n; r++) {
        if (bytes > 0) memcpy(w->bufs[r], w->in + bytes * r, bytes);
    }
}

static void world_free(world *w)
{
    free(w->in);
    free(w->store);
}

static const unsigned char *world_in(const world *w, uint32_t r, uint64_t i)
{
    return w->in + ((size_t)r * (size_t)w->count + (size_t)i) * w->elem;
}

static const unsigned char *world_out(const world *w, uint32_t r, uint64_t i)
{
    return (const unsigned char *)w->bufs[r] + (size_t)i * w->elem;
}

static pcclResult_t world_run(world *w, pcclDataType_t dt, pcclRedOp_t op,
                              pcclQuantizationAlgorithm_t qalg, pcclDataType_t qtype)
{
    world_load(w);
    return ring_exec_allreduce(w->bufs, w->n, w->count, dt, op, qalg, qtype, w->tx, w->rx);
}

/* Wire bytes from chunk sizes: rank r sends every chunk but (r+1) in the
 * reduce-scatter and every chunk but (r+2) in the all-gather, and receives
 * every chunk but r, then every chunk but (r+1). */
static void check_wire_bytes(const world *w, uint32_t wire_elem, const char *what)
{
    const uint32_t n = w->n;
    uint64_t tx_total = 0;
    uint64_t rx_total = 0;
    for (uint32_t r = 0; r < n; r++) {
        uint64_t tx = 0;
        uint64_t rx = 0;
        for (uint32_t c = 0; c < n && n > 1; c++) {
            const uint64_t sz = ref_chunk_size(w->count, n, c);
            if (c != (r + 1u) % n) tx += sz;
            if (c != (r + 2u) % n) tx += sz;
            if (c != r) rx += sz;
            if (c != (r + 1u) % n) rx += sz;
        }
        tx *= wire_elem;
        rx *= wire_elem;
        PT_ASSERT(w->tx[r] == tx && w->rx[r] == rx,
                  "%s n=%u count=%llu rank %u: tx %llu rx %llu, want tx %llu rx %llu", what, n,
                  (unsigned long long)w->count, r, (unsigned long long)w->tx[r],
                  (unsigned long long)w->rx[r], (unsigned long long)tx, (unsigned long long)rx);
        tx_total += tx;
        rx_total += rx;
    }
    PT_ASSERT(tx_total == rx_total, "%s: total tx %llu != total rx %llu", what,
              (unsigned long long)tx_total, (unsigned long long)rx_total);
    if (n > 1) {
        /* Close to 2 (N-1)/N of the buffer per rank. */
        const uint64_t ideal = 2u * (n - 1u) * w->count * wire_elem;
        PT_ASSERT(tx_total == ideal, "%s: total tx %llu, want 2(N-1) * buffer = %llu", what,
                  (unsigned long long)tx_total, (unsigned long long)ideal);
    }
}

static void check_identical(const world *w, const char *what)
{
    const size_t bytes = (size_t)w->count * w->elem;
    for (uint32_t r = 1; r < w->n; r++) {
        PT_ASSERT(bytes == 0 || memcmp(w->bufs[0], w->bufs[r], bytes) == 0,
                  "%s n=%u count=%llu: rank %u differs from rank 0", what, w->n,
                  (unsigned long long)w->count, r);
    }
}

/* ------------------------------------------------------------------------ */
/* Integer reference                                                        */
/* ------------------------------------------------------------------------ */

static uint64_t le_load(const unsigned char *p, uint32_t size)
{
    uint64_t v = 0;
    for (uint32_t i = 0; i < size; i++)
        v |= (uint64_t)p[i] << (8u * i);
    return v;
}

static bool int_signed(pcclDataType_t dt)
{
    return dt == pcclInt8 || dt == pcclInt16 || dt == pcclInt32 || dt == pcclInt64;
}

static uint64_t int_mask(uint32_t size)
{
    return size == 8 ? UINT64_MAX : ((uint64_t)1 << (8u * size)) - 1u;
}

static int64_t int_sext(uint64_t v, uint32_t size)
{
    const uint32_t shift = 64u - 8u * size;
    const uint64_t up = v << shift;
    /* Arithmetic shift without implementation-defined behaviour. */
    const uint64_t sign = up >> 63;
    uint64_t res = up >> shift;
    if (sign && shift > 0) res |= ~(UINT64_MAX >> shift);
    int64_t out;
    memcpy(&out, &res, sizeof out);
    return out;
}

static uint64_t int_ref(pcclDataType_t dt, pcclRedOp_t op, const world *w, uint64_t i)
{
    const uint32_t size = w->elem;
    const uint64_t mask = int_mask(size);
    const bool sgn = int_signed(dt);
    uint64_t acc = le_load(world_in(w, 0, i), size);
    for (uint32_t r = 1; r < w->n; r++) {
        const uint64_t x = le_load(world_in(w, r, i), size);
        switch (op) {
        case pcclSum:
        case pcclAvg:
        case pcclPremulSum: /* floats only: never run on integers */
            acc = (acc + x) & mask;
            break;
        case pcclProd:
            acc = (acc * x) & mask;
            break;
        case pcclMin:
            if (sgn ? int_sext(x, size) < int_sext(acc, size) : x < acc) acc = x;
            break;
        case pcclMax:
            if (sgn ? int_sext(x, size) > int_sext(acc, size) : x > acc) acc = x;
            break;
        case pcclBand:
            acc &= x;
            break;
        case pcclBor:
            acc |= x;
            break;
        case pcclBxor:
            acc ^= x;
            break;
        }
    }
    if (op == pcclAvg) {
        if (sgn) {
            const int64_t q = int_sext(acc, size) / (int64_t)w->n;
            uint64_t u;
            memcpy(&u, &q, sizeof u);
            acc = u & mask;
        } else {
            acc = acc / w->n;
        }
    }
    return acc;
}

static const pcclDataType_t INT_TYPES[] = {pcclUint8,  pcclInt8,  pcclInt16,  pcclUint16,
                                           pcclUint32, pcclInt32, pcclUint64, pcclInt64};
static const pcclRedOp_t ALL_OPS[] = {pcclSum, pcclAvg, pcclProd, pcclMax, pcclMin};
/* The integer types also take the bitwise ops. */
static const pcclRedOp_t INT_OPS[] = {pcclSum, pcclAvg,  pcclProd, pcclMax,
                                      pcclMin, pcclBand, pcclBor,  pcclBxor};

static void run_int_case(test_rng *rng, pcclDataType_t dt, pcclRedOp_t op, uint32_t n,
                         uint64_t count, bool misalign)
{
    world w;
    world_init(&w, n, count, dt, misalign);
    for (size_t b = 0; b < (size_t)count * w.elem * n; b++) {
        w.in[b] = (unsigned char)test_rng_next(rng);
    }
    const pcclResult_t res = world_run(&w, dt, op, pcclQuantNone, pcclUint8);
    PT_ASSERT(res == pcclSuccess, "%s op %d n=%u count=%llu: result %d", ccoip_dtype_name(dt),
              (int)op, n, (unsigned long long)count, (int)res);
    for (uint64_t i = 0; i < count; i++) {
        const uint64_t want = int_ref(dt, op, &w, i);
        for (uint32_t r = 0; r < n; r++) {
            const uint64_t got = le_load(world_out(&w, r, i), w.elem);
            PT_ASSERT(got == want,
                      "%s op %d n=%u count=%llu rank %u element %llu: got %#llx want %#llx",
                      ccoip_dtype_name(dt), (int)op, n, (unsigned long long)count, r,
                      (unsigned long long)i, (unsigned long long)got, (unsigned long long)want);
        }
    }
    check_wire_bytes(&w, w.elem, ccoip_dtype_name(dt));
    world_free(&w);
}

static void run_int_sweep(pcclDataType_t dt, uint64_t seed)
{
    test_rng rng;
    test_rng_seed(&rng, seed);
    PT_LOG("int sweep %s seed %llu", ccoip_dtype_name(dt), (unsigned long long)seed);
    for (size_t o = 0; o < sizeof INT_OPS / sizeof INT_OPS[0]; o++) {
        for (uint32_t n = 1; n <= WORLD_TEST_MAX; n++) {
            const uint64_t counts[] = {0, 1, n - 1u, n + 1u};
            for (size_t k = 0; k < 4; k++)
                run_int_case(&rng, dt, INT_OPS[o], n, counts[k], false);
        }
        static const uint32_t big_n[] = {2, 3, 7, 16, 64};
        for (size_t k = 0; k < sizeof big_n / sizeof big_n[0]; k++) {
            run_int_case(&rng, dt, INT_OPS[o], big_n[k], 1009, false);
        }
    }
}

PTEST(ring_exec, int_u8)
{
    run_int_sweep(pcclUint8, 101);
}
PTEST(ring_exec, int_i8)
{
    run_int_sweep(pcclInt8, 102);
}
PTEST(ring_exec, int_i16)
{
    run_int_sweep(pcclInt16, 103);
}
PTEST(ring_exec, int_u16)
{
    run_int_sweep(pcclUint16, 104);
}
PTEST(ring_exec, int_u32)
{
    run_int_sweep(pcclUint32, 105);
}
PTEST(ring_exec, int_i32)
{
    run_int_sweep(pcclInt32, 106);
}
PTEST(ring_exec, int_u64)
{
    run_int_sweep(pcclUint64, 107);
}
PTEST(ring_exec, int_i64)
{
    run_int_sweep(pcclInt64, 108);
}

PTEST(ring_exec, int_unaligned_buffers)
{
    test_rng rng;
    test_rng_seed(&rng, 109);
    PT_LOG("unaligned seed 109");
    for (size_t t = 0; t < sizeof INT_TYPES / sizeof INT_TYPES[0]; t++) {
        for (size_t o = 0; o < sizeof INT_OPS / sizeof INT_OPS[0]; o++) {
            run_int_case(&rng, INT_TYPES[t], INT_OPS[o], 5, 103, true);
        }
    }
}

/* ------------------------------------------------------------------------ */
/* Floating-point reference                                                 */
/* ------------------------------------------------------------------------ */

static double float_load(pcclDataType_t dt, const unsigned char *p)
{
    switch (dt) {
    case pcclFloat16: {
        const uint16_t h = (uint16_t)le_load(p, 2);
        return (double)ccoip_f16_to_f32(h);
    }
    case pcclBFloat16: {
        const uint16_t b = (uint16_t)le_load(p, 2);
        return (double)ccoip_bf16_to_f32(b);
    }
    case pcclFloat: {
        float f;
        memcpy(&f, p, sizeof f);
        return (double)f;
    }
    default: {
        double d;
        memcpy(&d, p, sizeof d);
        return d;
    }
    }
}

/* Stores v (a value of binary32 precision or finer) into an element. */
static void float_store(pcclDataType_t dt, unsigned char *p, float v)
{
    switch (dt) {
    case pcclFloat16: {
        const uint16_t h = ccoip_f32_to_f16(v);
        memcpy(p, &h, sizeof h);
        break;
    }
    case pcclBFloat16: {
        const uint16_t b = ccoip_f32_to_bf16(v);
        memcpy(p, &b, sizeof b);
        break;
    }
    case pcclFloat:
        memcpy(p, &v, sizeof v);
        break;
    default: {
        const double d = (double)v;
        memcpy(p, &d, sizeof d);
        break;
    }
    }
}

/* Unit roundoff u = 2^-p of each float type. */
static double float_unit_roundoff(pcclDataType_t dt)
{
    switch (dt) {
    case pcclFloat16:
        return ldexp(1.0, -11);
    case pcclBFloat16:
        return ldexp(1.0, -8);
    case pcclFloat:
        return ldexp(1.0, -24);
    default:
        return ldexp(1.0, -53);
    }
}

/* Smallest positive subnormal of each float type. */
static double float_tiny(pcclDataType_t dt)
{
    switch (dt) {
    case pcclFloat16:
        return ldexp(1.0, -24);
    case pcclBFloat16:
        return ldexp(1.0, -133);
    case pcclFloat:
        return ldexp(1.0, -149);
    default:
        return ldexp(1.0, -1074);
    }
}

/* Higham's gamma_k = k u / (1 - k u): the bound on k rounded operations. */
static double gamma_k(uint32_t k, double u)
{
    return (double)k * u / (1.0 - (double)k * u);
}

/* a before b in the kernels' MIN order (-0 < +0); no NaN here. */
static bool float_less(double a, double b)
{
    return a < b || (a == b && signbit(a) && !signbit(b));
}

/* Uniform in [lo, hi) at binary32 granularity, from 24 random bits. */
static float rng_float(test_rng *rng, float lo, float hi)
{
    const float unit = (float)(test_rng_next(rng) >> 40) / 16777216.0f;
    return lo + (hi - lo) * unit;
}

static void fill_float(test_rng *rng, world *w, pcclDataType_t dt, pcclRedOp_t op)
{
    for (uint32_t r = 0; r < w->n; r++) {
        for (uint64_t i = 0; i < w->count; i++) {
            float v;
            if (op == pcclProd) {
                /* Magnitudes near 1 keep 64-term products normal in fp16. */
                v = rng_float(rng, 0.9f, 1.1f);
                if (test_rng_next(rng) & 1u) v = -v;
            } else {
                v = rng_float(rng, -1.0f, 1.0f);
            }
            unsigned char *p = w->in + ((size_t)r * (size_t)w->count + (size_t)i) * w->elem;
            if (dt == pcclDouble) {
                /* Use all 53 bits, so that binary64 sums actually round. */
                const double d =
                    (double)v + (double)(int64_t)(test_rng_next(rng) >> 35) * ldexp(1.0, -54);
                memcpy(p, &d, sizeof d);
            } else {
                float_store(dt, p, v);
            }
        }
    }
}

typedef struct float_ref {
    double value;   /* reference in binary64 */
    double abs_sum; /* sum of |x_r| */
    uint32_t arg;   /* MIN/MAX: the rank whose input is the result */
} float_ref;

static float_ref float_reference(pcclDataType_t dt, pcclRedOp_t op, const world *w, uint64_t i)
{
    float_ref ref;
    ref.value = float_load(dt, world_in(w, 0, i));
    ref.abs_sum = fabs(ref.value);
    ref.arg = 0;
    for (uint32_t r = 1; r < w->n; r++) {
        const double x = float_load(dt, world_in(w, r, i));
        ref.abs_sum += fabs(x);
        switch (op) {
        case pcclSum:
        case pcclAvg:
            ref.value += x;
            break;
        case pcclProd:
            ref.value *= x;
            break;
        case pcclMin:
            if (float_less(x, ref.value)) {
                ref.value = x;
                ref.arg = r;
            }
            break;
        case pcclMax:
            if (float_less(ref.value, x)) {
                ref.value = x;
                ref.arg = r;
            }
            break;
        case pcclBand:
        case pcclBor:
        case pcclBxor:
        case pcclPremulSum: /* not run by these ring tests (test_reduce has its kernel) */
            break;          /* integer types only: never run on floats */
        }
    }
    if (op == pcclAvg) ref.value /= (double)w->n;
    return ref;
}

/* Error bound of the ring's result against the binary64 reference. The
 * reference itself carries binary64 rounding: negligible for the narrow
 * types, as large as the result's own for pcclDouble (hence the factor 2). */
static double float_tolerance(pcclDataType_t dt, pcclRedOp_t op, uint32_t n, const float_ref *ref)
{
    const double u = float_unit_roundoff(dt);
    const double g = gamma_k(n - 1u, u);
    const double ref_factor = dt == pcclDouble ? 2.0 : 1.0;
    const double ref_err = gamma_k(n, ldexp(1.0, -53));
    const double tiny = (double)n * float_tiny(dt);
    switch (op) {
    case pcclSum:
        return ref_factor * g * ref->abs_sum + ref_err * ref->abs_sum + tiny;
    case pcclAvg:
        return (ref_factor * (g + u * (1.0 + g)) + ref_err) * ref->abs_sum / (double)n + tiny;
    case pcclProd:
        return (ref_factor * g + ref_err) * fabs(ref->value) + tiny;
    default:
        return 0.0;
    }
}

static const pcclDataType_t FLOAT_TYPES[] = {pcclFloat16, pcclBFloat16, pcclFloat, pcclDouble};

static void run_float_case(test_rng *rng, pcclDataType_t dt, pcclRedOp_t op, uint32_t n,
                           uint64_t count)
{
    world w;
    world_init(&w, n, count, dt, false);
    fill_float(rng, &w, dt, op);
    const pcclResult_t res = world_run(&w, dt, op, pcclQuantNone, pcclUint8);
    PT_ASSERT(res == pcclSuccess, "%s op %d n=%u count=%llu: result %d", ccoip_dtype_name(dt),
              (int)op, n, (unsigned long long)count, (int)res);
    check_identical(&w, ccoip_dtype_name(dt));
    for (uint64_t i = 0; i < count; i++) {
        const float_ref ref = float_reference(dt, op, &w, i);
        const unsigned char *out = world_out(&w, 0, i);
        if (op == pcclMin || op == pcclMax) {
            PT_ASSERT(memcmp(out, world_in(&w, ref.arg, i), w.elem) == 0,
                      "%s op %d n=%u element %llu: got %.17g, want rank %u's %.17g",
                      ccoip_dtype_name(dt), (int)op, n, (unsigned long long)i, float_load(dt, out),
                      ref.arg, ref.value);
            continue;
        }
        const double got = float_load(dt, out);
        const double tol = float_tolerance(dt, op, n, &ref);
        PT_ASSERT(fabs(got - ref.value) <= tol,
                  "%s op %d n=%u count=%llu element %llu: got %.17g want %.17g (err %.3g > tol "
                  "%.3g)",
                  ccoip_dtype_name(dt), (int)op, n, (unsigned long long)count,
                  (unsigned long long)i, got, ref.value, fabs(got - ref.value), tol);
    }
    check_wire_bytes(&w, w.elem, ccoip_dtype_name(dt));
    world_free(&w);
}

static void run_float_sweep(pcclDataType_t dt, uint64_t seed)
{
    test_rng rng;
    test_rng_seed(&rng, seed);
    PT_LOG("float sweep %s seed %llu", ccoip_dtype_name(dt), (unsigned long long)seed);
    for (size_t o = 0; o < sizeof ALL_OPS / sizeof ALL_OPS[0]; o++) {
        for (uint32_t n = 1; n <= WORLD_TEST_MAX; n++) {
            const uint64_t counts[] = {0, 1, n - 1u, n + 1u};
            for (size_t k = 0; k < 4; k++)
                run_float_case(&rng, dt, ALL_OPS[o], n, counts[k]);
        }
        static const uint32_t big_n[] = {2, 3, 7, 16, 64};
        for (size_t k = 0; k < sizeof big_n / sizeof big_n[0]; k++) {
            run_float_case(&rng, dt, ALL_OPS[o], big_n[k], 1009);
        }
    }
}

PTEST(ring_exec, float_f16)
{
    run_float_sweep(pcclFloat16, 201);
}
PTEST(ring_exec, float_bf16)
{
    run_float_sweep(pcclBFloat16, 202);
}
PTEST(ring_exec, float_f32)
{
    run_float_sweep(pcclFloat, 203);
}
PTEST(ring_exec, float_f64)
{
    run_float_sweep(pcclDouble, 204);
}

/* NaN in one rank's input reaches every rank, for every op. */
PTEST(ring_exec, float_nan_propagates)
{
    for (size_t t = 0; t < sizeof FLOAT_TYPES / sizeof FLOAT_TYPES[0]; t++) {
        const pcclDataType_t dt = FLOAT_TYPES[t];
        for (size_t o = 0; o < sizeof ALL_OPS / sizeof ALL_OPS[0]; o++) {
            world w;
            world_init(&w, 5, 11, dt, false);
            for (uint32_t r = 0; r < 5; r++) {
                for (uint64_t i = 0; i < 11; i++) {
                    float_store(dt, w.in + ((size_t)r * 11u + (size_t)i) * w.elem,
                                (r == 3 && i == 7) ? NAN : 0.5f);
                }
            }
            PT_ASSERT(world_run(&w, dt, ALL_OPS[o], pcclQuantNone, pcclUint8) == pcclSuccess,
                      "run");
            check_identical(&w, "nan");
            for (uint64_t i = 0; i < 11; i++) {
                const double v = float_load(dt, world_out(&w, 0, i));
                PT_ASSERT(i == 7 ? isnan(v) : !isnan(v), "%s op %d element %llu: %g",
                          ccoip_dtype_name(dt), (int)ALL_OPS[o], (unsigned long long)i, v);
            }
            world_free(&w);
        }
    }
}

/* ------------------------------------------------------------------------ */
/* Quantized                                                                */
/* ------------------------------------------------------------------------ */

/*
 * Bound for a quantized ring: the chunk crosses N quantizations (N - 1
 * reduce-scatter hops and the owner's final one); each loses at most
 * range / (2Q) plus a rounding of the source type, and each reduction rounds
 * once more. Partial results lie within ±S (S = the largest sum of |x| over
 * ranks, or the largest |x| for MIN/MAX), so range <= 2S; the factor
 * (1 + 2N/Q) covers the growth of the range through earlier errors. AVG
 * divides all of it by N (the final quantization acts on the average).
 */
static double quant_tolerance(pcclDataType_t dt, pcclDataType_t qtype, pcclRedOp_t op, uint32_t n,
                              double s)
{
    const double q = qtype == pcclUint8 ? 255.0 : 65535.0;
    const double u = float_unit_roundoff(dt);
    const double s2 = s * (1.0 + 2.0 * (double)n / q);
    const double tol = (double)n * s2 / q + 2.0 * (double)n * u * s2 + (double)n * float_tiny(dt);
    return op == pcclAvg ? tol / (double)n : tol;
}

static void run_quant_case(test_rng *rng, pcclDataType_t dt, pcclRedOp_t op,
                           pcclQuantizationAlgorithm_t qalg, pcclDataType_t qtype, uint32_t n,
                           uint64_t count)
{
    PT_ASSERT(ccoip_quant_supported(qalg, dt, qtype), "quant %d %s->%s must be supported",
              (int)qalg, ccoip_dtype_name(dt), ccoip_dtype_name(qtype));
    world w;
    world_init(&w, n, count, dt, false);
    fill_float(rng, &w, dt, op);
    const pcclResult_t res = world_run(&w, dt, op, qalg, qtype);
    PT_ASSERT(res == pcclSuccess, "quant %d %s->%s op %d n=%u count=%llu: result %d", (int)qalg,
              ccoip_dtype_name(dt), ccoip_dtype_name(qtype), (int)op, n, (unsigned long long)count,
              (int)res);
    check_identical(&w, "quantized");
    check_wire_bytes(&w, ccoip_dtype_size(qtype), "quantized");
    if (op != pcclProd) {
        double s = 0.0;
        for (uint64_t i = 0; i < count; i++) {
            const float_ref ref = float_reference(dt, op == pcclAvg ? pcclSum : op, &w, i);
            double m = ref.abs_sum;
            if (op == pcclMin || op == pcclMax) {
                m = 0.0;
                for (uint32_t r = 0; r < n; r++) {
                    const double x = fabs(float_load(dt, world_in(&w, r, i)));
                    if (x > m) m = x;
                }
            }
            if (m > s) s = m;
        }
        const double tol = quant_tolerance(dt, qtype, op, n, s);
        for (uint64_t i = 0; i < count; i++) {
            const float_ref ref = float_reference(dt, op, &w, i);
            const double got = float_load(dt, world_out(&w, 0, i));
            PT_ASSERT(fabs(got - ref.value) <= tol,
                      "quant %d %s->%s op %d n=%u count=%llu element %llu: got %.9g want %.9g "
                      "(err %.3g > tol %.3g)",
                      (int)qalg, ccoip_dtype_name(dt), ccoip_dtype_name(qtype), (int)op, n,
                      (unsigned long long)count, (unsigned long long)i, got, ref.value,
                      fabs(got - ref.value), tol);
        }
    }
    world_free(&w);
}

static void run_quant_sweep(pcclQuantizationAlgorithm_t qalg, pcclDataType_t qtype, uint64_t seed)
{
    test_rng rng;
    test_rng_seed(&rng, seed);
    PT_LOG("quant sweep %d %s seed %llu", (int)qalg, ccoip_dtype_name(qtype),
           (unsigned long long)seed);
    static const uint32_t ns[] = {1, 2, 3, 5, 8, 13};
    for (size_t t = 0; t < sizeof FLOAT_TYPES / sizeof FLOAT_TYPES[0]; t++) {
        for (size_t o = 0; o < sizeof ALL_OPS / sizeof ALL_OPS[0]; o++) {
            for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
                const uint32_t n = ns[k];
                const uint64_t counts[] = {0, 1, n - 1u, n + 1u, 517};
                for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
                    run_quant_case(&rng, FLOAT_TYPES[t], ALL_OPS[o], qalg, qtype, n, counts[c]);
                }
            }
        }
    }
}

PTEST(ring_exec, quant_minmax_u8)
{
    run_quant_sweep(pcclQuantMinMax, pcclUint8, 301);
}
PTEST(ring_exec, quant_minmax_u16)
{
    run_quant_sweep(pcclQuantMinMax, pcclUint16, 302);
}
PTEST(ring_exec, quant_zps_u8)
{
    run_quant_sweep(pcclQuantZeroPointScale, pcclUint8, 303);
}
PTEST(ring_exec, quant_zps_u16)
{
    run_quant_sweep(pcclQuantZeroPointScale, pcclUint16, 304);
}

/* A u8 ring really is lossy (the quantizer is in the path, so the sweeps'
 * bit-identity checks mean something), yet every rank ends identical
 * because the all-gather forwards the owner's codes. */
PTEST(ring_exec, quant_is_lossy_but_identical)
{
    test_rng rng;
    test_rng_seed(&rng, 305);
    PT_LOG("seed 305");
    world w;
    world_init(&w, 4, 257, pcclFloat, false);
    fill_float(&rng, &w, pcclFloat, pcclSum);
    PT_ASSERT(world_run(&w, pcclFloat, pcclSum, pcclQuantMinMax, pcclUint8) == pcclSuccess, "run");
    check_identical(&w, "lossy");
    uint64_t differs = 0;
    for (uint64_t i = 0; i < 257; i++) {
        const float_ref ref = float_reference(pcclFloat, pcclSum, &w, i);
        const double got = float_load(pcclFloat, world_out(&w, 0, i));
        if (fabs(got - ref.value) > 1e-5) differs++;
    }
    PT_ASSERT(differs > 100, "u8 quantization changed only %llu of 257 elements",
              (unsigned long long)differs);
    world_free(&w);
}

PTEST(ring_exec, invalid_arguments)
{
    world w;
    world_init(&w, 3, 8, pcclFloat, false);
    memset(w.in, 0, 3u * 8u * 4u);
    world_load(&w);
    PT_ASSERT(ring_exec_allreduce(w.bufs, 0, 8, pcclFloat, pcclSum, pcclQuantNone, pcclUint8, NULL,
                                  NULL) == pcclInvalidArgument,
              "n = 0");
    PT_ASSERT(ring_exec_allreduce(w.bufs, 3, 8, (pcclDataType_t)12, pcclSum, pcclQuantNone,
                                  pcclUint8, NULL, NULL) == pcclInvalidArgument,
              "bad dtype");
    PT_ASSERT(ring_exec_allreduce(w.bufs, 3, 8, pcclFloat, (pcclRedOp_t)5, pcclQuantNone, pcclUint8,
                                  NULL, NULL) == pcclInvalidArgument,
              "bad op");
    PT_ASSERT(ring_exec_allreduce(w.bufs, 3, 8, pcclInt32, pcclSum, pcclQuantMinMax, pcclUint8,
                                  NULL, NULL) == pcclInvalidArgument,
              "integer source cannot be quantized");
    PT_ASSERT(ring_exec_allreduce(w.bufs, 3, 8, pcclFloat, pcclSum, pcclQuantMinMax, pcclFloat,
                                  NULL, NULL) == pcclInvalidArgument,
              "float codes are not a quantized type");
    PT_ASSERT(ring_exec_allreduce(NULL, 3, 8, pcclFloat, pcclSum, pcclQuantNone, pcclUint8, NULL,
                                  NULL) == pcclInvalidArgument,
              "NULL buffer array");
    void *saved = w.bufs[1];
    w.bufs[1] = NULL;
    PT_ASSERT(ring_exec_allreduce(w.bufs, 3, 8, pcclFloat, pcclSum, pcclQuantNone, pcclUint8, NULL,
                                  NULL) == pcclInvalidArgument,
              "NULL rank buffer");
    PT_ASSERT(ring_exec_allreduce(w.bufs, 3, 0, pcclFloat, pcclSum, pcclQuantNone, pcclUint8, NULL,
                                  NULL) == pcclSuccess,
              "count 0 needs no buffers");
    w.bufs[1] = saved;
    /* A non-finite value cannot be quantized. */
    float_store(pcclFloat, (unsigned char *)w.bufs[2], INFINITY);
    PT_ASSERT(ring_exec_allreduce(w.bufs, 3, 8, pcclFloat, pcclSum, pcclQuantMinMax, pcclUint8,
                                  NULL, NULL) == pcclInvalidArgument,
              "infinity under quantization");
    world_free(&w);
}

/* ccoip_action_gather_ok: the span rules every driver applies to a GATHER_REDUCE (v7). */
PTEST(ring, gather_action_spans)
{
    ccoip_action a;
    memset(&a, 0, sizeof a);
    a.type = CCOIP_ACT_GATHER_REDUCE;
    a.dtype = pcclFloat;
    a.red_op = pcclSum;
    a.count = 10;
    a.divisor = 3;
    a.chunk = 2;
    a.dst.length = 40;
    a.src.length = 40;
    a.base.length = 120;
    PT_ASSERT(ccoip_action_gather_ok(&a), "a well-formed GATHER_REDUCE refused");
    ccoip_action b = a;
    b.base.length = 121;
    PT_EXPECT(!ccoip_action_gather_ok(&b), "slots of another size accepted");
    b = a;
    b.src.length = 36;
    PT_EXPECT(!ccoip_action_gather_ok(&b), "own input of another size accepted");
    b = a;
    b.count = 9;
    PT_EXPECT(!ccoip_action_gather_ok(&b), "count short of dst accepted");
    b = a;
    b.chunk = 3;
    PT_EXPECT(!ccoip_action_gather_ok(&b), "own index beyond the slots accepted");
    b = a;
    b.divisor = 0;
    PT_EXPECT(!ccoip_action_gather_ok(&b), "no slots accepted");
    b = a;
    b.dtype = (pcclDataType_t)99;
    PT_EXPECT(!ccoip_action_gather_ok(&b), "unknown dtype accepted");
    b = a;
    b.count = UINT64_MAX / 2u;
    b.dst.length = b.src.length = b.count * 4u; /* wraps */
    PT_EXPECT(!ccoip_action_gather_ok(&b), "a wrapping count accepted");
    b = a;
    b.dst.length = b.src.length = (UINT64_MAX / 2u) & ~(uint64_t)3u; /* whole elements */
    b.count = b.dst.length / 4u;
    b.base.length = b.dst.length * 3u; /* wraps */
    PT_EXPECT(!ccoip_action_gather_ok(&b), "wrapping slots accepted");
}
