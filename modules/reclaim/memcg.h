/* SPDX-License-Identifier: MIT */
#pragma once

/* memcg: one memory cgroup, v1 (legacy) or v2 (unified), read and acted on through its files
 * under the memory hierarchy's mount point (found in /proc/self/mountinfo). Library-like: no
 * logging, negative errno, outputs through ret_ parameters.
 *
 * Values (limit, usage, file/anon split, failures, peak) are one-line or "key value" files;
 * writes are one write() each, so the kernel's refusal is the call's error. Beside values:
 * eventfd registration on cgroup.event_control (v1 thresholds and pressure levels), the PSI
 * trigger on memory.pressure (v2: it lives as long as the fd that wrote it), and memory.reclaim
 * (v2: an action whose EAGAIN must be seen as such). */

#include <stdbool.h>
#include <stdint.h>

#include "macro.h"

enum memcg_version {
        MEMCG_V1 = 1,
        MEMCG_V2 = 2,
};

struct memcg {
        enum memcg_version version;
        char *path; /* relative to the memory hierarchy, "/" + ... */
        char *dir;  /* absolute directory */
};

struct memcg_sample {
        uint64_t limit;   /* memory.limit_in_bytes / memory.max; UINT64_MAX if unlimited */
        uint64_t usage;   /* memory.usage_in_bytes / memory.current */
        uint64_t file;    /* reclaimable page cache: active_file + inactive_file */
        uint64_t anon;    /* usage - file: anonymous, shmem, kernel memory */
        uint64_t peak;    /* memory.max_usage_in_bytes / memory.peak (0 if the kernel lacks it) */
        uint64_t failcnt; /* memory.failcnt / memory.events max */
        uint64_t cap;     /* what the agent lowers (memcg_read_cap): v1 the limit, v2 memory.high */
};

/* Finds the memory hierarchy (the cgroup mount that holds the memory controller): its mount
 * point and whether it is v1 or v2. -ENOENT if no hierarchy has the memory controller. */
int memcg_hierarchy(enum memcg_version *ret_version, char **ret_mount);

/* Normalises a cgroup path ("/a/b", no "..", no trailing slash); -EINVAL if it cannot be one. */
int memcg_path_normalize(const char *path, char **ret);

/* Opens the cgroup at path (relative to the memory hierarchy). -ENOENT if it does not exist. */
int memcg_open(const char *path, struct memcg **ret);
struct memcg *memcg_free(struct memcg *g);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct memcg *, memcg_free);

bool memcg_exists(const struct memcg *g);
/* The inode of the cgroup's directory: a cgroup removed and made again at the same path has
 * another one (its event registrations died with the old one). */
int memcg_inode(const struct memcg *g, uint64_t *ret);
int memcg_read(const struct memcg *g, struct memcg_sample *ret);
/* Reads just the failures: v1 memory.failcnt, v2 the max line of memory.events. */
int memcg_read_failcnt(const struct memcg *g, uint64_t *ret);
/* Reads just the limit (cheaper than memcg_read). */
/* The kernel's page size (a limit written is kept rounded down to it). */
uint64_t memcg_page_size(void);
int memcg_read_limit(const struct memcg *g, uint64_t *ret);

/* The value the agent lowers to make the kernel reclaim, one file per version: v1
 * memory.limit_in_bytes (a hard limit: the kernel reclaims down to it before a write takes
 * effect, and a charge it cannot make room for below it fails), v2 memory.high (a throttle: a
 * task charging over it reclaims in its own context before it returns to user space; never an
 * OOM). UINT64_MAX: none ("max"). */
int memcg_read_cap(const struct memcg *g, uint64_t *ret);
int memcg_write_cap(const struct memcg *g, uint64_t value);
/* The name of that file, for messages. */
const char *memcg_cap_name(enum memcg_version v);

/* v1: writes memory.limit_in_bytes. The kernel reclaims synchronously down
 * to the new limit before the write returns; -EBUSY if it could not. */
int memcg_set_limit(const struct memcg *g, uint64_t limit);
/* v2: asks the kernel to reclaim `bytes` (memory.reclaim). -EAGAIN if it reclaimed less. */
int memcg_reclaim(const struct memcg *g, uint64_t bytes);

/* v1: an eventfd signalled when memory.usage_in_bytes crosses threshold (either way). */
int memcg_v1_threshold_fd(const struct memcg *g, uint64_t threshold, int *ret_fd);
/* v1: an eventfd signalled on memory pressure at level ("low", "medium", "critical"). */
int memcg_v1_pressure_fd(const struct memcg *g, const char *level, int *ret_fd);
/* v2: a PSI trigger on memory.pressure ("some 150000 1000000"): poll the fd for POLLPRI. */
int memcg_v2_psi_fd(const struct memcg *g, const char *trigger, int *ret_fd);
/* v2: the memory.events file, for inotify (the kernel signals IN_MODIFY on changes). */
char *memcg_file(const struct memcg *g, const char *name);

/* The memory cgroup of the pod with this uid: a directory named pod<uid> (kubelet cgroupfs
 * driver) or ending in pod<uid with '_' for '-'>.slice (systemd driver), at most depth levels
 * below the root. -ENOENT if none. */
int memcg_find_pod(const char *uid, unsigned depth, char **ret_path);
/* True if name is a pod cgroup directory name for uid (both spellings). */
bool memcg_is_pod_dir(const char *name, const char *uid);
