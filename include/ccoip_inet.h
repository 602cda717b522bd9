/*
 * ccoip_inet.h — socket addresses of the CCoIP protocol (PCCL 1.0 compatible).
 *
 * Programs written against PCCL 1.0 include this header (directly or through
 * pccl.h); the types and their field order are PCCL's, so designated
 * initializers written for PCCL compile unchanged (C99, C11 and C++20).
 */
#ifndef CCOIP_INET_H
#define CCOIP_INET_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Address family of a ccoip_inet_address_t. */
typedef enum ccoip_inet_protocol_t {
    inetIPv4 = 0, /**< IPv4: ccoip_inet_address_t.ipv4 is meaningful. */
    inetIPv6 = 1  /**< IPv6: ccoip_inet_address_t.ipv6 is meaningful. */
} ccoip_inet_protocol_t;

/** An IPv4 address in network order: {127, 0, 0, 1} is 127.0.0.1. */
typedef struct ccoip_ipv4_address_t {
    uint8_t data[4];
} ccoip_ipv4_address_t;

/** An IPv6 address in network order. */
typedef struct ccoip_ipv6_address_t {
    uint8_t data[16];
} ccoip_ipv6_address_t;

/**
 * An IP address. Both members are present (this is not a union, as in
 * PCCL); `protocol` says which one is read.
 */
typedef struct ccoip_inet_address_t {
    ccoip_inet_protocol_t protocol;
    ccoip_ipv4_address_t ipv4;
    ccoip_ipv6_address_t ipv6;
} ccoip_inet_address_t;

/** An IP address and a TCP port in host order. */
typedef struct ccoip_socket_address_t {
    ccoip_inet_address_t inet;
    uint16_t port;
} ccoip_socket_address_t;

#ifdef __cplusplus
}
#endif

#endif /* CCOIP_INET_H */
