/*
 * main.c — pccl-sim, the simulator's command line (the only file of sim/
 * that does I/O).
 *
 *   pccl-sim [--seed N] [--swarm] [--scenario NAME] [--canary NAME] [--trace]
 *            [--peers N] [--max-peers N] [--steps N] [--churn-ms T]
 *            [--join-rate R] [--leave-rate R] [--crash-rate R] [--hang-rate R]
 *            [--restart-rate R] [--loss PERMILLE] [--partitions N] [--clogs N]
 *            [--count N] [--tags N] [--pool N] [--reverse-tags] [--not-in-place]
 *            [--seeds A:B] [--quiet]
 *            [--groups N | --group-size N] [--churn-per-step BP] [--float]
 *            [--vote-timeout-ms T] [--evict-ms T] [--heartbeat-ms T] [--liveness-ms T]
 *            [--relay-max-bytes N] (master relay, docs/protocol.md §6.8.2; 0 off)
 *            [--no-inbound MASK] (peer hosts behind NAT: bit k, the k-th peer host)
 *            [--algo auto|relay|direct|ring|ring_striped|halving_doubling] (forced; the swarm draws
 * it)
 *            [--max-events N]
 *            [--kind NAME|mix|p2p|swarm] [--op-timeout-ms T] (the collective set)
 *            [--record-trace DIR]
 *   pccl-sim --replay FILE
 *
 * --record-trace writes one trace per state machine of the run
 * (DIR/node-<index>-<master|peer>.trace, core/ccoip_trace.h); --replay re-runs
 * the machine of one trace and checks its state hash (exit 0 match, 3
 * mismatch, 65 malformed trace). --churn-per-step is in basis points: 100 =
 * 1 % of peers replaced per training step.
 * Rates are mean events per simulated minute during the churn phase.
 * Exit codes: 0 ok, 1 crash, 2 liveness, 3 correctness, 64 usage,
 * 69 no state machines in this build.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ccoip_algo.h"
#include "sim.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#define EXIT_USAGE       64
#define EXIT_DATAERR     65
#define EXIT_UNAVAILABLE 69

typedef struct cli {
    sim_config cfg;
    bool swarm;
    const char *scenario;
    const char *canary;
    bool quiet;
    bool sweep;
    uint64_t seed_from, seed_to;
    /* knobs set explicitly (applied on top of swarm/scenario) */
    char overrides[1024];
    uint32_t groups;
    const char *record_dir;
    const char *replay;
    bool kind_swarm; /* --kind swarm: kind (send / recv too), op timeout, relay bound per seed */
    const char *algo_name; /* --algo NAME: every all-reduce forces it (else the swarm draws) */
} cli;

static void record_sink(void *ctx, uint32_t node, bool is_master, const uint8_t *bytes,
                        uint64_t len)
{
    const cli *c = ctx;
    char path[4096];
    snprintf(path, sizeof path, "%s/node-%u-%s.trace", c->record_dir, node,
             is_master ? "master" : "peer");
    FILE *f = fopen(path, "wb");
    if (f == NULL || fwrite(bytes, 1, (size_t)len, f) != (size_t)len) {
        fprintf(stderr, "pccl-sim: cannot write %s\n", path);
    }
    if (f != NULL) fclose(f);
}

