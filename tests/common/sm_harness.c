/*
 * sm_harness.c — see sm_harness.h. Test code: allocation, abort() on a
 * harness invariant, no attempt at speed.
 */
#include "sm_harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ccoip_dtype.h"
#include "ccoip_exec.h"
#include "ccoip_frame.h"
#include "ccoip_hash.h"
#include "ccoip_quant.h"
#include "ccoip_reduce.h"

#define H_MASTER      (-1)
#define H_PORT_BASE   20000u
#define H_RELAY_PORT  19999u /* the master's relay listener (smh_enable_relay) */
#define H_MAX_POSTED  256u
#define H_MAX_SLOTS   64u
#define H_MAX_TENSORS 16u
#define H_MAX_IO_TAGS 32u

static void h_die(const char *what)
{
    fprintf(stderr, "sm_harness: %s\n", what);
    abort();
}

typedef struct h_frame {
    bool state; /* STATE_DATA (else RING_CHUNK) */
    uint64_t epoch, tag, seq;
    uint32_t step, chunk;
    ccoip_quant_meta quant;
    uint8_t *bytes;
    uint64_t len;
} h_frame;

typedef struct h_link {
    bool alive;
    bool p2p;  /* dialled to a peer's p2p listener */
    bool hung; /* smh_hang_link: connected, but the acceptor never sees it nor answers */
    /* A connection to the master's relay (docs/protocol.md §8.6): the master reads its first
     * frame (the join) only; later frames wait in held[] for the splice. */
    bool rly;
    bool rly_joined;
    uint8_t **held;
    uint64_t *held_len;
    uint32_t nheld, capheld;
    /* A spliced pair of relay connections: both master-side conns hear of its end. */
    bool spliced;
    uint64_t spl_m1, spl_m2;
    int a_node; /* dialer */
    uint64_t a_conn;
    int b_node; /* acceptor */
    uint64_t b_conn;
    h_frame *frames; /* a -> b ring chunks / state data */
    uint32_t nframes, capframes;
    h_frame *bframes; /* b -> a: state data, ring frames sent by the accepting end */
    uint32_t nbframes, capbframes;
} h_link;

typedef struct h_cmd {
    bool used;
    uint64_t id;
    bool done;
    pcclResult_t result;
    uint32_t world;
    bool pending;
    uint32_t notifies;
    const void *send;
    void *recv;
    uint64_t send_bytes, recv_bytes;
    /* SYNC_SHARED_STATE */
    uint8_t *tensors[H_MAX_TENSORS];
    uint64_t tensor_bytes[H_MAX_TENSORS];
    uint32_t ntensors;
    uint64_t rx, tx, revision;
} h_cmd;

typedef struct h_slot {
    int cmd; /* index into cmds, -1 free (its regions: h_peer.xs, the core's executor) */
    uint32_t gen;
    uint64_t epoch, tag, seq; /* an optimistic op's frames differ only by epoch (seq 0) */
    bool has_tagseq;
} h_slot;

typedef struct h_posted {
    bool state;
    uint64_t io_id;
    uint32_t slot;
    uint64_t conn, epoch, tag, seq;
    uint32_t step, chunk;
    ccoip_span_ref dst;
} h_posted;

typedef struct h_cancelled {
    uint64_t epoch, tag, seq;
} h_cancelled;

typedef struct h_peer {
    ccoip_peer *p;
    bool dead, frozen;
    h_cmd cmds[SMH_MAX_CMDS];
    h_slot slots[H_MAX_SLOTS];
    ccoip_exec_slot xs[H_MAX_SLOTS]; /* the regions each bound slot maps (ccoip_exec.h) */
    h_posted posted[H_MAX_POSTED];
    uint32_t nposted;
    h_cancelled cancelled[256];
    uint32_t ncancelled;
    uint32_t kill_on_send, sends;
    uint32_t kill_on_state_send, state_sends;
    uint32_t corrupt_state_sends; /* flip a byte in that many next non-empty STATE_SENDs */
    /* The connection of the latest RING_SEND / RING_RECV per tag (smh_ring_conns). */
    uint64_t io_tag[H_MAX_IO_TAGS], io_tx[H_MAX_IO_TAGS], io_rx[H_MAX_IO_TAGS];
    uint32_t nio_tags;
    /* Every distinct connection of the tag's RING_SENDs / RING_RECVs (smh_ring_conn_sets). */
    uint64_t io_txs[H_MAX_IO_TAGS][CCOIP_P2P_POOL_MAX], io_rxs[H_MAX_IO_TAGS][CCOIP_P2P_POOL_MAX];
    uint32_t io_ntx[H_MAX_IO_TAGS], io_nrx[H_MAX_IO_TAGS];
} h_peer;

/* Adds conn to the set set[0 .. *n) (at most CCOIP_P2P_POOL_MAX). */
static void h_set_add(uint64_t *set, uint32_t *n, uint64_t conn)
{
    for (uint32_t k = 0; k < *n; k++) {
        if (set[k] == conn) return;
    }
    if (*n < CCOIP_P2P_POOL_MAX) set[(*n)++] = conn;
}

/* The index of tag in peer's I/O records, or nio_tags when it never ran there. */
static uint32_t h_io_index(const h_peer *hp, uint64_t tag)
{
    uint32_t i = 0;
    while (i < hp->nio_tags && hp->io_tag[i] != tag)
        i++;
    return i;
}

/* Records conn as the latest RING_SEND (tx) or RING_RECV connection of tag. */
static void h_note_io(h_peer *hp, uint64_t tag, uint64_t conn, bool tx)
{
    const uint32_t i = h_io_index(hp, tag);
    if (i == hp->nio_tags) {
        if (hp->nio_tags == H_MAX_IO_TAGS) return;
        hp->nio_tags++;
        hp->io_tag[i] = tag;
        hp->io_tx[i] = hp->io_rx[i] = CCOIP_CONN_NONE;
        hp->io_ntx[i] = hp->io_nrx[i] = 0;
    }
    if (tx) {
        hp->io_tx[i] = conn;
        h_set_add(hp->io_txs[i], &hp->io_ntx[i], conn);
    } else {
        hp->io_rx[i] = conn;
        h_set_add(hp->io_rxs[i], &hp->io_nrx[i], conn);
    }
}

/* A PROBE that hangs (smh_hang_probe) until the pair's hang is cleared. */
typedef struct h_held_probe {
    uint32_t from, to;
    uint64_t io_id;
} h_held_probe;

/* What the master sent a peer (smh_master_sent). */
typedef struct h_m2p {
    uint32_t peer;
    int32_t body, status, reason;
} h_m2p;

typedef struct h_ev {
    int node;
    ccoip_event ev;
    uint8_t *data;
    uint32_t slot;
    uint32_t gen;
    bool has_gen;
} h_ev;

struct smh {
    ccoip_master *m;
    bool m_dead, m_frozen;
    ccoip_peer_config pcfg;
    h_peer peers[SMH_MAX_PEERS];
    uint32_t npeers;
    h_link *links;
    uint32_t nlinks, caplinks;
    h_ev *q;
    uint64_t qhead, qcount, qcap;
    uint64_t now;
    uint64_t next_cmd;
    uint64_t next_accept_conn;
    bool blocked[SMH_MAX_PEERS][SMH_MAX_PEERS];
    bool nat[SMH_MAX_PEERS]; /* smh_nat_peer: dials to it never connect */
    bool relay;              /* smh_enable_relay: the master relays on H_RELAY_PORT */
    bool probe_fail[SMH_MAX_PEERS][SMH_MAX_PEERS];
    bool hang_link[SMH_MAX_PEERS][SMH_MAX_PEERS];
    bool hang_probe[SMH_MAX_PEERS][SMH_MAX_PEERS];
    h_held_probe *held;
    uint32_t nheld, capheld;
    h_m2p *m2p;
    uint32_t nm2p, capm2p;
    uint64_t us_per_mib[SMH_MAX_PEERS][SMH_MAX_PEERS]; /* 0: 1000 */
    uint32_t probes;
    char **logs;
    uint32_t nlogs, caplogs;
    uint32_t step_errors;
};

