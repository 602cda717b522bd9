/*
 * test_dtype.c — element sizes and the software fp16/bf16 conversions of
 * core/dtype.c.
 */
#include <math.h>
#include <string.h>

#include "ccoip_dtype.h"
#include "ptest.h"

static uint32_t bits_of(float f)
{
    uint32_t b;
    memcpy(&b, &f, 4);
    return b;
}

static float float_of(uint32_t b)
{
    float f;
    memcpy(&f, &b, 4);
    return f;
}

PTEST(dtype, sizes_and_names)
{
    const uint32_t want[PCCL_DATA_TYPE_COUNT] = {1, 1, 2, 2, 4, 4, 8, 8, 2, 2, 4, 8};
    for (int dt = 0; dt < PCCL_DATA_TYPE_COUNT; dt++) {
        PT_ASSERT(ccoip_dtype_valid((pcclDataType_t)dt), "type %d is valid", dt);
        PT_ASSERT(ccoip_dtype_size((pcclDataType_t)dt) == want[dt], "size of type %d", dt);
        PT_ASSERT(strcmp(ccoip_dtype_name((pcclDataType_t)dt), "invalid") != 0, "name of %d", dt);
    }
    PT_ASSERT(!ccoip_dtype_valid((pcclDataType_t)12), "12 is not a type");
    PT_ASSERT(!ccoip_dtype_valid((pcclDataType_t)-1), "-1 is not a type");
    PT_ASSERT(ccoip_dtype_size((pcclDataType_t)99) == 0, "size of an invalid type is 0");
    PT_ASSERT(strcmp(ccoip_dtype_name((pcclDataType_t)99), "invalid") == 0, "invalid name");
    PT_ASSERT(ccoip_dtype_is_float(pcclBFloat16) && !ccoip_dtype_is_float(pcclInt64),
              "float classification");
    PT_ASSERT(strcmp(ccoip_dtype_name(pcclBFloat16), "bf16") == 0, "bf16 name");
}

/* Every binary16 value converts to binary32 and back to the same bits (NaNs
 * stay NaNs with the quiet bit set). */
