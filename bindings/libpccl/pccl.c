/*
 * pccl.c — the public C ABI (include/pccl.h) over the runtime (transport/pt.h).
 *
 * Every communicator call validates its arguments, posts one command to the
 * communicator's driver thread and waits for the NOTIFY that completes it,
 * bounded by the options' timeout_ms when set (DESIGN.md §5, §6).
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ccoip_dtype.h"
#include "ccoip_quant.h"
#include "ccoip_reduce.h"
#include "ccoip_ring.h"
#include "pccl.h"
#include "pccl_internal.h"
#include "pt.h"

#define PCCL_LEAVE_WAIT_MS       1000u
#define PCCL_RETRY_ROUNDS_MAX    1000u
#define PCCL_SYNC_KEYS_MAX       64u    /* ccoip_peer_config.max_state_keys default */
#define PCCL_RELAY_DEFAULT_BYTES 32768u /* master relay bound (docs/protocol.md §6.8.2) */
/* p2p_connection_pool_size 0: two connections per neighbour, so one large all-reduce is striped
 * over two sender and two receiver threads (docs/protocol.md §8.2; measured in
 * docs/benchmarks.md). */
#define PCCL_POOL_DEFAULT 2u

static atomic_bool g_initialized;

bool pccl_initialized(void)
{
    return atomic_load(&g_initialized);
}

struct pcclMasterInstanceState_t {
    pt_driver *d;
};

/* ------------------------------------------------------------------------ */
/* Library                                                                  */
/* ------------------------------------------------------------------------ */

PCCL_EXPORT pcclResult_t pcclInit(void)
{
    atomic_store(&g_initialized, true);
    return pcclSuccess;
}

PCCL_EXPORT pcclResult_t pcclGetVersion(uint32_t *version_out)
{
    if (version_out == NULL) return pcclInvalidArgument;
    *version_out = (uint32_t)PCCL_VERSION_HEX;
    return pcclSuccess;
}

PCCL_EXPORT pcclResult_t pcclGetBuildInfo(pcclBuildInfo_t *info)
{
    if (info == NULL) return pcclInvalidArgument;
    info->has_cuda_support = false;
    return pcclSuccess;
}

/* ------------------------------------------------------------------------ */
/* Communicator                                                             */
/* ------------------------------------------------------------------------ */

static bool addr_valid(const ccoip_socket_address_t *a)
{
    return a->inet.protocol == inetIPv4 || a->inet.protocol == inetIPv6;
}

/* A millisecond count from the environment variable name (unset or empty: *out unchanged). */
static pcclResult_t env_ms(const char *name, uint32_t *out)
{
    const char *v = getenv(name);
    if (v == NULL || v[0] == '\0') return pcclSuccess;
    char *end = NULL;
    const unsigned long long ms = strtoull(v, &end, 10);
    if (*end != '\0' || ms > UINT32_MAX) {
        pt_log(CCOIP_LOG_ERROR, "pccl", "%s=%s: want a count of milliseconds, 0 .. %u", name, v,
               (unsigned)UINT32_MAX);
        return pcclInvalidArgument;
    }
    *out = (uint32_t)ms;
    return pcclSuccess;
}

/* TORCHCOMM_TIMEOUT_SECONDS (TorchComms' default timeout, in seconds, a decimal number) when
 * PCCL_TIMEOUT_MS is not set. */
static pcclResult_t env_torchcomm_timeout(uint32_t *out)
{
    const char *ms = getenv("PCCL_TIMEOUT_MS");
    const char *v = getenv("TORCHCOMM_TIMEOUT_SECONDS");
    if ((ms != NULL && ms[0] != '\0') || v == NULL || v[0] == '\0') return pcclSuccess;
    char *end = NULL;
    const double s = strtod(v, &end);
    if (*end != '\0' || !(s >= 0.0) || s * 1000.0 > (double)UINT32_MAX) {
        pt_log(CCOIP_LOG_ERROR, "pccl", "TORCHCOMM_TIMEOUT_SECONDS=%s: want seconds, 0 .. %u", v,
               (unsigned)(UINT32_MAX / 1000u));
        return pcclInvalidArgument;
    }
    *out = (uint32_t)(s * 1000.0 + 0.5);
    return pcclSuccess;
}

static pcclResult_t options_env(pcclCommCreateOptions_t *out)
{
    pcclResult_t r = env_ms("PCCL_TIMEOUT_MS", &out->timeout_ms);
    if (r == pcclSuccess) r = env_torchcomm_timeout(&out->timeout_ms);
    if (r == pcclSuccess) r = env_ms("PCCL_HEARTBEAT_MS", &out->heartbeat_ms);
    const char *url = getenv("PCCL_MASTER_URL");
    if (r == pcclSuccess && url != NULL && url[0] != '\0') out->master_url = url;
    return r;
}

/*
 * The options of pcclCreateCommunicatorEx, checked. A field the caller left
 * zero (or NULL options, as pcclCreateCommunicator passes) takes its value
 * from the environment, so programs built for PCCL 1.0 reach every option:
 * PCCL_MASTER_URL, PCCL_TIMEOUT_MS (or TORCHCOMM_TIMEOUT_SECONDS, in seconds, when
 * it is not set), PCCL_HEARTBEAT_MS.
 */
