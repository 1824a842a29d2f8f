/* SPDX-License-Identifier: MIT */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>

#include "fs.h"
#include "json.h"
#include "pod-events.h"
#include "target-internal.h"
#include "string-table.h"

/* An episode that ended after steps (short of its goal: the kernel reclaimed less than asked,
 * the step budget ran out; or at it, with a writer that may charge on) is looked at again at
 * most this late: once the writer pauses, usage is brought to target at once instead of
 * sitting between target and high until the next crossing, so the workload's next burst finds
 * room. While a writer charges on (usage grew since the episode's end) the look comes sooner,
 * before its pace would take usage to high (plan_settle_delay()), but not before SETTLE_MIN,
 * and it goes on looking, and reclaiming toward target, until usage stops growing: the writer
 * then meets no crossing of high, where it would stall reclaiming in its own context. */
#define SETTLE (100 * USEC_PER_MSEC)
#define SETTLE_MIN (5 * USEC_PER_MSEC)
/* How deep below the root pod cgroups are searched (kubepods/burstable/pod<uid> is 3). */
#define POD_SEARCH_DEPTH 6u

static const char *const target_state_table[_TARGET_STATE_MAX] = {
        [TARGET_MISSING] = "missing",
        [TARGET_OK] = "ok",
        [TARGET_RECLAIMING] = "reclaiming",
        [TARGET_UNREACHABLE] = "unreachable",
        [TARGET_UNLIMITED] = "unlimited",
        [TARGET_ERROR] = "error",
};

DEFINE_STRING_TABLE_LOOKUP_TO_STRING(target_state, enum target_state);

static const char *const wake_source_table[_WAKE_SOURCE_MAX] = {
        [WAKE_THRESHOLD] = "threshold",
        [WAKE_BACKSTOP] = "backstop",
        [WAKE_PRESSURE] = "pressure-level",
        [WAKE_PSI] = "psi",
        [WAKE_EVENTS] = "memory-events",
        [WAKE_CAP] = "cap",
        [WAKE_TIMER] = "timer",
        [WAKE_SETTLE] = "settle",
        [WAKE_START] = "start",
};

static DEFINE_STRING_TABLE_LOOKUP_TO_STRING(wake_source, enum wake_source);

/* ---- samples ---- */

/* v1: charges that failed while a limit of ours was in force met that one, not the original
 * (usage stayed under it): counted as lowered_limit_hits. */
static void add_hits(struct reclaim_target *t, uint64_t failcnt) {
        if (failcnt > t->failcnt_seen) {
                t->lowered_limit_hits += failcnt - t->failcnt_seen;
                (void) metric_add(t->ctx->metrics.lowered_hits, (double) (failcnt - t->failcnt_seen), t->settings.name);
        }
        t->failcnt_seen = failcnt;
}

void target_count_lowered_hits(struct reclaim_target *t, const struct memcg *cg) {
        uint64_t f;
        if (cg->version == MEMCG_V1 && t->cap_lowered && memcg_read_failcnt(cg, &f) >= 0)
                add_hits(t, f);
}

/* Reads the cgroup (memcg_read); while a v1 limit of ours is in force, counts the failures
 * against it (lowered_limit_hits) and reports the original as the limit. */
int target_sample(struct reclaim_target *t, struct memcg_sample *ret) {
        struct memcg_sample s;
        int r = memcg_read(t->cg, &s);
        if (r < 0)
                return r;
        if (t->cg->version == MEMCG_V1 && t->cap_lowered && t->recorded_cap) {
                add_hits(t, s.failcnt);
                /* The workload's limit is the original; s.cap keeps the value in force. */
                if (target_record_cap_is_ours(t, s.limit))
                        s.limit = t->recorded_cap;
        }
        *ret = s;
        return 0;
}

/* ---- state ---- */

static bool state_is_notable(enum target_state s) {
        return s != TARGET_OK && s != TARGET_RECLAIMING;
}

/* The one place the state changes. Every transition is logged: at info when the operator has
 * something to look at (missing, unreachable, unlimited, error, and back), at debug for the
 * ok ⇄ reclaiming rhythm of normal work. */
