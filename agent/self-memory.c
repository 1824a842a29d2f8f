/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <malloc.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "log.h"
#include "macro.h"
#include "metrics.h"
#include "self-memory.h"

#ifndef MADV_PAGEOUT
#define MADV_PAGEOUT 21
#endif

/* After a burst (a relist of every pod, a ZooKeeper reconnect, a bundle swap) the live heap is
 * back to its size but glibc would keep the burst's pages for good (the soak under massif: 1.6-4
 * MB live, against 16 MB of [heap] RSS natively after 40,000 changes with restarts of every
 * server). A fixed mmap threshold keeps large buffers out of the heap (glibc otherwise raises it
 * after every large free, up to 32 MB). */
#define HEAP_TRIM_INTERVAL (10 * USEC_PER_SEC)
#define HEAP_MMAP_THRESHOLD (128 * 1024)
/* One arena for every thread: the worker threads' allocations that outlive them in the loop
 * (identity's issue worker makes each workload's key and certificate PEM) would otherwise fill a
 * thread arena of their own, half-used pages beside the main heap's (200 KiB of RssAnon with
 * 1,000 identity pods); the threads are few and rarely allocate at once. */
#define HEAP_ARENAS 1

static int on_heap_trim(sd_event_source *s, uint64_t usec, void *userdata) {
        (void) malloc_trim(0);
        return sd_event_source_set_time_relative(s, HEAP_TRIM_INTERVAL);
}

int self_memory_setup_heap(sd_event *e, sd_event_source **ret_timer) {
        (void) mallopt(M_MMAP_THRESHOLD, HEAP_MMAP_THRESHOLD);
        (void) mallopt(M_ARENA_MAX, HEAP_ARENAS);
        int r = sd_event_add_time_relative(e, ret_timer, CLOCK_MONOTONIC, HEAP_TRIM_INTERVAL, USEC_PER_SEC,
                                           on_heap_trim, NULL);
        if (r < 0)
                return r;
        return sd_event_source_set_enabled(*ret_timer, SD_EVENT_ON);
}

static uint64_t resident_file_bytes(void) {
        _cleanup_fclose_ FILE *f = fopen("/proc/self/statm", "re");
        unsigned long size, resident, shared;

        if (!f || fscanf(f, "%lu %lu %lu", &size, &resident, &shared) != 3)
                return 0;
        return (uint64_t) shared * (uint64_t) sysconf(_SC_PAGESIZE);
}

/* A /proc/self/maps line names a mapping to give back: private, not writable (a written page
 * is anonymous memory, which would go to swap), backed by a file with a path. */
static bool parse_releasable(const char *line, uintptr_t *ret_start, uintptr_t *ret_end) {
        uintptr_t start, end;
        char perms[5];
        unsigned long long inode;
        int path_at = 0;

        if (sscanf(line, "%" SCNxPTR "-%" SCNxPTR " %4s %*s %*s %llu %n", &start, &end, perms, &inode, &path_at) < 4)
                return false;
        if (inode == 0 || path_at == 0 || line[path_at] != '/')
                return false;
        if (perms[0] != 'r' || perms[1] != '-' || perms[3] != 'p')
                return false;
        *ret_start = start;
        *ret_end = end;
        return true;
}

int self_memory_release_file_pages(struct page_release *ret) {
        _cleanup_fclose_ FILE *f = fopen("/proc/self/maps", "re");
        _cleanup_free_ char *line = NULL;
        size_t cap = 0;
        struct page_release res = { .resident_before = resident_file_bytes() };
        unsigned unsupported = 0;

        if (!f)
                return -errno;
        while (getline(&line, &cap, f) > 0) {
                uintptr_t start, end;
                if (!parse_releasable(line, &start, &end))
                        continue;
                /* Random first: a page read back after the pageout comes alone, not with a
                 * readahead window that would bring its paged-out neighbours back too. */
                (void) madvise((void *) start, end - start, MADV_RANDOM);
                if (madvise((void *) start, end - start, MADV_PAGEOUT) < 0) {
                        unsupported += errno == EINVAL;
                        continue;
                }
                res.mappings++;
        }
        if (res.mappings == 0 && unsupported > 0)
                return -EOPNOTSUPP;
        res.resident_after = resident_file_bytes();
        *ret = res;
        return 0;
}

