/*
 * pt_log.c — logging to stderr (PCCL_LOG_LEVEL) and the monotonic clock of
 * the native runtime (pt.h).
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>
#include <time.h>

#include "pt.h"

static int g_log_level = -1;
static pthread_mutex_t g_log_mu = PTHREAD_MUTEX_INITIALIZER;

static int log_level_parse(const char *s)
{
    if (s == NULL) return CCOIP_LOG_WARN;
    if (strcasecmp(s, "ERROR") == 0) return CCOIP_LOG_ERROR;
    if (strcasecmp(s, "WARN") == 0 || strcasecmp(s, "WARNING") == 0) return CCOIP_LOG_WARN;
    if (strcasecmp(s, "INFO") == 0) return CCOIP_LOG_INFO;
    if (strcasecmp(s, "DEBUG") == 0) return CCOIP_LOG_DEBUG;
    return CCOIP_LOG_WARN;
}

void pt_log_set_level(int level)
{
    pthread_mutex_lock(&g_log_mu);
    g_log_level = level;
    pthread_mutex_unlock(&g_log_mu);
}

int pt_log_level(void)
{
    pthread_mutex_lock(&g_log_mu);
    if (g_log_level < 0) g_log_level = log_level_parse(getenv("PCCL_LOG_LEVEL"));
    const int l = g_log_level;
    pthread_mutex_unlock(&g_log_mu);
    return l;
}

void pt_log(int level, const char *who, const char *fmt, ...)
{
    if (level > pt_log_level()) return;
    static const char *const names[] = {"ERROR", "WARN", "INFO", "DEBUG"};
    char line[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    const uint64_t t = pt_now_ns();
    fprintf(stderr, "[pccl %" PRIu64 ".%06" PRIu64 " %s %s] %s\n", t / 1000000000u,
            (t / 1000u) % 1000000u, names[level >= 0 && level <= 3 ? level : 3], who, line);
}

uint64_t pt_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
