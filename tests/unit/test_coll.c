/*
 * test_coll.c — the collective schedules (core/coll.c) run by an in-memory
 * interpreter: N ranks, each with its own SEND / RECV / SCRATCH / BACKUP,
 * every step's sends delivered to the successor's receives matched by chunk
 * id (lengths must agree, nothing may be left unmatched), reductions as the
 * plan asks. Results are compared with references computed directly from
 * the inputs (integer data: exact), for every kind, N = 1..7, roots, uneven
 * counts, in and out of place.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "ccoip_coll.h"
#include "ccoip_reduce.h"
#include "ptest.h"

#define NMAX     7u
#define CHECK(c) PT_ASSERT(c, "%s", #c)

typedef struct rank_mem {
    uint8_t *send, *recv, *scratch, *backup;
    uint64_t send_bytes, recv_bytes, scratch_bytes, backup_bytes;
    ccoip_coll_plan pl;
} rank_mem;

static uint8_t *region(rank_mem *m, const ccoip_coll_xfer *x)
{
    uint8_t *base = NULL;
    uint64_t size = 0;
    switch (x->region) {
    case CCOIP_REGION_SEND:
        base = m->send;
        size = m->send_bytes;
        break;
    case CCOIP_REGION_RECV:
        base = m->recv;
        size = m->recv_bytes;
        break;
    case CCOIP_REGION_SCRATCH:
        base = m->scratch;
        size = m->scratch_bytes;
        break;
    case CCOIP_REGION_BACKUP:
        base = m->backup;
        size = m->backup_bytes;
        break;
    default:
        PT_FAIL("unknown region %d", (int)x->region);
    }
    PT_ASSERT(x->offset <= size && x->bytes <= size - x->offset,
              "xfer [%llu, +%llu) outside its region (%llu bytes, region %d)",
              (unsigned long long)x->offset, (unsigned long long)x->bytes, (unsigned long long)size,
              (int)x->region);
    return base + x->offset;
}

static int32_t in_val(uint32_t rank, uint64_t i)
{
    return (int32_t)(rank * 1000003u + (uint32_t)i * 7919u + 11u) % 100000;
}

static int32_t red(pcclRedOp_t op, int32_t a, int32_t b)
{
    switch (op) {
    case pcclSum:
    case pcclAvg:
        return (int32_t)((uint32_t)a + (uint32_t)b);
    case pcclMax:
        return a > b ? a : b;
    case pcclMin:
        return a < b ? a : b;
    case pcclBxor:
        return a ^ b;
    default:
        return (int32_t)((uint32_t)a * (uint32_t)b);
    }
}

/* Runs one op of `kind` over n ranks; returns the ranks' memories (caller frees). */
static void run(ccoip_coll_kind kind, uint32_t n, uint64_t count, uint32_t root, pcclRedOp_t op,
                bool in_place, rank_mem *m)
{
    const uint64_t es = 4;
    for (uint32_t r = 0; r < n; r++) {
        rank_mem *x = &m[r];
        memset(x, 0, sizeof *x);
        CHECK(ccoip_coll_plan_make(kind, count, es, op, n, r, root, in_place, &x->pl) ==
              pcclSuccess);
        x->send_bytes = x->pl.send_bytes;
        x->recv_bytes = x->pl.recv_bytes;
        x->scratch_bytes = x->pl.scratch_bytes;
        x->backup_bytes = x->pl.backup_bytes;
        /* In place: SEND and RECV alias as ccoip_coll_plan_make documents. */
        const uint64_t b = count * es;
        const uint64_t big = x->send_bytes > x->recv_bytes ? x->send_bytes : x->recv_bytes;
        uint8_t *mem = calloc(1, (size_t)big + 1u);
        x->scratch = calloc(1, (size_t)x->scratch_bytes + 1u);
        x->backup = calloc(1, (size_t)x->backup_bytes + 1u);
        if (kind == CCOIP_COLL_BROADCAST) {
            x->send = x->recv = mem; /* one buffer: the root's input, the others' output */
            if (r != root) memset(mem, 0xEE, (size_t)big);
        } else if (!in_place) {
            x->send = mem;
            x->recv = calloc(1, (size_t)x->recv_bytes + 1u);
            memset(x->recv, 0xEE, (size_t)x->recv_bytes); /* garbage the op must overwrite */
        } else if (kind == CCOIP_COLL_ALL_GATHER) {
            x->recv = mem;
            x->send = mem + (uint64_t)r * b;
        } else if (kind == CCOIP_COLL_REDUCE_SCATTER) {
            x->send = mem;
            x->recv = mem + (uint64_t)r * b;
        } else if (kind == CCOIP_COLL_GATHER && r == root) {
            x->recv = mem;
            x->send = mem + (uint64_t)root * b;
        } else if (kind == CCOIP_COLL_SCATTER && r == root) {
            x->send = mem;
            x->recv = mem + (uint64_t)root * b;
        } else {
            x->send = x->recv = mem;
        }
        int32_t *s = (int32_t *)(void *)x->send;
        for (uint64_t i = 0; i < x->send_bytes / es && (kind != CCOIP_COLL_BROADCAST || r == root);
             i++)
            s[i] = in_val(r, i);
    }
    const uint32_t nsteps = m[0].pl.nsteps;
    for (uint32_t r = 0; r < n; r++) {
        PT_ASSERT(m[r].pl.nsteps == nsteps, "ranks disagree on the number of steps");
        for (uint32_t k = 0; k < m[r].pl.npro; k++) {
            const ccoip_coll_copy *c = &m[r].pl.pro[k];
            CHECK(c->src.bytes == c->dst.bytes);
            memmove(region(&m[r], &c->dst), region(&m[r], &c->src), (size_t)c->src.bytes);
        }
    }
    for (uint32_t t = 0; t < nsteps; t++) {
        ccoip_coll_step st[NMAX];
        for (uint32_t r = 0; r < n; r++)
            ccoip_coll_step_get(&m[r].pl, t, &st[r]);
        /* Snapshot every send first (all of a step's sends read before any receive lands). */
        uint8_t *payload[NMAX][CCOIP_COLL_PIECES];
        memset(payload, 0, sizeof payload);
        for (uint32_t r = 0; r < n; r++) {
            for (uint32_t k = 0; k < CCOIP_COLL_PIECES; k++) {
                const ccoip_coll_xfer *x = &st[r].send[k];
                if (!x->on) continue;
                payload[r][k] = malloc((size_t)x->bytes + 1u);
                memcpy(payload[r][k], region(&m[r], x), (size_t)x->bytes);
            }
        }
        for (uint32_t r = 0; r < n; r++) {
            const uint32_t pred = (r + n - 1u) % n;
            bool used[CCOIP_COLL_PIECES] = {false, false};
            for (uint32_t k = 0; k < CCOIP_COLL_PIECES; k++) {
                const ccoip_coll_xfer *x = &st[r].recv[k];
                if (!x->on) continue;
                PT_ASSERT(n > 1, "a receive at world 1");
                bool found = false;
                for (uint32_t j = 0; j < CCOIP_COLL_PIECES && !found; j++) {
                    const ccoip_coll_xfer *s = &st[pred].send[j];
                    if (!s->on || used[j] || s->chunk != x->chunk) continue;
                    PT_ASSERT(s->bytes == x->bytes,
                              "step %u: rank %u sends chunk %u of %llu bytes, rank %u expects %llu",
                              t, pred, s->chunk, (unsigned long long)s->bytes, r,
                              (unsigned long long)x->bytes);
                    memcpy(region(&m[r], x), payload[pred][j], (size_t)x->bytes);
                    used[j] = found = true;
                }
                PT_ASSERT(found, "step %u: rank %u waits for chunk %u its predecessor never sends",
                          t, r, x->chunk);
            }
            for (uint32_t j = 0; j < CCOIP_COLL_PIECES; j++) {
                PT_ASSERT(!st[pred].send[j].on || used[j],
                          "step %u: rank %u sends chunk %u nobody receives", t, pred,
                          st[pred].send[j].chunk);
            }
        }
        for (uint32_t r = 0; r < n; r++) {
            for (uint32_t k = 0; k < CCOIP_COLL_PIECES; k++)
                free(payload[r][k]);
            if (!st[r].reduce) continue;
            int32_t *dst = (int32_t *)(void *)region(&m[r], &st[r].red_dst);
            const int32_t *base = (const int32_t *)(const void *)region(&m[r], &st[r].red_base);
            const int32_t *src = (const int32_t *)(const void *)region(&m[r], &st[r].recv[0]);
            CHECK(st[r].red_dst.bytes == st[r].red_count * es &&
                  st[r].red_base.bytes == st[r].red_count * es &&
                  st[r].recv[0].bytes == st[r].red_count * es);
            for (uint64_t i = 0; i < st[r].red_count; i++)
                dst[i] = red(op, base[i], src[i]);
            if (st[r].finalize) {
                CHECK(op == pcclAvg);
                for (uint64_t i = 0; i < st[r].red_count; i++)
                    dst[i] = (int32_t)(dst[i] / (int32_t)n);
            }
        }
    }
    for (uint32_t r = 0; r < n; r++) {
        for (uint32_t k = 0; k < m[r].pl.nepi; k++) {
            const ccoip_coll_copy *c = &m[r].pl.epi[k];
            CHECK(c->src.bytes == c->dst.bytes);
            memmove(region(&m[r], &c->dst), region(&m[r], &c->src), (size_t)c->src.bytes);
        }
    }
}

