/*
 * fuzz_transport — the runtime's frame handling (transport/pt_conn.c, pt_probe.c) on whatever
 * bytes a stranger sends over TCP to a port pccl opens: the master's control port and a peer's
 * p2p, shared-state and bandwidth-probe ports (docs/security.md, issue 19).
 *
 * A real master and a real peer (joined: a world of one) run in this process on 127.0.0.1,
 * started at the first input and kept for the whole run. An input is:
 *
 *   byte 0   bits 0-1: the port (0 master, 1 p2p, 2 shared state, 3 bandwidth probe);
 *            bit 2: every connection ends with a reset (SO_LINGER 0), else with shutdown(SHUT_WR)
 *   byte 1   bits 0-2: chunk size 2^k bytes (7: whole segments); bits 3-4: pause after each
 *            chunk (0, 20, 200 or 1,000 us; at most 50 ms of pauses per input)
 *   rest     the bytes to send. The marker "\xfe\xedNC" opens the next connection to the same
 *            port (at most FZ_MAX_CONNS; the earlier ones stay open) and what follows goes to it.
 *
 * Properties (a violation aborts, which is a finding):
 *   - no crash and no sanitizer report (master, peer, nng callbacks, link threads);
 *   - a connection the stranger ended is closed by the remote within a bound: FZ_CLOSE_MS on
 *     the master's, the shared-state and the probe ports (they read to the end of the stream);
 *     on the p2p port a frame may wait for its receive until the core's deadline for a link
 *     without HELLO (evict_ms) or the first-frame deadline, so FZ_HELD_MS, checked while later
 *     inputs run;
 *   - then the attacked port still serves a well-formed peer (the master answers a HELLO, the
 *     shared-state port a STATE_REQUEST, the probe port accepts and completes a probe, the p2p
 *     port closes at once on a HELLO naming another peer); the master and the peer still run
 *     and the peer is still a member;
 *   - at exit: every port serves, no socket is open beyond those at the start (every
 *     connection was freed) and, without ASan, the resident set grew by at most FZ_RSS_MB.
 *
 * The replay test (fuzz_replay_transport) runs the seeds of corpus/transport/ whole (each one
 * ends where it ends: truncations are seeds of their own), FUZZ_REPLAY_PREFIXES=0.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "ccoip_frame.h"
#include "fuzz_common.h"
#include "pt.h"
#include "pt_test.h"

#define FZ_MAX_CONNS    4u
#define FZ_CLOSE_MS     3000u
#define FZ_HELD_MS      9000u
#define FZ_SERVE_MS     5000u
#define FZ_PAUSE_MAX    50000u /* microseconds of pauses per input */
#define FZ_MAX_HELD     16u
#define FZ_RSS_MB       64u
#define FZ_EVICT_MS     1000u
#define FZ_HEARTBEAT_MS 100u

enum { FZ_MASTER = 0, FZ_P2P, FZ_STATE, FZ_PROBE, FZ_NPORTS };
static const char *const fz_port_name[FZ_NPORTS] = {"master", "p2p", "shared-state", "probe"};

static pt_driver *g_master, *g_peer;
static uint16_t g_port[FZ_NPORTS];
static int g_sockets0;
static long g_rss0;

/* p2p connections the stranger ended whose frame the peer still holds: closed by FZ_HELD_MS. */
static struct {
    int fd;
    uint64_t deadline;
} g_held[FZ_MAX_HELD];
static uint32_t g_nheld;

static void fz_fail(const char *what, unsigned port)
{
    fprintf(stderr, "fuzz_transport: %s (%s port %u)\n", what, fz_port_name[port], g_port[port]);
    abort();
}

static uint64_t fz_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void fz_sleep_us(unsigned us)
{
    struct timespec ts = {(time_t)(us / 1000000u), (long)(us % 1000000u) * 1000L};
    nanosleep(&ts, NULL);
}

static int fz_connect(unsigned port)
{
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) fz_fail("socket", port);
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_port = htons(g_port[port]);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (const struct sockaddr *)&sa, sizeof sa) != 0) {
        fprintf(stderr, "fuzz_transport: connect: %s\n", strerror(errno));
        fz_fail("cannot connect", port);
    }
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

