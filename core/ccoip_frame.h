/*
 * ccoip_frame.h — CCoIP framing: the control-plane frame around the
 * protobuf envelopes of schema/ccoip.proto, and the fixed little-endian
 * header of data-plane frames (docs/protocol.md §3 and §7).
 *
 * Sans-I/O and allocation-free like the generated codec (ccoip_pb.h): the
 * caller owns every buffer. Decoders never read past `len`, never trust a
 * length field and reject what they do not understand with
 * pcclProtocolError; a protocol version outside
 * [CCOIP_PROTOCOL_VERSION_MIN, CCOIP_PROTOCOL_VERSION_MAX] is
 * pcclInvalidUsage, so that pcclConnect can report a version mismatch as such
 * (docs/protocol.md §6.1). Encoders validate their input and return
 * pcclInvalidArgument for what the decoder would reject.
 */
#ifndef CCOIP_FRAME_H
#define CCOIP_FRAME_H

#include <stdbool.h>
#include <stdint.h>

#include "ccoip_pb.h"
#include "ccoip_quant.h"
#include "pccl_types.h"

/** The CCoIP protocol version this build speaks (docs/protocol.md §1.2). */
#define CCOIP_PROTOCOL_VERSION (1u)
/** Oldest protocol version this build accepts. */
#define CCOIP_PROTOCOL_VERSION_MIN (1u)
/** Newest protocol version this build accepts. */
#define CCOIP_PROTOCOL_VERSION_MAX (1u)

/** Bytes of a control-frame header (docs/protocol.md §3). */
#define CCOIP_CTRL_HEADER_BYTES (12u)
/** Bytes of a data-frame header (docs/protocol.md §7). */
#define CCOIP_DATA_HEADER_BYTES (80u)
/** Default largest data-frame payload: 1 GiB. */
#define CCOIP_DEFAULT_MAX_DATA_PAYLOAD_BYTES ((uint64_t)1 << 30)

/** Every limit a CCoIP decoder enforces. */
typedef struct ccoip_codec_limits {
    /** Control plane: the protobuf payload (max_message_bytes bounds a frame's payload). */
    ccoip_pb_limits pb;
    /** Data plane: largest payload a data-frame header may announce. */
    uint64_t max_data_payload_bytes;
} ccoip_codec_limits;

/** Fills *lim with the defaults (CCOIP_PB_DEFAULT_*, CCOIP_DEFAULT_MAX_DATA_PAYLOAD_BYTES). */
void ccoip_codec_limits_default(ccoip_codec_limits *lim);

/**
 * Picks the protocol version for a peer that speaks [peer_min, peer_max]:
 * the newest one both sides speak (docs/protocol.md §6.1).
 * Returns pcclSuccess; pcclInvalidUsage when the ranges do not overlap;
 * pcclProtocolError when peer_min is 0 or above peer_max; pcclInvalidArgument
 * when version_out is NULL.
 */
pcclResult_t ccoip_version_negotiate(uint32_t peer_min, uint32_t peer_max, uint32_t *version_out);

/**
 * The pcclResult_t a received Status means: the same number for a status
 * this build knows, pcclRemoteError for one it does not.
 */
pcclResult_t ccoip_status_to_result(int32_t status);

/* ------------------------------------------------------------------------ */
/* Control plane (docs/protocol.md §3)                                      */
/* ------------------------------------------------------------------------ */

/** Direction of a control frame, from its kind byte. */
typedef enum ccoip_ctrl_kind {
    CCOIP_CTRL_PEER_TO_MASTER = 1, /**< Payload: ccoip.PeerToMaster. */
    CCOIP_CTRL_MASTER_TO_PEER = 2  /**< Payload: ccoip.MasterToPeer. */
} ccoip_ctrl_kind;

/** The 12-byte header of a control frame. */
typedef struct ccoip_ctrl_header {
    uint16_t version;
    ccoip_ctrl_kind kind;
    uint32_t payload_bytes; /**< Bytes of protobuf payload after the header. */
} ccoip_ctrl_header;

