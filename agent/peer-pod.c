/* SPDX-License-Identifier: MIT */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsutil.h"
#include "macro.h"
#include "peer-pod.h"

/* Pod UIDs are RFC 4122 UUIDs; accept any lowercase hex-and-dash string of a sane length so
 * an unusual UID still matches, and nothing that could be a path trick. */
#define POD_UID_MIN 8
#define POD_UID_MAX 64

int proc_start_time(const char *proc_root, pid_t pid, uint64_t *ret) {
        _cleanup_free_ char *path = NULL, *text = NULL;
        unsigned long long start;
        const char *p;
        int r;

        if (pid <= 0 || !ret)
                return -EINVAL;
        if (asprintf(&path, "%s/%d/stat", proc_root ?: "/proc", (int) pid) < 0)
                return -ENOMEM;
        r = read_file_full(path, 4096, &text, NULL);
        if (r == -ENOENT)
                return -ESRCH;
        if (r < 0)
                return r;
        /* "pid (comm) state ...": comm may hold spaces and ')' so count fields after the LAST
         * ')'. starttime is field 22, the 20th after the ')'. */
        p = strrchr(text, ')');
        if (!p)
                return -EBADMSG;
        p++;
        for (int field = 3; field < 22; field++) {
                p = strchr(p + 1, ' ');
                if (!p)
                        return -EBADMSG;
        }
        if (sscanf(p, " %llu", &start) != 1)
                return -EBADMSG;
        *ret = start;
        return 0;
}

/* Copies a candidate UID of length n, mapping '_' to '-' (the systemd spelling), if it is one. */
static char *uid_candidate(const char *s, size_t n) {
        char *uid;

        if (n < POD_UID_MIN || n > POD_UID_MAX)
                return NULL;
        for (size_t i = 0; i < n; i++)
                if (!(isdigit((unsigned char) s[i]) || (s[i] >= 'a' && s[i] <= 'f') || s[i] == '-' || s[i] == '_'))
                        return NULL;
        uid = strndup(s, n);
        if (!uid)
                return NULL;
        for (char *c = uid; *c; c++)
                if (*c == '_')
                        *c = '-';
        return uid;
}

/* The pod UID a cgroup path segment names, or NULL: "pod<uid>" (cgroupfs) or
 * "<prefix>-pod<uid>.slice" (systemd). */
static char *uid_from_segment(const char *seg, size_t n) {
        static const char slice[] = ".slice";
        const size_t slice_len = sizeof(slice) - 1;

        if (n > 3 && strncmp(seg, "pod", 3) == 0)
                return uid_candidate(seg + 3, n - 3);
        if (n > slice_len && memcmp(seg + n - slice_len, slice, slice_len) == 0) {
                /* the last "-pod" before ".slice" */
                for (size_t i = n - slice_len; i >= 4; i--)
                        if (memcmp(seg + i - 4, "-pod", 4) == 0)
                                return uid_candidate(seg + i, n - slice_len - i);
        }
        return NULL;
}

/* The pod UID of one cgroup path: the OUTERMOST segment that names one, which is the kubelet's
 * pod directory. Below it the container may own its cgroup (delegation, privileged pods) and
 * could create "pod<other uid>" there: a path that names two different pods is -EBADMSG, never
 * the inner one. */
static int uid_from_path(const char *path, size_t len, char **ret) {
        _cleanup_free_ char *found = NULL;
        size_t i = 0;

        while (i < len) {
                size_t j = i;
                while (j < len && path[j] != '/')
                        j++;
                if (j > i) {
                        _cleanup_free_ char *uid = uid_from_segment(path + i, j - i);
                        if (uid && !found)
                                found = TAKE_PTR(uid);
                        else if (uid && !streq(uid, found))
                                return -EBADMSG;
                }
                i = j + 1;
        }
        *ret = TAKE_PTR(found);
        return 0;
}

int pod_uid_from_proc_cgroup(const char *text, char **ret_uid) {
        _cleanup_free_ char *uid = NULL;

        if (!text || !ret_uid)
                return -EINVAL;
        for (const char *line = text; *line;) {
                const char *end = strchrnul(line, '\n'), *path;
                /* "hierarchy-id:controllers:path"; the path may itself contain ':' */
                path = memchr(line, ':', (size_t) (end - line));
                if (path)
                        path = memchr(path + 1, ':', (size_t) (end - path - 1));
                if (path) {
                        path++;
                        _cleanup_free_ char *here = NULL;
                        if (uid_from_path(path, (size_t) (end - path), &here) < 0)
                                return -EBADMSG;
                        if (here) {
                                if (uid && !streq(uid, here))
                                        return -EBADMSG;
                                if (!uid)
                                        uid = TAKE_PTR(here);
                        }
                }
                line = *end ? end + 1 : end;
        }
        if (!uid)
                return 0;
        *ret_uid = TAKE_PTR(uid);
        return 1;
}

int peer_pod_lookup(const char *proc_root, pid_t pid, uint64_t start_time, char **ret_uid) {
        _cleanup_free_ char *path = NULL, *text = NULL, *uid = NULL;
        uint64_t now;
        int r, found;

        if (pid <= 0 || !ret_uid)
                return -EINVAL;
        if (start_time == 0)
                return -ESRCH;
        r = proc_start_time(proc_root, pid, &now);
        if (r < 0)
                return r;
        if (now != start_time)
                return -ESRCH;
        if (asprintf(&path, "%s/%d/cgroup", proc_root ?: "/proc", (int) pid) < 0)
                return -ENOMEM;
        r = read_file_full(path, 64 * 1024, &text, NULL);
        if (r == -ENOENT)
                return -ESRCH;
        if (r < 0)
                return r;
        found = pod_uid_from_proc_cgroup(text, &uid);
        if (found < 0)
                return found;
        /* Checked again after the read: the cgroup we read must be the connected process's. */
        r = proc_start_time(proc_root, pid, &now);
        if (r < 0)
                return r;
        if (now != start_time)
                return -ESRCH;
        if (found == 0)
                return 0;
        *ret_uid = TAKE_PTR(uid);
        return 1;
}