static pcclResult_t options_read(const pcclCommCreateOptions_t *o, pcclCommCreateOptions_t *out)
{
    const pcclCommCreateOptions_t defaults = PCCL_COMM_CREATE_OPTIONS_INIT;
    *out = defaults;
    pcclResult_t r = options_env(out);
    if (r != pcclSuccess || o == NULL) return r;
    if (o->struct_size < offsetof(pcclCommCreateOptions_t, reserved) + sizeof o->reserved) {
        pt_log(CCOIP_LOG_ERROR, "pccl",
               "pcclCreateCommunicatorEx: options.struct_size %u is too small (set it to "
               "sizeof(pcclCommCreateOptions_t), or use PCCL_COMM_CREATE_OPTIONS_INIT)",
               (unsigned)o->struct_size);
        return pcclInvalidArgument;
    }
    if (o->struct_size > sizeof *o) {
        pt_log(CCOIP_LOG_ERROR, "pccl",
               "pcclCreateCommunicatorEx: options.struct_size %u is larger than this library's "
               "%u: the program was built against a newer pccl.h",
               (unsigned)o->struct_size, (unsigned)sizeof *o);
        return pcclInvalidArgument;
    }
    if (o->reserved != 0) {
        pt_log(CCOIP_LOG_ERROR, "pccl", "pcclCreateCommunicatorEx: options.reserved must be 0");
        return pcclInvalidArgument;
    }
    pcclCommCreateOptions_t given = defaults;
    memcpy(&given, o, o->struct_size); /* fields beyond the caller's struct_size: defaults */
    if (given.timeout_ms != 0) out->timeout_ms = given.timeout_ms;
    if (given.heartbeat_ms != 0) out->heartbeat_ms = given.heartbeat_ms;
    if (given.master_url != NULL && given.master_url[0] != '\0') out->master_url = given.master_url;
    out->ring_key = given.ring_key;
    if (given.reserved2 != 0) {
        pt_log(CCOIP_LOG_ERROR, "pccl", "pcclCreateCommunicatorEx: options.reserved2 must be 0");
        return pcclInvalidArgument;
    }
    if (out->master_url != NULL && strlen(out->master_url) >= CCOIP_URL_MAX) {
        pt_log(CCOIP_LOG_ERROR, "pccl",
               "pcclCreateCommunicatorEx: master_url is %u bytes or longer",
               (unsigned)CCOIP_URL_MAX);
        return pcclInvalidArgument;
    }
    return pcclSuccess;
}

PCCL_EXPORT pcclResult_t pcclCreateCommunicatorEx(const pcclCommCreateParams_t *params,
                                                  const pcclCommCreateOptions_t *options,
                                                  pcclComm_t **comm_out)
{
    if (!atomic_load(&g_initialized)) return pcclNotInitialized;
    if (params == NULL || comm_out == NULL) return pcclInvalidArgument;
    pcclCommCreateOptions_t o;
    pcclResult_t r = options_read(options, &o);
    if (r != pcclSuccess) return r;
    const bool has_url = o.master_url != NULL && o.master_url[0] != '\0';
    if (!has_url && !addr_valid(&params->master_address)) {
        pt_log(CCOIP_LOG_ERROR, "pccl",
               "pcclCreateCommunicator: master_address.inet.protocol is neither inetIPv4 nor "
               "inetIPv6");
        return pcclInvalidArgument;
    }
    pcclComm_t *c = calloc(1, sizeof *c);
    if (c == NULL) return pcclSystemError;
    c->params = *params;
    if (c->params.p2p_connection_pool_size > CCOIP_P2P_POOL_MAX) {
        pt_log(CCOIP_LOG_INFO, "pccl",
               "p2p_connection_pool_size %u: pccl opens at most %u connections per neighbour, "
               "using %u",
               (unsigned)c->params.p2p_connection_pool_size, (unsigned)CCOIP_P2P_POOL_MAX,
               (unsigned)CCOIP_P2P_POOL_MAX);
        c->params.p2p_connection_pool_size = CCOIP_P2P_POOL_MAX;
    }
    c->timeout_ms = o.timeout_ms;
    c->heartbeat_ms = o.heartbeat_ms;
    c->ring_key = o.ring_key;
    if (has_url) {
        snprintf(c->url, sizeof c->url, "%s", o.master_url);
        c->has_url = true;
    }
    pthread_mutex_init(&c->mu, NULL);
    *comm_out = c;
    return pcclSuccess;
}

PCCL_EXPORT pcclResult_t pcclCreateCommunicator(const pcclCommCreateParams_t *params,
                                                pcclComm_t **comm_out)
{
    return pcclCreateCommunicatorEx(params, NULL, comm_out);
}

