/*
 * ccoip_master — the CCoIP master as an executable (DESIGN.md §1): command
 * line, signals, logging. The master logic is core/'s state machine, driven
 * by the runtime through the public API (pcclCreateMasterEx).
 *
 *   ccoip_master [--listen URL | --port N] [--heartbeat-ms N] [--evict-ms N]
 *                [--vote-timeout-ms N] [--max-peers N] [--log-level LEVEL]
 *                [--relay-max-bytes N] [--print-port]
 *
 * --print-port writes "PORT <n>" on stdout once bound (for --port 0).
 * SIGINT / SIGTERM stop it gracefully (exit 0).
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "pccl.h"
#include "pt.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: ccoip_master [--listen URL | --port N] [--heartbeat-ms N] [--evict-ms N]\n"
            "                    [--vote-timeout-ms N] [--max-peers N] [--relay-max-bytes N]\n"
            "                    [--relay-port N|off]\n"
            "                    [--log-level ERROR|WARN|INFO|DEBUG] [--print-port]\n"
            "  --listen URL   tcp://host:port (port 0: any), ipc:///path or\n"
            "                 tls+tcp://host:port (PEM files from PCCL_TLS_CERT, PCCL_TLS_KEY;\n"
            "                 PCCL_TLS_CA: client certificates it signed are required;\n"
            "                 without it the master refuses to start unless\n"
            "                 PCCL_TLS_ALLOW_UNAUTHENTICATED=1 accepts anyone)\n"
            "  --port N       listen on tcp://0.0.0.0:N (default %d)\n"
            "  --relay-max-bytes N  all-reduces of at most N bytes per input are reduced\n"
            "                 by the master (0: never; at most 65536; default 32768, or\n"
            "                 PCCL_RELAY_MAX_BYTES)\n"
            "  --relay-port N links between two peers nobody can dial (both behind NAT)\n"
            "                 go through the master on this port (default 0: any free one,\n"
            "                 announced in the plans; off: no relay; or PCCL_RELAY_PORT)\n"
            "Authenticated runs (docs/security.md): PCCL_RUN_TOKEN_FILE names a file holding\n"
            "the run's token (every peer needs the same one); PCCL_RUN_TOKEN gives it directly.\n",
            CCOIP_PROTOCOL_PORT_MASTER);
}

static int parse_u32(const char *s, uint32_t *out)
{
    if (s == NULL || *s == '\0') return -1;
    char *end = NULL;
    errno = 0;
    const unsigned long v = strtoul(s, &end, 10);
    if (errno != 0 || *end != '\0' || v > UINT32_MAX) return -1;
    *out = (uint32_t)v;
    return 0;
}

static int parse_level(const char *s)
{
    if (s == NULL) return -1;
    if (strcmp(s, "ERROR") == 0 || strcmp(s, "error") == 0) return CCOIP_LOG_ERROR;
    if (strcmp(s, "WARN") == 0 || strcmp(s, "warn") == 0) return CCOIP_LOG_WARN;
    if (strcmp(s, "INFO") == 0 || strcmp(s, "info") == 0) return CCOIP_LOG_INFO;
    if (strcmp(s, "DEBUG") == 0 || strcmp(s, "debug") == 0) return CCOIP_LOG_DEBUG;
    return -1;
}

/* One descriptor per peer connection (two for the first 64, taken over by the POSIX TCP
 * transport) plus a reserve: raise the soft limit towards the hard one when it is lower, so
 * that the transport's cap on accepted connections (transport/README.md, "Limits") is the
 * table, not the descriptors. */
static void raise_fd_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return;
    const rlim_t want = 1024u + 64u + 256u; /* the table, the taken-over links, a reserve */
    if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= want) return;
    rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= want ? want : rl.rlim_max;
    (void)setrlimit(RLIMIT_NOFILE, &rl);
}

