/* SPDX-License-Identifier: MIT */
/* apiserver: feeds the pod store from the Kubernetes apiserver — this node's pods, listed and
 * watched by a reflector (reflector.c, pod-sink.c) with a token bucket and jittered backoff — so
 * the node keeps serving its last known pods while the apiserver is away, and a fleet of agents
 * recovering together does not stampede it. It also reads this node's Node for its pod CIDR
 * (FACT_NODE_POD_CIDR) and, once a module subscribes to FACT_CLUSTER_NODES, lists and watches
 * every Node with a second reflector (node-table.c) sharing the same token bucket. */

#include <arpa/inet.h>
#include <assert.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include "config.h"
#include "event-writer.h"
#include "kube-endpoint.h"
#include "kube-writer.h"
#include "facts.h"
#include "json.h"
#include "log.h"
#include "manager.h"
#include "module.h"
#include "node-table.h"
#include "pod-ready.h"
#include "pod-sink.h"
#include "reflector.h"
#include "timer.h"

#define MODULE "apiserver"

struct apiserver_settings {
        char *url;
        char *token_file;
        char *ca_file;
        double qps;
        unsigned burst;
        usec_t backoff_initial;
        usec_t backoff_max;
        usec_t backoff_reset;
        double backoff_jitter;
        usec_t watch_timeout_min;
        char *node_selector;
        usec_t node_relist_after;
        bool pod_condition;
        usec_t condition_grace;
        bool events;
        double event_qps;
        unsigned event_burst;
        usec_t event_batch;
        unsigned event_queue;
};

struct apiserver_metrics {
        struct reflector_metrics reflector;   /* both reflectors', labelled by resource */
        struct metric_family *cache_pods;      /* gauges, set by the collector */
        struct metric_family *cache_nodes;
        struct metric_family *last_sync;
        struct metric_family *nodes_unchanged; /* Node events dropped: nothing a route uses changed */
        struct metric_family *writes_queued;   /* gauge: the write queue's length */
        struct pod_ready_metrics ready;
        struct event_writer_metrics events;
};

struct apiserver {
        struct apiserver_settings *settings;
        struct kube_endpoint endpoint;
        struct token_bucket bucket; /* every request to the apiserver passes it */
        struct pod_sink pods;
        struct reflector *reflector; /* this node's pods */
        /* What the node writes back: the pinion.io/ready condition and Events, through one queue
         * (kube-writer.h) and the same token bucket. Both exist while the reflector does. */
        struct kube_writer *writer;
        struct pod_ready *ready;
        struct event_writer *events;
        struct apiserver_metrics metrics;
        struct metrics_registration *metrics_reg; /* the families above and the collector */

        /* The cluster's Nodes (FACT_CLUSTER_NODES), published while the pod reflector exists; the
         * Node reflector runs from the first subscription until the module stops. */
        struct node_table *nodes;
        struct reflector *node_reflector;
        uint64_t nodes_unchanged_counted;

        /* The Node object's pod CIDR for podnet (FACT_NODE_POD_CIDR, published while the
         * reflector exists): read on request, after the first pod list, retried with backoff
         * until the Node has one. */
        struct module_instance *mi;
        sd_event_source *node_timer;
        struct http_transfer *node_transfer;
        struct backoff node_backoff;
        char *node_pod_cidr;
        struct node_pod_cidr node_fact;
        bool node_published, node_wanted, node_started;
};

/* A label selector as the apiserver takes it ("a=b,c!=d,e in (f,g),!h"): the characters of
 * label keys and values, operators, commas, parentheses and blanks. The apiserver judges the
 * grammar; this keeps a typo from reaching it as a 400 every backoff step. */
