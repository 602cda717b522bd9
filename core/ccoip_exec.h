/*
 * ccoip_exec.h — the executor of the core's buffer actions (pure).
 *
 * A peer state machine names memory by spans (ccoip_span_ref: op slot,
 * region, offset, length). Every driver — the runtime (transport/), the
 * simulator (sim/) and the unit-test harness (tests/common/) — keeps one
 * ccoip_exec: the table of op slots with the regions each in-flight
 * operation has bound (OP_BEGIN), and through it
 *   - resolves a span to memory, checked once, here (ccoip_exec_span);
 *   - prepares a kernel action (REDUCE, COPY, QUANTIZE, DEQUANTIZE, FINALIZE,
 *     HASH, GATHER_REDUCE): every span resolved and every length checked
 *     against the action's element count and types (ccoip_kernel_prepare);
 *   - runs it whole or in slices, so a worker thread can check for
 *     cancellation between slices (ccoip_kernel_run_part);
 *   - runs a WRITE (ccoip_exec_write).
 * A driver keeps only its I/O: sockets or virtual links, threads, timers.
 * Adding a kernel action means one case here (docs/architecture.md).
 *
 * No allocation: the slot table and the regions' memory belong to the
 * driver. Everything here is deterministic and runs under emcc.
 */
#ifndef CCOIP_EXEC_H
#define CCOIP_EXEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ccoip_quant.h"
#include "ccoip_sm.h"
#include "pccl_types.h"

/** The regions one in-flight operation has bound (OP_BEGIN) and its cancel key. */
typedef struct ccoip_exec_slot {
    bool used;
    uint64_t cmd_id; /**< The command the slot serves (OP_BEGIN's cmd_id). */
    uint8_t *send;   /**< CCOIP_REGION_SEND, `send_bytes` long (the application's). */
    uint8_t *recv;   /**< CCOIP_REGION_RECV, `recv_bytes` long (the application's). */
    uint64_t send_bytes, recv_bytes;
    uint8_t *scratch; /**< CCOIP_REGION_SCRATCH (the driver's). */
    uint64_t scratch_bytes;
    uint8_t *backup; /**< CCOIP_REGION_BACKUP (the driver's). */
    uint64_t backup_bytes;
    /** CCOIP_REGION_TENSOR: a sync's tensors (the application's), by key index. */
    uint8_t *const *tensors;
    const uint64_t *tensor_bytes;
    uint32_t ntensors;
    /** The (epoch, tag, seq) of the slot's last ring action: what a CANCEL cancels. */
    bool keyed;
    uint64_t epoch, tag, seq;
} ccoip_exec_slot;

/** A driver's slot table: slots[0 .. nslots), owned by the driver. */
typedef struct ccoip_exec {
    ccoip_exec_slot *slots;
    uint32_t nslots;
} ccoip_exec;

/** Binds the table (every slot is cleared). */
void ccoip_exec_init(ccoip_exec *x, ccoip_exec_slot *slots, uint32_t nslots);

/** The slot an action names, or NULL when op_slot is out of the table. */
ccoip_exec_slot *ccoip_exec_slot_at(const ccoip_exec *x, uint32_t op_slot);

/**
 * Remembers the (epoch, tag, seq) of a ring action (RING_SEND, RING_RECV,
 * STATE_SEND, STATE_RECV) as its slot's cancel key.
 */
void ccoip_exec_key(const ccoip_exec *x, const ccoip_action *a);

/**
 * The memory of span s: NULL when the slot is not bound, the region unknown
 * or not mapped, or the span outside its region; *why (may be NULL) then
 * says which, as a static string. A zero-length region maps to a valid
 * pointer that must not be dereferenced.
 */
uint8_t *ccoip_exec_span(const ccoip_exec *x, const ccoip_span_ref *s, const char **why);

/**
 * A WRITE (v9): dst = data[0 .. len), len = dst.length. Returns pcclSuccess
 * or pcclInternalError (bad span or length; *why says which).
 */
pcclResult_t ccoip_exec_write(const ccoip_exec *x, const ccoip_action *a, const char **why);

/** A kernel action with its memory resolved and checked (ccoip_kernel_prepare). */
typedef struct ccoip_kernel {
    /** A copy of the action; act.data is NULL (HASH's name is in name). */
    ccoip_action act;
    char name[CCOIP_STATE_NAME_MAX];
    uint8_t *dst;
    const uint8_t *src;
    const uint8_t *base; /**< REDUCE with a base span, GATHER_REDUCE's slots; else NULL. */
    /** After the run: QUANTIZE's metadata, HASH's hash (for KERNEL_DONE). */
    ccoip_quant_meta quant_out;
    uint64_t hash;
} ccoip_kernel;

/** True for the action types ccoip_kernel_prepare takes. */
bool ccoip_kernel_action(ccoip_action_type t);

/**
 * Resolves and checks kernel action a into k. Checks: the action type; every
 * span it reads or writes; REDUCE: count elements of dtype fit dst and src,
 * a base span as long as dst; FINALIZE: count elements fit dst; COPY: src and
 * dst the same length; QUANTIZE / DEQUANTIZE: count elements of the source
 * and code types fit their spans; GATHER_REDUCE: ccoip_action_gather_ok;
 * HASH: a name shorter than CCOIP_STATE_NAME_MAX, src exactly count elements.
 * Returns pcclSuccess, or pcclInternalError with *why (a static string).
 */
pcclResult_t ccoip_kernel_prepare(const ccoip_exec *x, const ccoip_action *a, ccoip_kernel *k,
                                  const char **why);

/**
 * The kernel's work in units: REDUCE and FINALIZE run element ranges, COPY
 * byte ranges; the others run whole (one unit). *unit_bytes (may be NULL)
 * receives the bytes one unit covers (0 for a kernel that runs whole).
 */
uint64_t ccoip_kernel_units(const ccoip_kernel *k, uint64_t *unit_bytes);

/**
 * Runs units [from, from + n) of the kernel (all of a whole-running kernel
 * when from is 0 and n is 1). Returns the kernel's result.
 */
pcclResult_t ccoip_kernel_run_part(ccoip_kernel *k, uint64_t from, uint64_t n);

/** Runs the whole kernel. */
pcclResult_t ccoip_kernel_run(ccoip_kernel *k);

#endif /* CCOIP_EXEC_H */
