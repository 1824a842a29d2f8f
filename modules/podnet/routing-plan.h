/* SPDX-License-Identifier: MIT */
#pragma once

/* The routing decisions, as pure functions: which node routes and aggregates this node should
 * have (from the cluster's Nodes and its own pod CIDRs), and what to change in the kernel to get
 * there from the routes of pinion's the kernel holds. No kernel, no logging: routing.c asks the
 * kernel and applies the changes. */

#include <stdbool.h>
#include <stddef.h>

#include "facts.h"
#include "routes.h"

enum routing_mode {
        ROUTING_NONE,  /* no node routes, no aggregates (those of pinion's are removed) */
        ROUTING_NODES, /* a route to every other Node's pod CIDRs via its InternalIP, and aggregates */
        ROUTING_BGP,   /* aggregates only, for BIRD to announce; BIRD installs the peers' routes */
        _ROUTING_MODE_MAX,
};

/* Why a Node's pod CIDR of one family gets no route. */
enum routing_skip_reason {
        ROUTING_SKIP_NOT_CONNECTED, /* its address is reached through a gateway: routed fabrics need bgp */
        ROUTING_SKIP_NO_ROUTE,      /* the kernel has no route to its address */
        ROUTING_SKIP_NO_ADDRESS,    /* a pod CIDR of a family it has no InternalIP of */
        ROUTING_SKIP_INVALID,       /* its pod CIDR or address does not parse */
        ROUTING_SKIP_OWN_CIDR,      /* its pod CIDR overlaps this node's */
        ROUTING_SKIP_DUPLICATE,     /* a Node before it (by name) has the same pod CIDR */
        _ROUTING_SKIP_REASON_MAX,
};
const char *routing_plan_reason_to_string(enum routing_skip_reason r);

enum routing_op {
        ROUTING_OP_ADD,
        ROUTING_OP_REPLACE,
        ROUTING_OP_DELETE,
        _ROUTING_OP_MAX,
};
const char *routing_plan_op_to_string(enum routing_op op);

/* A route this node should have: node NULL for its own aggregate. */
struct routing_want {
        struct route route;
        const char *node;
};

struct routing_skip {
        const char *node;
        const char *address; /* may be NULL */
        const char *cidr;
        enum routing_skip_reason reason;
};

struct routing_change {
        enum routing_op op;
        struct route route;
        const char *node; /* of the route wanted (add, replace); NULL for a delete */
};

/* 1 if gateway is on a directly connected subnet, 0 if not, negative errno if it has no route. */
typedef int (*routing_plan_connected_fn)(int family, const struct in6_addr *gateway, void *userdata);

struct routing_plan_input {
        enum routing_mode mode;
        const char *own_cidrs;  /* "10.244.7.0/24" or "10.244.7.0/24,fd00:7::/64"; NULL: none */
        const char *self;       /* this node's name: its own entry gets no route */
        bool nodes_known;       /* the Node list is synced: node routes may be added and removed */
        const struct cluster_node *nodes;
        size_t n_nodes;
        routing_plan_connected_fn connected;
        void *userdata;
};

/* Strings point into the input (its Node table), valid as long as it is. */
struct routing_plan {
        struct routing_want *want;
        size_t n_want;
        struct routing_skip *skipped;
        size_t n_skipped;
        struct routing_change *changes;
        size_t n_changes;
};

/* The routes wanted and the Nodes skipped. */
int routing_plan_desired(const struct routing_plan_input *in, struct routing_plan *plan);
/* The changes from the kernel's routes of pinion's (routes_dump()) to plan's wanted ones: an add
 * for a key the kernel lacks, a replace for one it holds otherwise, a delete for every route not
 * wanted, except node routes while !nodes_known (an unknown list removes nothing). */
int routing_plan_diff(struct routing_plan *plan, const struct route *kernel, size_t n_kernel, bool nodes_known);
void routing_plan_done(struct routing_plan *plan);

/* Same family, destination and priority (the kernel's key). */
bool routing_plan_same_key(const struct route *a, const struct route *b);
/* Same key, type and gateway. */
bool routing_plan_same_route(const struct route *a, const struct route *b);
/* "10.244.7.0/24" -> a route's destination; 0 or -EINVAL (host bits set are cleared). */
int routing_plan_parse_prefix(const char *s, struct route *ret);
/* "10.244.7.0/24 via 192.168.1.7" or "unreachable 10.244.7.0/24" */
const char *routing_plan_format(const struct route *r, char *buf, size_t size);
