/*
 * sm_harness.h — a small in-memory world for the state-machine unit tests:
 * one ccoip_master and up to SMH_MAX_PEERS ccoip_peers, wired by a FIFO
 * event queue, with virtual time. Control frames are delivered as RECV
 * events in order; p2p connections carry HELLO frames as RECV and ring
 * chunks by matching RING_SEND against posted RING_RECVs (ccoip_sm.h
 * rules); kernels run immediately on real buffers (ccoip_reduce.h,
 * ccoip_quant.h). Faults: kill a peer (its connections close), freeze it
 * (silent, connections stay open), kill or freeze the master, block a
 * directed p2p link (its CONNECT fails), inject raw bytes. A mini-simulator;
 * the full one is sim/.
 */
#ifndef SM_HARNESS_H
#define SM_HARNESS_H

#include <stdbool.h>
#include <stdint.h>

#include "ccoip_master.h"
#include "ccoip_peer.h"

#define SMH_MAX_PEERS 16u
#define SMH_MAX_CMDS  64u

typedef struct smh smh;

/** Creates a world. mcfg/pcfg may be NULL (defaults). */
smh *smh_create(const ccoip_master_config *mcfg, const ccoip_peer_config *pcfg);
void smh_destroy(smh *h);

/** Adds a started peer in group; returns its index. */
uint32_t smh_add_peer(smh *h, uint32_t group);
/* The authentication configuration of the peers added from now on (docs/protocol.md §6.1.1). */
void smh_set_peer_auth(smh *h, const ccoip_auth_config *auth);
/** Submits a command without arguments; returns its cmd_id. */
uint64_t smh_submit(smh *h, uint32_t peer, ccoip_cmd_type type);
/**
 * Submits an all-reduce over the caller's buffers (recvbuf == sendbuf for in
 * place; args->in_place must say so). The buffers must outlive the command.
 */
uint64_t smh_allreduce(smh *h, uint32_t peer, const ccoip_allreduce_args *args, const void *sendbuf,
                       void *recvbuf);
/**
 * Submits a shared-state sync (delivered at once: args->keys are borrowed for
 * the step); tensors[i] is the memory of args->keys[i] and must outlive the command.
 */
uint64_t smh_sync(smh *h, uint32_t peer, const ccoip_sync_args *args, void *const *tensors);
/** A sync of one float tensor w[count] (outliving the command) named name, ENFORCE_POPULAR, at
 *  revision rev. */
uint64_t smh_sync_floats(smh *h, uint32_t peer, const char *name, float *w, uint64_t count,
                         uint64_t rev);
/** A completed sync's NOTIFY: rx/tx bytes and revision. False when not done. */
bool smh_sync_info(const smh *h, uint32_t peer, uint64_t cmd, uint64_t *rx, uint64_t *tx,
                   uint64_t *revision);
/** PROBE results: from -> to takes us_per_mib µs per MiB (default 1000). */
void smh_set_link_cost(smh *h, uint32_t from, uint32_t to, uint64_t us_per_mib);
/** PROBEs from -> to fail (pcclRankConnectionFailed) while fail is true. */
void smh_fail_probe(smh *h, uint32_t from, uint32_t to, bool fail);
/** PROBE actions seen so far (all peers). */
uint32_t smh_probe_count(const smh *h);
/**
 * CONNECTs from -> to (p2p or shared-state listener) issued while hang is true connect, but the
 * acceptor never sees the connection nor answers on it (a hung process whose kernel accepted):
 * the dialer stays alive and heartbeats and waits. Clearing it affects only later dials.
 * (A dial that never connects at all is a blocked one: smh_block_link.)
 */
void smh_hang_link(smh *h, uint32_t from, uint32_t to, bool hang);
/** PROBEs from -> to issued while hang is true do not complete; clearing it fails them
 *  (pcclRankConnectionFailed: the hung probe timed out). */
void smh_hang_probe(smh *h, uint32_t from, uint32_t to, bool hang);
/** Frames the master sent peer so far with this body (CCOIP_PB_MASTER_TO_PEER_BODY_*), status
 *  and reason (the envelope's; for an EVICTION body, the eviction's reason). */
