/*
 * peer_optimize.c — pcclOptimizeTopology on the peer (docs/protocol.md §6.6,
 * docs/core.md §3.6): vote, run the probes the master asks for one at a
 * time (PROBE actions), report them, wait for the verdict, re-wire to the
 * optimized ring and complete with its TopologyVerdict.
 */
#include <string.h>

#include "peer_internal.h"

static void opt_finish(ccoip_peer *p, pcclResult_t r)
{
    p_set_opt(p, POPT_NONE);
    p->opt.io = 0;
    p_notify(p, p->opt.cmd, r);
}

pcclResult_t p_opt_submit(ccoip_peer *p, const ccoip_cmd *cmd)
{
    if (p->opt.st != POPT_NONE) return pcclInvalidUsage;
    p_set_opt(p, POPT_VOTED);
    p->opt.cmd = cmd->cmd_id;
    ccoip_pb_peer_to_master env;
    memset(&env, 0, sizeof(env));
    env.call_id = p_call_new(p, PC_OPT_VOTE, 0);
    env.body_case = CCOIP_PB_PEER_TO_MASTER_BODY_OPTIMIZE_TOPOLOGY;
    p_send(p, &env);
    return pcclSuccess;
}

/* Reports every sample, then says done. */
static void opt_report(ccoip_peer *p)
{
    if (p->opt.n > 0) {
        ccoip_pb_peer_to_master env;
        memset(&env, 0, sizeof(env));
        env.body_case = CCOIP_PB_PEER_TO_MASTER_BODY_BANDWIDTH_REPORT;
        env.body.bandwidth_report.samples = p->opt.samples;
        env.body.bandwidth_report.samples_count = p->opt.n;
        p_send(p, &env);
    }
    ccoip_pb_peer_to_master env;
    memset(&env, 0, sizeof(env));
    env.call_id = p_call_new(p, PC_OPT_DONE, 0);
    env.body_case = CCOIP_PB_PEER_TO_MASTER_BODY_OPTIMIZE_DONE;
    p_send(p, &env);
    p_set_opt(p, POPT_DONE_WAIT);
}

static void opt_probe_next(ccoip_peer *p, uint32_t i)
{
    p->opt.i = i;
    if (i >= p->opt.n) {
        p->opt.io = 0;
        opt_report(p);
        return;
    }
    const p_probe *t = &p->opt.probes[i];
    ccoip_action *a = sm_out_push(&p->out, CCOIP_ACT_PROBE);
    if (a == NULL) return;
    p_set_opt(p, POPT_PROBING);
    p->opt.io = p->next_io++;
    a->io_id = p->opt.io;
    a->conn = p->next_conn++;
    a->tag = t->peer_id;
    a->count = t->bytes;
    if (t->url_len > 0) {
        a->data = (const uint8_t *)t->url;
        a->len = t->url_len;
    } else {
        memcpy(a->ip, t->ip, t->ip_len);
        a->ip_len = t->ip_len;
        a->port = t->port;
    }
}

