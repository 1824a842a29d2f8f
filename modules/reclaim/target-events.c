/* SPDX-License-Identifier: MIT */
/* The kernel notifications that wake a target: v1 usage thresholds (at high and the backstop)
 * and memory.pressure_level through cgroup.event_control eventfds; v2 a PSI trigger on
 * memory.pressure and inotify on memory.events. */
#include <inttypes.h>
#include <stdio.h>
#include <sys/inotify.h>

#include "target-internal.h"

void target_events_drop_thresholds(struct reclaim_target *t) {
        for (size_t i = 0; i < ELEMENTSOF(t->threshold_src); i++)
                t->threshold_src[i] = sd_event_source_disable_unref(t->threshold_src[i]);
}

static int on_eventfd(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        struct reclaim_target *t = userdata;
        uint64_t v;
        (void) revents;
        /* Drains the counter, or the eventfd stays readable; the count itself tells nothing
         * target_check() does not read from the cgroup. */
        if (read(fd, &v, sizeof(v)) < 0)
                v = 0;
        target_check(t, s == t->pressure_src ? WAKE_PRESSURE : s == t->threshold_src[1] ? WAKE_BACKSTOP : WAKE_THRESHOLD);
        return 0;
}

static int on_psi(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        struct reclaim_target *t = userdata;
        (void) s;
        (void) fd;
        if (revents & EPOLLERR) {
                /* The cgroup went away under the trigger. */
                t->psi_src = sd_event_source_disable_unref(t->psi_src);
        }
        target_check(t, WAKE_PSI);
        return 0;
}

static int on_memory_events(sd_event_source *s, const struct inotify_event *ev, void *userdata) {
        struct reclaim_target *t = userdata;
        (void) s;
        if (ev->mask & (IN_IGNORED | IN_DELETE_SELF))
                t->events_src = sd_event_source_disable_unref(t->events_src);
        target_check(t, WAKE_EVENTS);
        return 0;
}

/* The cap's file was written. Our own writes (the throttle, a step and its put-back) come here
 * too, after the fact: a value of ours in force is not news. Anything else — systemd
 * re-applying its unit's MemoryHigh=/MemoryMax= on daemon-reload or set-property, an operator,
 * the kubelet — is checked at once: taken as the new original, the throttle lowered again. */
static int on_cap_written(sd_event_source *s, const struct inotify_event *ev, void *userdata) {
        struct reclaim_target *t = userdata;
        uint64_t cur;
        (void) s;
        if (ev->mask & (IN_IGNORED | IN_DELETE_SELF)) {
                t->cap_src = sd_event_source_disable_unref(t->cap_src);
                return 0;
        }
        if (!t->cg || t->in_episode || (t->throttle && memcg_read_cap(t->cg, &cur) >= 0 && target_record_cap_is_ours(t, cur)))
                return 0;
        if (!t->throttle && !t->cap_lowered && memcg_read_cap(t->cg, &cur) >= 0 && cur == t->recorded_cap)
                return 0; /* our restore of the original */
        target_check(t, WAKE_CAP);
        return 0;
}

static int add_threshold(struct reclaim_target *t, uint64_t level, sd_event_source **ret) {
        int fd = -EBADF, r;
        r = memcg_v1_threshold_fd(t->cg, level, &fd);
        if (r < 0)
                return log_target_warning_errno(t, r, "Failed to register the usage threshold %" PRIu64 ": %m", level);
        r = sd_event_add_io(t->ctx->event, ret, fd, EPOLLIN, on_eventfd, t);
        if (r < 0) {
                safe_close(fd);
                return r;
        }
        (void) sd_event_source_set_io_fd_own(*ret, true);
        (void) sd_event_source_set_priority(*ret, SD_EVENT_PRIORITY_IMPORTANT);
        return 0;
}

/* The PSI trigger. Kernels with unprivileged PSI triggers (newer upstream ones, and Debian's
 * 6.1) take a window that is not a multiple of 2 s only from an opener with CAP_SYS_RESOURCE
 * (EINVAL otherwise), which piniond.service withholds (the default window is 2 s). A shorter one
 * from the config is tried once more with the window rounded up to whole 2 s and the stall
 * scaled alike — a trigger still — and that is said once at info, not warned about at every
 * check. */
