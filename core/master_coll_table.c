/*
 * master_coll_table.c — the master's table of collective ops (docs/core.md
 * §2.4): a pool grown on demand, found by (group, tag) through an
 * open-addressing index; each op's members sorted by peer id; the list of
 * ops a progress pass examines (dirty); vote and completion deadlines in a
 * FIFO, in the order they were armed. What the ops mean is
 * master_collective.c's.
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "master_internal.h"

static uint64_t coll_key_hash(uint32_t group, uint64_t tag)
{
    uint64_t z = tag ^ ((uint64_t)group * 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 31)) * 0xbf58476d1ce4e5b9ull;
    return z ^ (z >> 29);
}

/* The next op of (group, tag) in the index from probe position *at on (advanced past it), or
 * M_OP_NONE at the end of the probe chain; a tag may have a running op whose members still
 * complete and a voting one for its next use. */
uint32_t m_op_probe(const ccoip_master *m, uint32_t group, uint64_t tag, uint32_t *at)
{
    const uint32_t mask = m->coll.op_index_cap - 1u;
    for (;; *at = (*at + 1u) & mask) {
        const uint32_t op = m->coll.op_index[*at];
        if (op == M_OP_NONE) return M_OP_NONE;
        if (m->coll.ops[op].group == group && m->coll.ops[op].tag == tag) {
            *at = (*at + 1u) & mask;
            return op;
        }
    }
}

uint32_t m_op_probe_start(const ccoip_master *m, uint32_t group, uint64_t tag)
{
    return (uint32_t)coll_key_hash(group, tag) & (m->coll.op_index_cap - 1u);
}

/* The op of (group, tag) in state st (and with seq, for a running one). */
uint32_t m_op_find(const ccoip_master *m, uint32_t group, uint64_t tag, m_op_state st, uint64_t seq)
{
    if (m->coll.op_index_cap == 0) return M_OP_NONE;
    uint32_t at = m_op_probe_start(m, group, tag);
    for (uint32_t op = m_op_probe(m, group, tag, &at); op != M_OP_NONE;
         op = m_op_probe(m, group, tag, &at)) {
        if (m->coll.ops[op].state == st && (st != MOP_RUNNING || m->coll.ops[op].seq == seq))
            return op;
    }
    return M_OP_NONE;
}

static void coll_index_put(ccoip_master *m, uint32_t op)
{
    const uint32_t mask = m->coll.op_index_cap - 1u;
    uint32_t i = (uint32_t)coll_key_hash(m->coll.ops[op].group, m->coll.ops[op].tag) & mask;
    while (m->coll.op_index[i] != M_OP_NONE)
        i = (i + 1u) & mask;
    m->coll.op_index[i] = op;
}

/* Removes op from the index (backward-shift deletion keeps probe chains intact). */
static void coll_index_del(ccoip_master *m, uint32_t op)
{
    const uint32_t mask = m->coll.op_index_cap - 1u;
    uint32_t i = (uint32_t)coll_key_hash(m->coll.ops[op].group, m->coll.ops[op].tag) & mask;
    while (m->coll.op_index[i] != op)
        i = (i + 1u) & mask;
    uint32_t j = i;
    for (;;) {
        m->coll.op_index[i] = M_OP_NONE;
        for (;;) {
            j = (j + 1u) & mask;
            const uint32_t o = m->coll.op_index[j];
            if (o == M_OP_NONE) return;
            const uint32_t home =
                (uint32_t)coll_key_hash(m->coll.ops[o].group, m->coll.ops[o].tag) & mask;
            /* o may move to i iff its home is not cyclically in (i, j]. */
            const bool stays = i <= j ? (home > i && home <= j) : (home > i || home <= j);
            if (!stays) break;
        }
        m->coll.op_index[i] = m->coll.op_index[j];
        i = j;
    }
}

