/* SPDX-License-Identifier: MIT */
/* /v1/configs: the list, one config (with ?wait=DURATION: a long-poll until it is present, for
 * init containers and `pinionctl wait-config`), and POST .../refresh. Root and socket-group see
 * every config; a process in a pod sees only the configs its pod declares (pinion.io/configs),
 * found through its cgroup (caller.h); anyone else gets 403. */

#include <stdio.h>

#include "caller.h"
#include "configsync.h"
#include "json.h"
#include "log.h"
#include "manager.h"
#include "parse.h"
#include "strv.h"
#include "waitq.h"

#define WAIT_MAX (10 * USEC_PER_MINUTE)

/* What this view keeps while it serves (cs->api). */
struct configsync_api {
        struct waitq *waiters; /* ?wait= long-polls, keyed by config name */
        struct api_routes *routes;
};

/* The config became present: every waiter gets it. */
static int on_wake(struct api_request *req, const char *name, uint64_t cookie, void *userdata) {
        struct bundle *b = configsync_find(userdata, name);
        cJSON *o = b ? bundle_to_json(b) : NULL;
        if (o)
                (void) api_reply_json(req, 200, o);
        else
                (void) api_reply_error(req, b ? 500 : 404, b ? "out of memory" : "config %s is no longer configured", name);
        return 1;
}

static void on_wait_timeout(struct api_request *req, const char *name, usec_t wait, void *userdata) {
        const struct bundle *b = configsync_find(userdata, name);
        const char *error = b ? b->last_error : NULL;
        (void) api_reply_error(req, 504, "config %s is not present after %.1fs%s%s", name, (double) wait / USEC_PER_SEC,
                               error ? ": " : "", strempty(error));
}

static void configsync_api_free(struct configsync *cs);

/* The long-polls follow the bundles: answered once one is present, refused when it goes; the
 * routes go with the module. */
static void on_configsync_event(struct configsync *cs, enum configsync_event event, struct bundle *b,
                                void *userdata) {
        struct configsync_api *api = userdata;

        switch (event) {
        case CONFIGSYNC_EVENT_BUNDLE_CHANGED:
                if (b->present)
                        waitq_wake(api->waiters, b->name);
                break;
        case CONFIGSYNC_EVENT_BUNDLE_REMOVED:
                waitq_fail(api->waiters, b->name, 404, "config %s: config is no longer configured", b->name);
                break;
        case CONFIGSYNC_EVENT_BUNDLE_STOPPED:
                waitq_fail(api->waiters, b->name, 503, "config %s: the config module is stopping", b->name);
                break;
        case CONFIGSYNC_EVENT_STOPPED:
                configsync_api_free(cs);
                break;
        }
}

static struct configsync *api_configsync(struct module_instance *mi) {
        struct configsync *cs = mi->data;
        return cs && cs->started ? cs : NULL;
}

/* The configs the caller may see (caller_may_read_own() holds): NULL in *ret_names means all
 * (root and socket-group, also inside a pod); a pod's processes see the configs their pod
 * declares (pinion.io/configs). */
static int caller_configs(const struct caller *c, char ***ret_names) {
        *ret_names = NULL;
        if (c->privileged)
                return 0;
        if (configsync_pod_configs(c->pod, ret_names) < 0)
                return -ENOMEM;
        if (!*ret_names && strv_extend(ret_names, "") < 0) /* declared none: an empty list, not "all" */
                return -ENOMEM;
        return 0;
}

static bool may_see(char *const *allowed, const char *name) {
        return !allowed || strv_contains(allowed, name);
}

/* The configs the caller may see into o's "configs" array. */
static int add_configs(cJSON *o, const struct configsync *cs, char *const *allowed) {
        cJSON *list = cJSON_AddArrayToObject(o, "configs");

        if (!list)
                return -ENOMEM;
        for (size_t i = 0; cs && i < cs->n_bundles; i++) {
                const struct bundle *b = cs->bundles[i];
                if (!may_see(allowed, b->name))
                        continue;
                cJSON *item = bundle_to_json(b);
                if (!item || !cJSON_AddItemToArray(list, item)) {
                        cJSON_Delete(item);
                        return -ENOMEM;
                }
        }
        return 0;
}

/* One pod that declares configs, and the "configs" gate's answer for it. */
static cJSON *pod_wait_to_json(struct configsync *cs, const struct pod *p, const char *declared) {
        _cleanup_(cJSON_Deletep) cJSON *po = cJSON_CreateObject();
        _cleanup_free_ char *reason = NULL, *id = NULL;
        int r = configsync_gate_check(cs, p, &reason);

        if (!po || asprintf(&id, "%s/%s", p->namespace, p->name) < 0)
                return NULL;
        cJSON_AddStringToObject(po, "pod", id);
        cJSON_AddStringToObject(po, "uid", p->uid);
        cJSON_AddStringToObject(po, "configs", declared);
        cJSON_AddBoolToObject(po, "ready", r > 0);
        json_add_string_or_null(po, "reason", r > 0 ? NULL : reason ? reason : strerror(-r));
        return TAKE_PTR(po);
}

/* For operators: which pods wait for which configs (the "configs" pod gate), in o's "pods". */
static int add_waiting_pods(cJSON *o, struct configsync *cs, struct pod_store *store) {
        cJSON *pods = cJSON_AddArrayToObject(o, "pods");
        _cleanup_free_ struct pod **all = NULL;
        size_t n = 0;

        if (!pods || pod_store_list(store, &all, &n) < 0)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                const char *declared = pod_annotation(all[i], CONFIGSYNC_ANNOTATION);
                if (isempty(declared))
                        continue;
                cJSON *po = pod_wait_to_json(cs, all[i], declared);
                if (!po || !cJSON_AddItemToArray(pods, po)) {
                        cJSON_Delete(po);
                        return -ENOMEM;
                }
        }
        return 0;
}

