/* SPDX-License-Identifier: MIT */
/* Kubernetes Events for the node's pods (event-writer.h): a pod's start gathered into one, the
 * correlator's verdict, a node-wide budget, a bounded queue, then the module's write queue. */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "event-correlator.h"
#include "event-writer.h"
#include "json.h"
#include "log.h"
#include "pod-store.h"
#include "timer.h"
#include "token-bucket.h"

#define MODULE "apiserver"
#define EVENT_NAME_MAX 253
#define PROVISIONED_REASON "Provisioned"
#define PROVISIONED_ACTION "Provision"

/* A pod's start, being gathered. */
struct held {
        char *uid;
        usec_t deadline; /* monotonic */
        unsigned n;
        char *reason, *action; /* the first event's */
        char *note;            /* "Reason: note; Reason: note" once n > 1, else the note */
        char *first_note;
};

/* An Event waiting for its write. */
struct pending {
        uint64_t seq;
        char key[24];
        bool create;   /* POST a new Event; else PATCH the series of `name` */
        unsigned count;
        unsigned series_after_create; /* repeats seen while the create waited: a PATCH follows */
        usec_t event_time, last_observed; /* realtime */
        char *name, *namespace, *pod_name, *pod_uid, *pod_rv;
        char *type, *reason, *action, *note;
};

struct event_writer {
        struct manager *manager;
        struct kube_writer *writer;
        struct kube_write_client client;
        struct event_writer_settings settings;
        struct event_writer_metrics metrics;
        struct event_correlator *correlator;
        struct token_bucket budget; /* node-wide */
        bool observing_events, observing_pods;

        struct held *held;
        size_t n_held;
        char **started; /* uids whose start has been posted (or had nothing to gather) */
        size_t n_started;
        sd_event_source *timer;

        struct pending **queue;
        size_t n_queue;
        uint64_t next_seq, n_names;
        char *error;
        uint64_t n_created, n_series, n_dropped, n_refused;
};

static const char *type_name(enum pod_event_type t) {
        return t == POD_EVENT_WARNING ? "Warning" : "Normal";
}

/* ---- the pending queue ---- */

static struct pending *pending_free(struct pending *e) {
        if (!e)
                return NULL;
        free(e->name);
        free(e->namespace);
        free(e->pod_name);
        free(e->pod_uid);
        free(e->pod_rv);
        free(e->type);
        free(e->reason);
        free(e->action);
        free(e->note);
        free(e);
        return NULL;
}

static struct pending *find_pending(const struct event_writer *ew, const char *key, size_t *ret_i) {
        for (size_t i = 0; i < ew->n_queue; i++)
                if (streq(ew->queue[i]->key, key)) {
                        if (ret_i)
                                *ret_i = i;
                        return ew->queue[i];
                }
        return NULL;
}

static struct pending *find_pending_name(const struct event_writer *ew, const char *name) {
        for (size_t i = 0; i < ew->n_queue; i++)
                if (streq(ew->queue[i]->name, name))
                        return ew->queue[i];
        return NULL;
}

static void remove_pending(struct event_writer *ew, size_t i, bool forget_write) {
        if (forget_write)
                kube_writer_forget(ew->writer, &ew->client, ew->queue[i]->key);
        pending_free(ew->queue[i]);
        memmove(&ew->queue[i], &ew->queue[i + 1], (ew->n_queue - i - 1) * sizeof(*ew->queue));
        ew->n_queue--;
}

static void count(struct event_writer *ew, const char *type, const char *result) {
        (void) metric_inc(ew->metrics.events, type, result);
}

static int push_pending(struct event_writer *ew, struct pending *e) {
        struct pending **grown;
        int r;

        if (ew->n_queue >= ew->settings.queue_max && ew->n_queue > 0) {
                /* The apiserver is away and the node keeps going: the oldest news goes first. */
                count(ew, ew->queue[0]->type, "dropped-queue");
                ew->n_dropped++;
                remove_pending(ew, 0, true);
        }
        grown = realloc(ew->queue, (ew->n_queue + 1) * sizeof(*ew->queue));
        if (!grown)
                return -ENOMEM;
        ew->queue = grown;
        e->seq = ++ew->next_seq;
        (void) snprintf(e->key, sizeof(e->key), "event-%llu", (unsigned long long) e->seq);
        ew->queue[ew->n_queue++] = e;
        r = kube_writer_want(ew->writer, &ew->client, e->key);
        if (r < 0)
                remove_pending(ew, ew->n_queue - 1, false);
        return r;
}