/* ------------------------------------------------------------------------ */

static void h_push(smh *h, int node, const ccoip_event *ev, const uint8_t *data, uint64_t len)
{
    if (h->qcount == h->qcap) {
        uint64_t ncap = h->qcap ? h->qcap * 2u : 256u;
        h_ev *nq = calloc((size_t)ncap, sizeof(h_ev));
        if (nq == NULL) h_die("oom");
        for (uint64_t i = 0; i < h->qcount; i++)
            nq[i] = h->q[(h->qhead + i) % h->qcap];
        free(h->q);
        h->q = nq;
        h->qcap = ncap;
        h->qhead = 0;
    }
    h_ev *e = &h->q[(h->qhead + h->qcount) % h->qcap];
    memset(e, 0, sizeof(*e));
    e->node = node;
    e->ev = *ev;
    if (len > 0) {
        e->data = malloc((size_t)len);
        if (e->data == NULL) h_die("oom");
        memcpy(e->data, data, (size_t)len);
    }
    e->ev.data = NULL;
    e->ev.len = len;
    h->qcount++;
}

static void h_push_done_hash(smh *h, uint32_t peer, ccoip_event_type t, uint64_t io, uint32_t slot,
                             pcclResult_t r, const ccoip_quant_meta *q, const ccoip_quant_meta *qo,
                             uint64_t hash)
{
    ccoip_event ev;
    memset(&ev, 0, sizeof(ev));
    ev.type = t;
    ev.done.io_id = io;
    ev.done.result = r;
    ev.done.hash = hash;
    if (q != NULL) ev.done.quant = *q;
    if (qo != NULL) ev.done.quant_out = *qo;
    h_push(h, (int)peer, &ev, NULL, 0);
    h_ev *e = &h->q[(h->qhead + h->qcount - 1u) % h->qcap];
    e->slot = slot;
    e->gen = h->peers[peer].slots[slot].gen;
    e->has_gen = true;
}

static void h_push_done(smh *h, uint32_t peer, ccoip_event_type t, uint64_t io, uint32_t slot,
                        pcclResult_t r, const ccoip_quant_meta *q, const ccoip_quant_meta *qo)
{
    h_push_done_hash(h, peer, t, io, slot, r, q, qo, 0);
}

static void h_push_simple(smh *h, int node, ccoip_event_type t, uint64_t conn)
{
    ccoip_event ev;
    memset(&ev, 0, sizeof(ev));
    ev.type = t;
    ev.conn = conn;
    h_push(h, node, &ev, NULL, 0);
}

static bool h_node_alive(const smh *h, int node)
{
    if (node == H_MASTER) return !h->m_dead;
    return !h->peers[node].dead;
}

static h_link *h_link_of(smh *h, int node, uint64_t conn, bool *is_a)
{
    for (uint32_t i = 0; i < h->nlinks; i++) {
        h_link *l = &h->links[i];
        if (!l->alive) continue;
        if (l->a_node == node && l->a_conn == conn) {
            *is_a = true;
            return l;
        }
        if (l->b_node == node && l->b_conn == conn) {
            *is_a = false;
            return l;
        }
    }
    return NULL;
}

static h_link *h_link_new(smh *h)
{
    if (h->nlinks == h->caplinks) {
        uint32_t ncap = h->caplinks ? h->caplinks * 2u : 64u;
        h_link *nl = realloc(h->links, ncap * sizeof(h_link));
        if (nl == NULL) h_die("oom");
        h->links = nl;
        h->caplinks = ncap;
    }
    h_link *l = &h->links[h->nlinks++];
    memset(l, 0, sizeof(*l));
    l->alive = true;
    return l;
}

static void h_fail_posted(smh *h, int node, uint64_t conn)
{
    if (node == H_MASTER) return;
    h_peer *hp = &h->peers[node];
    for (uint32_t i = 0; i < hp->nposted;) {
        if (hp->posted[i].conn == conn) {
            h_push_done(h, (uint32_t)node, CCOIP_EV_IO_DONE, hp->posted[i].io_id,
                        hp->posted[i].slot, pcclRankConnectionLost, NULL, NULL);
            hp->posted[i] = hp->posted[--hp->nposted];
        } else {
            i++;
        }
    }
}

/* Drops the frames a relay connection held for its splice. */
static void h_held_free(h_link *l)
{
    for (uint32_t i = 0; i < l->nheld; i++)
        free(l->held[i]);
    free(l->held);
    free(l->held_len);
    l->held = NULL;
    l->held_len = NULL;
    l->nheld = l->capheld = 0;
}

/* Breaks a link; the surviving side(s) other than `closer` learn of it. */
static void h_link_break(smh *h, h_link *l, int closer)
{
    l->alive = false;
    for (uint32_t i = 0; i < l->nframes; i++)
        free(l->frames[i].bytes);
    free(l->frames);
    l->frames = NULL;
    l->nframes = l->capframes = 0;
    for (uint32_t i = 0; i < l->nbframes; i++)
        free(l->bframes[i].bytes);
    free(l->bframes);
    l->bframes = NULL;
    l->nbframes = l->capbframes = 0;
    if (l->a_node != closer && h_node_alive(h, l->a_node)) {
        h_fail_posted(h, l->a_node, l->a_conn);
        h_push_simple(h, l->a_node, CCOIP_EV_CONN_CLOSED, l->a_conn);
    }
    if (l->b_node != closer && !l->hung && h_node_alive(h, l->b_node)) {
        h_fail_posted(h, l->b_node, l->b_conn);
        h_push_simple(h, l->b_node, CCOIP_EV_CONN_CLOSED, l->b_conn);
    }
    h_held_free(l);
    if (l->spliced && h_node_alive(h, H_MASTER)) {
        h_push_simple(h, H_MASTER, CCOIP_EV_CONN_CLOSED, l->spl_m1);
        h_push_simple(h, H_MASTER, CCOIP_EV_CONN_CLOSED, l->spl_m2);
    }
}

/* A frame a peer sent on a relay connection the master has not spliced yet: held. */
static void h_hold(h_link *l, const uint8_t *data, uint64_t len)
{
    if (l->nheld == l->capheld) {
        l->capheld = l->capheld ? 2u * l->capheld : 8u;
        l->held = realloc(l->held, l->capheld * sizeof(uint8_t *));
        l->held_len = realloc(l->held_len, l->capheld * sizeof(uint64_t));
        if (l->held == NULL || l->held_len == NULL) h_die("oom");
    }
    l->held[l->nheld] = malloc(len > 0 ? (size_t)len : 1u);
    if (l->held[l->nheld] == NULL) h_die("oom");
    memcpy(l->held[l->nheld], data, (size_t)len);
    l->held_len[l->nheld++] = len;
}

/* ------------------------------------------------------------------------ */
/* Buffers and kernels                                                       */
/* ------------------------------------------------------------------------ */

