/*
 * test_trace.c — the trace file codec and state hash (core/ccoip_trace.h):
 * round trips of every record kind, the exact byte layout of the header,
 * and malformed input (every truncation, every single-byte corruption of a
 * small trace, lying lengths) decoding to pcclProtocolError, never a crash.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "ccoip_trace.h"
#include "ptest.h"

static uint64_t le(const uint8_t *p, unsigned n)
{
    uint64_t v = 0;
    for (unsigned i = 0; i < n; i++)
        v |= (uint64_t)p[i] << (8u * i);
    return v;
}

/* A small trace: peer header, a START, SET_PORT, a RECV with payload, an
 * all-reduce SUBMIT, a shared-state SUBMIT with two keys, an IO_DONE, a
 * KERNEL_DONE with a hash, a PROBE_DONE, POLLED, CHECKPOINT, TRAILER.
 * Returns its length. */
#define TRACE_RECORDS 11u
static uint64_t build_trace(uint8_t *buf, uint64_t cap)
{
    ccoip_trace_header h;
    memset(&h, 0, sizeof h);
    h.machine = CCOIP_TRACE_PEER;
    h.seed = 0x1122334455667788u;
    h.peer.master_url = "tcp://10.0.0.1:48148";
    h.peer.peer_group = 7;
    h.peer.max_ops = 8;
    h.peer.heartbeat_ms = 250;
    uint64_t n = ccoip_trace_encode_header(&h, buf, cap);
    ccoip_event ev;
    memset(&ev, 0, sizeof ev);
    ev.type = CCOIP_EV_START;
    n += ccoip_trace_encode_event(&ev, buf + n, cap - n);
    n += ccoip_trace_encode_set_port(CCOIP_LISTENER_P2P, 40000, NULL, buf + n, cap - n);
    static const uint8_t frame[5] = {1, 2, 3, 4, 5};
    ev.type = CCOIP_EV_RECV;
    ev.now_ns = 12345;
    ev.conn = 1;
    ev.data = frame;
    ev.len = sizeof frame;
    n += ccoip_trace_encode_event(&ev, buf + n, cap - n);
    memset(&ev, 0, sizeof ev);
    ev.type = CCOIP_EV_SUBMIT;
    ev.now_ns = 20000;
    ev.cmd.type = CCOIP_CMD_ALL_REDUCE;
    ev.cmd.cmd_id = 9;
    ev.cmd.allreduce.count = 64;
    ev.cmd.allreduce.dtype = pcclFloat;
    ev.cmd.allreduce.op = pcclAvg;
    ev.cmd.allreduce.in_place = true;
    n += ccoip_trace_encode_event(&ev, buf + n, cap - n);
    static const ccoip_state_key keys[2] = {{"model.w", pcclFloat, 1000, false},
                                            {"optim.step", pcclUint64, 1, true}};
    memset(&ev, 0, sizeof ev);
    ev.type = CCOIP_EV_SUBMIT;
    ev.now_ns = 25000;
    ev.cmd.type = CCOIP_CMD_SYNC_SHARED_STATE;
    ev.cmd.cmd_id = 10;
    ev.cmd.sync.revision = 42;
    ev.cmd.sync.strategy = PCCL_SHARED_STATE_SYNC_STRATEGY_SEND_ONLY;
    ev.cmd.sync.num_keys = 2;
    ev.cmd.sync.keys = keys;
    n += ccoip_trace_encode_event(&ev, buf + n, cap - n);
    memset(&ev, 0, sizeof ev);
    ev.type = CCOIP_EV_IO_DONE;
    ev.now_ns = 30000;
    ev.done.io_id = 77;
    ev.done.result = pcclRankConnectionLost;
    ev.done.quant.algorithm = pcclQuantMinMax;
    ev.done.quant.min_value = -1.5;
    ev.done.quant.max_value = 2.25;
    n += ccoip_trace_encode_event(&ev, buf + n, cap - n);
    memset(&ev, 0, sizeof ev);
    ev.type = CCOIP_EV_KERNEL_DONE;
    ev.now_ns = 31000;
    ev.done.io_id = 78;
    ev.done.hash = 0xfeedface12345678u;
    n += ccoip_trace_encode_event(&ev, buf + n, cap - n);
    memset(&ev, 0, sizeof ev);
    ev.type = CCOIP_EV_PROBE_DONE;
    ev.now_ns = 32000;
    ev.done.io_id = 79;
    ev.done.probe_bytes = 1u << 20;
    ev.done.duration_us = 1234;
    n += ccoip_trace_encode_event(&ev, buf + n, cap - n);
    n += ccoip_trace_encode_polled(3, buf + n, cap - n);
    n += ccoip_trace_encode_checkpoint(4, 0xabcdef, buf + n, cap - n);
    n += ccoip_trace_encode_trailer(4, 10, 0xabcdef, buf + n, cap - n);
    return n;
}

