/*
 * abi_rows.h — one row per struct of PCCL 1.0's public ABI: its size, its
 * alignment and the offsets of its fields, and one row per enum constant.
 * abi_layout.c fills the rows from pccl.h; abi_pccl10.c fills them from its
 * own declarations of PCCL 1.0's types and compares the two.
 */
#ifndef ABI_ROWS_H
#define ABI_ROWS_H

#include <stddef.h>

#define ABI_FIELDS_MAX 8

typedef struct abi_struct_row {
    const char *name;
    size_t size;
    size_t align;
    size_t nfields;
    const char *field[ABI_FIELDS_MAX];
    size_t offset[ABI_FIELDS_MAX];
} abi_struct_row;

typedef struct abi_enum_row {
    const char *name;
    long long value;
} abi_enum_row;

/* The rows of pccl.h (abi_layout.c). */
extern const abi_struct_row abi_pccl_structs[];
extern const size_t abi_pccl_nstructs;
extern const abi_enum_row abi_pccl_enums[];
extern const size_t abi_pccl_nenums;

/* The rows every TU of this test builds from the types it has in scope. */
/* clang-format off */
#define ABI_ROW(T, n, ...) {#T, sizeof(T), _Alignof(T), n, __VA_ARGS__}
#define ABI_STRUCT_ROWS { \
    ABI_ROW(ccoip_ipv4_address_t, 1, {"data"}, \
            {offsetof(ccoip_ipv4_address_t, data)}), \
    ABI_ROW(ccoip_ipv6_address_t, 1, {"data"}, \
            {offsetof(ccoip_ipv6_address_t, data)}), \
    ABI_ROW(ccoip_inet_address_t, 3, {"protocol", "ipv4", "ipv6"}, \
            {offsetof(ccoip_inet_address_t, protocol), offsetof(ccoip_inet_address_t, ipv4), offsetof(ccoip_inet_address_t, ipv6)}), \
    ABI_ROW(ccoip_socket_address_t, 2, {"inet", "port"}, \
            {offsetof(ccoip_socket_address_t, inet), offsetof(ccoip_socket_address_t, port)}), \
    ABI_ROW(pcclCommCreateParams_t, 3, {"master_address", "peer_group", "p2p_connection_pool_size"}, \
            {offsetof(pcclCommCreateParams_t, master_address), offsetof(pcclCommCreateParams_t, peer_group), offsetof(pcclCommCreateParams_t, p2p_connection_pool_size)}), \
    ABI_ROW(pcclReduceInfo_t, 3, {"local_world_size", "tx_bytes", "rx_bytes"}, \
            {offsetof(pcclReduceInfo_t, local_world_size), offsetof(pcclReduceInfo_t, tx_bytes), offsetof(pcclReduceInfo_t, rx_bytes)}), \
    ABI_ROW(pcclReduceOperandDescriptor_t, 2, {"datatype", "distribution_hint"}, \
            {offsetof(pcclReduceOperandDescriptor_t, datatype), offsetof(pcclReduceOperandDescriptor_t, distribution_hint)}), \
    ABI_ROW(pcclQuantizationOptions_t, 2, {"quantized_datatype", "algorithm"}, \
            {offsetof(pcclQuantizationOptions_t, quantized_datatype), offsetof(pcclQuantizationOptions_t, algorithm)}), \
    ABI_ROW(pcclReduceDescriptor_t, 5, {"count", "op", "tag", "src_descriptor", "quantization_options"}, \
            {offsetof(pcclReduceDescriptor_t, count), offsetof(pcclReduceDescriptor_t, op), offsetof(pcclReduceDescriptor_t, tag), offsetof(pcclReduceDescriptor_t, src_descriptor), offsetof(pcclReduceDescriptor_t, quantization_options)}), \
    ABI_ROW(pcclReduceOpDescriptor_t, 3, {"sendbuf", "recvbuf", "descriptor"}, \
            {offsetof(pcclReduceOpDescriptor_t, sendbuf), offsetof(pcclReduceOpDescriptor_t, recvbuf), offsetof(pcclReduceOpDescriptor_t, descriptor)}), \
    ABI_ROW(pcclAsyncReduceOp_t, 2, {"comm", "tag"}, \
            {offsetof(pcclAsyncReduceOp_t, comm), offsetof(pcclAsyncReduceOp_t, tag)}), \
    ABI_ROW(pcclRankUuid_t, 1, {"data"}, \
            {offsetof(pcclRankUuid_t, data)}), \
    ABI_ROW(pcclTensorInfo_t, 6, {"name", "data", "count", "datatype", "device_type", "allow_content_inequality"}, \
            {offsetof(pcclTensorInfo_t, name), offsetof(pcclTensorInfo_t, data), offsetof(pcclTensorInfo_t, count), offsetof(pcclTensorInfo_t, datatype), offsetof(pcclTensorInfo_t, device_type), offsetof(pcclTensorInfo_t, allow_content_inequality)}), \
    ABI_ROW(pcclSharedState_t, 3, {"revision", "count", "infos"}, \
            {offsetof(pcclSharedState_t, revision), offsetof(pcclSharedState_t, count), offsetof(pcclSharedState_t, infos)}), \
    ABI_ROW(pcclSharedStateSyncInfo_t, 2, {"tx_bytes", "rx_bytes"}, \
            {offsetof(pcclSharedStateSyncInfo_t, tx_bytes), offsetof(pcclSharedStateSyncInfo_t, rx_bytes)}), \
    ABI_ROW(pcclBuildInfo_t, 1, {"has_cuda_support"}, \
            {offsetof(pcclBuildInfo_t, has_cuda_support)}), \
}
#define ABI_ENUM(x) {#x, (long long)(x)}
#define ABI_ENUM_ROWS { \
    ABI_ENUM(pcclSuccess), ABI_ENUM(pcclNotInitialized), ABI_ENUM(pcclInternalError), \
    ABI_ENUM(pcclInvalidArgument), ABI_ENUM(pcclInvalidUsage), ABI_ENUM(pcclTooFewPeers), \
    ABI_ENUM(pcclMasterConnectionFailed), ABI_ENUM(pcclRankConnectionFailed), ABI_ENUM(pcclRankConnectionLost), \
    ABI_ENUM(pcclNoSharedStateAvailable), ABI_ENUM(pcclPendingAsyncOps), ABI_ENUM(pcclUpdateTopologyFailed), \
    ABI_ENUM(pcclTopologyOptimizationFailed), ABI_ENUM(pcclUint8), ABI_ENUM(pcclInt8), \
    ABI_ENUM(pcclInt16), ABI_ENUM(pcclUint16), ABI_ENUM(pcclUint32), \
    ABI_ENUM(pcclInt32), ABI_ENUM(pcclUint64), ABI_ENUM(pcclInt64), \
    ABI_ENUM(pcclFloat16), ABI_ENUM(pcclBFloat16), ABI_ENUM(pcclFloat), \
    ABI_ENUM(pcclDouble), ABI_ENUM(pcclDeviceCpu), ABI_ENUM(pcclDeviceCuda), \
    ABI_ENUM(pcclSum), ABI_ENUM(pcclAvg), ABI_ENUM(pcclProd), \
    ABI_ENUM(pcclMax), ABI_ENUM(pcclMin), ABI_ENUM(PCCL_ATTRIBUTE_GLOBAL_WORLD_SIZE), \
    ABI_ENUM(PCCL_ATTRIBUTE_PEER_GROUP_WORLD_SIZE), ABI_ENUM(PCCL_ATTRIBUTE_NUM_DISTINCT_PEER_GROUPS), ABI_ENUM(PCCL_ATTRIBUTE_LARGEST_PEER_GROUP_WORLD_SIZE), \
    ABI_ENUM(PCCL_SHARED_STATE_SYNC_STRATEGY_ENFORCE_POPULAR), ABI_ENUM(PCCL_SHARED_STATE_SYNC_STRATEGY_RECEIVE_ONLY), ABI_ENUM(PCCL_SHARED_STATE_SYNC_STRATEGY_SEND_ONLY), \
    ABI_ENUM(pcclDistributionNone), ABI_ENUM(pcclDistributionNormal), ABI_ENUM(pcclDistributionUniform), \
    ABI_ENUM(pcclQuantNone), ABI_ENUM(pcclQuantMinMax), ABI_ENUM(pcclQuantZeroPointScale), \
    ABI_ENUM(inetIPv4), ABI_ENUM(inetIPv6), ABI_ENUM(CCOIP_PROTOCOL_PORT_MASTER), \
    ABI_ENUM(CCOIP_PROTOCOL_PORT_SHARED_STATE), ABI_ENUM(CCOIP_PROTOCOL_PORT_P2P), ABI_ENUM(CCOIP_PROTOCOL_PORT_BANDWIDTH_BENCHMARK), \
}
/* clang-format on */

#endif /* ABI_ROWS_H */
