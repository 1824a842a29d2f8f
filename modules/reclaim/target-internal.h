/* SPDX-License-Identifier: MIT */
#pragma once

/* target-internal: what the files of one target share (target.c: lifecycle and wake-ups;
 * target-episode.c: an episode's steps; target-record.c: the durable record of the original limit and its restore;
 * target-events.c: the kernel notifications that wake a target; target-step.c: a step's writes
 * off the loop). Not for the module. */

#include "log.h"
#include "target.h"
#include "backoff.h"
#include "unit-cap.h"

#define MODULE "reclaim"

struct offload;

/* One step's kernel writes, run off the loop (target-step.c). */
struct target_step {
        /* the thread's: plain values and its own copy of the cgroup's directory */
        struct memcg cg;
        uint64_t amount;    /* v2: asked of memory.reclaim */
        uint64_t new_limit; /* v1: the step's limit */
        uint64_t put_back;  /* v1: written right after it, whatever its result (throttle or original) */
        int r, q;           /* the step's write, the put-back's */
        usec_t took;        /* µs the writes blocked the thread */
        /* the loop's: what the step was planned from */
        struct memcg_sample before;
        struct reclaim_step plan;
        struct offload *work;
};

struct reclaim_target {
        struct reclaim_ctx *ctx;
        struct reclaim_target_settings settings;
        char *pod_uid, *pod; /* opted-in pod, else NULL */
        char *pod_cgroup_id; /* what the kubelet names its cgroup by: the uid, or a static pod's config hash */
        char *cgroup;        /* the path in use (found by uid for pods) */
        char *record_path;   /* state-dir/reclaim/<name>.json: the original cap */
        /* state-dir/reclaim/<name>.lowered: the values of ours that may be in force (the one
         * about to be written, and the one in force before it), rewritten in place (one
         * pwrite, no fsync: a kill -9 keeps it in the page cache, and a machine crash takes
         * the cgroups with it) before each lowering write. It tells a restore whether the cap
         * in force is still ours, or someone else's to leave alone. */
        char *lowered_path;
        int lowered_fd;
        uint64_t noted[2]; /* 0: unknown */

        struct memcg *cg;
        struct target_cap cap; /* who writes the cap: systemd or the cgroup file (unit-cap.c) */
        uint64_t cg_inode; /* of the directory we attached to (0: unknown) */
        bool bounds_ok;
        struct reclaim_bounds bounds;
        struct memcg_sample last;
        bool have_sample;

        enum target_state state;
        char *reason;

        /* The original cap (v1 memory.limit_in_bytes, v2 memory.high; memcg_read_cap())
         * recorded durably before the first write to it (0: none recorded), always of
         * t->cgroup: reset whenever t->cgroup changes. */
        uint64_t recorded_cap;
        /* A value of ours may be in force: set before the first lowering write, cleared once
         * the original is back (or the cgroup is gone); when a restore failed it is retried
         * after a backoff and at free. While set, the cap read is never taken for an
         * operator's. */
        bool cap_lowered;
        bool restore_failed; /* the last restore failed (the next success is logged) */
        char *record_error; /* the last record_write() failure: the state stays error until one works */
        /* The throttle (target-throttle.c): the cap kept in force between steps (0: none, the
         * original is in force unless a restore is pending). */
        uint64_t throttle;
        uint64_t failcnt_seen; /* v1: failcnt at the last read while cap_lowered */

        /* After a hard error (a write the kernel refuses, a failed restore): no new episode and
         * no restore attempt before hold_until (CLOCK_MONOTONIC), growing by err_backoff. */
        struct backoff err_backoff;
        usec_t hold_until;

        /* v1: usage thresholds at high and at the backstop (see plan_backstop_level()) */
        sd_event_source *threshold_src[2];
        sd_event_source *pressure_src, *psi_src, *events_src;
        sd_event_source *cap_src; /* inotify on the cap's file (memcg_cap_name()) */
        bool psi_rounded_said; /* the rounded PSI window was logged */
        sd_event_source *timer, *step_src;
        /* One-shot, SETTLE after an episode ended short of its goal (unfinished): the next
         * look, which continues toward the goal even below high. */
        sd_event_source *settle_src;
        bool unfinished;
        /* The writer's pace: usage and CLOCK_MONOTONIC at the last look after an episode
         * (inflow_at 0: none), and the inflow since (bytes/s) as the next look measured it. The
         * settle look comes before a writer at that pace reaches high. */
        uint64_t inflow_usage;
        usec_t inflow_at;
        uint64_t inflow_rate;

        /* the episode under way */
        bool in_episode;
        usec_t episode_start; /* CLOCK_MONOTONIC of the wake-up that saw usage >= high */
        unsigned episode_steps;
        uint64_t episode_bytes;
        uint64_t episode_usage_start;

