/*
 * pccl_wan_churn.c — one peer of the churn-at-distance scenario (issue 23,
 * scripts/bench-wan-churn.sh, docs/wan.md "Churn at distance"). Every peer of
 * the group runs it, peer i in the testbed's namespace p<i>.
 *
 *   pccl_wan_churn --url URL --index I --world N --victim V [--bytes B]
 *       [--pool P] [--after A] [--max-ops M] [--timeout-ms T]
 *
 * The peers connect, wait until the group has N members and run all-reduces
 * of B bytes (uint32 SUM, out of place) one after the other, op k on tag k.
 * Peer i contributes 2^i * (1 + j mod 251) at element j, so the result tells
 * exactly which peers took part: element j must be mask * (1 + j mod 251),
 * mask being the bits of the members (all N when the op reports world N, all
 * but the victim when it reports N − 1). The input is filled once (a real
 * step has its gradients ready; filling 64 MiB per op would take the CPU the
 * recovery needs); the output is poisoned before every op, so no earlier
 * op's result can pass for it.
 * The driver kills (SIGKILL) or stops (SIGSTOP) peer V while an op is in
 * flight. A survivor's op then fails (pcclRankConnectionLost, or
 * pcclUpdateTopologyFailed for an op that overlapped the epoch change: the
 * documented retryable results, docs/semantics.md §5); it calls
 * pcclUpdateTopology until its group is the N − 1 survivors, runs the next
 * op (retried on those two results, counted), checks it exactly and runs A
 * more checked ops. The victim runs ops until it is killed
 * (at most M).
 *
 * Lines on stdout (line-buffered), times in CLOCK_REALTIME nanoseconds (one
 * clock for every namespace of the host, and the driver's `date +%s%N`); an
 * op's time is taken as its await returns, before it is checked:
 *   READY <index> <t>                         the group has N members
 *   START <k> <t>                             op k is in flight (after the async start)
 *   DONE <k> <t> <dur_us> <world>             op k succeeded and was checked
 *   FAIL <k> <t> <result>                     op k failed with a retryable result
 *   SURVIVORS <t> <world> <updates>           pcclUpdateTopology left N − 1 members
 *   NEXT <k> <t> <dur_us> <world> <retries> <fnv64>   the next op after the failure
 *                                             succeeded, checked; fnv64: FNV-1a of its result
 *                                             (without a FAIL before it when the victim
 *                                             died between two ops)
 *   END <index>                               after the A more ops and a barrier
 * A wrong element, another result or a bound exceeded: a message on stderr
 * and exit 1 (setup: 2).
 */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pccl.h"
#include "pccl_bench_peer.h"

#define MAX_WORLD   16u  /* 2^15 * 251 * 2 fits in uint32 */
#define MAX_UPDATES 100u /* pcclUpdateTopology calls to reach the survivors' group */
#define MAX_RETRIES 10u  /* attempts of the next op after the failure */

typedef struct options {
    const char *url;
    uint32_t index, world, victim, pool, after, max_ops, timeout_ms;
    uint64_t bytes;
} options;

static int64_t now_real_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static bool parse_args(int argc, char **argv, options *o)
{
    memset(o, 0, sizeof *o);
    o->victim = UINT32_MAX;
    o->bytes = 1u << 20;
    o->after = 2;
    o->max_ops = 1000;
    o->timeout_ms = 120000;
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *a = argv[i], *v = argv[i + 1];
        const uint32_t u = (uint32_t)strtoul(v, NULL, 10);
        if (strcmp(a, "--url") == 0) {
            o->url = v;
        } else if (strcmp(a, "--index") == 0) {
            o->index = u;
        } else if (strcmp(a, "--world") == 0) {
            o->world = u;
        } else if (strcmp(a, "--victim") == 0) {
            o->victim = u;
        } else if (strcmp(a, "--bytes") == 0) {
            if (!pccl_bench_parse_bytes(v, &o->bytes)) return false;
        } else if (strcmp(a, "--pool") == 0) {
            o->pool = u;
        } else if (strcmp(a, "--after") == 0) {
            o->after = u;
        } else if (strcmp(a, "--max-ops") == 0) {
            o->max_ops = u;
        } else if (strcmp(a, "--timeout-ms") == 0) {
            o->timeout_ms = u;
        } else {
            return false;
        }
    }
    return argc % 2 == 1 && o->url != NULL && o->world >= 3 && o->world <= MAX_WORLD &&
           o->index < o->world && o->victim < o->world && o->bytes >= 4u && o->bytes % 4u == 0 &&
           o->max_ops >= 1;
}

static uint32_t pattern(uint64_t j)
{
    return 1u + (uint32_t)(j % 251u);
}

static void fill(uint32_t *send, uint64_t count, uint32_t index)
{
    for (uint64_t j = 0; j < count; j++)
        send[j] = (1u << index) * pattern(j);
}

