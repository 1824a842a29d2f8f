/* SPDX-License-Identifier: MIT */
/* target-episode: one reclaim episode of a target, from the wake-up that found usage at or above
 * high (target_check() in target.c starts it) to its end: each bounded step is planned here
 * (plan_step()), its kernel writes run on a thread (target-step.c), and the result decides the
 * next step, the end (goal reached, the kernel short of it, the step budget used) or an abort
 * (the cgroup or its limit changed under us, a hard error). */
#include <inttypes.h>

#include "target-internal.h"

/* An episode that has not reached its goal after this many steps yields to the next wake-up
 * (a writer faster than reclaim); the safety-net timer or the next event starts another. */
#define EPISODE_MAX_STEPS 64u
/* A reclaim write slower than this halves the step size (not below STEP_MIN): half the
 * 10 ms an API answer may wait behind one write. */
#define STEP_SLOW (5 * USEC_PER_MSEC)
#define STEP_MIN (UINT64_C(1) << 20)

void target_episode_schedule_step(struct reclaim_target *t) {
        (void) sd_event_source_set_enabled(t->step_src, SD_EVENT_ONESHOT);
}

/* ok, or unreachable saying why, from a plan. */
void target_episode_state_from_plan(struct reclaim_target *t, const struct reclaim_step *p) {
        if (t->record_error) {
                target_set_state(t, TARGET_ERROR, "%s", t->record_error);
                return;
        }
        if (p->verdict != RECLAIM_UNREACHABLE && !p->partial) {
                target_set_state(t, TARGET_OK, NULL);
                return;
        }
        bool high = p->verdict == RECLAIM_UNREACHABLE;
        target_set_state(t, TARGET_UNREACHABLE,
                  "anonymous memory %" PRIu64 "M + min-file %" PRIu64 "M + headroom %" PRIu64 "M leave no room to reach %s (%" PRIu64 "M)",
                  t->last.anon >> 20, MIN(t->last.file, t->bounds.min_file) >> 20, t->bounds.headroom >> 20,
                  high ? "high" : "target", (high ? t->bounds.high : t->bounds.target) >> 20);
}

void target_episode_end(struct reclaim_target *t, const struct reclaim_step *p, const char *why, bool unfinished) {
        usec_t now = now_usec(CLOCK_MONOTONIC);
        t->in_episode = false;
        target_inflow_mark(t);
        target_set_unfinished(t, unfinished);
        t->last_reclaim_realtime = now_usec(CLOCK_REALTIME);
        if (t->episode_steps > 0) {
                t->n_reclaims++;
                t->last_reaction = now - t->episode_start;
                (void) metric_inc(t->ctx->metrics.reclaims, t->settings.name);
                (void) metric_observe(t->ctx->metrics.reaction, (double) t->last_reaction / USEC_PER_SEC, t->settings.name);
                backoff_reset(&t->err_backoff); /* writes work again */
        }
        log_target_debug(t, "episode done after %u steps, %" PRIu64 " bytes in %.1f ms: %s", t->episode_steps,
                         t->episode_bytes, (double) (now - t->episode_start) / USEC_PER_MSEC, why);
        target_episode_state_from_plan(t, p);
}

/* A wake-up (wake: its source, for the log) found usage to reclaim (p, from sample s): the
 * episode starts. */
void target_episode_start(struct reclaim_target *t, const struct memcg_sample *s, const struct reclaim_step *p,
                          const char *wake) {
        t->in_episode = true;
        /* The wake-up is the crossing (events) or the first sign of it (the timer). */
        (void) sd_event_now(t->ctx->event, CLOCK_MONOTONIC, &t->episode_start);
        t->episode_steps = 0;
        t->episode_bytes = 0;
        t->episode_usage_start = s->usage;
        (void) target_inflow_measure(t, s->usage); /* since the last episode's end, if it was looked after */
        target_set_state(t, TARGET_RECLAIMING, NULL);
        log_target_debug(t, "usage %" PRIu64 " %s high %" PRIu64 " (%s): reclaiming toward %" PRIu64, s->usage,
                         s->usage >= t->bounds.high ? ">=" : "< (unfinished)", t->bounds.high,
                         wake, p->goal);
        target_episode_schedule_step(t);
}

/* Every way out of an episode that is not its end (the cgroup went away, the limit changed
 * under us, an error): the one-shot step source is off and target_check() may start another. */
