/*
 * ccoip_trace.h — the trace file of one state machine (DESIGN.md §5, §7):
 * everything a driver fed to one ccoip_master or ccoip_peer, so that
 * `pccl-sim --replay FILE` re-creates the machine, feeds the same inputs in
 * the same order and checks that it emits the same outputs.
 *
 * Pure C11 like the rest of core/: byte buffers in and out, no stdio, no
 * allocation. The decoder never trusts a length: every read is
 * bounds-checked and malformed input gives pcclProtocolError.
 *
 * File format, version 2 (version 1 files are rejected: reader_init returns
 * pcclProtocolError with hdr->version = 1; v1 did not record the shared-state
 * and topology-optimization inputs, so its runs could not be replayed
 * faithfully anyway). All integers little-endian, fixed width; f64 are
 * their IEEE-754 bits as u64; "bytes" is u64 length + that many bytes.
 *
 *   header   magic "CCOIPTRC" (8 bytes) | u32 version (2) | u32 machine
 *            (1 master, 2 peer) | u64 seed | u32 cfg_len | cfg (cfg_len bytes)
 *     master cfg (65 bytes): u32 max_peers | u32 max_ops | u32 action_queue_depth |
 *            u64 out_bytes | u64 max_message_bytes | u32 heartbeat_ms |
 *            u32 evict_ms | u32 vote_timeout_ms | u32 max_state_keys |
 *            u64 probe_bytes | u32 ring_search_budget | u32 min_collective_world |
 *            u8 canary_skip_abort_verdict | u32 relay_max_bytes (appended; a 61-byte
 *            cfg without it reads as 0)
 *     peer cfg (77 bytes + url): u32 url_len (< CCOIP_URL_MAX) | url bytes (no NUL) |
 *            u32 master_ip_len (<= 16) | 16 bytes master_ip | u32 master_port |
 *            u32 peer_group | u32 p2p_pool_size | u32 max_ops | u32 max_world |
 *            u32 action_queue_depth | u64 out_bytes | u64 max_message_bytes |
 *            u32 max_state_keys | u32 heartbeat_ms | u32 evict_ms |
 *            u8 canary_skip_restore
 *     Fields are what the driver passed to ccoip_*_create (0 = default), i.e.
 *     every field of ccoip_master_config / ccoip_peer_config. A cfg longer
 *     than the fields above is accepted (a later writer may append fields;
 *     the extra bytes are ignored); a shorter one is an error.
 *   records, until the end of the buffer, each: u8 kind | u32 body_len | body
 *     1 EVENT      one ccoip_*_step call, written before the call, every field
 *                  of ccoip_event:
 *                  u32 type (1 .. 9) | u64 now_ns | u64 conn | u8 accepted | u32 listener |
 *                  u32 remote_ip_len (<= 16) | 16 bytes remote_ip | bytes data |
 *                  cmd: u32 type | u64 cmd_id |
 *                       allreduce: u64 tag | u64 count | u32 dtype | u32 op |
 *                                  u32 quant_algorithm | u32 quant_dtype | u8 in_place |
 *                       sync: u64 revision | u32 strategy | u32 num_keys |
 *                             u8 has_keys | has_keys ? num_keys * key |
 *                  done: u64 io_id | u32 result | meta quant | meta quant_out |
 *                        u64 hash | u64 probe_bytes | u64 duration_us
 *                  (meta: u32 algorithm | u32 src_type | u32 quant_type |
 *                   f64 min_value | f64 max_value | f64 scale | i64 zero_point)
 *                  (key: u32 name_n | name_n bytes | u32 dtype | u64 count |
 *                   u8 allow_content_inequality; name_n 0 is a NULL name, else
 *                   the name as the core reads it -- up to CCOIP_STATE_NAME_MAX
 *                   bytes before its NUL -- followed by one NUL byte, so
 *                   name_n <= CCOIP_STATE_NAME_MAX + 1)
 *                  has_keys is 1 exactly when the event is a SUBMIT of
 *                  CCOIP_CMD_SYNC_SHARED_STATE with non-NULL keys (then
 *                  num_keys <= CCOIP_TRACE_MAX_KEYS); the core reads keys of
 *                  no other event.
 *     2 SET_PORT   a ccoip_peer_set_port call: u32 listener | u32 port |
 *                  u32 url_len (< CCOIP_URL_MAX) | url bytes
 *     3 POLLED     u64 n: the driver polled n actions (since the last record)
 *                  before the next record; written only when a driver feeds
 *                  or calls the machine while it is still draining actions.
 *     4 CHECKPOINT u64 events | u64 state_hash: the driver drained every
 *                  action and asked for the deadline; the state hash so far.
 *     5 TRAILER    u64 events | u64 actions | u64 state_hash; last record.
 *   A body must be exactly body_len bytes. A file without a trailer (the
 *   process died) is still valid up to its last complete record.
 *
 * The state hash: a chain over the machine's outputs, in the order the
 * driver saw them, h' = XXH3-64(u64le(h) || record), h0 = 0, with records
 *   'R' | u32 step result                      after each step call,
 *   'A' | every ccoip_action field, in declaration order (payload as u64
 *         length + u64 XXH3; spans as op_slot, region, offset, length, tensor,
 *         tensor as 0 unless region is CCOIP_REGION_TENSOR)
 *                                              for each action polled,
 *   'D' | u64 deadline_ns                      at each CHECKPOINT.
 * A driver that writes traces (the runtime with PCCL_TRACE=file, pccl-sim
 * --record-trace) follows the same protocol: EVENT, step, hash 'R'; poll and
 * hash each action; after draining, hash 'D' and write a CHECKPOINT.
 */