void target_set_state(struct reclaim_target *t, enum target_state s, const char *reason_format, ...) {
        _cleanup_free_ char *reason = NULL;
        if (reason_format) {
                va_list ap;
                va_start(ap, reason_format);
                if (vasprintf(&reason, reason_format, ap) < 0)
                        reason = NULL;
                va_end(ap);
        }
        if (t->state == s) {
                /* Not a transition: the figures in the reason moved. */
                if (!streq_ptr(t->reason, reason))
                        log_target_debug(t, "%s: %s", target_state_to_string(s), strempty(reason));
                free(t->reason);
                t->reason = TAKE_PTR(reason);
                return;
        }
        int level = state_is_notable(s) || state_is_notable(t->state) ? LOG_INFO : LOG_DEBUG;
        (void) log_target_full_errno(t, level, 0, "%s -> %s%s%s", target_state_to_string(t->state),
                                     target_state_to_string(s), reason ? ": " : "", strempty(reason));
        bool unreachable = s == TARGET_UNREACHABLE && t->state != TARGET_UNREACHABLE;
        if (unreachable) {
                t->n_unreachable++;
                (void) metric_inc(t->ctx->metrics.unreachable, t->settings.name);
        }
        t->state = s;
        free(t->reason);
        t->reason = TAKE_PTR(reason);
        /* An episode runs in reclaiming, so each that ends unreachable is a transition here. */
        if (unreachable && t->pod_uid)
                pod_event_emit(t->ctx->pod_events, t->pod_uid, POD_EVENT_WARNING, POD_EVENT_RECLAIM_UNREACHABLE, "Reclaim",
                               "Reclaim in %s left unreachable: %s", strempty(t->cgroup), strempty(t->reason));
        if (t->ctx->state_changed)
                t->ctx->state_changed(t->ctx->userdata);
}

void target_inflow_mark(struct reclaim_target *t) {
        t->inflow_usage = t->last.usage;
        t->inflow_at = now_usec(CLOCK_MONOTONIC);
}

bool target_inflow_measure(struct reclaim_target *t, uint64_t usage) {
        usec_t now = now_usec(CLOCK_MONOTONIC);
        t->inflow_rate = t->inflow_at && now > t->inflow_at ? plan_inflow_rate(t->inflow_usage, usage, now - t->inflow_at) : 0;
        t->inflow_usage = usage;
        t->inflow_at = now;
        return t->inflow_rate > 0;
}

/* unfinished: short of the goal, looked at again after the settle delay (and from then on,
 * while it stays unfinished, reclaimed toward the goal even below high). */
void target_set_unfinished(struct reclaim_target *t, bool unfinished) {
        t->unfinished = unfinished;
        if (!unfinished)
                t->inflow_at = 0;
        if (!t->settle_src)
                return;
        if (unfinished) {
                (void) sd_event_source_set_time_relative(
                        t->settle_src, plan_settle_delay(t->bounds.high, t->last.usage, t->inflow_rate, SETTLE_MIN, SETTLE));
                (void) sd_event_source_set_enabled(t->settle_src, SD_EVENT_ONESHOT);
        } else
                (void) sd_event_source_set_enabled(t->settle_src, SD_EVENT_OFF);
}

static void detach(struct reclaim_target *t) {
        target_step_cancel(t); /* before anything lets go of the cgroup or restores its cap */
        unit_cap_detach(t);
        target_events_drop_thresholds(t);
        t->pressure_src = sd_event_source_disable_unref(t->pressure_src);
        t->psi_src = sd_event_source_disable_unref(t->psi_src);
        t->events_src = sd_event_source_disable_unref(t->events_src);
        t->cap_src = sd_event_source_disable_unref(t->cap_src);
        if (t->step_src)
                (void) sd_event_source_set_enabled(t->step_src, SD_EVENT_OFF);
        t->in_episode = false;
        target_set_unfinished(t, false);
        /* A throttle left in force is a pending restore from here on (target_check() puts
         * the original back before anything else). */
        t->throttle = 0;
        t->cg = memcg_free(t->cg);
        t->bounds_ok = false;
}