/* Reads what is there without waiting (discarded). True when the remote closed (end of stream
 * or an error such as a reset). */
static bool fz_drain(int fd)
{
    uint8_t buf[4096];
    for (;;) {
        const ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
        if (n > 0) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return false;
        if (n < 0 && errno == EINTR) continue;
        return true;
    }
}

/* Waits until the remote closed fd (reading and discarding), at most ms. */
static bool fz_wait_closed(int fd, uint32_t ms)
{
    const uint64_t end = fz_ms() + ms;
    for (;;) {
        if (fz_drain(fd)) return true;
        const uint64_t now = fz_ms();
        if (now >= end) return false;
        struct pollfd p = {fd, POLLIN, 0};
        poll(&p, 1, (int)(end - now));
    }
}

/* Sends n bytes (reading what comes back while the socket is full). False when the remote
 * closed or stopped reading for FZ_CLOSE_MS. */
static bool fz_send(int fd, const uint8_t *b, size_t n)
{
    const uint64_t end = fz_ms() + FZ_CLOSE_MS;
    while (n > 0) {
        const ssize_t w = send(fd, b, n, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w > 0) {
            b += w;
            n -= (size_t)w;
            continue;
        }
        if (w < 0 && errno == EINTR) continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            if (fz_drain(fd) || fz_ms() >= end) return false;
            struct pollfd p = {fd, POLLOUT | POLLIN, 0};
            poll(&p, 1, 10);
            continue;
        }
        return false; /* EPIPE, ECONNRESET: the remote closed it */
    }
    return true;
}

/* Reads exactly n bytes within FZ_SERVE_MS. */
static bool fz_read(int fd, uint8_t *b, size_t n)
{
    const uint64_t end = fz_ms() + FZ_SERVE_MS;
    while (n > 0) {
        const uint64_t now = fz_ms();
        if (now >= end) return false;
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, (int)(end - now)) <= 0) continue;
        const ssize_t r = recv(fd, b, n, MSG_DONTWAIT);
        if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
            return false;
        }
        if (r > 0) {
            b += r;
            n -= (size_t)r;
        }
    }
    return true;
}

static void fz_data_header(ccoip_data_kind kind, uint64_t tag, uint64_t seq, uint64_t offset,
                           uint64_t length, uint8_t out[CCOIP_DATA_HEADER_BYTES])
{
    ccoip_data_header h;
    ccoip_data_header_init(&h, kind);
    h.tag = tag;
    h.seq = seq;
    h.offset = offset;
    h.length = length;
    FUZZ_CHECK(ccoip_data_header_encode(&h, NULL, out, CCOIP_DATA_HEADER_BYTES) == pcclSuccess);
}

/* Reads one data header of kind (and its payload, discarded) from fd. */
static bool fz_read_data_frame(int fd, ccoip_data_kind kind)
{
    uint8_t b[CCOIP_DATA_HEADER_BYTES];
    ccoip_data_header h;
    if (!fz_read(fd, b, sizeof b) ||
        ccoip_data_header_decode(b, sizeof b, NULL, &h) != pcclSuccess || h.kind != kind) {
        return false;
    }
    for (uint64_t left = h.length; left > 0;) {
        uint8_t sink[4096];
        const size_t n = left < sizeof sink ? (size_t)left : sizeof sink;
        if (!fz_read(fd, sink, n)) return false;
        left -= n;
    }
    return true;
}

/* An authenticated run (PCCL_RUN_TOKEN in the environment: fuzz_replay_transport_auth): a
 * stranger gets a CHALLENGE on every data port and nothing else (docs/protocol.md §8.0). */
static bool g_auth;