static void release(rank_mem *m, uint32_t n, bool in_place, ccoip_coll_kind kind, uint32_t root)
{
    for (uint32_t r = 0; r < n; r++) {
        uint8_t *mem = m[r].send;
        if (in_place && (kind == CCOIP_COLL_ALL_GATHER || (kind == CCOIP_COLL_GATHER && r == root)))
            mem = m[r].recv;
        free(mem);
        if (!in_place && kind != CCOIP_COLL_BROADCAST) free(m[r].recv);
        free(m[r].scratch);
        free(m[r].backup);
    }
}

/* The reduction of every rank's element i of its input, in the order the reduce-scatter
 * reduces block or chunk k: x_k op (x_{k-1} op (... op (x_{k+2} op x_{k+1}))). For the
 * integer ops here the order does not change the value; AVG divides once at the end. */
static int32_t ref_reduce(pcclRedOp_t op, uint32_t n, uint32_t k, uint64_t i)
{
    int32_t acc = in_val((k + 1u) % n, i);
    for (uint32_t h = 2; h <= n; h++)
        acc = red(op, in_val((k + h) % n, i), acc);
    if (op == pcclAvg) acc = (int32_t)(acc / (int32_t)n);
    return acc;
}

static void check(ccoip_coll_kind kind, uint32_t n, uint64_t count, uint32_t root, pcclRedOp_t op,
                  bool in_place)
{
    rank_mem m[NMAX];
    run(kind, n, count, root, op, in_place, m);
    for (uint32_t r = 0; r < n; r++) {
        const int32_t *out = (const int32_t *)(const void *)m[r].recv;
        for (uint64_t i = 0; i < m[r].recv_bytes / 4u; i++) {
            int32_t want = 0;
            const uint64_t blk = count > 0 ? i / count : 0, off = count > 0 ? i % count : 0;
            switch (kind) {
            case CCOIP_COLL_BROADCAST:
                want = in_val(root, i);
                break;
            case CCOIP_COLL_ALL_GATHER:
            case CCOIP_COLL_GATHER:
                want = in_val((uint32_t)blk, off);
                break;
            case CCOIP_COLL_SCATTER:
                want = in_val(root, (uint64_t)r * count + i);
                break;
            case CCOIP_COLL_ALL_TO_ALL:
                want = in_val((uint32_t)blk, (uint64_t)r * count + off);
                break;
            case CCOIP_COLL_REDUCE_SCATTER:
                want = ref_reduce(op, n, r, (uint64_t)r * count + i);
                break;
            case CCOIP_COLL_REDUCE:
                want = ref_reduce(op, n, 0, i);
                break;
            default:
                PT_FAIL("kind %d", (int)kind);
            }
            PT_ASSERT(out[i] == want,
                      "kind %d n %u count %llu root %u op %d in_place %d: rank %u element %llu "
                      "is %d, want %d",
                      (int)kind, n, (unsigned long long)count, root, (int)op, (int)in_place, r,
                      (unsigned long long)i, out[i], want);
        }
    }
    release(m, n, in_place, kind, root);
}