uint32_t smh_master_sent(const smh *h, uint32_t peer, int32_t body, int32_t status, int32_t reason);
/** The next n non-empty STATE_SENDs of peer arrive with their first byte flipped. */
void smh_corrupt_state_sends(smh *h, uint32_t peer, uint32_t n);
/** The peer dies right when it emits its n-th STATE_SEND (n >= 1; 0 disarms). */
void smh_kill_on_state_send(smh *h, uint32_t peer, uint32_t n);
/** True when cmd completed; *r its result, *world the world size, *pending peers_pending. */
bool smh_done(const smh *h, uint32_t peer, uint64_t cmd, pcclResult_t *r);
bool smh_done_ex(const smh *h, uint32_t peer, uint64_t cmd, pcclResult_t *r, uint32_t *world,
                 bool *pending);

/** Processes queued events until none is left (time does not move). */
void smh_run(smh *h);
/** Moves time forward by ns, firing every deadline on the way. */
void smh_advance(smh *h, uint64_t ns);

/** Faults. */
void smh_kill_peer(smh *h, uint32_t peer);
void smh_freeze_peer(smh *h, uint32_t peer);
void smh_kill_master(smh *h);
void smh_freeze_master(smh *h);
void smh_block_link(smh *h, uint32_t from, uint32_t to);
/** Peer behind NAT: CONNECTs to it never connect nor fail (a dropped SYN); probes of it fail. */
void smh_nat_peer(smh *h, uint32_t peer);
/** The master relays links neither end can dial (docs/protocol.md §8.6) on a harness port. */
void smh_enable_relay(smh *h);
/** The peer dies right when it emits its n-th RING_SEND (n >= 1; 0 disarms). */
void smh_kill_on_ring_send(smh *h, uint32_t peer, uint32_t n);
/** Delivers raw bytes to the master as if peer sent them on its control connection. */
void smh_inject_to_master(smh *h, uint32_t peer, const uint8_t *data, uint64_t len);

/** Access. */
ccoip_master *smh_master(smh *h);
ccoip_peer *smh_peer(smh *h, uint32_t peer);
uint64_t smh_now(const smh *h);
/** LOG lines seen whose text contains needle (any machine). */
uint32_t smh_log_count(const smh *h, const char *needle);
/** NOTIFY actions seen for cmd of peer (exactly-one checks). */
uint32_t smh_notify_count(const smh *h, uint32_t peer, uint64_t cmd);
/** Step results other than pcclSuccess (must stay 0 in a healthy run). */
uint32_t smh_step_errors(const smh *h);

/** p2p_pool_size of the peers added from now on. */
void smh_set_pool(smh *h, uint32_t pool);
/** Open p2p connections dialled by peer from to peer to (its ring successor). */
uint32_t smh_p2p_links(const smh *h, uint32_t from, uint32_t to);
/**
 * The connections of peer's latest RING_SEND (*tx) and RING_RECV (*rx) of tag
 * (CCOIP_CONN_NONE when it posted none); false when tag never ran there.
 */
bool smh_ring_conns(const smh *h, uint32_t peer, uint64_t tag, uint64_t *tx, uint64_t *rx);
/**
 * How many distinct connections peer's RING_SENDs (*ntx) and RING_RECVs (*nrx) of tag used
 * since the tag first ran there (a striped op: one per stripe, docs/protocol.md §8.2); false
 * when tag never ran there.
 */
bool smh_ring_conn_sets(const smh *h, uint32_t peer, uint64_t tag, uint32_t *ntx, uint32_t *nrx);

/** Connects peers 0..n-1 (peer 0 first, then the others admitted by peer 0's update). */
bool smh_form_ring(smh *h, uint32_t n, uint32_t group);
/** The first n (<= 8) peers all-reduce 6 uint32 (peer i's element k: 1000 i + k) on tag: true
 *  when every one succeeded with the exact sums. */
bool smh_reduce_exact(smh *h, uint32_t n, uint64_t tag);

/**
 * A harness whose master has the default configuration but for the relay bound (0: off) and
 * the vote timeout (0: the default), with a link pool of `pool`, and a ring of n members in
 * group 0 formed; NULL (nothing left) when the ring did not form.
 */
smh *smh_ring_of(uint32_t n, uint32_t pool, uint64_t relay_max, uint32_t vote_timeout_ms);

#endif /* SM_HARNESS_H */
