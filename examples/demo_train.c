/*
 * demo_train.c — a pccl peer that trains a small model together with the
 * other peers of a run (the live demo, scripts/demo.sh).
 *
 * The model is a one-hidden-layer MLP (tanh, softmax cross-entropy) on a
 * synthetic classification task generated in the program: class centres
 * come from --seed (the same on every peer), each peer's data shard from
 * --seed and its --index. The loop is PCCL's reference training loop:
 *
 *   pcclConnect; then per local iteration:
 *     pcclUpdateTopology (from the 2nd iteration)  admits newcomers
 *     pcclGetAttribute(CURRENT_WORLD_SIZE)         alone: wait and retry
 *     pcclOptimizeTopology (every K iterations)    optional
 *     pcclSynchronizeSharedState                   weights + momentum, revision
 *     local forward/backward on the own shard
 *     pcclAllReduce(AVG) of the gradient           retried when a peer is lost
 *     SGD-with-momentum update; revision + 1
 *
 * One progress line per step (revision, world size, global loss, bytes moved,
 * bus bandwidth of the all-reduce); at the target revision each peer prints
 * the XXH3-64 hash of its shared state, identical on every peer.
 *
 *   demo_train --url tcp://127.0.0.1:PORT --index I [--steps N] [--min-world W]
 *              [--step-ms MS] [--hidden H] [--batch B] [--seed S]
 *              [--optimize-every K] [--timeout-ms MS]
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "pccl.h"

#define N_IN      32u
#define N_CLASSES 8u
#define SHARD     2048u

typedef struct opts {
    const char *url;
    uint32_t index, steps, min_world, step_ms, hidden, batch, seed, optimize_every, timeout_ms;
} opts;

/* ---- small helpers --------------------------------------------------------------------------- */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void sleep_ms(uint32_t ms)
{
    struct timespec ts;
    ts.tv_sec = (time_t)(ms / 1000u);
    ts.tv_nsec = (long)(ms % 1000u) * 1000000L;
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Uniform in [0, 1). */
static float uniform01(uint64_t *s)
{
    return (float)(splitmix64(s) >> 40) * (1.0f / 16777216.0f);
}

/* Standard normal (Box-Muller). */
static float gauss(uint64_t *s)
{
    const float u1 = uniform01(s) + 1e-7f;
    const float u2 = uniform01(s);
    return sqrtf(-2.0f * logf(u1)) * cosf(6.28318530718f * u2);
}

static void human_bytes(double b, char *out, size_t n)
{
    if (b >= 1048576.0)
        snprintf(out, n, "%.2f MiB", b / 1048576.0);
    else if (b >= 1024.0)
        snprintf(out, n, "%.1f KiB", b / 1024.0);
    else
        snprintf(out, n, "%.0f B", b);
}

static const char *result_name(pcclResult_t r)
{
    switch (r) {
#define PCCL_DEMO_NAME(name, value, msg)                                                           \
    case name:                                                                                     \
        return msg;
        PCCL_RESULT_MAP(PCCL_DEMO_NAME)
#undef PCCL_DEMO_NAME
    default:
        return "unknown result";
    }
}

/* ---- the model ------------------------------------------------------------------------------- */

typedef struct model {
    uint32_t hidden;
    size_t n_params; /* W1[H*I] b1[H] W2[C*H] b2[C] */
    float *w;        /* weights (shared state) */
    float *m;        /* momentum (shared state) */
    float *g;        /* local gradient, then 2 statistics: loss, accuracy */
    float *gavg;     /* all-reduced (averaged) gradient and statistics */
    float *h;        /* hidden activations of one sample */
    float *dh;       /* gradient of the hidden pre-activation */
} model;

static int model_init(model *md, uint32_t hidden, uint32_t seed)
{
    md->hidden = hidden;
    md->n_params = (size_t)hidden * N_IN + hidden + (size_t)N_CLASSES * hidden + N_CLASSES;
    md->w = calloc(md->n_params, sizeof(float));
    md->m = calloc(md->n_params, sizeof(float));
    md->g = calloc(md->n_params + 2u, sizeof(float));
    md->gavg = calloc(md->n_params + 2u, sizeof(float));
    md->h = calloc(hidden, sizeof(float));
    md->dh = calloc(hidden, sizeof(float));
    if (md->w == NULL || md->m == NULL || md->g == NULL || md->gavg == NULL || md->h == NULL ||
        md->dh == NULL)
        return -1;
    /* The same initial weights on every peer (the shared-state sync would
     * make them identical anyway: the popular content wins). */
    uint64_t s = 0xC0FFEEull ^ ((uint64_t)seed << 32);
    const float a1 = 1.0f / sqrtf((float)N_IN), a2 = 1.0f / sqrtf((float)hidden);
    float *w1 = md->w, *w2 = md->w + (size_t)hidden * N_IN + hidden;
    for (size_t i = 0; i < (size_t)hidden * N_IN; i++)
        w1[i] = (2.0f * uniform01(&s) - 1.0f) * a1;
    for (size_t i = 0; i < (size_t)N_CLASSES * hidden; i++)
        w2[i] = (2.0f * uniform01(&s) - 1.0f) * a2;
    return 0;
}

static void model_free(model *md)
{
    free(md->w);
    free(md->m);
    free(md->g);
    free(md->gavg);
    free(md->h);
    free(md->dh);
}

/* The peer's data shard: SHARD samples around per-class centres (shared by all peers). */
static int make_shard(uint32_t seed, uint32_t index, float **x_out, uint8_t **y_out)
{
    float centres[N_CLASSES * N_IN];
    uint64_t s = 0x5EEDull ^ ((uint64_t)seed << 20);
    for (size_t i = 0; i < N_CLASSES * N_IN; i++)
        centres[i] = gauss(&s);
    float *x = malloc(sizeof(float) * SHARD * N_IN);
    uint8_t *y = malloc(SHARD);
    if (x == NULL || y == NULL) {
        free(x);
        free(y);
        return -1;
    }
    uint64_t d = ((uint64_t)seed << 32) ^ (0xDA7Aull + 0x1000003ull * (uint64_t)(index + 1u));
    for (size_t n = 0; n < SHARD; n++) {
        const uint8_t c = (uint8_t)(splitmix64(&d) % N_CLASSES);
        y[n] = c;
        for (size_t i = 0; i < N_IN; i++)
            x[n * N_IN + i] = centres[c * N_IN + i] + 3.0f * gauss(&d);
    }
    *x_out = x;
    *y_out = y;
    return 0;
}

/* Gradient of the mean cross-entropy over batch samples starting at `first`;
 * writes loss and accuracy after the gradient. */
static void model_grad(model *md, const float *x, const uint8_t *y, size_t first, size_t batch)
{
    const uint32_t H = md->hidden;
    const float *w1 = md->w, *b1 = md->w + (size_t)H * N_IN;
    const float *w2 = b1 + H, *b2 = w2 + (size_t)N_CLASSES * H;
    float *g1 = md->g, *gb1 = md->g + (size_t)H * N_IN;
    float *g2 = gb1 + H, *gb2 = g2 + (size_t)N_CLASSES * H;
    memset(md->g, 0, sizeof(float) * (md->n_params + 2u));
    double loss = 0.0;
    size_t correct = 0;
    const float inv = 1.0f / (float)batch;
    for (size_t k = 0; k < batch; k++) {
        const size_t n = (first + k) % SHARD;
        const float *xn = x + n * N_IN;
        for (uint32_t j = 0; j < H; j++) {
            float a = b1[j];
            for (uint32_t i = 0; i < N_IN; i++)
                a += w1[(size_t)j * N_IN + i] * xn[i];
            md->h[j] = tanhf(a);
        }
        float logits[N_CLASSES], mx = -INFINITY;
        uint32_t arg = 0;
        for (uint32_t c = 0; c < N_CLASSES; c++) {
            float a = b2[c];
            for (uint32_t j = 0; j < H; j++)
                a += w2[(size_t)c * H + j] * md->h[j];
            logits[c] = a;
            if (a > mx) {
                mx = a;
                arg = c;
            }
        }
        float sum = 0.0f;
        for (uint32_t c = 0; c < N_CLASSES; c++) {
            logits[c] = expf(logits[c] - mx);
            sum += logits[c];
        }
        loss += (double)(logf(sum) - (logits[y[n]] > 0.0f ? logf(logits[y[n]]) : -80.0f));
        correct += arg == y[n];
        memset(md->dh, 0, sizeof(float) * H);
        for (uint32_t c = 0; c < N_CLASSES; c++) {
            const float dl = (logits[c] / sum - (c == y[n] ? 1.0f : 0.0f)) * inv;
            gb2[c] += dl;
            for (uint32_t j = 0; j < H; j++) {
                g2[(size_t)c * H + j] += dl * md->h[j];
                md->dh[j] += dl * w2[(size_t)c * H + j];
            }
        }
        for (uint32_t j = 0; j < H; j++) {
            const float da = md->dh[j] * (1.0f - md->h[j] * md->h[j]);
            gb1[j] += da;
            for (uint32_t i = 0; i < N_IN; i++)
                g1[(size_t)j * N_IN + i] += da * xn[i];
        }
    }
    md->g[md->n_params] = (float)(loss / (double)batch);
    md->g[md->n_params + 1u] = (float)correct * inv;
}

/* SGD with momentum on the averaged gradient: the same inputs on every peer
 * give bit-identical weights. */
static void model_step(model *md, float lr, float mu)
{
    for (size_t i = 0; i < md->n_params; i++) {
        md->m[i] = mu * md->m[i] + md->gavg[i];
        md->w[i] -= lr * md->m[i];
    }
}

static uint64_t state_hash(const pcclSharedState_t *st)
{
    XXH3_state_t *h = XXH3_createState();
    if (h == NULL) return 0;
    XXH3_64bits_reset(h);
    for (size_t i = 0; i < st->count; i++)
        XXH3_64bits_update(h, st->infos[i].data, st->infos[i].count * sizeof(float));
    const uint64_t v = XXH3_64bits_digest(h);
    XXH3_freeState(h);
    return v;
}

/* ---- the training loop ----------------------------------------------------------------------- */

static int parse_args(int argc, char **argv, opts *o)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (i + 1 >= argc) return -1;
        const char *v = argv[++i];
        if (strcmp(a, "--url") == 0) {
            o->url = v;
            continue;
        }
        char *end = NULL;
        const unsigned long n = strtoul(v, &end, 10);
        if (end == v || *end != '\0' || n > UINT32_MAX) return -1;
        const uint32_t u = (uint32_t)n;
        if (strcmp(a, "--index") == 0)
            o->index = u;
        else if (strcmp(a, "--steps") == 0)
            o->steps = u;
        else if (strcmp(a, "--min-world") == 0)
            o->min_world = u;
        else if (strcmp(a, "--step-ms") == 0)
            o->step_ms = u;
        else if (strcmp(a, "--hidden") == 0 && u > 0)
            o->hidden = u;
        else if (strcmp(a, "--batch") == 0 && u > 0)
            o->batch = u;
        else if (strcmp(a, "--seed") == 0)
            o->seed = u;
        else if (strcmp(a, "--optimize-every") == 0)
            o->optimize_every = u;
        else if (strcmp(a, "--timeout-ms") == 0)
            o->timeout_ms = u;
        else
            return -1;
    }
    return o->url == NULL ? -1 : 0;
}