        /* totals */
        uint64_t n_reclaims, bytes_reclaimed, n_steps, n_unreachable, n_step_errors;
        /* v1: failcnt increments while a limit of ours was in force (charges that met it, not
         * the original one: usage stayed below that). */
        uint64_t lowered_limit_hits;
        uint64_t wakeups[_WAKE_SOURCE_MAX];
        usec_t last_reaction;         /* µs; 0: none yet */
        usec_t last_reclaim_realtime; /* when the last episode ended */
        usec_t last_step, max_step;   /* µs one write blocked */
        uint64_t step_now;            /* the step size in use: halved after a slow write */
        /* The step in flight (busy: nothing else samples or writes the cap), its done
         * callback, and the wake-up put off meanwhile (-1: none). */
        struct target_step *step;
        void (*step_done)(struct reclaim_target *t, const struct target_step *s);
        int step_replay;
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
/* After a hard error: no new episode and no restore before a growing backoff (the timer comes
 * back then). */
void target_hold_after_error(struct reclaim_target *t);
/* v1: counts the failures since the last read while our limit is in force (before a restore). */
void target_count_lowered_hits(struct reclaim_target *t, const struct memcg *cg);

/* Sets the state (the one place it changes; every transition logged) and its reason. */
void target_set_state(struct reclaim_target *t, enum target_state s, const char *reason_format, ...) _printf_(3, 4);
/* Reads the cgroup into ret, counting the failures against a lowered limit. */
int target_sample(struct reclaim_target *t, struct memcg_sample *ret);
/* The writer's pace, for the settle delay: marked at the end of an episode (the usage after
 * it), measured at the next look or episode (usage then; marked again from there). true if
 * usage grew since the mark. */
void target_inflow_mark(struct reclaim_target *t);
bool target_inflow_measure(struct reclaim_target *t, uint64_t usage);
/* unfinished: short of the goal, looked at again after the settle delay. */
void target_set_unfinished(struct reclaim_target *t, bool unfinished);

/* target-episode.c */
/* The step source's callback: plans one step and starts its writes (target-step.c). */
int target_episode_step(sd_event_source *s, void *userdata);
void target_episode_schedule_step(struct reclaim_target *t);
/* A wake-up (wake: its source, for the log) found usage to reclaim (p, from sample s): the
 * episode starts. */
void target_episode_start(struct reclaim_target *t, const struct memcg_sample *s, const struct reclaim_step *p,
                          const char *wake);
/* ok, or unreachable saying why, from a plan. */
void target_episode_state_from_plan(struct reclaim_target *t, const struct reclaim_step *p);
void target_episode_end(struct reclaim_target *t, const struct reclaim_step *p, const char *why, bool unfinished);
/* Every way out of an episode that is not its end: the step source off, target_check() may
 * start another. */
void target_episode_abort(struct reclaim_target *t, const char *why);

/* target-record.c */
/* Records the original cap durably before the first write to it (-EBUSY: our lowered value
 * may be in force, it is never taken for the original; -EEXIST: the record of another cgroup). */
int target_record_write(struct reclaim_target *t, uint64_t value);
/* target_record_write() that keeps record_error (the reason the state is error) up to date
 * and logs a failure. */
int target_record_original(struct reclaim_target *t, uint64_t value);
/* Notes, before a lowering write, the value about to be written and the one of ours in force
 * now (0: the original): either may be in force when a kill -9 comes. */
void target_record_note_lowered(struct reclaim_target *t, uint64_t value, uint64_t in_force);
/* Is the cap read (cur) a value of ours, noted before its write? */
bool target_record_cap_is_ours(const struct reclaim_target *t, uint64_t cur);
/* Forgets the record once the original is in place or the cgroup is gone. */
void target_record_remove(struct reclaim_target *t);
/* Takes over a record that survived for this target's cgroup (its original, lowered pending). */
void target_record_load(struct reclaim_target *t);
/* Puts the recorded original cap back while ours may be in force, ending the throttle: 0 when
 * it is in place (or the cgroup is gone), <0 when the restore failed (cap_lowered stays set). */
int target_record_restore(struct reclaim_target *t);

/* target-step.c */
/* Runs job's writes on a thread; done runs on the loop with the result. -EBUSY if a step is
 * in flight. */
int target_step_start(struct reclaim_target *t, const struct target_step *job,
                      void (*done)(struct reclaim_target *t, const struct target_step *s));
/* Waits for a step in flight and forgets it (done is not called). */
void target_step_cancel(struct reclaim_target *t);

/* target-throttle.c */
/* Engages the throttle (or lowers a late one) after sample s, when plan_throttle_wanted().
 * Never while a restore is pending. */
int target_throttle_engage(struct reclaim_target *t, const struct memcg_sample *s);
/* After a step (sample s after it; v1: the step's thread put the throttle back as it was): a
 * throttle engaged above its level (usage was past it) comes down toward it, never under usage. */
int target_throttle_follow(struct reclaim_target *t, const struct memcg_sample *s);
/* Ends the throttle: the original back (why: for the debug log). */
int target_throttle_release(struct reclaim_target *t, const char *why);
/* Is the cap in force (s->cap) still the throttle we wrote? No: someone else set it. */
bool target_throttle_in_force(const struct reclaim_target *t, const struct memcg_sample *s);

/* target-events.c */
void target_events_drop_thresholds(struct reclaim_target *t);
/* Registers the wake-ups for the current bounds; failures leave the timer as the net. */
int target_events_arm(struct reclaim_target *t);
/* A wake-up source that should be there and is not. */
bool target_events_missing(const struct reclaim_target *t);
