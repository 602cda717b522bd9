/*
 * peer_c.c — the C peer of the cross-language test (tests/crosslang/run.sh).
 * It follows the same protocol as the Go (bindings/go/cmd/pcclpeer), Rust
 * (bindings/rust/crates/pccl/examples/peer.rs) and Python (peer.py) peers, so
 * that all four can form one group:
 *
 *   peer_c --master HOST:PORT|URL --steps K --rank-value V --world N [--count C]
 *          [--timeout-ms T]
 *
 * 1. Connects and updates the topology until the group has N peers.
 * 2. For each step s = 0..K-1: updates the topology; synchronizes the shared
 *    state (one int32 tensor "state" of C elements, default 8, revision s,
 *    ENFORCE_POPULAR); all-reduces (SUM, tag 0) v[j] = V*(s+1)+j into a
 *    separate buffer; prints "step s world W sum a,b,..."; state[j] += sum[j]
 *    (wrapping int32).
 * 3. Runs three ops of the collective set on the epoch of the last completed
 *    call (retried after an update of the topology while a call answers
 *    pcclUpdateTopologyFailed), each on int32 buffers, R the rank and W the
 *    world the op reports:
 *    - broadcast from rank 0 of C elements, the root's holding 1000*V+j (the
 *      others' -1): prints "bcast rank R world W data a,b,...";
 *    - all-gather of V*100+j (C elements each): prints "allgather rank R world
 *      W data ..." (all W*C elements, block r from rank r);
 *    - reduce-scatter SUM of W*C elements V*(k+1), k = 0..W*C-1: prints
 *      "reducescatter rank R world W data ..." (this rank's block of C).
 * 4. Synchronizes revision K and prints "hash H": FNV-1a 64 over the state's
 *    little-endian int32 bytes, 16 lowercase hex digits.
 *
 * Exit status: 0 success, 1 a pccl call failed, 2 bad usage or admission
 * timeout.
 */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pccl.h"

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static int usage(const char *msg)
{
    fprintf(stderr, "peer_c: %s\n", msg);
    fprintf(stderr, "usage: peer_c --master HOST:PORT|URL --steps K --rank-value V --world N "
                    "[--count C] [--timeout-ms T]\n");
    return 2;
}

static int parse_long(const char *s, long min, long max, long *out)
{
    char *end = NULL;
    const long v = strtol(s, &end, 10);
    if (end == s || *end != '\0' || v < min || v > max) {
        return -1;
    }
    *out = v;
    return 0;
}

static int failed(const char *what, pcclResult_t r)
{
    fprintf(stderr, "peer_c: %s failed: %d\n", what, (int)r);
    return 1;
}

/* pcclUpdateTopology, retried while it answers pcclUpdateTopologyFailed. */
static pcclResult_t update_topology(pcclComm_t *comm, uint64_t deadline_ms)
{
    pcclResult_t r;
    do {
        r = pcclUpdateTopology(comm);
    } while (r == pcclUpdateTopologyFailed && now_ms() < deadline_ms);
    return r;
}

/* FNV-1a 64 over the little-endian bytes of the int32 elements. */
static uint64_t fnv1a64(const int32_t *v, size_t count)
{
    uint64_t h = 0xcbf29ce484222325u;
    for (size_t i = 0; i < count; i++) {
        const uint32_t x = (uint32_t)v[i];
        for (unsigned b = 0; b < 4; b++) {
            h ^= (uint8_t)(x >> (8u * b));
            h *= 0x100000001b3u;
        }
    }
    return h;
}

static void print_data(const char *op, const pcclCollectiveInfo_t *info, const int32_t *v, size_t n)
{
    printf("%s rank %u world %u data ", op, info->rank, info->world_size);
    for (size_t j = 0; j < n; j++) {
        printf(j == 0 ? "%" PRId32 : ",%" PRId32, v[j]);
    }
    printf("\n");
    fflush(stdout);
}

/* Reads the rank and world of the communicator's last completed call. */
static pcclResult_t rank_world(pcclComm_t *comm, int *rank, size_t *world)
{
    int ws = 0;
    pcclResult_t r = pcclGetAttribute(comm, PCCL_ATTRIBUTE_RANK, rank);
    if (r == pcclSuccess) {
        r = pcclGetAttribute(comm, PCCL_ATTRIBUTE_PEER_GROUP_WORLD_SIZE, &ws);
    }
    *world = ws > 0 ? (size_t)ws : 1u;
    return r;
}

enum { OP_BCAST, OP_ALLGATHER, OP_REDUCESCATTER };

