/* SPDX-License-Identifier: MIT */
#include <stdio.h>

#include "caller.h"
#include "json.h"
#include "manager-api.h"
#include "manager.h"
#include "metrics-listen.h"

static double manager_uptime_seconds(const struct manager *m) {
        return (double) (now_usec(CLOCK_MONOTONIC) - m->start_monotonic) / USEC_PER_SEC;
}

static int add_common(struct manager *m, cJSON *o) {
        if (!cJSON_AddStringToObject(o, "version", PACKAGE_VERSION) ||
            !cJSON_AddStringToObject(o, "node", m->settings.node_name) ||
            !cJSON_AddNumberToObject(o, "uptime_seconds", manager_uptime_seconds(m)))
                return -ENOMEM;
        return 0;
}

/* GET /v1/health: 200 while every module is in a healthy state, else 503 naming them. */
static int handle_health(struct api_request *req, void *userdata) {
        struct manager *m = userdata;
        _cleanup_(cJSON_Deletep) cJSON *o = cJSON_CreateObject();
        cJSON *failing;
        bool ok = !m->stopping;

        if (!o || add_common(m, o) < 0 || !(failing = cJSON_AddArrayToObject(o, "failing")))
                return api_reply_error(req, 500, "out of memory");
        for (unsigned i = 0; i < m->n_modules; i++) {
                const struct module_instance *mi = &m->modules[i];
                if (module_state_is_healthy(mi->state))
                        continue;
                ok = false;
                cJSON *f = cJSON_CreateObject();
                if (!f || !cJSON_AddItemToArray(failing, f))
                        return cJSON_Delete(f), api_reply_error(req, 500, "out of memory");
                cJSON_AddStringToObject(f, "module", mi->module->name);
                cJSON_AddStringToObject(f, "state", module_state_to_string(mi->state));
                json_add_string_or_null(f, "reason", mi->reason);
        }
        if (!cJSON_AddStringToObject(o, "status", ok ? "ok" : "failing"))
                return api_reply_error(req, 500, "out of memory");
        return api_reply_json(req, ok ? 200 : 503, TAKE_PTR(o));
}

static cJSON *module_to_json(struct module_instance *mi) {
        _cleanup_(cJSON_Deletep) cJSON *o = cJSON_CreateObject();
        cJSON *details;

        if (!o || !cJSON_AddStringToObject(o, "name", mi->module->name) ||
            !cJSON_AddStringToObject(o, "state", module_state_to_string(mi->state)) ||
            !json_add_string_or_null(o, "reason", mi->reason) || !json_add_time(o, "since", mi->state_since) ||
            !cJSON_AddBoolToObject(o, "synced", mi->synced) || !(details = cJSON_AddObjectToObject(o, "details")))
                return NULL;
        if (mi->data && mi->module->status(mi, details) < 0)
                return NULL;
        return TAKE_PTR(o);
}

static cJSON *status_config(struct manager *m) {
        cJSON *o = cJSON_CreateObject();
        if (!o)
                return NULL;
        cJSON_AddStringToObject(o, "file", m->config->main_file);
        cJSON_AddNumberToObject(o, "reloads", m->n_reloads);
        cJSON_AddNumberToObject(o, "reload_failures", m->n_reload_failures);
        json_add_string_or_null(o, "last_reload_error", m->last_reload_error);
        return o;
}

static cJSON *status_pods(struct manager *m) {
        cJSON *o = cJSON_CreateObject(), *errors;
        if (!o)
                return NULL;
        cJSON_AddNumberToObject(o, "count", (double) pod_store_size(m->pods));
        cJSON_AddNumberToObject(o, "generation", (double) pod_store_generation(m->pods));
        cJSON_AddStringToObject(o, "pods_dir", m->settings.pods_dir);
        errors = cJSON_AddArrayToObject(o, "errors");
        if (errors && m->podsdir)
                STRV_FOREACH(e, podsdir_errors(m->podsdir))
                        cJSON_AddItemToArray(errors, cJSON_CreateString(*e));
        return o;
}