/* ---- posting one event ---- */

/* client-go's form: the object's name and the time in nanoseconds, in hex. The sequence number
 * in the nanoseconds keeps two events of one microsecond apart. */
static int new_event_name(struct event_writer *ew, const struct pod *p, usec_t now, char **ret) {
        int room = EVENT_NAME_MAX - 17;
        unsigned long long ns = (unsigned long long) now * 1000ULL + (++ew->n_names % 1000);
        return asprintf(ret, "%.*s.%llx", room, p->name, ns) < 0 ? -ENOMEM : 0;
}

static int pending_from(const struct pod *p, const struct pod_event *ev, const struct event_decision *d, usec_t now,
                        struct pending **ret) {
        struct pending *e = calloc(1, sizeof(*e));

        if (!e)
                return -ENOMEM;
        e->create = d->verdict == EVENT_VERDICT_CREATE;
        e->count = d->count;
        e->event_time = e->create ? now : d->first_seen;
        e->last_observed = now;
        e->name = strdup(d->name);
        e->namespace = strdup(p->namespace);
        e->pod_name = strdup(p->name);
        e->pod_uid = strdup(p->uid);
        e->pod_rv = p->resource_version ? strdup(p->resource_version) : NULL;
        e->type = strdup(type_name(ev->type));
        e->reason = strdup(ev->reason);
        e->action = strdup(ev->action);
        e->note = strdup(d->note ?: ev->note);
        if (!e->name || !e->namespace || !e->pod_name || !e->pod_uid || (p->resource_version && !e->pod_rv) || !e->type ||
            !e->reason || !e->action || !e->note) {
                pending_free(e);
                return -ENOMEM;
        }
        *ret = e;
        return 0;
}

/* A repeat of an Event still waiting: the write, when it goes, says the newest count. */
static bool coalesce_series(struct event_writer *ew, const struct event_decision *d, usec_t now) {
        struct pending *e = find_pending_name(ew, d->name);
        char *note;

        if (!e)
                return false;
        /* A combined Event not yet created says the latest note (once created, its note is
         * immutable: events.k8s.io refuses a change). */
        if (e->create && d->note && !streq(d->note, e->note) && (note = strdup(d->note))) {
                free(e->note);
                e->note = note;
        }
        if (e->create)
                e->series_after_create = d->count;
        else
                e->count = d->count;
        e->last_observed = now;
        return true;
}

static void post_event(struct event_writer *ew, const struct pod_event *ev) {
        struct pod *p = pod_store_get(ew->manager->pods, ev->uid);
        _cleanup_(event_decision_done) struct event_decision d = {};
        _cleanup_free_ char *name = NULL;
        usec_t now = now_usec(CLOCK_REALTIME);
        struct pending *e;
        int r;

        /* Only a pod the apiserver knows has an object to hang an Event on. */
        if (!p || !startswith(strempty(p->source), POD_SOURCE_APISERVER))
                return;
        if (!token_bucket_try_take(&ew->budget, now_usec(CLOCK_MONOTONIC), NULL)) {
                count(ew, type_name(ev->type), "dropped-rate");
                ew->n_dropped++;
                return;
        }
        r = new_event_name(ew, p, now, &name);
        if (r >= 0)
                r = event_correlator_observe(ew->correlator, ev, name, now, &d);
        if (r < 0) {
                log_module_warning_errno(MODULE, r, "Cannot record event %s for pod %s/%s: %m", ev->reason, p->namespace,
                                         p->name);
                return;
        }
        if (d.verdict == EVENT_VERDICT_DROP) {
                count(ew, type_name(ev->type), "dropped-spam");
                ew->n_dropped++;
                return;
        }
        if (d.verdict == EVENT_VERDICT_SERIES && coalesce_series(ew, &d, now))
                return;
        r = pending_from(p, ev, &d, now, &e);
        if (r >= 0)
                r = push_pending(ew, e);
        if (r < 0)
                log_module_warning_errno(MODULE, r, "Cannot queue event %s for pod %s/%s: %m", ev->reason, p->namespace,
                                         p->name);
}

