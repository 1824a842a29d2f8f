/* SPDX-License-Identifier: MIT */
/* /v1/registrations: the registrations (root and socket-group: all; a process of a pod on this
 * node: its pod's; anyone else 403), and POST .../drain and .../undrain (privileged), which
 * answer only once the drain file holds the new state (500 and no change if it cannot). */

#include <stdio.h>
#include <string.h>

#include "caller.h"
#include "json.h"
#include "manager.h"
#include "registry.h"
#include "zk-session.h"
#include "zkreg.h"

/* The routes go once the module has stopped (zkreg_stopped): they look the module up through
 * its instance, which outlives them. */
static struct zkreg *zkreg_from_api(void *userdata) {
        struct module_instance *mi = userdata;
        struct zkreg *z = mi->data;
        return z && z->registry ? z : NULL;
}

/* Drops the entries of other pods than uid from the list. */
static void registrations_keep_pod(cJSON *list, const char *uid) {
        cJSON *item = list ? list->child : NULL;
        while (item) {
                cJSON *next = item->next;
                const cJSON *u = cJSON_GetObjectItemCaseSensitive(item, "uid");
                if (!cJSON_IsString(u) || !streq(u->valuestring, uid))
                        cJSON_Delete(cJSON_DetachItemViaPointer(list, item));
                item = next;
        }
}

static int api_registrations(struct api_request *req, void *userdata) {
        struct zkreg *z = zkreg_from_api(userdata);
        struct module_instance *mi = userdata;
        _cleanup_(caller_done) struct caller c = {};
        cJSON *list = NULL, *body;
        char sid[32];
        int r;

        /* Privileged callers see every registration; a pod of this node its own only, as with
         * /v1/configs (a pod must not enumerate its neighbours' names and endpoints). */
        caller_resolve(mi->manager, req, &c);
        if (!caller_may_read_own(&c))
                return caller_reply_forbidden(req, &c, "registrations");
        if (!z)
                return api_reply_error(req, 503, "ZooKeeper registration is not running");
        r = registry_list_json(z->registry, &list);
        if (r < 0)
                return api_reply_error(req, 500, "cannot list registrations: %s", strerror(-r));
        if (!c.privileged)
                registrations_keep_pod(list, c.pod_uid);
        body = cJSON_CreateObject();
        snprintf(sid, sizeof(sid), "0x%llx", (unsigned long long) zk_session_id(z->session));
        if (!body || !cJSON_AddItemToObject(body, "registrations", list) ||
            !cJSON_AddStringToObject(body, "session", zk_session_state_to_string(zk_session_state(z->session))) ||
            !cJSON_AddStringToObject(body, "session_id", sid) ||
            !cJSON_AddBoolToObject(body, "drained", registry_drained(z->registry)) ||
            !json_add_time(body, "drained_since", registry_drained(z->registry) ? z->drain.since : 0) ||
            (z->drain_error && !cJSON_AddStringToObject(body, "drain_error", z->drain_error))) {
                if (body && !cJSON_GetObjectItem(body, "registrations"))
                        cJSON_Delete(list);
                cJSON_Delete(body);
                return api_reply_error(req, 500, "out of memory");
        }
        return api_reply_json(req, 200, body);
}

static int api_drain(struct api_request *req, void *userdata) {
        struct zkreg *z = zkreg_from_api(userdata);
        _cleanup_free_ char *error = NULL;
        cJSON *body;
        int r;

        if (!z)
                return api_reply_error(req, 503, "ZooKeeper registration is not running");
        /* Durable before it acts: a restart must find the node as the operator left it. */
        r = zkreg_set_drained(z, true, &error);
        if (r < 0)
                return api_reply_error(req, 500, "%s", error ? error : strerror(-r));
        size_t n = registry_drain(z->registry);
        body = cJSON_CreateObject();
        if (!body || !cJSON_AddNumberToObject(body, "stopping", (double) n) ||
            !cJSON_AddNumberToObject(body, "drain_delay_ms", (double) (z->settings->drain_delay / USEC_PER_MSEC))) {
                cJSON_Delete(body);
                return api_reply_error(req, 500, "out of memory");
        }
        return api_reply_json(req, 200, body);
}

static int api_undrain(struct api_request *req, void *userdata) {
        struct zkreg *z = zkreg_from_api(userdata);
        _cleanup_free_ char *error = NULL;
        cJSON *body;
        int r;

        if (!z)
                return api_reply_error(req, 503, "ZooKeeper registration is not running");
        r = zkreg_set_drained(z, false, &error);
        if (r < 0)
                return api_reply_error(req, 500, "%s", error ? error : strerror(-r));
        registry_undrain(z->registry);
        body = cJSON_CreateObject();
        if (!body || !cJSON_AddBoolToObject(body, "drained", false)) {
                cJSON_Delete(body);
                return api_reply_error(req, 500, "out of memory");
        }
        return api_reply_json(req, 200, body);
}

int zkreg_api_register(struct module_instance *mi) {
        static const struct api_route routes[] = {
                { "GET", "/v1/registrations", api_registrations, false },
                { "POST", "/v1/registrations/drain", api_drain, true },
                { "POST", "/v1/registrations/undrain", api_undrain, true },
        };
        struct zkreg *z = mi->data;

        if (z->routes || !mi->manager->api)
                return 0;
        return api_add_routes(mi->manager->api, routes, ELEMENTSOF(routes), mi, &z->routes);
}