static int replay_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        fprintf(stderr, "pccl-sim: cannot open %s\n", path);
        return EXIT_USAGE;
    }
    uint8_t *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len == cap) {
            cap = cap == 0 ? 65536u : cap * 2u;
            uint8_t *x = realloc(buf, cap);
            if (x == NULL) {
                free(buf);
                fclose(f);
                return EXIT_USAGE;
            }
            buf = x;
        }
        const size_t n = fread(buf + len, 1, cap - len, f);
        if (n == 0) break;
        len += n;
    }
    fclose(f);
    sim_replay_result r;
    const sim_replay_status st = sim_replay(buf, len, &r);
    free(buf);
    printf("replay %s: %s seed=%" PRIu64 " events=%" PRIu64 " actions=%" PRIu64
           " state_hash=0x%016" PRIx64 " expected=0x%016" PRIx64 "\n",
           path, r.is_master ? "master" : "peer", r.seed, r.events, r.actions, r.state_hash,
           r.expected_hash);
    switch (st) {
    case SIM_REPLAY_MATCH:
        printf("replay: match\n");
        return 0;
    case SIM_REPLAY_NO_TRAILER:
        printf("replay: checkpoints match; %s (unverified end)\n", r.message);
        return 0;
    case SIM_REPLAY_MISMATCH:
        printf("replay: MISMATCH: %s\n", r.message);
        return 3;
    case SIM_REPLAY_DECODE:
        printf("replay: malformed trace: %s\n", r.message);
        return EXIT_DATAERR;
    case SIM_REPLAY_UNAVAILABLE:
        printf("replay: %s\n", r.message);
        return EXIT_UNAVAILABLE;
    }
    return 1;
}

static void log_line(void *ctx, const char *line)
{
    (void)ctx;
    fprintf(stdout, "%s\n", line);
}

static void usage(FILE *f)
{
    fprintf(f, "usage: pccl-sim [--seed N] [--swarm] [--scenario NAME] [--canary NAME] [--trace]\n"
               "                [--peers N] [--max-peers N] [--steps N] [--churn-ms T]\n"
               "                [--join-rate R] [--leave-rate R] [--crash-rate R] [--hang-rate R]\n"
               "                [--phase-fault-rate R]\n"
               "                [--restart-rate R] [--loss PERMILLE] [--partitions N] [--clogs N]\n"
               "                [--count N] [--tags N] [--pool N] [--reverse-tags]\n"
               "                [--not-in-place] [--seeds A:B] [--quiet]\n"
               "                [--shared-state] [--diverge-bp N] [--optimize-every N]\n"
               "                [--groups N | --group-size N] [--churn-per-step BP] [--float]\n"
               "                [--op N (pcclRedOp_t: 0 sum .. 4 min, 5 band, 6 bor, 7 bxor)]\n"
               "                [--vote-timeout-ms T] [--evict-ms T] [--heartbeat-ms T]\n"
               "                [--liveness-ms T] [--max-events N] [--relay-max-bytes N]\n"
               "                [--no-inbound MASK]\n"
               "                [--algo auto|relay|direct|ring|ring_striped|halving_doubling]\n"
               "                [--kind all-reduce|broadcast|reduce|all-gather|reduce-scatter|\n"
               "                        all-to-all|gather|scatter|barrier|mix|p2p|swarm]\n"
               "                [--op-timeout-ms T] [--record-trace DIR]\n"
               "       pccl-sim --replay FILE   (exit 0 match, 3 mismatch, 65 malformed)\n"
               "rates: mean events per simulated minute during the churn phase\n"
               "scenarios:");
    for (const char *const *s = sim_scenario_names; *s != NULL; s++)
        fprintf(f, " %s", *s);
    fprintf(f, "\ncanaries: skip_restore skip_abort_verdict corrupt_reduce drop_restore_copy "
               "double_notify corrupt_adopt swap_probe corrupt_recv flip_verdict corrupt_relay "
               "short_p2p\n"
               "exit codes: 0 ok, 1 crash, 2 liveness, 3 correctness, 64 usage, 69 no state "
               "machines\n");
}

static bool parse_u64(const char *s, uint64_t *out)
{
    if (s == NULL || *s == '\0') return false;
    char *end = NULL;
    const unsigned long long v = strtoull(s, &end, 0);
    if (end == NULL || *end != '\0') return false;
    *out = (uint64_t)v;
    return true;
}

typedef struct knob {
    const char *flag;
    int kind; /* 0: u32, 1: u64, 2: ms -> ns */
    size_t offset;
} knob;

#define K32(f, m)                                                                                  \
    {                                                                                              \
        f, 0, offsetof(sim_config, m)                                                              \
    }
