/*
 * sim_conn.c — connections over the virtual network (DESIGN.md §7): the
 * endpoints of each connection (by node and id), frames on the wire with
 * their latency, bandwidth and loss, delivery into the stream of an endpoint
 * (control frames to the machine as RECV, ring and state chunks into the
 * posted receive they match), CONNECT, CLOSE and broken streams.
 */
#include <stdlib.h>
#include <string.h>

#include "sim_world_int.h"

/* ------------------------------------------------------------------------ */
/* Endpoints                                                                */
/* ------------------------------------------------------------------------ */

static uint64_t ep_hash(uint32_t node, uint64_t id)
{
    return sim_pair_hash(node, id);
}

uint32_t ep_lookup(sim_world *w, uint32_t node, uint64_t id)
{
    /* A node uses a handful of connections at a time: a small cache in the node first
     * (endpoints are never removed, so a cached (id, endpoint) stays true). */
    sim_node *n = node < w->num_nodes ? &w->nodes[node] : NULL;
    const uint32_t c = (uint32_t)(id & (SIM_EP_CACHE - 1u));
    if (n != NULL && n->epc_e1[c] != 0 && n->epc_id[c] == id) return n->epc_e1[c] - 1u;
    if (id > CCOIP_CONN_ACCEPTED_BASE && id - CCOIP_CONN_ACCEPTED_BASE - 1u < w->acc_len) {
        /* Accepted connections: ids the driver hands out in order, a direct table. */
        const uint32_t e = w->acc_tab[id - CCOIP_CONN_ACCEPTED_BASE - 1u];
        if (w->eps[e].node == node) {
            if (n != NULL) {
                n->epc_id[c] = id;
                n->epc_e1[c] = e + 1u;
            }
            return e;
        }
    }
    const uint64_t mask = w->ep_map_cap - 1u;
    for (uint64_t i = ep_hash(node, id) & mask;; i = (i + 1u) & mask) {
        const sim_ep_slot *sl = &w->ep_map[i];
        if (sl->e == SIM_NONE32) return SIM_NONE32;
        if (sl->node == node && sl->id == id) {
            if (n != NULL) {
                n->epc_id[c] = id;
                n->epc_e1[c] = sl->e + 1u;
            }
            return sl->e;
        }
    }
}

static void ep_map_insert(sim_world *w, uint32_t e)
{
    const uint64_t mask = w->ep_map_cap - 1u;
    uint64_t i = ep_hash(w->eps[e].node, w->eps[e].id) & mask;
    while (w->ep_map[i].e != SIM_NONE32)
        i = (i + 1u) & mask;
    w->ep_map[i] = (sim_ep_slot){w->eps[e].id, w->eps[e].node, e};
}