/* Decodes everything; pcclSuccess or the first error. */
static pcclResult_t decode_all(const uint8_t *buf, uint64_t len, uint32_t *records)
{
    ccoip_trace_reader r;
    ccoip_trace_header h;
    pcclResult_t rc = ccoip_trace_reader_init(&r, buf, len, &h);
    if (rc != pcclSuccess) return rc;
    ccoip_trace_record *rec = malloc(sizeof *rec);
    *records = 0;
    for (;;) {
        bool done = false;
        rc = ccoip_trace_next(&r, rec, &done);
        if (rc != pcclSuccess || done) break;
        (*records)++;
        if (rec->kind == CCOIP_TRACE_EVENT && rec->event.len > 0) {
            /* The payload lies inside the buffer. */
            if (rec->event.data < buf || rec->event.data + rec->event.len > buf + len) {
                rc = pcclInternalError;
                break;
            }
        }
    }
    free(rec);
    return rc;
}

PTEST(trace, round_trip)
{
    uint8_t buf[4096];
    const uint64_t n = build_trace(buf, sizeof buf);
    PT_ASSERT(n > 0 && n < sizeof buf, "trace of %llu bytes", (unsigned long long)n);
    ccoip_trace_reader r;
    ccoip_trace_header h;
    PT_ASSERT(ccoip_trace_reader_init(&r, buf, n, &h) == pcclSuccess, "header decodes");
    PT_EXPECT(h.machine == CCOIP_TRACE_PEER && h.seed == 0x1122334455667788u, "machine, seed");
    PT_EXPECT(h.peer.master_url != NULL && strcmp(h.peer.master_url, "tcp://10.0.0.1:48148") == 0,
              "url");
    PT_EXPECT(h.peer.peer_group == 7 && h.peer.max_ops == 8 && h.peer.heartbeat_ms == 250,
              "peer config fields");
    ccoip_trace_record *recp = malloc(sizeof *recp);
    PT_ASSERT(recp != NULL, "alloc");
#define rec (*recp)
    bool done = false;
    static const ccoip_trace_kind kinds[TRACE_RECORDS] = {
        CCOIP_TRACE_EVENT,  CCOIP_TRACE_SET_PORT,   CCOIP_TRACE_EVENT,  CCOIP_TRACE_EVENT,
        CCOIP_TRACE_EVENT,  CCOIP_TRACE_EVENT,      CCOIP_TRACE_EVENT,  CCOIP_TRACE_EVENT,
        CCOIP_TRACE_POLLED, CCOIP_TRACE_CHECKPOINT, CCOIP_TRACE_TRAILER};
    for (unsigned i = 0; i < TRACE_RECORDS; i++) {
        PT_ASSERT(ccoip_trace_next(&r, &rec, &done) == pcclSuccess && !done, "record %u", i);
        PT_ASSERT(rec.kind == kinds[i], "record %u kind %d", i, (int)rec.kind);
        if (i == 1) PT_EXPECT(rec.listener == 0 && rec.port == 40000 && rec.url[0] == 0, "port");
        if (i == 2) {
            PT_EXPECT(rec.event.type == CCOIP_EV_RECV && rec.event.now_ns == 12345 &&
                          rec.event.conn == 1 && rec.event.len == 5 && rec.event.data[4] == 5,
                      "recv event");
        }
        if (i == 3) {
            PT_EXPECT(rec.event.cmd.type == CCOIP_CMD_ALL_REDUCE && rec.event.cmd.cmd_id == 9 &&
                          rec.event.cmd.allreduce.count == 64 &&
                          rec.event.cmd.allreduce.dtype == pcclFloat &&
                          rec.event.cmd.allreduce.op == pcclAvg && rec.event.cmd.allreduce.in_place,
                      "submit");
        }
        if (i == 4) {
            const ccoip_sync_args *sy = &rec.event.cmd.sync;
            PT_EXPECT(rec.event.cmd.type == CCOIP_CMD_SYNC_SHARED_STATE && sy->revision == 42 &&
                          sy->strategy == PCCL_SHARED_STATE_SYNC_STRATEGY_SEND_ONLY &&
                          sy->num_keys == 2 && sy->keys != NULL,
                      "sync submit");
            if (sy->keys != NULL) {
                PT_EXPECT(strcmp(sy->keys[0].name, "model.w") == 0 &&
                              sy->keys[0].dtype == pcclFloat && sy->keys[0].count == 1000 &&
                              !sy->keys[0].allow_content_inequality,
                          "key 0");
                PT_EXPECT(strcmp(sy->keys[1].name, "optim.step") == 0 &&
                              sy->keys[1].dtype == pcclUint64 && sy->keys[1].count == 1 &&
                              sy->keys[1].allow_content_inequality,
                          "key 1");
            }
        }
        if (i == 6) {
            PT_EXPECT(rec.event.type == CCOIP_EV_KERNEL_DONE && rec.event.done.io_id == 78 &&
                          rec.event.done.hash == 0xfeedface12345678u,
                      "kernel done hash");
        }
        if (i == 7) {
            PT_EXPECT(rec.event.type == CCOIP_EV_PROBE_DONE && rec.event.done.io_id == 79 &&
                          rec.event.done.probe_bytes == (1u << 20) &&
                          rec.event.done.duration_us == 1234,
                      "probe done");
        }
        if (i == 5) {
            PT_EXPECT(rec.event.done.io_id == 77 &&
                          rec.event.done.result == pcclRankConnectionLost &&
                          rec.event.done.quant.min_value == -1.5 &&
                          rec.event.done.quant.max_value == 2.25,
                      "io done");
        }
        if (i == 8) PT_EXPECT(rec.polled == 3, "polled");
        if (i == 9) PT_EXPECT(rec.events == 4 && rec.state_hash == 0xabcdef, "checkpoint");
        if (i == 10) {
            PT_EXPECT(rec.events == 4 && rec.actions == 10 && rec.state_hash == 0xabcdef,
                      "trailer");
        }
    }
    PT_ASSERT(ccoip_trace_next(&r, &rec, &done) == pcclSuccess && done, "end");
#undef rec
    free(recp);
}

