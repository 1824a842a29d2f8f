/* SPDX-License-Identifier: MIT */
/* Publishing the sockets directory at a kubelet target path and taking it away again. The
 * target's parent is resolved on disk and must still be below the pods root; the target itself
 * is opened without following a symlink and mounted on through its descriptor, so a path
 * component swapped for a symlink between the check and the mount cannot redirect the mount. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "csi-mount.h"
#include "fs.h"
#include "macro.h"

#ifndef STATX_ATTR_MOUNT_ROOT
#define STATX_ATTR_MOUNT_ROOT 0x00002000
#endif

/* A directory mounted on more than once (an older publish raced by hand): unmounted up to this
 * many times before giving up. */
#define CSI_UNMOUNT_MAX 8

_printf_(4, 5) static int refuse(int r, char *why, size_t why_size, const char *format, ...) {
        va_list ap;

        if (why && why_size > 0) {
                va_start(ap, format);
                (void) vsnprintf(why, why_size, format, ap);
                va_end(ap);
        }
        return r;
}

bool csi_mount_path_clean(const char *p) {
        if (!p || p[0] != '/' || strlen(p) >= PATH_MAX)
                return false;
        for (const char *s = p + 1;;) {
                size_t n = strcspn(s, "/");

                if (n == 0 || (n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.'))
                        return false;
                if (s[n] == 0)
                        return true;
                s += n + 1;
        }
}

int csi_mount_target_check(const char *root, const char *target, char *why, size_t why_size) {
        size_t n;

        if (isempty(target))
                return refuse(-EINVAL, why, why_size, "target_path is missing");
        if (!csi_mount_path_clean(target))
                return refuse(-EINVAL, why, why_size,
                              "target_path %s is not a clean absolute path (no '.', '..', '//' or trailing '/')", target);
        if (!csi_mount_path_clean(root))
                return refuse(-EINVAL, why, why_size, "the pods root %s is not a clean absolute path", root ?: "(none)");
        n = strlen(root);
        /* Two levels below at least: the kubelet's targets are <root>/<pod>/volumes/..., and
         * a pod's own directory is never covered. */
        if (strncmp(target, root, n) != 0 || target[n] != '/' || !strchr(target + n + 1, '/'))
                return refuse(-EPERM, why, why_size, "target_path %s is not inside a pod's directory below %s", target,
                              root);
        return 0;
}

/* The target's parent, resolved, and still strictly below the resolved root. */
static int resolve_parent(const char *root, const char *target, char **ret_parent, char *why, size_t why_size) {
        _cleanup_free_ char *parent = strndup(target, (size_t) (strrchr(target, '/') - target));
        _cleanup_free_ char *real_root = NULL, *real_parent = NULL;
        size_t n;

        if (!parent)
                return -ENOMEM;
        real_root = realpath(root, NULL);
        if (!real_root)
                return refuse(-errno, why, why_size, "the pods root %s: %s", root, strerror(errno));
        real_parent = realpath(parent, NULL);
        if (!real_parent)
                return refuse(errno == ENOENT || errno == ENOTDIR ? -ENOENT : -errno, why, why_size,
                              "the parent directory of %s: %s", target, strerror(errno));
        n = strlen(real_root);
        if (strncmp(real_parent, real_root, n) != 0 || real_parent[n] != '/')
                return refuse(-EPERM, why, why_size, "the parent of target_path %s leads to %s, outside %s", target,
                              real_parent, real_root);
        *ret_parent = TAKE_PTR(real_parent);
        return 0;
}

/* 1 if fd is the root of a mount of source's directory, 0 if of another mount or none; whether
 * it is a mount root at all in *ret_mounted. */
static int is_our_mount(int fd, const struct stat *source, bool *ret_mounted) {
        struct statx stx = {};

        if (statx(fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW, STATX_INO, &stx) < 0)
                return -errno;
        *ret_mounted = (stx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) &&
                       (stx.stx_attributes & STATX_ATTR_MOUNT_ROOT);
        return *ret_mounted && makedev(stx.stx_dev_major, stx.stx_dev_minor) == source->st_dev &&
               stx.stx_ino == source->st_ino;
}

static int bind_read_only(const char *source, int target_fd, const char *target_path, char *why, size_t why_size) {
        char fd_path[64];
        int r;

        (void) snprintf(fd_path, sizeof(fd_path), "/proc/self/fd/%d", target_fd);
        if (mount(source, fd_path, NULL, MS_BIND, NULL) < 0)
                return refuse(-errno, why, why_size, "bind-mounting %s at %s: %s", source, target_path, strerror(errno));
        /* A bind takes its flags only from a remount of it; until then it is read-write, so it
         * goes again if the remount fails. */
        if (mount(NULL, target_path, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0) {
                r = -errno;
                (void) umount2(target_path, MNT_DETACH | UMOUNT_NOFOLLOW);
                return refuse(r, why, why_size, "making %s read-only: %s", target_path, strerror(-r));
        }
        return 0;
}

/* Whether the directory name in dir_fd holds anything. A publish over a non-empty directory would
 * hide what is in it from the pod (its other volumes, when the target names the pod's volumes
 * directory itself): the kubelet hands the plugin an empty or missing target. */
static int dir_has_entries(int dir_fd, const char *name) {
        _cleanup_close_ int fd = openat(dir_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        struct dirent *de;
        DIR *d;
        int r = 0;

        if (fd < 0)
                return -errno;
        d = fdopendir(fd);
        if (!d)
                return -errno;
        fd = -EBADF; /* the DIR owns it now */
        errno = 0;
        while ((de = readdir(d)))
                if (!streq(de->d_name, ".") && !streq(de->d_name, "..")) {
                        r = 1;
                        break;
                }
        if (!de && errno != 0)
                r = -errno;
        closedir(d);
        return r;
}

int csi_mount_publish(const char *source, const char *root, const char *target, char *why, size_t why_size) {
        _cleanup_free_ char *parent = NULL, *path = NULL;
        _cleanup_close_ int dir_fd = -EBADF, fd = -EBADF;
        const char *name = strrchr(target ?: "", '/');
        struct stat src;
        bool mounted;
        int r;

        r = csi_mount_target_check(root, target, why, why_size);
        if (r < 0)
                return r;
        name++;
        if (stat(source, &src) < 0)
                return refuse(-errno, why, why_size, "the sockets directory %s: %s", source, strerror(errno));
        r = resolve_parent(root, target, &parent, why, why_size);
        if (r < 0)
                return r;
        path = fs_path_join(parent, name);
        if (!path)
                return -ENOMEM;
        dir_fd = open(parent, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (dir_fd < 0)
                return refuse(-errno, why, why_size, "%s: %s", parent, strerror(errno));
        if (mkdirat(dir_fd, name, 0755) < 0 && errno != EEXIST)
                return refuse(-errno, why, why_size, "creating %s: %s", path, strerror(errno));
        fd = openat(dir_fd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0 && (errno == ENOTDIR || errno == ELOOP))
                return refuse(-EEXIST, why, why_size, "%s exists and is not a directory", path);
        if (fd < 0)
                return refuse(-errno, why, why_size, "%s: %s", path, strerror(errno));
        r = is_our_mount(fd, &src, &mounted);
        if (r < 0)
                return refuse(r, why, why_size, "%s: %s", path, strerror(-r));
        if (r > 0)
                return 0; /* published already */
        if (mounted)
                return refuse(-EEXIST, why, why_size, "something else is mounted at %s", path);
        r = dir_has_entries(dir_fd, name);
        if (r < 0)
                return refuse(r, why, why_size, "%s: %s", path, strerror(-r));
        if (r > 0)
                return refuse(-ENOTEMPTY, why, why_size, "%s is not empty: a publish would hide what it holds", path);
        return bind_read_only(source, fd, path, why, why_size);
}

int csi_mount_unpublish(const char *source, const char *root, const char *target, char *why, size_t why_size) {
        _cleanup_free_ char *parent = NULL, *path = NULL;
        _cleanup_close_ int dir_fd = -EBADF;
        const char *name = strrchr(target ?: "", '/');
        struct stat src, st;
        int r;

        r = csi_mount_target_check(root, target, why, why_size);
        if (r < 0)
                return r;
        name++;
        if (stat(source, &src) < 0)
                return refuse(-errno, why, why_size, "the sockets directory %s: %s", source, strerror(errno));
        r = resolve_parent(root, target, &parent, why, why_size);
        if (r == -ENOENT)
                return 0; /* gone with its parent */
        if (r < 0)
                return r;
        path = fs_path_join(parent, name);
        if (!path)
                return -ENOMEM;
        dir_fd = open(parent, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (dir_fd < 0)
                return refuse(-errno, why, why_size, "%s: %s", parent, strerror(errno));
        for (unsigned i = 0;; i++) {
                _cleanup_close_ int fd = openat(dir_fd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
                bool mounted;

                if (fd < 0 && errno == ENOENT)
                        return 0;
                if (fd < 0)
                        return refuse(-errno, why, why_size, "%s: %s", path, strerror(errno));
                if (fstat(fd, &st) < 0)
                        return refuse(-errno, why, why_size, "%s: %s", path, strerror(errno));
                if (!S_ISDIR(st.st_mode))
                        return refuse(-ENOTDIR, why, why_size, "%s is not a directory: left alone", path);
                r = is_our_mount(fd, &src, &mounted);
                if (r < 0)
                        return refuse(r, why, why_size, "%s: %s", path, strerror(-r));
                if (!mounted)
                        break;
                if (r == 0)
                        return refuse(-ENOENT, why, why_size,
                                      "what is mounted at %s is not this driver's volume: left alone", path);
                if (i >= CSI_UNMOUNT_MAX)
                        return refuse(-EBUSY, why, why_size, "%s is still mounted after %u unmounts", path, i);
                fd = safe_close(fd); /* it holds the mount: unmounting would be EBUSY */
                if (umount2(path, UMOUNT_NOFOLLOW) < 0)
                        return refuse(-errno, why, why_size, "unmounting %s: %s", path, strerror(errno));
        }
        if (unlinkat(dir_fd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
                return refuse(-errno, why, why_size, "removing %s: %s", path, strerror(errno));
        return 0;
}

bool csi_mount_refusal(int error) {
        switch (error) {
        case -EINVAL:
        case -EPERM:
        case -ENOENT:
        case -EEXIST:
        case -ENOTEMPTY:
        case -ENOTDIR:
        case -EBUSY:
                return true;
        default:
                return false;
        }
}