uint32_t ep_new(sim_world *w, uint32_t node, uint64_t id, bool accepted)
{
    if (ep_lookup(w, node, id) != SIM_NONE32) {
        world_fail(w, SIM_CRASH, "node %u reused connection id %llu", node, (unsigned long long)id);
        return SIM_NONE32;
    }
    if (!sim_grow(&w->eps, &w->eps_cap, w->eps_len, sizeof *w->eps, 256u, true)) {
        world_fail(w, SIM_CRASH, "out of memory (endpoints)");
        return SIM_NONE32;
    }
    if (accepted) {
        if (id != CCOIP_CONN_ACCEPTED_BASE + 1u + w->acc_len) {
            world_fail(w, SIM_CRASH, "accepted connection id %llu out of order",
                       (unsigned long long)id);
            return SIM_NONE32;
        }
        if (!sim_grow(&w->acc_tab, &w->acc_cap, w->acc_len, sizeof *w->acc_tab, 1024u, false)) {
            world_fail(w, SIM_CRASH, "out of memory (accepted endpoints)");
            return SIM_NONE32;
        }
    } else if ((uint64_t)(w->ep_map_len + 1u) * 2u > w->ep_map_cap) {
        const uint64_t ncap = w->ep_map_cap * 2u;
        sim_ep_slot *m = malloc((size_t)ncap * sizeof *m);
        if (m == NULL) {
            world_fail(w, SIM_CRASH, "out of memory (endpoint map)");
            return SIM_NONE32;
        }
        free(w->ep_map);
        w->ep_map = m;
        w->ep_map_cap = ncap;
        memset(m, 0xff, (size_t)ncap * sizeof *m);
        for (uint32_t i = 0; i < w->eps_len; i++) {
            if (!w->eps[i].accepted) ep_map_insert(w, i);
        }
    }
    const uint32_t e = w->eps_len++;
    memset(&w->eps[e], 0, sizeof w->eps[e]);
    w->eps[e].node = node;
    w->eps[e].id = id;
    w->eps[e].other = SIM_NONE32;
    w->eps[e].state = EP_CONNECTING;
    w->eps[e].next_of_node = SIM_NONE32;
    sim_node *n = &w->nodes[node];
    if (n->ep_last1 != 0) {
        w->eps[n->ep_last1 - 1u].next_of_node = e;
    } else {
        n->ep_first1 = e + 1u;
    }
    n->ep_last1 = e + 1u;
    w->eps[e].accepted = accepted;
    if (accepted) {
        w->acc_tab[w->acc_len++] = e;
    } else {
        ep_map_insert(w, e);
        w->ep_map_len++;
    }
    return e;
}

/* ------------------------------------------------------------------------ */
/* Frames                                                                   */
/* ------------------------------------------------------------------------ */

#define SIM_FRAME_KEEP (64u * 1024u) /* a frame slot keeps a buffer up to this size */

uint32_t frame_new(sim_world *w, uint64_t len)
{
    uint32_t f;
    if (w->frame_free_len > 0) {
        f = w->frame_free[--w->frame_free_len];
    } else {
        if (w->frames_len == w->frames_cap) {
            /* The free list has room for every frame. */
            uint32_t *fl = realloc(w->frame_free, (size_t)w->frames_cap * 2u * sizeof *fl);
            if (fl != NULL) w->frame_free = fl;
            if (fl == NULL || !sim_grow(&w->frames, &w->frames_cap, w->frames_len,
                                        sizeof *w->frames, 1024u, true)) {
                world_fail(w, SIM_CRASH, "out of memory (frames)");
                return SIM_NONE32;
            }
        }
        f = w->frames_len++;
        w->frames[f].bytes = NULL;
        w->frames[f].bytes_cap = 0;
    }
    sim_frame *fr = &w->frames[f];
    /* A slot keeps its buffer: most frames fit the one of the frame before. */
    uint8_t *bytes = fr->bytes;
    uint32_t bytes_cap = fr->bytes_cap;
    const uint64_t need = len > 0 ? len : 1u;
    if (need > bytes_cap) {
        free(bytes);
        bytes_cap = 0;
        bytes = malloc((size_t)need);
        if (bytes == NULL) {
            fr->bytes = NULL;
            fr->bytes_cap = 0;
            world_fail(w, SIM_CRASH, "out of memory (frame bytes)");
            return SIM_NONE32;
        }
        if (need <= SIM_FRAME_KEEP) bytes_cap = (uint32_t)need;
    }
    memset(fr, 0, sizeof *fr);
    fr->used = true;
    fr->len = len;
    fr->bytes = bytes;
    fr->bytes_cap = bytes_cap;
    return f;
}

void frame_free(sim_world *w, uint32_t f)
{
    sim_frame *fr = &w->frames[f];
    if (fr->bytes_cap == 0) {
        free(fr->bytes); /* larger than SIM_FRAME_KEEP: not kept */
        fr->bytes = NULL;
    }
    fr->used = false;
    w->frame_free[w->frame_free_len++] = f;
}

/* Puts frame f on the wire from endpoint src to its remote end. Returns the
 * time the last byte left the sender (its I/O completion). */