/* A well-formed peer's first exchange with port; true when it was served. */
static bool fz_serves(unsigned port)
{
    const int fd = fz_connect(port);
    bool ok = false;
    uint8_t b[256];
    if (g_auth && port != FZ_MASTER) {
        /* The port challenges a newcomer at once; an unproven request is closed unanswered. */
        fz_data_header(CCOIP_DATA_PROBE_REQUEST, 1, 0, 1, 0, b);
        ok = fz_read_data_frame(fd, CCOIP_DATA_CHALLENGE) &&
             fz_send(fd, b, CCOIP_DATA_HEADER_BYTES) && fz_wait_closed(fd, FZ_SERVE_MS);
        close(fd);
        return ok;
    }
    switch (port) {
    case FZ_MASTER: { /* HELLO -> an answer of the master */
        ccoip_pb_peer_to_master m;
        memset(&m, 0, sizeof m);
        m.call_id = 1;
        m.body_case = CCOIP_PB_PEER_TO_MASTER_BODY_HELLO;
        m.body.hello.min_version = CCOIP_PROTOCOL_VERSION_MIN;
        m.body.hello.max_version = CCOIP_PROTOCOL_VERSION_MAX;
        uint64_t len = 0;
        FUZZ_CHECK(ccoip_ctrl_encode_p2m(&m, NULL, b, sizeof b, &len) == pcclSuccess);
        ccoip_ctrl_header h;
        ok = fz_send(fd, b, (size_t)len) && fz_read(fd, b, CCOIP_CTRL_HEADER_BYTES) &&
             ccoip_ctrl_header_decode(b, CCOIP_CTRL_HEADER_BYTES, NULL, &h) == pcclSuccess &&
             h.kind == CCOIP_CTRL_MASTER_TO_PEER && h.payload_bytes <= sizeof b &&
             fz_read(fd, b, h.payload_bytes);
        break;
    }
    case FZ_P2P: { /* a HELLO for another peer: the core closes the link at once */
        pt_peer_info info;
        pt_peer_info_get(g_peer, &info);
        fz_data_header(CCOIP_DATA_HELLO, 1, info.id + 1u, 0, 0, b);
        ok = fz_send(fd, b, CCOIP_DATA_HEADER_BYTES) && fz_wait_closed(fd, FZ_SERVE_MS);
        break;
    }
    case FZ_STATE: /* STATE_REQUEST (empty: no keys) -> STATE_RESPONSE */
        fz_data_header(CCOIP_DATA_STATE_REQUEST, 1, 1, 0, 0, b);
        ok = fz_send(fd, b, CCOIP_DATA_HEADER_BYTES) &&
             fz_read_data_frame(fd, CCOIP_DATA_STATE_RESPONSE);
        break;
    default: /* PROBE_REQUEST of 1 byte -> PROBE_ACCEPT, PROBE_DATA -> the target closes */
        fz_data_header(CCOIP_DATA_PROBE_REQUEST, 1, 0, 1, 0, b);
        ok = fz_send(fd, b, CCOIP_DATA_HEADER_BYTES) &&
             fz_read_data_frame(fd, CCOIP_DATA_PROBE_ACCEPT);
        fz_data_header(CCOIP_DATA_PROBE_DATA, 0, 0, 0, 1, b);
        b[CCOIP_DATA_HEADER_BYTES] = 0;
        ok = ok && fz_send(fd, b, CCOIP_DATA_HEADER_BYTES + 1u) && fz_wait_closed(fd, FZ_SERVE_MS);
        break;
    }
    if (ok) {
        shutdown(fd, SHUT_WR);
        ok = fz_wait_closed(fd, FZ_CLOSE_MS);
    }
    close(fd);
    return ok;
}

static void fz_check_alive(void)
{
    pt_peer_info info;
    pt_peer_info_get(g_peer, &info);
    if (!pt_driver_running(g_master)) fz_fail("the master stopped", FZ_MASTER);
    if (!pt_driver_running(g_peer)) fz_fail("the peer stopped", FZ_P2P);
    if (!info.accepted || info.failed) fz_fail("the peer is no longer a member", FZ_MASTER);
}

/* Held p2p connections: drops those the peer closed; a finding when one outlived FZ_HELD_MS.
 * With wait, blocks until there are fewer than `keep`. */
static void fz_held_reap(uint32_t keep)
{
    for (;;) {
        const uint64_t now = fz_ms();
        for (uint32_t i = 0; i < g_nheld;) {
            if (fz_drain(g_held[i].fd)) {
                close(g_held[i].fd);
                g_held[i] = g_held[--g_nheld];
                continue;
            }
            if (now >= g_held[i].deadline) fz_fail("a held connection was never closed", FZ_P2P);
            i++;
        }
        if (g_nheld <= keep) return;
        fz_sleep_us(10000);
    }
}