PTEST(dtype, f16_round_trip_exhaustive)
{
    for (uint32_t h = 0; h <= 0xffffu; h++) {
        float f = ccoip_f16_to_f32((uint16_t)h);
        uint16_t back = ccoip_f32_to_f16(f);
        int is_nan = (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0;
        if (is_nan) {
            PT_ASSERT(isnan(f), "f16 %04x is NaN as f32", h);
            PT_ASSERT(back == (h | 0x200u), "NaN %04x comes back quiet (%04x)", h, back);
        } else {
            PT_ASSERT(back == h, "f16 %04x -> %08x -> %04x", h, bits_of(f), back);
        }
    }
}

/* The value of every finite binary16: sign, exponent and mantissa decoded
 * independently with ldexp. */
PTEST(dtype, f16_values)
{
    for (uint32_t h = 0; h < 0x7c00u; h++) {
        uint32_t e = h >> 10, m = h & 0x3ffu;
        double want = e == 0 ? ldexp((double)m, -24) : ldexp(1024.0 + m, (int)e - 25);
        PT_ASSERT((double)ccoip_f16_to_f32((uint16_t)h) == want, "f16 %04x", h);
        PT_ASSERT((double)ccoip_f16_to_f32((uint16_t)(h | 0x8000u)) == -want, "f16 -%04x", h);
    }
    PT_ASSERT(isinf(ccoip_f16_to_f32(0x7c00u)) && ccoip_f16_to_f32(0xfc00u) < 0, "infinities");
}

/* Rounding of binary32 to binary16: nearest, ties to even, overflow, and
 * the subnormal range, checked against the exact midpoints. */
PTEST(dtype, f32_to_f16_rounding)
{
    PT_ASSERT(ccoip_f32_to_f16(1.0f) == 0x3c00u, "1.0");
    PT_ASSERT(ccoip_f32_to_f16(-2.0f) == 0xc000u, "-2.0");
    PT_ASSERT(ccoip_f32_to_f16(65504.0f) == 0x7bffu, "max finite");
    PT_ASSERT(ccoip_f32_to_f16(65519.99f) == 0x7bffu, "just below the overflow midpoint");
    PT_ASSERT(ccoip_f32_to_f16(65520.0f) == 0x7c00u, "midpoint to max rounds to inf (even)");
    PT_ASSERT(ccoip_f32_to_f16(1e10f) == 0x7c00u, "overflow");
    PT_ASSERT(ccoip_f32_to_f16(-1e10f) == 0xfc00u, "negative overflow");
    /* 1 + 2^-11 is the midpoint between 1 and 1 + 2^-10: ties to even (1). */
    PT_ASSERT(ccoip_f32_to_f16(1.0f + 0x1p-11f) == 0x3c00u, "tie to even down");
    /* 1 + 3 * 2^-11 is the midpoint between 1+2^-10 and 1+2^-9: even is up. */
    PT_ASSERT(ccoip_f32_to_f16(1.0f + 3 * 0x1p-11f) == 0x3c02u, "tie to even up");
    PT_ASSERT(ccoip_f32_to_f16(1.0f + 0x1p-11f + 0x1p-20f) == 0x3c01u, "above the tie");
    PT_ASSERT(ccoip_f32_to_f16(0x1p-24f) == 0x0001u, "smallest subnormal");
    PT_ASSERT(ccoip_f32_to_f16(0x1p-25f) == 0x0000u, "half the smallest subnormal: even 0");
    PT_ASSERT(ccoip_f32_to_f16(0x1.8p-24f) == 0x0002u, "1.5 units ties to even 2");
    PT_ASSERT(ccoip_f32_to_f16(0x1.000002p-25f) == 0x0001u, "just above half a unit");
    PT_ASSERT(ccoip_f32_to_f16(0x1p-14f) == 0x0400u, "smallest normal");
    PT_ASSERT(ccoip_f32_to_f16(0x1.ff8p-15f) == 0x03ffu, "largest subnormal");
    PT_ASSERT(ccoip_f32_to_f16(0x1.ffcp-15f) == 0x0400u, "tie between subnormal and normal");
    PT_ASSERT(ccoip_f32_to_f16(0x1.ffep-15f) == 0x0400u, "rounds up into the normal range");
    PT_ASSERT(ccoip_f32_to_f16(-0.0f) == 0x8000u, "-0");
    PT_ASSERT(ccoip_f32_to_f16(float_of(0x00000001u)) == 0, "binary32 subnormal");
    PT_ASSERT((ccoip_f32_to_f16(NAN) & 0x7e00u) == 0x7e00u, "NaN stays a quiet NaN");
    PT_ASSERT(ccoip_f32_to_f16(INFINITY) == 0x7c00u, "inf");
}

/* Every binary32 near a sweep of binary16 values rounds to the nearest
 * binary16, ties to even: checked against the neighbours' exact values. */
PTEST(dtype, f32_to_f16_nearest_sweep)
{
    uint64_t s = 0x853c49e6748fea9bu;
    for (int i = 0; i < 200000; i++) {
        s = s * 6364136223846793005u + 1442695040888963407u;
        /* Magnitudes from 2^-26 to 2^17. */
        uint32_t bits = (uint32_t)(0x32800000u + (s >> 33) % (0x48000000u - 0x32800000u));
        float f = float_of(bits);
        uint16_t h = ccoip_f32_to_f16(f);
        double v = (double)ccoip_f16_to_f32(h);
        double x = (double)f;
        if (h == 0x7c00u) {
            PT_ASSERT(x >= 65520.0, "%a rounded to inf", x);
            continue;
        }
        double up = (double)ccoip_f16_to_f32((uint16_t)(h + 1));
        double down = h ? (double)ccoip_f16_to_f32((uint16_t)(h - 1)) : -v;
        PT_ASSERT(fabs(x - v) <= fabs(x - up) && fabs(x - v) <= fabs(x - down),
                  "%a -> %04x is not nearest", x, h);
        if (fabs(x - v) == fabs(x - up) || fabs(x - v) == fabs(x - down)) {
            PT_ASSERT((h & 1u) == 0, "%a is a tie and %04x is odd", x, h);
        }
    }
}

PTEST(dtype, bf16)
{
    PT_ASSERT(ccoip_f32_to_bf16(1.0f) == 0x3f80u, "1.0");
    PT_ASSERT(ccoip_bf16_to_f32(0x3f80u) == 1.0f, "1.0 back");
    PT_ASSERT(ccoip_f32_to_bf16(float_of(0x3f808000u)) == 0x3f80u, "tie to even down");
    PT_ASSERT(ccoip_f32_to_bf16(float_of(0x3f818000u)) == 0x3f82u, "tie to even up");
    PT_ASSERT(ccoip_f32_to_bf16(float_of(0x3f808001u)) == 0x3f81u, "above the tie");
    PT_ASSERT(ccoip_f32_to_bf16(float_of(0x7f7fffffu)) == 0x7f80u, "FLT_MAX rounds to inf");
    PT_ASSERT(ccoip_f32_to_bf16(-INFINITY) == 0xff80u, "-inf");
    uint16_t n = ccoip_f32_to_bf16(float_of(0x7f800001u)); /* signalling NaN, payload low */
    PT_ASSERT((n & 0x7f80u) == 0x7f80u && (n & 0x7fu) != 0, "sNaN stays NaN (%04x)", n);
    for (uint32_t b = 0; b <= 0xffffu; b++) {
        float f = ccoip_bf16_to_f32((uint16_t)b);
        PT_ASSERT(bits_of(f) == b << 16, "bf16 %04x widens exactly", b);
        int is_nan = (b & 0x7f80u) == 0x7f80u && (b & 0x7fu) != 0;
        uint16_t back = ccoip_f32_to_bf16(f);
        PT_ASSERT(is_nan ? back == (b | 0x40u) : back == b, "bf16 %04x round trip", b);
    }
}
