/*
 * ccoip_sm_internal.h — shared plumbing of the master and peer state
 * machines: the bounded action queue, the per-step output byte pool, LOG
 * formatting without stdio, and frame encoding into the pool. Private to
 * core/ (core/internal/ is not on any other target's include path; tidy_core_pure
 * checks that nothing outside core/ includes it).
 */
#ifndef CCOIP_SM_INTERNAL_H
#define CCOIP_SM_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "ccoip_frame.h"
#include "ccoip_hash.h"
#include "ccoip_sm.h"

/** The outputs of one machine: a ring of actions and the bytes they point to. */
typedef struct sm_out {
    ccoip_action *q;
    uint32_t cap;
    uint32_t head;
    uint32_t count;
    uint8_t *pool;
    uint64_t pool_cap;
    uint64_t pool_used;
    /** Sticky: an action or bytes had to be dropped (bound hit). */
    bool overflow;
} sm_out;

/** Allocates the queue and pool. Returns pcclSuccess or pcclSystemError. */
pcclResult_t sm_out_init(sm_out *o, uint32_t depth, uint64_t pool_bytes);
void sm_out_free(sm_out *o);
/** Called at the start of every step: recycles the byte pool when the queue was drained. */
void sm_out_begin_step(sm_out *o);
/** Appends a zeroed action of type t; NULL (and overflow set) when the queue is full. */
ccoip_action *sm_out_push(sm_out *o, ccoip_action_type t);
/** n bytes from the pool, valid until the pool is recycled; NULL (overflow) when full. */
uint8_t *sm_out_alloc(sm_out *o, uint64_t n);
/** Pops the oldest action. */
bool sm_out_pop(sm_out *o, ccoip_action *out);
/**
 * Pops the oldest action without copying it (NULL when none). The action stays valid until
 * the machine's next step (a step may reuse its slot); its bytes, like a copied action's,
 * until the pool is recycled.
 */
const ccoip_action *sm_out_pop_ref(sm_out *o);

/**
 * Queues a LOG action. fmt understands %s (const char *), %U (uint64_t),
 * %u (uint32_t), %d (int32_t) and %%; the text is cut at CCOIP_LOG_TEXT_MAX - 1.
 */
void sm_log(sm_out *o, ccoip_log_level level, const char *fmt, ...);
/** Digits of a uint64_t in decimal at most. */
#define SM_U64_DEC_MAX 20u
/** Writes v in decimal (no terminator) at out; returns the digits written. */
uint32_t sm_u64_dec(char out[SM_U64_DEC_MAX], uint64_t v);

/** Encodes env as a control frame into the pool and queues SEND(conn). */
pcclResult_t sm_send_m2p(sm_out *o, const ccoip_codec_limits *lim, uint64_t conn,
                         const ccoip_pb_master_to_peer *env);
/**
 * As sm_send_p2m for a frame whose encoding ends with the `tail` bytes of a span (contract v9):
 * env's last encoded field is a bytes field of tail bytes (its data is not read: zeros stand
 * in); the SEND carries the frame without them and src = span, which the driver appends.
 * pcclInvalidArgument when the encoding does not end with that field.
 */
pcclResult_t sm_send_p2m_span(sm_out *o, const ccoip_codec_limits *lim, uint64_t conn,
                              ccoip_pb_peer_to_master *env, ccoip_pb_bytes *field, uint32_t op_slot,
                              ccoip_span_ref span);
pcclResult_t sm_send_p2m(sm_out *o, const ccoip_codec_limits *lim, uint64_t conn,
                         const ccoip_pb_peer_to_master *env);
/** Encodes a data header (no payload) into the pool and queues SEND(conn). */
pcclResult_t sm_send_data_header(sm_out *o, const ccoip_codec_limits *lim, uint64_t conn,
                                 const ccoip_data_header *h);

/** Encodes a data header whose payload is a proof (an authenticated HELLO or PROBE_REQUEST,
 *  docs/protocol.md §8.0; h.length is set) and queues SEND(conn). */
pcclResult_t sm_send_data_proof(sm_out *o, const ccoip_codec_limits *lim, uint64_t conn,
                                ccoip_data_header *h, const uint8_t proof[CCOIP_DATA_PROOF_BYTES]);

/** Encodes a STATE_REQUEST / STATE_RESPONSE data frame (h.length is set) and queues SEND(conn). */
pcclResult_t sm_send_state_request(sm_out *o, const ccoip_codec_limits *lim, uint64_t conn,
                                   ccoip_data_header *h, const ccoip_pb_shared_state_request *req);
pcclResult_t sm_send_state_response(sm_out *o, const ccoip_codec_limits *lim, uint64_t conn,
                                    ccoip_data_header *h,
                                    const ccoip_pb_shared_state_response *resp);

/** a + b saturating at UINT64_MAX. */
static inline uint64_t sm_add_sat(uint64_t a, uint64_t b)
{
    return (a > UINT64_MAX - b) ? UINT64_MAX : a + b;
}

/** Milliseconds to nanoseconds. */
static inline uint64_t sm_ms(uint32_t ms)
{
    return (uint64_t)ms * 1000000u;
}

/** splitmix64 step (the machines' only randomness). */
static inline uint64_t sm_rng_next(uint64_t *state)
{
    return ccoip_splitmix64(state);
}

#endif /* CCOIP_SM_INTERNAL_H */