/* The open-file limit and the connection caps sized to it at start (fd-limit.h). */
static cJSON *status_connections(struct manager *m) {
        const struct connection_caps *c = &m->connection_caps;
        cJSON *o = cJSON_CreateObject();
        if (!o)
                return NULL;
        cJSON_AddNumberToObject(o, "open_files", (double) c->open_files);
        cJSON_AddNumberToObject(o, "reserved_fds", (double) c->reserve);
        cJSON_AddNumberToObject(o, "api", c->api);
        cJSON_AddNumberToObject(o, "workload", c->workload);
        cJSON_AddNumberToObject(o, "csi", c->csi);
        cJSON_AddBoolToObject(o, "scaled", c->scaled);
        return o;
}

/* GET /v1/status: every module's state and key figures, the config and the pod source. */
static int handle_status(struct api_request *req, void *userdata) {
        struct manager *m = userdata;
        _cleanup_(cJSON_Deletep) cJSON *o = cJSON_CreateObject();
        cJSON *modules;

        if (!o || add_common(m, o) < 0 || !json_add_time(o, "started", m->start_realtime) ||
            !cJSON_AddBoolToObject(o, "ready", m->ready_sent) ||
            !cJSON_AddItemToObject(o, "config", status_config(m)) ||
            !cJSON_AddItemToObject(o, "pods", status_pods(m)) ||
            !cJSON_AddItemToObject(o, "connections", status_connections(m)) ||
            !(modules = cJSON_AddArrayToObject(o, "modules")))
                return api_reply_error(req, 500, "out of memory");
        for (unsigned i = 0; i < m->n_modules; i++)
                if (!cJSON_AddItemToArray(modules, module_to_json(&m->modules[i])))
                        return api_reply_error(req, 500, "out of memory");
        return api_reply_json(req, 200, TAKE_PTR(o));
}

/* GET /v1/pods: the store, sorted by namespace/name. */
static int handle_pods(struct api_request *req, void *userdata) {
        struct manager *m = userdata;
        _cleanup_(cJSON_Deletep) cJSON *o = cJSON_CreateObject();
        _cleanup_free_ struct pod **pods = NULL;
        size_t n = 0;
        cJSON *list;

        const char *watch = api_request_query(req, "watch");
        bool streaming = false;
        if (watch && (parse_bool(watch, &streaming) < 0))
                return api_reply_error(req, 400, "watch must be a boolean, not '%s'", watch);
        if (streaming)
                return pod_watch_hub_serve(m->pod_watch, req);
        if (!o || pod_store_list(m->pods, &pods, &n) < 0 || !cJSON_AddNumberToObject(o, "count", (double) n) ||
            !cJSON_AddNumberToObject(o, "generation", (double) pod_store_generation(m->pods)) ||
            !(list = cJSON_AddArrayToObject(o, "pods")))
                return api_reply_error(req, 500, "out of memory");
        for (size_t i = 0; i < n; i++)
                if (!cJSON_AddItemToArray(list, pod_to_json(pods[i])))
                        return api_reply_error(req, 500, "out of memory");
        return api_reply_json(req, 200, TAKE_PTR(o));
}

/* GET /v1/pods/{namespace}/{name} */
static int handle_pod(struct api_request *req, void *userdata) {
        struct manager *m = userdata;
        const char *ns = api_request_param(req, 0), *name = api_request_param(req, 1);
        struct pod *p = pod_store_find(m->pods, ns, name);

        if (!p)
                return api_reply_error(req, 404, "no pod %s/%s on this node", ns, name);
        cJSON *o = pod_to_json(p);
        if (!o)
                return api_reply_error(req, 500, "out of memory");
        return api_reply_json(req, 200, o);
}

/* GET /metrics: Prometheus text format 0.0.4. */
static int handle_metrics(struct api_request *req, void *userdata) {
        struct manager *m = userdata;
        char *text = NULL;
        size_t size = 0;
        int r = metrics_render(m->metrics, &text, &size);
        if (r < 0)
                return api_reply_error(req, 500, "cannot render metrics: %s", strerror(-r));
        return api_reply_text(req, 200, "text/plain; version=0.0.4; charset=utf-8", text, size);
}

static const struct api_route core_routes[] = {
        { "GET", "/v1/health", handle_health, false },
        { "GET", "/v1/status", handle_status, true },
        { "GET", "/v1/pods", handle_pods, true },
        { "GET", "/v1/pods/{}/{}", handle_pod, true },
        { "GET", "/metrics", handle_metrics, true },
};

