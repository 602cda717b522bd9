/*
 * test_sim_trace.c — trace record/replay (core/ccoip_trace.h, sim_replay):
 * record every machine of swarm runs (with and without shared state and
 * topology optimization) and scenarios (the state_* and optimize_* ones
 * included), replay each trace and
 * require the same state hash; then change the type byte of one EVENT record
 * of each trace and require that the replay notices (mismatch or malformed
 * trace), never a crash. Plain C (no Criterion) so it also runs under node.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ccoip_trace.h"
#include "sim.h"

typedef struct tracebuf {
    uint8_t *bytes;
    uint64_t len;
} tracebuf;

typedef struct sink {
    tracebuf t[256];
    uint32_t n;
} sink;

static void on_trace(void *ctx, uint32_t node, bool is_master, const uint8_t *bytes, uint64_t len)
{
    (void)node;
    (void)is_master;
    sink *s = ctx;
    if (s->n >= 256u) return;
    s->t[s->n].bytes = malloc((size_t)len);
    if (s->t[s->n].bytes == NULL) return;
    memcpy(s->t[s->n].bytes, bytes, (size_t)len);
    s->t[s->n].len = len;
    s->n++;
}

/* Offset of a byte inside the payload or fields of the k-th EVENT record (0 when none). */
static uint64_t event_byte(const uint8_t *buf, uint64_t len, uint64_t k)
{
    ccoip_trace_reader r;
    ccoip_trace_header h;
    if (ccoip_trace_reader_init(&r, buf, len, &h) != pcclSuccess) return 0;
    ccoip_trace_record *rec = malloc(sizeof *rec);
    uint64_t seen = 0, at = 0;
    for (;;) {
        const uint64_t start = r.pos;
        bool done = false;
        if (ccoip_trace_next(&r, rec, &done) != pcclSuccess || done) break;
        if (rec->kind != CCOIP_TRACE_EVENT) continue;
        /* From the k-th event on, the first RECV or SUBMIT (a frame or a command). */
        if (seen++ >= k &&
            (rec->event.type == CCOIP_EV_RECV || rec->event.type == CCOIP_EV_SUBMIT)) {
            /* The low byte of the event type: the machine sees another event.
             * (A byte the machine ignores, e.g. now_ns off by one nanosecond
             * far from any deadline, cannot change its outputs: replay checks
             * outputs, so such a change is not detectable by design.) */
            at = start + 5u;
            break;
        }
    }
    free(rec);
    return at;
}

static int failures;
/* v2 inputs seen in all traces: shared-state SUBMITs with keys, HASH results, PROBE_DONEs. */
static uint64_t seen_sync_keys, seen_hash_done, seen_probe_done;

static void tally(const uint8_t *buf, uint64_t len)
{
    ccoip_trace_reader r;
    ccoip_trace_header h;
    if (ccoip_trace_reader_init(&r, buf, len, &h) != pcclSuccess) return;
    ccoip_trace_record *rec = malloc(sizeof *rec);
    for (;;) {
        bool done = false;
        if (rec == NULL || ccoip_trace_next(&r, rec, &done) != pcclSuccess || done) break;
        if (rec->kind != CCOIP_TRACE_EVENT) continue;
        const ccoip_event *ev = &rec->event;
        if (ev->type == CCOIP_EV_SUBMIT && ev->cmd.type == CCOIP_CMD_SYNC_SHARED_STATE &&
            ev->cmd.sync.num_keys > 0 && ev->cmd.sync.keys != NULL) {
            seen_sync_keys++;
        }
        if (ev->type == CCOIP_EV_KERNEL_DONE && ev->done.hash != 0) seen_hash_done++;
        if (ev->type == CCOIP_EV_PROBE_DONE) seen_probe_done++;
    }
    free(rec);
}