static void release_startup_pages(struct metric_family *released_bytes, const char *when) {
        struct page_release pr;
        usec_t start = now_usec(CLOCK_MONOTONIC);
        int r = self_memory_release_file_pages(&pr);
        if (r == -EOPNOTSUPP) {
                log_info("Start-up pages stay resident: the kernel has no MADV_PAGEOUT (Linux < 5.4)");
                return;
        }
        if (r < 0) {
                log_info_errno(r, "Start-up pages stay resident: cannot read /proc/self/maps: %m");
                return;
        }
        uint64_t released = pr.resident_before > pr.resident_after ? pr.resident_before - pr.resident_after : 0;
        (void) metric_add(released_bytes, (double) released);
        log_info("Released %" PRIu64 " KiB of start-up file pages %s (%u mappings, %.1f ms): %" PRIu64 " KiB of "
                 "library and program pages stay resident",
                 released / 1024, when, pr.mappings, (double) (now_usec(CLOCK_MONOTONIC) - start) / USEC_PER_MSEC,
                 pr.resident_after / 1024);
}

/* READY brings its own one-time work: the first clients connect (the kubelet's plugin
 * registration, runtimes' CNI calls, status probes), the first watch events and pings arrive.
 * A second pass after it gives back what only that touched (400-500 KiB with every module in
 * the memory benchmark). */
#define AFTER_READY_SETTLE (2 * USEC_PER_SEC)

static int on_settled(sd_event_source *s, uint64_t usec, void *userdata) {
        release_startup_pages(userdata, "once settled");
        return 0;
}

int self_memory_release_startup_pages(sd_event *e, struct metric_family *released_bytes,
                                      sd_event_source **ret_timer) {
        release_startup_pages(released_bytes, "at READY");
        int r = sd_event_add_time_relative(e, ret_timer, CLOCK_MONOTONIC, AFTER_READY_SETTLE, 100 * USEC_PER_MSEC,
                                           on_settled, released_bytes);
        if (r < 0)
                return r;
        (void) sd_event_source_set_description(*ret_timer, "release-settled-pages");
        return 0;
}

/* ---- the memory guard ---- */

#define GUARD_SAMPLE_INTERVAL (10 * USEC_PER_SEC)
#define GUARD_HYSTERESIS 5 /* percent points below the watermark before work is admitted again */
#define UNLIMITED_FROM (UINT64_C(1) << 60) /* v1 writes "no limit" as PAGE_COUNTER_MAX pages */

struct memory_guard {
        char *dir;          /* the cgroup's directory; NULL: no limit to guard */
        bool v2;
        unsigned watermark; /* percent of the limit */
        bool shedding;
        uint64_t limit, in_use;
        sd_event_source *timer;
        struct metric_family *m_refused, *m_in_use, *m_limit;
};

static int read_u64(const char *dir, const char *name, uint64_t *ret) {
        char path[PATH_MAX], buf[64];
        _cleanup_fclose_ FILE *f = NULL;

        if (snprintf(path, sizeof(path), "%s/%s", dir, name) >= (int) sizeof(path))
                return -ENAMETOOLONG;
        f = fopen(path, "re");
        if (!f)
                return -errno;
        if (!fgets(buf, sizeof(buf), f))
                return -EIO;
        if (strncmp(buf, "max", 3) == 0) {
                *ret = UINT64_MAX;
                return 0;
        }
        return sscanf(buf, "%" SCNu64, ret) == 1 ? 0 : -EINVAL;
}

/* What memory.stat says about page cache, in v1's hierarchical keys or v2's. */
struct memory_stat {
        uint64_t limit;  /* v1: hierarchical_memory_limit; UINT64_MAX if absent */
        uint64_t file;   /* page cache, shmem included */
        uint64_t mapped; /* page cache mapped by the cgroup's processes */
        uint64_t shmem;  /* in file, but never dropped (no swap) */
};

static int read_stat(const char *dir, bool v2, struct memory_stat *ret) {
        char path[PATH_MAX], name[64];
        unsigned long long v;
        _cleanup_fclose_ FILE *f = NULL;
        struct memory_stat st = { .limit = UINT64_MAX };

        if (snprintf(path, sizeof(path), "%s/memory.stat", dir) >= (int) sizeof(path))
                return -ENAMETOOLONG;
        f = fopen(path, "re");
        if (!f)
                return -errno;
        while (fscanf(f, "%63s %llu", name, &v) == 2) {
                if (strcmp(name, "hierarchical_memory_limit") == 0)
                        st.limit = v;
                else if (strcmp(name, v2 ? "file" : "total_cache") == 0)
                        st.file = v;
                else if (strcmp(name, v2 ? "file_mapped" : "total_mapped_file") == 0)
                        st.mapped = v;
                else if (strcmp(name, v2 ? "shmem" : "total_shmem") == 0)
                        st.shmem = v;
        }
        *ret = st;
        return 0;
}

