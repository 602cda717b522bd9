/*
 * master_p2p.c — send / recv on the master (docs/protocol.md §6.8.4): an op
 * of two members, a sender and a receiver, matched by its tag (which mixes the
 * caller's tag with the pair of ranks, ccoip_p2p_tag). The vote, numbering,
 * verdict, cancel and timeouts are master_collective.c's, as for every kind;
 * this file holds what differs: which ballots agree, how many are needed,
 * what the commence carries (the other member and the key of the pair link),
 * and that a failed pair link never re-wires the group's ring.
 */
#include <string.h>

#include "ccoip_coll.h"
#include "master_internal.h"

bool m_p2p_kind(int32_t kind)
{
    return kind == CCOIP_PB_COLLECTIVE_KIND_SEND || kind == CCOIP_PB_COLLECTIVE_KIND_RECV;
}

bool m_p2p_agree(const m_op *o, const ccoip_pb_collective_initiate *ci)
{
    /* A sender and a receiver, nobody else: the second ballot is the other role. Their roots
     * name each other, so they differ; the tag binds both ranks (ccoip_p2p_tag). */
    return m_p2p_kind(o->kind) && m_p2p_kind(ci->kind) && o->kind != ci->kind && o->n_voted == 1;
}

bool m_p2p_ranks_ok(const ccoip_master *m, const m_op *o)
{
    if (!m_p2p_kind(o->kind)) return true;
    /* The tag mixes both ranks, but a collision of two pairs' tags must not pair a send with
     * another pair's receive: each names the other's rank, checked against the ring. */
    uint32_t voters = 0;
    for (uint32_t k = 0; k < o->mem_n; k++) {
        const m_op_member *mm = &o->mem[k];
        if (!(mm->flags & MOM_VOTED)) continue;
        voters++;
        for (uint32_t j = 0; j < o->mem_n; j++) {
            const m_op_member *other = &o->mem[j];
            if (j == k || !(other->flags & MOM_VOTED)) continue;
            if (mm->p2p_root != m->sess.peers[other->slot].rank) return false;
        }
    }
    return voters == 2;
}

uint32_t m_p2p_ballots(const m_op *o, uint32_t group_size)
{
    return m_p2p_kind(o->kind) ? 2u : group_size;
}

void m_p2p_rewire(ccoip_master *m, const m_op *o)
{
    /* A pair link is no ring link: the ring stays as it is. */
    if (!m_p2p_kind(o->kind)) m_mark_rewire(m, o->group);
}

/* Authenticated runs: the key of op (epoch, seq)'s pair link from sender to receiver, drawn
 * from the master's secret like the ring's link keys (§8.0). */
static void p2p_key(const ccoip_master *m, uint64_t epoch, uint64_t seq, uint64_t sender,
                    uint64_t receiver, uint8_t out[CCOIP_AUTH_KEY_BYTES])
{
    const uint64_t v[4] = {epoch, seq, sender, receiver};
    ccoip_auth_mac(&m->cfg.auth, m->cfg.auth.secret, "pccl pair key", NULL, 0, NULL, 0, v, 4, out);
}

void m_p2p_commence(ccoip_master *m, const m_op *o, const m_op_member *mm,
                    ccoip_pb_master_to_peer *env)
{
    if (!m_p2p_kind(o->kind)) {
        m_send(m, mm->slot, env);
        return;
    }
    const m_op_member *other = NULL;
    for (uint32_t k = 0; k < o->mem_n && other == NULL; k++) {
        if (o->mem[k].slot != mm->slot && (o->mem[k].flags & (MOM_VOTED | MOM_MEMBER)))
            other = &o->mem[k];
    }
    ccoip_pb_collective_commence *cc = &env->body.collective_commence;
    ccoip_pb_endpoint eps[M_ENDPOINT_KINDS];
    uint8_t key[CCOIP_AUTH_KEY_BYTES];
    if (other != NULL) {
        const m_peer *q = &m->sess.peers[other->slot];
        cc->has_peer = true;
        cc->peer.peer_id = q->id;
        cc->peer.peer_group = q->group;
        m_topo_fill_endpoints(q, eps, &cc->peer.endpoints_count);
        cc->peer.endpoints = eps;
        if (ccoip_auth_on(&m->cfg.auth)) {
            const bool sends = mm->p2p_send;
            const uint64_t me = m->sess.peers[mm->slot].id;
            p2p_key(m, o->epoch, o->seq, sends ? me : q->id, sends ? q->id : me, key);
            cc->pair_key.data = key;
            cc->pair_key.len = CCOIP_AUTH_KEY_BYTES;
        }
    }
    m_send(m, mm->slot, env);
}
