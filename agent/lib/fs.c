/* SPDX-License-Identifier: MIT */
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <sys/stat.h>

#include "fs-acl.h"
#include "fs.h"

#define TEMP_PREFIX ".#"
#define TEMP_SUFFIX ".XXXXXX"

DEFINE_TRIVIAL_CLEANUP_FUNC(DIR *, closedir);

/* ---- building blocks (declared in fs.h; atomic-dir.c uses them too) ---- */

static bool dot_or_dot_dot(const char *name) {
        return streq(name, ".") || streq(name, "..");
}

/* Splits path into its directory and last component, ignoring trailing slashes. Either output
 * may be NULL. */
int fs_path_split(const char *path, char **ret_dir, char **ret_base) {
        size_t len = strlen(path);

        if (len == 0)
                return -EINVAL;
        while (len > 1 && path[len - 1] == '/')
                len--;

        size_t slash = len;
        while (slash > 0 && path[slash - 1] != '/')
                slash--;

        _cleanup_free_ char *dir = NULL, *base = NULL;
        if (slash == 0)
                dir = strdup(".");
        else if (slash == 1)
                dir = strdup("/");
        else
                dir = strndup(path, slash - 1);
        base = slash == len ? strdup("/") : strndup(path + slash, len - slash);
        if (!dir || !base)
                return -ENOMEM;

        if (ret_dir)
                *ret_dir = TAKE_PTR(dir);
        if (ret_base)
                *ret_base = TAKE_PTR(base);
        return 0;
}

char *fs_path_join(const char *a, const char *b) {
        char *p = NULL;
        size_t n = strlen(a);

        if (asprintf(&p, "%s%s%s", a, n > 0 && a[n - 1] == '/' ? "" : "/", b) < 0)
                return NULL;
        return p;
}

int fs_fsync_fd(int fd) {
        return fsync(fd) < 0 ? negative_errno() : 0;
}

int fs_open_directory(const char *path) {
        int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        return fd < 0 ? negative_errno() : fd;
}

/* A fresh DIR stream for dir_fd/name; the caller's dir_fd stays open and unmoved. */
DIR *fs_opendir_at(int dir_fd, const char *name) {
        int fd = openat(dir_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return NULL;

        DIR *d = fdopendir(fd);
        if (!d)
                closep(&fd);
        return d;
}

/* Next entry other than "." and "..": 1 with *ret set, 0 at the end, negative errno. */
int fs_read_entry(DIR *d, struct dirent **ret) {
        for (;;) {
                errno = 0;
                struct dirent *de = readdir(d);
                if (!de)
                        return errno > 0 ? -errno : 0;
                if (dot_or_dot_dot(de->d_name))
                        continue;
                *ret = de;
                return 1;
        }
}

int fs_readlinkat_malloc(int dir_fd, const char *name, char **ret) {
        for (size_t size = 256; size <= 16 * PATH_MAX; size *= 2) {
                _cleanup_free_ char *buf = malloc(size);
                if (!buf)
                        return -ENOMEM;

                ssize_t n = readlinkat(dir_fd, name, buf, size);
                if (n < 0)
                        return negative_errno();
                if ((size_t) n < size) {
                        buf[n] = 0;
                        *ret = TAKE_PTR(buf);
                        return 0;
                }
        }
        return -ENAMETOOLONG;
}

/* ---- single files ---- */

int fs_write_all(int fd, const void *data, size_t size) {
        const char *p = data;

        while (size > 0) {
                ssize_t n = write(fd, p, size);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return negative_errno();
                }
                if (n == 0)
                        return -EIO;
                p += n;
                size -= (size_t) n;
        }
        return 0;
}

/* dir/.#<base>.XXXXXX, with base shortened so the name fits NAME_MAX however long the target
 * name is (the temp name only has to be unique and recognisable, not complete). */
static int temp_template(const char *dir, const char *base, char **ret) {
        size_t room = NAME_MAX - strlen(TEMP_PREFIX) - strlen(TEMP_SUFFIX);
        char *p = NULL;

        if (asprintf(&p, "%s/" TEMP_PREFIX "%.*s" TEMP_SUFFIX, dir, (int) MIN(strlen(base), room), base) < 0)
                return -ENOMEM;
        *ret = p;
        return 0;
}