/* Makes room for one more live op: pool and index. False on allocation failure. */
bool m_op_reserve(ccoip_master *m)
{
    if (m->coll.ops_hi == m->coll.ops_cap) {
        uint32_t cap = m->coll.ops_cap == 0 ? 16u : m->coll.ops_cap * 2u;
        m_op *ops = realloc(m->coll.ops, (size_t)cap * sizeof(m_op));
        if (ops == NULL) return false;
        memset(ops + m->coll.ops_cap, 0, (size_t)(cap - m->coll.ops_cap) * sizeof(m_op));
        m->coll.ops = ops;
        m->coll.ops_cap = cap;
    }
    if (2u * (m->coll.ops_live + 1u) > m->coll.op_index_cap) {
        uint32_t cap = m->coll.op_index_cap == 0 ? 32u : m->coll.op_index_cap * 2u;
        uint32_t *idx = malloc((size_t)cap * sizeof(uint32_t));
        if (idx == NULL) return false;
        memset(idx, 0xff, (size_t)cap * sizeof(uint32_t));
        free(m->coll.op_index);
        m->coll.op_index = idx;
        m->coll.op_index_cap = cap;
        for (uint32_t i = 0; i < m->coll.ops_hi; i++) {
            if (m->coll.ops[i].state != MOP_FREE) coll_index_put(m, i);
        }
    }
    return true;
}

/* The lowest free op (the order the old fixed table allocated in); m_op_reserve first. */
uint32_t m_op_alloc(ccoip_master *m, uint32_t group, uint64_t tag)
{
    uint32_t i = m->coll.ops_free_hint;
    while (i < m->coll.ops_hi && m->coll.ops[i].state != MOP_FREE)
        i++;
    if (i == m->coll.ops_hi) m->coll.ops_hi++;
    m->coll.ops_free_hint = i + 1u;
    m_op *o = &m->coll.ops[i];
    m_op_member *mem = o->mem;
    uint32_t cap = o->mem_cap, gen = o->timer_gen;
    memset(o, 0, sizeof(*o));
    o->mem = mem;
    o->mem_cap = cap;
    o->timer_gen = gen;
    o->group = group;
    o->tag = tag;
    o->anchor = M_SLOT_NONE;
    m_op_set_state(m, o, MOP_VOTING); /* ops_live */
    coll_index_put(m, i);
    return i;
}

void m_op_free(ccoip_master *m, uint32_t op)
{
    m_op *o = &m->coll.ops[op];
    assert(o->state != MOP_FREE);
    for (uint32_t k = 0; k < o->mem_n; k++) {
        m->sess.peers[o->mem[k].slot].n_ops--;
        free(o->mem[k].relay);
        o->mem[k].relay = NULL;
    }
    coll_index_del(m, op);
    m_op_set_state(m, o, MOP_FREE); /* ops_live, n_running */
    o->mem_n = 0;
    o->has_first = false;
    o->timer_gen++;
    if (op < m->coll.ops_free_hint) m->coll.ops_free_hint = op;
}

bool m_coll_init(ccoip_master *m)
{
    /* The op pool, its index, the dirty list and the timers grow on demand (m_op_reserve). */
    m->coll.next_seq = 1;
    return true;
}

void m_coll_deinit(ccoip_master *m)
{
    for (uint32_t i = 0; i < m->coll.ops_cap; i++) {
        for (uint32_t k = 0; m->coll.ops[i].state != MOP_FREE && k < m->coll.ops[i].mem_n; k++)
            free(m->coll.ops[i].mem[k].relay);
        free(m->coll.ops[i].mem);
    }
    free(m->coll.ops);
    free(m->coll.op_index);
    free(m->coll.op_dirty);
    free(m->coll.op_timers);
    m->coll.ops = NULL;
    m->coll.op_index = NULL;
    m->coll.op_dirty = NULL;
    m->coll.op_timers = NULL;
}

/* The member record of slot in op, or NULL (binary search by peer id). */
m_op_member *m_op_mem(ccoip_master *m, uint32_t op, uint32_t slot)
{
    m_op *o = &m->coll.ops[op];
    const uint64_t id = m->sess.peers[slot].id;
    uint32_t lo = 0, hi = o->mem_n;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2u;
        if (o->mem[mid].id < id) {
            lo = mid + 1u;
        } else {
            hi = mid;
        }
    }
    if (lo < o->mem_n && o->mem[lo].id == id && o->mem[lo].slot == slot) return &o->mem[lo];
    return NULL;
}

bool m_op_running_member(ccoip_master *m, uint32_t group, uint64_t tag, uint32_t slot)
{
    if (m->coll.op_index_cap == 0 || m->sess.peers[slot].n_ops == 0) return false;
    uint32_t at = m_op_probe_start(m, group, tag);
    for (uint32_t op = m_op_probe(m, group, tag, &at); op != M_OP_NONE;
         op = m_op_probe(m, group, tag, &at)) {
        if (m->coll.ops[op].state != MOP_RUNNING) continue;
        const m_op_member *mm = m_op_mem(m, op, slot);
        if (mm != NULL && (mm->flags & MOM_MEMBER) && !(mm->flags & MOM_COMPLETED)) return true;
    }
    return false;
}