#define K64(f, m)                                                                                  \
    {                                                                                              \
        f, 1, offsetof(sim_config, m)                                                              \
    }
#define KMS(f, m)                                                                                  \
    {                                                                                              \
        f, 2, offsetof(sim_config, m)                                                              \
    }

static const knob knobs[] = {
    K32("--peers", peers),
    K32("--max-peers", max_peers),
    K32("--steps", steps),
    KMS("--churn-ms", churn_ns),
    K32("--join-rate", join_per_min),
    K32("--leave-rate", leave_per_min),
    K32("--crash-rate", crash_per_min),
    K32("--hang-rate", hang_per_min),
    K32("--phase-fault-rate", phase_fault_per_min),
    K32("--restart-rate", restart_per_min),
    K32("--loss", loss_permille),
    K32("--partitions", partitions),
    K32("--clogs", clogs),
    K64("--count", count),
    K32("--tags", tags),
    K32("--pool", p2p_pool_size),
    K32("--group-size", group_size),
    K32("--churn-per-step", churn_per_step_bp),
    K32("--diverge-bp", diverge_bp),
    K32("--optimize-every", optimize_every),
    K64("--max-events", max_events),
    K32("--vote-timeout-ms", vote_timeout_ms),
    K32("--evict-ms", evict_ms),
    K32("--heartbeat-ms", heartbeat_ms),
    K32("--relay-max-bytes", relay_max_bytes),
    K32("--no-inbound", no_inbound_hosts),
    K32("--auth", auth),
    K32("--op-timeout-ms", op_timeout_ms),
    KMS("--liveness-ms", liveness_bound_ns),
};

static void apply_knob(sim_config *cfg, const knob *k, uint64_t v)
{
    unsigned char *base = (unsigned char *)cfg + k->offset;
    if (k->kind == 0) {
        const uint32_t x = (uint32_t)v;
        memcpy(base, &x, sizeof x);
    } else {
        const uint64_t x = k->kind == 2 ? v * 1000000u : v;
        memcpy(base, &x, sizeof x);
    }
}

/* Parses argv; the explicit knobs are re-applied after swarm/scenario defaults. */
static int parse(cli *c, int argc, char **argv, uint64_t seed, bool apply)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        uint64_t n = 0;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            exit(0);
        } else if (strcmp(a, "--seed") == 0) {
            if (!parse_u64(v, &n)) return -1;
            c->cfg.seed = n;
            i++;
        } else if (strcmp(a, "--seeds") == 0) {
            const char *colon = v != NULL ? strchr(v, ':') : NULL;
            if (colon == NULL) return -1;
            char lo[32];
            const size_t len = (size_t)(colon - v);
            if (len == 0 || len >= sizeof lo) return -1;
            memcpy(lo, v, len);
            lo[len] = '\0';
            if (!parse_u64(lo, &c->seed_from) || !parse_u64(colon + 1, &c->seed_to)) return -1;
            c->sweep = true;
            i++;
        } else if (strcmp(a, "--swarm") == 0) {
            c->swarm = true;
        } else if (strcmp(a, "--algo") == 0) {
            if (v == NULL) return -1;
            c->algo_name = v;
            i++;
        } else if (strcmp(a, "--trace") == 0) {
            c->cfg.trace = true;
        } else if (strcmp(a, "--quiet") == 0) {
            c->quiet = true;
        } else if (strcmp(a, "--reverse-tags") == 0) {
            if (apply) c->cfg.reverse_tags = true;
        } else if (strcmp(a, "--not-in-place") == 0) {
            if (apply) c->cfg.in_place = false;
        } else if (strcmp(a, "--scenario") == 0) {
            if (v == NULL) return -1;
            c->scenario = v;
            i++;
        } else if (strcmp(a, "--shared-state") == 0) {
            if (apply) c->cfg.shared_state = true;
        } else if (strcmp(a, "--no-shared-state") == 0) {
            if (apply) c->cfg.shared_state = false;
        } else if (strcmp(a, "--float") == 0) {
            if (apply) c->cfg.dtype = pcclFloat;
        } else if (strcmp(a, "--op") == 0) {
            if (!parse_u64(v, &n) || n >= (uint64_t)PCCL_RED_OP_COUNT) return -1;
            if (apply) c->cfg.op = (pcclRedOp_t)n;
            i++;
        } else if (strcmp(a, "--kind") == 0) {
            uint32_t k = 0;
            if (v == NULL) return -1;
            if (strcmp(v, "swarm") == 0) {
                c->kind_swarm = true;
            } else if (!sim_kind_from_name(v, &k)) {
                return -1;
            } else if (apply) {
                c->cfg.coll_kind = k;
            }
            i++;
        } else if (strcmp(a, "--groups") == 0) {
            if (!parse_u64(v, &n) || n == 0 || n > UINT32_MAX) return -1;
            c->groups = (uint32_t)n;
            i++;
        } else if (strcmp(a, "--record-trace") == 0) {
            if (v == NULL) return -1;
            c->record_dir = v;
            i++;
        } else if (strcmp(a, "--replay") == 0) {
            if (v == NULL) return -1;
            c->replay = v;
            i++;
        } else if (strcmp(a, "--canary") == 0) {
            if (v == NULL || sim_canary_from_name(v) == 0) return -1;
            c->canary = v;
            i++;
        } else {
            const knob *k = NULL;
            for (size_t j = 0; j < sizeof knobs / sizeof knobs[0]; j++) {
                if (strcmp(a, knobs[j].flag) == 0) k = &knobs[j];
            }
            if (k == NULL || !parse_u64(v, &n)) return -1;
            if (apply) apply_knob(&c->cfg, k, n);
            i++;
        }
    }
    (void)seed;
    return 0;
}

