/*
 * corpus.c — a fixed corpus through every data-path primitive of core/:
 * reduce kernels (all types × ops, in and out of place, AVG finalize),
 * quantizer (both algorithms, all source and code types), shared-state
 * hasher, and the in-memory ring executor (several world sizes, with and
 * without quantization). Every output byte is folded into one XXH3 chain and
 * printed. Built natively and with emcc; tests/corpus/check_corpus.cmake
 * asserts both print the hash recorded in tests/golden/corpus.hash, so x86-64
 * and wasm32 produce bit-identical results.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ccoip_dtype.h"
#include "ccoip_hash.h"
#include "ccoip_quant.h"
#include "ccoip_reduce.h"
#include "ring_exec.h"

static uint64_t chain;
static uint64_t items;

static void fold(const void *data, uint64_t len)
{
    uint8_t pair[16];
    uint64_t h = ccoip_hash_bytes(data, len);
    for (int i = 0; i < 8; i++) {
        pair[i] = (uint8_t)(chain >> (8 * i));
        pair[8 + i] = (uint8_t)(h >> (8 * i));
    }
    chain = ccoip_hash_bytes(pair, sizeof pair);
    items++;
}

static void fold_u64(uint64_t v)
{
    uint8_t b[8];
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)(v >> (8 * i));
    fold(b, sizeof b);
}

static void fold_f64(double d)
{
    uint64_t v;
    memcpy(&v, &d, sizeof v);
    fold_u64(v);
}

static uint64_t rng_state = 0x243f6a8885a308d3u;

static uint64_t rng_next(void)
{
    /* xorshift64* — integer only, same sequence everywhere. */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545f4914f6cdd1du;
}

/* Fills n elements of dt: random bits for integers, random finite values in
 * a moderate range for floats (with a few special values when specials). */
static void fill(pcclDataType_t dt, void *buf, uint64_t n, int specials)
{
    uint8_t *p = buf;
    uint32_t sz = ccoip_dtype_size(dt);
    for (uint64_t i = 0; i < n; i++) {
        uint64_t r = rng_next();
        /* About ±2: products of 13 ranks stay finite even in fp16. */
        double v = (double)((int64_t)(r >> 40) - (1 << 23)) / 4194304.0;
        if (specials && i % 97 == 13) v = -0.0;
        switch (dt) {
        case pcclFloat16: {
            uint16_t h = ccoip_f32_to_f16((float)v);
            memcpy(p + i * sz, &h, 2);
            break;
        }
        case pcclBFloat16: {
            uint16_t h = ccoip_f32_to_bf16((float)v);
            memcpy(p + i * sz, &h, 2);
            break;
        }
        case pcclFloat: {
            float f = (float)v;
            memcpy(p + i * sz, &f, 4);
            break;
        }
        case pcclDouble:
            memcpy(p + i * sz, &v, 8);
            break;
        default:
            for (uint32_t k = 0; k < sz; k++)
                p[i * sz + k] = (uint8_t)(r >> (8 * k));
            break;
        }
    }
}

static int corpus_reduce(void)
{
    enum { N = 257 };
    static uint8_t a[N * 8], b[N * 8], out[N * 8];
    for (int dt = 0; dt < PCCL_DATA_TYPE_COUNT; dt++) {
        uint64_t bytes = (uint64_t)N * ccoip_dtype_size((pcclDataType_t)dt);
        for (int op = 0; op < PCCL_RED_OP_COUNT; op++) {
            /* The bitwise ops have no float kernels. */
            if (!ccoip_reduce_supported((pcclRedOp_t)op, (pcclDataType_t)dt)) continue;
            fill((pcclDataType_t)dt, a, N, 1);
            fill((pcclDataType_t)dt, b, N, 1);
            if (ccoip_reduce((pcclRedOp_t)op, (pcclDataType_t)dt, out, a, b, N) != pcclSuccess)
                return -1;
            fold(out, bytes);
            if (ccoip_reduce_inplace((pcclRedOp_t)op, (pcclDataType_t)dt, a, b, N) != pcclSuccess)
                return -1;
            fold(a, bytes);
            if (op == pcclAvg) {
                if (ccoip_reduce_finalize_avg((pcclDataType_t)dt, a, N, 3) != pcclSuccess)
                    return -1;
                fold(a, bytes);
            }
        }
        /* PREMUL_SUM's premultiplication (floats): factors that round differently per format. */
        static const double factors[3] = {0.1, -3.5, 1e-3};
        for (int f = 0; f < 3 && ccoip_dtype_is_float((pcclDataType_t)dt); f++) {
            fill((pcclDataType_t)dt, a, N, 1);
            if (ccoip_reduce_scale((pcclDataType_t)dt, out, a, N, factors[f]) != pcclSuccess)
                return -1;
            fold(out, bytes);
        }
    }
    /* fp16/bf16 conversions of a sweep of binary32 values. */
    for (uint32_t i = 0; i < 4096; i++) {
        uint32_t bits = (uint32_t)rng_next();
        float f;
        memcpy(&f, &bits, 4);
        uint16_t h[2] = {ccoip_f32_to_f16(f), ccoip_f32_to_bf16(f)};
        fold(h, sizeof h);
    }
    return 0;
}