PTEST(trace, key_names)
{
    /* A NULL name, a name longer than the core reads (recorded as its first
     * CCOIP_STATE_NAME_MAX bytes), an empty name: each round-trips to the same bytes. */
    char longname[300];
    memset(longname, 'k', sizeof longname - 1u);
    longname[sizeof longname - 1u] = '\0';
    const ccoip_state_key keys[3] = {
        {NULL, pcclFloat, 1, false}, {longname, pcclFloat, 2, false}, {"", pcclUint8, 3, true}};
    ccoip_event ev;
    memset(&ev, 0, sizeof ev);
    ev.type = CCOIP_EV_SUBMIT;
    ev.cmd.type = CCOIP_CMD_SYNC_SHARED_STATE;
    ev.cmd.sync.num_keys = 3;
    ev.cmd.sync.keys = keys;
    uint8_t hb[256], buf[2048], again[2048];
    ccoip_trace_header h;
    memset(&h, 0, sizeof h);
    h.machine = CCOIP_TRACE_MASTER;
    const uint64_t hn = ccoip_trace_encode_header(&h, hb, sizeof hb);
    memcpy(buf, hb, (size_t)hn);
    const uint64_t en = ccoip_trace_encode_event(&ev, buf + hn, sizeof buf - hn);
    PT_ASSERT(en > 0 && hn + en <= sizeof buf, "encoded");
    ccoip_trace_reader r;
    PT_ASSERT(ccoip_trace_reader_init(&r, buf, hn + en, &h) == pcclSuccess, "header");
    ccoip_trace_record *rec = malloc(sizeof *rec);
    bool done = false;
    PT_ASSERT(ccoip_trace_next(&r, rec, &done) == pcclSuccess && !done, "event");
    const ccoip_sync_args *sy = &rec->event.cmd.sync;
    PT_EXPECT(sy->num_keys == 3 && sy->keys[0].name == NULL, "NULL name");
    PT_EXPECT(strlen(sy->keys[1].name) == CCOIP_STATE_NAME_MAX && sy->keys[1].count == 2,
              "long name cut where the core stops reading");
    PT_EXPECT(sy->keys[2].name != NULL && sy->keys[2].name[0] == '\0', "empty name");
    PT_EXPECT(ccoip_trace_encode_event(&rec->event, again, sizeof again) == en &&
                  memcmp(again, buf + hn, (size_t)en) == 0,
              "re-encodes to the same bytes");
    /* Keys of a non-sync command are not recorded; too many keys cannot be. */
    ev.cmd.type = CCOIP_CMD_ALL_REDUCE;
    const uint64_t plain = ccoip_trace_encode_event(&ev, NULL, 0);
    PT_EXPECT(plain > 0 && plain < en, "no keys for an all-reduce");
    ev.cmd.type = CCOIP_CMD_SYNC_SHARED_STATE;
    ev.cmd.sync.num_keys = CCOIP_TRACE_MAX_KEYS + 1u;
    PT_EXPECT(ccoip_trace_encode_event(&ev, NULL, 0) == 0, "more than CCOIP_TRACE_MAX_KEYS");
    /* A name byte turned into an interior NUL, a missing final NUL: malformed. */
    const uint64_t name1 = hn + 5u + 4u + 8u + 8u + 1u + 4u + 4u + 16u + 8u + 4u + 8u + 8u + 8u +
                           4u * 4u + 1u + 8u + 4u + 4u + 1u + (4u + 4u + 8u + 1u);
    PT_ASSERT(le(buf + name1, 4) == CCOIP_STATE_NAME_MAX + 1u, "name length found");
    buf[name1 + 4u + 3u] = 0;
    PT_ASSERT(ccoip_trace_reader_init(&r, buf, hn + en, &h) == pcclSuccess, "header");
    PT_EXPECT(ccoip_trace_next(&r, rec, &done) == pcclProtocolError, "interior NUL");
    buf[name1 + 4u + 3u] = 'k';
    buf[name1 + 4u + CCOIP_STATE_NAME_MAX] = 'k';
    PT_ASSERT(ccoip_trace_reader_init(&r, buf, hn + en, &h) == pcclSuccess, "header");
    PT_EXPECT(ccoip_trace_next(&r, rec, &done) == pcclProtocolError, "no final NUL");
    free(rec);
}

