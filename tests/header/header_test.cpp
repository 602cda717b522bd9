// Compiles pccl.h as C++ and, under C++20, the designated initializers of
// the reference hello world (../shared/reference/pccl-examples.md) verbatim:
// they require PCCL's field order.
#include <pccl.h>

#include <cstdio>

#if PCCL_TEST_CXX_STD >= 20
static constexpr uint8_t MASTER_IP[4] = {127, 0, 0, 1};
static constexpr uint16_t MASTER_PORT = 48148;

static int hello_world_initializers()
{
    // clang-format off
    pcclCommCreateParams_t params {
        .master_address = {
            .inet = {
                .protocol = inetIPv4,
                .ipv4 = { MASTER_IP[0], MASTER_IP[1], MASTER_IP[2], MASTER_IP[3] }
            },
            .port = MASTER_PORT
        },
        .peer_group = 0
    };
    static float dummyWeights[8] = { 0.f };
    pcclTensorInfo_t tinfo{
        .name                     = "myWeights",
        .data                     = dummyWeights,
        .count                    = 8,
        .datatype                 = pcclFloat,
        .device_type              = pcclDeviceCpu,
        .allow_content_inequality = false
    };
    pcclSharedState_t sstate{
        .revision = 0,
        .count    = 1,
        .infos    = &tinfo
    };
    pcclReduceDescriptor_t desc{
        .count = 4,
        .op    = pcclSum,
        .tag   = 0,
        .src_descriptor = {
            .datatype          = pcclFloat,
            .distribution_hint = PCCL_DISTRIBUTION_HINT_NONE
        },
        .quantization_options = {
            .quantized_datatype = pcclFloat,
            .algorithm          = pcclQuantNone
        }
    };
    pcclReduceInfo_t reduce_info{};
    pcclSharedStateSyncInfo_t ssi{};
    // clang-format on
    int bad = 0;
    bad += params.master_address.inet.ipv4.data[3] != 1;
    bad += params.master_address.port != 48148;
    bad += sstate.infos->count != 8;
    bad += desc.count != 4 || desc.quantization_options.algorithm != pcclQuantNone;
    bad += reduce_info.tx_bytes != 0 || ssi.rx_bytes != 0;
    return bad;
}
#else
static int hello_world_initializers()
{
    return 0;
}
#endif

int main()
{
    int bad = hello_world_initializers();
    pcclResult_t r = pcclOptimizeTopologyFailed;
    bad += r != pcclTopologyOptimizationFailed;
    bad += PCCL_ATTRIBUTE_CURRENT_WORLD_SIZE != 2;
    const pcclCollectiveOptions_t co = PCCL_COLLECTIVE_OPTIONS_INIT;
    bad += co.struct_size != sizeof co || co.quantization_options.algorithm != pcclQuantNone;
    if (bad == 0) std::printf("header test (C++%d): 1 passed, 0 failed\n", PCCL_TEST_CXX_STD);
    return bad == 0 ? 0 : 1;
}
