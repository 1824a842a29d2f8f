/* SPDX-License-Identifier: MIT */
#pragma once

/* The cluster's Nodes as routes between nodes need them (FACT_CLUSTER_NODES): name, InternalIP
 * and pod CIDRs of each, kept by the Node reflector (node-table is its sink) and announced to
 * subscribers only when one of those changed. Kubelets post their Node's status every few
 * minutes and on every condition change; almost none of those events move a route, and they are
 * dropped here, right after decoding, before anyone hears of them. */

#include <cjson/cJSON.h>

#include "facts.h"
#include "observer-list.h"
#include "reflector.h"

struct node_table {
        struct reflector_sink sink;   /* what the Node reflector is given */
        struct cluster_nodes fact;    /* what the module publishes */
        struct cluster_node *nodes;   /* sorted by name, strings owned */
        size_t n_nodes;
        struct cluster_node *list;    /* the list in progress */
        size_t n_list;
        bool synced;
        struct observer_list observers;
        uint64_t n_changes, n_unchanged; /* events that moved the table, and those dropped */
        /* Called on the first subscribe (the owner starts the Node watch then). */
        void (*wanted)(void *userdata);
        void *wanted_userdata;
};

/* The owner sets sink.selector (freed by node_table_done) before the reflector starts. */
int node_table_init(struct node_table *t, void (*wanted)(void *userdata), void *userdata);
void node_table_done(struct node_table *t);
bool node_table_wanted(const struct node_table *t); /* someone subscribed (and is still there) */

/* The pod CIDRs of a Node object: spec.podCIDRs' (else spec.podCIDR's) first valid IPv4 and
 * first valid IPv6 network, each NULL if none. The strings point into node. */
void node_table_pod_cidrs(const cJSON *node, const char **ret_v4, const char **ret_v6);
/* A Node object's entry: its name, first InternalIP of each family, pod CIDRs (copies).
 * -EINVAL (no name), -ENOMEM. */
int node_table_parse(const cJSON *node, struct cluster_node *ret);
void node_table_entry_done(struct cluster_node *n);