int main(int argc, char **argv)
{
    pcclMasterCreateParams_t p;
    memset(&p, 0, sizeof p);
    char url[512];
    snprintf(url, sizeof url, "tcp://0.0.0.0:%d", CCOIP_PROTOCOL_PORT_MASTER);
    int print_port = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        uint32_t n = 0;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(a, "--print-port") == 0) {
            print_port = 1;
            continue;
        } else if (v == NULL) {
            fprintf(stderr, "ccoip_master: %s needs a value\n", a);
            usage(stderr);
            return 2;
        } else if (strcmp(a, "--listen") == 0) {
            if (strlen(v) >= sizeof url) return 2;
            snprintf(url, sizeof url, "%s", v);
        } else if (strcmp(a, "--port") == 0 && parse_u32(v, &n) == 0 && n <= 65535u) {
            snprintf(url, sizeof url, "tcp://0.0.0.0:%u", n);
        } else if (strcmp(a, "--heartbeat-ms") == 0 && parse_u32(v, &n) == 0) {
            p.heartbeat_ms = n;
        } else if (strcmp(a, "--evict-ms") == 0 && parse_u32(v, &n) == 0) {
            p.evict_ms = n;
        } else if (strcmp(a, "--vote-timeout-ms") == 0 && parse_u32(v, &n) == 0) {
            p.vote_timeout_ms = n;
        } else if (strcmp(a, "--max-peers") == 0 && parse_u32(v, &n) == 0) {
            if (n > PT_MASTER_MAX_PEERS) {
                fprintf(stderr,
                        "ccoip_master: --max-peers %u: at most %u (the connection table holds "
                        "1024 connections, 64 of them kept for peers that have not joined yet)\n",
                        n, PT_MASTER_MAX_PEERS);
                return 2;
            }
            p.max_peers = n;
        } else if (strcmp(a, "--relay-max-bytes") == 0 && parse_u32(v, &n) == 0 && n <= 65536u) {
            setenv("PCCL_RELAY_MAX_BYTES", v, 1); /* read by pcclCreateMasterEx */
        } else if (strcmp(a, "--relay-port") == 0 &&
                   (strcmp(v, "off") == 0 || (parse_u32(v, &n) == 0 && n <= 65535u))) {
            setenv("PCCL_RELAY_PORT", v, 1); /* read by the master's driver (pt_driver.c) */
        } else if (strcmp(a, "--log-level") == 0 && parse_level(v) >= 0) {
            pt_log_set_level(parse_level(v));
        } else {
            fprintf(stderr, "ccoip_master: bad option %s %s\n", a, v);
            usage(stderr);
            return 2;
        }
        i++;
    }
    p.listen_url = url;
    raise_fd_limit();

    /* Signals are taken by sigwait on this thread only: block them first, so
     * that the runtime's threads inherit the mask. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);

    pcclMasterInstance_t *m = NULL;
    uint16_t port = 0;
    pcclResult_t r = pcclCreateMasterEx(&p, &m, &port);
    if (r != pcclSuccess) {
        fprintf(stderr,
                "ccoip_master: cannot start on %s (result %d; the log line above says why)\n", url,
                (int)r);
        return 1;
    }
    r = pcclRunMaster(m);
    if (r != pcclSuccess) {
        fprintf(stderr, "ccoip_master: cannot start (result %d)\n", (int)r);
        pcclDestroyMaster(m);
        return 1;
    }
    pt_log(CCOIP_LOG_INFO, "master", "listening on %s (port %u)", url, (unsigned)port);
    if (print_port) {
        printf("PORT %u\n", (unsigned)port);
        fflush(stdout);
    }
    int sig = 0;
    sigwait(&set, &sig);
    pt_log(CCOIP_LOG_INFO, "master", "signal %d: shutting down", sig);
    pcclInterruptMaster(m);
    pcclMasterAwaitTermination(m);
    pcclDestroyMaster(m);
    return 0;
}
