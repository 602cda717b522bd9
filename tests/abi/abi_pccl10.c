/*
 * abi_pccl10.c — a program built the way a PCCL 1.0 program is, run against
 * libpccl: it does not include pccl.h. It declares PCCL 1.0's types and
 * functions itself, written here from PCCL 1.0's documented field lists and
 * signatures (DESIGN.md §6), then
 *   1. compares size, alignment and every field offset of each of those
 *      structs, and the value of every PCCL 1.0 enum constant, with pccl.h's
 *      (the rows abi_layout.c builds from pccl.h);
 *   2. calls every function PCCL 1.0 exports through these declarations:
 *      an in-process master (pcclCreateMaster/Run/Interrupt/Await/Destroy)
 *      and two peers on two threads with pools of 16 and 32 connections,
 *      asserting exact results: world sizes, pcclTooFewPeers from
 *      pcclAllReduceAsync while alone, a SEND_ONLY/RECEIVE_ONLY shared-state
 *      sync through the 4-argument pcclSynchronizeSharedState (the strategy
 *      in the third argument, the info pointer in the fourth), exact integer
 *      all-reduce sums, maxima and multi-op results.
 * Exit 0 when every check passed; the failed checks are printed.
 *
 * Usage: abi_pccl10 (picks a free loopback port for its master).
 */
#define _POSIX_C_SOURCE 200809L
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "abi_rows.h"

/* ------------------------------------------------------------------------ */
/* PCCL 1.0's public types (ccoip.h, ccoip_inet.h, pccl.h), declared here   */
/* ------------------------------------------------------------------------ */

#define CCOIP_PROTOCOL_PORT_MASTER              48148
#define CCOIP_PROTOCOL_PORT_SHARED_STATE        48149
#define CCOIP_PROTOCOL_PORT_P2P                 48150
#define CCOIP_PROTOCOL_PORT_BANDWIDTH_BENCHMARK 48151

typedef enum ccoip_inet_protocol_t { inetIPv4, inetIPv6 } ccoip_inet_protocol_t;
typedef struct ccoip_ipv4_address_t {
    uint8_t data[4];
} ccoip_ipv4_address_t;
typedef struct ccoip_ipv6_address_t {
    uint8_t data[16];
} ccoip_ipv6_address_t;
typedef struct ccoip_inet_address_t {
    ccoip_inet_protocol_t protocol;
    ccoip_ipv4_address_t ipv4;
    ccoip_ipv6_address_t ipv6;
} ccoip_inet_address_t;
typedef struct ccoip_socket_address_t {
    ccoip_inet_address_t inet;
    uint16_t port;
} ccoip_socket_address_t;

typedef enum pcclResult_t {
    pcclSuccess = 0,
    pcclNotInitialized = 1,
    pcclInternalError = 2,
    pcclInvalidArgument = 3,
    pcclInvalidUsage = 4,
    pcclTooFewPeers = 5,
    pcclMasterConnectionFailed = 6,
    pcclRankConnectionFailed = 7,
    pcclRankConnectionLost = 8,
    pcclNoSharedStateAvailable = 9,
    pcclPendingAsyncOps = 10,
    pcclUpdateTopologyFailed = 11,
    pcclTopologyOptimizationFailed = 12
} pcclResult_t;

typedef enum pcclDataType_t {
    pcclUint8 = 0,
    pcclInt8 = 1,
    pcclInt16 = 2,
    pcclUint16 = 3,
    pcclUint32 = 4,
    pcclInt32 = 5,
    pcclUint64 = 6,
    pcclInt64 = 7,
    pcclFloat16 = 8,
    pcclBFloat16 = 9,
    pcclFloat = 10,
    pcclDouble = 11
} pcclDataType_t;

typedef enum pcclDeviceType_t { pcclDeviceCpu = 0, pcclDeviceCuda = 1 } pcclDeviceType_t;
typedef enum pcclRedOp_t { pcclSum, pcclAvg, pcclProd, pcclMax, pcclMin } pcclRedOp_t;
typedef enum pcclAttribute_t {
    PCCL_ATTRIBUTE_GLOBAL_WORLD_SIZE = 1,
    PCCL_ATTRIBUTE_PEER_GROUP_WORLD_SIZE = 2,
    PCCL_ATTRIBUTE_NUM_DISTINCT_PEER_GROUPS = 3,
    PCCL_ATTRIBUTE_LARGEST_PEER_GROUP_WORLD_SIZE = 4
} pcclAttribute_t;
typedef enum pcclSharedStateSyncStrategy_t {
    PCCL_SHARED_STATE_SYNC_STRATEGY_ENFORCE_POPULAR = 0,
    PCCL_SHARED_STATE_SYNC_STRATEGY_RECEIVE_ONLY = 1,
    PCCL_SHARED_STATE_SYNC_STRATEGY_SEND_ONLY = 2
} pcclSharedStateSyncStrategy_t;