static int handle_list(struct api_request *req, void *userdata) {
        struct module_instance *mi = userdata;
        struct configsync *cs = api_configsync(mi);
        _cleanup_strv_free_ char **allowed = NULL;
        _cleanup_(caller_done) struct caller c = {};
        _cleanup_(cJSON_Deletep) cJSON *o = NULL;

        caller_resolve(mi->manager, req, &c);
        if (!caller_may_read_own(&c))
                return caller_reply_forbidden(req, &c, "configs");
        if (caller_configs(&c, &allowed) < 0 || !(o = cJSON_CreateObject()) || add_configs(o, cs, allowed) < 0 ||
            !cJSON_AddBoolToObject(o, "running", cs != NULL) ||
            (!allowed && cs && add_waiting_pods(o, cs, mi->manager->pods) < 0))
                return api_reply_error(req, 500, "out of memory");
        return api_reply_json(req, 200, TAKE_PTR(o));
}

static int handle_get(struct api_request *req, void *userdata) {
        struct module_instance *mi = userdata;
        struct configsync *cs = api_configsync(mi);
        const char *name = api_request_param(req, 0), *wait_arg = api_request_query(req, "wait");
        _cleanup_strv_free_ char **allowed = NULL;
        _cleanup_(caller_done) struct caller c = {};
        struct bundle *b;
        usec_t wait = 0;

        if (wait_arg && (parse_duration(wait_arg, &wait) < 0 || wait > WAIT_MAX))
                return api_reply_error(req, 400, "wait: expected a duration of at most 10m (e.g. 30s), got '%s'", wait_arg);
        caller_resolve(mi->manager, req, &c);
        if (!caller_may_read_own(&c))
                return caller_reply_forbidden(req, &c, "configs");
        if (caller_configs(&c, &allowed) < 0)
                return api_reply_error(req, 500, "out of memory");
        if (!may_see(allowed, name))
                return api_reply_error(req, 403, "config %s is not declared by the caller's pod (pinion.io/configs)", name);
        if (!cs)
                return api_reply_error(req, 503, "the config module is not running");
        b = configsync_find(cs, name);
        if (!b)
                return api_reply_error(req, 404, "config %s is not configured on this node (no [config.%s])", name, name);
        if (b->present || wait == 0) {
                cJSON *o = bundle_to_json(b);
                return o ? api_reply_json(req, 200, o) : api_reply_error(req, 500, "out of memory");
        }

        return waitq_hold(cs->api->waiters, req, name, 0, wait);
}

static int handle_refresh(struct api_request *req, void *userdata) {
        struct module_instance *mi = userdata;
        struct configsync *cs = api_configsync(mi);
        const char *name = api_request_param(req, 0);
        struct bundle *b;
        cJSON *o;

        if (!cs)
                return api_reply_error(req, 503, "the config module is not running");
        b = configsync_find(cs, name);
        if (!b)
                return api_reply_error(req, 404, "config %s is not configured on this node (no [config.%s])", name, name);
        bundle_refresh(b, "API");
        o = cJSON_CreateObject();
        if (!o || !cJSON_AddStringToObject(o, "name", b->name) || !cJSON_AddBoolToObject(o, "queued", true) ||
            !cJSON_AddStringToObject(o, "state", bundle_state_to_string(b->state))) {
                cJSON_Delete(o);
                return api_reply_error(req, 500, "out of memory");
        }
        return api_reply_json(req, 202, o);
}

static int configsync_api_new(struct configsync *cs, sd_event *event) {
        /* Init containers of every pod that declares a config may wait for it at once. */
        static const struct waitq_ops ops = { .what = "config", .wake = on_wake, .expire = on_wait_timeout };
        static const struct waitq_limits limits = { .per_key = 512, .total = 1000 };
        _cleanup_free_ struct configsync_api *api = calloc(1, sizeof(*api));
        int r;

        if (!api)
                return -ENOMEM;
        r = waitq_new(event, &ops, &limits, cs, &api->waiters);
        if (r < 0)
                return r;
        r = configsync_add_observer(cs, on_configsync_event, api);
        if (r < 0) {
                waitq_free(api->waiters);
                return r;
        }
        cs->api = TAKE_PTR(api);
        return 0;
}

/* Long-polls still waiting get 503 (none do: each bundle's went with it). */
static void configsync_api_free(struct configsync *cs) {
        struct configsync_api *api = cs->api;

        if (!api)
                return;
        configsync_remove_observer(cs, on_configsync_event, api);
        api_routes_free(api->routes);
        waitq_free(api->waiters);
        cs->api = mfree(api);
}

int configsync_api_register(struct module_instance *mi) {
        static const struct api_route routes[] = {
                { "GET", "/v1/configs", handle_list, false },
                { "GET", "/v1/configs/{}", handle_get, false },
                { "POST", "/v1/configs/{}/refresh", handle_refresh, true },
        };
        struct configsync *cs = mi->data;
        int r;

        if (!cs->api) {
                r = configsync_api_new(cs, mi->manager->event);
                if (r < 0)
                        return r;
        }
        if (cs->api->routes || !mi->manager->api)
                return 0;
        return api_add_routes(mi->manager->api, routes, ELEMENTSOF(routes), mi, &cs->api->routes);
}