/* The directory of this process's memory cgroup: the v1 memory hierarchy's line of
 * /proc/self/cgroup, else the v2 one. In a container without a cgroup namespace the path
 * names the host's hierarchy while the container sees its own cgroup at the mount point. */
static int find_cgroup(char **ret_dir, bool *ret_v2) {
        _cleanup_fclose_ FILE *f = fopen("/proc/self/cgroup", "re");
        _cleanup_free_ char *line = NULL, *v2_path = NULL;
        size_t cap = 0;

        if (!f)
                return -errno;
        while (getline(&line, &cap, f) > 0) {
                line[strcspn(line, "\n")] = 0;
                char *controllers = strchr(line, ':');
                char *path = controllers ? strchr(controllers + 1, ':') : NULL;
                if (!path)
                        continue;
                *path++ = 0;
                controllers++;
                const char *mount = NULL;
                if (*controllers == 0)
                        v2_path = strdup(path);
                else {
                        for (char *c = controllers, *save = NULL; (c = strtok_r(c, ",", &save)); c = NULL)
                                if (strcmp(c, "memory") == 0)
                                        mount = "/sys/fs/cgroup/memory";
                }
                if (!mount)
                        continue;
                char *dir;
                if (asprintf(&dir, "%s%s", mount, strcmp(path, "/") == 0 ? "" : path) < 0)
                        return -ENOMEM;
                if (access(dir, F_OK) < 0) {
                        free(dir);
                        dir = strdup(mount);
                        if (!dir)
                                return -ENOMEM;
                }
                *ret_dir = dir;
                *ret_v2 = false;
                return 0;
        }
        if (!v2_path)
                return -ENOENT;
        char *dir;
        if (asprintf(&dir, "/sys/fs/cgroup%s", strcmp(v2_path, "/") == 0 ? "" : v2_path) < 0)
                return -ENOMEM;
        if (access(dir, F_OK) < 0) {
                free(dir);
                if (!(dir = strdup("/sys/fs/cgroup")))
                        return -ENOMEM;
        }
        *ret_dir = dir;
        *ret_v2 = true;
        return 0;
}

/* Reads limit and what is in use; -ENOENT when there is no limit. v1's hierarchical limit
 * covers a parent's smaller one (a pod's limit above its container's); in v2 only the agent's
 * own cgroup's memory.max and memory.high count. */
static int guard_sample(struct memory_guard *g) {
        uint64_t limit, usage, high;
        struct memory_stat st = { .limit = UINT64_MAX };
        int r;

        r = read_u64(g->dir, g->v2 ? "memory.max" : "memory.limit_in_bytes", &limit);
        if (r < 0)
                return r;
        (void) read_stat(g->dir, g->v2, &st);
        limit = MIN(limit, st.limit);
        /* v2's memory.high (the unit's MemoryHigh=) is where the kernel starts throttling: the
         * limit the agent should stay under. */
        if (g->v2 && read_u64(g->dir, "memory.high", &high) >= 0)
                limit = MIN(limit, high);
        if (limit == 0 || limit >= UNLIMITED_FROM)
                return -ENOENT;
        r = read_u64(g->dir, g->v2 ? "memory.current" : "memory.usage_in_bytes", &usage);
        if (r < 0)
                return r;
        /* Page cache the kernel drops before it kills anything does not count; what the agent
         * has mapped (its program and libraries) and shmem do. */
        uint64_t droppable = st.file > st.mapped + st.shmem ? st.file - st.mapped - st.shmem : 0;
        g->limit = limit;
        g->in_use = usage > droppable ? usage - droppable : 0;
        (void) metric_set(g->m_limit, (double) limit);
        (void) metric_set(g->m_in_use, (double) g->in_use);
        return 0;
}

static unsigned guard_low(const struct memory_guard *g) {
        return g->watermark > GUARD_HYSTERESIS ? g->watermark - GUARD_HYSTERESIS : 0;
}

