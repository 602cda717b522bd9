/*
 * pt_sockbuf.c — a data link's send buffer sized from the kernel's own
 * measurements of the link (pt_sockbuf.h; issue 23, docs/wan.md).
 */
#define _GNU_SOURCE
#include "pt_sockbuf.h"

#include <linux/tcp.h> /* struct tcp_info with tcpi_busy_time, tcpi_bytes_acked */
#include <netinet/in.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "ccoip_sm.h"
#include "pt.h"

typedef struct sockbuf_policy {
    int snd_mode;      /* 0: kernel, 1: auto, 2: fixed */
    long snd_bytes;    /* fixed */
    long rcv_bytes;    /* 0: kernel */
    long wmem_max;     /* net.core.wmem_max: SO_SNDBUF's cap (before the kernel doubles it) */
    long wmem_autocap; /* net.ipv4.tcp_wmem[2]: autotuning's cap */
} sockbuf_policy;

static sockbuf_policy policy;
static pthread_once_t policy_once = PTHREAD_ONCE_INIT;

/* Bytes with an optional K/M/G suffix; -1 when it is not a number. */
static long parse_bytes(const char *s)
{
    char *end = NULL;
    const long v = strtol(s, &end, 10);
    if (end == s || v < 0) return -1;
    long mul = 1;
    if (*end == 'K' || *end == 'k') mul = 1L << 10;
    if (*end == 'M' || *end == 'm') mul = 1L << 20;
    if (*end == 'G' || *end == 'g') mul = 1L << 30;
    if (mul > 1) end++;
    return *end == '\0' ? v * mul : -1;
}

/* The n-th (0-based) number of a /proc/sys file (this network namespace's), or -1. */
static long read_sysctl(const char *path, int n)
{
    FILE *f = fopen(path, "r");
    if (f == NULL) return -1;
    long v = -1;
    for (int i = 0; i <= n; i++) {
        if (fscanf(f, "%ld", &v) != 1) {
            v = -1;
            break;
        }
    }
    fclose(f);
    return v;
}

static void policy_load(void)
{
    const char *s = getenv("PCCL_TCP_SNDBUF");
    policy.snd_mode = 1;
    if (s != NULL && (strcmp(s, "kernel") == 0 || strcmp(s, "0") == 0)) {
        policy.snd_mode = 0;
    } else if (s != NULL && s[0] != '\0' && strcmp(s, "auto") != 0) {
        policy.snd_bytes = parse_bytes(s);
        policy.snd_mode = policy.snd_bytes > 0 ? 2 : 1;
        if (policy.snd_bytes <= 0) {
            pt_log(CCOIP_LOG_WARN, "sockbuf", "PCCL_TCP_SNDBUF=%s: not auto, kernel or bytes; auto",
                   s);
        }
    }
    const char *r = getenv("PCCL_TCP_RCVBUF");
    if (r != NULL && r[0] != '\0' && strcmp(r, "kernel") != 0) {
        policy.rcv_bytes = parse_bytes(r);
        if (policy.rcv_bytes < 0) policy.rcv_bytes = 0;
    }
    policy.wmem_max = read_sysctl("/proc/sys/net/core/wmem_max", 0);
    policy.wmem_autocap = read_sysctl("/proc/sys/net/ipv4/tcp_wmem", 2);
}

static int clamp_int(long v)
{
    return v > 0x3fffffffL ? 0x3fffffff : (int)v;
}

/* TCP_INFO with the counters the rule needs; false on a kernel without them (before 4.19). */
static bool tcp_info_read(int fd, struct tcp_info *ti)
{
    socklen_t len = sizeof *ti;
    memset(ti, 0, sizeof *ti);
    return getsockopt(fd, IPPROTO_TCP, TCP_INFO, ti, &len) == 0 &&
           len >= offsetof(struct tcp_info, tcpi_busy_time) + sizeof ti->tcpi_busy_time;
}

void pt_sockbuf_open(int fd, pt_sockbuf_state *st)
{
    pthread_once(&policy_once, policy_load);
    if (policy.rcv_bytes > 0) {
        const int v = clamp_int(policy.rcv_bytes);
        (void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, sizeof v);
    }
    if (policy.snd_mode == 2) {
        const int v = clamp_int(policy.snd_bytes);
        (void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &v, sizeof v);
    }
    struct tcp_info ti;
    if (policy.snd_mode != 1 || policy.wmem_max <= 0 || policy.wmem_autocap <= 0 ||
        !tcp_info_read(fd, &ti)) {
        st->done = true;
        return;
    }
    st->busy_us = ti.tcpi_busy_time;
    st->acked = ti.tcpi_bytes_acked;
}

void pt_sockbuf_adapt(int fd, pt_sockbuf_state *st)
{
    if (st->done) return;
    struct tcp_info ti;
    if (!tcp_info_read(fd, &ti)) {
        st->done = true;
        return;
    }
    const uint64_t busy = ti.tcpi_busy_time - st->busy_us;
    const uint64_t acked = ti.tcpi_bytes_acked - st->acked;
    st->busy_us = ti.tcpi_busy_time;
    st->acked = ti.tcpi_bytes_acked;
    if (busy == 0 || ti.tcpi_min_rtt == 0) return;
    /* The rate: the average since the last look (bytes per microsecond busy), or the kernel's
     * latest sample when that one was not limited by the application (the average includes
     * the ramp-up after an idle gap between two sends, which a step of a ring has). */
    double rate = (double)acked / (double)busy * 1e6; /* bytes per second */
    if (!ti.tcpi_delivery_rate_app_limited && (double)ti.tcpi_delivery_rate > rate) {
        rate = (double)ti.tcpi_delivery_rate;
    }
    const double bdp = rate * (double)ti.tcpi_min_rtt * 1e-6; /* bytes */
    int cur = 0;
    socklen_t cl = sizeof cur;
    if (getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &cur, &cl) != 0) return;
    pt_log(CCOIP_LOG_DEBUG, "tcp",
           "data link: %.0f Mbit/s x min rtt %.1f ms = BDP %.0f KiB, sndbuf %d", rate * 8e-6,
           (double)ti.tcpi_min_rtt * 1e-3, bdp / 1024.0, cur);
    /* Autotuning still growing it (it stops a little short of its cap at times). */
    if ((double)cur < 0.75 * (double)policy.wmem_autocap) return;
    if (bdp < 0.45 * (double)cur) return; /* the path or the receiver sets the pace */
    if ((long)cur >= 2 * policy.wmem_max) {
        st->done = true; /* the most an application may set (raising wmem_max is the admin's) */
        return;
    }
    /* Doubling: the kernel doubles what it is given, so give it the current size. */
    const int v = clamp_int((long)cur < policy.wmem_max ? (long)cur : policy.wmem_max);
    if (setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &v, sizeof v) != 0) {
        st->done = true;
        return;
    }
    int now = 0;
    cl = sizeof now;
    (void)getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &now, &cl);
    pt_log(CCOIP_LOG_INFO, "tcp",
           "data link at %.0f Mbit/s x min rtt %.1f ms = BDP %.0f KiB, 45 %% of its send buffer or "
           "more: SO_SNDBUF %d -> %d bytes (autotuning cap %ld, wmem_max %ld)",
           rate * 8e-6, (double)ti.tcpi_min_rtt * 1e-3, bdp / 1024.0, cur, now, policy.wmem_autocap,
           policy.wmem_max);
    if ((long)now >= 2 * policy.wmem_max || now <= cur) st->done = true;
}
