/* SPDX-License-Identifier: MIT */
#pragma once

/* Crash-safe file updates and the file-system building blocks. Everything under state-dir goes
 * through here (whole directories through atomic-dir.h, which is built on these).
 *
 * fs_write_file_atomic(): temp file in the same directory → mode and ACL → write → fsync →
 * rename over the target → fsync(directory). A kill -9 at any instant leaves the old or the new
 * content, never a mix; a leftover temp file (".#<name>.XXXXXX") is harmless and removed by
 * fs_cleanup_temp(). */

#include <dirent.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "macro.h"

/* The file is the caller's; uid and gid, unless (uid_t)-1 / (gid_t)-1, are a user and a group
 * granted mode's group bits (fs_acl_grant_fd()). */
int fs_write_file_atomic(const char *path, const void *data, size_t size, mode_t mode, uid_t uid, gid_t gid);
/* The same, telling the two kinds of failure apart: *ret_renamed false, nothing changed;
 * *ret_renamed true, the new content is in place for every reader and only the directory's fsync
 * failed (the rename may not survive a power loss). A caller that must not roll back what is
 * already visible uses this. */
int fs_write_file_atomic_full(const char *path, const void *data, size_t size, mode_t mode, uid_t uid, gid_t gid,
                           bool *ret_renamed);
/* Reads a whole file, at most max_size bytes (-EFBIG if larger); adds a NUL after the data. */
/* Writes all of data to fd (retrying short writes and EINTR). */
int fs_write_all(int fd, const void *data, size_t size);
int fs_read_file_full(const char *path, size_t max_size, char **ret_data, size_t *ret_size);
/* mkdirat() giving the new directory exactly mode, whatever the umask (under piniond.service's
 * UMask=0077 a plain mkdir would make 0700 of the directories pods traverse); -EEXIST if the
 * path exists. */
int fs_mkdirat_mode(int dfd, const char *path, mode_t mode);
/* mkdir -p with exactly mode for the directories it creates (existing ones keep theirs). */
int fs_mkdir_p(const char *path, mode_t mode);
/* rm -rf of a path (no following of symlinks); -ENOENT is success. */
int fs_rm_rf(const char *path);
int fs_fsync_directory_of(const char *path); /* fsync the directory containing path */
int fs_fsync_path(const char *path);         /* open(O_RDONLY) + fsync, for files and dirs */
/* Removes ".#*" temp files left in dir by an interrupted fs_write_file_atomic(). Returns count. */
int fs_cleanup_temp(const char *dir);

/* ---- building blocks (atomic-dir.c uses them too) ---- */

/* Splits path into its directory and last component, ignoring trailing slashes. Either output
 * may be NULL. */
int fs_path_split(const char *path, char **ret_dir, char **ret_base);
char *fs_path_join(const char *a, const char *b); /* a + "/" + b (one slash); NULL on OOM */
int fs_fsync_fd(int fd);                          /* 0 or negative errno */
int fs_open_directory(const char *path);          /* O_RDONLY|O_DIRECTORY fd or negative errno */
/* A fresh DIR stream for dir_fd/name (not following a symlink); the caller's dir_fd stays open
 * and unmoved. NULL with errno set on failure. */
DIR *fs_opendir_at(int dir_fd, const char *name);
/* Next entry other than "." and "..": 1 with *ret set, 0 at the end, negative errno. */
int fs_read_entry(DIR *d, struct dirent **ret);
/* readlinkat() into a malloc'ed, NUL-terminated string. */
int fs_readlinkat_malloc(int dir_fd, const char *name, char **ret);
/* Removes dir_fd/name and everything below it; symlinks are removed, never followed. Keeps
 * going after an error and returns the first one. */
int fs_rm_rf_at(int dir_fd, const char *name);