/* (Re)computes the bounds from the limit now in force. */
static int resolve_bounds(struct reclaim_target *t, uint64_t limit) {
        const char *reason = NULL;
        struct reclaim_bounds b;
        int r = plan_bounds_resolve(&t->settings.high, &t->settings.target, t->settings.min_file, t->settings.step,
                                    limit, &b, &reason);
        if (r < 0) {
                t->bounds_ok = false;
                target_set_state(t, r == -ERANGE ? TARGET_UNLIMITED : TARGET_ERROR, "%s", reason);
                return r;
        }
        bool changed = !t->bounds_ok || b.high != t->bounds.high;
        t->bounds = b;
        t->bounds_ok = true;
        if (changed)
                log_target_debug(t, "limit %" PRIu64 ", high %" PRIu64 ", target %" PRIu64 ", min-file %" PRIu64, limit,
                                 b.high, b.target, b.min_file);
        return changed ? 1 : 0;
}

/* Moves the target to another cgroup (*path, taken on success). The record and the flags
 * belong to one cgroup: a pending restore of the old one is tried once more, and if it still
 * fails the move is refused (-EBUSY; the target stays on the old cgroup). */
static int set_cgroup(struct reclaim_target *t, char **path) {
        if (streq_ptr(t->cgroup, *path))
                return 0;
        target_step_cancel(t); /* its writes end before the restore */
        if (t->cap_lowered) {
                (void) target_record_restore(t);
                if (t->cap_lowered)
                        return -EBUSY;
        }
        target_record_remove(t);
        t->recorded_cap = 0;
        t->restore_failed = false;
        free(t->cgroup);
        t->cgroup = TAKE_PTR(*path);
        return 0;
}

static int attach(struct reclaim_target *t) {
        int r;

        if (t->pod_uid) {
                _cleanup_free_ char *path = NULL;
                r = memcg_find_pod(t->pod_cgroup_id, POD_SEARCH_DEPTH, &path);
                if (r == -ENOENT) {
                        target_set_state(t, TARGET_MISSING, "no memory cgroup for pod %s %s yet",
                                  streq(t->pod_cgroup_id, t->pod_uid) ? "uid" : "config hash", t->pod_cgroup_id);
                        return 0;
                }
                if (r < 0) {
                        target_set_state(t, TARGET_ERROR, "cannot search the memory hierarchy: %s", strerror(-r));
                        return 0;
                }
                const char *by = t->ctx->cgroup_taken ? t->ctx->cgroup_taken(t->ctx->userdata, path) : NULL;
                if (by) {
                        target_set_state(t, TARGET_ERROR, "ignoring the pod: its cgroup %s is watched by [reclaim.%s]", path, by);
                        return 0;
                }
                r = set_cgroup(t, &path);
                if (r < 0) {
                        target_set_state(t, TARGET_ERROR, "the pod's cgroup moved to %s, but the original limit of %s could not be restored yet",
                                  path, t->cgroup);
                        return 0;
                }
        }
        r = memcg_open(t->cgroup, &t->cg);
        if (r == -ENOENT) {
                target_set_state(t, TARGET_MISSING, "cgroup %s does not exist", t->cgroup);
                return 0;
        }
        if (r < 0) {
                target_set_state(t, TARGET_ERROR, "cannot open cgroup %s: %s", t->cgroup, strerror(-r));
                return 0;
        }
        if (memcg_inode(t->cg, &t->cg_inode) < 0)
                t->cg_inode = 0;
        uint64_t limit;
        r = memcg_read_limit(t->cg, &limit);
        if (r < 0) {
                target_set_state(t, TARGET_ERROR, "cannot read the limit of %s: %s", t->cgroup, strerror(-r));
                t->cg = memcg_free(t->cg);
                return 0;
        }
        log_target_info(t, "watching %s (cgroup v%d)", t->cgroup, (int) t->cg->version);
        /* Not missing any more, while systemd is asked who owns it (the check comes after). */
        if (t->state == TARGET_MISSING)
                target_set_state(t, TARGET_OK, NULL);
        unit_cap_attach(t);
        target_record_load(t);
        /* With our lowered limit possibly in force (v1) the limit read is not the original:
         * the bounds wait for target_check() to restore it. */
        if (!t->cap_lowered || t->cg->version == MEMCG_V2)
                (void) resolve_bounds(t, limit);
        /* The original is recorded now, not at the first wake-up: the write and its fsyncs
         * take milliseconds in which a fast writer runs on toward the limit. */
        uint64_t original;
        if (t->bounds_ok && !t->cap_lowered && memcg_read_cap(t->cg, &original) >= 0)
                (void) target_record_original(t, original);
        r = target_events_arm(t);
        if (r < 0)
                target_set_state(t, TARGET_ERROR, "cannot register memory events: %s (the %s check still runs)", strerror(-r),
                          "periodic");
        target_check(t, WAKE_START);
        return 0;
}

