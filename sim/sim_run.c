/*
 * sim_run.c — one run (sim.h, sim_run): a world (sim_world.h) with its two
 * observers, the checkers (sim_check.h) and the workload (sim_app.h),
 * registered in that order so the checkers see each verdict before the
 * workload acts on it.
 */
#include <stdio.h> /* snprintf only: formatting into buffers, no I/O */
#include <string.h>

#include "ccoip_dtype.h"
#include "sim_check.h"

sim_status sim_run(const sim_config *cfg, sim_result *out)
{
    memset(out, 0, sizeof *out);
    const sim_sm_vt *vt = cfg->vt != NULL ? cfg->vt : sim_sm_core();
    if (vt == NULL) {
        out->status = SIM_UNAVAILABLE;
        snprintf(out->message, sizeof out->message,
                 "this build has no state machines to drive (core/ccoip_master.h, "
                 "core/ccoip_peer.h)");
        return out->status;
    }
    if (!ccoip_dtype_valid(cfg->dtype) || cfg->peers == 0 || cfg->tags == 0 ||
        cfg->tags > SIM_MAX_TAGS || cfg->p2p_pool_size > 8u /* CCOIP_P2P_POOL_MAX */ ||
        (cfg->coll_kind == SIM_KIND_P2P && cfg->tags > SIM_MAX_TAGS / 2u)) {
        out->status = SIM_CRASH;
        snprintf(out->message, sizeof out->message, "invalid configuration");
        return out->status;
    }
    sim_world *w = world_create(cfg, vt, out);
    if (w == NULL) return out->status;
    sim_workload *wl = app_create(w);
    sim_checker *ck = wl != NULL ? check_create(w, wl) : NULL;
    if (ck != NULL) {
        const sim_observer checks = check_observer(ck), app = app_observer(wl);
        if (!world_observe(w, &checks) || !world_observe(w, &app)) {
            world_fail(w, SIM_CRASH, "too many observers");
        }
    }
    world_start(w);
    world_run(w);
    const sim_status st = out->status;
    world_destroy(w);
    check_destroy(ck);
    app_destroy(wl);
    return st;
}
