/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "observer-list.h"
#include "pod-events.h"

struct pod_events {
        struct observer_list observers;
};

int pod_events_new(struct pod_events **ret) {
        struct pod_events *e;

        if (!ret)
                return -EINVAL;
        e = calloc(1, sizeof(*e));
        if (!e)
                return -ENOMEM;
        *ret = e;
        return 0;
}

struct pod_events *pod_events_free(struct pod_events *e) {
        if (!e)
                return NULL;
        observer_list_done(&e->observers);
        free(e);
        return NULL;
}

int pod_events_add_observer(struct pod_events *e, pod_event_fn fn, void *userdata) {
        if (!e || !fn)
                return -EINVAL;
        return observer_list_add(&e->observers, (observer_list_fn) fn, userdata, 0);
}

void pod_events_remove_observer(struct pod_events *e, pod_event_fn fn, void *userdata) {
        if (e)
                observer_list_remove(&e->observers, (observer_list_fn) fn, userdata);
}

bool pod_events_observed(const struct pod_events *e) {
        return e && observer_list_has_any(&e->observers);
}

/* Cuts s at most max bytes long without splitting a UTF-8 sequence. */
static void cut_utf8(char *s, size_t max) {
        size_t n = strlen(s);

        if (n <= max)
                return;
        n = max;
        while (n > 0 && ((unsigned char) s[n] & 0xC0) == 0x80)
                n--;
        s[n] = 0;
}

void pod_event_emit(struct pod_events *e, const char *uid, enum pod_event_type type, const char *reason,
                    const char *action, const char *format, ...) {
        _cleanup_free_ char *note = NULL;
        struct pod_event ev;
        va_list ap;
        int r;

        if (!e || !uid || !reason || !observer_list_has_any(&e->observers))
                return;
        va_start(ap, format);
        r = vasprintf(&note, format, ap);
        va_end(ap);
        if (r < 0)
                return; /* out of memory: the module's log line still says it */
        cut_utf8(note, POD_EVENT_NOTE_MAX);

        ev = (struct pod_event) { .uid = uid, .type = type, .reason = reason, .action = action ?: "", .note = note };
        for (size_t i = 0, n = observer_list_begin(&e->observers); i < n; i++) {
                struct observer_list_entry o;
                if (observer_list_get(&e->observers, i, &o))
                        ((pod_event_fn) o.fn)(&ev, o.userdata);
        }
        observer_list_end(&e->observers);
}
