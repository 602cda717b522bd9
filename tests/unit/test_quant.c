/*
 * test_quant.c — MinMax and ZeroPointScale quantization (core/quant.c).
 *
 * The formulas of ccoip_quant.h are re-implemented here as a model (floor
 * based, the fp16/bf16 rounding decided by comparing neighbours) and every
 * code and every dequantized value is compared with it bit for bit; the
 * error bound is checked on top. The golden constants were computed by an
 * independent Python model of the same formulas (Python floats are binary64;
 * struct's 'e' and 'f' formats round correctly), so they pin the bytes on
 * every platform. Randomized tests log their seed.
 */
#include <float.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "ccoip_dtype.h"
#include "ccoip_quant.h"
#include "ccoip_reduce.h"
#include "ptest.h"

#define MAX_N 4096u

static const pcclDataType_t SRC_TYPES[4] = {pcclFloat16, pcclBFloat16, pcclFloat, pcclDouble};
static const pcclDataType_t CODE_TYPES[4] = {pcclUint8, pcclInt8, pcclUint16, pcclInt16};
static const pcclQuantizationAlgorithm_t ALGS[2] = {pcclQuantMinMax, pcclQuantZeroPointScale};

/* ------------------------------------------------------------------------ */
/* Helpers                                                                  */
/* ------------------------------------------------------------------------ */

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Uniform in [0, 1), 53 bits. */
static double rand_unit(uint64_t *s)
{
    return (double)(splitmix(s) >> 11) * 0x1p-53;
}

static const char *alg_name(pcclQuantizationAlgorithm_t a)
{
    return a == pcclQuantMinMax ? "minmax" : "zps";
}

static uint64_t f64_bits(double v)
{
    uint64_t b;
    memcpy(&b, &v, 8);
    return b;
}

static double src_max(pcclDataType_t t)
{
    switch (t) {
    case pcclFloat16:
        return 65504.0;
    case pcclBFloat16:
        return 0x1.fep127;
    case pcclFloat:
        return (double)FLT_MAX;
    default:
        return DBL_MAX;
    }
}

/* Raw bits of element i (up to 8 bytes, zero-extended). */
static uint64_t elem_bits(pcclDataType_t t, const unsigned char *buf, size_t i)
{
    uint64_t b = 0;
    const uint32_t sz = ccoip_dtype_size(t);
    memcpy(&b, buf + i * sz, sz); /* little-endian hosts only (x86-64, wasm32) */
    return b;
}

static double src_get(pcclDataType_t t, const unsigned char *buf, size_t i)
{
    const uint64_t b = elem_bits(t, buf, i);
    switch (t) {
    case pcclFloat16:
        return (double)ccoip_f16_to_f32((uint16_t)b);
    case pcclBFloat16:
        return (double)ccoip_bf16_to_f32((uint16_t)b);
    case pcclFloat: {
        float f;
        uint32_t b32 = (uint32_t)b;
        memcpy(&f, &b32, 4);
        return (double)f;
    }
    default: {
        double d;
        memcpy(&d, &b, 8);
        return d;
    }
    }
}

/* Stores v, rounded (through binary32 for the half types: for test data only). */
static void src_put(pcclDataType_t t, unsigned char *buf, size_t i, double v)
{
    switch (t) {
    case pcclFloat16: {
        uint16_t h = ccoip_f32_to_f16((float)v);
        memcpy(buf + 2 * i, &h, 2);
        break;
    }
    case pcclBFloat16: {
        uint16_t h = ccoip_f32_to_bf16((float)v);
        memcpy(buf + 2 * i, &h, 2);
        break;
    }
    case pcclFloat: {
        float f = (float)v;
        memcpy(buf + 4 * i, &f, 4);
        break;
    }
    default:
        memcpy(buf + 8 * i, &v, 8);
        break;
    }
}

/* Half an ulp of type t at |v| (the largest rounding error into t near v). */
static double src_half_ulp(pcclDataType_t t, double v)
{
    int p, emin;
    switch (t) {
    case pcclFloat16:
        p = 11;
        emin = -14;
        break;
    case pcclBFloat16:
        p = 8;
        emin = -126;
        break;
    case pcclFloat:
        p = 24;
        emin = -126;
        break;
    default:
        p = 53;
        emin = -1022;
        break;
    }
    int e = emin;
    if (v != 0.0) {
        (void)frexp(v, &e);
        e -= 1; /* |v| in [2^e, 2^(e+1)) */
        if (e < emin) e = emin;
    }
    return ldexp(1.0, e - p); /* ulp = 2^(e - p + 1) */
}

static int64_t code_low(pcclDataType_t q)
{
    return q == pcclInt8 ? -128 : q == pcclInt16 ? -32768 : 0;
}

static int64_t code_span(pcclDataType_t q)
{
    return (q == pcclUint8 || q == pcclInt8) ? 255 : 65535;
}

static int64_t code_get(pcclDataType_t q, const unsigned char *buf, size_t i)
{
    switch (q) {
    case pcclUint8:
        return buf[i];
    case pcclInt8: {
        int8_t v;
        memcpy(&v, buf + i, 1);
        return v;
    }
    case pcclUint16: {
        uint16_t v;
        memcpy(&v, buf + 2 * i, 2);
        return v;
    }
    default: {
        int16_t v;
        memcpy(&v, buf + 2 * i, 2);
        return v;
    }
    }
}

static void code_put(pcclDataType_t q, unsigned char *buf, size_t i, int64_t c)
{
    if (q == pcclUint8 || q == pcclInt8) {
        buf[i] = (unsigned char)(c & 0xff);
    } else {
        uint16_t v = (uint16_t)(c & 0xffff);
        memcpy(buf + 2 * i, &v, 2);
    }
}

/* ------------------------------------------------------------------------ */
/* The model: the header's formulas, written independently                  */
/* ------------------------------------------------------------------------ */

/* rnd(u) = floor(clamp(u, 0, Q) + 0.5), NaN → 0. */
static int64_t model_rnd(double u, double q)
{
    if (!(u > 0.0)) u = 0.0;
    if (u > q) u = q;
    return (int64_t)floor(u + 0.5);
}

/* MinMax on pcclDouble: the power-of-two prescale for extreme ranges. */
static double model_mm_prescale(const ccoip_quant_meta *m)
{
    const double r = m->max_value - m->min_value;
    if (isinf(r)) return 0.5;
    if (r > 0.0 && r < 0x1p-968) return 0x1p968;
    return 1.0;
}

static int64_t model_code(const ccoip_quant_meta *m, double x)
{
    const double q = (double)code_span(m->quant_type);
    const int64_t low = code_low(m->quant_type);
    double u;
    if (m->algorithm == pcclQuantMinMax) {
        const double sh = model_mm_prescale(m);
        const double rs = m->max_value * sh - m->min_value * sh;
        const double inv = rs > 0.0 ? q / rs : 0.0;
        u = (x * sh - m->min_value * sh) * inv;
    } else {
        u = x * (1.0 / m->scale) + (double)(m->zero_point - low);
    }
    return low + model_rnd(u, q);
}

static double model_value(const ccoip_quant_meta *m, int64_t code)
{
    const int64_t q = code_span(m->quant_type);
    const int64_t low = code_low(m->quant_type);
    const int64_t k = code - low;
    if (m->algorithm == pcclQuantMinMax) {
        if (k == 0) return m->min_value;
        if (k == q) return m->max_value;
        const double sh = model_mm_prescale(m);
        const double lo = m->min_value * sh;
        const double step = (m->max_value * sh - lo) / (double)q;
        return (lo + (double)k * step) / sh;
    }
    const double f = src_max(m->src_type);
    double v = (double)(k + low - m->zero_point) * m->scale;
    if (v < -f) v = -f;
    if (v > f) v = f;
    return v;
}

/* Bits of v rounded to nearest even in type t, decided by comparing the
 * neighbours of a first guess: an independent check of quant.c's rounding. */