static int parse_label_selector(const char *v, void *ret, const char **reason) {
        if (!isempty(v) && strspn(v, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-/=!,() ") != strlen(v)) {
                *reason = "expected a label selector (e.g. topology.pinion.io/segment=rack12)";
                return -EINVAL;
        }
        return config_parse_string(v, ret, reason);
}

#define FIELD(f) offsetof(struct apiserver_settings, f)
static const struct config_key apiserver_keys[] = {
        { "url", config_parse_url, FIELD(url), NULL, config_free_string },
        { "token-file", kube_endpoint_parse_token_file, FIELD(token_file), NULL, config_free_string,
          .names_file = true },
        { "ca-file", config_parse_file, FIELD(ca_file), NULL, config_free_string, .names_file = true },
        { "qps", config_parse_double, FIELD(qps), "5" },
        { "burst", config_parse_uint, FIELD(burst), "10" },
        { "backoff-initial", config_parse_duration, FIELD(backoff_initial), "800ms" },
        { "backoff-max", config_parse_duration, FIELD(backoff_max), "30s" },
        { "backoff-reset", config_parse_duration, FIELD(backoff_reset), "2m" },
        { "backoff-jitter", config_parse_double, FIELD(backoff_jitter), "1.0" },
        { "watch-timeout-min", config_parse_duration, FIELD(watch_timeout_min), "5m" },
        { "node-selector", parse_label_selector, FIELD(node_selector), NULL, config_free_string },
        { "node-relist-after", config_parse_duration, FIELD(node_relist_after), "2m" },
        { "pod-condition", config_parse_bool, FIELD(pod_condition), "yes" },
        { "condition-grace", config_parse_duration, FIELD(condition_grace), "2s" },
        { "events", config_parse_bool, FIELD(events), "yes" },
        { "event-qps", config_parse_double, FIELD(event_qps), "1" },
        { "event-burst", config_parse_uint, FIELD(event_burst), "100" },
        { "event-batch", config_parse_duration, FIELD(event_batch), "5s" },
        { "event-queue", config_parse_uint, FIELD(event_queue), "256" },
        {}
};
#undef FIELD

static int apiserver_parse(struct config *c, struct apiserver_settings **ret, char **ret_error) {
        struct apiserver_settings *s = NULL;
        int r;

        r = config_parse_section_new(c, "apiserver", apiserver_keys, sizeof(*s), (void **) &s, ret_error);
        if (r < 0)
                return r;
        if (s->qps <= 0 || s->burst == 0 || s->backoff_initial == 0 || s->backoff_max < s->backoff_initial) {
                config_object_free(apiserver_keys, s);
                return config_section_error(c, "apiserver", ret_error,
                                            "needs qps > 0, burst > 0 and 0 < backoff-initial <= backoff-max");
        }
        if (s->backoff_jitter > 10 || s->qps > 1e6) {
                config_object_free(apiserver_keys, s);
                return config_section_error(c, "apiserver", ret_error, "needs backoff-jitter <= 10 and qps <= 1000000");
        }
        if (s->events && (s->event_qps <= 0 || s->event_burst == 0 || s->event_queue == 0)) {
                config_object_free(apiserver_keys, s);
                return config_section_error(c, "apiserver", ret_error,
                                            "events needs event-qps > 0, event-burst > 0 and event-queue > 0");
        }
        if (s->watch_timeout_min < USEC_PER_SEC) {
                config_object_free(apiserver_keys, s);
                return config_section_error(c, "apiserver", ret_error, "watch-timeout-min must be at least 1s");
        }
        *ret = s;
        return 0;
}

static struct reflector_config reflector_config_from(const struct apiserver_settings *s) {
        return (struct reflector_config) {
                .backoff = {
                        .initial = s->backoff_initial,
                        .max = s->backoff_max,
                        .factor = 2.0,
                        .jitter = s->backoff_jitter,
                        .reset_after = s->backoff_reset,
                },
                .watch_timeout_min = s->watch_timeout_min,
                .page_limit = 500,
                .max_list_size = 256u << 20,
                /* etcd refuses objects over 1.5 MiB by default; 8 MiB leaves room for the JSON
                 * envelope and generous servers, and bounds what one line can cost us. */
                .max_event_size = 8u << 20,
        };
}

/* Every agent lists every Node: after an apiserver restart (410 to every watch) the Node
 * reflector watches from the newest version at once and spreads its full relist (reflector.h). */
static struct reflector_config node_reflector_config_from(const struct apiserver_settings *s) {
        struct reflector_config rc = reflector_config_from(s);
        rc.fresh_watch_relist_after = s->node_relist_after;
        return rc;
}

/* ---- the Node's pod CIDR ---- */

static void node_fetch_stop(struct apiserver *a) {
        http_transfer_cancel(a->node_transfer);
        a->node_transfer = NULL;
        a->node_timer = sd_event_source_disable_unref(a->node_timer);
        a->node_started = false;
        if (a->node_published)
                (void) manager_publish(a->mi->manager, FACT_NODE_POD_CIDR, NULL);
        a->node_published = false;
        a->node_fact.cidr = NULL;
        a->node_pod_cidr = mfree(a->node_pod_cidr);
}

static void node_fetch_maybe_start(struct apiserver *a);

static void node_request(void *userdata) {
        struct apiserver *a = userdata;
        a->node_wanted = true;
        node_fetch_maybe_start(a);
}

static void node_publish(struct apiserver *a) {
        a->node_fact = (struct node_pod_cidr) { .request = node_request, .userdata = a };
        a->node_published = manager_publish(a->mi->manager, FACT_NODE_POD_CIDR, &a->node_fact) >= 0;
        if (!a->node_published)
                log_module_warning(MODULE, "Cannot publish the Node's pod CIDR fact, ignoring");
}

static int on_node_timer(sd_event_source *s, uint64_t usec, void *userdata);

static usec_t add_saturating(usec_t x, usec_t y) {
        return x > USEC_INFINITY - y ? USEC_INFINITY : x + y;
}

static void node_fetch_schedule(struct apiserver *a, usec_t delay) {
        usec_t now = now_usec(CLOCK_MONOTONIC);
        usec_t when = add_saturating(add_saturating(now, delay), token_bucket_reserve(&a->bucket, now));
        reflector_count_request(a->reflector);
        int r = timer_arm(a->mi->manager->event, &a->node_timer, CLOCK_MONOTONIC, when, USEC_PER_MSEC, false,
                          on_node_timer, a);
        if (r < 0)
                log_module_warning_errno(MODULE, r, "Cannot schedule the Node request, the pod CIDR stays unknown: %m");
}

/* The pod CIDRs podnet can use: "v4,v6" when the Node is dual-stack; NULL if none (or out of
 * memory). */
static char *node_pod_cidrs(const cJSON *node) {
        const char *v4, *v6;
        char *ret = NULL;

        node_table_pod_cidrs(node, &v4, &v6);
        if ((v4 || v6) && asprintf(&ret, "%s%s%s", strempty(v4), v4 && v6 ? "," : "", strempty(v6)) < 0)
                return NULL;
        return ret;
}

static void on_node_done(struct http_client *c, const struct http_response *resp, void *userdata) {
        struct apiserver *a = userdata;
        _cleanup_(cJSON_Deletep) cJSON *node = NULL;
        _cleanup_free_ char *cidr = NULL;

        a->node_transfer = NULL;
        if (resp->error == 0 && resp->status == 200) {
                node = cJSON_ParseWithLength(resp->body, resp->body_size);
                cidr = node_pod_cidrs(node);
        }
        if (!cidr) {
                usec_t delay = backoff_next(&a->node_backoff, now_usec(CLOCK_MONOTONIC), http_response_retry_after(resp));
                (void) log_module_full_errno(MODULE, LOG_DEBUG, 0, "Node %s: no usable spec.podCIDR yet (%s%ld); asking again in %.1fs",
                                      a->mi->manager->settings.node_name,
                                      resp->error ? strerror(-resp->error) : "HTTP ", resp->error ? 0L : resp->status,
                                      (double) delay / USEC_PER_SEC);
                return node_fetch_schedule(a, delay);
        }
        a->node_pod_cidr = TAKE_PTR(cidr);
        a->node_fact.cidr = a->node_pod_cidr;
        log_module_info(MODULE, "Node %s has pod CIDR %s", a->mi->manager->settings.node_name, a->node_pod_cidr);
}

static int on_node_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        struct apiserver *a = userdata;
        _cleanup_free_ char *path = NULL;
        struct http_client *http;
        CURL *easy = NULL;
        int r;

        /* While the pod watch is failing the apiserver is away or struggling: the Node can wait
         * until the reflector is healthy again (node_fetch_maybe_start() resumes it), so that an
         * outage sees only the reflector's own, measured retries. */
        if (reflector_last_error(a->reflector)) {
                a->node_started = false;
                return 0;
        }

        if (asprintf(&path, "/api/v1/nodes/%s", a->mi->manager->settings.node_name) < 0)
                return 0;
        r = manager_http(a->mi->manager, &http);
        if (r >= 0)
                r = kube_endpoint_request(&a->endpoint, path, 10000, &easy);
        if (r >= 0)
                r = http_client_submit(http, easy, 1u << 20, on_node_done, a, &a->node_transfer);
        if (r < 0)
                node_fetch_schedule(a, backoff_next(&a->node_backoff, now_usec(CLOCK_MONOTONIC), 0));
        return 0;
}