/* Builds the configuration for one seed: swarm or scenario or defaults, then explicit knobs. */
static int build(cli *c, int argc, char **argv, uint64_t seed)
{
    const bool trace = c->cfg.trace;
    if (c->scenario != NULL) {
        c->cfg.seed = seed;
        if (!sim_config_scenario(&c->cfg, c->scenario)) return -1;
    } else if (c->swarm) {
        sim_config_swarm(&c->cfg, seed);
    } else {
        sim_config_default(&c->cfg, seed);
    }
    c->cfg.trace = trace;
    if (c->kind_swarm) {
        c->cfg.seed = seed;
        sim_config_swarm_kinds(&c->cfg);
    }
    if (parse(c, argc, argv, seed, true) != 0) return -1;
    sim_config_fit_op(&c->cfg);
    c->cfg.seed = seed;
    if (c->swarm && c->algo_name == NULL) sim_config_swarm_algo(&c->cfg);
    if (c->algo_name != NULL) {
        ccoip_algo a;
        if (!ccoip_algo_parse(c->algo_name, strlen(c->algo_name), &a)) {
            fprintf(stderr,
                    "pccl-sim: --algo: no algorithm %s (auto, relay, direct, ring, ring_striped, "
                    "halving_doubling)\n",
                    c->algo_name);
            return -1;
        }
        c->cfg.algo = (uint32_t)a;
        if (a == CCOIP_ALGO_DIRECT || a == CCOIP_ALGO_RELAY || a == CCOIP_ALGO_HALVING_DOUBLING) {
            /* These never quantize (docs/algorithms.md): a swarm draw of quantization would
             * only make every op pcclInvalidArgument. */
            c->cfg.quant = pcclQuantNone;
            c->cfg.quant_dtype = pcclUint8;
        }
    }
    if (c->canary != NULL) c->cfg.canary = sim_canary_from_name(c->canary);
    if (c->groups > 0) c->cfg.group_size = (c->cfg.peers + c->groups - 1u) / c->groups;
    if (c->record_dir != NULL) {
        c->cfg.record_trace = true;
        c->cfg.record_sink = record_sink;
        c->cfg.record_ctx = c;
    }
    c->cfg.log = log_line;
    return 0;
}

/* The command that reproduces this run: the original arguments, with this
 * run's seed instead of --seed/--seeds, and without output-only flags. */
