/*
 * golden_samples.h — golden samples built field by field in C.
 *
 * Each builder fills a struct with the values of schema/golden/samples/<id>.txtpb
 * and encodes it with our codec. The unit test test_schema_golden compares the
 * bytes with protoc's (schema/gen/golden_vectors.h); the native ctest
 * schema_protoc_crosscheck compares them with protoc --encode run at test
 * time. Together the builders use every field kind the generator supports:
 * varint, fixed64, bool, enum, string, bytes, sub-message, packed repeated
 * scalar, repeated message, repeated string and oneof.
 *
 * Header-only (static functions) so that tests include it without a library.
 */
#ifndef CCOIP_GOLDEN_SAMPLES_H
#define CCOIP_GOLDEN_SAMPLES_H

#include <stdint.h>
#include <string.h>

#include "ccoip_pb.h"

typedef pcclResult_t (*golden_sample_fn)(uint8_t *buf, uint64_t cap, uint64_t *len_out);

typedef struct golden_sample {
    const char *id; /* the txtpb sample (or Envelope.body vector) it must equal */
    golden_sample_fn build;
} golden_sample;

static const uint8_t gs_ip_10_0_0_2[4] = {10, 0, 0, 2};
static const uint8_t gs_ip_lo4[4] = {127, 0, 0, 1};
static const uint8_t gs_ip_lo6[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};

static ccoip_pb_bytes gs_bytes(const uint8_t *data, uint64_t len)
{
    ccoip_pb_bytes b;
    b.data = data;
    b.len = len;
    return b;
}

static pcclResult_t gs_endpoint(uint8_t *buf, uint64_t cap, uint64_t *len_out)
{
    ccoip_pb_endpoint m;
    memset(&m, 0, sizeof(m));
    m.kind = CCOIP_PB_ENDPOINT_KIND_SHARED_STATE;
    m.ip = gs_bytes(gs_ip_10_0_0_2, 4);
    m.port = 48149;
    m.url = ccoip_pb_str("tcp://10.0.0.2:48149");
    return ccoip_pb_endpoint_encode(&m, buf, cap, len_out);
}

static pcclResult_t gs_peer_info(uint8_t *buf, uint64_t cap, uint64_t *len_out)
{
    ccoip_pb_peer_info m;
    ccoip_pb_endpoint eps[2];
    memset(&m, 0, sizeof(m));
    memset(eps, 0, sizeof(eps));
    eps[0].kind = CCOIP_PB_ENDPOINT_KIND_P2P;
    eps[0].ip = gs_bytes(gs_ip_lo4, 4);
    eps[0].port = 48150;
    eps[1].kind = CCOIP_PB_ENDPOINT_KIND_BANDWIDTH;
    eps[1].ip = gs_bytes(gs_ip_lo4, 4);
    eps[1].port = 48151;
    eps[1].url = ccoip_pb_str("ipc:///tmp/bw");
    m.peer_id = 300;
    m.peer_group = 1;
    m.endpoints = eps;
    m.endpoints_count = 2;
    return ccoip_pb_peer_info_encode(&m, buf, cap, len_out);
}

static pcclResult_t gs_hello(uint8_t *buf, uint64_t cap, uint64_t *len_out)
{
    ccoip_pb_hello m;
    memset(&m, 0, sizeof(m));
    m.min_version = 1;
    m.max_version = 3;
    m.software = ccoip_pb_str("pccl/0.1.0 \xc3\xbc"
                              "n\xc3\xaf"
                              "code \xe2\x9c\x93");
    m.nonce = gs_bytes(gs_ip_lo4, 4);
    return ccoip_pb_hello_encode(&m, buf, cap, len_out);
}

static pcclResult_t gs_hello_result(uint8_t *buf, uint64_t cap, uint64_t *len_out)
{
    ccoip_pb_hello_result m;
    memset(&m, 0, sizeof(m));
    m.version = 1;
    m.peer_id = UINT64_MAX;
    m.heartbeat_ms = 250;
    m.evict_ms = 2000;
    m.min_version = 1;
    m.max_version = 1;
    m.relay_max_bytes = 16384;
    m.nonce = gs_bytes(gs_ip_lo4, 4);
    m.proof = gs_bytes(gs_ip_lo6, 16);
    return ccoip_pb_hello_result_encode(&m, buf, cap, len_out);
}

