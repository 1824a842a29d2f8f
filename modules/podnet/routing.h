/* SPDX-License-Identifier: MIT */
#pragma once

/* `[network] routing`: the routes between nodes (see routing-plan.h for the modes).
 *
 * A pass dumps the kernel's routes of pinion's, computes the routes wanted (routing-plan.c) and
 * changes only what differs: a route already right is left alone, so a restart or a reload
 * makes no gap. Passes run at start, whenever the cluster's Nodes change (`nodes`: the
 * apiserver's FACT_CLUSTER_NODES, looked for once a second and subscribed to), every
 * reconcile-interval (a route deleted by hand comes back) and when the mode changes.
 *
 * Node routes are only added or removed once the Node list has synced; while it is unknown
 * (not listed yet, the apiserver module stopped) the installed ones stay as they are. A stop
 * removes node routes and aggregates only when no pod attachment exists on the node: with pods
 * attached they stay for the next agent, so a restart or an upgrade never cuts a pod off.
 *
 * The mode says what pinion's routes between nodes should be, whoever installed them: `none`
 * (at start, or by a reload) removes every node route and aggregate of pinion's, pods attached
 * or not (the operator chose a fabric that routes the pod CIDRs itself); a switch to `bgp`
 * removes the node routes (BIRD installs the peers' routes under its own protocol). */

#include <cjson/cJSON.h>

#include "module.h"
#include "routing-plan.h"

struct podnet;
struct routing;

const char *routing_mode_to_string(enum routing_mode m);
enum routing_mode routing_mode_from_string(const char *s);
const char *routing_mode_name_at(size_t i); /* config_choice_fn */

/* Applies the configured mode: a pass now (adopting the routes of pinion's the kernel has),
 * then the triggers above. Called again after the pod CIDR or the mode changed. */
int routing_start(struct module_instance *mi);
/* Stops the triggers; removes the node routes and aggregates if no pod attachment exists. */
void routing_stop(struct module_instance *mi);
struct routing *routing_free(struct routing *r);
/* "routing": mode, routes per family, aggregates, peers skipped and why, conflicts. */
int routing_status(const struct podnet *p, cJSON *obj);
