/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "clock-watch.h"
#include "macro.h"

/* A move of the wall clock this large, seen by clock_watch_check() before the kernel cancelled
 * the timerfd, is reported as a step at once (smaller ones wait for the kernel's word). */
#define EARLY_STEP_MIN 1000000

struct clock_watch {
        int fd;
        sd_event_source *source;
        int64_t offset; /* CLOCK_REALTIME - CLOCK_BOOTTIME when last armed */
        bool reported_early; /* a step reported before the kernel cancelled the timerfd */
        clock_watch_fn fn;
        void *userdata;
};

static int64_t realtime_offset(void) {
        return (int64_t) now_usec(CLOCK_REALTIME) - (int64_t) now_usec(CLOCK_BOOTTIME);
}

/* An absolute timer in the year 2242: it never expires, it is only ever cancelled. */
static int arm(struct clock_watch *w) {
        const struct itimerspec never = { .it_value.tv_sec = (time_t) ((UINT64_C(1) << 33) - 1) };
        if (timerfd_settime(w->fd, TFD_TIMER_ABSTIME | TFD_TIMER_CANCEL_ON_SET, &never, NULL) < 0)
                return -errno;
        return 0;
}

/* Re-armed before the offset is read: a step between the two is then either in this report or
 * in the next one, never in neither. early: asked by clock_watch_check(). The kernel sets the
 * clock and fires the CLOCK_REALTIME timers it passed before it cancels this timerfd, so a
 * timer's handler can run in between: there a large move of the offset is the step, reported
 * then, and the cancel that follows it is not reported again. */
static bool consume(struct clock_watch *w, bool early) {
        uint64_t expirations;
        bool canceled = read(w->fd, &expirations, sizeof(expirations)) < 0 && errno == ECANCELED;
        int64_t now = realtime_offset(), delta = now - w->offset;
        bool large = delta >= EARLY_STEP_MIN || delta <= -EARLY_STEP_MIN;

        if (canceled) {
                (void) arm(w);
                bool seen = w->reported_early && !large;
                w->reported_early = false;
                w->offset = now;
                if (seen)
                        return false;
        } else if (early && large) {
                w->reported_early = true;
                w->offset = now;
        } else
                return false;
        w->fn(w, delta, w->userdata);
        return true;
}

static int on_io(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        (void) consume(userdata, false);
        return 0;
}

bool clock_watch_check(struct clock_watch *w) {
        return w && consume(w, true);
}

int clock_watch_new(sd_event *e, int64_t priority, clock_watch_fn fn, void *userdata, struct clock_watch **ret) {
        struct clock_watch *w = calloc(1, sizeof(*w));
        int r;

        if (!w)
                return -ENOMEM;
        w->fn = fn;
        w->userdata = userdata;
        w->fd = timerfd_create(CLOCK_REALTIME, TFD_NONBLOCK | TFD_CLOEXEC);
        if (w->fd < 0) {
                r = -errno;
                free(w);
                return r;
        }
        w->offset = realtime_offset();
        r = arm(w);
        if (r >= 0)
                r = sd_event_add_io(e, &w->source, w->fd, EPOLLIN, on_io, w);
        if (r >= 0)
                r = sd_event_source_set_priority(w->source, priority);
        if (r < 0) {
                clock_watch_free(w);
                return r;
        }
        *ret = w;
        return 0;
}

struct clock_watch *clock_watch_free(struct clock_watch *w) {
        if (!w)
                return NULL;
        sd_event_source_disable_unref(w->source);
        if (w->fd >= 0)
                close(w->fd);
        free(w);
        return NULL;
}
