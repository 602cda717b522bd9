/*
 * ccoip_auth.h — authenticated runs (docs/protocol.md §6.1.1, §8.0): the run key, the MAC the
 * driver supplies, and the nonces, proofs and keys built from them.
 *
 * The core stays pure: it never computes a hash of its own for authentication. The driver
 * supplies the MAC as a function of its inputs only (HMAC-SHA-256 from OpenSSL's libcrypto in
 * the runtime, transport/pt_auth.c; a keyed stand-in in the simulator and the tests), the run
 * key (SHA-256 of the run token, which the core never sees) and a per-process secret (random in
 * the runtime) from which the machine draws its nonces and, on the master, the link and state
 * keys it hands out. The same inputs give the same outputs, so a machine stays deterministic.
 */
#ifndef CCOIP_AUTH_H
#define CCOIP_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/** Bytes of a key (the run key, a link key, a state key, the secret). */
#define CCOIP_AUTH_KEY_BYTES (32u)
/** Bytes of a MAC (a proof). */
#define CCOIP_AUTH_MAC_BYTES (32u)
/** Bytes of a nonce (a challenge). */
#define CCOIP_AUTH_NONCE_BYTES (16u)

/** A MAC: out = MAC(key, msg[0 .. len)). Must be a pure function (HMAC-SHA-256). */
typedef void (*ccoip_mac_fn)(const uint8_t key[CCOIP_AUTH_KEY_BYTES], const uint8_t *msg,
                             size_t len, uint8_t out[CCOIP_AUTH_MAC_BYTES]);

/** A machine's authentication configuration; all zero (mac NULL): not authenticated. */
typedef struct ccoip_auth_config {
    /** The MAC; NULL: the run is not authenticated and nothing below is used. */
    ccoip_mac_fn mac;
    /** The run key: SHA-256 of the run token, the same on every member and the master. */
    uint8_t run_key[CCOIP_AUTH_KEY_BYTES];
    /** Secret of this process (random): the source of its nonces and, on the master, of the
     *  link and state keys. Never sent. */
    uint8_t secret[CCOIP_AUTH_KEY_BYTES];
} ccoip_auth_config;

/** True when cfg authenticates (a MAC is set). */
bool ccoip_auth_on(const ccoip_auth_config *cfg);

/**
 * out = MAC(key, label || 0 || |a| || a || |b| || b || v[0] .. v[nv-1]) with lengths as one
 * byte and the values little-endian: the one message layout every proof and key uses (§8.0).
 * a and b at most 96 bytes each, nv at most 6; longer input is cut (a caller bug).
 */
void ccoip_auth_mac(const ccoip_auth_config *cfg, const uint8_t key[CCOIP_AUTH_KEY_BYTES],
                    const char *label, const uint8_t *a, size_t alen, const uint8_t *b, size_t blen,
                    const uint64_t *v, uint32_t nv, uint8_t out[CCOIP_AUTH_MAC_BYTES]);

/** The next nonce of this process: MAC(secret, "pccl nonce", counter), first 16 bytes; the
 *  counter advances. */
void ccoip_auth_nonce(const ccoip_auth_config *cfg, uint64_t *counter,
                      uint8_t out[CCOIP_AUTH_NONCE_BYTES]);

/**
 * A keyed stand-in for the MAC, for the simulator and the tests: deterministic, the same on every
 * platform (WASM too), four seeded hashes of key || msg (msg up to 512 bytes, longer is cut).
 * NOT a MAC: anyone can forge it. The runtime uses HMAC-SHA-256 (transport/pt_auth.c).
 */
void ccoip_auth_standin_mac(const uint8_t key[CCOIP_AUTH_KEY_BYTES], const uint8_t *msg, size_t len,
                            uint8_t out[CCOIP_AUTH_MAC_BYTES]);

/** Compares n bytes in time that does not depend on where they differ. */
bool ccoip_auth_equal(const uint8_t *a, const uint8_t *b, size_t n);

/** A nonce as the (tag, seq) of a CHALLENGE data frame (§8.0), and back. */
void ccoip_auth_nonce_to_u64(const uint8_t nonce[CCOIP_AUTH_NONCE_BYTES], uint64_t *tag,
                             uint64_t *seq);
void ccoip_auth_nonce_from_u64(uint64_t tag, uint64_t seq, uint8_t nonce[CCOIP_AUTH_NONCE_BYTES]);

#endif /* CCOIP_AUTH_H */