/**
 * Decodes the header at buf[0 .. CCOIP_CTRL_HEADER_BYTES): what a stream
 * reader calls first, to learn how many bytes the whole frame has
 * (CCOIP_CTRL_HEADER_BYTES + payload_bytes) before reading them.
 * Returns pcclSuccess; pcclProtocolError when len < CCOIP_CTRL_HEADER_BYTES,
 * the magic, kind or flags are wrong, or payload_bytes exceeds
 * lim->pb.max_message_bytes; pcclInvalidUsage for an unsupported version
 * (*out is filled, so the caller can log the peer's version);
 * pcclInvalidArgument for NULL buf or out. lim NULL means the defaults.
 */
pcclResult_t ccoip_ctrl_header_decode(const uint8_t *buf, uint64_t len,
                                      const ccoip_codec_limits *lim, ccoip_ctrl_header *out);

/**
 * Encodes m as one complete control frame (header + payload) into
 * buf[0 .. cap), at version CCOIP_PROTOCOL_VERSION. *len_out receives the
 * frame size, also when cap is too small. m must have a body.
 * Returns pcclSuccess; pcclInvalidArgument when an argument is NULL, m has
 * no body or is invalid (see ccoip_pb.h), the payload exceeds
 * lim->pb.max_message_bytes, or cap is too small. lim NULL means defaults.
 */
pcclResult_t ccoip_ctrl_encode_p2m(const ccoip_pb_peer_to_master *m, const ccoip_codec_limits *lim,
                                   uint8_t *buf, uint64_t cap, uint64_t *len_out);

/** As ccoip_ctrl_encode_p2m for the master's frames; a body-less m (an error answer) is allowed. */
pcclResult_t ccoip_ctrl_encode_m2p(const ccoip_pb_master_to_peer *m, const ccoip_codec_limits *lim,
                                   uint8_t *buf, uint64_t cap, uint64_t *len_out);

/**
 * Decodes one complete control frame: frame[0 .. len) must be exactly one
 * header and its payload_bytes of payload (a prefix or trailing bytes are
 * pcclProtocolError). Strings in *out point into frame and repeated fields
 * into arena (ccoip_pb_arena_bound(len) bytes always suffice).
 * A body the build does not know decodes as body_case NONE: the caller
 * answers it, it is not malformed (docs/protocol.md §11).
 * Returns pcclSuccess; pcclProtocolError for a malformed frame or payload,
 * or a frame of the other direction; pcclInvalidUsage for an unsupported
 * version; pcclInvalidArgument for NULL arguments or an arena too small.
 */
pcclResult_t ccoip_ctrl_decode_p2m(const uint8_t *frame, uint64_t len,
                                   const ccoip_codec_limits *lim, ccoip_pb_arena *arena,
                                   ccoip_pb_peer_to_master *out);

/** As ccoip_ctrl_decode_p2m for frames the master sends. */
pcclResult_t ccoip_ctrl_decode_m2p(const uint8_t *frame, uint64_t len,
                                   const ccoip_codec_limits *lim, ccoip_pb_arena *arena,
                                   ccoip_pb_master_to_peer *out);

/* ------------------------------------------------------------------------ */
/* Data plane (docs/protocol.md §7, §8)                                     */
/* ------------------------------------------------------------------------ */

