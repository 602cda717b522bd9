/*
 * ccoip_dtype.h — element types: sizes and software fp16/bf16 conversion.
 *
 * Pure C11, deterministic (DESIGN.md §2 rule 9): half-precision values are
 * converted in software with round-to-nearest-even, so every platform
 * (x86-64, wasm32) produces the same bits.
 */
#ifndef CCOIP_DTYPE_H
#define CCOIP_DTYPE_H

#include <stdbool.h>
#include <stdint.h>

#include "pccl_types.h"

/** True when dt is one of the twelve pcclDataType_t values. */
bool ccoip_dtype_valid(pcclDataType_t dt);

/** Size of one element in bytes, or 0 when dt is not a valid type. */
uint32_t ccoip_dtype_size(pcclDataType_t dt);

/** True for pcclFloat16, pcclBFloat16, pcclFloat and pcclDouble. */
bool ccoip_dtype_is_float(pcclDataType_t dt);

/** Short lowercase name ("f32", "bf16", "u8", ...), or "invalid". */
const char *ccoip_dtype_name(pcclDataType_t dt);

/** binary16 bits → binary32 (exact). */
float ccoip_f16_to_f32(uint16_t h);
/** binary32 → binary16 bits, round to nearest even; NaN stays NaN (quiet), overflow → ±inf. */
uint16_t ccoip_f32_to_f16(float f);
/** bfloat16 bits → binary32 (exact). */
float ccoip_bf16_to_f32(uint16_t b);
/** binary32 → bfloat16 bits, round to nearest even; NaN stays NaN (quiet). */
uint16_t ccoip_f32_to_bf16(float f);

#endif /* CCOIP_DTYPE_H */