static void guard_update(struct memory_guard *g, const char *work) {
        if (guard_sample(g) < 0) {
                g->shedding = false;
                return;
        }
        unsigned percent = (unsigned) (g->in_use * 100 / g->limit);
        if (!g->shedding && percent >= g->watermark) {
                g->shedding = true;
                log_warning("Memory: %.1f MiB in use is %u%% of the limit %.1f MiB (watermark %u%%): refusing "
                            "new work%s%s%s until it is below %u%%",
                            (double) g->in_use / (1 << 20), percent, (double) g->limit / (1 << 20), g->watermark,
                            work ? " (" : "", strempty(work), work ? ")" : "", guard_low(g));
        } else if (g->shedding && percent < guard_low(g)) {
                g->shedding = false;
                log_info("Memory: %.1f MiB in use is %u%% of the limit %.1f MiB: taking new work again",
                         (double) g->in_use / (1 << 20), percent, (double) g->limit / (1 << 20));
        }
}

/* Without a caller (nothing asked for work) the gauges and the way back below the watermark
 * still follow the cgroup. */
static int on_guard_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        guard_update(userdata, NULL);
        return sd_event_source_set_time_relative(s, GUARD_SAMPLE_INTERVAL);
}

int self_memory_guard_admit(struct memory_guard *g, const char *work, char **ret_reason) {
        if (!g || !g->dir || g->watermark >= 100)
                return 0;
        guard_update(g, work);
        if (!g->shedding)
                return 0;
        (void) metric_inc(g->m_refused, work);
        if (ret_reason &&
            asprintf(ret_reason, "%.1f MiB in use of the limit %.1f MiB; new work is refused above %u%% "
                     "until it is below %u%%; try again later",
                     (double) g->in_use / (1 << 20), (double) g->limit / (1 << 20), g->watermark, guard_low(g)) < 0)
                *ret_reason = NULL;
        return -ENOMEM;
}

void self_memory_guard_set_watermark(struct memory_guard *g, unsigned watermark) {
        if (g)
                g->watermark = watermark;
}

struct memory_guard *self_memory_guard_free(struct memory_guard *g) {
        if (!g)
                return NULL;
        sd_event_source_disable_unref(g->timer);
        free(g->dir);
        free(g);
        return NULL;
}

int self_memory_guard_new(sd_event *e, struct metrics *metrics, unsigned watermark, struct memory_guard **ret) {
        static const char *const work_label[] = { "work", NULL };
        struct memory_guard *g = calloc(1, sizeof(*g));
        int r;

        if (!g)
                return -ENOMEM;
        g->watermark = watermark;
        r = metrics_family(metrics, METRIC_COUNTER, "pinion_memory_refused_total",
                           "Work refused because the agent's memory in use was above [agent] memory-watermark of "
                           "its cgroup's limit, by work.", work_label, NULL, 0, &g->m_refused);
        if (r >= 0)
                r = metrics_family(metrics, METRIC_GAUGE, "pinion_memory_in_use_bytes",
                                   "The agent's cgroup's usage minus the page cache the kernel can drop, as last "
                                   "read.", NULL, NULL, 0, &g->m_in_use);
        if (r >= 0)
                r = metrics_family(metrics, METRIC_GAUGE, "pinion_memory_limit_bytes",
                                   "The agent's cgroup's memory limit (0: none found).", NULL, NULL, 0, &g->m_limit);
        if (r < 0)
                return self_memory_guard_free(g), r;

        r = find_cgroup(&g->dir, &g->v2);
        if (r >= 0)
                r = guard_sample(g);
        if (r < 0) {
                if (r != -ENOENT)
                        log_info_errno(r, "Memory: cannot read the agent's memory cgroup, no memory watermark: %m");
                else
                        log_info("Memory: no memory limit on the agent's cgroup, no memory watermark");
                g->dir = mfree(g->dir);
                *ret = g;
                return 0;
        }
        log_info("Memory: limit %.1f MiB (%s), %.1f MiB in use; new work is refused above %u%%",
                 (double) g->limit / (1 << 20), g->dir, (double) g->in_use / (1 << 20), watermark);
        r = sd_event_add_time_relative(e, &g->timer, CLOCK_MONOTONIC, GUARD_SAMPLE_INTERVAL, USEC_PER_SEC,
                                       on_guard_timer, g);
        if (r < 0)
                return self_memory_guard_free(g), r;
        (void) sd_event_source_set_description(g->timer, "memory-guard");
        *ret = g;
        return 0;
}
