/*
 * sim_world_int.h — what the world's own files share, by concern:
 *
 *   sim_world.c   the event loop: the queue, feeding a machine, firing events,
 *                 observer registration, create / start / run / destroy;
 *   sim_conn.c    connections over the virtual network: endpoints, frames,
 *                 delivery into posted receives, CONNECT and CLOSE;
 *   sim_act.c     the other actions: pending I/O records, spans, kernels,
 *                 sends and receives, PROBE, CANCEL, OP_BEGIN / OP_END;
 *   sim_node.c    processes: create, kill, replace, release, the supervisor;
 *   sim_churn.c   churn and scripted events;
 *   sim_fault.c   phase faults and the bound after a fault;
 *   sim_record.c  the run's trace hash and the machines' recorded traces.
 *
 * Observers (the workload, the checkers) see only sim_world.h.
 */
#ifndef SIM_WORLD_INT_H
#define SIM_WORLD_INT_H

#include "sim_world.h"

/* The world's own calls (beside sim_world.h's). */
/* Queues an event of kind for node at t (now at the earliest); false (and the run failed) at the
 * queue's bound or a field out of range. */
bool world_push(sim_world *w, uint64_t t, uint32_t kind, uint32_t node, uint64_t a, uint64_t b);
/* Keeps w->live and w->undone in step with node's state and progress (sim_node.c). */
void node_recount(sim_world *w, uint32_t node);
/* A new peer process on host (SIM_NONE32: a new host); its node or SIM_NONE32 (sim_node.c). */
uint32_t world_spawn_peer(sim_world *w, uint32_t host);
/* A peer hung, crashed or left at w->now: its survivors are checked later (sim_fault.c). */
void fault_noted(sim_world *w);

/* ------------------------------------------------------------------------ */
/* Small helpers on every path (inline: they are called per event)          */
/* ------------------------------------------------------------------------ */

static inline bool node_runs(const sim_world *w, uint32_t node)
{
    return node < w->num_nodes && w->node_st[node] == (uint8_t)NODE_ALIVE;
}

/* A node's state, mirrored in w->node_st (one byte per node, so the checks on every event do not
 * miss the cache on the node's own record). */
static inline void node_set_state(sim_world *w, uint32_t node, sim_node_state st)
{
    w->nodes[node].state = st;
    w->node_st[node] = (uint8_t)st;
}

static inline void host_ip(uint32_t host, uint8_t ip[4])
{
    ip[0] = 10;
    ip[1] = (uint8_t)(host >> 16);
    ip[2] = (uint8_t)(host >> 8);
    ip[3] = (uint8_t)host;
}

/* A node's pending I/Os: n->ios lists record indexes into n->io_pool in the order the driver
 * walks them (a removal moves the last entry into the gap); records stay put, so a removal
 * copies 4 bytes instead of a whole record. */
static inline sim_io *io_at(sim_node *n, uint32_t i)
{
    return &n->io_pool[n->ios[i].rec];
}

static inline sim_io *io_find(sim_node *n, uint64_t io_id, uint32_t *idx_out)
{
    for (uint32_t i = 0; i < n->ios_len; i++) {
        if (n->ios[i].io_id == io_id) {
            if (idx_out != NULL) *idx_out = i;
            return io_at(n, i);
        }
    }
    return NULL;
}

static inline void io_remove(sim_node *n, uint32_t idx)
{
    n->io_free[n->io_free_len++] = n->ios[idx].rec;
    n->ios[idx] = n->ios[--n->ios_len];
    if (idx < n->ios_len) n->io_pool[n->ios[idx].rec].pos = idx;
}

/* A pending I/O fails at once (IO_DONE now): the connection is gone. */
static inline void io_fail_now(sim_world *w, uint32_t node, sim_io *io, pcclResult_t result)
{
    io->delivered = true;
    io->result = result;
    world_push(w, w->now, EVK_IO_DONE, node, io->io_id, 0);
}