static void print_repro(int argc, char **argv, uint64_t seed)
{
    printf("reproduce: pccl-sim --seed %" PRIu64, seed);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--seed") == 0 || strcmp(argv[i], "--seeds") == 0) {
            i++;
            continue;
        }
        if (strcmp(argv[i], "--record-trace") == 0) {
            i++;
            continue;
        }
        if (strcmp(argv[i], "--quiet") == 0 || strcmp(argv[i], "--trace") == 0) continue;
        printf(" %s", argv[i]);
    }
    printf("\n");
}

static int exit_code(sim_status st)
{
    switch (st) {
    case SIM_OK:
        return 0;
    case SIM_CRASH:
        return 1;
    case SIM_LIVENESS:
        return 2;
    case SIM_CORRECTNESS:
        return 3;
    case SIM_UNAVAILABLE:
        return EXIT_UNAVAILABLE;
    }
    return 1;
}

static int run_one(cli *c, int argc, char **argv, uint64_t seed, bool line_only)
{
    if (build(c, argc, argv, seed) != 0) {
        usage(stderr);
        return EXIT_USAGE;
    }
    sim_config *cfg = &c->cfg;
    if (line_only || c->quiet) cfg->log = NULL;
    char pool_text[64] = "";
    if (cfg->p2p_pool_size > 1u || cfg->reverse_tags) {
        snprintf(pool_text, sizeof pool_text, " pool=%u%s", cfg->p2p_pool_size,
                 cfg->reverse_tags ? " reverse_tags" : "");
    }
    char kind_text[64] = "";
    if (cfg->coll_kind != 0 || cfg->op_timeout_ms != 0) {
        snprintf(kind_text, sizeof kind_text, " kind=%s op_timeout_ms=%u",
                 sim_kind_name(cfg->coll_kind), cfg->op_timeout_ms);
    }
    if (cfg->algo != 0) {
        const size_t at = strlen(kind_text);
        snprintf(kind_text + at, sizeof kind_text - at, " algo=%s", ccoip_algo_name(cfg->algo));
    }
    if (!line_only) {
        printf("pccl-sim seed=%" PRIu64 " peers=%u max_peers=%u steps=%u churn=%" PRIu64
               "ms rates/min: join=%u leave=%u crash=%u hang=%u restart=%u loss=%u‰ "
               "partitions=%u clogs=%u dtype=%d op=%d count=%" PRIu64 " tags=%u in_place=%d "
               "quant=%d%s%s%s%s\n",
               cfg->seed, cfg->peers, cfg->max_peers, cfg->steps, cfg->churn_ns / 1000000u,
               cfg->join_per_min, cfg->leave_per_min, cfg->crash_per_min, cfg->hang_per_min,
               cfg->restart_per_min, cfg->loss_permille, cfg->partitions, cfg->clogs,
               (int)cfg->dtype, (int)cfg->op, cfg->count, cfg->tags, (int)cfg->in_place,
               (int)cfg->quant, c->scenario != NULL ? " scenario=" : "",
               c->scenario != NULL ? c->scenario : "", pool_text, kind_text);
        fflush(stdout);
    }
    sim_result r;
    const sim_status st = sim_run(cfg, &r);
    if (line_only) {
        printf("seed=%" PRIu64 " %s trace_hash=0x%016" PRIx64 " events=%" PRIu64 " ops=%" PRIu64
               " aborted=%" PRIu64 "\n",
               seed, sim_status_name(st), r.trace_hash, r.events, r.ops_completed, r.ops_aborted);
    } else {
        printf("seed=%" PRIu64 "\ntrace_hash=0x%016" PRIx64 "\n", seed, r.trace_hash);
        printf("summary: %s after %" PRIu64 ".%03" PRIu64 " s simulated, %" PRIu64
               " events; epochs %" PRIu64 ", all-reduces completed %" PRIu64 " aborted %" PRIu64
               " other failures %" PRIu64 "; peers started %" PRIu64 ", left %" PRIu64
               ", crashed %" PRIu64 ", hung %" PRIu64 ", evicted %" PRIu64
               "; %u live at the end; network %" PRIu64 " frames, %" PRIu64
               " bytes; replaced %" PRIu64 "; syncs %" PRIu64 " (fetched %" PRIu64
               ", failed %" PRIu64 "), optimizes %" PRIu64 "\n",
               sim_status_name(st), r.end_ns / 1000000000u, (r.end_ns / 1000000u) % 1000u, r.events,
               r.epochs, r.ops_completed, r.ops_aborted, r.ops_failed_other, r.joins, r.leaves,
               r.crashes, r.hangs, r.evictions, r.live_peers_end, r.net_frames, r.net_bytes,
               r.replaced, r.syncs, r.sync_fetches, r.sync_failed, r.optimizes);
        if (r.optimize_rounds > 0) {
            printf("optimize: %" PRIu64 " rounds; the longest %" PRIu64 ".%03" PRIu64
                   " s simulated (first call to the last of %u successes); last ring checked "
                   "costs %" PRIu64 ", the optimum %" PRIu64 " (us per MiB, summed)\n",
                   r.optimize_rounds, r.optimize_max_ns / 1000000000u,
                   (r.optimize_max_ns / 1000000u) % 1000u, r.optimize_members, r.optimize_cost,
                   r.optimize_best);
        }
        printf("faults: %" PRIu64 " timed into a phase; survivors checked after %" PRIu64
               " faults; %" PRIu64 " calls failed as mismatched\n",
               r.phase_faults, r.fault_checks, r.call_mismatches);
        if (cfg->coll_kind != 0) {
            printf("collectives (%s): %" PRIu64 " outputs checked against the reference, %" PRIu64
                   " of them relayed by the master\n",
                   sim_kind_name(cfg->coll_kind), r.coll_checked, r.coll_relayed);
        }
        if (cfg->coll_kind == SIM_KIND_P2P) {
            printf("send / recv: %" PRIu64
                   " halves succeeded after their member saw a newer epoch\n",
                   r.p2p_outlived);
        }
    }
    if (st != SIM_OK) {
        printf("FAILED (%s): %s\n", sim_status_name(st), r.message);
        print_repro(argc, argv, seed);
    }
    fflush(stdout);
    return exit_code(st);
}