/* A hard error: error state, and neither a new episode nor a restore attempt before a backoff
 * delay (the timer is moved up to its end if it would fire later). */
void target_hold_after_error(struct reclaim_target *t) {
        usec_t now = now_usec(CLOCK_MONOTONIC);
        usec_t delay = backoff_next(&t->err_backoff, now, 0);
        t->hold_until = now + delay;
        uint64_t next = 0;
        if (t->timer && (sd_event_source_get_time(t->timer, &next) < 0 || next > t->hold_until ||
                         sd_event_source_get_enabled(t->timer, NULL) == 0)) {
                (void) sd_event_source_set_time(t->timer, t->hold_until);
                (void) sd_event_source_set_enabled(t->timer, SD_EVENT_ONESHOT);
        }
        log_target_debug(t, "holding off for %.1f s after the error", (double) delay / USEC_PER_SEC);
}

/* Before a sample: the cgroup attached and the same one as before, and no restore of ours
 * pending. false: this check ends here (attached anew, or held after a failed restore). */
static bool cgroup_ready(struct reclaim_target *t, enum wake_source source) {
        if (!t->cg) {
                if (source == WAKE_TIMER || source == WAKE_START)
                        (void) attach(t);
                return false;
        }
        uint64_t ino;
        if (t->cg_inode && memcg_inode(t->cg, &ino) >= 0 && ino != t->cg_inode) {
                /* Removed and made again at the same path between two wake-ups: the event
                 * registrations died with the old cgroup, and our record is of the old one. */
                log_target_info(t, "cgroup %s was made again: watching the new one", t->cgroup);
                t->cap_lowered = false;
                target_record_remove(t);
                detach(t);
                (void) attach(t); /* checks */
                return false;
        }
        if (t->cap_lowered && !t->throttle) {
                /* A restore failed: retried before anything else. */
                (void) target_record_restore(t);
                if (t->cap_lowered) {
                        /* Our lowered value may still be in force: never plan from it, never
                         * take it for the original. */
                        target_set_state(t, TARGET_ERROR, "cannot restore %s of %s to %" PRIu64 " (retrying)",
                                  memcg_cap_name(t->cg->version), t->cgroup, t->recorded_cap);
                        target_hold_after_error(t);
                        return false;
                }
                if (unit_cap_busy(t, (int) source))
                        return false; /* the restore went to systemd: the check goes on once it is in force */
        }
        return true;
}

/* Samples the cgroup into s and follows what changed under us: the cgroup gone, a cap someone
 * else wrote, a new limit (the bounds again). false: this check ends here. */
