/* SPDX-License-Identifier: MIT */
#pragma once

/* The atomic directory ("..data" swap, as Kubernetes' AtomicWriter lays out a volume):
 *   dest/..2026_11_21_10_42_04.123456789/   one directory per version, files inside
 *   dest/..data -> ..2026_11_21_10_42_04.123456789
 *   dest/<top-level entry> -> ..data/<top-level entry>
 * atomic_dir_begin() makes a fresh version directory to fill; atomic_dir_commit() fsyncs it,
 * points ..data at it with symlink(..data_tmp) + rename(), fixes the top-level links and prunes
 * old versions. Readers that open paths through the links see one version or the other.
 * A directory that does not exist yet is cheaper made whole: atomic_dir_stage_new() builds it
 * (version, ..data, links) under a staging name beside it and atomic_dir_publish_new() renames
 * it into place, so it appears complete or not at all.
 * Built on fs.h. */

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

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

/* A file of a version, written with O_EXCL at mode (the umask notwithstanding). */
struct atomic_dir_file {
        const char *name; /* no "/" and not starting with ".." */
        const void *data;
        size_t size;
        mode_t mode;
};
/* Writes files into dir_fd (a version directory), owned by their creator. */
int atomic_dir_write_files(int dir_fd, const struct atomic_dir_file *files, size_t n);

/* Staged directories are named ATOMIC_DIR_STAGED_PREFIX<serial>-<name> in the parent of <name>:
 * the serial tells apart stagings of one name that may be in flight at once (two requests for
 * the same directory, the older one to be dropped). */
#define ATOMIC_DIR_STAGED_PREFIX "..new-"
/* Builds parent_fd/<name> whole under its staging name: one version holding files, ..data and
 * the top-level links; a leftover staging directory of the same name and serial is replaced.
 * Nothing is synced: the caller syncs (syncfs()) before atomic_dir_publish_new(). Needs nothing
 * but parent_fd: another thread may stage while the owner of <name> goes on. */
int atomic_dir_stage_new(int parent_fd, const char *name, unsigned serial, const struct atomic_dir_file *files,
                         size_t n);
/* Renames the staged directory to <name> in one step that replaces nothing. If <name> exists
 * (made meanwhile, or the file system cannot refuse to replace), its version moves into
 * <name> and is committed there with every fsync, and the staging directory goes. The rename is
 * not synced: the caller syncs after a batch. */
int atomic_dir_publish_new(int parent_fd, const char *name, unsigned serial);
/* Removes the staging directory of <name> and serial, if any. */
int atomic_dir_drop_staged(int parent_fd, const char *name, unsigned serial);
/* Removes the staging directories in parent_fd (what a kill between stage and publish leaves)
 * but those keep() says are still to be published (keep NULL: all go). Returns the number
 * removed. */
typedef bool (*atomic_dir_keep_fn)(const char *name, unsigned serial, void *userdata);
int atomic_dir_sweep_staged(int parent_fd, atomic_dir_keep_fn keep, void *userdata);
