/*
 * Compiles pccl.h (with ccoip.h and ccoip_inet.h) as C99 or C11 under
 * -Wall -Wextra -Wpedantic, uses every macro and checks the values PCCL 1.0
 * programs rely on. Exit status 0 = pass.
 */
#include <pccl.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

static int failures;

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "header check failed: %s (line %d)\n", #cond, __LINE__);               \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

#define ROW(name, value, msg) {(int)(name), (value), #name, msg},
struct row {
    int enum_value;
    int table_value;
    const char *name;
    const char *msg;
};
static const struct row rows[] = {PCCL_RESULT_MAP(ROW)};

PCCL_EXPORT int header_test_exported(PCCL_NULLABLE const int *p);
PCCL_EXPORT int header_test_exported(PCCL_NULLABLE const int *p)
{
    return p ? *p : 0;
}

int main(void)
{
    size_t nrows = sizeof rows / sizeof rows[0];
    CHECK(nrows == PCCL_RESULT_COUNT);
    for (size_t i = 0; i < nrows; i++) {
        CHECK(rows[i].enum_value == rows[i].table_value);
        CHECK(rows[i].table_value == (int)i); /* dense, append-only */
        CHECK(strlen(rows[i].msg) > 0);
    }
    /* PCCL 1.0 numbering. */
    CHECK(pcclSuccess == 0 && pcclNotInitialized == 1 && pcclInternalError == 2);
    CHECK(pcclInvalidArgument == 3 && pcclInvalidUsage == 4 && pcclTooFewPeers == 5);
    CHECK(pcclMasterConnectionFailed == 6 && pcclRankConnectionFailed == 7);
    CHECK(pcclRankConnectionLost == 8 && pcclNoSharedStateAvailable == 9);
    CHECK(pcclPendingAsyncOps == 10 && pcclUpdateTopologyFailed == 11);
    CHECK(pcclTopologyOptimizationFailed == 12);
    CHECK(pcclOptimizeTopologyFailed == pcclTopologyOptimizationFailed);
    CHECK(pcclUint8 == 0 && pcclInt8 == 1 && pcclInt16 == 2 && pcclUint16 == 3);
    CHECK(pcclUint32 == 4 && pcclInt32 == 5 && pcclUint64 == 6 && pcclInt64 == 7);
    CHECK(pcclFloat16 == 8 && pcclBFloat16 == 9 && pcclFloat == 10 && pcclDouble == 11);
    CHECK(PCCL_DATA_TYPE_COUNT == 12 && PCCL_RED_OP_COUNT == 9);
    CHECK(pcclSum == 0 && pcclAvg == 1 && pcclProd == 2 && pcclMax == 3 && pcclMin == 4);
    CHECK(pcclBand == 5 && pcclBor == 6 && pcclBxor == 7 && pcclPremulSum == 8);
    CHECK(pcclDeviceCpu == 0 && pcclDeviceCuda == 1);
    CHECK(PCCL_ATTRIBUTE_GLOBAL_WORLD_SIZE == 1 && PCCL_ATTRIBUTE_PEER_GROUP_WORLD_SIZE == 2);
    CHECK(PCCL_ATTRIBUTE_NUM_DISTINCT_PEER_GROUPS == 3);
    CHECK(PCCL_ATTRIBUTE_LARGEST_PEER_GROUP_WORLD_SIZE == 4);
    CHECK(PCCL_ATTRIBUTE_CURRENT_WORLD_SIZE == PCCL_ATTRIBUTE_PEER_GROUP_WORLD_SIZE);
    CHECK(PCCL_ATTRIBUTE_COPIED_BYTES == 5 && PCCL_ATTRIBUTE_COPIED_BYTES_HIGH == 6);
    CHECK(PCCL_ATTRIBUTE_RANK == 7 && PCCL_ATTRIBUTE_EPOCH == 8);
    CHECK(PCCL_SHARED_STATE_SYNC_STRATEGY_ENFORCE_POPULAR == 0);
    CHECK(PCCL_SHARED_STATE_SYNC_STRATEGY_RECEIVE_ONLY == 1);
    CHECK(PCCL_SHARED_STATE_SYNC_STRATEGY_SEND_ONLY == 2);
    CHECK(PCCL_DISTRIBUTION_HINT_NONE == pcclDistributionNone && pcclDistributionNone == 0);
    CHECK(PCCL_DISTRIBUTION_HINT_NORMAL == pcclDistributionNormal && pcclDistributionNormal == 1);
    CHECK(PCCL_DISTRIBUTION_HINT_UNIFORM == pcclDistributionUniform);
    CHECK(PCCL_NORMAL_DISTRIBUTION_HINT == 1 && PCCL_UNIFORM_DISTRIBUTION_HINT == 2);
    CHECK(pcclQuantNone == 0 && pcclQuantMinMax == 1 && pcclQuantZeroPointScale == 2);
    CHECK(inetIPv4 == 0 && inetIPv6 == 1);
    CHECK(CCOIP_PROTOCOL_PORT_MASTER == 48148 && CCOIP_PROTOCOL_PORT_SHARED_STATE == 48149);
    CHECK(CCOIP_PROTOCOL_PORT_P2P == 48150 && CCOIP_PROTOCOL_PORT_BANDWIDTH_BENCHMARK == 48151);
    CHECK(PCCL_VERSION_HEX ==
          ((PCCL_VERSION_MAJOR << 16) | (PCCL_VERSION_MINOR << 8) | PCCL_VERSION_PATCH));
    CHECK(header_test_exported(NULL) == 0);

    /* Field order of the reference structs (C99 designated initializers). */
    {
        pcclCommCreateParams_t params = {
            .master_address = {.inet = {.protocol = inetIPv4, .ipv4 = {{127, 0, 0, 1}}},
                               .port = CCOIP_PROTOCOL_PORT_MASTER},
            .peer_group = 0,
        };
        CHECK(params.master_address.inet.ipv4.data[0] == 127);
        CHECK(params.p2p_connection_pool_size == 0 && sizeof params == 36);
        pcclCommCreateOptions_t opts = PCCL_COMM_CREATE_OPTIONS_INIT;
        CHECK(opts.struct_size == sizeof opts && opts.master_url == NULL && opts.timeout_ms == 0);
        /* The collective options: quantization appended after the first version's 32 bytes. */
        pcclCollectiveOptions_t co = PCCL_COLLECTIVE_OPTIONS_INIT;
        CHECK(co.struct_size == sizeof co && sizeof co == 48 && co.premul_scalar == 1.0);
        CHECK(offsetof(pcclCollectiveOptions_t, quantization_options) == 32);
        /* ... and the algorithm after the second version's 40. */
        CHECK(offsetof(pcclCollectiveOptions_t, algorithm) == 40 && co.algorithm == pcclAlgoAuto);
        pcclTuneOptions_t to = PCCL_TUNE_OPTIONS_INIT;
        CHECK(to.struct_size == sizeof to && sizeof to == 32 && to.iterations == 0);
        CHECK(offsetof(pcclTuneOptions_t, kinds) == 12 && to.kinds == 0);
        CHECK(co.quantization_options.algorithm == pcclQuantNone && co.tag == 0 && co.flags == 0);
    }
    {
        float w[8] = {0};
        pcclTensorInfo_t t = {"myWeights", w, 8, pcclFloat, pcclDeviceCpu, false};
        pcclSharedState_t s = {0, 1, &t};
        pcclReduceDescriptor_t d = {
            4, pcclSum, 7, {pcclFloat, pcclDistributionNone}, {pcclFloat, pcclQuantNone}};
        pcclReduceOpDescriptor_t od = {w, w, d};
        pcclReduceInfo_t ri = {2, 16, 16};
        pcclSharedStateSyncInfo_t si = {1, 2};
        pcclAsyncReduceOp_t ar = {NULL, 7};
        pcclRankUuid_t u = {{0}};
        pcclBuildInfo_t bi = {false};
        CHECK(s.infos->count == 8 && d.tag == 7 && od.descriptor.count == 4);
        CHECK(ri.local_world_size == 2 && si.rx_bytes == 2 && ar.tag == 7 && u.data[15] == 0);
        CHECK(!bi.has_cuda_support);
    }
    if (failures == 0) printf("header test (C%ld): 1 passed, 0 failed\n", (long)__STDC_VERSION__);
    return failures == 0 ? 0 : 1;
}