/* Adds slot to op (it must not be there); NULL on allocation failure. */
m_op_member *m_op_mem_add(ccoip_master *m, uint32_t op, uint32_t slot)
{
    m_op *o = &m->coll.ops[op];
    if (o->mem_n == o->mem_cap) {
        uint32_t cap = o->mem_cap == 0 ? 16u : o->mem_cap * 2u;
        m_op_member *mem = realloc(o->mem, (size_t)cap * sizeof(m_op_member));
        if (mem == NULL) return NULL;
        o->mem = mem;
        o->mem_cap = cap;
    }
    const uint64_t id = m->sess.peers[slot].id;
    uint32_t k = o->mem_n;
    while (k > 0 && o->mem[k - 1u].id > id) {
        o->mem[k] = o->mem[k - 1u];
        k--;
    }
    o->mem_n++;
    m_op_member *mm = &o->mem[k];
    memset(mm, 0, sizeof(*mm));
    mm->id = id;
    mm->slot = slot;
    m->sess.peers[slot].n_ops++;
    return mm;
}

void m_op_mem_remove(ccoip_master *m, uint32_t op, m_op_member *mm)
{
    m_op *o = &m->coll.ops[op];
    uint32_t k = (uint32_t)(mm - o->mem);
    m->sess.peers[mm->slot].n_ops--;
    free(mm->relay);
    memmove(&o->mem[k], &o->mem[k + 1u], (size_t)(o->mem_n - k - 1u) * sizeof(m_op_member));
    o->mem_n--;
}

void m_op_mark_dirty(ccoip_master *m, uint32_t op)
{
    m_op *o = &m->coll.ops[op];
    if (o->dirty) return;
    if (m->coll.op_dirty_n == m->coll.op_dirty_cap) {
        uint32_t cap = m->coll.op_dirty_cap == 0 ? 64u : m->coll.op_dirty_cap * 2u;
        uint32_t *d = realloc(m->coll.op_dirty, (size_t)cap * sizeof(uint32_t));
        if (d == NULL) {
            m->coll.op_world_sig = 0; /* forces a full pass instead */
            return;
        }
        m->coll.op_dirty = d;
        m->coll.op_dirty_cap = cap;
    }
    o->dirty = true;
    m->coll.op_dirty[m->coll.op_dirty_n++] = op;
}

/* Arms op's deadline at now + vote timeout. */
void m_op_arm(ccoip_master *m, uint32_t op)
{
    m_op *o = &m->coll.ops[op];
    o->has_first = true;
    o->first_ns = m->now;
    o->timer_gen++;
    if (m->coll.op_timers_n == m->coll.op_timers_cap) {
        uint32_t cap = m->coll.op_timers_cap == 0 ? 64u : m->coll.op_timers_cap * 2u;
        m_op_timer *t = malloc((size_t)cap * sizeof(m_op_timer));
        if (t == NULL) {
            sm_log(&m->out, CCOIP_LOG_ERROR, "master: out of memory: op tag %U has no deadline",
                   o->tag);
            return;
        }
        for (uint32_t k = 0; k < m->coll.op_timers_n; k++)
            t[k] = m->coll.op_timers[(m->coll.op_timers_head + k) % m->coll.op_timers_cap];
        free(m->coll.op_timers);
        m->coll.op_timers = t;
        m->coll.op_timers_cap = cap;
        m->coll.op_timers_head = 0;
    }
    m_op_timer *t =
        &m->coll.op_timers[(m->coll.op_timers_head + m->coll.op_timers_n) % m->coll.op_timers_cap];
    t->due_ns = sm_add_sat(o->first_ns, sm_ms(m->cfg.vote_timeout_ms));
    t->op = op;
    t->gen = o->timer_gen;
    m->coll.op_timers_n++;
}

bool m_op_timer_live(const ccoip_master *m, const m_op_timer *t)
{
    const m_op *o = &m->coll.ops[t->op];
    return o->state != MOP_FREE && o->has_first && o->timer_gen == t->gen;
}

/* Drops stale deadlines from the FIFO's head. */
void m_op_timers_prune(ccoip_master *m)
{
    while (m->coll.op_timers_n > 0 &&
           !m_op_timer_live(m, &m->coll.op_timers[m->coll.op_timers_head])) {
        m->coll.op_timers_head = (m->coll.op_timers_head + 1u) % m->coll.op_timers_cap;
        m->coll.op_timers_n--;
    }
}