static void run_and_replay(const char *what, sim_config *cfg)
{
    sink *s = calloc(1, sizeof *s);
    cfg->record_trace = true;
    cfg->record_sink = on_trace;
    cfg->record_ctx = s;
    sim_result res;
    const sim_status st = sim_run(cfg, &res);
    if (st == SIM_UNAVAILABLE) {
        printf("%s: no state machines in this build\n", what);
        free(s);
        return;
    }
    uint32_t matched = 0, detected = 0, tampered = 0;
    for (uint32_t i = 0; i < s->n; i++) {
        tally(s->t[i].bytes, s->t[i].len);
        sim_replay_result r;
        if (sim_replay(s->t[i].bytes, s->t[i].len, &r) != SIM_REPLAY_MATCH) {
            printf("FAIL %s: trace %u does not replay: %s\n", what, i, r.message);
            failures++;
        } else {
            matched++;
        }
        /* Tamper: the type byte of an event in the middle of the trace, into
         * another valid type (the machine must behave differently: required
         * for 90 %% of the traces, as a few such swaps are no-ops, e.g. a second
         * START) and into an invalid one (a decode error: required always). */
        const uint64_t events = r.events;
        const uint64_t at = events > 0 ? event_byte(s->t[i].bytes, s->t[i].len, events / 2u) : 0;
        if (at == 0) continue;
        tampered++;
        s->t[i].bytes[at] ^= 0x04u;
        sim_replay_status ts = sim_replay(s->t[i].bytes, s->t[i].len, &r);
        if (ts == SIM_REPLAY_MISMATCH || ts == SIM_REPLAY_DECODE) detected++;
        s->t[i].bytes[at] ^= 0x84u;
        ts = sim_replay(s->t[i].bytes, s->t[i].len, &r);
        if (ts != SIM_REPLAY_DECODE) {
            printf("FAIL %s: trace %u with an invalid event type at byte %" PRIu64
                   " replays as %d\n",
                   what, i, at, (int)ts);
            failures++;
        }
    }
    if (detected * 10u < tampered * 9u) {
        printf("FAIL %s: only %u of %u type swaps detected\n", what, detected, tampered);
        failures++;
    }
    printf("%s: %s, %u traces, %u replayed to the same state hash, %u event type swaps detected\n",
           what, sim_status_name(st), s->n, matched, detected);
    if (s->n == 0) failures++;
    for (uint32_t i = 0; i < s->n; i++)
        free(s->t[i].bytes);
    free(s);
}

int main(void)
{
    sim_config cfg;
    char name[64];
    /* Swarm seeds as drawn (most with shared state, some with divergence and
     * topology optimization), then the same seeds forced to shared state with
     * divergence and optimization (trace format v2 records sync args, HASH
     * kernel results and PROBE_DONE). */
    uint32_t with_state = 0;
    for (uint64_t seed = 1; seed <= 6; seed++) {
        sim_config_swarm(&cfg, seed);
        with_state += cfg.shared_state ? 1u : 0u;
        snprintf(name, sizeof name, "swarm seed %" PRIu64 "%s", seed,
                 cfg.shared_state ? " (shared state)" : "");
        run_and_replay(name, &cfg);
    }
    for (uint64_t seed = 1; seed <= 3; seed++) {
        sim_config_swarm(&cfg, seed);
        cfg.group_size = 0;
        cfg.shared_state = true;
        cfg.diverge_bp = 2000;
        cfg.optimize_every = 2;
        snprintf(name, sizeof name, "swarm seed %" PRIu64 " (shared state, optimize)", seed);
        run_and_replay(name, &cfg);
    }
    printf("%u of 6 drawn swarm seeds had shared state\n", with_state);
    static const char *const scenarios[] = {"kill_mid_ring",
                                            "hung_peer",
                                            "mismatched_params",
                                            "state_divergent_repair",
                                            "state_revision_skip",
                                            "state_newcomer_aci",
                                            "state_distributor_killed",
                                            "state_two_groups",
                                            "optimize_asymmetric",
                                            "optimize_regions16"};
    for (unsigned i = 0; i < sizeof scenarios / sizeof scenarios[0]; i++) {
        cfg.seed = 1;
        if (!sim_config_scenario(&cfg, scenarios[i])) return 1;
        run_and_replay(scenarios[i], &cfg);
    }
    /* Peer groups and per-step churn. */
    sim_config_default(&cfg, 3);
    cfg.peers = 24;
    cfg.max_peers = 48;
    cfg.group_size = 8;
    cfg.steps = 6;
    cfg.churn_ns = 0;
    cfg.churn_per_step_bp = 1000;
    run_and_replay("groups of 8 with per-step churn", &cfg);
    printf("recorded v2 inputs: %" PRIu64 " shared-state submits with keys, %" PRIu64
           " hash results, %" PRIu64 " probe results\n",
           seen_sync_keys, seen_hash_done, seen_probe_done);
    if (seen_sync_keys == 0 || seen_hash_done == 0 || seen_probe_done == 0) {
        printf("FAIL: the runs did not exercise shared state and optimization\n");
        failures++;
    }
    printf("%s\n", failures == 0 ? "all traces replayed" : "FAILED");
    return failures == 0 ? 0 : 1;
}
