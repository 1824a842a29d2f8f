/* SPDX-License-Identifier: MIT */
#include <dirent.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/stat.h>

#include <openssl/evp.h>

#include "atomic-dir.h"
#include "fs.h"
#include "stage.h"

#define HASH_BUFFER_SIZE (256L * 1024L)

DEFINE_TRIVIAL_CLEANUP_FUNC(DIR *, closedir);

void stage_init(struct stage *s) {
        *s = (struct stage) { .vfd = -EBADF };
}

void stage_done(struct stage *s) {
        s->vfd = safe_close(s->vfd);
        s->version_dir = mfree(s->version_dir);
        s->reused = mfree(s->reused);
        s->published_name = mfree(s->published_name);
        s->message = mfree(s->message);
}

_printf_(4, 5) static int stage_fail(struct stage *s, enum fetch_error_kind kind, int error, const char *format, ...) {
        va_list ap;
        char *m = NULL;

        va_start(ap, format);
        if (vasprintf(&m, format, ap) < 0)
                m = NULL;
        va_end(ap);
        free(s->message);
        s->message = m;
        s->kind = kind;
        return error < 0 ? error : -EIO;
}

static enum fetch_error_kind disk_or_other(int r) {
        return r == -ENOSPC || r == -EIO || r == -EDQUOT || r == -EROFS || r == -EEXIST || r == -ENOTDIR ||
                               r == -EISDIR || r == -EMLINK
                       ? FETCH_ERROR_DISK
                       : FETCH_ERROR_OTHER;
}

/* A link dest/<entry> -> ..data/<entry>, as atomic-dir makes them. */
static bool is_entry_link(int dfd, const char *name) {
        _cleanup_free_ char *target = NULL;
        return fs_readlinkat_malloc(dfd, name, &target) >= 0 && startswith(target, ATOMIC_DIR_DATA "/");
}

int stage_dest_foreign(const char *dest, char **ret_name) {
        _cleanup_(closedirp) DIR *d = NULL;
        struct dirent *de;
        int r;

        d = opendir(dest);
        if (!d)
                return errno == ENOENT ? 0 : negative_errno();
        while ((r = fs_read_entry(d, &de)) > 0) {
                /* A file system's own lost+found: dest may be the root of a volume of its own. */
                if (startswith(de->d_name, "..") || is_entry_link(dirfd(d), de->d_name) ||
                    streq(de->d_name, "lost+found"))
                        continue;
                if (ret_name) {
                        *ret_name = strdup(de->d_name);
                        if (!*ret_name)
                                return -ENOMEM;
                }
                return 1;
        }
        return r;
}

int stage_check_dest(const char *dest) {
        struct stat st;

        if (stat(dest, &st) < 0)
                return negative_errno();
        if (!S_ISDIR(st.st_mode))
                return -ENOTDIR;
        if (st.st_mode & (S_IWGRP | S_IWOTH))
                return -EPERM;
        return 0;
}

static int prepare_dest(struct stage *s) {
        _cleanup_free_ char *foreign = NULL;
        int r;

        r = stage_check_dest(s->dest);
        if (r == -EPERM)
                return stage_fail(s, FETCH_ERROR_DEST, r,
                                  "dest %s is group- or world-writable: refusing to publish there (chmod go-w %s)",
                                  s->dest, s->dest);
        if (r < 0 && r != -ENOENT)
                return stage_fail(s, FETCH_ERROR_DEST, r, "dest %s: %s", s->dest, strerror(-r));
        r = stage_dest_foreign(s->dest, &foreign);
        if (r > 0)
                return stage_fail(s, FETCH_ERROR_DEST, -EEXIST,
                                  "dest %s holds \"%s\", which pinion did not publish: refusing to publish over it "
                                  "(dest must be missing, empty, or a directory pinion published)",
                                  s->dest, foreign);
        if (r < 0)
                return stage_fail(s, FETCH_ERROR_DEST, r, "dest %s: %s", s->dest, strerror(-r));
        return 0;
}

/* The version directory, opened below dest without following a link (what was just made, not
 * what a swap after the mkdir could put at that name); dest and it get the directory mode
 * before anything is put in it (dest gates everything below it). */