/* Admits newcomers; retries a failed vote. Returns 0, or -1 on a fatal error. */
static int update_topology(pcclComm_t *comm, uint32_t me)
{
    for (;;) {
        const pcclResult_t r = pcclUpdateTopology(comm);
        if (r == pcclSuccess) return 0;
        if (r != pcclUpdateTopologyFailed) {
            fprintf(stderr, "peer %u: pcclUpdateTopology: %s\n", me, result_name(r));
            return -1;
        }
        sleep_ms(20);
    }
}

static int world_size(const pcclComm_t *comm)
{
    int w = 0;
    if (pcclGetAttribute(comm, PCCL_ATTRIBUTE_CURRENT_WORLD_SIZE, &w) != pcclSuccess) return -1;
    return w;
}

static int train(pcclComm_t *comm, const opts *o, model *md, const float *x, const uint8_t *y)
{
    pcclTensorInfo_t infos[2];
    memset(infos, 0, sizeof infos);
    infos[0].name = "mlp.weights";
    infos[0].data = md->w;
    infos[0].count = md->n_params;
    infos[0].datatype = pcclFloat;
    infos[0].device_type = pcclDeviceCpu;
    infos[1] = infos[0];
    infos[1].name = "sgd.momentum";
    infos[1].data = md->m;
    pcclSharedState_t st = {0, 2, infos};

    const uint32_t me = o->index;
    const size_t count = md->n_params + 2u; /* gradient + loss + accuracy */
    const double t0 = now_s();
    /* Wait (bounded) for the run's first peers, so that training starts together. */
    for (int w = world_size(comm); w >= 0 && (uint32_t)w < o->min_world; w = world_size(comm)) {
        if (now_s() - t0 > 20.0) break;
        if (update_topology(comm, me) != 0) return -1;
    }
    int was_alone = 0;
    for (uint64_t local_iter = 0;; local_iter++) {
        const double t_step = now_s();
        if (local_iter > 0 && update_topology(comm, me) != 0) return -1;
        int world = world_size(comm);
        if (world < 0) return -1;
        if (world < 2) {
            if (!was_alone) printf("peer %u | alone: waiting for peers\n", me);
            was_alone = 1;
            sleep_ms(100);
            continue;
        }
        was_alone = 0;
        if (o->optimize_every > 0 && local_iter % o->optimize_every == 0) {
            const pcclResult_t r = pcclOptimizeTopology(comm);
            if (r != pcclSuccess && r != pcclTopologyOptimizationFailed) {
                fprintf(stderr, "peer %u: pcclOptimizeTopology: %s\n", me, result_name(r));
                return -1;
            }
            world = world_size(comm);
            if (r != pcclSuccess || world < 2) continue;
        }

        /* Shared state: weights + momentum, voted by hash; a newcomer (or a
         * restarted peer) receives the popular content and revision here. */
        pcclSharedStateSyncInfo_t si = {0, 0};
        const uint64_t rev_before = st.revision;
        pcclResult_t r = pcclSynchronizeSharedState(comm, &st, &si);
        if (r == pcclRankConnectionLost || r == pcclTooFewPeers) {
            printf("peer %u | rev %4llu | shared-state sync failed (%s): retrying\n", me,
                   (unsigned long long)st.revision, result_name(r));
            continue;
        }
        if (r != pcclSuccess) {
            fprintf(stderr, "peer %u: pcclSynchronizeSharedState: %s\n", me, result_name(r));
            return -1;
        }
        if (si.rx_bytes > 0) {
            char b[32];
            human_bytes((double)si.rx_bytes, b, sizeof b);
            printf("peer %u | received the popular shared state: %s, revision %llu -> %llu\n", me,
                   b, (unsigned long long)rev_before, (unsigned long long)st.revision);
        }
        if (st.revision >= o->steps) break;

        /* Local gradient on this peer's shard, then the group's average. */
        const size_t batches = SHARD / o->batch > 0 ? SHARD / o->batch : 1;
        model_grad(md, x, y, (size_t)(st.revision % batches) * o->batch, o->batch);
        /* --step-ms paces the demo like a longer compute phase, so that a
         * peer killed mid-run is most likely lost while the others wait in
         * the all-reduce. */
        const double spent_ms = (now_s() - t_step) * 1e3;
        if ((double)o->step_ms > spent_ms) sleep_ms((uint32_t)((double)o->step_ms - spent_ms));
        pcclReduceDescriptor_t desc;
        memset(&desc, 0, sizeof desc);
        desc.count = count;
        desc.op = pcclAvg;
        desc.tag = 0;
        desc.src_descriptor.datatype = pcclFloat;
        desc.src_descriptor.distribution_hint = pcclDistributionNone;
        desc.quantization_options.quantized_datatype = pcclFloat;
        desc.quantization_options.algorithm = pcclQuantNone;
        pcclReduceInfo_t ri = {0, 0, 0};
        double t_ar = 0.0;
        int lost_all = 0;
        for (;;) {
            const double t1 = now_s();
            r = pcclAllReduce(md->g, md->gavg, &desc, comm, &ri);
            t_ar = now_s() - t1;
            if (r == pcclSuccess) break;
            if (r != pcclRankConnectionLost && r != pcclTooFewPeers) {
                fprintf(stderr, "peer %u: pcclAllReduce: %s\n", me, result_name(r));
                return -1;
            }
            world = world_size(comm);
            printf("peer %u | rev %4llu | all-reduce failed (%s), world now %d: %s\n", me,
                   (unsigned long long)st.revision, result_name(r), world,
                   world >= 2 ? "retrying" : "waiting for peers");
            if (world < 2) {
                lost_all = 1;
                break;
            }
        }
        if (lost_all) continue;

        model_step(md, 0.05f, 0.9f);
        st.revision++;

        const uint32_t n = ri.local_world_size;
        const double bytes = (double)count * sizeof(float);
        const double busbw = n > 1 && t_ar > 0.0 ? bytes * 2.0 * (n - 1) / n / t_ar : 0.0;
        char moved[32], sync_b[32];
        human_bytes((double)(si.tx_bytes + si.rx_bytes + ri.tx_bytes + ri.rx_bytes), moved,
                    sizeof moved);
        human_bytes((double)(si.tx_bytes + si.rx_bytes), sync_b, sizeof sync_b);
        printf("peer %u | rev %4llu | world %u | loss %.4f acc %.3f | moved %s (sync %s) | "
               "all-reduce %.2f ms busbw %.1f MB/s\n",
               me, (unsigned long long)st.revision, n, (double)md->gavg[md->n_params],
               (double)md->gavg[md->n_params + 1u], moved, sync_b, t_ar * 1e3, busbw / 1e6);
        if (st.revision >= o->steps) break;
    }
    printf("peer %u | FINAL revision %llu hash %016llx\n", me, (unsigned long long)st.revision,
           (unsigned long long)state_hash(&st));
    return 0;
}

