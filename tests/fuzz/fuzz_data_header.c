/*
 * fuzz_data_header — the data-plane header decoder (ccoip_data_header_decode).
 *
 * Properties: the result is one of the documented codes; every accepted
 * header re-encodes to exactly the 80 bytes it was decoded from (the layout
 * has no redundancy: every byte is either checked or carried).
 */
#include <string.h>

#include "ccoip_frame.h"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ccoip_codec_limits lim;
    ccoip_data_header h;
    uint8_t out[CCOIP_DATA_HEADER_BYTES];
    pcclResult_t rc;
    ccoip_codec_limits_default(&lim);
    if (size > 0 && (data[0] & 1u)) lim.max_data_payload_bytes = 4096; /* a tighter profile */
    rc = ccoip_data_header_decode(data, size, &lim, &h);
    FUZZ_CHECK(rc == pcclSuccess || rc == pcclProtocolError || rc == pcclInvalidUsage);
    if (rc != pcclSuccess) return 0;
    FUZZ_CHECK(size >= CCOIP_DATA_HEADER_BYTES);
    FUZZ_CHECK(ccoip_data_header_encode(&h, &lim, out, sizeof(out)) == pcclSuccess);
    FUZZ_CHECK(memcmp(out, data, sizeof(out)) == 0);
    return 0;
}
