/*
 * pccl-tune: tunes a group's algorithm table (pcclTune, docs/algorithms.md) — the all-reduce's,
 * or the kinds --kinds names — and writes it to a file that pcclTuneLoad (or pccl-tune --load)
 * installs without retuning.
 *
 *   pccl-tune --local N [--out FILE] [options]       a master here and N peer processes
 *   pccl-tune --master URL --world N [--out FILE] [--load FILE] [options]   one member
 * options: --min BYTES --max BYTES --iters K --warmup W
 *          --kinds all|KIND[,KIND...] (all_reduce, broadcast, reduce, all_gather, reduce_scatter,
 *          all_to_all, gather, scatter, barrier; default all_reduce)
 *
 * Every member prints "pccl-tune: rank R/N table <hash>" (the same hash everywhere: one
 * table); rank 0 prints the table and writes FILE.
 */
#define _POSIX_C_SOURCE 200809L
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pccl.h"

extern char **environ;

static void usage(FILE *f)
{
    fprintf(f, "usage: pccl-tune --local N [--out FILE] [--min B] [--max B] [--iters K] "
               "[--warmup W] [--kinds all|KIND,...]\n"
               "       pccl-tune --master URL --world N [--out FILE] [--load FILE] [--min B] "
               "[--max B] [--iters K] [--warmup W] [--kinds all|KIND,...]\n"
               "kinds: all_reduce broadcast reduce all_gather reduce_scatter all_to_all gather "
               "scatter barrier\n");
}

/* --kinds: "all" or a comma-separated list of kind names; 0 on an unknown name. */
static uint32_t parse_kinds(const char *s)
{
    static const char *const names[] = {"all_reduce", "broadcast",      "reduce",
                                        "all_gather", "reduce_scatter", "all_to_all",
                                        "gather",     "scatter",        "barrier"};
    if (strcmp(s, "all") == 0) return PCCL_TUNE_ALL_KINDS;
    uint32_t kinds = 0;
    while (*s != '\0') {
        const char *e = strchr(s, ',');
        const size_t n = e != NULL ? (size_t)(e - s) : strlen(s);
        uint32_t bit = 0;
        for (uint32_t k = 0; k < sizeof names / sizeof names[0]; k++)
            if (strlen(names[k]) == n && strncmp(s, names[k], n) == 0) bit = 1u << k;
        if (bit == 0) return 0;
        kinds |= bit;
        s += n + (e != NULL ? 1u : 0u);
    }
    return kinds;
}

static int fail(const char *what, pcclResult_t r)
{
    fprintf(stderr, "pccl-tune: %s failed: %d\n", what, (int)r);
    return 1;
}

/* FNV-1a of the file's bytes: members compare tables by it. */
static uint64_t file_hash(const char *path)
{
    uint64_t h = 1469598103934665603ull;
    FILE *f = fopen(path, "rb");
    if (f == NULL) return 0;
    int c;
    while ((c = fgetc(f)) != EOF) {
        h ^= (uint64_t)(unsigned char)c;
        h *= 1099511628211ull;
    }
    fclose(f);
    return h;
}

static int member(const char *url, int want, const char *out, const char *load,
                  const pcclTuneOptions_t *to)
{
    pcclResult_t r = pcclInit();
    if (r != pcclSuccess) return fail("pcclInit", r);
    pcclCommCreateParams_t params = {0};
    pcclCommCreateOptions_t opts = PCCL_COMM_CREATE_OPTIONS_INIT;
    opts.master_url = url;
    pcclComm_t *comm = NULL;
    if ((r = pcclCreateCommunicatorEx(&params, &opts, &comm)) != pcclSuccess)
        return fail("pcclCreateCommunicatorEx", r);
    for (int i = 0; (r = pcclConnect(comm)) != pcclSuccess; i++) {
        if (i == 50) return fail("pcclConnect", r);
        nanosleep(&(struct timespec){0, 100000000L}, NULL);
    }
    for (int attempt = 0;; attempt++) {
        int world = 0, rank = -1;
        pcclGetAttribute(comm, PCCL_ATTRIBUTE_PEER_GROUP_WORLD_SIZE, &world);
        pcclGetAttribute(comm, PCCL_ATTRIBUTE_RANK, &rank);
        if (world < want || rank < 0) {
            r = pcclUpdateTopology(comm); /* admits the members still joining */
            if (r != pcclSuccess && r != pcclUpdateTopologyFailed)
                return fail("pcclUpdateTopology", r);
            nanosleep(&(struct timespec){0, 10000000L}, NULL);
            continue;
        }
        r = load != NULL ? pcclTuneLoad(comm, load) : pcclTune(comm, to);
        if (r == pcclSuccess) break;
        if (attempt > 5 || r == pcclInvalidArgument || r == pcclInvalidUsage)
            return fail(load != NULL ? "pcclTuneLoad" : "pcclTune", r);
        pcclUpdateTopology(comm); /* a member was lost: again in the new epoch */
    }
    int rank = -1, world = 0;
    pcclGetAttribute(comm, PCCL_ATTRIBUTE_RANK, &rank);
    pcclGetAttribute(comm, PCCL_ATTRIBUTE_PEER_GROUP_WORLD_SIZE, &world);
    char mine[64];
    snprintf(mine, sizeof mine, "/tmp/pccl-tune.%ld.txt", (long)getpid());
    if ((r = pcclTuneSave(comm, mine)) != pcclSuccess) return fail("pcclTuneSave", r);
    printf("pccl-tune: rank %d/%d table %016llx\n", rank, world,
           (unsigned long long)file_hash(mine));
    if (rank == 0) {
        FILE *f = fopen(mine, "r");
        int c;
        while (f != NULL && (c = fgetc(f)) != EOF)
            putchar(c);
        if (f != NULL) fclose(f);
        if (out != NULL && (r = pcclTuneSave(comm, out)) != pcclSuccess)
            return fail("pcclTuneSave", r);
    }
    fflush(stdout);
    remove(mine);
    /* Leave together: a member leaving early re-wires the others' group under them. */
    pcclBarrier(NULL, comm, NULL);
    pcclDestroyCommunicator(comm);
    return 0;
}