uint64_t frame_send(sim_world *w, uint32_t src, uint32_t f)
{
    const sim_ep *s = &w->eps[src];
    sim_ep *d = &w->eps[s->other];
    w->frames[f].dst_ep = s->other;
    w->frames[f].src_node = s->node;
    uint64_t sent;
    uint64_t arr =
        sim_net_transit(&w->net, &w->net_rng, w->node_host[s->node], w->node_host[d->node], w->now,
                        w->frames[f].len + (w->frames[f].is_data ? 80u : 0u), &sent);
    if (arr == SIM_NET_FOREVER || d->stuck) {
        /* The stream is wedged: this frame and all later ones never arrive. */
        d->stuck = true;
        frame_free(w, f);
        return sent;
    }
    if (arr < d->last_arrival_ns) arr = d->last_arrival_ns;
    d->last_arrival_ns = arr;
    /* The destination endpoint rides along in the high word (a prefetch hint only). */
    world_push(w, arr, EVK_DELIVER, d->node, f | ((uint64_t)s->other << 32), 0);
    return sent;
}

void ios_fail_on_ep(sim_world *w, uint32_t node, uint32_t e)
{
    sim_node *n = &w->nodes[node];
    for (uint32_t i = 0; i < n->ios_len; i++) {
        if (n->ios[i].ep != e) continue;
        sim_io *io = io_at(n, i);
        if ((io->kind == IO_SEND || io->kind == IO_RECV) && io->ep == e && !io->delivered) {
            io_fail_now(w, node, io, pcclRankConnectionLost);
        }
    }
}

/* The remote end of e goes away: its owner learns it after the frames in flight. */
void ep_close_remote(sim_world *w, uint32_t e)
{
    sim_ep *s = &w->eps[e];
    if (s->other == SIM_NONE32) return;
    sim_ep *d = &w->eps[s->other];
    if (d->state == EP_CLOSED || d->stuck) return;
    const uint32_t hs = w->node_host[s->node], hd = w->node_host[d->node];
    uint64_t t = w->now + sim_net_latency(&w->net, hs, hd);
    uint64_t until;
    if (sim_net_blocked(&w->net, hs, hd, w->now, &until)) {
        if (until == SIM_NET_FOREVER) return; /* the FIN/RST never arrives */
        t = until + sim_net_latency(&w->net, hs, hd);
    }
    if (t < d->last_arrival_ns) t = d->last_arrival_ns;
    d->last_arrival_ns = t;
    world_push(w, t, d->state == EP_CONNECTING ? EVK_CONN_FAIL : EVK_CONN_CLOSED, d->node, s->other,
               0);
}

uint32_t find_listener(sim_world *w, const uint8_t *ip, uint32_t ip_len, uint32_t port,
                       uint32_t *listener_out)
{
    if (ip_len != 4 || ip[0] != 10) return SIM_NONE32;
    const uint32_t host = ((uint32_t)ip[1] << 16) | ((uint32_t)ip[2] << 8) | ip[3];
    /* At most one process of a host is not dead: the newest one on it. */
    if (host >= w->host_node_cap) return SIM_NONE32;
    const uint32_t i = w->host_node[host];
    if (i != SIM_NONE32) {
        const sim_node *n = &w->nodes[i];
        if (n->host != host || n->state == NODE_DEAD) return SIM_NONE32;
        if (n->is_master && port == SIM_MASTER_PORT) {
            *listener_out = 0;
            return i;
        }
        for (uint32_t l = 0; l < 3u; l++) {
            if (n->ports[l] != 0 && n->ports[l] == port) {
                *listener_out = l;
                return i;
            }
        }
    }
    return SIM_NONE32;
}

bool world_host_no_inbound(const sim_world *w, uint32_t host)
{
    return host >= 1u && host - 1u < 32u && ((w->cfg.no_inbound_hosts >> (host - 1u)) & 1u) != 0;
}