/* Where the p2p listener binds: loopback when the master is on loopback. */
static const char *bind_host_for(const pcclComm_t *c)
{
    if (c->has_url) {
        if (strstr(c->url, "://127.") != NULL || strstr(c->url, "://localhost") != NULL ||
            strncmp(c->url, "ipc://", 6) == 0 || strstr(c->url, "://[::1]") != NULL) {
            return "127.0.0.1";
        }
        return "0.0.0.0";
    }
    const ccoip_inet_address_t *in = &c->params.master_address.inet;
    if (in->protocol == inetIPv4 && in->ipv4.data[0] == 127) return "127.0.0.1";
    return "0.0.0.0";
}

static void comm_teardown(pcclComm_t *c)
{
    pt_driver_destroy(c->d);
    c->d = NULL;
    c->connected = false;
    memset(c->async, 0, sizeof c->async);
}

PCCL_EXPORT pcclResult_t pcclDestroyCommunicator(pcclComm_t *communicator)
{
    if (!atomic_load(&g_initialized)) return pcclNotInitialized;
    if (communicator == NULL) return pcclInvalidArgument;
    pcclComm_t *c = communicator;
    if (c->d != NULL && c->connected) {
        ccoip_cmd cmd;
        memset(&cmd, 0, sizeof cmd);
        cmd.type = CCOIP_CMD_LEAVE;
        uint32_t h;
        if (pt_cmd_submit(c->d, &cmd, NULL, NULL, 0, &h) == pcclSuccess) {
            (void)pt_cmd_wait(c->d, h, PCCL_LEAVE_WAIT_MS, false, NULL);
        }
    }
    comm_teardown(c);
    pthread_mutex_destroy(&c->mu);
    free(c);
    return pcclSuccess;
}

/* Posts a command and waits for it (bounded by the options' timeout_ms). */
static pcclResult_t comm_call(const pcclComm_t *c, ccoip_cmd *cmd, void *send, void *recv,
                              uint64_t bytes, pt_cmd_result *out)
{
    uint32_t h;
    pcclResult_t r = pt_cmd_submit(c->d, cmd, send, recv, bytes, &h);
    if (r != pcclSuccess) return r;
    return pt_cmd_wait(c->d, h, c->timeout_ms, false, out);
}

PCCL_EXPORT pcclResult_t pcclConnect(pcclComm_t *communicator)
{
    uint32_t h = 0;
    const pcclResult_t r = pccl_connect_start(communicator, &h);
    if (r != pcclSuccess) return r;
    return pccl_connect_finish(communicator, h, communicator->timeout_ms);
}

pcclResult_t pccl_connect_start(pcclComm_t *communicator, uint32_t *handle)
{
    if (!atomic_load(&g_initialized)) return pcclNotInitialized;
    if (communicator == NULL) return pcclInvalidArgument;
    pcclComm_t *c = communicator;
    if (c->connected) return pcclInvalidUsage;
    if (c->d != NULL) comm_teardown(c);

    ccoip_peer_config cfg;
    memset(&cfg, 0, sizeof cfg);
    if (c->has_url) {
        cfg.master_url = c->url;
    } else {
        const ccoip_socket_address_t *a = &c->params.master_address;
        if (a->inet.protocol == inetIPv4) {
            memcpy(cfg.master_ip, a->inet.ipv4.data, 4);
            cfg.master_ip_len = 4;
        } else {
            memcpy(cfg.master_ip, a->inet.ipv6.data, 16);
            cfg.master_ip_len = 16;
        }
        cfg.master_port = a->port;
    }
    const char *abort_env = getenv("PCCL_ABORT_ON_ERROR");
    const char *tc_abort_env = getenv("TORCHCOMM_ABORT_ON_ERROR");
    c->abort_on_error = (abort_env != NULL && strcmp(abort_env, "1") == 0) ||
                        (tc_abort_env != NULL && strcmp(tc_abort_env, "1") == 0);
    cfg.peer_group = c->params.peer_group;
    cfg.ring_key = c->ring_key;
    cfg.p2p_pool_size = c->params.p2p_connection_pool_size != 0 ? c->params.p2p_connection_pool_size
                                                                : PCCL_POOL_DEFAULT;
    cfg.heartbeat_ms = c->heartbeat_ms;
    if (cfg.heartbeat_ms > 0 && cfg.heartbeat_ms * 8u > 2000u) cfg.evict_ms = cfg.heartbeat_ms * 8u;
    pcclResult_t r = pt_peer_create(&cfg, bind_host_for(c), &c->d);
    if (r != pcclSuccess) return r;
    ccoip_cmd cmd;
    memset(&cmd, 0, sizeof cmd);
    cmd.type = CCOIP_CMD_CONNECT;
    r = pt_cmd_submit(c->d, &cmd, NULL, NULL, 0, handle);
    if (r != pcclSuccess) comm_teardown(c);
    return r;
}

pcclResult_t pccl_connect_finish(pcclComm_t *c, uint32_t handle, uint32_t timeout_ms)
{
    const pcclResult_t r = pt_cmd_wait(c->d, handle, timeout_ms, false, NULL);
    if (r == pcclSuccess) {
        c->connected = true;
    } else {
        comm_teardown(c);
    }
    return r;
}

