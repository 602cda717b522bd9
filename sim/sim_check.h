/*
 * sim_check.h — the invariant checkers (docs/simulator.md "Checkers"). They
 * follow the world as an observer (sim_world.h) and read the workload's
 * commands and tensors (sim_app.h); nothing calls into them but the world's
 * hooks. Adding a checker: docs/simulator.md.
 */
#ifndef SIM_CHECK_H
#define SIM_CHECK_H

#include "sim_app.h"

typedef struct sim_checker sim_checker;

/** The checkers of w's run over workload wl; NULL (and w failed) when out of memory. */
sim_checker *check_create(sim_world *w, sim_workload *wl);
/** Their observer, to register with world_observe before the workload's (they see each NOTIFY
 *  before the workload acts on it). */
sim_observer check_observer(sim_checker *ck);
/** Frees the checkers' records (after world_destroy). */
void check_destroy(sim_checker *ck);

#endif /* SIM_CHECK_H */