PTEST(trace, v1_rejected)
{
    uint8_t buf[4096];
    const uint64_t n = build_trace(buf, sizeof buf);
    buf[8] = 1; /* version 1 */
    ccoip_trace_reader r;
    ccoip_trace_header h;
    PT_EXPECT(ccoip_trace_reader_init(&r, buf, n, &h) == pcclProtocolError && h.version == 1,
              "a v1 file is refused and its version reported");
}

PTEST(trace, header_layout)
{
    ccoip_trace_header h;
    memset(&h, 0, sizeof h);
    h.machine = CCOIP_TRACE_MASTER;
    h.seed = 5;
    h.master.max_peers = 100;
    h.master.heartbeat_ms = 250;
    h.master.canary_skip_abort_verdict = true;
    uint8_t buf[256];
    const uint64_t n = ccoip_trace_encode_header(&h, buf, sizeof buf);
    h.master.max_state_keys = 17;
    h.master.probe_bytes = 65536;
    h.master.relay_max_bytes = 16384;
    const uint64_t n2 = ccoip_trace_encode_header(&h, buf, sizeof buf);
    PT_ASSERT(n2 == 28u + 65u, "master header is %llu bytes", (unsigned long long)n2);
    PT_EXPECT(memcmp(buf, "CCOIPTRC", 8) == 0, "magic");
    PT_EXPECT(le(buf + 8, 4) == 2 && le(buf + 12, 4) == 1 && le(buf + 16, 8) == 5, "version");
    PT_EXPECT(le(buf + 24, 4) == 65 && le(buf + 28, 4) == 100, "cfg_len, max_peers");
    PT_EXPECT(le(buf + 28 + 61, 4) == 16384, "relay_max_bytes appended");
    PT_EXPECT(le(buf + 28 + 28, 4) == 250 && buf[28 + 60] == 1, "heartbeat_ms, canary");
    PT_EXPECT(le(buf + 28 + 40, 4) == 17 && le(buf + 28 + 44, 8) == 65536,
              "max_state_keys, probe_bytes");
    ccoip_trace_reader r;
    ccoip_trace_header d;
    PT_ASSERT(ccoip_trace_reader_init(&r, buf, n2, &d) == pcclSuccess, "decodes");
    PT_EXPECT(d.master.max_state_keys == 17 && d.master.probe_bytes == 65536 &&
                  d.master.canary_skip_abort_verdict && d.master.max_peers == 100 &&
                  d.master.relay_max_bytes == 16384,
              "master config round trip");
    /* A header written before relay_max_bytes was appended (61-byte cfg) reads as relay off. */
    uint8_t old[28 + 61];
    memcpy(old, buf, sizeof old);
    old[24] = 61;
    PT_ASSERT(ccoip_trace_reader_init(&r, old, sizeof old, &d) == pcclSuccess, "61-byte cfg");
    PT_EXPECT(d.master.relay_max_bytes == 0 && d.master.max_peers == 100, "old cfg: relay off");
    memset(&h, 0, sizeof h);
    h.machine = CCOIP_TRACE_PEER;
    h.peer.max_state_keys = 9;
    h.peer.canary_skip_restore = true;
    const uint64_t pn = ccoip_trace_encode_header(&h, buf, sizeof buf);
    PT_ASSERT(pn == 28u + 77u, "peer header without url is %llu bytes", (unsigned long long)pn);
    PT_ASSERT(ccoip_trace_reader_init(&r, buf, pn, &d) == pcclSuccess, "peer decodes");
    PT_EXPECT(d.peer.max_state_keys == 9 && d.peer.canary_skip_restore && d.peer.master_url == NULL,
              "peer config round trip");
    h.machine = CCOIP_TRACE_MASTER;
    h.master.max_peers = 100;
    h.master.heartbeat_ms = 250;
    h.master.canary_skip_abort_verdict = true;
    /* Too small a buffer: the size, nothing written. */
    uint8_t small[8] = {0};
    PT_EXPECT(ccoip_trace_encode_header(&h, small, sizeof small) == n && small[0] == 0, "sizing");
    h.machine = (ccoip_trace_machine)9;
    PT_EXPECT(ccoip_trace_encode_header(&h, buf, sizeof buf) == 0, "bad machine refused");
}

