/*
 * sim_net.h — the virtual network: timing of frames between hosts.
 *
 * Model (scales to thousands of hosts: per-host state, per-pair faults only):
 * every host has an access link with a one-way latency, an uplink and a
 * downlink bandwidth and a loss rate. A frame of S bytes from a to b leaves
 * when a's uplink is free (frames from one host serialize on its uplink),
 * takes S / min(up[a], down[b]) to transmit, and arrives lat[a] + lat[b]
 * later (with regions, also the regions' latency and bandwidth bound). Streams are reliable (TCP):
 * a lost segment is retransmitted after an RTO, so loss shows up as delay, never as a missing
 * frame.
 *
 * Faults are time windows [from, until): a CLOG holds frames a → b, a CUT
 * holds them both ways, a PARTITION holds every frame between a set of hosts
 * and the rest. A held frame goes on when the window ends; a window that
 * never ends (until = SIM_NET_FOREVER) loses the frame and makes connection
 * attempts across it time out.
 */
#ifndef SIM_NET_H
#define SIM_NET_H

#include <stdbool.h>
#include <stdint.h>

#include "sim_rng.h"

#define SIM_NET_FOREVER UINT64_MAX
#define SIM_HOST_ANY    UINT32_MAX

typedef struct sim_host_link {
    uint64_t latency_ns; /**< One-way, host to the core. */
    uint64_t up_bps;     /**< Uplink bytes per second (>= 1). */
    uint64_t down_bps;   /**< Downlink bytes per second (>= 1). */
    uint32_t loss_permille;
    uint32_t region; /**< Its region (sim_net.regions; ignored when not below it). */
    uint64_t up_busy_until_ns;
} sim_host_link;

/** Regions of hosts at most (sim_net.regions). */
#define SIM_NET_REGION_MAX 8u

typedef enum sim_fault_kind {
    SIM_FAULT_CLOG = 1,     /**< a → b (b may be SIM_HOST_ANY). */
    SIM_FAULT_CUT = 2,      /**< a ↔ b. */
    SIM_FAULT_PARTITION = 3 /**< set ↔ rest. */
} sim_fault_kind;

#define SIM_NET_PARTITION_MAX 16u

typedef struct sim_fault {
    sim_fault_kind kind;
    uint32_t a;
    uint32_t b;
    uint64_t from_ns;
    uint64_t until_ns;
    uint32_t set[SIM_NET_PARTITION_MAX];
    uint32_t set_len;
} sim_fault;

typedef struct sim_net {
    sim_host_link *hosts;
    uint32_t num_hosts;
    uint32_t cap_hosts;
    sim_fault *faults;
    uint32_t num_faults;
    uint32_t max_faults;
    uint64_t rto_ns; /**< Retransmission timeout added per lost segment (plus 2 RTT). */
    /**
     * Regions (0: none, the model above alone): a frame from a host of region r to one of
     * region s also takes region_latency_ns[r * SIM_NET_REGION_MAX + s] (one way, between the
     * regions' cores) and crosses at most region_bps[...] bytes per second (0: no bound), so
     * hosts near each other share fast paths and far ones slow, long ones.
     */
    uint32_t regions;
    uint64_t region_latency_ns[SIM_NET_REGION_MAX * SIM_NET_REGION_MAX];
    uint64_t region_bps[SIM_NET_REGION_MAX * SIM_NET_REGION_MAX];
    uint64_t frames;
    uint64_t bytes;
    uint64_t retransmits;
} sim_net;

bool sim_net_init(sim_net *n, uint32_t max_hosts, uint32_t max_faults);
void sim_net_deinit(sim_net *n);
/** Adds a host; returns its index, or UINT32_MAX when the table is full. */
uint32_t sim_net_add_host(sim_net *n, const sim_host_link *link);
/** Adds a fault window; returns false when the table is full. */
bool sim_net_add_fault(sim_net *n, const sim_fault *f);
/** True when frames a → b are held at time t; *until_out gets the end of the covering windows. */
bool sim_net_blocked(const sim_net *n, uint32_t a, uint32_t b, uint64_t t, uint64_t *until_out);
/** One-way propagation delay a → b (no serialization). */
uint64_t sim_net_latency(const sim_net *n, uint32_t a, uint32_t b);
/** Bytes per second a → b: min(a's uplink, b's downlink, the regions' bound). */
uint64_t sim_net_rate(const sim_net *n, uint32_t a, uint32_t b);
/**
 * Sends bytes from a to b at time now: returns the arrival time, or
 * SIM_NET_FOREVER when the frame is held forever. *sent_out (may be NULL)
 * gets the time the last byte left a (the sender's I/O completion).
 */
uint64_t sim_net_transit(sim_net *n, sim_rng *rng, uint32_t a, uint32_t b, uint64_t now,
                         uint64_t bytes, uint64_t *sent_out);

#endif /* SIM_NET_H */
