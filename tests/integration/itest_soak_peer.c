/*
 * itest_soak_peer.c — one peer of the churn soak test (tests/integration/soak.py).
 *
 *   itest_soak_peer --url URL --slot S --inc I --seed X --stop-file PATH
 *                   [--count C] [--timeout-ms T] [--max-s M] [--diverge-pct P]
 *                   [--corrupt-permille Q] [--optimize-every K]
 *
 * Loops like a training job until PATH exists: update topology, synchronize
 * the shared state (one int32 tensor "w" of C elements and the revision),
 * all-reduce (SUM, int32) exact integer data, then w = w * 1000003 + result
 * (wrapping) and revision + 1. --optimize-every K (default 0: never) calls
 * pcclOptimizeTopology after the sync of every revision that is a multiple of K
 * (every member syncs to the same revision, so all call it together); a
 * failed optimization is printed and the step carries on. --corrupt-permille (a canary, default 0)
 * flips a bit of w after Q of 1000 syncs, as a broken sync would.
 * Before a sync it sometimes (P percent)
 * perturbs one element of w without touching the revision: the sync must
 * repair (or elect) it, so every member ends the sync with the same state.
 *
 * Contribution of this process (incarnation) at revision r, with u a random
 * 31-bit number drawn per incarnation:
 *   x[0] = 1, x[1] = u, x[j] = (r + 1) * (j + 1) + u * (j % 7)   (j >= 2)
 * so the sum over the M members, with U = the sum of their u, is exactly
 *   y[0] = M, y[1] = U, y[j] = M * (r + 1) * (j + 1) + U * (j % 7)
 * (all mod 2^32). Every successful all-reduce is checked element by element,
 * and M must equal the reported local world size. The controller checks
 * across peers that every revision has one (M, U) and one state hash.
 *
 * Output, one line each, prefixed with CLOCK_MONOTONIC milliseconds:
 *   READY slot inc u            connected
 *   S rev hash rx tx            a successful sync: the state hash after it
 *   R rev M U                   a successful, exact all-reduce
 *   O rev                       a successful pcclOptimizeTopology
 *   F what code                 a failed call (retried)
 *   W world                     waiting for a second peer (about once a second)
 *   RECONNECT code              the master connection was lost (eviction): a
 *                               new communicator, keeping w and the revision
 *   WRONG ... / HANG ... / UNEXPECTED ...   then exit 1 / 3 / 4
 *   BYE rev hash                stop file seen, exit 0
 * Exit codes: 0 ok, 1 wrong result, 2 setup, 3 a call timed out (hang),
 * 4 an unexpected result code.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pccl.h"

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

#define OUT(...)                                                                                   \
    do {                                                                                           \
        printf("%llu ", (unsigned long long)now_ms());                                             \
        printf(__VA_ARGS__);                                                                       \
        printf("\n");                                                                              \
        fflush(stdout);                                                                            \
    } while (0)

/* splitmix64: the per-incarnation random stream (seeded by the controller). */
static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* FNV-1a 64 over the revision and the tensor bytes. */
static uint64_t state_hash(const uint32_t *w, uint64_t count, uint64_t rev)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (int i = 0; i < 8; i++) {
        h ^= (rev >> (8 * i)) & 0xffu;
        h *= 0x100000001b3ull;
    }
    const unsigned char *b = (const unsigned char *)w;
    for (uint64_t i = 0; i < count * 4u; i++) {
        h ^= b[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

typedef struct soak {
    const char *url;
    uint32_t timeout_ms;
    pcclComm_t *comm;
    bool fresh; /* connected, no loop iteration yet */
} soak;

static pcclResult_t connect_comm(soak *s)
{
    pcclCommCreateParams_t params;
    memset(&params, 0, sizeof params);
    pcclCommCreateOptions_t opts = PCCL_COMM_CREATE_OPTIONS_INIT;
    opts.master_url = s->url;
    opts.timeout_ms = s->timeout_ms;
    pcclResult_t r = pcclCreateCommunicatorEx(&params, &opts, &s->comm);
    if (r != pcclSuccess) return r;
    r = pcclConnect(s->comm);
    if (r != pcclSuccess) {
        pcclDestroyCommunicator(s->comm);
        s->comm = NULL;
    }
    s->fresh = r == pcclSuccess;
    return r;
}

/* Results a call may legitimately return while peers churn: retry. */
static bool retryable(pcclResult_t r)
{
    return r == pcclTooFewPeers || r == pcclRankConnectionFailed || r == pcclRankConnectionLost ||
           r == pcclUpdateTopologyFailed || r == pcclSharedStateSyncFailed ||
           r == pcclMasterConnectionFailed;
}

/* 0: go on (retry the loop); otherwise the exit code. */
static int on_failure(soak *s, const char *what, pcclResult_t r)
{
    OUT("F %s %d", what, (int)r);
    if (r == pcclTimeout) {
        OUT("HANG %s did not return within %u ms", what, s->timeout_ms);
        return 3;
    }
    if (!retryable(r)) {
        OUT("UNEXPECTED %s %d", what, (int)r);
        return 4;
    }
    if (r == pcclMasterConnectionFailed) {
        /* Evicted (e.g. after a SIGSTOP): join again as a new peer, keeping
         * the (now outdated) shared state. */
        pcclDestroyCommunicator(s->comm);
        s->comm = NULL;
        const uint64_t t0 = now_ms();
        pcclResult_t c;
        while ((c = connect_comm(s)) != pcclSuccess) {
            if (now_ms() - t0 > s->timeout_ms) {
                OUT("HANG reconnect: %d for %u ms", (int)c, s->timeout_ms);
                return 3;
            }
            sleep_ms(100);
        }
        OUT("RECONNECT %d", (int)r);
    } else {
        sleep_ms(10);
    }
    return 0;
}

int main(int argc, char **argv)
{
    soak s;
    memset(&s, 0, sizeof s);
    s.timeout_ms = 30000;
    const char *stop_file = NULL;
    uint32_t slot = 0, inc = 0, max_s = 600, diverge_pct = 10, corrupt_permille = 0;
    uint64_t optimize_every = 0;
    uint64_t seed = 1, count = 50021;
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *a = argv[i], *v = argv[i + 1];
        if (strcmp(a, "--url") == 0)
            s.url = v;
        else if (strcmp(a, "--slot") == 0)
            slot = (uint32_t)strtoul(v, NULL, 10);
        else if (strcmp(a, "--inc") == 0)
            inc = (uint32_t)strtoul(v, NULL, 10);
        else if (strcmp(a, "--seed") == 0)
            seed = strtoull(v, NULL, 10);
        else if (strcmp(a, "--stop-file") == 0)
            stop_file = v;
        else if (strcmp(a, "--count") == 0)
            count = strtoull(v, NULL, 10);
        else if (strcmp(a, "--timeout-ms") == 0)
            s.timeout_ms = (uint32_t)strtoul(v, NULL, 10);
        else if (strcmp(a, "--max-s") == 0)
            max_s = (uint32_t)strtoul(v, NULL, 10);
        else if (strcmp(a, "--diverge-pct") == 0)
            diverge_pct = (uint32_t)strtoul(v, NULL, 10);
        else if (strcmp(a, "--corrupt-permille") == 0)
            corrupt_permille = (uint32_t)strtoul(v, NULL, 10);
        else if (strcmp(a, "--optimize-every") == 0)
            optimize_every = strtoull(v, NULL, 10);
    }
    if (s.url == NULL || stop_file == NULL || count < 2 || count > (1u << 24)) return 2;
    uint64_t rng = seed * 1000003u + slot * 1009u + inc;
    const uint32_t u = (uint32_t)(rng_next(&rng) & 0x7fffffffu);
    uint32_t *w = calloc((size_t)count, sizeof *w);
    uint32_t *x = malloc((size_t)count * sizeof *x);
    uint32_t *y = malloc((size_t)count * sizeof *y);
    if (w == NULL || x == NULL || y == NULL) return 2;
    pcclResult_t r = pcclInit();
    /* A loaded machine may starve the master for a heartbeat period while
     * this peer joins: retry the connect like a training job would. */
    const uint64_t t_conn = now_ms();
    while (r == pcclSuccess && (r = connect_comm(&s)) != pcclSuccess) {
        OUT("F connect %d", (int)r);
        if (r != pcclMasterConnectionFailed || now_ms() - t_conn > s.timeout_ms) break;
        sleep_ms(100);
        r = pcclSuccess;
    }
    if (r != pcclSuccess) {
        free(w);
        free(x);
        free(y);
        return 2;
    }
    OUT("READY %u %u %u", slot, inc, u);

    pcclTensorInfo_t info;
    memset(&info, 0, sizeof info);
    info.name = "w";
    info.data = w;
    info.count = count;
    info.datatype = pcclUint32;
    pcclSharedState_t st;
    memset(&st, 0, sizeof st);
    st.count = 1;
    st.infos = &info;
    pcclReduceDescriptor_t desc;
    memset(&desc, 0, sizeof desc);
    desc.count = count;
    desc.op = pcclSum;
    desc.src_descriptor.datatype = pcclUint32;
    desc.quantization_options.quantized_datatype = pcclUint32;

    const uint64_t t_start = now_ms();
    uint64_t t_wait_print = 0;
    int rc = 0;
    while (rc == 0 && access(stop_file, F_OK) != 0) {
        if (now_ms() - t_start > (uint64_t)max_s * 1000u) {
            OUT("HANG no stop file after %u s", max_s);
            rc = 3;
            break;
        }
        /* Right after (re)connecting the peer is already admitted: like
         * PCCL's examples, its first iteration skips the topology vote (the
         * members that admitted it go straight on to the sync). */
        if (!s.fresh) {
            r = pcclUpdateTopology(s.comm);
            if (r != pcclSuccess) {
                rc = on_failure(&s, "update", r);
                continue;
            }
        }
        s.fresh = false;
        int ws = 0;
        r = pcclGetAttribute(s.comm, PCCL_ATTRIBUTE_CURRENT_WORLD_SIZE, &ws);
        if (r != pcclSuccess) {
            rc = on_failure(&s, "attribute", r);
            continue;
        }
        if (ws < 2) {
            if (now_ms() - t_wait_print >= 1000u) {
                OUT("W %d", ws);
                t_wait_print = now_ms();
            }
            sleep_ms(20);
            continue;
        }
        if (rng_next(&rng) % 100u < diverge_pct) w[rng_next(&rng) % count] ^= 1u;
        pcclSharedStateSyncInfo_t si;
        memset(&si, 0, sizeof si);
        r = pcclSynchronizeSharedState(s.comm, &st, &si);
        if (r != pcclSuccess) {
            rc = on_failure(&s, "sync", r);
            continue;
        }
        const uint64_t rev = st.revision;
        /* Canary (soak.py --canary): pretend the sync left this peer with a
         * different state; the controller's cross-peer check must see it. */
        if (corrupt_permille > 0 && rng_next(&rng) % 1000u < corrupt_permille) w[0] ^= 0x80u;
        OUT("S %llu %016llx %llu %llu", (unsigned long long)rev,
            (unsigned long long)state_hash(w, count, rev), (unsigned long long)si.rx_bytes,
            (unsigned long long)si.tx_bytes);
        if (optimize_every > 0 && rev % optimize_every == 0) {
            r = pcclOptimizeTopology(s.comm);
            if (r == pcclSuccess) {
                OUT("O %llu", (unsigned long long)rev);
            } else if (r == pcclTopologyOptimizationFailed) {
                OUT("F optimize %d", (int)r); /* carry on with the ring as it is */
            } else {
                rc = on_failure(&s, "optimize", r);
                continue;
            }
        }
        x[0] = 1u;
        x[1] = u;
        for (uint64_t j = 2; j < count; j++) {
            x[j] = (uint32_t)(rev + 1u) * (uint32_t)(j + 1u) + u * (uint32_t)(j % 7u);
        }
        desc.tag = rev;
        pcclReduceInfo_t ri;
        memset(&ri, 0, sizeof ri);
        r = pcclAllReduce(x, y, &desc, s.comm, &ri);
        if (r != pcclSuccess) {
            rc = on_failure(&s, "allreduce", r);
            continue;
        }
        const uint32_t m = y[0], usum = y[1];
        if (m != ri.local_world_size || m < 2u) {
            OUT("WRONG rev %llu: y[0] %u, local world size %u", (unsigned long long)rev, m,
                ri.local_world_size);
            rc = 1;
            break;
        }
        for (uint64_t j = 2; j < count && rc == 0; j++) {
            const uint32_t want =
                m * (uint32_t)(rev + 1u) * (uint32_t)(j + 1u) + usum * (uint32_t)(j % 7u);
            if (y[j] != want) {
                OUT("WRONG rev %llu element %llu: got %u want %u (M %u U %u)",
                    (unsigned long long)rev, (unsigned long long)j, y[j], want, m, usum);
                rc = 1;
            }
        }
        if (rc != 0) break;
        OUT("R %llu %u %u", (unsigned long long)rev, m, usum);
        for (uint64_t j = 0; j < count; j++)
            w[j] = w[j] * 1000003u + y[j];
        st.revision = rev + 1u;
    }
    if (rc == 0) {
        OUT("BYE %llu %016llx", (unsigned long long)st.revision,
            (unsigned long long)state_hash(w, count, st.revision));
        if (pcclDestroyCommunicator(s.comm) != pcclSuccess) rc = 1;
    }
    free(w);
    free(x);
    free(y);
    return rc;
}