static const uint64_t COUNTS[] = {0, 1, 2, 3, 5, 17, 64, 1000};

static void sweep(ccoip_coll_kind kind, pcclRedOp_t op, bool in_place)
{
    for (uint32_t n = 1; n <= NMAX; n++) {
        for (size_t c = 0; c < sizeof COUNTS / sizeof COUNTS[0]; c++) {
            const uint32_t roots = ccoip_coll_rooted(kind) ? n : 1u;
            for (uint32_t root = 0; root < roots; root++)
                check(kind, n, COUNTS[c], root, op, in_place);
        }
    }
}

PTEST(coll, broadcast_every_root)
{
    sweep(CCOIP_COLL_BROADCAST, pcclSum, false);
}

PTEST(coll, broadcast_pipelines_large_tensors_in_slices)
{
    /* 5 MiB: 5 slices, each forwarded as soon as it arrived. */
    ccoip_coll_plan pl;
    CHECK(ccoip_coll_plan_make(CCOIP_COLL_BROADCAST, (5u << 20) / 4u, 4, pcclSum, 4, 1, 0, false,
                               &pl) == pcclSuccess);
    PT_ASSERT(pl.slices == 5u && pl.nsteps == 5u + 4u - 2u, "slices %u steps %u", pl.slices,
              pl.nsteps);
    check(CCOIP_COLL_BROADCAST, 4, (5u << 20) / 4u + 3u, 2, pcclSum, false);
}