/* ---- a pod's start, gathered ---- */

static bool started(const struct event_writer *ew, const char *uid, size_t *ret_i) {
        for (size_t i = 0; i < ew->n_started; i++)
                if (streq(ew->started[i], uid)) {
                        if (ret_i)
                                *ret_i = i;
                        return true;
                }
        return false;
}

static void mark_started(struct event_writer *ew, const char *uid) {
        char **grown;

        if (started(ew, uid, NULL))
                return;
        grown = realloc(ew->started, (ew->n_started + 1) * sizeof(char *));
        if (!grown)
                return; /* the next event is gathered again: harmless */
        ew->started = grown;
        if ((ew->started[ew->n_started] = strdup(uid)))
                ew->n_started++;
}

static struct held *find_held(const struct event_writer *ew, const char *uid, size_t *ret_i) {
        for (size_t i = 0; i < ew->n_held; i++)
                if (streq(ew->held[i].uid, uid)) {
                        if (ret_i)
                                *ret_i = i;
                        return &ew->held[i];
                }
        return NULL;
}

static void held_done(struct held *h) {
        free(h->uid);
        free(h->reason);
        free(h->action);
        free(h->note);
        free(h->first_note);
}

/* Posts what was gathered for a pod: the one event as it was, or several as one. */
static void flush_held(struct event_writer *ew, size_t i) {
        struct held h = ew->held[i];
        struct pod_event ev = { .uid = h.uid, .type = POD_EVENT_NORMAL };

        memmove(&ew->held[i], &ew->held[i + 1], (ew->n_held - i - 1) * sizeof(struct held));
        ew->n_held--;
        mark_started(ew, h.uid);
        if (h.n == 1)
                ev = (struct pod_event) { .uid = h.uid, .type = POD_EVENT_NORMAL, .reason = h.reason,
                                          .action = h.action, .note = h.first_note };
        else
                ev = (struct pod_event) { .uid = h.uid, .type = POD_EVENT_NORMAL, .reason = PROVISIONED_REASON,
                                          .action = PROVISIONED_ACTION, .note = h.note };
        post_event(ew, &ev);
        held_done(&h);
}

static int on_timer(sd_event_source *s, uint64_t usec, void *userdata);

static void arm_timer(struct event_writer *ew) {
        usec_t next = USEC_INFINITY;
        int r;

        for (size_t i = 0; i < ew->n_held; i++)
                next = MIN(next, ew->held[i].deadline);
        if (next == USEC_INFINITY) {
                if (ew->timer)
                        (void) sd_event_source_set_enabled(ew->timer, SD_EVENT_OFF);
                return;
        }
        r = timer_arm(ew->manager->event, &ew->timer, CLOCK_MONOTONIC, next, USEC_PER_MSEC, false, on_timer, ew);
        if (r < 0)
                log_module_warning_errno(MODULE, r, "Cannot arm the event timer: %m");
}

static int on_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        struct event_writer *ew = userdata;
        usec_t now = now_usec(CLOCK_MONOTONIC);

        for (size_t i = 0; i < ew->n_held;)
                if (ew->held[i].deadline <= now)
                        flush_held(ew, i);
                else
                        i++;
        arm_timer(ew);
        return 0;
}