/* Checks op k's result against the members' mask; 0 or 1. */
static int verify(const uint32_t *out, uint64_t count, uint32_t mask, uint64_t k, uint32_t index)
{
    for (uint64_t j = 0; j < count; j++) {
        const uint32_t want = mask * pattern(j);
        if (out[j] != want) {
            fprintf(stderr,
                    "pccl_wan_churn %u: WRONG RESULT of op %" PRIu64 " at element %" PRIu64
                    ": %" PRIu32 ", want %" PRIu32 " (members 0x%" PRIx32 ")\n",
                    index, k, j, out[j], want, mask);
            return 1;
        }
    }
    return 0;
}

static uint64_t fnv1a64(const void *p, uint64_t n)
{
    const unsigned char *b = p;
    uint64_t h = 0xcbf29ce484222325u;
    for (uint64_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 0x100000001b3u;
    }
    return h;
}

static bool retryable(pcclResult_t r)
{
    return r == pcclRankConnectionLost || r == pcclUpdateTopologyFailed;
}

/* What a finished op reports: its world, its duration and when it returned (CLOCK_REALTIME). */
typedef struct op_end {
    uint32_t world;
    double dur_us;
    int64_t t_ns;
} op_end;

/* Runs op k (tag k): poison the output, start, mark, await. Returns the result; *end tells
 * when it returned (taken before any check, so checking is not counted). */
static pcclResult_t run_op(pcclComm_t *comm, const options *o, uint64_t k, const uint32_t *send,
                           uint32_t *recv, op_end *end)
{
    const uint64_t count = o->bytes / 4u;
    memset(recv, 0xa5, (size_t)o->bytes);
    pcclReduceDescriptor_t d;
    memset(&d, 0, sizeof d);
    d.count = (size_t)count;
    d.op = pcclSum;
    d.tag = k;
    d.src_descriptor.datatype = pcclUint32;
    d.src_descriptor.distribution_hint = pcclDistributionNone;
    d.quantization_options.algorithm = pcclQuantNone;
    const double t0 = pccl_bench_now_us();
    pcclAsyncReduceOp_t h;
    pcclResult_t r = pcclAllReduceAsync(send, recv, &d, comm, &h);
    if (r != pcclSuccess) return r;
    printf("START %" PRIu64 " %" PRId64 "\n", k, now_real_ns());
    pcclReduceInfo_t info;
    memset(&info, 0, sizeof info);
    r = pcclAwaitAsyncReduce(&h, &info);
    end->t_ns = now_real_ns();
    end->dur_us = pccl_bench_now_us() - t0;
    end->world = info.local_world_size;
    return r;
}

/* The members' mask for an op that reports `world` members; 0 for an impossible world. */
static uint32_t members_mask(const options *o, uint32_t world)
{
    const uint32_t all = (1u << o->world) - 1u;
    if (world == o->world) return all;
    if (world == o->world - 1u) return all & ~(1u << o->victim);
    return 0;
}

/* pcclUpdateTopology until the group has world − 1 members; 0 or 1. */
static int reach_survivors(pcclComm_t *comm, const options *o)
{
    for (uint32_t n = 1; n <= MAX_UPDATES; n++) {
        const pcclResult_t r = pcclUpdateTopology(comm);
        if (r != pcclSuccess && r != pcclUpdateTopologyFailed) {
            fprintf(stderr, "pccl_wan_churn %u: update topology: %d\n", o->index, (int)r);
            return 1;
        }
        int ws = 0;
        if (pcclGetAttribute(comm, PCCL_ATTRIBUTE_PEER_GROUP_WORLD_SIZE, &ws) != pcclSuccess)
            return 1;
        if (r == pcclSuccess && (uint32_t)ws == o->world - 1u) {
            printf("SURVIVORS %" PRId64 " %d %u\n", now_real_ns(), ws, n);
            return 0;
        }
    }
    fprintf(stderr, "pccl_wan_churn %u: the group did not shrink to %u in %u updates\n", o->index,
            o->world - 1u, MAX_UPDATES);
    return 1;
}

/* The A checked ops after the next op, all on the survivors; 0 or 1. */
static int after_ops(pcclComm_t *comm, const options *o, uint64_t *k, const uint32_t *send,
                     uint32_t *recv)
{
    for (uint32_t a = 0; a < o->after; a++) {
        op_end e = {0, 0, 0};
        const uint64_t op = (*k)++;
        const pcclResult_t r = run_op(comm, o, op, send, recv, &e);
        if (r != pcclSuccess || e.world != o->world - 1u) {
            fprintf(stderr, "pccl_wan_churn %u: op %" PRIu64 " after recovery: %d (world %u)\n",
                    o->index, op, (int)r, e.world);
            return 1;
        }
        if (verify(recv, o->bytes / 4u, members_mask(o, e.world), op, o->index) != 0) return 1;
        printf("DONE %" PRIu64 " %" PRId64 " %.0f %u\n", op, e.t_ns, e.dur_us, e.world);
    }
    return 0;
}

