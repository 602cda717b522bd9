/*
 * ccoip_quant.h — quantization of all-reduce, reduce and reduce-scatter traffic
 * (docs/semantics.md §3, §6).
 *
 * Both algorithms are affine per chunk and quantize floating-point sources
 * (pcclFloat16, pcclBFloat16, pcclFloat, pcclDouble) into 8- or 16-bit
 * integers (pcclUint8, pcclInt8, pcclUint16, pcclInt16). Let L and H be the
 * smallest and largest code of the quantized type (0/255, -128/127, 0/65535,
 * -32768/32767), Q = H - L (255 or 65535), and k = code - L in [0, Q].
 * min and max are the chunk's smallest and largest element, F the largest
 * finite value of the source type.
 *
 * All arithmetic is binary64, built with -ffp-contract=off, and every
 * rounding to an integer is explicit:
 *     rnd(u) = floor(clamp(u, 0, Q) + 0.5), where clamp sends NaN to 0,
 * so the same input gives the same bytes on every platform. Quantized codes
 * are stored in the host's byte order, signed codes as two's complement.
 *
 * pcclQuantMinMax: meta = (min, max).
 *     inv  = Q / (max - min)            (0 when max == min)
 *     step = (max - min) / Q
 *     k(x) = rnd((x - min) * inv)
 *     value(k) = min               if k == 0
 *              = max               if k == Q
 *              = min + k * step    otherwise (always within [min, max])
 *   min and max round-trip exactly (even -0) and reach codes L and H; a
 *   constant chunk quantizes to L everywhere and dequantizes back exactly.
 *   (pcclDouble only: when max - min overflows binary64, or is below
 *   2^-968, the same formulas are evaluated on values multiplied by 2^-1 or
 *   2^968 and the value divided back; that is exact, so the results are
 *   those of the formulas wherever they are finite.)
 *
 * pcclQuantZeroPointScale: meta = (scale, zero_point).
 *   compute_meta, for a non-constant chunk:
 *     scale = max((max - min) / Q, max(|min|, |max|) * 2^-44, 2^-1022)
 *   ((max - min) / Q is computed as (((max / 2) - (min / 2)) / Q) * 2 when
 *   max - min overflows binary64); the two lower bounds only bind for
 *   pcclDouble chunks (range below Q 2^-44 times their magnitude, or below
 *   Q 2^-1022), and keep |min / scale| below 2^44. A constant chunk
 *   (max == min) gets scale = |min|, or 1 when |min| < 2^-1022, so that it
 *   round-trips exactly.
 *     inv = 1 / scale
 *     zero_point = L - floor(min * inv + 0.5)   (an integer, |zero_point| <
 *                  2^45; not necessarily representable in the quantized type)
 *   quantize / dequantize:
 *     k(x) = rnd(x * inv + (zero_point - L))
 *     value(k) = clamp((k + (L - zero_point)) * scale, -F, F)
 *   min always quantizes to code L; when min <= 0 <= max, 0 round-trips
 *   exactly (zero_point is then a code in [L, H]).
 *
 * Dequantized values are rounded to the source type to nearest, ties to
 * even (fp16/bf16 directly from binary64, without passing through binary32).
 *
 * Error bound (tested): for the finite elements x of the chunk the metadata
 * was computed from, |x - value(k(x))| <= E + ½ ulp of the source type at
 * the dequantized value, where E = (max - min) / (2Q) for MinMax and
 * scale / 2 for ZeroPointScale, plus binary64 rounding: less than
 * 2^-50 (|x| + max - min) for MinMax, 2^-50 (|x| + Q scale) for
 * ZeroPointScale.
 *
 * Non-finite inputs (NaN, ±inf) cannot be quantized: ccoip_quant_compute_meta
 * returns pcclInvalidArgument for a chunk holding one. ccoip_quantize does
 * not check its input: elements outside the range of the metadata clamp to L
 * or H, NaN becomes L.
 *
 * Valid metadata (ccoip_quant_meta_check; it comes off the wire, so every
 * entry point validates it and never asserts on it): a supported (algorithm,
 * src_type, quant_type) combination, and for MinMax -F <= min <= max <= F
 * (so no NaN or infinity) with min and max values of the source type; for ZeroPointScale 2^-1022 <=
 * scale <= DBL_MAX and |zero_point| <= CCOIP_QUANT_ZERO_POINT_LIMIT. The fields the algorithm does
 * not use are ignored (compute_meta sets them to 0).
 *
 * Pure C11, no allocation; all functions are thread-safe (no shared state).
 * Buffers may have any alignment; counts are uint64_t.
 */
