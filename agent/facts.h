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
