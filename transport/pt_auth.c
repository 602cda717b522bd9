/*
 * pt_auth.c — authenticated runs (docs/security.md): the run token from a file or the
 * environment (never the command line), HMAC-SHA-256 and SHA-256 from OpenSSL's libcrypto,
 * the process's random secret, and the bandwidth-probe port's challenge, which the driver
 * serves without the core (docs/protocol.md §8.4).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ccoip_auth.h"
#include "pt_internal.h"

/* Bytes of a run token at least (shorter is refused: guessable) and at most. */
#define PT_TOKEN_MIN 16u
#define PT_TOKEN_MAX 4096u

void pt_auth_mac(const uint8_t key[CCOIP_AUTH_KEY_BYTES], const uint8_t *msg, size_t len,
                 uint8_t out[CCOIP_AUTH_MAC_BYTES])
{
    unsigned int n = CCOIP_AUTH_MAC_BYTES;
    if (HMAC(EVP_sha256(), key, (int)CCOIP_AUTH_KEY_BYTES, msg, len, out, &n) == NULL)
        memset(out, 0, CCOIP_AUTH_MAC_BYTES); /* never equal to a real proof's check */
}

/* Reads the token file: at most PT_TOKEN_MAX bytes; warns when others may read it. */
static pcclResult_t token_read(const char *who, const char *path, uint8_t *buf, size_t *len)
{
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        pt_log(CCOIP_LOG_ERROR, who, "run token file %s: %s", path, strerror(errno));
        return pcclInvalidArgument;
    }
    struct stat st;
    if (fstat(fd, &st) == 0 && (st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
        pt_log(CCOIP_LOG_WARN, who,
               "run token file %s is readable by group or others (mode %03o): chmod 600 it", path,
               (unsigned)(st.st_mode & 0777));
    }
    size_t n = 0;
    while (n < PT_TOKEN_MAX + 1u) {
        const ssize_t r = read(fd, buf + n, PT_TOKEN_MAX + 1u - n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        n += (size_t)r;
    }
    close(fd);
    if (n > PT_TOKEN_MAX) {
        pt_log(CCOIP_LOG_ERROR, who, "run token file %s: longer than %u bytes", path, PT_TOKEN_MAX);
        return pcclInvalidArgument;
    }
    *len = n;
    return pcclSuccess;
}

pcclResult_t pt_auth_load(const char *who, ccoip_auth_config *auth)
{
    if (auth->mac != NULL) return pcclSuccess; /* the caller configured it */
    const char *path = getenv("PCCL_RUN_TOKEN_FILE");
    const char *value = getenv("PCCL_RUN_TOKEN");
    if ((path == NULL || path[0] == '\0') && (value == NULL || value[0] == '\0')) {
        return pcclSuccess; /* not authenticated */
    }
    uint8_t buf[PT_TOKEN_MAX + 1u]; /* on the stack: communicators may be created concurrently */
    size_t len = 0;
    if (path != NULL && path[0] != '\0') {
        if (value != NULL && value[0] != '\0')
            pt_log(CCOIP_LOG_WARN, who,
                   "PCCL_RUN_TOKEN_FILE and PCCL_RUN_TOKEN both set: using the file");
        const pcclResult_t r = token_read(who, path, buf, &len);
        if (r != pcclSuccess) return r;
    } else {
        len = strlen(value);
        if (len > PT_TOKEN_MAX) {
            pt_log(CCOIP_LOG_ERROR, who, "PCCL_RUN_TOKEN: longer than %u bytes", PT_TOKEN_MAX);
            return pcclInvalidArgument;
        }
        memcpy(buf, value, len);
    }
    while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == '\r' || buf[len - 1] == ' ' ||
                       buf[len - 1] == '\t')) {
        len--; /* a trailing newline of `echo ... > file` is not part of the token */
    }
    if (len < PT_TOKEN_MIN) {
        pt_log(CCOIP_LOG_ERROR, who,
               "run token: %zu bytes, at least %u needed (e.g. openssl rand -hex 32)", len,
               PT_TOKEN_MIN);
        OPENSSL_cleanse(buf, sizeof buf);
        return pcclInvalidArgument;
    }
    unsigned int n = CCOIP_AUTH_KEY_BYTES;
    const int ok = EVP_Digest(buf, len, auth->run_key, &n, EVP_sha256(), NULL);
    OPENSSL_cleanse(buf, sizeof buf);
    if (ok != 1 ||
        getrandom(auth->secret, sizeof auth->secret, 0) != (ssize_t)sizeof auth->secret) {
        pt_log(CCOIP_LOG_ERROR, who, "run token: cannot derive keys");
        return pcclSystemError;
    }
    auth->mac = pt_auth_mac;
    pt_log(CCOIP_LOG_INFO, who, "authenticated run: run token from %s",
           path != NULL && path[0] != '\0' ? "PCCL_RUN_TOKEN_FILE" : "PCCL_RUN_TOKEN");
    return pcclSuccess;
}

/* The probe proof (docs/protocol.md §8.4): the run key over the target's challenge and the
 * request's (tag, offset), its first 16 bytes carried as the PROBE_REQUEST's (epoch, seq). */
static void probe_proof(const pt_driver *d, const uint8_t challenge[CCOIP_AUTH_NONCE_BYTES],
                        uint64_t tag, uint64_t offset, uint64_t *epoch, uint64_t *seq)
{
    const uint64_t v[2] = {tag, offset};
    uint8_t mac[CCOIP_AUTH_MAC_BYTES];
    ccoip_auth_mac(&d->auth, d->auth.run_key, "pccl probe", challenge, CCOIP_AUTH_NONCE_BYTES, NULL,
                   0, v, 2, mac);
    ccoip_auth_nonce_to_u64(mac, epoch, seq);
}

void pt_auth_probe_challenge(pt_driver *d, pt_conn *c, ccoip_data_header *h)
{
    ccoip_auth_nonce(&d->auth, &d->auth_ctr, c->probe_nonce);
    ccoip_data_header_init(h, CCOIP_DATA_CHALLENGE);
    ccoip_auth_nonce_to_u64(c->probe_nonce, &h->tag, &h->seq);
}

void pt_auth_probe_sign(const pt_driver *d, const ccoip_data_header *challenge,
                        ccoip_data_header *req)
{
    uint8_t nonce[CCOIP_AUTH_NONCE_BYTES];
    ccoip_auth_nonce_from_u64(challenge->tag, challenge->seq, nonce);
    probe_proof(d, nonce, req->tag, req->offset, &req->epoch, &req->seq);
}

bool pt_auth_probe_check(const pt_driver *d, const pt_conn *c, const ccoip_data_header *req)
{
    uint64_t epoch = 0, seq = 0;
    probe_proof(d, c->probe_nonce, req->tag, req->offset, &epoch, &seq);
    return ((epoch ^ req->epoch) | (seq ^ req->seq)) == 0; /* no early exit: constant time */
}