static ccoip_exec h_exec(h_peer *hp)
{
    ccoip_exec x = {hp->xs, H_MAX_SLOTS};
    return x;
}

static uint8_t *h_region(smh *h, uint32_t peer, const ccoip_span_ref *s)
{
    const ccoip_exec x = h_exec(&h->peers[peer]);
    const char *why = "bad span";
    uint8_t *p = ccoip_exec_span(&x, s, &why);
    if (p == NULL) h_die(why);
    return p;
}

/* A kernel action through the core's executor; its KERNEL_DONE is queued. */
static void h_kernel(smh *h, uint32_t peer, const ccoip_action *a)
{
    const ccoip_exec x = h_exec(&h->peers[peer]);
    ccoip_kernel k;
    const char *why = "bad kernel";
    if (ccoip_kernel_prepare(&x, a, &k, &why) != pcclSuccess) h_die(why);
    const pcclResult_t r = ccoip_kernel_run(&k);
    h_push_done_hash(h, peer, CCOIP_EV_KERNEL_DONE, a->io_id, a->op_slot, r, NULL,
                     a->type == CCOIP_ACT_QUANTIZE ? &k.quant_out : NULL, k.hash);
}

static int h_cmd_index(h_peer *hp, uint64_t id)
{
    for (int i = 0; i < (int)SMH_MAX_CMDS; i++) {
        if (hp->cmds[i].used && hp->cmds[i].id == id) return i;
    }
    return -1;
}

static void h_match_dir(smh *h, h_link *l, bool to_b)
{
    if (!l->alive || l->b_node == H_MASTER) return;
    int node = to_b ? l->b_node : l->a_node;
    uint64_t conn = to_b ? l->b_conn : l->a_conn;
    h_frame **framesp = to_b ? &l->frames : &l->bframes;
    uint32_t *nframesp = to_b ? &l->nframes : &l->nbframes;
    h_peer *hp = &h->peers[node];
    while (*nframesp > 0) {
        h_frame *f = &(*framesp)[0];
        bool drop = false, matched = false;
        for (uint32_t c = 0; c < hp->ncancelled; c++) {
            if ((f->state || hp->cancelled[c].epoch == f->epoch) &&
                hp->cancelled[c].tag == f->tag && hp->cancelled[c].seq == f->seq) {
                drop = true;
            }
        }
        for (uint32_t i = 0; i < hp->nposted && !drop; i++) {
            h_posted *pr = &hp->posted[i];
            if (pr->conn != conn || pr->state != f->state) continue;
            if (f->state) {
                if (pr->tag != f->tag || pr->seq != f->seq || pr->chunk != f->chunk) continue;
                if (pr->dst.length != f->len) h_die("state frame does not fit its STATE_RECV");
                memcpy(h_region(h, (uint32_t)node, &pr->dst), f->bytes, (size_t)f->len);
                h_push_done(h, (uint32_t)node, CCOIP_EV_IO_DONE, pr->io_id, pr->slot, pcclSuccess,
                            NULL, NULL);
                *pr = hp->posted[--hp->nposted];
                matched = true;
                break;
            }
            if (f->epoch < pr->epoch) {
                drop = true;
                break;
            }
            if (pr->epoch == f->epoch && pr->tag == f->tag && pr->seq == f->seq &&
                pr->step == f->step) {
                /* A step may post several receives (chunks) on one connection (contract v11):
                 * the frame goes to the one with its chunk. */
                for (uint32_t j = i + 1u; j < hp->nposted && pr->chunk != f->chunk; j++) {
                    h_posted *q = &hp->posted[j];
                    if (q->conn == conn && !q->state && q->epoch == f->epoch && q->tag == f->tag &&
                        q->seq == f->seq && q->step == f->step && q->chunk == f->chunk) {
                        pr = q;
                        i = j;
                    }
                }
                if (pr->chunk != f->chunk || pr->dst.length != f->len) {
                    /* A protocol violation (e.g. an optimistic ring of members that disagree
                     * on the count): the connection closes, its I/O fails (ccoip_sm.h). */
                    h_link_break(h, l, -1);
                    return;
                }
                memcpy(h_region(h, (uint32_t)node, &pr->dst), f->bytes, (size_t)f->len);
                h_push_done(h, (uint32_t)node, CCOIP_EV_IO_DONE, pr->io_id, pr->slot, pcclSuccess,
                            &f->quant, NULL);
                *pr = hp->posted[--hp->nposted];
                matched = true;
                break;
            }
        }
        if (!drop && !matched) return; /* held until its RING_RECV is posted */
        free(f->bytes);
        memmove(&(*framesp)[0], &(*framesp)[1], (size_t)(*nframesp - 1u) * sizeof(h_frame));
        (*nframesp)--;
    }
}

static void h_match(smh *h, h_link *l)
{
    h_match_dir(h, l, true);
    h_match_dir(h, l, false);
}

static h_frame *h_frame_push(h_link *l, bool to_b)
{
    h_frame **framesp = to_b ? &l->frames : &l->bframes;
    uint32_t *n = to_b ? &l->nframes : &l->nbframes;
    uint32_t *cap = to_b ? &l->capframes : &l->capbframes;
    if (*n == *cap) {
        uint32_t ncap = *cap ? *cap * 2u : 16u;
        h_frame *nf = realloc(*framesp, ncap * sizeof(h_frame));
        if (nf == NULL) h_die("oom");
        *framesp = nf;
        *cap = ncap;
    }
    h_frame *f = &(*framesp)[(*n)++];
    memset(f, 0, sizeof(*f));
    return f;
}

static void h_kill_peer_now(smh *h, uint32_t peer);