typedef struct pcclCommCreateParams_t {
    ccoip_socket_address_t master_address;
    uint32_t peer_group;
    uint32_t p2p_connection_pool_size;
} pcclCommCreateParams_t;

typedef struct pcclComm_t pcclComm_t;

typedef struct pcclReduceInfo_t {
    uint32_t local_world_size;
    uint64_t tx_bytes;
    uint64_t rx_bytes;
} pcclReduceInfo_t;

typedef enum pcclDistributionHint_t {
    pcclDistributionNone = 0,
    pcclDistributionNormal = 1,
    pcclDistributionUniform = 2
} pcclDistributionHint_t;

typedef struct pcclReduceOperandDescriptor_t {
    pcclDataType_t datatype;
    pcclDistributionHint_t distribution_hint;
} pcclReduceOperandDescriptor_t;

typedef enum pcclQuantizationAlgorithm_t {
    pcclQuantNone = 0,
    pcclQuantMinMax = 1,
    pcclQuantZeroPointScale = 2
} pcclQuantizationAlgorithm_t;

typedef struct pcclQuantizationOptions_t {
    pcclDataType_t quantized_datatype;
    pcclQuantizationAlgorithm_t algorithm;
} pcclQuantizationOptions_t;

typedef struct pcclReduceDescriptor_t {
    size_t count;
    pcclRedOp_t op;
    uint64_t tag;
    pcclReduceOperandDescriptor_t src_descriptor;
    pcclQuantizationOptions_t quantization_options;
} pcclReduceDescriptor_t;

typedef struct pcclReduceSingleDescriptor_t {
    void *sendbuf;
    void *recvbuf;
    pcclReduceDescriptor_t descriptor;
} pcclReduceOpDescriptor_t;

typedef struct pcclAsyncReduceOp_t {
    pcclComm_t *comm;
    uint64_t tag;
} pcclAsyncReduceOp_t;

typedef struct pcclRankUuid_t {
    uint8_t data[16];
} pcclRankUuid_t;

typedef struct pcclTensorInfo_t {
    const char *name;
    void *data;
    size_t count;
    pcclDataType_t datatype;
    pcclDeviceType_t device_type;
    bool allow_content_inequality;
} pcclTensorInfo_t;

typedef struct pcclSharedState_t {
    uint64_t revision;
    size_t count;
    pcclTensorInfo_t *infos;
} pcclSharedState_t;

typedef struct pcclSharedStateSyncInfo_t {
    uint64_t tx_bytes;
    uint64_t rx_bytes;
} pcclSharedStateSyncInfo_t;

typedef struct pcclMasterInstanceState_t pcclMasterInstance_t;

typedef struct pcclBuildInfo_t {
    bool has_cuda_support;
} pcclBuildInfo_t;

/* PCCL 1.0's functions, with its signatures. */
pcclResult_t pcclInit(void);
pcclResult_t pcclCreateCommunicator(const pcclCommCreateParams_t *params, pcclComm_t **comm_out);
pcclResult_t pcclGetAttribute(const pcclComm_t *communicator, pcclAttribute_t attribute,
                              int *p_attribute_out);
pcclResult_t pcclDestroyCommunicator(pcclComm_t *communicator);
pcclResult_t pcclConnect(pcclComm_t *communicator);
pcclResult_t pcclUpdateTopology(pcclComm_t *communicator);
pcclResult_t pcclArePeersPending(const pcclComm_t *communicator, bool *pending_out);
pcclResult_t pcclOptimizeTopology(const pcclComm_t *communicator);
pcclResult_t pcclAllReduce(const void *sendbuff, void *recvbuff,
                           const pcclReduceDescriptor_t *descriptor, const pcclComm_t *communicator,
                           pcclReduceInfo_t *reduce_info_out);