static bool sample_and_follow(struct reclaim_target *t, struct memcg_sample *s) {
        int r = target_sample(t, s);
        if (r < 0) {
                if (!memcg_exists(t->cg)) {
                        /* Gone: nothing holds a lowered limit, the record can go. */
                        t->cap_lowered = false;
                        target_record_remove(t);
                        detach(t);
                        target_set_state(t, TARGET_MISSING, "cgroup %s was removed", t->cgroup);
                        /* A pod's cgroup may come back elsewhere; a named one at the same path. */
                        return false;
                }
                target_set_state(t, TARGET_ERROR, "cannot read cgroup %s: %s", t->cgroup, strerror(-r));
                target_hold_after_error(t);
                return false;
        }
        if (!target_throttle_in_force(t, s)) {
                /* Someone else wrote the cap while our throttle was in force: theirs stays,
                 * and is the original from now on. */
                log_target_info(t, "%s of %s is %" PRIu64 ", not the %" PRIu64 " we wrote: set by someone else, taking it as the original",
                                memcg_cap_name(t->cg->version), t->cgroup, s->cap, t->throttle);
                t->throttle = 0;
                t->cap_lowered = false;
                if (t->cg->version == MEMCG_V2)
                        (void) target_record_write(t, s->cap);
        }
        t->last = *s;
        t->have_sample = true;
        if (!t->bounds_ok || s->limit != t->bounds.limit) {
                r = resolve_bounds(t, s->limit);
                if (r < 0) {
                        (void) target_throttle_release(t, "no bounds");
                        return false;
                }
                if (r > 0)
                        (void) target_events_arm(t);
                if (t->cg->version == MEMCG_V1 &&
                    plan_limit_is_new_original(t->cap_lowered, t->recorded_cap, s->limit))
                        (void) target_record_write(t, s->limit); /* an operator's new limit is the original now */
        }
        return true;
}

void target_check(struct reclaim_target *t, enum wake_source source) {
        struct memcg_sample s;
        struct reclaim_step p;
        int r;

        if (t->step) {
                /* The worker is changing the cap: looked at once the step is done. */
                if (t->step_replay != WAKE_START)
                        t->step_replay = (int) source;
                return;
        }
        if (unit_cap_busy(t, (int) source))
                return; /* a write through systemd in flight: checked again when it is done */
        t->wakeups[source]++;
        (void) metric_inc(t->ctx->metrics.wakeups, t->settings.name, wake_source_to_string(source));
        if (t->in_episode)
                return; /* the episode's next step samples anyway */
        if (t->hold_until) {
                if (now_usec(CLOCK_MONOTONIC) < t->hold_until)
                        return; /* after a hard error: the timer comes back at the end of the hold */
                t->hold_until = 0;
        }

        if (!cgroup_ready(t, source))
                return;
        if (!sample_and_follow(t, &s))
                return;
        if (source == WAKE_TIMER && target_events_missing(t))
                (void) target_events_arm(t); /* a registration that failed or that the kernel dropped */
        plan_step(&t->bounds, &s, t->unfinished, &p);
        if (!plan_throttle_wanted(&t->bounds, &s, t->throttle != 0))
                /* Anonymous memory needs the room: no throttle in its way. */
                (void) target_throttle_release(t, "anon + min-file reached high");
        else {
                /* A writer meets the throttle from now on, not the limit. */
                r = target_throttle_engage(t, &s);
                if (r < 0) {
                        target_set_state(t, TARGET_ERROR, "%s", t->record_error ?: "cannot lower the cap (see the log)");
                        target_hold_after_error(t);
                        return;
                }
        }
        switch (p.verdict) {
        case RECLAIM_IDLE:
        case RECLAIM_DONE:
        case RECLAIM_UNREACHABLE:
                /* Unreachable: left alone, not thrashed; the state says why. At the goal the
                 * settle look is still to come unless this is it: the writer may charge on
                 * after this wake-up without crossing high again. */
                if (p.verdict != RECLAIM_DONE)
                        target_set_unfinished(t, false);
                else if (source == WAKE_SETTLE)
                        /* At the goal: looked at again only while a writer still charges. */
                        target_set_unfinished(t, target_inflow_measure(t, s.usage));
                target_episode_state_from_plan(t, &p);
                return;
        case RECLAIM_STEP:
                target_episode_start(t, &s, &p, wake_source_to_string(source));
                return;
        case _RECLAIM_VERDICT_MAX:
                break;
        }
}

static int on_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        struct reclaim_target *t = userdata;
        (void) usec;
        (void) sd_event_source_set_time_relative(s, t->settings.interval);
        (void) sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
        target_check(t, WAKE_TIMER); /* may move the timer up (hold_after_error) */
        return 0;
}

static int on_settle(sd_event_source *s, uint64_t usec, void *userdata) {
        (void) s;
        (void) usec;
        target_check(userdata, WAKE_SETTLE);
        return 0;
}