static void h_peer_action(smh *h, uint32_t peer, const ccoip_action *a)
{
    h_peer *hp = &h->peers[peer];
    switch (a->type) {
    case CCOIP_ACT_SPLICE:
        h_die("a peer emitted SPLICE (master only)");
        return;
    case CCOIP_ACT_LISTEN:
        if (ccoip_peer_set_port(hp->p, a->listener, H_PORT_BASE + 100u * a->listener + peer,
                                NULL) != pcclSuccess) {
            h_die("set_port");
        }
        return;
    case CCOIP_ACT_CONNECT: {
        if (a->conn == CCOIP_PEER_MASTER_CONN) {
            if (h->m_dead) {
                h_push_simple(h, (int)peer, CCOIP_EV_CONN_CLOSED, a->conn);
                return;
            }
            h_link *l = h_link_new(h);
            l->a_node = (int)peer;
            l->a_conn = a->conn;
            l->b_node = H_MASTER;
            l->b_conn = CCOIP_CONN_ACCEPTED_BASE + h->next_accept_conn++;
            ccoip_event ev;
            memset(&ev, 0, sizeof(ev));
            ev.type = CCOIP_EV_CONN_UP;
            ev.conn = l->b_conn;
            ev.accepted = true;
            ev.remote_ip[0] = 127;
            ev.remote_ip[3] = 1;
            ev.remote_ip_len = 4;
            h_push(h, H_MASTER, &ev, NULL, 0);
            h_push_simple(h, (int)peer, CCOIP_EV_CONN_UP, a->conn);
            return;
        }
        if (a->port == H_RELAY_PORT && h->relay && !h->m_dead) {
            h_link *l = h_link_new(h);
            l->a_node = (int)peer;
            l->a_conn = a->conn;
            l->b_node = H_MASTER;
            l->b_conn = CCOIP_CONN_ACCEPTED_BASE + h->next_accept_conn++;
            l->rly = true;
            ccoip_event ev;
            memset(&ev, 0, sizeof(ev));
            ev.type = CCOIP_EV_CONN_UP;
            ev.conn = l->b_conn;
            ev.accepted = true;
            ev.listener = CCOIP_MASTER_LISTENER_RELAY;
            h_push(h, H_MASTER, &ev, NULL, 0);
            h_push_simple(h, (int)peer, CCOIP_EV_CONN_UP, a->conn);
            return;
        }
        uint32_t target = (a->port - H_PORT_BASE) % 100u;
        uint32_t listener = (a->port - H_PORT_BASE) / 100u;
        if (a->port < H_PORT_BASE || target >= h->npeers || h->peers[target].dead ||
            h->blocked[peer][target]) {
            h_push_simple(h, (int)peer, CCOIP_EV_CONN_CLOSED, a->conn);
            return;
        }
        h_link *l = h_link_new(h);
        l->a_node = (int)peer;
        l->a_conn = a->conn;
        l->b_node = (int)target;
        l->b_conn = CCOIP_CONN_ACCEPTED_BASE + h->next_accept_conn++;
        l->p2p = listener == CCOIP_LISTENER_P2P;
        if (h->nat[target]) return; /* the SYN is dropped: no event, ever */
        if (h->hang_link[peer][target]) {
            /* A hung acceptor (its kernel accepted; the process never answers). */
            l->hung = true;
            h_push_simple(h, (int)peer, CCOIP_EV_CONN_UP, a->conn);
            return;
        }
        ccoip_event ev;
        memset(&ev, 0, sizeof(ev));
        ev.type = CCOIP_EV_CONN_UP;
        ev.conn = l->b_conn;
        ev.accepted = true;
        ev.listener = listener;
        h_push(h, (int)target, &ev, NULL, 0);
        h_push_simple(h, (int)peer, CCOIP_EV_CONN_UP, a->conn);
        return;
    }
    case CCOIP_ACT_SEND: {
        bool is_a;
        h_link *l = h_link_of(h, (int)peer, a->conn, &is_a);
        if (l == NULL || l->hung) return;
        if (l->rly && l->rly_joined && a->src.length == 0) {
            h_hold(l, a->data, a->len); /* the master reads no more than the join */
            return;
        }
        if (l->rly) l->rly_joined = true;
        ccoip_event ev;
        memset(&ev, 0, sizeof(ev));
        ev.type = CCOIP_EV_RECV;
        ev.conn = is_a ? l->b_conn : l->a_conn;
        if (a->src.length == 0) {
            h_push(h, is_a ? l->b_node : l->a_node, &ev, a->data, a->len);
            return;
        }
        /* v9: the frame goes on with the span's bytes. */
        uint8_t *frame = malloc((size_t)(a->len + a->src.length));
        if (frame == NULL) h_die("oom");
        memcpy(frame, a->data, (size_t)a->len);
        memcpy(frame + a->len, h_region(h, peer, &a->src), (size_t)a->src.length);
        h_push(h, is_a ? l->b_node : l->a_node, &ev, frame, a->len + a->src.length);
        free(frame);
        return;
    }
    case CCOIP_ACT_WRITE: {
        const ccoip_exec x = h_exec(hp);
        const char *why = "bad WRITE";
        if (ccoip_exec_write(&x, a, &why) != pcclSuccess) h_die(why);
        return;
    }
    case CCOIP_ACT_CLOSE: {
        bool is_a;
        h_link *l = h_link_of(h, (int)peer, a->conn, &is_a);
        if (l != NULL) h_link_break(h, l, (int)peer);
        return;
    }
    case CCOIP_ACT_NOTIFY: {
        int ci = h_cmd_index(hp, a->cmd_id);
        if (ci < 0) h_die("NOTIFY for an unknown command");
        h_cmd *c = &hp->cmds[ci];
        c->notifies++;
        c->done = true;
        c->result = a->result;
        c->world = a->world_size;
        c->pending = a->peers_pending;
        c->rx = a->rx_bytes;
        c->tx = a->tx_bytes;
        c->revision = a->revision;
        return;
    }
    case CCOIP_ACT_OP_BEGIN: {
        int ci = h_cmd_index(hp, a->cmd_id);
        if (ci < 0 || a->op_slot >= H_MAX_SLOTS || hp->slots[a->op_slot].cmd >= 0) {
            h_die("bad OP_BEGIN");
        }
        h_slot *sl = &hp->slots[a->op_slot];
        sl->cmd = ci;
        sl->has_tagseq = false;
        const h_cmd *c = &hp->cmds[ci];
        ccoip_exec_slot *xs = &hp->xs[a->op_slot];
        memset(xs, 0, sizeof *xs);
        xs->used = true;
        xs->cmd_id = a->cmd_id;
        xs->send = (uint8_t *)(uintptr_t)c->send;
        xs->recv = c->recv;
        xs->send_bytes = c->send_bytes;
        xs->recv_bytes = c->recv_bytes;
        xs->tensors = c->tensors;
        xs->tensor_bytes = c->tensor_bytes;
        xs->ntensors = c->ntensors;
        xs->scratch = calloc((size_t)a->scratch_bytes + 1u, 1);
        xs->scratch_bytes = a->scratch_bytes;
        xs->backup = calloc((size_t)a->backup_bytes + 1u, 1);
        xs->backup_bytes = a->backup_bytes;
        return;
    }
    case CCOIP_ACT_OP_END: {
        h_slot *sl = &hp->slots[a->op_slot];
        free(hp->xs[a->op_slot].scratch);
        free(hp->xs[a->op_slot].backup);
        memset(&hp->xs[a->op_slot], 0, sizeof hp->xs[a->op_slot]);
        sl->cmd = -1;
        sl->gen++;
        return;
    }
    case CCOIP_ACT_CANCEL: {
        h_slot *sl = &hp->slots[a->op_slot];
        sl->gen++;
        for (uint32_t i = 0; i < hp->nposted;) {
            if (hp->posted[i].slot == a->op_slot) {
                hp->posted[i] = hp->posted[--hp->nposted];
            } else {
                i++;
            }
        }
        if (sl->has_tagseq && hp->ncancelled < 256u) {
            hp->cancelled[hp->ncancelled].epoch = sl->epoch;
            hp->cancelled[hp->ncancelled].tag = sl->tag;
            hp->cancelled[hp->ncancelled].seq = sl->seq;
            hp->ncancelled++;
        }
        return;
    }
    case CCOIP_ACT_LOG:
        if (h->nlogs == h->caplogs) {
            uint32_t ncap = h->caplogs ? h->caplogs * 2u : 256u;
            char **nl = realloc(h->logs, ncap * sizeof(char *));
            if (nl == NULL) h_die("oom");
            h->logs = nl;
            h->caplogs = ncap;
        }
        h->logs[h->nlogs] = malloc((size_t)a->len + 1u);
        memcpy(h->logs[h->nlogs], a->data, (size_t)a->len + 1u);
        h->nlogs++;
        return;
    case CCOIP_ACT_RING_SEND: {
        h_slot *sl = &hp->slots[a->op_slot];
        sl->epoch = a->epoch;
        sl->tag = a->tag;
        sl->seq = a->seq;
        sl->has_tagseq = true;
        h_note_io(hp, a->tag, a->conn, true);
        hp->sends++;
        if (hp->kill_on_send != 0 && hp->sends == hp->kill_on_send) {
            h_kill_peer_now(h, peer);
            return;
        }
        bool is_a;
        h_link *l = h_link_of(h, (int)peer, a->conn, &is_a);
        if (l == NULL) {
            if (a->io_id != 0) /* quiet sends (contract v8) complete with nothing */
                h_push_done(h, peer, CCOIP_EV_IO_DONE, a->io_id, a->op_slot, pcclRankConnectionLost,
                            NULL, NULL);
            return;
        }
        /* Either end of a ring link sends (the halving–doubling and the both-ways direct
         * all-reduce use the link against its dialling direction too). */
        h_frame *f = h_frame_push(l, is_a);
        f->epoch = a->epoch;
        f->tag = a->tag;
        f->seq = a->seq;
        f->step = a->step;
        f->chunk = a->chunk;
        f->quant = a->quant;
        f->len = a->src.length;
        f->bytes = malloc((size_t)f->len + 1u);
        memcpy(f->bytes, h_region(h, peer, &a->src), (size_t)f->len);
        if (a->io_id != 0)
            h_push_done(h, peer, CCOIP_EV_IO_DONE, a->io_id, a->op_slot, pcclSuccess, NULL, NULL);
        h_match(h, l);
        return;
    }
    case CCOIP_ACT_RING_RECV: {
        h_slot *sl = &hp->slots[a->op_slot];
        sl->epoch = a->epoch;
        sl->tag = a->tag;
        sl->seq = a->seq;
        sl->has_tagseq = true;
        h_note_io(hp, a->tag, a->conn, false);
        bool is_a;
        h_link *l = h_link_of(h, (int)peer, a->conn, &is_a);
        if (l == NULL) {
            h_push_done(h, peer, CCOIP_EV_IO_DONE, a->io_id, a->op_slot, pcclRankConnectionLost,
                        NULL, NULL);
            return;
        }
        if (hp->nposted == H_MAX_POSTED) h_die("too many posted receives");
        h_posted *pr = &hp->posted[hp->nposted++];
        memset(pr, 0, sizeof(*pr));
        pr->io_id = a->io_id;
        pr->slot = a->op_slot;
        pr->conn = a->conn;
        pr->epoch = a->epoch;
        pr->tag = a->tag;
        pr->seq = a->seq;
        pr->step = a->step;
        pr->chunk = a->chunk;
        pr->dst = a->dst;
        h_match(h, l);
        return;
    }
    case CCOIP_ACT_STATE_SEND: {
        h_slot *sl = &hp->slots[a->op_slot];
        sl->epoch = a->epoch;
        sl->tag = a->tag;
        sl->seq = a->seq;
        sl->has_tagseq = true;
        hp->state_sends++;
        if (hp->kill_on_state_send != 0 && hp->state_sends == hp->kill_on_state_send) {
            h_kill_peer_now(h, peer);
            return;
        }
        bool is_a;
        h_link *l = h_link_of(h, (int)peer, a->conn, &is_a);
        if (l == NULL) {
            h_push_done(h, peer, CCOIP_EV_IO_DONE, a->io_id, a->op_slot, pcclRankConnectionLost,
                        NULL, NULL);
            return;
        }
        h_frame *f = h_frame_push(l, is_a);
        f->state = true;
        f->tag = a->tag;
        f->seq = a->seq;
        f->chunk = a->chunk;
        f->len = a->src.length;
        f->bytes = malloc((size_t)f->len + 1u);
        memcpy(f->bytes, h_region(h, peer, &a->src), (size_t)f->len);
        if (hp->corrupt_state_sends > 0 && f->len > 0) {
            hp->corrupt_state_sends--;
            f->bytes[0] ^= 0x40u;
        }
        h_push_done(h, peer, CCOIP_EV_IO_DONE, a->io_id, a->op_slot, pcclSuccess, NULL, NULL);
        h_match(h, l);
        return;
    }
    case CCOIP_ACT_STATE_RECV: {
        h_slot *sl = &hp->slots[a->op_slot];
        sl->epoch = a->epoch;
        sl->tag = a->tag;
        sl->seq = a->seq;
        sl->has_tagseq = true;
        bool is_a;
        h_link *l = h_link_of(h, (int)peer, a->conn, &is_a);
        if (l == NULL) {
            h_push_done(h, peer, CCOIP_EV_IO_DONE, a->io_id, a->op_slot, pcclRankConnectionLost,
                        NULL, NULL);
            return;
        }
        if (hp->nposted == H_MAX_POSTED) h_die("too many posted receives");
        h_posted *pr = &hp->posted[hp->nposted++];
        memset(pr, 0, sizeof(*pr));
        pr->state = true;
        pr->io_id = a->io_id;
        pr->slot = a->op_slot;
        pr->conn = a->conn;
        pr->tag = a->tag;
        pr->seq = a->seq;
        pr->chunk = a->chunk;
        pr->dst = a->dst;
        h_match(h, l);
        return;
    }
    case CCOIP_ACT_PROBE: {
        h->probes++;
        uint32_t target = (a->port - H_PORT_BASE) % 100u;
        ccoip_event ev;
        memset(&ev, 0, sizeof(ev));
        ev.type = CCOIP_EV_PROBE_DONE;
        ev.done.io_id = a->io_id;
        /* blocked[][] (p2p CONNECT) does not affect probes: smh_fail_probe does. */
        if (a->port >= H_PORT_BASE && target < h->npeers && h->hang_probe[peer][target]) {
            if (h->nheld == h->capheld) {
                h->capheld = h->capheld ? 2u * h->capheld : 16u;
                h->held = realloc(h->held, h->capheld * sizeof(h_held_probe));
                if (h->held == NULL) h_die("oom");
            }
            h->held[h->nheld++] = (h_held_probe){peer, target, a->io_id};
            return;
        }
        if (a->port < H_PORT_BASE || target >= h->npeers || h->peers[target].dead ||
            h->probe_fail[peer][target] || h->nat[target]) {
            ev.done.result = pcclRankConnectionFailed;
        } else {
            uint64_t c = h->us_per_mib[peer][target] ? h->us_per_mib[peer][target] : 1000u;
            ev.done.result = pcclSuccess;
            ev.done.probe_bytes = a->count;
            ev.done.duration_us = (a->count >> 20) * c;
        }
        h_push(h, (int)peer, &ev, NULL, 0);
        return;
    }
    case CCOIP_ACT_COPY:
    case CCOIP_ACT_REDUCE:
    case CCOIP_ACT_GATHER_REDUCE:
    case CCOIP_ACT_FINALIZE:
    case CCOIP_ACT_QUANTIZE:
    case CCOIP_ACT_DEQUANTIZE:
    case CCOIP_ACT_HASH:
    case CCOIP_ACT_SCALE:
        h_kernel(h, peer, a);
        return;
    }
    h_die("unknown peer action");
}