static int open_version(struct stage *s) {
        _cleanup_free_ char *name = NULL;
        int r;

        r = atomic_dir_begin(s->dest, &s->version_dir);
        if (r < 0)
                return stage_fail(s, FETCH_ERROR_DISK, r, "creating a version directory in %s: %s", s->dest,
                                  strerror(-r));
        _cleanup_close_ int destfd = fs_open_directory(s->dest);
        r = destfd < 0 ? destfd : fs_path_split(s->version_dir, NULL, &name);
        if (r >= 0) {
                s->vfd = openat(destfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                r = s->vfd < 0 ? negative_errno() : 0;
        }
        if (r >= 0)
                r = publish_modes_set_fd(destfd, s->modes.dir_mode, s->modes.gid);
        if (r >= 0)
                r = publish_modes_set_fd(s->vfd, s->modes.dir_mode, s->modes.gid);
        if (r < 0)
                return stage_fail(s, FETCH_ERROR_DISK, r, "opening %s: %s%s", s->version_dir, strerror(-r),
                                  publish_modes_error_hint(r));
        return 0;
}

/* Calls fn(vfd, dir, userdata) for each directory of path from its (skip+1)-th on (the first
 * skip exist already), outermost first, with dir relative to vfd; stops at its first error. */
static int for_each_parent(int vfd, const char *path, unsigned skip, int (*fn)(int, const char *, void *),
                           void *userdata) {
        _cleanup_free_ char *p = strdup(path);
        unsigned k = 0;

        if (!p)
                return -ENOMEM;
        for (char *slash = strchr(p, '/'); slash; slash = strchr(slash + 1, '/')) {
                int r;

                if (k++ < skip)
                        continue;
                *slash = 0;
                r = fn(vfd, p, userdata);
                if (r < 0)
                        return r;
                *slash = '/';
        }
        return 0;
}

/* One directory made with the bundle's directory mode and group; never following links (there
 * are none but ours). One that exists already was made so by an earlier file. */
static int make_dir(int vfd, const char *dir, void *userdata) {
        const struct publish_modes *modes = userdata;
        _cleanup_close_ int fd = -EBADF;
        int r = fs_mkdirat_mode(vfd, dir, modes->dir_mode);

        if (r == -EEXIST)
                return 0;
        if (r < 0)
                return r;
        fd = openat(vfd, dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        return fd < 0 ? negative_errno() : publish_modes_set_fd(fd, modes->dir_mode, modes->gid);
}

/* The directories of path from its (skip+1)-th on, each with the bundle's mode and group. */
static int make_parents(int vfd, const char *path, unsigned skip, const struct publish_modes *modes) {
        return for_each_parent(vfd, path, skip, make_dir, (void *) modes);
}

/* Slashes in the common prefix of a and b: the directories they share. */
static unsigned shared_dirs(const char *a, const char *b) {
        unsigned n = 0;
        for (size_t i = 0; a[i] && a[i] == b[i]; i++)
                n += a[i] == '/';
        return n;
}

/* Every directory of the manifest once, in sorted order (a path's directories are made but for
 * those it shares with the path before it). */
static int make_directories(struct stage *s, const atomic_bool *stop) {
        _cleanup_free_ const struct manifest_file **index = NULL;
        const struct manifest *m = s->manifest;
        int r;

        r = manifest_index(m, &index);
        if (r < 0)
                return stage_fail(s, FETCH_ERROR_OTHER, r, "out of memory");
        for (size_t i = 0; i < m->n_files; i++) {
                if (offload_stopped(stop))
                        return -ECANCELED;
                unsigned skip = i > 0 ? shared_dirs(index[i]->path, index[i - 1]->path) : 0;
                r = make_parents(s->vfd, index[i]->path, skip, &s->modes);
                if (r < 0)
                        return stage_fail(s, disk_or_other(r), r, "%s: %s", index[i]->path, strerror(-r));
        }
        return 0;
}

/* sha256 of what fd holds from its start; -EBADMSG if that is not exactly size bytes (it stops
 * reading as soon as there are more). */
static int hash_fd(int fd, uint64_t size, uint8_t ret[32]) {
        _cleanup_free_ uint8_t *buf = malloc(HASH_BUFFER_SIZE);
        EVP_MD_CTX *md = EVP_MD_CTX_new();
        uint64_t total = 0;
        unsigned len = 0;
        int r = 0;

        if (!buf || !md || EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1) {
                EVP_MD_CTX_free(md);
                return -ENOMEM;
        }
        for (;;) {
                ssize_t n = read(fd, buf, HASH_BUFFER_SIZE);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0) {
                        r = negative_errno();
                        break;
                }
                if (n == 0)
                        break;
                total += (uint64_t) n;
                if (total > size) {
                        r = -EFBIG;
                        break;
                }
                if (EVP_DigestUpdate(md, buf, (size_t) n) != 1) {
                        r = -ENOMEM;
                        break;
                }
        }
        if (r >= 0 && (total != size || EVP_DigestFinal_ex(md, ret, &len) != 1 || len != 32))
                r = -EBADMSG;
        EVP_MD_CTX_free(md);
        return r;
}

/* Hard-links an unchanged file from the published version, after checking that its bytes on
 * disk still have the manifest's sha256 (a file changed or damaged in place since it was
 * published is downloaded again, never carried into the new version). 1 if done, 0 if not. */
static int file_reuse(struct stage *s, int curfd, const struct manifest_file *cur, const struct manifest_file *mf) {
        _cleanup_close_ int fd = -EBADF;
        struct stat st, linked;
        uint8_t sha[32];

        if (!manifest_file_same(cur, mf))
                return 0;
        fd = openat(curfd, mf->path, O_RDONLY | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC);
        if (fd < 0 || fstat(fd, &st) < 0) {
                s->files_damaged++;
                return 0;
        }
        if (!S_ISREG(st.st_mode) || (uint64_t) st.st_size != mf->size ||
            publish_modes_matches_fd(fd, publish_modes_file(&s->modes, mf->mode), s->modes.gid) != 1 ||
            hash_fd(fd, mf->size, sha) < 0 || memcmp(sha, mf->sha256, 32) != 0) {
                s->files_damaged++;
                return 0;
        }
        if (linkat(curfd, mf->path, s->vfd, mf->path, 0) < 0)
                return 0;
        /* The name still led to the inode just checked (nothing swapped it meanwhile)? */
        if (fstatat(s->vfd, mf->path, &linked, AT_SYMLINK_NOFOLLOW) < 0 || linked.st_ino != st.st_ino ||
            linked.st_dev != st.st_dev) {
                (void) unlinkat(s->vfd, mf->path, 0);
                return 0;
        }
        return 1;
}

static int reuse_files(struct stage *s, const atomic_bool *stop) {
        _cleanup_free_ const struct manifest_file **index = NULL;
        const struct manifest *m = s->manifest;
        int r;

        if (!s->current || !s->current_dir)
                return 0;
        _cleanup_close_ int destfd = fs_open_directory(s->dest);
        if (destfd < 0)
                return 0;
        _cleanup_close_ int curfd = openat(destfd, s->current_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (curfd < 0)
                return 0; /* nothing to reuse: everything is downloaded */
        r = manifest_index(s->current, &index);
        if (r < 0)
                return stage_fail(s, FETCH_ERROR_OTHER, r, "out of memory");
        for (size_t i = 0; i < m->n_files; i++) {
                if (offload_stopped(stop))
                        return -ECANCELED;
                const struct manifest_file *cur = manifest_index_find(index, s->current->n_files, m->files[i].path);
                if (file_reuse(s, curfd, cur, &m->files[i]) > 0) {
                        s->reused[i] = true;
                        s->files_reused++;
                }
        }
        return 0;
}

int stage_prepare(void *userdata, const atomic_bool *stop) {
        struct stage *s = userdata;
        int r;

        s->reused = calloc(MAX(s->manifest->n_files, (size_t) 1), sizeof(bool));
        if (!s->reused)
                return stage_fail(s, FETCH_ERROR_OTHER, -ENOMEM, "out of memory");
        r = prepare_dest(s);
        if (r >= 0)
                r = open_version(s);
        if (r >= 0)
                r = make_directories(s, stop);
        if (r >= 0)
                r = reuse_files(s, stop);
        return r;
}

static int sync_dir(int vfd, const char *dir, void *userdata) {
        _cleanup_close_ int fd = openat(vfd, dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

        return fd < 0 ? negative_errno() : fs_fsync_fd(fd);
}

/* fsyncs the directories of path from its (skip+1)-th on. */
static int sync_parents(int vfd, const char *path, unsigned skip) {
        return for_each_parent(vfd, path, skip, sync_dir, NULL);
}

/* The version on disk before ..data can point at it: the files the loop wrote (reused ones
 * are links to inodes on disk since their own version), every directory once, the version
 * directory itself. */
static int sync_version(struct stage *s, const atomic_bool *stop) {
        _cleanup_free_ const struct manifest_file **index = NULL;
        const struct manifest *m = s->manifest;
        int r;

        for (size_t i = 0; i < m->n_files; i++) {
                if (offload_stopped(stop))
                        return -ECANCELED;
                if (s->reused && s->reused[i])
                        continue;
                _cleanup_close_ int fd = openat(s->vfd, m->files[i].path, O_RDONLY | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC);
                r = fd < 0 ? negative_errno() : fs_fsync_fd(fd);
                if (r < 0)
                        return stage_fail(s, disk_or_other(r), r, "%s: fsync: %s", m->files[i].path, strerror(-r));
        }
        r = manifest_index(m, &index);
        if (r < 0)
                return stage_fail(s, FETCH_ERROR_OTHER, r, "out of memory");
        for (size_t i = 0; i < m->n_files; i++) {
                if (offload_stopped(stop))
                        return -ECANCELED;
                r = sync_parents(s->vfd, index[i]->path, i > 0 ? shared_dirs(index[i]->path, index[i - 1]->path) : 0);
                if (r < 0)
                        return stage_fail(s, disk_or_other(r), r, "%s: fsync: %s", index[i]->path, strerror(-r));
        }
        r = fs_fsync_fd(s->vfd);
        if (r < 0)
                return stage_fail(s, disk_or_other(r), r, "%s: fsync: %s", s->version_dir, strerror(-r));
        return 0;
}

int stage_publish(void *userdata, const atomic_bool *stop) {
        struct stage *s = userdata;
        _cleanup_free_ char *name = NULL, *current = NULL;
        usec_t t0 = now_usec(CLOCK_MONOTONIC);
        int r, q;

        r = fs_path_split(s->version_dir, NULL, &name);
        if (r < 0)
                return stage_fail(s, FETCH_ERROR_OTHER, r, "publishing: %s", strerror(-r));
        r = sync_version(s, stop);
        if (r < 0)
                return r;
        s->vfd = safe_close(s->vfd);
        /* Synced above: the commit only swaps, links and prunes; one fsync of dest then makes
         * the swap and the links durable together. */
        r = atomic_dir_commit_flags(s->dest, s->version_dir, s->keep_versions, ATOMIC_DIR_SYNCED);
        q = fs_fsync_path(s->dest);
        s->publish_usec = now_usec(CLOCK_MONOTONIC) - t0;
        /* Once ..data points at it, the directory is no longer ours to remove; only the tidying
         * after the swap may have failed, which the next commit or the cleanup at start finish. */
        if (atomic_dir_current(s->dest, &current) >= 0 && streq(current, name)) {
                s->published_name = TAKE_PTR(name);
                s->version_dir = mfree(s->version_dir);
                return 0;
        }
        if (r >= 0)
                r = q < 0 ? q : -EIO;
        return stage_fail(s, FETCH_ERROR_DISK, r, "publishing in %s: %s", s->dest, strerror(-r));
}

int stage_remove(void *userdata, const atomic_bool *stop) {
        struct stage *s = userdata;
        int r = 0;

        s->vfd = safe_close(s->vfd);
        if (s->version_dir) {
                r = fs_rm_rf(s->version_dir);
                s->version_dir = mfree(s->version_dir);
        }
        return r;
}
