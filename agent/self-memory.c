/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <inttypes.h>
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

static int on_heap_trim(sd_event_source *s, uint64_t usec, void *userdata) {
        (void) malloc_trim(0);
        return sd_event_source_set_time_relative(s, HEAP_TRIM_INTERVAL);
}

int self_memory_setup_heap(sd_event *e, sd_event_source **ret_timer) {
        (void) mallopt(M_MMAP_THRESHOLD, HEAP_MMAP_THRESHOLD);
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