pcclResult_t pccl_comm_clone(const pcclComm_t *parent, uint32_t peer_group, uint32_t ring_key,
                             pcclComm_t **out)
{
    pcclComm_t *c = calloc(1, sizeof *c);
    if (c == NULL) return pcclSystemError;
    c->params = parent->params;
    c->params.peer_group = peer_group;
    c->ring_key = ring_key;
    c->timeout_ms = parent->timeout_ms;
    c->heartbeat_ms = parent->heartbeat_ms;
    memcpy(c->url, parent->url, sizeof c->url);
    c->has_url = parent->has_url;
    pthread_mutex_init(&c->mu, NULL);
    *out = c;
    return pcclSuccess;
}

pcclResult_t pccl_comm_check(const pcclComm_t *c)
{
    if (!atomic_load(&g_initialized)) return pcclNotInitialized;
    if (c == NULL) return pcclInvalidArgument;
    if (!c->connected || c->d == NULL) return pcclInvalidUsage;
    return pcclSuccess;
}

static bool async_pending(pcclComm_t *c)
{
    bool any = false;
    pthread_mutex_lock(&c->mu);
    for (uint32_t i = 0; i < PCCL_MAX_ASYNC; i++)
        any = any || c->async[i].used;
    pthread_mutex_unlock(&c->mu);
    return any;
}

PCCL_EXPORT pcclResult_t pcclUpdateTopology(pcclComm_t *communicator)
{
    pcclResult_t r = pccl_comm_check(communicator);
    if (r != pcclSuccess) return r;
    if (async_pending(communicator)) return pcclPendingAsyncOps;
    ccoip_cmd cmd;
    memset(&cmd, 0, sizeof cmd);
    cmd.type = CCOIP_CMD_UPDATE_TOPOLOGY;
    return comm_call(communicator, &cmd, NULL, NULL, 0, NULL);
}

PCCL_EXPORT pcclResult_t pcclArePeersPending(const pcclComm_t *communicator, bool *pending_out)
{
    pcclResult_t r = pccl_comm_check(communicator);
    if (r != pcclSuccess) return r;
    if (pending_out == NULL) return pcclInvalidArgument;
    ccoip_cmd cmd;
    memset(&cmd, 0, sizeof cmd);
    cmd.type = CCOIP_CMD_ARE_PEERS_PENDING;
    pt_cmd_result res;
    memset(&res, 0, sizeof res);
    r = comm_call(communicator, &cmd, NULL, NULL, 0, &res);
    if (r == pcclSuccess) *pending_out = res.peers_pending;
    return r;
}

PCCL_EXPORT pcclResult_t pcclOptimizeTopology(const pcclComm_t *communicator)
{
    pcclResult_t r = pccl_comm_check(communicator);
    if (r != pcclSuccess) return r;
    if (async_pending((pcclComm_t *)(uintptr_t)communicator)) return pcclPendingAsyncOps;
    ccoip_cmd cmd;
    memset(&cmd, 0, sizeof cmd);
    cmd.type = CCOIP_CMD_OPTIMIZE_TOPOLOGY;
    return comm_call(communicator, &cmd, NULL, NULL, 0, NULL);
}

PCCL_EXPORT pcclResult_t pcclGetAttribute(const pcclComm_t *communicator, pcclAttribute_t attribute,
                                          int *p_attribute_out)
{
    pcclResult_t r = pccl_comm_check(communicator);
    if (r != pcclSuccess) return r;
    if (p_attribute_out == NULL) return pcclInvalidArgument;
    pt_peer_info info;
    pt_peer_info_get(communicator->d, &info);
    /* Counts of the last TopologyVerdict / JoinResult (ccoip_peer_world_info);
     * the group's own size is the one the last command completed with. */
    const uint32_t group = info.world_size;
    switch (attribute) {
    case PCCL_ATTRIBUTE_PEER_GROUP_WORLD_SIZE:
        *p_attribute_out = (int)group;
        return pcclSuccess;
    case PCCL_ATTRIBUTE_GLOBAL_WORLD_SIZE:
        *p_attribute_out = (int)(info.world.global > group ? info.world.global : group);
        return pcclSuccess;
    case PCCL_ATTRIBUTE_LARGEST_PEER_GROUP_WORLD_SIZE:
        *p_attribute_out =
            (int)(info.world.largest_peer_group > group ? info.world.largest_peer_group : group);
        return pcclSuccess;
    case PCCL_ATTRIBUTE_NUM_DISTINCT_PEER_GROUPS:
        *p_attribute_out = (int)(info.world.num_peer_groups > 0 ? info.world.num_peer_groups
                                                                : (group > 0 ? 1u : 0u));
        return pcclSuccess;
    case PCCL_ATTRIBUTE_COPIED_BYTES:
        *p_attribute_out = (int)(info.copied_bytes & 0x7fffffffu);
        return pcclSuccess;
    case PCCL_ATTRIBUTE_COPIED_BYTES_HIGH:
        *p_attribute_out =
            info.copied_bytes >> 31 > 0x7fffffffu ? 0x7fffffff : (int)(info.copied_bytes >> 31);
        return pcclSuccess;
    case PCCL_ATTRIBUTE_RANK:
        *p_attribute_out = (int)info.rank;
        return pcclSuccess;
    case PCCL_ATTRIBUTE_EPOCH:
        *p_attribute_out = info.epoch > 0x7fffffffu ? 0x7fffffff : (int)info.epoch;
        return pcclSuccess;
    }
    return pcclInvalidArgument;
}

