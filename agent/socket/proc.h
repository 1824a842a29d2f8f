/* SPDX-License-Identifier: MIT */
#pragma once

/* What /proc tells of a process that connected to one of the agent's sockets: its state and
 * start time, whether it is still the process that connected (through its pidfd), and its
 * cgroup file, read only while it provably is (peer-pod.h explains why each check matters). */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* What /proc/PID/stat says that attestation needs. */
struct proc_stat {
        char state;          /* field 3: 'R', 'S', 'D', ..., 'Z' (zombie), 'X' (dead) */
        unsigned long flags; /* field 9: the kernel's PF_* flags */
        uint64_t start_time; /* field 22: clock ticks since boot */
};

/* The kernel's PF_EXITING: set when a task starts to exit, before it is a zombie. */
#define PROC_PF_EXITING 0x4UL

/* Reads /proc/PID/stat. -ESRCH if there is no such process. proc_root is "/proc" unless testing. */
int proc_stat_read(const char *proc_root, pid_t pid, struct proc_stat *ret);

/* Whether the process is running its course: neither exiting, nor a zombie, nor dead. */
static inline bool proc_stat_running(const struct proc_stat *st) {
        return st->state != 'Z' && st->state != 'X' && !(st->flags & PROC_PF_EXITING);
}

/* The process's start time in clock ticks since boot (field 22 of /proc/PID/stat).
 * -ESRCH if there is no such process. */
int proc_start_time(const char *proc_root, pid_t pid, uint64_t *ret);

/* Whether the process of pidfd has not exited (zombie included: a pidfd turns readable once
 * its process exits). False for a negative fd. */
bool proc_pidfd_alive(int pidfd);
/* pidfd_open(2) of pid: the fd, or negative errno. */
int proc_pidfd_open(pid_t pid);

/* Whether process pid is still the peer that connected, and alive: pidfd (the peer's) not
 * readable, /proc/PID/stat's start time start_time and the process neither exiting nor a
 * zombie, the pidfd checked again after the stat. 0: it is. -ESRCH: it is not, or pidfd is
 * negative or start_time 0 (unknown: nothing can be attested). Other negative errno: /proc
 * could not be read. Every read about a peer in /proc is bracketed by two of these. */
int proc_peer_alive(const char *proc_root, pid_t pid, int pidfd, uint64_t start_time);

/* The cgroup paths of a /proc/PID/cgroup text, one per call: *cursor starts at the text. 1:
 * *ret_path (not NUL-terminated, *ret_len bytes) is the next line's path; 0: no more lines. */
int proc_cgroup_next_path(const char **cursor, const char **ret_path, size_t *ret_len);

/* The text of /proc/PID/cgroup, read between two proc_peer_alive() checks (so it is the
 * connected process's, read while it was alive). -ESRCH as for peer_pod_lookup(). */
int proc_cgroup_read(const char *proc_root, pid_t pid, int pidfd, uint64_t start_time, char **ret);