/* Records what the master sent peer (body, status, reason) for smh_master_sent. */
static void h_note_m2p(smh *h, int peer, const uint8_t *data, uint64_t len)
{
    if (peer < 0) return;
    uint64_t cap = 4u * len + 65536u;
    uint8_t *mem = malloc((size_t)cap);
    if (mem == NULL) h_die("oom");
    ccoip_pb_arena ar;
    ccoip_pb_arena_init(&ar, mem, cap);
    ccoip_pb_master_to_peer env;
    if (ccoip_ctrl_decode_m2p(data, len, NULL, &ar, &env) == pcclSuccess) {
        if (h->nm2p == h->capm2p) {
            h->capm2p = h->capm2p ? 2u * h->capm2p : 256u;
            h->m2p = realloc(h->m2p, h->capm2p * sizeof(h_m2p));
            if (h->m2p == NULL) h_die("oom");
        }
        const bool ev = env.body_case == CCOIP_PB_MASTER_TO_PEER_BODY_EVICTION;
        h->m2p[h->nm2p++] = (h_m2p){(uint32_t)peer, (int32_t)env.body_case, env.status,
                                    ev ? env.body.eviction.reason : env.reason};
    }
    free(mem);
}

static void h_master_action(smh *h, const ccoip_action *a)
{
    switch (a->type) {
    case CCOIP_ACT_SEND: {
        bool is_a;
        h_link *l = h_link_of(h, H_MASTER, a->conn, &is_a);
        if (l == NULL) return;
        h_note_m2p(h, l->a_node, a->data, a->len);
        ccoip_event ev;
        memset(&ev, 0, sizeof(ev));
        ev.type = CCOIP_EV_RECV;
        ev.conn = l->a_conn;
        h_push(h, l->a_node, &ev, a->data, a->len);
        return;
    }
    case CCOIP_ACT_CLOSE: {
        bool is_a;
        h_link *l = h_link_of(h, H_MASTER, a->conn, &is_a);
        if (l != NULL) h_link_break(h, l, H_MASTER);
        return;
    }
    case CCOIP_ACT_LOG: {
        ccoip_action b = *a;
        h_peer_action(h, 0, &b); /* shares the log store */
        return;
    }
    case CCOIP_ACT_SPLICE: {
        /* The two relay connections become one link between their peers; what each peer sent
         * after its join reaches the other (docs/protocol.md §8.6). */
        bool is_a;
        h_link *l1 = h_link_of(h, H_MASTER, a->conn, &is_a);
        h_link *l2 = h_link_of(h, H_MASTER, a->tag, &is_a);
        if (l1 == NULL || l2 == NULL || !l1->rly || !l2->rly) h_die("bad SPLICE");
        const uint32_t i1 = (uint32_t)(l1 - h->links), i2 = (uint32_t)(l2 - h->links);
        h_link *l = h_link_new(h); /* may move the table */
        l1 = &h->links[i1];
        l2 = &h->links[i2];
        l->a_node = l1->a_node;
        l->a_conn = l1->a_conn;
        l->b_node = l2->a_node;
        l->b_conn = l2->a_conn;
        l->p2p = true;
        l->spliced = true;
        l->spl_m1 = l1->b_conn;
        l->spl_m2 = l2->b_conn;
        for (uint32_t k = 0; k < 2u; k++) {
            h_link *from = k == 0 ? l1 : l2;
            const int to_node = k == 0 ? l->b_node : l->a_node;
            const uint64_t to_conn = k == 0 ? l->b_conn : l->a_conn;
            for (uint32_t i = 0; i < from->nheld; i++) {
                ccoip_event ev;
                memset(&ev, 0, sizeof(ev));
                ev.type = CCOIP_EV_RECV;
                ev.conn = to_conn;
                h_push(h, to_node, &ev, from->held[i], from->held_len[i]);
            }
            h_held_free(from);
            from->alive = false; /* replaced by l: nobody hears of it */
        }
        return;
    }
    default:
        h_die("master emitted a peer-only action");
    }
}