PTEST(trace, every_truncation)
{
    uint8_t buf[4096];
    const uint64_t n = build_trace(buf, sizeof buf);
    uint32_t full = 0;
    PT_ASSERT(decode_all(buf, n, &full) == pcclSuccess && full == TRACE_RECORDS, "full trace: %u",
              full);
    uint32_t ok_prefixes = 0;
    for (uint64_t len = 0; len < n; len++) {
        uint8_t *copy = malloc((size_t)len + 1u);
        memcpy(copy, buf, (size_t)len);
        uint32_t recs = 0;
        const pcclResult_t rc = decode_all(copy, len, &recs);
        PT_EXPECT(rc == pcclSuccess || rc == pcclProtocolError, "len %llu: rc %d",
                  (unsigned long long)len, (int)rc);
        if (rc == pcclSuccess) ok_prefixes++;
        free(copy);
    }
    /* Only the cuts at record boundaries decode (header + 0..10 records). */
    PT_EXPECT(ok_prefixes == TRACE_RECORDS, "%u prefixes decode", ok_prefixes);
}

PTEST(trace, every_byte_flip)
{
    uint8_t buf[4096];
    const uint64_t n = build_trace(buf, sizeof buf);
    for (uint64_t i = 0; i < n; i++) {
        for (unsigned bit = 0; bit < 8; bit += 3) {
            buf[i] ^= (uint8_t)(1u << bit);
            uint32_t recs = 0;
            const pcclResult_t rc = decode_all(buf, n, &recs);
            PT_EXPECT(rc == pcclSuccess || rc == pcclProtocolError, "byte %llu: rc %d",
                      (unsigned long long)i, (int)rc);
            buf[i] ^= (uint8_t)(1u << bit);
        }
    }
}

