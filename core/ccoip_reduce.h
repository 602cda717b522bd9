/*
 * ccoip_reduce.h — reduction kernels for every pcclDataType_t × pcclRedOp_t.
 *
 * Semantics (docs/semantics.md, DESIGN.md §2 rule 9):
 * - Integers: computed on the unsigned representation, so SUM and PROD wrap
 *   (two's complement) and never trigger undefined behaviour. MIN/MAX compare
 *   as the signed or unsigned type.
 * - AVG: the kernels accumulate AVG exactly like SUM; the division by the
 *   number of contributions happens once, in ccoip_reduce_finalize_avg
 *   (integers: the wrapped sum, read as the element type, divided by n and
 *   truncated toward zero; floats: sum / n in the element's precision).
 * - Floats: built with -ffp-contract=off (no FMA contraction). fp16 and bf16
 *   are widened to binary32, combined, and rounded back to nearest even; for
 *   +, × and ÷ this is the correctly rounded result (binary32 has at least
 *   2p+2 bits for both half formats), so it does not depend on the platform.
 * - A NaN produced by SUM, PROD or the AVG division is written as the
 *   format's canonical quiet NaN (f16 0x7e00, bf16 0x7fc0, f32 0x7fc00000,
 *   f64 0x7ff8000000000000): hardware NaN payloads differ between x86 and
 *   wasm, and results must be the same bits everywhere.
 * - BAND/BOR/BXOR (pccl additions): the bitwise AND, OR, XOR of the
 *   elements' two's complement bits, for the eight integer types only; a
 *   float type with one of them has no kernel (pcclInvalidArgument). Exact,
 *   commutative and associative: the result does not depend on the order or
 *   grouping of the contributions.
 * - MIN/MAX: NaN propagates (if a is NaN the result is a, else if b is NaN
 *   the result is b). -0 is treated as smaller than +0, so MIN and MAX are
 *   commutative on non-NaN values.
 *
 * Buffers may have any alignment. In-place means dst aliases a (dst == a);
 * any other overlap is not allowed. Counts are uint64_t (size_t is 32 bits on
 * wasm32).
 */
#ifndef CCOIP_REDUCE_H
#define CCOIP_REDUCE_H

#include <stdbool.h>
#include <stdint.h>

#include "pccl_types.h"

/**
 * True when (op, dt) has a kernel: a known op and dtype, and not a bitwise op
 * (BAND/BOR/BXOR) on a float dtype. Every entry point below returns
 * pcclInvalidArgument exactly when this is false (besides its own checks).
 */
bool ccoip_reduce_supported(pcclRedOp_t op, pcclDataType_t dt);

/**
 * dst[i] = dst[i] op src[i] for i in [0, count).
 * Returns pcclSuccess, or pcclInvalidArgument for an unknown op or dtype, or
 * a bitwise op on a float dtype (nothing is written then).
 */
pcclResult_t ccoip_reduce_inplace(pcclRedOp_t op, pcclDataType_t dt, void *dst, const void *src,
                                  uint64_t count);

/**
 * dst[i] = a[i] op b[i] for i in [0, count). dst may equal a or b.
 * Returns pcclSuccess, or pcclInvalidArgument for an unknown op or dtype.
 */
pcclResult_t ccoip_reduce(pcclRedOp_t op, pcclDataType_t dt, void *dst, const void *a,
                          const void *b, uint64_t count);

/**
 * The small all-reduce's rank-order reduction (ccoip_sm.h v7): dst = x_0 op
 * x_1 op ... op x_{n-1}, evaluated left to right, where x_k is slots + k *
 * count elements, except x_own = own. dst must not overlap any input. With
 * n == 1, dst = x_0. Bit-identical to a copy of x_0 followed by n - 1
 * ccoip_reduce_inplace(dst, x_k) calls. Returns pcclInvalidArgument for an
 * unknown op or dtype, n == 0 or own >= n (nothing written then).
 */
pcclResult_t ccoip_reduce_gather(pcclRedOp_t op, pcclDataType_t dt, void *dst, const void *slots,
                                 const void *own, uint32_t own_index, uint32_t n, uint64_t count);

/**
 * PREMUL_SUM's premultiplication (pccl addition): dst[i] = src[i] * s for i in [0, count), dst
 * equal to src or disjoint. Float types only: f32 multiplies by (float)s, f64 by s, f16 and bf16
 * are widened to binary32, multiplied by (float)s and rounded back to nearest even (a correctly
 * rounded product of the two binary32 values, so platform independent); a NaN product is the
 * canonical quiet NaN, as for SUM. The sum that follows is pcclSum's. Returns
 * pcclInvalidArgument for a non-float or unknown dtype (nothing written).
 */
pcclResult_t ccoip_reduce_scale(pcclDataType_t dt, void *dst, const void *src, uint64_t count,
                                double s);

/**
 * Finalizes an AVG: dst[i] = dst[i] / n (see the header comment for the
 * exact integer and float rules). Returns pcclInvalidArgument for an unknown
 * dtype or n == 0.
 */
pcclResult_t ccoip_reduce_finalize_avg(pcclDataType_t dt, void *dst, uint64_t count, uint32_t n);

#endif /* CCOIP_REDUCE_H */
