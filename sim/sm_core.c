/*
 * sm_core.c — binds the simulator to the real state machines of core/
 * (ccoip_master.h, ccoip_peer.h). Built only when those headers exist
 * (SIM_HAVE_CORE_SM); otherwise sim_sm_core() returns NULL and pccl-sim says
 * so.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "ccoip_trace.h"
#include "sim_sm.h"

#ifdef SIM_HAVE_CORE_SM

#include "ccoip_hash.h"
#include "ccoip_master.h"
#include "ccoip_peer.h"

/* Authenticated runs: one run key for the world, a secret per machine from its seed. */
static void sim_auth(bool on, uint64_t seed, ccoip_auth_config *a)
{
    memset(a, 0, sizeof *a);
    if (!on) return;
    a->mac = ccoip_auth_standin_mac; /* not a MAC: the flows, not the cryptography */
    for (uint32_t i = 0; i < CCOIP_AUTH_KEY_BYTES; i++)
        a->run_key[i] = (uint8_t)(0xA5u ^ i);
    uint64_t s = seed;
    for (uint32_t i = 0; i < CCOIP_AUTH_KEY_BYTES / 8u; i++) {
        const uint64_t v = ccoip_splitmix64(&s);
        memcpy(a->secret + 8u * i, &v, 8);
    }
}

static void master_config(const sim_master_params *p, ccoip_master_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->max_peers = p->max_peers;
    cfg->heartbeat_ms = p->heartbeat_ms;
    cfg->evict_ms = p->evict_ms;
    cfg->vote_timeout_ms = p->vote_timeout_ms;
    cfg->canary_skip_abort_verdict = p->canary_skip_abort_verdict;
    cfg->relay_max_bytes = p->relay_max_bytes;
    cfg->probe_bytes = p->probe_bytes;
    if (p->max_peers > 256u) {
        /* The defaults grow with max_peers squared (24 bytes per peer pair of
         * SEND payload per step): bound them for large runs. */
        cfg->out_bytes = ((uint64_t)64 << 10) + (uint64_t)p->max_peers * 2048u;
        cfg->action_queue_depth = p->max_peers * 8u + 4096u;
    }
}

static void peer_config(const sim_peer_params *p, ccoip_peer_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    memcpy(cfg->master_ip, p->master_ip, 4);
    cfg->master_ip_len = 4;
    cfg->master_port = p->master_port;
    cfg->peer_group = p->peer_group;
    cfg->p2p_pool_size = p->p2p_pool_size;
    cfg->max_ops = p->max_ops;
    cfg->heartbeat_ms = p->heartbeat_ms;
    cfg->evict_ms = p->evict_ms;
    cfg->canary_skip_restore = p->canary_skip_restore;
}

bool sim_sm_trace_header(bool is_master, const sim_master_params *mp, const sim_peer_params *pp,
                         uint64_t seed, ccoip_trace_header *out)
{
    memset(out, 0, sizeof *out);
    out->version = CCOIP_TRACE_VERSION;
    out->seed = seed;
    if (is_master) {
        out->machine = CCOIP_TRACE_MASTER;
        master_config(mp, &out->master);
    } else {
        out->machine = CCOIP_TRACE_PEER;
        peer_config(pp, &out->peer);
    }
    return true;
}

static void *core_master_create(const sim_master_params *p, uint64_t seed)
{
    ccoip_master_config cfg;
    master_config(p, &cfg);
    sim_auth(p->auth, seed, &cfg.auth);
    ccoip_master *m = NULL;
    if (ccoip_master_create(&cfg, seed, &m) != pcclSuccess) return NULL;
    return m;
}

/* One decode arena for every simulated peer of the process (ccoip_peer_config.decode_arena):
 * machines are stepped one at a time and a peer reads its arena only during its own step. A
 * peer of its own would hold ccoip_peer_decode_arena_bytes (~40 MB by default) each: virtual
 * memory natively, real memory under WASM (where 50 peers exhausted it), and one cache-cold
 * page per peer for every message decoded. Allocated once, kept for the process. */
static uint8_t *g_arena;
static uint64_t g_arena_bytes;

static void *core_peer_create(const sim_peer_params *p, uint64_t seed)
{
    ccoip_peer_config cfg;
    peer_config(p, &cfg);
    sim_auth(p->auth, seed, &cfg.auth);
    const uint64_t need = ccoip_peer_decode_arena_bytes(&cfg);
    if (g_arena == NULL) {
        g_arena = malloc((size_t)need);
        g_arena_bytes = g_arena != NULL ? need : 0;
    }
    if (g_arena_bytes >= need) { /* else (never with one config) the peer has its own */
        cfg.decode_arena = g_arena;
        cfg.decode_arena_bytes = g_arena_bytes;
    }
    ccoip_peer *peer = NULL;
    if (ccoip_peer_create(&cfg, seed, &peer) != pcclSuccess) return NULL;
    return peer;
}

static void core_destroy(void *m, bool is_master)
{
    if (is_master) {
        ccoip_master_destroy(m);
    } else {
        ccoip_peer_destroy(m);
    }
}

static int core_step(void *m, bool is_master, const ccoip_event *ev)
{
    return (int)(is_master ? ccoip_master_step(m, ev) : ccoip_peer_step(m, ev));
}

static bool core_poll(void *m, bool is_master, ccoip_action *out)
{
    return is_master ? ccoip_master_poll(m, out) : ccoip_peer_poll(m, out);
}

static const ccoip_action *core_poll_ref(void *m, bool is_master)
{
    return is_master ? ccoip_master_poll_ref(m) : ccoip_peer_poll_ref(m);
}

static void core_prefetch(const void *m, bool is_master, int stage)
{
    if (!is_master) ccoip_peer_prefetch(m, stage);
}

static uint64_t core_deadline(const void *m, bool is_master)
{
    return is_master ? ccoip_master_deadline_ns(m) : ccoip_peer_deadline_ns(m);
}

static void core_set_port(void *m, ccoip_listener listener, uint32_t port)
{
    (void)ccoip_peer_set_port(m, listener, port, NULL);
}

static void core_peer_ring(const void *m, uint64_t *epoch, int32_t *rank, uint32_t *world)
{
    *epoch = ccoip_peer_epoch(m);
    *rank = ccoip_peer_rank(m);
    *world = ccoip_peer_world_size(m);
}

static const sim_sm_vt core_vt = {
    "core",        core_master_create, core_peer_create, core_destroy,  core_step,     core_poll,
    core_deadline, core_set_port,      core_poll_ref,    core_prefetch, core_peer_ring};

const sim_sm_vt *sim_sm_core(void)
{
    return &core_vt;
}

#else

const sim_sm_vt *sim_sm_core(void)
{
    return NULL;
}

bool sim_sm_trace_header(bool is_master, const sim_master_params *mp, const sim_peer_params *pp,
                         uint64_t seed, ccoip_trace_header *out)
{
    (void)is_master;
    (void)mp;
    (void)pp;
    (void)seed;
    (void)out;
    return false;
}

#endif
