/*
 * sim_replay.c — pccl-sim --replay: re-runs one state machine from its trace
 * (core/ccoip_trace.h) and checks that it emits the same outputs: the state
 * hash at every CHECKPOINT and in the TRAILER. Pure: bytes in, result out.
 */
#include <stdio.h> /* snprintf only */
#include <stdlib.h>
#include <string.h>

#include "sim.h"

#ifdef SIM_HAVE_CORE_SM

#include "ccoip_master.h"
#include "ccoip_peer.h"
#include "ccoip_trace.h"

typedef struct replay {
    bool is_master;
    ccoip_master *m;
    ccoip_peer *p;
    ccoip_trace_hasher h;
    uint64_t events;
} replay;

static bool rp_poll(replay *r, ccoip_action *a)
{
    return r->is_master ? ccoip_master_poll(r->m, a) : ccoip_peer_poll(r->p, a);
}

/* Polls up to n actions (all when n is UINT64_MAX); false when fewer were there. */
static bool rp_drain(replay *r, uint64_t n)
{
    ccoip_action a;
    for (uint64_t i = 0; i < n; i++) {
        if (!rp_poll(r, &a)) return n == UINT64_MAX;
        ccoip_trace_hash_action(&r->h, &a);
    }
    return true;
}

static sim_replay_status fail(sim_replay_result *out, sim_replay_status st, const char *msg,
                              uint64_t detail)
{
    out->status = st;
    snprintf(out->message, sizeof out->message, "%s (%llu)", msg, (unsigned long long)detail);
    return st;
}

static sim_replay_status run(replay *r, ccoip_trace_reader *rd, ccoip_trace_record *rec,
                             sim_replay_result *out)
{
    for (;;) {
        bool done = false;
        if (ccoip_trace_next(rd, rec, &done) != pcclSuccess) {
            return fail(out, SIM_REPLAY_DECODE, "malformed record at byte", rd->pos);
        }
        if (done) break;
        switch (rec->kind) {
        case CCOIP_TRACE_EVENT: {
            const pcclResult_t rc = r->is_master ? ccoip_master_step(r->m, &rec->event)
                                                 : ccoip_peer_step(r->p, &rec->event);
            ccoip_trace_hash_step(&r->h, (int)rc);
            r->events++;
            break;
        }
        case CCOIP_TRACE_SET_PORT:
            if (r->is_master) return fail(out, SIM_REPLAY_DECODE, "SET_PORT for a master", 0);
            (void)ccoip_peer_set_port(r->p, (ccoip_listener)rec->listener, rec->port,
                                      rec->url[0] != '\0' ? rec->url : NULL);
            break;
        case CCOIP_TRACE_POLLED:
            if (!rp_drain(r, rec->polled)) {
                return fail(out, SIM_REPLAY_MISMATCH, "fewer actions than recorded after event",
                            r->events);
            }
            break;
        case CCOIP_TRACE_CHECKPOINT:
        case CCOIP_TRACE_TRAILER: {
            if (rec->kind == CCOIP_TRACE_CHECKPOINT) {
                rp_drain(r, UINT64_MAX);
                ccoip_trace_hash_deadline(&r->h, r->is_master ? ccoip_master_deadline_ns(r->m)
                                                              : ccoip_peer_deadline_ns(r->p));
            }
            out->events = r->events;
            out->actions = r->h.actions;
            out->state_hash = r->h.hash;
            out->expected_hash = rec->state_hash;
            if (rec->events != r->events || rec->state_hash != r->h.hash ||
                (rec->kind == CCOIP_TRACE_TRAILER && rec->actions != r->h.actions)) {
                return fail(out, SIM_REPLAY_MISMATCH, "state hash differs after event", r->events);
            }
            if (rec->kind == CCOIP_TRACE_TRAILER) {
                out->status = SIM_REPLAY_MATCH;
                return out->status;
            }
            break;
        }
        default:
            return fail(out, SIM_REPLAY_DECODE, "unknown record", (uint64_t)rec->kind);
        }
    }
    out->events = r->events;
    out->actions = r->h.actions;
    out->state_hash = r->h.hash;
    out->status = SIM_REPLAY_NO_TRAILER;
    snprintf(out->message, sizeof out->message, "no trailer: the trace ends after event %llu",
             (unsigned long long)r->events);
    return out->status;
}

sim_replay_status sim_replay(const uint8_t *bytes, uint64_t len, sim_replay_result *out)
{
    memset(out, 0, sizeof *out);
    ccoip_trace_reader rd;
    ccoip_trace_header hdr;
    if (ccoip_trace_reader_init(&rd, bytes, len, &hdr) != pcclSuccess) {
        if (hdr.version != 0 && hdr.version != CCOIP_TRACE_VERSION) {
            out->status = SIM_REPLAY_DECODE;
            snprintf(out->message, sizeof out->message,
                     "trace format v%u is not supported (this build reads v%u): re-record the run",
                     (unsigned)hdr.version, (unsigned)CCOIP_TRACE_VERSION);
            return out->status;
        }
        return fail(out, SIM_REPLAY_DECODE, "malformed trace header", len);
    }
    replay r;
    memset(&r, 0, sizeof r);
    r.is_master = hdr.machine == CCOIP_TRACE_MASTER;
    out->is_master = r.is_master;
    out->seed = hdr.seed;
    ccoip_trace_hasher_init(&r.h);
    pcclResult_t rc;
    if (r.is_master) {
        rc = ccoip_master_create(&hdr.master, hdr.seed, &r.m);
    } else {
        hdr.peer.master_url = hdr.master_url[0] != '\0' ? hdr.master_url : NULL;
        rc = ccoip_peer_create(&hdr.peer, hdr.seed, &r.p);
    }
    if (rc != pcclSuccess) {
        return fail(out, SIM_REPLAY_UNAVAILABLE, "cannot create the machine of the header",
                    (uint64_t)rc);
    }
    /* A record holds room for CCOIP_TRACE_MAX_KEYS keys: on the heap. */
    ccoip_trace_record *rec = malloc(sizeof *rec);
    if (rec == NULL) {
        ccoip_master_destroy(r.m);
        ccoip_peer_destroy(r.p);
        return fail(out, SIM_REPLAY_UNAVAILABLE, "out of memory", sizeof *rec);
    }
    const sim_replay_status st = run(&r, &rd, rec, out);
    free(rec);
    ccoip_master_destroy(r.m);
    ccoip_peer_destroy(r.p);
    return st;
}

#else

sim_replay_status sim_replay(const uint8_t *bytes, uint64_t len, sim_replay_result *out)
{
    (void)bytes;
    (void)len;
    memset(out, 0, sizeof *out);
    out->status = SIM_REPLAY_UNAVAILABLE;
    snprintf(out->message, sizeof out->message, "this build has no state machines");
    return out->status;
}

#endif