#ifndef CCOIP_QUANT_H
#define CCOIP_QUANT_H

#include <stdbool.h>
#include <stdint.h>

#include "pccl_types.h"

/** Largest |zero_point| accepted in ZeroPointScale metadata (2^48). */
#define CCOIP_QUANT_ZERO_POINT_LIMIT ((int64_t)1 << 48)

/** Parameters needed to dequantize one quantized chunk. Travels with the chunk. */
typedef struct ccoip_quant_meta {
    pcclQuantizationAlgorithm_t algorithm; /**< pcclQuantMinMax or pcclQuantZeroPointScale. */
    pcclDataType_t src_type;               /**< Element type of the unquantized data. */
    pcclDataType_t quant_type;             /**< Element type of the codes. */
    double min_value;                      /**< MinMax: the chunk's minimum (else 0). */
    double max_value;                      /**< MinMax: the chunk's maximum (else 0). */
    double scale;       /**< ZeroPointScale: the grid step, in [2^-1022, DBL_MAX] (else 0). */
    int64_t zero_point; /**< ZeroPointScale: the code of 0 (else 0). */
} ccoip_quant_meta;

/** True when the algorithm can quantize src_type into quant_type. pcclQuantNone → false. */
bool ccoip_quant_supported(pcclQuantizationAlgorithm_t algorithm, pcclDataType_t src_type,
                           pcclDataType_t quant_type);

/**
 * Checks metadata received from a peer (see "Valid metadata" above).
 * Returns pcclSuccess, or pcclInvalidArgument (also for meta == NULL).
 */
pcclResult_t ccoip_quant_meta_check(const ccoip_quant_meta *meta);

/**
 * Computes the metadata for quantizing src[0..count) (count may be 0: the
 * metadata is then that of a constant chunk of 0, and src may be NULL).
 * Every field of *meta_out is written (unused ones are 0).
 * Returns pcclSuccess; pcclInvalidArgument for an unsupported combination,
 * a non-finite element, or a NULL pointer (nothing is written then).
 */
pcclResult_t ccoip_quant_compute_meta(pcclQuantizationAlgorithm_t algorithm,
                                      pcclDataType_t src_type, pcclDataType_t quant_type,
                                      const void *src, uint64_t count, ccoip_quant_meta *meta_out);

/**
 * Writes the codes of src[0..count) into codes_out (count elements of
 * meta->quant_type). codes_out may not overlap src. Returns pcclSuccess, or
 * pcclInvalidArgument for invalid metadata or a NULL buffer with count > 0
 * (nothing is written then).
 */
pcclResult_t ccoip_quantize(const ccoip_quant_meta *meta, void *codes_out, const void *src,
                            uint64_t count);

/**
 * dst[i] = value(codes[i]) rounded to meta->src_type (to nearest, ties to
 * even). dst may not overlap codes. Returns pcclSuccess, or
 * pcclInvalidArgument for invalid metadata or a NULL buffer with count > 0
 * (nothing is written then).
 */
pcclResult_t ccoip_dequantize(const ccoip_quant_meta *meta, void *dst, const void *codes,
                              uint64_t count);

/**
 * dst[i] = dst[i] op value(codes[i]): bit for bit what ccoip_dequantize into
 * a temporary followed by ccoip_reduce_inplace(op, meta->src_type, dst, tmp)
 * gives (AVG accumulates like SUM). dst may not overlap codes. Returns
 * pcclSuccess, or pcclInvalidArgument for invalid metadata, an unknown op or
 * a NULL buffer with count > 0 (nothing is written then).
 */
pcclResult_t ccoip_dequantize_reduce(const ccoip_quant_meta *meta, pcclRedOp_t op, void *dst,
                                     const void *codes, uint64_t count);

#endif /* CCOIP_QUANT_H */
