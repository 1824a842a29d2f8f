/* SPDX-License-Identifier: MIT */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "fs.h"
#include "macro.h"
#include "peer-pod.h"
#include "proc.h"

#define POD_UID_MIN 8
#define POD_UID_MAX 64

/* ---- one cgroup path ---- */

struct seg {
        const char *s;
        size_t n;
};

static bool seg_is(struct seg g, const char *lit) {
        return g.n == strlen(lit) && memcmp(g.s, lit, g.n) == 0;
}

static bool seg_has_prefix(struct seg g, const char *lit) {
        size_t n = strlen(lit);
        return g.n >= n && memcmp(g.s, lit, n) == 0;
}

static bool seg_has_suffix(struct seg g, const char *lit) {
        size_t n = strlen(lit);
        return g.n >= n && memcmp(g.s + g.n - n, lit, n) == 0;
}

static struct seg seg_cut(struct seg g, size_t head, size_t tail) {
        return (struct seg) { g.s + head, g.n - head - tail };
}

/* The path's segments, in order (none for "/"). Returns false for a relative path, an empty,
 * "." or ".." segment or a trailing slash: nothing the kernel writes for a cgroup we can read
 * as the host sees it ("/.." is how a cgroup namespace shows what lies outside it); and,
 * failing closed, when out of memory. */
static bool path_segments(const char *path, size_t len, struct seg **ret, size_t *ret_n) {
        _cleanup_free_ struct seg *segs = NULL;
        size_t n = 0;

        if (len == 0 || path[0] != '/')
                return false;
        segs = calloc(len / 2 + 2, sizeof(struct seg));
        if (!segs)
                return false;
        for (size_t i = 1; len > 1 && i <= len;) {
                size_t j = i;
                while (j < len && path[j] != '/')
                        j++;
                struct seg g = { path + i, j - i };
                if (g.n == 0 || seg_is(g, ".") || seg_is(g, ".."))
                        return false;
                segs[n++] = g;
                i = j + 1;
        }
        *ret = TAKE_PTR(segs);
        *ret_n = n;
        return true;
}

bool peer_pod_cgroup_root_valid(const char *path) {
        _cleanup_free_ struct seg *segs = NULL;
        size_t n = 0;

        return path && path_segments(path, strlen(path), &segs, &n) && n > 0;
}

/* A pod UID as the path spells it (sep '-' for cgroupfs, '_' for systemd), with dashes. Pod
 * UIDs are RFC 4122 UUIDs; any lowercase hex-and-separator string of a sane length is taken so
 * an unusual UID still matches, and nothing that could be a path trick. */
static char *uid_from(struct seg g, char sep) {
        char *uid;

        if (g.n < POD_UID_MIN || g.n > POD_UID_MAX)
                return NULL;
        for (size_t i = 0; i < g.n; i++)
                if (!(isdigit((unsigned char) g.s[i]) || (g.s[i] >= 'a' && g.s[i] <= 'f') || g.s[i] == sep))
                        return NULL;
        uid = strndup(g.s, g.n);
        if (!uid)
                return NULL;
        for (char *c = uid; *c; c++)
                if (*c == '_')
                        *c = '-';
        return uid;
}

/* Whether a segment looks like a pod's in either spelling: below a pod, one is a forgery made
 * by a container that owns its cgroup. */
static bool seg_names_pod(struct seg g) {
        if (seg_has_prefix(g, "pod"))
                return true;
        if (!seg_has_suffix(g, ".slice"))
                return false;
        for (size_t i = 0; i + 4 <= g.n; i++)
                if (memcmp(g.s + i, "-pod", 4) == 0)
                        return true;
        return false;
}

/* The container ID a segment names: <64 hex>, <runtime>-<64 hex> or <runtime>-<64 hex>.scope. */
static char *container_from(struct seg g) {
        static const char *const runtimes[] = { "cri-containerd-", "crio-", "docker-", "libpod-" };
        struct seg id = g;

        for (size_t i = 0; i < ELEMENTSOF(runtimes); i++)
                if (seg_has_prefix(g, runtimes[i])) {
                        id = seg_cut(g, strlen(runtimes[i]), seg_has_suffix(g, ".scope") ? strlen(".scope") : 0);
                        break;
                }
        if (id.n != CONTAINER_ID_LEN)
                return NULL;
        for (size_t i = 0; i < id.n; i++)
                if (!(isdigit((unsigned char) id.s[i]) || (id.s[i] >= 'a' && id.s[i] <= 'f')))
                        return NULL;
        return strndup(id.s, id.n);
}

/* The UID in a cgroupfs pod segment "pod<uid>", or NULL. */
static char *cgroupfs_pod(struct seg g) {
        return seg_has_prefix(g, "pod") ? uid_from(seg_cut(g, 3, 0), '-') : NULL;
}

/* The UID in a systemd pod slice "<parent>-pod<uid_>.slice" below the slice named parent.slice. */
static char *systemd_pod(struct seg g, struct seg parent) {
        if (!seg_has_suffix(parent, ".slice"))
                return NULL;
        size_t head = parent.n - strlen(".slice") + strlen("-pod");
        if (g.n <= head + strlen(".slice") || memcmp(g.s, parent.s, parent.n - strlen(".slice")) != 0 ||
            memcmp(g.s + head - 4, "-pod", 4) != 0 || !seg_has_suffix(g, ".slice"))
                return NULL;
        return uid_from(seg_cut(g, head, strlen(".slice")), '_');
}

