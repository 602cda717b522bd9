/*
 * sim_net.c — the virtual network's timing model (sim_net.h).
 */
#include "sim_net.h"

#include <stdlib.h>
#include <string.h>

bool sim_net_init(sim_net *n, uint32_t max_hosts, uint32_t max_faults)
{
    memset(n, 0, sizeof *n);
    n->hosts = calloc(max_hosts, sizeof *n->hosts);
    n->faults = calloc(max_faults > 0 ? max_faults : 1u, sizeof *n->faults);
    n->cap_hosts = max_hosts;
    n->max_faults = max_faults;
    n->rto_ns = 200u * 1000u * 1000u;
    return n->hosts != NULL && n->faults != NULL;
}

void sim_net_deinit(sim_net *n)
{
    free(n->hosts);
    free(n->faults);
    memset(n, 0, sizeof *n);
}

uint32_t sim_net_add_host(sim_net *n, const sim_host_link *link)
{
    if (n->num_hosts >= n->cap_hosts) return UINT32_MAX;
    sim_host_link *h = &n->hosts[n->num_hosts];
    *h = *link;
    if (h->up_bps == 0) h->up_bps = 1;
    if (h->down_bps == 0) h->down_bps = 1;
    h->up_busy_until_ns = 0;
    return n->num_hosts++;
}

bool sim_net_add_fault(sim_net *n, const sim_fault *f)
{
    if (n->num_faults >= n->max_faults) return false;
    n->faults[n->num_faults++] = *f;
    return true;
}

static bool net_in_set(const sim_fault *f, uint32_t h)
{
    for (uint32_t i = 0; i < f->set_len; i++) {
        if (f->set[i] == h) return true;
    }
    return false;
}

static bool net_fault_applies(const sim_fault *f, uint32_t a, uint32_t b)
{
    switch (f->kind) {
    case SIM_FAULT_CLOG:
        return f->a == a && (f->b == SIM_HOST_ANY || f->b == b);
    case SIM_FAULT_CUT:
        return (f->a == a && f->b == b) || (f->a == b && f->b == a);
    case SIM_FAULT_PARTITION:
        return net_in_set(f, a) != net_in_set(f, b);
    }
    return false;
}

bool sim_net_blocked(const sim_net *n, uint32_t a, uint32_t b, uint64_t t, uint64_t *until_out)
{
    /* Windows may overlap or abut: extend until no window covers the end. */
    uint64_t until = t;
    bool blocked = false;
    bool changed = true;
    while (changed) {
        changed = false;
        for (uint32_t i = 0; i < n->num_faults; i++) {
            const sim_fault *f = &n->faults[i];
            if (f->from_ns <= until && until < f->until_ns && net_fault_applies(f, a, b)) {
                until = f->until_ns;
                blocked = true;
                changed = until != SIM_NET_FOREVER;
                if (!changed) break;
            }
        }
    }
    if (until_out != NULL) *until_out = until;
    return blocked;
}

/* The index of a → b in the region tables, or UINT32_MAX when either has no region. */
static uint32_t net_region_pair(const sim_net *n, uint32_t a, uint32_t b)
{
    const uint32_t ra = n->hosts[a].region, rb = n->hosts[b].region;
    if (ra >= n->regions || rb >= n->regions) return UINT32_MAX;
    return ra * SIM_NET_REGION_MAX + rb;
}

uint64_t sim_net_latency(const sim_net *n, uint32_t a, uint32_t b)
{
    const uint64_t lat = n->hosts[a].latency_ns + n->hosts[b].latency_ns;
    const uint32_t k = net_region_pair(n, a, b);
    return k == UINT32_MAX ? lat : lat + n->region_latency_ns[k];
}

uint64_t sim_net_rate(const sim_net *n, uint32_t a, uint32_t b)
{
    const sim_host_link *src = &n->hosts[a], *dst = &n->hosts[b];
    uint64_t bps = src->up_bps < dst->down_bps ? src->up_bps : dst->down_bps;
    const uint32_t k = net_region_pair(n, a, b);
    if (k != UINT32_MAX && n->region_bps[k] != 0 && n->region_bps[k] < bps) bps = n->region_bps[k];
    return bps;
}

uint64_t sim_net_transit(sim_net *n, sim_rng *rng, uint32_t a, uint32_t b, uint64_t now,
                         uint64_t bytes, uint64_t *sent_out)
{
    sim_host_link *src = &n->hosts[a];
    const sim_host_link *dst = &n->hosts[b];
    const uint64_t bps = sim_net_rate(n, a, b);
    uint64_t start = now > src->up_busy_until_ns ? now : src->up_busy_until_ns;
    /* bytes * 1e9 / bps without overflow for frames below 16 GiB. */
    const uint64_t tx_ns = bytes / bps * 1000000000u + (bytes % bps) * 1000000000u / bps;
    const uint64_t sent = start + tx_ns;
    src->up_busy_until_ns = sent;
    if (sent_out != NULL) *sent_out = sent;
    n->frames++;
    n->bytes += bytes;

    uint64_t t = sent;
    const uint64_t lat = sim_net_latency(n, a, b);
    const uint32_t loss =
        src->loss_permille > dst->loss_permille ? src->loss_permille : dst->loss_permille;
    /* Each loss costs one RTO plus a round trip; at most 4 in a row. */
    for (uint32_t i = 0; i < 4u && sim_rng_chance(rng, loss); i++) {
        t += n->rto_ns + 2u * lat;
        n->retransmits++;
    }
    uint64_t until;
    if (sim_net_blocked(n, a, b, t, &until)) {
        if (until == SIM_NET_FOREVER) return SIM_NET_FOREVER;
        t = until;
    }
    return t + lat;
}