static uint64_t model_round_bits(pcclDataType_t t, double v)
{
    if (t == pcclDouble) return f64_bits(v);
    if (t == pcclFloat) {
        float f = (float)v;
        uint32_t b;
        memcpy(&b, &f, 4);
        return b;
    }
    const uint16_t sign = v < 0.0 || (v == 0.0 && signbit(v)) ? 0x8000u : 0u;
    const double a = fabs(v);
    const uint16_t guess =
        (uint16_t)((t == pcclFloat16 ? ccoip_f32_to_f16((float)a) : ccoip_f32_to_bf16((float)a)) &
                   0x7fffu);
    uint16_t best = guess;
    double best_err = -1.0;
    for (int d = -1; d <= 1; d++) {
        const int cand_i = (int)guess + d;
        if (cand_i < 0 || cand_i > 0x7fff) continue;
        const uint16_t cand = (uint16_t)cand_i;
        const double cv =
            t == pcclFloat16 ? (double)ccoip_f16_to_f32(cand) : (double)ccoip_bf16_to_f32(cand);
        if (isnan(cv)) continue;
        const double err = fabs(cv - a); /* exact: cv and a are close */
        if (best_err < 0.0 || err < best_err ||
            (err == best_err && (cand & 1u) == 0 && (best & 1u) != 0)) {
            best = cand;
            best_err = err;
        }
    }
    return (uint64_t)(sign | best);
}

/* ------------------------------------------------------------------------ */
/* Round trip                                                               */
/* ------------------------------------------------------------------------ */

/* Generates a data set of kind `kind` for source type t into buf; returns n. */
enum {
    DS_MIXED,
    DS_NEGATIVE,
    DS_POSITIVE,
    DS_CONSTANT,
    DS_CONSTANT_NEG,
    DS_ZERO,
    DS_ONE,
    DS_EMPTY,
    DS_WIDE,
    DS_NARROW,
    DS_TINY,
    DS_COUNT
};

static const char *const DS_NAMES[DS_COUNT] = {"mixed",        "negative", "positive", "constant",
                                               "constant-neg", "zero",     "one",      "empty",
                                               "wide",         "narrow",   "tiny"};

static size_t make_data(int kind, pcclDataType_t t, unsigned char *buf, uint64_t *seed)
{
    const size_t n = 1000;
    const double f = src_max(t);
    switch (kind) {
    case DS_MIXED:
        for (size_t i = 0; i < n; i++)
            src_put(t, buf, i, rand_unit(seed) * 8.0 - 3.0);
        src_put(t, buf, 17, 0.0); /* 0 lies inside the range */
        return n;
    case DS_NEGATIVE: /* all negative: PCCL's initial max of FLT_MIN got these wrong */
        for (size_t i = 0; i < n; i++)
            src_put(t, buf, i, -0.01 - rand_unit(seed) * 5.0);
        return n;
    case DS_POSITIVE:
        for (size_t i = 0; i < n; i++)
            src_put(t, buf, i, 0.5 + rand_unit(seed) * 99.5);
        return n;
    case DS_CONSTANT:
        for (size_t i = 0; i < n; i++)
            src_put(t, buf, i, 0.1);
        return n;
    case DS_CONSTANT_NEG:
        for (size_t i = 0; i < n; i++)
            src_put(t, buf, i, -1234.5);
        return n;
    case DS_ZERO:
        for (size_t i = 0; i < n; i++)
            src_put(t, buf, i, 0.0);
        return n;
    case DS_ONE:
        src_put(t, buf, 0, -7.75);
        return 1;
    case DS_EMPTY:
        return 0;
    case DS_WIDE: /* the whole finite range of the type */
        for (size_t i = 0; i < n; i++)
            src_put(t, buf, i, (rand_unit(seed) * 2.0 - 1.0) * f);
        src_put(t, buf, 3, -f);
        src_put(t, buf, 500, f);
        src_put(t, buf, 7, 0.0);
        return n;
    case DS_NARROW: { /* a few ulps around 1000: range tiny against magnitude */
        const double ulp = 2.0 * src_half_ulp(t, 1000.0);
        for (size_t i = 0; i < n; i++) {
            src_put(t, buf, i, 1000.0 + ulp * (double)(splitmix(seed) % 5u));
        }
        return n;
    }
    default: { /* DS_TINY: subnormals of the type and their neighbours */
        const double unit = t == pcclFloat16    ? 0x1p-24
                            : t == pcclBFloat16 ? 0x1p-133
                            : t == pcclFloat    ? 0x1p-149
                                                : 0x1p-1074;
        for (size_t i = 0; i < n; i++) {
            src_put(t, buf, i, unit * (double)((int)(splitmix(seed) % 41u) - 20));
        }
        return n;
    }
    }
}

/* Quantizes and dequantizes src[0..n) and checks everything checkable. */
static void check_round_trip(pcclQuantizationAlgorithm_t alg, pcclDataType_t st, pcclDataType_t qt,
                             const unsigned char *src, size_t n, const char *label)
{
    static unsigned char codes[MAX_N * 2], out[MAX_N * 8];
    const double q = (double)code_span(qt);
    const int64_t low = code_low(qt), high = low + code_span(qt);
    ccoip_quant_meta m;
    const pcclResult_t rc = ccoip_quant_compute_meta(alg, st, qt, n ? src : NULL, n, &m);
    PT_ASSERT(rc == pcclSuccess, "%s: compute_meta -> %d", label, (int)rc);
    PT_ASSERT(m.algorithm == alg && m.src_type == st && m.quant_type == qt, "%s: meta ids", label);
    PT_ASSERT(ccoip_quant_meta_check(&m) == pcclSuccess, "%s: own meta is valid", label);

    double mn = 0.0, mx = 0.0;
    for (size_t i = 0; i < n; i++) {
        const double x = src_get(st, src, i);
        if (i == 0 || x < mn) mn = x;
        if (i == 0 || x > mx) mx = x;
    }
    if (alg == pcclQuantMinMax) {
        PT_ASSERT(m.min_value == mn && m.max_value == mx, "%s: min %a max %a, want %a %a", label,
                  m.min_value, m.max_value, mn, mx);
        PT_ASSERT(m.scale == 0.0 && m.zero_point == 0, "%s: unused fields are 0", label);
    } else {
        PT_ASSERT(m.min_value == 0.0 && m.max_value == 0.0, "%s: unused fields are 0", label);
        PT_ASSERT(m.scale >= DBL_MIN && m.scale <= DBL_MAX, "%s: scale %a", label, m.scale);
    }

    memset(codes, 0xA5, sizeof codes);
    memset(out, 0xA5, sizeof out);
    PT_ASSERT(ccoip_quantize(&m, codes, src, n) == pcclSuccess, "%s: quantize", label);
    PT_ASSERT(ccoip_dequantize(&m, out, codes, n) == pcclSuccess, "%s: dequantize", label);
    const uint32_t csz = ccoip_dtype_size(qt), ssz = ccoip_dtype_size(st);
    PT_ASSERT(codes[n * csz] == 0xA5 && out[n * ssz] == 0xA5, "%s: no write past the end", label);

    /* MinMax error bound E = (max - min) / 2Q, computed without overflow. */
    const double half_range = mx * 0.5 - mn * 0.5;
    const double e_bound = alg == pcclQuantMinMax ? half_range / q : m.scale * 0.5;
    const double fp_scale = alg == pcclQuantMinMax ? 2.0 * half_range : q * m.scale;
    for (size_t i = 0; i < n; i++) {
        const double x = src_get(st, src, i);
        const int64_t c = code_get(qt, codes, i);
        const int64_t want_c = model_code(&m, x);
        PT_ASSERT(c >= low && c <= high, "%s: code %lld out of range", label, (long long)c);
        PT_ASSERT(c == want_c, "%s[%zu]: x=%a code %lld, model %lld", label, i, x, (long long)c,
                  (long long)want_c);
        const uint64_t got_bits = elem_bits(st, out, i);
        const uint64_t want_bits = model_round_bits(st, model_value(&m, c));
        PT_ASSERT(got_bits == want_bits, "%s[%zu]: code %lld dequantizes to %llx, model %llx",
                  label, i, (long long)c, (unsigned long long)got_bits,
                  (unsigned long long)want_bits);
        const double v = src_get(st, out, i);
        PT_ASSERT(isfinite(v), "%s[%zu]: finite value", label, i);
        const double err = fabs(x - v);
        const double tol =
            e_bound + 0x1p-50 * (fabs(x) + fp_scale) + src_half_ulp(st, v) + 0x1p-1074;
        PT_ASSERT(err <= tol, "%s[%zu]: |%a - %a| = %a > %a", label, i, x, v, err, tol);
        if (alg == pcclQuantMinMax) {
            /* min and max round-trip exactly and take the extreme codes. */
            if (x == mn) PT_ASSERT(c == low && v == x, "%s[%zu]: min -> L, exact", label, i);
            if (x == mx && mx != mn) {
                PT_ASSERT(c == high && v == x, "%s[%zu]: max -> H, exact", label, i);
            }
        } else if (x == mn) {
            PT_ASSERT(c == low, "%s[%zu]: min -> L", label, i);
        }
        if (mn == mx && (alg == pcclQuantMinMax || fabs(mn) >= DBL_MIN)) {
            PT_ASSERT(v == x, "%s[%zu]: constant chunk round-trips (%a -> %a)", label, i, x, v);
        }
    }
    if (alg == pcclQuantZeroPointScale && n > 0 && mn <= 0.0 && mx >= 0.0) {
        /* 0 is a code, and it round-trips exactly. */
        PT_ASSERT(m.zero_point >= low && m.zero_point <= high, "%s: zero point %lld", label,
                  (long long)m.zero_point);
        unsigned char zero_src[8], zero_code[2], zero_out[8];
        src_put(st, zero_src, 0, 0.0);
        PT_ASSERT(ccoip_quantize(&m, zero_code, zero_src, 1) == pcclSuccess, "%s", label);
        PT_ASSERT(code_get(qt, zero_code, 0) == m.zero_point, "%s: 0 -> zero point", label);
        PT_ASSERT(ccoip_dequantize(&m, zero_out, zero_code, 1) == pcclSuccess, "%s", label);
        PT_ASSERT(src_get(st, zero_out, 0) == 0.0, "%s: zero point -> 0", label);
    }
}

