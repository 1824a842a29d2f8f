/* SPDX-License-Identifier: MIT */
#pragma once

/* reclaim's internal declarations, shared by the files of the module (not for other modules):
 *   reclaim.c       the module: config, the pod observer, metrics, lifecycle
 *   reclaim-api.c   GET /v1/reclaim
 *   target*.c       one cgroup's state machine and episodes (target.h)
 *   plan.c          the decisions; memcg.c: the cgroup files
 *   unit-cap.c      the cap of a systemd unit's own cgroup, through systemd's D-Bus API
 *                   (unit-name.c: which cgroup is one) */

#include <stdbool.h>
#include <stddef.h>

#include "api.h"
#include "memcg.h"
#include "metrics.h"
#include "module.h"
#include "target.h"

struct reclaim_settings {
        struct reclaim_target_settings **targets;
        size_t n_targets;
};

struct reclaim {
        struct reclaim_settings *settings;
        struct reclaim_ctx ctx;
        struct module_instance *mi;

        struct reclaim_target **targets; /* the sections' first, then opted-in pods */
        size_t n_targets;
        char **pod_errors; /* "namespace/name: why its opt-in was refused" */

        bool have_hierarchy;
        enum memcg_version version;
        struct api_routes *routes;
        struct metrics_registration *metrics_reg; /* ctx.metrics and the collector */
        bool observing;
};

/* Adds GET /v1/reclaim, unless added already (rc->routes). */
int reclaim_api_register(struct module_instance *mi);