int main(int argc, char **argv)
{
#if defined(__GLIBC__)
    /* A fixed mmap threshold: glibc raises it (up to 32 MiB) after a large block is freed, and
     * then every simulated process's large, mostly unused calloc'd tables (action queue, probe
     * table: ~0.5 MB per peer) come from the heap and are zeroed page by page instead of being
     * fresh untouched pages -- 10,000 peers needed 5.9 GB that way. */
    mallopt(M_MMAP_THRESHOLD, 128 * 1024);
#endif
    cli c;
    memset(&c, 0, sizeof c);
    if (parse(&c, argc, argv, 0, false) != 0) {
        usage(stderr);
        return EXIT_USAGE;
    }
    if (c.replay != NULL) return replay_file(c.replay);
    if (c.scenario != NULL && !sim_config_scenario(&c.cfg, c.scenario)) {
        fprintf(stderr, "unknown scenario %s\n", c.scenario);
        usage(stderr);
        return EXIT_USAGE;
    }
    if (!c.sweep) return run_one(&c, argc, argv, c.cfg.seed, false);
    int worst = 0;
    uint64_t failures = 0;
    for (uint64_t s = c.seed_from; s <= c.seed_to; s++) {
        const int rc = run_one(&c, argc, argv, s, true);
        if (rc == EXIT_USAGE || rc == EXIT_UNAVAILABLE) return rc;
        if (rc != 0) {
            failures++;
            if (worst == 0) worst = rc;
        }
        if (s == UINT64_MAX) break;
    }
    printf("sweep: %" PRIu64 " seeds, %" PRIu64 " failed\n", c.seed_to - c.seed_from + 1u,
           failures);
    return worst;
}