static pcclResult_t gs_topology_plan(uint8_t *buf, uint64_t cap, uint64_t *len_out)
{
    static const uint64_t ring[4] = {2, 5, 9, 1000000};
    ccoip_pb_topology_plan m;
    ccoip_pb_peer_info nb[2];
    ccoip_pb_endpoint eps[2];
    memset(&m, 0, sizeof(m));
    memset(nb, 0, sizeof(nb));
    memset(eps, 0, sizeof(eps));
    eps[0].kind = CCOIP_PB_ENDPOINT_KIND_P2P;
    eps[0].ip = gs_bytes(gs_ip_lo4, 4);
    eps[0].port = 40000;
    eps[1].kind = CCOIP_PB_ENDPOINT_KIND_P2P;
    eps[1].ip = gs_bytes(gs_ip_lo6, 16);
    eps[1].port = 40001;
    nb[0].peer_id = 2;
    nb[0].endpoints = &eps[0];
    nb[0].endpoints_count = 1;
    nb[1].peer_id = 9;
    nb[1].endpoints = &eps[1];
    nb[1].endpoints_count = 1;
    m.epoch = 13;
    m.unchanged = true;
    m.neighbours = nb;
    m.neighbours_count = 2;
    m.ring = ring;
    m.ring_count = 4;
    m.has_world = true;
    m.world.global = 3;
    m.world.peer_group = 3;
    m.world.num_peer_groups = 1;
    m.world.largest_peer_group = 3;
    m.pred_key = gs_bytes(gs_ip_lo4, 4);
    m.succ_key = gs_bytes(gs_ip_lo6, 16);
    m.group_key = gs_bytes(gs_ip_lo4, 4);
    m.dial = 6;
    m.relay_port = 48149;
    return ccoip_pb_topology_plan_encode(&m, buf, cap, len_out);
}

static pcclResult_t gs_bandwidth_report(uint8_t *buf, uint64_t cap, uint64_t *len_out)
{
    ccoip_pb_bandwidth_report m;
    ccoip_pb_bandwidth_sample s[2];
    memset(&m, 0, sizeof(m));
    memset(s, 0, sizeof(s));
    s[0].to_peer = 4;
    s[0].bytes = 1073741824u;
    s[0].duration_us = 2500000u;
    s[1].to_peer = 6;
    s[1].unreachable = true;
    m.samples = s;
    m.samples_count = 2;
    return ccoip_pb_bandwidth_report_encode(&m, buf, cap, len_out);
}

static pcclResult_t gs_sync_vote(uint8_t *buf, uint64_t cap, uint64_t *len_out)
{
    ccoip_pb_shared_state_sync_vote m;
    ccoip_pb_shared_state_key k[3];
    memset(&m, 0, sizeof(m));
    memset(k, 0, sizeof(k));
    k[0].name = ccoip_pb_str("w");
    k[0].hash = 1;
    k[0].dtype = CCOIP_PB_DATA_TYPE_FLOAT;
    k[0].count = 1000;
    k[1].name = ccoip_pb_str("optimizer.step");
    k[1].dtype = CCOIP_PB_DATA_TYPE_INT64;
    k[1].count = 1;
    k[1].allow_content_inequality = true;
    k[2].name = ccoip_pb_str("b");
    k[2].hash = UINT64_MAX;
    k[2].dtype = CCOIP_PB_DATA_TYPE_DOUBLE;
    k[2].count = 3;
    m.revision = 41;
    m.strategy = CCOIP_PB_SYNC_STRATEGY_SEND_ONLY;
    m.keys = k;
    m.keys_count = 3;
    return ccoip_pb_shared_state_sync_vote_encode(&m, buf, cap, len_out);
}