static int gather(struct event_writer *ew, const struct pod_event *ev) {
        struct held *h = find_held(ew, ev->uid, NULL);
        char *joined;

        if (!h) {
                struct held *grown = realloc(ew->held, (ew->n_held + 1) * sizeof(struct held));
                if (!grown)
                        return -ENOMEM;
                ew->held = grown;
                h = &ew->held[ew->n_held];
                *h = (struct held) { .deadline = now_usec(CLOCK_MONOTONIC) + ew->settings.batch, .n = 1 };
                h->uid = strdup(ev->uid);
                h->reason = strdup(ev->reason);
                h->action = strdup(ev->action);
                h->first_note = strdup(ev->note);
                if (asprintf(&h->note, "%s: %s", ev->reason, ev->note) < 0)
                        h->note = NULL;
                if (!h->uid || !h->reason || !h->action || !h->first_note || !h->note) {
                        held_done(h);
                        return -ENOMEM;
                }
                ew->n_held++;
                arm_timer(ew);
                return 0;
        }
        if (asprintf(&joined, "%s; %s: %s", h->note, ev->reason, ev->note) < 0)
                return -ENOMEM;
        if (strlen(joined) > POD_EVENT_NOTE_MAX)
                joined[POD_EVENT_NOTE_MAX] = 0; /* the correlator's note is cut on a character; so is this */
        free(h->note);
        h->note = joined;
        h->n++;
        return 0;
}

static void on_pod_event(const struct pod_event *ev, void *userdata) {
        struct event_writer *ew = userdata;
        size_t i;

        if (ev->type == POD_EVENT_NORMAL && !started(ew, ev->uid, NULL) && ew->settings.batch > 0) {
                if (gather(ew, ev) >= 0)
                        return;
        }
        /* A warning is news now; what was gathered before it goes first, in order. */
        if (find_held(ew, ev->uid, &i))
                flush_held(ew, i);
        mark_started(ew, ev->uid);
        post_event(ew, ev);
        arm_timer(ew);
}

static void on_pod(struct pod_store *s, const struct pod *old, const struct pod *new, void *userdata) {
        struct event_writer *ew = userdata;
        size_t i;

        if (new)
                return;
        /* The pod is gone: its gathered start and its correlation with it (queued Events still go:
         * they say what happened before it went). */
        if (find_held(ew, old->uid, &i)) {
                held_done(&ew->held[i]);
                memmove(&ew->held[i], &ew->held[i + 1], (ew->n_held - i - 1) * sizeof(struct held));
                ew->n_held--;
        }
        if (started(ew, old->uid, &i)) {
                free(ew->started[i]);
                ew->started[i] = ew->started[--ew->n_started];
        }
        event_correlator_forget_pod(ew->correlator, old->uid);
}

/* ---- the write ---- */

static int micro_time(usec_t t, char *buf, size_t size) {
        char seconds[32];
        int r = json_format_rfc3339(t - t % USEC_PER_SEC, seconds, sizeof(seconds));
        if (r < 0)
                return r;
        /* MicroTime: "2026-12-02T18:00:00.123456Z" */
        seconds[strlen(seconds) - 1] = 0;
        return snprintf(buf, size, "%s.%06lluZ", seconds, (unsigned long long) (t % USEC_PER_SEC)) < (int) size ? 0
                                                                                                                 : -ENOBUFS;
}

static int create_body(const struct event_writer *ew, const struct pending *e, char **ret) {
        _cleanup_(cJSON_Deletep) cJSON *root = cJSON_CreateObject();
        cJSON *meta, *regarding;
        char when[48];

        if (!root || micro_time(e->event_time, when, sizeof(when)) < 0 ||
            !cJSON_AddStringToObject(root, "apiVersion", "events.k8s.io/v1") ||
            !cJSON_AddStringToObject(root, "kind", "Event") || !(meta = cJSON_AddObjectToObject(root, "metadata")) ||
            !cJSON_AddStringToObject(meta, "name", e->name) || !cJSON_AddStringToObject(meta, "namespace", e->namespace) ||
            !cJSON_AddStringToObject(root, "eventTime", when) ||
            !cJSON_AddStringToObject(root, "reportingController", EVENT_REPORTING_CONTROLLER) ||
            !cJSON_AddStringToObject(root, "reportingInstance", ew->manager->settings.node_name) ||
            !cJSON_AddStringToObject(root, "action", e->action) || !cJSON_AddStringToObject(root, "reason", e->reason) ||
            !cJSON_AddStringToObject(root, "type", e->type) || !cJSON_AddStringToObject(root, "note", e->note) ||
            !(regarding = cJSON_AddObjectToObject(root, "regarding")) ||
            !cJSON_AddStringToObject(regarding, "apiVersion", "v1") || !cJSON_AddStringToObject(regarding, "kind", "Pod") ||
            !cJSON_AddStringToObject(regarding, "namespace", e->namespace) ||
            !cJSON_AddStringToObject(regarding, "name", e->pod_name) ||
            !cJSON_AddStringToObject(regarding, "uid", e->pod_uid) ||
            (e->pod_rv && !cJSON_AddStringToObject(regarding, "resourceVersion", e->pod_rv)))
                return -ENOMEM;
        *ret = cJSON_PrintUnformatted(root);
        return *ret ? 0 : -ENOMEM;
}