static void h_deliver(smh *h, h_ev *e)
{
    e->ev.now_ns = h->now;
    e->ev.data = e->data;
    if (e->node == H_MASTER) {
        if (h->m_dead || h->m_frozen) return;
        pcclResult_t r = ccoip_master_step(h->m, &e->ev);
        if (r != pcclSuccess) h->step_errors++;
        ccoip_action a;
        while (ccoip_master_poll(h->m, &a))
            h_master_action(h, &a);
        return;
    }
    h_peer *hp = &h->peers[e->node];
    if (hp->dead || hp->frozen) return;
    if (e->has_gen && hp->slots[e->slot].gen != e->gen) return; /* cancelled */
    pcclResult_t r = ccoip_peer_step(hp->p, &e->ev);
    if (r != pcclSuccess) h->step_errors++;
    ccoip_action a;
    while (!hp->dead && ccoip_peer_poll(hp->p, &a))
        h_peer_action(h, (uint32_t)e->node, &a);
}

void smh_run(smh *h)
{
    for (uint64_t guard = 0; h->qcount > 0; guard++) {
        if (guard > 50000000u) h_die("event storm");
        h_ev e = h->q[h->qhead];
        h->qhead = (h->qhead + 1u) % h->qcap;
        h->qcount--;
        h_deliver(h, &e);
        free(e.data);
    }
}

void smh_advance(smh *h, uint64_t ns)
{
    uint64_t target = h->now + ns;
    for (uint64_t guard = 0;; guard++) {
        if (guard > 10000000u) h_die("timer storm");
        smh_run(h);
        uint64_t d = CCOIP_NO_DEADLINE;
        if (!h->m_dead && !h->m_frozen) d = ccoip_master_deadline_ns(h->m);
        for (uint32_t i = 0; i < h->npeers; i++) {
            if (h->peers[i].dead || h->peers[i].frozen) continue;
            uint64_t pd = ccoip_peer_deadline_ns(h->peers[i].p);
            if (pd < d) d = pd;
        }
        if (d > target) break;
        if (d > h->now) h->now = d;
        if (!h->m_dead && !h->m_frozen && ccoip_master_deadline_ns(h->m) <= h->now) {
            h_push_simple(h, H_MASTER, CCOIP_EV_TIMER, 0);
        }
        for (uint32_t i = 0; i < h->npeers; i++) {
            if (h->peers[i].dead || h->peers[i].frozen) continue;
            if (ccoip_peer_deadline_ns(h->peers[i].p) <= h->now) {
                h_push_simple(h, (int)i, CCOIP_EV_TIMER, 0);
            }
        }
    }
    h->now = target;
    smh_run(h);
}

/* ------------------------------------------------------------------------ */

smh *smh_create(const ccoip_master_config *mcfg, const ccoip_peer_config *pcfg)
{
    smh *h = calloc(1, sizeof(*h));
    if (h == NULL) h_die("oom");
    if (ccoip_master_create(mcfg, 42, &h->m) != pcclSuccess) h_die("master_create");
    if (pcfg != NULL) {
        h->pcfg = *pcfg;
    } else {
        ccoip_peer_config_default(&h->pcfg);
    }
    h->pcfg.master_url = "tcp://master";
    h->next_cmd = 1;
    h->now = 1000;
    h_push_simple(h, H_MASTER, CCOIP_EV_START, 0);
    smh_run(h);
    return h;
}

void smh_destroy(smh *h)
{
    if (h == NULL) return;
    ccoip_master_destroy(h->m);
    for (uint32_t i = 0; i < h->npeers; i++) {
        ccoip_peer_destroy(h->peers[i].p);
        for (uint32_t s = 0; s < H_MAX_SLOTS; s++) {
            free(h->peers[i].xs[s].scratch);
            free(h->peers[i].xs[s].backup);
        }
    }
    for (uint32_t i = 0; i < h->nlinks; i++) {
        for (uint32_t f = 0; f < h->links[i].nframes; f++)
            free(h->links[i].frames[f].bytes);
        free(h->links[i].frames);
        for (uint32_t f = 0; f < h->links[i].nbframes; f++)
            free(h->links[i].bframes[f].bytes);
        free(h->links[i].bframes);
    }
    free(h->links);
    for (uint64_t i = 0; i < h->qcount; i++)
        free(h->q[(h->qhead + i) % h->qcap].data);
    free(h->q);
    for (uint32_t i = 0; i < h->nlogs; i++)
        free(h->logs[i]);
    free(h->logs);
    free(h->held);
    free(h->m2p);
    free(h);
}