void act_connect(sim_world *w, uint32_t node, const ccoip_action *a)
{
    const uint32_t e = ep_new(w, node, a->conn, false);
    if (e == SIM_NONE32) return;
    uint32_t listener = 0;
    const uint32_t target =
        a->len > 0 ? SIM_NONE32 : find_listener(w, a->ip, a->ip_len, a->port, &listener);
    const uint32_t ha = w->nodes[node].host;
    if (target == SIM_NONE32) {
        /* Nobody listens there: a reset after one round trip. */
        const uint64_t rtt = 2u * w->net.hosts[ha].latency_ns;
        world_push(w, w->now + rtt, EVK_CONN_FAIL, node, e, 0);
        return;
    }
    const uint32_t hb = w->nodes[target].host;
    if (world_host_no_inbound(w, hb)) {
        /* Behind NAT: the SYN is dropped, the dial times out. */
        world_push(w, w->now + SIM_CONNECT_TIMEOUT_NS, EVK_CONN_FAIL, node, e, 0);
        return;
    }
    uint64_t syn = w->now;
    uint64_t until;
    if (sim_net_blocked(&w->net, ha, hb, syn, &until) ||
        sim_net_blocked(&w->net, hb, ha, syn, &until)) {
        if (until == SIM_NET_FOREVER || until - w->now >= SIM_CONNECT_TIMEOUT_NS) {
            world_push(w, w->now + SIM_CONNECT_TIMEOUT_NS, EVK_CONN_FAIL, node, e, 0);
            return;
        }
        syn = until;
    }
    const uint64_t t_acc = syn + sim_net_latency(&w->net, ha, hb);
    const uint64_t t_up = t_acc + sim_net_latency(&w->net, hb, ha);
    const uint32_t r = ep_new(w, target, w->next_accept_id++, true);
    if (r == SIM_NONE32) return;
    w->eps[r].other = e;
    w->eps[r].listener = (uint8_t)listener; /* below 3 (find_listener) */
    w->eps[r].last_arrival_ns = t_acc;
    w->eps[e].other = r;
    w->eps[e].last_arrival_ns = t_up;
    world_push(w, t_acc, EVK_ACCEPT, target, r, 0);
    world_push(w, t_up, EVK_CONN_UP, node, e, 0);
}

uint32_t frame_on_wire(const sim_world *w, uint32_t e, uint32_t f, bool lost)
{
    return lost || w->eps[w->eps[e].other].stuck ? SIM_NONE32 : f;
}

/* A send's frame left at time sent: its record completes then (IO_DONE). NULL: no record. */
static bool op_cancelled(const sim_node *n, const sim_frame *f)
{
    /* Only the entries written so far, and none when the frame is newer than all of them. */
    if (n->cancelled_next == 0 || f->epoch > n->cancelled_max_epoch) return false;
    const uint32_t used = n->cancelled_next < 32u ? n->cancelled_next : 32u;
    for (uint32_t i = 0; i < used; i++) {
        if (n->cancelled[i][0] == f->epoch && n->cancelled[i][1] == f->tag &&
            n->cancelled[i][2] == f->seq && (f->epoch | f->tag | f->seq) != 0) {
            return true;
        }
    }
    return false;
}

/* Breaks endpoint e under its owner: pending I/O fails, CONN_CLOSED follows,
 * the remote end learns it after the frames in flight. */
void ep_break(sim_world *w, uint32_t e)
{
    sim_ep *ep = &w->eps[e];
    if (ep->state == EP_CLOSED || ep->torn) return;
    ep->torn = true;
    ios_fail_on_ep(w, ep->node, e);
    world_push(w, w->now, EVK_CONN_CLOSED, ep->node, e, 0);
    ep_close_remote(w, e);
}

