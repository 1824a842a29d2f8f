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

#define WAIT_MAX (10 * USEC_PER_MINUTE)

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

void configsync_waiters_wake(struct bundle *b) {
        waitq_wake(b->cs->waiters, b->name);
}

void configsync_waiters_fail(struct bundle *b, unsigned status, const char *why) {
        waitq_fail(b->cs->waiters, b->name, status, "config %s: %s", b->name, why);
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
        const char *list = pod_annotation(c->pod, CONFIGSYNC_ANNOTATION);
        if (strv_split(strempty(list), ", \t", ret_names) < 0)
                return -ENOMEM;
        if (!*ret_names && strv_extend(ret_names, "") < 0) /* declared none: an empty list, not "all" */
                return -ENOMEM;
        return 0;
}

static bool may_see(char *const *allowed, const char *name) {
        return !allowed || strv_contains(allowed, name);
}

static int handle_list(struct api_request *req, void *userdata) {
        struct module_instance *mi = userdata;
        struct configsync *cs = api_configsync(mi);
        _cleanup_strv_free_ char **allowed = NULL;
        _cleanup_(caller_done) struct caller c = {};
        _cleanup_(cJSON_Deletep) cJSON *o = NULL;
        cJSON *list;

        caller_resolve(mi->manager, req, &c);
        if (!caller_may_read_own(&c))
                return caller_reply_forbidden(req, &c, "configs");
        if (caller_configs(&c, &allowed) < 0 || !(o = cJSON_CreateObject()))
                return api_reply_error(req, 500, "out of memory");
        if (!(list = cJSON_AddArrayToObject(o, "configs")))
                return api_reply_error(req, 500, "out of memory");
        cJSON_AddBoolToObject(o, "running", cs != NULL);
        for (size_t i = 0; cs && i < cs->n_bundles; i++) {
                const struct bundle *b = cs->bundles[i];
                if (!may_see(allowed, b->name))
                        continue;
                cJSON *item = bundle_to_json(b);
                if (!item || !cJSON_AddItemToArray(list, item)) {
                        cJSON_Delete(item);
                        return api_reply_error(req, 500, "out of memory");
                }
        }
        if (!allowed && cs) {
                /* For operators: which pods wait for which configs (the "configs" pod gate). */
                cJSON *pods = cJSON_AddArrayToObject(o, "pods");
                struct pod **all = NULL;
                size_t n = 0;
                if (!pods || pod_store_list(mi->manager->pods, &all, &n) < 0)
                        return api_reply_error(req, 500, "out of memory");
                for (size_t i = 0; i < n; i++) {
                        const char *declared = pod_annotation(all[i], CONFIGSYNC_ANNOTATION);
                        _cleanup_free_ char *reason = NULL, *id = NULL;
                        if (isempty(declared))
                                continue;
                        int r = configsync_gate_check(cs, all[i], &reason);
                        cJSON *po = cJSON_CreateObject();
                        if (!po || asprintf(&id, "%s/%s", all[i]->namespace, all[i]->name) < 0 ||
                            !cJSON_AddItemToArray(pods, po)) {
                                cJSON_Delete(po);
                                free(all);
                                return api_reply_error(req, 500, "out of memory");
                        }
                        cJSON_AddStringToObject(po, "pod", id);
                        cJSON_AddStringToObject(po, "uid", all[i]->uid);
                        cJSON_AddStringToObject(po, "configs", declared);
                        cJSON_AddBoolToObject(po, "ready", r > 0);
                        json_add_string_or_null(po, "reason", r > 0 ? NULL : reason ? reason : strerror(-r));
                }
                free(all);
        }
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

        return waitq_hold(cs->waiters, req, name, 0, wait);
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

int configsync_api_register(struct module_instance *mi) {
        static const struct api_route routes[] = {
                { "GET", "/v1/configs", handle_list, false },
                { "GET", "/v1/configs/{}", handle_get, false },
                { "POST", "/v1/configs/{}/refresh", handle_refresh, true },
        };
        /* Init containers of every pod that declares a config may wait for it at once. */
        static const struct waitq_ops ops = { .what = "config", .wake = on_wake, .expire = on_wait_timeout };
        static const struct waitq_limits limits = { .per_key = 512, .total = 1000 };
        struct configsync *cs = mi->data;
        int r;

        if (!cs->waiters) {
                r = waitq_new(mi->manager->event, &ops, &limits, cs, &cs->waiters);
                if (r < 0)
                        return r;
        }
        if (cs->routes || !mi->manager->api)
                return 0;
        return api_add_routes(mi->manager->api, routes, ELEMENTSOF(routes), mi, &cs->routes);
}
