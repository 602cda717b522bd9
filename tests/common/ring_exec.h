/*
 * ring_exec.h — an in-memory ring all-reduce, for tests and the corpus check.
 *
 * Runs a complete ring all-reduce over N rank buffers in one address space
 * by following ccoip_ring_step_get (core/ccoip_ring.h) step by step: in each
 * step every rank first "sends" (its chunk is copied, or quantized, into the
 * successor's staging area), then every rank processes what it received.
 * Reductions and copies use the core kernels (ccoip_reduce.h, ccoip_quant.h),
 * so the result is what the real runtime computes, bit for bit:
 *
 * - Reduce-scatter: the receiver reduces the incoming chunk into its buffer
 *   (dst = dst op incoming). With quantization the sender computes the
 *   chunk's metadata and quantizes it; the receiver calls
 *   ccoip_dequantize_reduce.
 * - After the reduce-scatter every rank finalizes the chunk it owns
 *   ((rank + 1) mod N): AVG divides by N (ccoip_reduce_finalize_avg); with
 *   quantization it then quantizes the chunk and adopts the dequantized
 *   result into its own buffer. N = 1 follows the same rule (no steps; the
 *   owned chunk is the whole buffer).
 * - All-gather: without quantization the receiver copies the chunk; with
 *   quantization the owner's codes and metadata are forwarded verbatim
 *   around the ring (never re-quantized) and every receiver dequantizes them.
 *
 * Wire bytes are counted per rank: elements sent or received times the wire
 * element size (the quantized type's size when quantized). Quantization
 * metadata is not counted.
 */
#ifndef RING_EXEC_H
#define RING_EXEC_H

#include <stdint.h>

#include "pccl.h"

/**
 * All-reduces count elements of dt in place over the n buffers bufs[0..n)
 * (rank r's buffer is bufs[r]; buffers may have any alignment and must not
 * overlap). qalg is pcclQuantNone or an algorithm that
 * ccoip_quant_supported(qalg, dt, qtype) accepts; qtype is ignored when qalg
 * is pcclQuantNone. tx_bytes and rx_bytes, when not NULL, receive n per-rank
 * wire byte counts on success (overwritten, not accumulated).
 *
 * Returns pcclSuccess; pcclInvalidArgument for n == 0 or above
 * CCOIP_RING_WORLD_MAX, a NULL buffer (with count > 0), an unknown dtype or
 * op, an unsupported quantization, or a kernel rejecting its input (e.g. a
 * non-finite value under quantization; buffers are then partly reduced);
 * pcclSystemError when staging memory cannot be allocated.
 */
pcclResult_t ring_exec_allreduce(void *const *bufs, uint32_t n, uint64_t count, pcclDataType_t dt,
                                 pcclRedOp_t op, pcclQuantizationAlgorithm_t qalg,
                                 pcclDataType_t qtype, uint64_t *tx_bytes, uint64_t *rx_bytes);

#endif /* RING_EXEC_H */