PTEST(trace, lying_lengths)
{
    uint8_t buf[4096];
    const uint64_t n = build_trace(buf, sizeof buf);
    ccoip_trace_reader r;
    ccoip_trace_header h;
    PT_ASSERT(ccoip_trace_reader_init(&r, buf, n, &h) == pcclSuccess, "header");
    const uint64_t first = r.pos;
    /* Body length of the first record: huge. */
    uint8_t save[4];
    memcpy(save, buf + first + 1, 4);
    memset(buf + first + 1, 0xff, 4);
    uint32_t recs = 0;
    PT_EXPECT(decode_all(buf, n, &recs) == pcclProtocolError, "u32 body length beyond the end");
    memcpy(buf + first + 1, save, 4);
    /* The data length inside the RECV event (record 3): beyond its body. */
    ccoip_trace_record *rec = malloc(sizeof *rec);
    bool done;
    PT_ASSERT(ccoip_trace_next(&r, rec, &done) == pcclSuccess, "r1");
    PT_ASSERT(ccoip_trace_next(&r, rec, &done) == pcclSuccess, "r2");
    free(rec);
    const uint64_t recv_at = r.pos;
    const uint64_t data_len_at = recv_at + 5u + 4u + 8u + 8u + 1u + 4u + 4u + 16u;
    PT_ASSERT(le(buf + data_len_at, 8) == 5, "data length field found");
    buf[data_len_at + 7] = 0x80;
    PT_EXPECT(decode_all(buf, n, &recs) == pcclProtocolError, "u64 data length beyond the body");
    buf[data_len_at + 7] = 0;
    /* An unknown record kind; bytes after the trailer; a cfg_len beyond the end. */
    buf[first] = 99;
    PT_EXPECT(decode_all(buf, n, &recs) == pcclProtocolError, "unknown kind");
    buf[first] = CCOIP_TRACE_EVENT;
    buf[n] = 0;
    PT_EXPECT(decode_all(buf, n + 1u, &recs) == pcclProtocolError, "bytes after the trailer");
    buf[27] = 0xff;
    PT_EXPECT(decode_all(buf, n, &recs) == pcclProtocolError, "cfg_len beyond the end");
    PT_EXPECT(ccoip_trace_reader_init(&r, NULL, 0, &h) == pcclProtocolError, "empty buffer");
}

