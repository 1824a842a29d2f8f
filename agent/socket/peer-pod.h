/* SPDX-License-Identifier: MIT */
#pragma once

/* Which pod, and which of its containers, a process belongs to: the peer attestation behind
 * caller.h (every route that answers a pod for itself, and whether root is the host's root).
 *
 * A process's pod is read from /proc/PID/cgroup, and only where the kubelet puts pods counts:
 * below one of the configured pod roots ([agent] pod-cgroup-roots, by default the kubelet's
 * /kubepods and /kubepods.slice). Creating a cgroup there takes root, while a host user with a
 * delegated subtree (systemd's user@UID.service) can name a cgroup "pod<any uid>" anywhere
 * else: such a name outside the roots is no pod at all. Below a root, the kubelet's layout is
 * the only one accepted, for either cgroup driver:
 *   cgroupfs  ROOT/pod<uid>/<container>   ROOT/{burstable,besteffort}/pod<uid>/<container>
 *   systemd   ROOT/kubepods-pod<uid_>.slice/<container>
 *             ROOT/kubepods-{burstable,besteffort}.slice/kubepods-<qos>-pod<uid_>.slice/<container>
 * (uid_: the UID with '_' for '-'; "kubepods" is the root's name without ".slice"). <container>
 * is the runtime's cgroup for the container: its 64-hex ID, bare or as <runtime>-<id> or
 * <runtime>-<id>.scope (cri-containerd, crio, docker, libpod); the process may sit below it (a
 * container that owns its cgroup), never in a cgroup naming a pod again. Anything else below a
 * root (another shape, "." or "..", a path relative to a cgroup namespace) cannot be attested:
 * such a process is neither a pod nor the host.
 *
 * Every line counts, v1 hierarchies ("N:controllers:/path") and the v2 line ("0::/path"): the
 * lines below a root must all name the same pod and container; lines outside the roots name no
 * pod (a hybrid system's v2 line, a controller the kubelet does not use) and contradict nothing.
 *
 * A PID can be reused: the process that connected may exit and another take its number before
 * we read /proc. So the caller keeps a pidfd of the process that connected and records its start
 * time when the connection is accepted (struct peer), and peer_pod_lookup() checks both
 * before and after reading the cgroup (proc_peer_alive()): if the start time differs, the answer
 * belongs to someone else, and the lookup fails.
 *
 * A process must also be alive and not exiting while its cgroup is read: once a task starts to
 * exit, the kernel shows "/" on every v1 line of its /proc/PID/cgroup (it stays so while it is an
 * unreaped zombie, its stat and start time still there), which would read as "in no pod" and
 * make a pod's root the host. So the pidfd must not have turned readable (the process exited,
 * zombie included) and /proc/PID/stat must show neither state Z or X nor PF_EXITING. */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "proc.h"

/* The kubelet's pod roots, for both cgroup drivers and both cgroup versions. */
#define POD_CGROUP_ROOTS_DEFAULT "/kubepods /kubepods.slice"

#define CONTAINER_ID_LEN 64

struct peer_pod {
        char *uid;          /* the pod's UID, lowercase with dashes */
        char *container_id; /* the container's 64-hex ID; NULL: in the pod's own cgroup */
};

void peer_pod_done(struct peer_pod *p);

/* Whether path is usable as a pod root: absolute, not "/", no empty, "." or ".." segment, no
 * trailing slash. */
bool peer_pod_cgroup_root_valid(const char *path);

/* Parses the text of a /proc/PID/cgroup file against the pod roots. 1: *ret is the pod (and
 * container). 0: the process is in no pod. -EBADMSG: a line below a root is not the kubelet's
 * layout, or the lines name different pods or containers. */
int peer_pod_from_proc_cgroup(const char *text, char *const *roots, struct peer_pod *ret);

/* The pod of process pid, held by pidfd, whose start time must be start_time (from
 * proc_start_time() when the peer connected). 1: *ret set. 0: not in a pod. -ESRCH: the
 * process is gone, exiting or a zombie, its PID now belongs to another process, or pidfd is
 * negative or start_time 0 (unknown: nothing can be attested). -EBADMSG as above. Other
 * negative errno on read errors. */
int peer_pod_lookup(const char *proc_root, char *const *roots, pid_t pid, int pidfd, uint64_t start_time,
                    struct peer_pod *ret);

/* The pod this process itself runs in (the agent as a DaemonSet pod), as above. */
int peer_pod_self_lookup(const char *proc_root, char *const *roots, struct peer_pod *ret);