void smh_set_peer_auth(smh *h, const ccoip_auth_config *auth)
{
    h->pcfg.auth = *auth;
}

uint32_t smh_add_peer(smh *h, uint32_t group)
{
    if (h->npeers == SMH_MAX_PEERS) h_die("too many peers");
    uint32_t idx = h->npeers++;
    h_peer *hp = &h->peers[idx];
    memset(hp, 0, sizeof(*hp));
    for (uint32_t s = 0; s < H_MAX_SLOTS; s++)
        hp->slots[s].cmd = -1;
    ccoip_peer_config c = h->pcfg;
    c.peer_group = group;
    if (ccoip_peer_create(&c, 1000u + idx, &hp->p) != pcclSuccess) h_die("peer_create");
    h_push_simple(h, (int)idx, CCOIP_EV_START, 0);
    smh_run(h);
    return idx;
}

static h_cmd *h_cmd_new(smh *h, uint32_t peer)
{
    h_peer *hp = &h->peers[peer];
    for (uint32_t i = 0; i < SMH_MAX_CMDS; i++) {
        if (!hp->cmds[i].used) {
            memset(&hp->cmds[i], 0, sizeof(h_cmd));
            hp->cmds[i].used = true;
            hp->cmds[i].id = h->next_cmd++;
            return &hp->cmds[i];
        }
    }
    h_die("too many commands");
    return NULL;
}

uint64_t smh_submit(smh *h, uint32_t peer, ccoip_cmd_type type)
{
    h_cmd *c = h_cmd_new(h, peer);
    ccoip_event ev;
    memset(&ev, 0, sizeof(ev));
    ev.type = CCOIP_EV_SUBMIT;
    ev.cmd.type = type;
    ev.cmd.cmd_id = c->id;
    h_push(h, (int)peer, &ev, NULL, 0);
    return c->id;
}

uint64_t smh_allreduce(smh *h, uint32_t peer, const ccoip_allreduce_args *args, const void *sendbuf,
                       void *recvbuf)
{
    h_cmd *c = h_cmd_new(h, peer);
    c->send = sendbuf;
    c->recv = recvbuf;
    uint32_t es = ccoip_dtype_valid(args->dtype) ? ccoip_dtype_size(args->dtype) : 1u;
    /* An all-reduce binds count elements each way; the other kinds what the caller sized. */
    c->send_bytes = args->kind == CCOIP_COLL_ALL_REDUCE ? args->count * es : args->send_bytes;
    c->recv_bytes = args->kind == CCOIP_COLL_ALL_REDUCE ? args->count * es : args->recv_bytes;
    ccoip_event ev;
    memset(&ev, 0, sizeof(ev));
    ev.type = CCOIP_EV_SUBMIT;
    ev.cmd.type = CCOIP_CMD_ALL_REDUCE;
    ev.cmd.cmd_id = c->id;
    ev.cmd.allreduce = *args;
    h_push(h, (int)peer, &ev, NULL, 0);
    return c->id;
}

uint64_t smh_sync(smh *h, uint32_t peer, const ccoip_sync_args *args, void *const *tensors)
{
    h_cmd *c = h_cmd_new(h, peer);
    if (args->num_keys > H_MAX_TENSORS) h_die("too many tensors");
    c->ntensors = args->num_keys;
    for (uint32_t i = 0; i < args->num_keys; i++) {
        c->tensors[i] = tensors[i];
        uint32_t es =
            ccoip_dtype_valid(args->keys[i].dtype) ? ccoip_dtype_size(args->keys[i].dtype) : 1u;
        c->tensor_bytes[i] = args->keys[i].count * es;
    }
    ccoip_event ev;
    memset(&ev, 0, sizeof(ev));
    ev.type = CCOIP_EV_SUBMIT;
    ev.cmd.type = CCOIP_CMD_SYNC_SHARED_STATE;
    ev.cmd.cmd_id = c->id;
    ev.cmd.sync = *args;
    /* The keys are borrowed for the SUBMIT step only: deliver it now. */
    h_ev e;
    memset(&e, 0, sizeof(e));
    e.node = (int)peer;
    e.ev = ev;
    h_deliver(h, &e);
    return c->id;
}

uint64_t smh_sync_floats(smh *h, uint32_t peer, const char *name, float *w, uint64_t count,
                         uint64_t rev)
{
    ccoip_state_key k;
    memset(&k, 0, sizeof(k));
    k.name = name;
    k.dtype = pcclFloat;
    k.count = count;
    ccoip_sync_args a;
    memset(&a, 0, sizeof(a));
    a.revision = rev;
    a.strategy = PCCL_SHARED_STATE_SYNC_STRATEGY_ENFORCE_POPULAR;
    a.num_keys = 1;
    a.keys = &k;
    void *t[1] = {w};
    return smh_sync(h, peer, &a, t);
}

bool smh_sync_info(const smh *h, uint32_t peer, uint64_t cmd, uint64_t *rx, uint64_t *tx,
                   uint64_t *revision)
{
    const h_peer *hp = &h->peers[peer];
    for (uint32_t i = 0; i < SMH_MAX_CMDS; i++) {
        const h_cmd *c = &hp->cmds[i];
        if (!c->used || c->id != cmd || !c->done) continue;
        *rx = c->rx;
        *tx = c->tx;
        *revision = c->revision;
        return true;
    }
    return false;
}

void smh_set_link_cost(smh *h, uint32_t from, uint32_t to, uint64_t us_per_mib)
{
    h->us_per_mib[from][to] = us_per_mib;
}

void smh_fail_probe(smh *h, uint32_t from, uint32_t to, bool fail)
{
    h->probe_fail[from][to] = fail;
}

uint32_t smh_probe_count(const smh *h)
{
    return h->probes;
}

void smh_hang_link(smh *h, uint32_t from, uint32_t to, bool hang)
{
    h->hang_link[from][to] = hang;
}

void smh_hang_probe(smh *h, uint32_t from, uint32_t to, bool hang)
{
    h->hang_probe[from][to] = hang;
    if (hang) return;
    uint32_t kept = 0;
    for (uint32_t i = 0; i < h->nheld; i++) {
        const h_held_probe hp = h->held[i];
        if (hp.from != from || hp.to != to) {
            h->held[kept++] = hp;
            continue;
        }
        ccoip_event ev;
        memset(&ev, 0, sizeof(ev));
        ev.type = CCOIP_EV_PROBE_DONE;
        ev.done.io_id = hp.io_id;
        ev.done.result = pcclRankConnectionFailed; /* the hung probe timed out */
        h_push(h, (int)from, &ev, NULL, 0);
    }
    h->nheld = kept;
}

uint32_t smh_master_sent(const smh *h, uint32_t peer, int32_t body, int32_t status, int32_t reason)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < h->nm2p; i++) {
        const h_m2p *r = &h->m2p[i];
        if (r->peer == peer && r->body == body && r->status == status && r->reason == reason) n++;
    }
    return n;
}

void smh_corrupt_state_sends(smh *h, uint32_t peer, uint32_t n)
{
    h->peers[peer].corrupt_state_sends = n;
}

void smh_kill_on_state_send(smh *h, uint32_t peer, uint32_t n)
{
    h->peers[peer].kill_on_state_send = n;
    h->peers[peer].state_sends = 0;
}

