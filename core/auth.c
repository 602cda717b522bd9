/*
 * auth.c — the message layout of proofs and keys, nonces, and a constant-time compare
 * (docs/protocol.md §8.0). The MAC itself is the driver's (ccoip_auth.h).
 */
#include <string.h>

#include "ccoip_auth.h"
#include "ccoip_hash.h"

enum { AUTH_PART_MAX = 96, AUTH_VALUES_MAX = 6, AUTH_LABEL_MAX = 64 };

bool ccoip_auth_on(const ccoip_auth_config *cfg)
{
    return cfg != NULL && cfg->mac != NULL;
}

static size_t auth_put_part(uint8_t *m, size_t at, const uint8_t *p, size_t len)
{
    if (len > AUTH_PART_MAX) len = AUTH_PART_MAX;
    m[at++] = (uint8_t)len;
    if (len > 0) memcpy(m + at, p, len);
    return at + len;
}

void ccoip_auth_mac(const ccoip_auth_config *cfg, const uint8_t key[CCOIP_AUTH_KEY_BYTES],
                    const char *label, const uint8_t *a, size_t alen, const uint8_t *b, size_t blen,
                    const uint64_t *v, uint32_t nv, uint8_t out[CCOIP_AUTH_MAC_BYTES])
{
    uint8_t m[AUTH_LABEL_MAX + 1 + 2 * (AUTH_PART_MAX + 1) + 8 * AUTH_VALUES_MAX];
    size_t at = 0;
    for (const char *c = label; *c != '\0' && at < AUTH_LABEL_MAX; c++)
        m[at++] = (uint8_t)*c;
    m[at++] = 0;
    at = auth_put_part(m, at, a, a != NULL ? alen : 0);
    at = auth_put_part(m, at, b, b != NULL ? blen : 0);
    if (nv > AUTH_VALUES_MAX) nv = AUTH_VALUES_MAX;
    for (uint32_t i = 0; i < nv; i++) {
        for (uint32_t k = 0; k < 8; k++)
            m[at++] = (uint8_t)(v[i] >> (8u * k));
    }
    cfg->mac(key, m, at, out);
}

void ccoip_auth_nonce(const ccoip_auth_config *cfg, uint64_t *counter,
                      uint8_t out[CCOIP_AUTH_NONCE_BYTES])
{
    uint8_t mac[CCOIP_AUTH_MAC_BYTES];
    const uint64_t n = (*counter)++;
    ccoip_auth_mac(cfg, cfg->secret, "pccl nonce", NULL, 0, NULL, 0, &n, 1, mac);
    memcpy(out, mac, CCOIP_AUTH_NONCE_BYTES);
}

void ccoip_auth_standin_mac(const uint8_t key[CCOIP_AUTH_KEY_BYTES], const uint8_t *msg, size_t len,
                            uint8_t out[CCOIP_AUTH_MAC_BYTES])
{
    uint8_t buf[CCOIP_AUTH_KEY_BYTES + 512];
    if (len > 512) len = 512;
    memcpy(buf, key, CCOIP_AUTH_KEY_BYTES);
    if (len > 0) memcpy(buf + CCOIP_AUTH_KEY_BYTES, msg, len);
    uint64_t h = ccoip_hash_bytes(buf, CCOIP_AUTH_KEY_BYTES + len);
    for (uint32_t i = 0; i < CCOIP_AUTH_MAC_BYTES / 8u; i++) {
        const uint64_t v = ccoip_splitmix64(&h);
        memcpy(out + 8u * i, &v, 8);
    }
}

bool ccoip_auth_equal(const uint8_t *a, const uint8_t *b, size_t n)
{
    uint8_t diff = 0;
    for (size_t i = 0; i < n; i++)
        diff |= (uint8_t)(a[i] ^ b[i]);
    return diff == 0;
}

void ccoip_auth_nonce_to_u64(const uint8_t nonce[CCOIP_AUTH_NONCE_BYTES], uint64_t *tag,
                             uint64_t *seq)
{
    uint64_t t = 0, s = 0;
    for (uint32_t k = 0; k < 8; k++) {
        t |= (uint64_t)nonce[k] << (8u * k);
        s |= (uint64_t)nonce[8 + k] << (8u * k);
    }
    *tag = t;
    *seq = s;
}

void ccoip_auth_nonce_from_u64(uint64_t tag, uint64_t seq, uint8_t nonce[CCOIP_AUTH_NONCE_BYTES])
{
    for (uint32_t k = 0; k < 8; k++) {
        nonce[k] = (uint8_t)(tag >> (8u * k));
        nonce[8 + k] = (uint8_t)(seq >> (8u * k));
    }
}