PTEST(quant, supported_matrix)
{
    for (int a = -1; a <= 3; a++) {
        for (int s = -1; s <= PCCL_DATA_TYPE_COUNT; s++) {
            for (int c = -1; c <= PCCL_DATA_TYPE_COUNT; c++) {
                const bool src_ok =
                    s == pcclFloat16 || s == pcclBFloat16 || s == pcclFloat || s == pcclDouble;
                const bool code_ok =
                    c == pcclUint8 || c == pcclInt8 || c == pcclUint16 || c == pcclInt16;
                const bool want =
                    (a == pcclQuantMinMax || a == pcclQuantZeroPointScale) && src_ok && code_ok;
                const bool got = ccoip_quant_supported((pcclQuantizationAlgorithm_t)a,
                                                       (pcclDataType_t)s, (pcclDataType_t)c);
                PT_ASSERT(got == want, "supported(%d, %d, %d) = %d", a, s, c, (int)got);
            }
        }
    }
}

PTEST(quant, round_trip_all_combinations)
{
    static unsigned char src[MAX_N * 8];
    const uint64_t seed0 = 0x9A5E0001ull;
    PT_LOG("seed %llx", (unsigned long long)seed0);
    uint64_t seed = seed0;
    char label[96];
    for (int a = 0; a < 2; a++) {
        for (int s = 0; s < 4; s++) {
            for (int c = 0; c < 4; c++) {
                for (int kind = 0; kind < DS_COUNT; kind++) {
                    const size_t n = make_data(kind, SRC_TYPES[s], src, &seed);
                    (void)snprintf(label, sizeof label, "%s %s->%s %s", alg_name(ALGS[a]),
                                   ccoip_dtype_name(SRC_TYPES[s]), ccoip_dtype_name(CODE_TYPES[c]),
                                   DS_NAMES[kind]);
                    check_round_trip(ALGS[a], SRC_TYPES[s], CODE_TYPES[c], src, n, label);
                }
            }
        }
    }
}

/* pcclDouble chunks at the edges of binary64: ranges that overflow, ranges
 * below 2^-968, ranges tiny against the magnitude (ZeroPointScale widens
 * its scale there), subnormal constants. */
PTEST(quant, f64_extremes)
{
    static unsigned char src[MAX_N * 8];
    const uint64_t seed0 = 0x9A5E0002ull;
    PT_LOG("seed %llx", (unsigned long long)seed0);
    uint64_t seed = seed0;
    char label[96];
    for (int variant = 0; variant < 6; variant++) {
        const size_t n = 600;
        for (size_t i = 0; i < n; i++) {
            const double u = rand_unit(&seed);
            double x;
            switch (variant) {
            case 0: /* ±DBL_MAX */
                x = (u * 2.0 - 1.0) * DBL_MAX;
                break;
            case 1: /* 0 .. DBL_MAX: the range itself is finite */
                x = u * DBL_MAX;
                break;
            case 2: /* subnormals: range below 2^-968 */
                x = (double)(splitmix(&seed) % 1000u) * 0x1p-1074;
                break;
            case 3: /* 2^-1000 scale */
                x = (1.0 + u) * 0x1p-1000;
                break;
            case 4: /* 1 + a few ulps: |x| / range ~ 2^50 */
                x = 1.0 + (double)(splitmix(&seed) % 64u) * 0x1p-52;
                break;
            default: /* -1e300 + a few ulps */
                x = -1e300 + (double)(splitmix(&seed) % 64u) * 0x1p945;
                break;
            }
            src_put(pcclDouble, src, i, x);
        }
        if (variant == 0) {
            src_put(pcclDouble, src, 1, -DBL_MAX);
            src_put(pcclDouble, src, 2, DBL_MAX);
        }
        for (int a = 0; a < 2; a++) {
            for (int c = 0; c < 4; c++) {
                (void)snprintf(label, sizeof label, "%s f64->%s extreme %d", alg_name(ALGS[a]),
                               ccoip_dtype_name(CODE_TYPES[c]), variant);
                check_round_trip(ALGS[a], pcclDouble, CODE_TYPES[c], src, n, label);
            }
        }
    }
    /* A subnormal f64 constant chunk under ZeroPointScale: scale 1, value 0,
     * error below 2^-1022 (documented). */
    const double sub = 0x1p-1070;
    ccoip_quant_meta m;
    PT_ASSERT(ccoip_quant_compute_meta(pcclQuantZeroPointScale, pcclDouble, pcclUint8, &sub, 1,
                                       &m) == pcclSuccess,
              "subnormal constant");
    PT_ASSERT(m.scale == 1.0 && m.zero_point == 0, "scale %a zp %lld", m.scale,
              (long long)m.zero_point);
}

/* ------------------------------------------------------------------------ */
/* Golden bytes                                                             */
/* ------------------------------------------------------------------------ */

typedef struct golden_case {
    pcclQuantizationAlgorithm_t alg;
    pcclDataType_t src_type, quant_type;
    size_t n;
    double x[8];      /* exactly representable in src_type */
    double meta_a;    /* MinMax: min; ZeroPointScale: scale */
    double meta_b;    /* MinMax: max */
    int64_t zp;       /* ZeroPointScale: zero point */
    int64_t codes[8]; /* as signed/unsigned integers */
    uint64_t deq[8];  /* bits of the dequantized elements */
} golden_case;