#ifndef CCOIP_TRACE_H
#define CCOIP_TRACE_H

#include <stdbool.h>
#include <stdint.h>

#include "ccoip_master.h"
#include "ccoip_peer.h"
#include "ccoip_sm.h"
#include "pccl_types.h"

#define CCOIP_TRACE_MAGIC   "CCOIPTRC"
#define CCOIP_TRACE_VERSION 2u
/** Keys of one recorded shared-state SUBMIT at most (the encoder refuses more). */
#define CCOIP_TRACE_MAX_KEYS 1024u

typedef enum ccoip_trace_machine {
    CCOIP_TRACE_MASTER = 1,
    CCOIP_TRACE_PEER = 2
} ccoip_trace_machine;

typedef enum ccoip_trace_kind {
    CCOIP_TRACE_EVENT = 1,
    CCOIP_TRACE_SET_PORT = 2,
    CCOIP_TRACE_POLLED = 3,
    CCOIP_TRACE_CHECKPOINT = 4,
    CCOIP_TRACE_TRAILER = 5
} ccoip_trace_kind;

/** The header: which machine and how it was created. */
typedef struct ccoip_trace_header {
    uint32_t version;
    ccoip_trace_machine machine;
    uint64_t seed;
    ccoip_master_config master; /**< machine == CCOIP_TRACE_MASTER. */
    /** machine == CCOIP_TRACE_PEER. The decoder points peer.master_url at
     *  master_url below (NULL when empty): re-point it after copying the struct. */
    ccoip_peer_config peer;
    char master_url[CCOIP_URL_MAX];
} ccoip_trace_header;

/** One decoded record. */
typedef struct ccoip_trace_record {
    ccoip_trace_kind kind;
    ccoip_event event;       /**< EVENT; event.data points into the decoded buffer. */
    uint32_t listener;       /**< SET_PORT. */
    uint32_t port;           /**< SET_PORT. */
    char url[CCOIP_URL_MAX]; /**< SET_PORT (NUL-terminated; empty = none). */
    uint64_t polled;         /**< POLLED. */
    uint64_t events;         /**< CHECKPOINT, TRAILER. */
    uint64_t actions;        /**< TRAILER. */
    uint64_t state_hash;     /**< CHECKPOINT, TRAILER. */
    /** EVENT of a shared-state SUBMIT: event.cmd.sync.keys points here; the key
     *  names point into the decoded buffer. Last field (large: allocate records
     *  on the heap). */
    ccoip_state_key keys[CCOIP_TRACE_MAX_KEYS];
} ccoip_trace_record;