static int corpus_quant(void)
{
    enum { N = 1000 };
    static uint8_t src[N * 8], codes[N * 2], out[N * 8];
    const pcclDataType_t srcs[] = {pcclFloat16, pcclBFloat16, pcclFloat, pcclDouble};
    const pcclDataType_t qts[] = {pcclUint8, pcclInt8, pcclUint16, pcclInt16};
    for (int alg = pcclQuantMinMax; alg <= pcclQuantZeroPointScale; alg++) {
        for (size_t s = 0; s < sizeof srcs / sizeof srcs[0]; s++) {
            for (size_t qi = 0; qi < sizeof qts / sizeof qts[0]; qi++) {
                ccoip_quant_meta m;
                uint64_t bytes = (uint64_t)N * ccoip_dtype_size(srcs[s]);
                fill(srcs[s], src, N, 0);
                if (ccoip_quant_compute_meta((pcclQuantizationAlgorithm_t)alg, srcs[s], qts[qi],
                                             src, N, &m) != pcclSuccess ||
                    ccoip_quantize(&m, codes, src, N) != pcclSuccess ||
                    ccoip_dequantize(&m, out, codes, N) != pcclSuccess)
                    return -1;
                fold_f64(m.min_value);
                fold_f64(m.max_value);
                fold_f64(m.scale);
                fold_u64((uint64_t)m.zero_point);
                fold(codes, (uint64_t)N * ccoip_dtype_size(qts[qi]));
                fold(out, bytes);
                if (ccoip_dequantize_reduce(&m, pcclSum, src, codes, N) != pcclSuccess) return -1;
                fold(src, bytes);
            }
        }
    }
    return 0;
}

static int corpus_hash(void)
{
    static float w[64];
    static int32_t v[33];
    static uint16_t h[7];
    fill(pcclFloat, w, 64, 0);
    fill(pcclInt32, v, 33, 0);
    fill(pcclBFloat16, h, 7, 0);
    ccoip_hash_entry e[3] = {
        {"weights", w, 64, pcclFloat}, {"bias", v, 33, pcclInt32}, {"step", h, 7, pcclBFloat16}};
    uint64_t hs;
    for (int i = 0; i < 3; i++) {
        if (ccoip_hash_tensor(&e[i], &hs) != pcclSuccess) return -1;
        fold_u64(hs);
    }
    if (ccoip_hash_state(e, 3, &hs) != pcclSuccess) return -1;
    fold_u64(hs);
    return 0;
}

static int corpus_ring(void)
{
    const uint32_t worlds[] = {1, 2, 3, 5, 8, 13};
    const pcclDataType_t dts[] = {pcclFloat,  pcclFloat16, pcclBFloat16,
                                  pcclDouble, pcclInt32,   pcclUint8};
    const pcclRedOp_t ops[] = {pcclSum, pcclAvg, pcclMax, pcclProd};
    enum { COUNT = 301, WMAX = 13 };
    static uint8_t storage[WMAX][COUNT * 8];
    void *bufs[WMAX];
    uint64_t tx[WMAX], rx[WMAX];
    for (size_t wi = 0; wi < sizeof worlds / sizeof worlds[0]; wi++) {
        uint32_t n = worlds[wi];
        for (size_t di = 0; di < sizeof dts / sizeof dts[0]; di++) {
            uint64_t bytes = (uint64_t)COUNT * ccoip_dtype_size(dts[di]);
            for (size_t oi = 0; oi < sizeof ops / sizeof ops[0]; oi++) {
                for (int quant = 0; quant < 2; quant++) {
                    if (quant && !ccoip_dtype_is_float(dts[di])) continue;
                    for (uint32_t r = 0; r < n; r++) {
                        bufs[r] = storage[r];
                        fill(dts[di], storage[r], COUNT, 0);
                    }
                    pcclResult_t rc = ring_exec_allreduce(bufs, n, COUNT, dts[di], ops[oi],
                                                          quant ? pcclQuantMinMax : pcclQuantNone,
                                                          pcclUint8, tx, rx);
                    if (rc != pcclSuccess) return -1;
                    for (uint32_t r = 0; r < n; r++) {
                        fold(storage[r], bytes);
                        fold_u64(tx[r]);
                        fold_u64(rx[r]);
                    }
                }
            }
        }
    }
    return 0;
}

int main(void)
{
    if (corpus_reduce() != 0 || corpus_quant() != 0 || corpus_hash() != 0 || corpus_ring() != 0) {
        fprintf(stderr, "corpus: a primitive returned an error after %" PRIu64 " items\n", items);
        return 1;
    }
    printf("corpus items: %" PRIu64 "\n", items);
    printf("corpus hash: %016" PRIx64 "\n", chain);
    return 0;
}
