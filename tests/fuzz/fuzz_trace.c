/*
 * fuzz_trace — the trace file decoder (core/ccoip_trace.h) on arbitrary
 * bytes. Properties:
 *   - reader_init and next return pcclSuccess or pcclProtocolError only;
 *   - an event's payload and the names of its shared-state keys lie inside
 *     the input (format v2);
 *   - the reader's position only grows and stays within the input;
 *   - a decoded header and every decoded record re-encode to the same bytes
 *     (the format has one encoding per value), unless the cfg block carries
 *     extra bytes a later writer appended (accepted and ignored).
 * Corpus: corpus/trace/ (replayed by fuzz_replay_trace with any compiler).
 */
#include <string.h>

#include "ccoip_trace.h"
#include "fuzz_common.h"

static uint8_t fz_out[1 << 17];
static ccoip_trace_record fz_rec;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ccoip_trace_reader r;
    ccoip_trace_header h;
    const pcclResult_t rc = ccoip_trace_reader_init(&r, data, (uint64_t)size, &h);
    FUZZ_CHECK(rc == pcclSuccess || rc == pcclProtocolError);
    if (rc != pcclSuccess) return 0;
    FUZZ_CHECK(r.pos <= size);
    /* Header round trip when the cfg block has exactly the known fields. */
    const uint64_t hn = ccoip_trace_encode_header(&h, fz_out, sizeof fz_out);
    FUZZ_CHECK(hn > 0);
    if (hn == r.pos) FUZZ_CHECK(memcmp(fz_out, data, (size_t)hn) == 0);
    for (;;) {
        const uint64_t start = r.pos;
        bool done = false;
        const pcclResult_t nrc = ccoip_trace_next(&r, &fz_rec, &done);
        FUZZ_CHECK(nrc == pcclSuccess || nrc == pcclProtocolError);
        if (nrc != pcclSuccess || done) break;
        FUZZ_CHECK(r.pos > start && r.pos <= size);
        uint64_t n = 0;
        switch (fz_rec.kind) {
        case CCOIP_TRACE_EVENT:
            if (fz_rec.event.len > 0) {
                FUZZ_CHECK(fz_rec.event.data >= data &&
                           fz_rec.event.data + fz_rec.event.len <= data + size);
            }
            if (fz_rec.event.cmd.sync.keys != NULL) {
                FUZZ_CHECK(fz_rec.event.cmd.sync.keys == fz_rec.keys &&
                           fz_rec.event.cmd.sync.num_keys <= CCOIP_TRACE_MAX_KEYS);
                for (uint32_t i = 0; i < fz_rec.event.cmd.sync.num_keys; i++) {
                    const char *nm = fz_rec.keys[i].name;
                    if (nm == NULL) continue;
                    const uint8_t *b = (const uint8_t *)nm;
                    FUZZ_CHECK(b >= data && b + strlen(nm) < data + size);
                }
            }
            n = ccoip_trace_encode_event(&fz_rec.event, fz_out, sizeof fz_out);
            break;
        case CCOIP_TRACE_SET_PORT:
            n = ccoip_trace_encode_set_port(fz_rec.listener, fz_rec.port, fz_rec.url, fz_out,
                                            sizeof fz_out);
            break;
        case CCOIP_TRACE_POLLED:
            n = ccoip_trace_encode_polled(fz_rec.polled, fz_out, sizeof fz_out);
            break;
        case CCOIP_TRACE_CHECKPOINT:
            n = ccoip_trace_encode_checkpoint(fz_rec.events, fz_rec.state_hash, fz_out,
                                              sizeof fz_out);
            break;
        case CCOIP_TRACE_TRAILER:
            n = ccoip_trace_encode_trailer(fz_rec.events, fz_rec.actions, fz_rec.state_hash, fz_out,
                                           sizeof fz_out);
            break;
        }
        FUZZ_CHECK(n == r.pos - start);
        if (n <= sizeof fz_out) FUZZ_CHECK(memcmp(fz_out, data + start, (size_t)n) == 0);
    }
    return 0;
}