static const golden_case GOLDEN[] = {
    /* Hand-checkable: min -1, max 1, inv = 127.5; 0 → 127.5 → 128,
     * 0.1f → 140.25 → 140, -0.3f → 89.25 → 89. */
    {pcclQuantMinMax,
     pcclFloat,
     pcclUint8,
     8,
     {-1.0, 0.0, 0.5, 1.0, 0.25, -0.75, 0x1.99999ap-4, -0x1.333334p-2},
     -1.0,
     1.0,
     0,
     {0, 128, 191, 255, 159, 32, 140, 89},
     {0xbf800000, 0x3b808081, 0x3efefeff, 0x3f800000, 0x3e7cfcfd, 0xbf3fbfc0, 0x3dc8c8c9,
      0xbe9a9a9b}},
    {pcclQuantMinMax,
     pcclFloat,
     pcclInt8,
     8,
     {-1.0, 0.0, 0.5, 1.0, 0.25, -0.75, 0x1.99999ap-4, -0x1.333334p-2},
     -1.0,
     1.0,
     0,
     {-128, 0, 63, 127, 31, -96, 12, -39},
     {0xbf800000, 0x3b808081, 0x3efefeff, 0x3f800000, 0x3e7cfcfd, 0xbf3fbfc0, 0x3dc8c8c9,
      0xbe9a9a9b}},
    /* scale = 2/255, zero point 127: 0 is code 127 and comes back as 0. */
    {pcclQuantZeroPointScale,
     pcclFloat,
     pcclUint8,
     8,
     {-1.0, 0.0, 0.5, 1.0, 0.25, -0.75, 0x1.99999ap-4, -0x1.333334p-2},
     0x1.0101010101010p-7,
     0.0,
     127,
     {0, 127, 191, 255, 159, 31, 140, 89},
     {0xbf7efeff, 0x0, 0x3f008081, 0x3f808081, 0x3e808081, 0xbf40c0c1, 0x3dd0d0d1, 0xbe989899}},
    {pcclQuantZeroPointScale,
     pcclFloat,
     pcclInt8,
     8,
     {-1.0, 0.0, 0.5, 1.0, 0.25, -0.75, 0x1.99999ap-4, -0x1.333334p-2},
     0x1.0101010101010p-7,
     0.0,
     -1,
     {-128, -1, 63, 127, 31, -97, 12, -39},
     {0xbf7efeff, 0x0, 0x3f008081, 0x3f808081, 0x3e808081, 0xbf40c0c1, 0x3dd0d0d1, 0xbe989899}},
    {pcclQuantMinMax,
     pcclFloat16,
     pcclUint16,
     5,
     {-2.5, 3.0, 0x1.998p-4, 1000.0, -0x1.064p-10},
     -2.5,
     1000.0,
     0,
     {0, 360, 170, 65535, 163},
     {0xc100, 0x4204, 0x2e6f, 0x63d0, 0x9eb8}},
    {pcclQuantZeroPointScale,
     pcclBFloat16,
     pcclInt16,
     5,
     {-2.5, 3.0, 0x1.9ap-4, 1000.0, -0x1.06p-10},
     0x1.f541f541f541fp-7,
     0.0,
     -32605,
     {-32768, -32409, -32598, 32767, -32605},
     {0xc020, 0x4040, 0x3ddb, 0x447a, 0x0}},
    {pcclQuantMinMax,
     pcclDouble,
     pcclInt16,
     4,
     {0x1.0624dd2f1a9fcp-10, 0x1.4p+1, -0x1.dp+2, 0x1.921f9f01b866ep+1},
     -0x1.dp+2,
     0x1.921f9f01b866ep+1,
     0,
     {12961, 28721, -32768, 32767},
     {0x3f51114a2a707000, 0x40040011d2029550, 0xc01d000000000000, 0x400921f9f01b866e}},
    {pcclQuantZeroPointScale,
     pcclDouble,
     pcclUint8,
     4,
     {0x1.0624dd2f1a9fcp-10, 0x1.4p+1, -0x1.dp+2, 0x1.921f9f01b866ep+1},
     0x1.4dd5bd7dec05cp-5,
     0.0,
     178,
     {178, 239, 0, 255},
     {0x0, 0x4003e2fb89c04f58, 0xc01d03d3b831c380, 0x40091a527fb7ff6f}},
};

PTEST(quant, golden_small)
{
    for (size_t g = 0; g < sizeof GOLDEN / sizeof GOLDEN[0]; g++) {
        const golden_case *gc = &GOLDEN[g];
        unsigned char src[64], codes[16], out[64];
        for (size_t i = 0; i < gc->n; i++) {
            src_put(gc->src_type, src, i, gc->x[i]);
            PT_ASSERT(src_get(gc->src_type, src, i) == gc->x[i], "golden %zu: x[%zu] exact", g, i);
        }
        ccoip_quant_meta m;
        PT_ASSERT(ccoip_quant_compute_meta(gc->alg, gc->src_type, gc->quant_type, src, gc->n, &m) ==
                      pcclSuccess,
                  "golden %zu: meta", g);
        if (gc->alg == pcclQuantMinMax) {
            PT_ASSERT(m.min_value == gc->meta_a && m.max_value == gc->meta_b,
                      "golden %zu: min %a max %a", g, m.min_value, m.max_value);
        } else {
            PT_ASSERT(m.scale == gc->meta_a && m.zero_point == gc->zp,
                      "golden %zu: scale %a zero point %lld", g, m.scale, (long long)m.zero_point);
        }
        PT_ASSERT(ccoip_quantize(&m, codes, src, gc->n) == pcclSuccess, "golden %zu", g);
        PT_ASSERT(ccoip_dequantize(&m, out, codes, gc->n) == pcclSuccess, "golden %zu", g);
        for (size_t i = 0; i < gc->n; i++) {
            const int64_t c = code_get(gc->quant_type, codes, i);
            PT_ASSERT(c == gc->codes[i], "golden %zu[%zu]: code %lld, want %lld", g, i,
                      (long long)c, (long long)gc->codes[i]);
            const uint64_t b = elem_bits(gc->src_type, out, i);
            PT_ASSERT(b == gc->deq[i], "golden %zu[%zu]: value bits %llx, want %llx", g, i,
                      (unsigned long long)b, (unsigned long long)gc->deq[i]);
        }
    }
}

static uint64_t fnv1a(uint64_t h, const void *data, size_t len)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

/* 4096 pseudo-random elements per source type, both algorithms, all four
 * code types: a hash of the metadata (little-endian doubles / int64), the
 * codes and the dequantized bytes, equal to the Python model's. */
PTEST(quant, golden_hash)
{
    static const uint64_t want[4] = {0xdf0a9ff86b12907cull, 0x808c4d517f2620a4ull,
                                     0x23d222564570d1ecull, 0x426f07ffdb45c248ull};
    static unsigned char src[MAX_N * 8], codes[MAX_N * 2], out[MAX_N * 8];
    for (int s = 0; s < 4; s++) {
        const pcclDataType_t st = SRC_TYPES[s];
        uint64_t seed = 0x5EED0F0A11CE5EEDull;
        PT_LOG("%s: seed %llx", ccoip_dtype_name(st), (unsigned long long)seed);
        for (size_t i = 0; i < MAX_N; i++) {
            const double d = rand_unit(&seed) * 8.0 - 3.0;
            /* Through binary32 first, as the model does, for all but f64. */
            src_put(st, src, i, st == pcclDouble ? d : (double)(float)d);
        }
        uint64_t h = 0xcbf29ce484222325ull;
        for (int a = 0; a < 2; a++) {
            for (int c = 0; c < 4; c++) {
                ccoip_quant_meta m;
                PT_ASSERT(ccoip_quant_compute_meta(ALGS[a], st, CODE_TYPES[c], src, MAX_N, &m) ==
                              pcclSuccess,
                          "meta");
                double f[2] = {m.min_value, m.max_value};
                if (ALGS[a] == pcclQuantZeroPointScale) {
                    f[0] = m.scale;
                    memcpy(&f[1], &m.zero_point, 8);
                }
                h = fnv1a(h, f, 16);
                PT_ASSERT(ccoip_quantize(&m, codes, src, MAX_N) == pcclSuccess, "quantize");
                PT_ASSERT(ccoip_dequantize(&m, out, codes, MAX_N) == pcclSuccess, "dequantize");
                h = fnv1a(h, codes, MAX_N * ccoip_dtype_size(CODE_TYPES[c]));
                h = fnv1a(h, out, MAX_N * ccoip_dtype_size(st));
            }
        }
        PT_ASSERT(h == want[s], "%s: hash %llx, want %llx", ccoip_dtype_name(st),
                  (unsigned long long)h, (unsigned long long)want[s]);
    }
}

/* Dequantizing into fp16/bf16 rounds binary64 to nearest even directly:
 * grids of exact ties (subnormal, normal, near the largest finite value)
 * checked against the neighbour-comparing model. */