/* ---- lifecycle ---- */

int target_new(struct reclaim_ctx *ctx, const struct reclaim_target_settings *settings,
               const char *pod_uid, const char *pod_cgroup_id, const char *pod, struct reclaim_target **ret) {
        _cleanup_(target_freep) struct reclaim_target *t = calloc(1, sizeof(*t));
        int r;

        if (!t)
                return -ENOMEM;
        t->ctx = ctx;
        t->state = TARGET_MISSING;
        t->lowered_fd = -EBADF;
        t->cap.replay = -1;
        t->step_replay = -1;
        /* After a hard error: 1 s, doubling up to 5 min; a healthy 10 min starts again at 1 s. */
        backoff_init(&t->err_backoff,
                     &(const struct backoff_config) { .initial = USEC_PER_SEC, .max = 5 * USEC_PER_MINUTE,
                                                      .factor = 2.0, .jitter = 0.2, .reset_after = 10 * USEC_PER_MINUTE },
                     0);
        r = target_settings_copy(settings, &t->settings);
        if (r < 0)
                return r;
        const char *cgroup_id = pod_uid ? (pod_cgroup_id ? pod_cgroup_id : pod_uid) : NULL;
        t->pod_uid = pod_uid ? strdup(pod_uid) : NULL;
        t->pod = pod ? strdup(pod) : NULL;
        t->pod_cgroup_id = cgroup_id ? strdup(cgroup_id) : NULL;
        if ((pod_uid && !t->pod_uid) || (pod && !t->pod) || (cgroup_id && !t->pod_cgroup_id))
                return -ENOMEM;
        if (!pod_uid) {
                r = memcg_path_normalize(settings->cgroup, &t->cgroup);
                if (r < 0)
                        return r;
        }
        /* A pod's record is named by its uid: its name may come back as another pod. */
        if ((pod_uid ? asprintf(&t->record_path, "%s/pod-%s.json", ctx->record_dir, pod_uid)
                     : asprintf(&t->record_path, "%s/%s.json", ctx->record_dir, settings->name)) < 0) {
                t->record_path = NULL;
                return -ENOMEM;
        }
        if (asprintf(&t->lowered_path, "%.*s.lowered", (int) (strlen(t->record_path) - 5), t->record_path) < 0) {
                t->lowered_path = NULL;
                return -ENOMEM;
        }
        *ret = TAKE_PTR(t);
        return 0;
}

struct reclaim_target *target_free(struct reclaim_target *t) {
        if (!t)
                return NULL;
        target_step_cancel(t); /* its writes end before the restore */
        /* The record goes only once the original is back (or the cgroup is gone); otherwise it
         * stays for the next start to restore. */
        (void) target_record_restore(t);
        if (t->cap_lowered)
                log_target_error(t, "The original limit of %s (%" PRIu64 ") could not be restored: keeping %s for the next start",
                                 t->cgroup, t->recorded_cap, t->record_path);
        target_record_remove(t);
        detach(t);
        unit_cap_free(t);
        t->timer = sd_event_source_disable_unref(t->timer);
        t->settle_src = sd_event_source_disable_unref(t->settle_src);
        t->step_src = sd_event_source_disable_unref(t->step_src);
        target_settings_done(&t->settings);
        free(t->pod_uid);
        free(t->pod_cgroup_id);
        free(t->pod);
        free(t->cgroup);
        free(t->record_path);
        free(t->lowered_path);
        safe_close(t->lowered_fd);
        free(t->record_error);
        free(t->reason);
        free(t);
        return NULL;
}

/* The target's counters and histograms at zero from its start (their labels are known), so a
 * rate or an alert has a zero to begin from. */
static void touch_series(const struct reclaim_target *t) {
        const struct reclaim_metrics *m = &t->ctx->metrics;
        const char *n = t->settings.name;

        (void) metric_touch(m->reclaims, n);
        (void) metric_touch(m->bytes, n);
        (void) metric_touch(m->steps, n);
        (void) metric_touch(m->unreachable, n);
        (void) metric_touch(m->lowered_hits, n);
        (void) metric_touch(m->systemd_failures, n);
        (void) metric_touch(m->reaction, n);
        (void) metric_touch(m->step_seconds, n);
        static const char *const kinds[] = { "busy", "again", "error" };
        for (size_t i = 0; i < ELEMENTSOF(kinds); i++)
                (void) metric_touch(m->step_errors, n, kinds[i]);
}