static void opt_on_requests(ccoip_peer *p, const ccoip_pb_bandwidth_probe_requests *rq)
{
    if (rq->targets_count > p->cfg.max_world) {
        p_fail(p, "too many probe targets");
        return;
    }
    for (uint64_t i = 0; i < rq->targets_count; i++) {
        const ccoip_pb_probe_target *t = &rq->targets[i];
        const ccoip_pb_endpoint *ep = &t->endpoint;
        /* An address is 0 (URL only, e.g. ipc://), 4 or 16 bytes, whatever the URL says;
         * a target needs a URL or an address. */
        const bool ip_ok = ep->ip.len == 0 || ep->ip.len == 4 || ep->ip.len == 16;
        if (!t->has_endpoint || ep->url.len >= CCOIP_URL_MAX || !ip_ok ||
            (ep->url.len == 0 && ep->ip.len == 0) || ep->port > 65535u) {
            p_fail(p, "bad probe target");
            return;
        }
        p_probe *d = &p->opt.probes[i];
        memset(d, 0, sizeof(*d));
        d->peer_id = t->peer_id;
        if (ep->ip.len > 0) memcpy(d->ip, ep->ip.data, (size_t)ep->ip.len);
        d->ip_len = (uint32_t)ep->ip.len;
        d->port = ep->port;
        d->url_len = (uint32_t)ep->url.len;
        if (ep->url.len > 0) memcpy(d->url, ep->url.data, (size_t)ep->url.len);
        d->bytes = t->probe_bytes != 0 ? t->probe_bytes : ((uint64_t)1 << 20);
        ccoip_pb_bandwidth_sample *sm = &p->opt.samples[i];
        memset(sm, 0, sizeof(*sm));
        sm->to_peer = t->peer_id;
    }
    p->opt.n = (uint32_t)rq->targets_count;
    opt_probe_next(p, 0);
}

void p_opt_on_answer(ccoip_peer *p, p_call_kind kind, const ccoip_pb_master_to_peer *env)
{
    if (kind == PC_OPT_VOTE) {
        if (p->opt.st != POPT_VOTED) {
            p_fail(p, "probe requests for no vote");
            return;
        }
        if (env->status != CCOIP_PB_STATUS_SUCCESS) {
            opt_finish(p, ccoip_status_to_result(env->status));
            return;
        }
        if (env->body_case != CCOIP_PB_MASTER_TO_PEER_BODY_PROBE_REQUESTS) {
            p_fail(p, "optimize vote answered without probe requests");
            return;
        }
        opt_on_requests(p, &env->body.probe_requests);
        return;
    }
    if (p->opt.st != POPT_DONE_WAIT) {
        p_fail(p, "optimize verdict for no optimization");
        return;
    }
    if (env->status != CCOIP_PB_STATUS_SUCCESS) {
        opt_finish(p, ccoip_status_to_result(env->status));
        return;
    }
    if (env->body_case != CCOIP_PB_MASTER_TO_PEER_BODY_OPTIMIZE_VERDICT) {
        p_fail(p, "optimize_done answered without a verdict");
        return;
    }
    const ccoip_pb_optimize_topology_verdict *v = &env->body.optimize_verdict;
    if (!v->success || !v->has_plan) {
        opt_finish(p, pcclTopologyOptimizationFailed);
        return;
    }
    /* Re-wire exactly as for a TopologyPlan; the TopologyVerdict of that epoch completes. */
    p_set_opt(p, POPT_REWIRING);
    p->opt.epoch = v->plan.epoch;
    p_wire_on_plan(p, &v->plan, env->deadline_ms);
}

void p_opt_on_topology_verdict(ccoip_peer *p, uint64_t epoch, bool ok)
{
    /* A later epoch means the optimized plan was superseded (a member lost meanwhile). */
    if (p->opt.st != POPT_REWIRING || epoch < p->opt.epoch) return;
    if (epoch != p->opt.epoch) ok = false;
    opt_finish(p, ok ? pcclSuccess : pcclTopologyOptimizationFailed);
}

bool p_opt_on_done(ccoip_peer *p, const ccoip_event *ev)
{
    if (p->opt.st != POPT_PROBING || ev->done.io_id == 0 || ev->done.io_id != p->opt.io)
        return false;
    ccoip_pb_bandwidth_sample *sm = &p->opt.samples[p->opt.i];
    if (ev->done.result == pcclSuccess && ev->done.probe_bytes > 0) {
        sm->bytes = ev->done.probe_bytes;
        sm->duration_us = ev->done.duration_us;
    } else {
        sm->unreachable = true;
    }
    opt_probe_next(p, p->opt.i + 1u);
    return true;
}

void p_opt_fail_all(ccoip_peer *p, pcclResult_t r)
{
    if (p->opt.st != POPT_NONE) opt_finish(p, r);
}