PTEST(quant, half_rounding_ties)
{
    static unsigned char codes[65536 * 2], out[65536 * 2];
    for (uint32_t k = 0; k < 65536u; k++)
        code_put(pcclUint16, codes, k, (int64_t)k);
    const struct {
        pcclDataType_t t;
        double scale;
        int64_t zp;
    } grids[] = {
        {pcclFloat16, 0x1p-25, 0},       /* half the smallest subnormal step */
        {pcclFloat16, 0x1p-25, 32768},   /* the same, negative and positive */
        {pcclFloat16, 0x1.8p-26, 0},     /* quarter steps */
        {pcclFloat16, 0x1p-13, 0},       /* ties in the normal range */
        {pcclFloat16, 1.0, -65000},      /* up to the clamp at 65504 */
        {pcclFloat16, 0x1p-4, -1048000}, /* 65500 .. 69595.9: ties near overflow */
        {pcclBFloat16, 0x1p-134, 0},     /* bf16 subnormal ties */
        {pcclBFloat16, 0x1p-9, -30000},  /* bf16 normal ties */
        {pcclBFloat16, 0x1p112, -65280}, /* near the largest bf16 */
        {pcclBFloat16, 0x1.5555555555555p-3, 32768},
        /* Ties in [1, 2) moved by 2^-30 relative: below binary32 precision,
         * so rounding through binary32 would see exact ties (double
         * rounding) and go wrong for half of them. */
        {pcclFloat16, 0x1.00000004p-11, -2048},
        {pcclFloat16, 0x1.fffffff8p-12, -2048},
        {pcclBFloat16, 0x1.00000004p-8, -256},
        {pcclBFloat16, 0x1.fffffff8p-9, -256},
    };
    for (size_t g = 0; g < sizeof grids / sizeof grids[0]; g++) {
        ccoip_quant_meta m;
        memset(&m, 0, sizeof m);
        m.algorithm = pcclQuantZeroPointScale;
        m.src_type = grids[g].t;
        m.quant_type = pcclUint16;
        m.scale = grids[g].scale;
        m.zero_point = grids[g].zp;
        PT_ASSERT(ccoip_dequantize(&m, out, codes, 65536) == pcclSuccess, "grid %zu", g);
        for (uint32_t k = 0; k < 65536u; k++) {
            const uint64_t got = elem_bits(grids[g].t, out, k);
            const uint64_t want = model_round_bits(grids[g].t, model_value(&m, (int64_t)k));
            PT_ASSERT(got == want, "grid %zu code %u: %llx, want %llx", g, k,
                      (unsigned long long)got, (unsigned long long)want);
        }
    }
}

/* Exact ties go up (floor(u + 0.5)) for both algorithms, for negative x
 * too; a MinMax chunk whose minimum is -0 gives -0 back. Hand-computed. */
PTEST(quant, ties_and_negative_zero)
{
    /* MinMax, min 0, max 255: inv = 1, u = x. */
    const float mm_x[6] = {0.5f, 1.5f, 2.5f, 253.5f, 254.5f, 0.49999997f};
    const int64_t mm_u8[6] = {1, 2, 3, 254, 255, 0};
    ccoip_quant_meta m;
    memset(&m, 0, sizeof m);
    m.algorithm = pcclQuantMinMax;
    m.src_type = pcclFloat;
    m.quant_type = pcclUint8;
    m.min_value = 0.0;
    m.max_value = 255.0;
    unsigned char codes[16];
    PT_ASSERT(ccoip_quantize(&m, codes, mm_x, 6) == pcclSuccess, "quantize");
    for (size_t i = 0; i < 6; i++) {
        PT_ASSERT(code_get(pcclUint8, codes, i) == mm_u8[i], "minmax u8 %a -> %lld, want %lld",
                  (double)mm_x[i], (long long)code_get(pcclUint8, codes, i), (long long)mm_u8[i]);
    }
    m.quant_type = pcclInt8;
    PT_ASSERT(ccoip_quantize(&m, codes, mm_x, 6) == pcclSuccess, "quantize");
    for (size_t i = 0; i < 6; i++) {
        PT_ASSERT(code_get(pcclInt8, codes, i) == mm_u8[i] - 128, "minmax i8 %a -> %lld",
                  (double)mm_x[i], (long long)code_get(pcclInt8, codes, i));
    }
    /* ZeroPointScale, scale 0.5, zero point 3 (u8) / -125 (i8): u = 2x + 3. */
    const double zps_x[6] = {0.25, -0.25, -0.75, -1.25, 0.75, -1.5};
    const int64_t zps_u8[6] = {4, 3, 2, 1, 5, 0};
    memset(&m, 0, sizeof m);
    m.algorithm = pcclQuantZeroPointScale;
    m.src_type = pcclDouble;
    m.quant_type = pcclUint8;
    m.scale = 0.5;
    m.zero_point = 3;
    PT_ASSERT(ccoip_quantize(&m, codes, zps_x, 6) == pcclSuccess, "quantize");
    for (size_t i = 0; i < 6; i++) {
        PT_ASSERT(code_get(pcclUint8, codes, i) == zps_u8[i], "zps u8 %a -> %lld, want %lld",
                  zps_x[i], (long long)code_get(pcclUint8, codes, i), (long long)zps_u8[i]);
    }
    m.quant_type = pcclInt16;
    m.zero_point = 3 - 32768;
    PT_ASSERT(ccoip_quantize(&m, codes, zps_x, 6) == pcclSuccess, "quantize");
    for (size_t i = 0; i < 6; i++) {
        PT_ASSERT(code_get(pcclInt16, codes, i) == zps_u8[i] - 32768, "zps i16 %a -> %lld",
                  zps_x[i], (long long)code_get(pcclInt16, codes, i));
    }
    /* Just below a tie stays below (no bias in u): u = x with scale 1. */
    const double below[3] = {0.5 - 0x1p-31, 7.5 - 0x1p-40, -0.5 + 0x1p-31};
    m.quant_type = pcclUint8;
    m.scale = 1.0;
    m.zero_point = 1;
    PT_ASSERT(ccoip_quantize(&m, codes, below, 3) == pcclSuccess, "quantize");
    PT_ASSERT(codes[0] == 1 && codes[1] == 8 && codes[2] == 1, "below ties: %d %d %d", codes[0],
              codes[1], codes[2]);
    /* -0 as the minimum: code L, and the value is -0 (bits), in every type. */
    for (int s = 0; s < 4; s++) {
        const pcclDataType_t st = SRC_TYPES[s];
        unsigned char src[3 * 8], out[3 * 8];
        src_put(st, src, 0, -0.0);
        src_put(st, src, 1, 1.0);
        src_put(st, src, 2, 0.5);
        PT_ASSERT(ccoip_quant_compute_meta(pcclQuantMinMax, st, pcclUint16, src, 3, &m) ==
                      pcclSuccess,
                  "meta");
        PT_ASSERT(m.min_value == 0.0 && signbit(m.min_value), "%s: min is -0",
                  ccoip_dtype_name(st));
        PT_ASSERT(ccoip_quantize(&m, codes, src, 3) == pcclSuccess, "quantize");
        PT_ASSERT(ccoip_dequantize(&m, out, codes, 3) == pcclSuccess, "dequantize");
        PT_ASSERT(code_get(pcclUint16, codes, 0) == 0, "-0 -> L");
        PT_ASSERT(elem_bits(st, out, 0) == elem_bits(st, src, 0), "%s: -0 comes back as -0",
                  ccoip_dtype_name(st));
    }
}

/* ------------------------------------------------------------------------ */
/* Reduction                                                                */
/* ------------------------------------------------------------------------ */

/* acc = sum over N contributions of dequantize(quantize(x_k)), through
 * ccoip_dequantize_reduce: bit-identical to dequantize + ccoip_reduce_inplace,
 * and within N error bounds (+ the source type's rounding) of the exact sum. */
