/*
 * algo.c — the algorithm collection's selection and the tuned table (ccoip_algo.h,
 * docs/algorithms.md).
 */
#include "ccoip_algo.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ccoip_hd.h"
#include "ccoip_ring.h"

static const char *const g_names[] = {"auto", "relay",        "direct",
                                      "ring", "ring_striped", "halving_doubling"};

static const char *const g_kinds[CCOIP_ALGO_KINDS] = {"all_reduce", "broadcast",      "reduce",
                                                      "all_gather", "reduce_scatter", "all_to_all",
                                                      "gather",     "scatter",        "barrier"};

const char *ccoip_algo_kind_name(uint32_t kind)
{
    return kind < CCOIP_ALGO_KINDS ? g_kinds[kind] : NULL;
}

const char *ccoip_algo_name(uint32_t algo)
{
    return algo < sizeof g_names / sizeof g_names[0] ? g_names[algo] : NULL;
}

bool ccoip_algo_parse(const char *name, size_t len, ccoip_algo *out)
{
    for (uint32_t a = 0; a < sizeof g_names / sizeof g_names[0]; a++) {
        if (strlen(g_names[a]) == len && memcmp(g_names[a], name, len) == 0) {
            *out = (ccoip_algo)a;
            return true;
        }
    }
    return false;
}

uint32_t ccoip_algo_size_class(uint64_t bytes)
{
    uint32_t k = 0;
    while (k + 1u < CCOIP_ALGO_SIZES && bytes > ((uint64_t)1024 << k))
        k++;
    return k;
}

static uint64_t query_bytes(const ccoip_algo_query *q)
{
    return q->esize > 0 && q->count <= UINT64_MAX / q->esize ? q->count * q->esize : UINT64_MAX;
}

bool ccoip_algo_applies(ccoip_algo algo, const ccoip_algo_query *q)
{
    const bool p2p = ccoip_coll_p2p(q->kind);
    const bool ar = q->kind == CCOIP_COLL_ALL_REDUCE;
    const uint64_t bytes = query_bytes(q);
    switch (algo) {
    case CCOIP_ALGO_RELAY:
        if (p2p || q->quantized || q->premul) return false;
        return ar ? ccoip_relay_use(bytes, q->relay_max, false)
                  : ccoip_coll_relay_use(q->kind, q->count, q->esize, q->world, q->relay_max);
    case CCOIP_ALGO_DIRECT:
        return ar && !q->quantized && !q->premul && bytes > 0 && bytes <= CCOIP_ALGO_DIRECT_MAX;
    case CCOIP_ALGO_RING:
    case CCOIP_ALGO_RING_STRIPED:
        return q->kind != CCOIP_COLL_TUNE; /* the tuning round is relayed only */
    case CCOIP_ALGO_HALVING_DOUBLING:
        /* Over the ring's own links, both ways: its partners are neighbours at N = 2, 4. */
        /* (a group of one: the master's pcclTooFewPeers, as for every algorithm) */
        return ar && !q->quantized && (q->world < 2u || ccoip_hd_fits(q->count, q->world));
    case CCOIP_ALGO_AUTO:
        break;
    }
    return false;
}

bool ccoip_algo_forcible(ccoip_algo algo, const ccoip_algo_query *q)
{
    /* Halving-doubling forced on a world it does not fit runs the ring (the executor decides
     * by the world the op runs in, the same at every member): a group whose size changes
     * under a program that forces it never sees an error for that. */
    if (algo == CCOIP_ALGO_HALVING_DOUBLING)
        return q->kind == CCOIP_COLL_ALL_REDUCE && !q->quantized;
    return ccoip_algo_applies(algo, q);
}

ccoip_algo ccoip_algo_default(const ccoip_algo_query *q)
{
    if (ccoip_algo_applies(CCOIP_ALGO_RELAY, q)) return CCOIP_ALGO_RELAY;
    if (q->kind == CCOIP_COLL_ALL_REDUCE && !q->premul &&
        ccoip_ring_use_gather(query_bytes(q), q->world, q->quantized)) {
        return CCOIP_ALGO_DIRECT;
    }
    return ccoip_algo_applies(CCOIP_ALGO_RING_STRIPED, q) ? CCOIP_ALGO_RING_STRIPED
                                                          : CCOIP_ALGO_AUTO;
}