/* ------------------------------------------------------------------------ */
/* Encoder. Each call returns the bytes the record takes and writes them to  */
/* out when cap is large enough (nothing otherwise; out may be NULL to size  */
/* it). 0 means the input cannot be encoded (invalid machine, url too long, */
/* a shared-state SUBMIT with more than CCOIP_TRACE_MAX_KEYS keys).          */
/* ------------------------------------------------------------------------ */

uint64_t ccoip_trace_encode_header(const ccoip_trace_header *h, uint8_t *out, uint64_t cap);
uint64_t ccoip_trace_encode_event(const ccoip_event *ev, uint8_t *out, uint64_t cap);
/** url may be NULL (none). */
uint64_t ccoip_trace_encode_set_port(uint32_t listener, uint32_t port, const char *url,
                                     uint8_t *out, uint64_t cap);
uint64_t ccoip_trace_encode_polled(uint64_t n, uint8_t *out, uint64_t cap);
uint64_t ccoip_trace_encode_checkpoint(uint64_t events, uint64_t state_hash, uint8_t *out,
                                       uint64_t cap);
uint64_t ccoip_trace_encode_trailer(uint64_t events, uint64_t actions, uint64_t state_hash,
                                    uint8_t *out, uint64_t cap);

/* ------------------------------------------------------------------------ */
/* Decoder                                                                   */
/* ------------------------------------------------------------------------ */

typedef struct ccoip_trace_reader {
    const uint8_t *buf;
    uint64_t len;
    uint64_t pos;
    bool ended; /**< A TRAILER was read: nothing may follow. */
} ccoip_trace_reader;

/**
 * Starts reading buf[0 .. len) and decodes its header into *hdr.
 * Returns pcclSuccess; pcclInvalidArgument for NULL arguments;
 * pcclProtocolError for a bad magic, an unknown version or machine, or a
 * malformed or truncated header. After a good magic hdr->version holds the
 * file's version even on error, so a caller can name an unsupported one.
 */
pcclResult_t ccoip_trace_reader_init(ccoip_trace_reader *r, const uint8_t *buf, uint64_t len,
                                     ccoip_trace_header *hdr);

/**
 * Decodes the next record into *rec; *done = true (and rec untouched) at
 * the end of the buffer. Returns pcclSuccess, or pcclProtocolError for a
 * malformed or truncated record, an unknown kind, or bytes after the trailer.
 */
pcclResult_t ccoip_trace_next(ccoip_trace_reader *r, ccoip_trace_record *rec, bool *done);

/* ------------------------------------------------------------------------ */
/* The state hash                                                            */
/* ------------------------------------------------------------------------ */

typedef struct ccoip_trace_hasher {
    uint64_t hash;
    uint64_t actions; /**< Actions hashed. */
} ccoip_trace_hasher;

void ccoip_trace_hasher_init(ccoip_trace_hasher *h);
/** 'R': the result of one step call. */
void ccoip_trace_hash_step(ccoip_trace_hasher *h, int result);
/** 'A': one polled action (every field; payload bytes by length and XXH3). */
void ccoip_trace_hash_action(ccoip_trace_hasher *h, const ccoip_action *a);
/** 'D': the deadline asked after draining. */
void ccoip_trace_hash_deadline(ccoip_trace_hasher *h, uint64_t deadline_ns);

/* ------------------------------------------------------------------------ */
/* The writer: the record sequence a driver produces, in one place          */
/* ------------------------------------------------------------------------ */

