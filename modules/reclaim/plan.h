/* SPDX-License-Identifier: MIT */
#pragma once

/* plan: the pure decisions of reclaim, apart from any cgroup, so they can be unit tested.
 * Given the settings resolved against the cgroup's limit and one sample of its memory, what is
 * the next step: nothing, reclaim N bytes (toward which goal), done, or give up because the
 * non-reclaimable part (anonymous memory + the min-file floor + headroom) is above high. */

#include <stdbool.h>
#include <stdint.h>

#include "memcg.h"

/* A level written as a percentage of the limit ("90%") or as a size ("900M"). */
struct reclaim_level {
        bool is_percent;
        unsigned percent;
        uint64_t bytes;
};

/* Config parser (config_parser_t) for struct reclaim_level. */
int plan_parse_level(const char *v, void *ret, const char **reason);
/* The level in bytes for this limit. -ERANGE for a percentage of no limit. */
int plan_level_resolve(const struct reclaim_level *l, uint64_t limit, uint64_t *ret);

struct reclaim_bounds {
        uint64_t limit;    /* the original limit (UINT64_MAX: none) */
        uint64_t high;     /* reclaim starts at or above this usage */
        uint64_t target;   /* and brings usage down to this */
        uint64_t min_file; /* page cache never reclaimed below this */
        uint64_t step;     /* at most this much per step (bounds how long one write blocks) */
        uint64_t headroom; /* kept free for anonymous growth while a v1 limit is lowered */
};

/* Resolves high/target against limit. -ERANGE if a percentage meets no limit, -EINVAL if the
 * result is inconsistent (target >= high, high > limit); *ret_reason says which. */
int plan_bounds_resolve(const struct reclaim_level *high, const struct reclaim_level *target,
                        uint64_t min_file, uint64_t step, uint64_t limit, struct reclaim_bounds *ret,
                        const char **ret_reason);

enum reclaim_verdict {
        RECLAIM_IDLE,        /* usage below high: nothing to do */
        RECLAIM_STEP,        /* reclaim step.amount bytes */
        RECLAIM_DONE,        /* the goal is reached */
        RECLAIM_UNREACHABLE, /* anon + min-file + headroom keep usage at or above high */
        _RECLAIM_VERDICT_MAX,
};

struct reclaim_step {
        enum reclaim_verdict verdict;
        uint64_t goal;      /* max(target, floor) */
        uint64_t floor;     /* anon + min(file, min-file) + headroom: never reclaimed below */
        uint64_t amount;    /* RECLAIM_STEP: bytes to reclaim now */
        uint64_t new_limit; /* RECLAIM_STEP: the v1 limit that makes the kernel reclaim amount */
        bool last;          /* RECLAIM_STEP: this step reaches the goal */
        bool partial;       /* the goal is above target: target itself is unreachable */
};

/* in_episode: a reclaim is under way, or one ended short of its goal (then usage below high
 * does not stop it before the goal: usage is brought to target, not left just under high). */
void plan_step(const struct reclaim_bounds *b, const struct memcg_sample *s, bool in_episode,
               struct reclaim_step *ret);
const char *plan_verdict_to_string(enum reclaim_verdict v);

/* May the throttle (a lowered cap kept in force: v1 just under the backstop, v2 memory.high at
 * high) be in force? Only while anon + min-file (all of it, whatever the file cache is now:
 * the kernel reclaiming at the cap does not know min-file) + headroom stays below high, so the
 * cap never squeezes page cache under min-file nor anonymous memory. engaged: it is in force now
 * (it stays until that reaches high; it comes only once it is a headroom below, so a workload
 * at the edge does not make it come and go with every wake-up). */
bool plan_throttle_wanted(const struct reclaim_bounds *b, const struct memcg_sample *s, bool engaged);

/* The level the throttle keeps when it can (0: none). v2: high (memory.high only throttles, it
 * never OOM-kills). v1, a hard limit: just under halfway between high and the limit, but never
 * below the limit - min-file + headroom, so that anonymous and kernel memory up to the limit -
 * min-file always fit under it by reclaiming page cache, however fast they come — the throttle
 * never OOM-kills where the original limit would not (0 when that leaves nothing to lower). */