PTEST(coll, all_gather_out_of_and_in_place)
{
    sweep(CCOIP_COLL_ALL_GATHER, pcclSum, false);
    sweep(CCOIP_COLL_ALL_GATHER, pcclSum, true);
}

PTEST(coll, reduce_scatter_ops_and_in_place)
{
    sweep(CCOIP_COLL_REDUCE_SCATTER, pcclSum, false);
    sweep(CCOIP_COLL_REDUCE_SCATTER, pcclSum, true);
    sweep(CCOIP_COLL_REDUCE_SCATTER, pcclMax, false);
    sweep(CCOIP_COLL_REDUCE_SCATTER, pcclBxor, false);
    sweep(CCOIP_COLL_REDUCE_SCATTER, pcclAvg, false);
}

PTEST(coll, reduce_every_root_ops_and_in_place)
{
    sweep(CCOIP_COLL_REDUCE, pcclSum, false);
    sweep(CCOIP_COLL_REDUCE, pcclSum, true);
    sweep(CCOIP_COLL_REDUCE, pcclMin, false);
    sweep(CCOIP_COLL_REDUCE, pcclAvg, true);
}

PTEST(coll, gather_and_scatter_every_root)
{
    sweep(CCOIP_COLL_GATHER, pcclSum, false);
    sweep(CCOIP_COLL_GATHER, pcclSum, true);
    sweep(CCOIP_COLL_SCATTER, pcclSum, false);
    sweep(CCOIP_COLL_SCATTER, pcclSum, true);
}

PTEST(coll, all_to_all_out_of_and_in_place)
{
    sweep(CCOIP_COLL_ALL_TO_ALL, pcclSum, false);
    sweep(CCOIP_COLL_ALL_TO_ALL, pcclSum, true);
}

PTEST(coll, barrier_has_no_steps_and_no_buffers)
{
    for (uint32_t n = 1; n <= NMAX; n++) {
        ccoip_coll_plan pl;
        CHECK(ccoip_coll_plan_make(CCOIP_COLL_BARRIER, 0, 4, pcclSum, n, 0, 0, false, &pl) ==
              pcclSuccess);
        CHECK(pl.nsteps == 0 && pl.send_bytes == 0 && pl.recv_bytes == 0 && pl.scratch_bytes == 0 &&
              pl.npro == 0 && pl.nepi == 0);
    }
}