/* Lands frame f into the posted receive io (the frame is consumed). */
static void recv_land(sim_world *w, uint32_t node, sim_io *io, uint32_t f)
{
    sim_frame *fr = &w->frames[f];
    uint8_t *dst = span_ptr(w, node, &io->dst);
    if (dst == NULL) return;
    if (fr->len != io->dst.length) {
        world_fail(w, SIM_CRASH,
                   "node %u: data frame of %llu bytes for a receive of %llu (epoch %llu seq %llu "
                   "step %u)",
                   node, (unsigned long long)fr->len, (unsigned long long)io->dst.length,
                   (unsigned long long)fr->epoch, (unsigned long long)fr->seq, fr->step);
        return;
    }
    if (fr->len > 0) memcpy(dst, fr->bytes, (size_t)fr->len);
    /* Canary (docs/simulator.md): every ring chunk of a run of other collectives lands with
     * one bit flipped; the collective checker must catch the first op that succeeds. */
    if ((w->cfg.canary & SIM_CANARY_CORRUPT_RECV) && w->cfg.coll_kind != 0 && fr->len > 0 &&
        io->type == CCOIP_ACT_RING_RECV) {
        dst[0] ^= 1u;
    }
    io->quant_in = fr->quant;
    io->delivered = true;
    world_push(w, w->now, EVK_IO_DONE, node, io->io_id, 0);
}

/* A control frame to node's machine as RECV on connection conn (the frame stays the caller's). */
static void feed_recv(sim_world *w, uint32_t node, uint64_t conn, const sim_frame *fr)
{
    ccoip_event ev;
    memset(&ev, 0, sizeof ev);
    ev.type = CCOIP_EV_RECV;
    ev.conn = conn;
    ev.data = fr->bytes;
    ev.len = fr->len;
    world_feed(w, node, &ev);
}

static void inbox_pop(sim_world *w, sim_ep *ep, bool free_it)
{
    if (free_it) frame_free(w, ep->inbox[0]);
    memmove(&ep->inbox[0], &ep->inbox[1], (size_t)(ep->inbox_len - 1u) * sizeof ep->inbox[0]);
    ep->inbox_len--;
}

/* Processes the frames at the head of e's stream (ccoip_sm.h, data
 * connections): control frames go to the core as RECV, ring chunks land in
 * the matching RING_RECV; a chunk with no RING_RECV yet holds the stream. */
void ep_pump(sim_world *w, uint32_t e)
{
    sim_ep *ep = &w->eps[e];
    if (ep->pumping) return;
    ep->pumping = true;
    const uint32_t node = ep->node;
    while (!w->failed && ep->inbox_len > 0 && ep->state != EP_CLOSED && !ep->torn &&
           node_runs(w, node)) {
        const uint32_t f = ep->inbox[0];
        sim_frame *fr = &w->frames[f];
        if (!fr->is_data) {
            inbox_pop(w, ep, false);
            feed_recv(w, node, ep->id, fr);
            frame_free(w, f);
            ep = &w->eps[e];
            continue;
        }
        sim_node *n = &w->nodes[node];
        if (fr->is_state) {
            sim_io *st = NULL;
            for (uint32_t i = 0; i < n->ios_len; i++) {
                if (n->ios[i].ep != e) continue;
                sim_io *io = io_at(n, i);
                if (io->kind == IO_RECV && io->ep == e && !io->delivered &&
                    io->type == CCOIP_ACT_STATE_RECV && io->tag == fr->tag && io->seq == fr->seq &&
                    io->chunk == fr->chunk) {
                    st = io;
                    break;
                }
            }
            if (st == NULL) break; /* held until its STATE_RECV is posted */
            inbox_pop(w, ep, false);
            if (fr->len != st->dst.length) {
                w->protocol_violations++;
                io_fail_now(w, node, st, pcclProtocolError);
                frame_free(w, f);
                ep_break(w, e);
                break;
            }
            recv_land(w, node, st, f);
            frame_free(w, f);
            continue;
        }
        if (fr->epoch < ep->max_recv_epoch || op_cancelled(n, fr)) {
            inbox_pop(w, ep, true); /* an older epoch's or a cancelled op's frame (§8.2) */
            continue;
        }
        sim_io *exact = NULL;
        sim_io *same_op = NULL;
        for (uint32_t i = 0; i < n->ios_len; i++) {
            if (n->ios[i].ep != e) continue;
            sim_io *io = io_at(n, i);
            if (io->kind != IO_RECV || io->ep != e || io->delivered ||
                io->type != CCOIP_ACT_RING_RECV) {
                continue;
            }
            if (io->epoch != fr->epoch || io->tag != fr->tag || io->seq != fr->seq) {
                continue;
            }
            if (io->chunk == fr->chunk && io->step == fr->step) {
                exact = io;
                break;
            }
            same_op = io;
        }
        if (exact != NULL) {
            inbox_pop(w, ep, false);
            recv_land(w, node, exact, f);
            frame_free(w, f);
            continue;
        }
        if (same_op != NULL) {
            /* Right op, wrong step or chunk: a protocol violation. */
            w->protocol_violations++;
            world_log(w,
                      "node %u: ring frame (epoch %llu seq %llu step %u chunk %u) does not match "
                      "its RING_RECV (step %u chunk %u): closing the connection",
                      node, (unsigned long long)fr->epoch, (unsigned long long)fr->seq, fr->step,
                      fr->chunk, same_op->step, same_op->chunk);
            io_fail_now(w, node, same_op, pcclProtocolError);
            inbox_pop(w, ep, true);
            ep_break(w, e);
            break;
        }
        break; /* held until its RING_RECV is posted */
    }
    ep->pumping = false;
}

