/* SPDX-License-Identifier: MIT */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs-acl.h"
#include "fs.h"
#include "publish-modes.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(DIR *, closedir);

void publish_modes_init(struct publish_modes *m, gid_t gid, bool world_readable) {
        bool group = gid != (gid_t) -1;
        mode_t read_x = (group ? 0050 : 0) | (world_readable ? 0005 : 0);

        *m = (struct publish_modes) {
                .file_mask = (0700 | read_x) & PUBLISH_MODE_MAX,
                .dir_mode = 0700 | read_x,
                .gid = group ? gid : 0,
        };
}

mode_t publish_modes_file(const struct publish_modes *m, mode_t declared) {
        return declared & m->file_mask;
}

bool publish_modes_equal(const struct publish_modes *a, const struct publish_modes *b) {
        return a->file_mask == b->file_mask && a->dir_mode == b->dir_mode && a->gid == b->gid;
}

bool publish_mode_capped(mode_t declared) {
        return (declared & ~(mode_t) PUBLISH_MODE_MAX) != 0;
}

const char *publish_modes_error_hint(int r) {
        return r == -EOPNOTSUPP ? " (group= needs a file system with POSIX ACLs under dest)" : "";
}

/* The group is let in with an ACL entry, the file staying root's (fs-acl.h). */
int publish_modes_matches_fd(int fd, mode_t mode, gid_t gid) {
        return fs_acl_matches_fd(fd, mode, (uid_t) -1, gid);
}

int publish_modes_set_fd(int fd, mode_t mode, gid_t gid) {
        int r = publish_modes_matches_fd(fd, mode, gid);
        if (r < 0)
                return r;
        return r > 0 ? 0 : fs_acl_grant_fd(fd, mode, (uid_t) -1, gid);
}

static int apply_at(int dir_fd, const char *name, const struct publish_modes *m);

static int apply_dir(int fd, const struct publish_modes *m) {
        _cleanup_(closedirp) DIR *d = NULL;
        struct dirent *de;
        int r, first = 0;

        /* Closed to others first: nothing below is reachable by them while it is fixed. */
        first = publish_modes_set_fd(fd, m->dir_mode, m->gid);
        d = fs_opendir_at(fd, ".");
        if (!d)
                return first < 0 ? first : negative_errno();
        while ((r = fs_read_entry(d, &de)) > 0) {
                int q = apply_at(dirfd(d), de->d_name, m);
                if (q < 0 && first == 0)
                        first = q;
        }
        return r < 0 && first == 0 ? r : first;
}

static int apply_at(int dir_fd, const char *name, const struct publish_modes *m) {
        _cleanup_close_ int fd = -EBADF;
        struct stat st;

        if (fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return errno == ENOENT ? 0 : negative_errno();
        if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode))
                return 0;
        fd = openat(dir_fd, name, O_RDONLY | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC | (S_ISDIR(st.st_mode) ? O_DIRECTORY : 0));
        if (fd < 0)
                return errno == ENOENT ? 0 : negative_errno();
        if (fstat(fd, &st) < 0)
                return negative_errno();
        if (S_ISDIR(st.st_mode))
                return apply_dir(fd, m);
        return publish_modes_set_fd(fd, (st.st_mode & 07777) & m->file_mask, m->gid);
}

int publish_modes_apply_tree(const char *dest, const struct publish_modes *m) {
        _cleanup_close_ int fd = fs_open_directory(dest);
        struct stat st;

        if (fd < 0)
                return fd;
        if (fstat(fd, &st) < 0)
                return negative_errno();
        /* Others could have put anything in it: not ours to adopt (syncs refuse it too). */
        if (st.st_mode & (S_IWGRP | S_IWOTH))
                return -EPERM;
        return apply_dir(fd, m);
}
