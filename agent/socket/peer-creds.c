/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "fs.h"
#include "macro.h"
#include "peer-creds.h"
#include "peer-pod.h"

#ifndef SO_PEERGROUPS
#define SO_PEERGROUPS 59
#endif
#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77
#endif


/* The groups of /proc/PID/status, read between two checks that the process is still the
 * connected one and alive (proc_peer_alive()). */
static int peer_groups_from_proc(pid_t pid, int pidfd, uint64_t start_time, gid_t **ret, size_t *ret_n) {
        _cleanup_free_ char *line = NULL;
        _cleanup_free_ gid_t *groups = NULL;
        size_t n = 0, cap = 0;
        char path[64];
        FILE *f;
        int r;

        r = proc_peer_alive(NULL, pid, pidfd, start_time);
        if (r < 0)
                return r;
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
        r = proc_peer_alive(NULL, pid, pidfd, start_time);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(groups);
        *ret_n = n;
        return 0;
}

/* SO_PEERGROUPS gives the groups the client had when it connected, so a PID that exits and
 * is reused cannot lend its groups to the connection; /proc is the fallback for kernels
 * older than 4.13. */
static int peer_groups(int fd, const struct peer_creds *c, gid_t **ret, size_t *ret_n) {
        _cleanup_free_ gid_t *groups = NULL;
        socklen_t len = 0;

        for (;;) {
                gid_t *grown;

                if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &len) >= 0)
                        break;
                if (errno == ENOPROTOOPT)
                        return peer_groups_from_proc(c->pid, c->pidfd, c->start_time, ret, ret_n);
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

/* A pidfd of the process that connected. With SO_PEERPIDFD (Linux 6.5+; *ret_exact true) it
 * names that very process, however its PID is reused. Older kernels get pidfd_open() of the PID,
 * which may by now name another process: the caller checks that one's uid and gid. -ESRCH: the
 * process that connected has been reaped. */
static int peer_pidfd(int fd, pid_t pid, bool *ret_exact) {
        int pidfd = -EBADF;
        socklen_t len = sizeof(pidfd);

        if (getsockopt(fd, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &len) >= 0) {
                *ret_exact = true;
                return pidfd;
        }
        if (errno != ENOPROTOOPT)
                return -ESRCH; /* ESRCH, EINVAL: the process that connected has been reaped */
        *ret_exact = false;
        return proc_pidfd_open(pid);
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

/* Whether the process now at pid has the uid and gid the kernel recorded at connect(). Without
 * SO_PEERPIDFD that is all that tells it from another process that took the PID: a process of
 * the same uid and gid that took it in between is not told apart (docs/api.md). */
static bool proc_ids_match(pid_t pid, uid_t uid, gid_t gid) {
        char path[64], text[4096];
        unsigned long u, g;
        ssize_t n;
        FILE *f;

        snprintf(path, sizeof(path), "/proc/%d/status", (int) pid);
        f = fopen(path, "re");
        if (!f)
                return false;
        n = (ssize_t) fread(text, 1, sizeof(text) - 1, f);
        fclose(f);
        text[MAX(n, (ssize_t) 0)] = 0;
        if (proc_status_id(text, "\nUid:", &u) < 0 || proc_status_id(text, "\nGid:", &g) < 0)
                return false;
        return u == uid && g == gid;
}

/* The start time of the process of pidfd, at cred->pid: read only while the pidfd shows it alive
 * (before and after every read, so the PID cannot have changed hands in between) and it is
 * neither exiting nor a zombie. 0: nothing attested. */
static uint64_t peer_start_time(int pidfd, bool exact, const struct ucred *cred) {
        struct proc_stat st;

        if (!proc_pidfd_alive(pidfd) || proc_stat_read(NULL, cred->pid, &st) < 0 || !proc_stat_running(&st))
                return 0;
        if (!exact && !proc_ids_match(cred->pid, cred->uid, cred->gid))
                return 0;
        if (proc_peer_alive(NULL, cred->pid, pidfd, st.start_time) < 0)
                return 0;
        return st.start_time;
}

void peer_creds_read(int fd, struct peer_creds *ret) {
        struct ucred cred;
        socklen_t len = sizeof(cred);
        bool exact = false;
        int pidfd;

        *ret = (struct peer_creds) { .uid = (uid_t) -1, .gid = (gid_t) -1, .pidfd = -EBADF };
        if (fd < 0 || getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
                return;
        ret->pid = cred.pid;
        ret->uid = cred.uid;
        ret->gid = cred.gid;
        ret->known = true;
        pidfd = peer_pidfd(fd, cred.pid, &exact);
        if (pidfd >= 0) {
                ret->start_time = peer_start_time(pidfd, exact, &cred);
                /* Kept only for a peer attested alive: every later read checks it again. */
                ret->pidfd = ret->start_time ? pidfd : safe_close(pidfd);
        }
        /* Without the groups, a socket-group member is treated as unprivileged. */
        (void) peer_groups(fd, ret, &ret->groups, &ret->n_groups);
}

void peer_creds_done(struct peer_creds *c) {
        if (!c)
                return;
        c->groups = mfree(c->groups);
        c->n_groups = 0;
        if (c->known)
                c->pidfd = safe_close(c->pidfd);
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

struct peer peer_creds_to_peer(const struct peer_creds *c, gid_t socket_gid) {
        return (struct peer) {
                .pid = c->pid,
                .uid = c->uid,
                .gid = c->gid,
                .start_time = c->start_time,
                .pidfd = c->known ? c->pidfd : -EBADF,
                .privileged = peer_creds_privileged(c, socket_gid),
        };
}