/* ---- a module's routes while it does not serve them ---- */

/* A module in these states is not served even if its routes are still registered (configsync
 * and reclaim keep theirs while disabled). A module in any other state that has its routes
 * answers for itself: starting, degraded, stopping, and failed too, for a module that keeps
 * working at what failed (identity retrying the renewal of an expired certificate) and whose
 * own answers say more than its state. */
static bool module_switched_off(void *userdata) {
        const struct module_instance *mi = userdata;
        return mi->state == MODULE_DISABLED || mi->state == MODULE_STOPPED;
}

static const struct module_route *module_route_of(const struct module *module, struct api_request *req) {
        const char *method = api_request_method(req), *pattern = api_request_route(req);

        for (const struct module_route *r = module->routes; r && r->method; r++)
                if (streq(r->pattern, pattern) &&
                    (streq(r->method, method) || (streq(method, "HEAD") && streq(r->method, "GET"))))
                        return r;
        return NULL;
}

static bool caller_in_audience(const struct caller *c, enum module_route_audience audience) {
        switch (audience) {
        case MODULE_ROUTE_HOST:
                return c->kind == CALLER_HOST;
        case MODULE_ROUTE_PRIVILEGED:
                return c->privileged;
        case MODULE_ROUTE_OWN:
                return caller_may_read_own(c);
        case MODULE_ROUTE_WORKLOAD:
                return c->kind != CALLER_OUTSIDER && !caller_pod_unknown(c);
        case MODULE_ROUTE_PUBLIC:
                return true;
        }
        return false;
}

/* 503 {"error": "zkreg is disabled: <reason>", "code": 503, "module", "state", "reason"}: the
 * one answer of every module's routes while the module does not serve them. A caller the route
 * would refuse gets its refusal, and learns no more than from a running module. */
static int handle_module_standin(struct api_request *req, void *userdata) {
        struct module_instance *mi = userdata;
        const struct module_route *route = module_route_of(mi->module, req);
        const char *state = module_state_to_string(mi->state);
        _cleanup_(caller_done) struct caller c = {};
        _cleanup_(cJSON_Deletep) cJSON *o = NULL;
        _cleanup_free_ char *error = NULL;

        caller_resolve(mi->manager, req, &c);
        if (!caller_in_audience(&c, route ? route->audience : MODULE_ROUTE_PRIVILEGED))
                return caller_reply_forbidden(req, &c, mi->module->name);
        if (asprintf(&error, "%s is %s%s%s", mi->module->name, state, mi->reason ? ": " : "", strempty(mi->reason)) < 0)
                error = NULL;
        if (!error || !(o = cJSON_CreateObject()) || !cJSON_AddStringToObject(o, "error", error) ||
            !cJSON_AddNumberToObject(o, "code", 503) || !cJSON_AddStringToObject(o, "module", mi->module->name) ||
            !cJSON_AddStringToObject(o, "state", state) || !json_add_string_or_null(o, "reason", mi->reason))
                return api_reply_error(req, 500, "out of memory");
        return api_reply_json(req, 503, TAKE_PTR(o));
}

/* Stands in for every route each module owns (struct module.routes): where the module has not
 * registered it, or while the module is not running. */
static int register_module_standins(struct manager *m, struct module_instance *mi) {
        _cleanup_free_ struct api_route *routes = NULL;
        size_t n = 0;

        for (const struct module_route *r = mi->module->routes; r && r->method; r++)
                n++;
        if (n == 0)
                return 0;
        routes = calloc(n, sizeof(*routes));
        if (!routes)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                const struct module_route *r = &mi->module->routes[i];
                bool privileged = r->audience == MODULE_ROUTE_HOST || r->audience == MODULE_ROUTE_PRIVILEGED;
                routes[i] = (struct api_route) { r->method, r->pattern, handle_module_standin, privileged };
        }
        return api_add_standin_routes(m->api, routes, n, mi, module_switched_off);
}

int manager_api_register(struct manager *m) {
        int r = api_add_routes(m->api, core_routes, ELEMENTSOF(core_routes), m, NULL);

        for (unsigned i = 0; r >= 0 && i < m->n_modules; i++)
                r = register_module_standins(m, &m->modules[i]);
        return r;
}