static int write_temp(int fd, const void *data, size_t size, mode_t mode, uid_t uid, gid_t gid) {
        int r;

        /* Access is set before the file becomes visible under its name, so no reader ever sees
         * it with mkostemp()'s 0600 alone. */
        r = fs_acl_grant_fd(fd, mode & 07777, uid, gid);
        if (r < 0)
                return r;

        r = fs_write_all(fd, data, size);
        if (r < 0)
                return r;

        /* Without this, a crash after the rename could leave the new name with no data. */
        return fs_fsync_fd(fd);
}

int fs_write_file_atomic(const char *path, const void *data, size_t size, mode_t mode, uid_t uid, gid_t gid) {
        return fs_write_file_atomic_full(path, data, size, mode, uid, gid, NULL);
}

int fs_write_file_atomic_full(const char *path, const void *data, size_t size, mode_t mode, uid_t uid, gid_t gid,
                           bool *ret_renamed) {
        _cleanup_free_ char *dir = NULL, *base = NULL, *tmp = NULL;
        _cleanup_close_ int dfd = -EBADF, fd = -EBADF;
        int r;

        if (ret_renamed)
                *ret_renamed = false;
        if (isempty(path) || (!data && size > 0))
                return -EINVAL;
        if (path[strlen(path) - 1] == '/')
                return -EISDIR;

        r = fs_path_split(path, &dir, &base);
        if (r < 0)
                return r;

        /* Opened up front: failing here is cheaper than after writing the whole file. */
        dfd = fs_open_directory(dir);
        if (dfd < 0)
                return dfd;

        r = temp_template(dir, base, &tmp);
        if (r < 0)
                return r;

        fd = mkostemp(tmp, O_CLOEXEC);
        if (fd < 0)
                return negative_errno();

        r = write_temp(fd, data, size, mode, uid, gid);
        if (r >= 0 && close(TAKE_FD(fd)) < 0)
                r = negative_errno();
        if (r >= 0 && rename(tmp, path) < 0)
                r = negative_errno();
        if (r < 0) {
                (void) unlink(tmp);
                return r;
        }

        if (ret_renamed)
                *ret_renamed = true;
        /* The rename itself is only durable once the directory is. */
        return fs_fsync_fd(dfd);
}

int fs_read_file_full(const char *path, size_t max_size, char **ret_data, size_t *ret_size) {
        _cleanup_close_ int fd = -EBADF;
        _cleanup_free_ char *buf = NULL;
        struct stat st;

        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return negative_errno();
        if (fstat(fd, &st) < 0)
                return negative_errno();
        if (S_ISDIR(st.st_mode))
                return -EISDIR;

        /* Room for one byte past the limit (to notice a file that is too big) and the NUL. */
        size_t limit = MIN(max_size, SIZE_MAX - 2);
        if (S_ISREG(st.st_mode) && (uint64_t) st.st_size > limit)
                return -EFBIG;

        /* st_size is only a hint: /proc and /sys files report 0, files may grow meanwhile. */
        size_t cap = S_ISREG(st.st_mode) && st.st_size > 0 ? (size_t) st.st_size + 1 : 4096;
        cap = MIN(cap, limit + 1);
        buf = malloc(cap + 1);
        if (!buf)
                return -ENOMEM;

        size_t len = 0;
        for (;;) {
                if (len == cap) {
                        size_t grown = cap > (limit + 1) / 2 ? limit + 1 : cap * 2;
                        char *p = realloc(buf, grown + 1);
                        if (!p)
                                return -ENOMEM;
                        buf = p;
                        cap = grown;
                }

                ssize_t n = read(fd, buf + len, cap - len);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return negative_errno();
                }
                if (n == 0)
                        break;
                len += (size_t) n;
                if (len > limit)
                        return -EFBIG;
        }

        buf[len] = 0;
        *ret_data = TAKE_PTR(buf);
        if (ret_size)
                *ret_size = len;
        return 0;
}

static bool is_directory(const char *path) {
        struct stat st;
        return stat(path, &st) >= 0 && S_ISDIR(st.st_mode);
}

int fs_mkdirat_mode(int dfd, const char *path, mode_t mode) {
        _cleanup_close_ int fd = -EBADF;

        if (mkdirat(dfd, path, mode) < 0)
                return negative_errno();
        /* Nothing but us writes in the directories we create in, so this is the new one. */
        fd = openat(dfd, path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0 || fchmod(fd, mode) < 0)
                return negative_errno();
        return 0;
}