/** What a data frame carries. */
typedef enum ccoip_data_kind {
    CCOIP_DATA_HELLO = 1,          /**< Opens a p2p connection (§8.1). */
    CCOIP_DATA_HELLO_ACK = 2,      /**< Accepts it. */
    CCOIP_DATA_RING_CHUNK = 3,     /**< Elements of a ring step (§8.2). */
    CCOIP_DATA_STATE_REQUEST = 4,  /**< Payload: ccoip.SharedStateRequest (§8.3). */
    CCOIP_DATA_STATE_RESPONSE = 5, /**< Payload: ccoip.SharedStateResponse. */
    CCOIP_DATA_STATE_DATA = 6,     /**< Bytes of one shared-state tensor. */
    CCOIP_DATA_PROBE_REQUEST = 7,  /**< Asks for a bandwidth probe (§8.4). */
    CCOIP_DATA_PROBE_ACCEPT = 8,   /**< The prober may send. */
    CCOIP_DATA_PROBE_BUSY = 9,     /**< Another probe runs: retry later. */
    CCOIP_DATA_PROBE_DATA = 10,    /**< Probe payload (content ignored). */
    CCOIP_DATA_CHALLENGE = 11,     /**< Authenticated runs: the acceptor's nonce (§8.0). */
    CCOIP_DATA_STATE_OFFER = 12,   /**< A distributor that dialled its receiver (§8.3). */
    CCOIP_DATA_RELAY_JOIN = 13     /**< A link's end joining the master's relay (§8.6). */
} ccoip_data_kind;

/** A HELLO whose `step` is this opens a pair link for one send / recv (docs/protocol.md §8.5),
 *  not a ring link; its `offset` carries the op's seq. */
#define CCOIP_DATA_PAIR_STEP (0xFFFFFFFFu)

/** Number of data kinds plus one (kinds are 1 .. CCOIP_DATA_KIND_END - 1). */
#define CCOIP_DATA_KIND_END (14u)

/** Payload bytes of an authenticated HELLO: an HMAC-SHA-256 (§8.0). */
#define CCOIP_DATA_PROOF_BYTES (32u)

/**
 * The 80-byte header before every data-frame payload. The meaning of
 * epoch..offset per kind is in docs/protocol.md §8.
 */
typedef struct ccoip_data_header {
    uint16_t version;
    ccoip_data_kind kind;
    uint64_t epoch;
    uint64_t tag;
    uint64_t seq;
    uint32_t chunk;
    uint32_t step;
    uint64_t offset; /**< Byte offset of the payload within its chunk or tensor. */
    uint64_t length; /**< Payload bytes that follow the header. */
    /**
     * Dequantization metadata of a RING_CHUNK's payload; algorithm is
     * pcclQuantNone (and every other field 0) otherwise. MinMax uses
     * min_value/max_value, ZeroPointScale scale/zero_point; the unused pair is 0.
     */
    ccoip_quant_meta quant;
} ccoip_data_header;

/** Zeroes *h and sets version = CCOIP_PROTOCOL_VERSION, kind, quant.algorithm = pcclQuantNone. */
void ccoip_data_header_init(ccoip_data_header *h, ccoip_data_kind kind);

/**
 * Writes h into buf[0 .. CCOIP_DATA_HEADER_BYTES).
 * Returns pcclSuccess; pcclInvalidArgument when an argument is NULL, cap <
 * CCOIP_DATA_HEADER_BYTES, or h breaks a rule of docs/protocol.md §7.2
 * (unsupported version, unknown kind, length above
 * lim->max_data_payload_bytes, offset + length overflowing, a payload on a
 * kind that has none, quantization outside RING_CHUNK, invalid quantization
 * metadata). lim NULL means the defaults.
 */
pcclResult_t ccoip_data_header_encode(const ccoip_data_header *h, const ccoip_codec_limits *lim,
                                      uint8_t *buf, uint64_t cap);

/**
 * Reads the header at buf[0 .. CCOIP_DATA_HEADER_BYTES) (bytes beyond are
 * not looked at: the payload follows).
 * Returns pcclSuccess; pcclProtocolError when len < CCOIP_DATA_HEADER_BYTES,
 * the magic is wrong, a reserved byte or flag is set, or a rule of
 * docs/protocol.md §7.2 is broken; pcclInvalidUsage for an unsupported
 * version; pcclInvalidArgument for NULL buf or out.
 */
pcclResult_t ccoip_data_header_decode(const uint8_t *buf, uint64_t len,
                                      const ccoip_codec_limits *lim, ccoip_data_header *out);

#endif /* CCOIP_FRAME_H */
