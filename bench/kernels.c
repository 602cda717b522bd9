/*
 * kernels.c — the data-path kernel benchmark (issue 2).
 *
 * For 256 MiB buffers (--mib to change) it measures, interleaved and repeated:
 *   memcpy                  reference: memory bandwidth for a copy
 *   a += b (f32)            reference: the loop a reduce kernel can at best be
 *   ccoip_reduce f32 sum    ours
 *   quantize f32 → u8       ours (MinMax: meta + codes)
 *   dequantize u8 → f32     ours
 *   dequantize-accumulate   ours
 *   XXH3 (ccoip_hash_bytes) ours
 * and prints GB/s (buffer bytes of the f32 operand per second, 1e9) with the
 * median and spread of the repetitions, then the ratios the issue sets as
 * targets. --check verifies each kernel's output against a scalar
 * computation first (used by the smoke test).
 */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ccoip_hash.h"
#include "ccoip_quant.h"
#include "ccoip_reduce.h"

enum { K_MEMCPY, K_ADD_REF, K_SUM, K_QUANT, K_DEQUANT, K_DEQ_ACC, K_HASH, K_COUNT };
static const char *const kernel_names[K_COUNT] = {
    "memcpy (reference)",   "a += b f32 (reference)",
    "ccoip_reduce sum f32", "quantize minmax f32->u8",
    "dequantize u8->f32",   "dequantize-accumulate u8",
    "XXH3-64 hash",
};

#define REPS_MAX 64

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The reference reduction: the plain loop the compiler vectorizes. */
static void add_ref(float *restrict a, const float *restrict b, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++)
        a[i] += b[i];
}

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x;
    double b = *(const double *)y;
    return (a > b) - (a < b);
}

static volatile uint64_t sink;

static int run_kernel(int k, float *a, float *b, float *c, uint8_t *q, uint64_t n)
{
    uint64_t bytes = n * sizeof(float);
    ccoip_quant_meta meta;
    switch (k) {
    case K_MEMCPY:
        memcpy(c, a, (size_t)bytes);
        return 0;
    case K_ADD_REF:
        add_ref(c, b, n);
        return 0;
    case K_SUM:
        return ccoip_reduce_inplace(pcclSum, pcclFloat, c, b, n) == pcclSuccess ? 0 : -1;
    case K_QUANT:
        if (ccoip_quant_compute_meta(pcclQuantMinMax, pcclFloat, pcclUint8, a, n, &meta) !=
            pcclSuccess)
            return -1;
        return ccoip_quantize(&meta, q, a, n) == pcclSuccess ? 0 : -1;
    case K_DEQUANT:
    case K_DEQ_ACC:
        if (ccoip_quant_compute_meta(pcclQuantMinMax, pcclFloat, pcclUint8, a, 1024, &meta) !=
            pcclSuccess)
            return -1;
        if (k == K_DEQUANT) return ccoip_dequantize(&meta, c, q, n) == pcclSuccess ? 0 : -1;
        return ccoip_dequantize_reduce(&meta, pcclSum, c, q, n) == pcclSuccess ? 0 : -1;
    case K_HASH:
        sink += ccoip_hash_bytes(a, bytes);
        return 0;
    default:
        return -1;
    }
}

/* Verifies each kernel once against a scalar computation. */
static int check_kernels(float *a, float *b, float *c, uint8_t *q, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++)
        c[i] = a[i];
    if (run_kernel(K_SUM, a, b, c, q, n) != 0) return -1;
    for (uint64_t i = 0; i < n; i++) {
        if (c[i] != a[i] + b[i]) {
            fprintf(stderr, "check: sum differs at %" PRIu64 "\n", i);
            return -1;
        }
    }
    ccoip_quant_meta meta;
    if (ccoip_quant_compute_meta(pcclQuantMinMax, pcclFloat, pcclUint8, a, n, &meta) !=
            pcclSuccess ||
        ccoip_quantize(&meta, q, a, n) != pcclSuccess ||
        ccoip_dequantize(&meta, c, q, n) != pcclSuccess) {
        fprintf(stderr, "check: quantization failed\n");
        return -1;
    }
    double bound = (meta.max_value - meta.min_value) / (2.0 * 255.0) * 1.0001 + 1e-6;
    for (uint64_t i = 0; i < n; i++) {
        if (fabs((double)c[i] - (double)a[i]) > bound) {
            fprintf(stderr, "check: quantization error too large at %" PRIu64 "\n", i);
            return -1;
        }
    }
    if (ccoip_hash_bytes(a, n * sizeof(float)) != ccoip_hash_bytes(a, n * sizeof(float)) ||
        ccoip_hash_bytes(a, n * sizeof(float)) == ccoip_hash_bytes(b, n * sizeof(float))) {
        fprintf(stderr, "check: hash is not a function of the content\n");
        return -1;
    }
    printf("check: sum, quantize/dequantize and hash verified on %" PRIu64 " elements\n", n);
    return 0;
}

