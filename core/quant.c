/*
 * quant.c — MinMax and ZeroPointScale quantization of all-reduce traffic.
 *
 * The formulas and the validation rules are in ccoip_quant.h. How they are
 * implemented:
 *
 * - Every computation is binary64 (built with -ffp-contract=off), and every
 *   rounding to an integer code is explicit: the value u is clamped to
 *   [0, Q] first (NaN becomes 0), then truncated after adding 0.5, which for
 *   u >= 0 is floor(u + 0.5). No rint/nearbyint, so the current rounding
 *   mode of the FPU is never consulted for a code.
 * - The formulas are evaluated with per-call coefficients (quant_params)
 *   derived from the metadata by quant_prepare, in one loop per (algorithm,
 *   source type, code width); see DEFINE_QUANTIZE below.
 * - k is the code minus L. Signed codes are stored as k XOR 0x80 (or
 *   0x8000): the two's complement bits of L + k.
 * - Elements are loaded and stored with fixed-size memcpy, which is defined
 *   at any alignment and compiles to plain loads and stores, so the f32 and
 *   f64 loops vectorize.
 * - Dequantized values are rounded into fp16/bf16 directly from binary64
 *   (round to nearest even on the bits), not through binary32, so there is
 *   no double rounding.
 */
#include "ccoip_quant.h"

#include <assert.h>
#include <float.h>
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "ccoip_dtype.h"
#include "ccoip_reduce.h"

/* binary64 arithmetic must really be binary64 (no x87-style excess
 * precision), or codes would differ between platforms. */
#if !defined(FLT_EVAL_METHOD) || FLT_EVAL_METHOD != 0
#error "quant.c needs FLT_EVAL_METHOD == 0 for deterministic results"
#endif

/* Elements dequantized per block by ccoip_dequantize_reduce. */
#define QUANT_BLOCK 256u

/* Largest finite fp16 and bf16 values. */
#define QUANT_F16_MAX  65504.0
#define QUANT_BF16_MAX 0x1.fep127

/* ZeroPointScale: the scale is at least max(|min|, |max|) * 2^-44, so every
 * |x / scale| of the chunk stays below 2^44 and keeps 9 fraction bits in
 * binary64. Never binding for fp16, bf16 and fp32 sources (their chunks
 * have max(|min|, |max|) / (max - min) <= 2^24). */
#define QUANT_ZPS_REL 0x1p-44
/* MinMax on pcclDouble: ranges below this are computed scaled by 2^968. */
#define QUANT_TINY_RANGE 0x1p-968
#define QUANT_TINY_SCALE 0x1p968

/* ------------------------------------------------------------------------ */
/* Unaligned loads and stores                                               */
/* ------------------------------------------------------------------------ */

static inline uint8_t ld_u8(const unsigned char *p)
{
    return *p;
}

