/* SPDX-License-Identifier: MIT */
#pragma once

/* Which systemd service a process runs in: the attestation behind CALLER_SERVICE (caller.h).
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
#include <stdint.h>
#include <sys/types.h>

#define SERVICE_CGROUP_ROOTS_DEFAULT "/system.slice"

/* Whether name is a systemd service unit name ("web.service", "getty@tty1.service"). */
bool peer_service_unit_valid(const char *name);
/* Parses the text of a /proc/PID/cgroup file against the service roots. 1: *ret_unit is the
 * unit. 0: in none below a root. -EBADMSG: lines name different units. */
int peer_service_from_proc_cgroup(const char *text, char *const *roots, char **ret_unit);
/* The unit process pid runs in, checked alive through pidfd and against its start time as
 * peer_pod_lookup() does. */
int peer_service_lookup(const char *proc_root, char *const *roots, pid_t pid, int pidfd, uint64_t start_time,
                        char **ret_unit);
