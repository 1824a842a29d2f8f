/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "fs.h"
#include "macro.h"
#include "proc.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

/* Field n (3..) of a /proc/PID/stat text, counted after the LAST ')': comm, field 2, may hold
 * spaces and ')'. NULL if the text has fewer fields. */
static const char *stat_field(const char *text, int n) {
        const char *p = strrchr(text, ')');

        if (!p)
                return NULL;
        p++;
        for (int field = 3; field <= n; field++) {
                p = strchr(p, ' ');
                if (!p)
                        return NULL;
                p++;
        }
        return p;
}

int proc_stat_read(const char *proc_root, pid_t pid, struct proc_stat *ret) {
        _cleanup_free_ char *path = NULL, *text = NULL;
        unsigned long long start;
        unsigned long flags;
        const char *state, *f9, *f22;
        int r;

        if (pid <= 0 || !ret)
                return -EINVAL;
        if (asprintf(&path, "%s/%d/stat", proc_root ?: "/proc", (int) pid) < 0)
                return -ENOMEM;
        r = fs_read_file_full(path, 4096, &text, NULL);
        if (r == -ENOENT || r == -ESRCH)
                return -ESRCH;
        if (r < 0)
                return r;
        state = stat_field(text, 3);
        f9 = stat_field(text, 9);
        f22 = stat_field(text, 22);
        if (!state || !f9 || !f22 || sscanf(f9, "%lu", &flags) != 1 || sscanf(f22, "%llu", &start) != 1)
                return -EBADMSG;
        *ret = (struct proc_stat) { .state = *state, .flags = flags, .start_time = start };
        return 0;
}

int proc_start_time(const char *proc_root, pid_t pid, uint64_t *ret) {
        struct proc_stat st;
        int r;

        if (!ret)
                return -EINVAL;
        r = proc_stat_read(proc_root, pid, &st);
        if (r < 0)
                return r;
        *ret = st.start_time;
        return 0;
}

bool proc_pidfd_alive(int pidfd) {
        struct pollfd p = { .fd = pidfd, .events = POLLIN };

        return pidfd >= 0 && poll(&p, 1, 0) == 0;
}

int proc_pidfd_open(pid_t pid) {
        int fd = (int) syscall(SYS_pidfd_open, pid, 0);

        return fd < 0 ? -errno : fd;
}

int proc_peer_alive(const char *proc_root, pid_t pid, int pidfd, uint64_t start_time) {
        struct proc_stat st;
        int r;

        if (start_time == 0 || pidfd < 0 || !proc_pidfd_alive(pidfd))
                return -ESRCH;
        r = proc_stat_read(proc_root, pid, &st);
        if (r < 0)
                return r;
        if (st.start_time != start_time || !proc_stat_running(&st))
                return -ESRCH;
        /* Read after the stat: the PID cannot have changed hands while the pidfd's process lives. */
        return proc_pidfd_alive(pidfd) ? 0 : -ESRCH;
}

int proc_cgroup_next_path(const char **cursor, const char **ret_path, size_t *ret_len) {
        while (**cursor) {
                const char *line = *cursor, *end = strchrnul(line, '\n'), *path;

                *cursor = *end ? end + 1 : end;
                /* "hierarchy-id:controllers:path"; the path may itself contain ':' */
                path = memchr(line, ':', (size_t) (end - line));
                if (path)
                        path = memchr(path + 1, ':', (size_t) (end - path - 1));
                if (path) {
                        path++;
                        *ret_path = path;
                        *ret_len = (size_t) (end - path);
                        return 1;
                }
        }
        return 0;
}

int proc_cgroup_read(const char *proc_root, pid_t pid, int pidfd, uint64_t start_time, char **ret) {
        _cleanup_free_ char *path = NULL, *text = NULL;
        int r;

        if (pid <= 0 || !ret)
                return -EINVAL;
        r = proc_peer_alive(proc_root, pid, pidfd, start_time);
        if (r < 0)
                return r;
        if (asprintf(&path, "%s/%d/cgroup", proc_root ?: "/proc", (int) pid) < 0)
                return -ENOMEM;
        r = fs_read_file_full(path, 64 * 1024, &text, NULL);
        if (r == -ENOENT || r == -ESRCH)
                return -ESRCH;
        if (r < 0)
                return r;
        /* Checked again after the read: what we read must be the connected process's, and read
         * while it lived and was not exiting (an exiting task shows "/" on every v1 line). */
        r = proc_peer_alive(proc_root, pid, pidfd, start_time);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(text);
        return 0;
}