int main(int argc, char **argv)
{
    uint64_t mib = 256;
    int reps = 7;
    int check = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--mib") == 0 && i + 1 < argc) {
            mib = strtoull(argv[++i], NULL, 10);
        } else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc) {
            reps = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--check") == 0) {
            check = 1;
        } else {
            fprintf(stderr, "usage: %s [--mib N] [--reps N] [--check]\n", argv[0]);
            return 2;
        }
    }
    if (mib == 0 || reps < 1 || reps > REPS_MAX) {
        fprintf(stderr, "bad arguments: --mib >= 1, 1 <= --reps <= %d\n", REPS_MAX);
        return 2;
    }
    uint64_t bytes = mib << 20;
    uint64_t n = bytes / sizeof(float);
    float *a = aligned_alloc(64, (size_t)bytes);
    float *b = aligned_alloc(64, (size_t)bytes);
    float *c = aligned_alloc(64, (size_t)bytes);
    uint8_t *q = aligned_alloc(64, (size_t)n);
    if (!a || !b || !c || !q) {
        fprintf(stderr, "out of memory for %" PRIu64 " MiB buffers\n", mib);
        return 1;
    }
    uint64_t s = 0x9e3779b97f4a7c15u;
    for (uint64_t i = 0; i < n; i++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        a[i] = (float)(int32_t)(s & 0xffffu) * 0.001f - 30.0f;
        b[i] = (float)(int32_t)((s >> 16) & 0xffffu) * 0.002f;
    }
    memcpy(c, a, (size_t)bytes);
    memset(q, 0, (size_t)n);
    if (check && check_kernels(a, b, c, q, n < (1u << 20) ? n : (1u << 20)) != 0) return 1;

    static double t[K_COUNT][REPS_MAX];
    /* Interleave the kernels so a noisy neighbour hurts all of them alike. */
    for (int r = 0; r < reps; r++) {
        for (int k = 0; k < K_COUNT; k++) {
            if (k == K_ADD_REF || k == K_SUM) memcpy(c, a, (size_t)bytes);
            double t0 = now_s();
            if (run_kernel(k, a, b, c, q, n) != 0) {
                fprintf(stderr, "%s failed\n", kernel_names[k]);
                return 1;
            }
            t[k][r] = now_s() - t0;
        }
    }
    double med[K_COUNT];
    printf("pccl kernel benchmark: %" PRIu64 " MiB f32 buffers, %d repetitions, interleaved\n", mib,
           reps);
    printf("%-28s %10s %10s %10s\n", "kernel", "GB/s med", "GB/s min", "GB/s max");
    for (int k = 0; k < K_COUNT; k++) {
        qsort(t[k], (size_t)reps, sizeof(double), cmp_double);
        med[k] = (double)bytes / t[k][reps / 2] / 1e9;
        printf("%-28s %10.2f %10.2f %10.2f\n", kernel_names[k], med[k],
               (double)bytes / t[k][reps - 1] / 1e9, (double)bytes / t[k][0] / 1e9);
    }
    double sum_ratio = med[K_SUM] / med[K_ADD_REF];
    double hash_ratio = med[K_HASH] / med[K_MEMCPY];
    printf("\nratios (medians):\n");
    printf("  f32 sum-reduce / (a += b)   = %.2f   target >= 0.80  %s\n", sum_ratio,
           sum_ratio >= 0.8 ? "met" : "MISSED");
    printf("  XXH3 / memcpy               = %.2f   target >= 0.50  %s\n", hash_ratio,
           hash_ratio >= 0.5 ? "met" : "MISSED");
    printf("  quantize / memcpy           = %.2f\n", med[K_QUANT] / med[K_MEMCPY]);
    printf("  dequantize / memcpy         = %.2f\n", med[K_DEQUANT] / med[K_MEMCPY]);
    printf("  dequantize-accumulate / (a += b) = %.2f\n", med[K_DEQ_ACC] / med[K_ADD_REF]);
    free(a);
    free(b);
    free(c);
    free(q);
    return 0;
}