/* ------------------------------------------------------------------------ */
/* All-reduce                                                               */
/* ------------------------------------------------------------------------ */

pcclResult_t pccl_reduce_args(const void *sendbuff, const void *recvbuff,
                              const pcclReduceDescriptor_t *desc, ccoip_allreduce_args *out,
                              uint64_t *bytes_out)
{
    if (desc == NULL) return pcclInvalidArgument;
    const pcclDataType_t dt = desc->src_descriptor.datatype;
    /* A known dtype and op, and no bitwise op (BAND/BOR/BXOR) on a float dtype. */
    if (!ccoip_reduce_supported(desc->op, dt)) return pcclInvalidArgument;
    const pcclQuantizationAlgorithm_t qa = desc->quantization_options.algorithm;
    if (qa != pcclQuantNone) {
        if (!ccoip_dtype_valid(desc->quantization_options.quantized_datatype) ||
            !ccoip_quant_supported(qa, dt, desc->quantization_options.quantized_datatype)) {
            return pcclInvalidArgument;
        }
    }
    const uint64_t esz = ccoip_dtype_size(dt);
    if ((uint64_t)desc->count > (UINT64_MAX / 4u) / esz) return pcclInvalidArgument;
    if (desc->count > 0 && (sendbuff == NULL || recvbuff == NULL)) return pcclInvalidArgument;
    if (sendbuff != recvbuff && desc->count > 0) {
        /* Out of place, the ring reads SEND while it writes RECV (no initial copy,
         * docs/semantics.md §5): the buffers must be the same or disjoint. */
        const uintptr_t s = (uintptr_t)sendbuff, r = (uintptr_t)recvbuff;
        const uint64_t n = (uint64_t)desc->count * esz;
        if ((s < r && r - s < n) || (r < s && s - r < n)) {
            pt_log(CCOIP_LOG_ERROR, "pccl", "all-reduce: send and receive buffers overlap");
            return pcclInvalidArgument;
        }
    }
    memset(out, 0, sizeof *out);
    out->tag = desc->tag;
    out->count = desc->count;
    out->dtype = dt;
    out->op = desc->op;
    out->quant_algorithm = qa;
    out->quant_dtype = qa != pcclQuantNone ? desc->quantization_options.quantized_datatype : dt;
    out->in_place = sendbuff == recvbuff;
    *bytes_out = (uint64_t)desc->count * esz;
    return pcclSuccess;
}

static void info_fill(pcclReduceInfo_t *info, const pt_cmd_result *res)
{
    if (info == NULL) return;
    info->local_world_size = res->world_size;
    info->tx_bytes = res->tx_bytes;
    info->rx_bytes = res->rx_bytes;
}

PCCL_EXPORT pcclResult_t pcclAllReduceAsync(const void *sendbuff, void *recvbuff,
                                            const pcclReduceDescriptor_t *descriptor,
                                            const pcclComm_t *communicator,
                                            pcclAsyncReduceOp_t *reduce_handle_out)
{
    pcclResult_t r = pccl_comm_check(communicator);
    if (r != pcclSuccess) return r;
    if (reduce_handle_out == NULL) return pcclInvalidArgument;
    ccoip_allreduce_args args;
    uint64_t bytes = 0;
    r = pccl_reduce_args(sendbuff, recvbuff, descriptor, &args, &bytes);
    if (r != pcclSuccess) return r;
    if (args.op == pcclPremulSum) {
        pt_log(CCOIP_LOG_ERROR, "pccl",
               "all-reduce: pcclPremulSum needs its factor: call pcclAllReduceEx with "
               "pcclCollectiveOptions_t.premul_scalar");
        return pcclInvalidArgument;
    }
    pcclComm_t *c = (pcclComm_t *)(uintptr_t)communicator;
    pt_peer_info info;
    pt_peer_info_get(c->d, &info);
    if (info.world_size < 2) { /* as PCCL 1.0: refused by the call, not at await */
        pt_log(CCOIP_LOG_WARN, "pccl",
               "all-reduce (tag %llu): the peer group has %u member(s); update the topology "
               "until others join",
               (unsigned long long)args.tag, (unsigned)info.world_size);
        return pcclTooFewPeers;
    }
    pthread_mutex_lock(&c->mu);
    uint32_t slot = PCCL_MAX_ASYNC;
    for (uint32_t i = 0; i < PCCL_MAX_ASYNC; i++) {
        if (c->async[i].used && c->async[i].tag == args.tag) {
            pthread_mutex_unlock(&c->mu);
            return pcclInvalidArgument; /* tag already in flight */
        }
        if (!c->async[i].used && slot == PCCL_MAX_ASYNC) slot = i;
    }
    if (slot == PCCL_MAX_ASYNC) {
        pthread_mutex_unlock(&c->mu);
        return pcclInvalidUsage;
    }
    ccoip_cmd cmd;
    memset(&cmd, 0, sizeof cmd);
    cmd.type = CCOIP_CMD_ALL_REDUCE;
    cmd.allreduce = args;
    uint32_t h;
    r = pt_cmd_submit(c->d, &cmd, (void *)(uintptr_t)sendbuff, recvbuff, bytes, &h);
    if (r == pcclSuccess) {
        c->async[slot].used = true;
        c->async[slot].tag = args.tag;
        c->async[slot].handle = h;
        reduce_handle_out->comm = c;
        reduce_handle_out->tag = args.tag;
    }
    pthread_mutex_unlock(&c->mu);
    return r;
}

