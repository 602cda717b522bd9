/*
 * coll.c — the schedules of the collectives beyond all-reduce (ccoip_coll.h,
 * docs/collectives.md): buffer sizes, plans and steps, as pure functions.
 */
#include <string.h>

#include "ccoip_coll.h"

#include "ccoip_algo.h"
#include "ccoip_ring.h"

/* Sizes are kept below 2^62 bytes: sums of a few of them cannot overflow. */
#define COLL_BYTES_MAX ((uint64_t)1 << 62)

static uint32_t coll_mod(int64_t a, uint32_t n)
{
    const int64_t m = a % (int64_t)n;
    return (uint32_t)(m < 0 ? m + (int64_t)n : m);
}

static ccoip_coll_xfer xf(ccoip_region region, uint64_t offset, uint64_t bytes, uint32_t chunk)
{
    ccoip_coll_xfer x;
    memset(&x, 0, sizeof x);
    x.on = true;
    x.region = region;
    x.offset = offset;
    x.bytes = bytes;
    x.chunk = chunk;
    return x;
}

bool ccoip_coll_reduces(ccoip_coll_kind kind)
{
    return kind == CCOIP_COLL_ALL_REDUCE || kind == CCOIP_COLL_REDUCE ||
           kind == CCOIP_COLL_REDUCE_SCATTER;
}

bool ccoip_coll_p2p(ccoip_coll_kind kind)
{
    return kind == CCOIP_COLL_SEND || kind == CCOIP_COLL_RECV;
}

uint64_t ccoip_p2p_tag(uint64_t tag, uint32_t src, uint32_t dst)
{
    /* Two rounds of a 64-bit finalizer over the tag and the pair: a different pair or tag gives
     * another key but for a 2^-64 chance; the top bit keeps it apart from small user tags. */
    uint64_t z = tag ^ 0x7032702074616700ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z ^= ((uint64_t)src << 32 | dst) * 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return z | ((uint64_t)1 << 63);
}

bool ccoip_coll_rooted(ccoip_coll_kind kind)
{
    return kind == CCOIP_COLL_BROADCAST || kind == CCOIP_COLL_REDUCE || kind == CCOIP_COLL_GATHER ||
           kind == CCOIP_COLL_SCATTER;
}

pcclResult_t ccoip_coll_sizes(ccoip_coll_kind kind, uint64_t count, uint64_t esize, uint32_t world,
                              uint32_t rank, uint32_t root, uint64_t *send_bytes,
                              uint64_t *recv_bytes)
{
    /* (a tuning round's root names the kind it tunes: docs/protocol.md §6.8.5) */
    const uint32_t root_max = kind == CCOIP_COLL_TUNE ? CCOIP_COLL_KINDS : world;
    if ((uint32_t)kind >= CCOIP_COLL_KINDS_ALL || world == 0 || world > CCOIP_RING_WORLD_MAX ||
        rank >= world || root >= root_max || esize == 0 || send_bytes == NULL ||
        recv_bytes == NULL) {
        return pcclInvalidArgument;
    }
    if (count > COLL_BYTES_MAX / esize / world) return pcclInvalidArgument;
    const uint64_t b = count * esize, all = b * world;
    const bool at_root = rank == root;
    uint64_t s = 0, r = 0;
    switch (kind) {
    case CCOIP_COLL_ALL_REDUCE:
    case CCOIP_COLL_BROADCAST:
        s = r = b;
        break;
    case CCOIP_COLL_REDUCE:
        s = b;
        r = at_root ? b : 0;
        break;
    case CCOIP_COLL_ALL_GATHER:
        s = b;
        r = all;
        break;
    case CCOIP_COLL_REDUCE_SCATTER:
        s = all;
        r = b;
        break;
    case CCOIP_COLL_ALL_TO_ALL:
        s = r = all;
        break;
    case CCOIP_COLL_GATHER:
        s = b;
        r = at_root ? all : 0;
        break;
    case CCOIP_COLL_SCATTER:
        s = at_root ? all : 0;
        r = b;
        break;
    case CCOIP_COLL_BARRIER:
        break;
    case CCOIP_COLL_SEND:
        s = b;
        break;
    case CCOIP_COLL_RECV:
        r = b;
        break;
    case CCOIP_COLL_TUNE:
        /* count float32 timings in, the encoded table out (ccoip_algo.h) */
        if (count != CCOIP_ALGO_TIMINGS || esize != 4u) return pcclInvalidArgument;
        s = b;
        r = CCOIP_ALGO_TABLE_BYTES;
        break;
    }
    *send_bytes = s;
    *recv_bytes = r;
    return pcclSuccess;
}

