/* SPDX-License-Identifier: MIT */
#pragma once

/* Node routes in the host's main table, over rtnetlink (libmnl): the routes to other nodes' pod
 * CIDRs (`<cidr> via <node address>`) and this node's own pod CIDRs as `unreachable` aggregates.
 *
 * Every route pinion installs carries PINION_RTPROT ("pinion" in /etc/iproute2/rt_protos.d/,
 * units/iproute2/pinion.conf), the pods' /32 and /128 routes too (wire.c, wire6.c). A node
 * route is told apart from those by its shape: it has a gateway or is unreachable, while a pod's
 * route is a device route to its veth. Only routes with that protocol are ever replaced or
 * deleted; one of another protocol with the same key makes an add fail with -EEXIST.
 *
 * Library-like: no logging; errors are negative errno. */

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct nl; /* wire-internal.h */

/* pinion's rtnetlink protocol number (rtm_protocol) on every route it installs. */
#define PINION_RTPROT 177

/* The metric the kernel gives an IPv6 route added without one (IP6_RT_PRIO_USER); an IPv4 one
 * gets 0. Routes are wanted with the metric the kernel reports, so a dump compares equal. */
#define ROUTES_IPV6_DEFAULT_METRIC 1024

/* A route of the main table, keyed by family, dst/dst_len and priority (what the kernel keys a
 * route by; tos is always 0 here). */
struct route {
        int family;               /* AF_INET or AF_INET6 */
        struct in6_addr dst;      /* an IPv4 network in the first 4 bytes */
        unsigned char dst_len;
        unsigned char type;       /* RTN_UNICAST (via gateway) or RTN_UNREACHABLE */
        bool has_gateway;
        struct in6_addr gateway;  /* an IPv4 address in the first 4 bytes; zero for a multipath route */
        uint32_t priority;
};

/* The main table's node routes with protocol PINION_RTPROT, both families (*ret: free()). */
int routes_dump(struct nl *nl, struct route **ret, size_t *ret_n);
/* Adds r if no route has its key: -EEXIST if one has (of any protocol). */
int routes_add(struct nl *nl, const struct route *r);
/* Replaces the route with r's key: only for a key held by a route of pinion's (callers check it
 * in a dump first; the kernel replaces any). */
int routes_replace(struct nl *nl, const struct route *r);
/* Deletes r if it is pinion's (the kernel matches the protocol); gone already: 0. */
int routes_delete(struct nl *nl, const struct route *r);
/* Whether addr is on a directly connected subnet: 1 if the kernel's route to it has no gateway,
 * 0 if it goes through one (*ret_via set, if not NULL) or is not unicast, -ENETUNREACH (or
 * another negative errno) if there is no route to it. */
int routes_gateway_connected(struct nl *nl, int family, const struct in6_addr *addr, struct in6_addr *ret_via);