/* The pod segment at segs[0] (or segs[1] below a QoS class) under the root whose last segment
 * is root: its UID, and in *ret_next the index of the segment after it. */
static char *pod_below_root(struct seg root, const struct seg *segs, size_t n, size_t *ret_next) {
        static const char *const qos[] = { "burstable", "besteffort" };
        bool systemd = seg_has_suffix(root, ".slice");
        char *uid;

        if (n == 0)
                return NULL;
        uid = systemd ? systemd_pod(segs[0], root) : cgroupfs_pod(segs[0]);
        if (uid) {
                *ret_next = 1;
                return uid;
        }
        if (n < 2)
                return NULL;
        for (size_t i = 0; i < ELEMENTSOF(qos); i++) {
                char name[64];
                if (systemd)
                        (void) snprintf(name, sizeof(name), "%.*s-%s.slice", (int) (root.n - strlen(".slice")), root.s,
                                        qos[i]);
                else
                        (void) snprintf(name, sizeof(name), "%s", qos[i]);
                if (!seg_is(segs[0], name))
                        continue;
                uid = systemd ? systemd_pod(segs[1], segs[0]) : cgroupfs_pod(segs[1]);
                *ret_next = 2;
                return uid;
        }
        return NULL;
}

/* The root path is below, or NULL. */
static const char *root_of(const char *path, size_t len, char *const *roots) {
        for (char *const *r = roots; r && *r; r++) {
                size_t n = strlen(*r);
                if (len >= n && memcmp(path, *r, n) == 0 && (len == n || path[n] == '/'))
                        return *r;
        }
        return NULL;
}

/* One cgroup path: 0 outside the roots, 1 with *ret set, -EBADMSG for anything else. */
static int pod_from_path(const char *path, size_t len, char *const *roots, struct peer_pod *ret) {
        _cleanup_free_ struct seg *segs = NULL, *root_segs = NULL;
        _cleanup_free_ char *uid = NULL, *container = NULL;
        size_t n, n_root, next = 0;
        const char *root;

        if (len == 0) /* a malformed line, no path: it says nothing */
                return 0;
        if (!path_segments(path, len, &segs, &n))
                return -EBADMSG;
        root = root_of(path, len, roots);
        if (!root)
                return 0;
        if (!path_segments(root, strlen(root), &root_segs, &n_root) || n_root == 0)
                return -EBADMSG;
        uid = pod_below_root(root_segs[n_root - 1], segs + n_root, n - n_root, &next);
        if (!uid)
                return -EBADMSG;
        next += n_root;
        if (next < n) {
                container = container_from(segs[next]);
                if (!container)
                        return -EBADMSG;
                for (size_t i = next + 1; i < n; i++)
                        if (seg_names_pod(segs[i]))
                                return -EBADMSG;
        }
        *ret = (struct peer_pod) { .uid = TAKE_PTR(uid), .container_id = TAKE_PTR(container) };
        return 1;
}

void peer_pod_done(struct peer_pod *p) {
        if (!p)
                return;
        p->uid = mfree(p->uid);
        p->container_id = mfree(p->container_id);
}

int peer_pod_from_proc_cgroup(const char *text, char *const *roots, struct peer_pod *ret) {
        _cleanup_(peer_pod_done) struct peer_pod found = {};
        const char *path;
        size_t len;

        if (!text || !ret)
                return -EINVAL;
        while (proc_cgroup_next_path(&text, &path, &len) > 0) {
                _cleanup_(peer_pod_done) struct peer_pod here = {};
                int r = pod_from_path(path, len, roots, &here);

                if (r < 0)
                        return r;
                if (r > 0 && !found.uid)
                        found = here, here = (struct peer_pod) {};
                else if (r > 0 && (!streq(found.uid, here.uid) || !streq_ptr(found.container_id, here.container_id)))
                        return -EBADMSG;
        }
        if (!found.uid)
                return 0;
        *ret = found;
        found = (struct peer_pod) {};
        return 1;
}

int peer_pod_lookup(const char *proc_root, char *const *roots, pid_t pid, int pidfd, uint64_t start_time,
                    struct peer_pod *ret) {
        _cleanup_free_ char *text = NULL;
        int r;

        if (pid <= 0 || !ret)
                return -EINVAL;
        r = proc_cgroup_read(proc_root, pid, pidfd, start_time, &text);
        if (r < 0)
                return r;
        return peer_pod_from_proc_cgroup(text, roots, ret);
}

int peer_pod_self_lookup(const char *proc_root, char *const *roots, struct peer_pod *ret) {
        _cleanup_close_ int pidfd = -EBADF;
        uint64_t start;
        int r;

        pidfd = proc_pidfd_open(getpid());
        if (pidfd < 0)
                return pidfd;
        r = proc_start_time(proc_root, getpid(), &start);
        if (r < 0)
                return r;
        return peer_pod_lookup(proc_root, roots, getpid(), pidfd, start, ret);
}