/* The sockets open in this process (each descriptor on stderr when show). Sockets only: a
 * sanitizer's symbolizer, started when libFuzzer prints a new function, holds pipes. */
static int fz_count_sockets(bool show)
{
    DIR *dir = opendir("/proc/self/fd");
    int n = 0;
    if (dir == NULL) return -1;
    for (struct dirent *e; (e = readdir(dir)) != NULL;) {
        char path[300], target[256];
        snprintf(path, sizeof path, "/proc/self/fd/%s", e->d_name);
        const ssize_t k = e->d_name[0] != '.' ? readlink(path, target, sizeof target - 1u) : -1;
        if (k <= 0) continue;
        if (k > 7 && memcmp(target, "socket:", 7) == 0) n++;
        if (show) fprintf(stderr, "  fd %s -> %.*s\n", e->d_name, (int)k, target);
    }
    closedir(dir);
    return n;
}

static long fz_rss_kb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = 0;
    if (f == NULL) return 0;
    while (fgets(line, sizeof line, f) != NULL) {
        if (sscanf(line, "VmRSS: %ld", &kb) == 1) break;
    }
    fclose(f);
    return kb;
}

#if defined(__SANITIZE_ADDRESS__)
#define FZ_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FZ_ASAN 1
#endif
#endif

static void fz_teardown(void)
{
    fz_held_reap(0);
    for (unsigned p = 0; p < FZ_NPORTS; p++) {
        if (!fz_serves(p)) fz_fail("does not serve at the end", p);
    }
    fz_check_alive();
    int socks = fz_count_sockets(false);
    for (uint64_t end = fz_ms() + FZ_CLOSE_MS; socks > g_sockets0 && fz_ms() < end;) {
        fz_sleep_us(10000);
        socks = fz_count_sockets(false);
    }
    if (socks > g_sockets0) {
        fprintf(stderr, "fuzz_transport: %d sockets open, %d at the start:\n", socks, g_sockets0);
        fz_count_sockets(true);
        FILE *f = fopen("/proc/self/net/tcp", "r");
        for (char line[256]; f != NULL && fgets(line, sizeof line, f) != NULL;)
            fputs(line, stderr);
        if (f != NULL) fclose(f);
        fz_fail("connections were not freed", FZ_MASTER);
    }
#ifndef FZ_ASAN
    const long grew = fz_rss_kb() - g_rss0;
    if (grew > (long)FZ_RSS_MB * 1024) {
        fprintf(stderr, "fuzz_transport: resident set grew by %ld kB\n", grew);
        fz_fail("memory grew", FZ_MASTER);
    }
#endif
    pt_driver_destroy(g_peer);
    pt_driver_destroy(g_master);
    fprintf(stderr, "fuzz_transport: every port served to the end; %d sockets as at the start\n",
            socks);
}

static void fz_setup(void)
{
    signal(SIGPIPE, SIG_IGN);
    g_auth = getenv("PCCL_RUN_TOKEN") != NULL || getenv("PCCL_RUN_TOKEN_FILE") != NULL;
    if (getenv("PCCL_LOG_LEVEL") == NULL) pt_log_set_level(CCOIP_LOG_ERROR); /* strangers: WARN */
    ccoip_master_config mc;
    memset(&mc, 0, sizeof mc);
    mc.heartbeat_ms = FZ_HEARTBEAT_MS;
    mc.evict_ms = FZ_EVICT_MS;
    uint32_t port = 0;
    if (pt_master_create("tcp://127.0.0.1:0", &mc, &g_master, &port) != pcclSuccess ||
        pt_driver_start(g_master) != pcclSuccess) {
        fz_fail("cannot start the master", FZ_MASTER);
    }
    g_port[FZ_MASTER] = (uint16_t)port;
    char url[64];
    snprintf(url, sizeof url, "tcp://127.0.0.1:%u", (unsigned)port);
    ccoip_peer_config pc;
    memset(&pc, 0, sizeof pc);
    pc.master_url = url;
    pc.heartbeat_ms = FZ_HEARTBEAT_MS;
    pc.evict_ms = FZ_EVICT_MS;
    ccoip_cmd cmd;
    memset(&cmd, 0, sizeof cmd);
    cmd.type = CCOIP_CMD_CONNECT;
    uint32_t h = 0;
    if (pt_peer_create(&pc, "127.0.0.1", &g_peer) != pcclSuccess ||
        pt_cmd_submit(g_peer, &cmd, NULL, NULL, 0, &h) != pcclSuccess ||
        pt_cmd_wait(g_peer, h, 10000, false, NULL) != pcclSuccess) {
        fz_fail("the peer cannot join", FZ_MASTER);
    }
    g_port[FZ_P2P] = (uint16_t)pt_test_listener_port(g_peer, CCOIP_LISTENER_P2P);
    g_port[FZ_STATE] = (uint16_t)pt_test_listener_port(g_peer, CCOIP_LISTENER_SHARED_STATE);
    g_port[FZ_PROBE] = (uint16_t)pt_test_listener_port(g_peer, CCOIP_LISTENER_BANDWIDTH);
    for (unsigned p = 0; p < FZ_NPORTS; p++) {
        if (g_port[p] == 0) fz_fail("no port", p);
        if (!fz_serves(p)) fz_fail("does not serve at the start", p);
    }
    fz_sleep_us(200000); /* the remote ends of those checks close */
    g_sockets0 = fz_count_sockets(getenv("FUZZ_VERBOSE") != NULL);
    g_rss0 = fz_rss_kb();
    atexit(fz_teardown);
}