PTEST(trace, state_hash)
{
    ccoip_trace_hasher a, b;
    ccoip_trace_hasher_init(&a);
    ccoip_trace_hasher_init(&b);
    ccoip_action act;
    memset(&act, 0, sizeof act);
    act.type = CCOIP_ACT_SEND;
    act.conn = 1;
    static const uint8_t payload[3] = {9, 8, 7};
    act.data = payload;
    act.len = 3;
    ccoip_trace_hash_step(&a, 0);
    ccoip_trace_hash_action(&a, &act);
    ccoip_trace_hash_deadline(&a, 1000);
    ccoip_trace_hash_step(&b, 0);
    ccoip_trace_hash_action(&b, &act);
    ccoip_trace_hash_deadline(&b, 1000);
    PT_EXPECT(a.hash == b.hash && a.actions == 1, "same outputs, same hash");
    const uint64_t h0 = a.hash;
    ccoip_trace_hasher_init(&b);
    ccoip_trace_hash_step(&b, 0);
    act.seq = 1; /* any field changes the hash */
    ccoip_trace_hash_action(&b, &act);
    ccoip_trace_hash_deadline(&b, 1000);
    PT_EXPECT(b.hash != h0, "a changed field changes the hash");
    ccoip_trace_hasher_init(&b);
    ccoip_trace_hash_step(&b, 0);
    act.seq = 0;
    ccoip_trace_hash_action(&b, &act);
    ccoip_trace_hash_deadline(&b, 1001);
    PT_EXPECT(b.hash != h0, "a changed deadline changes the hash");
    /* The v3 action fields are hashed too. */
    ccoip_trace_hasher_init(&b);
    ccoip_trace_hash_step(&b, 0);
    act.src.tensor = 1;
    ccoip_trace_hash_action(&b, &act);
    ccoip_trace_hash_deadline(&b, 1000);
    PT_EXPECT(b.hash == h0, "span.tensor outside a TENSOR span is not hashed");
    ccoip_trace_hasher_init(&b);
    ccoip_trace_hash_step(&b, 0);
    act.src.region = CCOIP_REGION_TENSOR;
    ccoip_trace_hash_action(&b, &act);
    const uint64_t with_tensor = b.hash;
    ccoip_trace_hasher_init(&b);
    ccoip_trace_hash_step(&b, 0);
    act.src.tensor = 2;
    ccoip_trace_hash_action(&b, &act);
    PT_EXPECT(b.hash != with_tensor, "span.tensor of a TENSOR span changes the hash");
    act.src.tensor = 0;
    act.src.region = 0;
    ccoip_trace_hasher_init(&b);
    ccoip_trace_hash_step(&b, 0);
    act.revision = 3;
    ccoip_trace_hash_action(&b, &act);
    ccoip_trace_hash_deadline(&b, 1000);
    PT_EXPECT(b.hash != h0, "revision changes the hash");
}

/* The writer (ccoip_trace_writer) appends the driver protocol's records: one pass with the
 * writer, whole or drained in small pieces, gives the bytes of the encoders and the hasher
 * called by hand. */
static uint64_t writer_run(uint8_t *out, uint64_t cap, uint64_t drain_at, pcclResult_t *rc)
{
    ccoip_trace_header h;
    memset(&h, 0, sizeof h);
    h.machine = CCOIP_TRACE_MASTER;
    h.seed = 5;
    h.master.max_peers = 4;
    ccoip_event start, timer;
    memset(&start, 0, sizeof start);
    start.type = CCOIP_EV_START;
    timer = start;
    timer.type = CCOIP_EV_TIMER;
    timer.now_ns = 9;
    ccoip_action a;
    memset(&a, 0, sizeof a);
    a.type = CCOIP_ACT_LOG;
    ccoip_trace_writer tw;
    ccoip_trace_writer_init(&tw);
    uint64_t n = 0;
    *rc = pcclSuccess;
#define W(CALL)                                                                                    \
    do {                                                                                           \
        const pcclResult_t r_ = (CALL);                                                            \
        if (r_ != pcclSuccess) *rc = r_;                                                           \
        if (tw.len >= drain_at && n + tw.len <= cap) {                                             \
            memcpy(out + n, tw.buf, (size_t)tw.len);                                               \
            n += tw.len;                                                                           \
            ccoip_trace_writer_drained(&tw);                                                       \
        }                                                                                          \
    } while (0)
    W(ccoip_trace_writer_header(&tw, &h));
    W(ccoip_trace_writer_event(&tw, &start));
    ccoip_trace_writer_step(&tw, 0);
    ccoip_trace_writer_action(&tw, &a);
    ccoip_trace_writer_action(&tw, &a);
    W(ccoip_trace_writer_checkpoint(&tw, 100));
    W(ccoip_trace_writer_event(&tw, &start));
    ccoip_trace_writer_step(&tw, 0);
    ccoip_trace_writer_action(&tw, &a);
    W(ccoip_trace_writer_event(&tw, &timer)); /* fed while draining: POLLED 1 first */
    ccoip_trace_writer_step(&tw, 3);
    W(ccoip_trace_writer_set_port(&tw, CCOIP_LISTENER_P2P, 40000, NULL));
    W(ccoip_trace_writer_checkpoint(&tw, 200));
    W(ccoip_trace_writer_trailer(&tw));
#undef W
    if (tw.len > 0 && n + tw.len <= cap) {
        memcpy(out + n, tw.buf, (size_t)tw.len);
        n += tw.len;
    }
    ccoip_trace_writer_deinit(&tw);
    return n;
}