/* --local N: a master in this process, N members as child processes of this program. */
static int local_run(int n, char **argv_rest, int nrest)
{
    pcclMasterCreateParams_t mp = {0};
    mp.listen_url = "tcp://127.0.0.1:0";
    pcclMasterInstance_t *m = NULL;
    uint16_t port = 0;
    pcclResult_t r = pcclCreateMasterEx(&mp, &m, &port);
    if (r != pcclSuccess) return fail("pcclCreateMasterEx", r);
    if ((r = pcclRunMaster(m)) != pcclSuccess) return fail("pcclRunMaster", r);
    char url[64], world[16], opt_master[] = "--master", opt_world[] = "--world";
    snprintf(url, sizeof url, "tcp://127.0.0.1:%u", (unsigned)port);
    snprintf(world, sizeof world, "%d", n);
    char self[4096];
    const ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1u);
    if (len <= 0) return fail("readlink /proc/self/exe", pcclSystemError);
    self[len] = '\0';
    pid_t *kids = calloc((size_t)n, sizeof *kids);
    char **args = calloc((size_t)nrest + 6u, sizeof *args);
    if (kids == NULL || args == NULL) return fail("calloc", pcclSystemError);
    args[0] = self;
    args[1] = opt_master;
    args[2] = url;
    args[3] = opt_world;
    args[4] = world;
    for (int i = 0; i < nrest; i++)
        args[5 + i] = argv_rest[i];
    int bad = 0;
    for (int i = 0; i < n; i++) {
        if (posix_spawn(&kids[i], self, NULL, NULL, args, environ) != 0) kids[i] = 0;
        if (kids[i] == 0) bad = 1;
    }
    for (int i = 0; i < n; i++) {
        int st = 0;
        if (kids[i] != 0 &&
            (waitpid(kids[i], &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)) {
            bad = 1;
        }
    }
    free(kids);
    free(args);
    pcclInterruptMaster(m);
    pcclMasterAwaitTermination(m);
    pcclDestroyMaster(m);
    return bad;
}

static int parse_u64(const char *s, uint64_t *out)
{
    char *end = NULL;
    const unsigned long long v = strtoull(s, &end, 10);
    if (s[0] == '\0' || s[0] == '-' || *end != '\0') return -1;
    *out = v;
    return 0;
}

int main(int argc, char **argv)
{
    const char *url = NULL, *out = NULL, *load = NULL;
    uint64_t local = 0, world = 0, v = 0;
    pcclTuneOptions_t to = PCCL_TUNE_OPTIONS_INIT;
    char *rest[12];
    int nrest = 0;
    for (int i = 1; i < argc; i += 2) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            return 0;
        }
        if (val == NULL) {
            usage(stderr);
            return 2;
        }
        int ok = 1;
        if (strcmp(a, "--master") == 0) {
            url = val;
        } else if (strcmp(a, "--local") == 0) {
            ok = parse_u64(val, &local) == 0 && local >= 2 && local <= 8;
        } else if (strcmp(a, "--world") == 0) {
            ok = parse_u64(val, &world) == 0 && world >= 2 && world <= 8;
        } else if (strcmp(a, "--out") == 0) {
            out = val;
        } else if (strcmp(a, "--load") == 0) {
            load = val;
        } else if (strcmp(a, "--min") == 0 && parse_u64(val, &v) == 0) {
            to.min_bytes = v;
        } else if (strcmp(a, "--max") == 0 && parse_u64(val, &v) == 0) {
            to.max_bytes = v;
        } else if (strcmp(a, "--iters") == 0 && parse_u64(val, &v) == 0 && v <= 1000) {
            to.iterations = (uint32_t)v;
        } else if (strcmp(a, "--warmup") == 0 && parse_u64(val, &v) == 0 && v <= 1000) {
            to.warmup = (uint32_t)v;
        } else if (strcmp(a, "--kinds") == 0) {
            to.kinds = parse_kinds(val);
            ok = to.kinds != 0;
        } else {
            ok = 0;
        }
        if (!ok) {
            fprintf(stderr, "pccl-tune: bad option %s %s\n", a, val);
            usage(stderr);
            return 2;
        }
        if (strcmp(a, "--local") != 0 && nrest + 2 <= (int)(sizeof rest / sizeof rest[0])) {
            rest[nrest++] = argv[i];
            rest[nrest++] = argv[i + 1];
        }
    }
    if (local > 0) return local_run((int)local, rest, nrest);
    if (url == NULL || world == 0) {
        usage(stderr);
        return 2;
    }
    return member(url, (int)world, out, load, &to);
}