PTEST(quant, reduce_sum_of_contributions)
{
    enum { N_ELEMS = 700 };
    static unsigned char x[16][N_ELEMS * 8], codes[N_ELEMS * 2], acc[N_ELEMS * 8], ref[N_ELEMS * 8],
        tmp[N_ELEMS * 8];
    static double exact[N_ELEMS], bound[N_ELEMS];
    const uint64_t seed0 = 0x9A5E0003ull;
    PT_LOG("seed %llx", (unsigned long long)seed0);
    uint64_t seed = seed0;
    for (int a = 0; a < 2; a++) {
        for (int s = 0; s < 4; s++) {
            for (int c = 0; c < 4; c++) {
                const pcclDataType_t st = SRC_TYPES[s], qt = CODE_TYPES[c];
                const double q = (double)code_span(qt);
                for (uint32_t nk = 2; nk <= 16; nk += (nk < 4 ? 1u : 3u)) {
                    memset(acc, 0, sizeof acc); /* +0 in every float type */
                    memset(ref, 0, sizeof ref);
                    for (size_t i = 0; i < N_ELEMS; i++)
                        exact[i] = bound[i] = 0.0;
                    double mag = 0.0; /* bound on every partial sum */
                    for (uint32_t k = 0; k < nk; k++) {
                        const double lo = -4.0 + 3.0 * rand_unit(&seed);
                        const double width = k == 3 ? 0.0 : 6.0 * rand_unit(&seed);
                        for (size_t i = 0; i < N_ELEMS; i++) {
                            src_put(st, x[k], i, lo + width * rand_unit(&seed));
                        }
                        ccoip_quant_meta m;
                        PT_ASSERT(ccoip_quant_compute_meta(ALGS[a], st, qt, x[k], N_ELEMS, &m) ==
                                      pcclSuccess,
                                  "meta");
                        PT_ASSERT(ccoip_quantize(&m, codes, x[k], N_ELEMS) == pcclSuccess, "q");
                        PT_ASSERT(ccoip_dequantize_reduce(&m, pcclSum, acc, codes, N_ELEMS) ==
                                      pcclSuccess,
                                  "dequantize_reduce");
                        PT_ASSERT(ccoip_dequantize(&m, tmp, codes, N_ELEMS) == pcclSuccess, "dq");
                        PT_ASSERT(ccoip_reduce_inplace(pcclSum, st, ref, tmp, N_ELEMS) ==
                                      pcclSuccess,
                                  "reduce");
                        double mn = 0.0, mx = 0.0;
                        for (size_t i = 0; i < N_ELEMS; i++) {
                            const double xi = src_get(st, x[k], i);
                            if (i == 0 || xi < mn) mn = xi;
                            if (i == 0 || xi > mx) mx = xi;
                        }
                        const double e =
                            ALGS[a] == pcclQuantMinMax ? (mx - mn) / (2.0 * q) : m.scale / 2.0;
                        mag += fabs(mn) > fabs(mx) ? fabs(mn) : fabs(mx);
                        for (size_t i = 0; i < N_ELEMS; i++) {
                            const double xi = src_get(st, x[k], i);
                            exact[i] += xi; /* error far below the bound */
                            /* quantization + rounding of the value + of the sum */
                            bound[i] += e * (1.0 + 0x1p-30) + 0x1p-45 * mag +
                                        2.0 * src_half_ulp(st, mag + 1.0);
                        }
                    }
                    PT_ASSERT(memcmp(acc, ref, N_ELEMS * ccoip_dtype_size(st)) == 0,
                              "%s %s->%s N=%u: dequantize_reduce == dequantize + reduce",
                              alg_name(ALGS[a]), ccoip_dtype_name(st), ccoip_dtype_name(qt), nk);
                    for (size_t i = 0; i < N_ELEMS; i++) {
                        const double got = src_get(st, acc, i);
                        PT_ASSERT(fabs(got - exact[i]) <= bound[i],
                                  "%s %s->%s N=%u [%zu]: sum %a, exact %a, bound %a",
                                  alg_name(ALGS[a]), ccoip_dtype_name(st), ccoip_dtype_name(qt), nk,
                                  i, got, exact[i], bound[i]);
                    }
                }
            }
        }
    }
}

/* MIN, MAX, PROD and AVG: bit-identical to dequantize + ccoip_reduce_inplace
 * for every type pair; for f32 and f64 also against the plain C operators. */
PTEST(quant, reduce_other_ops)
{
    enum { N_ELEMS = 1000 }; /* several blocks of 256 and a partial one */
    static unsigned char x[N_ELEMS * 8], codes[N_ELEMS * 2], acc[N_ELEMS * 8], ref[N_ELEMS * 8],
        tmp[N_ELEMS * 8], before[N_ELEMS * 8];
    const pcclRedOp_t ops[4] = {pcclMin, pcclMax, pcclProd, pcclAvg};
    const uint64_t seed0 = 0x9A5E0004ull;
    PT_LOG("seed %llx", (unsigned long long)seed0);
    uint64_t seed = seed0;
    for (int a = 0; a < 2; a++) {
        for (int s = 0; s < 4; s++) {
            for (int c = 0; c < 4; c++) {
                for (int o = 0; o < 4; o++) {
                    const pcclDataType_t st = SRC_TYPES[s], qt = CODE_TYPES[c];
                    for (size_t i = 0; i < N_ELEMS; i++) {
                        src_put(st, x, i, rand_unit(&seed) * 6.0 - 2.0);
                        src_put(st, acc, i, rand_unit(&seed) * 6.0 - 2.0);
                    }
                    memcpy(ref, acc, sizeof acc);
                    memcpy(before, acc, sizeof acc);
                    ccoip_quant_meta m;
                    PT_ASSERT(ccoip_quant_compute_meta(ALGS[a], st, qt, x, N_ELEMS, &m) ==
                                  pcclSuccess,
                              "meta");
                    PT_ASSERT(ccoip_quantize(&m, codes, x, N_ELEMS) == pcclSuccess, "quantize");
                    PT_ASSERT(ccoip_dequantize_reduce(&m, ops[o], acc, codes, N_ELEMS) ==
                                  pcclSuccess,
                              "dequantize_reduce op %d", (int)ops[o]);
                    PT_ASSERT(ccoip_dequantize(&m, tmp, codes, N_ELEMS) == pcclSuccess, "dq");
                    PT_ASSERT(ccoip_reduce_inplace(ops[o], st, ref, tmp, N_ELEMS) == pcclSuccess,
                              "reduce");
                    PT_ASSERT(memcmp(acc, ref, N_ELEMS * ccoip_dtype_size(st)) == 0,
                              "%s %s->%s op %d: same bytes as dequantize + reduce",
                              alg_name(ALGS[a]), ccoip_dtype_name(st), ccoip_dtype_name(qt),
                              (int)ops[o]);
                    if (st != pcclFloat && st != pcclDouble) continue;
                    for (size_t i = 0; i < N_ELEMS; i++) {
                        const double d = src_get(st, before, i), v = src_get(st, tmp, i);
                        double want;
                        switch (ops[o]) {
                        case pcclMin:
                            want = v < d ? v : d;
                            break;
                        case pcclMax:
                            want = v > d ? v : d;
                            break;
                        case pcclProd:
                            want = st == pcclFloat ? (double)((float)d * (float)v) : d * v;
                            break;
                        default:
                            want = st == pcclFloat ? (double)((float)d + (float)v) : d + v;
                            break;
                        }
                        PT_ASSERT(src_get(st, acc, i) == want, "op %d [%zu]: %a op %a = %a",
                                  (int)ops[o], i, d, v, src_get(st, acc, i));
                    }
                }
            }
        }
    }
}

/* ------------------------------------------------------------------------ */
/* Invalid input                                                            */
/* ------------------------------------------------------------------------ */

PTEST(quant, non_finite_input_rejected)
{
    static unsigned char src[64 * 8];
    for (int s = 0; s < 4; s++) {
        const pcclDataType_t st = SRC_TYPES[s];
        for (int bad = 0; bad < 3; bad++) {
            const double bad_value = bad == 0 ? NAN : bad == 1 ? INFINITY : -INFINITY;
            const size_t positions[] = {0, 1, 7, 8, 30, 63};
            for (size_t p = 0; p < sizeof positions / sizeof positions[0]; p++) {
                for (size_t i = 0; i < 64; i++)
                    src_put(st, src, i, (double)i - 20.0);
                src_put(st, src, positions[p], bad_value);
                for (int a = 0; a < 2; a++) {
                    ccoip_quant_meta m;
                    memset(&m, 0x5A, sizeof m);
                    const pcclResult_t rc =
                        ccoip_quant_compute_meta(ALGS[a], st, pcclUint8, src, 64, &m);
                    PT_ASSERT(rc == pcclInvalidArgument, "%s %s: %f at %zu -> %d",
                              alg_name(ALGS[a]), ccoip_dtype_name(st), bad_value, positions[p],
                              (int)rc);
                    unsigned char pattern[sizeof m];
                    memset(pattern, 0x5A, sizeof pattern);
                    PT_ASSERT(memcmp(&m, pattern, sizeof m) == 0, "meta untouched on error");
                }
            }
        }
    }
}

