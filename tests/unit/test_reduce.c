/*
 * test_reduce.c — core/reduce.c against an independent scalar reference, and
 * exact known results for the edge cases of ccoip_reduce.h.
 *
 * The reference reads and writes elements byte by byte (little-endian, as on
 * x86-64 and wasm32), widens integers to 64 bits and masks, and decides float
 * MIN/MAX with isnan/signbit and ordinary comparisons: a different shape from
 * the kernels, which use typed memcpy loads and order keys on the bits.
 */
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "ccoip_dtype.h"
#include "ccoip_reduce.h"
#include "ptest.h"

/* ------------------------------------------------------------------------ */
/* Helpers                                                                  */
/* ------------------------------------------------------------------------ */

#define TEST_SEED UINT64_C(0x5eed0f7ed0c0ffee)

/* splitmix64: a small integer PRNG, the same sequence everywhere. */
typedef struct rng {
    uint64_t state;
} rng;

static uint64_t rng_next(rng *r)
{
    uint64_t z = (r->state += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

static uint32_t rng_below(rng *r, uint32_t n)
{
    return (uint32_t)(rng_next(r) % n);
}

static const pcclDataType_t ALL_TYPES[] = {
    pcclUint8,  pcclInt8,  pcclInt16,   pcclUint16,   pcclUint32, pcclInt32,
    pcclUint64, pcclInt64, pcclFloat16, pcclBFloat16, pcclFloat,  pcclDouble,
};
#define NUM_TYPES (sizeof ALL_TYPES / sizeof ALL_TYPES[0])

static const pcclRedOp_t ALL_OPS[] = {pcclSum, pcclAvg,  pcclProd, pcclMax,
                                      pcclMin, pcclBand, pcclBor,  pcclBxor};
#define NUM_OPS (sizeof ALL_OPS / sizeof ALL_OPS[0])

static bool is_bitwise(pcclRedOp_t op)
{
    return op == pcclBand || op == pcclBor || op == pcclBxor;
}

static const char *op_name(pcclRedOp_t op)
{
    switch (op) {
    case pcclSum:
        return "sum";
    case pcclAvg:
        return "avg";
    case pcclProd:
        return "prod";
    case pcclMax:
        return "max";
    case pcclMin:
        return "min";
    case pcclBand:
        return "band";
    case pcclBor:
        return "bor";
    case pcclBxor:
        return "bxor";
    case pcclPremulSum:
        return "premul_sum";
    }
    return "?";
}

/* Element width in bytes, written out here rather than taken from dtype.c. */
static unsigned width_of(pcclDataType_t dt)
{
    switch (dt) {
    case pcclUint8:
    case pcclInt8:
        return 1;
    case pcclInt16:
    case pcclUint16:
    case pcclFloat16:
    case pcclBFloat16:
        return 2;
    case pcclUint32:
    case pcclInt32:
    case pcclFloat:
        return 4;
    case pcclUint64:
    case pcclInt64:
    case pcclDouble:
        return 8;
    }
    return 0;
}

static bool is_signed_int(pcclDataType_t dt)
{
    return dt == pcclInt8 || dt == pcclInt16 || dt == pcclInt32 || dt == pcclInt64;
}

static bool is_float(pcclDataType_t dt)
{
    return dt == pcclFloat16 || dt == pcclBFloat16 || dt == pcclFloat || dt == pcclDouble;
}

/* The bitwise ops have no float kernels (pcclInvalidArgument, test bitwise_refused_for_floats). */
static bool op_applies(pcclRedOp_t op, pcclDataType_t dt)
{
    return !(is_bitwise(op) && is_float(dt));
}

static uint64_t mask_of(unsigned w)
{
    return w == 8 ? UINT64_MAX : (UINT64_C(1) << (8u * w)) - 1u;
}

/* Little-endian byte access, one byte at a time. */
static uint64_t get_bits(const unsigned char *p, unsigned w)
{
    uint64_t v = 0;
    for (unsigned k = 0; k < w && k < 8u; k++)
        v |= (uint64_t)p[k] << (8u * k);
    return v;
}

static void put_bits(unsigned char *p, unsigned w, uint64_t v)
{
    for (unsigned k = 0; k < w && k < 8u; k++)
        p[k] = (unsigned char)(v >> (8u * k));
}

/* Two's complement value of the low w bytes of bits. */
static int64_t sign_extend(uint64_t bits, unsigned w)
{
    uint64_t m = mask_of(w);
    uint64_t top = UINT64_C(1) << (8u * w - 1u);
    bits &= m;
    if ((bits & top) == 0) return (int64_t)bits;
    return -(int64_t)(~bits & m) - 1;
}

static double float_value(pcclDataType_t dt, uint64_t bits)
{
    switch (dt) {
    case pcclFloat16:
        return (double)ccoip_f16_to_f32((uint16_t)bits);
    case pcclBFloat16:
        return (double)ccoip_bf16_to_f32((uint16_t)bits);
    case pcclFloat: {
        uint32_t u = (uint32_t)bits;
        float f;
        memcpy(&f, &u, sizeof f);
        return (double)f;
    }
    default: {
        double d;
        memcpy(&d, &bits, sizeof d);
        return d;
    }
    }
}

/* The canonical quiet NaN every generated NaN must become. */
static uint64_t canonical_nan(pcclDataType_t dt)
{
    switch (dt) {
    case pcclFloat16:
        return 0x7e00u;
    case pcclBFloat16:
        return 0x7fc0u;
    case pcclFloat:
        return 0x7fc00000u;
    default:
        return UINT64_C(0x7ff8000000000000);
    }
}

/* Encodes an arithmetic result x (already exact in binary32 for the half
 * types and binary32 itself) in dt; NaN becomes the canonical NaN. */
static uint64_t encode_result_f32(pcclDataType_t dt, float x)
{
    if (isnan(x)) return canonical_nan(dt);
    if (dt == pcclFloat16) return ccoip_f32_to_f16(x);
    if (dt == pcclBFloat16) return ccoip_f32_to_bf16(x);
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static uint64_t encode_result_f64(double x)
{
    if (isnan(x)) return canonical_nan(pcclDouble);
    uint64_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

/* The reference: the bits of a op b (AVG is SUM before finalization). */
static uint64_t ref_combine(pcclRedOp_t op, pcclDataType_t dt, uint64_t a, uint64_t b)
{
    unsigned w = width_of(dt);
    uint64_t m = mask_of(w);
    a &= m;
    b &= m;
    if (!is_float(dt)) {
        switch (op) {
        case pcclSum:
        case pcclAvg:
        case pcclPremulSum: /* floats only: no integer kernel */
            return (a + b) & m;
        case pcclProd:
            return (a * b) & m;
        case pcclMin:
        case pcclMax: {
            bool a_less = is_signed_int(dt) ? sign_extend(a, w) < sign_extend(b, w) : a < b;
            bool want_min = op == pcclMin;
            return a_less == want_min ? a : b;
        }
        case pcclBand:
            return a & b;
        case pcclBor:
            return a | b;
        case pcclBxor:
            return a ^ b;
        }
        return 0;
    }
    double x = float_value(dt, a);
    double y = float_value(dt, b);
    if (op == pcclMin || op == pcclMax) {
        /* Returns the chosen operand's own bits. */
        if (isnan(x)) return a;
        if (isnan(y)) return b;
        if (x != y) return ((x < y) == (op == pcclMin)) ? a : b;
        /* Equal: only ±0 can differ. MIN prefers a negative zero, MAX a
         * positive one. */
        bool a_neg = signbit(x) != 0;
        return (op == pcclMin) == a_neg ? a : b;
    }
    if (dt == pcclDouble) return encode_result_f64(op == pcclProd ? x * y : x + y);
    float fx = (float)x; /* exact: x came from a binary32 or narrower value */
    float fy = (float)y;
    return encode_result_f32(dt, op == pcclProd ? fx * fy : fx + fy);
}

/* The reference AVG finalization of one element. */
static uint64_t ref_avg(pcclDataType_t dt, uint64_t v, uint32_t n)
{
    unsigned w = width_of(dt);
    uint64_t m = mask_of(w);
    v &= m;
    if (is_signed_int(dt)) return (uint64_t)(sign_extend(v, w) / (int64_t)n) & m;
    if (!is_float(dt)) return v / n;
    if (dt == pcclDouble) return encode_result_f64(float_value(dt, v) / (double)n);
    return encode_result_f32(dt, (float)float_value(dt, v) / (float)n);
}

/* Values worth hitting often: extremes, zeros, NaNs, infinities, ties. */
static const uint64_t NICE_INT[] = {0, 1, 2, 3, UINT64_MAX, UINT64_MAX - 1};
static const uint16_t NICE_F16[] = {0x0000, 0x8000, 0x3c00, 0xbc00, 0x4000, 0x4200, 0x3800,
                                    0x7c00, 0xfc00, 0x7e00, 0x7c01, 0xfe01, 0x0001, 0x8003,
                                    0x7bff, 0xfbff, 0x6800, 0x6801, 0x0400};
static const uint16_t NICE_BF16[] = {0x0000, 0x8000, 0x3f80, 0xbf80, 0x4000, 0x4040, 0x3f00,
                                     0x7f80, 0xff80, 0x7fc0, 0x7f81, 0xffc1, 0x0001, 0x8003,
                                     0x7f7f, 0xff7f, 0x4380, 0x4381, 0x3b80};
static const uint32_t NICE_F32[] = {0x00000000, 0x80000000, 0x3f800000, 0xbf800000, 0x40000000,
                                    0x40400000, 0x3f000000, 0x7f800000, 0xff800000, 0x7fc00000,
                                    0x7f800001, 0xffc00123, 0x00000001, 0x80000003, 0x7f7fffff,
                                    0xff7fffff, 0x4b800000, 0x33800000, 0x00800000};
static const uint64_t NICE_F64[] = {0,
                                    UINT64_C(0x8000000000000000),
                                    UINT64_C(0x3ff0000000000000),
                                    UINT64_C(0xbff0000000000000),
                                    UINT64_C(0x4000000000000000),
                                    UINT64_C(0x7ff0000000000000),
                                    UINT64_C(0xfff0000000000000),
                                    UINT64_C(0x7ff8000000000000),
                                    UINT64_C(0x7ff0000000000001),
                                    UINT64_C(0xfff8000000000123),
                                    UINT64_C(1),
                                    UINT64_C(0x8000000000000003),
                                    UINT64_C(0x7fefffffffffffff),
                                    UINT64_C(0x4340000000000000),
                                    UINT64_C(0x3ca0000000000000)};

#define NICE(arr) (arr)[rng_below(r, (uint32_t)(sizeof(arr) / sizeof((arr)[0])))]

/* One random element of dt: half the time random bits, otherwise a nice
 * value (for integers also the signed extremes of the width). */
static uint64_t random_element(rng *r, pcclDataType_t dt)
{
    unsigned w = width_of(dt);
    uint64_t bits = rng_next(r);
    if ((bits >> 63) == 0) return bits & mask_of(w);
    switch (dt) {
    case pcclFloat16:
        return NICE(NICE_F16);
    case pcclBFloat16:
        return NICE(NICE_BF16);
    case pcclFloat:
        return NICE(NICE_F32);
    case pcclDouble:
        return NICE(NICE_F64);
    default:
        break;
    }
    uint64_t top = UINT64_C(1) << (8u * w - 1u);
    switch (rng_below(r, 3)) {
    case 0:
        return top; /* signed minimum */
    case 1:
        return top - 1u; /* signed maximum */
    default:
        return NICE(NICE_INT) & mask_of(w);
    }
}

/* ------------------------------------------------------------------------ */
/* Every (type, op) against the reference                                   */
/* ------------------------------------------------------------------------ */

#define MAX_COUNT 1001u
#define SLACK     16u
#define BUF_BYTES (MAX_COUNT * 8u + 2u * SLACK)

static unsigned char buf_x[BUF_BYTES], buf_y[BUF_BYTES], buf_z[BUF_BYTES];
static unsigned char snap_x[BUF_BYTES], snap_y[BUF_BYTES], snap_z[BUF_BYTES];

/* How the operands are laid out in one call. */
typedef enum mode {
    MODE_DISTINCT,     /* ccoip_reduce, dst, a, b three buffers */
    MODE_DST_IS_A,     /* ccoip_reduce, dst == a */
    MODE_DST_IS_B,     /* ccoip_reduce, dst == b */
    MODE_A_IS_B,       /* ccoip_reduce, a == b, dst apart */
    MODE_ALL_SAME,     /* ccoip_reduce, dst == a == b */
    MODE_INPLACE,      /* ccoip_reduce_inplace, dst and src apart */
    MODE_INPLACE_SELF, /* ccoip_reduce_inplace, dst == src */
    MODE_COUNT
} mode;

static const char *MODE_NAMES[MODE_COUNT] = {"distinct", "dst=a",   "dst=b",       "a=b",
                                             "all-same", "inplace", "inplace-self"};

/* Byte offsets of x, y, z: aligned, all odd, and mixed. */
static const unsigned OFFSETS[][3] = {{0, 0, 0}, {1, 1, 1}, {0, 1, 3}, {5, 2, 0}};
static const uint64_t COUNTS[] = {0, 1, 7, 64, MAX_COUNT};

/* Fills a whole test buffer with random bytes, eight per PRNG step. */
static void fill_random(rng *r, unsigned char *buf)
{
    for (size_t i = 0; i < BUF_BYTES; i += 8) {
        uint64_t v = rng_next(r);
        memcpy(buf + i, &v, 8);
    }
}

static void check_untouched(const unsigned char *buf, const unsigned char *snap, const char *name,
                            size_t skip_from, size_t skip_to, const char *what)
{
    for (size_t i = 0; i < BUF_BYTES; i++) {
        if (i >= skip_from && i < skip_to) continue;
        PT_ASSERT(buf[i] == snap[i],
                  "%s: buffer %s byte %zu changed (0x%02x -> 0x%02x), seed 0x%" PRIx64, what, name,
                  i, snap[i], buf[i], TEST_SEED);
    }
}

static void run_case(rng *r, pcclRedOp_t op, pcclDataType_t dt, mode md, uint64_t count,
                     const unsigned *off)
{
    unsigned w = width_of(dt);
    size_t bytes = (size_t)count * w;
    /* Random bytes everywhere (the guard areas), then elements at the
     * positions in use. */
    fill_random(r, buf_x);
    fill_random(r, buf_y);
    fill_random(r, buf_z);
    for (uint64_t i = 0; i < count; i++) {
        put_bits(buf_x + off[0] + i * w, w, random_element(r, dt));
        put_bits(buf_y + off[1] + i * w, w, random_element(r, dt));
    }
    memcpy(snap_x, buf_x, BUF_BYTES);
    memcpy(snap_y, buf_y, BUF_BYTES);
    memcpy(snap_z, buf_z, BUF_BYTES);

    unsigned char *x = buf_x + off[0], *y = buf_y + off[1], *z = buf_z + off[2];
    const unsigned char *sx = snap_x + off[0], *sy = snap_y + off[1];
    /* Operands (from the snapshot) and the buffer that receives the result. */
    const unsigned char *ea = sx, *eb = sy;
    unsigned char *dst_buf = buf_z;
    size_t dst_off = off[2];
    pcclResult_t res;
    switch (md) {
    case MODE_DISTINCT:
        res = ccoip_reduce(op, dt, z, x, y, count);
        break;
    case MODE_DST_IS_A:
        res = ccoip_reduce(op, dt, x, x, y, count);
        dst_buf = buf_x, dst_off = off[0];
        break;
    case MODE_DST_IS_B:
        res = ccoip_reduce(op, dt, y, x, y, count);
        dst_buf = buf_y, dst_off = off[1];
        break;
    case MODE_A_IS_B:
        res = ccoip_reduce(op, dt, z, x, x, count);
        eb = sx;
        break;
    case MODE_ALL_SAME:
        res = ccoip_reduce(op, dt, x, x, x, count);
        eb = sx;
        dst_buf = buf_x, dst_off = off[0];
        break;
    case MODE_INPLACE:
        res = ccoip_reduce_inplace(op, dt, x, y, count);
        dst_buf = buf_x, dst_off = off[0];
        break;
    default: /* MODE_INPLACE_SELF */
        res = ccoip_reduce_inplace(op, dt, x, x, count);
        eb = sx;
        dst_buf = buf_x, dst_off = off[0];
        break;
    }
#define WHAT_FMT  "%s %s %s count %" PRIu64 " offsets %u/%u/%u"
#define WHAT_ARGS ccoip_dtype_name(dt), op_name(op), MODE_NAMES[md], count, off[0], off[1], off[2]
    PT_ASSERT(res == pcclSuccess, WHAT_FMT ": result %d", WHAT_ARGS, (int)res);

    for (uint64_t i = 0; i < count; i++) {
        uint64_t want = ref_combine(op, dt, get_bits(ea + i * w, w), get_bits(eb + i * w, w));
        uint64_t got = get_bits(dst_buf + dst_off + i * w, w);
        PT_ASSERT(got == want,
                  WHAT_FMT ": element %" PRIu64 " of %" PRIx64 ", %" PRIx64 ": got 0x%" PRIx64
                           ", want 0x%" PRIx64 ", seed 0x%" PRIx64,
                  WHAT_ARGS, i, get_bits(ea + i * w, w), get_bits(eb + i * w, w), got, want,
                  TEST_SEED);
    }
    /* Nothing outside the destination range changed: inputs intact, no
     * stray writes before or after. */
    const char *names[3] = {"x", "y", "z"};
    unsigned char *bufs[3] = {buf_x, buf_y, buf_z};
    const unsigned char *snaps[3] = {snap_x, snap_y, snap_z};
    for (int k = 0; k < 3; k++) {
        bool is_dst = bufs[k] == dst_buf;
        check_untouched(bufs[k], snaps[k], names[k], is_dst ? dst_off : 0,
                        is_dst ? dst_off + bytes : 0, ccoip_dtype_name(dt));
    }
#undef WHAT_FMT
#undef WHAT_ARGS
}

static void run_all(pcclDataType_t dt)
{
    rng r = {TEST_SEED ^ (uint64_t)dt};
    for (size_t o = 0; o < NUM_OPS; o++) {
        if (!op_applies(ALL_OPS[o], dt)) continue;
        for (int md = 0; md < MODE_COUNT; md++) {
            for (size_t c = 0; c < sizeof COUNTS / sizeof COUNTS[0]; c++) {
                for (size_t f = 0; f < sizeof OFFSETS / sizeof OFFSETS[0]; f++) {
                    run_case(&r, ALL_OPS[o], dt, (mode)md, COUNTS[c], OFFSETS[f]);
                }
            }
        }
    }
}

PTEST(reduce, host_is_little_endian)
{
    uint32_t one = 1;
    unsigned char b[4];
    memcpy(b, &one, sizeof b);
    PT_ASSERT(b[0] == 1, "the reference reads elements little-endian");
}

PTEST(reduce, u8_matches_reference)
{
    PT_LOG("seed 0x%" PRIx64, TEST_SEED);
    run_all(pcclUint8);
}
PTEST(reduce, i8_matches_reference)
{
    run_all(pcclInt8);
}
PTEST(reduce, i16_matches_reference)
{
    run_all(pcclInt16);
}
PTEST(reduce, u16_matches_reference)
{
    run_all(pcclUint16);
}
PTEST(reduce, u32_matches_reference)
{
    run_all(pcclUint32);
}
PTEST(reduce, i32_matches_reference)
{
    run_all(pcclInt32);
}
PTEST(reduce, u64_matches_reference)
{
    run_all(pcclUint64);
}
PTEST(reduce, i64_matches_reference)
{
    run_all(pcclInt64);
}
PTEST(reduce, f16_matches_reference)
{
    run_all(pcclFloat16);
}
PTEST(reduce, bf16_matches_reference)
{
    run_all(pcclBFloat16);
}
PTEST(reduce, f32_matches_reference)
{
    run_all(pcclFloat);
}
PTEST(reduce, f64_matches_reference)
{
    run_all(pcclDouble);
}

PTEST(reduce, finalize_avg_matches_reference)
{
    static const uint32_t NS[] = {1, 2, 3, 7, 1000, UINT32_MAX};
    PT_LOG("seed 0x%" PRIx64, TEST_SEED);
    rng r = {TEST_SEED + 1u};
    for (size_t t = 0; t < NUM_TYPES; t++) {
        pcclDataType_t dt = ALL_TYPES[t];
        unsigned w = width_of(dt);
        for (size_t c = 0; c < sizeof COUNTS / sizeof COUNTS[0]; c++) {
            for (unsigned off = 0; off < 2; off++) {
                for (size_t k = 0; k < sizeof NS / sizeof NS[0]; k++) {
                    uint64_t count = COUNTS[c];
                    fill_random(&r, buf_x);
                    for (uint64_t i = 0; i < count; i++) {
                        put_bits(buf_x + off + i * w, w, random_element(&r, dt));
                    }
                    memcpy(snap_x, buf_x, BUF_BYTES);
                    pcclResult_t res = ccoip_reduce_finalize_avg(dt, buf_x + off, count, NS[k]);
                    PT_ASSERT(res == pcclSuccess, "%s finalize n %u: result %d",
                              ccoip_dtype_name(dt), NS[k], (int)res);
                    for (uint64_t i = 0; i < count; i++) {
                        uint64_t v = get_bits(snap_x + off + i * w, w);
                        uint64_t want = ref_avg(dt, v, NS[k]);
                        uint64_t got = get_bits(buf_x + off + i * w, w);
                        PT_ASSERT(got == want,
                                  "%s finalize 0x%" PRIx64 " / %u (count %" PRIu64
                                  ", offset %u): got 0x%" PRIx64 ", want 0x%" PRIx64
                                  ", seed 0x%" PRIx64,
                                  ccoip_dtype_name(dt), v, NS[k], count, off, got, want, TEST_SEED);
                    }
                    check_untouched(buf_x, snap_x, "x", off, off + (size_t)count * w,
                                    ccoip_dtype_name(dt));
                }
            }
        }
    }
}

/* ------------------------------------------------------------------------ */
/* Exact known results                                                      */
/* ------------------------------------------------------------------------ */

/* a op b for one element, through ccoip_reduce with a distinct dst, dst == a,
 * dst == b and ccoip_reduce_inplace; all four must agree. Returns the bits. */
static uint64_t one(pcclRedOp_t op, pcclDataType_t dt, uint64_t a, uint64_t b)
{
    unsigned w = width_of(dt);
    unsigned char ba[8], bb[8], bd[8];
    uint64_t got[4];
    put_bits(ba, w, a), put_bits(bb, w, b), memset(bd, 0xee, sizeof bd);
    PT_ASSERT(ccoip_reduce(op, dt, bd, ba, bb, 1) == pcclSuccess, "reduce %s %s",
              ccoip_dtype_name(dt), op_name(op));
    got[0] = get_bits(bd, w);
    put_bits(ba, w, a), put_bits(bb, w, b);
    PT_ASSERT(ccoip_reduce(op, dt, ba, ba, bb, 1) == pcclSuccess, "reduce dst=a");
    got[1] = get_bits(ba, w);
    put_bits(ba, w, a), put_bits(bb, w, b);
    PT_ASSERT(ccoip_reduce(op, dt, bb, ba, bb, 1) == pcclSuccess, "reduce dst=b");
    got[2] = get_bits(bb, w);
    put_bits(ba, w, a), put_bits(bb, w, b);
    PT_ASSERT(ccoip_reduce_inplace(op, dt, ba, bb, 1) == pcclSuccess, "reduce_inplace");
    got[3] = get_bits(ba, w);
    for (int k = 1; k < 4; k++) {
        PT_ASSERT(got[k] == got[0],
                  "%s %s 0x%" PRIx64 ", 0x%" PRIx64 ": variant %d gave 0x%" PRIx64
                  ", distinct dst 0x%" PRIx64,
                  ccoip_dtype_name(dt), op_name(op), a, b, k, got[k], got[0]);
    }
    return got[0];
}

static uint64_t avg1(pcclDataType_t dt, uint64_t v, uint32_t n)
{
    unsigned char b[8];
    put_bits(b, width_of(dt), v);
    PT_ASSERT(ccoip_reduce_finalize_avg(dt, b, 1, n) == pcclSuccess, "finalize %s n %u",
              ccoip_dtype_name(dt), n);
    return get_bits(b, width_of(dt));
}

#define EXPECT_ONE(op, dt, a, b, want)                                                             \
    do {                                                                                           \
        uint64_t got_ = one(op, dt, (uint64_t)(a), (uint64_t)(b));                                 \
        uint64_t want_ = (uint64_t)(want)&mask_of(width_of(dt));                                   \
        PT_EXPECT(got_ == want_,                                                                   \
                  "%s %s(0x%" PRIx64 ", 0x%" PRIx64 ") = 0x%" PRIx64 ", want 0x%" PRIx64,          \
                  ccoip_dtype_name(dt), op_name(op), (uint64_t)(a), (uint64_t)(b), got_, want_);   \
    } while (0)

#define EXPECT_AVG(dt, v, n, want)                                                                 \
    do {                                                                                           \
        uint64_t got_ = avg1(dt, (uint64_t)(v)&mask_of(width_of(dt)), n);                          \
        uint64_t want_ = (uint64_t)(want)&mask_of(width_of(dt));                                   \
        PT_EXPECT(got_ == want_, "%s avg(0x%" PRIx64 " / %u) = 0x%" PRIx64 ", want 0x%" PRIx64,    \
                  ccoip_dtype_name(dt), (uint64_t)(v), (unsigned)(n), got_, want_);                \
    } while (0)

PTEST(reduce, integer_sum_wraps)
{
    EXPECT_ONE(pcclSum, pcclInt8, 0x7f, 0x01, 0x80); /* INT8_MAX + 1 = INT8_MIN */
    EXPECT_ONE(pcclSum, pcclInt8, 0x80, 0xff, 0x7f); /* INT8_MIN + -1 = INT8_MAX */
    EXPECT_ONE(pcclSum, pcclUint8, 0xff, 0x01, 0x00);
    EXPECT_ONE(pcclSum, pcclInt16, 0x7fff, 0x0001, 0x8000);
    EXPECT_ONE(pcclSum, pcclUint16, 0xffff, 0x0001, 0x0000);
    EXPECT_ONE(pcclSum, pcclInt32, INT32_MAX, 1, 0x80000000u);
    EXPECT_ONE(pcclSum, pcclUint32, UINT32_MAX, 2, 1);
    EXPECT_ONE(pcclSum, pcclInt64, INT64_MAX, 1, UINT64_C(0x8000000000000000));
    EXPECT_ONE(pcclSum, pcclUint64, UINT64_MAX, 1, 0);
    /* AVG accumulates exactly like SUM. */
    EXPECT_ONE(pcclAvg, pcclInt8, 0x7f, 0x01, 0x80);
    EXPECT_ONE(pcclAvg, pcclUint64, UINT64_MAX, 3, 2);
}

PTEST(reduce, integer_prod_wraps)
{
    EXPECT_ONE(pcclProd, pcclInt8, 0x80, 0xff, 0x80); /* INT8_MIN * -1 = INT8_MIN */
    EXPECT_ONE(pcclProd, pcclUint8, 0xff, 0xff, 0x01);
    EXPECT_ONE(pcclProd, pcclUint8, 0x10, 0x10, 0x00);
    EXPECT_ONE(pcclProd, pcclInt16, 0x8000, 0xffff, 0x8000);
    EXPECT_ONE(pcclProd, pcclUint16, 0xffff, 0xffff, 0x0001); /* overflows int if promoted */
    EXPECT_ONE(pcclProd, pcclUint16, 0x0100, 0x0100, 0x0000);
    EXPECT_ONE(pcclProd, pcclInt16, 0xfffd, 0x0007, 0xffeb); /* -3 * 7 = -21 */
    EXPECT_ONE(pcclProd, pcclInt32, 0x80000000u, 0xffffffffu, 0x80000000u);
    EXPECT_ONE(pcclProd, pcclUint32, UINT32_MAX, UINT32_MAX, 1);
    EXPECT_ONE(pcclProd, pcclInt32, 0x10000, 0x10000, 0);
    EXPECT_ONE(pcclProd, pcclInt64, UINT64_C(0x8000000000000000), UINT64_MAX,
               UINT64_C(0x8000000000000000)); /* INT64_MIN * -1 = INT64_MIN */
    EXPECT_ONE(pcclProd, pcclUint64, UINT64_MAX, UINT64_MAX, 1);
    EXPECT_ONE(pcclProd, pcclUint64, UINT64_C(0x100000000), UINT64_C(0x100000000), 0);
}

PTEST(reduce, integer_min_max_signedness)
{
    EXPECT_ONE(pcclMin, pcclInt8, 0xff, 0x01, 0xff); /* -1 < 1 */
    EXPECT_ONE(pcclMin, pcclUint8, 0xff, 0x01, 0x01);
    EXPECT_ONE(pcclMax, pcclInt8, 0x80, 0x7f, 0x7f);
    EXPECT_ONE(pcclMax, pcclUint8, 0x80, 0x7f, 0x80);
    EXPECT_ONE(pcclMin, pcclInt16, 0x7fff, 0x8000, 0x8000);
    EXPECT_ONE(pcclMin, pcclUint16, 0x7fff, 0x8000, 0x7fff);
    EXPECT_ONE(pcclMax, pcclInt32, 0xffffffffu, 0, 0);
    EXPECT_ONE(pcclMax, pcclUint32, 0xffffffffu, 0, 0xffffffffu);
    EXPECT_ONE(pcclMin, pcclInt64, 0, UINT64_C(0x8000000000000000), UINT64_C(0x8000000000000000));
    EXPECT_ONE(pcclMin, pcclUint64, 0, UINT64_C(0x8000000000000000), 0);
    EXPECT_ONE(pcclMax, pcclInt64, UINT64_MAX, 5, 5);
    EXPECT_ONE(pcclMax, pcclUint64, UINT64_MAX, 5, UINT64_MAX);
}

PTEST(reduce, integer_avg_truncates_toward_zero)
{
    /* Two peers contribute -3 and -4: the sum -7 over n = 2 is -3 (not -4). */
    unsigned char s[4];
    int32_t m3 = -3, m4 = -4, out;
    memcpy(s, &m3, 4);
    unsigned char t[4];
    memcpy(t, &m4, 4);
    PT_ASSERT(ccoip_reduce_inplace(pcclAvg, pcclInt32, s, t, 1) == pcclSuccess, "avg accumulate");
    PT_ASSERT(ccoip_reduce_finalize_avg(pcclInt32, s, 1, 2) == pcclSuccess, "finalize");
    memcpy(&out, s, 4);
    PT_ASSERT(out == -3, "-7 / 2 gave %d, want -3", (int)out);

    EXPECT_AVG(pcclInt8, -7, 2, -3);
    EXPECT_AVG(pcclInt8, 7, 2, 3);
    EXPECT_AVG(pcclInt8, -128, 3, -42);
    EXPECT_AVG(pcclInt8, -128, 1, -128);
    EXPECT_AVG(pcclInt16, -7, 2, -3);
    EXPECT_AVG(pcclInt16, -32768, 65536u, 0);
    EXPECT_AVG(pcclInt32, -7, 2, -3);
    EXPECT_AVG(pcclInt32, -7, UINT32_MAX, 0);
    EXPECT_AVG(pcclInt32, INT32_MIN, UINT32_MAX, 0);
    EXPECT_AVG(pcclInt32, INT32_MIN, 2, -1073741824);
    EXPECT_AVG(pcclInt64, -7, 2, -3);
    EXPECT_AVG(pcclInt64, INT64_MIN, 1, INT64_MIN);
    EXPECT_AVG(pcclInt64, INT64_MIN, 2, INT64_C(-4611686018427387904));
    EXPECT_AVG(pcclInt64, INT64_MIN, UINT32_MAX, INT64_C(-2147483648)); /* -2^31 - 0.5 */
    EXPECT_AVG(pcclUint8, 7, 2, 3);
    EXPECT_AVG(pcclUint8, 255, 2, 127);
    EXPECT_AVG(pcclUint16, 65535, 65536u, 0);
    EXPECT_AVG(pcclUint32, UINT32_MAX, UINT32_MAX, 1);
    EXPECT_AVG(pcclUint64, UINT64_MAX, 2, UINT64_C(0x7fffffffffffffff));
    /* The wrapped sum is read as the element type: 100 + 100 wraps to -56
     * in int8, so the average is -28, and 200 + 100 wraps to 44 in uint8. */
    EXPECT_ONE(pcclAvg, pcclInt8, 100, 100, 0xc8);
    EXPECT_AVG(pcclInt8, 0xc8, 2, -28);
    EXPECT_ONE(pcclAvg, pcclUint8, 200, 100, 44);
    EXPECT_AVG(pcclUint8, 44, 2, 22);
}

PTEST(reduce, float_avg)
{
    EXPECT_AVG(pcclFloat, 0x40e00000u, 2, 0x40600000u); /* 7 / 2 = 3.5 */
    EXPECT_AVG(pcclFloat, 0x3f800000u, 3, 0x3eaaaaabu); /* 1 / 3 rounded to nearest */
    EXPECT_AVG(pcclFloat, 0x80000000u, 2, 0x80000000u); /* -0 / 2 = -0 */
    EXPECT_AVG(pcclFloat, 0x7f800000u, 2, 0x7f800000u); /* inf / 2 = inf */
    EXPECT_AVG(pcclFloat, 0xffc00123u, 2, 0x7fc00000u); /* NaN / 2: canonical NaN */
    EXPECT_AVG(pcclFloat, 0x00000001u, 2, 0);           /* half the smallest subnormal: tie to 0 */
    EXPECT_AVG(pcclFloat, 0x00000003u, 2, 0x00000002u); /* 1.5 ulp: tie to even 2 */
    EXPECT_AVG(pcclDouble, UINT64_C(0x3ff0000000000000), 3, UINT64_C(0x3fd5555555555555));
    EXPECT_AVG(pcclDouble, UINT64_C(0xfff0000000000001), 3, UINT64_C(0x7ff8000000000000));
    EXPECT_AVG(pcclFloat16, 0x4200, 2, 0x3e00);  /* 3 / 2 = 1.5 */
    EXPECT_AVG(pcclFloat16, 0xc700, 2, 0xc300);  /* -7 / 2 = -3.5 */
    EXPECT_AVG(pcclFloat16, 0x3c00, 3, 0x3555);  /* 1 / 3 */
    EXPECT_AVG(pcclFloat16, 0x0001, 2, 0x0000);  /* 2^-25: tie to even 0 */
    EXPECT_AVG(pcclFloat16, 0x0003, 2, 0x0002);  /* 1.5 × 2^-24: tie to even 2 */
    EXPECT_AVG(pcclFloat16, 0xfe01, 2, 0x7e00);  /* NaN: canonical */
    EXPECT_AVG(pcclBFloat16, 0x3f80, 3, 0x3eab); /* 1 / 3 */
    EXPECT_AVG(pcclBFloat16, 0x4040, 2, 0x3fc0); /* 3 / 2 = 1.5 */
    EXPECT_AVG(pcclBFloat16, 0xff81, 2, 0x7fc0); /* NaN: canonical */
}

PTEST(reduce, half_precision_exact)
{
    /* fp16 */
    EXPECT_ONE(pcclSum, pcclFloat16, 0x3c00, 0x4000, 0x4200);  /* 1 + 2 = 3 */
    EXPECT_ONE(pcclProd, pcclFloat16, 0x4000, 0x4200, 0x4600); /* 2 * 3 = 6 */
    EXPECT_ONE(pcclSum, pcclFloat16, 0xbc00, 0x3c00, 0x0000);  /* -1 + 1 = +0 */
    EXPECT_ONE(pcclSum, pcclFloat16, 0x6800, 0x3c00, 0x6800);  /* 2048 + 1: tie to even 2048 */
    EXPECT_ONE(pcclSum, pcclFloat16, 0x6801, 0x3c00, 0x6802);  /* 2050 + 1: tie to even 2052 */
    EXPECT_ONE(pcclSum, pcclFloat16, 0x7bff, 0x4800, 0x7bff);  /* 65504 + 8 rounds down */
    EXPECT_ONE(pcclSum, pcclFloat16, 0x7bff, 0x4c00, 0x7c00);  /* 65504 + 16: tie, to inf */
    EXPECT_ONE(pcclSum, pcclFloat16, 0x7bff, 0x7bff, 0x7c00);  /* overflow to inf */
    EXPECT_ONE(pcclSum, pcclFloat16, 0x0001, 0x0001, 0x0002);  /* subnormals add exactly */
    EXPECT_ONE(pcclProd, pcclFloat16, 0x0001, 0x3800, 0x0000); /* 2^-25: tie to even 0 */
    EXPECT_ONE(pcclProd, pcclFloat16, 0x0003, 0x3800, 0x0002); /* 1.5 × 2^-24: tie to 2 */
    EXPECT_ONE(pcclProd, pcclFloat16, 0x0001, 0xb800, 0x8000); /* underflow keeps the sign */
    EXPECT_ONE(pcclProd, pcclFloat16, 0x5bff, 0x5bff, 0x7bfe); /* 255.875^2 = 65472.02 */
    EXPECT_ONE(pcclProd, pcclFloat16, 0x5c00, 0x5c00, 0x7c00); /* 256^2 overflows to inf */
    /* bf16 */
    EXPECT_ONE(pcclSum, pcclBFloat16, 0x3f80, 0x4000, 0x4040);  /* 1 + 2 = 3 */
    EXPECT_ONE(pcclProd, pcclBFloat16, 0x4000, 0x4040, 0x40c0); /* 2 * 3 = 6 */
    EXPECT_ONE(pcclSum, pcclBFloat16, 0x4380, 0x3f80, 0x4380);  /* 256 + 1: tie to even 256 */
    EXPECT_ONE(pcclSum, pcclBFloat16, 0x4381, 0x3f80, 0x4382);  /* 258 + 1: tie to even 260 */
    EXPECT_ONE(pcclSum, pcclBFloat16, 0x3f80, 0x3b80, 0x3f80);  /* 1 + 2^-8: tie to 1 */
    EXPECT_ONE(pcclSum, pcclBFloat16, 0x3f81, 0x3b80, 0x3f82);  /* odd: tie rounds up */
    EXPECT_ONE(pcclSum, pcclBFloat16, 0x7f7f, 0x7f7f, 0x7f80);  /* overflow to inf */
    /* binary32 for comparison: 2^24 + 1 ties to even. */
    EXPECT_ONE(pcclSum, pcclFloat, 0x4b800000u, 0x3f800000u, 0x4b800000u);
    EXPECT_ONE(pcclSum, pcclFloat, 0x4b800001u, 0x3f800000u, 0x4b800002u);
}

/* NaN bits per format: a positive quiet NaN with payload 1, a negative one
 * with payload 2, a signalling one. */
typedef struct float_fmt {
    pcclDataType_t dt;
    uint64_t nan_a, nan_b, snan, one, neg_zero, inf, neg_inf, max_finite, canon;
} float_fmt;

static const float_fmt FMTS[] = {
    {pcclFloat16, 0x7e01, 0xfe02, 0x7c01, 0x3c00, 0x8000, 0x7c00, 0xfc00, 0x7bff, 0x7e00},
    {pcclBFloat16, 0x7fc1, 0xffc2, 0x7f81, 0x3f80, 0x8000, 0x7f80, 0xff80, 0x7f7f, 0x7fc0},
    {pcclFloat, 0x7fc00001u, 0xffc00002u, 0x7f800001u, 0x3f800000u, 0x80000000u, 0x7f800000u,
     0xff800000u, 0x7f7fffffu, 0x7fc00000u},
    {pcclDouble, UINT64_C(0x7ff8000000000001), UINT64_C(0xfff8000000000002),
     UINT64_C(0x7ff0000000000001), UINT64_C(0x3ff0000000000000), UINT64_C(0x8000000000000000),
     UINT64_C(0x7ff0000000000000), UINT64_C(0xfff0000000000000), UINT64_C(0x7fefffffffffffff),
     UINT64_C(0x7ff8000000000000)},
};

PTEST(reduce, min_max_propagate_nan)
{
    for (size_t i = 0; i < sizeof FMTS / sizeof FMTS[0]; i++) {
        const float_fmt *f = &FMTS[i];
        for (int k = 0; k < 2; k++) {
            pcclRedOp_t op = k == 0 ? pcclMin : pcclMax;
            /* a NaN: a, bit for bit (also a signalling NaN, not quieted). */
            EXPECT_ONE(op, f->dt, f->nan_a, f->one, f->nan_a);
            EXPECT_ONE(op, f->dt, f->snan, f->one, f->snan);
            EXPECT_ONE(op, f->dt, f->nan_b, f->neg_inf, f->nan_b);
            /* only b NaN: b. */
            EXPECT_ONE(op, f->dt, f->one, f->nan_b, f->nan_b);
            EXPECT_ONE(op, f->dt, f->inf, f->nan_a, f->nan_a);
            EXPECT_ONE(op, f->dt, f->neg_zero, f->snan, f->snan);
            /* both NaN: a. */
            EXPECT_ONE(op, f->dt, f->nan_a, f->nan_b, f->nan_a);
            EXPECT_ONE(op, f->dt, f->nan_b, f->nan_a, f->nan_b);
        }
    }
}

PTEST(reduce, signed_zero)
{
    for (size_t i = 0; i < sizeof FMTS / sizeof FMTS[0]; i++) {
        const float_fmt *f = &FMTS[i];
        uint64_t nz = f->neg_zero;
        EXPECT_ONE(pcclMin, f->dt, nz, 0, nz);
        EXPECT_ONE(pcclMin, f->dt, 0, nz, nz);
        EXPECT_ONE(pcclMax, f->dt, nz, 0, 0);
        EXPECT_ONE(pcclMax, f->dt, 0, nz, 0);
        EXPECT_ONE(pcclMin, f->dt, nz, nz, nz);
        EXPECT_ONE(pcclMax, f->dt, nz, nz, nz);
        EXPECT_ONE(pcclSum, f->dt, nz, nz, nz); /* -0 + -0 = -0 */
        EXPECT_ONE(pcclSum, f->dt, nz, 0, 0);   /* -0 + +0 = +0 */
        EXPECT_ONE(pcclProd, f->dt, nz, f->one, nz);
        EXPECT_ONE(pcclProd, f->dt, nz, nz, 0);
        /* -0 is smaller than +0 but not than a negative number. */
        EXPECT_ONE(pcclMin, f->dt, nz, f->one | nz, f->one | nz);
        EXPECT_ONE(pcclMax, f->dt, f->one | nz, nz, nz);
    }
}

PTEST(reduce, infinities)
{
    for (size_t i = 0; i < sizeof FMTS / sizeof FMTS[0]; i++) {
        const float_fmt *f = &FMTS[i];
        EXPECT_ONE(pcclSum, f->dt, f->inf, f->one, f->inf);
        EXPECT_ONE(pcclSum, f->dt, f->neg_inf, f->max_finite, f->neg_inf);
        EXPECT_ONE(pcclSum, f->dt, f->inf, f->neg_inf, f->canon); /* inf - inf: canonical NaN */
        EXPECT_ONE(pcclSum, f->dt, f->neg_inf, f->inf, f->canon);
        EXPECT_ONE(pcclSum, f->dt, f->max_finite, f->max_finite, f->inf);
        EXPECT_ONE(pcclProd, f->dt, f->inf, 0, f->canon); /* inf * 0 */
        EXPECT_ONE(pcclProd, f->dt, f->neg_inf, f->one | f->neg_zero, f->inf);
        EXPECT_ONE(pcclMax, f->dt, f->inf, f->max_finite, f->inf);
        EXPECT_ONE(pcclMax, f->dt, f->max_finite, f->inf, f->inf);
        EXPECT_ONE(pcclMin, f->dt, f->neg_inf, f->max_finite | f->neg_zero, f->neg_inf);
        EXPECT_ONE(pcclMin, f->dt, f->max_finite | f->neg_zero, f->neg_inf, f->neg_inf);
        EXPECT_ONE(pcclMin, f->dt, f->neg_inf, f->inf, f->neg_inf);
        EXPECT_ONE(pcclMax, f->dt, f->neg_inf, f->inf, f->inf);
    }
}

PTEST(reduce, arithmetic_nan_is_canonical)
{
    for (size_t i = 0; i < sizeof FMTS / sizeof FMTS[0]; i++) {
        const float_fmt *f = &FMTS[i];
        for (int k = 0; k < 3; k++) {
            pcclRedOp_t op = k == 0 ? pcclSum : k == 1 ? pcclAvg : pcclProd;
            EXPECT_ONE(op, f->dt, f->nan_b, f->one, f->canon);
            EXPECT_ONE(op, f->dt, f->one, f->nan_b, f->canon);
            EXPECT_ONE(op, f->dt, f->nan_a, f->nan_b, f->canon);
            EXPECT_ONE(op, f->dt, f->nan_b, f->nan_a, f->canon);
            EXPECT_ONE(op, f->dt, f->snan, f->one, f->canon);
        }
    }
}

/* ------------------------------------------------------------------------ */
/* Arguments                                                                */
/* ------------------------------------------------------------------------ */

/* Buffers for calls that must fail: dst patterned, before its copy. */
static void fill_invalid_args(unsigned char dst[64], unsigned char a[64], unsigned char b[64],
                              unsigned char before[64])
{
    for (int i = 0; i < 64; i++) {
        dst[i] = (unsigned char)(0x5a ^ i);
        a[i] = (unsigned char)(i + 1);
        b[i] = (unsigned char)(2 * i + 1);
    }
    memcpy(before, dst, 64);
}

PTEST(reduce, invalid_arguments_write_nothing)
{
    const pcclRedOp_t bad_ops[] = {(pcclRedOp_t)9, (pcclRedOp_t)255, (pcclRedOp_t)-1};
    const pcclDataType_t bad_types[] = {(pcclDataType_t)12, (pcclDataType_t)100,
                                        (pcclDataType_t)-1};
    unsigned char dst[64], a[64], b[64], before[64];
    fill_invalid_args(dst, a, b, before);
    for (size_t i = 0; i < sizeof bad_ops / sizeof bad_ops[0]; i++) {
        for (size_t t = 0; t < NUM_TYPES; t++) {
            pcclDataType_t dt = ALL_TYPES[t];
            PT_EXPECT(ccoip_reduce(bad_ops[i], dt, dst, a, b, 8) == pcclInvalidArgument,
                      "op %d dt %s", (int)bad_ops[i], ccoip_dtype_name(dt));
            PT_EXPECT(ccoip_reduce_inplace(bad_ops[i], dt, dst, a, 8) == pcclInvalidArgument,
                      "inplace op %d dt %s", (int)bad_ops[i], ccoip_dtype_name(dt));
            PT_EXPECT(ccoip_reduce(bad_ops[i], dt, dst, a, b, 0) == pcclInvalidArgument,
                      "op %d count 0", (int)bad_ops[i]);
        }
    }
    for (size_t i = 0; i < sizeof bad_types / sizeof bad_types[0]; i++) {
        for (size_t o = 0; o < NUM_OPS; o++) {
            PT_EXPECT(ccoip_reduce(ALL_OPS[o], bad_types[i], dst, a, b, 8) == pcclInvalidArgument,
                      "dt %d op %s", (int)bad_types[i], op_name(ALL_OPS[o]));
            PT_EXPECT(ccoip_reduce_inplace(ALL_OPS[o], bad_types[i], dst, a, 8) ==
                          pcclInvalidArgument,
                      "inplace dt %d op %s", (int)bad_types[i], op_name(ALL_OPS[o]));
        }
        PT_EXPECT(ccoip_reduce_finalize_avg(bad_types[i], dst, 8, 2) == pcclInvalidArgument,
                  "finalize dt %d", (int)bad_types[i]);
    }
    for (size_t t = 0; t < NUM_TYPES; t++) {
        pcclDataType_t dt = ALL_TYPES[t];
        PT_EXPECT(ccoip_reduce_finalize_avg(dt, dst, 8, 0) == pcclInvalidArgument,
                  "finalize %s n 0", ccoip_dtype_name(dt));
        PT_EXPECT(ccoip_reduce_finalize_avg(dt, NULL, 0, 0) == pcclInvalidArgument,
                  "finalize %s count 0 n 0", ccoip_dtype_name(dt));
    }
    PT_ASSERT(memcmp(dst, before, sizeof dst) == 0, "an invalid call wrote into dst");
}

/* BAND/BOR/BXOR: exact bits for every integer type, through the four paths of one() (distinct
 * dst, dst == a, dst == b, reduce_inplace), and dst == a == b (x & x = x | x = x, x ^ x = 0)
 * through ccoip_reduce and reduce_inplace. Signed types combine the same bits as unsigned. */
PTEST(reduce, bitwise_exact_every_integer_type)
{
    static const pcclDataType_t INTS[] = {pcclUint8,  pcclInt8,  pcclInt16,  pcclUint16,
                                          pcclUint32, pcclInt32, pcclUint64, pcclInt64};
    const uint64_t a = UINT64_C(0xf0f0cc33aa55ff00), b = UINT64_C(0xff00aa5533cc0ff0);
    for (size_t t = 0; t < sizeof INTS / sizeof INTS[0]; t++) {
        const pcclDataType_t dt = INTS[t];
        const unsigned w = width_of(dt);
        EXPECT_ONE(pcclBand, dt, a, b, a & b);
        EXPECT_ONE(pcclBor, dt, a, b, a | b);
        EXPECT_ONE(pcclBxor, dt, a, b, a ^ b);
        /* -1 is every bit set: the identity of BAND, the absorbing value of BOR. */
        EXPECT_ONE(pcclBand, dt, UINT64_MAX, b, b);
        EXPECT_ONE(pcclBor, dt, UINT64_MAX, b, UINT64_MAX);
        EXPECT_ONE(pcclBxor, dt, UINT64_MAX, b, ~b);
        EXPECT_ONE(pcclBand, dt, 0, b, 0);
        EXPECT_ONE(pcclBor, dt, 0, b, b);
        EXPECT_ONE(pcclBxor, dt, 0, b, b);
        /* Only the sign bit (INT_MIN of the signed type) against 1. */
        const uint64_t top = UINT64_C(1) << (8u * w - 1u);
        EXPECT_ONE(pcclBor, dt, top, 1, top | 1u);
        EXPECT_ONE(pcclBand, dt, top | 1u, top, top);
        EXPECT_ONE(pcclBxor, dt, top | 1u, top, 1);
        /* Self-aliasing, over more elements than one stack chunk of reduce_self. */
        static unsigned char buf[3000 * 8];
        const uint64_t count = 3000;
        const pcclRedOp_t ops[3] = {pcclBand, pcclBor, pcclBxor};
        for (int k = 0; k < 3; k++) {
            for (int inplace = 0; inplace < 2; inplace++) {
                for (uint64_t i = 0; i < count; i++)
                    put_bits(buf + i * w, w, a * (i + 1u));
                const pcclResult_t r = inplace ? ccoip_reduce_inplace(ops[k], dt, buf, buf, count)
                                               : ccoip_reduce(ops[k], dt, buf, buf, buf, count);
                PT_ASSERT(r == pcclSuccess, "%s %s self", ccoip_dtype_name(dt), op_name(ops[k]));
                for (uint64_t i = 0; i < count; i++) {
                    const uint64_t want = ops[k] == pcclBxor ? 0 : (a * (i + 1u)) & mask_of(w);
                    PT_ASSERT(get_bits(buf + i * w, w) == want,
                              "%s %s self (inplace %d) element %" PRIu64, ccoip_dtype_name(dt),
                              op_name(ops[k]), inplace, i);
                }
            }
        }
        PT_EXPECT(ccoip_reduce_supported(pcclBand, dt) && ccoip_reduce_supported(pcclBor, dt) &&
                      ccoip_reduce_supported(pcclBxor, dt),
                  "%s supports the bitwise ops", ccoip_dtype_name(dt));
    }
}

/* Three contributions, as an all-reduce combines them: every order gives the same bits. */
PTEST(reduce, bitwise_three_contributions_any_order)
{
    const int32_t x[3] = {-1 ^ 0x10, 0x7f0f0f0f, (int32_t)0x8000ff01};
    const int32_t want[3] = {x[0] & x[1] & x[2], x[0] | x[1] | x[2], x[0] ^ x[1] ^ x[2]};
    const pcclRedOp_t ops[3] = {pcclBand, pcclBor, pcclBxor};
    static const int perm[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2},
                                   {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
    for (int k = 0; k < 3; k++) {
        for (int p = 0; p < 6; p++) {
            int32_t acc = x[perm[p][0]];
            PT_ASSERT(ccoip_reduce_inplace(ops[k], pcclInt32, &acc, &x[perm[p][1]], 1) ==
                          pcclSuccess,
                      "step 1");
            PT_ASSERT(ccoip_reduce(ops[k], pcclInt32, &acc, &x[perm[p][2]], &acc, 1) == pcclSuccess,
                      "step 2");
            PT_EXPECT(acc == want[k], "%s order %d: 0x%08x, want 0x%08x", op_name(ops[k]), p,
                      (unsigned)acc, (unsigned)want[k]);
        }
    }
}

/* The bitwise ops on a float type: pcclInvalidArgument from every entry point, count 0
 * included, and nothing written. */
PTEST(reduce, bitwise_refused_for_floats)
{
    static const pcclDataType_t FLOATS[] = {pcclFloat16, pcclBFloat16, pcclFloat, pcclDouble};
    const pcclRedOp_t ops[3] = {pcclBand, pcclBor, pcclBxor};
    unsigned char dst[64], a[64], b[64], before[64];
    fill_invalid_args(dst, a, b, before);
    for (size_t t = 0; t < sizeof FLOATS / sizeof FLOATS[0]; t++) {
        const pcclDataType_t dt = FLOATS[t];
        for (int k = 0; k < 3; k++) {
            const char *dn = ccoip_dtype_name(dt), *on = op_name(ops[k]);
            PT_EXPECT(!ccoip_reduce_supported(ops[k], dt), "%s %s supported", dn, on);
            PT_EXPECT(ccoip_reduce(ops[k], dt, dst, a, b, 4) == pcclInvalidArgument, "%s %s", dn,
                      on);
            PT_EXPECT(ccoip_reduce(ops[k], dt, dst, dst, b, 4) == pcclInvalidArgument,
                      "%s %s dst=a", dn, on);
            PT_EXPECT(ccoip_reduce(ops[k], dt, dst, a, dst, 4) == pcclInvalidArgument,
                      "%s %s dst=b", dn, on);
            PT_EXPECT(ccoip_reduce(ops[k], dt, dst, dst, dst, 4) == pcclInvalidArgument,
                      "%s %s dst=a=b", dn, on);
            PT_EXPECT(ccoip_reduce_inplace(ops[k], dt, dst, a, 4) == pcclInvalidArgument,
                      "%s %s inplace", dn, on);
            PT_EXPECT(ccoip_reduce_inplace(ops[k], dt, dst, dst, 4) == pcclInvalidArgument,
                      "%s %s inplace self", dn, on);
            PT_EXPECT(ccoip_reduce(ops[k], dt, NULL, NULL, NULL, 0) == pcclInvalidArgument,
                      "%s %s count 0", dn, on);
            PT_EXPECT(ccoip_reduce_gather(ops[k], dt, dst, a, b, 1, 2, 2) == pcclInvalidArgument,
                      "%s %s gather", dn, on);
        }
    }
    PT_ASSERT(memcmp(dst, before, sizeof dst) == 0, "a refused call wrote into dst");
}

PTEST(reduce, count_zero_accepts_null)
{
    for (size_t t = 0; t < NUM_TYPES; t++) {
        pcclDataType_t dt = ALL_TYPES[t];
        for (size_t o = 0; o < NUM_OPS; o++) {
            if (!op_applies(ALL_OPS[o], dt)) continue;
            PT_EXPECT(ccoip_reduce(ALL_OPS[o], dt, NULL, NULL, NULL, 0) == pcclSuccess, "%s %s",
                      ccoip_dtype_name(dt), op_name(ALL_OPS[o]));
            PT_EXPECT(ccoip_reduce_inplace(ALL_OPS[o], dt, NULL, NULL, 0) == pcclSuccess,
                      "inplace %s %s", ccoip_dtype_name(dt), op_name(ALL_OPS[o]));
        }
        PT_EXPECT(ccoip_reduce_finalize_avg(dt, NULL, 0, 3) == pcclSuccess, "finalize %s",
                  ccoip_dtype_name(dt));
    }
}

/* Three peers' AVG as the ring does it: accumulate, then finalize once. */
PTEST(reduce, avg_over_three_contributions)
{
    float f[3][2] = {{1.0f, -0.5f}, {2.0f, 0.25f}, {4.0f, 1.0f}};
    float acc[2];
    memcpy(acc, f[0], sizeof acc);
    PT_ASSERT(ccoip_reduce_inplace(pcclAvg, pcclFloat, acc, f[1], 2) == pcclSuccess, "step 1");
    PT_ASSERT(ccoip_reduce(pcclAvg, pcclFloat, acc, acc, f[2], 2) == pcclSuccess, "step 2");
    PT_ASSERT(ccoip_reduce_finalize_avg(pcclFloat, acc, 2, 3) == pcclSuccess, "finalize");
    PT_ASSERT(acc[0] == 7.0f / 3.0f, "avg(1,2,4) = %.9g", (double)acc[0]);
    PT_ASSERT(acc[1] == 0.25f, "avg(-0.5,0.25,1) = %.9g", (double)acc[1]);

    int16_t s[3] = {-1, -2, -4}, r;
    unsigned char ra[2], rb[2];
    memcpy(ra, &s[0], 2);
    memcpy(rb, &s[1], 2);
    PT_ASSERT(ccoip_reduce_inplace(pcclAvg, pcclInt16, ra, rb, 1) == pcclSuccess, "i16 step 1");
    memcpy(rb, &s[2], 2);
    PT_ASSERT(ccoip_reduce_inplace(pcclAvg, pcclInt16, ra, rb, 1) == pcclSuccess, "i16 step 2");
    PT_ASSERT(ccoip_reduce_finalize_avg(pcclInt16, ra, 1, 3) == pcclSuccess, "i16 finalize");
    memcpy(&r, ra, 2);
    PT_ASSERT(r == -2, "avg(-1,-2,-4) = %d, want -2 (-7/3 truncated)", (int)r);
}

/* ccoip_reduce_gather (the small all-reduce's kernel, ccoip_sm.h v7) against the sequence it
 * replaced: a copy of x_0, then ccoip_reduce_inplace(dst, x_k) for k = 1..n-1 (the kernels
 * themselves are checked against the reference above). Every type and op, random bytes
 * (NaNs, infinities, subnormals included), n = 1..5, the own input at every position. */
PTEST(reduce, gather_matches_copy_then_accumulate)
{
    enum { GN = 5, GC = 37 };
    static unsigned char slots[GN * GC * 8], own[GC * 8], want[GC * 8], got[GC * 8 + 1];
    rng r = {TEST_SEED ^ 0x6a7u};
    for (size_t t = 0; t < NUM_TYPES; t++) {
        const pcclDataType_t dt = ALL_TYPES[t];
        const size_t bytes = (size_t)GC * width_of(dt);
        for (size_t o = 0; o < NUM_OPS; o++) {
            if (!op_applies(ALL_OPS[o], dt)) continue;
            for (uint32_t n = 1; n <= GN; n++) {
                for (uint32_t me = 0; me < n; me++) {
                    for (size_t i = 0; i < sizeof slots; i++)
                        slots[i] = (unsigned char)rng_next(&r);
                    for (size_t i = 0; i < bytes; i++)
                        own[i] = (unsigned char)rng_next(&r);
                    const unsigned char *x0 = me == 0 ? own : slots;
                    memcpy(want, x0, bytes);
                    for (uint32_t k = 1; k < n; k++) {
                        const unsigned char *xk = k == me ? own : slots + k * bytes;
                        PT_ASSERT(ccoip_reduce_inplace(ALL_OPS[o], dt, want, xk, GC) == pcclSuccess,
                                  "reference step");
                    }
                    memset(got, 0xa5, sizeof got);
                    PT_ASSERT(ccoip_reduce_gather(ALL_OPS[o], dt, got, slots, own, me, n, GC) ==
                                  pcclSuccess,
                              "gather %s %s n=%u", ccoip_dtype_name(dt), op_name(ALL_OPS[o]), n);
                    PT_ASSERT(memcmp(got, want, bytes) == 0, "gather %s %s n=%u own=%u differs",
                              ccoip_dtype_name(dt), op_name(ALL_OPS[o]), n, me);
                    PT_ASSERT(got[bytes] == 0xa5, "gather wrote past dst");
                }
            }
        }
    }
    /* Bad arguments: nothing written. */
    memset(got, 0xa5, sizeof got);
    PT_EXPECT(ccoip_reduce_gather(pcclSum, pcclInt32, got, slots, own, 0, 0, 4) ==
                  pcclInvalidArgument,
              "n = 0");
    PT_EXPECT(ccoip_reduce_gather(pcclSum, pcclInt32, got, slots, own, 3, 3, 4) ==
                  pcclInvalidArgument,
              "own index out of range");
    PT_EXPECT(ccoip_reduce_gather((pcclRedOp_t)99, pcclInt32, got, slots, own, 0, 2, 4) ==
                  pcclInvalidArgument,
              "unknown op");
    PT_EXPECT(got[0] == 0xa5, "an invalid call wrote");
    /* Exact integers: 1 + 2 + ... + 5 with the own input (3) in the middle. */
    int32_t in[5] = {1, 2, 0, 4, 5}, mine = 3, sum = 0;
    PT_ASSERT(ccoip_reduce_gather(pcclSum, pcclInt32, &sum, in, &mine, 2, 5, 1) == pcclSuccess,
              "sum");
    PT_ASSERT(sum == 15, "sum %d, want 15", (int)sum);
}

/* PREMUL_SUM's premultiplication (ccoip_reduce_scale): exact products, rounding of the half
 * formats through binary32, the canonical NaN, in place and out of place, and no kernel for
 * integers; PREMUL_SUM itself reduces as SUM on floats only. */
PTEST(reduce, premul_scale_kernel)
{
    const float x[5] = {1.5f, -2.0f, 0.0f, 3.0e38f, 1.0f};
    float y[5];
    PT_ASSERT(ccoip_reduce_scale(pcclFloat, y, x, 5, 2.0) == pcclSuccess, "f32");
    PT_ASSERT(y[0] == 3.0f && y[1] == -4.0f && y[2] == 0.0f && isinf(y[3]) && y[4] == 2.0f,
              "f32 products: %g %g %g %g %g", (double)y[0], (double)y[1], (double)y[2],
              (double)y[3], (double)y[4]);
    /* s is rounded to binary32 first: 0.1 * 1.0f is (float)0.1, not the double product. */
    PT_ASSERT(ccoip_reduce_scale(pcclFloat, y, x + 4, 1, 0.1) == pcclSuccess && y[0] == (float)0.1,
              "f32 factor rounded to binary32");
    float z[2] = {INFINITY, 5.0f};
    PT_ASSERT(ccoip_reduce_scale(pcclFloat, z, z, 2, 0.0) == pcclSuccess, "in place");
    uint32_t bits;
    memcpy(&bits, &z[0], 4);
    PT_ASSERT(bits == 0x7fc00000u && z[1] == 0.0f, "inf * 0 is the canonical NaN (%08x)", bits);
    const double d[2] = {1.0 / 3.0, -7.25};
    double e[2];
    PT_ASSERT(ccoip_reduce_scale(pcclDouble, e, d, 2, 3.0) == pcclSuccess && e[0] == 1.0 &&
                  e[1] == -21.75,
              "f64 products");
    /* f16: 1.0 * 1.5 = 1.5 exactly; 1025 * 1.5 = 1537.5 lies halfway between two halves (the
     * spacing is 1 there): it rounds to the even one, 1538. */
    uint16_t h[2] = {ccoip_f32_to_f16(1.0f), ccoip_f32_to_f16(1025.0f)}, ho[2];
    PT_ASSERT(ccoip_reduce_scale(pcclFloat16, ho, h, 2, 1.5) == pcclSuccess, "f16");
    PT_ASSERT(ccoip_f16_to_f32(ho[0]) == 1.5f && ccoip_f16_to_f32(ho[1]) == 1538.0f,
              "f16 products: %g %g", (double)ccoip_f16_to_f32(ho[0]),
              (double)ccoip_f16_to_f32(ho[1]));
    uint16_t b[1] = {ccoip_f32_to_bf16(3.0f)}, bo[1];
    PT_ASSERT(ccoip_reduce_scale(pcclBFloat16, bo, b, 1, -0.5) == pcclSuccess &&
                  ccoip_bf16_to_f32(bo[0]) == -1.5f,
              "bf16 product");
    int32_t ints[2] = {1, 2};
    PT_ASSERT(ccoip_reduce_scale(pcclInt32, ints, ints, 2, 2.0) == pcclInvalidArgument &&
                  ints[0] == 1 && ints[1] == 2,
              "no integer premultiplication, nothing written");
    PT_ASSERT(ccoip_reduce_scale((pcclDataType_t)77, y, x, 1, 2.0) == pcclInvalidArgument,
              "unknown dtype");
    PT_ASSERT(ccoip_reduce_supported(pcclPremulSum, pcclFloat) &&
                  ccoip_reduce_supported(pcclPremulSum, pcclBFloat16) &&
                  !ccoip_reduce_supported(pcclPremulSum, pcclInt32) &&
                  !ccoip_reduce_supported(pcclPremulSum, pcclUint8),
              "PREMUL_SUM: floats only");
    float acc[2] = {1.0f, 2.0f};
    const float add[2] = {0.5f, 0.25f};
    PT_ASSERT(ccoip_reduce_inplace(pcclPremulSum, pcclFloat, acc, add, 2) == pcclSuccess &&
                  acc[0] == 1.5f && acc[1] == 2.25f,
              "PREMUL_SUM reduces as SUM");
}
