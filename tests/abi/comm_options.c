/*
 * comm_options.c — pcclCommCreateOptions_t and pcclCreateCommunicatorEx
 * (include/pccl.h, docs/pccl10.md): the results of bad options, and the
 * environment variables through which a program built for PCCL 1.0 (plain
 * pcclCreateCommunicator) reaches pccl's options. Also pcclCollectiveOptions_t's
 * versions (struct_size of the first version, 32 bytes, or this header's) and the
 * quantization checks a collective makes before it looks at the group.
 */
#define _POSIX_C_SOURCE 200809L
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pccl.h"

static int g_failed;

#define CHECK_RESULT(call, want)                                                                   \
    do {                                                                                           \
        const pcclResult_t got_ = (call);                                                          \
        if (got_ != (want)) {                                                                      \
            fprintf(stderr, "comm_options: FAILED line %d: %s returned %d, expected %d\n",         \
                    __LINE__, #call, (int)got_, (int)(want));                                      \
            g_failed++;                                                                            \
        }                                                                                          \
    } while (0)

static pcclCommCreateParams_t bad_address(void)
{
    pcclCommCreateParams_t p;
    memset(&p, 0, sizeof p);
    p.master_address.inet.protocol = (ccoip_inet_protocol_t)7; /* neither IPv4 nor IPv6 */
    return p;
}

/* The collective options on a connected communicator alone in its group: accepted options get
 * pcclTooFewPeers (the next check), refused ones pcclInvalidArgument. */
static void collective_options(const pcclComm_t *c)
{
    float in[8] = {0}, out[8] = {0};
    pcclCollectiveOptions_t o = PCCL_COLLECTIVE_OPTIONS_INIT;
    CHECK_RESULT(pcclReduceScatter(in, out, 1, pcclFloat, pcclSum, &o, c, NULL), pcclTooFewPeers);
    /* The first version of the struct, in a buffer of exactly its 32 bytes (ASan sees a read
     * beyond it). */
    unsigned char *mem = malloc(32);
    if (mem == NULL) return;
    uint32_t size = 32;
    memcpy(mem, &o, 32);
    memcpy(mem, &size, sizeof size); /* struct_size is the first field */
    const pcclCollectiveOptions_t *v1 = (const void *)mem;
    CHECK_RESULT(pcclReduceScatter(in, out, 1, pcclFloat, pcclSum, v1, c, NULL), pcclTooFewPeers);
    CHECK_RESULT(pcclBroadcast(in, 1, pcclFloat, 0, v1, c, NULL), pcclTooFewPeers);
    size = 36;
    memcpy(mem, &size, sizeof size);
    CHECK_RESULT(pcclReduceScatter(in, out, 1, pcclFloat, pcclSum, v1, c, NULL),
                 pcclInvalidArgument);
    free(mem);
    o.struct_size = (uint32_t)sizeof o + 8u;
    CHECK_RESULT(pcclReduceScatter(in, out, 1, pcclFloat, pcclSum, &o, c, NULL),
                 pcclInvalidArgument);
    o.struct_size = (uint32_t)sizeof o;
    /* Quantization: reduce and reduce-scatter take a combination the all-reduce takes. */
    o.quantization_options.algorithm = pcclQuantMinMax;
    o.quantization_options.quantized_datatype = pcclUint8;
    CHECK_RESULT(pcclReduceScatter(in, out, 1, pcclFloat, pcclSum, &o, c, NULL), pcclTooFewPeers);
    CHECK_RESULT(pcclReduce(in, out, 8, pcclFloat, pcclAvg, 0, &o, c, NULL), pcclTooFewPeers);
    CHECK_RESULT(pcclReduceScatter(in, out, 1, pcclInt32, pcclSum, &o, c, NULL),
                 pcclInvalidArgument);
    CHECK_RESULT(pcclReduce(in, out, 8, pcclFloat, pcclPremulSum, 0, &o, c, NULL),
                 pcclInvalidArgument);
    o.quantization_options.quantized_datatype = pcclFloat16;
    CHECK_RESULT(pcclReduce(in, out, 8, pcclFloat, pcclSum, 0, &o, c, NULL), pcclInvalidArgument);
    o.quantization_options.quantized_datatype = pcclUint8;
    o.quantization_options.algorithm = (pcclQuantizationAlgorithm_t)3;
    CHECK_RESULT(pcclReduce(in, out, 8, pcclFloat, pcclSum, 0, &o, c, NULL), pcclInvalidArgument);
    o.quantization_options.algorithm = pcclQuantZeroPointScale;
    /* ... and no other collective (the all-reduce has it in its descriptor). */
    CHECK_RESULT(pcclBroadcast(in, 8, pcclFloat, 0, &o, c, NULL), pcclInvalidArgument);
    CHECK_RESULT(pcclAllGather(in, out, 1, pcclFloat, &o, c, NULL), pcclInvalidArgument);
    CHECK_RESULT(pcclAllToAll(in, out, 1, pcclFloat, &o, c, NULL), pcclInvalidArgument);
    CHECK_RESULT(pcclGather(in, out, 1, pcclFloat, 0, &o, c, NULL), pcclInvalidArgument);
    CHECK_RESULT(pcclScatter(in, out, 1, pcclFloat, 0, &o, c, NULL), pcclInvalidArgument);
    CHECK_RESULT(pcclBarrier(&o, c, NULL), pcclInvalidArgument);
    pcclReduceDescriptor_t d;
    memset(&d, 0, sizeof d);
    d.count = 8;
    d.op = pcclSum;
    d.src_descriptor.datatype = pcclFloat;
    d.quantization_options.algorithm = pcclQuantNone;
    CHECK_RESULT(pcclAllReduceEx(in, out, &d, &o, c, NULL), pcclInvalidArgument);
}

static void destroy(pcclComm_t **c)
{
    if (*c != NULL) CHECK_RESULT(pcclDestroyCommunicator(*c), pcclSuccess);
    *c = NULL;
}

int main(void)
{
    CHECK_RESULT(pcclInit(), pcclSuccess);
    pcclCommCreateParams_t params = bad_address();
    pcclComm_t *c = NULL;

    /* Without a URL, the address must be valid; with one, it is not read. */
    CHECK_RESULT(pcclCreateCommunicator(&params, &c), pcclInvalidArgument);
    CHECK_RESULT(pcclCreateCommunicatorEx(&params, NULL, &c), pcclInvalidArgument);
    pcclCommCreateOptions_t o = PCCL_COMM_CREATE_OPTIONS_INIT;
    o.master_url = "tcp://127.0.0.1:1";
    CHECK_RESULT(pcclCreateCommunicatorEx(&params, &o, &c), pcclSuccess);
    destroy(&c);
    CHECK_RESULT(pcclCreateCommunicatorEx(NULL, &o, &c), pcclInvalidArgument);
    CHECK_RESULT(pcclCreateCommunicatorEx(&params, &o, NULL), pcclInvalidArgument);

    /* struct_size: too small, larger than this library's; reserved; URL length. */
    o.struct_size = 0;
    CHECK_RESULT(pcclCreateCommunicatorEx(&params, &o, &c), pcclInvalidArgument);
    o.struct_size = 12;
    CHECK_RESULT(pcclCreateCommunicatorEx(&params, &o, &c), pcclInvalidArgument);
    o.struct_size = (uint32_t)sizeof o + 8u;
    CHECK_RESULT(pcclCreateCommunicatorEx(&params, &o, &c), pcclInvalidArgument);
    o.struct_size = (uint32_t)sizeof o;
    o.reserved = 1;
    CHECK_RESULT(pcclCreateCommunicatorEx(&params, &o, &c), pcclInvalidArgument);
    o.reserved = 0;
    char long_url[300];
    memset(long_url, 'a', sizeof long_url - 1);
    long_url[sizeof long_url - 1] = '\0';
    o.master_url = long_url;
    CHECK_RESULT(pcclCreateCommunicatorEx(&params, &o, &c), pcclInvalidArgument);
    /* A struct of the first version's 16 bytes (no master_url field): the address is used. */
    o.master_url = "tcp://127.0.0.1:1";
    o.struct_size = 16;
    CHECK_RESULT(pcclCreateCommunicatorEx(&params, &o, &c), pcclInvalidArgument);
    o.struct_size = (uint32_t)sizeof o;
    /* ring_key (added later): any value; a struct of the version before it (24 bytes) is fine;
     * reserved2 must be 0. */
    o.ring_key = 7;
    CHECK_RESULT(pcclCreateCommunicatorEx(&params, &o, &c), pcclSuccess);
    destroy(&c);
    o.struct_size = (uint32_t)offsetof(pcclCommCreateOptions_t, ring_key);
    CHECK_RESULT(pcclCreateCommunicatorEx(&params, &o, &c), pcclSuccess);
    destroy(&c);
    o.struct_size = (uint32_t)sizeof o;
    o.reserved2 = 1;
    CHECK_RESULT(pcclCreateCommunicatorEx(&params, &o, &c), pcclInvalidArgument);
    o.reserved2 = 0;
    o.ring_key = 0;

    /* Any pool size is accepted (clamped to 8 connections). */
    params.p2p_connection_pool_size = 0xFFFFFFFFu;
    CHECK_RESULT(pcclCreateCommunicatorEx(&params, &o, &c), pcclSuccess);
    destroy(&c);

    /* The environment: a bad number is refused, with a log line. */
    setenv("PCCL_TIMEOUT_MS", "12x", 1);
    CHECK_RESULT(pcclCreateCommunicatorEx(&params, &o, &c), pcclInvalidArgument);
    setenv("PCCL_TIMEOUT_MS", "99999999999", 1);
    CHECK_RESULT(pcclCreateCommunicatorEx(&params, &o, &c), pcclInvalidArgument);
    unsetenv("PCCL_TIMEOUT_MS");
    /* TorchComms' TORCHCOMM_TIMEOUT_SECONDS (seconds) when PCCL_TIMEOUT_MS is unset. */
    setenv("TORCHCOMM_TIMEOUT_SECONDS", "1.5s", 1);
    CHECK_RESULT(pcclCreateCommunicatorEx(&params, &o, &c), pcclInvalidArgument);
    setenv("TORCHCOMM_TIMEOUT_SECONDS", "-1", 1);
    CHECK_RESULT(pcclCreateCommunicatorEx(&params, &o, &c), pcclInvalidArgument);
    setenv("TORCHCOMM_TIMEOUT_SECONDS", "1.5", 1);
    CHECK_RESULT(pcclCreateCommunicatorEx(&params, &o, &c), pcclSuccess);
    destroy(&c);
    setenv("PCCL_TIMEOUT_MS", "2000", 1); /* PCCL_TIMEOUT_MS wins: the bad one is not read */
    setenv("TORCHCOMM_TIMEOUT_SECONDS", "bad", 1);
    CHECK_RESULT(pcclCreateCommunicatorEx(&params, &o, &c), pcclSuccess);
    destroy(&c);
    unsetenv("PCCL_TIMEOUT_MS");
    unsetenv("TORCHCOMM_TIMEOUT_SECONDS");
    setenv("PCCL_HEARTBEAT_MS", "-5", 1);
    CHECK_RESULT(pcclCreateCommunicatorEx(&params, &o, &c), pcclInvalidArgument);
    unsetenv("PCCL_HEARTBEAT_MS");

    /* PCCL_MASTER_URL lets a plain pcclCreateCommunicator program reach a master that its
     * (here invalid) address does not name: it connects and is admitted alone. */
    pcclMasterCreateParams_t mp;
    memset(&mp, 0, sizeof mp);
    mp.listen_url = "tcp://127.0.0.1:0";
    pcclMasterInstance_t *m = NULL;
    uint16_t port = 0;
    CHECK_RESULT(pcclCreateMasterEx(&mp, &m, &port), pcclSuccess);
    if (m == NULL) return 1;
    CHECK_RESULT(pcclRunMaster(m), pcclSuccess);
    char url[64];
    snprintf(url, sizeof url, "tcp://127.0.0.1:%u", (unsigned)port);
    setenv("PCCL_MASTER_URL", url, 1);
    setenv("PCCL_TIMEOUT_MS", "10000", 1);
    params = bad_address();
    CHECK_RESULT(pcclCreateCommunicator(&params, &c), pcclSuccess);
    if (c != NULL) {
        CHECK_RESULT(pcclConnect(c), pcclSuccess);
        int ws = 0;
        CHECK_RESULT(pcclGetAttribute(c, PCCL_ATTRIBUTE_GLOBAL_WORLD_SIZE, &ws), pcclSuccess);
        if (ws != 1) {
            fprintf(stderr, "comm_options: FAILED: world size %d, expected 1\n", ws);
            g_failed++;
        }
        collective_options(c);
        destroy(&c);
    }
    /* An option the caller sets wins over the environment: this URL has no master. */
    o.master_url = "tcp://127.0.0.1:1";
    o.timeout_ms = 3000;
    CHECK_RESULT(pcclCreateCommunicatorEx(&params, &o, &c), pcclSuccess);
    if (c != NULL) {
        CHECK_RESULT(pcclConnect(c), pcclMasterConnectionFailed);
        destroy(&c);
    }
    unsetenv("PCCL_MASTER_URL");
    unsetenv("PCCL_TIMEOUT_MS");
    CHECK_RESULT(pcclInterruptMaster(m), pcclSuccess);
    CHECK_RESULT(pcclMasterAwaitTermination(m), pcclSuccess);
    CHECK_RESULT(pcclDestroyMaster(m), pcclSuccess);

    if (g_failed != 0) {
        fprintf(stderr, "comm_options: %d check(s) failed\n", g_failed);
        return 1;
    }
    printf("comm_options: ok\n");
    return 0;
}