bool ccoip_coll_relay_use(ccoip_coll_kind kind, uint64_t count, uint64_t esize, uint32_t world,
                          uint64_t relay_max)
{
    if (kind == CCOIP_COLL_ALL_REDUCE || ccoip_coll_p2p(kind) || relay_max == 0 || world < 2)
        return false;
    if (kind == CCOIP_COLL_TUNE) return true; /* always relayed: the master combines it */
    uint64_t most = 0;
    for (uint32_t r = 0; r < world && r < 2u; r++) {
        /* Rank 0 as the root and rank 1 as another member bound every rank's sizes. */
        uint64_t s = 0, v = 0;
        if (ccoip_coll_sizes(kind, count, esize, world, r, 0, &s, &v) != pcclSuccess) return false;
        if (s > most) most = s;
        if (v > most) most = v;
    }
    return most <= relay_max && most <= CCOIP_RELAY_MAX_BYTES;
}

static void add_copy(ccoip_coll_copy *list, uint32_t *n, ccoip_coll_xfer src, ccoip_coll_xfer dst)
{
    list[*n].src = src;
    list[*n].dst = dst;
    (*n)++;
}

pcclResult_t ccoip_coll_plan_make(ccoip_coll_kind kind, uint64_t count, uint64_t esize,
                                  pcclRedOp_t op, uint32_t world, uint32_t rank, uint32_t root,
                                  bool in_place, ccoip_coll_plan *out)
{
    if (out == NULL || kind == CCOIP_COLL_ALL_REDUCE || ccoip_coll_p2p(kind))
        return pcclInvalidArgument;
    memset(out, 0, sizeof *out);
    pcclResult_t r =
        ccoip_coll_sizes(kind, count, esize, world, rank, root, &out->send_bytes, &out->recv_bytes);
    if (r != pcclSuccess) return r;
    out->kind = kind;
    out->op = op;
    out->world = world;
    out->rank = rank;
    out->root = ccoip_coll_rooted(kind) ? root : 0;
    out->count = count;
    out->esize = esize;
    out->in_place = in_place;
    const uint64_t b = count * esize;
    const uint32_t n = world;
    const bool at_root = rank == root;
    switch (kind) {
    case CCOIP_COLL_ALL_REDUCE:
    case CCOIP_COLL_BARRIER:
    case CCOIP_COLL_SEND:
    case CCOIP_COLL_RECV:
    case CCOIP_COLL_TUNE: /* relayed only */
        break;
    case CCOIP_COLL_BROADCAST: {
        uint64_t s = (b + CCOIP_COLL_BCAST_SLICE_BYTES - 1u) / CCOIP_COLL_BCAST_SLICE_BYTES;
        if (s > CCOIP_COLL_BCAST_SLICES_MAX) s = CCOIP_COLL_BCAST_SLICES_MAX;
        if (s > count) s = count;
        if (s == 0) s = 1;
        out->slices = (uint32_t)s;
        out->nsteps = n > 1 ? out->slices + n - 2u : 0;
        break;
    }
    case CCOIP_COLL_ALL_GATHER:
        out->nsteps = n - 1u;
        if (!in_place) {
            add_copy(out->epi, &out->nepi, xf(CCOIP_REGION_SEND, 0, b, 0),
                     xf(CCOIP_REGION_RECV, (uint64_t)rank * b, b, 0));
        }
        break;
    case CCOIP_COLL_REDUCE_SCATTER:
        out->nsteps = n - 1u;
        out->scratch_bytes = n > 1 ? 3u * b : 0;
        if (in_place) {
            out->backup_bytes = b;
            add_copy(out->pro, &out->npro, xf(CCOIP_REGION_RECV, 0, b, 0),
                     xf(CCOIP_REGION_BACKUP, 0, b, 0));
        } else if (n == 1) {
            add_copy(out->epi, &out->nepi, xf(CCOIP_REGION_SEND, 0, b, 0),
                     xf(CCOIP_REGION_RECV, 0, b, 0));
        }
        break;
    case CCOIP_COLL_REDUCE: {
        const uint64_t mc = (count / n + (count % n != 0 ? 1u : 0u)) * esize;
        out->nsteps = 2u * (n - 1u);
        out->scratch_bytes = n > 1 ? 3u * mc : 0;
        if (in_place && at_root) {
            out->backup_bytes = b;
            add_copy(out->pro, &out->npro, xf(CCOIP_REGION_RECV, 0, b, 0),
                     xf(CCOIP_REGION_BACKUP, 0, b, 0));
        } else if (n == 1) {
            add_copy(out->epi, &out->nepi, xf(CCOIP_REGION_SEND, 0, b, 0),
                     xf(CCOIP_REGION_RECV, 0, b, 0));
        }
        break;
    }
    case CCOIP_COLL_GATHER:
        out->nsteps = n - 1u;
        out->scratch_bytes = at_root || n == 1 ? 0 : 2u * b;
        if (at_root && !in_place) {
            add_copy(out->epi, &out->nepi, xf(CCOIP_REGION_SEND, 0, b, 0),
                     xf(CCOIP_REGION_RECV, (uint64_t)root * b, b, 0));
        }
        break;
    case CCOIP_COLL_SCATTER:
        out->nsteps = n - 1u;
        out->scratch_bytes = at_root || n == 1 ? 0 : 2u * b;
        if (at_root && !in_place) {
            add_copy(out->epi, &out->nepi, xf(CCOIP_REGION_SEND, (uint64_t)root * b, b, 0),
                     xf(CCOIP_REGION_RECV, 0, b, 0));
        }
        break;
    case CCOIP_COLL_ALL_TO_ALL:
        out->nsteps = n - 1u;
        out->scratch_bytes = n > 1 ? (uint64_t)(n - 1u) * b + 2u * (uint64_t)(n - 2u) * b : 0;
        if (in_place) {
            out->backup_bytes = b * n;
            add_copy(out->pro, &out->npro, xf(CCOIP_REGION_RECV, 0, b * n, 0),
                     xf(CCOIP_REGION_BACKUP, 0, b * n, 0));
        }
        /* PACK: the blocks for ranks r + 1, r + 2, ..., r + N - 1 (mod N), in that order. */
        if (n > 1 && rank < n - 1u) {
            add_copy(
                out->pro, &out->npro,
                xf(CCOIP_REGION_SEND, (uint64_t)(rank + 1u) * b, (uint64_t)(n - 1u - rank) * b, 0),
                xf(CCOIP_REGION_SCRATCH, 0, (uint64_t)(n - 1u - rank) * b, 0));
        }
        if (n > 1 && rank > 0) {
            add_copy(
                out->pro, &out->npro, xf(CCOIP_REGION_SEND, 0, (uint64_t)rank * b, 0),
                xf(CCOIP_REGION_SCRATCH, (uint64_t)(n - 1u - rank) * b, (uint64_t)rank * b, 0));
        }
        if (!in_place) {
            add_copy(out->epi, &out->nepi, xf(CCOIP_REGION_SEND, (uint64_t)rank * b, b, 0),
                     xf(CCOIP_REGION_RECV, (uint64_t)rank * b, b, 0));
        }
        break;
    }
    return pcclSuccess;
}

