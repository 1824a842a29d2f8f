/* SPDX-License-Identifier: MIT */
#pragma once

/* The agent's own memory: what it hands back to the kernel while it runs.
 *
 * heap: glibc keeps freed memory in its arenas; one arena for every thread, a fixed mmap
 *   threshold and a periodic malloc_trim() return it after a burst.
 * start-up pages: most of the file pages a fresh daemon has mapped were touched once, while
 *   starting: the dynamic linker's relocations and symbol lookups in ~45 libraries, their
 *   constructors (GnuTLS, p11-kit, Kerberos — pulled in by libcurl and libmicrohttpd although the
 *   agent never uses them), config parsing, each module's first connection. The kernel also maps
 *   the cached neighbours of every touched page (fault-around, 64 KiB), so on a node where no
 *   other process maps these libraries they stay resident, and counted against the agent, until
 *   memory pressure evicts them. Once the agent is ready it asks the kernel to page them out
 *   (MADV_PAGEOUT, Linux >= 5.4) and not to read ahead when one is touched again (MADV_RANDOM),
 *   so what stays resident is what the running agent touches again. Only private read-only file mappings are
 *   given back; the kernel skips pages another process maps, so no other process is affected; a
 *   page needed again is read back on its next touch. A second pass 2 s after READY gives back
 *   what the work READY brings touched only once (the first clients, watch events, pings).
 *   Off unless [agent] release-startup-pages asks for it: these are clean pages the kernel
 *   drops first under pressure anyway, the cgroup's working set does not shrink (a page read
 *   back is treated as recently used), and the first requests after it pay major faults
 *   (tests/bench/memory-bench.py measures both ways). */

#include <stdint.h>

#include <systemd/sd-event.h>

#include "metrics.h"

int self_memory_setup_heap(sd_event *e, sd_event_source **ret_timer);

struct page_release {
        unsigned mappings;       /* mappings advised */
        uint64_t resident_before; /* bytes of file-backed resident memory (statm "shared") */
        uint64_t resident_after;
};

/* Pages out the private read-only file mappings of this process (see above). -EOPNOTSUPP when
 * the kernel has no MADV_PAGEOUT (nothing advised then); otherwise 0, errors of single mappings
 * (a mapping gone meanwhile) are skipped. */
int self_memory_release_file_pages(struct page_release *ret);

/* The above now (at READY) and once more when the work READY brings has settled (a one-shot
 * timer in *ret_timer, owned by the caller), each pass logged (how much, how long) and added
 * to the counter released_bytes. */
int self_memory_release_startup_pages(sd_event *e, struct metric_family *released_bytes,
                                      sd_event_source **ret_timer);

/* The memory guard: the agent's memory cgroup (v1 or v2, found from /proc/self/cgroup) read
 * before work that grows what the cgroup is charged for, so that near the limit the work is
 * refused with an error that says why instead of the kernel's OOM killer ending the agent.
 *
 * The limit is v1's memory.limit_in_bytes (or a parent's smaller one), v2's memory.max or
 * memory.high, whichever is lower. What counts as in use is the usage minus the page cache the
 * kernel drops before it kills anything (file pages neither mapped by the agent nor shmem).
 * Kernel memory counts: a pod's veth pair, its sysctl tables and per-CPU counters are charged to
 * the agent that created them (about 67 KiB a pod, more than the agent's own heap per pod).
 * At or above `watermark` percent of the limit new work is refused (-ENOMEM and a reason naming
 * the figures) and a warning logged once; below it again (5 points of hysteresis) an info
 * line. Work that frees memory (a CNI DEL, a pod going away) is never refused. No limit found (none set, no cgroup file
 * readable): everything is admitted. */
struct memory_guard;

int self_memory_guard_new(sd_event *e, struct metrics *metrics, unsigned watermark, struct memory_guard **ret);
struct memory_guard *self_memory_guard_free(struct memory_guard *g);
void self_memory_guard_set_watermark(struct memory_guard *g, unsigned watermark);

/* 0: `work` may start; -ENOMEM: refused, *ret_reason (if not NULL) says why. g NULL admits. */
int self_memory_guard_admit(struct memory_guard *g, const char *work, char **ret_reason);