pcclResult_t pcclAllReduceAsync(const void *sendbuff, void *recvbuff,
                                const pcclReduceDescriptor_t *descriptor,
                                const pcclComm_t *communicator,
                                pcclAsyncReduceOp_t *reduce_handle_out);
pcclResult_t pcclAllReduceMultipleWithRetry(const pcclReduceOpDescriptor_t *descriptors,
                                            size_t count, const pcclComm_t *communicator,
                                            pcclReduceInfo_t *reduce_info_out, int max_in_flight);
pcclResult_t pcclAwaitAsyncReduce(const pcclAsyncReduceOp_t *reduce_handle,
                                  pcclReduceInfo_t *reduce_info_out);
pcclResult_t pcclSynchronizeSharedState(const pcclComm_t *communicator,
                                        pcclSharedState_t *shared_state,
                                        pcclSharedStateSyncStrategy_t strategy,
                                        pcclSharedStateSyncInfo_t *sync_info_out);
pcclResult_t pcclCreateMaster(ccoip_socket_address_t listen_address,
                              pcclMasterInstance_t **p_master_handle_out);
pcclResult_t pcclRunMaster(pcclMasterInstance_t *master_instance);
pcclResult_t pcclInterruptMaster(pcclMasterInstance_t *master_instance);
pcclResult_t pcclMasterAwaitTermination(pcclMasterInstance_t *master_instance);
pcclResult_t pcclDestroyMaster(pcclMasterInstance_t *master_instance);
pcclResult_t pcclGetBuildInfo(pcclBuildInfo_t *info);

/* ------------------------------------------------------------------------ */
/* Checks                                                                   */
/* ------------------------------------------------------------------------ */

static int g_failed;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            pthread_mutex_lock(&g_mu);                                                             \
            fprintf(stderr, "abi_pccl10: FAILED %s:%d: %s\n", __FILE__, __LINE__, #cond);          \
            g_failed++;                                                                            \
            pthread_mutex_unlock(&g_mu);                                                           \
        }                                                                                          \
    } while (0)