int main(int argc, char **argv)
{
    opts o = {NULL, 0, 50, 2, 0, 1024, 64, 1, 0, 30000};
    if (parse_args(argc, argv, &o) != 0) {
        fprintf(stderr, "usage: demo_train --url tcp://HOST:PORT --index I [--steps N] "
                        "[--min-world W] [--step-ms MS]\n"
                        "                  [--hidden H] [--batch B] [--seed S] "
                        "[--optimize-every K] [--timeout-ms MS]\n");
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    model md;
    memset(&md, 0, sizeof md);
    float *x = NULL;
    uint8_t *y = NULL;
    if (model_init(&md, o.hidden, o.seed) != 0 || make_shard(o.seed, o.index, &x, &y) != 0) {
        fprintf(stderr, "peer %u: out of memory\n", o.index);
        model_free(&md);
        return 1;
    }
    int rc = 1;
    pcclComm_t *comm = NULL;
    pcclCommCreateParams_t params;
    memset(&params, 0, sizeof params);
    pcclCommCreateOptions_t copts = PCCL_COMM_CREATE_OPTIONS_INIT;
    copts.master_url = o.url;
    copts.timeout_ms = o.timeout_ms;
    pcclResult_t r = pcclInit();
    if (r == pcclSuccess) r = pcclCreateCommunicatorEx(&params, &copts, &comm);
    if (r == pcclSuccess) r = pcclConnect(comm);
    if (r != pcclSuccess) {
        fprintf(stderr, "peer %u: cannot join %s: %s\n", o.index, o.url, result_name(r));
    } else {
        printf("peer %u | joined %s: %zu parameters, shard of %u samples\n", o.index, o.url,
               md.n_params, SHARD);
        rc = train(comm, &o, &md, x, y) == 0 ? 0 : 1;
    }
    if (comm != NULL) pcclDestroyCommunicator(comm);
    free(x);
    free(y);
    model_free(&md);
    return rc;
}