PTEST(quant, bad_arguments_rejected)
{
    const float data[4] = {1.0f, 2.0f, 3.0f, 4.0f};
    ccoip_quant_meta m;
    PT_ASSERT(ccoip_quant_compute_meta(pcclQuantNone, pcclFloat, pcclUint8, data, 4, &m) ==
                  pcclInvalidArgument,
              "QuantNone");
    PT_ASSERT(ccoip_quant_compute_meta((pcclQuantizationAlgorithm_t)7, pcclFloat, pcclUint8, data,
                                       4, &m) == pcclInvalidArgument,
              "unknown algorithm");
    PT_ASSERT(ccoip_quant_compute_meta(pcclQuantMinMax, pcclInt32, pcclUint8, data, 4, &m) ==
                  pcclInvalidArgument,
              "integer source");
    PT_ASSERT(ccoip_quant_compute_meta(pcclQuantMinMax, pcclFloat, pcclUint32, data, 4, &m) ==
                  pcclInvalidArgument,
              "32-bit codes");
    PT_ASSERT(ccoip_quant_compute_meta(pcclQuantMinMax, pcclFloat, pcclFloat16, data, 4, &m) ==
                  pcclInvalidArgument,
              "float codes");
    PT_ASSERT(ccoip_quant_compute_meta(pcclQuantMinMax, pcclFloat, pcclUint8, NULL, 4, &m) ==
                  pcclInvalidArgument,
              "NULL source");
    PT_ASSERT(ccoip_quant_compute_meta(pcclQuantMinMax, pcclFloat, pcclUint8, data, 4, NULL) ==
                  pcclInvalidArgument,
              "NULL meta");
    PT_ASSERT(ccoip_quant_meta_check(NULL) == pcclInvalidArgument, "NULL meta check");
    PT_ASSERT(ccoip_quant_compute_meta(pcclQuantZeroPointScale, pcclFloat, pcclUint8, NULL, 0,
                                       &m) == pcclSuccess,
              "empty chunk, NULL source");
    PT_ASSERT(m.scale == 1.0 && m.zero_point == 0, "empty chunk = constant 0");
    unsigned char codes[4];
    PT_ASSERT(ccoip_quantize(&m, NULL, data, 4) == pcclInvalidArgument, "NULL codes");
    PT_ASSERT(ccoip_quantize(&m, codes, NULL, 4) == pcclInvalidArgument, "NULL src");
    PT_ASSERT(ccoip_quantize(NULL, codes, data, 4) == pcclInvalidArgument, "NULL meta");
    float out[4];
    PT_ASSERT(ccoip_dequantize(&m, NULL, codes, 4) == pcclInvalidArgument, "NULL dst");
    PT_ASSERT(ccoip_dequantize(&m, out, NULL, 4) == pcclInvalidArgument, "NULL codes");
    PT_ASSERT(ccoip_dequantize_reduce(&m, pcclSum, NULL, codes, 4) == pcclInvalidArgument,
              "NULL dst");
    PT_ASSERT(ccoip_quantize(&m, NULL, NULL, 0) == pcclSuccess, "count 0 needs no buffers");
}

/* Metadata as it could come off the wire: every corruption is rejected by
 * the check and by all three entry points, which then write nothing. */
PTEST(quant, bad_metadata_rejected)
{
    ccoip_quant_meta mm, zps;
    const float data[6] = {-1.5f, 0.25f, 2.0f, 3.0f, -0.5f, 1.0f};
    PT_ASSERT(ccoip_quant_compute_meta(pcclQuantMinMax, pcclFloat, pcclUint8, data, 6, &mm) ==
                  pcclSuccess,
              "mm");
    PT_ASSERT(ccoip_quant_compute_meta(pcclQuantZeroPointScale, pcclFloat, pcclUint8, data, 6,
                                       &zps) == pcclSuccess,
              "zps");
    enum { N_BAD = 37 };
    ccoip_quant_meta bad[N_BAD];
    int nb = 0;
    const pcclQuantizationAlgorithm_t algs[3] = {pcclQuantNone, (pcclQuantizationAlgorithm_t)3,
                                                 (pcclQuantizationAlgorithm_t)-1};
    for (int i = 0; i < 3; i++) {
        bad[nb] = mm;
        bad[nb++].algorithm = algs[i];
        bad[nb] = zps;
        bad[nb++].algorithm = algs[i];
    }
    const pcclDataType_t types[3] = {pcclInt32, pcclUint64, (pcclDataType_t)12};
    for (int i = 0; i < 3; i++) {
        bad[nb] = mm;
        bad[nb++].src_type = types[i];
        bad[nb] = zps;
        bad[nb++].quant_type = types[i];
    }
    bad[nb] = zps;
    bad[nb++].quant_type = pcclFloat;
    const double mm_bad[][2] = {
        {2.0, 1.0},        /* min > max */
        {NAN, 1.0},        /* NaN */
        {-1.0, NAN},       /* NaN */
        {-INFINITY, 1.0},  /* infinite */
        {-1.0, INFINITY},  /* infinite */
        {-1.0, 1e39},      /* beyond FLT_MAX */
        {-1e300, 1.0},     /* beyond -FLT_MAX */
        {0.1, 1.0},        /* not a binary32 value */
        {-1.0, 0x1p-1074}, /* not a binary32 value (subnormal binary64) */
        {NAN, NAN},        /* NaN */
    };
    for (size_t i = 0; i < sizeof mm_bad / sizeof mm_bad[0]; i++) {
        bad[nb] = mm;
        bad[nb].min_value = mm_bad[i][0];
        bad[nb++].max_value = mm_bad[i][1];
    }
    /* fp16: 70000 exceeds 65504; 0.1 is not an fp16 value. */
    bad[nb] = mm;
    bad[nb].src_type = pcclFloat16;
    bad[nb++].max_value = 70000.0;
    bad[nb] = mm;
    bad[nb].src_type = pcclFloat16;
    bad[nb++].max_value = 0.1;
    bad[nb] = mm;
    bad[nb].src_type = pcclBFloat16;
    bad[nb++].max_value = 1.0 + 0x1p-10;
    const double zps_bad_scale[] = {0.0, -1.0, -0.0, NAN, INFINITY, 0x1p-1023, -INFINITY};
    for (size_t i = 0; i < sizeof zps_bad_scale / sizeof zps_bad_scale[0]; i++) {
        bad[nb] = zps;
        bad[nb++].scale = zps_bad_scale[i];
    }
    const int64_t zps_bad_zp[] = {CCOIP_QUANT_ZERO_POINT_LIMIT + 1,
                                  -CCOIP_QUANT_ZERO_POINT_LIMIT - 1, INT64_MIN, INT64_MAX};
    for (size_t i = 0; i < sizeof zps_bad_zp / sizeof zps_bad_zp[0]; i++) {
        bad[nb] = zps;
        bad[nb++].zero_point = zps_bad_zp[i];
    }
    PT_ASSERT(nb == N_BAD, "built %d bad metas", nb);

    unsigned char codes[6] = {0, 1, 2, 3, 4, 5}, codes_out[16];
    float out[6];
    for (int i = 0; i < nb; i++) {
        PT_ASSERT(ccoip_quant_meta_check(&bad[i]) == pcclInvalidArgument, "bad meta %d: check", i);
        memset(codes_out, 0x77, sizeof codes_out);
        PT_ASSERT(ccoip_quantize(&bad[i], codes_out, data, 6) == pcclInvalidArgument,
                  "bad meta %d: quantize", i);
        PT_ASSERT(codes_out[0] == 0x77 && codes_out[5] == 0x77, "bad meta %d: nothing written", i);
        for (int j = 0; j < 6; j++)
            out[j] = 42.0f;
        PT_ASSERT(ccoip_dequantize(&bad[i], out, codes, 6) == pcclInvalidArgument,
                  "bad meta %d: dequantize", i);
        PT_ASSERT(ccoip_dequantize_reduce(&bad[i], pcclSum, out, codes, 6) == pcclInvalidArgument,
                  "bad meta %d: dequantize_reduce", i);
        PT_ASSERT(out[0] == 42.0f && out[5] == 42.0f, "bad meta %d: nothing written", i);
    }
    /* Unknown reduce ops, and the bitwise ops (5..7: the quantized source types are floats,
     * which have no bitwise kernels), with valid metadata. */
    const int bad_ops[6] = {-1, pcclBand, pcclBor, pcclBxor, 9, 100};
    for (int i = 0; i < 6; i++) {
        for (int j = 0; j < 6; j++)
            out[j] = 42.0f;
        PT_ASSERT(ccoip_dequantize_reduce(&mm, (pcclRedOp_t)bad_ops[i], out, codes, 6) ==
                      pcclInvalidArgument,
                  "op %d", bad_ops[i]);
        PT_ASSERT(out[0] == 42.0f && out[5] == 42.0f, "op %d: nothing written", bad_ops[i]);
    }
    /* The limits themselves are valid. */
    ccoip_quant_meta edge = zps;
    edge.zero_point = CCOIP_QUANT_ZERO_POINT_LIMIT;
    edge.scale = DBL_MIN;
    PT_ASSERT(ccoip_quant_meta_check(&edge) == pcclSuccess, "zp limit, DBL_MIN scale");
    edge.zero_point = -CCOIP_QUANT_ZERO_POINT_LIMIT;
    edge.scale = DBL_MAX;
    PT_ASSERT(ccoip_quant_meta_check(&edge) == pcclSuccess, "-zp limit, DBL_MAX scale");
    edge = mm;
    edge.min_value = -(double)FLT_MAX;
    edge.max_value = (double)FLT_MAX;
    PT_ASSERT(ccoip_quant_meta_check(&edge) == pcclSuccess, "±FLT_MAX");
}