int target_start(struct reclaim_target *t) {
        int r;

        touch_series(t);
        if (!t->step_src) {
                r = sd_event_add_defer(t->ctx->event, &t->step_src, target_episode_step, t);
                if (r < 0)
                        return r;
                (void) sd_event_source_set_enabled(t->step_src, SD_EVENT_OFF);
        }
        if (!t->timer) {
                r = sd_event_add_time_relative(t->ctx->event, &t->timer, CLOCK_MONOTONIC, t->settings.interval,
                                               t->settings.interval / 10, on_timer, t);
                if (r < 0)
                        return r;
        }
        if (!t->settle_src) {
                r = sd_event_add_time_relative(t->ctx->event, &t->settle_src, CLOCK_MONOTONIC, SETTLE, SETTLE_MIN / 5,
                                               on_settle, t);
                if (r < 0)
                        return r;
                (void) sd_event_source_set_enabled(t->settle_src, SD_EVENT_OFF);
        }
        return attach(t);
}

int target_update(struct reclaim_target *t, const struct reclaim_target_settings *settings) {
        struct reclaim_target_settings s;
        int r = target_settings_copy(settings, &s);
        if (r < 0)
                return r;
        bool same_cgroup = streq_ptr(s.cgroup, t->settings.cgroup);
        if (!same_cgroup && !t->pod_uid) {
                _cleanup_free_ char *path = NULL;
                r = memcg_path_normalize(s.cgroup, &path);
                if (r < 0) {
                        target_settings_done(&s);
                        return r;
                }
                /* The old cgroup gets its limit back before we let go of it; if it cannot, the
                 * target stays on it (target_restore_pending() lets a reload refuse). */
                r = set_cgroup(t, &path);
                if (r < 0) {
                        target_settings_done(&s);
                        return r;
                }
        }
        target_settings_done(&t->settings);
        t->settings = s;
        detach(t);
        (void) sd_event_source_set_time_relative(t->timer, t->settings.interval);
        (void) sd_event_source_set_enabled(t->timer, SD_EVENT_ONESHOT);
        return attach(t);
}

bool target_restore_pending(const struct reclaim_target *t) {
        /* A v1 step without a throttle in flight is not one: its thread puts the original back. */
        return t->cap_lowered && !t->throttle && !t->step;
}

const char *target_cgroup(const struct reclaim_target *t) {
        return t->cgroup;
}

const char *target_name(const struct reclaim_target *t) {
        return t->settings.name;
}

const char *target_pod_uid(const struct reclaim_target *t) {
        return t->pod_uid;
}

const char *target_pod_cgroup_id(const struct reclaim_target *t) {
        return t->pod_cgroup_id;
}

const struct reclaim_target_settings *target_settings(const struct reclaim_target *t) {
        return &t->settings;
}

enum target_state target_state(const struct reclaim_target *t) {
        return t->state;
}

static cJSON *add_bytes(cJSON *o, const char *key, uint64_t v) {
        if (v == UINT64_MAX)
                return cJSON_AddNullToObject(o, key);
        return cJSON_AddNumberToObject(o, key, (double) v);
}