static inline uint16_t ld_u16(const unsigned char *p)
{
    uint16_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline float ld_f32(const unsigned char *p)
{
    float v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline double ld_f64(const unsigned char *p)
{
    double v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline void st_u8(unsigned char *p, uint8_t v)
{
    *p = v;
}

static inline void st_u16(unsigned char *p, uint16_t v)
{
    memcpy(p, &v, sizeof v);
}

static inline void st_f32(unsigned char *p, float v)
{
    memcpy(p, &v, sizeof v);
}

static inline void st_f64(unsigned char *p, double v)
{
    memcpy(p, &v, sizeof v);
}

/* Source elements as binary32 (exact for fp16, bf16 and fp32). */
static inline float ld_f16_as_f32(const unsigned char *p)
{
    return ccoip_f16_to_f32(ld_u16(p));
}

static inline float ld_bf16_as_f32(const unsigned char *p)
{
    return ccoip_bf16_to_f32(ld_u16(p));
}

/* ------------------------------------------------------------------------ */
/* binary64 → fp16 / bf16, round to nearest even                            */
/* ------------------------------------------------------------------------ */

/*
 * Rounds d to the 16-bit binary format with mant_bits fraction bits and
 * exponent bias `bias` (fp16: 10, 15; bf16: 7, 127) and returns its bits.
 * Integer-only, so it does not depend on the FPU. Overflow gives ±inf, NaN a
 * quiet NaN (neither happens for values of valid metadata).
 */
static uint16_t quant_f64_to_half_format(double d, unsigned mant_bits, int bias)
{
    uint64_t x;
    memcpy(&x, &d, sizeof x);
    const uint64_t sign = (x >> 48) & 0x8000u;
    const uint64_t inf = (uint64_t)(2 * bias + 1) << mant_bits;
    const int dexp = (int)((x >> 52) & 0x7ffu);
    const uint64_t frac = x & 0xfffffffffffffull;
    if (dexp == 0x7ff) {
        if (frac != 0) return (uint16_t)(sign | inf | ((uint64_t)1 << (mant_bits - 1u)));
        return (uint16_t)(sign | inf);
    }
    /* binary64 zeros and subnormals are far below half the smallest
     * subnormal of either format. */
    if (dexp == 0) return (uint16_t)sign;
    int e = dexp - 1023 + bias; /* biased exponent in the target format */
    if (e >= 2 * bias + 1) return (uint16_t)(sign | inf);
    const uint64_t m = frac | ((uint64_t)1 << 52); /* 53-bit significand */
    unsigned shift = 52u - mant_bits;
    if (e <= 0) {
        /* Subnormal result: drop 1 - e more bits. */
        shift += (unsigned)(1 - e);
        if (shift > 53u) return (uint16_t)sign; /* below half the smallest subnormal */
    }
    uint64_t q = m >> shift;
    const uint64_t rest = m & (((uint64_t)1 << shift) - 1u);
    const uint64_t half = (uint64_t)1 << (shift - 1u);
    if (rest > half || (rest == half && (q & 1u) != 0)) q++;
    /* Subnormal: q <= 2^mant_bits, and q == 2^mant_bits is the smallest
     * normal. Normal: q in [2^mant_bits, 2^(mant_bits+1)] carries the
     * implicit bit, which adds one to the exponent field; a carry out of the
     * largest exponent gives inf. */
    if (e <= 0) return (uint16_t)(sign | q);
    return (uint16_t)(sign | (((uint64_t)(e - 1) << mant_bits) + q));
}

static inline void st_f64_as_f16(unsigned char *p, double v)
{
    st_u16(p, quant_f64_to_half_format(v, 10u, 15));
}

static inline void st_f64_as_bf16(unsigned char *p, double v)
{
    st_u16(p, quant_f64_to_half_format(v, 7u, 127));
}

static inline void st_f64_as_f32(unsigned char *p, double v)
{
    st_f32(p, (float)v);
}

/* ------------------------------------------------------------------------ */
/* Types and metadata                                                       */
/* ------------------------------------------------------------------------ */

static bool quant_src_ok(pcclDataType_t t)
{
    return t == pcclFloat16 || t == pcclBFloat16 || t == pcclFloat || t == pcclDouble;
}

static bool quant_code_ok(pcclDataType_t t)
{
    return t == pcclUint8 || t == pcclInt8 || t == pcclUint16 || t == pcclInt16;
}

/* L, the smallest code of a supported quantized type. */
static int32_t quant_code_low(pcclDataType_t t)
{
    switch (t) {
    case pcclInt8:
        return -128;
    case pcclInt16:
        return -32768;
    default:
        return 0;
    }
}

/* Q = H - L. */
static uint32_t quant_code_span(pcclDataType_t t)
{
    return (t == pcclUint8 || t == pcclInt8) ? 255u : 65535u;
}

/* XOR mapping k = code - L to the stored bits of the code. */
static uint32_t quant_code_flip(pcclDataType_t t)
{
    switch (t) {
    case pcclInt8:
        return 0x80u;
    case pcclInt16:
        return 0x8000u;
    default:
        return 0u;
    }
}

/* Largest finite value of a supported source type. */
static double quant_src_max(pcclDataType_t t)
{
    switch (t) {
    case pcclFloat16:
        return QUANT_F16_MAX;
    case pcclBFloat16:
        return QUANT_BF16_MAX;
    case pcclFloat:
        return (double)FLT_MAX;
    default:
        return DBL_MAX;
    }
}

bool ccoip_quant_supported(pcclQuantizationAlgorithm_t algorithm, pcclDataType_t src_type,
                           pcclDataType_t quant_type)
{
    if (algorithm != pcclQuantMinMax && algorithm != pcclQuantZeroPointScale) return false;
    return quant_src_ok(src_type) && quant_code_ok(quant_type);
}

/* Coefficients of the formulas (see DEFINE_QUANTIZE). */
typedef struct quant_params {
    double sh, c0, c1, c2; /* quantize */
    double d0, d1, d2;     /* dequantize */
    double vlo, vhi;       /* ZeroPointScale: the clamp of dequantized values */
    double lo, hi;         /* MinMax: the values of k == 0 and k == Q */
    double qspan;          /* Q */
    uint32_t kmax;         /* Q */
    uint32_t flip;         /* code bits = k ^ flip */
} quant_params;

/* True when the finite v, |v| <= F, is a value of the source type. */
static bool quant_representable(pcclDataType_t src_type, double v)
{
    switch (src_type) {
    case pcclFloat16:
        return (double)ccoip_f16_to_f32(quant_f64_to_half_format(v, 10u, 15)) == v;
    case pcclBFloat16:
        return (double)ccoip_bf16_to_f32(quant_f64_to_half_format(v, 7u, 127)) == v;
    case pcclFloat:
        return (double)(float)v == v;
    default:
        return true;
    }
}

pcclResult_t ccoip_quant_meta_check(const ccoip_quant_meta *meta)
{
    if (meta == NULL) return pcclInvalidArgument;
    if (!ccoip_quant_supported(meta->algorithm, meta->src_type, meta->quant_type)) {
        return pcclInvalidArgument;
    }
    if (meta->algorithm == pcclQuantMinMax) {
        const double fmax = quant_src_max(meta->src_type);
        /* Written so that NaN fails every test. */
        if (!(meta->min_value <= meta->max_value)) return pcclInvalidArgument;
        if (!(meta->min_value >= -fmax && meta->max_value <= fmax)) return pcclInvalidArgument;
        if (!quant_representable(meta->src_type, meta->min_value) ||
            !quant_representable(meta->src_type, meta->max_value)) {
            return pcclInvalidArgument;
        }
        return pcclSuccess;
    }
    if (!(meta->scale >= DBL_MIN && meta->scale <= DBL_MAX)) return pcclInvalidArgument;
    if (meta->zero_point > CCOIP_QUANT_ZERO_POINT_LIMIT ||
        meta->zero_point < -CCOIP_QUANT_ZERO_POINT_LIMIT) {
        return pcclInvalidArgument;
    }
    return pcclSuccess;
}

/* Validates meta and derives the coefficients. */
static pcclResult_t quant_prepare(const ccoip_quant_meta *meta, quant_params *p)
{
    pcclResult_t rc = ccoip_quant_meta_check(meta);
    if (rc != pcclSuccess) return rc;
    memset(p, 0, sizeof *p);
    const int32_t low = quant_code_low(meta->quant_type);
    p->kmax = quant_code_span(meta->quant_type);
    p->qspan = (double)p->kmax;
    p->flip = quant_code_flip(meta->quant_type);
    p->sh = 1.0;
    p->d2 = 1.0;
    if (meta->algorithm == pcclQuantMinMax) {
        const double mn = meta->min_value, mx = meta->max_value;
        const double r = mx - mn;
        /* Only pcclDouble chunks can have a range that overflows binary64 or
         * is so small that Q / range would overflow (min and max are values
         * of the source type, so an fp32 range is in [2^-149, 2^129)). They
         * are computed on values scaled by a power of two: exact, so the
         * result is that of the unscaled formulas wherever those are
         * finite. */
        if (r > DBL_MAX) {
            p->sh = 0.5;
        } else if (r > 0.0 && r < QUANT_TINY_RANGE) {
            p->sh = QUANT_TINY_SCALE;
        }
        assert(p->sh == 1.0 || meta->src_type == pcclDouble);
        const double c0 = mn * p->sh;
        const double rs = mx * p->sh - c0;
        p->c0 = c0;
        p->c1 = rs > 0.0 ? p->qspan / rs : 0.0;
        p->d0 = c0;
        p->d1 = rs / p->qspan;
        p->d2 = 1.0 / p->sh;
        p->lo = mn;
        p->hi = mx;
        return pcclSuccess;
    }
    const double fmax = quant_src_max(meta->src_type);
    p->c1 = 1.0 / meta->scale;
    /* |zero_point| <= 2^48: both differences are exact in binary64. */
    p->c2 = (double)(meta->zero_point - (int64_t)low);
    p->d0 = (double)((int64_t)low - meta->zero_point);
    p->d2 = meta->scale;
    p->vlo = -fmax;
    p->vhi = fmax;
    return pcclSuccess;
}

/* ------------------------------------------------------------------------ */
/* Kernels                                                                  */
/* ------------------------------------------------------------------------ */

/*
 * The loops, one per (algorithm, source type, code width). KIND selects the
 * formula at compile time:
 *   QK_MM   MinMax, fp16/bf16/fp32 sources (sh == 1 and d2 == 1 there):
 *           u = (x - c0) * c1;              v = k * d1 + d0
 *   QK_MMS  MinMax, pcclDouble sources (sh may be 2^-1 or 2^968):
 *           u = (x * sh - c0) * c1;         v = (k * d1 + d0) * d2
 *   QK_ZPS  ZeroPointScale:
 *           u = x * c1 + c2;                v = (k + d0) * d2, clamped to [vlo, vhi]
 * then code = L + floor(clamp(u, 0, Q) + 0.5), and for MinMax v = lo (min)
 * at k == 0, which keeps a -0 minimum, and v = hi (max) at k == Q. MinMax
 * needs no clamp: for 0 < k < Q the exact min + k * step lies in
 * [min, max - step / 2], and rounding is monotone.
 */
#define QK_MM  0
#define QK_MMS 1
#define QK_ZPS 2

#define DEFINE_QUANTIZE(name, KIND, SRC_SIZE, LOAD, CODE_T, STORE)                                 \
    static void name(const quant_params *p, unsigned char *restrict out,                           \
                     const unsigned char *restrict in, size_t n)                                   \
    {                                                                                              \
        const double sh = p->sh, c0 = p->c0, c1 = p->c1, c2 = p->c2, qspan = p->qspan;             \
        const uint32_t flip = p->flip;                                                             \
        for (size_t i = 0; i < n; i++) {                                                           \
            const double x = (double)LOAD(in + i * (SRC_SIZE));                                    \
            double u;                                                                              \
            if (KIND == QK_MM) {                                                                   \
                u = (x - c0) * c1;                                                                 \
            } else if (KIND == QK_MMS) {                                                           \
                u = (x * sh - c0) * c1;                                                            \
            } else {                                                                               \
                u = x * c1 + c2;                                                                   \
            }                                                                                      \
            u = u > 0.0 ? u : 0.0; /* NaN → 0 */                                                 \
            u = u < qspan ? u : qspan;                                                             \
            const uint32_t k = (uint32_t)(int32_t)(u + 0.5); /* floor(u + 0.5), u >= 0 */          \
            STORE(out + i * sizeof(CODE_T), (CODE_T)(k ^ flip));                                   \
        }                                                                                          \
    }

#define DEFINE_DEQUANTIZE(name, KIND, SRC_SIZE, STORE, CODE_T, LOAD)                               \
    static void name(const quant_params *p, unsigned char *restrict out,                           \
                     const unsigned char *restrict in, size_t n)                                   \
    {                                                                                              \
        const double d0 = p->d0, d1 = p->d1, d2 = p->d2, vlo = p->vlo, vhi = p->vhi;               \
        const double lo = p->lo, hi = p->hi;                                                       \
        const uint32_t flip = p->flip, kmax = p->kmax;                                             \
        for (size_t i = 0; i < n; i++) {                                                           \
            const uint32_t k = (uint32_t)LOAD(in + i * sizeof(CODE_T)) ^ flip;                     \
            const double kd = (double)(int32_t)k;                                                  \
            double v;                                                                              \
            if (KIND == QK_ZPS) {                                                                  \
                v = (kd + d0) * d2;                                                                \
                v = v < vlo ? vlo : v;                                                             \
                v = v > vhi ? vhi : v;                                                             \
            } else {                                                                               \
                v = KIND == QK_MM ? kd * d1 + d0 : (kd * d1 + d0) * d2;                            \
                v = k == 0u ? lo : v;                                                              \
                v = k == kmax ? hi : v;                                                            \
            }                                                                                      \
            STORE(out + i * (SRC_SIZE), v);                                                        \
        }                                                                                          \
    }

#define DEFINE_KERNELS(tag, MM_KIND, SRC_SIZE, LOAD, STORE)                                        \
    DEFINE_QUANTIZE(quantize_mm_##tag##_8, MM_KIND, SRC_SIZE, LOAD, uint8_t, st_u8)                \
    DEFINE_QUANTIZE(quantize_mm_##tag##_16, MM_KIND, SRC_SIZE, LOAD, uint16_t, st_u16)             \
    DEFINE_QUANTIZE(quantize_zps_##tag##_8, QK_ZPS, SRC_SIZE, LOAD, uint8_t, st_u8)                \
    DEFINE_QUANTIZE(quantize_zps_##tag##_16, QK_ZPS, SRC_SIZE, LOAD, uint16_t, st_u16)             \
    DEFINE_DEQUANTIZE(dequantize_mm_##tag##_8, MM_KIND, SRC_SIZE, STORE, uint8_t, ld_u8)           \
    DEFINE_DEQUANTIZE(dequantize_mm_##tag##_16, MM_KIND, SRC_SIZE, STORE, uint16_t, ld_u16)        \
    DEFINE_DEQUANTIZE(dequantize_zps_##tag##_8, QK_ZPS, SRC_SIZE, STORE, uint8_t, ld_u8)           \
    DEFINE_DEQUANTIZE(dequantize_zps_##tag##_16, QK_ZPS, SRC_SIZE, STORE, uint16_t, ld_u16)

DEFINE_KERNELS(f16, QK_MM, 2u, ld_f16_as_f32, st_f64_as_f16)
DEFINE_KERNELS(bf16, QK_MM, 2u, ld_bf16_as_f32, st_f64_as_bf16)
DEFINE_KERNELS(f32, QK_MM, 4u, ld_f32, st_f64_as_f32)
DEFINE_KERNELS(f64, QK_MMS, 8u, ld_f64, st_f64)

typedef void (*quant_kernel)(const quant_params *p, unsigned char *restrict out,
                             const unsigned char *restrict in, size_t n);

/* [algorithm: MinMax, ZeroPointScale][source: f16, bf16, f32, f64][width: 8, 16] */
static const quant_kernel quant_quantize_kernels[2][4][2] = {
    {
        {quantize_mm_f16_8, quantize_mm_f16_16},
        {quantize_mm_bf16_8, quantize_mm_bf16_16},
        {quantize_mm_f32_8, quantize_mm_f32_16},
        {quantize_mm_f64_8, quantize_mm_f64_16},
    },
    {
        {quantize_zps_f16_8, quantize_zps_f16_16},
        {quantize_zps_bf16_8, quantize_zps_bf16_16},
        {quantize_zps_f32_8, quantize_zps_f32_16},
        {quantize_zps_f64_8, quantize_zps_f64_16},
    },
};

static const quant_kernel quant_dequantize_kernels[2][4][2] = {
    {
        {dequantize_mm_f16_8, dequantize_mm_f16_16},
        {dequantize_mm_bf16_8, dequantize_mm_bf16_16},
        {dequantize_mm_f32_8, dequantize_mm_f32_16},
        {dequantize_mm_f64_8, dequantize_mm_f64_16},
    },
    {
        {dequantize_zps_f16_8, dequantize_zps_f16_16},
        {dequantize_zps_bf16_8, dequantize_zps_bf16_16},
        {dequantize_zps_f32_8, dequantize_zps_f32_16},
        {dequantize_zps_f64_8, dequantize_zps_f64_16},
    },
};

/* The kernel of a table for valid metadata. */
static quant_kernel quant_pick(const quant_kernel table[2][4][2], const ccoip_quant_meta *meta)
{
    unsigned src;
    switch (meta->src_type) {
    case pcclFloat16:
        src = 0u;
        break;
    case pcclBFloat16:
        src = 1u;
        break;
    case pcclFloat:
        src = 2u;
        break;
    default:
        src = 3u;
        break;
    }
    const unsigned alg = meta->algorithm == pcclQuantMinMax ? 0u : 1u;
    const unsigned width = ccoip_dtype_size(meta->quant_type) == 1u ? 0u : 1u;
    return table[alg][src][width];
}

/* count as a size_t element count, when buffers of that many elements of
 * elem_size bytes can exist at all (size_t is 32 bits on wasm32). */
static bool quant_count_ok(uint64_t count, uint32_t elem_size)
{
    return count <= (uint64_t)SIZE_MAX / elem_size;
}

/* ------------------------------------------------------------------------ */
/* Metadata                                                                 */
/* ------------------------------------------------------------------------ */

/* Scans n >= 1 elements for their minimum and maximum in 8 independent lanes
 * (a fixed order, so the result, including which of -0 and +0 is reported,
 * is the same everywhere; the lanes let the compiler vectorize). z collects
 * x * 0, which is NaN exactly when some x is not finite. */
#define SCAN_LANES 8u
#define DEFINE_SCAN(name, T, SRC_SIZE, LOAD)                                                       \
    static bool name(const unsigned char *in, size_t n, double *min_out, double *max_out)          \
    {                                                                                              \
        T mn[SCAN_LANES], mx[SCAN_LANES], z[SCAN_LANES];                                           \
        const T first = LOAD(in);                                                                  \
        for (unsigned j = 0; j < SCAN_LANES; j++) {                                                \
            mn[j] = first;                                                                         \
            mx[j] = first;                                                                         \
            z[j] = 0;                                                                              \
        }                                                                                          \
        size_t i = 0;                                                                              \
        for (; i + SCAN_LANES <= n; i += SCAN_LANES) {                                             \
            for (unsigned j = 0; j < SCAN_LANES; j++) {                                            \
                const T x = LOAD(in + (i + j) * (SRC_SIZE));                                       \
                mn[j] = x < mn[j] ? x : mn[j];                                                     \
                mx[j] = x > mx[j] ? x : mx[j];                                                     \
                z[j] = z[j] + x * 0;                                                               \
            }                                                                                      \
        }                                                                                          \
        for (; i < n; i++) {                                                                       \
            const T x = LOAD(in + i * (SRC_SIZE));                                                 \
            mn[0] = x < mn[0] ? x : mn[0];                                                         \
            mx[0] = x > mx[0] ? x : mx[0];                                                         \
            z[0] = z[0] + x * 0;                                                                   \
        }                                                                                          \
        T rmn = mn[0], rmx = mx[0], rz = z[0];                                                     \
        for (unsigned j = 1; j < SCAN_LANES; j++) {                                                \
            rmn = mn[j] < rmn ? mn[j] : rmn;                                                       \
            rmx = mx[j] > rmx ? mx[j] : rmx;                                                       \
            rz = rz + z[j];                                                                        \
        }                                                                                          \
        *min_out = (double)rmn;                                                                    \
        *max_out = (double)rmx;                                                                    \
        return rz == 0; /* NaN when some element is NaN or infinite (inf * 0) */                   \
    }

DEFINE_SCAN(scan_f16, float, 2u, ld_f16_as_f32)
DEFINE_SCAN(scan_bf16, float, 2u, ld_bf16_as_f32)
DEFINE_SCAN(scan_f32, float, 4u, ld_f32)
DEFINE_SCAN(scan_f64, double, 8u, ld_f64)

pcclResult_t ccoip_quant_compute_meta(pcclQuantizationAlgorithm_t algorithm,
                                      pcclDataType_t src_type, pcclDataType_t quant_type,
                                      const void *src, uint64_t count, ccoip_quant_meta *meta_out)
{
    if (meta_out == NULL) return pcclInvalidArgument;
    if (!ccoip_quant_supported(algorithm, src_type, quant_type)) return pcclInvalidArgument;
    if (count > 0 && src == NULL) return pcclInvalidArgument;
    if (!quant_count_ok(count, ccoip_dtype_size(src_type))) return pcclInvalidArgument;

    double mn = 0.0, mx = 0.0;
    if (count > 0) {
        const unsigned char *in = src;
        const size_t n = (size_t)count;
        bool finite;
        switch (src_type) {
        case pcclFloat16:
            finite = scan_f16(in, n, &mn, &mx);
            break;
        case pcclBFloat16:
            finite = scan_bf16(in, n, &mn, &mx);
            break;
        case pcclFloat:
            finite = scan_f32(in, n, &mn, &mx);
            break;
        default:
            finite = scan_f64(in, n, &mn, &mx);
            break;
        }
        if (!finite) return pcclInvalidArgument;
    }

    ccoip_quant_meta meta;
    memset(&meta, 0, sizeof meta);
    meta.algorithm = algorithm;
    meta.src_type = src_type;
    meta.quant_type = quant_type;
    if (algorithm == pcclQuantMinMax) {
        meta.min_value = mn;
        meta.max_value = mx;
        *meta_out = meta;
        return pcclSuccess;
    }

    const double q = (double)quant_code_span(quant_type);
    const double r = mx - mn;
    double scale;
    if (r == 0.0) {
        /* Constant chunk: min itself is the grid step, so it round-trips
         * exactly (min * (1 / |min|) rounds to ±1). */
        scale = fabs(mn) >= DBL_MIN ? fabs(mn) : 1.0;
    } else {
        /* An infinite range (pcclDouble only) is computed on halved values:
         * exact, and the same result the plain formula would give. */
        scale = r <= DBL_MAX ? r / q : ((mx * 0.5 - mn * 0.5) / q) * 2.0;
        const double mag = fabs(mn) > fabs(mx) ? fabs(mn) : fabs(mx);
        const double floor_rel = mag * QUANT_ZPS_REL;
        if (scale < floor_rel) scale = floor_rel;
        if (scale < DBL_MIN) scale = DBL_MIN;
    }
    const double inv = 1.0 / scale;
    /* |mn * inv| <= 2^44 (times 1 + 2^-52), so the conversion is exact. */
    const int64_t rounded = (int64_t)floor(mn * inv + 0.5);
    meta.scale = scale;
    meta.zero_point = (int64_t)quant_code_low(quant_type) - rounded;
    *meta_out = meta;
    return pcclSuccess;
}

/* ------------------------------------------------------------------------ */
/* Entry points                                                             */
/* ------------------------------------------------------------------------ */

pcclResult_t ccoip_quantize(const ccoip_quant_meta *meta, void *codes_out, const void *src,
                            uint64_t count)
{
    quant_params p;
    pcclResult_t rc = quant_prepare(meta, &p);
    if (rc != pcclSuccess) return rc;
    if (count == 0) return pcclSuccess;
    if (codes_out == NULL || src == NULL) return pcclInvalidArgument;
    if (!quant_count_ok(count, ccoip_dtype_size(meta->src_type))) return pcclInvalidArgument;
    quant_pick(quant_quantize_kernels, meta)(&p, codes_out, src, (size_t)count);
    return pcclSuccess;
}

pcclResult_t ccoip_dequantize(const ccoip_quant_meta *meta, void *dst, const void *codes,
                              uint64_t count)
{
    quant_params p;
    pcclResult_t rc = quant_prepare(meta, &p);
    if (rc != pcclSuccess) return rc;
    if (count == 0) return pcclSuccess;
    if (dst == NULL || codes == NULL) return pcclInvalidArgument;
    if (!quant_count_ok(count, ccoip_dtype_size(meta->src_type))) return pcclInvalidArgument;
    quant_pick(quant_dequantize_kernels, meta)(&p, dst, codes, (size_t)count);
    return pcclSuccess;
}

pcclResult_t ccoip_dequantize_reduce(const ccoip_quant_meta *meta, pcclRedOp_t op, void *dst,
                                     const void *codes, uint64_t count)
{
    quant_params p;
    pcclResult_t rc = quant_prepare(meta, &p);
    if (rc != pcclSuccess) return rc;
    /* The source types are floats: a bitwise op (BAND/BOR/BXOR) has no kernel for them and is
     * refused here, as is an unknown op. */
    if (!ccoip_reduce_supported(op, meta->src_type)) return pcclInvalidArgument;
    if (count == 0) return pcclSuccess;
    if (dst == NULL || codes == NULL) return pcclInvalidArgument;
    const uint32_t src_size = ccoip_dtype_size(meta->src_type);
    const uint32_t code_size = ccoip_dtype_size(meta->quant_type);
    if (!quant_count_ok(count, src_size)) return pcclInvalidArgument;
    const quant_kernel kernel = quant_pick(quant_dequantize_kernels, meta);
    /* Dequantize a block into the source type, then combine it with the
     * reduce kernel: the result is exactly what dequantize followed by
     * ccoip_reduce_inplace would give. */
    double block[QUANT_BLOCK]; /* QUANT_BLOCK elements of up to 8 bytes */
    unsigned char *out = dst;
    const unsigned char *in = codes;
    size_t left = (size_t)count;
    while (left > 0) {
        const size_t n = left < QUANT_BLOCK ? left : QUANT_BLOCK;
        kernel(&p, (unsigned char *)block, in, n);
        rc = ccoip_reduce_inplace(op, meta->src_type, out, block, n);
        if (rc != pcclSuccess) return rc;
        out += n * src_size;
        in += n * code_size;
        left -= n;
    }
    return pcclSuccess;
}