/* ------------------------------------------------------------------------ */
/* Observer dispatch (sim_world.h, sim_observer): in registration order     */
/* ------------------------------------------------------------------------ */

#define SIM_OBS_EACH(w, o) for (const sim_observer *o = (w)->obs; o < (w)->obs + (w)->nobs; o++)

static inline void obs_notify(sim_world *w, uint32_t node, const ccoip_action *a)
{
    SIM_OBS_EACH(w, o)
    {
        if (o->notify != NULL) o->notify(o->ctx, node, a);
    }
}

static inline void obs_op_bound(sim_world *w, uint32_t node, const ccoip_action *a)
{
    SIM_OBS_EACH(w, o)
    {
        if (o->op_bound != NULL) o->op_bound(o->ctx, node, a);
    }
}

static inline bool obs_bind_op(sim_world *w, uint32_t node, const ccoip_action *a,
                               ccoip_exec_slot *slot)
{
    SIM_OBS_EACH(w, o)
    {
        if (o->bind_op != NULL && o->bind_op(o->ctx, node, a, slot)) return true;
    }
    return false;
}

static inline void obs_op_begin(sim_world *w, uint32_t node, const ccoip_action *a)
{
    SIM_OBS_EACH(w, o)
    {
        if (o->op_begin != NULL) o->op_begin(o->ctx, node, a);
    }
}

/* One node hook of every observer that has it (start, leave, killed, release). */
#define SIM_OBS_NODE(w, hook, node)                                                                \
    SIM_OBS_EACH(w, o_)                                                                            \
    {                                                                                              \
        if (o_->hook != NULL) o_->hook(o_->ctx, (node));                                           \
    }
/* One world hook of every observer that has it (tick, fault_due, end). */
#define SIM_OBS_WORLD(w, hook)                                                                     \
    SIM_OBS_EACH(w, o_)                                                                            \
    {                                                                                              \
        if (o_->hook != NULL) o_->hook(o_->ctx);                                                   \
    }

/* ------------------------------------------------------------------------ */
/* sim_world.c: the loop                                                    */
/* ------------------------------------------------------------------------ */

/* Pushes node's live timer under its reserved key (world_feed) and tracks it. */
void timer_push(sim_world *w, uint32_t node);

/* ------------------------------------------------------------------------ */
/* sim_conn.c: endpoints, frames, delivery                                  */
/* ------------------------------------------------------------------------ */

uint32_t ep_lookup(sim_world *w, uint32_t node, uint64_t id);
/* A new endpoint of node with connection id; accepted: id is w->next_accept_id (taken). */
uint32_t ep_new(sim_world *w, uint32_t node, uint64_t id, bool accepted);
uint32_t frame_new(sim_world *w, uint64_t len);
void frame_free(sim_world *w, uint32_t f);
/* Puts frame f on the wire from endpoint src to its remote end; the time its last byte left. */
uint64_t frame_send(sim_world *w, uint32_t src, uint32_t f);
/* The frame f sent on e while it is on the wire (SIM_NONE32: it never lands). */
uint32_t frame_on_wire(const sim_world *w, uint32_t e, uint32_t f, bool lost);
/* Fails every pending send/receive on endpoint e of node (the stream broke). */
void ios_fail_on_ep(sim_world *w, uint32_t node, uint32_t e);
/* The remote end of e goes away: its owner learns it after the frames in flight. */
void ep_close_remote(sim_world *w, uint32_t e);
/* Breaks endpoint e under its owner (pending I/O fails, CONN_CLOSED, the remote learns it). */
void ep_break(sim_world *w, uint32_t e);
/* Processes the frames at the head of e's stream. */
void ep_pump(sim_world *w, uint32_t e);
/* EVK_DELIVER: frame f arrives at its endpoint. */
void deliver(sim_world *w, uint32_t f);
/* The node listening at ip:port, and which of its listeners (SIM_NONE32: nobody). */
uint32_t find_listener(sim_world *w, const uint8_t *ip, uint32_t ip_len, uint32_t port,
                       uint32_t *listener_out);
