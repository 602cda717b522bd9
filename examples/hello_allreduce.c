/*
 * hello_allreduce.c — a minimal pccl peer in C: connect to a master, admit
 * newcomers, and all-reduce a small int32 vector a few times, retrying when
 * a peer is lost.
 *
 *   ccoip_master --port 48148 &
 *   hello_allreduce tcp://127.0.0.1:48148 & hello_allreduce tcp://127.0.0.1:48148
 */
#include <stdio.h>
#include <stdlib.h>

#include "pccl.h"

#define CHECK(stmt)                                                                                \
    do {                                                                                           \
        pcclResult_t r_ = (stmt);                                                                  \
        if (r_ != pcclSuccess) {                                                                   \
            fprintf(stderr, "%s failed: %d\n", #stmt, (int)r_);                                    \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

int main(int argc, char **argv)
{
    const char *url = argc > 1 ? argv[1] : "tcp://127.0.0.1:48148";
    CHECK(pcclInit());
    pcclCommCreateParams_t params = {0};
    pcclCommCreateOptions_t opts = PCCL_COMM_CREATE_OPTIONS_INIT;
    opts.master_url = url;
    pcclComm_t *comm = NULL;
    CHECK(pcclCreateCommunicatorEx(&params, &opts, &comm));
    CHECK(pcclConnect(comm));
    for (int step = 0; step < 5; step++) {
        while (pcclUpdateTopology(comm) == pcclUpdateTopologyFailed) {
        }
        int world = 0;
        CHECK(pcclGetAttribute(comm, PCCL_ATTRIBUTE_CURRENT_WORLD_SIZE, &world));
        if (world < 2) {
            step--;
            continue;
        }
        int32_t data[4] = {1, 2, 3, step};
        int32_t out[4] = {0};
        pcclReduceDescriptor_t desc = {0};
        desc.count = 4;
        desc.op = pcclSum;
        desc.tag = 0;
        desc.src_descriptor.datatype = pcclInt32;
        pcclReduceInfo_t info = {0};
        const pcclResult_t r = pcclAllReduce(data, out, &desc, comm, &info);
        if (r == pcclSuccess) {
            printf("step %d world %u: [%d %d %d %d]\n", step, info.local_world_size, out[0], out[1],
                   out[2], out[3]);
        } else {
            printf("step %d: all-reduce failed (%d), retrying\n", step, (int)r);
        }
    }
    CHECK(pcclDestroyCommunicator(comm));
    return 0;
}