/* Once asked for, after the first pod list (the credentials work), while the watch is healthy. */
static void node_fetch_maybe_start(struct apiserver *a) {
        const char *n = a->mi->manager->settings.node_name;
        if (!a->node_wanted || a->node_started || a->node_pod_cidr || !a->reflector || !reflector_synced(a->reflector) ||
            reflector_last_error(a->reflector))
                return;
        /* A DNS subdomain: nothing to escape in the path. */
        if (isempty(n) || strspn(n, "abcdefghijklmnopqrstuvwxyz0123456789.-") != strlen(n))
                return;
        bool first = a->node_backoff.rng == 0;
        if (first)
                backoff_init(&a->node_backoff,
                             &(struct backoff_config) { .initial = 2 * USEC_PER_SEC, .max = 5 * USEC_PER_MINUTE,
                                                        .factor = 2.0, .jitter = 1.0, .reset_after = 10 * USEC_PER_MINUTE },
                             0);
        a->node_started = true;
        /* After a pause for an outage, resume somewhere in the current step: not all at once. */
        node_fetch_schedule(a, first ? 0 : backoff_random_between(&a->node_backoff, 0, backoff_current_step(&a->node_backoff, now_usec(CLOCK_MONOTONIC))));
}

/* ---- the cluster's Nodes ---- */

