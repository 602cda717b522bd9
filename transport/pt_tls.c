/*
 * pt_tls.c — tls+tcp:// configurations from the environment (PCCL_TLS_*) and
 * the URLs the driver dials.
 */
#define _GNU_SOURCE
#include "pt_internal.h"

/* Reads a whole (small, PEM) file into a NUL-terminated buffer. */
static char *tls_read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) return NULL;
    char *buf = NULL;
    size_t len = 0;
    for (;;) {
        char *nb = realloc(buf, len + 4097u);
        if (nb == NULL) break;
        buf = nb;
        const size_t n = fread(buf + len, 1, 4096u, f);
        len += n;
        if (n < 4096u || len > (1u << 20)) {
            buf[len] = '\0';
            fclose(f);
            return buf;
        }
    }
    free(buf);
    fclose(f);
    return NULL;
}

int pt_tls_listen_allowed(pt_driver *d, const char *what, bool warn)
{
    const char *ca = getenv("PCCL_TLS_CA");
    if (ca != NULL && *ca != '\0') return 0;
    const char *opt = getenv("PCCL_TLS_ALLOW_UNAUTHENTICATED");
    if (opt != NULL && strcmp(opt, "1") == 0) {
        if (warn) {
            pt_log(CCOIP_LOG_WARN, d->who,
                   "%s: PCCL_TLS_CA unset and PCCL_TLS_ALLOW_UNAUTHENTICATED=1: encrypted, but "
                   "nobody is authenticated (anyone who reaches the port may connect)",
                   what);
        }
        return 0;
    }
    pt_log(CCOIP_LOG_ERROR, d->who,
           "%s: refusing to listen: PCCL_TLS_CA is unset, so nobody who connects would be "
           "authenticated. Set PCCL_TLS_CA (only holders of a certificate it signed may connect), "
           "or PCCL_TLS_ALLOW_UNAUTHENTICATED=1 to accept anyone",
           what);
    return NNG_EINVAL;
}

/*
 * For a tls+ URL, builds an nng TLS configuration from the environment:
 *   PCCL_TLS_CERT, PCCL_TLS_KEY  own certificate and key (PEM files; required
 *                                 to listen, optional to dial);
 *   PCCL_TLS_CA                  CA chain (PEM file): when set, the other
 *                                 side's certificate is verified (dialers:
 *                                 the server's, against PCCL_TLS_SERVER_NAME
 *                                 or the URL's host; listeners: a client
 *                                 certificate is required - mutual TLS);
 *                                 when unset, a dialer encrypts without
 *                                 verifying (logged as a warning) and a
 *                                 listener refuses to start unless
 *                                 PCCL_TLS_ALLOW_UNAUTHENTICATED=1
 *                                 (pt_tls_listen_allowed).
 * Returns 0 with *out NULL for other URLs; an nng error otherwise.
 */
int pt_tls_config_for(pt_driver *d, const char *url, bool server, nng_tls_config **out)
{
    *out = NULL;
    if (strncmp(url, "tls+", 4) != 0) return 0;
    const char *cert = getenv("PCCL_TLS_CERT");
    const char *key = getenv("PCCL_TLS_KEY");
    const char *ca = getenv("PCCL_TLS_CA");
    const char *name = getenv("PCCL_TLS_SERVER_NAME");
    if (cert != NULL && *cert == '\0') cert = NULL;
    if (key != NULL && *key == '\0') key = NULL;
    if (ca != NULL && *ca == '\0') ca = NULL;
    if (server && (cert == NULL || key == NULL)) {
        pt_log(CCOIP_LOG_ERROR, d->who, "%s: set PCCL_TLS_CERT and PCCL_TLS_KEY to listen", url);
        return NNG_EINVAL;
    }
    /* A peer warned once for its listeners (pt_peer_create); the master for its first (the
     * control listener; the relay's follows on the same host and terms). */
    const bool warn = d->is_master && !d->tls_warned;
    if (server && pt_tls_listen_allowed(d, url, warn) != 0) return NNG_EINVAL;
    if (server) d->tls_warned = d->tls_warned || warn;
    nng_tls_config *cfg = NULL;
    int rv = nng_tls_config_alloc(&cfg, server ? NNG_TLS_MODE_SERVER : NNG_TLS_MODE_CLIENT);
    if (rv != 0) return rv;
    if (cert != NULL && key != NULL) {
        char *c = tls_read_file(cert);
        char *k = tls_read_file(key);
        rv = c != NULL && k != NULL ? nng_tls_config_own_cert(cfg, c, k, NULL) : NNG_ENOENT;
        free(c);
        free(k);
        if (rv != 0)
            pt_log(CCOIP_LOG_ERROR, d->who, "TLS certificate %s / key %s: %s", cert, key,
                   nng_strerror(rv));
    }
    if (rv == 0 && ca != NULL) {
        rv = nng_tls_config_ca_file(cfg, ca);
        if (rv != 0) pt_log(CCOIP_LOG_ERROR, d->who, "TLS CA %s: %s", ca, nng_strerror(rv));
    }
    if (rv == 0 && !server && ca != NULL && name != NULL && *name != '\0') {
        rv = nng_tls_config_server_name(cfg, name);
    }
    if (rv == 0) {
        rv = nng_tls_config_auth_mode(cfg, ca != NULL ? NNG_TLS_AUTH_MODE_REQUIRED
                                                      : NNG_TLS_AUTH_MODE_NONE);
    }
    if (rv == 0 && !server && ca == NULL) {
        pt_log(CCOIP_LOG_WARN, d->who, "%s: PCCL_TLS_CA unset, the server is not verified", url);
    }
    if (rv != 0) {
        nng_tls_config_free(cfg);
        return rv;
    }
    *out = cfg;
    return 0;
}

int pt_url_for(const ccoip_action *a, bool tls, char *url, size_t cap)
{
    const char *scheme = tls ? "tls+tcp" : "tcp";
    if (a->len > 0) {
        if (a->len >= cap) return -1;
        memcpy(url, a->data, (size_t)a->len);
        url[a->len] = '\0';
        return 0;
    }
    if (a->ip_len == 4) {
        snprintf(url, cap, "%s://%u.%u.%u.%u:%u", scheme, a->ip[0], a->ip[1], a->ip[2], a->ip[3],
                 a->port);
        return 0;
    }
    if (a->ip_len == 16) {
        int n = snprintf(url, cap, "%s://[", scheme);
        for (uint32_t i = 0; i < 16; i += 2) {
            n += snprintf(url + n, cap - (size_t)n, "%s%x", i ? ":" : "",
                          (unsigned)((a->ip[i] << 8) | a->ip[i + 1]));
        }
        snprintf(url + n, cap - (size_t)n, "]:%u", a->port);
        return 0;
    }
    return -1;
}

/* A dialer for url on connection c, with the run's TLS configuration when url is tls+, and its
 * dial aio: 0, or the nng error (the caller logs it and frees c). */
int pt_dial_prepare(pt_driver *d, pt_conn *c, const char *url)
{
    int rv = nng_stream_dialer_alloc(&c->dialer, url);
    nng_tls_config *tls = NULL;
    if (rv == 0) rv = pt_tls_config_for(d, url, false, &tls);
    if (rv == 0 && tls != NULL) {
        rv = nng_stream_dialer_set_ptr(c->dialer, NNG_OPT_TLS_CONFIG, tls);
        nng_tls_config_free(tls); /* the dialer holds its own reference */
    }
    if (rv == 0) rv = nng_aio_alloc(&c->dial_aio, pt_cb_dial, c);
    return rv;
}