static pcclResult_t gs_sync_verdict(uint8_t *buf, uint64_t cap, uint64_t *len_out)
{
    static const uint8_t ip[4] = {192, 168, 1, 3};
    ccoip_pb_shared_state_sync_verdict m;
    ccoip_pb_outdated_key k[2];
    memset(&m, 0, sizeof(m));
    memset(k, 0, sizeof(k));
    k[0].name = ccoip_pb_str("w");
    k[0].expected_hash = 81985529216486895u;
    k[1].name = ccoip_pb_str("b");
    k[1].expected_hash = 2;
    m.popular_revision = 42;
    m.outdated = true;
    m.outdated_keys = k;
    m.outdated_keys_count = 2;
    m.distributor_peer = 3;
    m.has_distributor = true;
    m.distributor.kind = CCOIP_PB_ENDPOINT_KIND_SHARED_STATE;
    m.distributor.ip = gs_bytes(ip, 4);
    m.distributor.port = 48149;
    static const uint8_t rip[4] = {192, 168, 1, 5};
    ccoip_pb_endpoint rep;
    ccoip_pb_peer_info rcv;
    memset(&rep, 0, sizeof(rep));
    memset(&rcv, 0, sizeof(rcv));
    rep.kind = CCOIP_PB_ENDPOINT_KIND_SHARED_STATE;
    rep.ip = gs_bytes(rip, 4);
    rep.port = 40002;
    rcv.peer_id = 5;
    rcv.peer_group = 1;
    rcv.endpoints = &rep;
    rcv.endpoints_count = 1;
    m.distributor_dials = true;
    m.dial_receivers = &rcv;
    m.dial_receivers_count = 1;
    return ccoip_pb_shared_state_sync_verdict_encode(&m, buf, cap, len_out);
}

static pcclResult_t gs_collective_initiate(uint8_t *buf, uint64_t cap, uint64_t *len_out)
{
    ccoip_pb_collective_initiate m;
    memset(&m, 0, sizeof(m));
    m.tag = 17;
    m.count = 1048576;
    m.dtype = CCOIP_PB_DATA_TYPE_FLOAT;
    m.op = CCOIP_PB_RED_OP_AVG;
    m.quant_algorithm = CCOIP_PB_QUANT_ALGORITHM_MIN_MAX;
    m.quant_dtype = CCOIP_PB_DATA_TYPE_UINT8;
    m.optimistic_epoch = 12;
    m.relay = true;
    static const uint8_t relay_data[] = {1, 2, 3, 4};
    m.relay_data.data = relay_data;
    m.relay_data.len = sizeof relay_data;
    m.kind = CCOIP_PB_COLLECTIVE_KIND_ALL_TO_ALL;
    m.root = 3;
    m.pinned_epoch = 41;
    static const uint8_t relay_input[] = {5, 6};
    m.relay_input.data = relay_input;
    m.relay_input.len = sizeof relay_input;
    return ccoip_pb_collective_initiate_encode(&m, buf, cap, len_out);
}

static pcclResult_t gs_collective_verdict(uint8_t *buf, uint64_t cap, uint64_t *len_out)
{
    ccoip_pb_collective_verdict m;
    memset(&m, 0, sizeof(m));
    m.tag = 17;
    m.seq = 99;
    m.aborted = true;
    m.reason = CCOIP_PB_REASON_PEER_LOST;
    static const uint8_t relay_result[] = {5, 6, 7, 8};
    m.relay_result.data = relay_result;
    m.relay_result.len = sizeof relay_result;
    return ccoip_pb_collective_verdict_encode(&m, buf, cap, len_out);
}

static pcclResult_t gs_pending_peers_query(uint8_t *buf, uint64_t cap, uint64_t *len_out)
{
    ccoip_pb_pending_peers_query m;
    memset(&m, 0, sizeof(m));
    return ccoip_pb_pending_peers_query_encode(&m, buf, cap, len_out);
}

