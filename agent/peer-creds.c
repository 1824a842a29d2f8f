/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "fsutil.h"
#include "macro.h"
#include "peer-creds.h"
#include "peer-pod.h"

#ifndef SO_PEERGROUPS
#define SO_PEERGROUPS 59
#endif
#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77
#endif


static int peer_groups_from_proc(pid_t pid, gid_t **ret, size_t *ret_n) {
        _cleanup_free_ char *line = NULL;
        _cleanup_free_ gid_t *groups = NULL;
        size_t n = 0, cap = 0;
        char path[64];
        FILE *f;

        snprintf(path, sizeof(path), "/proc/%d/status", (int) pid);
        f = fopen(path, "re");
        if (!f)
                return -errno;
        for (size_t len = 0; getline(&line, &len, f) >= 0;) {
                char *p, *end;

                if (strncmp(line, "Groups:", 7) != 0)
                        continue;
                for (p = line + 7;; p = end) {
                        unsigned long v = strtoul(p, &end, 10);
                        gid_t *grown;

                        if (end == p)
                                break;
                        if (n == cap) {
                                cap = cap ? cap * 2 : 16;
                                grown = realloc(groups, cap * sizeof(gid_t));
                                if (!grown) {
                                        fclose(f);
                                        return -ENOMEM;
                                }
                                groups = grown;
                        }
                        groups[n++] = (gid_t) v;
                }
                break;
        }
        fclose(f);
        *ret = TAKE_PTR(groups);
        *ret_n = n;
        return 0;
}

/* SO_PEERGROUPS gives the groups the client had when it connected, so a PID that exits and
 * is reused cannot lend its groups to the connection; /proc is the fallback for kernels
 * older than 4.13. */
static int peer_groups(int fd, pid_t pid, gid_t **ret, size_t *ret_n) {
        _cleanup_free_ gid_t *groups = NULL;
        socklen_t len = 0;

        for (;;) {
                gid_t *grown;

                if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &len) >= 0)
                        break;
                if (errno == ENOPROTOOPT)
                        return peer_groups_from_proc(pid, ret, ret_n);
                if (errno != ERANGE)
                        return -errno;
                grown = realloc(groups, len);
                if (!grown)
                        return -ENOMEM;
                groups = grown;
        }
        *ret = TAKE_PTR(groups);
        *ret_n = len / sizeof(gid_t);
        return 0;
}

/* A pidfd turns readable when its process exits. */
static bool pidfd_alive(int pidfd) {
        struct pollfd p = { .fd = pidfd, .events = POLLIN };

        return poll(&p, 1, 0) == 0;
}

/* With SO_PEERPIDFD (Linux 6.5+) the pidfd names the very process that connected, however
 * its PID is reused: its start time is read from /proc/PID and counts only if the process
 * was alive before and after the read, so the PID cannot have changed hands in between.
 * -ENOPROTOOPT: an older kernel. 0 with *ret 0: the process is gone, nothing attested. */
static int start_time_by_pidfd(int fd, pid_t pid, uint64_t *ret) {
        _cleanup_close_ int pidfd = -EBADF;
        socklen_t len = sizeof(pidfd);
        uint64_t t;

        *ret = 0;
        if (getsockopt(fd, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &len) < 0) {
                if (errno == ENOPROTOOPT)
                        return -ENOPROTOOPT;
                return 0; /* ESRCH, EINVAL: the process that connected has been reaped */
        }
        if (!pidfd_alive(pidfd) || proc_start_time(NULL, pid, &t) < 0 || !pidfd_alive(pidfd))
                return 0;
        *ret = t;
        return 0;
}

/* The effective uid or gid (second field) of a "Uid:" or "Gid:" line of /proc/PID/status. */
static int proc_status_id(const char *text, const char *key, unsigned long *ret) {
        const char *p = strstr(text, key);
        char *end;

        if (!p)
                return -EBADMSG;
        p += strlen(key);
        (void) strtoul(p, &end, 10);
        if (end == p)
                return -EBADMSG;
        p = end;
        *ret = strtoul(p, &end, 10);
        return end == p ? -EBADMSG : 0;
}

/* Without SO_PEERPIDFD the process now at pid may not be the one that connected: it must at
 * least have the uid and gid the kernel recorded at connect(). A process of the same uid and
 * gid that took the PID in between is not told apart (docs/api.md). */
static int start_time_by_pid(pid_t pid, uid_t uid, gid_t gid, uint64_t *ret) {
        char path[64], text[4096];
        unsigned long u, g;
        uint64_t t;
        ssize_t n;
        FILE *f;

        *ret = 0;
        if (proc_start_time(NULL, pid, &t) < 0)
                return 0;
        snprintf(path, sizeof(path), "/proc/%d/status", (int) pid);
        f = fopen(path, "re");
        if (!f)
                return 0;
        n = (ssize_t) fread(text, 1, sizeof(text) - 1, f);
        fclose(f);
        text[MAX(n, (ssize_t) 0)] = 0;
        if (proc_status_id(text, "\nUid:", &u) < 0 || proc_status_id(text, "\nGid:", &g) < 0)
                return 0;
        if (u != uid || g != gid)
                return 0;
        *ret = t;
        return 0;
}

static uint64_t peer_start_time(int fd, const struct ucred *cred) {
        uint64_t t;

        if (start_time_by_pidfd(fd, cred->pid, &t) == -ENOPROTOOPT)
                (void) start_time_by_pid(cred->pid, cred->uid, cred->gid, &t);
        return t;
}

void peer_creds_read(int fd, struct peer_creds *ret) {
        struct ucred cred;
        socklen_t len = sizeof(cred);

        *ret = (struct peer_creds) { .uid = (uid_t) -1, .gid = (gid_t) -1 };
        if (fd < 0 || getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
                return;
        ret->pid = cred.pid;
        ret->uid = cred.uid;
        ret->gid = cred.gid;
        ret->start_time = peer_start_time(fd, &cred);
        /* Without the groups, a socket-group member is treated as unprivileged. */
        (void) peer_groups(fd, cred.pid, &ret->groups, &ret->n_groups);
        ret->known = true;
}

void peer_creds_done(struct peer_creds *c) {
        if (!c)
                return;
        c->groups = mfree(c->groups);
        c->n_groups = 0;
}

bool peer_creds_privileged(const struct peer_creds *c, gid_t socket_gid) {
        if (!c || !c->known)
                return false;
        if (c->uid == 0)
                return true;
        if (socket_gid == (gid_t) -1)
                return false;
        if (c->gid == socket_gid)
                return true;
        for (size_t i = 0; i < c->n_groups; i++)
                if (c->groups[i] == socket_gid)
                        return true;
        return false;
}

struct api_peer peer_creds_to_api_peer(const struct peer_creds *c, gid_t socket_gid) {
        return (struct api_peer) {
                .pid = c->pid,
                .uid = c->uid,
                .gid = c->gid,
                .start_time = c->start_time,
                .privileged = peer_creds_privileged(c, socket_gid),
        };
}