ccoip_algo ccoip_algo_resolve(ccoip_algo forced, const ccoip_algo_table *table,
                              const ccoip_algo_query *q)
{
    if (forced != CCOIP_ALGO_AUTO) return ccoip_algo_forcible(forced, q) ? forced : CCOIP_ALGO_AUTO;
    if (table != NULL && (uint32_t)q->kind < CCOIP_ALGO_KINDS && q->world >= 2u &&
        q->world <= CCOIP_ALGO_WORLD_MAX) {
        const ccoip_algo a =
            (ccoip_algo)table->algo[q->kind][q->world - 2u][ccoip_algo_size_class(query_bytes(q))];
        if (a != CCOIP_ALGO_AUTO && ccoip_algo_applies(a, q)) return a;
    }
    return ccoip_algo_default(q);
}

void ccoip_algo_table_clear(ccoip_algo_table *t)
{
    memset(t, 0, sizeof *t);
}

bool ccoip_algo_table_empty(const ccoip_algo_table *t)
{
    const uint8_t *a = &t->algo[0][0][0];
    for (size_t i = 0; i < sizeof t->algo; i++)
        if (a[i] != CCOIP_ALGO_AUTO) return false;
    return true;
}

void ccoip_algo_table_encode(const ccoip_algo_table *t, uint8_t out[CCOIP_ALGO_TABLE_BYTES])
{
    out[0] = CCOIP_ALGO_TABLE_VERSION;
    memcpy(out + 1, t->algo, sizeof t->algo);
}

pcclResult_t ccoip_algo_table_decode(const uint8_t *in, size_t len, ccoip_algo_table *out)
{
    if (in == NULL || len != CCOIP_ALGO_TABLE_BYTES || in[0] != CCOIP_ALGO_TABLE_VERSION)
        return pcclInvalidArgument;
    for (size_t i = 1; i < len; i++)
        if (in[i] > CCOIP_ALGO_LAST) return pcclInvalidArgument;
    memcpy(out->algo, in + 1, sizeof out->algo);
    return pcclSuccess;
}

/* Report value i (little-endian binary32) as a double; NAN when not run. */
static double report_value(const uint8_t *r, uint32_t i)
{
    const uint8_t *b = r + (size_t)i * 4u;
    const uint32_t u =
        (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
    float f;
    memcpy(&f, &u, sizeof f);
    return isfinite(f) && f > 0.0f ? (double)f : NAN;
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y ? 1 : 0;
}

double ccoip_algo_median(double *v, uint32_t n)
{
    if (n == 0) return NAN;
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2u ? v[n / 2u] : (v[n / 2u - 1u] + v[n / 2u]) / 2.0;
}

pcclResult_t ccoip_algo_combine(ccoip_algo_table *t, uint32_t kind, uint32_t world,
                                const uint8_t *const *reports, uint32_t n)
{
    if (kind >= CCOIP_ALGO_KINDS || world < 2u || world > CCOIP_ALGO_WORLD_MAX || n == 0 ||
        n > CCOIP_ALGO_WORLD_MAX || reports == NULL)
        return pcclInvalidArgument;
    double v[CCOIP_ALGO_WORLD_MAX];
    for (uint32_t k = 0; k < CCOIP_ALGO_SIZES; k++) {
        uint8_t best = CCOIP_ALGO_AUTO;
        double best_t = 0.0;
        for (uint32_t c = 0; c < CCOIP_ALGO_COUNT; c++) {
            bool all = true;
            for (uint32_t m = 0; m < n && all; m++) {
                v[m] = report_value(reports[m], k * CCOIP_ALGO_COUNT + c);
                all = !isnan(v[m]);
            }
            if (!all) continue;
            const double med = ccoip_algo_median(v, n);
            if (best == CCOIP_ALGO_AUTO || med < best_t) {
                best = (uint8_t)(c + 1u);
                best_t = med;
            }
        }
        t->algo[kind][world - 2u][k] = best;
    }
    return pcclSuccess;
}

/* Appends text to out (at *len, within cap; *len counts every byte, written or not). */
static void put(char *out, size_t cap, size_t *len, const char *text)
{
    for (; *text != '\0'; text++, (*len)++)
        if (out != NULL && *len + 1u < cap) out[*len] = *text;
}

size_t ccoip_algo_table_format(const ccoip_algo_table *t, char *out, size_t cap)
{
    size_t len = 0;
    put(out, cap, &len,
        "# pccl algorithm table v2: per kind and world, sizes 1 KiB .. 256 MiB "
        "(\"world N:\" lines: all_reduce)\n");
    for (uint32_t c = 0; c < CCOIP_ALGO_KINDS; c++) {
        for (uint32_t w = 0; w < CCOIP_ALGO_ROWS; w++) {
            bool any = false;
            for (uint32_t k = 0; k < CCOIP_ALGO_SIZES; k++)
                any = any || t->algo[c][w][k] != CCOIP_ALGO_AUTO;
            if (!any) continue;
            const char digit[2] = {(char)('2' + w), '\0'}; /* worlds 2 .. 8 */
            if (c != CCOIP_COLL_ALL_REDUCE) {
                put(out, cap, &len, ccoip_algo_kind_name(c));
                put(out, cap, &len, " ");
            }
            put(out, cap, &len, "world ");
            put(out, cap, &len, digit);
            put(out, cap, &len, ":");
            for (uint32_t k = 0; k < CCOIP_ALGO_SIZES; k++) {
                put(out, cap, &len, " ");
                put(out, cap, &len, ccoip_algo_name(t->algo[c][w][k]));
            }
            put(out, cap, &len, "\n");
        }
    }
    if (out != NULL && cap > 0) out[len < cap ? len : cap - 1u] = '\0';
    return len;
}

static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\r';
}

