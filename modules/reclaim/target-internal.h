/* SPDX-License-Identifier: MIT */
#pragma once

/* target-internal: what the files of one target share (target.c: lifecycle, wake-ups and
 * episodes; target-record.c: the durable record of the original limit and its restore;
 * target-events.c: the kernel notifications that wake a target). Not for the module. */

#include "log.h"
#include "target.h"
#include "backoff.h"

#define MODULE "reclaim"

struct reclaim_target {
        struct reclaim_ctx *ctx;
        struct reclaim_target_settings settings;
        char *pod_uid, *pod; /* opted-in pod, else NULL */
        char *pod_cgroup_id; /* what the kubelet names its cgroup by: the uid, or a static pod's config hash */
        char *cgroup;        /* the path in use (found by uid for pods) */
        char *record_path;   /* state-dir/reclaim/<name>.json */
        /* state-dir/reclaim/<name>.lowered: the lowered limit written last, rewritten in place
         * (one pwrite, no fsync: a kill -9 keeps it in the page cache, and a machine crash
         * takes the cgroups with it) before each lowering write. It tells a restore whether the
         * limit in force is still ours, or someone else's to leave alone. */
        char *lowered_path;
        int lowered_fd;
        uint64_t last_lowered; /* 0: unknown */

        struct memcg *cg;
        uint64_t cg_inode; /* of the directory we attached to (0: unknown) */
        bool bounds_ok;
        struct reclaim_bounds bounds;
        struct memcg_sample last;
        bool have_sample;

        enum target_state state;
        char *reason;

        /* The original limit recorded durably before the first v1 write (0: none recorded),
         * always of t->cgroup: reset whenever t->cgroup changes. */
        uint64_t recorded_limit;
        /* Our lowered limit may be in force: set before each lowering write, cleared once the
         * original is back (or the cgroup is gone); when a restore failed it is retried after a
         * backoff and at free. While set, the limit read is never taken for an operator's. */
        bool limit_lowered;
        bool restore_failed; /* the last restore failed (the next success is logged) */
        char *record_error; /* the last record_write() failure: the state stays error until one works */

        /* After a hard error (a write the kernel refuses, a failed restore): no new episode and
         * no restore attempt before hold_until (CLOCK_MONOTONIC), growing by err_backoff. */
        struct backoff err_backoff;
        usec_t hold_until;

        /* v1: usage thresholds at high and at the backstop (see backstop_level()) */
        sd_event_source *threshold_src[2];
        sd_event_source *pressure_src, *psi_src, *events_src;
        sd_event_source *timer, *step_src;

        /* the episode under way */
        bool in_episode;
        usec_t episode_start; /* CLOCK_MONOTONIC of the wake-up that saw usage >= high */
        unsigned episode_steps;
        uint64_t episode_bytes;
        uint64_t episode_usage_start;

        /* totals */
        uint64_t n_reclaims, bytes_reclaimed, n_steps, n_unreachable, n_step_errors;
        /* v1: failcnt increments during our steps (charges that met the briefly lowered limit,
         * not the original one: usage stayed below it). */
        uint64_t lowered_limit_hits;
        uint64_t wakeups[_WAKE_SOURCE_MAX];
        usec_t last_reaction;         /* µs; 0: none yet */
        usec_t last_reclaim_realtime; /* when the last episode ended */
        usec_t last_step, max_step;   /* µs one write blocked */
        uint64_t step_now;            /* the step size in use: halved after a slow write */
};

#define log_target_full_errno(t, level, error, fmt, ...)                                                   \
        log_ctx_full_errno((&(const struct log_ctx) { .module = MODULE, .pod_uid = (t)->pod_uid, .pod = (t)->pod }), \
                           level, error, "%s: " fmt, (t)->settings.name, ##__VA_ARGS__)
#define log_target_debug(t, ...) (void) log_target_full_errno(t, LOG_DEBUG, 0, __VA_ARGS__)
#define log_target_info(t, ...) (void) log_target_full_errno(t, LOG_INFO, 0, __VA_ARGS__)
#define log_target_warning(t, ...) (void) log_target_full_errno(t, LOG_WARNING, 0, __VA_ARGS__)
#define log_target_warning_errno(t, e, ...) log_target_full_errno(t, LOG_WARNING, e, __VA_ARGS__)
#define log_target_error(t, ...) (void) log_target_full_errno(t, LOG_ERR, 0, __VA_ARGS__)
#define log_target_error_errno(t, e, ...) log_target_full_errno(t, LOG_ERR, e, __VA_ARGS__)

/* target.c */
/* Every wake-up ends here: sample, compare with high, start an episode if needed. */
void target_check(struct reclaim_target *t, enum wake_source source);

/* target-record.c */
uint64_t target_page_size(void);
/* Records the original limit durably before the first write to it (-EBUSY: our lowered limit
 * may be in force, it is never taken for the original; -EEXIST: the record of another cgroup). */
int target_record_write(struct reclaim_target *t, uint64_t limit);
/* Notes the value about to be written (state-dir/reclaim/NAME.lowered), before the write. */
void target_note_lowered(struct reclaim_target *t, uint64_t value);
/* Forgets the record once the original is in place or the cgroup is gone. */
void target_record_remove(struct reclaim_target *t);
/* Takes over a record that survived for this target's cgroup (its original, lowered pending). */
void target_record_load(struct reclaim_target *t);
/* Puts the recorded original limit back while ours may be in force: 0 when it is in place (or
 * the cgroup is gone), <0 when the restore failed (limit_lowered stays set). */
int target_restore_limit(struct reclaim_target *t);

/* target-events.c */
void target_drop_thresholds(struct reclaim_target *t);
/* The v1 backstop threshold: halfway between high and the limit (0: none). */
uint64_t target_backstop_level(const struct reclaim_bounds *b);
/* Registers the wake-ups for the current bounds; failures leave the timer as the net. */
int target_arm_events(struct reclaim_target *t);
/* A wake-up source that should be there and is not. */
bool target_sources_missing(const struct reclaim_target *t);
