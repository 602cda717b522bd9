/*
 * sm_core.c — binds the simulator to the real state machines of core/
 * (ccoip_master.h, ccoip_peer.h). Built only when those headers exist
 * (SIM_HAVE_CORE_SM); otherwise sim_sm_core() returns NULL and pccl-sim says
 * so.
 */
#include <stddef.h>
#include <string.h>

#include "sim_sm.h"

#ifdef SIM_HAVE_CORE_SM

#include "ccoip_master.h"
#include "ccoip_peer.h"

static void *core_master_create(const sim_master_params *p, uint64_t seed)
{
    ccoip_master_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.max_peers = p->max_peers;
    cfg.heartbeat_ms = p->heartbeat_ms;
    cfg.evict_ms = p->evict_ms;
    cfg.vote_timeout_ms = p->vote_timeout_ms;
    cfg.canary_skip_abort_verdict = p->canary_skip_abort_verdict;
    ccoip_master *m = NULL;
    if (ccoip_master_create(&cfg, seed, &m) != pcclSuccess) return NULL;
    return m;
}

static void *core_peer_create(const sim_peer_params *p, uint64_t seed)
{
    ccoip_peer_config cfg;
    memset(&cfg, 0, sizeof cfg);
    memcpy(cfg.master_ip, p->master_ip, 4);
    cfg.master_ip_len = 4;
    cfg.master_port = p->master_port;
    cfg.peer_group = p->peer_group;
    cfg.p2p_pool_size = p->p2p_pool_size;
    cfg.max_ops = p->max_ops;
    cfg.heartbeat_ms = p->heartbeat_ms;
    cfg.evict_ms = p->evict_ms;
    cfg.canary_skip_restore = p->canary_skip_restore;
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

static uint64_t core_deadline(const void *m, bool is_master)
{
    return is_master ? ccoip_master_deadline_ns(m) : ccoip_peer_deadline_ns(m);
}

static void core_set_port(void *m, ccoip_listener listener, uint32_t port)
{
    (void)ccoip_peer_set_port(m, listener, port, NULL);
}

static const sim_sm_vt core_vt = {"core",    core_master_create, core_peer_create, core_destroy,
                                  core_step, core_poll,          core_deadline,    core_set_port};

const sim_sm_vt *sim_sm_core(void)
{
    return &core_vt;
}

#else

const sim_sm_vt *sim_sm_core(void)
{
    return NULL;
}

#endif