uint64_t plan_throttle_level(const struct reclaim_bounds *b, enum memcg_version v);
/* The v1 backstop: a second usage threshold, halfway between high and the limit, or a byte over
 * a throttle above that, so that usage held at the throttle never reaches it (it would fire with
 * every page the writer reclaims there). The kernel compares usage with the thresholds only
 * every 128 page events per CPU, and now and then it never signals a rise past high after an
 * episode (seen in the benchmark: 2 crossings in ~300 with a 600 MiB/s writer; the next wake-up
 * was the timer's, 10 s later, at the limit): the backstop fires on that rise before the limit.
 * 0: none (no limit above high). */
uint64_t plan_backstop_level(const struct reclaim_bounds *b);
/* The cap to write for a throttle at level, with usage as sampled: the level (whole pages),
 * or usage + headroom (rounded up to a page) when usage is at or past the level already, so
 * the write never reclaims in the writer's context (the kernel reclaims down to a lowered v2
 * memory.high, or before it takes a lowered v1 limit, inside the write). The steps and
 * wake-ups that follow bring it down to the level. */
uint64_t plan_throttle_value(uint64_t level, uint64_t usage, uint64_t headroom, uint64_t page_size);

/* ---- the look after an episode, paced by the writer ---- */

/* A writer's inflow in bytes per second: usage from `from` to `to` over elapsed µs; 0 if usage
 * did not grow (reclaimed, or idle) or no time passed. */
uint64_t plan_inflow_rate(uint64_t from, uint64_t to, uint64_t elapsed_us);
/* When to look again after an episode (µs): a quarter of the time a writer at rate bytes/s
 * takes from usage to high (a crossing is where the writer stalls, reclaiming in its own
 * context; the look starts the next episode before it), within [min_us, max_us]; max_us
 * without an inflow or at high already. */
uint64_t plan_settle_delay(uint64_t high, uint64_t usage, uint64_t rate, uint64_t min_us, uint64_t max_us);

/* ---- the durable record of a v1 original limit: when it may be written, used and forgotten ---- */

enum reclaim_leftover_action {
        LEFTOVER_RESTORE, /* the limit is below the recorded original: write the original back */
        LEFTOVER_FORGET,  /* nothing to restore (the original is in place, or the cgroup is gone) */
        LEFTOVER_KEEP,    /* cannot tell (the cgroup could not be opened or read): keep the record */
        LEFTOVER_NOT_OURS, /* below the original but not the value we wrote: someone else's, left alone */
        _LEFTOVER_ACTION_MAX,
};

/* A record found at start (or held by a target): open_error is memcg_open()'s result, read_error
 * memcg_read_limit()'s, current the limit read, written the lowered limit we wrote last (0:
 * unknown). Only a confirmed -ENOENT of the cgroup, a limit already at (or above) the original,
 * or one that is not ours (plan_limit_is_ours) lets the record go without a restore. */
enum reclaim_leftover_action plan_leftover_action(int open_error, int read_error, uint64_t current,
                                                  uint64_t original, uint64_t written, uint64_t page_size);
const char *plan_leftover_action_to_string(enum reclaim_leftover_action a);

/* A limit read in a check differs from the recorded original: is it an operator's new original
 * to record? Never while our lowered limit may still be in force (lowered: a restore failed or
 * is pending), and never 0 or "nothing recorded". */
bool plan_limit_is_new_original(bool lowered, uint64_t recorded, uint64_t current);

/* May the record be overwritten with limit? Never with a value below the recorded original
 * while our lowered limit may be in force. */
bool plan_record_may_write(bool lowered, uint64_t recorded, uint64_t limit);

/* A failed reclaim write: transient (EBUSY/EAGAIN: the kernel could not take that much now; the
 * next wake-up tries again) or hard (EROFS, EACCES, ENOENT, EINVAL...: retried only after a
 * backoff, never at once). */
bool plan_step_error_is_transient(int error);

/* v1 keeps limits in pages: the limit read back after writing `written` bytes. */
uint64_t plan_limit_as_kernel_keeps(uint64_t written, uint64_t page_size);
/* Is the limit in force the one we lowered it to (and so ours to put back)? written 0: unknown
 * (a record from before the lowered value was kept): any limit below the original is taken for
 * ours. */
bool plan_limit_is_ours(uint64_t current, uint64_t original, uint64_t written, uint64_t page_size);