void target_episode_abort(struct reclaim_target *t, const char *why) {
        if (t->step_src)
                (void) sd_event_source_set_enabled(t->step_src, SD_EVENT_OFF);
        if (t->in_episode)
                log_target_debug(t, "episode aborted after %u steps: %s", t->episode_steps, why);
        t->in_episode = false;
}


static void on_step_done(struct reclaim_target *t, const struct target_step *s);

/* One bounded step of an episode: planned here, its writes on a thread (target-step.c), the
 * rest in on_step_done(). */
int target_episode_step(sd_event_source *s, void *userdata) {
        struct reclaim_target *t = userdata;
        struct memcg_sample before;
        struct reclaim_step p;
        int r;
        (void) s;

        if (!t->in_episode || t->step)
                return 0;
        if (unit_cap_busy(t, -1))
                return 0; /* a write through systemd in flight: the step comes when it is done */
        if (!t->cg || !t->bounds_ok) {
                target_episode_abort(t, "the cgroup or its bounds are gone");
                return 0;
        }
        r = target_sample(t, &before);
        if (r < 0) {
                target_episode_abort(t, "cannot read the cgroup");
                target_check(t, WAKE_TIMER); /* finds out what happened to the cgroup */
                return 0;
        }
        t->last = before;
        t->have_sample = true;
        if ((t->cap_lowered && !t->throttle) || !target_throttle_in_force(t, &before) || before.limit != t->bounds.limit) {
                /* Someone changed the limit (or a restore is pending): start over from target_check(). */
                target_episode_abort(t, "the limit changed");
                target_check(t, WAKE_TIMER);
                return 0;
        }
        struct reclaim_bounds b = t->bounds;
        if (t->step_now == 0 || t->step_now > b.step)
                t->step_now = b.step;
        b.step = t->step_now;
        plan_step(&b, &before, true, &p);
        if (p.verdict != RECLAIM_STEP) {
                target_episode_end(t, &p, plan_verdict_to_string(p.verdict), false);
                return 0;
        }

        /* v1: record the original before touching it, so a crash cannot leave it lowered (the
         * throttle recorded it already, unless there is none). */
        if (t->cg->version == MEMCG_V1 && target_record_original(t, t->bounds.limit) < 0) {
                target_episode_abort(t, "no record"); /* nothing was touched */
                target_set_state(t, TARGET_ERROR, "%s", strempty(t->record_error));
                target_hold_after_error(t);
                return 0;
        }
        struct target_step job = { .before = before, .plan = p, .amount = p.amount };
        if (t->cg->version == MEMCG_V1) {
                if (!t->cap_lowered) {
                        t->failcnt_seen = before.failcnt;
                        t->cap_lowered = true; /* from the write on, ours may be in force */
                }
                /* Until the thread is done, the throttle (or the original), then the step's
                 * limit, then the throttle again may be in force: all noted or recorded before
                 * the first write, so a kill -9 at any instant leaves a value the next start
                 * knows for ours. */
                job.new_limit = p.new_limit;
                job.put_back = t->throttle ?: t->recorded_cap;
                target_record_note_lowered(t, p.new_limit, t->throttle);
        }
        r = target_step_start(t, &job, on_step_done);
        if (r < 0) {
                /* Nothing was written: the throttle (or the original) is still in force. */
                log_target_warning_errno(t, r, "Cannot start a reclaim step: %m");
                if (t->cg->version == MEMCG_V1 && !t->throttle)
                        (void) target_record_restore(t);
                target_episode_abort(t, "no step thread");
                target_hold_after_error(t);
        }
        return 0;
}

/* v1: after the thread's writes the throttle, or the original, is in force; the record goes
 * (or the restore is retried) once the original is back. */
static int step_restore_v1(struct reclaim_target *t, const struct target_step *s) {
        if (!t->throttle)
                /* The original is back (or the thread could not write it): the record goes, or
                 * the restore is retried. */
                return target_record_restore(t);
        if (s->q < 0) {
                log_target_warning_errno(t, s->q, "Failed to put the throttle back on %s: %m", t->cgroup);
                return target_record_restore(t);
        }
        return 0;
}

