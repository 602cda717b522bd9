/*
 * master_mismatch.c — members blocked in different calls (docs/protocol.md
 * §6.12, docs/core.md §2.7).
 *
 * pcclUpdateTopology, pcclArePeersPending, pcclSynchronizeSharedState and
 * pcclOptimizeTopology are blocking calls, one at a time per communicator,
 * and each is a vote that completes only when every member of its scope
 * voted the same (topology, pending and optimize: every accepted peer;
 * sync: every accepted peer of the group). So when every accepted member of
 * a group has a ballot open in one of them but not all in the same one, none
 * of their calls can ever complete: an application bug. Likewise when every
 * accepted peer is blocked, each group in one call, no group in a sync (which
 * completes on its own) and not all in the same call. The master then fails
 * all of those ballots at once with STATUS_INVALID_USAGE /
 * REASON_CALL_MISMATCH and logs one line naming the calls, instead of waiting
 * for the vote timeout and evicting members as stragglers.
 *
 * Collective initiates are not counted: all-reduces are asynchronous, so a
 * member with only an initiate open may still be computing and call the next
 * one later (it is then not blocked); such a member makes its group not
 * blocked. A member with two blocking ballots (not legal) is not classified.
 * The check runs only after a blocking ballot arrived or a peer was removed
 * (m->mm.dirty), in one walk over the peers.
 */
#include <stdlib.h>
#include <string.h>

#include "master_internal.h"

enum { MK_NONE = 0, MK_UPDATE, MK_PENDING, MK_SYNC, MK_OPTIMIZE, MK_MULTI };

static const char *const mk_call[] = {"",
                                      "pcclUpdateTopology",
                                      "pcclArePeersPending",
                                      "pcclSynchronizeSharedState",
                                      "pcclOptimizeTopology",
                                      ""};

static uint32_t mm_kind(const m_peer *p)
{
    uint32_t k = MK_NONE, n = 0;
    if (p->topo_voted) {
        k = MK_UPDATE;
        n++;
    }
    if (p->pend_voted) {
        k = MK_PENDING;
        n++;
    }
    if (p->sync_st == MS_VOTED) {
        k = MK_SYNC;
        n++;
    }
    if (p->opt_st == MO_VOTED) {
        k = MK_OPTIMIZE;
        n++;
    }
    return n > 1u ? MK_MULTI : k;
}

/* Answers slot's blocking ballot with INVALID_USAGE and forgets it. */
static void mm_fail(ccoip_master *m, uint32_t slot, const char *detail)
{
    m_peer *p = m_peer_at(m, slot);
    switch (mm_kind(p)) {
    case MK_UPDATE:
        m_topo_fail_vote(m, slot, CCOIP_PB_REASON_CALL_MISMATCH, detail);
        break;
    case MK_PENDING:
        m_topo_fail_pending_query(m, slot, CCOIP_PB_REASON_CALL_MISMATCH, detail);
        break;
    case MK_SYNC:
        m_sync_fail_vote(m, slot, CCOIP_PB_REASON_CALL_MISMATCH, detail);
        break;
    case MK_OPTIMIZE:
        m_opt_fail_vote(m, slot, CCOIP_PB_REASON_CALL_MISMATCH, detail);
        break;
    default:
        break;
    }
}

/* Fails every ballot of the accepted peers whose (group, index) keys are keys[0..n). */
static void mm_fail_all(ccoip_master *m, const uint64_t *keys, uint32_t n, uint32_t k1, uint32_t k2,
                        const char *scope, uint32_t group)
{
    sm_log(&m->out, CCOIP_LOG_ERROR,
           "master: %s %u: every member is blocked in a call the others are not in (%s and %s): "
           "failing all %u with pcclInvalidUsage",
           scope, group, mk_call[k1], mk_call[k2], n);
    for (uint32_t i = 0; i < n; i++)
        mm_fail(m, m->sess.order[(uint32_t)keys[i]], "members blocked in different calls");
}

bool m_mismatch_progress(ccoip_master *m)
{
    if (!m->mm.dirty) return false;
    m->mm.dirty = false;
    if (m->sess.n_acc < 2u) return false;
    /* Accepted peers by (group, position in order[]), as topo_build_rings does. */
    uint64_t *keys = m->ids;
    uint32_t nk = 0;
    bool all_blocked = true;
    for (uint32_t i = 0; i < m->sess.order_n; i++) {
        const m_peer *p = &m->sess.peers[m->sess.order[i]];
        if (p->state != MP_ACCEPTED) continue;
        const uint32_t k = mm_kind(p);
        if (k == MK_NONE || k == MK_MULTI) all_blocked = false;
        keys[nk++] = ((uint64_t)p->group << 32) | i;
    }
    qsort(keys, nk, sizeof(uint64_t), m_cmp_u64);
    bool changed = false, any_sync = false;
    uint32_t first_kind = MK_NONE, other_kind = MK_NONE;
    for (uint32_t at = 0; at < nk;) {
        const uint32_t group = (uint32_t)(keys[at] >> 32), from = at;
        uint32_t k1 = MK_NONE, k2 = MK_NONE;
        bool blocked = true;
        for (; at < nk && (uint32_t)(keys[at] >> 32) == group; at++) {
            const uint32_t k = mm_kind(&m->sess.peers[m->sess.order[(uint32_t)keys[at]]]);
            if (k == MK_NONE || k == MK_MULTI) {
                blocked = false;
            } else if (k1 == MK_NONE) {
                k1 = k;
            } else if (k != k1 && k2 == MK_NONE) {
                k2 = k;
            }
        }
        if (!blocked) continue;
        if (k2 != MK_NONE) {
            mm_fail_all(m, &keys[from], at - from, k1, k2, "group", group);
            changed = true;
            continue;
        }
        /* The group is uniform: across groups, only the global calls can deadlock. */
        if (k1 == MK_SYNC) any_sync = true;
        if (first_kind == MK_NONE) {
            first_kind = k1;
        } else if (k1 != first_kind && other_kind == MK_NONE) {
            other_kind = k1;
        }
    }
    if (!changed && all_blocked && !any_sync && other_kind != MK_NONE) {
        mm_fail_all(m, keys, nk, first_kind, other_kind, "all groups, from group",
                    (uint32_t)(keys[0] >> 32));
        changed = true;
    }
    return changed;
}