/*
 * One op of step 3, sized for the rank and world of the last completed call;
 * on pcclUpdateTopologyFailed (the membership changed before every member
 * started it) the topology is updated and the op is sized and run again.
 */
static int collective(pcclComm_t *comm, int op, int32_t v, size_t count, uint64_t deadline_ms)
{
    for (;;) {
        int rank = 0;
        size_t world = 1;
        pcclResult_t r = rank_world(comm, &rank, &world);
        if (r != pcclSuccess) {
            return failed("pcclGetAttribute", r);
        }
        int32_t *send = calloc(world * count, sizeof(int32_t));
        int32_t *recv = calloc(world * count, sizeof(int32_t));
        if (send == NULL || recv == NULL) {
            free(send);
            free(recv);
            fprintf(stderr, "peer_c: out of memory\n");
            return 1;
        }
        pcclCollectiveInfo_t info = {0};
        const char *name = NULL;
        size_t shown = count;
        if (op == OP_BCAST) {
            name = "bcast";
            for (size_t j = 0; j < count; j++) {
                recv[j] = rank == 0 ? (int32_t)((uint32_t)v * 1000u + (uint32_t)j) : -1;
            }
            r = pcclBroadcast(recv, count, pcclInt32, 0, NULL, comm, &info);
        } else if (op == OP_ALLGATHER) {
            name = "allgather";
            for (size_t j = 0; j < count; j++) {
                send[j] = (int32_t)((uint32_t)v * 100u + (uint32_t)j);
            }
            shown = world * count;
            r = pcclAllGather(send, recv, count, pcclInt32, NULL, comm, &info);
        } else {
            name = "reducescatter";
            for (size_t k = 0; k < world * count; k++) {
                send[k] = (int32_t)((uint32_t)v * (uint32_t)(k + 1));
            }
            r = pcclReduceScatter(send, recv, count, pcclInt32, pcclSum, NULL, comm, &info);
        }
        if (r == pcclSuccess) {
            print_data(name, &info, recv, shown);
        }
        free(send);
        free(recv);
        if (r == pcclSuccess) {
            return 0;
        }
        if (r != pcclUpdateTopologyFailed || now_ms() >= deadline_ms) {
            fprintf(stderr, "peer_c: %s failed: %d\n", name, (int)r);
            return 1;
        }
        r = update_topology(comm, deadline_ms);
        if (r != pcclSuccess) {
            return failed("pcclUpdateTopology", r);
        }
    }
}