/* Chunk k of the reduce's tensor, in bytes. */
static ccoip_span coll_chunk_bytes(const ccoip_coll_plan *pl, uint32_t k)
{
    ccoip_span c = ccoip_ring_chunk(pl->count, pl->world, k);
    c.offset *= pl->esize;
    c.count *= pl->esize;
    return c;
}

static void step_all_gather(const ccoip_coll_plan *pl, uint32_t t, ccoip_coll_step *st)
{
    const uint64_t b = pl->count * pl->esize;
    const uint32_t sb = coll_mod((int64_t)pl->rank - t, pl->world);
    const uint32_t rb = coll_mod((int64_t)pl->rank - t - 1, pl->world);
    st->send[0] = t == 0 && !pl->in_place ? xf(CCOIP_REGION_SEND, 0, b, sb)
                                          : xf(CCOIP_REGION_RECV, (uint64_t)sb * b, b, sb);
    st->recv[0] = xf(CCOIP_REGION_RECV, (uint64_t)rb * b, b, rb);
}

/* The reduce-scatter half shared by REDUCE_SCATTER (blocks of b bytes) and REDUCE (the
 * tensor's N chunks); step s < N - 1. LAND = scratch [0, unit), ACC j = [(1 + j) unit, ...). */
static void step_reduce_scatter(const ccoip_coll_plan *pl, uint32_t s, ccoip_coll_step *st)
{
    const uint32_t n = pl->world;
    const bool blocks = pl->kind == CCOIP_COLL_REDUCE_SCATTER;
    const uint64_t b = pl->count * pl->esize;
    const uint64_t unit = blocks ? b : (pl->count / n + (pl->count % n != 0 ? 1u : 0u)) * pl->esize;
    const uint32_t ks = coll_mod((int64_t)pl->rank - s - 1, n);
    const uint32_t kr = coll_mod((int64_t)pl->rank - s - 2, n);
    const ccoip_span cs = blocks ? (ccoip_span){(uint64_t)ks * b, b} : coll_chunk_bytes(pl, ks);
    const ccoip_span cr = blocks ? (ccoip_span){(uint64_t)kr * b, b} : coll_chunk_bytes(pl, kr);
    st->send[0] = s == 0 ? xf(CCOIP_REGION_SEND, cs.offset, cs.count, ks)
                         : xf(CCOIP_REGION_SCRATCH, (1u + (s - 1u) % 2u) * unit, cs.count, ks);
    st->recv[0] = xf(CCOIP_REGION_SCRATCH, 0, cr.count, kr);
    st->reduce = true;
    st->red_count = cr.count / pl->esize;
    st->red_base = xf(CCOIP_REGION_SEND, cr.offset, cr.count, 0);
    const bool last = s + 2u == n;
    if (!last) {
        st->red_dst = xf(CCOIP_REGION_SCRATCH, (1u + s % 2u) * unit, cr.count, 0);
    } else if (blocks) {
        st->red_dst = xf(CCOIP_REGION_RECV, 0, b, 0);
    } else if (pl->rank == pl->root) {
        st->red_dst = xf(CCOIP_REGION_RECV, cr.offset, cr.count, 0); /* kr == rank */
    } else {
        st->red_dst = xf(CCOIP_REGION_SCRATCH, (1u + s % 2u) * unit, cr.count, 0);
    }
    st->finalize = last && pl->op == pcclAvg;
}

