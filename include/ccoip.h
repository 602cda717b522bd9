/*
 * ccoip.h — constants of the CCoIP protocol (PCCL 1.0 compatible).
 */
#ifndef CCOIP_H
#define CCOIP_H

#include "ccoip_inet.h"

/** Default TCP port of the master (the ccoip_master executable listens here). */
#define CCOIP_PROTOCOL_PORT_MASTER (48148)
/** First port a peer tries for serving shared-state transfers (PCCL 1.0 name). */
#define CCOIP_PROTOCOL_PORT_SHARED_STATE (48149)
/** First port a peer tries for its ring (p2p) listener (PCCL 1.0 name). */
#define CCOIP_PROTOCOL_PORT_P2P (48150)
/** First port a peer tries for bandwidth probes (PCCL 1.0 name). */
#define CCOIP_PROTOCOL_PORT_BANDWIDTH_BENCHMARK (48151)

#endif /* CCOIP_H */