static int series_body(const struct pending *e, char **ret) {
        _cleanup_(cJSON_Deletep) cJSON *root = cJSON_CreateObject();
        cJSON *series;
        char when[48];

        if (!root || micro_time(e->last_observed, when, sizeof(when)) < 0 ||
            !(series = cJSON_AddObjectToObject(root, "series")) ||
            !cJSON_AddNumberToObject(series, "count", (double) e->count) ||
            !cJSON_AddStringToObject(series, "lastObservedTime", when))
                return -ENOMEM;
        *ret = cJSON_PrintUnformatted(root);
        return *ret ? 0 : -ENOMEM;
}

static int build_write(void *userdata, const char *key, struct kube_write_request *ret) {
        struct event_writer *ew = userdata;
        struct pending *e = find_pending(ew, key, NULL);
        int r;

        if (!e)
                return -ENOENT;
        if (e->create) {
                r = create_body(ew, e, &ret->body);
                if (r >= 0 && asprintf(&ret->path, "/apis/events.k8s.io/v1/namespaces/%s/events", e->namespace) < 0)
                        r = -ENOMEM;
                ret->method = "POST";
                ret->verb = "create";
                ret->content_type = "application/json";
        } else {
                r = series_body(e, &ret->body);
                if (r >= 0 &&
                    asprintf(&ret->path, "/apis/events.k8s.io/v1/namespaces/%s/events/%s", e->namespace, e->name) < 0)
                        r = -ENOMEM;
                ret->method = "PATCH";
                ret->verb = "patch";
                ret->content_type = "application/merge-patch+json";
        }
        return r;
}

static void write_refused(struct event_writer *ew, const struct pending *e, const struct http_response *resp) {
        _cleanup_free_ char *why = NULL, *answer = kube_writer_describe_answer(resp);

        count(ew, e->type, "refused");
        ew->n_refused++;
        if (asprintf(&why, "cannot %s events: %s", e->create ? "create" : "patch", strempty(answer)) < 0)
                return;
        /* One line per distinct refusal, not one per event; the module's state says it as a
         * warning when it is the kind's last answer. */
        if (!streq_ptr(why, ew->error))
                log_module_info(MODULE, "Event %s for pod %s/%s: %s", e->reason, e->namespace, e->pod_name, why);
        free(ew->error);
        ew->error = TAKE_PTR(why);
}

static void write_done(void *userdata, const char *key, const struct http_response *resp) {
        struct event_writer *ew = userdata;
        size_t i;
        struct pending *e = find_pending(ew, key, &i);

        if (!e)
                return;
        if ((resp->status >= 200 && resp->status < 300) || (e->create && resp->status == 409)) {
                /* 409 on a create: an earlier attempt went through before its answer was lost. */
                count(ew, e->type, e->create ? "created" : "series");
                if (e->create)
                        ew->n_created++;
                else
                        ew->n_series++;
                ew->error = mfree(ew->error);
                if (e->create && e->series_after_create >= 2) {
                        /* Repeats came while it waited: one PATCH says how many. */
                        e->create = false;
                        e->count = e->series_after_create;
                        e->series_after_create = 0;
                        if (kube_writer_want(ew->writer, &ew->client, e->key) >= 0)
                                return;
                }
        } else if (!e->create && resp->status == 404) {
                /* The Event expired on the server (events live an hour): the next repeat makes a
                 * new one. */
                count(ew, e->type, "expired");
                event_correlator_forget_name(ew->correlator, e->name);
        } else
                write_refused(ew, e, resp);
        remove_pending(ew, i, false);
}

