/* SPDX-License-Identifier: MIT */
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>

#include "atomic-dir.h"
#include "fs.h"

/* Bookkeeping names inside an atomic directory. Every name starting with ".." belongs to us
 * (as in Kubernetes' AtomicWriter), which is why a version may not ship such an entry. */
#define ATOMIC_DIR_DATA_TMP "..data_tmp"
#define ATOMIC_DIR_LINK_TMP "..link_tmp"
/* A pruned version is renamed to "..trash<version name>" before it is removed, so a kill
 * never leaves a half-deleted directory that still counts as history. */
#define ATOMIC_DIR_TRASH_PREFIX "..trash"
#define ATOMIC_DIR_DATA_PREFIX ATOMIC_DIR_DATA "/"

/* "..YYYY_MM_DD_HH_MM_SS.NNNNNNNNN", '0' standing for a digit. */
#define VERSION_NAME_TEMPLATE "..0000_00_00_00_00_00.000000000"
/* Collisions inside one nanosecond get ".001" ...; fixed width keeps name order = age order. */
#define VERSION_UNIQUE_MAX 1000U

DEFINE_TRIVIAL_CLEANUP_FUNC(DIR *, closedir);

static bool is_version_name(const char *name) {
        const char *t = VERSION_NAME_TEMPLATE;
        size_t i;

        for (i = 0; t[i]; i++) {
                if (t[i] == '0' ? (name[i] < '0' || name[i] > '9') : name[i] != t[i])
                        return false;
        }

        /* Either the plain name or ".NNN" from a collision. */
        if (name[i] == 0)
                return true;
        if (name[i] != '.' || name[i + 1] == 0)
                return false;
        for (i++; name[i]; i++)
                if (name[i] < '0' || name[i] > '9')
                        return false;
        return true;
}

static bool is_version_dir(int dir_fd, const char *name) {
        struct stat st;

        return is_version_name(name) && fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) >= 0 &&
               S_ISDIR(st.st_mode);
}

static int version_name_now(char *buf, size_t size) {
        struct timespec ts;
        struct tm tm;

        /* UTC wall-clock time, like AtomicWriter: operators read the names. */
        if (clock_gettime(CLOCK_REALTIME, &ts) < 0)
                return negative_errno();
        if (!gmtime_r(&ts.tv_sec, &tm))
                return -EOVERFLOW;

        int n = snprintf(buf, size, "..%04d_%02d_%02d_%02d_%02d_%02d.%09ld", tm.tm_year + 1900,
                         tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (long) ts.tv_nsec);
        return n < 0 || (size_t) n >= size ? -ENAMETOOLONG : 0;
}

/* A new version must sort after the current one: names are wall-clock times, and after a step
 * back of the clock the time now sorts before it (cleanup would then take the current one's
 * predecessor for a leftover, and pruning would keep the wrong history). It then takes the
 * current one's time with the next collision suffix. Returns the first suffix to try. */
static unsigned version_after_current(const char *dest, char *name) {
        _cleanup_free_ char *link = fs_path_join(dest, ATOMIC_DIR_DATA), *current = NULL;
        size_t base = strlen(VERSION_NAME_TEMPLATE);

        if (!link || fs_readlinkat_malloc(AT_FDCWD, link, &current) < 0 || !is_version_name(current) ||
            strcmp(name, current) > 0)
                return 0;
        memcpy(name, current, base);
        name[base] = 0;
        return current[base] == '.' ? (unsigned) strtoul(current + base + 1, NULL, 10) + 1 : 1;
}

int atomic_dir_begin(const char *dest, char **ret_version_dir) {
        char name[128], unique[160];
        int r;

        r = fs_mkdir_p(dest, 0755);
        if (r < 0)
                return r;

        r = version_name_now(name, sizeof(name));
        if (r < 0)
                return r;

        for (unsigned i = version_after_current(dest, name); i < VERSION_UNIQUE_MAX; i++) {
                _cleanup_free_ char *path = NULL;

                if (i == 0)
                        snprintf(unique, sizeof(unique), "%s", name);
                else
                        snprintf(unique, sizeof(unique), "%s.%03u", name, i);

                path = fs_path_join(dest, unique);
                if (!path)
                        return -ENOMEM;
                r = fs_mkdirat_mode(AT_FDCWD, path, 0755);
                if (r >= 0) {
                        *ret_version_dir = TAKE_PTR(path);
                        return 0;
                }
                if (r != -EEXIST)
                        return r;
        }
        return -EEXIST;
}

