/*
 * sim_trace.h — the trace hash: every event fed to every state machine is
 * folded into an XXH3 chain, hash = XXH3(u64le(hash) || record), where a
 * record is built from explicit little-endian fixed-width fields (never a
 * struct), so native and WASM builds give the same value for the same seed.
 */
#ifndef SIM_TRACE_H
#define SIM_TRACE_H

#include <stdint.h>

#define SIM_TRACE_RECORD_MAX 256u

typedef struct sim_trace {
    uint64_t hash;
    uint64_t records;
    uint8_t buf[8u + SIM_TRACE_RECORD_MAX];
    uint32_t len;
} sim_trace;

void sim_trace_init(sim_trace *t);
/** Starts a record. */
void sim_trace_begin(sim_trace *t);
void sim_trace_u8(sim_trace *t, uint8_t v);
void sim_trace_u32(sim_trace *t, uint32_t v);
void sim_trace_u64(sim_trace *t, uint64_t v);
/** Adds len bytes as their length and XXH3 (so records stay bounded). */
void sim_trace_bytes(sim_trace *t, const void *data, uint64_t len);
/** Folds the record into the chain. */
void sim_trace_end(sim_trace *t);

#endif /* SIM_TRACE_H */
