/* SPDX-License-Identifier: MIT */
#pragma once

/* Which pod a process belongs to: the peer attestation behind caller.h (every route that answers
 * a pod for itself: /v1/identity, /v1/configs, /v1/registrations).
 *
 * A process's pod is read from /proc/PID/cgroup, where the kubelet's cgroup drivers put every
 * container of a pod below one directory named for the pod's UID:
 *   cgroupfs  .../kubepods/burstable/pod<uid>/<container>
 *   systemd   .../kubepods-burstable-pod<uid with '_' for '-'>.slice/cri-containerd-<id>.scope
 * on any v1 hierarchy line ("N:controller:/path") or the v2 line ("0::/path"). The outermost
 * such segment is the pod: a container that owns its cgroup could make "pod<other uid>" below
 * it, so a path naming two different pods attests nothing (-EBADMSG).
 *
 * A PID can be reused: the process that connected may exit and another take its number before
 * we read /proc. So the caller records the process's start time when the connection is accepted
 * (struct api_peer.start_time) and peer_pod_lookup() checks it before and after reading the
 * cgroup: if it differs, the answer belongs to someone else and the lookup fails. */

#include <stdint.h>
#include <sys/types.h>

/* The process's start time in clock ticks since boot (field 22 of /proc/PID/stat).
 * -ESRCH if there is no such process. proc_root is "/proc" unless testing. */
int proc_start_time(const char *proc_root, pid_t pid, uint64_t *ret);

/* Parses the text of a /proc/PID/cgroup file. 1: *ret_uid is the pod's UID (lowercase, with
 * dashes). 0: the process is in no pod. -EBADMSG: the lines, or one path, name different pods. */
int pod_uid_from_proc_cgroup(const char *text, char **ret_uid);

/* The pod of process pid, whose start time must be start_time (from proc_start_time() when
 * the peer connected). 1: *ret_uid set. 0: not in a pod. -ESRCH: the process is gone, its PID
 * now belongs to another process, or start_time is 0 (unknown: nothing can be attested).
 * Other negative errno on read errors. */
int peer_pod_lookup(const char *proc_root, pid_t pid, uint64_t start_time, char **ret_uid);