static int run(const char *url, long steps, int32_t v, long world, size_t count, long timeout_ms)
{
    int32_t *state = calloc(count, sizeof(int32_t));
    int32_t *send = calloc(count, sizeof(int32_t));
    int32_t *sum = calloc(count, sizeof(int32_t));
    if (state == NULL || send == NULL || sum == NULL) {
        fprintf(stderr, "peer_c: out of memory\n");
        return 1;
    }
    int rc = 1;
    pcclComm_t *comm = NULL;
    pcclResult_t r = pcclInit();
    if (r != pcclSuccess) {
        rc = failed("pcclInit", r);
        goto out;
    }
    pcclCommCreateParams_t params = {0};
    pcclCommCreateOptions_t opts = PCCL_COMM_CREATE_OPTIONS_INIT;
    opts.master_url = url;
    opts.timeout_ms = (uint32_t)timeout_ms;
    r = pcclCreateCommunicatorEx(&params, &opts, &comm);
    if (r != pcclSuccess) {
        rc = failed("pcclCreateCommunicator", r);
        goto out;
    }
    r = pcclConnect(comm);
    if (r != pcclSuccess) {
        rc = failed("pcclConnect", r);
        goto out;
    }
    const uint64_t admitted = now_ms();
    for (;;) {
        int ws = 0;
        r = pcclGetAttribute(comm, PCCL_ATTRIBUTE_CURRENT_WORLD_SIZE, &ws);
        if (r != pcclSuccess) {
            rc = failed("pcclGetAttribute", r);
            goto out;
        }
        if (ws >= world) {
            break;
        }
        if (now_ms() - admitted > (uint64_t)timeout_ms) {
            fprintf(stderr, "peer_c: world stays %d < %ld\n", ws, world);
            rc = 2;
            goto out;
        }
        r = pcclUpdateTopology(comm);
        if (r != pcclSuccess && r != pcclUpdateTopologyFailed) {
            rc = failed("pcclUpdateTopology", r);
            goto out;
        }
    }

    pcclTensorInfo_t tensor = {0};
    tensor.name = "state";
    tensor.data = state;
    tensor.count = count;
    tensor.datatype = pcclInt32;
    tensor.device_type = pcclDeviceCpu;
    pcclSharedState_t shared = {0};
    shared.count = 1;
    shared.infos = &tensor;
    for (long s = 0; s < steps; s++) {
        r = update_topology(comm, now_ms() + (uint64_t)timeout_ms);
        if (r != pcclSuccess) {
            rc = failed("pcclUpdateTopology", r);
            goto out;
        }
        shared.revision = (uint64_t)s;
        r = pcclSynchronizeSharedState(comm, &shared,
                                       PCCL_SHARED_STATE_SYNC_STRATEGY_ENFORCE_POPULAR, NULL);
        if (r != pcclSuccess) {
            rc = failed("pcclSynchronizeSharedState", r);
            goto out;
        }
        for (size_t j = 0; j < count; j++) {
            send[j] = (int32_t)((uint32_t)v * (uint32_t)(s + 1) + (uint32_t)j);
        }
        pcclReduceDescriptor_t desc = {0};
        desc.count = count;
        desc.op = pcclSum;
        desc.tag = 0;
        desc.src_descriptor.datatype = pcclInt32;
        pcclReduceInfo_t info = {0};
        r = pcclAllReduce(send, sum, &desc, comm, &info);
        if (r != pcclSuccess) {
            fprintf(stderr, "peer_c: all-reduce step %ld failed: %d\n", s, (int)r);
            goto out;
        }
        printf("step %ld world %u sum ", s, info.local_world_size);
        for (size_t j = 0; j < count; j++) {
            printf(j == 0 ? "%" PRId32 : ",%" PRId32, sum[j]);
            state[j] = (int32_t)((uint32_t)state[j] + (uint32_t)sum[j]);
        }
        printf("\n");
        fflush(stdout);
    }
    for (int op = OP_BCAST; op <= OP_REDUCESCATTER; op++) {
        if (collective(comm, op, v, count, now_ms() + (uint64_t)timeout_ms) != 0) {
            goto out;
        }
    }
    shared.revision = (uint64_t)steps;
    r = pcclSynchronizeSharedState(comm, &shared, PCCL_SHARED_STATE_SYNC_STRATEGY_ENFORCE_POPULAR,
                                   NULL);
    if (r != pcclSuccess) {
        rc = failed("final pcclSynchronizeSharedState", r);
        goto out;
    }
    printf("hash %016" PRIx64 "\n", fnv1a64(state, count));
    fflush(stdout);
    rc = 0;
out:
    if (comm != NULL) {
        pcclDestroyCommunicator(comm);
    }
    free(state);
    free(send);
    free(sum);
    return rc;
}

int main(int argc, char **argv)
{
    const char *master = NULL;
    long steps = -1, rank_value = 0, world = -1, count = 8, timeout_ms = 30000;
    int have_value = 0;
    for (int i = 1; i < argc; i += 2) {
        if (i + 1 >= argc) {
            return usage("every flag needs a value");
        }
        const char *flag = argv[i];
        const char *val = argv[i + 1];
        int bad = 0;
        if (strcmp(flag, "--master") == 0) {
            master = val;
        } else if (strcmp(flag, "--steps") == 0) {
            bad = parse_long(val, 0, 1000000, &steps);
        } else if (strcmp(flag, "--rank-value") == 0) {
            bad = parse_long(val, INT32_MIN, INT32_MAX, &rank_value);
            have_value = 1;
        } else if (strcmp(flag, "--world") == 0) {
            bad = parse_long(val, 1, 1000000, &world);
        } else if (strcmp(flag, "--count") == 0) {
            bad = parse_long(val, 1, 1L << 24, &count);
        } else if (strcmp(flag, "--timeout-ms") == 0) {
            bad = parse_long(val, 1, 3600000, &timeout_ms);
        } else {
            return usage("unknown flag");
        }
        if (bad) {
            return usage("bad flag value");
        }
    }
    if (master == NULL || steps < 0 || world < 1 || !have_value) {
        return usage("--master, --steps, --rank-value and --world are required");
    }
    /* HOST:PORT becomes tcp://HOST:PORT; URLs pass unchanged. */
    char url[512];
    const int n = strstr(master, "://") != NULL ? snprintf(url, sizeof url, "%s", master)
                                                : snprintf(url, sizeof url, "tcp://%s", master);
    if (n < 0 || (size_t)n >= sizeof url) {
        return usage("master address too long");
    }
    return run(url, steps, (int32_t)rank_value, world, (size_t)count, timeout_ms);
}
