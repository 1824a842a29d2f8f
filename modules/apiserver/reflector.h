/* SPDX-License-Identifier: MIT */
#pragma once

/* The reflector keeps the pod store equal to the apiserver's view of this node's pods, as
 * client-go's reflector does, and is as gentle with the apiserver:
 *
 *   LISTING   GET /api/v1/pods?fieldSelector=spec.nodeName=N&resourceVersion=0 (paged with
 *             limit/continue when the server pages), then the store's "apiserver" pods are
 *             replaced by the result, announcing only real differences.
 *   WATCHING  GET ...&watch=1&allowWatchBookmarks=true&resourceVersion=RV&timeoutSeconds=T,
 *             T uniform in [watch-timeout-min, 2×]; events are decoded as they arrive and applied
 *             to the store; RV follows every event and bookmark. A watch that ends is resumed from
 *             RV without a list; only 410 Gone relists (with resourceVersion="", a consistent read).
 *   WAITING   for the token bucket (qps, burst): every request passes through it.
 *   BACKOFF   after a failure (connect error, 5xx, 429, a watch that ends in under a second with
 *             no events, a corrupt stream): jittered exponential backoff; Retry-After is a floor.
 *
 * While the apiserver is unreachable the store keeps the last known pods. */

#include <stdbool.h>

#include <systemd/sd-event.h>

#include "backoff.h"
#include "token-bucket.h"
#include "kube-endpoint.h"
#include "http.h"
#include "metrics.h"
#include "pod-store.h"
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
        double qps;
        unsigned burst;
        struct backoff_config backoff;
        usec_t watch_timeout_min;
        unsigned page_limit;   /* items per list page when the server pages */
        size_t max_list_size;  /* bytes of one list page */
        size_t max_event_size; /* bytes of one watch event; larger ones are skipped */
};

struct reflector_metrics {
        struct metric_family *requests;       /* pinion_apiserver_requests_total{verb,code} */
        struct metric_family *backoff;        /* pinion_apiserver_backoff_seconds_total */
        struct metric_family *relists;        /* pinion_apiserver_relists_total */
        struct metric_family *watch_restarts; /* pinion_apiserver_watch_restarts_total */
        struct metric_family *events;         /* pinion_apiserver_watch_events_total{type} */
        struct metric_family *errors;         /* pinion_apiserver_errors_total{kind} */
        struct metric_family *cache_pods;     /* gauges, set by the module's collector */
        struct metric_family *last_sync;
};

struct reflector;

/* Called when the state or the last error changed, and once the first list is done (synced)
 * or the first attempt failed (so readiness is not held up by an unreachable apiserver). */
typedef void (*reflector_changed_fn)(struct reflector *r, void *userdata);

int reflector_new(sd_event *e, struct http_client *http, struct pod_store *store, const char *node,
                  struct kube_endpoint *endpoint, const struct reflector_config *config,
                  const struct reflector_metrics *metrics, reflector_changed_fn changed, void *userdata,
                  struct reflector **ret);
struct reflector *reflector_free(struct reflector *r);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct reflector *, reflector_free);

int reflector_start(struct reflector *r);
/* Rate and backoff parameters can change under a running reflector. */
void reflector_set_config(struct reflector *r, const struct reflector_config *config);

enum reflector_state reflector_get_state(const struct reflector *r);
const char *reflector_state_to_string(enum reflector_state s);
bool reflector_synced(const struct reflector *r);         /* a list has completed at least once */
bool reflector_first_attempt_done(const struct reflector *r);
const char *reflector_last_error(const struct reflector *r);
const char *reflector_resource_version(const struct reflector *r);
usec_t reflector_last_sync(const struct reflector *r); /* CLOCK_REALTIME of the last list or event, 0 if none */
/* Key figures for /v1/status. */
/* Takes one token from the reflector's token bucket for a request of another kind (the Node
 * GET): returns how long to wait before sending it. Every request to the apiserver shares the
 * one rate limit. */
usec_t reflector_reserve_request(struct reflector *r);
int reflector_status(const struct reflector *r, cJSON *obj);
