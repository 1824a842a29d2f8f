/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "clock-watch.h"
#include "macro.h"

struct clock_watch {
        int fd;
        sd_event_source *source;
        int64_t offset; /* CLOCK_REALTIME - CLOCK_BOOTTIME when last armed */
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
 * in the next one, never in neither. */
static bool consume(struct clock_watch *w) {
        uint64_t expirations;
        if (read(w->fd, &expirations, sizeof(expirations)) >= 0 || errno != ECANCELED)
                return false;
        (void) arm(w);
        int64_t now = realtime_offset(), delta = now - w->offset;
        w->offset = now;
        w->fn(w, delta, w->userdata);
        return true;
}

static int on_io(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        (void) consume(userdata);
        return 0;
}

bool clock_watch_check(struct clock_watch *w) {
        return w && consume(w);
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