/* ---- lifecycle ---- */

int event_writer_new(struct manager *m, struct kube_writer *writer, const struct event_writer_settings *s,
                     const struct event_writer_metrics *metrics, struct event_writer **ret) {
        struct event_correlator_settings cs = EVENT_CORRELATOR_SETTINGS_DEFAULT;
        struct event_writer *ew = calloc(1, sizeof(*ew));
        int r;

        if (!ew)
                return -ENOMEM;
        ew->manager = m;
        ew->writer = writer;
        ew->settings = *s;
        ew->metrics = *metrics;
        ew->client = (struct kube_write_client) { .resource = "events", .build = build_write, .done = write_done,
                                                  .userdata = ew };
        token_bucket_init(&ew->budget, s->qps, s->burst, now_usec(CLOCK_MONOTONIC));
        r = event_correlator_new(&cs, &ew->correlator);
        if (r < 0) {
                free(ew);
                return r;
        }
        *ret = ew;
        return 0;
}

struct event_writer *event_writer_free(struct event_writer *ew) {
        if (!ew)
                return NULL;
        if (ew->observing_events)
                pod_events_remove_observer(ew->manager->pod_events, on_pod_event, ew);
        if (ew->observing_pods)
                pod_store_remove_observer(ew->manager->pods, on_pod, ew);
        kube_writer_forget_client(ew->writer, &ew->client);
        for (size_t i = 0; i < ew->n_held; i++)
                held_done(&ew->held[i]);
        free(ew->held);
        for (size_t i = 0; i < ew->n_started; i++)
                free(ew->started[i]);
        free(ew->started);
        for (size_t i = 0; i < ew->n_queue; i++)
                pending_free(ew->queue[i]);
        free(ew->queue);
        sd_event_source_disable_unref(ew->timer);
        event_correlator_free(ew->correlator);
        free(ew->error);
        free(ew);
        return NULL;
}

int event_writer_start(struct event_writer *ew) {
        int r;

        if (!ew->observing_events) {
                r = pod_events_add_observer(ew->manager->pod_events, on_pod_event, ew);
                if (r < 0)
                        return r;
                ew->observing_events = true;
        }
        if (!ew->observing_pods) {
                r = pod_store_add_observer(ew->manager->pods, on_pod, ew);
                if (r < 0)
                        return r;
                ew->observing_pods = true;
        }
        return 0;
}

void event_writer_set_settings(struct event_writer *ew, const struct event_writer_settings *s) {
        if (!ew)
                return;
        ew->settings = *s;
        token_bucket_set_rate(&ew->budget, s->qps, s->burst, now_usec(CLOCK_MONOTONIC));
}

const char *event_writer_error(const struct event_writer *ew) {
        return ew ? ew->error : NULL;
}

int event_writer_status(const struct event_writer *ew, cJSON *obj) {
        cJSON *o = cJSON_AddObjectToObject(obj, "podEvents");

        if (!o || !cJSON_AddStringToObject(o, "reportingController", EVENT_REPORTING_CONTROLLER) ||
            !cJSON_AddNumberToObject(o, "created", (double) ew->n_created) ||
            !cJSON_AddNumberToObject(o, "seriesUpdates", (double) ew->n_series) ||
            !cJSON_AddNumberToObject(o, "dropped", (double) ew->n_dropped) ||
            !cJSON_AddNumberToObject(o, "refused", (double) ew->n_refused) ||
            !cJSON_AddNumberToObject(o, "queued", (double) ew->n_queue) ||
            !cJSON_AddNumberToObject(o, "gathering", (double) ew->n_held) ||
            !cJSON_AddNumberToObject(o, "correlated", (double) event_correlator_size(ew->correlator)) ||
            !json_add_string_or_null(o, "lastError", ew->error))
                return -ENOMEM;
        return 0;
}
