/* SPDX-License-Identifier: MIT */
/* The throttle: a lowered cap kept in force so that a writer faster than the agent's reclaim
 * reclaims its own page cache, in its own context, before the cgroup reaches its limit.
 *
 * Episodes alone cannot keep up with a writer like dd (1 MiB writes, no fsync): its cache is
 * dirty, so reclaim waits for writeback while the writer charges on at GiB/s, and on v1 the
 * kernel keeps a lowered limit out of force until usage is under it — the writer meets only
 * the original limit while a step reclaims. Reacting faster does not help either: at 2 GiB/s
 * the room between high (90%) and 95% of a 64 MiB limit is 1.6 ms of writing. What stops the
 * writer is a cap the kernel enforces on it, in place before it gets there:
 *
 *   v1  memory.limit_in_bytes just under halfway between high and the limit (the backstop
 *       threshold), but never below the limit - min-file + headroom (plan_throttle_level()),
 *       put back after each step. A hard limit: a charge the kernel cannot make room for
 *       below it fails with an OOM kill the original limit might not have caused. Never
 *       below the limit - min-file + headroom makes that impossible for a burst of any speed
 *       that takes anonymous memory (with the kernel's own unreclaimable charges inside the
 *       headroom) up to the limit - min-file: page cache is all that stands between it and
 *       the cap, and the kernel reclaims it (dirty cache too: legacy memcg reclaim waits for
 *       its writeback) before it gives up on a charge. Beyond that, where the original limit
 *       would take the cache below min-file, the throttle is released at the next wake-up
 *       (plan_throttle_wanted(): it is in force only while anon + min-file + headroom is
 *       below high), and a charge that comes before can fail against it. The price is the
 *       peak: a min-file under (limit - halfway) + headroom puts the throttle above halfway.
 *   v2  memory.high at high, for as long as anon + min-file + headroom stays below high: a
 *       throttle, never an OOM (a task over it reclaims before it returns to user space). It
 *       also brings the notification at high that v2 otherwise lacks (memory.events "high"
 *       changes). When anonymous memory needs the room, the original goes back so anon
 *       allocations are never throttled into a stall.
 *
 * A throttle engaged while usage is at or past its level already (a late wake-up, a start on a
 * full cgroup) is written at usage + headroom instead (plan_throttle_value()): a cap below
 * usage would make the agent reclaim the difference inside its write — a v2 memory.high write
 * reclaims down to the new value before it returns, v1 retries reclaim until usage fits — the
 * event loop stalled for as long as dirty cache takes. After each step (v1: its thread puts
 * the throttle back as it was, then follow) and each wake-up it comes down toward the level,
 * never under usage.
 *
 * The original is recorded durably (target-record.c) before the first write, so stop, a
 * reload, a removed section and a kill -9 (at the next start) all put it back. */
#include <inttypes.h>

#include "target-internal.h"

/* The value the throttle keeps in force when it can (0: none): plan_throttle_level(). */
static uint64_t throttle_level(const struct reclaim_target *t) {
        return plan_throttle_level(&t->bounds, t->cg->version);
}

/* Writes value over the cap after noting it and what may be in force now. */
static int write_throttle(struct reclaim_target *t, uint64_t value, uint64_t in_force) {
        target_record_note_lowered(t, value, in_force);
        int r = unit_cap_write(t, t->cg, value, false);
        if (r < 0)
                return r;
        t->throttle = value;
        return 0;
}

int target_throttle_engage(struct reclaim_target *t, const struct memcg_sample *s) {
        int r;

        if (!t->cg || !t->bounds_ok || t->cap_lowered != (t->throttle != 0))
                return 0; /* a restore is pending: never lower over it */
        uint64_t level = throttle_level(t);
        if (level == 0)
                return 0;
        /* A wake-up that came late (usage past the level): cap where usage is now, so the write
         * never reclaims (the event loop would wait for it); the steps bring it down. */
        uint64_t value = plan_throttle_value(level, s->usage, t->bounds.headroom, memcg_page_size());
        uint64_t original;
        if (t->cg->version == MEMCG_V1)
                original = t->bounds.limit;
        else
                original = t->throttle ? t->recorded_cap : s->cap;
        if (value >= original || (t->throttle && t->throttle <= value))
                return 0; /* nothing to lower (v2: the operator's memory.high is lower already) */

        r = target_record_original(t, original);
        if (r < 0)
                return r;
        uint64_t in_force = t->throttle;
        if (!t->cap_lowered) {
                (void) memcg_read_failcnt(t->cg, &t->failcnt_seen);
                t->cap_lowered = true;
        }
        r = write_throttle(t, value, in_force);
        if (r < 0) {
                log_target_warning_errno(t, r, "Failed to lower %s of %s to %" PRIu64 ": %m",
                                         memcg_cap_name(t->cg->version), t->cgroup, value);
                int q = target_record_restore(t);
                return q < 0 ? q : r;
        }
        log_target_debug(t, "throttle: %s of %s at %" PRIu64 " (original %" PRIu64 ")", memcg_cap_name(t->cg->version),
                         t->cgroup, value, original);
        return 0;
}

int target_throttle_follow(struct reclaim_target *t, const struct memcg_sample *s) {
        if (!t->throttle || !t->cg)
                return 0;
        /* Only ever lower, and never under usage: engage's clamp. */
        return target_throttle_engage(t, s);
}

int target_throttle_release(struct reclaim_target *t, const char *why) {
        if (!t->throttle)
                return 0;
        log_target_debug(t, "throttle released (%s): %s of %s back to the original", why,
                         memcg_cap_name(t->cg ? t->cg->version : MEMCG_V1), t->cgroup);
        return target_record_restore(t);
}

bool target_throttle_in_force(const struct reclaim_target *t, const struct memcg_sample *s) {
        return !t->throttle || target_record_cap_is_ours(t, s->cap);
}
