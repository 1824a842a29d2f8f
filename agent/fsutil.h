/* SPDX-License-Identifier: MIT */
#pragma once

/* Crash-safe file and directory updates. Everything under state-dir goes through here.
 *
 * write_file_atomic(): temp file in the same directory → write → fchmod/fchown → fsync →
 * rename over the target → fsync(directory). A kill -9 at any instant leaves the old or the new
 * content, never a mix; a leftover temp file (".#<name>.XXXXXX") is harmless and removed by
 * fsutil_cleanup_temp().
 *
 * The atomic directory ("..data" swap, as Kubernetes' AtomicWriter lays out a volume):
 *   dest/..2026_11_21_10_42_04.123456789/   one directory per version, files inside
 *   dest/..data -> ..2026_11_21_10_42_04.123456789
 *   dest/<top-level entry> -> ..data/<top-level entry>
 * atomic_dir_begin() makes a fresh version directory to fill; atomic_dir_commit() fsyncs it,
 * points ..data at it with symlink(..data_tmp) + rename(), fixes the top-level links and prunes
 * old versions. Readers that open paths through the links see one version or the other. */

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "macro.h"

#define ATOMIC_DIR_DATA "..data"

/* uid/gid (uid_t)-1 / (gid_t)-1 keep the current owner. */
int write_file_atomic(const char *path, const void *data, size_t size, mode_t mode, uid_t uid, gid_t gid);
/* Reads a whole file, at most max_size bytes (-EFBIG if larger); adds a NUL after the data. */
int read_file_full(const char *path, size_t max_size, char **ret_data, size_t *ret_size);
/* mkdir -p with mode for the directories it creates. */
int mkdir_p(const char *path, mode_t mode);
/* rm -rf of a path (no following of symlinks); -ENOENT is success. */
int rm_rf(const char *path);
int fsync_directory_of(const char *path); /* fsync the directory containing path */
int fsync_path(const char *path);         /* open(O_RDONLY) + fsync, for files and dirs */
/* Removes ".#*" temp files left in dir by an interrupted write_file_atomic(). Returns count. */
int fsutil_cleanup_temp(const char *dir);

/* Creates dest (mode 0755) if needed and a new empty version directory inside it;
 * *ret_version_dir is its full path. */
int atomic_dir_begin(const char *dest, char **ret_version_dir);
/* Publishes version_dir (made by atomic_dir_begin and filled by the caller), keeping at most
 * keep_versions older versions (0 keeps none but the current one). */
int atomic_dir_commit(const char *dest, const char *version_dir, unsigned keep_versions);
/* The version directory name ..data points at ("..2026_..."), or -ENOENT if none. */
int atomic_dir_current(const char *dest, char **ret_version_name);
/* Removes leftovers of an interrupted begin/commit: version directories ..data does not point at
 * that are newer than the current one, and a stale ..data_tmp. Older versions are kept (they are
 * the history keep_versions counts). Returns the number removed. */
int atomic_dir_cleanup(const char *dest);
