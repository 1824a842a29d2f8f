/* SPDX-License-Identifier: MIT */
#pragma once

/* A reflector keeps a sink (this node's pods in the pod store: pod-sink.c; the cluster's Nodes:
 * node-table.c) equal to the apiserver's view of one resource, as client-go's reflector does,
 * and is as gentle with the apiserver:
 *
 *   LISTING   GET /api/v1/<resource>?<selector>&resourceVersion=0 (paged with limit/continue
 *             when the server pages), then the sink replaces what it holds by the result.
 *   WATCHING  GET ...&watch=1&allowWatchBookmarks=true&resourceVersion=RV&timeoutSeconds=T,
 *             T uniform in [watch-timeout-min, 2×]; events are decoded as they arrive and applied
 *             to the store; RV follows every event and bookmark. A watch that ends is resumed from
 *             RV without a list; only 410 Gone relists (with resourceVersion="", a consistent read).
 *   WAITING   for the token bucket (qps, burst): every request passes through it; the
 *             module's reflectors share one bucket, so all requests count against one rate.
 *   BACKOFF   after a failure (connect error, 5xx, 429, a watch that ends in under a second with
 *             no events, a corrupt stream): jittered exponential backoff; Retry-After is a floor.
 *
 * While the apiserver is unreachable the sink keeps the last known objects. */

#include <stdbool.h>

#include <systemd/sd-event.h>

#include "backoff.h"
#include "token-bucket.h"
#include "kube-endpoint.h"
#include "http.h"
#include "metrics.h"
#include "watch-stream.h"

enum reflector_state {
        REFLECTOR_IDLE,
        REFLECTOR_WAITING,
        REFLECTOR_LISTING,
        REFLECTOR_WATCHING,
        REFLECTOR_BACKOFF,
        _REFLECTOR_STATE_MAX,
};

struct reflector_config {
        struct backoff_config backoff;
        usec_t watch_timeout_min;
        unsigned page_limit;   /* items per list page when the server pages */
        size_t max_list_size;  /* bytes of one list page */
        size_t max_event_size; /* bytes of one watch event; larger ones are skipped */
        /* After 410 Gone, instead of relisting at once: one list of a single object (for a
         * current resourceVersion), a watch from there at once, and the full relist (from the
         * watch cache) deferred to fresh_watch_relist_after + uniform[0, spread], where spread
         * is the larger of the backoff step and (objects held)² / 500 s. For a resource every
         * agent of the fleet lists whole (the Nodes): after an apiserver restart, N agents
         * relisting N objects each is N² objects; 500 a second keeps that within what an
         * apiserver serves beside its other work (tests/sim/, --node-fresh-watch), while the
         * watch hears every change from the new version on. 0: relist at once (the pods). */
        usec_t fresh_watch_relist_after;
};

/* Every family's first label is the resource ("pods", "nodes"). */
struct reflector_metrics {
        struct metric_family *requests;       /* pinion_apiserver_requests_total{resource,verb,code} */
        struct metric_family *backoff;        /* pinion_apiserver_backoff_seconds_total{resource} */
        struct metric_family *relists;        /* pinion_apiserver_relists_total{resource} */
        struct metric_family *watch_restarts; /* pinion_apiserver_watch_restarts_total{resource} */
        struct metric_family *events;         /* pinion_apiserver_watch_events_total{resource,type} */
        struct metric_family *errors;         /* pinion_apiserver_errors_total{resource,kind} */
};

/* What a reflector lists and watches, and where the objects go. The callbacks that take an
 * object return 0 when it was applied or skipped, a negative errno (out of memory) to fail the
 * list or the watch; a skipped object sets *ret_kind to the errors metric's kind for it
 * ("invalid-object", ...) after the sink logged why. */
struct reflector_sink {
        const char *resource;     /* "pods", "nodes": the path /api/v1/<resource>, logs, metrics */
        const char *description;  /* for logs: "the pods of node n1", "the cluster's Nodes" */
        char *selector;           /* query parameters of every list and watch, escaped, or NULL */
        void *userdata;
        int (*list_item)(void *userdata, const cJSON *item, const char **ret_kind);
        /* The list is complete: what list_item took since the last commit or abort is the whole
         * truth. Returns the number of changes, or a negative errno. */
        int (*list_commit)(void *userdata);
        void (*list_abort)(void *userdata);
        int (*event)(void *userdata, enum watch_event_type type, const cJSON *object, const char **ret_kind);
        size_t (*count)(void *userdata); /* objects held, for status */
};

/* "name=escaped(value)" for a sink's selector (a label selector may hold anything). */
int reflector_query_param(const char *name, const char *value, char **ret);

struct reflector;

/* Called when the state or the last error changed, and once the first list is done (synced)
 * or the first attempt failed (so readiness is not held up by an unreachable apiserver). */
typedef void (*reflector_changed_fn)(struct reflector *r, void *userdata);

/* The sink (and its selector), the endpoint, the bucket and the metrics' families must outlive
 * the reflector. */
int reflector_new(sd_event *e, struct http_client *http, const struct reflector_sink *sink,
                  struct kube_endpoint *endpoint, struct token_bucket *bucket, const struct reflector_config *config,
                  const struct reflector_metrics *metrics, reflector_changed_fn changed, void *userdata,
                  struct reflector **ret);
struct reflector *reflector_free(struct reflector *r);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct reflector *, reflector_free);

int reflector_start(struct reflector *r);
/* Backoff parameters can change under a running reflector (the rate is the bucket's). */
void reflector_set_config(struct reflector *r, const struct reflector_config *config);

enum reflector_state reflector_get_state(const struct reflector *r);
const char *reflector_state_to_string(enum reflector_state s);
bool reflector_synced(const struct reflector *r);         /* a list has completed at least once */
bool reflector_first_attempt_done(const struct reflector *r);
const char *reflector_last_error(const struct reflector *r);
const char *reflector_resource_version(const struct reflector *r);
usec_t reflector_last_sync(const struct reflector *r); /* CLOCK_REALTIME of the last list or event, 0 if none */
/* Counts a request of another kind (the Node GET) in the figures. */
void reflector_count_request(struct reflector *r);
/* Key figures for /v1/status. */
int reflector_status(const struct reflector *r, cJSON *obj);