/* Refuses a version with a top-level ".." name: it would collide with ..data and friends. */
static int check_version_entries(int vfd) {
        _cleanup_(closedirp) DIR *d = NULL;
        struct dirent *de;
        int r;

        d = fs_opendir_at(vfd, ".");
        if (!d)
                return negative_errno();

        while ((r = fs_read_entry(d, &de)) > 0)
                if (startswith(de->d_name, ".."))
                        return -EINVAL;
        return r;
}

/* fsyncs every regular file and directory below dir_fd/name, then the directory itself, so the
 * version is on disk before ..data can point at it. */
static int fsync_tree(int dir_fd, const char *name) {
        _cleanup_(closedirp) DIR *d = NULL;
        struct dirent *de;
        int r;

        d = fs_opendir_at(dir_fd, name);
        if (!d)
                return negative_errno();

        while ((r = fs_read_entry(d, &de)) > 0) {
                _cleanup_close_ int fd = -EBADF;
                struct stat st;

                if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        return negative_errno();

                if (S_ISDIR(st.st_mode)) {
                        r = fsync_tree(dirfd(d), de->d_name);
                        if (r < 0)
                                return r;
                } else if (S_ISREG(st.st_mode)) {
                        fd = openat(dirfd(d), de->d_name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
                        if (fd < 0)
                                return negative_errno();
                        r = fs_fsync_fd(fd);
                        if (r < 0)
                                return r;
                }
                /* Symlinks and the like live entirely in their directory's entry. */
        }
        if (r < 0)
                return r;

        return fs_fsync_fd(dirfd(d));
}

/* The commit point: one rename() replaces ..data, so readers resolve either version whole. */
static int swap_data_link(int destfd, const char *version_name, bool sync) {
        int r;

        if (unlinkat(destfd, ATOMIC_DIR_DATA_TMP, 0) < 0 && errno != ENOENT)
                return negative_errno();
        if (symlinkat(version_name, destfd, ATOMIC_DIR_DATA_TMP) < 0)
                return negative_errno();
        if (renameat(destfd, ATOMIC_DIR_DATA_TMP, destfd, ATOMIC_DIR_DATA) < 0) {
                r = negative_errno();
                (void) unlinkat(destfd, ATOMIC_DIR_DATA_TMP, 0);
                return r;
        }
        return sync ? fs_fsync_fd(destfd) : 0;
}

/* Makes dest/<entry> -> ..data/<entry>, replacing whatever non-directory is there in one step. */
static int ensure_entry_link(int destfd, const char *entry) {
        _cleanup_free_ char *target = NULL, *old = NULL;
        int r;

        if (asprintf(&target, ATOMIC_DIR_DATA_PREFIX "%s", entry) < 0)
                return -ENOMEM;
        if (fs_readlinkat_malloc(destfd, entry, &old) >= 0 && streq(old, target))
                return 0;

        if (unlinkat(destfd, ATOMIC_DIR_LINK_TMP, 0) < 0 && errno != ENOENT)
                return negative_errno();
        if (symlinkat(target, destfd, ATOMIC_DIR_LINK_TMP) < 0)
                return negative_errno();
        if (renameat(destfd, ATOMIC_DIR_LINK_TMP, destfd, entry) < 0) {
                r = negative_errno();
                (void) unlinkat(destfd, ATOMIC_DIR_LINK_TMP, 0);
                return r;
        }
        return 0;
}

static int link_entries(int destfd) {
        _cleanup_(closedirp) DIR *d = NULL;
        struct dirent *de;
        int r, ret = 0;

        d = fs_opendir_at(destfd, ATOMIC_DIR_DATA "/.");
        if (!d)
                return negative_errno();

        while ((r = fs_read_entry(d, &de)) > 0) {
                if (startswith(de->d_name, ".."))
                        continue;
                r = ensure_entry_link(destfd, de->d_name);
                if (r < 0 && ret == 0)
                        ret = r;
        }
        return r < 0 && ret == 0 ? r : ret;
}

/* Drops top-level links into ..data whose entry the current version no longer has. */
static int unlink_stale_entries(int destfd) {
        _cleanup_(closedirp) DIR *d = NULL;
        struct dirent *de;
        int r, ret = 0;

        d = fs_opendir_at(destfd, ".");
        if (!d)
                return negative_errno();

        while ((r = fs_read_entry(d, &de)) > 0) {
                _cleanup_free_ char *target = NULL;
                struct stat st;

                if (startswith(de->d_name, ".."))
                        continue;
                if (fs_readlinkat_malloc(dirfd(d), de->d_name, &target) < 0)
                        continue; /* not a symlink: not ours */
                if (!startswith(target, ATOMIC_DIR_DATA_PREFIX))
                        continue;
                if (fstatat(dirfd(d), target, &st, AT_SYMLINK_NOFOLLOW) >= 0 || errno != ENOENT)
                        continue;
                if (unlinkat(dirfd(d), de->d_name, 0) < 0 && errno != ENOENT && ret == 0)
                        ret = negative_errno();
        }
        return r < 0 && ret == 0 ? r : ret;
}

static int update_entry_links(int destfd, bool sync) {
        int r, q;

        r = link_entries(destfd);
        q = unlink_stale_entries(destfd);
        if (r >= 0)
                r = q;
        q = sync ? fs_fsync_fd(destfd) : 0;
        return r < 0 ? r : q;
}

static int cmp_names(const void *a, const void *b) {
        return strcmp(*(char *const *) a, *(char *const *) b);
}

static void free_names(char **names, size_t n) {
        for (size_t i = 0; i < n; i++)
                free(names[i]);
        free(names);
}

/* All version directories in dest but `except` and `except2` (either may be NULL), sorted by
 * name, i.e. oldest first. */
static int list_versions(int destfd, const char *except, const char *except2, char ***ret_names, size_t *ret_n) {
        _cleanup_(closedirp) DIR *d = NULL;
        char **names = NULL;
        size_t n = 0, cap = 0;
        struct dirent *de;
        int r;

        d = fs_opendir_at(destfd, ".");
        if (!d)
                return negative_errno();

        while ((r = fs_read_entry(d, &de)) > 0) {
                if (!is_version_dir(dirfd(d), de->d_name) || streq_ptr(de->d_name, except) ||
                    streq_ptr(de->d_name, except2))
                        continue;
                if (n == cap) {
                        size_t grown = cap ? cap * 2 : 8;
                        char **p = realloc(names, grown * sizeof(char *));
                        if (!p) {
                                r = -ENOMEM;
                                break;
                        }
                        names = p;
                        cap = grown;
                }
                names[n] = strdup(de->d_name);
                if (!names[n]) {
                        r = -ENOMEM;
                        break;
                }
                n++;
        }
        if (r < 0) {
                free_names(names, n);
                return r;
        }

        if (n > 0)
                qsort(names, n, sizeof(char *), cmp_names);
        *ret_names = names;
        *ret_n = n;
        return 0;
}

/* Removes what an interrupted prune left. Returns the number removed. */
static int empty_trash(int destfd) {
        _cleanup_(closedirp) DIR *d = NULL;
        struct dirent *de;
        int r, n = 0;

        d = fs_opendir_at(destfd, ".");
        if (!d)
                return negative_errno();

        while ((r = fs_read_entry(d, &de)) > 0) {
                if (!startswith(de->d_name, ATOMIC_DIR_TRASH_PREFIX))
                        continue;
                r = fs_rm_rf_at(dirfd(d), de->d_name);
                if (r < 0)
                        return r;
                n++;
        }
        return r < 0 ? r : n;
}

/* Keeps the newest keep_versions version directories other than the two named. */
static int prune_versions(int destfd, const char *except, const char *except2, unsigned keep_versions) {
        char **names = NULL;
        size_t n = 0;
        int r, ret = 0;

        r = list_versions(destfd, except, except2, &names, &n);
        if (r < 0)
                return r;

        for (size_t i = 0; i + keep_versions < n; i++) {
                _cleanup_free_ char *trash = NULL;

                if (asprintf(&trash, ATOMIC_DIR_TRASH_PREFIX "%s", names[i]) < 0) {
                        ret = -ENOMEM;
                        break;
                }
                if (renameat(destfd, names[i], destfd, trash) < 0) {
                        ret = negative_errno();
                        break;
                }
        }
        free_names(names, n);

        r = empty_trash(destfd);
        return ret < 0 ? ret : MIN(r, 0);
}

static int commit_at(int destfd, const char *name, unsigned keep_versions, bool sync);

int atomic_dir_commit(const char *dest, const char *version_dir, unsigned keep_versions) {
        return atomic_dir_commit_flags(dest, version_dir, keep_versions, 0);
}

int atomic_dir_commit_flags(const char *dest, const char *version_dir, unsigned keep_versions, unsigned flags) {
        bool sync = !(flags & ATOMIC_DIR_SYNCED);
        _cleanup_free_ char *name = NULL;
        _cleanup_close_ int destfd = -EBADF;
        struct stat named, inside;
        int r;

        if (isempty(dest) || isempty(version_dir))
                return -EINVAL;
        r = fs_path_split(version_dir, NULL, &name);
        if (r < 0)
                return r;
        if (!is_version_name(name))
                return -EINVAL;

        destfd = fs_open_directory(dest);
        if (destfd < 0)
                return destfd;

        /* version_dir must be that very directory inside dest, or ..data would dangle. */
        if (stat(version_dir, &named) < 0)
                return negative_errno();
        if (fstatat(destfd, name, &inside, AT_SYMLINK_NOFOLLOW) < 0)
                return negative_errno();
        if (!S_ISDIR(inside.st_mode) || named.st_dev != inside.st_dev || named.st_ino != inside.st_ino)
                return -EINVAL;

        return commit_at(destfd, name, keep_versions, sync);
}

/* The commit of version `name` inside destfd (checked to be a directory there). */
static int commit_at(int destfd, const char *name, unsigned keep_versions, bool sync) {
        int r;

        _cleanup_close_ int vfd = openat(destfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (vfd < 0)
                return negative_errno();
        r = check_version_entries(vfd);
        if (r < 0)
                return r;

        r = sync ? fsync_tree(destfd, name) : 0;
        if (r < 0)
                return r;

        /* Make room first: once ..data moves, the version it leaves joins the history, so keep
         * one fewer now. A kill right after the swap then still leaves no more than
         * keep_versions old ones. Best effort: the pruning after the swap reports errors. */
        _cleanup_free_ char *previous = NULL;
        if (fs_readlinkat_malloc(destfd, ATOMIC_DIR_DATA, &previous) >= 0 && !streq(previous, name))
                (void) prune_versions(destfd, previous, name, keep_versions > 0 ? keep_versions - 1 : 0);

        r = swap_data_link(destfd, name, sync);
        if (r < 0)
                return r;

        /* The new version is published. What follows only tidies up; a failure is reported,
         * and atomic_dir_cleanup() or the next commit finishes the job. */
        r = update_entry_links(destfd, sync);
        if (r < 0)
                return r;
        return prune_versions(destfd, name, NULL, keep_versions);
}

int atomic_dir_current(const char *dest, char **ret_version_name) {
        _cleanup_free_ char *path = NULL;

        path = fs_path_join(dest, ATOMIC_DIR_DATA);
        if (!path)
                return -ENOMEM;
        return fs_readlinkat_malloc(AT_FDCWD, path, ret_version_name);
}

static int remove_if_exists(int dir_fd, const char *name) {
        if (unlinkat(dir_fd, name, 0) < 0)
                return errno == ENOENT ? 0 : negative_errno();
        return 1;
}

static int cleanup_at(int destfd);

int atomic_dir_cleanup(const char *dest) {
        _cleanup_close_ int destfd = open(dest, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (destfd < 0)
                return errno == ENOENT ? 0 : negative_errno();
        return cleanup_at(destfd);
}

static int cleanup_at(int destfd) {
        _cleanup_free_ char *current = NULL;
        char **names = NULL;
        size_t n_names = 0;
        int r, n = 0;

        r = fs_readlinkat_malloc(destfd, ATOMIC_DIR_DATA, &current);
        if (r < 0 && r != -ENOENT)
                return r;

        for (const char *const *t = (const char *const[]) { ATOMIC_DIR_DATA_TMP, ATOMIC_DIR_LINK_TMP, NULL }; *t; t++) {
                r = remove_if_exists(destfd, *t);
                if (r < 0)
                        return r;
                n += r;
        }

        r = empty_trash(destfd);
        if (r < 0)
                return r;
        n += r;

        /* Without ..data nothing was ever published: every version is a leftover. */
        r = list_versions(destfd, current, NULL, &names, &n_names);
        if (r < 0)
                return r;
        for (size_t i = 0; i < n_names; i++) {
                if (current && strcmp(names[i], current) < 0)
                        continue; /* history, counted by keep_versions */
                r = fs_rm_rf_at(destfd, names[i]);
                if (r < 0)
                        break;
                n++;
        }
        free_names(names, n_names);
        if (r < 0)
                return r;

        /* A commit interrupted after the swap may have left links missing or stale. */
        if (current && faccessat(destfd, ATOMIC_DIR_DATA "/.", F_OK, 0) >= 0) {
                r = update_entry_links(destfd, true);
                if (r < 0)
                        return r;
        }
        return n;
}

/* ---- a whole new directory at once ---- */

int atomic_dir_write_files(int dir_fd, const struct atomic_dir_file *files, size_t n) {
        for (size_t i = 0; i < n; i++) {
                const struct atomic_dir_file *f = &files[i];
                if (isempty(f->name) || strchr(f->name, '/') || startswith(f->name, ".."))
                        return -EINVAL;
                _cleanup_close_ int fd =
                        openat(dir_fd, f->name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY, f->mode);
                if (fd < 0)
                        return negative_errno();
                /* fchmod: the umask may have taken bits the mode asks for. */
                if (fchmod(fd, f->mode) < 0)
                        return negative_errno();
                int r = fs_write_all(fd, f->data, f->size);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int staged_name(const char *name, unsigned serial, char **ret) {
        /* "<prefix><serial>-<name>" must fit NAME_MAX: 11 for the serial and its dash. */
        if (isempty(name) || strchr(name, '/') || startswith(name, ".") ||
            strlen(name) > NAME_MAX - strlen(ATOMIC_DIR_STAGED_PREFIX) - 11)
                return -EINVAL;
        return asprintf(ret, ATOMIC_DIR_STAGED_PREFIX "%u-%s", serial, name) < 0 ? -ENOMEM : 0;
}

/* fs_mkdirat_mode() that keeps the directory open: one open for the mode and the filling. */
static int mkdir_open(int dfd, const char *name, mode_t mode) {
        if (mkdirat(dfd, name, mode) < 0)
                return negative_errno();
        int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return negative_errno();
        if (fchmod(fd, mode) < 0) { /* the umask may have taken bits */
                int r = negative_errno();
                close(fd);
                return r;
        }
        return fd;
}

/* The staging directory's content: version, ..data -> version, <file> -> ..data/<file>. */
static int fill_staged(int sfd, const struct atomic_dir_file *files, size_t n) {
        char version[128];
        int r;

        r = version_name_now(version, sizeof(version));
        if (r < 0)
                return r;
        _cleanup_close_ int vfd = mkdir_open(sfd, version, 0755);
        if (vfd < 0)
                return vfd;
        r = atomic_dir_write_files(vfd, files, n);
        if (r < 0)
                return r;
        if (symlinkat(version, sfd, ATOMIC_DIR_DATA) < 0)
                return negative_errno();
        for (size_t i = 0; i < n; i++) {
                _cleanup_free_ char *target = NULL;
                if (asprintf(&target, ATOMIC_DIR_DATA_PREFIX "%s", files[i].name) < 0)
                        return -ENOMEM;
                if (symlinkat(target, sfd, files[i].name) < 0)
                        return negative_errno();
        }
        return 0;
}

int atomic_dir_stage_new(int parent_fd, const char *name, unsigned serial, const struct atomic_dir_file *files,
                         size_t n) {
        _cleanup_free_ char *staged = NULL;
        int r;

        r = staged_name(name, serial, &staged);
        if (r < 0)
                return r;
        _cleanup_close_ int sfd = mkdir_open(parent_fd, staged, 0755);
        if (sfd == -EEXIST) { /* a leftover of a kill: nothing points at it */
                r = fs_rm_rf_at(parent_fd, staged);
                sfd = r < 0 ? r : mkdir_open(parent_fd, staged, 0755);
        }
        r = sfd < 0 ? sfd : fill_staged(sfd, files, n);
        if (r < 0)
                (void) fs_rm_rf_at(parent_fd, staged);
        return r;
}

/* <name> exists: the staged version joins it as an ordinary commit, every step synced. */
static int publish_into_existing(int parent_fd, const char *staged, const char *name) {
        _cleanup_free_ char *version = NULL;
        int r;

        _cleanup_close_ int destfd = openat(parent_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (destfd < 0 && errno == ENOENT) { /* the file system cannot rename without replacing */
                r = fs_mkdirat_mode(parent_fd, name, 0755);
                if (r < 0 && r != -EEXIST)
                        return r;
                destfd = openat(parent_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        }
        if (destfd < 0)
                return negative_errno();
        _cleanup_close_ int sfd = openat(parent_fd, staged, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sfd < 0)
                return negative_errno();
        r = fs_readlinkat_malloc(sfd, ATOMIC_DIR_DATA, &version);
        if (r < 0)
                return r;
        r = cleanup_at(destfd);
        if (r < 0)
                return r;
        if (renameat(sfd, version, destfd, version) < 0)
                return negative_errno();
        r = commit_at(destfd, version, 0, true);
        if (r < 0)
                (void) fs_rm_rf_at(destfd, version);
        return r;
}

int atomic_dir_publish_new(int parent_fd, const char *name, unsigned serial) {
        _cleanup_free_ char *staged = NULL;
        int r;

        r = staged_name(name, serial, &staged);
        if (r < 0)
                return r;
        if (renameat2(parent_fd, staged, parent_fd, name, RENAME_NOREPLACE) >= 0)
                return 0;
        r = negative_errno();
        if (r == -EEXIST || r == -EINVAL)
                r = publish_into_existing(parent_fd, staged, name);
        (void) fs_rm_rf_at(parent_fd, staged);
        return r;
}

int atomic_dir_drop_staged(int parent_fd, const char *name, unsigned serial) {
        _cleanup_free_ char *staged = NULL;
        int r = staged_name(name, serial, &staged);
        return r < 0 ? r : fs_rm_rf_at(parent_fd, staged);
}

/* "<prefix><serial>-<name>" → serial and name; false if it is not one. */
static bool parse_staged(const char *staged, unsigned *ret_serial, const char **ret_name) {
        const char *p = staged + strlen(ATOMIC_DIR_STAGED_PREFIX);
        char *end;

        if (!startswith(staged, ATOMIC_DIR_STAGED_PREFIX) || *p < '0' || *p > '9')
                return false;
        errno = 0;
        unsigned long v = strtoul(p, &end, 10);
        if (errno != 0 || v > UINT_MAX || *end != '-' || end[1] == 0)
                return false;
        *ret_serial = (unsigned) v;
        *ret_name = end + 1;
        return true;
}

int atomic_dir_sweep_staged(int parent_fd, atomic_dir_keep_fn keep, void *userdata) {
        _cleanup_(closedirp) DIR *d = fs_opendir_at(parent_fd, ".");
        struct dirent *de;
        int r, n = 0;

        if (!d)
                return negative_errno();
        while ((r = fs_read_entry(d, &de)) > 0) {
                struct stat st;
                const char *name;
                unsigned serial;
                if (!startswith(de->d_name, ATOMIC_DIR_STAGED_PREFIX) ||
                    fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode))
                        continue;
                if (keep && parse_staged(de->d_name, &serial, &name) && keep(name, serial, userdata))
                        continue;
                r = fs_rm_rf_at(dirfd(d), de->d_name);
                if (r < 0)
                        return r;
                n++;
        }
        return r < 0 ? r : n;
}