static void nodes_update_state(struct module_instance *mi);

static void on_node_reflector_changed(struct reflector *r, void *userdata) {
        nodes_update_state(userdata);
}

/* The first subscriber arrived: list and watch every Node (matching node-selector). */
static void nodes_wanted(void *userdata) {
        struct module_instance *mi = userdata;
        struct apiserver *a = mi->data;
        struct http_client *http;

        if (a->node_reflector || !a->reflector)
                return;
        struct reflector_config rc = node_reflector_config_from(a->settings);
        int r = manager_http(mi->manager, &http);
        if (r >= 0)
                r = reflector_new(mi->manager->event, http, &a->nodes->sink, &a->endpoint, &a->bucket, &rc,
                                  &a->metrics.reflector, on_node_reflector_changed, mi, &a->node_reflector);
        if (r >= 0)
                r = reflector_start(a->node_reflector);
        if (r < 0) {
                a->node_reflector = reflector_free(a->node_reflector);
                log_module_error_errno(MODULE, r, "Cannot start the watch of the cluster's Nodes: %m");
        }
}

/* [apiserver] node-selector as the Node reflector's query (none: every Node). */
static int nodes_set_selector(struct apiserver *a) {
        a->nodes->sink.selector = mfree(a->nodes->sink.selector);
        if (isempty(a->settings->node_selector))
                return 0;
        return reflector_query_param("labelSelector", a->settings->node_selector, &a->nodes->sink.selector);
}

static void nodes_unpublish(struct apiserver *a) {
        if (!a->nodes)
                return;
        (void) manager_publish(a->mi->manager, FACT_CLUSTER_NODES, NULL);
        a->node_reflector = reflector_free(a->node_reflector);
        node_table_done(a->nodes);
        a->nodes = mfree(a->nodes);
}

static int nodes_publish(struct apiserver *a) {
        assert(!a->nodes);
        a->nodes = calloc(1, sizeof(*a->nodes));
        if (!a->nodes)
                return -ENOMEM;
        int r = node_table_init(a->nodes, nodes_wanted, a->mi);
        if (r >= 0)
                r = nodes_set_selector(a);
        if (r >= 0)
                r = manager_publish(a->mi->manager, FACT_CLUSTER_NODES, &a->nodes->fact);
        if (r < 0) {
                node_table_done(a->nodes);
                a->nodes = mfree(a->nodes);
        }
        return r;
}

