/*
 * dtype.c — element sizes and software fp16/bf16 conversion.
 *
 * Conversions are pure integer bit manipulation, so they give the same bits
 * on every platform whatever its FPU or rounding mode (DESIGN.md §2 rule 9).
 */
#include "ccoip_dtype.h"

#include <string.h>

bool ccoip_dtype_valid(pcclDataType_t dt)
{
    return (int)dt >= 0 && (int)dt < PCCL_DATA_TYPE_COUNT;
}

uint32_t ccoip_dtype_size(pcclDataType_t dt)
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

bool ccoip_dtype_is_float(pcclDataType_t dt)
{
    return dt == pcclFloat16 || dt == pcclBFloat16 || dt == pcclFloat || dt == pcclDouble;
}

const char *ccoip_dtype_name(pcclDataType_t dt)
{
    switch (dt) {
    case pcclUint8:
        return "u8";
    case pcclInt8:
        return "i8";
    case pcclInt16:
        return "i16";
    case pcclUint16:
        return "u16";
    case pcclUint32:
        return "u32";
    case pcclInt32:
        return "i32";
    case pcclUint64:
        return "u64";
    case pcclInt64:
        return "i64";
    case pcclFloat16:
        return "f16";
    case pcclBFloat16:
        return "bf16";
    case pcclFloat:
        return "f32";
    case pcclDouble:
        return "f64";
    }
    return "invalid";
}

static float bits_to_f32(uint32_t bits)
{
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static uint32_t f32_to_bits(float f)
{
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    return bits;
}

float ccoip_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    if (exp == 0x1fu) return bits_to_f32(sign | 0x7f800000u | (mant << 13)); /* inf, NaN */
    if (exp != 0) return bits_to_f32(sign | ((exp + 112u) << 23) | (mant << 13));
    if (mant == 0) return bits_to_f32(sign); /* ±0 */
    /* Subnormal: mant × 2^-24. Normalize so the leading 1 lands on bit 10. */
    uint32_t e = 113u; /* biased binary32 exponent of 2^-14 */
    while ((mant & 0x400u) == 0) {
        mant <<= 1;
        e--;
    }
    return bits_to_f32(sign | (e << 23) | ((mant & 0x3ffu) << 13));
}

uint16_t ccoip_f32_to_f16(float f)
{
    uint32_t x = f32_to_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t exp = (x >> 23) & 0xffu;
    uint32_t mant = x & 0x7fffffu;
    if (exp == 0xffu) {
        if (mant != 0) return (uint16_t)(sign | 0x7e00u | (mant >> 13)); /* quiet NaN */
        return (uint16_t)(sign | 0x7c00u);
    }
    int32_t e = (int32_t)exp - 127;
    if (e > 15) return (uint16_t)(sign | 0x7c00u); /* ≥ 65536: overflows to inf */
    if (e >= -14) {
        /* Normal range: keep 10 mantissa bits, round the 13 dropped ones to
         * nearest even. A carry out of the mantissa bumps the exponent, and
         * out of the largest exponent yields inf: both are the right answer. */
        uint32_t h = ((uint32_t)(e + 15) << 10) | (mant >> 13);
        uint32_t rest = mant & 0x1fffu;
        if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) h++;
        return (uint16_t)(sign | h);
    }
    if (e < -25) return sign; /* below half the smallest subnormal: ±0 */
    /* Subnormal result: the value is m × 2^(e-23) with m the full 24-bit
     * significand; in units of 2^-24 that is m >> (-e - 1), rounded. */
    uint32_t m = mant | 0x800000u;
    uint32_t s = (uint32_t)(-e - 1); /* 14 .. 24 */
    uint32_t code = m >> s;
    uint32_t rest = m & ((1u << s) - 1u);
    uint32_t half = 1u << (s - 1u);
    if (rest > half || (rest == half && (code & 1u))) code++;
    return (uint16_t)(sign | code);
}

float ccoip_bf16_to_f32(uint16_t b)
{
    return bits_to_f32((uint32_t)b << 16);
}

uint16_t ccoip_f32_to_bf16(float f)
{
    uint32_t x = f32_to_bits(f);
    if ((x & 0x7f800000u) == 0x7f800000u && (x & 0x7fffffu) != 0) {
        return (uint16_t)((x >> 16) | 0x40u); /* quiet NaN, payload's top bits kept */
    }
    /* Round to nearest even on the 16 dropped bits; overflow rounds to inf. */
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}