#define CHECK_RESULT(call, want)                                                                   \
    do {                                                                                           \
        const pcclResult_t got_ = (call);                                                          \
        if (got_ != (want)) {                                                                      \
            pthread_mutex_lock(&g_mu);                                                             \
            fprintf(stderr, "abi_pccl10: FAILED %s:%d: %s returned %d, expected %d\n", __FILE__,   \
                    __LINE__, #call, (int)got_, (int)(want));                                      \
            g_failed++;                                                                            \
            pthread_mutex_unlock(&g_mu);                                                           \
        }                                                                                          \
    } while (0)

static const abi_struct_row k_pccl10_structs[] = ABI_STRUCT_ROWS;
static const abi_enum_row k_pccl10_enums[] = ABI_ENUM_ROWS;

static void check_layouts(void)
{
    const size_t ns = sizeof k_pccl10_structs / sizeof k_pccl10_structs[0];
    CHECK(ns == abi_pccl_nstructs);
    for (size_t i = 0; i < ns && i < abi_pccl_nstructs; i++) {
        const abi_struct_row *want = &k_pccl10_structs[i], *got = &abi_pccl_structs[i];
        if (want->size != got->size || want->align != got->align) {
            fprintf(stderr,
                    "abi_pccl10: FAILED %s: size %zu align %zu in pccl.h, PCCL 1.0 %zu/%zu\n",
                    want->name, got->size, got->align, want->size, want->align);
            g_failed++;
        }
        for (size_t f = 0; f < want->nfields; f++) {
            if (want->offset[f] != got->offset[f]) {
                fprintf(stderr, "abi_pccl10: FAILED %s.%s at offset %zu in pccl.h, PCCL 1.0 %zu\n",
                        want->name, want->field[f], got->offset[f], want->offset[f]);
                g_failed++;
            }
        }
    }
    const size_t ne = sizeof k_pccl10_enums / sizeof k_pccl10_enums[0];
    CHECK(ne == abi_pccl_nenums);
    for (size_t i = 0; i < ne && i < abi_pccl_nenums; i++) {
        if (k_pccl10_enums[i].value != abi_pccl_enums[i].value) {
            fprintf(stderr, "abi_pccl10: FAILED %s is %lld in pccl.h, PCCL 1.0 %lld\n",
                    k_pccl10_enums[i].name, abi_pccl_enums[i].value, k_pccl10_enums[i].value);
            g_failed++;
        }
    }
    /* The figures of the x86-64 / aarch64 LP64 ABIs (DESIGN.md §6). */
    CHECK(sizeof(pcclCommCreateParams_t) == 36 && _Alignof(pcclCommCreateParams_t) == 4);
    CHECK(sizeof(pcclReduceDescriptor_t) == 40 && sizeof(pcclReduceOpDescriptor_t) == 56);
    CHECK(sizeof(pcclTensorInfo_t) == 40 && sizeof(pcclSharedState_t) == 24);
    CHECK(sizeof(pcclReduceInfo_t) == 24 && sizeof(pcclAsyncReduceOp_t) == 16);
}

/* ------------------------------------------------------------------------ */
/* Two peers and a master                                                   */
/* ------------------------------------------------------------------------ */

#define N_STATE  1000u
#define N_REDUCE 4099u

static uint16_t g_port;

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* A free loopback TCP port (bound once by the kernel's choice, then closed). */
static uint16_t free_port(void)
{
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return 0;
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    uint16_t port = 0;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0) {
        port = ntohs(a.sin_port);
    }
    close(fd);
    return port;
}

static ccoip_socket_address_t loopback(uint16_t port)
{
    ccoip_socket_address_t a;
    memset(&a, 0, sizeof a);
    a.inet.protocol = inetIPv4;
    a.inet.ipv4.data[0] = 127;
    a.inet.ipv4.data[3] = 1;
    a.port = port;
    return a;
}

static int attr(const pcclComm_t *c, pcclAttribute_t a)
{
    int v = -1;
    CHECK_RESULT(pcclGetAttribute(c, a, &v), pcclSuccess);
    return v;
}

static pcclReduceDescriptor_t desc(size_t count, pcclRedOp_t op, uint64_t tag, pcclDataType_t dt)
{
    pcclReduceDescriptor_t d;
    memset(&d, 0, sizeof d);
    d.count = count;
    d.op = op;
    d.tag = tag;
    d.src_descriptor.datatype = dt;
    d.src_descriptor.distribution_hint = pcclDistributionNone;
    d.quantization_options.quantized_datatype = dt;
    d.quantization_options.algorithm = pcclQuantNone;
    return d;
}

typedef struct peer_arg {
    int rank; /* 0 connects first, 1 joins */
    uint32_t pool;
} peer_arg;

static pthread_mutex_t g_join_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_join_cv = PTHREAD_COND_INITIALIZER;
static bool g_first_alone_checked;

static void release_joiner(void)
{
    pthread_mutex_lock(&g_join_mu);
    g_first_alone_checked = true;
    pthread_cond_broadcast(&g_join_cv);
    pthread_mutex_unlock(&g_join_mu);
}

static void *peer_main(void *p)
{
    const peer_arg *arg = p;
    const int rank = arg->rank;
    if (rank == 1) { /* join once peer 0 has checked the world of one */
        pthread_mutex_lock(&g_join_mu);
        while (!g_first_alone_checked)
            pthread_cond_wait(&g_join_cv, &g_join_mu);
        pthread_mutex_unlock(&g_join_mu);
    }
    pcclCommCreateParams_t params;
    memset(&params, 0xA5, sizeof params); /* no byte beyond PCCL 1.0's fields is read */
    params.master_address = loopback(g_port);
    params.peer_group = 0;
    params.p2p_connection_pool_size = arg->pool; /* 16 and 32: PCCL 1.0 accepts any */
    pcclComm_t *comm = NULL;
    CHECK_RESULT(pcclCreateCommunicator(&params, &comm), pcclSuccess);
    if (comm == NULL) {
        release_joiner();
        return NULL;
    }
    CHECK_RESULT(pcclConnect(comm), pcclSuccess);

    int32_t one[4] = {1, 2, 3, 4};
    if (rank == 0) {
        /* Alone: pcclAllReduceAsync refuses from the call (PCCL 1.0), nothing starts. */
        pcclReduceDescriptor_t d = desc(4, pcclSum, 9, pcclInt32);
        pcclAsyncReduceOp_t h;
        memset(&h, 0, sizeof h);
        CHECK_RESULT(pcclAllReduceAsync(one, one, &d, comm, &h), pcclTooFewPeers);
        CHECK_RESULT(pcclAllReduce(one, one, &d, comm, NULL), pcclTooFewPeers);
        CHECK(one[0] == 1 && one[3] == 4);
        CHECK(attr(comm, PCCL_ATTRIBUTE_GLOBAL_WORLD_SIZE) == 1);
        release_joiner();
        /* Admit peer 1. */
        const uint64_t t0 = now_ms();
        while (attr(comm, PCCL_ATTRIBUTE_GLOBAL_WORLD_SIZE) < 2 && now_ms() - t0 < 20000) {
            bool pending = false;
            CHECK_RESULT(pcclArePeersPending(comm, &pending), pcclSuccess);
            if (pending) {
                CHECK_RESULT(pcclUpdateTopology(comm), pcclSuccess);
            } else {
                const struct timespec ts = {0, 10 * 1000 * 1000};
                nanosleep(&ts, NULL);
            }
        }
    }
    CHECK(attr(comm, PCCL_ATTRIBUTE_GLOBAL_WORLD_SIZE) == 2);
    CHECK(attr(comm, PCCL_ATTRIBUTE_PEER_GROUP_WORLD_SIZE) == 2);
    CHECK(attr(comm, PCCL_ATTRIBUTE_NUM_DISTINCT_PEER_GROUPS) == 1);
    CHECK(attr(comm, PCCL_ATTRIBUTE_LARGEST_PEER_GROUP_WORLD_SIZE) == 2);
    bool pending = true;
    CHECK_RESULT(pcclArePeersPending(comm, &pending), pcclSuccess);
    CHECK(!pending);

    /* Shared state: peer 0 sends only, peer 1 receives only. The strategy is the third
     * argument and the info pointer the fourth (PCCL 1.0's exported signature). */
    int32_t *w = malloc(N_STATE * sizeof *w);
    if (w == NULL) abort();
    for (uint32_t i = 0; i < N_STATE; i++)
        w[i] = rank == 0 ? (int32_t)(i * 7u + 1u) : -1;
    pcclTensorInfo_t info = {"weights", w, N_STATE, pcclInt32, pcclDeviceCpu, false};
    pcclSharedState_t state = {0, 1, &info};
    pcclSharedStateSyncInfo_t si;
    memset(&si, 0xFF, sizeof si);
    CHECK_RESULT(pcclSynchronizeSharedState(comm, &state,
                                            rank == 0
                                                ? PCCL_SHARED_STATE_SYNC_STRATEGY_SEND_ONLY
                                                : PCCL_SHARED_STATE_SYNC_STRATEGY_RECEIVE_ONLY,
                                            &si),
                 pcclSuccess);
    CHECK(state.revision == 0);
    bool same = true;
    for (uint32_t i = 0; i < N_STATE; i++)
        same = same && w[i] == (int32_t)(i * 7u + 1u);
    CHECK(same);
    CHECK(rank == 0 ? (si.tx_bytes == N_STATE * 4u && si.rx_bytes == 0)
                    : (si.rx_bytes == N_STATE * 4u && si.tx_bytes == 0));
    /* The next revision, both ENFORCE_POPULAR, equal content: nothing moves. */
    state.revision = 1;
    CHECK_RESULT(pcclSynchronizeSharedState(comm, &state,
                                            PCCL_SHARED_STATE_SYNC_STRATEGY_ENFORCE_POPULAR, &si),
                 pcclSuccess);
    CHECK(state.revision == 1 && si.rx_bytes == 0 && si.tx_bytes == 0);
    free(w);

    /* All-reduce: exact integer sums (peer r contributes (r + 1) * (i + 1)). */
    int32_t *a = malloc(N_REDUCE * sizeof *a);
    int32_t *b = malloc(N_REDUCE * sizeof *b);
    if (a == NULL || b == NULL) abort();
    for (uint32_t i = 0; i < N_REDUCE; i++)
        a[i] = (int32_t)((uint32_t)(rank + 1) * (i + 1u));
    pcclReduceDescriptor_t d = desc(N_REDUCE, pcclSum, 1, pcclInt32);
    pcclReduceInfo_t ri;
    memset(&ri, 0, sizeof ri);
    CHECK_RESULT(pcclAllReduce(a, b, &d, comm, &ri), pcclSuccess);
    bool exact = true;
    for (uint32_t i = 0; i < N_REDUCE; i++)
        exact = exact && b[i] == (int32_t)(3u * (i + 1u));
    CHECK(exact);
    CHECK(ri.local_world_size == 2 && ri.tx_bytes > 0 && ri.rx_bytes > 0);

    /* Async max over uint16, awaited through PCCL 1.0's handle. */
    uint16_t m[64];
    for (uint16_t i = 0; i < 64; i++)
        m[i] = (uint16_t)(rank == 0 ? i : 63 - i);
    pcclReduceDescriptor_t dm = desc(64, pcclMax, 2, pcclUint16);
    pcclAsyncReduceOp_t h;
    memset(&h, 0, sizeof h);
    CHECK_RESULT(pcclAllReduceAsync(m, m, &dm, comm, &h), pcclSuccess);
    CHECK(h.comm == comm && h.tag == 2);
    memset(&ri, 0, sizeof ri);
    CHECK_RESULT(pcclAwaitAsyncReduce(&h, &ri), pcclSuccess);
    bool maxed = true;
    for (uint16_t i = 0; i < 64; i++)
        maxed = maxed && m[i] == (i > 63 - i ? i : 63 - i);
    CHECK(maxed && ri.local_world_size == 2);

    /* Three ops at once with retry: exact sums per tag. */
    int64_t x[3][100];
    pcclReduceOpDescriptor_t ops[3];
    for (int k = 0; k < 3; k++) {
        for (int i = 0; i < 100; i++)
            x[k][i] = (int64_t)(k * 1000 + i) * (rank + 1);
        ops[k].sendbuf = x[k];
        ops[k].recvbuf = x[k];
        ops[k].descriptor = desc(100, pcclSum, (uint64_t)(10 + k), pcclInt64);
    }
    CHECK_RESULT(pcclAllReduceMultipleWithRetry(ops, 3, comm, &ri, 3), pcclSuccess);
    bool multi = true;
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < 100; i++)
            multi = multi && x[k][i] == (int64_t)(k * 1000 + i) * 3;
    CHECK(multi);

    CHECK_RESULT(pcclOptimizeTopology(comm), pcclSuccess);
    CHECK_RESULT(pcclAllReduce(a, b, &d, comm, NULL), pcclSuccess);
    CHECK(b[0] == 3 && b[N_REDUCE - 1] == (int32_t)(3u * N_REDUCE));
    free(a);
    free(b);
    CHECK_RESULT(pcclDestroyCommunicator(comm), pcclSuccess);
    return NULL;
}