/* A new apiserver or node-selector: the Node watch starts over (its subscribers stay). */
static void nodes_restart(struct module_instance *mi) {
        struct apiserver *a = mi->data;
        bool wanted = a->nodes && node_table_wanted(a->nodes);

        a->node_reflector = reflector_free(a->node_reflector);
        if (!a->nodes)
                return;
        if (nodes_set_selector(a) < 0)
                log_module_error(MODULE, "Cannot hold node-selector, watching every Node: out of memory");
        if (wanted)
                nodes_wanted(mi);
}

/* ---- what the node writes back: the pods' condition and Events ---- */

static void on_writer_changed(struct kube_writer *w, void *userdata) {
        nodes_update_state(userdata);
}

static struct event_writer_settings event_settings_from(const struct apiserver_settings *s) {
        return (struct event_writer_settings) {
                .qps = s->event_qps, .burst = s->event_burst, .batch = s->event_batch, .queue_max = s->event_queue,
        };
}

static void writes_stop(struct apiserver *a) {
        a->events = event_writer_free(a->events);
        a->ready = pod_ready_free(a->ready);
        a->writer = kube_writer_free(a->writer);
}

/* Makes the condition and the Events follow the settings (at start and on reload). */
static int writes_apply(struct module_instance *mi) {
        struct apiserver *a = mi->data;
        const struct apiserver_settings *s = a->settings;
        struct event_writer_settings es = event_settings_from(s);
        int r;

        if (!s->pod_condition)
                a->ready = pod_ready_free(a->ready);
        else if (a->ready)
                pod_ready_set_timing(a->ready, s->condition_grace, 2 * s->backoff_max);
        else {
                r = pod_ready_new(mi->manager, a->writer, s->condition_grace, 2 * s->backoff_max, &a->metrics.ready,
                                  &a->ready);
                if (r >= 0)
                        r = pod_ready_start(a->ready);
                if (r < 0)
                        return r;
        }
        if (!s->events)
                a->events = event_writer_free(a->events);
        else if (a->events)
                event_writer_set_settings(a->events, &es);
        else {
                r = event_writer_new(mi->manager, a->writer, &es, &a->metrics.events, &a->events);
                if (r >= 0)
                        r = event_writer_start(a->events);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int writes_start(struct module_instance *mi, struct http_client *http) {
        struct apiserver *a = mi->data;
        struct reflector_config rc = reflector_config_from(a->settings);
        int r;

        if (!a->writer) {
                r = kube_writer_new(mi->manager->event, http, &a->endpoint, &a->bucket, &rc.backoff,
                                    a->metrics.reflector.requests, on_writer_changed, mi, &a->writer);
                if (r < 0)
                        return r;
        }
        kube_writer_set_backoff(a->writer, &rc.backoff);
        return writes_apply(mi);
}

/* ---- module ---- */

static struct apiserver *apiserver_free_data(struct apiserver *a) {
        if (!a)
                return NULL;
        node_fetch_stop(a);
        nodes_unpublish(a);
        writes_stop(a);
        a->reflector = reflector_free(a->reflector);
        pod_sink_done(&a->pods);
        metrics_registration_free(a->metrics_reg);
        kube_endpoint_done(&a->endpoint);
        config_object_free(apiserver_keys, a->settings);
        free(a);
        return NULL;
}

static int apiserver_init(struct module_instance *mi, struct config *c, char **ret_error) {
        struct apiserver *a = calloc(1, sizeof(*a));
        if (!a)
                return -ENOMEM;
        int r = apiserver_parse(c, &a->settings, ret_error);
        if (r < 0) {
                free(a);
                return r;
        }
        a->mi = mi;
        mi->data = a;
        return 0;
}

/* Reflectors' state → module state: the operator sees degraded with the last error while one
 * backs off, and readiness is not held up by an apiserver that is away at boot (only the pod
 * list counts for that: the Node watch serves routes, which the node has from before). */
static void nodes_update_state(struct module_instance *mi) {
        struct apiserver *a = mi->data;
        const char *error = reflector_last_error(a->reflector);
        const char *node_error = a->node_reflector ? reflector_last_error(a->node_reflector) : NULL;

        const char *write_error = kube_writer_error(a->writer);

        if (!a->reflector)
                return;
        if (error)
                module_set_state(mi, MODULE_DEGRADED, "%s", error);
        else if (node_error)
                module_set_state(mi, MODULE_DEGRADED, "%s", node_error);
        else if (write_error)
                module_set_state(mi, MODULE_DEGRADED, "%s", write_error);
        else if (reflector_synced(a->reflector) && (!a->node_reflector || reflector_synced(a->node_reflector)))
                module_set_state(mi, MODULE_RUNNING, NULL);
        else
                module_set_state(mi, MODULE_STARTING, NULL);
}

static void on_reflector_changed(struct reflector *r, void *userdata) {
        struct module_instance *mi = userdata;
        struct apiserver *a = mi->data;

        /* The node's client certificate, once identity has one, authenticates us where no
         * token is configured. */
        const struct node_credentials *creds = manager_lookup(mi->manager, FACT_NODE_CREDENTIALS);
        if (creds && !a->endpoint.token_file && !streq_ptr(a->endpoint.client_cert, creds->cert_file)) {
                free(a->endpoint.client_cert);
                free(a->endpoint.client_key);
                a->endpoint.client_cert = strdup(creds->cert_file);
                a->endpoint.client_key = strdup(creds->key_file);
        }

        nodes_update_state(mi);
        if (reflector_synced(r) || reflector_first_attempt_done(r))
                module_set_synced(mi);
        node_fetch_maybe_start(a);
}

static void collect_apiserver(struct metrics *metrics, void *userdata) {
        struct module_instance *mi = userdata;
        struct apiserver *a = mi->data;
        if (!a || !a->reflector)
                return;
        (void) metric_set(a->metrics.cache_pods, (double) pod_store_count_source(mi->manager->pods, POD_SOURCE_APISERVER));
        (void) metric_set(a->metrics.last_sync, (double) reflector_last_sync(a->reflector) / USEC_PER_SEC);
        (void) metric_set(a->metrics.writes_queued, (double) kube_writer_queued(a->writer));
        pod_ready_collect(a->ready);
        if (a->nodes) {
                (void) metric_set(a->metrics.cache_nodes, (double) a->nodes->n_nodes);
                (void) metric_add(a->metrics.nodes_unchanged,
                                  (double) (a->nodes->n_unchanged - a->nodes_unchanged_counted));
                a->nodes_unchanged_counted = a->nodes->n_unchanged;
        }
}

static int apiserver_register_metrics(struct module_instance *mi) {
        struct apiserver *a = mi->data;
        struct apiserver_metrics *m = &a->metrics;
        struct reflector_metrics *ret = &m->reflector;
        static const char *const resource[] = { "resource", NULL };
        static const char *const verb_code[] = { "resource", "verb", "code", NULL };
        static const char *const type[] = { "resource", "type", NULL };
        static const char *const kind[] = { "resource", "kind", NULL };
        static const char *const status_result[] = { "status", "result", NULL };
        static const char *const status[] = { "status", NULL };
        static const char *const type_result[] = { "type", "result", NULL };
        const struct metric_def families[] = {
                { METRIC_COUNTER, "pinion_apiserver_requests_total", "Requests to the apiserver by resource (pods, nodes, pods/status, events), verb (list, watch, patch, create) and HTTP code (or error).", verb_code, NULL, 0, &ret->requests },
                { METRIC_COUNTER, "pinion_apiserver_backoff_seconds_total", "Seconds spent backing off after apiserver failures.", resource, NULL, 0, &ret->backoff },
                { METRIC_COUNTER, "pinion_apiserver_relists_total", "Lists after the first (a watch too old to resume: 410 Gone).", resource, NULL, 0, &ret->relists },
                { METRIC_COUNTER, "pinion_apiserver_watch_restarts_total", "Watches the server ended normally and the agent resumed without a list.", resource, NULL, 0, &ret->watch_restarts },
                { METRIC_COUNTER, "pinion_apiserver_watch_events_total", "Watch events received by resource and type.", type, NULL, 0, &ret->events },
                { METRIC_COUNTER, "pinion_apiserver_errors_total", "Apiserver failures by resource and kind (connect, status, decode, short-watch, invalid-object, oversized-event, ...).", kind, NULL, 0, &ret->errors },
                { METRIC_GAUGE, "pinion_apiserver_cache_pods", "Pods of this node known from the apiserver.", NULL, NULL, 0, &m->cache_pods },
                { METRIC_GAUGE, "pinion_apiserver_cache_nodes", "Nodes known from the apiserver (while a module needs them: routing = nodes).", NULL, NULL, 0, &m->cache_nodes },
                { METRIC_COUNTER, "pinion_apiserver_node_events_unchanged_total", "Node watch events dropped because nothing routes depend on changed (heartbeats, conditions).", NULL, NULL, 0, &m->nodes_unchanged },
                { METRIC_GAUGE, "pinion_apiserver_writes_queued", "Writes (pods' condition, Events) waiting for their turn or for the apiserver.", NULL, NULL, 0, &m->writes_queued },
                { METRIC_COUNTER, "pinion_apiserver_condition_writes_total", "Writes of the pinion.io/ready condition by status written (True, False) and result (ok, conflict, gone, refused).", status_result, NULL, 0, &m->ready.writes },
                { METRIC_GAUGE, "pinion_apiserver_condition_pods", "Pods with the pinion.io/ready readiness gate by the condition's status as the apiserver shows it (True, False, none).", status, NULL, 0, &m->ready.conditions },
                { METRIC_COUNTER, "pinion_apiserver_events_total", "Pod events by type (Normal, Warning) and result (created, series, expired, refused, dropped-spam, dropped-rate, dropped-queue).", type_result, NULL, 0, &m->events.events },
                { METRIC_GAUGE, "pinion_apiserver_last_sync_timestamp_seconds", "When the last list or watch event of this node's pods arrived, seconds since the Unix epoch.", NULL, NULL, 0, &m->last_sync },
        };
        if (a->metrics_reg)
                return 0;
        int r = metrics_register(mi->manager->metrics, families, ELEMENTSOF(families), collect_apiserver, mi,
                                 &a->metrics_reg);
        if (r < 0)
                return r;
        /* The series a dashboard divides by exist from the start. */
        static const char *const statuses[] = { "True", "False" }, *const types[] = { "Normal", "Warning" };
        for (size_t i = 0; i < 2; i++) {
                (void) metric_touch(m->ready.writes, statuses[i], "ok");
                (void) metric_touch(m->events.events, types[i], "created");
        }
        return 0;
}

static int apiserver_start_reflector(struct module_instance *mi) {
        struct apiserver *a = mi->data;
        struct manager *m = mi->manager;
        struct http_client *http;
        const char *reason = NULL;
        int r;

        kube_endpoint_done(&a->endpoint);
        r = kube_endpoint_resolve(a->settings->url, a->settings->token_file, a->settings->ca_file, &a->endpoint,
                                       &reason);
        if (r == -ENOENT) {
                /* No apiserver (any more, after a reload): its pods are no truth to act on. */
                (void) pod_store_replace_source(mi->manager->pods, POD_SOURCE_APISERVER, NULL, 0);
                module_set_state(mi, MODULE_DISABLED, "%s", reason);
                module_set_synced(mi);
                return 0;
        }
        if (r < 0)
                return r;
        if (strncmp(a->endpoint.url, "http://", 7) == 0)
                log_module_warning(MODULE, "%s is plain HTTP: pod data and the token travel unencrypted", a->endpoint.url);

        r = manager_http(m, &http);
        if (r >= 0)
                r = apiserver_register_metrics(mi);
        if (r >= 0 && !a->pods.store)
                r = pod_sink_init(&a->pods, m->pods, m->settings.node_name);
        if (r < 0)
                return r;
        token_bucket_init(&a->bucket, a->settings->qps, a->settings->burst, now_usec(CLOCK_MONOTONIC));
        struct reflector_config rc = reflector_config_from(a->settings);
        r = reflector_new(m->event, http, &a->pods.sink, &a->endpoint, &a->bucket, &rc, &a->metrics.reflector,
                          on_reflector_changed, mi, &a->reflector);
        if (r < 0)
                return r;
        module_set_state(mi, MODULE_STARTING, NULL);
        node_publish(a);
        if (!a->nodes && nodes_publish(a) < 0)
                log_module_warning(MODULE, "Cannot publish the cluster's Nodes, ignoring");
        r = writes_start(mi, http);
        if (r < 0)
                return r;
        r = reflector_start(a->reflector);
        if (r >= 0)
                nodes_restart(mi); /* a Node watch wanted before (a reload) resumes */
        return r;
}

static int apiserver_start(struct module_instance *mi) {
        return apiserver_start_reflector(mi);
}

static int apiserver_reload(struct module_instance *mi, struct config *c, char **ret_error) {
        struct apiserver *a = mi->data;
        struct apiserver_settings *s = NULL;
        int r = apiserver_parse(c, &s, ret_error);
        if (r < 0)
                return r;

        bool same_endpoint = streq_ptr(s->url, a->settings->url) && streq_ptr(s->token_file, a->settings->token_file) &&
                             streq_ptr(s->ca_file, a->settings->ca_file);
        bool same_nodes = streq_ptr(s->node_selector, a->settings->node_selector);
        config_object_free(apiserver_keys, a->settings);
        a->settings = s;
        if (same_endpoint && a->reflector) {
                struct reflector_config rc = reflector_config_from(s);
                token_bucket_set_rate(&a->bucket, s->qps, s->burst, now_usec(CLOCK_MONOTONIC));
                reflector_set_config(a->reflector, &rc);
                struct reflector_config nrc = node_reflector_config_from(s);
                if (a->node_reflector)
                        reflector_set_config(a->node_reflector, &nrc);
                if (!same_nodes)
                        nodes_restart(mi);
                if (a->writer) {
                        kube_writer_set_backoff(a->writer, &rc.backoff);
                        r = writes_apply(mi);
                        if (r < 0)
                                log_module_error_errno(MODULE, r, "Cannot apply the new condition and event settings: %m");
                }
                return 0;
        }
        /* A new apiserver: start over with a list (the store keeps the pods meanwhile, the Node
         * table its Nodes). */
        node_fetch_stop(a);
        writes_stop(a);
        a->node_reflector = reflector_free(a->node_reflector);
        a->reflector = reflector_free(a->reflector);
        r = apiserver_start_reflector(mi);
        if (r < 0)
                module_set_state(mi, MODULE_FAILED, "cannot start the pod watch: %s", strerror(-r));
        if (!a->reflector)
                nodes_unpublish(a); /* no apiserver any more: no Nodes to know */
        return 0;
}

static int apiserver_stop(struct module_instance *mi) {
        struct apiserver *a = mi->data;
        node_fetch_stop(a);
        nodes_unpublish(a);
        writes_stop(a);
        a->reflector = reflector_free(a->reflector);
        a->metrics_reg = metrics_registration_free(a->metrics_reg);
        return 0;
}

static int apiserver_status(struct module_instance *mi, cJSON *obj) {
        struct apiserver *a = mi->data;
        if (!a->reflector) {
                if (a->settings->url && !cJSON_AddStringToObject(obj, "url", a->settings->url))
                        return -ENOMEM;
                return 0;
        }
        int r = reflector_status(a->reflector, obj);
        if (r >= 0 && !cJSON_AddNumberToObject(obj, "writesQueued", (double) kube_writer_queued(a->writer)))
                r = -ENOMEM;
        if (r >= 0 && a->ready)
                r = pod_ready_status(a->ready, obj);
        if (r >= 0 && a->events)
                r = event_writer_status(a->events, obj);
        if (r < 0 || !a->node_reflector)
                return r;
        cJSON *nodes = cJSON_AddObjectToObject(obj, "nodeWatch");
        if (!nodes || reflector_status(a->node_reflector, nodes) < 0 ||
            !json_add_string_or_null(nodes, "labelSelector", a->settings->node_selector) ||
            !cJSON_AddNumberToObject(nodes, "routeChanges", (double) a->nodes->n_changes) ||
            !cJSON_AddNumberToObject(nodes, "unchangedEventsDropped", (double) a->nodes->n_unchanged))
                return -ENOMEM;
        return 0;
}

static void apiserver_free(struct module_instance *mi) {
        mi->data = apiserver_free_data(mi->data);
}

static bool apiserver_configured(const struct module_instance *mi, const struct config *c) {
        const struct apiserver *a = mi->data;
        return a->settings->url || kube_endpoint_configured(c);
}

const struct module apiserver_module = {
        .name = "apiserver",
        .init = apiserver_init,
        .configured = apiserver_configured,
        .start = apiserver_start,
        .reload = apiserver_reload,
        .stop = apiserver_stop,
        .status = apiserver_status,
        .free = apiserver_free,
};
