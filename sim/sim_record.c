/*
 * sim_record.c — what the world records: the run's trace hash (every event
 * fed to every machine, sim_trace.h: the golden hashes of tests/sim/golden)
 * and, with sim_config.record_trace, each machine's trace in the format of
 * core/ccoip_trace.h, written by the core's ccoip_trace_writer (the same
 * writer the runtime's PCCL_TRACE uses) and handed to record_sink at the end.
 */
#include <stdlib.h>
#include <string.h>

#include "sim_world_int.h"

/* A writer's sticky error (ccoip_trace_writer) as the run's verdict (once). */
static void rec_check(sim_world *w, pcclResult_t rc)
{
    if (rc == pcclSuccess) return;
    world_fail(w, SIM_CRASH,
               rc == pcclInvalidArgument ? "trace: a record cannot be encoded"
                                         : "out of memory (trace)");
}

void rec_open(sim_world *w, sim_node *n, const ccoip_trace_header *h)
{
    n->rec = malloc(sizeof *n->rec);
    if (n->rec == NULL) {
        world_fail(w, SIM_CRASH, "out of memory (trace)");
        return;
    }
    ccoip_trace_writer_init(n->rec);
    rec_check(w, ccoip_trace_writer_header(n->rec, h));
}

void rec_event(sim_world *w, sim_node *n, const ccoip_event *ev)
{
    rec_check(w, ccoip_trace_writer_event(n->rec, ev));
}

void rec_set_port(sim_world *w, sim_node *n, uint32_t listener, uint32_t port)
{
    rec_check(w, ccoip_trace_writer_set_port(n->rec, listener, port, NULL));
}

void rec_checkpoint(sim_world *w, sim_node *n, uint64_t deadline_ns)
{
    rec_check(w, ccoip_trace_writer_checkpoint(n->rec, deadline_ns));
}

void rec_finish(sim_world *w)
{
    if (!w->cfg.record_trace) return;
    for (uint32_t i = 0; i < w->num_nodes; i++) {
        sim_node *n = &w->nodes[i];
        if (n->rec == NULL || ccoip_trace_writer_trailer(n->rec) != pcclSuccess) continue;
        if (w->cfg.record_sink != NULL) {
            w->cfg.record_sink(w->cfg.record_ctx, i, n->is_master, n->rec->buf, n->rec->len);
        }
    }
}

void rec_close(sim_node *n)
{
    if (n->rec == NULL) return;
    ccoip_trace_writer_deinit(n->rec);
    free(n->rec);
    n->rec = NULL;
}

void rec_trace_event(sim_world *w, uint32_t node, const ccoip_event *ev)
{
    sim_trace *t = &w->trace;
    sim_trace_begin(t);
    sim_trace_u32(t, node);
    sim_trace_u32(t, (uint32_t)ev->type);
    sim_trace_u64(t, ev->now_ns);
    sim_trace_u64(t, ev->conn);
    sim_trace_u8(t, ev->accepted ? 1u : 0u);
    sim_trace_u32(t, ev->listener);
    sim_trace_bytes(t, ev->data, ev->len);
    if (ev->type == CCOIP_EV_SUBMIT) {
        const ccoip_cmd *c = &ev->cmd;
        sim_trace_u32(t, (uint32_t)c->type);
        sim_trace_u64(t, c->cmd_id);
        sim_trace_u64(t, c->allreduce.tag);
        sim_trace_u64(t, c->allreduce.count);
        sim_trace_u32(t, (uint32_t)c->allreduce.dtype);
        sim_trace_u32(t, (uint32_t)c->allreduce.op);
        sim_trace_u32(t, (uint32_t)c->allreduce.quant_algorithm);
        sim_trace_u32(t, (uint32_t)c->allreduce.quant_dtype);
        sim_trace_u8(t, c->allreduce.in_place ? 1u : 0u);
        if (c->type == CCOIP_CMD_SYNC_SHARED_STATE) {
            sim_trace_u64(t, c->sync.revision);
            sim_trace_u32(t, (uint32_t)c->sync.strategy);
            sim_trace_u32(t, c->sync.num_keys);
            for (uint32_t k = 0; k < c->sync.num_keys; k++) {
                const ccoip_state_key *sk = &c->sync.keys[k];
                sim_trace_bytes(t, (const uint8_t *)sk->name, strlen(sk->name));
                sim_trace_u32(t, (uint32_t)sk->dtype);
                sim_trace_u64(t, sk->count);
                sim_trace_u8(t, sk->allow_content_inequality ? 1u : 0u);
            }
        }
    }
    if (ev->type == CCOIP_EV_IO_DONE || ev->type == CCOIP_EV_KERNEL_DONE) {
        sim_trace_u64(t, ev->done.io_id);
        sim_trace_u32(t, (uint32_t)ev->done.result);
        sim_trace_u32(t, (uint32_t)ev->done.quant.algorithm);
        sim_trace_u32(t, (uint32_t)ev->done.quant_out.algorithm);
        sim_trace_u64(t, ev->done.hash);
    }
    if (ev->type == CCOIP_EV_PROBE_DONE) {
        sim_trace_u64(t, ev->done.io_id);
        sim_trace_u32(t, (uint32_t)ev->done.result);
        sim_trace_u64(t, ev->done.probe_bytes);
        sim_trace_u64(t, ev->done.duration_us);
    }
    sim_trace_end(t);
    if (w->cfg.trace) {
        world_log(
            w, "%llu.%06llu node=%u ev=%d conn=%llu len=%llu cmd=%d io=%llu res=%d h=%016llx",
            (unsigned long long)(ev->now_ns / SIM_MS), (unsigned long long)(ev->now_ns % SIM_MS),
            node, (int)ev->type, (unsigned long long)ev->conn, (unsigned long long)ev->len,
            ev->type == CCOIP_EV_SUBMIT ? (int)ev->cmd.type : 0, (unsigned long long)ev->done.io_id,
            (int)ev->done.result, (unsigned long long)t->hash);
    }
}
