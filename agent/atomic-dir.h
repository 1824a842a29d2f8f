/* SPDX-License-Identifier: MIT */
#pragma once

/* The atomic directory ("..data" swap, as Kubernetes' AtomicWriter lays out a volume):
 *   dest/..2026_11_21_10_42_04.123456789/   one directory per version, files inside
 *   dest/..data -> ..2026_11_21_10_42_04.123456789
 *   dest/<top-level entry> -> ..data/<top-level entry>
 * atomic_dir_begin() makes a fresh version directory to fill; atomic_dir_commit() fsyncs it,
 * points ..data at it with symlink(..data_tmp) + rename(), fixes the top-level links and prunes
 * old versions. Readers that open paths through the links see one version or the other.
 * Built on fsutil.h. */

#define ATOMIC_DIR_DATA "..data"

/* Creates dest (mode 0755) if needed and a new empty version directory inside it;
 * *ret_version_dir is its full path. */
int atomic_dir_begin(const char *dest, char **ret_version_dir);
/* Publishes version_dir (made by atomic_dir_begin and filled by the caller), keeping at most
 * keep_versions older versions (0 keeps none but the current one). */
int atomic_dir_commit(const char *dest, const char *version_dir, unsigned keep_versions);
/* The same for many directories at once, each fsync replaced by the caller's syncfs(): with
 * ATOMIC_DIR_SYNCED the version must already be on disk (a syncfs() after writing the versions
 * of a batch, before committing any), and the swap is not synced (one syncfs() after the batch).
 * A crash still leaves each dest at its old version or its new one, whole. */
#define ATOMIC_DIR_SYNCED 1u
int atomic_dir_commit_flags(const char *dest, const char *version_dir, unsigned keep_versions, unsigned flags);
/* The version directory name ..data points at ("..2026_..."), or -ENOENT if none. */
int atomic_dir_current(const char *dest, char **ret_version_name);
/* Removes leftovers of an interrupted begin/commit: version directories ..data does not point at
 * that are newer than the current one, and a stale ..data_tmp. Older versions are kept (they are
 * the history keep_versions counts). Returns the number removed. */
int atomic_dir_cleanup(const char *dest);
