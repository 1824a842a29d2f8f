/* SPDX-License-Identifier: MIT */
#pragma once

/* systemd services as workloads (on VMs and bare hosts, where no kubelet runs them): the
 * [service.NAME] sections that map a unit to a SPIFFE ID, and which unit a process runs in.
 *
 * A service is attested by its cgroup, as systemd made it: every unit gets the cgroup
 * <slice>/<unit> (the unit's ControlGroup property), and only the units directly below the
 * configured service roots count ([agent] service-cgroup-roots, by default /system.slice, the
 * slice of every system service that names none). Creating a cgroup there takes root, while a
 * user's delegated subtree (user@UID.service) lies below /user.slice and can name a cgroup
 * "web.service" anywhere inside it: such a name outside the roots is no service. A unit with
 * Delegate=yes may put its processes below its own cgroup: they are still that unit's.
 *
 * Every line of /proc/PID/cgroup counts (v1 hierarchies and the v2 line): the lines naming a
 * unit below a root must all name the same one; lines outside the roots contradict nothing. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "config.h"

#define SERVICE_CGROUP_ROOTS_DEFAULT "/system.slice"
#define SERVICE_SECTION_PREFIX "service."

/* [service.NAME]; the first member is the name (config_parse_instances()). */
struct service_settings {
        char *name;
        char *unit;       /* "nginx.service"; default "<NAME>.service" */
        char *spiffe_id;  /* NULL: spiffe://<trust-domain>/service/<unit without .service> */
        char *user;       /* owner of the files written for it; NULL: root */
        char *tls_dir;    /* where its cert.pem, key.pem and bundle.pem go; NULL: none */
        char **dns_names; /* DNS SANs of its certificate */
};

/* Parses every [service.NAME] (units unique, users that exist, SPIFFE IDs that parse). */
int services_parse(struct config *c, struct service_settings ***ret, size_t *ret_n, char **ret_error);
void services_free(struct service_settings **s, size_t n);
/* Refuses a tls-dir in (or below) the directory of the agent's socket, the sockets-only
 * directory pods may mount. */
int services_check_tls_dirs(struct config *c, struct service_settings *const *s, size_t n, const char *socket_path,
                            char **ret_error);

/* Whether name is a systemd service unit name ("web.service", "getty@tty1.service"). */
bool service_unit_valid(const char *name);
/* The configured service of unit, or NULL. */
const struct service_settings *service_find_unit(struct service_settings *const *s, size_t n, const char *unit);

/* Parses the text of a /proc/PID/cgroup file against the service roots. 1: *ret_unit is the
 * unit. 0: in none below a root. -EBADMSG: lines name different units. */
int service_from_proc_cgroup(const char *text, char *const *roots, char **ret_unit);
/* The unit process pid runs in, checked against its start time as peer_pod_lookup() does. */
int peer_service_lookup(const char *proc_root, char *const *roots, pid_t pid, uint64_t start_time, char **ret_unit);