static pcclResult_t await_impl(const pcclAsyncReduceOp_t *hnd, uint32_t timeout_ms, bool keep,
                               pcclReduceInfo_t *info)
{
    if (!atomic_load(&g_initialized)) return pcclNotInitialized;
    if (hnd == NULL || hnd->comm == NULL) return pcclInvalidArgument;
    pcclComm_t *c = hnd->comm;
    pthread_mutex_lock(&c->mu);
    uint32_t slot = PCCL_MAX_ASYNC;
    for (uint32_t i = 0; i < PCCL_MAX_ASYNC; i++) {
        if (c->async[i].used && c->async[i].tag == hnd->tag) slot = i;
    }
    if (slot == PCCL_MAX_ASYNC || c->d == NULL) {
        pthread_mutex_unlock(&c->mu);
        return pcclInvalidArgument;
    }
    const uint32_t h = c->async[slot].handle;
    pt_driver *d = c->d;
    pthread_mutex_unlock(&c->mu);
    pt_cmd_result res;
    memset(&res, 0, sizeof res);
    const pcclResult_t r = pt_cmd_wait(d, h, timeout_ms, keep, &res);
    if (r != pcclTimeout || !keep) {
        pthread_mutex_lock(&c->mu);
        c->async[slot].used = false;
        pthread_mutex_unlock(&c->mu);
    }
    if (r == pcclSuccess) info_fill(info, &res);
    return r;
}

PCCL_EXPORT pcclResult_t pcclAwaitAsyncReduce(const pcclAsyncReduceOp_t *reduce_handle,
                                              pcclReduceInfo_t *reduce_info_out)
{
    if (reduce_handle == NULL || reduce_handle->comm == NULL) return pcclInvalidArgument;
    return await_impl(reduce_handle, reduce_handle->comm->timeout_ms, false, reduce_info_out);
}

PCCL_EXPORT pcclResult_t pcclAwaitAsyncReduceTimeout(const pcclAsyncReduceOp_t *reduce_handle,
                                                     uint32_t timeout_ms,
                                                     pcclReduceInfo_t *reduce_info_out)
{
    return await_impl(reduce_handle, timeout_ms, timeout_ms > 0, reduce_info_out);
}

PCCL_EXPORT pcclResult_t pcclAllReduce(const void *sendbuff, void *recvbuff,
                                       const pcclReduceDescriptor_t *descriptor,
                                       const pcclComm_t *communicator,
                                       pcclReduceInfo_t *reduce_info_out)
{
    pcclAsyncReduceOp_t h;
    pcclResult_t r = pcclAllReduceAsync(sendbuff, recvbuff, descriptor, communicator, &h);
    if (r != pcclSuccess) return r;
    return pcclAwaitAsyncReduce(&h, reduce_info_out);
}

PCCL_EXPORT pcclResult_t pcclAllReduceMultipleWithRetry(const pcclReduceOpDescriptor_t *descriptors,
                                                        size_t count,
                                                        const pcclComm_t *communicator,
                                                        pcclReduceInfo_t *reduce_info_out,
                                                        int max_in_flight)
{
    pcclResult_t r = pccl_comm_check(communicator);
    if (r != pcclSuccess) return r;
    if (count > 0 && descriptors == NULL) return pcclInvalidArgument;
    if (count > 4096u) return pcclInvalidArgument;
    const uint32_t window =
        max_in_flight <= 0
            ? 1u
            : ((uint32_t)max_in_flight > PCCL_MAX_ASYNC ? PCCL_MAX_ASYNC : (uint32_t)max_in_flight);
    for (size_t i = 0; i < count; i++) {
        ccoip_allreduce_args a;
        uint64_t b;
        r = pccl_reduce_args(descriptors[i].sendbuf, descriptors[i].recvbuf,
                             &descriptors[i].descriptor, &a, &b);
        if (r != pcclSuccess) return r;
    }
    bool *done = calloc(count > 0 ? count : 1u, sizeof *done);
    if (done == NULL) return pcclSystemError;
    pcclReduceInfo_t total;
    memset(&total, 0, sizeof total);
    size_t remaining = count;
    pcclResult_t out = pcclSuccess;
    for (uint32_t round = 0; remaining > 0; round++) {
        if (round >= PCCL_RETRY_ROUNDS_MAX) {
            out = pcclRankConnectionLost;
            break;
        }
        size_t idx[PCCL_MAX_ASYNC];
        pcclAsyncReduceOp_t hs[PCCL_MAX_ASYNC];
        pcclResult_t launched[PCCL_MAX_ASYNC];
        uint32_t n = 0;
        for (size_t i = 0; i < count && n < window; i++) {
            if (done[i]) continue;
            idx[n] = i;
            launched[n] = pcclAllReduceAsync(descriptors[i].sendbuf, descriptors[i].recvbuf,
                                             &descriptors[i].descriptor, communicator, &hs[n]);
            n++;
        }
        bool lost = false;
        for (uint32_t k = 0; k < n; k++) {
            pcclResult_t rk = launched[k];
            pcclReduceInfo_t info;
            memset(&info, 0, sizeof info);
            if (rk == pcclSuccess) rk = pcclAwaitAsyncReduce(&hs[k], &info);
            if (rk == pcclSuccess) {
                done[idx[k]] = true;
                remaining--;
                total.tx_bytes += info.tx_bytes;
                total.rx_bytes += info.rx_bytes;
                total.local_world_size = info.local_world_size;
            } else if (rk == pcclRankConnectionLost) {
                lost = true;
            } else if (out == pcclSuccess) {
                out = rk;
            }
        }
        if (out != pcclSuccess) break;
        if (lost) {
            int ws = 0;
            pcclGetAttribute(communicator, PCCL_ATTRIBUTE_PEER_GROUP_WORLD_SIZE, &ws);
            if (ws < 2) {
                out = pcclTooFewPeers;
                break;
            }
        }
    }
    free(done);
    if (reduce_info_out != NULL) *reduce_info_out = total;
    return out;
}

