/* SPDX-License-Identifier: MIT */
#pragma once

/* The event correlator: what to do with a pod event before it becomes a Kubernetes Event, decided
 * the way client-go's event recorder decides it (tools/record/events_cache.go), so `kubectl
 * describe pod` shows pinion's events counted and combined like any controller's:
 *
 *   1. aggregation: events that differ only in their note (same pod, type, reason, action) are
 *      "similar". Within aggregate_window of the previous similar event, the first
 *      aggregate_max_events - 1 distinct notes keep their own Event objects; any other note is
 *      posted as the one combined Event "(combined from similar events): <latest note>".
 *   2. dedup: an event seen before (the same note, or the combined Event of its kind) is a
 *      SERIES on the Event object created for its first occurrence, with its count; else CREATE.
 *   3. spam filter: a token bucket per pod (spam_burst, refilled at spam_qps). Without a token the
 *      event is DROPped, but it still counts: the next event of its series that is posted
 *      carries the number of occurrences, suppressed ones included (client-go does the same).
 *
 * Pure: no I/O, no clock reads (the caller passes realtime `now`), no logging. Each of the three
 * caches holds at most cache_max entries and forgets the least recently used. */

#include <stddef.h>

#include "macro.h"
#include "pod-events.h"

struct event_correlator;

struct event_correlator_settings {
        usec_t aggregate_window;       /* similar events further apart than this start afresh */
        unsigned aggregate_max_events; /* the aggregate_max_events-th distinct note is combined */
        double spam_qps;               /* per pod refill */
        unsigned spam_burst;           /* per pod */
        size_t cache_max;              /* entries of each cache (spam, aggregation, dedup) */
};

/* client-go's defaults: 10 distinct notes in 10 minutes, 25 events per pod then one per 5 minutes,
 * 4096 entries per cache. */
#define EVENT_CORRELATOR_SETTINGS_DEFAULT                     \
        ((struct event_correlator_settings) {                 \
                .aggregate_window = 10 * USEC_PER_MINUTE,     \
                .aggregate_max_events = 10,                   \
                .spam_qps = 1.0 / 300.0,                      \
                .spam_burst = 25,                             \
                .cache_max = 4096,                            \
        })

/* Combined notes start with this. */
#define EVENT_CORRELATOR_COMBINED_PREFIX "(combined from similar events): "

enum event_verdict {
        EVENT_VERDICT_CREATE, /* POST a new Event named `name`, count 1 */
        EVENT_VERDICT_SERIES, /* PATCH the Event `name`: count, note, last seen now */
        EVENT_VERDICT_DROP,   /* post nothing (spam) */
        _EVENT_VERDICT_MAX,
};

struct event_decision {
        enum event_verdict verdict;
        char *note;        /* what to post: the note, or the combined note (at most POD_EVENT_NOTE_MAX bytes) */
        char *name;        /* SERIES: the name given at CREATE; CREATE: a copy of new_name; DROP: NULL */
        unsigned count;    /* SERIES: >= 2; CREATE: 1; DROP: 0 */
        usec_t first_seen; /* realtime of the series' first occurrence (CREATE: now) */
};

/* -EINVAL if a setting is out of range (aggregate_max_events, spam_burst or cache_max zero,
 * aggregate_max_events over 1024, spam_qps negative or NaN). */
int event_correlator_new(const struct event_correlator_settings *s, struct event_correlator **ret);
struct event_correlator *event_correlator_free(struct event_correlator *c);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct event_correlator *, event_correlator_free);

/* Decides what to do with ev at realtime `now`; new_name is the name a new Event object would get
 * (e.g. "<pod-name>.<hex now ns>"). ret is filled on success (release it with
 * event_decision_done()) and left empty on error: -EINVAL for a missing or empty field, -ENOMEM
 * (then nothing was recorded). */
int event_correlator_observe(struct event_correlator *c, const struct pod_event *ev, const char *new_name, usec_t now,
                             struct event_decision *ret);
/* Frees the decision's strings. Inline, so that its name can stay short and still not be a
 * symbol of this file's that does not begin with its name (test_layout.py). */
static inline void event_decision_done(struct event_decision *d) {
        if (!d)
                return;
        d->note = mfree(d->note);
        d->name = mfree(d->name);
}

/* The Event object `name` could not be patched (it expired on the server): the next occurrence of
 * its event CREATEs again. */
void event_correlator_forget_name(struct event_correlator *c, const char *name);
/* The pod is gone: drops its spam bucket, aggregation and dedup entries. */
void event_correlator_forget_pod(struct event_correlator *c, const char *uid);
/* Entries held in all three caches. */
size_t event_correlator_size(const struct event_correlator *c);

const char *event_correlator_verdict_to_string(enum event_verdict v);