/* The next op succeeded on the survivors: check it, print NEXT. 0 or 1. */
static int next_done(const options *o, uint64_t op, const op_end *e, uint32_t retries,
                     const uint32_t *recv)
{
    if (e->world != o->world - 1u) {
        fprintf(stderr, "pccl_wan_churn %u: next op %" PRIu64 " had world %u, want %u\n", o->index,
                op, e->world, o->world - 1u);
        return 1;
    }
    if (verify(recv, o->bytes / 4u, members_mask(o, e->world), op, o->index) != 0) return 1;
    printf("NEXT %" PRIu64 " %" PRId64 " %.0f %u %u %016" PRIx64 "\n", op, e->t_ns, e->dur_us,
           e->world, retries, fnv1a64(recv, o->bytes));
    return 0;
}

/* A survivor after its failed op: shrink, then the next op (retried), then `after` more. */
static int recover(pcclComm_t *comm, const options *o, uint64_t *k, const uint32_t *send,
                   uint32_t *recv)
{
    for (uint32_t retries = 0;; retries++) {
        const uint64_t op = (*k)++;
        if (reach_survivors(comm, o) != 0) return 1;
        op_end e = {0, 0, 0};
        const pcclResult_t r = run_op(comm, o, op, send, recv, &e);
        if (r == pcclSuccess) {
            if (next_done(o, op, &e, retries, recv) != 0) return 1;
            break;
        }
        if (!retryable(r) || retries + 1u >= MAX_RETRIES) {
            fprintf(stderr, "pccl_wan_churn %u: next op %" PRIu64 ": %d after %u retries\n",
                    o->index, op, (int)r, retries);
            return 1;
        }
        printf("FAIL %" PRIu64 " %" PRId64 " %d\n", op, e.t_ns, (int)r);
    }
    return after_ops(comm, o, k, send, recv);
}

static int run(pcclComm_t *comm, const options *o, const uint32_t *send, uint32_t *recv)
{
    uint64_t k = 1;
    for (uint32_t n = 0; n < o->max_ops; n++) {
        op_end e = {0, 0, 0};
        const uint64_t op = k++;
        const pcclResult_t r = run_op(comm, o, op, send, recv, &e);
        if (r == pcclSuccess && e.world == o->world) {
            if (verify(recv, o->bytes / 4u, members_mask(o, e.world), op, o->index) != 0) return 1;
            printf("DONE %" PRIu64 " %" PRId64 " %.0f %u\n", op, e.t_ns, e.dur_us, e.world);
            continue;
        }
        if (r == pcclSuccess && o->index != o->victim) {
            /* The victim died between two ops: this one already ran on the survivors. */
            if (next_done(o, op, &e, 0, recv) != 0) return 1;
            return after_ops(comm, o, &k, send, recv);
        }
        if (o->index == o->victim || !retryable(r)) {
            fprintf(stderr, "pccl_wan_churn %u: op %" PRIu64 ": %d (world %u)\n", o->index, op,
                    (int)r, e.world);
            return 1;
        }
        printf("FAIL %" PRIu64 " %" PRId64 " %d\n", op, e.t_ns, (int)r);
        return recover(comm, o, &k, send, recv);
    }
    fprintf(stderr, "pccl_wan_churn %u: %u ops and no failure\n", o->index, o->max_ops);
    return 1;
}

int main(int argc, char **argv)
{
    options o;
    if (!parse_args(argc, argv, &o)) {
        fprintf(stderr, "usage: pccl_wan_churn --url URL --index I --world N(3..16) --victim V\n"
                        "  [--bytes B] [--pool P] [--after A] [--max-ops M] [--timeout-ms T]\n");
        return 2;
    }
    uint32_t *send = malloc((size_t)o.bytes);
    uint32_t *recv = malloc((size_t)o.bytes);
    if (send == NULL || recv == NULL) return 2;
    fill(send, o.bytes / 4u, o.index);
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (pcclInit() != pcclSuccess) return 2;
    pcclComm_t *comm = NULL;
    int rc = pccl_bench_connect("pccl_wan_churn", o.index, o.url, o.pool, o.timeout_ms, &comm);
    if (rc == 0) rc = pccl_bench_wait_for_world("pccl_wan_churn", comm, o.index, o.world, 60000);
    if (rc == 0) printf("READY %u %" PRId64 "\n", o.index, now_real_ns());
    if (rc == 0) rc = run(comm, &o, send, recv);
    /* The survivors leave together, so none finds a smaller group on its last op. */
    if (rc == 0 && pcclBarrier(NULL, comm, NULL) != pcclSuccess) rc = 1;
    if (rc == 0) printf("END %u\n", o.index);
    if (comm != NULL && pcclDestroyCommunicator(comm) != pcclSuccess && rc == 0) rc = 1;
    free(send);
    free(recv);
    return rc;
}