/* ------------------------------------------------------------------------ */
/* Shared state                                                             */
/* ------------------------------------------------------------------------ */

PCCL_EXPORT pcclResult_t(pcclSynchronizeSharedState)(const pcclComm_t *communicator,
                                                     pcclSharedState_t *shared_state,
                                                     pcclSharedStateSyncStrategy_t strategy,
                                                     pcclSharedStateSyncInfo_t *sync_info_out)
{
    pcclResult_t r = pccl_comm_check(communicator);
    if (r != pcclSuccess) return r;
    if (shared_state == NULL || (shared_state->count > 0 && shared_state->infos == NULL)) {
        return pcclInvalidArgument;
    }
    if ((int)strategy < 0 || (int)strategy > 2) return pcclInvalidArgument;
    if (shared_state->count > PCCL_SYNC_KEYS_MAX) return pcclInvalidArgument;
    if (sync_info_out != NULL) memset(sync_info_out, 0, sizeof *sync_info_out);
    pcclComm_t *c = (pcclComm_t *)(uintptr_t)communicator;
    const uint32_t n = (uint32_t)shared_state->count;
    ccoip_state_key *keys = calloc(n > 0 ? n : 1u, sizeof *keys);
    void **mem = calloc(n > 0 ? n : 1u, sizeof *mem);
    uint64_t *bytes = calloc(n > 0 ? n : 1u, sizeof *bytes);
    if (keys == NULL || mem == NULL || bytes == NULL) {
        free(keys);
        free(mem);
        free(bytes);
        return pcclSystemError;
    }
    r = pcclSuccess;
    for (uint32_t i = 0; i < n && r == pcclSuccess; i++) {
        const pcclTensorInfo_t *t = &shared_state->infos[i];
        if (t->name == NULL || t->name[0] == '\0' ||
            strnlen(t->name, CCOIP_STATE_NAME_MAX) >= CCOIP_STATE_NAME_MAX ||
            !ccoip_dtype_valid(t->datatype) || t->device_type != pcclDeviceCpu ||
            (t->count > 0 && t->data == NULL) ||
            (uint64_t)t->count > (UINT64_MAX / 4u) / ccoip_dtype_size(t->datatype)) {
            r = pcclInvalidArgument;
            break;
        }
        for (uint32_t k = 0; k < i; k++) {
            if (strcmp(keys[k].name, t->name) == 0) r = pcclInvalidArgument; /* duplicate key */
        }
        keys[i].name = t->name;
        keys[i].dtype = t->datatype;
        keys[i].count = t->count;
        keys[i].allow_content_inequality = t->allow_content_inequality;
        mem[i] = t->data;
        bytes[i] = (uint64_t)t->count * ccoip_dtype_size(t->datatype);
    }
    pt_cmd_result res;
    memset(&res, 0, sizeof res);
    if (r == pcclSuccess) {
        ccoip_cmd cmd;
        memset(&cmd, 0, sizeof cmd);
        cmd.type = CCOIP_CMD_SYNC_SHARED_STATE;
        cmd.sync.revision = shared_state->revision;
        cmd.sync.strategy = strategy;
        cmd.sync.num_keys = n;
        cmd.sync.keys = keys;
        uint32_t h;
        r = pt_cmd_submit_sync(c->d, &cmd, mem, bytes, n, &h);
        if (r == pcclSuccess) r = pt_cmd_wait(c->d, h, c->timeout_ms, false, &res);
    }
    free(keys);
    free(mem);
    free(bytes);
    if (r != pcclSuccess) return r;
    shared_state->revision = res.revision;
    if (sync_info_out != NULL) {
        sync_info_out->tx_bytes = res.tx_bytes;
        sync_info_out->rx_bytes = res.rx_bytes;
    }
    return pcclSuccess;
}