/* A master's control frame a peer is about to take: the peer's id (HelloResult) and the
 * observers' m2p_recv. */
static void m2p_arrives(sim_world *w, uint32_t node, const uint8_t *frame, uint64_t len)
{
    ccoip_pb_master_to_peer m;
    if (!world_decode_m2p(w, frame, len, &m)) return;
    if (m.body_case == CCOIP_PB_MASTER_TO_PEER_BODY_HELLO) {
        w->nodes[node].peer_id = m.body.hello.peer_id;
    }
    SIM_OBS_EACH(w, o)
    {
        if (o->m2p_recv != NULL) o->m2p_recv(o->ctx, node, &m);
    }
}

void deliver(sim_world *w, uint32_t f)
{
    sim_frame *fr = &w->frames[f];
    const uint32_t e = fr->dst_ep;
    sim_ep *ep = &w->eps[e];
    if (fr->torn || ep->state == EP_CLOSED || ep->torn || !node_runs(w, ep->node)) {
        frame_free(w, f);
        return;
    }
    if (!fr->is_data && ep->inbox_len == 0) {
        if (!w->nodes[ep->node].is_master) m2p_arrives(w, ep->node, fr->bytes, fr->len);
        feed_recv(w, ep->node, ep->id, fr);
        frame_free(w, f);
        return;
    }
    if (ep->inbox_len >= SIM_INBOX_MAX) {
        world_fail(w, SIM_CRASH, "node %u: more than %u frames held on one connection", ep->node,
                   SIM_INBOX_MAX);
        frame_free(w, f);
        return;
    }
    if (ep->inbox_len == ep->inbox_cap) {
        /* Grown on demand: most connections never hold more than a few frames, and a long run
         * makes millions of connections. */
        const uint32_t ncap = ep->inbox_cap == 0 ? 4u : 2u * ep->inbox_cap;
        uint32_t *x = realloc(ep->inbox, ncap * sizeof *ep->inbox);
        if (x != NULL) {
            ep->inbox = x;
            ep->inbox_cap = (uint16_t)ncap; /* at most SIM_INBOX_MAX */
        }
        if (x == NULL) {
            world_fail(w, SIM_CRASH, "out of memory (inbox)");
            return;
        }
    }
    ep->inbox[ep->inbox_len++] = f;
    ep_pump(w, e);
}

/* STATE_SEND: the bytes of src as one STATE_DATA frame (tag, seq, chunk). */

void act_close(sim_world *w, uint32_t node, const ccoip_action *a)
{
    const uint32_t e = ep_lookup(w, node, a->conn);
    if (e == SIM_NONE32 || w->eps[e].state == EP_CLOSED) return;
    w->eps[e].state = EP_CLOSED;
    ios_fail_on_ep(w, node, e);
    ep_close_remote(w, e);
}