static int psi_fd(struct reclaim_target *t, int *ret_fd) {
        unsigned long stall, window;
        char kind[8], rounded[64];
        int r = memcg_v2_psi_fd(t->cg, t->settings.psi, ret_fd);
        if (r != -EINVAL || sscanf(t->settings.psi, "%7s %lu %lu", kind, &stall, &window) != 3 || window % 2000000 == 0)
                return r;
        unsigned long w = (window + 1999999) / 2000000 * 2000000;
        snprintf(rounded, sizeof(rounded), "%s %lu %lu", kind, stall * (w / 1000) / (window / 1000), w);
        int q = memcg_v2_psi_fd(t->cg, rounded, ret_fd);
        if (q < 0)
                return r;
        if (!t->psi_rounded_said)
                log_target_info(t, "The kernel refused the PSI trigger '%s' (a window that is not a multiple of 2 s needs CAP_SYS_RESOURCE): using '%s'",
                                t->settings.psi, rounded);
        t->psi_rounded_said = true;
        return 0;
}

static int arm_cap_watch(struct reclaim_target *t) {
        if (t->cap_src)
                return 0;
        _cleanup_free_ char *p = memcg_file(t->cg, memcg_cap_name(t->cg->version));
        if (!p)
                return -ENOMEM;
        int r = sd_event_add_inotify(t->ctx->event, &t->cap_src, p, IN_MODIFY, on_cap_written, t);
        if (r < 0)
                return log_target_warning_errno(t, r, "Failed to watch %s: %m", p);
        return 0;
}

/* Registers the wake-ups for the current bounds; the v1 thresholds are re-registered when high
 * changes (a new limit). Failures leave the timer as the only wake-up and are reported. */
int target_events_arm(struct reclaim_target *t) {
        int r, fd = -EBADF;

        target_events_drop_thresholds(t);
        if (t->cg->version == MEMCG_V1) {
                if (t->bounds_ok) {
                        r = add_threshold(t, t->bounds.high, &t->threshold_src[0]);
                        if (r < 0)
                                return r;
                        uint64_t backstop = plan_backstop_level(&t->bounds);
                        if (backstop > 0) {
                                r = add_threshold(t, backstop, &t->threshold_src[1]);
                                if (r < 0)
                                        return r;
                        }
                }
                if (!t->pressure_src && !isempty(t->settings.pressure_level)) {
                        r = memcg_v1_pressure_fd(t->cg, t->settings.pressure_level, &fd);
                        if (r < 0)
                                return log_target_warning_errno(t, r, "Failed to register memory.pressure_level: %m");
                        r = sd_event_add_io(t->ctx->event, &t->pressure_src, fd, EPOLLIN, on_eventfd, t);
                        if (r < 0) {
                                safe_close(fd);
                                return r;
                        }
                        (void) sd_event_source_set_io_fd_own(t->pressure_src, true);
                }
                return arm_cap_watch(t);
        }
        if (!t->psi_src && !isempty(t->settings.psi)) {
                r = psi_fd(t, &fd);
                if (r < 0)
                        log_target_warning_errno(t, r, "Failed to set the PSI trigger '%s' on memory.pressure: %m",
                                                 t->settings.psi);
                else {
                        r = sd_event_add_io(t->ctx->event, &t->psi_src, fd, EPOLLPRI, on_psi, t);
                        if (r < 0) {
                                safe_close(fd);
                                return r;
                        }
                        (void) sd_event_source_set_io_fd_own(t->psi_src, true);
                        (void) sd_event_source_set_priority(t->psi_src, SD_EVENT_PRIORITY_IMPORTANT);
                }
        }
        if (!t->events_src) {
                _cleanup_free_ char *p = memcg_file(t->cg, "memory.events");
                if (!p)
                        return -ENOMEM;
                r = sd_event_add_inotify(t->ctx->event, &t->events_src, p, IN_MODIFY, on_memory_events, t);
                if (r < 0)
                        return log_target_warning_errno(t, r, "Failed to watch %s: %m", p);
        }
        return arm_cap_watch(t);
}

/* A wake-up source that should be there and is not (its registration failed, or the kernel
 * dropped it): target_check() arms it again. */
bool target_events_missing(const struct reclaim_target *t) {
        if (t->cg->version == MEMCG_V1)
                return (t->bounds_ok && (!t->threshold_src[0] || (!t->threshold_src[1] && plan_backstop_level(&t->bounds) > 0))) ||
                       (!t->pressure_src && !isempty(t->settings.pressure_level)) || !t->cap_src;
        return (!t->psi_src && !isempty(t->settings.psi)) || !t->events_src || !t->cap_src;
}