bool smh_done_ex(const smh *h, uint32_t peer, uint64_t cmd, pcclResult_t *r, uint32_t *world,
                 bool *pending)
{
    const h_peer *hp = &h->peers[peer];
    for (uint32_t i = 0; i < SMH_MAX_CMDS; i++) {
        const h_cmd *c = &hp->cmds[i];
        if (!c->used || c->id != cmd) continue;
        if (!c->done) return false;
        if (r != NULL) *r = c->result;
        if (world != NULL) *world = c->world;
        if (pending != NULL) *pending = c->pending;
        return true;
    }
    return false;
}

bool smh_done(const smh *h, uint32_t peer, uint64_t cmd, pcclResult_t *r)
{
    return smh_done_ex(h, peer, cmd, r, NULL, NULL);
}

uint32_t smh_notify_count(const smh *h, uint32_t peer, uint64_t cmd)
{
    const h_peer *hp = &h->peers[peer];
    for (uint32_t i = 0; i < SMH_MAX_CMDS; i++) {
        if (hp->cmds[i].used && hp->cmds[i].id == cmd) return hp->cmds[i].notifies;
    }
    return 0;
}

static void h_kill_peer_now(smh *h, uint32_t peer)
{
    h_peer *hp = &h->peers[peer];
    if (hp->dead) return;
    hp->dead = true;
    for (uint32_t i = 0; i < h->nlinks; i++) {
        h_link *l = &h->links[i];
        if (l->alive && (l->a_node == (int)peer || l->b_node == (int)peer)) {
            h_link_break(h, l, (int)peer);
        }
    }
}

void smh_kill_peer(smh *h, uint32_t peer)
{
    h_kill_peer_now(h, peer);
}

void smh_freeze_peer(smh *h, uint32_t peer)
{
    h->peers[peer].frozen = true;
}

void smh_kill_master(smh *h)
{
    h->m_dead = true;
    for (uint32_t i = 0; i < h->nlinks; i++) {
        h_link *l = &h->links[i];
        if (l->alive && l->b_node == H_MASTER) h_link_break(h, l, H_MASTER);
    }
}

void smh_freeze_master(smh *h)
{
    h->m_frozen = true;
}

void smh_block_link(smh *h, uint32_t from, uint32_t to)
{
    h->blocked[from][to] = true;
}

void smh_nat_peer(smh *h, uint32_t peer)
{
    h->nat[peer] = true;
}

void smh_kill_on_ring_send(smh *h, uint32_t peer, uint32_t n)
{
    h->peers[peer].kill_on_send = n;
    h->peers[peer].sends = 0;
}

void smh_inject_to_master(smh *h, uint32_t peer, const uint8_t *data, uint64_t len)
{
    for (uint32_t i = 0; i < h->nlinks; i++) {
        h_link *l = &h->links[i];
        if (l->alive && l->a_node == (int)peer && l->b_node == H_MASTER) {
            ccoip_event ev;
            memset(&ev, 0, sizeof(ev));
            ev.type = CCOIP_EV_RECV;
            ev.conn = l->b_conn;
            h_push(h, H_MASTER, &ev, data, len);
            return;
        }
    }
    h_die("inject: peer has no master connection");
}

ccoip_master *smh_master(smh *h)
{
    return h->m;
}

ccoip_peer *smh_peer(smh *h, uint32_t peer)
{
    return h->peers[peer].p;
}

uint64_t smh_now(const smh *h)
{
    return h->now;
}

uint32_t smh_log_count(const smh *h, const char *needle)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < h->nlogs; i++) {
        if (strstr(h->logs[i], needle) != NULL) n++;
    }
    return n;
}

uint32_t smh_step_errors(const smh *h)
{
    return h->step_errors;
}

void smh_set_pool(smh *h, uint32_t pool)
{
    h->pcfg.p2p_pool_size = pool;
}

uint32_t smh_p2p_links(const smh *h, uint32_t from, uint32_t to)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < h->nlinks; i++) {
        const h_link *l = &h->links[i];
        if (l->alive && l->p2p && l->a_node == (int)from && l->b_node == (int)to) n++;
    }
    return n;
}

bool smh_ring_conns(const smh *h, uint32_t peer, uint64_t tag, uint64_t *tx, uint64_t *rx)
{
    const h_peer *hp = &h->peers[peer];
    const uint32_t i = h_io_index(hp, tag);
    if (i == hp->nio_tags) return false;
    *tx = hp->io_tx[i];
    *rx = hp->io_rx[i];
    return true;
}

bool smh_ring_conn_sets(const smh *h, uint32_t peer, uint64_t tag, uint32_t *ntx, uint32_t *nrx)
{
    const h_peer *hp = &h->peers[peer];
    const uint32_t i = h_io_index(hp, tag);
    if (i == hp->nio_tags) return false;
    *ntx = hp->io_ntx[i];
    *nrx = hp->io_nrx[i];
    return true;
}

bool smh_form_ring(smh *h, uint32_t n, uint32_t group)
{
    uint64_t c0;
    pcclResult_t r;
    while (h->npeers < n)
        smh_add_peer(h, group);
    c0 = smh_submit(h, 0, CCOIP_CMD_CONNECT);
    smh_run(h);
    if (!smh_done(h, 0, c0, &r) || r != pcclSuccess) return false;
    if (n == 1) return true;
    uint64_t cs[SMH_MAX_PEERS];
    for (uint32_t i = 1; i < n; i++)
        cs[i] = smh_submit(h, i, CCOIP_CMD_CONNECT);
    smh_run(h);
    uint64_t u = smh_submit(h, 0, CCOIP_CMD_UPDATE_TOPOLOGY);
    smh_run(h);
    if (!smh_done(h, 0, u, &r) || r != pcclSuccess) return false;
    for (uint32_t i = 1; i < n; i++) {
        if (!smh_done(h, i, cs[i], &r) || r != pcclSuccess) return false;
    }
    return true;
}

smh *smh_ring_of(uint32_t n, uint32_t pool, uint64_t relay_max, uint32_t vote_timeout_ms)
{
    ccoip_master_config mc;
    ccoip_master_config_default(&mc);
    mc.relay_max_bytes = (uint32_t)relay_max;
    if (vote_timeout_ms > 0) mc.vote_timeout_ms = vote_timeout_ms;
    smh *h = smh_create(&mc, NULL);
    if (h == NULL) return NULL;
    smh_set_pool(h, pool);
    if (!smh_form_ring(h, n, 0)) {
        smh_destroy(h);
        return NULL;
    }
    return h;
}

bool smh_reduce_exact(smh *h, uint32_t n, uint64_t tag)
{
    uint32_t x[8][6], y[8][6];
    uint64_t c[8];
    if (n > 8u) return false;
    for (uint32_t i = 0; i < n; i++) {
        for (uint32_t k = 0; k < 6; k++)
            x[i][k] = 1000u * i + k;
        ccoip_allreduce_args a;
        memset(&a, 0, sizeof(a));
        a.tag = tag;
        a.count = 6;
        a.dtype = pcclUint32;
        a.op = pcclSum;
        c[i] = smh_allreduce(h, i, &a, x[i], y[i]);
    }
    smh_run(h);
    for (uint32_t i = 0; i < n; i++) {
        pcclResult_t r;
        if (!smh_done(h, i, c[i], &r) || r != pcclSuccess) return false;
        for (uint32_t k = 0; k < 6; k++) {
            if (y[i][k] != 1000u * n * (n - 1u) / 2u + n * k) return false;
        }
    }
    return true;
}

void smh_enable_relay(smh *h)
{
    h->relay = true;
    ccoip_master_set_relay_port(h->m, H_RELAY_PORT);
}