/* ---- /metrics on TCP ---- */

int manager_api_metrics_listen(struct manager *m) {
        const char *want = m->settings.metrics_listen, *have = metrics_listen_address(m->metrics_listener);
        _cleanup_(metrics_listen_freep) struct metrics_listener *l = NULL;
        int r;

        if (streq_ptr(want, have))
                return 0;
        if (!want) {
                log_info("No longer serving /metrics on %s", have);
                m->metrics_listener = metrics_listen_free(m->metrics_listener);
                return 0;
        }
        r = metrics_listen_new(m->event, m->metrics, want, handle_metrics, m, &l);
        if (r == -EADDRINUSE && m->metrics_listener) {
                /* The old socket holds the port (the same port on another address of ours):
                 * give it up, and take it back if the new one cannot be had either. */
                _cleanup_free_ char *old = strdup(have);
                m->metrics_listener = metrics_listen_free(m->metrics_listener);
                r = metrics_listen_new(m->event, m->metrics, want, handle_metrics, m, &l);
                if (r < 0 && old &&
                    metrics_listen_new(m->event, m->metrics, old, handle_metrics, m, &m->metrics_listener) < 0)
                        log_error("Cannot serve /metrics on %s again either", old);
        }
        if (r < 0)
                return log_error_errno(r, "Cannot serve /metrics on %s%s%s: %m", want,
                                       m->metrics_listener ? ", still serving it on " : "",
                                       strempty(metrics_listen_address(m->metrics_listener)));
        metrics_listen_free(m->metrics_listener);
        m->metrics_listener = TAKE_PTR(l);
        log_info("Serving /metrics over HTTP on %s", want);
        return 0;
}

/* ---- core metrics ---- */

/* The pod store's sources (pod_store_replace_source()), each a series from the start so a rate
 * or an alert on one has a zero to start from. */
static const char *const pod_sources[] = { POD_SOURCE_PODS_DIR, POD_SOURCE_APISERVER };

static void collect_core(struct metrics *metrics, void *userdata) {
        struct manager *m = userdata;

        (void) metric_set(m->metric_uptime, manager_uptime_seconds(m));
        for (unsigned i = 0; i < m->n_modules; i++)
                for (int s = 0; s < _MODULE_STATE_MAX; s++)
                        (void) metric_set(m->metric_module_state, m->modules[i].state == s ? 1 : 0,
                                          m->modules[i].module->name, module_state_to_string((enum module_state) s));
        for (size_t i = 0; i < ELEMENTSOF(pod_sources); i++)
                (void) metric_set(m->metric_pods, (double) pod_store_count_source(m->pods, pod_sources[i]),
                                  pod_sources[i]);
}

int manager_api_register_metrics(struct manager *m) {
        static const char *const version_label[] = { "version", NULL };
        static const char *const module_labels[] = { "module", "state", NULL };
        static const char *const source_label[] = { "source", NULL };
        struct metric_family *f;
        int r;

        r = metrics_family(m->metrics, METRIC_GAUGE, "pinion_build_info", "Always 1; the labels say which build runs.",
                           version_label, NULL, 0, &f);
        if (r < 0)
                return r;
        (void) metric_set(f, 1, PACKAGE_VERSION);
        r = metrics_family(m->metrics, METRIC_GAUGE, "pinion_start_time_seconds",
                           "When the agent started, seconds since the Unix epoch.", NULL, NULL, 0, &f);
        if (r < 0)
                return r;
        (void) metric_set(f, (double) m->start_realtime / USEC_PER_SEC);
        r = metrics_family(m->metrics, METRIC_GAUGE, "pinion_uptime_seconds", "Seconds since the agent started.",
                           NULL, NULL, 0, &m->metric_uptime);
        if (r >= 0)
                r = metrics_family(m->metrics, METRIC_GAUGE, "pinion_module_state",
                                   "1 for each module's current state, 0 for the others.", module_labels, NULL, 0,
                                   &m->metric_module_state);
        if (r >= 0)
                r = metrics_family(m->metrics, METRIC_GAUGE, "pinion_pods", "Pods of this node in the store, by source.",
                                   source_label, NULL, 0, &m->metric_pods);
        if (r < 0)
                return r;
        return metrics_add_collector(m->metrics, collect_core, m);
}