static void on_alarm(int sig)
{
    (void)sig;
    static const char msg[] = "abi_pccl10: FAILED: still running after 50 s\n";
    (void)!write(2, msg, sizeof msg - 1);
    _exit(1);
}

int main(void)
{
    setvbuf(stderr, NULL, _IOLBF, 0);
    signal(SIGALRM, on_alarm);
    alarm(50);
    check_layouts();

    pcclBuildInfo_t bi;
    memset(&bi, 0xFF, sizeof bi);
    CHECK_RESULT(pcclGetBuildInfo(&bi), pcclSuccess);
    CHECK(bi.has_cuda_support == false);
    pcclComm_t *early = NULL;
    pcclCommCreateParams_t early_params;
    memset(&early_params, 0, sizeof early_params);
    early_params.master_address = loopback(CCOIP_PROTOCOL_PORT_MASTER);
    CHECK_RESULT(pcclCreateCommunicator(&early_params, &early), pcclNotInitialized);
    CHECK_RESULT(pcclInit(), pcclSuccess);

    pcclMasterInstance_t *master = NULL;
    for (int attempt = 0; attempt < 20 && master == NULL; attempt++) {
        g_port = free_port();
        if (g_port == 0) continue;
        if (pcclCreateMaster(loopback(g_port), &master) != pcclSuccess) master = NULL;
    }
    CHECK(master != NULL);
    if (master == NULL) return 1;
    CHECK_RESULT(pcclRunMaster(master), pcclSuccess);

    peer_arg args[2] = {{0, 16}, {1, 32}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&th[i], NULL, peer_main, &args[i]);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);

    CHECK_RESULT(pcclInterruptMaster(master), pcclSuccess);
    CHECK_RESULT(pcclMasterAwaitTermination(master), pcclSuccess);
    CHECK_RESULT(pcclDestroyMaster(master), pcclSuccess);
    if (g_failed != 0) {
        fprintf(stderr, "abi_pccl10: %d check(s) failed\n", g_failed);
        return 1;
    }
    printf("abi_pccl10: PCCL 1.0 layouts and every PCCL 1.0 function: ok\n");
    return 0;
}