int fs_mkdir_p(const char *path, mode_t mode) {
        _cleanup_free_ char *p = NULL;

        if (isempty(path))
                return -EINVAL;
        p = strdup(path);
        if (!p)
                return -ENOMEM;

        for (char *s = p + 1;; s++) {
                if (*s != '/' && *s != 0)
                        continue;

                char c = *s;
                *s = 0;
                /* An existing directory may answer EACCES/EROFS instead of EEXIST on some file
                 * systems; what matters is only that it is a directory. */
                int r = fs_mkdirat_mode(AT_FDCWD, p, mode);
                if (r < 0 && r != -EEXIST && !is_directory(p))
                        return r;
                *s = c;
                if (c == 0)
                        break;
        }

        struct stat st;
        if (stat(p, &st) < 0)
                return negative_errno();
        return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
}

static int rm_rf_children(int dir_fd, const char *name) {
        _cleanup_(closedirp) DIR *d = NULL;
        struct dirent *de;
        int r, ret = 0;

        /* O_NOFOLLOW: if the directory was swapped for a symlink since we looked, stop here
         * rather than emptying whatever it points to. */
        d = fs_opendir_at(dir_fd, name);
        if (!d)
                return errno == ENOENT ? 0 : negative_errno();

        while ((r = fs_read_entry(d, &de)) > 0) {
                r = fs_rm_rf_at(dirfd(d), de->d_name);
                if (r < 0 && ret == 0)
                        ret = r;
        }
        if (r < 0 && ret == 0)
                ret = r;
        return ret;
}

/* Removes dir_fd/name and everything below it; symlinks are removed, never followed. Keeps
 * going after an error and returns the first one. */
int fs_rm_rf_at(int dir_fd, const char *name) {
        struct stat st;
        int r;

        if (fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return errno == ENOENT ? 0 : negative_errno();

        if (!S_ISDIR(st.st_mode)) {
                if (unlinkat(dir_fd, name, 0) < 0 && errno != ENOENT)
                        return negative_errno();
                return 0;
        }

        r = rm_rf_children(dir_fd, name);
        if (unlinkat(dir_fd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
                return r < 0 ? r : negative_errno();
        return r;
}

int fs_rm_rf(const char *path) {
        _cleanup_free_ char *p = NULL;

        if (isempty(path))
                return -EINVAL;

        /* "link/" would make the kernel resolve the symlink: drop trailing slashes. */
        p = strdup(path);
        if (!p)
                return -ENOMEM;
        for (size_t n = strlen(p); n > 1 && p[n - 1] == '/'; n--)
                p[n - 1] = 0;
        if (streq(p, "/"))
                return -EPERM;

        return fs_rm_rf_at(AT_FDCWD, p);
}

int fs_fsync_directory_of(const char *path) {
        _cleanup_free_ char *dir = NULL;
        _cleanup_close_ int fd = -EBADF;
        int r;

        if (isempty(path))
                return -EINVAL;
        r = fs_path_split(path, &dir, NULL);
        if (r < 0)
                return r;

        fd = fs_open_directory(dir);
        if (fd < 0)
                return fd;
        return fs_fsync_fd(fd);
}

int fs_fsync_path(const char *path) {
        _cleanup_close_ int fd = -EBADF;

        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return negative_errno();
        return fs_fsync_fd(fd);
}

int fs_cleanup_temp(const char *dir) {
        _cleanup_(closedirp) DIR *d = NULL;
        struct dirent *de;
        int r, n = 0;

        d = opendir(dir);
        if (!d)
                return negative_errno();

        while ((r = fs_read_entry(d, &de)) > 0) {
                struct stat st;

                if (!startswith(de->d_name, TEMP_PREFIX))
                        continue;
                if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        continue; /* gone meanwhile */
                /* Only regular files: fs_write_file_atomic() makes nothing else (".#name" symlinks
                 * are Emacs' lock files, for one). */
                if (!S_ISREG(st.st_mode))
                        continue;
                if (unlinkat(dirfd(d), de->d_name, 0) < 0) {
                        if (errno == ENOENT)
                                continue;
                        return negative_errno();
                }
                n++;
        }
        return r < 0 ? r : n;
}
