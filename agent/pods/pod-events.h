/* SPDX-License-Identifier: MIT */
#pragma once

/* Pod events: what the node did for a pod that an operator wants to see beside the pod
 * (`kubectl describe pod`): an identity issued or rotated, a config synced, the network wired, a
 * registration made or removed, and each of those failing. Modules announce them here; the
 * apiserver module, while it runs, observes them and posts them as Kubernetes Events on the pod.
 * Without an observer (a VM, pods-dir mode) an announcement costs nothing: the module's own log
 * line already says it.
 *
 * The reasons are a fixed vocabulary, one per outcome (POD_EVENT_REASON_*), so an operator can
 * filter on them (`kubectl get events --field-selector reason=ConfigFailed`). */

#include <stdarg.h>

#include "macro.h"

struct pod_events;

enum pod_event_type {
        POD_EVENT_NORMAL,
        POD_EVENT_WARNING,
};

/* reason: CamelCase, what happened; action: the verb the agent was doing (events.k8s.io's
 * `action`). */
#define POD_EVENT_IDENTITY_ISSUED "IdentityIssued"   /* Normal, action Issue */
#define POD_EVENT_IDENTITY_ROTATED "IdentityRotated" /* Normal, action Rotate */
#define POD_EVENT_IDENTITY_FAILED "IdentityFailed"   /* Warning, action Issue */
#define POD_EVENT_CONFIG_SYNCED "ConfigSynced"       /* Normal, action Sync */
#define POD_EVENT_CONFIG_FAILED "ConfigFailed"       /* Warning, action Sync */
#define POD_EVENT_NETWORK_WIRED "NetworkWired"       /* Normal, action Wire */
#define POD_EVENT_NETWORK_FAILED "NetworkFailed"     /* Warning, action Wire */
#define POD_EVENT_REGISTERED "Registered"            /* Normal, action Register */
#define POD_EVENT_DEREGISTERED "Deregistered"        /* Normal, action Deregister */
#define POD_EVENT_RECLAIM_UNREACHABLE "ReclaimUnreachable" /* Warning, action Reclaim */

struct pod_event {
        const char *uid;    /* the pod's metadata.uid */
        enum pod_event_type type;
        const char *reason; /* POD_EVENT_* */
        const char *action; /* "Issue", "Rotate", "Sync", "Wire", "Register", "Deregister", "Reclaim" */
        const char *note;   /* what happened, for a person: at most POD_EVENT_NOTE_MAX bytes */
};

#define POD_EVENT_NOTE_MAX 1024 /* events.k8s.io refuses a note over 1 KiB */

/* Called synchronously from pod_event_emit(); ev and its strings are borrowed for the call. */
typedef void (*pod_event_fn)(const struct pod_event *ev, void *userdata);

int pod_events_new(struct pod_events **ret);
struct pod_events *pod_events_free(struct pod_events *e);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct pod_events *, pod_events_free);

/* -EEXIST if the pair is there already. An observer may add and remove observers from inside a
 * call (observer-list.h). */
int pod_events_add_observer(struct pod_events *e, pod_event_fn fn, void *userdata);
void pod_events_remove_observer(struct pod_events *e, pod_event_fn fn, void *userdata);
bool pod_events_observed(const struct pod_events *e);

/* Announces an event about the pod with this uid to every observer. The note is formatted and
 * cut at POD_EVENT_NOTE_MAX bytes (on a UTF-8 boundary). NULL e or uid: nothing happens. */
void pod_event_emit(struct pod_events *e, const char *uid, enum pod_event_type type, const char *reason,
                    const char *action, const char *format, ...) _printf_(6, 7);