static const uint8_t fz_marker[4] = {0xfe, 0xed, 'N', 'C'};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (g_master == NULL) fz_setup();
    if (size < 2) return 0;
    fz_held_reap(FZ_MAX_HELD - FZ_MAX_CONNS);
    const unsigned port = data[0] & 3u;
    const bool reset = (data[0] & 4u) != 0;
    const size_t chunk = (data[1] & 7u) == 7u ? SIZE_MAX : (size_t)1 << (data[1] & 7u);
    static const unsigned pauses[4] = {0, 20, 200, 1000};
    const unsigned pause = pauses[(data[1] >> 3) & 3u];
    unsigned paused = 0;
    data += 2;
    size -= 2;

    int fds[FZ_MAX_CONNS];
    bool open[FZ_MAX_CONNS];
    uint32_t n = 0;
    while (n < FZ_MAX_CONNS) {
        size_t seg = size; /* this connection's bytes: up to the next marker */
        if (n + 1u < FZ_MAX_CONNS) {
            for (size_t i = 0; i + sizeof fz_marker <= size; i++) {
                if (memcmp(data + i, fz_marker, sizeof fz_marker) == 0) {
                    seg = i;
                    break;
                }
            }
        }
        fds[n] = fz_connect(port);
        open[n] = true;
        for (size_t off = 0; off < seg && open[n];) {
            const size_t k = seg - off < chunk ? seg - off : chunk;
            open[n] = fz_send(fds[n], data + off, k);
            off += k;
            if (pause > 0 && paused < FZ_PAUSE_MAX) {
                fz_sleep_us(pause);
                paused += pause;
            }
        }
        n++;
        if (seg == size) break;
        data += seg + sizeof fz_marker;
        size -= seg + sizeof fz_marker;
    }
    for (uint32_t i = 0; i < n; i++) {
        if (!open[i]) {
            close(fds[i]);
        } else if (reset) {
            const struct linger lg = {1, 0};
            setsockopt(fds[i], SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
            close(fds[i]);
        } else {
            shutdown(fds[i], SHUT_WR);
        }
    }
    for (uint32_t i = 0; i < n && !reset; i++) {
        if (!open[i]) continue;
        if (port == FZ_P2P) { /* a frame may be held: checked later (fz_held_reap) */
            if (fz_wait_closed(fds[i], 20)) {
                close(fds[i]);
            } else {
                g_held[g_nheld].fd = fds[i];
                g_held[g_nheld].deadline = fz_ms() + FZ_HELD_MS;
                g_nheld++;
            }
            continue;
        }
        if (!fz_wait_closed(fds[i], FZ_CLOSE_MS)) fz_fail("an ended connection stays open", port);
        close(fds[i]);
    }
    if (!fz_serves(port)) fz_fail("does not serve a well-formed peer any more", port);
    fz_check_alive();
    return 0;
}
