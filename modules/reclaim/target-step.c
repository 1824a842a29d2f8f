/* SPDX-License-Identifier: MIT */
/* target-step: the kernel writes of one reclaim step, on a thread of their own (offload.c).
 * The kernel reclaims inside the write — a v2 memory.reclaim, a v1 lowered
 * memory.limit_in_bytes — and waits there for dirty pages' writeback: 20-85 ms a write on v1
 * under a dd writer, which the event loop would otherwise spend waiting. The job carries plain
 * values only (its own copy of the cgroup's directory, the amount or the limits); the loop
 * takes the result in target-episode.c's done callback, which does everything after the write. While
 * a step is in flight the target is busy: target_check() puts wake-ups off (replayed after
 * the step), and whatever lets go of the cgroup first waits for the step (target_step_cancel()). */
#include <stdlib.h>
#include <string.h>

#include "offload.h"
#include "target-internal.h"

static int step_run(void *job, const atomic_bool *stop) {
        struct target_step *s = job;

        if (offload_stopped(stop))
                return -ECANCELED; /* nothing written */
        usec_t t0 = now_usec(CLOCK_MONOTONIC);
        if (s->cg.version == MEMCG_V1) {
                s->r = memcg_set_limit(&s->cg, s->new_limit);
                /* At once, also after a failure and when asked to stop: the throttle (or the
                 * original) is back in force before the thread ends. Raising never reclaims. */
                s->q = memcg_set_limit(&s->cg, s->put_back);
        } else
                s->r = memcg_reclaim(&s->cg, s->amount);
        s->took = now_usec(CLOCK_MONOTONIC) - t0;
        return 0;
}

static void step_free(struct target_step *s) {
        if (!s)
                return;
        s->work = offload_free(s->work);
        free(s->cg.dir);
        free(s->cg.path);
        free(s);
}

static void on_done(struct offload *w, int result, void *userdata) {
        struct reclaim_target *t = userdata;
        struct target_step *s = t->step;
        (void) w;

        t->step = NULL; /* not busy from here on: the callback may start the next step */
        s->work = offload_free(s->work);
        if (result < 0) {
                s->r = result;
                s->q = result;
        }
        t->step_done(t, s);
        step_free(s);
}

int target_step_start(struct reclaim_target *t, const struct target_step *job, void (*done)(struct reclaim_target *t, const struct target_step *s)) {
        struct target_step *s;
        int r;

        if (t->step || !t->cg)
                return -EBUSY;
        s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        *s = *job;
        s->work = NULL;
        s->cg.version = t->cg->version;
        s->cg.dir = strdup(t->cg->dir);
        s->cg.path = t->cg->path ? strdup(t->cg->path) : NULL;
        if (!s->cg.dir || (t->cg->path && !s->cg.path)) {
                step_free(s);
                return -ENOMEM;
        }
        t->step_done = done;
        r = offload_start(t->ctx->event, "reclaim-step", step_run, s, on_done, t, &s->work);
        if (r < 0) {
                step_free(s);
                return r;
        }
        t->step = s;
        return 0;
}

void target_step_cancel(struct reclaim_target *t) {
        struct target_step *s = t->step;
        if (!s)
                return;
        t->step = NULL;
        /* Waits for the thread: a write under way ends (v1: with the throttle or the original
         * put back, which the next restore or step finds in force); done is not called. */
        step_free(s);
        t->step_replay = -1;
}