/**
 * The trace of one machine as a driver writes it (the simulator, the runtime
 * with PCCL_TRACE): a growable in-memory buffer, the state hash, the event
 * count and the actions polled since the last record, with one call per
 * point of the driver protocol above:
 *
 *   ccoip_trace_writer_header            once, before the first event;
 *   ccoip_trace_writer_event             before each step call (a POLLED
 *                                        record first when actions were
 *                                        polled since the last record);
 *   ccoip_trace_writer_step              after it ('R');
 *   ccoip_trace_writer_action            for each action polled ('A');
 *   ccoip_trace_writer_set_port          before a ccoip_peer_set_port call;
 *   ccoip_trace_writer_checkpoint        after draining ('D', CHECKPOINT);
 *   ccoip_trace_writer_trailer           at the end.
 *
 * The bytes are buf[0 .. len). A driver that keeps the whole trace in memory
 * (pccl-sim) reads them at the end; one that writes a file drains it: after a
 * call, when len passes its threshold, it writes buf[0 .. len) out and calls
 * ccoip_trace_writer_drained (len = 0; the buffer and the counters stay).
 *
 * Errors are sticky: after the first failure (a record that cannot be
 * encoded, out of memory) every append returns that code and writes nothing;
 * the hash calls still run. Uses malloc/realloc/free (deterministic); no I/O.
 * Not thread-safe: one writer per machine, used by the thread that steps it.
 */
typedef struct ccoip_trace_writer {
    uint8_t *buf; /**< buf[0 .. len): the records not yet drained. */
    uint64_t len, cap;
    ccoip_trace_hasher hasher;
    uint64_t events;    /**< EVENT records written (CHECKPOINT, TRAILER). */
    uint64_t polled;    /**< Actions polled since the last record. */
    pcclResult_t error; /**< The first failure (pcclSuccess: none). */
} ccoip_trace_writer;

/** An empty writer (no allocation yet). */
void ccoip_trace_writer_init(ccoip_trace_writer *tw);
/** Frees the buffer; the writer is empty again (init). */
void ccoip_trace_writer_deinit(ccoip_trace_writer *tw);
/** The driver wrote buf[0 .. len) out: len = 0 (capacity, hash and counters stay). */
void ccoip_trace_writer_drained(ccoip_trace_writer *tw);

/**
 * The header; starts the state hash (ccoip_trace_hasher_init). Returns
 * pcclSuccess; pcclInvalidArgument when h cannot be encoded (invalid
 * machine, url too long); pcclInternalError when out of memory; or the
 * writer's earlier error.
 */
pcclResult_t ccoip_trace_writer_header(ccoip_trace_writer *tw, const ccoip_trace_header *h);
/**
 * EVENT (before the step call), after a POLLED record of the actions polled
 * since the last record, if any; counts the event. Returns as _header
 * (pcclInvalidArgument: a shared-state SUBMIT with more than
 * CCOIP_TRACE_MAX_KEYS keys).
 */
pcclResult_t ccoip_trace_writer_event(ccoip_trace_writer *tw, const ccoip_event *ev);
/** SET_PORT (url may be NULL: none), after a POLLED record as for an event. Returns as _header. */
pcclResult_t ccoip_trace_writer_set_port(ccoip_trace_writer *tw, uint32_t listener, uint32_t port,
                                         const char *url);
/** POLLED for the actions polled since the last record (nothing when none). Returns as _header. */
pcclResult_t ccoip_trace_writer_polled(ccoip_trace_writer *tw);
/** Hashes the result of one step call ('R'). */
void ccoip_trace_writer_step(ccoip_trace_writer *tw, int result);
/** Hashes one polled action ('A') and counts it as polled. */
void ccoip_trace_writer_action(ccoip_trace_writer *tw, const ccoip_action *a);
/**
 * After draining: hashes the deadline ('D') and writes a CHECKPOINT (a
 * checkpoint drains every action: the polled count restarts). Returns as _header.
 */
pcclResult_t ccoip_trace_writer_checkpoint(ccoip_trace_writer *tw, uint64_t deadline_ns);
/** TRAILER: events, actions hashed, state hash. Returns as _header. */
pcclResult_t ccoip_trace_writer_trailer(ccoip_trace_writer *tw);

#endif /* CCOIP_TRACE_H */