/* Valid but hostile metadata and data it was not computed from (NaN, ±inf,
 * out of range): codes clamp (NaN → L), values stay finite and in range,
 * and everything matches the model. Runs under UBSan in CI. */
PTEST(quant, hostile_metadata_and_data)
{
    static unsigned char src[64 * 8], codes[64 * 2], out[64 * 8];
    const double specials[8] = {NAN, INFINITY, -INFINITY, 0.0, -0.0, 1e300, -1e300, 0x1p-1074};
    for (int s = 0; s < 4; s++) {
        const pcclDataType_t st = SRC_TYPES[s];
        const double f = src_max(st);
        for (int c = 0; c < 4; c++) {
            const pcclDataType_t qt = CODE_TYPES[c];
            ccoip_quant_meta metas[6];
            memset(metas, 0, sizeof metas);
            for (int i = 0; i < 6; i++) {
                metas[i].src_type = st;
                metas[i].quant_type = qt;
                metas[i].algorithm = i < 2 ? pcclQuantMinMax : pcclQuantZeroPointScale;
            }
            metas[0].min_value = -f;
            metas[0].max_value = f;
            metas[1].min_value = 3.0;
            metas[1].max_value = 3.0;
            metas[2].scale = DBL_MAX;
            metas[2].zero_point = CCOIP_QUANT_ZERO_POINT_LIMIT;
            metas[3].scale = DBL_MIN;
            metas[3].zero_point = -CCOIP_QUANT_ZERO_POINT_LIMIT;
            metas[4].scale = 1e-3;
            metas[4].zero_point = 5;
            metas[5].scale = f; /* values far beyond F: clamped */
            metas[5].zero_point = -3;
            for (int i = 0; i < 64; i++) {
                const double x = i < 8 ? specials[i] : (double)(i - 32) * f / 40.0;
                if (st == pcclDouble) {
                    memcpy(src + 8 * (size_t)i, &x, 8);
                } else if (st == pcclFloat) {
                    const float xf = isnan(x)               ? NAN
                                     : x > (double)FLT_MAX  ? INFINITY
                                     : x < -(double)FLT_MAX ? -INFINITY
                                                            : (float)x;
                    memcpy(src + 4 * (size_t)i, &xf, 4);
                } else {
                    const float xf = isnan(x) ? NAN : (float)fmax(fmin(x, 1e38), -1e38);
                    const uint16_t h =
                        st == pcclFloat16 ? ccoip_f32_to_f16(xf) : ccoip_f32_to_bf16(xf);
                    memcpy(src + 2 * (size_t)i, &h, 2);
                }
            }
            for (int mi = 0; mi < 6; mi++) {
                const ccoip_quant_meta *m = &metas[mi];
                PT_ASSERT(ccoip_quant_meta_check(m) == pcclSuccess, "%s meta %d valid",
                          ccoip_dtype_name(st), mi);
                PT_ASSERT(ccoip_quantize(m, codes, src, 64) == pcclSuccess, "quantize");
                PT_ASSERT(ccoip_dequantize(m, out, codes, 64) == pcclSuccess, "dequantize");
                for (size_t i = 0; i < 64; i++) {
                    const double x = src_get(st, src, i);
                    const int64_t code = code_get(qt, codes, i);
                    PT_ASSERT(code == model_code(m, x), "%s->%s meta %d [%zu] x=%a: code %lld",
                              ccoip_dtype_name(st), ccoip_dtype_name(qt), mi, i, x,
                              (long long)code);
                    if (isnan(x)) PT_ASSERT(code == code_low(qt), "NaN -> L");
                    const double v = src_get(st, out, i);
                    PT_ASSERT(isfinite(v) && v >= -f && v <= f, "meta %d [%zu]: value %a", mi, i,
                              v);
                    if (m->algorithm == pcclQuantMinMax) {
                        PT_ASSERT(v >= m->min_value && v <= m->max_value, "in [min, max]");
                    }
                    PT_ASSERT(elem_bits(st, out, i) == model_round_bits(st, model_value(m, code)),
                              "meta %d [%zu]: value bits", mi, i);
                }
            }
        }
    }
}

/* Buffers at odd addresses give the same bytes as aligned ones. */
PTEST(quant, unaligned_buffers)
{
    static double src_al[513], out_al[513];
    static uint16_t codes_al[513];
    static unsigned char src_un[513 * 8 + 1], codes_un[513 * 2 + 1], out_un[513 * 8 + 1];
    uint64_t seed = 0x9A5E0005ull;
    PT_LOG("seed %llx", (unsigned long long)seed);
    for (int s = 0; s < 4; s++) {
        const pcclDataType_t st = SRC_TYPES[s];
        const size_t ssz = ccoip_dtype_size(st);
        for (size_t i = 0; i < 513; i++) {
            src_put(st, (unsigned char *)src_al, i, rand_unit(&seed) * 10.0 - 5.0);
        }
        memcpy(src_un + 1, src_al, 513 * ssz);
        for (int a = 0; a < 2; a++) {
            ccoip_quant_meta m1, m2;
            PT_ASSERT(ccoip_quant_compute_meta(ALGS[a], st, pcclInt16, src_al, 513, &m1) ==
                          pcclSuccess,
                      "meta");
            PT_ASSERT(ccoip_quant_compute_meta(ALGS[a], st, pcclInt16, src_un + 1, 513, &m2) ==
                          pcclSuccess,
                      "meta");
            PT_ASSERT(memcmp(&m1, &m2, sizeof m1) == 0, "same metadata");
            PT_ASSERT(ccoip_quantize(&m1, codes_al, src_al, 513) == pcclSuccess, "q");
            PT_ASSERT(ccoip_quantize(&m1, codes_un + 1, src_un + 1, 513) == pcclSuccess, "q");
            PT_ASSERT(memcmp(codes_al, codes_un + 1, 513 * 2) == 0, "same codes");
            PT_ASSERT(ccoip_dequantize(&m1, out_al, codes_al, 513) == pcclSuccess, "dq");
            PT_ASSERT(ccoip_dequantize(&m1, out_un + 1, codes_un + 1, 513) == pcclSuccess, "dq");
            PT_ASSERT(memcmp(out_al, out_un + 1, 513 * ssz) == 0, "same values");
            PT_ASSERT(ccoip_dequantize_reduce(&m1, pcclSum, out_al, codes_al, 513) == pcclSuccess,
                      "dqr");
            PT_ASSERT(ccoip_dequantize_reduce(&m1, pcclSum, out_un + 1, codes_un + 1, 513) ==
                          pcclSuccess,
                      "dqr");
            PT_ASSERT(memcmp(out_al, out_un + 1, 513 * ssz) == 0, "same sums");
        }
    }
}