PTEST(coll, sizes_per_kind_and_bad_arguments)
{
    uint64_t s = 0, r = 0;
    CHECK(ccoip_coll_sizes(CCOIP_COLL_ALL_GATHER, 10, 4, 3, 1, 0, &s, &r) == pcclSuccess);
    CHECK(s == 40 && r == 120);
    CHECK(ccoip_coll_sizes(CCOIP_COLL_REDUCE_SCATTER, 10, 4, 3, 1, 0, &s, &r) == pcclSuccess);
    CHECK(s == 120 && r == 40);
    CHECK(ccoip_coll_sizes(CCOIP_COLL_GATHER, 10, 2, 4, 1, 1, &s, &r) == pcclSuccess);
    CHECK(s == 20 && r == 80);
    CHECK(ccoip_coll_sizes(CCOIP_COLL_GATHER, 10, 2, 4, 2, 1, &s, &r) == pcclSuccess);
    CHECK(s == 20 && r == 0);
    CHECK(ccoip_coll_sizes(CCOIP_COLL_SCATTER, 10, 2, 4, 2, 1, &s, &r) == pcclSuccess);
    CHECK(s == 0 && r == 20);
    CHECK(ccoip_coll_sizes(CCOIP_COLL_REDUCE, 10, 8, 2, 0, 1, &s, &r) == pcclSuccess);
    CHECK(s == 80 && r == 0);
    CHECK(ccoip_coll_sizes(CCOIP_COLL_BARRIER, 10, 8, 2, 0, 1, &s, &r) == pcclSuccess);
    CHECK(s == 0 && r == 0);
    CHECK(ccoip_coll_sizes(CCOIP_COLL_GATHER, 10, 4, 3, 3, 0, &s, &r) == pcclInvalidArgument);
    CHECK(ccoip_coll_sizes(CCOIP_COLL_GATHER, 10, 4, 3, 0, 3, &s, &r) == pcclInvalidArgument);
    CHECK(ccoip_coll_sizes(CCOIP_COLL_GATHER, 10, 4, 0, 0, 0, &s, &r) == pcclInvalidArgument);
    CHECK(ccoip_coll_sizes(CCOIP_COLL_SEND, 10, 4, 2, 0, 1, &s, &r) == pcclSuccess);
    CHECK(s == 40 && r == 0);
    CHECK(ccoip_coll_sizes(CCOIP_COLL_RECV, 10, 4, 2, 1, 0, &s, &r) == pcclSuccess);
    CHECK(s == 0 && r == 40);
    CHECK(ccoip_coll_sizes(CCOIP_COLL_SEND, 10, 4, 2, 0, 2, &s, &r) == pcclInvalidArgument);
    CHECK(ccoip_coll_sizes((ccoip_coll_kind)12, 10, 4, 2, 0, 0, &s, &r) == pcclInvalidArgument);
    CHECK(!ccoip_coll_relay_use(CCOIP_COLL_SEND, 1, 4, 2, 1u << 20));
    CHECK(ccoip_p2p_tag(5, 0, 1) != ccoip_p2p_tag(5, 1, 0));
    CHECK(ccoip_p2p_tag(5, 0, 1) != ccoip_p2p_tag(6, 0, 1));
    CHECK(ccoip_p2p_tag(5, 0, 1) == ccoip_p2p_tag(5, 0, 1));
    CHECK((ccoip_p2p_tag(0, 0, 0) >> 63) == 1u);
    CHECK(ccoip_coll_sizes(CCOIP_COLL_ALL_TO_ALL, UINT64_MAX / 8u, 4, 2, 0, 0, &s, &r) ==
          pcclInvalidArgument);
    ccoip_coll_plan pl;
    CHECK(ccoip_coll_plan_make(CCOIP_COLL_ALL_REDUCE, 10, 4, pcclSum, 2, 0, 0, false, &pl) ==
          pcclInvalidArgument);
    CHECK(ccoip_coll_plan_make(CCOIP_COLL_SEND, 10, 4, pcclSum, 2, 0, 1, false, &pl) ==
          pcclInvalidArgument);
}
