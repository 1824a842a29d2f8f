/* SPDX-License-Identifier: MIT */
#pragma once

/* The daemon's own settings: the [agent] section, and the [service.NAME] sections parsed with
 * it (service.h). */

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "config.h"
#include "macro.h"

struct service_settings;

struct agent_settings {
        char *node_name;
        char *state_dir;
        char *runtime_dir;
        char *socket;
        mode_t socket_mode;
        char *socket_group;
        char *pods_dir;
        char **pod_cgroup_roots; /* where the kubelet puts pods' cgroups (peer-pod.h) */
        char **service_cgroup_roots; /* the slices whose units are services (service.h) */
        char *log_level;
        char *log_format;
        usec_t stop_timeout;
        bool drop_capabilities;
        bool release_startup_pages; /* self-memory.h */
        unsigned memory_watermark; /* percent of the cgroup's limit; 100: no refusals (self-memory.h) */
        char *metrics_listen; /* ADDR:PORT serving /metrics over TCP; NULL: none */
        /* [service.NAME]: systemd services that get an identity (service.h). Not in the
         * [agent] table: parsed from their own sections with the agent's settings. */
        struct service_settings **services;
        size_t n_services;
};

/* Parses [agent] and every [service.NAME] of c into *ret, which agent_settings_done() releases.
 * On a problem, nothing is kept and -EINVAL comes back with *ret_error = "FILE:LINE: reason". */
int agent_settings_parse(struct config *c, struct agent_settings *ret, char **ret_error);
/* An unset node-name becomes $NODE_NAME (the DaemonSet's downward API), else the hostname,
 * lowercased (as the kubelet does). -EINVAL if that is no valid node name (s->node_name keeps
 * it, for the message). */
int agent_settings_fill_node_name(struct agent_settings *s);
void agent_settings_done(struct agent_settings *s);
/* The gid of socket-group, or (gid_t)-1 if none. */
int agent_settings_socket_gid(const struct agent_settings *s, gid_t *ret);