PCCL_EXPORT pcclResult_t pcclSynchronizeSharedStateEx(const pcclComm_t *communicator,
                                                      pcclSharedState_t *shared_state,
                                                      pcclSharedStateSyncStrategy_t strategy,
                                                      pcclSharedStateSyncInfo_t *sync_info_out)
{
    return (pcclSynchronizeSharedState)(communicator, shared_state, strategy, sync_info_out);
}

/* ------------------------------------------------------------------------ */
/* Master                                                                   */
/* ------------------------------------------------------------------------ */

static void url_of(const ccoip_socket_address_t *a, char *url, size_t cap)
{
    if (a->inet.protocol == inetIPv6) {
        int n = snprintf(url, cap, "tcp://[");
        for (unsigned i = 0; i < 16u; i += 2u) {
            n += snprintf(url + n, cap - (size_t)n, "%s%x", i ? ":" : "",
                          (unsigned)((a->inet.ipv6.data[i] << 8) | a->inet.ipv6.data[i + 1u]));
        }
        snprintf(url + n, cap - (size_t)n, "]:%u", (unsigned)a->port);
    } else {
        snprintf(url, cap, "tcp://%u.%u.%u.%u:%u", a->inet.ipv4.data[0], a->inet.ipv4.data[1],
                 a->inet.ipv4.data[2], a->inet.ipv4.data[3], (unsigned)a->port);
    }
}

PCCL_EXPORT pcclResult_t pcclCreateMasterEx(const pcclMasterCreateParams_t *params,
                                            pcclMasterInstance_t **p_master_handle_out,
                                            uint16_t *bound_port_out)
{
    if (params == NULL || p_master_handle_out == NULL) return pcclInvalidArgument;
    ccoip_master_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.heartbeat_ms = params->heartbeat_ms;
    cfg.evict_ms = params->evict_ms;
    cfg.vote_timeout_ms = params->vote_timeout_ms;
    cfg.max_peers = params->max_peers;
    /* Master relay (docs/protocol.md §6.8.2): all-reduces of at most this many bytes per input
     * are reduced by the master. PCCL_RELAY_MAX_BYTES (0: off; at most 65536), default 32 KiB. */
    cfg.relay_max_bytes = PCCL_RELAY_DEFAULT_BYTES;
    const char *relay = getenv("PCCL_RELAY_MAX_BYTES");
    if (relay != NULL && relay[0] != '\0') {
        char *end = NULL;
        const unsigned long long v = strtoull(relay, &end, 10);
        if (*end != '\0' || v > CCOIP_RELAY_MAX_BYTES) {
            pt_log(CCOIP_LOG_ERROR, "master", "PCCL_RELAY_MAX_BYTES=%s: want 0 .. %llu", relay,
                   (unsigned long long)CCOIP_RELAY_MAX_BYTES);
            return pcclInvalidArgument;
        }
        cfg.relay_max_bytes = (uint32_t)v;
    }
    pcclMasterInstance_t *m = calloc(1, sizeof *m);
    if (m == NULL) return pcclSystemError;
    uint32_t port = 0;
    char def[64];
    snprintf(def, sizeof def, "tcp://0.0.0.0:%d", CCOIP_PROTOCOL_PORT_MASTER);
    const pcclResult_t r =
        pt_master_create(params->listen_url != NULL ? params->listen_url : def, &cfg, &m->d, &port);
    if (r != pcclSuccess) {
        free(m);
        return r;
    }
    if (bound_port_out != NULL) *bound_port_out = (uint16_t)port;
    *p_master_handle_out = m;
    return pcclSuccess;
}

PCCL_EXPORT pcclResult_t pcclCreateMaster(ccoip_socket_address_t listen_address,
                                          pcclMasterInstance_t **p_master_handle_out)
{
    if (p_master_handle_out == NULL || !addr_valid(&listen_address)) return pcclInvalidArgument;
    char url[128];
    url_of(&listen_address, url, sizeof url);
    pcclMasterCreateParams_t p;
    memset(&p, 0, sizeof p);
    p.listen_url = url;
    return pcclCreateMasterEx(&p, p_master_handle_out, NULL);
}

PCCL_EXPORT pcclResult_t pcclRunMaster(pcclMasterInstance_t *master_instance)
{
    if (master_instance == NULL) return pcclInvalidArgument;
    return pt_driver_start(master_instance->d);
}

PCCL_EXPORT pcclResult_t pcclInterruptMaster(pcclMasterInstance_t *master_instance)
{
    if (master_instance == NULL) return pcclInvalidArgument;
    pt_driver_stop(master_instance->d);
    return pcclSuccess;
}

PCCL_EXPORT pcclResult_t pcclMasterAwaitTermination(pcclMasterInstance_t *master_instance)
{
    if (master_instance == NULL) return pcclInvalidArgument;
    pt_driver_join(master_instance->d);
    return pcclSuccess;
}

PCCL_EXPORT pcclResult_t pcclDestroyMaster(pcclMasterInstance_t *master_instance)
{
    if (master_instance == NULL) return pcclInvalidArgument;
    pt_driver_destroy(master_instance->d);
    free(master_instance);
    return pcclSuccess;
}
