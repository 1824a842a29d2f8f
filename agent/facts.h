/* SPDX-License-Identifier: MIT */
#pragma once

/* Facts modules publish on the manager (manager_publish/manager_lookup) for other modules:
 * the name and the type of each, so publisher and reader agree without including each other. */

/* identity → apiserver: the node's client certificate, once bootstrapped. */
#define FACT_NODE_CREDENTIALS "node-credentials"
struct node_credentials {
        const char *cert_file; /* PEM certificate chain */
        const char *key_file;  /* PEM private key */
};

/* zkreg → configsync: the agent's one ZooKeeper session, for znode change notifications.
 * Published by zkreg while it runs (and unpublished before it stops). */
#define FACT_ZOOKEEPER "zookeeper"
#include <stdint.h>
/* The znode's data version (Stat.mzxid, which changes on every write) or a negative errno:
 * -ENOENT if the node does not exist, -ENOTCONN while there is no session. Called once soon
 * after watch_node() and again after every change, also after the session is re-established
 * (so a change missed while disconnected is still reported). */
typedef void (*zookeeper_node_fn)(const char *path, int64_t mzxid, int error, void *userdata);
struct zookeeper_fact {
        void *zk; /* the publisher's state, passed back to the functions below */
        /* Starts watching path (absolute, under the session's chroot); *ret_watch identifies the
         * watch for unwatch_node(). Negative errno on bad arguments or OOM. */
        int (*watch_node)(void *zk, const char *path, zookeeper_node_fn fn, void *userdata, void **ret_watch);
        /* Stops a watch; fn is never called for it afterwards. NULL is a no-op. When the fact is
         * unpublished every watch ends likewise (fn never called again; do not unwatch then). */
        void (*unwatch_node)(void *zk, void *watch);
};

/* apiserver → podnet: this node's pod CIDR(s) from the Node object's spec.podCIDR and
 * spec.podCIDRs: the first IPv4 and the first IPv6 one, "v4,v6" when the Node is dual-stack. Published by apiserver while it runs (unpublished before it stops).
 * The Node is read only on demand: a module that needs the CIDR calls request() (idempotent);
 * cidr stays NULL until the Node has been read and has one. */
#define FACT_NODE_POD_CIDR "node-pod-cidr"
struct node_pod_cidr {
        const char *cidr; /* "10.244.7.0/24", "10.244.7.0/24,fd00:7::/64", or NULL (not read yet, or none) */
        void (*request)(void *userdata);
        void *userdata;
};

/* apiserver → podnet: the cluster's Nodes, as routes between nodes need them: name, InternalIP
 * and pod CIDRs of each, from a list + watch of every Node (same reflector, token bucket and
 * backoff as the pod watch). Published by apiserver while it runs (unpublished before it stops;
 * every subscription ends with it, without a call). The Node watch starts on the first
 * subscribe(), so an agent that needs no routes never lists Nodes (nor needs the RBAC for it). */
#define FACT_CLUSTER_NODES "cluster-nodes"
#include <stdbool.h>
#include <stddef.h>
enum { CLUSTER_NODE_IPV4, CLUSTER_NODE_IPV6, _CLUSTER_NODE_FAMILY_MAX };
struct cluster_node {
        const char *name;
        /* status.addresses' first InternalIP of each family, NULL if none */
        const char *address[_CLUSTER_NODE_FAMILY_MAX];
        /* spec.podCIDRs' (else spec.podCIDR's) first network of each family, NULL if none */
        const char *pod_cidr[_CLUSTER_NODE_FAMILY_MAX];
};
/* Called after the table changed: a Node added or deleted, or its addresses or pod CIDRs
 * changed (events that change neither are dropped before any work), and once when the first
 * list completes. The table may be read from inside the call. */
typedef void (*cluster_nodes_fn)(void *userdata);
struct cluster_nodes {
        void *owner; /* the publisher's state, passed back to the functions below */
        /* -EEXIST if fn/userdata is subscribed already, -ENOMEM. */
        int (*subscribe)(void *owner, cluster_nodes_fn fn, void *userdata);
        void (*unsubscribe)(void *owner, cluster_nodes_fn fn, void *userdata);
        /* false until the first list has completed: an empty table then means "unknown". */
        bool (*synced)(void *owner);
        /* The table, sorted by name, this node included; valid until the next change. */
        size_t (*nodes)(void *owner, const struct cluster_node **ret);
};