static pcclResult_t gs_shared_state_request(uint8_t *buf, uint64_t cap, uint64_t *len_out)
{
    ccoip_pb_shared_state_request m;
    ccoip_pb_bytes keys[2];
    memset(&m, 0, sizeof(m));
    keys[0] = ccoip_pb_str("w");
    keys[1] = ccoip_pb_str("b");
    m.revision = 42;
    m.keys = keys;
    m.keys_count = 2;
    return ccoip_pb_shared_state_request_encode(&m, buf, cap, len_out);
}

static pcclResult_t gs_peer_to_master(uint8_t *buf, uint64_t cap, uint64_t *len_out)
{
    ccoip_pb_peer_to_master m;
    ccoip_pb_shared_state_key k;
    memset(&m, 0, sizeof(m));
    memset(&k, 0, sizeof(k));
    k.name = ccoip_pb_str("w");
    k.hash = 1;
    k.dtype = CCOIP_PB_DATA_TYPE_FLOAT;
    k.count = 1000;
    m.call_id = 7;
    m.deadline_ms = 60000;
    m.body_case = CCOIP_PB_PEER_TO_MASTER_BODY_SYNC_VOTE;
    m.body.sync_vote.revision = 41;
    m.body.sync_vote.strategy = CCOIP_PB_SYNC_STRATEGY_ENFORCE_POPULAR;
    m.body.sync_vote.keys = &k;
    m.body.sync_vote.keys_count = 1;
    return ccoip_pb_peer_to_master_encode(&m, buf, cap, len_out);
}

static pcclResult_t gs_master_to_peer(uint8_t *buf, uint64_t cap, uint64_t *len_out)
{
    static const uint64_t ring[2] = {1, 2};
    ccoip_pb_master_to_peer m;
    memset(&m, 0, sizeof(m));
    m.call_id = 7;
    m.deadline_ms = 30000;
    m.status = CCOIP_PB_STATUS_INVALID_USAGE;
    m.reason = CCOIP_PB_REASON_KEY_SET_MISMATCH;
    m.detail = ccoip_pb_str("key 'w' has count 999, popular 1000");
    m.body_case = CCOIP_PB_MASTER_TO_PEER_BODY_TOPOLOGY_PLAN;
    m.body.topology_plan.epoch = 2;
    m.body.topology_plan.ring = ring;
    m.body.topology_plan.ring_count = 2;
    return ccoip_pb_master_to_peer_encode(&m, buf, cap, len_out);
}

/* The envelope vector "MasterToPeer.heartbeat": a notification. */
static pcclResult_t gs_m2p_heartbeat(uint8_t *buf, uint64_t cap, uint64_t *len_out)
{
    ccoip_pb_master_to_peer m;
    memset(&m, 0, sizeof(m));
    m.call_id = 12;
    m.deadline_ms = 12000;
    m.body_case = CCOIP_PB_MASTER_TO_PEER_BODY_HEARTBEAT;
    m.body.heartbeat.counter = 123456789;
    return ccoip_pb_master_to_peer_encode(&m, buf, cap, len_out);
}

static const golden_sample golden_samples[] = {
    {"Endpoint", gs_endpoint},
    {"PeerInfo", gs_peer_info},
    {"Hello", gs_hello},
    {"HelloResult", gs_hello_result},
    {"TopologyPlan", gs_topology_plan},
    {"BandwidthReport", gs_bandwidth_report},
    {"SharedStateSyncVote", gs_sync_vote},
    {"SharedStateSyncVerdict", gs_sync_verdict},
    {"CollectiveInitiate", gs_collective_initiate},
    {"CollectiveVerdict", gs_collective_verdict},
    {"PendingPeersQuery", gs_pending_peers_query},
    {"SharedStateRequest", gs_shared_state_request},
    {"PeerToMaster", gs_peer_to_master},
    {"MasterToPeer", gs_master_to_peer},
    {"MasterToPeer.heartbeat", gs_m2p_heartbeat},
};

#define GOLDEN_SAMPLE_COUNT (sizeof(golden_samples) / sizeof(golden_samples[0]))

#endif /* CCOIP_GOLDEN_SAMPLES_H */