/* What the step took and what it gave: the next step's size, counters, the sample after. */
static void step_account(struct reclaim_target *t, const struct target_step *s) {
        usec_t took = s->took;
        struct memcg_sample after;

        /* v1: keep one write short, since the writer meets the step's lowered limit until the
         * thread puts the throttle back: dirty or busy cache makes the kernel wait (writeback),
         * so a slow write halves the next step (down to 1 MiB) and a quick one lets it grow
         * back. v2's memory.reclaim lowers nothing the writer meets: the whole step each time. */
        bool v1 = t->cg && t->cg->version == MEMCG_V1;
        if (v1 && took > STEP_SLOW && t->step_now > STEP_MIN)
                t->step_now = MAX(t->step_now / 2, STEP_MIN);
        else if (v1 && took < STEP_SLOW / 4 && t->step_now < t->bounds.step)
                t->step_now = t->step_now > t->bounds.step / 2 ? t->bounds.step : t->step_now * 2;
        t->last_step = took;
        t->max_step = MAX(t->max_step, took);
        t->n_steps++;
        t->episode_steps++;
        (void) metric_inc(t->ctx->metrics.steps, t->settings.name);
        (void) metric_observe(t->ctx->metrics.step_seconds, (double) took / USEC_PER_SEC, t->settings.name);

        if (target_sample(t, &after) < 0)
                return;
        t->last = after;
        if (after.usage < s->before.usage) {
                uint64_t got = s->before.usage - after.usage;
                t->episode_bytes += got;
                t->bytes_reclaimed += got;
                (void) metric_add(t->ctx->metrics.bytes, (double) got, t->settings.name);
        }
        (void) target_throttle_follow(t, &after); /* a failure is retried by the next check */
}

/* The episode after a step: r is the step's result, q the v1 restore's. */
static void step_verdict(struct reclaim_target *t, const struct reclaim_step *p, int r, int q) {
        if (plan_step_error_is_transient(r) && q >= 0) {
                /* The kernel could not reclaim that much (dirty or busy pages, or the workload
                 * faster than us): stop here; the next wake-up tries again. */
                t->n_step_errors++;
                (void) metric_inc(t->ctx->metrics.step_errors, t->settings.name, r == -EBUSY ? "busy" : "again");
                target_episode_end(t, p, r == -EBUSY ? "the kernel could not reclaim enough (EBUSY)"
                                               : "the kernel reclaimed less than asked (EAGAIN)", true);
                return;
        }
        if (r < 0 && !memcg_exists(t->cg)) {
                target_episode_abort(t, "the cgroup was removed");
                target_check(t, WAKE_TIMER); /* detaches, says missing */
                return;
        }
        if (r < 0) {
                /* A hard error (the write refused, or the original could not be put back): no
                 * new episode at once — that would fail the same way, in a loop — but after a
                 * backoff, from the timer. */
                t->n_step_errors++;
                (void) metric_inc(t->ctx->metrics.step_errors, t->settings.name, "error");
                log_target_warning_errno(t, r, "Reclaim step failed: %m");
                target_episode_abort(t, "step failed");
                target_set_state(t, TARGET_ERROR, "%s: %s",
                          q < 0 ? "cannot restore memory.limit_in_bytes" : "the reclaim write failed",
                          strerror(-r));
                target_hold_after_error(t);
                return;
        }
        if (p->last || t->episode_steps >= EPISODE_MAX_STEPS) {
                /* Looked at again either way: a writer may charge on past the last step, and
                 * one that stops just after it leaves no crossing of high to wake us. */
                target_episode_end(t, p,
                            !p->last ? "step budget used" : t->last.usage > p->goal ? "last step done, the writer charged on" : "goal reached",
                            true);
                return;
        }
        target_episode_schedule_step(t);
}

/* After the writes (in force now: v2 what the kernel reclaimed; v1 the throttle or the
 * original back over the step's limit). */
static void on_step_done(struct reclaim_target *t, const struct target_step *s) {
        int r = s->r, q = 0;

        if (!t->cg)
                target_episode_abort(t, "the cgroup is gone");
        else {
                if (t->cg->version == MEMCG_V1)
                        q = step_restore_v1(t, s);
                if (r >= 0 && q < 0)
                        r = q;
                step_account(t, s);
                step_verdict(t, &s->plan, r, q);
        }
        /* A wake-up put off while the step was in flight: the episode's next step samples
         * anyway, otherwise it is looked at now. */
        if (t->step_replay >= 0 && !t->step) {
                int source = t->step_replay;
                t->step_replay = -1;
                target_check(t, (enum wake_source) source);
        }
}

/* Every wake-up ends here: sample, compare with high, start an episode if needed. */