cJSON *target_to_json(struct reclaim_target *t) {
        _cleanup_(cJSON_Deletep) cJSON *o = cJSON_CreateObject();
        cJSON *w;
        if (!o)
                return NULL;
        /* Fresh numbers for the reader (cheap: a few small files). */
        if (t->cg && !t->in_episode) {
                struct memcg_sample s;
                if (target_sample(t, &s) >= 0) {
                        t->last = s;
                        t->have_sample = true;
                }
        }
        if (!cJSON_AddStringToObject(o, "name", t->settings.name) || !json_add_string_or_null(o, "cgroup", t->cgroup) ||
            !json_add_string_or_null(o, "pod_uid", t->pod_uid) || !json_add_string_or_null(o, "pod", t->pod) ||
            !cJSON_AddStringToObject(o, "state", target_state_to_string(t->state)) ||
            !json_add_string_or_null(o, "reason", t->reason))
                return NULL;
        if (t->cg)
                cJSON_AddNumberToObject(o, "cgroup_version", t->cg->version);
        else
                cJSON_AddNullToObject(o, "cgroup_version");
        bool s = t->have_sample && t->cg;
        add_bytes(o, "limit", s ? t->last.limit : UINT64_MAX);
        add_bytes(o, "usage", s ? t->last.usage : UINT64_MAX);
        add_bytes(o, "file", s ? t->last.file : UINT64_MAX);
        add_bytes(o, "anon", s ? t->last.anon : UINT64_MAX);
        add_bytes(o, "peak", s && t->last.peak ? t->last.peak : UINT64_MAX);
        add_bytes(o, "failcnt", s ? t->last.failcnt : UINT64_MAX);
        add_bytes(o, "high", t->bounds_ok ? t->bounds.high : UINT64_MAX);
        add_bytes(o, "target", t->bounds_ok ? t->bounds.target : UINT64_MAX);
        add_bytes(o, "min_file", t->settings.min_file);
        cJSON_AddNumberToObject(o, "reclaims", (double) t->n_reclaims);
        cJSON_AddNumberToObject(o, "bytes_reclaimed", (double) t->bytes_reclaimed);
        cJSON_AddNumberToObject(o, "steps", (double) t->n_steps);
        cJSON_AddNumberToObject(o, "step_errors", (double) t->n_step_errors);
        cJSON_AddNumberToObject(o, "unreachable", (double) t->n_unreachable);
        cJSON_AddNumberToObject(o, "lowered_limit_hits", (double) t->lowered_limit_hits);
        if (t->n_reclaims) {
                cJSON_AddNumberToObject(o, "last_reaction_seconds", (double) t->last_reaction / USEC_PER_SEC);
                json_add_time(o, "last_reclaim", t->last_reclaim_realtime);
        } else {
                cJSON_AddNullToObject(o, "last_reaction_seconds");
                cJSON_AddNullToObject(o, "last_reclaim");
        }
        cJSON_AddNumberToObject(o, "max_step_seconds", (double) t->max_step / USEC_PER_SEC);
        cJSON_AddNumberToObject(o, "step_bytes", (double) (t->step_now ? t->step_now : t->settings.step));
        cJSON_AddBoolToObject(o, "original_limit_recorded", t->recorded_cap != 0);
        cJSON_AddBoolToObject(o, "restore_pending", target_restore_pending(t));
        /* The cap kept lowered while a writer streams (v1 the limit, v2 memory.high). */
        add_bytes(o, "throttle", t->throttle ? t->throttle : UINT64_MAX);
        /* Who writes it: "systemd" (MemoryHigh= of unit) or "cgroupfs" (the file). */
        if (unit_cap_to_json(t, o) < 0 || !(w = cJSON_AddObjectToObject(o, "wakeups")))
                return NULL;
        for (int i = 0; i < _WAKE_SOURCE_MAX; i++)
                cJSON_AddNumberToObject(w, wake_source_to_string(i), (double) t->wakeups[i]);
        return TAKE_PTR(o);
}

void target_collect(struct reclaim_target *t) {
        struct reclaim_metrics *m = &t->ctx->metrics;
        const char *n = t->settings.name;
        for (int i = 0; i < _TARGET_STATE_MAX; i++)
                (void) metric_set(m->state, t->state == i ? 1 : 0, n, target_state_to_string(i));
        if (!t->cg)
                return;
        struct memcg_sample s;
        if (!t->in_episode && target_sample(t, &s) >= 0)
                t->last = s;
        if (t->last.limit != UINT64_MAX)
                (void) metric_set(m->limit, (double) t->last.limit, n);
        (void) metric_set(m->usage, (double) t->last.usage, n);
        (void) metric_set(m->file, (double) t->last.file, n);
        (void) metric_set(m->anon, (double) t->last.anon, n);
}