/* Parses one "[kind ]world N: a b c ..." line into t. */
static bool parse_line(const char *s, size_t n, ccoip_algo_table *t)
{
    size_t i = 0;
    uint32_t kind = CCOIP_COLL_ALL_REDUCE;
    for (uint32_t c = 0; c < CCOIP_ALGO_KINDS; c++) {
        const size_t kl = strlen(g_kinds[c]);
        if (n > kl && memcmp(s, g_kinds[c], kl) == 0 && s[kl] == ' ') {
            kind = c;
            i = kl + 1u;
            break;
        }
    }
    if (n < i + 6u || memcmp(s + i, "world ", 6) != 0) return false;
    i += 6u;
    uint32_t world = 0;
    size_t digits = 0;
    for (; i < n && s[i] >= '0' && s[i] <= '9' && digits < 3; i++, digits++)
        world = world * 10u + (uint32_t)(s[i] - '0');
    if (digits == 0 || i >= n || s[i] != ':' || world < 2u || world > CCOIP_ALGO_WORLD_MAX)
        return false;
    i++;
    uint8_t row[CCOIP_ALGO_SIZES];
    uint32_t k = 0;
    for (;;) {
        while (i < n && is_space(s[i]))
            i++;
        if (i >= n) break;
        const size_t start = i;
        while (i < n && !is_space(s[i]))
            i++;
        ccoip_algo a;
        if (k >= CCOIP_ALGO_SIZES || !ccoip_algo_parse(s + start, i - start, &a)) return false;
        row[k++] = (uint8_t)a;
    }
    if (k != CCOIP_ALGO_SIZES) return false;
    memcpy(t->algo[kind][world - 2u], row, sizeof row);
    return true;
}

pcclResult_t ccoip_algo_table_parse(const char *text, size_t len, ccoip_algo_table *out)
{
    ccoip_algo_table t;
    ccoip_algo_table_clear(&t);
    size_t i = 0;
    while (i < len) {
        size_t e = i;
        while (e < len && text[e] != '\n')
            e++;
        size_t s = i;
        while (s < e && is_space(text[s]))
            s++;
        size_t end = e;
        while (end > s && is_space(text[end - 1u]))
            end--;
        if (end > s && text[s] != '#' && !parse_line(text + s, end - s, &t))
            return pcclInvalidArgument;
        i = e + 1u;
    }
    *out = t;
    return pcclSuccess;
}