/* The reduce's gather of the chunks to the root: step t of N - 1. Position q = (r - root - 1)
 * mod N (the root is N - 1); chunk k is rank k's, reduced by it; origin position o is rank
 * (root + 1 + o) mod N. Non-roots keep their own chunk in ACC (N - 2) % 2 and forward through
 * FWD 0 = ACC (N - 1) % 2 and FWD 1 = LAND, alternately. */
static void step_reduce_gather(const ccoip_coll_plan *pl, uint32_t t, ccoip_coll_step *st)
{
    const uint32_t n = pl->world;
    const uint64_t unit = (pl->count / n + (pl->count % n != 0 ? 1u : 0u)) * pl->esize;
    const int64_t q = coll_mod((int64_t)pl->rank - pl->root - 1, n);
    const uint64_t own = (1u + (n - 2u) % 2u) * unit;
    const uint64_t fwd[2] = {(1u + (n - 1u) % 2u) * unit, 0};
    if (q <= (int64_t)n - 2 && q >= (int64_t)t) {
        const uint32_t k = coll_mod((int64_t)pl->root + 1 + (q - t), n);
        const ccoip_span c = coll_chunk_bytes(pl, k);
        st->send[0] = xf(CCOIP_REGION_SCRATCH, t == 0 ? own : fwd[(t - 1u) % 2u], c.count, k);
    }
    if (q - 1 - (int64_t)t >= 0) {
        const uint32_t k = coll_mod((int64_t)pl->root + 1 + (q - 1 - t), n);
        const ccoip_span c = coll_chunk_bytes(pl, k);
        st->recv[0] = pl->rank == pl->root ? xf(CCOIP_REGION_RECV, c.offset, c.count, k)
                                           : xf(CCOIP_REGION_SCRATCH, fwd[t % 2u], c.count, k);
    }
}

static void step_broadcast(const ccoip_coll_plan *pl, uint32_t t, ccoip_coll_step *st)
{
    const int64_t d = coll_mod((int64_t)pl->rank - pl->root, pl->world);
    const int64_t jr = (int64_t)t - d + 1, js = (int64_t)t - d;
    if (d >= 1 && jr >= 0 && jr < (int64_t)pl->slices) {
        const ccoip_span c = ccoip_ring_chunk(pl->count, pl->slices, (uint32_t)jr);
        st->recv[0] =
            xf(CCOIP_REGION_RECV, c.offset * pl->esize, c.count * pl->esize, (uint32_t)jr);
    }
    if (d <= (int64_t)pl->world - 2 && js >= 0 && js < (int64_t)pl->slices) {
        const ccoip_span c = ccoip_ring_chunk(pl->count, pl->slices, (uint32_t)js);
        st->send[0] =
            xf(CCOIP_REGION_RECV, c.offset * pl->esize, c.count * pl->esize, (uint32_t)js);
    }
}