PTEST(trace, writer)
{
    uint8_t whole[4096], pieces[4096], want[4096];
    pcclResult_t rc1, rc2;
    const uint64_t n1 = writer_run(whole, sizeof whole, UINT64_MAX, &rc1);
    const uint64_t n2 = writer_run(pieces, sizeof pieces, 16, &rc2);
    PT_ASSERT(rc1 == pcclSuccess && rc2 == pcclSuccess, "writer results %d %d", rc1, rc2);
    /* The same by hand. */
    ccoip_trace_header h;
    memset(&h, 0, sizeof h);
    h.machine = CCOIP_TRACE_MASTER;
    h.seed = 5;
    h.master.max_peers = 4;
    ccoip_event ev;
    memset(&ev, 0, sizeof ev);
    ev.type = CCOIP_EV_START;
    ccoip_action a;
    memset(&a, 0, sizeof a);
    a.type = CCOIP_ACT_LOG;
    ccoip_trace_hasher hs;
    ccoip_trace_hasher_init(&hs);
    uint64_t n = ccoip_trace_encode_header(&h, want, sizeof want);
    n += ccoip_trace_encode_event(&ev, want + n, sizeof want - n);
    ccoip_trace_hash_step(&hs, 0);
    ccoip_trace_hash_action(&hs, &a);
    ccoip_trace_hash_action(&hs, &a);
    ccoip_trace_hash_deadline(&hs, 100);
    n += ccoip_trace_encode_checkpoint(1, hs.hash, want + n, sizeof want - n);
    n += ccoip_trace_encode_event(&ev, want + n, sizeof want - n);
    ccoip_trace_hash_step(&hs, 0);
    ccoip_trace_hash_action(&hs, &a);
    n += ccoip_trace_encode_polled(1, want + n, sizeof want - n);
    ev.type = CCOIP_EV_TIMER;
    ev.now_ns = 9;
    n += ccoip_trace_encode_event(&ev, want + n, sizeof want - n);
    ccoip_trace_hash_step(&hs, 3);
    n += ccoip_trace_encode_set_port(CCOIP_LISTENER_P2P, 40000, NULL, want + n, sizeof want - n);
    ccoip_trace_hash_deadline(&hs, 200);
    n += ccoip_trace_encode_checkpoint(3, hs.hash, want + n, sizeof want - n);
    n += ccoip_trace_encode_trailer(3, 3, hs.hash, want + n, sizeof want - n);
    PT_ASSERT(n1 == n && n2 == n, "lengths %llu, %llu drained, %llu by hand",
              (unsigned long long)n1, (unsigned long long)n2, (unsigned long long)n);
    PT_EXPECT(memcmp(whole, want, (size_t)n) == 0, "whole buffer = the encoders' bytes");
    PT_EXPECT(memcmp(pieces, want, (size_t)n) == 0, "drained pieces = the encoders' bytes");
    uint32_t records = 0;
    PT_EXPECT(decode_all(whole, n1, &records) == pcclSuccess && records == 8u,
              "decodes: %u records", records);
}

/* A record that cannot be encoded is a sticky error: nothing is written after it. */
PTEST(trace, writer_sticky_error)
{
    ccoip_trace_writer tw;
    ccoip_trace_writer_init(&tw);
    ccoip_trace_header h;
    memset(&h, 0, sizeof h);
    h.machine = (ccoip_trace_machine)7; /* invalid */
    PT_EXPECT(ccoip_trace_writer_header(&tw, &h) == pcclInvalidArgument, "invalid header");
    ccoip_event ev;
    memset(&ev, 0, sizeof ev);
    ev.type = CCOIP_EV_START;
    PT_EXPECT(ccoip_trace_writer_event(&tw, &ev) == pcclInvalidArgument && tw.len == 0,
              "sticky: the event is not written");
    ccoip_trace_writer_deinit(&tw);
    PT_EXPECT(tw.buf == NULL && tw.len == 0 && tw.error == pcclSuccess, "deinit empties it");
}