void act_connect(sim_world *w, uint32_t node, const ccoip_action *a);
void act_close(sim_world *w, uint32_t node, const ccoip_action *a);

/* ------------------------------------------------------------------------ */
/* sim_act.c: actions                                                       */
/* ------------------------------------------------------------------------ */

/* Runs one action node's machine emitted. */
void act_run(sim_world *w, uint32_t node, const ccoip_action *a);
/* Maps a span onto memory; NULL and a crash verdict when it does not map. */
uint8_t *span_ptr(sim_world *w, uint32_t node, const ccoip_span_ref *s);
/* Frees an op slot's driver buffers (scratch, backup) and clears it. */
void opbuf_release(sim_node *n, uint32_t slot);

/* ------------------------------------------------------------------------ */
/* sim_node.c: processes                                                    */
/* ------------------------------------------------------------------------ */

/* The master (is_master) or a peer on host; SIM_NONE32 when the table is full or it failed. */
uint32_t node_new(sim_world *w, bool is_master, uint32_t host);
uint32_t live_peers(const sim_world *w, bool include_hung);
/* node hangs for good (its sockets stay open). */
void node_hang(sim_world *w, uint32_t node);
/* Frees a node's state machine and buffers (idempotent). */
void node_release(sim_world *w, uint32_t i);
/* Releases the nodes killed since the last event (not those recording a trace). */
void bury_dead(sim_world *w);
/* Liveness phase: at least two peers run; a peer alone in its group gets a partner. */
void supervise(sim_world *w);
void supervise_groups(sim_world *w);

/* ------------------------------------------------------------------------ */
/* sim_churn.c: churn and scripts                                           */
/* ------------------------------------------------------------------------ */

/* Schedules the churn processes, partitions, clogs and scripted events (world_start). */
void churn_start(sim_world *w);
/* EVK_CHURN, EVK_SCRIPT. */
void churn_fire(sim_world *w, uint32_t kind);
void script_fire(sim_world *w, uint32_t i);

/* ------------------------------------------------------------------------ */
/* sim_fault.c: phase faults and the bound after a fault                    */
/* ------------------------------------------------------------------------ */

/* Arms a phase fault (a script or the phase-fault churn). */
void fault_arm(sim_world *w, uint32_t phase, bool crash, uint32_t victim, uint32_t min_ring,
               uint32_t skip, bool scripted);
/* A frame the master sends to dst_node: fires an armed phase fault on a match. */
void fault_on_m2p(sim_world *w, uint32_t dst_node, const ccoip_pb_master_to_peer *m);
/* A partition or clog window until until_ns: no fault is checked across it. */
void fault_net_window(sim_world *w, uint64_t until_ns);
/* EVK_FAULT_CHECK: when the fault of generation gen is still the one to check, the observers'
 * fault_due hooks check the survivors. */
void fault_check(sim_world *w, uint64_t gen);

/* ------------------------------------------------------------------------ */
/* sim_record.c: the run's trace hash and the machines' recorded traces     */
/* ------------------------------------------------------------------------ */

/* Folds an event fed to node into the run's trace hash (and logs it with cfg.trace). */
void rec_trace_event(sim_world *w, uint32_t node, const ccoip_event *ev);
/* Starts recording a new node's machine (cfg.record_trace): its header. */
void rec_open(sim_world *w, sim_node *n, const ccoip_trace_header *h);
/* Recording around one step and its actions (core/ccoip_trace.h's driver protocol). */
void rec_event(sim_world *w, sim_node *n, const ccoip_event *ev);
void rec_set_port(sim_world *w, sim_node *n, uint32_t listener, uint32_t port);
void rec_checkpoint(sim_world *w, sim_node *n, uint64_t deadline_ns);
/* End of the run: every machine's trace gets its trailer and goes to the sink. */
void rec_finish(sim_world *w);
/* Frees a node's recording. */
void rec_close(sim_node *n);

#endif /* SIM_WORLD_INT_H */