static void step_gather(const ccoip_coll_plan *pl, uint32_t t, ccoip_coll_step *st)
{
    const uint32_t n = pl->world;
    const uint64_t b = pl->count * pl->esize;
    const int64_t q = coll_mod((int64_t)pl->rank - pl->root - 1, n);
    if (q <= (int64_t)n - 2 && q >= (int64_t)t) {
        const uint32_t k = coll_mod((int64_t)pl->root + 1 + (q - t), n);
        st->send[0] = t == 0 ? xf(CCOIP_REGION_SEND, 0, b, k)
                             : xf(CCOIP_REGION_SCRATCH, ((t - 1u) % 2u) * b, b, k);
    }
    if (q - 1 - (int64_t)t >= 0) {
        const uint32_t k = coll_mod((int64_t)pl->root + 1 + (q - 1 - t), n);
        st->recv[0] = pl->rank == pl->root ? xf(CCOIP_REGION_RECV, (uint64_t)k * b, b, k)
                                           : xf(CCOIP_REGION_SCRATCH, (t % 2u) * b, b, k);
    }
}

static void step_scatter(const ccoip_coll_plan *pl, uint32_t t, ccoip_coll_step *st)
{
    const uint32_t n = pl->world;
    const uint64_t b = pl->count * pl->esize;
    const int64_t q = coll_mod((int64_t)pl->rank - pl->root, n);
    if ((int64_t)t >= q) {
        const int64_t p = (int64_t)n - 1 - t + q;
        const uint32_t k = coll_mod((int64_t)pl->root + p, n);
        st->send[0] = q == 0 ? xf(CCOIP_REGION_SEND, (uint64_t)k * b, b, k)
                             : xf(CCOIP_REGION_SCRATCH, ((t - 1u) % 2u) * b, b, k);
    }
    if (q >= 1 && (int64_t)t >= q - 1) {
        const int64_t p = (int64_t)n - 2 - t + q;
        const uint32_t k = coll_mod((int64_t)pl->root + p, n);
        st->recv[0] =
            p == q ? xf(CCOIP_REGION_RECV, 0, b, k) : xf(CCOIP_REGION_SCRATCH, (t % 2u) * b, b, k);
    }
}

/* Step s is hop t = s + 1. PACK = scratch [0, (N - 1) b); BUF j = [(N - 1) b + j (N - 2) b, ..). */
static void step_all_to_all(const ccoip_coll_plan *pl, uint32_t s, ccoip_coll_step *st)
{
    const uint32_t n = pl->world, t = s + 1u;
    const uint64_t b = pl->count * pl->esize;
    const uint64_t buf0 = (uint64_t)(n - 1u) * b, bufsz = (uint64_t)(n - 2u) * b;
    const uint64_t from = t == 1u ? 0 : buf0 + ((t - 2u) % 2u) * bufsz;
    const uint64_t rest = (uint64_t)(n - t - 1u) * b;
    st->send[0] = xf(CCOIP_REGION_SCRATCH, from, b, 0);
    st->recv[0] = xf(CCOIP_REGION_RECV, (uint64_t)coll_mod((int64_t)pl->rank - t, n) * b, b, 0);
    if (rest > 0) {
        st->send[1] = xf(CCOIP_REGION_SCRATCH, from + b, rest, 1);
        st->recv[1] = xf(CCOIP_REGION_SCRATCH, buf0 + ((t - 1u) % 2u) * bufsz, rest, 1);
    }
}

void ccoip_coll_step_get(const ccoip_coll_plan *pl, uint32_t t, ccoip_coll_step *st)
{
    memset(st, 0, sizeof *st);
    if (pl == NULL || t >= pl->nsteps) return;
    switch (pl->kind) {
    case CCOIP_COLL_ALL_GATHER:
        step_all_gather(pl, t, st);
        break;
    case CCOIP_COLL_REDUCE_SCATTER:
        step_reduce_scatter(pl, t, st);
        break;
    case CCOIP_COLL_REDUCE:
        if (t + 1u < pl->world) {
            step_reduce_scatter(pl, t, st);
        } else {
            step_reduce_gather(pl, t - (pl->world - 1u), st);
        }
        break;
    case CCOIP_COLL_BROADCAST:
        step_broadcast(pl, t, st);
        break;
    case CCOIP_COLL_GATHER:
        step_gather(pl, t, st);
        break;
    case CCOIP_COLL_SCATTER:
        step_scatter(pl, t, st);
        break;
    case CCOIP_COLL_ALL_TO_ALL:
        step_all_to_all(pl, t, st);
        break;
    case CCOIP_COLL_ALL_REDUCE:
    case CCOIP_COLL_BARRIER:
    case CCOIP_COLL_SEND:
    case CCOIP_COLL_RECV:
    case CCOIP_COLL_TUNE:
        break;
    }
}
